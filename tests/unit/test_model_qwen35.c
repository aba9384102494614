/* test_model_qwen35.c - the Qwen3.5 / Qwen3-Next hybrids (src/model/qwen35.c:
 * qwen35, qwen35moe, qwen3next) against tools/ref_qwen35.py, an independent
 * float64 numpy implementation in the token-by-token recurrent form, on
 * random-weight files of two shapes each (testgen_qwen35.c): the chunked
 * prompt path (one call, several delta-rule chunks and a remainder) and the
 * one-token path both; greedy decoding on F32 and F16 weights; two
 * sequences in one batch that must never share state; a conversation
 * resumed from a state checkpoint against a full recomputation; and the
 * catalogue of malformed files. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen_arch.h"
#include "model_ref.h"

#define REF "tools/ref_qwen35.py"
#define NEED_PY() NEED_REF_PY(REF)

/* 150 tokens: more than two chunks of the delta rule's 64 and a remainder */
enum { N_LONG = 150, N_PROMPT = 40 };
static int32_t LONG[N_LONG];
static const int32_t *prompt(void) {
  uint32_t s = 12345;
  for (int i = 0; i < N_LONG; i++) {
    s = s * 1103515245u + 12345u;
    LONG[i] = (int32_t)((s >> 8) % 300);
  }
  return LONG;
}

/* The second shape: wider, 6 layers attending at 2 and 5 (interval 3), 3
 * key heads of 8 and 6 value heads of 12 (d_k != d_v), 3 taps, untied, and
 * M-RoPE sections 1/1/1/1 so the fourth rotated pair is a text token's
 * fourth axis (position 0: it never turns). */
static model_testgen_arch shape_b(enum model_arch a) {
  model_testgen_arch g = model_testgen_arch_small(a);
  g.n_embd = 96;
  g.n_head = 6;
  g.n_head_kv = 2;
  g.n_layer = 6;
  g.n_ff = 128;
  g.d_conv = 3;
  g.gdn.d_state = 8;
  g.gdn.n_group = 3;
  g.gdn.dt_rank = 6;
  g.gdn.d_inner = 72;
  g.gdn.interval = 3;
  if (a != MODEL_ARCH_QWEN3NEXT) g.gdn.sections[0] = g.gdn.sections[1] = g.gdn.sections[2] = g.gdn.sections[3] = 1;
  g.tied = !g.tied;
  g.n_ctx = 256;
  g.rope_freq_base = 1000000.0f;
  if (testgen_moe_arch(a)) {
    g.n_expert = 8;
    g.n_expert_used = 3;
    g.n_ff_exp = 40;
  }
  g.seed = 77;
  return g;
}

/* F32 weights and cache: the bar is 1e-4 NMSE; held at 1e-8 so a
 * head mapped to the wrong key head, a gate or a state off by one (all
 * ~1e-1) cannot hide. The whole prompt in one call (chunks of 64 and a
 * remainder), the F16 cache (numpy rounds keys and values alike), and one
 * token per call. */
static void check_shape(model_testgen_arch g, const char *name) {
  const int32_t *toks = prompt();
  char path[512];
  if (!ref_write_arch(&g, name, path, sizeof path)) return;
  double e = ref_compare(REF, path, toks, N_LONG, MODEL_KV_F32, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = ref_compare(REF, path, toks, N_PROMPT, MODEL_KV_F16, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-7);
  ref_check_one_token(REF, path, name, toks, N_PROMPT, 1e-8);
}

TEST(model_qwen35_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN35);
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "qwen35_small", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const model_hparams *hp = model_get_hparams(m);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_QWEN35);
  EXPECT_TRUE(model_is_recurrent(m));
  EXPECT_INT_EQ(hp->n_layer_kv, 1); /* layer 3 of 4 */
  EXPECT_INT_EQ(hp->n_layer_rs, 3);
  /* convolution tail 3 x (2 x 32 + 64) and 4 value heads of 16 x 16 */
  EXPECT_INT_EQ(hp->rs_floats, 3 * 128 + 4 * 16 * 16);
  model_ctx *c = ref_new_ctx(m, 2, 0, MODEL_KV_F32);
  ASSERT_TRUE(c != NULL);
  EXPECT_INT_EQ(model_ctx_rs_bytes(c), 2 * 3 * (3 * 128 + 4 * 256) * 4);
  model_ctx_free(c);
  model_free(m);
  check_shape(g, "qwen35_small");
  check_shape(shape_b(MODEL_ARCH_QWEN35), "qwen35_b");
}

/* The same for the two rows with experts (a sigmoid-gated shared expert on
 * every layer): qwen35moe (tiled value heads, sections) and qwen3next
 * (fused ssm_ba, grouped value heads, plain NeoX RoPE). */
TEST(model_qwen35_moe_rows_match_numpy) {
  NEED_PY();
  check_shape(model_testgen_arch_small(MODEL_ARCH_QWEN35MOE), "qwen35moe_small");
  check_shape(shape_b(MODEL_ARCH_QWEN35MOE), "qwen35moe_b");
  check_shape(model_testgen_arch_small(MODEL_ARCH_QWEN3NEXT), "qwen3next_small");
  check_shape(shape_b(MODEL_ARCH_QWEN3NEXT), "qwen3next_b");
}

/* 32 greedy tokens after a 12-token prompt, C (one decode call per token)
 * and numpy, on F32 and F16 weights, for qwen35 and qwen3next. */
TEST(model_qwen35_greedy_matches_numpy) {
  NEED_PY();
  enum { N_GEN = 32 };
  const uint32_t types[2] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16};
  const enum model_arch archs[2] = {MODEL_ARCH_QWEN35, MODEL_ARCH_QWEN3NEXT};
  for (int ai = 0; ai < 2; ai++)
    for (int ti = 0; ti < 2; ti++) {
      model_testgen_arch g = shape_b(archs[ai]);
      g.type = g.type_embd = types[ti];
      char path[512], name[64];
      snprintf(name, sizeof name, "%s_greedy_%s", model_arch_name(archs[ai]), ti ? "f16" : "f32");
      ASSERT_TRUE(ref_write_arch(&g, name, path, sizeof path));
      ref_check_greedy(REF, path, prompt(), 12, N_GEN, false);
    }
}

/* Two sequences in the batches of continuous batching (a prompt chunk of
 * one next to the other's, then single tokens of both, steps of 5 tokens
 * splitting the runs): each sequence's logits are those it has alone. */
TEST(model_qwen35_sequences_never_share_state) {
  model_testgen_arch g = shape_b(MODEL_ARCH_QWEN35);
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "qwen35_seqs", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const int64_t V = model_get_hparams(m)->n_vocab;
  enum { NA = 20, NB = 14 };
  const int32_t *A = prompt(), *B = prompt() + 23;
  float *solo_a = ref_one_token_logits(m, A, NA, MODEL_KV_F32), *solo_b = ref_one_token_logits(m, B, NB, MODEL_KV_F32);
  ASSERT_TRUE(solo_a && solo_b);
  model_ctx *c = ref_new_ctx(m, 2, 5, MODEL_KV_F32);
  ASSERT_TRUE(c != NULL);
  float *lg = malloc((size_t)(NA + NB) * (size_t)V * sizeof *lg);
  float *ra = malloc((size_t)NA * (size_t)V * sizeof *ra), *rb = malloc((size_t)NB * (size_t)V * sizeof *rb);
  int32_t tok[64], seq[64];
  int n = 0, ia = 0, ib = 0;
  for (int i = 0; i < 8; i++) tok[n] = A[i], seq[n++] = 0; /* batch 1: A[0..8) alone */
  for (int round = 0; n > 0; round++) {
    model_batch b = {.n = n, .tokens = tok, .seq = seq, .logits = MODEL_LOGITS_ALL};
    ASSERT_INT_EQ(model_decode(c, &b, lg), 0);
    for (int k = 0; k < n; k++) {
      float *dst = seq[k] ? rb + (size_t)ib++ * (size_t)V : ra + (size_t)ia++ * (size_t)V;
      memcpy(dst, lg + (size_t)k * (size_t)V, (size_t)V * sizeof *lg);
    }
    n = 0;
    if (round == 0) { /* batch 2: B[0..6) interleaved with A[8..12) */
      for (int i = 0; i < 6; i++) {
        tok[n] = B[i], seq[n++] = 1;
        if (i < 4) tok[n] = A[8 + i], seq[n++] = 0;
      }
    } else { /* then one token of each until both end */
      if (ia < NA) tok[n] = A[ia], seq[n++] = 0;
      if (ib < NB) tok[n] = B[ib], seq[n++] = 1;
    }
  }
  double ea = ref_nmse(ra, solo_a, (size_t)NA * (size_t)V), eb = ref_nmse(rb, solo_b, (size_t)NB * (size_t)V);
  printf("    two sequences against each alone: nmse %.3g, %.3g\n", ea, eb);
  EXPECT_TRUE(ea < 1e-10 && eb < 1e-10);
  free(ra);
  free(rb);
  free(lg);
  free(solo_a);
  free(solo_b);
  model_ctx_free(c);
  model_free(m);
}

/* A conversation resumed from a checkpoint (model_ctx_seq_state_save at a
 * chunk end, the sequence run on past it with another history, restored
 * and continued differently) gives the logits of a full recomputation of
 * that conversation: numpy's, and bit for bit a fresh context fed the same
 * chunks; the state moved on in between, so a restore that did nothing
 * would show. */
TEST(model_qwen35_checkpoint_resume_matches_fresh) {
  NEED_PY();
  model_testgen_arch g = shape_b(MODEL_ARCH_QWEN35);
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "qwen35_ckpt", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const model_hparams *hp = model_get_hparams(m);
  const int64_t V = hp->n_vocab;
  const size_t per = (size_t)model_rs_seq_bytes(hp);
  enum { P = 14, NX = 12 };
  const int32_t *T = prompt(), *X = T + 60;
  int32_t full[P + NX];
  memcpy(full, T, P * sizeof *full);
  memcpy(full + P, X, NX * sizeof *full);
  model_ctx *c = ref_new_ctx(m, 1, 0, MODEL_KV_F32), *f = ref_new_ctx(m, 1, 0, MODEL_KV_F32);
  ASSERT_TRUE(c && f);
  float *lg = malloc((size_t)(P + NX) * (size_t)V * sizeof *lg), *fresh = malloc((size_t)(P + NX) * (size_t)V * sizeof *fresh);
  void *ck = malloc(per), *other = malloc(per);
  ASSERT_TRUE(lg && fresh && ck && other);
  ASSERT_INT_EQ(model_forward(c, T, 7, 0, NULL, MODEL_LOGITS_NONE), 0);
  ASSERT_INT_EQ(model_forward(c, T + 7, 7, 7, NULL, MODEL_LOGITS_NONE), 0);
  ASSERT_INT_EQ(model_ctx_seq_state_save(c, 0, ck), 0);
  ASSERT_INT_EQ(model_forward(c, T + P, 30, P, NULL, MODEL_LOGITS_NONE), 0); /* another history */
  ASSERT_INT_EQ(model_ctx_seq_state_save(c, 0, other), 0);
  EXPECT_TRUE(memcmp(ck, other, per) != 0);
  ASSERT_INT_EQ(model_ctx_seq_state_restore(c, 0, P, ck), 0);
  EXPECT_INT_EQ(model_ctx_n_past(c), P);
  ASSERT_INT_EQ(model_forward(f, T, 7, 0, NULL, MODEL_LOGITS_NONE), 0);
  ASSERT_INT_EQ(model_forward(f, T + 7, 7, 7, NULL, MODEL_LOGITS_NONE), 0);
  for (int i = 0; i < NX; i += 5) { /* the new turn in chunks of 5 on both */
    int k = NX - i < 5 ? NX - i : 5;
    ASSERT_INT_EQ(model_forward(c, X + i, k, P + i, lg + (size_t)(P + i) * (size_t)V, MODEL_LOGITS_ALL), 0);
    ASSERT_INT_EQ(model_forward(f, X + i, k, P + i, fresh + (size_t)(P + i) * (size_t)V, MODEL_LOGITS_ALL), 0);
  }
  EXPECT_MEM_EQ(lg + (size_t)P * (size_t)V, fresh + (size_t)P * (size_t)V, (size_t)NX * (size_t)V * sizeof *lg);
  float *ref = ref_logits(REF, path, full, P + NX, V, false);
  ASSERT_TRUE(ref != NULL);
  double e = ref_nmse(lg + (size_t)P * (size_t)V, ref + (size_t)P * (size_t)V, (size_t)NX * (size_t)V);
  printf("    resumed from the checkpoint at %d against numpy: nmse %.3g\n", P, e);
  EXPECT_TRUE(e < 1e-8);
  free(ref);
  free(lg);
  free(fresh);
  free(ck);
  free(other);
  model_ctx_free(c);
  model_ctx_free(f);
  model_free(m);
}

TEST(model_qwen35_load_errors) {
  const model_testgen_arch s = model_testgen_arch_small(MODEL_ARCH_QWEN35);
  model_testgen_arch g = s;
  g.missing_tensor = "blk.1.ssm_conv1d.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_no_conv"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ssm_conv1d.weight' is missing");
  g = s;
  g.missing_tensor = "blk.0.ssm_a";
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_no_a"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ssm_a' is missing");
  g = s;
  g.missing_tensor = "blk.3.attn_q_norm.weight"; /* the attention layer */
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_no_qnorm"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.3.attn_q_norm.weight' is missing");
  g = s;
  g.missing_tensor = "blk.2.post_attention_norm.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_no_post"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.2.post_attention_norm.weight' is missing");
  g = s;
  g.bad_tensor = "blk.0.attn_qkv.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_bad_qkv"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_qkv.weight' has shape [64, 129], expected [64, 128]");
  g = s;
  g.bad_tensor = "blk.3.attn_q.weight"; /* the gated q must be 2 x n_head x head_dim rows */
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_bad_q"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.3.attn_q.weight' has shape [64, 129], expected [64, 128]");
  g = s;
  g.bad_tensor = "blk.1.ssm_norm.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_bad_norm"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ssm_norm.weight' has shape");
  g = s;
  g.gdn.interval = -1; /* written as 0 */
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_interval0"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'qwen35.full_attention_interval' is 0, expected 1..4");
  g = s;
  g.gdn.interval = 5; /* more than the layers */
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_interval5"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "full_attention_interval' is 5");
  g = s;
  g.gdn.dt_rank = 3; /* value heads not a multiple of the key heads */
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_heads"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "is not a multiple of ssm.group_count 2");
  g = s;
  g.gdn.positive_a = true;
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_pos_a"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ssm_a' entry 0 is");
  g = s;
  memset(g.gdn.sections, 0, sizeof g.gdn.sections);
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_no_sections"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "key 'qwen35.rope.dimension_sections' is missing");
  g = s;
  g.d_conv = 9;
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_taps9"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'qwen35.ssm.conv_kernel' is 9, expected 2..8");
  /* qwen3next: its fused beta/alpha; the MoE rows' experts */
  model_testgen_arch n = model_testgen_arch_small(MODEL_ARCH_QWEN3NEXT);
  n.missing_tensor = "blk.0.ssm_ba.weight";
  EXPECT_INT_EQ(ref_open_arch(&n, "q3n_no_ba"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ssm_ba.weight' is missing");
  n = model_testgen_arch_small(MODEL_ARCH_QWEN3NEXT);
  n.missing_tensor = "blk.2.ffn_gate_inp_shexp.weight";
  EXPECT_INT_EQ(ref_open_arch(&n, "q3n_no_shgate"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "ffn_gate_inp_shexp");
  n = model_testgen_arch_small(MODEL_ARCH_QWEN35MOE);
  n.missing_tensor = "blk.1.ffn_down_exps.weight";
  EXPECT_INT_EQ(ref_open_arch(&n, "q35m_no_down"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "blk.1.ffn_down_exps.weight");
  /* every layer attending (interval 1) is still a valid file, with no state */
  g = s;
  g.gdn.interval = 1;
  EXPECT_INT_EQ(ref_open_arch(&g, "q35_all_attn"), 0);
}
