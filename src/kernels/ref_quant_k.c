/*
 * ref_quant_k.c - reference dequantize/quantize for the K-quants (Q2_K,
 * Q3_K, Q4_K, Q5_K, Q6_K) and the Q8_K activation type.
 *
 * All K-quants use 256-element super-blocks split into sub-blocks (16 of 16
 * or 8 of 32) that each have a small integer scale (and for Q2/Q4/Q5 a min);
 * the super-block stores one f16 factor for the scales (d) and one for the
 * mins (dmin). Dequantization walks elements by index with the formulas of
 * the block comments in tensor_type.h, so this file reads as the layout
 * documentation; the arithmetic order is ggml's ((d*sc)*q - dmin*m).
 *
 * Quantizers (ours, simple): per sub-block a scale from min/max (offset
 * types) or the signed absmax (symmetric types), with a five-candidate scan of
 * the scale that keeps the lowest squared error; then the sub-block scales are
 * themselves quantized against the super-block maximum, and the values are
 * re-quantized with the scales exactly as they will be decoded.
 */
#include <math.h>

#include "kernels/ref.h"
#include "kernels/ref_round.h"



/* Best scale for x = scale*q - min (q in 0..nmax), min = max(0, -min(x)).
 * Returns the scale, writes the min. */
static float sub_scale_offset(const float *x, int n, int nmax, float *min_out) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < n; j++) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
  if (lo > 0) lo = 0;
  *min_out = -lo;
  if (hi <= lo) return 0.0f;
  float best = (hi - lo) / (float)nmax, best_err = INFINITY;
  for (int t = -2; t <= 2; t++) {
    float scale = (hi - lo) / ((float)nmax + 0.3f * (float)t);
    float err = 0;
    for (int j = 0; j < n; j++) {
      int q = qround((x[j] - lo) / scale, 0, nmax);
      float e = scale * (float)q + lo - x[j];
      err += e * e;
    }
    if (err < best_err) best_err = err, best = scale;
  }
  return best;
}

/* Best signed scale for x = scale*q with q in -(nneg)..(nneg-1): the element
 * of largest magnitude maps to -nneg, then a short scan around it. */
static float sub_scale_sym(const float *x, int n, int nneg) {
  float amax = 0, smax = 0;
  for (int j = 0; j < n; j++) {
    if (fabsf(x[j]) > amax) amax = fabsf(x[j]), smax = x[j];
  }
  if (amax == 0) return 0.0f;
  float best = smax / (float)-nneg, best_err = INFINITY;
  for (int t = -2; t <= 2; t++) {
    float scale = smax / ((float)-nneg + 0.25f * (float)t * (smax > 0 ? -1.0f : 1.0f));
    float err = 0;
    for (int j = 0; j < n; j++) {
      int q = qround(x[j] / scale, -nneg, nneg - 1);
      float e = scale * (float)q - x[j];
      err += e * e;
    }
    if (err < best_err) best_err = err, best = scale;
  }
  return best;
}

/* Quantizes the positive values v[0..n) to integers 0..lmax against their
 * maximum; returns the factor (max/lmax) rounded through f16, writes levels. */
static uint16_t super_quant_pos(const float *v, int n, int lmax, int *lv) {
  float mx = 0;
  for (int k = 0; k < n; k++)
    if (v[k] > mx) mx = v[k];
  uint16_t dh = f32_to_fp16(mx / (float)lmax);
  float d = fp16_to_f32(dh);
  for (int k = 0; k < n; k++) lv[k] = d > 0 ? qround(v[k] / d, 0, lmax) : 0;
  return dh;
}

/* Signed version: levels in -lneg..lneg-1, the largest magnitude maps to -lneg. */
static uint16_t super_quant_sym(const float *v, int n, int lneg, int *lv) {
  float amax = 0, smax = 0;
  for (int k = 0; k < n; k++)
    if (fabsf(v[k]) > amax) amax = fabsf(v[k]), smax = v[k];
  uint16_t dh = f32_to_fp16(smax / (float)-lneg);
  float d = fp16_to_f32(dh);
  for (int k = 0; k < n; k++) lv[k] = d != 0 ? qround(v[k] / d, -lneg, lneg - 1) : 0;
  return dh;
}

/* ---- Q2_K --------------------------------------------------------------- */

void ref_dequant_q2_K(const void *src, float *dst, int64_t n) {
  block_q2_K b;
  for (int64_t i = 0; i < n / QK_K; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
    for (int j = 0; j < QK_K; j++) {
      int h = j / 128, s = (j % 128) / 32, l = j % 32;
      int q = (b.qs[32 * h + l] >> (2 * s)) & 3;
      int k = 8 * h + 2 * s + l / 16;
      float dl = d * (float)(b.scales[k] & 15);
      float ml = dmin * (float)(b.scales[k] >> 4);
      dst[i * QK_K + j] = dl * (float)q - ml;
    }
  }
}

/* Element j of a 16-sub-block super-block belongs to sub-block k(j). */
static int sub16_of(int j) { return 8 * (j / 128) + 2 * ((j % 128) / 32) + (j % 32) / 16; }

/* Gathers the 16 elements of sub-block k (layout order of Q2_K/Q3_K/Q6_K). */
static void gather16(const float *x, int k, float *out) {
  int c = 0;
  for (int j = 0; j < QK_K; j++)
    if (sub16_of(j) == k) out[c++] = x[j];
}

void ref_quant_q2_K(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++) {
    const float *x = src + i * QK_K;
    block_q2_K b;
    memset(&b, 0, sizeof b);
    float sc[16], mn[16], tmp[16];
    int ls[16], lm[16];
    for (int k = 0; k < 16; k++) {
      gather16(x, k, tmp);
      sc[k] = sub_scale_offset(tmp, 16, 3, &mn[k]);
    }
    b.d = super_quant_pos(sc, 16, 15, ls);
    b.dmin = super_quant_pos(mn, 16, 15, lm);
    float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
    for (int k = 0; k < 16; k++) b.scales[k] = (uint8_t)(ls[k] | lm[k] << 4);
    for (int j = 0; j < QK_K; j++) {
      int h = j / 128, s = (j % 128) / 32, l = j % 32, k = sub16_of(j);
      float dl = d * (float)ls[k], ml = dmin * (float)lm[k];
      int q = dl > 0 ? qround((x[j] + ml) / dl, 0, 3) : 0;
      b.qs[32 * h + l] |= (uint8_t)(q << (2 * s));
    }
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

/* ---- Q3_K --------------------------------------------------------------- */

static int q3k_scale(const uint8_t *sc, int k) {
  int lo = k < 8 ? sc[k] & 15 : sc[k - 8] >> 4;
  int hi = (sc[8 + k % 4] >> (2 * (k / 4))) & 3;
  return lo | hi << 4;
}

void ref_dequant_q3_K(const void *src, float *dst, int64_t n) {
  block_q3_K b;
  for (int64_t i = 0; i < n / QK_K; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    for (int j = 0; j < QK_K; j++) {
      int h = j / 128, s = (j % 128) / 32, l = j % 32, k = sub16_of(j);
      int low = (b.qs[32 * h + l] >> (2 * s)) & 3;
      int high = (b.hmask[l] >> (4 * h + s)) & 1;
      float dl = d * (float)(q3k_scale(b.scales, k) - 32);
      dst[i * QK_K + j] = dl * (float)(low - (high ? 0 : 4));
    }
  }
}

void ref_quant_q3_K(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++) {
    const float *x = src + i * QK_K;
    block_q3_K b;
    memset(&b, 0, sizeof b);
    float sc[16], tmp[16];
    int ls[16];
    for (int k = 0; k < 16; k++) {
      gather16(x, k, tmp);
      sc[k] = sub_scale_sym(tmp, 16, 4);
    }
    b.d = super_quant_sym(sc, 16, 32, ls);
    float d = fp16_to_f32(b.d);
    for (int k = 0; k < 16; k++) {
      int u = ls[k] + 32; /* 0..63 */
      if (k < 8) b.scales[k] |= (uint8_t)(u & 15);
      else b.scales[k - 8] |= (uint8_t)((u & 15) << 4);
      b.scales[8 + k % 4] |= (uint8_t)((u >> 4) << (2 * (k / 4)));
    }
    for (int j = 0; j < QK_K; j++) {
      int h = j / 128, s = (j % 128) / 32, l = j % 32, k = sub16_of(j);
      float dl = d * (float)ls[k];
      int q = dl != 0 ? qround(x[j] / dl, -4, 3) : 0;
      int u = q + 4; /* 0..7 */
      b.qs[32 * h + l] |= (uint8_t)((u & 3) << (2 * s));
      if (u & 4) b.hmask[l] |= (uint8_t)(1 << (4 * h + s));
    }
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

/* ---- Q4_K / Q5_K -------------------------------------------------------- */

static void scales12_get(const uint8_t *b, int k, int *sc, int *mn) {
  if (k < 4) {
    *sc = b[k] & 63;
    *mn = b[k + 4] & 63;
  } else {
    *sc = (b[k + 4] & 15) | (b[k - 4] >> 6) << 4;
    *mn = (b[k + 4] >> 4) | (b[k] >> 6) << 4;
  }
}

static void scales12_put(uint8_t *b, const int *sc, const int *mn) {
  memset(b, 0, 12);
  for (int k = 0; k < 8; k++) {
    if (k < 4) {
      b[k] |= (uint8_t)sc[k];
      b[k + 4] |= (uint8_t)mn[k];
    } else {
      b[k + 4] = (uint8_t)((sc[k] & 15) | (mn[k] & 15) << 4);
      b[k - 4] |= (uint8_t)((sc[k] >> 4) << 6);
      b[k] |= (uint8_t)((mn[k] >> 4) << 6);
    }
  }
}

/* Shared by Q4_K (bits 4) and Q5_K (bits 5): element j = 64p + 32h + l is in
 * sub-block 2p + h (contiguous runs of 32). */
static void dequant_q45_K(const uint8_t *scales, uint16_t dh, uint16_t dminh, const uint8_t *qs,
                          const uint8_t *qh, float *y) {
  float d = fp16_to_f32(dh), dmin = fp16_to_f32(dminh);
  int sc[8], mn[8];
  for (int k = 0; k < 8; k++) scales12_get(scales, k, &sc[k], &mn[k]);
  for (int j = 0; j < QK_K; j++) {
    int p = j / 64, h = (j % 64) / 32, l = j % 32, k = 2 * p + h;
    int q = (qs[32 * p + l] >> (4 * h)) & 15;
    if (qh) q |= ((qh[l] >> k) & 1) << 4;
    float d1 = d * (float)sc[k], m1 = dmin * (float)mn[k];
    y[j] = d1 * (float)q - m1;
  }
}

static void quant_q45_K(const float *x, int nmax, uint8_t *scales, uint16_t *dh, uint16_t *dminh,
                        uint8_t *qs, uint8_t *qh) {
  float sc[8], mn[8];
  int ls[8], lm[8];
  for (int k = 0; k < 8; k++) sc[k] = sub_scale_offset(x + 32 * k, 32, nmax, &mn[k]);
  *dh = super_quant_pos(sc, 8, 63, ls);
  *dminh = super_quant_pos(mn, 8, 63, lm);
  scales12_put(scales, ls, lm);
  float d = fp16_to_f32(*dh), dmin = fp16_to_f32(*dminh);
  memset(qs, 0, QK_K / 2);
  if (qh) memset(qh, 0, QK_K / 8);
  for (int j = 0; j < QK_K; j++) {
    int p = j / 64, h = (j % 64) / 32, l = j % 32, k = 2 * p + h;
    float d1 = d * (float)ls[k], m1 = dmin * (float)lm[k];
    int q = d1 > 0 ? qround((x[j] + m1) / d1, 0, nmax) : 0;
    qs[32 * p + l] |= (uint8_t)((q & 15) << (4 * h));
    if (qh && (q & 16)) qh[l] |= (uint8_t)(1 << k);
  }
}

void ref_dequant_q4_K(const void *src, float *dst, int64_t n) {
  block_q4_K b;
  for (int64_t i = 0; i < n / QK_K; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    dequant_q45_K(b.scales, b.d, b.dmin, b.qs, NULL, dst + i * QK_K);
  }
}

void ref_quant_q4_K(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++) {
    block_q4_K b;
    quant_q45_K(src + i * QK_K, 15, b.scales, &b.d, &b.dmin, b.qs, NULL);
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

void ref_dequant_q5_K(const void *src, float *dst, int64_t n) {
  block_q5_K b;
  for (int64_t i = 0; i < n / QK_K; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    dequant_q45_K(b.scales, b.d, b.dmin, b.qs, b.qh, dst + i * QK_K);
  }
}

void ref_quant_q5_K(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++) {
    block_q5_K b;
    quant_q45_K(src + i * QK_K, 31, b.scales, &b.d, &b.dmin, b.qs, b.qh);
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

/* ---- Q6_K --------------------------------------------------------------- */

void ref_dequant_q6_K(const void *src, float *dst, int64_t n) {
  block_q6_K b;
  for (int64_t i = 0; i < n / QK_K; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    for (int j = 0; j < QK_K; j++) {
      int h = j / 128, s = (j % 128) / 32, l = j % 32, k = sub16_of(j);
      int low = (b.ql[64 * h + l + 32 * (s & 1)] >> (4 * (s >> 1))) & 15;
      int high = (b.qh[32 * h + l] >> (2 * s)) & 3;
      int q = (low | high << 4) - 32;
      dst[i * QK_K + j] = d * (float)b.scales[k] * (float)q;
    }
  }
}

void ref_quant_q6_K(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++) {
    const float *x = src + i * QK_K;
    block_q6_K b;
    memset(&b, 0, sizeof b);
    float sc[16], tmp[16];
    int ls[16];
    for (int k = 0; k < 16; k++) {
      gather16(x, k, tmp);
      sc[k] = sub_scale_sym(tmp, 16, 32);
    }
    b.d = super_quant_sym(sc, 16, 128, ls);
    float d = fp16_to_f32(b.d);
    for (int k = 0; k < 16; k++) b.scales[k] = (int8_t)ls[k];
    for (int j = 0; j < QK_K; j++) {
      int h = j / 128, s = (j % 128) / 32, l = j % 32, k = sub16_of(j);
      float dl = d * (float)ls[k];
      int u = (dl != 0 ? qround(x[j] / dl, -32, 31) : 0) + 32; /* 0..63 */
      b.ql[64 * h + l + 32 * (s & 1)] |= (uint8_t)((u & 15) << (4 * (s >> 1)));
      b.qh[32 * h + l] |= (uint8_t)((u >> 4) << (2 * s));
    }
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

/* ---- Q8_K --------------------------------------------------------------- */

void ref_dequant_q8_K(const void *src, float *dst, int64_t n) {
  block_q8_K b;
  for (int64_t i = 0; i < n / QK_K; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    for (int j = 0; j < QK_K; j++) dst[i * QK_K + j] = b.d * (float)b.qs[j];
  }
}

void ref_quant_q8_K(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++) {
    const float *x = src + i * QK_K;
    block_q8_K b;
    float amax = 0;
    for (int j = 0; j < QK_K; j++)
      if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    b.d = amax / 127.0f;
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    for (int j = 0; j < QK_K; j++) b.qs[j] = (int8_t)qround(x[j] * id, -127, 127);
    for (int g = 0; g < QK_K / 16; g++) {
      int sum = 0;
      for (int l = 0; l < 16; l++) sum += b.qs[16 * g + l];
      b.bsums[g] = (int16_t)sum;
    }
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}
