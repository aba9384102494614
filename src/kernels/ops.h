/*
 * ops.h - the elementwise and row-wise operations of a transformer forward
 * pass, in plain C: normalizations, rotary position embeddings, softmax,
 * activations, residual adds.
 *
 * They are O(n) per row next to the O(n^2) matrix products (kernels.h), so
 * they are written as simple loops; the few a prompt spends measurable time
 * in (RMSNorm, SiLU, SwiGLU, add) have AVX2 forms in ops_avx2.c, used when
 * the CPU has them. All work on f32 rows in place unless an output is given;
 * input and output may alias when the comment says so. Reductions (sums of
 * squares, softmax sums) accumulate in double so results do not depend on
 * the row length's rounding.
 */
#ifndef PARLEY_KERNELS_OPS_H
#define PARLEY_KERNELS_OPS_H

#include <stdbool.h>
#include <stdint.h>

/* y = x / sqrt(mean(x^2) + eps) * w  (w may be NULL: no scale). y may alias x. */
void ops_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
/* The residual add folded into the next RMSNorm: x += d, then
 * y = rmsnorm(x) * w, in one pass over x and d and one over y (decode
 * calls it twice per layer on rows of n_embd). Same results, bit for bit,
 * as ops_add(x, d, n) followed by ops_rmsnorm(y, x, w, n, eps). y may
 * alias d (d is read whole before y is written), not x. */
void ops_add_rmsnorm(float *x, const float *d, float *y, const float *w, int64_t n, float eps);
/* y = (x - mean) / sqrt(var + eps) * w + b  (w, b may be NULL). y may alias x. */
void ops_layernorm(float *y, const float *x, const float *w, const float *b, int64_t n, float eps);

/* Rotary position embedding of one head vector x[head_dim] at position pos,
 * rotating the first n_rot dimensions (n_rot even, <= head_dim) in pairs.
 *   normal (llama, GPT-J style in ggml's naming): pairs (x[2i], x[2i+1])
 *   neox   (GPT-NeoX, Qwen2/3, BERT-like):        pairs (x[i], x[i + n_rot/2])
 * Pair i turns by theta_i = pos * freq_scale * base^(-2i/n_rot) / factor_i,
 * factor_i = freq_factors[i] (Llama 3 `rope_freqs.weight`, LongRoPE's
 * short or long factors) or 1 when NULL. YaRN (ext_factor != 0) mixes that
 * interpolated angle with the unscaled one, e_i = pos * base^(-2i/n_rot) /
 * factor_i: theta_i = interp (1 - w_i) + e_i w_i, w_i = ext_factor *
 * (1 - clamp((i - corr_lo) / max(0.001, corr_hi - corr_lo), 0, 1)), so the
 * fast pairs (i < corr_lo) keep their trained angles and the slow ones
 * (i > corr_hi) are interpolated. cos and sin are then multiplied by
 * attn_factor (YaRN's and LongRoPE's attention magnitude). A
 * zero-initialised tail (ext_factor, corr_lo, corr_hi, attn_factor all 0)
 * is plain RoPE. Angles are computed in double. */
enum ops_rope_style { OPS_ROPE_NORMAL = 0, OPS_ROPE_NEOX = 1 };

typedef struct ops_rope {
  enum ops_rope_style style;
  int32_t n_rot;              /* rotated dimensions per head (even) */
  float freq_base;            /* 10000 for Llama 2, 500000 for Llama 3 */
  float freq_scale;           /* 1 / scaling factor (linear, YaRN); 1 = none */
  const float *freq_factors;  /* [n_rot/2] or NULL */
  float ext_factor;           /* YaRN's extrapolation weight; 0 = off */
  float corr_lo, corr_hi;     /* YaRN's ramp, in pair indices (ops_rope_yarn) */
  float attn_factor;          /* cos/sin multiplier; 0 means 1 */
} ops_rope;

/* Sets r's YaRN ramp for a model trained on n_ctx_orig positions: pair i
 * turns fewer than beta_fast times over n_ctx_orig positions from corr_lo
 * on, and fewer than beta_slow times from corr_hi on (floor and ceiling of
 * the pair index where pos * base^(-2i/n_rot) = 2 pi beta, clamped to
 * 0 .. n_rot - 1), and ext_factor. beta_fast >= beta_slow > 0. */
void ops_rope_yarn(ops_rope *r, int64_t n_ctx_orig, float beta_fast, float beta_slow, float ext_factor);
/* Whether a and b turn every pair by the same angle and magnitude. */
bool ops_rope_same(const ops_rope *a, const ops_rope *b);

/* Rotates n_head head vectors laid out one after another (stride head_dim)
 * at position pos. */
void ops_rope_apply(const ops_rope *r, float *x, int32_t n_head, int32_t head_dim, int64_t pos);
/* The same in two steps, so a forward pass computes the angles of a position
 * once for every layer and for both q and k: ops_rope_cache() fills
 * cs[n_rot] with (cos theta_i, sin theta_i) pairs; ops_rope_apply_cached()
 * rotates with them. */
void ops_rope_cache(const ops_rope *r, int64_t pos, float *cs);
void ops_rope_apply_cached(const ops_rope *r, const float *cs, float *x, int32_t n_head, int32_t head_dim);

/* In place: x = exp(x - max) / sum. Entries of -INFINITY get probability 0;
 * a row that is all -INFINITY becomes all 0. */
void ops_softmax(float *x, int64_t n);

/* x * sigmoid(x), elementwise in place. */
void ops_silu(float *x, int64_t n);
/* gate = silu(gate) * up (SwiGLU), in place on gate. */
void ops_swiglu(float *gate, const float *up, int64_t n);
/* GELU, tanh approximation (what ggml's gelu computes, so what GGUF BERT
 * models are run with elsewhere), in place. */
void ops_gelu(float *x, int64_t n);
/* GELU with the exact erf form: x/2 * (1 + erf(x/sqrt 2)), in place. */
void ops_gelu_erf(float *x, int64_t n);
/* y += x */
void ops_add(float *y, const float *x, int64_t n);

#endif
