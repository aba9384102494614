/*
 * ref_quant_nl.c - reference dequantize/quantize for the tensor types whose
 * elements are table levels times a block scale: IQ4_NL, IQ4_XS (16
 * non-linear levels), MXFP4 (E2M1 levels, power-of-two scale) and the
 * ternary TQ1_0 / TQ2_0. The grid i-quants are in ref_quant_iq.c.
 *
 * Decoders follow the block comments in tensor_type.h with the arithmetic
 * order of ggml's reference (d * level, (d * (ls - 32)) * level), so they
 * are bit-identical with other decoders (tools/quant_ref.py checks).
 * Quantizers: for each block a scan of candidate scales, each element put on
 * its nearest level, the scale then refitted by least squares; the candidate
 * with the least squared error wins. No importance matrix.
 */
#include <math.h>

#include "kernels/iq_grids.h"
#include "kernels/ref.h"
#include "kernels/ref_round.h"

/* ---- level search ------------------------------------------------------ */

/* Index of the level of lv[0..nlev) nearest to v (the first on a tie). */
static int nearest_level(const float *lv, int nlev, float v) {
  int best = 0;
  float bd = fabsf(v - lv[0]);
  for (int k = 1; k < nlev; k++) {
    float dd = fabsf(v - lv[k]);
    if (dd < bd) {
      bd = dd;
      best = k;
    }
  }
  return best;
}

/* Squared error of x[0..n) against scale * lv[q[j]]. */
static float level_err(const float *x, int n, const float *lv, const int *q, float scale) {
  float e = 0.0f;
  for (int j = 0; j < n; j++) {
    float r = x[j] - scale * lv[q[j]];
    e += r * r;
  }
  return e;
}

/* Puts x[0..n) on the levels at a fixed scale; returns the squared error. */
static float level_assign(const float *x, int n, const float *lv, int nlev, float scale, int *q) {
  float is = scale != 0.0f ? 1.0f / scale : 0.0f;
  for (int j = 0; j < n; j++) q[j] = nearest_level(lv, nlev, x[j] * is);
  return level_err(x, n, lv, q, scale);
}

/* The float scale (either sign) that best represents x[0..n) on the levels:
 * candidates around amax / max|level|, each refitted by least squares. */
static float level_scale_search(const float *x, int n, const float *lv, int nlev) {
  float amax = 0.0f, lmax = 0.0f;
  for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
  for (int k = 0; k < nlev; k++) lmax = fmaxf(lmax, fabsf(lv[k]));
  if (amax == 0.0f || lmax == 0.0f) return 0.0f;
  float best_s = amax / lmax, best_e = INFINITY;
  int q[256];
  for (int sgn = -1; sgn <= 1; sgn += 2) {
    for (int c = 0; c < 24; c++) {
      float s = (float)sgn * amax / lmax * (0.5f + c * (1.1f / 23.0f));
      level_assign(x, n, lv, nlev, s, q);
      double num = 0.0, den = 0.0;
      for (int j = 0; j < n; j++) {
        num += (double)x[j] * lv[q[j]];
        den += (double)lv[q[j]] * lv[q[j]];
      }
      if (den > 0.0) s = (float)(num / den);
      float e = level_err(x, n, lv, q, s);
      if (e < best_e) {
        best_e = e;
        best_s = s;
      }
    }
  }
  return best_s;
}

static void levels_of(const int8_t *tab, int nlev, float *lv) {
  for (int k = 0; k < nlev; k++) lv[k] = (float)tab[k];
}

/* Q4_0's nibble order: element j < 16 low nibble of qs[j], j >= 16 high. */
static void pack_nibbles32(const int *q, uint8_t *qs) {
  for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
}

/* ---- IQ4_NL ------------------------------------------------------------ */

void ref_dequant_iq4_nl(const void *src, float *dst, int64_t n) {
  block_iq4_nl b;
  for (int64_t i = 0; i < n / QK4_NL; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    for (int j = 0; j < QK4_NL / 2; j++) {
      dst[i * QK4_NL + j] = d * (float)kvalues_iq4nl[b.qs[j] & 15];
      dst[i * QK4_NL + j + QK4_NL / 2] = d * (float)kvalues_iq4nl[b.qs[j] >> 4];
    }
  }
}

void ref_quant_iq4_nl(const float *src, void *dst, int64_t n) {
  float lv[16];
  levels_of(kvalues_iq4nl, 16, lv);
  for (int64_t i = 0; i < n / QK4_NL; i++) {
    const float *x = src + i * QK4_NL;
    block_iq4_nl b;
    b.d = f32_to_fp16(level_scale_search(x, QK4_NL, lv, 16));
    int q[QK4_NL];
    level_assign(x, QK4_NL, lv, 16, fp16_to_f32(b.d), q);
    pack_nibbles32(q, b.qs);
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

/* ---- IQ4_XS ------------------------------------------------------------ */

static int iq4xs_ls(const block_iq4_xs *b, int ib) {
  return ((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 15) | ((b->scales_h >> 2 * ib) & 3) << 4;
}

void ref_dequant_iq4_xs(const void *src, float *dst, int64_t n) {
  block_iq4_xs b;
  for (int64_t i = 0; i < n / QK_K; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    float *y = dst + i * QK_K;
    for (int ib = 0; ib < QK_K / 32; ib++) {
      float dl = d * (float)(iq4xs_ls(&b, ib) - 32);
      const uint8_t *qs = b.qs + 16 * ib;
      for (int j = 0; j < 16; j++) {
        y[32 * ib + j] = dl * (float)kvalues_iq4nl[qs[j] & 15];
        y[32 * ib + j + 16] = dl * (float)kvalues_iq4nl[qs[j] >> 4];
      }
    }
  }
}

void ref_quant_iq4_xs(const float *src, void *dst, int64_t n) {
  float lv[16];
  levels_of(kvalues_iq4nl, 16, lv);
  for (int64_t i = 0; i < n / QK_K; i++) {
    const float *x = src + i * QK_K;
    block_iq4_xs b;
    memset(&b, 0, sizeof b);
    float s[8], smax = 0.0f;
    for (int ib = 0; ib < 8; ib++) {
      s[ib] = level_scale_search(x + 32 * ib, 32, lv, 16);
      if (fabsf(s[ib]) > fabsf(smax)) smax = s[ib];
    }
    /* the sub-block scale of largest magnitude maps to ls - 32 = -32 */
    b.d = f32_to_fp16(smax / -32.0f);
    float d = fp16_to_f32(b.d);
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int ib = 0; ib < 8; ib++) {
      int ls = qround(s[ib] * id, -32, 31) + 32;
      b.scales_l[ib / 2] |= (uint8_t)((ls & 15) << 4 * (ib % 2));
      b.scales_h |= (uint16_t)((ls >> 4) << 2 * ib);
      int q[32];
      level_assign(x + 32 * ib, 32, lv, 16, d * (float)(ls - 32), q);
      pack_nibbles32(q, b.qs + 16 * ib);
    }
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

/* ---- MXFP4 ------------------------------------------------------------- */

void ref_dequant_mxfp4(const void *src, float *dst, int64_t n) {
  block_mxfp4 b;
  for (int64_t i = 0; i < n / QK_MXFP4; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = mxfp4_half_scale(b.e);
    for (int j = 0; j < QK_MXFP4 / 2; j++) {
      dst[i * QK_MXFP4 + j] = (float)kvalues_mxfp4[b.qs[j] & 15] * d;
      dst[i * QK_MXFP4 + j + QK_MXFP4 / 2] = (float)kvalues_mxfp4[b.qs[j] >> 4] * d;
    }
  }
}

void ref_quant_mxfp4(const float *src, void *dst, int64_t n) {
  float lv[16];
  levels_of(kvalues_mxfp4, 16, lv);
  for (int64_t i = 0; i < n / QK_MXFP4; i++) {
    const float *x = src + i * QK_MXFP4;
    float amax = 0.0f;
    for (int j = 0; j < QK_MXFP4; j++) amax = fmaxf(amax, fabsf(x[j]));
    /* the smallest exponent whose largest level (12 * d) covers amax, and
     * one below it (clipping the largest element may cost less) */
    int e0 = 0;
    if (amax > 0.0f && isfinite(amax)) {
      int ex;
      frexpf(amax / 12.0f, &ex); /* amax / 12 < 2^ex */
      e0 = ex + 128;
      if (e0 < 1) e0 = 1;
      if (e0 > 255) e0 = 255;
    }
    block_mxfp4 b;
    int q[QK_MXFP4], qb[QK_MXFP4];
    float best = INFINITY;
    for (int e = e0 - 1; e <= e0; e++) {
      if (e < 0) continue;
      float err = level_assign(x, QK_MXFP4, lv, 16, mxfp4_half_scale((uint8_t)e), q);
      if (err < best || best == INFINITY) {
        best = err;
        b.e = (uint8_t)e;
        memcpy(qb, q, sizeof q);
      }
    }
    pack_nibbles32(qb, b.qs);
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

/* ---- TQ1_0, TQ2_0 ------------------------------------------------------ */

static const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};

/* Trit n (0..4) of a base-3 packed byte. */
static int tq1_trit(uint8_t b, int n) {
  uint8_t q = (uint8_t)(b * pow3[n]);
  return ((uint16_t)q * 3) >> 8;
}

/* Packs 5 trits, the first the most significant, as ceil(v * 256 / 243). */
static uint8_t tq1_pack(const int *t) {
  unsigned v = 0;
  for (int k = 0; k < 5; k++) v = v * 3 + (unsigned)t[k];
  return (uint8_t)((v * 256 + 242) / 243);
}

/* Element of trit n in byte position p of a TQ1_0 block (qs[0..48), then qh[0..4) as 48..51). */
static int tq1_elem(int p, int n) {
  if (p < 32) return 32 * n + p;
  if (p < 48) return 160 + 16 * n + (p - 32);
  return 240 + 4 * n + (p - 48);
}

void ref_dequant_tq1_0(const void *src, float *dst, int64_t n) {
  block_tq1_0 b;
  for (int64_t i = 0; i < n / QK_K; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    for (int p = 0; p < 52; p++) {
      uint8_t byte = p < 48 ? b.qs[p] : b.qh[p - 48];
      for (int t = 0; t < (p < 48 ? 5 : 4); t++)
        dst[i * QK_K + tq1_elem(p, t)] = (float)(tq1_trit(byte, t) - 1) * d;
    }
  }
}

static const float ternary_lv[3] = {-1.0f, 0.0f, 1.0f};

void ref_quant_tq1_0(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++) {
    const float *x = src + i * QK_K;
    block_tq1_0 b;
    b.d = f32_to_fp16(fabsf(level_scale_search(x, QK_K, ternary_lv, 3)));
    int q[QK_K];
    level_assign(x, QK_K, ternary_lv, 3, fp16_to_f32(b.d), q); /* q = t - 1 + 1 = index */
    for (int p = 0; p < 52; p++) {
      int t[5] = {0, 0, 0, 0, 0};
      for (int k = 0; k < (p < 48 ? 5 : 4); k++) t[k] = q[tq1_elem(p, k)];
      uint8_t byte = tq1_pack(t);
      if (p < 48) b.qs[p] = byte; else b.qh[p - 48] = byte;
    }
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

void ref_dequant_tq2_0(const void *src, float *dst, int64_t n) {
  block_tq2_0 b;
  for (int64_t i = 0; i < n / QK_K; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    for (int j = 0; j < QK_K; j++) {
      int h = j / 128, s = (j % 128) / 32, m = j % 32;
      dst[i * QK_K + j] = (float)(((b.qs[32 * h + m] >> 2 * s) & 3) - 1) * d;
    }
  }
}

void ref_quant_tq2_0(const float *src, void *dst, int64_t n) {
  static const float lv[4] = {-1.0f, 0.0f, 1.0f, 2.0f};
  for (int64_t i = 0; i < n / QK_K; i++) {
    const float *x = src + i * QK_K;
    block_tq2_0 b;
    memset(&b, 0, sizeof b);
    b.d = f32_to_fp16(level_scale_search(x, QK_K, lv, 4));
    int q[QK_K];
    level_assign(x, QK_K, lv, 4, fp16_to_f32(b.d), q);
    for (int j = 0; j < QK_K; j++) {
      int h = j / 128, s = (j % 128) / 32, m = j % 32;
      b.qs[32 * h + m] |= (uint8_t)(q[j] << 2 * s);
    }
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}
