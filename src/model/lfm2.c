/*
 * lfm2.c - the lfm2 architecture (general.architecture = "lfm2"): LiquidAI
 * LFM2, a hybrid of gated short-convolution layers and grouped-query
 * attention layers, each followed by a SwiGLU feed-forward.
 *
 * The layer pattern is the file's: ARCH.attention.head_count_kv is one
 * count per layer, 0 for a convolution layer (model_layer_kv_heads). A
 * convolution layer is recurrent: it keeps no KV cache but, per sequence,
 * the last d_conv - 1 inputs of its convolution (model_rs_state, f32
 * [d_conv - 1][n_embd], d_conv = ARCH.shortconv.l_cache).
 * One block, for x[n][n_embd], h = rms(x) * attn_norm:
 *   convolution layer:
 *     [B | C | u] = in_proj h          (three rows of n_embd per token)
 *     v = conv_causal(B * u)           (depthwise, taps shortconv.conv
 *                                       [n_embd][d_conv], with the state)
 *     x += out_proj (C * v)
 *   attention layer (qwen3's: q/k RMS norms per head, NeoX RoPE):
 *     x += Wo attention(rope(rms(Wq h)), rope(rms(Wk h)), Wv h)
 *   then x += Wdown (silu(Wgate rms(x)) * (Wup rms(x)))
 * Logits = output rms(x) * token_embd_norm (the converter's name for the
 * final norm), output = token_embd when output.weight is absent.
 *
 * A step may mix tokens of several sequences; the convolution runs once
 * per run of consecutive tokens of one sequence (ops_conv1d, chunked), so
 * a prompt chunk and single decoding tokens share every matrix product.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/conv1d.h"
#include "model/model_int.h"

typedef struct lfm2_layer {
  bool conv;                /* a short-convolution layer (else attention) */
  model_attn_layer attn;    /* attention tensors and both norms; conv
                               layers use only attn_norm and ffn_norm */
  model_tensor in_proj;     /* conv: [3 n_embd][n_embd], rows B | C | u */
  const float *conv_w;      /* conv: [n_embd][d_conv] taps, f32 */
  model_tensor out_proj;    /* conv: [n_embd][n_embd] */
  model_tensor gate, up;    /* [n_ff][n_embd] */
  model_tensor down;        /* [n_embd][n_ff] */
} lfm2_layer;

typedef struct lfm2_weights {
  int32_t d_conv;           /* ARCH.shortconv.l_cache: taps */
  lfm2_layer *layers;       /* [n_layer] */
  model_tensor tok_embd;    /* [n_vocab][n_embd] */
  const float *output_norm; /* [n_embd] token_embd_norm.weight */
  model_tensor output;      /* [n_vocab][n_embd]; tok_embd when tied */
} lfm2_weights;

typedef struct lfm2_bufs {
  model_dense_bufs d;
  float *bcu;  /* [n_batch][3 n_embd] in_proj output */
  float *bu;   /* [n_batch][n_embd] B * u, the convolution's input */
  float *conv; /* [n_batch][n_embd] convolution output */
} lfm2_bufs;

static int lfm2_load(model *m) {
  model_hparams *hp = &m->hp;
  int rc = model_load_common_hparams(m, OPS_ROPE_NEOX);
  if (rc) return rc;
  lfm2_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "lfm2: out of memory");
  m->arch_data = w;
  w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
  bool *rec = calloc((size_t)hp->n_layer, sizeof *rec);
  if (!w->layers || !rec) {
    free(rec);
    return err_set(ERR_NOMEM, "lfm2: out of memory");
  }
  int64_t d_conv = 0;
  if ((rc = model_key_i64(m, "shortconv.l_cache", NULL, 2, OPS_CONV1D_MAX_K, &d_conv))) goto out;
  w->d_conv = (int32_t)d_conv;
  const int64_t E = hp->n_embd, F = hp->n_ff;
  if (hp->n_head * hp->head_dim != E) {
    rc = err_set(ERR_RANGE, "lfm2: head_count %lld x head size %lld is not embedding_length %lld",
                 (long long)hp->n_head, (long long)hp->head_dim, (long long)E);
    goto out;
  }
  const gguf_tensor *te = gguf_find_tensor(m->f, "token_embd.weight");
  if (!te || te->n_dims != 2 || te->dims[1] > (uint64_t)INT32_MAX) {
    rc = err_set(te ? ERR_RANGE : ERR_NOT_FOUND, "tensor 'token_embd.weight' is %s",
                 te ? "not a matrix of < 2^31 rows" : "missing");
    goto out;
  }
  hp->n_vocab = (int64_t)te->dims[1];
  const bool tied = gguf_find_tensor(m->f, "output.weight") == NULL;
  if ((rc = model_bind_matrix(m, &w->tok_embd, E, hp->n_vocab, tied ? 0 : MODEL_BIND_ROWS, "token_embd.weight")))
    goto out;
  for (int64_t l = 0; l < hp->n_layer; l++) {
    lfm2_layer *L = &w->layers[l];
    const int i = (int)l;
    L->conv = rec[l] = model_layer_kv_heads(m, l) == 0;
    if (L->conv) {
      if ((rc = model_bind_vector(m, &L->attn.attn_norm, E, 0, "blk.%d.attn_norm.weight", i)) ||
          (rc = model_bind_vector(m, &L->attn.ffn_norm, E, 0, "blk.%d.ffn_norm.weight", i)) ||
          (rc = model_bind_matrix(m, &L->in_proj, E, 3 * E, 0, "blk.%d.shortconv.in_proj.weight", i)) ||
          (rc = model_bind_f32(m, &L->conv_w, d_conv, E, "blk.%d.shortconv.conv.weight", i)) ||
          (rc = model_bind_matrix(m, &L->out_proj, E, E, 0, "blk.%d.shortconv.out_proj.weight", i)))
        goto out;
    } else if ((rc = model_attn_bind(m, &L->attn, i, MODEL_ATTN_QK_NORM))) {
      goto out;
    }
    if ((rc = model_bind_matrix(m, &L->gate, E, F, 0, "blk.%d.ffn_gate.weight", i)) ||
        (rc = model_bind_matrix(m, &L->up, E, F, 0, "blk.%d.ffn_up.weight", i)) ||
        (rc = model_bind_matrix(m, &L->down, F, E, 0, "blk.%d.ffn_down.weight", i)))
      goto out;
  }
  if ((rc = model_bind_vector(m, &w->output_norm, E, 0, "token_embd_norm.weight")) ||
      (rc = model_bind_matrix(m, &w->output, E, hp->n_vocab, MODEL_BIND_OPTIONAL, "output.weight")))
    goto out;
  if (!w->output.data) w->output = w->tok_embd;
  rc = model_set_recurrent(m, rec, (d_conv - 1) * E);
out:
  free(rec);
  return rc;
}

static void lfm2_unload(model *m) {
  lfm2_weights *w = m->arch_data;
  if (!w) return;
  free(w->layers);
  free(w);
  m->arch_data = NULL;
}

static int lfm2_ctx_init(model_ctx *c) {
  lfm2_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "lfm2 context: out of memory");
  c->arch_data = b;
  int rc = model_dense_bufs_init(c, &b->d);
  if (rc) return rc;
  const size_t row = (size_t)c->n_batch * (size_t)c->m->hp.n_embd * sizeof(float);
  b->bcu = malloc(3 * row);
  b->bu = malloc(row);
  b->conv = malloc(row);
  if (!b->bcu || !b->bu || !b->conv) return err_set(ERR_NOMEM, "lfm2 context: out of memory");
  c->buf_bytes += 5 * row;
  return 0;
}

static void lfm2_ctx_free(model_ctx *c) {
  lfm2_bufs *b = c->arch_data;
  model_dense_bufs_free(&b->d);
  free(b->bcu);
  free(b->bu);
  free(b->conv);
  free(b);
  c->arch_data = NULL;
}

static void lfm2_ctx_trim(model_ctx *c) {
  lfm2_bufs *b = c->arch_data;
  const size_t row = (size_t)c->n_batch * (size_t)c->m->hp.n_embd * sizeof(float);
  model_dense_bufs_trim(&b->d);
  model_release_pages(b->bcu, 3 * row);
  model_release_pages(b->bu, row);
  model_release_pages(b->conv, row);
}

/* The convolution sub-layer of layer l: b->d.xn rows (the normed input of
 * the step's tokens) become out_proj (C * conv(B * u)); each sequence's
 * state advances over its tokens. */
static int lfm2_conv_forward(model_ctx *c, const model_step *st, int64_t l, const lfm2_layer *L, int32_t d_conv,
                             lfm2_bufs *b) {
  const int64_t n = st->n, E = c->m->hp.n_embd;
  int rc = model_matmul(c, &L->in_proj, b->d.xn, n, b->bcu);
  if (rc) return rc;
  for (int64_t t = 0; t < n; t++) {
    const float *B = b->bcu + t * 3 * E, *U = B + 2 * E;
    for (int64_t e = 0; e < E; e++) b->bu[t * E + e] = B[e] * U[e];
  }
  /* runs of consecutive tokens of one sequence, each through its state */
  for (int64_t t0 = 0; t0 < n;) {
    int64_t t1 = t0 + 1;
    while (t1 < n && st->seq[t1] == st->seq[t0]) t1++;
    ops_conv1d(b->conv + t0 * E, b->bu + t0 * E, t1 - t0, E, L->conv_w, d_conv, NULL,
               model_rs_state(c, st->seq[t0], l));
    t0 = t1;
  }
  for (int64_t t = 0; t < n; t++) {
    const float *C = b->bcu + t * 3 * E + E;
    for (int64_t e = 0; e < E; e++) b->conv[t * E + e] *= C[e];
  }
  return model_matmul(c, &L->out_proj, b->conv, n, b->d.xn);
}

static int lfm2_forward(model_ctx *c, const model_step *st, float *logits) {
  const model_hparams *hp = &c->m->hp;
  const lfm2_weights *w = c->m->arch_data;
  lfm2_bufs *lb = c->arch_data;
  model_dense_bufs *b = &lb->d;
  const int64_t n = st->n;
  int rc;
  if ((rc = model_dense_embed(c, st, &w->tok_embd, b))) return rc;
  for (int64_t l = 0; l < hp->n_layer; l++) {
    const lfm2_layer *L = &w->layers[l];
    if (l == 0) model_dense_norm(c, b, n, L->attn.attn_norm); /* later: the previous layer's last add */
    rc = L->conv ? lfm2_conv_forward(c, st, l, L, w->d_conv, lb) : model_attn_forward(c, st, l, &L->attn, b);
    if (rc) return rc;
    model_dense_add_norm(c, b, n, L->attn.ffn_norm);
    if ((rc = model_dense_ffn(c, &L->gate, &L->up, &L->down, b, n))) return rc;
    model_dense_add_norm(c, b, n, l + 1 < hp->n_layer ? w->layers[l + 1].attn.attn_norm : NULL);
  }
  if (st->n_out == 0) return 0;
  model_dense_out_norm(c, st, b, w->output_norm);
  rc = model_matmul(c, &w->output, b->xn, st->n_out, logits);
  model_prof_mark(c, MODEL_PROF_LOGITS);
  return rc;
}

const model_arch_ops model_arch_lfm2 = {
    .name = "lfm2",
    .load = lfm2_load,
    .unload = lfm2_unload,
    .ctx_init = lfm2_ctx_init,
    .ctx_free = lfm2_ctx_free,
    .forward = lfm2_forward,
    .trim = lfm2_ctx_trim,
    .hybrid = true,
};
