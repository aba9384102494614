/*
 * realtime.h - the OpenAI Realtime API, locally (../shared/specs/openai.md
 * section 7, docs/realtime.md): the REST routes that mint ephemeral keys
 * (POST /v1/realtime/client_secrets, /v1/realtime/sessions,
 * /v1/realtime/transcription_sessions) and the WebSocket
 * GET /v1/realtime?model=... | ?intent=transcription that runs one voice
 * session per connection: audio in, server VAD, speech to text, the model's
 * answer through the canonical generation layer, speech back.
 *
 * Wiring (app/main.c): fill an openai_realtime_ctx, add the route table,
 * and call openai_realtime_shutdown() after the HTTP server is freed and
 * before the manager is (it waits for the sessions' threads and closes the
 * speech engines the sessions opened).
 */
#ifndef PARLEY_API_OPENAI_REALTIME_H
#define PARLEY_API_OPENAI_REALTIME_H

#include <stddef.h>

#include "engine/manager.h"
#include "http/http.h"
#include "model/registry.h"

struct store;
struct rt_state;

typedef struct openai_realtime_ctx {
  registry *reg;                /* borrowed */
  manager *mgr;                 /* borrowed */
  struct store *st;             /* ephemeral keys; borrowed */
  struct api_speech *speech;    /* the speech workers the sessions' engines run in; borrowed */
  const char *const *api_keys;  /* the server's keys (the WebSocket route checks
                                   them itself, beside ephemeral keys) */
  size_t n_api_keys;
  int max_sessions;             /* concurrent WebSocket sessions; 0 = 32 (or
                                   $PARLEY_REALTIME_MAX_SESSIONS) */
  int max_session_s;            /* a session's longest life; 0 = 1800 (or
                                   $PARLEY_REALTIME_MAX_SESSION_S) */
  struct rt_state *priv;        /* set by openai_realtime_routes */
} openai_realtime_ctx;

/* The route table; every entry's ctx points at rctx. Call once. */
size_t openai_realtime_routes(openai_realtime_ctx *rctx, const http_route **out);
/* Waits (up to 5 s) for the sessions to end, then frees what the routes
 * made (speech engines). */
void openai_realtime_shutdown(openai_realtime_ctx *rctx);

#endif
