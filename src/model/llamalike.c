/*
 * llamalike.c - decoders whose block is llama's (llama.c) with a twist each,
 * one shared forward pass and a load function per row:
 *
 *   phi3     (general.architecture "phi3": Phi-3/3.5 mini and medium,
 *            Phi-4, Phi-4-mini). The converter fuses q/k/v into
 *            blk.N.attn_qkv [q | k | v rows] and gate/up into blk.N.ffn_up
 *            [gate | up rows] (separate attn_q/k/v are accepted too); both
 *            are bound as row ranges (model_bind_matrix_parts), so the
 *            products are the ones llama runs. RoPE is the NeoX style over
 *            the first rope.dimension_count dimensions (Phi-4-mini: 96 of
 *            128). LongRoPE ("su") files carry rope_factors_short.weight and
 *            rope_factors_long.weight [n_rot/2], per-pair divisors of the
 *            angle: a context longer than rope.scaling.original_context_length
 *            uses the long ones, otherwise the short (chosen per context, as
 *            llama.cpp does from its context size), and the cos/sin of every
 *            pair are multiplied by rope.scaling.attn_factor (the converter's
 *            sqrt(1 + ln(s) / ln(L_orig)); hp.rope.attn_factor, read by
 *            model_load_common_hparams for every architecture).
 *            attention.sliding_window, when the file declares one smaller
 *            than the trained context, applies
 *            to every layer (Phi-3-mini-4k: 2047); 0 (Phi-4) or one beyond
 *            the context (Phi-3.5: 262144 of 131072) never slides. llama.cpp
 *            currently ignores Phi's window; Hugging Face's implementation
 *            applies it, as here.
 *   granite  (Granite 3.x dense). Four multipliers: the embedding is scaled
 *            by ARCH.embedding_scale, each sub-layer's output by
 *            ARCH.residual_scale before its residual add, scores by
 *            ARCH.attention.scale instead of 1/sqrt(head_dim), and the
 *            logits are divided by ARCH.logit_scale (required; the other
 *            three: 0 or absent = none). rope.scaling.finetuned false turns
 *            RoPE off (llama.cpp's reading; default true).
 *   smollm3  (SmolLM3): no RoPE on every fourth layer (layers 3, 7, ...:
 *            model_hparams.nope_step). No key carries the step: llama.cpp
 *            and the checkpoint's no_rope_layer_interval both say 4.
 *   mistral3 (Ministral 3, Mistral Small 3.x text): llama's tensors and
 *            pairs, YaRN RoPE (the shared rotation, model.c) with its
 *            magnitude from rope.scaling.yarn_log_multiplier
 *            (model_rope_yarn_log_mul), and Llama 4's attention temperature:
 *            with ARCH.attention.temperature_scale b != 0, the query of the
 *            token at position p is multiplied by 1 + b ln(floor(p / L) + 1),
 *            L = rope.scaling.original_context_length (default the trained
 *            context), as llama.cpp's llm_graph_input_attn_temp does.
 *
 * One block, for x[n][n_embd]:
 *   h   = x + r * Wo attention(rope_l(Wq rms(x)), rope_l(Wk rms(x)), Wv rms(x))
 *   out = h + r * Wdown (silu(Wgate rms(h)) * Wup rms(h))
 * with r = residual_scale (1 unless granite), rope_l the identity on NoPE
 * layers, x0 = token_embd[tok] * embedding_scale, logits = output rms(out)
 * / logit_scale (output = token_embd when output.weight is absent).
 *
 * Start reading at ll_forward(); the per-architecture facts are in
 * ll_weights, filled by phi3_load / granite_load / smollm3_load /
 * mistral3_load.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/model_int.h"

typedef struct ll_layer {
  const float *attn_norm;  /* [n_embd] */
  model_tensor wq;         /* [n_head*head_dim rows][n_embd cols] (phi3: rows of attn_qkv) */
  model_tensor wk;         /* [n_head_kv*head_dim][n_embd] */
  model_tensor wv;         /* [n_head_kv*head_dim][n_embd] */
  model_tensor wo;         /* [n_embd][n_head*head_dim] */
  const float *ffn_norm;   /* [n_embd] */
  model_tensor gate;       /* [n_ff][n_embd] (phi3: the first n_ff rows of ffn_up) */
  model_tensor up;         /* [n_ff][n_embd] (phi3: the last n_ff rows of ffn_up) */
  model_tensor down;       /* [n_embd][n_ff] */
} ll_layer;

typedef struct ll_weights {
  model_tensor tok_embd;     /* [n_vocab][n_embd] */
  ll_layer *layers;          /* [n_layer] */
  const float *output_norm;  /* [n_embd] */
  model_tensor output;       /* [n_vocab][n_embd]; tok_embd when tied */
  model_scales sc;           /* granite's multipliers; the identity for
                                the other rows */
  float temp_scale;          /* mistral3: query temperature b; 0 = none */
  int64_t temp_len;          /* mistral3: positions per temperature step L */
  /* phi3 LongRoPE: [n_rot/2] angle divisors or NULL, and the context
   * length above which the long ones apply */
  const float *rope_short, *rope_long;
  int64_t n_ctx_orig;
} ll_weights;

typedef struct ll_bufs {
  model_dense_bufs d;
  ops_rope rope;  /* hp.rope with this context's LongRoPE factors */
} ll_bufs;

static bool has_tensor(model *m, const char *fmt, int i) {
  char name[96];
  snprintf(name, sizeof name, fmt, i);
  return gguf_find_tensor(m->f, name) != NULL;
}

/* Binds what every row has (norms, wo, down, output) and, when the file has
 * no fused attn_qkv / ffn_up, the separate q/k/v and gate/up. */
static int ll_bind(model *m, ll_weights *w, bool fused) {
  model_hparams *hp = &m->hp;
  int rc;
  const gguf_tensor *te = gguf_find_tensor(m->f, "token_embd.weight");
  if (!te) return err_set(ERR_NOT_FOUND, "tensor 'token_embd.weight' is missing");
  if (te->n_dims != 2 || te->dims[1] > (uint64_t)INT32_MAX)
    return err_set(ERR_RANGE, "tensor 'token_embd.weight' has %u dims and %llu rows, expected 2 dims and < 2^31 rows",
                   te->n_dims, (unsigned long long)te->dims[1]);
  hp->n_vocab = (int64_t)te->dims[1];
  w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
  if (!w->layers) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim, F = hp->n_ff;
  /* tied: token_embd is also the output matrix, copied and repacked (llama.c) */
  const bool tied = gguf_find_tensor(m->f, "output.weight") == NULL;
  if ((rc = model_bind_matrix(m, &w->tok_embd, E, hp->n_vocab, tied ? 0 : MODEL_BIND_ROWS, "token_embd.weight")))
    return rc;
  for (int64_t l = 0; l < hp->n_layer; l++) {
    ll_layer *L = &w->layers[l];
    int i = (int)l;
    if ((rc = model_bind_vector(m, &L->attn_norm, E, 0, "blk.%d.attn_norm.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wo, Q, E, 0, "blk.%d.attn_output.weight", i)) ||
        (rc = model_bind_vector(m, &L->ffn_norm, E, 0, "blk.%d.ffn_norm.weight", i)) ||
        (rc = model_bind_matrix(m, &L->down, F, E, 0, "blk.%d.ffn_down.weight", i)))
      return rc;
    model_tensor qkv[3], gu[2];
    const int64_t qkv_rows[3] = {Q, KV, KV}, gu_rows[2] = {F, F};
    if (fused && (rc = model_bind_matrix_parts(m, qkv, 3, qkv_rows, E, MODEL_BIND_OPTIONAL,
                                               "blk.%d.attn_qkv.weight", i)))
      return rc;
    if (fused && qkv[0].data) {
      L->wq = qkv[0], L->wk = qkv[1], L->wv = qkv[2];
    } else if (fused && !has_tensor(m, "blk.%d.attn_q.weight", i)) {
      return err_set(ERR_NOT_FOUND, "tensor 'blk.%d.attn_qkv.weight' is missing (nor are there separate attn_q/k/v)",
                     i);
    } else if ((rc = model_bind_matrix(m, &L->wq, E, Q, 0, "blk.%d.attn_q.weight", i)) ||
               (rc = model_bind_matrix(m, &L->wk, E, KV, 0, "blk.%d.attn_k.weight", i)) ||
               (rc = model_bind_matrix(m, &L->wv, E, KV, 0, "blk.%d.attn_v.weight", i))) {
      return rc;
    }
    if (fused) {
      if ((rc = model_bind_matrix_parts(m, gu, 2, gu_rows, E, 0, "blk.%d.ffn_up.weight", i))) return rc;
      L->gate = gu[0], L->up = gu[1];
    } else if ((rc = model_bind_matrix(m, &L->gate, E, F, 0, "blk.%d.ffn_gate.weight", i)) ||
               (rc = model_bind_matrix(m, &L->up, E, F, 0, "blk.%d.ffn_up.weight", i))) {
      return rc;
    }
  }
  if ((rc = model_bind_vector(m, &w->output_norm, E, 0, "output_norm.weight"))) return rc;
  if ((rc = model_bind_matrix(m, &w->output, E, hp->n_vocab, MODEL_BIND_OPTIONAL, "output.weight"))) return rc;
  if (!w->output.data) w->output = w->tok_embd;
  return 0;
}

/* The row's weights struct with llama's defaults (no multipliers). */
static ll_weights *ll_new(model *m) {
  ll_weights *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  m->arch_data = w;
  model_scales_none(m, &w->sc);
  return w;
}

/* One LongRoPE factor vector: present with the other, finite and > 0. */
static int phi3_factors(model *m, const char *name, const float **out) {
  const int64_t n = m->hp.rope.n_rot / 2;
  int rc = model_bind_vector(m, out, n, MODEL_BIND_OPTIONAL, "%s", name);
  if (rc || !*out) return rc;
  for (int64_t i = 0; i < n; i++)
    if (!isfinite((*out)[i]) || !((*out)[i] > 0.0f))
      return err_set(ERR_RANGE, "tensor '%s': factor %lld is %g, expected a finite number > 0", name, (long long)i,
                     (*out)[i]);
  return 0;
}

static int phi3_load(model *m) {
  model_hparams *hp = &m->hp;
  int rc = model_load_common_hparams(m, OPS_ROPE_NEOX);
  if (rc) return rc;
  ll_weights *w = ll_new(m);
  if (!w) return err_set(ERR_NOMEM, "phi3: out of memory");
  /* every layer slides when the file declares a window inside the trained
   * context; 0 and windows reaching past it never cut anything */
  int64_t win = 0, zero = 0;
  if ((rc = model_key_i64(m, "attention.sliding_window", &zero, 0, INT32_MAX, &win))) return rc;
  if (win > 0 && win < hp->n_ctx_train) {
    hp->n_swa = win;
    hp->swa_pattern = 0;
  }
  if ((rc = phi3_factors(m, "rope_factors_short.weight", &w->rope_short)) ||
      (rc = phi3_factors(m, "rope_factors_long.weight", &w->rope_long)))
    return rc;
  if (!w->rope_short != !w->rope_long)
    return err_set(ERR_NOT_FOUND, "tensor '%s' is missing: LongRoPE needs both rope_factors_short and _long",
                   w->rope_short ? "rope_factors_long.weight" : "rope_factors_short.weight");
  if (w->rope_short && hp->rope.freq_factors)
    return err_set(ERR_RANGE, "phi3: rope_freqs.weight and LongRoPE factors are both present");
  if ((rc = model_key_i64(m, "rope.scaling.original_context_length", &hp->n_ctx_train, 1, hp->n_ctx_train,
                          &w->n_ctx_orig)))
    return rc;
  return ll_bind(m, w, true);
}

static int granite_load(model *m) {
  int rc = model_load_common_hparams(m, OPS_ROPE_NORMAL);
  if (rc) return rc;
  ll_weights *w = ll_new(m);
  if (!w) return err_set(ERR_NOMEM, "granite: out of memory");
  if ((rc = model_load_granite_scales(m, &w->sc))) return rc;
  return ll_bind(m, w, false);
}

static int smollm3_load(model *m) {
  int rc = model_load_common_hparams(m, OPS_ROPE_NORMAL);
  if (rc) return rc;
  m->hp.nope_step = 4;
  ll_weights *w = ll_new(m);
  if (!w) return err_set(ERR_NOMEM, "smollm3: out of memory");
  return ll_bind(m, w, false);
}

static int mistral3_load(model *m) {
  model_hparams *hp = &m->hp;
  int rc = model_load_common_hparams(m, OPS_ROPE_NORMAL);
  if (rc || (rc = model_rope_yarn_log_mul(m, 1.0f))) return rc;
  ll_weights *w = ll_new(m);
  if (!w) return err_set(ERR_NOMEM, "mistral3: out of memory");
  const float zero = 0.0f;
  if ((rc = model_key_f32(m, "attention.temperature_scale", &zero, &w->temp_scale))) return rc;
  if (w->temp_scale < 0.0f || w->temp_scale > 10.0f)
    return err_set(ERR_RANGE, "key 'mistral3.attention.temperature_scale' is %g, expected 0 .. 10", w->temp_scale);
  if ((rc = model_key_i64(m, "rope.scaling.original_context_length", &hp->n_ctx_train, 1, hp->n_ctx_train,
                          &w->temp_len)))
    return rc;
  return ll_bind(m, w, false);
}

static void ll_unload(model *m) {
  ll_weights *w = m->arch_data;
  if (!w) return;
  free(w->layers);
  free(w);
  m->arch_data = NULL;
}

static int ll_ctx_init(model_ctx *c) {
  const ll_weights *w = c->m->arch_data;
  ll_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
  c->arch_data = b;
  b->rope = c->m->hp.rope;
  if (w->rope_short) b->rope.freq_factors = c->n_ctx > w->n_ctx_orig ? w->rope_long : w->rope_short;
  return model_dense_bufs_init(c, &b->d);
}

static void ll_ctx_free(model_ctx *c) {
  ll_bufs *b = c->arch_data;
  model_dense_bufs_free(&b->d);
  free(b);
  c->arch_data = NULL;
}

static void ll_ctx_trim(model_ctx *c) { model_dense_bufs_trim(&((ll_bufs *)c->arch_data)->d); }

static int ll_forward(model_ctx *c, const model_step *st, float *logits) {
  const int64_t n = st->n;
  const model_hparams *hp = &c->m->hp;
  const ll_weights *w = c->m->arch_data;
  ll_bufs *lb = c->arch_data;
  model_dense_bufs *b = &lb->d;
  const ops_rope *rope = &lb->rope;
  const int64_t E = hp->n_embd, hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd;
  const int32_t n_rot = rope->n_rot;
  int rc;

  for (int64_t t = 0; t < n; t++) {
    if ((rc = model_tensor_row_f32(&w->tok_embd, st->tokens[t], b->x + t * E))) return rc;
    ops_rope_cache(rope, st->pos[t], c->rope_cs + t * n_rot);
  }
  model_scale_rows(b->x, n * E, w->sc.embd);
  model_prof_mark(c, MODEL_PROF_EMBED);

  for (int64_t l = 0; l < hp->n_layer; l++) {
    const ll_layer *L = &w->layers[l];
    if (l == 0) model_dense_norm(c, b, n, L->attn_norm); /* later layers': the previous layer's last add */
    const model_tensor *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *const qkv_y[3] = {b->q, b->k, b->v};
    if ((rc = model_matmul_multi(c, 3, qkv, qkv_y, b->xn, n))) return rc;
    model_prof_mark(c, MODEL_PROF_QKV);
    if (model_layer_rope(hp, l))
      for (int64_t t = 0; t < n; t++) {
        ops_rope_apply_cached(rope, c->rope_cs + t * n_rot, b->q + t * Q, (int32_t)hp->n_head, (int32_t)hd);
        ops_rope_apply_cached(rope, c->rope_cs + t * n_rot, b->k + t * KV, (int32_t)hp->n_head_kv, (int32_t)hd);
      }
    if (w->temp_scale != 0.0f) /* Llama 4 temperature, after RoPE (k is stored as rotated) */
      for (int64_t t = 0; t < n; t++)
        model_scale_rows(b->q + t * Q, Q,
                         1.0f + w->temp_scale * logf(floorf((float)st->pos[t] / (float)w->temp_len) + 1.0f));
    model_kv_store(c, l, st, b->k, b->v);
    model_prof_mark(c, MODEL_PROF_ROPE_KV);
    if ((rc = model_attention(c, l, st, b->q, b->att, w->sc.attn))) return rc;
    model_prof_mark(c, MODEL_PROF_ATTN);
    if ((rc = model_matmul(c, &L->wo, b->att, n, b->xn))) return rc;
    model_prof_mark(c, MODEL_PROF_WO);
    model_scale_rows(b->xn, n * E, w->sc.resid);
    model_dense_add_norm(c, b, n, L->ffn_norm); /* x += r Wo . att, xn = rms(x) */
    if ((rc = model_dense_ffn(c, &L->gate, &L->up, &L->down, b, n))) return rc;
    model_scale_rows(b->xn, n * E, w->sc.resid);
    /* x += r ffn, xn = the next layer's rms(x) */
    model_dense_add_norm(c, b, n, l + 1 < hp->n_layer ? w->layers[l + 1].attn_norm : NULL);
  }

  if (st->n_out == 0) return 0;
  model_dense_out_norm(c, st, b, w->output_norm);
  rc = model_matmul(c, &w->output, b->xn, st->n_out, logits);
  if (rc == 0) model_scale_rows(logits, st->n_out * hp->n_vocab, 1.0f / w->sc.logit);
  model_prof_mark(c, MODEL_PROF_LOGITS);
  return rc;
}

#define LL_ROW(nm, loader)                                                                              \
  {                                                                                                     \
    .name = nm, .load = loader, .unload = ll_unload, .ctx_init = ll_ctx_init, .ctx_free = ll_ctx_free, \
    .forward = ll_forward, .trim = ll_ctx_trim,                                                         \
  }

const model_arch_ops model_arch_phi3 = LL_ROW("phi3", phi3_load);
const model_arch_ops model_arch_granite = LL_ROW("granite", granite_load);
const model_arch_ops model_arch_smollm3 = LL_ROW("smollm3", smollm3_load);
const model_arch_ops model_arch_mistral3 = LL_ROW("mistral3", mistral3_load);
