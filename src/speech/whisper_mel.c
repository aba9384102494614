/*
 * whisper_mel.c - the log-mel front end (see whisper_mel.h).
 *
 * The 400-point transform is a direct real DFT against a cos/sin table of
 * one period (k * j mod 400 indexes it), accumulated in double: 201 x 400
 * products per 10 ms frame, about 8 M per second of audio. Power goes
 * straight into the filter products (double), so the only f32 rounding is
 * the final value. The global maximum needs every frame, so log values are
 * written first and clamped in a second pass.
 */
#include "speech/whisper_mel.h"

#include <math.h>
#include <stdlib.h>

#include "base/err.h"
#include "speech/whisper_file.h"

size_t whisper_mel_n_frames(size_t n) { return n / WHISPER_HOP; }

/* Sample i of the reflect-padded signal (i may be negative or past the end). */
static double sample_at(const float *pcm, size_t n, long long i) {
  long long last = (long long)n - 1;
  if (i < 0) i = -i;
  if (i > last) i = 2 * last - i;
  return i >= 0 && i <= last ? (double)pcm[i] : 0.0;
}

int whisper_mel(const float *pcm, size_t n, const float *filters, int n_mels, float *out) {
  if (n_mels < 1) return err_set(ERR_RANGE, "whisper mel: %d mel bins", n_mels);
  size_t n_frames = whisper_mel_n_frames(n);
  if (!n_frames) return 0;
  double *cs = malloc(2 * WHISPER_N_FFT * sizeof *cs);  /* [400] cos, [400] sin of 2 pi j / 400 */
  double *win = malloc(WHISPER_N_FFT * sizeof *win);    /* periodic Hann */
  double *x = malloc(WHISPER_N_FFT * sizeof *x);        /* one windowed frame */
  double *pw = malloc(WHISPER_N_FREQ * sizeof *pw);     /* its power spectrum */
  if (!cs || !win || !x || !pw) {
    free(cs), free(win), free(x), free(pw);
    return err_set(ERR_NOMEM, "whisper mel: out of memory");
  }
  for (int j = 0; j < WHISPER_N_FFT; j++) {
    double a = 2.0 * M_PI * j / WHISPER_N_FFT;
    cs[j] = cos(a);
    cs[WHISPER_N_FFT + j] = sin(a);
    win[j] = 0.5 - 0.5 * cos(a);
  }
  double mx = -INFINITY;
  for (size_t t = 0; t < n_frames; t++) {
    long long start = (long long)(t * WHISPER_HOP) - WHISPER_N_FFT / 2;
    for (int j = 0; j < WHISPER_N_FFT; j++) x[j] = win[j] * sample_at(pcm, n, start + j);
    for (int k = 0; k < WHISPER_N_FREQ; k++) {
      double re = 0, im = 0;
      int idx = 0;
      for (int j = 0; j < WHISPER_N_FFT; j++) {
        re += x[j] * cs[idx];
        im -= x[j] * cs[WHISPER_N_FFT + idx];
        idx += k;
        if (idx >= WHISPER_N_FFT) idx -= WHISPER_N_FFT;
      }
      pw[k] = re * re + im * im;
    }
    for (int m = 0; m < n_mels; m++) {
      const float *fr = filters + (size_t)m * WHISPER_N_FREQ;
      double s = 0;
      for (int k = 0; k < WHISPER_N_FREQ; k++) s += (double)fr[k] * pw[k];
      double l = log10(s > 1e-10 ? s : 1e-10);
      if (l > mx) mx = l;
      out[(size_t)m * n_frames + t] = (float)l;
    }
  }
  /* clamp to max - 8 and scale (the f32 log values add one rounding, ~1e-7) */
  double floor_v = mx - 8.0;
  for (size_t i = 0; i < (size_t)n_mels * n_frames; i++) {
    double l = out[i];
    if (l < floor_v) l = floor_v;
    out[i] = (float)((l + 4.0) / 4.0);
  }
  free(cs), free(win), free(x), free(pw);
  return 0;
}
