/*
 * chat.c - POST /api/chat: Ollama messages into canonical ones, then the
 * shared renderer in generate.c.
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
 * has none, and its MESSAGEs go before the conversation.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/ollama/ollama.h"
#include "base/err.h"
#include "base/util.h"


/* Builds the canonical messages (a new array) or answers 400. */
static json_t *canonical_messages(http_req *req, const json_t *msgs, const json_t *over, bool *has_images) {
  json_t *out = json_array();
  *has_images = false;
  if (!out) return NULL;
  const char *sys = over ? json_string_value(json_object_get(over, "system")) : NULL;
  const json_t *first = json_array_get(msgs, 0);
  const char *r0 = json_string_value(json_object_get(first, "role"));
  if (sys && *sys && !(r0 && strcasecmp(r0, "system") == 0))
    json_array_append_new(out, json_pack("{s:s, s:s}", "role", "system", "content", sys));
  size_t i;
  json_t *m;
  json_array_foreach(over ? json_object_get(over, "messages") : NULL, i, m) json_array_append(out, m);
  json_t *calls_seen = json_object(); /* tool name -> last call id */
  json_array_foreach(msgs, i, m) {
    if (!json_is_object(m)) {
      ollama_err(req, 400, ERR_TYPE, "messages[%zu]: expected object, got %s", i, api_json_type_name(m));
      goto fail;
    }
    const char *role = json_string_value(json_object_get(m, "role"));
    char lower[16] = "";
    for (size_t k = 0; role && role[k] && k + 1 < sizeof lower; k++) lower[k] = (char)tolower((unsigned char)role[k]);
    if (!role || (strcmp(lower, "system") && strcmp(lower, "user") && strcmp(lower, "assistant") &&
                  strcmp(lower, "tool"))) {
      ollama_err(req, 400, ERR_INVALID, "messages[%zu].role: expected one of system, user, assistant, tool", i);
      goto fail;
    }
    const json_t *content = json_object_get(m, "content");
    if (content && !json_is_null(content) && !json_is_string(content)) {
      ollama_err(req, 400, ERR_TYPE, "messages[%zu].content: expected string, got %s", i, api_json_type_name(content));
      goto fail;
    }
    /* the text as given, U+0000 included (Go keeps it) */
    json_t *cm = json_pack("{s:s, s:s%}", "role", lower, "content", json_is_string(content) ? json_string_value(content) : "",
                           json_string_length(content));
    if (!cm || json_array_append_new(out, cm)) goto oom;
    const json_t *images = json_object_get(m, "images");
    if (images && !json_is_null(images)) {
      if (!json_is_array(images)) {
        ollama_err(req, 400, ERR_TYPE, "messages[%zu].images: expected array of base64 strings", i);
        goto fail;
      }
      for (size_t k = 0; k < json_array_size(images); k++) {
        const json_t *im = json_array_get(images, k);
        if (!json_is_string(im) || !ollama_base64_valid(json_string_value(im), json_string_length(im))) {
          ollama_err(req, 400, ERR_INVALID, "messages[%zu].images[%zu]: illegal base64 data", i, k);
          goto fail;
        }
        *has_images = true;
      }
    }
    const json_t *thinking = json_object_get(m, "thinking");
    if (json_string_length(thinking) && !strcmp(lower, "assistant"))
      json_object_set(cm, "reasoning_content", (json_t *)thinking);
    const json_t *tcs = json_object_get(m, "tool_calls");
    if (tcs && !json_is_null(tcs)) {
      if (!json_is_array(tcs)) {
        ollama_err(req, 400, ERR_TYPE, "messages[%zu].tool_calls: expected array", i);
        goto fail;
      }
      json_t *calls = json_array();
      size_t k;
      const json_t *tc;
      json_array_foreach(tcs, k, tc) {
        const json_t *fn = json_object_get(tc, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name) {
          ollama_err(req, 400, ERR_INVALID, "messages[%zu].tool_calls[%zu].function.name: required string is missing",
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
          ollama_err(req, 400, ERR_TYPE, "messages[%zu].tool_calls[%zu].function.arguments: expected object", i, k);
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
  return out;
oom:
  ollama_err(req, 500, ERR_NOMEM, "out of memory");
fail:
  json_decref(calls_seen);
  json_decref(out);
  return NULL;
}

/* tools: an array of {type:"function", function:{name, ...}}. */
static int check_tools(http_req *req, const json_t *tools) {
  if (!tools || json_is_null(tools)) return 0;
  if (!json_is_array(tools)) {
    ollama_err(req, 400, ERR_TYPE, "tools: expected array, got %s", api_json_type_name(tools));
    return ERR_TYPE;
  }
  size_t i;
  json_t *t;
  json_array_foreach(tools, i, t) {
    if (!json_is_string(json_object_get(json_object_get(t, "function"), "name"))) {
      ollama_err(req, 400, ERR_INVALID, "tools[%zu].function.name: required string is missing", i);
      return ERR_INVALID;
    }
  }
  return 0;
}

void ollama_chat(http_req *req, void *ctx) {
  ollama_ctx *oc = ctx;
  uint64_t t0 = time_mono_ns();
  json_t *body = ollama_body(req);
  if (!body) return;
  manager_model *mm = NULL;
  json_t *over = NULL, *msgs = NULL;
  tok_ids ids = TOK_IDS_INIT;
  gen_params g;
  ollama_params_init(&g);
  const char *mname = NULL;
  bool stream = true, lp = false, ka_set = false, has_images = false;
  int32_t top = 0;
  int64_t ka_ms = 0;
  int think = -1;
  enum gen_effort effort = GEN_EFFORT_DEFAULT;
  int rc = api_json_str(body, "", "model", false, &mname);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "model");
    goto done;
  }
  if (ollama_logprobs_fields(req, body, &lp, &top)) goto done;
  if (!mname || !*mname) {
    ollama_err(req, 400, ERR_INVALID, "model is required");
    goto done;
  }
  if (!ollama_name_valid(mname)) {
    ollama_err(req, 400, ERR_INVALID, "invalid model name");
    goto done;
  }
  const json_t *in = json_object_get(body, "messages");
  if (in && !json_is_null(in) && !json_is_array(in)) {
    ollama_err(req, 400, ERR_TYPE, "messages: expected array, got %s", api_json_type_name(in));
    goto done;
  }
  const json_t *tools = json_object_get(body, "tools");
  if (check_tools(req, tools) || ollama_stream(req, body, &stream) ||
      ollama_think(req, json_object_get(body, "think"), &think, &effort) ||
      ollama_keep_alive(req, json_object_get(body, "keep_alive"), &ka_set, &ka_ms) ||
      ollama_format(req, json_object_get(body, "format"), &g))
    goto done;
  over = ollama_overlay_get(oc, mname);
  if (over && ollama_options(req, json_object_get(over, "parameters"), &g)) goto done;
  if (ollama_options(req, json_object_get(body, "options"), &g)) goto done;
  bool empty = json_array_size(in) == 0;
  if (!empty && !(msgs = canonical_messages(req, in, over, &has_images))) goto done;

  if (empty && ka_set && ka_ms == 0) {
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
  if (think == 1 && !(mm->fam.caps & FAMILY_CAP_REASONING)) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "\"%s\" does not support thinking", mname);
    goto done;
  }
  if (has_images) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "\"%s\" does not support images: %s", mname,
               mm->fam.caps & FAMILY_CAP_VISION ? "parley's runtime has no image input yet"
                                                : "the model has no vision input");
    goto done;
  }
  if (empty) {
    ollama_answer_load(req, OLLAMA_CHAT, mname, "load");
    goto done;
  }
  gen_chat chat = {.messages = msgs, .tools = json_array_size(tools) ? tools : NULL, .thinking = think, .effort = effort};
  outparse_config pc;
  if ((rc = gen_chat_prompt(mm, &chat, NULL, &ids, &pc))) {
    ollama_err(req, rc == ERR_NOMEM ? 500 : 400, rc, "%s", err_detail());
    goto done;
  }
  if (ollama_debug_render(req, body, mm, OLLAMA_CHAT, mname, &ids)) goto done;
  ollama_run run = {.kind = OLLAMA_CHAT, .model = mname, .stream = stream, .logprobs = lp, .think_off = think == 0, .top_logprobs = top,
                    .t0_ns = t0, .load_ns = load_ns};
  ollama_generate_run(req, mm, &g, &ids, &pc, &run);
  mm = NULL;
done:
  manager_release(mm);
  gen_params_free(&g);
  tok_ids_free(&ids);
  json_decref(msgs);
  json_decref(over);
  json_decref(body);
}
