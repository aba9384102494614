/* test_model_qwen.c - the qwen2 and qwen3 forward passes (src/model/qwen.c)
 * against tools/ref_qwen.py (an independent float64 numpy implementation
 * reading the same GGUF file), on random-weight models written by
 * src/model/testgen_arch.c: logits on F32, F16, Q8_0 and Q4_K weights with
 * F32 and F16 caches, greedy continuations, batch vs token by token,
 * interleaved sequences, the reference kernels, embeddings (model_embed
 * with every pooling), and load errors. */
#include "test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/testgen.h"
#include "model_ref.h"
#include "model/testgen_arch.h"

#define REF "tools/ref_qwen.py"
#define NEED_PY() NEED_REF_PY(REF)

static const int32_t PROMPT[] = {1, 17, 42, 299, 3, 150, 150, 7, 88, 254, 0, 31, 64, 200};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* C vs numpy on PROMPT (ref_compare). */
static double compare(const char *path, enum model_kv_type kv, int n_threads) {
  return ref_compare(REF, path, PROMPT, N_PROMPT, kv, n_threads);
}

/* F32 weights: only f32 rounding separates C from float64 numpy (NMSE
 * ~1e-12); the bar is 1e-4, we also hold 1e-8 so that a wrong RoPE
 * pairing (normal instead of NeoX: NMSE ~1e-1), a missing bias or q/k norm
 * cannot hide. The F16 cache is mirrored by numpy (--kv f16). */
TEST(model_qwen2_f32_matches_numpy) {
  NEED_PY();
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN2);
  g.rope_freq_base = 1000000.0f;
  ASSERT_TRUE(ref_write_arch(&g, "qwen2_f32", path, sizeof path));
  double e = compare(path, MODEL_KV_F32, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = compare(path, MODEL_KV_F16, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  g.tied = true;
  g.seed = 2;
  ASSERT_TRUE(ref_write_arch(&g, "qwen2_f32_tied", path, sizeof path));
  e = compare(path, MODEL_KV_F16, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
}

/* qwen3: head_dim 32 with n_embd 64 and 4 heads (q is 128 wide), per-head
 * q/k RMS norms before RoPE; also the head_dim = n_embd / n_head case. */
TEST(model_qwen3_f32_matches_numpy) {
  NEED_PY();
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN3);
  g.rope_freq_base = 1000000.0f;
  ASSERT_TRUE(ref_write_arch(&g, "qwen3_f32", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_QWEN3);
  EXPECT_INT_EQ(model_get_hparams(m)->head_dim, 32);
  EXPECT_INT_EQ(model_get_hparams(m)->rope.style, OPS_ROPE_NEOX);
  model_free(m);
  double e = compare(path, MODEL_KV_F32, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = compare(path, MODEL_KV_F16, 1);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  g.head_dim = 0;
  g.tied = false;
  g.seed = 3;
  ASSERT_TRUE(ref_write_arch(&g, "qwen3_f32_hd16", path, sizeof path));
  e = compare(path, MODEL_KV_F16, 2);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
}

/* F16 weights: numpy decodes the same halves; the kernels multiply them by
 * f32 activations in f32, so again f32 rounding only. */
TEST(model_qwen_f16_matches_numpy) {
  NEED_PY();
  char path[512];
  enum model_arch archs[2] = {MODEL_ARCH_QWEN2, MODEL_ARCH_QWEN3};
  for (int a = 0; a < 2; a++) {
    model_testgen_arch g = model_testgen_arch_small(archs[a]);
    g.type = g.type_embd = TENSOR_TYPE_F16;
    g.seed = 10 + (uint64_t)a;
    ASSERT_TRUE(ref_write_arch(&g, a ? "qwen3_f16" : "qwen2_f16", path, sizeof path));
    double e = compare(path, MODEL_KV_F16, 2);
    EXPECT_TRUE(e >= 0 && e < 1e-8);
  }
}

/* Quantized weights with the reference kernels forced: every product is an
 * exact double dot product on the dequantized weights, so numpy (which
 * uses the same dequantized values) matches to f32 rounding. */
TEST(model_qwen_reference_kernels) {
  NEED_PY();
  kern_force_reference(true);
  EXPECT_STR_EQ(kern_isa(), "reference");
  char path[512];
  enum model_arch archs[2] = {MODEL_ARCH_QWEN2, MODEL_ARCH_QWEN3};
  for (int a = 0; a < 2; a++) {
    model_testgen_arch g = model_testgen_arch_small(archs[a]);
    g.type = g.type_embd = TENSOR_TYPE_Q8_0;
    g.seed = 20 + (uint64_t)a;
    ASSERT_TRUE(ref_write_arch(&g, a ? "qwen3_ref_q8" : "qwen2_ref_q8", path, sizeof path));
    double e = compare(path, MODEL_KV_F16, 2);
    EXPECT_TRUE(e >= 0 && e < 1e-8);
    g.type = g.type_embd = TENSOR_TYPE_F32;
    ASSERT_TRUE(ref_write_arch(&g, a ? "qwen3_ref_f32" : "qwen2_ref_f32", path, sizeof path));
    e = compare(path, MODEL_KV_F32, 1);
    EXPECT_TRUE(e >= 0 && e < 1e-8);
  }
  model_testgen_arch k = model_testgen_arch_small(MODEL_ARCH_QWEN3);
  k.n_embd = 256;
  k.head_dim = 64;
  k.n_ff = 512;
  k.type = k.type_embd = TENSOR_TYPE_Q4_K;
  k.seed = 26;
  ASSERT_TRUE(ref_write_arch(&k, "qwen3_ref_q4k", path, sizeof path));
  double ek = compare(path, MODEL_KV_F16, 2);
  EXPECT_TRUE(ek >= 0 && ek < 1e-8);
  kern_force_reference(false);
}

/* The fast kernels on Q8_0 and Q4_K: 8-bit activation quantization adds
 * ~1e-4 (see test_model.c's derivation); 2e-3 is the same bar as llama's. */
TEST(model_qwen_quant_matches_numpy) {
  NEED_PY();
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN2);
  g.type = g.type_embd = TENSOR_TYPE_Q8_0;
  g.seed = 25;
  ASSERT_TRUE(ref_write_arch(&g, "qwen2_q8", path, sizeof path));
  double e = compare(path, MODEL_KV_F16, 2);
  EXPECT_TRUE(e >= 0 && e < 2e-3);
  /* K-quants need rows of multiples of 256: qwen3 with n_embd 256, head_dim
   * 64 (q 256 wide), n_ff 512 in Q4_K (activations in Q8_K blocks) */
  model_testgen_arch k = model_testgen_arch_small(MODEL_ARCH_QWEN3);
  k.n_embd = 256;
  k.head_dim = 64;
  k.n_ff = 512;
  k.type = k.type_embd = TENSOR_TYPE_Q4_K;
  k.seed = 26;
  ASSERT_TRUE(ref_write_arch(&k, "qwen3_q4k", path, sizeof path));
  e = compare(path, MODEL_KV_F16, 2);
  EXPECT_TRUE(e >= 0 && e < 2e-3);
}

/* The Q4_K_M-like mix of gen-model --shape qwen2.5-0.5b
 * (model_testgen_arch_qwen_k_m) on a small shape with 8 layers: llama.cpp's
 * "more bits" layers of 8 are 0, 3, 6 and 7 (i < 8/8, i >= 7*8/8,
 * (i - 1) % 3 == 2), written out here rather than computed with the
 * generator's rule, and so are the types: those get Q8_0 attn_v and Q6_K
 * ffn_down, the others Q5_0 and Q4_K; q/k/o/gate/up Q5_0, tied Q8_0
 * embeddings. Then the logits against numpy (the fast Q5_0, Q8_0, Q4_K and
 * Q6_K kernels together; same 2e-3 bound as above). */
TEST(model_qwen_q4_k_m_mix) {
  NEED_PY();
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN2);
  g.n_layer = 8;
  g.n_ff = 256; /* ffn_down rows hold one 256-block */
  g.tied = true;
  model_testgen_arch_qwen_k_m(&g);
  g.seed = 27;
  ASSERT_TRUE(ref_write_arch(&g, "qwen2_k_m_mix", path, sizeof path));
  gguf_file *f = NULL;
  ASSERT_INT_EQ(gguf_open(path, &f), 0);
  static const bool more[8] = {true, false, false, true, false, false, true, true};
  for (int i = 0; i < 8; i++) {
    char name[64];
    snprintf(name, sizeof name, "blk.%d.attn_v.weight", i);
    const gguf_tensor *t = gguf_find_tensor(f, name);
    EXPECT_TRUE(t && t->type == (more[i] ? TENSOR_TYPE_Q8_0 : TENSOR_TYPE_Q5_0));
    snprintf(name, sizeof name, "blk.%d.ffn_down.weight", i);
    t = gguf_find_tensor(f, name);
    EXPECT_TRUE(t && t->type == (more[i] ? TENSOR_TYPE_Q6_K : TENSOR_TYPE_Q4_K));
    snprintf(name, sizeof name, "blk.%d.ffn_up.weight", i);
    t = gguf_find_tensor(f, name);
    EXPECT_TRUE(t && t->type == TENSOR_TYPE_Q5_0);
  }
  const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
  EXPECT_TRUE(te && te->type == TENSOR_TYPE_Q8_0);
  EXPECT_TRUE(gguf_find_tensor(f, "output.weight") == NULL);
  gguf_close(f);
  double e = compare(path, MODEL_KV_F16, 2);
  EXPECT_TRUE(e >= 0 && e < 2e-3);
}

/* One batch, steps of 5 and token by token through the cache give the same
 * logits (kern_matmul does not depend on how many tokens share a call). */
static void check_batch(enum model_arch arch, const char *name) {
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(arch);
  g.type = g.type_embd = TENSOR_TYPE_Q8_0;
  g.seed = 40;
  if (!ref_write_arch(&g, name, path, sizeof path)) return;
  int64_t V = 0;
  float *all = ref_c_logits(path, PROMPT, N_PROMPT, MODEL_KV_F16, 2, 0, &V);
  float *b5 = ref_c_logits(path, PROMPT, N_PROMPT, MODEL_KV_F16, 1, 5, &V);
  model *m = NULL;
  model_ctx *c = NULL;
  model_ctx_params p = model_ctx_default_params();
  p.n_threads = 2;
  float *one = malloc((size_t)V * sizeof *one);
  if (!all || !b5 || !one || model_open(path, &m) || model_ctx_new(m, &p, &c)) {
    test_fail_at(__FILE__, __LINE__, "%s: setup failed: %s", name, err_detail());
    goto out;
  }
  double worst_one = 0, worst_b5 = 0;
  for (int i = 0; i < N_PROMPT; i++) {
    if (model_forward(c, &PROMPT[i], 1, i, one, MODEL_LOGITS_LAST)) {
      test_fail_at(__FILE__, __LINE__, "%s: forward: %s", name, err_detail());
      goto out;
    }
    double e1 = ref_nmse(one, all + (size_t)i * V, (size_t)V), e2 = ref_nmse(b5 + (size_t)i * V, all + (size_t)i * V, (size_t)V);
    if (e1 > worst_one) worst_one = e1;
    if (e2 > worst_b5) worst_b5 = e2;
  }
  printf("    %s: batch of 14 vs 1 by 1: nmse %.3g; vs steps of 5: %.3g\n", name, worst_one, worst_b5);
  EXPECT_TRUE(worst_one < 1e-10);
  EXPECT_TRUE(worst_b5 < 1e-10);
out:
  free(one);
  free(all);
  free(b5);
  model_ctx_free(c);
  model_free(m);
}

TEST(model_qwen_batch_equals_token_by_token) {
  check_batch(MODEL_ARCH_QWEN2, "qwen2_batch");
  check_batch(MODEL_ARCH_QWEN3, "qwen3_batch");
}

/* Greedy continuation of 32 tokens against numpy's (ref_check_greedy). */
static void check_greedy(enum model_arch arch, uint32_t type, const char *name, uint64_t seed) {
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(arch);
  g.type = g.type_embd = type;
  g.seed = seed;
  if (ref_write_arch(&g, name, path, sizeof path)) ref_check_greedy(REF, path, PROMPT, 6, 32, type != TENSOR_TYPE_F32);
}

TEST(model_qwen_greedy_matches_numpy) {
  NEED_PY();
  check_greedy(MODEL_ARCH_QWEN2, TENSOR_TYPE_F32, "qwen2_greedy_f32", 51);
  check_greedy(MODEL_ARCH_QWEN3, TENSOR_TYPE_F32, "qwen3_greedy_f32", 52);
  check_greedy(MODEL_ARCH_QWEN2, TENSOR_TYPE_F16, "qwen2_greedy_f16", 53);
  check_greedy(MODEL_ARCH_QWEN3, TENSOR_TYPE_F16, "qwen3_greedy_f16", 54);
}

static int open_bad(enum model_arch arch, const char *bad, const char *name) {
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(arch);
  g.bad_tensor = bad;
  if (!ref_write_arch(&g, name, path, sizeof path)) return 1;
  model *m = NULL;
  int rc = model_open(path, &m);
  model_free(m);
  return rc;
}

TEST(model_qwen_load_errors) {
  /* one extra element / row: the loader names the tensor and both shapes */
  EXPECT_INT_EQ(open_bad(MODEL_ARCH_QWEN2, "blk.1.attn_k.bias", "qwen2_bad_bias"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.1.attn_k.bias' has shape [33], expected [32]");
  EXPECT_INT_EQ(open_bad(MODEL_ARCH_QWEN3, "blk.0.attn_q_norm.weight", "qwen3_bad_qnorm"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_q_norm.weight' has shape [33], expected [32]");
  EXPECT_INT_EQ(open_bad(MODEL_ARCH_QWEN3, "blk.0.attn_output.weight", "qwen3_bad_wo"), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "tensor 'blk.0.attn_output.weight' has shape [128, 65], expected [128, 64]");
  /* a qwen3 file lacks the q/k biases qwen2 requires: relabel one as qwen2 */
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN3);
  g.head_dim = 0;
  g.arch = MODEL_ARCH_QWEN2;
  ASSERT_TRUE(ref_write_arch(&g, "qwen2_ok", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  EXPECT_INT_EQ(model_arch_of(m), MODEL_ARCH_QWEN2);
  EXPECT_STR_EQ(model_arch_name(model_arch_of(m)), "qwen2");
  /* no pooling_type key: last-token pooling */
  EXPECT_INT_EQ(model_embed_pooling(m), MODEL_POOLING_LAST);
  model_free(m);
  /* llama has no embed */
  model_testgen lg = model_testgen_small();
  ASSERT_TRUE(ref_write_llama(&lg, "qwen_test_llama", path, sizeof path));
  ASSERT_INT_EQ(model_open(path, &m), 0);
  model_ctx *c = NULL;
  ASSERT_INT_EQ(model_ctx_new(m, NULL, &c), 0);
  float out[64];
  EXPECT_INT_EQ(model_embed(c, PROMPT, 3, out, 0), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "'llama'");
  EXPECT_INT_EQ(model_embed_pooling(m), MODEL_POOLING_NONE);
  model_ctx_free(c);
  model_free(m);
  /* rank pooling (rerankers) loads for generation but does not embed */
  model_testgen_arch g4 = model_testgen_arch_small(MODEL_ARCH_QWEN3);
  g4.pooling_type = 4;
  ASSERT_TRUE(ref_write_arch(&g4, "qwen3_rank", path, sizeof path));
  ASSERT_INT_EQ(model_open(path, &m), 0);
  ASSERT_INT_EQ(model_ctx_new(m, NULL, &c), 0);
  EXPECT_INT_EQ(model_embed(c, PROMPT, 3, out, 0), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "qwen3.pooling_type");
  model_ctx_free(c);
  model_free(m);
}

/* Two sequences interleaved in one model_decode (steps of 5 tokens cutting
 * through them) against numpy on each sequence alone: the per-sequence
 * positions reach RoPE and the caches, for both architectures. */
static void check_sequences(enum model_arch arch, const char *name) {
  static const int32_t A[9] = {5, 9, 200, 14, 77, 3, 3, 150, 299};
  static const int32_t B[7] = {100, 101, 102, 7, 8, 9, 250};
  char path[512];
  model_testgen_arch g = model_testgen_arch_small(arch);
  g.seed = 60;
  if (!ref_write_arch(&g, name, path, sizeof path)) return;
  model *m = NULL;
  model_ctx *c = NULL;
  model_ctx_params p = model_ctx_default_params();
  p.n_seq = 2;
  p.n_ctx = 32;
  p.n_batch = 5;
  p.n_threads = 2;
  p.kv_type = MODEL_KV_F32;
  if (model_open(path, &m) || model_ctx_new(m, &p, &c)) {
    test_fail_at(__FILE__, __LINE__, "%s: %s", name, err_detail());
    model_free(m);
    return;
  }
  const int64_t V = model_get_hparams(m)->n_vocab;
  float *ra = ref_logits(REF, path, A, 9, V, false), *rb = ref_logits(REF, path, B, 7, V, false);
  float *lg = malloc((size_t)16 * (size_t)V * sizeof *lg);
  int32_t toks[16], seq[16];
  int64_t pos[16];
  int n = 0;
  for (int i = 0; i < 9; i++) {
    toks[n] = A[i], seq[n] = 0, pos[n] = i, n++;
    if (i < 7) toks[n] = B[i], seq[n] = 1, pos[n] = i, n++;
  }
  model_batch b = {.n = n, .tokens = toks, .seq = seq, .pos = pos, .logits = MODEL_LOGITS_ALL};
  if (!ra || !rb || !lg || model_decode(c, &b, lg)) {
    test_fail_at(__FILE__, __LINE__, "%s: decode or reference failed: %s", name, err_detail());
  } else {
    double worst = 0;
    for (int i = 0; i < n; i++) {
      double e = ref_nmse(lg + (size_t)i * V, (seq[i] ? rb : ra) + (size_t)pos[i] * V, (size_t)V);
      if (e > worst) worst = e;
    }
    printf("    %s: 2 interleaved sequences vs numpy: worst row nmse %.3g\n", name, worst);
    EXPECT_TRUE(worst < 1e-8);
  }
  free(ra);
  free(rb);
  free(lg);
  model_ctx_free(c);
  model_free(m);
}

TEST(model_qwen_sequences_match_numpy) {
  NEED_PY();
  check_sequences(MODEL_ARCH_QWEN2, "qwen2_seqs");
  check_sequences(MODEL_ARCH_QWEN3, "qwen3_seqs");
}

/* ---- embeddings (Qwen3-Embedding style) ----------------------------------- */

/* C model_embed vs ref_qwen.py embed; pooling NULL = the file's. */
static double compare_embed(const char *path, const char *pooling, bool normalize, enum model_kv_type kv,
                            int64_t n_batch) {
  model *m = NULL;
  model_ctx *c = NULL;
  model_ctx_params p = model_ctx_default_params();
  p.kv_type = kv;
  p.n_batch = n_batch;
  p.n_threads = 2;
  if (model_open(path, &m) || model_ctx_new(m, &p, &c)) {
    test_fail_at(__FILE__, __LINE__, "%s: %s", path, err_detail());
    model_free(m);
    return -1;
  }
  const int64_t E = model_get_hparams(m)->n_embd;
  size_t n_out = (size_t)E * (model_embed_pooling(m) == MODEL_POOLING_NONE ? (size_t)N_PROMPT : 1);
  float *v = malloc(n_out * sizeof *v), *r = malloc(n_out * sizeof *r);
  double e = -1;
  char ts[1024], file[512], cmd[4096];
  ref_toks_str(PROMPT, N_PROMPT, ts, sizeof ts);
  snprintf(file, sizeof file, "%s/qwen_ref_embed.f32", test_tmpdir());
  snprintf(cmd, sizeof cmd, REF_PY " " REF " embed %s %s %s%s%s%s%s", path, ts, file, pooling ? " --pooling " : "",
           pooling ? pooling : "", normalize ? " --normalize" : "", kv == MODEL_KV_F16 ? " --kv f16" : "");
  int rc = model_embed(c, PROMPT, N_PROMPT, v, normalize ? MODEL_EMBED_NORMALIZE : 0);
  if (rc) {
    test_fail_at(__FILE__, __LINE__, "model_embed: %s", err_detail());
  } else if (system(cmd) != 0) {
    test_fail_at(__FILE__, __LINE__, "ref_qwen.py embed failed on %s", path);
  } else {
    FILE *fp = fopen(file, "rb");
    size_t got = fp ? fread(r, sizeof *r, n_out, fp) : 0;
    if (fp) fclose(fp);
    if (got == n_out) e = ref_nmse(v, r, n_out);
    /* the sequence now holds the prompt */
    if (model_ctx_seq_n_past(c, 0) != N_PROMPT)
      test_fail_at(__FILE__, __LINE__, "sequence 0 holds %lld tokens after embed, expected %d",
                   (long long)model_ctx_seq_n_past(c, 0), N_PROMPT);
  }
  printf("    %s pooling=%s%s kv=%s n_batch=%lld: nmse %.3g\n", strrchr(path, '/') + 1, pooling ? pooling : "file",
         normalize ? " normalized" : "", kv == MODEL_KV_F16 ? "f16" : "f32", (long long)n_batch, e);
  free(v);
  free(r);
  model_ctx_free(c);
  model_free(m);
  return e;
}

TEST(model_qwen_embed_matches_numpy) {
  NEED_PY();
  char path[512];
  /* qwen3 with pooling_type 3 (what Qwen3-Embedding files declare) */
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN3);
  g.pooling_type = MODEL_POOLING_LAST;
  g.seed = 70;
  ASSERT_TRUE(ref_write_arch(&g, "qwen3_embed", path, sizeof path));
  double e = compare_embed(path, "last", true, MODEL_KV_F32, 0);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  e = compare_embed(path, "last", false, MODEL_KV_F16, 5); /* three steps */
  EXPECT_TRUE(e >= 0 && e < 1e-8);
  /* mean, cls and none over steps of 5 tokens */
  const int pools[3] = {MODEL_POOLING_MEAN, MODEL_POOLING_CLS, MODEL_POOLING_NONE};
  const char *names[3] = {"mean", "cls", "none"};
  for (int i = 0; i < 3; i++) {
    g.pooling_type = pools[i];
    char nm[64];
    snprintf(nm, sizeof nm, "qwen3_embed_%s", names[i]);
    ASSERT_TRUE(ref_write_arch(&g, nm, path, sizeof path));
    e = compare_embed(path, names[i], i != 2, MODEL_KV_F32, 5);
    EXPECT_TRUE(e >= 0 && e < 1e-8);
  }
  /* qwen2 without the key: last */
  model_testgen_arch g2 = model_testgen_arch_small(MODEL_ARCH_QWEN2);
  g2.seed = 71;
  ASSERT_TRUE(ref_write_arch(&g2, "qwen2_embed", path, sizeof path));
  e = compare_embed(path, NULL, true, MODEL_KV_F32, 0);
  EXPECT_TRUE(e >= 0 && e < 1e-8);
}
