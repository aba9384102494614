/*
 * test_model_mistral3.c - the mistral3 row of llamalike.c (Ministral 3,
 * Mistral Small 3.x text) against tools/ref_llamalike.py: llama's block
 * with YaRN RoPE, the yarn_log_multiplier magnitude and Llama 4's
 * attention temperature; two shapes, F32 and F16 weights and caches,
 * greedy continuations, and the malformed-file catalogue.
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/err.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen_arch.h"
#include "model_ref.h"
#include "test.h"

#define REF "tools/ref_llamalike.py"
#define NEED_PY() NEED_REF_PY(REF)

/* 40 tokens: the temperature steps every 16 (small) / 8 (second shape)
 * positions, so two and five steps are crossed */
static const int32_t PROMPT[] = {1,  17, 42,  299, 3,  150, 150, 7,   88, 254, 0,  31,  64,  200,
                                 5,  9,  200, 14,  77, 3,   3,   150, 299, 100, 101, 102, 7, 8,
                                 9,  250, 33, 44,  55, 66,  77,  88,  99,  111, 222, 12};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* The second shape: n_embd 128, head_dim 32 on one KV head, 3 layers,
 * tied, context 256 trained from 8 positions (x32), llama.cpp's default
 * betas, no yarn_log_multiplier (so the magnitude is 1 + 0.1 ln 32),
 * rope.scaling.attn_factor 1.1, temperature 0.4. */
static model_testgen_arch shape_b(void) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_MISTRAL3);
  g.n_embd = 128;
  g.head_dim = 32;
  g.n_head_kv = 1;
  g.n_ff = 192;
  g.n_layer = 3;
  g.n_ctx = 256;
  g.tied = true;
  g.rope_freq_base = 10000.0f;
  g.rope_yarn = 32.0f;
  g.n_ctx_orig = 8;
  g.yarn_beta_fast = g.yarn_beta_slow = g.yarn_log_mul = 0.0f;
  g.rope_attn_factor = 1.1f;
  g.attn_temp_scale = 0.4f;
  g.seed = 91;
  return g;
}

/* F32 weights: f32 rounding alone (the bar is 1e-4, 1e-8 held as
 * for the other llama-like rows; 1e-7 with the F16 cache, as there). */
static void check_logits(model_testgen_arch g, const char *name) {
  char path[512];
  if (!ref_write_arch(&g, name, path, sizeof path)) return;
  double e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F32, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F16, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-7);
}

TEST(model_mistral3_matches_numpy) {
  NEED_PY();
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_MISTRAL3);
  ASSERT_TRUE(ref_write_arch(&g, "mistral3_a", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_MISTRAL3);
  EXPECT_STR_EQ(model_arch_name(model_arch_of(m)), "mistral3");
  model_free(m);
  check_logits(g, "mistral3_a");
  check_logits(shape_b(), "mistral3_b");
  /* F16 weights, both shapes */
  g.type = g.type_embd = TENSOR_TYPE_F16;
  check_logits(g, "mistral3_a_f16");
  model_testgen_arch b = shape_b();
  b.type = b.type_embd = TENSOR_TYPE_F16;
  check_logits(b, "mistral3_b_f16");
}

/* What each feature weighs: the same file without the temperature, with
 * the log multiplier 0 (the plain YaRN magnitude), and with linear
 * scaling instead of YaRN each give other logits (NMSE > 1e-4), so the
 * comparisons above hold all three. */
TEST(model_mistral3_features_matter) {
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_MISTRAL3);
  ASSERT_TRUE(ref_write_arch(&g, "mistral3_base", path, sizeof path));
  int64_t V = 0;
  float *base = ref_c_logits(path, PROMPT, N_PROMPT, MODEL_KV_F32, 2, 0, &V);
  ASSERT_TRUE(base != NULL);
  static const char *names[3] = {"mistral3_no_temp", "mistral3_no_logmul", "mistral3_linear"};
  for (int v = 0; v < 3; v++) {
    model_testgen_arch h = g;
    if (v == 0) h.attn_temp_scale = 0.0f;
    if (v == 1) h.yarn_log_mul = 0.0f;
    if (v == 2) {
      h.rope_scale_linear = h.rope_yarn;
      h.rope_yarn = h.yarn_beta_fast = h.yarn_beta_slow = h.yarn_log_mul = 0.0f;
    }
    if (!ref_write_arch(&h, names[v], path, sizeof path)) continue;
    int64_t V2 = 0;
    float *o = ref_c_logits(path, PROMPT, N_PROMPT, MODEL_KV_F32, 2, 0, &V2);
    if (o) {
      double d = ref_nmse(o, base, (size_t)N_PROMPT * (size_t)V);
      printf("    %s vs the file: NMSE %.3g\n", names[v], d);
      EXPECT_TRUE(d > 1e-4);
    }
    free(o);
  }
  free(base);
}

TEST(model_mistral3_greedy_matches_numpy) {
  NEED_PY();
  static const char *names[2] = {"mistral3_greedy_f32", "mistral3_greedy_f16"};
  for (int f = 0; f < 2; f++) {
    char path[512];
    model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_MISTRAL3);
    g.type = g.type_embd = f ? TENSOR_TYPE_F16 : TENSOR_TYPE_F32;
    g.seed = 60 + (uint64_t)f;
    /* 32 tokens after 12: positions 12..43 cross two temperature steps */
    if (ref_write_arch(&g, names[f], path, sizeof path)) ref_check_greedy(REF, path, PROMPT, 12, 32, f == 1);
  }
}

/* Opens g written as name; returns model_open's code (the model freed). */
static int open_gen(const model_testgen_arch *g, const char *name) {
  char path[512];
  if (!ref_write_arch(g, name, path, sizeof path)) return 1;
  model *m = NULL;
  int rc = model_open(path, &m);
  model_free(m);
  return rc;
}

TEST(model_mistral3_load_errors) {
  const model_testgen_arch a = model_testgen_arch_small(MODEL_ARCH_MISTRAL3);
  model_testgen_arch g = a;
  g.attn_temp_scale = -0.1f;
  EXPECT_INT_EQ(open_gen(&g, "mistral3_bad_temp"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'mistral3.attention.temperature_scale' is -0.1, expected 0 .. 10");
  g = a;
  g.yarn_log_mul = -1.0f;
  EXPECT_INT_EQ(open_gen(&g, "mistral3_bad_logmul"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'mistral3.rope.scaling.yarn_log_multiplier' is -1");
  g = a;
  g.yarn_beta_slow = 8.0f; /* above beta_fast 4 */
  EXPECT_INT_EQ(open_gen(&g, "mistral3_bad_betas"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'mistral3.rope.scaling.yarn_beta_slow' is 8, expected 0.001 .. 4");
  g = a;
  g.rope_yarn = -4.0f;
  EXPECT_INT_EQ(open_gen(&g, "mistral3_bad_factor"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'mistral3.rope.scaling.factor' is -4");
  g = a;
  g.n_ctx_orig = 4096; /* beyond the trained 128 */
  EXPECT_INT_EQ(open_gen(&g, "mistral3_bad_orig"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'mistral3.rope.scaling.original_context_length' is 4096, expected 1..128");
  g = a;
  g.missing_tensor = "blk.1.ffn_gate.weight";
  EXPECT_INT_EQ(open_gen(&g, "mistral3_missing_gate"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ffn_gate.weight' is missing");
  g = a;
  g.bad_tensor = "blk.0.attn_k.weight";
  EXPECT_INT_EQ(open_gen(&g, "mistral3_bad_k"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_k.weight' has shape [64, 33], expected [64, 32]");
}
