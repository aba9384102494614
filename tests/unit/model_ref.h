/*
 * model_ref.h - what the model tests share to hold the C forward pass
 * against the numpy references in tools/ (ref_llama.py, ref_qwen.py,
 * ref_bert.py, ...: independent float64 implementations reading the same GGUF
 * file): the check that python3 with numpy is there, running a reference
 * and reading back its floats or tokens, the C side's logits through a fresh
 * context, and the error measure; and writing a random-weight model into
 * the test's folder; the greedy-continuation check. Used by every
 * tests/unit/test_model*.c.
 */
#ifndef PARLEY_TEST_MODEL_REF_H
#define PARLEY_TEST_MODEL_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "model/testgen.h"
#include "model/testgen_arch.h"

#define REF_PY "/usr/bin/python3"

/* Writes g (llama: testgen.h; qwen2/qwen3/bert: testgen_arch.h) as
 * test_tmpdir()/NAME.gguf, its path in path[cap]. Returns path, or NULL with
 * a failure recorded naming the writer's error. */
const char *ref_write_llama(const model_testgen *g, const char *name, char *path, size_t cap);
const char *ref_write_arch(const model_testgen_arch *g, const char *name, char *path, size_t cap);
/* Writes g as name (ref_write_arch) and opens it: model_open's code, the
 * model freed; 1 when the file could not be written. For the catalogues of
 * malformed files. */
int ref_open_arch(const model_testgen_arch *g, const char *name);

/* 1 ready, 0 skip (no numpy), -1 failed (script missing: a failure is
 * recorded). */
int ref_py_ready(const char *script);

/* In a test: returns when script is missing, skips without numpy. */
#define NEED_REF_PY(script)                                              \
  do {                                                                   \
    int r_ = ref_py_ready(script);                                       \
    if (r_ < 0) return;                                                  \
    if (r_ == 0) TEST_SKIP("/usr/bin/python3 with numpy not available"); \
  } while (0)

/* toks as "1,2,3" into out. */
void ref_toks_str(const int32_t *t, int n, char *out, size_t cap);

/* Runs cmd, then reads exactly n floats from the file it wrote at path
 * into a malloc'd array; NULL when the command fails or the file holds
 * another count. */
float *ref_run_floats(const char *cmd, const char *path, size_t n);
/* The same without a command: exactly n floats from path, or NULL. */
float *ref_read_floats(const char *path, size_t n);

/* script's logits [n][n_vocab] for toks (kv_f16: its cache rounded to f16
 * as the C side's); NULL on failure. */
float *ref_logits(const char *script, const char *model_path, const int32_t *toks, int n, int64_t n_vocab,
                  bool kv_f16);

/* script's greedy continuation of n_gen tokens into out; returns how many
 * were parsed, -1 when it failed. */
int ref_greedy(const char *script, const char *model_path, const int32_t *toks, int n, int n_gen, bool kv_f16,
               int32_t *out);

/* The C logits [n][n_vocab] of toks through a fresh context in one call
 * (kv cache type, threads, n_batch 0 = default), malloc'd; *n_vocab_out
 * gets n_vocab. NULL (a failure recorded) on error. */
float *ref_c_logits(const char *path, const int32_t *toks, int n, enum model_kv_type kv, int n_threads,
                    int64_t n_batch, int64_t *n_vocab_out);

/* A context on m with n_seq sequences, n_batch (0 = default), cache type
 * kv, two threads; NULL (a failure recorded) on error. */
model_ctx *ref_new_ctx(model *m, int32_t n_seq, int64_t n_batch, enum model_kv_type kv);

/* The C logits [n][n_vocab] of toks fed one token per model_decode call
 * through a fresh one-sequence context (the decode path: the recurrent
 * families' one-step state updates), malloc'd; NULL (a failure recorded). */
float *ref_one_token_logits(model *m, const int32_t *toks, int n, enum model_kv_type kv);

/* The one-token path of the model at path (F32 cache) against script's
 * logits of toks: prints the NMSE under name and expects it below tol. */
void ref_check_one_token(const char *script, const char *path, const char *name, const int32_t *toks, int n,
                         double tol);

/* The model at path runs A (na tokens) as sequence 0 and B (nb <= na) as
 * sequence 1 interleaved token by token in one model_decode, batches of 5,
 * context n_ctx, F32 cache; every row is held to script's logits of its
 * sequence alone (worst row NMSE below 1e-8), printed under name. */
void ref_check_interleaved(const char *script, const char *path, const char *name, const int32_t *A, int na,
                           const int32_t *B, int nb, int64_t n_ctx);

/* sum((a-b)^2) / sum(b^2) (the plain sum when b is all zero). */
double ref_nmse(const float *a, const float *b, size_t n);

/* C (cache type kv, n_threads) against script (its cache rounded the same
 * way) on all logits of toks; prints and returns the NMSE, -1 (a failure
 * recorded) when either side failed. path must contain a '/'. */
double ref_compare(const char *script, const char *path, const int32_t *toks, int n, enum model_kv_type kv,
                   int n_threads);

/* The C model at path (2 threads, an F16 cache when kv_f16, else F32)
 * continues prompt[n_prompt] greedily for n_gen (<= REF_GREEDY_MAX) tokens,
 * one model_forward per token through the cache, against script's greedy
 * loop (which recomputes the whole sequence, its cache rounded the same
 * way); prints how many leading tokens agree and records a failure unless
 * all do. */
/* The C model at path computes the logits of toks[n] the same bit for bit
 * in one batch (2 threads), in steps of 5 (1 thread) and one token per
 * model_forward through the cache (2 threads), on a kv cache: prints how
 * many rows agree (as `name`) and records a failure unless all do. */
void ref_check_batch(const char *path, const int32_t *toks, int n, enum model_kv_type kv, const char *name);

enum { REF_GREEDY_MAX = 64 };
void ref_check_greedy(const char *script, const char *path, const int32_t *prompt, int n_prompt, int n_gen,
                      bool kv_f16);

#endif
