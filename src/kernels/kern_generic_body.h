/*
 * kern_generic_body.h - the tile kernels in portable C, written as 8-lane
 * loops that reproduce the x86 kernels' arithmetic exactly (same lanes,
 * same fused multiply-adds, same horizontal-sum tree), so their results are
 * bit-identical to kern_x86_body.h and the unit tests can check them on any
 * machine against the AVX2 variant. Compiled by kern_neon.c (aarch64, where
 * the compiler maps the lane loops onto NEON registers and fmaf onto fmla)
 * and by kern_scalar.c (every other CPU).
 *
 * Lane model (see kern_x86_body.h): an 8 x f32 accumulator; for 8-bit dot
 * products lane i holds the integer sum over bytes 4i..4i+3 of each 32-byte
 * group (exact in int32, so the order inside a lane does not matter); the
 * final sum is ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
 *
 * The includer defines GEN_FN (a function attribute prefix, may be empty)
 * and includes this once.
 */
#ifndef PARLEY_KERNELS_KERN_GENERIC_BODY_H
#define PARLEY_KERNELS_KERN_GENERIC_BODY_H

#include <math.h>
#include <string.h>

#include "kernels/iq_grids.h"
#include "kernels/kernels_impl.h"

#define GL 8 /* lanes */

static inline float gen_hsum(const float *a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static inline float gen_f16(const void *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return fp16_to_f32(h);
}

static inline float gen_bf16(const void *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* weight i of a float row; kind 0 f32, 1 f16, 2 bf16 */
static inline float gen_w(const void *w, int64_t i, int kind) {
  if (kind == 0) {
    float f;
    memcpy(&f, (const float *)w + i, 4);
    return f;
  }
  return kind == 1 ? gen_f16((const uint16_t *)w + i) : gen_bf16((const uint16_t *)w + i);
}

/* ---- F32 / F16 / BF16 ---------------------------------------------------- */

static void gen_tile_float(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,
                           size_t ys, int kind) {
  for (int t = 0; t < nt; t++) {
    const float *xt = (const float *)((const char *)x + t * xs);
    float a0[GL] = {0}, a1[GL] = {0}, tail = 0.0f;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      for (int l = 0; l < GL; l++) {
        a0[l] = fmaf(gen_w(w, i + l, kind), xt[i + l], a0[l]);
        a1[l] = fmaf(gen_w(w, i + 8 + l, kind), xt[i + 8 + l], a1[l]);
      }
    if (i + 8 <= n) {
      for (int l = 0; l < GL; l++) a0[l] = fmaf(gen_w(w, i + l, kind), xt[i + l], a0[l]);
      i += 8;
    }
    for (; i < n; i++) tail = fmaf(gen_w(w, i, kind), xt[i], tail);
    for (int l = 0; l < GL; l++) a0[l] += a1[l];
    y[t * ys] = gen_hsum(a0) + tail;
  }
}

GEN_FN static void gen_tile_f32(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  gen_tile_float(w, n, x, xs, nt, y, ys, 0);
}
GEN_FN static void gen_tile_f16(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  gen_tile_float(w, n, x, xs, nt, y, ys, 1);
}
GEN_FN static void gen_tile_bf16(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  gen_tile_float(w, n, x, xs, nt, y, ys, 2);
}

/* ---- 32-block types x kern_block_q8 --------------------------------------- */

/* Block ib unpacked to q[32] (signed for kind 0..2, else unsigned with the
 * offset m); kinds as in kern_x86_body.h: 0 Q8_0, 1 Q4_0, 2 Q5_0, 3 Q4_1,
 * 4 Q5_1, 5 IQ4_NL, 6 MXFP4 (signed levels). Element j: nibbles low for j < 16, high for j >= 16. */
static inline void gen_unpack32(const uint8_t *w, int64_t ib, int kind, int *q, float *d,
                                float *m) {
  const uint8_t *qs = NULL, *qhp = NULL;
  int off = 0;
  switch (kind) {
  case 0: {
    const block_q8_0 *b = (const block_q8_0 *)w + ib;
    *d = gen_f16(&b->d);
    for (int j = 0; j < 32; j++) q[j] = b->qs[j];
    return;
  }
  case 5: {
    const block_iq4_nl *b = (const block_iq4_nl *)w + ib;
    *d = gen_f16(&b->d);
    for (int j = 0; j < 16; j++) {
      q[j] = kvalues_iq4nl[b->qs[j] & 15];
      q[j + 16] = kvalues_iq4nl[b->qs[j] >> 4];
    }
    return;
  }
  case 6: {
    const block_mxfp4 *b = (const block_mxfp4 *)w + ib;
    *d = mxfp4_half_scale(b->e);
    for (int j = 0; j < 16; j++) {
      q[j] = kvalues_mxfp4[b->qs[j] & 15];
      q[j + 16] = kvalues_mxfp4[b->qs[j] >> 4];
    }
    return;
  }
  case 1: {
    const block_q4_0 *b = (const block_q4_0 *)w + ib;
    *d = gen_f16(&b->d);
    qs = b->qs;
    off = 8;
    break;
  }
  case 2: {
    const block_q5_0 *b = (const block_q5_0 *)w + ib;
    *d = gen_f16(&b->d);
    qs = b->qs;
    qhp = b->qh;
    off = 16;
    break;
  }
  case 3: {
    const block_q4_1 *b = (const block_q4_1 *)w + ib;
    *d = gen_f16(&b->d);
    *m = gen_f16(&b->m);
    qs = b->qs;
    break;
  }
  default: {
    const block_q5_1 *b = (const block_q5_1 *)w + ib;
    *d = gen_f16(&b->d);
    *m = gen_f16(&b->m);
    qs = b->qs;
    qhp = b->qh;
    break;
  }
  }
  uint32_t qh = 0;
  if (qhp) memcpy(&qh, qhp, 4);
  for (int j = 0; j < 16; j++) {
    q[j] = (qs[j] & 15) | (int)((qh >> j) & 1) << 4;
    q[j + 16] = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
  }
  for (int j = 0; j < 32; j++) q[j] -= off;
}

static void gen_tile_q32(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,
                         size_t ys, int kind) {
  for (int t = 0; t < nt; t++) {
    const kern_block_q8 *xb = (const kern_block_q8 *)((const char *)x + t * xs);
    float acc[2][GL] = {{0}}, macc = 0.0f;
    int64_t nb = n / 32;
    for (int64_t ib = 0; ib < nb; ib++) {
      float *a = acc[ib & 1]; /* even blocks to 0, odd to 1, as on x86 */
      int q[32];
      float d, m = 0.0f;
      gen_unpack32(w, ib, kind, q, &d, &m);
      float dd = d * xb[ib].d;
      for (int l = 0; l < GL; l++) {
        int32_t s = 0;
        for (int k = 0; k < 4; k++) s += q[4 * l + k] * xb[ib].qs[4 * l + k];
        a[l] = fmaf(dd, (float)s, a[l]);
      }
      if (kind == 3 || kind == 4) macc = fmaf(m, xb[ib].s, macc);
    }
    for (int l = 0; l < GL; l++) acc[0][l] += acc[1][l];
    y[t * ys] = gen_hsum(acc[0]) + macc;
  }
}

#define GEN_Q32(nm, kind)                                                                   \
  GEN_FN static void gen_tile_##nm(const void *w, int64_t n, const void *x, size_t xs, int nt, \
                                   float *y, size_t ys) {                                   \
    gen_tile_q32(w, n, x, xs, nt, y, ys, kind);                                             \
  }
GEN_Q32(q8_0, 0)
GEN_Q32(q5_0, 2)
GEN_Q32(q4_1, 3)
GEN_Q32(q5_1, 4)
GEN_Q32(iq4_nl, 5)

/* MXFP4 keeps the x86 8-row tile's arithmetic (kern_x86_mxfp4x8.h): per
 * block the exact integer sum of level x q_x, then one fused multiply-add
 * by d_w * d_x, blocks in order. */
GEN_FN static void gen_tile_mxfp4(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,
                                  size_t ys) {
  for (int t = 0; t < nt; t++) {
    const kern_block_q8 *xb = (const kern_block_q8 *)((const char *)x + t * xs);
    float acc = 0.0f;
    for (int64_t ib = 0; ib < n / 32; ib++) {
      int q[32];
      float d, m = 0.0f;
      gen_unpack32(w, ib, 6, q, &d, &m);
      int32_t s = 0;
      for (int j = 0; j < 32; j++) s += q[j] * xb[ib].qs[j];
      acc = fmaf((float)s, d * xb[ib].d, acc);
    }
    y[t * ys] = acc;
  }
}

/* Q4_0 x kern_pair_q8 (kern_x86_body.h body_q4_0p): per pair of blocks,
 * lane l belongs to block 2p + l / 4 and sums (q - 8) x over elements
 * 4i..4i+3 and 16+4i..16+4i+3 (i = l % 4), exact in int32; then
 * acc[l] += s * (d_w * d_x[l]). A missing odd last block has q = x = 0 and
 * d_w = 0, as on x86. */
GEN_FN static void gen_tile_q4_0p(const void *w, int64_t n, const void *x, size_t xs, int nt,
                                  float *y, size_t ys) {
  const block_q4_0 *wb = w;
  int64_t nb = n / 32, np = (nb + 1) / 2;
  for (int t = 0; t < nt; t++) {
    const kern_pair_q8 *xp = (const kern_pair_q8 *)((const char *)x + t * xs);
    float acc[GL] = {0};
    for (int64_t ip = 0; ip < np; ip++) {
      for (int l = 0; l < GL; l++) {
        int k = l / 4, i = l % 4;
        int64_t ib = 2 * ip + k;
        int32_t s = 0;
        float dw = 0.0f;
        if (ib < nb) {
          dw = gen_f16(&wb[ib].d);
          for (int e = 4 * i; e < 4 * i + 4; e++) {
            s += ((wb[ib].qs[e] & 15) - 8) * xp[ip].a[16 * k + e];
            s += ((wb[ib].qs[e] >> 4) - 8) * xp[ip].b16[16 * k + e];
          }
        }
        acc[l] = fmaf((float)s, dw * xp[ip].d[l], acc[l]);
      }
    }
    y[t * ys] = gen_hsum(acc);
  }
}

/* ---- K-quants x block_q8_K ------------------------------------------------ */

/* Q4_K against KERN_ACT_Q8_KX activations, the lanes of x86 body_q4_Kx:
 * int32 lane L sums, for h = 0, 1, scale(sb) x the products of half L / 4
 * (16 elements) of sub-block sb = 2 (L % 4) + h; element e of sub-block sb
 * sits at qs[64m + 32h + 16 (e / 16) + 4 (sb / 2) + e % 4], m = e % 16 / 4. */
GEN_FN static void gen_tile_q4_K(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  for (int t = 0; t < nt; t++) {
    const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs);
    float acc[GL] = {0};
    for (int64_t ib = 0; ib < n / QK_K; ib++) {
      const block_q4_K *b = (const block_q4_K *)w + ib;
      float d = gen_f16(&b->d), dmin = gen_f16(&b->dmin);
      const uint8_t *b12 = b->scales;
      int sc[8], mn[8];
      for (int k = 0; k < 4; k++) {
        sc[k] = b12[k] & 63;
        mn[k] = b12[k + 4] & 63;
      }
      for (int k = 4; k < 8; k++) {
        sc[k] = (b12[k + 4] & 15) | (b12[k - 4] >> 6) << 4;
        mn[k] = (b12[k + 4] >> 4) | (b12[k] >> 6) << 4;
      }
      int32_t isum[GL] = {0};
      for (int l = 0; l < GL; l++)
        for (int h = 0; h < 2; h++) {
          int sb = 2 * (l % 4) + h, s = 0;
          for (int e = 16 * (l / 4); e < 16 * (l / 4) + 16; e++) {
            int q = (b->qs[32 * (sb / 2) + e] >> 4 * h) & 15;
            int xi = 64 * (e % 16 / 4) + 32 * h + 16 * (e / 16) + 4 * (sb / 2) + e % 4;
            s += q * xb[ib].qs[xi];
          }
          isum[l] += s * sc[sb];
        }
      float fsum[GL], dd = d * xb[ib].d;
      memcpy(fsum, xb[ib].bsums, sizeof fsum);
      for (int l = 0; l < GL; l++) {
        acc[l] = fmaf(dd, (float)isum[l], acc[l]);
        acc[l] = fmaf(-(dmin * (float)mn[l]), fsum[l], acc[l]);
      }
    }
    y[t * ys] = gen_hsum(acc);
  }
}
/* Q5_K against KERN_ACT_Q8_K5X activations, the lanes of x86 body_q5_Kx:
 * int32 lane L sums, over the chunks p, scale(sb) x the products of
 * elements 16u + 4 (L % 4) + b (u = 0, 1; b = 0..3) of sub-block sb = 2p +
 * L / 4, whose activations sit at qs[64p + 32u + 4L + b]; the mins as for
 * Q4_K. Element e of sub-block 2p + h: nibble h of qs[32p + e] plus bit
 * 2p + h of qh[e] as bit 4. */
GEN_FN static void gen_tile_q5_K(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  for (int t = 0; t < nt; t++) {
    const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs);
    float acc[GL] = {0};
    for (int64_t ib = 0; ib < n / QK_K; ib++) {
      const block_q5_K *b = (const block_q5_K *)w + ib;
      float d = gen_f16(&b->d), dmin = gen_f16(&b->dmin);
      const uint8_t *b12 = b->scales;
      int sc[8], mn[8];
      for (int k = 0; k < 4; k++) {
        sc[k] = b12[k] & 63;
        mn[k] = b12[k + 4] & 63;
      }
      for (int k = 4; k < 8; k++) {
        sc[k] = (b12[k + 4] & 15) | (b12[k - 4] >> 6) << 4;
        mn[k] = (b12[k + 4] >> 4) | (b12[k] >> 6) << 4;
      }
      int32_t isum[GL] = {0};
      for (int p = 0; p < 4; p++)
        for (int l = 0; l < GL; l++) {
          int h = l / 4, s = 0;
          for (int u = 0; u < 2; u++)
            for (int k = 0; k < 4; k++) {
              int e = 16 * u + 4 * (l % 4) + k;
              int q = ((b->qs[32 * p + e] >> 4 * h) & 15) | ((b->qh[e] >> (2 * p + h)) & 1) << 4;
              s += q * xb[ib].qs[64 * p + 32 * u + 4 * l + k];
            }
          isum[l] += s * sc[2 * p + h];
        }
      float fsum[GL], dd = d * xb[ib].d;
      memcpy(fsum, xb[ib].bsums, sizeof fsum);
      for (int l = 0; l < GL; l++) {
        acc[l] = fmaf(dd, (float)isum[l], acc[l]);
        acc[l] = fmaf(-(dmin * (float)mn[l]), fsum[l], acc[l]);
      }
    }
    y[t * ys] = gen_hsum(acc);
  }
}

/* Q6_K against KERN_ACT_Q8_K6X activations, the lanes of x86 body_q6_Kx:
 * int32 lane L sums, for each 64-element chunk c, scale(sb) x the products
 * of the 8 elements 64c + 32 (L % 2) + 16 (L / 4) + 8u + 4 (L / 2 % 2) + b
 * (u = 0, 1; b = 0..3) of sub-block sb = 4c + 2 (L % 2) + L / 4, whose
 * activations sit at qs[64c + 32u + 4L + b]; plus the offset -32 sc x the
 * block sums of sub-blocks 2L and 2L + 1. */
GEN_FN static void gen_tile_q6_K(const void *w, int64_t n, const void *x, size_t xs, int nt,
                                 float *y, size_t ys) {
  for (int t = 0; t < nt; t++) {
    const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs);
    float acc[GL] = {0};
    for (int64_t ib = 0; ib < n / QK_K; ib++) {
      const block_q6_K *b = (const block_q6_K *)w + ib;
      int32_t isum[GL];
      for (int l = 0; l < GL; l++)
        isum[l] = xb[ib].bsums[2 * l] * (-32 * b->scales[2 * l]) +
                  xb[ib].bsums[2 * l + 1] * (-32 * b->scales[2 * l + 1]);
      for (int c = 0; c < 4; c++)
        for (int l = 0; l < GL; l++) {
          int32_t sum = 0;
          for (int u = 0; u < 2; u++)
            for (int k = 0; k < 4; k++) {
              int e = 64 * c + 32 * (l % 2) + 16 * (l / 4) + 8 * u + 4 * (l / 2 % 2) + k;
              int h = e / 128, s = e % 128 / 32, li = e % 32;
              int low = (b->ql[64 * h + li + 32 * (s & 1)] >> 4 * (s >> 1)) & 15;
              int high = (b->qh[32 * h + li] >> 2 * s) & 3;
              sum += (low | high << 4) * xb[ib].qs[64 * c + 32 * u + 4 * l + k];
            }
          isum[l] += sum * b->scales[4 * c + 2 * (l % 2) + l / 4];
        }
      float dd = gen_f16(&b->d) * xb[ib].d;
      for (int l = 0; l < GL; l++) acc[l] = fmaf(dd, (float)isum[l], acc[l]);
    }
    y[t * ys] = gen_hsum(acc);
  }
}

/* Q2_K against KERN_ACT_Q8_K3X activations, the lanes of x86 body_q2_Kx
 * (Q3_K's, below): element 128h + 32s + e, q = (qs[32h + e] >> 2s) & 3,
 * scale sc_k & 15 and min sc_k >> 4 of sub-block k = 8h + 2s + e / 16;
 * int32 lane L sums, for h = 0, 1, the products of elements 16 (L / 4) +
 * 4m + b of group s = L % 4 times their scale, and the mins of sub-blocks
 * 2L, 2L + 1 against the block sums. */
GEN_FN static void gen_tile_q2_K(const void *w, int64_t n, const void *x, size_t xs, int nt,
                                 float *y, size_t ys) {
  for (int t = 0; t < nt; t++) {
    const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs);
    float acc[GL] = {0};
    for (int64_t ib = 0; ib < n / QK_K; ib++) {
      const block_q2_K *b = (const block_q2_K *)w + ib;
      int32_t isum[GL] = {0};
      for (int h = 0; h < 2; h++)
        for (int l = 0; l < GL; l++) {
          int32_t sum = 0;
          int s = l % 4;
          for (int m = 0; m < 4; m++)
            for (int k = 0; k < 4; k++) {
              int e = 16 * (l / 4) + 4 * m + k;
              sum += ((b->qs[32 * h + e] >> 2 * s) & 3) * xb[ib].qs[128 * h + 32 * m + 4 * l + k];
            }
          isum[l] += sum * (b->scales[8 * h + 2 * s + l / 4] & 15);
        }
      float dd = gen_f16(&b->d) * xb[ib].d, dm = gen_f16(&b->dmin) * xb[ib].d;
      for (int l = 0; l < GL; l++) {
        int32_t msum = xb[ib].bsums[2 * l] * (b->scales[2 * l] >> 4) +
                       xb[ib].bsums[2 * l + 1] * (b->scales[2 * l + 1] >> 4);
        acc[l] = fmaf(dd, (float)isum[l], acc[l]);
        acc[l] = fmaf(-dm, (float)msum, acc[l]);
      }
    }
    y[t * ys] = gen_hsum(acc);
  }
}

/* Q3_K against KERN_ACT_Q8_K3X activations, the lanes of x86 body_q3_Kx:
 * int32 lane L sums, for h = 0, 1, (sc_k - 32) x the products of elements
 * 128h + 32 (L % 4) + 16 (L / 4) + 4m + b (m, b = 0..3) of sub-block k =
 * 8h + 2 (L % 4) + L / 4, whose activations sit at qs[128h + 32m + 4L + b];
 * plus -4 (sc - 32) x the block sums of sub-blocks 2L and 2L + 1. */
GEN_FN static void gen_tile_q3_K(const void *w, int64_t n, const void *x, size_t xs, int nt,
                                 float *y, size_t ys) {
  for (int t = 0; t < nt; t++) {
    const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs);
    float acc[GL] = {0};
    for (int64_t ib = 0; ib < n / QK_K; ib++) {
      const block_q3_K *b = (const block_q3_K *)w + ib;
      int sc[16];
      for (int k = 0; k < 16; k++) {
        int low = k < 8 ? b->scales[k] & 15 : b->scales[k - 8] >> 4;
        int high = (b->scales[8 + k % 4] >> (2 * (k / 4))) & 3;
        sc[k] = (low | high << 4) - 32;
      }
      int32_t isum[GL];
      for (int l = 0; l < GL; l++)
        isum[l] = xb[ib].bsums[2 * l] * (-4 * sc[2 * l]) + xb[ib].bsums[2 * l + 1] * (-4 * sc[2 * l + 1]);
      for (int h = 0; h < 2; h++)
        for (int l = 0; l < GL; l++) {
          int32_t sum = 0;
          int s = l % 4;
          for (int m = 0; m < 4; m++)
            for (int k = 0; k < 4; k++) {
              int e = 16 * (l / 4) + 4 * m + k; /* element 128h + 32s + e */
              int q = ((b->qs[32 * h + e] >> 2 * s) & 3) | ((b->hmask[e] >> (4 * h + s)) & 1) << 2;
              sum += q * xb[ib].qs[128 * h + 32 * m + 4 * l + k];
            }
          isum[l] += sum * sc[8 * h + 2 * s + l / 4];
        }
      float dd = gen_f16(&b->d) * xb[ib].d;
      for (int l = 0; l < GL; l++) acc[l] = fmaf(dd, (float)isum[l], acc[l]);
    }
    y[t * ys] = gen_hsum(acc);
  }
}

static void gen_fill_ops(struct kern_ops *ops) {
  ops->quant_q8 = kern_quant_q8_c;
  ops->quant_q8_K = kern_quant_q8_K_c;
  ops->quant_q8p = kern_quant_q8p_c;
  ops->quant_q8_Kx = kern_quant_q8_Kx_c;
  ops->quant_q8_K6x = kern_quant_q8_K6x_c;
  ops->quant_q8_K5x = kern_quant_q8_K5x_c;
  ops->quant_q8_K3x = kern_quant_q8_K3x_c;
  ops->tile[TENSOR_TYPE_F32] = gen_tile_f32;
  ops->tile[TENSOR_TYPE_F16] = gen_tile_f16;
  ops->tile[TENSOR_TYPE_BF16] = gen_tile_bf16;
  ops->tile[TENSOR_TYPE_Q8_0] = gen_tile_q8_0;
  ops->tile[TENSOR_TYPE_Q4_0] = gen_tile_q4_0p;
  /* the same tile widths as x86 (the lane loops take any nt) */
  ops->tile_nt[TENSOR_TYPE_Q4_0] = KERN_TILE_TOKENS_MAX;
  ops->tile_nt[TENSOR_TYPE_Q4_K] = KERN_TILE_TOKENS_MAX;
  ops->tile_nt[TENSOR_TYPE_Q5_K] = KERN_TILE_TOKENS_MAX;
  ops->tile_nt[TENSOR_TYPE_Q6_K] = KERN_TILE_TOKENS_MAX;
  ops->tile_nt[TENSOR_TYPE_Q2_K] = KERN_TILE_TOKENS_MAX;
  ops->tile_nt[TENSOR_TYPE_Q3_K] = KERN_TILE_TOKENS_MAX;
  ops->tile[TENSOR_TYPE_Q5_0] = gen_tile_q5_0;
  ops->tile[TENSOR_TYPE_Q4_1] = gen_tile_q4_1;
  ops->tile[TENSOR_TYPE_Q5_1] = gen_tile_q5_1;
  ops->tile[TENSOR_TYPE_IQ4_NL] = gen_tile_iq4_nl;
  ops->act[TENSOR_TYPE_IQ4_NL] = KERN_ACT_Q8;
  ops->tile[TENSOR_TYPE_MXFP4] = gen_tile_mxfp4;
  ops->act[TENSOR_TYPE_MXFP4] = KERN_ACT_Q8;
  ops->tile[TENSOR_TYPE_Q4_K] = gen_tile_q4_K;
  ops->tile[TENSOR_TYPE_Q5_K] = gen_tile_q5_K;
  ops->tile[TENSOR_TYPE_Q6_K] = gen_tile_q6_K;
  ops->tile[TENSOR_TYPE_Q2_K] = gen_tile_q2_K;
  ops->tile[TENSOR_TYPE_Q3_K] = gen_tile_q3_K;
  ops->act[TENSOR_TYPE_F32] = KERN_ACT_F32;
  ops->act[TENSOR_TYPE_F16] = KERN_ACT_F32;
  ops->act[TENSOR_TYPE_BF16] = KERN_ACT_F32;
  ops->act[TENSOR_TYPE_Q8_0] = KERN_ACT_Q8;
  ops->act[TENSOR_TYPE_Q4_0] = KERN_ACT_Q8P;
  ops->act[TENSOR_TYPE_Q5_0] = KERN_ACT_Q8;
  ops->act[TENSOR_TYPE_Q4_1] = KERN_ACT_Q8;
  ops->act[TENSOR_TYPE_Q5_1] = KERN_ACT_Q8;
  ops->act[TENSOR_TYPE_Q4_K] = KERN_ACT_Q8_KX;
  ops->act[TENSOR_TYPE_Q5_K] = KERN_ACT_Q8_K5X;
  ops->act[TENSOR_TYPE_Q6_K] = KERN_ACT_Q8_K6X;
  ops->act[TENSOR_TYPE_Q2_K] = KERN_ACT_Q8_K3X;
  ops->act[TENSOR_TYPE_Q3_K] = KERN_ACT_Q8_K3X;
}

#endif
