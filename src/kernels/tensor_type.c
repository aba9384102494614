/*
 * tensor_type.c - the table of tensor types (ggml numbering) and the
 * half-precision conversions.
 *
 * Start at type_table: one row per ggml type number with its block size and
 * block bytes (facts of the GGUF format) and the reference kernels when we
 * have them. Everything else about a type is looked up here, never switched
 * on elsewhere.
 *
 * fp16/bf16: bit manipulation on the f32 representation, round to nearest
 * even, subnormals kept, NaN kept quiet. Independent check: the tests compare
 * with numpy's float16 on edge values.
 */
#include "kernels/tensor_type.h"

#include <strings.h>

#include "base/err.h"
#include "kernels/ref.h"

#define PLAIN(nm, sz) {nm, 1, sz, false, NULL, NULL}
#define OPAQUE(nm, bs, sz) {nm, bs, sz, false, NULL, NULL}
#define REF(nm, bs, sz, suffix) {nm, bs, sz, true, ref_dequant_##suffix, ref_quant_##suffix}

static const struct tensor_type_traits type_table[TENSOR_TYPE_COUNT] = {
    [TENSOR_TYPE_F32] = REF("F32", 1, 4, f32),
    [TENSOR_TYPE_F16] = REF("F16", 1, 2, f16),
    [TENSOR_TYPE_Q4_0] = REF("Q4_0", QK4_0, sizeof(block_q4_0), q4_0),
    [TENSOR_TYPE_Q4_1] = REF("Q4_1", QK4_1, sizeof(block_q4_1), q4_1),
    [TENSOR_TYPE_Q5_0] = REF("Q5_0", QK5_0, sizeof(block_q5_0), q5_0),
    [TENSOR_TYPE_Q5_1] = REF("Q5_1", QK5_1, sizeof(block_q5_1), q5_1),
    [TENSOR_TYPE_Q8_0] = REF("Q8_0", QK8_0, sizeof(block_q8_0), q8_0),
    [TENSOR_TYPE_Q8_1] = OPAQUE("Q8_1", 32, sizeof(block_q8_1)),
    [TENSOR_TYPE_Q2_K] = REF("Q2_K", QK_K, sizeof(block_q2_K), q2_K),
    [TENSOR_TYPE_Q3_K] = REF("Q3_K", QK_K, sizeof(block_q3_K), q3_K),
    [TENSOR_TYPE_Q4_K] = REF("Q4_K", QK_K, sizeof(block_q4_K), q4_K),
    [TENSOR_TYPE_Q5_K] = REF("Q5_K", QK_K, sizeof(block_q5_K), q5_K),
    [TENSOR_TYPE_Q6_K] = REF("Q6_K", QK_K, sizeof(block_q6_K), q6_K),
    [TENSOR_TYPE_Q8_K] = REF("Q8_K", QK_K, sizeof(block_q8_K), q8_K),
    [TENSOR_TYPE_IQ2_XXS] = REF("IQ2_XXS", QK_K, sizeof(block_iq2_xxs), iq2_xxs),
    [TENSOR_TYPE_IQ2_XS] = REF("IQ2_XS", QK_K, sizeof(block_iq2_xs), iq2_xs),
    [TENSOR_TYPE_IQ3_XXS] = REF("IQ3_XXS", QK_K, sizeof(block_iq3_xxs), iq3_xxs),
    [TENSOR_TYPE_IQ1_S] = REF("IQ1_S", QK_K, sizeof(block_iq1_s), iq1_s),
    [TENSOR_TYPE_IQ4_NL] = REF("IQ4_NL", QK4_NL, sizeof(block_iq4_nl), iq4_nl),
    [TENSOR_TYPE_IQ3_S] = REF("IQ3_S", QK_K, sizeof(block_iq3_s), iq3_s),
    [TENSOR_TYPE_IQ2_S] = REF("IQ2_S", QK_K, sizeof(block_iq2_s), iq2_s),
    [TENSOR_TYPE_IQ4_XS] = REF("IQ4_XS", QK_K, sizeof(block_iq4_xs), iq4_xs),
    [TENSOR_TYPE_I8] = PLAIN("I8", 1),
    [TENSOR_TYPE_I16] = PLAIN("I16", 2),
    [TENSOR_TYPE_I32] = PLAIN("I32", 4),
    [TENSOR_TYPE_I64] = PLAIN("I64", 8),
    [TENSOR_TYPE_F64] = PLAIN("F64", 8),
    [TENSOR_TYPE_IQ1_M] = REF("IQ1_M", QK_K, sizeof(block_iq1_m), iq1_m),
    [TENSOR_TYPE_BF16] = REF("BF16", 1, 2, bf16),
    [TENSOR_TYPE_TQ1_0] = REF("TQ1_0", QK_K, sizeof(block_tq1_0), tq1_0),
    [TENSOR_TYPE_TQ2_0] = REF("TQ2_0", QK_K, sizeof(block_tq2_0), tq2_0),
    [TENSOR_TYPE_MXFP4] = REF("MXFP4", QK_MXFP4, sizeof(block_mxfp4), mxfp4),
};

const struct tensor_type_traits *tensor_type_get(uint32_t t) {
  if (t >= TENSOR_TYPE_COUNT || !type_table[t].name) return NULL;
  return &type_table[t];
}

const char *tensor_type_name(uint32_t t) {
  const struct tensor_type_traits *tr = tensor_type_get(t);
  return tr ? tr->name : "unknown";
}

int tensor_type_from_name(const char *name, enum tensor_type *out) {
  for (uint32_t t = 0; t < TENSOR_TYPE_COUNT; t++) {
    if (type_table[t].name && strcasecmp(type_table[t].name, name) == 0) {
      *out = (enum tensor_type)t;
      return 0;
    }
  }
  return err_set(ERR_NOT_FOUND, "tensor type '%s' is not known", name);
}

int tensor_type_row_bytes(uint32_t t, int64_t n, size_t *out) {
  const struct tensor_type_traits *tr = tensor_type_get(t);
  if (!tr) return err_set(ERR_UNSUPPORTED, "tensor type %u is not known", t);
  if (n < 0 || n % tr->block_size != 0)
    return err_set(ERR_RANGE, "%lld elements are not a multiple of %s's block size %u",
                   (long long)n, tr->name, tr->block_size);
  uint64_t blocks = (uint64_t)n / tr->block_size;
  if (blocks > SIZE_MAX / tr->type_size)
    return err_set(ERR_TOO_LARGE, "%lld elements of %s overflow a size", (long long)n, tr->name);
  *out = (size_t)blocks * tr->type_size;
  return 0;
}

/* ---- half precision ---------------------------------------------------- */

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static inline float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float fp16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0x1f) /* inf or nan: keep the payload, high bits of f32 mantissa */
    return bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return bits_f32(sign);
    /* subnormal: man * 2^-24, exact in f32 */
    float v = (float)man * 0x1p-24f;
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_fp16(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint32_t exp = (u >> 23) & 0xff;
  uint32_t man = u & 0x7fffff;
  if (exp == 0xff) {
    if (man == 0) return sign | 0x7c00;                          /* inf */
    return (uint16_t)(sign | 0x7e00 | (man >> 13));               /* quiet nan */
  }
  int32_t e = (int32_t)exp - 127 + 15; /* biased half exponent */
  if (e >= 0x1f) return sign | 0x7c00;  /* overflow to inf */
  if (e <= 0) {
    /* half subnormal (or zero): value = m * 2^-24 with m = full mantissa
     * shifted right by (14 - e) ... rounded to nearest even. */
    if (e < -10) return sign; /* below half the smallest subnormal: rounds to 0 */
    uint32_t m = man | 0x800000;       /* 24-bit significand */
    uint32_t shift = (uint32_t)(14 - e); /* 14..24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return (uint16_t)(sign | q); /* q may carry into the exponent: still right */
  }
  uint32_t q = ((uint32_t)e << 10) | (man >> 13);
  uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++; /* may carry to inf: right */
  return (uint16_t)(sign | q);
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
  uint32_t rounding = 0x7fff + ((u >> 16) & 1);
  return (uint16_t)((u + rounding) >> 16);
}
