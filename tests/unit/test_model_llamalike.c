/* test_model_llamalike.c - the phi3, granite and smollm3 forward passes
 * (src/model/llamalike.c) against tools/ref_llamalike.py, an independent
 * float64 numpy implementation reading the same GGUF file, on random-weight
 * models of two shapes each written by src/model/testgen_arch.c: fused
 * attn_qkv / ffn_up split into row ranges, partial NeoX rotary, LongRoPE
 * short and long factors chosen by the context, phi3's sliding window on
 * every layer (prompts longer than the window, interleaved sequences),
 * granite's four multipliers and its RoPE switch, smollm3's NoPE layers;
 * then the catalogue of malformed files. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen_arch.h"
#include "model_ref.h"

#define REF "tools/ref_llamalike.py"
#define NEED_PY() NEED_REF_PY(REF)

/* 40 tokens: five phi3 windows of 8. */
static const int32_t PROMPT[] = {1,  17, 42,  299, 3,  150, 150, 7,   88, 254, 0,  31,  64,  200,
                                 5,  9,  200, 14,  77, 3,   3,   150, 299, 100, 101, 102, 7, 8,
                                 9,  250, 33, 44,  55, 66,  77,  88,  99,  111, 222, 12};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* The second shape of each: wider, head_dim 32, context 256, 3 layers
 * (smollm3: 8, so layers 3 and 7 are NoPE). phi3: 4 KV heads (Phi-3-mini is
 * multi-head), full rotary, window 0 (Phi-4's "none"), no LongRoPE, tied
 * (Phi-4-mini). granite: one KV head, untied, other multipliers, the RoPE
 * switch key written true. */
static model_testgen_arch shape_b(enum model_arch arch) {
  model_testgen_arch g = model_testgen_arch_small(arch);
  g.n_embd = 128;
  g.n_head = 4;
  g.head_dim = 32;
  g.n_ff = 192;
  g.n_layer = arch == MODEL_ARCH_SMOLLM3 ? 8 : 3;
  g.n_ctx = 256;
  g.rope_freq_base = 500000.0f;
  g.seed = 80 + (uint64_t)arch;
  if (arch == MODEL_ARCH_PHI3) {
    g.n_head_kv = 4;
    g.n_rot = 0;
    g.sliding_window = 0;
    g.rope_factors = 0;
    g.n_ctx_orig = 0;
    g.rope_attn_factor = 0;
    g.tied = true;
  } else if (arch == MODEL_ARCH_GRANITE) {
    g.n_head_kv = 1;
    g.tied = false;
    g.embd_scale = 6.0f;
    g.resid_scale = 0.5f;
    g.attn_scale = 0.125f;
    g.logit_scale = 3.0f;
    g.rope_finetuned = 1;
  } else {
    g.n_head_kv = 1;
  }
  return g;
}

/* F32 weights: f32 rounding only (NMSE ~1e-12); the bar is 1e-4,
 * held at 1e-8 so that a wrong factor set (short for long: ~1e-1), a
 * missing multiplier, RoPE on a NoPE layer or a window off by one (all
 * 1e-3 or more) cannot hide. With the F16 cache numpy rounds the same
 * keys and values, but a value that f32 rounding puts on the other side
 * of a half-way point rounds apart: up to 1e-8 measured (smollm3), so
 * 1e-7 there. */
static void check_logits(model_testgen_arch g, const char *name, int n_tok) {
  char path[512];
  if (!ref_write_arch(&g, name, path, sizeof path)) return;
  double e = ref_compare(REF, path, PROMPT, n_tok, MODEL_KV_F32, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = ref_compare(REF, path, PROMPT, n_tok, MODEL_KV_F16, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-7);
}

static model *open_model(const model_testgen_arch *g, const char *name) {
  char path[512];
  model *m = NULL;
  if (!ref_write_arch(g, name, path, sizeof path)) return NULL;
  if (model_open(path, &m)) test_fail_at(__FILE__, __LINE__, "%s: %s", name, err_detail());
  return m;
}

TEST(model_phi3_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_PHI3);
  model *m = open_model(&g, "phi3_small");
  ASSERT_TRUE(m != NULL);
  const model_hparams *hp = model_get_hparams(m);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_PHI3);
  EXPECT_INT_EQ(hp->rope.style, OPS_ROPE_NEOX);
  EXPECT_INT_EQ(hp->rope.n_rot, 12);
  EXPECT_INT_EQ(hp->n_swa, 8);
  EXPECT_INT_EQ(model_layer_window(hp, 0), 8); /* every layer slides */
  EXPECT_INT_EQ(model_layer_window(hp, 1), 8);
  model_free(m);
  check_logits(g, "phi3_small", N_PROMPT); /* context 128 > 32: the long factors */
  model_testgen_arch b = shape_b(MODEL_ARCH_PHI3);
  m = open_model(&b, "phi3_b");
  ASSERT_TRUE(m != NULL);
  EXPECT_INT_EQ(model_get_hparams(m)->n_swa, 0);
  model_free(m);
  check_logits(b, "phi3_b", N_PROMPT);
  /* separate attn_q/k/v (older conversions) read the same */
  g.separate_qkv = true;
  check_logits(g, "phi3_sep", N_PROMPT);
}

/* A context of at most rope.scaling.original_context_length (32) takes the
 * short factors: the C logits through a 32-position context against numpy
 * told the same, and against numpy's long-factor logits, which must differ
 * (or the choice would not be tested). */
TEST(model_phi3_short_factors_by_context) {
  NEED_PY();
  enum { N = 24 };
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_PHI3);
  char path[512], out[600], cmd[2048], toks[512];
  ASSERT_TRUE(ref_write_arch(&g, "phi3_short", path, sizeof path));
  model *m = NULL;
  model_ctx *c = NULL;
  model_ctx_params p = model_ctx_default_params();
  p.n_ctx = 32;
  p.n_threads = 2;
  p.kv_type = MODEL_KV_F32;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  ASSERT_INT_EQ(model_ctx_new(m, &p, &c), 0);
  const int64_t V = model_get_hparams(m)->n_vocab;
  float *lg = malloc((size_t)N * (size_t)V * sizeof *lg);
  ASSERT_INT_EQ(model_forward(c, PROMPT, N, 0, lg, MODEL_LOGITS_ALL), 0);
  ref_toks_str(PROMPT, N, toks, sizeof toks);
  snprintf(out, sizeof out, "%s.short.f32", path);
  snprintf(cmd, sizeof cmd, REF_PY " " REF " logits %s %s %s --ctx 32", path, toks, out);
  float *ref_short = ref_run_floats(cmd, out, (size_t)N * (size_t)V);
  float *ref_long = ref_logits(REF, path, PROMPT, N, V, false);
  ASSERT_TRUE(ref_short && ref_long);
  double e_short = ref_nmse(lg, ref_short, (size_t)N * (size_t)V);
  double e_long = ref_nmse(lg, ref_long, (size_t)N * (size_t)V);
  printf("    phi3 context 32: nmse %.3g against the short factors, %.3g against the long\n", e_short, e_long);
  EXPECT_TRUE(e_short < 1e-8);
  EXPECT_TRUE(e_long > 1e-4);
  free(ref_short);
  free(ref_long);
  free(lg);
  model_ctx_free(c);
  model_free(m);
}

TEST(model_granite_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GRANITE);
  check_logits(g, "granite_small", N_PROMPT);
  check_logits(shape_b(MODEL_ARCH_GRANITE), "granite_b", N_PROMPT);
  /* rope.scaling.finetuned false: no layer rotates */
  g.rope_finetuned = 0;
  model *m = open_model(&g, "granite_norope");
  ASSERT_TRUE(m != NULL);
  EXPECT_TRUE(!model_layer_rope(model_get_hparams(m), 0));
  model_free(m);
  check_logits(g, "granite_norope", N_PROMPT);
}

TEST(model_smollm3_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_SMOLLM3);
  model *m = open_model(&g, "smollm3_small");
  ASSERT_TRUE(m != NULL);
  const model_hparams *hp = model_get_hparams(m);
  for (int l = 0; l < 4; l++) EXPECT_INT_EQ(model_layer_rope(hp, l), l != 3);
  model_free(m);
  check_logits(g, "smollm3_small", N_PROMPT);
  check_logits(shape_b(MODEL_ARCH_SMOLLM3), "smollm3_b", N_PROMPT);
}

/* F16 weights: numpy decodes the same halves. */
TEST(model_llamalike_f16_matches_numpy) {
  NEED_PY();
  static const enum model_arch archs[3] = {MODEL_ARCH_PHI3, MODEL_ARCH_GRANITE, MODEL_ARCH_SMOLLM3};
  static const char *names[3] = {"phi3_f16", "granite_f16", "smollm3_f16"};
  for (int a = 0; a < 3; a++) {
    model_testgen_arch g = model_testgen_arch_small(archs[a]);
    g.type = g.type_embd = TENSOR_TYPE_F16;
    g.seed = 30 + (uint64_t)a;
    check_logits(g, names[a], N_PROMPT);
  }
}

/* Past the first attention tile (128 positions) with phi3's window of 8. */
TEST(model_phi3_long_prompt_matches_numpy) {
  NEED_PY();
  enum { N = 150 };
  int32_t toks[N];
  for (int i = 0; i < N; i++) toks[i] = (int32_t)((i * 37 + 11) % 300);
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_PHI3);
  g.n_ctx = 256;
  g.n_ctx_orig = 64;
  char path[512];
  if (!ref_write_arch(&g, "phi3_long", path, sizeof path)) return;
  double e = ref_compare(REF, path, toks, N, MODEL_KV_F16, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-7);
}

/* Greedy 32 tokens after a 12-token prompt against numpy's
 * (ref_check_greedy). */
static void check_greedy(model_testgen_arch g, const char *name) {
  char path[512];
  if (ref_write_arch(&g, name, path, sizeof path))
    ref_check_greedy(REF, path, PROMPT, 12, 32, g.type != TENSOR_TYPE_F32);
}

TEST(model_llamalike_greedy_matches_numpy) {
  NEED_PY();
  static const enum model_arch archs[3] = {MODEL_ARCH_PHI3, MODEL_ARCH_GRANITE, MODEL_ARCH_SMOLLM3};
  static const char *names[3][2] = {{"phi3_greedy_f32", "phi3_greedy_f16"},
                                    {"granite_greedy_f32", "granite_greedy_f16"},
                                    {"smollm3_greedy_f32", "smollm3_greedy_f16"}};
  for (int a = 0; a < 3; a++)
    for (int f = 0; f < 2; f++) {
      model_testgen_arch g = model_testgen_arch_small(archs[a]);
      g.type = g.type_embd = f ? TENSOR_TYPE_F16 : TENSOR_TYPE_F32;
      g.seed = 40 + (uint64_t)(2 * a + f);
      check_greedy(g, names[a][f]);
    }
}

/* Two phi3 sequences longer than the window interleaved in one model_decode
 * in steps of 5 tokens, against numpy on each alone (both contexts 64, so
 * the long factors on both sides). */
TEST(model_phi3_sequences_match_numpy) {
  NEED_PY();
  enum { NA = 22, NB = 17 };
  const int32_t *A = PROMPT, *B = PROMPT + NA;
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_PHI3);
  g.seed = 60;
  if (!ref_write_arch(&g, "phi3_seqs", path, sizeof path)) return;
  ref_check_interleaved(REF, path, "phi3", A, NA, B, NB, 64);
}

/* ---- malformed files -------------------------------------------------------- */

TEST(model_llamalike_load_errors) {
  const model_testgen_arch p3 = model_testgen_arch_small(MODEL_ARCH_PHI3);
  const model_testgen_arch gr = model_testgen_arch_small(MODEL_ARCH_GRANITE);
  const model_testgen_arch sm = model_testgen_arch_small(MODEL_ARCH_SMOLLM3);
  model_testgen_arch g;
  /* fused tensors: missing, and one row too many (the whole tensor named) */
  g = p3;
  g.missing_tensor = "blk.1.attn_qkv.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "phi3_no_qkv"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.attn_qkv.weight' is missing");
  g = p3;
  g.bad_tensor = "blk.0.attn_qkv.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "phi3_bad_qkv"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_qkv.weight' has shape [64, 129], expected [64, 128]");
  g = p3;
  g.bad_tensor = "blk.1.ffn_up.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "phi3_bad_up"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ffn_up.weight' has shape [64, 321], expected [64, 320]");
  /* LongRoPE factors: one of the pair missing, a wrong length, values <= 0 */
  g = p3;
  g.missing_tensor = "rope_factors_short.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "phi3_no_short"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'rope_factors_short.weight' is missing");
  g = p3;
  g.bad_tensor = "rope_factors_long.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "phi3_bad_long_len"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'rope_factors_long.weight' has shape [7], expected [6]");
  g = p3;
  g.rope_factors = 2;
  EXPECT_INT_EQ(ref_open_arch(&g, "phi3_bad_long_vals"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'rope_factors_long.weight': factor 0 is -");
  g = p3;
  g.rope_attn_factor = -1.0f;
  EXPECT_INT_EQ(ref_open_arch(&g, "phi3_bad_mscale"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'phi3.rope.scaling.attn_factor' is -1");
  g = p3;
  g.n_ctx_orig = 1000; /* beyond the trained 128 */
  EXPECT_INT_EQ(ref_open_arch(&g, "phi3_bad_orig"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'phi3.rope.scaling.original_context_length' is 1000, expected 1..128");
  /* a window past the trained context (Phi-3.5's 262144 of 131072) never
   * slides: accepted as none */
  g = p3;
  g.sliding_window = 200;
  char path[512];
  model *m = NULL;
  ASSERT_TRUE(ref_write_arch(&g, "phi3_window_big", path, sizeof path));
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_layer_window(model_get_hparams(m), 0), 0);
  model_free(m);
  /* granite: the logit divisor is required, multipliers must be >= 0 */
  g = gr;
  g.logit_scale = 0;
  EXPECT_INT_EQ(ref_open_arch(&g, "granite_no_logit"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "key 'granite.logit_scale' is missing");
  g = gr;
  g.resid_scale = -0.5f;
  EXPECT_INT_EQ(ref_open_arch(&g, "granite_bad_resid"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'granite.residual_scale' is -0.5");
  g = gr;
  g.bad_tensor = "blk.1.ffn_gate.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "granite_bad_gate"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ffn_gate.weight' has shape [64, 161], expected [64, 160]");
  /* smollm3 */
  g = sm;
  g.missing_tensor = "blk.3.ffn_down.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "smollm3_no_down"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.3.ffn_down.weight' is missing");
}
