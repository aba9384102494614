/*
 * mamba2.c - the Mamba-2 state-space layer and the three architectures
 * built on it:
 *   mamba2         (Mamba-2, Mamba-Codestral): every layer a Mamba-2 mixer;
 *   granitehybrid  (IBM Granite 4.0 H): Mamba-2 or attention layers (the
 *                  file's attention.head_count_kv, 0 = Mamba), each
 *                  followed by a SwiGLU feed-forward or, with
 *                  expert_count > 0, experts (moe.c: softmax router, top k
 *                  renormalised, an optional shared expert), granite's four
 *                  multipliers (model_load_granite_scales), RoPE only when
 *                  rope.scaling.finetuned is true (Granite 4.0 H has none);
 *   nemotron_h     (NVIDIA Nemotron-H): each layer one of a Mamba-2 mixer
 *                  (head_count_kv[l] == 0 and feed_forward_length[l] == 0),
 *                  attention without RoPE (feed_forward_length[l] == 0) or a
 *                  squared-ReLU MLP (ffn_up, ffn_down; biases optional).
 * Keys and tensor names are llama.cpp's converter's (convert_hf_to_gguf.py
 * Mamba2Model, GraniteHybridModel, NemotronHModel; src/llama-model.cpp).
 *
 * One block, x[n][n_embd], h = rms(x) * attn_norm:
 *   Mamba-2: [z | xBC | dt] = ssm_in h      (d_inner, d_inner + 2 G N, H)
 *            xBC = silu(conv_causal(xBC) + ssm_conv1d.bias)  (the
 *                  sequence's last d_conv - 1 inputs as state; conv1d.h)
 *            y = scan(x, B, C, dt + ssm_dt.bias, ssm_a, ssm_d)  (ssm.h)
 *            y = rms_group(y * silu(z)) * ssm_norm   (G groups of d_inner/G)
 *            x += r * ssm_out y
 *   attention: x += r * Wo attention(q, k, v) (scores times attention.scale
 *            or 1/sqrt(head_dim))
 *   MLP (nemotron_h): x += Wdown relu(Wup h)^2
 *   granitehybrid then: x += r * FFN(rms(x) * ffn_norm)
 * with r = residual_scale (granite; 1 otherwise), x0 = token_embd[tok] *
 * embedding_scale, logits = output rms(x) * output_norm / logit_scale.
 *
 * A Mamba-2 layer's state per sequence (model_rs_state): the convolution's
 * last d_conv - 1 inputs [d_conv - 1][d_inner + 2 G N], then the scan's
 * state [H][head_dim][N], f32; it does not grow with the context. A step
 * runs the convolution and the scan once per run of consecutive tokens of
 * one sequence: a run of one token (decoding) through the recurrence
 * (ops_ssm_scan_ref), a longer one (a prompt chunk) through the chunked
 * form, so prompts and decoding tokens of several sequences still share
 * every matrix product.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/conv1d.h"
#include "kernels/kernels.h"
#include "kernels/ssm.h"
#include "model/moe.h"

/* Tokens per chunk of the chunked scan (ssm.h): 64 keeps the chunk's L x L
 * matrices in L1 and the work per token near the recurrence's. */
#define SSM_CHUNK 64

/* What each row reads and runs. */
typedef struct ssm_spec {
  bool attention;   /* layers with kv heads attend */
  bool ffn;         /* every block ends with ffn_norm and a feed-forward
                       (SwiGLU or experts): granitehybrid */
  bool mlp_layers;  /* layers with a feed_forward_length entry are
                       squared-ReLU MLPs: nemotron_h */
  bool granite;     /* granite's multipliers and RoPE switch */
  bool conv_bias;   /* ssm_conv1d.bias required (mamba2), else optional */
} ssm_spec;

enum ssm_kind { SSM_MAMBA, SSM_ATTN, SSM_MLP };

typedef struct ssm_layer {
  enum ssm_kind kind;
  model_attn_layer attn;    /* attn_norm on every layer; the attention
                               tensors on attention layers; ffn_norm with
                               spec.ffn */
  /* Mamba-2 */
  model_tensor ssm_in;      /* [2 d_inner + 2 G N + H][n_embd] rows z | xBC | dt */
  const float *conv_w;      /* [d_inner + 2 G N][d_conv] taps */
  const float *conv_b;      /* [d_inner + 2 G N] or NULL */
  const float *dt_b;        /* [H] ssm_dt.bias */
  const float *A;           /* [H] ssm_a = -exp(A_log) */
  const float *D;           /* [H] ssm_d */
  const float *norm;        /* [d_inner] ssm_norm, G groups of d_inner / G */
  model_tensor ssm_out;     /* [n_embd][d_inner] */
  /* feed-forward: SwiGLU (granitehybrid without experts), or up / down
   * only (nemotron_h's MLP layers, width model_layer_ff) */
  model_tensor gate, up;    /* [n_ff][n_embd] */
  model_tensor down;        /* [n_embd][n_ff] */
  const float *up_b, *down_b; /* nemotron_h: [n_ff], [n_embd] or NULL */
  model_moe_layer moe;      /* granitehybrid with experts */
} ssm_layer;

typedef struct ssm_weights {
  int64_t d_conv, d_inner, d_state, n_group; /* ssm.conv_kernel, inner_size,
                                                state_size, group_count */
  int64_t n_ssm_head, ssm_head_dim;          /* ssm.time_step_rank, d_inner / it */
  int64_t conv_dim, d_in_proj;               /* d_inner + 2 G N; + d_inner + H */
  bool has_moe;
  model_moe_hparams moe;
  model_scales sc;
  ssm_layer *layers;        /* [n_layer] */
  model_io io;
} ssm_weights;

typedef struct ssm_bufs {
  model_dense_bufs d;
  model_moe_bufs moe;
  float *zx;    /* [n_batch][d_in_proj] ssm_in output */
  float *xin;   /* [n_batch][conv_dim] xBC, contiguous for the convolution */
  float *xbc;   /* [n_batch][conv_dim] convolution output */
  float *y;     /* [n_batch][d_inner] scan output */
  float *work;  /* [n_threads][ops_ssm_work_floats(SSM_CHUNK)] */
  size_t bytes[5];
} ssm_bufs;

/* mamba2 files say head_count 0 and feed_forward_length 0: only the
 * context, the widths and the norm epsilon are common; the attention
 * fields get the smallest shape (no layer attends: the KV cache is empty). */
static int mamba2_hparams(model *m) {
  model_hparams *hp = &m->hp;
  const int64_t big = (int64_t)1 << 24;
  int rc;
  if ((rc = model_key_i64(m, "context_length", NULL, 1, (int64_t)1 << 31, &hp->n_ctx_train)) ||
      (rc = model_key_i64(m, "embedding_length", NULL, 1, big, &hp->n_embd)) ||
      (rc = model_key_i64(m, "block_count", NULL, 1, 4096, &hp->n_layer)))
    return rc;
  float eps_def = 1e-5f;
  if ((rc = model_key_f32(m, "attention.layer_norm_rms_epsilon", &eps_def, &hp->norm_eps))) return rc;
  if (!(hp->norm_eps >= 0.0f)) return err_set(ERR_RANGE, "mamba2: norm epsilon %g is negative", hp->norm_eps);
  hp->n_ff = 0;
  hp->n_head = hp->n_head_kv = 1;
  hp->head_dim = 2;
  hp->rope.style = OPS_ROPE_NORMAL;
  hp->rope.n_rot = 2;
  hp->rope.freq_base = 10000.0f;
  hp->rope.freq_scale = 1.0f;
  hp->rope.attn_factor = 1.0f;
  hp->nope_step = 1;
  return 0;
}

/* The ssm.* keys and the shapes they imply. */
static int ssm_hparams(model *m, ssm_weights *w) {
  const int64_t big = (int64_t)1 << 20;
  int64_t one = 1;
  int rc;
  if ((rc = model_key_i64(m, "ssm.conv_kernel", NULL, 2, OPS_CONV1D_MAX_K, &w->d_conv)) ||
      (rc = model_key_i64(m, "ssm.inner_size", NULL, 1, big, &w->d_inner)) ||
      (rc = model_key_i64(m, "ssm.state_size", NULL, 1, 4096, &w->d_state)) ||
      (rc = model_key_i64(m, "ssm.time_step_rank", NULL, 1, 65536, &w->n_ssm_head)) ||
      (rc = model_key_i64(m, "ssm.group_count", &one, 1, 65536, &w->n_group)))
    return rc;
  const char *an = m->ops->name;
  if (w->d_inner % w->n_ssm_head)
    return err_set(ERR_RANGE, "%s.ssm.inner_size %lld is not a multiple of ssm.time_step_rank (heads) %lld", an,
                   (long long)w->d_inner, (long long)w->n_ssm_head);
  if (w->n_ssm_head % w->n_group)
    return err_set(ERR_RANGE, "%s.ssm.time_step_rank (heads) %lld is not a multiple of ssm.group_count %lld", an,
                   (long long)w->n_ssm_head, (long long)w->n_group);
  w->ssm_head_dim = w->d_inner / w->n_ssm_head;
  w->conv_dim = w->d_inner + 2 * w->n_group * w->d_state;
  w->d_in_proj = w->conv_dim + w->d_inner + w->n_ssm_head;
  return 0;
}

static int64_t ssm_state_floats(const ssm_weights *w) {
  return (w->d_conv - 1) * w->conv_dim + w->n_ssm_head * w->ssm_head_dim * w->d_state;
}

static int bind_mamba(model *m, const ssm_spec *sp, const ssm_weights *w, ssm_layer *L, int i) {
  const int64_t E = m->hp.n_embd, H = w->n_ssm_head;
  int rc;
  if ((rc = model_bind_matrix(m, &L->ssm_in, E, w->d_in_proj, 0, "blk.%d.ssm_in.weight", i)) ||
      (rc = model_bind_f32(m, &L->conv_w, w->d_conv, w->conv_dim, "blk.%d.ssm_conv1d.weight", i)) ||
      (rc = model_bind_vector(m, &L->conv_b, w->conv_dim, sp->conv_bias ? 0 : MODEL_BIND_OPTIONAL,
                              "blk.%d.ssm_conv1d.bias", i)) ||
      (rc = model_bind_vector(m, &L->dt_b, H, 0, "blk.%d.ssm_dt.bias", i)) ||
      (rc = model_bind_f32(m, &L->A, 1, H, "blk.%d.ssm_a", i)) ||
      (rc = model_bind_f32(m, &L->D, 1, H, "blk.%d.ssm_d", i)) ||
      (rc = model_bind_f32(m, &L->norm, w->d_inner / w->n_group, w->n_group, "blk.%d.ssm_norm.weight", i)) ||
      (rc = model_bind_matrix(m, &L->ssm_out, w->d_inner, E, 0, "blk.%d.ssm_out.weight", i)))
    return rc;
  for (int64_t h = 0; h < H; h++)
    if (!(L->A[h] < 0.0f))
      return err_set(ERR_RANGE, "tensor 'blk.%d.ssm_a' holds %g for head %lld, expected a negative decay (-exp(A_log))",
                     i, (double)L->A[h], (long long)h);
  return 0;
}

/* An attention layer's projections (no q/k norms, no q/k/v biases; an
 * attn_output.bias when the file has one) with the score scale. */
static int bind_attn(model *m, model_attn_layer *L, float scale, int i) {
  const model_hparams *hp = &m->hp;
  const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
  int rc;
  if ((rc = model_bind_matrix(m, &L->wq, E, Q, 0, "blk.%d.attn_q.weight", i)) ||
      (rc = model_bind_matrix(m, &L->wk, E, KV, 0, "blk.%d.attn_k.weight", i)) ||
      (rc = model_bind_matrix(m, &L->wv, E, KV, 0, "blk.%d.attn_v.weight", i)) ||
      (rc = model_bind_matrix(m, &L->wo, Q, E, 0, "blk.%d.attn_output.weight", i)) ||
      (rc = model_bind_vector(m, &L->bo, E, MODEL_BIND_OPTIONAL, "blk.%d.attn_output.bias", i)))
    return rc;
  L->scale = scale;
  return 0;
}

static int ssm_load(model *m) {
  const ssm_spec *sp = m->ops->spec;
  model_hparams *hp = &m->hp;
  int rc = sp->attention ? model_load_common_hparams(m, OPS_ROPE_NORMAL) : mamba2_hparams(m);
  if (rc) return rc;
  ssm_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  m->arch_data = w;
  if ((rc = ssm_hparams(m, w))) return rc;
  if (sp->granite) {
    if ((rc = model_load_granite_scales(m, &w->sc))) return rc;
  } else {
    model_scales_none(m, &w->sc);
    if (sp->attention) hp->nope_step = 1; /* nemotron_h: no layer rotates */
  }
  int64_t n_expert = 0, zero = 0;
  if (m->ops->moe && (rc = model_key_i64(m, "expert_count", &zero, 0, MODEL_MOE_MAX_EXPERT, &n_expert))) return rc;
  if (n_expert > 0) {
    const model_moe_defaults d = {.gating = MODEL_MOE_SOFTMAX, .norm_w = true};
    if ((rc = model_moe_load_hparams(m, &d, &w->moe))) return rc;
    w->has_moe = true;
  }
  w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
  bool *rec = calloc(2 * (size_t)hp->n_layer, sizeof *rec);
  if (!w->layers || !rec) {
    free(rec);
    return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  }
  bool *stateless = rec + hp->n_layer;
  if ((rc = model_io_bind(m, &w->io))) goto out;
  const int64_t E = hp->n_embd;
  for (int64_t l = 0; l < hp->n_layer && !rc; l++) {
    ssm_layer *L = &w->layers[l];
    const int i = (int)l;
    const int64_t kv = sp->attention ? model_layer_kv_heads(m, l) : 0;
    const int64_t ff = sp->mlp_layers ? model_layer_ff(m, l) : 0;
    L->kind = kv > 0 ? SSM_ATTN : ff > 0 ? SSM_MLP : SSM_MAMBA;
    if (sp->mlp_layers && kv > 0 && ff > 0) {
      rc = err_set(ERR_UNSUPPORTED, "%s: layer %d has both kv heads and a feed_forward_length (a layer is one of Mamba-2, attention or MLP)",
                   m->ops->name, i);
      break;
    }
    rec[l] = L->kind == SSM_MAMBA;
    stateless[l] = L->kind == SSM_MLP;
    if ((rc = model_bind_vector(m, &L->attn.attn_norm, E, 0, "blk.%d.attn_norm.weight", i)) ||
        (L->kind == SSM_ATTN && (rc = bind_attn(m, &L->attn, w->sc.attn, i))))
      break;
    if (L->kind == SSM_MAMBA && (rc = bind_mamba(m, sp, w, L, i))) break;
    if (L->kind == SSM_MLP &&
        ((rc = model_bind_matrix(m, &L->up, E, ff, 0, "blk.%d.ffn_up.weight", i)) ||
         (rc = model_bind_matrix(m, &L->down, ff, E, 0, "blk.%d.ffn_down.weight", i)) ||
         (rc = model_bind_vector(m, &L->up_b, ff, MODEL_BIND_OPTIONAL, "blk.%d.ffn_up.bias", i)) ||
         (rc = model_bind_vector(m, &L->down_b, E, MODEL_BIND_OPTIONAL, "blk.%d.ffn_down.bias", i))))
      break;
    if (!sp->ffn) continue;
    if ((rc = model_bind_vector(m, &L->attn.ffn_norm, E, 0, "blk.%d.ffn_norm.weight", i))) break;
    if (w->has_moe) {
      rc = model_moe_bind_layer(m, &w->moe, &L->moe, i);
    } else if ((rc = model_bind_matrix(m, &L->gate, E, hp->n_ff, 0, "blk.%d.ffn_gate.weight", i)) ||
               (rc = model_bind_matrix(m, &L->up, E, hp->n_ff, 0, "blk.%d.ffn_up.weight", i)) ||
               (rc = model_bind_matrix(m, &L->down, hp->n_ff, E, 0, "blk.%d.ffn_down.weight", i))) {
    }
  }
  if (!rc) rc = model_set_layer_kinds(m, rec, stateless, ssm_state_floats(w));
out:
  free(rec);
  return rc;
}

static void ssm_unload(model *m) {
  ssm_weights *w = m->arch_data;
  if (!w) return;
  free(w->layers);
  free(w);
  m->arch_data = NULL;
}

static int ssm_ctx_init(model_ctx *c) {
  const ssm_weights *w = c->m->arch_data;
  ssm_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
  c->arch_data = b;
  int rc = model_dense_bufs_init(c, &b->d);
  if (!rc && w->has_moe) rc = model_moe_bufs_init(c, &w->moe, &b->moe);
  if (rc) return rc;
  const size_t nb = (size_t)c->n_batch;
  const size_t floats[5] = {nb * (size_t)w->d_in_proj, nb * (size_t)w->conv_dim, nb * (size_t)w->conv_dim,
                            nb * (size_t)w->d_inner, ops_ssm_work_floats(SSM_CHUNK) * (size_t)c->n_threads};
  float **ptrs[5] = {&b->zx, &b->xin, &b->xbc, &b->y, &b->work};
  for (int i = 0; i < 5; i++) {
    b->bytes[i] = floats[i] * sizeof(float);
    if (!(*ptrs[i] = malloc(b->bytes[i]))) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
    c->buf_bytes += b->bytes[i];
  }
  return 0;
}

static void ssm_ctx_free(model_ctx *c) {
  ssm_bufs *b = c->arch_data;
  if (!b) return;
  model_dense_bufs_free(&b->d);
  model_moe_bufs_free(&b->moe);
  free(b->zx);
  free(b->xin);
  free(b->xbc);
  free(b->y);
  free(b->work);
  free(b);
  c->arch_data = NULL;
}

static void ssm_ctx_trim(model_ctx *c) {
  ssm_bufs *b = c->arch_data;
  model_dense_bufs_trim(&b->d);
  if (b->moe.bytes) model_moe_bufs_trim(&b->moe);
  float *ptrs[4] = {b->zx, b->xin, b->xbc, b->y};
  for (int i = 0; i < 4; i++) model_release_pages(ptrs[i], b->bytes[i]);
}

/* One run's scan split across the pool: thread ith takes the ith
 * contiguous slice of every group's heads (each slice computes its group's
 * C B^T once; the result does not depend on the thread count). */
typedef struct scan_job {
  const ops_ssm_io *io;
  float *S;        /* the run's state [H][P][N] */
  float *work;     /* [nth][work_floats] */
  size_t work_floats;
} scan_job;

static void scan_worker(void *ctx, int ith, int nth) {
  const scan_job *j = ctx;
  const ops_ssm_io *io = j->io;
  const int64_t hpg = io->n_head / io->n_group;
  for (int64_t g = 0; g < io->n_group; g++) {
    const int64_t h0 = g * hpg + hpg * ith / nth, h1 = g * hpg + hpg * (ith + 1) / nth;
    if (h0 == h1) continue;
    ops_ssm_io sub = ops_ssm_io_heads(io, h0, h1);
    float *S = j->S + h0 * io->head_dim * io->d_state;
    if (io->n == 1) ops_ssm_scan_ref(&sub, S);
    else ops_ssm_scan_chunked(&sub, S, SSM_CHUNK, j->work + (size_t)ith * j->work_floats);
  }
}

/* The Mamba-2 mixer of layer l: b->d.xn rows (the normalized input of the
 * step's tokens) become ssm_out y; each sequence's state advances over its
 * tokens. */
static int mamba_forward(model_ctx *c, const model_step *st, int64_t l, const ssm_layer *L, const ssm_weights *w,
                         ssm_bufs *b) {
  const int64_t n = st->n, Dp = w->d_in_proj, CD = w->conv_dim, DI = w->d_inner, GN = w->n_group * w->d_state;
  int rc = model_matmul(c, &L->ssm_in, b->d.xn, n, b->zx);
  if (rc) return rc;
  for (int64_t t = 0; t < n; t++) memcpy(b->xin + t * CD, b->zx + t * Dp + DI, (size_t)CD * sizeof(float));
  for (int64_t t0 = 0; t0 < n;) {
    int64_t t1 = t0 + 1;
    while (t1 < n && st->seq[t1] == st->seq[t0]) t1++;
    float *state = model_rs_state(c, st->seq[t0], l);
    float *xbc = b->xbc + t0 * CD;
    ops_conv1d(xbc, b->xin + t0 * CD, t1 - t0, CD, L->conv_w, (int32_t)w->d_conv, L->conv_b, state);
    for (int64_t i = 0; i < (t1 - t0) * CD; i++) xbc[i] = xbc[i] / (1.0f + expf(-xbc[i]));
    ops_ssm_io io = {.n = t1 - t0, .n_head = w->n_ssm_head, .head_dim = w->ssm_head_dim, .d_state = w->d_state,
                     .n_group = w->n_group, .x = xbc, .ldx = CD, .B = xbc + DI, .ldb = CD, .C = xbc + DI + GN,
                     .ldc = CD, .dt = b->zx + t0 * Dp + DI + CD, .lddt = Dp, .dt_bias = L->dt_b, .A = L->A,
                     .D = L->D, .y = b->y + t0 * DI, .ldy = DI};
    scan_job j = {.io = &io, .S = state + (w->d_conv - 1) * CD, .work = b->work,
                  .work_floats = ops_ssm_work_floats(SSM_CHUNK)};
    /* the state is read and written once per token: worth the pool's
     * wake-up from about 64K values on */
    if ((t1 - t0) * w->n_ssm_head * w->ssm_head_dim * w->d_state >= 65536 && c->n_threads > 1)
      tpool_run(c->tp, scan_worker, &j);
    else
      scan_worker(&j, 0, 1);
    t0 = t1;
  }
  ops_ssm_gated_norm(b->y, DI, b->zx, Dp, n, DI, w->n_group, L->norm, c->m->hp.norm_eps);
  return model_matmul(c, &L->ssm_out, b->y, n, b->d.xn);
}

/* nemotron_h's MLP layer: b->xn rows become down relu(up xn (+ b))^2 (+ b),
 * in sub-batches of model_ffn_rows tokens through b->g. */
static int mlp_forward(model_ctx *c, const ssm_layer *L, model_dense_bufs *b, int64_t n) {
  const int64_t E = c->m->hp.n_embd, F = L->up.n_rows, FR = model_ffn_rows(c);
  for (int64_t t0 = 0; t0 < n; t0 += FR) {
    const int64_t k = n - t0 < FR ? n - t0 : FR;
    float *xn = b->xn + t0 * E;
    int rc = model_matmul(c, &L->up, xn, k, b->g);
    if (rc) return rc;
    for (int64_t t = 0; t < k; t++)
      for (int64_t i = 0; i < F; i++) {
        float v = b->g[t * F + i] + (L->up_b ? L->up_b[i] : 0.0f);
        v = v > 0.0f ? v : 0.0f;
        b->g[t * F + i] = v * v;
      }
    if ((rc = model_matmul(c, &L->down, b->g, k, xn))) return rc;
    if (L->down_b)
      for (int64_t t = 0; t < k; t++)
        for (int64_t i = 0; i < E; i++) xn[t * E + i] += L->down_b[i];
  }
  return 0;
}

static int ssm_forward(model_ctx *c, const model_step *st, float *logits) {
  const model_hparams *hp = &c->m->hp;
  const ssm_spec *sp = c->m->ops->spec;
  const ssm_weights *w = c->m->arch_data;
  ssm_bufs *sb = c->arch_data;
  model_dense_bufs *b = &sb->d;
  const int64_t n = st->n, E = hp->n_embd;
  int rc;
  if ((rc = model_dense_embed(c, st, &w->io.tok_embd, b))) return rc;
  model_scale_rows(b->x, n * E, w->sc.embd);
  model_dense_norm(c, b, n, w->layers[0].attn.attn_norm);
  for (int64_t l = 0; l < hp->n_layer; l++) {
    const ssm_layer *L = &w->layers[l];
    const float *next = l + 1 < hp->n_layer ? w->layers[l + 1].attn.attn_norm : NULL;
    rc = L->kind == SSM_MAMBA ? mamba_forward(c, st, l, L, w, sb)
         : L->kind == SSM_ATTN ? model_attn_forward(c, st, l, &L->attn, b)
                               : mlp_forward(c, L, b, n);
    if (rc) return rc;
    model_scale_rows(b->xn, n * E, w->sc.resid);
    if (!sp->ffn) {
      model_dense_add_norm(c, b, n, next);
      continue;
    }
    model_dense_add_norm(c, b, n, L->attn.ffn_norm);
    rc = w->has_moe ? model_moe_ffn(c, &w->moe, &L->moe, &sb->moe, b->xn, n)
                    : model_dense_ffn(c, &L->gate, &L->up, &L->down, b, n);
    if (rc) return rc;
    model_scale_rows(b->xn, n * E, w->sc.resid);
    model_dense_add_norm(c, b, n, next);
  }
  if ((rc = model_io_logits(c, st, &w->io, b, logits))) return rc;
  if (st->n_out > 0) model_scale_rows(logits, st->n_out * hp->n_vocab, 1.0f / w->sc.logit);
  return 0;
}

#define SSM_ROW(nm, sp, is_moe)                                                                                \
  {                                                                                                            \
    .name = nm, .load = ssm_load, .unload = ssm_unload, .ctx_init = ssm_ctx_init, .ctx_free = ssm_ctx_free,  \
    .forward = ssm_forward, .trim = ssm_ctx_trim, .hybrid = true, .moe = is_moe, .spec = (sp),                \
  }

static const ssm_spec MAMBA2 = {.conv_bias = true};
static const ssm_spec GRANITEHYBRID = {.attention = true, .ffn = true, .granite = true};
static const ssm_spec NEMOTRON_H = {.attention = true, .mlp_layers = true};

const model_arch_ops model_arch_mamba2 = SSM_ROW("mamba2", &MAMBA2, false);
const model_arch_ops model_arch_granitehybrid = SSM_ROW("granitehybrid", &GRANITEHYBRID, true);
const model_arch_ops model_arch_nemotron_h = SSM_ROW("nemotron_h", &NEMOTRON_H, false);
