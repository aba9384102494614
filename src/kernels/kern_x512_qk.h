/*
 * kern_x512_qk.h - AVX-512 VNNI tiles for the packed K-quants (Q4_K, Q6_K
 * in the 8-row layouts of kernels/packed_k.c, the same bytes the AVX2
 * tiles of kern_x86_q4kx8.h / kern_x86_q6kx8.h read). Included only by
 * kern_avx512.c, after those headers (it reuses their helpers and
 * activation quantizers); x512_fill_packed_qk_ops overrides their ptile
 * entries.
 *
 * Why: on Intel server cores (Emerald Rapids measured, docs/perf-decisions.md,
 * "AVX-512 K-quants") vpdpbusd zmm issues 2 per cycle (ports 0 and 5): 128 u8 x s8
 * multiply-adds per cycle with the accumulation, against the 64 of the
 * AVX2 vpmaddubsw, which also needs its 16-bit adds and vpmaddwd.
 *
 * Lane layout: a zmm holds 8 rows x 2 consecutive 4-byte column groups,
 * row r in dword lanes 2r (columns c..c+3) and 2r + 1 (c+4..c+7), built
 * from two consecutive packed vectors by one vpermd; the token's 8
 * activation bytes c..c+7 are then one 64-bit broadcast (a load, no
 * shuffle per token). A lane's partial sum over 16 products of 4- or 6-bit
 * q by int8 x stays within int16, so one vpdpwssd with (scale, 0) per
 * dword applies the sub-block's scale exactly into the int32 sums.
 *
 * Per (row, token) the integers are the AVX2 tile's exactly (Q4_K: sum of
 * scale x sub-block sum, and the mins' sum; Q6_K: the scaled sum minus 32 x
 * the scaled per-16 activation sums), and the float steps are the same
 * instructions in the same order, so results are bit-identical to the
 * AVX2 variant, independent of nt and of the thread count.
 */
#ifndef PARLEY_KERNELS_KERN_X512_QK_H
#define PARLEY_KERNELS_KERN_X512_QK_H

#ifndef X512_Q4K_NT
#define X512_Q4K_NT 8 /* tokens per tile call: 8 measured 1.2x faster than 4 at 64 tokens, no spills */
#endif
#ifndef X512_Q6K_NT
#define X512_Q6K_NT 8 /* as X512_Q4K_NT (1.1-1.2x against 4) */
#endif

/* Q6_K tiles of at most this many tokens sum a super-block's scaled
 * sub-block sums in two int32 accumulators (x512_body_q6k_g): one token's
 * chain of 36 dependent vpdpwssd per super-block (5 cycles each) bounded
 * it, not the ports. Measured (1024 x 2048 in L2, one thread): 1.1x at
 * 1 token, 1.03x at 2, none from 4 on (docs/perf-decisions.md). */
#ifndef X512_Q6K_SPLIT_NT
#define X512_Q6K_SPLIT_NT 2
#endif

/* Q6_K's prefetcht0 distance (the AVX2 tile's Q6KX8_PF_DIST is 4096);
 * with the far hint (x512_prefetch_far, kern_x512_q4x8.h) 2048 was as
 * good or better. */
#ifndef X512_Q6K_PF_NEAR
#define X512_Q6K_PF_NEAR 2048
#endif

/* Q4_K tiles of at most this many tokens take the high-nibble sub-blocks
 * as z & 0xf0 (16 x q, no shift) and divide each token's sub-block sum by
 * 16 instead (x512_body_q4k_pf says why that is exact): 4 vpsrlw fewer per
 * sub-block pair, one vpsrad more per token. Measured (1024 x 2048 in L2,
 * one thread): 1.05-1.07x at 1 token, even at 2 and 3, 0.98x at 8 tokens
 * if used there (docs/perf-decisions.md). */
#ifndef X512_Q4K_HX16_NT
#define X512_Q4K_HX16_NT 2
#endif

/* dword lanes 2r, 2r + 1 <- lane r of the low and of the high 256 bits */
#define X512_PAIR_IDX _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15)
/* the inverse order: even lanes to the low half, odd to the high */
#define X512_UNPAIR_IDX _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)

/* A vpshufb control dword: byte i to byte 0, zeros above. */
#define X512_B0(i) ((int)(0xffffff00u | (unsigned)(i)))

/* Row r's int32 in lane r: lanes 2r + 2r + 1 of v (exact). */
TGT_INL __m256i x512_rowsum(__m512i v) {
  __m512i u = _mm512_permutexvar_epi32(X512_UNPAIR_IDX, v);
  return _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
}

/* The 8 bytes at p in every 64-bit lane: one vpbroadcastq from memory (a
 * load-port operation; through a general register it would cost a port-5
 * shuffle per token and column pair). */
TGT_INL __m512i x512_bq(const void *p) {
  __m512i v;
  __asm__("vpbroadcastq %1, %0" : "=v"(v) : "m"(*(const uint64_t *)p));
  return v;
}

/* vpshufb controls picking the 6-bit scale of sub-block 4 V + k' (k' =
 * 0..3, the table's index) of row 4 L + r' (byte 4 k' + r' of each 128-bit
 * chunk) into dword lanes 2r, 2r + 1, zero-extended. A table in memory: the
 * control is then a load operand of the vpshufb, where computing it (the
 * sub-block loop is not unrolled) cost a broadcast and an add per
 * sub-block on the vector ports. */
#define X512_B0Q(k, r) X512_B0(4 * (k) + (r)), X512_B0(4 * (k) + (r))
#define X512_PICKQ(k) {X512_B0Q(k, 0), X512_B0Q(k, 1), X512_B0Q(k, 2), X512_B0Q(k, 3), \
                       X512_B0Q(k, 0), X512_B0Q(k, 1), X512_B0Q(k, 2), X512_B0Q(k, 3)}
static const int32_t x512_q4k_pick[4][16] __attribute__((aligned(64))) = {X512_PICKQ(0), X512_PICKQ(1), X512_PICKQ(2),
                                                                           X512_PICKQ(3)};

/* ---- Q4_K ----------------------------------------------------------------
 * Per super-block, sub-block pair p (sub-blocks 2p, 2p + 1 = the low and
 * high nibbles of vectors 8p..8p+7) and token: 8 vpdpbusd (4 column pairs x
 * 2 nibbles, each lane 16 products |.| <= 16 x 15 x 127 = 30480) and 2
 * vpdpwssd with the rows' 6-bit scales. Mins as in the AVX2 tile, with
 * vpdpwssd for vpmaddwd + vpaddd.
 * hx16 (few tokens): the odd sub-block's weights are z & 0xf0 = 16 q, so
 * its lane sums are 16 x the 16-product sum; vpsrad by 4 divides that
 * multiple of 16 exactly (|16 x 30480| is far inside int32), giving the
 * very int16-range lane the shifted nibbles give, before the vpdpwssd
 * (whose int16 operand could not take the x16 value). */
TGT_INL void x512_body_q4k_pf(const void *wg, int64_t n, const void *x, size_t xs, int nt, float *y,
                              size_t ys, int pf) {
  const int64_t nsb = n / QK_K;
  const int hx16 = nt <= X512_Q4K_HX16_NT;
  const __m512i m4 = _mm512_set1_epi8(0x0f), pidx = X512_PAIR_IDX;
  const __m256i m4y = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  __m256 acc[X512_Q4K_NT];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *o = (const uint8_t *)wg + 1152 * b;
    /* 6-bit scales: byte 32 V + 16 L + 4 k' + r' is row 4 L + r', sub-block
     * 4 V + k'; scv4V (V = 0, 1) has the rows 0..3 bytes of V in 128-bit
     * chunks 0, 1 and rows 4..7 in chunks 2, 3, where vpshufb reaches them
     * for lanes 2r, 2r + 1 (no vpermb: VBMI is not in the variant's
     * requirements) */
    const __m512i sc = _mm512_and_si512(_mm512_loadu_si512(o + 32), _mm512_set1_epi8(0x3f));
    const __m512i scv40 = _mm512_shuffle_i64x2(sc, sc, 0x50), scv41 = _mm512_shuffle_i64x2(sc, sc, 0xfa);
    __m512i isum[X512_Q4K_NT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
      if (pf) {
        q4kx8_prefetch(o + 256 * p, 4, Q4KX8_PF_DIST);
        if (p == 0) q4kx8_prefetch(o + 1024, 2, Q4KX8_PF_DIST);
        x512_prefetch_far(o + 256 * p, 4);
        if (p == 0) x512_prefetch_far(o + 1024, 2);
      }
      /* the scales of sub-blocks 2p (h = 0) and 2p + 1, zero-extended into
       * dword lanes 2r, 2r + 1 */
      __m512i scv[2];
#pragma GCC unroll 2
      for (int h = 0; h < 2; h++) {
        const int k = 2 * p + h;
        scv[h] = _mm512_shuffle_epi8(p < 2 ? scv40 : scv41, _mm512_loadu_si512(x512_q4k_pick[k % 4]));
      }
      const uint8_t *wv = o + 128 + 256 * p;
      __m512i z[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; j++) z[j] = _mm512_permutexvar_epi32(pidx, _mm512_loadu_si512(wv + 64 * j));
#pragma GCC unroll 2
      for (int h = 0; h < 2; h++) {
        __m512i a[X512_Q4K_NT];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
          const __m512i w = !h ? _mm512_and_si512(z[j], m4)
                            : hx16 ? _mm512_andnot_si512(m4, z[j])
                                   : _mm512_and_si512(_mm512_srli_epi16(z[j], 4), m4);
#pragma GCC unroll 8
          for (int t = 0; t < nt; t++) {
            const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + b;
            const __m512i xv = x512_bq(xb->qs + 64 * p + 32 * h + 8 * j);
            a[t] = _mm512_dpbusd_epi32(j ? a[t] : _mm512_setzero_si512(), w, xv);
          }
        }
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
          isum[t] = _mm512_dpwssd_epi32(isum[t], h && hx16 ? _mm512_srai_epi32(a[t], 4) : a[t], scv[h]);
      }
    }
    /* mins (kern_x86_q4kx8.h): int16 lanes of row r = (min 2q, min 2q + 1) */
    const __m256i va = loadu256(o + 32), vb = loadu256(o + 64), vn = loadu256(o + 96);
    const __m256i mna = _mm256_or_si256(_mm256_and_si256(vn, m4y), _mm256_and_si256(_mm256_srli_epi16(va, 2), m30));
    const __m256i mnb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(vn, 4), m4y),
                                        _mm256_and_si256(_mm256_srli_epi16(vb, 2), m30));
    const __m256i pk0 = _mm256_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1, 0, -1, 4, -1, 1,
                                         -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1);
    const __m256i pk1 = _mm256_setr_epi8(8, -1, 12, -1, 9, -1, 13, -1, 10, -1, 14, -1, 11, -1, 15, -1, 8, -1, 12,
                                         -1, 9, -1, 13, -1, 10, -1, 14, -1, 11, -1, 15, -1);
    const __m256i mp[4] = {_mm256_shuffle_epi8(mna, pk0), _mm256_shuffle_epi8(mna, pk1),
                           _mm256_shuffle_epi8(mnb, pk0), _mm256_shuffle_epi8(mnb, pk1)};
    const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)o));
    const __m256 dm8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + 16)));
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + b;
      const float *bs = (const float *)xb->bsums; /* (bsums[2q], bsums[2q + 1]) as dword q */
      __m256i ms = _mm256_dpwssd_epi32(_mm256_setzero_si256(), mp[0], _mm256_castps_si256(_mm256_broadcast_ss(bs)));
#pragma GCC unroll 3
      for (int q = 1; q < 4; q++) ms = _mm256_dpwssd_epi32(ms, mp[q], _mm256_castps_si256(_mm256_broadcast_ss(bs + q)));
      const __m256 dx = _mm256_set1_ps(xb->d);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(x512_rowsum(isum[t])), _mm256_mul_ps(d8, dx), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_mul_ps(dm8, dx), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ys, acc[t]);
}

TGT_INL void x512_body_q4k(const void *wg, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  x512_body_q4k_pf(wg, n, x, xs, nt, y, ys, 1);
}
TGT_INL void x512_body_q4k_warm(const void *wg, int64_t n, const void *x, size_t xs, int nt, float *y,
                                size_t ys) {
  x512_body_q4k_pf(wg, n, x, xs, nt, y, ys, 0);
}

X8_PTILE(x512_ptile_q4k, x512_body_q4k, X512_Q4K_NT)
X8_PTILE(x512_ptile_q4k_warm, x512_body_q4k_warm, X512_Q4K_NT)

/* ---- Q6_K ----------------------------------------------------------------
 * Per super-block, sub-block k (16 columns: N0, N1, H of packed_k.c) and
 * token: quads 0, 1 of the 8 rows in one zmm (N0, N1 low nibbles, dwords
 * paired by vpermd, their high bits from H by per-lane shifts), quads 2, 3
 * in another; 2 vpdpbusd (4 products per lane, |.| <= 4 x 63 x 127 =
 * 32004) and 2 vpdpwssd with the rows' int8 scales. The -32 offset: per
 * 4 sub-blocks one vpdpwssd of the rows' (-32 sc) pairs against the
 * token's per-16 sums. Float accumulators in y, as in the AVX2 tile. */

/* The scales of sub-blocks 4 kq .. + 3 are first sign-extended to int16
 * (vpmovsxbw of their 32 bytes: int16 4 r + k' is row r, sub-block
 * 4 kq + k'), which puts rows 2c, 2c + 1 in 128-bit chunk c, the chunk
 * holding their dword lanes 2r, 2r + 1; then one vpshufb per sub-block
 * moves row r's int16 into the low half of both its lanes (zeros above),
 * where picking bytes and shifting them down cost two operations per
 * sub-block. vpshufb control dwords (byte 0 first), r' = r % 2: the int16
 * of row r', sub-block k'; and for the offsets the pair of sub-blocks 2e,
 * 2e + 1 as two int16. */
#define X512_SC6(r, k) ((int)(0x80800000u | (unsigned)(8 * (r) + 2 * (k) + 1) << 8 | (unsigned)(8 * (r) + 2 * (k))))
#define X512_MP6(r, e) ((int)((unsigned)(8 * (r) + 4 * (e)) | (unsigned)(8 * (r) + 4 * (e) + 1) << 8 | \
                              (unsigned)(8 * (r) + 4 * (e) + 2) << 16 | (unsigned)(8 * (r) + 4 * (e) + 3) << 24))
#define X512_SC6V(k) _mm512_setr_epi32(X512_SC6(0, k), X512_SC6(0, k), X512_SC6(1, k), X512_SC6(1, k), X512_SC6(0, k), \
                                       X512_SC6(0, k), X512_SC6(1, k), X512_SC6(1, k), X512_SC6(0, k), X512_SC6(0, k), \
                                       X512_SC6(1, k), X512_SC6(1, k), X512_SC6(0, k), X512_SC6(0, k), X512_SC6(1, k), \
                                       X512_SC6(1, k))

/* With GFNI (x512_body_q6k_gf) the high bits take 5 operations per
 * sub-block instead of 7, in the way of X512_GF_HB (Q5_0): after the
 * per-lane vpsrlvd each byte of hz has the bits for N0/N1 (w01) at 0, 1
 * and those for the high nibbles (w23) at 4, 5; one vgf2p8affineqb
 * (X512_GF_Q6G) swaps them into g, clearing bits 2, 3, 6, 7; then
 *   w01 = (z & 0x0f) | (g & 0xf0), y = (z & 0xf0) | (g & 0x0f) (vpternlogd
 *   bit selects) and w23 = y's bits 4..7 to 0..3, 0, 1 to 4, 5
 *   (vgf2p8affineqb, X512_GF_Q6W): the same bytes as the shifts and masks. */
#define X512_GF_Q6G (X512_GF_ROW(4, 0x01) | X512_GF_ROW(5, 0x02) | X512_GF_ROW(0, 0x10) | X512_GF_ROW(1, 0x20))
#define X512_GF_Q6W (X512_GF_ROW(0, 0x10) | X512_GF_ROW(1, 0x20) | X512_GF_ROW(2, 0x40) | X512_GF_ROW(3, 0x80) | \
                     X512_GF_ROW(4, 0x01) | X512_GF_ROW(5, 0x02))

TGT_INL void x512_body_q6k_g(const void *wg, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys,
                             int gf) {
  const int64_t nsb = n / QK_K;
  const int split = nt <= X512_Q6K_SPLIT_NT;
  const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30), pidx = X512_PAIR_IDX;
  const __m512i hidx = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i shl = _mm512_setr_epi32(4, 2, 4, 2, 4, 2, 4, 2, 4, 2, 4, 2, 4, 2, 4, 2);
  const __m512i shr = _mm512_setr_epi32(0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2);
  const __m512i mppick = _mm512_setr_epi32(X512_MP6(0, 0), X512_MP6(0, 1), X512_MP6(1, 0), X512_MP6(1, 1),
                                           X512_MP6(0, 0), X512_MP6(0, 1), X512_MP6(1, 0), X512_MP6(1, 1),
                                           X512_MP6(0, 0), X512_MP6(0, 1), X512_MP6(1, 0), X512_MP6(1, 1),
                                           X512_MP6(0, 0), X512_MP6(0, 1), X512_MP6(1, 0), X512_MP6(1, 1));
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ys, _mm256_setzero_ps());
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *o = (const uint8_t *)wg + 1680 * b;
    __m512i isum[X512_Q6K_NT], isum2[X512_Q6K_NT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) isum[t] = isum2[t] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int kq = 0; kq < 4; kq++) {
      /* scale bytes of sub-blocks 4 kq .. + 3: byte 4 r + k' of o + 16 +
       * 32 kq, as int16 (rows 2c, 2c + 1 in chunk c) */
      const __m512i sx = _mm512_cvtepi8_epi16(loadu256(o + 16 + 32 * kq));
      /* -32 x the rows' scales of sub-blocks 4 kq + 2e, + 1 in lane 2r + e */
      const __m512i mp = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(_mm512_shuffle_epi8(sx, mppick), 5));
#pragma GCC unroll 8
      for (int t = 0; t < nt; t++) {
        const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + b;
        isum[t] = _mm512_dpwssd_epi32(isum[t], mp, x512_bq(xb->bsums + 4 * kq));
      }
#pragma GCC unroll 4
      for (int c4 = 0; c4 < 4; c4++) {
        const int k = 4 * kq + c4;
        const __m512i scv = _mm512_shuffle_epi8(sx, c4 == 0 ? X512_SC6V(0) : c4 == 1 ? X512_SC6V(1) : c4 == 2 ? X512_SC6V(2) : X512_SC6V(3));
        const uint8_t *wv = o + 144 + 96 * k;
#pragma GCC unroll 2
        for (int i = 0; i < 2; i++) _mm_prefetch((const char *)wv + X512_Q6K_PF_NEAR + 64 * i, _MM_HINT_T0);
        x512_prefetch_far(wv, 2);
        const __m512i z = _mm512_permutexvar_epi32(pidx, _mm512_loadu_si512(wv));
        const __m512i hz = _mm512_permutexvar_epi32(hidx, _mm512_broadcast_i64x4(loadu256(wv + 64)));
        __m512i w01, w23;
        if (gf) {
          const __m512i g = x512_gf_z(_mm512_srlv_epi32(hz, shr), _mm512_set1_epi64(X512_GF_Q6G));
          w01 = _mm512_ternarylogic_epi32(z, g, m4, 0xe4);
          w23 = x512_gf_z(_mm512_ternarylogic_epi32(z, g, m4, 0xd8), _mm512_set1_epi64(X512_GF_Q6W));
        } else {
          w01 = _mm512_or_si512(_mm512_and_si512(z, m4), _mm512_and_si512(_mm512_sllv_epi32(hz, shl), m30));
          w23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(z, 4), m4),
                                _mm512_and_si512(_mm512_srlv_epi32(hz, shr), m30));
        }
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
          const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + b;
          const __m512i a01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w01, x512_bq(xb->qs + 16 * k));
          const __m512i a23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w23, x512_bq(xb->qs + 16 * k + 8));
          if (split) {
            isum[t] = _mm512_dpwssd_epi32(isum[t], a01, scv);
            isum2[t] = _mm512_dpwssd_epi32(isum2[t], a23, scv);
          } else {
            isum[t] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(isum[t], a01, scv), a23, scv);
          }
        }
      }
    }
    if (split) {
#pragma GCC unroll 8
      for (int t = 0; t < nt; t++) isum[t] = _mm512_add_epi32(isum[t], isum2[t]);
    }
    const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)o));
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + b;
      __m256 acc = _mm256_loadu_ps(y + t * ys);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(x512_rowsum(isum[t])), _mm256_mul_ps(d8, _mm256_set1_ps(xb->d)), acc);
      _mm256_storeu_ps(y + t * ys, acc);
    }
  }
}

TGT_INL void x512_body_q6k(const void *wg, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  x512_body_q6k_g(wg, n, x, xs, nt, y, ys, 0);
}
TGT_INL void x512_body_q6k_gf(const void *wg, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  x512_body_q6k_g(wg, n, x, xs, nt, y, ys, 1);
}

X8_PTILE(x512_ptile_q6k, x512_body_q6k, X512_Q6K_NT)
X8_PTILE(x512_ptile_q6k_gf, x512_body_q6k_gf, X512_Q6K_NT)

/* Replaces the AVX2 packed K-quant tiles (same layouts, same activations,
 * same results) with the tiles above (Q6_K's GFNI one where the CPU has
 * GFNI, unless PARLEY_NO_GFNI is set). */
static void x512_fill_packed_qk_ops(struct kern_ops *ops) {
  ops->ptile[TENSOR_TYPE_Q4_K] = x512_ptile_q4k;
  ops->ptile_warm[TENSOR_TYPE_Q4_K] = x512_ptile_q4k_warm;
  ops->ptile_nt[TENSOR_TYPE_Q4_K] = X512_Q4K_NT;
  ops->pquant[TENSOR_TYPE_Q4_K] = quant_q8_K32_x86;
  ops->ptile[TENSOR_TYPE_Q6_K] = x512_ptile_q6k;
  if (x512_has_gfni() && !getenv("PARLEY_NO_GFNI")) ops->ptile[TENSOR_TYPE_Q6_K] = x512_ptile_q6k_gf; /* env: A/B */
  ops->ptile_nt[TENSOR_TYPE_Q6_K] = X512_Q6K_NT;
  ops->pquant[TENSOR_TYPE_Q6_K] = quant_q8_K_x86;
}

#endif
