/*
 * bench/attn.c - model_attention alone over a long cache, f16 against q8_0:
 * TinyLlama's attention shape (32 query heads, 4 KV heads, head_dim 64),
 * one layer, DEPTH cached positions of random keys and values, then the
 * time of one decode step (1 query token at position DEPTH) and of a
 * 64-token prompt chunk. The two cache types run alternately, and both the
 * minimum and the median of RUNS timed calls are printed: on a shared
 * machine the minimum is the steadier figure. Not a test; built and run by
 * bench/attn.sh against build/libparley.a.
 *
 *   attn [depth=4096] [runs=200] [threads=2]      ATTN_DECODE_ONLY=1: skip the chunk
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "model/model_int.h"
#include "model/testgen.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int64_t depth = argc > 1 ? atoll(argv[1]) : 4096;
  int runs = argc > 2 ? atoi(argv[2]) : 200;
  int threads = argc > 3 ? atoi(argv[3]) : 2;
  if (depth < 1 || runs < 1 || threads < 1) return 2;
  model_testgen g = model_testgen_small();
  g.n_embd = 2048;
  g.n_head = 32;
  g.n_head_kv = 4;
  g.n_layer = 1;
  g.n_ff = 64;
  g.n_vocab = 64;
  g.n_ctx = depth + 64;
  const char *path = "build/bench/attn-model.gguf";
  model *m = NULL;
  if (model_testgen_write(&g, path) || model_open(path, &m)) {
    fprintf(stderr, "attn: %s\n", err_detail());
    return 1;
  }
  const model_hparams *hp = model_get_hparams(m);
  const int64_t hd = hp->head_dim, nkv = hp->n_head_kv, nh = hp->n_head;
  enum model_kv_type types[2] = {MODEL_KV_F16, MODEL_KV_Q8_0};
  model_ctx *c[2] = {NULL, NULL};
  size_t kvn = (size_t)(depth * nkv * hd);
  float *k = malloc(kvn * sizeof *k), *v = malloc(kvn * sizeof *v);
  float *q = malloc((size_t)(64 * nh * hd) * sizeof *q), *out = malloc((size_t)(64 * nh * hd) * sizeof *out);
  int32_t *seq = calloc((size_t)depth + 64, sizeof *seq);
  int64_t *pos = malloc(((size_t)depth + 64) * sizeof *pos);
  uint64_t st = 88172645463325252ull;
  for (size_t i = 0; i < kvn; i++) {
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    k[i] = (float)((double)(st >> 11) / 9007199254740992.0 * 2 - 1);
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    v[i] = (float)((double)(st >> 11) / 9007199254740992.0 * 2 - 1);
  }
  for (int64_t i = 0; i < 64 * nh * hd; i++) q[i] = (float)sin((double)i);
  for (int64_t t = 0; t < depth + 64; t++) pos[t] = t;
  for (int i = 0; i < 2; i++) {
    model_ctx_params p = model_ctx_default_params();
    p.kv_type = types[i];
    p.n_threads = threads;
    p.n_ctx = depth + 64;
    if (model_ctx_new(m, &p, &c[i])) {
      fprintf(stderr, "attn: %s\n", err_detail());
      return 1;
    }
    model_step s = {.n = depth, .seq = seq, .pos = pos};
    model_kv_store(c[i], 0, &s, k, v);
  }
  printf("attention, 32 heads / 4 KV heads x 64, %lld cached positions, %d threads, %d runs\n", (long long)depth,
         threads, runs);
  printf("%-22s %-6s %12s %12s %10s\n", "case", "cache", "min ms", "median ms", "KV MiB");
  int64_t ntoks[2] = {1, 64};
  double *tm = malloc((size_t)runs * 2 * sizeof *tm);
  int n_cases = getenv("ATTN_DECODE_ONLY") ? 1 : 2; /* for profiling */
  for (int ci = 0; ci < n_cases; ci++) {
    int64_t n = ntoks[ci];
    model_step s = {.n = n, .seq = seq, .pos = pos + depth - n + 1};
    for (int i = 0; i < 2; i++) model_attention(c[i], 0, &s, q, out, 0.125f); /* warm-up */
    for (int r = 0; r < runs; r++)
      for (int i = 0; i < 2; i++) { /* alternate the types */
        double t0 = now_s();
        if (model_attention(c[i], 0, &s, q, out, 0.125f)) return 1;
        tm[i * runs + r] = (now_s() - t0) * 1e3;
      }
    for (int i = 0; i < 2; i++) {
      qsort(tm + i * runs, (size_t)runs, sizeof *tm, cmp_d);
      char name[64];
      snprintf(name, sizeof name, "%s (%lld tok)", n == 1 ? "decode" : "prompt chunk", (long long)n);
      printf("%-22s %-6s %12.3f %12.3f %10.2f\n", name, model_kv_type_name(types[i]), tm[i * runs],
             tm[i * runs + runs / 2], (double)model_ctx_kv_bytes(c[i]) / (1024.0 * 1024.0));
    }
  }
  free(tm), free(k), free(v), free(q), free(out), free(seq), free(pos);
  model_ctx_free(c[0]);
  model_ctx_free(c[1]);
  model_free(m);
  return 0;
}
