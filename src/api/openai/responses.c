/*
 * responses.c - the OpenAI Responses API: POST /v1/responses (plain, SSE
 * stream, background), GET /v1/responses/{id} (and its event replay with
 * stream=true&starting_after=N), DELETE, POST .../cancel, GET
 * .../input_items, POST /v1/responses/input_tokens. Wire facts:
 * ../shared/specs/openai.md section 4.
 *
 * A create request becomes canonical chat messages: the stored history
 * first (the previous_response_id chain, or the conversation's items), then
 * `instructions` as a system turn, then the new input items; tools are
 * flattened Responses tools turned into OpenAI function tools. It runs
 * through api/gen.h with the sink below, which keeps the output items as
 * they are announced and, streaming, writes the event sequence the SDK's
 * accumulator checks (response.created with output [], item/part added
 * with indexes equal to the current lengths, deltas naming the item id,
 * done events, a terminal response.completed/incomplete/failed), each with
 * an increasing sequence_number. When the job ends the response, its input
 * items and its output items are written to the store (store: true, the
 * default) and, with a conversation, appended to it.
 *
 * Background responses run on the generation layer's producer thread
 * without a client stream (gen_opts.detached); a table of running
 * background jobs lets /cancel reach the engine request.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "api/openai/resp.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

/* ---- the request ------------------------------------------------------------ */

struct rreq {
  json_t *input;        /* the new input items (normalized, with ids) */
  json_t *messages;     /* canonical messages */
  json_t *tools;        /* OpenAI-shaped tools, or NULL */
  resp_tools *tmap;     /* their names back to the request's tools, or NULL */
  const char *forced;   /* the exposed name tool_choice forces, or NULL */
  gen_chat chat;
  const char *prev_id;
  const char *conv_id;
  bool store, background, stream;
};

static void rreq_free(struct rreq *r) {
  json_decref(r->input);
  json_decref(r->messages);
  json_decref(r->tools);
  resp_tools_free(r->tmap);
  memset(r, 0, sizeof *r);
}

static int bad(http_req *req, int code, const char *param) {
  api_error(req, code == ERR_NOT_FOUND ? 404 : 400, code, err_detail(), param);
  return code ? code : ERR_INVALID;
}

/* tool_choice: the strings, allowed_tools (its mode), or an object naming
 * one tool (function/custom by name, local_shell/shell/apply_patch/computer
 * by type); forcing a hosted tool is a 400. Needs r->tmap. */
static int parse_tool_choice(http_req *req, const json_t *body, struct rreq *r) {
  const json_t *tc = json_object_get(body, "tool_choice");
  gen_chat *c = &r->chat;
  c->tool_choice = GEN_TOOL_AUTO;
  if (!tc || json_is_null(tc)) return 0;
  const char *s = json_string_value(tc);
  const char *type = json_string_value(json_object_get(tc, "type"));
  const char *mode = json_string_value(json_object_get(tc, "mode"));
  if (s && strcmp(s, "none") == 0) c->tool_choice = GEN_TOOL_NONE;
  else if (s && strcmp(s, "required") == 0) c->tool_choice = GEN_TOOL_REQUIRED;
  else if (s && strcmp(s, "auto") == 0) c->tool_choice = GEN_TOOL_AUTO;
  else if (type && strcmp(type, "allowed_tools") == 0)
    c->tool_choice = mode && strcmp(mode, "required") == 0 ? GEN_TOOL_REQUIRED : GEN_TOOL_AUTO;
  else if (type) {
    int rc = resp_tools_choice(r->tmap, tc, &r->forced);
    if (rc) return bad(req, rc == ERR_NOT_FOUND ? ERR_INVALID : rc, "tool_choice");
    if (!r->forced) {
      err_set(ERR_INVALID, "tool_choice.type: '%.64s' is not a tool choice", type);
      return bad(req, ERR_INVALID, "tool_choice");
    }
    c->tool_choice = GEN_TOOL_FUNCTION;
  } else {
    err_set(ERR_INVALID, "tool_choice: expected \"none\", \"auto\", \"required\", {\"type\":\"function\",\"name\"} or "
                         "{\"type\":\"allowed_tools\",...}");
    return bad(req, ERR_INVALID, "tool_choice");
  }
  return 0;
}

/* text.format: text | json_object | json_schema (flat: name, schema, strict). */
static int parse_text_format(http_req *req, const json_t *body, gen_params *g) {
  const json_t *text = json_object_get(body, "text");
  const json_t *f = json_object_get(text, "format");
  if (!f || json_is_null(f)) return 0;
  const char *type = json_string_value(json_object_get(f, "type"));
  if (!type) {
    err_set(ERR_INVALID, "text.format.type: required string is missing");
    return bad(req, ERR_INVALID, "text.format.type");
  }
  if (strcmp(type, "text") == 0) return 0;
  if (strcmp(type, "json_object") == 0) {
    gen_params_set_format(g, GEN_FORMAT_JSON, NULL, "text.format");
    return 0;
  }
  if (strcmp(type, "json_schema") != 0) {
    err_set(ERR_INVALID, "text.format.type: '%.64s' is not one of text, json_object, json_schema", type);
    return bad(req, ERR_INVALID, "text.format.type");
  }
  if (!json_is_string(json_object_get(f, "name"))) {
    err_set(ERR_INVALID, "text.format.name: required string is missing");
    return bad(req, ERR_INVALID, "text.format.name");
  }
  const json_t *schema = json_object_get(f, "schema");
  if (!json_is_object(schema)) {
    err_set(ERR_INVALID, "text.format.schema: required object is missing");
    return bad(req, ERR_INVALID, "text.format.schema");
  }
  gen_params_set_format(g, GEN_FORMAT_SCHEMA, schema, "text.format.schema");
  return 0;
}

static int num_in(http_req *req, const json_t *body, const char *key, double lo, double hi, double *out) {
  int rc = api_json_num(body, "", key, false, out);
  if (rc == ERR_NOT_FOUND) return 1;
  if (rc) return bad(req, rc, key);
  if (!(*out >= lo && *out <= hi)) {
    err_set(ERR_RANGE, "%s: %g is out of range (expected %g to %g)", key, *out, lo, hi);
    return bad(req, ERR_RANGE, key);
  }
  return 0;
}

/* Sampling and limits into g (mm known). Returns 0 or an answered error. */
static int parse_params(http_req *req, const json_t *body, const manager_model *mm, gen_params *g) {
  (void)mm;
  gen_params_init(g);
  double v;
  int rc;
  if ((rc = num_in(req, body, "temperature", 0, 2, &v)) < 0) return rc;
  if (!rc) g->er.sample.temperature = (float)v;
  if ((rc = num_in(req, body, "top_p", 0, 1, &v)) < 0) return rc;
  if (!rc) g->er.sample.top_p = v > 0 ? (float)v : 1e-6f;
  long long n;
  rc = api_json_int(body, "", "max_output_tokens", false, &n);
  if (rc && rc != ERR_NOT_FOUND) return bad(req, rc, "max_output_tokens");
  if (!rc) {
    if (n < 1) {
      err_set(ERR_RANGE, "max_output_tokens: %lld is not a positive number of tokens", n);
      return bad(req, ERR_RANGE, "max_output_tokens");
    }
    g->er.max_tokens = n;
  }
  rc = api_json_int(body, "", "top_logprobs", false, &n);
  if (rc && rc != ERR_NOT_FOUND) return bad(req, rc, "top_logprobs");
  if (!rc && (n < 0 || n > 20)) {
    err_set(ERR_RANGE, "top_logprobs: %lld is out of range (expected 0 to 20)", n);
    return bad(req, ERR_RANGE, "top_logprobs");
  }
  uint64_t seed;
  rand_bytes(&seed, sizeof seed);
  g->er.sample.seed = seed;
  return parse_text_format(req, body, g);
}

/* Builds the canonical conversation of a create (or input_tokens) body.
 * Answers the error itself and returns nonzero on failure. */
static int build(http_req *req, openai_ctx *oc, json_t *body, struct rreq *r) {
  memset(r, 0, sizeof *r);
  r->store = true;
  int rc;
  if ((rc = api_json_bool(body, "", "store", false, &r->store)) && rc != ERR_NOT_FOUND) return bad(req, rc, "store");
  if ((rc = api_json_bool(body, "", "stream", false, &r->stream)) && rc != ERR_NOT_FOUND) return bad(req, rc, "stream");
  if ((rc = api_json_bool(body, "", "background", false, &r->background)) && rc != ERR_NOT_FOUND)
    return bad(req, rc, "background");
  if (r->background && !r->store) {
    err_set(ERR_INVALID, "background: a background response must be stored (store: true)");
    return bad(req, ERR_INVALID, "background");
  }
  if ((rc = api_json_str(body, "", "previous_response_id", false, &r->prev_id)) && rc != ERR_NOT_FOUND)
    return bad(req, rc, "previous_response_id");
  const json_t *conv = json_object_get(body, "conversation");
  if (json_is_string(conv)) r->conv_id = json_string_value(conv);
  else if (json_is_object(conv)) r->conv_id = json_string_value(json_object_get(conv, "id"));
  if (conv && !json_is_null(conv) && !r->conv_id) {
    err_set(ERR_INVALID, "conversation: expected \"conv_...\" or {\"id\": \"conv_...\"}");
    return bad(req, ERR_INVALID, "conversation");
  }
  if (r->prev_id && r->conv_id) {
    err_set(ERR_INVALID, "previous_response_id and conversation cannot be used together");
    return bad(req, ERR_INVALID, "previous_response_id");
  }
  const json_t *input = json_object_get(body, "input");
  if (!input || json_is_null(input)) {
    if (!r->prev_id && !r->conv_id) {
      err_set(ERR_INVALID, "input: required field is missing");
      return bad(req, ERR_INVALID, "input");
    }
    r->input = json_array();
  } else if ((rc = resp_input_normalize(input, "input", &r->input))) {
    return bad(req, rc, "input");
  }
  const char *instructions = NULL;
  if ((rc = api_json_str(body, "", "instructions", false, &instructions)) && rc != ERR_NOT_FOUND)
    return bad(req, rc, "instructions");
  const char *trunc = json_string_value(json_object_get(body, "truncation"));
  if (trunc && strcmp(trunc, "auto") != 0 && strcmp(trunc, "disabled") != 0) {
    err_set(ERR_INVALID, "truncation: expected \"auto\" or \"disabled\"");
    return bad(req, ERR_INVALID, "truncation");
  }
  if ((rc = resp_tools_parse(json_object_get(body, "tools"), &r->tmap, &r->tools))) return bad(req, rc, "tools");
  if ((rc = parse_tool_choice(req, body, r))) return rc;
  r->chat.thinking = -1;
  const json_t *effort = json_object_get(json_object_get(body, "reasoning"), "effort");
  if (json_is_string(effort)) {
    const char *e = json_string_value(effort);
    r->chat.thinking = strcmp(e, "none") == 0 || strcmp(e, "minimal") == 0 ? 0 : 1;
    r->chat.effort = gen_effort_of(e);
  }

  /* History, then instructions, then the new input. */
  json_t *history = json_array();
  r->messages = json_array();
  if (!history || !r->messages) {
    json_decref(history);
    return bad(req, err_set(ERR_NOMEM, "out of memory"), NULL);
  }
  if (r->prev_id && (rc = resp_chain_items(oc->st, r->prev_id, history))) {
    json_decref(history);
    return bad(req, rc, "previous_response_id");
  }
  if (r->conv_id && (rc = resp_conversation_items(oc->st, r->conv_id, history))) {
    json_decref(history);
    return bad(req, rc, "conversation");
  }
  if (instructions) json_array_append_new(r->messages, json_pack("{s:s, s:s}", "role", "system", "content", instructions));
  rc = resp_items_to_messages(history, "history", r->messages);
  json_decref(history);
  if (rc) return bad(req, rc, r->prev_id ? "previous_response_id" : "conversation");
  /* A system turn from history must not follow the instructions: keep the
   * instructions first, which every template expects. */
  if ((rc = resp_items_to_messages(r->input, "input", r->messages))) return bad(req, rc, "input");
  r->chat.messages = r->messages;
  r->chat.tools = r->tools;
  return 0;
}

/* ---- the response object ------------------------------------------------------ */

/* The sink's state: the response being built. */
struct rs {
  openai_ctx *oc;
  char id[64];
  json_t *resp;          /* the response object (settings echoed) */
  json_t *input;         /* the new input items, stored with the response */
  json_t *output;        /* output items as announced */
  char *conv_id;
  bool store, stream, background;
  int64_t seq;           /* next sequence_number */
  int open;              /* output index of the open item, -1 none */
  resp_tools *tmap;      /* the request's tools by exposed name (owned) */
  /* A call to a tool other than a function is announced whole when it
   * ends (its item's fields come from the finished arguments). */
  const resp_tool *pend_tool; /* NULL: no such call is being written */
  char pend_call_id[96];
  buf pend_args;
  gen_job *job;          /* background: for cancel, while running */
  bool cancel_requested;
};

static void bg_remove(struct rs *s);

static void rs_free(void *ctx) {
  struct rs *s = ctx;
  if (!s) return;
  if (s->background) bg_remove(s);
  json_decref(s->resp);
  json_decref(s->input);
  json_decref(s->output);
  free(s->conv_id);
  resp_tools_free(s->tmap);
  buf_free(&s->pend_args);
  free(s);
}

static json_t *settings_object(const json_t *body, const char *id, const char *model_label, const char *prev,
                               const char *conv, bool stored, bool background) {
  const json_t *tools = json_object_get(body, "tools"), *tc = json_object_get(body, "tool_choice");
  const json_t *text = json_object_get(body, "text"), *md = json_object_get(body, "metadata");
  const json_t *reasoning = json_object_get(body, "reasoning");
  json_t *r = json_pack("{s:s, s:s, s:I, s:s, s:n, s:n, s:O, s:s, s:b, s:[], s:b, s:o, s:o, s:b}", "id", id, "object",
                        "response", "created_at", (json_int_t)time_wall_s(), "status", "in_progress", "error",
                        "incomplete_details", "instructions",
                        json_object_get(body, "instructions") ? json_object_get(body, "instructions") : json_null(),
                        "model", model_label, "background", background, "output", "parallel_tool_calls",
                        !json_is_false(json_object_get(body, "parallel_tool_calls")), "previous_response_id",
                        prev ? json_string(prev) : json_null(), "conversation",
                        conv ? json_pack("{s:s}", "id", conv) : json_null(), "store", stored);
  if (!r) return NULL;
  json_object_set_new(r, "reasoning", json_is_object(reasoning) ? json_deep_copy(reasoning)
                                                                 : json_pack("{s:n, s:n}", "effort", "summary"));
  json_t *num;
  num = json_object_get(body, "temperature");
  json_object_set_new(r, "temperature", json_is_number(num) ? json_incref(num) : json_real(1.0));
  num = json_object_get(body, "top_p");
  json_object_set_new(r, "top_p", json_is_number(num) ? json_incref(num) : json_real(1.0));
  num = json_object_get(body, "max_output_tokens");
  json_object_set_new(r, "max_output_tokens", json_is_integer(num) ? json_incref(num) : json_null());
  json_object_set_new(r, "max_tool_calls", json_null());
  json_object_set_new(r, "text", json_is_object(text) ? json_deep_copy(text)
                                                       : json_pack("{s:{s:s}, s:s}", "format", "type", "text",
                                                                   "verbosity", "medium"));
  json_object_set_new(r, "tool_choice", tc ? json_deep_copy(tc) : json_string("auto"));
  json_object_set_new(r, "tools", resp_tools_echo(tools));
  const char *trunc = json_string_value(json_object_get(body, "truncation"));
  json_object_set_new(r, "truncation", json_string(trunc ? trunc : "disabled"));
  json_object_set_new(r, "service_tier", json_string("default"));
  json_object_set_new(r, "usage", json_null());
  json_object_set_new(r, "user", json_is_string(json_object_get(body, "user")) ? json_incref(json_object_get(body, "user"))
                                                                                : json_null());
  json_object_set_new(r, "metadata", json_is_object(md) ? json_deep_copy(md) : json_object());
  return r;
}

static json_t *usage_json(const gen_result *r) {
  return json_pack("{s:I, s:{s:I, s:i}, s:I, s:{s:i}, s:I}", "input_tokens", (json_int_t)r->n_prompt,
                   "input_tokens_details", "cached_tokens", (json_int_t)r->n_cached, "cache_write_tokens", 0,
                   "output_tokens", (json_int_t)r->n_completion, "output_tokens_details", "reasoning_tokens", 0,
                   "total_tokens", (json_int_t)(r->n_prompt + r->n_completion));
}

/* ---- events ------------------------------------------------------------------- */

/* Writes one event: `event: TYPE` and data with type and sequence_number
 * added (v is consumed). Non-streaming and background runs only count. */
static int emit(struct rs *s, gen_job *j, const char *type, json_t *v) {
  if (!v) return ERR_NOMEM;
  json_object_set_new(v, "type", json_string(type));
  json_object_set_new(v, "sequence_number", json_integer(s->seq++));
  int rc = s->stream ? gen_job_write_sse(j, type, v) : 0;
  json_decref(v);
  return rc;
}

static json_t *item_at(struct rs *s, int index) { return json_array_get(s->output, (size_t)index); }

static const char *item_id(struct rs *s, int index) {
  return json_string_value(json_object_get(item_at(s, index), "id"));
}

/* The text part of the open message or reasoning item. */
static json_t *open_part(struct rs *s) {
  return json_array_get(json_object_get(item_at(s, s->open), "content"), 0);
}

/* Closes the open item: its done events, with status (completed, or
 * incomplete when the output limit cut it). */
static int close_item(struct rs *s, gen_job *j, const char *status) {
  if (s->open < 0) return 0;
  int ix = s->open;
  s->open = -1;
  json_t *it = item_at(s, ix);
  const char *type = json_string_value(json_object_get(it, "type"));
  const char *id = item_id(s, ix);
  int rc = 0;
  json_object_set_new(it, "status", json_string(status));
  if (strcmp(type, "function_call") == 0) {
    rc = emit(s, j, "response.function_call_arguments.done",
              json_pack("{s:s, s:i, s:O, s:O}", "item_id", id, "output_index", ix, "name", json_object_get(it, "name"),
                        "arguments", json_object_get(it, "arguments")));
  } else {
    bool msg = strcmp(type, "message") == 0;
    json_t *part = json_array_get(json_object_get(it, "content"), 0);
    json_t *text = json_object_get(part, "text");
    if (!rc)
      rc = emit(s, j, msg ? "response.output_text.done" : "response.reasoning_text.done",
                msg ? json_pack("{s:s, s:i, s:i, s:O, s:[]}", "item_id", id, "output_index", ix, "content_index", 0,
                                "text", text, "logprobs")
                    : json_pack("{s:s, s:i, s:i, s:O}", "item_id", id, "output_index", ix, "content_index", 0, "text",
                                text));
    if (!rc)
      rc = emit(s, j, "response.content_part.done",
                json_pack("{s:s, s:i, s:i, s:O}", "item_id", id, "output_index", ix, "content_index", 0, "part", part));
  }
  if (!rc) rc = emit(s, j, "response.output_item.done", json_pack("{s:i, s:O}", "output_index", ix, "item", it));
  return rc;
}

/* Opens a message or reasoning item with one empty text part. */
static int flush_pending(struct rs *s, gen_job *j, const char *status);

static int open_text_item(struct rs *s, gen_job *j, bool reasoning) {
  int rc = close_item(s, j, "completed");
  if (!rc) rc = flush_pending(s, j, "completed");
  if (rc) return rc;
  char id[64];
  openai_make_id(id, sizeof id, reasoning ? "rs_" : "msg_");
  json_t *it = reasoning ? json_pack("{s:s, s:s, s:[], s:[], s:n, s:s}", "type", "reasoning", "id", id, "summary",
                                     "content", "encrypted_content", "status", "in_progress")
                         : json_pack("{s:s, s:s, s:s, s:s, s:[]}", "type", "message", "id", id, "status", "in_progress",
                                     "role", "assistant", "content");
  if (!it) return ERR_NOMEM;
  int ix = (int)json_array_size(s->output);
  rc = emit(s, j, "response.output_item.added", json_pack("{s:i, s:O}", "output_index", ix, "item", it));
  json_array_append_new(s->output, it);
  s->open = ix;
  json_t *part = reasoning ? json_pack("{s:s, s:s}", "type", "reasoning_text", "text", "")
                           : json_pack("{s:s, s:s, s:[], s:[]}", "type", "output_text", "text", "", "annotations",
                                       "logprobs");
  if (!part) return ERR_NOMEM;
  if (!rc)
    rc = emit(s, j, "response.content_part.added",
              json_pack("{s:s, s:i, s:i, s:O}", "item_id", id, "output_index", ix, "content_index", 0, "part", part));
  json_array_append_new(json_object_get(it, "content"), part);
  return rc;
}

static int rs_start(void *ctx, gen_job *j) {
  struct rs *s = ctx;
  s->job = j;
  int rc = emit(s, j, "response.created", json_pack("{s:O}", "response", s->resp));
  if (!rc) rc = emit(s, j, "response.in_progress", json_pack("{s:O}", "response", s->resp));
  return rc;
}

static int rs_text(void *ctx, gen_job *j, int choice, bool reasoning, const char *text, size_t len) {
  struct rs *s = ctx;
  (void)choice;
  const char *want = reasoning ? "reasoning" : "message";
  json_t *cur = s->open >= 0 ? item_at(s, s->open) : NULL;
  if (!cur || strcmp(json_string_value(json_object_get(cur, "type")), want) != 0) {
    int rc = open_text_item(s, j, reasoning);
    if (rc) return rc;
  }
  json_t *part = open_part(s);
  buf b = BUF_INIT;
  buf_append_str(&b, json_string_value(json_object_get(part, "text")));
  buf_append(&b, text, len);
  json_object_set_new(part, "text", json_stringn(b.data ? b.data : "", b.len));
  buf_free(&b);
  json_t *ev = reasoning ? json_pack("{s:s, s:i, s:i, s:s%}", "item_id", item_id(s, s->open), "output_index", s->open,
                                     "content_index", 0, "delta", text, len)
                         : json_pack("{s:s, s:i, s:i, s:s%, s:[]}", "item_id", item_id(s, s->open), "output_index",
                                     s->open, "content_index", 0, "delta", text, len, "logprobs");
  return emit(s, j, reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", ev);
}

/* Announces a finished call to a non-function tool: output_item.added
 * (status in_progress; a custom call's input empty, then its input events),
 * output_item.done. */
static int flush_pending(struct rs *s, gen_job *j, const char *status) {
  const resp_tool *tool = s->pend_tool;
  if (!tool) return 0;
  s->pend_tool = NULL;
  char id[64];
  openai_make_id(id, sizeof id, resp_tool_call_prefix(tool));
  json_t *it = resp_tool_call_item(tool, id, s->pend_call_id, NULL, s->pend_args.data ? s->pend_args.data : "", status);
  buf_reset(&s->pend_args);
  json_t *added = it ? json_deep_copy(it) : NULL;
  if (!added) {
    json_decref(it);
    return ERR_NOMEM;
  }
  bool custom = tool->kind == RESP_TOOL_CUSTOM;
  json_object_set_new(added, "status", json_string("in_progress"));
  if (custom) json_object_set_new(added, "input", json_string(""));
  int ix = (int)json_array_size(s->output);
  int rc = emit(s, j, "response.output_item.added", json_pack("{s:i, s:o}", "output_index", ix, "item", added));
  json_array_append_new(s->output, it);
  if (!rc && custom)
    rc = emit(s, j, "response.custom_tool_call_input.delta",
              json_pack("{s:s, s:i, s:O}", "item_id", id, "output_index", ix, "delta", json_object_get(it, "input")));
  if (!rc && custom)
    rc = emit(s, j, "response.custom_tool_call_input.done",
              json_pack("{s:s, s:i, s:O}", "item_id", id, "output_index", ix, "input", json_object_get(it, "input")));
  if (!rc) rc = emit(s, j, "response.output_item.done", json_pack("{s:i, s:O}", "output_index", ix, "item", it));
  return rc;
}

static int rs_tool_begin(void *ctx, gen_job *j, int choice, int tool_index, const char *call_id, const char *name) {
  struct rs *s = ctx;
  (void)choice;
  (void)tool_index;
  int rc = close_item(s, j, "completed");
  if (!rc) rc = flush_pending(s, j, "completed");
  if (rc) return rc;
  const resp_tool *tool = resp_tools_find(s->tmap, name);
  if (tool && tool->kind != RESP_TOOL_FUNCTION) {
    s->pend_tool = tool;
    snprintf(s->pend_call_id, sizeof s->pend_call_id, "%s", call_id ? call_id : "");
    buf_reset(&s->pend_args);
    return 0;
  }
  /* A function (a namespace member's call names its namespace), or a name
   * the model made up: a function_call, its arguments streamed. */
  char id[64];
  openai_make_id(id, sizeof id, "fc_");
  json_t *it = resp_tool_call_item(tool, id, call_id ? call_id : "", name ? name : "", "", "in_progress");
  if (!it) return ERR_NOMEM;
  int ix = (int)json_array_size(s->output);
  rc = emit(s, j, "response.output_item.added", json_pack("{s:i, s:O}", "output_index", ix, "item", it));
  json_array_append_new(s->output, it);
  s->open = ix;
  return rc;
}

static int rs_tool_args(void *ctx, gen_job *j, int choice, int tool_index, const char *text, size_t len) {
  struct rs *s = ctx;
  (void)choice;
  (void)tool_index;
  if (s->pend_tool) return buf_append(&s->pend_args, text, len);
  if (s->open < 0) return 0;
  json_t *it = item_at(s, s->open);
  buf b = BUF_INIT;
  buf_append_str(&b, json_string_value(json_object_get(it, "arguments")));
  buf_append(&b, text, len);
  json_object_set_new(it, "arguments", json_stringn(b.data ? b.data : "", b.len));
  buf_free(&b);
  return emit(s, j, "response.function_call_arguments.delta",
              json_pack("{s:s, s:i, s:s%}", "item_id", item_id(s, s->open), "output_index", s->open, "delta", text, len));
}

static int rs_tool_end(void *ctx, gen_job *j, int choice, int tool_index) {
  struct rs *s = ctx;
  (void)choice;
  (void)tool_index;
  int rc = flush_pending(s, j, "completed");
  return rc ? rc : close_item(s, j, "completed");
}

/* Background jobs that are still running (for /cancel). */
static pthread_mutex_t g_bg_lock = PTHREAD_MUTEX_INITIALIZER;
struct bg {
  struct bg *next;
  struct rs *s;
};
static struct bg *g_bg;

static void bg_remove(struct rs *s) {
  pthread_mutex_lock(&g_bg_lock);
  for (struct bg **p = &g_bg; *p; p = &(*p)->next)
    if ((*p)->s == s) {
      struct bg *dead = *p;
      *p = dead->next;
      free(dead);
      break;
    }
  pthread_mutex_unlock(&g_bg_lock);
}

/* Saves the response, its items and the conversation's new items. */
static void persist(struct rs *s, const char *prev_id) {
  if (!s->store) return;
  store_response r = {.id = s->id,
                      .created_at = json_integer_value(json_object_get(s->resp, "created_at")),
                      .updated_at = time_wall_s(),
                      .status = (char *)json_string_value(json_object_get(s->resp, "status")),
                      .model = (char *)json_string_value(json_object_get(s->resp, "model")),
                      .previous_response_id = (char *)prev_id,
                      .conversation_id = s->conv_id,
                      .body = json_dumps(s->resp, JSON_COMPACT),
                      .stored = true};
  store_response old;
  bool existed = store_response_get(s->oc->st, s->id, &old) == 0;
  if (existed) store_response_free(&old);
  int rc = r.body ? store_response_put(s->oc->st, &r) : ERR_NOMEM;
  if (!rc && !existed) rc = resp_store_items(s->oc->st, s->id, "input", NULL, s->input);
  const char *status = r.status ? r.status : "";
  bool final = strcmp(status, "queued") != 0 && strcmp(status, "in_progress") != 0;
  if (!rc && final) rc = resp_store_items(s->oc->st, s->id, "output", NULL, s->output);
  if (!rc && final && s->conv_id) {
    rc = resp_store_items(s->oc->st, NULL, NULL, s->conv_id, s->input);
    if (!rc) rc = resp_store_items(s->oc->st, NULL, NULL, s->conv_id, s->output);
  }
  if (rc) LOG_WARN("openai", "response %s could not be stored: %s", s->id, err_detail());
  free(r.body);
}

static void rs_end(void *ctx, gen_job *j, const gen_result *r) {
  struct rs *s = ctx;
  if (s->background) bg_remove(s);
  const gen_choice *c = r->n ? &r->ch[0] : NULL;
  if (!s->stream && !s->background && c) {
    /* Not streamed: the items from the finished choice. */
    if (c->reasoning.len) {
      rs_text(s, j, 0, true, c->reasoning.data, c->reasoning.len);
    }
    if (c->content.len || !gen_choice_has_calls(c)) rs_text(s, j, 0, false, c->content.data ? c->content.data : "", c->content.len);
    size_t k;
    json_t *call;
    json_array_foreach(c->tool_calls, k, call) {
      json_t *fn = json_object_get(call, "function");
      rs_tool_begin(s, j, 0, (int)k, json_string_value(json_object_get(call, "id")),
                    json_string_value(json_object_get(fn, "name")));
      const char *args = json_string_value(json_object_get(fn, "arguments"));
      if (args) rs_tool_args(s, j, 0, (int)k, args, strlen(args));
      rs_tool_end(s, j, 0, (int)k);
    }
  }
  const char *status = "completed", *terminal = "response.completed";
  if (r->err_code) {
    status = "failed";
    terminal = "response.failed";
    json_object_set_new(s->resp, "error", json_pack("{s:s, s:s}", "code", api_status_for(r->err_code) < 500 ? "invalid_prompt" : "server_error",
                                                    "message", r->err_msg ? r->err_msg : "error"));
  } else if (c && c->finish == ENGINE_FINISH_CANCELLED) {
    status = "cancelled";
    terminal = "response.failed";
  } else if (c && c->finish == ENGINE_FINISH_LENGTH) {
    status = "incomplete";
    terminal = "response.incomplete";
    json_object_set_new(s->resp, "incomplete_details", json_pack("{s:s}", "reason", "max_output_tokens"));
  }
  /* The item being written when the output limit hit is incomplete too. */
  const char *last = strcmp(status, "incomplete") == 0 ? "incomplete" : "completed";
  flush_pending(s, j, last);
  close_item(s, j, last);
  json_object_set_new(s->resp, "status", json_string(status));
  json_object_set(s->resp, "output", s->output);
  json_object_set_new(s->resp, "usage", usage_json(r));
  json_object_set_new(s->resp, "completed_at", strcmp(status, "completed") == 0 ? json_integer(time_wall_s()) : json_null());
  /* The output text the SDKs otherwise compute. */
  buf text = BUF_INIT;
  size_t k;
  json_t *it;
  json_array_foreach(s->output, k, it) if (strcmp(json_string_value(json_object_get(it, "type")), "message") == 0)
      buf_append_str(&text, json_string_value(json_object_get(json_array_get(json_object_get(it, "content"), 0), "text")));
  json_object_set_new(s->resp, "output_text", json_stringn(text.data ? text.data : "", text.len));
  buf_free(&text);
  persist(s, json_string_value(json_object_get(s->resp, "previous_response_id")));
  if (s->stream) {
    emit(s, j, terminal, json_pack("{s:O}", "response", s->resp));
    return;
  }
  if (s->background) return;
  http_req *req = gen_job_req(j);
  if (r->err_code && api_status_for(r->err_code) < 500 && r->err_code != ERR_TIMEOUT) {
    api_error(req, 0, r->err_code, r->err_msg, "input");
    return;
  }
  api_respond_json(req, 200, s->resp);
}

static const gen_sink rs_sink = {
    .on_start = rs_start,
    .on_text = rs_text,
    .on_tool_begin = rs_tool_begin,
    .on_tool_args = rs_tool_args,
    .on_tool_end = rs_tool_end,
    .on_end = rs_end,
    .free = rs_free,
};

/* ---- handlers ------------------------------------------------------------------ */

void openai_responses_create(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  struct rreq r;
  gen_params g;
  gen_params_init(&g);
  tok_ids ids = TOK_IDS_INIT;
  manager_model *mm = NULL;
  struct rs *s = NULL;
  const char *model_name = NULL;
  int rc = api_json_str(body, "", "model", false, &model_name);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "model");
    json_decref(body);
    return;
  }
  if (build(req, oc, body, &r)) goto done;
  if ((rc = manager_get(oc->mgr, model_name, &mm))) {
    openai_error_manager(req, rc);
    goto done;
  }
  if (parse_params(req, body, mm, &g)) goto done;
  outparse_config pc;
  if ((rc = gen_chat_prompt(mm, &r.chat, NULL, &ids, &pc))) {
    api_error(req, 400, rc, err_detail(), "input");
    goto done;
  }
  if ((rc = gen_chat_force_tools(mm, &r.chat, r.forced, &g))) {
    api_error(req, 400, rc, err_detail(), "tool_choice");
    goto done;
  }
  /* truncation "auto": drop the oldest turns after the first until it fits. */
  const char *trunc = json_string_value(json_object_get(body, "truncation"));
  int64_t n_ctx = mm->eng ? engine_n_ctx(mm->eng) : 0;
  while (trunc && strcmp(trunc, "auto") == 0 && n_ctx && (int64_t)ids.n >= n_ctx && json_array_size(r.messages) > 1) {
    size_t first = json_string_value(json_object_get(json_array_get(r.messages, 0), "role")) &&
                           strcmp(json_string_value(json_object_get(json_array_get(r.messages, 0), "role")), "system") == 0
                       ? 1
                       : 0;
    if (json_array_size(r.messages) <= first + 1) break;
    json_array_remove(r.messages, first);
    ids.n = 0;
    if ((rc = gen_chat_prompt(mm, &r.chat, NULL, &ids, &pc))) {
      api_error(req, 400, rc, err_detail(), "input");
      goto done;
    }
  }
  s = calloc(1, sizeof *s);
  if (!s || !(s->output = json_array())) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    goto done;
  }
  s->oc = oc;
  s->open = -1;
  s->store = r.store;
  s->stream = r.stream && !r.background;
  s->background = r.background;
  s->input = json_incref(r.input);
  s->conv_id = r.conv_id ? str_dup(r.conv_id) : NULL;
  s->tmap = r.tmap; /* moved */
  r.tmap = NULL;
  r.forced = NULL;
  openai_make_id(s->id, sizeof s->id, "resp_");
  s->resp = settings_object(body, s->id, model_name && *model_name ? model_name : mm->name, r.prev_id, r.conv_id,
                            r.store, r.background);
  if (!s->resp) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    goto done;
  }
  gen_opts opts = {.stream = s->stream, .detached = s->background, .stream_kind = HTTP_STREAM_SSE, .prompt_param = "input"};
  if (s->background) {
    json_object_set_new(s->resp, "status", json_string("queued"));
    persist(s, r.prev_id);
    json_object_set_new(s->resp, "status", json_string("in_progress"));
    struct bg *b = calloc(1, sizeof *b);
    if (!b) {
      api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
      goto done;
    }
    b->s = s;
    pthread_mutex_lock(&g_bg_lock);
    b->next = g_bg;
    g_bg = b;
    pthread_mutex_unlock(&g_bg_lock);
    json_t *queued = json_deep_copy(s->resp);
    json_object_set_new(queued, "status", json_string("queued"));
    char id[64];
    snprintf(id, sizeof id, "%s", s->id);
    /* When gen_run refuses the job it has answered req and freed s (its
     * table entry too, in rs_free). */
    if (!gen_run(req, mm, &g, &ids, &pc, &opts, &rs_sink, s)) api_respond_json(req, 200, queued);
    else store_response_delete(oc->st, id);
    json_decref(queued);
  } else {
    gen_run(req, mm, &g, &ids, &pc, &opts, &rs_sink, s);
  }
  s = NULL;
  mm = NULL;
done:
  rs_free(s);
  manager_release(mm);
  gen_params_free(&g);
  tok_ids_free(&ids);
  rreq_free(&r);
  json_decref(body);
}

/* ---- stored responses ------------------------------------------------------------ */
/* Stored bodies are what json_dumps wrote: generated text may hold a NUL
 * (a model can emit the byte token <0x00>), which jansson writes as \u0000
 * and reads back only with JSON_ALLOW_NUL. */
static int load(http_req *req, openai_ctx *oc, store_response *out, json_t **body) {
  const char *id = http_req_param(req, "response_id");
  *body = NULL;
  if (store_response_get(oc->st, id, out)) {
    char msg[256];
    snprintf(msg, sizeof msg, "Response with id '%.128s' not found.", id ? id : "");
    api_error(req, 404, ERR_NOT_FOUND, msg, "response_id");
    return ERR_NOT_FOUND;
  }
  if (!(*body = json_loads(out->body, JSON_ALLOW_NUL, NULL))) {
    store_response_free(out);
    api_error(req, 500, ERR_CORRUPT, "the stored response is not valid JSON", NULL);
    return ERR_CORRUPT;
  }
  return 0;
}

static bool running(const char *status) {
  return strcmp(status, "queued") == 0 || strcmp(status, "in_progress") == 0;
}

/* Waits (up to timeout_ms) until a background response has finished and
 * reloads it. */
static void wait_finished(openai_ctx *oc, store_response *r, json_t **body, int timeout_ms) {
  for (int waited = 0; running(r->status) && waited < timeout_ms; waited += 50) {
    usleep(50000);
    store_response again;
    if (store_response_get(oc->st, r->id, &again)) return;
    json_t *b = json_loads(again.body, JSON_ALLOW_NUL, NULL);
    if (!b) {
      store_response_free(&again);
      return;
    }
    store_response_free(r);
    *r = again;
    json_decref(*body);
    *body = b;
  }
}

/* The event sequence of a finished response, for GET ?stream=true: the
 * same events a live stream would have carried, one delta per part. */
static void replay(http_req *req, const json_t *resp, long long after) {
  http_stream *st = http_stream_open(req, 200, NULL, HTTP_STREAM_SSE);
  if (!st) return;
  long long seq = 0;
  json_t *evs = json_array();
  json_t *start = json_deep_copy(resp);
  json_object_set_new(start, "status", json_string("in_progress"));
  json_object_set_new(start, "output", json_array());
  json_object_set_new(start, "usage", json_null());
  json_array_append_new(evs, json_pack("{s:s, s:O}", "type", "response.created", "response", start));
  json_array_append_new(evs, json_pack("{s:s, s:o}", "type", "response.in_progress", "response", start));
  size_t i;
  json_t *it;
  json_array_foreach(json_object_get(resp, "output"), i, it) {
    const char *type = json_string_value(json_object_get(it, "type"));
    const char *id = json_string_value(json_object_get(it, "id"));
    json_t *added = json_deep_copy(it);
    json_object_set_new(added, "status", json_string("in_progress"));
    if (type && strcmp(type, "function_call") == 0) {
      json_object_set_new(added, "arguments", json_string(""));
      json_array_append_new(evs, json_pack("{s:s, s:i, s:o}", "type", "response.output_item.added", "output_index", (int)i, "item", added));
      json_array_append_new(evs, json_pack("{s:s, s:s, s:i, s:O}", "type", "response.function_call_arguments.delta", "item_id", id,
                                           "output_index", (int)i, "delta", json_object_get(it, "arguments")));
      json_array_append_new(evs, json_pack("{s:s, s:s, s:i, s:O, s:O}", "type", "response.function_call_arguments.done", "item_id",
                                           id, "output_index", (int)i, "name", json_object_get(it, "name"), "arguments",
                                           json_object_get(it, "arguments")));
    } else if (!type || (strcmp(type, "message") != 0 && strcmp(type, "reasoning") != 0)) {
      /* The other tool calls are announced whole (as when they were live). */
      bool custom = type && strcmp(type, "custom_tool_call") == 0;
      if (custom) json_object_set_new(added, "input", json_string(""));
      json_array_append_new(evs, json_pack("{s:s, s:i, s:o}", "type", "response.output_item.added", "output_index", (int)i, "item", added));
      if (custom) {
        json_array_append_new(evs, json_pack("{s:s, s:s, s:i, s:O}", "type", "response.custom_tool_call_input.delta", "item_id",
                                             id, "output_index", (int)i, "delta", json_object_get(it, "input")));
        json_array_append_new(evs, json_pack("{s:s, s:s, s:i, s:O}", "type", "response.custom_tool_call_input.done", "item_id",
                                             id, "output_index", (int)i, "input", json_object_get(it, "input")));
      }
    } else {
      bool msg = strcmp(type, "message") == 0;
      json_t *part = json_array_get(json_object_get(it, "content"), 0);
      json_object_set_new(added, "content", json_array());
      json_array_append_new(evs, json_pack("{s:s, s:i, s:o}", "type", "response.output_item.added", "output_index", (int)i, "item", added));
      if (part) {
        json_t *empty = json_deep_copy(part);
        json_object_set_new(empty, "text", json_string(""));
        json_array_append_new(evs, json_pack("{s:s, s:s, s:i, s:i, s:o}", "type", "response.content_part.added", "item_id", id,
                                             "output_index", (int)i, "content_index", 0, "part", empty));
        json_t *d = json_pack("{s:s, s:s, s:i, s:i, s:O}", "type", msg ? "response.output_text.delta" : "response.reasoning_text.delta",
                              "item_id", id, "output_index", (int)i, "content_index", 0, "delta", json_object_get(part, "text"));
        if (d && msg) json_object_set_new(d, "logprobs", json_array());
        json_array_append_new(evs, d);
        json_t *done = json_pack("{s:s, s:s, s:i, s:i, s:O}", "type", msg ? "response.output_text.done" : "response.reasoning_text.done",
                                 "item_id", id, "output_index", (int)i, "content_index", 0, "text", json_object_get(part, "text"));
        if (done && msg) json_object_set_new(done, "logprobs", json_array());
        json_array_append_new(evs, done);
        json_array_append_new(evs, json_pack("{s:s, s:s, s:i, s:i, s:O}", "type", "response.content_part.done", "item_id", id,
                                             "output_index", (int)i, "content_index", 0, "part", part));
      }
    }
    json_array_append_new(evs, json_pack("{s:s, s:i, s:O}", "type", "response.output_item.done", "output_index", (int)i, "item", it));
  }
  const char *status = json_string_value(json_object_get(resp, "status"));
  const char *terminal = !status || strcmp(status, "completed") == 0 ? "response.completed"
                         : strcmp(status, "incomplete") == 0         ? "response.incomplete"
                                                                     : "response.failed";
  json_array_append_new(evs, json_pack("{s:s, s:O}", "type", terminal, "response", resp));
  json_t *ev;
  json_array_foreach(evs, i, ev) {
    if (!ev) continue;
    json_object_set_new(ev, "sequence_number", json_integer(seq));
    if (seq++ <= after) continue;
    char *text = json_dumps(ev, JSON_COMPACT);
    int rc = text ? http_stream_sse(st, json_string_value(json_object_get(ev, "type")), text, strlen(text)) : ERR_NOMEM;
    free(text);
    if (rc) break;
  }
  json_decref(evs);
  http_stream_close(st);
}

void openai_responses_get(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  store_response r;
  json_t *body;
  if (load(req, oc, &r, &body)) return;
  const char *stream = http_req_query(req, "stream");
  if (stream && strcmp(stream, "true") == 0) {
    long long after = -1;
    const char *sa = http_req_query(req, "starting_after");
    if (sa) {
      char *end = NULL;
      after = strtoll(sa, &end, 10);
      if (!*sa || *end || after < -1) {
        api_error(req, 400, ERR_INVALID, "starting_after: expected a sequence number", "starting_after");
        goto done;
      }
    }
    wait_finished(oc, &r, &body, 600000);
    replay(req, body, after);
  } else {
    api_respond_json(req, 200, body);
  }
done:
  json_decref(body);
  store_response_free(&r);
}

void openai_responses_delete(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  store_response r;
  json_t *body;
  if (load(req, oc, &r, &body)) return;
  int rc = store_response_delete(oc->st, r.id);
  if (rc) api_error_last(req, rc, NULL);
  else {
    json_t *out = json_pack("{s:s, s:s, s:b}", "id", r.id, "object", "response", "deleted", 1);
    api_respond_json(req, 200, out);
    json_decref(out);
  }
  json_decref(body);
  store_response_free(&r);
}

void openai_responses_cancel(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  store_response r;
  json_t *body;
  if (load(req, oc, &r, &body)) return;
  if (!json_is_true(json_object_get(body, "background"))) {
    api_error(req, 400, ERR_INVALID, "Only responses created with background: true can be cancelled.", "response_id");
    goto done;
  }
  if (running(r.status)) {
    pthread_mutex_lock(&g_bg_lock);
    for (struct bg *b = g_bg; b; b = b->next)
      if (strcmp(b->s->id, r.id) == 0 && b->s->job) gen_job_cancel(b->s->job);
    pthread_mutex_unlock(&g_bg_lock);
    wait_finished(oc, &r, &body, 10000);
  }
  api_respond_json(req, 200, body);
done:
  json_decref(body);
  store_response_free(&r);
}

void openai_responses_input_items(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  store_response r;
  json_t *body;
  if (load(req, oc, &r, &body)) return;
  store_page page;
  store_item_list l = {0};
  if (resp_page_from_query(req, STORE_ORDER_DESC, &page)) goto done;
  int rc = store_response_items_list(oc->st, r.id, "input", &page, &l);
  if (rc == ERR_NOT_FOUND) {
    api_error(req, 400, rc, "after/before: no input item with that id in this response", page.after ? "after" : "before");
    goto done;
  }
  if (rc) {
    api_error_last(req, rc, NULL);
    goto done;
  }
  json_t *list = resp_list_json(&l);
  if (list) api_respond_json(req, 200, list);
  else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
  json_decref(list);
done:
  store_item_list_free(&l);
  json_decref(body);
  store_response_free(&r);
}

void openai_responses_input_tokens(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  struct rreq r;
  tok_ids ids = TOK_IDS_INIT;
  manager_model *mm = NULL;
  const char *model_name = NULL;
  int rc = api_json_str(body, "", "model", false, &model_name);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "model");
    json_decref(body);
    return;
  }
  if (build(req, oc, body, &r)) goto done;
  if ((rc = manager_get(oc->mgr, model_name, &mm))) {
    openai_error_manager(req, rc);
    goto done;
  }
  outparse_config pc;
  if ((rc = gen_chat_prompt(mm, &r.chat, NULL, &ids, &pc))) {
    api_error(req, 400, rc, err_detail(), "input");
    goto done;
  }
  json_t *out = json_pack("{s:s, s:I}", "object", "response.input_tokens", "input_tokens", (json_int_t)ids.n);
  api_respond_json(req, 200, out);
  json_decref(out);
done:
  manager_release(mm);
  tok_ids_free(&ids);
  rreq_free(&r);
  json_decref(body);
}

static http_route ROUTES[] = {
    {"POST", "/v1/responses", openai_responses_create, NULL, HTTP_BODY_JSON, "openai.responses.create"},
    {"POST", "/v1/responses/input_tokens", openai_responses_input_tokens, NULL, HTTP_BODY_JSON, "openai.responses.input.tokens"},
    {"GET", "/v1/responses/{response_id}", openai_responses_get, NULL, 0, "openai.responses.get"},
    {"DELETE", "/v1/responses/{response_id}", openai_responses_delete, NULL, 0, "openai.responses.delete"},
    {"POST", "/v1/responses/{response_id}/cancel", openai_responses_cancel, NULL, 0, "openai.responses.cancel"},
    {"GET", "/v1/responses/{response_id}/input_items", openai_responses_input_items, NULL, 0, "openai.responses.input.items"},
    {"POST", "/v1/conversations", openai_conversations_create, NULL, HTTP_BODY_JSON, "openai.conversations.create"},
    {"GET", "/v1/conversations/{conversation_id}", openai_conversations_get, NULL, 0, "openai.conversations.get"},
    {"POST", "/v1/conversations/{conversation_id}", openai_conversations_update, NULL, HTTP_BODY_JSON, "openai.conversations.update"},
    {"DELETE", "/v1/conversations/{conversation_id}", openai_conversations_delete, NULL, 0, "openai.conversations.delete"},
    {"POST", "/v1/conversations/{conversation_id}/items", openai_conversations_items_add, NULL, HTTP_BODY_JSON, "openai.conversations.items.add"},
    {"GET", "/v1/conversations/{conversation_id}/items", openai_conversations_items_list, NULL, 0, "openai.conversations.items.list"},
    {"GET", "/v1/conversations/{conversation_id}/items/{item_id}", openai_conversations_item_get, NULL, 0, "openai.conversations.item.get"},
    {"DELETE", "/v1/conversations/{conversation_id}/items/{item_id}", openai_conversations_item_delete, NULL, 0, "openai.conversations.item.delete"},
};

size_t openai_responses_routes(openai_ctx *octx, const http_route **out) {
  for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) ROUTES[i].ctx = octx;
  *out = ROUTES;
  return ARRAY_LEN(ROUTES);
}
