/*
 * chat.c - POST /v1/chat/completions: the request's translation into
 * canonical messages and the chat.completion renderer of the canonical
 * generation layer (openai_generate). Legacy completions have their own
 * renderer (completions.c).
 *
 * Request path: check the body (messages, sampling fields: errors name the
 * JSON path), load the model through the manager, normalise the messages
 * into canonical ones (text parts joined, "developer" rendered as
 * "system"), render and tokenize them with gen_chat_prompt, and hand the
 * job to gen_run with the sink below.
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

void openai_generate(http_req *req, manager_model *mm, const char *model_label, openai_gen *g, const tok_ids *ids,
                     const outparse_config *parse) {
  struct oa *o = calloc(1, sizeof *o);
  int n = g->p.er.n > 0 ? g->p.er.n : 1;
  if (o) {
    o->n = n;
    o->stream = g->stream;
    o->include_usage = g->include_usage;
    o->top_logprobs = g->top_logprobs;
    o->created = time_wall_s();
    o->model = str_dup(model_label && *model_label ? model_label : mm->name);
    o->logprobs = calloc((size_t)n, sizeof *o->logprobs);
    openai_make_id(o->id, sizeof o->id, "chatcmpl-");
  }
  if (!o || !o->model || !o->logprobs) {
    oa_free(o);
    openai_gen_free(g);
    manager_release(mm);
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  gen_opts opts = {.stream = g->stream, .stream_kind = HTTP_STREAM_SSE, .prompt_param = "messages"};
  gen_run(req, mm, &g->p, ids, parse, &opts, &oa_sink, o);
}

/* ---- the chat request ---------------------------------------------------- */

/* Records the error (the message from fmt and a) and the JSON path of the
 * field it names. The path is copied: callers build it on their stack. */
static int bad(char *param_out, int code, const char *param, const char *fmt, const char *a) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a);
  snprintf(param_out, OPENAI_PARAM_MAX, "%s", param);
  return err_set(code, "%s", msg);
}

/* Checks messages and rewrites them in place (body is the handler's copy). */
static int normalise_messages(char *param, json_t *body) {
  json_t *msgs = json_object_get(body, "messages");
  if (!msgs) return bad(param, ERR_INVALID, "messages", "messages: required field is missing%s", "");
  if (!json_is_array(msgs))
    return bad(param, ERR_TYPE, "messages", "messages: expected array, got %s", api_json_type_name(msgs));
  if (json_array_size(msgs) == 0)
    return bad(param, ERR_INVALID, "messages", "messages: must hold at least one message%s", "");
  static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", "function"};
  size_t i;
  json_t *m;
  json_array_foreach(msgs, i, m) {
    char path[64];
    snprintf(path, sizeof path, "messages[%zu]", i);
    if (!json_is_object(m)) return bad(param, ERR_TYPE, path, "%s: expected object", path);
    char rpath[80];
    snprintf(rpath, sizeof rpath, "%s.role", path);
    const char *role = json_string_value(json_object_get(m, "role"));
    bool ok = false;
    for (size_t r = 0; role && r < ARRAY_LEN(roles); r++) ok |= strcmp(role, roles[r]) == 0;
    if (!ok)
      return bad(param, ERR_INVALID, rpath, "%s: expected one of system, developer, user, assistant, tool", rpath);
    if (strcmp(role, "developer") == 0) json_object_set_new(m, "role", json_string("system"));
    char cpath[80];
    snprintf(cpath, sizeof cpath, "%s.content", path);
    json_t *content = json_object_get(m, "content");
    if (!content || json_is_null(content)) {
      if (strcmp(role, "assistant") != 0)
        return bad(param, ERR_INVALID, cpath, "%s: required for this role", cpath);
      continue;
    }
    if (json_is_string(content)) continue;
    if (!json_is_array(content))
      return bad(param, ERR_TYPE, cpath, "%s: expected string or array of content parts", cpath);
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
          return bad(param, ERR_UNSUPPORTED, tpath, "content part type '%s' is not supported by this model", type);
        }
        return bad(param, ERR_INVALID, ppath, "%s: expected {\"type\":\"text\",\"text\":string}", ppath);
      }
      if (k) buf_append_byte(&text, '\n');
      buf_append(&text, json_string_value(t), json_string_length(t));
    }
    json_object_set_new(m, "content", json_stringn(text.data ? text.data : "", text.len));
    buf_free(&text);
  }
  const json_t *tools = json_object_get(body, "tools");
  if (tools && !json_is_null(tools) && !json_is_array(tools))
    return bad(param, ERR_TYPE, "tools", "tools: expected array, got %s", api_json_type_name(tools));
  json_t *tool;
  json_array_foreach(tools, i, tool) {
    char path[64];
    snprintf(path, sizeof path, "tools[%zu].function.name", i);
    const json_t *fn = json_object_get(tool, "function");
    if (!json_is_string(json_object_get(fn, "name")))
      return bad(param, ERR_INVALID, path, "%s: required string is missing", path);
  }
  return 0;
}

/* tool_choice: "none" | "auto" | "required" | {"type":"function",
 * "function":{"name"}}. */
static int parse_tool_choice(char *param, const json_t *body, gen_chat *c) {
  const json_t *tc = json_object_get(body, "tool_choice");
  c->tool_choice = GEN_TOOL_AUTO;
  if (!tc || json_is_null(tc)) return 0;
  const char *s = json_string_value(tc);
  if (s && strcmp(s, "none") == 0) c->tool_choice = GEN_TOOL_NONE;
  else if (s && strcmp(s, "required") == 0) c->tool_choice = GEN_TOOL_REQUIRED;
  else if (s && strcmp(s, "auto") == 0) c->tool_choice = GEN_TOOL_AUTO;
  else if (json_is_object(tc) && json_is_string(json_object_get(json_object_get(tc, "function"), "name")))
    c->tool_choice = GEN_TOOL_FUNCTION;
  else
    return bad(param, ERR_INVALID, "tool_choice",
               "tool_choice: expected \"none\", \"auto\", \"required\" or {\"type\":\"function\",\"function\":{\"name\":...}}%s",
               "");
  return 0;
}

/* reasoning_effort: "none"/"minimal" turn the family's thinking off, the
 * others leave it on and set the level of a model whose reasoning has
 * levels (gen_effort_of); chat_template_kwargs.enable_thinking wins. */
static int parse_thinking(char *param, const json_t *body, gen_chat *c) {
  c->thinking = -1;
  const json_t *re = json_object_get(body, "reasoning_effort");
  if (re && !json_is_null(re)) {
    const char *s = json_string_value(re);
    static const char *const ok[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    bool known = false;
    for (size_t i = 0; s && i < ARRAY_LEN(ok); i++) known |= strcmp(s, ok[i]) == 0;
    if (!known)
      return bad(param, ERR_INVALID, "reasoning_effort",
                 "reasoning_effort: expected one of none, minimal, low, medium, high, xhigh, max%s", "");
    c->thinking = strcmp(s, "none") == 0 || strcmp(s, "minimal") == 0 ? 0 : 1;
    c->effort = gen_effort_of(s);
  }
  const json_t *kw = json_object_get(body, "chat_template_kwargs");
  if (kw && !json_is_null(kw) && !json_is_object(kw))
    return bad(param, ERR_TYPE, "chat_template_kwargs", "chat_template_kwargs: expected object, got %s",
               api_json_type_name(kw));
  const json_t *et = json_object_get(kw, "enable_thinking");
  if (json_is_boolean(et)) c->thinking = json_is_true(et);
  c->template_kwargs = json_is_object(kw) ? kw : NULL;
  return 0;
}

/* add_generation_prompt (default true) and continue_final_message (default
 * false), vLLM's extensions: the prompt ends without the assistant header,
 * or inside the final (assistant) message, which the model continues. */
static int parse_generation_prompt(char *param, const json_t *body, gen_chat *c) {
  static const char *const keys[] = {"add_generation_prompt", "continue_final_message"};
  bool v[2] = {true, false};
  for (size_t i = 0; i < 2; i++) {
    const json_t *x = json_object_get(body, keys[i]);
    if (!x || json_is_null(x)) continue;
    if (!json_is_boolean(x)) return bad(param, ERR_TYPE, keys[i], "%s: expected boolean", keys[i]);
    v[i] = json_is_true(x);
  }
  if (v[0] && v[1])
    return bad(param, ERR_INVALID, "continue_final_message",
               "continue_final_message: cannot be true together with add_generation_prompt (set it false)%s", "");
  const json_t *msgs = json_object_get(body, "messages");
  const json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
  const char *role = json_string_value(json_object_get(last, "role"));
  if (v[1] && (!role || strcmp(role, "assistant") != 0))
    return bad(param, ERR_INVALID, "continue_final_message",
               "continue_final_message: the last message must be an assistant message%s", "");
  c->no_generation_prompt = !v[0];
  c->continue_final = v[1];
  return 0;
}

int openai_chat_request(json_t *body, gen_chat *c, char param[OPENAI_PARAM_MAX]) {
  memset(c, 0, sizeof *c);
  param[0] = '\0';
  int rc = normalise_messages(param, body);
  if (!rc) {
    c->messages = json_object_get(body, "messages");
    const json_t *tools = json_object_get(body, "tools");
    c->tools = json_is_array(tools) ? tools : NULL;
    rc = parse_tool_choice(param, body, c);
  }
  if (!rc) rc = parse_thinking(param, body, c);
  if (!rc) rc = parse_generation_prompt(param, body, c);
  return rc;
}

void openai_chat_completions(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  if (openai_check_fields(req, body, OPENAI_SHAPE_CHAT)) {
    json_decref(body);
    return;
  }
  openai_gen g;
  memset(&g, 0, sizeof g);
  tok_ids ids = TOK_IDS_INIT;
  manager_model *mm = NULL;
  const char *model_name = NULL;
  int rc = api_json_str(body, "", "model", false, &model_name);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "model");
    goto done;
  }
  gen_chat chat;
  char param[OPENAI_PARAM_MAX];
  if ((rc = openai_chat_request(body, &chat, param))) {
    api_error(req, 400, rc, err_detail(), param);
    goto done;
  }
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
  outparse_config pc;
  if ((rc = gen_chat_prompt(mm, &chat, NULL, &ids, &pc))) {
    api_error(req, 400, rc, err_detail(), "messages");
    goto done;
  }
  const char *forced = json_string_value(json_object_get(json_object_get(json_object_get(body, "tool_choice"), "function"), "name"));
  if ((rc = gen_chat_force_tools(mm, &chat, forced, &g.p))) {
    api_error(req, 400, rc, err_detail(), "tool_choice");
    goto done;
  }
  openai_generate(req, mm, model_name, &g, &ids, &pc);
  mm = NULL; /* the job holds the reference now */
done:
  manager_release(mm);
  tok_ids_free(&ids);
  openai_gen_free(&g);
  json_decref(body);
}
