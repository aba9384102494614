/*
 * test_tok_vocab.c - tokenizer parity against the vectors in ../shared/vocab:
 * for every ggml-vocab-NAME.gguf with .inp/.out files, each input text must
 * encode to exactly the ids on the matching .out line (vectors produced by
 * the Hugging Face tokenizers, independent of our code).
 *
 * File format (checked against the files): the .inp file is the inputs, each
 * followed by "\n__ggml_vocab_test__\n" (so an input may itself be empty or
 * consist of newlines; the text after the last separator is empty and is not
 * an input). The .out file has one line per input: the ids, each preceded by
 * a space (an empty line for an empty input). Encoding is done as the
 * generator did: no BOS/EOS, special tokens not parsed.
 */
#include <stdlib.h>

#include "base/err.h"
#include "gguf/gguf.h"
#include "test.h"
#include "tok/tok.h"

static void print_escaped(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n') fputs("\\n", stderr);
    else if (c == '\t') fputs("\\t", stderr);
    else if (c < 0x20) fprintf(stderr, "\\x%02x", c);
    else fputc(c, stderr);
  }
}

static void run_vocab(const char *name) {
  char rel[256], gpath[512], ipath[600], opath[600];
  snprintf(rel, sizeof(rel), "vocab/ggml-vocab-%s.gguf", name);
  if (!test_shared_path(rel, gpath, sizeof(gpath))) TEST_SKIP("../shared is absent: no vocabulary vectors");
  snprintf(ipath, sizeof(ipath), "%s.inp", gpath);
  snprintf(opath, sizeof(opath), "%s.out", gpath);
  size_t ilen, olen;
  char *inp = test_read_file(ipath, &ilen), *outs = test_read_file(opath, &olen);
  if (!inp || !outs) {
    free(inp);
    free(outs);
    TEST_SKIP("vocabulary vectors (.inp/.out) are missing");
  }
  gguf_file *gf = NULL;
  tok *t = NULL;
  int rc = gguf_open(gpath, &gf);
  EXPECT_INT_EQ(rc, 0);
  if (!rc) {
    rc = tok_load(gf, &t);
    if (rc) fprintf(stderr, "tok_load(%s): %s\n", name, err_detail());
    EXPECT_INT_EQ(rc, 0);
  }
  static const char sep[] = "\n__ggml_vocab_test__\n";
  size_t seplen = sizeof(sep) - 1;
  const char *p = inp, *end = inp + ilen, *o = outs, *oend = outs + olen;
  int n_inputs = 0, n_bad = 0;
  while (t && p < end) {
    const char *q = memmem(p, (size_t)(end - p), sep, seplen);
    if (!q) break; /* trailing text without a separator is not an input */
    const char *ol = o;
    const char *onl = memchr(o, '\n', (size_t)(oend - o));
    if (!onl) {
      test_fail_at(__FILE__, __LINE__, "%s: .out has fewer lines than .inp has inputs", name);
      break;
    }
    /* expected ids */
    int32_t want[512];
    size_t n_want = 0;
    for (const char *c = ol; c < onl;) {
      while (c < onl && *c == ' ') c++;
      if (c >= onl) break;
      char *e;
      long v = strtol(c, &e, 10);
      if (n_want < 512) want[n_want++] = (int32_t)v;
      c = e;
    }
    tok_ids got = TOK_IDS_INIT;
    int erc = tok_encode(t, p, (size_t)(q - p), 0, &got);
    bool same = erc == 0 && got.n == n_want && (n_want == 0 || memcmp(got.ids, want, n_want * 4) == 0);
    if (!same) {
      n_bad++;
      fprintf(stderr, "%s input %d: \"", name, n_inputs);
      print_escaped(p, (size_t)(q - p));
      fprintf(stderr, "\"\n  expected:");
      for (size_t i = 0; i < n_want; i++) fprintf(stderr, " %d", want[i]);
      fprintf(stderr, "\n  got:     ");
      for (size_t i = 0; i < got.n; i++) fprintf(stderr, " %d", got.ids[i]);
      fprintf(stderr, "\n");
    }
    tok_ids_free(&got);
    n_inputs++;
    p = q + seplen;
    o = onl + 1;
  }
  EXPECT_INT_GT(n_inputs, 0);
  if (t) EXPECT_TRUE(o == oend); /* every .out line was used */
  fprintf(stderr, "%s: %d inputs, %d mismatches\n", name, n_inputs, n_bad);
  EXPECT_INT_EQ(n_bad, 0);
  tok_free(t);
  gguf_close(gf);
  free(inp);
  free(outs);
}

TEST(tok_vocab_bert_bge) { run_vocab("bert-bge"); }
TEST(tok_vocab_deepseek_coder) { run_vocab("deepseek-coder"); }
TEST(tok_vocab_gpt_2) { run_vocab("gpt-2"); }
TEST(tok_vocab_llama_spm) { run_vocab("llama-spm"); }
TEST(tok_vocab_mpt) { run_vocab("mpt"); }
TEST(tok_vocab_phi_3) { run_vocab("phi-3"); }
TEST(tok_vocab_refact) { run_vocab("refact"); }
TEST(tok_vocab_starcoder) { run_vocab("starcoder"); }
