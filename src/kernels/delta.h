/*
 * delta.h - the gated delta rule (Gated DeltaNet: the linear-attention
 * layers of Qwen3-Next and Qwen3.5), one head of one sequence, with the
 * state it carries from token to token.
 *
 * The state S [d_k][d_v] is an associative memory: S^T k recalls the value
 * stored under key k. Per token t, with q_t, k_t [d_k] (the layer has
 * L2-normalised both and scaled q), v_t [d_v], a log-decay a_t <= 0 (the
 * file's gate: g_t = exp(a_t) forgets) and a write strength beta_t in (0, 1):
 *   S   = g_t S
 *   u_t = beta_t (v_t - S^T k_t)       the correction of what S recalls for k_t
 *   S   = S + k_t u_t^T
 *   o_t = S^T q_t
 * Shapes: q, k rows of d_k floats, ldq / ldk floats apart; v, o rows of
 * d_v floats, ldv / ldo apart (a head's slice of a [n][heads x d] matrix);
 * a, beta [n]; S [d_k][d_v] f32, zeros at a sequence's start, and after a
 * call the state after the n tokens, so a prompt may be fed in pieces of
 * any length with the same result. o must not alias q, k or v.
 */
#ifndef PARLEY_KERNELS_DELTA_H
#define PARLEY_KERNELS_DELTA_H

#include <stddef.h>
#include <stdint.h>

typedef struct ops_gdr_io {
  const float *q, *k, *v;   /* [n] rows, see above */
  int64_t ldq, ldk, ldv, ldo;
  const float *a, *beta;    /* [n] log-decay (<= 0) and write strength */
  float *o;                 /* [n] rows of d_v */
  int64_t n, d_k, d_v;
} ops_gdr_io;

/* The plain recurrent form, token by token (the one-token decode path). */
void ops_gdr_ref(const ops_gdr_io *io, float *S);

/* Floats of work space ops_gdr_chunked needs for chunks of `chunk` tokens. */
size_t ops_gdr_work_floats(int64_t chunk, int64_t d_v);

/* The chunked parallel form for prompts: per chunk of `chunk` tokens (the
 * last may be shorter), with G_i the decay summed over the chunk up to i,
 * the corrections u solve the unit lower-triangular system
 *   u_i + sum_{j<i} beta_i e^(G_i - G_j) (k_i . k_j) u_j = beta_i (v_i - e^(G_i) S0^T k_i),
 * the outputs are o_i = e^(G_i) S0^T q_i + sum_{j<=i} e^(G_i - G_j) (q_i . k_j) u_j
 * and the state S = e^(G_last) S0 + sum_j e^(G_last - G_j) k_j u_j^T: matrix
 * products over the chunk instead of a matrix-vector pass per token.
 * Agrees with ops_gdr_ref to float rounding. work: ops_gdr_work_floats. */
void ops_gdr_chunked(const ops_gdr_io *io, float *S, int64_t chunk, float *work);

#endif
