/*
 * test_audio_util.h - helpers shared by the audio_ and speech_ tests: a sine
 * generator, a single-bin DFT to find which frequency dominates, and running
 * a shell command for one line of output (whole files: test_read_file).
 */
#ifndef PARLEY_TEST_AUDIO_UTIL_H
#define PARLEY_TEST_AUDIO_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* n frames of a sine at freq Hz, amplitude amp, interleaved over channels. */
static inline float *tau_sine(size_t n, int rate, int channels, double freq, double amp) {
  float *p = malloc(n * (size_t)channels * sizeof(float) + 1);
  for (size_t i = 0; i < n; i++)
    for (int c = 0; c < channels; c++)
      p[i * (size_t)channels + (size_t)c] = (float)(amp * sin(2.0 * M_PI * freq * (double)i / rate));
  return p;
}

/* Power of one frequency over samples x[0], x[stride], ... (n of them),
 * with a Hann window so neighbouring bins do not leak much. */
static inline double tau_power(const float *x, size_t n, size_t stride, int rate, double freq) {
  double re = 0, im = 0;
  for (size_t i = 0; i < n; i++) {
    double w = 0.5 - 0.5 * cos(2.0 * M_PI * (double)i / (double)(n - 1));
    double ph = 2.0 * M_PI * freq * (double)i / rate;
    re += w * x[i * stride] * cos(ph);
    im -= w * x[i * stride] * sin(ph);
  }
  return (re * re + im * im) / ((double)n * (double)n);
}

/* Whether freq dominates: its power exceeds ratio times that at f*0.7 and f*1.4. */
static inline int tau_dominant(const float *x, size_t n, size_t stride, int rate, double freq, double ratio) {
  double p = tau_power(x, n, stride, rate, freq);
  double lo = tau_power(x, n, stride, rate, freq * 0.7);
  double hi = tau_power(x, n, stride, rate, freq * 1.4);
  return p > ratio * lo && p > ratio * hi && p > 1e-6;
}

/* First line printed by a shell command (trailing newline removed), or -1. */
static inline int tau_popen_line(const char *cmd, char *out, size_t cap) {
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  out[0] = '\0';
  char *ok = fgets(out, (int)cap, p);
  int rc = pclose(p);
  if (!ok || rc != 0) return -1;
  out[strcspn(out, "\r\n")] = '\0';
  return 0;
}

#endif
