/*
 * dense.c - what the decoder architectures (llama, qwen2, qwen3, gemma2,
 * gemma3, and the mixture-of-experts ones in moe_dec.c) share: their activation buffers, the embedding and norm
 * steps around a block, the gated feed-forward (SwiGLU, or GeGLU with the
 * tanh GELU) the final-logit soft cap, and for the newer files the attention
 * sub-layer and the model's ends (model_attn_*, model_io_*: what qwen.c
 * does inline).
 *
 * Why the feed-forward runs in sub-batches of MODEL_FFN_ROWS (512) tokens:
 * its two n_ff-wide activations are the largest buffers of a context (at
 * n_batch 512 and n_ff 4864, 20 MiB of the 23 MiB a Qwen2.5-0.5B context
 * needs), so a larger n_batch does not grow them further. 128-token
 * sub-batches would keep them small while generating, but cost F16
 * prompts ~6%: each sub-batch widens every FFN weight to f32 again
 * (packed_f.c), from DRAM, for only 128 tokens (docs/perf-decisions.md,
 * "The FFN runs in 512-token sub-batches"). Instead the buffers' pages are
 * returned after any step of more than
 * MODEL_TRIM_TOKENS tokens (model_dense_bufs_trim, called through
 * model_arch_ops.trim by model_decode), so what stays resident while
 * generating is what one-token steps touch. Results are the same for any
 * sub-batch size: every kernel's output for a token does not depend on the
 * other tokens of the batch (tests/unit/test_kernels*.c check it).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/ops.h"
#include "model/model_int.h"

int64_t model_ffn_rows(const model_ctx *c) { return c->n_batch < MODEL_FFN_ROWS ? c->n_batch : MODEL_FFN_ROWS; }

int model_dense_bufs_init(model_ctx *c, model_dense_bufs *b) { return model_dense_bufs_init_rows(c, b, c->n_batch); }

int model_dense_bufs_init_rows(model_ctx *c, model_dense_bufs *b, int64_t rows) {
  const model_hparams *hp = &c->m->hp;
  const size_t B = (size_t)rows, E = (size_t)hp->n_embd, Q = (size_t)(hp->n_head * hp->head_dim),
               KV = (size_t)(hp->n_head_kv * hp->head_dim), F = (size_t)hp->n_ff,
               FR = (size_t)model_ffn_rows(c);
  const size_t att = B * (2 * Q + 2 * KV), ffn = FR * 2 * F, work = att > ffn ? att : ffn;
  const size_t floats[3] = {B * E, B * E, work};
  float **ptrs[3] = {&b->x, &b->xn, &b->work};
  for (int i = 0; i < 3; i++) {
    b->bytes[i] = floats[i] * sizeof(float);
    *ptrs[i] = malloc(b->bytes[i]);
    if (!*ptrs[i])
      return err_set(ERR_NOMEM, "%s context: cannot allocate buffers for a batch of %zu", c->m->ops->name, B);
    c->buf_bytes += b->bytes[i];
  }
  b->q = b->work;
  b->k = b->q + B * Q;
  b->v = b->k + B * KV;
  b->att = b->v + B * KV;
  b->g = b->work;
  b->u = b->work + FR * F;
  return 0;
}

void model_dense_bufs_trim(model_dense_bufs *b) {
  model_release_pages(b->x, b->bytes[0]);
  model_release_pages(b->xn, b->bytes[1]);
  model_release_pages(b->work, b->bytes[2]);
}

void model_dense_bufs_free(model_dense_bufs *b) {
  free(b->x);
  free(b->xn);
  free(b->work);
  b->x = b->xn = b->work = NULL;
}

struct swiglu_job {
  float *g;
  const float *u;
  int64_t n;
  enum model_ffn_act act;
};

/* g = act(g) * u over n values. */
static void glu_slice(enum model_ffn_act act, float *g, const float *u, int64_t n) {
  if (act == MODEL_FFN_SILU) {
    ops_swiglu(g, u, n);
    return;
  }
  ops_gelu(g, n);
  for (int64_t i = 0; i < n; i++) g[i] *= u[i];
}

/* Each task one slice, whole cache lines (16 floats) apart so that two
 * threads never write the same line. */
static void swiglu_worker(void *ctx, int ith, int nth) {
  struct swiglu_job *j = ctx;
  int64_t per = ((j->n + nth - 1) / nth + 15) & ~(int64_t)15, a = per * ith, e = a + per < j->n ? a + per : j->n;
  if (a < e) glu_slice(j->act, j->g + a, j->u + a, e - a);
}

/* One token's n_ff values (5632 for TinyLlama: an expf each, ~35 us on one
 * core) already pay for a pool job when the workers spin (inside the
 * forward pass's hold scope on a quiet machine: the job costs a
 * microsecond or two), not when one sleeps (a futex wake, tens of
 * microseconds under load): tpool_workers_awake decides. From
 * MODEL_SWIGLU_POOL_ALWAYS values (prompts) the pool always pays. */
#define MODEL_SWIGLU_POOL_MIN 2048
#define MODEL_SWIGLU_POOL_ALWAYS 16384
void model_glu(model_ctx *c, enum model_ffn_act act, float *g, const float *u, int64_t n) {
  struct swiglu_job sj = {g, u, n, act};
  if (c->n_threads == 1 || n < MODEL_SWIGLU_POOL_MIN ||
      (n < MODEL_SWIGLU_POOL_ALWAYS && !tpool_workers_awake(c->tp)))
    swiglu_worker(&sj, 0, 1);
  else
    tpool_run(c->tp, swiglu_worker, &sj);
}

void model_swiglu(model_ctx *c, float *g, const float *u, int64_t n) { model_glu(c, MODEL_FFN_SILU, g, u, n); }

int model_dense_ffn(model_ctx *c, const model_tensor *gate, const model_tensor *up, const model_tensor *down,
                    model_dense_bufs *b, int64_t n) {
  return model_dense_ffn_act(c, MODEL_FFN_SILU, gate, up, down, b, n);
}

int model_dense_ffn_act(model_ctx *c, enum model_ffn_act act, const model_tensor *gate, const model_tensor *up,
                        const model_tensor *down, model_dense_bufs *b, int64_t n) {
  /* the gate's rows, not hp.n_ff: a layer may be narrower (per-layer widths) */
  const int64_t E = c->m->hp.n_embd, F = gate->n_rows, FR = model_ffn_rows(c);
  for (int64_t t0 = 0; t0 < n; t0 += FR) {
    const int64_t m = n - t0 < FR ? n - t0 : FR;
    float *xn = b->xn + t0 * E; /* this sub-batch's input, then its output */
    int rc;
    const model_tensor *gu[2] = {gate, up};
    float *const gu_y[2] = {b->g, b->u};
    if ((rc = model_matmul_multi(c, 2, gu, gu_y, xn, m))) return rc;
    model_prof_mark(c, MODEL_PROF_GATEUP);
    model_glu(c, act, b->g, b->u, m * F);
    model_prof_mark(c, MODEL_PROF_SWIGLU);
    if ((rc = model_matmul(c, down, b->g, m, xn))) return rc;
    model_prof_mark(c, MODEL_PROF_DOWN);
  }
  return 0;
}

int model_dense_embed(model_ctx *c, const model_step *st, const model_tensor *tok_embd, model_dense_bufs *b) {
  const model_hparams *hp = &c->m->hp;
  const int64_t E = hp->n_embd;
  const int32_t n_rot = hp->rope.n_rot;
  for (int64_t t = 0; t < st->n; t++) {
    int rc = model_tensor_row_f32(tok_embd, st->tokens[t], b->x + t * E);
    if (rc) return rc;
    ops_rope_cache(&hp->rope, st->pos[t], c->rope_cs + t * n_rot);
  }
  model_prof_mark(c, MODEL_PROF_EMBED);
  return 0;
}

void model_dense_norm(model_ctx *c, model_dense_bufs *b, int64_t n, const float *norm) {
  const int64_t E = c->m->hp.n_embd;
  for (int64_t t = 0; t < n; t++) ops_rmsnorm(b->xn + t * E, b->x + t * E, norm, E, c->m->hp.norm_eps);
  model_prof_mark(c, MODEL_PROF_NORM);
}

void model_dense_add_norm(model_ctx *c, model_dense_bufs *b, int64_t n, const float *norm) {
  const int64_t E = c->m->hp.n_embd;
  if (!norm) {
    ops_add(b->x, b->xn, n * E);
    model_prof_mark(c, MODEL_PROF_ADD);
    return;
  }
  for (int64_t t = 0; t < n; t++)
    ops_add_rmsnorm(b->x + t * E, b->xn + t * E, b->xn + t * E, norm, E, c->m->hp.norm_eps);
  model_prof_mark(c, MODEL_PROF_NORM);
}

void model_logit_softcap(float *x, int64_t n, float cap) {
  if (!(cap > 0.0f)) return;
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] * inv);
}

void model_norm_rows(float *rows, int64_t n, int64_t w, const float *norm, float eps) {
  for (int64_t r = 0; r < n; r++) ops_rmsnorm(rows + r * w, rows + r * w, norm, w, eps);
}

void model_qk_norm(const model_hparams *hp, float *q, float *k, int64_t n, const float *q_norm, const float *k_norm,
                   bool whole) {
  const int64_t hd = hp->head_dim;
  if (whole) { /* one row per token: all heads at once */
    model_norm_rows(q, n, hp->n_head * hd, q_norm, hp->norm_eps);
    model_norm_rows(k, n, hp->n_head_kv * hd, k_norm, hp->norm_eps);
  } else {
    model_norm_rows(q, n * hp->n_head, hd, q_norm, hp->norm_eps);
    model_norm_rows(k, n * hp->n_head_kv, hd, k_norm, hp->norm_eps);
  }
}

void model_dense_out_norm(model_ctx *c, const model_step *st, model_dense_bufs *b, const float *norm) {
  const int64_t E = c->m->hp.n_embd;
  for (int64_t i = 0; i < st->n_out; i++)
    ops_rmsnorm(b->xn + i * E, b->x + st->out[i] * E, norm, E, c->m->hp.norm_eps);
}

/* ---- attention sub-layer and the ends (model_int.h) ---------------------- */

int model_attn_bind(model *m, model_attn_layer *L, int i, int flags) {
  const model_hparams *hp = &m->hp;
  const int64_t E = hp->n_embd, hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd;
  int rc;
  memset(L, 0, sizeof *L);
  if ((rc = model_bind_vector(m, &L->attn_norm, E, 0, "blk.%d.attn_norm.weight", i)) ||
      (rc = model_bind_matrix(m, &L->wq, E, Q, 0, "blk.%d.attn_q.weight", i)) ||
      (rc = model_bind_matrix(m, &L->wk, E, KV, 0, "blk.%d.attn_k.weight", i)) ||
      (rc = model_bind_matrix(m, &L->wv, E, KV, 0, "blk.%d.attn_v.weight", i)) ||
      (rc = model_bind_matrix(m, &L->wo, Q, E, 0, "blk.%d.attn_output.weight", i)) ||
      (rc = model_bind_vector(m, &L->ffn_norm, E, 0,
                              flags & MODEL_ATTN_POST_NORM ? "blk.%d.post_attention_norm.weight"
                                                           : "blk.%d.ffn_norm.weight",
                              i)))
    return rc;
  if ((flags & MODEL_ATTN_OUT_BIAS) && (rc = model_bind_vector(m, &L->bo, E, 0, "blk.%d.attn_output.bias", i)))
    return rc;
  if ((flags & MODEL_ATTN_SINKS) &&
      (rc = model_bind_vector(m, &L->sinks, hp->n_head, 0, "blk.%d.attn_sinks.weight", i)))
    return rc;
  L->qk_whole = (flags & MODEL_ATTN_QK_NORM_WHOLE) != 0;
  L->scale = 1.0f / sqrtf((float)hd);
  if ((flags & (MODEL_ATTN_QK_NORM | MODEL_ATTN_QK_NORM_WHOLE)) &&
      ((rc = model_bind_vector(m, &L->q_norm, L->qk_whole ? Q : hd, 0, "blk.%d.attn_q_norm.weight", i)) ||
       (rc = model_bind_vector(m, &L->k_norm, L->qk_whole ? KV : hd, 0, "blk.%d.attn_k_norm.weight", i))))
    return rc;
  if ((flags & MODEL_ATTN_BIAS) && ((rc = model_bind_vector(m, &L->bq, Q, 0, "blk.%d.attn_q.bias", i)) ||
                                    (rc = model_bind_vector(m, &L->bk, KV, 0, "blk.%d.attn_k.bias", i)) ||
                                    (rc = model_bind_vector(m, &L->bv, KV, 0, "blk.%d.attn_v.bias", i))))
    return rc;
  return 0;
}

/* y[t] += bias for each of n rows of width w. */
static void add_rows(float *y, const float *bias, int64_t n, int64_t w) {
  for (int64_t t = 0; t < n; t++) ops_add(y + t * w, bias, w);
}

int model_attn_forward(model_ctx *c, const model_step *st, int64_t l, const model_attn_layer *L,
                       model_dense_bufs *b) {
  const model_hparams *hp = &c->m->hp;
  const int64_t n = st->n, hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd;
  const int32_t n_rot = hp->rope.n_rot;
  const model_tensor *qkv[3] = {&L->wq, &L->wk, &L->wv};
  float *const qkv_y[3] = {b->q, b->k, b->v};
  int rc = model_matmul_multi(c, 3, qkv, qkv_y, b->xn, n);
  if (rc) return rc;
  model_prof_mark(c, MODEL_PROF_QKV);
  if (L->bq) {
    add_rows(b->q, L->bq, n, Q);
    add_rows(b->k, L->bk, n, KV);
    add_rows(b->v, L->bv, n, KV);
  }
  if (L->q_norm) model_qk_norm(hp, b->q, b->k, n, L->q_norm, L->k_norm, L->qk_whole);
  if (model_layer_rope(hp, l))
    for (int64_t t = 0; t < n; t++) {
      ops_rope_apply_cached(&hp->rope, c->rope_cs + t * n_rot, b->q + t * Q, (int32_t)hp->n_head, (int32_t)hd);
      ops_rope_apply_cached(&hp->rope, c->rope_cs + t * n_rot, b->k + t * KV, (int32_t)hp->n_head_kv, (int32_t)hd);
    }
  model_kv_store(c, l, st, b->k, b->v);
  model_prof_mark(c, MODEL_PROF_ROPE_KV);
  if ((rc = model_attention_sinks(c, l, st, b->q, b->att, L->scale, L->sinks))) return rc;
  model_prof_mark(c, MODEL_PROF_ATTN);
  rc = model_matmul(c, &L->wo, b->att, n, b->xn);
  if (!rc && L->bo) add_rows(b->xn, L->bo, n, hp->n_embd);
  model_prof_mark(c, MODEL_PROF_WO);
  return rc;
}

int model_io_bind(model *m, model_io *io) {
  memset(io, 0, sizeof *io);
  const int64_t E = m->hp.n_embd;
  const gguf_tensor *te = gguf_find_tensor(m->f, "token_embd.weight");
  if (!te) return err_set(ERR_NOT_FOUND, "tensor 'token_embd.weight' is missing");
  if (te->n_dims != 2 || te->dims[1] > (uint64_t)INT32_MAX)
    return err_set(ERR_RANGE, "tensor 'token_embd.weight' has %u dims and %llu rows, expected 2 dims and < 2^31 rows",
                   te->n_dims, (unsigned long long)te->dims[1]);
  m->hp.n_vocab = (int64_t)te->dims[1];
  const bool tied = gguf_find_tensor(m->f, "output.weight") == NULL;
  int rc;
  if ((rc = model_bind_matrix(m, &io->tok_embd, E, m->hp.n_vocab, tied ? 0 : MODEL_BIND_ROWS, "token_embd.weight")) ||
      (rc = model_bind_vector(m, &io->output_norm, E, 0, "output_norm.weight")) ||
      (rc = model_bind_matrix(m, &io->output, E, m->hp.n_vocab, MODEL_BIND_OPTIONAL, "output.weight")))
    return rc;
  if (!io->output.data) {
    io->output = io->tok_embd;
    io->tied = true;
  }
  return 0;
}

int model_io_logits(model_ctx *c, const model_step *st, const model_io *io, model_dense_bufs *b, float *logits) {
  if (st->n_out == 0) return 0;
  model_dense_out_norm(c, st, b, io->output_norm);
  int rc = model_matmul(c, &io->output, b->xn, st->n_out, logits);
  model_prof_mark(c, MODEL_PROF_LOGITS);
  return rc;
}

/* ---- granite's multipliers (model_int.h) ---------------------------------- */

void model_scales_none(const model *m, model_scales *s) {
  s->embd = s->resid = s->logit = 1.0f;
  s->attn = 1.0f / sqrtf((float)m->hp.head_dim);
}

/* One multiplier key: absent or 0 = none (unless required), else > 0. */
static int granite_scale(model *m, const char *suffix, bool required, float none, float *out) {
  float zero = 0.0f, v = 0.0f;
  int rc = model_key_f32(m, suffix, required ? NULL : &zero, &v);
  if (rc) return rc;
  if (v < 0.0f || (required && v == 0.0f))
    return err_set(ERR_RANGE, "key '%s.%s' is %g, expected a number > 0%s", m->ops->name, suffix, v,
                   required ? "" : " (or 0: none)");
  *out = v > 0.0f ? v : none;
  return 0;
}

int model_load_granite_scales(model *m, model_scales *s) {
  model_scales_none(m, s);
  int rc;
  if ((rc = granite_scale(m, "logit_scale", true, 1.0f, &s->logit)) ||
      (rc = granite_scale(m, "embedding_scale", false, 1.0f, &s->embd)) ||
      (rc = granite_scale(m, "residual_scale", false, 1.0f, &s->resid)) ||
      (rc = granite_scale(m, "attention.scale", false, s->attn, &s->attn)))
    return rc;
  char key[96];
  snprintf(key, sizeof key, "%s.rope.scaling.finetuned", m->ops->name);
  bool rope_on = true;
  rc = gguf_get_bool(m->f, key, &rope_on);
  if (rc && rc != ERR_NOT_FOUND) return err_set(rc, "key '%s' is not a bool", key);
  if (!rope_on) m->hp.nope_step = 1; /* no layer rotates */
  return 0;
}

void model_scale_rows(float *x, int64_t n, float s) {
  if (s != 1.0f)
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}
