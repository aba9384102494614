/*
 * realtime.c - the Realtime routes: REST endpoints that mint ephemeral keys
 * (GA client_secrets, beta sessions and transcription_sessions) and the
 * WebSocket handshake of GET /v1/realtime, which authenticates, picks the
 * protocol (beta when OpenAI-Beta: realtime=v1 or the openai-beta.realtime-v1
 * subprotocol, GA otherwise) and hands the connection to a session
 * (rt_session.c).
 *
 * Ephemeral keys: "ek_" + 48 hex digits; the store keeps only their SHA-256
 * with the expiry and the session configuration (GA layout) they carry. The
 * WebSocket route is public to the HTTP layer and checks credentials itself
 * because an ephemeral key is not one of the server's keys: a Bearer /
 * api-key header or an openai-insecure-api-key.<key> subprotocol may carry a
 * server key or an ephemeral key. An ephemeral key that is unknown or past
 * its expiry is refused with 401 invalid_api_key even on an open server.
 */
#include "api/openai/realtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/openai/rt_int.h"
#include "api/speech_svc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "store/store.h"

/* ---- speech engines, opened on first use ----------------------------------------- */

tts *rt_tts(openai_realtime_ctx *rc) {
  struct rt_state *st = rc->priv;
  pthread_mutex_lock(&st->emu);
  if (!st->tts_tried) {
    st->tts_tried = true;
    if (api_speech_open_tts(rc->speech, &st->tts)) {
      LOG_WARN("realtime", "text to speech is unavailable: %s", err_detail());
      st->tts = NULL;
    }
  }
  tts *t = st->tts;
  pthread_mutex_unlock(&st->emu);
  return t;
}

stt *rt_stt(openai_realtime_ctx *rc) {
  struct rt_state *st = rc->priv;
  pthread_mutex_lock(&st->emu);
  if (!st->stt_tried) {
    st->stt_tried = true;
    stt_config cfg = {.n_preload = 1, .n_max = 4, .wait_ms = 3000};
    if (api_speech_open_stt(rc->speech, &cfg, &st->stt)) {
      LOG_WARN("realtime", "speech to text is unavailable: %s", err_detail());
      st->stt = NULL;
    }
  }
  stt *s = st->stt;
  pthread_mutex_unlock(&st->emu);
  return s;
}

/* Loads the speech engines in the background when the first session
 * connects, so its first turn does not wait seconds for pocketsphinx.
 * Shutdown waits for it (n_warm). */
static void *warm_main(void *arg) {
  openai_realtime_ctx *rc = arg;
  rt_stt(rc);
  rt_tts(rc);
  pthread_mutex_lock(&rc->priv->mu);
  rc->priv->n_warm--;
  pthread_cond_broadcast(&rc->priv->cv);
  pthread_mutex_unlock(&rc->priv->mu);
  return NULL;
}

static void warm_up(openai_realtime_ctx *rc) {
  struct rt_state *st = rc->priv;
  pthread_mutex_lock(&st->mu);
  bool start = !st->warm_started;
  st->warm_started = true;
  if (start) st->n_warm++;
  pthread_mutex_unlock(&st->mu);
  if (!start) return;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, warm_main, rc) != 0) {
    pthread_mutex_lock(&st->mu);
    st->n_warm--;
    pthread_mutex_unlock(&st->mu);
  }
  pthread_attr_destroy(&attr);
}

/* ---- ephemeral keys ------------------------------------------------------------------ */

/* Mints a key for cfg valid `seconds`; value gets the key. */
static int mint_key(openai_realtime_ctx *rc, const rt_config *cfg, long long seconds, char value[RT_ID_MAX + 16],
                    int64_t *expires_at) {
  id_make(value, RT_ID_MAX + 16, "ek_", 24);
  char hash[65];
  rt_key_hash(value, hash);
  json_t *sess = rt_config_json(cfg, false);
  char *text = sess ? json_dumps(sess, JSON_COMPACT) : NULL;
  json_decref(sess);
  int64_t now = time_wall_s();
  *expires_at = now + seconds;
  store_ekey k = {.key_hash = hash, .created_at = now, .expires_at = *expires_at, .session = text};
  int rc_ = text ? store_ekey_put(rc->st, &k) : err_set(ERR_NOMEM, "session");
  free(text);
  store_ekey_purge(rc->st, now, NULL);
  return rc_;
}

/* expires_after {anchor, seconds}: 0 or an answered 400. */
static int expires_after(http_req *req, const json_t *ea, const char *path, long long def, long long lo, long long hi,
                         long long *out) {
  *out = def;
  if (!ea || json_is_null(ea)) return 0;
  char p[64];
  if (!json_is_object(ea)) {
    snprintf(p, sizeof p, "%s: expected an object", path);
    api_error(req, 400, ERR_TYPE, p, path);
    return ERR_TYPE;
  }
  const char *anchor = json_string_value(json_object_get(ea, "anchor"));
  if (json_object_get(ea, "anchor") && (!anchor || strcmp(anchor, "created_at") != 0)) {
    snprintf(p, sizeof p, "%s.anchor", path);
    api_error(req, 400, ERR_INVALID, "expires_after.anchor: the only supported anchor is \"created_at\"", p);
    return ERR_INVALID;
  }
  json_t *sec = json_object_get(ea, "seconds");
  if (sec && !json_is_null(sec)) {
    if (!json_is_integer(sec) || json_integer_value(sec) < lo || json_integer_value(sec) > hi) {
      char msg[120];
      snprintf(p, sizeof p, "%s.seconds", path);
      snprintf(msg, sizeof msg, "%s: expected an integer from %lld to %lld", p, lo, hi);
      api_error(req, 400, ERR_RANGE, msg, p);
      return ERR_RANGE;
    }
    *out = json_integer_value(sec);
  }
  return 0;
}

/* POST /v1/realtime/client_secrets (GA). */
static void client_secrets(http_req *req, void *ctx) {
  openai_realtime_ctx *rc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  long long seconds;
  rt_config cfg;
  memset(&cfg, 0, sizeof cfg);
  if (expires_after(req, json_object_get(body, "expires_after"), "expires_after", 600, 10, 7200, &seconds)) goto done;
  json_t *sess = json_object_get(body, "session");
  const char *type = json_string_value(json_object_get(sess, "type"));
  rt_config_defaults(&cfg, type && strcmp(type, "transcription") == 0, NULL);
  const char *param = NULL;
  if (sess && !json_is_null(sess) && rt_config_apply(&cfg, sess, false, true, "session", &param)) {
    api_error(req, 400, ERR_INVALID, err_detail(), param);
    goto done;
  }
  char value[RT_ID_MAX + 16];
  int64_t exp;
  if (mint_key(rc, &cfg, seconds, value, &exp)) {
    api_error(req, 500, ERR_INTERNAL, err_detail(), NULL);
    goto done;
  }
  cfg.expires_at = exp;
  json_t *out = json_pack("{s:s, s:I, s:o}", "value", value, "expires_at", (json_int_t)exp, "session",
                          rt_config_json(&cfg, false));
  api_respond_json(req, 200, out);
  json_decref(out);
done:
  rt_config_free(&cfg);
  json_decref(body);
}

/* POST /v1/realtime/sessions and /v1/realtime/transcription_sessions (beta). */
static void beta_session(http_req *req, openai_realtime_ctx *rc, bool transcription) {
  json_t *body = api_parse_body(req);
  if (!body) return;
  rt_config cfg;
  rt_config_defaults(&cfg, transcription, NULL);
  cfg.out_text = true; /* beta sessions default to ["text", "audio"] */
  long long seconds;
  const char *param = NULL;
  json_t *cs = json_object_get(body, "client_secret");
  if (expires_after(req, json_object_get(cs, "expires_after"), "client_secret.expires_after", 60, 10, 7200, &seconds))
    goto done;
  if (rt_config_apply(&cfg, body, true, false, "session", &param)) {
    api_error(req, 400, ERR_INVALID, err_detail(), param ? param + strlen("session.") : NULL);
    goto done;
  }
  char value[RT_ID_MAX + 16];
  int64_t exp;
  if (mint_key(rc, &cfg, seconds, value, &exp)) {
    api_error(req, 500, ERR_INTERNAL, err_detail(), NULL);
    goto done;
  }
  json_t *out = rt_config_json(&cfg, true);
  json_object_set_new(out, "client_secret", json_pack("{s:s, s:I}", "value", value, "expires_at", (json_int_t)exp));
  api_respond_json(req, 200, out);
  json_decref(out);
done:
  rt_config_free(&cfg);
  json_decref(body);
}

static void sessions(http_req *req, void *ctx) { beta_session(req, ctx, false); }
static void transcription_sessions(http_req *req, void *ctx) { beta_session(req, ctx, true); }

/* ---- WebSocket handshake ---------------------------------------------------------------- */

static const char WS_KEY_PREFIX[] = "openai-insecure-api-key.";

/* The credential the client presented, or NULL. */
static const char *presented_key(http_req *req, const char *const *protos, size_t n_protos) {
  const char *a = http_req_header(req, "Authorization");
  if (a) {
    while (*a == ' ') a++;
    if (strncasecmp(a, "bearer ", 7) == 0) {
      a += 7;
      while (*a == ' ') a++;
      return a;
    }
  }
  const char *k = http_req_header(req, "api-key");
  if (k) return k;
  for (size_t i = 0; i < n_protos; i++)
    if (str_starts_with(protos[i], WS_KEY_PREFIX)) return protos[i] + sizeof WS_KEY_PREFIX - 1;
  return NULL;
}

static void unauthorized(http_req *req, const char *message) {
  api_error(req, 401, ERR_AUTH, message, NULL);
}

static void ws_connect(http_req *req, void *ctx) {
  openai_realtime_ctx *rc = ctx;
  const char *protos[16];
  size_t n_protos = http_req_ws_protocols(req, protos, 16);
  const char *key = presented_key(req, protos, n_protos);
  char *stored = NULL;
  if (key && str_starts_with(key, "ek_")) {
    char hash[65];
    rt_key_hash(key, hash);
    store_ekey k;
    if (store_ekey_lookup(rc->st, hash, time_wall_s(), &k)) {
      unauthorized(req, "The ephemeral key (client secret) is unknown or has expired. Create a new one with POST "
                        "/v1/realtime/client_secrets.");
      return;
    }
    stored = k.session ? str_dup(k.session) : NULL;
    store_ekey_free(&k);
  } else if (rc->n_api_keys) {
    bool ok = false;
    for (size_t i = 0; key && i < rc->n_api_keys; i++)
      ok |= ct_equal(rc->api_keys[i], strlen(rc->api_keys[i]), key, strlen(key));
    if (!ok) {
      unauthorized(req, key ? "Incorrect API key provided." : "Missing API key: send Authorization: Bearer <key>.");
      return;
    }
  }
  bool beta = false;
  const char *hb = http_req_header(req, "OpenAI-Beta");
  if (hb && strstr(hb, "realtime=v1")) beta = true;
  bool offered_realtime = false;
  for (size_t i = 0; i < n_protos; i++) {
    if (strcmp(protos[i], "openai-beta.realtime-v1") == 0) beta = true;
    if (strcmp(protos[i], "realtime") == 0 || str_starts_with(protos[i], WS_KEY_PREFIX)) offered_realtime = true;
  }
  const char *intent = http_req_query(req, "intent");
  const char *model_q = http_req_query(req, "model");
  bool transcription = intent && strcmp(intent, "transcription") == 0;
  if (intent && !transcription) {
    free(stored);
    api_error(req, 400, ERR_INVALID, "intent: the only supported intent is \"transcription\"", "intent");
    return;
  }
  if (model_q && *model_q && !transcription) {
    registry_entry *e = NULL;
    if (registry_lookup(rc->reg, model_q, &e)) {
      free(stored);
      api_error(req, 404, ERR_NOT_FOUND, err_detail(), "model");
      return;
    }
    registry_entry_free(e);
  }
  pthread_mutex_lock(&rc->priv->mu);
  int n = rc->priv->n_sessions;
  pthread_mutex_unlock(&rc->priv->mu);
  int max = rc->max_sessions > 0 ? rc->max_sessions : 32;
  if (n >= max) {
    free(stored);
    char msg[120];
    snprintf(msg, sizeof msg, "Too many realtime sessions (%d open, the limit is %d); try again later.", n, max);
    api_error(req, 429, ERR_OVERLOADED, msg, NULL);
    return;
  }
  warm_up(rc);
  rt_session *s = rt_session_new(rc, beta);
  if (!s) {
    free(stored);
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  rt_config_defaults(&s->cfg, transcription, model_q);
  if (beta) s->cfg.out_text = true;
  if (stored) {
    json_t *sess = json_loads(stored, JSON_ALLOW_NUL, NULL);
    if (sess) {
      rt_config_apply(&s->cfg, sess, false, false, "session", NULL);
      if (model_q && *model_q) {
        free(s->cfg.model);
        s->cfg.model = str_dup(model_q);
      }
      rt_make_id(s->cfg.id, "sess_");
    }
    json_decref(sess);
    free(stored);
  }
  s->cfg.expires_at = time_wall_s() + rc->max_session_s;
  if (http_ws_accept(req, &rt_ws_handler, s, offered_realtime ? "realtime" : NULL)) {
    rt_session_unref(s);
    api_error(req, 500, ERR_INTERNAL, "WebSocket upgrade failed", NULL);
  }
}

/* ---- table ---------------------------------------------------------------------------------- */

static http_route ROUTES[] = {
    {"POST", "/v1/realtime/client_secrets", client_secrets, NULL, HTTP_BODY_JSON, "openai_realtime_client_secrets"},
    {"POST", "/v1/realtime/sessions", sessions, NULL, HTTP_BODY_JSON, "openai_realtime_sessions"},
    {"POST", "/v1/realtime/transcription_sessions", transcription_sessions, NULL, HTTP_BODY_JSON,
     "openai_realtime_transcription_sessions"},
    {"GET", "/v1/realtime", ws_connect, NULL, HTTP_ROUTE_WS | HTTP_ROUTE_PUBLIC, "openai_realtime"},
};

size_t openai_realtime_routes(openai_realtime_ctx *rctx, const http_route **out) {
  if (!rctx->priv) {
    rctx->priv = calloc(1, sizeof *rctx->priv);
    if (rctx->priv) {
      pthread_mutex_init(&rctx->priv->mu, NULL);
      pthread_mutex_init(&rctx->priv->emu, NULL);
      pthread_cond_init(&rctx->priv->cv, NULL);
    }
  }
  if (rctx->max_sessions <= 0) {
    const char *env = getenv("PARLEY_REALTIME_MAX_SESSIONS");
    long v = env ? strtol(env, NULL, 10) : 0;
    rctx->max_sessions = v > 0 && v <= 100000 ? (int)v : 32;
  }
  if (rctx->max_session_s <= 0) {
    const char *env = getenv("PARLEY_REALTIME_MAX_SESSION_S");
    long v = env ? strtol(env, NULL, 10) : 0;
    rctx->max_session_s = v > 0 && v <= 86400 ? (int)v : 1800;
  }
  for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) ROUTES[i].ctx = rctx;
  *out = ROUTES;
  return rctx->priv ? ARRAY_LEN(ROUTES) : 0;
}

void openai_realtime_shutdown(openai_realtime_ctx *rctx) {
  struct rt_state *st = rctx->priv;
  if (!st) return;
  pthread_mutex_lock(&st->mu);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 5;
  while (st->n_sessions + st->n_warm > 0 && pthread_cond_timedwait(&st->cv, &st->mu, &until) == 0) {
  }
  int left = st->n_sessions + st->n_warm;
  pthread_mutex_unlock(&st->mu);
  if (left) {
    LOG_WARN("realtime", "%d sessions did not end in time; leaving the speech engines open", left);
    return;
  }
  if (st->tts) tts_close(st->tts);
  if (st->stt) stt_close(st->stt);
  pthread_mutex_destroy(&st->mu);
  pthread_mutex_destroy(&st->emu);
  pthread_cond_destroy(&st->cv);
  free(st);
  rctx->priv = NULL;
}
