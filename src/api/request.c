/*
 * request.c - the canonical request (request.h): its life cycle, the one
 * normalisation of OpenAI-shaped chat input (messages, tools, tool_choice)
 * that OpenAI chat and LM Studio v0 share, the model-bound checks, and the
 * driver every chat-like handler ends in (gen_prepare / gen_handle).
 *
 * The driver's order is the same for every dialect: the model (404 in the
 * dialect's words when unknown), the idle time of a model this request
 * loaded, choices and logit_bias against the model, the chat template
 * (400 when the model has none), rendering and tokenizing, forcing a tool
 * call, then gen_run (which answers the errors it finds itself: context
 * overflow, queue full, a schema that does not compile).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/request.h"
#include "base/err.h"
#include "base/util.h"

void gen_request_init(gen_request *r) {
  memset(r, 0, sizeof *r);
  gen_params_init(&r->p);
  r->chat.thinking = -1;
  r->ttl_ms = GEN_TTL_NONE;
  r->prompt_param = "messages";
}

void gen_request_free(gen_request *r) {
  char param[GEN_PARAM_MAX];
  memcpy(param, r->param, sizeof param);
  json_decref(r->messages);
  json_decref(r->tools);
  gen_params_free(&r->p);
  memset(r, 0, sizeof *r);
  memcpy(r->param, param, sizeof param);
}

int gen_request_fail(gen_request *r, int code, const char *param, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(r->param, sizeof r->param, "%s", param ? param : "");
  return err_set(code, "%s", msg);
}

/* ---- OpenAI-shaped messages ------------------------------------------------------ */

/* A content array's text parts joined with '\n' into out; any other part
 * refused naming it. */
static int join_text_parts(gen_request *r, const json_t *content, const char *cpath, buf *out) {
  size_t k;
  const json_t *part;
  json_array_foreach(content, k, part) {
    char ppath[112];
    snprintf(ppath, sizeof ppath, "%s[%zu]", cpath, k);
    const char *type = json_string_value(json_object_get(part, "type"));
    const json_t *t = json_object_get(part, "text");
    if (type && strcmp(type, "image_url") == 0)
      return gen_request_fail(r, ERR_UNSUPPORTED, ppath, "%s: this model cannot read images (no vision support)",
                              ppath);
    if (type && strcmp(type, "text") != 0)
      return gen_request_fail(r, ERR_UNSUPPORTED, ppath, "%s: content part type '%.64s' is not supported by this "
                              "model", ppath, type);
    if (!type || !json_is_string(t))
      return gen_request_fail(r, ERR_INVALID, ppath, "%s: expected {\"type\":\"text\",\"text\":string}", ppath);
    if (k) buf_append_byte(out, '\n');
    buf_append(out, json_string_value(t), json_string_length(t));
  }
  return 0;
}

int gen_openai_messages(const json_t *body, gen_request *r) {
  const json_t *msgs = json_object_get(body, "messages");
  if (!msgs || json_is_null(msgs))
    return gen_request_fail(r, ERR_INVALID, "messages", "messages: required field is missing");
  if (!json_is_array(msgs))
    return gen_request_fail(r, ERR_TYPE, "messages", "messages: expected array, got %s", api_json_type_name(msgs));
  if (!json_array_size(msgs))
    return gen_request_fail(r, ERR_INVALID, "messages", "messages: must hold at least one message");
  json_decref(r->messages);
  if (!(r->messages = json_deep_copy(msgs))) return gen_request_fail(r, ERR_NOMEM, NULL, "out of memory");
  static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", "function"};
  size_t i;
  json_t *m;
  json_array_foreach(r->messages, i, m) {
    char path[64], rpath[80], cpath[80];
    snprintf(path, sizeof path, "messages[%zu]", i);
    if (!json_is_object(m))
      return gen_request_fail(r, ERR_TYPE, path, "%s: expected object, got %s", path, api_json_type_name(m));
    snprintf(rpath, sizeof rpath, "%s.role", path);
    const char *role = json_string_value(json_object_get(m, "role"));
    bool ok = false;
    for (size_t k = 0; role && k < ARRAY_LEN(roles); k++) ok |= strcmp(role, roles[k]) == 0;
    if (!ok)
      return gen_request_fail(r, ERR_INVALID, rpath, "%s: expected one of system, developer, user, assistant, tool",
                              rpath);
    bool assistant = strcmp(role, "assistant") == 0;
    if (strcmp(role, "developer") == 0) json_object_set_new(m, "role", json_string("system"));
    snprintf(cpath, sizeof cpath, "%s.content", path);
    json_t *content = json_object_get(m, "content");
    if (!content || json_is_null(content)) {
      if (!assistant) return gen_request_fail(r, ERR_INVALID, cpath, "%s: required for this role", cpath);
      continue;
    }
    if (json_is_string(content)) continue;
    if (!json_is_array(content))
      return gen_request_fail(r, ERR_TYPE, cpath, "%s: expected string or array of content parts", cpath);
    buf text = BUF_INIT;
    int rc = join_text_parts(r, content, cpath, &text);
    if (!rc) json_object_set_new(m, "content", json_stringn(text.data ? text.data : "", text.len));
    buf_free(&text);
    if (rc) return rc;
  }
  r->chat.messages = r->messages;
  return 0;
}

int gen_openai_tools(const json_t *body, gen_request *r) {
  const json_t *tools = json_object_get(body, "tools");
  if (!tools || json_is_null(tools)) return 0;
  if (!json_is_array(tools))
    return gen_request_fail(r, ERR_TYPE, "tools", "tools: expected array, got %s", api_json_type_name(tools));
  size_t i;
  const json_t *tool;
  json_array_foreach(tools, i, tool) {
    char path[64];
    snprintf(path, sizeof path, "tools[%zu].function.name", i);
    if (!json_is_string(json_object_get(json_object_get(tool, "function"), "name")))
      return gen_request_fail(r, ERR_INVALID, path, "%s: required string is missing", path);
  }
  json_decref(r->tools);
  if (!(r->tools = json_deep_copy(tools))) return gen_request_fail(r, ERR_NOMEM, NULL, "out of memory");
  r->chat.tools = r->tools;
  return 0;
}

int gen_openai_tool_choice(const json_t *body, gen_request *r) {
  const json_t *tc = json_object_get(body, "tool_choice");
  r->chat.tool_choice = GEN_TOOL_AUTO;
  r->tool_name = NULL;
  if (!tc || json_is_null(tc)) return 0;
  const char *s = json_string_value(tc);
  const char *name = json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
  if (s && strcmp(s, "none") == 0) r->chat.tool_choice = GEN_TOOL_NONE;
  else if (s && strcmp(s, "required") == 0) r->chat.tool_choice = GEN_TOOL_REQUIRED;
  else if (s && strcmp(s, "auto") == 0) r->chat.tool_choice = GEN_TOOL_AUTO;
  else if (json_is_object(tc) && name) r->chat.tool_choice = GEN_TOOL_FUNCTION;
  else
    return gen_request_fail(r, ERR_INVALID, "tool_choice", "tool_choice: expected \"none\", \"auto\", \"required\" or "
                            "{\"type\":\"function\",\"function\":{\"name\":...}}");
  if (r->chat.tool_choice != GEN_TOOL_FUNCTION) return 0;
  size_t i;
  const json_t *t;
  json_array_foreach(r->tools, i, t) {
    const char *tn = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
    if (tn && strcmp(tn, name) == 0) {
      r->tool_name = name;
      return 0;
    }
  }
  return gen_request_fail(r, ERR_INVALID, "tool_choice", "tool_choice: no tool named '%.200s' in tools", name);
}

/* ---- model-bound checks --------------------------------------------------------------- */

int gen_request_bind(gen_request *r, const manager_model *mm) {
  int32_t n_slots = mm->eng ? engine_n_slots(mm->eng) : 1;
  if (r->p.er.n > n_slots)
    return gen_request_fail(r, ERR_RANGE, "n", "n: %d is out of range (expected 1 to %d)", (int)r->p.er.n,
                            (int)n_slots);
  const json_t *lb = r->logit_bias;
  size_t n = json_object_size(lb);
  if (!n) return 0;
  int32_t n_vocab = tok_n_vocab(mm->t);
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)lb, key, v) {
    char path[96];
    snprintf(path, sizeof path, "logit_bias.%.64s", key);
    char *end = NULL;
    long id = strtol(key, &end, 10);
    if (!*key || *end || id < 0 || id >= n_vocab)
      return gen_request_fail(r, ERR_RANGE, path, "%s: '%.64s' is not a token id of this model (0 to %d)", path, key,
                              n_vocab - 1);
    if (!json_is_number(v))
      return gen_request_fail(r, ERR_TYPE, path, "%s: expected number, got %s", path, api_json_type_name(v));
    double b = json_number_value(v);
    if (!(b >= -100 && b <= 100))
      return gen_request_fail(r, ERR_RANGE, path, "%s: %g is out of range (expected -100 to 100)", path, b);
    if (gen_params_add_bias(&r->p, n, (int32_t)id, b <= -100 ? -INFINITY : (float)b))
      return gen_request_fail(r, ERR_NOMEM, NULL, "out of memory");
  }
  r->logit_bias = NULL; /* moved into p */
  return 0;
}

/* ---- answering ------------------------------------------------------------------------ */

void gen_front_error(const gen_front *f, http_req *req, int status, int code, const char *message, const char *param) {
  if (f && f->error) f->error(req, status, code, message, param);
  else api_error(req, status, code, message, param);
}

int gen_front_parse_error(const gen_front *f, http_req *req, const gen_request *r, int rc) {
  gen_front_error(f, req, rc == ERR_NOMEM ? 500 : 400, rc, err_detail(), r->param[0] ? r->param : NULL);
  return rc;
}

/* ---- the driver ----------------------------------------------------------------------- */

/* manager_get's failure in the dialect's words: 404 for an unknown name, 400
 * for no name without a default or an unsupported family, else by code. */
static void model_error(http_req *req, const gen_front *f, const gen_request *r, int rc) {
  if (rc == ERR_NOT_FOUND && f->not_found_fmt) {
    char msg[320];
    snprintf(msg, sizeof msg, f->not_found_fmt, r->model ? r->model : "");
    gen_front_error(f, req, 404, rc, msg, "model");
  } else if (rc == ERR_NOT_FOUND) {
    gen_front_error(f, req, 404, rc, err_detail(), "model");
  } else if (rc == ERR_UNSUPPORTED || rc == ERR_INVALID) {
    gen_front_error(f, req, 400, rc, err_detail(), "model");
  } else { /* a listed model that does not load: the detail names the file */
    gen_front_error(f, req, 0, rc, err_detail(), NULL);
  }
}

int gen_prepare(http_req *req, manager *mgr, const gen_front *f, gen_request *r, gen_ready *out) {
  memset(out, 0, sizeof *out);
  int n_before = r->ttl_ms != GEN_TTL_NONE ? manager_n_loaded(mgr) : 0;
  int rc = manager_get(mgr, r->model, &out->mm);
  if (rc) {
    model_error(req, f, r, rc);
    return rc;
  }
  /* the idle time is for a model this request loaded just in time; models
   * loaded otherwise keep theirs */
  if (r->ttl_ms != GEN_TTL_NONE && manager_n_loaded(mgr) > n_before) manager_set_keep_alive(out->mm, r->ttl_ms);
  if ((rc = gen_request_bind(r, out->mm))) {
    gen_front_parse_error(f, req, r, rc);
    goto fail;
  }
  if (r->prompt) {
    rc = gen_tokenize(out->mm->t, r->prompt, r->prompt_len, false, &out->ids);
    if (!rc && !out->ids.n) rc = err_set(ERR_INVALID, "%s: empty", r->prompt_param);
    if (rc) {
      gen_front_error(f, req, 400, rc, err_detail(), r->prompt_param);
      goto fail;
    }
    out->pc = (outparse_config){0};
    return 0;
  }
  if (!out->mm->chat) {
    char msg[320];
    snprintf(msg, sizeof msg, f->no_chat_fmt ? f->no_chat_fmt : "model '%s' has no chat template", out->mm->name);
    gen_front_error(f, req, 400, rc = ERR_UNSUPPORTED, msg, "model");
    goto fail;
  }
  if ((rc = gen_chat_prompt(out->mm, &r->chat, NULL, &out->ids, &out->pc))) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s%s", f->template_prefix ? f->template_prefix : "", err_detail());
    gen_front_error(f, req, 400, rc, msg, r->prompt_param);
    goto fail;
  }
  /* tool_choice required/function: a grammar makes the model write the call */
  if ((rc = gen_chat_force_tools(out->mm, &r->chat, r->tool_name, &r->p))) {
    gen_front_error(f, req, 400, rc, err_detail(), "tool_choice");
    goto fail;
  }
  return 0;
fail:
  gen_ready_free(out);
  return rc;
}

void gen_ready_free(gen_ready *g) {
  manager_release(g->mm);
  tok_ids_free(&g->ids);
  memset(g, 0, sizeof *g);
}

void gen_handle(http_req *req, manager *mgr, const gen_front *f, gen_request *r, const gen_sink *sink,
                gen_make_ctx make, void *arg) {
  gen_ready g;
  if (gen_prepare(req, mgr, f, r, &g)) return;
  void *ctx = make(arg, r, &g);
  if (!ctx) {
    gen_front_error(f, req, 500, ERR_NOMEM, "out of memory", NULL);
    gen_ready_free(&g);
    return;
  }
  gen_opts opts = {.stream = r->stream, .stream_kind = f->stream_kind, .prompt_param = r->prompt_param};
  gen_run(req, g.mm, &r->p, &g.ids, r->prompt ? NULL : &g.pc, &opts, sink, ctx);
  g.mm = NULL; /* the job holds the reference now */
  gen_ready_free(&g);
}
