/*
 * kern_x86_xf.h - AVX2 kernels for float-panel weights (F32, F16, BF16 in
 * groups of 32 rows, column-major: kernels_impl.h, packed_f.c), included
 * only by kern_avx2.c (the AVX-512 variant has its own, kern_x512_xf.h);
 * x86_fill_xf_ops installs them, which makes kern_pack lay those types out
 * as panels on this variant too.
 *
 * Why: over GGUF rows the AVX2 prompt kernel (kern_x86_f16.h's register
 * rectangle) read ~48 GFLOP/s per core on the 2-core Zen 3 guest, half its
 * FMA peak: every (row, token) is a dot product that ends in a horizontal
 * sum, and each converted weight vector serves few tokens. On panels a
 * token block is an outer product whose accumulators stay in registers for
 * the whole row.
 *
 * Panel kernel (x86_xf_panel): 16 ymm registers hold half a group (16
 * rows, two vectors) for XF2_NT = 6 tokens: 12 accumulators, 2 weight
 * vectors, 1 broadcast of x[t][k]; per column 2 weight loads and 12 FMAs.
 * A call of up to 12 tokens runs the two halves for tokens 0-5, then for
 * 6-11 (the half's 64 bytes per column of widened f32 come from L2).
 *
 * One-token kernel (x86_xf_gemv): XF2V_G = 2 groups at a time, four
 * accumulators each (8 FMA chains in flight: the FMA latency is 4 cycles
 * at 2 per cycle), one broadcast of x[k] for both, and a software prefetch
 * XF2V_PF bytes ahead in each group's stream.
 *
 * Both add column after column with one FMA per (row, token) and column,
 * from +0 or from y: the order kernels_impl.h fixes for the layout, so
 * they agree with each other, with the AVX-512 kernels and with fmaf bit
 * for bit.
 */
#ifndef PARLEY_KERNELS_KERN_X86_XF_H
#define PARLEY_KERNELS_KERN_X86_XF_H

#define XF2_NT 6 /* tokens per register block (12 accumulators) */
#ifndef XF2V_G
#define XF2V_G 2 /* groups per one-token pass */
#endif
#ifndef XF2V_PF
#define XF2V_PF 1024 /* prefetch distance in a group's stream, bytes */
#endif

/* 8 consecutive values at p as f32; kind 0 F32, 1 F16, 2 BF16. */
TGT_INL __m256 xf2_w8(const uint8_t *p, int kind) {
  if (kind == 0) return _mm256_loadu_ps((const float *)(const void *)p);
  const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
  if (kind == 1) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Lane mask (all ones) of rows r0 .. r0 + 7 that are below nr. */
TGT_INL __m256i xf2_mask(int64_t nr, int r0) {
  const int64_t left = nr - r0;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(left < 0 ? 0 : left > 8 ? 8 : (int)left),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Rows 16 h .. 16 h + 15 of one group (the first nr of its 32 rows are
 * real) x nt (1..XF2_NT, a constant after inlining) tokens. */
TGT_INL void xf2_half(const uint8_t *grp, int64_t n, const float *x, size_t xs, int nt, float *y, size_t ys,
                      int h, int nr, bool acc, int kind) {
  const size_t es = kind == 0 ? 4 : 2, cs = 32 * es; /* bytes per value, per column */
  const uint8_t *g = grp + 16 * es * (size_t)h;
  float *yh = y + 16 * h;
  const bool full = nr >= 16 * h + 16;
  const __m256i m0 = xf2_mask(nr, 16 * h), m1 = xf2_mask(nr, 16 * h + 8);
  __m256 a0[XF2_NT], a1[XF2_NT];
#pragma GCC unroll 6
  for (int t = 0; t < nt; t++) {
    float *yt = yh + ys * (size_t)t;
    if (!acc)
      a0[t] = a1[t] = _mm256_setzero_ps();
    else if (full) {
      a0[t] = _mm256_loadu_ps(yt);
      a1[t] = _mm256_loadu_ps(yt + 8);
    } else {
      a0[t] = _mm256_maskload_ps(yt, m0);
      a1[t] = _mm256_maskload_ps(yt + 8, m1);
    }
  }
  for (int64_t k = 0; k < n; k++) {
    const uint8_t *c = g + cs * (size_t)k;
    const __m256 w0 = xf2_w8(c, kind), w1 = xf2_w8(c + 8 * es, kind);
#pragma GCC unroll 6
    for (int t = 0; t < nt; t++) {
      const __m256 xb = _mm256_broadcast_ss(x + xs * (size_t)t + (size_t)k);
      a0[t] = _mm256_fmadd_ps(w0, xb, a0[t]);
      a1[t] = _mm256_fmadd_ps(w1, xb, a1[t]);
    }
  }
#pragma GCC unroll 6
  for (int t = 0; t < nt; t++) {
    float *yt = yh + ys * (size_t)t;
    if (full) {
      _mm256_storeu_ps(yt, a0[t]);
      _mm256_storeu_ps(yt + 8, a1[t]);
    } else {
      _mm256_maskstore_ps(yt, m0, a0[t]);
      _mm256_maskstore_ps(yt + 8, m1, a1[t]);
    }
  }
}

/* kern_xf_fn with nt (1..KERN_XF_NT) a constant after inlining: tokens
 * 0-5 over both halves, then tokens 6-11. */
TGT_INL void x86_xf_panel(const uint8_t *grp, int64_t n, const float *x, size_t xs, int nt, float *y, size_t ys,
                          int nr, bool acc, int kind) {
  const int nt0 = nt < XF2_NT ? nt : XF2_NT;
  for (int h = 0; h < 2 && 16 * h < nr; h++) xf2_half(grp, n, x, xs, nt0, y, ys, h, nr, acc, kind);
  if (nt > XF2_NT)
    for (int h = 0; h < 2 && 16 * h < nr; h++)
      xf2_half(grp, n, x + xs * XF2_NT, xs, nt - XF2_NT, y + ys * XF2_NT, ys, h, nr, acc, kind);
}

KERN_XF_DEFINE_PANEL(x86_xf_panel_f32, x86_xf_panel, 0)
KERN_XF_DEFINE_PANEL(x86_xf_panel_f16, x86_xf_panel, 1)
KERN_XF_DEFINE_PANEL(x86_xf_panel_bf16, x86_xf_panel, 2)

/* G (1..XF2V_G) groups gb bytes apart x one token: y[r] for the first nr
 * rows of the G * 32. */
TGT_INL void xf2_gemv_g(const uint8_t *grp, size_t gb, int G, int64_t n, const float *x, float *y, int64_t nr,
                        int kind) {
  const size_t es = kind == 0 ? 4 : 2, cs = 32 * es;
  __m256 a[XF2V_G][4];
#pragma GCC unroll 2
  for (int g = 0; g < G; g++) a[g][0] = a[g][1] = a[g][2] = a[g][3] = _mm256_setzero_ps();
  for (int64_t k = 0; k < n; k++) {
    const __m256 xb = _mm256_broadcast_ss(x + k);
#pragma GCC unroll 2
    for (int g = 0; g < G; g++) {
      const uint8_t *c = grp + gb * (size_t)g + cs * (size_t)k;
      /* past the group's end the hint names the next group (or memory
       * after the last: no fault, nothing read into registers) */
      __asm__ volatile("prefetcht0 %0" : : "m"(c[XF2V_PF]));
      if (kind == 0) __asm__ volatile("prefetcht0 %0" : : "m"(c[XF2V_PF + 64]));
#pragma GCC unroll 4
      for (int v = 0; v < 4; v++) a[g][v] = _mm256_fmadd_ps(xf2_w8(c + 8 * es * (size_t)v, kind), xb, a[g][v]);
    }
  }
#pragma GCC unroll 2
  for (int g = 0; g < G; g++)
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) {
      const int64_t left = nr - 32 * (int64_t)g - 8 * v; /* rows of this vector that exist */
      if (left >= 8)
        _mm256_storeu_ps(y + 32 * g + 8 * v, a[g][v]);
      else if (left > 0)
        _mm256_maskstore_ps(y + 32 * g + 8 * v, xf2_mask(left, 0), a[g][v]);
    }
}

#define XF2_DEFINE_GEMV(name, kind)                                                                    \
  TGT static void name(const uint8_t *grp, size_t gb, int64_t ng, int64_t n, const float *x, float *y,  \
                       int64_t nr) {                                                                    \
    for (int64_t g = 0; g < ng; g += XF2V_G, nr -= 32 * XF2V_G) {                                       \
      const uint8_t *p = grp + gb * (size_t)g;                                                          \
      if (ng - g < XF2V_G)                                                                              \
        xf2_gemv_g(p, gb, 1, n, x, y + 32 * g, nr, kind);                                               \
      else                                                                                              \
        xf2_gemv_g(p, gb, XF2V_G, n, x, y + 32 * g, nr, kind);                                          \
    }                                                                                                   \
  }
XF2_DEFINE_GEMV(x86_xf_gemv_f32, 0)
XF2_DEFINE_GEMV(x86_xf_gemv_f16, 1)
XF2_DEFINE_GEMV(x86_xf_gemv_bf16, 2)

/* kern_xfw_fn: a group's columns widened to f32 (kind 1 F16, 2 BF16). */
TGT_INL void xf2_widen(const uint8_t *grp, int64_t n, float *dst, int kind) {
  for (int64_t k = 0; k < n; k++)
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) _mm256_storeu_ps(dst + 32 * k + 8 * v, xf2_w8(grp + 64 * k + 16 * v, kind));
}
TGT static void x86_xf_widen_f16(const uint8_t *grp, int64_t n, float *dst) { xf2_widen(grp, n, dst, 1); }
TGT static void x86_xf_widen_bf16(const uint8_t *grp, int64_t n, float *dst) { xf2_widen(grp, n, dst, 2); }

/* Installs the panel kernels: from now on kern_pack lays F32/F16/BF16
 * weights out as panels on this variant. */
static void x86_fill_xf_ops(struct kern_ops *ops) {
  ops->xf[TENSOR_TYPE_F32] = x86_xf_panel_f32;
  ops->xf[TENSOR_TYPE_F16] = x86_xf_panel_f16;
  ops->xf[TENSOR_TYPE_BF16] = x86_xf_panel_bf16;
  ops->xfv[TENSOR_TYPE_F32] = x86_xf_gemv_f32;
  ops->xfv[TENSOR_TYPE_F16] = x86_xf_gemv_f16;
  ops->xfv[TENSOR_TYPE_BF16] = x86_xf_gemv_bf16;
  ops->xfw[TENSOR_TYPE_F16] = x86_xf_widen_f16;
  ops->xfw[TENSOR_TYPE_BF16] = x86_xf_widen_bf16;
}

#endif
