/*
 * tpool.c - the compute thread pool: n_threads - 1 workers created once,
 * the caller of tpool_run working as thread 0.
 *
 * A job is nth tasks (task i is fn(ctx, i, nth)); tasks are claimed, not
 * assigned: the caller and the workers take the next unclaimed index with
 * a compare-and-swap on `claim` (the job's generation in the high 32 bits,
 * the next index in the low 32), so a worker that wakes late - a sleeping
 * vCPU can take a millisecond or more to run again, far longer than a
 * small job - finds the tasks already done by the caller instead of
 * making it wait. Which thread runs a task never changes what the task
 * computes, so results do not depend on timing. Workers notice a job by
 * watching `gen` (spinning a short while, since decode issues hundreds of
 * small jobs per token and a futex wake costs more than the job, then
 * sleeping on cv_start); they read fn/ctx under the mutex, and a claim
 * only succeeds while the generation in `claim` is the one they read, so a
 * stale worker never runs a newer job's task with an older job's fn.
 * Completion is counted in n_done; the thread finishing the last task
 * signals cv_done under the mutex, so the caller cannot miss it.
 *
 * Each thread also owns a scratch buffer (tpool_scratch) that grows on
 * demand and is freed with the pool, so kernels never allocate per call.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "base/err.h"
#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TPOOL_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define TPOOL_PAUSE() __asm__ __volatile__("yield")
#else
#define TPOOL_PAUSE() ((void)0)
#endif

/* How long a waiting thread spins before sleeping. Measured in time, not
 * iterations, because a pause instruction costs 3 to 140 cycles depending
 * on the CPU. 20 us covers the gaps between the jobs of one token (a few
 * microseconds of serial work) while a thread waiting longer - for a
 * descheduled peer on a loaded machine, or between tokens - sleeps soon:
 * against 100 us it cut CPU per token by ~25% (TinyLlama Q4_K_M) to ~75%
 * (tiny model) at load 6-7 before tasks were claimed, 4-10% since, with
 * no loss of tokens/s (docs/perf.md, "Thread-pool spin"). PARLEY_TPOOL_SPIN_US (0 to 100000) overrides it, for measuring. */
#define TPOOL_SPIN_NS_DEFAULT 20000
static int64_t g_spin_ns = TPOOL_SPIN_NS_DEFAULT;
static pthread_once_t g_spin_once = PTHREAD_ONCE_INIT;
static void tpool_spin_init(void) {
  const char *e = getenv("PARLEY_TPOOL_SPIN_US");
  if (e && *e) {
    char *end = NULL;
    long v = strtol(e, &end, 10);
    if (end && *end == '\0' && v >= 0 && v <= 100000) g_spin_ns = (int64_t)v * 1000;
  }
}
#define TPOOL_SPIN_NS g_spin_ns

static int64_t tpool_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until done(arg) or TPOOL_SPIN_NS pass; returns done(arg). */
static bool tpool_spin(bool (*done)(void *), void *arg) {
  int64_t start = tpool_now_ns();
  for (;;) {
    for (int i = 0; i < 64; i++) {
      if (done(arg)) return true;
      TPOOL_PAUSE();
    }
    if (tpool_now_ns() - start > TPOOL_SPIN_NS) return done(arg);
  }
}

struct tpool_scratch_buf {
  void *p;
  size_t cap;
  char pad[64 - sizeof(void *) - sizeof(size_t)]; /* one cache line each */
};

struct tpool_worker {
  thread_pool *tp;
  int ith;
  pthread_t thread;
};

struct thread_pool {
  int n_threads;
  int n_started;
  struct tpool_worker *workers; /* n_threads - 1 */
  struct tpool_scratch_buf *scratch; /* n_threads */
  pthread_mutex_t mu;
  pthread_cond_t cv_start, cv_done;
  atomic_uint gen;               /* bumped once per job */
  _Atomic uint64_t claim;        /* gen << 32 | next unclaimed task index */
  atomic_int n_done;             /* tasks of the current job finished */
  atomic_bool stop;
  void (*fn)(void *ctx, int ith, int nth);
  void *ctx;
};

struct tpool_wait_gen {
  thread_pool *tp;
  unsigned seen;
};

static bool tpool_gen_changed(void *arg) {
  struct tpool_wait_gen *w = arg;
  return atomic_load(&w->tp->gen) != w->seen || atomic_load(&w->tp->stop);
}

static bool tpool_all_done(void *arg) {
  thread_pool *tp = arg;
  return atomic_load(&tp->n_done) >= tp->n_threads;
}

/* Runs unclaimed tasks of job generation g (fn, ctx) until none is left;
 * the thread that finishes the job's last task wakes the caller. */
static void tpool_work(thread_pool *tp, unsigned g, void (*fn)(void *, int, int), void *ctx) {
  int nth = tp->n_threads;
  uint64_t cur = atomic_load(&tp->claim);
  for (;;) {
    if ((unsigned)(cur >> 32) != g || (int)(uint32_t)cur >= nth) return;
    if (!atomic_compare_exchange_weak(&tp->claim, &cur, cur + 1)) continue;
    fn(ctx, (int)(uint32_t)cur, nth);
    if (atomic_fetch_add(&tp->n_done, 1) == nth - 1) {
      pthread_mutex_lock(&tp->mu);
      pthread_cond_signal(&tp->cv_done);
      pthread_mutex_unlock(&tp->mu);
    }
    cur = atomic_load(&tp->claim);
  }
}

static void *tpool_worker_main(void *arg) {
  struct tpool_worker *w = arg;
  thread_pool *tp = w->tp;
  unsigned seen = 0;
  for (;;) {
    struct tpool_wait_gen wg = {tp, seen};
    tpool_spin(tpool_gen_changed, &wg);
    pthread_mutex_lock(&tp->mu);
    unsigned g;
    while ((g = atomic_load(&tp->gen)) == seen && !atomic_load(&tp->stop)) pthread_cond_wait(&tp->cv_start, &tp->mu);
    void (*fn)(void *, int, int) = tp->fn;
    void *ctx = tp->ctx;
    pthread_mutex_unlock(&tp->mu);
    if (atomic_load(&tp->stop)) break;
    seen = g;
    tpool_work(tp, g, fn, ctx);
  }
  return NULL;
}

int tpool_new(int n_threads, thread_pool **out) {
  *out = NULL;
  if (n_threads < 1 || n_threads > 1024)
    return err_set(ERR_RANGE, "thread pool size %d is not in 1..1024", n_threads);
  pthread_once(&g_spin_once, tpool_spin_init);
  thread_pool *tp = calloc(1, sizeof *tp);
  if (!tp) return err_set(ERR_NOMEM, "thread pool");
  tp->n_threads = n_threads;
  tp->workers = calloc((size_t)n_threads, sizeof *tp->workers);
  tp->scratch = calloc((size_t)n_threads, sizeof *tp->scratch);
  if (!tp->workers || !tp->scratch) {
    free(tp->workers);
    free(tp->scratch);
    free(tp);
    return err_set(ERR_NOMEM, "thread pool of %d threads", n_threads);
  }
  pthread_mutex_init(&tp->mu, NULL);
  pthread_cond_init(&tp->cv_start, NULL);
  pthread_cond_init(&tp->cv_done, NULL);
  atomic_init(&tp->gen, 0);
  atomic_init(&tp->claim, 0);
  atomic_init(&tp->n_done, 0);
  atomic_init(&tp->stop, false);
  for (int i = 1; i < n_threads; i++) {
    struct tpool_worker *w = &tp->workers[i - 1];
    w->tp = tp;
    w->ith = i;
    if (pthread_create(&w->thread, NULL, tpool_worker_main, w) != 0) {
      tpool_free(tp);
      return err_set(ERR_INTERNAL, "cannot start compute thread %d of %d", i, n_threads);
    }
    tp->n_started = i;
  }
  *out = tp;
  return 0;
}

void tpool_free(thread_pool *tp) {
  if (!tp) return;
  pthread_mutex_lock(&tp->mu);
  atomic_store(&tp->stop, true);
  pthread_cond_broadcast(&tp->cv_start);
  pthread_mutex_unlock(&tp->mu);
  for (int i = 1; i <= tp->n_started; i++) pthread_join(tp->workers[i - 1].thread, NULL);
  for (int i = 0; i < tp->n_threads; i++) free(tp->scratch[i].p);
  pthread_mutex_destroy(&tp->mu);
  pthread_cond_destroy(&tp->cv_start);
  pthread_cond_destroy(&tp->cv_done);
  free(tp->scratch);
  free(tp->workers);
  free(tp);
}

int tpool_n_threads(const thread_pool *tp) { return tp ? tp->n_threads : 1; }

void tpool_run(thread_pool *tp, void (*fn)(void *ctx, int ith, int nth), void *ctx) {
  if (!tp || tp->n_threads == 1) {
    fn(ctx, 0, 1);
    return;
  }
  pthread_mutex_lock(&tp->mu);
  tp->fn = fn;
  tp->ctx = ctx;
  unsigned g = atomic_load(&tp->gen) + 1;
  atomic_store(&tp->n_done, 0);
  atomic_store(&tp->claim, (uint64_t)g << 32);
  atomic_store(&tp->gen, g);
  pthread_cond_broadcast(&tp->cv_start);
  pthread_mutex_unlock(&tp->mu);

  tpool_work(tp, g, fn, ctx);

  if (!tpool_spin(tpool_all_done, tp)) {
    pthread_mutex_lock(&tp->mu);
    while (!tpool_all_done(tp)) pthread_cond_wait(&tp->cv_done, &tp->mu);
    pthread_mutex_unlock(&tp->mu);
  }
}

void *tpool_scratch(thread_pool *tp, int ith, size_t bytes) {
  if (!tp || ith < 0 || ith >= tp->n_threads) return NULL;
  struct tpool_scratch_buf *s = &tp->scratch[ith];
  if (s->cap < bytes) {
    size_t cap = bytes < 4096 ? 4096 : bytes + bytes / 4;
    void *p = NULL;
    if (posix_memalign(&p, 64, cap) != 0) return NULL;
    free(s->p);
    s->p = p;
    s->cap = cap;
  }
  return s->p;
}
