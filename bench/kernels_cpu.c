/*
 * bench/kernels_cpu.c - one kern_matmul shape on ONE thread (no pool),
 * timed in thread CPU time, so two builds of the kernels can be compared
 * on a machine other processes are loading (bench/kernels.c reports wall
 * time with the pool). Built and run by bench/kernels_cpu.sh.
 *
 *   kernels_cpu TYPE ROWS COLS TOKENS [runs=9]
 * prints the median CPU time of one call and its GFLOP/s (2 rows cols
 * tokens per call). The weights are 64 distinct random rows repeated, in
 * distinct memory (a matrix larger than the L3 cache streams from DRAM).
 * With PACK=1 in the environment the weights are first repacked with
 * kern_pack and multiplied with kern_matmul_packed (when the linked library
 * has them, which kernels_cpu.sh tells with -DHAVE_PACK, and the type packs
 * on this CPU; otherwise the plain path).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kernels/kernels.h"
#include "kernels/tensor_type.h"

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
  enum tensor_type type;
  if (argc < 5 || tensor_type_from_name(argv[1], &type)) {
    fprintf(stderr, "usage: kernels_cpu TYPE ROWS COLS TOKENS [runs=9]\n");
    return 2;
  }
  int64_t rows = atoll(argv[2]), cols = atoll(argv[3]), nt = atoll(argv[4]);
  int runs = argc > 5 ? atoi(argv[5]) : 9;
  const struct tensor_type_traits *tr = tensor_type_get(type);
  size_t rb;
  if (rows < 1 || nt < 1 || runs < 1 || !tr->supported || tensor_type_row_bytes(type, cols, &rb)) {
    fprintf(stderr, "kernels_cpu: bad shape or type\n");
    return 2;
  }
  uint8_t *W = malloc(rb * (size_t)rows);
  const char *he = getenv("HUGE");
  if (W && he && strcmp(he, "1") == 0) { /* transparent huge pages for the weights (2 MiB-aligned part) */
    free(W);
    size_t n = (rb * (size_t)rows + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    W = aligned_alloc(2u << 20, n);
    if (W) madvise(W, n, MADV_HUGEPAGE);
  }
  float *src = malloc(sizeof(float) * (size_t)cols), *x = malloc(sizeof(float) * (size_t)(nt * cols));
  float *y = malloc(sizeof(float) * (size_t)(nt * rows));
  double *t = malloc(sizeof(double) * (size_t)runs);
  if (!W || !src || !x || !y || !t) return 1;
  for (int64_t r = 0; r < rows; r++) {
    if (r < 64) {
      for (int64_t i = 0; i < cols; i++) src[i] = (float)rand() / RAND_MAX - 0.5f;
      tr->quantize_ref(src, W + (size_t)r * rb, cols);
    } else {
      memcpy(W + (size_t)r * rb, W + (size_t)(r % 64) * rb, rb);
    }
  }
  for (int64_t i = 0; i < nt * cols; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
#ifdef HAVE_PACK
  kern_packed *pk = NULL;
  const char *pe = getenv("PACK");
  if (pe && strcmp(pe, "1") == 0 && kern_pack(type, W, rows, cols, &pk)) return 1;
  if (pk) fprintf(stderr, "kernels_cpu: packed weights\n");
#define MM() (pk ? kern_matmul_packed(NULL, pk, x, nt, y) : kern_matmul(NULL, type, W, rows, cols, x, nt, y))
#else
#define MM() kern_matmul(NULL, type, W, rows, cols, x, nt, y)
#endif
  if (MM()) return 1; /* warm-up */
  for (int i = 0; i < runs; i++) {
    double a = thread_cpu_s();
    MM();
    t[i] = thread_cpu_s() - a;
  }
  qsort(t, (size_t)runs, sizeof *t, cmp_d);
  double med = t[runs / 2];
  printf("%s %lldx%lld x %lld tokens: %.3f ms CPU, %.1f GFLOP/s, weights %.1f GB/s\n", tr->name,
         (long long)rows, (long long)cols, (long long)nt, med * 1e3,
         2.0 * (double)rows * (double)cols * (double)nt / med * 1e-9,
         (double)rb * (double)rows / med * 1e-9);
  free(W);
  free(src);
  free(x);
  free(y);
  free(t);
  return 0;
}
