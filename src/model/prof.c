/*
 * prof.c - decode profiling: where one forward pass's wall time goes
 * (bench/decode_wall.c reads it). The forward passes of the dense decoders
 * mark the end of each piece of work (model_prof_mark); products also note
 * which weight buffers they read and the pool's timeline of their job, so
 * the bench can read the same bytes with a plain streaming loop and compare.
 * Everything here runs only while a model_prof is set on the context.
 */
#include <string.h>
#include <time.h>

#include "model/model_int.h"

static int64_t prof_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const char *model_prof_seg_name(int seg) {
  static const char *const names[MODEL_PROF_COUNT] = {"embed", "norm", "qkv", "rope_kv", "attn", "wo",
                                                      "add",   "gateup", "swiglu", "down", "logits"};
  return seg >= 0 && seg < MODEL_PROF_COUNT ? names[seg] : "?";
}

void model_ctx_set_prof(model_ctx *c, model_prof *p) {
  c->prof = p;
  if (p) {
    p->pend_n_w = 0;
    memset(&p->trace, 0, sizeof p->trace);
  }
}

void model_prof_start(model_ctx *c) {
  if (c->prof) c->prof->t_last = prof_now_ns();
}

void model_prof_mark_(model_ctx *c, int seg) {
  model_prof *p = c->prof;
  int64_t now = prof_now_ns();
  if (p->n < p->cap) {
    model_prof_ev *e = &p->ev[p->n++];
    memset(e, 0, sizeof *e);
    e->seg = seg;
    e->t0_ns = p->t_last;
    e->t1_ns = now;
    e->n_w = p->pend_n_w;
    memcpy(e->w, p->pend_w, sizeof e->w);
    memcpy(e->w_bytes, p->pend_bytes, sizeof e->w_bytes);
    e->n_jobs = p->trace.n_jobs;
    e->job = p->trace;
  }
  p->pend_n_w = 0;
  memset(&p->trace, 0, sizeof p->trace);
  p->t_last = now;
}

void model_prof_product_begin(model_ctx *c, int n, const model_tensor *const *ts) {
  model_prof *p = c->prof;
  for (int i = 0; i < n && p->pend_n_w < MODEL_PROF_MAX_W; i++) {
    const model_tensor *t = ts[i];
    p->pend_w[p->pend_n_w] = t->packed ? (const void *)t->packed : t->data;
    p->pend_bytes[p->pend_n_w] = t->packed ? kern_packed_bytes(t->packed) : t->row_bytes * (size_t)t->n_rows;
    p->pend_n_w++;
  }
  tpool_set_trace(c->tp, &p->trace);
}

void model_prof_product_end(model_ctx *c) { tpool_set_trace(c->tp, NULL); }
