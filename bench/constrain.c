/*
 * bench/constrain.c - tokens/s of the engine with and without a grammar
 * (the json_object grammar) on the same model, in alternating runs in the
 * same time window; prints each run and the medians.
 * Run: bash bench/constrain.sh [options]
 *
 *   -m MODEL.gguf   a llama GGUF (default: the shared llama-2-tiny-random,
 *                   which has its own 32,000-token SentencePiece vocabulary)
 *   --tinyllama     a TinyLlama-shaped Q4_K_M random model instead (written
 *                   to build/bench-tinyllama-q4km.gguf once), with the
 *                   shared Llama SPM vocabulary of the same 32,000 tokens
 *   -v VOCAB.gguf   take the tokenizer from this file instead of the model
 *   -n N            max tokens per stream (default 64)
 *   -s N            concurrent streams (default 1)
 *   -r N            runs of each kind (default 5)
 *   -t N            compute threads (default 2)
 *
 * Sampling: temperature 1, seed per run and stream (the same seeds for both
 * kinds). Unconstrained streams ignore EOG (they always give -n tokens); a
 * constrained stream ends when its document is complete, so tokens/s counts
 * the tokens each run actually generated over its wall time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/util.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen.h"
#include "sample/json_schema.h"

static double now_s(void) { return (double)time_mono_ns() * 1e-9; }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One run: n_streams requests at once; returns tokens/s, *n_tok, *n_stop. */
static double run_once(engine *e, const grammar *g, int n_streams, int n_tokens, uint64_t seed, int64_t *n_tok,
                       int *n_stop) {
  static const int32_t prompt[] = {1, 450, 1234, 338, 263, 1243, 29889, 13};
  engine_req *h[64] = {0};
  double t0 = now_s();
  for (int i = 0; i < n_streams; i++) {
    engine_request q = engine_request_default();
    q.prompt = prompt;
    q.n_prompt = sizeof prompt / sizeof prompt[0];
    q.sample.temperature = 1.0f;
    q.sample.seed = seed + (uint64_t)i;
    q.max_tokens = n_tokens;
    q.ignore_eog = g == NULL;
    q.grammar = g;
    if (engine_submit(e, &q, &h[i])) {
      fprintf(stderr, "submit: %s\n", err_detail());
      exit(1);
    }
  }
  *n_tok = 0;
  *n_stop = 0;
  for (int i = 0; i < n_streams; i++) {
    for (;;) {
      engine_event ev;
      if (engine_req_next(h[i], -1, &ev)) break;
      if (ev.type == ENGINE_EVENT_USAGE) *n_tok += ev.n_completion;
      bool fin = ev.type == ENGINE_EVENT_FINISH;
      if (fin && ev.finish == ENGINE_FINISH_ERROR) fprintf(stderr, "stream: %s\n", ev.err_msg ? ev.err_msg : "?");
      if (fin && ev.finish == ENGINE_FINISH_STOP) (*n_stop)++;
      engine_event_free(&ev);
      if (fin) break;
    }
    engine_req_free(h[i]);
  }
  return (double)*n_tok / (now_s() - t0);
}

int main(int argc, char **argv) {
  const char *model_path = NULL, *vocab_path = NULL;
  bool tinyllama = false;
  int n_tokens = 64, n_streams = 1, n_runs = 5, n_threads = 2;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-m") == 0 && i + 1 < argc) model_path = argv[++i];
    else if (strcmp(argv[i], "-v") == 0 && i + 1 < argc) vocab_path = argv[++i];
    else if (strcmp(argv[i], "--tinyllama") == 0) tinyllama = true;
    else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) n_tokens = atoi(argv[++i]);
    else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) n_streams = atoi(argv[++i]);
    else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) n_runs = atoi(argv[++i]);
    else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) n_threads = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [-m MODEL] [--tinyllama] [-v VOCAB] [-n N] [-s N] [-r N] [-t N]\n", argv[0]);
      return 2;
    }
  }
  if (n_streams < 1 || n_streams > 64 || n_runs < 1 || n_runs > 100 || n_tokens < 1) {
    fprintf(stderr, "bad -s/-r/-n\n");
    return 2;
  }
  const char *shared = getenv("PARLEY_SHARED") ? getenv("PARLEY_SHARED") : "/work/shared";
  char mp[512], vp[512];
  if (tinyllama) {
    snprintf(mp, sizeof mp, "build/bench-tinyllama-q4km.gguf");
    struct stat st;
    if (stat(mp, &st) != 0) {
      fprintf(stderr, "writing %s once...\n", mp);
      model_testgen g = model_testgen_tinyllama(TENSOR_TYPE_Q4_K);
      if (model_testgen_write(&g, mp)) {
        fprintf(stderr, "testgen: %s\n", err_detail());
        return 1;
      }
    }
    model_path = mp;
    if (!vocab_path) {
      snprintf(vp, sizeof vp, "%s/vocab/ggml-vocab-llama-spm.gguf", shared);
      vocab_path = vp;
    }
  } else if (!model_path) {
    snprintf(mp, sizeof mp, "%s/models/llama-2-tiny-random.gguf", shared);
    model_path = mp;
  }
  if (!vocab_path) vocab_path = model_path;
  model *m = NULL;
  gguf_file *vf = NULL;
  tok *t = NULL;
  grammar *g = NULL;
  if (model_open(model_path, &m) || gguf_open(vocab_path, &vf) || tok_load(vf, &t) || json_schema_grammar(NULL, &g)) {
    fprintf(stderr, "setup (%s, %s): %s\n", model_path, vocab_path, err_detail());
    return 1;
  }
  engine_params p = engine_default_params();
  p.n_slots = n_streams;
  p.n_ctx = 1024;
  p.n_threads = n_threads;
  engine *e = NULL;
  if (engine_new(m, t, &p, &e)) {
    fprintf(stderr, "engine_new: %s\n", err_detail());
    return 1;
  }
  printf("model %s, vocabulary %s (%d tokens), %d stream(s), max %d tokens, %d threads\n", model_path, vocab_path,
         tok_n_vocab(t), n_streams, n_tokens, n_threads);
  /* warm-up (also builds the grammar vocabulary, once per engine) */
  int64_t nt;
  int ns;
  run_once(e, NULL, n_streams, 8, 1, &nt, &ns);
  run_once(e, g, n_streams, 8, 1, &nt, &ns);
  double plain[100], constr[100];
  for (int r = 0; r < n_runs; r++) {
    uint64_t seed = 100 + (uint64_t)r * 64;
    plain[r] = run_once(e, NULL, n_streams, n_tokens, seed, &nt, &ns);
    printf("run %d  plain    %8.1f tok/s (%lld tokens)\n", r, plain[r], (long long)nt);
    constr[r] = run_once(e, g, n_streams, n_tokens, seed, &nt, &ns);
    printf("run %d  grammar  %8.1f tok/s (%lld tokens, %d complete documents)\n", r, constr[r], (long long)nt, ns);
    fflush(stdout);
  }
  qsort(plain, (size_t)n_runs, sizeof(double), cmp_double);
  qsort(constr, (size_t)n_runs, sizeof(double), cmp_double);
  double mp_ = plain[n_runs / 2], mc = constr[n_runs / 2];
  printf("median: plain %.1f tok/s, json_object grammar %.1f tok/s: %.1f%% slower\n", mp_, mc, 100.0 * (1.0 - mc / mp_));
  engine_free(e);
  grammar_free(g);
  tok_free(t);
  gguf_close(vf);
  model_free(m);
  return 0;
}
