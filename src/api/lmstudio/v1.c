/*
 * v1.c - POST /api/v1/chat (and /lmstudio/v1/chat): LM Studio's stateful
 * chat (spec section 2.1/2.2).
 *
 * Request: model, input (a string, or items {"type":"message"|"text",
 * "content"} - the schema and the doc example disagree, both are taken -
 * and {"type":"image","data_url"}), system_prompt, stream, temperature,
 * top_p, top_k, min_p, repeat_penalty, max_output_tokens, reasoning
 * (off|low|medium|high|on), context_length, store (default true),
 * previous_response_id ("resp_..."), integrations (MCP: refused with
 * not_implemented - no tool runs inside parley).
 *
 * State: every stored answer is a row of the store's responses table
 * (id "resp_<hex>", body = the answer) whose items are the whole
 * conversation up to it as canonical messages (item ids "lms_<n>": kind
 * "input" for what was sent, "output" for the assistant's turn). So
 * continuing from any earlier response id branches the conversation there,
 * as LM Studio documents, and one lookup rebuilds the history. The rows'
 * previous_response_id column stays empty (each row is whole in itself),
 * so the OpenAI Responses chain walk never replays a history twice; rows
 * without model_instance_id in their body (OpenAI responses) are not
 * continued here.
 *
 * Answer: {model_instance_id, output:[{type:"reasoning",content},
 * {type:"message",content}], stats:{input_tokens, total_output_tokens,
 * reasoning_output_tokens, tokens_per_second, time_to_first_token_seconds,
 * model_load_time_seconds (only when this request loaded the model)},
 * response_id (only when stored)}.
 *
 * Streaming: named SSE events whose data repeats the name in "type", in this
 * order: chat.start, [model_load.start, model_load.progress, model_load.end],
 * prompt_processing.start, prompt_processing.progress, prompt_processing.end,
 * then per block reasoning.start/delta.../end and message.start/delta.../end,
 * [error], chat.end {result}. The load and prompt events are reported when
 * the work is done (the engine does not report progress), with progress 1.
 * Validation errors of a request that asked to stream are sent the same way:
 * chat.start, error, chat.end (spec check 20 allows either form; this is
 * the one a streaming client parses).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/lmstudio/lmstudio.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

/* An error found before generation: answered as JSON or as SSE events. */
struct v1_err {
  int status;
  const char *type, *code, *param;
  char msg[600];
};

static int fail(struct v1_err *e, int status, const char *type, const char *code, const char *param,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int fail(struct v1_err *e, int status, const char *type, const char *code, const char *param,
                const char *fmt, ...) {
  e->status = status;
  e->type = type;
  e->code = code;
  e->param = param;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return ERR_INVALID;
}

/* ---- the renderer -------------------------------------------------------------- */

struct v1 {
  lmstudio_ctx *lc;
  char *instance;        /* model_instance_id */
  char *key;           /* canonical model name (stored) */
  json_t *messages;      /* the conversation sent (canonical), owned */
  bool stream, store;
  bool loaded;           /* this request loaded the model */
  double load_s;
  bool pp_done, in_reasoning, in_message;
};

static void v1_free(void *ctx) {
  struct v1 *o = ctx;
  if (!o) return;
  free(o->instance);
  free(o->key);
  json_decref(o->messages);
  free(o);
}

/* Writes one named event; data gets "type": name first. Steals data. */
static int ev(gen_job *j, const char *name, json_t *data) {
  json_t *d = json_pack("{s:s}", "type", name);
  if (!d || (data && json_object_update(d, data))) {
    json_decref(d);
    json_decref(data);
    return ERR_NOMEM;
  }
  json_decref(data);
  int rc = gen_job_write_sse(j, name, d);
  json_decref(d);
  return rc;
}

static int prompt_done(struct v1 *o, gen_job *j) {
  if (o->pp_done) return 0;
  o->pp_done = true;
  int rc = ev(j, "prompt_processing.progress", json_pack("{s:f}", "progress", 1.0));
  return rc ? rc : ev(j, "prompt_processing.end", NULL);
}

static int close_blocks(struct v1 *o, gen_job *j) {
  int rc = 0;
  if (o->in_reasoning) rc = ev(j, "reasoning.end", NULL);
  if (!rc && o->in_message) rc = ev(j, "message.end", NULL);
  o->in_reasoning = o->in_message = false;
  return rc;
}

static int v1_start(void *ctx, gen_job *j) {
  struct v1 *o = ctx;
  int rc = ev(j, "chat.start", json_pack("{s:s}", "model_instance_id", o->instance));
  if (!rc && o->loaded) {
    rc = ev(j, "model_load.start", json_pack("{s:s}", "model_instance_id", o->instance));
    if (!rc) rc = ev(j, "model_load.progress", json_pack("{s:s, s:f}", "model_instance_id", o->instance, "progress", 1.0));
    if (!rc)
      rc = ev(j, "model_load.end", json_pack("{s:s, s:f}", "model_instance_id", o->instance, "load_time_seconds", o->load_s));
  }
  return rc ? rc : ev(j, "prompt_processing.start", NULL);
}

static int v1_text(void *ctx, gen_job *j, int choice, bool reasoning, const char *text, size_t len) {
  struct v1 *o = ctx;
  (void)choice;
  int rc = prompt_done(o, j);
  if (!rc && reasoning && o->in_message) rc = close_blocks(o, j);
  if (!rc && !reasoning && o->in_reasoning) rc = close_blocks(o, j);
  bool *open = reasoning ? &o->in_reasoning : &o->in_message;
  if (!rc && !*open) {
    rc = ev(j, reasoning ? "reasoning.start" : "message.start", NULL);
    *open = true;
  }
  return rc ? rc : ev(j, reasoning ? "reasoning.delta" : "message.delta", json_pack("{s:s%}", "content", text, len));
}

static int v1_choice_end(void *ctx, gen_job *j, const gen_choice *c) {
  (void)c;
  int rc = prompt_done(ctx, j);
  return rc ? rc : close_blocks(ctx, j);
}

/* Tokens of the reasoning text (the engine counts all completion tokens
 * together; re-encoding the text gives the reasoning share). */
static int64_t reasoning_tokens(gen_job *j, const gen_choice *c) {
  if (!c->reasoning.len) return 0;
  tok_ids ids = TOK_IDS_INIT;
  int64_t n = tok_encode(gen_job_model(j)->t, c->reasoning.data, c->reasoning.len, 0, &ids) ? 0 : (int64_t)ids.n;
  tok_ids_free(&ids);
  return n;
}

static json_t *result_json(struct v1 *o, gen_job *j, const gen_result *r, const char *resp_id) {
  const gen_choice *c = r->n ? &r->ch[0] : NULL;
  json_t *out = json_array();
  if (out && c && c->reasoning.len)
    json_array_append_new(out, json_pack("{s:s, s:s%}", "type", "reasoning", "content", c->reasoning.data, c->reasoning.len));
  if (out && c)
    json_array_append_new(out, json_pack("{s:s, s:s%}", "type", "message", "content", c->content.data ? c->content.data : "",
                                         c->content.len));
  double gen, tps;
  lms_gen_timing(r, &gen, &tps);
  json_t *stats = json_pack("{s:I, s:I, s:I, s:f, s:f}", "input_tokens", (json_int_t)r->n_prompt,
                            "total_output_tokens", (json_int_t)r->n_completion, "reasoning_output_tokens",
                            (json_int_t)(c ? reasoning_tokens(j, c) : 0), "tokens_per_second",
                            tps, "time_to_first_token_seconds",
                            lms_seconds(r->t_start_ns, r->t_first_ns));
  if (stats && o->loaded) json_object_set_new(stats, "model_load_time_seconds", json_real(o->load_s));
  json_t *res = json_pack("{s:s, s:o, s:o}", "model_instance_id", o->instance, "output", out ? out : json_array(),
                          "stats", stats ? stats : json_object());
  if (res && resp_id) json_object_set_new(res, "response_id", json_string(resp_id));
  return res;
}

/* Keeps the conversation (sent messages + the answer) as a response row.
 * Returns 0, or an error (logged; the answer then has no response_id). */
static int save(struct v1 *o, const gen_result *r, const json_t *result, const char *id) {
  store *st = o->lc->st;
  if (!st) return err_set(ERR_UNAVAILABLE, "no store");
  const gen_choice *c = &r->ch[0];
  json_t *answer = json_pack("{s:s, s:s%}", "role", "assistant", "content", c->content.data ? c->content.data : "",
                             c->content.len);
  if (answer && c->reasoning.len)
    json_object_set_new(answer, "reasoning_content", json_stringn(c->reasoning.data, c->reasoning.len));
  char *body = json_dumps(result, JSON_COMPACT | JSON_PRESERVE_ORDER);
  size_t n = json_array_size(o->messages) + 1;
  store_item *items = calloc(n, sizeof *items);
  int rc = answer && body && items ? 0 : err_set(ERR_NOMEM, "out of memory");
  int64_t now = time_wall_s();
  for (size_t i = 0; !rc && i < n; i++) {
    char iid[32];
    snprintf(iid, sizeof iid, "lms_%zu", i);
    items[i].item_id = str_dup(iid);
    items[i].kind = i + 1 < n ? "input" : "output";
    items[i].body = json_dumps(i + 1 < n ? json_array_get(o->messages, i) : answer, JSON_COMPACT | JSON_PRESERVE_ORDER);
    items[i].created_at = now;
    if (!items[i].item_id || !items[i].body) rc = err_set(ERR_NOMEM, "out of memory");
  }
  if (!rc) {
    store_response row = {.id = (char *)id, .created_at = now, .status = "completed", .model = o->key,
                          .previous_response_id = NULL, .body = body, .stored = true};
    rc = store_response_put(st, &row);
    if (!rc && (rc = store_response_items_append(st, id, items, n))) store_response_delete(st, id);
  }
  for (size_t i = 0; items && i < n; i++) {
    free(items[i].item_id);
    free(items[i].body);
  }
  free(items);
  free(body);
  json_decref(answer);
  return rc;
}

static void v1_end(void *ctx, gen_job *j, const gen_result *r) {
  struct v1 *o = ctx;
  char id[64] = "";
  bool ok = !r->err_code && r->n && r->ch[0].finish != ENGINE_FINISH_CANCELLED;
  if (ok && o->store && id_make(id, sizeof id, "resp_", 16)) id[0] = '\0';
  json_t *res = result_json(o, j, r, id[0] ? id : NULL);
  if (res && id[0] && save(o, r, res, id)) {
    LOG_WARN("lmstudio", "chat %s not stored: %s", id, err_detail());
    json_object_del(res, "response_id");
  }
  if (!o->stream) {
    http_req *req = gen_job_req(j);
    if (r->err_code) {
      int status = api_status_for(r->err_code);
      lms_error(req, status, status < 500 ? "invalid_request" : "internal_error", NULL,
                r->err_code == ERR_CONTEXT ? "input" : NULL, "%s", r->err_msg ? r->err_msg : "generation failed");
    } else if (res) {
      api_respond_json(req, 200, res);
    } else {
      api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    }
    json_decref(res);
    return;
  }
  prompt_done(o, j);
  close_blocks(o, j);
  if (r->err_code) {
    int status = api_status_for(r->err_code);
    ev(j, "error", json_pack("{s:o}", "error", lms_error_object(status < 500 ? "invalid_request" : "internal_error",
                                                                NULL, NULL, r->err_msg ? r->err_msg : "generation failed")));
  }
  ev(j, "chat.end", json_pack("{s:o}", "result", res ? res : json_object()));
}

static const gen_sink v1_sink = {
    .on_start = v1_start,
    .on_text = v1_text,
    .on_choice_end = v1_choice_end,
    .on_end = v1_end,
    .free = v1_free,
};

/* ---- request ------------------------------------------------------------------------ */

/* The parsed request (borrowing from the body). */
struct v1_req {
  const char *key, *system, *prev, *reasoning;
  const json_t *input;
  int64_t n_ctx;          /* context_length, 0 when not given */
  bool stream, store;
  gen_params p;
};

static int num(const json_t *body, const char *key, double lo, double hi, float *out, struct v1_err *e) {
  const json_t *v = json_object_get(body, key);
  if (!v || json_is_null(v)) return 0;
  if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi))
    return fail(e, 400, "invalid_request", "invalid_value", key, "%s: expected a number from %g to %g", key, lo, hi);
  *out = (float)json_number_value(v);
  return 0;
}

static int integer(const json_t *body, const char *key, long long lo, long long hi, long long *out,
                   struct v1_err *e) {
  const json_t *v = json_object_get(body, key);
  if (!v || json_is_null(v)) return 0;
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
    return fail(e, 400, "invalid_request", "invalid_value", key, "%s: expected an integer from %lld to %lld", key, lo, hi);
  *out = json_integer_value(v);
  return 0;
}

static int str(const json_t *body, const char *key, bool required, const char **out, struct v1_err *e) {
  const json_t *v = json_object_get(body, key);
  if (!v || json_is_null(v)) {
    if (required)
      return fail(e, 400, "invalid_request", "missing_required_parameter", key, "\"%s\" is required", key);
    return 0;
  }
  if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
    return fail(e, 400, "invalid_request", "invalid_type", key, "%s: expected string, got %s", key,
                api_json_type_name(v));
  *out = json_string_value(v);
  return 0;
}

/* Every field but input and the model-dependent checks. */
static int parse(const json_t *body, struct v1_req *q, struct v1_err *e) {
  gen_params_init(&q->p);
  q->store = true;
  const json_t *v;
  if ((v = json_object_get(body, "stream")) && !json_is_null(v)) {
    if (!json_is_boolean(v)) return fail(e, 400, "invalid_request", "invalid_type", "stream", "stream: expected boolean");
    q->stream = json_is_true(v);
  }
  if ((v = json_object_get(body, "store")) && !json_is_null(v)) {
    if (!json_is_boolean(v)) return fail(e, 400, "invalid_request", "invalid_type", "store", "store: expected boolean");
    q->store = json_is_true(v);
  }
  if (str(body, "model", true, &q->key, e) || str(body, "system_prompt", false, &q->system, e) ||
      str(body, "previous_response_id", false, &q->prev, e) || str(body, "reasoning", false, &q->reasoning, e))
    return ERR_INVALID;
  q->input = json_object_get(body, "input");
  if (!q->input || json_is_null(q->input))
    return fail(e, 400, "invalid_request", "missing_required_parameter", "input", "\"input\" is required");
  if (q->prev && !str_starts_with(q->prev, "resp_"))
    return fail(e, 400, "invalid_request", "invalid_value", "previous_response_id",
                "previous_response_id: '%.200s' is not a response id (they start with resp_)", q->prev);
  static const char *const levels[] = {"off", "low", "medium", "high", "on"};
  bool known = !q->reasoning;
  for (size_t i = 0; q->reasoning && i < ARRAY_LEN(levels); i++) known |= strcmp(q->reasoning, levels[i]) == 0;
  if (!known)
    return fail(e, 400, "invalid_request", "invalid_value", "reasoning",
                "reasoning: expected one of off, low, medium, high, on");
  sample_params *s = &q->p.er.sample;
  long long top_k = 0, max_out = 0, ctx_len = 0;
  if (num(body, "temperature", 0, 2, &s->temperature, e) || num(body, "top_p", 0, 1, &s->top_p, e) ||
      num(body, "min_p", 0, 1, &s->min_p, e) || num(body, "repeat_penalty", 0.01, 10, &s->repeat_penalty, e) ||
      integer(body, "top_k", 0, 100000, &top_k, e) || integer(body, "max_output_tokens", 1, INT32_MAX, &max_out, e) ||
      integer(body, "context_length", 1, INT32_MAX, &ctx_len, e))
    return ERR_INVALID;
  if (s->top_p <= 0) s->top_p = 1e-6f;
  if (s->repeat_penalty != 1.0f) s->penalty_last_n = 64;
  s->top_k = (int32_t)top_k;
  rand_bytes(&s->seed, sizeof s->seed);
  q->p.er.max_tokens = max_out;
  q->n_ctx = ctx_len;
  const json_t *integ = json_object_get(body, "integrations");
  if (integ && !json_is_null(integ)) {
    if (!json_is_array(integ))
      return fail(e, 400, "invalid_request", "invalid_type", "integrations", "integrations: expected array");
    if (json_array_size(integ))
      return fail(e, 501, "not_implemented", "not_implemented", "integrations",
                  "integrations: MCP plugins and servers are not supported by this server (no tool runs in parley)");
  }
  return 0;
}

/* The user turn from input: a string, or items whose text is joined. */
static int user_message(const json_t *input, json_t **out, struct v1_err *e) {
  *out = NULL;
  if (json_is_string(input)) {
    *out = json_pack("{s:s, s:O}", "role", "user", "content", input);
    return *out ? 0 : fail(e, 500, "internal_error", NULL, NULL, "out of memory");
  }
  if (!json_is_array(input) || !json_array_size(input))
    return fail(e, 400, "invalid_request", "invalid_type", "input", "input: expected a string or a non-empty array");
  buf text = BUF_INIT;
  size_t i;
  const json_t *it;
  char path[64];
  json_array_foreach(input, i, it) {
    const char *type = json_string_value(json_object_get(it, "type"));
    const json_t *content = json_object_get(it, "content");
    snprintf(path, sizeof path, "input[%zu]", i);
    if (type && strcmp(type, "image") == 0) {
      buf_free(&text);
      fail(e, 400, "invalid_request", "unsupported_content", NULL, "%s: this model cannot read images (no vision support)",
           path);
      e->param = "input";
      return ERR_UNSUPPORTED;
    }
    if (!type || (strcmp(type, "message") != 0 && strcmp(type, "text") != 0) || !json_is_string(content)) {
      buf_free(&text);
      fail(e, 400, "invalid_request", "invalid_value", NULL,
           "%s: expected {\"type\":\"message\"|\"text\",\"content\":string} or {\"type\":\"image\",\"data_url\":string}", path);
      e->param = "input";
      return ERR_INVALID;
    }
    if (text.len) buf_append_byte(&text, '\n');
    buf_append(&text, json_string_value(content), json_string_length(content));
  }
  *out = json_pack("{s:s, s:s%}", "role", "user", "content", text.data ? text.data : "", text.len);
  buf_free(&text);
  return *out ? 0 : fail(e, 500, "internal_error", NULL, NULL, "out of memory");
}

/* The conversation: system prompt, the stored history of prev, the turn. */
static int conversation(lmstudio_ctx *lc, const struct v1_req *q, json_t **out, struct v1_err *e) {
  json_t *msgs = json_array();
  *out = NULL;
  if (!msgs) return fail(e, 500, "internal_error", NULL, NULL, "out of memory");
  if (q->system) json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content", q->system));
  if (q->prev) {
    store_response row;
    store_item_list items = {0};
    store_page page = {.limit = STORE_PAGE_MAX};
    int rc = lc->st ? store_response_get(lc->st, q->prev, &row) : ERR_NOT_FOUND;
    if (rc) {
      json_decref(msgs);
      return fail(e, rc == ERR_NOT_FOUND ? 404 : 500, rc == ERR_NOT_FOUND ? "invalid_request" : "internal_error",
                  "response_not_found", "previous_response_id", "previous_response_id: no stored response '%.200s'",
                  q->prev);
    }
    json_t *rb = json_loads(row.body, JSON_ALLOW_NUL, NULL);
    bool ours = json_object_get(rb, "model_instance_id") != NULL;
    json_decref(rb);
    store_response_free(&row);
    if (!ours) {
      json_decref(msgs);
      return fail(e, 404, "invalid_request", "response_not_found", "previous_response_id",
                  "previous_response_id: '%.200s' is not a response of /api/v1/chat", q->prev);
    }
    if ((rc = store_response_items_list(lc->st, q->prev, NULL, &page, &items))) {
      json_decref(msgs);
      return fail(e, 500, "internal_error", NULL, NULL, "reading response %.200s: %s", q->prev, err_detail());
    }
    for (size_t i = 0; i < items.n_items; i++) {
      if (!items.items[i].item_id || !str_starts_with(items.items[i].item_id, "lms_")) continue; /* not ours */
      json_t *m = json_loads(items.items[i].body, JSON_ALLOW_NUL, NULL);
      const char *role = json_string_value(json_object_get(m, "role"));
      if (!role || (q->system && strcmp(role, "system") == 0)) json_decref(m); /* a new system prompt wins */
      else json_array_append_new(msgs, m);
    }
    store_item_list_free(&items);
  }
  json_t *user = NULL;
  if (user_message(q->input, &user, e)) {
    json_decref(msgs);
    return ERR_INVALID;
  }
  json_array_append_new(msgs, user);
  *out = msgs;
  return 0;
}

/* Answers e as JSON, or (stream) as chat.start, error, chat.end. */
static void answer_error(http_req *req, const struct v1_err *e, bool stream, const char *key) {
  if (!stream) {
    lms_error(req, e->status, e->type, e->code, e->param, "%s", e->msg);
    return;
  }
  http_stream *s = http_stream_open(req, 200, NULL, HTTP_STREAM_SSE);
  if (!s) return;
  json_t *evs[3] = {
      json_pack("{s:s, s:o}", "type", "chat.start", "model_instance_id", key ? json_string(key) : json_null()),
      json_pack("{s:s, s:o}", "type", "error", "error", lms_error_object(e->type, e->code, e->param, e->msg)),
      json_pack("{s:s, s:{s:o, s:[], s:{s:i, s:i, s:i, s:f, s:f}}}", "type", "chat.end", "result", "model_instance_id",
                key ? json_string(key) : json_null(), "output", "stats", "input_tokens", 0, "total_output_tokens",
                0, "reasoning_output_tokens", 0, "tokens_per_second", 0.0, "time_to_first_token_seconds", 0.0)};
  static const char *const names[3] = {"chat.start", "error", "chat.end"};
  for (int i = 0; i < 3; i++) {
    char *text = evs[i] ? json_dumps(evs[i], JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (text) http_stream_sse(s, names[i], text, strlen(text));
    free(text);
    json_decref(evs[i]);
  }
  http_stream_close(s);
}

void lms_v1_chat(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  struct v1_req q;
  memset(&q, 0, sizeof q);
  struct v1_err e = {0};
  json_t *msgs = NULL;
  manager_model *mm = NULL;
  tok_ids ids = TOK_IDS_INIT;
  struct v1 *o = NULL;
  if (parse(body, &q, &e) || conversation(lc, &q, &msgs, &e)) goto bad;
  int n_before = manager_n_loaded(lc->mgr);
  uint64_t t0 = time_mono_ns();
  /* context_length applies when this request loads the model; a loaded
   * instance is used as it is. */
  char canon[512];
  int rc;
  if (q.n_ctx > 0 && registry_resolve(lc->reg, q.key, canon, sizeof canon) == 0 && lms_loaded_ctx(lc, canon) == 0) {
    manager_opts mo = {.n_ctx = q.n_ctx};
    rc = manager_load(lc->mgr, q.key, &mo, &mm);
  } else {
    rc = manager_get(lc->mgr, q.key, &mm);
  }
  double load_s = lms_seconds(t0, time_mono_ns());
  if (rc == ERR_NOT_FOUND) {
    fail(&e, 404, "model_not_found", "model_not_found", "model", "%s", err_detail());
    goto bad;
  }
  if (rc) {
    fail(&e, api_status_for(rc), rc == ERR_UNSUPPORTED ? "invalid_request" : "internal_error", NULL, "model", "%s",
         err_detail());
    if (rc == ERR_UNSUPPORTED) e.status = 400;
    goto bad;
  }
  if (!mm->eng || !mm->chat) {
    fail(&e, 400, "invalid_request", "model_not_supported", "model", "model '%s' cannot chat (%s)", mm->name,
         mm->eng ? "it has no chat template" : "an embedding model");
    goto bad;
  }
  gen_chat chat = {.messages = msgs, .thinking = -1};
  if (q.reasoning) {
    bool can = (mm->fam.caps & FAMILY_CAP_REASONING) != 0;
    bool levels = (mm->fam.caps & FAMILY_CAP_REASONING_LEVELS) != 0;
    bool off = strcmp(q.reasoning, "off") == 0;
    if ((!can && !off) || (levels && off)) {
      fail(&e, 400, "invalid_request", "invalid_value", "reasoning",
           "reasoning: model '%s' does not support reasoning setting '%s' (allowed: %s)", mm->name, q.reasoning,
           levels ? "low, medium, high, on" : "off");
      goto bad;
    }
    if (can) chat.thinking = !off;
    chat.effort = gen_effort_of(q.reasoning);
  }
  outparse_config pc;
  if ((rc = gen_chat_prompt(mm, &chat, NULL, &ids, &pc))) {
    fail(&e, 400, "invalid_request", NULL, "input", "%s", err_detail());
    goto bad;
  }
  if ((int64_t)ids.n >= engine_n_ctx(mm->eng)) {
    fail(&e, 400, "invalid_request", "context_length_exceeded", "input",
         "the conversation is %zu tokens, but the model's context holds %lld (the answer needs at least one more)",
         ids.n, (long long)engine_n_ctx(mm->eng));
    goto bad;
  }
  o = calloc(1, sizeof *o);
  if (!o || !(o->instance = str_dup(mm->instance_id ? mm->instance_id : mm->name)) || !(o->key = str_dup(mm->name))) {
    fail(&e, 500, "internal_error", NULL, NULL, "out of memory");
    goto bad;
  }
  o->lc = lc;
  o->messages = msgs;
  msgs = NULL;
  o->stream = q.stream;
  o->store = q.store;
  o->loaded = manager_n_loaded(lc->mgr) > n_before;
  o->load_s = load_s;
  gen_opts opts = {.stream = q.stream, .stream_kind = HTTP_STREAM_SSE, .prompt_param = "input"};
  gen_run(req, mm, &q.p, &ids, &pc, &opts, &v1_sink, o);
  tok_ids_free(&ids);
  json_decref(body);
  return;
bad:
  answer_error(req, &e, q.stream, q.key);
  v1_free(o);
  manager_release(mm);
  tok_ids_free(&ids);
  json_decref(msgs);
  gen_params_free(&q.p);
  json_decref(body);
}
