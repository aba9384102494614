/*
 * moe.c - the mixture-of-experts feed-forward (see moe.h), shared by every
 * MoE architecture.
 *
 * For a sub-batch of n tokens (rows of the normalized input xn):
 *   1. router: logits = Wr xn ([n][n_expert], one model_matmul);
 *   2. routing (model_moe_route): per token the k experts and their
 *      weights, by the gating the file declares;
 *   3. grouping: the n*k (token, expert) pairs sorted by expert (tokens in
 *      order within an expert) and the inputs gathered into xg, so that
 *      each active expert is one group of rows [n_e][n_embd]; the shared
 *      expert, when there is one, is one more group holding every token;
 *   4. job 1 (one pool job for all groups): each thread takes the same
 *      slice of rows [f0, f1) of every group's gate and up matrices and
 *      computes act_e[:, f0:f1] = silu(gate_e x) * up_e x for that group's
 *      tokens (kern_matmul on the calling thread, tp NULL), so an expert's
 *      rows are read once per step for all the tokens routed to it (a
 *      grouped matrix multiply) and there is no barrier between experts;
 *   5. job 2: each thread takes a slice [d0, d1) of the output dimensions,
 *      zeroes those columns of xn and, group by group, computes
 *      down_e[d0:d1] act_e and adds w * it into its tokens' rows. Threads
 *      write disjoint columns, so again one barrier for all experts.
 * One token (generation) is the same path with n = 1: the k experts' rows
 * are the only expert weights read, two pool jobs per layer after the
 * router. Every row of a product is computed the same whatever the thread
 * count and the other tokens of the call (kern_matmul's contract), and the
 * adds run in expert order, so a token's output does not depend on its
 * batch companions: the batched and the one-token paths agree bit for bit.
 *
 * Expert tensors stay in the file mapping (model_experts): no repacked
 * copy, so a token faults in only the experts it uses. Start reading at
 * model_moe_ffn(). At the end, model_file_params (model.h): a file's total
 * and active parameter counts from its header, for the registry.
 */
#include "model/moe.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/tensor_type.h"

/* ---- hyper-parameters ------------------------------------------------------ */

int model_moe_load_hparams(model *m, const model_moe_defaults *d, model_moe_hparams *p) {
  const char *an = m->ops->name;
  int rc;
  memset(p, 0, sizeof *p);
  if ((rc = model_key_i64(m, "expert_count", NULL, 1, MODEL_MOE_MAX_EXPERT, &p->n_expert))) return rc;
  if ((rc = model_key_i64(m, "expert_used_count", NULL, 1, MODEL_MOE_MAX_USED, &p->n_used))) return rc;
  if (p->n_used > p->n_expert)
    return err_set(ERR_RANGE, "key '%s.expert_used_count' is %lld, more than the %lld experts (expert_count)", an,
                   (long long)p->n_used, (long long)p->n_expert);
  if ((rc = model_key_i64(m, "expert_feed_forward_length", &m->hp.n_ff, 1, (int64_t)1 << 24, &p->n_ff_exp)))
    return rc;
  int64_t zero = 0, gating = 0, def_g = d->gating;
  if ((rc = model_key_i64(m, "expert_shared_feed_forward_length", d->shexp ? &m->hp.n_ff : &zero, d->shexp ? 1 : 0,
                          (int64_t)1 << 24, &p->n_ff_shexp)))
    return rc;
  p->shexp_gate = d->shexp;
  if ((rc = model_key_i64(m, "expert_gating_func", &def_g, 0, 1 << 16, &gating))) return rc;
  if (gating == 0) gating = def_g; /* "none": the architecture's */
  if (gating < MODEL_MOE_SOFTMAX || gating > MODEL_MOE_SOFTMAX_WEIGHT)
    return err_set(ERR_UNSUPPORTED, "key '%s.expert_gating_func' is %lld: only 1 (softmax), 2 (sigmoid) and 3 "
                   "(softmax of the selected) are supported", an, (long long)gating);
  p->gating = (enum model_moe_gating)gating;
  char key[160];
  snprintf(key, sizeof key, "%s.expert_weights_norm", an);
  p->norm_w = d->norm_w;
  rc = gguf_get_bool(m->f, key, &p->norm_w);
  if (rc && rc != ERR_NOT_FOUND) return rc;
  float one = 1.0f;
  if ((rc = model_key_f32(m, "expert_weights_scale", &one, &p->w_scale))) return rc;
  if (p->w_scale == 0.0f) p->w_scale = 1.0f;
  p->act = d->act;
  p->biases = d->biases;
  return 0;
}

/* ---- binding --------------------------------------------------------------- */

/* Binds the 3-D tensor fmt(i) as n_expert matrices of n_rows x n_cols
 * (rows_mult 2: a fused gate_up, whose experts hold 2 * n_rows rows).
 * Absent and optional: 0 with ex->data NULL. */
static int bind_experts(model *m, model_experts *ex, int64_t n_cols, int64_t n_rows, int64_t n_expert, int rows_mult,
                        bool optional, const char *fmt, int i) {
  char name[128];
  snprintf(name, sizeof name, fmt, i);
  memset(ex, 0, sizeof *ex);
  const gguf_tensor *g = gguf_find_tensor(m->f, name);
  if (!g) return optional ? 0 : err_set(ERR_NOT_FOUND, "tensor '%s' is missing", name);
  const uint64_t want[3] = {(uint64_t)n_cols, (uint64_t)(n_rows * rows_mult), (uint64_t)n_expert};
  if (g->n_dims != 3 || g->dims[0] != want[0] || g->dims[1] != want[1] || g->dims[2] != want[2]) {
    char have[96];
    size_t o = 0;
    have[0] = 0;
    for (uint32_t d = 0; d < g->n_dims && o < sizeof have; d++)
      o += (size_t)snprintf(have + o, sizeof have - o, "%s%llu", d ? ", " : "", (unsigned long long)g->dims[d]);
    return err_set(ERR_RANGE, "tensor '%s' has shape [%s], expected [%llu, %llu, %llu] (expert_count %lld)", name, have,
                   (unsigned long long)want[0], (unsigned long long)want[1], (unsigned long long)want[2],
                   (long long)n_expert);
  }
  const struct tensor_type_traits *tt = tensor_type_get(g->type);
  if (!tt || !tt->supported)
    return err_set(ERR_UNSUPPORTED, "tensor '%s' has type %s, which has no kernel", name, tensor_type_name(g->type));
  int rc = tensor_type_row_bytes(g->type, n_cols, &ex->row_bytes);
  if (rc) return err_set(rc, "tensor '%s': rows of %lld elements do not fit type %s", name, (long long)n_cols,
                         tensor_type_name(g->type));
  ex->name = g->name;
  ex->type = g->type;
  ex->n_cols = n_cols;
  ex->n_rows = n_rows;
  ex->data = g->data;
  ex->expert_bytes = ex->row_bytes * (size_t)(n_rows * rows_mult);
  m->weight_bytes += g->n_bytes;
  return 0;
}

int model_moe_bind_layer(model *m, const model_moe_hparams *p, model_moe_layer *L, int i) {
  const int64_t E = m->hp.n_embd, F = p->n_ff_exp, X = p->n_expert;
  int rc;
  memset(L, 0, sizeof *L);
  /* the experts first: a wrong expert_count is then named as such */
  if ((rc = bind_experts(m, &L->gate, E, F, X, 2, true, "blk.%d.ffn_gate_up_exps.weight", i))) return rc;
  if (L->gate.data) { /* fused: each expert's gate rows, then its up rows */
    L->up = L->gate;
    L->up.data = L->gate.data + (size_t)F * L->gate.row_bytes;
  } else if ((rc = bind_experts(m, &L->gate, E, F, X, 1, false, "blk.%d.ffn_gate_exps.weight", i)) ||
             (rc = bind_experts(m, &L->up, E, F, X, 1, false, "blk.%d.ffn_up_exps.weight", i))) {
    return rc;
  }
  if ((rc = bind_experts(m, &L->down, F, E, X, 1, false, "blk.%d.ffn_down_exps.weight", i)) ||
      (rc = model_bind_matrix(m, &L->router, E, X, 0, "blk.%d.ffn_gate_inp.weight", i)) ||
      (rc = model_bind_vector(m, &L->sel_bias, X, MODEL_BIND_OPTIONAL, "blk.%d.exp_probs_b.bias", i)))
    return rc;
  if (p->biases && ((rc = model_bind_vector(m, &L->router_b, X, 0, "blk.%d.ffn_gate_inp.bias", i)) ||
                    (rc = model_bind_vectors(m, &L->b_gate, F, X, 0, "blk.%d.ffn_gate_exps.bias", i)) ||
                    (rc = model_bind_vectors(m, &L->b_up, F, X, 0, "blk.%d.ffn_up_exps.bias", i)) ||
                    (rc = model_bind_vectors(m, &L->b_down, E, X, 0, "blk.%d.ffn_down_exps.bias", i))))
    return rc;
  if (p->n_ff_shexp == 0) return 0;
  /* the shared expert stays in the mapping too (MODEL_BIND_ROWS): the
   * products below read t->data by rows */
  const int64_t S = p->n_ff_shexp;
  if ((rc = model_bind_matrix(m, &L->sh_gate, E, S, MODEL_BIND_ROWS, "blk.%d.ffn_gate_shexp.weight", i)) ||
      (rc = model_bind_matrix(m, &L->sh_up, E, S, MODEL_BIND_ROWS, "blk.%d.ffn_up_shexp.weight", i)) ||
      (rc = model_bind_matrix(m, &L->sh_down, S, E, MODEL_BIND_ROWS, "blk.%d.ffn_down_shexp.weight", i)) ||
      (rc = model_bind_vector(m, &L->sh_router, E, p->shexp_gate ? 0 : MODEL_BIND_OPTIONAL,
                              "blk.%d.ffn_gate_inp_shexp.weight", i)))
    return rc;
  return 0;
}

/* ---- routing --------------------------------------------------------------- */

/* a ranks before b: higher score, ties to the lower index; NaN never wins */
static bool ranks_before(float sa, int a, float sb, int b) {
  if (isnan(sb)) return !isnan(sa) || a < b;
  if (isnan(sa)) return false;
  return sa > sb || (sa == sb && a < b);
}

void model_moe_route(const model_moe_hparams *p, const float *logits, const float *sel_bias, int32_t *sel,
                     float *w) {
  const int n = (int)p->n_expert, k = (int)p->n_used;
  float prob[MODEL_MOE_MAX_EXPERT];
  bool taken[MODEL_MOE_MAX_EXPERT];
  memcpy(prob, logits, (size_t)n * sizeof *prob);
  if (p->gating == MODEL_MOE_SOFTMAX) ops_softmax(prob, n);
  else if (p->gating == MODEL_MOE_SIGMOID)
    for (int e = 0; e < n; e++) prob[e] = 1.0f / (1.0f + expf(-prob[e]));
  memset(taken, 0, (size_t)n);
  for (int j = 0; j < k; j++) {
    int best = -1;
    float bs = 0.0f;
    for (int e = 0; e < n; e++) {
      if (taken[e]) continue;
      float s = sel_bias ? prob[e] + sel_bias[e] : prob[e];
      if (best < 0 || ranks_before(s, e, bs, best)) {
        best = e;
        bs = s;
      }
    }
    taken[best] = true;
    sel[j] = best;
    w[j] = prob[best];
  }
  if (p->gating == MODEL_MOE_SOFTMAX_WEIGHT) ops_softmax(w, k);
  if (p->norm_w) {
    float sum = 0.0f;
    for (int j = 0; j < k; j++) sum += w[j];
    if (sum > 0.0f)
      for (int j = 0; j < k; j++) w[j] /= sum;
  }
  if (p->w_scale != 1.0f)
    for (int j = 0; j < k; j++) w[j] *= p->w_scale;
}

void model_moe_swiglu_oai(float *g, const float *u, int64_t n) {
  const float a = MODEL_MOE_OAI_ALPHA, lim = MODEL_MOE_OAI_LIMIT;
  for (int64_t i = 0; i < n; i++) {
    /* the comparisons let a NaN through (as ggml's min / clamp do) */
    const float x = g[i] > lim ? lim : g[i];
    const float y = u[i] < -lim ? -lim : u[i] > lim ? lim : u[i];
    g[i] = x / (1.0f + expf(-a * x)) * (y + 1.0f);
  }
}

/* ---- buffers ---------------------------------------------------------------- */

/* One group of rows of the grouped products: an expert (or the shared
 * expert) and the tokens routed to it. */
struct moe_group {
  const uint8_t *gate, *up, *down;  /* this expert's matrices */
  uint32_t type_gu, type_down;
  size_t rb_gu, rb_down;            /* row bytes */
  int64_t n_ff;                     /* rows of gate / up, columns of down */
  const float *b_gate, *b_up;       /* [n_ff] this expert's biases, or NULL */
  const float *b_down;              /* [n_embd] or NULL */
  enum model_moe_act act_kind;       /* the activation */
  const float *x;                   /* [n][n_embd] inputs */
  const int32_t *tok;               /* [n] token rows in the sub-batch */
  const float *w;                   /* [n] their weights */
  float *act;                       /* [n][n_ff] silu(gate x) * up x */
  int32_t n;
};

static int64_t round16(int64_t v) { return (v + 15) & ~(int64_t)15; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
/* rows per thread of a product of `rows` rows split nth ways (whole cache
 * lines of output) */
static int64_t per_thread(int64_t rows, int nth) { return round16((rows + nth - 1) / nth); }

int model_moe_bufs_init(model_ctx *c, const model_moe_hparams *p, model_moe_bufs *b) {
  memset(b, 0, sizeof *b);
  const size_t R = (size_t)model_ffn_rows(c), K = (size_t)p->n_used, E = (size_t)c->m->hp.n_embd,
               X = (size_t)p->n_expert, F = (size_t)max64(p->n_ff_exp, p->n_ff_shexp), nth = (size_t)c->n_threads;
  const size_t rows = R * K + R; /* routed rows and the shared expert's */
  const size_t pf = (size_t)per_thread((int64_t)F, (int)nth), pe = (size_t)per_thread((int64_t)E, (int)nth);
  b->scratch_floats = 2 * R * pf > R * pe ? 2 * R * pf : R * pe;
  struct {
    void **p;
    size_t bytes;
  } a[] = {
      {(void **)&b->logits, R * X * sizeof(float)},      {(void **)&b->sel, R * K * sizeof(int32_t)},
      {(void **)&b->w, R * K * sizeof(float)},           {(void **)&b->count, (X + 1) * sizeof(int32_t)},
      {(void **)&b->tok, rows * sizeof(int32_t)},        {(void **)&b->tw, rows * sizeof(float)},
      {(void **)&b->xg, R * K * E * sizeof(float)},      {(void **)&b->act, rows * F * sizeof(float)},
      {(void **)&b->scratch, nth * b->scratch_floats * sizeof(float)},
      {&b->groups, (X + 1) * sizeof(struct moe_group)},
  };
  for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
    *a[i].p = malloc(a[i].bytes ? a[i].bytes : 1);
    if (!*a[i].p)
      return err_set(ERR_NOMEM, "%s context: cannot allocate expert buffers for a batch of %zu", c->m->ops->name, R);
    b->bytes += a[i].bytes;
  }
  b->xg_bytes = R * K * E * sizeof(float);
  b->act_bytes = rows * F * sizeof(float);
  c->buf_bytes += b->bytes;
  return 0;
}

void model_moe_bufs_free(model_moe_bufs *b) {
  free(b->logits);
  free(b->sel);
  free(b->w);
  free(b->count);
  free(b->tok);
  free(b->tw);
  free(b->xg);
  free(b->act);
  free(b->scratch);
  free(b->groups);
  memset(b, 0, sizeof *b);
}

void model_moe_bufs_trim(model_moe_bufs *b) {
  /* the big ones; the rest is a few KiB */
  model_release_pages(b->xg, b->xg_bytes);
  model_release_pages(b->act, b->act_bytes);
}

/* ---- the grouped products ---------------------------------------------------- */

struct moe_job {
  const struct moe_group *g;
  int n_groups;
  int64_t n_embd;
  float *scratch;
  size_t scratch_floats;
  float *out;   /* [n][n_embd] (job 2) */
  int64_t n;    /* tokens of the sub-batch */
  atomic_int err;
  char err_name[96];
};

static void job_fail(struct moe_job *j, int rc, const char *name) {
  int zero = 0;
  if (atomic_compare_exchange_strong(&j->err, &zero, rc)) snprintf(j->err_name, sizeof j->err_name, "%s", name);
}

/* Job 1: this thread's rows [f0, f1) of every group's gate and up. */
static void gate_up_worker(void *ctx, int ith, int nth) {
  struct moe_job *j = ctx;
  float *sg = j->scratch + (size_t)ith * j->scratch_floats;
  for (int gi = 0; gi < j->n_groups; gi++) {
    const struct moe_group *g = &j->g[gi];
    const int64_t per = per_thread(g->n_ff, nth), f0 = per * ith < g->n_ff ? per * ith : g->n_ff,
                  f1 = f0 + per < g->n_ff ? f0 + per : g->n_ff, nf = f1 - f0;
    if (nf <= 0) continue;
    float *su = sg + (size_t)g->n * (size_t)nf;
    int rc = kern_matmul(NULL, (int)g->type_gu, g->gate + (size_t)f0 * g->rb_gu, nf, j->n_embd, g->x, g->n, sg);
    if (!rc) rc = kern_matmul(NULL, (int)g->type_gu, g->up + (size_t)f0 * g->rb_gu, nf, j->n_embd, g->x, g->n, su);
    if (rc) {
      job_fail(j, rc, "ffn_gate_exps / ffn_up_exps");
      return;
    }
    for (int32_t r = 0; r < g->n; r++) {
      float *gr = sg + (size_t)r * (size_t)nf, *ur = su + (size_t)r * (size_t)nf;
      if (g->b_gate) {
        ops_add(gr, g->b_gate + f0, nf);
        ops_add(ur, g->b_up + f0, nf);
      }
      if (g->act_kind == MODEL_MOE_ACT_SWIGLU_OAI)
        model_moe_swiglu_oai(gr, ur, nf);
      else
        ops_swiglu(gr, ur, nf);
      memcpy(g->act + (size_t)r * (size_t)g->n_ff + (size_t)f0, sg + (size_t)r * (size_t)nf,
             (size_t)nf * sizeof(float));
    }
  }
}

/* Job 2: this thread's output columns [d0, d1) of every token, summed over
 * the groups in order. */
static void down_worker(void *ctx, int ith, int nth) {
  struct moe_job *j = ctx;
  const int64_t E = j->n_embd, per = per_thread(E, nth), d0 = per * ith < E ? per * ith : E,
                d1 = d0 + per < E ? d0 + per : E, nd = d1 - d0;
  if (nd <= 0) return;
  float *sd = j->scratch + (size_t)ith * j->scratch_floats;
  for (int64_t t = 0; t < j->n; t++) memset(j->out + t * E + d0, 0, (size_t)nd * sizeof(float));
  for (int gi = 0; gi < j->n_groups; gi++) {
    const struct moe_group *g = &j->g[gi];
    int rc = kern_matmul(NULL, (int)g->type_down, g->down + (size_t)d0 * g->rb_down, nd, g->n_ff, g->act, g->n, sd);
    if (rc) {
      job_fail(j, rc, "ffn_down_exps");
      return;
    }
    for (int32_t r = 0; r < g->n; r++) {
      float *o = j->out + (int64_t)g->tok[r] * E + d0;
      float *s = sd + (size_t)r * (size_t)nd;
      const float w = g->w[r];
      if (g->b_down) ops_add(s, g->b_down + d0, nd);
      for (int64_t i = 0; i < nd; i++) o[i] += w * s[i];
    }
  }
}

/* One sub-batch of n <= model_ffn_rows tokens. */
static int moe_sub(model_ctx *c, const model_moe_hparams *p, const model_moe_layer *L, model_moe_bufs *b, float *xn,
                   int64_t n) {
  const int64_t E = c->m->hp.n_embd, X = p->n_expert, K = p->n_used;
  int rc = model_matmul(c, &L->router, xn, n, b->logits);
  if (rc) return rc;
  if (L->router_b)
    for (int64_t t = 0; t < n; t++) ops_add(b->logits + t * X, L->router_b, X);
  for (int64_t t = 0; t < n; t++) model_moe_route(p, b->logits + t * X, L->sel_bias, b->sel + t * K, b->w + t * K);

  /* group the (token, expert) pairs by expert, tokens in order */
  struct moe_group *groups = b->groups;
  int n_groups = 0;
  int32_t *cnt = b->count;
  memset(cnt, 0, (size_t)X * sizeof *cnt);
  for (int64_t i = 0; i < n * K; i++) cnt[b->sel[i]]++;
  const int64_t F = p->n_ff_exp, Fmax = max64(F, p->n_ff_shexp);
  int32_t off = 0;
  for (int64_t e = 0; e < X; e++) {
    if (!cnt[e]) continue;
    struct moe_group *g = &groups[n_groups++];
    *g = (struct moe_group){
        .gate = L->gate.data + (size_t)e * L->gate.expert_bytes, .up = L->up.data + (size_t)e * L->up.expert_bytes,
        .down = L->down.data + (size_t)e * L->down.expert_bytes, .type_gu = L->gate.type, .type_down = L->down.type,
        .rb_gu = L->gate.row_bytes, .rb_down = L->down.row_bytes, .n_ff = F, .act_kind = p->act,
        .b_gate = L->b_gate ? L->b_gate + e * F : NULL, .b_up = L->b_up ? L->b_up + e * F : NULL,
        .b_down = L->b_down ? L->b_down + e * E : NULL, .x = b->xg + (size_t)off * (size_t)E,
        .tok = b->tok + off, .w = b->tw + off, .act = b->act + (size_t)off * (size_t)Fmax, .n = cnt[e]};
    cnt[e] = off; /* now the next free row of expert e */
    off += g->n;
  }
  for (int64_t t = 0; t < n; t++)
    for (int64_t j = 0; j < K; j++) {
      int32_t e = b->sel[t * K + j], r = cnt[e]++;
      b->tok[r] = (int32_t)t;
      b->tw[r] = b->w[t * K + j];
      memcpy(b->xg + (size_t)r * (size_t)E, xn + t * E, (size_t)E * sizeof(float));
    }
  if (p->n_ff_shexp) {
    struct moe_group *g = &groups[n_groups++];
    *g = (struct moe_group){.gate = L->sh_gate.data, .up = L->sh_up.data, .down = L->sh_down.data,
                            .type_gu = L->sh_gate.type, .type_down = L->sh_down.type, .rb_gu = L->sh_gate.row_bytes,
                            .rb_down = L->sh_down.row_bytes, .n_ff = p->n_ff_shexp, .act_kind = p->act,
                            .x = xn, .tok = b->tok + off,
                            .w = b->tw + off, .act = b->act + (size_t)off * (size_t)Fmax, .n = (int32_t)n};
    if (L->sh_gate.type != L->sh_up.type)
      return err_set(ERR_UNSUPPORTED, "tensors '%s' and '%s' have different types (%s, %s)", L->sh_gate.name,
                     L->sh_up.name, tensor_type_name(L->sh_gate.type), tensor_type_name(L->sh_up.type));
    for (int64_t t = 0; t < n; t++) {
      b->tok[off + t] = (int32_t)t;
      float s = 1.0f;
      if (L->sh_router) {
        float d = 0.0f;
        for (int64_t i = 0; i < E; i++) d += L->sh_router[i] * xn[t * E + i];
        s = 1.0f / (1.0f + expf(-d));
      }
      b->tw[off + t] = s;
    }
  }

  struct moe_job j = {.g = groups, .n_groups = n_groups, .n_embd = E, .scratch = b->scratch,
                      .scratch_floats = b->scratch_floats, .out = xn, .n = n};
  atomic_init(&j.err, 0);
  if (c->prof) model_prof_product_begin(c, 0, NULL);
  tpool_run(c->tp, gate_up_worker, &j);
  if (c->prof) model_prof_product_end(c);
  model_prof_mark(c, MODEL_PROF_GATEUP);
  if (!atomic_load(&j.err)) {
    if (c->prof) model_prof_product_begin(c, 0, NULL);
    tpool_run(c->tp, down_worker, &j);
    if (c->prof) model_prof_product_end(c);
    model_prof_mark(c, MODEL_PROF_DOWN);
  }
  if ((rc = atomic_load(&j.err))) {
    char why[256];
    snprintf(why, sizeof why, "%s", err_detail());
    return err_set(rc, "layer experts (%s): %s", j.err_name, why);
  }
  return 0;
}

int model_moe_ffn(model_ctx *c, const model_moe_hparams *p, const model_moe_layer *L, model_moe_bufs *b, float *xn,
                  int64_t n) {
  const int64_t E = c->m->hp.n_embd, FR = model_ffn_rows(c);
  for (int64_t t0 = 0; t0 < n; t0 += FR) {
    int rc = moe_sub(c, p, L, b, xn + t0 * E, n - t0 < FR ? n - t0 : FR);
    if (rc) return rc;
  }
  return 0;
}

/* ---- parameter counts (model.h) ------------------------------------------- */

/* ARCH.suffix as an unsigned count (u32 or u64 as converters write it), 0
 * when absent. */
static uint64_t key_count(const gguf_file *f, const char *arch, const char *suffix) {
  char key[160];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  if (gguf_get_u32(f, key, &u32) == 0) return u32;
  if (gguf_get_u64(f, key, &u64) == 0) return u64;
  return 0;
}

/* The elements of all tensors (*sum), and the elements and bytes of the
 * experts one token skips (*idle, *idle_bytes), by model_file_params's
 * rule. */
static void expert_split(const gguf_file *f, const char *arch, uint64_t *sum, uint64_t *idle, uint64_t *idle_bytes) {
  *sum = *idle = *idle_bytes = 0;
  const uint64_t X = arch ? key_count(f, arch, "expert_count") : 0, k = arch ? key_count(f, arch, "expert_used_count") : 0;
  for (size_t i = 0; i < gguf_n_tensors(f); i++) {
    const gguf_tensor *t = gguf_tensor_at(f, i);
    *sum += t->n_elements;
    if (X > 0 && k <= X && strstr(t->name, "_exps.") && t->n_dims >= 2 && t->dims[t->n_dims - 1] == X) {
      *idle += t->n_elements / X * (X - k);
      *idle_bytes += t->n_bytes / X * (X - k);
    }
  }
}

uint64_t model_file_idle_expert_bytes(const gguf_file *f, const char *arch) {
  uint64_t sum, idle, bytes;
  expert_split(f, arch, &sum, &idle, &bytes);
  return bytes;
}

void model_file_params(const gguf_file *f, const char *arch, uint64_t *total, uint64_t *active) {
  uint64_t sum, idle, idle_bytes; /* idle: elements of the experts a token skips */
  expert_split(f, arch, &sum, &idle, &idle_bytes);
  uint64_t stated = 0;
  *total = gguf_get_u64(f, "general.parameter_count", &stated) == 0 && stated >= idle ? stated : sum;
  *active = *total - idle;
}
