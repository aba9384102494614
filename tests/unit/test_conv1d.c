/*
 * test_conv1d.c - the causal depthwise convolution with state
 * (kernels/conv1d.h): the token-by-token reference and the chunked form
 * against a direct double-precision sum over the whole sequence, fed in
 * chunks of 1, 7, 64 and a length that is not a multiple of the chunk.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/conv1d.h"
#include "test.h"

static uint32_t rng_state = 12345u;
static float frand(void) { /* uniform in [-1, 1) */
  rng_state = rng_state * 1664525u + 1013904223u;
  return (float)((rng_state >> 8) * (1.0 / 8388608.0)) - 1.0f;
}

/* y[t][c] from the definition, with zeros before the sequence. */
static double direct(const float *x, int64_t t, int64_t c, int64_t n_ch, const float *w, int K, const float *bias) {
  double acc = bias ? bias[c] : 0.0;
  for (int k = 0; k < K; k++) {
    int64_t j = t - (K - 1) + k;
    if (j >= 0) acc += (double)w[c * K + k] * x[j * n_ch + c];
  }
  return acc;
}

/* Feeds a length-L sequence in chunks of `chunk` tokens through f and
 * returns the largest error against direct(). */
static double run(void (*f)(float *, const float *, int64_t, int64_t, const float *, int32_t, const float *, float *),
                  const float *x, int64_t L, int64_t n_ch, const float *w, int K, const float *bias, int64_t chunk,
                  float *y) {
  float state[OPS_CONV1D_MAX_K * 300];
  memset(state, 0, sizeof state);
  for (int64_t t0 = 0; t0 < L; t0 += chunk) {
    int64_t m = L - t0 < chunk ? L - t0 : chunk;
    f(y + t0 * n_ch, x + t0 * n_ch, m, n_ch, w, K, bias, state);
  }
  double worst = 0;
  for (int64_t t = 0; t < L; t++)
    for (int64_t c = 0; c < n_ch; c++) {
      double e = fabs(y[t * n_ch + c] - direct(x, t, c, n_ch, w, K, bias));
      if (e > worst) worst = e;
    }
  /* the state is the last K - 1 inputs (zeros where the sequence is shorter) */
  for (int k = 0; k < K - 1; k++)
    for (int64_t c = 0; c < n_ch; c++) {
      int64_t j = L - (K - 1) + k;
      float want = j >= 0 ? x[j * n_ch + c] : 0.0f;
      if (state[k * n_ch + c] != want) return 1e9;
    }
  return worst;
}

TEST(conv1d_chunked_and_token_by_token_agree) {
  const int64_t n_ch = 300; /* more than one channel block of the fast form */
  const int64_t lens[] = {1, 7, 64, 100};
  const int64_t chunks[] = {1, 7, 64, 100};
  const int Ks[] = {1, 3, 4};
  int64_t Lmax = 100;
  float *x = malloc((size_t)(Lmax * n_ch) * sizeof(float)), *w = malloc((size_t)(n_ch * 4) * sizeof(float));
  float *bias = malloc((size_t)n_ch * sizeof(float));
  float *y1 = malloc((size_t)(Lmax * n_ch) * sizeof(float)), *y2 = malloc((size_t)(Lmax * n_ch) * sizeof(float));
  ASSERT_TRUE(x && w && bias && y1 && y2);
  for (int64_t i = 0; i < Lmax * n_ch; i++) x[i] = frand();
  for (int64_t i = 0; i < n_ch * 4; i++) w[i] = frand();
  for (int64_t i = 0; i < n_ch; i++) bias[i] = frand();
  for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
      for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
        const int K = Ks[ki];
        const int64_t L = lens[li], ch = chunks[ci];
        const float *b = ki == 1 ? NULL : bias;
        double e_ref = run(ops_conv1d_ref, x, L, n_ch, w, K, b, 1, y1);
        double e_fast = run(ops_conv1d, x, L, n_ch, w, K, b, ch, y2);
        TEST_CHECK_(e_ref < 1e-5 && e_fast < 1e-5, 0, "K %d length %lld chunk %lld: ref error %g, chunked %g", K,
                    (long long)L, (long long)ch, e_ref, e_fast);
        double d = 0;
        for (int64_t i = 0; i < L * n_ch; i++) d = fmax(d, fabs(y1[i] - y2[i]));
        TEST_CHECK_(d < 1e-6, 0, "K %d length %lld chunk %lld: token by token and chunked differ by %g", K,
                    (long long)L, (long long)ch, d);
      }
  free(x);
  free(w);
  free(bias);
  free(y1);
  free(y2);
}
