/*
 * test_whisper_mel.c - the log-mel front end (speech/whisper_mel.c) against
 * the numpy reference tools/ref_whisper_mel.py (numpy's FFT on np.pad's
 * reflection, float64) on the filter banks of 80- and 128-bin files from
 * the writer, within 1e-5; and its edge cases.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/err.h"
#include "kernels/tensor_type.h"
#include "model/testgen_whisper.h"
#include "model_ref.h"
#include "speech/whisper_file.h"
#include "speech/whisper_mel.h"
#include "test.h"

#define MEL_REF "tools/ref_whisper_mel.py"

/* A deterministic clip: a chirp from 200 Hz to 3 kHz, a 440 Hz tone that
 * starts half way, a quiet stretch, and a little noise. */
static void clip(float *x, size_t n) {
  uint64_t r = 88172645463325252ull;
  for (size_t i = 0; i < n; i++) {
    double t = (double)i / WHISPER_SAMPLE_RATE;
    double f = 200.0 + 2800.0 * t;
    double v = 0.4 * sin(2 * M_PI * f * t);
    if (i > n / 2) v += 0.3 * sin(2 * M_PI * 440.0 * t);
    if (i > n / 4 && i < n / 3) v *= 0.001;
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    v += 0.01 * ((double)(r >> 11) * 0x1.0p-53 - 0.5);
    x[i] = (float)v;
  }
}

static void check_against_numpy(int n_mels, size_t n) {
  whisper_testgen g = whisper_testgen_small();
  g.n_mels = n_mels;
  char mpath[512], pcm_path[512], out[512], cmd[2048];
  snprintf(mpath, sizeof mpath, "%s/mel%d.bin", test_tmpdir(), n_mels);
  snprintf(pcm_path, sizeof pcm_path, "%s/clip.f32", test_tmpdir());
  snprintf(out, sizeof out, "%s/ref_mel.f32", test_tmpdir());
  ASSERT_INT_EQ(whisper_testgen_write(&g, mpath), 0);
  whisper_file *f = NULL;
  ASSERT_INT_EQ(whisper_file_open(mpath, &f), 0);
  float *x = malloc(n * sizeof *x);
  clip(x, n);
  FILE *fp = fopen(pcm_path, "wb");
  ASSERT_TRUE(fp != NULL);
  fwrite(x, sizeof *x, n, fp);
  fclose(fp);
  size_t nf = whisper_mel_n_frames(n), total = (size_t)n_mels * nf;
  float *mel = malloc(total * sizeof *mel);
  ASSERT_INT_EQ(whisper_mel(x, n, whisper_file_mel_filters(f), n_mels, mel), 0);
  snprintf(cmd, sizeof cmd, REF_PY " " MEL_REF " %s %s %s", mpath, pcm_path, out);
  float *ref = ref_run_floats(cmd, out, total);
  TEST_CHECK_(ref != NULL, 1, "the numpy reference failed or wrote another count than %zu", total);
  double worst = 0, lo = 1e9, hi = -1e9;
  for (size_t i = 0; i < total; i++) {
    double d = fabs((double)mel[i] - (double)ref[i]);
    if (d > worst) worst = d;
    if (ref[i] < lo) lo = ref[i];
    if (ref[i] > hi) hi = ref[i];
  }
  printf("  mel %d bins x %zu frames: max |C - numpy| = %.3g (values %.3f..%.3f)\n", n_mels, nf, worst, lo, hi);
  EXPECT_TRUE(worst <= 1e-5);
  EXPECT_TRUE(hi - lo > 1.0); /* a spectrogram with structure, not a constant */
  free(ref);
  free(mel);
  free(x);
  whisper_file_close(f);
}

TEST(whisper_mel_matches_numpy_80) {
  NEED_REF_PY(MEL_REF);
  check_against_numpy(80, 16000 + 321);
}

TEST(whisper_mel_matches_numpy_128) {
  NEED_REF_PY(MEL_REF);
  check_against_numpy(128, 3 * 16000);
}

TEST(whisper_mel_edges) {
  float fb[2 * WHISPER_N_FREQ];
  for (int i = 0; i < 2 * WHISPER_N_FREQ; i++) fb[i] = i < WHISPER_N_FREQ ? 0.01f : 0.0f;
  float x[480] = {0}, out[2 * 3];
  EXPECT_INT_EQ(whisper_mel_n_frames(0), 0);
  EXPECT_INT_EQ(whisper_mel_n_frames(159), 0);
  EXPECT_INT_EQ(whisper_mel_n_frames(480), 3);
  EXPECT_INT_EQ(whisper_mel(x, 0, fb, 2, out), 0);
  EXPECT_INT_EQ(whisper_mel(x, 480, fb, 0, out), ERR_RANGE);
  /* silence: every bin is log10(1e-10) = -10, so (-10 + 4) / 4 = -1.5 */
  ASSERT_INT_EQ(whisper_mel(x, 480, fb, 2, out), 0);
  for (int i = 0; i < 6; i++) EXPECT_NEAR(out[i], -1.5, 1e-6);
  /* a loud bin 0 and an empty bin 1: bin 1 is clamped at max - 8 */
  for (int i = 0; i < 480; i++) x[i] = (float)sin(2 * M_PI * 1000.0 * i / 16000.0);
  ASSERT_INT_EQ(whisper_mel(x, 480, fb, 2, out), 0);
  double mx = fmax(fmax(out[0], out[1]), out[2]);
  for (int t = 0; t < 3; t++) EXPECT_NEAR(out[3 + t], mx - 2.0, 1e-5);
}
