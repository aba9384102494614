/*
 * gemma4.c - the gemma4 architecture (general.architecture = "gemma4"):
 * the text part of Gemma 4 (E2B, E4B with per-layer embeddings and shared
 * KV layers; 31B dense). The mixture-of-experts 26B-A4B (ffn_gate_inp and
 * expert tensors) is refused at load (ARCH.expert_count > 0).
 *
 * Gemma 3's block (gemma.c) with these differences, as llama.cpp's
 * converter writes them:
 *   - layer kinds come from ARCH.attention.sliding_window_pattern, one
 *     bool per layer (true = sliding; must repeat with a period, see
 *     model_load_swa_hparams); window ARCH.attention.sliding_window;
 *   - sliding and full layers have their own head widths: full layers
 *     ARCH.attention.key_length (= value_length), sliding layers
 *     attention.key_length_swa (= value_length_swa); the sliding layers
 *     rotate rope.dimension_count_swa dims (default their head width) with
 *     base rope.freq_base_swa (10000 when absent), the full layers
 *     rope.dimension_count with rope.freq_base and the file's
 *     rope_freqs.weight [n_rot / 2] divisors ("proportional" RoPE: huge
 *     divisors leave the tail of every head unrotated);
 *   - the attention scale is 1 (no 1/sqrt(head_dim)): q and k are
 *     RMS-normalised per head with weights (attn_{q,k}_norm [head width]),
 *     v per head without a weight;
 *   - ARCH.attention.shared_kv_layers = S: the last S layers compute no k
 *     and v; layer l >= n_kv = n_layer - S reads the cache of layer
 *     n_kv - 2 when it slides, n_kv - 1 when it is full (that layer must be
 *     of the same kind). Only the first n_kv layers own cache blocks
 *     (m->layer_kv maps the rest onto their sources);
 *   - attn_v.weight may be absent: v is then k's projection (before the k
 *     norm and RoPE);
 *   - ARCH.feed_forward_length may be one width per layer;
 *   - per-layer embeddings (ARCH.embedding_length_per_layer_input = P > 0):
 *     once per step, for token t with x0 = token_embd[t] * sqrt(n_embd),
 *       pl[t] = (n(per_layer_model_proj x0 / sqrt(n_embd)) per layer chunk
 *                with per_layer_proj_norm [P]
 *                + per_layer_token_embd[t] * sqrt(P)) / sqrt(2)
 *     ([n_layer][P] per token), and at the end of block l
 *       x += rms(blk.l.proj (gelu(blk.l.inp_gate x) * pl[t][l])) * blk.l.post_norm;
 *   - blk.N.layer_output_scale.weight [1], when present, multiplies the
 *     block's output (the whole residual stream);
 *   - final logits soft-capped by ARCH.final_logit_softcapping when set.
 *
 * One block, for x[n][n_embd] (hd_l the layer's head width):
 *   q = rope_l(qnorm(Wq n(x)));  k = rope_l(knorm(Wk n(x)));  v = rms(Wv n(x))
 *   h = x + n_post_attn(Wo attention(q, k, v, scale 1))
 *   y = h + n_post_ffw(Wdown (gelu(Wgate n(h)) * Wup n(h)))
 *   y += per-layer embedding term; x = y * layer_output_scale
 *
 * The KV cache (model.c) has one head width for every layer: hp.head_dim
 * is the larger of the two, and a layer with narrower heads stores them
 * zero-padded. Zeros add nothing to q . k and give zero output columns,
 * which are dropped before Wo, so the result is exact; the cost is the
 * padding's memory and work on the narrower layers. All layers must have
 * one kv-head count (ARCH.attention.head_count_kv as one number, or an
 * array of equal entries).
 *
 * Start reading at gemma4_forward(); buffers are model_dense_bufs plus the
 * sliding layers' RoPE cos/sin and the per-layer embedding rows.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "gguf/gguf.h"
#include "model/model_int.h"

typedef struct gemma4_layer {
  bool swa;                /* a sliding-window layer */
  bool has_kv;             /* computes and stores its own k and v */
  int64_t hd;              /* head width: hd_swa or hd_full */
  const float *attn_norm;  /* [n_embd] */
  model_tensor wq;         /* [n_head*hd][n_embd] */
  model_tensor wk;         /* [n_head_kv*hd][n_embd]; data NULL when !has_kv */
  model_tensor wv;         /* [n_head_kv*hd][n_embd]; data NULL: v = Wk x */
  const float *q_norm;     /* [hd] */
  const float *k_norm;     /* [hd]; NULL when !has_kv */
  model_tensor wo;         /* [n_embd][n_head*hd] */
  const float *post_attn;  /* [n_embd] post_attention_norm */
  const float *ffn_norm;   /* [n_embd] */
  model_tensor gate, up;   /* [n_ff_l][n_embd] */
  model_tensor down;       /* [n_embd][n_ff_l] */
  const float *post_ffn;   /* [n_embd] post_ffw_norm */
  const float *out_scale;  /* [1] layer_output_scale, or NULL */
  /* per-layer embeddings (P > 0) */
  model_tensor inp_gate;   /* [P][n_embd] */
  model_tensor proj;       /* [n_embd][P] */
  const float *post_norm;  /* [n_embd] */
} gemma4_layer;

typedef struct gemma4_weights {
  model_io io;               /* token_embd, output_norm, output (tied when absent) */
  gemma4_layer *layers;      /* [n_layer] */
  float embd_scale;          /* sqrt(n_embd) */
  int64_t hd_full, hd_swa;   /* head widths of full and sliding layers */
  int64_t n_pl;              /* P: per-layer embedding width, 0 = none */
  model_tensor pl_tok_embd;  /* [n_vocab][n_layer*P] per_layer_token_embd */
  model_tensor pl_proj;      /* [n_layer*P][n_embd] per_layer_model_proj */
  const float *pl_proj_norm; /* [P] */
  int32_t *kv_map;           /* [n_layer] cache block of each layer (m->layer_kv) */
} gemma4_weights;

typedef struct gemma4_bufs {
  model_dense_bufs d;
  float *rope_swa_cs; /* [n_batch][rope_swa.n_rot] cos/sin of hp.rope_swa */
  float *pl;          /* [n_batch][n_layer*P] the step's per-layer inputs */
  float *pg, *pu;     /* [n_batch][P] gate products, one layer's pl slice */
  float *pl_row;      /* [n_layer*P] one token's per_layer_token_embd row */
} gemma4_bufs;

/* The head widths, the sliding layers' RoPE and the shared-KV map. */
static int gemma4_load_hparams(model *m, gemma4_weights *w) {
  model_hparams *hp = &m->hp;
  const char *an = m->ops->name;
  int rc;
  char key[160];
  snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", an);
  if (!gguf_find(m->f, key)) return err_set(ERR_NOT_FOUND, "key '%s' is missing", key);
  if ((rc = model_load_swa_hparams(m, 0, NULL, 10000.0f))) return rc;
  const float no_cap = 0.0f;
  if ((rc = model_load_softcap(m, "final_logit_softcapping", &no_cap, true, &hp->final_softcap))) return rc;

  w->hd_full = hp->head_dim;
  if ((rc = model_key_i64(m, "attention.key_length_swa", NULL, 2, 65536, &w->hd_swa))) return rc;
  int64_t vs = 0;
  if ((rc = model_key_i64(m, "attention.value_length_swa", &w->hd_swa, 1, 65536, &vs))) return rc;
  if (vs != w->hd_swa)
    return err_set(ERR_UNSUPPORTED, "%s.attention.value_length_swa %lld differs from key_length_swa %lld", an,
                   (long long)vs, (long long)w->hd_swa);
  int64_t n_rot_swa = 0;
  if ((rc = model_key_i64(m, "rope.dimension_count_swa", &w->hd_swa, 2, w->hd_swa, &n_rot_swa))) return rc;
  if (n_rot_swa % 2)
    return err_set(ERR_RANGE, "key '%s.rope.dimension_count_swa' is %lld, expected an even number", an,
                   (long long)n_rot_swa);
  hp->rope_swa.n_rot = (int32_t)n_rot_swa;
  if (w->hd_swa > hp->head_dim) hp->head_dim = w->hd_swa; /* the cache's width (see the header) */

  /* one kv-head count: load_head_count_kv already refuses unequal
   * entries; a 0 entry (a layer without attention) is not gemma4 */
  for (int64_t l = 0; l < hp->n_layer; l++)
    if (model_layer_kv_heads(m, l) != hp->n_head_kv)
      return err_set(ERR_RANGE, "key '%s.attention.head_count_kv': layer %lld has %lld kv heads, expected %lld", an,
                     (long long)l, (long long)model_layer_kv_heads(m, l), (long long)hp->n_head_kv);

  int64_t shared = 0, zero = 0;
  if ((rc = model_key_i64(m, "attention.shared_kv_layers", &zero, 0, INT32_MAX, &shared))) return rc;
  if (shared >= hp->n_layer)
    return err_set(ERR_RANGE, "key '%s.attention.shared_kv_layers' is %lld, expected less than block_count %lld", an,
                   (long long)shared, (long long)hp->n_layer);
  const int64_t n_kv = hp->n_layer - shared;
  w->kv_map = malloc((size_t)hp->n_layer * sizeof *w->kv_map);
  if (!w->kv_map) return err_set(ERR_NOMEM, "%s: out of memory", an);
  for (int64_t l = 0; l < hp->n_layer; l++) {
    const bool swa = model_layer_window(hp, l) > 0;
    gemma4_layer *L = &w->layers[l];
    L->swa = swa;
    L->hd = swa ? w->hd_swa : w->hd_full;
    L->has_kv = l < n_kv;
    if (L->has_kv) {
      w->kv_map[l] = (int32_t)l;
      continue;
    }
    const int64_t src = n_kv - (swa ? 2 : 1);
    if (src < 0 || (model_layer_window(hp, src) > 0) != swa)
      return err_set(ERR_UNSUPPORTED,
                     "%s.attention.shared_kv_layers %lld: %s layer %lld would read the cache of layer %lld, which is "
                     "not a %s layer",
                     an, (long long)shared, swa ? "sliding" : "full", (long long)l, (long long)src,
                     swa ? "sliding" : "full");
    w->kv_map[l] = w->kv_map[src];
  }
  m->layer_kv = w->kv_map;
  hp->n_layer_kv = n_kv;

  if ((rc = model_key_i64(m, "embedding_length_per_layer_input", &zero, 0, 1 << 16, &w->n_pl))) return rc;
  return 0;
}

static int gemma4_bind_layer(model *m, gemma4_weights *w, int i) {
  const model_hparams *hp = &m->hp;
  gemma4_layer *L = &w->layers[i];
  const int64_t E = hp->n_embd, hd = L->hd, Q = hp->n_head * hd, KV = hp->n_head_kv * hd, P = w->n_pl;
  const int64_t F = model_layer_ff(m, i);
  if (F < 1)
    return err_set(ERR_RANGE, "key '%s.feed_forward_length': layer %d has width %lld, expected >= 1", m->ops->name, i,
                   (long long)F);
  int rc;
  if ((rc = model_bind_vector(m, &L->attn_norm, E, 0, "blk.%d.attn_norm.weight", i)) ||
      (rc = model_bind_matrix(m, &L->wq, E, Q, 0, "blk.%d.attn_q.weight", i)) ||
      (rc = model_bind_vector(m, &L->q_norm, hd, 0, "blk.%d.attn_q_norm.weight", i)) ||
      (rc = model_bind_matrix(m, &L->wo, Q, E, 0, "blk.%d.attn_output.weight", i)) ||
      (rc = model_bind_vector(m, &L->post_attn, E, 0, "blk.%d.post_attention_norm.weight", i)) ||
      (rc = model_bind_vector(m, &L->ffn_norm, E, 0, "blk.%d.ffn_norm.weight", i)) ||
      (rc = model_bind_matrix(m, &L->gate, E, F, 0, "blk.%d.ffn_gate.weight", i)) ||
      (rc = model_bind_matrix(m, &L->up, E, F, 0, "blk.%d.ffn_up.weight", i)) ||
      (rc = model_bind_matrix(m, &L->down, F, E, 0, "blk.%d.ffn_down.weight", i)) ||
      (rc = model_bind_vector(m, &L->post_ffn, E, 0, "blk.%d.post_ffw_norm.weight", i)) ||
      (rc = model_bind_vector(m, &L->out_scale, 1, MODEL_BIND_OPTIONAL, "blk.%d.layer_output_scale.weight", i)))
    return rc;
  if (L->has_kv && ((rc = model_bind_matrix(m, &L->wk, E, KV, 0, "blk.%d.attn_k.weight", i)) ||
                    (rc = model_bind_matrix(m, &L->wv, E, KV, MODEL_BIND_OPTIONAL, "blk.%d.attn_v.weight", i)) ||
                    (rc = model_bind_vector(m, &L->k_norm, hd, 0, "blk.%d.attn_k_norm.weight", i))))
    return rc;
  if (P > 0 && ((rc = model_bind_matrix(m, &L->inp_gate, E, P, 0, "blk.%d.inp_gate.weight", i)) ||
                (rc = model_bind_matrix(m, &L->proj, P, E, 0, "blk.%d.proj.weight", i)) ||
                (rc = model_bind_vector(m, &L->post_norm, E, 0, "blk.%d.post_norm.weight", i))))
    return rc;
  return 0;
}

static int gemma4_load(model *m) {
  model_hparams *hp = &m->hp;
  int rc = model_load_common_hparams(m, OPS_ROPE_NEOX);
  if (rc) return rc;
  gemma4_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  m->arch_data = w;
  w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
  if (!w->layers) return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  if ((rc = gemma4_load_hparams(m, w)) || (rc = model_io_bind(m, &w->io))) return rc; /* io sets n_vocab */
  const int64_t E = hp->n_embd, P = w->n_pl;
  w->embd_scale = sqrtf((float)E);

  if (P > 0 && ((rc = model_bind_matrix(m, &w->pl_tok_embd, hp->n_layer * P, hp->n_vocab, MODEL_BIND_ROWS,
                                        "per_layer_token_embd.weight")) ||
                (rc = model_bind_matrix(m, &w->pl_proj, E, hp->n_layer * P, 0, "per_layer_model_proj.weight")) ||
                (rc = model_bind_vector(m, &w->pl_proj_norm, P, 0, "per_layer_proj_norm.weight"))))
    return rc;
  for (int64_t l = 0; l < hp->n_layer; l++)
    if ((rc = gemma4_bind_layer(m, w, (int)l))) return rc;
  return 0;
}

static void gemma4_unload(model *m) {
  gemma4_weights *w = m->arch_data;
  if (!w) return;
  if (m->layer_kv == w->kv_map) m->layer_kv = NULL;
  free(w->kv_map);
  free(w->layers);
  free(w);
  m->arch_data = NULL;
}

static int gemma4_ctx_init(model_ctx *c) {
  const model_hparams *hp = &c->m->hp;
  const gemma4_weights *w = c->m->arch_data;
  gemma4_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
  c->arch_data = b;
  int rc = model_dense_bufs_init(c, &b->d);
  if (rc) return rc;
  const size_t B = (size_t)c->n_batch, LP = (size_t)(hp->n_layer * w->n_pl), P = (size_t)w->n_pl;
  const size_t cs = B * (size_t)hp->rope_swa.n_rot * sizeof(float);
  b->rope_swa_cs = malloc(cs);
  if (!b->rope_swa_cs) return err_set(ERR_NOMEM, "%s context: out of memory", c->m->ops->name);
  c->buf_bytes += cs;
  if (P == 0) return 0;
  b->pl = malloc(B * LP * sizeof(float));
  b->pg = malloc(B * P * sizeof(float));
  b->pu = malloc(B * P * sizeof(float));
  b->pl_row = malloc(LP * sizeof(float));
  if (!b->pl || !b->pg || !b->pu || !b->pl_row)
    return err_set(ERR_NOMEM, "%s context: cannot allocate the per-layer embedding buffers", c->m->ops->name);
  c->buf_bytes += (B * LP + 2 * B * P + LP) * sizeof(float);
  return 0;
}

static void gemma4_ctx_free(model_ctx *c) {
  gemma4_bufs *b = c->arch_data;
  model_dense_bufs_free(&b->d);
  free(b->rope_swa_cs);
  free(b->pl);
  free(b->pg);
  free(b->pu);
  free(b->pl_row);
  free(b);
  c->arch_data = NULL;
}

static void gemma4_ctx_trim(model_ctx *c) { model_dense_bufs_trim(&((gemma4_bufs *)c->arch_data)->d); }

/* The step's per-layer inputs pl [n][n_layer*P] from the scaled
 * embeddings b->x (see the header). */
static int gemma4_per_layer_inputs(model_ctx *c, const model_step *st, gemma4_bufs *gb) {
  const model_hparams *hp = &c->m->hp;
  const gemma4_weights *w = c->m->arch_data;
  const int64_t n = st->n, P = w->n_pl, LP = hp->n_layer * P, E = hp->n_embd;
  int rc = model_matmul(c, &w->pl_proj, gb->d.x, n, gb->pl);
  if (rc) return rc;
  const float proj_scale = 1.0f / sqrtf((float)E), tok_scale = sqrtf((float)P), in_scale = 1.0f / sqrtf(2.0f);
  for (int64_t t = 0; t < n; t++) {
    float *row = gb->pl + t * LP;
    for (int64_t i = 0; i < LP; i++) row[i] *= proj_scale;
    model_norm_rows(row, hp->n_layer, P, w->pl_proj_norm, hp->norm_eps);
    if ((rc = model_tensor_row_f32(&w->pl_tok_embd, st->tokens[t], gb->pl_row))) return rc;
    for (int64_t i = 0; i < LP; i++) row[i] = (row[i] + gb->pl_row[i] * tok_scale) * in_scale;
  }
  return 0;
}

/* rows of width hd spread to width HD (zeros after), in place, for n_rows
 * rows; HD >= hd, the buffer holds n_rows * HD floats. */
static void gemma4_pad_rows(float *x, int64_t n_rows, int64_t hd, int64_t HD) {
  if (hd == HD) return;
  for (int64_t r = n_rows - 1; r >= 0; r--) {
    memmove(x + r * HD, x + r * hd, (size_t)hd * sizeof *x);
    memset(x + r * HD + hd, 0, (size_t)(HD - hd) * sizeof *x);
  }
}

/* The inverse: rows of width HD packed to their first hd values. */
static void gemma4_unpad_rows(float *x, int64_t n_rows, int64_t hd, int64_t HD) {
  if (hd == HD) return;
  for (int64_t r = 0; r < n_rows; r++) memmove(x + r * hd, x + r * HD, (size_t)hd * sizeof *x);
}

/* Layer l's attention sub-layer: b->xn (normalised input) becomes
 * Wo attention(...), not yet post-normed. */
static int gemma4_attn(model_ctx *c, const model_step *st, int64_t l, gemma4_bufs *gb) {
  const model_hparams *hp = &c->m->hp;
  const gemma4_weights *w = c->m->arch_data;
  const gemma4_layer *L = &w->layers[l];
  model_dense_bufs *b = &gb->d;
  const int64_t n = st->n, hd = L->hd, HD = hp->head_dim, nh = hp->n_head, nkv = hp->n_head_kv;
  const float eps = hp->norm_eps;
  int rc;
  if (L->has_kv) {
    const bool v_own = L->wv.data != NULL;
    const model_tensor *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *const qkv_y[3] = {b->q, b->k, b->v};
    if ((rc = model_matmul_multi(c, v_own ? 3 : 2, qkv, qkv_y, b->xn, n))) return rc;
    if (!v_own) memcpy(b->v, b->k, (size_t)(n * nkv * hd) * sizeof *b->v);
  } else if ((rc = model_matmul(c, &L->wq, b->xn, n, b->q))) {
    return rc;
  }
  model_prof_mark(c, MODEL_PROF_QKV);
  const ops_rope *rope = L->swa ? &hp->rope_swa : &hp->rope;
  const float *cs = L->swa ? gb->rope_swa_cs : c->rope_cs;
  const int32_t n_rot = rope->n_rot;
  model_norm_rows(b->q, n * nh, hd, L->q_norm, eps);
  for (int64_t t = 0; t < n; t++) ops_rope_apply_cached(rope, cs + t * n_rot, b->q + t * nh * hd, (int32_t)nh, (int32_t)hd);
  gemma4_pad_rows(b->q, n * nh, hd, HD);
  if (L->has_kv) {
    model_norm_rows(b->k, n * nkv, hd, L->k_norm, eps);
    model_norm_rows(b->v, n * nkv, hd, NULL, eps);
    for (int64_t t = 0; t < n; t++)
      ops_rope_apply_cached(rope, cs + t * n_rot, b->k + t * nkv * hd, (int32_t)nkv, (int32_t)hd);
    gemma4_pad_rows(b->k, n * nkv, hd, HD);
    gemma4_pad_rows(b->v, n * nkv, hd, HD);
    model_kv_store(c, l, st, b->k, b->v);
  }
  model_prof_mark(c, MODEL_PROF_ROPE_KV);
  if ((rc = model_attention(c, l, st, b->q, b->att, 1.0f))) return rc;
  model_prof_mark(c, MODEL_PROF_ATTN);
  gemma4_unpad_rows(b->att, n * nh, hd, HD);
  if ((rc = model_matmul(c, &L->wo, b->att, n, b->xn))) return rc;
  model_prof_mark(c, MODEL_PROF_WO);
  return 0;
}

/* x += rms(proj (gelu(inp_gate x) * pl[.][l])) * post_norm for the step. */
static int gemma4_per_layer_add(model_ctx *c, int64_t n, int64_t l, gemma4_bufs *gb) {
  const model_hparams *hp = &c->m->hp;
  const gemma4_weights *w = c->m->arch_data;
  const gemma4_layer *L = &w->layers[l];
  model_dense_bufs *b = &gb->d;
  const int64_t P = w->n_pl, LP = hp->n_layer * P, E = hp->n_embd;
  int rc = model_matmul(c, &L->inp_gate, b->x, n, gb->pg);
  if (rc) return rc;
  for (int64_t t = 0; t < n; t++) memcpy(gb->pu + t * P, gb->pl + t * LP + l * P, (size_t)P * sizeof(float));
  model_glu(c, MODEL_FFN_GELU, gb->pg, gb->pu, n * P);
  if ((rc = model_matmul(c, &L->proj, gb->pg, n, b->xn))) return rc;
  model_norm_rows(b->xn, n, E, L->post_norm, hp->norm_eps);
  for (int64_t i = 0; i < n * E; i++) b->x[i] += b->xn[i];
  return 0;
}

static int gemma4_forward(model_ctx *c, const model_step *st, float *logits) {
  const int64_t n = st->n;
  const model_hparams *hp = &c->m->hp;
  const gemma4_weights *w = c->m->arch_data;
  gemma4_bufs *gb = c->arch_data;
  model_dense_bufs *b = &gb->d;
  const int64_t E = hp->n_embd;
  const float eps = hp->norm_eps;
  int rc;

  if ((rc = model_dense_embed(c, st, &w->io.tok_embd, b))) return rc;
  for (int64_t i = 0; i < n * E; i++) b->x[i] *= w->embd_scale;
  for (int64_t t = 0; t < n; t++)
    ops_rope_cache(&hp->rope_swa, st->pos[t], gb->rope_swa_cs + t * hp->rope_swa.n_rot);
  if (w->n_pl > 0 && (rc = gemma4_per_layer_inputs(c, st, gb))) return rc;

  for (int64_t l = 0; l < hp->n_layer; l++) {
    const gemma4_layer *L = &w->layers[l];
    model_dense_norm(c, b, n, L->attn_norm);
    if ((rc = gemma4_attn(c, st, l, gb))) return rc;
    model_norm_rows(b->xn, n, E, L->post_attn, eps);
    model_dense_add_norm(c, b, n, L->ffn_norm); /* x += post(Wo . att), xn = rms(x) */
    if ((rc = model_dense_ffn_act(c, MODEL_FFN_GELU, &L->gate, &L->up, &L->down, b, n))) return rc;
    model_norm_rows(b->xn, n, E, L->post_ffn, eps);
    model_dense_add_norm(c, b, n, NULL);
    if (w->n_pl > 0 && (rc = gemma4_per_layer_add(c, n, l, gb))) return rc;
    if (L->out_scale) model_scale_rows(b->x, n * E, L->out_scale[0]);
  }

  if ((rc = model_io_logits(c, st, &w->io, b, logits))) return rc;
  model_logit_softcap(logits, st->n_out * hp->n_vocab, hp->final_softcap);
  return 0;
}

const model_arch_ops model_arch_gemma4 = {
    .name = "gemma4",
    .load = gemma4_load,
    .unload = gemma4_unload,
    .ctx_init = gemma4_ctx_init,
    .ctx_free = gemma4_ctx_free,
    .forward = gemma4_forward,
    .trim = gemma4_ctx_trim,
    .hybrid = true, /* for per-layer feed_forward_length arrays; kv heads are checked in load */
};
