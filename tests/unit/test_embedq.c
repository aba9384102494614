/* test_embedq.c - batched embeddings: model_embed_batch (several sequences
 * in one bert forward pass, src/model/bert.c) and the serving engine's
 * embedding batcher (src/engine/embedq.c: one request's inputs and
 * concurrent requests' inputs share forward passes).
 *
 * Reference: each input alone through model_embed on its own fresh
 * context, the path test_model_bert.c checks against numpy
 * (tools/ref_bert.py); one batched input is also checked against numpy
 * directly when python3 with numpy is present.
 *
 * Tolerance: 2e-6 absolute on unit-length vectors of 64 floats. A batched
 * pass multiplies the same weights by the same rows; only the matrix
 * kernel's tiling (how many rows it handles together) and the thread split
 * can change the order of float32 additions. Each output element is a sum
 * of at most n_ff = 128 products of order one, whose float32 rounding error
 * is a few ulps (about 1e-7 relative) per layer; after two layers, two
 * layer norms and the final normalization the vectors differ by well under
 * 1e-6 (measured: 0 with the F32 kernels on AVX2, where the row tiles sum in
 * the same order). 2e-6 is ~20 ulps of a component of size 0.1-1: large
 * enough for any summation order, far below what a wrong row offset,
 * position or attention mask across sequences would give (> 1e-2). */
#include "test.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "engine/embedq.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen_arch.h"

#define TOL 2e-6
#define N_IN 40
#define E_MAX 64

/* Deterministic inputs: input i has 1 + (i * 7) % 23 tokens (1..23), the
 * first 101 (CLS) and ids spread over the vocabulary of 300. */
static int64_t in_len(int i) { return 1 + (i * 7) % 23; }
static void in_tokens(int i, int32_t *t) {
  uint32_t s = 2654435761u * (uint32_t)(i + 1);
  for (int64_t k = 0; k < in_len(i); k++) {
    s = s * 1103515245u + 12345u;
    t[k] = k == 0 ? 101 : (int32_t)((s >> 8) % 300);
  }
}

typedef struct fixture {
  char path[512];
  model *m;
  int64_t E;
  int32_t tok[N_IN][32];
  const int32_t *tp[N_IN];
  int64_t len[N_IN];
  float ref[N_IN][E_MAX]; /* each alone, fresh context */
} fixture;

static bool fixture_make(fixture *f, enum model_arch arch, uint32_t type, int pooling) {
  model_testgen_arch g = model_testgen_arch_small(arch);
  g.type = type;
  if (pooling >= 0) g.pooling_type = pooling;
  snprintf(f->path, sizeof f->path, "%s/embq.gguf", test_tmpdir());
  if (model_testgen_arch_write(&g, f->path) || model_open(f->path, &f->m)) {
    test_fail_at(__FILE__, __LINE__, "test model: %s", err_detail());
    return false;
  }
  f->E = model_get_hparams(f->m)->n_embd;
  if (f->E > E_MAX) {
    test_fail_at(__FILE__, __LINE__, "n_embd %lld > %d", (long long)f->E, E_MAX);
    return false;
  }
  for (int i = 0; i < N_IN; i++) {
    in_tokens(i, f->tok[i]);
    f->tp[i] = f->tok[i];
    f->len[i] = in_len(i);
    model_ctx *c = NULL;
    model_ctx_params p = model_ctx_default_params();
    p.kv_type = MODEL_KV_F32;
    if (model_ctx_new(f->m, &p, &c) || model_embed(c, f->tok[i], f->len[i], f->ref[i], MODEL_EMBED_NORMALIZE)) {
      test_fail_at(__FILE__, __LINE__, "reference input %d: %s", i, err_detail());
      model_ctx_free(c);
      return false;
    }
    model_ctx_free(c);
  }
  return true;
}

static void fixture_free(fixture *f) {
  if (f && f->m) model_free(f->m);
  free(f);
}

/* A fixture of arch with layer matrices of type (0 = F32) and pooling (-1 =
 * the architecture's), references computed; NULL (a failure recorded) when
 * it could not be made. */
static fixture *fixture_new(enum model_arch arch, uint32_t type, int pooling) {
  fixture *f = calloc(1, sizeof *f);
  if (!f) test_fail_at(__FILE__, __LINE__, "out of memory");
  else if (!fixture_make(f, arch, type, pooling)) {
    fixture_free(f);
    f = NULL;
  }
  return f;
}

static double max_diff(const float *a, const float *b, int64_t n) {
  double d = 0;
  for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
  return d;
}

/* The largest max_diff of n packed vectors in out against the references of
 * inputs first .. first + n - 1. */
static double worst_vs_alone(const fixture *f, const float *out, int first, int n) {
  double worst = 0;
  for (int i = 0; i < n; i++) worst = fmax(worst, max_diff(out + i * f->E, f->ref[first + i], f->E));
  return worst;
}

/* All N_IN inputs (486 tokens) in one bert forward pass equal each alone,
 * with F32 and Q8_0 weights (the quantized kernels quantize each activation
 * row on its own); with 2 threads (attention split across (sequence, head)
 * tasks). */
static void batch_equals_alone(uint32_t type) {
  fixture *f = fixture_new(MODEL_ARCH_BERT, type, -1);
  ASSERT_TRUE(f);
  for (int threads = 1; threads <= 2; threads++) {
    model_ctx *c = NULL;
    model_ctx_params p = model_ctx_default_params();
    p.n_threads = threads;
    ASSERT_INT_EQ(model_ctx_new(f->m, &p, &c), 0);
    EXPECT_TRUE(model_embed_batch_tokens(c) >= 512);
    float *packed = calloc((size_t)(N_IN * f->E), sizeof *packed);
    int rc = model_embed_batch(c, N_IN, f->tp, f->len, packed, MODEL_EMBED_NORMALIZE);
    EXPECT_INT_EQ(rc, 0);
    double worst = rc == 0 ? worst_vs_alone(f, packed, 0, N_IN) : 0;
    printf("    %s threads=%d: max |batched - alone| = %.3g over %d inputs\n", tensor_type_name(type), threads, worst,
           N_IN);
    EXPECT_TRUE(worst <= TOL);
    /* a corrupted batch would differ by far more: input 3's vector is not input 4's */
    EXPECT_TRUE(max_diff(f->ref[3], f->ref[4], f->E) > 1e-2);
    free(packed);
    model_ctx_free(c);
  }
  fixture_free(f);
}

TEST(embedq_bert_batch_equals_alone) {
  batch_equals_alone(TENSOR_TYPE_F32);
  batch_equals_alone(TENSOR_TYPE_Q8_0);
}

/* One batched input against the independent numpy reference. */
TEST(embedq_bert_batch_matches_numpy) {
  if (access("tools/ref_bert.py", R_OK) != 0 || system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    TEST_SKIP("tools/ref_bert.py or python3 with numpy not available");
  fixture *f = fixture_new(MODEL_ARCH_BERT, 0, -1);
  ASSERT_TRUE(f);
  model_ctx *c = NULL;
  ASSERT_INT_EQ(model_ctx_new(f->m, NULL, &c), 0);
  float *packed = calloc((size_t)(N_IN * f->E), sizeof *packed);
  EXPECT_INT_EQ(model_embed_batch(c, N_IN, f->tp, f->len, packed, MODEL_EMBED_NORMALIZE), 0);
  const int pick = 17; /* in the middle of the batch: rows 180.. */
  char cmd[4096], outp[600];
  snprintf(outp, sizeof outp, "%s/ref.f32", test_tmpdir());
  int o = snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/ref_bert.py embed %s ", f->path);
  for (int64_t k = 0; k < f->len[pick]; k++) o += snprintf(cmd + o, sizeof cmd - (size_t)o, "%s%d", k ? "," : "", f->tok[pick][k]);
  snprintf(cmd + o, sizeof cmd - (size_t)o, " %s --normalize", outp);
  EXPECT_INT_EQ(system(cmd), 0);
  float ref[E_MAX];
  FILE *fp = fopen(outp, "rb");
  EXPECT_TRUE(fp && fread(ref, sizeof(float), (size_t)f->E, fp) == (size_t)f->E);
  if (fp) fclose(fp);
  double d = max_diff(packed + pick * f->E, ref, f->E);
  printf("    input %d in a batch of %d vs numpy: max diff %.3g\n", pick, N_IN, d);
  EXPECT_TRUE(d < 1e-4); /* float32 vs float64, as test_model_bert.c */
  free(packed);
  model_ctx_free(c);
  fixture_free(f);
}

/* The batcher: one request of N_IN inputs, with batches bounded to 7
 * inputs and 60 tokens, equals each alone; the batch count follows the
 * bounds (fewer passes than inputs). */
TEST(embedq_one_request_bounded_batches) {
  fixture *f = fixture_new(MODEL_ARCH_BERT, 0, -1);
  ASSERT_TRUE(f);
  embedq_params p = embedq_default_params();
  p.max_seqs = 7;
  p.max_tokens = 60;
  embedq *q = NULL;
  ASSERT_INT_EQ(embedq_new(f->m, &p, &q), 0);
  float *out = calloc((size_t)(N_IN * f->E), sizeof *out);
  size_t bad = 99;
  EXPECT_INT_EQ(embedq_embed(q, N_IN, f->tp, f->len, out, &bad), 0);
  EXPECT_TRUE(worst_vs_alone(f, out, 0, N_IN) <= TOL);
  embedq_stats st;
  embedq_get_stats(q, &st);
  EXPECT_INT_EQ(st.inputs, N_IN);
  int64_t total = 0;
  for (int i = 0; i < N_IN; i++) total += f->len[i];
  EXPECT_INT_EQ(st.tokens, total);
  /* at least ceil(40/7) = 6 and ceil(486/60) = 9 passes; packing lengths
   * up to 23 into 60 tokens fills every pass but the last with >= 38
   * tokens (or 7 inputs): at most ceil(486/38) = 13 */
  EXPECT_TRUE(st.batches >= 9 && st.batches <= 13);
  printf("    %d inputs, %d tokens: %llu forward passes\n", N_IN, (int)total, (unsigned long long)st.batches);
  EXPECT_INT_EQ(st.queued, 0);
  free(out);
  embedq_free(q);
  fixture_free(f);
}

/* Errors name the failing input: a token outside the vocabulary in input
 * 5 (found in the batch, then attributed by running each alone), an input
 * longer than the context (refused before anything is queued), an empty
 * input. */
TEST(embedq_errors_name_the_input) {
  fixture *f = fixture_new(MODEL_ARCH_BERT, 0, -1);
  ASSERT_TRUE(f);
  embedq *q = NULL;
  ASSERT_INT_EQ(embedq_new(f->m, NULL, &q), 0);
  float *out = calloc((size_t)(N_IN * f->E), sizeof *out);
  f->tok[5][1] = 300; /* vocabulary is 0..299 */
  size_t bad = 0;
  EXPECT_INT_EQ(embedq_embed(q, 10, f->tp, f->len, out, &bad), ERR_RANGE);
  EXPECT_INT_EQ(bad, 5);
  EXPECT_TRUE(strstr(err_detail(), "300") != NULL);
  /* the others of that batch were still embedded */
  EXPECT_TRUE(max_diff(out + 6 * f->E, f->ref[6], f->E) <= TOL);
  f->tok[5][1] = 7;
  int32_t longer[200] = {0};
  const int32_t *tp2[3] = {f->tp[0], longer, f->tp[1]};
  int64_t len2[3] = {f->len[0], 200, f->len[1]}; /* context is 128 */
  EXPECT_INT_EQ(embedq_embed(q, 3, tp2, len2, out, &bad), ERR_CONTEXT);
  EXPECT_INT_EQ(bad, 1);
  EXPECT_TRUE(strstr(err_detail(), "128") != NULL);
  len2[1] = 0;
  EXPECT_INT_EQ(embedq_embed(q, 3, tp2, len2, out, &bad), ERR_INVALID);
  EXPECT_INT_EQ(bad, 1);
  embedq_stats st;
  embedq_get_stats(q, &st);
  EXPECT_INT_EQ(st.queued, 0);
  free(out);
  embedq_free(q);
  fixture_free(f);
}

/* Concurrent requests: 8 threads, each embedding 3 rounds of 5 inputs of
 * its own; every call succeeds and every vector equals its input alone. */
struct worker {
  fixture *f;
  embedq *q;
  int id, fails;
  double worst;
};

static void *worker_main(void *arg) {
  struct worker *w = arg;
  fixture *f = w->f;
  float out[5 * E_MAX];
  for (int round = 0; round < 3; round++) {
    int first = (w->id * 5 + round * 3) % (N_IN - 5);
    if (embedq_embed(w->q, 5, f->tp + first, f->len + first, out, NULL)) {
      w->fails++;
      continue;
    }
    w->worst = fmax(w->worst, worst_vs_alone(f, out, first, 5));
  }
  return NULL;
}

TEST(embedq_concurrent_requests) {
  fixture *f = fixture_new(MODEL_ARCH_BERT, 0, -1);
  ASSERT_TRUE(f);
  embedq *q = NULL;
  embedq_params p = embedq_default_params();
  p.n_threads = 2;
  ASSERT_INT_EQ(embedq_new(f->m, &p, &q), 0);
  pthread_t th[8];
  struct worker w[8];
  for (int i = 0; i < 8; i++) {
    w[i] = (struct worker){.f = f, .q = q, .id = i};
    ASSERT_INT_EQ(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
  }
  for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 8; i++) {
    EXPECT_INT_EQ(w[i].fails, 0);
    EXPECT_TRUE(w[i].worst <= TOL);
  }
  embedq_stats st;
  embedq_get_stats(q, &st);
  EXPECT_INT_EQ(st.inputs, 8 * 3 * 5);
  EXPECT_TRUE(st.batches <= 8 * 3); /* at least one pass per call's 5 inputs */
  printf("    120 inputs from 24 concurrent calls: %llu forward passes\n", (unsigned long long)st.batches);
  embedq_free(q);
  fixture_free(f);
}

/* A decoder embedder (qwen3, last-token pooling) has no one-pass batch:
 * model_embed_batch runs each sequence alone, and the batcher gives the
 * same vectors as model_embed. */
TEST(embedq_qwen_falls_back_to_one_at_a_time) {
  fixture *f = fixture_new(MODEL_ARCH_QWEN3, 0, MODEL_POOLING_LAST);
  ASSERT_TRUE(f);
  embedq *q = NULL;
  ASSERT_INT_EQ(embedq_new(f->m, NULL, &q), 0);
  float *out = calloc((size_t)(12 * f->E), sizeof *out);
  EXPECT_INT_EQ(embedq_embed(q, 12, f->tp, f->len, out, NULL), 0);
  EXPECT_TRUE(worst_vs_alone(f, out, 0, 12) <= TOL);
  free(out);
  embedq_free(q);
  fixture_free(f);
}

/* Bad parameters are named. */
TEST(embedq_bad_params) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_BERT);
  char path[512];
  snprintf(path, sizeof path, "%s/b.gguf", test_tmpdir());
  model *m = NULL;
  ASSERT_INT_EQ(model_testgen_arch_write(&g, path), 0);
  ASSERT_INT_EQ(model_open(path, &m), 0);
  embedq_params p = embedq_default_params();
  p.max_seqs = 0;
  embedq *q = NULL;
  EXPECT_INT_EQ(embedq_new(m, &p, &q), ERR_RANGE);
  EXPECT_TRUE(strstr(err_detail(), "max_seqs") != NULL);
  EXPECT_TRUE(q == NULL);
  model_free(m);
}
