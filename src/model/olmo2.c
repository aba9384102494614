/*
 * olmo2.c - the olmo2 architecture (general.architecture = "olmo2"): AI2's
 * OLMo 2 (1B, 7B, 13B, 32B) and files converted to the same tensor names.
 *
 * A decoder with RMS norms, SwiGLU and grouped query attention like llama.c,
 * but the norms sit after each sub-layer instead of before it ("post-norm
 * inside the residual"), and q and k are RMS-normalized over their whole
 * projected width (all heads at once, not per head as qwen3 does) before
 * RoPE. Tensor names and keys as llama.cpp's converter writes them:
 *   blk.N.attn_{q,k,v,output}.weight, blk.N.attn_q_norm.weight [n_head*hd],
 *   blk.N.attn_k_norm.weight [n_head_kv*hd], blk.N.post_attention_norm,
 *   blk.N.ffn_{gate,up,down}.weight, blk.N.post_ffw_norm; no attn_norm or
 *   ffn_norm. RoPE is the NeoX style.
 * One block, for x[n][n_embd]:
 *   q = rms(Wq x) * q_norm, k = rms(Wk x) * k_norm, v = Wv x
 *   h   = x + rms(Wo attention(rope(q), rope(k), v)) * post_attention_norm
 *   out = h + rms(Wdown (silu(Wgate h) * Wup h)) * post_ffw_norm
 * Logits = output rms(out) (token_embd when output.weight is absent).
 *
 * OLMo 3 files carry the same architecture name with a sliding window
 * (ARCH.attention.sliding_window); those are refused by name until this
 * file runs per-layer windows.
 *
 * exaone4 (general.architecture = "exaone4": LG's EXAONE 4.0 1.2B and 32B)
 * is the same block with two differences, as llama.cpp reads its files:
 *   - q and k are RMS-normalized per head (attn_{q,k}_norm [head_dim]), as
 *     qwen3 does, before RoPE;
 *   - the 64-layer file (32B) alternates three sliding-window layers and
 *     one global layer (ARCH.attention.sliding_window, 4096 when absent;
 *     ARCH.attention.sliding_window_pattern, 4 when absent), and only the
 *     sliding layers rotate: the global ones are NoPE (hp.nope_step =
 *     the pattern, so layer l skips RoPE when (l + 1) % 4 == 0). Files of
 *     other depths (1.2B, 30 layers) attend globally with RoPE everywhere,
 *     whatever sliding_window says. Every layer rotates with rope.freq_base
 *     (llama.cpp's graph ignores rope.freq_base_swa here), with
 *     rope_freqs.weight when the file has one.
 * MTP layers (ARCH.nextn_predict_layers > 0) are refused by name.
 *
 * Start reading at olmo2_forward(); buffers are model_dense_bufs (dense.c):
 * the block's products read b->x directly (there is no input norm), and
 * the feed-forward, which replaces its input rows, gets a copy of h in xn.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/model_int.h"

typedef struct olmo2_layer {
  model_tensor wq;         /* [n_head*head_dim rows][n_embd cols] */
  model_tensor wk;         /* [n_head_kv*head_dim][n_embd] */
  model_tensor wv;         /* [n_head_kv*head_dim][n_embd] */
  const float *q_norm;     /* [n_head*head_dim]; exaone4 [head_dim] */
  const float *k_norm;     /* [n_head_kv*head_dim]; exaone4 [head_dim] */
  model_tensor wo;         /* [n_embd][n_head*head_dim] */
  const float *post_attn;  /* [n_embd] post_attention_norm */
  model_tensor gate;       /* [n_ff][n_embd] */
  model_tensor up;         /* [n_ff][n_embd] */
  model_tensor down;       /* [n_embd][n_ff] */
  const float *post_ffn;   /* [n_embd] post_ffw_norm */
} olmo2_layer;

typedef struct olmo2_weights {
  bool qk_whole;             /* the q and k norms cover the whole projection
                                (olmo2), not one head (exaone4) */
  model_tensor tok_embd;     /* [n_vocab][n_embd] */
  olmo2_layer *layers;       /* [n_layer] */
  const float *output_norm;  /* [n_embd] */
  model_tensor output;       /* [n_vocab][n_embd]; tok_embd when tied */
} olmo2_weights;

/* exaone4's keys beyond the common ones (see the header). */
static int exaone4_hparams(model *m) {
  model_hparams *hp = &m->hp;
  int64_t nextn = 0, zero = 0;
  int rc = model_key_i64(m, "nextn_predict_layers", &zero, 0, INT32_MAX, &nextn);
  if (rc) return rc;
  if (nextn > 0)
    return err_set(ERR_UNSUPPORTED, "key 'exaone4.nextn_predict_layers' is %lld: MTP layers are not supported",
                   (long long)nextn);
  if (hp->n_layer != 64) return 0; /* 1.2B: global attention, RoPE on every layer */
  const int64_t def_window = 4096;
  if ((rc = model_load_swa_hparams(m, 4, &def_window, 0.0f))) return rc;
  hp->rope_swa = hp->rope; /* the graph rotates every layer with the main base */
  /* the global layers (l % P == P - 1) skip RoPE; P = 1 (an array of all
   * global layers) is a file without sliding, where every layer rotates */
  hp->nope_step = hp->swa_pattern > 1 ? hp->swa_pattern : 0;
  return 0;
}

static int olmo2_load(model *m) {
  model_hparams *hp = &m->hp;
  const bool exaone4 = m->arch == MODEL_ARCH_EXAONE4;
  int rc = model_load_common_hparams(m, OPS_ROPE_NEOX);
  if (rc) return rc;
  int64_t window = 0, zero = 0;
  if (exaone4) {
    if ((rc = exaone4_hparams(m))) return rc;
  } else if ((rc = model_key_i64(m, "attention.sliding_window", &zero, 0, INT64_MAX, &window))) {
    return rc;
  }
  if (window > 0)
    return err_set(ERR_UNSUPPORTED,
                   "key 'olmo2.attention.sliding_window' is %lld: sliding-window olmo2 files (OLMo 3) are not "
                   "supported yet",
                   (long long)window);
  const gguf_tensor *te = gguf_find_tensor(m->f, "token_embd.weight");
  if (!te) return err_set(ERR_NOT_FOUND, "tensor 'token_embd.weight' is missing");
  if (te->n_dims != 2 || te->dims[1] > (uint64_t)INT32_MAX)
    return err_set(ERR_RANGE, "tensor 'token_embd.weight' has %u dims and %llu rows, expected 2 dims and < 2^31 rows",
                   te->n_dims, (unsigned long long)te->dims[1]);
  hp->n_vocab = (int64_t)te->dims[1];

  olmo2_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  m->arch_data = w;
  w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
  if (!w->layers) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim, F = hp->n_ff;
  w->qk_whole = !exaone4;
  const int64_t qn = exaone4 ? hp->head_dim : Q, kn = exaone4 ? hp->head_dim : KV; /* the norms' widths */
  /* tied: token_embd is also the output matrix (see qwen.c) */
  const bool tied = gguf_find_tensor(m->f, "output.weight") == NULL;
  if ((rc = model_bind_matrix(m, &w->tok_embd, E, hp->n_vocab, tied ? 0 : MODEL_BIND_ROWS, "token_embd.weight")))
    return rc;
  for (int64_t l = 0; l < hp->n_layer; l++) {
    olmo2_layer *L = &w->layers[l];
    int i = (int)l;
    if ((rc = model_bind_matrix(m, &L->wq, E, Q, 0, "blk.%d.attn_q.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wk, E, KV, 0, "blk.%d.attn_k.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wv, E, KV, 0, "blk.%d.attn_v.weight", i)) ||
        (rc = model_bind_vector(m, &L->q_norm, qn, 0, "blk.%d.attn_q_norm.weight", i)) ||
        (rc = model_bind_vector(m, &L->k_norm, kn, 0, "blk.%d.attn_k_norm.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wo, Q, E, 0, "blk.%d.attn_output.weight", i)) ||
        (rc = model_bind_vector(m, &L->post_attn, E, 0, "blk.%d.post_attention_norm.weight", i)) ||
        (rc = model_bind_matrix(m, &L->gate, E, F, 0, "blk.%d.ffn_gate.weight", i)) ||
        (rc = model_bind_matrix(m, &L->up, E, F, 0, "blk.%d.ffn_up.weight", i)) ||
        (rc = model_bind_matrix(m, &L->down, F, E, 0, "blk.%d.ffn_down.weight", i)) ||
        (rc = model_bind_vector(m, &L->post_ffn, E, 0, "blk.%d.post_ffw_norm.weight", i)))
      return rc;
  }
  if ((rc = model_bind_vector(m, &w->output_norm, E, 0, "output_norm.weight"))) return rc;
  if ((rc = model_bind_matrix(m, &w->output, E, hp->n_vocab, MODEL_BIND_OPTIONAL, "output.weight"))) return rc;
  if (!w->output.data) w->output = w->tok_embd;
  return 0;
}

static void olmo2_unload(model *m) {
  olmo2_weights *w = m->arch_data;
  if (!w) return;
  free(w->layers);
  free(w);
  m->arch_data = NULL;
}

static int olmo2_ctx_init(model_ctx *c) {
  model_dense_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
  c->arch_data = b;
  return model_dense_bufs_init(c, b);
}

static void olmo2_ctx_free(model_ctx *c) {
  model_dense_bufs_free(c->arch_data);
  free(c->arch_data);
  c->arch_data = NULL;
}

static void olmo2_ctx_trim(model_ctx *c) { model_dense_bufs_trim(c->arch_data); }

static int olmo2_forward(model_ctx *c, const model_step *st, float *logits) {
  const int64_t n = st->n;
  const model_hparams *hp = &c->m->hp;
  const olmo2_weights *w = c->m->arch_data;
  model_dense_bufs *b = c->arch_data;
  const int64_t E = hp->n_embd, hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd;
  const int32_t n_rot = hp->rope.n_rot;
  const float eps = hp->norm_eps, scale = 1.0f / sqrtf((float)hd);
  int rc;

  if ((rc = model_dense_embed(c, st, &w->tok_embd, b))) return rc;

  for (int64_t l = 0; l < hp->n_layer; l++) {
    const olmo2_layer *L = &w->layers[l];
    const model_tensor *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *const qkv_y[3] = {b->q, b->k, b->v};
    if ((rc = model_matmul_multi(c, 3, qkv, qkv_y, b->x, n))) return rc; /* no input norm */
    model_prof_mark(c, MODEL_PROF_QKV);
    /* olmo2: the whole q row (all heads) at once; exaone4: each head */
    model_qk_norm(hp, b->q, b->k, n, L->q_norm, L->k_norm, w->qk_whole);
    if (model_layer_rope(hp, l)) /* exaone4's global layers: NoPE */
      for (int64_t t = 0; t < n; t++) {
        ops_rope_apply_cached(&hp->rope, c->rope_cs + t * n_rot, b->q + t * Q, (int32_t)hp->n_head, (int32_t)hd);
        ops_rope_apply_cached(&hp->rope, c->rope_cs + t * n_rot, b->k + t * KV, (int32_t)hp->n_head_kv,
                              (int32_t)hd);
      }
    model_kv_store(c, l, st, b->k, b->v);
    model_prof_mark(c, MODEL_PROF_ROPE_KV);
    if ((rc = model_attention(c, l, st, b->q, b->att, scale))) return rc; /* windows from hp (exaone4 32B) */
    model_prof_mark(c, MODEL_PROF_ATTN);
    if ((rc = model_matmul(c, &L->wo, b->att, n, b->xn))) return rc;
    model_prof_mark(c, MODEL_PROF_WO);
    model_norm_rows(b->xn, n, E, L->post_attn, eps);
    model_dense_add_norm(c, b, n, NULL); /* x = h */
    memcpy(b->xn, b->x, (size_t)(n * E) * sizeof *b->xn); /* the FFN's input, replaced by its output */
    if ((rc = model_dense_ffn(c, &L->gate, &L->up, &L->down, b, n))) return rc;
    model_norm_rows(b->xn, n, E, L->post_ffn, eps);
    model_dense_add_norm(c, b, n, NULL); /* x = out */
  }

  if (st->n_out == 0) return 0;
  model_dense_out_norm(c, st, b, w->output_norm);
  rc = model_matmul(c, &w->output, b->xn, st->n_out, logits);
  model_prof_mark(c, MODEL_PROF_LOGITS);
  return rc;
}

const model_arch_ops model_arch_olmo2 = {
    .name = "olmo2",
    .load = olmo2_load,
    .unload = olmo2_unload,
    .ctx_init = olmo2_ctx_init,
    .ctx_free = olmo2_ctx_free,
    .forward = olmo2_forward,
    .trim = olmo2_ctx_trim,
};

const model_arch_ops model_arch_exaone4 = {
    .name = "exaone4",
    .load = olmo2_load,
    .unload = olmo2_unload,
    .ctx_init = olmo2_ctx_init,
    .ctx_free = olmo2_ctx_free,
    .forward = olmo2_forward,
    .trim = olmo2_ctx_trim,
};
