/*
 * rt_response.c - Realtime responses: response.create turns the session's
 * conversation (or the response's own `input`) into canonical chat messages,
 * runs them as a detached gen job (api/gen.h, no HTTP request), and the sink
 * below renders the job's text and tool calls as Realtime events:
 *
 *   response.created, rate_limits.updated,
 *   response.output_item.added, conversation.item.added,
 *   response.content_part.added, text or audio-transcript deltas (and audio
 *   deltas, spoken sentence by sentence), ...done events,
 *   response.output_item.done, conversation.item.done, response.done.
 *
 * Threads: rt_response_create runs on the session worker under s->mu; the
 * sink callbacks run on the gen producer thread and take s->mu; speech is
 * synthesized with the lock released. The response holds a session
 * reference and, through gen_run, the model reference until it ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/openai/rt_int.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

/* ---- events ---------------------------------------------------------------------- */

/* Sends an event of r with response_id first. */
static void emit(struct rt_resp *r, const char *type, json_t *ev) {
  if (!ev) return;
  json_t *o = json_pack("{s:s}", "response_id", r->id);
  json_object_update(o, ev);
  json_decref(ev);
  rt_send(r->s, type, o);
}

static json_t *item_at(struct rt_resp *r, int ix) { return json_array_get(r->output, (size_t)ix); }
static const char *item_id(struct rt_resp *r, int ix) {
  return json_string_value(json_object_get(item_at(r, ix), "id"));
}

/* The content part as part events show it ("text" / "audio"). */
static json_t *wire_part(const json_t *part) {
  const char *t = json_string_value(json_object_get(part, "type"));
  if (t && strcmp(t, "output_audio") == 0)
    return json_pack("{s:s, s:O}", "type", "audio", "transcript", json_object_get(part, "transcript"));
  return json_pack("{s:s, s:O}", "type", "text", "text", json_object_get(part, "text"));
}

static void add_item(struct rt_resp *r, json_t *it) {
  rt_session *s = r->s;
  int ix = (int)json_array_size(r->output);
  char prev[RT_ID_MAX] = "";
  const char *last = rt_last_item_id(s);
  if (last) snprintf(prev, sizeof prev, "%s", last);
  json_array_append(r->output, it);
  r->open = ix;
  r->audio_ms = 0;
  emit(r, "response.output_item.added", json_pack("{s:i, s:O}", "output_index", ix, "item", it));
  if (r->in_conv) {
    rt_item_append(s, it);
    rt_send(s, "conversation.item.added", json_pack("{s:o, s:O}", "previous_item_id",
                                                    last ? json_string(prev) : json_null(), "item", it));
  }
}

static void open_message(struct rt_resp *r) {
  char id[RT_ID_MAX];
  rt_make_id(id, "item_");
  json_t *it = json_pack("{s:s, s:s, s:s, s:s, s:s, s:[]}", "id", id, "object", "realtime.item", "type", "message",
                         "status", "in_progress", "role", "assistant", "content");
  add_item(r, it);
  json_t *part = r->audio ? json_pack("{s:s, s:n, s:s}", "type", "output_audio", "audio", "transcript", "")
                          : json_pack("{s:s, s:s}", "type", "output_text", "text", "");
  json_array_append_new(json_object_get(it, "content"), part);
  emit(r, "response.content_part.added", json_pack("{s:s, s:i, s:i, s:o}", "item_id", id, "output_index", r->open,
                                                   "content_index", 0, "part", wire_part(part)));
  json_decref(it);
}

static void close_item(struct rt_resp *r, const char *status) {
  if (r->open < 0) return;
  int ix = r->open;
  json_t *it = item_at(r, ix);
  const char *id = item_id(r, ix);
  const char *type = json_string_value(json_object_get(it, "type"));
  if (strcmp(type, "message") == 0) {
    json_t *part = json_array_get(json_object_get(it, "content"), 0);
    if (r->audio) {
      emit(r, "response.output_audio.done", json_pack("{s:s, s:i, s:i}", "item_id", id, "output_index", ix,
                                                      "content_index", 0));
      emit(r, "response.output_audio_transcript.done",
           json_pack("{s:s, s:i, s:i, s:O}", "item_id", id, "output_index", ix, "content_index", 0, "transcript",
                     json_object_get(part, "transcript")));
      json_object_set_new(r->s->audio_ms, id, json_real(r->audio_ms));
    } else {
      emit(r, "response.output_text.done", json_pack("{s:s, s:i, s:i, s:O}", "item_id", id, "output_index", ix,
                                                     "content_index", 0, "text", json_object_get(part, "text")));
    }
    emit(r, "response.content_part.done", json_pack("{s:s, s:i, s:i, s:o}", "item_id", id, "output_index", ix,
                                                    "content_index", 0, "part", wire_part(part)));
  }
  if (strcmp(type, "function_call") == 0)
    emit(r, "response.function_call_arguments.done",
         json_pack("{s:s, s:i, s:O, s:O, s:O}", "item_id", id, "output_index", ix, "call_id",
                   json_object_get(it, "call_id"), "name", json_object_get(it, "name"), "arguments",
                   json_object_get(it, "arguments")));
  json_object_set_new(it, "status", json_string(status));
  emit(r, "response.output_item.done", json_pack("{s:i, s:O}", "output_index", ix, "item", it));
  if (r->in_conv) rt_send(r->s, "conversation.item.done", json_pack("{s:O}", "item", it));
  r->open = -1;
}

/* Appends text to a string field of obj. */
static void append_field(json_t *obj, const char *key, const char *text, size_t len) {
  buf b = BUF_INIT;
  buf_append_str(&b, json_string_value(json_object_get(obj, key)) ? json_string_value(json_object_get(obj, key)) : "");
  buf_append(&b, text, len);
  json_object_set_new(obj, key, json_stringn(b.data ? b.data : "", b.len));
  buf_free(&b);
}

/* Takes the pending text up to its last sentence end (all of it when
 * flush), or NULL when nothing is ready to speak yet. */
static char *take_sentence(struct rt_resp *r, bool flush) {
  size_t cut = 0;
  for (size_t i = 0; i < r->pending.len; i++) {
    char ch = r->pending.data[i];
    if (ch == '.' || ch == '!' || ch == '?' || ch == '\n' || ch == ';') cut = i + 1;
  }
  if (flush) cut = r->pending.len;
  /* No sentence end yet: a long enough run is cut at a space (short for the
   * first words of an item, so speech starts early). */
  size_t run = r->audio_ms > 0 ? 80 : 24;
  if (!flush && cut < 12 && r->pending.len >= run) {
    cut = 0;
    for (size_t i = r->pending.len; i > 0; i--)
      if (r->pending.data[i - 1] == ' ') {
        cut = i;
        break;
      }
  }
  if (cut == 0 || (!flush && cut < 12)) return NULL;
  char *t = str_ndup(r->pending.data, cut);
  memmove(r->pending.data, r->pending.data + cut, r->pending.len - cut);
  r->pending.len -= cut;
  return t;
}

/* Speaks text with the session lock released (s->mu held on entry once). */
static void speak_unlocked(struct rt_resp *r, char *text) {
  if (!text) return;
  char id[RT_ID_MAX];
  snprintf(id, sizeof id, "%s", item_id(r, r->open));
  int ix = r->open;
  pthread_mutex_unlock(&r->s->mu);
  rt_speak(r->s, r, text, id, ix);
  pthread_mutex_lock(&r->s->mu);
  free(text);
}

/* ---- sink -------------------------------------------------------------------------- */

static int on_start(void *ctx, gen_job *j) {
  struct rt_resp *r = ctx;
  pthread_mutex_lock(&r->s->mu);
  r->job = j;
  if (atomic_load(&r->cancel)) gen_job_cancel(j);
  pthread_mutex_unlock(&r->s->mu);
  return 0;
}

static int on_text(void *ctx, gen_job *j, int choice, bool reasoning, const char *text, size_t len) {
  (void)j;
  (void)choice;
  struct rt_resp *r = ctx;
  if (reasoning || atomic_load(&r->cancel)) return 0;
  pthread_mutex_lock(&r->s->mu);
  json_t *cur = r->open >= 0 ? item_at(r, r->open) : NULL;
  if (!cur || strcmp(json_string_value(json_object_get(cur, "type")), "message") != 0) {
    close_item(r, "completed");
    open_message(r);
  }
  json_t *part = json_array_get(json_object_get(item_at(r, r->open), "content"), 0);
  append_field(part, r->audio ? "transcript" : "text", text, len);
  emit(r, r->audio ? "response.output_audio_transcript.delta" : "response.output_text.delta",
       json_pack("{s:s, s:i, s:i, s:s%}", "item_id", item_id(r, r->open), "output_index", r->open, "content_index", 0,
                 "delta", text, len));
  if (r->audio) {
    buf_append(&r->pending, text, len);
    speak_unlocked(r, take_sentence(r, false));
  }
  pthread_mutex_unlock(&r->s->mu);
  return 0;
}

static int on_tool_begin(void *ctx, gen_job *j, int choice, int tool_index, const char *call_id, const char *name) {
  (void)j;
  (void)choice;
  (void)tool_index;
  struct rt_resp *r = ctx;
  pthread_mutex_lock(&r->s->mu);
  if (r->audio && r->open >= 0) speak_unlocked(r, take_sentence(r, true));
  close_item(r, "completed");
  char id[RT_ID_MAX];
  rt_make_id(id, "item_");
  json_t *it = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id", id, "object", "realtime.item", "type",
                         "function_call", "status", "in_progress", "call_id", call_id, "name", name, "arguments", "");
  add_item(r, it);
  json_decref(it);
  pthread_mutex_unlock(&r->s->mu);
  return 0;
}

static int on_tool_args(void *ctx, gen_job *j, int choice, int tool_index, const char *text, size_t len) {
  (void)j;
  (void)choice;
  (void)tool_index;
  struct rt_resp *r = ctx;
  pthread_mutex_lock(&r->s->mu);
  if (r->open >= 0) {
    json_t *it = item_at(r, r->open);
    append_field(it, "arguments", text, len);
    emit(r, "response.function_call_arguments.delta",
         json_pack("{s:s, s:i, s:O, s:s%}", "item_id", item_id(r, r->open), "output_index", r->open, "call_id",
                   json_object_get(it, "call_id"), "delta", text, len));
  }
  pthread_mutex_unlock(&r->s->mu);
  return 0;
}

static int on_tool_end(void *ctx, gen_job *j, int choice, int tool_index) {
  (void)j;
  (void)choice;
  (void)tool_index;
  struct rt_resp *r = ctx;
  pthread_mutex_lock(&r->s->mu);
  close_item(r, "completed"); /* arguments.done, output_item.done */
  pthread_mutex_unlock(&r->s->mu);
  return 0;
}

static json_t *usage_json(const gen_result *res) {
  long long in = res ? res->n_prompt : 0, out = res ? res->n_completion : 0, cached = res ? res->n_cached : 0;
  return json_pack("{s:I, s:I, s:I, s:{s:I, s:i, s:i, s:I, s:{s:I, s:i, s:i}}, s:{s:I, s:i}}", "total_tokens",
                   (json_int_t)(in + out), "input_tokens", (json_int_t)in, "output_tokens", (json_int_t)out,
                   "input_token_details", "text_tokens", (json_int_t)in, "audio_tokens", 0, "image_tokens", 0,
                   "cached_tokens", (json_int_t)cached, "cached_tokens_details", "text_tokens", (json_int_t)cached,
                   "audio_tokens", 0, "image_tokens", 0, "output_token_details", "text_tokens", (json_int_t)out,
                   "audio_tokens", 0);
}

/* Closes the response: status, usage, response.done; s->mu held. */
static void finish(struct rt_resp *r, const gen_result *res, int err_code, const char *err_msg) {
  rt_session *s = r->s;
  const gen_choice *c = res && res->n ? &res->ch[0] : NULL;
  bool cancelled = atomic_load(&r->cancel) || (c && c->finish == ENGINE_FINISH_CANCELLED);
  bool length = c && c->finish == ENGINE_FINISH_LENGTH;
  if (!cancelled && !err_code && json_array_size(r->output) == 0) open_message(r); /* an empty answer */
  close_item(r, cancelled || length ? "incomplete" : "completed");
  const char *status = "completed";
  json_t *details = json_null();
  if (err_code) {
    status = "failed";
    json_decref(details);
    details = json_pack("{s:s, s:n, s:{s:s, s:s, s:s}}", "type", "failed", "reason", "error", "type", "server_error",
                        "code", api_status_for(err_code) < 500 ? "invalid_request" : "server_error", "message",
                        err_msg ? err_msg : "the response failed");
  } else if (cancelled) {
    status = "cancelled";
    json_decref(details);
    details = json_pack("{s:s, s:s}", "type", "cancelled", "reason", r->cancel_reason ? r->cancel_reason : "client_cancelled");
  } else if (length) {
    status = "incomplete";
    json_decref(details);
    details = json_pack("{s:s, s:s}", "type", "incomplete", "reason", "max_output_tokens");
  }
  json_object_set_new(r->resp, "status", json_string(status));
  json_object_set_new(r->resp, "status_details", details);
  json_object_set(r->resp, "output", r->output);
  json_object_set_new(r->resp, "usage", usage_json(res));
  rt_send(s, "response.done", json_pack("{s:O}", "response", r->resp));
  r->ended = true;
  if (s->resp == r) s->resp = NULL;
}

static void on_end(void *ctx, gen_job *j, const gen_result *res) {
  (void)j;
  struct rt_resp *r = ctx;
  pthread_mutex_lock(&r->s->mu);
  if (r->audio && r->open >= 0 && !atomic_load(&r->cancel)) speak_unlocked(r, take_sentence(r, true));
  r->job = NULL;
  finish(r, res, res->err_code, res->err_msg);
  pthread_mutex_unlock(&r->s->mu);
}

/* Called once: after on_end, or instead of it when gen_run refused the job
 * (then err_detail() says why). */
static void on_free(void *ctx) {
  struct rt_resp *r = ctx;
  rt_session *s = r->s;
  pthread_mutex_lock(&s->mu);
  r->job = NULL;
  if (!r->ended) finish(r, NULL, ERR_INTERNAL, err_detail());
  pthread_mutex_unlock(&s->mu);
  json_decref(r->resp);
  json_decref(r->output);
  buf_free(&r->pending);
  free(r);
  rt_session_unref(s);
}

static const gen_sink RT_SINK = {
    .on_start = on_start,
    .on_text = on_text,
    .on_tool_begin = on_tool_begin,
    .on_tool_args = on_tool_args,
    .on_tool_end = on_tool_end,
    .on_end = on_end,
    .free = on_free,
};

/* ---- building the prompt -------------------------------------------------------------- */

/* The text of a message item (text parts and audio transcripts). */
static void item_text(const json_t *it, buf *b) {
  size_t i;
  json_t *part;
  json_array_foreach(json_object_get(it, "content"), i, part) {
    const char *t = json_string_value(json_object_get(part, "text"));
    if (!t) t = json_string_value(json_object_get(part, "transcript"));
    if (t && *t) {
      if (b->len) buf_append_str(b, " ");
      buf_append_str(b, t);
    }
  }
}

/* Canonical chat messages from conversation items. */
static json_t *to_messages(const char *instructions, const json_t *items) {
  json_t *msgs = json_array();
  if (instructions && *instructions)
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content", instructions));
  size_t i;
  json_t *it;
  json_array_foreach(items, i, it) {
    const char *type = json_string_value(json_object_get(it, "type"));
    if (!type) continue;
    if (strcmp(type, "message") == 0) {
      buf b = BUF_INIT;
      item_text(it, &b);
      const char *role = json_string_value(json_object_get(it, "role"));
      json_array_append_new(msgs, json_pack("{s:s, s:s%}", "role", role ? role : "user", "content",
                                            b.data ? b.data : "", b.len));
      buf_free(&b);
    } else if (strcmp(type, "function_call") == 0) {
      json_t *call = json_pack("{s:O, s:s, s:{s:O, s:O}}", "id", json_object_get(it, "call_id"), "type", "function",
                               "function", "name", json_object_get(it, "name"), "arguments",
                               json_object_get(it, "arguments"));
      json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
      json_t *calls = json_object_get(last, "tool_calls");
      if (calls) json_array_append_new(calls, call);
      else json_array_append_new(msgs, json_pack("{s:s, s:n, s:[o]}", "role", "assistant", "content", "tool_calls", call));
    } else if (strcmp(type, "function_call_output") == 0) {
      json_array_append_new(msgs, json_pack("{s:s, s:O, s:O}", "role", "tool", "tool_call_id",
                                            json_object_get(it, "call_id"), "content", json_object_get(it, "output")));
    }
  }
  return msgs;
}

/* Realtime tools are flat; the canonical layer takes chat-shaped ones. */
static json_t *to_tools(const json_t *tools) {
  if (!json_array_size(tools)) return NULL;
  json_t *out = json_array();
  size_t i;
  json_t *t;
  json_array_foreach(tools, i, t) {
    json_t *params = json_object_get(t, "parameters");
    json_array_append_new(out, json_pack("{s:s, s:{s:O, s:o, s:o}}", "type", "function", "function", "name",
                                         json_object_get(t, "name"), "description",
                                         json_string(json_string_value(json_object_get(t, "description"))
                                                         ? json_string_value(json_object_get(t, "description"))
                                                         : ""),
                                         "parameters", params ? json_deep_copy(params) : json_pack("{s:s}", "type", "object")));
  }
  return out;
}

/* Items of an out-of-band `input` (item references resolved). */
static int input_items(rt_session *s, const json_t *input, json_t **out) {
  *out = json_array();
  size_t i;
  json_t *it;
  json_array_foreach(input, i, it) {
    const char *type = json_string_value(json_object_get(it, "type"));
    if (type && strcmp(type, "item_reference") == 0) {
      const char *id = json_string_value(json_object_get(it, "id"));
      json_t *found = NULL, *x;
      size_t k;
      json_array_foreach(s->items, k, x) if (id && json_string_value(json_object_get(x, "id")) &&
                                             strcmp(json_string_value(json_object_get(x, "id")), id) == 0) found = x;
      if (!found) return err_set(ERR_NOT_FOUND, "response.input[%zu].id: no item '%s' in the conversation", i, id ? id : "");
      json_array_append(*out, found);
    } else if (json_is_object(it) && type) {
      json_array_append(*out, it);
    } else {
      return err_set(ERR_INVALID, "response.input[%zu]: expected an item object with a type", i);
    }
  }
  return 0;
}

static json_t *response_object(rt_session *s, struct rt_resp *r, const rt_config *c, const json_t *metadata) {
  json_t *mods = json_array();
  if (c->out_text && !c->out_audio) json_array_append_new(mods, json_string("text"));
  if (c->out_audio) {
    if (s->beta) json_array_append_new(mods, json_string("text"));
    json_array_append_new(mods, json_string("audio"));
  }
  json_t *o = json_pack("{s:s, s:s, s:s, s:n, s:[], s:o}", "object", "realtime.response", "id", r->id, "status",
                        "in_progress", "status_details", "output", "conversation_id",
                        r->in_conv ? json_string(s->conv_id) : json_null());
  static const char *const BETA_FMT[] = {"pcm16", "g711_ulaw", "g711_alaw"};
  json_t *max = c->max_output_tokens < 0 ? json_string("inf") : json_integer(c->max_output_tokens);
  if (s->beta) {
    json_object_set_new(o, "modalities", mods);
    json_object_set_new(o, "voice", json_string(r->voice));
    json_object_set_new(o, "output_audio_format", json_string(BETA_FMT[c->out_fmt]));
    json_object_set_new(o, "temperature", json_real(c->temperature));
  } else {
    json_object_set_new(o, "output_modalities", mods);
    json_t *fmt = c->out_fmt == RT_FMT_PCM16 ? json_pack("{s:s, s:i}", "type", "audio/pcm", "rate", 24000)
                                             : json_pack("{s:s}", "type", c->out_fmt == RT_FMT_ULAW ? "audio/pcmu" : "audio/pcma");
    json_object_set_new(o, "audio", json_pack("{s:{s:o, s:s}}", "output", "format", fmt, "voice", r->voice));
  }
  json_object_set_new(o, "max_output_tokens", max);
  json_object_set_new(o, "usage", json_null());
  json_object_set_new(o, "metadata", metadata ? json_deep_copy(metadata) : json_null());
  return o;
}

static enum gen_tool_choice tool_choice_of(const json_t *tc, const char **name) {
  *name = NULL;
  const char *t = json_string_value(tc);
  if (t && strcmp(t, "none") == 0) return GEN_TOOL_NONE;
  if (t && strcmp(t, "required") == 0) return GEN_TOOL_REQUIRED;
  if (json_is_object(tc) && (*name = json_string_value(json_object_get(tc, "name")))) return GEN_TOOL_FUNCTION;
  return GEN_TOOL_AUTO;
}

void rt_response_create(rt_session *s, const json_t *p, const char *event_id) {
  if (s->cfg.transcription) {
    rt_error(s, "invalid_request_error", "invalid_value", "A transcription session does not create responses.", "type",
             event_id);
    return;
  }
  if (s->resp) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "Conversation already has an active response in progress: %s. Wait until the response is finished "
             "before creating a new one.",
             s->resp->id);
    rt_error(s, "invalid_request_error", "conversation_already_has_active_response", msg, NULL, event_id);
    return;
  }
  if (p && !json_is_null(p) && !json_is_object(p)) {
    rt_error(s, "invalid_request_error", "invalid_type", "response: expected an object", "response", event_id);
    return;
  }
  rt_config c;
  rt_config_copy(&c, &s->cfg);
  const char *param = NULL;
  json_t *items = NULL, *msgs = NULL, *tools = NULL;
  manager_model *mm = NULL;
  gen_params g;
  gen_params_init(&g);
  tok_ids ids = TOK_IDS_INIT;
  int rc = 0;
  if (json_is_object(p) && (rc = rt_config_apply(&c, p, s->beta, false, "response", &param))) goto bad;
  const char *conv = json_string_value(json_object_get(p, "conversation"));
  if (conv && strcmp(conv, "auto") && strcmp(conv, "none")) {
    rc = err_set(ERR_INVALID, "response.conversation: expected \"auto\" or \"none\"");
    param = "response.conversation";
    goto bad;
  }
  json_t *input = json_object_get(p, "input");
  if (input && !json_is_null(input)) {
    if (!json_is_array(input)) {
      rc = err_set(ERR_TYPE, "response.input: expected an array of items");
      param = "response.input";
      goto bad;
    }
    if ((rc = input_items(s, input, &items))) {
      param = "response.input";
      goto bad;
    }
  } else {
    items = json_incref(s->items);
  }
  if ((rc = manager_get(s->rc->mgr, c.model, &mm))) {
    rt_error(s, "invalid_request_error", rc == ERR_NOT_FOUND ? "model_not_found" : "model_unavailable", err_detail(),
             "model", event_id);
    goto done;
  }
  msgs = to_messages(c.instructions, items);
  tools = to_tools(c.tools);
  const char *forced = NULL;
  gen_chat ch = {.messages = msgs, .tools = tools, .tool_choice = tool_choice_of(c.tool_choice, &forced), .thinking = 0};
  outparse_config pc;
  rc = gen_chat_prompt(mm, &ch, NULL, &ids, &pc);
  /* truncation "auto": drop the oldest turns (after the instructions) until
   * the prompt leaves room for an answer. */
  int64_t n_ctx = mm->eng ? engine_n_ctx(mm->eng) : 0;
  size_t first = c.instructions && *c.instructions ? 1 : 0;
  while (!rc && n_ctx && (int64_t)ids.n + 64 >= n_ctx && json_array_size(msgs) > first + 1) {
    json_array_remove(msgs, first);
    /* A tool result must not lose the call it answers. */
    while (json_array_size(msgs) > first + 1 &&
           strcmp(json_string_value(json_object_get(json_array_get(msgs, first), "role")), "tool") == 0)
      json_array_remove(msgs, first);
    ids.n = 0;
    rc = gen_chat_prompt(mm, &ch, NULL, &ids, &pc);
  }
  if (rc || (rc = gen_chat_force_tools(mm, &ch, forced, &g))) {
    rt_error(s, "invalid_request_error", "invalid_value", err_detail(), NULL, event_id);
    goto done;
  }
  g.er.sample.temperature = (float)c.temperature;
  if (c.max_output_tokens > 0) g.er.max_tokens = c.max_output_tokens;
  uint64_t seed;
  rand_bytes(&seed, sizeof seed);
  g.er.sample.seed = seed;

  struct rt_resp *r = calloc(1, sizeof *r);
  if (!r || !(r->output = json_array())) {
    free(r);
    rt_error(s, "server_error", "server_error", "out of memory", NULL, event_id);
    goto done;
  }
  r->s = s;
  rt_make_id(r->id, "resp_");
  r->open = -1;
  r->in_conv = !conv || strcmp(conv, "auto") == 0;
  r->audio = c.out_audio;
  r->out_fmt = c.out_fmt;
  r->speed = c.speed;
  snprintf(r->voice, sizeof r->voice, "%s", c.voice ? c.voice : "alloy");
  r->resp = response_object(s, r, &c, json_object_get(p, "metadata"));
  pthread_mutex_lock(&s->qmu);
  s->refs++;
  pthread_mutex_unlock(&s->qmu);
  s->resp = r;
  rt_send(s, "response.created", json_pack("{s:O}", "response", r->resp));
  rt_send(s, "rate_limits.updated",
          json_pack("{s:[{s:s, s:i, s:i, s:f}, {s:s, s:i, s:i, s:f}]}", "rate_limits", "name", "requests", "limit",
                    1000, "remaining", 999, "reset_seconds", 0.06, "name", "tokens", "limit", 1000000, "remaining",
                    1000000, "reset_seconds", 0.0));
  gen_opts opts = {.stream = false, .detached = true, .prompt_param = "input"};
  /* On refusal gen_run frees r through the sink (response.done "failed"). */
  gen_run(NULL, mm, &g, &ids, &pc, &opts, &RT_SINK, r);
  mm = NULL;
  goto done;
bad:
  rt_error_last(s, rc, param, event_id);
done:
  manager_release(mm);
  gen_params_free(&g);
  tok_ids_free(&ids);
  json_decref(items);
  json_decref(msgs);
  json_decref(tools);
  rt_config_free(&c);
}

bool rt_response_cancel(rt_session *s, const char *reason) {
  struct rt_resp *r = s->resp;
  if (!r || atomic_load(&r->cancel)) return false;
  r->cancel_reason = reason;
  atomic_store(&r->cancel, true);
  if (r->job) gen_job_cancel(r->job);
  return true;
}
