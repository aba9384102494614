/*
 * whisper_file.h - read whisper.cpp's `ggml` model files (ggml-base.en.bin,
 * ggml-large-v3-turbo-q5_0.bin, ...), memory-mapped, with every count and
 * offset checked before anything is used.
 *
 * Layout (all little-endian int32 unless said; facts from whisper.cpp's
 * models/convert-pt-to-ggml.py and its loader in src/whisper.cpp):
 *   u32 magic 0x67676d6c ("ggml")
 *   11 x i32 hyper-parameters: n_vocab, n_audio_ctx, n_audio_state,
 *     n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head,
 *     n_text_layer, n_mels, ftype (quantized files add 1000 x the ggml
 *     quantization version)
 *   mel filter bank: i32 n_mel, i32 n_fft, n_mel x n_fft f32 (row-major)
 *   vocabulary: i32 count, then count x { u32 len, len bytes }
 *   tensors to the end of the file: { i32 n_dims, i32 name_len, i32 type
 *     (ggml type number), n_dims x i32 dims (ggml order: dims[0] is the row
 *     length), name_len bytes of name, data } with no padding.
 *
 * whisper_file_open checks all of it and then that every tensor the
 * encoder and decoder need is present with the shape the hyper-parameters
 * give (the table in whisper_file.c), so a model built on a file that
 * opened never reads out of bounds. Errors (negative ERR_* with an
 * err_set detail naming the field, the token or the tensor):
 *   ERR_IO          the file cannot be opened, stat'ed or mapped
 *   ERR_PARSE       not a whisper ggml file (magic)
 *   ERR_CORRUPT     truncated: a header field, the filters, a token, a
 *                   tensor header or tensor data extends past the end
 *   ERR_RANGE       a hyper-parameter out of range (<= 0, too large, heads
 *                   not dividing the state), a mel filter bank that is not
 *                   n_mels x 201, n_dims not 1..4, a dim < 1, a row not a
 *                   multiple of the type's block, a name empty, too long or
 *                   with a NUL, a tensor of the wrong shape
 *   ERR_UNSUPPORTED an ftype or tensor type other than F32, F16, Q4_0,
 *                   Q4_1, Q5_0, Q5_1, Q8_0
 *   ERR_TOO_LARGE   a vocabulary count above n_vocab, a size that overflows
 *   ERR_EXISTS      a tensor name twice
 *   ERR_NOT_FOUND   a tensor the model needs is missing
 *   ERR_NOMEM
 *
 * Ownership: the whisper_file owns the mapping and everything it hands out;
 * all stay valid until whisper_file_close. It is immutable after open, so
 * threads may share it. Tensor data points into the mapping and is only
 * byte-aligned (the format has no padding): readers of F32/F16 data copy or
 * use unaligned loads.
 */
#ifndef PARLEY_SPEECH_WHISPER_FILE_H
#define PARLEY_SPEECH_WHISPER_FILE_H

#include <stddef.h>
#include <stdint.h>

#define WHISPER_FILE_MAGIC 0x67676d6cu
#define WHISPER_N_FFT 400              /* STFT window in samples (25 ms at 16 kHz) */
#define WHISPER_N_FREQ (WHISPER_N_FFT / 2 + 1) /* 201 bins of the real FFT */
#define WHISPER_MAX_DIMS 4
#define WHISPER_NAME_MAX 256

typedef struct whisper_hparams {
  int32_t n_vocab;        /* tokens the output layer scores */
  int32_t n_audio_ctx;    /* encoder positions (1500 for 30 s) */
  int32_t n_audio_state;  /* encoder width */
  int32_t n_audio_head;
  int32_t n_audio_layer;
  int32_t n_text_ctx;     /* decoder positions (448) */
  int32_t n_text_state;   /* decoder width (= n_audio_state) */
  int32_t n_text_head;
  int32_t n_text_layer;
  int32_t n_mels;         /* 80, or 128 for large-v3 */
  int32_t ftype;          /* the main weight type as a ggml ftype (0 f32, 1 f16, ...) */
  int32_t qnt_version;    /* ggml quantization version (ftype / 1000 in the file) */
} whisper_hparams;

typedef struct whisper_tensor {
  const char *name;                 /* NUL-terminated copy */
  uint32_t type;                    /* enum tensor_type */
  uint32_t n_dims;                  /* 1..4 */
  int64_t dims[WHISPER_MAX_DIMS];   /* ggml order, unused dims 1 */
  int64_t n_elements;
  uint64_t n_bytes;
  uint64_t offset;                  /* of the data, from the start of the file */
  const void *data;                 /* in the mapping, byte-aligned */
} whisper_tensor;

typedef struct whisper_file whisper_file;

int whisper_file_open(const char *path, whisper_file **out);
/* The same on a caller's buffer, borrowed until close (tests, fuzzing). */
int whisper_file_open_mem(const void *data, size_t size, whisper_file **out);
void whisper_file_close(whisper_file *f);

const whisper_hparams *whisper_file_hparams(const whisper_file *f);
/* The filter bank [n_mels][WHISPER_N_FREQ] f32 (an aligned copy). */
const float *whisper_file_mel_filters(const whisper_file *f);
/* Tokens stored in the file (may be fewer than n_vocab: whisper.cpp names
 * the rest itself), and token i as bytes (not NUL-terminated). */
size_t whisper_file_n_tokens(const whisper_file *f);
const char *whisper_file_token(const whisper_file *f, size_t i, size_t *len);

size_t whisper_file_n_tensors(const whisper_file *f);
const whisper_tensor *whisper_file_tensor_at(const whisper_file *f, size_t i);
/* NULL when absent (no error set). */
const whisper_tensor *whisper_file_find(const whisper_file *f, const char *name);

#endif
