/*
 * testgen_dense.c - the tensors (and the few keys beyond the common ones)
 * of random-weight olmo2, exaone4, glm4 and nomic-bert files, for model_testgen_arch_write
 * (testgen_arch.c writes the shared keys, then calls testgen_dense_write).
 * Kept in its own file so each architecture's tensor list is one block
 * here rather than branches through the qwen/bert generator.
 *
 * Names and shapes are the ones llama.cpp's converter writes (see the
 * header comments of olmo2.c and glm4.c); values follow testgen_arch.h's
 * scaling rules, generated in file order from the generator's one stream.
 */
#include "model/testgen_dense.h"

#include <math.h>
#include <stdio.h>

#include "kernels/tensor_type.h"

bool testgen_dense_arch(enum model_arch a) {
  return a == MODEL_ARCH_OLMO2 || a == MODEL_ARCH_GLM4 || a == MODEL_ARCH_NOMIC_BERT || a == MODEL_ARCH_EXAONE4;
}

/* nomic-bert: token embeddings and types, the embedding LayerNorm, then per
 * layer the fused qkv, output, post-attention LayerNorm, SwiGLU and output
 * LayerNorm, no biases on the projections (nomic-embed-text v1.5). */
static int nomic_write(testgen_gen *s, const model_testgen_arch *g) {
  const int64_t E = g->n_embd, hd = g->head_dim ? g->head_dim : E / g->n_head, Q = g->n_head * hd,
                KV = g->n_head_kv * hd, F = g->n_ff;
  const float a_e = sqrtf(3.0f / (float)E), a_q = sqrtf(3.0f / (float)Q), a_f = sqrtf(3.0f / (float)F);
  char name[96];
  int rc = 0;
#define CK(x) \
  if ((rc = (x))) return rc
#define T(fmt, type, cols, rows, c, a)  \
  snprintf(name, sizeof name, fmt, i); \
  CK(testgen_add_tensor(s, name, type, cols, rows, c, a))
  CK(testgen_add_tensor(s, "token_embd.weight", g->type_embd, E, g->n_vocab, 0.0f, 1.0f));
  CK(testgen_add_tensor(s, "token_types.weight", g->type_embd, E, 2, 0.0f, 0.5f));
  CK(testgen_add_tensor(s, "token_embd_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f));
  CK(testgen_add_tensor(s, "token_embd_norm.bias", TENSOR_TYPE_F32, E, 0, 0.0f, 0.1f));
  for (int i = 0; i < (int)g->n_layer; i++) {
    T("blk.%d.attn_qkv.weight", g->type, E, Q + 2 * KV, 0.0f, 2.0f * a_e); /* sharper attention than uniform */
    T("blk.%d.attn_output.weight", g->type, Q, E, 0.0f, a_q);
    T("blk.%d.attn_output_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
    T("blk.%d.attn_output_norm.bias", TENSOR_TYPE_F32, E, 0, 0.0f, 0.1f);
    T("blk.%d.ffn_up.weight", g->type, E, F, 0.0f, a_e);
    T("blk.%d.ffn_gate.weight", g->type, E, F, 0.0f, a_e);
    T("blk.%d.ffn_down.weight", g->type, F, E, 0.0f, a_f);
    T("blk.%d.layer_output_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
    T("blk.%d.layer_output_norm.bias", TENSOR_TYPE_F32, E, 0, 0.0f, 0.1f);
  }
#undef T
#undef CK
  return 0;
}

int testgen_dense_write(testgen_gen *s, const model_testgen_arch *g) {
  const int64_t E = g->n_embd, hd = g->head_dim ? g->head_dim : E / g->n_head, Q = g->n_head * hd,
                KV = g->n_head_kv * hd, F = g->n_ff;
  if (g->arch == MODEL_ARCH_NOMIC_BERT) return nomic_write(s, g);
  const bool glm4 = g->arch == MODEL_ARCH_GLM4;
  const float a_e = sqrtf(3.0f / (float)E), a_q = sqrtf(3.0f / (float)Q), a_f = sqrtf(3.0f / (float)F);
  char name[96];
  int rc = 0;
#define CK(x) \
  if ((rc = (x))) return rc
#define T(fmt, type, cols, rows, c, a)  \
  snprintf(name, sizeof name, fmt, i); \
  CK(testgen_add_tensor(s, name, type, cols, rows, c, a))
  const float a_embd = g->tied ? 3.0f * a_e : sqrtf(3.0f);
  CK(testgen_add_tensor(s, "token_embd.weight", g->type_embd, E, g->n_vocab, 0.0f, a_embd));
  for (int i = 0; i < (int)g->n_layer; i++) {
    if (glm4) {
      T("blk.%d.attn_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
      if (g->fused_qkv) {
        T("blk.%d.attn_qkv.weight", g->type, E, Q + 2 * KV, 0.0f, a_e);
        T("blk.%d.attn_qkv.bias", TENSOR_TYPE_F32, Q + 2 * KV, 0, 0.0f, 0.5f);
      } else {
        T("blk.%d.attn_q.weight", g->type, E, Q, 0.0f, a_e);
        T("blk.%d.attn_k.weight", g->type, E, KV, 0.0f, a_e);
        T("blk.%d.attn_v.weight", g->type, E, KV, 0.0f, a_e);
        T("blk.%d.attn_q.bias", TENSOR_TYPE_F32, Q, 0, 0.0f, 0.5f);
        T("blk.%d.attn_k.bias", TENSOR_TYPE_F32, KV, 0, 0.0f, 0.5f);
        T("blk.%d.attn_v.bias", TENSOR_TYPE_F32, KV, 0, 0.0f, 0.5f);
      }
    } else {
      /* olmo2, exaone4: no input norm, so q and k see x of order one;
       * q/k norms over the whole projection (olmo2) or one head (exaone4) */
      const bool ex = g->arch == MODEL_ARCH_EXAONE4;
      T("blk.%d.attn_q.weight", g->type, E, Q, 0.0f, a_e);
      T("blk.%d.attn_k.weight", g->type, E, KV, 0.0f, a_e);
      T("blk.%d.attn_v.weight", g->type, E, KV, 0.0f, a_e);
      T("blk.%d.attn_q_norm.weight", TENSOR_TYPE_F32, ex ? hd : Q, 0, 1.0f, 0.3f);
      T("blk.%d.attn_k_norm.weight", TENSOR_TYPE_F32, ex ? hd : KV, 0, 1.0f, 0.3f);
    }
    T("blk.%d.attn_output.weight", g->type, Q, E, 0.0f, a_q);
    T("blk.%d.post_attention_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
    if (glm4) {
      T("blk.%d.ffn_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
      T("blk.%d.ffn_up.weight", g->type, E, 2 * F, 0.0f, a_e); /* gate rows, then up rows */
    } else {
      T("blk.%d.ffn_gate.weight", g->type, E, F, 0.0f, a_e);
      T("blk.%d.ffn_up.weight", g->type, E, F, 0.0f, a_e);
    }
    T("blk.%d.ffn_down.weight", g->type, F, E, 0.0f, a_f);
    T("blk.%d.post_ffw_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
  }
  CK(testgen_add_tensor(s, "output_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f));
  if (!g->tied) CK(testgen_add_tensor(s, "output.weight", g->type, E, g->n_vocab, 0.0f, 3.0f * a_e));
#undef T
#undef CK
  return 0;
}
