/*
 * bench/kernels.c - throughput of kern_matmul per weight type, next to the
 * machine's measured read bandwidth. Not a test; built and run by
 * bench/kernels.sh against build/libparley.a.
 *
 * For each type, shape (rows x cols) and token count: median of RUNS timed
 * calls after one warm-up, reported as GFLOP/s (2 * rows * cols * tokens per
 * call) and GB/s of weight bytes read (rows * row bytes per call; for one
 * token this is the number to compare with the read bandwidth, since decode
 * is memory-bound). The bandwidth lines read a 1 GiB buffer with 1..T
 * threads (bench/bw_probe.h: 256-bit loads, eight accumulators, disjoint
 * 1 MiB chunks per thread; 4 KiB pages, as the mapped weights get). "CPU share" is the process
 * CPU time over wall time x threads during the timed runs: well under 100%
 * means other processes took the cores and the figures are low (workers
 * spinning between runs count as busy, so it can read high with threads).
 *
 *   kernels [threads_max=2] [runs=5] [types=F16,BF16,Q8_0,Q4_0,Q4_K,Q5_K,Q6_K]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "bw_probe.h"
#include "kernels/kernels.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int threads_max = argc > 1 ? atoi(argv[1]) : 2;
  int runs = argc > 2 ? atoi(argv[2]) : 5;
  const char *types = argc > 3 ? argv[3] : "F16,BF16,Q8_0,Q4_0,Q4_K,Q5_K,Q6_K";
  if (threads_max < 1 || runs < 1 || runs > 15) {
    fprintf(stderr, "usage: kernels [threads_max] [runs 1..15] [types]\n");
    return 2;
  }
  static const int64_t shapes[][2] = {{2048, 2048}, {5632, 2048}};
  static const int64_t toks[] = {1, 64};
  const int64_t max_rows = 5632, n_cols = 2048, max_tok = 64;

  thread_pool *pools[8] = {0};
  for (int t = 1; t <= threads_max && t <= 8; t++)
    if (tpool_new(t, &pools[t - 1])) return 1;

  size_t n_bw = (size_t)1 << 30;
  uint8_t *bw = bwp_alloc(&n_bw, 0);
  if (!bw) return 1;
  printf("isa: %s\n", kern_isa());
  for (int t = 1; t <= threads_max && t <= 8; t++)
    printf("read bandwidth, %d thread%s: %.1f GB/s (256-bit loads over 1 GiB, median of %d)\n", t,
           t > 1 ? "s" : "", bwp_measure(bw, n_bw, t, runs, NULL), runs);
  bwp_free(bw, n_bw);

  float *x = malloc(sizeof(float) * (size_t)(max_tok * n_cols));
  float *y = malloc(sizeof(float) * (size_t)(max_tok * max_rows));
  float *src = malloc(sizeof(float) * (size_t)n_cols);
  if (!x || !y || !src) return 1;
  srand(1);
  for (int64_t i = 0; i < max_tok * n_cols; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;

  printf("\n| type | rows x cols | tokens | threads | ms | GFLOP/s | weight GB/s | CPU share |\n");
  printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  char list[256];
  snprintf(list, sizeof list, "%s", types);
  for (char *save = NULL, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
    enum tensor_type type;
    if (tensor_type_from_name(name, &type)) {
      fprintf(stderr, "unknown type %s\n", name);
      continue;
    }
    size_t row_bytes;
    if (tensor_type_row_bytes(type, n_cols, &row_bytes)) continue;
    uint8_t *W = malloc(row_bytes * (size_t)max_rows);
    if (!W) return 1;
    /* 64 distinct quantized rows, repeated (content does not matter for speed) */
    for (int64_t r = 0; r < 64; r++) {
      for (int64_t i = 0; i < n_cols; i++) src[i] = (float)rand() / RAND_MAX - 0.5f;
      ref_quantize_row(type, src, W + (size_t)r * row_bytes, n_cols);
    }
    for (int64_t r = 64; r < max_rows; r++)
      memcpy(W + (size_t)r * row_bytes, W + (size_t)(r % 64) * row_bytes, row_bytes);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
      for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++)
        for (int th = 1; th <= threads_max && th <= 8; th++) {
          int64_t rows = shapes[si][0], cols = shapes[si][1], nt = toks[ti];
          double t[16];
          int rc = kern_matmul(pools[th - 1], type, W, rows, cols, x, nt, y); /* warm-up */
          if (rc) {
            fprintf(stderr, "%s: %s\n", name, err_detail());
            break;
          }
          double c0 = cpu_s(), w0 = now_s();
          for (int r = 0; r < runs; r++) {
            double t0 = now_s();
            kern_matmul(pools[th - 1], type, W, rows, cols, x, nt, y);
            t[r] = now_s() - t0;
          }
          double share = (cpu_s() - c0) / ((now_s() - w0) * th);
          qsort(t, (size_t)runs, sizeof t[0], cmp_d);
          double med = t[runs / 2];
          printf("| %s | %lldx%lld | %lld | %d | %.3f | %.1f | %.1f | %.0f%% |\n", name,
                 (long long)rows, (long long)cols, (long long)nt, th, med * 1e3,
                 2.0 * (double)rows * (double)cols * (double)nt / med / 1e9,
                 (double)row_bytes * (double)rows / med / 1e9, 100.0 * share);
          fflush(stdout);
        }
    free(W);
  }
  free(x);
  free(y);
  free(src);
  for (int t = 0; t < 8; t++) tpool_free(pools[t]);
  return 0;
}
