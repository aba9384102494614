/* test_model_moe.c - the mixture-of-experts layer (src/model/moe.c) and
 * the qwen3moe architecture (src/model/qwen3moe.c): routing by hand-worked
 * examples (ties, top-k equal to the expert count, every gating variant),
 * whole models against tools/ref_qwen.py + tools/ref_moe.py (float64
 * numpy computing every expert on every token under a routing mask) on
 * random-weight files of two shapes and of every file variant (fused
 * gate_up, shared expert, sigmoid with a selection bias, softmax of the
 * chosen, weight scaling), greedy 32 tokens on F32 and F16, the batched
 * against the one-token path (also with every token sent to one expert and
 * experts left without tokens), and the malformed-file catalogue. */
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "gguf/gguf.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/testgen_arch.h"
#include "model_ref.h"

#define REF "tools/ref_qwen.py"
#define NEED_PY() NEED_REF_PY(REF)

static const int32_t PROMPT[] = {1, 17, 42, 299, 3, 150, 150, 7, 88, 254, 0, 31, 64, 200};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* ---- routing ------------------------------------------------------------- */

static model_moe_hparams hp(int64_t n, int64_t k, enum model_moe_gating g, bool norm, float scale) {
  model_moe_hparams p = {.n_expert = n, .n_used = k, .n_ff_exp = 1, .gating = g, .norm_w = norm, .w_scale = scale};
  return p;
}

TEST(model_moe_route_softmax_topk) {
  /* softmax of {0, ln 2, ln 4, ln 1} = {1, 2, 4, 1} / 8: top-2 are 2 (4/8), 1 (2/8) */
  const float lg[4] = {0.0f, logf(2.0f), logf(4.0f), 0.0f};
  int32_t sel[4];
  float w[4];
  model_moe_hparams p = hp(4, 2, MODEL_MOE_SOFTMAX, false, 1.0f);
  model_moe_route(&p, lg, NULL, sel, w);
  EXPECT_INT_EQ(sel[0], 2);
  EXPECT_INT_EQ(sel[1], 1);
  EXPECT_NEAR(w[0], 0.5, 1e-6);
  EXPECT_NEAR(w[1], 0.25, 1e-6);
  /* norm_topk_prob: 4/6 and 2/6; then a scale of 2.5 */
  p.norm_w = true;
  p.w_scale = 2.5f;
  model_moe_route(&p, lg, NULL, sel, w);
  EXPECT_NEAR(w[0], 2.5 * 4.0 / 6.0, 1e-6);
  EXPECT_NEAR(w[1], 2.5 * 2.0 / 6.0, 1e-6);
  /* ties go to the lower expert number: 0 and 3 tie at 1/8, third place */
  p = hp(4, 3, MODEL_MOE_SOFTMAX, false, 1.0f);
  model_moe_route(&p, lg, NULL, sel, w);
  EXPECT_INT_EQ(sel[2], 0);
  EXPECT_NEAR(w[2], 0.125, 1e-6);
  /* all equal: experts in order */
  const float flat[4] = {1, 1, 1, 1};
  model_moe_route(&p, flat, NULL, sel, w);
  EXPECT_TRUE(sel[0] == 0 && sel[1] == 1 && sel[2] == 2);
  /* k = n_expert: every expert, weights the whole softmax (sum 1) */
  p = hp(4, 4, MODEL_MOE_SOFTMAX, false, 1.0f);
  model_moe_route(&p, lg, NULL, sel, w);
  EXPECT_TRUE(sel[0] == 2 && sel[1] == 1 && sel[2] == 0 && sel[3] == 3);
  EXPECT_NEAR(w[0] + w[1] + w[2] + w[3], 1.0, 1e-6);
  /* a NaN logit never wins over a number */
  const float withnan[4] = {NAN, -5.0f, -6.0f, -7.0f};
  p = hp(4, 1, MODEL_MOE_SOFTMAX_WEIGHT, false, 1.0f);
  model_moe_route(&p, withnan, NULL, sel, w);
  EXPECT_INT_EQ(sel[0], 1);
}

TEST(model_moe_route_variants) {
  int32_t sel[3];
  float w[3];
  /* softmax of the chosen (top-k of the logits first): logits {3, 1, 2}:
   * chosen 0, 2, weights softmax(3, 2) = {e/(e+1), 1/(e+1)} */
  const float lg[3] = {3.0f, 1.0f, 2.0f};
  model_moe_hparams p = hp(3, 2, MODEL_MOE_SOFTMAX_WEIGHT, false, 1.0f);
  model_moe_route(&p, lg, NULL, sel, w);
  EXPECT_TRUE(sel[0] == 0 && sel[1] == 2);
  const double e = exp(1.0);
  EXPECT_NEAR(w[0], e / (e + 1), 1e-6);
  EXPECT_NEAR(w[1], 1 / (e + 1), 1e-6);
  /* sigmoid with a selection bias: the bias moves expert 1 to the top but
   * its weight stays the unbiased sigmoid(1) */
  const float bias[3] = {0.0f, 5.0f, 0.0f};
  p = hp(3, 2, MODEL_MOE_SIGMOID, false, 1.0f);
  model_moe_route(&p, lg, bias, sel, w);
  EXPECT_TRUE(sel[0] == 1 && sel[1] == 0);
  EXPECT_NEAR(w[0], 1.0 / (1.0 + exp(-1.0)), 1e-6);
  EXPECT_NEAR(w[1], 1.0 / (1.0 + exp(-3.0)), 1e-6);
  /* normalised sigmoid weights sum to 1 */
  p.norm_w = true;
  model_moe_route(&p, lg, bias, sel, w);
  EXPECT_NEAR(w[0] + w[1], 1.0, 1e-6);
}

/* ---- whole models against numpy -------------------------------------------- */

/* the second shape: 8 experts, top-4, wider experts, 3 layers, GQA 6/2 */
static model_testgen_arch shape_b(void) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN3MOE);
  g.n_embd = 96;
  g.n_layer = 3;
  g.n_head = 6;
  g.n_head_kv = 2;
  g.head_dim = 16;
  g.n_expert = 8;
  g.n_expert_used = 4;
  g.n_ff_exp = 48;
  g.rope_freq_base = 1000000.0f;
  g.seed = 7;
  return g;
}

static double compare(const char *path, enum model_kv_type kv, int n_threads) {
  return ref_compare(REF, path, PROMPT, N_PROMPT, kv, n_threads);
}

/* F32 weights: only f32 rounding separates C from float64 numpy (~1e-12);
 * the bar is 1e-4, held at 1e-8 so that a routing slip (one wrong
 * expert for one token moves the NMSE to ~1e-2) cannot hide. */
TEST(model_qwen3moe_f32_matches_numpy) {
  NEED_PY();
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN3MOE);
  ASSERT_TRUE(ref_write_arch(&g, "q3m_a", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_QWEN3MOE);
  EXPECT_STR_EQ(model_arch_name(MODEL_ARCH_QWEN3MOE), "qwen3moe");
  model_free(m);
  double e = compare(path, MODEL_KV_F32, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = compare(path, MODEL_KV_F16, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  g = shape_b();
  ASSERT_TRUE(ref_write_arch(&g, "q3m_b", path, sizeof path));
  e = compare(path, MODEL_KV_F32, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = compare(path, MODEL_KV_F16, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
}

/* Every variant a file can declare, each against numpy on shape B. */
TEST(model_moe_variants_match_numpy) {
  NEED_PY();
  char path[512];
  struct {
    const char *name;
    bool fused, bias, tied;
    int64_t shexp;
    int gating, norm;
    float scale;
  } v[] = {
      {"q3m_fused", true, false, false, 0, 0, -1, 0},
      {"q3m_shexp", false, false, false, 40, 0, -1, 0},
      {"q3m_sigmoid_bias", false, true, false, 0, MODEL_MOE_SIGMOID, 1, 2.5f},
      {"q3m_softmax_weight", false, false, true, 0, MODEL_MOE_SOFTMAX_WEIGHT, 0, 0},
      {"q3m_no_norm", true, false, false, 24, MODEL_MOE_SOFTMAX, 0, 0},
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    model_testgen_arch g = shape_b();
    g.fused_gate_up = v[i].fused;
    g.sel_bias = v[i].bias;
    g.tied = v[i].tied;
    g.n_ff_shexp = v[i].shexp;
    g.gating = v[i].gating;
    g.norm_w = v[i].norm;
    g.w_scale = v[i].scale;
    g.seed = 20 + i;
    ASSERT_TRUE(ref_write_arch(&g, v[i].name, path, sizeof path));
    printf("    %s:\n", v[i].name);
    double e = compare(path, MODEL_KV_F32, 2);
    EXPECT_TRUE(e >= 0 && e < 1e-8);
  }
}

/* Greedy continuation of 32 tokens against numpy's (ref_check_greedy), on
 * F32 and F16 weights. */
static void check_greedy(model_testgen_arch g, uint32_t type, const char *name) {
  char path[512];
  g.type = g.type_embd = type;
  if (ref_write_arch(&g, name, path, sizeof path)) ref_check_greedy(REF, path, PROMPT, 6, 32, type != TENSOR_TYPE_F32);
}

TEST(model_qwen3moe_greedy_matches_numpy) {
  NEED_PY();
  model_testgen_arch a = model_testgen_arch_small(MODEL_ARCH_QWEN3MOE), b = shape_b();
  a.seed = 31;
  check_greedy(a, TENSOR_TYPE_F32, "q3m_greedy_a_f32");
  check_greedy(a, TENSOR_TYPE_F16, "q3m_greedy_a_f16");
  check_greedy(b, TENSOR_TYPE_F32, "q3m_greedy_b_f32");
  check_greedy(b, TENSOR_TYPE_F16, "q3m_greedy_b_f16");
}

/* Sets element idx of the F32 tensor `name` in the file at path to v (a
 * routing bias that sends every token to one expert). */
static int patch_f32(const char *path, const char *name, int idx, float v) {
  FILE *f = fopen(path, "r+b");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  uint8_t *bytes = malloc((size_t)n);
  fseek(f, 0, SEEK_SET);
  int rc = bytes && fread(bytes, 1, (size_t)n, f) == (size_t)n ? 0 : -1;
  gguf_file *g = NULL;
  if (!rc) rc = gguf_open_mem(bytes, (size_t)n, &g);
  const gguf_tensor *t = rc ? NULL : gguf_find_tensor(g, name);
  if (!t || t->type != TENSOR_TYPE_F32) rc = -1;
  if (!rc) {
    long off = (long)((const uint8_t *)t->data - bytes) + idx * 4;
    fseek(f, off, SEEK_SET);
    rc = fwrite(&v, 4, 1, f) == 1 ? 0 : -1;
  }
  gguf_close(g);
  free(bytes);
  fclose(f);
  return rc;
}

/* One batch, steps of 5 and token by token give the same logits bit for
 * bit (moe.c: a row's products do not depend on the other tokens, the adds
 * run in expert order). With 8 experts and top-1 on short steps some
 * experts get no token; with expert 3's selection bias raised every token
 * goes to it (and numpy agrees). */
static void check_batch(model_testgen_arch g, const char *name) {
  char path[512];
  if (!ref_write_arch(&g, name, path, sizeof path)) return;
  if (g.sel_bias)
    for (int l = 0; l < (int)g.n_layer; l++) {
      char tn[64];
      snprintf(tn, sizeof tn, "blk.%d.exp_probs_b.bias", l);
      ASSERT_INT_EQ(patch_f32(path, tn, 3, 100.0f), 0);
    }
  ref_check_batch(path, PROMPT, N_PROMPT, MODEL_KV_F32, name);
  if (g.type == TENSOR_TYPE_F32 && ref_py_ready(REF) == 1) {
    double e = compare(path, MODEL_KV_F32, 2);
    EXPECT_TRUE(e >= 0 && e < 1e-8);
  }
}

TEST(model_moe_batch_equals_token_by_token) {
  model_testgen_arch g = shape_b();
  g.type = g.type_embd = TENSOR_TYPE_Q8_0; /* quantized activations too */
  g.n_embd = 64;
  g.n_ff_exp = 64;
  check_batch(g, "q3m_batch_q8");
  g = shape_b();
  g.n_expert_used = 1; /* steps of 5 tokens leave experts without a token */
  g.n_ff_shexp = 32;
  check_batch(g, "q3m_batch_top1");
  g = shape_b();
  g.sel_bias = true; /* patched: expert 3 for every token */
  g.gating = MODEL_MOE_SIGMOID;
  check_batch(g, "q3m_batch_one_expert");
  g = shape_b();
  g.n_expert_used = g.n_expert; /* k = every expert */
  check_batch(g, "q3m_batch_all_experts");
}

/* Mixtral's layout: a "llama" file with llama.expert_count goes to
 * llama_moe.c (normal RoPE, no q/k norms), against tools/ref_llama.py;
 * the same file without the key would be a dense llama. */
TEST(model_llama_moe_matches_numpy) {
  NEED_REF_PY("tools/ref_llama.py");
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_LLAMA_MOE);
  ASSERT_TRUE(ref_write_arch(&g, "mixtral_a", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_LLAMA_MOE);
  EXPECT_STR_EQ(model_arch_name(model_arch_of(m)), "llama");
  EXPECT_INT_EQ(model_get_hparams(m)->rope.style, OPS_ROPE_NORMAL);
  model_free(m);
  double e = ref_compare("tools/ref_llama.py", path, PROMPT, N_PROMPT, MODEL_KV_F32, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  g = shape_b();
  g.arch = MODEL_ARCH_LLAMA_MOE;
  g.head_dim = 0;
  g.type = g.type_embd = TENSOR_TYPE_F16;
  ASSERT_TRUE(ref_write_arch(&g, "mixtral_b_f16", path, sizeof path));
  e = ref_compare("tools/ref_llama.py", path, PROMPT, N_PROMPT, MODEL_KV_F16, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  /* the older layout, one 2-D tensor per expert, is refused by name */
  g = model_testgen_arch_small(MODEL_ARCH_LLAMA_MOE);
  g.missing_tensor = "blk.0.ffn_gate_exps.weight";
  ASSERT_TRUE(ref_write_arch(&g, "mixtral_no_gate", path, sizeof path));
  EXPECT_INT_EQ(model_open(path, &m), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ffn_gate_exps.weight' is missing");
}

/* ---- malformed files ---------------------------------------------------- */

TEST(model_moe_load_errors) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN3MOE);
  /* expert_count says 5, the tensors hold 4 experts */
  g.expert_count_key = 5;
  EXPECT_INT_EQ(ref_open_arch(&g, "q3m_bad_count"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ffn_gate_exps.weight' has shape [64, 32, 4], expected [64, 32, 5] (expert_count 5)");
  /* one tensor with an extra expert */
  g = model_testgen_arch_small(MODEL_ARCH_QWEN3MOE);
  g.bad_tensor = "blk.1.ffn_down_exps.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "q3m_bad_down"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ffn_down_exps.weight' has shape [32, 64, 5], expected [32, 64, 4]");
  /* top-k larger than the experts */
  g = model_testgen_arch_small(MODEL_ARCH_QWEN3MOE);
  g.n_expert_used = 5;
  EXPECT_INT_EQ(ref_open_arch(&g, "q3m_bad_k"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'qwen3moe.expert_used_count' is 5, more than the 4 experts");
  /* a missing expert tensor, a missing router */
  g = model_testgen_arch_small(MODEL_ARCH_QWEN3MOE);
  g.missing_tensor = "blk.1.ffn_up_exps.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "q3m_no_up"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ffn_up_exps.weight' is missing");
  g.missing_tensor = "blk.0.ffn_gate_inp.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "q3m_no_router"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ffn_gate_inp.weight' is missing");
  /* a gating function we do not know */
  g = model_testgen_arch_small(MODEL_ARCH_QWEN3MOE);
  g.gating = 9;
  EXPECT_INT_EQ(ref_open_arch(&g, "q3m_bad_gating"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "key 'qwen3moe.expert_gating_func' is 9");
  /* the smallest valid layer: one expert, top-1 */
  g = model_testgen_arch_small(MODEL_ARCH_QWEN3MOE);
  g.n_expert = 1;
  g.n_expert_used = 1;
  EXPECT_INT_EQ(ref_open_arch(&g, "q3m_one_expert"), 0);
}
