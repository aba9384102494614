/*
 * common.c - what the Deepgram handlers share: query parsing as the SDKs
 * serialize it (lenient booleans, repeated keys), request and model UUIDs,
 * metadata.warnings, the transcript alternative, the models endpoints
 * and the route table (/read is in read.c).
 *
 * Models: one STT model (pocketsphinx en-us) and one TTS model per Deepgram
 * Aura voice name of the vendor voice table (speech/speech_voices.c), each
 * with a uuid derived from its name, so the uuids /models reports match the
 * ones /listen and /speak put in metadata and headers across restarts.
 */
#include "api/deepgram/deepgram.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "base/err.h"
#include "base/util.h"
#include "speech/whisper_decode.h"

void dg_request_uuid(const http_req *req, char out[37]) {
  const char *id = http_req_id(req);
  const char *hex = strncmp(id, "req_", 4) == 0 ? id + 4 : id;
  size_t o = 0;
  for (size_t i = 0; i < 32 && hex[i]; i++) {
    if (i == 8 || i == 12 || i == 16 || i == 20) out[o++] = '-';
    out[o++] = hex[i];
  }
  out[o] = '\0';
}

void dg_model_uuid(const char *name, char out[37]) { api_speech_name_uuid(name, out); }

json_t *dg_stt_model_info(const stt_info *info) {
  bool ps = !info || !strcmp(info->backend, "pocketsphinx");
  return json_pack("{s:s, s:s, s:s}", "name", ps ? DG_STT_MODEL_NAME : info->model, "version",
                   ps ? DG_STT_MODEL_VERSION : "ggml", "arch", ps ? DG_STT_MODEL_ARCH : info->backend);
}

int dg_check_language(const stt_info *info, const char *lang) {
  char code[16];
  size_t k = 0;
  for (; lang[k] && lang[k] != '-' && lang[k] != '_' && k + 1 < sizeof code; k++)
    code[k] = (char)tolower((unsigned char)lang[k]);
  code[k] = 0;
  if (!strcmp(code, "en")) return 0;
  if (!info->multilingual)
    return err_set(ERR_UNSUPPORTED, "language: '%.32s' is not available; the local model (%s) knows only English",
                   lang, info->model);
  if (whisper_lang_index(code) < 0)
    return err_set(ERR_INVALID, "language: '%.32s' is not a language the local model (%s) knows", lang, info->model);
  return 0;
}

void dg_bad_request(http_req *req, const char *param, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  api_error(req, 400, ERR_INVALID, msg, param);
}

int dg_query_bool(http_req *req, const char *name, bool def, bool *out) {
  const char *v = http_req_query(req, name);
  *out = def;
  if (!v) return 0;
  if (!*v || !strcasecmp(v, "true") || !strcmp(v, "1")) *out = true;
  else if (!strcasecmp(v, "false") || !strcmp(v, "0")) *out = false;
  else {
    dg_bad_request(req, name, "%s: expected true or false, got '%.32s'", name, v);
    return ERR_INVALID;
  }
  return 0;
}

int dg_query_int(http_req *req, const char *name, long lo, long hi, long def, long *out) {
  const char *v = http_req_query(req, name);
  *out = def;
  if (!v) return 0;
  char *end = NULL;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    dg_bad_request(req, name, "%s: expected an integer in %ld..%ld, got '%.32s'", name, lo, hi, v);
    return ERR_INVALID;
  }
  *out = x;
  return 0;
}

int dg_query_num(http_req *req, const char *name, double lo, double hi, double def, double *out) {
  const char *v = http_req_query(req, name);
  *out = def;
  if (!v) return 0;
  char *end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end || !(x >= lo && x <= hi)) {
    dg_bad_request(req, name, "%s: expected a number in %g..%g, got '%.32s'", name, lo, hi, v);
    return ERR_INVALID;
  }
  *out = x;
  return 0;
}

void dg_warn(json_t *warnings, const char *param, const char *type, const char *message) {
  json_array_append_new(warnings, json_pack("{s:s, s:s, s:s}", "parameter", param, "type", type, "message", message));
}

/* ---- transcript alternative ------------------------------------------------ */

json_t *dg_alternative(const stt_result *r, size_t first, size_t n, double offset, const dg_fmt *f) {
  /* sentence boundaries over the whole result decide capitals and periods */
  api_span *spans = NULL;
  int n_spans = api_speech_spans(r, 0.6, 10.0, &spans);
  if (n_spans < 0) n_spans = 0;
  /* 1 = starts, 2 = ends a sentence, 4 = ends a question */
  unsigned char *mark = calloc(r->n_words ? r->n_words : 1, 1);
  for (int i = 0; mark && i < n_spans; i++) {
    mark[spans[i].first] |= 1;
    mark[spans[i].first + spans[i].n - 1] |= 2;
    if (api_speech_sentence_end(&r->words[spans[i].first], spans[i].n) == '?')
      mark[spans[i].first + spans[i].n - 1] |= 4;
  }
  free(spans);
  json_t *words = json_array();
  buf text = {0};
  double conf = 0;
  for (size_t i = first; i < first + n && i < r->n_words; i++) {
    const stt_word *w = &r->words[i];
    char pw[160];
    char end = !mark || !(mark[i] & 2) ? 0 : (mark[i] & 4) ? '?' : '.';
    if (w->punctuated) snprintf(pw, sizeof pw, "%s", w->punctuated); /* the model's own casing and punctuation */
    else api_speech_punctuate(w->word, mark && (mark[i] & 1), end, pw, sizeof pw);
    json_t *jw = json_pack("{s:s, s:f, s:f, s:f}", "word", w->word, "start", w->start + offset, "end",
                           w->end + offset, "confidence", w->confidence);
    if (jw && f->punctuate) json_object_set_new(jw, "punctuated_word", json_string(pw));
    if (jw && f->diarize) json_object_set_new(jw, "speaker", json_integer(0)); /* one speaker assumed */
    json_array_append_new(words, jw);
    buf_appendf(&text, "%s%s", i > first ? " " : "", f->punctuate ? pw : w->word);
    conf += w->confidence;
  }
  free(mark);
  json_t *alt = json_pack("{s:s, s:f, s:o}", "transcript", text.data ? text.data : "", "confidence",
                          n ? conf / (double)n : 0.0, "words", words);
  buf_free(&text);
  return alt;
}

/* ---- models ------------------------------------------------------------------ */

/* An installed STT model in Deepgram's shape. */
static json_t *stt_model_json(const stt_model_info *m) {
  char uuid[37];
  bool ps = !m || !strcmp(m->backend, "pocketsphinx");
  const char *name = ps ? DG_STT_MODEL_NAME : m->name;
  dg_model_uuid(name, uuid);
  return json_pack("{s:s, s:s, s:s, s:[s, s], s:s, s:s, s:b, s:b, s:b}", "name", name, "canonical_name", name,
                   "architecture", ps ? DG_STT_MODEL_ARCH : m->backend, "languages", "en", "en-US", "version",
                   ps ? DG_STT_MODEL_VERSION : "ggml", "uuid", uuid, "batch", true, "streaming", true,
                   "formatted_output", !ps);
}

/* The language suffix of an aura name: "aura-2-celeste-es" -> "es". */
static const char *aura_lang(const char *name) {
  const char *dash = strrchr(name, '-');
  return dash ? dash + 1 : "en";
}

static json_t *tts_model_json(const tts_vendor_voice *v) {
  char uuid[37];
  dg_model_uuid(v->vendor_name, uuid);
  const char *lang = aura_lang(v->vendor_name);
  json_t *langs = json_array();
  json_array_append_new(langs, json_string(lang));
  if (!strcmp(lang, "en")) json_array_append_new(langs, json_string("en-US"));
  return json_pack("{s:s, s:s, s:s, s:o, s:s, s:s, s:{s:s, s:s}}", "name", v->vendor_name, "canonical_name",
                   v->vendor_name, "architecture", str_starts_with(v->vendor_name, "aura-2-") ? "aura-2" : "aura",
                   "languages", langs, "version", "local", "uuid", uuid, "metadata", "local_voice", v->local,
                   "description", v->note ? v->note : "");
}

/* The installed STT models of sp (NULL: pocketsphinx alone). */
static json_t *stt_models_json(const api_speech *sp) {
  const stt_model_info *m = NULL;
  size_t n = sp ? api_speech_stt_models(sp, &m) : 0;
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++) json_array_append_new(a, stt_model_json(&m[i]));
  if (a && !n) json_array_append_new(a, stt_model_json(NULL));
  return a;
}

void dg_models_list(http_req *req, void *ctx) {
  json_t *tts_list = json_array();
  for (size_t i = 0; i < tts_vendor_n(); i++) {
    const tts_vendor_voice *v = tts_vendor_at(i);
    if (str_starts_with(v->vendor_name, "aura-")) json_array_append_new(tts_list, tts_model_json(v));
  }
  json_t *body = json_pack("{s:o, s:o}", "stt", stt_models_json(ctx), "tts", tts_list);
  if (body) api_speech_respond_json(req, 200, body);
  else api_error(req, 500, ERR_NOMEM, "building the model list", NULL);
  json_decref(body);
}

void dg_models_get(http_req *req, void *ctx) {
  const char *id = http_req_param(req, "model_id");
  if (!id) id = http_req_param(req, "model"); /* reached through OpenAI's /v1/models/{model...} */
  if (!id) id = "";
  char uuid[37];
  json_t *found = NULL;
  json_t *stts = stt_models_json(ctx);
  for (size_t i = 0; !found && i < json_array_size(stts); i++) {
    json_t *m = json_array_get(stts, i);
    if (!strcasecmp(id, json_string_value(json_object_get(m, "uuid"))) ||
        !strcasecmp(id, json_string_value(json_object_get(m, "name"))))
      found = json_incref(m);
  }
  json_decref(stts);
  for (size_t i = 0; !found && i < tts_vendor_n(); i++) {
    const tts_vendor_voice *v = tts_vendor_at(i);
    if (!str_starts_with(v->vendor_name, "aura-")) continue;
    dg_model_uuid(v->vendor_name, uuid);
    if (!strcasecmp(id, uuid) || !strcasecmp(id, v->vendor_name)) found = tts_model_json(v);
  }
  if (!found) {
    char msg[320];
    snprintf(msg, sizeof msg, "no model with id '%.200s' (GET /deepgram/v1/models lists them)", id);
    api_error(req, 404, ERR_NOT_FOUND, msg, "model_id");
    return;
  }
  api_speech_respond_json(req, 200, found);
  json_decref(found);
}

/* ---- route table ---------------------------------------------------------- */

#define DG_PREFIX_ROUTES(P, TAG)                                                                          \
  {"POST", P "/listen", dg_listen_post, NULL, HTTP_BODY_FILE, "deepgram_listen" TAG},                    \
      {"GET", P "/listen", dg_listen_ws, NULL, HTTP_ROUTE_WS, "deepgram_listen_ws" TAG},                 \
      {"POST", P "/speak", dg_speak_post, NULL, HTTP_BODY_JSON, "deepgram_speak" TAG},                   \
      {"GET", P "/speak", dg_speak_ws, NULL, HTTP_ROUTE_WS, "deepgram_speak_ws" TAG},                    \
      {"POST", P "/read", dg_read_post, NULL, HTTP_BODY_JSON, "deepgram_read" TAG}

static http_route ROUTES[] = {
    DG_PREFIX_ROUTES("/deepgram/v1", ""),
    {"GET", "/deepgram/v1/models", dg_models_list, NULL, 0, "deepgram_models"},
    {"GET", "/deepgram/v1/models/{model_id}", dg_models_get, NULL, 0, "deepgram_model"},
    DG_PREFIX_ROUTES("/deepgram/vl", "_vl"),
    {"GET", "/deepgram/vl/models", dg_models_list, NULL, 0, "deepgram_models_vl"},
    {"GET", "/deepgram/vl/models/{model_id}", dg_models_get, NULL, 0, "deepgram_model_vl"},
    /* root aliases for SDKs based at the root; /v1/models is OpenAI's route,
     * which answers a Deepgram SDK's request (by its headers) with ours */
    DG_PREFIX_ROUTES("/v1", "_root"),
};

size_t deepgram_routes(api_speech *sp, const http_route **out) {
  for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) ROUTES[i].ctx = sp;
  *out = ROUTES;
  return ARRAY_LEN(ROUTES);
}
