/* test_model_lfm2.c - the lfm2 forward pass (src/model/lfm2.c) and the
 * per-sequence recurrent state it keeps (model.c) against
 * tools/ref_lfm2.py, an independent float64 numpy implementation in the
 * token-by-token recurrent form, on random-weight files of two shapes
 * (testgen_arch.c): the chunked prompt path and the one-token path both,
 * greedy decoding on F32 and F16 weights, two sequences in one batch that
 * must never share state, the rules of a state that cannot rewind, and the
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

#define REF "tools/ref_lfm2.py"
#define NEED_PY() NEED_REF_PY(REF)

static const int32_t PROMPT[] = {1,  17, 42,  299, 3,  150, 150, 7,   88, 254, 0,  31,  64,  200,
                                 5,  9,  200, 14,  77, 3,   3,   150, 299, 100, 101, 102, 7, 8,
                                 9,  250, 33, 44,  55, 66,  77,  88,  99,  111, 222, 12};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* The second shape: wider, 6 layers with two attention layers (1 and 4,
 * as LFM2 spreads them), one KV head, 4 taps, untied output. */
static model_testgen_arch shape_b(void) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_LFM2);
  g.n_embd = 128;
  g.n_head = 8;
  g.n_head_kv = 1;
  g.n_ff = 192;
  g.n_layer = 6;
  g.attn_layers = (1u << 1) | (1u << 4);
  g.d_conv = 4;
  g.tied = false;
  g.n_ctx = 256;
  g.rope_freq_base = 1000000.0f;
  g.seed = 91;
  return g;
}

/* F32 weights and cache: f32 rounding only; the bar is 1e-4, held
 * at 1e-8 so that a tap off by one or a state not carried (both ~1e-1)
 * cannot hide. The F16 cache: numpy rounds the same keys and values. */
static void check_shape(model_testgen_arch g, const char *name) {
  char path[512];
  if (!ref_write_arch(&g, name, path, sizeof path)) return;
  double e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F32, 2); /* one chunk */
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F16, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-7);
  ref_check_one_token(REF, path, name, PROMPT, N_PROMPT, 1e-8);
}

TEST(model_lfm2_matches_numpy) {
  NEED_PY();
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_LFM2);
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "lfm2_small", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const model_hparams *hp = model_get_hparams(m);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_LFM2);
  EXPECT_TRUE(model_is_recurrent(m));
  EXPECT_INT_EQ(hp->n_layer_kv, 1);
  EXPECT_INT_EQ(hp->n_layer_rs, 3);
  EXPECT_INT_EQ(hp->rs_floats, 2 * 64); /* (taps - 1) x n_embd */
  EXPECT_INT_EQ(hp->n_head_kv, 2);
  model_ctx *c = ref_new_ctx(m, 3, 0, MODEL_KV_F32);
  ASSERT_TRUE(c != NULL);
  /* one attention layer's cache: 3 sequences x k and v x 2 kv heads x 128
   * positions x 16 floats; the state: 3 x 3 layers x 128 floats */
  EXPECT_INT_EQ(model_ctx_kv_bytes(c), 3 * 2 * 2 * 128 * 16 * 4);
  EXPECT_INT_EQ(model_ctx_rs_bytes(c), 3 * 3 * 128 * 4);
  model_ctx_free(c);
  model_free(m);
  check_shape(g, "lfm2_small");
  check_shape(shape_b(), "lfm2_b");
}

/* 32 greedy tokens after the prompt, C (one decode call per token) and
 * numpy, on F32 and F16 weights. */
TEST(model_lfm2_greedy_matches_numpy) {
  NEED_PY();
  enum { N_GEN = 32, N_P = 12 };
  const uint32_t types[2] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16};
  for (int ti = 0; ti < 2; ti++) {
    model_testgen_arch g = shape_b();
    g.type = g.type_embd = types[ti];
    char path[512];
    ASSERT_TRUE(ref_write_arch(&g, ti ? "lfm2_greedy_f16" : "lfm2_greedy_f32", path, sizeof path));
    int32_t want[N_GEN];
    ASSERT_INT_EQ(ref_greedy(REF, path, PROMPT, N_P, N_GEN, false, want), N_GEN);
    model *m = NULL;
    ASSERT_INT_EQ(model_open(path, &m), 0);
    model_ctx *c = ref_new_ctx(m, 1, 0, MODEL_KV_F32);
    ASSERT_TRUE(c != NULL);
    const int64_t V = model_get_hparams(m)->n_vocab;
    float *lg = malloc((size_t)V * sizeof *lg);
    ASSERT_INT_EQ(model_forward(c, PROMPT, N_P, 0, lg, MODEL_LOGITS_LAST), 0);
    int same = 0;
    for (int i = 0; i < N_GEN; i++) {
      int32_t best = 0;
      for (int64_t v = 1; v < V; v++)
        if (lg[v] > lg[best]) best = (int32_t)v;
      same += best == want[i];
      if (best != want[i]) break;
      ASSERT_INT_EQ(model_forward(c, &best, 1, N_P + i, lg, MODEL_LOGITS_LAST), 0);
    }
    printf("    lfm2 %s: %d of %d greedy tokens as numpy\n", ti ? "f16" : "f32", same, N_GEN);
    EXPECT_INT_EQ(same, N_GEN);
    free(lg);
    model_ctx_free(c);
    model_free(m);
  }
}

/* Two sequences in the batches of continuous batching (a prompt chunk of
 * one next to the other's, then single tokens of both, steps of 5 tokens
 * splitting the runs): each sequence's logits are those it has alone. */
TEST(model_lfm2_sequences_never_share_state) {
  model_testgen_arch g = shape_b();
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "lfm2_seqs", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const int64_t V = model_get_hparams(m)->n_vocab;
  enum { NA = 20, NB = 14 };
  const int32_t *A = PROMPT, *B = PROMPT + 23;
  float *solo_a = ref_one_token_logits(m, A, NA, MODEL_KV_F32), *solo_b = ref_one_token_logits(m, B, NB, MODEL_KV_F32);
  ASSERT_TRUE(solo_a && solo_b);
  model_ctx *c = ref_new_ctx(m, 2, 5, MODEL_KV_F32);
  ASSERT_TRUE(c != NULL);
  float *lg = malloc((size_t)(NA + NB) * (size_t)V * sizeof *lg);
  /* batch 1: A[0..8) alone */
  int32_t tok[64], seq[64];
  int n = 0;
  for (int i = 0; i < 8; i++) tok[n] = A[i], seq[n++] = 0;
  model_batch b = {.n = n, .tokens = tok, .seq = seq, .logits = MODEL_LOGITS_ALL};
  ASSERT_INT_EQ(model_decode(c, &b, lg), 0);
  double worst = ref_nmse(lg, solo_a, 8 * (size_t)V);
  /* batch 2: B[0..6) interleaved with A[8..12) */
  n = 0;
  for (int i = 0; i < 6; i++) {
    tok[n] = B[i], seq[n++] = 1;
    if (i < 4) tok[n] = A[8 + i], seq[n++] = 0;
  }
  b.n = n;
  ASSERT_INT_EQ(model_decode(c, &b, lg), 0);
  float *ra = malloc((size_t)NA * (size_t)V * sizeof *ra), *rb = malloc((size_t)NB * (size_t)V * sizeof *rb);
  int ia = 8, ib = 0;
  for (int k = 0; k < n; k++) {
    float *dst = seq[k] ? rb + (size_t)ib++ * (size_t)V : ra + (size_t)ia++ * (size_t)V;
    memcpy(dst, lg + (size_t)k * (size_t)V, (size_t)V * sizeof *lg);
  }
  /* then one token of each per batch until both end */
  while (ia < NA || ib < NB) {
    n = 0;
    if (ia < NA) tok[n] = A[ia], seq[n++] = 0;
    if (ib < NB) tok[n] = B[ib], seq[n++] = 1;
    b.n = n;
    ASSERT_INT_EQ(model_decode(c, &b, lg), 0);
    for (int k = 0; k < n; k++) {
      float *dst = seq[k] ? rb + (size_t)ib++ * (size_t)V : ra + (size_t)ia++ * (size_t)V;
      memcpy(dst, lg + (size_t)k * (size_t)V, (size_t)V * sizeof *lg);
    }
  }
  double ea = ref_nmse(ra + 8 * (size_t)V, solo_a + 8 * (size_t)V, (size_t)(NA - 8) * (size_t)V);
  double eb = ref_nmse(rb, solo_b, (size_t)NB * (size_t)V);
  if (ea > worst) worst = ea;
  if (eb > worst) worst = eb;
  printf("    two sequences against each alone: nmse %.3g\n", worst);
  EXPECT_TRUE(worst < 1e-10);
  free(ra);
  free(rb);
  free(lg);
  free(solo_a);
  free(solo_b);
  model_ctx_free(c);
  model_free(m);
}

/* The state cannot rewind: a position inside the sequence is refused,
 * truncation and position 0 restart it empty (the same logits as a fresh
 * context), a copy is of the whole sequence only, and a copied sequence
 * continues as its source does. */
TEST(model_lfm2_state_rules) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_LFM2);
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "lfm2_rules", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const int64_t V = model_get_hparams(m)->n_vocab;
  model_ctx *c = ref_new_ctx(m, 2, 0, MODEL_KV_F32);
  ASSERT_TRUE(c != NULL);
  float *fresh = malloc((size_t)V * sizeof *fresh), *lg = malloc((size_t)V * sizeof *lg),
        *lg2 = malloc((size_t)V * sizeof *lg2);
  ASSERT_INT_EQ(model_forward(c, PROMPT, 10, 0, fresh, MODEL_LOGITS_LAST), 0);
  EXPECT_INT_EQ(model_forward(c, PROMPT + 5, 5, 5, lg, MODEL_LOGITS_LAST), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "cannot rewind");
  EXPECT_INT_EQ(model_ctx_n_past(c), 10);
  int32_t seq1[1] = {0};
  int64_t pos5[1] = {5};
  model_batch rb = {.n = 1, .tokens = PROMPT + 5, .seq = seq1, .pos = pos5};
  EXPECT_INT_EQ(model_decode(c, &rb, lg), ERR_RANGE);
  /* position 0 restarts: same logits as the first time */
  ASSERT_INT_EQ(model_forward(c, PROMPT, 10, 0, lg, MODEL_LOGITS_LAST), 0);
  EXPECT_MEM_EQ(lg, fresh, (size_t)V * sizeof *lg);
  /* truncating to a proper prefix forgets everything */
  model_ctx_truncate(c, 4);
  EXPECT_INT_EQ(model_ctx_n_past(c), 0);
  ASSERT_INT_EQ(model_forward(c, PROMPT, 10, 0, lg, MODEL_LOGITS_LAST), 0);
  EXPECT_MEM_EQ(lg, fresh, (size_t)V * sizeof *lg);
  /* copies: a prefix is refused, the whole sequence continues alike */
  EXPECT_INT_EQ(model_ctx_seq_copy(c, 1, 0, 6), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "state only for the whole sequence");
  ASSERT_INT_EQ(model_ctx_seq_copy(c, 1, 0, 10), 0);
  EXPECT_INT_EQ(model_ctx_seq_n_past(c, 1), 10);
  int32_t s0 = 0, s1 = 1;
  model_batch b0 = {.n = 1, .tokens = PROMPT + 10, .seq = &s0};
  model_batch b1 = {.n = 1, .tokens = PROMPT + 10, .seq = &s1};
  ASSERT_INT_EQ(model_decode(c, &b0, lg), 0);
  ASSERT_INT_EQ(model_decode(c, &b1, lg2), 0);
  EXPECT_MEM_EQ(lg, lg2, (size_t)V * sizeof *lg);
  /* and the copy is a copy: advancing sequence 1 leaves 0 as it was */
  model_batch b1b = {.n = 1, .tokens = PROMPT + 30, .seq = &s1};
  ASSERT_INT_EQ(model_decode(c, &b1b, lg2), 0);
  model_batch b0b = {.n = 1, .tokens = PROMPT + 11, .seq = &s0};
  ASSERT_INT_EQ(model_decode(c, &b0b, lg), 0);
  float *alone = ref_one_token_logits(m, PROMPT, 12, MODEL_KV_F32);
  ASSERT_TRUE(alone != NULL);
  EXPECT_TRUE(ref_nmse(lg, alone + 11 * (size_t)V, (size_t)V) < 1e-12);
  free(alone);
  free(fresh);
  free(lg);
  free(lg2);
  model_ctx_free(c);
  model_free(m);
}

TEST(model_lfm2_load_errors) {
  const model_testgen_arch s = model_testgen_arch_small(MODEL_ARCH_LFM2);
  model_testgen_arch g = s;
  g.missing_tensor = "blk.1.shortconv.conv.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "lfm2_no_conv"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.shortconv.conv.weight' is missing");
  g = s;
  g.bad_tensor = "blk.0.shortconv.in_proj.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "lfm2_bad_in"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.shortconv.in_proj.weight' has shape [64, 193], expected [64, 192]");
  g = s;
  g.bad_tensor = "blk.3.shortconv.conv.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "lfm2_bad_taps"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.3.shortconv.conv.weight' has shape");
  g = s;
  g.missing_tensor = "blk.2.attn_q_norm.weight"; /* the attention layer */
  EXPECT_INT_EQ(ref_open_arch(&g, "lfm2_no_qnorm"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.2.attn_q_norm.weight' is missing");
  g = s;
  g.missing_tensor = "token_embd_norm.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "lfm2_no_norm"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'token_embd_norm.weight' is missing");
  g = s;
  g.d_conv = 9; /* more taps than the kernel takes */
  EXPECT_INT_EQ(ref_open_arch(&g, "lfm2_taps9"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'lfm2.shortconv.l_cache' is 9, expected 2..8");
  /* every layer a convolution (head_count_kv all 0): no KV cache, still
   * a valid file */
  g = s;
  g.attn_layers = 0; /* no attention layer at all: still a valid lfm2 */
  EXPECT_INT_EQ(ref_open_arch(&g, "lfm2_all_conv"), 0);
}

/* Checkpoints (model_ctx_seq_state_save / _restore): a sequence saved at a
 * chunk end, run on past it with another history, then restored there and
 * continued differently gives the logits of that continuation computed from
 * scratch - against numpy (the token-by-token reference) and bit for bit
 * against a fresh context fed the same chunks; restoring one sequence
 * leaves the other alone; bad calls are refused by name. */
TEST(model_lfm2_checkpoint_resume_matches_fresh) {
  NEED_PY();
  model_testgen_arch g = shape_b();
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "lfm2_ckpt", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const model_hparams *hp = model_get_hparams(m);
  const int64_t V = hp->n_vocab;
  const size_t per = (size_t)model_rs_seq_bytes(hp);
  EXPECT_INT_EQ((int64_t)per, 4 * (int64_t)sizeof(float) * (g.d_conv - 1) * g.n_embd);
  enum { P = 14, NX = 12 };
  const int32_t *X = PROMPT + 26; /* the continuation after the checkpoint */
  int32_t full[P + NX];
  memcpy(full, PROMPT, P * sizeof *full);
  memcpy(full + P, X, NX * sizeof *full);
  model_ctx *c = ref_new_ctx(m, 2, 0, MODEL_KV_F32);
  ASSERT_TRUE(c != NULL);
  float *lg = malloc((size_t)(P + NX) * (size_t)V * sizeof *lg);
  float *fresh = malloc((size_t)(P + NX) * (size_t)V * sizeof *fresh);
  void *ck = malloc(per), *ck1 = malloc(per), *other = malloc(per);
  ASSERT_TRUE(lg && fresh && ck && ck1 && other);
  /* sequence 1 holds its own history throughout */
  int32_t seq1[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  model_batch b1 = {.n = 9, .tokens = PROMPT + 3, .seq = seq1, .logits = MODEL_LOGITS_NONE};
  ASSERT_INT_EQ(model_decode(c, &b1, NULL), 0);
  ASSERT_INT_EQ(model_ctx_seq_state_save(c, 1, ck1), 0);
  /* sequence 0: chunks of 7 to P, checkpoint, then another history to 26 */
  ASSERT_INT_EQ(model_forward(c, PROMPT, 7, 0, lg, MODEL_LOGITS_ALL), 0);
  ASSERT_INT_EQ(model_forward(c, PROMPT + 7, 7, 7, lg + 7 * (size_t)V, MODEL_LOGITS_ALL), 0);
  ASSERT_INT_EQ(model_ctx_seq_state_save(c, 0, ck), 0);
  ASSERT_INT_EQ(model_forward(c, PROMPT + P, 26 - P, P, NULL, MODEL_LOGITS_NONE), 0);
  ASSERT_INT_EQ(model_ctx_seq_state_save(c, 0, other), 0);
  EXPECT_TRUE(memcmp(ck, other, per) != 0); /* the state moved on */
  /* refused: past n_past, a sequence out of range */
  EXPECT_INT_EQ(model_ctx_seq_state_restore(c, 0, 27, ck), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "holds 26");
  EXPECT_INT_EQ(model_ctx_seq_state_restore(c, 2, 3, ck), ERR_RANGE);
  EXPECT_INT_EQ(model_ctx_seq_state_save(c, -1, ck), ERR_RANGE);
  /* restore to P and continue with X in chunks of 5 */
  ASSERT_INT_EQ(model_ctx_seq_state_restore(c, 0, P, ck), 0);
  EXPECT_INT_EQ(model_ctx_n_past(c), P);
  for (int i = 0; i < NX; i += 5) {
    int k = NX - i < 5 ? NX - i : 5;
    ASSERT_INT_EQ(model_forward(c, X + i, k, P + i, lg + (size_t)(P + i) * (size_t)V, MODEL_LOGITS_ALL), 0);
  }
  /* sequence 1 was not touched */
  ASSERT_INT_EQ(model_ctx_seq_state_save(c, 1, other), 0);
  EXPECT_MEM_EQ(other, ck1, per);
  EXPECT_INT_EQ(model_ctx_seq_n_past(c, 1), 9);
  /* the same chunks in a fresh context */
  model_ctx *f = ref_new_ctx(m, 1, 0, MODEL_KV_F32);
  ASSERT_TRUE(f != NULL);
  ASSERT_INT_EQ(model_forward(f, PROMPT, 7, 0, fresh, MODEL_LOGITS_ALL), 0);
  ASSERT_INT_EQ(model_forward(f, PROMPT + 7, 7, 7, fresh + 7 * (size_t)V, MODEL_LOGITS_ALL), 0);
  for (int i = 0; i < NX; i += 5) {
    int k = NX - i < 5 ? NX - i : 5;
    ASSERT_INT_EQ(model_forward(f, X + i, k, P + i, fresh + (size_t)(P + i) * (size_t)V, MODEL_LOGITS_ALL), 0);
  }
  EXPECT_MEM_EQ(lg + (size_t)P * (size_t)V, fresh + (size_t)P * (size_t)V, (size_t)NX * (size_t)V * sizeof *lg);
  float *ref = ref_logits(REF, path, full, P + NX, V, false);
  ASSERT_TRUE(ref != NULL);
  double e = ref_nmse(lg + (size_t)P * (size_t)V, ref + (size_t)P * (size_t)V, (size_t)NX * (size_t)V);
  printf("    resumed from the checkpoint at %d against numpy: nmse %.3g\n", P, e);
  EXPECT_TRUE(e < 1e-8);
  free(ref);
  model_ctx_free(f);
  free(lg);
  free(fresh);
  free(ck);
  free(ck1);
  free(other);
  model_ctx_free(c);
  model_free(m);
  /* a model without recurrent layers has no state to save */
  model_testgen_arch q = model_testgen_arch_small(MODEL_ARCH_QWEN3);
  ASSERT_TRUE(ref_write_arch(&q, "lfm2_ckpt_qwen3", path, sizeof path));
  ASSERT_INT_EQ(model_open(path, &m), 0);
  c = ref_new_ctx(m, 1, 0, MODEL_KV_F32);
  ASSERT_TRUE(c != NULL);
  char dummy[16];
  EXPECT_INT_EQ(model_ctx_seq_state_save(c, 0, dummy), ERR_UNSUPPORTED);
  EXPECT_INT_EQ(model_ctx_seq_state_restore(c, 0, 0, dummy), ERR_UNSUPPORTED);
  model_ctx_free(c);
  model_free(m);
}
