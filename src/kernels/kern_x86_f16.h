/*
 * kern_x86_f16.h - register-blocked F32/F16/BF16 weight x f32 activation
 * kernels for prompt-sized calls (kern_ops.rect) and, for the AVX2
 * variant, one-token calls (kern_ops.gemv, at the end), compiled by kern_avx2.c
 * and kern_avx512.c after kern_x86_body.h (whose load8w, load1w and hsum_ps
 * they use; the includer defines TGT and TGT_INL).
 *
 * Why: the one-row tile (tile_float) multiplies one weight row by up to 4
 * tokens, so each 8-float activation vector it loads serves one FMA, and a
 * token block's activations (8 tokens x 2048 columns = 64 KiB) come from
 * L2 for every row: about one FMA per cycle, ~40 GFLOP/s per core. Here:
 *
 * - 2 rows x 3 tokens per inner step: per 8 columns, 2 weight loads with
 *   their conversion (vcvtph2ps, or a shift for BF16), 3 activation loads,
 *   6 FMAs; 12 accumulators + 2 weight vectors + 1 activation = 15 of the
 *   16 ymm registers. Each converted weight vector serves 3 tokens and each
 *   activation vector 2 rows.
 * - k-chunks of KR_KC columns: a block of up to KR_TB tokens has
 *   KR_TB x KR_KC x 4 = 12 KiB of activations per chunk, copied into a
 *   contiguous buffer (token rows n_cols x 4 bytes apart, 8 KiB for 2048
 *   columns, would all fall in the same L1 sets and evict each other) that
 *   stays in L1 while every row pair of the sub-block passes over it;
 *   accumulators are parked in a stack array between chunks (24 KiB;
 *   24 loads/stores per 384 FMAs).
 * - rows in sub-blocks of at most KR_RB rows and 512 KiB of weights,
 *   outermost, so a sub-block's weights stay in L2 for all token blocks
 *   (ffn_down's 5632-column rows: 46 rows; with 256 KiB, 22 rows measured
 *   6% slower, 65 against 69 GFLOP/s).
 * - one load per activation vector: left to itself gcc folds the load into
 *   both rows' FMAs (16 loads per 12 FMAs, load-port bound: 49 against 62
 *   GFLOP/s); an empty asm keeps it in a register.
 * - 3 tokens or fewer, or rows of at most one k-chunk: no chunks, no
 *   parking, whole rows (two contiguous weight streams); the chunked walk
 *   was slower than the one-row tile at 2 tokens and 2.5-3x slower on
 *   attention's 64x128 products, where zeroing, parking and finishing
 *   outweigh 64 columns of FMAs.
 * The sizes were tuned on Zen 3 (32 KiB L1d, 512 KiB L2): KC 128..1024,
 * RB 8..128, TB 6..18 measured 43-68 GFLOP/s for 2048x2048 x 64 tokens.
 *
 * Arithmetic per (row, token) is exactly tile_float's: accumulator a0 takes
 * the FMAs of columns 16i..16i+7 and a1 of 16i+8..16i+15, in column order;
 * then an 8-column tail into a0, a scalar fmaf tail, y = hsum(a0 + a1) +
 * tail. Chunk boundaries are multiples of 16 and the parked accumulators
 * are stored exactly, so every result is bit-identical to the one-row
 * tile's (tested), whatever the rectangle, the token count or the split;
 * decode (the one-row tile, or kg_gemv with the tile's arithmetic) agrees
 * with batched prompts.
 */
#ifndef PARLEY_KERNELS_KERN_X86_F16_H
#define PARLEY_KERNELS_KERN_X86_F16_H

#define KR_KC 512 /* columns per k-chunk (multiple of 16) */
#define KR_TB 6   /* tokens per block: 2 groups of 3 */
#define KR_RB 64  /* most rows per sub-block (even) */
#define KR_RB_BYTES (512 * 1024) /* weight bytes per sub-block, at most */

/* One k-range [k0, k1) (multiple of 16 long) of R rows (w, w + rb) x T
 * tokens (x, x + xs bytes), accumulators acc[(r * T + t) * 2 + h] loaded
 * (or started at zero when zero is set: a zeroing loop over acc became a
 * `rep stos` that cost 30% on attention-sized calls) and stored back. R
 * and T are compile-time constants after inlining. */
TGT_INL void kr_sweep(const uint8_t *w, size_t rb, const uint8_t *x, size_t xs, int64_t k0, int64_t k1,
                      __m256 *acc, int zero, int R, int T, int kind) {
  __m256 a[2][3][2];
#pragma GCC unroll 2
  for (int r = 0; r < R; r++)
#pragma GCC unroll 3
    for (int t = 0; t < T; t++) {
      a[r][t][0] = zero ? _mm256_setzero_ps() : acc[(r * T + t) * 2];
      a[r][t][1] = zero ? _mm256_setzero_ps() : acc[(r * T + t) * 2 + 1];
    }
  for (int64_t i = k0; i < k1; i += 16) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      __m256 wv[2];
#pragma GCC unroll 2
      for (int r = 0; r < R; r++) wv[r] = load8w(w + (size_t)r * rb, i + 8 * h, kind);
#pragma GCC unroll 3
      for (int t = 0; t < T; t++) {
        __m256 xv = _mm256_loadu_ps((const float *)(x + (size_t)t * xs) + i + 8 * h);
        if (R == 2) __asm__("" : "+x"(xv)); /* one load for both rows, not one folded into each FMA */
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) a[r][t][h] = _mm256_fmadd_ps(wv[r], xv, a[r][t][h]);
      }
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; r++)
#pragma GCC unroll 3
    for (int t = 0; t < T; t++) {
      acc[(r * T + t) * 2] = a[r][t][0];
      acc[(r * T + t) * 2 + 1] = a[r][t][1];
    }
}

/* The same for runtime R (1, 2) and T (1..3): one unrolled copy each. */
TGT_INL void kr_sweep_rt(const uint8_t *w, size_t rb, const uint8_t *x, size_t xs, int64_t k0, int64_t k1,
                         __m256 *acc, int zero, int R, int T, int kind) {
  if (R == 2) {
    if (T == 3) kr_sweep(w, rb, x, xs, k0, k1, acc, zero, 2, 3, kind);
    else if (T == 2) kr_sweep(w, rb, x, xs, k0, k1, acc, zero, 2, 2, kind);
    else kr_sweep(w, rb, x, xs, k0, k1, acc, zero, 2, 1, kind);
  } else {
    if (T == 3) kr_sweep(w, rb, x, xs, k0, k1, acc, zero, 1, 3, kind);
    else if (T == 2) kr_sweep(w, rb, x, xs, k0, k1, acc, zero, 1, 2, kind);
    else kr_sweep(w, rb, x, xs, k0, k1, acc, zero, 1, 1, kind);
  }
}

/* The tails and the final sum of one (row, token), as tile_float does. */
TGT_INL float kr_finish(const uint8_t *w, const float *xt, int64_t n, int64_t n16, __m256 a0, __m256 a1, int kind) {
  int64_t i = n16;
  if (i + 8 <= n) {
    a0 = _mm256_fmadd_ps(load8w(w, i, kind), _mm256_loadu_ps(xt + i), a0);
    i += 8;
  }
  float tail = 0.0f;
  for (; i < n; i++) tail = fmaf(load1w(w, i, kind), xt[i], tail);
  return hsum_ps(_mm256_add_ps(a0, a1)) + tail;
}

/* y[t * ys + r] = row r . token t for r < nr, t < nt: rows at w + r * rb,
 * tokens at x + t * xs bytes (f32), n columns. */
TGT_INL void kr_rect(const void *W, size_t rb, int64_t nr, int64_t n, const void *X, size_t xs, int64_t nt,
                     float *y, size_t ys, int kind) {
  const uint8_t *w = W, *x = X;
  const int64_t n16 = n / 16 * 16;
  int64_t rbk = (int64_t)(KR_RB_BYTES / (rb ? rb : 1));
  if (rbk > KR_RB) rbk = KR_RB;
  if (rbk < 2) rbk = 2;
  rbk &= ~(int64_t)1;
  if (nt <= 3 || n16 <= KR_KC) {
    /* one token group, or rows of one k-chunk (attention's 64- and 128-
     * column products): no packing, no parked accumulators; whole rows,
     * two contiguous weight streams */
    for (int64_t t = 0; t < nt; t += 3) {
      int T = t + 3 <= nt ? 3 : (int)(nt - t);
      for (int64_t r = 0; r < nr; r += 2) {
        int R = r + 2 <= nr ? 2 : 1;
        __m256 a[12];
        kr_sweep_rt(w + (size_t)r * rb, rb, x + (size_t)t * xs, xs, 0, n16, a, 1, R, T, kind);
        for (int rr = 0; rr < R; rr++)
          for (int tt = 0; tt < T; tt++)
            y[(size_t)(t + tt) * ys + (size_t)(r + rr)] =
                kr_finish(w + (size_t)(r + rr) * rb, (const float *)(x + (size_t)(t + tt) * xs), n, n16,
                          a[(rr * T + tt) * 2], a[(rr * T + tt) * 2 + 1], kind);
      }
    }
    return;
  }
  /* parked accumulators: [row pair][token group of 3][2 rows x 3 tokens x 2] */
  __m256 acc[KR_RB / 2][KR_TB / 3][12];
  /* the token block's k-chunk, packed: [token][KR_KC] floats */
  float xp[KR_TB * KR_KC] __attribute__((aligned(32)));
  const size_t xps = KR_KC * sizeof(float);
  for (int64_t r0 = 0; r0 < nr; r0 += rbk) {
    int64_t r1 = r0 + rbk < nr ? r0 + rbk : nr;
    for (int64_t t0 = 0; t0 < nt; t0 += KR_TB) {
      int64_t t1 = t0 + KR_TB < nt ? t0 + KR_TB : nt;
      for (int64_t k0 = 0; k0 < n16; k0 += KR_KC) {
        int64_t k1 = k0 + KR_KC < n16 ? k0 + KR_KC : n16;
        /* token rows n_cols * 4 bytes apart (often a power of two) would
         * share L1 sets; packed, the chunk is one contiguous 12 KiB */
        for (int64_t t = t0; t < t1; t++)
          memcpy(xp + (t - t0) * KR_KC, (const float *)(x + (size_t)t * xs) + k0, (size_t)(k1 - k0) * sizeof(float));
        for (int64_t r = r0; r < r1; r += 2) {
          int R = r + 2 <= r1 ? 2 : 1;
          for (int64_t t = t0; t < t1; t += 3) {
            int T = t + 3 <= t1 ? 3 : (int)(t1 - t);
            kr_sweep_rt(w + (size_t)r * rb + (size_t)k0 * (kind ? 2 : 4), rb,
                        (const uint8_t *)(xp + (t - t0) * KR_KC), xps, 0, k1 - k0,
                        acc[(r - r0) / 2][(t - t0) / 3], k0 == 0, R, T, kind);
          }
        }
      }
      for (int64_t r = r0; r < r1; r += 2) {
        int R = r + 2 <= r1 ? 2 : 1;
        for (int64_t t = t0; t < t1; t += 3) {
          int T = t + 3 <= t1 ? 3 : (int)(t1 - t);
          const __m256 *a = acc[(r - r0) / 2][(t - t0) / 3];
          for (int rr = 0; rr < R; rr++)
            for (int tt = 0; tt < T; tt++)
              y[(size_t)(t + tt) * ys + (size_t)(r + rr)] =
                  kr_finish(w + (size_t)(r + rr) * rb, (const float *)(x + (size_t)(t + tt) * xs), n, n16,
                            a[(rr * T + tt) * 2], a[(rr * T + tt) * 2 + 1], kind);
        }
      }
    }
  }
}

/* Rows shorter than this go through the one-row tile (same results):
 * attention's 64- and 128-column products measured 10-25% slower here
 * (the per-(row, token) finish is a larger share), 256 columns and up
 * faster (128x256 x 128 tokens: 47 -> 59 GFLOP/s). */
#define KR_MIN_COLS 256

TGT_INL void kr_by_tiles(kern_tile_fn tile, const uint8_t *w, size_t rb, int64_t nr, int64_t n, const uint8_t *x,
                         size_t xs, int64_t nt, float *y, size_t ys) {
  for (int64_t t = 0; t < nt; t += KERN_TILE_TOKENS) {
    int k = (int)(nt - t < KERN_TILE_TOKENS ? nt - t : KERN_TILE_TOKENS);
    for (int64_t r = 0; r < nr; r++) tile(w + (size_t)r * rb, n, x + (size_t)t * xs, xs, k, &y[(size_t)t * ys + (size_t)r], ys);
  }
}

#define DEFINE_RECT(name, tile, kind)                                                                       \
  TGT static void name(const void *w, size_t rb, int64_t nr, int64_t n, const void *x, size_t xs, int64_t nt, \
                       float *y, size_t ys) {                                                               \
    if (n < KR_MIN_COLS) kr_by_tiles(tile, w, rb, nr, n, x, xs, nt, y, ys);                                 \
    else kr_rect(w, rb, nr, n, x, xs, nt, y, ys, kind);                                                     \
  }
DEFINE_RECT(rect_f32, tile_f32, 0)
DEFINE_RECT(rect_f16, tile_f16, 1)
DEFINE_RECT(rect_bf16, tile_bf16, 2)

static void x86_fill_ops_rect(struct kern_ops *ops) {
  ops->rect[TENSOR_TYPE_F32] = rect_f32;
  ops->rect[TENSOR_TYPE_F16] = rect_f16;
  ops->rect[TENSOR_TYPE_BF16] = rect_bf16;
}

/* ---- one token x many rows (decode): kern_ops.gemv, AVX2 variant -------
 * kern_x512_f16.h's scheme with 256-bit registers: rows in groups of
 * KG_G, each row with tile_float's two accumulators (a0: columns
 * 16i..16i+7, a1: 16i+8..16i+15, in column order) and tile_float's tails
 * and sum (kr_finish), so every result equals tile_f32/f16/bf16 at nt = 1
 * bit for bit and decode agrees with batched prompts. Each activation
 * vector is loaded once for the group; each row issues one prefetcht0 per
 * 64 bytes of weights, KG_PF_DIST bytes ahead, moving over its last
 * KG_PF_DIST bytes to the next group's row (KG_G - 1 rows further on),
 * which is read next. Why: a call of the one-row tile per row keeps one
 * row's loads in flight and leaves the run-ahead to the hardware
 * prefetcher (docs/perf-decisions.md, "One-token float products", has that
 * limit measured for the 512-bit tile). 4 rows: 8 accumulators + 2 activation vectors +
 * converted weights fit the 16 ymm registers. Installed by kern_avx2.c
 * (x86_fill_ops_gemv); the AVX-512 variant has its own (x512_gemv_*). */
#ifndef KG_G
#define KG_G 4 /* rows per one-token group (the remainder goes 2, 1) */
#endif
#ifndef KG_PF_DIST
#define KG_PF_DIST 512 /* bytes ahead in the row (a multiple of 64) */
#endif

/* One 16-column step at column j of R rows for one token x: a0[r] takes
 * columns j..j+7, a1[r] j+8..j+15 (tile_float's order). */
TGT_INL void kg_step16(const uint8_t *w, size_t rb, const float *x, int64_t j, __m256 *a0, __m256 *a1, int R,
                       int kind) {
  __m256 x0 = _mm256_loadu_ps(x + j), x1 = _mm256_loadu_ps(x + j + 8);
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    const uint8_t *wr = w + (size_t)r * rb;
    a0[r] = _mm256_fmadd_ps(load8w(wr, j, kind), x0, a0[r]);
    a1[r] = _mm256_fmadd_ps(load8w(wr, j + 8, kind), x1, a1[r]);
  }
}

/* Columns [i0, i1) (i1 - i0 a multiple of 64 weight bytes) of R rows
 * (w + r * rb) for one token x into a0[r], a1[r], in 16-column steps; each
 * row prefetches once per 64 bytes, pf bytes ahead. */
TGT_INL void kg_cols(const uint8_t *w, size_t rb, const float *x, int64_t i0, int64_t i1, size_t pf, __m256 *a0,
                     __m256 *a1, int R, int kind) {
  const int64_t span = kind ? 32 : 16; /* columns per 64 weight bytes */
  const size_t wel = kind ? 2 : 4;
  for (int64_t i = i0; i < i1; i += span) {
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      const uint8_t *p = w + (size_t)r * rb + (size_t)i * wel + pf;
      __asm__ volatile("prefetcht0 %0" : : "m"(*p));
    }
#pragma GCC unroll 2
    for (int64_t j = i; j < i + span; j += 16) kg_step16(w, rb, x, j, a0, a1, R, kind);
  }
}

/* R (1..KG_G, a constant after inlining) rows x one token: y[r]. */
TGT_INL void kg_group(const uint8_t *w, size_t rb, int64_t n, const float *x, float *y, int R, int kind) {
  const int64_t n16 = n / 16 * 16;
  const int64_t span = kind ? 32 : 16;
  const size_t wel = kind ? 2 : 4;
  const int64_t nsp = n16 / span * span; /* whole 64-byte spans */
  __m256 a0[KG_G], a1[KG_G];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    a0[r] = _mm256_setzero_ps();
    a1[r] = _mm256_setzero_ps();
  }
  /* first column whose prefetch would leave the row */
  int64_t isw = (int64_t)(rb > KG_PF_DIST ? (rb - KG_PF_DIST) / wel : 0) / span * span;
  if (isw > nsp) isw = nsp;
  kg_cols(w, rb, x, 0, isw, KG_PF_DIST, a0, a1, R, kind);
  kg_cols(w, rb, x, isw, nsp, KG_PF_DIST + (size_t)(R - 1) * rb, a0, a1, R, kind);
  if (nsp < n16) kg_step16(w, rb, x, nsp, a0, a1, R, kind); /* F16/BF16: one 16-column step left, no prefetch */
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) y[r] = kr_finish(w + (size_t)r * rb, x, n, n16, a0[r], a1[r], kind);
}

/* y[r] = row r . x for r < nr (rows w + r * rb, n columns, one f32 token):
 * the kern_gemv_fn. Groups of KG_G, then 2, 1 for the rest. */
TGT_INL void kg_gemv(const void *W, size_t rb, int64_t nr, int64_t n, const void *X, float *y, int kind) {
  const uint8_t *w = W;
  const float *x = X;
  int64_t r = 0;
  for (; r + KG_G <= nr; r += KG_G) kg_group(w + (size_t)r * rb, rb, n, x, y + r, KG_G, kind);
  for (; r + 2 <= nr; r += 2) kg_group(w + (size_t)r * rb, rb, n, x, y + r, 2, kind);
  if (r < nr) kg_group(w + (size_t)r * rb, rb, n, x, y + r, 1, kind);
}

#define DEFINE_GEMV(name, kind)                                                                     \
  TGT static void name(const void *w, size_t rb, int64_t nr, int64_t n, const void *x, float *y) { \
    kg_gemv(w, rb, nr, n, x, y, kind);                                                              \
  }
DEFINE_GEMV(gemv_f32, 0)
DEFINE_GEMV(gemv_f16, 1)
DEFINE_GEMV(gemv_bf16, 2)

/* Installed by kern_avx2.c only (inline: unused in kern_avx512.c, which
 * installs x512_gemv_*). */
static inline void x86_fill_ops_gemv(struct kern_ops *ops) {
  ops->gemv[TENSOR_TYPE_F32] = gemv_f32;
  ops->gemv[TENSOR_TYPE_F16] = gemv_f16;
  ops->gemv[TENSOR_TYPE_BF16] = gemv_bf16;
}

#endif
