/*
 * bench/embed.c - embeddings per CPU-second for 64 short inputs, one at a
 * time (what the server did before the embedding batcher: model_embed per
 * input on a one-thread context) against the batcher (engine/embedq.c: one
 * call with the 64 inputs, and 8 concurrent callers of 8 inputs each).
 * Alternates the modes for R rounds and prints medians. CPU time (thread
 * for the one-thread modes, process for the concurrent one) so that the
 * figure holds on a loaded machine.
 *
 *   build/bench-embed [small|minilm] [ROUNDS] [LEN]
 * LEN 8 (default): inputs of 8..15 tokens; 3..7: every input LEN tokens.
 * small: the bert test model (testgen_arch small: 64 wide, 2 layers, vocab
 * 30522 like the bge vocabulary the API tests use); minilm: all-MiniLM-L6
 * shape (384 wide, 6 layers, 12 heads, n_ff 1536, context 512), F16.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "engine/embedq.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen_arch.h"

#define N_IN 64

static double now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int32_t toks[N_IN][16];
static const int32_t *tp[N_IN];
static int64_t lens[N_IN];

struct conc {
  embedq *q;
  int id;
  int64_t E;
};

static void *conc_main(void *arg) {
  struct conc *c = arg;
  float *out = malloc(8 * (size_t)c->E * sizeof *out);
  if (embedq_embed(c->q, 8, tp + c->id * 8, lens + c->id * 8, out, NULL)) fprintf(stderr, "embed: %s\n", err_detail());
  free(out);
  return NULL;
}

int main(int argc, char **argv) {
  const char *shape = argc > 1 ? argv[1] : "small";
  int rounds = argc > 2 ? atoi(argv[2]) : 7;
  int base_len = argc > 3 ? atoi(argv[3]) : 8; /* tokens of input i: base_len + i % 8 (with CLS, SEP) */
  if (base_len < 3 || base_len > 8) base_len = 8;
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_BERT);
  g.n_vocab = 30522;
  if (strcmp(shape, "minilm") == 0) {
    g.n_embd = 384;
    g.n_layer = 6;
    g.n_head = g.n_head_kv = 12;
    g.n_ff = 1536;
    g.n_ctx = 512;
    g.type = TENSOR_TYPE_F16;
    g.type_embd = TENSOR_TYPE_F16;
  }
  char path[256];
  snprintf(path, sizeof path, "build/bench-embed-%s.gguf", shape);
  model *m = NULL;
  if (model_testgen_arch_write(&g, path) || model_open(path, &m)) {
    fprintf(stderr, "model: %s\n", err_detail());
    return 1;
  }
  const int64_t E = model_get_hparams(m)->n_embd;
  /* short inputs: CLS, 6..13 word pieces, SEP */
  uint32_t s = 12345;
  int64_t total = 0;
  for (int i = 0; i < N_IN; i++) {
    lens[i] = base_len + i % (base_len == 8 ? 8 : 1);
    for (int64_t k = 0; k < lens[i]; k++) {
      s = s * 1103515245u + 12345u;
      toks[i][k] = k == 0 ? 101 : k == lens[i] - 1 ? 102 : (int32_t)(1000 + (s >> 8) % 20000);
    }
    tp[i] = toks[i];
    total += lens[i];
  }
  model_ctx *c1 = NULL;
  model_ctx_params cp = model_ctx_default_params();
  cp.n_threads = 1;
  cp.kv_type = MODEL_KV_F32;
  embedq *q1 = NULL, *q2 = NULL;
  embedq_params ep = embedq_default_params();
  embedq_params ep2 = ep;
  ep2.n_threads = 2;
  if (model_ctx_new(m, &cp, &c1) || embedq_new(m, &ep, &q1) || embedq_new(m, &ep2, &q2)) {
    fprintf(stderr, "setup: %s\n", err_detail());
    return 1;
  }
  float *out = malloc((size_t)N_IN * (size_t)E * sizeof *out);
  double *t_one = calloc((size_t)rounds, sizeof(double)), *t_batch = calloc((size_t)rounds, sizeof(double)),
         *t_conc = calloc((size_t)rounds, sizeof(double)), *w_conc = calloc((size_t)rounds, sizeof(double)),
         *w_conc2 = calloc((size_t)rounds, sizeof(double)), *t_conc2 = calloc((size_t)rounds, sizeof(double));
  /* warm up: page the weights in, make the batchers' contexts */
  for (int i = 0; i < N_IN; i++) model_embed(c1, tp[i], lens[i], out + i * E, MODEL_EMBED_NORMALIZE);
  embedq_embed(q1, N_IN, tp, lens, out, NULL);
  embedq_embed(q2, N_IN, tp, lens, out, NULL);
  for (int r = 0; r < rounds; r++) {
    double t0 = now(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < N_IN; i++)
      if (model_embed(c1, tp[i], lens[i], out + i * E, MODEL_EMBED_NORMALIZE)) return 1;
    t_one[r] = now(CLOCK_THREAD_CPUTIME_ID) - t0;
    t0 = now(CLOCK_THREAD_CPUTIME_ID);
    if (embedq_embed(q1, N_IN, tp, lens, out, NULL)) return 1;
    t_batch[r] = now(CLOCK_THREAD_CPUTIME_ID) - t0;
    for (int v = 0; v < 2; v++) { /* 8 concurrent callers, 1 then 2 threads */
      pthread_t th[8];
      struct conc cc[8];
      double p0 = now(CLOCK_PROCESS_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
      for (int k = 0; k < 8; k++) {
        cc[k] = (struct conc){.q = v ? q2 : q1, .id = k, .E = E};
        pthread_create(&th[k], NULL, conc_main, &cc[k]);
      }
      for (int k = 0; k < 8; k++) pthread_join(th[k], NULL);
      (v ? t_conc2 : t_conc)[r] = now(CLOCK_PROCESS_CPUTIME_ID) - p0;
      (v ? w_conc2 : w_conc)[r] = now(CLOCK_MONOTONIC) - w0;
    }
  }
  qsort(t_one, (size_t)rounds, sizeof(double), cmp_d);
  qsort(t_batch, (size_t)rounds, sizeof(double), cmp_d);
  qsort(t_conc, (size_t)rounds, sizeof(double), cmp_d);
  qsort(w_conc, (size_t)rounds, sizeof(double), cmp_d);
  qsort(t_conc2, (size_t)rounds, sizeof(double), cmp_d);
  qsort(w_conc2, (size_t)rounds, sizeof(double), cmp_d);
  int mid = rounds / 2;
  embedq_stats st;
  embedq_get_stats(q1, &st);
  printf("shape %s: n_embd %lld, %d inputs, %lld tokens, %d rounds (medians)\n", shape, (long long)E, N_IN,
         (long long)total, rounds);
  printf("one at a time (model_embed, 1 thread):  %8.1f embeddings per CPU-second\n", N_IN / t_one[mid]);
  printf("batcher, one call of 64 (1 thread):    %8.1f embeddings per CPU-second (%.2fx)\n", N_IN / t_batch[mid],
         t_one[mid] / t_batch[mid]);
  printf("batcher, 8 callers x 8 (1 thread):     %8.1f embeddings per CPU-second, %8.1f per wall second\n",
         N_IN / t_conc[mid], N_IN / w_conc[mid]);
  printf("batcher, 8 callers x 8 (2 threads):    %8.1f embeddings per CPU-second, %8.1f per wall second\n",
         N_IN / t_conc2[mid], N_IN / w_conc2[mid]);
  printf("batcher 1 passes: %llu for %llu inputs\n", (unsigned long long)st.batches, (unsigned long long)st.inputs);
  embedq_free(q1);
  embedq_free(q2);
  model_ctx_free(c1);
  model_free(m);
  free(out);
  return 0;
}
