/* test_model_exaone4.c - the exaone4 forward pass (EXAONE 4.0; the exaone4
 * row of src/model/olmo2.c) against tools/ref_dense.py, an independent
 * float64 numpy implementation reading the same GGUF file, on random-weight
 * models of two shapes written by the project's writer (testgen_arch.c with
 * testgen_dense.c): the 1.2B layout (every layer global with RoPE) and the
 * 32B layout (64 layers: three sliding layers with RoPE, one global NoPE
 * layer), logits on F32 and F16 weights with F32 and F16 caches, greedy
 * continuations, prompts longer than the window, a cached prefix longer
 * than the window, then the catalogue of malformed files. */
#include "test.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen_arch.h"
#include "model_ref.h"

#define REF "tools/ref_dense.py"
#define NEED_PY() NEED_REF_PY(REF)

/* 40 tokens: five windows of 8. */
static const int32_t PROMPT[] = {1,   17, 42,  299, 3,   150, 150, 7,   88,  254, 0,   31,  64,  102,
                                 11,  12, 13,  200, 201, 5,   6,   77,  78,  79,  80,  81,  9,   99,
                                 199, 1,  250, 4,   8,   16,  32,  128, 256, 111, 222, 33};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* The 32B layout at a small width: 64 layers (the depth that switches the
 * sliding window on), n_embd 32, 2 heads of 16 on one KV head, n_ff 64,
 * window 8, tied embeddings, rope base 1000. */
static model_testgen_arch shape_b(void) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_EXAONE4);
  g.n_embd = 32;
  g.n_head = 2;
  g.n_head_kv = 1;
  g.head_dim = 16;
  g.n_ff = 64;
  g.n_layer = 64;
  g.sliding_window = 8;
  g.tied = true;
  g.rope_freq_base = 1000.0f;
  g.seed = 91;
  return g;
}

/* F32 weights: f32 rounding only separates C from float64 numpy (NMSE
 * ~1e-12). With an F16 cache numpy rounds keys and values the same way, but
 * a value within f32 rounding of a half-way point rounds to the other half
 * now and then (2^-11 relative), and each of 64 layers adds such flips:
 * 1e-10 over 2 layers, 3e-8 .. 1e-7 over 64, so the 64-layer bound is 1e-6.
 * 1e-8 (F32) is held so that q/k normed over the whole projection (olmo2's)
 * instead of per head, RoPE on the global layers, or a window one position
 * off (each 1e-3 or more) cannot hide. */
static void check_logits(model_testgen_arch g, const char *name) {
  char path[512];
  if (!ref_write_arch(&g, name, path, sizeof path)) return;
  double e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F32, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = ref_compare(REF, path, PROMPT, N_PROMPT, MODEL_KV_F16, 1);
  EXPECT_TRUE(e >= 0 && e < (g.n_layer > 8 ? 1e-6 : 1e-8));
}

TEST(model_exaone4_matches_numpy) {
  NEED_PY();
  model_testgen_arch a = model_testgen_arch_small(MODEL_ARCH_EXAONE4);
  char path[512];
  ASSERT_TRUE(ref_write_arch(&a, "exaone4_a", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_STR_EQ(model_arch_name(model_arch_of(m)), "exaone4");
  EXPECT_INT_EQ(model_get_hparams(m)->n_swa, 0); /* not 64 layers: global, RoPE everywhere */
  EXPECT_INT_EQ(model_get_hparams(m)->nope_step, 0);
  model_free(m);
  check_logits(a, "exaone4_a");
  a.sliding_window = 8; /* the key alone does not make a 2-layer file slide (llama.cpp's reading) */
  check_logits(a, "exaone4_a_key");
  model_testgen_arch b = shape_b();
  ASSERT_TRUE(ref_write_arch(&b, "exaone4_b", path, sizeof path));
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_get_hparams(m)->n_swa, 8);
  EXPECT_INT_EQ(model_get_hparams(m)->swa_pattern, 4);
  EXPECT_INT_EQ(model_get_hparams(m)->nope_step, 4);
  EXPECT_TRUE(model_layer_window(model_get_hparams(m), 2) == 8 && model_layer_window(model_get_hparams(m), 3) == 0);
  EXPECT_TRUE(model_layer_rope(model_get_hparams(m), 2) && !model_layer_rope(model_get_hparams(m), 3));
  model_free(m);
  check_logits(b, "exaone4_b");
  b.swa_pattern = 3; /* the pattern key: two sliding layers, one global */
  b.sliding_window = 5;
  b.seed = 92;
  check_logits(b, "exaone4_b_p3");
  a = model_testgen_arch_small(MODEL_ARCH_EXAONE4);
  a.type = a.type_embd = TENSOR_TYPE_F16;
  a.seed = 5;
  check_logits(a, "exaone4_a_f16");
  b = shape_b();
  b.type = b.type_embd = TENSOR_TYPE_F16;
  check_logits(b, "exaone4_b_f16");
}

/* Greedy continuations of 32 tokens after 12 are numpy's, token for token,
 * on F32 (F32 cache) and F16 weights (F16 cache mirrored in numpy). */
TEST(model_exaone4_greedy_matches_numpy) {
  NEED_PY();
  for (int shape = 0; shape < 2; shape++)
    for (int f16 = 0; f16 < 2; f16++) {
      model_testgen_arch g = shape ? shape_b() : model_testgen_arch_small(MODEL_ARCH_EXAONE4);
      if (f16) g.type = g.type_embd = TENSOR_TYPE_F16;
      char name[64], path[512];
      snprintf(name, sizeof name, "exaone4_greedy_%d_%d", shape, f16);
      if (!ref_write_arch(&g, name, path, sizeof path)) continue;
      ref_check_greedy(REF, path, PROMPT, 12, 32, f16 != 0);
    }
}

/* Past the window and the 128-position attention tile (150 tokens, F16
 * cache), and a cached prefix longer than the window reused after a
 * truncation: a 30-token prompt, truncated to 20 positions, continued with
 * 12 other tokens, gives numpy's logits of the new 32-token sequence. */
TEST(model_exaone4_window_edges_match_numpy) {
  NEED_PY();
  model_testgen_arch g = shape_b();
  g.n_ctx = 256;
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "exaone4_long", path, sizeof path));
  int32_t longp[150];
  for (int i = 0; i < 150; i++) longp[i] = (int32_t)((i * 37 + 11) % 300);
  double e = ref_compare(REF, path, longp, 150, MODEL_KV_F16, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-6);

  enum { N_FIRST = 30, N_KEEP = 20, N_NEW = 12 };
  int32_t seq2[N_KEEP + N_NEW];
  memcpy(seq2, PROMPT, N_KEEP * sizeof *seq2);
  for (int i = 0; i < N_NEW; i++) seq2[N_KEEP + i] = (int32_t)(270 + i);
  model *m = NULL;
  model_ctx *c = NULL;
  model_ctx_params p = model_ctx_default_params();
  p.n_ctx = 64;
  p.n_threads = 2;
  p.kv_type = MODEL_KV_F32;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  ASSERT_INT_EQ(model_ctx_new(m, &p, &c), 0);
  const int64_t V = model_get_hparams(m)->n_vocab;
  float *ref = ref_logits(REF, path, seq2, N_KEEP + N_NEW, V, false);
  float *lg = malloc((size_t)N_NEW * (size_t)V * sizeof *lg);
  ASSERT_TRUE(ref && lg);
  ASSERT_INT_EQ(model_forward(c, PROMPT, N_FIRST, 0, lg, MODEL_LOGITS_LAST), 0);
  model_ctx_seq_truncate(c, 0, N_KEEP);
  ASSERT_INT_EQ(model_forward(c, seq2 + N_KEEP, N_NEW, N_KEEP, lg, MODEL_LOGITS_ALL), 0);
  double worst = 0;
  for (int i = 0; i < N_NEW; i++) {
    double r = ref_nmse(lg + (size_t)i * (size_t)V, ref + (size_t)(N_KEEP + i) * (size_t)V, (size_t)V);
    if (r > worst) worst = r;
  }
  printf("    exaone4_long: prefix of %d (window 8) reused after truncation: worst row nmse %.3g\n", N_KEEP, worst);
  EXPECT_TRUE(worst < 1e-8);
  free(ref);
  free(lg);
  model_ctx_free(c);
  model_free(m);
}

TEST(model_exaone4_load_errors) {
  const model_testgen_arch a = model_testgen_arch_small(MODEL_ARCH_EXAONE4), b = shape_b();
  model_testgen_arch g = a;
  g.missing_tensor = "blk.1.post_ffw_norm.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "exaone4_no_post"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.post_ffw_norm.weight' is missing");
  g = a;
  g.missing_tensor = "blk.0.attn_k_norm.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "exaone4_no_knorm"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_k_norm.weight' is missing");
  g = a;
  g.bad_tensor = "blk.0.attn_q_norm.weight"; /* per head: [16] */
  EXPECT_INT_EQ(ref_open_arch(&g, "exaone4_bad_qnorm"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_q_norm.weight' has shape [17], expected [16]");
  g = a;
  g.bad_tensor = "blk.1.ffn_up.weight";
  EXPECT_INT_EQ(ref_open_arch(&g, "exaone4_bad_up"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.ffn_up.weight' has shape [64, 161], expected [64, 160]");
  g = a;
  g.nextn = 1;
  EXPECT_INT_EQ(ref_open_arch(&g, "exaone4_mtp"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "key 'exaone4.nextn_predict_layers' is 1");
  g = b;
  g.sliding_window = 129; /* larger than the context of 128 */
  EXPECT_INT_EQ(ref_open_arch(&g, "exaone4_big_window"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "exaone4.attention.sliding_window");
  g = b;
  g.swa_pattern = 5000;
  EXPECT_INT_EQ(ref_open_arch(&g, "exaone4_bad_pattern"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "exaone4.attention.sliding_window_pattern");
  /* no window key: llama.cpp's 4096 for the 64-layer file */
  g = b;
  g.sliding_window = -1;
  g.n_ctx = 8192;
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "exaone4_default_window", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_get_hparams(m)->n_swa, 4096);
  model_free(m);
}

/* The pattern key as the converter writes it from config.json's
 * layer_types: one bool per layer. "two sliding, one global" repeated
 * loads as period 3 and gives numpy's logits (numpy reads the list itself,
 * layer by layer); a list of only sliding layers is period 0 (every layer
 * slides and rotates); a list no period describes and one of the wrong
 * length are refused by name. */
TEST(model_exaone4_pattern_array) {
  NEED_PY();
  uint8_t layers[64];
  for (int l = 0; l < 64; l++) layers[l] = l % 3 < 2;
  model_testgen_arch g = shape_b();
  g.swa_layers = layers;
  g.sliding_window = 5;
  g.seed = 93;
  char path[512];
  ASSERT_TRUE(ref_write_arch(&g, "exaone4_pattern_arr", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_get_hparams(m)->swa_pattern, 3);
  EXPECT_INT_EQ(model_get_hparams(m)->nope_step, 3);
  model_free(m);
  check_logits(g, "exaone4_pattern_arr");
  memset(layers, 1, sizeof layers);
  ASSERT_TRUE(ref_write_arch(&g, "exaone4_pattern_all", path, sizeof path));
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_get_hparams(m)->swa_pattern, 0);
  EXPECT_INT_EQ(model_get_hparams(m)->nope_step, 0);
  EXPECT_TRUE(model_layer_window(model_get_hparams(m), 63) == 5 && model_layer_rope(model_get_hparams(m), 63));
  model_free(m);
  layers[10] = 0; /* one global layer, then sliding ones again: no period */
  EXPECT_INT_EQ(ref_open_arch(&g, "exaone4_pattern_odd"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "exaone4.attention.sliding_window_pattern' is a per-layer list");
  EXPECT_STR_CONTAINS(err_detail(), "period 11");
  for (int l = 0; l < 64; l++) layers[l] = l % 4 < 3;
  g.swa_layers_n = 63;
  EXPECT_INT_EQ(ref_open_arch(&g, "exaone4_pattern_short"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "has 63 entries, expected one per layer (64)");
}
