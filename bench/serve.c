/*
 * bench/serve.c - the serving engine through its request queue (no HTTP):
 * time to first token, per-stream and aggregate tokens/s for 1, 4 and 8
 * concurrent streams; how much a long prompt arriving while 3 streams
 * decode delays their next token; time to first token of a repeated long
 * prefix (prefix cache). Run: bash bench/serve.sh [MODEL.gguf] [options]
 *
 *   MODEL.gguf      a llama GGUF (default: writes a TinyLlama-shaped Q4_K_M
 *                   random model to build/bench-tinyllama-q4km.gguf once)
 *   -t N            compute threads (default 2)
 *   -n N            tokens generated per stream (default 32)
 *   -p N            prompt tokens per stream (default 32)
 *   -L N            long prompt length (default 2000)
 *   -c N            n_chunk: prompt tokens per step while others decode
 *                   (default 0 = up to n_batch)
 *   -b MS           chunk_budget_ms: also cap those tokens to what the
 *                   measured time per token fits in MS (default
 *                   ENGINE_CHUNK_BUDGET_MS, as `parley serve`: 160; 0 =
 *                   no time cap)
 *   --streams LIST  comma list of concurrency levels (default 1,4,8; 0 =
 *                   skip to the long-prompt part)
 *   --small         use the small test shape instead (quick smoke run)
 *   -v              log every step that carries prompt tokens (its makeup,
 *                   time and the scheduler's cost estimates) to stderr
 *
 * Prompts are random token ids (no tokenizer needed: the engine runs with
 * tok = NULL), greedy, EOG ignored, so every stream generates exactly -n.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "engine/engine.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen.h"

static double now_s(void) { return (double)time_mono_ns() * 1e-9; }

static void rand_prompt(int32_t *p, int n, int32_t n_vocab, uint64_t seed) {
  sample_rng r;
  sample_rng_seed(&r, seed);
  for (int i = 0; i < n; i++) p[i] = 3 + (int32_t)(sample_rng_next(&r) % (uint64_t)(n_vocab - 3));
}

typedef struct stream {
  engine_req *h;
  double t_submit, t_first, t_last, max_gap;
  int64_t n_tokens;
  bool done;
} stream;

static void on_event(stream *s, engine_event *ev) {
  double t = now_s();
  if (ev->type == ENGINE_EVENT_TEXT_DELTA && ev->n_tokens) {
    if (s->n_tokens == 0) s->t_first = t;
    else if (t - s->t_last > s->max_gap) s->max_gap = t - s->t_last;
    s->t_last = t;
    s->n_tokens += (int64_t)ev->n_tokens;
  } else if (ev->type == ENGINE_EVENT_FINISH) {
    if (ev->finish == ENGINE_FINISH_ERROR) fprintf(stderr, "stream: %s\n", ev->err_msg ? ev->err_msg : "?");
    s->done = true;
  }
  engine_event_free(ev);
}

/* Pops whatever is ready on every stream, blocking up to 2 ms on the first
 * unfinished one (no spinning), until all are done, or (until_done >= 0)
 * until that many are done, or (until_done == 0) after one round. */
static void drain(stream *s, int n, int until_done) {
  for (;;) {
    int n_done = 0;
    bool waited = false;
    for (int i = 0; i < n; i++) {
      engine_event ev;
      if (!s[i].done && !waited) {
        waited = true;
        if (engine_req_next(s[i].h, 2, &ev) == 0) on_event(&s[i], &ev);
      }
      while (!s[i].done && engine_req_next(s[i].h, 0, &ev) == 0) on_event(&s[i], &ev);
      if (s[i].done) n_done++;
    }
    if (n_done == n || (until_done >= 0 && n_done >= until_done)) return;
  }
}

static int submit(engine *e, const int32_t *p, int n_prompt, int n_gen, stream *s) {
  engine_request q = engine_request_default();
  q.prompt = p;
  q.n_prompt = (size_t)n_prompt;
  q.sample.temperature = 0;
  q.max_tokens = n_gen;
  q.ignore_eog = true;
  memset(s, 0, sizeof(*s));
  s->t_submit = now_s();
  int rc = engine_submit(e, &q, &s->h);
  if (rc) fprintf(stderr, "submit: %s\n", err_detail());
  return rc;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  int n_threads = 2, n_gen = 32, n_prompt = 32, n_long = 2000, n_chunk = 0, budget_ms = ENGINE_CHUNK_BUDGET_MS;
  bool small = false;
  char streams_arg[64] = "1,4,8";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-t") && i + 1 < argc) n_threads = atoi(argv[++i]);
    else if (!strcmp(a, "-n") && i + 1 < argc) n_gen = atoi(argv[++i]);
    else if (!strcmp(a, "-p") && i + 1 < argc) n_prompt = atoi(argv[++i]);
    else if (!strcmp(a, "-L") && i + 1 < argc) n_long = atoi(argv[++i]);
    else if (!strcmp(a, "-c") && i + 1 < argc) n_chunk = atoi(argv[++i]);
    else if (!strcmp(a, "-b") && i + 1 < argc) budget_ms = atoi(argv[++i]);
    else if (!strcmp(a, "--streams") && i + 1 < argc) snprintf(streams_arg, sizeof streams_arg, "%s", argv[++i]);
    else if (!strcmp(a, "--small")) small = true;
    else if (!strcmp(a, "-v")) log_set_level(LOG_LEVEL_DEBUG);
    else if (a[0] != '-') path = a;
    else {
      fprintf(stderr, "unknown option %s\n", a);
      return 2;
    }
  }
  if (n_gen < 1 || n_prompt < 1 || n_long < 1 || n_threads < 1) {
    fprintf(stderr, "-n, -p, -L and -t must be positive\n");
    return 2;
  }
  char gen_path[256];
  if (!path) {
    model_testgen g = small ? model_testgen_small() : model_testgen_tinyllama(TENSOR_TYPE_Q4_K);
    if (small) g.n_ctx = 4096;
    snprintf(gen_path, sizeof gen_path, "build/bench-%s.gguf", small ? "small" : "tinyllama-q4km");
    struct stat st;
    if (stat(gen_path, &st) != 0) {
      fprintf(stderr, "writing %s ...\n", gen_path);
      if (model_testgen_write(&g, gen_path)) {
        fprintf(stderr, "testgen: %s\n", err_detail());
        return 1;
      }
    }
    path = gen_path;
  }
  model *m = NULL;
  if (model_open(path, &m)) {
    fprintf(stderr, "%s: %s\n", path, err_detail());
    return 1;
  }
  int32_t n_vocab = (int32_t)model_get_hparams(m)->n_vocab;
  int max_streams = 1;
  for (char *tokp = streams_arg; *tokp;) {
    int v = atoi(tokp);
    if (v > max_streams) max_streams = v;
    char *c = strchr(tokp, ',');
    if (!c) break;
    tokp = c + 1;
  }
  if (max_streams < 4) max_streams = 4; /* the long-prompt part runs 4 */
  int64_t n_ctx = n_long + n_prompt + n_gen + 8;
  printf("model %s, %d threads, prompt %d, generate %d, n_ctx/slot %lld\n", path, n_threads, n_prompt, n_gen,
         (long long)n_ctx);

  int32_t *prompts = malloc((size_t)(max_streams + 1) * (size_t)(n_long + n_prompt) * sizeof(int32_t));
  stream *s = calloc((size_t)max_streams + 1, sizeof(*s));
  if (!prompts || !s) return 1;

  /* 1. concurrency levels */
  printf("\nstreams  ttft_mean_s  ttft_max_s  per_stream_tok/s  aggregate_tok/s  decode_aggregate_tok/s\n");
  printf("(per stream: tokens / time from submit to its last token; aggregate: all tokens / wall time,\n"
         " prompts included; decode aggregate: the sum over streams of (tokens - 1) / (last - first token),\n"
         " the decoding rate alone, as servers report generation speed apart from prompt processing)\n");
  for (char *tokp = streams_arg; *tokp;) {
    int k = atoi(tokp);
    if (k >= 1 && k <= max_streams) {
      engine_params ep = engine_default_params();
      ep.n_slots = k;
      ep.n_ctx = n_prompt + n_gen + 8;
      ep.n_threads = n_threads;
      engine *e = NULL;
      if (engine_new(m, NULL, &ep, &e)) {
        fprintf(stderr, "engine_new: %s\n", err_detail());
        return 1;
      }
      engine_pause(e, true);
      for (int i = 0; i < k; i++) {
        rand_prompt(prompts + (size_t)i * (size_t)n_prompt, n_prompt, n_vocab, 1000 + (uint64_t)i);
        if (submit(e, prompts + (size_t)i * (size_t)n_prompt, n_prompt, n_gen, &s[i])) return 1;
      }
      double t0 = now_s();
      for (int i = 0; i < k; i++) s[i].t_submit = t0;
      engine_pause(e, false);
      drain(s, k, -1);
      double t_end = now_s(), ttft_sum = 0, ttft_max = 0, rate_sum = 0, dec_sum = 0;
      int64_t total = 0;
      for (int i = 0; i < k; i++) {
        double ttft = s[i].t_first - t0;
        ttft_sum += ttft;
        if (ttft > ttft_max) ttft_max = ttft;
        if (s[i].t_last > t0) rate_sum += (double)s[i].n_tokens / (s[i].t_last - t0);
        if (s[i].n_tokens > 1 && s[i].t_last > s[i].t_first)
          dec_sum += (double)(s[i].n_tokens - 1) / (s[i].t_last - s[i].t_first);
        total += s[i].n_tokens;
        engine_req_free(s[i].h);
      }
      printf("%7d  %11.3f  %10.3f  %16.2f  %15.2f  %22.2f\n", k, ttft_sum / k, ttft_max, rate_sum / k,
             (double)total / (t_end - t0), dec_sum);
      fflush(stdout);
      engine_free(e);
    }
    char *c = strchr(tokp, ',');
    if (!c) break;
    tokp = c + 1;
  }

  /* 2. a long prompt arriving while 3 streams decode; 3. the same long
   * prefix again (prefix cache) */
  engine_params ep = engine_default_params();
  ep.n_slots = 4;
  ep.n_ctx = n_ctx;
  ep.n_threads = n_threads;
  ep.n_chunk = n_chunk;
  ep.chunk_budget_ms = budget_ms;
  engine *e = NULL;
  if (engine_new(m, NULL, &ep, &e)) {
    fprintf(stderr, "engine_new: %s\n", err_detail());
    return 1;
  }
  /* the three run until their context is full (they are cancelled after) */
  for (int i = 0; i < 3; i++) {
    rand_prompt(prompts + (size_t)i * (size_t)n_prompt, n_prompt, n_vocab, 2000 + (uint64_t)i);
    if (submit(e, prompts + (size_t)i * (size_t)n_prompt, n_prompt, 0, &s[i])) return 1;
  }
  int32_t *longp = prompts + (size_t)4 * (size_t)n_prompt;
  rand_prompt(longp, n_long, n_vocab, 3000);
  /* steady decoding first: a baseline of their gaps over 8 tokens each */
  for (;;) {
    drain(s, 3, 0);
    bool ok = true;
    for (int i = 0; i < 3; i++) ok = ok && s[i].n_tokens >= 4;
    if (ok) break;
  }
  for (int i = 0; i < 3; i++) s[i].max_gap = 0;
  int64_t base[3];
  for (int i = 0; i < 3; i++) base[i] = s[i].n_tokens;
  for (;;) {
    drain(s, 3, 0);
    bool ok = true;
    for (int i = 0; i < 3; i++) ok = ok && (s[i].n_tokens >= base[i] + 8 || s[i].done);
    if (ok) break;
  }
  double gap_before = 0;
  for (int i = 0; i < 3; i++)
    if (s[i].max_gap > gap_before) gap_before = s[i].max_gap;
  for (int i = 0; i < 3; i++) s[i].max_gap = 0;
  if (submit(e, longp, n_long, 1, &s[3])) return 1;
  double t_long = s[3].t_submit;
  while (!s[3].done) drain(s, 4, 0);
  double ttft_long = s[3].t_first - t_long;
  double gap_during = 0;
  for (int i = 0; i < 3; i++)
    if (s[i].max_gap > gap_during) gap_during = s[i].max_gap;
  for (int i = 0; i < 3; i++) engine_req_cancel(s[i].h);
  drain(s, 3, -1);
  for (int i = 0; i < 4; i++) engine_req_free(s[i].h);
  printf("\nlong prompt (%d tokens, n_chunk %d, chunk budget %d ms) while 3 streams decode:\n", n_long, n_chunk,
         budget_ms);
  printf("  their largest inter-token gap: %.3f s before, %.3f s while it prefilled\n", gap_before, gap_during);
  printf("  its time to first token: %.3f s\n", ttft_long);

  longp[n_long - 1] = longp[n_long - 1] == 5 ? 6 : 5; /* same prefix, new last token */
  if (submit(e, longp, n_long, 1, &s[0])) return 1;
  drain(s, 1, -1);
  printf("repeated %d-token prefix: time to first token %.3f s\n", n_long, s[0].t_first - s[0].t_submit);
  engine_req_free(s[0].h);
  engine_free(e);
  free(prompts);
  free(s);
  model_free(m);
  return 0;
}
