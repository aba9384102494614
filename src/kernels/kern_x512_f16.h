/*
 * kern_x512_f16.h - 512-bit F32/F16/BF16 weight x f32 activation kernels
 * (one-row tile, one-token gemv, rectangle), included only by
 * kern_avx512.c after kern_x86_f16.h; x512_fill_f16_ops replaces those
 * types' tile and rect entries of the 256-bit versions and adds the gemv.
 * The AVX2 variant keeps kern_x86_f16.h.
 *
 * Why: with 2 FMA-512 ports a core does 32 f32 FMAs per cycle, twice the
 * 256-bit kernels' ceiling; F16 prompts (2 flops per weight and token) are
 * FMA-bound once each weight load is reused over enough tokens.
 *
 * Arithmetic per (row, token), the same in every kernel here (so the
 * rectangle equals the tile bit for bit, and decode, which uses the gemv
 * (the tile's arithmetic, 8 rows at a time), agrees with batched
 * prompts): accumulator a0 takes the FMAs of columns 32i..32i+15 and a1
 * those of 32i+16..32i+31, in column order; then, if
 * 16 or more columns are left, one FMA of the next 16 into a0, and the
 * last 0..15 columns as one masked FMA into a1 (masked-off lanes keep
 * their value); y = x512_hsum(a0 + a1). Two accumulators, not one, so a
 * one-token decode row has two FMA chains in flight (one chain at 4
 * cycles per 16 weights would cap a core near 8 bytes/cycle of F16).
 * This order differs from the 256-bit kernels' (8-lane accumulators, a
 * scalar tail), so the avx512 and avx2 variants agree only to rounding
 * (tests/unit/test_kernels.c kernels_isa_variants_agree).
 *
 * Rectangle (x512_rect), the 256-bit kr_rect's structure with 512-bit
 * registers: 2 rows x 6 tokens per inner step, 24 accumulators + 2 weight
 * vectors + 1 activation vector = 27 of the 32 zmm registers; per 32
 * columns 4 weight loads and conversions, 12 activation loads, 24 FMAs.
 * Each converted weight vector serves 6 tokens, each activation vector 2
 * rows. vcvtph2ps zmm (and BF16's zero-extend + shift) take FMA ports
 * (p0/p5), which is why tokens, not rows, get the larger share. Rows in
 * sub-blocks (weights kept in L2 across token blocks), tokens in blocks of
 * X5_TB, columns in k-chunks of X5_KC whose activations are copied into a
 * contiguous L1 buffer (token rows n_cols x 4 bytes apart alias in L1),
 * accumulators parked between chunks (both in the thread's
 * kern_rect_scratch, 120 KiB, not on the stack). Token
 * blocks and groups are cut near-equal (8 tokens: 4 + 4, not 6 + 2).
 * The X5_KC, X5_TB, X5_RB defaults may be overridden with -D for tuning
 * (measured on Emerald Rapids, loaded: docs/perf-decisions.md). Chunk limits are
 * multiples of 32 and parked accumulators are stored exactly, so the
 * chunking does not change any result.
 */
#ifndef PARLEY_KERNELS_KERN_X512_F16_H
#define PARLEY_KERNELS_KERN_X512_F16_H

#define X5_R 2     /* rows per register block */
#define X5_T 6     /* tokens per register block */
#ifndef X5_KC
#define X5_KC 512  /* columns per k-chunk (multiple of 32) */
#endif
#ifndef X5_TB
#define X5_TB 12   /* tokens per block (multiple of X5_T) */
#endif
#ifndef X5_RB
#define X5_RB 64   /* most rows per sub-block (multiple of X5_R) */
#endif
#define X5_RB_BYTES (1024 * 1024) /* weight bytes per sub-block, at most (L2: 2 MiB) */
#define X5_MIN_COLS 256 /* shorter rows: the tile loop (as kern_x86_f16.h) */

/* Sum of 16 lanes, in a fixed order (both kernels use this one). */
TGT_INL float x512_hsum(__m512 v) {
  __m256 s = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  return hsum_ps(s);
}

/* 16 weights from column i as f32; kind 0 = f32, 1 = f16, 2 = bf16. */
TGT_INL __m512 x512_load16w(const uint8_t *w, int64_t i, int kind) {
  if (kind == 0) return _mm512_loadu_ps((const float *)w + i);
  __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i));
  if (kind == 1) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The same for the first popcount(m) (< 16) columns from i, zeros past
 * them; nothing beyond them is read. */
TGT_INL __m512 x512_load16w_mask(const uint8_t *w, int64_t i, __mmask16 m, int kind) {
  if (kind == 0) return _mm512_maskz_loadu_ps(m, (const float *)w + i);
  __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i);
  if (kind == 1) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The tail (columns n32..n-1) and the sum of one (row, token). */
TGT_INL float x512_finish(const uint8_t *w, const float *xt, int64_t n, int64_t n32, __m512 a0, __m512 a1,
                          int kind) {
  int64_t i = n32;
  if (i + 16 <= n) {
    a0 = _mm512_fmadd_ps(x512_load16w(w, i, kind), _mm512_loadu_ps(xt + i), a0);
    i += 16;
  }
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    a1 = _mm512_mask3_fmadd_ps(x512_load16w_mask(w, i, m, kind), _mm512_maskz_loadu_ps(m, xt + i), a1, m);
  }
  return x512_hsum(_mm512_add_ps(a0, a1));
}

/* One weight row x nt (1..4) tokens: the kern_tile_fn. */
TGT_INL void x512_tile_float(const void *W, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys,
                             int kind) {
  const uint8_t *w = W;
  const int64_t n32 = n / 32 * 32;
  __m512 a0[NT_MAX], a1[NT_MAX];
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) {
    a0[t] = _mm512_setzero_ps();
    a1[t] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < n32; i += 32) {
    __m512 w0 = x512_load16w(w, i, kind), w1 = x512_load16w(w, i + 16, kind);
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
      const float *xt = (const float *)((const char *)x + t * xs);
      a0[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xt + i), a0[t]);
      a1[t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xt + i + 16), a1[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++)
    y[t * ys] = x512_finish(w, (const float *)((const char *)x + t * xs), n, n32, a0[t], a1[t], kind);
}

#define X5_DEFINE_TILE(name, kind)                                                                  \
  TGT static void name(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) { \
    switch (nt) {                                                                                   \
    case 1: x512_tile_float(w, n, x, xs, 1, y, ys, kind); break;                                    \
    case 2: x512_tile_float(w, n, x, xs, 2, y, ys, kind); break;                                    \
    case 3: x512_tile_float(w, n, x, xs, 3, y, ys, kind); break;                                    \
    default: x512_tile_float(w, n, x, xs, 4, y, ys, kind); break;                                   \
    }                                                                                               \
  }
X5_DEFINE_TILE(x512_tile_f32, 0)
X5_DEFINE_TILE(x512_tile_f16, 1)
X5_DEFINE_TILE(x512_tile_bf16, 2)

/* ---- one token x many rows (decode): kern_ops.gemv ---------------------
 * Rows in groups of X5_G, each row with the tile's two accumulators and
 * the tile's order (so every result equals x512_tile_float at nt = 1 bit
 * for bit), each activation vector loaded once for the group, and one
 * software prefetch per row and 64 bytes read, X5_PF_DIST bytes ahead in
 * the row; over a row's last X5_PF_DIST bytes the prefetch moves to the
 * same offset in the next group's row (rows are consecutive, so that is
 * (G - 1) rows further on), which is read next. Why: the one-row tile
 * called per row read 0.67-0.69 of the one-thread read probe from DRAM
 * (huge pages, CPU time): about 14 uops per 64-byte line wait in the
 * scheduler behind their loads, which caps the lines in flight, and the
 * hardware prefetcher alone does not run far enough ahead. 8 rows alone
 * gave 0.86-0.92, with this prefetch 1.05-1.09 (docs/perf-decisions.md,
 * "One-token float products"). Prefetches past the matrix are harmless (no fault). */
#ifndef X5_G
#define X5_G 8 /* rows per one-token group (4 or 8: the remainder goes 4, 2, 1) */
#endif
#ifndef X5_PF_DIST
#define X5_PF_DIST 512 /* bytes ahead in the row (a multiple of 64) */
#endif

/* Columns [i0, i1) (multiples of 32) of R rows (w + r * rb) for one token
 * x, accumulating into a0[r], a1[r]; each row prefetches pf bytes ahead. */
TGT_INL void x512_gemv_cols(const uint8_t *w, size_t rb, const float *x, int64_t i0, int64_t i1, size_t pf,
                            __m512 *a0, __m512 *a1, int R, int kind) {
  const size_t wel = kind ? 2 : 4; /* weight bytes per column */
  for (int64_t i = i0; i < i1; i += 32) {
    __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      const uint8_t *wr = w + (size_t)r * rb;
      const uint8_t *p = wr + (size_t)i * wel + pf;
      __asm__ volatile("prefetcht0 %0" : : "m"(*p));
      if (kind == 0) __asm__ volatile("prefetcht0 %0" : : "m"(p[64]));
      a0[r] = _mm512_fmadd_ps(x512_load16w(wr, i, kind), x0, a0[r]);
      a1[r] = _mm512_fmadd_ps(x512_load16w(wr, i + 16, kind), x1, a1[r]);
    }
  }
}

/* R (1..X5_G, a constant after inlining) rows x one token: y[r]. */
TGT_INL void x512_gemv_group(const uint8_t *w, size_t rb, int64_t n, const float *x, float *y, int R, int kind) {
  const int64_t n32 = n / 32 * 32;
  const size_t wel = kind ? 2 : 4;
  __m512 a0[X5_G], a1[X5_G];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    a0[r] = _mm512_setzero_ps();
    a1[r] = _mm512_setzero_ps();
  }
  /* first column whose prefetch would leave the row */
  int64_t isw = (int64_t)(rb > X5_PF_DIST ? (rb - X5_PF_DIST) / wel : 0) / 32 * 32;
  if (isw > n32) isw = n32;
  x512_gemv_cols(w, rb, x, 0, isw, X5_PF_DIST, a0, a1, R, kind);
  x512_gemv_cols(w, rb, x, isw, n32, X5_PF_DIST + (size_t)(R - 1) * rb, a0, a1, R, kind);
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) y[r] = x512_finish(w + (size_t)r * rb, x, n, n32, a0[r], a1[r], kind);
}

/* y[r] = row r . x for r < nr (rows w + r * rb, n columns, one f32 token):
 * the kern_gemv_fn. Groups of 8, then 4, 2, 1 for the rest. */
TGT_INL void x512_gemv_float(const void *W, size_t rb, int64_t nr, int64_t n, const void *X, float *y, int kind) {
  const uint8_t *w = W;
  const float *x = X;
  int64_t r = 0;
  for (; r + X5_G <= nr; r += X5_G) x512_gemv_group(w + (size_t)r * rb, rb, n, x, y + r, X5_G, kind);
  if (r + 4 <= nr) {
    x512_gemv_group(w + (size_t)r * rb, rb, n, x, y + r, 4, kind);
    r += 4;
  }
  if (r + 2 <= nr) {
    x512_gemv_group(w + (size_t)r * rb, rb, n, x, y + r, 2, kind);
    r += 2;
  }
  if (r < nr) x512_gemv_group(w + (size_t)r * rb, rb, n, x, y + r, 1, kind);
}

#define X5_DEFINE_GEMV(name, kind)                                                                  \
  TGT static void name(const void *w, size_t rb, int64_t nr, int64_t n, const void *x, float *y) { \
    x512_gemv_float(w, rb, nr, n, x, y, kind);                                                      \
  }
X5_DEFINE_GEMV(x512_gemv_f32, 0)
X5_DEFINE_GEMV(x512_gemv_f16, 1)
X5_DEFINE_GEMV(x512_gemv_bf16, 2)

/* Columns [k0, k1) (a multiple of 32 long) of R rows (w, w + rb) x T
 * tokens (x, x + xs bytes); accumulators acc[(r * T + t) * 2 + h] loaded
 * (or started at zero) and stored back. R, T compile-time after inlining. */
TGT_INL void x512_sweep(const uint8_t *w, size_t rb, const uint8_t *x, size_t xs, int64_t k0, int64_t k1,
                        __m512 *acc, int zero, int R, int T, int kind) {
  __m512 a[X5_R][X5_T][2];
#pragma GCC unroll 2
  for (int r = 0; r < R; r++)
#pragma GCC unroll 6
    for (int t = 0; t < T; t++) {
      a[r][t][0] = zero ? _mm512_setzero_ps() : acc[(r * T + t) * 2];
      a[r][t][1] = zero ? _mm512_setzero_ps() : acc[(r * T + t) * 2 + 1];
    }
  for (int64_t i = k0; i < k1; i += 32) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      __m512 wv[X5_R];
#pragma GCC unroll 2
      for (int r = 0; r < R; r++) wv[r] = x512_load16w(w + (size_t)r * rb, i + 16 * h, kind);
#pragma GCC unroll 6
      for (int t = 0; t < T; t++) {
        __m512 xv = _mm512_loadu_ps((const float *)(x + (size_t)t * xs) + i + 16 * h);
        if (R > 1) __asm__("" : "+v"(xv)); /* one load for both rows, not one folded into each FMA */
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) a[r][t][h] = _mm512_fmadd_ps(wv[r], xv, a[r][t][h]);
      }
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; r++)
#pragma GCC unroll 6
    for (int t = 0; t < T; t++) {
      acc[(r * T + t) * 2] = a[r][t][0];
      acc[(r * T + t) * 2 + 1] = a[r][t][1];
    }
}

/* x512_sweep for runtime R (1..X5_R) and T (1..X5_T): one copy each. */
TGT_INL void x512_sweep_rt(const uint8_t *w, size_t rb, const uint8_t *x, size_t xs, int64_t k0, int64_t k1,
                           __m512 *acc, int zero, int R, int T, int kind) {
#define X5_CASE_T(RR)                                                                 \
  switch (T) {                                                                        \
  case 6: x512_sweep(w, rb, x, xs, k0, k1, acc, zero, RR, 6, kind); break;            \
  case 5: x512_sweep(w, rb, x, xs, k0, k1, acc, zero, RR, 5, kind); break;            \
  case 4: x512_sweep(w, rb, x, xs, k0, k1, acc, zero, RR, 4, kind); break;            \
  case 3: x512_sweep(w, rb, x, xs, k0, k1, acc, zero, RR, 3, kind); break;            \
  case 2: x512_sweep(w, rb, x, xs, k0, k1, acc, zero, RR, 2, kind); break;            \
  default: x512_sweep(w, rb, x, xs, k0, k1, acc, zero, RR, 1, kind); break;           \
  }
  if (R == 2) {
    X5_CASE_T(2)
  } else {
    X5_CASE_T(1)
  }
#undef X5_CASE_T
}

/* Size of the next of ceil(rem / most) near-equal groups of the rem items
 * left: 8 tokens as 4 + 4 rather than 6 + 2 (a group of 2 converts each
 * weight vector for 2 tokens only). Which group a token falls in never
 * changes its result. */
static inline int64_t x512_even(int64_t rem, int64_t most) {
  int64_t g = (rem + most - 1) / most;
  return (rem + g - 1) / g;
}

/* y[t * ys + r] = row r . token t for r < nr, t < nt: rows at w + r * rb,
 * tokens at x + t * xs bytes (f32), n (>= 32) columns. */
TGT_INL void x512_rect(const void *W, size_t rb, int64_t nr, int64_t n, const void *X, size_t xs, int64_t nt,
                       float *y, size_t ys, int kind) {
  const uint8_t *w = W, *x = X;
  const int64_t n32 = n / 32 * 32;
  const size_t wel = kind ? 2 : 4; /* weight bytes per column */
  int64_t rbk = (int64_t)(X5_RB_BYTES / (rb ? rb : 1));
  if (rbk > X5_RB) rbk = X5_RB;
  if (rbk < X5_R) rbk = X5_R;
  rbk -= rbk % X5_R;
  /* parked accumulators [row group][token group][X5_R x X5_T x 2], then
   * the token block's k-chunk packed as [token][X5_KC] floats: 120 KiB of
   * the thread's kern_rect_scratch (not the stack: pool threads' stacks
   * may be small) */
  typedef __m512 x5_park[X5_TB / X5_T][X5_R * X5_T * 2];
  const size_t park_bytes = (X5_RB / X5_R) * sizeof(x5_park);
  uint8_t *sc = nt <= X5_T || n32 <= X5_KC ? NULL : kern_rect_scratch(park_bytes + X5_TB * X5_KC * sizeof(float));
  if (!sc) {
    /* one token group, or rows of one k-chunk (or no scratch: the same
     * results, slower): whole rows, no parking */
    for (int64_t t = 0, T; t < nt; t += T) {
      T = x512_even(nt - t, X5_T);
      for (int64_t r = 0; r < nr; r += X5_R) {
        int R = r + X5_R <= nr ? X5_R : (int)(nr - r);
        __m512 a[X5_R * X5_T * 2];
        x512_sweep_rt(w + (size_t)r * rb, rb, x + (size_t)t * xs, xs, 0, n32, a, 1, R, T, kind);
        for (int rr = 0; rr < R; rr++)
          for (int tt = 0; tt < T; tt++)
            y[(size_t)(t + tt) * ys + (size_t)(r + rr)] =
                x512_finish(w + (size_t)(r + rr) * rb, (const float *)(x + (size_t)(t + tt) * xs), n, n32,
                            a[(rr * T + tt) * 2], a[(rr * T + tt) * 2 + 1], kind);
      }
    }
    return;
  }
  x5_park *acc = (x5_park *)sc;
  float *xp = (float *)(sc + park_bytes);
  const size_t xps = X5_KC * sizeof(float);
  for (int64_t r0 = 0; r0 < nr; r0 += rbk) {
    int64_t r1 = r0 + rbk < nr ? r0 + rbk : nr;
    for (int64_t t0 = 0, t1; t0 < nt; t0 = t1) {
      t1 = t0 + x512_even(nt - t0, X5_TB);
      for (int64_t k0 = 0; k0 < n32; k0 += X5_KC) {
        int64_t k1 = k0 + X5_KC < n32 ? k0 + X5_KC : n32;
        for (int64_t t = t0; t < t1; t++)
          memcpy(xp + (t - t0) * X5_KC, (const float *)(x + (size_t)t * xs) + k0, (size_t)(k1 - k0) * sizeof(float));
        for (int64_t r = r0; r < r1; r += X5_R) {
          int R = r + X5_R <= r1 ? X5_R : (int)(r1 - r);
          int gi = 0;
          for (int64_t t = t0, T; t < t1; t += T, gi++) {
            T = x512_even(t1 - t, X5_T);
            x512_sweep_rt(w + (size_t)r * rb + (size_t)k0 * wel, rb, (const uint8_t *)(xp + (t - t0) * X5_KC), xps,
                          0, k1 - k0, acc[(r - r0) / X5_R][gi], k0 == 0, R, (int)T, kind);
          }
        }
      }
      for (int64_t r = r0; r < r1; r += X5_R) {
        int R = r + X5_R <= r1 ? X5_R : (int)(r1 - r);
        int gi = 0;
        for (int64_t t = t0, T; t < t1; t += T, gi++) {
          T = x512_even(t1 - t, X5_T);
          const __m512 *a = acc[(r - r0) / X5_R][gi];
          for (int rr = 0; rr < R; rr++)
            for (int tt = 0; tt < T; tt++)
              y[(size_t)(t + tt) * ys + (size_t)(r + rr)] =
                  x512_finish(w + (size_t)(r + rr) * rb, (const float *)(x + (size_t)(t + tt) * xs), n, n32,
                              a[(rr * T + tt) * 2], a[(rr * T + tt) * 2 + 1], kind);
        }
      }
    }
  }
}

#define X5_DEFINE_RECT(name, tile, kind)                                                                    \
  TGT static void name(const void *w, size_t rb, int64_t nr, int64_t n, const void *x, size_t xs, int64_t nt, \
                       float *y, size_t ys) {                                                               \
    if (n < X5_MIN_COLS) kr_by_tiles(tile, w, rb, nr, n, x, xs, nt, y, ys);                                 \
    else x512_rect(w, rb, nr, n, x, xs, nt, y, ys, kind);                                                   \
  }
X5_DEFINE_RECT(x512_rect_f32, x512_tile_f32, 0)
X5_DEFINE_RECT(x512_rect_f16, x512_tile_f16, 1)
X5_DEFINE_RECT(x512_rect_bf16, x512_tile_bf16, 2)

/* Replaces the F32/F16/BF16 tile and rect entries of x86_fill_ops and
 * x86_fill_ops_rect (no two-row tile: kern_matmul hands every call of 2+
 * tokens to rect, so one would never run). */
static void x512_fill_f16_ops(struct kern_ops *ops) {
  ops->tile[TENSOR_TYPE_F32] = x512_tile_f32;
  ops->tile[TENSOR_TYPE_F16] = x512_tile_f16;
  ops->tile[TENSOR_TYPE_BF16] = x512_tile_bf16;
  ops->gemv[TENSOR_TYPE_F32] = x512_gemv_f32;
  ops->gemv[TENSOR_TYPE_F16] = x512_gemv_f16;
  ops->gemv[TENSOR_TYPE_BF16] = x512_gemv_bf16;
  ops->rect[TENSOR_TYPE_F32] = x512_rect_f32;
  ops->rect[TENSOR_TYPE_F16] = x512_rect_f16;
  ops->rect[TENSOR_TYPE_BF16] = x512_rect_bf16;
}

#endif
