/*
 * kern_x512_q4x8.h - AVX-512 VNNI tiles for the packed Q4_0, Q8_0 and
 * Q5_0 weights (packed.c's x 8 layout, unchanged), included only by
 * kern_avx512.c after kern_x86_q4x8.h (whose x8_prefetch, X8_PF_DIST and
 * quant_q8_x86 it uses).
 *
 * Why: kern_x86_q4x8.h multiplies with vpmaddubsw, sums the products in
 * 16 bits and widens them with vpmaddwd: about 20 vector operations per
 * block of 32 columns x 8 rows x token. vpdpbusd multiplies u8 x s8 and
 * adds the 4 products of a dword lane to an int32 accumulator in one
 * operation, so a block's exact int32 sums take 8 of them and nothing
 * else. Measured on an Emerald Rapids guest (inline-asm loops,
 * docs/perf-decisions.md): vpdpbusd issues twice per cycle in ymm AND in zmm, as do
 * the f32 FMA / multiply / convert, so a zmm operation does twice the work
 * of a ymm one at the same cost. A zmm register here holds the same 4-byte
 * word of TWO consecutive row groups (group g in the low 256 bits, g + 1
 * in the high), so the activation word is one embedded {1to16} broadcast
 * from memory and the f32 tail (convert, scale, FMA) covers 16 rows. That
 * needs the driver to hand two groups to one call: kern_ops.ptile2
 * (packed.c). A lone group (a matrix's odd last one, a padded group) goes
 * through the same body paired with itself, its 8 rows stored: twice the
 * arithmetic for one group per matrix, one body to keep.
 *
 * Per (row, token) the arithmetic is the AVX2 tiles' exactly: the exact
 * int32 block sum (dpbusd adds in a different order; integers, so the
 * same value), then acc = fma(float(sum), d_w * d_x, acc) block after
 * block (x8_tail's two roundings: the product d_w * d_x, then the fused
 * multiply-add). So results are bit-identical to the AVX2 variant and do
 * not depend on nt, on which groups are paired, or on the thread count.
 *
 * Offsets: Q4_0 nibbles q (0..15) are unsigned already (sum (q - 8) x =
 * sum q x - 8 sum x), as are Q5_0's 5-bit q (offset 16). Q8_0 weights w are signed and vpdpbusd wants one
 * unsigned operand, so u = w xor 0x80 = w + 128 (0..255, once per block
 * and call): sum w x = sum u x - 128 sum x. Each token's accumulator
 * starts at the offset term, which the activation quantizer stores
 * (x512_block_q8.c0): no correction operation in the loop. Every lane is
 * within int32 (|sum u x| <= 32 x 255 x 128).
 */
#ifndef PARLEY_KERNELS_KERN_X512_Q4X8_H
#define PARLEY_KERNELS_KERN_X512_Q4X8_H

/* Activation block of 32 for the AVX-512 packed tiles: kern_block_q8's d
 * and qs (quant_q8_x86, bit-identical to kern_quant_q8_c), and instead of
 * the sum the int32 the block's accumulators start at: -8 * sum(qs) for
 * Q4_0, -16 * sum(qs) for Q5_0, -128 * sum(qs) for Q8_0.
 * Same 40 bytes as kern_block_q8s (packed.c's activation stride). */
typedef struct {
  float d;
  int32_t c0;
  int8_t qs[32];
} x512_block_q8;
_Static_assert(sizeof(x512_block_q8) == sizeof(kern_block_q8s), "40-byte activation blocks");

/* The 4-byte activation word k (0..7) of block b of token t, as an int32
 * (for an embedded broadcast). */
#define X512_XW(xb, k) (*(const int32_t *)(const void *)((xb)->qs + 4 * (k)))

/* Defines NAME, a two-group tile entry point (kern_ops.ptile2) calling the
 * always-inlined BODY for weight kind KIND with nt as a compile-time
 * constant (as X8_PTILE). */
#define X512_PTILE2(NAME, BODY, KIND, PF)                                                         \
  TGT static void NAME(const void *w, size_t gb, int64_t n, const void *x, size_t xs, int nt,     \
                       float *y, size_t ys) {                                                     \
    switch (nt) {                                                                                 \
    case 1: BODY(KIND, w, gb, n, x, xs, 1, y, ys, PF, 0); break;                                   \
    case 2: BODY(KIND, w, gb, n, x, xs, 2, y, ys, PF, 0); break;                                   \
    case 3: BODY(KIND, w, gb, n, x, xs, 3, y, ys, PF, 0); break;                                   \
    case 4: BODY(KIND, w, gb, n, x, xs, 4, y, ys, PF, 0); break;                                   \
    case 5: BODY(KIND, w, gb, n, x, xs, 5, y, ys, PF, 0); break;                                   \
    case 6: BODY(KIND, w, gb, n, x, xs, 6, y, ys, PF, 0); break;                                   \
    case 7: BODY(KIND, w, gb, n, x, xs, 7, y, ys, PF, 0); break;                                   \
    default: BODY(KIND, w, gb, n, x, xs, 8, y, ys, PF, 0); break;                                  \
    }                                                                                             \
  }

/* Same for a one-group tile (kern_ops.ptile): the two-group body on the
 * group paired with itself (gb 0), only its 8 rows stored. */
#define X512_PTILE1(NAME, BODY, KIND, PF)                                                         \
  TGT static void NAME(const void *w, int64_t n, const void *x, size_t xs, int nt, float *y,      \
                       size_t ys) {                                                               \
    switch (nt) {                                                                                 \
    case 1: BODY(KIND, w, 0, n, x, xs, 1, y, ys, PF, 1); break;                                   \
    case 2: BODY(KIND, w, 0, n, x, xs, 2, y, ys, PF, 1); break;                                   \
    case 3: BODY(KIND, w, 0, n, x, xs, 3, y, ys, PF, 1); break;                                   \
    case 4: BODY(KIND, w, 0, n, x, xs, 4, y, ys, PF, 1); break;                                   \
    case 5: BODY(KIND, w, 0, n, x, xs, 5, y, ys, PF, 1); break;                                   \
    case 6: BODY(KIND, w, 0, n, x, xs, 6, y, ys, PF, 1); break;                                   \
    case 7: BODY(KIND, w, 0, n, x, xs, 7, y, ys, PF, 1); break;                                   \
    default: BODY(KIND, w, 0, n, x, xs, 8, y, ys, PF, 1); break;                                  \
    }                                                                                             \
  }

#define X512_NT 8 /* tokens per tile call (all kinds, both widths) */
/* Q4_0 tiles of at most this many tokens take the high nibbles as
 * v & 0xf0 (x512_unpack2's hx16, x512_block2 says why it is exact): 4
 * vpsrlw fewer per block, 2 operations more per token (vpsrad, vpaddd),
 * and each token's dependent vpdpbusd chain split in two. Measured
 * (1024 x 2048 in L2, one thread): 1.09-1.12x at 1 and 2 tokens, even at
 * 3, slower from 4 on (docs/perf-decisions.md, "Fewer vector operations"). */
#ifndef X512_Q4_HX16_NT
#define X512_Q4_HX16_NT 2
#endif

/* Weight kinds of the x 8 layout (packed.c): the bodies below differ only
 * in how a packed block becomes the 8 u8 weight vectors that meet
 * activation words 0..7. Bytes of a packed block, and its cache lines. */
enum { X512_K_Q4, X512_K_Q8, X512_K_Q5, X512_K_Q5G };
#define X512_Q5(k) ((k) == X512_K_Q5 || (k) == X512_K_Q5G)
#define X512_PB(k) ((k) == X512_K_Q8 ? 272 : X512_Q5(k) ? 176 : 144)
#define X512_PFN(k) ((k) == X512_K_Q8 ? 5 : 3)

/* Q5_0 with GFNI (X512_K_Q5G, when the CPU has it): vgf2p8affineqb
 * applies an 8 x 8 bit matrix to every byte (result bit b is the parity
 * of the source bits that byte 7 - b of the qword's matrix selects), so
 * it moves and masks bits in one operation. Per packed vector v (low
 * nibbles meet word i, high ones word 4 + i) and the H bytes h:
 *   g = h's bit i at bit 4 and its bit 4 + i at bit 0, zeros elsewhere
 *       (one vgf2p8affineqb, X512_GF_HB(i));
 *   w[i] = (v & 0x0f) | (g & 0xf0): a bit select by 0x0f (vpternlogd);
 *   y = (v & 0xf0) | (g & 0x0f): the high nibble with its fifth bit at
 *       bit 0 (vpternlogd);
 *   w[4 + i] = y's bits 4..7 to 0..3 and bit 0 to 4 (vgf2p8affineqb,
 *       X512_GF_HI).
 * 4 operations per vector where the plain path takes 7 and a one-bit
 * matrix per half-vector takes 5. Written as asm so the variant
 * needs no GFNI target (kern_ops_avx512 picks this kind only on CPUs that
 * report GFNI).
 * X512_GF_ROW(b, m): the matrix row making result bit b the source bits m. */
#define X512_GF_ROW(b, m) ((long long)((unsigned long long)(m) << (8 * (7 - (b)))))
#define X512_GF_HB(i) (X512_GF_ROW(4, 1u << (i)) | X512_GF_ROW(0, 1u << (4 + (i))))
#define X512_GF_HI (X512_GF_ROW(0, 0x10) | X512_GF_ROW(1, 0x20) | X512_GF_ROW(2, 0x40) | X512_GF_ROW(3, 0x80) | \
                    X512_GF_ROW(4, 0x01))
TGT_INL __m512i x512_gf_z(__m512i x, __m512i a) {
  __m512i r;
  __asm__("vgf2p8affineqb $0, %2, %1, %0" : "=v"(r) : "v"(x), "v"(a));
  return r;
}

/* 32 bytes of group g0 and the same 32 bytes of the next group (gb bytes
 * on) as one zmm: g0's in the low half. */
TGT_INL __m512i x512_pair(const uint8_t *p, size_t gb) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p)),
                            _mm256_loadu_si256((const __m256i *)(p + gb)), 1);
}

/* The 8 f16 scales of a block of both groups as 16 f32. */
TGT_INL __m512 x512_scales(const uint8_t *p, size_t gb) {
  __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
                                      _mm_loadu_si128((const __m128i *)(p + gb)), 1);
  return _mm512_cvtph_ps(h);
}

/* Packed block blk of two groups (gb apart) as the 8 u8 weight vectors w[k]
 * that meet activation word k:
 *   Q4_0: w[i] = the low nibbles of vector i, w[4 + i] its high ones
 *         (unsigned 0..15; the offset 8 is in the accumulators' start);
 *         with hx16, w[4 + i] = vector i & 0xf0: the high nibbles times
 *         16 in place, one vpandnd and no shift;
 *   Q8_0: w[j] = vector j xor 0x80 = w + 128 (offset 128 likewise);
 *   Q5_0: the nibbles with their high bit from H at bit 4 (0..31): H
 *         shifted left by 4 - i for vector i's low nibbles, right by i for
 *         its high ones, & 0x10, one vpternlogd (a | (b & 0x10)) each;
 *   Q5_0 with GFNI: as X512_GF_HB says (two bit selects, two
 *         vgf2p8affineqb per vector). */
TGT_INL void x512_unpack2(int kind, const uint8_t *blk, size_t gb, int hx16, __m512i w[8]) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10);
  if (kind == X512_K_Q8) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) w[j] = _mm512_xor_si512(x512_pair(blk + 16 + 32 * j, gb), _mm512_set1_epi8((char)0x80));
    return;
  }
  const __m512i h = X512_Q5(kind) ? x512_pair(blk + 144, gb) : _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    const __m512i v = x512_pair(blk + 16 + 32 * i, gb);
    if (kind == X512_K_Q5G) {
      const __m512i g = x512_gf_z(h, _mm512_set1_epi64(X512_GF_HB(i)));
      w[i] = _mm512_ternarylogic_epi32(v, g, m4, 0xe4);
      w[4 + i] = x512_gf_z(_mm512_ternarylogic_epi32(v, g, m4, 0xd8), _mm512_set1_epi64(X512_GF_HI));
      continue;
    }
    w[i] = _mm512_and_si512(v, m4);
    w[4 + i] = hx16 ? _mm512_andnot_si512(m4, v) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    if (kind == X512_K_Q5) {
      const __m512i hl = i == 0 ? _mm512_slli_epi16(h, 4)
                         : i == 1 ? _mm512_slli_epi16(h, 3)
                         : i == 2 ? _mm512_slli_epi16(h, 2)
                                  : _mm512_slli_epi16(h, 1);
      const __m512i hh = i == 0 ? h
                         : i == 1 ? _mm512_srli_epi16(h, 1)
                         : i == 2 ? _mm512_srli_epi16(h, 2)
                                  : _mm512_srli_epi16(h, 3);
      w[i] = _mm512_ternarylogic_epi32(w[i], hl, m10, 0xf8);
      w[4 + i] = _mm512_ternarylogic_epi32(w[4 + i], hh, m10, 0xf8);
    }
  }
}

/* acc + vpdpbusd(w, the activation word at p in every dword lane), with
 * the broadcast embedded ({1to16}): one fused load + multiply-add. GCC
 * turns _mm512_set1_epi32 from memory into a separate vpbroadcastd, one
 * more micro-op per vpdpbusd (measured: 1.06-1.13x at 4-8 tokens, docs/
 * perf-decisions.md). Asm, like x512_gf_z. */
TGT_INL __m512i x512_dpb(__m512i acc, __m512i w, const int32_t *p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*p));
  return acc;
}

/* Activation block b of token t. */
#define X512_XB(x, xs, t, b) ((const x512_block_q8 *)((const char *)(x) + (t) * (xs)) + (b))

/* One block of 16 rows (two groups) for nt tokens: each token's exact
 * int32 block sum (starting at its offset term c0), then acc[t] =
 * fma(float(sum), dw * d_x, acc[t]).
 * hx16 (Q4_0, w[4..7] = 16 x the high nibbles): words 4..7 go to a second
 * accumulator h = 16 x sum(hi x x), which vpsrad by 4 divides exactly (a
 * multiple of 16, negative or not), so s + (h >> 4) is the very int32 the
 * one-accumulator loop sums: bit-identical. Range: |h| <= 16 x 16 products
 * x 15 x 128 = 491520 per lane, far inside int32. */
TGT_INL void x512_block2(const __m512i w[8], __m512 dw, const void *x, size_t xs, int64_t b, int nt, int hx16,
                         __m512 *acc) {
  __m512i s[X512_NT], h[X512_NT];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) s[t] = _mm512_set1_epi32(X512_XB(x, xs, t, b)->c0);
  if (hx16) {
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) h[t] = _mm512_setzero_si512();
  }
#pragma GCC unroll 8
  for (int k = 0; k < 8; k++) {
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
      const int32_t *xw = &X512_XW(X512_XB(x, xs, t, b), k);
      if (hx16 && k >= 4)
        h[t] = x512_dpb(h[t], w[k], xw);
      else
        s[t] = x512_dpb(s[t], w[k], xw);
    }
  }
  if (hx16) {
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) s[t] = _mm512_add_epi32(s[t], _mm512_srai_epi32(h[t], 4));
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++)
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(dw, _mm512_set1_ps(X512_XB(x, xs, t, b)->d)), acc[t]);
}

/* Far software prefetch, used by every VNNI tile here and in
 * kern_x512_qk.h next to its prefetcht0 (X8_PF_DIST, Q4KX8_PF_DIST or
 * X512_Q6K_PF_NEAR ahead): the n lines X512_PF_FAR bytes after p, into L2
 * (prefetcht2). Why: with both threads decoding from DRAM, a tile whose
 * ALU work keeps a core half busy leaves few demand misses in flight, and
 * a prefetcht0 from DRAM holds one of the core's few L1 fill buffers for
 * the whole trip; the far hint starts the trip early and the near one
 * then finds the line in L2. Measured (bench/decode_wall.c, products
 * against reading the same bytes in the same process, alternated rounds):
 * TinyLlama Q4_K_M gate/up (Q4_K) 0.83-0.87 -> 0.97-0.99 and its down
 * (half Q6_K) 0.78-0.81 -> 0.85-0.86; Q4_0 gate/up 0.93 -> 0.97-0.98;
 * Q8_0 whole products 0.95-0.98 -> 0.98-0.99. A Q6_K matrix from DRAM at
 * 2 threads: 24.1 -> 27.3 GB/s (medians of 7 rounds; Q4_K and Q8_0 ~31). */
#ifndef X512_PF_FAR
#define X512_PF_FAR 16384
#endif
TGT_INL void x512_prefetch_far(const uint8_t *p, int n) {
#pragma GCC unroll 8
  for (int i = 0; i < n; i++) _mm_prefetch((const char *)p + X512_PF_FAR + 64 * i, _MM_HINT_T2);
}

/* Two groups (16 rows) of kind x nt tokens: y[t * ys + r] for r < 16,
 * or with one (gb 0: the group with itself) r < 8. pf (a constant):
 * software prefetch of both groups' streams. */
TGT_INL void body_x512_2(int kind, const void *wg, size_t gb, int64_t n, const void *x, size_t xs, int nt,
                         float *y, size_t ys, int pf, int one) {
  const int64_t nb = n / 32;
  const int hx16 = kind == X512_K_Q4 && nt <= X512_Q4_HX16_NT;
  const uint8_t *blk0 = wg;
  __m512 acc[X512_NT];
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
  const size_t far = one ? 0 : 2 * gb; /* see the prefetch below */
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = blk0 + X512_PB(kind) * b;
    if (pf) {
      /* near group g's end its prefetch would name g + 1's head, which
       * the second stream reads already: it goes two groups further, to
       * the next pair's second group (g + 1's runs into g + 2 by itself),
       * so both streams of the next call start warm */
      x8_prefetch(blk + (X512_PB(kind) * (size_t)b + X8_PF_DIST >= gb ? far : 0), X512_PFN(kind), X8_PF_DIST);
      if (!one) x8_prefetch(blk + gb, X512_PFN(kind), X8_PF_DIST);
      x512_prefetch_far(blk, X512_PFN(kind));
      if (!one) x512_prefetch_far(blk + gb, X512_PFN(kind));
    }
    __m512i w[8];
    x512_unpack2(kind, blk, gb, hx16, w);
    x512_block2(w, x512_scales(blk, gb), x, xs, b, nt, hx16, acc);
  }
#pragma GCC unroll 8
  for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(y + t * ys, one ? 0x00ff : 0xffff, acc[t]);
}

X512_PTILE2(ptile2_x512_q4, body_x512_2, X512_K_Q4, 1)
X512_PTILE2(ptile2_x512_q4_warm, body_x512_2, X512_K_Q4, 0)
X512_PTILE1(ptile_x512_q4, body_x512_2, X512_K_Q4, 1)
X512_PTILE1(ptile_x512_q4_warm, body_x512_2, X512_K_Q4, 0)
X512_PTILE2(ptile2_x512_q8, body_x512_2, X512_K_Q8, 1)
X512_PTILE2(ptile2_x512_q8_warm, body_x512_2, X512_K_Q8, 0)
X512_PTILE1(ptile_x512_q8, body_x512_2, X512_K_Q8, 1)
X512_PTILE1(ptile_x512_q8_warm, body_x512_2, X512_K_Q8, 0)
X512_PTILE2(ptile2_x512_q5, body_x512_2, X512_K_Q5, 1)
X512_PTILE2(ptile2_x512_q5_warm, body_x512_2, X512_K_Q5, 0)
X512_PTILE1(ptile_x512_q5, body_x512_2, X512_K_Q5, 1)
X512_PTILE1(ptile_x512_q5_warm, body_x512_2, X512_K_Q5, 0)
X512_PTILE2(ptile2_x512_q5g, body_x512_2, X512_K_Q5G, 1)
X512_PTILE2(ptile2_x512_q5g_warm, body_x512_2, X512_K_Q5G, 0)
X512_PTILE1(ptile_x512_q5g, body_x512_2, X512_K_Q5G, 1)
X512_PTILE1(ptile_x512_q5g_warm, body_x512_2, X512_K_Q5G, 0)

/* CPUID leaf 7 ECX bit 8: GFNI (asked directly, as x86_has_f16c). */
static int x512_has_gfni(void) {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 8)) != 0;
}

/* x512_block_q8 activations: quant_q8_x86's blocks with c0 = -mul *
 * sum(qs) (mul 8 for Q4_0, 16 for Q5_0, 128 for Q8_0). */
TGT_INL void quant_x512(const float *x, void *dst, int64_t n, int32_t mul) {
  _Static_assert(sizeof(x512_block_q8) == sizeof(kern_block_q8), "same block size");
  quant_q8_x86(x, dst, n);
  x512_block_q8 *b = dst;
  const __m256i ones8 = _mm256_set1_epi8(1);
  for (int64_t i = 0; i < n / 32; i++) {
    __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones8, _mm256_loadu_si256((const __m256i *)b[i].qs));
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    b[i].c0 = -mul * _mm_cvtsi128_si32(h);
  }
}

TGT static void quant_x512_q4(const float *x, void *dst, int64_t n) { quant_x512(x, dst, n, 8); }
TGT static void quant_x512_q5(const float *x, void *dst, int64_t n) { quant_x512(x, dst, n, 16); }
TGT static void quant_x512_q8(const float *x, void *dst, int64_t n) { quant_x512(x, dst, n, 128); }

/* Overrides the AVX2 bodies' packed Q4_0 / Q5_0 / Q8_0 entries
 * (x86_fill_packed_ops ran before). */
static void x512_fill_packed_q4_ops(struct kern_ops *ops) {
  ops->ptile[TENSOR_TYPE_Q4_0] = ptile_x512_q4;
  ops->ptile_warm[TENSOR_TYPE_Q4_0] = ptile_x512_q4_warm;
  ops->ptile2[TENSOR_TYPE_Q4_0] = ptile2_x512_q4;
  ops->ptile2_warm[TENSOR_TYPE_Q4_0] = ptile2_x512_q4_warm;
  ops->ptile_nt[TENSOR_TYPE_Q4_0] = X512_NT;
  ops->pquant[TENSOR_TYPE_Q4_0] = quant_x512_q4;
  ops->ptile[TENSOR_TYPE_Q8_0] = ptile_x512_q8;
  ops->ptile_warm[TENSOR_TYPE_Q8_0] = ptile_x512_q8_warm;
  ops->ptile2[TENSOR_TYPE_Q8_0] = ptile2_x512_q8;
  ops->ptile2_warm[TENSOR_TYPE_Q8_0] = ptile2_x512_q8_warm;
  ops->ptile_nt[TENSOR_TYPE_Q8_0] = X512_NT;
  ops->pquant[TENSOR_TYPE_Q8_0] = quant_x512_q8;
  ops->ptile[TENSOR_TYPE_Q5_0] = ptile_x512_q5;
  ops->ptile_warm[TENSOR_TYPE_Q5_0] = ptile_x512_q5_warm;
  ops->ptile2[TENSOR_TYPE_Q5_0] = ptile2_x512_q5;
  ops->ptile2_warm[TENSOR_TYPE_Q5_0] = ptile2_x512_q5_warm;
  ops->ptile_nt[TENSOR_TYPE_Q5_0] = X512_NT;
  if (x512_has_gfni() && !getenv("PARLEY_NO_GFNI")) { /* the env: for A/B only */
    ops->ptile[TENSOR_TYPE_Q5_0] = ptile_x512_q5g;
    ops->ptile_warm[TENSOR_TYPE_Q5_0] = ptile_x512_q5g_warm;
    ops->ptile2[TENSOR_TYPE_Q5_0] = ptile2_x512_q5g;
    ops->ptile2_warm[TENSOR_TYPE_Q5_0] = ptile2_x512_q5g_warm;
  }
  ops->pquant[TENSOR_TYPE_Q5_0] = quant_x512_q5;
}

#endif
