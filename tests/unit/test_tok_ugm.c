/* test_tok_ugm.c - the unigram ("t5") tokenizer (src/tok/tok_ugm.c) against
 * tools/ref_ugm.py, an independent Python lattice search, on vocabularies
 * that script writes in the format llama.cpp's converter gives
 * XLM-RoBERTa files (../shared/vocab holds no unigram vocabulary): specials,
 * single characters with some left out, words and pieces with random
 * scores, user-defined and unused tokens, and a precompiled charsmap
 * (XOR-compressed double array with longest-prefix replacements). Every
 * edge case and random text must give the same ids, token for token; then
 * decoding, and the malformed files. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "gguf/gguf.h"
#include "model_ref.h"
#include "tok/tok.h"

#define REF "tools/ref_ugm.py"

static int hexv(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* Writes the vocabulary of seed, has ref_ugm.py encode its texts, and
 * compares each with tok_encode (BOS/EOS added). */
static void check_seed(int seed) {
  char path[512], out[512], cmd[2048];
  snprintf(path, sizeof path, "%s/ugm_%d.gguf", test_tmpdir(), seed);
  snprintf(out, sizeof out, "%s/ugm_%d.txt", test_tmpdir(), seed);
  snprintf(cmd, sizeof cmd, REF_PY " " REF " make %s %d && " REF_PY " " REF " encode %s %d %s", path, seed, path,
           seed, out);
  if (system(cmd) != 0) {
    test_fail_at(__FILE__, __LINE__, "ref_ugm.py failed: %s", cmd);
    return;
  }
  gguf_file *f = NULL;
  tok *t = NULL;
  if (gguf_open(path, &f) || tok_load(f, &t)) {
    test_fail_at(__FILE__, __LINE__, "%s: %s", path, err_detail());
    gguf_close(f);
    return;
  }
  EXPECT_INT_EQ(tok_model_kind(t), TOK_MODEL_UGM);
  EXPECT_STR_EQ(tok_model_name(t), "t5");
  FILE *fp = fopen(out, "r");
  char line[16384];
  int n_lines = 0, n_same = 0;
  while (fp && fgets(line, sizeof line, fp)) {
    char *tab = strchr(line, '\t');
    if (!tab) continue;
    *tab = 0;
    size_t hl = strlen(line), tl = hl / 2;
    char *text = malloc(tl + 1);
    for (size_t i = 0; i < tl; i++) text[i] = (char)(hexv(line[2 * i]) * 16 + hexv(line[2 * i + 1]));
    int32_t want[4096];
    size_t nw = 0;
    for (char *p = tab + 1; *p && *p != '\n' && nw < 4096;) {
      want[nw++] = (int32_t)strtol(p, &p, 10);
      if (*p == ',') p++;
    }
    tok_ids got = {0};
    int rc = tok_encode(t, text, tl, TOK_ENCODE_ADD_SPECIAL, &got);
    bool same = rc == 0 && got.n == nw && (nw == 0 || memcmp(got.ids, want, nw * sizeof *want) == 0);
    if (!same) {
      char g[256] = "", w[256] = "";
      for (size_t i = 0; i < got.n && strlen(g) < 200; i++) snprintf(g + strlen(g), sizeof g - strlen(g), "%d,", got.ids[i]);
      for (size_t i = 0; i < nw && strlen(w) < 200; i++) snprintf(w + strlen(w), sizeof w - strlen(w), "%d,", want[i]);
      test_fail_at(__FILE__, __LINE__, "seed %d text %s: C %s, python %s", seed, line, g, w);
    }
    n_same += same;
    n_lines++;
    free(got.ids);
    free(text);
  }
  if (fp) fclose(fp);
  printf("    seed %d: %d of %d texts tokenized identically\n", seed, n_same, n_lines);
  EXPECT_TRUE(n_lines >= 80);
  tok_free(t);
  gguf_close(f);
}

TEST(tok_ugm_matches_python_lattice) {
  NEED_REF_PY(REF);
  check_seed(7);
  check_seed(8);
}

/* Decoding: "▁" back to spaces, the prefix space stripped; the charsmap's
 * replacement is what comes back (normalization is one-way). */
TEST(tok_ugm_decode) {
  NEED_REF_PY(REF);
  char path[512], cmd[1024];
  snprintf(path, sizeof path, "%s/ugm_dec.gguf", test_tmpdir());
  snprintf(cmd, sizeof cmd, REF_PY " " REF " make %s 7", path);
  ASSERT_INT_EQ(system(cmd), 0);
  gguf_file *f = NULL;
  tok *t = NULL;
  ASSERT_INT_EQ(gguf_open(path, &f), 0);
  ASSERT_INT_EQ(tok_load(f, &t), 0);
  EXPECT_INT_EQ(tok_special(t, TOK_SPECIAL_UNK), 3);
  EXPECT_TRUE(tok_add_bos(t) && tok_add_eos(t));
  const char *in = "  hello   world ﬁ ";
  tok_ids ids = {0};
  ASSERT_INT_EQ(tok_encode(t, in, strlen(in), 0, &ids), 0);
  buf out = {0};
  ASSERT_INT_EQ(tok_decode(t, ids.ids, ids.n, TOK_DECODE_STRIP_SPACE, &out), 0);
  EXPECT_STR_EQ(out.data, "hello world fi");
  free(ids.ids);
  buf_free(&out);
  tok_free(t);
  gguf_close(f);
}

/* A tiny "t5" vocabulary with the given charsmap bytes (n 0: none) and
 * unknown-token key, opened from memory; returns tok_load's code (and, when
 * it loads, encodes every byte value once: no read outside the charsmap). */
static int load_small(const void *charsmap, size_t n, uint32_t cm_type, int unk) {
  static const char *const toks[] = {"<pad>", "</s>", "a", "\xe2\x96\x81"};
  const float scores[] = {0, 0, -1, -2};
  const int32_t types[] = {3, 3, 1, 1};
  gguf_writer *w = NULL;
  if (gguf_writer_new(&w)) return -1;
  gguf_writer_add_str(w, "tokenizer.ggml.model", "t5");
  gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 4);
  gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 4);
  gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 4);
  if (unk >= 0) gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)unk);
  if (n) gguf_writer_add_arr(w, "tokenizer.ggml.precompiled_charsmap", cm_type, charsmap, n);
  buf data = {0};
  int rc = gguf_writer_write_buf(w, &data);
  gguf_writer_free(w);
  gguf_file *f = NULL;
  tok *t = NULL;
  if (rc == 0) rc = gguf_open_mem(data.data, data.len, &f);
  if (rc == 0) rc = tok_load(f, &t);
  if (rc == 0) {
    char all[256];
    for (int i = 0; i < 256; i++) all[i] = (char)(255 - i);
    tok_ids ids = {0};
    rc = tok_encode(t, all, sizeof all, TOK_ENCODE_ADD_SPECIAL, &ids);
    if (rc == 0 && ids.n < 2) rc = -1;
    free(ids.ids);
  }
  tok_free(t);
  gguf_close(f);
  buf_free(&data);
  return rc;
}

TEST(tok_ugm_load_errors) {
  /* the defaults put <unk> at 2 (T5's), inside this vocabulary: loads */
  EXPECT_INT_EQ(load_small(NULL, 0, 0, -1), 0);
  const uint8_t too_big[8] = {0x10, 0, 0, 0, 1, 2, 3, 4}; /* a 16-byte array in 4 bytes */
  EXPECT_INT_EQ(load_small(too_big, 8, GGUF_TYPE_UINT8, 0), ERR_CORRUPT);
  EXPECT_STR_CONTAINS(err_detail(), "precompiled_charsmap: 8 bytes cannot hold a double array of 16 bytes");
  const uint8_t odd[8] = {3, 0, 0, 0, 1, 2, 3, 0}; /* not whole 32-bit units */
  EXPECT_INT_EQ(load_small(odd, 8, GGUF_TYPE_UINT8, 0), ERR_CORRUPT);
  const uint8_t three[3] = {0, 0, 0};
  EXPECT_INT_EQ(load_small(three, 3, GGUF_TYPE_UINT8, 0), ERR_CORRUPT);
  const float fl[2] = {1, 2};
  EXPECT_INT_EQ(load_small(fl, 2, GGUF_TYPE_FLOAT32, 0), ERR_TYPE);
  EXPECT_STR_CONTAINS(err_detail(), "precompiled_charsmap: expected bytes");
  /* an unknown id outside the vocabulary leaves none, which the lattice needs */
  EXPECT_INT_EQ(load_small(NULL, 0, 0, 9), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "no unknown token");
  /* a charsmap whose units point anywhere never reads outside the array */
  uint8_t wild[4 + 64 + 4];
  memset(wild, 0xA5, sizeof wild);
  wild[0] = 64, wild[1] = wild[2] = wild[3] = 0;
  wild[sizeof wild - 1] = 0;
  EXPECT_INT_EQ(load_small(wild, sizeof wild, GGUF_TYPE_UINT8, 0), 0);
}
