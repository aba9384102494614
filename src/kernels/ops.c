/*
 * ops.c - elementwise and row-wise transformer operations (see ops.h).
 *
 * Plain loops over f32 with double accumulators for the reductions. The
 * transcendental functions come from libm (expf, tanhf, erff, sin/cos in
 * double for RoPE angles so that positions in the hundreds of thousands keep
 * their precision). Nothing here allocates. On x86 with AVX2 + FMA (and
 * the reference kernels not forced) RMSNorm, SiLU, SwiGLU, RoPE and the add run
 * their ops_avx2.c forms instead (a polynomial exp; see there).
 */
#include "kernels/ops.h"

#include "kernels/attn.h"
#include "kernels/ops_avx2.h"

#if defined(__x86_64__)
#define FAST(call)          \
  do {                      \
    if (kern_avx2_fast()) { \
      call;                 \
      return;               \
    }                       \
  } while (0)
#else
#define FAST(call) \
  do {             \
  } while (0)
#endif

#include <math.h>
#include <stdbool.h>

void ops_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
  FAST(ops_avx2_rmsnorm(y, x, w, n, eps));
  double ss = 0.0;
  for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
  float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
  if (w) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
  } else {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
  }
}

void ops_add_rmsnorm(float *x, const float *d, float *y, const float *w, int64_t n, float eps) {
  FAST(ops_avx2_add_rmsnorm(x, d, y, w, n, eps));
  for (int64_t i = 0; i < n; i++) x[i] += d[i];
  ops_rmsnorm(y, x, w, n, eps);
}

void ops_layernorm(float *y, const float *x, const float *w, const float *b, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += x[i];
  double mean = sum / (double)n;
  double var = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double d = x[i] - mean;
    var += d * d;
  }
  var /= (double)n;
  float scale = (float)(1.0 / sqrt(var + (double)eps));
  float m = (float)mean;
  for (int64_t i = 0; i < n; i++) {
    float v = (x[i] - m) * scale;
    if (w) v *= w[i];
    if (b) v += b[i];
    y[i] = v;
  }
}

/* cos and sin of pair i at position pos, magnitude included (ops.h). */
static void rope_pair(const ops_rope *r, int64_t pos, int32_t i, float *c, float *s) {
  double inv_freq = pow((double)r->freq_base, -2.0 * i / (double)r->n_rot);
  double theta = (double)pos * (double)r->freq_scale * inv_freq;
  if (r->freq_factors) theta /= (double)r->freq_factors[i];
  if (r->ext_factor != 0.0f) {
    double extrap = (double)pos * inv_freq;
    if (r->freq_factors) extrap /= (double)r->freq_factors[i];
    double y = ((double)i - r->corr_lo) / fmax(0.001, (double)r->corr_hi - r->corr_lo);
    double w = (1.0 - fmin(1.0, fmax(0.0, y))) * r->ext_factor;
    theta = theta * (1.0 - w) + extrap * w;
  }
  double m = r->attn_factor != 0.0f ? (double)r->attn_factor : 1.0;
  *c = (float)(cos(theta) * m);
  *s = (float)(sin(theta) * m);
}

void ops_rope_yarn(ops_rope *r, int64_t n_ctx_orig, float beta_fast, float beta_slow, float ext_factor) {
  /* pair index where a pair turns `beta` times over n_ctx_orig positions */
  const double n = (double)r->n_rot, lb = log((double)r->freq_base);
  double lo = floor(n * log((double)n_ctx_orig / (beta_fast * 2.0 * M_PI)) / (2.0 * lb));
  double hi = ceil(n * log((double)n_ctx_orig / (beta_slow * 2.0 * M_PI)) / (2.0 * lb));
  r->corr_lo = (float)fmax(0.0, lo);
  r->corr_hi = (float)fmin(n - 1.0, hi);
  r->ext_factor = ext_factor;
}

bool ops_rope_same(const ops_rope *a, const ops_rope *b) {
  const float ma = a->attn_factor != 0.0f ? a->attn_factor : 1.0f, mb = b->attn_factor != 0.0f ? b->attn_factor : 1.0f;
  return a->style == b->style && a->n_rot == b->n_rot && a->freq_base == b->freq_base &&
         a->freq_scale == b->freq_scale && a->freq_factors == b->freq_factors && a->ext_factor == b->ext_factor &&
         (a->ext_factor == 0.0f || (a->corr_lo == b->corr_lo && a->corr_hi == b->corr_hi)) && ma == mb;
}

void ops_rope_cache(const ops_rope *r, int64_t pos, float *cs) {
  for (int32_t i = 0; i < r->n_rot / 2; i++) rope_pair(r, pos, i, &cs[2 * i], &cs[2 * i + 1]);
}

void ops_rope_apply_cached(const ops_rope *r, const float *cs, float *x, int32_t n_head, int32_t head_dim) {
  if (r->n_rot <= 512) FAST(ops_avx2_rope_cached(r, cs, x, n_head, head_dim));
  int32_t half = r->n_rot / 2;
  bool neox = r->style == OPS_ROPE_NEOX;
  for (int32_t h = 0; h < n_head; h++) {
    float *v = x + (int64_t)h * head_dim;
    for (int32_t i = 0; i < half; i++) {
      int32_t a = neox ? i : 2 * i;
      int32_t b = neox ? i + half : 2 * i + 1;
      float c = cs[2 * i], s = cs[2 * i + 1];
      float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

void ops_rope_apply(const ops_rope *r, float *x, int32_t n_head, int32_t head_dim, int64_t pos) {
  float cs[512];
  /* n_rot is at most head_dim; heads wider than 512 take the slow path. */
  if (r->n_rot <= 512) {
    ops_rope_cache(r, pos, cs);
    ops_rope_apply_cached(r, cs, x, n_head, head_dim);
    return;
  }
  int32_t half = r->n_rot / 2;
  for (int32_t i = 0; i < half; i++) {
    float c, s;
    rope_pair(r, pos, i, &c, &s);
    int32_t a = r->style == OPS_ROPE_NEOX ? i : 2 * i;
    int32_t b = r->style == OPS_ROPE_NEOX ? i + half : 2 * i + 1;
    for (int32_t h = 0; h < n_head; h++) {
      float *v = x + (int64_t)h * head_dim;
      float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

void ops_softmax(float *x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; i++)
    if (x[i] > mx) mx = x[i];
  if (mx == -INFINITY) {
    for (int64_t i = 0; i < n; i++) x[i] = 0.0f;
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) {
    x[i] = expf(x[i] - mx);
    sum += x[i];
  }
  float inv = (float)(1.0 / sum);
  for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void ops_silu(float *x, int64_t n) {
  FAST(ops_avx2_silu(x, n));
  for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

void ops_swiglu(float *gate, const float *up, int64_t n) {
  FAST(ops_avx2_swiglu(gate, up, n));
  for (int64_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

void ops_gelu(float *x, int64_t n) {
  const float k = 0.7978845608028654f; /* sqrt(2/pi) */
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    x[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
  }
}

void ops_gelu_erf(float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

void ops_add(float *y, const float *x, int64_t n) {
  FAST(ops_avx2_add(y, x, n));
  for (int64_t i = 0; i < n; i++) y[i] += x[i];
}
