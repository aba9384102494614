/*
 * kern_x86_iq.h - AVX2 / AVX-512 tile kernels for the 256-element
 * i-quants (IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S) against
 * block_q8_K activations; compiled by kern_avx2.c and kern_avx512.c after
 * kern_x86_body.h. The arithmetic is the one kern_iq_common.h defines, so
 * every variant gives the same bits.
 *
 * Per sub-block of 32 the weights become two 32-byte operands: their
 * magnitudes (u8: IQ4 levels up to 127, grid values up to 62) and their
 * signs (+1 / -1 bytes), applied to the activations with _mm256_sign_epi8
 * (the sign trick of kern_x86_body.h; pairs stay below 2 x 127 x 127, so
 * maddubs cannot saturate). Grid entries are gathered with scalar loads
 * (4 x 8 or 8 x 4 bytes), the 7-bit sign fields expanded by iq_signs7 and
 * spread to bytes by a shuffle and a bit test. The integer scale of each
 * half sub-block multiplies the 8 lane sums exactly: AVX2 folds it into
 * the 16 -> 32 bit madd, AVX-512 multiplies the VNNI sums (mullo), equal
 * as integers. The block is unpacked once and used for every token.
 */
#ifndef PARLEY_KERNELS_KERN_X86_IQ_H
#define PARLEY_KERNELS_KERN_X86_IQ_H

#include "kernels/kern_iq_common.h"

/* 8 int32 lane sums of 4 adjacent u8 x s8 products, times the int scale
 * c_lo (lanes 0..3) or c_hi (lanes 4..7). */
#ifdef X86_TARGET_512
#define IQK_DOT_SCALED(u, s, c_lo, c_hi) \
  _mm256_mullo_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), (u), (s)), _mm256_set_m128i(_mm_set1_epi32(c_hi), _mm_set1_epi32(c_lo)))
#else
#define IQK_DOT_SCALED(u, s, c_lo, c_hi) \
  _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set_m128i(_mm_set1_epi16((short)(c_hi)), _mm_set1_epi16((short)(c_lo))))
#endif

/* +1 / -1 bytes from 4 sign bytes (bit j of byte l: element 8l + j negative). */
TGT_INL __m256i iqk_signs(uint32_t sg4) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                          3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)sg4), spread);
  __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  return _mm256_or_si256(neg, _mm256_set1_epi8(1));
}

/* Sub-block s of block b: magnitudes *u, signs *sg, half scales c[2]. */
TGT_INL void iqk_sub_x86(const uint8_t *b, int s, int k, __m256i *u, __m256i *sg, int *c) {
  uint32_t sg4 = 0;
  switch (k) {
  case IQK_IQ4_XS: {
    int ls = ((b[4 + s / 2] >> 4 * (s % 2)) & 15) | (int)((iqk_ld16(b + 2) >> 2 * s) & 3) << 4;
    c[0] = c[1] = ls - 32;
    __m128i q = _mm_loadu_si128((const __m128i *)(b + 8 + 16 * s));
    __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
    v = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)), v);
    *u = _mm256_sign_epi8(v, v);
    *sg = v;
    return;
  }
  case IQK_IQ2_XXS: {
    uint32_t a0 = iqk_ld32(b + 2 + 8 * s), a1 = iqk_ld32(b + 6 + 8 * s);
    c[0] = c[1] = 2 * (int)(a1 >> 28) + 1;
    *u = _mm256_set_epi64x((long long)iq2xxs_grid[a0 >> 24], (long long)iq2xxs_grid[(a0 >> 16) & 255],
                           (long long)iq2xxs_grid[(a0 >> 8) & 255], (long long)iq2xxs_grid[a0 & 255]);
    for (int l = 0; l < 4; l++) sg4 |= (uint32_t)iq_signs7(a1 >> 7 * l) << 8 * l;
    break;
  }
  case IQK_IQ2_XS: {
    unsigned v[4];
    for (int l = 0; l < 4; l++) {
      v[l] = iqk_ld16(b + 2 + 2 * (4 * s + l));
      sg4 |= (uint32_t)iq_signs7(v[l] >> 9) << 8 * l;
    }
    *u = _mm256_set_epi64x((long long)iq2xs_grid[v[3] & 511], (long long)iq2xs_grid[v[2] & 511],
                           (long long)iq2xs_grid[v[1] & 511], (long long)iq2xs_grid[v[0] & 511]);
    c[0] = 2 * (b[66 + s] & 15) + 1;
    c[1] = 2 * (b[66 + s] >> 4) + 1;
    break;
  }
  case IQK_IQ2_S: {
    const uint8_t *q = b + 2 + 4 * s;
    unsigned h = b[66 + s];
    *u = _mm256_set_epi64x((long long)iq2s_grid[q[3] | ((h >> 6) & 3) << 8], (long long)iq2s_grid[q[2] | ((h >> 4) & 3) << 8],
                           (long long)iq2s_grid[q[1] | ((h >> 2) & 3) << 8], (long long)iq2s_grid[q[0] | (h & 3) << 8]);
    sg4 = iqk_ld32(b + 34 + 4 * s);
    c[0] = 2 * (b[74 + s] & 15) + 1;
    c[1] = 2 * (b[74 + s] >> 4) + 1;
    break;
  }
  case IQK_IQ3_XXS: {
    const uint8_t *q = b + 2 + 8 * s;
    uint32_t a = iqk_ld32(b + 66 + 4 * s);
    c[0] = c[1] = 2 * (int)(a >> 28) + 1;
    *u = _mm256_set_epi32((int)iq3xxs_grid[q[7]], (int)iq3xxs_grid[q[6]], (int)iq3xxs_grid[q[5]], (int)iq3xxs_grid[q[4]],
                          (int)iq3xxs_grid[q[3]], (int)iq3xxs_grid[q[2]], (int)iq3xxs_grid[q[1]], (int)iq3xxs_grid[q[0]]);
    for (int l = 0; l < 4; l++) sg4 |= (uint32_t)iq_signs7(a >> 7 * l) << 8 * l;
    break;
  }
  default: { /* IQ3_S */
    const uint8_t *q = b + 2 + 8 * s;
    unsigned h = b[66 + s];
    int e[8];
    for (int j = 0; j < 8; j++) e[j] = (int)iq3s_grid[q[j] | ((h >> j) & 1) << 8];
    *u = _mm256_setr_epi32(e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]);
    sg4 = iqk_ld32(b + 74 + 4 * s);
    c[0] = c[1] = 2 * ((b[106 + s / 2] >> 4 * (s % 2)) & 15) + 1;
    break;
  }
  }
  *sg = iqk_signs(sg4);
}

TGT_INL void body_iqk(const void *wrow, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys, int k) {
  __m256 acc[NT_MAX];
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  const uint8_t *b = wrow;
  const size_t bytes = iqk_bytes(k);
  const float kf = iqk_k(k);
  for (int64_t ib = 0; ib < n / QK_K; ib++, b += bytes) {
    float dw = f16_load(b) * kf;
    __m256i isum[NT_MAX];
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) isum[t] = _mm256_setzero_si256();
    for (int s = 0; s < 8; s++) {
      __m256i u, sg;
      int c[2];
      iqk_sub_x86(b, s, k, &u, &sg, c);
#pragma GCC unroll 4
      for (int t = 0; t < nt; t++) {
        const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + ib;
        __m256i xv = _mm256_sign_epi8(loadu256(xb->qs + 32 * s), sg);
        isum[t] = _mm256_add_epi32(isum[t], IQK_DOT_SCALED(u, xv, c[0], c[1]));
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
      const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + ib;
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb->d), _mm256_cvtepi32_ps(isum[t]), acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) y[t * ys] = hsum_ps(acc[t]);
}

#define BODY_IQK(nm, kind)                                                                            \
  TGT_INL void body_##nm(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) { \
    body_iqk(w, n, x, xs, nt, y, ys, kind);                                                           \
  }                                                                                                   \
  DEFINE_TILE(tile_##nm, body_##nm)
BODY_IQK(iq4_xs, IQK_IQ4_XS)
BODY_IQK(iq3_xxs, IQK_IQ3_XXS)
BODY_IQK(iq3_s, IQK_IQ3_S)
BODY_IQK(iq2_xxs, IQK_IQ2_XXS)
BODY_IQK(iq2_xs, IQK_IQ2_XS)
BODY_IQK(iq2_s, IQK_IQ2_S)

static void x86_fill_iq_ops(struct kern_ops *ops) {
  static const struct { int type; kern_tile_fn fn; } t[] = {
      {TENSOR_TYPE_IQ4_XS, tile_iq4_xs},   {TENSOR_TYPE_IQ3_XXS, tile_iq3_xxs}, {TENSOR_TYPE_IQ3_S, tile_iq3_s},
      {TENSOR_TYPE_IQ2_XXS, tile_iq2_xxs}, {TENSOR_TYPE_IQ2_XS, tile_iq2_xs},   {TENSOR_TYPE_IQ2_S, tile_iq2_s}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    ops->tile[t[i].type] = t[i].fn;
    ops->act[t[i].type] = KERN_ACT_Q8_K;
  }
}

#endif
