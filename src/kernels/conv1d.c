/*
 * conv1d.c - the causal depthwise convolution with state (conv1d.h): a
 * token-by-token reference and the chunked form the forward pass uses.
 * Both sum the taps in the same order (bias, then k = 0 .. K - 1) in f32,
 * so they agree bit for bit.
 */
#include "kernels/conv1d.h"

#include <string.h>

void ops_conv1d_ref(float *y, const float *x, int64_t n, int64_t n_ch, const float *w, int32_t K, const float *bias,
                    float *state) {
  const int64_t S = K - 1;
  for (int64_t t = 0; t < n; t++) {
    const float *xt = x + t * n_ch;
    for (int64_t c = 0; c < n_ch; c++) {
      float acc = bias ? bias[c] : 0.0f;
      for (int64_t k = 0; k < S; k++) acc += w[c * K + k] * state[k * n_ch + c];
      acc += w[c * K + S] * xt[c];
      y[t * n_ch + c] = acc;
    }
    /* shift: drop the oldest input, append this token's */
    if (S > 0) {
      memmove(state, state + n_ch, (size_t)((S - 1) * n_ch) * sizeof(float));
      memcpy(state + (S - 1) * n_ch, xt, (size_t)n_ch * sizeof(float));
    }
  }
}

void ops_conv1d(float *y, const float *x, int64_t n, int64_t n_ch, const float *w, int32_t K, const float *bias,
                float *state) {
  const int64_t S = K - 1;
  if (n <= 0) return;
  /* the taps transposed to [K][n_ch] rows in blocks of channels, so the
   * inner loop reads w, the input and y contiguously */
  enum { CB = 256 };
  float wt[OPS_CONV1D_MAX_K][CB];
  for (int64_t c0 = 0; c0 < n_ch; c0 += CB) {
    const int64_t nc = n_ch - c0 < CB ? n_ch - c0 : CB;
    for (int64_t k = 0; k < K; k++)
      for (int64_t c = 0; c < nc; c++) wt[k][c] = w[(c0 + c) * K + k];
    for (int64_t t = 0; t < n; t++) {
      float *yt = y + t * n_ch + c0;
      if (bias)
        for (int64_t c = 0; c < nc; c++) yt[c] = bias[c0 + c];
      else
        for (int64_t c = 0; c < nc; c++) yt[c] = 0.0f;
      for (int64_t k = 0; k < K; k++) {
        const int64_t j = t - S + k; /* input time index */
        const float *in = (j >= 0 ? x + j * n_ch : state + (S + j) * n_ch) + c0;
        const float *wk = wt[k];
        for (int64_t c = 0; c < nc; c++) yt[c] += wk[c] * in[c];
      }
    }
  }
  /* new state = the last S inputs of (old state, x) */
  if (S == 0) return;
  if (n >= S) {
    memcpy(state, x + (n - S) * n_ch, (size_t)(S * n_ch) * sizeof(float));
  } else {
    memmove(state, state + n * n_ch, (size_t)((S - n) * n_ch) * sizeof(float));
    memcpy(state + (S - n) * n_ch, x, (size_t)(n * n_ch) * sizeof(float));
  }
}
