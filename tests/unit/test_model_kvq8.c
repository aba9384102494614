/* test_model_kvq8.c - the Q8_0 KV cache (MODEL_KV_Q8_0): whole random-weight
 * llama, qwen2 and qwen3 models against the same model with an exact F32
 * cache (logits close, greedy tokens equal), the attention over a Q8_0
 * cache against a scalar double-precision reference on random data at odd
 * lengths, the value-tile dequantizer bit for bit, prefix copies, and the
 * fallback to F16 for head sizes that are not a multiple of 32. */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/attn.h"
#include "kernels/kernels.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/model_int.h"
#include "model/testgen.h"
#include "model/testgen_arch.h"
#include "engine/manager.h"
#include "model/registry.h"
#include "model_ref.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* uniform in [0, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}
static float grand(void) { /* standard normal (Box-Muller) */
  double u = urand(), v = urand();
  return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

/* The small llama shape with head_dim 32 (n_embd 128, 4 heads, 2 KV heads)
 * and a context of 512, so prompts cross several 128-position tiles. */
static const char *llama_hd32(char *path, size_t cap) {
  model_testgen g = model_testgen_small();
  g.n_embd = 128;
  g.n_ctx = 512;
  g.seed = 11;
  return ref_write_llama(&g, "kvq8_llama", path, cap);
}

static const char *arch_hd32(enum model_arch a, char *path, size_t cap) {
  model_testgen_arch g = model_testgen_arch_small(a);
  if (a == MODEL_ARCH_QWEN2) g.n_embd = 128; /* 4 heads of 32 */
  g.n_ctx = 512;
  g.seed = 12;
  char name[64];
  snprintf(name, sizeof name, "kvq8_%s", model_arch_name(a));
  return ref_write_arch(&g, name, path, cap);
}

static int32_t *prompt_tokens(int n, int64_t n_vocab) {
  int32_t *t = malloc((size_t)n * sizeof *t);
  for (int i = 0; i < n; i++) t[i] = (int32_t)((i * 7919 + 13) % n_vocab);
  return t;
}

/* All logits of n prompt tokens in one batch (step_by_step: one token per
 * call) with cache type kv, into a malloc'd [n][n_vocab]. */
static float *run_logits(model *m, enum model_kv_type kv, const int32_t *toks, int n, bool step_by_step,
                         int n_threads) {
  model_ctx_params p = model_ctx_default_params();
  p.kv_type = kv;
  p.n_threads = n_threads;
  model_ctx *c = NULL;
  if (model_ctx_new(m, &p, &c)) {
    test_fail_at(__FILE__, __LINE__, "model_ctx_new: %s", err_detail());
    return NULL;
  }
  if (model_ctx_kv_type(c) != kv) test_fail_at(__FILE__, __LINE__, "cache type %d, asked %d", model_ctx_kv_type(c), kv);
  int64_t V = model_get_hparams(m)->n_vocab;
  float *lg = malloc((size_t)n * (size_t)V * sizeof *lg);
  int rc = 0;
  if (step_by_step)
    for (int i = 0; i < n && !rc; i++) rc = model_forward(c, toks + i, 1, i, lg + (size_t)i * (size_t)V, MODEL_LOGITS_LAST);
  else
    rc = model_forward(c, toks, n, 0, lg, MODEL_LOGITS_ALL);
  if (rc) {
    test_fail_at(__FILE__, __LINE__, "model_forward: %s", err_detail());
    free(lg);
    lg = NULL;
  }
  model_ctx_free(c);
  return lg;
}

/* Greedy continuation of n_gen tokens after the prompt; margin[k] (may be
 * NULL) gets the gap between the best and the second-best logit. */
static int greedy(model *m, enum model_kv_type kv, const int32_t *toks, int n, int n_gen, int32_t *out,
                  float *margin) {
  model_ctx_params p = model_ctx_default_params();
  p.kv_type = kv;
  p.n_threads = 2;
  model_ctx *c = NULL;
  int rc = model_ctx_new(m, &p, &c);
  if (rc) return rc;
  int64_t V = model_get_hparams(m)->n_vocab;
  float *lg = malloc((size_t)V * sizeof *lg);
  rc = model_forward(c, toks, n, 0, lg, MODEL_LOGITS_LAST);
  for (int k = 0; k < n_gen && !rc; k++) {
    int32_t best = 0;
    for (int64_t v = 1; v < V; v++)
      if (lg[v] > lg[best]) best = (int32_t)v;
    float second = -INFINITY;
    for (int64_t v = 0; v < V; v++)
      if (v != best && lg[v] > second) second = lg[v];
    if (margin) margin[k] = lg[best] - second;
    out[k] = best;
    if (k + 1 < n_gen) rc = model_forward(c, &best, 1, n + k, lg, MODEL_LOGITS_LAST);
  }
  free(lg);
  model_ctx_free(c);
  return rc;
}

/* The whole model with a Q8_0 cache against the F32 cache. Expected error:
 * a Q8_0 row rounds each value to within d/2, d = absmax/127 of its block
 * of 32, i.e. a relative mean squared error of (amax/127)^2/12 / E[x^2]
 * ~ 3e-5 for gaussian-like rows (amax ~ 2.3 sigma); the kernel also rounds
 * the query to 8 bits (same size). Scores move by ~0.5% of their spread,
 * attention outputs by about as much, and two layers plus the output
 * matrix carry that to the logits: NMSE of order 1e-5 (measured 7e-6
 * llama, 7e-6 qwen2, 4e-5 qwen3 over 300 tokens). The bound 5e-4 leaves a
 * factor 10 over the largest; a wrong block scale, a row written to the
 * wrong position or a transposition error gives NMSE > 0.1. */
static void check_model(const char *path, const char *what) {
  model *m = NULL;
  if (model_open(path, &m)) {
    test_fail_at(__FILE__, __LINE__, "model_open: %s", err_detail());
    return;
  }
  int64_t V = model_get_hparams(m)->n_vocab;
  const int n = 300; /* three value tiles, the last partial */
  int32_t *toks = prompt_tokens(n, V);
  float *ref = run_logits(m, MODEL_KV_F32, toks, n, false, 2);
  float *q8 = run_logits(m, MODEL_KV_Q8_0, toks, n, false, 2);
  float *q8_1t = run_logits(m, MODEL_KV_Q8_0, toks, n, false, 1);
  float *q8_steps = run_logits(m, MODEL_KV_Q8_0, toks, 40, true, 2);
  if (ref && q8 && q8_1t && q8_steps) {
    double e = ref_nmse(q8, ref, (size_t)n * (size_t)V);
    printf("    %s: q8_0 vs f32 cache, %d tokens: nmse %.3g\n", what, n, e);
    EXPECT_TRUE(e < 5e-4);
    EXPECT_TRUE(e > 0); /* the cache really is quantized */
    /* the result does not depend on the thread count or on batching */
    EXPECT_MEM_EQ(q8, q8_1t, (size_t)n * (size_t)V * sizeof(float));
    EXPECT_MEM_EQ(q8, q8_steps, (size_t)40 * (size_t)V * sizeof(float));
  }
  /* Greedy: the F32-cache run's greedy continuation of 16 tokens, then
   * both caches fed the prompt plus those tokens (teacher forcing): at
   * every step the Q8_0 cache must pick the same token, except where the
   * F32 run's own top two logits are within DELTA of each other. The
   * logit perturbation measured above is ~sqrt(nmse * mean logit^2) ~
   * 0.005..0.02, so DELTA = 0.05 is a few times that: closer races are
   * coin flips for any approximation (the llama test model has one at
   * 0.005). Steps past a near-tie still count, since both runs see the
   * same tokens. */
  enum { NP = 20, NG = 16 };
  const float DELTA = 0.05f;
  int32_t seq[NP + NG];
  float mg[NG];
  memcpy(seq, toks, NP * sizeof *seq);
  ASSERT_INT_EQ(greedy(m, MODEL_KV_F32, toks, NP, NG, seq + NP, mg), 0);
  float *lr = run_logits(m, MODEL_KV_F32, seq, NP + NG, false, 2);
  float *lq = run_logits(m, MODEL_KV_Q8_0, seq, NP + NG, false, 2);
  int decided = 0, agree = 0;
  for (int k = 0; lr && lq && k < NG; k++) {
    const float *a = lr + (size_t)(NP - 1 + k) * (size_t)V, *b = lq + (size_t)(NP - 1 + k) * (size_t)V;
    int32_t ba = 0, bb = 0;
    for (int64_t v = 1; v < V; v++) {
      if (a[v] > a[ba]) ba = (int32_t)v;
      if (b[v] > b[bb]) bb = (int32_t)v;
    }
    EXPECT_INT_EQ(ba, seq[NP + k]); /* the F32 run reproduces its own greedy choice */
    if (mg[k] < DELTA) continue;
    decided++;
    agree += ba == bb;
  }
  printf("    %s: greedy steps decided by more than %.2f: %d of %d, same token in %d\n", what, DELTA, decided, NG,
         agree);
  EXPECT_INT_GE(decided, NG - 3);
  EXPECT_INT_EQ(agree, decided);
  free(lr);
  free(lq);
  free(ref);
  free(q8);
  free(q8_1t);
  free(q8_steps);
  free(toks);
  model_free(m);
}

TEST(model_kvq8_llama_close_to_f32_cache) {
  char path[512];
  ASSERT_TRUE(llama_hd32(path, sizeof path));
  check_model(path, "llama");
}

TEST(model_kvq8_qwen_close_to_f32_cache) {
  char path[512];
  ASSERT_TRUE(arch_hd32(MODEL_ARCH_QWEN2, path, sizeof path));
  check_model(path, "qwen2");
  ASSERT_TRUE(arch_hd32(MODEL_ARCH_QWEN3, path, sizeof path));
  check_model(path, "qwen3");
}

/* A prefix copied to another sequence continues exactly as the original. */
TEST(model_kvq8_seq_copy) {
  char path[512];
  ASSERT_TRUE(llama_hd32(path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  model_ctx_params p = model_ctx_default_params();
  p.kv_type = MODEL_KV_Q8_0;
  p.n_seq = 2;
  model_ctx *c = NULL;
  ASSERT_INT_EQ(model_ctx_new(m, &p, &c), 0);
  int64_t V = model_get_hparams(m)->n_vocab;
  int32_t *toks = prompt_tokens(150, V);
  float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
  int32_t seq0[150];
  memset(seq0, 0, sizeof seq0);
  model_batch bt = {.n = 149, .tokens = toks, .seq = seq0, .logits = MODEL_LOGITS_NONE};
  ASSERT_INT_EQ(model_decode(c, &bt, NULL), 0);
  ASSERT_INT_EQ(model_ctx_seq_copy(c, 1, 0, 140), 0); /* past a full value tile */
  int32_t s0 = 0, s1 = 1;
  int64_t pos = 140;
  model_batch b0 = {.n = 1, .tokens = &toks[140], .seq = &s0, .pos = &pos};
  model_batch b1 = {.n = 1, .tokens = &toks[140], .seq = &s1, .pos = &pos};
  ASSERT_INT_EQ(model_decode(c, &b0, a), 0);
  ASSERT_INT_EQ(model_decode(c, &b1, b), 0);
  EXPECT_MEM_EQ(a, b, (size_t)V * sizeof *a);
  free(a);
  free(b);
  free(toks);
  model_ctx_free(c);
  model_free(m);
}

/* The row dequantizer the attention reads Q8_0 keys and values through:
 * exactly ref_dequant_q8_0 (both forms: the AVX2 one and, forced, the
 * plain one), rows row_bytes apart, nothing written past np rows. */
TEST(model_kvq8_rows_dequant) {
  const int64_t hd = 64, TP = ATT_TILE_POS;
  const int64_t lens[] = {1, 37, 127, 128};
  size_t row = (size_t)hd / 32 * sizeof(block_q8_0);
  uint8_t *rows = malloc((size_t)TP * row);
  float *x = malloc((size_t)(TP * hd) * sizeof *x), *deq = malloc((size_t)(TP * hd) * sizeof *deq);
  float *out = malloc((size_t)(TP * hd) * sizeof *out);
  for (int64_t i = 0; i < TP * hd; i++) x[i] = grand() * 3.0f;
  for (int64_t p = 0; p < TP; p++) ref_quant_q8_0(x + p * hd, rows + (size_t)p * row, hd);
  ref_dequant_q8_0(rows, deq, TP * hd);
  for (int ref = 0; ref < 2; ref++)
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
      int64_t np = lens[k];
      for (int64_t i = 0; i < TP * hd; i++) out[i] = NAN; /* stale scratch */
      kern_force_reference(ref);
      kern_q8_0_rows_f32(rows, row, np, hd, out);
      kern_force_reference(false);
      int bad = 0, past = 0;
      for (int64_t i = 0; i < np * hd; i++) bad += memcmp(&out[i], &deq[i], sizeof *out) != 0;
      for (int64_t i = np * hd; i < TP * hd; i++) past += !isnan(out[i]);
      EXPECT_INT_EQ(bad, 0);
      EXPECT_INT_EQ(past, 0);
    }
  free(rows);
  free(x);
  free(deq);
  free(out);
}

/* model_attention over a Q8_0 cache against a scalar reference: random
 * keys, values and queries stored through model_kv_store, the reference in
 * double over the dequantized rows (the same quantizer) with the exact
 * query. What remains is the kernel's 8-bit query (relative error ~3e-5
 * in mean square, see check_model), which perturbs scores of unit spread
 * by ~5e-3 and the outputs by a similar relative amount: NMSE ~1e-5. The
 * bound 5e-4 leaves margin; a mask off by one, a wrong tile offset or a
 * scale error gives 1e-2 or more. Cache lengths cover a single position,
 * partial tiles, exactly one tile and several. */
TEST(model_kvq8_attention_against_scalar) {
  char path[512];
  ASSERT_TRUE(llama_hd32(path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const model_hparams *hp = model_get_hparams(m);
  const int64_t hd = hp->head_dim, nkv = hp->n_head_kv, nh = hp->n_head, rep = nh / nkv;
  ASSERT_INT_EQ(hd, 32);
  const int64_t lens[] = {1, 5, 37, 128, 129, 300, 511};
  for (int th = 1; th <= 2; th++)
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
      int64_t L = lens[li], T = L < 3 ? L : 3; /* queries: the last T positions */
      model_ctx_params p = model_ctx_default_params();
      p.kv_type = MODEL_KV_Q8_0;
      p.n_threads = th;
      model_ctx *c = NULL;
      ASSERT_INT_EQ(model_ctx_new(m, &p, &c), 0);
      size_t kvn = (size_t)(L * nkv * hd);
      float *k = malloc(kvn * sizeof *k), *v = malloc(kvn * sizeof *v);
      float *kd = malloc(kvn * sizeof *kd), *vd = malloc(kvn * sizeof *vd);
      float *q = malloc((size_t)(T * nh * hd) * sizeof *q), *out = malloc((size_t)(T * nh * hd) * sizeof *out);
      float *ref = malloc((size_t)(T * nh * hd) * sizeof *ref);
      int32_t *seq = calloc((size_t)L, sizeof *seq);
      int64_t *pos = malloc((size_t)L * sizeof *pos);
      uint8_t *blk = malloc((size_t)hd / 32 * sizeof(block_q8_0));
      for (size_t i = 0; i < kvn; i++) {
        k[i] = grand();
        v[i] = grand();
      }
      for (int64_t i = 0; i < T * nh * hd; i++) q[i] = grand();
      for (int64_t t = 0; t < L; t++) pos[t] = t;
      for (size_t r = 0; r < kvn / (size_t)hd; r++) { /* what the cache holds */
        ref_quant_q8_0(k + r * (size_t)hd, blk, hd);
        ref_dequant_q8_0(blk, kd + r * (size_t)hd, hd);
        ref_quant_q8_0(v + r * (size_t)hd, blk, hd);
        ref_dequant_q8_0(blk, vd + r * (size_t)hd, hd);
      }
      /* store in steps of at most n_batch (512) */
      model_step st = {.n = L, .seq = seq, .pos = pos};
      model_kv_store(c, 1, &st, k, v);
      model_step qs = {.n = T, .seq = seq, .pos = pos + (L - T)};
      float scale = 1.0f / sqrtf((float)hd);
      ASSERT_INT_EQ(model_attention(c, 1, &qs, q, out, scale), 0);
      for (int64_t t = 0; t < T; t++) {
        int64_t P = L - T + t + 1; /* visible positions */
        for (int64_t h = 0; h < nh; h++) {
          int64_t g = h / rep;
          const float *qr = q + (t * nh + h) * hd;
          double *s = malloc((size_t)P * sizeof *s), mx = -INFINITY, sum = 0;
          for (int64_t pp = 0; pp < P; pp++) {
            double d = 0;
            for (int64_t e = 0; e < hd; e++) d += (double)qr[e] * kd[(pp * nkv + g) * hd + e];
            s[pp] = d * scale;
            if (s[pp] > mx) mx = s[pp];
          }
          for (int64_t pp = 0; pp < P; pp++) sum += (s[pp] = exp(s[pp] - mx));
          for (int64_t e = 0; e < hd; e++) {
            double a = 0;
            for (int64_t pp = 0; pp < P; pp++) a += s[pp] * vd[(pp * nkv + g) * hd + e];
            ref[(t * nh + h) * hd + e] = (float)(a / sum);
          }
          free(s);
        }
      }
      double err = ref_nmse(out, ref, (size_t)(T * nh * hd));
      printf("    L=%lld threads=%d: nmse %.3g\n", (long long)L, th, err);
      EXPECT_TRUE(err < 5e-4);
      free(k), free(v), free(kd), free(vd), free(q), free(out), free(ref), free(seq), free(pos), free(blk);
      model_ctx_free(c);
    }
  model_free(m);
}

/* head_dim 16 (the small llama shape): Q8_0 falls back to F16, with the
 * F16 cache's size and results. */
TEST(model_kvq8_fallback_for_head_dim) {
  model_testgen g = model_testgen_small();
  char path[512];
  ASSERT_TRUE(ref_write_llama(&g, "kvq8_hd16", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  ASSERT_INT_EQ(model_get_hparams(m)->head_dim, 16);
  EXPECT_INT_EQ(model_kv_type_for(16, MODEL_KV_Q8_0), MODEL_KV_F16);
  EXPECT_INT_EQ(model_kv_type_for(96, MODEL_KV_Q8_0), MODEL_KV_Q8_0);
  EXPECT_INT_EQ(model_kv_type_for(80, MODEL_KV_Q8_0), MODEL_KV_F16);
  EXPECT_INT_EQ(model_kv_type_for(80, MODEL_KV_F32), MODEL_KV_F32);
  EXPECT_INT_EQ(model_kv_row_bytes(16, MODEL_KV_Q8_0), 32);
  EXPECT_INT_EQ(model_kv_row_bytes(64, MODEL_KV_Q8_0), 68);
  EXPECT_INT_EQ(model_kv_row_bytes(64, MODEL_KV_F16), 128);
  EXPECT_INT_EQ(model_kv_row_bytes(64, MODEL_KV_F32), 256);
  model_ctx_params p = model_ctx_default_params();
  p.kv_type = MODEL_KV_Q8_0;
  model_ctx *c8 = NULL, *c16 = NULL;
  ASSERT_INT_EQ(model_ctx_new(m, &p, &c8), 0);
  p.kv_type = MODEL_KV_F16;
  ASSERT_INT_EQ(model_ctx_new(m, &p, &c16), 0);
  EXPECT_INT_EQ(model_ctx_kv_type(c8), MODEL_KV_F16);
  EXPECT_INT_EQ(model_ctx_kv_bytes(c8), model_ctx_kv_bytes(c16));
  int64_t V = model_get_hparams(m)->n_vocab;
  int32_t *toks = prompt_tokens(20, V);
  float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
  ASSERT_INT_EQ(model_forward(c8, toks, 20, 0, a, MODEL_LOGITS_LAST), 0);
  ASSERT_INT_EQ(model_forward(c16, toks, 20, 0, b, MODEL_LOGITS_LAST), 0);
  EXPECT_MEM_EQ(a, b, (size_t)V * sizeof *a);
  free(a);
  free(b);
  free(toks);
  model_ctx_free(c8);
  model_ctx_free(c16);
  model_free(m);
}

/* Sizes: a Q8_0 cache takes 34/32 bytes per value (plus the tile padding
 * every type has), F16 2; names parse both ways and a bad one is named. */
TEST(model_kvq8_sizes_and_names) {
  char path[512];
  ASSERT_TRUE(llama_hd32(path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const model_hparams *hp = model_get_hparams(m);
  model_ctx_params p = model_ctx_default_params();
  p.n_ctx = 200; /* padded to 256 */
  p.n_seq = 3;
  p.kv_type = MODEL_KV_Q8_0;
  model_ctx *c = NULL;
  ASSERT_INT_EQ(model_ctx_new(m, &p, &c), 0);
  size_t want = (size_t)(3 * hp->n_layer * 2 * hp->n_head_kv * 256) * (size_t)(hp->head_dim / 32 * 34);
  EXPECT_INT_EQ(model_ctx_kv_bytes(c), want);
  model_ctx_free(c);
  p.kv_type = MODEL_KV_F16;
  ASSERT_INT_EQ(model_ctx_new(m, &p, &c), 0);
  EXPECT_INT_EQ(model_ctx_kv_bytes(c), want / 34 * 64);
  model_ctx_free(c);
  p.kv_type = (enum model_kv_type)7;
  EXPECT_INT_EQ(model_ctx_new(m, &p, &c), ERR_RANGE);
  model_free(m);

  enum model_kv_type t = MODEL_KV_F32;
  EXPECT_INT_EQ(model_kv_type_parse("q8_0", &t), 0);
  EXPECT_INT_EQ(t, MODEL_KV_Q8_0);
  EXPECT_INT_EQ(model_kv_type_parse("F16", &t), 0);
  EXPECT_INT_EQ(t, MODEL_KV_F16);
  EXPECT_INT_EQ(model_kv_type_parse("f32", &t), 0);
  EXPECT_INT_EQ(t, MODEL_KV_F32);
  EXPECT_INT_EQ(model_kv_type_parse("q4_0", &t), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "'q4_0'");
  EXPECT_STR_EQ(model_kv_type_name(MODEL_KV_Q8_0), "q8_0");
  EXPECT_STR_EQ(model_kv_type_name((enum model_kv_type)9), "unknown");
}

/* The manager's memory estimate counts the cache in the configured type:
 * 34 bytes per 32 values for q8_0 (head_dim 32), 2 bytes for f16, and f16's
 * size when q8_0 falls back (head_dim 16). */
TEST(model_kvq8_manager_estimate) {
  char vocab[512];
  if (!test_shared_path("vocab/ggml-vocab-llama-spm.gguf", vocab, sizeof vocab))
    TEST_SKIP("../shared/vocab/ggml-vocab-llama-spm.gguf not found");
  for (int hd32 = 0; hd32 <= 1; hd32++) {
    char path[512];
    snprintf(path, sizeof path, "%s/kvq8-mgr-%d.gguf", test_tmpdir(), hd32);
    model_testgen g = model_testgen_small();
    g.vocab_path = vocab;
    if (hd32) g.n_embd = 128;
    ASSERT_INT_EQ(model_testgen_write(&g, path), 0);
    registry *r = NULL;
    ASSERT_INT_EQ(registry_new(&r), 0);
    registry_set_models_dir(r, NULL);
    for (int s = REGISTRY_SOURCE_OLLAMA; s < REGISTRY_SOURCE_COUNT; s++) registry_set_source_dir(r, s, "");
    registry_add_model(r, path, "a");
    registry_refresh(r);
    uint64_t kv[2] = {0, 0};
    for (int q8 = 0; q8 <= 1; q8++) {
      manager *mg = NULL;
      manager_params p = {.n_slots = 2, .n_ctx = 64, .n_threads = 1,
                          .kv_type = q8 ? MODEL_KV_Q8_0 : MODEL_KV_F16};
      ASSERT_INT_EQ(manager_new(r, &p, &mg), 0);
      manager_model *mm = NULL;
      ASSERT_INT_EQ(manager_get(mg, "a", &mm), 0);
      kv[q8] = mm->kv_bytes;
      manager_release(mm);
      manager_free(mg);
    }
    /* 2 slots x 2 layers x (k, v) x 2 kv heads x 128 positions (one tile) */
    uint64_t rows = 2 * 2 * 2 * 2 * 128, hd = hd32 ? 32 : 16;
    EXPECT_INT_EQ(kv[0], rows * hd * 2);
    EXPECT_INT_EQ(kv[1], hd32 ? rows * 34 : rows * hd * 2);
    registry_free(r);
  }
}
