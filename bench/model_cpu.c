/*
 * bench/model_cpu.c - prompt processing and generation speed of one model
 * on ONE thread, measured in thread CPU time rather than wall time, so two
 * builds can be compared on a machine other processes are loading (the
 * time slices another process takes do not count). Not a test; built and
 * run by bench/model_cpu.sh against build/libparley.a. Wall-clock figures
 * with 2 threads come from `parley bench` (bench/model.sh).
 *
 *   model_cpu MODEL.gguf [pp=128] [tg=32] [reps=3]
 * prints the median tokens per CPU-second of reps runs for a pp-token
 * prompt (one batch, empty cache) and tg single-token steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/err.h"
#include "model/model.h"

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: model_cpu MODEL.gguf [pp=128] [tg=32] [reps=3]\n");
    return 2;
  }
  int pp = argc > 2 ? atoi(argv[2]) : 128, tg = argc > 3 ? atoi(argv[3]) : 32;
  int reps = argc > 4 ? atoi(argv[4]) : 3;
  if (pp < 1 || tg < 0 || reps < 1 || reps > 100) return 2;
  model *m = NULL;
  model_ctx *ctx = NULL;
  if (model_open(argv[1], &m)) {
    fprintf(stderr, "model_cpu: %s\n", err_detail());
    return 1;
  }
  const model_hparams *hp = model_get_hparams(m);
  model_ctx_params cp = model_ctx_default_params();
  cp.n_ctx = pp > tg ? pp : tg;
  cp.n_batch = pp;
  cp.n_threads = 1;
  if (model_ctx_new(m, &cp, &ctx)) {
    fprintf(stderr, "model_cpu: %s\n", err_detail());
    return 1;
  }
  int32_t *toks = malloc(sizeof *toks * (size_t)cp.n_ctx);
  float *logits = malloc(sizeof *logits * (size_t)hp->n_vocab);
  double *tp = malloc(sizeof *tp * (size_t)reps), *tt = malloc(sizeof *tt * (size_t)reps);
  if (!toks || !logits || !tp || !tt) return 1;
  uint64_t st = 0x2545f4914f6cdd1dull;
  for (int64_t i = 0; i < cp.n_ctx; i++) {
    st ^= st << 13;
    st ^= st >> 7;
    st ^= st << 17;
    toks[i] = (int32_t)(st % (uint64_t)hp->n_vocab);
  }
  if (model_forward(ctx, toks, 8, 0, logits, MODEL_LOGITS_LAST)) return 1; /* page-ins */
  for (int r = 0; r < reps; r++) {
    double t0 = thread_cpu_s();
    if (model_forward(ctx, toks, pp, 0, logits, MODEL_LOGITS_LAST)) return 1;
    tp[r] = pp / (thread_cpu_s() - t0);
    t0 = thread_cpu_s();
    for (int i = 0; i < tg; i++)
      if (model_forward(ctx, &toks[i], 1, i, logits, MODEL_LOGITS_LAST)) return 1;
    tt[r] = tg ? tg / (thread_cpu_s() - t0) : 0;
  }
  qsort(tp, (size_t)reps, sizeof *tp, cmp_d);
  qsort(tt, (size_t)reps, sizeof *tt, cmp_d);
  printf("pp%d %.2f t/cpu-s (min %.2f max %.2f)  tg%d %.2f t/cpu-s (min %.2f max %.2f)\n", pp,
         tp[reps / 2], tp[0], tp[reps - 1], tg, tt[reps / 2], tt[0], tt[reps - 1]);
  model_ctx_free(ctx);
  model_free(m);
  free(toks);
  free(logits);
  free(tp);
  free(tt);
  return 0;
}
