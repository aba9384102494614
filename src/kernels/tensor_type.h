/*
 * tensor_type.h - the tensor element types GGUF files store, one table of
 * facts per type, the block layouts of the quantized types, and the fp16 /
 * bf16 conversions.
 *
 * The enum uses ggml's numbering because GGUF stores that number in every
 * tensor info. Gaps (4, 5, 31..33, 36..38) are types ggml removed; they stay
 * unknown here. A type that is "known" has a block size and a byte size, so a
 * GGUF reader can check a tensor's extent; "supported" means the reference
 * kernels (kernels/ref.h) can dequantize and quantize it.
 *
 * Block structs are the bytes on disk, little-endian, with no padding (each
 * has a _Static_assert on its size). Multi-byte fields of a block may be
 * unaligned in a file; the reference kernels read them with memcpy.
 */
#ifndef PARLEY_KERNELS_TENSOR_TYPE_H
#define PARLEY_KERNELS_TENSOR_TYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum tensor_type {
  TENSOR_TYPE_F32 = 0,
  TENSOR_TYPE_F16 = 1,
  TENSOR_TYPE_Q4_0 = 2,
  TENSOR_TYPE_Q4_1 = 3,
  TENSOR_TYPE_Q5_0 = 6,
  TENSOR_TYPE_Q5_1 = 7,
  TENSOR_TYPE_Q8_0 = 8,
  TENSOR_TYPE_Q8_1 = 9,
  TENSOR_TYPE_Q2_K = 10,
  TENSOR_TYPE_Q3_K = 11,
  TENSOR_TYPE_Q4_K = 12,
  TENSOR_TYPE_Q5_K = 13,
  TENSOR_TYPE_Q6_K = 14,
  TENSOR_TYPE_Q8_K = 15,
  TENSOR_TYPE_IQ2_XXS = 16,
  TENSOR_TYPE_IQ2_XS = 17,
  TENSOR_TYPE_IQ3_XXS = 18,
  TENSOR_TYPE_IQ1_S = 19,
  TENSOR_TYPE_IQ4_NL = 20,
  TENSOR_TYPE_IQ3_S = 21,
  TENSOR_TYPE_IQ2_S = 22,
  TENSOR_TYPE_IQ4_XS = 23,
  TENSOR_TYPE_I8 = 24,
  TENSOR_TYPE_I16 = 25,
  TENSOR_TYPE_I32 = 26,
  TENSOR_TYPE_I64 = 27,
  TENSOR_TYPE_F64 = 28,
  TENSOR_TYPE_IQ1_M = 29,
  TENSOR_TYPE_BF16 = 30,
  TENSOR_TYPE_TQ1_0 = 34,
  TENSOR_TYPE_TQ2_0 = 35,
  TENSOR_TYPE_MXFP4 = 39,
  TENSOR_TYPE_COUNT = 40
};

/* Dequantizes n elements (a multiple of the block size) from blocks to f32. */
typedef void (*tensor_dequant_fn)(const void *src, float *dst, int64_t n);
/* Quantizes n elements (a multiple of the block size) from f32 to blocks. */
typedef void (*tensor_quant_fn)(const float *src, void *dst, int64_t n);

struct tensor_type_traits {
  const char *name;          /* "Q4_K"; NULL for a number that is no type */
  uint32_t block_size;       /* elements per block (1 for plain types) */
  uint32_t type_size;        /* bytes per block */
  bool supported;            /* reference dequantize/quantize exist */
  tensor_dequant_fn dequantize_ref;  /* NULL when !supported */
  tensor_quant_fn quantize_ref;      /* NULL when !supported */
};

/* The traits of t, or NULL when t is not a known type number. */
const struct tensor_type_traits *tensor_type_get(uint32_t t);
/* Name of t ("Q6_K") or "unknown". */
const char *tensor_type_name(uint32_t t);
/* Finds a type by name (case-insensitive); returns 0 or ERR_NOT_FOUND. */
int tensor_type_from_name(const char *name, enum tensor_type *out);
/* Bytes of a row of n elements: ERR_RANGE when n is not a multiple of the
 * block size, ERR_UNSUPPORTED for an unknown type; 0 and *out otherwise. */
int tensor_type_row_bytes(uint32_t t, int64_t n, size_t *out);

/* ---- block layouts (ggml / GGUF) ---------------------------------------
 * d, dmin and m are IEEE half floats stored as uint16_t bits. "q" values are
 * unsigned integers unless said otherwise. Element j of a block is x[j]. */

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK_K 256 /* super-block size of the K-quants */

/* Q4_0, 18 bytes: x[j] = (q[j] - 8) * d.
 * qs[i] low nibble is q[i], high nibble is q[i + 16], i in 0..15. */
typedef struct {
  uint16_t d;              /* f16 scale */
  uint8_t qs[QK4_0 / 2];   /* 16 bytes: 32 x 4-bit q */
} block_q4_0;

/* Q4_1, 20 bytes: x[j] = q[j] * d + m; nibbles as in Q4_0. */
typedef struct {
  uint16_t d;              /* f16 scale */
  uint16_t m;              /* f16 offset (the block minimum) */
  uint8_t qs[QK4_1 / 2];
} block_q4_1;

/* Q5_0, 22 bytes: x[j] = (q[j] - 16) * d, q 5-bit. Low 4 bits as in Q4_0;
 * bit 4 of q[j] is bit j of qh read as a little-endian uint32. */
typedef struct {
  uint16_t d;
  uint8_t qh[4];           /* 32 high bits */
  uint8_t qs[QK5_0 / 2];
} block_q5_0;

/* Q5_1, 24 bytes: x[j] = q[j] * d + m; bits as in Q5_0. */
typedef struct {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[QK5_1 / 2];
} block_q5_1;

/* Q8_0, 34 bytes: x[j] = qs[j] * d, qs signed. */
typedef struct {
  uint16_t d;
  int8_t qs[QK8_0];
} block_q8_0;

/* Q8_1, 36 bytes: as Q8_0 plus s = d * sum(qs) (an activation type). */
typedef struct {
  uint16_t d;
  uint16_t s;
  int8_t qs[QK8_0];
} block_q8_1;

/* Q2_K, 84 bytes, 256 elements in 16 sub-blocks of 16.
 * Sub-block k: scale = d * (scales[k] & 15), min = dmin * (scales[k] >> 4),
 * x = scale * q - min, q 2-bit. Element j = 128*h + 32*s + l (h 0..1, s 0..3,
 * l 0..31): q = (qs[32*h + l] >> 2*s) & 3, sub-block k = 8*h + 2*s + l/16. */
typedef struct {
  uint8_t scales[QK_K / 16]; /* 16 bytes: 4-bit scale (low) | 4-bit min (high) */
  uint8_t qs[QK_K / 4];      /* 64 bytes: 2-bit q */
  uint16_t d;                /* f16 super-block scale of the scales */
  uint16_t dmin;             /* f16 super-block scale of the mins */
} block_q2_K;

/* Q3_K, 110 bytes, 256 elements in 16 sub-blocks of 16. x = d * (sc - 32) * q
 * with q = low2 - (high bit set ? 0 : 4) in -4..3. Element j = 128*h + 32*s + l:
 * low2 = (qs[32*h + l] >> 2*s) & 3, high bit = hmask[l] bit (4*h + s),
 * sub-block k = 8*h + 2*s + l/16. Scale k is 6 bits: low 4 bits in
 * scales[k] & 15 (k < 8) or scales[k-8] >> 4 (k >= 8); high 2 bits are
 * (scales[8 + k%4] >> 2*(k/4)) & 3. */
typedef struct {
  uint8_t hmask[QK_K / 8];   /* 32 bytes: high bit of q */
  uint8_t qs[QK_K / 4];      /* 64 bytes: low 2 bits of q */
  uint8_t scales[12];        /* 16 x 6-bit scales, packed as above */
  uint16_t d;                /* f16 */
} block_q3_K;

/* Q4_K, 144 bytes, 256 elements in 8 sub-blocks of 32.
 * x = d * sc[k] * q - dmin * mn[k], q 4-bit, sc and mn 6-bit (see
 * "scales12" below). Element j = 64*p + 32*h + l (p 0..3, h 0..1):
 * q = (qs[32*p + l] >> 4*h) & 15, sub-block k = 2*p + h. */
typedef struct {
  uint16_t d;                /* f16 scale of the 6-bit scales */
  uint16_t dmin;             /* f16 scale of the 6-bit mins */
  uint8_t scales[12];        /* 8 scales + 8 mins, 6 bits each */
  uint8_t qs[QK_K / 2];      /* 128 bytes: 4-bit q */
} block_q4_K;
/* scales12 packing (Q4_K, Q5_K), k in 0..7, b = scales:
 *   k < 4:  sc = b[k] & 63,                      mn = b[k+4] & 63
 *   k >= 4: sc = (b[k+4] & 15) | (b[k-4] >> 6) << 4,
 *           mn = (b[k+4] >> 4) | (b[k] >> 6) << 4 */

/* Q5_K, 176 bytes: as Q4_K with a fifth bit: for element j = 64*p + 32*h + l
 * q = ((qs[32*p + l] >> 4*h) & 15) | ((qh[l] >> (2*p + h)) & 1) << 4. */
typedef struct {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[QK_K / 8];      /* 32 bytes: bit 4 of q */
  uint8_t qs[QK_K / 2];      /* 128 bytes: low 4 bits of q */
} block_q5_K;

/* Q6_K, 210 bytes, 256 elements in 16 sub-blocks of 16. x = d * scales[k] * (q - 32),
 * q 6-bit, scales signed 8-bit. Element j = 128*h + 32*s + l (s 0..3):
 * low4 = (ql[64*h + l + 32*(s&1)] >> 4*(s>>1)) & 15,
 * high2 = (qh[32*h + l] >> 2*s) & 3, q = low4 | high2 << 4,
 * sub-block k = 8*h + 2*s + l/16. */
typedef struct {
  uint8_t ql[QK_K / 2];      /* 128 bytes: low 4 bits */
  uint8_t qh[QK_K / 4];      /* 64 bytes: high 2 bits */
  int8_t scales[QK_K / 16];  /* 16 signed 8-bit scales */
  uint16_t d;                /* f16 */
} block_q6_K;

/* Q8_K, 292 bytes: an activation type. x[j] = qs[j] * d (d is f32);
 * bsums[i] = sum of qs[16*i .. 16*i+15]. */
typedef struct {
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];
} block_q8_K;

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K");

/* ---- half precision ----------------------------------------------------
 * IEEE binary16 and bfloat16, both rounding to nearest, ties to even.
 * Subnormals are kept (not flushed), infinities stay infinities, NaN stays
 * NaN (quiet, sign kept). */
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

#endif
