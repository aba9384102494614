/*
 * bench/step.c - what one continuous-batching step costs, by its makeup:
 * n_dec single decode tokens (one per sequence) with or without a prompt
 * chunk of k tokens of another sequence at position p. This is the cost
 * model the engine's chunk scheduler (engine.c, step_chunk_tokens) relies
 * on: a fixed part (the weights read once), a part per chunk token, and
 * attention that grows with p. Run: bash bench/step.sh [MODEL.gguf] [-t N]
 * [-r REPS]. Prints wall and process CPU milliseconds (medians of REPS);
 * on a shared machine CPU / threads is the steadier figure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "base/util.h"
#include "model/model.h"

static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const char *path = "build/bench-models/tinyllama-Q4_K_M.gguf";
  int n_threads = 2, reps = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-t") && i + 1 < argc) n_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
    else path = argv[i];
  }
  if (reps < 1 || reps > 64) reps = 5;
  model *m = NULL;
  if (model_open(path, &m)) {
    fprintf(stderr, "%s: %s\n", path, err_detail());
    return 1;
  }
  enum { N_SEQ = 5, N_MAX = 64 + 4 };
  model_ctx_params cp = model_ctx_default_params();
  cp.n_ctx = 2100;
  cp.n_seq = N_SEQ;
  cp.n_threads = n_threads;
  model_ctx *c = NULL;
  if (model_ctx_new(m, &cp, &c)) {
    fprintf(stderr, "ctx: %s\n", err_detail());
    return 1;
  }
  int64_t n_vocab = model_get_hparams(m)->n_vocab;
  float *logits = malloc((size_t)N_MAX * (size_t)n_vocab * sizeof(float));
  int32_t tok[N_MAX + 2048], seq[N_MAX + 2048];
  int64_t pos[N_MAX + 2048];
  bool want[N_MAX + 2048];
  /* sequences 0..3 hold a 40-token history; sequence 4 holds 2,000 */
  for (int s = 0; s < N_SEQ; s++) {
    int64_t np = s < 4 ? 40 : 2000;
    for (int64_t off = 0; off < np; off += 500) {
      int64_t k = np - off < 500 ? np - off : 500;
      for (int64_t j = 0; j < k; j++) {
        tok[j] = (int32_t)(3 + (off + j) * 7 % (n_vocab - 3));
        seq[j] = s;
        pos[j] = off + j;
        want[j] = false;
      }
      model_batch b = {.n = k, .tokens = tok, .seq = seq, .pos = pos, .want = want};
      if (model_decode(c, &b, logits)) {
        fprintf(stderr, "fill: %s\n", err_detail());
        return 1;
      }
    }
  }
  printf("model %s, %d threads, medians of %d\n", path, n_threads, reps);
  printf("n_dec  chunk  at_pos   wall_ms  cpu_ms  cpu_ms/thread\n");
  static const int decs[] = {1, 2, 3, 4};
  static const int chunks[] = {0, 1, 4, 8, 16, 32, 64};
  static const int posv[] = {1950, 1000, 0}; /* descending: sequence 4 is rewound to p after each run */
  for (size_t pi = 0; pi < sizeof posv / sizeof posv[0]; pi++) {
    for (size_t di = 0; di < sizeof decs / sizeof decs[0]; di++) {
      for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
        int nd = decs[di], k = chunks[ci], p = posv[pi];
        if (k == 0 && pi > 0) continue;
        if (nd != 3 && k > 0 && k != 16) continue;
        double w[64], cpu[64];
        for (int r = 0; r < reps; r++) {
          int64_t n = 0;
          for (int i = 0; i < nd; i++) { /* sequences 0..nd-1 decode at position 40 (then rewound) */
            tok[n] = 11 + i;
            seq[n] = i;
            pos[n] = 40;
            want[n] = true;
            n++;
          }
          for (int j = 0; j < k; j++) {
            tok[n] = 5 + j;
            seq[n] = 4;
            pos[n] = p + j;
            want[n] = j == k - 1;
            n++;
          }
          model_batch b = {.n = n, .tokens = tok, .seq = seq, .pos = pos, .want = want};
          double c0 = cpu_ms();
          uint64_t t0 = time_mono_ns();
          if (model_decode(c, &b, logits)) {
            fprintf(stderr, "decode: %s\n", err_detail());
            return 1;
          }
          w[r] = (double)(time_mono_ns() - t0) * 1e-6;
          cpu[r] = cpu_ms() - c0;
          for (int s = 0; s < 4; s++) model_ctx_seq_truncate(c, s, 40);
          if (k) model_ctx_seq_truncate(c, 4, p);
        }
        qsort(w, (size_t)reps, sizeof(double), cmp_d);
        qsort(cpu, (size_t)reps, sizeof(double), cmp_d);
        printf("%5d  %5d  %6d  %8.1f  %6.1f  %13.1f\n", nd, k, k ? p : 0, w[reps / 2], cpu[reps / 2],
               cpu[reps / 2] / n_threads);
        fflush(stdout);
      }
    }
  }
  model_ctx_free(c);
  model_free(m);
  free(logits);
  return 0;
}
