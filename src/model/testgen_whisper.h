/*
 * testgen_whisper.h - writes random-weight whisper models in whisper.cpp's
 * ggml format (layout in speech/whisper_file.h), of any shape: the test
 * files the reader, the log-mel front end and the forward pass are checked
 * on (against numpy references in tools/), and benchmark files of real
 * shapes (`parley gen-model --arch whisper --shape base.en`).
 *
 * Tensors are written as whisper.cpp's converter writes them: 1-D tensors,
 * conv biases and positional embeddings F32; conv weights F16 unless the
 * file is all F32; the other matrices in `type` (quantized with the
 * reference quantizer). The encoder's positional embedding is Whisper's
 * sinusoids; the filter bank is a triangular mel bank over the 201 FFT
 * bins; the other weights are seeded uniform noise scaled to keep
 * activations of order one. Tokens are the 256 single bytes and then
 * " wN" (a space and a number: each one a word, as Whisper's tokens
 * for whole words start with a space).
 */
#ifndef PARLEY_MODEL_TESTGEN_WHISPER_H
#define PARLEY_MODEL_TESTGEN_WHISPER_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct whisper_testgen {
  int32_t n_vocab, n_audio_ctx, n_state, n_audio_head, n_audio_layer;
  int32_t n_text_ctx, n_text_head, n_text_layer, n_mels;
  int32_t n_tokens;   /* vocabulary entries written (<= n_vocab) */
  uint32_t type;      /* enum tensor_type of the 2-D matrices */
  uint64_t seed;
} whisper_testgen;

/* A small test shape: n_state 64, 2 + 2 layers of 4 heads, 80 mels,
 * audio context 32, text context 16, vocabulary 300, all F32. */
whisper_testgen whisper_testgen_small(void);
/* A shape by name: "small" (the test shape above), "micro" (n_state 32,
 * one layer each, 2 mels, a few kB: fuzz seeds), or a released model's:
 * "tiny", "base", "base.en", "large-v3", "large-v3-turbo", or "nano.en" /
 * "nano" (real vocabulary sizes, English-only and multilingual, 30 s
 * windows, n_state 64 and one layer each: a few MB, for the servers the
 * API tests start) (no released
 * name collides with "small": whisper small is not offered). 0 and the
 * shape with matrices of type in *out, or ERR_NOT_FOUND. */
int whisper_testgen_shape(const char *name, uint32_t type, whisper_testgen *out);

/* The file's bytes into out; *tensors_at (may be NULL) gets the offset of
 * the first tensor header (for tests that damage it). ERR_RANGE for a
 * shape a type cannot hold. */
int whisper_testgen_write_buf(const whisper_testgen *g, buf *out, size_t *tensors_at);
/* Writes path (path.tmp, then renamed). */
int whisper_testgen_write(const whisper_testgen *g, const char *path);

#endif
