/*
 * qwen.c - the qwen2 and qwen3 architectures (general.architecture =
 * "qwen2" / "qwen3"): Qwen2, Qwen2.5 and Qwen3 dense models.
 *
 * Both are llama-shaped decoders (RMS norms, SwiGLU FFN, grouped query
 * attention, causal) with three differences from llama.c:
 *   - RoPE is the NeoX style: pair i of a head is (x[i], x[i + n_rot/2])
 *     (the converter keeps Hugging Face's q/k row order for these models);
 *   - qwen2 adds biases to the q, k and v projections
 *     (blk.N.attn_{q,k,v}.bias);
 *   - qwen3 has no biases but RMS-normalizes every head of q and k with
 *     blk.N.attn_{q,k}_norm.weight [head_dim] before RoPE, and its head_dim
 *     (ARCH.attention.key_length) need not be n_embd / n_head, so Wq maps
 *     n_embd to n_head*head_dim and Wo maps back.
 * One block, for x[n][n_embd]:
 *   q = Wq rms(x) (+bq), k = Wk rms(x) (+bk), v = Wv rms(x) (+bv)
 *   qwen3: q_h = rms(q_h) * q_norm, k_h = rms(k_h) * k_norm per head
 *   h   = x + Wo attention(rope(q), rope(k), v)
 *   out = h + Wdown (silu(Wgate rms(h)) * (Wup rms(h)))
 * Logits = output rms(out), output = token_embd when output.weight is
 * absent (tied, common for the small Qwen models).
 *
 * Embeddings (qwen_embed, for Qwen3-Embedding and gte-Qwen2 files): the
 * tokens run through sequence 0 and the pooled vector is taken from the
 * output-normed hidden states rms(out) instead of computing logits;
 * ARCH.pooling_type chooses mean / cls / last / none, last when absent.
 *
 * Start reading at qwen_forward(). Matrix products are kern_matmul over all
 * tokens of the step (q, k, v in one pool job, gate, up in another: biases
 * and q/k norms after); the KV cache is model.c's, attention attn.c's. Buffers are
 * allocated once per context in qwen_ctx_init().
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"
#include "model/model_int.h"

typedef struct qwen_layer {
  const float *attn_norm;  /* [n_embd] */
  model_tensor wq;         /* [n_head*head_dim rows][n_embd cols] */
  model_tensor wk;         /* [n_head_kv*head_dim][n_embd] */
  model_tensor wv;         /* [n_head_kv*head_dim][n_embd] */
  const float *bq, *bk, *bv; /* qwen2: [n_head*head_dim], [kv], [kv]; qwen3 NULL */
  const float *q_norm;     /* qwen3: [head_dim]; qwen2 NULL */
  const float *k_norm;     /* qwen3: [head_dim]; qwen2 NULL */
  model_tensor wo;         /* [n_embd][n_head*head_dim] */
  const float *ffn_norm;   /* [n_embd] */
  model_tensor gate;       /* [n_ff][n_embd] */
  model_tensor up;         /* [n_ff][n_embd] */
  model_tensor down;       /* [n_embd][n_ff] */
} qwen_layer;

typedef struct qwen_weights {
  model_tensor tok_embd;     /* [n_vocab][n_embd] */
  qwen_layer *layers;        /* [n_layer] */
  const float *output_norm;  /* [n_embd] */
  model_tensor output;       /* [n_vocab][n_embd]; tok_embd when tied */
  bool tied;
  enum model_pooling pooling; /* for qwen_embed */
} qwen_weights;

/* Per-context activations (model_dense_bufs) and the embedding mode's state. */
typedef struct qwen_bufs {
  model_dense_bufs d;
  double *acc; /* [n_embd] mean pooling sums (qwen_embed) */
  bool embed;  /* qwen_forward stops at rms(out) rows in xn (qwen_embed) */
} qwen_bufs;

static int qwen_load(model *m) {
  const bool is_qwen3 = m->arch == MODEL_ARCH_QWEN3;
  model_hparams *hp = &m->hp;
  int rc = model_load_common_hparams(m, OPS_ROPE_NEOX);
  if (rc) return rc;
  const gguf_tensor *te = gguf_find_tensor(m->f, "token_embd.weight");
  if (!te) return err_set(ERR_NOT_FOUND, "tensor 'token_embd.weight' is missing");
  if (te->n_dims != 2 || te->dims[1] > (uint64_t)INT32_MAX)
    return err_set(ERR_RANGE, "tensor 'token_embd.weight' has %u dims and %llu rows, expected 2 dims and < 2^31 rows",
                   te->n_dims, (unsigned long long)te->dims[1]);
  hp->n_vocab = (int64_t)te->dims[1];

  qwen_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  m->arch_data = w;
  w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
  if (!w->layers) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);

  const int64_t E = hp->n_embd, hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd, F = hp->n_ff;
  int64_t pooling = 0;
  if ((rc = model_load_pooling(m, MODEL_POOLING_LAST, true, &pooling))) return rc;
  /* 4 (rank, rerankers) and beyond: loadable for generation, refused by qwen_embed */
  w->pooling = (enum model_pooling)pooling;
  /* Tied (no output.weight): token_embd is also the output matrix, read
   * whole every token, so it is copied (and repacked) like the other
   * matrices rather than left in the file mapping; lookups read the copy. */
  const bool tied = gguf_find_tensor(m->f, "output.weight") == NULL;
  if ((rc = model_bind_matrix(m, &w->tok_embd, E, hp->n_vocab, tied ? 0 : MODEL_BIND_ROWS, "token_embd.weight")))
    return rc;
  for (int64_t l = 0; l < hp->n_layer; l++) {
    qwen_layer *L = &w->layers[l];
    int i = (int)l;
    if ((rc = model_bind_vector(m, &L->attn_norm, E, 0, "blk.%d.attn_norm.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wq, E, Q, 0, "blk.%d.attn_q.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wk, E, KV, 0, "blk.%d.attn_k.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wv, E, KV, 0, "blk.%d.attn_v.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wo, Q, E, 0, "blk.%d.attn_output.weight", i)) ||
        (rc = model_bind_vector(m, &L->ffn_norm, E, 0, "blk.%d.ffn_norm.weight", i)) ||
        (rc = model_bind_matrix(m, &L->gate, E, F, 0, "blk.%d.ffn_gate.weight", i)) ||
        (rc = model_bind_matrix(m, &L->up, E, F, 0, "blk.%d.ffn_up.weight", i)) ||
        (rc = model_bind_matrix(m, &L->down, F, E, 0, "blk.%d.ffn_down.weight", i)))
      return rc;
    if (is_qwen3) {
      if ((rc = model_bind_vector(m, &L->q_norm, hd, 0, "blk.%d.attn_q_norm.weight", i)) ||
          (rc = model_bind_vector(m, &L->k_norm, hd, 0, "blk.%d.attn_k_norm.weight", i)))
        return rc;
    } else {
      if ((rc = model_bind_vector(m, &L->bq, Q, 0, "blk.%d.attn_q.bias", i)) ||
          (rc = model_bind_vector(m, &L->bk, KV, 0, "blk.%d.attn_k.bias", i)) ||
          (rc = model_bind_vector(m, &L->bv, KV, 0, "blk.%d.attn_v.bias", i)))
        return rc;
    }
  }
  if ((rc = model_bind_vector(m, &w->output_norm, E, 0, "output_norm.weight"))) return rc;
  if ((rc = model_bind_matrix(m, &w->output, E, hp->n_vocab, MODEL_BIND_OPTIONAL, "output.weight"))) return rc;
  if (!w->output.data) {
    w->output = w->tok_embd;
    w->tied = true;
  }
  return 0;
}

static void qwen_unload(model *m) {
  qwen_weights *w = m->arch_data;
  if (!w) return;
  free(w->layers);
  free(w);
  m->arch_data = NULL;
}

static int qwen_ctx_init(model_ctx *c) {
  qwen_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
  c->arch_data = b;
  int rc = model_dense_bufs_init(c, &b->d);
  if (rc) return rc;
  b->acc = malloc((size_t)c->m->hp.n_embd * sizeof *b->acc);
  if (!b->acc) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
  return 0;
}

static void qwen_ctx_free(model_ctx *c) {
  qwen_bufs *b = c->arch_data;
  model_dense_bufs_free(&b->d);
  free(b->acc);
  free(b);
  c->arch_data = NULL;
}

static void qwen_ctx_trim(model_ctx *c) { model_dense_bufs_trim(&((qwen_bufs *)c->arch_data)->d); }

/* y[t] += b for each of n rows of width w. */
static void add_bias(float *y, const float *b, int64_t n, int64_t w) {
  for (int64_t t = 0; t < n; t++) ops_add(y + t * w, b, w);
}

static int qwen_forward(model_ctx *c, const model_step *st, float *logits) {
  const int64_t n = st->n;
  const model_hparams *hp = &c->m->hp;
  const qwen_weights *w = c->m->arch_data;
  qwen_bufs *qb = c->arch_data;
  model_dense_bufs *b = &qb->d;
  const int64_t hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd;
  const int32_t n_rot = hp->rope.n_rot;
  const float eps = hp->norm_eps, scale = 1.0f / sqrtf((float)hd);
  int rc;

  if ((rc = model_dense_embed(c, st, &w->tok_embd, b))) return rc;

  for (int64_t l = 0; l < hp->n_layer; l++) {
    const qwen_layer *L = &w->layers[l];
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
    if (L->q_norm) {
      model_norm_rows(b->q, n * hp->n_head, hd, L->q_norm, eps);
      model_norm_rows(b->k, n * hp->n_head_kv, hd, L->k_norm, eps);
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
    model_dense_add_norm(c, b, n, L->ffn_norm); /* x += Wo . att, xn = rms(x) */
    if ((rc = model_dense_ffn(c, &L->gate, &L->up, &L->down, b, n))) return rc;
    /* x += ffn, xn = the next layer's rms(x) */
    model_dense_add_norm(c, b, n, l + 1 < hp->n_layer ? w->layers[l + 1].attn_norm : NULL);
  }

  if (st->n_out == 0) return 0;
  model_dense_out_norm(c, st, b, w->output_norm);
  if (qb->embed) return 0; /* qwen_embed reads the rows from xn */
  rc = model_matmul(c, &w->output, b->xn, st->n_out, logits);
  model_prof_mark(c, MODEL_PROF_LOGITS);
  return rc;
}

/* Tokens 0..n-1 through sequence 0 (rewound to 0 first) in steps of
 * n_batch; each step leaves rms(out) of the rows the pooling needs in xn. */
static int qwen_embed(model_ctx *c, const int32_t *tokens, int64_t n, float *out, unsigned flags) {
  (void)flags; /* normalization is model_embed's */
  const qwen_weights *w = c->m->arch_data;
  qwen_bufs *b = c->arch_data;
  const int64_t E = c->m->hp.n_embd;
  const enum model_pooling pool = w->pooling;
  if ((unsigned)pool > MODEL_POOLING_LAST)
    return err_set(ERR_UNSUPPORTED, "key '%s.pooling_type' is %d: only 0 (none), 1 (mean), 2 (cls) and 3 (last) embed",
                   c->m->ops->name, (int)pool);
  model_ctx_seq_truncate(c, 0, 0);
  for (int64_t d = 0; d < E; d++) b->acc[d] = 0;
  b->embed = true;
  int rc = 0;
  for (int64_t done = 0; done < n && rc == 0;) {
    int64_t step = n - done < c->n_batch ? n - done : c->n_batch;
    model_step st = {.n = step, .tokens = tokens + done, .seq = c->step_seq, .pos = c->step_pos, .out = c->step_out};
    for (int64_t t = 0; t < step; t++) {
      c->step_seq[t] = 0;
      c->step_pos[t] = done + t;
    }
    if (pool == MODEL_POOLING_NONE || pool == MODEL_POOLING_MEAN)
      for (int64_t t = 0; t < step; t++) c->step_out[st.n_out++] = t;
    else if (pool == MODEL_POOLING_CLS && done == 0)
      c->step_out[st.n_out++] = 0;
    else if (pool == MODEL_POOLING_LAST && done + step == n)
      c->step_out[st.n_out++] = step - 1;
    if ((rc = qwen_forward(c, &st, NULL))) break;
    c->n_past[0] = done + step;
    if (pool == MODEL_POOLING_NONE)
      memcpy(out + done * E, b->d.xn, (size_t)(step * E) * sizeof(float));
    else if (pool == MODEL_POOLING_MEAN)
      for (int64_t t = 0; t < step; t++)
        for (int64_t d = 0; d < E; d++) b->acc[d] += b->d.xn[t * E + d];
    else if (st.n_out)
      memcpy(out, b->d.xn, (size_t)E * sizeof(float));
    done += step;
  }
  b->embed = false;
  if (n > MODEL_TRIM_TOKENS) qwen_ctx_trim(c); /* as model_decode does */
  if (rc) {
    model_ctx_seq_truncate(c, 0, 0);
    return rc;
  }
  if (pool == MODEL_POOLING_MEAN)
    for (int64_t d = 0; d < E; d++) out[d] = (float)(b->acc[d] / (double)n);
  return 0;
}

static enum model_pooling qwen_pooling(const model *m) {
  const qwen_weights *w = m->arch_data;
  return w->pooling;
}

const model_arch_ops model_arch_qwen2 = {
    .name = "qwen2",
    .load = qwen_load,
    .unload = qwen_unload,
    .ctx_init = qwen_ctx_init,
    .ctx_free = qwen_ctx_free,
    .forward = qwen_forward,
    .trim = qwen_ctx_trim,
    .embed = qwen_embed,
    .pooling = qwen_pooling,
};

const model_arch_ops model_arch_qwen3 = {
    .name = "qwen3",
    .load = qwen_load,
    .unload = qwen_unload,
    .ctx_init = qwen_ctx_init,
    .ctx_free = qwen_ctx_free,
    .forward = qwen_forward,
    .trim = qwen_ctx_trim,
    .embed = qwen_embed,
    .pooling = qwen_pooling,
};
