/*
 * ops_avx2.h - AVX2 + FMA twins of some ops.h functions (ops_avx2.c says
 * how they differ), for ops.c to call after checking kern_avx2_fast().
 * x86-64 only; internal to src/kernels/.
 */
#ifndef PARLEY_KERNELS_OPS_AVX2_H
#define PARLEY_KERNELS_OPS_AVX2_H

#include <stdint.h>

#include "kernels/ops.h"

#if defined(__x86_64__)
void ops_avx2_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
void ops_avx2_add_rmsnorm(float *x, const float *d, float *y, const float *w, int64_t n, float eps);
void ops_avx2_silu(float *x, int64_t n);
void ops_avx2_swiglu(float *gate, const float *up, int64_t n);
/* n_rot <= 512 (ops.c checks) */
void ops_avx2_rope_cached(const ops_rope *r, const float *cs, float *x, int32_t n_head, int32_t head_dim);
void ops_avx2_add(float *y, const float *x, int64_t n);
#endif

#endif
