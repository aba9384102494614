/*
 * testgen_ssm.c - writes random-weight mamba2 / granitehybrid / nemotron_h
 * files (testgen_ssm.h) with the project's GGUF writer: the keys the
 * converter writes (ssm.*, the per-layer head_count_kv and, for nemotron_h,
 * feed_forward_length arrays; granite's multipliers), then the tensors in
 * the converter's order.
 */
#include "model/testgen_ssm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "kernels/tensor_type.h"
#include "model/testgen.h"
#include "model/testgen_int.h"

model_testgen_ssm model_testgen_ssm_small(enum model_arch arch, bool experts) {
  model_testgen_ssm g = {.arch = arch, .n_embd = 64, .n_vocab = 300, .n_ctx = 128, .n_head = 4, .n_head_kv = 2,
                         .head_dim = 16, .n_ff = 96, .d_conv = 4, .d_inner = 128, .d_state = 16, .n_ssm_head = 8,
                         .n_group = 2, .conv_bias = true, .rope_finetuned = -1, .type = TENSOR_TYPE_F32,
                         .ssm_a_sign = -1.0f, .seed = 4242};
  if (arch == MODEL_ARCH_MAMBA2) {
    g.layers = "MMM";
    g.tied = true;
  } else if (arch == MODEL_ARCH_GRANITEHYBRID) {
    g.layers = "MM*M";
    g.n_group = 1;
    g.embd_scale = 6.0f, g.resid_scale = 0.5f, g.attn_scale = 0.2f, g.logit_scale = 4.0f;
    g.rope_finetuned = 0;
    g.conv_bias = false;
    if (experts) g.n_expert = 4, g.n_expert_used = 2, g.n_ff = 32, g.n_ff_shexp = 48;
  } else {
    g.layers = "M-*M-";
  }
  return g;
}

int model_testgen_ssm_write(const model_testgen_ssm *g, const char *path) {
  const char *an = g->arch == MODEL_ARCH_MAMBA2          ? "mamba2"
                   : g->arch == MODEL_ARCH_GRANITEHYBRID ? "granitehybrid"
                   : g->arch == MODEL_ARCH_NEMOTRON_H    ? "nemotron_h"
                                                         : NULL;
  if (!an) return err_set(ERR_UNSUPPORTED, "testgen: architecture %d is not mamba2, granitehybrid or nemotron_h",
                          (int)g->arch);
  const int64_t n_layer = g->layers ? (int64_t)strlen(g->layers) : 0;
  if (n_layer < 1 || n_layer > 64 || g->d_inner % g->n_ssm_head || g->d_inner % g->n_group)
    return err_set(ERR_RANGE, "testgen: inconsistent Mamba-2 shape");
  const bool granite = g->arch == MODEL_ARCH_GRANITEHYBRID, nemo = g->arch == MODEL_ARCH_NEMOTRON_H;
  testgen_gen s;
  int rc = testgen_gen_init(&s, g->seed, 0x55aa33ull);
  if (rc) return rc;
  s.bad = g->bad_tensor;
  s.missing = g->missing_tensor;
  int64_t n_vocab = g->n_vocab;
  const int64_t E = g->n_embd, hd = g->head_dim, Q = g->n_head * hd, KV = g->n_head_kv * hd, F = g->n_ff;
  const int64_t H = g->n_ssm_head, GN = g->n_group * g->d_state, CD = g->d_inner + 2 * GN,
                DP = CD + g->d_inner + H;
  char key[128], name[96];
#define CK(x) \
  if ((rc = (x))) goto done
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", an, suffix), key)
  CK(gguf_writer_add_str(s.w, "general.architecture", an));
  CK(gguf_writer_add_str(s.w, "general.name", "parley random model"));
  if (g->vocab_path) {
    CK(model_testgen_copy_vocab(s.w, g->vocab_path, g->chat_template != NULL, &n_vocab));
  } else {
    CK(model_testgen_mark_no_vocab(s.w, an, n_vocab));
  }
  if (g->chat_template) CK(gguf_writer_add_str(s.w, "tokenizer.chat_template", g->chat_template));
  CK(gguf_writer_add_u32(s.w, KEY("context_length"), (uint32_t)g->n_ctx));
  CK(gguf_writer_add_u32(s.w, KEY("embedding_length"), (uint32_t)E));
  CK(gguf_writer_add_u32(s.w, KEY("block_count"), (uint32_t)n_layer));
  uint32_t kv[64], ff[64];
  for (int64_t l = 0; l < n_layer; l++) {
    kv[l] = g->layers[l] == '*' ? (uint32_t)g->n_head_kv : 0;
    ff[l] = g->layers[l] == '-' ? (uint32_t)F : 0;
  }
  if (g->arch == MODEL_ARCH_MAMBA2) {
    CK(gguf_writer_add_u32(s.w, KEY("feed_forward_length"), 0));
    CK(gguf_writer_add_u32(s.w, KEY("attention.head_count"), 0));
  } else {
    if (nemo) {
      CK(gguf_writer_add_arr(s.w, KEY("feed_forward_length"), GGUF_TYPE_UINT32, ff, (size_t)n_layer));
    } else {
      CK(gguf_writer_add_u32(s.w, KEY("feed_forward_length"), (uint32_t)F));
    }
    CK(gguf_writer_add_u32(s.w, KEY("attention.head_count"), (uint32_t)g->n_head));
    CK(gguf_writer_add_arr(s.w, KEY("attention.head_count_kv"), GGUF_TYPE_UINT32, kv, (size_t)n_layer));
    CK(gguf_writer_add_u32(s.w, KEY("attention.key_length"), (uint32_t)hd));
    CK(gguf_writer_add_u32(s.w, KEY("attention.value_length"), (uint32_t)hd));
  }
  CK(gguf_writer_add_u32(s.w, KEY("ssm.conv_kernel"), (uint32_t)g->d_conv));
  CK(gguf_writer_add_u32(s.w, KEY("ssm.inner_size"), (uint32_t)g->d_inner));
  CK(gguf_writer_add_u32(s.w, KEY("ssm.state_size"), (uint32_t)g->d_state));
  CK(gguf_writer_add_u32(s.w, KEY("ssm.time_step_rank"), (uint32_t)(g->bad_heads > 0 ? g->bad_heads : H)));
  CK(gguf_writer_add_u32(s.w, KEY("ssm.group_count"), (uint32_t)g->n_group));
  CK(gguf_writer_add_f32(s.w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f));
  if (granite) {
    if (g->embd_scale != 0) CK(gguf_writer_add_f32(s.w, KEY("embedding_scale"), g->embd_scale));
    if (g->resid_scale != 0) CK(gguf_writer_add_f32(s.w, KEY("residual_scale"), g->resid_scale));
    if (g->attn_scale != 0) CK(gguf_writer_add_f32(s.w, KEY("attention.scale"), g->attn_scale));
    if (g->logit_scale != 0) CK(gguf_writer_add_f32(s.w, KEY("logit_scale"), g->logit_scale));
    if (g->rope_finetuned >= 0) CK(gguf_writer_add_bool(s.w, KEY("rope.scaling.finetuned"), g->rope_finetuned != 0));
    if (g->n_expert > 0) {
      CK(gguf_writer_add_u32(s.w, KEY("expert_count"), (uint32_t)g->n_expert));
      CK(gguf_writer_add_u32(s.w, KEY("expert_used_count"), (uint32_t)g->n_expert_used));
      if (g->n_ff_shexp > 0)
        CK(gguf_writer_add_u32(s.w, KEY("expert_shared_feed_forward_length"), (uint32_t)g->n_ff_shexp));
    }
  }
#undef KEY
  const float a_e = sqrtf(3.0f / (float)E), a_q = sqrtf(3.0f / (float)(Q > 0 ? Q : 1)),
              a_f = sqrtf(3.0f / (float)(F > 0 ? F : 1)), a_i = sqrtf(3.0f / (float)g->d_inner),
              a_k = sqrtf(3.0f / (float)g->d_conv);
#define T(fmt, type, cols, rows, c, a)                        \
  do {                                                        \
    snprintf(name, sizeof name, fmt, i);                      \
    CK(testgen_add_tensor(&s, name, type, cols, rows, c, a)); \
  } while (0)
#define T3(fmt, cols, rows, nm, a)                                         \
  do {                                                                     \
    snprintf(name, sizeof name, fmt, i);                                   \
    CK(testgen_add_tensor3(&s, name, g->type, cols, rows, nm, 0.0f, a)); \
  } while (0)
  CK(testgen_add_tensor(&s, "token_embd.weight", g->type, E, n_vocab, 0.0f, g->tied ? 3.0f * a_e : sqrtf(3.0f)));
  for (int i = 0; i < (int)n_layer; i++) {
    const char k = g->layers[i];
    T("blk.%d.attn_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
    if (k == 'M') {
      T("blk.%d.ssm_in.weight", g->type, E, DP, 0.0f, a_e);
      T("blk.%d.ssm_conv1d.weight", TENSOR_TYPE_F32, g->d_conv, CD, 0.0f, a_k);
      if (g->conv_bias) T("blk.%d.ssm_conv1d.bias", TENSOR_TYPE_F32, CD, 0, 0.0f, 0.1f);
      T("blk.%d.ssm_dt.bias", TENSOR_TYPE_F32, H, 0, 0.0f, 0.5f);
      T("blk.%d.ssm_a", TENSOR_TYPE_F32, 1, H, g->ssm_a_sign, 0.5f); /* -exp(A_log) in -1.5..-0.5 */
      T("blk.%d.ssm_d", TENSOR_TYPE_F32, 1, H, 1.0f, 0.5f);
      T("blk.%d.ssm_norm.weight", TENSOR_TYPE_F32, g->d_inner / g->n_group, g->n_group, 1.0f, 0.1f);
      T("blk.%d.ssm_out.weight", g->type, g->d_inner, E, 0.0f, a_i);
    } else if (k == '*') {
      T("blk.%d.attn_q.weight", g->type, E, Q, 0.0f, 2.0f * a_e); /* sharper attention than uniform */
      T("blk.%d.attn_k.weight", g->type, E, KV, 0.0f, 2.0f * a_e);
      T("blk.%d.attn_v.weight", g->type, E, KV, 0.0f, a_e);
      T("blk.%d.attn_output.weight", g->type, Q, E, 0.0f, a_q);
    } else {
      T("blk.%d.ffn_up.weight", g->type, E, F, 0.0f, a_e);
      T("blk.%d.ffn_down.weight", g->type, F, E, 0.0f, a_f);
    }
    if (!granite) continue;
    T("blk.%d.ffn_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
    if (g->n_expert > 0) {
      T("blk.%d.ffn_gate_inp.weight", TENSOR_TYPE_F32, E, g->n_expert, 0.0f, 3.0f * a_e);
      T3("blk.%d.ffn_gate_exps.weight", E, F, g->n_expert, a_e);
      T3("blk.%d.ffn_up_exps.weight", E, F, g->n_expert, a_e);
      T3("blk.%d.ffn_down_exps.weight", F, E, g->n_expert, a_f);
      if (g->n_ff_shexp > 0) {
        const float a_s = sqrtf(3.0f / (float)g->n_ff_shexp);
        T("blk.%d.ffn_gate_shexp.weight", g->type, E, g->n_ff_shexp, 0.0f, a_e);
        T("blk.%d.ffn_up_shexp.weight", g->type, E, g->n_ff_shexp, 0.0f, a_e);
        T("blk.%d.ffn_down_shexp.weight", g->type, g->n_ff_shexp, E, 0.0f, a_s);
      }
    } else {
      T("blk.%d.ffn_gate.weight", g->type, E, F, 0.0f, a_e);
      T("blk.%d.ffn_up.weight", g->type, E, F, 0.0f, a_e);
      T("blk.%d.ffn_down.weight", g->type, F, E, 0.0f, a_f);
    }
  }
  CK(testgen_add_tensor(&s, "output_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f));
  if (!g->tied) CK(testgen_add_tensor(&s, "output.weight", g->type, E, n_vocab, 0.0f, 3.0f * a_e));
#undef T
#undef T3
#undef CK
done:
  if (rc) {
    testgen_gen_finish(&s, NULL);
    return rc;
  }
  return testgen_gen_finish(&s, path);
}
