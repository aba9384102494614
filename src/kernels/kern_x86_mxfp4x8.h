/*
 * kern_x86_mxfp4x8.h - the x86 kernels for MXFP4 weights: an 8-row x 8-token
 * tile for prompts (kern_ops.rect), the same body at one token for decode
 * (kern_ops.gemv), and the one-row tile with the same arithmetic. Compiled
 * by kern_avx2.c and kern_avx512.c after kern_x86_q4x8.h (x8_tail).
 *
 * Why: MXFP4 is the type of gpt-oss's expert matrices, which stay in the
 * file mapping (model/moe.c: a token faults in only the experts it uses),
 * so they cannot be repacked at load like Q4_0's 8-row groups. The layout
 * Q4_0's packed tile reads (4-byte words of 8 rows side by side, packed.c)
 * is instead built in registers per block: the 16 qs bytes of each of 8
 * consecutive rows (two 128-bit halves of 4 ymm, then a 4 x 4 dword
 * transpose per lane: 4 inserts, 8 unpacks) give 4 vectors, vector i
 * holding bytes 4i..4i+3 of rows 0..7, i.e. elements 4i..4i+3 (low
 * nibbles) and 16+4i..16+4i+3 (high nibbles). Each nibble vector becomes
 * |level| (u8) and the signed level by two byte shuffles, once per block
 * and tile of up to 8 tokens; then per token one broadcast 4-byte word of
 * the activations meets all 8 rows in one vpmaddubsw (the sign trick:
 * |l| times sign(x, l)). Against the row-at-a-time tile this is about a
 * third of the multiply-pipe work per weight x token, and the weights are
 * unpacked once per 8 tokens instead of once per 4.
 *
 * 16-bit sums are exact: |level| <= 12, |x| <= 127, and a 16-bit lane sums
 * 16 products of a block (2 per vpmaddubsw, 4 words x 2 halves):
 * 16 x 12 x 127 = 24384 < 32767. One vpmaddwd then gives the 8 rows' int32
 * block sums.
 *
 * The arithmetic per (row, token), the same in every MXFP4 kernel of every
 * variant (kern_generic_body.h's gen_tile_mxfp4 too): isum_b = the exact
 * integer sum over block b of level x q_x, then acc = fma(float(isum_b),
 * d_w * d_x, acc) for b = 0, 1, ... in order from +0 (d_w the half scale
 * mxfp4_half_scale, d_x the activation block's f32 scale), y = acc. So the
 * 8-row tile, the one-row tile, decode and prompts give the same bits for
 * a (row, token) whatever the other rows and tokens of the call.
 */
#ifndef PARLEY_KERNELS_KERN_X86_MXFP4X8_H
#define PARLEY_KERNELS_KERN_X86_MXFP4X8_H

#define MX8_NT 8 /* tokens per 8-row tile call */
/* One token: 8 rows read side by side are 8 streams, which the hardware
 * prefetcher followed worse than the one-row tile's single stream (2880 x
 * 2880 from L3, one thread: 0.86 ms against the one-row tile's 0.52);
 * prefetching each row 1024 bytes ahead brought it level with it in the
 * same minutes (bench/kernels_cpu.sh, a loaded machine: noisy). */
#ifndef MX8_PF_DIST
#define MX8_PF_DIST 1024 /* software prefetch, bytes ahead in each row (decode) */
#endif
#ifndef MX8_PF_NT
#define MX8_PF_NT 1 /* ... for calls of at most this many tokens */
#endif

/* |level| and level of the 16 MXFP4 nibbles (kvalues_mxfp4), for
 * vpshufb in both 128-bit lanes. */
TGT_INL __m256i mx8_abs_table(void) {
  return _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4,
                          6, 8, 12);
}
TGT_INL __m256i mx8_sgn_table(void) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_mxfp4));
}

/* The 8 rows' half scales of block b (mxfp4_half_scale, bit for bit): e >= 2
 * gives (e - 1) << 23, e = 0 and 1 the subnormals 0x00200000 << e. eoff
 * holds the byte offsets r * rb of rows 0..7. */
TGT_INL __m256 mx8_scales(const uint8_t *w, __m256i eoff, int64_t b) {
  __m256i e = _mm256_and_si256(_mm256_i32gather_epi32((const int *)(const void *)(w + 17 * b), eoff, 1),
                               _mm256_set1_epi32(0xff));
  __m256i norm = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  __m256i big = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(sub, norm, big));
}

/* Rows 0..7 (rb bytes apart) x nt <= MX8_NT tokens of kern_block_q8
 * activations: y[t * ys + r] for r < 8. */
TGT_INL void body_mx8(const uint8_t *w, size_t rb, int64_t n, const void *x, size_t xs, int nt, float *y,
                      size_t ys) {
  const int64_t nb = n / 32;
  const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  const __m256i tabs = mx8_abs_table(), tsgn = mx8_sgn_table();
  const int r1 = (int)rb;
  const __m256i eoff = _mm256_setr_epi32(0, r1, 2 * r1, 3 * r1, 4 * r1, 5 * r1, 6 * r1, 7 * r1);
  __m256 acc[MX8_NT];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *q = w + 17 * b + 1;
    if (nt <= MX8_PF_NT) /* decode: the 8 rows are 8 streams; see MX8_PF_DIST */
#pragma GCC unroll 8
      for (int r = 0; r < 8; r++) _mm_prefetch((const char *)q + (size_t)r * rb + MX8_PF_DIST, _MM_HINT_T0);
    /* rows r and r + 4 in the two lanes of a[r], then per lane a 4 x 4
     * transpose of dwords: v[i] = dword i of rows 0..3 | rows 4..7 */
    __m256i a[4], v[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
      a[r] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(q + (size_t)(r + 4) * rb)),
                              _mm_loadu_si128((const __m128i *)(q + (size_t)r * rb)));
    __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
    __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
    v[0] = _mm256_unpacklo_epi64(t0, t2);
    v[1] = _mm256_unpackhi_epi64(t0, t2);
    v[2] = _mm256_unpacklo_epi64(t1, t3);
    v[3] = _mm256_unpackhi_epi64(t1, t3);
    __m256i s[MX8_NT];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
      __m256i nl = _mm256_and_si256(v[i], m4), nh = _mm256_and_si256(_mm256_srli_epi16(v[i], 4), m4);
      __m256i al = _mm256_shuffle_epi8(tabs, nl), ah = _mm256_shuffle_epi8(tabs, nh);
      __m256i sl = _mm256_shuffle_epi8(tsgn, nl), sh = _mm256_shuffle_epi8(tsgn, nh);
#pragma GCC unroll 8
      for (int t = 0; t < nt; t++) {
        const kern_block_q8 *xb = (const kern_block_q8 *)((const char *)x + t * xs) + b;
        __m256i xl = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(const void *)(xb->qs + 4 * i)));
        __m256i xh = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(const void *)(xb->qs + 16 + 4 * i)));
        __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(al, _mm256_sign_epi8(xl, sl)),
                                     _mm256_maddubs_epi16(ah, _mm256_sign_epi8(xh, sh)));
        s[t] = i == 0 ? p : _mm256_add_epi16(s[t], p);
        __asm__("" : "+x"(s[t])); /* no reassociation into a tree (see body_q4x8) */
      }
    }
    const __m256 dw = mx8_scales(w, eoff, b);
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const kern_block_q8 *xb = (const kern_block_q8 *)((const char *)x + t * xs) + b;
      acc[t] = x8_tail(_mm256_madd_epi16(s[t], ones), dw, xb->d, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ys, acc[t]);
}

/* body_mx8 with nt a compile-time constant (as X8_PTILE). */
TGT static void tile8_mxfp4(const uint8_t *w, size_t rb, int64_t n, const void *x, size_t xs, int nt, float *y,
                            size_t ys) {
  switch (nt) {
  case 1: body_mx8(w, rb, n, x, xs, 1, y, ys); break;
  case 2: body_mx8(w, rb, n, x, xs, 2, y, ys); break;
  case 3: body_mx8(w, rb, n, x, xs, 3, y, ys); break;
  case 4: body_mx8(w, rb, n, x, xs, 4, y, ys); break;
  case 5: body_mx8(w, rb, n, x, xs, 5, y, ys); break;
  case 6: body_mx8(w, rb, n, x, xs, 6, y, ys); break;
  case 7: body_mx8(w, rb, n, x, xs, 7, y, ys); break;
  default: body_mx8(w, rb, n, x, xs, 8, y, ys); break;
  }
}

/* One row x nt <= 4 tokens with the same per-(row, token) arithmetic: the
 * block's 8 int32 lane sums added horizontally (exact), then the scalar
 * fused multiply-add. For the rows past the last full group of 8. */
TGT_INL void body_mx1(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  float acc[NT_MAX];
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) acc[t] = 0.0f;
  for (int64_t ib = 0; ib < n / 32; ib++) {
    float d, m = 0.0f;
    __m256i q = unpack32(w, ib, 6, &d, &m);
    __m256i qa = _mm256_sign_epi8(q, q);
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
      const kern_block_q8 *xb = (const kern_block_q8 *)((const char *)x + t * xs) + ib;
      int isum = hsum_i32(X86_DOT_U8S8(qa, _mm256_sign_epi8(loadu256(xb->qs), q)));
      acc[t] = fmaf((float)isum, d * xb->d, acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < nt; t++) y[t * ys] = acc[t];
}
DEFINE_TILE(tile_mxfp4x, body_mx1)

/* Whether rows rb bytes apart can go through the 8-row tile (its scale
 * gather takes 32-bit offsets up to 7 rb). */
static inline bool mx8_rows_ok(size_t rb) { return rb <= (size_t)INT32_MAX / 8; }

/* kern_ops.rect: nr rows x nt >= 2 tokens; groups of 8 rows through the
 * 8-row tile, all tokens of a group before the next (its 8 rows stay in
 * L1), the rest row by row. */
TGT static void rect_mxfp4(const void *w, size_t rb, int64_t nr, int64_t n, const void *x, size_t xs, int64_t nt,
                           float *y, size_t ys) {
  const uint8_t *W = w;
  int64_t r = 0;
  if (mx8_rows_ok(rb))
    for (; r + 8 <= nr; r += 8)
      for (int64_t t = 0; t < nt; t += MX8_NT)
        tile8_mxfp4(W + (size_t)r * rb, rb, n, (const char *)x + (size_t)t * xs, xs,
                    (int)(nt - t < MX8_NT ? nt - t : MX8_NT), y + (size_t)t * ys + r, ys);
  for (; r < nr; r++)
    for (int64_t t = 0; t < nt; t += NT_MAX)
      tile_mxfp4x(W + (size_t)r * rb, n, (const char *)x + (size_t)t * xs, xs,
                  (int)(nt - t < NT_MAX ? nt - t : NT_MAX), y + (size_t)t * ys + r, ys);
}

/* kern_ops.gemv: one token x nr rows, the same tiles at nt = 1. */
TGT static void gemv_mxfp4(const void *w, size_t rb, int64_t nr, int64_t n, const void *x, float *y) {
  const uint8_t *W = w;
  int64_t r = 0;
  if (mx8_rows_ok(rb))
    for (; r + 8 <= nr; r += 8) body_mx8(W + (size_t)r * rb, rb, n, x, 0, 1, y + r, 1);
  for (; r < nr; r++) body_mx1(W + (size_t)r * rb, n, x, 0, 1, y + r, 1);
}

static void x86_fill_mxfp4_ops(struct kern_ops *ops) {
  ops->tile[TENSOR_TYPE_MXFP4] = tile_mxfp4x;
  ops->tile2[TENSOR_TYPE_MXFP4] = NULL; /* the rect replaces the two-row tile */
  ops->rect[TENSOR_TYPE_MXFP4] = rect_mxfp4;
  ops->gemv[TENSOR_TYPE_MXFP4] = gemv_mxfp4;
  ops->act[TENSOR_TYPE_MXFP4] = KERN_ACT_Q8;
}

#endif
