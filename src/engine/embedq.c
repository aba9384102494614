/*
 * embedq.c - the embedding batcher (see embedq.h): a queue of embedding
 * jobs (one per embedq_embed call, each with its inputs), drained in
 * batches of at most max_seqs inputs and max_tokens tokens by whichever
 * caller is the runner.
 *
 * Invariants, all under q->mu:
 *  - a job is in the queue list while it has inputs not yet taken into a
 *    batch (taken < n); its owner waits until done == n;
 *  - at most one runner (q->running) owns the context and the batch
 *    buffers; it runs the forward pass without the lock;
 *  - q->queued counts inputs not yet taken, for the queue bound.
 */
#include "engine/embedq.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

typedef struct ejob {
  size_t n;
  const int32_t *const *tokens; /* [n] */
  const int64_t *lens;          /* [n] */
  float *out;                   /* [n][n_embd] */
  size_t taken;                 /* inputs handed to a batch */
  size_t done;                  /* inputs finished (written or failed) */
  int rc;                       /* first failure (lowest index), 0 = none */
  size_t failed;                /* its index */
  char msg[512];                /* its message (err_detail of the runner) */
  struct ejob *next;            /* queue list */
} ejob;

struct embedq {
  model *m;
  embedq_params p;
  int64_t n_embd;
  pthread_mutex_t mu;
  pthread_cond_t cv;  /* broadcast after every batch and when the runner leaves */
  ejob *head, *tail;  /* jobs with inputs not yet taken, oldest first */
  int64_t queued;     /* inputs not yet taken */
  bool running;       /* a caller is the runner */
  model_ctx *c;       /* made by the first runner */
  int64_t cap_tokens; /* tokens per batch */
  /* the runner's batch: */
  const int32_t **b_tok; /* [max_seqs] */
  int64_t *b_len;        /* [max_seqs] */
  ejob **b_job;          /* [max_seqs] */
  size_t *b_idx;         /* [max_seqs] */
  float *b_out;          /* [max_seqs][n_embd] */
  embedq_stats st;
};

embedq_params embedq_default_params(void) {
  embedq_params p = {.max_seqs = 64, .max_tokens = 0, .queue_max = 8192, .n_threads = 1, .kv_type = MODEL_KV_F32};
  return p;
}

int embedq_new(model *m, const embedq_params *pp, embedq **out) {
  *out = NULL;
  embedq_params p = pp ? *pp : embedq_default_params();
  if (p.max_seqs < 1 || p.max_seqs > 4096)
    return err_set(ERR_RANGE, "embedding batcher: max_seqs %d is out of range (1 to 4096)", p.max_seqs);
  if (p.max_tokens < 0 || p.queue_max < 1 || p.n_threads < 0)
    return err_set(ERR_RANGE, "embedding batcher: negative max_tokens or n_threads, or queue_max below 1");
  embedq *q = calloc(1, sizeof *q);
  if (!q) return err_set(ERR_NOMEM, "embedding batcher: out of memory");
  q->m = m;
  q->p = p;
  q->n_embd = model_get_hparams(m)->n_embd;
  size_t S = (size_t)p.max_seqs;
  q->b_tok = calloc(S, sizeof *q->b_tok);
  q->b_len = calloc(S, sizeof *q->b_len);
  q->b_job = calloc(S, sizeof *q->b_job);
  q->b_idx = calloc(S, sizeof *q->b_idx);
  q->b_out = calloc(S * (size_t)q->n_embd, sizeof *q->b_out);
  if (!q->b_tok || !q->b_len || !q->b_job || !q->b_idx || !q->b_out) {
    embedq_free(q);
    return err_set(ERR_NOMEM, "embedding batcher: out of memory");
  }
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  *out = q;
  return 0;
}

void embedq_free(embedq *q) {
  if (!q) return;
  if (q->b_tok) { /* fully made: the lock and condition exist */
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
  }
  if (q->c) model_ctx_free(q->c);
  free(q->b_tok);
  free(q->b_len);
  free(q->b_job);
  free(q->b_idx);
  free(q->b_out);
  free(q);
}

void embedq_get_stats(embedq *q, embedq_stats *st) {
  pthread_mutex_lock(&q->mu);
  *st = q->st;
  st->queued = q->queued;
  pthread_mutex_unlock(&q->mu);
}

/* Records input i of j as failed with rc and the current error detail
 * (keeps the lowest failing index). Under q->mu. */
static void job_fail(ejob *j, size_t i, int rc, const char *msg) {
  if (j->rc == 0 || i < j->failed) {
    j->rc = rc;
    j->failed = i;
    snprintf(j->msg, sizeof j->msg, "%s", msg);
  }
}

/* Takes inputs into the batch, one from each queued job in turn, until
 * max_seqs inputs or cap_tokens tokens; unlinks fully taken jobs. Under
 * q->mu. Returns the batch's input count. */
static int64_t batch_form(embedq *q) {
  int64_t ns = 0, tokens = 0;
  bool took = true;
  while (took && ns < q->p.max_seqs) {
    took = false;
    for (ejob *j = q->head; j && ns < q->p.max_seqs; j = j->next) {
      if (j->taken == j->n) continue;
      int64_t len = j->lens[j->taken];
      if (tokens + len > q->cap_tokens && ns > 0) continue; /* does not fit this batch */
      q->b_tok[ns] = j->tokens[j->taken];
      q->b_len[ns] = len;
      q->b_job[ns] = j;
      q->b_idx[ns] = j->taken;
      j->taken++;
      tokens += len;
      ns++;
      took = true;
    }
  }
  q->queued -= ns;
  /* unlink jobs whose inputs are all taken */
  ejob **pp = &q->head, *last = NULL;
  while (*pp) {
    if ((*pp)->taken == (*pp)->n) *pp = (*pp)->next;
    else {
      last = *pp;
      pp = &(*pp)->next;
    }
  }
  q->tail = last;
  return ns;
}

/* Fails every input still queued (the context could not be made). Under q->mu. */
static void fail_all_queued(embedq *q, int rc, const char *msg) {
  for (ejob *j = q->head; j; j = j->next) {
    job_fail(j, j->taken, rc, msg);
    q->queued -= (int64_t)(j->n - j->taken);
    j->done += j->n - j->taken;
    j->taken = j->n;
  }
  q->head = q->tail = NULL;
}

/* The runner's turn: one batch, run without the lock. Entered and left
 * with q->mu held. */
static void run_one_batch(embedq *q) {
  if (!q->c) {
    model_ctx_params cp = model_ctx_default_params();
    cp.n_seq = 1;
    cp.n_threads = q->p.n_threads;
    cp.kv_type = q->p.kv_type;
    pthread_mutex_unlock(&q->mu);
    model_ctx *c = NULL;
    int rc = model_ctx_new(q->m, &cp, &c);
    char msg[512];
    if (rc) snprintf(msg, sizeof msg, "%s", err_detail());
    pthread_mutex_lock(&q->mu);
    if (rc) {
      fail_all_queued(q, rc, msg);
      return;
    }
    q->c = c;
    int64_t cap = model_embed_batch_tokens(c);
    q->cap_tokens = q->p.max_tokens > 0 && q->p.max_tokens < cap ? q->p.max_tokens : cap;
  }
  int64_t ns = batch_form(q);
  if (!ns) return;
  pthread_mutex_unlock(&q->mu);
  const int64_t E = q->n_embd;
  int rc = model_embed_batch(q->c, ns, q->b_tok, q->b_len, q->b_out, MODEL_EMBED_NORMALIZE);
  int *rcs = NULL;
  char(*msgs)[512] = NULL;
  if (rc) { /* find which inputs fail: each alone */
    rcs = calloc((size_t)ns, sizeof *rcs);
    msgs = calloc((size_t)ns, sizeof *msgs);
    for (int64_t s = 0; s < ns; s++) {
      int r = model_embed_batch(q->c, 1, q->b_tok + s, q->b_len + s, q->b_out + s * E, MODEL_EMBED_NORMALIZE);
      if (rcs) rcs[s] = r;
      if (r && msgs) snprintf(msgs[s], sizeof msgs[s], "%s", err_detail());
    }
  }
  uint64_t tokens = 0;
  for (int64_t s = 0; s < ns; s++) {
    int r = rc ? (rcs ? rcs[s] : rc) : 0;
    if (!r) memcpy(q->b_job[s]->out + q->b_idx[s] * (size_t)E, q->b_out + s * E, (size_t)E * sizeof(float));
    tokens += (uint64_t)q->b_len[s];
  }
  pthread_mutex_lock(&q->mu);
  for (int64_t s = 0; s < ns; s++) {
    int r = rc ? (rcs ? rcs[s] : rc) : 0;
    if (r) job_fail(q->b_job[s], q->b_idx[s], r, msgs ? msgs[s] : "embedding failed (out of memory)");
    q->b_job[s]->done++;
  }
  q->st.batches++;
  q->st.inputs += (uint64_t)ns;
  q->st.tokens += tokens;
  pthread_cond_broadcast(&q->cv); /* owners of finished jobs */
  free(rcs);
  free(msgs);
}

int embedq_embed(embedq *q, size_t n, const int32_t *const *tokens, const int64_t *lens, float *out, size_t *failed) {
  if (failed) *failed = 0;
  if (!n) return 0;
  if (!tokens || !lens || !out) return err_set(ERR_INVALID, "embedq_embed: NULL argument");
  int64_t n_ctx = model_get_hparams(q->m)->n_ctx_train;
  for (size_t i = 0; i < n; i++) {
    if (lens[i] <= 0 || !tokens[i] || (n_ctx > 0 && lens[i] > n_ctx)) {
      if (failed) *failed = i;
      if (lens[i] <= 0 || !tokens[i]) return err_set(ERR_INVALID, "input %zu has no tokens", i);
      return err_set(ERR_CONTEXT, "input %zu has %lld tokens, but the context holds %lld", i, (long long)lens[i],
                     (long long)n_ctx);
    }
  }
  ejob j = {.n = n, .tokens = tokens, .lens = lens, .out = out};
  pthread_mutex_lock(&q->mu);
  if (q->queued > 0 && q->queued + (int64_t)n > q->p.queue_max) {
    int64_t queued = q->queued;
    pthread_mutex_unlock(&q->mu);
    return err_set(ERR_OVERLOADED, "the embedding queue is full (%lld inputs waiting, at most %lld): try again later",
                   (long long)queued, (long long)q->p.queue_max);
  }
  if (q->tail) q->tail->next = &j;
  else q->head = &j;
  q->tail = &j;
  q->queued += (int64_t)n;
  while (j.done < n) {
    if (q->running) {
      pthread_cond_wait(&q->cv, &q->mu);
      continue;
    }
    q->running = true;
    while (j.done < n && (q->head || !q->c)) run_one_batch(q);
    q->running = false;
    pthread_cond_broadcast(&q->cv);
    /* only the runner takes inputs and it finishes each batch before it
     * leaves, so a caller that becomes the runner finds its own inputs
     * either done or still queued */
  }
  pthread_mutex_unlock(&q->mu);
  if (j.rc) {
    if (failed) *failed = j.failed;
    return err_set(j.rc, "%s", j.msg);
  }
  return 0;
}
