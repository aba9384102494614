/*
 * testgen_gemma4.h - the gemma4 part of model_testgen_arch_write
 * (testgen_gemma4.c). Internal to src/model/testgen*.c.
 */
#ifndef PARLEY_MODEL_TESTGEN_GEMMA4_H
#define PARLEY_MODEL_TESTGEN_GEMMA4_H

#include "model/testgen_arch.h"
#include "model/testgen_int.h"

/* Adds g's gemma4 keys (head widths of the sliding layers, shared KV
 * layers, per-layer embedding width, the sliding RoPE base, per-layer
 * feed-forward widths) and all its tensors to s, after the common keys. */
int testgen_gemma4_write(testgen_gen *s, const model_testgen_arch *g);

#endif
