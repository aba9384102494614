/*
 * fuzz_whisper_file.c - libFuzzer harness for the whisper.cpp ggml file
 * reader (speech/whisper_file.c): any bytes give 0 or a clean error, never
 * a crash, an out-of-bounds read or a leak. On a file that opens, every
 * token, the filter bank and the first and last byte of every tensor are
 * touched, and every tensor is found again by name, so a view the reader
 * hands out that is not inside the input is caught.
 * Seeds: tests/fuzz/seeds/whisper_file/ (micro files from `parley gen-model
 * --arch whisper --shape micro`, cut and damaged).
 */
#include "fuzz.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "speech/whisper_file.h"

static volatile uint64_t sink;

FUZZ_TARGET(whisper_file) {
  uint8_t *copy = malloc(size ? size : 1); /* exact size: a read past the end is caught */
  if (!copy) return 0;
  memcpy(copy, data, size);
  whisper_file *f = NULL;
  if (whisper_file_open_mem(copy, size, &f) == 0) {
    const whisper_hparams *h = whisper_file_hparams(f);
    const float *fb = whisper_file_mel_filters(f);
    sink += (uint64_t)fb[(size_t)h->n_mels * WHISPER_N_FREQ - 1];
    for (size_t i = 0; i < whisper_file_n_tokens(f); i++) {
      size_t len = 0;
      const char *t = whisper_file_token(f, i, &len);
      if (len) sink += (uint8_t)t[len - 1];
    }
    for (size_t i = 0; i < whisper_file_n_tensors(f); i++) {
      const whisper_tensor *t = whisper_file_tensor_at(f, i);
      const uint8_t *p = t->data;
      if (t->n_bytes) sink += p[0] + p[t->n_bytes - 1];
      if (t->offset + t->n_bytes > size) abort();
      if (whisper_file_find(f, t->name) != t) abort();
    }
    whisper_file_close(f);
  }
  free(copy);
  return 0;
}
