/*
 * testgen_whisper.c - random-weight whisper.cpp ggml files (see
 * testgen_whisper.h). Tensors are generated in file order from one
 * xorshift64* stream seeded from g->seed, so a seed names a model; the
 * tensor order is the converter's (encoder, then decoder, block by block).
 */
#include "model/testgen_whisper.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"

/* The format's constants (speech/whisper_file.h reads them; model/ sits
 * below speech/, so they are restated here). */
#define WHISPER_FILE_MAGIC 0x67676d6cu
#define WHISPER_N_FFT 400
#define WHISPER_N_FREQ 201

whisper_testgen whisper_testgen_small(void) {
  whisper_testgen g = {.n_vocab = 300, .n_audio_ctx = 32, .n_state = 64, .n_audio_head = 4, .n_audio_layer = 2,
                       .n_text_ctx = 16, .n_text_head = 4, .n_text_layer = 2, .n_mels = 80, .n_tokens = 300,
                       .type = TENSOR_TYPE_F32, .seed = 1};
  return g;
}

int whisper_testgen_shape(const char *name, uint32_t type, whisper_testgen *out) {
  static const struct {
    const char *name;
    int32_t n_vocab, n_state, n_head, n_enc, n_dec, n_mels;
  } shapes[] = {
      {"tiny", 51865, 384, 6, 4, 4, 80},        {"base", 51865, 512, 8, 6, 6, 80},
      {"base.en", 51864, 512, 8, 6, 6, 80},
      /* real vocabularies and windows, a few MB: the API tests' models */
      {"nano.en", 51864, 64, 2, 1, 1, 80},       {"nano", 51865, 64, 2, 1, 1, 80},
      {"large-v3", 51866, 1280, 20, 32, 32, 128}, {"large-v3-turbo", 51866, 1280, 20, 32, 4, 128},
  };
  if (strcmp(name, "small") == 0 || strcmp(name, "micro") == 0) {
    *out = whisper_testgen_small();
    out->type = type;
    if (name[0] == 'm') { /* a few kB: fuzz seeds */
      out->n_state = 32, out->n_audio_head = out->n_text_head = 2, out->n_audio_layer = out->n_text_layer = 1;
      out->n_mels = 2, out->n_audio_ctx = out->n_text_ctx = 2, out->n_vocab = out->n_tokens = 8;
    }
    return 0;
  }
  for (size_t i = 0; i < ARRAY_LEN(shapes); i++) {
    if (strcmp(shapes[i].name, name) != 0) continue;
    whisper_testgen g = {.n_vocab = shapes[i].n_vocab, .n_audio_ctx = 1500, .n_state = shapes[i].n_state,
                         .n_audio_head = shapes[i].n_head, .n_audio_layer = shapes[i].n_enc, .n_text_ctx = 448,
                         .n_text_head = shapes[i].n_head, .n_text_layer = shapes[i].n_dec,
                         .n_mels = shapes[i].n_mels, .n_tokens = 50257, .type = type, .seed = 1};
    *out = g;
    return 0;
  }
  return err_set(ERR_NOT_FOUND, "whisper testgen: unknown shape '%s' (small, micro, nano, nano.en, tiny, "
                 "base, base.en, large-v3, large-v3-turbo)", name);
}

typedef struct wgen {
  buf *b;
  uint64_t rng;
} wgen;

static float uni(wgen *s) { /* in [-1, 1) */
  s->rng ^= s->rng >> 12;
  s->rng ^= s->rng << 25;
  s->rng ^= s->rng >> 27;
  uint64_t r = s->rng * 0x2545f4914f6cdd1dull;
  return (float)((double)(r >> 11) * 0x1.0p-52 - 1.0);
}

static int put_i32(buf *b, int32_t v) {
  uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)((uint32_t)v >> 24)};
  return buf_append(b, x, 4);
}

static int put_f32s(buf *b, const float *v, size_t n) { return buf_append(b, v, n * sizeof *v); } /* little-endian hosts */

/* One tensor: header, then values center + amp * U(-1, 1) (or vals when
 * not NULL) stored as type. dims in ggml order. */
static int put_tensor(wgen *s, const char *name, uint32_t type, int n_dims, const int64_t *dims, const float *vals,
                      float center, float amp) {
  int64_t n = 1;
  for (int d = 0; d < n_dims; d++) n *= dims[d];
  size_t row_bytes = 0;
  if (tensor_type_row_bytes(type, dims[0], &row_bytes))
    return err_set(ERR_RANGE, "whisper testgen: tensor '%s': rows of %lld do not fit type %s", name,
                   (long long)dims[0], tensor_type_name(type));
  float *f = malloc((size_t)n * sizeof *f);
  if (!f) return err_set(ERR_NOMEM, "whisper testgen: out of memory");
  for (int64_t i = 0; i < n; i++) f[i] = vals ? vals[i] : center + amp * uni(s);
  int rc = put_i32(s->b, n_dims);
  if (!rc) rc = put_i32(s->b, (int32_t)strlen(name));
  if (!rc) rc = put_i32(s->b, (int32_t)type);
  for (int d = 0; !rc && d < n_dims; d++) rc = put_i32(s->b, (int32_t)dims[d]);
  if (!rc) rc = buf_append(s->b, name, strlen(name));
  if (!rc && type == TENSOR_TYPE_F32) rc = put_f32s(s->b, f, (size_t)n);
  else if (!rc) {
    int64_t rows = n / dims[0];
    uint8_t *q = malloc(row_bytes ? row_bytes : 1);
    if (!q) rc = ERR_NOMEM;
    for (int64_t r = 0; !rc && r < rows; r++) {
      ref_quantize_row(type, f + r * dims[0], q, dims[0]);
      rc = buf_append(s->b, q, row_bytes);
    }
    free(q);
  }
  free(f);
  return rc ? err_set(rc, "whisper testgen: cannot write '%s'", name) : 0;
}

/* A triangular mel filter bank [n_mels][201] over 0..8 kHz (HTK mel scale),
 * each filter normalized to unit area as Whisper's (Slaney) bank is. */
static void mel_bank(float *fb, int n_mels) {
  double mmax = 2595.0 * log10(1.0 + 8000.0 / 700.0);
  for (int m = 0; m < n_mels; m++) {
    double hz[3];
    for (int k = 0; k < 3; k++) hz[k] = 700.0 * (pow(10.0, mmax * (m + k) / (n_mels + 1) / 2595.0) - 1.0);
    for (int j = 0; j < WHISPER_N_FREQ; j++) {
      double f = j * 16000.0 / WHISPER_N_FFT, w = 0;
      if (f > hz[0] && f < hz[2]) w = f <= hz[1] ? (f - hz[0]) / (hz[1] - hz[0]) : (hz[2] - f) / (hz[2] - hz[1]);
      fb[(size_t)m * WHISPER_N_FREQ + (size_t)j] = (float)(w * 2.0 / (hz[2] - hz[0]));
    }
  }
}

/* Whisper's sinusoidal positions [len][ch]: sin over the first half of the
 * channels, cos over the second, timescales 1..10000. */
static void sinusoids(float *pe, int len, int ch) {
  int half = ch / 2;
  double inc = log(10000.0) / (half > 1 ? half - 1 : 1);
  for (int p = 0; p < len; p++)
    for (int i = 0; i < half; i++) {
      double a = p * exp(-inc * i);
      pe[(size_t)p * (size_t)ch + (size_t)i] = (float)sin(a);
      pe[(size_t)p * (size_t)ch + (size_t)(half + i)] = (float)cos(a);
    }
}

static int put_block(wgen *s, const whisper_testgen *g, const char *pfx, int i, bool cross) {
  const int64_t S = g->n_state;
  const float ws = sqrtf(3.0f / (float)S), ws4 = sqrtf(3.0f / (float)(4 * S));
  char nm[160];
  int rc = 0;
#define T1(suffix, c, a)                                                   \
  do {                                                                     \
    int64_t d_[1] = {S};                                                   \
    snprintf(nm, sizeof nm, "%s.%d.%s", pfx, i, suffix);                   \
    if (!rc) rc = put_tensor(s, nm, TENSOR_TYPE_F32, 1, d_, NULL, c, a);   \
  } while (0)
#define T2(suffix, d0, d1, a)                                              \
  do {                                                                     \
    int64_t d_[2] = {d0, d1};                                              \
    snprintf(nm, sizeof nm, "%s.%d.%s", pfx, i, suffix);                   \
    if (!rc) rc = put_tensor(s, nm, g->type, 2, d_, NULL, 0, a);           \
  } while (0)
  const char *att[2] = {"attn", "cross_attn"};
  for (int k = 0; k < (cross ? 2 : 1); k++) {
    char x[64];
    snprintf(x, sizeof x, "%s_ln.weight", att[k]); T1(x, 1.0f, 0.1f);
    snprintf(x, sizeof x, "%s_ln.bias", att[k]); T1(x, 0.0f, 0.1f);
    snprintf(x, sizeof x, "%s.query.weight", att[k]); T2(x, S, S, ws);
    snprintf(x, sizeof x, "%s.query.bias", att[k]); T1(x, 0.0f, 0.1f);
    snprintf(x, sizeof x, "%s.key.weight", att[k]); T2(x, S, S, ws);
    snprintf(x, sizeof x, "%s.value.weight", att[k]); T2(x, S, S, ws);
    snprintf(x, sizeof x, "%s.value.bias", att[k]); T1(x, 0.0f, 0.1f);
    snprintf(x, sizeof x, "%s.out.weight", att[k]); T2(x, S, S, ws);
    snprintf(x, sizeof x, "%s.out.bias", att[k]); T1(x, 0.0f, 0.1f);
  }
  T1("mlp_ln.weight", 1.0f, 0.1f);
  T1("mlp_ln.bias", 0.0f, 0.1f);
  T2("mlp.0.weight", S, 4 * S, ws);
  {
    int64_t d_[1] = {4 * S};
    snprintf(nm, sizeof nm, "%s.%d.mlp.0.bias", pfx, i);
    if (!rc) rc = put_tensor(s, nm, TENSOR_TYPE_F32, 1, d_, NULL, 0, 0.1f);
  }
  T2("mlp.2.weight", 4 * S, S, ws4);
  T1("mlp.2.bias", 0.0f, 0.1f);
#undef T1
#undef T2
  return rc;
}

int whisper_testgen_write_buf(const whisper_testgen *g, buf *out, size_t *tensors_at) {
  if (g->n_tokens > g->n_vocab || g->n_state % g->n_audio_head || g->n_state % g->n_text_head || g->n_state < 2)
    return err_set(ERR_RANGE, "whisper testgen: inconsistent shape");
  wgen s = {out, g->seed * 0x9e3779b97f4a7c15ull + 0x77687370ull};
  if (!s.rng) s.rng = 1;
  int32_t ftype = g->type == TENSOR_TYPE_F32 ? 0 : g->type == TENSOR_TYPE_F16 ? 1 : g->type == TENSOR_TYPE_Q4_0 ? 2
                  : g->type == TENSOR_TYPE_Q4_1 ? 3 : g->type == TENSOR_TYPE_Q8_0 ? 7
                  : g->type == TENSOR_TYPE_Q5_0 ? 8 : g->type == TENSOR_TYPE_Q5_1 ? 9 : -1;
  if (ftype < 0)
    return err_set(ERR_UNSUPPORTED, "whisper testgen: type %s is not a whisper file type", tensor_type_name(g->type));
  if (ftype > 1) ftype += 2 * 1000; /* ggml quantization version 2, as whisper.cpp's quantizer writes */
  const int32_t S = g->n_state;
  int32_t hp[12] = {(int32_t)WHISPER_FILE_MAGIC, g->n_vocab, g->n_audio_ctx, S, g->n_audio_head, g->n_audio_layer,
                    g->n_text_ctx, S, g->n_text_head, g->n_text_layer, g->n_mels, ftype};
  int rc = 0;
  for (int i = 0; !rc && i < 12; i++) rc = put_i32(out, hp[i]);
  /* filters */
  size_t nf = (size_t)g->n_mels * WHISPER_N_FREQ;
  float *fb = malloc(nf * sizeof *fb);
  if (!fb) return err_set(ERR_NOMEM, "whisper testgen: out of memory");
  mel_bank(fb, g->n_mels);
  if (!rc) rc = put_i32(out, g->n_mels);
  if (!rc) rc = put_i32(out, WHISPER_N_FREQ);
  if (!rc) rc = put_f32s(out, fb, nf);
  free(fb);
  /* vocabulary */
  if (!rc) rc = put_i32(out, g->n_tokens);
  for (int32_t i = 0; !rc && i < g->n_tokens; i++) {
    char t[24];
    int len = 1;
    if (i < 256) t[0] = (char)i;
    else len = snprintf(t, sizeof t, " w%d", (int)i);
    rc = put_i32(out, len);
    if (!rc) rc = buf_append(out, t, (size_t)len);
  }
  if (rc) return err_set(rc, "whisper testgen: out of memory");
  if (tensors_at) *tensors_at = out->len;
  uint32_t conv_t = g->type == TENSOR_TYPE_F32 ? TENSOR_TYPE_F32 : TENSOR_TYPE_F16;
  float *pe = malloc((size_t)g->n_audio_ctx * (size_t)S * sizeof *pe);
  if (!pe) return err_set(ERR_NOMEM, "whisper testgen: out of memory");
  sinusoids(pe, g->n_audio_ctx, S);
  int64_t d_pe[2] = {S, g->n_audio_ctx}, d_c1[3] = {3, g->n_mels, S}, d_c2[3] = {3, S, S}, d_b[2] = {1, S},
          d_s[1] = {S};
  rc = put_tensor(&s, "encoder.positional_embedding", TENSOR_TYPE_F32, 2, d_pe, pe, 0, 0);
  free(pe);
  if (!rc) rc = put_tensor(&s, "encoder.conv1.weight", conv_t, 3, d_c1, NULL, 0, sqrtf(3.0f / (3.0f * (float)g->n_mels)));
  if (!rc) rc = put_tensor(&s, "encoder.conv1.bias", TENSOR_TYPE_F32, 2, d_b, NULL, 0, 0.1f);
  if (!rc) rc = put_tensor(&s, "encoder.conv2.weight", conv_t, 3, d_c2, NULL, 0, sqrtf(3.0f / (3.0f * (float)S)));
  if (!rc) rc = put_tensor(&s, "encoder.conv2.bias", TENSOR_TYPE_F32, 2, d_b, NULL, 0, 0.1f);
  for (int i = 0; !rc && i < g->n_audio_layer; i++) rc = put_block(&s, g, "encoder.blocks", i, false);
  if (!rc) rc = put_tensor(&s, "encoder.ln_post.weight", TENSOR_TYPE_F32, 1, d_s, NULL, 1.0f, 0.1f);
  if (!rc) rc = put_tensor(&s, "encoder.ln_post.bias", TENSOR_TYPE_F32, 1, d_s, NULL, 0, 0.1f);
  int64_t d_dpe[2] = {S, g->n_text_ctx}, d_te[2] = {S, g->n_vocab};
  if (!rc) rc = put_tensor(&s, "decoder.positional_embedding", TENSOR_TYPE_F32, 2, d_dpe, NULL, 0, 0.5f);
  /* token embeddings double as the output layer: rows of norm ~4 so logits spread over a few units */
  if (!rc) rc = put_tensor(&s, "decoder.token_embedding.weight", g->type, 2, d_te, NULL, 0, sqrtf(48.0f / (float)S));
  for (int i = 0; !rc && i < g->n_text_layer; i++) rc = put_block(&s, g, "decoder.blocks", i, true);
  if (!rc) rc = put_tensor(&s, "decoder.ln.weight", TENSOR_TYPE_F32, 1, d_s, NULL, 1.0f, 0.1f);
  if (!rc) rc = put_tensor(&s, "decoder.ln.bias", TENSOR_TYPE_F32, 1, d_s, NULL, 0, 0.1f);
  return rc;
}

int whisper_testgen_write(const whisper_testgen *g, const char *path) {
  buf b = BUF_INIT;
  int rc = whisper_testgen_write_buf(g, &b, NULL);
  if (rc) {
    buf_free(&b);
    return rc;
  }
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *fp = fopen(tmp, "wb");
  bool ok = fp && fwrite(b.data, 1, b.len, fp) == b.len;
  if (fp && fclose(fp) != 0) ok = false;
  buf_free(&b);
  if (!ok || rename(tmp, path) != 0) {
    remove(tmp);
    return err_set(ERR_IO, "whisper testgen: cannot write '%s'", path);
  }
  return 0;
}
