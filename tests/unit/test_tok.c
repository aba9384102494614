/*
 * test_tok.c - tokenizer behaviour on small synthetic vocabularies (built
 * with the GGUF writer, expectations worked out by hand in the comments),
 * load errors, decoding, the streaming detokenizer, round trips and hostile
 * input on the real vocabularies in ../shared/vocab (skipped when absent).
 * Parity with Hugging Face's ids is in test_tok_vocab.c.
 */
#include <stdlib.h>

#include "base/err.h"
#include "gguf/gguf.h"
#include "test.h"
#include "tok/tok.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct vocab_spec {
  const char *model;     /* tokenizer.ggml.model; NULL = omit */
  const char *pre;       /* tokenizer.ggml.pre; NULL = omit */
  const char *const *tokens;
  size_t n;
  const float *scores;   /* NULL = omit */
  size_t n_scores;
  const int32_t *types;  /* NULL = omit */
  const char *const *merges;
  size_t n_merges;
  const char *name;      /* general.name; NULL = omit */
} vocab_spec;

typedef struct built {
  buf data;
  gguf_file *f;
} built;

static int build(const vocab_spec *v, built *b) {
  gguf_writer *w = NULL;
  memset(b, 0, sizeof(*b));
  if (gguf_writer_new(&w)) return -1;
  if (v->name) gguf_writer_add_str(w, "general.name", v->name);
  if (v->model) gguf_writer_add_str(w, "tokenizer.ggml.model", v->model);
  if (v->pre) gguf_writer_add_str(w, "tokenizer.ggml.pre", v->pre);
  if (v->tokens) gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", v->tokens, v->n);
  if (v->scores) gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, v->scores, v->n_scores);
  if (v->types) gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v->types, v->n);
  if (v->merges) gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", v->merges, v->n_merges);
  int rc = gguf_writer_write_buf(w, &b->data);
  gguf_writer_free(w);
  if (rc) return rc;
  return gguf_open_mem(b->data.data, b->data.len, &b->f);
}

static void built_free(built *b) {
  gguf_close(b->f);
  buf_free(&b->data);
}

static bool ids_eq(const tok_ids *got, const int32_t *want, size_t n) {
  if (got->n != n) return false;
  for (size_t i = 0; i < n; i++)
    if (got->ids[i] != want[i]) return false;
  return true;
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
  fprintf(stderr, "  %s:", label);
  for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
  fprintf(stderr, "\n");
}

#define EXPECT_IDS(t, text, flags, ...)                                             \
  do {                                                                              \
    static const int32_t want_[] = {__VA_ARGS__};                                   \
    tok_ids got_ = TOK_IDS_INIT;                                                    \
    int rc_ = tok_encode((t), (text), strlen(text), (flags), &got_);                \
    EXPECT_INT_EQ(rc_, 0);                                                          \
    bool ok_ = ids_eq(&got_, want_, ARRAY_N(want_));                                \
    if (!ok_) {                                                                     \
      fprintf(stderr, "encode \"%s\":\n", text);                                    \
      print_ids("expected", want_, ARRAY_N(want_));                                 \
      print_ids("got", got_.ids, got_.n);                                           \
    }                                                                               \
    EXPECT_TRUE(ok_);                                                               \
    tok_ids_free(&got_);                                                            \
  } while (0)
#define ARRAY_N(a) (sizeof(a) / sizeof((a)[0]))

/* Strict UTF-8 validity, written independently of the stream's decoder. */
static bool utf8_valid(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t len;
    unsigned cp;
    if (c < 0x80) { i++; continue; }
    else if ((c >> 5) == 6) { len = 2; cp = c & 0x1F; }
    else if ((c >> 4) == 14) { len = 3; cp = c & 0x0F; }
    else if ((c >> 3) == 30) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

/* ---- a synthetic SentencePiece vocabulary --------------------------------
 * ids: 0 <unk> (unknown), 1 <s>, 2 </s> (control), 3..258 <0x00>..<0xFF>
 * (byte), 259 "▁", 260 "a", 261 "b", 262 "▁a", 263 "ab", 264 "▁ab",
 * 265 "<|sp|>" (control), 266 "<u>" (user-defined).
 * Scores: "ab" (-1) beats "▁a" (-2), so "▁ab" is built as ▁ + ab. */
#define SPM_N 267
static const char *spm_tokens[SPM_N];
static float spm_scores[SPM_N];
static int32_t spm_types[SPM_N];
static char spm_bytes[256][7];

static void spm_vocab(vocab_spec *v) {
  static const char *const hex = "0123456789ABCDEF";
  spm_tokens[0] = "<unk>"; spm_types[0] = 2;
  spm_tokens[1] = "<s>"; spm_types[1] = 3;
  spm_tokens[2] = "</s>"; spm_types[2] = 3;
  for (int c = 0; c < 256; c++) {
    snprintf(spm_bytes[c], 7, "<0x%c%c>", hex[c >> 4], hex[c & 15]);
    spm_tokens[3 + c] = spm_bytes[c];
    spm_types[3 + c] = 6;
  }
  const char *rest[] = {"\xe2\x96\x81", "a", "b", "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81" "ab", "<|sp|>", "<u>"};
  const float sc[] = {-5, -3, -3, -2, -1, -0.5f, 0, 0};
  const int32_t ty[] = {1, 1, 1, 1, 1, 1, 3, 4};
  for (int i = 0; i < 8; i++) {
    spm_tokens[259 + i] = rest[i];
    spm_scores[259 + i] = sc[i];
    spm_types[259 + i] = ty[i];
  }
  *v = (vocab_spec){.model = "llama", .pre = "default", .tokens = spm_tokens, .n = SPM_N,
                    .scores = spm_scores, .n_scores = SPM_N, .types = spm_types};
}

TEST(tok_spm_merges_and_bytes) {
  vocab_spec v;
  spm_vocab(&v);
  built b;
  ASSERT_INT_EQ(build(&v, &b), 0);
  tok *t = NULL;
  ASSERT_INT_EQ(tok_load(b.f, &t), 0);
  EXPECT_INT_EQ(tok_n_vocab(t), SPM_N);
  EXPECT_STR_EQ(tok_model_name(t), "llama");
  EXPECT_INT_EQ(tok_special(t, TOK_SPECIAL_BOS), 1);
  EXPECT_INT_EQ(tok_special(t, TOK_SPECIAL_EOS), 2);
  EXPECT_INT_EQ(tok_special(t, TOK_SPECIAL_UNK), 0);
  EXPECT_TRUE(tok_add_bos(t));
  EXPECT_FALSE(tok_add_eos(t));
  EXPECT_INT_EQ(tok_token_type(t, 3), TOK_TYPE_BYTE);
  EXPECT_INT_EQ(tok_token_type(t, SPM_N), TOK_TYPE_UNDEFINED);
  EXPECT_INT_EQ(tok_lookup(t, "ab", 2), 263);
  /* "ab ab" -> "▁ab▁ab": ab (score -1) merges first at both places, then ▁+ab */
  EXPECT_IDS(t, "ab ab", 0, 264, 264);
  /* "ba" -> "▁ba": ▁a? no (▁ b a): no pair is a token except none -> ▁ b a */
  EXPECT_IDS(t, "ba", 0, 259, 261, 260);
  /* byte fallback: 'c' = 0x63, 'é' = C3 A9 */
  EXPECT_IDS(t, "c", 0, 259, 3 + 0x63);
  EXPECT_IDS(t, "\xc3\xa9", 0, 259, 3 + 0xC3, 3 + 0xA9);
  /* BOS on request (add_bos defaults to true for SentencePiece) */
  EXPECT_IDS(t, "a", TOK_ENCODE_ADD_SPECIAL, 1, 262);
  EXPECT_IDS(t, "", TOK_ENCODE_ADD_SPECIAL, 1);
  tok_ids none = TOK_IDS_INIT;
  EXPECT_INT_EQ(tok_encode(t, "", 0, 0, &none), 0);
  EXPECT_INT_EQ(none.n, 0);
  tok_ids_free(&none);
  tok_free(t);
  built_free(&b);
}

TEST(tok_spm_specials_and_decode) {
  vocab_spec v;
  spm_vocab(&v);
  built b;
  ASSERT_INT_EQ(build(&v, &b), 0);
  tok *t = NULL;
  ASSERT_INT_EQ(tok_load(b.f, &t), 0);
  /* control token parsed: "a" -> ▁a, <|sp|>, then "b" gets the space prefix
   * again because it follows a special token: ▁ b */
  EXPECT_IDS(t, "a<|sp|>b", TOK_ENCODE_PARSE_SPECIAL, 262, 265, 259, 261);
  /* not parsed: the text is ordinary characters, all byte-fallback */
  EXPECT_IDS(t, "a<|sp|>b", 0, 262, 3 + '<', 3 + '|', 3 + 's', 3 + 'p', 3 + '|', 3 + '>', 261);
  /* user-defined tokens are split out even without PARSE_SPECIAL */
  EXPECT_IDS(t, "a<u>b", 0, 262, 266, 259, 261);

  buf out = BUF_INIT;
  int32_t ids[] = {264, 264};
  EXPECT_INT_EQ(tok_decode(t, ids, 2, TOK_DECODE_STRIP_SPACE, &out), 0);
  EXPECT_STR_EQ(out.data, "ab ab");
  buf_reset(&out);
  EXPECT_INT_EQ(tok_decode(t, ids, 2, 0, &out), 0);
  EXPECT_STR_EQ(out.data, " ab ab");
  buf_reset(&out);
  EXPECT_INT_EQ(tok_decode_piece(t, 3 + 0x41, 0, &out), 0);
  EXPECT_INT_EQ(out.len, 1);
  EXPECT_INT_EQ(out.data[0], 'A');
  buf_reset(&out);
  EXPECT_INT_EQ(tok_decode_piece(t, 265, 0, &out), 0);
  EXPECT_INT_EQ(out.len, 0);
  EXPECT_INT_EQ(tok_decode_piece(t, 265, TOK_DECODE_SPECIAL, &out), 0);
  EXPECT_STR_EQ(out.data, "<|sp|>");
  buf_reset(&out);
  EXPECT_INT_EQ(tok_decode_piece(t, 266, 0, &out), 0);
  EXPECT_STR_EQ(out.data, "<u>");
  buf_reset(&out);
  EXPECT_INT_EQ(tok_decode_piece(t, 0, 0, &out), 0);
  EXPECT_INT_EQ(out.len, 0);
  EXPECT_INT_EQ(tok_decode_piece(t, SPM_N, 0, &out), ERR_RANGE);
  EXPECT_INT_EQ(tok_decode_piece(t, -1, 0, &out), ERR_RANGE);
  EXPECT_TRUE(tok_is_eog(t, 2));
  EXPECT_FALSE(tok_is_eog(t, 1));
  EXPECT_FALSE(tok_is_eog(t, 264));
  buf_free(&out);
  tok_free(t);
  built_free(&b);
}

/* ---- a synthetic byte-level BPE vocabulary -------------------------------
 * 0 a, 1 b, 2 c, 3 Ġ (space), 4 ab, 5 Ġa, 6 Ġab, 7 <|eot|> (control), 8 Ċ (\n)
 * merges by rank: 0 "a b", 1 "Ġ a", 2 "Ġa b". */
static const char *const bpe_tokens[] = {"a", "b", "c", "\xc4\xa0", "ab", ("\xc4\xa0" "a"), ("\xc4\xa0" "ab"), "<|eot|>", "\xc4\x8a"};
static const int32_t bpe_types[] = {1, 1, 1, 1, 1, 1, 1, 3, 1};
static const char *const bpe_merges[] = {"a b", "\xc4\xa0 a", ("\xc4\xa0" "a b")};

TEST(tok_bpe_merges_by_rank) {
  vocab_spec v = {.model = "gpt2", .pre = "gpt-2", .tokens = bpe_tokens, .n = 9, .types = bpe_types,
                  .merges = bpe_merges, .n_merges = 3};
  built b;
  ASSERT_INT_EQ(build(&v, &b), 0);
  tok *t = NULL;
  ASSERT_INT_EQ(tok_load(b.f, &t), 0);
  EXPECT_STR_EQ(tok_model_name(t), "gpt2");
  EXPECT_STR_EQ(tok_pre_name(t), "gpt-2");
  EXPECT_FALSE(tok_add_bos(t));
  /* pre-tokens "ab" " ab" " c"; in "Ġab" the pair a+b (rank 0) is merged
   * before Ġ+a (rank 1), and "Ġ ab" is no merge: Ġ, ab */
  EXPECT_IDS(t, "ab ab c", 0, 4, 3, 4, 3, 2);
  EXPECT_IDS(t, " a", 0, 5);
  EXPECT_IDS(t, "a\n", 0, 0, 8);
  EXPECT_IDS(t, "<|eot|>", TOK_ENCODE_PARSE_SPECIAL | TOK_ENCODE_ADD_SPECIAL, 7);
  /* a byte with no token of its own is dropped (llama.cpp does the same) */
  tok_ids ids = TOK_IDS_INIT;
  EXPECT_INT_EQ(tok_encode(t, "d", 1, 0, &ids), 0);
  EXPECT_INT_EQ(ids.n, 0);
  tok_ids_free(&ids);

  buf out = BUF_INIT;
  int32_t seq[] = {4, 3, 4, 3, 2, 8};
  EXPECT_INT_EQ(tok_decode(t, seq, 6, TOK_DECODE_STRIP_SPACE, &out), 0);
  EXPECT_STR_EQ(out.data, "ab ab c\n"); /* BPE has no space prefix to strip */
  buf_free(&out);
  tok_free(t);
  built_free(&b);
}

TEST(tok_load_errors) {
  tok *t = (tok *)1;
  vocab_spec v;
  built b;

  /* "t5" (unigram) loads now: test_tok_ugm.c */
  spm_vocab(&v);
  v.model = "rwkv";
  ASSERT_INT_EQ(build(&v, &b), 0);
  EXPECT_INT_EQ(tok_load(b.f, &t), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "rwkv");
  built_free(&b);

  spm_vocab(&v);
  v.model = NULL;
  ASSERT_INT_EQ(build(&v, &b), 0);
  EXPECT_INT_EQ(tok_load(b.f, &t), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tokenizer.ggml.model");
  built_free(&b);

  spm_vocab(&v);
  v.tokens = NULL;
  v.types = NULL;
  v.scores = NULL;
  ASSERT_INT_EQ(build(&v, &b), 0);
  EXPECT_INT_EQ(tok_load(b.f, &t), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tokenizer.ggml.tokens");
  built_free(&b);

  spm_vocab(&v);
  v.n_scores = 10;
  ASSERT_INT_EQ(build(&v, &b), 0);
  EXPECT_INT_EQ(tok_load(b.f, &t), ERR_CORRUPT);
  EXPECT_STR_CONTAINS(err_detail(), "tokenizer.ggml.scores");
  built_free(&b);

  v = (vocab_spec){.model = "gpt2", .pre = "no-such-pre", .tokens = bpe_tokens, .n = 9, .types = bpe_types,
                   .merges = bpe_merges, .n_merges = 3};
  ASSERT_INT_EQ(build(&v, &b), 0);
  EXPECT_INT_EQ(tok_load(b.f, &t), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "no-such-pre");
  built_free(&b);

  v.pre = "llama-bpe";
  v.merges = NULL;
  ASSERT_INT_EQ(build(&v, &b), 0);
  EXPECT_INT_EQ(tok_load(b.f, &t), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "merges");
  built_free(&b);
}

/* Every pre-tokenizer in the table compiles and splits a mixed text. */
TEST(tok_bpe_every_pre_compiles) {
  static const char *const pres[] = {
      "default", "gpt-2", "llama-bpe", "llama3", "qwen2", "deepseek-llm", "deepseek-coder", "deepseek-v3",
      "falcon", "starcoder", "refact", "mpt", "gpt-neox", "phi-2", "smollm", "command-r", "dbrx", "olmo",
      "stablelm2", "poro-chat", "viking", "tekken", "gpt-4o", "chameleon", "seed-coder", "bailingmoe"};
  const char *text = "Hello, y'all! 12345  \n\t Ünïcödé 我想在 ---- x";
  for (size_t i = 0; i < ARRAY_N(pres); i++) {
    vocab_spec v = {.model = "gpt2", .pre = pres[i], .tokens = bpe_tokens, .n = 9, .types = bpe_types,
                    .merges = bpe_merges, .n_merges = 3};
    built b;
    ASSERT_INT_EQ(build(&v, &b), 0);
    tok *t = NULL;
    int rc = tok_load(b.f, &t);
    if (rc) fprintf(stderr, "pre %s: %s\n", pres[i], err_detail());
    EXPECT_INT_EQ(rc, 0);
    if (t) {
      tok_ids ids = TOK_IDS_INIT;
      EXPECT_INT_EQ(tok_encode(t, text, strlen(text), 0, &ids), 0);
      tok_ids_free(&ids);
      EXPECT_INT_EQ(tok_add_bos(t), strcmp(pres[i], "llama-bpe") == 0 || strcmp(pres[i], "llama3") == 0);
    }
    tok_free(t);
    built_free(&b);
  }
}

/* ---- the streaming detokenizer ------------------------------------------ */

/* Feeds bytes through the byte tokens <0xNN> of the synthetic SPM vocabulary
 * one at a time; after k bytes the output must be exactly the characters
 * that are complete within the first k bytes, whatever k is. */
TEST(tok_stream_never_splits_a_character) {
  vocab_spec v;
  spm_vocab(&v);
  built b;
  ASSERT_INT_EQ(build(&v, &b), 0);
  tok *t = NULL;
  ASSERT_INT_EQ(tok_load(b.f, &t), 0);
  /* characters of 1, 2, 3 and 4 bytes; ends[] = byte offset after each */
  const char *chars[] = {"a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\xa6\x99", "b", "\xe6\x88\x91", "\xc3\x84"};
  char text[64] = "";
  size_t ends[8], n_chars = ARRAY_N(chars), n = 0;
  for (size_t i = 0; i < n_chars; i++) {
    strcat(text, chars[i]);
    n += strlen(chars[i]);
    ends[i] = n;
  }
  tok_stream s;
  tok_stream_init(&s, t, 0);
  buf out = BUF_INIT;
  for (size_t k = 1; k <= n; k++) {
    size_t before = out.len;
    EXPECT_INT_EQ(tok_stream_feed(&s, 3 + (uint8_t)text[k - 1], &out), 0);
    EXPECT_TRUE(utf8_valid((const unsigned char *)out.data + before, out.len - before));
    size_t complete = 0;
    for (size_t i = 0; i < n_chars; i++)
      if (ends[i] <= k) complete = ends[i];
    EXPECT_INT_EQ(out.len, complete);
    EXPECT_TRUE(memcmp(out.data, text, out.len) == 0);
  }
  EXPECT_INT_EQ(tok_stream_flush(&s, &out), 0);
  EXPECT_INT_EQ(out.len, n);
  buf_free(&out);
  tok_free(t);
  built_free(&b);
}

/* Byte sequences that can never be UTF-8 come out as U+FFFD, one per
 * maximal ill-formed subpart (as Python's decode(errors="replace")). */
TEST(tok_stream_invalid_bytes) {
  vocab_spec v;
  spm_vocab(&v);
  built b;
  ASSERT_INT_EQ(build(&v, &b), 0);
  tok *t = NULL;
  ASSERT_INT_EQ(tok_load(b.f, &t), 0);
  static const struct {
    const char *in;
    const char *want;
  } cases[] = {
      {"\xc3(", "\xef\xbf\xbd("},
      {"\x80x", "\xef\xbf\xbdx"},
      {"\xe2\x82(", "\xef\xbf\xbd("},
      {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xf5", "\xef\xbf\xbd"},
      {"\xe2\x82", "\xef\xbf\xbd"}, /* unfinished at flush */
      {"ok\xf0\x9f", "ok\xef\xbf\xbd"},
  };
  for (size_t c = 0; c < ARRAY_N(cases); c++) {
    tok_stream s;
    tok_stream_init(&s, t, 0);
    buf out = BUF_INIT;
    for (const char *p = cases[c].in; *p; p++) EXPECT_INT_EQ(tok_stream_feed(&s, 3 + (uint8_t)*p, &out), 0);
    EXPECT_INT_EQ(tok_stream_flush(&s, &out), 0);
    EXPECT_STR_EQ(out.data ? out.data : "", cases[c].want);
    buf_free(&out);
  }
  tok_free(t);
  built_free(&b);
}

/* A NUL byte (the <0x00> byte token) never reaches the text, alone, inside
 * ASCII, after an unfinished character, or through tok_decode: generated
 * text holds no U+0000 in any dialect. */
TEST(tok_stream_drops_nul) {
  vocab_spec v;
  spm_vocab(&v);
  built b;
  ASSERT_INT_EQ(build(&v, &b), 0);
  tok *t = NULL;
  ASSERT_INT_EQ(tok_load(b.f, &t), 0);
  static const struct {
    const unsigned char in[8];
    size_t n;
    const char *want;
  } cases[] = {
      {{0x00}, 1, ""},
      {{'a', 0x00, 'b'}, 3, "ab"},
      {{0x00, 0x00, 'x', 0x00}, 4, "x"},
      {{0xc3, 0x00, 'y'}, 3, "\xef\xbf\xbdy"}, /* the unfinished character is replaced, the NUL dropped */
      {{0xc3, 0xa9, 0x00}, 3, "\xc3\xa9"},
  };
  for (size_t c = 0; c < ARRAY_N(cases); c++) {
    tok_stream s;
    tok_stream_init(&s, t, 0);
    buf out = BUF_INIT;
    int32_t ids[8];
    for (size_t k = 0; k < cases[c].n; k++) {
      ids[k] = 3 + cases[c].in[k];
      EXPECT_INT_EQ(tok_stream_feed(&s, ids[k], &out), 0);
    }
    EXPECT_INT_EQ(tok_stream_flush(&s, &out), 0);
    EXPECT_INT_EQ(out.len, strlen(cases[c].want));
    EXPECT_TRUE(out.len == 0 || memcmp(out.data, cases[c].want, out.len) == 0);
    buf whole = BUF_INIT;
    EXPECT_INT_EQ(tok_decode(t, ids, cases[c].n, 0, &whole), 0);
    EXPECT_INT_EQ(whole.len, strlen(cases[c].want));
    EXPECT_TRUE(memchr(whole.data ? whole.data : "", 0, whole.len) == NULL);
    buf_free(&whole);
    buf_free(&out);
  }
  tok_free(t);
  built_free(&b);
}

/* ---- real vocabularies (../shared/vocab) -------------------------------- */

static tok *load_shared(const char *name, gguf_file **gf) {
  char rel[128], path[512];
  snprintf(rel, sizeof(rel), "vocab/ggml-vocab-%s.gguf", name);
  *gf = NULL;
  if (!test_shared_path(rel, path, sizeof(path))) return NULL;
  tok *t = NULL;
  if (gguf_open(path, gf) || tok_load(*gf, &t)) {
    fprintf(stderr, "%s: %s\n", name, err_detail());
    gguf_close(*gf);
    *gf = NULL;
    return NULL;
  }
  return t;
}

/* The .inp texts of a vocabulary, split as test_tok_vocab.c describes. */
static size_t shared_inputs(const char *name, char **blob, const char **texts, size_t *lens, size_t cap) {
  char rel[128], path[512];
  snprintf(rel, sizeof(rel), "vocab/ggml-vocab-%s.gguf.inp", name);
  *blob = NULL;
  if (!test_shared_path(rel, path, sizeof(path))) return 0;
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *blob = malloc((size_t)n + 1);
  if (!*blob || fread(*blob, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    return 0;
  }
  fclose(f);
  static const char sep[] = "\n__ggml_vocab_test__\n";
  size_t count = 0;
  const char *p = *blob, *end = *blob + n;
  while (count < cap) {
    const char *q = memmem(p, (size_t)(end - p), sep, sizeof(sep) - 1);
    if (!q) break;
    texts[count] = p;
    lens[count++] = (size_t)(q - p);
    p = q + sizeof(sep) - 1;
  }
  return count;
}

static const char *const lossless[] = {"gpt-2", "llama-spm", "phi-3", "deepseek-coder", "starcoder", "refact", "mpt"};
static const char *const extras[] = {
    "Hello, world!", "  leading and trailing  ", "tabs\tand\nnewlines\r\n", "caf\xc3\xa9 \xe6\x88\x91 \xf0\x9f\xa6\x99",
    "a'b 'c' ''", "1234567890", "<not a special>", "\xe2\x80\x8d\xef\xb8\x8f"};

TEST(tok_real_roundtrip_and_stream) {
  int n_vocabs = 0;
  for (size_t v = 0; v < ARRAY_N(lossless); v++) {
    gguf_file *gf;
    tok *t = load_shared(lossless[v], &gf);
    if (!t) continue;
    n_vocabs++;
    char *blob;
    const char *texts[80];
    size_t lens[80];
    size_t n = shared_inputs(lossless[v], &blob, texts, lens, 64);
    for (size_t i = 0; i < ARRAY_N(extras); i++) {
      texts[n] = extras[i];
      lens[n++] = strlen(extras[i]);
    }
    for (size_t i = 0; i < n; i++) {
      tok_ids ids = TOK_IDS_INIT;
      EXPECT_INT_EQ(tok_encode(t, texts[i], lens[i], 0, &ids), 0);
      /* whole decode */
      buf whole = BUF_INIT;
      EXPECT_INT_EQ(tok_decode(t, ids.ids, ids.n, TOK_DECODE_STRIP_SPACE, &whole), 0);
      bool same = whole.len == lens[i] && (lens[i] == 0 || memcmp(whole.data, texts[i], lens[i]) == 0);
      if (!same) fprintf(stderr, "%s: round trip of input %zu gave \"%s\"\n", lossless[v], i, whole.data ? whole.data : "");
      EXPECT_TRUE(same);
      /* streaming, one token at a time: every chunk is whole UTF-8 */
      tok_stream s;
      tok_stream_init(&s, t, TOK_DECODE_STRIP_SPACE);
      buf streamed = BUF_INIT;
      for (size_t k = 0; k < ids.n; k++) {
        size_t before = streamed.len;
        EXPECT_INT_EQ(tok_stream_feed(&s, ids.ids[k], &streamed), 0);
        EXPECT_TRUE(utf8_valid((const unsigned char *)streamed.data + before, streamed.len - before));
      }
      EXPECT_INT_EQ(tok_stream_flush(&s, &streamed), 0);
      EXPECT_INT_EQ(streamed.len, whole.len);
      if (streamed.len == whole.len && whole.len) EXPECT_TRUE(memcmp(streamed.data, whole.data, whole.len) == 0);
      buf_free(&streamed);
      buf_free(&whole);
      tok_ids_free(&ids);
    }
    free(blob);
    tok_free(t);
    gguf_close(gf);
  }
  if (!n_vocabs) TEST_SKIP("../shared is absent: no vocabularies");
}

TEST(tok_real_specials) {
  gguf_file *gf;
  tok *t = load_shared("phi-3", &gf);
  if (!t) TEST_SKIP("../shared is absent: no phi-3 vocabulary");
  /* Phi-3's special tokens eat the newline after them; "Hello" follows a
   * special token so it gets the space prefix: ▁Hello (15043) */
  EXPECT_IDS(t, "<|user|>\nHello<|end|>\n<|assistant|>\n", TOK_ENCODE_PARSE_SPECIAL, 32010, 15043, 32007, 32001);
  EXPECT_IDS(t, "<|user|>\nHello<|end|>\n<|assistant|>\n", TOK_ENCODE_PARSE_SPECIAL | TOK_ENCODE_ADD_SPECIAL, 1,
             32010, 15043, 32007, 32001);
  EXPECT_TRUE(tok_is_eog(t, 32000));
  EXPECT_TRUE(tok_is_eog(t, 32007));
  EXPECT_FALSE(tok_is_eog(t, 32010));
  tok_free(t);
  gguf_close(gf);

  t = load_shared("gpt-2", &gf);
  ASSERT_TRUE(t != NULL);
  EXPECT_IDS(t, "Hello<|endoftext|>", TOK_ENCODE_PARSE_SPECIAL, 15496, 50256);
  tok_ids ids = TOK_IDS_INIT;
  EXPECT_INT_EQ(tok_encode(t, "Hello<|endoftext|>", 18, 0, &ids), 0);
  EXPECT_INT_GT(ids.n, 2);
  for (size_t i = 0; i < ids.n; i++) EXPECT_INT_NE(ids.ids[i], 50256);
  tok_ids_free(&ids);
  tok_free(t);
  gguf_close(gf);

  t = load_shared("bert-bge", &gf);
  ASSERT_TRUE(t != NULL);
  /* lowercased, accent stripped, punctuation split, CLS/SEP around */
  EXPECT_IDS(t, "Hello, CAF\xc3\x89 world!", TOK_ENCODE_ADD_SPECIAL, 101, 7592, 1010, 7668, 2088, 999, 102);
  buf out = BUF_INIT;
  int32_t hw[] = {101, 7592, 2088, 102};
  EXPECT_INT_EQ(tok_decode(t, hw, 4, TOK_DECODE_STRIP_SPACE, &out), 0);
  EXPECT_STR_EQ(out.data, "hello world");
  buf_free(&out);
  tok_free(t);
  gguf_close(gf);
}

/* Invalid UTF-8, NUL bytes and 1 MB of one character: ids (all in range)
 * or a clean error, never a crash or a hang. The megabyte runs on one
 * vocabulary per algorithm (about 1.5 s each: the merge queue of a million
 * symbols is cache-bound); the others get 64 KB. */
TEST(tok_real_hostile_input) {
  static const char *const names[] = {"gpt-2", "llama-spm", "bert-bge", "deepseek-coder", "starcoder", "mpt", "phi-3"};
  size_t big = 1 << 20;
  char *mega = malloc(big);
  ASSERT_TRUE(mega != NULL);
  int n_vocabs = 0;
  for (size_t v = 0; v < ARRAY_N(names); v++) {
    gguf_file *gf;
    tok *t = load_shared(names[v], &gf);
    if (!t) continue;
    n_vocabs++;
    static const char bad[] = "\xff\xfe\x80\xc3(\xed\xa0\x80\xf4\x90\x80\x80\xc0\xaf" "a\0b\0\0c\xe2\x82";
    size_t n_big = v < 3 ? big : (size_t)64 << 10;
    struct {
      const char *p;
      size_t n;
      char fill;
    } inputs[5] = {{bad, sizeof(bad) - 1, 0}, {"\0", 1, 0}, {mega, n_big, 'a'}, {mega, 65536, ' '}, {mega, 65536, '\n'}};
    for (size_t i = 0; i < ARRAY_N(inputs); i++) {
      if (inputs[i].fill) memset(mega, inputs[i].fill, inputs[i].n);
      tok_ids ids = TOK_IDS_INIT;
      int rc = tok_encode(t, inputs[i].p, inputs[i].n, TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL, &ids);
      EXPECT_INT_EQ(rc, 0);
      EXPECT_INT_GT(ids.n, 0);
      for (size_t k = 0; k < ids.n; k++) {
        if (ids.ids[k] < 0 || ids.ids[k] >= tok_n_vocab(t)) {
          test_fail_at(__FILE__, __LINE__, "%s: id %d out of range", names[v], ids.ids[k]);
          break;
        }
      }
      buf out = BUF_INIT;
      EXPECT_INT_EQ(tok_decode(t, ids.ids, ids.n, 0, &out), 0);
      EXPECT_TRUE(utf8_valid((const unsigned char *)out.data, out.len));
      buf_free(&out);
      tok_ids_free(&ids);
    }
    tok_free(t);
    gguf_close(gf);
  }
  free(mega);
  if (!n_vocabs) TEST_SKIP("../shared is absent: no vocabularies");
}

/* ---- parley tokenize ----------------------------------------------------- */

#include <fcntl.h>
#include <unistd.h>

#include "app/commands.h"

/* Runs cmd_tokenize with stdout captured into out (NUL-terminated). */
static int run_tokenize(char **argv, int argc, char *out, size_t cap) {
  char path[512];
  snprintf(path, sizeof(path), "%s/stdout.txt", test_tmpdir());
  fflush(stdout);
  int saved = dup(1);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 1);
  close(fd);
  int rc = cmd_tokenize(argc, argv);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(out, 1, cap - 1, f) : 0;
  if (f) fclose(f);
  out[n] = 0;
  return rc;
}

TEST(tok_cmd_tokenize) {
  char out[4096];
  char *noargs[] = {NULL};
  EXPECT_INT_EQ(run_tokenize(noargs, 0, out, sizeof(out)), 2);
  char *badopt[] = {"m.gguf", "x", "--bogus"};
  EXPECT_INT_EQ(run_tokenize(badopt, 3, out, sizeof(out)), 2);
  char *missing[] = {"/nonexistent/model.gguf", "x"};
  EXPECT_INT_EQ(run_tokenize(missing, 2, out, sizeof(out)), 1);

  char gpt2[512], spm[512];
  if (!test_shared_path("vocab/ggml-vocab-gpt-2.gguf", gpt2, sizeof(gpt2)) ||
      !test_shared_path("vocab/ggml-vocab-llama-spm.gguf", spm, sizeof(spm)))
    TEST_SKIP("../shared is absent: no vocabularies for the CLI test");
  char *a1[] = {gpt2, "Hello world\n"};
  EXPECT_INT_EQ(run_tokenize(a1, 2, out, sizeof(out)), 0);
  EXPECT_STR_EQ(out, "15496\tHello\n995\t world\n198\t\\n\n");
  char *a2[] = {gpt2, "--json", "Hello world"};
  EXPECT_INT_EQ(run_tokenize(a2, 3, out, sizeof(out)), 0);
  EXPECT_STR_EQ(out, "{\"ids\":[15496,995],\"pieces\":[\"Hello\",\" world\"]}\n");
  /* <|endoftext|> is parsed unless --no-special */
  char *a3[] = {gpt2, "--json", "<|endoftext|>"};
  EXPECT_INT_EQ(run_tokenize(a3, 3, out, sizeof(out)), 0);
  EXPECT_STR_EQ(out, "{\"ids\":[50256],\"pieces\":[\"<|endoftext|>\"]}\n");
  char *a4[] = {gpt2, "--json", "--no-special", "<|endoftext|>"};
  EXPECT_INT_EQ(run_tokenize(a4, 4, out, sizeof(out)), 0);
  EXPECT_TRUE(strstr(out, "50256") == NULL);
  /* SentencePiece adds BOS unless --no-bos */
  char *a5[] = {spm, "--json", "Hello"};
  EXPECT_INT_EQ(run_tokenize(a5, 3, out, sizeof(out)), 0);
  EXPECT_STR_EQ(out, "{\"ids\":[1,15043],\"pieces\":[\"<s>\",\" Hello\"]}\n");
  char *a6[] = {spm, "--json", "--no-bos", "Hello"};
  EXPECT_INT_EQ(run_tokenize(a6, 4, out, sizeof(out)), 0);
  EXPECT_STR_EQ(out, "{\"ids\":[15043],\"pieces\":[\" Hello\"]}\n");
  /* a byte token that is half a character shows as \xNN */
  char *a7[] = {gpt2, "--json", "\xf0\x9f\xa6\x99"};
  EXPECT_INT_EQ(run_tokenize(a7, 3, out, sizeof(out)), 0);
  EXPECT_STR_CONTAINS(out, "\\\\xF0");
}

/* Every vocabulary in ../shared/vocab loads, including those without test
 * vectors (baichuan: SentencePiece; gpt-neox: BPE without tokenizer.ggml.pre,
 * so the default pre-tokenizer), and round-trips a sample text. */
TEST(tok_real_all_load) {
  static const char *const names[] = {"baichuan", "bert-bge", "deepseek-coder", "gpt-2", "gpt-neox", "llama-spm",
                                      "mpt", "phi-3", "refact", "starcoder"};
  int n_loaded = 0;
  for (size_t v = 0; v < ARRAY_N(names); v++) {
    gguf_file *gf;
    tok *t = load_shared(names[v], &gf);
    if (!t) continue;
    n_loaded++;
    const char *text = "Hello world, 123 caf\xc3\xa9";
    tok_ids ids = TOK_IDS_INIT;
    EXPECT_INT_EQ(tok_encode(t, text, strlen(text), 0, &ids), 0);
    EXPECT_INT_GT(ids.n, 3);
    buf out = BUF_INIT;
    EXPECT_INT_EQ(tok_decode(t, ids.ids, ids.n, TOK_DECODE_STRIP_SPACE, &out), 0);
    if (tok_model_kind(t) == TOK_MODEL_WPM) EXPECT_STR_EQ(out.data, "hello world , 123 cafe");
    else EXPECT_STR_EQ(out.data, text);
    buf_free(&out);
    tok_ids_free(&ids);
    tok_free(t);
    gguf_close(gf);
  }
  if (!n_loaded) TEST_SKIP("../shared is absent: no vocabularies");
  EXPECT_INT_EQ(n_loaded, (int)ARRAY_N(names));
}

/* Llama 3 style pre-tokenizers keep a pre-token that is a whole vocabulary
 * token even when the merges could not build it ("ignore_merges"). */
TEST(tok_bpe_ignore_merges) {
  static const char *const toks[] = {"a", "b", "c", "abc"};
  static const int32_t types[] = {1, 1, 1, 1};
  static const char *const merges[] = {"b c"}; /* builds no "abc" */
  vocab_spec v = {.model = "gpt2", .pre = "gpt-2", .tokens = toks, .n = 4, .types = types, .merges = merges, .n_merges = 1};
  built b;
  ASSERT_INT_EQ(build(&v, &b), 0);
  tok *t = NULL;
  ASSERT_INT_EQ(tok_load(b.f, &t), 0);
  EXPECT_IDS(t, "abc", 0, 0, 1, 2); /* "bc" is no token, so b c stay apart */
  tok_free(t);
  built_free(&b);
  v.pre = "llama-bpe";
  ASSERT_INT_EQ(build(&v, &b), 0);
  ASSERT_INT_EQ(tok_load(b.f, &t), 0);
  EXPECT_IDS(t, "abc", 0, 3);
  tok_free(t);
  built_free(&b);
}

/* With BOS shown as "<s>", the leading space of the first word is still
 * the one dropped by TOK_DECODE_STRIP_SPACE. */
TEST(tok_decode_strip_after_bos) {
  vocab_spec v;
  spm_vocab(&v);
  built b;
  ASSERT_INT_EQ(build(&v, &b), 0);
  tok *t = NULL;
  ASSERT_INT_EQ(tok_load(b.f, &t), 0);
  int32_t ids[] = {1, 264, 264};
  buf out = BUF_INIT;
  EXPECT_INT_EQ(tok_decode(t, ids, 3, TOK_DECODE_STRIP_SPACE | TOK_DECODE_SPECIAL, &out), 0);
  EXPECT_STR_EQ(out.data, "<s>ab ab");
  buf_reset(&out);
  EXPECT_INT_EQ(tok_decode(t, ids, 3, TOK_DECODE_STRIP_SPACE, &out), 0);
  EXPECT_STR_EQ(out.data, "ab ab");
  buf_free(&out);
  tok_free(t);
  built_free(&b);
}

/* ---- the vocabularies parley writes itself (model/testgen_vocab.c) -------
 * The API tests tokenize with these, so they must behave as real
 * SentencePiece and WordPiece vocabularies: words in the table come out as
 * one piece, other text through byte fallback (SPM) or [UNK] (WPM), and
 * decoding gives the text back. */
#include "model/testgen.h"

/* The pieces of text, decoded one by one and joined with '|'. */
static void pieces_of(const tok *t, const char *text, unsigned flags, buf *out) {
  tok_ids ids = TOK_IDS_INIT;
  buf_reset(out);
  if (tok_encode(t, text, strlen(text), flags, &ids) == 0)
    for (size_t i = 0; i < ids.n; i++) {
      if (i) buf_append(out, "|", 1);
      tok_decode_piece(t, ids.ids[i], TOK_DECODE_SPECIAL, out);
    }
  buf_append(out, "", 1);
  tok_ids_free(&ids);
}

static tok *load_generated_vocab(const char *kind, gguf_file **f) {
  char path[600];
  snprintf(path, sizeof path, "%s/gen-vocab-%s.gguf", test_tmpdir(), kind);
  tok *t = NULL;
  if (model_testgen_vocab_write(path, kind, NULL) || gguf_open(path, f) || tok_load(*f, &t)) return NULL;
  return t;
}

TEST(tok_generated_spm_vocabulary) {
  gguf_file *f = NULL;
  tok *t = load_generated_vocab("spm", &f);
  ASSERT_TRUE(t != NULL);
  buf p = BUF_INIT;
  pieces_of(t, "hello world", TOK_ENCODE_ADD_SPECIAL, &p);
  EXPECT_STR_EQ(p.data, "<s>| hello| world");
  pieces_of(t, "the weathering", 0, &p);
  EXPECT_STR_EQ(p.data, " the| weather|ing");
  /* bytes no piece holds fall back to one token each: é is C3 A9 */
  pieces_of(t, "\xc3\xa9", 0, &p);
  EXPECT_STR_EQ(p.data, " |\xc3|\xa9");
  const char *text = "Tools: {\"city\": \"Paris\"} \xc3\x9cn\xc3\xaf" "code \xf0\x9f\x98\x80\ttab";
  tok_ids ids = TOK_IDS_INIT;
  EXPECT_INT_EQ(tok_encode(t, text, strlen(text), 0, &ids), 0);
  buf d = BUF_INIT;
  EXPECT_INT_EQ(tok_decode(t, ids.ids, ids.n, TOK_DECODE_STRIP_SPACE, &d), 0);
  buf_append(&d, "", 1);
  EXPECT_STR_EQ(d.data, text);
  EXPECT_TRUE(tok_is_eog(t, 2));
  tok_ids_free(&ids);
  buf_free(&d);
  buf_free(&p);
  tok_free(t);
  gguf_close(f);
}

/* fim: the spm vocabulary with StarCoder's three FIM tokens after it, whole
 * as control tokens in special-aware encoding and never reached by text. */
TEST(tok_generated_fim_vocabulary) {
  gguf_file *f = NULL, *fs = NULL;
  tok *t = load_generated_vocab("fim", &f), *s = load_generated_vocab("spm", &fs);
  ASSERT_TRUE(t != NULL && s != NULL);
  int32_t n = tok_n_vocab(s);
  EXPECT_INT_EQ(tok_n_vocab(t), n + 3);
  EXPECT_INT_EQ(tok_lookup(t, "<fim_prefix>", 12), n);
  EXPECT_INT_EQ(tok_lookup(t, "<fim_suffix>", 12), n + 1);
  EXPECT_INT_EQ(tok_lookup(t, "<fim_middle>", 12), n + 2);
  EXPECT_INT_EQ(tok_lookup(s, "<fim_prefix>", 12), -1);
  buf p = BUF_INIT;
  pieces_of(t, "<fim_prefix>hello", TOK_ENCODE_PARSE_SPECIAL, &p);
  EXPECT_STR_EQ(p.data, "<fim_prefix>| hello");
  pieces_of(t, "hello world", TOK_ENCODE_ADD_SPECIAL, &p);
  EXPECT_STR_EQ(p.data, "<s>| hello| world");
  buf_free(&p);
  tok_free(t);
  tok_free(s);
  gguf_close(f);
  gguf_close(fs);
}

TEST(tok_generated_wpm_vocabulary) {
  gguf_file *f = NULL;
  tok *t = load_generated_vocab("wpm", &f);
  ASSERT_TRUE(t != NULL);
  buf p = BUF_INIT;
  /* lowercased, split at punctuation, [CLS] ... [SEP] around */
  pieces_of(t, "Hello, World!", TOK_ENCODE_ADD_SPECIAL, &p);
  EXPECT_STR_EQ(p.data, "[CLS]| hello| ,| world| !|[SEP]");
  pieces_of(t, "testing", 0, &p);
  EXPECT_STR_EQ(p.data, " test|ing");
  /* a character no piece holds makes its word [UNK] */
  pieces_of(t, "\xce\xa9mega", 0, &p);
  EXPECT_STR_EQ(p.data, "[UNK]");
  buf_free(&p);
  tok_free(t);
  gguf_close(f);
  EXPECT_INT_EQ(model_testgen_vocab_write("/nonexistent/x.gguf", "bpe", NULL), ERR_INVALID);
}
