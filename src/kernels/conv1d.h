/*
 * conv1d.h - the causal depthwise 1-D convolution with carried state that
 * short-convolution layers (LFM2) and Mamba's input convolution run.
 *
 * Each of n_ch channels is convolved on its own with a kernel of K taps
 * over the time axis; the output for a token sees that token and the K - 1
 * inputs before it. Those K - 1 earlier inputs are the sequence's state:
 * zeros at the start of a sequence, and after a call the last K - 1 inputs
 * seen, so a prompt may be fed in chunks of any length or one token at a
 * time with the same result. Shapes:
 *   x, y   [n][n_ch]      n consecutive tokens of one sequence, f32
 *   w      [n_ch][K]      the file's layout (GGUF dims [K, n_ch]): tap k of
 *                         channel c at w[c * K + k], tap K - 1 multiplies the
 *                         current token
 *   bias   [n_ch] or NULL
 *   state  [K - 1][n_ch]  oldest input first
 *   y[t][c] = bias[c] + sum_k w[c][k] * in(t - (K - 1) + k)[c],
 *   in(j) = x[j] for j >= 0, state[K - 1 + j] for j < 0.
 * y must not alias x (later outputs still read the inputs).
 */
#ifndef PARLEY_KERNELS_CONV1D_H
#define PARLEY_KERNELS_CONV1D_H

#include <stdint.h>

/* Most taps a kernel may have (LFM2: 3, Mamba: 4). */
#define OPS_CONV1D_MAX_K 8

/* The plain form: token by token, shifting the state after each one. */
void ops_conv1d_ref(float *y, const float *x, int64_t n, int64_t n_ch, const float *w, int32_t K, const float *bias,
                    float *state);
/* The same for a chunk at once: every output row reads the inputs where
 * they are (state or x), the loops run over contiguous channels (the
 * compiler vectorizes them), and the state is rewritten once at the end.
 * Agrees with ops_conv1d_ref to float rounding of the same sums in the
 * same order: bit-identical. */
void ops_conv1d(float *y, const float *x, int64_t n, int64_t n_ch, const float *w, int32_t K, const float *bias,
                float *state);

#endif
