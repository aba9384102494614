/*
 * moe_dec.c - the decoder every llama-shaped mixture-of-experts
 * architecture shares (qwen3moe.c, llama_moe.c, gptoss.c, qwen2moe.c,
 * olmoe.c, granitemoe.c): RMS-normed blocks of grouped-query attention
 * (dense.c's model_attn_*, with the row's RoPE style and its optional
 * per-head or whole-row q/k norms, q/k/v/o biases, attention sinks and
 * sliding-window layers) and a MoE feed-forward (moe.c) in every block,
 * optionally with granite's multipliers (e, r, s, L below; 1, 1,
 * 1/sqrt(head_dim), 1 otherwise). An architecture file is a model_moe_dec_spec
 * and its model_arch_ops row pointing at the functions below.
 *   x0  = token_embd[tok] * e
 *   h   = x + r (Wo attention_s(rope(Wq rms(x) + bq), rope(Wk rms(x) + bk), Wv rms(x) + bv) + bo)
 *   out = h + r moe(rms(h))
 * Logits = output rms(out) / L (token_embd when output.weight is absent).
 * Start reading at model_moe_dec_forward().
 */
#include <stdlib.h>

#include "base/err.h"
#include "model/moe.h"

typedef struct dec_layer {
  model_attn_layer a;
  model_moe_layer moe;
} dec_layer;

typedef struct dec_weights {
  model_io io;
  model_scales sc; /* granite's multipliers, or the identity */
  model_moe_hparams moe;
  dec_layer *layers; /* [n_layer] */
} dec_weights;

typedef struct dec_bufs {
  model_dense_bufs d;
  model_moe_bufs moe;
} dec_bufs;

int model_moe_dec_load(model *m) {
  const model_moe_dec_spec *sp = m->ops->spec;
  int rc = model_load_common_hparams(m, sp->rope_style);
  if (rc) return rc;
  if (sp->swa_pattern > 0 && (rc = model_load_swa_hparams(m, sp->swa_pattern, NULL, 0.0f))) return rc;
  dec_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  m->arch_data = w;
  if ((rc = model_moe_load_hparams(m, &sp->moe, &w->moe))) return rc;
  if (sp->granite_scales) {
    if ((rc = model_load_granite_scales(m, &w->sc))) return rc;
  } else {
    model_scales_none(m, &w->sc);
  }
  w->layers = calloc((size_t)m->hp.n_layer, sizeof *w->layers);
  if (!w->layers) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  if ((rc = model_io_bind(m, &w->io))) return rc;
  for (int i = 0; i < (int)m->hp.n_layer; i++) {
    if ((rc = model_attn_bind(m, &w->layers[i].a, i, sp->attn_flags)) ||
        (rc = model_moe_bind_layer(m, &w->moe, &w->layers[i].moe, i)))
      return rc;
    w->layers[i].a.scale = w->sc.attn;
  }
  return 0;
}

void model_moe_dec_unload(model *m) {
  dec_weights *w = m->arch_data;
  if (!w) return;
  free(w->layers);
  free(w);
  m->arch_data = NULL;
}

int model_moe_dec_ctx_init(model_ctx *c) {
  dec_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
  c->arch_data = b;
  const dec_weights *w = c->m->arch_data;
  int rc = model_dense_bufs_init(c, &b->d);
  if (!rc) rc = model_moe_bufs_init(c, &w->moe, &b->moe);
  return rc;
}

void model_moe_dec_ctx_free(model_ctx *c) {
  dec_bufs *b = c->arch_data;
  model_dense_bufs_free(&b->d);
  model_moe_bufs_free(&b->moe);
  free(b);
  c->arch_data = NULL;
}

void model_moe_dec_trim(model_ctx *c) {
  dec_bufs *b = c->arch_data;
  model_dense_bufs_trim(&b->d);
  model_moe_bufs_trim(&b->moe);
}

int model_moe_dec_forward(model_ctx *c, const model_step *st, float *logits) {
  const dec_weights *w = c->m->arch_data;
  dec_bufs *db = c->arch_data;
  model_dense_bufs *b = &db->d;
  const int64_t n = st->n, n_layer = c->m->hp.n_layer, E = c->m->hp.n_embd;
  const model_scales *sc = &w->sc;
  int rc;
  if ((rc = model_dense_embed(c, st, &w->io.tok_embd, b))) return rc;
  model_scale_rows(b->x, n * E, sc->embd);
  for (int64_t l = 0; l < n_layer; l++) {
    const dec_layer *L = &w->layers[l];
    if (l == 0) model_dense_norm(c, b, n, L->a.attn_norm);
    if ((rc = model_attn_forward(c, st, l, &L->a, b))) return rc;
    model_scale_rows(b->xn, n * E, sc->resid);
    model_dense_add_norm(c, b, n, L->a.ffn_norm); /* x += attention, xn = rms(x) */
    if ((rc = model_moe_ffn(c, &w->moe, &L->moe, &db->moe, b->xn, n))) return rc;
    model_scale_rows(b->xn, n * E, sc->resid);
    model_dense_add_norm(c, b, n, l + 1 < n_layer ? w->layers[l + 1].a.attn_norm : NULL);
  }
  if ((rc = model_io_logits(c, st, &w->io, b, logits))) return rc;
  model_scale_rows(logits, st->n_out * c->m->hp.n_vocab, 1.0f / sc->logit);
  return 0;
}
