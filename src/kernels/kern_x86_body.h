/*
 * kern_x86_body.h - the x86 tile kernels and activation quantizers, written
 * once and compiled twice: by kern_avx2.c (AVX2 + FMA + F16C) and by
 * kern_avx512.c (the same plus AVX-512 VNNI for the 8-bit dot products).
 * Only kernels/kern_*.c include it, inside #if defined(__x86_64__).
 *
 * The includer defines:
 *   TGT          __attribute__((target("..."))) for the exported functions
 *   TGT_INL      static inline always_inline with the same target
 *   X86_DOT_U8S8(u, s)  the 8 int32 lane sums of 4 adjacent u8 x s8
 *                products; AVX2: madd(maddubs(u, s), 1), VNNI: dpbusd.
 *                The two agree exactly as long as maddubs does not
 *                saturate, which no operand range here allows (below).
 *
 * Layout of every tile kernel: one weight row, nt <= 4 tokens (8 for Q4_0
 * and the K-quants, whose bodies are switched by DEFINE_TILE8). The weight
 * block is loaded and unpacked once, then used for each token; each token
 * has its own accumulators and its own fixed order of operations, so the
 * result for a token does not depend on nt (kernels_impl.h). The generic
 * body is an always_inline function with nt a parameter; the exported tile
 * switches on nt so the compiler emits one unrolled copy per tile width.
 *
 * Integer dot products (quantized weights x 8-bit activations) use
 * _mm256_maddubs_epi16 (u8 x s8 -> pairwise s16, saturating: every operand
 * pair here stays below 2 * 63 * 127 or, for the sign trick on Q8_0,
 * 2 * 128 * 127 = 32512 < 32767), then _mm256_madd_epi16 with ones or with
 * the 16-bit sub-block scales to reach 32-bit sums. Signed weights (Q4_0,
 * Q5_0, Q8_0) use the sign trick: |w| (u8) times sign(x, w) (s8).
 */
#ifndef PARLEY_KERNELS_KERN_X86_BODY_H
#define PARLEY_KERNELS_KERN_X86_BODY_H

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/iq_grids.h"
#include "kernels/kernels_impl.h"

#define NT_MAX KERN_TILE_TOKENS

/* ---- helpers ------------------------------------------------------------ */

TGT_INL float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

TGT_INL float hmax_ps(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

TGT_INL float f16_load(const void *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

TGT_INL __m256i loadu256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Four vectors of 8 int32 (each in -127..127) to 32 int8 in order. */
TGT_INL __m256i pack_i32x4_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  __m256i ab = _mm256_packs_epi32(a, b); /* a0-3 b0-3 | a4-7 b4-7 */
  __m256i cd = _mm256_packs_epi32(c, d);
  __m256i abcd = _mm256_packs_epi16(ab, cd); /* a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7 */
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Sum of 8 int32 lanes. */
TGT_INL int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

/* Bytes j = 0..31 set to 0xff where bit j of the little-endian 32 bits at p
 * is set, else 0. */
TGT_INL __m256i bits_to_bytes(const uint8_t *p) {
  uint32_t bits;
  memcpy(&bits, p, 4);
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
}

/* ---- activation quantizers (bit-identical to kern_quant_*_c) ------------ */

TGT static void quant_q8_x86(const float *x, void *dst, int64_t n) {
  kern_block_q8 *b = dst;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < n / 32; i++, x += 32) {
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    __m256 a0 = _mm256_andnot_ps(sign, v0), a1 = _mm256_andnot_ps(sign, v1);
    __m256 a2 = _mm256_andnot_ps(sign, v2), a3 = _mm256_andnot_ps(sign, v3);
    __m256 m = _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3));
    /* max_ps may drop a NaN, so finiteness is checked on every element */
    const __m256 big = _mm256_set1_ps(FLT_MAX);
    __m256 fin = _mm256_and_ps(_mm256_and_ps(_mm256_cmp_ps(a0, big, _CMP_LE_OQ), _mm256_cmp_ps(a1, big, _CMP_LE_OQ)),
                               _mm256_and_ps(_mm256_cmp_ps(a2, big, _CMP_LE_OQ), _mm256_cmp_ps(a3, big, _CMP_LE_OQ)));
    if (_mm256_movemask_ps(fin) != 0xff) { /* NaN or Inf: dot products become NaN */
      memset(b[i].qs, 0, sizeof b[i].qs);
      b[i].d = b[i].s = NAN;
      continue;
    }
    float amax = hmax_ps(m);
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256 vid = _mm256_set1_ps(id);
    __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid));
    __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
    __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid));
    __m256i q3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
    _mm256_storeu_si256((__m256i *)b[i].qs, pack_i32x4_i8(q0, q1, q2, q3));
    int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
    b[i].d = d;
    b[i].s = d * (float)sum;
  }
}

TGT static void quant_q8_K_x86(const float *x, void *dst, int64_t n) {
  block_q8_K *b = dst;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
    __m256 m = _mm256_setzero_ps();
    __m256 fin = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for (int j = 0; j < QK_K; j += 8) {
      __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j));
      fin = _mm256_and_ps(fin, _mm256_cmp_ps(a, _mm256_set1_ps(FLT_MAX), _CMP_LE_OQ));
      m = _mm256_max_ps(m, a);
    }
    if (_mm256_movemask_ps(fin) != 0xff) {
      memset(&b[i], 0, sizeof b[i]);
      b[i].d = NAN;
      continue;
    }
    float amax = hmax_ps(m);
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256 vid = _mm256_set1_ps(id);
    for (int j = 0; j < QK_K; j += 32) {
      __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j), vid));
      __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8), vid));
      __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 16), vid));
      __m256i q3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 24), vid));
      _mm256_storeu_si256((__m256i *)(b[i].qs + j), pack_i32x4_i8(q0, q1, q2, q3));
      b[i].bsums[j / 16] = (int16_t)hsum_i32(_mm256_add_epi32(q0, q1));
      b[i].bsums[j / 16 + 1] = (int16_t)hsum_i32(_mm256_add_epi32(q2, q3));
    }
    b[i].d = d;
  }
}

/* ---- f32-activation kernels: F32, F16, BF16 ----------------------------- */

/* Loads 8 weights as f32; kind 0 = f32, 1 = f16, 2 = bf16. */
TGT_INL __m256 load8w(const void *w, int64_t i, int kind) {
  if (kind == 0) return _mm256_loadu_ps((const float *)w + i);
  __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
  if (kind == 1) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

TGT_INL float load1w(const void *w, int64_t i, int kind) {
  if (kind == 0) return ((const float *)w)[i];
  uint16_t h;
  memcpy(&h, (const uint16_t *)w + i, 2);
  if (kind == 1) return _cvtsh_ss(h);
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

TGT_INL void tile_float(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,
                        size_t ys, int kind) {
  __m256 a0[NT_MAX], a1[NT_MAX];
  float tail[NT_MAX];
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) {
    a0[t] = _mm256_setzero_ps();
    a1[t] = _mm256_setzero_ps();
    tail[t] = 0.0f;
  }
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 w0 = load8w(w, i, kind), w1 = load8w(w, i + 8, kind);
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
      const float *xt = (const float *)((const char *)x + t * xs);
      a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt + i), a0[t]);
      a1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xt + i + 8), a1[t]);
    }
  }
  if (i + 8 <= n) {
    __m256 w0 = load8w(w, i, kind);
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
      const float *xt = (const float *)((const char *)x + t * xs);
      a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt + i), a0[t]);
    }
    i += 8;
  }
  for (; i < n; i++) {
    float wi = load1w(w, i, kind);
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
      const float *xt = (const float *)((const char *)x + t * xs);
      tail[t] = fmaf(wi, xt[i], tail[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) y[t * ys] = hsum_ps(_mm256_add_ps(a0[t], a1[t])) + tail[t];
}

#define DEFINE_TILE(name, body)                                                             \
  TGT static void name(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, \
                       size_t ys) {                                                         \
    switch (nt) {                                                                           \
    case 1: body(w, n, x, xs, 1, y, ys); break;                                             \
    case 2: body(w, n, x, xs, 2, y, ys); break;                                             \
    case 3: body(w, n, x, xs, 3, y, ys); break;                                             \
    default: body(w, n, x, xs, 4, y, ys); break;                                            \
    }                                                                                       \
  }

TGT_INL void body_f32(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  tile_float(w, n, x, xs, nt, y, ys, 0);
}
TGT_INL void body_f16(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  tile_float(w, n, x, xs, nt, y, ys, 1);
}
TGT_INL void body_bf16(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  tile_float(w, n, x, xs, nt, y, ys, 2);
}
DEFINE_TILE(tile_f32, body_f32)
DEFINE_TILE(tile_f16, body_f16)
DEFINE_TILE(tile_bf16, body_bf16)

/* ---- 32-block types x kern_block_q8 ------------------------------------- */

/* Unpacks block ib of a 32-block row to 32 bytes: signed (sign trick
 * operands) or unsigned q with a float offset m; kind: 0 Q8_0, 1 Q4_0,
 * 2 Q5_0, 3 Q4_1, 4 Q5_1, 5 IQ4_NL (signed: each nibble looked up in the
 * 16 levels, |level| <= 127 as for Q8_0), 6 MXFP4 (the same with the
 * doubled E2M1 values, |level| <= 12, and the E8M0 half scale). */
TGT_INL __m256i unpack32(const uint8_t *w, int64_t ib, int kind, float *d, float *m) {
  const __m256i lo4 = _mm256_set1_epi8(0x0f);
  switch (kind) {
  case 0: {
    const block_q8_0 *b = (const block_q8_0 *)w + ib;
    *d = f16_load(&b->d);
    return loadu256(b->qs);
  }
  case 1: {
    const block_q4_0 *b = (const block_q4_0 *)w + ib;
    *d = f16_load(&b->d);
    __m128i q = _mm_loadu_si128((const __m128i *)b->qs);
    __m256i v = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
    return _mm256_sub_epi8(_mm256_and_si256(v, lo4), _mm256_set1_epi8(8));
  }
  case 2: {
    const block_q5_0 *b = (const block_q5_0 *)w + ib;
    *d = f16_load(&b->d);
    __m128i q = _mm_loadu_si128((const __m128i *)b->qs);
    __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), lo4);
    v = _mm256_or_si256(v, _mm256_and_si256(bits_to_bytes(b->qh), _mm256_set1_epi8(0x10)));
    return _mm256_sub_epi8(v, _mm256_set1_epi8(16));
  }
  case 3: {
    const block_q4_1 *b = (const block_q4_1 *)w + ib;
    *d = f16_load(&b->d);
    *m = f16_load(&b->m);
    __m128i q = _mm_loadu_si128((const __m128i *)b->qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), lo4);
  }
  case 5:
  case 6: {
    const uint8_t *qs;
    const int8_t *lv;
    if (kind == 5) {
      const block_iq4_nl *b = (const block_iq4_nl *)w + ib;
      *d = f16_load(&b->d);
      qs = b->qs;
      lv = kvalues_iq4nl;
    } else {
      const block_mxfp4 *b = (const block_mxfp4 *)w + ib;
      *d = mxfp4_half_scale(b->e);
      qs = b->qs;
      lv = kvalues_mxfp4;
    }
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), lo4);
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lv)), v);
  }
  default: {
    const block_q5_1 *b = (const block_q5_1 *)w + ib;
    *d = f16_load(&b->d);
    *m = f16_load(&b->m);
    __m128i q = _mm_loadu_si128((const __m128i *)b->qs);
    __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), lo4);
    return _mm256_or_si256(v, _mm256_and_si256(bits_to_bytes(b->qh), _mm256_set1_epi8(0x10)));
  }
  }
}

/* One block ib into accumulator acc (per token). */
TGT_INL void q32_block(const void *w, int64_t ib, const void *x, size_t xs, int nt, int kind,
                       __m256 *acc, float *macc) {
  const bool is_signed = kind <= 2 || kind >= 5;
  float d, m = 0.0f;
  __m256i q = unpack32(w, ib, kind, &d, &m);
  __m256i qa = is_signed ? _mm256_sign_epi8(q, q) : q; /* |q| as u8 */
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) {
    const kern_block_q8 *xb = (const kern_block_q8 *)((const char *)x + t * xs) + ib;
    __m256i xv = loadu256(xb->qs);
    if (is_signed) xv = _mm256_sign_epi8(xv, q);
    __m256i p = X86_DOT_U8S8(qa, xv);
    acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(p), acc[t]);
    if (!is_signed) macc[t] = fmaf(m, xb->s, macc[t]);
  }
}

/* Even blocks into acc0, odd blocks into acc1 (two independent FMA chains
 * for one token), summed at the end. */
TGT_INL void tile_q32(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,
                      size_t ys, int kind) {
  __m256 acc0[NT_MAX], acc1[NT_MAX];
  float macc[NT_MAX];
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) {
    acc0[t] = _mm256_setzero_ps();
    acc1[t] = _mm256_setzero_ps();
    macc[t] = 0.0f;
  }
  int64_t nb = n / 32, ib = 0;
  for (; ib + 2 <= nb; ib += 2) {
    q32_block(w, ib, x, xs, nt, kind, acc0, macc);
    q32_block(w, ib + 1, x, xs, nt, kind, acc1, macc);
  }
  if (ib < nb) q32_block(w, ib, x, xs, nt, kind, acc0, macc);
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) y[t * ys] = hsum_ps(_mm256_add_ps(acc0[t], acc1[t])) + macc[t];
}

/* Two rows (w, w + rb) x nt tokens: the same per-(row, token) arithmetic
 * as tile_q32 (even blocks in acc0, odd in acc1, the same d_w * d_x
 * products), but each activation block is loaded once for both rows. */
TGT_INL void q32_block2(const uint8_t *w, size_t rb, int64_t ib, const void *x, size_t xs, int nt,
                        int kind, __m256 *acc, float *macc) {
  const bool is_signed = kind <= 2 || kind >= 5;
  float d0, d1, m0 = 0.0f, m1 = 0.0f;
  __m256i q0 = unpack32(w, ib, kind, &d0, &m0);
  __m256i q1 = unpack32(w + rb, ib, kind, &d1, &m1);
  __m256i qa0 = is_signed ? _mm256_sign_epi8(q0, q0) : q0;
  __m256i qa1 = is_signed ? _mm256_sign_epi8(q1, q1) : q1;
  /* d_w * d_x as a product of broadcasts (the same f32 product as the
   * scalar one; the d_x broadcast is done by the load unit, once for both
   * rows) */
  const __m256 vd0 = _mm256_set1_ps(d0), vd1 = _mm256_set1_ps(d1);
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) {
    const kern_block_q8 *xb = (const kern_block_q8 *)((const char *)x + t * xs) + ib;
    __m256i xv = loadu256(xb->qs);
    __m256 vdx = _mm256_broadcast_ss(&xb->d);
    __m256i x0 = is_signed ? _mm256_sign_epi8(xv, q0) : xv;
    __m256i x1 = is_signed ? _mm256_sign_epi8(xv, q1) : xv;
    __m256i p0 = X86_DOT_U8S8(qa0, x0);
    __m256i p1 = X86_DOT_U8S8(qa1, x1);
    acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(vd0, vdx), _mm256_cvtepi32_ps(p0), acc[t]);
    acc[NT_MAX + t] = _mm256_fmadd_ps(_mm256_mul_ps(vd1, vdx), _mm256_cvtepi32_ps(p1), acc[NT_MAX + t]);
    if (!is_signed) {
      macc[t] = fmaf(m0, xb->s, macc[t]);
      macc[NT_MAX + t] = fmaf(m1, xb->s, macc[NT_MAX + t]);
    }
  }
}

TGT_INL void tile2_q32(const void *w, size_t rb, int64_t n, const void *x, size_t xs, int nt,
                       float *y, size_t ys, int kind) {
  __m256 acc0[2 * NT_MAX], acc1[2 * NT_MAX];
  float macc[2 * NT_MAX];
#pragma GCC unroll 8
  for (int i = 0; i < 2 * NT_MAX; i++) {
    acc0[i] = _mm256_setzero_ps();
    acc1[i] = _mm256_setzero_ps();
    macc[i] = 0.0f;
  }
  int64_t nb = n / 32, ib = 0;
  for (; ib + 2 <= nb; ib += 2) {
    q32_block2(w, rb, ib, x, xs, nt, kind, acc0, macc);
    q32_block2(w, rb, ib + 1, x, xs, nt, kind, acc1, macc);
  }
  if (ib < nb) q32_block2(w, rb, ib, x, xs, nt, kind, acc0, macc);
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) {
    y[t * ys] = hsum_ps(_mm256_add_ps(acc0[t], acc1[t])) + macc[t];
    y[t * ys + 1] = hsum_ps(_mm256_add_ps(acc0[NT_MAX + t], acc1[NT_MAX + t])) + macc[NT_MAX + t];
  }
}

#define DEFINE_TILE2(name, body)                                                              \
  TGT static void name(const void *w, size_t rb, int64_t n, const void *x, size_t xs, int nt, \
                       float *y, size_t ys) {                                                 \
    switch (nt) {                                                                             \
    case 1: body(w, rb, n, x, xs, 1, y, ys); break;                                           \
    case 2: body(w, rb, n, x, xs, 2, y, ys); break;                                           \
    case 3: body(w, rb, n, x, xs, 3, y, ys); break;                                           \
    default: body(w, rb, n, x, xs, 4, y, ys); break;                                          \
    }                                                                                         \
  }

#define BODY_Q32(nm, kind)                                                                   \
  TGT_INL void body_##nm(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, \
                         size_t ys) {                                                        \
    tile_q32(w, n, x, xs, nt, y, ys, kind);                                                  \
  }                                                                                          \
  DEFINE_TILE(tile_##nm, body_##nm)                                                          \
  TGT_INL void body2_##nm(const void *w, size_t rb, int64_t n, const void *x, size_t xs, int nt, \
                          float *y, size_t ys) {                                             \
    tile2_q32((const uint8_t *)w, rb, n, x, xs, nt, y, ys, kind);                            \
  }                                                                                          \
  DEFINE_TILE2(tile2_##nm, body2_##nm)
BODY_Q32(q8_0, 0)
BODY_Q32(q5_0, 2)
BODY_Q32(q4_1, 3)
BODY_Q32(q5_1, 4)
BODY_Q32(iq4_nl, 5)
/* MXFP4 (kind 6 of unpack32) has its own tiles: kern_x86_mxfp4x8.h */

/* ---- Q4_0 x kern_pair_q8: two blocks per 256-bit register -------------- */

#define NT_WIDE KERN_TILE_TOKENS_MAX

/* Q4_0 blocks b and b + 1 as unsigned nibbles: *lo = elements 0..15 of b then
 * of b + 1, *hi = elements 16..31 of each (the kern_pair_q8 order), *dw =
 * d_b in lanes 0..3, d_b1 in lanes 4..7. two = 0: b is the last block of an
 * odd row; b + 1 is read as zeros (nothing past the row is touched). */
TGT_INL void q4_0_pair(const block_q4_0 *b, int two, __m256i *lo, __m256i *hi, __m256 *dw) {
  const __m256i lo4 = _mm256_set1_epi8(0x0f);
  uint16_t h0, h1 = 0;
  memcpy(&h0, &b[0].d, 2);
  __m128i q0 = _mm_loadu_si128((const __m128i *)b[0].qs), q1 = _mm_setzero_si128();
  if (two) {
    memcpy(&h1, &b[1].d, 2);
    q1 = _mm_loadu_si128((const __m128i *)b[1].qs);
  }
  __m256i v = _mm256_set_m128i(q1, q0);
  *lo = _mm256_and_si256(v, lo4);
  *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
  __m128 d2 = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)h0 | (uint32_t)h1 << 16)));
  *dw = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(d2), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

/* One weight pair times token t's pair: lane i (0..3 block b, 4..7 block
 * b + 1) gets the exact integer sum of (q - 8) x over its 8 elements
 * (bytes 4i..4i+3 of both halves), then acc += that * (d_w d_x). The
 * 16-bit sums cannot overflow: 2 * 2 * 15 * 127 + 8 * 4 * 127 < 32767. */
TGT_INL __m256 q4_0_pair_dot(__m256i lo, __m256i hi, __m256 dw, const kern_pair_q8 *xp, __m256 acc) {
  __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, loadu256(xp->a)),
                               _mm256_maddubs_epi16(hi, loadu256(xp->b16)));
  p = _mm256_sub_epi16(p, loadu256(xp->c));
  __m256i s = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_loadu_ps(xp->d)), acc);
}

/* One Q4_0 row x nt <= 8 tokens: the pair is unpacked once and used for
 * every token; one accumulator per token (8 registers at nt 8). */
TGT_INL void body_q4_0p(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,
                        size_t ys) {
  const block_q4_0 *wb = w;
  __m256 acc[NT_WIDE];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  int64_t nb = n / 32, np = nb / 2;
  for (int64_t ip = 0; ip < np; ip++) {
    __m256i lo, hi;
    __m256 dw;
    q4_0_pair(wb + 2 * ip, 1, &lo, &hi, &dw);
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
      acc[t] = q4_0_pair_dot(lo, hi, dw, (const kern_pair_q8 *)((const char *)x + t * xs) + ip, acc[t]);
  }
  if (nb & 1) {
    __m256i lo, hi;
    __m256 dw;
    q4_0_pair(wb + 2 * np, 0, &lo, &hi, &dw);
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
      acc[t] = q4_0_pair_dot(lo, hi, dw, (const kern_pair_q8 *)((const char *)x + t * xs) + np, acc[t]);
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) y[t * ys] = hsum_ps(acc[t]);
}

#define DEFINE_TILE8(name, body)                                                            \
  TGT static void name(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, \
                       size_t ys) {                                                         \
    switch (nt) {                                                                           \
    case 1: body(w, n, x, xs, 1, y, ys); break;                                             \
    case 2: body(w, n, x, xs, 2, y, ys); break;                                             \
    case 3: body(w, n, x, xs, 3, y, ys); break;                                             \
    case 4: body(w, n, x, xs, 4, y, ys); break;                                             \
    case 5: body(w, n, x, xs, 5, y, ys); break;                                             \
    case 6: body(w, n, x, xs, 6, y, ys); break;                                             \
    case 7: body(w, n, x, xs, 7, y, ys); break;                                             \
    default: body(w, n, x, xs, 8, y, ys); break;                                            \
    }                                                                                       \
  }
DEFINE_TILE8(tile_q4_0p, body_q4_0p)

/* Two Q4_0 rows (w, w + rb) x nt <= 4 tokens: each activation pair is
 * loaded once for both rows; per (row, token) the same operations in the
 * same order as body_q4_0p, so the bits are the one-row tile's. */
TGT_INL void body2_q4_0p(const void *w, size_t rb, int64_t n, const void *x, size_t xs, int nt,
                         float *y, size_t ys) {
  const block_q4_0 *w0 = w, *w1 = (const block_q4_0 *)((const char *)w + rb);
  __m256 acc0[NT_MAX], acc1[NT_MAX];
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) acc0[t] = acc1[t] = _mm256_setzero_ps();
  int64_t nb = n / 32, np = (nb + 1) / 2;
  for (int64_t ip = 0; ip < np; ip++) {
    /* the last pair of an odd row is half empty; a constant `two` in the
     * main loop keeps the branch out of it */
    int two = 2 * ip + 1 < nb;
    __m256i lo0, hi0, lo1, hi1;
    __m256 dw0, dw1;
    if (two) {
      q4_0_pair(w0 + 2 * ip, 1, &lo0, &hi0, &dw0);
      q4_0_pair(w1 + 2 * ip, 1, &lo1, &hi1, &dw1);
    } else {
      q4_0_pair(w0 + 2 * ip, 0, &lo0, &hi0, &dw0);
      q4_0_pair(w1 + 2 * ip, 0, &lo1, &hi1, &dw1);
    }
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
      const kern_pair_q8 *xp = (const kern_pair_q8 *)((const char *)x + t * xs) + ip;
      acc0[t] = q4_0_pair_dot(lo0, hi0, dw0, xp, acc0[t]);
      acc1[t] = q4_0_pair_dot(lo1, hi1, dw1, xp, acc1[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) {
    y[t * ys] = hsum_ps(acc0[t]);
    y[t * ys + 1] = hsum_ps(acc1[t]);
  }
}
DEFINE_TILE2(tile2_q4_0p, body2_q4_0p)

/* Pair quantizer: the blocks as quant_q8_x86 makes them, rearranged by the
 * shared kern_pair_from_q8 (so every variant's pairs agree). */
TGT static void quant_q8p_x86(const float *x, void *dst, int64_t n) {
  kern_pair_q8 *p = dst;
  kern_block_q8 tmp[2];
  for (int64_t i = 0; i < n; i += 64, p++) {
    int nb = n - i >= 64 ? 2 : 1;
    quant_q8_x86(x + i, tmp, 32 * nb);
    kern_pair_from_q8(tmp, nb, p);
  }
}

/* ---- K-quants x block_q8_K ---------------------------------------------- */

/* The 8 6-bit scales and mins of a Q4_K/Q5_K super-block (tensor_type.h),
 * four bytes at a time: with u0, u1, u2 the three little-endian words of b,
 * sc[0..3] = u0 & 63, mn[0..3] = u1 & 63, and for k >= 4 the low nibbles
 * come from u2 and bits 4..5 from bits 6..7 of u0 (scales) or u1 (mins). */
TGT_INL void scales12(const uint8_t *b, uint8_t *sc, uint8_t *mn) {
  uint32_t u0, u1, u2, v;
  memcpy(&u0, b, 4);
  memcpy(&u1, b + 4, 4);
  memcpy(&u2, b + 8, 4);
  v = u0 & 0x3f3f3f3fu;
  memcpy(sc, &v, 4);
  v = (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u);
  memcpy(sc + 4, &v, 4);
  v = u1 & 0x3f3f3f3fu;
  memcpy(mn, &v, 4);
  v = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u);
  memcpy(mn + 4, &v, 4);
}

/* Q5_K against KERN_ACT_Q8_K5X activations (kernels_impl.h): element
 * 64p + 32h + l is nibble h of qs[32p + l] plus bit 2p + h of qh[l] as bit
 * 4 (q in 0..31), sub-block 2p + h. The 32-byte vectors V_2p, V_2p+1 of a
 * chunk are regrouped by 128-bit halves (vperm2i128, once per row and
 * super-block): A_p = elements 0..15 of both sub-blocks, B_p = 16..31, so
 * in A_p and B_p the low 128 bits belong to sub-block 2p and the high to
 * 2p + 1. Per token the two u8 x s8 products are added in 16 bits (|sum| <=
 * 2 x 2 x 31 x 127 = 15748, exact) and multiplied by the scales once: 8
 * maddubs + 4 madd per 256 weights instead of 8 + 8. Int32 lane L: 8
 * elements of sub-block 2p + L / 4 summed over p. The mins as for Q4_K:
 * dmin x min_k against the activations' fsum, one FNMA per token. */
TGT_INL void body_q5_Kx(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,
                        size_t ys) {
  const __m256i lo4 = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
  /* int16 lanes: scale 2p in the low 128 bits, 2p + 1 in the high (sc16 order) */
  const __m256i pick = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                                        2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  __m256 acc[NT_WIDE];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / QK_K; ib++) {
    const block_q5_K *b = (const block_q5_K *)w + ib;
    float d = f16_load(&b->d), dmin = f16_load(&b->dmin);
    uint8_t sc[8], mn[8];
    scales12(b->scales, sc, mn);
    __m256 wmin = _mm256_mul_ps(_mm256_set1_ps(dmin),
                                _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mn))));
    __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
    __m256i qhv = loadu256(b->qh);
    __m256i wa[4], wb[4], scv[4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
      __m256i q = loadu256(b->qs + 32 * p);
      /* bit 2p (2p + 1) of each qh byte moved to bit 4; 16-bit shifts, the
       * bits crossing bytes land outside the mask */
      __m256i h0 = 2 * p <= 4 ? _mm256_slli_epi16(qhv, 4 - 2 * p) : _mm256_srli_epi16(qhv, 2 * p - 4);
      __m256i h1 = 2 * p + 1 <= 4 ? _mm256_slli_epi16(qhv, 3 - 2 * p) : _mm256_srli_epi16(qhv, 2 * p - 3);
      __m256i v0 = _mm256_or_si256(_mm256_and_si256(q, lo4), _mm256_and_si256(h0, bit4));
      __m256i v1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), lo4), _mm256_and_si256(h1, bit4));
      wa[p] = _mm256_permute2x128_si256(v0, v1, 0x20);
      wb[p] = _mm256_permute2x128_si256(v0, v1, 0x31);
      scv[p] = _mm256_shuffle_epi8(sc16, _mm256_add_epi8(pick, _mm256_set1_epi8((char)(4 * p))));
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + ib;
      __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int p = 0; p < 4; p++) {
        __m256i pr = _mm256_add_epi16(_mm256_maddubs_epi16(wa[p], loadu256(xb->qs + 64 * p)),
                                      _mm256_maddubs_epi16(wb[p], loadu256(xb->qs + 64 * p + 32)));
        isum = p ? _mm256_add_epi32(isum, _mm256_madd_epi16(pr, scv[p])) : _mm256_madd_epi16(pr, scv[p]);
      }
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(isum), acc[t]);
      acc[t] = _mm256_fnmadd_ps(wmin, _mm256_loadu_ps((const float *)xb->bsums), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) y[t * ys] = hsum_ps(acc[t]);
}

/* The Q5_K activations: quant_q8_K_x86's blocks, reordered by the shared
 * kern_q8_K5_interleave (so every variant's agree). */
TGT static void quant_q8_K5x_x86(const float *x, void *dst, int64_t n) {
  quant_q8_K_x86(x, dst, n);
  kern_q8_K5_interleave(dst, n / QK_K);
}

/* Q4_K against KERN_ACT_Q8_KX activations (kernels_impl.h). The four
 * 32-byte nibble vectors Q_p of a super-block are transposed in 4-byte
 * words within each 128-bit half (8 unpacks, once per row and super-block,
 * shared by the nt tokens): U_m's word i is Q_i's word m, so U_m & 15 holds
 * in every word i a piece of sub-block 2i and U_m >> 4 one of 2i + 1, the
 * order the activations were stored in. Per token and parity h the four
 * u8 x s8 products (maddubs, 16 bits) are added in 16 bits (|sum| <= 4 x 2
 * x 15 x 127 = 15240, exact) and multiplied by the scales once (madd):
 * 8 maddubs + 2 madd + 8 adds per 256 weights instead of 8 + 8 + 8. Lane L
 * of the int32 sum: half L / 4 of sub-blocks 2 (L % 4) + h, h = 0, 1. */
TGT_INL void body_q4_Kx(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,
                        size_t ys) {
  const __m256i lo4 = _mm256_set1_epi8(0x0f);
  /* int16 lane j of a 128-bit half -> scale 2 (j / 2) + h (sc16's int16 order) */
  const __m256i pick0 = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,
                                         0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  const __m256i pick1 = _mm256_add_epi8(pick0, _mm256_set1_epi8(2));
  __m256 acc[NT_WIDE];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / QK_K; ib++) {
    const block_q4_K *b = (const block_q4_K *)w + ib;
    float d = f16_load(&b->d), dmin = f16_load(&b->dmin);
    uint8_t sc[8], mn[8];
    scales12(b->scales, sc, mn);
    /* dmin x min of sub-block k in lane k, against the activations' fsum */
    __m256 wmin = _mm256_mul_ps(_mm256_set1_ps(dmin),
                                _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mn))));
    __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
    __m256i s0 = _mm256_shuffle_epi8(sc16, pick0), s1 = _mm256_shuffle_epi8(sc16, pick1);
    __m256i q0 = loadu256(b->qs), q1 = loadu256(b->qs + 32), q2 = loadu256(b->qs + 64),
            q3 = loadu256(b->qs + 96);
    __m256i t0 = _mm256_unpacklo_epi32(q0, q1), t1 = _mm256_unpackhi_epi32(q0, q1);
    __m256i t2 = _mm256_unpacklo_epi32(q2, q3), t3 = _mm256_unpackhi_epi32(q2, q3);
    __m256i u[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                    _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
    __m256i wl[4], wh[4];
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) {
      wl[m] = _mm256_and_si256(u[m], lo4);
      wh[m] = _mm256_and_si256(_mm256_srli_epi16(u[m], 4), lo4);
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + ib;
      __m256i p0 = _mm256_maddubs_epi16(wl[0], loadu256(xb->qs));
      __m256i p1 = _mm256_maddubs_epi16(wh[0], loadu256(xb->qs + 32));
#pragma GCC unroll 3
      for (int m = 1; m < 4; m++) {
        p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(wl[m], loadu256(xb->qs + 64 * m)));
        p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(wh[m], loadu256(xb->qs + 64 * m + 32)));
      }
      __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(p0, s0), _mm256_madd_epi16(p1, s1));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(isum), acc[t]);
      acc[t] = _mm256_fnmadd_ps(wmin, _mm256_loadu_ps((const float *)xb->bsums), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) y[t * ys] = hsum_ps(acc[t]);
}
DEFINE_TILE8(tile_q4_Kx, body_q4_Kx)

/* The Q4_K activations: quant_q8_K_x86's blocks, reordered by the shared
 * kern_q8_K_interleave (so every variant's agree). */
TGT static void quant_q8_Kx_x86(const float *x, void *dst, int64_t n) {
  quant_q8_K_x86(x, dst, n);
  kern_q8_K_interleave(dst, n / QK_K);
}
DEFINE_TILE8(tile_q5_Kx, body_q5_Kx)

/* Q6_K against KERN_ACT_Q8_K6X activations (kernels_impl.h). Element
 * 128h + 32s + l, q = low4 | high2 << 4 in 0..63 (tensor_type.h), sub-block
 * 8h + 2s + l / 16, x = d * sc * (q - 32). The 32-byte vectors V_s of the
 * four groups of half h are interleaved in 4-byte words per pair (V_2g,
 * V_2g+1): A = unpacklo_epi32, B = unpackhi_epi32 (once per row and
 * super-block, shared by the nt tokens); then word w of 128-bit half j of
 * both A and B belongs to sub-block 8h + 4g + 2 (w % 2) + j, so per token
 * the two u8 x s8 products are added in 16 bits (|sum| <= 2 x 2 x 63 x 127
 * = 32004, exact) and multiplied by the scales once: 8 maddubs + 4 madd per
 * 256 weights instead of 8 + 8. The -32 goes through the activation block
 * sums times -32 sc (|32 sc| <= 4096 fits int16), added as integers, so
 * int32 lane L holds an exact integer the portable kernel reproduces. */
TGT_INL void body_q6_Kx(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,
                        size_t ys) {
  const __m256i lo4 = _mm256_set1_epi8(0x0f), hi2 = _mm256_set1_epi8(0x30);
  __m256 acc[NT_WIDE];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / QK_K; ib++) {
    const block_q6_K *b = (const block_q6_K *)w + ib;
    float d = f16_load(&b->d);
    __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    __m256i scm = _mm256_mullo_epi16(sc16, _mm256_set1_epi16(-32));
    __m256i wa[4], wb[4], scv[4];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      __m256i ql0 = loadu256(b->ql + 64 * h), ql1 = loadu256(b->ql + 64 * h + 32);
      __m256i qhv = loadu256(b->qh + 32 * h);
      __m256i v[4];
      v[0] = _mm256_or_si256(_mm256_and_si256(ql0, lo4), _mm256_and_si256(_mm256_slli_epi16(qhv, 4), hi2));
      v[1] = _mm256_or_si256(_mm256_and_si256(ql1, lo4), _mm256_and_si256(_mm256_slli_epi16(qhv, 2), hi2));
      v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), lo4), _mm256_and_si256(qhv, hi2));
      v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), lo4),
                             _mm256_and_si256(_mm256_srli_epi16(qhv, 2), hi2));
      /* two immediates: at -O0 (sanitizer builds) h is not a constant */
      __m256i half = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11) : _mm256_permute2x128_si256(sc16, sc16, 0x00);
#pragma GCC unroll 2
      for (int g = 0; g < 2; g++) {
        wa[2 * h + g] = _mm256_unpacklo_epi32(v[2 * g], v[2 * g + 1]);
        wb[2 * h + g] = _mm256_unpackhi_epi32(v[2 * g], v[2 * g + 1]);
        /* int16 lanes of word w in 128-bit half j: scale 4g + 2 (w % 2) + j of this h */
        char i0 = (char)(2 * (4 * g)), i1 = (char)(2 * (4 * g + 2)), i2 = (char)(2 * (4 * g + 1)),
             i3 = (char)(2 * (4 * g + 3));
        scv[2 * h + g] = _mm256_shuffle_epi8(
            half, _mm256_setr_epi8(i0, i0 + 1, i0, i0 + 1, i1, i1 + 1, i1, i1 + 1, i0, i0 + 1, i0,
                                   i0 + 1, i1, i1 + 1, i1, i1 + 1, i2, i2 + 1, i2, i2 + 1, i3, i3 + 1,
                                   i3, i3 + 1, i2, i2 + 1, i2, i2 + 1, i3, i3 + 1, i3, i3 + 1));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + ib;
      __m256i isum = _mm256_madd_epi16(loadu256(xb->bsums), scm);
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++) {
        __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(wa[c], loadu256(xb->qs + 64 * c)),
                                     _mm256_maddubs_epi16(wb[c], loadu256(xb->qs + 64 * c + 32)));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, scv[c]));
      }
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(isum), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) y[t * ys] = hsum_ps(acc[t]);
}

/* The Q6_K activations: quant_q8_K_x86's blocks, reordered by the shared
 * kern_q8_K6_interleave (so every variant's agree). */
TGT static void quant_q8_K6x_x86(const float *x, void *dst, int64_t n) {
  quant_q8_K_x86(x, dst, n);
  kern_q8_K6_interleave(dst, n / QK_K);
}
DEFINE_TILE8(tile_q6_Kx, body_q6_Kx)

/* The Q2_K/Q3_K weight transpose: the four 32-byte vectors v[s] of a
 * 128-element half (element 32s + l in byte l of v[s]) transposed in 4-byte
 * words within each 128-bit half, u[m]'s word i = v[i]'s word m: slot i of
 * 128-bit half j then holds a piece of sub-block 2i + j of the half in all
 * four u[m], the order of KERN_ACT_Q8_K3X. */
TGT_INL void transpose_words4(const __m256i v[4], __m256i u[4]) {
  __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
  __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
  u[0] = _mm256_unpacklo_epi64(t0, t2);
  u[1] = _mm256_unpackhi_epi64(t0, t2);
  u[2] = _mm256_unpacklo_epi64(t1, t3);
  u[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* int16 lane pair of word i in 128-bit half j -> int16 2i + j of a 128-bit
 * half of scales (for _mm256_shuffle_epi8). */
#define PICK_SCALE_2I_J                                                                      \
  _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 2, 3, 2, 3, 6, 7, 6, 7, \
                   10, 11, 10, 11, 14, 15, 14, 15)

/* Q2_K against KERN_ACT_Q8_K3X activations: element 128h + 32s + l, q =
 * (qs[32h + l] >> 2s) & 3, sub-block k = 8h + 2s + l / 16, x = d * (sc_k &
 * 15) * q - dmin * (sc_k >> 4). The vectors of each half are transposed as
 * for Q3_K (transpose_words4), and per token and half the four products are
 * summed in 16 bits (|sum| <= 4 x 2 x 3 x 127 = 3048) before one madd with
 * the scales: 8 maddubs + 2 madd per 256 weights instead of 8 + 8. The
 * mins: madd(bsums, mins) and one FNMA with dmin * d_x, as before. */
TGT_INL void body_q2_Kx(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,
                        size_t ys) {
  const __m256i lo2 = _mm256_set1_epi8(3), shifts = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  const __m128i lo4 = _mm_set1_epi8(0x0f);
  const __m256i pick = PICK_SCALE_2I_J;
  __m256 acc[NT_WIDE];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / QK_K; ib++) {
    const block_q2_K *b = (const block_q2_K *)w + ib;
    float d = f16_load(&b->d), dmin = f16_load(&b->dmin);
    __m128i sc8 = _mm_loadu_si128((const __m128i *)b->scales);
    __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, lo4));
    __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), lo4));
    __m256i u[2][4], scv[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      /* the transpose of v[s] = (qv >> 2s) & 3 directly: u[m]'s word i is
       * (qv's word m >> 2i) & 3, a word broadcast and a per-word shift */
      __m256i qv = loadu256(b->qs + 32 * h);
      u[h][0] = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi32(qv, 0x00), shifts), lo2);
      u[h][1] = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi32(qv, 0x55), shifts), lo2);
      u[h][2] = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi32(qv, 0xaa), shifts), lo2);
      u[h][3] = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi32(qv, 0xff), shifts), lo2);
      /* two immediates: at -O0 (sanitizer builds) h is not a constant */
      __m256i half = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11) : _mm256_permute2x128_si256(sc16, sc16, 0x00);
      scv[h] = _mm256_shuffle_epi8(half, pick);
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + ib;
      __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 2
      for (int h = 0; h < 2; h++) {
        __m256i p = _mm256_maddubs_epi16(u[h][0], loadu256(xb->qs + 128 * h));
#pragma GCC unroll 3
        for (int m = 1; m < 4; m++)
          p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u[h][m], loadu256(xb->qs + 128 * h + 32 * m)));
        isum = h ? _mm256_add_epi32(isum, _mm256_madd_epi16(p, scv[h])) : _mm256_madd_epi16(p, scv[h]);
      }
      __m256i msum = _mm256_madd_epi16(loadu256(xb->bsums), mn16);
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(isum), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * xb->d), _mm256_cvtepi32_ps(msum), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) y[t * ys] = hsum_ps(acc[t]);
}
DEFINE_TILE8(tile_q2_Kx, body_q2_Kx)

/* Q3_K against KERN_ACT_Q8_K3X activations (kernels_impl.h): element
 * 128h + 32s + l, q = low2 | hbit << 2 in 0..7 (low2 = (qs[32h + l] >> 2s)
 * & 3, hbit = bit 4h + s of hmask[l]), x = d * (sc_k - 32) * (q - 4),
 * sub-block k = 8h + 2s + l / 16. The four 32-byte vectors V_s of half h
 * are transposed in 4-byte words within each 128-bit half (8 unpacks,
 * once per row and super-block, as Q4_K's): U_m's word i of half j is V_i's
 * word m, sub-block 8h + 2i + j in every U_m. Per token and half the four
 * u8 x s8 products are added in 16 bits (|sum| <= 4 x 2 x 7 x 127 = 7112)
 * and multiplied by the scales once: 8 maddubs + 2 madd per 256 weights
 * instead of 8 + 8. The -4 goes through the block sums times -4 (sc - 32)
 * in the same integer sum. Int32 lane L: elements 32 (L % 4) + 16 (L / 4)
 * + 0..15 of both halves, each times its sub-block's scale. */
TGT_INL void body_q3_Kx(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,
                        size_t ys) {
  const __m256i lo2 = _mm256_set1_epi8(3), bit2 = _mm256_set1_epi8(4);
  const __m256i pick = PICK_SCALE_2I_J;
  __m256 acc[NT_WIDE];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / QK_K; ib++) {
    const block_q3_K *b = (const block_q3_K *)w + ib;
    float d = f16_load(&b->d);
    /* 16 6-bit scales, four at a time (tensor_type.h): low nibbles from
     * bytes 0..7 (low then high halves), high 2 bits from bytes 8..11. */
    uint32_t a0, a1, a2;
    memcpy(&a0, b->scales, 4);
    memcpy(&a1, b->scales + 4, 4);
    memcpy(&a2, b->scales + 8, 4);
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    __m128i sc8 = _mm_setr_epi32((int)((a0 & m4) | (a2 & m2) << 4),
                                 (int)((a1 & m4) | ((a2 >> 2) & m2) << 4),
                                 (int)(((a0 >> 4) & m4) | ((a2 >> 4) & m2) << 4),
                                 (int)(((a1 >> 4) & m4) | ((a2 >> 6) & m2) << 4));
    __m256i sc16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(sc8, _mm_set1_epi8(32)));
    __m256i scm = _mm256_mullo_epi16(sc16, _mm256_set1_epi16(-4));
    __m256i hm = loadu256(b->hmask);
    __m256i u[2][4], scv[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      __m256i qv = loadu256(b->qs + 32 * h);
      __m256i v[4];
#pragma GCC unroll 4
      for (int s = 0; s < 4; s++) {
        __m256i low = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * s), lo2);
        int sh = 4 * h + s; /* hmask bit sh to bit 2 */
        __m256i hb = sh >= 2 ? _mm256_srli_epi16(hm, sh - 2) : _mm256_slli_epi16(hm, 2 - sh);
        v[s] = _mm256_or_si256(low, _mm256_and_si256(hb, bit2));
      }
      transpose_words4(v, u[h]);
      /* two immediates: at -O0 (sanitizer builds) h is not a constant */
      __m256i half = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11) : _mm256_permute2x128_si256(sc16, sc16, 0x00);
      scv[h] = _mm256_shuffle_epi8(half, pick);
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + ib;
      __m256i isum = _mm256_madd_epi16(loadu256(xb->bsums), scm);
#pragma GCC unroll 2
      for (int h = 0; h < 2; h++) {
        __m256i p = _mm256_maddubs_epi16(u[h][0], loadu256(xb->qs + 128 * h));
#pragma GCC unroll 3
        for (int m = 1; m < 4; m++)
          p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u[h][m], loadu256(xb->qs + 128 * h + 32 * m)));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, scv[h]));
      }
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(isum), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) y[t * ys] = hsum_ps(acc[t]);
}
DEFINE_TILE8(tile_q3_Kx, body_q3_Kx)

/* The Q3_K activations: quant_q8_K_x86's blocks, reordered by the shared
 * kern_q8_K3_interleave (so every variant's agree). */
TGT static void quant_q8_K3x_x86(const float *x, void *dst, int64_t n) {
  quant_q8_K_x86(x, dst, n);
  kern_q8_K3_interleave(dst, n / QK_K);
}

/* ---- the table both variants fill ------------------------------------- */

static void x86_fill_ops(struct kern_ops *ops) {
  ops->quant_q8 = quant_q8_x86;
  ops->quant_q8_K = quant_q8_K_x86;
  ops->quant_q8p = quant_q8p_x86;
  ops->quant_q8_Kx = quant_q8_Kx_x86;
  ops->quant_q8_K6x = quant_q8_K6x_x86;
  ops->quant_q8_K5x = quant_q8_K5x_x86;
  ops->quant_q8_K3x = quant_q8_K3x_x86;
  ops->tile[TENSOR_TYPE_F32] = tile_f32;
  ops->tile[TENSOR_TYPE_F16] = tile_f16;
  ops->tile[TENSOR_TYPE_BF16] = tile_bf16;
  ops->tile[TENSOR_TYPE_Q8_0] = tile_q8_0;
  ops->tile[TENSOR_TYPE_Q4_0] = tile_q4_0p;
  ops->tile_nt[TENSOR_TYPE_Q4_0] = NT_WIDE;
  ops->tile2[TENSOR_TYPE_Q4_0] = tile2_q4_0p;
  ops->tile[TENSOR_TYPE_Q5_0] = tile_q5_0;
  ops->tile[TENSOR_TYPE_Q4_1] = tile_q4_1;
  ops->tile[TENSOR_TYPE_Q5_1] = tile_q5_1;
  ops->tile[TENSOR_TYPE_Q4_K] = tile_q4_Kx;
  ops->tile_nt[TENSOR_TYPE_Q4_K] = NT_WIDE;
  ops->tile_nt[TENSOR_TYPE_Q5_K] = NT_WIDE;
  ops->tile_nt[TENSOR_TYPE_Q6_K] = NT_WIDE;
  ops->tile_nt[TENSOR_TYPE_Q2_K] = NT_WIDE;
  ops->tile_nt[TENSOR_TYPE_Q3_K] = NT_WIDE;
  ops->tile[TENSOR_TYPE_Q5_K] = tile_q5_Kx;
  ops->tile[TENSOR_TYPE_Q6_K] = tile_q6_Kx;
  ops->tile[TENSOR_TYPE_Q2_K] = tile_q2_Kx;
  ops->tile[TENSOR_TYPE_Q3_K] = tile_q3_Kx;
  ops->tile2[TENSOR_TYPE_Q8_0] = tile2_q8_0;
  ops->tile2[TENSOR_TYPE_Q5_0] = tile2_q5_0;
  ops->tile2[TENSOR_TYPE_Q4_1] = tile2_q4_1;
  ops->tile2[TENSOR_TYPE_Q5_1] = tile2_q5_1;
  ops->tile[TENSOR_TYPE_IQ4_NL] = tile_iq4_nl;
  ops->tile2[TENSOR_TYPE_IQ4_NL] = tile2_iq4_nl;
  ops->act[TENSOR_TYPE_IQ4_NL] = KERN_ACT_Q8;
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
