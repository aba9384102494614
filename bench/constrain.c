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
 * kinds). Each stream is a client thread that generates -n tokens: an
 * unconstrained request ignores EOG and gives them all; a constrained one
 * may end early with a complete document, and the stream then submits the
 * next request (same prompt, prefix cache) until it has -n tokens, so the
 * batch stays as full as without a grammar. tokens/s = all tokens / wall
 * time of the run.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One stream: requests one after another until n_tokens were generated
 * (a constrained request may end early with a complete document; the next
 * one keeps the stream, and so the batch, full). */
typedef struct stream {
  engine *e;
  const grammar *g;
  int n_tokens;
  uint64_t seed;
  int64_t n_tok;
  int n_stop;
} stream;

static void *stream_run(void *arg) {
  static const int32_t prompt[] = {1, 450, 1234, 338, 263, 1243, 29889, 13};
  stream *s = arg;
  for (int k = 0; s->n_tok < s->n_tokens; k++) {
    engine_request q = engine_request_default();
    q.prompt = prompt;
    q.n_prompt = sizeof prompt / sizeof prompt[0];
    q.sample.temperature = 1.0f;
    q.sample.seed = s->seed + (uint64_t)k * 1000;
    q.max_tokens = s->n_tokens - s->n_tok;
    q.ignore_eog = s->g == NULL;
    q.grammar = s->g;
    engine_req *h = NULL;
    if (engine_submit(s->e, &q, &h)) {
      fprintf(stderr, "submit: %s\n", err_detail());
      exit(1);
    }
    int64_t got = 0;
    for (;;) {
      engine_event ev;
      if (engine_req_next(h, -1, &ev)) break;
      if (ev.type == ENGINE_EVENT_USAGE) got = ev.n_completion;
      bool fin = ev.type == ENGINE_EVENT_FINISH;
      if (fin && ev.finish == ENGINE_FINISH_ERROR) fprintf(stderr, "stream: %s\n", ev.err_msg ? ev.err_msg : "?");
      if (fin && ev.finish == ENGINE_FINISH_STOP) s->n_stop++;
      engine_event_free(&ev);
      if (fin) break;
    }
    engine_req_free(h);
    if (got <= 0) break;
    s->n_tok += got;
  }
  return NULL;
}

/* One run: n_streams streams at once; returns tokens/s, *n_tok, *n_stop,
 * and the process's CPU time per token in *cpu_us. */
static double run_once(engine *e, const grammar *g, int n_streams, int n_tokens, uint64_t seed, int64_t *n_tok,
                       int *n_stop, double *cpu_us) {
  double c0 = cpu_s();
  stream st[64];
  pthread_t th[64];
  double t0 = now_s();
  for (int i = 0; i < n_streams; i++) {
    st[i] = (stream){.e = e, .g = g, .n_tokens = n_tokens, .seed = seed + (uint64_t)i};
    pthread_create(&th[i], NULL, stream_run, &st[i]);
  }
  *n_tok = 0;
  *n_stop = 0;
  for (int i = 0; i < n_streams; i++) {
    pthread_join(th[i], NULL);
    *n_tok += st[i].n_tok;
    *n_stop += st[i].n_stop;
  }
  *cpu_us = *n_tok ? (cpu_s() - c0) * 1e6 / (double)*n_tok : 0;
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
  double cu, plain[100], constr[100], cplain[100], cconstr[100];
  run_once(e, NULL, n_streams, 8, 1, &nt, &ns, &cu);
  run_once(e, g, n_streams, 8, 1, &nt, &ns, &cu);
  for (int r = 0; r < n_runs; r++) {
    uint64_t seed = 100 + (uint64_t)r * 64;
    plain[r] = run_once(e, NULL, n_streams, n_tokens, seed, &nt, &ns, &cplain[r]);
    printf("run %d  plain    %8.1f tok/s %8.1f cpu us/token (%lld tokens)\n", r, plain[r], cplain[r], (long long)nt);
    constr[r] = run_once(e, g, n_streams, n_tokens, seed, &nt, &ns, &cconstr[r]);
    printf("run %d  grammar  %8.1f tok/s %8.1f cpu us/token (%lld tokens, %d complete documents)\n", r, constr[r],
           cconstr[r], (long long)nt, ns);
    fflush(stdout);
  }
  qsort(plain, (size_t)n_runs, sizeof(double), cmp_double);
  qsort(constr, (size_t)n_runs, sizeof(double), cmp_double);
  qsort(cplain, (size_t)n_runs, sizeof(double), cmp_double);
  qsort(cconstr, (size_t)n_runs, sizeof(double), cmp_double);
  double mp_ = plain[n_runs / 2], mc = constr[n_runs / 2];
  printf("median: plain %.1f tok/s, json_object grammar %.1f tok/s: %.1f%% slower\n", mp_, mc,
         100.0 * (1.0 - mc / mp_));
  double cp = cplain[n_runs / 2], cc = cconstr[n_runs / 2];
  printf("median CPU per token: plain %.1f us, grammar %.1f us: %+.1f%%\n", cp, cc, 100.0 * (cc / cp - 1.0));
  engine_free(e);
  grammar_free(g);
  tok_free(t);
  gguf_close(vf);
  model_free(m);
  return 0;
}
