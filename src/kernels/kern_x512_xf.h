/*
 * kern_x512_xf.h - AVX-512 kernels for float-panel weights (F32, F16,
 * BF16 in groups of 32 rows, column-major: kernels_impl.h, packed_f.c),
 * included only by kern_avx512.c; x512_fill_xf_ops installs them, which is
 * what makes kern_pack lay those types out as panels on this variant.
 *
 * Panel kernel (xf_panel): one group x nt <= 12 tokens. Per column k: the
 * group's 32 values as two f32 vectors (rows 0-15, 16-31: F16 through
 * vcvtph2ps, BF16 by a 16-bit shift, F32 as is), then for each token one
 * broadcast of x[t][k] and two FMAs into that token's two accumulators:
 * 24 accumulators + 2 weight vectors + 1 broadcast of the 32 registers,
 * 24 FMAs per 2 weight conversions. The accumulators stay in registers
 * for the whole row (no parking, no horizontal sums).
 *
 * One-token kernel (xf_gemv): XFV_G groups at a time, each with its two
 * accumulators (2 XFV_G FMA chains in flight; one group alone would wait
 * on the 4-cycle FMA latency every column), one broadcast of x[k] for all,
 * and a software prefetch XFV_PF bytes ahead in every group's stream (the
 * F16 row gemv of kern_x512_f16.h measured the hardware prefetcher alone
 * short of DRAM speed), plus the tiles' far prefetch into L2
 * (x512_prefetch_far: TinyLlama F16 products 0.93 -> 1.00-1.01 of reading
 * the same bytes in the same process, the whole token 0.80-0.91 ->
 * 0.97-0.99, bench/decode_wall.c, 2 alternated rounds).
 *
 * Both add column after column with one FMA per (row, token) and column,
 * from +0: the order kernels_impl.h fixes for the layout, so they agree
 * with each other, with any token blocking and with fmaf bit for bit.
 */
#ifndef PARLEY_KERNELS_KERN_X512_XF_H
#define PARLEY_KERNELS_KERN_X512_XF_H

#ifndef XFV_G
#define XFV_G 4 /* groups per one-token pass */
#endif
#ifndef XFV_PF
#define XFV_PF 1024 /* prefetch distance in a group's stream, bytes */
#endif

/* 16 consecutive values at p as f32; kind 0 F32, 1 F16, 2 BF16. */
TGT_INL __m512 xf_w16(const uint8_t *p, int kind) {
  if (kind == 0) return _mm512_loadu_ps((const float *)(const void *)p);
  __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
  if (kind == 1) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Store masks for the first nr (1..32) rows of a group: rows 0-15, 16-31. */
TGT_INL __mmask16 xf_mask_lo(int64_t nr) { return nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1); }
TGT_INL __mmask16 xf_mask_hi(int64_t nr) {
  return nr >= 32 ? (__mmask16)0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : (__mmask16)0;
}

/* kern_xf_fn with nt a compile-time constant after inlining. */
TGT_INL void xf_panel(const uint8_t *grp, int64_t n, const float *x, size_t xs, int nt, float *y, size_t ys,
                      int nr, bool acc, int kind) {
  const size_t es = kind == 0 ? 4 : 2, cs = 32 * es; /* bytes per value, per column */
  const __mmask16 m0 = xf_mask_lo(nr), m1 = xf_mask_hi(nr);
  __m512 a0[KERN_XF_NT], a1[KERN_XF_NT];
  if (acc) {
#pragma GCC unroll 12
    for (int t = 0; t < nt; t++) {
      a0[t] = _mm512_maskz_loadu_ps(m0, y + ys * (size_t)t);
      a1[t] = _mm512_maskz_loadu_ps(m1, y + ys * (size_t)t + 16);
    }
  } else {
#pragma GCC unroll 12
    for (int t = 0; t < nt; t++) a0[t] = a1[t] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < n; k++) {
    const uint8_t *c = grp + cs * (size_t)k;
    const __m512 w0 = xf_w16(c, kind), w1 = xf_w16(c + 16 * es, kind);
#pragma GCC unroll 12
    for (int t = 0; t < nt; t++) {
      const __m512 xb = _mm512_set1_ps(x[xs * (size_t)t + (size_t)k]);
      a0[t] = _mm512_fmadd_ps(w0, xb, a0[t]);
      a1[t] = _mm512_fmadd_ps(w1, xb, a1[t]);
    }
  }
#pragma GCC unroll 12
  for (int t = 0; t < nt; t++) {
    _mm512_mask_storeu_ps(y + ys * (size_t)t, m0, a0[t]);
    _mm512_mask_storeu_ps(y + ys * (size_t)t + 16, m1, a1[t]);
  }
}

KERN_XF_DEFINE_PANEL(xf_panel_f32, xf_panel, 0)
KERN_XF_DEFINE_PANEL(xf_panel_f16, xf_panel, 1)
KERN_XF_DEFINE_PANEL(xf_panel_bf16, xf_panel, 2)

/* G (1..XFV_G) groups gb bytes apart x one token: y[r] for the first nr
 * rows of the G * 32. */
TGT_INL void xf_gemv_g(const uint8_t *grp, size_t gb, int G, int64_t n, const float *x, float *y, int64_t nr,
                       int kind) {
  const size_t es = kind == 0 ? 4 : 2, cs = 32 * es;
  __m512 a0[XFV_G], a1[XFV_G];
#pragma GCC unroll 4
  for (int g = 0; g < G; g++) a0[g] = a1[g] = _mm512_setzero_ps();
  for (int64_t k = 0; k < n; k++) {
    const __m512 xb = _mm512_set1_ps(x[k]);
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
      const uint8_t *c = grp + gb * (size_t)g + cs * (size_t)k;
      /* a hint past the group's end names the next group (or, for the
       * last, memory after it: no fault, nothing read into registers) */
      __asm__ volatile("prefetcht0 %0" : : "m"(c[XFV_PF]));
      if (kind == 0) __asm__ volatile("prefetcht0 %0" : : "m"(c[XFV_PF + 64]));
      x512_prefetch_far(c, kind == 0 ? 2 : 1); /* and into L2 further ahead (kern_x512_q4x8.h) */
      a0[g] = _mm512_fmadd_ps(xf_w16(c, kind), xb, a0[g]);
      a1[g] = _mm512_fmadd_ps(xf_w16(c + 16 * es, kind), xb, a1[g]);
    }
  }
#pragma GCC unroll 4
  for (int g = 0; g < G; g++) {
    const int64_t left = nr - 32 * (int64_t)g;
    if (left <= 0) break;
    _mm512_mask_storeu_ps(y + 32 * g, xf_mask_lo(left), a0[g]);
    _mm512_mask_storeu_ps(y + 32 * g + 16, xf_mask_hi(left), a1[g]);
  }
}

#define XF_DEFINE_GEMV(name, kind)                                                                     \
  TGT static void name(const uint8_t *grp, size_t gb, int64_t ng, int64_t n, const float *x, float *y,  \
                       int64_t nr) {                                                                    \
    for (int64_t g = 0; g < ng; g += XFV_G, nr -= 32 * XFV_G) {                                         \
      const uint8_t *p = grp + gb * (size_t)g;                                                          \
      switch (ng - g < XFV_G ? ng - g : XFV_G) {                                                        \
      case 1: xf_gemv_g(p, gb, 1, n, x, y + 32 * g, nr, kind); break;                                   \
      case 2: xf_gemv_g(p, gb, 2, n, x, y + 32 * g, nr, kind); break;                                   \
      case 3: xf_gemv_g(p, gb, 3, n, x, y + 32 * g, nr, kind); break;                                   \
      default: xf_gemv_g(p, gb, XFV_G, n, x, y + 32 * g, nr, kind); break;                              \
      }                                                                                                 \
    }                                                                                                   \
  }
XF_DEFINE_GEMV(xf_gemv_f32, 0)
XF_DEFINE_GEMV(xf_gemv_f16, 1)
XF_DEFINE_GEMV(xf_gemv_bf16, 2)

/* kern_xfw_fn: a group's columns widened to f32 (kind 1 F16, 2 BF16). */
TGT_INL void xf_widen(const uint8_t *grp, int64_t n, float *dst, int kind) {
  for (int64_t k = 0; k < n; k++) {
    _mm512_storeu_ps(dst + 32 * k, xf_w16(grp + 64 * k, kind));
    _mm512_storeu_ps(dst + 32 * k + 16, xf_w16(grp + 64 * k + 32, kind));
  }
}
TGT static void xf_widen_f16(const uint8_t *grp, int64_t n, float *dst) { xf_widen(grp, n, dst, 1); }
TGT static void xf_widen_bf16(const uint8_t *grp, int64_t n, float *dst) { xf_widen(grp, n, dst, 2); }

/* Installs the panel kernels: from now on kern_pack lays F32/F16/BF16
 * weights out as panels on this variant. */
static void x512_fill_xf_ops(struct kern_ops *ops) {
  ops->xf[TENSOR_TYPE_F32] = xf_panel_f32;
  ops->xf[TENSOR_TYPE_F16] = xf_panel_f16;
  ops->xf[TENSOR_TYPE_BF16] = xf_panel_bf16;
  ops->xfv[TENSOR_TYPE_F32] = xf_gemv_f32;
  ops->xfv[TENSOR_TYPE_F16] = xf_gemv_f16;
  ops->xfv[TENSOR_TYPE_BF16] = xf_gemv_bf16;
  ops->xfw[TENSOR_TYPE_F16] = xf_widen_f16;
  ops->xfw[TENSOR_TYPE_BF16] = xf_widen_bf16;
}

#endif
