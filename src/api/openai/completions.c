/*
 * completions.c - POST /v1/completions, the legacy text completion, with
 * its own text_completion renderer on top of the canonical layer (gen_run).
 *
 * prompt is a string, an array of strings, an array of token ids or an
 * array of token-id arrays. A text prompt is tokenized as plain text
 * (special tokens are not parsed: a prompt is user text) with the
 * vocabulary's BOS; a token prompt is used as given (ids outside the
 * vocabulary are a 400 naming prompt[i]). `suffix` turns a prompt into a
 * fill-in-the-middle prompt (prefix-suffix-middle order) when the
 * vocabulary has FIM tokens, else it is a 400 naming `suffix`.
 *
 * Every prompt is one engine request with n (or best_of) choices; all of a
 * request's prompts are submitted at once as detached gen jobs, so they
 * decode side by side in the engine's slots, and choice k of prompt p is
 * answered at index p*n + k as OpenAI does. Usage is the sum over prompts.
 * Not streaming, the handler's thread waits for every job and answers the
 * text_completion body. Streaming, the handler opens the SSE stream itself;
 * the jobs' producer threads write their chunks into it under one lock (so
 * chunks of different prompts interleave, each with its own index) and the
 * last job to end writes the usage chunk and [DONE] and closes the stream.
 * The stream's cancel callback cancels every live job.
 *
 * best_of > n (not streaming): each prompt runs best_of choices with the
 * sampled tokens' logprobs, and the n with the highest total logprob are
 * answered (best first). With stream, best_of must equal n, as in OpenAI.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/openai/openai.h"
#include "base/err.h"
#include "base/util.h"

#define MAX_PROMPTS 32 /* prompts per request: all are submitted at once and
                          the engine queues at most 64 requests per model */

/* One prompt, ready to submit. */
struct prompt {
  tok_ids ids;
  char *echo; /* the prompt's text (decoded for token prompts) */
};

/* A request's shared state: every job's sink ctx points at one of these
 * (through struct cjob). Fields below `mu` are read and written under it. */
struct cmpl {
  pthread_mutex_t wmu; /* serializes stream writes (never held with mu
                          while waiting: a write may block on a full queue) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char id[64];
  char *model;
  int64_t created;
  bool stream, include_usage, echo, want_lp;
  int32_t top_lp;
  int n, best_of, n_prompts;
  char **echo_text;   /* [n_prompts] */
  http_stream *s;     /* streaming */
  bool gone;          /* the client left (or a write failed) */
  int refs;           /* the handler + every job's sink ctx */
  int pending;        /* the handler + every job whose on_end has not run */
  gen_job **jobs;     /* [n_prompts] running jobs (set in on_start) */
  /* per choice slot p*best_of + i (not streaming) */
  buf *text;
  json_t **lp;        /* legacy logprobs objects, or NULL */
  double *sum_lp;     /* total logprob (best_of ranking) */
  int64_t *offset;    /* text_offset of the next token */
  const char **finish;
  int64_t n_prompt, n_completion, n_cached;
  int err_code;
  char *err_msg;
};

struct cjob {
  struct cmpl *c;
  int p; /* the prompt's index */
};

static void cmpl_unref(struct cmpl *c) {
  pthread_mutex_lock(&c->mu);
  bool last = --c->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (!last) return;
  int slots = c->n_prompts * c->best_of;
  for (int i = 0; i < slots; i++) {
    if (c->text) buf_free(&c->text[i]);
    if (c->lp) json_decref(c->lp[i]);
  }
  for (int p = 0; c->echo_text && p < c->n_prompts; p++) free(c->echo_text[p]);
  free(c->echo_text);
  free(c->text);
  free(c->lp);
  free(c->sum_lp);
  free(c->offset);
  free(c->finish);
  free(c->jobs);
  free(c->model);
  free(c->err_msg);
  pthread_mutex_destroy(&c->mu);
  pthread_mutex_destroy(&c->wmu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

/* Records the request's first error (under mu). */
static void note_error(struct cmpl *c, int code, const char *msg) {
  if (c->err_code) return;
  c->err_code = code ? code : ERR_INTERNAL;
  c->err_msg = str_dup(msg && *msg ? msg : err_message(c->err_code));
}

/* Cancels every running job (under mu). */
static void cancel_all(struct cmpl *c) {
  for (int p = 0; p < c->n_prompts; p++)
    if (c->jobs[p]) gen_job_cancel(c->jobs[p]);
}

/* ---- streaming --------------------------------------------------------- */

static json_t *chunk_new(const struct cmpl *c, int index, json_t *text, const char *finish, json_t *logprobs) {
  json_t *ch = json_pack("{s:i, s:o, s:o, s:o}", "index", index, "text", text ? text : json_string(""), "logprobs",
                         logprobs ? logprobs : json_null(), "finish_reason", finish ? json_string(finish) : json_null());
  json_t *v = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o]}", "id", c->id, "object", "text_completion", "created",
                        (json_int_t)c->created, "model", c->model, "system_fingerprint", "parley", "choices", ch);
  if (v && c->include_usage) json_object_set_new(v, "usage", json_null());
  return v;
}

/* Writes one data event of v (taken) to the stream, unless the client is
 * gone; a failed write marks it gone and cancels every job. Writes are
 * serialized by wmu; mu is only taken briefly (the cancel callback takes
 * it too, so it is never held across a write that may block). */
static int send_raw(struct cmpl *c, const char *text, size_t len) {
  pthread_mutex_lock(&c->wmu);
  pthread_mutex_lock(&c->mu);
  bool gone = c->gone;
  pthread_mutex_unlock(&c->mu);
  int rc = gone ? ERR_CANCELLED : http_stream_sse(c->s, NULL, text, len);
  pthread_mutex_unlock(&c->wmu);
  if (rc && !gone) {
    pthread_mutex_lock(&c->mu);
    c->gone = true;
    cancel_all(c);
    pthread_mutex_unlock(&c->mu);
  }
  return rc;
}

static int send_json(struct cmpl *c, json_t *v) {
  char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
  json_decref(v);
  int rc = text ? send_raw(c, text, strlen(text)) : ERR_NOMEM;
  free(text);
  return rc;
}

/* The stream's cancel callback (client gone, server stopping). */
static void on_stream_cancel(void *arg) {
  struct cmpl *c = arg;
  pthread_mutex_lock(&c->mu);
  c->gone = true;
  cancel_all(c);
  pthread_mutex_unlock(&c->mu);
}

static json_t *usage_json(const struct cmpl *c) {
  return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)c->n_prompt, "completion_tokens",
                   (json_int_t)c->n_completion, "total_tokens", (json_int_t)(c->n_prompt + c->n_completion),
                   "prompt_tokens_details", "cached_tokens", (json_int_t)c->n_cached);
}

/* The stream's end: the error event, or the usage chunk and [DONE]; then
 * the stream is closed. Called once, by whoever ended last, outside mu. */
static void stream_finish(struct cmpl *c) {
  if (c->err_code && !c->gone) {
    json_t *e = json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", c->err_msg ? c->err_msg : "error", "type",
                          api_status_for(c->err_code) < 500 ? "invalid_request_error" : "server_error", "param",
                          "code");
    send_json(c, e);
  } else if (!c->gone) {
    if (c->include_usage) {
      json_t *u = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[], s:o}", "id", c->id, "object", "text_completion",
                            "created", (json_int_t)c->created, "model", c->model, "system_fingerprint", "parley",
                            "choices", "usage", usage_json(c));
      send_json(c, u);
    }
    send_raw(c, "[DONE]", 6);
  }
  http_stream_close(c->s);
}

/* ---- the sink ------------------------------------------------------------ */

static int cj_start(void *ctx, gen_job *j) {
  struct cjob *cj = ctx;
  struct cmpl *c = cj->c;
  pthread_mutex_lock(&c->mu);
  c->jobs[cj->p] = j;
  if (c->gone) gen_job_cancel(j);
  pthread_mutex_unlock(&c->mu);
  if (!c->stream || !c->echo) return 0;
  for (int i = 0; i < c->n; i++) {
    int rc = send_json(c, chunk_new(c, cj->p * c->n + i, json_string(c->echo_text[cj->p]), NULL, NULL));
    if (rc) return rc;
  }
  return 0;
}

static int cj_text(void *ctx, gen_job *j, int choice, bool reasoning, const char *text, size_t len) {
  (void)j;
  (void)reasoning;
  struct cjob *cj = ctx;
  if (!cj->c->stream) return 0;
  return send_json(cj->c, chunk_new(cj->c, cj->p * cj->c->n + choice, json_stringn(text, len), NULL, NULL));
}

/* The legacy logprobs object of tokens r[0..n-1] ({tokens, token_logprobs,
 * top_logprobs (token text -> logprob), text_offset}), starting at byte
 * offset *offset of the choice's text (advanced past them). */
static json_t *legacy_logprobs(const tok *t, const sample_result *r, size_t n, int32_t n_top, int64_t *offset) {
  json_t *o = json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
  if (!o) return NULL;
  buf piece = BUF_INIT;
  for (size_t i = 0; i < n; i++) {
    buf_reset(&piece);
    tok_decode_piece(t, r[i].token, 0, &piece);
    json_t *s = json_stringn(piece.data ? piece.data : "", piece.len);
    json_array_append_new(json_object_get(o, "tokens"), s ? s : json_string(""));
    json_array_append_new(json_object_get(o, "token_logprobs"),
                          json_real(isfinite(r[i].logprob) ? r[i].logprob : -9999.0));
    json_t *top = json_object();
    for (int32_t k = 0; top && k < n_top && k < r[i].n_top; k++) {
      buf alt = BUF_INIT;
      tok_decode_piece(t, r[i].top[k].token, 0, &alt);
      json_t *key = json_stringn(alt.data ? alt.data : "", alt.len); /* valid UTF-8, or skipped */
      if (key) json_object_set_new(top, json_string_value(key), json_real(r[i].top[k].logprob));
      json_decref(key);
      buf_free(&alt);
    }
    json_array_append_new(json_object_get(o, "top_logprobs"), top ? top : json_null());
    json_array_append_new(json_object_get(o, "text_offset"), json_integer(*offset));
    *offset += (int64_t)piece.len;
  }
  buf_free(&piece);
  return o;
}

static int cj_logprobs(void *ctx, gen_job *j, int choice, const sample_result *r, size_t n) {
  struct cjob *cj = ctx;
  struct cmpl *c = cj->c;
  int slot = cj->p * c->best_of + choice;
  for (size_t i = 0; i < n; i++) c->sum_lp[slot] += isfinite(r[i].logprob) ? r[i].logprob : -9999.0;
  if (!c->want_lp) return 0;
  json_t *lp = legacy_logprobs(gen_job_model(j)->t, r, n, c->top_lp, &c->offset[slot]);
  if (!lp) return 0;
  if (c->stream) return send_json(c, chunk_new(c, cj->p * c->n + choice, NULL, NULL, lp));
  if (!c->lp[slot]) {
    c->lp[slot] = lp;
    return 0;
  }
  static const char *const keys[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
  for (size_t k = 0; k < ARRAY_LEN(keys); k++)
    json_array_extend(json_object_get(c->lp[slot], keys[k]), json_object_get(lp, keys[k]));
  json_decref(lp);
  return 0;
}

static int cj_choice_end(void *ctx, gen_job *j, const gen_choice *ch) {
  (void)j;
  struct cjob *cj = ctx;
  if (!cj->c->stream) return 0;
  return send_json(cj->c, chunk_new(cj->c, cj->p * cj->c->n + ch->index, NULL, openai_finish_reason(ch->finish), NULL));
}

/* One job ended: its usage and (not streaming) its choices are kept; the
 * last one to end finishes the stream or wakes the handler. */
static void cj_end(void *ctx, gen_job *j, const gen_result *r) {
  (void)j;
  struct cjob *cj = ctx;
  struct cmpl *c = cj->c;
  pthread_mutex_lock(&c->mu);
  c->jobs[cj->p] = NULL;
  c->n_prompt += r->n_prompt;
  c->n_completion += r->n_completion;
  c->n_cached += r->n_cached;
  if (r->err_code) {
    note_error(c, r->err_code, r->err_msg);
    cancel_all(c);
  }
  for (int i = 0; !c->stream && i < r->n && i < c->best_of; i++) {
    int slot = cj->p * c->best_of + i;
    if (c->echo) buf_append_str(&c->text[slot], c->echo_text[cj->p]);
    if (r->ch[i].content.len) buf_append(&c->text[slot], r->ch[i].content.data, r->ch[i].content.len);
    c->finish[slot] = openai_finish_reason(r->ch[i].finish);
  }
  bool last = --c->pending == 0;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  if (last && c->stream) stream_finish(c);
}

static void cj_free(void *ctx) {
  struct cjob *cj = ctx;
  if (!cj) return;
  cmpl_unref(cj->c);
  free(cj);
}

static const gen_sink cj_sink = {
    .on_start = cj_start,
    .on_text = cj_text,
    .on_logprobs = cj_logprobs,
    .on_choice_end = cj_choice_end,
    .on_end = cj_end,
    .free = cj_free,
};

/* ---- the answer (not streaming) ------------------------------------------ */

/* The text_completion body: for each prompt, its n best choices (by total
 * logprob when best_of > n, else in order). */
static json_t *final_body(struct cmpl *c) {
  json_t *choices = json_array();
  int *order = malloc((size_t)c->best_of * sizeof *order);
  for (int p = 0; choices && order && p < c->n_prompts; p++) {
    for (int i = 0; i < c->best_of; i++) order[i] = p * c->best_of + i;
    if (c->best_of > c->n) /* insertion sort, highest total logprob first */
      for (int i = 1; i < c->best_of; i++)
        for (int k = i; k > 0 && c->sum_lp[order[k]] > c->sum_lp[order[k - 1]]; k--) {
          int t = order[k];
          order[k] = order[k - 1];
          order[k - 1] = t;
        }
    for (int i = 0; i < c->n; i++) {
      int slot = order[i];
      const buf *t = &c->text[slot];
      json_t *item = json_pack("{s:i, s:s%, s:O, s:s}", "index", p * c->n + i, "text", t->data ? t->data : "",
                               t->len, "logprobs", c->lp[slot] ? c->lp[slot] : json_null(), "finish_reason",
                               c->finish[slot] ? c->finish[slot] : "stop");
      if (!item || json_array_append_new(choices, item)) {
        json_decref(choices);
        choices = NULL;
        break;
      }
    }
  }
  free(order);
  if (!choices) return NULL;
  return json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:o}", "id", c->id, "object", "text_completion", "created",
                   (json_int_t)c->created, "model", c->model, "system_fingerprint", "parley", "choices", choices,
                   "usage", usage_json(c));
}

/* ---- the request ---------------------------------------------------------- */

static int bad(http_req *req, int code, const char *param, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int bad(http_req *req, int code, const char *param, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  api_error(req, 400, code, msg, param);
  return code;
}

/* The fill-in-the-middle tokens of a vocabulary (prefix, suffix, middle),
 * found by their texts: Qwen2.5-Coder / CodeGemma style, StarCoder /
 * Refact style, DeepSeek-Coder style. False when the vocabulary has none. */
static bool fim_tokens(const tok *t, int32_t out[3]) {
  static const char *const sets[][3] = {
      {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"},
      {"<fim_prefix>", "<fim_suffix>", "<fim_middle>"},
      {"<fim-prefix>", "<fim-suffix>", "<fim-middle>"},
      {"<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
       "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>"},
  };
  for (size_t s = 0; s < ARRAY_LEN(sets); s++) {
    bool all = true;
    for (int k = 0; k < 3; k++) all &= (out[k] = tok_lookup(t, sets[s][k], strlen(sets[s][k]))) >= 0;
    if (all) return true;
  }
  return false;
}

/* Reads one token-id array (path names it in errors) into ids. */
static int token_prompt(http_req *req, const json_t *arr, const char *path, int32_t n_vocab, tok_ids *ids) {
  if (!json_array_size(arr)) return bad(req, ERR_INVALID, path, "%s: a token prompt must hold at least one id", path);
  size_t i;
  const json_t *v;
  json_array_foreach(arr, i, v) {
    char p[64];
    snprintf(p, sizeof p, "%s[%zu]", path, i);
    if (!json_is_integer(v))
      return bad(req, ERR_TYPE, p, "%s: expected a token id (integer), got %s", p, api_json_type_name(v));
    json_int_t id = json_integer_value(v);
    if (id < 0 || id >= n_vocab)
      return bad(req, ERR_RANGE, p, "%s: token id %lld is outside the vocabulary (0 to %d)", p, (long long)id,
                 n_vocab - 1);
    if (tok_ids_push(ids, (int32_t)id)) return bad(req, ERR_NOMEM, NULL, "out of memory");
  }
  return 0;
}

/* The prompts of the request: each tokenized (or read as ids), wrapped
 * for infill when suffix is given, and checked against the context. */
static int read_prompts(http_req *req, const json_t *body, const manager_model *mm, const char *suffix,
                        struct prompt **out, int *n_out) {
  const json_t *p = json_object_get(body, "prompt");
  if (!p || json_is_null(p)) return bad(req, ERR_INVALID, "prompt", "prompt: required field is missing");
  /* forms: "s" | ["s", ...] | [id, ...] | [[id, ...], ...] */
  bool text_form = json_is_string(p), tokens_form = false;
  size_t n = 1;
  if (!text_form) {
    if (!json_is_array(p) || !json_array_size(p))
      return bad(req, json_is_array(p) ? ERR_INVALID : ERR_TYPE, "prompt",
                 "prompt: expected a string, an array of strings, an array of token ids or an array of token-id arrays");
    const json_t *first = json_array_get(p, 0);
    if (json_is_integer(first)) {
      tokens_form = true; /* one token prompt */
    } else {
      n = json_array_size(p);
      for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(p, i);
        bool ok = json_is_string(first) ? json_is_string(e) : json_is_array(e);
        if (!ok) {
          char path[32];
          snprintf(path, sizeof path, "prompt[%zu]", i);
          return bad(req, ERR_TYPE, path, "%s: expected %s like prompt[0], got %s", path,
                     json_is_string(first) ? "a string" : "an array of token ids", api_json_type_name(e));
        }
      }
    }
  }
  if (n > MAX_PROMPTS)
    return bad(req, ERR_RANGE, "prompt", "prompt: %zu prompts given, at most %d per request", n, MAX_PROMPTS);
  struct prompt *v = calloc(n, sizeof *v);
  if (!v) return bad(req, ERR_NOMEM, NULL, "out of memory");
  *out = v;
  *n_out = (int)n;
  int32_t fim[3];
  if (suffix && !fim_tokens(mm->t, fim))
    return bad(req, ERR_UNSUPPORTED, "suffix",
               "suffix: model '%s' has no fill-in-the-middle tokens (<fim_prefix>/<fim_suffix>/<fim_middle> or "
               "similar), so it cannot insert text",
               mm->name);
  int64_t n_ctx = engine_n_ctx(mm->eng);
  int32_t n_vocab = tok_n_vocab(mm->t);
  for (size_t i = 0; i < n; i++) {
    char path[32];
    if (text_form || tokens_form) snprintf(path, sizeof path, "prompt");
    else snprintf(path, sizeof path, "prompt[%zu]", i);
    const json_t *e = text_form || tokens_form ? p : json_array_get(p, i);
    tok_ids body_ids = TOK_IDS_INIT;
    int rc = 0;
    if (json_is_string(e)) {
      v[i].echo = str_ndup(json_string_value(e), json_string_length(e));
      if (!v[i].echo) rc = bad(req, ERR_NOMEM, NULL, "out of memory");
      else if ((rc = tok_encode(mm->t, json_string_value(e), json_string_length(e), 0, &body_ids)))
        rc = bad(req, rc, path, "%s: %s", path, err_detail());
    } else if (!(rc = token_prompt(req, e, path, n_vocab, &body_ids))) {
      buf text = BUF_INIT;
      if (tok_decode(mm->t, body_ids.ids, body_ids.n, TOK_DECODE_STRIP_SPACE, &text) == 0)
        v[i].echo = str_ndup(text.data ? text.data : "", text.len);
      buf_free(&text);
      if (!v[i].echo) rc = bad(req, ERR_NOMEM, NULL, "out of memory");
    }
    if (rc) { /* answered */
      tok_ids_free(&body_ids);
      return rc;
    }
    /* assemble: [BOS] text, or [BOS] <pre> text <suf> suffix <mid>; token
     * prompts keep their own BOS (or none) */
    int32_t bos = tok_special(mm->t, TOK_SPECIAL_BOS);
    bool want_bos = json_is_string(e) && tok_add_bos(mm->t) && bos >= 0 &&
                    (body_ids.n == 0 || body_ids.ids[0] != bos);
    if (want_bos) rc = tok_ids_push(&v[i].ids, bos);
    if (!rc && suffix) rc = tok_ids_push(&v[i].ids, fim[0]);
    for (size_t k = 0; !rc && k < body_ids.n; k++) rc = tok_ids_push(&v[i].ids, body_ids.ids[k]);
    if (!rc && suffix) {
      rc = tok_ids_push(&v[i].ids, fim[1]);
      if (!rc && (rc = tok_encode(mm->t, suffix, strlen(suffix), 0, &v[i].ids)))
        rc = bad(req, rc, "suffix", "suffix: %s", err_detail());
      else if (!rc) rc = tok_ids_push(&v[i].ids, fim[2]);
      else rc = ERR_INVALID; /* answered */
    }
    tok_ids_free(&body_ids);
    if (rc == ERR_NOMEM) return bad(req, ERR_NOMEM, NULL, "out of memory");
    if (rc) return rc;
    if (!v[i].ids.n) return bad(req, ERR_INVALID, path, "%s: empty (no tokens)", path);
    if ((int64_t)v[i].ids.n >= n_ctx)
      return bad(req, ERR_CONTEXT, path,
                 "%s: the prompt is %zu tokens, but the model's context holds %lld (the completion needs at least "
                 "one more)",
                 path, v[i].ids.n, (long long)n_ctx);
  }
  return 0;
}

/* A copy of g for one more job (gen_run takes its parameters). */
static int params_copy(const gen_params *src, gen_params *dst) {
  gen_params_init(dst);
  dst->er = src->er;
  dst->er.stop = NULL;
  dst->er.n_stop = 0;
  dst->er.sample.bias = NULL;
  dst->er.sample.n_bias = 0;
  for (size_t i = 0; i < src->n_stop; i++)
    if (gen_params_add_stop(dst, src->stop[i], strlen(src->stop[i]))) return ERR_NOMEM;
  for (size_t i = 0; i < src->er.sample.n_bias; i++)
    if (gen_params_add_bias(dst, src->er.sample.n_bias, src->bias[i].token, src->bias[i].bias)) return ERR_NOMEM;
  return 0;
}

static struct cmpl *cmpl_new(const openai_gen *g, int n, int best_of, int n_prompts, bool echo, const char *label) {
  struct cmpl *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  pthread_mutex_init(&c->mu, NULL);
  pthread_mutex_init(&c->wmu, NULL);
  pthread_cond_init(&c->cv, NULL);
  c->refs = 1;
  c->n = n;
  c->best_of = best_of;
  c->n_prompts = n_prompts;
  c->stream = g->stream;
  c->include_usage = g->include_usage;
  c->echo = echo;
  c->want_lp = g->logprobs;
  c->top_lp = g->top_logprobs;
  c->created = time_wall_s();
  openai_make_id(c->id, sizeof c->id, "cmpl-");
  size_t slots = (size_t)n_prompts * (size_t)best_of;
  c->model = str_dup(label);
  c->echo_text = calloc((size_t)n_prompts, sizeof *c->echo_text);
  c->jobs = calloc((size_t)n_prompts, sizeof *c->jobs);
  c->text = calloc(slots, sizeof *c->text);
  c->lp = calloc(slots, sizeof *c->lp);
  c->sum_lp = calloc(slots, sizeof *c->sum_lp);
  c->offset = calloc(slots, sizeof *c->offset);
  c->finish = calloc(slots, sizeof *c->finish);
  if (!c->model || !c->echo_text || !c->jobs || !c->text || !c->lp || !c->sum_lp || !c->offset || !c->finish) {
    cmpl_unref(c);
    return NULL;
  }
  return c;
}

/* Submits every prompt and answers (or, streaming, leaves the answer to
 * the jobs). Takes the manager reference mm and the prompts' echo texts. */
static void run(http_req *req, openai_ctx *oc, const char *model_name, manager_model *mm, openai_gen *g,
                struct prompt *pr, int n_prompts, int n, int best_of, bool echo) {
  struct cmpl *c = cmpl_new(g, n, best_of, n_prompts, echo, model_name && *model_name ? model_name : mm->name);
  if (!c) {
    manager_release(mm);
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  for (int p = 0; p < n_prompts; p++) {
    c->echo_text[p] = pr[p].echo;
    pr[p].echo = NULL;
    for (int i = 0; i < best_of; i++) c->offset[p * best_of + i] = echo ? (int64_t)strlen(c->echo_text[p]) : 0;
  }
  if (c->stream) {
    c->s = http_stream_open(req, 200, NULL, HTTP_STREAM_SSE);
    if (!c->s) {
      manager_release(mm);
      cmpl_unref(c);
      api_error(req, 500, ERR_INTERNAL, "cannot open the response stream", NULL);
      return;
    }
    http_stream_on_cancel(c->s, on_stream_cancel, c);
  }
  c->pending = 1; /* the handler's hold */
  for (int p = 0; p < n_prompts; p++) {
    pthread_mutex_lock(&c->mu);
    bool stop = c->err_code || c->gone;
    pthread_mutex_unlock(&c->mu);
    if (stop) break;
    manager_model *ref = NULL; /* each job holds its own reference */
    if (manager_get(oc->mgr, model_name, &ref) || ref != mm) {
      manager_release(ref);
      pthread_mutex_lock(&c->mu);
      note_error(c, ERR_UNAVAILABLE, "the model was unloaded while the request was being submitted");
      pthread_mutex_unlock(&c->mu);
      break;
    }
    gen_params gp;
    gen_params_init(&gp);
    struct cjob *cj = calloc(1, sizeof *cj);
    if (!cj || params_copy(&g->p, &gp)) {
      free(cj);
      gen_params_free(&gp);
      manager_release(ref);
      pthread_mutex_lock(&c->mu);
      note_error(c, ERR_NOMEM, "out of memory");
      pthread_mutex_unlock(&c->mu);
      break;
    }
    cj->c = c;
    cj->p = p;
    pthread_mutex_lock(&c->mu);
    c->refs++;
    c->pending++;
    pthread_mutex_unlock(&c->mu);
    gen_opts opts = {.detached = true, .prompt_param = "prompt"};
    int rc = gen_run(NULL, ref, &gp, &pr[p].ids, NULL, &opts, &cj_sink, cj);
    if (rc) { /* refused before the engine took it: cj was freed, on_end never runs */
      pthread_mutex_lock(&c->mu);
      note_error(c, rc, err_detail());
      c->pending--;
      cancel_all(c);
      pthread_mutex_unlock(&c->mu);
      break;
    }
  }
  manager_release(mm); /* the jobs hold their own references */
  pthread_mutex_lock(&c->mu);
  bool last = --c->pending == 0;
  if (!c->stream)
    while (c->pending) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
  if (c->stream) {
    if (last) stream_finish(c);
  } else if (c->err_code) {
    int status = c->err_code == ERR_OVERLOADED ? 429 : c->err_code == ERR_UNAVAILABLE ? 503 : 0;
    api_error(req, status, c->err_code, c->err_msg, c->err_code == ERR_CONTEXT ? "prompt" : NULL);
  } else {
    json_t *body = final_body(c);
    if (body) api_respond_json(req, 200, body);
    else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    json_decref(body);
  }
  cmpl_unref(c);
}

void openai_completions(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  if (openai_check_fields(req, body, OPENAI_SHAPE_COMPLETION)) {
    json_decref(body);
    return;
  }
  openai_gen g;
  memset(&g, 0, sizeof g);
  manager_model *mm = NULL;
  struct prompt *pr = NULL;
  int n_prompts = 0;
  const char *model_name = NULL, *suffix = NULL;
  int rc = api_json_str(body, "", "model", false, &model_name);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "model");
    goto done;
  }
  bool echo = false;
  rc = api_json_bool(body, "", "echo", false, &echo);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "echo");
    goto done;
  }
  rc = api_json_str(body, "", "suffix", false, &suffix);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "suffix");
    goto done;
  }
  if (suffix && !*suffix) suffix = NULL; /* "" inserts nothing: a plain completion */
  long long best_of = 0;
  rc = api_json_int(body, "", "best_of", false, &best_of);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "best_of");
    goto done;
  }
  bool has_best_of = rc == 0;
  if ((rc = manager_get(oc->mgr, model_name, &mm))) {
    openai_error_manager(req, rc);
    goto done;
  }
  if (!mm->eng) {
    bad(req, ERR_UNSUPPORTED, "model", "model '%s' does not generate text (an embedding model)", mm->name);
    goto done;
  }
  if (openai_gen_parse(req, body, false, mm, &g)) goto done;
  int n = g.p.er.n > 0 ? g.p.er.n : 1;
  int32_t n_slots = engine_n_slots(mm->eng);
  if (!has_best_of) best_of = n;
  if (best_of < n || best_of > n_slots) {
    bad(req, ERR_RANGE, "best_of", "best_of: %lld is out of range (n = %d to %d, the server's --parallel)", best_of,
        n, (int)n_slots);
    goto done;
  }
  if (g.stream && best_of > n) {
    bad(req, ERR_INVALID, "best_of", "best_of: must equal n (%d) when streaming: the best choices are only known at "
        "the end", n);
    goto done;
  }
  if (best_of > n) { /* rank on the sampled tokens' total logprob */
    g.p.er.n = (int32_t)best_of;
    g.p.er.logprobs = true;
  }
  if (read_prompts(req, body, mm, suffix, &pr, &n_prompts)) goto done;
  run(req, oc, model_name, mm, &g, pr, n_prompts, n, (int)best_of, echo);
  mm = NULL; /* run took the reference */
done:
  for (int i = 0; pr && i < n_prompts; i++) {
    tok_ids_free(&pr[i].ids);
    free(pr[i].echo);
  }
  free(pr);
  manager_release(mm);
  openai_gen_free(&g);
  json_decref(body);
}
