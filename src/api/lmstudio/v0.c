/*
 * v0.c - LM Studio's REST API v0 generation routes:
 * POST /api/v0/chat/completions, POST /api/v0/completions and
 * POST /api/v0/embeddings.
 *
 * Requests are OpenAI-shaped, so the sampling fields go through the OpenAI
 * adapter's checker (openai_gen_parse: ranges and errors naming the JSON
 * path), after the LM Studio spellings it does not know are taken out:
 * max_tokens -1 (unlimited), top_k, min_p, repeat_penalty, ttl (seconds of
 * idle before a model this request loaded unloads) and draft_model (speculative
 * decoding; accepted, decoding is not speculative here). Embeddings are the
 * OpenAI handler itself: the shapes are the same.
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

/* 400 naming the field; returns ERR_INVALID. */
static int bad(http_req *req, const char *param, const char *msg) {
  lms_error(req, 400, "invalid_request", "invalid_value", param, "%s", msg);
  return ERR_INVALID;
}

/* LM Studio's sampling extras on top of openai_gen_parse. */
static int parse_extras(http_req *req, const json_t *body, bool unlimited, manager_model *mm, openai_gen *g) {
  const json_t *v;
  if (unlimited) g->p.er.max_tokens = 0;
  if ((v = json_object_get(body, "top_k")) && !json_is_null(v)) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 100000)
      return bad(req, "top_k", "top_k: expected an integer from 0 to 100000");
    g->p.er.sample.top_k = (int32_t)json_integer_value(v);
  }
  if ((v = json_object_get(body, "min_p")) && !json_is_null(v)) {
    if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) <= 1))
      return bad(req, "min_p", "min_p: expected a number from 0 to 1");
    g->p.er.sample.min_p = (float)json_number_value(v);
  }
  if ((v = json_object_get(body, "repeat_penalty")) && !json_is_null(v)) {
    if (!json_is_number(v) || !(json_number_value(v) > 0 && json_number_value(v) <= 10))
      return bad(req, "repeat_penalty", "repeat_penalty: expected a number above 0 and at most 10 (1 = none)");
    g->p.er.sample.repeat_penalty = (float)json_number_value(v);
    if (g->p.er.sample.penalty_last_n == 0) g->p.er.sample.penalty_last_n = 64;
  }
  if ((v = json_object_get(body, "ttl")) && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < -1))
    return bad(req, "ttl", "ttl: expected an integer number of seconds");
  if ((v = json_object_get(body, "draft_model")) && !json_is_null(v) && !json_is_string(v))
    return bad(req, "draft_model", "draft_model: expected string");
  (void)mm;
  return 0;
}

/* Takes max_tokens -1 (LM Studio's "unlimited") out of body; sets *unlimited. */
static int take_unlimited(http_req *req, json_t *body, bool *unlimited) {
  const json_t *mt = json_object_get(body, "max_tokens");
  *unlimited = json_is_integer(mt) && json_integer_value(mt) == -1;
  if (*unlimited) json_object_del(body, "max_tokens");
  else if (json_is_integer(mt) && json_integer_value(mt) < 1)
    return bad(req, "max_tokens", "max_tokens: expected a positive integer, or -1 for no limit");
  return 0;
}

/* Checks messages and rewrites them into canonical ones in place: text
 * parts joined, "developer" as "system". Images cannot be read here. */
static int normalise_messages(http_req *req, json_t *body) {
  json_t *msgs = json_object_get(body, "messages");
  char path[96], msg[256];
  if (!json_is_array(msgs) || !json_array_size(msgs))
    return bad(req, "messages", msgs ? "messages: expected a non-empty array" : "messages: required field is missing");
  static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
  size_t i;
  json_t *m;
  json_array_foreach(msgs, i, m) {
    const char *role = json_string_value(json_object_get(m, "role"));
    bool ok = false;
    for (size_t r = 0; role && r < ARRAY_LEN(roles); r++) ok |= strcmp(role, roles[r]) == 0;
    if (!ok) {
      snprintf(path, sizeof path, "messages[%zu].role", i);
      snprintf(msg, sizeof msg, "%s: expected one of system, developer, user, assistant, tool", path);
      return bad(req, path, msg);
    }
    if (strcmp(role, "developer") == 0) json_object_set_new(m, "role", json_string("system"));
    json_t *content = json_object_get(m, "content");
    snprintf(path, sizeof path, "messages[%zu].content", i);
    if (!content || json_is_null(content)) {
      if (strcmp(role, "assistant") == 0) continue;
      snprintf(msg, sizeof msg, "%s: required for role %s", path, role);
      return bad(req, path, msg);
    }
    if (json_is_string(content)) continue;
    if (!json_is_array(content)) {
      snprintf(msg, sizeof msg, "%s: expected string or array of content parts", path);
      return bad(req, path, msg);
    }
    buf text = BUF_INIT;
    size_t k;
    json_t *part;
    json_array_foreach(content, k, part) {
      const char *type = json_string_value(json_object_get(part, "type"));
      const json_t *t = json_object_get(part, "text");
      if (!type || strcmp(type, "text") != 0 || !json_is_string(t)) {
        buf_free(&text);
        snprintf(path, sizeof path, "messages[%zu].content[%zu]", i, k);
        if (type && strcmp(type, "image_url") == 0) {
          lms_error(req, 400, "invalid_request", "unsupported_content", path,
                    "%s: this model cannot read images (no vision support)", path);
          return ERR_UNSUPPORTED;
        }
        snprintf(msg, sizeof msg, "%s: expected {\"type\":\"text\",\"text\":string}", path);
        return bad(req, path, msg);
      }
      if (k) buf_append_byte(&text, '\n');
      buf_append(&text, json_string_value(t), json_string_length(t));
    }
    json_object_set_new(m, "content", json_stringn(text.data ? text.data : "", text.len));
    buf_free(&text);
  }
  const json_t *tools = json_object_get(body, "tools");
  if (tools && !json_is_null(tools) && !json_is_array(tools)) return bad(req, "tools", "tools: expected array");
  json_t *tool;
  json_array_foreach(tools, i, tool) {
    if (!json_is_string(json_object_get(json_object_get(tool, "function"), "name"))) {
      snprintf(path, sizeof path, "tools[%zu].function.name", i);
      snprintf(msg, sizeof msg, "%s: required string is missing", path);
      return bad(req, path, msg);
    }
  }
  return 0;
}

static int parse_tool_choice(http_req *req, const json_t *body, gen_chat *c) {
  const json_t *tc = json_object_get(body, "tool_choice");
  c->tool_choice = GEN_TOOL_AUTO;
  if (!tc || json_is_null(tc)) return 0;
  const char *s = json_string_value(tc);
  if (s && strcmp(s, "none") == 0) c->tool_choice = GEN_TOOL_NONE;
  else if (s && strcmp(s, "required") == 0) c->tool_choice = GEN_TOOL_REQUIRED;
  else if (s && strcmp(s, "auto") == 0) c->tool_choice = GEN_TOOL_AUTO;
  else if (json_is_object(tc) && json_is_string(json_object_get(json_object_get(tc, "function"), "name")))
    c->tool_choice = GEN_TOOL_FUNCTION;
  else return bad(req, "tool_choice", "tool_choice: expected \"auto\", \"none\", \"required\" or a function");
  if (c->tool_choice == GEN_TOOL_FUNCTION) { /* the named function must be one of the tools */
    const char *name = json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
    size_t i;
    const json_t *t;
    json_array_foreach(c->tools, i, t) {
      const char *tn = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
      if (tn && strcmp(tn, name) == 0) return 0;
    }
    char msg[300];
    snprintf(msg, sizeof msg, "tool_choice: no tool named '%.200s' in tools", name);
    return bad(req, "tool_choice", msg);
  }
  return 0;
}

/* Runs the job with the v0 renderer; takes mm and g's contents. */
static void v0_generate(http_req *req, manager_model *mm, const char *label, openai_gen *g, const tok_ids *ids,
                        enum v0_kind kind, const outparse_config *pc) {
  struct v0 *o = calloc(1, sizeof *o);
  if (o) {
    o->kind = kind;
    o->stream = g->stream;
    o->include_usage = g->include_usage;
    o->max_tokens = g->p.er.max_tokens;
    o->created = time_wall_s();
    o->key = str_dup(label && *label ? label : mm->name);
    o->model_info = lms_model_info(mm);
    openai_make_id(o->id, sizeof o->id, kind == V0_CHAT ? "chatcmpl-" : "cmpl-");
  }
  if (!o || !o->key || !o->model_info) {
    v0_free(o);
    openai_gen_free(g);
    manager_release(mm);
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  gen_opts opts = {.stream = g->stream, .stream_kind = HTTP_STREAM_SSE,
                   .prompt_param = kind == V0_CHAT ? "messages" : "prompt"};
  gen_run(req, mm, &g->p, ids, pc, &opts, &v0_sink, o);
}

/* The common head of both handlers: model name, unlimited, the model. */
static int v0_head(http_req *req, lmstudio_ctx *lc, json_t *body, const char **key, bool *unlimited,
                   manager_model **mm) {
  *key = NULL;
  int rc = api_json_str(body, "", "model", false, key);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "model");
    return rc;
  }
  if ((rc = take_unlimited(req, body, unlimited))) return rc;
  const json_t *ttl = json_object_get(body, "ttl");
  int n_before = manager_n_loaded(lc->mgr);
  if ((rc = manager_get(lc->mgr, *key, mm))) {
    lms_error_manager(req, rc);
    return rc;
  }
  /* ttl (seconds; -1 = none) is the idle time of a model this request
   * loaded just in time; models loaded otherwise keep theirs. */
  if (json_is_integer(ttl) && json_integer_value(ttl) >= -1 && manager_n_loaded(lc->mgr) > n_before)
    manager_set_keep_alive(*mm, json_integer_value(ttl) < 0 ? MANAGER_KEEP_ALIVE_FOREVER : json_integer_value(ttl) * 1000);
  return 0;
}

void lms_v0_chat(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  openai_gen g;
  memset(&g, 0, sizeof g);
  tok_ids ids = TOK_IDS_INIT;
  manager_model *mm = NULL;
  const char *key = NULL;
  bool unlimited = false;
  if (normalise_messages(req, body)) goto done;
  gen_chat chat = {.messages = json_object_get(body, "messages"), .tools = json_object_get(body, "tools"),
                   .thinking = -1};
  if (parse_tool_choice(req, body, &chat)) goto done;
  if (v0_head(req, lc, body, &key, &unlimited, &mm)) goto done;
  if (openai_gen_parse(req, body, true, mm, &g) || parse_extras(req, body, unlimited, mm, &g)) goto done;
  if (!mm->chat) {
    lms_error(req, 400, "invalid_request", "model_not_supported", "model",
              "model '%s' has no chat template (use /api/v0/completions or /api/v0/embeddings)", mm->name);
    goto done;
  }
  outparse_config pc;
  int rc = gen_chat_prompt(mm, &chat, NULL, &ids, &pc);
  if (rc) {
    api_error(req, 400, rc, err_detail(), "messages");
    goto done;
  }
  const char *forced =
      json_string_value(json_object_get(json_object_get(json_object_get(body, "tool_choice"), "function"), "name"));
  if ((rc = gen_chat_force_tools(mm, &chat, forced, &g.p))) {
    api_error(req, 400, rc, err_detail(), "tool_choice");
    goto done;
  }
  v0_generate(req, mm, key, &g, &ids, V0_CHAT, &pc);
  mm = NULL; /* the job holds the reference now */
done:
  manager_release(mm);
  tok_ids_free(&ids);
  openai_gen_free(&g);
  json_decref(body);
}

void lms_v0_completions(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  openai_gen g;
  memset(&g, 0, sizeof g);
  tok_ids ids = TOK_IDS_INIT;
  manager_model *mm = NULL;
  const char *key = NULL;
  bool unlimited = false;
  const json_t *p = json_object_get(body, "prompt");
  if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
  if (!json_is_string(p)) {
    bad(req, "prompt", p ? "prompt: expected string" : "prompt: required field is missing");
    goto done;
  }
  if (v0_head(req, lc, body, &key, &unlimited, &mm)) goto done;
  if (openai_gen_parse(req, body, false, mm, &g) || parse_extras(req, body, unlimited, mm, &g)) goto done;
  /* LM Studio documents max_tokens as optional with no 16-token default. */
  if (!json_object_get(body, "max_tokens")) g.p.er.max_tokens = 0;
  int rc = gen_tokenize(mm->t, json_string_value(p), json_string_length(p), false, &ids);
  if (rc || !ids.n) {
    api_error(req, 400, rc ? rc : ERR_INVALID, rc ? err_detail() : "prompt: empty", "prompt");
    goto done;
  }
  v0_generate(req, mm, key, &g, &ids, V0_COMPLETION, NULL);
  mm = NULL;
done:
  manager_release(mm);
  tok_ids_free(&ids);
  openai_gen_free(&g);
  json_decref(body);
}

void lms_v0_embeddings(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  openai_embeddings(req, &lc->oa);
}
