/*
 * engine.c - continuous batching over the slots of one model_ctx, on one
 * engine thread, with a bounded request queue and per-request event
 * channels. The contract is in engine.h; docs/engine.md traces a request.
 *
 * Where to start reading: engine_thread() (the loop), then step_build()
 * and slot_take_token() (one token's way from logits to events);
 * slot_sample() adds the grammar constraint (engine.h, "Constrained
 * output").
 *
 * Invariants:
 *   - Only the engine thread touches slots, the model_ctx, samplers and
 *     detokenizers. Other threads touch a request only through its channel
 *     (mutex + condition variable), its atomic cancel flag and its
 *     reference count, and the engine only through the queue (e->mu).
 *   - Lock order: e->mu before a channel's mu. The notify callback runs with
 *     the channel lock held and never takes e->mu (engine.h forbids it).
 *   - slot.hist[0..n_hist) are exactly the tokens whose keys and values are
 *     in the slot's sequence (n_hist == model_ctx_seq_n_past(seq)). A free
 *     slot keeps them: that is the prefix cache.
 *   - With recurrent layers, a slot's checkpoints (ck_pos, ck_state) are
 *     states after prefixes of hist: each ck_pos <= n_hist, and the cache
 *     below it unchanged since it was saved (cutting hist drops those past
 *     the cut). The prefix cache resumes only from them or the whole hist.
 *   - A running slot is either prefilling (n_hist < n_prompt; the prompt's
 *     remaining tokens are fed in chunks), decoding (next_token is the
 *     sampled token whose keys and values are not yet computed; it goes into
 *     the next batch at position n_hist), or waiting (choice > 0 of an n > 1
 *     request: it receives a copy of choice 0's cache when that prompt is
 *     done, step_fork).
 *   - A request with a grammar has one grammar_state per choice, made at
 *     submit; e->gv (the vocabulary's pieces as a trie) is built once under
 *     e->mu by the first such submit and immutable afterwards, so the engine
 *     thread reads it without a lock (the queue's mutex orders the two).
 *   - Every accepted request gets USAGE then FINISH exactly once; both
 *     events are allocated at submit time so that even out-of-memory ends a
 *     stream properly.
 */
#include "engine/engine.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "engine/chunk.h"

/* ---- requests and their channels ---------------------------------------- */

typedef struct ev_node {
  struct ev_node *next;
  engine_event ev;
} ev_node;

struct engine_req {
  /* channel: any thread, under mu */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  ev_node *head, *tail;
  ev_node *pre_usage;   /* allocated at submit */
  ev_node **pre_finish; /* [n_choices], allocated at submit */
  int32_t n_finish_popped;
  engine_notify_fn notify;
  void *notify_ctx;

  atomic_int refs;     /* the caller's + the engine's */
  atomic_bool cancel;

  /* the request: written by engine_submit, then read by the engine only */
  int32_t *prompt;
  int64_t n_prompt;
  int32_t *stop_tokens;
  size_t n_stop_tokens;
  char **stop;
  size_t *stop_len;
  size_t n_stop;
  int64_t max_tokens;
  bool ignore_eog, logprobs;
  unsigned decode_flags;
  int32_t penalty_last_n;
  uint64_t deadline_ns;  /* 0 = none */
  int64_t timeout_ms;
  int32_t n_choices;
  sampler **smp;         /* [n_choices]: choice i seeded with seed + i */
  grammar_state **gs;    /* [n_choices] or NULL: no grammar */
  engine_req *qnext;     /* queue link, under e->mu */
  /* engine thread only */
  int32_t n_live;        /* choices not finished yet */
  int64_t n_completion;  /* sampled tokens of finished choices */
  int64_t n_cached;
  uint64_t t_first_ns, t_last_ns; /* first and last token sampled, any choice */
};

static void req_destroy(engine_req *h) {
  for (ev_node *n = h->head, *nx; n; n = nx) {
    nx = n->next;
    engine_event_free(&n->ev);
    free(n);
  }
  free(h->pre_usage);
  for (int32_t i = 0; h->pre_finish && i < h->n_choices; i++) free(h->pre_finish[i]);
  free(h->pre_finish);
  free(h->prompt);
  free(h->stop_tokens);
  for (size_t i = 0; i < h->n_stop; i++) free(h->stop[i]);
  free(h->stop);
  free(h->stop_len);
  for (int32_t i = 0; h->smp && i < h->n_choices; i++) sample_free(h->smp[i]);
  free(h->smp);
  for (int32_t i = 0; h->gs && i < h->n_choices; i++) grammar_state_free(h->gs[i]);
  free(h->gs);
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
  free(h);
}

static void req_unref(engine_req *h) {
  if (atomic_fetch_sub(&h->refs, 1) == 1) req_destroy(h);
}

/* Appends nodes (a linked run first..last) and wakes the consumer. */
static void chan_push(engine_req *h, ev_node *first, ev_node *last) {
  pthread_mutex_lock(&h->mu);
  if (h->tail) h->tail->next = first;
  else h->head = first;
  h->tail = last;
  if (h->notify) h->notify(h->notify_ctx);
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

int engine_req_next(engine_req *h, int64_t timeout_ms, engine_event *out) {
  memset(out, 0, sizeof(*out));
  struct timespec until;
  if (timeout_ms > 0) {
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
  }
  pthread_mutex_lock(&h->mu);
  while (!h->head) {
    if (h->n_finish_popped >= h->n_choices) {
      pthread_mutex_unlock(&h->mu);
      return ERR_NOT_FOUND;
    }
    if (timeout_ms == 0) {
      pthread_mutex_unlock(&h->mu);
      return ERR_TIMEOUT;
    }
    if (timeout_ms < 0) {
      pthread_cond_wait(&h->cv, &h->mu);
    } else if (pthread_cond_timedwait(&h->cv, &h->mu, &until) == ETIMEDOUT && !h->head) {
      pthread_mutex_unlock(&h->mu);
      return ERR_TIMEOUT;
    }
  }
  ev_node *n = h->head;
  h->head = n->next;
  if (!h->head) h->tail = NULL;
  if (n->ev.type == ENGINE_EVENT_FINISH) h->n_finish_popped++;
  pthread_mutex_unlock(&h->mu);
  *out = n->ev;
  free(n);
  return 0;
}

void engine_req_cancel(engine_req *h) {
  if (h) atomic_store(&h->cancel, true);
}

void engine_req_free(engine_req *h) {
  if (!h) return;
  atomic_store(&h->cancel, true);
  pthread_mutex_lock(&h->mu);
  h->notify = NULL;
  h->notify_ctx = NULL;
  pthread_mutex_unlock(&h->mu);
  req_unref(h);
}

void engine_event_free(engine_event *ev) {
  if (!ev) return;
  free(ev->text);
  free(ev->tokens);
  free(ev->logprobs);
  free(ev->err_msg);
  ev->text = NULL;
  ev->tokens = NULL;
  ev->logprobs = NULL;
  ev->err_msg = NULL;
}

const char *engine_finish_name(enum engine_finish f) {
  static const char *const names[] = {"stop", "length", "cancelled", "error"};
  return (unsigned)f < ARRAY_LEN(names) ? names[f] : "unknown";
}

/* ---- the engine ------------------------------------------------------------ */

typedef struct slot {
  engine_req *req;       /* NULL = free */
  int32_t *hist;         /* [n_ctx] tokens in the sequence's cache */
  int64_t n_hist;
  int64_t n_cached;      /* prompt tokens reused at admission */
  bool decoding;
  int32_t next_token;
  int64_t n_gen;         /* sampled tokens */
  int32_t choice;        /* index of the request's choice this slot runs */
  bool waiting;          /* choice > 0 waiting for choice 0's prompt (its
                            cache is copied from there, see step_run) */
  uint64_t admitted;     /* admission order (prefill goes oldest first) */
  uint64_t last_used;    /* for choosing among equally good free slots */
  /* recurrent-state checkpoints (models with recurrent layers): the state
   * after ck_pos[i] positions of hist is ck_state + i * e->ck_bytes;
   * ascending, all <= n_hist, dropped when hist is cut below them */
  int64_t *ck_pos;       /* [e->n_ck] */
  uint8_t *ck_state;     /* [e->n_ck][e->ck_bytes] */
  int32_t n_ck;          /* checkpoints held */
  tok_stream ts;
  buf text;              /* detokenized, not yet emitted (stop-string hold) */
  int32_t *p_tok;        /* tokens not yet reported in a delta */
  sample_result *p_lp;   /* their logprobs (when asked) */
  size_t n_p, cap_p;
} slot;

struct engine {
  model *m;
  const tok *t;
  model_ctx *ctx;
  int32_t n_slots, queue_max, n_vocab;
  int64_t n_ctx, n_batch, n_chunk;
  uint64_t chunk_budget_ns; /* engine_params.chunk_budget_ms */
  int32_t n_ck;             /* checkpoints per slot (0: none) */
  size_t ck_bytes;          /* bytes of one (model_rs_seq_bytes) */
  chunk_cost cost;          /* measured step costs (chunk.h), engine thread */

  pthread_t thread;
  pthread_mutex_t mu;   /* queue, stopping, paused */
  pthread_cond_t cv;
  engine_req *q_head, *q_tail;
  int32_t n_queued;
  bool stopping, paused;

  engine_stats st;      /* under mu: a copy published after every step */

  /* engine thread only */
  engine_stats acc;     /* the counters being updated */
  slot *slots;
  int32_t n_active;
  uint64_t clock;       /* admission / use counter */
  int32_t *b_tokens, *b_seq;
  int64_t *b_pos;
  bool *b_want;
  float *logits;        /* [n_slots * n_vocab]: at most one row per slot */

  /* constrained output: built by the first grammar submit under mu, then
   * read-only (engine thread) */
  grammar_vocab *gv;
  char *g_bytes;        /* every token's decoded bytes, concatenated */
  size_t *g_off;        /* [n_vocab + 1]: token i is g_bytes[g_off[i]..g_off[i+1]) */
  bool *g_eog;          /* [n_vocab]: tok_is_eog */
  /* engine thread only */
  uint8_t *g_mask;      /* [n_vocab] */
  float *g_row;         /* [n_vocab]: the masked logits */
};

engine_params engine_default_params(void) {
  engine_params p;
  memset(&p, 0, sizeof(p));
  return p;
}

engine_request engine_request_default(void) {
  engine_request r;
  memset(&r, 0, sizeof(r));
  r.sample = sample_default_params();
  return r;
}

int32_t engine_n_checkpoints(const model *m, int32_t n) {
  if (!model_is_recurrent(m) || n < 0) return 0;
  return n == 0 ? ENGINE_CHECKPOINTS : n;
}

int64_t engine_n_ctx(const engine *e) { return e->n_ctx; }

void engine_get_stats(engine *e, engine_stats *out) {
  pthread_mutex_lock(&e->mu);
  *out = e->st;
  out->n_slots = e->n_slots;
  out->n_queued = e->n_queued;
  pthread_mutex_unlock(&e->mu);
}
int32_t engine_n_slots(const engine *e) { return e->n_slots; }

void engine_pause(engine *e, bool paused) {
  pthread_mutex_lock(&e->mu);
  e->paused = paused;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

/* ---- events from a slot ---------------------------------------------------- */

static ev_node *node_new(enum engine_event_type type) {
  ev_node *n = calloc(1, sizeof(*n));
  if (n) {
    n->ev.type = type;
    n->ev.stop_index = -1;
  }
  return n;
}

/* Emits text[0..n_emit) with every pending token as one TEXT_DELTA and
 * keeps the rest of the text. ERR_NOMEM leaves everything as it was. */
static int slot_emit(slot *s, size_t n_emit) {
  if (n_emit == 0 && s->n_p == 0) return 0;
  engine_req *h = s->req;
  ev_node *n = node_new(ENGINE_EVENT_TEXT_DELTA);
  char *txt = malloc(n_emit + 1);
  int32_t *toks = s->n_p ? malloc(s->n_p * sizeof(*toks)) : NULL;
  sample_result *lp = (s->n_p && h->logprobs) ? malloc(s->n_p * sizeof(*lp)) : NULL;
  if (!n || !txt || (s->n_p && !toks) || (s->n_p && h->logprobs && !lp)) {
    free(n);
    free(txt);
    free(toks);
    free(lp);
    return err_set(ERR_NOMEM, "no memory for a text delta of %zu bytes", n_emit);
  }
  if (n_emit) memcpy(txt, s->text.data, n_emit);
  txt[n_emit] = '\0';
  if (s->n_p) memcpy(toks, s->p_tok, s->n_p * sizeof(*toks));
  if (lp) memcpy(lp, s->p_lp, s->n_p * sizeof(*lp));
  n->ev.index = s->choice;
  n->ev.text = txt;
  n->ev.n_text = n_emit;
  n->ev.tokens = toks;
  n->ev.logprobs = lp;
  n->ev.n_tokens = s->n_p;
  n->ev.n_prompt = h->n_prompt;
  n->ev.n_cached = h->n_cached;
  s->n_p = 0;
  if (n_emit) {
    memmove(s->text.data, s->text.data + n_emit, s->text.len - n_emit);
    s->text.len -= n_emit;
    s->text.data[s->text.len] = '\0';
  }
  chan_push(h, n, n);
  return 0;
}

/* Earliest occurrence of any stop string in the held text: its byte offset,
 * and the stop string's index in *which; -1 when none. */
static int64_t stop_find(const engine_req *h, const buf *text, int32_t *which) {
  int64_t best = -1;
  for (size_t i = 0; i < h->n_stop; i++) {
    if (text->len < h->stop_len[i]) continue;
    const char *p = memmem(text->data, text->len, h->stop[i], h->stop_len[i]);
    if (p && (best < 0 || p - text->data < best)) {
      best = p - text->data;
      *which = (int32_t)i;
    }
  }
  return best;
}

/* Bytes of the held text that can be emitted: all but the longest suffix
 * (starting on a character boundary) that is a prefix of some stop string. */
static size_t stop_safe_len(const engine_req *h, const buf *text) {
  size_t hold = 0;
  for (size_t i = 0; i < h->n_stop; i++) {
    size_t max = h->stop_len[i] - 1 < text->len ? h->stop_len[i] - 1 : text->len;
    for (size_t k = max; k > hold; k--) {
      const char *suf = text->data + text->len - k;
      if (((unsigned char)suf[0] & 0xC0) == 0x80) continue;
      if (memcmp(suf, h->stop[i], k) == 0) {
        hold = k;
        break;
      }
    }
  }
  return text->len - hold;
}

/* Pushes a choice's FINISH, preceded by the request's USAGE when it is the
 * last choice to finish. Uses the nodes allocated at submit. */
static void req_push_finish(engine_req *h, int32_t choice, enum engine_finish why, int32_t stop_index, int code,
                            const char *msg, bool last) {
  ev_node *f = h->pre_finish[choice], *first = f;
  h->pre_finish[choice] = NULL;
  f->ev.type = ENGINE_EVENT_FINISH;
  f->ev.index = choice;
  f->ev.finish = why;
  f->ev.stop_index = stop_index;
  if (why == ENGINE_FINISH_ERROR) {
    f->ev.err_code = code;
    f->ev.err_msg = str_dup(msg ? msg : err_message(code)); /* NULL on no memory */
  }
  f->next = NULL;
  if (last) {
    ev_node *u = h->pre_usage;
    h->pre_usage = NULL;
    u->ev.type = ENGINE_EVENT_USAGE;
    u->ev.stop_index = -1;
    u->ev.n_prompt = h->n_prompt;
    u->ev.n_cached = h->n_cached;
    u->ev.n_completion = h->n_completion;
    u->ev.t_first_ns = h->t_first_ns;
    u->ev.t_last_ns = h->t_last_ns;
    u->next = f;
    first = u;
  }
  chan_push(h, first, f);
}

/* Ends the slot's request: for STOP/LENGTH the held text goes out first
 * (cut before a stop string if the final flush completed one), then USAGE and
 * FINISH; the slot becomes free but keeps its cache. */
static void slot_finish(engine *e, slot *s, enum engine_finish why, int32_t stop_index, int code,
                        const char *msg) {
  engine_req *h = s->req;
  if (why == ENGINE_FINISH_STOP || why == ENGINE_FINISH_LENGTH) {
    if (stop_index < 0) {
      if (!e->t || tok_stream_flush(&s->ts, &s->text) == 0) {
        int32_t which = -1;
        int64_t at = stop_find(h, &s->text, &which);
        if (at >= 0) {
          s->text.len = (size_t)at;
          why = ENGINE_FINISH_STOP;
          stop_index = which;
        }
      }
    }
    if (slot_emit(s, s->text.len)) {
      why = ENGINE_FINISH_ERROR;
      code = ERR_NOMEM;
      msg = "no memory for the last text delta";
    }
  }
  /* discard anything the detokenizer still holds */
  if (e->t) {
    buf scratch = BUF_INIT;
    tok_stream_flush(&s->ts, &scratch);
    buf_free(&scratch);
  }
  buf_reset(&s->text);
  s->n_p = 0;

  h->n_completion += s->n_gen;
  h->n_live--;
  bool last = h->n_live == 0;
  e->acc.n_completion_tokens += (uint64_t)s->n_gen;
  if (last) {
    e->acc.n_requests++;
    e->acc.n_prompt_tokens += (uint64_t)h->n_prompt;
    e->acc.n_cached_tokens += (uint64_t)h->n_cached;
  }
  /* published before the FINISH, so whoever sees it sees the counters */
  e->acc.n_slots_busy = e->n_active - 1;
  pthread_mutex_lock(&e->mu);
  e->st = e->acc;
  pthread_mutex_unlock(&e->mu);
  req_push_finish(h, s->choice, why, stop_index, code, msg, last);
  s->req = NULL;
  s->decoding = false;
  s->waiting = false;
  s->last_used = ++e->clock;
  e->n_active--;
  if (last) req_unref(h);
}

/* Finishes a request that never got a slot (queue cancel, timeout, context
 * error at submit, shutdown): every choice. */
static void req_finish_unslotted(engine_req *h, enum engine_finish why, int code, const char *msg) {
  for (int32_t i = 0; i < h->n_choices; i++) req_push_finish(h, i, why, -1, code, msg, i == h->n_choices - 1);
  req_unref(h);
}

static void timeout_msg(const engine_req *h, char *out, size_t cap) {
  snprintf(out, cap, "request exceeded its timeout of %lld ms", (long long)h->timeout_ms);
}

/* ---- admission: the prefix cache ------------------------------------------ */

static int64_t common_prefix(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
  int64_t n = na < nb ? na : nb, i = 0;
  while (i < n && a[i] == b[i]) i++;
  return i;
}

/* Puts h into the free slot whose cache shares the longest prefix with its
 * prompt (ties: the least recently used), keeping at most n_prompt - 1
 * tokens so that the last prompt token is decoded for its logits. */
static void slot_start(engine *e, slot *s, engine_req *h, int32_t choice) {
  s->req = h;
  s->choice = choice;
  s->waiting = choice > 0;
  s->decoding = false;
  s->n_gen = 0;
  s->n_p = 0;
  s->admitted = ++e->clock;
  s->last_used = s->admitted;
  buf_reset(&s->text);
  if (e->t) tok_stream_init(&s->ts, e->t, h->decode_flags);
  /* the penalty window sees the end of the prompt, as llama.cpp's server */
  int64_t w = h->penalty_last_n < h->n_prompt ? h->penalty_last_n : h->n_prompt;
  for (int64_t i = h->n_prompt - w; i < h->n_prompt; i++) sample_accept(h->smp[choice], h->prompt[i]);
  e->n_active++;
}

/* ---- recurrent-state checkpoints ----------------------------------------- */

/* The slot's history was cut to n positions: checkpoints past it no longer
 * describe it. */
static void ck_drop_after(slot *s, int64_t n) {
  while (s->n_ck > 0 && s->ck_pos[s->n_ck - 1] > n) s->n_ck--;
}

/* Index of the slot's longest checkpoint at or below n positions; -1 when none. */
static int32_t ck_find(const slot *s, int64_t n) {
  int32_t k = s->n_ck - 1;
  while (k >= 0 && s->ck_pos[k] > n) k--;
  return k;
}

/* Keeps the state after the slot's n_hist positions (a prompt chunk just
 * ended there, or the next one starts there). When all e->n_ck are taken, the checkpoint nearest its
 * predecessor goes, which keeps them spread over the history (a long
 * prompt's chunk ends thin out; the newest always stays). */
static void ck_save(engine *e, slot *s, int32_t seq) {
  if (e->n_ck == 0 || s->n_hist == 0 || (s->n_ck && s->ck_pos[s->n_ck - 1] >= s->n_hist)) return;
  if (s->n_ck == e->n_ck) {
    int32_t drop = 0;
    int64_t gap = INT64_MAX;
    for (int32_t i = 0; i < s->n_ck; i++) {
      int64_t g = s->ck_pos[i] - (i ? s->ck_pos[i - 1] : 0);
      if (g < gap) gap = g, drop = i;
    }
    memmove(s->ck_pos + drop, s->ck_pos + drop + 1, (size_t)(s->n_ck - drop - 1) * sizeof *s->ck_pos);
    memmove(s->ck_state + (size_t)drop * e->ck_bytes, s->ck_state + (size_t)(drop + 1) * e->ck_bytes,
            (size_t)(s->n_ck - drop - 1) * e->ck_bytes);
    s->n_ck--;
  }
  if (model_ctx_seq_state_save(e->ctx, seq, s->ck_state + (size_t)s->n_ck * e->ck_bytes)) return;
  s->ck_pos[s->n_ck++] = s->n_hist;
}

/* The prefix of h's prompt the free slot s can resume: the common prefix,
 * at most n_prompt - 1 tokens (the last one is decoded for its logits). A
 * recurrent state exists only at the slot's whole history and at its
 * checkpoints, so there it is the history when the prompt continues it,
 * else the longest checkpoint inside the common prefix, else 0. */
static int64_t slot_reusable(const engine *e, const slot *s, const engine_req *h) {
  int64_t c = common_prefix(s->hist, s->n_hist, h->prompt, h->n_prompt);
  if (c > h->n_prompt - 1) c = h->n_prompt - 1;
  if (!model_is_recurrent(e->m) || c == s->n_hist) return c;
  int32_t k = ck_find(s, c);
  return k < 0 ? 0 : s->ck_pos[k];
}

/* Choice 0 goes to the free slot that can resume the longest prefix of the
 * prompt (slot_reusable; ties: the least recently used); its sequence is
 * cut there (a recurrent one restored from the checkpoint, or restarted
 * with its state zeroed). Choices 1..n-1 take the least recently used of
 * the other free slots and wait for choice 0's prompt (the caller checked
 * that n_choices slots are free). */
static void slot_admit(engine *e, engine_req *h) {
  slot *best = NULL;
  int64_t best_n = -1;
  for (int32_t i = 0; i < e->n_slots; i++) {
    slot *s = &e->slots[i];
    if (s->req) continue;
    int64_t c = slot_reusable(e, s, h);
    if (c > best_n || (c == best_n && s->last_used < best->last_used)) {
      best = s;
      best_n = c;
    }
  }
  int32_t seq = (int32_t)(best - e->slots);
  if (best_n < best->n_hist) {
    int32_t k = model_is_recurrent(e->m) ? ck_find(best, best_n) : -1;
    if (k >= 0 && best->ck_pos[k] == best_n && best_n > 0 &&
        model_ctx_seq_state_restore(e->ctx, seq, best_n, best->ck_state + (size_t)k * e->ck_bytes) == 0)
      e->acc.n_rs_restores++;
    else
      model_ctx_seq_truncate(e->ctx, seq, best_n); /* a recurrent sequence restarts at 0 */
  }
  int64_t keep = model_ctx_seq_n_past(e->ctx, seq);
  ck_drop_after(best, keep);
  best->n_hist = keep;
  /* where this prompt's first chunk starts (the last answer's end, when the
   * live state continues): a regenerated answer resumes here */
  if (e->n_ck) ck_save(e, best, seq);
  h->n_cached = keep;
  h->n_live = h->n_choices;
  slot_start(e, best, h, 0);
  for (int32_t c = 1; c < h->n_choices; c++) {
    slot *lru = NULL;
    for (int32_t i = 0; i < e->n_slots; i++) {
      slot *s = &e->slots[i];
      if (!s->req && (!lru || s->last_used < lru->last_used)) lru = s;
    }
    slot_start(e, lru, h, c);
  }
}

/* ---- one token ------------------------------------------------------------- */

static bool is_stop_token(const engine *e, const engine_req *h, int32_t id) {
  if (!h->ignore_eog && e->t && tok_is_eog(e->t, id)) return true;
  for (size_t i = 0; i < h->n_stop_tokens; i++)
    if (h->stop_tokens[i] == id) return true;
  return false;
}

static int pending_push(slot *s, const sample_result *r, bool with_lp) {
  if (s->n_p == s->cap_p) {
    size_t cap = s->cap_p ? s->cap_p * 2 : 16;
    int32_t *t = realloc(s->p_tok, cap * sizeof(*t));
    if (!t) return ERR_NOMEM;
    s->p_tok = t;
    sample_result *l = realloc(s->p_lp, cap * sizeof(*l));
    if (!l) return ERR_NOMEM;
    s->p_lp = l;
    s->cap_p = cap;
  }
  s->p_tok[s->n_p] = r->token;
  if (with_lp) s->p_lp[s->n_p] = *r;
  s->n_p++;
  return 0;
}

/* Under a grammar: an end token (EOG or a stop token) ends the output. */
static bool is_end_token(const engine *e, const engine_req *h, int32_t id) {
  if (e->g_eog[id]) return true;
  for (size_t i = 0; i < h->n_stop_tokens; i++)
    if (h->stop_tokens[i] == id) return true;
  return false;
}

static bool grammar_allows(const engine *e, const engine_req *h, const grammar_state *gs, int32_t id) {
  if (is_end_token(e, h, id)) return grammar_can_end(gs);
  size_t len = e->g_off[id + 1] - e->g_off[id];
  return len > 0 && grammar_token_allowed(gs, e->g_bytes + e->g_off[id], len);
}

/* Samples the slot's next token (engine.h, "Constrained output"). Returns 0
 * with *r, 1 when the grammar is complete and no token can continue (the
 * choice ends STOP), or a negative ERR_* with err_set. */
static int slot_sample(engine *e, slot *s, const float *row, sample_result *r) {
  engine_req *h = s->req;
  sampler *smp = h->smp[s->choice];
  int rc = sample_next(smp, row, h->logprobs, r);
  if (rc || !h->gs) return rc;
  grammar_state *gs = h->gs[s->choice];
  if (!grammar_allows(e, h, gs, r->token)) {
    bool can_end = false;
    rc = grammar_mask(gs, e->gv, e->g_mask, &can_end);
    if (rc) return rc;
    size_t n_ok = 0;
    for (int32_t i = 0; i < e->n_vocab; i++) {
      bool ok = is_end_token(e, h, i) ? can_end : e->g_mask[i] != 0;
      e->g_row[i] = ok ? row[i] : -INFINITY;
      n_ok += ok;
    }
    if (n_ok == 0) {
      if (can_end) return 1;
      return err_set(ERR_INVALID, "grammar: no token of the vocabulary can continue the output");
    }
    rc = sample_next(smp, e->g_row, h->logprobs, r);
    if (rc || !grammar_allows(e, h, gs, r->token)) { /* a bias of -inf on every allowed token */
      if (can_end) return 1;
      return err_set(ERR_INVALID, "grammar: every token the grammar allows is banned by the logit bias");
    }
  }
  if (is_end_token(e, h, r->token)) return 0;
  size_t len = e->g_off[r->token + 1] - e->g_off[r->token];
  return grammar_accept_bytes(gs, e->g_bytes + e->g_off[r->token], len);
}

/* Samples from the slot's logits row and takes the token to its events:
 * stop token, detokenize, stop strings, limits. */
static void slot_take_token(engine *e, slot *s, const float *row) {
  engine_req *h = s->req;
  sample_result r;
  sampler *smp = h->smp[s->choice];
  int rc = slot_sample(e, s, row, &r);
  if (rc == 1) {
    slot_finish(e, s, ENGINE_FINISH_STOP, -1, 0, NULL);
    return;
  }
  if (rc) {
    slot_finish(e, s, ENGINE_FINISH_ERROR, -1, rc, err_detail());
    return;
  }
  sample_accept(smp, r.token);
  s->n_gen++;
  /* token times measured here, where tokens are made: a consumer that wakes
   * once for a short answer sees all its tokens at the same instant */
  h->t_last_ns = time_mono_ns();
  if (!h->t_first_ns) h->t_first_ns = h->t_last_ns;
  s->decoding = true;
  if (is_stop_token(e, h, r.token) || (h->gs && is_end_token(e, h, r.token))) {
    slot_finish(e, s, ENGINE_FINISH_STOP, -1, 0, NULL);
    return;
  }
  if (pending_push(s, &r, h->logprobs) || (e->t && tok_stream_feed(&s->ts, r.token, &s->text))) {
    slot_finish(e, s, ENGINE_FINISH_ERROR, -1, ERR_NOMEM, "no memory for generated text");
    return;
  }
  int32_t which = -1;
  int64_t at = stop_find(h, &s->text, &which);
  if (at >= 0) {
    s->text.len = (size_t)at;
    slot_finish(e, s, ENGINE_FINISH_STOP, which, 0, NULL);
    return;
  }
  /* text that cannot start a stop string goes out now; a token without text
   * of its own (no tokenizer, a control token) goes out at once unless text
   * or an unfinished character is held before it */
  size_t safe = stop_safe_len(h, &s->text);
  bool flush_tokens = s->text.len == 0 && (!e->t || s->ts.n_held == 0);
  if ((safe || flush_tokens) && slot_emit(s, safe)) {
    slot_finish(e, s, ENGINE_FINISH_ERROR, -1, ERR_NOMEM, "no memory for a text delta");
    return;
  }
  if (h->max_tokens > 0 && s->n_gen >= h->max_tokens) {
    slot_finish(e, s, ENGINE_FINISH_LENGTH, -1, 0, NULL);
    return;
  }
  if (s->n_hist >= e->n_ctx) { /* no position left to decode the token */
    slot_finish(e, s, ENGINE_FINISH_LENGTH, -1, 0, NULL);
    return;
  }
  s->next_token = r.token;
}

/* ---- the step -------------------------------------------------------------- */

/* Fills the batch: the next token of every decoding slot, then prompt chunks
 * of prefilling slots, oldest admission first, up to n_batch tokens. Only the
 * last token of a slot's prompt and decoded tokens want logits. */
static int64_t step_build(engine *e) {
  int64_t n = 0;
  for (int32_t i = 0; i < e->n_slots; i++) {
    slot *s = &e->slots[i];
    if (!s->req || !s->decoding) continue;
    e->b_tokens[n] = s->next_token;
    e->b_seq[n] = i;
    e->b_pos[n] = s->n_hist;
    e->b_want[n] = true;
    n++;
  }
  /* with streams decoding, prompt tokens per step are capped (n_chunk) so
   * that their next token is not delayed by a whole long prefill */
  int64_t limit = e->n_batch;
  if (n > 0 && e->n_chunk > 0 && n + e->n_chunk < limit) limit = n + e->n_chunk;
  /* ... and to what fits the time budget at the measured costs (chunk.h:
   * a decode-only step of this width plus a measured cost per prompt
   * token, which follows the prompt's position and the machine's load) */
  if (n > 0 && e->chunk_budget_ns > 0) {
    int64_t cap = chunk_tokens(&e->cost, n, e->chunk_budget_ns);
    if (n + cap < limit) limit = n + cap;
  }
  for (;;) {
    slot *next = NULL;
    for (int32_t i = 0; i < e->n_slots; i++) {
      slot *s = &e->slots[i];
      if (!s->req || s->decoding || s->waiting || s->n_hist >= s->req->n_prompt) continue;
      bool queued = false; /* already has a chunk in this batch */
      for (int64_t k = 0; k < n; k++)
        if (e->b_seq[k] == i) queued = true;
      if (queued) continue;
      if (!next || s->admitted < next->admitted) next = s;
    }
    if (!next || n >= limit) break;
    int32_t seq = (int32_t)(next - e->slots);
    engine_req *h = next->req;
    int64_t k = h->n_prompt - next->n_hist;
    if (k > limit - n) k = limit - n;
    for (int64_t j = 0; j < k; j++) {
      e->b_tokens[n] = h->prompt[next->n_hist + j];
      e->b_seq[n] = seq;
      e->b_pos[n] = next->n_hist + j;
      e->b_want[n] = next->n_hist + j == h->n_prompt - 1;
      n++;
    }
  }
  return n;
}

/* Choice 0 of a request with n > 1 has decoded its prompt: the waiting
 * choices get a copy of its cache and sample from the same logits row, each
 * with its own sampler. */
static void step_fork(engine *e, slot *src, const float *lg) {
  engine_req *h = src->req;
  int32_t src_seq = (int32_t)(src - e->slots);
  for (int32_t i = 0; i < e->n_slots; i++) {
    slot *s = &e->slots[i];
    if (s->req != h || !s->waiting) continue;
    int rc = model_ctx_seq_copy(e->ctx, i, src_seq, src->n_hist);
    if (rc) {
      s->n_hist = model_ctx_seq_n_past(e->ctx, i);
      ck_drop_after(s, s->n_hist);
      slot_finish(e, s, ENGINE_FINISH_ERROR, -1, rc, err_detail());
      continue;
    }
    memcpy(s->hist, src->hist, (size_t)src->n_hist * sizeof(int32_t));
    s->n_hist = src->n_hist;
    /* the same history: the source's checkpoints hold for the copy (copied,
     * never shared) */
    s->n_ck = src->n_ck;
    if (src->n_ck) {
      memcpy(s->ck_pos, src->ck_pos, (size_t)src->n_ck * sizeof *s->ck_pos);
      memcpy(s->ck_state, src->ck_state, (size_t)src->n_ck * e->ck_bytes);
    }
    s->waiting = false;
    slot_take_token(e, s, lg);
  }
}

static void step_run(engine *e) {
  int64_t n = step_build(e);
  if (n == 0) return;
  e->acc.n_steps++;
  e->acc.n_batch_tokens += (uint64_t)n;
  model_batch b = {.n = n, .tokens = e->b_tokens, .seq = e->b_seq, .pos = e->b_pos, .want = e->b_want};
  uint64_t t0 = time_mono_ns();
  int rc = model_decode(e->ctx, &b, e->logits);
  if (!rc) {
    uint64_t ns = time_mono_ns() - t0;
    int64_t n_dec = 0;
    for (int64_t k = 0; k < n; k++) n_dec += e->slots[e->b_seq[k]].decoding;
    chunk_cost_observe(&e->cost, n_dec, n - n_dec, ns);
    if (n > n_dec && log_get_level() <= LOG_LEVEL_DEBUG)
      LOG_DEBUG("engine", "step: %lld decode + %lld prompt tokens (last at %lld) %.1f ms; base %.1f ms, token %.2f ms",
                (long long)n_dec, (long long)(n - n_dec), (long long)e->b_pos[n - 1], (double)ns * 1e-6,
                (double)chunk_cost_base(&e->cost, n_dec) * 1e-6, (double)e->cost.tok_ns * 1e-6);
  }
  if (rc) {
    /* every choice of every request with tokens in the batch fails */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", err_detail());
    engine_req *failed[256];
    int32_t n_failed = 0;
    for (int32_t i = 0; i < e->n_slots; i++) {
      slot *s = &e->slots[i];
      s->n_hist = model_ctx_seq_n_past(e->ctx, i);
      ck_drop_after(s, s->n_hist);
      for (int64_t k = 0; k < n; k++)
        if (e->b_seq[k] == i && s->req) {
          failed[n_failed++] = s->req;
          break;
        }
    }
    for (int32_t i = 0; i < e->n_slots; i++)
      for (int32_t j = 0; j < n_failed; j++)
        if (e->slots[i].req == failed[j]) {
          slot_finish(e, &e->slots[i], ENGINE_FINISH_ERROR, -1, rc, msg);
          break;
        }
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    slot *s = &e->slots[e->b_seq[k]];
    s->hist[s->n_hist++] = e->b_tokens[k];
    /* the end of a prompt chunk (a run of one slot's tokens): checkpoint */
    if (e->n_ck && !s->decoding && (k + 1 == n || e->b_seq[k + 1] != e->b_seq[k])) ck_save(e, s, e->b_seq[k]);
  }
  int64_t row = 0;
  for (int64_t k = 0; k < n; k++) {
    if (!e->b_want[k]) continue;
    slot *s = &e->slots[e->b_seq[k]];
    const float *lg = e->logits + row * e->n_vocab;
    row++;
    if (!s->req) continue;
    if (s->req->n_choices > 1 && s->choice == 0 && !s->decoding) step_fork(e, s, lg);
    slot_take_token(e, s, lg);
  }
}

/* Running requests that were cancelled or timed out end now. */
static void step_reap(engine *e, uint64_t now) {
  for (int32_t i = 0; i < e->n_slots; i++) {
    slot *s = &e->slots[i];
    if (!s->req) continue;
    if (atomic_load(&s->req->cancel)) {
      slot_finish(e, s, ENGINE_FINISH_CANCELLED, -1, 0, NULL);
    } else if (s->req->deadline_ns && now >= s->req->deadline_ns) {
      char msg[128];
      timeout_msg(s->req, msg, sizeof msg);
      slot_finish(e, s, ENGINE_FINISH_ERROR, -1, ERR_TIMEOUT, msg);
    }
  }
}

static void *engine_thread(void *arg) {
  engine *e = arg;
  for (;;) {
    engine_req *drop = NULL, *admit = NULL, **admit_tail = &admit;
    pthread_mutex_lock(&e->mu);
    while (!e->stopping && (e->paused || (e->n_active == 0 && !e->q_head))) pthread_cond_wait(&e->cv, &e->mu);
    uint64_t now = time_mono_ns();
    bool stop = e->stopping;
    /* queued requests that were cancelled or timed out (all of them when
     * stopping) leave the queue; then free slots take the oldest */
    for (engine_req **pp = &e->q_head; *pp;) {
      engine_req *h = *pp;
      if (stop || atomic_load(&h->cancel) || (h->deadline_ns && now >= h->deadline_ns)) {
        *pp = h->qnext;
        h->qnext = drop;
        drop = h;
        e->n_queued--;
      } else {
        pp = &h->qnext;
      }
    }
    int32_t n_free = e->n_slots - e->n_active;
    while (e->q_head && n_free >= e->q_head->n_choices) {
      engine_req *h = e->q_head;
      e->q_head = h->qnext;
      e->n_queued--;
      h->qnext = NULL;
      *admit_tail = h;
      admit_tail = &h->qnext;
      n_free -= h->n_choices;
    }
    e->q_tail = NULL;
    for (engine_req *h = e->q_head; h; h = h->qnext) e->q_tail = h;
    pthread_mutex_unlock(&e->mu);

    for (engine_req *h = drop, *nx; h; h = nx) {
      nx = h->qnext;
      if (stop || atomic_load(&h->cancel)) {
        req_finish_unslotted(h, ENGINE_FINISH_CANCELLED, 0, NULL);
      } else {
        char msg[128];
        timeout_msg(h, msg, sizeof msg);
        req_finish_unslotted(h, ENGINE_FINISH_ERROR, ERR_TIMEOUT, msg);
      }
    }
    for (engine_req *h = admit, *nx; h; h = nx) {
      nx = h->qnext;
      slot_admit(e, h);
    }
    if (stop) {
      for (int32_t i = 0; i < e->n_slots; i++)
        if (e->slots[i].req) slot_finish(e, &e->slots[i], ENGINE_FINISH_CANCELLED, -1, 0, NULL);
      return NULL;
    }
    step_reap(e, now);
    step_run(e);
    e->acc.n_slots_busy = e->n_active;
    pthread_mutex_lock(&e->mu);
    e->st = e->acc;
    pthread_mutex_unlock(&e->mu);
  }
}

/* ---- life cycle ------------------------------------------------------------ */

static void engine_release(engine *e) {
  if (e->slots) {
    for (int32_t i = 0; i < e->n_slots; i++) {
      free(e->slots[i].hist);
      free(e->slots[i].ck_pos);
      free(e->slots[i].ck_state);
      free(e->slots[i].p_tok);
      free(e->slots[i].p_lp);
      buf_free(&e->slots[i].text);
    }
  }
  free(e->slots);
  free(e->b_tokens);
  free(e->b_seq);
  free(e->b_pos);
  free(e->b_want);
  free(e->logits);
  grammar_vocab_free(e->gv);
  free(e->g_bytes);
  free(e->g_off);
  free(e->g_eog);
  free(e->g_mask);
  free(e->g_row);
  model_ctx_free(e->ctx);
  pthread_cond_destroy(&e->cv);
  pthread_mutex_destroy(&e->mu);
  free(e);
}

int engine_new(model *m, const tok *t, const engine_params *p, engine **out) {
  *out = NULL;
  engine_params d = p ? *p : engine_default_params();
  if (d.n_slots < 0 || d.n_slots > 256) return err_set(ERR_RANGE, "n_slots %d is outside 1..256", d.n_slots);
  if (d.n_ctx < 0) return err_set(ERR_RANGE, "n_ctx %lld is negative", (long long)d.n_ctx);
  if (d.n_batch < 0) return err_set(ERR_RANGE, "n_batch %lld is negative", (long long)d.n_batch);
  if (d.n_chunk < 0) return err_set(ERR_RANGE, "n_chunk %lld is negative", (long long)d.n_chunk);
  if (d.chunk_budget_ms < 0 || d.chunk_budget_ms > 3600000)
    return err_set(ERR_RANGE, "chunk_budget_ms %lld is outside 0..3600000", (long long)d.chunk_budget_ms);
  if (d.queue_max < 0) return err_set(ERR_RANGE, "queue_max %d is negative", d.queue_max);
  if (d.n_checkpoints > 64) return err_set(ERR_RANGE, "n_checkpoints %d is more than 64", d.n_checkpoints);
  if (d.n_threads < 0 || d.n_threads > 256) return err_set(ERR_RANGE, "n_threads %d is outside 1..256", d.n_threads);
  int32_t n_slots = d.n_slots ? d.n_slots : 4;
  int64_t n_batch = d.n_batch ? d.n_batch : 512;
  if (n_batch < n_slots)
    return err_set(ERR_RANGE, "n_batch %lld is smaller than n_slots %d (every slot needs a place in a step)",
                   (long long)n_batch, n_slots);
  const model_hparams *hp = model_get_hparams(m);
  if (hp->n_vocab <= 0 || hp->n_vocab > INT32_MAX)
    return err_set(ERR_RANGE, "the model's vocabulary of %lld tokens is out of range", (long long)hp->n_vocab);
  int32_t n_vocab = t ? tok_n_vocab(t) : (int32_t)hp->n_vocab;
  if (n_vocab != hp->n_vocab)
    return err_set(ERR_RANGE, "the tokenizer has %d tokens but the model's vocabulary has %lld", n_vocab,
                   (long long)hp->n_vocab);

  engine *e = calloc(1, sizeof(*e));
  if (!e) return err_set(ERR_NOMEM, "no memory for an engine");
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  e->m = m;
  e->t = t;
  e->n_slots = n_slots;
  e->n_batch = n_batch;
  e->n_chunk = d.n_chunk;
  e->chunk_budget_ns = (uint64_t)d.chunk_budget_ms * 1000000ull;
  e->queue_max = d.queue_max ? d.queue_max : 64;
  e->n_ck = engine_n_checkpoints(m, d.n_checkpoints);
  e->ck_bytes = (size_t)model_rs_seq_bytes(hp);
  e->n_vocab = n_vocab;
  model_ctx_params cp = model_ctx_default_params();
  cp.n_ctx = d.n_ctx;
  cp.n_batch = n_batch;
  cp.n_seq = n_slots;
  cp.kv_type = d.kv_type;
  cp.n_threads = d.n_threads ? d.n_threads : 1;
  int rc = model_ctx_new(m, &cp, &e->ctx);
  if (rc) {
    engine_release(e);
    return rc;
  }
  e->n_ctx = model_ctx_n_ctx(e->ctx);
  size_t n_logits;
  if (!size_mul((size_t)n_slots, (size_t)n_vocab, &n_logits) || !size_mul(n_logits, sizeof(float), &n_logits)) {
    engine_release(e);
    return err_set(ERR_TOO_LARGE, "logits of %d slots x %d tokens overflow", n_slots, n_vocab);
  }
  e->slots = calloc((size_t)n_slots, sizeof(*e->slots));
  e->b_tokens = malloc((size_t)n_batch * sizeof(*e->b_tokens));
  e->b_seq = malloc((size_t)n_batch * sizeof(*e->b_seq));
  e->b_pos = malloc((size_t)n_batch * sizeof(*e->b_pos));
  e->b_want = malloc((size_t)n_batch * sizeof(*e->b_want));
  e->logits = malloc(n_logits);
  bool ok = e->slots && e->b_tokens && e->b_seq && e->b_pos && e->b_want && e->logits;
  for (int32_t i = 0; ok && i < n_slots; i++) {
    e->slots[i].hist = malloc((size_t)e->n_ctx * sizeof(int32_t));
    ok = e->slots[i].hist != NULL;
    if (ok && e->n_ck) {
      e->slots[i].ck_pos = malloc((size_t)e->n_ck * sizeof(int64_t));
      e->slots[i].ck_state = malloc((size_t)e->n_ck * e->ck_bytes);
      ok = e->slots[i].ck_pos && e->slots[i].ck_state;
    }
  }
  if (!ok) {
    engine_release(e);
    return err_set(ERR_NOMEM, "no memory for %d slots of %lld positions", n_slots, (long long)e->n_ctx);
  }
  if (pthread_create(&e->thread, NULL, engine_thread, e) != 0) {
    engine_release(e);
    return err_set(ERR_INTERNAL, "cannot start the engine thread");
  }
  *out = e;
  return 0;
}

void engine_free(engine *e) {
  if (!e) return;
  pthread_mutex_lock(&e->mu);
  e->stopping = true;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  pthread_join(e->thread, NULL);
  engine_release(e);
}

/* ---- submit ---------------------------------------------------------------- */

/* The grammar vocabulary: every token's decoded bytes (none for control,
 * unknown and EOG tokens) as a trie, built by the first request with a
 * grammar. Called with e->mu held; the engine thread only reads these after
 * it took such a request from the queue (under e->mu). */
static int grammar_vocab_build(engine *e) {
  if (e->gv) return 0;
  int32_t V = e->n_vocab;
  size_t *off = calloc((size_t)V + 1, sizeof(*off));
  bool *eog = calloc((size_t)V, sizeof(*eog));
  const char **pieces = calloc((size_t)V, sizeof(*pieces));
  size_t *lens = calloc((size_t)V, sizeof(*lens));
  uint8_t *mask = malloc((size_t)V);
  float *row = malloc((size_t)V * sizeof(*row));
  buf all = BUF_INIT;
  int rc = 0;
  if (!off || !eog || !pieces || !lens || !mask || !row)
    rc = err_set(ERR_NOMEM, "no memory for the grammar vocabulary of %d tokens", V);
  for (int32_t i = 0; rc == 0 && i < V; i++) {
    off[i] = all.len;
    eog[i] = tok_is_eog(e->t, i);
    enum tok_type ty = tok_token_type(e->t, i);
    if (eog[i] || ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_UNKNOWN || ty == TOK_TYPE_UNUSED) continue;
    rc = tok_decode_piece(e->t, i, 0, &all);
  }
  if (rc == 0) {
    off[V] = all.len;
    for (int32_t i = 0; i < V; i++) {
      lens[i] = off[i + 1] - off[i];
      pieces[i] = lens[i] ? all.data + off[i] : NULL;
    }
    rc = grammar_vocab_new(pieces, lens, (size_t)V, &e->gv);
  }
  free(pieces);
  free(lens);
  if (rc) {
    free(off);
    free(eog);
    free(mask);
    free(row);
    buf_free(&all);
    return rc;
  }
  e->g_bytes = all.data; /* owned now (buf's data is malloc'ed) */
  e->g_off = off;
  e->g_eog = eog;
  e->g_mask = mask;
  e->g_row = row;
  return 0;
}

static int req_fill(engine *e, const engine_request *r, engine_req *h) {
  if (r->n_prompt == 0 || !r->prompt) return err_set(ERR_INVALID, "the prompt is empty");
  if (r->n < 0 || r->n > e->n_slots)
    return err_set(ERR_RANGE, "n = %d choices, but the engine runs 1..%d (its slots)", r->n, e->n_slots);
  if (r->max_tokens < 0) return err_set(ERR_RANGE, "max_tokens %lld is negative", (long long)r->max_tokens);
  if (r->timeout_ms < 0) return err_set(ERR_RANGE, "timeout_ms %lld is negative", (long long)r->timeout_ms);
  if (r->n_prompt > (size_t)INT64_MAX / sizeof(int32_t)) return err_set(ERR_TOO_LARGE, "prompt too long");
  for (size_t i = 0; i < r->n_prompt; i++)
    if (r->prompt[i] < 0 || r->prompt[i] >= e->n_vocab)
      return err_set(ERR_RANGE, "prompt token %zu is id %d, outside the vocabulary of %d", i, r->prompt[i],
                     e->n_vocab);
  for (size_t i = 0; i < r->n_stop_tokens; i++)
    if (r->stop_tokens[i] < 0 || r->stop_tokens[i] >= e->n_vocab)
      return err_set(ERR_RANGE, "stop token %zu is id %d, outside the vocabulary of %d", i, r->stop_tokens[i],
                     e->n_vocab);
  for (size_t i = 0; i < r->n_stop; i++)
    if (!r->stop[i] || !r->stop[i][0]) return err_set(ERR_INVALID, "stop string %zu is empty", i);
  if (r->n_stop && !e->t) return err_set(ERR_INVALID, "stop strings need a tokenizer; this engine has none");
  if (r->grammar && !e->t) return err_set(ERR_INVALID, "a grammar needs a tokenizer; this engine has none");
  h->n_choices = r->n > 1 ? r->n : 1;
  h->smp = calloc((size_t)h->n_choices, sizeof(*h->smp));
  h->pre_finish = calloc((size_t)h->n_choices, sizeof(*h->pre_finish));
  if (!h->smp || !h->pre_finish) return err_set(ERR_NOMEM, "no memory for %d choices", h->n_choices);
  for (int32_t i = 0; i < h->n_choices; i++) {
    sample_params sp = r->sample;
    sp.seed += (uint64_t)i;
    int rc = sample_new(&sp, e->n_vocab, &h->smp[i]);
    if (rc) return rc;
    h->pre_finish[i] = node_new(ENGINE_EVENT_FINISH);
    if (!h->pre_finish[i]) return err_set(ERR_NOMEM, "no memory for %d choices", h->n_choices);
  }
  if (r->grammar) {
    pthread_mutex_lock(&e->mu);
    int rc = grammar_vocab_build(e);
    pthread_mutex_unlock(&e->mu);
    if (rc) return rc;
    h->gs = calloc((size_t)h->n_choices, sizeof(*h->gs));
    if (!h->gs) return err_set(ERR_NOMEM, "no memory for %d grammar states", h->n_choices);
    for (int32_t i = 0; i < h->n_choices; i++) {
      rc = grammar_state_new(r->grammar, &h->gs[i]);
      if (rc) return rc;
    }
  }
  h->prompt = malloc(r->n_prompt * sizeof(int32_t));
  h->stop_tokens = r->n_stop_tokens ? malloc(r->n_stop_tokens * sizeof(int32_t)) : NULL;
  h->stop = r->n_stop ? calloc(r->n_stop, sizeof(char *)) : NULL;
  h->stop_len = r->n_stop ? calloc(r->n_stop, sizeof(size_t)) : NULL;
  h->pre_usage = node_new(ENGINE_EVENT_USAGE);
  if (!h->prompt || (r->n_stop_tokens && !h->stop_tokens) || (r->n_stop && (!h->stop || !h->stop_len)) ||
      !h->pre_usage)
    return err_set(ERR_NOMEM, "no memory for a request of %zu tokens", r->n_prompt);
  memcpy(h->prompt, r->prompt, r->n_prompt * sizeof(int32_t));
  h->n_prompt = (int64_t)r->n_prompt;
  if (r->n_stop_tokens) memcpy(h->stop_tokens, r->stop_tokens, r->n_stop_tokens * sizeof(int32_t));
  h->n_stop_tokens = r->n_stop_tokens;
  h->n_stop = r->n_stop;
  for (size_t i = 0; i < r->n_stop; i++) {
    h->stop[i] = str_dup(r->stop[i]);
    if (!h->stop[i]) return err_set(ERR_NOMEM, "no memory for stop string %zu", i);
    h->stop_len[i] = strlen(r->stop[i]);
  }
  h->max_tokens = r->max_tokens;
  h->ignore_eog = r->ignore_eog;
  h->logprobs = r->logprobs || r->sample.n_logprobs > 0;
  h->decode_flags = r->decode_flags;
  h->penalty_last_n = r->sample.penalty_last_n > 0 ? r->sample.penalty_last_n : 0;
  h->timeout_ms = r->timeout_ms;
  h->deadline_ns = r->timeout_ms ? time_mono_ns() + (uint64_t)r->timeout_ms * 1000000ull : 0;
  h->notify = r->notify;
  h->notify_ctx = r->notify_ctx;
  return 0;
}

int engine_submit(engine *e, const engine_request *r, engine_req **out) {
  *out = NULL;
  engine_req *h = calloc(1, sizeof(*h));
  if (!h) return err_set(ERR_NOMEM, "no memory for a request");
  pthread_mutex_init(&h->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->cv, &ca);
  pthread_condattr_destroy(&ca);
  atomic_init(&h->refs, 2);
  atomic_init(&h->cancel, false);
  int rc = req_fill(e, r, h);
  if (rc) {
    req_destroy(h);
    return rc;
  }
  if (h->n_prompt > e->n_ctx) {
    char msg[200];
    snprintf(msg, sizeof msg, "the prompt has %lld tokens but the context holds %lld", (long long)h->n_prompt,
             (long long)e->n_ctx);
    req_finish_unslotted(h, ENGINE_FINISH_ERROR, ERR_CONTEXT, msg);
    *out = h;
    return 0;
  }
  pthread_mutex_lock(&e->mu);
  if (e->stopping) rc = err_set(ERR_UNAVAILABLE, "the engine is shutting down");
  else if (e->n_queued >= e->queue_max)
    rc = err_set(ERR_OVERLOADED,
                 "the model is busy: %d request%s already wait%s for a free slot (the queue limit, --queue-max); "
                 "try again shortly",
                 e->n_queued, e->n_queued == 1 ? "" : "s", e->n_queued == 1 ? "s" : "");
  if (rc) {
    pthread_mutex_unlock(&e->mu);
    req_destroy(h);
    return rc;
  }
  if (e->q_tail) e->q_tail->qnext = h;
  else e->q_head = h;
  e->q_tail = h;
  e->n_queued++;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  *out = h;
  return 0;
}
