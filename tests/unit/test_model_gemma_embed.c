/* test_model_gemma_embed.c - the gemma-embedding encoder (EmbeddingGemma;
 * the encoder row of src/model/gemma.c, attention in enc_attn.c) against
 * tools/ref_gemma.py, an independent float64 numpy implementation reading
 * the same GGUF file, on random-weight files of two shapes written by the
 * project's writer (testgen_arch.c): the pooled, projected, normalized
 * vector (cosine >= 0.9999, NMSE held far tighter) with and without the
 * dense_2 / dense_3 projections, prompts longer than the symmetric window,
 * several sequences in one batch equal to one at a time, and the
 * malformed-file catalogue. */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/kernels.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen_arch.h"
#include "model_ref.h"

#define REF "tools/ref_gemma.py"
#define NEED_PY() NEED_REF_PY(REF)

/* 40 tokens: every sliding layer's window (8: 4 on each side; shape b's 5:
 * 2 on each side) cuts the sequence. */
static const int32_t PROMPT[] = {2,   17, 42,  299, 3,   150, 150, 7,   88,  254, 0,   31,  64,  102,
                                 11,  12, 13,  200, 201, 5,   6,   77,  78,  79,  80,  81,  9,   99,
                                 199, 1,  250, 4,   8,   16,  32,  128, 256, 111, 222, 33};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* The second shape: n_embd 128, 2 heads of 64 on one KV head, n_ff 256,
 * 6 layers (five sliding, one global), window 5, last-token pooling, rope
 * base 10000, projections through 160 features without their keys. */
static model_testgen_arch shape_b(void) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GEMMA_EMBEDDING);
  g.n_embd = 128;
  g.n_head = 2;
  g.n_head_kv = 1;
  g.head_dim = 64;
  g.n_ff = 256;
  g.sliding_window = 5;
  g.pooling_type = MODEL_POOLING_LAST;
  g.rope_freq_base = 10000.0f;
  g.n_dense = 160;
  g.dense_keys = 0;
  g.seed = 77;
  return g;
}

static double cosine(const float *a, const float *b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
  return ab / sqrt(aa * bb);
}

/* The C pooled, normalized vector of toks into v[n_embd] (2 threads); 0 or
 * the error. */
static int c_embed(const char *path, const int32_t *toks, int n, float *v) {
  model *m = NULL;
  model_ctx *c = NULL;
  int rc = model_open(path, &m);
  if (rc == 0) {
    model_ctx_params p = model_ctx_default_params();
    p.n_threads = 2;
    rc = model_ctx_new(m, &p, &c);
    if (rc == 0) rc = model_embed(c, toks, n, v, MODEL_EMBED_NORMALIZE);
  }
  if (rc) test_fail_at(__FILE__, __LINE__, "embed %s: %s", path, err_detail());
  model_ctx_free(c);
  model_free(m);
  return rc;
}

/* C against numpy on toks: returns the cosine, *nmse the normalized
 * squared error; -1 on failure. */
static double compare(const char *path, const int32_t *toks, int n, int64_t E, double *nmse) {
  float *v = malloc((size_t)E * sizeof *v);
  double cs = -1;
  if (c_embed(path, toks, n, v) == 0) {
    char ts[4096], out[512], cmd[8192];
    ref_toks_str(toks, n, ts, sizeof ts);
    snprintf(out, sizeof out, "%s/gemma_embed_ref.f32", test_tmpdir());
    snprintf(cmd, sizeof cmd, REF_PY " " REF " embed %s %s %s --normalize", path, ts, out);
    float *r = ref_run_floats(cmd, out, (size_t)E);
    if (!r) {
      test_fail_at(__FILE__, __LINE__, "ref_gemma.py failed on %s", path);
    } else {
      cs = cosine(v, r, (size_t)E);
      *nmse = ref_nmse(v, r, (size_t)E);
      printf("    %s n=%d: cosine %.12f nmse %.3g\n", strrchr(path, '/') + 1, n, cs, *nmse);
    }
    free(r);
  }
  free(v);
  return cs;
}

/* The bar is cosine >= 0.9999; F32 leaves only f32 rounding, and
 * NMSE 1e-8 is held so that a window one position off, a causal mask, the
 * sliding layers' RoPE base on the global ones or a projection left out
 * (each far above it) cannot hide under the cosine. */
static void check(model_testgen_arch g, const char *name, int n) {
  char path[512];
  if (!ref_write_arch(&g, name, path, sizeof path)) return;
  double e = 1;
  double cs = compare(path, PROMPT, n, g.n_embd, &e);
  EXPECT_TRUE(cs >= 0.9999);
  EXPECT_TRUE(e < 1e-8);
}

TEST(model_gemma_embed_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GEMMA_EMBEDDING);
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "gemb_a", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_GEMMA_EMBEDDING);
  EXPECT_STR_EQ(model_arch_name(MODEL_ARCH_GEMMA_EMBEDDING), "gemma-embedding");
  EXPECT_TRUE(model_is_encoder(m));
  EXPECT_INT_EQ(model_embed_pooling(m), MODEL_POOLING_MEAN);
  EXPECT_INT_EQ(model_get_hparams(m)->n_swa, 8);
  EXPECT_INT_EQ(model_get_hparams(m)->swa_pattern, 6);
  model_free(m);
  check(g, "gemb_a", N_PROMPT);
  check(g, "gemb_a", 3); /* inside every window: all layers see everything */
  g.n_dense = 0;         /* no projections: the pooled vector itself */
  check(g, "gemb_a_nodense", N_PROMPT);
  check(shape_b(), "gemb_b", N_PROMPT);
  model_testgen_arch b = shape_b();
  b.n_dense = 0;
  b.pooling_type = MODEL_POOLING_CLS;
  check(b, "gemb_b_nodense", N_PROMPT);
}

/* Each feature moves the vector well past the bar: the same weights with a
 * window as wide as the context (every layer global), and without the
 * projections (they are written last, so the rest of the file is the same
 * random stream). */
TEST(model_gemma_embed_features_matter) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GEMMA_EMBEDDING);
  char pa[512], pb[512], pc[512];
  ASSERT_TRUE(ref_write_arch(&g, "gemb_feat", pa, sizeof pa));
  model_testgen_arch wide = g;
  wide.sliding_window = 128;
  ASSERT_TRUE(ref_write_arch(&wide, "gemb_feat_wide", pb, sizeof pb));
  model_testgen_arch plain = g;
  plain.n_dense = 0;
  ASSERT_TRUE(ref_write_arch(&plain, "gemb_feat_plain", pc, sizeof pc));
  float a[64], b[64], c[64];
  ASSERT_INT_EQ(c_embed(pa, PROMPT, N_PROMPT, a), 0);
  ASSERT_INT_EQ(c_embed(pb, PROMPT, N_PROMPT, b), 0);
  ASSERT_INT_EQ(c_embed(pc, PROMPT, N_PROMPT, c), 0);
  printf("    window 8 vs 128: nmse %.3g; with vs without dense: nmse %.3g\n", ref_nmse(b, a, 64), ref_nmse(c, a, 64));
  EXPECT_TRUE(ref_nmse(b, a, 64) > 1e-4);
  EXPECT_TRUE(ref_nmse(c, a, 64) > 1e-2);
  /* a prompt inside every window: the wide file agrees (only the window differs) */
  ASSERT_INT_EQ(c_embed(pa, PROMPT, 4, a), 0);
  ASSERT_INT_EQ(c_embed(pb, PROMPT, 4, b), 0);
  EXPECT_TRUE(ref_nmse(b, a, 64) < 1e-12);
}

/* F16 weights: numpy decodes the same halves (the F32 bar). Q8_0 with the
 * fast kernels (8-bit activations, as model_nomic_bert_f16_q8_matches_numpy
 * derives: NMSE 2e-3, cosine 0.999). */
TEST(model_gemma_embed_f16_q8_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GEMMA_EMBEDDING);
  g.type = g.type_embd = TENSOR_TYPE_F16;
  g.seed = 5;
  check(g, "gemb_f16", N_PROMPT);
  g.type = g.type_embd = TENSOR_TYPE_Q8_0;
  g.seed = 6;
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "gemb_q8", path, sizeof path));
  double e = 1, cs = compare(path, PROMPT, N_PROMPT, 64, &e);
  EXPECT_TRUE(cs >= 0.999 && e < 2e-3);
}

/* Three sequences in one model_embed_batch (the engine's embedding
 * batcher) give their own model_embed vectors: positions restart at 0 in
 * every sequence and attention, windowed or not, stays inside it. */
TEST(model_gemma_embed_batch_equals_single) {
  char path[512];
  model_testgen_arch g = shape_b();
  ASSERT_TRUE(ref_write_arch(&g, "gemb_batch", path, sizeof path));
  model *m = NULL;
  model_ctx *c = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  model_ctx_params p = model_ctx_default_params();
  p.n_threads = 2;
  ASSERT_INT_EQ(model_ctx_new(m, &p, &c), 0);
  EXPECT_INT_EQ((long long)model_ctx_kv_bytes(c), 0); /* an encoder keeps no cache */
  const int32_t *seqs[3] = {PROMPT, PROMPT + 3, PROMPT + 5};
  const int64_t lens[3] = {N_PROMPT, 17, 4};
  float all[3 * 128], one[128];
  ASSERT_INT_EQ(model_embed_batch(c, 3, seqs, lens, all, MODEL_EMBED_NORMALIZE), 0);
  for (int s = 0; s < 3; s++) {
    ASSERT_INT_EQ(model_embed(c, seqs[s], lens[s], one, MODEL_EMBED_NORMALIZE), 0);
    EXPECT_TRUE(ref_nmse(all + s * 128, one, 128) < 1e-10);
  }
  model_ctx_free(c);
  model_free(m);
}

TEST(model_gemma_embed_load_errors) {
  const model_testgen_arch base = model_testgen_arch_small(MODEL_ARCH_GEMMA_EMBEDDING);
  model_testgen_arch g = base;
  g.bad_tensor = "dense_2.weight"; /* 97 rows, so dense_3's 96 columns disagree */
  EXPECT_INT_EQ(ref_open_arch(&g, "gemb_bad_d2"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'dense_3.weight' has shape [96, 64], expected [97, 64]");
  g = base;
  g.bad_tensor = "dense_3.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "gemb_bad_d3"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'dense_3.weight' has shape [96, 65], expected [96, 64]");
  g = base;
  g.missing_tensor = "dense_3.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "gemb_no_d3"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'dense_3.weight' is missing");
  g = base;
  g.missing_tensor = "dense_2.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "gemb_no_d2"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'dense_2.weight' is missing");
  g = base;
  g.dense_keys = 2; /* dense_2_feat_out 97 for a 96-row tensor */
  EXPECT_INT_EQ(ref_open_arch(&g, "gemb_bad_key"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'gemma-embedding.dense_2_feat_out' is 97");
  g = base;
  g.missing_tensor = "blk.3.attn_k_norm.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "gemb_no_knorm"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.3.attn_k_norm.weight' is missing");
  g = base;
  g.sliding_window = -1; /* required */
  EXPECT_INT_EQ(ref_open_arch(&g, "gemb_no_window"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "gemma-embedding.attention.sliding_window");
  g = base;
  g.sliding_window = 129; /* larger than the context */
  EXPECT_INT_EQ(ref_open_arch(&g, "gemb_big_window"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "gemma-embedding.attention.sliding_window");
  g = base;
  g.pooling_type = 4;
  EXPECT_INT_EQ(ref_open_arch(&g, "gemb_pool4"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "key 'gemma-embedding.pooling_type' is 4");
  /* an encoder has no logits, and says which one it is */
  char path[512];
  ASSERT_TRUE(ref_write_arch(&base, "gemb_logits", path, sizeof path));
  model *m = NULL;
  model_ctx *c = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  ASSERT_INT_EQ(model_ctx_new(m, NULL, &c), 0);
  float lg[300];
  EXPECT_INT_EQ(model_forward(c, PROMPT, 2, 0, lg, MODEL_LOGITS_LAST), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "'gemma-embedding' is an encoder");
  /* more tokens than the context */
  int32_t many[129];
  for (int i = 0; i < 129; i++) many[i] = i;
  float v[64];
  EXPECT_INT_EQ(model_embed(c, many, 129, v, MODEL_EMBED_NORMALIZE), ERR_CONTEXT);
  model_ctx_free(c);
  model_free(m);
}
