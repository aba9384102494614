/*
 * testgen_dense.h - the olmo2 / glm4 / nomic-bert part of model_testgen_arch_write
 * (testgen_dense.c). Internal to src/model/testgen*.c.
 */
#ifndef PARLEY_MODEL_TESTGEN_DENSE_H
#define PARLEY_MODEL_TESTGEN_DENSE_H

#include <stdbool.h>

#include "model/testgen_arch.h"
#include "model/testgen_int.h"

/* True for the architectures testgen_dense_write generates. */
bool testgen_dense_arch(enum model_arch a);
/* Adds g's tensors to s, after the common keys (testgen_arch.c writes
 * them all, rope.dimension_count included). */
int testgen_dense_write(testgen_gen *s, const model_testgen_arch *g);

#endif
