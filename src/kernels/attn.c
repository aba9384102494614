/*
 * attn.c - the attention tile step (attn.h) in plain C, in AVX2 + FMA and
 * in AVX-512 (the avx512 variant: one register per block row, 16-row
 * register blocks), an F16 -> f32 row conversion, and the vectorized exp.
 *
 * Why a kernel of its own rather than two kern_matmul calls per tile: with
 * the matmul kernels, Q K^T and P V reconverted every F16 key and value
 * once per few query rows, the softmax needed horizontal passes over rows
 * of scores, and P V ran over a whole tile of 128 positions even where
 * the causal mask left a few. Here a tile is converted once by the caller,
 * and both products are outer-product register blocks (6 rows x 16
 * columns, 12 accumulators) over a transposed layout whose reductions are
 * all vertical; positions past the block's last visible one are skipped.
 *
 * exp: x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2 (ln2 split
 * in a hi part exact in 9 bits and a lo part, so n ln2_hi is exact), then
 * exp(r) by its degree-6 Taylor polynomial (truncation error
 * (ln2/2)^7 / 7! / exp(-ln2/2) < 1.7e-7 relative) and 2^n built in the
 * exponent bits. Measured against double exp over [-87, 88] (tests/unit/
 * test_attn.c): max relative error about 2.5e-7 (the test's bound: 4e-7).
 * Below -87.3 (where 2^n would be denormal), -inf and NaN: 0. The C and
 * AVX2 and AVX-512 forms compute the same operations in the same order
 * (tests/unit/test_attn.c holds the three tile steps to the same bits).
 */
#include "kernels/attn.h"

#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/tensor_type.h"

#define C KERN_ATT_COLS

#include "kernels/vexp_x86.h" /* the constants, and exp8 on x86 */

static inline float exp_c(float x) {
  if (!(x >= VEXP_LO)) return 0.0f;
  if (x > VEXP_HI) x = VEXP_HI;
  float n = rintf(x * VEXP_LOG2E);
  float r = fmaf(n, -VEXP_LN2_HI, x);
  r = fmaf(n, -VEXP_LN2_LO, r);
  float p = fmaf(VEXP_P6, r, VEXP_P5);
  p = fmaf(p, r, VEXP_P4);
  p = fmaf(p, r, VEXP_P3);
  p = fmaf(p, r, VEXP_P2);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  int32_t e = ((int32_t)n + 127) << 23;
  float s;
  memcpy(&s, &e, sizeof s);
  return p * s;
}

/* Prefetches the cache lines of [a, b) into the levels below L1 (the
 * products still run from this tile's f32 copies). */
static inline void pf_lines(const char *a, const char *b) {
  for (const char *q = (const char *)((uintptr_t)a & ~(uintptr_t)63); q < b; q += 64) __builtin_prefetch(q, 0, 2);
}

/* Prefetches the slices of positions p..p+n-1 of pf (attn.h). */
static inline void att_prefetch(const kern_att_pf *pf, int64_t p, int64_t n) {
  if (!pf) return;
  const char *k = (const char *)pf->k + p * pf->row_bytes, *v = (const char *)pf->v + p * pf->row_bytes;
  pf_lines(k, k + n * pf->row_bytes);
  pf_lines(v, v + n * pf->row_bytes);
}

static void tile_c(const float *qt, const float *k, const float *vt, int64_t ldv, int64_t vps, int64_t np, int64_t hd,
                   const int32_t *lim, float *m, float *l, float *ot, float *st, const kern_att_pf *pf) {
  int64_t n_eff = 0;
  for (int i = 0; i < C; i++)
    if (lim[i] > n_eff) n_eff = lim[i];
  if (n_eff > np) n_eff = np;
  if (n_eff <= 0) return;
  float mx[C], corr[C], sum[C];
  for (int i = 0; i < C; i++) mx[i] = m[i], sum[i] = 0.0f;
  for (int64_t p = 0; p < n_eff; p++) {
    att_prefetch(pf, p, 1);
    for (int i = 0; i < C; i++) {
      float s = 0.0f;
      for (int64_t d = 0; d < hd; d++) s = fmaf(k[p * hd + d], qt[d * C + i], s);
      if (p >= lim[i]) s = -INFINITY;
      st[p * C + i] = s;
      if (s > mx[i]) mx[i] = s;
    }
  }
  for (int i = 0; i < C; i++) {
    corr[i] = exp_c(m[i] - mx[i]);
    m[i] = mx[i];
  }
  for (int64_t p = 0; p < n_eff; p++)
    for (int i = 0; i < C; i++) {
      float e = exp_c(st[p * C + i] - mx[i]);
      st[p * C + i] = e;
      sum[i] += e;
    }
  for (int i = 0; i < C; i++) l[i] = fmaf(l[i], corr[i], sum[i]);
  for (int64_t d = 0; d < hd; d++)
    for (int i = 0; i < C; i++) {
      float o = ot[d * C + i] * corr[i];
      for (int64_t p = 0; p < n_eff; p++) o = fmaf(vt[d * ldv + p * vps], st[p * C + i], o);
      ot[d * C + i] = o;
    }
}

static inline uint16_t f16_sat_c(float x) {
  if (x > 65504.0f) x = 65504.0f;
  if (x < -65504.0f) x = -65504.0f;
  return f32_to_fp16(x);
}

#if defined(__x86_64__)
/* R (1..6) score rows p..p+R-1 of the block's first NV (1 or 2) vectors
 * of columns: S^T rows into st, masked where the row is past a column's
 * limit (only when masked is set), and folded into the running column
 * maxima mx[0..NV); the same rows of pf prefetched. */
TGT_INL void scores_rows(const int NV, const int R, const float *k, int64_t hd, const float *qt, float *st, int64_t p,
                         bool masked, const __m256i *lim, __m256 *mx, const kern_att_pf *pf) {
  att_prefetch(pf, p, R);
  __m256 a[6][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) a[r][v] = _mm256_setzero_ps();
  const float *kr = k + p * hd;
  for (int64_t d = 0; d < hd; d++) {
    __m256 q[2];
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) q[v] = _mm256_load_ps(qt + d * C + 8 * v);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      __m256 b = _mm256_broadcast_ss(kr + r * hd + d);
#pragma GCC unroll 2
      for (int v = 0; v < NV; v++) a[r][v] = _mm256_fmadd_ps(b, q[v], a[r][v]);
    }
  }
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    __m256i pv = _mm256_set1_epi32((int32_t)(p + r));
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) {
      if (masked) a[r][v] = _mm256_blendv_ps(ninf, a[r][v], _mm256_castsi256_ps(_mm256_cmpgt_epi32(lim[v], pv)));
      _mm256_store_ps(st + (p + r) * C + 8 * v, a[r][v]);
      mx[v] = _mm256_max_ps(mx[v], a[r][v]);
    }
  }
}

/* R (1..6) output rows d..d+R-1, NV vectors of columns: ot = ot * corr +
 * vt P^T over n positions. */
TGT_INL void pv_rows(const int NV, const int R, const float *vt, int64_t ldv, int64_t vps, const float *st, int64_t n,
                     float *ot, int64_t d, const __m256 *corr) {
  __m256 a[6][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) a[r][v] = _mm256_mul_ps(_mm256_load_ps(ot + (d + r) * C + 8 * v), corr[v]);
  const float *vr = vt + d * ldv;
  for (int64_t p = 0; p < n; p++) {
    __m256 s[2];
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) s[v] = _mm256_load_ps(st + p * C + 8 * v);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      __m256 b = _mm256_broadcast_ss(vr + r * ldv + p * vps);
#pragma GCC unroll 2
      for (int v = 0; v < NV; v++) a[r][v] = _mm256_fmadd_ps(b, s[v], a[r][v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) _mm256_store_ps(ot + (d + r) * C + 8 * v, a[r][v]);
}

/* All hd output rows: blocks of 6, then the remainder. */
TGT_INL void pv_all(const int NV, const float *vt, int64_t ldv, const int64_t vps, const float *st, int64_t n,
                    float *ot, int64_t hd, const __m256 *corr) {
  int64_t d = 0;
  for (; d + 6 <= hd; d += 6) pv_rows(NV, 6, vt, ldv, vps, st, n, ot, d, corr);
  switch (hd - d) {
    case 5: pv_rows(NV, 5, vt, ldv, vps, st, n, ot, d, corr); break;
    case 4: pv_rows(NV, 4, vt, ldv, vps, st, n, ot, d, corr); break;
    case 3: pv_rows(NV, 3, vt, ldv, vps, st, n, ot, d, corr); break;
    case 2: pv_rows(NV, 2, vt, ldv, vps, st, n, ot, d, corr); break;
    case 1: pv_rows(NV, 1, vt, ldv, vps, st, n, ot, d, corr); break;
    default: break;
  }
}

/* The tile step on the block's first NV vectors of columns (NV 1 when
 * columns 8..15 see nothing: one token's 8 or fewer query heads while
 * decoding; those columns' state is left as it is). */
TGT_INL void tile_nv(const int NV, const float *qt, const float *k, const float *vt, int64_t ldv, int64_t vps,
                     int64_t n_eff, int64_t n_min, int64_t hd, const int32_t *lim, float *m, float *l, float *ot,
                     float *st, const kern_att_pf *pf) {
  __m256i lv[2];
  __m256 m0[2], mx[2], corr[2], sum[2];
#pragma GCC unroll 2
  for (int v = 0; v < NV; v++) {
    lv[v] = _mm256_loadu_si256((const __m256i *)(lim + 8 * v));
    mx[v] = m0[v] = _mm256_loadu_ps(m + 8 * v);
    sum[v] = _mm256_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 6 <= n_eff; p += 6) scores_rows(NV, 6, k, hd, qt, st, p, p + 6 > n_min, lv, mx, pf);
  switch (n_eff - p) {
    case 5: scores_rows(NV, 5, k, hd, qt, st, p, true, lv, mx, pf); break;
    case 4: scores_rows(NV, 4, k, hd, qt, st, p, true, lv, mx, pf); break;
    case 3: scores_rows(NV, 3, k, hd, qt, st, p, true, lv, mx, pf); break;
    case 2: scores_rows(NV, 2, k, hd, qt, st, p, true, lv, mx, pf); break;
    case 1: scores_rows(NV, 1, k, hd, qt, st, p, true, lv, mx, pf); break;
    default: break;
  }
#pragma GCC unroll 2
  for (int v = 0; v < NV; v++) {
    corr[v] = exp8(_mm256_sub_ps(m0[v], mx[v]));
    _mm256_storeu_ps(m + 8 * v, mx[v]);
  }
  for (p = 0; p < n_eff; p++)
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) {
      __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(st + p * C + 8 * v), mx[v]));
      _mm256_store_ps(st + p * C + 8 * v, e);
      sum[v] = _mm256_add_ps(sum[v], e);
    }
#pragma GCC unroll 2
  for (int v = 0; v < NV; v++) _mm256_storeu_ps(l + 8 * v, _mm256_fmadd_ps(_mm256_loadu_ps(l + 8 * v), corr[v], sum[v]));
  if (vps == 1) /* a constant stride for the transposed tiles (F16, F32): the loop's own pointer steps */
    pv_all(NV, vt, ldv, 1, st, n_eff, ot, hd, corr);
  else
    pv_all(NV, vt, ldv, vps, st, n_eff, ot, hd, corr);
}

/* The 512-bit step: the 16 columns are one register, so a register block
 * is R (up to 16) rows of one vector, and each FMA takes its broadcast
 * key or value straight from memory ({1to16}): 16 accumulators instead of
 * the AVX2 block's 12, half the instructions per flop. Same operations in
 * the same order per column as tile_c (same bits). */

/* R score rows p..p+R-1: as scores_rows. */
TGT5_INL void scores_x512(const int R, const float *k, int64_t hd, const float *qt, float *st, int64_t p,
                          bool masked, __m512i lim, __m512 *mx, const kern_att_pf *pf) {
  att_prefetch(pf, p, R);
  __m512 a[16];
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) a[r] = _mm512_setzero_ps();
  const float *kr = k + p * hd;
  for (int64_t d = 0; d < hd; d++) {
    const __m512 q = _mm512_load_ps(qt + d * C);
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) a[r] = _mm512_fmadd_ps(_mm512_set1_ps(kr[r * hd + d]), q, a[r]);
  }
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) {
    if (masked) a[r] = _mm512_mask_blend_ps(_mm512_cmpgt_epi32_mask(lim, _mm512_set1_epi32((int32_t)(p + r))), ninf, a[r]);
    _mm512_store_ps(st + (p + r) * C, a[r]);
    *mx = _mm512_max_ps(*mx, a[r]);
  }
}

/* R output rows d..d+R-1: as pv_rows. */
TGT5_INL void pv_x512(const int R, const float *vt, int64_t ldv, int64_t vps, const float *st, int64_t n, float *ot,
                      int64_t d, __m512 corr) {
  __m512 a[16];
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) a[r] = _mm512_mul_ps(_mm512_load_ps(ot + (d + r) * C), corr);
  const float *vr = vt + d * ldv;
  for (int64_t p = 0; p < n; p++) {
    const __m512 s = _mm512_load_ps(st + p * C);
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) a[r] = _mm512_fmadd_ps(_mm512_set1_ps(vr[r * ldv + p * vps]), s, a[r]);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) _mm512_store_ps(ot + (d + r) * C, a[r]);
}

/* Blocks of 16 rows, then the 0..15 left as 8 + 4 + 2 + 1 (each once at
 * most): five instantiations instead of sixteen. */
#define X512_ROWS(n, i0, CALL)                     \
  do {                                             \
    int64_t i_ = (i0);                             \
    for (; i_ + 16 <= (n); i_ += 16) CALL(16, i_); \
    for (int b_ = 8; b_ >= 1; b_ /= 2)             \
      if ((n) - i_ >= b_) {                        \
        switch (b_) {                              \
          case 8: CALL(8, i_); break;              \
          case 4: CALL(4, i_); break;              \
          case 2: CALL(2, i_); break;              \
          default: CALL(1, i_); break;             \
        }                                          \
        i_ += b_;                                  \
      }                                            \
  } while (0)

TGT5 static void tile_x512(const float *qt, const float *k, const float *vt, int64_t ldv, int64_t vps, int64_t n_eff,
                           int64_t n_min, int64_t hd, const int32_t *lim, float *m, float *l, float *ot, float *st,
                           const kern_att_pf *pf) {
  const __m512i lv = _mm512_loadu_si512(lim);
  const __m512 m0 = _mm512_loadu_ps(m);
  __m512 mx = m0, sum = _mm512_setzero_ps();
#define SC(R, p) scores_x512(R, k, hd, qt, st, p, (p) + (R) > n_min, lv, &mx, pf)
  X512_ROWS(n_eff, 0, SC);
#undef SC
  const __m512 corr = exp16(_mm512_sub_ps(m0, mx));
  _mm512_storeu_ps(m, mx);
  for (int64_t p = 0; p < n_eff; p++) {
    __m512 e = exp16(_mm512_sub_ps(_mm512_load_ps(st + p * C), mx));
    _mm512_store_ps(st + p * C, e);
    sum = _mm512_add_ps(sum, e);
  }
  _mm512_storeu_ps(l, _mm512_fmadd_ps(_mm512_loadu_ps(l), corr, sum));
#define PV(R, d) pv_x512(R, vt, ldv, 1, st, n_eff, ot, d, corr)
#define PVS(R, d) pv_x512(R, vt, ldv, vps, st, n_eff, ot, d, corr)
  if (vps == 1) /* as in tile_nv */
    X512_ROWS(hd, 0, PV);
  else
    X512_ROWS(hd, 0, PVS);
#undef PV
#undef PVS
}
#undef X512_ROWS

/* The x86 step: the 512-bit body when x512 (avx512 variant) and any of
 * columns 8..15 sees a position, else AVX2 on one or two vectors. */
TGT static void tile_x86(const float *qt, const float *k, const float *vt, int64_t ldv, int64_t vps, int64_t np,
                         int64_t hd, const int32_t *lim, float *m, float *l, float *ot, float *st,
                         const kern_att_pf *pf, bool x512) {
  int64_t n_eff = 0, n_min = np, hi = 0;
  for (int i = 0; i < C; i++) {
    if (lim[i] > n_eff) n_eff = lim[i];
    if (lim[i] < n_min) n_min = lim[i];
    if (i >= 8 && lim[i] > hi) hi = lim[i];
  }
  if (n_eff > np) n_eff = np;
  if (n_eff <= 0) return;
  if (hi > 0 && x512) {
    tile_x512(qt, k, vt, ldv, vps, n_eff, n_min, hd, lim, m, l, ot, st, pf);
  } else if (hi > 0) {
    tile_nv(2, qt, k, vt, ldv, vps, n_eff, n_min, hd, lim, m, l, ot, st, pf);
  } else {
    n_min = np;
    for (int i = 0; i < 8; i++)
      if (lim[i] < n_min) n_min = lim[i];
    tile_nv(1, qt, k, vt, ldv, vps, n_eff, n_min, hd, lim, m, l, ot, st, pf);
  }
}

TGT static void f16_avx2(const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  for (; i < n; i++) dst[i] = fp16_to_f32(src[i]);
}

TGT static void f16_sat_avx2(const float *src, uint16_t *dst, int64_t n) {
  /* constants first: max/min return the second operand for a NaN, so a
   * NaN stays NaN as in the scalar form */
  const __m256 lo = _mm256_set1_ps(-65504.0f), hi = _mm256_set1_ps(65504.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_loadu_ps(src + i)));
    _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; i++) dst[i] = f16_sat_c(src[i]);
}

TGT static void q8_rows_avx2(const uint8_t *rows, size_t rb, int64_t np, int64_t hd, float *out) {
  for (int64_t p = 0; p < np; p++) {
    const block_q8_0 *b = (const block_q8_0 *)(rows + (size_t)p * rb);
    float *o = out + p * hd;
    for (int64_t k = 0; k < hd / QK8_0; k++) {
      __m256 d = _mm256_set1_ps(_cvtsh_ss(b[k].d)); /* F16C: exact, as fp16_to_f32 */
      for (int j = 0; j < QK8_0; j += 8) {
        __m128i q = _mm_loadl_epi64((const __m128i *)(b[k].qs + j));
        __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
        _mm256_storeu_ps(o + k * QK8_0 + j, _mm256_mul_ps(v, d));
      }
    }
  }
}

TGT static void exp_avx2(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  for (; i < n; i++) y[i] = exp_c(x[i]);
}
#endif

void kern_attn_tile(const float *qt, const float *k, const float *vt, int64_t ldv, int64_t vps, int64_t np, int64_t hd,
                    const int32_t *lim, float *m, float *l, float *ot, float *st, const kern_att_pf *pf) {
#if defined(__x86_64__)
  if (kern_avx2_fast()) {
    tile_x86(qt, k, vt, ldv, vps, np, hd, lim, m, l, ot, st, pf, kern_x512_fast());
    return;
  }
#endif
  tile_c(qt, k, vt, ldv, vps, np, hd, lim, m, l, ot, st, pf);
}

void kern_f16_to_f32(const uint16_t *src, float *dst, int64_t n) {
#if defined(__x86_64__)
  if (kern_avx2_fast()) {
    f16_avx2(src, dst, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_f32(src[i]);
}

void kern_f32_to_f16_sat(const float *src, uint16_t *dst, int64_t n) {
#if defined(__x86_64__)
  if (kern_avx2_fast()) {
    f16_sat_avx2(src, dst, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) dst[i] = f16_sat_c(src[i]);
}

void kern_q8_0_rows_f32(const void *rows, size_t row_bytes, int64_t np, int64_t hd, float *out) {
#if defined(__x86_64__)
  if (kern_avx2_fast()) {
    q8_rows_avx2(rows, row_bytes, np, hd, out);
    return;
  }
#endif
  for (int64_t p = 0; p < np; p++) {
    const block_q8_0 *b = (const block_q8_0 *)((const uint8_t *)rows + (size_t)p * row_bytes);
    for (int64_t k = 0; k < hd / QK8_0; k++) {
      float d = fp16_to_f32(b[k].d);
      for (int j = 0; j < QK8_0; j++) out[p * hd + k * QK8_0 + j] = (float)b[k].qs[j] * d;
    }
  }
}

void kern_exp_f32(const float *x, float *y, int64_t n) {
#if defined(__x86_64__)
  if (kern_avx2_fast()) {
    exp_avx2(x, y, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) y[i] = exp_c(x[i]);
}
