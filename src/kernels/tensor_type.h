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

/* ---- i-quants, ternary and microscaling types ---------------------------
 * Grid types decode groups of 8 (or 4) elements from one codebook entry
 * (kernels/iq_grids.h); "sign bits" give the element's sign (bit j set:
 * element j negative). A 7-bit sign field s expands to 8 bits as s with bit 7
 * = parity of s (an even count of negatives), ggml's ksigns_iq2xs table.
 * Element j of a 256-block is in sub-block ib = j / 32, group l = (j % 32) / 8. */
#define QK4_NL 32
#define QK_MXFP4 32

/* IQ4_NL, 18 bytes: x[j] = d * kvalues_iq4nl[q[j]], nibbles as in Q4_0. */
typedef struct {
  uint16_t d;              /* f16 scale */
  uint8_t qs[QK4_NL / 2];  /* 16 bytes: 32 x 4-bit table index */
} block_iq4_nl;

/* IQ4_XS, 136 bytes, 8 sub-blocks of 32: sub-block ib has a 6-bit scale
 * ls = (scales_l[ib/2] >> 4*(ib%2)) & 15 | ((scales_h >> 2*ib) & 3) << 4,
 * x = (d * (ls - 32)) * kvalues_iq4nl[q]; sub-block ib's 32 nibbles are in
 * qs[16*ib .. 16*ib+15] laid out as Q4_0's. */
typedef struct {
  uint16_t d;              /* f16 super-block scale */
  uint16_t scales_h;       /* high 2 bits of the 8 scales */
  uint8_t scales_l[QK_K / 64]; /* 4 bytes: low 4 bits of the 8 scales */
  uint8_t qs[QK_K / 2];    /* 128 bytes: 4-bit table indices */
} block_iq4_xs;

/* IQ2_XXS, 66 bytes. Sub-block ib: two little-endian u32 at qs[4*ib]: a0 holds
 * the 4 groups' grid indices (byte l), a1 holds 4 x 7 sign bits (bits 7l..7l+6)
 * and the scale s = a1 >> 28; x = ((d * (0.5 + s)) * 0.25) * iq2xxs_grid[...]. */
typedef struct {
  uint16_t d;
  uint16_t qs[QK_K / 8];   /* 64 bytes */
} block_iq2_xxs;

/* IQ2_XS, 74 bytes. Group l of sub-block ib: u16 v = qs[4*ib + l], grid index
 * v & 511 (iq2xs_grid), 7 sign bits v >> 9; scale of groups 0-1 is
 * scales[ib] & 15, of groups 2-3 scales[ib] >> 4; x = ((d * (0.5 + s)) * 0.25) * g. */
typedef struct {
  uint16_t d;
  uint16_t qs[QK_K / 8];   /* 64 bytes */
  uint8_t scales[QK_K / 32];
} block_iq2_xs;

/* IQ2_S, 82 bytes. Group l of sub-block ib: grid index (iq2s_grid, 10 bits)
 * qs[4*ib + l] | ((qh[ib] >> 2*l) & 3) << 8, 8 sign bits qs[32 + 4*ib + l];
 * scales as IQ2_XS. */
typedef struct {
  uint16_t d;
  uint8_t qs[QK_K / 4];    /* 32 bytes of grid indices, then 32 bytes of signs */
  uint8_t qh[QK_K / 32];
  uint8_t scales[QK_K / 32];
} block_iq2_s;

/* IQ3_XXS, 98 bytes. Sub-block ib: grid indices (iq3xxs_grid, 4 elements each)
 * qs[8*ib + 2*l] (elements 0-3 of group l) and qs[8*ib + 2*l + 1] (4-7); a
 * little-endian u32 a at qs[64 + 4*ib] holds 4 x 7 sign bits and s = a >> 28;
 * x = ((d * (0.5 + s)) * 0.5) * g. */
typedef struct {
  uint16_t d;
  uint8_t qs[3 * QK_K / 8]; /* 64 bytes of indices, 32 of signs and scales */
} block_iq3_xxs;

/* IQ3_S, 110 bytes. Half-group h (0..7) of sub-block ib: grid index (iq3s_grid,
 * 9 bits) qs[8*ib + h] | ((qh[ib] >> h) & 1) << 8; 8 sign bits signs[4*ib + l];
 * scale s = scales[ib/2] >> 4*(ib%2) & 15, x = (d * (1 + 2*s)) * g. */
typedef struct {
  uint16_t d;
  uint8_t qs[QK_K / 4];
  uint8_t qh[QK_K / 32];
  uint8_t signs[QK_K / 8];
  uint8_t scales[QK_K / 64];
} block_iq3_s;

/* IQ1_S, 50 bytes. Sub-block ib: u16 h = qh[ib]; group l's grid index
 * (iq1s_grid, int8 entries -1/0/1) qs[4*ib + l] | ((h >> 3*l) & 7) << 8;
 * scale s = (h >> 12) & 7, delta = h & 0x8000 ? -1/8 : 1/8;
 * x = (d * (2*s + 1)) * (g + delta). */
typedef struct {
  uint16_t d;
  uint8_t qs[QK_K / 8];
  uint16_t qh[QK_K / 32];
} block_iq1_s;

/* IQ1_M, 56 bytes. The f16 d is spread over the top nibbles of the 4 u16
 * scale words w[k] (bits 0-3 from w[0], 4-7 from w[1], ...). Sub-block ib:
 * groups 0-1 have 3-bit scale (w[ib/2] >> 6*(ib%2)) & 7, groups 2-3 the 3 bits
 * above; group l's grid index qs[4*ib + l] | ((qh[2*ib + l/2] >> 4*(l%2)) & 7) << 8,
 * its delta sign bit 3 of that nibble; x = (d * (2*s + 1)) * (g + delta). */
typedef struct {
  uint8_t qs[QK_K / 8];
  uint8_t qh[QK_K / 16];
  uint8_t scales[QK_K / 32]; /* 4 little-endian u16 w[k] */
} block_iq1_m;

/* TQ1_0, 54 bytes, ternary: x = (t - 1) * d, t in 0..2. A byte b holds 5 (qs)
 * or 4 (qh) trits as b = ceil(v * 256 / 243), v = sum t_n 3^(4-n) (qh pads a
 * fifth zero trit); trit n is ((b * 3^n mod 256) * 3) >> 8. Elements: qs[m]
 * (m < 32) trit n is 32n + m; qs[32 + m] (m < 16) trit n is 160 + 16n + m;
 * qh[m] trit n is 240 + 4n + m. */
typedef struct {
  uint8_t qs[48];
  uint8_t qh[4];
  uint16_t d;
} block_tq1_0;

/* TQ2_0, 66 bytes: x = (q - 1) * d, q 2-bit; element 128h + 32s + m is
 * (qs[32h + m] >> 2s) & 3. */
typedef struct {
  uint8_t qs[QK_K / 4];
  uint16_t d;
} block_tq2_0;

/* MXFP4, 17 bytes: e is an E8M0 exponent, d = 2^(e - 128) (half the scale, as
 * the table holds doubled E2M1 values); x = kvalues_mxfp4[q] * d, nibbles as
 * in Q4_0. */
typedef struct {
  uint8_t e;
  uint8_t qs[QK_MXFP4 / 2];
} block_mxfp4;

_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl");
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs");
_Static_assert(sizeof(block_iq2_xxs) == 66, "block_iq2_xxs");
_Static_assert(sizeof(block_iq2_xs) == 74, "block_iq2_xs");
_Static_assert(sizeof(block_iq2_s) == 82, "block_iq2_s");
_Static_assert(sizeof(block_iq3_xxs) == 98, "block_iq3_xxs");
_Static_assert(sizeof(block_iq3_s) == 110, "block_iq3_s");
_Static_assert(sizeof(block_iq1_s) == 50, "block_iq1_s");
_Static_assert(sizeof(block_iq1_m) == 56, "block_iq1_m");
_Static_assert(sizeof(block_tq1_0) == 54, "block_tq1_0");
_Static_assert(sizeof(block_tq2_0) == 66, "block_tq2_0");
_Static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4");

/* ---- half precision ----------------------------------------------------
 * IEEE binary16 and bfloat16, both rounding to nearest, ties to even.
 * Subnormals are kept (not flushed), infinities stay infinities, NaN stays
 * NaN (quiet, sign kept). */
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

#endif
