/*
 * ssm.h - the Mamba-2 selective state-space scan (SSD) with carried state,
 * and the grouped gated RMS norm that follows it, for the mamba2,
 * granitehybrid and nemotron_h architectures (src/model/mamba2.c).
 *
 * Per head h of n_head (head_dim P values each, in group g = h / (n_head /
 * n_group): heads share B and C within a group), with a state S[P][N]
 * (N = d_state) and for every token t:
 *   d   = softplus(dt[t][h] + dt_bias[h])   (dt itself when above 20)
 *   S   = exp(d A[h]) S + d x[t][h] B[t][g]^T    (outer product, P x N)
 *   y[t][h] = S C[t][g] + D[h] x[t][h]
 * A[h] < 0 is the file's ssm_a (the converter stores -exp(A_log)).
 * ops_ssm_scan_ref is that recurrence token by token (the decode path).
 * ops_ssm_scan_chunked is the chunked matrix (state-space dual) form for
 * prompts: within a chunk of L tokens, with c_t = sum_{i<=t} d_i A (a
 * running sum, <= 0, non-increasing),
 *   y_t = exp(c_t) S0 C_t + sum_{j<=t} exp(c_t - c_j) d_j (C_t . B_j) x_j + D x_t
 *   S_L = exp(c_L) S0 + sum_j exp(c_L - c_j) d_j x_j B_j^T
 * so the token-token part is an L x L lower-triangular matrix (C B^T of the
 * group, shared by its heads, weighted per head) times the chunk's x, and
 * every exponent is a difference of running sums, <= 0: nothing overflows.
 *
 * Layout: one sequence's n consecutive tokens; x, B, C, dt are rows with
 * their own strides (the model reads them straight out of its projection:
 * x[t * ldx + h * P + p], B[t * ldb + g * N + s], C likewise with ldc,
 * dt[t * lddt + h]); y[t * ldy + h * P + p]; state [n_head][P][N], f32.
 */
#ifndef PARLEY_KERNELS_SSM_H
#define PARLEY_KERNELS_SSM_H

#include <stddef.h>
#include <stdint.h>

typedef struct ops_ssm_io {
  int64_t n;                   /* tokens */
  int64_t n_head, head_dim;    /* H, P */
  int64_t d_state, n_group;    /* N, groups (n_head a multiple of it) */
  const float *x;  int64_t ldx;  /* [n][>= H*P] */
  const float *B;  int64_t ldb;  /* [n][>= n_group*N] */
  const float *C;  int64_t ldc;  /* [n][>= n_group*N] */
  const float *dt; int64_t lddt; /* [n][>= H], before dt_bias */
  const float *dt_bias;        /* [H] */
  const float *A;              /* [H], negative */
  const float *D;              /* [H] skip weights */
  float *y;        int64_t ldy;  /* [n][>= H*P]; must not alias x */
} ops_ssm_io;

/* Most tokens per chunk of the chunked form. */
#define OPS_SSM_MAX_CHUNK 256

/* softplus as the Mamba kernels compute it (x above 20 is returned as is). */
float ops_ssm_softplus(float x);

/* The recurrence token by token, state [H][P][N] updated in place. */
void ops_ssm_scan_ref(const ops_ssm_io *io, float *state);
/* The chunked form, chunks of `chunk` (1..OPS_SSM_MAX_CHUNK) tokens; work
 * holds ops_ssm_work_floats(chunk) floats. Agrees with ops_ssm_scan_ref to
 * f32 rounding (the sums are ordered differently). */
void ops_ssm_scan_chunked(const ops_ssm_io *io, float *state, int64_t chunk, float *work);
size_t ops_ssm_work_floats(int64_t chunk);

/* The io of heads h0..h1-1 alone, all in one group (n_group 1): the same
 * sums as in the whole io, so a caller may split heads across threads (the
 * state of the slice starts at state + h0 * head_dim * d_state). */
static inline ops_ssm_io ops_ssm_io_heads(const ops_ssm_io *io, int64_t h0, int64_t h1) {
  const int64_t g = h0 / (io->n_head / io->n_group);
  ops_ssm_io r = *io;
  r.n_head = h1 - h0;
  r.n_group = 1;
  r.x += h0 * io->head_dim;
  r.y += h0 * io->head_dim;
  r.B += g * io->d_state;
  r.C += g * io->d_state;
  r.dt += h0;
  r.dt_bias += h0;
  r.A += h0;
  r.D += h0;
  return r;
}

/* The gated RMS norm after the scan, in place on n rows of y:
 *   v = y * silu(z);  y = v / rms_group(v) * w
 * where rms_group is over each of n_group consecutive slices of
 * d_inner / n_group values (eps added to the mean square); w [d_inner] is
 * the file's ssm_norm (GGUF dims [d_inner / n_group, n_group]). */
void ops_ssm_gated_norm(float *y, int64_t ldy, const float *z, int64_t ldz, int64_t n, int64_t d_inner,
                        int64_t n_group, const float *w, float eps);

#endif
