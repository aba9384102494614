/*
 * fuzz_audio.c - libFuzzer harness for audio_decode (audio/audio_decode.c):
 * every container FFmpeg can probe plus the raw G.711 / linear16 path.
 *
 * The whole input is decoded as a file (probed from the bytes, converted to
 * 16 kHz mono float), then as headerless audio in the raw encoding chosen by
 * the first byte (mod 3: linear16, mu-law, A-law; channels 1 + bit 2).
 * Properties checked on success (abort() when broken): at least one frame,
 * rate and channels as asked, no more than the duration limit, and output
 * float samples that are finite and within [-1, 1] (audio.h's promise).
 * A limit of 30 s keeps each run short; an error return is never a failure.
 */
#include "fuzz.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "audio/audio.h"
#include "base/err.h"

static void check(const audio_pcm *p, int rate, int channels, double max_s) {
  if (p->n_frames == 0 || p->rate != rate || p->channels != channels) {
    fprintf(stderr, "invariant broken: %zu frames, %d Hz, %d ch\n", p->n_frames, p->rate, p->channels);
    abort();
  }
  if ((double)p->n_frames > max_s * rate + rate) {
    fprintf(stderr, "invariant broken: %zu frames past the %g s limit\n", p->n_frames, max_s);
    abort();
  }
  if (p->fmt == AUDIO_SAMPLE_F32) {
    const float *x = p->data;
    for (size_t i = 0; i < p->n_frames * (size_t)p->channels; i++)
      if (!isfinite(x[i]) || fabsf(x[i]) > 1.0f) {
        fprintf(stderr, "invariant broken: sample %zu = %g\n", i, (double)x[i]);
        abort();
      }
  }
}

FUZZ_TARGET(audio) {
  audio_pcm p;
  audio_decode_opts o = {.target_rate = 16000, .target_channels = 1, .fmt = AUDIO_SAMPLE_F32, .max_seconds = 30};
  if (audio_decode(data, size, &o, &p) == 0) check(&p, 16000, 1, 30);
  audio_pcm_free(&p);
  if (size > 1) {
    const enum audio_raw raws[] = {AUDIO_RAW_LINEAR16, AUDIO_RAW_MULAW, AUDIO_RAW_ALAW};
    int ch = 1 + ((data[0] >> 2) & 1);
    audio_decode_opts r = {.raw = raws[data[0] % 3], .raw_rate = 8000, .raw_channels = ch, .target_rate = 8000,
                           .fmt = AUDIO_SAMPLE_S16, .split_channels = (data[0] & 8) != 0, .max_seconds = 30};
    if (audio_decode(data + 1, size - 1, &r, &p) == 0) check(&p, 8000, ch, 30);
    audio_pcm_free(&p);
  }
  return 0;
}
