/*
 * glm4.c - the glm4 architecture (general.architecture = "glm4"): the dense
 * GLM-4 models (GLM-4-9B-0414, GLM-4-32B-0414, GLM-Z1) as llama.cpp's
 * converter writes them.
 *
 * A decoder with RMS norms, SwiGLU and grouped query attention like llama.c,
 * with these differences:
 *   - each sub-layer's output is RMS-normed again before its residual add
 *     (blk.N.post_attention_norm, blk.N.post_ffw_norm), on top of the usual
 *     input norms (blk.N.attn_norm, blk.N.ffn_norm);
 *   - q, k and v carry biases (blk.N.attn_{q,k,v}.bias, optional), and
 *     older files fuse the three into blk.N.attn_qkv.weight / .bias (rows
 *     Q, then K, then V), bound here as three parts;
 *   - the feed-forward's gate and up are one tensor, blk.N.ffn_up.weight
 *     with 2 n_ff rows: rows 0..n_ff-1 are the gate, the rest up (ggml's
 *     swiglu of a fused tensor), bound as two parts (model_bind_matrix_parts)
 *     so the shared SwiGLU feed-forward runs unchanged;
 *   - RoPE is the normal (adjacent pairs) style on the first
 *     ARCH.rope.dimension_count dimensions of each head only (half of
 *     head_dim in GLM-4 files: partial rotary); files with multimodal
 *     rope sections (ARCH.rope.dimension_sections, GLM-4.1V) are refused.
 * One block, for x[n][n_embd]:
 *   q, k, v = Wq rms(x) + bq, Wk rms(x) + bk, Wv rms(x) + bv
 *   h   = x + rms(Wo attention(rope(q), rope(k), v)) * post_attention_norm
 *   out = h + rms(Wdown (silu(Wgate rms(h)) * Wup rms(h))) * post_ffw_norm
 * Logits = output rms(out) (token_embd when output.weight is absent).
 *
 * Start reading at glm4_forward(); buffers are model_dense_bufs (dense.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/err.h"
#include "model/model_int.h"

typedef struct glm4_layer {
  const float *attn_norm;  /* [n_embd] */
  model_tensor wq;         /* [n_head*head_dim rows][n_embd cols] */
  model_tensor wk;         /* [n_head_kv*head_dim][n_embd] */
  model_tensor wv;         /* [n_head_kv*head_dim][n_embd] */
  const float *bq, *bk, *bv; /* [Q], [KV], [KV], or all NULL */
  model_tensor wo;         /* [n_embd][n_head*head_dim] */
  const float *post_attn;  /* [n_embd] post_attention_norm */
  const float *ffn_norm;   /* [n_embd] */
  model_tensor gate;       /* [n_ff][n_embd]: rows 0..n_ff-1 of ffn_up */
  model_tensor up;         /* [n_ff][n_embd]: rows n_ff..2n_ff-1 of ffn_up */
  model_tensor down;       /* [n_embd][n_ff] */
  const float *post_ffn;   /* [n_embd] post_ffw_norm */
} glm4_layer;

typedef struct glm4_weights {
  model_tensor tok_embd;     /* [n_vocab][n_embd] */
  glm4_layer *layers;        /* [n_layer] */
  const float *output_norm;  /* [n_embd] */
  model_tensor output;       /* [n_vocab][n_embd]; tok_embd when tied */
} glm4_weights;

/* q, k, v of layer i: three tensors with optional biases, or the fused
 * attn_qkv (rows Q | KV | KV) with an optional fused bias. */
static int bind_qkv(model *m, glm4_layer *L, int i) {
  const model_hparams *hp = &m->hp;
  const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
  char name[64];
  int rc;
  snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", i);
  if (gguf_find_tensor(m->f, name)) {
    const int64_t rows[3] = {Q, KV, KV};
    model_tensor qkv[3];
    const float *b = NULL;
    if ((rc = model_bind_matrix_parts(m, qkv, 3, rows, E, 0, "%s", name)) ||
        (rc = model_bind_vector(m, &b, Q + 2 * KV, MODEL_BIND_OPTIONAL, "blk.%d.attn_qkv.bias", i)))
      return rc;
    L->wq = qkv[0], L->wk = qkv[1], L->wv = qkv[2];
    if (b) L->bq = b, L->bk = b + Q, L->bv = b + Q + KV;
    return 0;
  }
  if ((rc = model_bind_matrix(m, &L->wq, E, Q, 0, "blk.%d.attn_q.weight", i)) ||
      (rc = model_bind_matrix(m, &L->wk, E, KV, 0, "blk.%d.attn_k.weight", i)) ||
      (rc = model_bind_matrix(m, &L->wv, E, KV, 0, "blk.%d.attn_v.weight", i)) ||
      (rc = model_bind_vector(m, &L->bq, Q, MODEL_BIND_OPTIONAL, "blk.%d.attn_q.bias", i)) ||
      (rc = model_bind_vector(m, &L->bk, KV, MODEL_BIND_OPTIONAL, "blk.%d.attn_k.bias", i)) ||
      (rc = model_bind_vector(m, &L->bv, KV, MODEL_BIND_OPTIONAL, "blk.%d.attn_v.bias", i)))
    return rc;
  if (!L->bq != !L->bk || !L->bq != !L->bv)
    return err_set(ERR_NOT_FOUND, "layer %d has only some of the attn_q/k/v biases: blk.%d.attn_%s.bias is missing",
                   i, i, !L->bq ? "q" : !L->bk ? "k" : "v");
  return 0;
}

static int glm4_load(model *m) {
  model_hparams *hp = &m->hp;
  int rc = model_load_common_hparams(m, OPS_ROPE_NORMAL);
  if (rc) return rc;
  /* multimodal RoPE sections (GLM-4.1V); all-zero sections run as text */
  const char *key = "glm4.rope.dimension_sections";
  const gguf_value *sec = NULL;
  rc = gguf_get_arr(m->f, key, GGUF_TYPE_COUNT, &sec);
  if (rc && rc != ERR_NOT_FOUND) return rc;
  if (sec) {
    const enum gguf_type et = sec->v.arr.elem_type;
    if (et == GGUF_TYPE_STRING || et == GGUF_TYPE_ARRAY)
      return err_set(ERR_TYPE, "key '%s' is an array of %s, expected integers", key, gguf_type_name(et));
    for (uint64_t j = 0; j < sec->v.arr.n; j++)
      if (gguf_arr_i64(sec, j) != 0)
        return err_set(ERR_UNSUPPORTED, "key '%s' is set: multimodal RoPE (GLM-4.1V) is not supported", key);
  }
  const gguf_tensor *te = gguf_find_tensor(m->f, "token_embd.weight");
  if (!te) return err_set(ERR_NOT_FOUND, "tensor 'token_embd.weight' is missing");
  if (te->n_dims != 2 || te->dims[1] > (uint64_t)INT32_MAX)
    return err_set(ERR_RANGE, "tensor 'token_embd.weight' has %u dims and %llu rows, expected 2 dims and < 2^31 rows",
                   te->n_dims, (unsigned long long)te->dims[1]);
  hp->n_vocab = (int64_t)te->dims[1];

  glm4_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "glm4: out of memory");
  m->arch_data = w;
  w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
  if (!w->layers) return err_set(ERR_NOMEM, "glm4: out of memory");
  const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, F = hp->n_ff;
  /* tied: token_embd is also the output matrix (see qwen.c) */
  const bool tied = gguf_find_tensor(m->f, "output.weight") == NULL;
  if ((rc = model_bind_matrix(m, &w->tok_embd, E, hp->n_vocab, tied ? 0 : MODEL_BIND_ROWS, "token_embd.weight")))
    return rc;
  for (int64_t l = 0; l < hp->n_layer; l++) {
    glm4_layer *L = &w->layers[l];
    int i = (int)l;
    model_tensor gu[2]; /* [gate | up] rows of the fused ffn_up */
    const int64_t gu_rows[2] = {F, F};
    if ((rc = model_bind_vector(m, &L->attn_norm, E, 0, "blk.%d.attn_norm.weight", i)) || (rc = bind_qkv(m, L, i)) ||
        (rc = model_bind_matrix(m, &L->wo, Q, E, 0, "blk.%d.attn_output.weight", i)) ||
        (rc = model_bind_vector(m, &L->post_attn, E, 0, "blk.%d.post_attention_norm.weight", i)) ||
        (rc = model_bind_vector(m, &L->ffn_norm, E, 0, "blk.%d.ffn_norm.weight", i)) ||
        (rc = model_bind_matrix_parts(m, gu, 2, gu_rows, E, 0, "blk.%d.ffn_up.weight", i)) ||
        (rc = model_bind_matrix(m, &L->down, F, E, 0, "blk.%d.ffn_down.weight", i)) ||
        (rc = model_bind_vector(m, &L->post_ffn, E, 0, "blk.%d.post_ffw_norm.weight", i)))
      return rc;
    L->gate = gu[0], L->up = gu[1];
  }
  if ((rc = model_bind_vector(m, &w->output_norm, E, 0, "output_norm.weight"))) return rc;
  if ((rc = model_bind_matrix(m, &w->output, E, hp->n_vocab, MODEL_BIND_OPTIONAL, "output.weight"))) return rc;
  if (!w->output.data) w->output = w->tok_embd;
  return 0;
}

static void glm4_unload(model *m) {
  glm4_weights *w = m->arch_data;
  if (!w) return;
  free(w->layers);
  free(w);
  m->arch_data = NULL;
}

static int glm4_ctx_init(model_ctx *c) {
  model_dense_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "glm4 context: out of memory");
  c->arch_data = b;
  return model_dense_bufs_init(c, b);
}

static void glm4_ctx_free(model_ctx *c) {
  model_dense_bufs_free(c->arch_data);
  free(c->arch_data);
  c->arch_data = NULL;
}

static void glm4_ctx_trim(model_ctx *c) { model_dense_bufs_trim(c->arch_data); }

/* y[t] += b for each of n rows of width w. */
static void add_bias(float *y, const float *b, int64_t n, int64_t w) {
  for (int64_t t = 0; t < n; t++) ops_add(y + t * w, b, w);
}

static int glm4_forward(model_ctx *c, const model_step *st, float *logits) {
  const int64_t n = st->n;
  const model_hparams *hp = &c->m->hp;
  const glm4_weights *w = c->m->arch_data;
  model_dense_bufs *b = c->arch_data;
  const int64_t E = hp->n_embd, hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd;
  const int32_t n_rot = hp->rope.n_rot;
  const float eps = hp->norm_eps, scale = 1.0f / sqrtf((float)hd);
  int rc;

  if ((rc = model_dense_embed(c, st, &w->tok_embd, b))) return rc;

  for (int64_t l = 0; l < hp->n_layer; l++) {
    const glm4_layer *L = &w->layers[l];
    if (l == 0) model_dense_norm(c, b, n, L->attn_norm); /* later layers': the previous layer's last add */
    const model_tensor *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *const qkv_y[3] = {b->q, b->k, b->v};
    if ((rc = model_matmul_multi(c, 3, qkv, qkv_y, b->xn, n))) return rc;
    model_prof_mark(c, MODEL_PROF_QKV);
    if (L->bq) {
      add_bias(b->q, L->bq, n, Q);
      add_bias(b->k, L->bk, n, KV);
      add_bias(b->v, L->bv, n, KV);
    }
    for (int64_t t = 0; t < n; t++) {
      ops_rope_apply_cached(&hp->rope, c->rope_cs + t * n_rot, b->q + t * Q, (int32_t)hp->n_head, (int32_t)hd);
      ops_rope_apply_cached(&hp->rope, c->rope_cs + t * n_rot, b->k + t * KV, (int32_t)hp->n_head_kv, (int32_t)hd);
    }
    model_kv_store(c, l, st, b->k, b->v);
    model_prof_mark(c, MODEL_PROF_ROPE_KV);
    if ((rc = model_attention(c, l, st, b->q, b->att, scale))) return rc;
    model_prof_mark(c, MODEL_PROF_ATTN);
    if ((rc = model_matmul(c, &L->wo, b->att, n, b->xn))) return rc;
    model_prof_mark(c, MODEL_PROF_WO);
    model_norm_rows(b->xn, n, E, L->post_attn, eps);
    model_dense_add_norm(c, b, n, L->ffn_norm); /* x += post(Wo . att), xn = rms(x) */
    if ((rc = model_dense_ffn(c, &L->gate, &L->up, &L->down, b, n))) return rc;
    model_norm_rows(b->xn, n, E, L->post_ffn, eps);
    /* x += post(ffn), xn = the next layer's rms(x) */
    model_dense_add_norm(c, b, n, l + 1 < hp->n_layer ? w->layers[l + 1].attn_norm : NULL);
  }

  if (st->n_out == 0) return 0;
  model_dense_out_norm(c, st, b, w->output_norm);
  rc = model_matmul(c, &w->output, b->xn, st->n_out, logits);
  model_prof_mark(c, MODEL_PROF_LOGITS);
  return rc;
}

const model_arch_ops model_arch_glm4 = {
    .name = "glm4",
    .load = glm4_load,
    .unload = glm4_unload,
    .ctx_init = glm4_ctx_init,
    .ctx_free = glm4_ctx_free,
    .forward = glm4_forward,
    .trim = glm4_ctx_trim,
};
