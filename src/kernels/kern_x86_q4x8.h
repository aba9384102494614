/*
 * kern_x86_q4x8.h - the x86 kernels for Q4_0 (and, below, Q5_0 and Q8_0) weights
 * repacked at load time into groups of 8 interleaved rows (kernels/packed.c
 * has the layout and the driver), compiled by kern_avx2.c and
 * kern_avx512.c after kern_x86_body.h with the same TGT / TGT_INL macros.
 *
 * Why: the row-at-a-time Q4_0 kernel spends 8 vector instructions per 64
 * weights x token, 5 of them on the multiply pipes. With 8 rows interleaved
 * in 4-byte words, one 32-byte register holds 4 consecutive nibbles of each
 * of 8 rows, and one vpmaddubsw multiplies all of them by one broadcast of
 * 4 activation bytes of a token: 8 vpmaddubsw per block of 32 x 8 rows x
 * token, their products summed in 16 bits (|sum| <= 8 x 2 x 15 x 127 =
 * 30480, exact), then one vpmaddwd, one int32 subtract of the stored
 * 8 * sum(x), one conversion and one FMA with d_w d_x per block: about 12
 * multiply-pipe instructions per 256 weights x token instead of 20.
 * The nibbles are unpacked once per block and tile of tokens.
 *
 * Per (row, token) the arithmetic is fixed (exact int32 block sums, then
 * acc = fma(float(sum), d_w * d_x, acc) block after block in column
 * order), so a result does not depend on nt, on the other rows of the
 * group, or on the variant (vpdpbusd would give the same exact sums).
 */
#ifndef PARLEY_KERNELS_KERN_X86_Q4X8_H
#define PARLEY_KERNELS_KERN_X86_Q4X8_H

#ifndef Q4X8_NT
#define Q4X8_NT 8 /* tokens per tile call */
#endif

/* Defines NAME, a packed tile entry point (kern_ops.ptile) that calls the
 * always-inlined BODY with the token count as a compile-time constant
 * (1..7, else NT = the type's tokens per call), so gcc unrolls every token
 * loop and keeps the accumulators in registers. Counts above NT never
 * arrive (the driver caps them), and their branches fold away. */
#define X8_PTILE(NAME, BODY, NT)                                                                \
  TGT static void NAME(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,   \
                       size_t ys) {                                                           \
    if (nt == 1 || NT == 1) BODY(w, n, x, xs, 1, y, ys);                                       \
    else if (nt == 2 || NT == 2) BODY(w, n, x, xs, 2, y, ys);                                  \
    else if (nt == 3 || NT == 3) BODY(w, n, x, xs, 3, y, ys);                                  \
    else if (NT > 4 && nt == 4) BODY(w, n, x, xs, NT > 4 ? 4 : 1, y, ys);                      \
    else if (NT > 5 && nt == 5) BODY(w, n, x, xs, NT > 5 ? 5 : 1, y, ys);                      \
    else if (NT > 6 && nt == 6) BODY(w, n, x, xs, NT > 6 ? 6 : 1, y, ys);                      \
    else if (NT > 7 && nt == 7) BODY(w, n, x, xs, NT > 7 ? 7 : 1, y, ys);                      \
    else BODY(w, n, x, xs, NT, y, ys);                                                         \
  }

/* Software prefetch distance in bytes ahead of the block being read.
 * The groups of a matrix are one forward stream (the next tile call reads
 * the bytes after this group's), so prefetching past the group's end is
 * useful; past the matrix's end it is harmless (prefetches do not fault).
 * On the 2-core Zen 3 KVM guest, one-token calls over 300 MB of Q4_0 read
 * 12.7-14.2 GB/s without it and 15-17.6 with 2048 (one thread, CPU time,
 * bench/kernels_cpu.sh with ROTATE_MB; the read probe gave 16-19 in the
 * same runs): the hardware prefetcher alone does not run far enough ahead
 * of a loop that also computes. 1024..8192 all helped about as much. */
#ifndef X8_PF_DIST
#define X8_PF_DIST 2048
#endif
/* The AVX2 bodies' distances for one token (decode), from
 * bench/decode_wall on the Zen 3 guest (products against a plain read of
 * their bytes, 4 alternated rounds of 1024 / 1536 / 2048;
 * docs/perf-decisions.md, "Distances"): Q8_0 (272-byte blocks) read 0.93-0.96 at
 * 2048 and 0.97-0.99 at 1024 (TinyLlama), Qwen2.5-0.5B's 0.93-0.96 and
 * 0.94-0.98; Q4_0 (144-byte blocks) 0.94-0.98 at 2048, 0.95-0.97 at 1536,
 * 0.94-0.96 at 1024. Q5_0 (176) takes Q4_0's. The AVX-512 tiles keep
 * X8_PF_DIST. */
#ifndef Q8X8_PF_DIST1
#define Q8X8_PF_DIST1 1024
#endif
#ifndef Q4X8_PF_DIST1
#define Q4X8_PF_DIST1 1536
#endif

/* Prefetches the n cache lines starting dist (a constant; 0: none) bytes
 * after p (n covers one packed block: 3 lines for 144 bytes, 5 for 272). */
TGT_INL void x8_prefetch(const uint8_t *p, int n, int dist) {
  if (dist <= 0) return;
#pragma GCC unroll 8 /* else gcc keeps a 4-instruction loop per line */
  for (int i = 0; i < n; i++) _mm_prefetch((const char *)p + dist + 64 * i, _MM_HINT_T0);
}

/* The per-token tail of every x8 body for one block: the exact int32
 * block sums of the 8 rows (i32, offset already removed) to f32, times
 * d_w (8 rows' scales) * d_x (the token's), added to acc. One definition
 * for the Q4_0, Q5_0 and Q8_0 bodies (their per-token arithmetic after the
 * exact integer block sum is the same; any other tile of these layouts
 * must use it too to stay bit-identical to them). */
TGT_INL __m256 x8_tail(__m256i i32, __m256 dw, float dx, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc);
}

/* One group of 8 interleaved Q4_0 rows (n columns) x nt <= Q4X8_NT tokens
 * of kern_block_q8s activations: y[t * ys + r] for r < 8. */
TGT_INL void body_q4x8(const void *wg, int64_t n, const void *x, size_t xs, int nt, float *y,
                       size_t ys) {
  const int64_t nb = n / 32;
  const uint8_t *blk0 = wg; /* 144-byte blocks: 8 f16 scales, 4 vectors */
  const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  __m256 acc[Q4X8_NT];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    /* words i and 4 + i of each token's 32 activation bytes meet the low
     * and high nibbles of vector i; 16-bit sums per token across the
     * block (exact, see the header) */
    __m256i s[Q4X8_NT];
    x8_prefetch(blk0 + 144 * b, 3, nt == 1 ? Q4X8_PF_DIST1 : X8_PF_DIST);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
      __m256i v = _mm256_loadu_si256((const __m256i *)(blk0 + 144 * b + 16 + 32 * i));
      __m256i wl = _mm256_and_si256(v, m4), wh = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#pragma GCC unroll 8
      for (int t = 0; t < nt; t++) {
        const kern_block_q8s *xb = (const kern_block_q8s *)((const char *)x + t * xs) + b;
        __m256i xl = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(xb->qs + 4 * i)));
        __m256i xh = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(xb->qs + 16 + 4 * i)));
        __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(wl, xl), _mm256_maddubs_epi16(wh, xh));
        s[t] = i == 0 ? p : _mm256_add_epi16(s[t], p);
        /* keeps gcc from reassociating the sums into a tree over all
         * products of the block (it then spills them to the stack) */
        __asm__("" : "+x"(s[t]));
      }
    }
    __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk0 + 144 * b)));
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const kern_block_q8s *xb = (const kern_block_q8s *)((const char *)x + t * xs) + b;
      __m256i i32 = _mm256_sub_epi32(_mm256_madd_epi16(s[t], ones), _mm256_set1_epi32(xb->s8));
      acc[t] = x8_tail(i32, dw, xb->d, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ys, acc[t]);
}

X8_PTILE(ptile_q4x8, body_q4x8, Q4X8_NT)

/* ---- Q8_0 x 8 rows -------------------------------------------------------
 * Same interleave with 8 int8 vectors per block (vector j: elements
 * 4j..4j+3 of the 8 rows). Signed x signed has no single AVX2 multiply, so
 * the sign trick: |w| (u8, once per block and tile) times sign(x, w) (s8,
 * per token). Those products reach 2 x 128 x 127 = 32512 per 16-bit lane,
 * so each vpmaddubsw goes to int32 at once (vpmaddwd with ones) and the
 * int32 sums are added: exact, any order. kern_block_q8 activations. */
#ifndef Q8X8_NT
#define Q8X8_NT 8 /* tokens per tile call */
#endif

TGT_INL void body_q8x8(const void *wg, int64_t n, const void *x, size_t xs, int nt, float *y,
                       size_t ys) {
  const int64_t nb = n / 32;
  const uint8_t *blk0 = wg; /* 272-byte blocks: 8 f16 scales, 8 vectors */
  __m256 acc[Q8X8_NT];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    __m256i s[Q8X8_NT];
    x8_prefetch(blk0 + 272 * b, 5, nt == 1 ? Q8X8_PF_DIST1 : X8_PF_DIST);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
      __m256i w = _mm256_loadu_si256((const __m256i *)(blk0 + 272 * b + 16 + 32 * j));
      __m256i aw = _mm256_abs_epi8(w);
#pragma GCC unroll 8
      for (int t = 0; t < nt; t++) {
        const kern_block_q8 *xb = (const kern_block_q8 *)((const char *)x + t * xs) + b;
        __m256i xv = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(xb->qs + 4 * j)));
        __m256i p = X86_DOT_U8S8(aw, _mm256_sign_epi8(xv, w));
        s[t] = j == 0 ? p : _mm256_add_epi32(s[t], p);
        __asm__("" : "+x"(s[t])); /* no reassociation into a tree (see body_q4x8) */
      }
    }
    __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk0 + 272 * b)));
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const kern_block_q8 *xb = (const kern_block_q8 *)((const char *)x + t * xs) + b;
      acc[t] = x8_tail(s[t], dw, xb->d, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ys, acc[t]);
}

X8_PTILE(ptile_q8x8, body_q8x8, Q8X8_NT)

/* ---- Q5_0 x 8 rows -------------------------------------------------------
 * The Q4_0 nibble vectors plus the high-bit vector H (packed.c): q (0..31)
 * = nibble | the bit H holds for it moved to bit 4, so the kernel is
 * body_q4x8's with x (q - 16) = x q - 16 x: unsigned q times the signed
 * activation bytes by vpmaddubsw. A 16-bit sum of q x over a block can
 * pass 32767 (16 x 31 x 127 per lane), so each lane starts instead at its
 * -16 sum(x) (kern_block_q8c's c, from the quantizer): after any number of
 * products the lane holds sum (q - 16) x over the elements done plus
 * -16 x over those to come, 16 terms of at most 16 x 127 each, so no
 * partial sum leaves 16 bits (|.| <= 32512) and the last one is the exact
 * sum (q - 16) x. One vpmaddwd per block and token then gives the int32
 * row sums. The alternative, the block in two halves (4 products each,
 * so that sum q x fits), each widened by its own vpmaddwd, the int32
 * halves added and 2 s8 subtracted, costs two more operations per block x
 * 8 rows x token, one of them on the multiply pipes (Q5_0 2048 x 2048 x 64
 * tokens, one thread: 158-163 against 171-177 GFLOP/s this way;
 * docs/perf-decisions.md). Per (row, token) both give the same exact int32
 * block sum and x8_tail, so the results are the same. */
#ifndef Q5X8_NT
#define Q5X8_NT 8 /* tokens per tile call */
#endif

TGT_INL void body_q5x8(const void *wg, int64_t n, const void *x, size_t xs, int nt, float *y,
                       size_t ys) {
  const int64_t nb = n / 32;
  const uint8_t *blk0 = wg; /* 176-byte blocks: 8 f16 scales, 4 nibble vectors, H */
  const __m256i m4 = _mm256_set1_epi8(0x0f), m10 = _mm256_set1_epi8(0x10), ones = _mm256_set1_epi16(1);
  __m256 acc[Q5X8_NT];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = blk0 + 176 * b;
    x8_prefetch(blk, 3, nt == 1 ? Q4X8_PF_DIST1 : X8_PF_DIST);
    const __m256i h = _mm256_loadu_si256((const __m256i *)(blk + 144));
    __m256i s[Q5X8_NT];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
      __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * i));
      __m256i hl = i == 0 ? _mm256_slli_epi16(h, 4)
                   : i == 1 ? _mm256_slli_epi16(h, 3)
                   : i == 2 ? _mm256_slli_epi16(h, 2)
                            : _mm256_slli_epi16(h, 1);
      __m256i hh = i == 0 ? h
                   : i == 1 ? _mm256_srli_epi16(h, 1)
                   : i == 2 ? _mm256_srli_epi16(h, 2)
                            : _mm256_srli_epi16(h, 3);
      __m256i wl = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_and_si256(hl, m10));
      __m256i wh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_and_si256(hh, m10));
#pragma GCC unroll 8
      for (int t = 0; t < nt; t++) {
        const kern_block_q8c *xb = (const kern_block_q8c *)((const char *)x + t * xs) + b;
        __m256i xl = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(xb->qs + 4 * i)));
        __m256i xh = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(xb->qs + 16 + 4 * i)));
        __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(wl, xl), _mm256_maddubs_epi16(wh, xh));
        __m256i base;
        if (i == 0) {
          int32_t c2;
          memcpy(&c2, xb->c, 4); /* c[0] in the low 16 bits: lane 0 of each word */
          base = _mm256_set1_epi32(c2);
        } else {
          base = s[t];
        }
        s[t] = _mm256_add_epi16(base, p); /* |partial sums| <= 32512 (above) */
        __asm__("" : "+x"(s[t])); /* no reassociation into a tree (see body_q4x8) */
      }
    }
    __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const kern_block_q8c *xb = (const kern_block_q8c *)((const char *)x + t * xs) + b;
      acc[t] = x8_tail(_mm256_madd_epi16(s[t], ones), dw, xb->d, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ys, acc[t]);
}

X8_PTILE(ptile_q5x8, body_q5x8, Q5X8_NT)

/* kern_block_q8s activations: the blocks quant_q8_x86 makes (bit-identical
 * to kern_quant_q8_c), with the float sum replaced by 8 * the integer sum. */
TGT static void quant_q8s_x86(const float *x, void *dst, int64_t n) {
  quant_q8_x86(x, dst, n);
  kern_block_q8s *b = dst;
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < n / 32; i++) {
    __m256i q = _mm256_loadu_si256((const __m256i *)b[i].qs);
    __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    b[i].s8 = 8 * _mm_cvtsi128_si32(h);
  }
}

/* kern_block_q8c activations (packed Q5_0): the blocks quant_q8_x86 makes,
 * with the float sum replaced by the two 16-bit lane corrections. */
TGT static void quant_q8c_x86(const float *x, void *dst, int64_t n) {
  _Static_assert(sizeof(kern_block_q8c) == sizeof(kern_block_q8), "same block size");
  quant_q8_x86(x, dst, n);
  kern_block_q8c *b = dst;
  const __m256i ones8 = _mm256_set1_epi8(1);
  for (int64_t i = 0; i < n / 32; i++) {
    /* 16-bit lane k = q[2k] + q[2k + 1]: even k belong to c[0], odd to c[1] */
    __m256i s = _mm256_maddubs_epi16(ones8, _mm256_loadu_si256((const __m256i *)b[i].qs));
    __m128i h = _mm_add_epi16(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi16(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi16(h, _mm_shuffle_epi32(h, 0xb1)); /* lanes 0, 1: the two sums (|.| <= 2032) */
    h = _mm_mullo_epi16(h, _mm_set1_epi16(-16));
    b[i].c[0] = (int16_t)_mm_extract_epi16(h, 0);
    b[i].c[1] = (int16_t)_mm_extract_epi16(h, 1);
  }
}

static void x86_fill_packed_ops(struct kern_ops *ops) {
  ops->ptile[TENSOR_TYPE_Q4_0] = ptile_q4x8;
  ops->ptile_nt[TENSOR_TYPE_Q4_0] = Q4X8_NT;
  ops->pquant[TENSOR_TYPE_Q4_0] = quant_q8s_x86;
  ops->ptile[TENSOR_TYPE_Q5_0] = ptile_q5x8;
  ops->ptile_nt[TENSOR_TYPE_Q5_0] = Q5X8_NT;
  ops->pquant[TENSOR_TYPE_Q5_0] = quant_q8c_x86;
  ops->ptile[TENSOR_TYPE_Q8_0] = ptile_q8x8;
  ops->ptile_nt[TENSOR_TYPE_Q8_0] = Q8X8_NT;
  ops->pquant[TENSOR_TYPE_Q8_0] = quant_q8_x86;
}

#endif
