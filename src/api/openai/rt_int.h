/*
 * rt_int.h - what the Realtime files share (realtime.c routes and REST,
 * rt_session.c state machine and conversation, rt_events.c wire encoding
 * and session configuration, rt_audio.c VAD, speech to text and speech).
 *
 * One session per WebSocket. Its state is guarded by rt_session.mu. Three
 * kinds of thread touch it: the WebSocket loop (on_open/on_message/on_close
 * only queue and signal), the session's worker (runs every client event in
 * order: session config, the input buffer, VAD, STT, conversation edits,
 * starting responses) and a response's producer thread (the gen layer's
 * detached job: sink callbacks, TTS). Events are sent with ws_send_text,
 * which is thread-safe and keeps each thread's order.
 *
 * The conversation is kept in the GA shape; the beta protocol differs only
 * in names and session layout, translated when an event is encoded.
 */
#ifndef PARLEY_API_OPENAI_RT_INT_H
#define PARLEY_API_OPENAI_RT_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/gen.h"
#include "api/openai/realtime.h"
#include "http/ws.h"
#include "speech/speech.h"

#define RT_ID_MAX 48

/* ---- shared route state ----------------------------------------------------- */

struct rt_state {
  pthread_mutex_t mu;   /* n_sessions, warm_started */
  pthread_mutex_t emu;  /* opening the speech engines (slow: not under mu) */
  pthread_cond_t cv;
  int n_sessions;       /* alive (freed sessions leave the count) */
  int n_warm;           /* background engine loads running (0 or 1) */
  bool tts_tried, stt_tried;
  bool warm_started;    /* the engines' background load was started */
  tts *tts;             /* opened on first use; NULL when unavailable */
  stt *stt;
};

/* The speech engines, opened on first use (NULL when they cannot start). */
tts *rt_tts(openai_realtime_ctx *rc);
stt *rt_stt(openai_realtime_ctx *rc);

/* ---- session configuration (rt_events.c) ------------------------------------ */

enum rt_fmt { RT_FMT_PCM16 = 0, RT_FMT_ULAW, RT_FMT_ALAW };
enum rt_td { RT_TD_NONE = 0, RT_TD_SERVER_VAD, RT_TD_SEMANTIC_VAD };

typedef struct rt_config {
  bool transcription;         /* type "transcription": no responses */
  char id[RT_ID_MAX];         /* sess_... */
  int64_t expires_at;
  char *model;                /* NULL: the server's default */
  char *instructions;
  bool out_text, out_audio;   /* output modalities */
  char *voice;
  double speed;
  enum rt_fmt in_fmt, out_fmt;
  bool tr_enabled;            /* input transcription events */
  char *tr_model, *tr_language, *tr_prompt;
  json_t *noise_reduction;    /* echoed; null when off */
  enum rt_td td;
  double td_threshold;
  long td_prefix_ms, td_silence_ms;
  bool td_create_response, td_interrupt;
  long td_idle_ms;            /* server_vad idle_timeout_ms; 0 = none */
  char td_eagerness[8];
  json_t *tools;              /* realtime (flat) tool objects */
  json_t *tool_choice;
  double temperature;
  long long max_output_tokens; /* -1 = "inf" */
  json_t *include;            /* null or array */
} rt_config;

void rt_config_defaults(rt_config *c, bool transcription, const char *model);
void rt_config_free(rt_config *c);
int rt_config_copy(rt_config *dst, const rt_config *src);
/* Applies a session object (beta: flat; GA: nested, `type` required when
 * require_type) onto c. On error c is unchanged and err_detail() names the
 * field as prefix.path ("session.voice", "response.tools[0]"); *param
 * (may be NULL) gets that path. */
int rt_config_apply(rt_config *c, const json_t *session, bool beta, bool require_type, const char *prefix,
                    const char **param);
/* The session object as the protocol shows it (new reference). */
json_t *rt_config_json(const rt_config *c, bool beta);
/* Samples per second of a format (24000 or 8000). */
int rt_fmt_rate(enum rt_fmt f);

/* ---- small helpers (rt_events.c) -------------------------------------------- */

void rt_make_id(char *out, const char *prefix);
/* Standard base64 (padded). decode: ERR_PARSE on bad input; *out malloc'd. */
char *rt_b64_encode(const void *data, size_t n);
int rt_b64_decode(const char *s, size_t len, uint8_t **out, size_t *n_out);
/* SHA-256 hex of a key (what the store keeps). hex has 65 bytes. */
void rt_key_hash(const char *key, char hex[65]);
/* Beta content-type spelling of an item (deep copy, new reference). */
json_t *rt_item_beta(const json_t *item);
/* The beta event name of a GA name; NULL when beta has no such event. */
const char *rt_beta_event_name(const char *ga);

/* ---- session (rt_session.c) --------------------------------------------------- */

struct rt_msg {
  struct rt_msg *next;
  size_t len;
  char data[];
};

struct rt_ain; /* rt_audio.c */
struct rt_resp;

typedef struct rt_session {
  openai_realtime_ctx *rc;
  ws_conn *conn;              /* referenced from on_open to the session's end */
  pthread_mutex_t mu;         /* session state (recursive) */
  pthread_mutex_t qmu;        /* queue, closed, refs: the loop never waits on mu */
  pthread_cond_t cv;          /* the worker waits for messages (with qmu) */
  int refs;                   /* loop + worker + a running response */
  bool beta;
  bool closed;                /* the socket is gone: the worker ends */
  bool worker_started;
  struct rt_msg *q_head, *q_tail;
  size_t q_bytes;
  rt_config cfg;
  char conv_id[RT_ID_MAX];
  json_t *items;              /* the conversation (GA items, in order) */
  struct rt_ain *ain;         /* input audio buffer, VAD, STT */
  struct rt_resp *resp;       /* the running response, or NULL */
  json_t *audio_ms;           /* item id -> milliseconds of output audio */
} rt_session;

rt_session *rt_session_new(openai_realtime_ctx *rc, bool beta);
void rt_session_unref(rt_session *s);
extern const ws_handler rt_ws_handler;

/* Sends one server event (GA name; translated for beta sessions, dropped
 * when beta has no such event). Steals ev. Caller holds s->mu or not: the
 * function only touches the socket. */
void rt_send(rt_session *s, const char *type, json_t *ev);
/* An error event; event_id is the offending client event's (or NULL). */
void rt_error(rt_session *s, const char *type, const char *code, const char *message, const char *param,
              const char *event_id);
/* An error event from err_detail() (rc an ERR_* code picks the wire code). */
void rt_error_last(rt_session *s, int rc, const char *param, const char *event_id);
/* Conversation helpers (s->mu held). */
const char *rt_last_item_id(rt_session *s);
void rt_item_append(rt_session *s, json_t *item);
/* Sends added+done (GA) or created (beta) for an item (s->mu held). */
void rt_item_announce(rt_session *s, const json_t *item, const char *previous_item_id);
/* Starts a response (s->mu held). params is the response.create `response`
 * object or NULL; reason tags a VAD-made response in logs. */
void rt_response_create(rt_session *s, const json_t *params, const char *event_id);
/* Cancels the running response (s->mu held); reason "client_cancelled" or
 * "turn_detected". Returns false when none runs. */
bool rt_response_cancel(rt_session *s, const char *reason);

/* ---- audio (rt_audio.c) ------------------------------------------------------- */

struct rt_ain *rt_ain_new(void);
void rt_ain_free(struct rt_ain *a);
/* Appends encoded input audio (the session's input format), runs the VAD
 * and, when speech stops, commits (s->mu held). */
int rt_audio_append(rt_session *s, const uint8_t *bytes, size_t n, const char *event_id);
/* input_audio_buffer.commit (s->mu held); vad = made by the VAD. */
void rt_audio_commit(rt_session *s, const char *event_id, bool vad);
void rt_audio_clear(rt_session *s);
/* Transcribes base64 audio in the session's input format (for an
 * input_audio part created without a transcript). *text malloc'd. */
int rt_transcribe_b64(rt_session *s, const char *b64, char **text);
/* Speaks text for response r, sending output audio deltas. Called without
 * s->mu. Returns nonzero when the response was cancelled meanwhile. */
int rt_speak(rt_session *s, struct rt_resp *r, const char *text, const char *item_id, int output_index);

/* ---- response (rt_session.c, read by rt_audio.c) -------------------------------- */

struct rt_resp {
  rt_session *s;
  char id[RT_ID_MAX];
  gen_job *job;
  atomic_bool cancel;         /* asked to stop */
  const char *cancel_reason;
  bool ended;                 /* response.done sent */
  bool in_conv;               /* conversation "auto" */
  bool audio;                 /* output audio (+ transcript) */
  enum rt_fmt out_fmt;
  char voice[64];
  double speed;
  json_t *resp;               /* the response object */
  json_t *output;             /* its items */
  int open;                   /* index of the open item, -1 */
  buf pending;                /* text not yet spoken */
  double audio_ms;            /* output audio of the open item */
};

#endif
