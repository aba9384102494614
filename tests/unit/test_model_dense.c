/* test_model_dense.c - the olmo2 and glm4 forward passes (src/model/
 * olmo2.c, glm4.c) against tools/ref_dense.py, an independent float64
 * numpy implementation reading the same GGUF file, on random-weight models
 * of two shapes written by the project's writer (testgen_arch.c with
 * testgen_dense.c): logits on F32 and F16 weights with F32 and F16 caches,
 * Q8_0 through the reference and the fast kernels, greedy continuations,
 * glm4's fused attn_qkv, then the catalogue of malformed files. */
#include "test.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/kernels.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen_arch.h"
#include "model_ref.h"

#define REF "tools/ref_dense.py"
#define NEED_PY() NEED_REF_PY(REF)

static const int32_t PROMPT[] = {1, 17, 42, 299, 3, 150, 150, 7, 88, 254, 0, 31, 64, 200, 5, 9, 200, 14};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* The second shape: wider, 2 heads on one KV head, head_dim 64, 3 layers,
 * tied embeddings, rope base 5e5; glm4 with the fused attn_qkv and rotary
 * on 32 of the 64 dimensions. */
static model_testgen_arch shape_b(enum model_arch arch) {
  model_testgen_arch g = model_testgen_arch_small(arch);
  g.n_embd = 128;
  g.n_head = 2;
  g.n_head_kv = 1;
  g.head_dim = 64;
  g.n_ff = 192;
  g.n_layer = 3;
  g.tied = true;
  g.rope_freq_base = 500000.0f;
  if (arch == MODEL_ARCH_GLM4) {
    g.n_rot = 32;
    g.fused_qkv = true;
  }
  g.seed = 70 + (uint64_t)arch;
  return g;
}

/* F32 weights: f32 rounding only separates C from float64 numpy (NMSE
 * ~1e-12). The bar is 1e-4; 1e-8 is held so that a norm in the
 * wrong place (olmo2 normed per head instead of over the whole q: ~1e-2),
 * glm4's gate and up halves swapped, NeoX instead of adjacent pairs, or the
 * rotation applied past n_rot cannot hide. */
static void check_logits(model_testgen_arch g, const char *name) {
  char path[512];
  if (!ref_write_arch(&g, name, path, sizeof path)) return;
  double e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F32, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F16, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
}

TEST(model_olmo2_f32_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_OLMO2);
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "olmo2_small", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_OLMO2);
  EXPECT_STR_EQ(model_arch_name(MODEL_ARCH_OLMO2), "olmo2");
  EXPECT_INT_EQ(model_get_hparams(m)->rope.style, OPS_ROPE_NEOX);
  model_free(m);
  check_logits(g, "olmo2_small");
  check_logits(shape_b(MODEL_ARCH_OLMO2), "olmo2_b");
}

TEST(model_glm4_f32_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GLM4);
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "glm4_small", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const model_hparams *hp = model_get_hparams(m);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_GLM4);
  EXPECT_INT_EQ(hp->rope.style, OPS_ROPE_NORMAL);
  EXPECT_INT_EQ(hp->rope.n_rot, 8);
  EXPECT_INT_EQ(hp->head_dim, 16);
  model_free(m);
  check_logits(g, "glm4_small");
  model_testgen_arch b = shape_b(MODEL_ARCH_GLM4);
  ASSERT_TRUE(ref_write_arch(&b, "glm4_b", path, sizeof path));
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_get_hparams(m)->rope.n_rot, 32);
  model_free(m);
  check_logits(b, "glm4_b");
}

TEST(model_dense_f16_matches_numpy) {
  NEED_PY();
  for (int a = 0; a < 2; a++) {
    model_testgen_arch g = model_testgen_arch_small(a ? MODEL_ARCH_GLM4 : MODEL_ARCH_OLMO2);
    g.type = g.type_embd = TENSOR_TYPE_F16;
    g.seed = 30 + (uint64_t)a;
    check_logits(g, a ? "glm4_f16" : "olmo2_f16");
  }
}

/* Q8_0 weights. With the reference kernels every product is an exact dot
 * product of the dequantized weights numpy also decodes: f32 rounding only
 * (1e-8). The fast kernels quantize activations to 8 bits as well, which
 * adds ~1e-4 (test_model.c derives it); 2e-3 is llama's and qwen's bar.
 * n_embd 256 so the 32-blocks tile the rows several times. */
TEST(model_dense_q8_0_matches_numpy) {
  NEED_PY();
  char path[512];
  for (int a = 0; a < 2; a++) {
    model_testgen_arch g = model_testgen_arch_small(a ? MODEL_ARCH_GLM4 : MODEL_ARCH_OLMO2);
    g.n_embd = 256;
    g.n_ff = 256;
    g.type = g.type_embd = TENSOR_TYPE_Q8_0;
    g.seed = 80 + (uint64_t)a;
    ASSERT_TRUE(ref_write_arch(&g, a ? "glm4_q8" : "olmo2_q8", path, sizeof path));
    kern_force_reference(true);
    double e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F16, 2);
    kern_force_reference(false);
    EXPECT_TRUE(e >= 0 && e < 1e-8);
    e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F16, 2);
    EXPECT_TRUE(e >= 0 && e < 2e-3);
  }
}

TEST(model_dense_greedy_matches_numpy) {
  NEED_PY();
  static const char *names[2][2] = {{"olmo2_greedy_f32", "olmo2_greedy_f16"}, {"glm4_greedy_f32", "glm4_greedy_f16"}};
  for (int a = 0; a < 2; a++)
    for (int f = 0; f < 2; f++) {
      model_testgen_arch g = model_testgen_arch_small(a ? MODEL_ARCH_GLM4 : MODEL_ARCH_OLMO2);
      g.type = g.type_embd = f ? TENSOR_TYPE_F16 : TENSOR_TYPE_F32;
      g.seed = 40 + (uint64_t)(2 * a + f);
      char path[512];
      /* 32 tokens after a 12-token prompt, cache rounded as the weights */
      if (ref_write_arch(&g, names[a][f], path, sizeof path)) ref_check_greedy(REF, path, PROMPT, 12, 32, f == 1);
    }
}

/* Writes g and opens it: the open's return code (err_detail() says why). */
static int open_gen(const model_testgen_arch *g, const char *name) {
  char path[512];
  if (!ref_write_arch(g, name, path, sizeof path)) return 1;
  model *m = NULL;
  int rc = model_open(path, &m);
  model_free(m);
  return rc;
}

/* The malformed-file catalogue: each damage its own error naming the
 * tensor or key, never a crash. */
TEST(model_dense_load_errors) {
  const model_testgen_arch o = model_testgen_arch_small(MODEL_ARCH_OLMO2);
  const model_testgen_arch z = model_testgen_arch_small(MODEL_ARCH_GLM4);
  model_testgen_arch g;
  /* missing tensors: a post-norm, a q/k norm, glm4's fused up */
  g = o;
  g.missing_tensor = "blk.1.post_ffw_norm.weight";
  EXPECT_INT_EQ(open_gen(&g, "olmo2_no_postffw"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.post_ffw_norm.weight' is missing");
  g = o;
  g.missing_tensor = "blk.0.attn_k_norm.weight";
  EXPECT_INT_EQ(open_gen(&g, "olmo2_no_knorm"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_k_norm.weight' is missing");
  g = z;
  g.missing_tensor = "blk.1.post_attention_norm.weight";
  EXPECT_INT_EQ(open_gen(&g, "glm4_no_postattn"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.post_attention_norm.weight' is missing");
  g = z;
  g.missing_tensor = "blk.0.attn_k.bias";
  EXPECT_INT_EQ(open_gen(&g, "glm4_no_kbias"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "blk.0.attn_k.bias is missing");
  /* wrong shapes: the loader names the tensor and both shapes */
  g = o;
  g.bad_tensor = "blk.0.attn_q_norm.weight"; /* olmo2's q norm spans all heads: 64, not head_dim */
  EXPECT_INT_EQ(open_gen(&g, "olmo2_bad_qnorm"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_q_norm.weight' has shape [65], expected [64]");
  g = z;
  g.bad_tensor = "blk.1.ffn_up.weight"; /* the fused gate|up is 2 n_ff = 320 rows */
  EXPECT_INT_EQ(open_gen(&g, "glm4_bad_up"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ffn_up.weight' has shape [64, 321], expected [64, 320]");
  g = shape_b(MODEL_ARCH_GLM4);
  g.bad_tensor = "blk.2.attn_qkv.weight"; /* Q 128 + K 64 + V 64 */
  EXPECT_INT_EQ(open_gen(&g, "glm4_bad_qkv"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.2.attn_qkv.weight' has shape [128, 257], expected [128, 256]");
  /* bad rope factors: rotary dimensions odd, or wider than the head */
  g = z;
  g.n_rot = 7;
  EXPECT_INT_EQ(open_gen(&g, "glm4_rot_odd"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'glm4.rope.dimension_count' is 7, expected an even number");
  g = z;
  g.n_rot = 18;
  EXPECT_INT_EQ(open_gen(&g, "glm4_rot_wide"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "glm4.rope.dimension_count");
  /* an olmo2 file with a sliding window (OLMo 3) is refused by name */
  g = o;
  g.sliding_window = 32;
  EXPECT_INT_EQ(open_gen(&g, "olmo2_swa"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "key 'olmo2.attention.sliding_window' is 32");
}
