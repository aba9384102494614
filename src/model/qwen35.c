/*
 * qwen35.c - the Qwen3.5 / Qwen3-Next hybrids (general.architecture =
 * "qwen35", "qwen35moe", "qwen3next"): gated delta-net linear-attention
 * layers interleaved with gated full-attention layers, each block followed
 * by a feed-forward (dense SwiGLU for qwen35, experts plus a gated shared
 * expert, moe.c, for the other two).
 *
 * Layer l attends when (l + 1) % ARCH.full_attention_interval == 0 (default
 * 4, as llama.cpp reads it); the others are recurrent. With h = rms(x) *
 * attn_norm, n(v, w) = v / sqrt(mean(v^2) + eps) * w:
 *   attention layer (head_dim hd, n_head heads, n_head_kv kv heads):
 *     [q | g] per head = Wq h          (attn_q rows: head i's hd query rows,
 *                                       then its hd gate rows)
 *     q = n(q, attn_q_norm), k = n(Wk h, attn_k_norm) per head, v = Wv h
 *     rope(q), rope(k): NeoX halves over rope.dimension_count; qwen35 and
 *       qwen35moe give each pair an axis of M-RoPE (interleaved sections of
 *       rope.dimension_sections); text tokens put their position on the
 *       t, h, w axes and 0 on the fourth, so a pair of that axis never turns
 *     x += Wo (attention(q, k, v) * sigmoid(g))
 *   delta-net layer (n_k key heads of d_k = ssm.state_size = ssm.group_count
 *   heads, n_v value heads of d_v = ssm.inner_size / ssm.time_step_rank):
 *     m = attn_qkv h                   [q (n_k d_k) | k (n_k d_k) | v (n_v d_v)]
 *     m = silu(conv_causal(m))         (ssm_conv1d taps, depthwise, with state)
 *     q, k per head / sqrt(sum^2 + eps) (L2), q / sqrt(d_k)
 *     beta = sigmoid(ssm_beta h), a = softplus(ssm_alpha h + ssm_dt.bias) * ssm_a
 *       (ssm_a = -exp(A_log), so a <= 0: a log-decay); qwen3next's ssm_ba
 *       holds both, grouped by key head ([beta r | alpha r] per group)
 *     per value head j: the gated delta rule (kernels/delta.h) with key
 *       head j % n_k (qwen35, qwen35moe: the converter stores value heads
 *       tiled) or j / (n_v / n_k) (qwen3next: grouped)
 *     o = n(o per head, ssm_norm) * silu(attn_gate h);  x += ssm_out o
 *   then x += ffn(n(x, post_attention_norm))
 * Logits = output n(x, output_norm), output = token_embd when absent.
 *
 * A delta-net layer's recurrent state per sequence (model_rs_state): the
 * last d_conv - 1 inputs of the convolution [d_conv - 1][conv_dim], then
 * one [d_k][d_v] matrix per value head. A step runs the convolution per
 * run of consecutive tokens of one sequence and the delta rule per value
 * head across the pool's threads (each head's runs in order), chunked
 * (ops_gdr_chunked) for a run of several tokens, token by token for one.
 * Start reading at q35_forward().
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/conv1d.h"
#include "kernels/delta.h"
#include "kernels/ops.h"
#include "model/moe.h"

/* Tokens per chunk of the chunked delta rule (llama.cpp's is 64 too). */
#define Q35_CHUNK 64

/* What differs between the three rows. */
typedef struct q35_spec {
  bool grouped_v;  /* value head j reads key head j / (n_v / n_k) (else j % n_k) */
  bool fused_ba;   /* beta and alpha in one ssm_ba matrix, grouped by key head */
  bool sections;   /* rope.dimension_sections is required (M-RoPE axes) */
  model_moe_defaults moe; /* the experts' defaults (rows with .moe) */
} q35_spec;

typedef struct q35_layer {
  bool delta;                 /* a delta-net layer (else attention) */
  const float *attn_norm;     /* [n_embd] */
  const float *post_norm;     /* [n_embd] post_attention_norm: the FFN's input norm */
  /* attention */
  model_tensor wq;            /* [n_head * 2 hd][n_embd]: per head q rows, then gate rows */
  model_tensor wk, wv;        /* [n_head_kv * hd][n_embd] */
  model_tensor wo;            /* [n_embd][n_head * hd] */
  const float *q_norm, *k_norm; /* [hd] */
  /* delta net */
  model_tensor wqkv;          /* [conv_dim][n_embd] attn_qkv */
  model_tensor wz;            /* [value_dim][n_embd] attn_gate */
  model_tensor wb, wa;        /* [n_v][n_embd] ssm_beta, ssm_alpha; fused: wb is
                                 ssm_ba [2 n_v][n_embd], wa unused */
  const float *conv_w;        /* [conv_dim][d_conv] ssm_conv1d taps */
  const float *dt_bias;       /* [n_v] ssm_dt.bias */
  const float *ssm_a;         /* [n_v] -exp(A_log), <= 0 */
  const float *ssm_norm;      /* [d_v] */
  model_tensor ssm_out;       /* [n_embd][value_dim] */
  /* feed-forward */
  model_tensor gate, up;      /* dense: [n_ff][n_embd] */
  model_tensor down;          /* dense: [n_embd][n_ff] */
  model_moe_layer moe;        /* rows with experts */
} q35_layer;

typedef struct q35_weights {
  int64_t d_conv;             /* ssm.conv_kernel: taps */
  int64_t d_k, d_v;           /* head widths of keys (ssm.state_size) and values */
  int64_t n_k, n_v;           /* key heads (ssm.group_count), value heads (ssm.time_step_rank) */
  int64_t key_dim, value_dim, conv_dim; /* n_k d_k, n_v d_v, 2 key_dim + value_dim */
  int64_t interval;           /* full_attention_interval */
  float *rope_ff;             /* [n_rot / 2] rope divisors (infinity for a pair
                                 of the fourth M-RoPE axis), owned, or NULL */
  model_io io;
  model_moe_hparams moe;
  q35_layer *layers;          /* [n_layer] */
} q35_weights;

typedef struct q35_bufs {
  model_dense_bufs d;
  model_moe_bufs moe;
  bool has_moe;
  float *qg;      /* [n_batch][2 n_head hd] attention q | gate projections */
  float *gate;    /* [n_batch][n_head hd] the attention output gate */
  float *mix;     /* [n_batch][conv_dim] attn_qkv output, the convolution's input */
  float *conv;    /* [n_batch][conv_dim] silu(convolution): q | k | v */
  float *z;       /* [n_batch][value_dim] attn_gate output */
  float *rb, *ra; /* [n_batch][n_v] beta / alpha projections (fused: rb [n_batch][2 n_v]) */
  float *gb;      /* [2][n_v][n_batch] per head: log-decay a, then beta */
  float *o;       /* [n_batch][value_dim] delta rule outputs */
  int64_t *runs;  /* [n_batch + 1] first token of each run of one sequence */
  float *work;    /* [n_threads][ops_gdr_work_floats(Q35_CHUNK, d_v)] */
  size_t work_floats;
  int n_work;
  size_t bytes;   /* of the buffers above */
} q35_bufs;

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
static float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* ---- loading ------------------------------------------------------------ */

/* qwen35's M-RoPE axes: rope.dimension_sections (up to 4 counts s_t, s_h,
 * s_w, s_e) assign rotated pair i, sector = i % sum(s), interleaved as
 * llama.cpp's IMROPE: t when sector % 3 == 0 and sector < 3 s_t, h for
 * 1 and 3 s_h, w for 2 and 3 s_w, else the fourth axis. Text positions are
 * (p, p, p, 0), so only fourth-axis pairs differ from plain NeoX RoPE:
 * they get divisor infinity (angle 0) in rope_ff. */
static int load_sections(model *m, q35_weights *w) {
  char key[160];
  snprintf(key, sizeof key, "%s.rope.dimension_sections", m->ops->name);
  const gguf_value *v = gguf_find(m->f, key);
  if (!v) return err_set(ERR_NOT_FOUND, "key '%s' is missing", key);
  if (v->type != GGUF_TYPE_ARRAY || v->v.arr.n < 1 || v->v.arr.n > 4 || v->v.arr.elem_type == GGUF_TYPE_STRING ||
      v->v.arr.elem_type == GGUF_TYPE_ARRAY)
    return err_set(ERR_RANGE, "key '%s' is not an array of 1..4 integers", key);
  int64_t s[4] = {0, 0, 0, 0}, sum = 0;
  for (uint64_t i = 0; i < v->v.arr.n; i++) {
    s[i] = gguf_arr_i64(v, i);
    if (s[i] < 0 || s[i] > 65536) return err_set(ERR_RANGE, "key '%s': entry %llu is %lld", key, (unsigned long long)i, (long long)s[i]);
    sum += s[i];
  }
  if (sum < 1) return err_set(ERR_RANGE, "key '%s' has no rotated pair (all sections 0)", key);
  ops_rope *r = &m->hp.rope;
  const int64_t half = r->n_rot / 2;
  bool any = false;
  float *ff = malloc((size_t)half * sizeof *ff);
  if (!ff) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  for (int64_t i = 0; i < half; i++) {
    const int64_t sec = i % sum, ax = sec % 3;
    const bool text = sec < 3 * s[ax];
    ff[i] = text ? (r->freq_factors ? r->freq_factors[i] : 1.0f) : INFINITY;
    any |= !text;
  }
  if (!any) {
    free(ff);
    return 0;
  }
  w->rope_ff = ff;
  r->freq_factors = ff;
  return 0;
}

static int q35_load_hparams(model *m, q35_weights *w) {
  const q35_spec *sp = m->ops->spec;
  model_hparams *hp = &m->hp;
  int rc;
  if ((rc = model_key_i64(m, "ssm.conv_kernel", NULL, 2, OPS_CONV1D_MAX_K, &w->d_conv)) ||
      (rc = model_key_i64(m, "ssm.state_size", NULL, 1, 4096, &w->d_k)) ||
      (rc = model_key_i64(m, "ssm.group_count", NULL, 1, 4096, &w->n_k)) ||
      (rc = model_key_i64(m, "ssm.time_step_rank", NULL, 1, 4096, &w->n_v)) ||
      (rc = model_key_i64(m, "ssm.inner_size", NULL, 1, (int64_t)1 << 24, &w->value_dim)))
    return rc;
  if (w->n_v % w->n_k)
    return err_set(ERR_RANGE, "%s.ssm.time_step_rank %lld (value heads) is not a multiple of ssm.group_count %lld",
                   m->ops->name, (long long)w->n_v, (long long)w->n_k);
  if (w->value_dim % w->n_v)
    return err_set(ERR_RANGE, "%s.ssm.inner_size %lld is not a multiple of ssm.time_step_rank %lld", m->ops->name,
                   (long long)w->value_dim, (long long)w->n_v);
  w->d_v = w->value_dim / w->n_v;
  w->key_dim = w->n_k * w->d_k;
  w->conv_dim = 2 * w->key_dim + w->value_dim;
  const int64_t def_interval = 4;
  if ((rc = model_key_i64(m, "full_attention_interval", &def_interval, 1, hp->n_layer, &w->interval))) return rc;
  if (sp->sections && (rc = load_sections(m, w))) return rc;
  if (m->ops->moe && (rc = model_moe_load_hparams(m, &sp->moe, &w->moe))) return rc;
  return 0;
}

/* Layer i's delta-net tensors; ssm_a must be a decay (finite, <= 0). */
static int bind_delta(model *m, const q35_weights *w, q35_layer *L, int i) {
  const q35_spec *sp = m->ops->spec;
  const int64_t E = m->hp.n_embd;
  int rc;
  if ((rc = model_bind_matrix(m, &L->wqkv, E, w->conv_dim, 0, "blk.%d.attn_qkv.weight", i)) ||
      (rc = model_bind_matrix(m, &L->wz, E, w->value_dim, 0, "blk.%d.attn_gate.weight", i)) ||
      (rc = model_bind_f32(m, &L->conv_w, w->d_conv, w->conv_dim, "blk.%d.ssm_conv1d.weight", i)) ||
      (rc = model_bind_vector(m, &L->dt_bias, w->n_v, 0, "blk.%d.ssm_dt.bias", i)) ||
      (rc = model_bind_vector(m, &L->ssm_a, w->n_v, 0, "blk.%d.ssm_a", i)) ||
      (rc = model_bind_vector(m, &L->ssm_norm, w->d_v, 0, "blk.%d.ssm_norm.weight", i)) ||
      (rc = model_bind_matrix(m, &L->ssm_out, w->value_dim, E, 0, "blk.%d.ssm_out.weight", i)))
    return rc;
  if (sp->fused_ba) {
    if ((rc = model_bind_matrix(m, &L->wb, E, 2 * w->n_v, 0, "blk.%d.ssm_ba.weight", i))) return rc;
  } else if ((rc = model_bind_matrix(m, &L->wb, E, w->n_v, 0, "blk.%d.ssm_beta.weight", i)) ||
             (rc = model_bind_matrix(m, &L->wa, E, w->n_v, 0, "blk.%d.ssm_alpha.weight", i))) {
    return rc;
  }
  for (int64_t h = 0; h < w->n_v; h++)
    if (!(L->ssm_a[h] <= 0.0f) || isinf(L->ssm_a[h]))
      return err_set(ERR_RANGE, "tensor 'blk.%d.ssm_a' entry %lld is %g, expected a finite decay <= 0 (-exp(A_log))",
                     i, (long long)h, (double)L->ssm_a[h]);
  return 0;
}

static int q35_load(model *m) {
  model_hparams *hp = &m->hp;
  int rc = model_load_common_hparams(m, OPS_ROPE_NEOX);
  if (rc) return rc;
  q35_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  m->arch_data = w;
  if ((rc = q35_load_hparams(m, w))) return rc;
  w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
  bool *rec = calloc((size_t)hp->n_layer, sizeof *rec);
  if (!w->layers || !rec) {
    free(rec);
    return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  }
  const int64_t E = hp->n_embd, hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd;
  if ((rc = model_io_bind(m, &w->io))) goto out;
  for (int i = 0; i < (int)hp->n_layer; i++) {
    q35_layer *L = &w->layers[i];
    L->delta = rec[i] = (i + 1) % w->interval != 0;
    if ((rc = model_bind_vector(m, &L->attn_norm, E, 0, "blk.%d.attn_norm.weight", i)) ||
        (rc = model_bind_vector(m, &L->post_norm, E, 0, "blk.%d.post_attention_norm.weight", i)))
      goto out;
    if (L->delta) {
      if ((rc = bind_delta(m, w, L, i))) goto out;
    } else if ((rc = model_bind_matrix(m, &L->wq, E, 2 * Q, 0, "blk.%d.attn_q.weight", i)) ||
               (rc = model_bind_matrix(m, &L->wk, E, KV, 0, "blk.%d.attn_k.weight", i)) ||
               (rc = model_bind_matrix(m, &L->wv, E, KV, 0, "blk.%d.attn_v.weight", i)) ||
               (rc = model_bind_matrix(m, &L->wo, Q, E, 0, "blk.%d.attn_output.weight", i)) ||
               (rc = model_bind_vector(m, &L->q_norm, hd, 0, "blk.%d.attn_q_norm.weight", i)) ||
               (rc = model_bind_vector(m, &L->k_norm, hd, 0, "blk.%d.attn_k_norm.weight", i))) {
      goto out;
    }
    if (m->ops->moe) {
      if ((rc = model_moe_bind_layer(m, &w->moe, &L->moe, i))) goto out;
    } else if ((rc = model_bind_matrix(m, &L->gate, E, hp->n_ff, 0, "blk.%d.ffn_gate.weight", i)) ||
               (rc = model_bind_matrix(m, &L->up, E, hp->n_ff, 0, "blk.%d.ffn_up.weight", i)) ||
               (rc = model_bind_matrix(m, &L->down, hp->n_ff, E, 0, "blk.%d.ffn_down.weight", i))) {
      goto out;
    }
  }
  /* the state of one delta-net layer: the convolution's tail, then the
   * value heads' matrices */
  rc = model_set_recurrent(m, rec, (w->d_conv - 1) * w->conv_dim + w->n_v * w->d_k * w->d_v);
out:
  free(rec);
  return rc;
}

static void q35_unload(model *m) {
  q35_weights *w = m->arch_data;
  if (!w) return;
  free(w->layers);
  free(w->rope_ff);
  free(w);
  m->arch_data = NULL;
}

/* ---- context ------------------------------------------------------------ */

static int q35_ctx_init(model_ctx *c) {
  q35_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
  c->arch_data = b;
  const q35_weights *w = c->m->arch_data;
  const model_hparams *hp = &c->m->hp;
  int rc = model_dense_bufs_init(c, &b->d);
  if (rc) return rc;
  if (c->m->ops->moe) {
    b->has_moe = true;
    if ((rc = model_moe_bufs_init(c, &w->moe, &b->moe))) return rc;
  }
  const size_t N = (size_t)c->n_batch, f = sizeof(float), Q = (size_t)(hp->n_head * hp->head_dim);
  b->n_work = c->tp ? tpool_n_threads(c->tp) : 1;
  b->work_floats = ops_gdr_work_floats(Q35_CHUNK, w->d_v);
  const size_t sz[] = {N * 2 * Q * f, N * Q * f, N * (size_t)w->conv_dim * f, N * (size_t)w->conv_dim * f,
                       N * (size_t)w->value_dim * f, N * 2 * (size_t)w->n_v * f, N * (size_t)w->n_v * f,
                       2 * N * (size_t)w->n_v * f, N * (size_t)w->value_dim * f, (N + 1) * sizeof(int64_t),
                       (size_t)b->n_work * b->work_floats * f};
  void **dst[] = {(void **)&b->qg, (void **)&b->gate, (void **)&b->mix, (void **)&b->conv, (void **)&b->z,
                  (void **)&b->rb, (void **)&b->ra, (void **)&b->gb, (void **)&b->o, (void **)&b->runs,
                  (void **)&b->work};
  for (size_t i = 0; i < sizeof sz / sizeof *sz; i++) {
    if (!(*dst[i] = malloc(sz[i]))) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
    b->bytes += sz[i];
  }
  c->buf_bytes += b->bytes;
  return 0;
}

static void q35_ctx_free(model_ctx *c) {
  q35_bufs *b = c->arch_data;
  model_dense_bufs_free(&b->d);
  if (b->has_moe) model_moe_bufs_free(&b->moe);
  free(b->qg);
  free(b->gate);
  free(b->mix);
  free(b->conv);
  free(b->z);
  free(b->rb);
  free(b->ra);
  free(b->gb);
  free(b->o);
  free(b->runs);
  free(b->work);
  free(b);
  c->arch_data = NULL;
}

static void q35_ctx_trim(model_ctx *c) {
  q35_bufs *b = c->arch_data;
  const q35_weights *w = c->m->arch_data;
  const size_t N = (size_t)c->n_batch, f = sizeof(float);
  model_dense_bufs_trim(&b->d);
  if (b->has_moe) model_moe_bufs_trim(&b->moe);
  model_release_pages(b->mix, N * (size_t)w->conv_dim * f);
  model_release_pages(b->conv, N * (size_t)w->conv_dim * f);
  model_release_pages(b->z, N * (size_t)w->value_dim * f);
  model_release_pages(b->o, N * (size_t)w->value_dim * f);
}

/* ---- the attention sub-layer -------------------------------------------- */

/* b->d.xn rows become Wo (attention * sigmoid(gate)) of attention layer l. */
static int q35_attn(model_ctx *c, const model_step *st, int64_t l, const q35_layer *L, q35_bufs *qb) {
  const model_hparams *hp = &c->m->hp;
  model_dense_bufs *b = &qb->d;
  const int64_t n = st->n, hd = hp->head_dim, H = hp->n_head, Q = H * hd, KV = hp->n_head_kv * hd;
  const int32_t n_rot = hp->rope.n_rot;
  const model_tensor *ts[3] = {&L->wq, &L->wk, &L->wv};
  float *const ys[3] = {qb->qg, b->k, b->v};
  int rc = model_matmul_multi(c, 3, ts, ys, b->xn, n);
  if (rc) return rc;
  model_prof_mark(c, MODEL_PROF_QKV);
  for (int64_t t = 0; t < n; t++)
    for (int64_t h = 0; h < H; h++) {
      const float *src = qb->qg + (t * H + h) * 2 * hd;
      memcpy(b->q + t * Q + h * hd, src, (size_t)hd * sizeof(float));
      memcpy(qb->gate + t * Q + h * hd, src + hd, (size_t)hd * sizeof(float));
    }
  model_qk_norm(hp, b->q, b->k, n, L->q_norm, L->k_norm, false);
  for (int64_t t = 0; t < n; t++) {
    ops_rope_apply_cached(&hp->rope, c->rope_cs + t * n_rot, b->q + t * Q, (int32_t)H, (int32_t)hd);
    ops_rope_apply_cached(&hp->rope, c->rope_cs + t * n_rot, b->k + t * KV, (int32_t)hp->n_head_kv, (int32_t)hd);
  }
  model_kv_store(c, l, st, b->k, b->v);
  model_prof_mark(c, MODEL_PROF_ROPE_KV);
  if ((rc = model_attention(c, l, st, b->q, b->att, 1.0f / sqrtf((float)hd)))) return rc;
  for (int64_t i = 0; i < n * Q; i++) b->att[i] *= sigmoidf(qb->gate[i]);
  model_prof_mark(c, MODEL_PROF_ATTN);
  rc = model_matmul(c, &L->wo, b->att, n, b->xn);
  model_prof_mark(c, MODEL_PROF_WO);
  return rc;
}

/* ---- the delta-net sub-layer -------------------------------------------- */

typedef struct gdr_job {
  model_ctx *c;
  const model_step *st;
  int64_t l;
  const q35_weights *w;
  q35_bufs *b;
  int64_t n_runs;
} gdr_job;

/* Thread ith of nth: the value heads ith, ith + nth, ..., each over the
 * step's runs in order (a sequence's runs must meet its state in order). */
static void gdr_worker(void *arg, int ith, int nth) {
  const gdr_job *j = arg;
  const q35_weights *w = j->w;
  const q35_spec *sp = j->c->m->ops->spec;
  q35_bufs *b = j->b;
  const int64_t C = w->conv_dim, VD = w->value_dim, N = j->c->n_batch, r = w->n_v / w->n_k;
  const int64_t conv_tail = (w->d_conv - 1) * w->conv_dim, S_sz = w->d_k * w->d_v;
  float *work = b->work + (size_t)ith * b->work_floats;
  for (int64_t h = ith; h < w->n_v; h += nth) {
    const int64_t kh = sp->grouped_v ? h / r : h % w->n_k;
    for (int64_t ri = 0; ri < j->n_runs; ri++) {
      const int64_t t0 = b->runs[ri], t1 = b->runs[ri + 1];
      float *S = model_rs_state(j->c, j->st->seq[t0], j->l) + conv_tail + h * S_sz;
      const float *row = b->conv + t0 * C;
      ops_gdr_io io = {.q = row + kh * w->d_k, .k = row + w->key_dim + kh * w->d_k,
                       .v = row + 2 * w->key_dim + h * w->d_v, .ldq = C, .ldk = C, .ldv = C, .ldo = VD,
                       .a = b->gb + h * N + t0, .beta = b->gb + (w->n_v + h) * N + t0,
                       .o = b->o + t0 * VD + h * w->d_v, .n = t1 - t0, .d_k = w->d_k, .d_v = w->d_v};
      if (io.n == 1) ops_gdr_ref(&io, S);
      else ops_gdr_chunked(&io, S, Q35_CHUNK, work);
    }
  }
}

/* In place: each of the n rows of `heads` heads of width d becomes
 * x / sqrt(sum x^2 + eps), times `scale` (llama.cpp's L2 norm for the
 * delta net: rms_norm with eps / d, divided by sqrt(d)). */
static void l2_norm_heads(float *x, int64_t heads, int64_t d, float eps, float scale) {
  for (int64_t h = 0; h < heads; h++) {
    float *v = x + h * d, ss = 0.0f;
    for (int64_t i = 0; i < d; i++) ss += v[i] * v[i];
    const float s = scale / sqrtf(ss + eps);
    for (int64_t i = 0; i < d; i++) v[i] *= s;
  }
}

/* b->d.xn rows become ssm_out (gated-norm(delta rule(...))) of delta-net
 * layer l; every sequence's state advances over its tokens. */
static int q35_delta(model_ctx *c, const model_step *st, int64_t l, const q35_layer *L, q35_bufs *b) {
  const q35_weights *w = c->m->arch_data;
  const q35_spec *sp = c->m->ops->spec;
  const int64_t n = st->n, C = w->conv_dim, VD = w->value_dim, NV = w->n_v, N = c->n_batch;
  const float eps = c->m->hp.norm_eps;
  int rc;
  if (sp->fused_ba) {
    const model_tensor *ts[3] = {&L->wqkv, &L->wz, &L->wb};
    float *const ys[3] = {b->mix, b->z, b->rb};
    rc = model_matmul_multi(c, 3, ts, ys, b->d.xn, n);
  } else {
    const model_tensor *ts[4] = {&L->wqkv, &L->wz, &L->wb, &L->wa};
    float *const ys[4] = {b->mix, b->z, b->rb, b->ra};
    rc = model_matmul_multi(c, 4, ts, ys, b->d.xn, n);
  }
  if (rc) return rc;
  model_prof_mark(c, MODEL_PROF_QKV);
  /* gates, per head over the step's tokens: a = softplus(alpha + dt) * A, beta */
  const int64_t r = NV / w->n_k;
  for (int64_t t = 0; t < n; t++)
    for (int64_t h = 0; h < NV; h++) {
      float rbeta, ralpha;
      if (sp->fused_ba) { /* per key head group g: [beta r | alpha r] */
        const float *grp = b->rb + t * 2 * NV + (h / r) * 2 * r;
        rbeta = grp[h % r];
        ralpha = grp[r + h % r];
      } else {
        rbeta = b->rb[t * NV + h];
        ralpha = b->ra[t * NV + h];
      }
      b->gb[h * N + t] = softplusf(ralpha + L->dt_bias[h]) * L->ssm_a[h];
      b->gb[(NV + h) * N + t] = sigmoidf(rbeta);
    }
  /* runs of one sequence: the convolution through each one's state */
  int64_t n_runs = 0;
  for (int64_t t0 = 0; t0 < n;) {
    int64_t t1 = t0 + 1;
    while (t1 < n && st->seq[t1] == st->seq[t0]) t1++;
    b->runs[n_runs++] = t0;
    ops_conv1d(b->conv + t0 * C, b->mix + t0 * C, t1 - t0, C, L->conv_w, (int32_t)w->d_conv, NULL,
               model_rs_state(c, st->seq[t0], l));
    t0 = t1;
  }
  b->runs[n_runs] = n;
  ops_silu(b->conv, n * C);
  const float qs = 1.0f / sqrtf((float)w->d_k);
  for (int64_t t = 0; t < n; t++) {
    l2_norm_heads(b->conv + t * C, w->n_k, w->d_k, eps, qs);
    l2_norm_heads(b->conv + t * C + w->key_dim, w->n_k, w->d_k, eps, 1.0f);
  }
  gdr_job job = {.c = c, .st = st, .l = l, .w = w, .b = b, .n_runs = n_runs};
  if (c->tp && NV > 1) tpool_run(c->tp, gdr_worker, &job);
  else gdr_worker(&job, 0, 1);
  model_prof_mark(c, MODEL_PROF_ATTN);
  /* o = rms(o per head) * ssm_norm * silu(z) */
  for (int64_t t = 0; t < n; t++) {
    float *o = b->o + t * VD;
    model_norm_rows(o, NV, w->d_v, L->ssm_norm, eps);
    const float *z = b->z + t * VD;
    for (int64_t i = 0; i < VD; i++) o[i] *= z[i] * sigmoidf(z[i]);
  }
  rc = model_matmul(c, &L->ssm_out, b->o, n, b->d.xn);
  model_prof_mark(c, MODEL_PROF_WO);
  return rc;
}

/* ---- the step ----------------------------------------------------------- */

static int q35_forward(model_ctx *c, const model_step *st, float *logits) {
  const q35_weights *w = c->m->arch_data;
  q35_bufs *qb = c->arch_data;
  model_dense_bufs *b = &qb->d;
  const int64_t n = st->n, n_layer = c->m->hp.n_layer;
  int rc;
  if ((rc = model_dense_embed(c, st, &w->io.tok_embd, b))) return rc;
  for (int64_t l = 0; l < n_layer; l++) {
    const q35_layer *L = &w->layers[l];
    if (l == 0) model_dense_norm(c, b, n, L->attn_norm);
    rc = L->delta ? q35_delta(c, st, l, L, qb) : q35_attn(c, st, l, L, qb);
    if (rc) return rc;
    model_dense_add_norm(c, b, n, L->post_norm); /* x += mixer, xn = rms(x) */
    rc = qb->has_moe ? model_moe_ffn(c, &w->moe, &L->moe, &qb->moe, b->xn, n)
                     : model_dense_ffn(c, &L->gate, &L->up, &L->down, b, n);
    if (rc) return rc;
    model_dense_add_norm(c, b, n, l + 1 < n_layer ? w->layers[l + 1].attn_norm : NULL);
  }
  return model_io_logits(c, st, &w->io, b, logits);
}

/* qwen35: dense FFN, value heads tiled, M-RoPE sections. */
static const q35_spec QWEN35 = {.grouped_v = false, .fused_ba = false, .sections = true};
/* qwen35moe: the same with experts (softmax, top-k renormalised, as
 * llama.cpp's graph) and a sigmoid-gated shared expert. */
static const q35_spec QWEN35MOE = {
    .sections = true, .moe = {.gating = MODEL_MOE_SOFTMAX, .norm_w = true, .shexp = true}};
/* qwen3next: experts as qwen35moe, fused beta/alpha, value heads grouped
 * by key head, plain NeoX RoPE. */
static const q35_spec QWEN3NEXT = {
    .grouped_v = true, .fused_ba = true, .moe = {.gating = MODEL_MOE_SOFTMAX, .norm_w = true, .shexp = true}};

/* Not .hybrid: the recurrent layers are the interval's, so a per-layer
 * head_count_kv array with zeros is refused rather than half obeyed. */
#define Q35_ROW(nm, sp, experts)                                                                              \
  {                                                                                                           \
    .name = nm, .load = q35_load, .unload = q35_unload, .ctx_init = q35_ctx_init, .ctx_free = q35_ctx_free, \
    .forward = q35_forward, .trim = q35_ctx_trim, .moe = experts, .spec = (sp),                            \
  }

const model_arch_ops model_arch_qwen35 = Q35_ROW("qwen35", &QWEN35, false);
const model_arch_ops model_arch_qwen35moe = Q35_ROW("qwen35moe", &QWEN35MOE, true);
const model_arch_ops model_arch_qwen3next = Q35_ROW("qwen3next", &QWEN3NEXT, true);
