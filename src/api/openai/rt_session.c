/*
 * rt_session.c - one Realtime session: the WebSocket callbacks, the
 * session's worker thread and its queue of client events, the dispatch of
 * every client event, the conversation (insert, retrieve, delete,
 * truncate) and responses run through the canonical generation layer.
 *
 * Threads (see rt_int.h): the WebSocket loop only queues; the worker runs
 * each client event under s->mu; a response runs as a detached gen job
 * whose sink callbacks take s->mu on the gen producer thread. s->mu is
 * recursive because gen_run, called by the worker under the lock, frees a
 * refused job through the sink on the same thread.
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/openai/rt_int.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

#define RT_QUEUE_MAX (64u << 20) /* bytes of client events waiting for the worker */
#define RT_EVENT_MAX (15u << 20) /* one client event (the API's limit for an append) */

/* ---- lifecycle ------------------------------------------------------------------- */

rt_session *rt_session_new(openai_realtime_ctx *rc, bool beta) {
  rt_session *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  pthread_mutexattr_t at;
  pthread_mutexattr_init(&at);
  pthread_mutexattr_settype(&at, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&s->mu, &at);
  pthread_mutexattr_destroy(&at);
  pthread_mutex_init(&s->qmu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->rc = rc;
  s->beta = beta;
  s->refs = 1; /* the WebSocket loop's, dropped in on_close */
  s->items = json_array();
  s->audio_ms = json_object();
  s->ain = rt_ain_new();
  rt_make_id(s->conv_id, "conv_");
  if (!s->items || !s->audio_ms || !s->ain) {
    json_decref(s->items);
    json_decref(s->audio_ms);
    rt_ain_free(s->ain);
    free(s);
    return NULL;
  }
  pthread_mutex_lock(&rc->priv->mu);
  rc->priv->n_sessions++;
  pthread_mutex_unlock(&rc->priv->mu);
  return s;
}

static void session_free(rt_session *s) {
  for (struct rt_msg *m = s->q_head, *next; m; m = next) {
    next = m->next;
    free(m);
  }
  rt_ain_free(s->ain);
  rt_config_free(&s->cfg);
  json_decref(s->items);
  json_decref(s->audio_ms);
  if (s->conn) ws_conn_unref(s->conn);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->qmu);
  pthread_cond_destroy(&s->cv);
  struct rt_state *st = s->rc->priv;
  free(s);
  pthread_mutex_lock(&st->mu);
  st->n_sessions--;
  pthread_cond_broadcast(&st->cv);
  pthread_mutex_unlock(&st->mu);
}

void rt_session_unref(rt_session *s) {
  if (!s) return;
  pthread_mutex_lock(&s->qmu);
  int n = --s->refs;
  pthread_mutex_unlock(&s->qmu);
  if (n == 0) session_free(s);
}

/* ---- sending ------------------------------------------------------------------------ */

void rt_send(rt_session *s, const char *type, json_t *ev) {
  if (!ev) return;
  const char *name = s->beta ? rt_beta_event_name(type) : type;
  if (!name || !s->conn) {
    json_decref(ev);
    return;
  }
  char eid[RT_ID_MAX];
  rt_make_id(eid, "event_");
  json_t *o = json_pack("{s:s, s:s}", "type", name, "event_id", eid);
  if (s->beta) {
    json_t *item = json_object_get(ev, "item");
    if (json_is_object(item)) json_object_set_new(ev, "item", rt_item_beta(item));
    json_t *resp = json_object_get(ev, "response");
    json_t *out = json_object_get(resp, "output");
    if (json_is_array(out)) {
      json_t *copy = json_array();
      size_t i;
      json_t *it;
      json_array_foreach(out, i, it) json_array_append_new(copy, rt_item_beta(it));
      resp = json_copy(resp);
      json_object_set_new(resp, "output", copy);
      json_object_set_new(ev, "response", resp);
    }
  }
  json_object_update(o, ev);
  json_decref(ev);
  char *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (text) ws_send_text(s->conn, text, strlen(text));
  free(text);
}

void rt_error(rt_session *s, const char *type, const char *code, const char *message, const char *param,
              const char *event_id) {
  json_t *e = json_pack("{s:s, s:o, s:s, s:o, s:o}", "type", type ? type : "invalid_request_error", "code",
                        code ? json_string(code) : json_null(), "message", message ? message : "error", "param",
                        param ? json_string(param) : json_null(), "event_id",
                        event_id ? json_string(event_id) : json_null());
  rt_send(s, "error", json_pack("{s:o}", "error", e));
}

/* An error from err_detail() with an ERR_* code mapped to a wire code. */
void rt_error_last(rt_session *s, int rc, const char *param, const char *event_id) {
  const char *code = rc == ERR_TYPE ? "invalid_type" : rc == ERR_RANGE ? "integer_below_min_value" : "invalid_value";
  if (rc == ERR_PARSE) code = "invalid_value";
  rt_error(s, "invalid_request_error", code, err_detail(), param, event_id);
}

/* ---- conversation -------------------------------------------------------------------- */

const char *rt_last_item_id(rt_session *s) {
  size_t n = json_array_size(s->items);
  return n ? json_string_value(json_object_get(json_array_get(s->items, n - 1), "id")) : NULL;
}

void rt_item_append(rt_session *s, json_t *item) { json_array_append(s->items, item); }

void rt_item_announce(rt_session *s, const json_t *item, const char *prev) {
  json_t *p = prev ? json_string(prev) : json_null();
  rt_send(s, "conversation.item.added", json_pack("{s:O, s:O}", "previous_item_id", p, "item", item));
  rt_send(s, "conversation.item.done", json_pack("{s:O, s:O}", "previous_item_id", p, "item", item));
  json_decref(p);
}

static long item_index(rt_session *s, const char *id) {
  size_t i;
  json_t *it;
  json_array_foreach(s->items, i, it) {
    const char *x = json_string_value(json_object_get(it, "id"));
    if (x && id && strcmp(x, id) == 0) return (long)i;
  }
  return -1;
}

static void item_not_found(rt_session *s, const char *id, const char *param, const char *event_id) {
  char msg[200];
  snprintf(msg, sizeof msg, "Item with item_id '%.80s' not found in the conversation.", id ? id : "");
  rt_error(s, "invalid_request_error", "item_not_found", msg, param, event_id);
}

/* Checks and normalizes a client item in place (GA spellings). */
static int item_check(json_t *it, const char *path) {
  const char *type = json_string_value(json_object_get(it, "type"));
  if (!type) return err_set(ERR_INVALID, "%s.type: missing required parameter", path);
  if (strcmp(type, "message") == 0) {
    const char *role = json_string_value(json_object_get(it, "role"));
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system")))
      return err_set(ERR_INVALID, "%s.role: expected one of user, assistant, system", path);
    json_t *content = json_object_get(it, "content");
    if (!json_is_array(content)) return err_set(ERR_TYPE, "%s.content: expected an array", path);
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part) {
      const char *pt = json_string_value(json_object_get(part, "type"));
      bool assistant = strcmp(role, "assistant") == 0;
      if (pt && assistant && strcmp(pt, "text") == 0) json_object_set_new(part, "type", json_string(pt = "output_text"));
      if (pt && assistant && strcmp(pt, "audio") == 0) json_object_set_new(part, "type", json_string(pt = "output_audio"));
      if (pt && !assistant && strcmp(pt, "text") == 0) json_object_set_new(part, "type", json_string(pt = "input_text"));
      bool ok = pt && (assistant ? (strcmp(pt, "output_text") == 0 || strcmp(pt, "output_audio") == 0)
                                 : (strcmp(pt, "input_text") == 0 || strcmp(pt, "input_audio") == 0 ||
                                    strcmp(pt, "item_reference") == 0));
      if (!ok)
        return err_set(ERR_INVALID, "%s.content[%zu].type: '%s' is not valid for a %s message", path, i,
                       pt ? pt : "(missing)", role);
      if ((strcmp(pt, "input_text") == 0 || strcmp(pt, "output_text") == 0) &&
          !json_is_string(json_object_get(part, "text")))
        return err_set(ERR_TYPE, "%s.content[%zu].text: expected a string", path, i);
    }
  } else if (strcmp(type, "function_call") == 0) {
    if (!json_is_string(json_object_get(it, "name")) || !json_is_string(json_object_get(it, "call_id")))
      return err_set(ERR_INVALID, "%s: a function_call needs string name and call_id", path);
    if (!json_is_string(json_object_get(it, "arguments"))) json_object_set_new(it, "arguments", json_string("{}"));
  } else if (strcmp(type, "function_call_output") == 0) {
    if (!json_is_string(json_object_get(it, "call_id")) || !json_is_string(json_object_get(it, "output")))
      return err_set(ERR_INVALID, "%s: a function_call_output needs string call_id and output", path);
  } else {
    return err_set(ERR_INVALID, "%s.type: '%s' is not one of message, function_call, function_call_output", path, type);
  }
  return 0;
}

static void item_create(rt_session *s, const json_t *ev, const char *event_id) {
  json_t *src = json_object_get(ev, "item");
  if (!json_is_object(src)) {
    rt_error(s, "invalid_request_error", "missing_required_parameter", "item: expected an object", "item", event_id);
    return;
  }
  json_t *it = json_deep_copy(src);
  if (item_check(it, "item")) {
    rt_error_last(s, ERR_INVALID, "item", event_id);
    json_decref(it);
    return;
  }
  const char *id = json_string_value(json_object_get(it, "id"));
  char gen[RT_ID_MAX];
  if (id && item_index(s, id) >= 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "item.id: an item with id '%.80s' already exists", id);
    rt_error(s, "invalid_request_error", "duplicate_item_id", msg, "item.id", event_id);
    json_decref(it);
    return;
  }
  if (!id) {
    rt_make_id(gen, "item_");
    json_object_set_new(it, "id", json_string(gen));
  }
  json_object_set_new(it, "object", json_string("realtime.item"));
  json_object_set_new(it, "status", json_string("completed"));
  /* Audio content without a transcript is transcribed, so the model hears it. */
  json_t *content = json_object_get(it, "content");
  size_t i;
  json_t *part;
  json_array_foreach(content, i, part) {
    const char *pt = json_string_value(json_object_get(part, "type"));
    const char *b64 = json_string_value(json_object_get(part, "audio"));
    if (pt && strcmp(pt, "input_audio") == 0 && b64 && !json_is_string(json_object_get(part, "transcript"))) {
      char *text = NULL;
      if (rt_transcribe_b64(s, b64, &text)) {
        rt_error_last(s, ERR_PARSE, "item.content", event_id);
        json_decref(it);
        return;
      }
      json_object_set_new(part, "transcript", json_string(text ? text : ""));
      free(text);
    }
  }
  json_t *prev_v = json_object_get(ev, "previous_item_id");
  const char *prev = json_string_value(prev_v);
  size_t at = json_array_size(s->items);
  const char *announced_prev = rt_last_item_id(s);
  if (prev && strcmp(prev, "root") == 0) {
    at = 0;
    announced_prev = NULL;
  } else if (prev) {
    long k = item_index(s, prev);
    if (k < 0) {
      item_not_found(s, prev, "previous_item_id", event_id);
      json_decref(it);
      return;
    }
    at = (size_t)k + 1;
    announced_prev = prev;
  }
  char prev_copy[RT_ID_MAX] = "";
  if (announced_prev) snprintf(prev_copy, sizeof prev_copy, "%s", announced_prev);
  json_array_insert(s->items, at, it);
  rt_item_announce(s, it, announced_prev ? prev_copy : NULL);
  json_decref(it);
}

static void item_retrieve(rt_session *s, const json_t *ev, const char *event_id) {
  const char *id = json_string_value(json_object_get(ev, "item_id"));
  long k = item_index(s, id);
  if (k < 0) return item_not_found(s, id, "item_id", event_id);
  rt_send(s, "conversation.item.retrieved", json_pack("{s:O}", "item", json_array_get(s->items, (size_t)k)));
}

static void item_delete(rt_session *s, const json_t *ev, const char *event_id) {
  const char *id = json_string_value(json_object_get(ev, "item_id"));
  long k = item_index(s, id);
  if (k < 0) return item_not_found(s, id, "item_id", event_id);
  json_t *idv = json_string(id);
  json_array_remove(s->items, (size_t)k);
  rt_send(s, "conversation.item.deleted", json_pack("{s:o}", "item_id", idv));
}

/* Truncates an assistant audio item to what the user heard: the transcript
 * keeps the share of words that audio_end_ms covers. */
static void item_truncate(rt_session *s, const json_t *ev, const char *event_id) {
  const char *id = json_string_value(json_object_get(ev, "item_id"));
  long k = item_index(s, id);
  if (k < 0) return item_not_found(s, id, "item_id", event_id);
  json_t *it = json_array_get(s->items, (size_t)k);
  json_t *ci = json_object_get(ev, "content_index"), *end = json_object_get(ev, "audio_end_ms");
  if (!json_is_integer(ci) || !json_is_integer(end) || json_integer_value(end) < 0) {
    rt_error(s, "invalid_request_error", "invalid_value", "content_index and audio_end_ms must be non-negative integers",
             !json_is_integer(ci) ? "content_index" : "audio_end_ms", event_id);
    return;
  }
  json_t *part = json_array_get(json_object_get(it, "content"), (size_t)json_integer_value(ci));
  const char *role = json_string_value(json_object_get(it, "role"));
  const char *pt = json_string_value(json_object_get(part, "type"));
  if (!role || strcmp(role, "assistant") || !pt || strcmp(pt, "output_audio")) {
    rt_error(s, "invalid_request_error", "invalid_value",
             "Only assistant messages with audio content can be truncated (content_index does not name an audio part).",
             "content_index", event_id);
    return;
  }
  double total = json_number_value(json_object_get(s->audio_ms, id));
  double cut = (double)json_integer_value(end);
  if (cut > total + 1) {
    char msg[160];
    snprintf(msg, sizeof msg, "Audio content of %.0fms is shorter than %.0fms.", total, cut);
    rt_error(s, "invalid_request_error", "invalid_value", msg, "audio_end_ms", event_id);
    return;
  }
  const char *tr = json_string_value(json_object_get(part, "transcript"));
  if (tr && total > 0) {
    size_t keep = (size_t)((double)strlen(tr) * (cut / total));
    while (keep > 0 && keep < strlen(tr) && tr[keep] != ' ') keep--;
    json_object_set_new(part, "transcript", json_stringn(tr, keep));
  }
  json_object_set_new(s->audio_ms, id, json_real(cut));
  rt_send(s, "conversation.item.truncated",
          json_pack("{s:s, s:O, s:O}", "item_id", id, "content_index", ci, "audio_end_ms", end));
}

/* ---- dispatch -------------------------------------------------------------------------- */

static void send_session(rt_session *s, const char *what) {
  const char *name = what;
  char buf_name[64];
  if (s->beta && s->cfg.transcription) {
    snprintf(buf_name, sizeof buf_name, "transcription_%s", what);
    name = buf_name;
  }
  rt_send(s, name, json_pack("{s:o}", "session", rt_config_json(&s->cfg, s->beta)));
}

static void session_update(rt_session *s, const json_t *ev, const char *event_id, bool transcription_event) {
  json_t *sess = json_object_get(ev, "session");
  const char *param = NULL;
  /* Beta transcription_session.update carries the flat transcription layout. */
  bool was = s->cfg.transcription;
  rt_config next;
  rt_config_copy(&next, &s->cfg);
  int rc = rt_config_apply(&next, sess, s->beta, !s->beta, "session", &param);
  /* A voice that no local voice answers to is refused here, not at the
   * first spoken word. */
  tts *t = !rc && next.voice && (!s->cfg.voice || strcmp(next.voice, s->cfg.voice)) ? rt_tts(s->rc) : NULL;
  tts_choice ch;
  if (t && tts_voice_resolve(t, next.voice, &ch)) {
    rc = err_set(ERR_INVALID, "%s: unknown voice '%s' (an OpenAI voice name or a local voice)",
                 s->beta ? "session.voice" : "session.audio.output.voice", next.voice);
    param = s->beta ? "session.voice" : "session.audio.output.voice";
  }
  if (rc) {
    rt_config_free(&next);
    return rt_error_last(s, rc, param, event_id);
  }
  rt_config_free(&s->cfg);
  s->cfg = next;
  if (transcription_event) s->cfg.transcription = true;
  if (s->beta && was != s->cfg.transcription) s->cfg.transcription = was;
  send_session(s, "session.updated");
}

static void handle(rt_session *s, const char *data, size_t len) {
  json_t *ev = NULL;
  if (api_json_decode_object(data, len, &ev)) {
    char msg[300];
    snprintf(msg, sizeof msg, "The event could not be parsed as a JSON object: %s", err_detail());
    rt_error(s, "invalid_request_error", "invalid_json", msg, NULL, NULL);
    return;
  }
  const char *type = json_string_value(json_object_get(ev, "type"));
  const char *event_id = json_string_value(json_object_get(ev, "event_id"));
  pthread_mutex_lock(&s->mu);
  if (!type) {
    rt_error(s, "invalid_request_error", "missing_required_parameter", "Missing required parameter: 'type'.", "type",
             event_id);
  } else if (strcmp(type, "session.update") == 0) {
    session_update(s, ev, event_id, false);
  } else if (strcmp(type, "transcription_session.update") == 0 && s->beta) {
    session_update(s, ev, event_id, true);
  } else if (strcmp(type, "input_audio_buffer.append") == 0) {
    json_t *a = json_object_get(ev, "audio");
    uint8_t *bytes = NULL;
    size_t n = 0;
    int rc = json_is_string(a) ? rt_b64_decode(json_string_value(a), json_string_length(a), &bytes, &n)
                               : err_set(ERR_TYPE, "audio: expected a base64 string");
    if (rc) rt_error_last(s, rc, "audio", event_id);
    else if ((rc = rt_audio_append(s, bytes, n, event_id))) rt_error_last(s, rc, "audio", event_id);
    free(bytes);
  } else if (strcmp(type, "input_audio_buffer.commit") == 0) {
    rt_audio_commit(s, event_id, false);
  } else if (strcmp(type, "input_audio_buffer.clear") == 0) {
    rt_audio_clear(s);
    rt_send(s, "input_audio_buffer.cleared", json_object());
  } else if (strcmp(type, "conversation.item.create") == 0) {
    item_create(s, ev, event_id);
  } else if (strcmp(type, "conversation.item.retrieve") == 0) {
    item_retrieve(s, ev, event_id);
  } else if (strcmp(type, "conversation.item.delete") == 0) {
    item_delete(s, ev, event_id);
  } else if (strcmp(type, "conversation.item.truncate") == 0) {
    item_truncate(s, ev, event_id);
  } else if (strcmp(type, "response.create") == 0) {
    rt_response_create(s, json_object_get(ev, "response"), event_id);
  } else if (strcmp(type, "response.cancel") == 0) {
    const char *rid = json_string_value(json_object_get(ev, "response_id"));
    if (!s->resp || (rid && strcmp(rid, s->resp->id) != 0))
      rt_error(s, "invalid_request_error", "response_cancel_not_active",
               "Cancellation failed: no active response found.", rid ? "response_id" : NULL, event_id);
    else rt_response_cancel(s, "client_cancelled");
  } else if (strcmp(type, "output_audio_buffer.clear") == 0) {
    rt_error(s, "invalid_request_error", "invalid_value",
             "output_audio_buffer.clear is only available for WebRTC and SIP connections.", "type", event_id);
  } else {
    char msg[200];
    snprintf(msg, sizeof msg, "Invalid value: '%.100s'. This is not a client event type this server knows.", type);
    rt_error(s, "invalid_request_error", "invalid_value", msg, "type", event_id);
  }
  pthread_mutex_unlock(&s->mu);
  json_decref(ev);
}

static void *worker_main(void *arg) {
  rt_session *s = arg;
  bool expired = false;
  pthread_mutex_lock(&s->qmu);
  for (;;) {
    /* The session ends at cfg.expires_at (the worker alone changes cfg). */
    while ((!s->q_head || expired) && !s->closed) {
      struct timespec until = {.tv_sec = (time_t)s->cfg.expires_at, .tv_nsec = 0};
      int w = expired ? pthread_cond_wait(&s->cv, &s->qmu) : pthread_cond_timedwait(&s->cv, &s->qmu, &until);
      if (w == ETIMEDOUT && !expired && time_wall_s() >= s->cfg.expires_at) {
        expired = true;
        pthread_mutex_unlock(&s->qmu);
        char msg[120];
        snprintf(msg, sizeof msg, "Your session hit the maximum duration of %d seconds.", s->rc->max_session_s);
        rt_error(s, "invalid_request_error", "session_expired", msg, NULL, NULL);
        ws_close(s->conn, WS_CLOSE_NORMAL, "session expired");
        pthread_mutex_lock(&s->qmu);
      }
    }
    if (s->closed) break;
    struct rt_msg *m = s->q_head;
    s->q_head = m->next;
    if (!s->q_head) s->q_tail = NULL;
    s->q_bytes -= m->len;
    pthread_mutex_unlock(&s->qmu);
    handle(s, m->data, m->len);
    free(m);
    pthread_mutex_lock(&s->qmu);
  }
  pthread_mutex_unlock(&s->qmu);
  pthread_mutex_lock(&s->mu);
  rt_response_cancel(s, "client_cancelled");
  rt_audio_clear(s);
  pthread_mutex_unlock(&s->mu);
  rt_session_unref(s);
  return NULL;
}

/* ---- WebSocket callbacks (loop thread: queue and return) ------------------------ */

static void ws_open(ws_conn *c, void *ctx) {
  rt_session *s = ctx;
  ws_conn_ref(c);
  pthread_mutex_lock(&s->mu);
  s->conn = c;
  send_session(s, "session.created");
  if (s->beta && !s->cfg.transcription)
    rt_send(s, "conversation.created",
            json_pack("{s:{s:s, s:s}}", "conversation", "id", s->conv_id, "object", "realtime.conversation"));
  pthread_mutex_lock(&s->qmu);
  s->refs++;
  pthread_mutex_unlock(&s->qmu);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, worker_main, s) != 0) {
    pthread_mutex_lock(&s->qmu);
    s->refs--;
    pthread_mutex_unlock(&s->qmu);
    LOG_WARN("realtime", "cannot start a session worker");
    ws_close(c, WS_CLOSE_INTERNAL, "cannot start the session");
  }
  pthread_attr_destroy(&attr);
  pthread_mutex_unlock(&s->mu);
}

static void ws_message(ws_conn *c, enum ws_opcode op, const uint8_t *data, size_t len, void *ctx) {
  (void)c;
  rt_session *s = ctx;
  if (op != WS_TEXT) {
    rt_error(s, "invalid_request_error", "invalid_value",
             "Binary frames are not supported: send each event as a JSON text message.", NULL, NULL);
    return;
  }
  if (len > RT_EVENT_MAX) {
    char msg[160];
    snprintf(msg, sizeof msg, "The event is %zu bytes; the largest accepted is %u bytes (15 MiB).", len, RT_EVENT_MAX);
    rt_error(s, "invalid_request_error", "event_too_large", msg, NULL, NULL);
    return;
  }
  pthread_mutex_lock(&s->qmu);
  if (s->q_bytes + len > RT_QUEUE_MAX) {
    pthread_mutex_unlock(&s->qmu);
    rt_error(s, "invalid_request_error", "rate_limit_exceeded",
             "Too many events are waiting to be processed; this event was dropped.", NULL, NULL);
    return;
  }
  struct rt_msg *m = malloc(sizeof *m + len + 1);
  if (m) {
    m->next = NULL;
    m->len = len;
    memcpy(m->data, data, len);
    m->data[len] = '\0';
    if (s->q_tail) s->q_tail->next = m;
    else s->q_head = m;
    s->q_tail = m;
    s->q_bytes += len;
    pthread_cond_signal(&s->cv);
  }
  pthread_mutex_unlock(&s->qmu);
}

static void ws_closed(ws_conn *c, int code, const char *reason, void *ctx) {
  (void)c;
  (void)code;
  (void)reason;
  rt_session *s = ctx;
  /* The worker cancels a running response when it sees closed. */
  pthread_mutex_lock(&s->qmu);
  s->closed = true;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->qmu);
  rt_session_unref(s);
}

const ws_handler rt_ws_handler = {ws_open, ws_message, ws_closed};
