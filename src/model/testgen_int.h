/*
 * testgen_int.h - what the test-model writers share (testgen.c for llama,
 * testgen_arch.c for qwen2/qwen3/bert): one xorshift64* stream and a tensor
 * adder that fills center + amp * U(-1, 1), quantizes to the tensor's type
 * and keeps the buffer alive until the file is written.
 */
#ifndef PARLEY_MODEL_TESTGEN_INT_H
#define PARLEY_MODEL_TESTGEN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef struct testgen_gen {
  gguf_writer *w;
  uint64_t rng;       /* xorshift64* state, never 0 */
  void **bufs;        /* tensor data the writer borrows until written */
  size_t n_bufs, cap_bufs;
  const char *bad;    /* a tensor written one row (or column) too large, or NULL */
  const char *missing; /* a tensor left out of the file, or NULL */
} testgen_gen;

/* Starts a generator: a writer and an RNG seeded from seed and salt. */
int testgen_gen_init(testgen_gen *s, uint64_t seed, uint64_t salt);
/* Writes the file (when path is not NULL) and frees everything. */
int testgen_gen_finish(testgen_gen *s, const char *path);
/* Adds a tensor of n_rows x n_cols (n_rows 0: 1-D of n_cols) with values
 * center + amp * U(-1, 1), stored as `type`. */
int testgen_add_tensor(testgen_gen *s, const char *name, uint32_t type, int64_t n_cols, int64_t n_rows, float center,
                       float amp);

/* A 3-D tensor of n_mat matrices of n_rows x n_cols (GGUF dims [n_cols,
 * n_rows, n_mat], the layout of expert tensors); n_mat 0 is
 * testgen_add_tensor. A `bad` name gets one matrix too many. */
int testgen_add_tensor3(testgen_gen *s, const char *name, uint32_t type, int64_t n_cols, int64_t n_rows,
                        int64_t n_mat, float center, float amp);

#endif
