/*
 * test_kernels.c - kern_matmul and the thread pool against independent
 * expectations.
 *
 * The expected product is computed here in double from the weights
 * dequantized by the reference kernels (ref_dequantize_row), never by the
 * code under test. Tolerances, per path:
 *  - f32 activations (F32, F16, BF16 weights): f32 FMA accumulation, so
 *    |y - y_ref| <= 1e-5 * sum|w x| (+ a denormal-sized floor);
 *  - 8-bit activations (quantized types): each x_j is replaced by
 *    d_b * round(x_j / d_b) with d_b = amax_b / 127 over its block b (32 or
 *    256 elements), an error of at most amax_b / 254 per element, so
 *    |y - y_ref| <= sum_j |w_j| amax_b(j) / 254, plus f32 rounding of the
 *    per-block scale products, bounded by 1e-5 * sum_j |w_j| |x_j| and by
 *    1e-5 * sum_j |x_j| * max|w| for the Q4_K/Q5_K min terms that cancel.
 */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"
#include "test.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

static uint64_t kt_rng = 88172645463325252ull;
static float kt_rand(void) { /* uniform in [-1, 1) */
  kt_rng ^= kt_rng << 13;
  kt_rng ^= kt_rng >> 7;
  kt_rng ^= kt_rng << 17;
  return (float)((double)(kt_rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

/* Types with a kern_matmul kernel and their activation block (0: f32). */
static const struct {
  int type;
  int act_block;
} kt_types[] = {
    {TENSOR_TYPE_F32, 0},   {TENSOR_TYPE_F16, 0},   {TENSOR_TYPE_BF16, 0},
    {TENSOR_TYPE_Q4_0, 32}, {TENSOR_TYPE_Q4_1, 32}, {TENSOR_TYPE_Q5_0, 32},
    {TENSOR_TYPE_Q5_1, 32}, {TENSOR_TYPE_Q8_0, 32}, {TENSOR_TYPE_Q2_K, 256},
    {TENSOR_TYPE_Q3_K, 256}, {TENSOR_TYPE_Q4_K, 256}, {TENSOR_TYPE_Q5_K, 256},
    {TENSOR_TYPE_Q6_K, 256}, {TENSOR_TYPE_IQ4_NL, 32}, {TENSOR_TYPE_IQ4_XS, 256},
    {TENSOR_TYPE_IQ3_XXS, 256}, {TENSOR_TYPE_IQ3_S, 256}, {TENSOR_TYPE_IQ2_XXS, 256},
    {TENSOR_TYPE_IQ2_XS, 256}, {TENSOR_TYPE_IQ2_S, 256}, {TENSOR_TYPE_MXFP4, 32},
};
#define KT_N_TYPES (int)(sizeof kt_types / sizeof kt_types[0])

struct kt_case {
  int type, act_block;
  int64_t n_rows, n_cols, n_tokens;
  size_t row_bytes;
  void *W;        /* quantized weights */
  float *wd;      /* the same weights dequantized by the reference */
  float *x;       /* n_tokens x n_cols */
};

/* The i-quants: random block bytes with a sane f16 d first (every block
 * layout of these types starts with it), instead of our slow codebook
 * quantizers; any byte pattern is a valid block. */
static bool kt_random_blocks(int type) {
  switch (type) {
  case TENSOR_TYPE_IQ4_NL: case TENSOR_TYPE_IQ4_XS: case TENSOR_TYPE_IQ3_XXS: case TENSOR_TYPE_IQ3_S:
  case TENSOR_TYPE_IQ2_XXS: case TENSOR_TYPE_IQ2_XS: case TENSOR_TYPE_IQ2_S: return true;
  default: return false;
  }
}

/* Random weights in type, random activations with a few outliers (the case
 * where per-block activation scales matter). */
static int kt_case_init(struct kt_case *c, int type, int act_block, int64_t n_rows,
                        int64_t n_cols, int64_t n_tokens) {
  memset(c, 0, sizeof *c);
  c->type = type;
  c->act_block = act_block;
  c->n_rows = n_rows;
  c->n_cols = n_cols;
  c->n_tokens = n_tokens;
  if (tensor_type_row_bytes((uint32_t)type, n_cols, &c->row_bytes)) return -1;
  c->W = malloc(c->row_bytes * (size_t)n_rows);
  c->wd = malloc(sizeof(float) * (size_t)(n_rows * n_cols));
  c->x = malloc(sizeof(float) * (size_t)(n_tokens * n_cols));
  float *tmp = malloc(sizeof(float) * (size_t)n_cols);
  if (!c->W || !c->wd || !c->x || !tmp) {
    free(tmp);
    return -1;
  }
  for (int64_t r = 0; r < n_rows; r++) {
    float scale = 0.1f + (float)(r % 7);
    float offset = (r % 3 == 0) ? 0.3f : 0.0f; /* exercise the min terms */
    for (int64_t i = 0; i < n_cols; i++) tmp[i] = kt_rand() * scale + offset;
    uint8_t *row = (uint8_t *)c->W + (size_t)r * c->row_bytes;
    if (kt_random_blocks(type)) { /* every grid entry, sign and scale field reachable */
      const struct tensor_type_traits *tr = tensor_type_get((uint32_t)type);
      for (size_t i = 0; i < c->row_bytes; i++) row[i] = (uint8_t)(kt_rand() * 128.0f + 128.0f);
      for (size_t o = 0; o < c->row_bytes; o += tr->type_size) {
        uint16_t d = f32_to_fp16(scale * 0.01f * (1.0f + kt_rand()));
        memcpy(row + o, &d, 2);
      }
    } else if (ref_quantize_row((uint32_t)type, tmp, row, n_cols)) {
      free(tmp);
      return -1;
    }
    if (ref_dequantize_row((uint32_t)type, row, c->wd + r * n_cols, n_cols)) {
      free(tmp);
      return -1;
    }
  }
  for (int64_t i = 0; i < n_tokens * n_cols; i++) {
    float v = kt_rand();
    if (i % 997 == 5) v *= 20.0f; /* rare outliers: most blocks keep a tight bound */
    c->x[i] = v;
  }
  free(tmp);
  return 0;
}

static void kt_case_free(struct kt_case *c) {
  free(c->W);
  free(c->wd);
  free(c->x);
}

/* Checks y against the double-precision product; returns the number of
 * elements out of tolerance (reporting the first). */
static int kt_check(const struct kt_case *c, const float *y, const char *what) {
  int bad = 0;
  for (int64_t t = 0; t < c->n_tokens; t++) {
    const float *x = c->x + t * c->n_cols;
    for (int64_t r = 0; r < c->n_rows; r++) {
      const float *w = c->wd + r * c->n_cols;
      double ref = 0, sum_abs = 0, quant_err = 0, sum_x = 0, wmax = 0;
      for (int64_t i = 0; i < c->n_cols; i++) {
        ref += (double)w[i] * x[i];
        sum_abs += fabs((double)w[i] * x[i]);
        sum_x += fabs((double)x[i]);
        if (fabs(w[i]) > wmax) wmax = fabs(w[i]);
      }
      if (c->act_block) {
        for (int64_t b = 0; b < c->n_cols; b += c->act_block) {
          double amax = 0, wsum = 0;
          for (int64_t i = b; i < b + c->act_block; i++) {
            if (fabs(x[i]) > amax) amax = fabs(x[i]);
            wsum += fabs(w[i]);
          }
          quant_err += wsum * amax / 254.0;
        }
      }
      double tol = quant_err * (1 + 1e-5) + 1e-5 * sum_abs + 1e-30;
      if (c->act_block) tol += 1e-5 * sum_x * wmax;
      double got = y[t * c->n_rows + r];
      if (!(fabs(got - ref) <= tol)) {
        if (!bad)
          test_fail_at(__FILE__, __LINE__,
                       "%s %s rows %lld cols %lld tokens %lld: y[%lld][%lld] = %.9g, expected "
                       "%.9g (tol %.3g)",
                       what, tensor_type_name((uint32_t)c->type), (long long)c->n_rows,
                       (long long)c->n_cols, (long long)c->n_tokens, (long long)t, (long long)r,
                       got, ref, tol);
        bad++;
      }
    }
  }
  return bad;
}

static int kt_block(int type) { return (int)tensor_type_get((uint32_t)type)->block_size; }

/* Every type x odd shapes, on a 2-thread pool (so the split is exercised). */
static void kt_run_shapes(bool reference) {
  static const int64_t rows[] = {1, 3, 17, 257};
  static const int64_t blocks[] = {1, 2, 3, 7};
  static const int64_t plain_cols[] = {1, 7, 33, 100, 257}; /* F32/F16/BF16 tails */
  static const int64_t toks[] = {1, 2, 3, 5, 9};
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  kern_force_reference(reference);
  for (int ti = 0; ti < KT_N_TYPES; ti++) {
    int type = kt_types[ti].type, bs = kt_block(type);
    int n_colv = bs == 1 ? 5 : 4;
    for (int ri = 0; ri < 4; ri++)
      for (int ci = 0; ci < n_colv; ci++)
        for (int ki = 0; ki < 5; ki++) {
          int64_t n_cols = bs == 1 ? plain_cols[ci] : blocks[ci] * bs;
          /* keep the big-row cases to a subset so the test stays fast */
          if (rows[ri] == 257 && ki != 0 && ki != 4) continue;
          struct kt_case c;
          if (kt_case_init(&c, type, kt_types[ti].act_block, rows[ri], n_cols, toks[ki])) {
            kt_case_free(&c);
            test_fail_at(__FILE__, __LINE__, "setup %s", tensor_type_name((uint32_t)type));
            goto done;
          }
          float *y = malloc(sizeof(float) * (size_t)(c.n_rows * c.n_tokens));
          int rc = kern_matmul(tp, type, c.W, c.n_rows, c.n_cols, c.x, c.n_tokens, y);
          EXPECT_INT_EQ(rc, 0);
          int bad = rc == 0 ? kt_check(&c, y, reference ? "reference" : kern_isa()) : 1;
          free(y);
          kt_case_free(&c);
          if (bad) goto done;
        }
  }
done:
  kern_force_reference(false);
  tpool_free(tp);
}

/* Under every variant this CPU runs (AVX-512 and AVX2 on such a CPU). */
TEST(kernels_matmul_fast_vs_double) {
  static const char *const isas[] = {"avx512-vnni", "avx2", "neon", "scalar"};
  for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++)
    if (kern_use_isa(isas[i])) kt_run_shapes(false);
  kern_use_isa(NULL);
}

TEST(kernels_matmul_reference_vs_double) { kt_run_shapes(true); }

/* The forced reference path gives exactly ref_vec_dot's result. */
TEST(kernels_reference_is_ref_vec_dot) {
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(3, &tp), 0);
  kern_force_reference(true);
  EXPECT_STR_EQ(kern_isa(), "reference");
  EXPECT_FALSE(kern_has_fast(TENSOR_TYPE_Q4_0));
  for (int ti = 0; ti < KT_N_TYPES; ti++) {
    struct kt_case c;
    int bs = kt_block(kt_types[ti].type);
    ASSERT_INT_EQ(kt_case_init(&c, kt_types[ti].type, 0, 19, 2 * (bs == 1 ? 32 : bs), 3), 0);
    float y[19 * 3];
    ASSERT_INT_EQ(kern_matmul(tp, c.type, c.W, c.n_rows, c.n_cols, c.x, c.n_tokens, y), 0);
    for (int64_t t = 0; t < c.n_tokens; t++)
      for (int64_t r = 0; r < c.n_rows; r++) {
        float e;
        ASSERT_INT_EQ(ref_vec_dot((uint32_t)c.type, (uint8_t *)c.W + (size_t)r * c.row_bytes,
                                  c.x + t * c.n_cols, c.n_cols, &e),
                      0);
        EXPECT_TRUE(memcmp(&e, &y[t * c.n_rows + r], sizeof e) == 0);
      }
    kt_case_free(&c);
  }
  kern_force_reference(false);
  EXPECT_FALSE(strcmp(kern_isa(), "reference") == 0);
  tpool_free(tp);
}

/* Bit-identical results for 1, 2 and 3 threads, and for a token computed
 * alone or inside a batch (and right, for a batch past one token block). */
TEST(kernels_matmul_deterministic) {
  thread_pool *tps[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) ASSERT_INT_EQ(tpool_new(i + 1, &tps[i]), 0);
  for (int ti = 0; ti < KT_N_TYPES; ti++) {
    struct kt_case c;
    int bs = kt_block(kt_types[ti].type);
    int64_t n_cols = bs == 1 ? 200 : 3 * bs;
    /* 37 tokens: more than one 16-token block, a partial tile at the end */
    ASSERT_INT_EQ(kt_case_init(&c, kt_types[ti].type, kt_types[ti].act_block, 129, n_cols, 37), 0);
    size_t ny = (size_t)(c.n_rows * c.n_tokens);
    float *y[3], *y1 = malloc(sizeof(float) * (size_t)c.n_rows);
    for (int i = 0; i < 3; i++) {
      y[i] = malloc(sizeof(float) * ny);
      ASSERT_INT_EQ(kern_matmul(tps[i], c.type, c.W, c.n_rows, c.n_cols, c.x, c.n_tokens, y[i]),
                    0);
    }
    EXPECT_INT_EQ(kt_check(&c, y[0], "1 thread"), 0);
    EXPECT_MEM_EQ(y[0], y[1], ny * sizeof(float));
    EXPECT_MEM_EQ(y[0], y[2], ny * sizeof(float));
    for (int64_t t = 0; t < c.n_tokens; t += 5) {
      ASSERT_INT_EQ(kern_matmul(NULL, c.type, c.W, c.n_rows, c.n_cols, c.x + t * c.n_cols, 1, y1),
                    0);
      EXPECT_MEM_EQ(y1, y[0] + t * c.n_rows, (size_t)c.n_rows * sizeof(float));
    }
    for (int i = 0; i < 3; i++) free(y[i]);
    free(y1);
    kt_case_free(&c);
  }
  for (int i = 0; i < 3; i++) tpool_free(tps[i]);
}

TEST(kernels_matmul_errors) {
  float x[64] = {0}, y[4];
  uint8_t w[256] = {0};
  err_clear();
  EXPECT_INT_EQ(kern_matmul(NULL, TENSOR_TYPE_Q8_1, w, 1, 32, x, 1, y), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "Q8_1");
  EXPECT_INT_EQ(kern_matmul(NULL, 99, w, 1, 32, x, 1, y), ERR_UNSUPPORTED);
  EXPECT_INT_EQ(kern_matmul(NULL, -1, w, 1, 32, x, 1, y), ERR_UNSUPPORTED);
  EXPECT_INT_EQ(kern_matmul(NULL, TENSOR_TYPE_Q4_0, w, 1, 48, x, 1, y), ERR_RANGE);
  EXPECT_INT_EQ(kern_matmul(NULL, TENSOR_TYPE_Q4_K, w, 1, 32, x, 1, y), ERR_RANGE);
  EXPECT_INT_EQ(kern_matmul(NULL, TENSOR_TYPE_F32, w, -1, 4, x, 1, y), ERR_RANGE);
  /* empty products are fine and touch nothing */
  /* zero columns: y = 0, with and without a pool, fast and reference */
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  for (int ref = 0; ref < 2; ref++) {
    kern_force_reference(ref);
    for (int ty = 0; ty < KT_N_TYPES; ty++) {
      y[0] = y[1] = 42.0f;
      EXPECT_INT_EQ(kern_matmul(ref ? NULL : tp, kt_types[ty].type, w, 2, 0, x, 1, y), 0);
      EXPECT_TRUE(y[0] == 0.0f && y[1] == 0.0f);
    }
  }
  kern_force_reference(false);
  tpool_free(tp);
  y[0] = 42.0f;
  EXPECT_INT_EQ(kern_matmul(NULL, TENSOR_TYPE_Q4_0, w, 0, 32, x, 1, y), 0);
  EXPECT_INT_EQ(kern_matmul(NULL, TENSOR_TYPE_Q4_0, w, 1, 32, x, 0, y), 0);
  EXPECT_TRUE(y[0] == 42.0f);
}

/* Hand-computed: W = [[1, 2, 3, 4], [-1, 0.5, 0, 2]] in F32 and F16,
 * x = [1, 1, 1, 1], [2, 0, -1, 0.25]. */
TEST(kernels_matmul_hand_values) {
  float wf[8] = {1, 2, 3, 4, -1, 0.5f, 0, 2};
  uint16_t wh[8];
  for (int i = 0; i < 8; i++) wh[i] = f32_to_fp16(wf[i]);
  float x[8] = {1, 1, 1, 1, 2, 0, -1, 0.25f};
  float y[4];
  ASSERT_INT_EQ(kern_matmul(NULL, TENSOR_TYPE_F32, wf, 2, 4, x, 2, y), 0);
  EXPECT_NEAR(y[0], 10.0, 1e-6);
  EXPECT_NEAR(y[1], 1.5, 1e-6);
  EXPECT_NEAR(y[2], 0.0, 1e-6);
  EXPECT_NEAR(y[3], -1.5, 1e-6);
  ASSERT_INT_EQ(kern_matmul(NULL, TENSOR_TYPE_F16, wh, 2, 4, x, 2, y), 0);
  EXPECT_NEAR(y[0], 10.0, 1e-6);
  EXPECT_NEAR(y[3], -1.5, 1e-6);
}

static void kt_count(void *ctx, int ith, int nth) {
  atomic_int *counts = ctx;
  atomic_fetch_add(&counts[ith], 1);
  atomic_fetch_add(&counts[64 + nth], 1);
}

TEST(kernels_tpool_runs_every_ith_once) {
  for (int n = 1; n <= 4; n++) {
    thread_pool *tp = NULL;
    ASSERT_INT_EQ(tpool_new(n, &tp), 0);
    EXPECT_INT_EQ(tpool_n_threads(tp), n);
    for (int rep = 0; rep < 200; rep++) {
      atomic_int counts[128];
      for (int i = 0; i < 128; i++) atomic_init(&counts[i], 0);
      tpool_run(tp, kt_count, counts);
      for (int i = 0; i < n; i++) EXPECT_INT_EQ(atomic_load(&counts[i]), 1);
      EXPECT_INT_EQ(atomic_load(&counts[n]), 0);
      EXPECT_INT_EQ(atomic_load(&counts[64 + n]), n); /* every call saw nth = n */
      if (test_failed_flag) break;
    }
    tpool_free(tp);
  }
  atomic_int counts[128];
  for (int i = 0; i < 128; i++) atomic_init(&counts[i], 0);
  tpool_run(NULL, kt_count, counts);
  EXPECT_INT_EQ(atomic_load(&counts[0]), 1);
  EXPECT_INT_EQ(atomic_load(&counts[65]), 1);
  EXPECT_INT_EQ(tpool_n_threads(NULL), 1);
  thread_pool *tp = (thread_pool *)1;
  EXPECT_INT_EQ(tpool_new(0, &tp), ERR_RANGE);
  EXPECT_TRUE(tp == NULL);
}

/* Tasks are claimed by whichever thread comes first (tpool.c), so a late
 * worker may find a job already done, or find the next one: across many
 * back-to-back jobs with two different functions, each job's every task
 * must still run exactly once, with that job's own fn and ctx (a stale
 * worker running a task with the previous job's ctx would leave a count of
 * 2 in an old array and 0 in the new one). */
static void kt_count_odd(void *ctx, int ith, int nth) {
  atomic_int *counts = ctx;
  atomic_fetch_add(&counts[32 + ith], 1);
  atomic_fetch_add(&counts[64 + nth], 1);
}

TEST(kernels_tpool_claims_each_task_once_across_jobs) {
  enum { JOBS = 4000 };
  static atomic_int counts[JOBS][128];
  for (int n = 2; n <= 3; n++) {
    thread_pool *tp = NULL;
    ASSERT_INT_EQ(tpool_new(n, &tp), 0);
    for (int j = 0; j < JOBS; j++)
      for (int i = 0; i < 128; i++) atomic_init(&counts[j][i], 0);
    for (int j = 0; j < JOBS; j++) tpool_run(tp, j % 2 ? kt_count_odd : kt_count, counts[j]);
    for (int j = 0; j < JOBS && !test_failed_flag; j++) {
      int base = j % 2 ? 32 : 0;
      for (int i = 0; i < n; i++) EXPECT_INT_EQ(atomic_load(&counts[j][base + i]), 1);
      EXPECT_INT_EQ(atomic_load(&counts[j][base + n]), 0);
      EXPECT_INT_EQ(atomic_load(&counts[j][32 - base]), 0); /* the other function never ran on it */
      EXPECT_INT_EQ(atomic_load(&counts[j][64 + n]), n);
    }
    tpool_free(tp);
  }
}

/* Waits (up to 20 s, a liveness bound, not a speed bound) until every
 * worker of tp has gone to sleep more often than before[i]. */
static bool kt_workers_slept(thread_pool *tp, const uint64_t *before) {
  for (int ms = 0; ms < 20000; ms++) {
    bool all = true;
    for (int i = 1; i < tpool_n_threads(tp); i++) {
      tpool_stats st;
      tpool_get_stats(tp, i, &st);
      if (st.n_sleeps <= before[i]) all = false;
    }
    if (all) return true;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return false;
}

/* Inside a hold scope (nested twice, as a caller inside a caller would)
 * workers wait hot between jobs; whatever the timing, every task of every
 * job runs exactly once with its own fn/ctx, the counters add up to every
 * task run, and once the scope is left the workers do go to sleep (the
 * n_sleeps counter moves). A new scope wakes them: jobs still run right
 * after it. */
TEST(kernels_tpool_hold_scope_runs_every_task_once_then_sleeps) {
  enum { JOBS = 3000 };
  static atomic_int counts[JOBS][128];
  for (int n = 2; n <= 3; n++) {
    thread_pool *tp = NULL;
    ASSERT_INT_EQ(tpool_new(n, &tp), 0);
    for (int round = 0; round < 2 && !test_failed_flag; round++) {
      for (int j = 0; j < JOBS; j++)
        for (int i = 0; i < 128; i++) atomic_init(&counts[j][i], 0);
      uint64_t tasks0 = 0, before[4] = {0};
      for (int i = 0; i < n; i++) {
        tpool_stats st;
        tpool_get_stats(tp, i, &st);
        tasks0 += st.n_tasks;
      }
      tpool_hold_begin(tp);
      tpool_hold_begin(tp);
      for (int j = 0; j < JOBS / 2; j++) tpool_run(tp, j % 2 ? kt_count_odd : kt_count, counts[j]);
      tpool_hold_end(tp); /* still held once */
      for (int j = JOBS / 2; j < JOBS - 1; j++) tpool_run(tp, j % 2 ? kt_count_odd : kt_count, counts[j]);
      /* Sleep counts are taken before the last job: that job wakes a worker
       * that already slept, so each must enter the sleep path again after
       * this point. Taken after the scope instead, a worker that slept
       * while this thread was descheduled (> the 1 ms linger) would never
       * move its counter again (CI saw it). */
      for (int i = 0; i < n; i++) {
        tpool_stats st;
        tpool_get_stats(tp, i, &st);
        before[i] = st.n_sleeps;
      }
      tpool_run(tp, (JOBS - 1) % 2 ? kt_count_odd : kt_count, counts[JOBS - 1]);
      tpool_hold_end(tp);
      tpool_hold_end(tp); /* unbalanced: ignored */
      uint64_t tasks1 = 0;
      for (int i = 0; i < n; i++) {
        tpool_stats st;
        tpool_get_stats(tp, i, &st);
        tasks1 += st.n_tasks;
      }
      EXPECT_INT_EQ((long long)(tasks1 - tasks0), (long long)JOBS * n);
      for (int j = 0; j < JOBS && !test_failed_flag; j++) {
        int base = j % 2 ? 32 : 0;
        for (int i = 0; i < n; i++) EXPECT_INT_EQ(atomic_load(&counts[j][base + i]), 1);
        EXPECT_INT_EQ(atomic_load(&counts[j][base + n]), 0);
        EXPECT_INT_EQ(atomic_load(&counts[j][32 - base]), 0);
        EXPECT_INT_EQ(atomic_load(&counts[j][64 + n]), n);
      }
      EXPECT_TRUE(kt_workers_slept(tp, before));
      /* round 2 begins a scope with every worker asleep */
    }
    tpool_free(tp);
  }
  /* no pool, one thread: no-ops; stats of a bad index are zeros */
  tpool_hold_begin(NULL);
  tpool_hold_end(NULL);
  thread_pool *tp1 = NULL;
  ASSERT_INT_EQ(tpool_new(1, &tp1), 0);
  tpool_hold_begin(tp1);
  atomic_int counts1[128];
  for (int i = 0; i < 128; i++) atomic_init(&counts1[i], 0);
  tpool_run(tp1, kt_count, counts1);
  tpool_hold_end(tp1);
  EXPECT_INT_EQ(atomic_load(&counts1[0]), 1);
  tpool_stats st;
  st.n_tasks = 99;
  tpool_get_stats(tp1, 5, &st);
  EXPECT_INT_EQ((long long)st.n_tasks, 0);
  tpool_get_stats(NULL, 0, &st);
  EXPECT_INT_EQ((long long)st.n_sleeps, 0);
  tpool_free(tp1);
}

TEST(kernels_isa_name) {
  const char *isa = kern_isa();
  EXPECT_TRUE(strcmp(isa, "avx512-vnni") == 0 || strcmp(isa, "avx2") == 0 ||
              strcmp(isa, "neon") == 0 || strcmp(isa, "scalar") == 0);
#if defined(__x86_64__)
  __builtin_cpu_init();
  unsigned a, b, c, d; /* F16C: CPUID leaf 1, ECX bit 29 (clang 14 lacks the builtin's name) */
  bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) {
    EXPECT_TRUE(strcmp(isa, "scalar") != 0);
    for (int i = 0; i < KT_N_TYPES; i++) /* every type of the tests has a fast kernel */
      TEST_CHECK_(kern_has_fast(kt_types[i].type), 0, "no fast kernel for %s",
                  tensor_type_name((uint32_t)kt_types[i].type));
    /* kern_use_isa switches to a lesser variant and back; an unknown name
     * changes nothing */
    EXPECT_TRUE(kern_use_isa("avx2"));
    EXPECT_STR_EQ(kern_isa(), "avx2");
    EXPECT_FALSE(kern_use_isa("avx9000"));
    EXPECT_STR_EQ(kern_isa(), "avx2");
    EXPECT_TRUE(kern_use_isa(NULL));
    EXPECT_STR_EQ(kern_isa(), isa);
  }
#endif
}

/* The ISA's activation quantizers are bit-identical to the portable ones,
 * and those match hand-checked values: x = [127, -63.5, 0.4, 0...] gives
 * d = 1, q = [127, -64 (ties to even), 0, 0...]. */
TEST(kernels_activation_quantizers) {
  float x[512];
  for (int i = 0; i < 512; i++) x[i] = kt_rand() * (i % 50 == 0 ? 30.0f : 1.0f);
  for (int i = 64; i < 96; i++) x[i] = 0.0f; /* an all-zero block: d = 0, q = 0 */
  kern_block_q8 a[16], b[16];
  block_q8_K ka[2], kb[2];
  struct kern_ops ops;
  memset(&ops, 0, sizeof ops);
  x[200] = NAN;  /* block 6 of 32 (bit-identical NaN handling), block 0 of 256 */
  x[250] = INFINITY; /* block 7 of 32, block 0 of 256 */
  kern_quant_q8_c(x, a, 512);
  kern_quant_q8_K_c(x, ka, 512);
  EXPECT_TRUE(isnan(a[6].d) && isnan(a[7].d) && !isnan(a[8].d) && isnan(ka[0].d) && !isnan(ka[1].d));
  EXPECT_TRUE(a[2].d == 0.0f && a[2].qs[5] == 0 && a[2].s == 0.0f);
  if (kern_ops_avx512(&ops) || kern_ops_avx2(&ops) || kern_ops_neon(&ops)) {
    ops.quant_q8(x, b, 512);
    ops.quant_q8_K(x, kb, 512);
    EXPECT_MEM_EQ(a, b, sizeof a);
    EXPECT_MEM_EQ(ka, kb, sizeof ka);
    /* pairs, 8 of them, and 15 blocks (the last pair half empty) */
    kern_pair_q8 pa[8], pb[8];
    for (int n = 512; n >= 480; n -= 32) {
      memset(pa, 0x55, sizeof pa);
      memset(pb, 0x55, sizeof pb);
      kern_quant_q8p_c(x, pa, n);
      ops.quant_q8p(x, pb, n);
      EXPECT_MEM_EQ(pa, pb, sizeof pa);
    }
  }
  /* the pair layout from the blocks a[] (x with the NaN block 6): the
   * halves of the two blocks side by side, c = 8 x the 16-bit lane's x sum,
   * d = the block's scale in its four lanes; block 15 is missing (zeros) */
  {
    kern_pair_q8 p[8];
    kern_quant_q8_c(x, a, 512);
    kern_quant_q8p_c(x, p, 480);
    static const int8_t zero16[16];
    for (int ib = 0; ib < 16; ib++) {
      const kern_pair_q8 *pp = &p[ib / 2];
      int k = ib % 2;
      EXPECT_MEM_EQ(pp->a + 16 * k, ib < 15 ? a[ib].qs : zero16, 16);
      EXPECT_MEM_EQ(pp->b16 + 16 * k, ib < 15 ? a[ib].qs + 16 : zero16, 16);
      float d = ib < 15 ? a[ib].d : 0.0f;
      for (int l = 0; l < 4; l++) EXPECT_MEM_EQ(&pp->d[4 * k + l], &d, 4);
    }
    for (int i = 0; i < 16; i++) {
      const kern_pair_q8 *pp = &p[1];
      EXPECT_INT_EQ(pp->c[i], 8 * (pp->a[2 * i] + pp->a[2 * i + 1] + pp->b16[2 * i] + pp->b16[2 * i + 1]));
    }
  }
  float h[32] = {127.0f, -63.5f, 0.4f};
  kern_quant_q8_c(h, a, 32);
  EXPECT_TRUE(a[0].d == 1.0f);
  EXPECT_INT_EQ(a[0].qs[0], 127);
  EXPECT_INT_EQ(a[0].qs[1], -64);
  EXPECT_INT_EQ(a[0].qs[2], 0);
  EXPECT_TRUE(a[0].s == 63.0f);
  /* the interleaved Q4_K activations (kernels_impl.h): the same quantized
   * values, element e of sub-block sb at 64 (e % 16 / 4) + 32 (sb % 2) +
   * 16 (e / 16) + 4 (sb / 2) + e % 4, bsums replaced by d x 32-sums; every
   * variant's quantizer gives the portable one's bytes */
  {
    block_q8_K xa[2], xb2[2];
    kern_quant_q8_Kx_c(x, xa, 512);
    for (int ib = 0; ib < 2; ib++)
      for (int sb = 0; sb < 8; sb++)
        for (int e = 0; e < 32; e++)
          EXPECT_INT_EQ(xa[ib].qs[64 * (e % 16 / 4) + 32 * (sb % 2) + 16 * (e / 16) + 4 * (sb / 2) + e % 4],
                        ka[ib].qs[32 * sb + e]);
    float fs[8];
    memcpy(fs, xa[1].bsums, sizeof fs);
    for (int k = 0; k < 8; k++)
      EXPECT_TRUE(fs[k] == ka[1].d * (float)(ka[1].bsums[2 * k] + ka[1].bsums[2 * k + 1]));
    if (kern_ops_avx512(&ops) || kern_ops_avx2(&ops) || kern_ops_neon(&ops)) {
      ops.quant_q8_Kx(x, xb2, 512);
      EXPECT_MEM_EQ(xa, xb2, sizeof xa);
    }
  }
  /* the interleaved Q6_K activations (kernels_impl.h): element e of 64-element
   * chunk c at 64c + 32u + 16j + 4w + k where e = 32 (w % 2) + 16j + 8u +
   * 4 (w / 2) + k, block sums unchanged; every variant's quantizer agrees */
  {
    block_q8_K xa[2], xb2[2];
    kern_quant_q8_K6x_c(x, xa, 512);
    for (int ib = 0; ib < 2; ib++) {
      for (int c = 0; c < 4; c++)
        for (int u = 0; u < 2; u++)
          for (int j = 0; j < 2; j++)
            for (int w = 0; w < 4; w++)
              for (int k = 0; k < 4; k++)
                EXPECT_INT_EQ(xa[ib].qs[64 * c + 32 * u + 16 * j + 4 * w + k],
                              ka[ib].qs[64 * c + 32 * (w % 2) + 16 * j + 8 * u + 4 * (w / 2) + k]);
      EXPECT_MEM_EQ(xa[ib].bsums, ka[ib].bsums, sizeof ka[ib].bsums);
      EXPECT_MEM_EQ(&xa[ib].d, &ka[ib].d, sizeof ka[ib].d);
    }
    if (kern_ops_avx512(&ops) || kern_ops_avx2(&ops) || kern_ops_neon(&ops)) {
      ops.quant_q8_K6x(x, xb2, 512);
      EXPECT_MEM_EQ(xa, xb2, sizeof xa);
    }
  }
  /* the Q5_K activations (kernels_impl.h): the middle 16-byte quarters of
   * each 64-byte chunk swapped, bsums replaced by d x 32-sums as for Q4_K */
  {
    block_q8_K xa[2], xb2[2];
    kern_quant_q8_K5x_c(x, xa, 512);
    static const int quarter[4] = {0, 2, 1, 3}; /* stored quarter -> element quarter */
    for (int ib = 0; ib < 2; ib++) {
      for (int e = 0; e < 256; e++)
        EXPECT_INT_EQ(xa[ib].qs[e], ka[ib].qs[64 * (e / 64) + 16 * quarter[e % 64 / 16] + e % 16]);
      EXPECT_MEM_EQ(&xa[ib].d, &ka[ib].d, sizeof ka[ib].d);
    }
    float fs[8];
    memcpy(fs, xa[1].bsums, sizeof fs);
    for (int k = 0; k < 8; k++)
      EXPECT_TRUE(fs[k] == ka[1].d * (float)(ka[1].bsums[2 * k] + ka[1].bsums[2 * k + 1]));
    if (kern_ops_avx512(&ops) || kern_ops_avx2(&ops) || kern_ops_neon(&ops)) {
      ops.quant_q8_K5x(x, xb2, 512);
      EXPECT_MEM_EQ(xa, xb2, sizeof xa);
    }
  }
  /* the Q3_K activations (kernels_impl.h): a 4-byte word transpose of the
   * four 32-byte groups of each 128-element half, block sums unchanged */
  {
    block_q8_K xa[2], xb2[2];
    kern_quant_q8_K3x_c(x, xa, 512);
    for (int ib = 0; ib < 2; ib++) {
      for (int hf = 0; hf < 2; hf++)
        for (int m = 0; m < 4; m++)
          for (int j = 0; j < 2; j++)
            for (int i = 0; i < 4; i++)
              for (int k = 0; k < 4; k++)
                EXPECT_INT_EQ(xa[ib].qs[128 * hf + 32 * m + 16 * j + 4 * i + k],
                              ka[ib].qs[128 * hf + 32 * i + 16 * j + 4 * m + k]);
      EXPECT_MEM_EQ(xa[ib].bsums, ka[ib].bsums, sizeof ka[ib].bsums);
      EXPECT_MEM_EQ(&xa[ib].d, &ka[ib].d, sizeof ka[ib].d);
    }
    if (kern_ops_avx512(&ops) || kern_ops_avx2(&ops) || kern_ops_neon(&ops)) {
      ops.quant_q8_K3x(x, xb2, 512);
      EXPECT_MEM_EQ(xa, xb2, sizeof xa);
    }
  }
  /* Q8_K block sums: 16-element sums of qs */
  for (int k = 0; k < 16; k++) {
    int s = 0;
    for (int j = 0; j < 16; j++) s += ka[1].qs[16 * k + j];
    EXPECT_INT_EQ(ka[1].bsums[k], s);
  }
}

/* Every kernel variant this CPU can run computes the same activation
 * blocks and, for the integer types, bit-identical tiles: AVX-512 and AVX2
 * compile the same source with another dot instruction, and the portable
 * variant (scalar, and neon on arm64) reproduces the x86 lane arithmetic.
 * The float weight types (F32/F16/BF16) are compared within a bound
 * instead: AVX-512 has its own 16-lane kernels (kern_x512_f16.h), which
 * add the same products in another order. Each variant's f32 sum of n
 * exactly-rounded fused products is within gamma_n * sum |w x| of the
 * exact sum (gamma_n = n u / (1 - n u), u = 2^-24; standard summation
 * bound, any order), so two variants differ by at most 2 gamma_n sum |w x|
 * <= 2 n FLT_EPSILON sum |w x| (n u < 1/2 here). A dropped or doubled
 * product would be of the order sum |w x| / n, far above that for the
 * column counts tested. */
/* Activations of KT_NT tokens in the format ops wants for type, xs bytes
 * apart. */
#define KT_NT KERN_TILE_TOKENS_MAX
static void kt_prepare(const struct kern_ops *ops, int type, const float *x, int64_t n_cols,
                       uint8_t *xa, size_t xs) {
  for (int t = 0; t < KT_NT; t++) {
    const float *xt = x + t * n_cols;
    if (ops->act[type] == KERN_ACT_F32) memcpy(xa + t * xs, xt, (size_t)n_cols * 4);
    else if (ops->act[type] == KERN_ACT_Q8) ops->quant_q8(xt, xa + t * xs, n_cols);
    else if (ops->act[type] == KERN_ACT_Q8P) ops->quant_q8p(xt, xa + t * xs, n_cols);
    else if (ops->act[type] == KERN_ACT_Q8_KX) ops->quant_q8_Kx(xt, xa + t * xs, n_cols);
    else if (ops->act[type] == KERN_ACT_Q8_K6X) ops->quant_q8_K6x(xt, xa + t * xs, n_cols);
    else if (ops->act[type] == KERN_ACT_Q8_K5X) ops->quant_q8_K5x(xt, xa + t * xs, n_cols);
    else if (ops->act[type] == KERN_ACT_Q8_K3X) ops->quant_q8_K3x(xt, xa + t * xs, n_cols);
    else ops->quant_q8_K(xt, xa + t * xs, n_cols);
  }
}

TEST(kernels_isa_variants_agree) {
  struct kern_ops v[4];
  int n = 0;
  memset(v, 0, sizeof v);
  if (kern_ops_avx512(&v[n])) n++;
  if (kern_ops_avx2(&v[n])) n++;
  if (kern_ops_neon(&v[n])) n++;
  ASSERT_INT_EQ(kern_ops_scalar(&v[n]), 1);
  n++;
  /* float types: 123 = 7 x 16 + 8 + 3 and 3 x 32 + 16 + 11 cover every
   * 256- and 512-bit tail; then 1, 7, 33, 100, 257 columns */
  static const int64_t fcols[] = {123, 1, 7, 33, 100, 257};
  for (int vi = 1; vi < n; vi++) {
    for (int ti = 0; ti < KT_N_TYPES; ti++) {
      int type = kt_types[ti].type, bs = kt_block(type);
      if (!v[0].tile[type] || !v[vi].tile[type]) continue;
      for (size_t ci = 0; ci < (bs == 1 ? sizeof fcols / sizeof fcols[0] : 1); ci++) {
      struct kt_case c;
      /* 3 blocks (an odd count: Q4_0's last pair is half empty) */
      /* rows 0 (all weights positive: K-quant mins 0) and 1 (signed: mins
       * used), so both the scale and the min terms are compared */
      ASSERT_INT_EQ(kt_case_init(&c, type, 0, 2, bs == 1 ? fcols[ci] : 3 * bs, KT_NT), 0);
      size_t xs = (size_t)c.n_cols * 4 + 64;
      uint8_t *xa0 = calloc(KT_NT, xs), *xa1 = calloc(KT_NT, xs);
      ASSERT_TRUE(xa0 && xa1);
      kt_prepare(&v[0], type, c.x, c.n_cols, xa0, xs);
      kt_prepare(&v[vi], type, c.x, c.n_cols, xa1, xs);
      EXPECT_MEM_EQ(xa0, xa1, KT_NT * xs);
      int nt_max = v[0].tile_nt[type] ? v[0].tile_nt[type] : KERN_TILE_TOKENS;
      EXPECT_INT_EQ(nt_max, v[vi].tile_nt[type] ? v[vi].tile_nt[type] : KERN_TILE_TOKENS);
      for (int r = 0; r < 2; r++)
        for (int nt = 1; nt <= nt_max; nt++) {
          float y0[2 * KT_NT], y1[2 * KT_NT];
          const uint8_t *wr = (const uint8_t *)c.W + r * c.row_bytes;
          v[0].tile[type](wr, c.n_cols, xa0, xs, nt, y0, 2);
          v[vi].tile[type](wr, c.n_cols, xa1, xs, nt, y1, 2);
          for (int t = 0; t < nt; t++) {
            if (bs != 1) {
              TEST_CHECK_(memcmp(&y0[2 * t], &y1[2 * t], 4) == 0, 0,
                          "%s vs %s, %s row %d nt %d token %d: %.9g vs %.9g", v[0].isa, v[vi].isa,
                          tensor_type_name((uint32_t)type), r, nt, t, y0[2 * t], y1[2 * t]);
              continue;
            }
            double sabs = 0.0; /* sum |w x| */
            for (int64_t i = 0; i < c.n_cols; i++)
              sabs += fabs((double)c.wd[r * c.n_cols + i] * (double)c.x[t * c.n_cols + i]);
            double tol = 2.0 * (double)c.n_cols * FLT_EPSILON * sabs;
            TEST_CHECK_(fabs((double)y0[2 * t] - (double)y1[2 * t]) <= tol, 0,
                        "%s vs %s, %s %lld cols row %d nt %d token %d: %.9g vs %.9g (bound %.3g)", v[0].isa,
                        v[vi].isa, tensor_type_name((uint32_t)type), (long long)c.n_cols, r, nt, t, y0[2 * t],
                        y1[2 * t], tol);
          }
        }
      free(xa0);
      free(xa1);
      kt_case_free(&c);
      }
    }
  }
}

/* The two-row tiles give, for each row, exactly the one-row tile's bits
 * (so kern_matmul's result does not depend on how rows are paired). 3 and 5
 * blocks: an odd last block goes through the even accumulator. */
TEST(kernels_tile2_equals_tile) {
  struct kern_ops v[4];
  int n = 0;
  memset(v, 0, sizeof v);
  if (kern_ops_avx512(&v[n])) n++;
  if (kern_ops_avx2(&v[n])) n++;
  if (kern_ops_neon(&v[n])) n++;
  ASSERT_INT_EQ(kern_ops_scalar(&v[n]), 1);
  n++;
  int n_checked = 0;
  for (int vi = 0; vi < n; vi++) {
    for (int ti = 0; ti < KT_N_TYPES; ti++) {
      int type = kt_types[ti].type, bs = kt_block(type);
      if (!v[vi].tile2[type]) continue;
      ASSERT_TRUE(v[vi].tile[type] != NULL);
      for (int nb = 3; nb <= 5; nb += 2) {
        struct kt_case c;
        ASSERT_INT_EQ(kt_case_init(&c, type, 0, 2, bs == 1 ? 123 : nb * bs, KT_NT), 0);
        size_t xs = (size_t)c.n_cols * 4 + 64;
        uint8_t *xa = calloc(KT_NT, xs);
        ASSERT_TRUE(xa != NULL);
        kt_prepare(&v[vi], type, c.x, c.n_cols, xa, xs);
        for (int nt = 1; nt <= 4; nt++) {
          float y1[8], y2[8];
          memset(y2, 0xff, sizeof y2);
          for (int r = 0; r < 2; r++)
            v[vi].tile[type]((const uint8_t *)c.W + r * c.row_bytes, c.n_cols, xa, xs, nt, &y1[r], 2);
          v[vi].tile2[type](c.W, c.row_bytes, c.n_cols, xa, xs, nt, y2, 2);
          for (int t = 0; t < nt; t++)
            for (int r = 0; r < 2; r++)
              TEST_CHECK_(memcmp(&y1[2 * t + r], &y2[2 * t + r], 4) == 0, 0,
                          "%s %s %d blocks nt %d token %d row %d: tile %.9g, tile2 %.9g", v[vi].isa,
                          tensor_type_name((uint32_t)type), nb, nt, t, r, y1[2 * t + r], y2[2 * t + r]);
        }
        n_checked++;
        free(xa);
        kt_case_free(&c);
      }
    }
  }
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) EXPECT_TRUE(n_checked >= 8); /* Q8_0 Q5_0 Q4_1 Q5_1 */
#endif
}

/* kern_matmul(NULL, ...) from inside pool workers, all at once (the way
 * attention uses it): each worker's result equals the plain call's. */
struct kt_nested {
  const struct kt_case *c;
  float *y[4];
  int rc[4];
};

static void kt_nested_worker(void *arg, int ith, int nth) {
  (void)nth;
  struct kt_nested *k = arg;
  const struct kt_case *c = k->c;
  for (int rep = 0; rep < 20; rep++)
    k->rc[ith] |= kern_matmul(NULL, c->type, c->W, c->n_rows, c->n_cols, c->x, c->n_tokens, k->y[ith]);
}

TEST(kernels_matmul_nested_in_pool) {
  static const int types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q6_K, TENSOR_TYPE_F16};
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(4, &tp), 0);
  for (int ti = 0; ti < 3; ti++) {
    struct kt_case c;
    int bs = kt_block(types[ti]);
    ASSERT_INT_EQ(kt_case_init(&c, types[ti], 0, 33, bs == 1 ? 96 : 2 * bs, 6), 0);
    size_t ny = (size_t)(c.n_rows * c.n_tokens);
    float *want = malloc(ny * sizeof(float));
    ASSERT_INT_EQ(kern_matmul(NULL, c.type, c.W, c.n_rows, c.n_cols, c.x, c.n_tokens, want), 0);
    struct kt_nested k = {.c = &c};
    for (int i = 0; i < 4; i++) k.y[i] = malloc(ny * sizeof(float));
    tpool_run(tp, kt_nested_worker, &k);
    for (int i = 0; i < 4; i++) {
      EXPECT_INT_EQ(k.rc[i], 0);
      EXPECT_MEM_EQ(k.y[i], want, ny * sizeof(float));
      free(k.y[i]);
    }
    free(want);
    kt_case_free(&c);
  }
  tpool_free(tp);
}

/* A NaN or Inf in a token's activations makes that token's outputs NaN or
 * Inf on every path (as the reference would), never silently finite; the
 * other tokens are unaffected. */
TEST(kernels_matmul_nonfinite_activations) {
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  for (int ti = 0; ti < KT_N_TYPES; ti++) {
    struct kt_case c;
    int bs = kt_block(kt_types[ti].type);
    ASSERT_INT_EQ(kt_case_init(&c, kt_types[ti].type, 0, 5, bs == 1 ? 64 : 2 * bs, 3), 0);
    c.x[1 * c.n_cols + 3] = NAN;
    c.x[2 * c.n_cols + c.n_cols - 1] = INFINITY;
    float y[15];
    ASSERT_INT_EQ(kern_matmul(tp, c.type, c.W, c.n_rows, c.n_cols, c.x, c.n_tokens, y), 0);
    for (int r = 0; r < 5; r++) {
      TEST_CHECK_(isfinite(y[r]), 0, "%s token 0 row %d: %g", tensor_type_name((uint32_t)c.type), r, y[r]);
      TEST_CHECK_(!isfinite(y[5 + r]), 0, "%s NaN token row %d: %g", tensor_type_name((uint32_t)c.type), r, y[5 + r]);
      TEST_CHECK_(!isfinite(y[10 + r]), 0, "%s Inf token row %d: %g", tensor_type_name((uint32_t)c.type), r, y[10 + r]);
    }
    kt_case_free(&c);
  }
  tpool_free(tp);
}

/* PARLEY_KERNELS=reference at first use forces the reference path (each
 * test runs in a fresh forked process, so dispatch has not run yet). */
TEST(kernels_env_forces_reference) {
  setenv("PARLEY_KERNELS", "reference", 1);
  EXPECT_STR_EQ(kern_isa(), "reference");
  EXPECT_FALSE(kern_has_fast(TENSOR_TYPE_Q4_K));
  kern_force_reference(false);
  unsetenv("PARLEY_KERNELS");
  EXPECT_FALSE(strcmp(kern_isa(), "reference") == 0);
}

/* Every 2-D tensor of the shared tiny llama file (bytes written by another
 * implementation), times random activations, against the double product
 * of its reference-dequantized rows. */
#include "gguf/gguf.h"

TEST(kernels_matmul_shared_model_tensors) {
  char path[4096];
  if (!test_shared_path("models/llama-2-tiny-random.gguf", path, sizeof path))
    TEST_SKIP("../shared/models/llama-2-tiny-random.gguf is absent");
  gguf_file *f = NULL;
  ASSERT_INT_EQ(gguf_open(path, &f), 0);
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  int n_checked = 0;
  for (size_t i = 0; i < gguf_n_tensors(f); i++) {
    const gguf_tensor *t = gguf_tensor_at(f, i);
    if (t->n_dims != 2 || !tensor_type_get(t->type) || !tensor_type_get(t->type)->supported)
      continue;
    struct kt_case c;
    memset(&c, 0, sizeof c);
    c.type = (int)t->type;
    c.act_block = 256; /* the widest activation block: a valid (looser) bound for all */
    for (int k = 0; k < KT_N_TYPES; k++)
      if (kt_types[k].type == c.type) c.act_block = kt_types[k].act_block;
    c.n_cols = (int64_t)t->dims[0];
    c.n_rows = (int64_t)t->dims[1] < 300 ? (int64_t)t->dims[1] : 300;
    c.n_tokens = 2;
    ASSERT_INT_EQ(tensor_type_row_bytes(t->type, c.n_cols, &c.row_bytes), 0);
    c.wd = malloc(sizeof(float) * (size_t)(c.n_rows * c.n_cols));
    c.x = malloc(sizeof(float) * (size_t)(c.n_tokens * c.n_cols));
    float *y = malloc(sizeof(float) * (size_t)(c.n_rows * c.n_tokens));
    ASSERT_TRUE(c.wd && c.x && y);
    for (int64_t r = 0; r < c.n_rows; r++)
      ASSERT_INT_EQ(ref_dequantize_row(t->type, (const uint8_t *)t->data + (size_t)r * c.row_bytes,
                                       c.wd + r * c.n_cols, c.n_cols),
                    0);
    for (int64_t k = 0; k < c.n_tokens * c.n_cols; k++) c.x[k] = kt_rand();
    ASSERT_INT_EQ(kern_matmul(tp, c.type, t->data, c.n_rows, c.n_cols, c.x, c.n_tokens, y), 0);
    EXPECT_INT_EQ(kt_check(&c, y, t->name), 0);
    n_checked++;
    free(c.wd);
    free(c.x);
    free(y);
  }
  EXPECT_INT_GT(n_checked, 0);
  tpool_free(tp);
  gguf_close(f);
}
