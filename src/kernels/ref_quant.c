/*
 * ref_quant.c - reference dequantize/quantize for the plain and 32-element
 * block types (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and the
 * table-driven entry points of ref.h. The K-quants are in ref_quant_k.c.
 *
 * Dequantization formulas and bit layouts are the GGUF/ggml ones (see the
 * block comments in tensor_type.h); the arithmetic is written in the order
 * ggml's reference uses (e.g. (q - 8) * d, q * d + m) so results are
 * bit-identical to other decoders, which tools/quant_ref.py checks.
 * Quantizers: absmax (symmetric types, signed max mapped to the most negative
 * level as ggml does) or min/max (types with an offset).
 */
#include <math.h>

#include "base/err.h"
#include "kernels/ref.h"
#include "kernels/ref_round.h"

/* ---- plain types ------------------------------------------------------- */

void ref_dequant_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }
void ref_quant_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }

void ref_dequant_f16(const void *src, float *dst, int64_t n) {
  const uint8_t *p = src;
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    dst[i] = fp16_to_f32(h);
  }
}

void ref_quant_f16(const float *src, void *dst, int64_t n) {
  uint8_t *p = dst;
  for (int64_t i = 0; i < n; i++) {
    uint16_t h = f32_to_fp16(src[i]);
    memcpy(p + 2 * i, &h, 2);
  }
}

void ref_dequant_bf16(const void *src, float *dst, int64_t n) {
  const uint8_t *p = src;
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    dst[i] = bf16_to_f32(h);
  }
}

void ref_quant_bf16(const float *src, void *dst, int64_t n) {
  uint8_t *p = dst;
  for (int64_t i = 0; i < n; i++) {
    uint16_t h = f32_to_bf16(src[i]);
    memcpy(p + 2 * i, &h, 2);
  }
}

/* ---- 32-element blocks ------------------------------------------------- */

/* The element of largest magnitude, with its sign. */
static float signed_absmax(const float *x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; j++) {
    if (fabsf(x[j]) > amax) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  return max;
}


void ref_dequant_q4_0(const void *src, float *dst, int64_t n) {
  block_q4_0 b;
  for (int64_t i = 0; i < n / QK4_0; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    for (int j = 0; j < QK4_0 / 2; j++) {
      dst[i * QK4_0 + j] = (float)((b.qs[j] & 15) - 8) * d;
      dst[i * QK4_0 + j + QK4_0 / 2] = (float)((b.qs[j] >> 4) - 8) * d;
    }
  }
}

void ref_quant_q4_0(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK4_0; i++) {
    const float *x = src + i * QK4_0;
    block_q4_0 b;
    float d = signed_absmax(x, QK4_0) / -8.0f; /* max maps to level -8 */
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = f32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; j++) {
      int q0 = qfloor(x[j] * id + 8.5f, 0, 15);
      int q1 = qfloor(x[j + QK4_0 / 2] * id + 8.5f, 0, 15);
      b.qs[j] = (uint8_t)(q0 | q1 << 4);
    }
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

void ref_dequant_q4_1(const void *src, float *dst, int64_t n) {
  block_q4_1 b;
  for (int64_t i = 0; i < n / QK4_1; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d), m = fp16_to_f32(b.m);
    for (int j = 0; j < QK4_1 / 2; j++) {
      dst[i * QK4_1 + j] = (float)(b.qs[j] & 15) * d + m;
      dst[i * QK4_1 + j + QK4_1 / 2] = (float)(b.qs[j] >> 4) * d + m;
    }
  }
}

/* min/max of a block */
static void block_minmax(const float *x, int n, float *mn, float *mx) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < n; j++) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
  *mn = lo;
  *mx = hi;
}

void ref_quant_q4_1(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK4_1; i++) {
    const float *x = src + i * QK4_1;
    block_q4_1 b;
    float mn, mx;
    block_minmax(x, QK4_1, &mn, &mx);
    float d = (mx - mn) / 15.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = f32_to_fp16(d);
    b.m = f32_to_fp16(mn);
    float m16 = fp16_to_f32(b.m); /* quantize against the stored offset */
    for (int j = 0; j < QK4_1 / 2; j++) {
      int q0 = qround((x[j] - m16) * id, 0, 15);
      int q1 = qround((x[j + QK4_1 / 2] - m16) * id, 0, 15);
      b.qs[j] = (uint8_t)(q0 | q1 << 4);
    }
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

static inline uint32_t ld_u32le(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void st_u32le(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

void ref_dequant_q5_0(const void *src, float *dst, int64_t n) {
  block_q5_0 b;
  for (int64_t i = 0; i < n / QK5_0; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    uint32_t qh = ld_u32le(b.qh);
    for (int j = 0; j < QK5_0 / 2; j++) {
      int q0 = (b.qs[j] & 15) | (int)((qh >> j) & 1) << 4;
      int q1 = (b.qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
      dst[i * QK5_0 + j] = (float)(q0 - 16) * d;
      dst[i * QK5_0 + j + QK5_0 / 2] = (float)(q1 - 16) * d;
    }
  }
}

void ref_quant_q5_0(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK5_0; i++) {
    const float *x = src + i * QK5_0;
    block_q5_0 b;
    float d = signed_absmax(x, QK5_0) / -16.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = f32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_0 / 2; j++) {
      int q0 = qfloor(x[j] * id + 16.5f, 0, 31);
      int q1 = qfloor(x[j + QK5_0 / 2] * id + 16.5f, 0, 31);
      b.qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
      qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
    }
    st_u32le(b.qh, qh);
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

void ref_dequant_q5_1(const void *src, float *dst, int64_t n) {
  block_q5_1 b;
  for (int64_t i = 0; i < n / QK5_1; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d), m = fp16_to_f32(b.m);
    uint32_t qh = ld_u32le(b.qh);
    for (int j = 0; j < QK5_1 / 2; j++) {
      int q0 = (b.qs[j] & 15) | (int)((qh >> j) & 1) << 4;
      int q1 = (b.qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
      dst[i * QK5_1 + j] = (float)q0 * d + m;
      dst[i * QK5_1 + j + QK5_1 / 2] = (float)q1 * d + m;
    }
  }
}

void ref_quant_q5_1(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK5_1; i++) {
    const float *x = src + i * QK5_1;
    block_q5_1 b;
    float mn, mx;
    block_minmax(x, QK5_1, &mn, &mx);
    float d = (mx - mn) / 31.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = f32_to_fp16(d);
    b.m = f32_to_fp16(mn);
    float m16 = fp16_to_f32(b.m);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_1 / 2; j++) {
      int q0 = qround((x[j] - m16) * id, 0, 31);
      int q1 = qround((x[j + QK5_1 / 2] - m16) * id, 0, 31);
      b.qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
      qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
    }
    st_u32le(b.qh, qh);
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

void ref_dequant_q8_0(const void *src, float *dst, int64_t n) {
  block_q8_0 b;
  for (int64_t i = 0; i < n / QK8_0; i++) {
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    for (int j = 0; j < QK8_0; j++) dst[i * QK8_0 + j] = (float)b.qs[j] * d;
  }
}

void ref_quant_q8_0(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK8_0; i++) {
    const float *x = src + i * QK8_0;
    block_q8_0 b;
    float amax = fabsf(signed_absmax(x, QK8_0));
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = f32_to_fp16(d);
    for (int j = 0; j < QK8_0; j++) b.qs[j] = (int8_t)qround(x[j] * id, -127, 127);
    memcpy((uint8_t *)dst + i * sizeof b, &b, sizeof b);
  }
}

/* ---- table-driven entry points ----------------------------------------- */

static int ref_check(uint32_t type, int64_t n, const struct tensor_type_traits **out) {
  const struct tensor_type_traits *tr = tensor_type_get(type);
  if (!tr || !tr->supported)
    return err_set(ERR_UNSUPPORTED, "tensor type %s (%u) has no reference kernel",
                   tensor_type_name(type), type);
  if (n < 0 || n % tr->block_size != 0)
    return err_set(ERR_RANGE, "%lld elements are not a multiple of %s's block size %u",
                   (long long)n, tr->name, tr->block_size);
  *out = tr;
  return 0;
}

int ref_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
  const struct tensor_type_traits *tr;
  int rc = ref_check(type, n, &tr);
  if (rc) return rc;
  tr->dequantize_ref(src, dst, n);
  return 0;
}

int ref_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
  const struct tensor_type_traits *tr;
  int rc = ref_check(type, n, &tr);
  if (rc) return rc;
  tr->quantize_ref(src, dst, n);
  return 0;
}

int ref_vec_dot(uint32_t type, const void *row, const float *x, int64_t n, float *out) {
  const struct tensor_type_traits *tr;
  int rc = ref_check(type, n, &tr);
  if (rc) return rc;
  /* dequantize a chunk of whole blocks (256 elements, or one block) at a time */
  int64_t chunk = tr->block_size >= 256 ? tr->block_size : 256 - 256 % tr->block_size;
  float tmp[256];
  double acc = 0.0;
  const uint8_t *p = row;
  for (int64_t i = 0; i < n; i += chunk) {
    int64_t m = n - i < chunk ? n - i : chunk;
    tr->dequantize_ref(p + (size_t)(i / tr->block_size) * tr->type_size, tmp, m);
    for (int64_t j = 0; j < m; j++) acc += (double)tmp[j] * (double)x[i + j];
  }
  *out = (float)acc;
  return 0;
}
