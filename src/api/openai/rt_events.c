/*
 * rt_events.c - the Realtime wire vocabulary: session configuration in both
 * layouts (beta flat, GA nested) read into one rt_config and written back,
 * the table of event names that differ between beta and GA, item content
 * spellings, ids, base64 and the hash under which ephemeral keys are stored.
 *
 * One state machine, two vocabularies: the session works in GA names and
 * shapes; rt_send() renames through BETA_NAMES and rt_item_beta() respells
 * item content just before a beta event leaves.
 */
#include <libavutil/base64.h>
#include <libavutil/mem.h>
#include <libavutil/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/openai/rt_int.h"
#include "base/err.h"
#include "base/util.h"

/* ---- names ------------------------------------------------------------------ */

static const struct {
  const char *ga, *beta;
} BETA_NAMES[] = {
    {"response.output_text.delta", "response.text.delta"},
    {"response.output_text.done", "response.text.done"},
    {"response.output_audio.delta", "response.audio.delta"},
    {"response.output_audio.done", "response.audio.done"},
    {"response.output_audio_transcript.delta", "response.audio_transcript.delta"},
    {"response.output_audio_transcript.done", "response.audio_transcript.done"},
    {"conversation.item.added", "conversation.item.created"},
    {"conversation.item.done", NULL}, /* beta announces an item once */
    {"input_audio_buffer.timeout_triggered", NULL}, /* GA only */
};

const char *rt_beta_event_name(const char *ga) {
  for (size_t i = 0; i < ARRAY_LEN(BETA_NAMES); i++)
    if (strcmp(BETA_NAMES[i].ga, ga) == 0) return BETA_NAMES[i].beta;
  return ga;
}

json_t *rt_item_beta(const json_t *item) {
  json_t *c = json_deep_copy(item);
  json_t *content = json_object_get(c, "content");
  size_t i;
  json_t *part;
  json_array_foreach(content, i, part) {
    const char *t = json_string_value(json_object_get(part, "type"));
    if (t && strcmp(t, "output_text") == 0) json_object_set_new(part, "type", json_string("text"));
    else if (t && strcmp(t, "output_audio") == 0) json_object_set_new(part, "type", json_string("audio"));
  }
  return c;
}

/* ---- ids, base64, hashing ---------------------------------------------------- */

void rt_make_id(char *out, const char *prefix) { id_make(out, RT_ID_MAX, prefix, 12); }

char *rt_b64_encode(const void *data, size_t n) {
  if (n > (size_t)INT32_MAX / 2) return NULL;
  size_t cap = AV_BASE64_SIZE(n);
  char *out = malloc(cap);
  if (out && !av_base64_encode(out, (int)cap, data, (int)n)) {
    free(out);
    return NULL;
  }
  return out;
}

int rt_b64_decode(const char *s, size_t len, uint8_t **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  if (len > (size_t)INT32_MAX / 2) return err_set(ERR_TOO_LARGE, "audio: the base64 text is too long");
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '+' ||
              ch == '/' || ch == '=';
    if (!ok || (ch == '=' && len - i > 2)) return err_set(ERR_PARSE, "audio: not valid base64 (byte %zu)", i);
  }
  if (len % 4) return err_set(ERR_PARSE, "audio: not valid base64 (length %zu is not a multiple of 4)", len);
  size_t cap = len / 4 * 3 + 1;
  uint8_t *b = malloc(cap);
  char *z = str_ndup(s, len);
  if (!b || !z) {
    free(b);
    free(z);
    return err_set(ERR_NOMEM, "audio");
  }
  int n = av_base64_decode(b, z, (int)cap);
  free(z);
  if (n < 0) {
    free(b);
    return err_set(ERR_PARSE, "audio: not valid base64");
  }
  *out = b;
  *n_out = (size_t)n;
  return 0;
}

void rt_key_hash(const char *key, char hex[65]) {
  uint8_t d[32] = {0};
  struct AVSHA *sha = av_sha_alloc();
  if (sha) {
    av_sha_init(sha, 256);
    av_sha_update(sha, (const uint8_t *)key, strlen(key));
    av_sha_final(sha, d);
    av_free(sha);
  }
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* ---- configuration ------------------------------------------------------------- */

int rt_fmt_rate(enum rt_fmt f) { return f == RT_FMT_PCM16 ? 24000 : 8000; }

void rt_config_defaults(rt_config *c, bool transcription, const char *model_name) {
  memset(c, 0, sizeof *c);
  c->transcription = transcription;
  rt_make_id(c->id, "sess_");
  c->expires_at = time_wall_s() + 30 * 60;
  c->model = model_name && *model_name ? str_dup(model_name) : NULL;
  c->instructions = str_dup("You are a helpful, friendly voice assistant. Answer briefly.");
  c->out_text = false;
  c->out_audio = true;
  c->voice = str_dup("alloy");
  c->speed = 1.0;
  c->tr_enabled = transcription;
  c->tr_model = transcription ? str_dup("pocketsphinx") : NULL;
  c->noise_reduction = json_null();
  c->td = RT_TD_SERVER_VAD;
  c->td_threshold = 0.5;
  c->td_prefix_ms = 300;
  c->td_silence_ms = 500;
  c->td_create_response = !transcription;
  c->td_interrupt = !transcription;
  snprintf(c->td_eagerness, sizeof c->td_eagerness, "auto");
  c->tools = json_array();
  c->tool_choice = json_string("auto");
  c->temperature = 0.8;
  c->max_output_tokens = -1;
  c->include = json_null();
}

void rt_config_free(rt_config *c) {
  free(c->model);
  free(c->instructions);
  free(c->voice);
  free(c->tr_model);
  free(c->tr_language);
  free(c->tr_prompt);
  json_decref(c->noise_reduction);
  json_decref(c->tools);
  json_decref(c->tool_choice);
  json_decref(c->include);
  memset(c, 0, sizeof *c);
}

static char *dup_or_null(const char *s) { return s ? str_dup(s) : NULL; }

int rt_config_copy(rt_config *dst, const rt_config *src) {
  *dst = *src;
  dst->model = dup_or_null(src->model);
  dst->instructions = dup_or_null(src->instructions);
  dst->voice = dup_or_null(src->voice);
  dst->tr_model = dup_or_null(src->tr_model);
  dst->tr_language = dup_or_null(src->tr_language);
  dst->tr_prompt = dup_or_null(src->tr_prompt);
  dst->noise_reduction = json_deep_copy(src->noise_reduction);
  dst->tools = json_deep_copy(src->tools);
  dst->tool_choice = json_deep_copy(src->tool_choice);
  dst->include = json_deep_copy(src->include);
  return 0;
}

/* Error with a path: "session.<path>: <why>". */
static __thread const char *g_prefix = "session";

static int bad(const char **param, const char *path, int code, const char *fmt, const char *arg) {
  static __thread char p[96];
  snprintf(p, sizeof p, "%s.%s", g_prefix, path);
  if (param) *param = p;
  char why[200];
  snprintf(why, sizeof why, fmt, arg ? arg : "");
  return err_set(code, "%s.%s: %s", g_prefix, path, why);
}

/* A string field: absent leaves *dst; null clears it when nullable. */
static int take_str(const json_t *o, const char *key, const char *path, bool nullable, char **dst, const char **param) {
  json_t *v = json_object_get(o, key);
  if (!v) return 0;
  if (json_is_null(v)) {
    if (!nullable) return bad(param, path, ERR_TYPE, "expected a string, got null%s", NULL);
    free(*dst);
    *dst = NULL;
    return 0;
  }
  if (!json_is_string(v)) return bad(param, path, ERR_TYPE, "expected a string, got %s", api_json_type_name(v));
  free(*dst);
  *dst = str_dup(json_string_value(v));
  return 0;
}

static int parse_fmt(const json_t *v, const char *path, enum rt_fmt *out, const char **param) {
  const char *t = json_is_string(v) ? json_string_value(v) : json_string_value(json_object_get(v, "type"));
  if (!t) return bad(param, path, ERR_TYPE, "expected a format (\"pcm16\" or {\"type\":\"audio/pcm\"})%s", NULL);
  if (strcmp(t, "pcm16") == 0 || strcmp(t, "audio/pcm") == 0) {
    json_t *rate = json_is_object(v) ? json_object_get(v, "rate") : NULL;
    if (rate && !json_is_null(rate) && json_number_value(rate) != 24000)
      return bad(param, path, ERR_INVALID, "rate must be 24000 (the only PCM rate)%s", NULL);
    *out = RT_FMT_PCM16;
  } else if (strcmp(t, "g711_ulaw") == 0 || strcmp(t, "audio/pcmu") == 0) {
    *out = RT_FMT_ULAW;
  } else if (strcmp(t, "g711_alaw") == 0 || strcmp(t, "audio/pcma") == 0) {
    *out = RT_FMT_ALAW;
  } else {
    return bad(param, path, ERR_INVALID,
               "'%s' is not a supported format (pcm16, g711_ulaw, g711_alaw, audio/pcm, audio/pcmu, audio/pcma)", t);
  }
  return 0;
}

static int parse_transcription(rt_config *c, const json_t *v, const char *path, const char **param) {
  if (json_is_null(v)) {
    c->tr_enabled = c->transcription; /* a transcription session always transcribes */
    return 0;
  }
  if (!json_is_object(v)) return bad(param, path, ERR_TYPE, "expected an object or null, got %s", api_json_type_name(v));
  char p[64];
  int rc;
  snprintf(p, sizeof p, "%s.model", path);
  if ((rc = take_str(v, "model", p, true, &c->tr_model, param))) return rc;
  snprintf(p, sizeof p, "%s.language", path);
  if ((rc = take_str(v, "language", p, true, &c->tr_language, param))) return rc;
  snprintf(p, sizeof p, "%s.prompt", path);
  if ((rc = take_str(v, "prompt", p, true, &c->tr_prompt, param))) return rc;
  c->tr_enabled = true;
  return 0;
}

static int parse_td(rt_config *c, const json_t *v, const char *path, const char **param) {
  if (json_is_null(v)) {
    c->td = RT_TD_NONE;
    return 0;
  }
  if (!json_is_object(v)) return bad(param, path, ERR_TYPE, "expected an object or null, got %s", api_json_type_name(v));
  const char *t = json_string_value(json_object_get(v, "type"));
  char p[64];
  if (!t || strcmp(t, "server_vad") == 0) c->td = RT_TD_SERVER_VAD;
  else if (strcmp(t, "semantic_vad") == 0) c->td = RT_TD_SEMANTIC_VAD;
  else {
    snprintf(p, sizeof p, "%s.type", path);
    return bad(param, p, ERR_INVALID, "'%s' is not one of server_vad, semantic_vad", t);
  }
  json_t *x;
  if ((x = json_object_get(v, "threshold")) && !json_is_null(x)) {
    snprintf(p, sizeof p, "%s.threshold", path);
    if (!json_is_number(x) || json_number_value(x) < 0 || json_number_value(x) > 1)
      return bad(param, p, ERR_RANGE, "expected a number from 0 to 1%s", NULL);
    c->td_threshold = json_number_value(x);
  }
  static const char *const MS[] = {"prefix_padding_ms", "silence_duration_ms"};
  long *dst[] = {&c->td_prefix_ms, &c->td_silence_ms};
  for (int i = 0; i < 2; i++) {
    if ((x = json_object_get(v, MS[i])) && !json_is_null(x)) {
      snprintf(p, sizeof p, "%s.%s", path, MS[i]);
      if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 10000)
        return bad(param, p, ERR_RANGE, "expected an integer from 0 to 10000%s", NULL);
      *dst[i] = (long)json_integer_value(x);
    }
  }
  if ((x = json_object_get(v, "idle_timeout_ms"))) {
    snprintf(p, sizeof p, "%s.idle_timeout_ms", path);
    if (json_is_null(x)) c->td_idle_ms = 0;
    else if (!json_is_integer(x) || json_integer_value(x) < 100 || json_integer_value(x) > 600000)
      return bad(param, p, ERR_RANGE, "expected null or an integer from 100 to 600000%s", NULL);
    else c->td_idle_ms = (long)json_integer_value(x);
  }
  static const char *const BOOLS[] = {"create_response", "interrupt_response"};
  bool *bdst[] = {&c->td_create_response, &c->td_interrupt};
  for (int i = 0; i < 2; i++) {
    if ((x = json_object_get(v, BOOLS[i])) && !json_is_null(x)) {
      snprintf(p, sizeof p, "%s.%s", path, BOOLS[i]);
      if (!json_is_boolean(x)) return bad(param, p, ERR_TYPE, "expected a boolean, got %s", api_json_type_name(x));
      *bdst[i] = json_is_true(x);
    }
  }
  if ((x = json_object_get(v, "eagerness")) && !json_is_null(x)) {
    const char *e = json_string_value(x);
    snprintf(p, sizeof p, "%s.eagerness", path);
    if (!e || (strcmp(e, "low") && strcmp(e, "medium") && strcmp(e, "high") && strcmp(e, "auto")))
      return bad(param, p, ERR_INVALID, "expected one of low, medium, high, auto%s", NULL);
    snprintf(c->td_eagerness, sizeof c->td_eagerness, "%s", e);
  }
  if (c->td == RT_TD_SEMANTIC_VAD) {
    /* Mapped onto the energy VAD: eagerness sets how long a pause ends the turn. */
    const char *e = c->td_eagerness;
    c->td_silence_ms = strcmp(e, "high") == 0 ? 250 : strcmp(e, "low") == 0 ? 1200 : 600;
  }
  return 0;
}

static int parse_modalities(rt_config *c, const json_t *v, const char *path, const char **param) {
  if (!json_is_array(v) || json_array_size(v) == 0)
    return bad(param, path, ERR_TYPE, "expected a non-empty array of \"text\" / \"audio\"%s", NULL);
  bool t = false, a = false;
  size_t i;
  json_t *m;
  json_array_foreach(v, i, m) {
    const char *s = json_string_value(m);
    if (s && strcmp(s, "text") == 0) t = true;
    else if (s && strcmp(s, "audio") == 0) a = true;
    else return bad(param, path, ERR_INVALID, "'%s' is not one of text, audio", s ? s : "(not a string)");
  }
  c->out_text = t;
  c->out_audio = a;
  return 0;
}

static int parse_max_tokens(rt_config *c, const json_t *v, const char *path, const char **param) {
  if (json_is_string(v) && strcmp(json_string_value(v), "inf") == 0) c->max_output_tokens = -1;
  else if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= 4096)
    c->max_output_tokens = json_integer_value(v);
  else return bad(param, path, ERR_INVALID, "expected an integer from 1 to 4096 or \"inf\"%s", NULL);
  return 0;
}

static int parse_tools(rt_config *c, const json_t *v, const char *path, const char **param) {
  if (!json_is_array(v)) return bad(param, path, ERR_TYPE, "expected an array, got %s", api_json_type_name(v));
  size_t i;
  json_t *t;
  json_array_foreach(v, i, t) {
    const char *type = json_string_value(json_object_get(t, "type"));
    const char *name = json_string_value(json_object_get(t, "name"));
    char p[64];
    snprintf(p, sizeof p, "%s[%zu]", path, i);
    if (!type || strcmp(type, "function") != 0 || !name || !*name)
      return bad(param, p, ERR_INVALID, "expected {\"type\":\"function\",\"name\",...}%s", NULL);
  }
  json_decref(c->tools);
  c->tools = json_deep_copy(v);
  return 0;
}

static int parse_speed(rt_config *c, const json_t *v, const char *path, const char **param) {
  if (!json_is_number(v) || json_number_value(v) < 0.25 || json_number_value(v) > 1.5)
    return bad(param, path, ERR_RANGE, "expected a number from 0.25 to 1.5%s", NULL);
  c->speed = json_number_value(v);
  return 0;
}

/* Fields both layouts spell the same way. */
static int apply_common(rt_config *c, const json_t *s, const char **param) {
  int rc;
  json_t *v;
  if ((rc = take_str(s, "model", "model", true, &c->model, param))) return rc;
  if ((rc = take_str(s, "instructions", "instructions", true, &c->instructions, param))) return rc;
  if ((v = json_object_get(s, "tools")) && !json_is_null(v) && (rc = parse_tools(c, v, "tools", param))) return rc;
  if ((v = json_object_get(s, "tool_choice")) && !json_is_null(v)) {
    if (!json_is_string(v) && !json_is_object(v))
      return bad(param, "tool_choice", ERR_TYPE, "expected a string or an object, got %s", api_json_type_name(v));
    json_decref(c->tool_choice);
    c->tool_choice = json_deep_copy(v);
  }
  if ((v = json_object_get(s, "include"))) {
    json_decref(c->include);
    c->include = json_deep_copy(v);
  }
  return 0;
}

static int apply_beta(rt_config *c, const json_t *s, const char **param) {
  int rc = apply_common(c, s, param);
  json_t *v;
  if (rc) return rc;
  if ((v = json_object_get(s, "modalities")) && !json_is_null(v) && (rc = parse_modalities(c, v, "modalities", param)))
    return rc;
  if ((rc = take_str(s, "voice", "voice", false, &c->voice, param))) return rc;
  if ((v = json_object_get(s, "input_audio_format")) && !json_is_null(v) &&
      (rc = parse_fmt(v, "input_audio_format", &c->in_fmt, param)))
    return rc;
  if ((v = json_object_get(s, "output_audio_format")) && !json_is_null(v) &&
      (rc = parse_fmt(v, "output_audio_format", &c->out_fmt, param)))
    return rc;
  if ((v = json_object_get(s, "input_audio_transcription")) &&
      (rc = parse_transcription(c, v, "input_audio_transcription", param)))
    return rc;
  if ((v = json_object_get(s, "input_audio_noise_reduction"))) {
    json_decref(c->noise_reduction);
    c->noise_reduction = json_deep_copy(v);
  }
  if ((v = json_object_get(s, "turn_detection")) && (rc = parse_td(c, v, "turn_detection", param))) return rc;
  if ((v = json_object_get(s, "temperature")) && !json_is_null(v)) {
    if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 2)
      return bad(param, "temperature", ERR_RANGE, "expected a number from 0 to 2%s", NULL);
    c->temperature = json_number_value(v);
  }
  if ((v = json_object_get(s, "max_response_output_tokens")) && !json_is_null(v) &&
      (rc = parse_max_tokens(c, v, "max_response_output_tokens", param)))
    return rc;
  if ((v = json_object_get(s, "speed")) && !json_is_null(v) && (rc = parse_speed(c, v, "speed", param))) return rc;
  return 0;
}

static int apply_ga(rt_config *c, const json_t *s, bool require_type, const char **param) {
  json_t *v = json_object_get(s, "type");
  if (v && !json_is_null(v)) {
    const char *t = json_string_value(v);
    if (!t || (strcmp(t, "realtime") && strcmp(t, "transcription")))
      return bad(param, "type", ERR_INVALID, "expected \"realtime\" or \"transcription\"%s", NULL);
    c->transcription = strcmp(t, "transcription") == 0;
    if (c->transcription) c->tr_enabled = true;
  } else if (require_type) {
    return bad(param, "type", ERR_INVALID, "missing required parameter (\"realtime\" or \"transcription\")%s", NULL);
  }
  int rc = apply_common(c, s, param);
  if (rc) return rc;
  if ((v = json_object_get(s, "output_modalities")) && !json_is_null(v) &&
      (rc = parse_modalities(c, v, "output_modalities", param)))
    return rc;
  if ((v = json_object_get(s, "max_output_tokens")) && !json_is_null(v) &&
      (rc = parse_max_tokens(c, v, "max_output_tokens", param)))
    return rc;
  json_t *audio = json_object_get(s, "audio");
  if (audio && !json_is_null(audio) && !json_is_object(audio))
    return bad(param, "audio", ERR_TYPE, "expected an object, got %s", api_json_type_name(audio));
  json_t *in = json_object_get(audio, "input"), *out = json_object_get(audio, "output");
  if (in) {
    if ((v = json_object_get(in, "format")) && !json_is_null(v) &&
        (rc = parse_fmt(v, "audio.input.format", &c->in_fmt, param)))
      return rc;
    if ((v = json_object_get(in, "transcription")) &&
        (rc = parse_transcription(c, v, "audio.input.transcription", param)))
      return rc;
    if ((v = json_object_get(in, "noise_reduction"))) {
      json_decref(c->noise_reduction);
      c->noise_reduction = json_deep_copy(v);
    }
    if ((v = json_object_get(in, "turn_detection")) && (rc = parse_td(c, v, "audio.input.turn_detection", param)))
      return rc;
  }
  if (out) {
    if ((v = json_object_get(out, "format")) && !json_is_null(v) &&
        (rc = parse_fmt(v, "audio.output.format", &c->out_fmt, param)))
      return rc;
    if ((rc = take_str(out, "voice", "audio.output.voice", false, &c->voice, param))) return rc;
    if ((v = json_object_get(out, "speed")) && !json_is_null(v) && (rc = parse_speed(c, v, "audio.output.speed", param)))
      return rc;
  }
  return 0;
}

int rt_config_apply(rt_config *c, const json_t *session, bool beta, bool require_type, const char *prefix,
                    const char **param) {
  g_prefix = prefix ? prefix : "session";
  if (param) *param = g_prefix;
  if (!json_is_object(session))
    return err_set(ERR_TYPE, "%s: expected an object, got %s", g_prefix, api_json_type_name(session));
  rt_config t;
  rt_config_copy(&t, c);
  int rc = beta ? apply_beta(&t, session, param) : apply_ga(&t, session, require_type, param);
  if (rc) {
    rt_config_free(&t);
    return rc;
  }
  rt_config_free(c);
  *c = t;
  return 0;
}

/* ---- rendering --------------------------------------------------------------------- */

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *fmt_json(enum rt_fmt f, bool beta) {
  static const char *const BETA[] = {"pcm16", "g711_ulaw", "g711_alaw"};
  if (beta) return json_string(BETA[f]);
  if (f == RT_FMT_PCM16) return json_pack("{s:s, s:i}", "type", "audio/pcm", "rate", 24000);
  return json_pack("{s:s}", "type", f == RT_FMT_ULAW ? "audio/pcmu" : "audio/pcma");
}

static json_t *td_json(const rt_config *c) {
  if (c->td == RT_TD_NONE) return json_null();
  if (c->td == RT_TD_SEMANTIC_VAD)
    return json_pack("{s:s, s:s, s:b, s:b}", "type", "semantic_vad", "eagerness", c->td_eagerness, "create_response",
                     c->td_create_response, "interrupt_response", c->td_interrupt);
  return json_pack("{s:s, s:f, s:i, s:i, s:o, s:b, s:b}", "type", "server_vad", "threshold", c->td_threshold,
                   "prefix_padding_ms", (int)c->td_prefix_ms, "silence_duration_ms", (int)c->td_silence_ms,
                   "idle_timeout_ms", c->td_idle_ms > 0 ? json_integer(c->td_idle_ms) : json_null(),
                   "create_response", c->td_create_response, "interrupt_response", c->td_interrupt);
}

static json_t *tr_json(const rt_config *c) {
  if (!c->tr_enabled) return json_null();
  return json_pack("{s:o, s:o, s:o}", "model", str_or_null(c->tr_model ? c->tr_model : "pocketsphinx"), "language",
                   str_or_null(c->tr_language), "prompt", json_string(c->tr_prompt ? c->tr_prompt : ""));
}

static json_t *modalities_json(const rt_config *c) {
  json_t *a = json_array();
  if (c->out_text) json_array_append_new(a, json_string("text"));
  if (c->out_audio) json_array_append_new(a, json_string("audio"));
  return a;
}

static json_t *max_tokens_json(long long n) { return n < 0 ? json_string("inf") : json_integer(n); }

json_t *rt_config_json(const rt_config *c, bool beta) {
  json_t *o;
  if (beta && c->transcription) {
    o = json_pack("{s:s, s:s, s:I, s:o, s:o, s:o, s:O, s:O}", "id", c->id, "object", "realtime.transcription_session",
                  "expires_at", (json_int_t)c->expires_at, "input_audio_format", fmt_json(c->in_fmt, true),
                  "input_audio_transcription", tr_json(c), "turn_detection", td_json(c), "input_audio_noise_reduction",
                  c->noise_reduction, "include", c->include);
    json_object_set_new(o, "modalities", json_pack("[s]", "text"));
    return o;
  }
  if (beta) {
    o = json_pack("{s:s, s:s, s:o, s:o, s:o, s:s, s:o, s:o, s:o, s:O, s:o, s:O, s:O, s:f, s:o, s:f, s:n, s:I}", "id",
                  c->id, "object", "realtime.session", "model", str_or_null(c->model ? c->model : "default"),
                  "modalities", modalities_json(c), "instructions", str_or_null(c->instructions), "voice",
                  c->voice ? c->voice : "alloy", "input_audio_format", fmt_json(c->in_fmt, true), "output_audio_format",
                  fmt_json(c->out_fmt, true), "input_audio_transcription", tr_json(c), "input_audio_noise_reduction",
                  c->noise_reduction, "turn_detection", td_json(c), "tools", c->tools, "tool_choice", c->tool_choice,
                  "temperature", c->temperature, "max_response_output_tokens", max_tokens_json(c->max_output_tokens),
                  "speed", c->speed, "tracing", "expires_at", (json_int_t)c->expires_at);
    return o;
  }
  json_t *input = json_pack("{s:o, s:o, s:O, s:o}", "format", fmt_json(c->in_fmt, false), "transcription", tr_json(c),
                            "noise_reduction", c->noise_reduction, "turn_detection", td_json(c));
  if (c->transcription)
    return json_pack("{s:s, s:s, s:s, s:I, s:{s:o}, s:O}", "type", "transcription", "object",
                     "realtime.transcription_session", "id", c->id, "expires_at", (json_int_t)c->expires_at, "audio",
                     "input", input, "include", c->include);
  json_t *output = json_pack("{s:o, s:s, s:f}", "format", fmt_json(c->out_fmt, false), "voice",
                             c->voice ? c->voice : "alloy", "speed", c->speed);
  o = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:O, s:O, s:o, s:n, s:n, s:s, s:I, s:O, s:{s:o, s:o}}", "type",
                "realtime", "object", "realtime.session", "id", c->id, "model",
                str_or_null(c->model ? c->model : "default"), "output_modalities", modalities_json(c), "instructions",
                str_or_null(c->instructions), "tools", c->tools, "tool_choice", c->tool_choice, "max_output_tokens",
                max_tokens_json(c->max_output_tokens), "tracing", "prompt", "truncation", "auto", "expires_at",
                (json_int_t)c->expires_at, "include", c->include, "audio", "input", input, "output", output);
  return o;
}
