/*
 * delta.c - the gated delta rule with state (delta.h): the token-by-token
 * reference and the chunked form. Both are plain C (loops the compiler
 * vectorizes over d_v); the chunked form's point is its shape - per chunk,
 * products of [C][d_k] and [d_k][d_v] blocks and a C x C triangle - which is
 * what a prompt path builds on. The exponents it takes are differences of
 * decay sums within a chunk, all <= 0, so nothing overflows for a <= 0.
 */
#include "kernels/delta.h"

#include <math.h>
#include <string.h>

static float dot(const float *x, const float *y, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
  return s;
}

/* y[0..d_v) = S^T x for S [d_k][d_v] */
static void recall(float *y, const float *S, const float *x, int64_t d_k, int64_t d_v) {
  memset(y, 0, (size_t)d_v * sizeof *y);
  for (int64_t i = 0; i < d_k; i++) {
    const float xi = x[i], *row = S + i * d_v;
    for (int64_t j = 0; j < d_v; j++) y[j] += xi * row[j];
  }
}

void ops_gdr_ref(const ops_gdr_io *io, float *S) {
  const int64_t dk = io->d_k, dv = io->d_v;
  for (int64_t t = 0; t < io->n; t++) {
    const float *q = io->q + t * io->ldq, *k = io->k + t * io->ldk, *v = io->v + t * io->ldv;
    float *o = io->o + t * io->ldo;
    const float g = expf(io->a[t]), b = io->beta[t];
    for (int64_t i = 0; i < dk * dv; i++) S[i] *= g;
    recall(o, S, k, dk, dv); /* o holds S^T k for a moment */
    for (int64_t j = 0; j < dv; j++) o[j] = b * (v[j] - o[j]);
    for (int64_t i = 0; i < dk; i++) {
      float *row = S + i * dv;
      for (int64_t j = 0; j < dv; j++) row[j] += k[i] * o[j];
    }
    recall(o, S, q, dk, dv);
  }
}

size_t ops_gdr_work_floats(int64_t chunk, int64_t d_v) {
  /* u [C][d_v], G [C], e^G [C], one row of d_v */
  return (size_t)chunk * (size_t)d_v + 2 * (size_t)chunk + (size_t)d_v;
}

/* One chunk of C tokens starting at row t0 (delta.h for the equations). */
static void chunk_step(const ops_gdr_io *io, float *S, int64_t t0, int64_t C, float *work) {
  const int64_t dk = io->d_k, dv = io->d_v;
  float *u = work, *G = u + C * dv, *eG = G + C, *row = eG + C;
#define Q(i) (io->q + (t0 + (i)) * io->ldq)
#define K(i) (io->k + (t0 + (i)) * io->ldk)
#define V(i) (io->v + (t0 + (i)) * io->ldv)
#define O(i) (io->o + (t0 + (i)) * io->ldo)
  float acc = 0.0f;
  for (int64_t i = 0; i < C; i++) {
    acc += io->a[t0 + i];
    G[i] = acc;
    eG[i] = expf(acc);
  }
  /* right-hand side beta_i (v_i - e^G_i S0^T k_i), then forward substitution */
  for (int64_t i = 0; i < C; i++) {
    float *ui = u + i * dv;
    const float b = io->beta[t0 + i];
    recall(ui, S, K(i), dk, dv);
    for (int64_t j = 0; j < dv; j++) ui[j] = b * (V(i)[j] - eG[i] * ui[j]);
    for (int64_t j = 0; j < i; j++) {
      const float l = b * expf(G[i] - G[j]) * dot(K(i), K(j), dk);
      const float *uj = u + j * dv;
      for (int64_t c = 0; c < dv; c++) ui[c] -= l * uj[c];
    }
  }
  /* outputs against the chunk's starting state and the corrections */
  for (int64_t i = 0; i < C; i++) {
    float *o = O(i);
    recall(o, S, Q(i), dk, dv);
    for (int64_t c = 0; c < dv; c++) o[c] *= eG[i];
    for (int64_t j = 0; j <= i; j++) {
      const float w = expf(G[i] - G[j]) * dot(Q(i), K(j), dk);
      const float *uj = u + j * dv;
      for (int64_t c = 0; c < dv; c++) o[c] += w * uj[c];
    }
  }
  /* the state after the chunk */
  const float last = G[C - 1], eL = eG[C - 1];
  for (int64_t x = 0; x < dk * dv; x++) S[x] *= eL;
  for (int64_t j = 0; j < C; j++) {
    const float w = expf(last - G[j]);
    const float *kj = K(j), *uj = u + j * dv;
    for (int64_t c = 0; c < dv; c++) row[c] = w * uj[c];
    for (int64_t i = 0; i < dk; i++) {
      float *Si = S + i * dv;
      const float ki = kj[i];
      for (int64_t c = 0; c < dv; c++) Si[c] += ki * row[c];
    }
  }
#undef Q
#undef K
#undef V
#undef O
}

void ops_gdr_chunked(const ops_gdr_io *io, float *S, int64_t chunk, float *work) {
  if (chunk < 1) chunk = 1;
  for (int64_t t0 = 0; t0 < io->n; t0 += chunk) chunk_step(io, S, t0, io->n - t0 < chunk ? io->n - t0 : chunk, work);
}
