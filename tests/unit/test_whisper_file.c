/*
 * test_whisper_file.c - the whisper.cpp ggml reader (speech/whisper_file.c)
 * on files from the project's writer (model/testgen_whisper.c): what it
 * reads back against the format's byte layout, and the hostile-file
 * catalogue: every cut, wrong counts, bad filter banks, unknown types, each
 * a clean error naming what is wrong.
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "kernels/tensor_type.h"
#include "model/testgen_whisper.h"
#include "speech/whisper_file.h"
#include "test.h"

static int32_t rd32(const char *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}
static void wr32(char *p, int32_t v) { memcpy(p, &v, 4); }

/* Offset of the header of the tensor called name in b (its name is found
 * in the bytes and the header walked back over n_dims dims). */
static size_t header_of(const buf *b, const char *name, int n_dims) {
  const char *p = memmem(b->data, b->len, name, strlen(name));
  return p ? (size_t)(p - b->data) - 12 - 4 * (size_t)n_dims : 0;
}

static int open_buf(const buf *b) {
  whisper_file *f = NULL;
  err_clear();
  int rc = whisper_file_open_mem(b->data, b->len, &f);
  if (!rc) whisper_file_close(f);
  return rc;
}

TEST(whisper_file_reads_what_was_written) {
  whisper_testgen g = whisper_testgen_small();
  buf b = BUF_INIT;
  size_t tat = 0;
  ASSERT_INT_EQ(whisper_testgen_write_buf(&g, &b, &tat), 0);
  whisper_file *f = NULL;
  ASSERT_INT_EQ(whisper_file_open_mem(b.data, b.len, &f), 0);
  const whisper_hparams *h = whisper_file_hparams(f);
  EXPECT_INT_EQ(h->n_vocab, 300);
  EXPECT_INT_EQ(h->n_audio_ctx, 32);
  EXPECT_INT_EQ(h->n_audio_state, 64);
  EXPECT_INT_EQ(h->n_text_ctx, 16);
  EXPECT_INT_EQ(h->n_mels, 80);
  EXPECT_INT_EQ(h->ftype, 0);
  /* the filter bank is the 80 x 201 floats after the 13 header words */
  EXPECT_MEM_EQ(whisper_file_mel_filters(f), b.data + 56, 80 * 201 * 4);
  EXPECT_INT_EQ(whisper_file_n_tokens(f), 300);
  size_t len = 0;
  const char *t = whisper_file_token(f, 65, &len);
  ASSERT_TRUE(t != NULL);
  EXPECT_INT_EQ(len, 1);
  EXPECT_INT_EQ(t[0], 'A');
  t = whisper_file_token(f, 299, &len);
  EXPECT_INT_EQ(len, 5);
  EXPECT_TRUE(t && memcmp(t, " w299", 5) == 0);
  EXPECT_TRUE(whisper_file_token(f, 300, &len) == NULL);
  /* 11 global tensors, 15 per encoder block, 24 per decoder block */
  EXPECT_INT_EQ(whisper_file_n_tensors(f), 11 + 15 * 2 + 24 * 2);
  const whisper_tensor *c1 = whisper_file_find(f, "encoder.conv1.weight");
  ASSERT_TRUE(c1 != NULL);
  EXPECT_INT_EQ(c1->n_dims, 3);
  EXPECT_INT_EQ(c1->dims[0], 3);
  EXPECT_INT_EQ(c1->dims[1], 80);
  EXPECT_INT_EQ(c1->dims[2], 64);
  EXPECT_INT_EQ(c1->n_bytes, 3 * 80 * 64 * 4);
  /* the first tensor's data follows its header: 3 words, 2 dims, the name */
  const whisper_tensor *pe = whisper_file_tensor_at(f, 0);
  EXPECT_STR_EQ(pe->name, "encoder.positional_embedding");
  EXPECT_INT_EQ(pe->offset, tat + 20 + strlen("encoder.positional_embedding"));
  EXPECT_INT_EQ(rd32(b.data + tat + 12), 64);
  EXPECT_INT_EQ(rd32(b.data + tat + 16), 32);
  /* position 0 of the sinusoids: sin 0 = 0 in the first half, cos 0 = 1 in the second */
  float v[2];
  memcpy(v, (const char *)pe->data, 4);
  memcpy(v + 1, (const char *)pe->data + 32 * 4, 4);
  EXPECT_NEAR(v[0], 0.0, 1e-7);
  EXPECT_NEAR(v[1], 1.0, 1e-7);
  const whisper_tensor *te = whisper_file_find(f, "decoder.token_embedding.weight");
  ASSERT_TRUE(te != NULL);
  EXPECT_INT_EQ(te->dims[1], 300);
  EXPECT_TRUE(whisper_file_find(f, "decoder.blocks.2.attn_ln.weight") == NULL);
  EXPECT_TRUE(te->offset + te->n_bytes <= b.len);
  whisper_file_close(f);
  buf_free(&b);
}

TEST(whisper_file_types_and_mmap) {
  static const uint32_t types[] = {TENSOR_TYPE_F16, TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q5_0,
                                   TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q8_0};
  static const int ftypes[] = {1, 2, 3, 8, 9, 7};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    whisper_testgen g = whisper_testgen_small();
    g.type = types[i];
    char path[512];
    snprintf(path, sizeof path, "%s/w-%s.bin", test_tmpdir(), tensor_type_name(types[i]));
    ASSERT_INT_EQ(whisper_testgen_write(&g, path), 0);
    whisper_file *f = NULL;
    int rc = whisper_file_open(path, &f);
    TEST_CHECK_(rc == 0, 1, "%s: %s", tensor_type_name(types[i]), err_detail());
    EXPECT_INT_EQ(whisper_file_hparams(f)->ftype, ftypes[i]);
    EXPECT_INT_EQ(whisper_file_hparams(f)->qnt_version, types[i] == TENSOR_TYPE_F16 ? 0 : 2);
    EXPECT_INT_EQ(whisper_file_find(f, "encoder.blocks.1.mlp.0.weight")->type, types[i]);
    EXPECT_INT_EQ(whisper_file_find(f, "encoder.conv2.weight")->type, TENSOR_TYPE_F16);
    EXPECT_INT_EQ(whisper_file_find(f, "encoder.conv2.bias")->type, TENSOR_TYPE_F32);
    whisper_file_close(f);
  }
  whisper_file *f = NULL;
  EXPECT_INT_EQ(whisper_file_open("/nonexistent/ggml-base.en.bin", &f), ERR_IO);
  EXPECT_STR_CONTAINS(err_detail(), "/nonexistent/ggml-base.en.bin");
}

/* Every prefix of a micro file is refused cleanly. */
TEST(whisper_file_hostile_truncated) {
  whisper_testgen g;
  ASSERT_INT_EQ(whisper_testgen_shape("micro", TENSOR_TYPE_Q8_0, &g), 0);
  buf b = BUF_INIT;
  ASSERT_INT_EQ(whisper_testgen_write_buf(&g, &b, NULL), 0);
  ASSERT_INT_EQ(open_buf(&b), 0);
  size_t full = b.len;
  int n_corrupt = 0;
  for (size_t cut = 0; cut < full; cut += cut < 4000 ? 1 : 7) {
    char *p = malloc(cut ? cut : 1);
    memcpy(p, b.data, cut);
    whisper_file *f = NULL;
    err_clear();
    int rc = whisper_file_open_mem(p, cut, &f);
    free(p);
    TEST_CHECK_(rc != 0, 1, "a file cut at %zu of %zu bytes opened", cut, full);
    if (f) whisper_file_close(f);
    TEST_CHECK_(strstr(err_detail(), "whisper file") != NULL, 1, "cut at %zu: detail '%s'", cut, err_detail());
    n_corrupt += rc == ERR_CORRUPT;
  }
  EXPECT_INT_GT(n_corrupt, 1000);
  /* trailing bytes that are not a whole tensor header */
  buf_append(&b, "\1\0\0", 3);
  EXPECT_INT_EQ(open_buf(&b), ERR_CORRUPT);
  EXPECT_STR_CONTAINS(err_detail(), "truncated");
  buf_free(&b);
}

TEST(whisper_file_hostile_catalogue) {
  whisper_testgen g = whisper_testgen_small();
  buf orig = BUF_INIT;
  size_t tat = 0;
  ASSERT_INT_EQ(whisper_testgen_write_buf(&g, &orig, &tat), 0);
  const size_t vocab_at = 56 + 80 * 201 * 4;
  size_t c1 = header_of(&orig, "encoder.conv1.weight", 3);
  ASSERT_INT_GT(c1, tat);
  static const struct {
    const char *what;
    int field; /* 0 = offset below is absolute; 1 = relative to the first tensor; 2 = to conv1's header */
    size_t off;
    int32_t value;
    int rc;
    const char *detail;
  } cases[] = {
      {"bad magic", 0, 0, 0x46554747, ERR_PARSE, "not a whisper ggml file"},
      {"n_vocab 0", 0, 4, 0, ERR_RANGE, "n_vocab = 0"},
      {"negative audio ctx", 0, 8, -5, ERR_RANGE, "n_audio_ctx = -5"},
      {"heads not dividing", 0, 16, 3, ERR_RANGE, "n_audio_head 3 does not divide"},
      {"text state differs", 0, 28, 32, ERR_RANGE, "n_text_state 32 differs"},
      {"absurd layer count", 0, 20, 100000, ERR_RANGE, "n_audio_layer = 100000"},
      {"ftype 5", 0, 44, 5, ERR_UNSUPPORTED, "ftype 5"},
      {"mel count != n_mels", 0, 48, 81, ERR_RANGE, "mel filter bank is 81 x 201"},
      {"n_mels != filters", 0, 40, 128, ERR_RANGE, "expected n_mels x 201 = 128 x 201"},
      {"filter length 200", 0, 52, 200, ERR_RANGE, "mel filter bank is 80 x 200"},
      {"vocab count > n_vocab", 0, vocab_at, 301, ERR_TOO_LARGE, "vocabulary count 301"},
      {"vocab count negative", 0, vocab_at, -1, ERR_TOO_LARGE, "vocabulary count -1"},
      {"token longer than the file", 0, vocab_at + 4, 0x7fffffff, ERR_CORRUPT, "token 0"},
      {"tensor type Q6_K", 1, 8, TENSOR_TYPE_Q6_K, ERR_UNSUPPORTED, "'encoder.positional_embedding' has type 14 (Q6_K)"},
      {"tensor type 99", 1, 8, 99, ERR_UNSUPPORTED, "type 99 (unknown)"},
      {"n_dims 5", 1, 0, 5, ERR_RANGE, "n_dims 5"},
      {"n_dims 0", 1, 0, 0, ERR_RANGE, "n_dims 0"},
      {"empty name", 1, 4, 0, ERR_RANGE, "name length 0"},
      {"huge name", 1, 4, 1 << 30, ERR_RANGE, "name length 1073741824"},
      {"dim 0", 1, 12, 0, ERR_RANGE, "dim 0 is 0"},
      {"dim huge", 1, 16, 0x7fffffff, ERR_CORRUPT, "extends past the end"},
      {"conv1 as Q4_0 (rows of 3)", 2, 8, TENSOR_TYPE_Q4_0, ERR_RANGE, "row of 3 is not a multiple of Q4_0's block"},
      {"wrong layer count", 0, 20, 3, ERR_NOT_FOUND, "'encoder.blocks.2.attn_ln.weight' is missing"},
      {"wrong vocab size", 0, 4, 301, ERR_RANGE, "'decoder.token_embedding.weight' has dims [64, 300], expected [64, 301]"},
      {"wrong audio ctx", 0, 8, 31, ERR_RANGE, "'encoder.positional_embedding' has dims [64, 32], expected [64, 31]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    buf b = BUF_INIT;
    buf_append(&b, orig.data, orig.len);
    size_t at = cases[i].off + (cases[i].field == 1 ? tat : cases[i].field == 2 ? c1 : 0);
    wr32(b.data + at, cases[i].value);
    int rc = open_buf(&b);
    TEST_CHECK_(rc == cases[i].rc, 0, "%s: rc %s, expected %s (%s)", cases[i].what, err_name(rc),
                err_name(cases[i].rc), err_detail());
    TEST_CHECK_(strstr(err_detail(), cases[i].detail) != NULL, 0, "%s: detail '%s' lacks '%s'", cases[i].what,
                err_detail(), cases[i].detail);
    buf_free(&b);
  }
  /* a tensor twice: the first tensor's header and data appended again */
  {
    buf b = BUF_INIT;
    buf_append(&b, orig.data, orig.len);
    size_t n = 20 + strlen("encoder.positional_embedding") + 64 * 32 * 4;
    buf_append(&b, orig.data + tat, n);
    EXPECT_INT_EQ(open_buf(&b), ERR_EXISTS);
    EXPECT_STR_CONTAINS(err_detail(), "'encoder.positional_embedding' appears twice");
    buf_free(&b);
  }
  /* a tensor missing: the file cut before the last (decoder.ln.bias) */
  {
    buf b = BUF_INIT;
    buf_append(&b, orig.data, header_of(&orig, "decoder.ln.bias", 1));
    EXPECT_INT_EQ(open_buf(&b), ERR_NOT_FOUND);
    EXPECT_STR_CONTAINS(err_detail(), "'decoder.ln.bias' is missing");
    buf_free(&b);
  }
  buf_free(&orig);
}
