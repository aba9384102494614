/*
 * gemma.c - the gemma2 and gemma3 architectures (general.architecture =
 * "gemma2" / "gemma3"): Gemma 2 (2B, 9B, 27B) and Gemma 3 (270M, 1B, and
 * the text part of 4B, 12B, 27B).
 *
 * Both are decoders with RMS norms and grouped query attention like
 * llama.c, with these differences (tensor names and keys as llama.cpp's
 * converter writes them):
 *   - the token embedding is multiplied by sqrt(n_embd);
 *   - each sub-layer's output is RMS-normed again before its residual add
 *     (blk.N.post_attention_norm, blk.N.post_ffw_norm);
 *   - the feed-forward is GeGLU: down (gelu_tanh(gate x) * up x);
 *   - RoPE is the NeoX style; queries are scaled by 1/sqrt(head_dim), or
 *     by 1/sqrt(n_embd / n_head) in the 27B models (46 layers for gemma2,
 *     62 for gemma3), which is how llama.cpp reads Gemma's
 *     query_pre_attn_scalar (the converter does not write it);
 *   - layers alternate between sliding-window and global attention
 *     (model_hparams.n_swa, swa_pattern; attn.c applies the window):
 *     gemma2 every other layer from layer 0 (window
 *     ARCH.attention.sliding_window, 4096 when absent), gemma3 five
 *     sliding layers then one global (window required); gemma3's sliding
 *     layers use their own RoPE base (rope.freq_base_swa, 10000) without
 *     the file's RoPE scaling, its global layers the file's base and
 *     scaling;
 *   - gemma2 soft-caps attention scores (ARCH.attn_logit_softcapping,
 *     default 50) and the output logits (ARCH.final_logit_softcapping,
 *     default 30): s -> c tanh(s / c); gemma3 caps neither unless the file
 *     has final_logit_softcapping;
 *   - gemma3 RMS-normalizes every head of q and k (blk.N.attn_{q,k}_norm,
 *     [head_dim]) before RoPE;
 *   - the output matrix is token_embd (tied) unless output.weight exists
 *     (gemma3's vocabulary is 262144 rows: the largest product of a step).
 * Gemma's RMSNorm multiplies by (1 + w); the converter stores w + 1 in the
 * file, so the norms here are the plain rms(x) * weight.
 *
 * One block, for x[n][n_embd]:
 *   q, k, v = Wq rms(x), Wk rms(x), Wv rms(x)     (gemma3: q, k head norms)
 *   h   = x + rms(Wo attention(rope_l(q) * scale, rope_l(k), v)) * post_attention_norm
 *   out = h + rms(Wdown (gelu(Wgate rms(h)) * Wup rms(h))) * post_ffw_norm
 * Logits = softcap(output rms(out)).
 *
 * gemma-embedding (EmbeddingGemma) is gemma3's block as an encoder: no
 * causal mask and no KV cache (model_arch_ops.encoder; model_embed only),
 * every sequence encoded whole with positions 0..n-1. Its sliding layers
 * (pattern ARCH.attention.sliding_window_pattern, 6 when absent) see the
 * positions p with |p - t| <= n_swa / 2 on both sides of token t
 * (llama.cpp's LLAMA_SWA_TYPE_SYMMETRIC), the global layers the whole
 * sequence; queries are scaled by 1/sqrt(head_dim) at every size. After
 * the output norm the rows are pooled (ARCH.pooling_type, mean when
 * absent), then, in files converted with the sentence-transformers dense
 * modules, projected by dense_2.weight [d][n_embd] and dense_3.weight
 * [n_embd][d] (no bias, identity activations; the keys
 * ARCH.dense_{2,3}_feat_{in,out}, when written, must agree), and
 * model_embed normalizes. Start reading at gemma_encode(); the attention
 * is enc_attn.c's.
 *
 * Start reading at gemma_forward(); buffers are model_dense_bufs (dense.c)
 * plus the sliding layers' RoPE cos/sin.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/model_int.h"

typedef struct gemma_layer {
  const float *attn_norm;  /* [n_embd] */
  model_tensor wq;         /* [n_head*head_dim rows][n_embd cols] */
  model_tensor wk;         /* [n_head_kv*head_dim][n_embd] */
  model_tensor wv;         /* [n_head_kv*head_dim][n_embd] */
  const float *q_norm;     /* gemma3: [head_dim]; gemma2 NULL */
  const float *k_norm;     /* gemma3: [head_dim]; gemma2 NULL */
  model_tensor wo;         /* [n_embd][n_head*head_dim] */
  const float *post_attn;  /* [n_embd] post_attention_norm */
  const float *ffn_norm;   /* [n_embd] */
  model_tensor gate;       /* [n_ff][n_embd] */
  model_tensor up;         /* [n_ff][n_embd] */
  model_tensor down;       /* [n_embd][n_ff] */
  const float *post_ffn;   /* [n_embd] post_ffw_norm */
} gemma_layer;

typedef struct gemma_weights {
  model_tensor tok_embd;     /* [n_vocab][n_embd] */
  gemma_layer *layers;       /* [n_layer] */
  const float *output_norm;  /* [n_embd] */
  model_tensor output;       /* [n_vocab][n_embd]; tok_embd when tied */
  float embd_scale;          /* sqrt(n_embd) */
  float q_scale;             /* the attention's query scale */
  bool rope_swa_differs;     /* the sliding layers' RoPE is not hp.rope */
  /* gemma-embedding only */
  enum model_pooling pooling;
  model_tensor dense2;       /* [n_dense][n_embd], or data NULL: no projections */
  model_tensor dense3;       /* [n_embd][n_dense] */
} gemma_weights;

/* Vectors per dense_2 / dense_3 product (gemma-embedding's projections). */
#define GEMMA_DENSE_ROWS 64

typedef struct gemma_bufs {
  model_dense_bufs d;     /* decoder: n_batch rows; encoder: `rows` */
  float *rope_swa_cs;     /* decoder: [n_batch][n_rot] cos/sin of hp.rope_swa;
                             encoder: [n_ctx][n_rot] of positions 0..n_ctx-1 */
  size_t rope_swa_bytes;
  /* gemma-embedding (encoder) only */
  float *rope_cs;         /* [n_ctx][n_rot] hp.rope's cos/sin of positions 0..n_ctx-1 */
  int64_t rows;           /* tokens of all sequences one pass holds: max(n_ctx, 512) */
  int64_t *off;           /* [rows + 1] first row of each sequence */
  float *att_scr;         /* per thread: att_scr_floats (enc_attn.c) */
  size_t att_scr_floats;
  float *dense_tmp;       /* [GEMMA_DENSE_ROWS][n_dense] */
} gemma_bufs;

/* gemma-embedding: the optional dense_2 / dense_3 projections and their
 * keys. Both or neither: dense_2 [d][n_embd] then dense_3 [n_embd][d]. */
static int gemma_bind_dense(model *m, gemma_weights *w) {
  const int64_t E = m->hp.n_embd;
  const gguf_tensor *t2 = gguf_find_tensor(m->f, "dense_2.weight"), *t3 = gguf_find_tensor(m->f, "dense_3.weight");
  if (!t2 && !t3) return 0;
  if (!t2 || !t3)
    return err_set(ERR_NOT_FOUND, "tensor '%s' is missing: the dense projections come as dense_2.weight and "
                                  "dense_3.weight together",
                   t2 ? "dense_3.weight" : "dense_2.weight");
  if (t2->n_dims != 2 || t2->dims[1] < 1 || t2->dims[1] > (1u << 20))
    return err_set(ERR_RANGE, "tensor 'dense_2.weight' has %u dims and %llu rows, expected 2 dims and 1..2^20 rows",
                   t2->n_dims, (unsigned long long)(t2->n_dims == 2 ? t2->dims[1] : 0));
  const int64_t D = (int64_t)t2->dims[1];
  int rc;
  if ((rc = model_bind_matrix(m, &w->dense2, E, D, 0, "dense_2.weight")) ||
      (rc = model_bind_matrix(m, &w->dense3, D, E, 0, "dense_3.weight")))
    return rc;
  /* the feature keys, when the converter wrote them, name the same shapes */
  static const char *const keys[4] = {"dense_2_feat_in", "dense_2_feat_out", "dense_3_feat_in", "dense_3_feat_out"};
  const int64_t want[4] = {E, D, D, E};
  for (int i = 0; i < 4; i++) {
    int64_t v = want[i];
    if ((rc = model_key_i64(m, keys[i], &want[i], 0, INT32_MAX, &v))) return rc;
    if (v != want[i])
      return err_set(ERR_RANGE, "key '%s.%s' is %lld, but dense_2.weight / dense_3.weight make it %lld",
                     m->ops->name, keys[i], (long long)v, (long long)want[i]);
  }
  return 0;
}

static int gemma_load(model *m) {
  const bool emb = m->arch == MODEL_ARCH_GEMMA_EMBEDDING; /* gemma3's block as an encoder */
  const bool g3 = m->arch == MODEL_ARCH_GEMMA3 || emb;
  model_hparams *hp = &m->hp;
  int rc = model_load_common_hparams(m, OPS_ROPE_NEOX);
  if (rc) return rc;
  if (g3) {
    rc = model_load_swa_hparams(m, 6, NULL, 10000.0f);
  } else {
    const int64_t def_window = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    rc = model_load_swa_hparams(m, 2, &def_window, 0.0f);
  }
  if (rc) return rc;
  const float attn_cap = 50.0f, final_cap = g3 ? 0.0f : 30.0f;
  if (!g3 && (rc = model_load_softcap(m, "attn_logit_softcapping", &attn_cap, false, &hp->attn_softcap))) return rc;
  if (!emb && (rc = model_load_softcap(m, "final_logit_softcapping", &final_cap, g3, &hp->final_softcap))) return rc;

  const gguf_tensor *te = gguf_find_tensor(m->f, "token_embd.weight");
  if (!te) return err_set(ERR_NOT_FOUND, "tensor 'token_embd.weight' is missing");
  if (te->n_dims != 2 || te->dims[1] > (uint64_t)INT32_MAX)
    return err_set(ERR_RANGE, "tensor 'token_embd.weight' has %u dims and %llu rows, expected 2 dims and < 2^31 rows",
                   te->n_dims, (unsigned long long)te->dims[1]);
  hp->n_vocab = (int64_t)te->dims[1];

  gemma_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  m->arch_data = w;
  w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
  if (!w->layers) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  const int64_t E = hp->n_embd, hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd, F = hp->n_ff;
  w->embd_scale = sqrtf((float)E);
  const bool big = !emb && hp->n_layer == (g3 ? 62 : 46); /* the 27B models */
  w->q_scale = 1.0f / sqrtf(big ? (float)(E / hp->n_head) : (float)hd);
  w->rope_swa_differs = !ops_rope_same(&hp->rope_swa, &hp->rope);

  /* tied: token_embd is also the output matrix, copied and repacked like
   * the other matrices (see qwen.c) */
  const bool tied = !emb && gguf_find_tensor(m->f, "output.weight") == NULL;
  if ((rc = model_bind_matrix(m, &w->tok_embd, E, hp->n_vocab, tied ? 0 : MODEL_BIND_ROWS, "token_embd.weight")))
    return rc;
  if (emb) {
    int64_t pooling = 0;
    if ((rc = model_load_pooling(m, MODEL_POOLING_MEAN, false, &pooling))) return rc;
    w->pooling = (enum model_pooling)pooling;
    if ((rc = gemma_bind_dense(m, w))) return rc;
  }
  for (int64_t l = 0; l < hp->n_layer; l++) {
    gemma_layer *L = &w->layers[l];
    int i = (int)l;
    if ((rc = model_bind_vector(m, &L->attn_norm, E, 0, "blk.%d.attn_norm.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wq, E, Q, 0, "blk.%d.attn_q.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wk, E, KV, 0, "blk.%d.attn_k.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wv, E, KV, 0, "blk.%d.attn_v.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wo, Q, E, 0, "blk.%d.attn_output.weight", i)) ||
        (rc = model_bind_vector(m, &L->post_attn, E, 0, "blk.%d.post_attention_norm.weight", i)) ||
        (rc = model_bind_vector(m, &L->ffn_norm, E, 0, "blk.%d.ffn_norm.weight", i)) ||
        (rc = model_bind_matrix(m, &L->gate, E, F, 0, "blk.%d.ffn_gate.weight", i)) ||
        (rc = model_bind_matrix(m, &L->up, E, F, 0, "blk.%d.ffn_up.weight", i)) ||
        (rc = model_bind_matrix(m, &L->down, F, E, 0, "blk.%d.ffn_down.weight", i)) ||
        (rc = model_bind_vector(m, &L->post_ffn, E, 0, "blk.%d.post_ffw_norm.weight", i)))
      return rc;
    if (g3 && ((rc = model_bind_vector(m, &L->q_norm, hd, 0, "blk.%d.attn_q_norm.weight", i)) ||
               (rc = model_bind_vector(m, &L->k_norm, hd, 0, "blk.%d.attn_k_norm.weight", i))))
      return rc;
  }
  if ((rc = model_bind_vector(m, &w->output_norm, E, 0, "output_norm.weight"))) return rc;
  if (emb) return 0; /* no logits */
  if ((rc = model_bind_matrix(m, &w->output, E, hp->n_vocab, MODEL_BIND_OPTIONAL, "output.weight"))) return rc;
  if (!w->output.data) w->output = w->tok_embd;
  return 0;
}

static void gemma_unload(model *m) {
  gemma_weights *w = m->arch_data;
  if (!w) return;
  free(w->layers);
  free(w);
  m->arch_data = NULL;
}

/* gemma-embedding's context: row buffers for a batch of whole sequences,
 * the cos/sin of every position for both RoPEs, the attention scratch. */
static int gemma_enc_ctx_init(model_ctx *c, gemma_bufs *b) {
  const model_hparams *hp = &c->m->hp;
  const gemma_weights *w = c->m->arch_data;
  const char *name = c->m->ops->name;
  b->rows = c->n_ctx > 512 ? c->n_ctx : 512;
  int rc = model_dense_bufs_init_rows(c, &b->d, b->rows);
  if (rc) return rc;
  const size_t N = (size_t)c->n_ctx, nr = (size_t)hp->rope.n_rot;
  b->rope_swa_bytes = N * nr * sizeof(float);
  b->att_scr_floats = model_enc_att_scratch_floats(c->n_ctx, hp->head_dim);
  const size_t scr_bytes = b->att_scr_floats * (size_t)c->n_threads * sizeof(float);
  const size_t dense_bytes = (size_t)GEMMA_DENSE_ROWS * (size_t)(w->dense2.data ? w->dense2.n_rows : 1) * sizeof(float);
  b->rope_cs = malloc(b->rope_swa_bytes);
  b->rope_swa_cs = malloc(b->rope_swa_bytes);
  b->off = malloc(((size_t)b->rows + 1) * sizeof *b->off);
  b->att_scr = malloc(scr_bytes);
  b->dense_tmp = malloc(dense_bytes);
  if (!b->rope_cs || !b->rope_swa_cs || !b->off || !b->att_scr || !b->dense_tmp)
    return err_set(ERR_NOMEM, "%s context: cannot allocate buffers for %lld positions", name, (long long)c->n_ctx);
  c->buf_bytes += 2 * b->rope_swa_bytes + ((size_t)b->rows + 1) * sizeof *b->off + scr_bytes + dense_bytes;
  for (int64_t p = 0; p < c->n_ctx; p++) {
    ops_rope_cache(&hp->rope, p, b->rope_cs + (size_t)p * nr);
    ops_rope_cache(&hp->rope_swa, p, b->rope_swa_cs + (size_t)p * nr);
  }
  return 0;
}

static int gemma_ctx_init(model_ctx *c) {
  gemma_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
  c->arch_data = b;
  if (c->m->ops->encoder) return gemma_enc_ctx_init(c, b);
  int rc = model_dense_bufs_init(c, &b->d);
  if (rc) return rc;
  b->rope_swa_bytes = (size_t)c->n_batch * (size_t)c->m->hp.rope.n_rot * sizeof(float);
  b->rope_swa_cs = malloc(b->rope_swa_bytes);
  if (!b->rope_swa_cs) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
  c->buf_bytes += b->rope_swa_bytes;
  return 0;
}

static void gemma_ctx_free(model_ctx *c) {
  gemma_bufs *b = c->arch_data;
  model_dense_bufs_free(&b->d);
  free(b->rope_swa_cs);
  free(b->rope_cs);
  free(b->off);
  free(b->att_scr);
  free(b->dense_tmp);
  free(b);
  c->arch_data = NULL;
}

static void gemma_ctx_trim(model_ctx *c) { model_dense_bufs_trim(&((gemma_bufs *)c->arch_data)->d); }

static int gemma_forward(model_ctx *c, const model_step *st, float *logits) {
  const int64_t n = st->n;
  const model_hparams *hp = &c->m->hp;
  const gemma_weights *w = c->m->arch_data;
  gemma_bufs *gb = c->arch_data;
  model_dense_bufs *b = &gb->d;
  const int64_t E = hp->n_embd, hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd;
  const int32_t n_rot = hp->rope.n_rot;
  const float eps = hp->norm_eps;
  int rc;

  if ((rc = model_dense_embed(c, st, &w->tok_embd, b))) return rc;
  for (int64_t i = 0; i < n * E; i++) b->x[i] *= w->embd_scale;
  if (w->rope_swa_differs)
    for (int64_t t = 0; t < n; t++) ops_rope_cache(&hp->rope_swa, st->pos[t], gb->rope_swa_cs + t * n_rot);

  for (int64_t l = 0; l < hp->n_layer; l++) {
    const gemma_layer *L = &w->layers[l];
    const bool sliding = model_layer_window(hp, l) > 0;
    const ops_rope *rope = sliding ? &hp->rope_swa : &hp->rope;
    const float *cs = sliding && w->rope_swa_differs ? gb->rope_swa_cs : c->rope_cs;
    if (l == 0) model_dense_norm(c, b, n, L->attn_norm); /* later layers': the previous layer's last add */
    const model_tensor *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *const qkv_y[3] = {b->q, b->k, b->v};
    if ((rc = model_matmul_multi(c, 3, qkv, qkv_y, b->xn, n))) return rc;
    model_prof_mark(c, MODEL_PROF_QKV);
    if (L->q_norm) {
      model_norm_rows(b->q, n * hp->n_head, hd, L->q_norm, eps);
      model_norm_rows(b->k, n * hp->n_head_kv, hd, L->k_norm, eps);
    }
    for (int64_t t = 0; t < n; t++) {
      ops_rope_apply_cached(rope, cs + t * n_rot, b->q + t * Q, (int32_t)hp->n_head, (int32_t)hd);
      ops_rope_apply_cached(rope, cs + t * n_rot, b->k + t * KV, (int32_t)hp->n_head_kv, (int32_t)hd);
    }
    model_kv_store(c, l, st, b->k, b->v);
    model_prof_mark(c, MODEL_PROF_ROPE_KV);
    if ((rc = model_attention(c, l, st, b->q, b->att, w->q_scale))) return rc;
    model_prof_mark(c, MODEL_PROF_ATTN);
    if ((rc = model_matmul(c, &L->wo, b->att, n, b->xn))) return rc;
    model_prof_mark(c, MODEL_PROF_WO);
    model_norm_rows(b->xn, n, E, L->post_attn, eps);
    model_dense_add_norm(c, b, n, L->ffn_norm); /* x += post(Wo . att), xn = rms(x) */
    if ((rc = model_dense_ffn_act(c, MODEL_FFN_GELU, &L->gate, &L->up, &L->down, b, n))) return rc;
    model_norm_rows(b->xn, n, E, L->post_ffn, eps);
    /* x += post(ffn), xn = the next layer's rms(x) */
    model_dense_add_norm(c, b, n, l + 1 < hp->n_layer ? w->layers[l + 1].attn_norm : NULL);
  }

  if (st->n_out == 0) return 0;
  model_dense_out_norm(c, st, b, w->output_norm);
  rc = model_matmul(c, &w->output, b->xn, st->n_out, logits);
  if (rc == 0) model_logit_softcap(logits, st->n_out * hp->n_vocab, hp->final_softcap);
  model_prof_mark(c, MODEL_PROF_LOGITS);
  return rc;
}

/* ---- gemma-embedding: the encoder ---------------------------------------- */

/* Encodes n_seq whole sequences (rows laid one after another, positions
 * 0..lens[s]-1 each) through every layer and writes each sequence's pooled
 * and projected vector to out + s * n_embd (pooling NONE: every row of the
 * one sequence, each projected). The caller checked the sizes. */
static int gemma_encode(model_ctx *c, int64_t n_seq, const int32_t *const *tokens, const int64_t *lens,
                        float *out) {
  const model_hparams *hp = &c->m->hp;
  const gemma_weights *w = c->m->arch_data;
  gemma_bufs *gb = c->arch_data;
  model_dense_bufs *b = &gb->d;
  const int64_t E = hp->n_embd, hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd;
  const int32_t n_rot = hp->rope.n_rot;
  const float eps = hp->norm_eps;
  int rc;

  gb->off[0] = 0;
  for (int64_t s = 0; s < n_seq; s++) gb->off[s + 1] = gb->off[s] + lens[s];
  const int64_t n = gb->off[n_seq];
  for (int64_t s = 0; s < n_seq; s++)
    for (int64_t t = 0; t < lens[s]; t++)
      if ((rc = model_tensor_row_f32(&w->tok_embd, tokens[s][t], b->x + (gb->off[s] + t) * E))) return rc;
  for (int64_t i = 0; i < n * E; i++) b->x[i] *= w->embd_scale;

  for (int64_t l = 0; l < hp->n_layer; l++) {
    const gemma_layer *L = &w->layers[l];
    const int64_t window = model_layer_window(hp, l);
    const ops_rope *rope = window > 0 ? &hp->rope_swa : &hp->rope;
    const float *cs = window > 0 ? gb->rope_swa_cs : gb->rope_cs;
    if (l == 0) model_dense_norm(c, b, n, L->attn_norm);
    const model_tensor *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *const qkv_y[3] = {b->q, b->k, b->v};
    if ((rc = model_matmul_multi(c, 3, qkv, qkv_y, b->xn, n))) return rc;
    model_norm_rows(b->q, n * hp->n_head, hd, L->q_norm, eps);
    model_norm_rows(b->k, n * hp->n_head_kv, hd, L->k_norm, eps);
    for (int64_t s = 0; s < n_seq; s++) /* positions restart at 0 in every sequence */
      for (int64_t t = 0; t < lens[s]; t++) {
        const int64_t r = gb->off[s] + t;
        ops_rope_apply_cached(rope, cs + t * n_rot, b->q + r * Q, (int32_t)hp->n_head, (int32_t)hd);
        ops_rope_apply_cached(rope, cs + t * n_rot, b->k + r * KV, (int32_t)hp->n_head_kv, (int32_t)hd);
      }
    const model_enc_att att = {.n_seq = n_seq, .off = gb->off, .q = b->q, .k = b->k, .v = b->v, .out = b->att,
                               .scale = w->q_scale, .window = window, .scr = gb->att_scr,
                               .scr_floats = gb->att_scr_floats};
    if ((rc = model_enc_attention(c, &att))) return rc;
    if ((rc = model_matmul(c, &L->wo, b->att, n, b->xn))) return rc;
    model_norm_rows(b->xn, n, E, L->post_attn, eps);
    model_dense_add_norm(c, b, n, L->ffn_norm);
    if ((rc = model_dense_ffn_act(c, MODEL_FFN_GELU, &L->gate, &L->up, &L->down, b, n))) return rc;
    model_norm_rows(b->xn, n, E, L->post_ffn, eps);
    model_dense_add_norm(c, b, n, l + 1 < hp->n_layer ? w->layers[l + 1].attn_norm : NULL);
  }

  for (int64_t r = 0; r < n; r++) ops_rmsnorm(b->xn + r * E, b->x + r * E, w->output_norm, E, eps);
  for (int64_t s = 0; s < n_seq; s++) model_pool_rows(w->pooling, b->xn + gb->off[s] * E, lens[s], E, out + s * E);
  if (!w->dense2.data) return 0;
  const int64_t n_vec = w->pooling == MODEL_POOLING_NONE ? n : n_seq;
  for (int64_t v0 = 0; v0 < n_vec; v0 += GEMMA_DENSE_ROWS) {
    const int64_t m = n_vec - v0 < GEMMA_DENSE_ROWS ? n_vec - v0 : GEMMA_DENSE_ROWS;
    if ((rc = model_matmul(c, &w->dense2, out + v0 * E, m, gb->dense_tmp)) ||
        (rc = model_matmul(c, &w->dense3, gb->dense_tmp, m, out + v0 * E)))
      return rc;
  }
  return 0;
}

static int gemma_embed(model_ctx *c, const int32_t *tokens, int64_t n, float *out, unsigned flags) {
  (void)flags; /* normalization is model_embed's */
  return gemma_encode(c, 1, &tokens, &n, out);
}

static int gemma_embed_batch(model_ctx *c, int64_t n_seq, const int32_t *const *tokens, const int64_t *n,
                             float *out) {
  return gemma_encode(c, n_seq, tokens, n, out);
}

static int64_t gemma_embed_batch_tokens(const model_ctx *c) { return ((const gemma_bufs *)c->arch_data)->rows; }

static enum model_pooling gemma_pooling(const model *m) { return ((const gemma_weights *)m->arch_data)->pooling; }

static int gemma_enc_forward(model_ctx *c, const model_step *st, float *logits) {
  (void)st, (void)logits;
  return err_set(ERR_UNSUPPORTED, "architecture '%s' is an encoder: it computes embeddings (model_embed), not logits",
                 c->m->ops->name);
}

const model_arch_ops model_arch_gemma2 = {
    .name = "gemma2",
    .load = gemma_load,
    .unload = gemma_unload,
    .ctx_init = gemma_ctx_init,
    .ctx_free = gemma_ctx_free,
    .forward = gemma_forward,
    .trim = gemma_ctx_trim,
};

const model_arch_ops model_arch_gemma3 = {
    .name = "gemma3",
    .load = gemma_load,
    .unload = gemma_unload,
    .ctx_init = gemma_ctx_init,
    .ctx_free = gemma_ctx_free,
    .forward = gemma_forward,
    .trim = gemma_ctx_trim,
};

const model_arch_ops model_arch_gemma_embedding = {
    .name = "gemma-embedding",
    .load = gemma_load,
    .unload = gemma_unload,
    .ctx_init = gemma_ctx_init,
    .ctx_free = gemma_ctx_free,
    .forward = gemma_enc_forward,
    .trim = gemma_ctx_trim,
    .embed = gemma_embed,
    .embed_batch = gemma_embed_batch,
    .embed_batch_tokens = gemma_embed_batch_tokens,
    .pooling = gemma_pooling,
    .encoder = true,
};
