/*
 * v0.c - LM Studio's REST API v0 generation routes:
 * POST /api/v0/chat/completions, POST /api/v0/completions and
 * POST /api/v0/embeddings.
 *
 * Requests are OpenAI-shaped, so the pure parsers (lms_v0_chat_parse,
 * lms_v0_completion_parse) are the OpenAI adapter's (openai_chat_body,
 * openai_sampling_parse: the canonical normalisation and errors naming the
 * JSON path) after the LM Studio spellings it does not know are taken out:
 * max_tokens -1 (unlimited), top_k, min_p, repeat_penalty, ttl (seconds of
 * idle before a model this request loaded unloads) and draft_model
 * (speculative decoding; accepted, decoding is not speculative here). The
 * shared driver (gen_handle) runs them. Embeddings are the OpenAI handler
 * itself: the shapes are the same.
 *
 * Answers are the OpenAI bodies plus LM Studio's three objects, rendered
 * by this file's gen_sink:
 *   stats      {tokens_per_second, time_to_first_token, generation_time,
 *               stop_reason}
 *   model_info {arch, quant, format, context_length}
 *   runtime    {name, version, supported_formats}
 * Streams are OpenAI chunk events (first delta carries the role, tool-call
 * deltas an index, the last chunk finish_reason, then [DONE]) without the
 * extra objects, as 0.3.x streams; stream_options.include_usage adds the
 * usage chunk. An error after the stream opened is a data line
 * {"error":{"message"}} (what Zed parses).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/lmstudio/lmstudio.h"
#include "api/request.h"
#include "base/err.h"
#include "base/util.h"

enum v0_kind { V0_CHAT, V0_COMPLETION };

/* The renderer's state (the sink's ctx). */
struct v0 {
  enum v0_kind kind;
  char id[64];
  char *key;
  int64_t created;
  bool stream, include_usage;
  int64_t max_tokens;
  json_t *model_info;
};

static void v0_free(void *ctx) {
  struct v0 *o = ctx;
  if (!o) return;
  free(o->key);
  json_decref(o->model_info);
  free(o);
}

static const char *object_name(const struct v0 *o, bool chunk) {
  if (o->kind == V0_COMPLETION) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

static json_t *chunk_new(struct v0 *o, int index, json_t *delta, const char *finish) {
  json_t *choice = json_pack("{s:i, s:o, s:n, s:o}", "index", index, o->kind == V0_CHAT ? "delta" : "text",
                             delta ? delta : o->kind == V0_CHAT ? json_object() : json_string(""), "logprobs",
                             "finish_reason", finish ? json_string(finish) : json_null());
  return json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o]}", "id", o->id, "object", object_name(o, true), "created",
                   (json_int_t)o->created, "model", o->key, "system_fingerprint", o->key, "choices", choice);
}

static int send(gen_job *j, json_t *v) {
  if (!v) return ERR_NOMEM;
  int rc = gen_job_write_sse(j, NULL, v);
  json_decref(v);
  return rc;
}

static const char *finish_reason(const gen_choice *c) {
  if (gen_choice_has_calls(c) && c->finish == ENGINE_FINISH_STOP) return "tool_calls";
  return c->finish == ENGINE_FINISH_LENGTH ? "length" : "stop";
}

static int v0_start(void *ctx, gen_job *j) {
  struct v0 *o = ctx;
  if (o->kind != V0_CHAT) return 0;
  int rc = 0;
  for (int i = 0; !rc && i < gen_job_result(j)->n; i++)
    rc = send(j, chunk_new(o, i, json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL));
  return rc;
}

static int v0_text(void *ctx, gen_job *j, int choice, bool reasoning, const char *text, size_t len) {
  struct v0 *o = ctx;
  if (o->kind == V0_COMPLETION) return send(j, chunk_new(o, choice, json_stringn(text, len), NULL));
  return send(j, chunk_new(o, choice, json_pack("{s:s%}", reasoning ? "reasoning_content" : "content", text, len), NULL));
}

static int v0_tool_begin(void *ctx, gen_job *j, int choice, int tool_index, const char *id, const char *name) {
  json_t *d = json_pack("{s:[{s:i, s:s, s:s, s:{s:s, s:s}}]}", "tool_calls", "index", tool_index, "id", id, "type",
                        "function", "function", "name", name, "arguments", "");
  return send(j, chunk_new(ctx, choice, d, NULL));
}

static int v0_tool_args(void *ctx, gen_job *j, int choice, int tool_index, const char *text, size_t len) {
  json_t *d = json_pack("{s:[{s:i, s:{s:s%}}]}", "tool_calls", "index", tool_index, "function", "arguments", text, len);
  return send(j, chunk_new(ctx, choice, d, NULL));
}

static int v0_choice_end(void *ctx, gen_job *j, const gen_choice *c) {
  return send(j, chunk_new(ctx, c->index, NULL, finish_reason(c)));
}

static json_t *usage_json(const gen_result *r) {
  return json_pack("{s:I, s:I, s:I}", "prompt_tokens", (json_int_t)r->n_prompt, "completion_tokens",
                   (json_int_t)r->n_completion, "total_tokens", (json_int_t)(r->n_prompt + r->n_completion));
}

static json_t *stats_json(const struct v0 *o, const gen_result *r) {
  double gen, tps;
  lms_gen_timing(r, &gen, &tps);
  double ttft = lms_seconds(r->t_start_ns, r->t_first_ns);
  return json_pack("{s:f, s:f, s:f, s:s}", "tokens_per_second", tps, "time_to_first_token", ttft,
                   "generation_time", gen, "stop_reason", r->n ? lms_stop_reason(&r->ch[0], o->max_tokens) : "failed");
}

static json_t *final_body(struct v0 *o, const gen_result *r) {
  json_t *choices = json_array();
  for (int i = 0; choices && i < r->n; i++) {
    const gen_choice *c = &r->ch[i];
    json_t *item;
    if (o->kind == V0_CHAT) {
      bool calls = gen_choice_has_calls(c);
      json_t *msg = json_pack("{s:s, s:o}", "role", "assistant", "content",
                              c->content.len || !calls ? json_stringn(c->content.data ? c->content.data : "", c->content.len)
                                                       : json_null());
      if (msg && c->reasoning.len)
        json_object_set_new(msg, "reasoning_content", json_stringn(c->reasoning.data, c->reasoning.len));
      if (msg && calls) json_object_set(msg, "tool_calls", c->tool_calls);
      item = json_pack("{s:i, s:n, s:s, s:o}", "index", i, "logprobs", "finish_reason", finish_reason(c), "message", msg);
    } else {
      item = json_pack("{s:i, s:s%, s:n, s:s}", "index", i, "text", c->content.data ? c->content.data : "",
                       c->content.len, "logprobs", "finish_reason", finish_reason(c));
    }
    if (!item || json_array_append_new(choices, item)) {
      json_decref(choices);
      return NULL;
    }
  }
  if (!choices) return NULL;
  return json_pack("{s:s, s:s, s:I, s:s, s:o, s:o, s:o, s:O, s:o}", "id", o->id, "object", object_name(o, false),
                   "created", (json_int_t)o->created, "model", o->key, "choices", choices, "usage", usage_json(r),
                   "stats", stats_json(o, r), "model_info", o->model_info, "runtime", lms_runtime());
}

static void v0_end(void *ctx, gen_job *j, const gen_result *r) {
  struct v0 *o = ctx;
  if (!o->stream) {
    if (!gen_job_answer_error(j, r)) gen_job_answer_json(j, final_body(o, r));
    return;
  }
  if (r->err_code) {
    send(j, json_pack("{s:{s:s}}", "error", "message", r->err_msg ? r->err_msg : "generation failed"));
    return;
  }
  if (o->include_usage)
    send(j, json_pack("{s:s, s:s, s:I, s:s, s:s, s:[], s:o}", "id", o->id, "object", object_name(o, true), "created",
                      (json_int_t)o->created, "model", o->key, "system_fingerprint", o->key, "choices", "usage",
                      usage_json(r)));
  gen_job_write_sse_raw(j, NULL, "[DONE]", 6);
}

static const gen_sink v0_sink = {
    .on_start = v0_start,
    .on_text = v0_text,
    .on_tool_begin = v0_tool_begin,
    .on_tool_args = v0_tool_args,
    .on_choice_end = v0_choice_end,
    .on_end = v0_end,
    .free = v0_free,
};

/* ---- request parsing ------------------------------------------------------------ */

/* LM Studio's sampling extras on top of the OpenAI fields: top_k, min_p,
 * repeat_penalty, ttl (seconds; -1 none), draft_model (accepted; decoding
 * is not speculative here). */
static int parse_extras(const json_t *body, gen_request *r) {
  const json_t *v;
  if ((v = json_object_get(body, "top_k")) && !json_is_null(v)) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 100000)
      return gen_request_fail(r, ERR_INVALID, "top_k", "top_k: expected an integer from 0 to 100000");
    r->p.er.sample.top_k = (int32_t)json_integer_value(v);
  }
  if ((v = json_object_get(body, "min_p")) && !json_is_null(v)) {
    if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) <= 1))
      return gen_request_fail(r, ERR_INVALID, "min_p", "min_p: expected a number from 0 to 1");
    r->p.er.sample.min_p = (float)json_number_value(v);
  }
  if ((v = json_object_get(body, "repeat_penalty")) && !json_is_null(v)) {
    if (!json_is_number(v) || !(json_number_value(v) > 0 && json_number_value(v) <= 10))
      return gen_request_fail(r, ERR_INVALID, "repeat_penalty",
                              "repeat_penalty: expected a number above 0 and at most 10 (1 = none)");
    r->p.er.sample.repeat_penalty = (float)json_number_value(v);
    if (r->p.er.sample.penalty_last_n == 0) r->p.er.sample.penalty_last_n = 64;
  }
  if ((v = json_object_get(body, "ttl")) && !json_is_null(v)) {
    if (!json_is_integer(v) || json_integer_value(v) < -1)
      return gen_request_fail(r, ERR_INVALID, "ttl", "ttl: expected an integer number of seconds");
    r->ttl_ms = json_integer_value(v) < 0 ? MANAGER_KEEP_ALIVE_FOREVER : json_integer_value(v) * 1000;
  }
  if ((v = json_object_get(body, "draft_model")) && !json_is_null(v) && !json_is_string(v))
    return gen_request_fail(r, ERR_INVALID, "draft_model", "draft_model: expected string");
  return 0;
}

/* The OpenAI parser (chat or legacy completion) on body, with LM Studio's
 * max_tokens -1 ("unlimited") taken out of a shallow copy first (the
 * values the request borrows stay the body's), then the extras. */
static int v0_parse(const json_t *body, bool chat, gen_request *r) {
  gen_request_init(r);
  const json_t *mt = json_object_get(body, "max_tokens");
  bool unlimited = json_is_integer(mt) && json_integer_value(mt) == -1;
  if (!unlimited && json_is_integer(mt) && json_integer_value(mt) < 1)
    return gen_request_fail(r, ERR_INVALID, "max_tokens", "max_tokens: expected a positive integer, or -1 for no limit");
  json_t *view = unlimited ? json_copy((json_t *)body) : NULL;
  if (unlimited && (!view || json_object_del(view, "max_tokens"))) {
    json_decref(view);
    return gen_request_fail(r, ERR_NOMEM, NULL, "out of memory");
  }
  const json_t *b = view ? view : body;
  int rc = chat ? openai_chat_body(b, r) : openai_sampling_parse(b, false, r);
  json_decref(view);
  if (!rc) rc = parse_extras(body, r);
  /* LM Studio documents max_tokens as optional with no 16-token default */
  if (!rc && (unlimited || (!chat && !mt))) r->p.er.max_tokens = 0;
  if (rc) gen_request_free(r);
  return rc;
}

int lms_v0_chat_parse(const json_t *body, gen_request *r) { return v0_parse(body, true, r); }

int lms_v0_completion_parse(const json_t *body, gen_request *r) {
  const json_t *p = json_object_get(body, "prompt");
  if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
  if (!json_is_string(p)) {
    gen_request_init(r);
    return gen_request_fail(r, ERR_INVALID, "prompt", p ? "prompt: expected string" : "prompt: required field is missing");
  }
  int rc = v0_parse(body, false, r);
  if (rc) return rc;
  rc = api_json_str(body, "", "model", false, &r->model);
  if (rc && rc != ERR_NOT_FOUND) {
    rc = gen_request_fail(r, rc, "model", "%s", err_detail());
    gen_request_free(r);
    return rc;
  }
  r->prompt = json_string_value(p);
  r->prompt_len = json_string_length(p);
  r->prompt_param = "prompt";
  return 0;
}

/* The driver's errors in LM Studio's error object: an unknown model is
 * model_not_found, a model that cannot chat model_not_supported, content it
 * cannot read unsupported_content, other 400s invalid_value. */
static void v0_error(http_req *req, int status, int code, const char *message, const char *param) {
  bool on_model = param && strcmp(param, "model") == 0;
  if (status == 404 && code == ERR_NOT_FOUND && on_model)
    lms_error(req, 404, "model_not_found", "model_not_found", param, "%s", message);
  else if (status == 400 && code == ERR_UNSUPPORTED)
    lms_error(req, 400, "invalid_request", on_model ? "model_not_supported" : "unsupported_content", param, "%s", message);
  else if (status == 400)
    lms_error(req, 400, "invalid_request", "invalid_value", param, "%s", message);
  else api_error(req, status, code, message, param);
}

static const gen_front V0_FRONT = {
    .error = v0_error,
    .no_chat_fmt = "model '%s' has no chat template (use /api/v0/completions or /api/v0/embeddings)",
    .stream_kind = HTTP_STREAM_SSE,
};

/* The v0 renderer's context (gen_make_ctx; arg: the enum v0_kind). */
static void *v0_make(void *arg, const gen_request *r, const gen_ready *g) {
  struct v0 *o = calloc(1, sizeof *o);
  if (!o) return NULL;
  o->kind = *(const enum v0_kind *)arg;
  o->stream = r->stream;
  o->include_usage = r->include_usage;
  o->max_tokens = r->p.er.max_tokens;
  o->created = time_wall_s();
  o->key = str_dup(r->model && *r->model ? r->model : g->mm->name);
  o->model_info = lms_model_info(g->mm);
  openai_make_id(o->id, sizeof o->id, o->kind == V0_CHAT ? "chatcmpl-" : "cmpl-");
  if (!o->key || !o->model_info) {
    v0_free(o);
    return NULL;
  }
  return o;
}

static void v0_handle(http_req *req, lmstudio_ctx *lc, enum v0_kind kind) {
  json_t *body = api_parse_body(req);
  if (!body) return;
  gen_request r;
  int rc = kind == V0_CHAT ? lms_v0_chat_parse(body, &r) : lms_v0_completion_parse(body, &r);
  if (rc) gen_front_parse_error(&V0_FRONT, req, &r, rc);
  else gen_handle(req, lc->mgr, &V0_FRONT, &r, &v0_sink, v0_make, &kind);
  gen_request_free(&r);
  json_decref(body);
}

void lms_v0_chat(http_req *req, void *ctx) { v0_handle(req, ctx, V0_CHAT); }

void lms_v0_completions(http_req *req, void *ctx) { v0_handle(req, ctx, V0_COMPLETION); }

void lms_v0_embeddings(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  openai_embeddings(req, &lc->oa);
}
