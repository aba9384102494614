/*
 * test_grammar_vocab.c - the token mask on a real 32,000-token SPM
 * vocabulary (../shared/vocab/ggml-vocab-llama-spm.gguf) equals checking
 * every token on its own with a fresh clone of the state, at JSON states
 * inside and outside strings. Skips when the shared folder is absent.
 */
#include <stdlib.h>

#include "base/err.h"
#include "gguf/gguf.h"
#include "sample/grammar.h"
#include "sample/json_schema.h"
#include "test.h"

/* SPM pieces: U+2581 -> ' ', <0xNN> byte tokens -> one byte, control and
 * unknown tokens -> NULL. */
static int spm_pieces(const char *path, char ***out, size_t **lens_out, size_t *n_out) {
  gguf_file *f;
  int rc = gguf_open(path, &f);
  if (rc) return rc;
  const gguf_value *toks, *types = NULL;
  if ((rc = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks))) {
    gguf_close(f);
    return rc;
  }
  gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types);
  size_t n = toks->v.arr.n;
  char **pieces = calloc(n, sizeof *pieces);
  size_t *lens = calloc(n, sizeof *lens);
  for (size_t i = 0; i < n; i++) {
    int64_t type = types ? gguf_arr_i64(types, i) : 1;
    if (type == 2 || type == 3) continue;
    const char *s = toks->v.arr.strs[i].data;
    size_t len = toks->v.arr.strs[i].len, k = 0;
    char *p = malloc(len + 1);
    if (type == 6 && len == 6 && memcmp(s, "<0x", 3) == 0) {
      p[k++] = (char)strtol(s + 3, NULL, 16);
    } else {
      for (size_t j = 0; j < len;) {
        if (j + 3 <= len && memcmp(s + j, "\xe2\x96\x81", 3) == 0) p[k++] = ' ', j += 3;
        else p[k++] = s[j++];
      }
    }
    pieces[i] = p;
    lens[i] = k;
  }
  gguf_close(f);
  *out = pieces, *lens_out = lens, *n_out = n;
  return 0;
}

TEST(grammar_vocab_spm_mask_equals_brute_force) {
  char path[1024];
  if (!test_shared_path("vocab/ggml-vocab-llama-spm.gguf", path, sizeof path))
    TEST_SKIP("../shared/vocab/ggml-vocab-llama-spm.gguf not present");
  char **pieces;
  size_t *lens, n;
  ASSERT_INT_EQ(spm_pieces(path, &pieces, &lens, &n), 0);
  EXPECT_INT_EQ(n, 32000);
  grammar_vocab *v;
  ASSERT_INT_EQ(grammar_vocab_new((const char *const *)pieces, lens, n, &v), 0);
  grammar *g;
  ASSERT_INT_EQ(json_schema_grammar(NULL, &g), 0);
  static const char *const prefixes[] = {"", "{", "{\"", "{\"k\xc3", "{\"k\": 1", "{\"k\": [tr", "{\"a\":{}"};
  uint8_t *mask = malloc(n);
  for (size_t p = 0; p < sizeof prefixes / sizeof prefixes[0]; p++) {
    grammar_state *s;
    ASSERT_INT_EQ(grammar_state_new(g, &s), 0);
    ASSERT_INT_EQ(grammar_accept_bytes(s, prefixes[p], strlen(prefixes[p])), 0);
    bool eos;
    ASSERT_INT_EQ(grammar_mask(s, v, mask, &eos), 0);
    size_t bad = 0, n_allowed = 0;
    for (size_t i = 0; i < n; i++) {
      bool brute = false;
      if (pieces[i] && lens[i] && (i % 7 == 0 || mask[i])) {
        /* full clone check on every 7th token and on every allowed one */
        grammar_state *c;
        ASSERT_INT_EQ(grammar_state_clone(s, &c), 0);
        brute = grammar_accept_bytes(c, pieces[i], lens[i]) == 0;
        grammar_state_free(c);
      } else if (pieces[i] && lens[i]) {
        brute = grammar_token_allowed(s, pieces[i], lens[i]);
      }
      if (brute != (mask[i] != 0) && bad++ < 5)
        test_fail_at(__FILE__, __LINE__, "prefix \"%s\" token %zu: mask %d, brute %d", prefixes[p], i,
                     mask[i], brute);
      n_allowed += brute;
    }
    EXPECT_INT_EQ(bad, 0);
    EXPECT_INT_GT(n_allowed, 0);
    grammar_state_free(s);
  }
  /* hand-checked facts: inside a string almost everything goes, after "{"
   * only whitespace, '"' and '}' starts */
  grammar_state *s;
  ASSERT_INT_EQ(grammar_state_new(g, &s), 0);
  ASSERT_INT_EQ(grammar_accept_bytes(s, "{", 1), 0);
  grammar_mask(s, v, mask, NULL);
  for (size_t i = 0; i < n; i++)
    if (mask[i]) {
      char c = pieces[i][0];
      TEST_CHECK_(c == ' ' || c == '\n' || c == '\t' || c == '"' || c == '}', 0, "token %zu allowed after {", i);
    }
  grammar_state_free(s);
  free(mask);
  grammar_free(g);
  grammar_vocab_free(v);
  for (size_t i = 0; i < n; i++) free(pieces[i]);
  free(pieces);
  free(lens);
}
