/*
 * audio.c - OpenAI audio endpoints on the local speech engines
 * (../shared/specs/openai.md section 6; docs/speech.md "HTTP side").
 *
 * Transcriptions and translations: the request's `model` picks an
 * installed STT model by name, any other name (whisper-1,
 * gpt-4o-transcribe, ...) the default: a Whisper file when one is
 * installed, else pocketsphinx (api_speech_stt_named). The multipart
 * `file` part arrives spooled to disk; it is read, decoded by audio/ to
 * 16 kHz mono int16 (a decoding failure is a 400 naming the problem),
 * transcribed whole (`language`, `prompt`, `temperature` and the
 * translate task passed as stt_options; what the backend cannot do is a
 * 400 naming the field, translation without a model that translates the
 * 501 of every operation without a local equivalent), and shaped into
 * json / text / srt / vtt / verbose_json. Segments are the backend's own
 * (Whisper: its timestamps, tokens, temperature, log-probability,
 * compression ratio, no-speech probability, text as the model cased and
 * punctuated it), or for pocketsphinx sentences from the word timings (a
 * pause of 0.6 s or 10 s of speech ends one), capitalised and ended with a
 * period here. stream=true answers with data-only SSE: one
 * `transcript.text.delta` per word (the deltas concatenate to the final
 * text) and `transcript.text.done`. The handler checks the fields, takes
 * a pooled decoder (429 when all stay busy) and decodes the audio (400s);
 * a producer thread then transcribes and writes the body, so no HTTP
 * thread waits for the recognizer.
 *
 * Speech: the JSON body is checked on the handler thread (every error is a
 * 400 naming the field), then a producer thread synthesizes sentence by
 * sentence and encodes as it goes, so the first bytes leave before the
 * whole text is spoken: chunked audio (stream_format "audio") or SSE
 * `speech.audio.delta` events with base64 chunks and `speech.audio.done`.
 * Output is 24 kHz mono like OpenAI's (pcm = raw s16le at 24 kHz).
 *
 * Voices: GET /v1/audio/voices lists local voices and the vendor names.
 */
#include "api/openai/audio.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/openai/unimplemented.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "speech/whisper_decode.h"

#define SPEECH_INPUT_MAX_CHARS 4096
#define SPEECH_OUT_RATE 24000
#define SEG_GAP_S 0.6
#define SEG_MAX_S 10.0

/* ---- small helpers ------------------------------------------------------- */

/* Plain multipart field value, NULL when absent or a file part. */
static const char *form_field(http_req *req, const char *name) {
  const http_part *p = http_req_part_named(req, name);
  return p && !p->filename ? p->value : NULL;
}

/* Lenient form boolean: true/false/1/0 in any case. Returns -1 when neither. */
static int form_bool(const char *s) {
  if (!s) return 0;
  if (!strcasecmp(s, "true") || !strcmp(s, "1")) return 1;
  if (!strcasecmp(s, "false") || !strcmp(s, "0") || !*s) return 0;
  return -1;
}

/* Number of UTF-8 code points in s (continuation bytes are not counted). */
static size_t utf8_chars(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
  return n;
}

static void bad_request(http_req *req, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void bad_request(http_req *req, const char *param, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  api_error(req, 400, ERR_INVALID, msg, param);
}

/* ---- transcriptions and translations -------------------------------------- */

enum tr_format { TR_JSON, TR_TEXT, TR_SRT, TR_VERBOSE, TR_VTT };
static const char *const TR_FORMATS[] = {"json", "text", "srt", "verbose_json", "vtt"};

typedef struct tr_opts {
  enum tr_format format;
  bool words, segments;   /* timestamp_granularities[] */
  bool logprobs;          /* include[]=logprobs */
  bool stream;
  bool translate;         /* /v1/audio/translations */
  double temperature;
  const char *model, *language, *prompt; /* borrowed from the request's parts */
} tr_opts;

/* Checks the form fields of a transcription or translation; answers 400
 * and returns nonzero on a bad one. */
static int tr_parse(http_req *req, bool translate, tr_opts *o) {
  memset(o, 0, sizeof *o);
  o->translate = translate;
  const http_part *file = http_req_part_named(req, "file");
  if (!file || (!file->filename && !file->value_len)) {
    bad_request(req, "file", "file: required; send the audio as a multipart file part named 'file'");
    return -1;
  }
  o->model = form_field(req, "model");
  if (!o->model || !*o->model) {
    bad_request(req, "model", "model: required field is missing");
    return -1;
  }
  const char *fmt = form_field(req, "response_format");
  o->format = TR_JSON;
  if (fmt && *fmt) {
    size_t i = 0;
    while (i < ARRAY_LEN(TR_FORMATS) && strcmp(fmt, TR_FORMATS[i])) i++;
    if (i == ARRAY_LEN(TR_FORMATS)) {
      bad_request(req, "response_format",
                  "response_format: '%.64s' is not one of json, text, srt, verbose_json, vtt%s", fmt,
                  strcmp(fmt, "diarized_json") == 0 ? " (no local backend diarizes)" : "");
      return -1;
    }
    o->format = (enum tr_format)i;
  }
  o->language = translate ? NULL : form_field(req, "language");
  o->prompt = form_field(req, "prompt");
  const char *temp = form_field(req, "temperature");
  if (temp && *temp) {
    char *end = NULL;
    errno = 0;
    o->temperature = strtod(temp, &end);
    if (errno || *end || !(o->temperature >= 0 && o->temperature <= 1)) {
      bad_request(req, "temperature", "temperature: '%.32s' is not a number between 0 and 1", temp);
      return -1;
    }
  }
  int sb = form_bool(form_field(req, "stream"));
  if (sb < 0) {
    bad_request(req, "stream", "stream: expected true or false");
    return -1;
  }
  o->stream = sb == 1 && !translate; /* translations do not stream */
  for (size_t i = 0; i < http_req_n_parts(req); i++) {
    const http_part *p = http_req_part(req, i);
    if (p->filename) continue;
    if (!strcmp(p->name, "timestamp_granularities[]") || !strcmp(p->name, "timestamp_granularities")) {
      if (!strcmp(p->value, "word")) o->words = true;
      else if (!strcmp(p->value, "segment")) o->segments = true;
      else {
        bad_request(req, "timestamp_granularities", "timestamp_granularities[]: '%.32s' is not word or segment",
                    p->value);
        return -1;
      }
    } else if (!strcmp(p->name, "include[]") || !strcmp(p->name, "include")) {
      if (!strcmp(p->value, "logprobs")) o->logprobs = true;
      else {
        bad_request(req, "include", "include[]: '%.32s' is not supported (only logprobs)", p->value);
        return -1;
      }
    }
  }
  if (o->stream && o->format != TR_JSON && o->format != TR_TEXT) {
    bad_request(req, "stream", "stream: streaming is available with response_format json or text, not %s",
                TR_FORMATS[o->format]);
    return -1;
  }
  return 0;
}

/* Reads and decodes the uploaded file for the recognizer; answers the error
 * itself (400 naming the problem for bad audio). */
static int tr_decode(http_req *req, api_speech *sp, stt *s, audio_pcm *pcm) {
  const http_part *file = http_req_part_named(req, "file");
  uint8_t *bytes = NULL;
  size_t len = 0;
  int rc = 0;
  const char *name = file->filename ? file->filename : "file";
  if (file->filename) {
    rc = api_speech_read_file(file->file_path, UINT64_MAX, &bytes, &len);
  } else if ((bytes = malloc(file->value_len))) { /* sent as a plain field, without a file name */
    memcpy(bytes, file->value, file->value_len);
    len = file->value_len;
  } else {
    rc = err_set(ERR_NOMEM, "reading the upload");
  }
  if (rc) {
    api_error_last(req, rc, "file");
    return rc;
  }
  if (len == 0) {
    free(bytes);
    bad_request(req, "file", "file: the uploaded file '%.128s' is empty", name);
    return ERR_INVALID;
  }
  audio_decode_opts o = {.hint = file->filename ? file->filename : file->content_type, .target_rate = stt_sample_rate(s),
                         .target_channels = 1, .fmt = AUDIO_SAMPLE_S16};
  rc = api_speech_decode(sp, bytes, len, &o, pcm);
  free(bytes);
  if (rc) {
    char msg[512];
    snprintf(msg, sizeof msg, "file: could not decode '%.128s' as audio: %s", name, err_detail());
    api_error(req, api_speech_decode_status(rc), rc, msg, "file");
  }
  return rc;
}

static double word_logprob(const stt_word *w) { return log(w->confidence > 1e-6 ? w->confidence : 1e-6); }

/* One segment of the answer: a backend's own segment (Whisper), or a
 * sentence found from word timings and punctuated here (pocketsphinx). */
typedef struct tr_seg {
  double start, end;
  char *text;                 /* malloc'd */
  size_t first, n;            /* its words */
  const stt_segment *src;     /* the backend's, or NULL */
} tr_seg;

static void tr_segs_free(tr_seg *s, int n) {
  for (int i = 0; s && i < n; i++) free(s[i].text);
  free(s);
}

/* The segments of r and the transcript text (segments joined by a space). */
static int tr_segments(const stt_result *r, tr_seg **out, int *n_out, buf *text) {
  *out = NULL;
  *n_out = 0;
  api_span *spans = NULL;
  int n = r->n_segments ? (int)r->n_segments : api_speech_spans(r, SEG_GAP_S, SEG_MAX_S, &spans);
  if (n < 0) return n;
  tr_seg *s = n ? calloc((size_t)n, sizeof *s) : NULL;
  int rc = n && !s ? err_set(ERR_NOMEM, "building the transcript") : 0;
  for (int i = 0; !rc && i < n; i++) {
    if (r->n_segments) {
      const stt_segment *g = &r->segments[i];
      s[i] = (tr_seg){g->start, g->end, str_dup(g->text), g->first_word, g->n_words, g};
    } else {
      buf t = BUF_INIT;
      rc = api_speech_span_text(r, &spans[i], true, &t);
      if (!rc && buf_append_byte(&t, 0)) rc = ERR_NOMEM;
      s[i] = (tr_seg){spans[i].start, spans[i].end, rc ? NULL : str_dup((char *)t.data), spans[i].first, spans[i].n,
                      NULL};
      buf_free(&t);
    }
    if (!rc && !s[i].text) rc = err_set(ERR_NOMEM, "building the transcript");
    if (!rc && *s[i].text && text->len && buf_append_byte(text, ' ')) rc = ERR_NOMEM;
    if (!rc && buf_append_str(text, s[i].text)) rc = ERR_NOMEM;
  }
  free(spans);
  if (rc) {
    tr_segs_free(s, n);
    return rc;
  }
  *out = s;
  *n_out = n;
  return 0;
}

/* A word as OpenAI's verbose_json lists it: the model's casing without
 * the punctuation around it, or the recognizer's word. */
static void tr_word(const stt_word *w, char *out, size_t cap) {
  const char *p = w->punctuated ? w->punctuated : w->word;
  size_t a = 0, b = strlen(p);
  while (a < b && (unsigned char)p[a] < 0x80 && ispunct((unsigned char)p[a])) a++;
  while (b > a && (unsigned char)p[b - 1] < 0x80 && ispunct((unsigned char)p[b - 1])) b--;
  if (a == b) a = 0, b = strlen(p);
  snprintf(out, cap, "%.*s", (int)(b - a), p + a);
}

/* logprobs array for include[]=logprobs: one entry per word, logprob =
 * ln(word confidence), bytes = its UTF-8 bytes. */
static json_t *tr_logprobs(const stt_result *r) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < r->n_words; i++) {
    const char *t = r->words[i].punctuated ? r->words[i].punctuated : r->words[i].word;
    json_t *bytes = json_array();
    for (const unsigned char *p = (const unsigned char *)t; *p; p++) json_array_append_new(bytes, json_integer(*p));
    json_array_append_new(a, json_pack("{s:s, s:f, s:o}", "token", t, "logprob", word_logprob(&r->words[i]), "bytes",
                                       bytes));
  }
  return a;
}

static json_t *tr_usage(double seconds) {
  return json_pack("{s:s, s:I}", "type", "duration", "seconds", (json_int_t)ceil(seconds));
}

/* Repetition measure for segments the backend did not score (Whisper's
 * own is zlib's): characters of the text over characters of its distinct
 * words (1.0 when no word repeats). */
static double tr_compression(const stt_result *r, const tr_seg *s) {
  size_t all = 0, distinct = 0;
  for (size_t k = 0; k < s->n; k++) {
    const char *w = r->words[s->first + k].word;
    size_t len = strlen(w) + 1;
    all += len;
    bool seen = false;
    for (size_t j = 0; j < k && !seen; j++) seen = !strcmp(r->words[s->first + j].word, w);
    if (!seen) distinct += len;
  }
  return distinct ? (double)all / (double)distinct : 1.0;
}

/* The language's name for verbose_json ("english"). */
static const char *tr_language(const stt_result *r, const tr_opts *o) {
  if (o->translate || !r->language[0]) return "english";
  const char *n = whisper_lang_name(whisper_lang_index(r->language));
  return n ? n : "english";
}

static json_t *tr_verbose(const stt_result *r, const tr_seg *segs, int n_segs, const char *text, const tr_opts *o) {
  json_t *arr = json_array();
  for (int i = 0; arr && i < n_segs; i++) {
    const tr_seg *s = &segs[i];
    json_t *tokens = json_array(), *seg;
    if (s->src) {
      for (size_t k = 0; k < s->src->n_tokens; k++) json_array_append_new(tokens, json_integer(s->src->tokens[k]));
      seg = json_pack("{s:i, s:I, s:f, s:f, s:s, s:o, s:f, s:f, s:f, s:f}", "id", i, "seek", (json_int_t)s->src->seek,
                      "start", s->start, "end", s->end, "text", s->text, "tokens", tokens, "temperature",
                      s->src->temperature, "avg_logprob", s->src->avg_logprob, "compression_ratio",
                      s->src->compression_ratio, "no_speech_prob", s->src->no_speech_prob);
    } else {
      double lp = 0;
      for (size_t k = 0; k < s->n; k++) {
        json_array_append_new(tokens, json_integer((json_int_t)(s->first + k)));
        lp += word_logprob(&r->words[s->first + k]);
      }
      seg = json_pack("{s:i, s:i, s:f, s:f, s:s, s:o, s:f, s:f, s:f, s:f}", "id", i, "seek", 0, "start", s->start,
                      "end", s->end, "text", s->text, "tokens", tokens, "temperature", o->temperature, "avg_logprob",
                      s->n ? lp / (double)s->n : 0.0, "compression_ratio", tr_compression(r, s), "no_speech_prob",
                      0.0);
    }
    json_array_append_new(arr, seg);
  }
  json_t *v = json_pack("{s:s, s:s, s:f, s:s, s:o}", "task", o->translate ? "translate" : "transcribe", "language",
                        tr_language(r, o), "duration", r->audio_seconds, "text", text, "segments", arr);
  if (v && o->words) {
    json_t *words = json_array();
    for (size_t i = 0; i < r->n_words; i++) {
      char w[256];
      tr_word(&r->words[i], w, sizeof w);
      json_array_append_new(words, json_pack("{s:s, s:f, s:f}", "word", w, "start", r->words[i].start, "end",
                                             r->words[i].end));
    }
    json_object_set_new(v, "words", words);
  }
  if (v) json_object_set_new(v, "usage", tr_usage(r->audio_seconds));
  return v;
}

/* SRT or WebVTT cues, one per segment. */
static void tr_cues(const tr_seg *segs, int n_segs, bool vtt, buf *out) {
  if (vtt) buf_append_str(out, "WEBVTT\n\n");
  for (int i = 0; i < n_segs; i++) {
    char a[16], b[16];
    api_speech_timestamp(segs[i].start, vtt ? '.' : ',', a);
    api_speech_timestamp(segs[i].end, vtt ? '.' : ',', b);
    if (!vtt) buf_appendf(out, "%d\n", i + 1);
    buf_appendf(out, "%s --> %s\n%s\n\n", a, b, segs[i].text);
  }
}

/* The Content-Type of a finished transcription in format f. */
static const char *tr_content_type(enum tr_format f) {
  switch (f) {
    case TR_TEXT: case TR_SRT: return "text/plain; charset=utf-8";
    case TR_VTT: return "text/vtt; charset=utf-8";
    default: return "application/json";
  }
}

/* Renders a finished transcription in the requested format into out. */
static int tr_render(const stt_result *r, const tr_opts *o, buf *out) {
  tr_seg *segs = NULL;
  int n_segs = 0;
  buf text = BUF_INIT;
  int rc = tr_segments(r, &segs, &n_segs, &text);
  if (!rc && buf_append_byte(&text, 0)) rc = ERR_NOMEM;
  const char *t = !rc ? (const char *)text.data : "";
  json_t *v = NULL;
  if (!rc) {
    switch (o->format) {
      case TR_JSON:
        v = json_pack("{s:s}", "text", t);
        if (v && o->logprobs) json_object_set_new(v, "logprobs", tr_logprobs(r));
        if (v) json_object_set_new(v, "usage", tr_usage(r->audio_seconds));
        break;
      case TR_VERBOSE:
        v = tr_verbose(r, segs, n_segs, t, o);
        break;
      case TR_TEXT:
        rc = buf_appendf(out, "%s\n", t);
        break;
      case TR_SRT:
      case TR_VTT:
        tr_cues(segs, n_segs, o->format == TR_VTT, out);
        break;
    }
  }
  if (!rc && (o->format == TR_JSON || o->format == TR_VERBOSE)) {
    char *d = v ? api_speech_json_dumps(v) : NULL;
    rc = d ? buf_append_str(out, d) : err_set(ERR_NOMEM, "building the response");
    free(d);
  }
  json_decref(v);
  buf_free(&text);
  tr_segs_free(segs, n_segs);
  return rc;
}

/* A transcription in flight: the handler decoded the audio and took a
 * pooled decoder (so "busy" is still a 429), then a producer thread
 * transcribes and writes the answer: the whole body, or SSE deltas and
 * the done event. */
typedef struct tr_job {
  api_speech *sp;
  stt_stream *st;
  http_stream *s;
  audio_pcm pcm;
  tr_opts o;
} tr_job;

/* SSE deltas and done: one delta per word (the words with the model's
 * punctuation, or punctuated here as in the final text), the first of a
 * segment after a space; the deltas concatenate to the done text. */
static void tr_send_events(tr_job *j, const stt_result *r) {
  tr_seg *segs = NULL;
  int n_segs = 0;
  buf text = BUF_INIT;
  int rc = tr_segments(r, &segs, &n_segs, &text);
  if (!rc) rc = buf_append_byte(&text, 0);
  for (int i = 0; !rc && i < n_segs; i++) {
    /* a segment's text split at its spaces: the deltas then rebuild it exactly */
    const char *p = segs[i].text;
    for (size_t k = 0; !rc && *p; k++) {
      const char *sp = strchr(p + 1, ' ');
      size_t len = sp ? (size_t)(sp - p) : strlen(p);
      buf d = BUF_INIT;
      if ((i && k == 0 && buf_append_byte(&d, ' ')) || buf_append(&d, p, len) || buf_append_byte(&d, 0)) {
        buf_free(&d);
        rc = ERR_NOMEM;
        break;
      }
      json_t *ev = json_pack("{s:s, s:s}", "type", "transcript.text.delta", "delta", (char *)d.data);
      size_t wi = segs[i].first + k;
      if (ev && j->o.logprobs && k < segs[i].n && wi < r->n_words) {
        const stt_word *sw = &r->words[wi];
        const char *tok = sw->punctuated ? sw->punctuated : sw->word;
        json_t *lp = json_pack("[{s:s, s:f, s:[]}]", "token", tok, "logprob", word_logprob(sw), "bytes");
        json_t *bytes = lp ? json_object_get(json_array_get(lp, 0), "bytes") : NULL;
        for (const unsigned char *q = (const unsigned char *)tok; bytes && *q; q++)
          json_array_append_new(bytes, json_integer(*q));
        json_object_set_new(ev, "logprobs", lp);
      }
      buf_free(&d);
      rc = api_speech_sse_json(j->s, ev);
      p += len;
    }
  }
  if (!rc) {
    json_t *done = json_pack("{s:s, s:s}", "type", "transcript.text.done", "text", (const char *)text.data);
    if (done && j->o.logprobs) json_object_set_new(done, "logprobs", tr_logprobs(r));
    /* No usage here: the event's schema allows only token usage, and the
     * local recognizers count seconds of audio, not tokens (the plain
     * answers carry {"type":"duration"}, which their schema allows). */
    api_speech_sse_json(j->s, done);
  }
  buf_free(&text);
  tr_segs_free(segs, n_segs);
}

static void *tr_main(void *arg) {
  tr_job *j = arg;
  stt_result r = {0};
  int rc = stt_stream_transcribe(j->st, j->pcm.data, j->pcm.n_frames, &r);
  stt_stream_free(j->st);
  audio_pcm_free(&j->pcm);
  if (j->o.stream) {
    if (rc)
      api_speech_sse_json(j->s, json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", err_detail(), "type",
                                          "server_error", "param", "code"));
    else tr_send_events(j, &r);
  } else {
    buf out = {0};
    if (!rc) rc = tr_render(&r, &j->o, &out);
    if (rc) {
      /* the 200 is already sent: say what failed in the body, and log it */
      LOG_WARN("openai", "transcription failed after the response started: %s", err_detail());
      buf_reset(&out);
      buf_appendf(&out, "transcription failed: %s\n", err_detail());
    }
    http_stream_write(j->s, out.data ? out.data : "", out.len);
    buf_free(&out);
  }
  stt_result_free(&r);
  http_stream_close(j->s);
  api_speech *sp = j->sp;
  free(j);
  api_speech_job_done(sp);
  return NULL;
}

/* Both endpoints: the model the request names (an installed one, or the
 * default for whisper-1, gpt-4o-transcribe, ...), its options checked
 * against what the backend can do (400 naming the field), the audio
 * decoded and a decoder taken here, the work on a producer thread. */
static void tr_handle(http_req *req, api_speech *sp, bool translate) {
  tr_opts o;
  if (tr_parse(req, translate, &o)) return;
  stt *s = NULL;
  int rc = api_speech_stt_named(sp, o.model, &s);
  if (rc) {
    api_error_last(req, rc, NULL);
    return;
  }
  stt_info info;
  stt_get_info(s, &info);
  if (translate && !info.translates) {
    /* as every operation without a local equivalent: 501, do not retry */
    char msg[512];
    snprintf(msg, sizeof msg,
             "createTranslation (POST /v1/audio/translations) needs a multilingual Whisper model (a whisper.cpp "
             "file such as ggml-base.bin in the models directory or --stt-model); the speech-to-text model %s "
             "does not translate.",
             info.model);
    json_t *body = json_pack("{s:{s:s, s:s, s:n, s:s}}", "error", "message", msg, "type", "server_error", "param",
                             "code", OPENAI_NOT_IMPLEMENTED_CODE);
    http_resp_header(req, "x-should-retry", "false");
    if (body) api_respond_json(req, 501, body);
    else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    json_decref(body);
    return;
  }
  tr_job *j = calloc(1, sizeof *j);
  if (!j) {
    api_error(req, 500, ERR_NOMEM, "starting the transcription", NULL);
    return;
  }
  j->sp = sp;
  j->o = o;
  if ((rc = stt_stream_begin(s, &j->st))) { /* all decoders busy past the wait: 429 */
    api_error_last(req, rc, NULL);
    goto fail;
  }
  stt_options so = {.language = o.language, .prompt = o.prompt, .translate = translate, .temperature = o.temperature};
  if ((rc = stt_stream_set_options(j->st, &so))) {
    const char *d = err_detail();
    bad_request(req, translate && rc == ERR_UNSUPPORTED ? "model" : !strncmp(d, "language", 8) ? "language" : "model",
                "%s", d);
    goto fail;
  }
  if (tr_decode(req, sp, s, &j->pcm)) goto fail;
  j->s = o.stream ? http_stream_open(req, 200, NULL, HTTP_STREAM_SSE)
                  : http_stream_open(req, 200, tr_content_type(o.format), HTTP_STREAM_RAW);
  if (!j->s) {
    api_error(req, 500, ERR_INTERNAL, "cannot open the response stream", NULL);
    goto fail;
  }
  if (api_speech_spawn(sp, tr_main, j)) {
    http_stream_close(j->s);
    goto fail;
  }
  return;
fail:
  if (j->st) stt_stream_free(j->st);
  audio_pcm_free(&j->pcm);
  free(j);
}

static void audio_transcriptions(http_req *req, void *ctx) { tr_handle(req, ctx, false); }
static void audio_translations(http_req *req, void *ctx) { tr_handle(req, ctx, true); }

/* ---- speech ----------------------------------------------------------------- */

typedef struct sp_job {
  api_speech *sp;
  tts *tts;
  http_stream *s;
  tts_choice choice;
  api_speech_head head; /* the first sentence, spoken before the 200 */
  char *text;
  double speed;
  enum audio_format format;
  bool sse;
  audio_encoder *enc;
  buf out;
  size_t n_chars;
  uint64_t n_frames; /* output frames pushed */
  int write_rc;
} sp_job;

/* Sends what the encoder produced: raw bytes or one base64 SSE delta. */
static int sp_flush(sp_job *j) {
  if (!j->out.len) return 0;
  int rc;
  if (j->sse) {
    char *b64 = api_speech_base64(j->out.data, j->out.len);
    rc = b64 ? api_speech_sse_json(j->s, json_pack("{s:s, s:s}", "type", "speech.audio.delta", "audio", b64)) : ERR_NOMEM;
    free(b64);
  } else {
    rc = http_stream_write(j->s, j->out.data, j->out.len);
  }
  buf_reset(&j->out);
  return rc;
}

static int sp_on_pcm(void *user, const int16_t *pcm, size_t n, int rate) {
  sp_job *j = user;
  (void)rate;
  if (http_stream_cancelled(j->s)) return 1;
  j->n_frames += n;
  int rc = audio_encoder_push(j->enc, pcm, n, &j->out);
  if (!rc) rc = sp_flush(j);
  j->write_rc = rc;
  return rc != 0;
}

static void *sp_stream_main(void *arg) {
  sp_job *j = arg;
  int rc = api_speech_head_play(&j->head, j->tts, &j->choice, j->text, j->speed, sp_on_pcm, j);
  if (!rc) rc = audio_encoder_finish(j->enc, &j->out);
  if (!rc) rc = sp_flush(j);
  if (j->sse) {
    if (!rc) {
      /* usage: input = characters of the input; output = 20 ms audio frames */
      json_int_t in = (json_int_t)j->n_chars;
      json_int_t out = (json_int_t)(j->n_frames * 50 / (uint64_t)(j->choice.voice->sample_rate > 0 ? j->choice.voice->sample_rate : 1));
      api_speech_sse_json(j->s, json_pack("{s:s, s:{s:I, s:I, s:I}}", "type", "speech.audio.done", "usage", "input_tokens", in,
                               "output_tokens", out, "total_tokens", in + out));
    } else if (rc != ERR_CANCELLED) {
      api_speech_sse_json(j->s, json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", err_detail(), "type", "server_error",
                               "param", "code"));
    }
  }
  if (rc && rc != ERR_CANCELLED) LOG_WARN("openai", "speech stream ended early: %s", err_detail());
  http_stream_close(j->s);
  audio_encoder_free(j->enc);
  buf_free(&j->out);
  free(j->text);
  api_speech *sp = j->sp;
  free(j);
  api_speech_job_done(sp);
  return NULL;
}

static void audio_speech(http_req *req, void *ctx) {
  api_speech *sp = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  const char *model = NULL, *input = NULL, *voice = NULL, *fmt = "mp3", *sfmt = "audio", *instr = NULL;
  double speed = 1.0;
  int rc;
  const char *field = "model";
  if ((rc = api_json_str(body, "", field, true, &model))) goto bad_field;
  field = "input";
  if ((rc = api_json_str(body, "", field, true, &input))) goto bad_field;
  field = "voice";
  const json_t *jv = json_object_get(body, "voice");
  if (json_is_object(jv)) {
    if ((rc = api_json_str(jv, "voice", "id", true, &voice))) goto bad_field;
  } else if ((rc = api_json_str(body, "", field, true, &voice))) {
    goto bad_field;
  }
  field = "response_format";
  if ((rc = api_json_str(body, "", field, false, &fmt)) && rc != ERR_NOT_FOUND) goto bad_field;
  field = "stream_format";
  if ((rc = api_json_str(body, "", field, false, &sfmt)) && rc != ERR_NOT_FOUND) goto bad_field;
  field = "instructions";
  if ((rc = api_json_str(body, "", field, false, &instr)) && rc != ERR_NOT_FOUND) goto bad_field;
  field = "speed";
  if ((rc = api_json_num(body, "", field, false, &speed)) && rc != ERR_NOT_FOUND) goto bad_field;
  (void)instr; /* a style prompt: no local voice can follow one (docs/speech.md) */
  if (!fmt) fmt = "mp3";
  if (!sfmt) sfmt = "audio";

  if (!*input) {
    bad_request(req, "input", "input: must not be empty");
    goto out;
  }
  size_t n_chars = utf8_chars(input);
  if (n_chars > SPEECH_INPUT_MAX_CHARS) {
    bad_request(req, "input", "input: %zu characters is more than the limit of %d", n_chars, SPEECH_INPUT_MAX_CHARS);
    goto out;
  }
  if (!(speed >= TTS_SPEED_MIN && speed <= TTS_SPEED_MAX)) {
    bad_request(req, "speed", "speed: %g is outside 0.25..4.0", speed);
    goto out;
  }
  static const char *const FORMATS[] = {"mp3", "opus", "aac", "flac", "wav", "pcm"};
  size_t fi = 0;
  while (fi < ARRAY_LEN(FORMATS) && strcmp(fmt, FORMATS[fi])) fi++;
  enum audio_format af;
  if (fi == ARRAY_LEN(FORMATS) || audio_format_parse(fmt, &af)) {
    bad_request(req, "response_format", "response_format: '%.32s' is not one of mp3, opus, aac, flac, wav, pcm", fmt);
    goto out;
  }
  if (!audio_format_available(af)) {
    api_error(req, 501, ERR_UNSUPPORTED, err_detail(), "response_format");
    goto out;
  }
  bool sse = false;
  if (!strcmp(sfmt, "sse")) sse = true;
  else if (strcmp(sfmt, "audio")) {
    bad_request(req, "stream_format", "stream_format: '%.32s' is not audio or sse", sfmt);
    goto out;
  }
  tts *t = NULL;
  if ((rc = api_speech_tts(sp, &t))) {
    api_error_last(req, rc, NULL);
    goto out;
  }
  tts_choice choice;
  if ((rc = tts_voice_resolve(t, voice, &choice))) {
    bad_request(req, "voice", "voice: '%.64s' is not a known voice; GET /v1/audio/voices lists them", voice);
    goto out;
  }
  sp_job *j = calloc(1, sizeof *j);
  if (!j || !(j->text = str_dup(input))) {
    free(j);
    api_error(req, 500, ERR_NOMEM, "starting the synthesis", NULL);
    goto out;
  }
  j->sp = sp;
  j->tts = t;
  j->choice = choice;
  j->speed = speed;
  j->format = af;
  j->sse = sse;
  j->n_chars = n_chars;
  audio_encode_opts eo = {.format = af, .rate = SPEECH_OUT_RATE, .channels = 1};
  if ((rc = audio_encoder_new(&j->enc, AUDIO_SAMPLE_S16, choice.voice->sample_rate, 1, &eo))) {
    api_error_last(req, rc, "response_format");
    free(j->text);
    free(j);
    goto out;
  }
  /* A speech worker that crashes or hangs on the first sentence gets a 500
   * or 504 here, before any 200 (docs/speech.md, worker isolation). */
  if ((rc = api_speech_head_synth(t, &choice, input, speed, &j->head))) {
    api_error_last(req, rc, NULL);
    audio_encoder_free(j->enc);
    free(j->text);
    free(j);
    goto out;
  }
  j->s = http_stream_open(req, 200, sse ? NULL : audio_format_mime(af), sse ? HTTP_STREAM_SSE : HTTP_STREAM_RAW);
  if (!j->s || api_speech_spawn(sp, sp_stream_main, j)) {
    if (j->s) http_stream_close(j->s);
    else api_error(req, 500, ERR_INTERNAL, "cannot open the response stream", NULL);
    api_speech_head_free(&j->head);
    audio_encoder_free(j->enc);
    free(j->text);
    free(j);
  }
  goto out;

bad_field:
  api_error_last(req, rc == ERR_NOT_FOUND ? ERR_INVALID : rc, field);
out:
  json_decref(body);
}

/* ---- voices --------------------------------------------------------------- */

static void audio_voices(http_req *req, void *ctx) {
  api_speech *sp = ctx;
  tts *t = NULL;
  int rc = api_speech_tts(sp, &t);
  if (rc) {
    api_error_last(req, rc, NULL);
    return;
  }
  json_t *data = json_array();
  for (size_t i = 0; data && i < tts_n_voices(t); i++) {
    const tts_voice *v = tts_voice_at(t, i);
    json_array_append_new(data, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:b}", "id", v->name, "object",
                                          "audio.voice", "name", v->name, "backend", v->backend, "language",
                                          v->language, "gender", v->gender, "sample_rate", v->sample_rate,
                                          "description", v->description ? v->description : "", "default",
                                          strcmp(v->name, tts_default_voice(t)) == 0));
  }
  /* vendor names, each with the local voice it plays as */
  for (size_t i = 0; data && i < tts_vendor_n(); i++) {
    const tts_vendor_voice *vv = tts_vendor_at(i);
    tts_choice c;
    if (tts_voice_resolve(t, vv->vendor_name, &c)) continue;
    json_array_append_new(data, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:s}", "id", vv->vendor_name,
                                          "object", "audio.voice", "name", vv->vendor_name, "backend",
                                          c.voice->backend, "language", c.voice->language, "gender",
                                          c.voice->gender, "sample_rate", c.voice->sample_rate, "description",
                                          vv->note ? vv->note : "", "local_voice", vv->local));
  }
  json_t *v = json_pack("{s:s, s:o}", "object", "list", "data", data);
  if (v) api_speech_respond_json(req, 200, v);
  else api_error(req, 500, ERR_NOMEM, "building the voice list", NULL);
  json_decref(v);
}

/* ---- route table ------------------------------------------------------------ */

static http_route ROUTES[] = {
    {"POST", "/v1/audio/transcriptions", audio_transcriptions, NULL, HTTP_BODY_MULTIPART, "openai_audio_transcriptions"},
    {"POST", "/v1/audio/translations", audio_translations, NULL, HTTP_BODY_MULTIPART, "openai_audio_translations"},
    {"POST", "/v1/audio/speech", audio_speech, NULL, HTTP_BODY_JSON, "openai_audio_speech"},
    {"GET", "/v1/audio/voices", audio_voices, NULL, 0, "openai_audio_voices"},
};

size_t openai_audio_routes(api_speech *sp, const http_route **out) {
  for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) ROUTES[i].ctx = sp;
  *out = ROUTES;
  return ARRAY_LEN(ROUTES);
}
