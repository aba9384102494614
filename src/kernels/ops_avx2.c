/*
 * ops_avx2.c - AVX2 + FMA forms of the element-wise operations a prompt
 * spends measurable time in (ops.h): RMSNorm, SwiGLU / SiLU, RoPE with
 * cached angles and the residual add. ops.c calls them when kern_avx2_fast() says the CPU has
 * AVX2 + FMA + F16C and the reference kernels are not forced.
 *
 * Why: on a 512-token prompt the plain loops (libm expf per element for
 * SwiGLU, a scalar double sum of squares for RMSNorm) took about 4% of
 * TinyLlama's and 9% of Qwen2.5-0.5B's time (perf, docs/perf-decisions.md,
 * "AVX2 element-wise ops"). Differences from the plain forms: SiLU's exp is
 * the polynomial of vexp_x86.h (relative error < 4e-7, where libm's is
 * ~1 ulp), and RMSNorm's double sum of squares is summed in four lanes
 * (same value to double rounding; the output then differs from the plain
 * form by at most one float rounding of the scale), RoPE's rotation uses
 * FMA (one rounding fewer per output). Every function allows
 * the aliasing its ops.h twin allows. ops_avx2_add_rmsnorm is the add and
 * the RMSNorm in two passes instead of three, same operations.
 */
#include "kernels/ops_avx2.h"

#if defined(__x86_64__)
#include <math.h>

#include "kernels/vexp_x86.h"

TGT_INL __m256 silu8(__m256 x) {
  __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* The sum of squares of x[0..n) in double, in the lane order both
 * RMSNorm forms below share; with d, x += d first (element by element,
 * stored back), so the fused form sums exactly what the separate add
 * would have left in x. */
TGT_INL double sumsq(float *x, const float *d, int64_t n) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    if (d) {
      v = _mm256_add_ps(v, _mm256_loadu_ps(d + i));
      _mm256_storeu_ps(x + i, v);
    }
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    s0 = _mm256_fmadd_pd(lo, lo, s0);
    s1 = _mm256_fmadd_pd(hi, hi, s1);
  }
  double lanes[4];
  _mm256_storeu_pd(lanes, _mm256_add_pd(s0, s1));
  double ss = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; i++) {
    if (d) x[i] += d[i];
    ss += (double)x[i] * x[i];
  }
  return ss;
}

/* y = x * (1 / sqrt(ss / n + eps)) * w, ss the sum of squares of x. */
TGT_INL void rms_store(float *y, const float *x, const float *w, int64_t n, double ss, float eps) {
  float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
  __m256 sc = _mm256_set1_ps(scale);
  int64_t i = 0;
  if (w) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sc), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) y[i] = x[i] * scale * w[i];
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sc));
    for (; i < n; i++) y[i] = x[i] * scale;
  }
}

TGT void ops_avx2_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
  rms_store(y, x, w, n, sumsq((float *)x, NULL, n), eps); /* x not written: no d */
}

TGT void ops_avx2_add_rmsnorm(float *x, const float *d, float *y, const float *w, int64_t n, float eps) {
  rms_store(y, x, w, n, sumsq(x, d, n), eps);
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

TGT void ops_avx2_rope_cached(const ops_rope *r, const float *cs, float *x, int32_t n_head, int32_t head_dim) {
  const int32_t half = r->n_rot / 2;
  if (r->style == OPS_ROPE_NEOX) {
    /* pairs (i, i + half): cos and sin gathered once for all heads */
    float c[256], sn[256];
    for (int32_t i = 0; i < half; i++) c[i] = cs[2 * i], sn[i] = cs[2 * i + 1];
    for (int32_t h = 0; h < n_head; h++) {
      float *v = x + (int64_t)h * head_dim;
      int32_t i = 0;
      for (; i + 8 <= half; i += 8) {
        __m256 x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + i + half);
        __m256 cv = _mm256_loadu_ps(c + i), sv = _mm256_loadu_ps(sn + i);
        _mm256_storeu_ps(v + i, _mm256_fmsub_ps(x0, cv, _mm256_mul_ps(x1, sv)));
        _mm256_storeu_ps(v + i + half, _mm256_fmadd_ps(x0, sv, _mm256_mul_ps(x1, cv)));
      }
      for (; i < half; i++) {
        float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * c[i] - x1 * sn[i];
        v[i + half] = x0 * sn[i] + x1 * c[i];
      }
    }
    return;
  }
  /* pairs (2i, 2i + 1), cs interleaved the same way: even lanes
   * x0 c - x1 s, odd lanes x1 c + x0 s (fmaddsub) */
  for (int32_t h = 0; h < n_head; h++) {
    float *v = x + (int64_t)h * head_dim;
    int32_t k = 0;
    for (; k + 8 <= 2 * half; k += 8) {
      __m256 xv = _mm256_loadu_ps(v + k), csv = _mm256_loadu_ps(cs + k);
      __m256 cc = _mm256_moveldup_ps(csv), ss = _mm256_movehdup_ps(csv);
      __m256 xs = _mm256_permute_ps(xv, 0xB1);
      _mm256_storeu_ps(v + k, _mm256_fmaddsub_ps(xv, cc, _mm256_mul_ps(xs, ss)));
    }
    for (; k < 2 * half; k += 2) {
      float x0 = v[k], x1 = v[k + 1], c = cs[k], sn = cs[k + 1];
      v[k] = x0 * c - x1 * sn;
      v[k + 1] = x0 * sn + x1 * c;
    }
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
