/*
 * speak.c - Deepgram text to speech over REST, POST /v1/speak
 * (../shared/specs/deepgram.md section 5), and the output-format rules the
 * WebSocket /speak shares (speak_ws.c).
 *
 * The query picks the voice (`model`: aura-* / aura-2-* names through the
 * vendor voice table, or a local voice name), `encoding`, `container`,
 * `sample_rate`, `bit_rate` and `speed`; each combination Deepgram refuses is
 * a 400 naming the parameter. The response streams while synthesizing
 * (chunked, no Content-Length) with the headers the SDKs read: dg-request-id
 * (added for every Deepgram request), dg-model-name, dg-model-uuid,
 * dg-char-count and their x-dg-* spellings. mu-law and A-law in a WAV
 * container get a WAV header of their own (format tags 7 and 6), since the
 * audio/ WAV writer is 16-bit PCM only.
 */
#include "api/deepgram/speak.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

#define SPEAK_TEXT_MAX_CHARS 2000

static bool in_list(long v, const long *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (list[i] == v) return true;
  return false;
}

int dg_speak_format_parse(http_req *req, bool websocket, dg_speak_format *f) {
  memset(f, 0, sizeof *f);
  const char *enc = http_req_query(req, "encoding");
  const char *cont = http_req_query(req, "container");
  if (!enc || !*enc) enc = websocket ? "linear16" : "mp3";
  snprintf(f->encoding, sizeof f->encoding, "%.15s", enc);
  static const long L16_RATES[] = {8000, 16000, 24000, 32000, 44100, 48000};
  static const long G711_RATES[] = {8000, 16000};
  static const long FLAC_RATES[] = {8000, 16000, 22050, 24000, 32000, 44100, 48000};
  static const long AAC_RATES[] = {8000, 16000, 22050, 24000, 32000, 44100, 48000};
  long def_rate = 24000;
  const long *rates = L16_RATES;
  size_t n_rates = ARRAY_LEN(L16_RATES);
  bool has_bitrate = false;
  const char *def_container = "none";
  if (!strcmp(enc, "linear16")) {
    def_container = "wav";
  } else if (!strcmp(enc, "mulaw") || !strcmp(enc, "alaw")) {
    def_container = "wav";
    rates = G711_RATES;
    n_rates = ARRAY_LEN(G711_RATES);
    def_rate = 8000;
  } else if (!websocket && !strcmp(enc, "mp3")) {
    static const long R[] = {22050};
    rates = R;
    n_rates = 1;
    def_rate = 22050;
    has_bitrate = true;
  } else if (!websocket && !strcmp(enc, "opus")) {
    static const long R[] = {48000};
    rates = R;
    n_rates = 1;
    def_rate = 48000;
    def_container = "ogg";
    has_bitrate = true;
  } else if (!websocket && !strcmp(enc, "flac")) {
    rates = FLAC_RATES;
    n_rates = ARRAY_LEN(FLAC_RATES);
    def_rate = 48000;
  } else if (!websocket && !strcmp(enc, "aac")) {
    rates = AAC_RATES;
    n_rates = ARRAY_LEN(AAC_RATES);
    def_rate = 22050;
    has_bitrate = true;
  } else {
    dg_bad_request(req, "encoding", "encoding: '%.32s' is not one of %s", enc,
                   websocket ? "linear16, mulaw, alaw" : "linear16, mulaw, alaw, mp3, opus, flac, aac");
    return ERR_INVALID;
  }
  if (websocket) def_container = "none"; /* the socket sends raw audio only */
  if (!cont || !*cont) cont = def_container;
  bool raw_family = !strcmp(enc, "linear16") || !strcmp(enc, "mulaw") || !strcmp(enc, "alaw");
  bool ok_container = !strcmp(cont, def_container) || !strcmp(cont, "none") ||
                      (raw_family && !websocket && !strcmp(cont, "wav"));
  if (!strcmp(enc, "opus") && strcmp(cont, "ogg")) ok_container = false; /* no bare Opus packets */
  if (websocket && strcmp(cont, "none")) ok_container = false;
  if (!ok_container) {
    dg_bad_request(req, "container", "container: '%.16s' is not available with encoding=%s", cont, enc);
    return ERR_INVALID;
  }
  f->wav = !strcmp(cont, "wav");
  long rate;
  if (dg_query_int(req, "sample_rate", 1, AUDIO_RATE_MAX, def_rate, &rate)) return ERR_INVALID;
  if (!in_list(rate, rates, n_rates)) {
    buf allowed = {0};
    for (size_t i = 0; i < n_rates; i++) buf_appendf(&allowed, "%s%ld", i ? ", " : "", rates[i]);
    dg_bad_request(req, "sample_rate", "sample_rate: %ld is not available with encoding=%s (use %s)", rate, enc,
                   allowed.data ? allowed.data : "");
    buf_free(&allowed);
    return ERR_INVALID;
  }
  f->sample_rate = (int)rate;
  long bit_rate = 0;
  if (http_req_query(req, "bit_rate")) {
    if (!has_bitrate) {
      dg_bad_request(req, "bit_rate", "bit_rate: applies to mp3, opus and aac, not encoding=%s", enc);
      return ERR_INVALID;
    }
    if (!strcmp(enc, "mp3")) {
      if (dg_query_int(req, "bit_rate", 0, 1000000, 48000, &bit_rate)) return ERR_INVALID;
      if (bit_rate != 32000 && bit_rate != 48000) {
        dg_bad_request(req, "bit_rate", "bit_rate: %ld is not available with mp3 (use 32000 or 48000)", bit_rate);
        return ERR_INVALID;
      }
    } else if (dg_query_int(req, "bit_rate", 4000, !strcmp(enc, "opus") ? 650000 : 192000, 0, &bit_rate)) {
      return ERR_INVALID;
    }
  } else if (!strcmp(enc, "mp3")) {
    bit_rate = 48000;
  }
  f->bit_rate = (int)bit_rate;
  if (dg_query_num(req, "speed", TTS_SPEED_MIN, TTS_SPEED_MAX, 1.0, &f->speed)) return ERR_INVALID;

  if (!strcmp(enc, "linear16")) f->format = f->wav ? AUDIO_FORMAT_WAV : AUDIO_FORMAT_PCM16;
  else if (!strcmp(enc, "mulaw")) f->format = AUDIO_FORMAT_MULAW;
  else if (!strcmp(enc, "alaw")) f->format = AUDIO_FORMAT_ALAW;
  else if (!strcmp(enc, "mp3")) f->format = AUDIO_FORMAT_MP3;
  else if (!strcmp(enc, "opus")) f->format = AUDIO_FORMAT_OPUS;
  else if (!strcmp(enc, "flac")) f->format = AUDIO_FORMAT_FLAC;
  else f->format = AUDIO_FORMAT_AAC;
  f->g711_wav = f->wav && (f->format == AUDIO_FORMAT_MULAW || f->format == AUDIO_FORMAT_ALAW);
  if (!audio_format_available(f->format)) {
    api_error(req, 501, ERR_UNSUPPORTED, err_detail(), "encoding");
    return ERR_UNSUPPORTED;
  }
  if (f->format == AUDIO_FORMAT_WAV) snprintf(f->content_type, sizeof f->content_type, "audio/wav");
  else if (f->g711_wav) snprintf(f->content_type, sizeof f->content_type, "audio/wav");
  else if (f->format == AUDIO_FORMAT_PCM16)
    snprintf(f->content_type, sizeof f->content_type, "audio/l16;rate=%d", f->sample_rate);
  else if (f->format == AUDIO_FORMAT_MULAW) snprintf(f->content_type, sizeof f->content_type, "audio/basic");
  else if (f->format == AUDIO_FORMAT_ALAW) snprintf(f->content_type, sizeof f->content_type, "audio/x-alaw-basic");
  else snprintf(f->content_type, sizeof f->content_type, "%s", audio_format_mime(f->format));
  return 0;
}

void dg_g711_wav_header(const dg_speak_format *f, uint8_t out[DG_G711_WAV_HEADER]) {
  /* RIFF, WAVE, an 18-byte fmt chunk (tag 7 mu-law / 6 A-law, 8 bits),
   * then a data chunk; sizes unknown while streaming: 0xFFFFFFFF */
  uint32_t rate = (uint32_t)f->sample_rate;
  uint16_t tag = f->format == AUDIO_FORMAT_MULAW ? 7 : 6;
  uint8_t *p = out;
#define PUT4(s) (memcpy(p, s, 4), p += 4)
#define U32(v) (p[0] = (uint8_t)(v), p[1] = (uint8_t)((v) >> 8), p[2] = (uint8_t)((v) >> 16), p[3] = (uint8_t)((v) >> 24), p += 4)
#define U16(v) (p[0] = (uint8_t)(v), p[1] = (uint8_t)((v) >> 8), p += 2)
  PUT4("RIFF");
  U32(0xFFFFFFFFu);
  PUT4("WAVE");
  PUT4("fmt ");
  U32(18u);
  U16(tag);
  U16(1u);    /* channels */
  U32(rate);
  U32(rate);  /* bytes per second */
  U16(1u);    /* block align */
  U16(8u);    /* bits per sample */
  U16(0u);    /* cbSize */
  PUT4("data");
  U32(0xFFFFFFFFu);
#undef PUT4
#undef U32
#undef U16
}

int dg_speak_voice(http_req *req, tts *t, tts_choice *c, const char **model_out) {
  const char *model = http_req_query(req, "model");
  if (!model || !*model) model = "aura-asteria-en";
  *model_out = model;
  if (tts_voice_resolve(t, model, c)) {
    dg_bad_request(req, "model",
                   "model: '%.64s' is not a known voice; use an aura-* / aura-2-* name or a local voice "
                   "(GET /deepgram/v1/models lists them)",
                   model);
    return ERR_INVALID;
  }
  return 0;
}

/* ---- REST ------------------------------------------------------------------ */

typedef struct speak_job {
  api_speech *sp;
  tts *tts;
  http_stream *s;
  tts_choice choice;
  api_speech_head head; /* the first sentence, spoken before the 200 */
  char *text;
  dg_speak_format f;
  audio_encoder *enc;
  buf out;
} speak_job;

static int speak_on_pcm(void *user, const int16_t *pcm, size_t n, int rate) {
  speak_job *j = user;
  (void)rate;
  if (http_stream_cancelled(j->s)) return 1;
  int rc = audio_encoder_push(j->enc, pcm, n, &j->out);
  if (!rc && j->out.len) rc = http_stream_write(j->s, j->out.data, j->out.len);
  buf_reset(&j->out);
  return rc != 0;
}

static void *speak_main(void *arg) {
  speak_job *j = arg;
  int rc = 0;
  if (j->f.g711_wav) {
    uint8_t h[DG_G711_WAV_HEADER];
    dg_g711_wav_header(&j->f, h);
    rc = http_stream_write(j->s, h, sizeof h);
  }
  if (!rc) rc = api_speech_head_play(&j->head, j->tts, &j->choice, j->text, j->f.speed, speak_on_pcm, j);
  api_speech_head_free(&j->head); /* when the header write failed */
  if (!rc) rc = audio_encoder_finish(j->enc, &j->out);
  if (!rc && j->out.len) rc = http_stream_write(j->s, j->out.data, j->out.len);
  if (rc && rc != ERR_CANCELLED) LOG_WARN("deepgram", "speak stream ended early: %s", err_detail());
  http_stream_close(j->s);
  audio_encoder_free(j->enc);
  buf_free(&j->out);
  free(j->text);
  api_speech *sp = j->sp;
  free(j);
  api_speech_job_done(sp);
  return NULL;
}

static size_t utf8_chars(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
  return n;
}

void dg_speak_post(http_req *req, void *ctx) {
  api_speech *sp = ctx;
  dg_speak_format f;
  if (dg_speak_format_parse(req, false, &f)) return;
  size_t len = 0;
  const char *raw = http_req_body(req, &len);
  json_t *body = NULL;
  if (!raw || api_json_decode_object(raw, len, &body)) {
    dg_bad_request(req, "text", "the body must be a JSON object {\"text\": \"...\"}: %s",
                   raw ? err_detail() : "no body");
    return;
  }
  const char *text = NULL;
  int rc = api_json_str(body, "", "text", true, &text);
  if (rc || !*text) {
    dg_bad_request(req, "text", "text: %s", rc ? err_detail() : "must not be empty");
    json_decref(body);
    return;
  }
  size_t n_chars = utf8_chars(text);
  if (n_chars > SPEAK_TEXT_MAX_CHARS) {
    dg_bad_request(req, "text", "text: %zu characters is more than the limit of %d", n_chars, SPEAK_TEXT_MAX_CHARS);
    json_decref(body);
    return;
  }
  if (http_req_query(req, "callback")) {
    dg_bad_request(req, "callback", "callback: asynchronous requests are not available on this server (it makes "
                                    "no outbound requests)");
    json_decref(body);
    return;
  }
  tts *t = NULL;
  tts_choice c;
  const char *model = NULL;
  if ((rc = api_speech_tts(sp, &t))) {
    api_error_last(req, rc, NULL);
    json_decref(body);
    return;
  }
  if (dg_speak_voice(req, t, &c, &model)) {
    json_decref(body);
    return;
  }
  speak_job *j = calloc(1, sizeof *j);
  if (!j || !(j->text = str_dup(text))) {
    free(j);
    json_decref(body);
    api_error(req, 500, ERR_NOMEM, "starting the synthesis", NULL);
    return;
  }
  json_decref(body);
  j->sp = sp;
  j->tts = t;
  j->choice = c;
  j->f = f;
  audio_encode_opts eo = {.format = f.format, .rate = f.sample_rate, .channels = 1, .bit_rate = f.bit_rate};
  if ((rc = audio_encoder_new(&j->enc, AUDIO_SAMPLE_S16, c.voice->sample_rate, 1, &eo))) {
    api_error_last(req, rc, "encoding");
    free(j->text);
    free(j);
    return;
  }
  /* A speech worker that crashes or hangs on the first sentence gets a 500
   * or 504 in Deepgram's shape here, before any 200 (docs/speech.md). */
  if ((rc = api_speech_head_synth(t, &c, j->text, f.speed, &j->head))) {
    api_error_last(req, rc, NULL);
    audio_encoder_free(j->enc);
    free(j->text);
    free(j);
    return;
  }
  char uuid[37], count[32];
  dg_model_uuid(model, uuid);
  snprintf(count, sizeof count, "%zu", n_chars);
  http_resp_header(req, "dg-model-name", model);
  http_resp_header(req, "dg-model-uuid", uuid);
  http_resp_header(req, "dg-char-count", count);
  char rid[37];
  dg_request_uuid(req, rid);
  http_resp_header(req, "x-dg-request-id", rid);
  http_resp_header(req, "x-dg-model-name", model);
  http_resp_header(req, "x-dg-characters", count);
  j->s = http_stream_open(req, 200, f.content_type, HTTP_STREAM_RAW);
  if (!j->s || api_speech_spawn(sp, speak_main, j)) {
    if (j->s) http_stream_close(j->s);
    else api_error(req, 500, ERR_INTERNAL, "cannot open the response stream", NULL);
    api_speech_head_free(&j->head);
    audio_encoder_free(j->enc);
    free(j->text);
    free(j);
  }
}
