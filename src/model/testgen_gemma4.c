/*
 * testgen_gemma4.c - the keys beyond the common ones and the tensors of a
 * random-weight gemma4 file, for model_testgen_arch_write (testgen_arch.c
 * writes the shared keys, the sliding pattern included, then calls
 * testgen_gemma4_write).
 *
 * Names, shapes and keys are the ones llama.cpp's converter writes (see
 * gemma4.c's header). Norm weights are 1 +- 0.1 (the converter stores
 * Gemma's 1 + w); rope_freqs.weight holds divisors 1..2 on the first half
 * of the full layers' pairs and 1e30 on the rest (proportional RoPE: the
 * tail of each head is not rotated); layer_output_scale is 0.5..1.
 * Layers n_layer - n_shared and later get no attn_k / attn_v / k norm;
 * full layers get no attn_v unless g4.v_full.
 */
#include "model/testgen_gemma4.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "gguf/gguf.h"
#include "kernels/tensor_type.h"

int testgen_gemma4_write(testgen_gen *s, const model_testgen_arch *g) {
  const int64_t E = g->n_embd, L = g->n_layer, P = g->g4.n_pl, n_kv = L - g->g4.n_shared;
  const int64_t hd_full = g->head_dim ? g->head_dim : E / g->n_head, hd_swa = g->g4.head_dim_swa;
  char key[128], name[96];
  int rc = 0;
  if (!g->swa_layers || hd_swa <= 0 || g->g4.n_shared < 0 || P < 0 || L > 64)
    return err_set(ERR_RANGE, "testgen: gemma4 needs swa_layers, g4.head_dim_swa > 0 and at most 64 layers");
#define CK(x) \
  if ((rc = (x))) return rc
#define KEY(suffix) (snprintf(key, sizeof key, "gemma4.%s", suffix), key)
#define N(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
  CK(gguf_writer_add_u32(s->w, KEY("attention.key_length_swa"), (uint32_t)hd_swa));
  CK(gguf_writer_add_u32(s->w, KEY("attention.value_length_swa"), (uint32_t)hd_swa));
  CK(gguf_writer_add_u32(s->w, KEY("attention.shared_kv_layers"), (uint32_t)g->g4.n_shared));
  CK(gguf_writer_add_u32(s->w, KEY("embedding_length_per_layer_input"), (uint32_t)P));
  CK(gguf_writer_add_f32(s->w, KEY("rope.freq_base_swa"), 10000.0f));
  if (g->g4.n_ff_shared > 0) {
    uint32_t ff[64];
    for (int64_t l = 0; l < L; l++) ff[l] = (uint32_t)(l >= n_kv ? g->g4.n_ff_shared : g->n_ff);
    CK(gguf_writer_add_arr(s->w, KEY("feed_forward_length"), GGUF_TYPE_UINT32, ff, (size_t)L));
  }
  const float a_e = sqrtf(3.0f / (float)E);
  CK(testgen_add_tensor(s, "token_embd.weight", g->type_embd, E, g->n_vocab, 0.0f, 1.0f));
  if (!g->tied) CK(testgen_add_tensor(s, "output.weight", g->type_embd, E, g->n_vocab, 0.0f, a_e));
  CK(testgen_add_tensor(s, "output_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f));
  /* the full layers' divisors: 1..2 on the first half of the pairs, 1e30 after */
  CK(testgen_add_tensor(s, "rope_freqs.weight", TENSOR_TYPE_F32, hd_full / 2, 0, 1.5f, 0.5f));
  if (!(s->missing && strcmp(s->missing, "rope_freqs.weight") == 0)) { /* the f32 buffer just kept */
    float *rf = s->bufs[s->n_bufs - 1];
    for (int64_t j = hd_full / 4; j < hd_full / 2; j++) rf[j] = 1e30f;
  }
  if (P > 0) {
    CK(testgen_add_tensor(s, "per_layer_token_embd.weight", g->type_embd, L * P, g->n_vocab, 0.0f, 1.0f));
    CK(testgen_add_tensor(s, "per_layer_model_proj.weight", g->type, E, L * P, 0.0f, a_e));
    CK(testgen_add_tensor(s, "per_layer_proj_norm.weight", TENSOR_TYPE_F32, P, 0, 1.0f, 0.1f));
  }
  for (int64_t l = 0; l < L; l++) {
    const int i = (int)l;
    const bool swa = g->swa_layers[l] != 0, kv = l < n_kv;
    const int64_t hd = swa ? hd_swa : hd_full, Q = g->n_head * hd, KV = g->n_head_kv * hd;
    const int64_t F = kv || g->g4.n_ff_shared <= 0 ? g->n_ff : g->g4.n_ff_shared;
    CK(testgen_add_tensor(s, N("blk.%d.attn_norm.weight", i), TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f));
    CK(testgen_add_tensor(s, N("blk.%d.attn_q.weight", i), g->type, E, Q, 0.0f, a_e));
    if (kv) {
      CK(testgen_add_tensor(s, N("blk.%d.attn_k.weight", i), g->type, E, KV, 0.0f, a_e));
      if (swa || g->g4.v_full) CK(testgen_add_tensor(s, N("blk.%d.attn_v.weight", i), g->type, E, KV, 0.0f, a_e));
      CK(testgen_add_tensor(s, N("blk.%d.attn_k_norm.weight", i), TENSOR_TYPE_F32, hd, 0, 1.0f, 0.1f));
    }
    CK(testgen_add_tensor(s, N("blk.%d.attn_q_norm.weight", i), TENSOR_TYPE_F32, hd, 0, 1.0f, 0.1f));
    CK(testgen_add_tensor(s, N("blk.%d.attn_output.weight", i), g->type, Q, E, 0.0f, sqrtf(3.0f / (float)Q)));
    CK(testgen_add_tensor(s, N("blk.%d.post_attention_norm.weight", i), TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f));
    CK(testgen_add_tensor(s, N("blk.%d.ffn_norm.weight", i), TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f));
    CK(testgen_add_tensor(s, N("blk.%d.ffn_gate.weight", i), g->type, E, F, 0.0f, a_e));
    CK(testgen_add_tensor(s, N("blk.%d.ffn_up.weight", i), g->type, E, F, 0.0f, a_e));
    CK(testgen_add_tensor(s, N("blk.%d.ffn_down.weight", i), g->type, F, E, 0.0f, sqrtf(3.0f / (float)F)));
    CK(testgen_add_tensor(s, N("blk.%d.post_ffw_norm.weight", i), TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f));
    if (P > 0) {
      CK(testgen_add_tensor(s, N("blk.%d.inp_gate.weight", i), g->type, E, P, 0.0f, a_e));
      CK(testgen_add_tensor(s, N("blk.%d.proj.weight", i), g->type, P, E, 0.0f, sqrtf(3.0f / (float)P)));
      CK(testgen_add_tensor(s, N("blk.%d.post_norm.weight", i), TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f));
    }
    if (g->g4.out_scale)
      CK(testgen_add_tensor(s, N("blk.%d.layer_output_scale.weight", i), TENSOR_TYPE_F32, 1, 0, 0.75f, 0.25f));
  }
#undef N
#undef KEY
#undef CK
  return 0;
}
