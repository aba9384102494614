/*
 * whisper_mel.h - Whisper's log-mel spectrogram: the features its encoder
 * reads, computed from 16 kHz mono float samples and the filter bank a
 * whisper file carries (whisper_file_mel_filters).
 *
 * As OpenAI's whisper/audio.py computes it: a 400-sample periodic Hann
 * window every 160 samples (25 ms / 10 ms), the signal reflect-padded by
 * 200 samples each side (torch.stft's center=True), power of the 201 bins
 * of the real DFT, the last frame dropped, the filter bank applied, then
 * log10 of max(x, 1e-10), clamped from below to (global max - 8), and
 * mapped by (x + 4) / 4.
 */
#ifndef PARLEY_SPEECH_WHISPER_MEL_H
#define PARLEY_SPEECH_WHISPER_MEL_H

#include <stddef.h>

#define WHISPER_SAMPLE_RATE 16000
#define WHISPER_HOP 160 /* samples between frames (10 ms) */

/* Frames the spectrogram of n samples has: n / WHISPER_HOP. */
size_t whisper_mel_n_frames(size_t n);

/* out[n_mels][n_frames] (mel-major, as the encoder's conv1 reads it; the
 * caller provides n_mels * whisper_mel_n_frames(n) floats) from pcm[n]
 * and filters[n_mels][201]. Samples beyond the ends are mirrored (x[-i] =
 * x[i], x[n-1+i] = x[n-1-i]); when the audio is shorter than the 200
 * samples a mirror needs, what still falls outside is 0. n = 0 writes
 * nothing. ERR_NOMEM, or ERR_RANGE for n_mels < 1. */
int whisper_mel(const float *pcm, size_t n, const float *filters, int n_mels, float *out);

#endif
