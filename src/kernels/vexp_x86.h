/*
 * vexp_x86.h - the exp polynomial's constants (kernels/attn.c describes
 * the method and its error) and, on x86-64, exp8(): eight of them in AVX2 +
 * FMA, shared by the attention (attn.c) and the SwiGLU / SiLU of
 * ops_avx2.c. Internal to src/kernels/.
 */
#ifndef PARLEY_KERNELS_VEXP_X86_H
#define PARLEY_KERNELS_VEXP_X86_H

#define VEXP_LO (-87.3f)
#define VEXP_HI 88.3f
#define VEXP_LOG2E 1.44269504088896341f
#define VEXP_LN2_HI 0.693359375f
#define VEXP_LN2_LO (-2.12194440e-4f)
#define VEXP_P2 (1.0f / 2)
#define VEXP_P3 (1.0f / 6)
#define VEXP_P4 (1.0f / 24)
#define VEXP_P5 (1.0f / 120)
#define VEXP_P6 (1.0f / 720)

#if defined(__x86_64__)
#include <immintrin.h>

#define TGT __attribute__((target("avx2,fma,f16c")))
#define TGT_INL static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* exp of 8 floats: 0 below VEXP_LO (and for -inf, NaN), exp(VEXP_HI) above
 * VEXP_HI. */
TGT_INL __m256 exp8(__m256 x) {
  __m256 ok = _mm256_cmp_ps(x, _mm256_set1_ps(VEXP_LO), _CMP_GE_OQ);
  x = _mm256_min_ps(x, _mm256_set1_ps(VEXP_HI));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(VEXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VEXP_LN2_HI), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VEXP_LN2_LO), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(VEXP_P6), r, _mm256_set1_ps(VEXP_P5));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  /* n is in [-126, 127] wherever ok holds; elsewhere the result is masked */
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), ok);
}

#define TGT5 __attribute__((target("avx512f,avx2,fma,f16c")))
#define TGT5_INL static inline __attribute__((always_inline, target("avx512f,avx2,fma,f16c")))

/* exp8 on 16 floats. */
TGT5_INL __m512 exp16(__m512 x) {
  __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(VEXP_LO), _CMP_GE_OQ);
  x = _mm512_min_ps(x, _mm512_set1_ps(VEXP_HI));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(VEXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VEXP_LN2_HI), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VEXP_LN2_LO), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(VEXP_P6), r, _mm512_set1_ps(VEXP_P5));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(ok, p, _mm512_castsi512_ps(e));
}

#endif

#endif
