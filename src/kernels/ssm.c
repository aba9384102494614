/*
 * ssm.c - the Mamba-2 scan (ssm.h): the token-by-token recurrence and the
 * chunked matrix form, and the grouped gated RMS norm.
 *
 * The chunked form works per chunk and group: G[t][j] = C_t . B_j for the
 * chunk's tokens (L x L, lower triangle), then per head of the group the
 * decays d_j and their running sums c_t, the outputs (the starting state's
 * part exp(c_t) S0 C_t first, then the chunk's tokens), and last the new
 * state. Loops run over contiguous P or N values so the compiler
 * vectorizes them; the work buffer is the caller's (no allocation here).
 */
#include "kernels/ssm.h"

#include <math.h>

float ops_ssm_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

void ops_ssm_scan_ref(const ops_ssm_io *io, float *state) {
  const int64_t H = io->n_head, P = io->head_dim, N = io->d_state, hpg = H / io->n_group;
  for (int64_t t = 0; t < io->n; t++) {
    const float *xt = io->x + t * io->ldx, *Bt = io->B + t * io->ldb, *Ct = io->C + t * io->ldc;
    float *yt = io->y + t * io->ldy;
    for (int64_t h = 0; h < H; h++) {
      const float d = ops_ssm_softplus(io->dt[t * io->lddt + h] + io->dt_bias[h]);
      const float dA = expf(d * io->A[h]);
      const float *b = Bt + (h / hpg) * N, *c = Ct + (h / hpg) * N;
      for (int64_t p = 0; p < P; p++) {
        float *S = state + (h * P + p) * N;
        const float xd = xt[h * P + p] * d;
        float acc = 0.0f;
        for (int64_t s = 0; s < N; s++) {
          S[s] = S[s] * dA + b[s] * xd;
          acc += S[s] * c[s];
        }
        yt[h * P + p] = acc + io->D[h] * xt[h * P + p];
      }
    }
  }
}

size_t ops_ssm_work_floats(int64_t chunk) { return (size_t)(chunk * chunk + 2 * chunk); }

/* One chunk of L tokens starting at token t0, every head. */
static void ssm_chunk(const ops_ssm_io *io, float *state, int64_t t0, int64_t L, float *work) {
  const int64_t H = io->n_head, P = io->head_dim, N = io->d_state, hpg = H / io->n_group;
  float *G = work, *d = work + L * L, *cum = d + L;
  for (int64_t g = 0; g < io->n_group; g++) {
    /* G[t][j] = C_t . B_j, j <= t */
    for (int64_t t = 0; t < L; t++) {
      const float *c = io->C + (t0 + t) * io->ldc + g * N;
      for (int64_t j = 0; j <= t; j++) {
        const float *b = io->B + (t0 + j) * io->ldb + g * N;
        float acc = 0.0f;
        for (int64_t s = 0; s < N; s++) acc += c[s] * b[s];
        G[t * L + j] = acc;
      }
    }
    for (int64_t h = g * hpg; h < (g + 1) * hpg; h++) {
      float run = 0.0f;
      for (int64_t t = 0; t < L; t++) {
        d[t] = ops_ssm_softplus(io->dt[(t0 + t) * io->lddt + h] + io->dt_bias[h]);
        run += d[t] * io->A[h];
        cum[t] = run;
      }
      float *S = state + h * P * N;
      for (int64_t t = 0; t < L; t++) {
        const float *c = io->C + (t0 + t) * io->ldc + g * N;
        const float *xt = io->x + (t0 + t) * io->ldx + h * P;
        float *yt = io->y + (t0 + t) * io->ldy + h * P;
        const float e0 = expf(cum[t]);
        for (int64_t p = 0; p < P; p++) {
          const float *Sp = S + p * N;
          float acc = 0.0f;
          for (int64_t s = 0; s < N; s++) acc += Sp[s] * c[s];
          yt[p] = e0 * acc + io->D[h] * xt[p];
        }
        for (int64_t j = 0; j <= t; j++) {
          const float m = expf(cum[t] - cum[j]) * d[j] * G[t * L + j];
          const float *xj = io->x + (t0 + j) * io->ldx + h * P;
          for (int64_t p = 0; p < P; p++) yt[p] += m * xj[p];
        }
      }
      /* S = exp(c_L) S + sum_j exp(c_L - c_j) d_j x_j B_j^T */
      const float eL = expf(cum[L - 1]);
      for (int64_t i = 0; i < P * N; i++) S[i] *= eL;
      for (int64_t j = 0; j < L; j++) {
        const float wj = expf(cum[L - 1] - cum[j]) * d[j];
        const float *xj = io->x + (t0 + j) * io->ldx + h * P;
        const float *b = io->B + (t0 + j) * io->ldb + g * N;
        for (int64_t p = 0; p < P; p++) {
          const float f = wj * xj[p];
          float *Sp = S + p * N;
          for (int64_t s = 0; s < N; s++) Sp[s] += f * b[s];
        }
      }
    }
  }
}

void ops_ssm_scan_chunked(const ops_ssm_io *io, float *state, int64_t chunk, float *work) {
  if (chunk < 1) chunk = 1;
  if (chunk > OPS_SSM_MAX_CHUNK) chunk = OPS_SSM_MAX_CHUNK;
  for (int64_t t0 = 0; t0 < io->n; t0 += chunk) {
    const int64_t L = io->n - t0 < chunk ? io->n - t0 : chunk;
    ssm_chunk(io, state, t0, L, work);
  }
}

void ops_ssm_gated_norm(float *y, int64_t ldy, const float *z, int64_t ldz, int64_t n, int64_t d_inner,
                        int64_t n_group, const float *w, float eps) {
  const int64_t gs = d_inner / n_group;
  for (int64_t t = 0; t < n; t++) {
    float *yt = y + t * ldy;
    const float *zt = z + t * ldz;
    for (int64_t i = 0; i < d_inner; i++) yt[i] *= zt[i] / (1.0f + expf(-zt[i]));
    for (int64_t g = 0; g < n_group; g++) {
      float *v = yt + g * gs;
      float ss = 0.0f;
      for (int64_t i = 0; i < gs; i++) ss += v[i] * v[i];
      const float inv = 1.0f / sqrtf(ss / (float)gs + eps);
      for (int64_t i = 0; i < gs; i++) v[i] = v[i] * inv * w[g * gs + i];
    }
  }
}
