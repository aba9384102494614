/*
 * testgen_qwen35.h - the qwen35 / qwen35moe / qwen3next part of
 * model_testgen_arch_write (testgen_qwen35.c), and the expert writer of
 * testgen_arch.c it shares. Internal to src/model/testgen*.c.
 */
#ifndef PARLEY_MODEL_TESTGEN_QWEN35_H
#define PARLEY_MODEL_TESTGEN_QWEN35_H

#include <stdbool.h>

#include "model/testgen_arch.h"
#include "model/testgen_int.h"

/* True for the architectures testgen_qwen35_write generates. */
bool testgen_qwen35_arch(enum model_arch a);
/* Adds g's delta-net keys (ssm.*, full_attention_interval,
 * rope.dimension_sections) and all its tensors to s, after the common keys
 * (testgen_arch.c writes them, the experts' included). */
int testgen_qwen35_write(testgen_gen *s, const model_testgen_arch *g);
/* Layer i's mixture-of-experts tensors in the converter's order (router,
 * experts, shared expert); mb: a "more bits" layer of a mixed file.
 * Defined in testgen_arch.c. */
int testgen_add_experts(testgen_gen *s, const model_testgen_arch *g, int i, int mb);

#endif
