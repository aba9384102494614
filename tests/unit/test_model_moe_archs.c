/* test_model_moe_archs.c - the qwen2moe, olmoe and granitemoe
 * architectures (src/model/qwen2moe.c, olmoe.c, granitemoe.c over
 * moe_dec.c and moe.c): random-weight models of two shapes each against
 * tools/ref_moe.py's MoeDecoder (float64 numpy: the full attention matrix,
 * every expert on every token under a routing mask) on F32 and F16 caches,
 * greedy 32 tokens on F32 and F16 weights, the batched against the
 * one-token path, granite's multipliers shown to move the logits,
 * and the malformed-file catalogue (expert count mismatch, k larger than
 * the experts, missing router, missing shared-expert gate, wrong q/k norm
 * width, missing granite key). */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "gguf/gguf.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen_arch.h"
#include "model_ref.h"

#define REF "tools/ref_moe.py"
#define NEED_PY() NEED_REF_PY(REF)

static const int32_t PROMPT[] = {1, 17, 42, 299, 3, 150, 150, 7, 88, 254, 0, 31, 64, 200};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

static const enum model_arch ARCHS[] = {MODEL_ARCH_QWEN2MOE, MODEL_ARCH_OLMOE, MODEL_ARCH_GRANITEMOE};
#define N_ARCHS ((int)(sizeof ARCHS / sizeof ARCHS[0]))

/* The second shape: 8 experts, top-4, 3 layers, GQA 6/2 of head_dim 16;
 * qwen2moe a shared expert of 40, granitemoe other multipliers, untied and
 * without RoPE (rope.scaling.finetuned false). */
static model_testgen_arch shape_b(enum model_arch a) {
  model_testgen_arch g = model_testgen_arch_small(a);
  g.n_embd = 96;
  g.n_layer = 3;
  g.n_head = 6;
  g.n_head_kv = 2;
  g.head_dim = 16;
  g.n_expert = 8;
  g.n_expert_used = 4;
  g.n_ff_exp = 48;
  if (a != MODEL_ARCH_QWEN2MOE) g.n_ff = 48;
  g.n_ff_shexp = a == MODEL_ARCH_QWEN2MOE ? 40 : 0;
  g.rope_freq_base = 1000000.0f;
  if (a == MODEL_ARCH_GRANITEMOE) {
    g.tied = false;
    g.embd_scale = 6.0f;
    g.resid_scale = 0.5f;
    g.attn_scale = 0.2f;
    g.logit_scale = 3.0f;
    g.rope_finetuned = 0;
  }
  g.seed = 11;
  return g;
}

static double compare(const char *path, enum model_kv_type kv, int n_threads) {
  return ref_compare(REF, path, PROMPT, N_PROMPT, kv, n_threads);
}

/* F32 weights: only f32 rounding separates C from float64 numpy (~1e-13);
 * the bar is 1e-4, held at 1e-8 so that a routing slip (one wrong
 * expert for one token moves the NMSE to ~1e-2) cannot hide. */
TEST(model_moe_archs_f32_match_numpy) {
  NEED_PY();
  char path[512], name[64];
  for (int a = 0; a < N_ARCHS; a++) {
    const char *an = model_arch_name(ARCHS[a]);
    for (int shape = 0; shape < 2; shape++) {
      model_testgen_arch g = shape ? shape_b(ARCHS[a]) : model_testgen_arch_small(ARCHS[a]);
      snprintf(name, sizeof name, "%s_%c", an, shape ? 'b' : 'a');
      ASSERT_TRUE(ref_write_arch(&g, name, path, sizeof path));
      model *m = NULL;
      ASSERT_INT_EQ(model_open(path, &m), 0);
      EXPECT_INT_EQ(model_arch_of(m), ARCHS[a]);
      model_free(m);
      printf("    %s:\n", name);
      double e = compare(path, MODEL_KV_F32, 2);
      EXPECT_TRUE(e >= 0 && e < 1e-8);
      e = compare(path, MODEL_KV_F16, 1);
      EXPECT_TRUE(e >= 0 && e < 1e-8);
    }
  }
}

TEST(model_moe_archs_greedy_match_numpy) {
  NEED_PY();
  char path[512], name[64];
  for (int a = 0; a < N_ARCHS; a++)
    for (int t = 0; t < 2; t++) {
      const uint32_t type = t ? TENSOR_TYPE_F16 : TENSOR_TYPE_F32;
      model_testgen_arch g = t ? shape_b(ARCHS[a]) : model_testgen_arch_small(ARCHS[a]);
      g.type = g.type_embd = type;
      g.seed = 40 + (uint64_t)a;
      snprintf(name, sizeof name, "%s_greedy_%s", model_arch_name(ARCHS[a]), t ? "f16" : "f32");
      printf("    %s:\n", name);
      if (ref_write_arch(&g, name, path, sizeof path)) ref_check_greedy(REF, path, PROMPT, 6, 32, t != 0);
    }
}

/* One batch, steps of 5 and one token at a time agree bit for bit (Q8_0
 * weights on shape B, so the quantized activations take part too). */
TEST(model_moe_archs_batch_equals_token_by_token) {
  char path[512], name[64];
  for (int a = 0; a < N_ARCHS; a++) {
    model_testgen_arch g = shape_b(ARCHS[a]);
    g.type = g.type_embd = TENSOR_TYPE_Q8_0;
    g.n_embd = 64;
    g.n_ff_exp = 64;
    if (ARCHS[a] != MODEL_ARCH_QWEN2MOE) g.n_ff = 64;
    g.n_ff_shexp = ARCHS[a] == MODEL_ARCH_QWEN2MOE ? 32 : 0;
    snprintf(name, sizeof name, "%s_batch", model_arch_name(ARCHS[a]));
    if (ref_write_arch(&g, name, path, sizeof path)) ref_check_batch(path, PROMPT, N_PROMPT, MODEL_KV_F16, name);
  }
}

/* NMSE between the C logits of two files (F32 cache): how far a feature
 * moves them. */
static double c_vs_c(const char *pa, const char *pb) {
  int64_t V = 0;
  float *a = ref_c_logits(pa, PROMPT, N_PROMPT, MODEL_KV_F32, 2, 0, &V);
  float *b = ref_c_logits(pb, PROMPT, N_PROMPT, MODEL_KV_F32, 2, 0, &V);
  double e = a && b ? ref_nmse(a, b, (size_t)N_PROMPT * (size_t)V) : -1;
  free(a);
  free(b);
  return e;
}

/* granitemoe's multipliers matter by far more than the bound the numpy
 * comparisons hold: the file without residual_scale, or without
 * embedding_scale, is another model. */
TEST(model_moe_archs_features_move_logits) {
  char pa[512], pb[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GRANITEMOE);
  ASSERT_TRUE(ref_write_arch(&g, "gm_feat_r", pa, sizeof pa));
  g.resid_scale = 0.0f; /* key absent: no residual multiplier */
  ASSERT_TRUE(ref_write_arch(&g, "gm_feat_nor", pb, sizeof pb));
  double e = c_vs_c(pa, pb);
  printf("    granitemoe without residual_scale: NMSE %.3g\n", e);
  EXPECT_TRUE(e > 1e-4);
  g = model_testgen_arch_small(MODEL_ARCH_GRANITEMOE);
  g.embd_scale = 0.0f;
  ASSERT_TRUE(ref_write_arch(&g, "gm_feat_noe", pb, sizeof pb));
  e = c_vs_c(pa, pb);
  printf("    granitemoe without embedding_scale: NMSE %.3g\n", e);
  EXPECT_TRUE(e > 1e-4);
}

/* ---- malformed files ---------------------------------------------------- */

TEST(model_moe_archs_load_errors) {
  char want[256];
  for (int a = 0; a < N_ARCHS; a++) {
    const char *an = model_arch_name(ARCHS[a]);
    char name[64];
    /* expert_count says 5, the tensors hold 4 experts */
    model_testgen_arch g = model_testgen_arch_small(ARCHS[a]);
    g.expert_count_key = 5;
    snprintf(name, sizeof name, "%s_bad_count", an);
    EXPECT_INT_EQ(ref_open_arch(&g, name), ERR_RANGE);
    EXPECT_STR_CONTAINS(err_detail(),
                        "tensor 'blk.0.ffn_gate_exps.weight' has shape [64, 32, 4], expected [64, 32, 5] (expert_count 5)");
    /* top-k beyond the experts */
    g = model_testgen_arch_small(ARCHS[a]);
    g.n_expert_used = 5;
    snprintf(name, sizeof name, "%s_bad_k", an);
    EXPECT_INT_EQ(ref_open_arch(&g, name), ERR_RANGE);
    snprintf(want, sizeof want, "key '%s.expert_used_count' is 5, more than the 4 experts", an);
    EXPECT_STR_CONTAINS(err_detail(), want);
    /* no router */
    g = model_testgen_arch_small(ARCHS[a]);
    g.missing_tensor = "blk.1.ffn_gate_inp.weight";
    snprintf(name, sizeof name, "%s_no_router", an);
    EXPECT_INT_EQ(ref_open_arch(&g, name), ERR_NOT_FOUND);
    EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ffn_gate_inp.weight' is missing");
    /* a missing expert */
    g.missing_tensor = "blk.0.ffn_down_exps.weight";
    snprintf(name, sizeof name, "%s_no_down", an);
    EXPECT_INT_EQ(ref_open_arch(&g, name), ERR_NOT_FOUND);
    EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ffn_down_exps.weight' is missing");
  }
  /* qwen2moe: the shared expert's gate is required, so is the expert */
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN2MOE);
  g.missing_tensor = "blk.1.ffn_gate_inp_shexp.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "q2m_no_shgate"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ffn_gate_inp_shexp.weight' is missing");
  g.missing_tensor = "blk.0.ffn_up_shexp.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "q2m_no_shup"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ffn_up_shexp.weight' is missing");
  g = model_testgen_arch_small(MODEL_ARCH_QWEN2MOE);
  g.bad_tensor = "blk.0.ffn_gate_inp_shexp.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "q2m_bad_shgate"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "blk.0.ffn_gate_inp_shexp.weight");
  g = model_testgen_arch_small(MODEL_ARCH_QWEN2MOE);
  g.missing_tensor = "blk.0.attn_k.bias";
  EXPECT_INT_EQ(ref_open_arch(&g, "q2m_no_bk"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_k.bias' is missing");
  /* olmoe: the q/k norms span the whole projection (128 = 4 heads x 16 of
   * q here; a per-head [16] vector is refused) */
  g = model_testgen_arch_small(MODEL_ARCH_OLMOE);
  g.missing_tensor = "blk.1.attn_q_norm.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "olmoe_no_qnorm"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.attn_q_norm.weight' is missing");
  g = model_testgen_arch_small(MODEL_ARCH_OLMOE);
  g.bad_tensor = "blk.0.attn_k_norm.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "olmoe_bad_knorm"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "blk.0.attn_k_norm.weight");
  /* granitemoe: logit_scale is required, multipliers are positive */
  g = model_testgen_arch_small(MODEL_ARCH_GRANITEMOE);
  g.logit_scale = 0.0f;
  EXPECT_INT_EQ(ref_open_arch(&g, "gm_no_logit"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "granitemoe.logit_scale");
  g = model_testgen_arch_small(MODEL_ARCH_GRANITEMOE);
  g.resid_scale = -1.0f;
  EXPECT_INT_EQ(ref_open_arch(&g, "gm_neg_resid"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'granitemoe.residual_scale' is -1, expected a number > 0");
}

/* ---- parameter counts ------------------------------------------------------ */

/* model_file_params on the small qwen2moe file, against counts worked out
 * here from its shape: per layer attn_norm, q/k/v/o and their biases,
 * ffn_norm, router, the shared expert and its gate count whole; of the
 * three expert tensors [n_embd x n_ff_exp x n_expert] a token reads k of
 * the n_expert experts. A dense olmo2 file is all active. */
TEST(model_file_params_counts_experts) {
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN2MOE);
  ASSERT_TRUE(ref_write_arch(&g, "q2m_params", path, sizeof path));
  const uint64_t E = 64, hd = 16, Q = 4 * hd, KV = 2 * hd, V = 300, X = 4, k = 2, F = 32, S = 48, L = 2;
  ASSERT_INT_EQ((int64_t)g.n_embd, (int64_t)E); /* the shape the counts assume */
  ASSERT_INT_EQ(g.n_ff_shexp, (int64_t)S);
  const uint64_t attn = E + E * Q + 2 * E * KV + Q + 2 * KV + Q * E + E;
  const uint64_t shared = E + 3 * E * S, router = E * X, experts = 3 * E * F * X;
  const uint64_t total = L * (attn + router + shared + experts) + 2 * V * E + E;
  const uint64_t active = total - L * experts / X * (X - k);
  gguf_file *f = NULL;
  ASSERT_INT_EQ(gguf_open(path, &f), 0);
  uint64_t t = 0, a = 0;
  model_file_params(f, "qwen2moe", &t, &a);
  gguf_close(f);
  printf("    qwen2moe small: %llu parameters, %llu active\n", (unsigned long long)t, (unsigned long long)a);
  EXPECT_INT_EQ((int64_t)t, (int64_t)total);
  EXPECT_INT_EQ((int64_t)a, (int64_t)active);
  /* dense: active = total; an unknown arch (no expert keys) is dense too */
  model_testgen_arch d = model_testgen_arch_small(MODEL_ARCH_OLMO2);
  ASSERT_TRUE(ref_write_arch(&d, "olmo2_params", path, sizeof path));
  ASSERT_INT_EQ(gguf_open(path, &f), 0);
  model_file_params(f, "olmo2", &t, &a);
  EXPECT_TRUE(t > 0 && a == t);
  model_file_params(f, NULL, &t, &a);
  EXPECT_TRUE(t > 0 && a == t);
  gguf_close(f);
}

/* model_file_idle_expert_bytes on the small gpt-oss file with MXFP4
 * experts: per layer gate / up / down [64 x 32 x 4] of 17-byte blocks of 32
 * (8192 elements: 4352 bytes each) and the F32 biases [32 x 4] (gate, up:
 * 512 bytes) and [64 x 4] (down: 1024); a token skips 2 of the 4 experts. */
TEST(model_file_idle_expert_bytes_counts_blocks) {
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GPT_OSS);
  g.type_exps = TENSOR_TYPE_MXFP4;
  ASSERT_TRUE(ref_write_arch(&g, "oss_idle", path, sizeof path));
  ASSERT_INT_EQ(g.n_embd * g.n_ff_exp * g.n_expert, 8192); /* the shape the bytes assume */
  const uint64_t per_layer = 3 * 4352 + 2 * 512 + 1024;
  gguf_file *f = NULL;
  ASSERT_INT_EQ(gguf_open(path, &f), 0);
  EXPECT_INT_EQ((int64_t)model_file_idle_expert_bytes(f, "gpt-oss"), (int64_t)(2 * per_layer / 2));
  EXPECT_INT_EQ((int64_t)model_file_idle_expert_bytes(f, NULL), 0);
  gguf_close(f);
}

/* The released MoE shapes of the benchmarks: their defining numbers, the
 * layer cut, and an unknown name refused by name. */
TEST(model_testgen_moe_shapes) {
  model_testgen_arch g;
  ASSERT_INT_EQ(model_testgen_arch_moe_shape("gpt-oss-20b", 0, &g), 0);
  EXPECT_INT_EQ(g.arch, MODEL_ARCH_GPT_OSS);
  EXPECT_INT_EQ(g.n_layer, 24);
  EXPECT_INT_EQ(g.n_embd, 2880);
  EXPECT_INT_EQ(g.n_expert * 100 + g.n_expert_used, 3204);
  EXPECT_INT_EQ(g.type_exps, TENSOR_TYPE_MXFP4);
  ASSERT_INT_EQ(model_testgen_arch_moe_shape("qwen3-30b-a3b", 3, &g), 0);
  EXPECT_INT_EQ(g.arch, MODEL_ARCH_QWEN3MOE);
  EXPECT_INT_EQ(g.n_layer, 3);
  EXPECT_INT_EQ(g.n_expert * 100 + g.n_expert_used, 12808);
  EXPECT_INT_EQ(g.n_ff_exp, 768);
  EXPECT_INT_EQ(model_testgen_arch_moe_shape("mixtral-8x7b", 0, &g), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "'mixtral-8x7b'");
}
