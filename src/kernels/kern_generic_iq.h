/*
 * kern_generic_iq.h - portable tile kernels for the 256-element i-quants
 * (IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S) against block_q8_K
 * activations, in the 8-lane model of kern_generic_body.h and the
 * arithmetic of kern_iq_common.h, so bit-identical to kern_x86_iq.h.
 * (IQ4_NL, a 32-block type, is kind 5 of the Q8_0-style tiles in
 * kern_generic_body.h.) The includer has included kern_generic_body.h.
 */
#ifndef PARLEY_KERNELS_KERN_GENERIC_IQ_H
#define PARLEY_KERNELS_KERN_GENERIC_IQ_H

#include "kernels/kern_iq_common.h"

/* Sub-block s (elements 32s..32s+31) of block b: w[32] signed weights and
 * the integer scales of its two halves (c[0]: elements 0..15, c[1]: 16..31). */
static inline void gen_iqk_sub(const uint8_t *b, int s, int k, int *w, int *c) {
  unsigned sg[4] = {0, 0, 0, 0};   /* sign bits per group of 8 */
  uint64_t g[8];                   /* grid entries (4 x 8 bytes or 8 x 4 bytes) */
  int wide = 8;                    /* bytes per grid entry */
  switch (k) {
  case IQK_IQ4_XS: {
    const uint8_t *qs = b + 8 + 16 * s;
    int ls = ((b[4 + s / 2] >> 4 * (s % 2)) & 15) | (int)((iqk_ld16(b + 2) >> 2 * s) & 3) << 4;
    c[0] = c[1] = ls - 32;
    for (int j = 0; j < 16; j++) {
      w[j] = kvalues_iq4nl[qs[j] & 15];
      w[j + 16] = kvalues_iq4nl[qs[j] >> 4];
    }
    return;
  }
  case IQK_IQ2_XXS: {
    uint32_t a0 = iqk_ld32(b + 2 + 8 * s), a1 = iqk_ld32(b + 6 + 8 * s);
    c[0] = c[1] = 2 * (int)(a1 >> 28) + 1;
    for (int l = 0; l < 4; l++) {
      g[l] = iq2xxs_grid[(a0 >> 8 * l) & 255];
      sg[l] = iq_signs7(a1 >> 7 * l);
    }
    break;
  }
  case IQK_IQ2_XS: {
    for (int l = 0; l < 4; l++) {
      unsigned v = iqk_ld16(b + 2 + 2 * (4 * s + l));
      g[l] = iq2xs_grid[v & 511];
      sg[l] = iq_signs7(v >> 9);
    }
    c[0] = 2 * (b[66 + s] & 15) + 1;
    c[1] = 2 * (b[66 + s] >> 4) + 1;
    break;
  }
  case IQK_IQ2_S: {
    for (int l = 0; l < 4; l++) {
      g[l] = iq2s_grid[b[2 + 4 * s + l] | ((b[66 + s] >> 2 * l) & 3) << 8];
      sg[l] = b[34 + 4 * s + l];
    }
    c[0] = 2 * (b[74 + s] & 15) + 1;
    c[1] = 2 * (b[74 + s] >> 4) + 1;
    break;
  }
  case IQK_IQ3_XXS: {
    uint32_t a = iqk_ld32(b + 66 + 4 * s);
    c[0] = c[1] = 2 * (int)(a >> 28) + 1;
    for (int h = 0; h < 8; h++) g[h] = iq3xxs_grid[b[2 + 8 * s + h]];
    for (int l = 0; l < 4; l++) sg[l] = iq_signs7(a >> 7 * l);
    wide = 4;
    break;
  }
  default: { /* IQ3_S */
    for (int h = 0; h < 8; h++) g[h] = iq3s_grid[b[2 + 8 * s + h] | ((b[66 + s] >> h) & 1) << 8];
    for (int l = 0; l < 4; l++) sg[l] = b[74 + 4 * s + l];
    c[0] = c[1] = 2 * ((b[106 + s / 2] >> 4 * (s % 2)) & 15) + 1;
    wide = 4;
    break;
  }
  }
  for (int j = 0; j < 32; j++) {
    int v = iq_grid_byte(g[j / wide], j % wide);
    w[j] = (sg[j / 8] >> (j % 8)) & 1 ? -v : v;
  }
}

static void gen_tile_iqk(const void *wrow, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys,
                         int k) {
  float acc[KERN_TILE_TOKENS_MAX][GL];
  memset(acc, 0, sizeof acc);
  const uint8_t *b = wrow;
  for (int64_t ib = 0; ib < n / QK_K; ib++, b += iqk_bytes(k)) {
    float dw = gen_f16(b) * iqk_k(k);
    int32_t isum[KERN_TILE_TOKENS_MAX][GL];
    memset(isum, 0, sizeof isum);
    for (int s = 0; s < 8; s++) {
      int w[32], c[2];
      gen_iqk_sub(b, s, k, w, c);
      for (int t = 0; t < nt; t++) {
        const int8_t *q = ((const block_q8_K *)((const char *)x + t * xs) + ib)->qs + 32 * s;
        for (int l = 0; l < GL; l++) {
          int32_t p = 0;
          for (int e = 0; e < 4; e++) p += w[4 * l + e] * q[4 * l + e];
          isum[t][l] += c[l / 4] * p;
        }
      }
    }
    for (int t = 0; t < nt; t++) {
      float dd = dw * ((const block_q8_K *)((const char *)x + t * xs) + ib)->d;
      for (int l = 0; l < GL; l++) acc[t][l] = fmaf(dd, (float)isum[t][l], acc[t][l]);
    }
  }
  for (int t = 0; t < nt; t++) y[t * ys] = gen_hsum(acc[t]);
}

#define GEN_IQK(nm, kind)                                                                          \
  GEN_FN static void gen_tile_##nm(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, \
                                   size_t ys) {                                                    \
    gen_tile_iqk(w, n, x, xs, nt, y, ys, kind);                                                    \
  }
GEN_IQK(iq4_xs, IQK_IQ4_XS)
GEN_IQK(iq3_xxs, IQK_IQ3_XXS)
GEN_IQK(iq3_s, IQK_IQ3_S)
GEN_IQK(iq2_xxs, IQK_IQ2_XXS)
GEN_IQK(iq2_xs, IQK_IQ2_XS)
GEN_IQK(iq2_s, IQK_IQ2_S)

static void gen_fill_iq_ops(struct kern_ops *ops) {
  static const struct { int type; kern_tile_fn fn; } t[] = {
      {TENSOR_TYPE_IQ4_XS, gen_tile_iq4_xs},   {TENSOR_TYPE_IQ3_XXS, gen_tile_iq3_xxs},
      {TENSOR_TYPE_IQ3_S, gen_tile_iq3_s},     {TENSOR_TYPE_IQ2_XXS, gen_tile_iq2_xxs},
      {TENSOR_TYPE_IQ2_XS, gen_tile_iq2_xs},   {TENSOR_TYPE_IQ2_S, gen_tile_iq2_s}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    ops->tile[t[i].type] = t[i].fn;
    ops->act[t[i].type] = KERN_ACT_Q8_K;
  }
}

#endif
