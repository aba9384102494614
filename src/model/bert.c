/*
 * bert.c - the bert architecture (general.architecture = "bert"): BERT-family
 * encoders used for sentence embeddings (all-MiniLM, bge, e5 and other
 * files converted to llama.cpp's BERT tensor names).
 *
 * Encoder only: every token sees every other token (no causal mask), there
 * is no KV cache and no logits. For tokens t = 0..n-1 (positions 0..n-1):
 *   x[t] = token_embd[tok_t] + token_types[0] + position_embd[t]
 *   x    = LN(x; token_embd_norm)
 *   per block (post-norm):
 *     q = Wq x + bq, k = Wk x + bk, v = Wv x + bv
 *     x = LN(x + Wo attention(q, k, v) + bo; attn_output_norm)
 *     x = LN(x + Wdown gelu(Wup x + bup) + bdown; layer_output_norm)
 *   LN(v; w, b) = (v - mean) / sqrt(var + eps) * w + b,
 *   eps = ARCH.attention.layer_norm_epsilon, gelu the tanh form (ggml's).
 * nomic-bert (general.architecture = "nomic-bert": nomic-embed-text v1 and
 * v1.5) is the same encoder with four differences (llama.cpp's tensor
 * names): no position_embd (RoPE, NeoX style, base ARCH.rope.freq_base, on
 * q and k instead), q, k, v fused in blk.N.attn_qkv.weight (rows Q | K | V,
 * bound as three parts), a SwiGLU feed-forward
 *   x = LN(x + Wdown (silu(Wgate x) * Wup x); layer_output_norm)
 * (blk.N.ffn_gate.weight), and no biases on the projections (each bias is
 * optional; token_types too).
 * Pooling (ARCH.pooling_type, mean when absent): 0 none (every token's x),
 * 1 mean over the tokens, 2 cls (x[0]), 3 last (x[n-1]). model_embed
 * (embed.c) normalizes.
 *
 * Start reading at bert_encode(). It encodes several sequences at once
 * (bert_embed_batch, what the serving engine's embedding batcher uses): the
 * rows of all sequences go through each weight matrix together, so the
 * weights are read once per batch rather than once per input, while
 * attention (enc_attn.c, shared with gemma-embedding) runs one task per
 * (sequence, head) on the pool, S = Q K^T and S V as F32 kern_matmul
 * calls over chunks of 64 queries. Row buffers
 * hold max(n_ctx, BERT_BATCH_MIN) tokens (bert contexts are short, 512
 * positions for most models).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"
#include "model/model_int.h"

typedef struct bert_layer {
  model_tensor wq, wk, wv;    /* [n_head*head_dim rows][n_embd cols] (k, v: n_head_kv) */
  const float *bq, *bk, *bv;  /* [rows] */
  model_tensor wo;            /* [n_embd][n_head*head_dim] */
  const float *bo;            /* [n_embd] */
  const float *att_norm_w, *att_norm_b;  /* attn_output_norm [n_embd] */
  model_tensor up;            /* [n_ff][n_embd] */
  const float *bup;           /* [n_ff] */
  model_tensor gate;          /* nomic-bert: [n_ff][n_embd]; data NULL for bert */
  model_tensor down;          /* [n_embd][n_ff] */
  const float *bdown;         /* [n_embd] */
  const float *out_norm_w, *out_norm_b;  /* layer_output_norm [n_embd] */
} bert_layer;

typedef struct bert_weights {
  model_tensor tok_embd;     /* [n_vocab][n_embd] */
  model_tensor pos_embd;     /* [n_ctx_train][n_embd]; nomic-bert: none (data NULL) */
  float *type0;              /* row 0 of token_types.weight, f32 [n_embd] (owned) */
  const float *embd_norm_w, *embd_norm_b;  /* token_embd_norm [n_embd] */
  bert_layer *layers;        /* [n_layer] */
  enum model_pooling pooling;
} bert_weights;

/* Fewest token rows a context's buffers hold, so that a model with a short
 * context still batches several inputs per forward pass. */
#define BERT_BATCH_MIN 512

/* Per-context buffers, sized for `rows` tokens (all sequences of a batch). */
typedef struct bert_bufs {
  int64_t rows; /* max(n_ctx, BERT_BATCH_MIN) */
  int64_t *off; /* [rows + 1] first row of each sequence of the batch */
  float *x;    /* hidden state [n][n_embd] */
  float *tmp;  /* [n][n_embd] */
  float *q;    /* [n][n_head*head_dim] */
  float *k;    /* [n][n_head_kv*head_dim] */
  float *v;    /* [n][n_head_kv*head_dim] */
  float *att;  /* [n][n_head*head_dim] */
  float *u;    /* [n][n_ff] */
  float *g;    /* nomic-bert: [n][n_ff] the gate; NULL for bert */
  float *scr;  /* per thread: scr_floats (model_enc_att_scratch_floats) */
  size_t scr_floats;
} bert_bufs;

static int bert_load(model *m) {
  model_hparams *hp = &m->hp;
  const bool nomic = m->arch == MODEL_ARCH_NOMIC_BERT;
  const int opt = nomic ? MODEL_BIND_OPTIONAL : 0; /* nomic-bert's biases */
  int rc = model_load_common_hparams(m, OPS_ROPE_NEOX); /* bert: the RoPE keys are unused */
  if (rc) return rc;
  const gguf_tensor *te = gguf_find_tensor(m->f, "token_embd.weight");
  if (!te) return err_set(ERR_NOT_FOUND, "tensor 'token_embd.weight' is missing");
  if (te->n_dims != 2 || te->dims[1] > (uint64_t)INT32_MAX)
    return err_set(ERR_RANGE, "tensor 'token_embd.weight' has %u dims and %llu rows, expected 2 dims and < 2^31 rows",
                   te->n_dims, (unsigned long long)te->dims[1]);
  hp->n_vocab = (int64_t)te->dims[1];

  bert_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "bert: out of memory");
  m->arch_data = w;
  w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
  if (!w->layers) return err_set(ERR_NOMEM, "bert: out of memory");

  int64_t pooling = 0;
  if ((rc = model_load_pooling(m, MODEL_POOLING_MEAN, false, &pooling))) return rc;
  w->pooling = (enum model_pooling)pooling;
  bool causal = false;
  char key[96];
  snprintf(key, sizeof key, "%s.attention.causal", m->ops->name);
  rc = gguf_get_bool(m->f, key, &causal);
  if (rc && rc != ERR_NOT_FOUND) return rc;
  if (rc == 0 && causal)
    return err_set(ERR_UNSUPPORTED, "key '%s' is true: only bidirectional %s is supported", key, m->ops->name);

  const int64_t E = hp->n_embd, hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd, F = hp->n_ff;
  if ((rc = model_bind_matrix(m, &w->tok_embd, E, hp->n_vocab, MODEL_BIND_ROWS, "token_embd.weight"))) return rc;
  if (!nomic &&
      (rc = model_bind_matrix(m, &w->pos_embd, E, hp->n_ctx_train, MODEL_BIND_ROWS, "position_embd.weight")))
    return rc;
  w->type0 = calloc((size_t)E, sizeof *w->type0); /* zeros when a nomic-bert file has no token types */
  if (!w->type0) return err_set(ERR_NOMEM, "bert: out of memory");
  const gguf_tensor *tt = gguf_find_tensor(m->f, "token_types.weight");
  if (!tt && !nomic) return err_set(ERR_NOT_FOUND, "tensor 'token_types.weight' is missing");
  if (tt) {
    int64_t n_types = tt->n_dims == 2 && tt->dims[1] >= 1 && tt->dims[1] <= 65536 ? (int64_t)tt->dims[1] : 1;
    model_tensor types;
    if ((rc = model_bind_matrix(m, &types, E, n_types, MODEL_BIND_ROWS, "token_types.weight"))) return rc;
    if ((rc = ref_dequantize_row(types.type, types.data, w->type0, E)))
      return err_set(rc, "tensor 'token_types.weight': cannot dequantize type %s", tensor_type_name(types.type));
  }
  if ((rc = model_bind_vector(m, &w->embd_norm_w, E, 0, "token_embd_norm.weight")) ||
      (rc = model_bind_vector(m, &w->embd_norm_b, E, 0, "token_embd_norm.bias")))
    return rc;
  for (int64_t l = 0; l < hp->n_layer; l++) {
    bert_layer *L = &w->layers[l];
    int i = (int)l;
    if (nomic) {
      const float *b = NULL;
      const int64_t rows[3] = {Q, KV, KV};
      model_tensor qkv[3];
      if ((rc = model_bind_matrix_parts(m, qkv, 3, rows, E, 0, "blk.%d.attn_qkv.weight", i)) ||
          (rc = model_bind_vector(m, &b, Q + 2 * KV, MODEL_BIND_OPTIONAL, "blk.%d.attn_qkv.bias", i)) ||
          (rc = model_bind_matrix(m, &L->gate, E, F, 0, "blk.%d.ffn_gate.weight", i)))
        return rc;
      L->wq = qkv[0], L->wk = qkv[1], L->wv = qkv[2];
      if (b) L->bq = b, L->bk = b + Q, L->bv = b + Q + KV;
    } else if ((rc = model_bind_matrix(m, &L->wq, E, Q, 0, "blk.%d.attn_q.weight", i)) ||
               (rc = model_bind_vector(m, &L->bq, Q, 0, "blk.%d.attn_q.bias", i)) ||
               (rc = model_bind_matrix(m, &L->wk, E, KV, 0, "blk.%d.attn_k.weight", i)) ||
               (rc = model_bind_vector(m, &L->bk, KV, 0, "blk.%d.attn_k.bias", i)) ||
               (rc = model_bind_matrix(m, &L->wv, E, KV, 0, "blk.%d.attn_v.weight", i)) ||
               (rc = model_bind_vector(m, &L->bv, KV, 0, "blk.%d.attn_v.bias", i))) {
      return rc;
    }
    if ((rc = model_bind_matrix(m, &L->wo, Q, E, 0, "blk.%d.attn_output.weight", i)) ||
        (rc = model_bind_vector(m, &L->bo, E, opt, "blk.%d.attn_output.bias", i)) ||
        (rc = model_bind_vector(m, &L->att_norm_w, E, 0, "blk.%d.attn_output_norm.weight", i)) ||
        (rc = model_bind_vector(m, &L->att_norm_b, E, 0, "blk.%d.attn_output_norm.bias", i)) ||
        (rc = model_bind_matrix(m, &L->up, E, F, 0, "blk.%d.ffn_up.weight", i)) ||
        (rc = model_bind_vector(m, &L->bup, F, opt, "blk.%d.ffn_up.bias", i)) ||
        (rc = model_bind_matrix(m, &L->down, F, E, 0, "blk.%d.ffn_down.weight", i)) ||
        (rc = model_bind_vector(m, &L->bdown, E, opt, "blk.%d.ffn_down.bias", i)) ||
        (rc = model_bind_vector(m, &L->out_norm_w, E, 0, "blk.%d.layer_output_norm.weight", i)) ||
        (rc = model_bind_vector(m, &L->out_norm_b, E, 0, "blk.%d.layer_output_norm.bias", i)))
      return rc;
  }
  return 0;
}

static void bert_unload(model *m) {
  bert_weights *w = m->arch_data;
  if (!w) return;
  free(w->type0);
  free(w->layers);
  free(w);
  m->arch_data = NULL;
}

static int bert_ctx_init(model_ctx *c) {
  const model_hparams *hp = &c->m->hp;
  bert_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "bert context: out of memory");
  c->arch_data = b;
  b->rows = c->n_ctx > BERT_BATCH_MIN ? c->n_ctx : BERT_BATCH_MIN;
  const size_t N = (size_t)c->n_ctx, R = (size_t)b->rows, E = (size_t)hp->n_embd, hd = (size_t)hp->head_dim,
               Q = (size_t)hp->n_head * hd, KV = (size_t)hp->n_head_kv * hd, F = (size_t)hp->n_ff;
  /* attention scratch per thread (enc_attn.c) */
  const size_t per = model_enc_att_scratch_floats(c->n_ctx, hp->head_dim);
  size_t all = 0;
  if (!size_mul(per, (size_t)c->n_threads, &all) || !size_mul(all, sizeof(float), &all))
    return err_set(ERR_TOO_LARGE, "bert context: attention scratch for %zu positions overflows", N);
  b->scr_floats = per;
  b->off = malloc((R + 1) * sizeof *b->off);
  if (!b->off) return err_set(ERR_NOMEM, "bert context: out of memory");
  size_t widths[8] = {E, E, Q, KV, KV, Q, F, F};
  float **ptrs[8] = {&b->x, &b->tmp, &b->q, &b->k, &b->v, &b->att, &b->u, &b->g};
  const int n_bufs = ((const bert_weights *)c->m->arch_data)->layers[0].gate.data ? 8 : 7; /* g: nomic-bert */
  for (int i = 0; i < n_bufs; i++) {
    size_t bytes = 0;
    if (!size_mul(R, widths[i], &bytes) || !size_mul(bytes, sizeof(float), &bytes))
      return err_set(ERR_TOO_LARGE, "bert context: buffers for %zu tokens overflow", R);
    *ptrs[i] = malloc(bytes);
    if (!*ptrs[i]) return err_set(ERR_NOMEM, "bert context: cannot allocate buffers for %zu tokens", R);
    c->buf_bytes += bytes;
  }
  b->scr = malloc(all);
  if (!b->scr) return err_set(ERR_NOMEM, "bert context: cannot allocate %zu bytes of attention scratch", all);
  c->buf_bytes += all;
  return 0;
}

static void bert_ctx_free(model_ctx *c) {
  bert_bufs *b = c->arch_data;
  free(b->off);
  free(b->x);
  free(b->tmp);
  free(b->q);
  free(b->k);
  free(b->v);
  free(b->att);
  free(b->u);
  free(b->g);
  free(b->scr);
  free(b);
  c->arch_data = NULL;
}

/* y = W x + b over n rows (bias NULL: none). */
static int bert_linear(model_ctx *c, const model_tensor *t, const float *bias, const float *x, int64_t n, float *y) {
  int rc = model_matmul(c, t, x, n, y);
  if (rc || !bias) return rc;
  for (int64_t r = 0; r < n; r++) ops_add(y + r * t->n_rows, bias, t->n_rows);
  return 0;
}

/* ---- forward ----------------------------------------------------------------- */

/* Encodes n_seq sequences (their rows laid one after another in the
 * buffers, b->off[s] the first row of sequence s) through every layer and
 * writes each sequence's pooled vector to out + s * n_embd (pooling NONE:
 * every row of the one sequence). The caller checked the sizes. */
static int bert_encode(model_ctx *c, int64_t n_seq, const int32_t *const *tokens, const int64_t *lens, float *out) {
  const model_hparams *hp = &c->m->hp;
  const bert_weights *w = c->m->arch_data;
  bert_bufs *b = c->arch_data;
  const int64_t E = hp->n_embd;
  const float eps = hp->norm_eps;
  int rc;

  b->off[0] = 0;
  for (int64_t s = 0; s < n_seq; s++) b->off[s + 1] = b->off[s] + lens[s];
  const int64_t n = b->off[n_seq]; /* rows of the whole batch */
  for (int64_t s = 0; s < n_seq; s++) {
    for (int64_t t = 0; t < lens[s]; t++) {
      float *x = b->x + (b->off[s] + t) * E, *tmp = b->tmp + (b->off[s] + t) * E;
      const uint8_t *row = (const uint8_t *)w->tok_embd.data + (size_t)tokens[s][t] * w->tok_embd.row_bytes;
      if ((rc = ref_dequantize_row(w->tok_embd.type, row, x, E)))
        return err_set(rc, "tensor 'token_embd.weight': cannot dequantize type %s",
                       tensor_type_name(w->tok_embd.type));
      if (w->pos_embd.data) { /* nomic-bert: RoPE on q and k instead */
        row = (const uint8_t *)w->pos_embd.data + (size_t)t * w->pos_embd.row_bytes;
        if ((rc = ref_dequantize_row(w->pos_embd.type, row, tmp, E)))
          return err_set(rc, "tensor 'position_embd.weight': cannot dequantize type %s",
                         tensor_type_name(w->pos_embd.type));
        ops_add(x, tmp, E);
      }
      ops_add(x, w->type0, E);
      ops_layernorm(x, x, w->embd_norm_w, w->embd_norm_b, E, eps);
    }
  }

  for (int64_t l = 0; l < hp->n_layer; l++) {
    const bert_layer *L = &w->layers[l];
    if ((rc = bert_linear(c, &L->wq, L->bq, b->x, n, b->q)) || (rc = bert_linear(c, &L->wk, L->bk, b->x, n, b->k)) ||
        (rc = bert_linear(c, &L->wv, L->bv, b->x, n, b->v)))
      return rc;
    if (!w->pos_embd.data) /* nomic-bert: positions restart at 0 in each sequence */
      for (int64_t s = 0; s < n_seq; s++)
        for (int64_t t = 0; t < lens[s]; t++) {
          const int64_t r = b->off[s] + t;
          ops_rope_apply(&hp->rope, b->q + r * hp->n_head * hp->head_dim, (int32_t)hp->n_head,
                         (int32_t)hp->head_dim, t);
          ops_rope_apply(&hp->rope, b->k + r * hp->n_head_kv * hp->head_dim, (int32_t)hp->n_head_kv,
                         (int32_t)hp->head_dim, t);
        }
    const model_enc_att att = {.n_seq = n_seq, .off = b->off, .q = b->q, .k = b->k, .v = b->v, .out = b->att,
                               .scale = 1.0f / sqrtf((float)hp->head_dim), .scr = b->scr,
                               .scr_floats = b->scr_floats};
    if ((rc = model_enc_attention(c, &att))) return rc;
    if ((rc = bert_linear(c, &L->wo, L->bo, b->att, n, b->tmp))) return rc;
    ops_add(b->x, b->tmp, n * E);
    for (int64_t t = 0; t < n; t++) ops_layernorm(b->x + t * E, b->x + t * E, L->att_norm_w, L->att_norm_b, E, eps);

    if ((rc = bert_linear(c, &L->up, L->bup, b->x, n, b->u))) return rc;
    const float *act = b->u;
    if (L->gate.data) { /* nomic-bert: silu(gate x) * up x */
      if ((rc = model_matmul(c, &L->gate, b->x, n, b->g))) return rc;
      ops_swiglu(b->g, b->u, n * hp->n_ff);
      act = b->g;
    } else {
      ops_gelu(b->u, n * hp->n_ff);
    }
    if ((rc = bert_linear(c, &L->down, L->bdown, act, n, b->tmp))) return rc;
    ops_add(b->x, b->tmp, n * E);
    for (int64_t t = 0; t < n; t++) ops_layernorm(b->x + t * E, b->x + t * E, L->out_norm_w, L->out_norm_b, E, eps);
  }

  for (int64_t s = 0; s < n_seq; s++) /* NONE: model_embed only, one sequence */
    model_pool_rows(w->pooling, b->x + b->off[s] * E, lens[s], E, out + s * E);
  return 0;
}

static int bert_embed(model_ctx *c, const int32_t *tokens, int64_t n, float *out, unsigned flags) {
  (void)flags; /* normalization is model_embed's */
  return bert_encode(c, 1, &tokens, &n, out);
}

static int bert_embed_batch(model_ctx *c, int64_t n_seq, const int32_t *const *tokens, const int64_t *n, float *out) {
  return bert_encode(c, n_seq, tokens, n, out);
}

static int64_t bert_embed_batch_tokens(const model_ctx *c) {
  const bert_bufs *b = c->arch_data;
  return b->rows;
}

static int bert_forward(model_ctx *c, const model_step *st, float *logits) {
  (void)st, (void)logits;
  return err_set(ERR_UNSUPPORTED, "architecture '%s' is an encoder: it computes embeddings (model_embed), not logits",
                 c->m->ops->name);
}

static enum model_pooling bert_pooling(const model *m) {
  const bert_weights *w = m->arch_data;
  return w->pooling;
}

const model_arch_ops model_arch_bert = {
    .name = "bert",
    .load = bert_load,
    .unload = bert_unload,
    .ctx_init = bert_ctx_init,
    .ctx_free = bert_ctx_free,
    .forward = bert_forward,
    .embed = bert_embed,
    .embed_batch = bert_embed_batch,
    .embed_batch_tokens = bert_embed_batch_tokens,
    .pooling = bert_pooling,
    .encoder = true,
};

const model_arch_ops model_arch_nomic_bert = {
    .name = "nomic-bert",
    .load = bert_load,
    .unload = bert_unload,
    .ctx_init = bert_ctx_init,
    .ctx_free = bert_ctx_free,
    .forward = bert_forward,
    .embed = bert_embed,
    .embed_batch = bert_embed_batch,
    .embed_batch_tokens = bert_embed_batch_tokens,
    .pooling = bert_pooling,
    .encoder = true,
};
