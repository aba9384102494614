/*
 * engine_fx.h - the serving-engine tests' fixture (test_engine.c,
 * test_engine_rs.c): small random-weight models, a synthetic SentencePiece
 * vocabulary of N_VOCAB tokens (<unk>, <s>, </s>, 256 byte tokens, 41
 * two-letter pieces), an engine on them, the independent reference (a
 * direct model_forward + argmax loop on a fresh context) and a collector of
 * a request's events that checks their order.
 */
#ifndef PARLEY_TESTS_ENGINE_FX_H
#define PARLEY_TESTS_ENGINE_FX_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "tok/tok.h"

#define N_VOCAB 300

typedef struct fx {
  model *m;
  tok *t;
  buf vocab;
  gguf_file *vf;
} fx;

typedef struct fx_ref {
  int32_t tokens[256];
  double logprob[256]; /* log-softmax of the chosen token, in double */
  int n;
} fx_ref;

typedef struct fx_result {
  int32_t tokens[2048];
  sample_result lp[256];
  size_t n;
  bool have_lp;
  buf text;
  int n_deltas;
  bool usage_seen, finish_seen, order_ok;
  int64_t n_prompt, n_cached, n_completion;
  uint64_t t_first_ns, t_last_ns;
  enum engine_finish finish;
  int32_t stop_index;
  int err_code;
  char err_msg[256];
  char bad_delta[64]; /* a delta that contained this string (stop check) */
} fx_result;

/* The generated files (written once into the test directory): a small
 * llama (model_testgen_small, n_ctx 2048) and a gemma3 with sliding layers. */
const char *fx_model_path(void);
/* f->t: the synthetic vocabulary. */
int fx_vocab_build(fx *f);
const char *fx_gemma_path(void);
/* Opens the model at p (fx_open: the llama) and the vocabulary; false
 * (a failure recorded) when either fails. */
bool fx_open_path(fx *f, const char *p);
bool fx_open(fx *f);
void fx_close(fx *f);
/* An engine with an F32 cache; NULL (a failure recorded) on error. */
engine *fx_engine(fx *f, int32_t n_slots, int64_t n_ctx, int64_t n_batch, int32_t queue_max);
/* The reference: prompt, then n_gen greedy tokens and their log-softmax
 * (double), by model_forward on a fresh one-sequence context. */
bool fx_greedy(fx *f, const int32_t *prompt, int n_prompt, int n_gen, fx_ref *out);
/* n tokens 3..N_VOCAB-1 from seed. */
void fx_make_prompt(int32_t *p, int n, uint64_t seed);
/* Pops h's events until FINISH (10 s at most), checking their order. */
void fx_collect(engine_req *h, fx_result *r, const char *must_not_contain);
void fx_result_free(fx_result *r);
/* A greedy request that ignores end tokens. */
engine_request fx_greedy_req(const int32_t *prompt, size_t n, int64_t max_tokens);
bool fx_tokens_equal(const fx_result *r, const fx_ref *ref, int n);
/* Submits fx_greedy_req and collects it. */
void fx_run_one(engine *e, const int32_t *prompt, size_t n, int64_t max_tokens, fx_result *r);

#endif
