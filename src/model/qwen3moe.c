/*
 * qwen3moe.c - the qwen3moe architecture (general.architecture =
 * "qwen3moe"): Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B.
 *
 * A qwen3 decoder (qwen.c: NeoX RoPE, per-head RMS norms of q and k before
 * RoPE, head_dim from attention.key_length, no biases) whose every block's
 * feed-forward is a mixture of experts (moe.c): router softmax over
 * expert_count experts, the top expert_used_count of them, weights
 * renormalised to sum 1 (Hugging Face's norm_topk_prob, true for every
 * released Qwen3 MoE; expert_weights_norm in a file overrides it), experts
 * SwiGLU of width expert_feed_forward_length, no shared expert.
 *   h   = x + Wo attention(rope(q_norm(Wq rms(x))), rope(k_norm(Wk rms(x))), Wv rms(x))
 *   out = h + sum_j w_j down_j(silu(gate_j rms(h)) * up_j rms(h))
 * Logits = output rms(out) (token_embd when output.weight is absent).
 * Start reading at q3m_forward().
 */
#include <stdlib.h>

#include "base/err.h"
#include "model/moe.h"

typedef struct q3m_layer {
  model_attn_layer a;
  model_moe_layer moe;
} q3m_layer;

typedef struct q3m_weights {
  model_io io;
  model_moe_hparams moe;
  q3m_layer *layers; /* [n_layer] */
} q3m_weights;

typedef struct q3m_bufs {
  model_dense_bufs d;
  model_moe_bufs moe;
} q3m_bufs;

static const model_moe_defaults Q3M_MOE = {.gating = MODEL_MOE_SOFTMAX, .norm_w = true};

static int q3m_load(model *m) {
  int rc = model_load_common_hparams(m, OPS_ROPE_NEOX);
  if (rc) return rc;
  q3m_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  m->arch_data = w;
  if ((rc = model_moe_load_hparams(m, &Q3M_MOE, &w->moe))) return rc;
  w->layers = calloc((size_t)m->hp.n_layer, sizeof *w->layers);
  if (!w->layers) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  if ((rc = model_io_bind(m, &w->io))) return rc;
  for (int i = 0; i < (int)m->hp.n_layer; i++)
    if ((rc = model_attn_bind(m, &w->layers[i].a, i, MODEL_ATTN_QK_NORM)) ||
        (rc = model_moe_bind_layer(m, &w->moe, &w->layers[i].moe, i)))
      return rc;
  return 0;
}

static void q3m_unload(model *m) {
  q3m_weights *w = m->arch_data;
  if (!w) return;
  free(w->layers);
  free(w);
  m->arch_data = NULL;
}

static int q3m_ctx_init(model_ctx *c) {
  q3m_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
  c->arch_data = b;
  const q3m_weights *w = c->m->arch_data;
  int rc = model_dense_bufs_init(c, &b->d);
  if (!rc) rc = model_moe_bufs_init(c, &w->moe, &b->moe);
  return rc;
}

static void q3m_ctx_free(model_ctx *c) {
  q3m_bufs *b = c->arch_data;
  model_dense_bufs_free(&b->d);
  model_moe_bufs_free(&b->moe);
  free(b);
  c->arch_data = NULL;
}

static void q3m_ctx_trim(model_ctx *c) {
  q3m_bufs *b = c->arch_data;
  model_dense_bufs_trim(&b->d);
  model_moe_bufs_trim(&b->moe);
}

static int q3m_forward(model_ctx *c, const model_step *st, float *logits) {
  const q3m_weights *w = c->m->arch_data;
  q3m_bufs *qb = c->arch_data;
  model_dense_bufs *b = &qb->d;
  const int64_t n = st->n, n_layer = c->m->hp.n_layer;
  int rc;
  if ((rc = model_dense_embed(c, st, &w->io.tok_embd, b))) return rc;
  for (int64_t l = 0; l < n_layer; l++) {
    const q3m_layer *L = &w->layers[l];
    if (l == 0) model_dense_norm(c, b, n, L->a.attn_norm);
    if ((rc = model_attn_forward(c, st, l, &L->a, b))) return rc;
    model_dense_add_norm(c, b, n, L->a.ffn_norm); /* x += attention, xn = rms(x) */
    if ((rc = model_moe_ffn(c, &w->moe, &L->moe, &qb->moe, b->xn, n))) return rc;
    model_dense_add_norm(c, b, n, l + 1 < n_layer ? w->layers[l + 1].a.attn_norm : NULL);
  }
  return model_io_logits(c, st, &w->io, b, logits);
}

const model_arch_ops model_arch_qwen3moe = {
    .name = "qwen3moe",
    .load = q3m_load,
    .unload = q3m_unload,
    .ctx_init = q3m_ctx_init,
    .ctx_free = q3m_ctx_free,
    .forward = q3m_forward,
    .trim = q3m_ctx_trim,
    .moe = true,
};
