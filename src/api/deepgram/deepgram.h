/*
 * deepgram.h - the Deepgram dialect (../shared/specs/deepgram.md) on the
 * local speech engines: pre-recorded and live speech to text (/listen),
 * text to speech over REST and WebSocket (/speak), the model list
 * (/models), and /read (text intelligence on the default language model).
 *
 * Paths: canonical under /deepgram/v1/..., the same under /deepgram/vl/...
 * (letter l, as parley's own requirements spell it), and /v1/listen,
 * /v1/speak, /v1/read at the root for SDKs based there. /v1/models is
 * OpenAI's route; it hands a Deepgram SDK's request (x-deepgram-session-id
 * or Authorization: Token, api_dialect_of) to dg_models_list/get. Errors use api_error(), whose Deepgram shape is
 * {err_code, err_msg, category, message, request_id}; the request_id and
 * the dg-request-id header are the request's id formatted as a UUID.
 *
 * Wiring (app/main.c): with the shared api_speech *sp,
 *   const http_route *dr; size_t n_dr = deepgram_routes(sp, &dr);
 *   http_server_add_routes(srv, dr, n_dr);
 * docs/speech.md traces a request through listen.c.
 */
#ifndef PARLEY_API_DEEPGRAM_H
#define PARLEY_API_DEEPGRAM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/speech_svc.h"
#include "http/http.h"

/* The route table; every entry's ctx is sp. */
size_t deepgram_routes(api_speech *sp, const http_route **out);

/* ---- shared by the handlers (common.c) ---------------------------------- */

/* The STT model every /listen request runs on, as /models reports it. */
#define DG_STT_MODEL_NAME "pocketsphinx-en-us"
#define DG_STT_MODEL_VERSION "5prealpha"
#define DG_STT_MODEL_ARCH "pocketsphinx"

/* The request's id as a UUID (the same text as the dg-request-id header). */
void dg_request_uuid(const http_req *req, char out[37]);
/* The uuid of a model name (stable across runs). */
void dg_model_uuid(const char *name, char out[37]);
/* {name, version, arch} of the STT model (new reference). */
/* metadata.model_info of the model info describes (NULL: pocketsphinx). */
json_t *dg_stt_model_info(const stt_info *info);
/* 0 when the model info describes can transcribe lang (a Deepgram
 * language tag: "en", "en-US", "de"); else an error naming it. */
int dg_check_language(const stt_info *info, const char *lang);

/* Lenient query boolean (true/false/1/0, any case; a bare key is true).
 * Returns 0 with *out set (def when absent), or answers 400 naming the
 * parameter and returns ERR_INVALID. */
int dg_query_bool(http_req *req, const char *name, bool def, bool *out);
/* Query integer within [lo, hi]; 400 naming it otherwise. */
int dg_query_int(http_req *req, const char *name, long lo, long hi, long def, long *out);
/* Query number within [lo, hi]; 400 naming it otherwise. */
int dg_query_num(http_req *req, const char *name, double lo, double hi, double def, double *out);
/* Answers 400 with a message (printf-style), param as the offending name. */
void dg_bad_request(http_req *req, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* metadata.warnings entries: {"parameter", "type", "message"}. */
void dg_warn(json_t *warnings, const char *param, const char *type, const char *message);

/* ---- outbound requests (fetch.c) ------------------------------------------ */

/* 0 when url is http(s) and its host is in allow (comma-separated; "*" =
 * any host whose address is public, private addresses only when named);
 * ERR_FORBIDDEN / ERR_INVALID with a detail naming param, the host and the
 * --fetch-hosts option otherwise. */
int dg_url_check(const char *allow, const char *url, const char *param);
/* GET url into a malloc'd buffer of at most max bytes (no redirects, 60 s).
 * allow is checked again on the address connected to (see dg_url_check). */
int dg_fetch(const char *allow, const char *url, uint64_t max, uint8_t **out, size_t *len);
/* POST (or PUT) a JSON body to url (30 s); ERR_IO naming the failure. */
int dg_post_json(const char *allow, const char *url, const char *method, const char *body);

/* ---- handlers ------------------------------------------------------------- */
void dg_listen_post(http_req *req, void *ctx);  /* listen.c */
void dg_listen_ws(http_req *req, void *ctx);    /* live.c */
void dg_speak_post(http_req *req, void *ctx);   /* speak.c */
void dg_speak_ws(http_req *req, void *ctx);     /* speak_ws.c */
void dg_models_list(http_req *req, void *ctx);  /* common.c; ctx the api_speech (NULL: pocketsphinx only) */
void dg_models_get(http_req *req, void *ctx);   /* {model_id} or {model} */
void dg_read_post(http_req *req, void *ctx);    /* read.c */

/* ---- text intelligence (read.c), shared by /read and /listen ---------------- */

#define DG_INTEL_MAX_LABELS 16

/* The summarize / topics / intents / sentiment options of a request, with
 * owned copies of the custom labels (a /listen job outlives its request). */
typedef struct dg_intel {
  bool summarize, topics, intents, sentiment;
  char *custom_topic[DG_INTEL_MAX_LABELS];
  size_t n_custom_topic;
  bool topic_strict; /* custom_topic_mode=strict: only the custom labels */
  char *custom_intent[DG_INTEL_MAX_LABELS];
  size_t n_custom_intent;
  bool intent_strict;
} dg_intel;

/* results.summary as /read gives it ({"text"}) or as /listen does
 * ({"result": "success", "short"}, summarize=v2; spec 3.3). */
enum dg_summary_shape { DG_SUMMARY_TEXT, DG_SUMMARY_V2 };

/* Reads the options (summarize true/false/v1/v2, topics, intents,
 * sentiment, custom_topic(_mode), custom_intent(_mode)); answers 400 and
 * returns ERR_INVALID on a bad value. Free with dg_intel_free either way. */
int dg_intel_parse(http_req *req, dg_intel *o);
bool dg_intel_any(const dg_intel *o);
void dg_intel_free(dg_intel *o);

/* Runs every requested feature on text with the language model
 * manager_get_chat picks (the default, else a loaded one, else the
 * smallest), greedy, one generation each: sets results.{summary, topics, intents,
 * sentiments} and metadata.{summary,topics,intents,sentiment}_info. With
 * warnings NULL the first failure stops it: returns the error with *failed
 * naming the feature ("model" when no language model is available:
 * ERR_UNAVAILABLE). With a warnings array, failures (and a missing model)
 * become metadata.warnings entries for their features and it returns 0.
 * Blocks the calling thread for the generations. */
int dg_intel_run(struct manager *mgr, const dg_intel *o, const char *text, enum dg_summary_shape shape,
                 json_t *results, json_t *metadata, json_t *warnings, const char **failed);

/* ---- live STT helpers shared with listen.c ------------------------------- */

/* Options of a transcript that both REST and live honour. */
typedef struct dg_fmt {
  bool punctuate;  /* punctuate or smart_format */
  bool diarize;
} dg_fmt;
/* One alternative {transcript, confidence, words[]} of r's words [first,
 * first + n), times shifted by offset seconds. */
json_t *dg_alternative(const stt_result *r, size_t first, size_t n, double offset, const dg_fmt *f);

#endif
