/*
 * bench/kernels_cpu.c - one kern_matmul shape on ONE thread (no pool),
 * timed in thread CPU time, so two builds of the kernels can be compared
 * on a machine other processes are loading (bench/kernels.c reports wall
 * time with the pool). Built and run by bench/kernels_cpu.sh.
 *
 *   kernels_cpu TYPE ROWS COLS TOKENS [runs=9]
 * prints the median CPU time of one call and its GFLOP/s (2 rows cols
 * tokens per call). TOKENS may be a comma list (1,2,4,8): each count is
 * timed in turn over the same (packed) weights, one line each, so the
 * costs of 1 and 4 tokens are compared within one process and minute. The weights are 64 distinct random rows repeated, in
 * distinct memory (a matrix larger than the L3 cache streams from DRAM).
 * With PACK=1 in the environment the weights are first repacked with
 * kern_pack and multiplied with kern_matmul_packed (when the linked library
 * has them, which kernels_cpu.sh tells with -DHAVE_PACK, and the type packs
 * on this CPU; otherwise the plain path).
 *
 * With ROTATE_MB=M (one-token decode view) the weights are copied (packed)
 * into as many distinct matrices as make M MB, and each timed run is one
 * pass over all of them (as decode walks 22 layers' matrices, none of which
 * is in cache again when its turn comes); the GB/s of weights read is then
 * printed next to the one-thread read bandwidth (bench/bw_probe.h's read
 * loop over 512 MiB in 4 KiB pages, also in thread CPU time) measured in the
 * same process just before and after, so the two see the same load. ITERS=N instead runs N
 * untimed passes and nothing else (for valgrind --tool=callgrind: the
 * instruction count per block is load-independent).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bw_probe.h"
#include "kernels/kernels.h"
#include "kernels/tensor_type.h"

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One-thread read bandwidth of buf in GB/s: median over `runs` passes of
 * bwp_read (bench/bw_probe.h's loop), timed in this thread's CPU time like
 * the kernels (bwp_measure's wall time reads low when the cores are shared). */
static int cmp_d(const void *a, const void *b);
static double probe_cpu(const uint8_t *buf, size_t bytes, int runs) {
  double t[16];
  volatile uint64_t sink = 0;
  for (int r = 0; r < runs && r < 16; r++) {
    double a = thread_cpu_s();
    sink ^= bwp_read(buf, bytes);
    t[r] = thread_cpu_s() - a;
  }
  (void)sink;
  qsort(t, (size_t)runs, sizeof *t, cmp_d);
  return (double)bytes / t[runs / 2] * 1e-9;
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
  int64_t rows = atoll(argv[2]), cols = atoll(argv[3]), nts[16], nt = 0;
  int n_nts = 0;
  for (const char *q = argv[4]; *q && n_nts < 16;) {
    nts[n_nts] = atoll(q);
    if (nts[n_nts] > nt) nt = nts[n_nts]; /* buffers sized for the largest */
    n_nts++;
    q = strchr(q, ',');
    if (!q) break;
    q++;
  }
  int runs = argc > 5 ? atoi(argv[5]) : 9;
  const struct tensor_type_traits *tr = tensor_type_get(type);
  size_t rb;
  for (int i = 0; i < n_nts; i++)
    if (nts[i] < 1) nt = 0;
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
  long rot_mb = getenv("ROTATE_MB") ? atol(getenv("ROTATE_MB")) : 0;
  long iters = getenv("ITERS") ? atol(getenv("ITERS")) : 0;
  size_t mat_bytes = rb * (size_t)rows;
  int n_mat = rot_mb > 0 ? (int)(((size_t)rot_mb * 1000000 + mat_bytes - 1) / mat_bytes) : 1;
  if (n_mat > 4096) n_mat = 4096;
  uint8_t **Ws = malloc(sizeof(uint8_t *) * (size_t)n_mat);
  if (!Ws) return 1;
  Ws[0] = W;
  for (int m = 1; m < n_mat; m++) {
    if (!(Ws[m] = malloc(mat_bytes))) return 1;
    memcpy(Ws[m], W, mat_bytes);
  }
#ifdef HAVE_PACK
  kern_packed **pk = calloc((size_t)n_mat, sizeof *pk);
  if (!pk) return 1;
  const char *pe = getenv("PACK");
  for (int m = 0; m < n_mat && pe && strcmp(pe, "1") == 0; m++) {
    if (kern_pack(type, Ws[m], rows, cols, &pk[m])) return 1;
    if (pk[m] && m > 0) { /* the packed copy is what is read: drop the rows */
      free(Ws[m]);
      Ws[m] = NULL;
    }
  }
  if (pk[0]) fprintf(stderr, "kernels_cpu: packed weights, %d matri%s\n", n_mat, n_mat > 1 ? "ces" : "x");
#define MM(m) (pk[m] ? kern_matmul_packed(NULL, pk[m], x, ntc, y) : kern_matmul(NULL, type, Ws[m], rows, cols, x, ntc, y))
#else
#define MM(m) kern_matmul(NULL, type, Ws[m], rows, cols, x, ntc, y)
#endif
  int64_t ntc = nts[0];
  if (iters > 0) {
    for (long i = 0; i < iters; i++)
      for (int m = 0; m < n_mat; m++)
        if (MM(m)) return 1;
    return 0;
  }
  double bw0 = 0, bw1 = 0;
  size_t bw_bytes = (size_t)512 << 20;
  uint8_t *bw = n_mat > 1 ? bwp_alloc(&bw_bytes, 0) : NULL;
  if (bw) bw0 = probe_cpu(bw, bw_bytes, 5);
  for (int ni = 0; ni < n_nts; ni++) {
    ntc = nts[ni];
    for (int m = 0; m < n_mat; m++)
      if (MM(m)) return 1; /* warm-up */
    for (int i = 0; i < runs; i++) {
      double a = thread_cpu_s();
      for (int m = 0; m < n_mat; m++) MM(m);
      t[i] = (thread_cpu_s() - a) / n_mat;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    double med = t[runs / 2];
    printf("%s %lldx%lld x %lld tokens: %.3f ms CPU, %.1f GFLOP/s, weights %.1f GB/s", tr->name,
           (long long)rows, (long long)cols, (long long)ntc, med * 1e3,
           2.0 * (double)rows * (double)cols * (double)ntc / med * 1e-9,
           (double)rb * (double)rows / med * 1e-9);
    if (n_mat > 1) printf(" over %d matrices (%.0f MB)", n_mat, (double)mat_bytes * n_mat / 1e6);
    printf("\n");
  }
  if (bw) {
    bw1 = probe_cpu(bw, bw_bytes, 5);
    bwp_free(bw, bw_bytes);
    printf("1-thread probe (CPU time) %.1f / %.1f GB/s (before / after)\n", bw0, bw1);
  }
  for (int m = 1; m < n_mat; m++) free(Ws[m]);
#ifdef HAVE_PACK
  for (int m = 0; m < n_mat; m++) kern_packed_free(pk[m]);
  free(pk);
#endif
  free(Ws);
  free(W);
  free(src);
  free(x);
  free(y);
  free(t);
  return 0;
}
