/*
 * attn.h - the inner step of causal prompt attention (kernels/attn.c): one
 * tile of keys and values against a block of KERN_ATT_COLS query rows, with
 * an online softmax, in a transposed layout that keeps every reduction
 * vertical (no horizontal sums):
 *
 *   S^T[p][i] = sum_d K[p][d] Q^T[d][i]             (i: query row of the block)
 *   m'[i] = max(m[i], max_{p < lim[i]} S^T[p][i]),   c[i] = exp(m[i] - m'[i])
 *   P^T[p][i] = exp(S^T[p][i] - m'[i]) for p < lim[i], else 0
 *   l[i] = l[i] c[i] + sum_p P^T[p][i]
 *   O^T[d][i] = O^T[d][i] c[i] + sum_p V^T[d][p] P^T[p][i]
 *
 * The caller (src/model/attn.c) converts a tile's keys and values to f32
 * once and runs it against every block of query rows that reads it (all
 * tokens of a run times all query heads sharing the KV head), so the F16 or
 * Q8_0 conversion is paid once per tile instead of once per query row.
 * After the last tile, out[i][d] = O^T[d][i] / l[i].
 *
 * Also the vectorized exp the attention and the SwiGLU share (kern_exp_f32;
 * its accuracy is in attn.c and tested in tests/unit/test_attn.c).
 */
#ifndef PARLEY_KERNELS_ATTN_H
#define PARLEY_KERNELS_ATTN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Query rows per block (two AVX2 vectors of f32). */
#define KERN_ATT_COLS 16
/* The running maximum a block starts from: finite, so that a column with no
 * visible position yet gives exp(m - m') = exp(0) = 1, not NaN. */
#define KERN_ATT_M0 (-3.0e38f)

/* Memory a tile step prefetches while it computes: the next tile's keys
 * and values, so that they come from DRAM during this tile's products
 * instead of stalling the next tile's conversion (decode at long
 * contexts reads the whole KV cache once per token; docs/runtime.md).
 * Position p of the tile stands for the bytes [p * row_bytes, (p + 1) *
 * row_bytes) after k and after v (a key row; of a transposed value tile,
 * its share of the tile), and the step prefetches those of the positions
 * it scores: all of them when this tile is full. */
typedef struct kern_att_pf {
  const void *k, *v;
  int64_t row_bytes;
} kern_att_pf;

/* One tile step for one block (see the header comment). Shapes, all f32:
 *   qt  [hd][KERN_ATT_COLS]  the block's queries, transposed and already
 *                            scaled; unused columns zero
 *   k   [np][hd]             key rows of the tile's np positions
 *   vt                       values: (d, p) at vt[d * ldv + p * vps], a
 *                            transposed tile (ldv >= np, vps 1: the F16
 *                            and F32 caches) or rows of positions (ldv 1,
 *                            vps hd: dequantized Q8_0 rows); the same
 *                            arithmetic either way
 *   lim [KERN_ATT_COLS]      visible positions of the tile per column
 *                            (p < lim[i]; <= 0: none, >= np: all); unused
 *                            columns 0
 *   m, l [KERN_ATT_COLS]     running max (start KERN_ATT_M0) and sum (0)
 *   ot  [hd][KERN_ATT_COLS]  running output, transposed (start 0)
 *   st  [np][KERN_ATT_COLS]  scratch
 *   pf                       NULL, or what to prefetch (kern_att_pf)
 * Positions no column sees are neither multiplied nor read. */
void kern_attn_tile(const float *qt, const float *k, const float *vt, int64_t ldv, int64_t vps, int64_t np, int64_t hd,
                    const int32_t *lim, float *m, float *l, float *ot, float *st, const kern_att_pf *pf);

/* n IEEE halves to f32 (F16C when the CPU has it). */
void kern_f16_to_f32(const uint16_t *src, float *dst, int64_t n);

/* n f32 to IEEE halves, rounded to nearest even after saturating at
 * +-65504 (so a KV cache never holds an infinity; NaN stays NaN): exactly
 * f32_to_fp16 of the clamped value, F16C when the CPU has it. */
void kern_f32_to_f16_sat(const float *src, uint16_t *dst, int64_t n);

/* np rows of hd (a multiple of 32) Q8_0 values, row_bytes apart, to f32
 * rows out[np][hd] (each value q * d exactly, as ref_dequant_q8_0). */
void kern_q8_0_rows_f32(const void *rows, size_t row_bytes, int64_t np, int64_t hd, float *out);

/* y[i] = exp(x[i]) by the polynomial of attn.c (not libm): relative error
 * below 4e-7 for x in [-87, 88]; 0 for x < -87.3 (and -inf); inputs above
 * 88.3 give exp(88.3). y may alias x. */
void kern_exp_f32(const float *x, float *y, int64_t n);

/* True when the AVX2/FMA/F16C forms run: kern_attn_tile's body, the
 * conversions above and ops.c's element-wise ops (false: the plain C ones,
 * also while the reference kernels are forced). */
bool kern_avx2_fast(void);

/* True when, beyond that, the avx512-* variant runs: kern_attn_tile takes
 * its 512-bit body (one register per block row of 16 query columns). */
bool kern_x512_fast(void);

#endif
