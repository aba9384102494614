/*
 * ops_avx2.c - AVX2 + FMA forms of the element-wise operations a prompt
 * spends measurable time in (ops.h): RMSNorm, SwiGLU / SiLU and the
 * residual add. ops.c calls them when kern_attn_fast() says the CPU has
 * AVX2 + FMA + F16C and the reference kernels are not forced.
 *
 * Why: on a 512-token prompt the plain loops (libm expf per element for
 * SwiGLU, a scalar double sum of squares for RMSNorm) took about 4% of
 * TinyLlama's and 9% of Qwen2.5-0.5B's time (perf, docs/perf.md "Session
 * 6: prompt attention"). Differences from the plain forms: SiLU's exp is
 * the polynomial of vexp_x86.h (relative error < 4e-7, where libm's is
 * ~1 ulp), and RMSNorm's double sum of squares is summed in four lanes
 * (same value to double rounding; the output then differs from the plain
 * form by at most one float rounding of the scale). Every function allows
 * the aliasing its ops.h twin allows.
 */
#include "kernels/ops_avx2.h"

#if defined(__x86_64__)
#include <math.h>

#include "kernels/vexp_x86.h"

TGT_INL __m256 silu8(__m256 x) {
  __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

TGT void ops_avx2_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    s0 = _mm256_fmadd_pd(lo, lo, s0);
    s1 = _mm256_fmadd_pd(hi, hi, s1);
  }
  double lanes[4];
  _mm256_storeu_pd(lanes, _mm256_add_pd(s0, s1));
  double ss = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; i++) ss += (double)x[i] * x[i];
  float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
  __m256 sc = _mm256_set1_ps(scale);
  i = 0;
  if (w) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sc), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) y[i] = x[i] * scale * w[i];
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sc));
    for (; i < n; i++) y[i] = x[i] * scale;
  }
}

TGT void ops_avx2_silu(float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, silu8(_mm256_loadu_ps(x + i)));
  if (i < n) { /* the tail through a padded vector, same arithmetic */
    float t[8] = {0};
    for (int64_t k = i; k < n; k++) t[k - i] = x[k];
    _mm256_storeu_ps(t, silu8(_mm256_loadu_ps(t)));
    for (int64_t k = i; k < n; k++) x[k] = t[k - i];
  }
}

TGT void ops_avx2_swiglu(float *gate, const float *up, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  if (i < n) {
    float t[8] = {0};
    for (int64_t k = i; k < n; k++) t[k - i] = gate[k];
    _mm256_storeu_ps(t, silu8(_mm256_loadu_ps(t)));
    for (int64_t k = i; k < n; k++) gate[k] = t[k - i] * up[k];
  }
}

TGT void ops_avx2_add(float *y, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 32; k += 8)
      _mm256_storeu_ps(y + i + k, _mm256_add_ps(_mm256_loadu_ps(y + i + k), _mm256_loadu_ps(x + i + k)));
  for (; i < n; i++) y[i] += x[i];
}

#endif
