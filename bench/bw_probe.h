/*
 * bench/bw_probe.h - the machine's memory read bandwidth, measured the way
 * a memory-bound kernel reads: every byte of a buffer much larger than the
 * last-level cache, loaded with the widest loads (512 or 256 bits) into eight independent
 * accumulators (so neither the adds nor one dependency chain limit it),
 * sequentially (the hardware prefetchers see a plain stream), the threads
 * taking disjoint 1 MiB chunks from an atomic counter as kern_matmul's
 * workers take row chunks (so, as there, a thread that another process
 * delays does not hold the others up: on a shared 2-core machine fixed
 * halves made the 2-thread median swing 22-75 GB/s). Included by
 * bench/kernels.c and bench/bandwidth.c; header-only so each bench program
 * stays one file.
 *
 * Why not a scalar sum of doubles: one core issuing one 8-byte load and one
 * dependent add per element measured 9 GB/s where the Q4_0 decode kernel
 * read 11-12 GB/s from DRAM on one core, so that probe measured the loop,
 * not the memory. The vectorized probe reads 64 bytes per cycle per core
 * at best, far above DRAM speed, so memory is the only limit left.
 *
 * The buffer is filled with non-zero data first (never-written pages would
 * all map the kernel's shared zero page, which stays in cache). With
 * huge = true it is asked for transparent huge pages (madvise: fewer TLB
 * misses); model weights are a file mapping in 4 KiB pages, so the probe
 * can measure both and says which it used. Each run
 * starts all threads at a barrier and lasts from the first chunk any
 * thread takes to the end of the last one (the threads' own clocks: the
 * caller's clock around the barriers, when the caller lost its CPU after
 * the start barrier, timed runs that were already over: "10424 GB/s" for
 * 64 MiB on a loaded 2-core guest);
 * the median of the runs is reported, and the XOR of everything read is
 * kept in a volatile sink so the compiler cannot drop the loads.
 */
#ifndef PARLEY_BENCH_BW_PROBE_H
#define PARLEY_BENCH_BW_PROBE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define BWP_CHUNK ((size_t)1 << 20) /* bytes a thread takes at a time */

struct bwp_shared {
  const uint8_t *buf;
  size_t bytes;      /* a multiple of BWP_CHUNK */
  atomic_size_t next; /* next chunk to hand out in the current run */
  int nth, runs;
  pthread_barrier_t start, end;
  volatile uint64_t sink[16];
  double t_first[16], t_last[16]; /* per thread, this run: when it took its first chunk, finished its last */
};

struct bwp_arg {
  struct bwp_shared *sh;
  int ith;
};

static double bwp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* GCC's generic vectors of 64-bit lanes (may_alias as the intrinsics'
 * types: the buffer is written as uint64_t): 32 bytes for AVX2's 256-bit
 * loads, 16 for the baseline's 128-bit ones (SSE2 on x86-64, NEON on
 * arm64). */
typedef uint64_t bwp_v32 __attribute__((vector_size(32), may_alias));
typedef uint64_t bwp_v16 __attribute__((vector_size(16), may_alias));
/* 64 bytes: AVX-512's 512-bit loads */
typedef uint64_t bwp_v64 __attribute__((vector_size(64), may_alias));

/* Load width bwp_read uses: 0 the widest the CPU has (512 bits with
 * AVX-512F), else 128, 256 or 512 (capped at what the CPU has).
 * bench/bandwidth.c -w sets it. Widest by default because on an
 * Emerald Rapids guest 512-bit loads read more than 256-bit ones (in 26
 * of 28 adjacent pairs of 64 MiB .. 2 GiB, by 0-25%;
 * docs/perf-decisions.md, "The bandwidth bound"), and the bound must be what the machine
 * can read, not less. */
static int bwp_width_bits = 0;
/* Software prefetch distance in bytes of the 512-bit loop (0: none, the
 * hardware prefetchers alone). bench/bandwidth.c -pf sets it. */
static size_t bwp_pf_dist = 0;

/* The body of a read function of (p, n) over vectors of type V: the XOR of
 * [p, p + n) in 64-bit lanes into eight accumulators of one vector each
 * (n a multiple of 8 vectors, p aligned to one). One loop for both widths;
 * each instance compiles to its own target's loads. PF: also a software
 * prefetch of every line bwp_pf_dist bytes ahead (what the decode kernels
 * do; a prefetch past the buffer's end does not fault). */
#define BWP_READ_BODY(V, PF)                                              \
  V a0 = {0}, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0; \
  const size_t pf = bwp_pf_dist;                                          \
  for (size_t i = 0; i < n; i += 8 * sizeof(V)) {                          \
    const V *v = (const V *)(p + i);                                      \
    if (PF)                                                               \
      for (size_t q = 0; q < 8 * sizeof(V); q += 64) __builtin_prefetch(p + i + pf + q, 0, 3); \
    a0 ^= v[0];                                                           \
    a1 ^= v[1];                                                           \
    a2 ^= v[2];                                                           \
    a3 ^= v[3];                                                           \
    a4 ^= v[4];                                                           \
    a5 ^= v[5];                                                           \
    a6 ^= v[6];                                                           \
    a7 ^= v[7];                                                           \
  }                                                                       \
  V s = ((a0 ^ a1) ^ (a2 ^ a3)) ^ ((a4 ^ a5) ^ (a6 ^ a7));                \
  uint64_t x = 0;                                                         \
  for (size_t l = 0; l < sizeof(V) / 8; l++) x ^= s[l];                   \
  return x

#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint64_t bwp_read_avx2(const uint8_t *p, size_t n) { BWP_READ_BODY(bwp_v32, 0); }
__attribute__((target("avx512f"))) static uint64_t bwp_read_avx512(const uint8_t *p, size_t n) {
  BWP_READ_BODY(bwp_v64, 0);
}
__attribute__((target("avx512f"))) static uint64_t bwp_read_avx512_pf(const uint8_t *p, size_t n) {
  BWP_READ_BODY(bwp_v64, 1);
}
#endif
static uint64_t bwp_read_base(const uint8_t *p, size_t n) { BWP_READ_BODY(bwp_v16, 0); }

/* XOR of [p, p + n) in 64-bit lanes, n a multiple of 512: 512-bit loads
 * with AVX-512F, else 256-bit ones with AVX2, else the baseline's vectors
 * (still eight accumulators); bwp_width_bits caps the width. */
static uint64_t bwp_read(const uint8_t *p, size_t n) {
#if defined(__x86_64__)
  if ((bwp_width_bits == 0 || bwp_width_bits >= 512) && __builtin_cpu_supports("avx512f"))
    return bwp_pf_dist ? bwp_read_avx512_pf(p, n) : bwp_read_avx512(p, n);
  if (bwp_width_bits != 128 && __builtin_cpu_supports("avx2")) return bwp_read_avx2(p, n);
#endif
  return bwp_read_base(p, n);
}

static void *bwp_thread(void *arg) {
  struct bwp_arg *a = arg;
  struct bwp_shared *sh = a->sh;
  size_t n_chunks = sh->bytes / BWP_CHUNK;
  for (int r = 0; r < sh->runs; r++) {
    pthread_barrier_wait(&sh->start);
    uint64_t x = 0;
    double first = 0;
    for (size_t c; (c = atomic_fetch_add(&sh->next, 1)) < n_chunks;) {
      if (first == 0) first = bwp_now();
      x ^= bwp_read(sh->buf + c * BWP_CHUNK, BWP_CHUNK);
    }
    sh->t_first[a->ith] = first; /* 0: this thread found no chunk left */
    sh->t_last[a->ith] = bwp_now();
    sh->sink[a->ith] ^= x;
    pthread_barrier_wait(&sh->end);
  }
  return NULL;
}

static inline int bwp_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Allocates and fills a probe buffer of `bytes` (rounded up to 2 MiB and
 * updated), transparent huge pages asked for or refused, or NULL. Free with bwp_free(buf, bytes). */
static inline uint8_t *bwp_alloc(size_t *bytes, int huge) {
  size_t n = (*bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
  madvise(p, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
  (void)huge;
#endif
  uint64_t *q = p, st = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n / 8; i++) { /* every byte written, nothing zero-page backed */
    st ^= st << 13;
    st ^= st >> 7;
    st ^= st << 17;
    q[i] = st;
  }
  *bytes = n;
  return p;
}

static inline void bwp_free(uint8_t *buf, size_t bytes) {
  if (buf) munmap(buf, bytes);
}

/* Median read bandwidth in GB/s (1e9 bytes/s) over `runs` (1..63) reads of
 * the whole buffer (bytes a multiple of 2 MiB, as bwp_alloc gives) by nth
 * (1..16) threads taking 1 MiB chunks; also the
 * fastest run in *best_gbs when not NULL. 0 on failure. */
static inline double bwp_measure(const uint8_t *buf, size_t bytes, int nth, int runs, double *best_gbs) {
  if (nth < 1 || nth > 16 || runs < 1 || runs > 63) return 0;
  struct bwp_shared sh;
  memset(&sh, 0, sizeof sh);
  sh.buf = buf;
  sh.bytes = bytes;
  sh.nth = nth;
  sh.runs = runs;
  if (pthread_barrier_init(&sh.start, NULL, (unsigned)nth + 1)) return 0;
  if (pthread_barrier_init(&sh.end, NULL, (unsigned)nth + 1)) {
    pthread_barrier_destroy(&sh.start);
    return 0;
  }
  pthread_t th[16];
  struct bwp_arg args[16];
  for (int i = 0; i < nth; i++) {
    args[i].sh = &sh;
    args[i].ith = i;
    if (pthread_create(&th[i], NULL, bwp_thread, &args[i])) abort();
  }
  double t[64];
  size_t read = bytes / BWP_CHUNK * BWP_CHUNK;
  for (int r = 0; r < runs; r++) {
    atomic_store(&sh.next, 0);
    pthread_barrier_wait(&sh.start);
    pthread_barrier_wait(&sh.end);
    double a = 0, b = 0;
    for (int i = 0; i < nth; i++) {
      if (sh.t_first[i] > 0 && (a == 0 || sh.t_first[i] < a)) a = sh.t_first[i];
      if (sh.t_last[i] > b) b = sh.t_last[i];
    }
    t[r] = b - a;
  }
  for (int i = 0; i < nth; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&sh.start);
  pthread_barrier_destroy(&sh.end);
  qsort(t, (size_t)runs, sizeof t[0], bwp_cmp);
  if (best_gbs) *best_gbs = (double)read / t[0] / 1e9;
  return (double)read / t[runs / 2] / 1e9;
}

#endif
