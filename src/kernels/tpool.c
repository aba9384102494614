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
 * computes, so results do not depend on timing.
 *
 * The hot path takes no lock. The caller stores fn/ctx and the claim word,
 * then bumps `gen`; a worker that sees a new gen reads fn/ctx and claims
 * with the generation it read: a claim only succeeds while the claim word
 * still holds that generation with an index below nth, and the caller
 * publishes the next job only after every task of this one finished, so a
 * worker that read a newer job's fn/ctx (or a torn pair) never gets to
 * run it under the old generation. The mutex and condition variables are
 * only for sleeping: a thread about to sleep announces it in a counter
 * (n_sleeping, caller_sleeping) and re-checks its condition under the
 * mutex; the other side stores its change, then reads the counter
 * (sequentially consistent on both sides, so one of them sees the other)
 * and only then takes the mutex to wake it. (Taking the mutex on every job,
 * as the pool used to, made a spinning worker that saw the new gen block
 * on the caller's still-held mutex: a futex sleep, which on this KVM guest
 * can cost a millisecond to come back from.)
 *
 * Waiting: a thread waiting for the next job (worker) or for the workers
 * to finish (caller) spins with pause before sleeping. Outside a hold
 * scope the spin is short (20 us: an idle server must not burn a core);
 * inside one (tpool_hold_begin/end, around a forward pass) it lasts up to
 * TPOOL_HOLD_NS, because a decode step issues hundreds of small jobs with
 * serial work between them and a sleeping worker misses the next ones.
 * After a hold ends workers keep spinning for TPOOL_LINGER_NS, which
 * covers the sampling between two generated tokens, then sleep.
 *
 * Each thread also owns a scratch buffer (tpool_scratch) that grows on
 * demand and is freed with the pool, so kernels never allocate per call,
 * and a few counters (tpool_get_stats) for measuring how threads share
 * the work.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Spin bounds, in time not iterations (a pause costs 3 to 140 cycles
 * depending on the CPU). Outside a hold: 20 us, measured against 100 us in
 * docs/perf.md "Thread-pool spin" (less CPU per token at load, no loss of
 * tokens/s). Inside a hold: 5 ms without a job before sleeping anyway (a
 * descheduled caller). After a hold: 1 ms. Overrides, for measuring (read
 * once per process): PARLEY_TPOOL_SPIN_US, PARLEY_TPOOL_HOLD_US,
 * PARLEY_TPOOL_LINGER_US (each 0 to 100000); PARLEY_TPOOL_STATS=1 turns on
 * the time counters and prints them when a pool is freed. */
static int64_t g_spin_ns = 20000, g_hold_ns = 5000000, g_linger_ns = 1000000;
static bool g_stats_env;
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;

static void env_us(const char *name, int64_t *ns) {
  const char *e = getenv(name);
  if (!e || !*e) return;
  char *end = NULL;
  long v = strtol(e, &end, 10);
  if (end && *end == '\0' && v >= 0 && v <= 100000) *ns = (int64_t)v * 1000;
}

static void tpool_env_init(void) {
  env_us("PARLEY_TPOOL_SPIN_US", &g_spin_ns);
  env_us("PARLEY_TPOOL_HOLD_US", &g_hold_ns);
  env_us("PARLEY_TPOOL_LINGER_US", &g_linger_ns);
  const char *s = getenv("PARLEY_TPOOL_STATS");
  g_stats_env = s && strcmp(s, "1") == 0;
}

static int64_t tpool_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct tpool_scratch_buf {
  void *p;
  size_t cap;
  char pad[64 - sizeof(void *) - sizeof(size_t)]; /* one cache line each */
};

/* Written only by its own thread (relaxed), read by tpool_get_stats. */
struct tpool_counters {
  _Atomic uint64_t n_tasks, n_sleeps, busy_ns, sleep_ns;
  char pad[64 - 4 * sizeof(uint64_t)];
};

struct tpool_worker {
  thread_pool *tp;
  int ith;
  pthread_t thread;
};

typedef void (*tpool_fn)(void *ctx, int ith, int nth);

struct thread_pool {
  int n_threads;
  int n_started;
  bool timing;                       /* busy_ns / sleep_ns counted (set once, at tpool_new) */
  struct tpool_worker *workers;      /* n_threads - 1 */
  struct tpool_scratch_buf *scratch; /* n_threads */
  struct tpool_counters *stats;      /* n_threads */
  pthread_mutex_t mu;
  pthread_cond_t cv_start, cv_done;
  atomic_uint gen;             /* bumped once per job, after fn/ctx/claim */
  _Atomic uint64_t claim;      /* gen << 32 | next unclaimed task index */
  atomic_int n_done;           /* tasks of the current job finished */
  _Atomic(tpool_fn) fn;
  _Atomic(void *) ctx;
  atomic_int n_sleeping;       /* workers inside the sleep path */
  atomic_int caller_sleeping;  /* caller inside the sleep path */
  atomic_int hold;             /* hold scopes open (nesting count) */
  atomic_uint wake;            /* bumped when a hold begins */
  _Atomic int64_t released_ns; /* when the last hold ended */
  _Atomic int64_t contended_until_ns; /* spin short until then (tpool_keep_spinning) */
  _Atomic uint64_t n_gaps;     /* spinning threads that found they had lost their CPU */
  atomic_bool stop;
  _Atomic(tpool_trace *) trace; /* tpool_set_trace, or NULL */
};

static void count_add(_Atomic uint64_t *c, uint64_t v) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v, memory_order_relaxed);
}

/* Runs unclaimed tasks of job generation g (fn, ctx) until none is left;
 * wakes the caller if it sleeps when the job's last task is done. */
static void tpool_work(thread_pool *tp, int ith, unsigned g, tpool_fn fn, void *ctx) {
  int nth = tp->n_threads;
  uint64_t cur = atomic_load(&tp->claim);
  for (;;) {
    if ((unsigned)(cur >> 32) != g || (int)(uint32_t)cur >= nth) return;
    if (!atomic_compare_exchange_weak(&tp->claim, &cur, cur + 1)) continue;
    int64_t t0 = tp->timing ? tpool_now_ns() : 0;
    tpool_trace *tr = atomic_load_explicit(&tp->trace, memory_order_relaxed);
    if (tr && ith < TPOOL_TRACE_MAX && !tr->first_ns[ith]) tr->first_ns[ith] = tpool_now_ns();
    fn(ctx, (int)(uint32_t)cur, nth);
    if (tr && ith < TPOOL_TRACE_MAX) tr->last_ns[ith] = tpool_now_ns(); /* before n_done: the caller reads it after */
    if (tp->timing) count_add(&tp->stats[ith].busy_ns, (uint64_t)(tpool_now_ns() - t0));
    count_add(&tp->stats[ith].n_tasks, 1);
    if (atomic_fetch_add(&tp->n_done, 1) == nth - 1 && atomic_load(&tp->caller_sleeping)) {
      pthread_mutex_lock(&tp->mu);
      pthread_cond_signal(&tp->cv_done);
      pthread_mutex_unlock(&tp->mu);
    }
    cur = atomic_load(&tp->claim);
  }
}

/* Whether a thread that started waiting at `start` should still spin at
 * `now` (its previous check was at *prev): the hold bound inside a hold
 * scope, else the short spin or the linger after the last hold, whichever
 * ends later; only the short spin while the machine is oversubscribed.
 * Oversubscription shows as a gap between two checks (64 pauses, a few
 * microseconds) longer than TPOOL_GAP_NS: the thread lost its CPU while
 * spinning. Then a long spin only burns the share of CPU time the other
 * thread needs (the scheduler favours a thread waking from sleep over one
 * that spun), so the pool sleeps early for the next TPOOL_CONTENDED_NS. */
#define TPOOL_GAP_NS 200000
#define TPOOL_CONTENDED_NS 2000000000
static bool tpool_keep_spinning(thread_pool *tp, int64_t start, int64_t *prev, int64_t now) {
  if (now - *prev > TPOOL_GAP_NS) {
    atomic_store_explicit(&tp->contended_until_ns, now + TPOOL_CONTENDED_NS, memory_order_relaxed);
    atomic_fetch_add_explicit(&tp->n_gaps, 1, memory_order_relaxed);
  }
  *prev = now;
  if (now - start < g_spin_ns) return true;
  if (now < atomic_load_explicit(&tp->contended_until_ns, memory_order_relaxed)) return false;
  /* seq_cst, after the worker read `wake`: tpool_hold_begin bumps hold
   * before wake, so reading no hold here means the wake it will bump is
   * still ahead and will stop the worker's sleep */
  if (atomic_load(&tp->hold) > 0) return now - start < g_hold_ns;
  return now - atomic_load_explicit(&tp->released_ns, memory_order_relaxed) < g_linger_ns;
}

/* Worker: waits for a generation other than `seen`; returns it (and the
 * job's fn/ctx), or `seen` when the pool stops. */
static unsigned tpool_wait_job(thread_pool *tp, int ith, unsigned seen) {
  for (;;) {
    int64_t start = tpool_now_ns(), prev = start;
    unsigned wk = 0;
    for (;;) {
      for (int i = 0; i < 64; i++) {
        unsigned g = atomic_load_explicit(&tp->gen, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&tp->stop, memory_order_relaxed)) return g;
        TPOOL_PAUSE();
      }
      wk = atomic_load(&tp->wake); /* before reading hold (tpool_keep_spinning) */
      if (!tpool_keep_spinning(tp, start, &prev, tpool_now_ns())) break;
    }
    int64_t t0 = tp->timing ? tpool_now_ns() : 0;
    count_add(&tp->stats[ith].n_sleeps, 1);
    pthread_mutex_lock(&tp->mu);
    atomic_fetch_add(&tp->n_sleeping, 1);
    while (atomic_load(&tp->gen) == seen && !atomic_load(&tp->stop) && atomic_load(&tp->wake) == wk)
      pthread_cond_wait(&tp->cv_start, &tp->mu);
    atomic_fetch_sub(&tp->n_sleeping, 1);
    pthread_mutex_unlock(&tp->mu);
    if (tp->timing) count_add(&tp->stats[ith].sleep_ns, (uint64_t)(tpool_now_ns() - t0));
    /* woken by a job, a stop, or a hold beginning: check again, spinning */
  }
}

static void *tpool_worker_main(void *arg) {
  struct tpool_worker *w = arg;
  thread_pool *tp = w->tp;
  unsigned seen = 0;
  for (;;) {
    unsigned g = tpool_wait_job(tp, w->ith, seen);
    if (atomic_load(&tp->stop)) break;
    /* fn/ctx may already belong to a newer job; then every claim for g fails */
    tpool_fn fn = atomic_load(&tp->fn);
    void *ctx = atomic_load(&tp->ctx);
    seen = g;
    tpool_work(tp, w->ith, g, fn, ctx);
  }
  return NULL;
}

int tpool_new(int n_threads, thread_pool **out) {
  *out = NULL;
  if (n_threads < 1 || n_threads > 1024)
    return err_set(ERR_RANGE, "thread pool size %d is not in 1..1024", n_threads);
  pthread_once(&g_env_once, tpool_env_init);
  thread_pool *tp = calloc(1, sizeof *tp);
  if (!tp) return err_set(ERR_NOMEM, "thread pool");
  tp->n_threads = n_threads;
  tp->timing = g_stats_env;
  tp->workers = calloc((size_t)n_threads, sizeof *tp->workers);
  tp->scratch = calloc((size_t)n_threads, sizeof *tp->scratch);
  tp->stats = calloc((size_t)n_threads, sizeof *tp->stats);
  if (!tp->workers || !tp->scratch || !tp->stats) {
    free(tp->workers);
    free(tp->scratch);
    free(tp->stats);
    free(tp);
    return err_set(ERR_NOMEM, "thread pool of %d threads", n_threads);
  }
  pthread_mutex_init(&tp->mu, NULL);
  pthread_cond_init(&tp->cv_start, NULL);
  pthread_cond_init(&tp->cv_done, NULL);
  atomic_init(&tp->gen, 0);
  atomic_init(&tp->claim, 0);
  atomic_init(&tp->n_done, 0);
  atomic_init(&tp->fn, NULL);
  atomic_init(&tp->ctx, NULL);
  atomic_init(&tp->n_sleeping, 0);
  atomic_init(&tp->caller_sleeping, 0);
  atomic_init(&tp->hold, 0);
  atomic_init(&tp->wake, 0);
  atomic_init(&tp->released_ns, INT64_MIN / 2);
  atomic_init(&tp->contended_until_ns, 0);
  atomic_init(&tp->n_gaps, 0);
  atomic_init(&tp->stop, false);
  atomic_init(&tp->trace, NULL);
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

static void tpool_print_stats(const thread_pool *tp) {
  for (int i = 0; i < tp->n_threads; i++) {
    tpool_stats s;
    tpool_get_stats(tp, i, &s);
    fprintf(stderr, "tpool thread %d: %llu tasks, busy %.3f s, %llu sleeps, asleep %.3f s\n", i,
            (unsigned long long)s.n_tasks, (double)s.busy_ns / 1e9, (unsigned long long)s.n_sleeps,
            (double)s.sleep_ns / 1e9);
  }
  fprintf(stderr, "tpool: %llu spin gaps (lost CPU while waiting)\n",
          (unsigned long long)atomic_load(&((thread_pool *)tp)->n_gaps));
}

void tpool_free(thread_pool *tp) {
  if (!tp) return;
  if (g_stats_env && tp->n_threads > 1) tpool_print_stats(tp);
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
  free(tp->stats);
  free(tp->workers);
  free(tp);
}

int tpool_n_threads(const thread_pool *tp) { return tp ? tp->n_threads : 1; }

/* Wakes sleeping workers, if any (after the caller's store that they wait
 * for: gen, wake or stop). */
static void tpool_wake_workers(thread_pool *tp) {
  if (atomic_load(&tp->n_sleeping) == 0) return;
  pthread_mutex_lock(&tp->mu);
  pthread_cond_broadcast(&tp->cv_start);
  pthread_mutex_unlock(&tp->mu);
}

void tpool_run(thread_pool *tp, void (*fn)(void *ctx, int ith, int nth), void *ctx) {
  if (!tp || tp->n_threads == 1) {
    fn(ctx, 0, 1);
    return;
  }
  tpool_trace *tr = atomic_load_explicit(&tp->trace, memory_order_relaxed);
  if (tr) {
    memset(tr->first_ns, 0, sizeof tr->first_ns);
    memset(tr->last_ns, 0, sizeof tr->last_ns);
    tr->n_jobs++;
    tr->publish_ns = tpool_now_ns();
  }
  unsigned g = atomic_load(&tp->gen) + 1;
  atomic_store(&tp->fn, fn);
  atomic_store(&tp->ctx, ctx);
  atomic_store(&tp->n_done, 0);
  atomic_store(&tp->claim, (uint64_t)g << 32);
  atomic_store(&tp->gen, g);
  tpool_wake_workers(tp);

  tpool_work(tp, 0, g, fn, ctx);

  int nth = tp->n_threads;
  int64_t start = tpool_now_ns(), prev = start;
  for (;;) {
    for (int i = 0; i < 64; i++) {
      if (atomic_load_explicit(&tp->n_done, memory_order_acquire) >= nth) {
        if (tr) tr->done_ns = tpool_now_ns();
        return;
      }
      TPOOL_PAUSE();
    }
    if (!tpool_keep_spinning(tp, start, &prev, tpool_now_ns())) break;
  }
  int64_t t0 = tp->timing ? tpool_now_ns() : 0;
  count_add(&tp->stats[0].n_sleeps, 1);
  pthread_mutex_lock(&tp->mu);
  atomic_store(&tp->caller_sleeping, 1);
  while (atomic_load(&tp->n_done) < nth) pthread_cond_wait(&tp->cv_done, &tp->mu);
  atomic_store(&tp->caller_sleeping, 0);
  pthread_mutex_unlock(&tp->mu);
  if (tp->timing) count_add(&tp->stats[0].sleep_ns, (uint64_t)(tpool_now_ns() - t0));
  if (tr) tr->done_ns = tpool_now_ns();
}

void tpool_set_trace(thread_pool *tp, tpool_trace *t) {
  if (tp) atomic_store(&tp->trace, t);
}

void tpool_hold_begin(thread_pool *tp) {
  if (!tp || tp->n_threads == 1) return;
  if (atomic_fetch_add(&tp->hold, 1) == 0) {
    atomic_fetch_add(&tp->wake, 1);
    tpool_wake_workers(tp);
  }
}

void tpool_hold_end(thread_pool *tp) {
  if (!tp || tp->n_threads == 1) return;
  if (atomic_load(&tp->hold) <= 0) return; /* unbalanced end: ignore */
  atomic_store(&tp->released_ns, tpool_now_ns());
  atomic_fetch_sub(&tp->hold, 1);
}

bool tpool_workers_awake(const thread_pool *tp) {
  if (!tp || tp->n_threads == 1) return false;
  thread_pool *t = (thread_pool *)tp; /* atomics: loads only */
  return atomic_load_explicit(&t->n_sleeping, memory_order_relaxed) == 0 &&
         atomic_load_explicit(&t->hold, memory_order_relaxed) > 0 &&
         tpool_now_ns() >= atomic_load_explicit(&t->contended_until_ns, memory_order_relaxed);
}

void tpool_get_stats(const thread_pool *tp, int ith, tpool_stats *out) {
  memset(out, 0, sizeof *out);
  if (!tp || ith < 0 || ith >= tp->n_threads) return;
  const struct tpool_counters *c = &tp->stats[ith];
  out->n_tasks = atomic_load_explicit(&c->n_tasks, memory_order_relaxed);
  out->n_sleeps = atomic_load_explicit(&c->n_sleeps, memory_order_relaxed);
  out->busy_ns = atomic_load_explicit(&c->busy_ns, memory_order_relaxed);
  out->sleep_ns = atomic_load_explicit(&c->sleep_ns, memory_order_relaxed);
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
