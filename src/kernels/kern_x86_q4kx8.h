/*
 * kern_x86_q4kx8.h - the x86 tile for Q4_K weights repacked into groups of
 * 8 interleaved rows (layout in kernels/packed_k.c, driver in packed.c),
 * compiled by kern_avx2.c and kern_avx512.c after kern_x86_body.h with the
 * same TGT / TGT_INL macros.
 *
 * Per super-block of 8 rows x 256 columns and token: 64 vpmaddubsw (32
 * multiply-adds each, the minimum for 2048 products), each multiplying the
 * 4 nibbles of 8 rows in one 32-byte register by a broadcast of 4
 * activation bytes; a sub-block's 8 products summed in 16 bits (|sum| <=
 * 8 x 2 x 15 x 127 = 30480, exact), one vpmaddwd with the rows' 6-bit
 * scales per sub-block into int32 lane r = row r, and the mins as 4
 * vpmaddwd of the rows' (min 2p, min 2p + 1) pairs against the token's
 * per-32 sums. Then per token and super-block two conversions and two
 * FMAs: acc = fma(float(isum), d_r d_x, acc), acc = fnma(float(msum),
 * dmin_r d_x, acc). The weights' nibbles and the scales are unpacked once
 * per super-block and tile of tokens; no horizontal sums.
 *
 * Per (row, token) the arithmetic is fixed (exact int32 sums, then the two
 * FMAs super-block after super-block), so a result does not depend on nt,
 * on the other rows of the group, or on the variant.
 */
#ifndef PARLEY_KERNELS_KERN_X86_Q4KX8_H
#define PARLEY_KERNELS_KERN_X86_Q4KX8_H

#ifndef Q4KX8_NT
#define Q4KX8_NT 4 /* tokens per tile call: 8 keeps 24 accumulators live and spills (2-4% slower at 64 tokens) */
#endif

/* Software prefetch, Q4KX8_PF_DIST bytes ahead (Q4KX8_PF_DIST1 below for
 * one token; the groups of a matrix are one forward stream, and
 * prefetches past its end do not fault). On the 2-core Zen 3 KVM guest, one-token calls over 300 MB of
 * packed Q4_K (bench/kernels_cpu.sh, ROTATE_MB=300 HUGE=1, one thread, CPU
 * time) read 0.69-0.81 of the one-thread read probe without prefetch and
 * 0.83-0.95 with 2048-8192 in the quieter windows, no better in others
 * (a loaded machine; docs/perf-decisions.md, "Software prefetch").
 * Written as volatile asm, unlike x8_prefetch (kern_x86_q4x8.h), which the
 * x8 and Q6_K tiles call: here gcc hoists _mm_prefetch intrinsics into one
 * burst of 18 at the super-block's start, which measured no gain; the asm
 * stays spread, 2 lines per sub-block. At every nt: from DRAM (same
 * method, 5632 x 2048, 2048 x 5632 and 2048 x 2048, medians of 6
 * alternating rounds) the 2..4-token bodies cost 1.48-1.63x one token
 * without it against 0.98-1.37x with it; 4096,
 * 8192 and 16384 bytes measured alike (docs/perf-decisions.md,
 * "Distances"). */
#ifndef Q4KX8_PF_DIST
#define Q4KX8_PF_DIST 4096
#endif
/* The distance for one token (decode): on the Zen 3
 * guest, TinyLlama Q4_K_M's Q4_K gateup read 0.84-0.88 of a plain read of
 * its bytes at 4096 and 0.90-0.93 at 2048 (bench/decode_wall, 4
 * alternated rounds; decode 39.9 -> 42.7 t/s median; docs/perf-decisions.md). The
 * AVX-512 tiles keep Q4KX8_PF_DIST. */
#ifndef Q4KX8_PF_DIST1
#define Q4KX8_PF_DIST1 2048
#endif


/* Prefetches the n lines starting dist (a constant; 0: none) bytes after p. */
TGT_INL void q4kx8_prefetch(const uint8_t *p, int n, int dist) {
  if (dist <= 0) return;
#pragma GCC unroll 2
  for (int i = 0; i < n; i++) __asm__ volatile("prefetcht0 %0" : : "m"(p[dist + 64 * i]));
}

/* One group of 8 interleaved Q4_K rows (n columns) x nt <= Q4KX8_NT tokens
 * of packed-Q4_K activations (block_q8_K with per-32 sums in bsums[0..7]):
 * y[t * ys + r] for r < 8. */
TGT_INL void body_q4kx8(const void *wg, int64_t n, const void *x, size_t xs, int nt, float *y, size_t ys) {
  const int64_t nsb = n / QK_K;
  const int dist = nt == 1 ? Q4KX8_PF_DIST1 : Q4KX8_PF_DIST;
  const __m256i m4 = _mm256_set1_epi8(0x0f), m6 = _mm256_set1_epi8(0x3f), m30 = _mm256_set1_epi8(0x30);
  __m256 acc[Q4KX8_NT];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *o = (const uint8_t *)wg + 1152 * b;
    __m256i va = loadu256(o + 32), vb = loadu256(o + 64), vn = loadu256(o + 96);
    __m256i sca = _mm256_and_si256(va, m6), scb = _mm256_and_si256(vb, m6);
    __m256i mna = _mm256_or_si256(_mm256_and_si256(vn, m4), _mm256_and_si256(_mm256_srli_epi16(va, 2), m30));
    __m256i mnb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(vn, 4), m4),
                                  _mm256_and_si256(_mm256_srli_epi16(vb, 2), m30));
    __m256i isum[Q4KX8_NT];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
      /* rows' scale of sub-block k in both 16-bit lanes of each row */
      const char c = (char)(4 * (k % 4));
      const __m256i pick = _mm256_setr_epi8(c, -1, c, -1, c + 1, -1, c + 1, -1, c + 2, -1, c + 2, -1, c + 3, -1,
                                            c + 3, -1, c, -1, c, -1, c + 1, -1, c + 1, -1, c + 2, -1, c + 2, -1,
                                            c + 3, -1, c + 3, -1);
      __m256i sck = _mm256_shuffle_epi8(k < 4 ? sca : scb, pick);
      const uint8_t *wv = o + 128 + 256 * (k / 2); /* vectors 8 (k / 2) .. + 7 */
      /* the super-block's 18 lines dist ahead, 2 per sub-block and
       * lines 16, 17 with sub-blocks 0, 1 */
      q4kx8_prefetch(o + 128 * k, 2, dist);
      if (k < 2) q4kx8_prefetch(o + 64 * (16 + k), 1, dist);
      __m256i s[Q4KX8_NT];
#pragma GCC unroll 4
      for (int i = 0; i < 8; i += 2) {
        __m256i w0 = loadu256(wv + 32 * i), w1 = loadu256(wv + 32 * i + 32);
        if (k % 2) {
          w0 = _mm256_srli_epi16(w0, 4);
          w1 = _mm256_srli_epi16(w1, 4);
        }
        w0 = _mm256_and_si256(w0, m4);
        w1 = _mm256_and_si256(w1, m4);
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
          const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + b;
          const float *xq = (const float *)(xb->qs + 32 * k + 4 * i);
          __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(w0, _mm256_castps_si256(_mm256_broadcast_ss(xq))),
                                       _mm256_maddubs_epi16(w1, _mm256_castps_si256(_mm256_broadcast_ss(xq + 1))));
          s[t] = i == 0 ? p : _mm256_add_epi16(s[t], p);
          /* no reassociation into a spilled tree (see body_q4x8) */
          __asm__("" : "+x"(s[t]));
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < nt; t++) {
        __m256i v = _mm256_madd_epi16(s[t], sck);
        isum[t] = k == 0 ? v : _mm256_add_epi32(isum[t], v);
      }
    }
    /* mins: int16 lanes of row r = (min 2p, min 2p + 1), against the
     * token's per-32 sums (bsums[2p], bsums[2p + 1]) */
    const __m256i pk0 = _mm256_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1, 0, -1, 4, -1, 1,
                                         -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1);
    const __m256i pk1 = _mm256_add_epi8(pk0, _mm256_setr_epi8(8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8,
                                                              0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0));
    __m256i mp[4] = {_mm256_shuffle_epi8(mna, pk0), _mm256_shuffle_epi8(mna, pk1), _mm256_shuffle_epi8(mnb, pk0),
                     _mm256_shuffle_epi8(mnb, pk1)};
    __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)o));
    __m256 dm8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + 16)));
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const block_q8_K *xb = (const block_q8_K *)((const char *)x + t * xs) + b;
      const float *bs = (const float *)xb->bsums;
      __m256i ms = _mm256_madd_epi16(mp[0], _mm256_castps_si256(_mm256_broadcast_ss(bs)));
#pragma GCC unroll 3
      for (int q = 1; q < 4; q++)
        ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mp[q], _mm256_castps_si256(_mm256_broadcast_ss(bs + q))));
      __m256 dx = _mm256_set1_ps(xb->d);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d8, dx), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_mul_ps(dm8, dx), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ys, acc[t]);
}

/* One tile for every call: a copy without the prefetches for a prompt's
 * later token tiles of a group (kern_ops.ptile_warm, ~2% faster at 64
 * tokens in cache in isolation) ran 110-165 GFLOP/s on the Zen 3 guest
 * where this tile runs 175-191 on
 * the same calls (PACK=1 bench/kernels_cpu.sh Q4_K 2048 2048 64, one
 * thread, 3 alternated rounds; at 4 tokens, one call per group, both
 * ~175; docs/perf-decisions.md): the prompt's later tiles take this one
 * (packed.c falls back to ptile when ptile_warm is NULL). */
X8_PTILE(ptile_q4kx8, body_q4kx8, Q4KX8_NT)

/* Packed-Q4_K activations: quant_q8_K_x86's blocks (bit-identical to
 * kern_quant_q8_K_c) with bsums[k] = the sum of 32-element sub-block k. */
TGT static void quant_q8_K32_x86(const float *x, void *dst, int64_t n) {
  quant_q8_K_x86(x, dst, n);
  block_q8_K *b = dst;
  for (int64_t i = 0; i < n / QK_K; i++)
    for (int k = 0; k < 8; k++) b[i].bsums[k] = (int16_t)(b[i].bsums[2 * k] + b[i].bsums[2 * k + 1]);
}

static void x86_fill_packed_k_ops(struct kern_ops *ops) {
  ops->ptile[TENSOR_TYPE_Q4_K] = ptile_q4kx8;
  ops->ptile_nt[TENSOR_TYPE_Q4_K] = Q4KX8_NT;
  ops->pquant[TENSOR_TYPE_Q4_K] = quant_q8_K32_x86;
}

#endif
