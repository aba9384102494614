/* test_model_mamba2.c - the Mamba-2 architectures (src/model/mamba2.c:
 * mamba2, granitehybrid with and without experts, nemotron_h) against
 * tools/ref_mamba2.py, an independent float64 numpy implementation whose
 * Mamba-2 layers run token by token, on random-weight files of two shapes
 * each (testgen_ssm.c): the chunked prompt path (one call, the scan in
 * chunks) and the one-token path (one decode call per token, the
 * recurrence); greedy decoding on F32 and F16 weights; two sequences
 * interleaved in one batch; a sequence resumed from a state checkpoint
 * against the full recomputation; and the catalogue of malformed files. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen_ssm.h"
#include "model_ref.h"

#define REF "tools/ref_mamba2.py"
#define NEED_PY() NEED_REF_PY(REF)

static const int32_t PROMPT[] = {1,  17, 42,  299, 3,  150, 150, 7,   88, 254, 0,  31,  64,  200, 5,   9,   200,
                                 14, 77, 3,   3,   150, 299, 100, 101, 102, 7,  8,   9,   250, 33,  44,  55,  66,
                                 77, 88, 99,  111, 222, 12,  5,   6,   7,   8,  9,   10,  11,  12,  13,  14,  15,
                                 16, 17, 18,  19,  20,  21,  22,  23,  24,  25, 26,  27,  28,  29,  30,  31,  32,
                                 33, 34, 35,  36,  37,  38,  39,  40,  41,  42, 43,  44,  45,  46,  47,  48};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* The second shape of each: other widths, more layers, 4 heads of 32 with
 * a state of 32 (mamba2 also 4 groups), another layer pattern. */
static model_testgen_ssm shape_b(enum model_arch a, bool experts) {
  model_testgen_ssm g = model_testgen_ssm_small(a, experts);
  g.n_embd = 96;
  g.d_inner = 128;
  g.n_ssm_head = 4;
  g.d_state = 32;
  g.d_conv = 3;
  g.seed = 91;
  g.n_ctx = 256;
  if (a == MODEL_ARCH_MAMBA2) g.layers = "MMMMM", g.n_group = 4, g.tied = false;
  if (a == MODEL_ARCH_GRANITEHYBRID) g.layers = "M*MM*M", g.n_head = 6, g.head_dim = 16, g.rope_finetuned = 1;
  if (a == MODEL_ARCH_NEMOTRON_H) g.layers = "M*-MM-*-", g.n_group = 1, g.n_ff = 80;
  return g;
}

static const char *ssm_write(const model_testgen_ssm *g, const char *name, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s.gguf", test_tmpdir(), name);
  if (model_testgen_ssm_write(g, path)) {
    test_fail_at(__FILE__, __LINE__, "testgen %s: %s", name, err_detail());
    return NULL;
  }
  return path;
}

static int ssm_open(const model_testgen_ssm *g, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.gguf", test_tmpdir(), name);
  if (model_testgen_ssm_write(g, path)) return 1;
  model *m = NULL;
  int rc = model_open(path, &m);
  model_free(m);
  return rc;
}

/* F32 weights: f32 rounding only; the bar is 1e-4, held at 1e-8 so
 * that a state not carried, a tap off by one or a wrong group (all > 1e-3)
 * cannot hide. The prompt of 88 tokens is one chunk of 64 and one of 24. */
static void check_shape(const model_testgen_ssm *g, const char *name) {
  char path[512];
  if (!ssm_write(g, name, path, sizeof path)) return;
  double e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F32, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  ref_check_one_token(REF, path, name, PROMPT, N_PROMPT, 1e-8);
}

/* 32 greedy tokens after the prompt, C (one decode call per token) and
 * numpy, on F32 and F16 weights. */
static void check_greedy(model_testgen_ssm g, const char *name) {
  const uint32_t types[2] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16};
  for (int ti = 0; ti < 2; ti++) {
    g.type = types[ti];
    char path[512], nm[96];
    snprintf(nm, sizeof nm, "%s_greedy_%s", name, ti ? "f16" : "f32");
    if (!ssm_write(&g, nm, path, sizeof path)) return;
    ref_check_greedy(REF, path, PROMPT, 12, 32, false);
  }
}

TEST(model_mamba2_matches_numpy) {
  NEED_PY();
  model_testgen_ssm g = model_testgen_ssm_small(MODEL_ARCH_MAMBA2, false);
  char path[512];
  ASSERT_TRUE(ssm_write(&g, "mamba2_small", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const model_hparams *hp = model_get_hparams(m);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_MAMBA2);
  EXPECT_TRUE(model_is_recurrent(m));
  EXPECT_INT_EQ(hp->n_layer_kv, 0);
  EXPECT_INT_EQ(hp->n_layer_rs, 3);
  /* (taps - 1) x (d_inner + 2 groups x 16) + 8 heads x 16 x 16 */
  EXPECT_INT_EQ(hp->rs_floats, 3 * (128 + 64) + 8 * 16 * 16);
  model_ctx *c = ref_new_ctx(m, 2, 0, MODEL_KV_F32);
  ASSERT_TRUE(c != NULL);
  EXPECT_INT_EQ(model_ctx_rs_bytes(c), 2 * 3 * (3 * (128 + 64) + 8 * 16 * 16) * 4);
  model_ctx_free(c);
  model_free(m);
  check_shape(&g, "mamba2_small");
  g = shape_b(MODEL_ARCH_MAMBA2, false);
  check_shape(&g, "mamba2_b");
}

TEST(model_mamba2_greedy_matches_numpy) {
  NEED_PY();
  check_greedy(shape_b(MODEL_ARCH_MAMBA2, false), "mamba2");
}

/* Two sequences in the batches of continuous batching (a prompt chunk of
 * one next to the other's, then single tokens of both, steps of 5 tokens
 * splitting the runs): each sequence's logits are those it has alone. */
static void check_interleaved(const model_testgen_ssm *g, const char *name) {
  char path[512];
  ASSERT_TRUE(ssm_write(g, name, path, sizeof path));
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
  float *ra = malloc((size_t)NA * (size_t)V * sizeof *ra), *rb = malloc((size_t)NB * (size_t)V * sizeof *rb);
  int32_t tok[64], seq[64];
  int n = 0, ia = 0, ib = 0;
  for (int i = 0; i < 8; i++) tok[n] = A[i], seq[n++] = 0;
  for (int i = 0; i < 6; i++) tok[n] = B[i], seq[n++] = 1;
  for (;;) {
    model_batch b = {.n = n, .tokens = tok, .seq = seq, .logits = MODEL_LOGITS_ALL};
    ASSERT_INT_EQ(model_decode(c, &b, lg), 0);
    for (int k = 0; k < n; k++) {
      float *dst = seq[k] ? rb + (size_t)ib++ * (size_t)V : ra + (size_t)ia++ * (size_t)V;
      memcpy(dst, lg + (size_t)k * (size_t)V, (size_t)V * sizeof *lg);
    }
    if (ia == NA && ib == NB) break;
    n = 0;
    if (ia < NA) tok[n] = A[ia], seq[n++] = 0;
    if (ib < NB) tok[n] = B[ib], seq[n++] = 1;
  }
  double ea = ref_nmse(ra, solo_a, (size_t)NA * (size_t)V), eb = ref_nmse(rb, solo_b, (size_t)NB * (size_t)V);
  printf("    %s two sequences against each alone: nmse %.3g, %.3g\n", name, ea, eb);
  EXPECT_TRUE(ea < 1e-10 && eb < 1e-10);
  free(ra);
  free(rb);
  free(lg);
  free(solo_a);
  free(solo_b);
  model_ctx_free(c);
  model_free(m);
}

TEST(model_mamba2_sequences_never_share_state) {
  model_testgen_ssm g = model_testgen_ssm_small(MODEL_ARCH_MAMBA2, false);
  check_interleaved(&g, "mamba2_seqs");
  g = model_testgen_ssm_small(MODEL_ARCH_GRANITEHYBRID, true);
  check_interleaved(&g, "granitehybrid_seqs");
  g = model_testgen_ssm_small(MODEL_ARCH_NEMOTRON_H, false);
  check_interleaved(&g, "nemotron_h_seqs");
}

/* A sequence saved at a chunk end (model_ctx_seq_state_save), run on with
 * another history, restored and continued differently gives bit for bit
 * the logits of a fresh context fed the same chunks, and numpy's full
 * recomputation of that history. */
static void check_resume(const model_testgen_ssm *g, const char *name) {
  char path[512];
  ASSERT_TRUE(ssm_write(g, name, path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const model_hparams *hp = model_get_hparams(m);
  const int64_t V = hp->n_vocab;
  const size_t per = (size_t)model_rs_seq_bytes(hp);
  enum { P = 14, NX = 12 };
  const int32_t *X = PROMPT + 26;
  int32_t full[P + NX];
  memcpy(full, PROMPT, P * sizeof *full);
  memcpy(full + P, X, NX * sizeof *full);
  model_ctx *c = ref_new_ctx(m, 1, 0, MODEL_KV_F32);
  ASSERT_TRUE(c != NULL);
  float *lg = malloc((size_t)(P + NX) * (size_t)V * sizeof *lg);
  float *fresh = malloc((size_t)(P + NX) * (size_t)V * sizeof *fresh);
  void *ck = malloc(per);
  ASSERT_TRUE(lg && fresh && ck);
  ASSERT_INT_EQ(model_forward(c, PROMPT, 7, 0, NULL, MODEL_LOGITS_NONE), 0);
  ASSERT_INT_EQ(model_forward(c, PROMPT + 7, 7, 7, NULL, MODEL_LOGITS_NONE), 0);
  ASSERT_INT_EQ(model_ctx_seq_state_save(c, 0, ck), 0);
  ASSERT_INT_EQ(model_forward(c, PROMPT + P, 30 - P, P, NULL, MODEL_LOGITS_NONE), 0);
  ASSERT_INT_EQ(model_ctx_seq_state_restore(c, 0, P, ck), 0);
  for (int i = 0; i < NX; i += 5) {
    int k = NX - i < 5 ? NX - i : 5;
    ASSERT_INT_EQ(model_forward(c, X + i, k, P + i, lg + (size_t)(P + i) * (size_t)V, MODEL_LOGITS_ALL), 0);
  }
  model_ctx *f = ref_new_ctx(m, 1, 0, MODEL_KV_F32);
  ASSERT_TRUE(f != NULL);
  ASSERT_INT_EQ(model_forward(f, PROMPT, 7, 0, NULL, MODEL_LOGITS_NONE), 0);
  ASSERT_INT_EQ(model_forward(f, PROMPT + 7, 7, 7, NULL, MODEL_LOGITS_NONE), 0);
  for (int i = 0; i < NX; i += 5) {
    int k = NX - i < 5 ? NX - i : 5;
    ASSERT_INT_EQ(model_forward(f, X + i, k, P + i, fresh + (size_t)(P + i) * (size_t)V, MODEL_LOGITS_ALL), 0);
  }
  EXPECT_MEM_EQ(lg + (size_t)P * (size_t)V, fresh + (size_t)P * (size_t)V, (size_t)NX * (size_t)V * sizeof *lg);
  float *ref = ref_logits(REF, path, full, P + NX, V, false);
  if (ref) {
    double e = ref_nmse(lg + (size_t)P * (size_t)V, ref + (size_t)P * (size_t)V, (size_t)NX * (size_t)V);
    printf("    %s resumed from the checkpoint at %d against numpy: nmse %.3g\n", name, P, e);
    EXPECT_TRUE(e < 1e-8);
  } else {
    test_fail_at(__FILE__, __LINE__, "%s: no reference logits", name);
  }
  free(ref);
  model_ctx_free(f);
  free(lg);
  free(fresh);
  free(ck);
  model_ctx_free(c);
  model_free(m);
}

TEST(model_mamba2_checkpoint_resume_matches_recompute) {
  NEED_PY();
  model_testgen_ssm g = shape_b(MODEL_ARCH_MAMBA2, false);
  check_resume(&g, "mamba2_ckpt");
}

TEST(model_mamba2_load_errors) {
  const model_testgen_ssm s = model_testgen_ssm_small(MODEL_ARCH_MAMBA2, false);
  model_testgen_ssm g = s;
  g.missing_tensor = "blk.1.ssm_a";
  EXPECT_INT_EQ(ssm_open(&g, "mamba2_no_a"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ssm_a' is missing");
  g = s;
  g.conv_bias = false; /* mamba2 requires it */
  EXPECT_INT_EQ(ssm_open(&g, "mamba2_no_conv_b"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ssm_conv1d.bias' is missing");
  g = s;
  g.bad_tensor = "blk.0.ssm_in.weight";
  EXPECT_INT_EQ(ssm_open(&g, "mamba2_bad_in"), ERR_RANGE);
  /* 2 x 128 + 2 x 2 groups x 16 + 8 heads = 328 rows */
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ssm_in.weight' has shape [64, 329], expected [64, 328]");
  g = s;
  g.bad_tensor = "blk.2.ssm_norm.weight";
  EXPECT_INT_EQ(ssm_open(&g, "mamba2_bad_norm"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.2.ssm_norm.weight' has shape [64, 3], expected [64, 2]");
  g = s;
  g.bad_heads = 5; /* 128 is not a multiple of 5 */
  EXPECT_INT_EQ(ssm_open(&g, "mamba2_bad_heads"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "mamba2.ssm.inner_size 128 is not a multiple of ssm.time_step_rank (heads) 5");
  g = s;
  g.bad_heads = 4; /* 4 heads in 2 groups: valid shape, but the tensors have 8 */
  EXPECT_INT_EQ(ssm_open(&g, "mamba2_heads4"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ssm_in.weight' has shape");
  g = s;
  g.d_inner = 96, g.n_ssm_head = 6; /* 6 heads of 16... */
  g.n_group = 4;                    /* ...in 4 groups */
  EXPECT_INT_EQ(ssm_open(&g, "mamba2_groups4"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "ssm.time_step_rank (heads) 6 is not a multiple of ssm.group_count 4");
  g = s;
  g.d_conv = 9;
  EXPECT_INT_EQ(ssm_open(&g, "mamba2_taps9"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "key 'mamba2.ssm.conv_kernel' is 9, expected 2..8");
  g = s;
  g.ssm_a_sign = 1.0f; /* a growing state: not -exp(A_log) */
  EXPECT_INT_EQ(ssm_open(&g, "mamba2_pos_a"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "expected a negative decay");
  g = s;
  g.missing_tensor = "output_norm.weight";
  EXPECT_INT_EQ(ssm_open(&g, "mamba2_no_onorm"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'output_norm.weight' is missing");
}

/* granitehybrid: Mamba-2 and attention layers by the file's head_count_kv
 * array, granite's multipliers; dense SwiGLU and experts with a shared
 * expert; the second shape with RoPE on (rope.scaling.finetuned true). */
TEST(model_granitehybrid_matches_numpy) {
  NEED_PY();
  model_testgen_ssm g = model_testgen_ssm_small(MODEL_ARCH_GRANITEHYBRID, false);
  char path[512];
  ASSERT_TRUE(ssm_write(&g, "granitehybrid_small", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const model_hparams *hp = model_get_hparams(m);
  EXPECT_INT_EQ(hp->n_layer_kv, 1);
  EXPECT_INT_EQ(hp->n_layer_rs, 3);
  EXPECT_INT_EQ(hp->n_ctx_train, 128);
  model_free(m);
  check_shape(&g, "granitehybrid_small");
  g = shape_b(MODEL_ARCH_GRANITEHYBRID, false);
  check_shape(&g, "granitehybrid_b");
  g = model_testgen_ssm_small(MODEL_ARCH_GRANITEHYBRID, true);
  check_shape(&g, "granitehybrid_moe");
  g = shape_b(MODEL_ARCH_GRANITEHYBRID, true);
  check_shape(&g, "granitehybrid_moe_b");
}

TEST(model_granitehybrid_greedy_and_resume) {
  NEED_PY();
  check_greedy(shape_b(MODEL_ARCH_GRANITEHYBRID, true), "granitehybrid");
  model_testgen_ssm g = shape_b(MODEL_ARCH_GRANITEHYBRID, false);
  check_resume(&g, "granitehybrid_ckpt");
}

/* Each multiplier and the experts move the logits: a file without one is
 * a different model (so the comparisons above test them). */
TEST(model_granitehybrid_features_matter) {
  model_testgen_ssm g = model_testgen_ssm_small(MODEL_ARCH_GRANITEHYBRID, false);
  char path[512], p2[512];
  ASSERT_TRUE(ssm_write(&g, "granitehybrid_feat", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const int64_t V = model_get_hparams(m)->n_vocab;
  float *base = ref_one_token_logits(m, PROMPT, 16, MODEL_KV_F32);
  model_free(m);
  ASSERT_TRUE(base != NULL);
  for (int f = 0; f < 3; f++) {
    model_testgen_ssm h = g;
    if (f == 0) h.embd_scale = 0;
    if (f == 1) h.resid_scale = 0;
    if (f == 2) h.attn_scale = 0;
    ASSERT_TRUE(ssm_write(&h, "granitehybrid_feat2", p2, sizeof p2));
    ASSERT_INT_EQ(model_open(p2, &m), 0);
    float *lg = ref_one_token_logits(m, PROMPT, 16, MODEL_KV_F32);
    model_free(m);
    ASSERT_TRUE(lg != NULL);
    double e = ref_nmse(lg, base, 16 * (size_t)V);
    printf("    without multiplier %d: nmse %.3g against the file's\n", f, e);
    EXPECT_TRUE(e > 1e-6); /* the files agree to 1e-13 */
    free(lg);
  }
  free(base);
}

TEST(model_granitehybrid_load_errors) {
  const model_testgen_ssm s = model_testgen_ssm_small(MODEL_ARCH_GRANITEHYBRID, true);
  model_testgen_ssm g = s;
  g.missing_tensor = "blk.2.attn_k.weight"; /* the attention layer */
  EXPECT_INT_EQ(ssm_open(&g, "gh_no_k"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.2.attn_k.weight' is missing");
  g = s;
  g.missing_tensor = "blk.0.ffn_norm.weight"; /* a Mamba layer's FFN norm */
  EXPECT_INT_EQ(ssm_open(&g, "gh_no_fnorm"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.ffn_norm.weight' is missing");
  g = s;
  g.bad_tensor = "blk.1.ffn_up_exps.weight";
  EXPECT_INT_EQ(ssm_open(&g, "gh_bad_exps"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ffn_up_exps.weight' has shape");
  g = s;
  g.missing_tensor = "blk.3.ffn_down_shexp.weight";
  EXPECT_INT_EQ(ssm_open(&g, "gh_no_shexp"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "blk.3.ffn_down_shexp.weight");
  g = s;
  g.logit_scale = 0; /* granite's logit_scale is required */
  EXPECT_INT_EQ(ssm_open(&g, "gh_no_logit"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "granitehybrid.logit_scale");
  g = s;
  g.missing_tensor = "blk.0.ssm_conv1d.bias"; /* optional here */
  EXPECT_INT_EQ(ssm_open(&g, "gh_no_conv_b"), 0);
}

/* nemotron_h: Mamba-2, attention (no RoPE) and squared-ReLU MLP layers by
 * the file's head_count_kv and feed_forward_length arrays; MLP layers keep
 * neither a KV cache nor a state. */
TEST(model_nemotron_h_matches_numpy) {
  NEED_PY();
  model_testgen_ssm g = model_testgen_ssm_small(MODEL_ARCH_NEMOTRON_H, false);
  char path[512];
  ASSERT_TRUE(ssm_write(&g, "nemotron_h_small", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const model_hparams *hp = model_get_hparams(m);
  EXPECT_INT_EQ(hp->n_layer_kv, 1); /* "M-*M-": one attention layer */
  EXPECT_INT_EQ(hp->n_layer_rs, 2);
  EXPECT_INT_EQ(hp->n_ff, 96);
  model_ctx *c = ref_new_ctx(m, 1, 0, MODEL_KV_F32);
  ASSERT_TRUE(c != NULL);
  EXPECT_INT_EQ(model_ctx_kv_bytes(c), 2 * 2 * 128 * 16 * 4); /* k and v, 2 kv heads, 128 positions */
  model_ctx_free(c);
  model_free(m);
  check_shape(&g, "nemotron_h_small");
  g = shape_b(MODEL_ARCH_NEMOTRON_H, false);
  check_shape(&g, "nemotron_h_b");
}

TEST(model_nemotron_h_greedy_and_resume) {
  NEED_PY();
  check_greedy(shape_b(MODEL_ARCH_NEMOTRON_H, false), "nemotron_h");
  model_testgen_ssm g = shape_b(MODEL_ARCH_NEMOTRON_H, false);
  check_resume(&g, "nemotron_h_ckpt");
}

TEST(model_nemotron_h_load_errors) {
  const model_testgen_ssm s = model_testgen_ssm_small(MODEL_ARCH_NEMOTRON_H, false);
  model_testgen_ssm g = s;
  g.missing_tensor = "blk.1.ffn_down.weight"; /* the first MLP layer */
  EXPECT_INT_EQ(ssm_open(&g, "nh_no_down"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ffn_down.weight' is missing");
  g = s;
  g.bad_tensor = "blk.4.ffn_up.weight";
  EXPECT_INT_EQ(ssm_open(&g, "nh_bad_up"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.4.ffn_up.weight' has shape [64, 97], expected [64, 96]");
  g = s;
  g.missing_tensor = "blk.2.attn_output.weight";
  EXPECT_INT_EQ(ssm_open(&g, "nh_no_wo"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.2.attn_output.weight' is missing");
  g = s;
  g.missing_tensor = "blk.3.ssm_d";
  EXPECT_INT_EQ(ssm_open(&g, "nh_no_d"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.3.ssm_d' is missing");
}
