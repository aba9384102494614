/*
 * speak_ws.c - Deepgram text to speech over WebSocket, GET /v1/speak with
 * an upgrade (../shared/specs/deepgram.md section 6).
 *
 * Client text frames: Speak {text} appends to the session's buffer, Flush
 * synthesizes the buffer (binary frames of raw linear16 / mulaw / alaw at
 * the handshake's sample_rate, then Flushed {sequence_id} counting flushes
 * from 0), Clear drops buffered text and stops audio in progress (Cleared
 * {sequence_id}), Close flushes what is left and closes with 1000. The
 * server sends Metadata first; anything it cannot use (binary frames, bad
 * JSON, unknown types, text over the limit) gets a Warning, and the socket
 * stays open.
 *
 * Threads: as in live.c, the loop thread only queues commands; a worker
 * synthesizes and sends. Clear must act while a synthesis runs, so it also
 * bumps an atomic generation number that the synthesis callback checks;
 * commands queued before a Clear carry the old generation and are dropped.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/deepgram/speak.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "http/ws.h"

#define SPEAK_WS_TEXT_MAX 20000 /* characters buffered before a Flush */

enum cmd_kind { CMD_SPEAK, CMD_FLUSH, CMD_CLEAR, CMD_CLOSE };
typedef struct cmd {
  enum cmd_kind kind;
  unsigned gen;
  struct cmd *next;
  char text[];
} cmd;

typedef struct speak_ws {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  cmd *head, *tail;
  bool gone;
  int refs;
  _Atomic unsigned gen; /* bumped by every Clear */

  ws_conn *c;
  api_speech *sp;
  tts *tts;
  tts_choice choice;
  dg_speak_format f;
  char request_id[37], model[80], model_uuid[37];

  /* worker only */
  buf text;
  size_t n_chars;
  int flush_seq, clear_seq;
  unsigned synth_gen;
  audio_encoder *enc;
  buf out;
} speak_ws;

static void sws_unref(speak_ws *S) {
  pthread_mutex_lock(&S->mu);
  int left = --S->refs;
  pthread_mutex_unlock(&S->mu);
  if (left) return;
  for (cmd *c = S->head; c;) {
    cmd *n = c->next;
    free(c);
    c = n;
  }
  buf_free(&S->text);
  buf_free(&S->out);
  audio_encoder_free(S->enc);
  pthread_cond_destroy(&S->cv);
  pthread_mutex_destroy(&S->mu);
  free(S);
}

static void send_json(speak_ws *S, json_t *v) {
  char *s = v ? api_speech_json_dumps(v) : NULL;
  json_decref(v);
  if (s) ws_send_text(S->c, s, strlen(s));
  free(s);
}

static void warn(speak_ws *S, const char *code, const char *description) {
  send_json(S, json_pack("{s:s, s:s, s:s}", "type", "Warning", "description", description, "code", code));
}

/* ---- the worker ------------------------------------------------------------ */

static int sws_on_pcm(void *user, const int16_t *pcm, size_t n, int rate) {
  speak_ws *S = user;
  (void)rate;
  if (atomic_load(&S->gen) != S->synth_gen) return 1; /* cleared */
  int rc = audio_encoder_push(S->enc, pcm, n, &S->out);
  if (!rc && S->out.len) rc = ws_send_binary(S->c, S->out.data, S->out.len);
  buf_reset(&S->out);
  return rc != 0;
}

/* Speaks the buffer; returns 0, ERR_CANCELLED when a Clear stopped it. */
static int synth_buffer(speak_ws *S, unsigned gen) {
  if (!S->text.len) return 0;
  S->synth_gen = gen;
  audio_encode_opts eo = {.format = S->f.format, .rate = S->f.sample_rate, .channels = 1};
  int rc = audio_encoder_new(&S->enc, AUDIO_SAMPLE_S16, S->choice.voice->sample_rate, 1, &eo);
  if (!rc) rc = tts_synthesize(S->tts, &S->choice, S->text.data, S->f.speed, sws_on_pcm, S);
  if (!rc) rc = audio_encoder_finish(S->enc, &S->out);
  if (!rc && S->out.len) rc = ws_send_binary(S->c, S->out.data, S->out.len);
  buf_reset(&S->out);
  audio_encoder_free(S->enc);
  S->enc = NULL;
  buf_reset(&S->text);
  S->n_chars = 0;
  if (rc && rc != ERR_CANCELLED) LOG_WARN("deepgram", "speak socket synthesis failed: %s", err_detail());
  return rc;
}

/* A synthesis that failed for another reason than a Clear (its speech
 * worker crashed or passed its time limit): a Warning that says why, then
 * close 1011, the WebSocket's 500; the server and other sessions go on. */
static void synth_failed(speak_ws *S) {
  char why[400];
  snprintf(why, sizeof why, "synthesis failed: %s", err_detail());
  warn(S, "SYNTHESIS_FAILED", why);
  ws_close(S->c, WS_CLOSE_INTERNAL, "SYNTHESIS_FAILED: the speech engine failed; see the Warning");
}

static size_t utf8_chars(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
  return n;
}

static void *sws_main(void *arg) {
  speak_ws *S = arg;
  send_json(S, json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", "Metadata", "request_id", S->request_id, "model_name",
                         S->model, "model_version", "local", "model_uuid", S->model_uuid));
  bool done = false;
  while (!done) {
    pthread_mutex_lock(&S->mu);
    while (!S->head && !S->gone) pthread_cond_wait(&S->cv, &S->mu);
    cmd *c = S->head;
    if (c) {
      S->head = c->next;
      if (!S->head) S->tail = NULL;
    }
    bool gone = S->gone;
    pthread_mutex_unlock(&S->mu);
    if (gone) {
      free(c);
      break;
    }
    bool stale = c->gen != atomic_load(&S->gen);
    switch (c->kind) {
      case CMD_SPEAK:
        if (stale) break;
        {
          size_t n = utf8_chars(c->text);
          if (S->n_chars + n > SPEAK_WS_TEXT_MAX) {
            warn(S, "TEXT_LIMIT_EXCEEDED", "the buffered text would pass 20000 characters; send Flush more often");
            break;
          }
          if (S->text.len) buf_append_byte(&S->text, ' ');
          buf_append_str(&S->text, c->text);
          S->n_chars += n;
        }
        break;
      case CMD_FLUSH:
        if (stale) break;
        {
          int rc = synth_buffer(S, c->gen);
          if (rc == 0 && c->gen == atomic_load(&S->gen))
            send_json(S, json_pack("{s:s, s:i}", "type", "Flushed", "sequence_id", S->flush_seq++));
          if (rc && rc != ERR_CANCELLED) {
            synth_failed(S);
            done = true;
          }
        }
        break;
      case CMD_CLEAR:
        buf_reset(&S->text);
        S->n_chars = 0;
        send_json(S, json_pack("{s:s, s:i}", "type", "Cleared", "sequence_id", S->clear_seq++));
        break;
      case CMD_CLOSE: {
        int rc = stale ? 0 : synth_buffer(S, c->gen);
        if (rc && rc != ERR_CANCELLED) synth_failed(S);
        else ws_close(S->c, WS_CLOSE_NORMAL, "");
        done = true;
        break;
      }
    }
    free(c);
  }
  ws_conn_unref(S->c);
  api_speech *sp = S->sp;
  sws_unref(S);
  api_speech_job_done(sp);
  return NULL;
}

/* ---- loop-thread callbacks ------------------------------------------------------ */

static void enqueue(speak_ws *S, enum cmd_kind kind, const char *text) {
  size_t n = text ? strlen(text) : 0;
  cmd *c = malloc(sizeof *c + n + 1);
  if (!c) return;
  c->kind = kind;
  c->next = NULL;
  memcpy(c->text, text ? text : "", n + 1);
  pthread_mutex_lock(&S->mu);
  if (kind == CMD_CLEAR) atomic_fetch_add(&S->gen, 1);
  c->gen = atomic_load(&S->gen);
  if (S->tail) S->tail->next = c;
  else S->head = c;
  S->tail = c;
  pthread_cond_signal(&S->cv);
  pthread_mutex_unlock(&S->mu);
}

static void sws_on_open(ws_conn *c, void *ctx) {
  speak_ws *S = ctx;
  S->c = c;
  ws_conn_ref(c);
  if (api_speech_spawn(S->sp, sws_main, S)) {
    ws_conn_unref(c);
    sws_unref(S);
    ws_close(c, WS_CLOSE_INTERNAL, "cannot start the synthesis worker");
  }
}

static void sws_on_message(ws_conn *c, enum ws_opcode op, const uint8_t *data, size_t len, void *ctx) {
  (void)c;
  speak_ws *S = ctx;
  if (op == WS_BINARY) {
    warn(S, "UNSUPPORTED_MESSAGE", "binary messages are not accepted; send JSON text messages");
    return;
  }
  json_t *v = NULL;
  if (api_json_decode_object((const char *)data, len, &v)) {
    warn(S, "INVALID_JSON", "the message is not a JSON object");
    return;
  }
  const char *type = json_string_value(json_object_get(v, "type"));
  if (!type) {
    warn(S, "INVALID_MESSAGE", "the message has no string 'type'");
  } else if (!strcmp(type, "Speak")) {
    const char *text = json_string_value(json_object_get(v, "text"));
    if (!text) warn(S, "INVALID_MESSAGE", "Speak needs a string 'text'");
    else if (*text) enqueue(S, CMD_SPEAK, text);
  } else if (!strcmp(type, "Flush")) {
    enqueue(S, CMD_FLUSH, NULL);
  } else if (!strcmp(type, "Clear")) {
    enqueue(S, CMD_CLEAR, NULL);
  } else if (!strcmp(type, "Close")) {
    enqueue(S, CMD_CLOSE, NULL);
  } else {
    char msg[128];
    snprintf(msg, sizeof msg, "unknown message type '%.40s' (Speak, Flush, Clear, Close)", type);
    warn(S, "UNKNOWN_MESSAGE_TYPE", msg);
  }
  json_decref(v);
}

static void sws_on_close(ws_conn *c, int code, const char *reason, void *ctx) {
  (void)c;
  (void)code;
  (void)reason;
  speak_ws *S = ctx;
  pthread_mutex_lock(&S->mu);
  S->gone = true;
  atomic_fetch_add(&S->gen, 1); /* stop a synthesis in progress */
  pthread_cond_signal(&S->cv);
  pthread_mutex_unlock(&S->mu);
  sws_unref(S);
}

static const ws_handler SPEAK_WS_HANDLER = {sws_on_open, sws_on_message, sws_on_close};

void dg_speak_ws(http_req *req, void *ctx) {
  api_speech *sp = ctx;
  dg_speak_format f;
  if (dg_speak_format_parse(req, true, &f)) return;
  tts *t = NULL;
  int rc = api_speech_tts(sp, &t);
  if (rc) {
    api_error_last(req, rc, NULL);
    return;
  }
  tts_choice choice;
  const char *model = NULL;
  if (dg_speak_voice(req, t, &choice, &model)) return;
  speak_ws *S = calloc(1, sizeof *S);
  if (!S) {
    api_error(req, 500, ERR_NOMEM, "starting the session", NULL);
    return;
  }
  pthread_mutex_init(&S->mu, NULL);
  pthread_cond_init(&S->cv, NULL);
  S->refs = 2; /* the loop's and the worker's */
  S->sp = sp;
  S->tts = t;
  S->choice = choice;
  S->f = f;
  snprintf(S->model, sizeof S->model, "%s", model);
  dg_request_uuid(req, S->request_id);
  dg_model_uuid(model, S->model_uuid);
  const char *offered[16], *chosen = NULL;
  size_t n = http_req_ws_protocols(req, offered, 16);
  for (size_t i = 0; i < n && !chosen; i++)
    if (!strcasecmp(offered[i], "token") || !strcasecmp(offered[i], "bearer")) chosen = offered[i];
  if (http_ws_accept(req, &SPEAK_WS_HANDLER, S, chosen)) {
    api_error(req, 500, ERR_INTERNAL, "WebSocket upgrade failed", NULL);
    S->refs = 1;
    sws_unref(S);
  }
}
