/*
 * attn.c - the causal grouped-query attention every decoder (llama, qwen2,
 * qwen3, gemma2, gemma3) runs over its KV cache: model_attention() (declared in
 * model_int.h). Split from model.c so the attention's task layout and
 * scratch sit next to each other.
 *
 * Work is split in tasks of (kv head g, run of up to ATT_TILE_TOK
 * consecutive tokens of one sequence). A task's query rows are every token
 * of the run times the n_rep query heads that read kv head g, laid out as
 * blocks of KERN_ATT_COLS columns (query row qi = (t - t0) * n_rep + r).
 * For each tile of ATT_TILE_POS positions the task converts keys and
 * values to f32 once (F16 via F16C, Q8_0 dequantized, F32 read in place)
 * and runs kern_attn_tile for every block: on a 512-token prompt of
 * TinyLlama a tile serves 128 query rows, so the conversion is a small
 * part of the work, and the products run as register-blocked FMA (see
 * kernels/attn.c). Decode (one token) is the same with one block.
 *
 * Per-layer variants (model_hparams): on a sliding-window layer token t
 * sees only positions pos[t] - n_swa + 1 .. pos[t], so a task starts at
 * the tile holding its first token's window (a decode step reads about
 * n_swa positions, whatever the context), and the tiles where some token's
 * window begins inside the tile run tile_masked (a lower bound per
 * column) instead of the kernel; soft-capped scores (Gemma 2) run
 * tile_masked on every tile. Attention sinks (gpt-oss: a learned logit per
 * query head that takes a share of the softmax but has no value) need no
 * pass of their own: the online softmax ends with the running maximum m and
 * sum l of every row, and the sink enters only the final division,
 * out = o / (l + exp(sink - m)). The cache itself is full-size: every
 * position stays stored, so the prefix cache and sequence copies need
 * nothing special, and a window only changes which positions are read.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/attn.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"
#include "model/model_int.h"

#define TP ATT_TILE_POS
#define C KERN_ATT_COLS

/* Query columns of a task, rounded up to whole blocks. */
static size_t q_cols(const model_hparams *hp) {
  size_t n_q = (size_t)ATT_TILE_TOK * (size_t)(hp->n_head / hp->n_head_kv);
  return (n_q + C - 1) / C * C;
}

/* Per thread: qt and ot [q_cols][hd] (blocks of [hd][C]), m, l, lim and
 * lo [q_cols], the f32 key tile [TP][hd], the f32 value tile [hd][TP] (Q8_0:
 * rows [TP][hd]) and the block's scores [TP][C]. Every part is a multiple
 * of 16 floats, so each stays 64-byte aligned after the first. */
size_t model_att_scratch_floats(const model_hparams *hp) {
  size_t qc = q_cols(hp), hd = (size_t)hp->head_dim;
  size_t tile = (size_t)TP * hd;
  return 2 * qc * hd + 4 * qc + 2 * tile + (size_t)TP * C;
}

struct att_job {
  model_ctx *c;
  int64_t l;
  const float *q;
  float *out;
  float scale;
  const float *sinks; /* [n_head] or NULL */
  int64_t n_runs, n_tasks;
  atomic_long next;
};

/* kern_attn_tile's step (kernels/attn.h: same layouts and running state)
 * with two additions, in plain C: column i sees the tile positions
 * lo[i] <= p < lim[i] (a window's lower bound), and when cap > 0 its
 * scores s become cap * tanh(s / cap) before the softmax. Used only for
 * the tiles that need either: the first tile of a sliding window, and
 * every tile of a soft-capped layer. */
static void tile_masked(const float *qt, const float *k, const float *vt, int64_t ldv, int64_t vps, int64_t np,
                        int64_t hd, const int32_t *lo, const int32_t *lim, float cap, float *m, float *l, float *ot,
                        float *st) {
  int64_t a = np, e = 0; /* the positions some column sees */
  for (int i = 0; i < C; i++)
    if (lim[i] > lo[i]) {
      if (lo[i] < a) a = lo[i];
      if (lim[i] > e) e = lim[i];
    }
  if (a < 0) a = 0;
  if (e > np) e = np;
  if (e <= a) return;
  const int64_t n = e - a;
  float mx[C], corr[C], sum[C];
  for (int i = 0; i < C; i++) mx[i] = m[i], sum[i] = 0.0f;
  for (int64_t p = a; p < e; p++) {
    float acc[C] = {0};
    const float *kr = k + p * hd;
    for (int64_t d = 0; d < hd; d++)
      for (int i = 0; i < C; i++) acc[i] = fmaf(kr[d], qt[d * C + i], acc[i]);
    float *sr = st + (p - a) * C;
    for (int i = 0; i < C; i++) {
      float s = acc[i];
      if (cap > 0.0f) s = cap * tanhf(s / cap);
      if (p < lo[i] || p >= lim[i]) s = -INFINITY;
      sr[i] = s;
      if (s > mx[i]) mx[i] = s;
    }
  }
  for (int i = 0; i < C; i++) {
    corr[i] = m[i] - mx[i];
    m[i] = mx[i];
  }
  kern_exp_f32(corr, corr, C);
  for (int64_t p = 0; p < n; p++)
    for (int i = 0; i < C; i++) st[p * C + i] -= mx[i]; /* -inf stays -inf: exp gives 0 */
  kern_exp_f32(st, st, n * C);
  for (int64_t p = 0; p < n; p++)
    for (int i = 0; i < C; i++) sum[i] += st[p * C + i];
  for (int i = 0; i < C; i++) l[i] = fmaf(l[i], corr[i], sum[i]);
  for (int64_t d = 0; d < hd; d++) {
    float o[C];
    for (int i = 0; i < C; i++) o[i] = ot[d * C + i] * corr[i];
    for (int64_t p = 0; p < n; p++) {
      const float v = vt[d * ldv + (a + p) * vps];
      for (int i = 0; i < C; i++) o[i] = fmaf(v, st[p * C + i], o[i]);
    }
    for (int i = 0; i < C; i++) ot[d * C + i] = o[i];
  }
}

static void att_task(struct att_job *j, float *scr, int64_t task) {
  model_ctx *c = j->c;
  const model_hparams *hp = &c->m->hp;
  const int64_t hd = hp->head_dim, n_rep = hp->n_head / hp->n_head_kv, q_stride = hp->n_head * hd;
  const int64_t qc = (int64_t)q_cols(hp);
  const int64_t g = task / j->n_runs;
  const model_att_run *run = &c->runs[task % j->n_runs];
  const int64_t t0 = run->t0, nt = run->t1 - run->t0, pos0 = run->pos0;
  const int64_t n_q = nt * n_rep, n_blk = (n_q + C - 1) / C;

  const int64_t W = model_layer_window(hp, j->l); /* 0: the whole context */
  const float cap = hp->attn_softcap;

  float *qt = scr, *ot = qt + qc * hd, *m = ot + qc * hd, *l = m + qc;
  int32_t *lim = (int32_t *)(l + qc), *lo = lim + qc;
  float *kf = (float *)(lo + qc), *vf = kf + TP * hd, *st = vf + TP * hd;

  /* query row qi = (t - t0) * n_rep + r, column qi % C of block qi / C */
  for (int64_t qi = 0; qi < n_blk * C; qi++) {
    m[qi] = KERN_ATT_M0;
    l[qi] = 0.0f;
  }
  for (int64_t qi = n_q; qi < n_blk * C; qi++) /* unused columns of the last block */
    for (int64_t d = 0; d < hd; d++) qt[(qi / C) * hd * C + d * C + qi % C] = 0.0f;
  for (int64_t t = 0, qi = 0; t < nt; t++)
    for (int64_t r = 0; r < n_rep; r++, qi++) {
      const float *src = j->q + (t0 + t) * q_stride + (g * n_rep + r) * hd;
      float *dst = qt + (qi / C) * hd * C + qi % C;
      for (int64_t d = 0; d < hd; d++) dst[d * C] = src[d] * j->scale;
    }
  memset(ot, 0, (size_t)(n_blk * C * hd) * sizeof(float));

  const uint8_t *kb = model_kv_block(c, run->seq, j->l, 0) + model_kv_row_off(c, g, 0);
  const uint8_t *vb = model_kv_block(c, run->seq, j->l, 1);
  vb += c->kv_type == MODEL_KV_Q8_0 ? model_kv_row_off(c, g, 0) : model_kv_v_index(c, g, 0, 0) * c->kv_elem;
  const int64_t p_end = pos0 + nt; /* positions 0..p_end-1 are visible to some token of the task */
  /* a sliding layer's first visible position: the first token's window */
  const int64_t p_first = W && pos0 - W + 1 > 0 ? pos0 - W + 1 : 0;
  for (int64_t p0 = p_first / TP * TP; p0 < p_end; p0 += TP) {
    const int64_t np = p0 + TP < p_end ? TP : p_end - p0;
    const float *k, *vt;
    int64_t ldv = TP, vps = 1; /* value (d, p) at vt[d * ldv + p * vps] */
    const uint8_t *ksrc = kb + (size_t)p0 * c->kv_row;
    if (c->kv_type == MODEL_KV_F32) {
      k = (const float *)ksrc;
      vt = (const float *)vb + (p0 / TP) * hd * TP;
    } else if (c->kv_type == MODEL_KV_F16) {
      kern_f16_to_f32((const uint16_t *)ksrc, kf, np * hd);
      const uint16_t *vs = (const uint16_t *)vb + (p0 / TP) * hd * TP;
      if (np == TP) {
        kern_f16_to_f32(vs, vf, hd * TP);
      } else {
        int64_t w = (np + 7) / 8 * 8; /* whole vectors; the tile's rows are TP long */
        for (int64_t d = 0; d < hd; d++) kern_f16_to_f32(vs + d * TP, vf + d * TP, w);
      }
      k = kf;
      vt = vf;
    } else {
      /* values as rows of positions, like the keys: the tile step reads
       * them with strides (1, hd) instead of a transposed copy */
      kern_q8_0_rows_f32(ksrc, c->kv_row, np, hd, kf);
      kern_q8_0_rows_f32(vb + (size_t)p0 * c->kv_row, c->kv_row, np, hd, vf);
      k = kf;
      vt = vf;
      ldv = 1;
      vps = hd;
    }
    /* token t sees positions <= pos0 + (t - t0): in this tile, p < lim */
    for (int64_t t = 0, qi = 0; t < nt; t++) {
      int64_t v = pos0 + t + 1 - p0;
      int32_t lv = (int32_t)(v < 0 ? 0 : v > np ? np : v);
      for (int64_t r = 0; r < n_rep; r++) lim[qi++] = lv;
    }
    for (int64_t qi = n_q; qi < n_blk * C; qi++) lim[qi] = 0;
    /* token t's window starts at pos0 + t - W + 1: inside this tile for
     * the last token (the largest) means the kernel's mask is not enough */
    const bool lower = W && pos0 + nt - W > p0;
    if (lower || cap > 0.0f) {
      for (int64_t t = 0, qi = 0; t < nt; t++) {
        int64_t v = W ? pos0 + t - W + 1 - p0 : 0;
        int32_t lv = (int32_t)(v < 0 ? 0 : v > np ? np : v);
        for (int64_t r = 0; r < n_rep; r++) lo[qi++] = lv;
      }
      for (int64_t qi = n_q; qi < n_blk * C; qi++) lo[qi] = 0;
      for (int64_t b = 0; b < n_blk; b++)
        tile_masked(qt + b * hd * C, k, vt, ldv, vps, np, hd, lo + b * C, lim + b * C, cap, m + b * C, l + b * C,
                    ot + b * hd * C, st);
      continue;
    }
    /* the next tile's keys and values (both contiguous, kv_row bytes per
     * position) come in while this one computes; the first block asks */
    const kern_att_pf next = {kb + (size_t)(p0 + TP) * c->kv_row, vb + (size_t)(p0 + TP) * c->kv_row,
                              (int64_t)c->kv_row};
    for (int64_t b = 0; b < n_blk; b++)
      kern_attn_tile(qt + b * hd * C, k, vt, ldv, vps, np, hd, lim + b * C, m + b * C, l + b * C, ot + b * hd * C, st,
                     b == 0 && p0 + TP < p_end ? &next : NULL);
  }
  for (int64_t t = 0, qi = 0; t < nt; t++)
    for (int64_t r = 0; r < n_rep; r++, qi++) {
      const float *src = ot + (qi / C) * hd * C + qi % C;
      float *o = j->out + (t0 + t) * q_stride + (g * n_rep + r) * hd;
      /* l >= 1: the maximum's own term is exp(0). A sink is one more
       * logit in the denominator only: exp(sink - m) with m the running
       * maximum (expf overflowing to inf for a dominant sink gives the
       * limit, an output of 0) */
      float den = l[qi];
      if (j->sinks) den += expf(j->sinks[g * n_rep + r] - m[qi]);
      float inv = 1.0f / den;
      for (int64_t d = 0; d < hd; d++) o[d] = src[d * C] * inv;
    }
}

static void att_worker(void *ctx, int ith, int nth) {
  (void)nth;
  struct att_job *j = ctx;
  float *scr = j->c->att_scratch + (size_t)ith * j->c->att_scratch_floats;
  for (;;) {
    long task = atomic_fetch_add(&j->next, 1);
    if (task >= j->n_tasks) break;
    att_task(j, scr, task);
  }
}

int model_attention(model_ctx *c, int64_t l, const model_step *s, const float *q, float *out, float scale) {
  return model_attention_sinks(c, l, s, q, out, scale, NULL);
}

int model_attention_sinks(model_ctx *c, int64_t l, const model_step *s, const float *q, float *out, float scale,
                          const float *sinks) {
  struct att_job j = {.c = c, .l = l, .q = q, .out = out, .scale = scale, .sinks = sinks};
  /* runs of consecutive tokens of one sequence, cut at ATT_TILE_TOK */
  double work = 0.0;
  j.n_runs = 0;
  for (int64_t t = 0; t < s->n; t++) {
    model_att_run *r = j.n_runs ? &c->runs[j.n_runs - 1] : NULL;
    if (r && r->seq == s->seq[t] && r->pos0 + (t - r->t0) == s->pos[t] && t - r->t0 < ATT_TILE_TOK) {
      r->t1 = t + 1;
    } else {
      c->runs[j.n_runs++] = (model_att_run){.t0 = t, .t1 = t + 1, .seq = s->seq[t], .pos0 = s->pos[t]};
    }
    const int64_t W = model_layer_window(&c->m->hp, l), seen = s->pos[t] + 1;
    work += (double)(W && W < seen ? W : seen);
  }
  j.n_tasks = j.n_runs * c->m->hp.n_head_kv;
  atomic_init(&j.next, 0);
  /* Small jobs (a short context while generating) cost less than waking
   * the pool: run them on the calling thread. */
  work *= (double)c->m->hp.n_head * (double)c->m->hp.head_dim;
  if (work < 32768.0 || j.n_tasks == 1)
    att_worker(&j, 0, 1);
  else
    tpool_run(c->tp, att_worker, &j);
  return 0;
}
