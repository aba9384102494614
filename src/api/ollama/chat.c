/*
 * chat.c - POST /api/chat: a pure parser (ollama_chat_parse: the body into
 * the canonical request of api/request.h, errors in Ollama's words) and the
 * handler that resolves the model, applies a created model's settings and
 * runs the shared renderer in generate.c.
 *
 * Message mapping (../shared/specs/ollama.md 2.4): role lower-cased and one
 * of system/user/assistant/tool; content a string; `thinking` of an earlier
 * assistant turn becomes reasoning_content; `tool_calls`
 * ({function:{name, arguments: object}}) become OpenAI-shaped calls with an
 * id; a tool turn's `tool_name` becomes `name`, and its tool_call_id is
 * taken from the request or else from the assistant call of that name
 * (templates link results to calls by id). `images` must be valid base64;
 * parley's runtime has no image input yet, so a turn with images is a 400
 * naming it. A created model's SYSTEM is prepended when the conversation
 * has none, its MESSAGEs go before the conversation, and its PARAMETERs sit
 * under the request's own options.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/ollama/ollama.h"
#include "base/err.h"
#include "base/util.h"

/* msgs (a non-empty array) into r->messages, canonical; r->images when a
 * turn carries images. */
static int canonical_messages(const json_t *msgs, gen_request *r) {
  json_t *out = json_array();
  if (!out) return err_set(ERR_NOMEM, "out of memory");
  int rc = 0;
  size_t i;
  json_t *m;
  json_t *calls_seen = json_object(); /* tool name -> last call id */
  json_array_foreach(msgs, i, m) {
    if (!json_is_object(m)) {
      rc = err_set(ERR_TYPE, "messages[%zu]: expected object, got %s", i, api_json_type_name(m));
      goto fail;
    }
    const char *role = json_string_value(json_object_get(m, "role"));
    char lower[16] = "";
    for (size_t k = 0; role && role[k] && k + 1 < sizeof lower; k++) lower[k] = (char)tolower((unsigned char)role[k]);
    if (!role || (strcmp(lower, "system") && strcmp(lower, "user") && strcmp(lower, "assistant") &&
                  strcmp(lower, "tool"))) {
      rc = err_set(ERR_INVALID, "messages[%zu].role: expected one of system, user, assistant, tool", i);
      goto fail;
    }
    const json_t *content = json_object_get(m, "content");
    if (content && !json_is_null(content) && !json_is_string(content)) {
      rc = err_set(ERR_TYPE, "messages[%zu].content: expected string, got %s", i, api_json_type_name(content));
      goto fail;
    }
    /* the text as given, U+0000 included (Go keeps it) */
    json_t *cm = json_pack("{s:s, s:s%}", "role", lower, "content", json_is_string(content) ? json_string_value(content) : "",
                           json_string_length(content));
    if (!cm || json_array_append_new(out, cm)) goto oom;
    const json_t *images = json_object_get(m, "images");
    if (images && !json_is_null(images)) {
      if (!json_is_array(images)) {
        rc = err_set(ERR_TYPE, "messages[%zu].images: expected array of base64 strings", i);
        goto fail;
      }
      for (size_t k = 0; k < json_array_size(images); k++) {
        const json_t *im = json_array_get(images, k);
        if (!json_is_string(im) || !ollama_base64_valid(json_string_value(im), json_string_length(im))) {
          rc = err_set(ERR_INVALID, "messages[%zu].images[%zu]: illegal base64 data", i, k);
          goto fail;
        }
        r->images = true;
      }
    }
    const json_t *thinking = json_object_get(m, "thinking");
    if (json_string_length(thinking) && !strcmp(lower, "assistant"))
      json_object_set(cm, "reasoning_content", (json_t *)thinking);
    const json_t *tcs = json_object_get(m, "tool_calls");
    if (tcs && !json_is_null(tcs)) {
      if (!json_is_array(tcs)) {
        rc = err_set(ERR_TYPE, "messages[%zu].tool_calls: expected array", i);
        goto fail;
      }
      json_t *calls = json_array();
      size_t k;
      const json_t *tc;
      json_array_foreach(tcs, k, tc) {
        const json_t *fn = json_object_get(tc, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name) {
          rc = err_set(ERR_INVALID, "messages[%zu].tool_calls[%zu].function.name: required string is missing",
                     i, k);
          json_decref(calls);
          goto fail;
        }
        const json_t *args = json_object_get(fn, "arguments");
        json_t *argobj = json_is_object(args)   ? json_incref((json_t *)args)
                         : json_is_string(args) ? json_loads(json_string_value(args), 0, NULL)
                                                : json_object();
        if (!json_is_object(argobj)) {
          json_decref(argobj);
          rc = err_set(ERR_TYPE, "messages[%zu].tool_calls[%zu].function.arguments: expected object", i, k);
          json_decref(calls);
          goto fail;
        }
        const char *id = json_string_value(json_object_get(tc, "id"));
        char idbuf[64];
        if (!id || !*id) {
          snprintf(idbuf, sizeof idbuf, "call_%zu_%zu", i, k);
          id = idbuf;
        }
        json_object_set_new(calls_seen, name, json_string(id));
        json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:o}}", "id", id, "type", "function", "function",
                                               "name", name, "arguments", argobj));
      }
      json_object_set_new(cm, "tool_calls", calls);
    }
    if (!strcmp(lower, "tool")) {
      const char *tname = json_string_value(json_object_get(m, "tool_name"));
      if (!tname) tname = json_string_value(json_object_get(m, "name"));
      const char *tid = json_string_value(json_object_get(m, "tool_call_id"));
      if (tname) json_object_set_new(cm, "name", json_string(tname));
      if (!tid && tname) tid = json_string_value(json_object_get(calls_seen, tname));
      if (tid) json_object_set_new(cm, "tool_call_id", json_string(tid));
    }
  }
  json_decref(calls_seen);
  r->messages = out;
  return 0;
oom:
  rc = err_set(ERR_NOMEM, "out of memory");
fail:
  json_decref(calls_seen);
  json_decref(out);
  return rc;
}

/* tools: an array of {type:"function", function:{name, ...}}. */
static int check_tools(const json_t *tools) {
  if (!tools || json_is_null(tools)) return 0;
  if (!json_is_array(tools)) return err_set(ERR_TYPE, "tools: expected array, got %s", api_json_type_name(tools));
  size_t i;
  json_t *t;
  json_array_foreach(tools, i, t) {
    if (!json_is_string(json_object_get(json_object_get(t, "function"), "name")))
      return err_set(ERR_INVALID, "tools[%zu].function.name: required string is missing", i);
  }
  return 0;
}

int ollama_chat_parse(const json_t *body, gen_request *out) {
  gen_request_init(out);
  ollama_params_init(&out->p);
  out->stream = true;
  int rc = api_json_str(body, "", "model", false, &out->model);
  if (rc && rc != ERR_NOT_FOUND) return rc;
  if ((rc = ollama_logprobs_fields(body, &out->logprobs, &out->top_logprobs))) return rc;
  if (!out->model || !*out->model) return err_set(ERR_INVALID, "model is required");
  if (!ollama_name_valid(out->model)) return err_set(ERR_INVALID, "invalid model name");
  const json_t *in = json_object_get(body, "messages");
  if (in && !json_is_null(in) && !json_is_array(in))
    return err_set(ERR_TYPE, "messages: expected array, got %s", api_json_type_name(in));
  const json_t *tools = json_object_get(body, "tools");
  bool ka_set = false;
  int64_t ka_ms = 0;
  if ((rc = check_tools(tools)) || (rc = ollama_stream(body, &out->stream)) ||
      (rc = ollama_think(json_object_get(body, "think"), &out->chat.thinking, &out->chat.effort)) ||
      (rc = ollama_keep_alive(json_object_get(body, "keep_alive"), &ka_set, &ka_ms)) ||
      (rc = ollama_format(json_object_get(body, "format"), &out->p)) ||
      (rc = ollama_options(json_object_get(body, "options"), &out->p)))
    return rc;
  if (ka_set) out->ttl_ms = ka_ms;
  if (json_array_size(tools)) out->tools = json_incref((json_t *)tools);
  if (json_array_size(in) && (rc = canonical_messages(in, out))) return rc;
  out->chat.messages = out->messages;
  out->chat.tools = out->tools;
  return 0;
}

/* A created model's settings (its overlay entry) over the parsed request:
 * PARAMETERs under the request's options (applied, then the request's
 * options again on top), SYSTEM first unless the conversation opens with
 * one, MESSAGEs before the conversation. */
static int apply_overlay(const json_t *over, const json_t *body, gen_request *r) {
  int rc = ollama_options(json_object_get(over, "parameters"), &r->p);
  if (rc || (rc = ollama_options(json_object_get(body, "options"), &r->p))) return rc;
  if (!r->messages) return 0;
  json_t *pre = json_array();
  if (!pre) return err_set(ERR_NOMEM, "out of memory");
  const char *sys = json_string_value(json_object_get(over, "system"));
  const char *r0 = json_string_value(json_object_get(json_array_get(r->messages, 0), "role"));
  if (sys && *sys && !(r0 && strcmp(r0, "system") == 0))
    json_array_append_new(pre, json_pack("{s:s, s:s}", "role", "system", "content", sys));
  size_t i;
  json_t *m;
  json_array_foreach(json_object_get(over, "messages"), i, m) json_array_append(pre, m);
  if (json_array_extend(pre, r->messages)) {
    json_decref(pre);
    return err_set(ERR_NOMEM, "out of memory");
  }
  json_decref(r->messages);
  r->messages = r->chat.messages = pre;
  return 0;
}

void ollama_chat(http_req *req, void *ctx) {
  ollama_ctx *oc = ctx;
  uint64_t t0 = time_mono_ns();
  json_t *body = ollama_body(req);
  if (!body) return;
  manager_model *mm = NULL;
  json_t *over = NULL;
  tok_ids ids = TOK_IDS_INIT;
  gen_request r;
  int rc = ollama_chat_parse(body, &r);
  if (rc) {
    ollama_answer(req, rc);
    goto done;
  }
  const char *mname = r.model;
  over = ollama_overlay_get(oc, mname);
  if (over && (rc = apply_overlay(over, body, &r))) {
    ollama_answer(req, rc);
    goto done;
  }
  bool ka_set = r.ttl_ms != GEN_TTL_NONE;
  int64_t ka_ms = ka_set ? r.ttl_ms : 0;
  if (!r.messages && ka_set && ka_ms == 0) {
    ollama_model_unload(oc, mname);
    ollama_answer_load(req, OLLAMA_CHAT, mname, "unload");
    goto done;
  }
  uint64_t tl = time_mono_ns();
  if ((rc = ollama_model_get(oc, mname, ka_set, ka_ms, &mm))) {
    ollama_error_manager(req, rc, mname);
    goto done;
  }
  uint64_t load_ns = time_mono_ns() - tl;
  if (!mm->eng || !mm->chat) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "\"%s\" does not support chat", mname);
    goto done;
  }
  if (r.chat.thinking == 1 && !(mm->fam.caps & FAMILY_CAP_REASONING)) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "\"%s\" does not support thinking", mname);
    goto done;
  }
  if (r.images) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "\"%s\" does not support images: %s", mname,
               mm->fam.caps & FAMILY_CAP_VISION ? "parley's runtime has no image input yet"
                                                : "the model has no vision input");
    goto done;
  }
  if (!r.messages) {
    ollama_answer_load(req, OLLAMA_CHAT, mname, "load");
    goto done;
  }
  outparse_config pc;
  if ((rc = gen_chat_prompt(mm, &r.chat, NULL, &ids, &pc))) {
    ollama_answer(req, rc);
    goto done;
  }
  if (ollama_debug_render(req, body, mm, OLLAMA_CHAT, mname, &ids)) goto done;
  ollama_run run = {.kind = OLLAMA_CHAT, .model = mname, .stream = r.stream, .logprobs = r.logprobs,
                    .think_off = r.chat.thinking == 0, .top_logprobs = r.top_logprobs, .t0_ns = t0,
                    .load_ns = load_ns};
  ollama_generate_run(req, mm, &r.p, &ids, &pc, &run);
  mm = NULL;
done:
  manager_release(mm);
  gen_request_free(&r);
  tok_ids_free(&ids);
  json_decref(over);
  json_decref(body);
}
