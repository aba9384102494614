/* test_model_gemma4.c - the gemma4 forward pass (src/model/gemma4.c)
 * against tools/ref_gemma4.py, an independent float64 numpy implementation
 * that runs token by token over its own per-layer key/value lists, on
 * random-weight files of two shapes written by src/model/testgen_gemma4.c:
 * the small one (E2B-like: sliding and full layers of different head
 * widths, the last three layers sharing the KV of layers 1 and 2, wider
 * shared layers, per-layer embeddings, output scales, full layers without
 * attn_v, a final soft cap) and a 31B-like one (no per-layer embeddings
 * or sharing, attn_v everywhere, one KV head, 7 layers). Prompts are longer
 * than the window 8. Then one-token and batched paths, greedy runs,
 * interleaved sequences and the catalogue of malformed files. */
#include "test.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen_arch.h"
#include "model_ref.h"

#define REF "tools/ref_gemma4.py"
#define NEED_PY() NEED_REF_PY(REF)

/* 30 tokens: almost four windows of 8. */
static const int32_t PROMPT[] = {1,  17, 42,  299, 3,  150, 150, 7,   88, 254, 0,  31,  64,  200, 5,
                                 9,  200, 14, 77,  3,  3,   150, 299, 100, 101, 102, 7,  8,   9,   250};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* 31B-like: every layer its own KV and attn_v, no per-layer embeddings,
 * output scales or soft cap, sliding heads of 32 beside full ones of 64,
 * 7 layers with the period 4 (three sliding, one full). */
static model_testgen_arch shape_b(void) {
  static const uint8_t swa[7] = {1, 1, 1, 0, 1, 1, 1};
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GEMMA4);
  g.n_embd = 96;
  g.n_head = 2;
  g.n_head_kv = 1;
  g.head_dim = 64;
  g.n_ff = 192;
  g.n_layer = 7;
  g.swa_layers = swa;
  g.final_softcap = 0.0f;
  g.g4.head_dim_swa = 32;
  g.g4.n_shared = 0;
  g.g4.n_pl = 0;
  g.g4.n_ff_shared = 0;
  g.g4.out_scale = false;
  g.g4.v_full = true;
  g.seed = 91;
  return g;
}

/* F32 weights: f32 rounding only; 1e-8 is far below what a window off by
 * one, a shared layer reading the wrong cache or a missing norm gives. */
static void check_logits(model_testgen_arch g, const char *name) {
  char path[512];
  if (!ref_write_arch(&g, name, path, sizeof path)) return;
  double e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F32, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F16, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
}

TEST(model_gemma4_f32_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GEMMA4);
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "gemma4_small", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const model_hparams *hp = model_get_hparams(m);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_GEMMA4);
  for (int l = 0; l < 6; l++) EXPECT_INT_EQ(model_layer_window(hp, l), l % 3 == 2 ? 0 : 8);
  EXPECT_INT_EQ(hp->head_dim, 32);     /* the cache's width: the full layers' */
  EXPECT_INT_EQ(hp->rope_swa.n_rot, 16);
  EXPECT_INT_EQ(hp->n_layer_kv, 3);    /* layers 3..5 share */
  EXPECT_INT_EQ(hp->n_ff, 320);
  EXPECT_NEAR(hp->rope_swa.freq_base, 1e4, 0);
  EXPECT_NEAR(hp->final_softcap, 8.0, 0);
  model_free(m);
  check_logits(g, "gemma4_small");
  check_logits(shape_b(), "gemma4_b");
}

TEST(model_gemma4_f16_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GEMMA4);
  g.type = g.type_embd = TENSOR_TYPE_F16;
  g.seed = 31;
  check_logits(g, "gemma4_f16");
}

/* The one-token path: logits of every prompt token run one at a time and
 * in steps of 5 are bit-identical to the whole prompt's (which matched
 * numpy above); then greedy continuations, one token per step, against
 * numpy's for F32 and F16 weights. */
TEST(model_gemma4_one_token_and_greedy_match_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GEMMA4);
  char path[512];
  if (ref_write_arch(&g, "gemma4_batch", path, sizeof path)) ref_check_batch(path, PROMPT, 20, MODEL_KV_F32, "gemma4");
  for (int f = 0; f < 2; f++) {
    g = model_testgen_arch_small(MODEL_ARCH_GEMMA4);
    g.type = g.type_embd = f ? TENSOR_TYPE_F16 : TENSOR_TYPE_F32;
    g.seed = 40 + (uint64_t)f;
    if (ref_write_arch(&g, f ? "gemma4_greedy_f16" : "gemma4_greedy_f32", path, sizeof path))
      ref_check_greedy(REF, path, PROMPT, 10, 32, f != 0);
  }
}

/* Two sequences longer than the window interleaved in one model_decode in
 * steps of 5 tokens: the shared layers read each sequence's own source
 * cache. */
TEST(model_gemma4_sequences_match_numpy) {
  NEED_PY();
  enum { NA = 17, NB = 13 };
  const int32_t *A = PROMPT, *B = PROMPT + NA;
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_GEMMA4);
  g.seed = 60;
  if (!ref_write_arch(&g, "gemma4_seqs", path, sizeof path)) return;
  ref_check_interleaved(REF, path, "gemma4", A, NA, B, NB, 64);
}

/* ---- malformed files -------------------------------------------------------- */

TEST(model_gemma4_load_errors) {
  const model_testgen_arch g0 = model_testgen_arch_small(MODEL_ARCH_GEMMA4);
  model_testgen_arch g;
  /* missing tensors: a KV layer's k norm, the per-layer embedding norm,
   * a per-layer gate */
  g = g0;
  g.missing_tensor = "blk.1.attn_k_norm.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "gemma4_no_knorm"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "blk.1.attn_k_norm.weight");
  g = g0;
  g.missing_tensor = "per_layer_proj_norm.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "gemma4_no_plnorm"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "per_layer_proj_norm.weight");
  g = g0;
  g.missing_tensor = "blk.4.inp_gate.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "gemma4_no_inpgate"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "blk.4.inp_gate.weight");
  /* a sliding layer's q norm of the full layers' width */
  g = g0;
  g.bad_tensor = "blk.0.attn_q_norm.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "gemma4_bad_qnorm"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_q_norm.weight' has shape [17], expected [16]");
  /* bad head widths: an odd sliding width cannot be rotated */
  g = g0;
  g.g4.head_dim_swa = 15;
  EXPECT_INT_EQ(ref_open_arch(&g, "gemma4_odd_swa"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "gemma4.rope.dimension_count_swa' is 15, expected an even number");
  /* shared KV layers: all of them, and a count whose sources are of the
   * wrong kind (n_kv 4: sliding layer 4 would read full layer 2) */
  g = g0;
  g.g4.n_shared = 6;
  EXPECT_INT_EQ(ref_open_arch(&g, "gemma4_all_shared"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'gemma4.attention.shared_kv_layers' is 6, expected less than block_count 6");
  g = g0;
  g.g4.n_shared = 2;
  g.g4.n_ff_shared = 0;
  EXPECT_INT_EQ(ref_open_arch(&g, "gemma4_shared_kind"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "sliding layer 4 would read the cache of layer 2, which is not a sliding layer");
  /* the window larger than the context */
  g = g0;
  g.sliding_window = 200;
  EXPECT_INT_EQ(ref_open_arch(&g, "gemma4_window_big"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'gemma4.attention.sliding_window' is 200, expected 1..128");
}
