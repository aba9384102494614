/*
 * chat.c - POST /v1/chat/completions, and the generation driver shared with
 * the legacy POST /v1/completions (openai_generate).
 *
 * Request path: check the body (messages, sampling fields: errors name the
 * JSON path), load the model through the manager, normalise the messages
 * for the template (text parts joined, "developer" rendered as "system"),
 * render the chat template with tmpl_globals_from_request, tokenize with
 * special-token parsing, submit to the engine.
 *
 * Response path (openai_generate): one consumer pops engine events; each
 * choice's text goes through its own output parser (reasoning, tool calls)
 * and is either collected into one chat.completion or written as
 * chat.completion.chunk SSE events. A stream's consumer runs on a thread of
 * its own (see openai.h) and owns the job; a non-streaming request is
 * consumed on the handler's thread.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "api/openai/openai.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "tmpl/outparse.h"
#include "tmpl/tmpl.h"

struct job;

struct choice {
  struct job *job;
  int index;
  outparse *p;
  buf raw;            /* everything generated, for a parser failure */
  buf content, reasoning;
  json_t *tool_calls; /* array, or NULL */
  json_t *logprobs;   /* chat: array of entries; legacy: {tokens,
                         token_logprobs, top_logprobs, text_offset}; or NULL */
  int64_t text_offset; /* legacy: bytes of text before the next token */
  bool finished;
  enum engine_finish finish;
  int parse_rc;
};

struct job {
  enum openai_kind kind;
  manager_model *mm;
  openai_gen *g;
  engine_req *h;
  http_stream *s;     /* streaming */
  char id[64];
  char *model;        /* label answered in "model" */
  char *echo;         /* legacy echo, or NULL */
  int64_t created;
  int n;
  struct choice *ch;
  int64_t n_prompt, n_cached, n_completion;
  int err_code;       /* first FINISH error */
  char *err_msg;
  int write_rc;       /* stream gone */
  openai_gen g_owned; /* streaming jobs own a copy of the parameters */
};

static _Atomic int g_n_streams; /* producer threads alive */

void openai_wait_streams(int timeout_ms) {
  for (int waited = 0; g_n_streams > 0 && waited < timeout_ms; waited += 10) usleep(10000);
}

/* ---- chunks ---------------------------------------------------------------- */

static json_t *chunk_new(struct job *j, int index, json_t *delta, const char *finish, json_t *logprobs) {
  json_t *choice;
  if (j->kind == OPENAI_KIND_CHAT)
    choice = json_pack("{s:i, s:o, s:o, s:o}", "index", index, "delta", delta ? delta : json_object(), "logprobs",
                       logprobs ? logprobs : json_null(), "finish_reason", finish ? json_string(finish) : json_null());
  else
    choice = json_pack("{s:i, s:o, s:o, s:o}", "index", index, "text", delta ? delta : json_string(""), "logprobs",
                       logprobs ? logprobs : json_null(), "finish_reason", finish ? json_string(finish) : json_null());
  json_t *c = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o]}", "id", j->id, "object",
                        j->kind == OPENAI_KIND_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                        (json_int_t)j->created, "model", j->model, "system_fingerprint", "parley", "choices", choice);
  if (c && j->g->include_usage) json_object_set_new(c, "usage", json_null());
  return c;
}

static void chunk_send(struct job *j, json_t *c) {
  if (!c) return;
  if (!j->write_rc) j->write_rc = openai_sse_json(j->s, c);
  json_decref(c);
}

static json_t *usage_json(const struct job *j) {
  return json_pack("{s:I, s:I, s:I, s:{s:I}, s:{s:i}}", "prompt_tokens", (json_int_t)j->n_prompt,
                   "completion_tokens", (json_int_t)j->n_completion, "total_tokens",
                   (json_int_t)(j->n_prompt + j->n_completion), "prompt_tokens_details", "cached_tokens",
                   (json_int_t)j->n_cached, "completion_tokens_details", "reasoning_tokens", 0);
}

/* ---- parser events --------------------------------------------------------- */

static void on_parse(void *ctx, const outparse_event *ev) {
  struct choice *c = ctx;
  struct job *j = c->job;
  bool stream = j->s != NULL;
  switch (ev->kind) {
    case OUTPARSE_TEXT:
    case OUTPARSE_REASONING: {
      bool r = ev->kind == OUTPARSE_REASONING;
      if (!stream) {
        buf_append(r ? &c->reasoning : &c->content, ev->text, ev->len);
        return;
      }
      if (!ev->len) return;
      if (j->kind == OPENAI_KIND_COMPLETION) {
        chunk_send(j, chunk_new(j, c->index, json_stringn(ev->text, ev->len), NULL, NULL));
        return;
      }
      json_t *d = json_pack("{s:s%}", r ? "reasoning_content" : "content", ev->text, ev->len);
      chunk_send(j, chunk_new(j, c->index, d, NULL, NULL));
      return;
    }
    case OUTPARSE_TOOL_CALL_BEGIN: {
      if (!c->tool_calls) c->tool_calls = json_array();
      json_t *call = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", ev->id, "type", "function", "function", "name",
                               ev->name, "arguments", "");
      if (c->tool_calls && call) json_array_append(c->tool_calls, call);
      if (stream && call) {
        json_t *d = json_pack("{s:[{s:i, s:s, s:s, s:{s:s, s:s}}]}", "tool_calls", "index", ev->tool_index, "id",
                              ev->id, "type", "function", "function", "name", ev->name, "arguments", "");
        chunk_send(j, chunk_new(j, c->index, d, NULL, NULL));
      }
      json_decref(call);
      return;
    }
    case OUTPARSE_TOOL_CALL_ARGS: {
      json_t *call = c->tool_calls ? json_array_get(c->tool_calls, (size_t)ev->tool_index) : NULL;
      json_t *fn = call ? json_object_get(call, "function") : NULL;
      const char *old = fn ? json_string_value(json_object_get(fn, "arguments")) : NULL;
      if (old) {
        buf b = BUF_INIT;
        buf_append_str(&b, old);
        buf_append(&b, ev->text, ev->len);
        json_object_set_new(fn, "arguments", json_stringn(b.data ? b.data : "", b.len));
        buf_free(&b);
      }
      if (stream && ev->len) {
        json_t *d = json_pack("{s:[{s:i, s:{s:s%}}]}", "tool_calls", "index", ev->tool_index, "function",
                              "arguments", ev->text, ev->len);
        chunk_send(j, chunk_new(j, c->index, d, NULL, NULL));
      }
      return;
    }
    case OUTPARSE_TOOL_CALL_END:
      return;
  }
}

/* Legacy completions' logprobs object for tokens r[0..n-1], starting at
 * byte offset *offset of the choice's text (advanced past them). */
static json_t *legacy_logprobs(const tok *t, const sample_result *r, size_t n, int32_t n_top, int64_t *offset) {
  json_t *o = json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
  if (!o) return NULL;
  buf piece = BUF_INIT;
  for (size_t i = 0; i < n; i++) {
    buf_reset(&piece);
    tok_decode_piece(t, r[i].token, 0, &piece);
    json_t *tokstr = json_stringn(piece.data ? piece.data : "", piece.len);
    json_array_append_new(json_object_get(o, "tokens"), tokstr ? tokstr : json_string(""));
    json_array_append_new(json_object_get(o, "token_logprobs"), json_real(isfinite(r[i].logprob) ? r[i].logprob : -9999.0));
    json_t *top = json_object();
    for (int32_t k = 0; top && k < n_top && k < r[i].n_top; k++) {
      buf alt = BUF_INIT;
      tok_decode_piece(t, r[i].top[k].token, 0, &alt);
      json_t *key = json_stringn(alt.data ? alt.data : "", alt.len); /* a valid UTF-8 key, or skipped */
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

/* Appends the arrays of src to those of dst (both legacy objects). */
static void legacy_logprobs_extend(json_t *dst, const json_t *src) {
  static const char *const keys[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
  for (size_t i = 0; i < 4; i++) json_array_extend(json_object_get(dst, keys[i]), json_object_get(src, keys[i]));
}

/* ---- the consumer ---------------------------------------------------------- */

static const char *choice_finish(const struct choice *c) {
  if (c->tool_calls && json_array_size(c->tool_calls) && c->finish == ENGINE_FINISH_STOP) return "tool_calls";
  return openai_finish_reason(c->finish);
}

static void on_event(struct job *j, engine_event *ev) {
  if (ev->type == ENGINE_EVENT_USAGE) {
    j->n_prompt = ev->n_prompt;
    j->n_cached = ev->n_cached;
    j->n_completion = ev->n_completion;
    return;
  }
  if (ev->index < 0 || ev->index >= j->n) return;
  struct choice *c = &j->ch[ev->index];
  if (ev->type == ENGINE_EVENT_TEXT_DELTA && j->kind == OPENAI_KIND_COMPLETION && ev->logprobs && ev->n_tokens) {
    json_t *lp = legacy_logprobs(j->mm->t, ev->logprobs, ev->n_tokens, j->g->top_logprobs, &c->text_offset);
    if (lp && j->s) chunk_send(j, chunk_new(j, c->index, NULL, NULL, json_incref(lp)));
    else if (lp && !c->logprobs) c->logprobs = json_incref(lp);
    else if (lp) legacy_logprobs_extend(c->logprobs, lp);
    json_decref(lp);
    if (ev->n_text) {
      buf_append(&c->raw, ev->text, ev->n_text);
      if (!c->parse_rc) c->parse_rc = outparse_feed(c->p, ev->text, ev->n_text);
    }
    return;
  }
  if (ev->type == ENGINE_EVENT_TEXT_DELTA) {
    json_t *lps = NULL;
    if (ev->logprobs && ev->n_tokens) {
      lps = json_array();
      for (size_t i = 0; lps && i < ev->n_tokens; i++)
        json_array_append_new(lps, openai_logprob_entry(j->mm->t, &ev->logprobs[i], j->g->top_logprobs));
    }
    if (lps && !j->s) {
      if (!c->logprobs) c->logprobs = json_array();
      json_array_extend(c->logprobs, lps);
    }
    if (ev->n_text) {
      buf_append(&c->raw, ev->text, ev->n_text);
      if (!c->parse_rc) c->parse_rc = outparse_feed(c->p, ev->text, ev->n_text);
    }
    if (lps && j->s && j->kind == OPENAI_KIND_CHAT)
      chunk_send(j, chunk_new(j, c->index, NULL, NULL, json_pack("{s:O, s:n}", "content", lps, "refusal")));
    json_decref(lps);
    return;
  }
  /* FINISH */
  if (!c->parse_rc) c->parse_rc = outparse_finish(c->p);
  if (c->parse_rc && !j->s) { /* fall back to the raw text */
    buf_reset(&c->content);
    buf_reset(&c->reasoning);
    if (c->raw.len) buf_append(&c->content, c->raw.data, c->raw.len);
    json_decref(c->tool_calls);
    c->tool_calls = NULL;
  }
  c->finished = true;
  c->finish = ev->finish;
  if (ev->finish == ENGINE_FINISH_ERROR && !j->err_code) {
    j->err_code = ev->err_code ? ev->err_code : ERR_INTERNAL;
    j->err_msg = str_dup(ev->err_msg ? ev->err_msg : err_message(j->err_code));
  }
  if (j->s && ev->finish != ENGINE_FINISH_ERROR) chunk_send(j, chunk_new(j, c->index, NULL, choice_finish(c), NULL));
}

static void consume(struct job *j) {
  engine_event ev;
  for (;;) {
    int rc = engine_req_next(j->h, j->s ? 100 : -1, &ev);
    if (rc == ERR_NOT_FOUND) break;
    if (rc == ERR_TIMEOUT) {
      if (j->s && (j->write_rc || http_stream_cancelled(j->s))) engine_req_cancel(j->h);
      continue;
    }
    if (rc) break;
    on_event(j, &ev);
    engine_event_free(&ev);
    if (j->s && j->write_rc) engine_req_cancel(j->h);
  }
}

static json_t *final_body(struct job *j) {
  json_t *choices = json_array();
  for (int i = 0; choices && i < j->n; i++) {
    struct choice *c = &j->ch[i];
    json_t *lp = !c->logprobs                      ? json_null()
                 : j->kind == OPENAI_KIND_COMPLETION ? json_incref(c->logprobs)
                                                     : json_pack("{s:O, s:n}", "content", c->logprobs, "refusal");
    json_t *item;
    if (j->kind == OPENAI_KIND_CHAT) {
      bool has_calls = c->tool_calls && json_array_size(c->tool_calls);
      json_t *msg = json_pack("{s:s, s:o, s:n}", "role", "assistant", "content",
                              c->content.len || !has_calls ? json_stringn(c->content.data ? c->content.data : "",
                                                                          c->content.len)
                                                           : json_null(),
                              "refusal");
      if (msg && c->reasoning.len)
        json_object_set_new(msg, "reasoning_content", json_stringn(c->reasoning.data, c->reasoning.len));
      if (msg && has_calls) json_object_set(msg, "tool_calls", c->tool_calls);
      item = json_pack("{s:i, s:o, s:o, s:s}", "index", i, "message", msg, "logprobs", lp, "finish_reason",
                       choice_finish(c));
    } else {
      buf t = BUF_INIT;
      if (j->echo) buf_append_str(&t, j->echo);
      if (c->content.len) buf_append(&t, c->content.data, c->content.len);
      item = json_pack("{s:i, s:s%, s:o, s:s}", "index", i, "text", t.data ? t.data : "", t.len, "logprobs", lp,
                       "finish_reason", choice_finish(c));
      buf_free(&t);
    }
    if (!item || json_array_append_new(choices, item)) {
      json_decref(choices);
      return NULL;
    }
  }
  if (!choices) return NULL;
  return json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:o}", "id", j->id, "object",
                   j->kind == OPENAI_KIND_CHAT ? "chat.completion" : "text_completion", "created",
                   (json_int_t)j->created, "model", j->model, "system_fingerprint", "parley", "choices", choices,
                   "usage", usage_json(j));
}

static void job_free(struct job *j) {
  if (!j) return;
  if (j->h) engine_req_free(j->h);
  for (int i = 0; j->ch && i < j->n; i++) {
    outparse_free(j->ch[i].p);
    buf_free(&j->ch[i].raw);
    buf_free(&j->ch[i].content);
    buf_free(&j->ch[i].reasoning);
    json_decref(j->ch[i].tool_calls);
    json_decref(j->ch[i].logprobs);
  }
  free(j->ch);
  free(j->model);
  free(j->echo);
  free(j->err_msg);
  openai_gen_free(&j->g_owned);
  free(j);
}

static void *stream_main(void *arg) {
  struct job *j = arg;
  if (j->kind == OPENAI_KIND_CHAT)
    for (int i = 0; i < j->n; i++)
      chunk_send(j, chunk_new(j, i, json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL, NULL));
  else if (j->echo)
    for (int i = 0; i < j->n; i++) chunk_send(j, chunk_new(j, i, json_string(j->echo), NULL, NULL));
  consume(j);
  for (int i = 0; i < j->n; i++)
    if (j->ch[i].finish == ENGINE_FINISH_CANCELLED) {
      LOG_INFO("openai", "stream %s cancelled (client gone) after %lld completion tokens", j->id,
               (long long)j->n_completion);
      break;
    }
  if (j->err_code) {
    json_t *e = json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", j->err_msg ? j->err_msg : "error", "type",
                          api_status_for(j->err_code) < 500 ? "invalid_request_error" : "server_error", "param",
                          "code");
    chunk_send(j, e);
  } else {
    if (j->g->include_usage) {
      json_t *u = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[], s:o}", "id", j->id, "object",
                            j->kind == OPENAI_KIND_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                            (json_int_t)j->created, "model", j->model, "system_fingerprint", "parley", "choices",
                            "usage", usage_json(j));
      chunk_send(j, u);
    }
    if (!j->write_rc) j->write_rc = http_stream_sse(j->s, NULL, "[DONE]", 6);
  }
  http_stream_close(j->s);
  job_free(j);
  g_n_streams--;
  return NULL;
}

static int submit_error(http_req *req, int rc) {
  int status = rc == ERR_OVERLOADED ? 429 : rc == ERR_UNAVAILABLE ? 503 : 0;
  api_error(req, status, rc, err_detail(), NULL);
  return rc;
}

void openai_generate(http_req *req, manager_model *mm, const char *model_label, openai_gen *g, const tok_ids *ids,
                     enum openai_kind kind, const outparse_config *parse, const char *echo) {
  if (!mm->eng) {
    api_error(req, 400, ERR_UNSUPPORTED, "this model does not generate text (an embedding model)", "model");
    return;
  }
  /* A prompt that cannot fit is refused before a stream opens, so streaming
   * clients get the same 400 as the others. */
  int64_t n_ctx = engine_n_ctx(mm->eng);
  if ((int64_t)ids->n >= n_ctx) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "the prompt is %zu tokens, but the model's context holds %lld (the completion needs at least one more)",
             ids->n, (long long)n_ctx);
    api_error(req, 400, ERR_CONTEXT, msg, kind == OPENAI_KIND_CHAT ? "messages" : "prompt");
    return;
  }
  struct job *j = calloc(1, sizeof *j);
  if (!j) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  j->kind = kind;
  j->mm = mm;
  j->g = g;
  j->n = g->er.n > 0 ? g->er.n : 1;
  j->created = time_wall_s();
  j->model = str_dup(model_label ? model_label : mm->name);
  j->echo = echo ? str_dup(echo) : NULL;
  openai_make_id(j->id, sizeof j->id, kind == OPENAI_KIND_CHAT ? "chatcmpl-" : "cmpl-");
  j->ch = calloc((size_t)j->n, sizeof *j->ch);
  if (!j->ch || !j->model || (echo && !j->echo)) {
    job_free(j);
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  outparse_config plain = {.format = OUTPARSE_PLAIN};
  for (int i = 0; i < j->n; i++) {
    j->ch[i].job = j;
    j->ch[i].index = i;
    j->ch[i].text_offset = echo ? (int64_t)strlen(echo) : 0;
    if (outparse_new(parse ? parse : &plain, on_parse, &j->ch[i], &j->ch[i].p)) {
      api_error_last(req, ERR_INTERNAL, NULL);
      job_free(j);
      return;
    }
  }
  g->er.prompt = ids->ids;
  g->er.n_prompt = ids->n;
  int rc = engine_submit(mm->eng, &g->er, &j->h);
  if (rc) {
    submit_error(req, rc);
    job_free(j);
    return;
  }
  if (!g->stream) {
    consume(j);
    if (j->err_code) {
      api_error(req, 0, j->err_code, j->err_msg, j->err_code == ERR_CONTEXT ? "messages" : NULL);
    } else {
      json_t *body = final_body(j);
      if (body) api_respond_json(req, 200, body);
      else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
      json_decref(body);
    }
    job_free(j);
    return;
  }
  /* The stream's producer owns the job and a copy of the parameters. */
  j->g_owned = *g;
  memset(g, 0, sizeof *g);
  j->g = &j->g_owned;
  j->s = http_stream_open(req, 200, NULL, HTTP_STREAM_SSE);
  if (!j->s) {
    api_error(req, 500, ERR_INTERNAL, "cannot open the event stream", NULL);
    job_free(j);
    return;
  }
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  g_n_streams++;
  rc = pthread_create(&t, &attr, stream_main, j);
  pthread_attr_destroy(&attr);
  if (rc) {
    g_n_streams--;
    LOG_WARN("openai", "cannot start a stream thread: %s", strerror(rc));
    engine_req_cancel(j->h);
    http_stream_close(j->s);
    job_free(j);
  }
}

/* ---- the chat request ---------------------------------------------------- */

static int bad(http_req *req, int code, const char *param, const char *fmt, const char *a) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a);
  api_error(req, 400, code, msg, param);
  return code;
}

/* Checks messages and rewrites them in place (body is the handler's copy). */
static int normalise_messages(http_req *req, json_t *body) {
  json_t *msgs = json_object_get(body, "messages");
  if (!msgs) return bad(req, ERR_INVALID, "messages", "messages: required field is missing%s", "");
  if (!json_is_array(msgs))
    return bad(req, ERR_TYPE, "messages", "messages: expected array, got %s", api_json_type_name(msgs));
  if (json_array_size(msgs) == 0)
    return bad(req, ERR_INVALID, "messages", "messages: must hold at least one message%s", "");
  static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", "function"};
  size_t i;
  json_t *m;
  json_array_foreach(msgs, i, m) {
    char path[64];
    snprintf(path, sizeof path, "messages[%zu]", i);
    if (!json_is_object(m)) return bad(req, ERR_TYPE, path, "%s: expected object", path);
    char rpath[80];
    snprintf(rpath, sizeof rpath, "%s.role", path);
    const char *role = json_string_value(json_object_get(m, "role"));
    bool ok = false;
    for (size_t r = 0; role && r < ARRAY_LEN(roles); r++) ok |= strcmp(role, roles[r]) == 0;
    if (!ok)
      return bad(req, ERR_INVALID, rpath, "%s: expected one of system, developer, user, assistant, tool", rpath);
    if (strcmp(role, "developer") == 0) json_object_set_new(m, "role", json_string("system"));
    char cpath[80];
    snprintf(cpath, sizeof cpath, "%s.content", path);
    json_t *content = json_object_get(m, "content");
    if (!content || json_is_null(content)) {
      if (strcmp(role, "assistant") != 0)
        return bad(req, ERR_INVALID, cpath, "%s: required for this role", cpath);
      continue;
    }
    if (json_is_string(content)) continue;
    if (!json_is_array(content))
      return bad(req, ERR_TYPE, cpath, "%s: expected string or array of content parts", cpath);
    buf text = BUF_INIT;
    size_t k;
    json_t *part;
    json_array_foreach(content, k, part) {
      char ppath[112];
      snprintf(ppath, sizeof ppath, "%s[%zu]", cpath, k);
      const char *type = json_string_value(json_object_get(part, "type"));
      const json_t *t = json_object_get(part, "text");
      if (!type || strcmp(type, "text") != 0 || !json_is_string(t)) {
        buf_free(&text);
        if (type && strcmp(type, "text") != 0) {
          char tpath[128];
          snprintf(tpath, sizeof tpath, "%s.type", ppath);
          return bad(req, ERR_UNSUPPORTED, tpath, "content part type '%s' is not supported by this model", type);
        }
        return bad(req, ERR_INVALID, ppath, "%s: expected {\"type\":\"text\",\"text\":string}", ppath);
      }
      if (k) buf_append_byte(&text, '\n');
      buf_append(&text, json_string_value(t), json_string_length(t));
    }
    json_object_set_new(m, "content", json_stringn(text.data ? text.data : "", text.len));
    buf_free(&text);
  }
  const json_t *tools = json_object_get(body, "tools");
  if (tools && !json_is_null(tools) && !json_is_array(tools))
    return bad(req, ERR_TYPE, "tools", "tools: expected array, got %s", api_json_type_name(tools));
  json_t *tool;
  json_array_foreach(tools, i, tool) {
    char path[64];
    snprintf(path, sizeof path, "tools[%zu].function.name", i);
    const json_t *fn = json_object_get(tool, "function");
    if (!json_is_string(json_object_get(fn, "name")))
      return bad(req, ERR_INVALID, path, "%s: required string is missing", path);
  }
  if (!json_object_get(body, "add_generation_prompt")) json_object_set_new(body, "add_generation_prompt", json_true());
  return 0;
}

static enum outparse_format parser_format(family_parser p) {
  switch (p) {
    case FAMILY_PARSER_HERMES: return OUTPARSE_HERMES;
    case FAMILY_PARSER_LLAMA3: return OUTPARSE_LLAMA3;
    case FAMILY_PARSER_MISTRAL: return OUTPARSE_MISTRAL;
    case FAMILY_PARSER_DEEPSEEK: return OUTPARSE_DEEPSEEK;
    case FAMILY_PARSER_HARMONY: return OUTPARSE_HARMONY;
    case FAMILY_PARSER_GRANITE: return OUTPARSE_GRANITE;
    case FAMILY_PARSER_FUNCTIONARY: return OUTPARSE_FUNCTIONARY_V31;
    default: return OUTPARSE_PLAIN;
  }
}

void openai_chat_completions(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  openai_gen g;
  memset(&g, 0, sizeof g);
  tok_ids ids = TOK_IDS_INIT;
  buf prompt = BUF_INIT;
  tmpl_heap *h = NULL;
  const char *model_name = NULL;
  int rc = api_json_str(body, "", "model", false, &model_name);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "model");
    goto done;
  }
  if (normalise_messages(req, body)) goto done;
  manager_model *mm = NULL;
  if ((rc = manager_get(oc->mgr, model_name, &mm))) {
    openai_error_manager(req, rc);
    goto done;
  }
  if (openai_gen_parse(req, body, true, mm, &g)) goto done;
  if (!mm->chat) {
    api_error(req, 400, ERR_UNSUPPORTED, "this model has no chat template (use /v1/completions or /v1/embeddings)",
              "model");
    goto done;
  }
  const json_t *tools = json_object_get(body, "tools");
  bool has_tools = json_is_array(tools) && json_array_size(tools) > 0;
  const char *choice = json_string_value(json_object_get(body, "tool_choice"));
  bool tools_on = has_tools && !(choice && strcmp(choice, "none") == 0);

  h = tmpl_heap_new();
  tmpl_value globals;
  if (!h || (rc = tmpl_globals_from_request(h, body, mm->bos, mm->eos, &globals))) {
    api_error(req, 400, rc ? rc : ERR_NOMEM, rc ? err_detail() : "out of memory", "messages");
    goto done;
  }
  const tmpl *t = has_tools && mm->chat_tools ? mm->chat_tools : mm->chat;
  if ((rc = tmpl_render(t, globals, &prompt))) {
    api_error(req, 400, ERR_INVALID, err_detail(), "messages");
    goto done;
  }
  if ((rc = openai_tokenize_prompt(mm->t, prompt.data ? prompt.data : "", prompt.len, true, &ids)) || !ids.n) {
    api_error(req, 400, rc ? rc : ERR_INVALID, rc ? err_detail() : "the prompt is empty", "messages");
    goto done;
  }
  bool thinking = true;
  const json_t *kw = json_object_get(body, "chat_template_kwargs");
  if (json_is_false(json_object_get(kw, "enable_thinking"))) thinking = false;
  outparse_config pc = {
      .format = parser_format(mm->fam.parser),
      .think_open = mm->fam.think_open,
      .think_close = mm->fam.think_close,
      .starts_in_reasoning = mm->fam.template_opens_think && thinking,
      .tools_enabled = tools_on,
  };
  if (!pc.think_open || !pc.think_close) pc.think_open = pc.think_close = NULL;
  openai_generate(req, mm, model_name, &g, &ids, OPENAI_KIND_CHAT, &pc, NULL);
done:
  if (h) tmpl_heap_free(h);
  buf_free(&prompt);
  tok_ids_free(&ids);
  openai_gen_free(&g);
  json_decref(body);
}
