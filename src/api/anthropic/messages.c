/*
 * messages.c - POST /v1/messages and POST /v1/messages/count_tokens, and the
 * Anthropic renderer of the canonical generation layer.
 *
 * Request path: the pure parser (request.c) fills the canonical request;
 * the shared driver (api/request.h: gen_handle) loads the model, renders
 * and tokenizes the messages (count_tokens stops there, through
 * gen_prepare, so the two agree), forces a tool call for tool_choice
 * any/tool, and hands the job to gen_run with the sink below.
 *
 * Response path, not streaming: one Message whose content is a thinking
 * block (when the model reasoned), a text block, then one tool_use block
 * per parsed call; stop_reason end_turn | max_tokens | stop_sequence |
 * tool_use. Streaming: named SSE events (the SDKs dispatch on the event
 * name and drop data-only events): message_start, then per block
 * content_block_start / content_block_delta* / content_block_stop (a ping
 * after the first start; a thinking block ends with one signature_delta),
 * message_delta with the stop reason and cumulative usage, message_stop; an
 * engine failure after the 200 is an `error` event. Blocks open lazily as
 * the parser's events change kind, so indexes are contiguous and each
 * delta matches its block's type.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/anthropic/anthropic.h"
#include "api/api.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

/* ---- helpers shared with tests ---------------------------------------------------- */

void anthropic_signature(const char *text, size_t len, char *out, size_t cap) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a 64 */
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char)text[i];
    h *= 1099511628211ull;
  }
  snprintf(out, cap, "parley:%016llx", (unsigned long long)h);
}

void anthropic_tool_id(const char *id, char *out, size_t cap) {
  if (strncmp(id, "call_", 5) == 0) snprintf(out, cap, "toolu_%s", id + 5);
  else if (strncmp(id, "toolu_", 6) == 0) snprintf(out, cap, "%s", id);
  else snprintf(out, cap, "toolu_%s", id);
}

const char *anthropic_stop_reason(const gen_choice *c) {
  if (c->finish == ENGINE_FINISH_LENGTH) return "max_tokens";
  if (c->stop_index >= 0) return "stop_sequence";
  if (gen_choice_has_calls(c)) return "tool_use";
  return "end_turn";
}

json_t *anthropic_error_event(int code, const char *message) {
  const char *type;
  switch (api_status_for(code)) {
    case 400: case 405: case 409: case 499: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: case 529: type = "overloaded_error"; break;
    case 504: type = "timeout_error"; break;
    default: type = "api_error"; break;
  }
  return json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", type, "message",
                   message && *message ? message : err_message(code));
}

/* ---- the renderer's state --------------------------------------------------------- */

enum blk { BLK_NONE, BLK_TEXT, BLK_THINKING, BLK_TOOL };

struct an {
  char id[64];
  char *model;        /* label answered in "model" */
  int64_t n_prompt;   /* the prompt's tokens, for message_start */
  bool one_call;      /* disable_parallel_tool_use: calls after the first
                         are not answered */
  /* streaming */
  enum blk cur;       /* the open block */
  int index;          /* its index (or the next one's when none is open) */
  bool started;       /* message_start was sent */
  bool pinged, had_text, had_tool, had_thinking;
  buf think;          /* the open thinking block's text (for its signature) */
};

static void an_free(void *ctx) {
  struct an *o = ctx;
  if (!o) return;
  free(o->model);
  buf_free(&o->think);
  free(o);
}

static int send(gen_job *j, const char *event, json_t *v) {
  if (!v) return ERR_NOMEM;
  int rc = gen_job_write_sse(j, event, v);
  json_decref(v);
  return rc;
}

/* usage with input split into uncached and cache-read tokens, as upstream
 * counts them (input + cache_read = the whole prompt). */
static json_t *usage_json(int64_t n_prompt, int64_t n_cached, int64_t n_out) {
  if (n_cached > n_prompt) n_cached = n_prompt;
  return json_pack("{s:I, s:I, s:I, s:I, s:{s:i, s:i}, s:n, s:s}", "input_tokens", (json_int_t)(n_prompt - n_cached),
                   "output_tokens", (json_int_t)n_out, "cache_creation_input_tokens", 0, "cache_read_input_tokens",
                   (json_int_t)n_cached, "cache_creation", "ephemeral_5m_input_tokens", 0, "ephemeral_1h_input_tokens", 0,
                   "server_tool_use", "service_tier", "standard");
}

static json_t *stop_sequence_json(gen_job *j, const gen_choice *c) {
  const gen_params *g = gen_job_params(j);
  if (c->finish != ENGINE_FINISH_LENGTH && c->stop_index >= 0 && (size_t)c->stop_index < g->n_stop)
    return json_string(g->stop[c->stop_index]);
  return json_null();
}

/* A tool_use block for one canonical call; input is the parsed arguments
 * ({} when they are not an object). */
static json_t *tool_use_block(const json_t *call) {
  const json_t *fn = json_object_get(call, "function");
  const char *id = json_string_value(json_object_get(call, "id"));
  const char *name = json_string_value(json_object_get(fn, "name"));
  const json_t *args = json_object_get(fn, "arguments");
  json_t *input = json_is_string(args) ? json_loadb(json_string_value(args), json_string_length(args), 0, NULL)
                                       : json_deep_copy(args);
  if (!json_is_object(input)) {
    json_decref(input);
    input = json_object();
  }
  char tid[96];
  anthropic_tool_id(id ? id : "", tid, sizeof tid);
  return json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id", tid, "name", name ? name : "", "input", input);
}

/* ---- streaming ------------------------------------------------------------------------ */

/* message_start goes out before the first block (or the end): by then the
 * engine has admitted the prompt and the result holds its cache split, which
 * message_start reports as message_delta does (input + cache_read = the
 * prompt), as Anthropic does; clients that read usage from message_start
 * (LangChain) see the cache hits. */
static int an_begin(struct an *o, gen_job *j) {
  if (o->started) return 0;
  o->started = true;
  const gen_result *r = gen_job_result(j);
  int64_t n_prompt = r->n_prompt ? r->n_prompt : o->n_prompt;
  json_t *msg = json_pack("{s:s, s:s, s:s, s:[], s:s, s:n, s:n, s:o}", "id", o->id, "type", "message", "role",
                          "assistant", "content", "model", o->model, "stop_reason", "stop_sequence", "usage",
                          usage_json(n_prompt, r->n_cached, 1));
  if (!msg) return ERR_NOMEM;
  return send(j, "message_start", json_pack("{s:s, s:o}", "type", "message_start", "message", msg));
}

static int block_stop(struct an *o, gen_job *j) {
  if (o->cur == BLK_NONE) return 0;
  int rc = 0;
  if (o->cur == BLK_THINKING) {
    char sig[48];
    anthropic_signature(o->think.data ? o->think.data : "", o->think.len, sig, sizeof sig);
    rc = send(j, "content_block_delta",
              json_pack("{s:s, s:i, s:{s:s, s:s}}", "type", "content_block_delta", "index", o->index, "delta", "type",
                        "signature_delta", "signature", sig));
    buf_reset(&o->think);
  }
  if (!rc) rc = send(j, "content_block_stop", json_pack("{s:s, s:i}", "type", "content_block_stop", "index", o->index));
  o->cur = BLK_NONE;
  o->index++;
  return rc;
}

/* Closes the open block and opens one of kind k described by cb. */
static int block_start(struct an *o, gen_job *j, enum blk k, json_t *cb) {
  int rc = an_begin(o, j);
  if (!rc) rc = block_stop(o, j);
  if (rc) {
    json_decref(cb);
    return rc;
  }
  if (!cb) return ERR_NOMEM;
  rc = send(j, "content_block_start",
            json_pack("{s:s, s:i, s:o}", "type", "content_block_start", "index", o->index, "content_block", cb));
  o->cur = k;
  if (k == BLK_TEXT) o->had_text = true;
  if (k == BLK_TOOL) o->had_tool = true;
  if (k == BLK_THINKING) o->had_thinking = true;
  if (!rc && !o->pinged) {
    o->pinged = true;
    rc = gen_job_write_sse_raw(j, "ping", "{\"type\": \"ping\"}", 16);
  }
  return rc;
}

static int delta(struct an *o, gen_job *j, json_t *d) {
  if (!d) return ERR_NOMEM;
  return send(j, "content_block_delta",
              json_pack("{s:s, s:i, s:o}", "type", "content_block_delta", "index", o->index, "delta", d));
}

static int an_text(void *ctx, gen_job *j, int choice, bool reasoning, const char *text, size_t len) {
  struct an *o = ctx;
  (void)choice;
  int rc = 0;
  if (reasoning) {
    if (o->cur != BLK_THINKING)
      rc = block_start(o, j, BLK_THINKING, json_pack("{s:s, s:s, s:s}", "type", "thinking", "thinking", "", "signature", ""));
    buf_append(&o->think, text, len);
    return rc ? rc : delta(o, j, json_pack("{s:s, s:s%}", "type", "thinking_delta", "thinking", text, len));
  }
  if (o->cur != BLK_TEXT) rc = block_start(o, j, BLK_TEXT, json_pack("{s:s, s:s}", "type", "text", "text", ""));
  return rc ? rc : delta(o, j, json_pack("{s:s, s:s%}", "type", "text_delta", "text", text, len));
}

static int an_tool_begin(void *ctx, gen_job *j, int choice, int tool_index, const char *id, const char *name) {
  struct an *o = ctx;
  (void)choice;
  if (o->one_call && tool_index > 0) return 0;
  char tid[96];
  anthropic_tool_id(id, tid, sizeof tid);
  return block_start(o, j, BLK_TOOL,
                     json_pack("{s:s, s:s, s:s, s:{}}", "type", "tool_use", "id", tid, "name", name, "input"));
}

static int an_tool_args(void *ctx, gen_job *j, int choice, int tool_index, const char *text, size_t len) {
  struct an *o = ctx;
  (void)choice;
  if (o->cur != BLK_TOOL || (o->one_call && tool_index > 0)) return 0;
  return delta(o, j, json_pack("{s:s, s:s%}", "type", "input_json_delta", "partial_json", text, len));
}

static int an_tool_end(void *ctx, gen_job *j, int choice, int tool_index) {
  (void)choice;
  struct an *o = ctx;
  return o->cur == BLK_TOOL && !(o->one_call && tool_index > 0) ? block_stop(o, j) : 0;
}

/* The last block closes; a reply that only reasoned still gets its (empty)
 * text block, as the non-streamed Message has. */
static int an_choice_end(void *ctx, gen_job *j, const gen_choice *c) {
  struct an *o = ctx;
  (void)c;
  int rc = an_begin(o, j);
  if (!rc) rc = block_stop(o, j);
  if (!rc && !o->had_text && !o->had_tool && o->had_thinking) {
    rc = block_start(o, j, BLK_TEXT, json_pack("{s:s, s:s}", "type", "text", "text", ""));
    if (!rc) rc = block_stop(o, j);
  }
  return rc;
}

/* ---- the end ---------------------------------------------------------------------------- */

static json_t *message_body(struct an *o, gen_job *j, const gen_result *r) {
  const gen_choice *c = &r->ch[0];
  bool has_calls = gen_choice_has_calls(c);
  json_t *content = json_array();
  if (!content) return NULL;
  if (c->reasoning.len) {
    char sig[48];
    anthropic_signature(c->reasoning.data, c->reasoning.len, sig, sizeof sig);
    json_array_append_new(content, json_pack("{s:s, s:s%, s:s}", "type", "thinking", "thinking", c->reasoning.data,
                                             c->reasoning.len, "signature", sig));
  }
  if (c->content.len || (!has_calls && c->reasoning.len))
    json_array_append_new(content, json_pack("{s:s, s:s%, s:n}", "type", "text", "text",
                                             c->content.data ? c->content.data : "", c->content.len, "citations"));
  size_t i;
  json_t *call;
  json_array_foreach(has_calls ? c->tool_calls : NULL, i, call) {
    if (o->one_call && i > 0) break;
    json_array_append_new(content, tool_use_block(call));
  }
  return json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:o}", "id", o->id, "type", "message", "role", "assistant",
                   "model", o->model, "content", content, "stop_reason", anthropic_stop_reason(c), "stop_sequence",
                   stop_sequence_json(j, c), "usage", usage_json(r->n_prompt, r->n_cached, r->n_completion));
}

static void an_end(void *ctx, gen_job *j, const gen_result *r) {
  struct an *o = ctx;
  if (gen_job_req(j)) { /* not streaming */
    if (!gen_job_answer_error(j, r)) gen_job_answer_json(j, message_body(o, j, r));
    return;
  }
  if (an_begin(o, j)) return;
  if (r->err_code) {
    send(j, "error", anthropic_error_event(r->err_code, r->err_msg));
    return;
  }
  const gen_choice *c = &r->ch[0];
  int64_t n_cached = r->n_cached > r->n_prompt ? r->n_prompt : r->n_cached;
  json_t *md = json_pack("{s:s, s:{s:s, s:o}, s:{s:I, s:I, s:i, s:I}}", "type", "message_delta", "delta",
                         "stop_reason", anthropic_stop_reason(c), "stop_sequence", stop_sequence_json(j, c), "usage",
                         "output_tokens", (json_int_t)r->n_completion, "input_tokens",
                         (json_int_t)(r->n_prompt - n_cached), "cache_creation_input_tokens", 0,
                         "cache_read_input_tokens", (json_int_t)n_cached);
  if (!send(j, "message_delta", md)) send(j, "message_stop", json_pack("{s:s}", "type", "message_stop"));
}

static const gen_sink an_sink = {
    .on_text = an_text,
    .on_tool_begin = an_tool_begin,
    .on_tool_args = an_tool_args,
    .on_tool_end = an_tool_end,
    .on_choice_end = an_choice_end,
    .on_end = an_end,
    .free = an_free,
};

/* ---- handlers ------------------------------------------------------------------------------ */

/* The driver's errors in Anthropic's words (api_error gives the shape). */
static const gen_front AN_FRONT = {
    .not_found_fmt = "model: %.256s",
    .no_chat_fmt = "model: this model has no chat template (it cannot answer messages)",
    .template_prefix = "messages: the chat template failed: ",
    .stream_kind = HTTP_STREAM_SSE,
};

/* The renderer's context (gen_make_ctx). */
static void *an_make(void *arg, const gen_request *r, const gen_ready *g) {
  (void)arg;
  struct an *o = calloc(1, sizeof *o);
  if (!o) return NULL;
  o->model = str_dup(r->model);
  o->n_prompt = (int64_t)g->ids.n;
  o->one_call = r->one_call;
  if (id_make(o->id, sizeof o->id, "msg_", 12))
    snprintf(o->id, sizeof o->id, "msg_%016llx", (unsigned long long)time_mono_ns());
  if (!o->model) {
    an_free(o);
    return NULL;
  }
  return o;
}

static void messages_create(http_req *req, void *ctx) {
  anthropic_ctx *ac = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  anthropic_req ar;
  int rc = anthropic_req_parse(body, false, &ar);
  if (rc) gen_front_parse_error(&AN_FRONT, req, &ar, rc);
  else gen_handle(req, ac->mgr, &AN_FRONT, &ar, &an_sink, an_make, NULL);
  anthropic_req_free(&ar);
  json_decref(body);
}

/* Exact: the same translation, template and tokenizer as messages_create. */
static void messages_count_tokens(http_req *req, void *ctx) {
  anthropic_ctx *ac = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  anthropic_req ar;
  gen_ready g;
  int rc = anthropic_req_parse(body, true, &ar);
  if (rc) {
    gen_front_parse_error(&AN_FRONT, req, &ar, rc);
  } else if (!gen_prepare(req, ac->mgr, &AN_FRONT, &ar, &g)) {
    json_t *out = json_pack("{s:I}", "input_tokens", (json_int_t)g.ids.n);
    if (out) api_respond_json(req, 200, out);
    else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    json_decref(out);
    gen_ready_free(&g);
  }
  anthropic_req_free(&ar);
  json_decref(body);
}

static http_route ROUTES[] = {
    {"POST", "/v1/messages", messages_create, NULL, HTTP_BODY_JSON, "anthropic.messages"},
    {"POST", "/v1/messages/count_tokens", messages_count_tokens, NULL, HTTP_BODY_JSON, "anthropic.messages.count_tokens"},
};

size_t anthropic_routes(anthropic_ctx *actx, const http_route **out) {
  for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) ROUTES[i].ctx = actx;
  *out = ROUTES;
  return ARRAY_LEN(ROUTES);
}
