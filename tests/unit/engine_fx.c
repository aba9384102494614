/*
 * engine_fx.c - the engine tests' fixture (engine_fx.h): models, the
 * vocabulary, the reference greedy loop and the event collector.
 */
#include "engine_fx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "model/testgen.h"
#include "model/testgen_arch.h"
#include "test.h"

/* ---- fixture --------------------------------------------------------------- */


const char *fx_model_path(void) {
  static char path[512];
  static bool written;
  if (!written) {
    snprintf(path, sizeof path, "%s/engine_small.gguf", test_tmpdir());
    model_testgen g = model_testgen_small();
    g.n_ctx = 2048;
    g.seed = 7;
    if (model_testgen_write(&g, path)) {
      test_fail_at(__FILE__, __LINE__, "testgen: %s", err_detail());
      return NULL;
    }
    written = true;
  }
  return path;
}

int fx_vocab_build(fx *f) {
  static char texts[N_VOCAB][16];
  const char *toks[N_VOCAB];
  float scores[N_VOCAB];
  int32_t types[N_VOCAB];
  for (int i = 0; i < N_VOCAB; i++) {
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
      int j = i - 259;
      snprintf(texts[i], sizeof texts[i], "%s%c%c", j % 3 == 0 ? "\xe2\x96\x81" : "", 'a' + j % 26, 'a' + j / 26);
      types[i] = TOK_TYPE_NORMAL;
      scores[i] = -(float)j;
    }
    toks[i] = texts[i];
  }
  gguf_writer *w = NULL;
  if (gguf_writer_new(&w)) return -1;
  gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
  gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, N_VOCAB);
  gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, N_VOCAB);
  gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, N_VOCAB);
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

/* A gemma3 file of the same vocabulary size: five sliding layers of
 * window 8 and a global one (model_testgen_arch_small). */
const char *fx_gemma_path(void) {
  static char path[512];
  static bool written;
  if (!written) {
    snprintf(path, sizeof path, "%s/engine_gemma3.gguf", test_tmpdir());
    model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GEMMA3);
    g.n_ctx = 512;
    g.seed = 8;
    if (model_testgen_arch_write(&g, path)) {
      test_fail_at(__FILE__, __LINE__, "testgen: %s", err_detail());
      return NULL;
    }
    written = true;
  }
  return path;
}

bool fx_open_path(fx *f, const char *p) {
  memset(f, 0, sizeof(*f));
  if (!p) return false;
  if (model_open(p, &f->m)) {
    test_fail_at(__FILE__, __LINE__, "model_open: %s", err_detail());
    return false;
  }
  if (fx_vocab_build(f)) {
    test_fail_at(__FILE__, __LINE__, "vocabulary: %s", err_detail());
    return false;
  }
  return true;
}

bool fx_open(fx *f) { return fx_open_path(f, fx_model_path()); }

void fx_close(fx *f) {
  tok_free(f->t);
  gguf_close(f->vf);
  buf_free(&f->vocab);
  model_free(f->m);
}

engine *fx_engine(fx *f, int32_t n_slots, int64_t n_ctx, int64_t n_batch, int32_t queue_max) {
  engine_params p = engine_default_params();
  p.n_slots = n_slots;
  p.n_ctx = n_ctx;
  p.n_batch = n_batch;
  p.queue_max = queue_max;
  p.kv_type = MODEL_KV_F32;
  engine *e = NULL;
  if (engine_new(f->m, f->t, &p, &e)) test_fail_at(__FILE__, __LINE__, "engine_new: %s", err_detail());
  return e;
}

/* ---- the independent reference ------------------------------------------- */


/* Greedy: prompt, then n_gen tokens, by model_forward on its own context. */
bool fx_greedy(fx *f, const int32_t *prompt, int n_prompt, int n_gen, fx_ref *out) {
  model_ctx_params cp = model_ctx_default_params();
  cp.n_ctx = 512;
  cp.kv_type = MODEL_KV_F32;
  model_ctx *c = NULL;
  if (model_ctx_new(f->m, &cp, &c)) {
    test_fail_at(__FILE__, __LINE__, "model_ctx_new: %s", err_detail());
    return false;
  }
  float *lg = malloc(N_VOCAB * sizeof(float));
  int rc = model_forward(c, prompt, n_prompt, 0, lg, MODEL_LOGITS_LAST);
  int64_t pos = n_prompt;
  out->n = 0;
  while (rc == 0 && out->n < n_gen) {
    int best = 0;
    for (int i = 1; i < N_VOCAB; i++)
      if (lg[i] > lg[best]) best = i;
    double mx = lg[best], sum = 0;
    for (int i = 0; i < N_VOCAB; i++) sum += exp((double)lg[i] - mx);
    out->tokens[out->n] = best;
    out->logprob[out->n] = -log(sum);
    out->n++;
    if (out->n == n_gen) break;
    int32_t t = best;
    rc = model_forward(c, &t, 1, pos++, lg, MODEL_LOGITS_LAST);
  }
  if (rc) test_fail_at(__FILE__, __LINE__, "model_forward: %s", err_detail());
  free(lg);
  model_ctx_free(c);
  return rc == 0;
}

void fx_make_prompt(int32_t *p, int n, uint64_t seed) {
  sample_rng r;
  sample_rng_seed(&r, seed);
  for (int i = 0; i < n; i++) p[i] = 3 + (int32_t)(sample_rng_next(&r) % (N_VOCAB - 3));
}

/* ---- collecting a request's events ----------------------------------------- */


/* Pops events until FINISH (or 10 s without one). */
void fx_collect(engine_req *h, fx_result *r, const char *must_not_contain) {
  memset(r, 0, sizeof(*r));
  r->order_ok = true;
  for (;;) {
    engine_event ev;
    int rc = engine_req_next(h, 10000, &ev);
    if (rc) {
      test_fail_at(__FILE__, __LINE__, "engine_req_next: %s", err_name(rc));
      r->order_ok = false;
      return;
    }
    if (ev.type == ENGINE_EVENT_TEXT_DELTA) {
      if (r->usage_seen || r->finish_seen) r->order_ok = false;
      r->n_deltas++;
      buf_append(&r->text, ev.text, ev.n_text);
      if (ev.text[ev.n_text] != '\0') r->order_ok = false;
      if (must_not_contain && memmem(ev.text, ev.n_text, must_not_contain, strlen(must_not_contain)))
        snprintf(r->bad_delta, sizeof r->bad_delta, "%s", must_not_contain);
      for (size_t i = 0; i < ev.n_tokens && r->n < ARRAY_LEN(r->tokens); i++) {
        if (ev.logprobs && r->n < ARRAY_LEN(r->lp)) {
          r->lp[r->n] = ev.logprobs[i];
          r->have_lp = true;
        }
        r->tokens[r->n++] = ev.tokens[i];
      }
    } else if (ev.type == ENGINE_EVENT_USAGE) {
      if (r->usage_seen || r->finish_seen) r->order_ok = false;
      r->usage_seen = true;
      r->n_prompt = ev.n_prompt;
      r->n_cached = ev.n_cached;
      r->n_completion = ev.n_completion;
      r->t_first_ns = ev.t_first_ns;
      r->t_last_ns = ev.t_last_ns;
    } else {
      if (!r->usage_seen) r->order_ok = false;
      r->finish_seen = true;
      r->finish = ev.finish;
      r->stop_index = ev.stop_index;
      r->err_code = ev.err_code;
      snprintf(r->err_msg, sizeof r->err_msg, "%s", ev.err_msg ? ev.err_msg : "");
      engine_event_free(&ev);
      break;
    }
    engine_event_free(&ev);
  }
  engine_event extra;
  if (engine_req_next(h, 0, &extra) != ERR_NOT_FOUND) r->order_ok = false;
}

void fx_result_free(fx_result *r) { buf_free(&r->text); }

engine_request fx_greedy_req(const int32_t *prompt, size_t n, int64_t max_tokens) {
  engine_request q = engine_request_default();
  q.prompt = prompt;
  q.n_prompt = n;
  q.sample.temperature = 0;
  q.max_tokens = max_tokens;
  q.ignore_eog = true;
  return q;
}

bool fx_tokens_equal(const fx_result *r, const fx_ref *ref, int n) {
  if ((int)r->n != n || ref->n < n) return false;
  for (int i = 0; i < n; i++)
    if (r->tokens[i] != ref->tokens[i]) return false;
  return true;
}

void fx_run_one(engine *e, const int32_t *prompt, size_t n, int64_t max_tokens, fx_result *r) {
  engine_request q = fx_greedy_req(prompt, n, max_tokens);
  engine_req *h = NULL;
  if (engine_submit(e, &q, &h)) {
    test_fail_at(__FILE__, __LINE__, "engine_submit: %s", err_detail());
    memset(r, 0, sizeof(*r));
    return;
  }
  fx_collect(h, r, NULL);
  engine_req_free(h);
}

