/* test_model_bert.c - the bert encoder (src/model/bert.c) and model_embed
 * (src/model/embed.c) against tools/ref_bert.py (an independent float64
 * numpy implementation reading the same GGUF file), on random-weight models
 * written by src/model/testgen_arch.c: mean, cls and no pooling, L2
 * normalization, F16 and quantized weights, the reference kernels, thread
 * counts, and the errors (logits asked of an encoder, wrong shapes, too
 * many tokens, unknown pooling). */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "kernels/kernels.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen_arch.h"
#include "model_ref.h"

#define REF "tools/ref_bert.py"
#define NEED_PY() NEED_REF_PY(REF)

static const int32_t PROMPT[] = {101, 17, 42, 299, 3, 150, 150, 7, 88, 254, 0, 31, 64, 102};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* numpy's embedding: n_out floats into a malloc'd array; NULL on failure. */
static float *ref_embed(const char *path, const int32_t *toks, int n, const char *pooling, bool normalize,
                        size_t n_out) {
  char ts[8192], out[512], cmd[16384];
  ref_toks_str(toks, n, ts, sizeof ts);
  snprintf(out, sizeof out, "%s/bert_ref.f32", test_tmpdir());
  snprintf(cmd, sizeof cmd, REF_PY " " REF " embed %s %s %s%s%s%s", path, ts, out, pooling ? " --pooling " : "",
           pooling ? pooling : "", normalize ? " --normalize" : "");
  return ref_run_floats(cmd, out, n_out);
}

/* C embedding of toks through a fresh context; *n_out gets the float count. */
static float *c_embed(const char *path, const int32_t *toks, int n, unsigned flags, int n_threads, size_t *n_out) {
  model *m = NULL;
  model_ctx *c = NULL;
  float *v = NULL;
  if (model_open(path, &m)) {
    test_fail_at(__FILE__, __LINE__, "model_open %s: %s", path, err_detail());
    return NULL;
  }
  model_ctx_params p = model_ctx_default_params();
  p.n_threads = n_threads;
  int64_t E = model_get_hparams(m)->n_embd;
  *n_out = (size_t)E * (model_embed_pooling(m) == MODEL_POOLING_NONE ? (size_t)n : 1);
  if (model_ctx_new(m, &p, &c)) {
    test_fail_at(__FILE__, __LINE__, "model_ctx_new: %s", err_detail());
  } else {
    v = malloc(*n_out * sizeof *v);
    if (model_embed(c, toks, n, v, flags)) {
      test_fail_at(__FILE__, __LINE__, "model_embed: %s", err_detail());
      free(v);
      v = NULL;
    }
  }
  model_ctx_free(c);
  model_free(m);
  return v;
}

/* C vs numpy on PROMPT; pooling NULL = the file's. Returns NMSE or -1. */
static double compare(const char *path, const char *pooling, bool normalize, int n_threads) {
  size_t n = 0;
  float *c = c_embed(path, PROMPT, N_PROMPT, normalize ? MODEL_EMBED_NORMALIZE : 0, n_threads, &n);
  if (!c) return -1;
  float *r = ref_embed(path, PROMPT, N_PROMPT, pooling, normalize, n);
  if (!r) {
    free(c);
    test_fail_at(__FILE__, __LINE__, "ref_bert.py failed on %s", path);
    return -1;
  }
  double e = ref_nmse(c, r, n);
  if (normalize) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)c[i] * c[i];
    if (fabs(s - 1.0) > 1e-5 && strcmp(pooling ? pooling : "", "none") != 0)
      test_fail_at(__FILE__, __LINE__, "normalized vector has squared norm %g", s);
  }
  printf("    %s pooling=%s%s threads=%d: nmse %.3g\n", strrchr(path, '/') + 1, pooling ? pooling : "file",
         normalize ? " normalized" : "", n_threads, e);
  free(c);
  free(r);
  return e;
}

/* F32 weights: f32 rounding only (LayerNorm and softmax in f32 against
 * float64), NMSE ~1e-13; the bar is 1e-4, we hold 1e-8 so a wrong
 * mask or a missing bias would show, and even the erf GELU in place of
 * the tanh form (measured 3e-8). */
TEST(model_bert_mean_matches_numpy) {
  NEED_PY();
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_BERT);
  ASSERT_TRUE(ref_write_arch(&g, "bert_mean", path, sizeof path));
  double e = compare(path, "mean", false, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = compare(path, "mean", true, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  /* pooling_type absent: mean */
  g.pooling_type = -1;
  g.seed = 2;
  ASSERT_TRUE(ref_write_arch(&g, "bert_nopool_key", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_embed_pooling(m), MODEL_POOLING_MEAN);
  model_free(m);
  e = compare(path, "mean", true, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
}

TEST(model_bert_cls_and_none_match_numpy) {
  NEED_PY();
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_BERT);
  g.pooling_type = MODEL_POOLING_CLS;
  g.seed = 3;
  ASSERT_TRUE(ref_write_arch(&g, "bert_cls", path, sizeof path));
  double e = compare(path, "cls", false, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = compare(path, "cls", true, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  g.pooling_type = MODEL_POOLING_NONE;
  ASSERT_TRUE(ref_write_arch(&g, "bert_none", path, sizeof path));
  e = compare(path, "none", false, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = compare(path, "none", true, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
}

/* F16 weights (numpy decodes the same halves) and, with the reference
 * kernels forced, Q8_0 weights (exact double dots on the dequantized
 * values); the fast Q8_0 kernels quantize activations to 8 bits (~1e-4). */
TEST(model_bert_f16_q8_and_reference_kernels) {
  NEED_PY();
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_BERT);
  g.type = g.type_embd = TENSOR_TYPE_F16;
  g.seed = 4;
  ASSERT_TRUE(ref_write_arch(&g, "bert_f16", path, sizeof path));
  double e = compare(path, "mean", true, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  g.type = g.type_embd = TENSOR_TYPE_Q8_0;
  g.seed = 5;
  ASSERT_TRUE(ref_write_arch(&g, "bert_q8", path, sizeof path));
  e = compare(path, "mean", false, 2);
  EXPECT_TRUE(e >= 0 && e < 2e-3);
  kern_force_reference(true);
  EXPECT_STR_EQ(kern_isa(), "reference");
  e = compare(path, "mean", false, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  g.type = g.type_embd = TENSOR_TYPE_F32;
  g.pooling_type = MODEL_POOLING_CLS;
  ASSERT_TRUE(ref_write_arch(&g, "bert_ref_f32", path, sizeof path));
  e = compare(path, "cls", true, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  kern_force_reference(false);
}

/* 120 tokens: attention runs on the pool (one task per head); the result
 * matches numpy and does not depend on the thread count or on a previous
 * call (each call is independent). */
TEST(model_bert_long_input_threads) {
  NEED_PY();
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_BERT);
  g.seed = 6;
  ASSERT_TRUE(ref_write_arch(&g, "bert_long", path, sizeof path));
  enum { N = 120 };
  int32_t toks[N];
  uint32_t st = 777;
  for (int i = 0; i < N; i++) {
    st = st * 1103515245u + 12345u;
    toks[i] = (int32_t)((st >> 8) % 300);
  }
  size_t n1 = 0, n2 = 0;
  float *a = c_embed(path, toks, N, 0, 1, &n1);
  float *b = c_embed(path, toks, N, 0, 2, &n2);
  ASSERT_TRUE(a && b && n1 == n2);
  EXPECT_TRUE(memcmp(a, b, n1 * sizeof *a) == 0);
  float *r = ref_embed(path, toks, N, "mean", false, n1);
  ASSERT_TRUE(r != NULL);
  double e = ref_nmse(b, r, n1);
  printf("    120 tokens: nmse %.3g\n", e);
  EXPECT_TRUE(e < 1e-8);
  /* the same context twice, a short input in between */
  model *m = NULL;
  model_ctx *c = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  ASSERT_INT_EQ(model_ctx_new(m, NULL, &c), 0);
  float *x = malloc(n1 * sizeof *x);
  ASSERT_INT_EQ(model_embed(c, toks, 5, x, 0), 0);
  ASSERT_INT_EQ(model_embed(c, toks, N, x, 0), 0);
  EXPECT_TRUE(memcmp(x, a, n1 * sizeof *a) == 0);
  free(x);
  model_ctx_free(c);
  model_free(m);
  free(a);
  free(b);
  free(r);
}

static int open_bad(const model_testgen_arch *g, const char *name) {
  char path[512];
  if (!ref_write_arch(g, name, path, sizeof path)) return 1;
  model *m = NULL;
  int rc = model_open(path, &m);
  model_free(m);
  return rc;
}

TEST(model_bert_errors) {
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_BERT);
  ASSERT_TRUE(ref_write_arch(&g, "bert_err", path, sizeof path));
  model *m = NULL;
  model_ctx *c = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_BERT);
  model_ctx_params p = model_ctx_default_params();
  p.n_ctx = 16;
  ASSERT_INT_EQ(model_ctx_new(m, &p, &c), 0);
  float lg[300 * 2];
  /* an encoder has no logits */
  EXPECT_INT_EQ(model_forward(c, PROMPT, 2, 0, lg, MODEL_LOGITS_LAST), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "'bert'");
  int32_t toks[17];
  for (int i = 0; i < 17; i++) toks[i] = i;
  EXPECT_INT_EQ(model_embed(c, toks, 17, lg, 0), ERR_CONTEXT);
  EXPECT_STR_CONTAINS(err_detail(), "17 tokens");
  EXPECT_INT_EQ(model_embed(c, toks, 16, lg, 0), 0);
  toks[3] = 300;
  EXPECT_INT_EQ(model_embed(c, toks, 4, lg, 0), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "token 300 at index 3");
  EXPECT_INT_EQ(model_embed(c, toks, 0, lg, 0), ERR_RANGE);
  EXPECT_INT_EQ(model_embed(c, toks, 2, NULL, 0), ERR_INVALID);
  model_ctx_free(c);
  model_free(m);

  /* wrong shapes name the tensor and both shapes */
  g.bad_tensor = "position_embd.weight";
  EXPECT_INT_EQ(open_bad(&g, "bert_bad_pos"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'position_embd.weight' has shape [64, 129], expected [64, 128]");
  g.bad_tensor = "blk.1.attn_output_norm.bias";
  EXPECT_INT_EQ(open_bad(&g, "bert_bad_norm"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.attn_output_norm.bias' has shape [65], expected [64]");
  g.bad_tensor = "blk.0.ffn_up.weight";
  EXPECT_INT_EQ(open_bad(&g, "bert_bad_up"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ffn_up.weight' has shape [64, 129], expected [64, 128]");
  g.bad_tensor = NULL;
  /* pooling types beyond last (rank) are refused */
  g.pooling_type = 4;
  EXPECT_INT_EQ(open_bad(&g, "bert_pool4"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "bert.pooling_type");
}

/* A real converter's metadata (llama.cpp's bge-small vocab file: the bert
 * keys of a 12-layer, 384-wide model, no tensors): every hyper-parameter is
 * accepted, and loading stops at the first missing tensor, named. */
TEST(model_bert_shared_bge_metadata) {
  char path[1024];
  if (!test_shared_path("vocab/ggml-vocab-bert-bge.gguf", path, sizeof path))
    TEST_SKIP("../shared/vocab/ggml-vocab-bert-bge.gguf not present");
  model *m = NULL;
  EXPECT_INT_EQ(model_open(path, &m), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'token_embd.weight' is missing");
  EXPECT_TRUE(m == NULL);
}
