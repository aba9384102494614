/*
 * kern_x86_q6kx8.h - the x86 tile for Q6_K weights repacked into groups of
 * 8 interleaved rows (layout in kernels/packed_k.c, driver in packed.c),
 * compiled by kern_avx2.c and kern_avx512.c after kern_x86_body.h with the
 * same TGT / TGT_INL macros.
 *
 * Why: the row tile (kern_x86_body.h body_q6_Kx) rebuilds each row's 6-bit
 * q and interleaves it per row and super-block, reloads every activation
 * vector for every row and ends each (row, token) with a horizontal sum.
 * Here one register holds 4 columns of 8 rows: per sub-block of 16 columns
 * the 6-bit q of the 8 rows is rebuilt once (3 loads, 4 x (shift, and,
 * shifted high bits, or)) and shared by the tokens of the tile.
 *
 * Per token and sub-block: 4 vpmaddubsw against broadcasts of 4 activation
 * bytes, added in pairs in 16 bits (|sum| <= 2 x 2 x 63 x 127 = 32004,
 * exact), 2 vpmaddwd with the rows' scales (sign-extended into both 16-bit
 * halves of lane r) into int32 lane r = row r. The -32 offset of q goes
 * through the token's per-16 sums: per pair of sub-blocks one vpmaddwd of
 * the rows' (32 sc_2q, 32 sc_2q+1) against (bsums[2q], bsums[2q + 1]),
 * subtracted as integers. Per super-block and token one conversion and one
 * FMA: acc = fma(float(isum), d_r d_x, acc).
 *
 * Per (row, token) the arithmetic is fixed (an exact int32 sum per
 * super-block, then one FMA super-block after super-block), so a result
 * does not depend on nt, on the other rows of the group, or on the variant.
 */
#ifndef PARLEY_KERNELS_KERN_X86_Q6KX8_H
#define PARLEY_KERNELS_KERN_X86_Q6KX8_H

#ifndef Q6KX8_NT
#define Q6KX8_NT 4 /* tokens per tile call (as Q4KX8_NT) */
#endif
/* Software prefetch distance in bytes, twice X8_PF_DIST of
 * kern_x86_q4x8.h. From DRAM at 4 tokens, 6 alternating rounds, one
 * thread, 2048 -> 4096: 2048 x 5632 0.94 -> 0.87 ms, 256 x 2048 0.048 ->
 * 0.043, the 32000 x 2048 output 5.78 -> 5.31; one token unchanged within
 * the noise (docs/perf-decisions.md, "Distances"). */
#ifndef Q6KX8_PF_DIST
#define Q6KX8_PF_DIST 4096
#endif
/* One token (decode), as Q4KX8_PF_DIST1: TinyLlama
 * Q4_K_M's Q6_K output product read 0.84-0.93 of a plain read at 4096,
 * 0.96-0.99 at 2048 (bench/decode_wall, 3 alternated rounds). */
#ifndef Q6KX8_PF_DIST1
#define Q6KX8_PF_DIST1 2048
#endif

/* One group of 8 interleaved Q6_K rows (n columns) x nt <= Q6KX8_NT tokens
 * of plain block_q8_K activations: y[t * ys + r] for r < 8.
 *
 * Scheduling: the sub-blocks run as a loop of 4 x 4 (one scale
 * vector each), not unrolled 16 times, the -32 offsets go after the
 * sub-blocks (when the 6-bit q registers are dead) and the float
 * accumulators live in y (read and written once per super-block). Fully
 * unrolled with the offsets inline, gcc kept ~20 vectors live and spilled
 * partial sums inside the sub-block loop (128 cycles per super-block and
 * token at 4 tokens against ~75 this way, docs/perf-decisions.md). The
 * integer sums are exact, so either order gives the same bits. */
TGT_INL void body_q6kx8(const void *wg, int64_t n, const void *x, size_t xs, int nt, float *y,
                        size_t ys) {
  const int64_t nsb = n / QK_K;
  const int dist = nt == 1 ? Q6KX8_PF_DIST1 : Q6KX8_PF_DIST; /* bytes ahead */
  const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ys, _mm256_setzero_ps());
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *o = (const uint8_t *)wg + 1680 * b;
    __m256i isum[Q6KX8_NT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int kq = 0; kq < 4; kq++) {
      const __m256i scv = loadu256(o + 16 + 32 * kq);
#pragma GCC unroll 4
      for (int c4 = 0; c4 < 4; c4++) {
        const int k = 4 * kq + c4;
        /* row r's scale of sub-block k in the high byte of both 16-bit
         * halves of lane r, then sign-extended */
        const char c = (char)c4;
        const __m256i pick = _mm256_setr_epi8(-1, c, -1, c, -1, 4 + c, -1, 4 + c, -1, 8 + c, -1, 8 + c, -1, 12 + c,
                                              -1, 12 + c, -1, c, -1, c, -1, 4 + c, -1, 4 + c, -1, 8 + c, -1, 8 + c,
                                              -1, 12 + c, -1, 12 + c);
        const __m256i sck = _mm256_srai_epi16(_mm256_shuffle_epi8(scv, pick), 8);
        const uint8_t *wv = o + 144 + 96 * k;
        x8_prefetch(wv, 2, dist); /* the stream dist bytes ahead (kern_x86_q4x8.h) */
        __m256i n0 = loadu256(wv), n1 = loadu256(wv + 32), hv = loadu256(wv + 64);
        __m256i q0 = _mm256_or_si256(_mm256_and_si256(n0, m4), _mm256_and_si256(_mm256_slli_epi16(hv, 4), m30));
        __m256i q1 = _mm256_or_si256(_mm256_and_si256(n1, m4), _mm256_and_si256(_mm256_slli_epi16(hv, 2), m30));
        __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n0, 4), m4), _mm256_and_si256(hv, m30));
        __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n1, 4), m4),
                                     _mm256_and_si256(_mm256_srli_epi16(hv, 2), m30));
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
          const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + b;
          const float *xq = (const float *)(xb->qs + 16 * k);
          __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(q0, _mm256_castps_si256(_mm256_broadcast_ss(xq))),
                                        _mm256_maddubs_epi16(q1, _mm256_castps_si256(_mm256_broadcast_ss(xq + 1))));
          __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(q2, _mm256_castps_si256(_mm256_broadcast_ss(xq + 2))),
                                        _mm256_maddubs_epi16(q3, _mm256_castps_si256(_mm256_broadcast_ss(xq + 3))));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p0, sck));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p1, sck));
          /* keep the sum in a register: without this gcc reassociates the
           * adds into a tree and parks 32 partial sums on the stack */
          __asm__("" : "+x"(isum[t]));
        }
      }
    }
    /* the -32 offsets: per pair of sub-blocks (2q, 2q + 1) the rows'
     * (32 sc_2q, 32 sc_2q+1) against the token's (bsums[2q], bsums[2q + 1]) */
#pragma GCC unroll 4
    for (int kq = 0; kq < 4; kq++) {
      const __m256i scv = loadu256(o + 16 + 32 * kq);
#pragma GCC unroll 2
      for (int e2 = 0; e2 < 2; e2++) {
        const char e = (char)(2 * e2);
        const __m256i pk2 = _mm256_setr_epi8(-1, e, -1, e + 1, -1, 4 + e, -1, 5 + e, -1, 8 + e, -1, 9 + e, -1,
                                             12 + e, -1, 13 + e, -1, e, -1, e + 1, -1, 4 + e, -1, 5 + e, -1, 8 + e,
                                             -1, 9 + e, -1, 12 + e, -1, 13 + e);
        const __m256i mp = _mm256_srai_epi16(_mm256_shuffle_epi8(scv, pk2), 3);
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
          const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + b;
          const float *bs = (const float *)(xb->bsums + 4 * kq + e);
          isum[t] = _mm256_sub_epi32(isum[t], _mm256_madd_epi16(mp, _mm256_castps_si256(_mm256_broadcast_ss(bs))));
        }
      }
    }
    __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)o));
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + b;
      __m256 acc = _mm256_loadu_ps(y + t * ys);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d8, _mm256_set1_ps(xb->d)), acc);
      _mm256_storeu_ps(y + t * ys, acc);
    }
  }
}

X8_PTILE(ptile_q6kx8, body_q6kx8, Q6KX8_NT)

/* Packed Q6_K reads plain block_q8_K activations (quant_q8_K_x86,
 * bit-identical to kern_quant_q8_K_c): bsums per 16 are its sub-blocks. */
static void x86_fill_packed_q6k_ops(struct kern_ops *ops) {
  ops->ptile[TENSOR_TYPE_Q6_K] = ptile_q6kx8;
  ops->ptile_nt[TENSOR_TYPE_Q6_K] = Q6KX8_NT;
  ops->pquant[TENSOR_TYPE_Q6_K] = quant_q8_K_x86;
}

#endif
