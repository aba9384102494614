/*
 * bench/grammar.c - cost of the grammar token mask on real vocabularies.
 *
 * Loads the token strings of GGUF vocabularies (SPM: "▁" -> " ", <0xNN> ->
 * one byte; GPT-2 byte-level BPE: the byte-to-unicode table inverted;
 * control tokens excluded), builds the trie once, and times grammar_mask()
 * and grammar_token_allowed() at typical JSON states, for the json_object
 * grammar and a JSON schema grammar. Run: bash bench/grammar.sh
 * (needs /work/shared/vocab or $PARLEY_SHARED/vocab).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "gguf/gguf.h"
#include "sample/grammar.h"
#include "sample/json_schema.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t utf8_dec(const unsigned char *s, size_t n, uint32_t *cp) {
  unsigned l = s[0] < 0x80 ? 1 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : 4;
  if (l > n) l = (unsigned)n;
  uint32_t v = l == 1 ? s[0] : l == 2 ? (s[0] & 0x1Fu) : l == 3 ? (s[0] & 0x0Fu) : (s[0] & 0x07u);
  for (unsigned i = 1; i < l; i++) v = (v << 6) | (s[i] & 0x3Fu);
  *cp = v;
  return l;
}

/* Decoded pieces of a vocabulary; pieces[i] NULL for control tokens. */
static int load_vocab(const char *path, char ***pieces_out, size_t **lens_out, size_t *n_out) {
  gguf_file *f;
  int rc = gguf_open(path, &f);
  if (rc) return rc;
  const gguf_value *toks = NULL, *types = NULL;
  const char *model = "llama";
  gguf_get_str(f, "tokenizer.ggml.model", &model);
  if ((rc = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks))) {
    gguf_close(f);
    return rc;
  }
  gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types);
  bool bpe = strcmp(model, "gpt2") == 0;
  uint8_t byte_of[512] = {0}; /* byte-level BPE: code point -> byte */
  {
    int n = 0;
    for (int b = 0; b < 256; b++) {
      bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      if (self) byte_of[b] = (uint8_t)b;
      else byte_of[256 + n++] = (uint8_t)b;
    }
  }
  size_t n = toks->v.arr.n;
  char **pieces = calloc(n, sizeof *pieces);
  size_t *lens = calloc(n, sizeof *lens);
  for (size_t i = 0; i < n; i++) {
    int64_t type = types ? gguf_arr_i64(types, i) : 1;
    const unsigned char *s = (const unsigned char *)toks->v.arr.strs[i].data;
    size_t len = toks->v.arr.strs[i].len;
    if (type == 3 || type == 2 || type == 5) continue; /* control, unknown, unused */
    char *out = malloc(len + 1);
    size_t k = 0;
    if (!bpe && type == 6 && len == 6 && memcmp(s, "<0x", 3) == 0) {
      out[k++] = (char)strtol((const char *)s + 3, NULL, 16);
    } else {
      for (size_t j = 0; j < len;) {
        uint32_t cp;
        size_t l = utf8_dec(s + j, len - j, &cp);
        if (bpe) {
          out[k++] = (char)(cp < 512 ? byte_of[cp] : '?');
        } else if (cp == 0x2581) {
          out[k++] = ' ';
        } else {
          memcpy(out + k, s + j, l);
          k += l;
        }
        j += l;
      }
    }
    pieces[i] = out;
    lens[i] = k;
  }
  gguf_close(f);
  *pieces_out = pieces, *lens_out = lens, *n_out = n;
  return 0;
}

static const char SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"address\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"zip\":{\"type\":\"string\",\"pattern\":\"^[0-9]{5}$\"}},"
    "\"required\":[\"city\"]}},\"required\":[\"name\",\"age\"]}";

static void bench_states(const char *label, const grammar *g, const grammar_vocab *v,
                         const char *const *prefixes, size_t n_prefixes) {
  size_t n_tok = grammar_vocab_n_tokens(v);
  uint8_t *mask = malloc(n_tok);
  for (size_t p = 0; p < n_prefixes; p++) {
    grammar_state *s;
    grammar_state_new(g, &s);
    if (grammar_accept_bytes(s, prefixes[p], strlen(prefixes[p]))) {
      printf("  %s: prefix %s rejected\n", label, prefixes[p]);
      grammar_state_free(s);
      continue;
    }
    bool eos;
    int iters = 0;
    double t0 = now_s(), t;
    do {
      grammar_mask(s, v, mask, &eos);
      iters++;
      t = now_s() - t0;
    } while (t < 0.3 && iters < 200);
    size_t allowed = 0;
    for (size_t i = 0; i < n_tok; i++) allowed += mask[i];
    /* lazy check: one allowed token */
    double t1 = now_s();
    int lazy_iters = 20000;
    for (int i = 0; i < lazy_iters; i++) grammar_token_allowed(s, "a", 1);
    double lazy = (now_s() - t1) / lazy_iters;
    printf("  %-12s state %-32s mask %8.3f ms  allowed %6zu/%zu  token_allowed %.2f us\n", label,
           prefixes[p], t / iters * 1e3, allowed, n_tok, lazy * 1e6);
    grammar_state_free(s);
  }
  free(mask);
}

int main(int argc, char **argv) {
  const char *shared = getenv("PARLEY_SHARED");
  if (!shared) shared = "/work/shared";
  const char *names[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"};
  int n_names = 2;
  if (argc > 1) names[0] = argv[1], n_names = 1;
  grammar *gobj = NULL, *gsch = NULL;
  if (json_schema_grammar(NULL, &gobj)) return fprintf(stderr, "%s\n", err_detail()), 1;
  json_t *schema = json_loads(SCHEMA, 0, NULL);
  if (json_schema_grammar(schema, &gsch)) return fprintf(stderr, "%s\n", err_detail()), 1;
  json_decref(schema);
  static const char *const obj_prefixes[] = {
      "", "{", "{\"", "{\"name\": \"Al", "{\"name\": \"Al\", \"age\": 4", "{\"a\": [1, ", "{\"a\": {\"b\": tr",
  };
  static const char *const sch_prefixes[] = {
      "", "{", "{\"", "{\"name\": \"Al", "{\"name\": \"Al\", \"age\": 4", "{\"name\": \"Al\", \"age\": 4,",
      "{\"name\": \"A\", \"age\": 4, \"address\": {\"city\": \"B\", \"zip\": \"12",
  };
  for (int k = 0; k < n_names; k++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/%s", shared, names[k]);
    if (strchr(names[k], '/')) snprintf(path, sizeof path, "%s", names[k]);
    char **pieces;
    size_t *lens, n;
    if (load_vocab(path, &pieces, &lens, &n)) {
      printf("%s: cannot load (%s), skipped\n", path, err_detail());
      continue;
    }
    grammar_vocab *v;
    double t0 = now_s();
    if (grammar_vocab_new((const char *const *)pieces, lens, n, &v)) return 1;
    printf("%s: %zu tokens, trie %zu nodes, built in %.1f ms\n", names[k], n, grammar_vocab_n_nodes(v),
           (now_s() - t0) * 1e3);
    bench_states("json_object", gobj, v, obj_prefixes, sizeof obj_prefixes / sizeof obj_prefixes[0]);
    bench_states("json_schema", gsch, v, sch_prefixes, sizeof sch_prefixes / sizeof sch_prefixes[0]);
    grammar_vocab_free(v);
    for (size_t i = 0; i < n; i++) free(pieces[i]);
    free(pieces);
    free(lens);
  }
  grammar_free(gobj);
  grammar_free(gsch);
  return 0;
}
