/*
 * chat.c - POST /v1/chat/completions: the request's translation into
 * canonical messages and the chat.completion renderer of the canonical
 * generation layer (oa_sink). Legacy completions have their own
 * renderer (completions.c).
 *
 * Request path: openai_chat_parse, the pure parser (field types, the
 * canonical normalisation of messages, tools and tool_choice in
 * api/request.c, thinking, the generation prompt, sampling: errors name the
 * JSON path), then the shared driver gen_handle (model, template, prompt,
 * tool forcing, gen_run) with the sink below.
 *
 * Response path: the sink turns canonical events into chat.completion /
 * text_completion bodies or their chunk SSE events (first delta carries the
 * role; tool-call deltas carry a stable index and id; finish_reason; the
 * include_usage chunk; [DONE]).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/openai/openai.h"
#include "api/request.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "tmpl/outparse.h"

/* The renderer's state (the sink's ctx). */
struct oa {
  char id[64];
  char *model;        /* label answered in "model" */
  int64_t created;
  bool stream, include_usage;
  int32_t top_logprobs;
  int n;
  json_t **logprobs;  /* [n] not streaming: arrays of entries */
};

static void oa_free(void *ctx) {
  struct oa *o = ctx;
  if (!o) return;
  for (int i = 0; o->logprobs && i < o->n; i++) json_decref(o->logprobs[i]);
  free(o->logprobs);
  free(o->model);
  free(o);
}

/* ---- chunks ---------------------------------------------------------------- */

static json_t *chunk_new(struct oa *o, int index, json_t *delta, const char *finish, json_t *logprobs) {
  json_t *choice = json_pack("{s:i, s:o, s:o, s:o}", "index", index, "delta", delta ? delta : json_object(), "logprobs",
                             logprobs ? logprobs : json_null(), "finish_reason",
                             finish ? json_string(finish) : json_null());
  json_t *c = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o]}", "id", o->id, "object", "chat.completion.chunk", "created",
                        (json_int_t)o->created, "model", o->model, "system_fingerprint", "parley", "choices", choice);
  if (c && o->include_usage) json_object_set_new(c, "usage", json_null());
  return c;
}

static int chunk_send(gen_job *j, json_t *c) {
  if (!c) return ERR_NOMEM;
  int rc = gen_job_write_sse(j, NULL, c);
  json_decref(c);
  return rc;
}

static json_t *usage_json(const gen_result *r) {
  return json_pack("{s:I, s:I, s:I, s:{s:I}, s:{s:i}}", "prompt_tokens", (json_int_t)r->n_prompt,
                   "completion_tokens", (json_int_t)r->n_completion, "total_tokens",
                   (json_int_t)(r->n_prompt + r->n_completion), "prompt_tokens_details", "cached_tokens",
                   (json_int_t)r->n_cached, "completion_tokens_details", "reasoning_tokens", 0);
}

static const char *choice_finish(const gen_choice *c) {
  if (gen_choice_has_calls(c) && c->finish == ENGINE_FINISH_STOP) return "tool_calls";
  return openai_finish_reason(c->finish);
}

/* ---- streaming callbacks ----------------------------------------------------- */

static int oa_start(void *ctx, gen_job *j) {
  struct oa *o = ctx;
  int rc = 0;
  for (int i = 0; !rc && i < o->n; i++)
    rc = chunk_send(j, chunk_new(o, i, json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL, NULL));
  return rc;
}

static int oa_text(void *ctx, gen_job *j, int choice, bool reasoning, const char *text, size_t len) {
  json_t *d = json_pack("{s:s%}", reasoning ? "reasoning_content" : "content", text, len);
  return chunk_send(j, chunk_new(ctx, choice, d, NULL, NULL));
}

static int oa_tool_begin(void *ctx, gen_job *j, int choice, int tool_index, const char *id, const char *name) {
  json_t *d = json_pack("{s:[{s:i, s:s, s:s, s:{s:s, s:s}}]}", "tool_calls", "index", tool_index, "id", id, "type",
                        "function", "function", "name", name, "arguments", "");
  return chunk_send(j, chunk_new(ctx, choice, d, NULL, NULL));
}

static int oa_tool_args(void *ctx, gen_job *j, int choice, int tool_index, const char *text, size_t len) {
  json_t *d = json_pack("{s:[{s:i, s:{s:s%}}]}", "tool_calls", "index", tool_index, "function", "arguments", text, len);
  return chunk_send(j, chunk_new(ctx, choice, d, NULL, NULL));
}

static int oa_choice_end(void *ctx, gen_job *j, const gen_choice *c) {
  return chunk_send(j, chunk_new(ctx, c->index, NULL, choice_finish(c), NULL));
}

/* Logprobs of sampled tokens: streamed as their own chunk, or kept. */
static int oa_logprobs(void *ctx, gen_job *j, int choice, const sample_result *r, size_t n) {
  struct oa *o = ctx;
  const tok *t = gen_job_model(j)->t;
  json_t *lp = json_array();
  for (size_t i = 0; lp && i < n; i++) json_array_append_new(lp, openai_logprob_entry(t, &r[i], o->top_logprobs));
  if (!lp) return 0;
  if (o->stream)
    return chunk_send(j, chunk_new(o, choice, NULL, NULL, json_pack("{s:o, s:n}", "content", lp, "refusal")));
  if (!o->logprobs[choice]) o->logprobs[choice] = lp;
  else {
    json_array_extend(o->logprobs[choice], lp);
    json_decref(lp);
  }
  return 0;
}

/* ---- the end ---------------------------------------------------------------- */

static json_t *final_body(struct oa *o, const gen_result *r) {
  json_t *choices = json_array();
  for (int i = 0; choices && i < r->n; i++) {
    const gen_choice *c = &r->ch[i];
    json_t *lp = o->logprobs[i] ? json_pack("{s:O, s:n}", "content", o->logprobs[i], "refusal") : json_null();
    bool has_calls = gen_choice_has_calls(c);
    json_t *msg = json_pack("{s:s, s:o, s:n}", "role", "assistant", "content",
                            c->content.len || !has_calls
                                ? json_stringn(c->content.data ? c->content.data : "", c->content.len)
                                : json_null(),
                            "refusal");
    if (msg && c->reasoning.len)
      json_object_set_new(msg, "reasoning_content", json_stringn(c->reasoning.data, c->reasoning.len));
    if (msg && has_calls) json_object_set(msg, "tool_calls", c->tool_calls);
    json_t *item = json_pack("{s:i, s:o, s:o, s:s}", "index", i, "message", msg, "logprobs", lp, "finish_reason",
                             choice_finish(c));
    if (!item || json_array_append_new(choices, item)) {
      json_decref(choices);
      return NULL;
    }
  }
  if (!choices) return NULL;
  return json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:o}", "id", o->id, "object", "chat.completion", "created",
                   (json_int_t)o->created, "model", o->model, "system_fingerprint", "parley", "choices", choices,
                   "usage", usage_json(r));
}

static void oa_end(void *ctx, gen_job *j, const gen_result *r) {
  struct oa *o = ctx;
  if (!o->stream) {
    if (!gen_job_answer_error(j, r)) gen_job_answer_json(j, final_body(o, r));
    return;
  }
  if (r->err_code) {
    json_t *e = json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", r->err_msg ? r->err_msg : "error", "type",
                          api_status_for(r->err_code) < 500 ? "invalid_request_error" : "server_error", "param",
                          "code");
    chunk_send(j, e);
    return;
  }
  if (o->include_usage) {
    json_t *u = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[], s:o}", "id", o->id, "object", "chat.completion.chunk",
                          "created", (json_int_t)o->created, "model", o->model, "system_fingerprint", "parley",
                          "choices", "usage", usage_json(r));
    chunk_send(j, u);
  }
  gen_job_write_sse_raw(j, NULL, "[DONE]", 6);
}

static const gen_sink oa_sink = {
    .on_start = oa_start,
    .on_text = oa_text,
    .on_tool_begin = oa_tool_begin,
    .on_tool_args = oa_tool_args,
    .on_logprobs = oa_logprobs,
    .on_choice_end = oa_choice_end,
    .on_end = oa_end,
    .free = oa_free,
};

/* The renderer's context for a request whose prompt is ready (gen_make_ctx). */
static void *oa_make(void *arg, const gen_request *r, const gen_ready *g) {
  (void)arg;
  struct oa *o = calloc(1, sizeof *o);
  int n = r->p.er.n > 0 ? r->p.er.n : 1;
  if (!o) return NULL;
  o->n = n;
  o->stream = r->stream;
  o->include_usage = r->include_usage;
  o->top_logprobs = r->top_logprobs;
  o->created = time_wall_s();
  o->model = str_dup(r->model && *r->model ? r->model : g->mm->name);
  o->logprobs = calloc((size_t)n, sizeof *o->logprobs);
  openai_make_id(o->id, sizeof o->id, "chatcmpl-");
  if (!o->model || !o->logprobs) {
    oa_free(o);
    return NULL;
  }
  return o;
}

/* ---- the chat request ---------------------------------------------------- */

/* reasoning_effort: "none"/"minimal" turn the family's thinking off, the
 * others leave it on and set the level of a model whose reasoning has
 * levels (gen_effort_of); chat_template_kwargs.enable_thinking wins.
 * chat_template_kwargs is borrowed from body. */
static int parse_thinking(const json_t *body, gen_request *r) {
  gen_chat *c = &r->chat;
  const json_t *re = json_object_get(body, "reasoning_effort");
  if (re && !json_is_null(re)) {
    const char *s = json_string_value(re);
    static const char *const ok[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    bool known = false;
    for (size_t i = 0; s && i < ARRAY_LEN(ok); i++) known |= strcmp(s, ok[i]) == 0;
    if (!known)
      return gen_request_fail(r, ERR_INVALID, "reasoning_effort",
                              "reasoning_effort: expected one of none, minimal, low, medium, high, xhigh, max");
    c->thinking = strcmp(s, "none") == 0 || strcmp(s, "minimal") == 0 ? 0 : 1;
    c->effort = gen_effort_of(s);
  }
  const json_t *kw = json_object_get(body, "chat_template_kwargs");
  if (kw && !json_is_null(kw) && !json_is_object(kw))
    return gen_request_fail(r, ERR_TYPE, "chat_template_kwargs", "chat_template_kwargs: expected object, got %s",
                            api_json_type_name(kw));
  const json_t *et = json_object_get(kw, "enable_thinking");
  if (json_is_boolean(et)) c->thinking = json_is_true(et);
  c->template_kwargs = json_is_object(kw) ? kw : NULL;
  return 0;
}

/* add_generation_prompt (default true) and continue_final_message (default
 * false), vLLM's extensions: the prompt ends without the assistant header,
 * or inside the final (assistant) message, which the model continues. */
static int parse_generation_prompt(const json_t *body, gen_request *r) {
  static const char *const keys[] = {"add_generation_prompt", "continue_final_message"};
  bool v[2] = {true, false};
  for (size_t i = 0; i < 2; i++) {
    const json_t *x = json_object_get(body, keys[i]);
    if (!x || json_is_null(x)) continue;
    if (!json_is_boolean(x)) return gen_request_fail(r, ERR_TYPE, keys[i], "%s: expected boolean", keys[i]);
    v[i] = json_is_true(x);
  }
  if (v[0] && v[1])
    return gen_request_fail(r, ERR_INVALID, "continue_final_message",
                            "continue_final_message: cannot be true together with add_generation_prompt (set it "
                            "false)");
  const json_t *msgs = r->messages;
  const json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
  const char *role = json_string_value(json_object_get(last, "role"));
  if (v[1] && (!role || strcmp(role, "assistant") != 0))
    return gen_request_fail(r, ERR_INVALID, "continue_final_message",
                            "continue_final_message: the last message must be an assistant message");
  r->chat.no_generation_prompt = !v[0];
  r->chat.continue_final = v[1];
  return 0;
}

int openai_chat_body(const json_t *body, gen_request *r) {
  int rc = api_json_str(body, "", "model", false, &r->model);
  if (rc && rc != ERR_NOT_FOUND) return gen_request_fail(r, rc, "model", "%s", err_detail());
  if ((rc = gen_openai_messages(body, r)) || (rc = gen_openai_tools(body, r)) ||
      (rc = gen_openai_tool_choice(body, r)) || (rc = parse_thinking(body, r)) ||
      (rc = parse_generation_prompt(body, r)))
    return rc;
  return openai_sampling_parse(body, true, r);
}

int openai_chat_parse(const json_t *body, gen_request *r) {
  gen_request_init(r);
  size_t n;
  const api_field *fields = openai_shape_fields(OPENAI_SHAPE_CHAT, &n);
  int rc = api_json_check_fields(body, fields, n, r->param, sizeof r->param);
  if (!rc) rc = openai_chat_body(body, r);
  if (rc) gen_request_free(r);
  return rc;
}

/* The OpenAI writer of the driver's errors: an unknown model is 404 with
 * code model_not_found, the rest api_error's shape. */
static void chat_error(http_req *req, int status, int code, const char *message, const char *param) {
  if (status == 404 && code == ERR_NOT_FOUND && param && strcmp(param, "model") == 0)
    openai_error_model_not_found(req, message);
  else api_error(req, status, code, message, param);
}

static const gen_front CHAT_FRONT = {
    .error = chat_error,
    .no_chat_fmt = "this model has no chat template (use /v1/completions or /v1/embeddings)",
    .stream_kind = HTTP_STREAM_SSE,
};

void openai_chat_completions(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  gen_request r;
  int rc = openai_chat_parse(body, &r);
  if (rc) gen_front_parse_error(&CHAT_FRONT, req, &r, rc);
  else gen_handle(req, oc->mgr, &CHAT_FRONT, &r, &oa_sink, oa_make, NULL);
  gen_request_free(&r);
  json_decref(body);
}
