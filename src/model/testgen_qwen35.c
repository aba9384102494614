/*
 * testgen_qwen35.c - the keys beyond the common ones and the tensors of
 * random-weight qwen35, qwen35moe and qwen3next files, for
 * model_testgen_arch_write (testgen_arch.c writes the shared keys, then
 * calls testgen_qwen35_write).
 *
 * Names, shapes and keys are the ones llama.cpp's converter writes (see
 * qwen35.c's header): layer l attends when (l + 1) % interval == 0, else it
 * is a gated delta-net layer. Values follow testgen_arch.h's scaling rules;
 * ssm_a (the converter's -exp(A_log)) is drawn in -0.55..-0.05 and
 * ssm_dt.bias in +-0.5 so that the decay exp(a) forgets over a few to tens
 * of tokens: a state carried wrongly moves the logits.
 */
#include "model/testgen_qwen35.h"

#include <math.h>
#include <stdio.h>

#include "gguf/gguf.h"
#include "kernels/tensor_type.h"

model_testgen_arch model_testgen_arch_qwen35_4b(uint32_t t, bool k_m) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN35);
  g.n_embd = 2560;
  g.n_layer = 32;
  g.n_head = 16;
  g.n_head_kv = 4;
  g.head_dim = 256;
  g.n_rot = 64;
  g.n_ff = 9216;
  g.n_vocab = 248320;
  g.n_ctx = 4096;
  g.rope_freq_base = 10000000.0f;
  g.d_conv = 4;
  g.gdn.d_state = 128;
  g.gdn.n_group = 16;
  g.gdn.dt_rank = 32;
  g.gdn.d_inner = 32 * 128;
  g.gdn.interval = 4;
  g.gdn.sections[0] = g.gdn.sections[1] = 11;
  g.gdn.sections[2] = 10;
  g.tied = true;
  g.type = g.type_embd = t;
  if (k_m) {
    g.type = TENSOR_TYPE_Q4_K;
    g.type_embd = TENSOR_TYPE_Q6_K;
  }
  return g;
}

bool testgen_qwen35_arch(enum model_arch a) {
  return a == MODEL_ARCH_QWEN35 || a == MODEL_ARCH_QWEN35MOE || a == MODEL_ARCH_QWEN3NEXT;
}

int testgen_qwen35_write(testgen_gen *s, const model_testgen_arch *g) {
  const char *an = model_arch_name(g->arch);
  const int64_t E = g->n_embd, hd = g->head_dim ? g->head_dim : E / g->n_head, Q = g->n_head * hd,
                KV = g->n_head_kv * hd, F = g->n_ff;
  const int64_t dk = g->gdn.d_state, nk = g->gdn.n_group, nv = g->gdn.dt_rank, VD = g->gdn.d_inner,
                KD = nk * dk, CD = 2 * KD + VD;
  const int64_t interval = g->gdn.interval > 0 ? g->gdn.interval : 4;
  const bool moe = g->arch != MODEL_ARCH_QWEN35, fused = g->arch == MODEL_ARCH_QWEN3NEXT;
  const float a_e = sqrtf(3.0f / (float)E), a_q = sqrtf(3.0f / (float)Q), a_f = sqrtf(3.0f / (float)F),
              a_v = sqrtf(3.0f / (float)(VD > 0 ? VD : 1));
  char key[128], name[96];
  int rc = 0;
#define CK(x) \
  if ((rc = (x))) return rc
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", an, suffix), key)
  CK(gguf_writer_add_u32(s->w, KEY("ssm.conv_kernel"), (uint32_t)g->d_conv));
  CK(gguf_writer_add_u32(s->w, KEY("ssm.state_size"), (uint32_t)dk));
  CK(gguf_writer_add_u32(s->w, KEY("ssm.group_count"), (uint32_t)nk));
  CK(gguf_writer_add_u32(s->w, KEY("ssm.time_step_rank"), (uint32_t)nv));
  CK(gguf_writer_add_u32(s->w, KEY("ssm.inner_size"), (uint32_t)VD));
  if (g->gdn.interval != 0)
    CK(gguf_writer_add_u32(s->w, KEY("full_attention_interval"), (uint32_t)(g->gdn.interval > 0 ? g->gdn.interval : 0)));
  const int32_t *sec = g->gdn.sections;
  if (sec[0] || sec[1] || sec[2] || sec[3])
    CK(gguf_writer_add_arr(s->w, KEY("rope.dimension_sections"), GGUF_TYPE_INT32, sec, 4));
#undef KEY
#define T(fmt, type, cols, rows, c, a)  \
  snprintf(name, sizeof name, fmt, i); \
  CK(testgen_add_tensor(s, name, type, cols, rows, c, a))
  CK(testgen_add_tensor(s, "token_embd.weight", g->type_embd, E, g->n_vocab, 0.0f, g->tied ? 3.0f * a_e : sqrtf(3.0f)));
  for (int i = 0; i < (int)g->n_layer; i++) {
    T("blk.%d.attn_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
    if ((i + 1) % interval != 0) { /* gated delta net */
      T("blk.%d.attn_qkv.weight", g->type, E, CD, 0.0f, a_e);
      T("blk.%d.attn_gate.weight", g->type, E, VD, 0.0f, a_e);
      T("blk.%d.ssm_conv1d.weight", TENSOR_TYPE_F32, g->d_conv, CD, 0.0f, 0.6f);
      T("blk.%d.ssm_dt.bias", TENSOR_TYPE_F32, nv, 0, 0.0f, 0.5f);
      T("blk.%d.ssm_a", TENSOR_TYPE_F32, nv, 0, g->gdn.positive_a ? 0.3f : -0.3f, 0.25f);
      if (fused) {
        T("blk.%d.ssm_ba.weight", g->type, E, 2 * nv, 0.0f, 2.0f * a_e);
      } else {
        T("blk.%d.ssm_beta.weight", g->type, E, nv, 0.0f, 2.0f * a_e);
        T("blk.%d.ssm_alpha.weight", g->type, E, nv, 0.0f, 2.0f * a_e);
      }
      T("blk.%d.ssm_norm.weight", TENSOR_TYPE_F32, VD / nv, 0, 1.0f, 0.1f);
      T("blk.%d.ssm_out.weight", g->type, VD, E, 0.0f, a_v);
    } else { /* gated attention: per head hd query rows then hd gate rows */
      T("blk.%d.attn_q.weight", g->type, E, 2 * Q, 0.0f, a_e);
      T("blk.%d.attn_k.weight", g->type, E, KV, 0.0f, a_e);
      T("blk.%d.attn_v.weight", g->type, E, KV, 0.0f, a_e);
      T("blk.%d.attn_output.weight", g->type, Q, E, 0.0f, a_q);
      T("blk.%d.attn_q_norm.weight", TENSOR_TYPE_F32, hd, 0, 1.0f, 0.3f);
      T("blk.%d.attn_k_norm.weight", TENSOR_TYPE_F32, hd, 0, 1.0f, 0.3f);
    }
    T("blk.%d.post_attention_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
    if (moe) {
      CK(testgen_add_experts(s, g, i, 0));
    } else {
      T("blk.%d.ffn_gate.weight", g->type, E, F, 0.0f, a_e);
      T("blk.%d.ffn_up.weight", g->type, E, F, 0.0f, a_e);
      T("blk.%d.ffn_down.weight", g->type, F, E, 0.0f, a_f);
    }
  }
  CK(testgen_add_tensor(s, "output_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f));
  if (!g->tied) CK(testgen_add_tensor(s, "output.weight", g->type, E, g->n_vocab, 0.0f, 3.0f * a_e));
#undef T
#undef CK
  return 0;
}
