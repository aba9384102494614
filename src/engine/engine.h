/*
 * engine.h - the serving engine of one loaded language model: a bounded
 * queue of canonical requests, n_slots slots (one KV-cache sequence each),
 * and ONE engine thread that runs continuous batching over them and pushes
 * canonical events into each request's channel. See docs/engine.md.
 *
 * Canonical means: already templated and tokenized by the caller; the
 * engine knows token ids, sampling parameters, limits and stop conditions,
 * never JSON, HTTP or a vendor name.
 *
 * Threads and ownership:
 *   - engine_new() starts the engine thread. It alone owns the model_ctx
 *     (n_seq = n_slots), the slots, the samplers and the detokenizers. The
 *     model and the tokenizer are borrowed (read-only, shared) and must
 *     outlive the engine.
 *   - engine_submit() may be called from any thread. It copies everything
 *     out of the request (prompt, stop tokens, stop strings, logit bias), so
 *     the caller's arrays may be freed as soon as it returns, and gives the
 *     caller a handle (engine_req). The handle is reference counted between
 *     the caller and the engine: the caller releases it with
 *     engine_req_free() (which also cancels the request if it is still
 *     running); the engine releases its reference after the last FINISH.
 *     A handle stays valid after engine_free() until engine_req_free().
 *   - Events are popped by one consumer thread with engine_req_next()
 *     (blocking with a timeout, no busy loop) and/or announced by a notify
 *     callback (for a server that suspends the connection and resumes it
 *     when there is something to send).
 *
 * Event order for every accepted request: zero or more TEXT_DELTA, then
 * exactly one USAGE, then exactly one FINISH, which is the last event. Even
 * engine_free() and errors follow this order. With n > 1 choices: deltas
 * and one FINISH per choice (each with its index, in any interleaving),
 * and the one USAGE comes right before the last choice's FINISH.
 *
 * Errors (negative ERR_* with err_detail()): see each function.
 */
#ifndef PARLEY_ENGINE_ENGINE_H
#define PARLEY_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "sample/grammar.h"
#include "sample/sample.h"
#include "tok/tok.h"

typedef struct engine engine;
typedef struct engine_req engine_req;

/* ---- the engine ---------------------------------------------------------- */

/* The server's chunk_budget_ms (manager.c; bench/serve.c's default). Issue 5
 * asks a long prompt to delay other streams' next token by <= 250 ms; a
 * step is sized from measured costs but overshoots its estimate by noise,
 * and with a 200 ms budget the largest gap measured idle was 0.271 s, so
 * 160 leaves that ~35% overshoot room (docs/perf-decisions.md, "Steps
 * sized from measured costs"). */
#define ENGINE_CHUNK_BUDGET_MS 160

/* Recurrent-state checkpoints per slot by default (engine_params.
 * n_checkpoints): the end of the last prompt is the one a chat's next turn
 * needs; the others keep earlier turns and long prompts' chunk ends for
 * regenerations and edited histories. Each costs model_rs_seq_bytes. */
#define ENGINE_CHECKPOINTS 8

typedef struct engine_params {
  int32_t n_slots;      /* parallel sequences (--parallel); 0 = 4 */
  int64_t n_ctx;        /* positions per slot; 0 = the trained context */
  int64_t n_batch;      /* most tokens in one step's batch (decode tokens
                           of every slot plus a prompt chunk); 0 = 512;
                           must be >= n_slots */
  int64_t n_chunk;      /* most prompt tokens in a step while other slots
                           decode (so a long prompt delays their next token
                           by one chunk's cost, not a whole prefill); 0 =
                           no cap below n_batch. Alone, a prompt always
                           goes in chunks of n_batch */
  int64_t chunk_budget_ms; /* (the server: ENGINE_CHUNK_BUDGET_MS) with
                           streams decoding, also cap the prompt
                           tokens of a step so that the step's estimated
                           time (tokens x the measured time per batch token)
                           stays within this many ms: the delay a long
                           prompt adds to other streams' next token, on any
                           machine and load; 0 = no time cap */
  int32_t n_checkpoints; /* models with recurrent layers: recurrent-state
                           checkpoints kept per slot at prompt-chunk ends,
                           so a prompt sharing a prefix with the slot's
                           history resumes from the longest one inside it
                           (docs/engine.md, "Recurrent models and the prefix
                           cache"); 0 = ENGINE_CHECKPOINTS, < 0 = none (a
                           history is then reused only when the prompt
                           continues it whole); at most 64 */
  int32_t queue_max;    /* requests waiting for a slot; 0 = 64. A submit
                           beyond it gets ERR_OVERLOADED */
  int n_threads;        /* compute threads of the engine's pool; 0 = 1 */
  enum model_kv_type kv_type; /* MODEL_KV_F16 (default), Q8_0 (half the
                                 memory) or F32 (exact) */
} engine_params;

/* All zero: the defaults above. */
engine_params engine_default_params(void);
/* Checkpoints per slot that engine_params.n_checkpoints n gives on model m
 * (0 for a model without recurrent layers). */
int32_t engine_n_checkpoints(const model *m, int32_t n);

/* Creates the context and starts the engine thread. m and t are borrowed.
 * t may be NULL (benchmarks, raw token streams): deltas then carry tokens
 * and no text, EOG tokens are not recognised, stop strings are refused.
 * ERR_RANGE for a bad parameter (named), ERR_NOMEM, or whatever
 * model_ctx_new reports. *out is NULL on failure. */
int engine_new(model *m, const tok *t, const engine_params *p, engine **out);
/* Drains: every queued and running request is finished with reason
 * CANCELLED (after its USAGE event), the thread is joined, the context
 * freed. Returns within about one step. Handles stay valid (see above). */
void engine_free(engine *e);

/* Holds the engine between steps (paused true) or lets it go on: nothing is
 * admitted, decoded or timed out while paused; engine_free still works.
 * For maintenance (and for tests that need a known queue state). */
void engine_pause(engine *e, bool paused);

int64_t engine_n_ctx(const engine *e);   /* positions per slot */

/* Counters for metrics and admin endpoints, as of the last finished step
 * or finished choice (so a consumer that has popped a FINISH sees its
 * request counted); n_queued: now. Any thread. */
typedef struct engine_stats {
  int32_t n_slots;
  int32_t n_slots_busy;
  int32_t n_queued;
  uint64_t n_requests;           /* requests that ran in slots and finished */
  uint64_t n_prompt_tokens;      /* of those requests */
  uint64_t n_cached_tokens;      /* of which reused from the prefix cache */
  uint64_t n_rs_restores;        /* admissions that resumed a recurrent
                                    state from a checkpoint */
  uint64_t n_completion_tokens;  /* sampled, all choices */
  uint64_t n_steps;              /* model_decode calls */
  uint64_t n_batch_tokens;       /* tokens in those batches */
} engine_stats;
void engine_get_stats(engine *e, engine_stats *out);
int32_t engine_n_slots(const engine *e);

/* ---- requests ------------------------------------------------------------ */

/* Called on the engine thread after events were pushed, with the request's
 * channel lock held: it must only wake the consumer (signal, resume a
 * connection) or call engine_req_cancel, never another engine_* function
 * (engine_req_next on the same request would deadlock). After
 * engine_req_free() returns it is never called again. */
typedef void (*engine_notify_fn)(void *ctx);

typedef struct engine_request {
  const int32_t *prompt;     /* [n_prompt] token ids, copied; n_prompt >= 1 */
  size_t n_prompt;
  sample_params sample;      /* checked by sample_new; bias copied.
                                sample.n_logprobs = top alternatives */
  bool logprobs;             /* report each token's logprob (and the
                                sample.n_logprobs alternatives) */
  int64_t max_tokens;        /* completion tokens; 0 = until the context
                                is full (reason LENGTH either way) */
  bool ignore_eog;           /* false: stop at the tokenizer's
                                end-of-generation tokens (tok_is_eog) */
  const int32_t *stop_tokens; /* [n_stop_tokens] more tokens that stop
                                 (reason STOP); copied */
  size_t n_stop_tokens;
  const char *const *stop;   /* [n_stop] stop strings (non-empty, UTF-8),
                                copied; the text is cut before the first
                                occurrence and the stop string is never
                                emitted */
  size_t n_stop;
  int32_t n;                 /* choices, 0 = 1, at most n_slots: each
                                runs in its own slot with its own sampler
                                (seed + i), the prompt is prefilled once
                                and its cache copied; events carry the
                                choice's index */
  int64_t timeout_ms;        /* from submit to finish, queue wait
                                included; 0 = none. Expiry finishes with
                                reason ERROR, code ERR_TIMEOUT */
  unsigned decode_flags;     /* TOK_DECODE_* for the detokenizer (0:
                                control tokens render as nothing) */
  engine_notify_fn notify;   /* optional */
  void *notify_ctx;
  const grammar *grammar;    /* optional constraint (NULL: none). Borrowed
                                and read-only: it must outlive the request
                                (until its last FINISH has been popped or
                                engine_req_free) and may be shared by any
                                number of requests. Needs a tokenizer. See
                                "Constrained output" below */
} engine_request;

/* Constrained output (engine_request.grammar). The engine builds, once, a
 * grammar_vocab of every token's decoded bytes (tok_decode_piece without
 * flags; control and unknown tokens have none and are never allowed) and
 * gives each choice its own grammar_state at submit. Per token:
 *   1. sample as usual from the row (bias, penalties, temperature, ...);
 *   2. the chosen token is checked (grammar_token_allowed); an "end token"
 *      (tok_is_eog, whatever ignore_eog says, or one of stop_tokens) is
 *      allowed exactly when grammar_can_end;
 *   3. if rejected: the full mask is computed (grammar_mask), disallowed
 *      logits become -inf (end tokens per grammar_can_end), and the token
 *      is sampled again from the masked row with the same sampler, i.e. the
 *      next draws of the same seeded generator: a seed still reproduces a
 *      run exactly, but it is not the run the unconstrained request with
 *      that seed would give, and logprobs then describe the masked row;
 *   4. the token's bytes advance the state.
 * When the mask allows no token at all: if the grammar can end, the choice
 * finishes STOP (as if an end token had been sampled, without counting a
 * token); otherwise with ERROR ERR_INVALID ("no token can continue"). An end
 * token finishes STOP as usual. max_tokens or a full context before the
 * grammar can end finish LENGTH: the output is then an incomplete document.
 * A stop string still cuts the text (so it can cut a document).
 * TOK_DECODE_STRIP_SPACE in decode_flags drops a leading space from the
 * text that the grammar saw; grammars from json_schema.c allow it. */

/* Zeroed request with sample_default_params(). */
engine_request engine_request_default(void);

/* Queues a request. Checked here, synchronously (nothing queued on error):
 * ERR_INVALID empty prompt or an empty stop string; ERR_RANGE a prompt or
 * stop token outside the vocabulary, a bad sampling parameter (sample_new's
 * message), negative max_tokens/timeout, n outside 0..n_slots;
 * ERR_OVERLOADED the queue holds queue_max requests; ERR_UNAVAILABLE the
 * engine is shutting down. A prompt longer than the context is accepted
 * and finished at once with FINISH error ERR_CONTEXT (both numbers in the
 * message), so a stream sees it like any other request error. */
int engine_submit(engine *e, const engine_request *r, engine_req **out);

/* Asks the engine to stop the request: a queued one is dropped, a running
 * one's slot is freed, at the next step (within one step). Any thread;
 * idempotent; no effect after FINISH. The request still ends with USAGE and
 * FINISH (reason CANCELLED). */
void engine_req_cancel(engine_req *h);
/* Cancels (if not finished) and releases the caller's reference. */
void engine_req_free(engine_req *h);

/* ---- events -------------------------------------------------------------- */

enum engine_event_type {
  ENGINE_EVENT_TEXT_DELTA = 0,
  ENGINE_EVENT_USAGE = 1,
  ENGINE_EVENT_FINISH = 2
};

enum engine_finish {
  ENGINE_FINISH_STOP = 0,      /* EOG, a stop token or a stop string */
  ENGINE_FINISH_LENGTH = 1,    /* max_tokens, or the slot's context is full */
  ENGINE_FINISH_CANCELLED = 2, /* engine_req_cancel/free, engine_free */
  ENGINE_FINISH_ERROR = 3      /* err_code + err_msg */
};

const char *engine_finish_name(enum engine_finish f); /* "stop", "length", ... */

typedef struct engine_event {
  enum engine_event_type type;
  int32_t index;         /* TEXT_DELTA, FINISH: the choice (0..n-1) */
  /* TEXT_DELTA: whole UTF-8 characters (never half of one, never any part
   * of a stop string), NUL-terminated; n_text may be 0 for a delta that
   * only carries tokens (the final one). tokens are the completion tokens
   * sampled since the previous delta (their text is in this delta or was
   * cut by a stop string); logprobs is [n_tokens] when the request asked
   * for logprobs, else NULL. EOG and stop tokens are not reported. */
  char *text;
  size_t n_text;
  int32_t *tokens;
  sample_result *logprobs;
  size_t n_tokens;
  /* USAGE (once per request, all choices together); TEXT_DELTA carries
   * n_prompt and n_cached too (fixed at admission), so a consumer knows the
   * cache split from the first delta on (Anthropic's message_start) */
  int64_t n_prompt;      /* prompt tokens */
  int64_t n_cached;      /* of which served from the slot's prefix cache */
  int64_t n_completion;  /* every sampled token, including an EOG/stop token */
  uint64_t t_first_ns;   /* monotonic (time_mono_ns), on the engine thread:
                            when the first and the last of those tokens was */
  uint64_t t_last_ns;    /* sampled; 0 when none was */
  /* FINISH */
  enum engine_finish finish;
  int32_t stop_index;    /* STOP by a stop string: its index; -1 otherwise */
  int err_code;          /* ERROR: a negative ERR_* */
  char *err_msg;         /* ERROR: the detail, NUL-terminated */
} engine_event;

/* Frees what an event owns (text, tokens, logprobs, err_msg). */
void engine_event_free(engine_event *ev);

/* Pops the next event into *out (the caller owns it: engine_event_free).
 * timeout_ms < 0 waits forever, 0 polls. Returns 0 with an event,
 * ERR_TIMEOUT when none arrived in time, ERR_NOT_FOUND when the last FINISH has
 * already been popped (there will be no more). */
int engine_req_next(engine_req *h, int64_t timeout_ms, engine_event *out);

#endif
