/*
 * test_constrain.c - the engine under a grammar (engine_request.grammar):
 * a random-weight llama (model_testgen_small) with a synthetic
 * SentencePiece vocabulary of 300 tokens whose pieces are JSON-relevant
 * (<unk>, <s>, </s>, the 256 byte tokens, and 41 pieces such as `{"`, `":`,
 * `true`, `null`, `",`), so that random logits can spell JSON.
 *
 * Evidence is independent of the code under test: every document that
 * finishes STOP is parsed by jansson and checked against its schema by the
 * validator in schema_validate.c (written from the JSON Schema spec), 100
 * seeds per schema; a hand-written grammar checks the forced end; and a
 * constrained request next to unconstrained ones must leave their output
 * exactly what it is alone (the engine against itself, one request at a
 * time).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/testgen.h"
#include "sample/json_schema.h"
#include "schema_validate.h"
#include "test.h"

#define CN_VOCAB 300
#define CN_SEEDS 100

/* Decoded pieces of tokens 259..299 (a space is stored as U+2581). */
static const char *const CN_PIECES[41] = {
    "{",     "}",    "[",    "]",     "\"",     ":",     ",",      "{\"",  "\":",  "\",", "\"}",
    "\": \"", "\", \"", ", \"", "true", "false", "null",  "}]",     "]}",   "\"]",  "[\"", "\"name",
    "\"age", "\"ok", "\"kind", "\": ", "0",     "1",     "12",     "-",    "abc",  "x",   "y",
    "}}",    "{}",   "[]",   "cat",   "dog",   "\"\"",  " ",      "3"};

typedef struct cfx {
  model *m;
  tok *t;
  buf vocab;
  gguf_file *vf;
} cfx;

static const char *cn_model_path(void) {
  static char path[512];
  static bool written;
  if (!written) {
    snprintf(path, sizeof path, "%s/constrain_small.gguf", test_tmpdir());
    model_testgen g = model_testgen_small();
    g.n_ctx = 2048;
    g.seed = 11;
    if (model_testgen_write(&g, path)) {
      test_fail_at(__FILE__, __LINE__, "testgen: %s", err_detail());
      return NULL;
    }
    written = true;
  }
  return path;
}

static int cn_vocab_build(cfx *f) {
  static char texts[CN_VOCAB][32];
  const char *toks[CN_VOCAB];
  float scores[CN_VOCAB];
  int32_t types[CN_VOCAB];
  for (int i = 0; i < CN_VOCAB; i++) {
    scores[i] = 0;
    if (i == 0) {
      snprintf(texts[i], sizeof texts[i], "<unk>");
      types[i] = TOK_TYPE_UNKNOWN;
    } else if (i == 1 || i == 2) {
      snprintf(texts[i], sizeof texts[i], i == 1 ? "<s>" : "</s>");
      types[i] = TOK_TYPE_CONTROL;
    } else if (i < 259) {
      snprintf(texts[i], sizeof texts[i], "<0x%02X>", i - 3);
      types[i] = TOK_TYPE_BYTE;
    } else {
      const char *p = CN_PIECES[i - 259];
      size_t o = 0;
      for (; *p; p++) {
        if (*p == ' ') {
          memcpy(texts[i] + o, "\xe2\x96\x81", 3);
          o += 3;
        } else {
          texts[i][o++] = *p;
        }
      }
      texts[i][o] = '\0';
      types[i] = TOK_TYPE_NORMAL;
      scores[i] = -(float)(i - 259);
    }
    toks[i] = texts[i];
  }
  gguf_writer *w = NULL;
  if (gguf_writer_new(&w)) return -1;
  gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
  gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, CN_VOCAB);
  gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, CN_VOCAB);
  gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, CN_VOCAB);
  gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
  gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
  gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
  int rc = gguf_writer_write_buf(w, &f->vocab);
  gguf_writer_free(w);
  if (rc) return rc;
  rc = gguf_open_mem(f->vocab.data, f->vocab.len, &f->vf);
  if (rc) return rc;
  return tok_load(f->vf, &f->t);
}

static bool cfx_open(cfx *f) {
  memset(f, 0, sizeof(*f));
  const char *p = cn_model_path();
  if (!p) return false;
  if (model_open(p, &f->m)) {
    test_fail_at(__FILE__, __LINE__, "model_open: %s", err_detail());
    return false;
  }
  if (cn_vocab_build(f)) {
    test_fail_at(__FILE__, __LINE__, "vocabulary: %s", err_detail());
    return false;
  }
  return true;
}

static void cfx_close(cfx *f) {
  tok_free(f->t);
  gguf_close(f->vf);
  buf_free(&f->vocab);
  model_free(f->m);
}

static engine *cfx_engine(cfx *f, int32_t n_slots, int64_t n_ctx) {
  engine_params p = engine_default_params();
  p.n_slots = n_slots;
  p.n_ctx = n_ctx;
  p.queue_max = 256;
  p.kv_type = MODEL_KV_F32;
  engine *e = NULL;
  if (engine_new(f->m, f->t, &p, &e)) test_fail_at(__FILE__, __LINE__, "engine_new: %s", err_detail());
  return e;
}

/* ---- one request's output ---------------------------------------------------- */

typedef struct cres {
  buf text;
  int32_t tokens[2048];
  size_t n;
  enum engine_finish finish;
  int err_code;
  char err_msg[200];
  int64_t n_completion;
} cres;

static bool cn_collect(engine_req *h, cres *r) {
  memset(r, 0, sizeof(*r));
  for (;;) {
    engine_event ev;
    int rc = engine_req_next(h, 60000, &ev);
    if (rc) {
      test_fail_at(__FILE__, __LINE__, "engine_req_next: %s", err_name(rc));
      return false;
    }
    if (ev.type == ENGINE_EVENT_TEXT_DELTA) {
      buf_append(&r->text, ev.text, ev.n_text);
      for (size_t i = 0; i < ev.n_tokens && r->n < ARRAY_LEN(r->tokens); i++) r->tokens[r->n++] = ev.tokens[i];
    } else if (ev.type == ENGINE_EVENT_USAGE) {
      r->n_completion = ev.n_completion;
    } else {
      r->finish = ev.finish;
      r->err_code = ev.err_code;
      snprintf(r->err_msg, sizeof r->err_msg, "%s", ev.err_msg ? ev.err_msg : "");
      engine_event_free(&ev);
      return true;
    }
    engine_event_free(&ev);
  }
}

static const int32_t CN_PROMPT[] = {1, 259, 266, 30, 280, 100};

static engine_request cn_req(const grammar *g, uint64_t seed, int64_t max_tokens) {
  engine_request q = engine_request_default();
  q.prompt = CN_PROMPT;
  q.n_prompt = ARRAY_LEN(CN_PROMPT);
  q.sample.temperature = 1.0f;
  q.sample.seed = seed;
  q.max_tokens = max_tokens;
  q.grammar = g;
  return q;
}

/* ---- schemas: 100 seeds each ------------------------------------------------ */

static const char S_OBJECT[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":8},"
    "\"age\":{\"type\":\"integer\"},"
    "\"ok\":{\"type\":\"boolean\"},"
    "\"kind\":{\"enum\":[\"cat\",\"dog\",null,3]}},"
    "\"required\":[\"name\",\"age\",\"ok\",\"kind\"]}";

static const char S_ARRAY[] =
    "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":4}";

static const char S_NESTED[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"a\":{\"type\":\"object\",\"properties\":{"
    "\"b\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"maxItems\":3},"
    "\"c\":{\"type\":\"string\",\"maxLength\":4}},\"required\":[\"b\",\"c\"]},"
    "\"d\":{\"type\":\"null\"}},\"required\":[\"a\",\"d\"]}";

typedef struct cn_counts {
  int n_stop, n_length, n_other, n_invalid;
} cn_counts;

/* Runs CN_SEEDS requests under the schema's grammar (NULL: json_object) on
 * an engine of 8 slots; every STOP document must parse and validate. */
static cn_counts cn_run_schema(const char *schema_text, int64_t max_tokens) {
  cn_counts c = {0, 0, 0, 0};
  cfx f;
  if (!cfx_open(&f)) {
    c.n_other = -1;
    return c;
  }
  json_t *schema = NULL;
  if (schema_text) {
    json_error_t je;
    schema = json_loads(schema_text, 0, &je);
    if (!schema) test_fail_at(__FILE__, __LINE__, "bad test schema: %s", je.text);
  }
  grammar *g = NULL;
  if (json_schema_grammar(schema, &g)) test_fail_at(__FILE__, __LINE__, "json_schema_grammar: %s", err_detail());
  engine *e = g ? cfx_engine(&f, 8, 2048) : NULL;
  engine_req *h[CN_SEEDS] = {0};
  for (int i = 0; e && i < CN_SEEDS; i++) {
    engine_request q = cn_req(g, 1000 + (uint64_t)i, max_tokens);
    if (engine_submit(e, &q, &h[i])) test_fail_at(__FILE__, __LINE__, "submit %d: %s", i, err_detail());
  }
  for (int i = 0; e && i < CN_SEEDS; i++) {
    if (!h[i]) continue;
    cres *r = malloc(sizeof(*r));
    if (!r || !cn_collect(h[i], r)) {
      c.n_other++;
      free(r);
      continue;
    }
    if (r->finish == ENGINE_FINISH_LENGTH) {
      c.n_length++;
    } else if (r->finish != ENGINE_FINISH_STOP) {
      c.n_other++;
      test_fail_at(__FILE__, __LINE__, "seed %d: finish %s: %s", i, engine_finish_name(r->finish), r->err_msg);
    } else {
      c.n_stop++;
      json_error_t je;
      json_t *doc = json_loadb(r->text.data ? r->text.data : "", r->text.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
      bool ok = doc && (schema ? schema_validate(doc, schema, schema) : json_is_object(doc));
      if (!ok) {
        c.n_invalid++;
        test_fail_at(__FILE__, __LINE__, "seed %d: document %s: %.*s", i, doc ? "does not validate" : je.text,
                     (int)r->text.len, r->text.data ? r->text.data : "");
      }
      /* the text is exactly the tokens' pieces (nothing cut, nothing added) */
      buf dec = BUF_INIT;
      tok_decode(f.t, r->tokens, r->n, 0, &dec);
      if (dec.len != r->text.len || memcmp(dec.data, r->text.data, dec.len) != 0)
        test_fail_at(__FILE__, __LINE__, "seed %d: text differs from the decoded tokens", i);
      buf_free(&dec);
      json_decref(doc);
    }
    buf_free(&r->text);
    free(r);
    engine_req_free(h[i]);
  }
  engine_free(e);
  grammar_free(g);
  json_decref(schema);
  cfx_close(&f);
  fprintf(stderr, "    %s: %d stop (all valid: %s), %d length, %d other\n", schema_text ? schema_text : "json_object",
          c.n_stop, c.n_invalid ? "NO" : "yes", c.n_length, c.n_other);
  return c;
}

static void cn_expect(cn_counts c) {
  EXPECT_INT_EQ(c.n_invalid, 0);
  EXPECT_INT_EQ(c.n_other, 0);
  EXPECT_INT_EQ(c.n_stop + c.n_length, CN_SEEDS);
  /* length-finished documents must stay a small minority */
  EXPECT_TRUE(c.n_length * 10 <= CN_SEEDS);
}

TEST(constrain_schema_object_required) { cn_expect(cn_run_schema(S_OBJECT, 1500)); }
TEST(constrain_schema_array_min_max) { cn_expect(cn_run_schema(S_ARRAY, 1500)); }
TEST(constrain_schema_nested_objects) { cn_expect(cn_run_schema(S_NESTED, 1500)); }
TEST(constrain_json_object_mode) { cn_expect(cn_run_schema(NULL, 1500)); }

/* ---- the forced end, errors, limits ----------------------------------------- */

static grammar *cn_gbnf(const char *text) {
  grammar *g = NULL;
  if (grammar_parse(text, strlen(text), NULL, &g)) test_fail_at(__FILE__, __LINE__, "grammar_parse: %s", err_detail());
  return g;
}

/* root ::= "ab" | "abc": the output is "ab" or "abc" and always STOP. With
 * both EOG tokens (<s> and </s> are control tokens, so end tokens) banned
 * by the logit bias, "ab" must go on to "abc", after which nothing can
 * continue: the engine ends the choice STOP without an end token. */
TEST(constrain_forced_end) {
  cfx f;
  if (!cfx_open(&f)) return;
  grammar *g = cn_gbnf("root ::= \"ab\" | \"abc\"\n");
  engine *e = g ? cfx_engine(&f, 4, 256) : NULL;
  ASSERT_TRUE(e != NULL);
  int n_ab = 0, n_abc = 0;
  for (int i = 0; i < 20; i++) {
    engine_request q = cn_req(g, 77 + (uint64_t)i, 50);
    engine_req *h = NULL;
    ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
    cres r;
    if (cn_collect(h, &r)) {
      EXPECT_INT_EQ(r.finish, ENGINE_FINISH_STOP);
      bool ab = r.text.len == 2 && memcmp(r.text.data, "ab", 2) == 0;
      bool abc = r.text.len == 3 && memcmp(r.text.data, "abc", 3) == 0;
      EXPECT_TRUE(ab || abc);
      n_ab += ab;
      n_abc += abc;
    }
    buf_free(&r.text);
    engine_req_free(h);
  }
  EXPECT_INT_EQ(n_ab + n_abc, 20);
  sample_bias ban[2] = {{1, -INFINITY}, {2, -INFINITY}};
  for (int i = 0; i < 20; i++) {
    engine_request q = cn_req(g, 500 + (uint64_t)i, 50);
    q.sample.bias = ban;
    q.sample.n_bias = 2;
    engine_req *h = NULL;
    ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
    cres r;
    if (cn_collect(h, &r)) {
      EXPECT_INT_EQ(r.finish, ENGINE_FINISH_STOP);
      EXPECT_TRUE(r.text.len == 3 && memcmp(r.text.data, "abc", 3) == 0);
      /* no end token was sampled: every counted token is in the text */
      EXPECT_INT_EQ(r.n_completion, (int64_t)r.n);
    }
    buf_free(&r.text);
    engine_req_free(h);
  }
  engine_free(e);
  grammar_free(g);
  cfx_close(&f);
}

/* A grammar needs a tokenizer; max_tokens before the end gives LENGTH and an
 * incomplete document; a seed reproduces a constrained run. */
TEST(constrain_errors_length_determinism) {
  cfx f;
  if (!cfx_open(&f)) return;
  grammar *g = NULL;
  ASSERT_INT_EQ(json_schema_grammar(NULL, &g), 0);
  engine_params p = engine_default_params();
  p.n_slots = 2;
  p.n_ctx = 512;
  engine *raw = NULL;
  ASSERT_INT_EQ(engine_new(f.m, NULL, &p, &raw), 0);
  engine_request q = cn_req(g, 1, 10);
  engine_req *h = NULL;
  EXPECT_INT_EQ(engine_submit(raw, &q, &h), ERR_INVALID);
  EXPECT_TRUE(h == NULL);
  EXPECT_TRUE(strstr(err_detail(), "tokenizer") != NULL);
  engine_free(raw);

  engine *e = cfx_engine(&f, 2, 1024);
  ASSERT_TRUE(e != NULL);
  q = cn_req(g, 3, 3);
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  cres r;
  if (cn_collect(h, &r)) {
    EXPECT_INT_EQ(r.finish, ENGINE_FINISH_LENGTH);
    EXPECT_INT_EQ(r.n_completion, 3);
    EXPECT_TRUE(r.text.len >= 1 && r.text.data[strspn(r.text.data, " \t\n")] == '{');
    json_t *doc = json_loadb(r.text.data, r.text.len, JSON_DECODE_ANY, NULL);
    EXPECT_TRUE(doc == NULL); /* not complete yet */
    json_decref(doc);
  }
  buf_free(&r.text);
  engine_req_free(h);

  cres a, b;
  for (int k = 0; k < 2; k++) {
    q = cn_req(g, 4242, 1500);
    ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
    cn_collect(h, k ? &b : &a);
    engine_req_free(h);
  }
  EXPECT_INT_EQ(a.finish, ENGINE_FINISH_STOP);
  EXPECT_TRUE(a.n == b.n && a.n > 0 && memcmp(a.tokens, b.tokens, a.n * sizeof(int32_t)) == 0);
  buf_free(&a.text);
  buf_free(&b.text);
  engine_free(e);
  grammar_free(g);
  cfx_close(&f);
}

/* A constrained request (with n = 2 choices) in the same batches as three
 * unconstrained sampled ones: each unconstrained one gives exactly the
 * tokens it gives alone, and both constrained choices validate. */
TEST(constrain_batch_neighbours_unchanged) {
  cfx f;
  if (!cfx_open(&f)) return;
  grammar *g = NULL;
  json_t *schema = json_loads(S_ARRAY, 0, NULL);
  ASSERT_INT_EQ(json_schema_grammar(schema, &g), 0);
  engine *e = cfx_engine(&f, 6, 512);
  ASSERT_TRUE(e != NULL);
  static cres alone[3], mixed[3];
  engine_req *h[4] = {0};
  for (int i = 0; i < 3; i++) {
    engine_request q = cn_req(NULL, 90 + (uint64_t)i, 40);
    q.ignore_eog = true;
    ASSERT_INT_EQ(engine_submit(e, &q, &h[i]), 0);
    cn_collect(h[i], &alone[i]);
    engine_req_free(h[i]);
  }
  engine_pause(e, true);
  engine_request qg = cn_req(g, 5, 1500);
  qg.n = 2;
  ASSERT_INT_EQ(engine_submit(e, &qg, &h[3]), 0);
  for (int i = 0; i < 3; i++) {
    engine_request q = cn_req(NULL, 90 + (uint64_t)i, 40);
    q.ignore_eog = true;
    ASSERT_INT_EQ(engine_submit(e, &q, &h[i]), 0);
  }
  engine_pause(e, false);
  for (int i = 0; i < 3; i++) {
    cn_collect(h[i], &mixed[i]);
    EXPECT_INT_EQ(mixed[i].finish, ENGINE_FINISH_LENGTH);
    EXPECT_TRUE(mixed[i].n == 40 && alone[i].n == 40 &&
                memcmp(mixed[i].tokens, alone[i].tokens, 40 * sizeof(int32_t)) == 0);
    engine_req_free(h[i]);
  }
  /* the two choices: their deltas interleave, so collect per index */
  buf txt[2] = {BUF_INIT, BUF_INIT};
  int n_fin = 0, n_stop = 0;
  while (n_fin < 2) {
    engine_event ev;
    if (engine_req_next(h[3], 60000, &ev)) break;
    if (ev.type == ENGINE_EVENT_TEXT_DELTA && ev.index >= 0 && ev.index < 2)
      buf_append(&txt[ev.index], ev.text, ev.n_text);
    if (ev.type == ENGINE_EVENT_FINISH) {
      n_fin++;
      n_stop += ev.finish == ENGINE_FINISH_STOP;
    }
    engine_event_free(&ev);
  }
  EXPECT_INT_EQ(n_stop, 2);
  for (int c = 0; c < 2; c++) {
    json_t *doc = json_loadb(txt[c].data ? txt[c].data : "", txt[c].len, JSON_DECODE_ANY, NULL);
    EXPECT_TRUE(doc && schema_validate(doc, schema, schema));
    json_decref(doc);
    buf_free(&txt[c]);
  }
  engine_req_free(h[3]);
  for (int i = 0; i < 3; i++) {
    buf_free(&alone[i].text);
    buf_free(&mixed[i].text);
  }
  engine_free(e);
  grammar_free(g);
  json_decref(schema);
  cfx_close(&f);
}
