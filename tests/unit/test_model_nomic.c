/* test_model_nomic.c - the nomic-bert encoder (nomic-embed-text; the
 * nomic variant in src/model/bert.c) against tools/ref_bert.py, an
 * independent float64 numpy implementation reading the same GGUF file, on
 * random-weight files of two shapes written by the project's writer
 * (testgen_arch.c with testgen_dense.c): the pooled, normalized vector
 * (cosine >= 0.9999, and NMSE held far tighter), F16 and Q8_0 weights,
 * several sequences in one batch (RoPE positions restart per sequence),
 * and the malformed-file catalogue. */
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

#define REF "tools/ref_bert.py"
#define NEED_PY() NEED_REF_PY(REF)

static const int32_t PROMPT[] = {101, 17, 42, 299, 3, 150, 150, 7, 88, 254, 0, 31, 64, 102};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* The second shape: wider, 2 heads of 64, 3 layers, n_ff 192, cls pooling,
 * rope base 10000. */
static model_testgen_arch shape_b(void) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_NOMIC_BERT);
  g.n_embd = 128;
  g.n_head = g.n_head_kv = 2;
  g.head_dim = 64;
  g.n_ff = 192;
  g.n_layer = 3;
  g.pooling_type = MODEL_POOLING_CLS;
  g.rope_freq_base = 10000.0f;
  g.seed = 77;
  return g;
}

/* cos(a, b) over n floats. */
static double cosine(const float *a, const float *b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
  return ab / sqrt(aa * bb);
}

/* The C and numpy pooled, normalized vectors of toks (the file's pooling):
 * returns the cosine, *nmse the normalized squared error; -1 on failure. */
static double compare(const char *path, const int32_t *toks, int n, int n_threads, double *nmse) {
  model *m = NULL;
  model_ctx *c = NULL;
  if (model_open(path, &m)) {
    test_fail_at(__FILE__, __LINE__, "model_open %s: %s", path, err_detail());
    return -1;
  }
  if (!model_is_encoder(m)) test_fail_at(__FILE__, __LINE__, "%s: not an encoder", path);
  const size_t E = (size_t)model_get_hparams(m)->n_embd;
  model_ctx_params p = model_ctx_default_params();
  p.n_threads = n_threads;
  float *v = malloc(E * sizeof *v);
  double cs = -1;
  if (model_ctx_new(m, &p, &c) || model_embed(c, toks, n, v, MODEL_EMBED_NORMALIZE)) {
    test_fail_at(__FILE__, __LINE__, "embed %s: %s", path, err_detail());
  } else {
    char ts[4096], out[512], cmd[8192];
    ref_toks_str(toks, n, ts, sizeof ts);
    snprintf(out, sizeof out, "%s/nomic_ref.f32", test_tmpdir());
    snprintf(cmd, sizeof cmd, REF_PY " " REF " embed %s %s %s --normalize", path, ts, out);
    float *r = ref_run_floats(cmd, out, E);
    if (!r) {
      test_fail_at(__FILE__, __LINE__, "ref_bert.py failed on %s", path);
    } else {
      cs = cosine(v, r, E);
      *nmse = ref_nmse(v, r, E);
      printf("    %s threads=%d: cosine %.12f nmse %.3g\n", strrchr(path, '/') + 1, n_threads, cs, *nmse);
    }
    free(r);
  }
  free(v);
  model_ctx_free(c);
  model_free(m);
  return cs;
}

/* The bar is cosine >= 0.9999; F32 leaves only f32 rounding
 * (NMSE ~1e-13), and 1e-8 is held so that RoPE on the wrong pairs, GELU in
 * place of SwiGLU or q/k/v parts swapped (each ~1e-2 or worse) cannot hide
 * under the cosine. */
static void check(model_testgen_arch g, const char *name, int n_threads) {
  char path[512];
  if (!ref_write_arch(&g, name, path, sizeof path)) return;
  double e = 1;
  double cs = compare(path, PROMPT, N_PROMPT, n_threads, &e);
  EXPECT_TRUE(cs >= 0.9999);
  EXPECT_TRUE(e < 1e-8);
}

TEST(model_nomic_bert_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_NOMIC_BERT);
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "nomic_small", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_NOMIC_BERT);
  EXPECT_STR_EQ(model_arch_name(MODEL_ARCH_NOMIC_BERT), "nomic-bert");
  EXPECT_INT_EQ(model_embed_pooling(m), MODEL_POOLING_MEAN);
  EXPECT_NEAR(model_get_hparams(m)->rope.freq_base, 1000.0, 0);
  model_free(m);
  check(g, "nomic_small", 2);
  check(g, "nomic_small", 1);
  check(shape_b(), "nomic_b", 2);
}

/* F16 weights: numpy decodes the same halves. Q8_0: with the reference
 * kernels exact dots on the dequantized weights (f32 rounding, the F32
 * bar). The fast kernels quantize activations to 8 bits as well, ~1e-4 NMSE
 * (measured 2.9e-4); for unit vectors cos = 1 - NMSE/2, so llama's and
 * qwen's quantized bar of 2e-3 NMSE is a cosine of 0.999 (the 0.9999 bar
 * is the for F32). */
TEST(model_nomic_bert_f16_q8_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_NOMIC_BERT);
  g.type = g.type_embd = TENSOR_TYPE_F16;
  g.seed = 5;
  check(g, "nomic_f16", 2);
  g.type = g.type_embd = TENSOR_TYPE_Q8_0;
  g.seed = 6;
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "nomic_q8", path, sizeof path));
  kern_force_reference(true);
  double e = 1, cs = compare(path, PROMPT, N_PROMPT, 2, &e);
  kern_force_reference(false);
  EXPECT_TRUE(cs >= 0.9999 && e < 1e-8);
  cs = compare(path, PROMPT, N_PROMPT, 2, &e);
  EXPECT_TRUE(cs >= 0.999 && e < 2e-3);
}

/* Three sequences in one model_embed_batch (the engine's embedding
 * batcher): each equals its own model_embed, so RoPE positions restart at
 * 0 in every sequence and attention stays inside it. */
TEST(model_nomic_bert_batch_equals_single) {
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_NOMIC_BERT);
  g.seed = 9;
  ASSERT_TRUE(ref_write_arch(&g, "nomic_batch", path, sizeof path));
  model *m = NULL;
  model_ctx *c = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  model_ctx_params p = model_ctx_default_params();
  p.n_threads = 2;
  ASSERT_INT_EQ(model_ctx_new(m, &p, &c), 0);
  const int32_t *seqs[3] = {PROMPT, PROMPT + 3, PROMPT + 5};
  const int64_t lens[3] = {N_PROMPT, 7, 4};
  float all[3 * 64], one[64];
  ASSERT_INT_EQ(model_embed_batch(c, 3, seqs, lens, all, MODEL_EMBED_NORMALIZE), 0);
  for (int s = 0; s < 3; s++) {
    ASSERT_INT_EQ(model_embed(c, seqs[s], lens[s], one, MODEL_EMBED_NORMALIZE), 0);
    EXPECT_TRUE(ref_nmse(all + s * 64, one, 64) < 1e-10);
  }
  model_ctx_free(c);
  model_free(m);
}

static int open_gen(const model_testgen_arch *g, const char *name) {
  char path[512];
  if (!ref_write_arch(g, name, path, sizeof path)) return 1;
  model *m = NULL;
  int rc = model_open(path, &m);
  model_free(m);
  return rc;
}

TEST(model_nomic_bert_load_errors) {
  const model_testgen_arch base = model_testgen_arch_small(MODEL_ARCH_NOMIC_BERT);
  model_testgen_arch g = base;
  g.missing_tensor = "blk.1.ffn_gate.weight";
  EXPECT_INT_EQ(open_gen(&g, "nomic_no_gate"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ffn_gate.weight' is missing");
  g = base;
  g.missing_tensor = "blk.0.attn_qkv.weight";
  EXPECT_INT_EQ(open_gen(&g, "nomic_no_qkv"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_qkv.weight' is missing");
  g = base;
  g.bad_tensor = "blk.0.attn_qkv.weight"; /* Q 64 + K 64 + V 64 rows */
  EXPECT_INT_EQ(open_gen(&g, "nomic_bad_qkv"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_qkv.weight' has shape [64, 193], expected [64, 192]");
  g = base;
  g.bad_tensor = "token_embd_norm.bias";
  EXPECT_INT_EQ(open_gen(&g, "nomic_bad_norm"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'token_embd_norm.bias' has shape [65], expected [64]");
  g = base;
  g.pooling_type = 4;
  EXPECT_INT_EQ(open_gen(&g, "nomic_pool4"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "key 'nomic-bert.pooling_type' is 4");
  /* an encoder has no logits, and says which one it is */
  char path[512];
  ASSERT_TRUE(ref_write_arch(&base, "nomic_logits", path, sizeof path));
  model *m = NULL;
  model_ctx *c = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  ASSERT_INT_EQ(model_ctx_new(m, NULL, &c), 0);
  float lg[300];
  EXPECT_INT_EQ(model_forward(c, PROMPT, 2, 0, lg, MODEL_LOGITS_LAST), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "'nomic-bert' is an encoder");
  model_ctx_free(c);
  model_free(m);
}
