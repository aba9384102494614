/*
 * enc_attn.c - bidirectional attention for the encoders (bert.c: bert and
 * nomic-bert; gemma.c: gemma-embedding): every token of a sequence sees
 * every other token of it (no causal mask, no KV cache), optionally only
 * within a symmetric window, over a batch of sequences laid one after
 * another in the rows of q, k and v.
 *
 * Work is split in tasks of (sequence, query head) claimed from an atomic
 * counter on the context's pool. A task gathers its kv head's keys of the
 * sequence into contiguous scratch once, then walks the queries in chunks
 * of ENC_ATT_CHUNK rows: S = Q K^T and O = S V are two F32 kern_matmul
 * calls over the keys the chunk can see, so a thread's scratch holds
 * ENC_ATT_CHUNK x n scores rather than n x n. With a window the chunk's key
 * range is [t0 - W/2, t1 + W/2] (clipped to the sequence), and the scores
 * outside each query's own range are -inf before the softmax.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "kernels/tensor_type.h"
#include "model/model_int.h"

/* Query rows per chunk of one task. */
#define ENC_ATT_CHUNK 64

size_t model_enc_att_scratch_floats(int64_t n_max, int64_t head_dim) {
  const size_t n = (size_t)n_max, hd = (size_t)head_dim, qc = ENC_ATT_CHUNK;
  /* keys [n][hd], values transposed [hd][n], chunk queries and outputs
   * [qc][hd] each, scores [qc][n]; a multiple of 16 floats per thread */
  const size_t f = 2 * n * hd + 2 * qc * hd + qc * n;
  return (f + 15) & ~(size_t)15;
}

struct enc_att_job {
  model_ctx *c;
  const model_enc_att *a;
  atomic_long next; /* next task: sequence task / n_head, head task % n_head */
  atomic_int err;
};

/* Query head h of sequence s_idx (rows r0 .. r0 + n - 1 of the batch):
 * out[t][h] = sum_p softmax_p(scale q[t][h] . k[p][g]) v[p][g] over the
 * visible positions p, g = h / (n_head / n_head_kv). */
static int enc_att_task(const struct enc_att_job *j, float *scr, int64_t s_idx, int64_t h) {
  const model_enc_att *a = j->a;
  const model_hparams *hp = &j->c->m->hp;
  const int64_t r0 = a->off[s_idx], n = a->off[s_idx + 1] - r0, hd = hp->head_dim, Q = hp->n_head * hd,
                KV = hp->n_head_kv * hd, g = h / (hp->n_head / hp->n_head_kv);
  const int64_t half = a->window > 0 ? a->window / 2 : n; /* n: every key */
  float *kh = scr, *vt = kh + n * hd, *qh = vt + n * hd, *o = qh + ENC_ATT_CHUNK * hd, *s = o + ENC_ATT_CHUNK * hd;
  const float *q = a->q + r0 * Q, *k = a->k + r0 * KV, *v = a->v + r0 * KV;
  for (int64_t p = 0; p < n; p++) memcpy(kh + p * hd, k + p * KV + g * hd, (size_t)hd * sizeof(float));
  int64_t vt_lo = -1, vt_hi = -1; /* the key range vt holds */
  for (int64_t t0 = 0; t0 < n; t0 += ENC_ATT_CHUNK) {
    const int64_t m = n - t0 < ENC_ATT_CHUNK ? n - t0 : ENC_ATT_CHUNK;
    const int64_t lo = t0 - half > 0 ? t0 - half : 0, hi = t0 + m + half < n ? t0 + m + half : n, w = hi - lo;
    for (int64_t i = 0; i < m; i++)
      for (int64_t d = 0; d < hd; d++) qh[i * hd + d] = q[(t0 + i) * Q + h * hd + d] * a->scale;
    if (lo != vt_lo || hi != vt_hi) { /* values of keys lo..hi-1, transposed: vt[d][p - lo] */
      for (int64_t p = lo; p < hi; p++)
        for (int64_t d = 0; d < hd; d++) vt[d * w + (p - lo)] = v[p * KV + g * hd + d];
      vt_lo = lo, vt_hi = hi;
    }
    int rc = kern_matmul(NULL, TENSOR_TYPE_F32, kh + lo * hd, w, hd, qh, m, s); /* s[i][p - lo] */
    if (rc) return rc;
    for (int64_t i = 0; i < m; i++) {
      float *row = s + i * w;
      const int64_t t = t0 + i;
      if (a->window > 0)
        for (int64_t p = lo; p < hi; p++)
          if (p < t - half || p > t + half) row[p - lo] = -INFINITY;
      ops_softmax(row, w);
    }
    if ((rc = kern_matmul(NULL, TENSOR_TYPE_F32, vt, hd, w, s, m, o))) return rc; /* o[i][d] */
    for (int64_t i = 0; i < m; i++)
      memcpy(a->out + (r0 + t0 + i) * Q + h * hd, o + i * hd, (size_t)hd * sizeof(float));
  }
  return 0;
}

static void enc_att_worker(void *ctx, int ith, int nth) {
  (void)nth;
  struct enc_att_job *j = ctx;
  float *scr = j->a->scr + (size_t)ith * j->a->scr_floats;
  const int64_t n_head = j->c->m->hp.n_head;
  for (;;) {
    long t = atomic_fetch_add(&j->next, 1);
    if (t >= j->a->n_seq * n_head) break;
    int rc = enc_att_task(j, scr, t / n_head, t % n_head);
    if (rc) atomic_store(&j->err, rc);
  }
}

int model_enc_attention(model_ctx *c, const model_enc_att *a) {
  int64_t work = 0; /* multiply-adds, n^2 hd per sequence and head */
  for (int64_t s = 0; s < a->n_seq; s++) {
    const int64_t n = a->off[s + 1] - a->off[s];
    work += n * n * c->m->hp.head_dim;
  }
  struct enc_att_job j = {.c = c, .a = a};
  atomic_init(&j.next, 0);
  atomic_init(&j.err, 0);
  if (work < 32768)
    enc_att_worker(&j, 0, 1);
  else
    tpool_run(c->tp, enc_att_worker, &j);
  return atomic_load(&j.err);
}
