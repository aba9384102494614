/*
 * listen.c - Deepgram pre-recorded speech to text, POST /v1/listen
 * (../shared/specs/deepgram.md section 3).
 *
 * The body arrives spooled to a file (any size up to --max-upload, chunked
 * or not). Content-Type application/json means {"url": ...}; anything else,
 * or none, is media, sniffed by audio/ unless `encoding` names headerless
 * samples (linear16, mulaw, alaw with sample_rate and channels). The audio
 * is decoded to 16 kHz int16, mono or one run per channel (multichannel),
 * transcribed whole by pocketsphinx, and shaped into the response of 3.3.
 *
 * Options honoured: model (any name; runs on the local model and says so in
 * metadata), language (English only: anything else is a 400), punctuate and
 * smart_format (capitals and periods from word timings), diarize (every
 * word speaker 0: one speaker assumed, with a warning), multichannel,
 * utterances + utt_split, paragraphs, numerals (also with smart_format:
 * number words to digits), search (exact word-sequence matches),
 * replace (single words), tag, extra, encoding/sample_rate/channels. Options
 * no local backend can honour (redact, keywords, profanity_filter, ...) are
 * accepted and listed in metadata.warnings. summarize, topics, intents and
 * sentiment run on the transcript with the default language model (read.c,
 * dg_intel_run), or are warnings when there is none. A {"url"}
 * body is fetched and a `callback` gets the result (the request answers
 * {"request_id"} at once and transcribes on a worker thread) only for hosts
 * the operator allows with --fetch-hosts (fetch.c); otherwise both are a 400
 * that names the option.
 *
 * Start reading at dg_listen_post().
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/deepgram/deepgram.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

#define MAX_LIST 64

typedef struct listen_opts {
  dg_fmt fmt;
  bool utterances, paragraphs, multichannel;
  bool numerals;            /* numerals or smart_format: number words -> digits */
  double utt_split;
  enum audio_raw raw;
  long sample_rate, channels;
  /* owned copies, so an asynchronous (callback) job can outlive the request */
  char *tags[MAX_LIST];
  size_t n_tags;
  char *extra[MAX_LIST];
  size_t n_extra;
  char *search[MAX_LIST];
  size_t n_search;
  char *replace[MAX_LIST];
  size_t n_replace;
  char *callback;         /* NULL: answer synchronously */
  char *callback_method;  /* POST or PUT */
  dg_intel intel;    /* summarize, topics, intents, sentiment (read.c) */
  json_t *warnings; /* owned array */
  stt *stt;          /* the model the request names (borrowed) */
  stt_info info;     /* what it can do */
  char *language;    /* ISO code asked for, or NULL */
  char *prompt;      /* keyterm / keywords as Whisper's initial prompt, or NULL */
  bool detect_language;
} listen_opts;

static void listen_opts_free(listen_opts *o) {
  for (size_t i = 0; i < o->n_tags; i++) free(o->tags[i]);
  for (size_t i = 0; i < o->n_extra; i++) free(o->extra[i]);
  for (size_t i = 0; i < o->n_search; i++) free(o->search[i]);
  for (size_t i = 0; i < o->n_replace; i++) free(o->replace[i]);
  free(o->callback);
  free(o->callback_method);
  dg_intel_free(&o->intel);
  free(o->language);
  free(o->prompt);
  json_decref(o->warnings);
  memset(o, 0, sizeof *o);
}

/* All values of a repeated query key, copied. */
static size_t query_copies(http_req *req, const char *name, char **out) {
  const char *v[MAX_LIST];
  size_t n = http_req_query_all(req, name, v, MAX_LIST), k = 0;
  for (size_t i = 0; i < n; i++)
    if ((out[k] = str_dup(v[i]))) k++;
  return k;
}

/* A value that turns a feature on: present and not false/0. */
static bool query_on(http_req *req, const char *name) {
  const char *v = http_req_query(req, name);
  return v && strcasecmp(v, "false") && strcmp(v, "0");
}

/* Options the local backend cannot honour, and why; reported in
 * metadata.warnings when the request turns them on. */
/* `needs`: 'p' honoured by a backend that takes prompts, 'm' by a
 * multilingual one; 0 = never honoured here. */
static const struct {
  const char *name, *why;
  char needs;
} UNHONOURED[] = {
    {"measurements", "no local unit formatter", 0},
    {"dictation", "spoken punctuation is not converted", 0},
    {"profanity_filter", "no profanity filter is applied", 0},
    {"redact", "no redaction is applied", 0},
    {"keywords", "the local recognizer takes no keyword boosts", 'p'},
    {"keyterm", "the local recognizer takes no key terms", 'p'},
    {"detect_language", "the local model knows only English; no language detection is done", 'm'},
    {"detect_entities", "no entity detection is done", 0},
    {"filler_words", "the local recognizer drops filler words", 0},
};

/* Parses and checks the query; answers 400 itself on a bad value. */
static int listen_parse(http_req *req, api_speech *sp, listen_opts *o) {
  memset(o, 0, sizeof *o);
  o->warnings = json_array();
  if (!o->warnings) return ERR_NOMEM;
  bool punct, smart;
  long n_alt;
  if (dg_query_bool(req, "punctuate", false, &punct) || dg_query_bool(req, "smart_format", false, &smart) ||
      dg_query_bool(req, "diarize", false, &o->fmt.diarize) ||
      dg_query_bool(req, "utterances", false, &o->utterances) ||
      dg_query_bool(req, "paragraphs", false, &o->paragraphs) ||
      dg_query_bool(req, "multichannel", false, &o->multichannel) ||
      dg_query_num(req, "utt_split", 0.0, 60.0, 0.8, &o->utt_split) ||
      dg_query_int(req, "alternatives", 1, 100, 1, &n_alt) ||
      dg_query_int(req, "sample_rate", AUDIO_RATE_MIN, AUDIO_RATE_MAX, 0, &o->sample_rate) ||
      dg_query_int(req, "channels", 1, AUDIO_CHANNELS_MAX, 1, &o->channels))
    return ERR_INVALID;
  o->fmt.punctuate = punct || smart || o->paragraphs;
  if (dg_intel_parse(req, &o->intel)) return ERR_INVALID;
  bool num = false;
  if (dg_query_bool(req, "numerals", false, &num)) return ERR_INVALID;
  o->numerals = num || smart;
  if (http_req_query(req, "diarize_model")) o->fmt.diarize = true;

  int rc = api_speech_stt_named(sp, http_req_query(req, "model"), &o->stt);
  if (rc) {
    api_error_last(req, rc, NULL);
    return rc;
  }
  stt_get_info(o->stt, &o->info);
  const char *lang = http_req_query(req, "language");
  if (lang && *lang && strcasecmp(lang, "multi") && (rc = dg_check_language(&o->info, lang))) {
    dg_bad_request(req, "language", "%s", err_detail());
    return ERR_INVALID;
  }
  if (lang && *lang && strcasecmp(lang, "multi") && !(o->language = str_dup(lang))) return ERR_NOMEM;
  const char *cb = http_req_query(req, "callback");
  if (cb) {
    if (dg_url_check(api_speech_fetch_hosts(sp), cb, "callback")) {
      dg_bad_request(req, "callback", "%s", err_detail());
      return ERR_INVALID;
    }
    const char *m = http_req_query(req, "callback_method");
    if (m && strcasecmp(m, "POST") && strcasecmp(m, "PUT")) {
      dg_bad_request(req, "callback_method", "callback_method: '%.16s' is not POST or PUT", m);
      return ERR_INVALID;
    }
    o->callback = str_dup(cb);
    o->callback_method = str_dup(m && !strcasecmp(m, "PUT") ? "PUT" : "POST");
    if (!o->callback || !o->callback_method) return ERR_NOMEM;
  }
  const char *enc = http_req_query(req, "encoding");
  if (enc && *enc) {
    if (!strcmp(enc, "linear16")) o->raw = AUDIO_RAW_LINEAR16;
    else if (!strcmp(enc, "mulaw")) o->raw = AUDIO_RAW_MULAW;
    else if (!strcmp(enc, "alaw")) o->raw = AUDIO_RAW_ALAW;
    else if (strcmp(enc, "flac") && strcmp(enc, "opus") && strcmp(enc, "ogg-opus") && strcmp(enc, "amr-nb") &&
             strcmp(enc, "amr-wb") && strcmp(enc, "speex") && strcmp(enc, "linear32") && strcmp(enc, "g729")) {
      dg_bad_request(req, "encoding",
                     "encoding: '%.32s' is not one of linear16, linear32, flac, alaw, mulaw, amr-nb, amr-wb, opus, "
                     "ogg-opus, speex, g729",
                     enc);
      return ERR_INVALID;
    }
    if (o->raw != AUDIO_RAW_NONE && !o->sample_rate) {
      dg_bad_request(req, "sample_rate", "sample_rate: required with encoding=%s (headerless audio)", enc);
      return ERR_INVALID;
    }
    /* other encodings carry their own framing: the decoder probes them */
  }
  o->n_tags = query_copies(req, "tag", o->tags);
  o->n_extra = query_copies(req, "extra", o->extra);
  o->n_search = query_copies(req, "search", o->search);
  o->n_replace = query_copies(req, "replace", o->replace);

  for (size_t i = 0; i < ARRAY_LEN(UNHONOURED); i++) {
    char nd = UNHONOURED[i].needs;
    if ((nd == 'p' && o->info.prompts) || (nd == 'm' && o->info.multilingual)) continue;
    if (query_on(req, UNHONOURED[i].name))
      dg_warn(o->warnings, UNHONOURED[i].name, "unsupported_feature", UNHONOURED[i].why);
  }
  /* key terms (and keywords without their ":boost") become the prompt of a
   * backend that takes one: Whisper then favours their spelling */
  if (o->info.prompts) {
    buf pr = BUF_INIT;
    static const char *const keys[] = {"keyterm", "keywords"};
    for (size_t k = 0; k < ARRAY_LEN(keys); k++) {
      const char *v[MAX_LIST];
      size_t n = http_req_query_all(req, keys[k], v, MAX_LIST);
      for (size_t i = 0; i < n; i++) {
        const char *colon = k == 1 ? strrchr(v[i], ':') : NULL;
        size_t len = colon ? (size_t)(colon - v[i]) : strlen(v[i]);
        if (!len) continue;
        if ((pr.len && buf_append_str(&pr, ", ")) || buf_append(&pr, v[i], len)) {
          buf_free(&pr);
          return ERR_NOMEM;
        }
      }
    }
    if (pr.len && (buf_append_byte(&pr, 0) || !(o->prompt = str_dup((char *)pr.data)))) {
      buf_free(&pr);
      return ERR_NOMEM;
    }
    buf_free(&pr);
  }
  if (dg_query_bool(req, "detect_language", false, &o->detect_language)) return ERR_INVALID;
  if (n_alt > 1) dg_warn(o->warnings, "alternatives", "unsupported_value", "only one alternative is returned");
  if (o->fmt.diarize)
    dg_warn(o->warnings, "diarize", "partial_support", "no local diarizer: every word is attributed to speaker 0");
  return 0;
}

/* ---- shaping ---------------------------------------------------------------- */

/* Number words and their values; scale words multiply. */
static const struct {
  const char *w;
  int v;
} NUMBER_WORDS[] = {
    {"zero", 0},     {"one", 1},        {"two", 2},       {"three", 3},     {"four", 4},       {"five", 5},
    {"six", 6},      {"seven", 7},      {"eight", 8},     {"nine", 9},      {"ten", 10},       {"eleven", 11},
    {"twelve", 12},  {"thirteen", 13},  {"fourteen", 14}, {"fifteen", 15},  {"sixteen", 16},   {"seventeen", 17},
    {"eighteen", 18}, {"nineteen", 19}, {"twenty", 20},   {"thirty", 30},   {"forty", 40},     {"fifty", 50},
    {"sixty", 60},   {"seventy", 70},   {"eighty", 80},   {"ninety", 90},   {"hundred", 100},  {"thousand", 1000},
    {"million", 1000000},
};

static int number_value(const char *w) {
  for (size_t i = 0; i < ARRAY_LEN(NUMBER_WORDS); i++)
    if (!strcmp(w, NUMBER_WORDS[i].w)) return NUMBER_WORDS[i].v;
  return -1;
}

/* numerals: each run of number words becomes one word of digits ("twenty
 * one" -> "21", "two hundred five" -> "205"), spanning the run's times with
 * its lowest confidence. A run breaks where a word could not continue the
 * number (a second unit after a unit: "one two" -> "1 2"). */
static void apply_numerals(stt_result *r) {
  size_t out = 0;
  for (size_t i = 0; i < r->n_words;) {
    int v = number_value(r->words[i].word);
    if (v < 0) {
      r->words[out++] = r->words[i++];
      continue;
    }
    long long total = 0, cur = 0;
    int last = -1; /* value of the previous word in the run */
    size_t j = i;
    double conf = 1;
    while (j < r->n_words && (v = number_value(r->words[j].word)) >= 0) {
      if (v >= 1000) {
        if (last < 0) break;
        total += (cur ? cur : 1) * v;
        cur = 0;
      } else if (v == 100) {
        if (last < 0 && j == i) cur = 1;
        cur = (cur ? cur : 1) * 100;
      } else {
        /* a unit may follow a ten or a scale, a ten may follow a scale */
        bool ok = last < 0 || last >= 100 || (last >= 20 && last % 10 == 0 && v < 10);
        if (!ok) break;
        cur += v;
      }
      if (r->words[j].confidence < conf) conf = r->words[j].confidence;
      last = v;
      j++;
    }
    if (j == i) { /* "thousand" or "million" cannot start a number: keep it */
      r->words[out++] = r->words[i++];
      continue;
    }
    char digits[32];
    snprintf(digits, sizeof digits, "%lld", total + cur);
    stt_word w = r->words[i];
    w.end = r->words[j - 1].end;
    w.confidence = conf;
    char *d = str_dup(digits);
    if (d) {
      free(w.word);
      w.word = d;
      free(w.punctuated); /* the digits are the word as written now */
      w.punctuated = NULL;
      for (size_t k = i + 1; k < j; k++) {
        free(r->words[k].word);
        free(r->words[k].punctuated);
      }
    } else {
      j = i + 1; /* keep the word as it was */
    }
    r->words[out++] = w;
    i = j;
  }
  r->n_words = out;
}

/* replace=find:replacement on single words (case-insensitive); an empty
 * replacement deletes the word. Multi-word finds are reported unsupported. */
static void apply_replace(stt_result *r, const listen_opts *o, bool *warned_multi) {
  for (size_t k = 0; k < o->n_replace; k++) {
    const char *spec = o->replace[k];
    const char *colon = strchr(spec, ':');
    size_t flen = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *to = colon ? colon + 1 : "";
    if (!flen) continue;
    if (memchr(spec, ' ', flen)) {
      if (!*warned_multi)
        dg_warn(o->warnings, "replace", "partial_support", "only single-word finds are replaced");
      *warned_multi = true;
      continue;
    }
    size_t out = 0;
    for (size_t i = 0; i < r->n_words; i++) {
      stt_word *w = &r->words[i];
      if (strlen(w->word) == flen && !strncasecmp(w->word, spec, flen)) {
        free(w->punctuated); /* the replacement is written as given */
        w->punctuated = NULL;
        if (!*to) {
          free(w->word);
          continue;
        }
        char *nw = str_dup(to);
        if (nw) {
          free(w->word);
          w->word = nw;
        }
      }
      r->words[out++] = *w;
    }
    r->n_words = out;
  }
}

/* results.channels[c].search: exact (case-insensitive) word-sequence hits. */
static json_t *search_json(const stt_result *r, const listen_opts *o, double offset) {
  json_t *arr = json_array();
  for (size_t q = 0; q < o->n_search; q++) {
    char *query = str_dup(o->search[q]);
    if (!query) continue;
    char *toks[32];
    size_t nt = 0;
    char *save = NULL;
    for (char *t = strtok_r(query, " ", &save); t && nt < 32; t = strtok_r(NULL, " ", &save)) toks[nt++] = t;
    json_t *hits = json_array();
    for (size_t i = 0; nt && i + nt <= r->n_words; i++) {
      size_t k = 0;
      while (k < nt && !strcasecmp(r->words[i + k].word, toks[k])) k++;
      if (k < nt) continue;
      double conf = 0;
      buf snip = {0};
      for (k = 0; k < nt; k++) {
        conf += r->words[i + k].confidence;
        buf_appendf(&snip, "%s%s", k ? " " : "", r->words[i + k].word);
      }
      json_array_append_new(hits, json_pack("{s:f, s:f, s:f, s:s}", "confidence", conf / (double)nt, "start",
                                            r->words[i].start + offset, "end", r->words[i + nt - 1].end + offset,
                                            "snippet", snip.data ? snip.data : ""));
      buf_free(&snip);
    }
    json_array_append_new(arr, json_pack("{s:s, s:o}", "query", o->search[q], "hits", hits));
    free(query);
  }
  return arr;
}

/* alternatives[0].paragraphs: sentences from the word timings, a new
 * paragraph after a pause of 1.5 s or every 8 sentences. */
static json_t *paragraphs_json(const stt_result *r, const listen_opts *o) {
  api_span *spans = NULL;
  int n = api_speech_spans(r, 0.6, 10.0, &spans);
  json_t *paras = json_array();
  buf transcript = {0};
  json_t *cur = NULL, *sents = NULL;
  size_t cur_words = 0, cur_sents = 0;
  for (int i = 0; i < n; i++) {
    bool brk = !cur || spans[i].start - spans[i - 1].end >= 1.5 || cur_sents >= 8;
    if (brk) {
      if (cur) json_object_set_new(cur, "num_words", json_integer((json_int_t)cur_words));
      sents = json_array();
      cur = json_pack("{s:o, s:f, s:f}", "sentences", sents, "start", spans[i].start, "end", spans[i].end);
      if (o->fmt.diarize) json_object_set_new(cur, "speaker", json_integer(0));
      json_array_append_new(paras, cur);
      cur_words = cur_sents = 0;
      buf_append_str(&transcript, i ? "\n\n" : "\n");
      if (o->fmt.diarize) buf_append_str(&transcript, "Speaker 0: ");
    } else {
      buf_append_byte(&transcript, ' ');
    }
    buf t = {0};
    api_speech_span_text(r, &spans[i], true, &t);
    json_array_append_new(sents, json_pack("{s:s, s:f, s:f}", "text", t.data ? t.data : "", "start", spans[i].start,
                                           "end", spans[i].end));
    buf_append_str(&transcript, t.data ? t.data : "");
    buf_free(&t);
    json_object_set_new(cur, "end", json_real(spans[i].end));
    cur_words += spans[i].n;
    cur_sents++;
  }
  if (cur) json_object_set_new(cur, "num_words", json_integer((json_int_t)cur_words));
  free(spans);
  json_t *v = json_pack("{s:s, s:o}", "transcript", transcript.data ? transcript.data : "", "paragraphs", paras);
  buf_free(&transcript);
  return v;
}

/* results.utterances entries of one channel, split at pauses of utt_split. */
static void utterances_json(const stt_result *r, const listen_opts *o, int channel, json_t *out) {
  api_span *spans = NULL;
  int n = api_speech_spans(r, o->utt_split > 0 ? o->utt_split : 0.8, 1e9, &spans);
  for (int i = 0; i < n; i++) {
    json_t *alt = dg_alternative(r, spans[i].first, spans[i].n, 0, &o->fmt);
    if (!alt) continue;
    char id[37];
    id_uuid(id, sizeof id);
    json_t *u = json_pack("{s:f, s:f, s:O, s:i, s:O, s:O, s:i, s:s}", "start", spans[i].start, "end", spans[i].end,
                          "confidence", json_object_get(alt, "confidence"), "channel", channel, "transcript",
                          json_object_get(alt, "transcript"), "words", json_object_get(alt, "words"), "speaker", 0,
                          "id", id);
    json_array_append_new(out, u);
    json_decref(alt);
  }
  free(spans);
}

/* Transcribes each channel of pcm and builds the whole response. *first,
 * when not NULL, is a decoder already taken for channel 0: it is used and
 * freed (*first = NULL) before the intelligence features run, so a
 * generation never holds a speech decoder; other channels take one from the
 * pool. */
static int listen_run(stt *s, stt_stream **first, struct manager *mgr, const listen_opts *o, const audio_pcm *pcm,
                      const char *request_id, const char *sha, json_t **out) {
  json_t *channels = json_array(), *utts = o->utterances ? json_array() : NULL;
  buf text = BUF_INIT; /* every channel's transcript, for the intelligence features */
  int n_ch = pcm->planar ? pcm->channels : 1;
  int rc = 0;
  bool warned_multi = false;
  for (int c = 0; c < n_ch && !rc; c++) {
    stt_result r = {0};
    const int16_t *data = (const int16_t *)pcm->data + (size_t)c * pcm->n_frames;
    stt_stream *st = NULL;
    if (c == 0 && *first) {
      st = *first;
      *first = NULL;
    } else {
      rc = stt_stream_begin(s, &st);
    }
    stt_options so = {.language = o->language, .prompt = o->prompt};
    if (!rc) rc = stt_stream_set_options(st, &so);
    if (!rc) rc = stt_stream_transcribe(st, data, pcm->n_frames, &r);
    stt_stream_free(st);
    if (rc) break;
    if (o->numerals) apply_numerals(&r);
    apply_replace(&r, o, &warned_multi);
    json_t *alt = dg_alternative(&r, 0, r.n_words, 0, &o->fmt);
    const char *tr = json_string_value(json_object_get(alt, "transcript"));
    if (tr && *tr) buf_appendf(&text, "%s%s", text.len ? " " : "", tr);
    if (alt && o->paragraphs) json_object_set_new(alt, "paragraphs", paragraphs_json(&r, o));
    json_t *ch = json_pack("{s:[o]}", "alternatives", alt);
    if (ch && o->detect_language && o->info.multilingual && r.language[0]) {
      json_object_set_new(ch, "detected_language", json_string(r.language));
      json_object_set_new(ch, "language_confidence", json_real(r.language_prob));
    }
    if (ch && o->n_search) json_object_set_new(ch, "search", search_json(&r, o, 0));
    json_array_append_new(channels, ch);
    if (utts) utterances_json(&r, o, c, utts);
    stt_result_free(&r);
  }
  if (rc) {
    json_decref(channels);
    json_decref(utts);
    buf_free(&text);
    return rc;
  }
  char created[40], uuid[37];
  api_speech_rfc3339_now(created, sizeof created);
  dg_model_uuid(o->info.model, uuid);
  json_t *meta = json_pack("{s:s, s:s, s:s, s:s, s:f, s:i, s:[s], s:{s:o}}", "transaction_key", "deprecated",
                           "request_id", request_id, "sha256", sha, "created", created, "duration",
                           audio_pcm_seconds(pcm), "channels", n_ch, "models", uuid, "model_info", uuid,
                           dg_stt_model_info(&o->info));
  if (meta && o->n_tags) {
    json_t *tags = json_array();
    for (size_t i = 0; i < o->n_tags; i++) json_array_append_new(tags, json_string(o->tags[i]));
    json_object_set_new(meta, "tags", tags);
  }
  if (meta && o->n_extra) {
    json_t *extra = json_object();
    for (size_t i = 0; i < o->n_extra; i++) {
      const char *colon = strchr(o->extra[i], ':');
      if (!colon) continue;
      char key[128];
      snprintf(key, sizeof key, "%.*s", (int)(colon - o->extra[i] < 127 ? colon - o->extra[i] : 127), o->extra[i]);
      json_object_set_new(extra, key, json_string(colon + 1));
    }
    json_object_set_new(meta, "extra", extra);
  }
  json_t *results = json_pack("{s:o}", "channels", channels);
  if (results && utts) json_object_set(results, "utterances", utts);
  json_decref(utts);
  if (meta && results && dg_intel_any(&o->intel)) {
    /* on the transcript (channels joined in order); a failure is a warning */
    const char *failed;
    const dg_intel *in = &o->intel;
    const char *feat = in->summarize ? "summarize" : in->topics ? "topics" : in->intents ? "intents" : "sentiment";
    if (text.len) dg_intel_run(mgr, in, text.data, DG_SUMMARY_V2, results, meta, o->warnings, &failed);
    else dg_warn(o->warnings, feat, "unsupported_value", "no words were transcribed, so there is no text to analyse");
  }
  buf_free(&text);
  if (meta && json_array_size(o->warnings)) json_object_set(meta, "warnings", o->warnings);
  *out = json_pack("{s:o, s:o}", "metadata", meta, "results", results);
  return *out ? 0 : err_set(ERR_NOMEM, "building the response");
}

/* ---- the handler ---------------------------------------------------------- */

static bool is_json_type(const char *ct) {
  if (!ct) return false;
  while (*ct == ' ') ct++;
  return strncasecmp(ct, "application/json", 16) == 0;
}

/* A JSON body must be {"url": "..."}: the audio is fetched when the host is
 * allowed (--fetch-hosts). Answers the error itself; on success *bytes
 * holds the fetched audio (replacing the JSON body). */
static int listen_url(http_req *req, const api_speech *sp, uint8_t **bytes, size_t *len) {
  json_t *v = NULL;
  if (api_json_decode_object((const char *)*bytes, *len, &v)) {
    dg_bad_request(req, NULL, "the JSON body is not valid: %s", err_detail());
    return ERR_INVALID;
  }
  const char *url = NULL;
  int rc = api_json_str(v, "", "url", true, &url);
  if (rc) {
    dg_bad_request(req, "url", "a JSON body must be {\"url\": \"...\"}: %s", err_detail());
  } else if ((rc = dg_url_check(api_speech_fetch_hosts(sp), url, "url"))) {
    dg_bad_request(req, "url", "%s", err_detail());
  } else {
    uint8_t *fetched = NULL;
    size_t n = 0;
    if ((rc = dg_fetch(api_speech_fetch_hosts(sp), url, api_speech_fetch_max(sp), &fetched, &n))) {
      dg_bad_request(req, "url", "%s", err_detail());
    } else {
      free(*bytes);
      *bytes = fetched;
      *len = n;
    }
  }
  json_decref(v);
  return rc;
}

/* A request in flight on a worker thread: with s, a synchronous one whose
 * 200 has been started (the handler decoded the audio and took the decoder
 * for channel 0, so every client error and "busy" were answered first);
 * without s, an asynchronous one whose result goes to the callback URL. */
typedef struct cb_job {
  api_speech *sp;
  stt *stt;
  stt_stream *first;
  http_stream *s;
  listen_opts o;
  audio_pcm pcm;
  char request_id[37], sha[65];
} cb_job;

static void *listen_main(void *arg) {
  cb_job *j = arg;
  json_t *resp = NULL;
  int rc = listen_run(j->stt, &j->first, api_speech_manager(j->sp), &j->o, &j->pcm, j->request_id, j->sha, &resp);
  if (j->first) stt_stream_free(j->first);
  if (j->s) { /* synchronous: the body of the response already started */
    char *d = NULL;
    if (rc) LOG_WARN("deepgram", "request %s failed after the response started: %s", j->request_id, err_detail());
    else d = api_speech_json_dumps(resp);
    if (!d) {
      json_decref(resp);
      resp = json_pack("{s:s, s:s, s:s}", "err_code", "INTERNAL_SERVER_ERROR", "err_msg", err_detail(),
                       "request_id", j->request_id);
      d = resp ? api_speech_json_dumps(resp) : NULL;
    }
    if (d) http_stream_write(j->s, d, strlen(d));
    free(d);
    http_stream_close(j->s);
    goto done;
  }
  if (rc) {
    /* the callback still learns what happened, in the error shape */
    resp = json_pack("{s:s, s:s, s:s}", "err_code", "INTERNAL_SERVER_ERROR", "err_msg", err_detail(), "request_id",
                     j->request_id);
  }
  char *body = resp ? api_speech_json_dumps(resp) : NULL;
  if (body && dg_post_json(api_speech_fetch_hosts(j->sp), j->o.callback, j->o.callback_method, body))
    LOG_WARN("deepgram", "request %s: %s", j->request_id, err_detail());
  free(body);
done:
  json_decref(resp);
  audio_pcm_free(&j->pcm);
  listen_opts_free(&j->o);
  api_speech *sp = j->sp;
  free(j);
  api_speech_job_done(sp);
  return NULL;
}

void dg_listen_post(http_req *req, void *ctx) {
  api_speech *sp = ctx;
  listen_opts o;
  if (listen_parse(req, sp, &o)) {
    listen_opts_free(&o);
    return;
  }
  uint64_t size = 0;
  const char *path = http_req_body_file(req, &size);
  uint8_t *bytes = NULL;
  size_t len = 0;
  int rc = path ? api_speech_read_file(path, UINT64_MAX, &bytes, &len) : 0;
  if (rc) {
    api_error_last(req, rc, NULL);
    goto out;
  }
  if (is_json_type(http_req_header(req, "Content-Type")) && listen_url(req, sp, &bytes, &len)) goto out;
  if (len == 0) {
    dg_bad_request(req, NULL, "the request body is empty: send the audio bytes (or JSON {\"url\": ...})");
    goto out;
  }
  stt *s = o.stt;
  audio_decode_opts d = {.hint = http_req_header(req, "Content-Type"), .raw = o.raw, .raw_rate = (int)o.sample_rate,
                         .raw_channels = (int)o.channels, .target_rate = stt_sample_rate(s),
                         .target_channels = o.multichannel ? 0 : 1, .split_channels = o.multichannel,
                         .fmt = AUDIO_SAMPLE_S16};
  audio_pcm pcm = {0};
  rc = api_speech_decode(sp, bytes, len, &d, &pcm);
  if (rc) {
    char msg[512];
    snprintf(msg, sizeof msg, "failed to process audio: %s", err_detail());
    api_error(req, api_speech_decode_status(rc), rc, msg, NULL);
    audio_pcm_free(&pcm);
    goto out;
  }
  char request_id[37], sha[65];
  dg_request_uuid(req, request_id);
  api_speech_sha256_hex(bytes, len, sha);
  cb_job *j = calloc(1, sizeof *j);
  if (!j) {
    audio_pcm_free(&pcm);
    api_error(req, 500, ERR_NOMEM, "starting the request", NULL);
    goto out;
  }
  j->sp = sp;
  j->stt = s;
  j->pcm = pcm;
  memcpy(j->request_id, request_id, sizeof request_id);
  memcpy(j->sha, sha, sizeof sha);
  if (!o.callback) {
    /* take the decoder here, so all decoders busy is still a 429 */
    if ((rc = stt_stream_begin(s, &j->first))) {
      api_error_last(req, rc, NULL);
      goto fail_job;
    }
    if (!(j->s = http_stream_open(req, 200, "application/json", HTTP_STREAM_RAW))) {
      api_error(req, 500, ERR_INTERNAL, "cannot open the response stream", NULL);
      goto fail_job;
    }
  }
  j->o = o;
  memset(&o, 0, sizeof o); /* moved into the job */
  /* Once the thread runs, j is its own (it frees j when done, maybe before
   * api_speech_spawn returns here): nothing below reads j after a spawn. */
  bool streaming = j->s != NULL;
  if (api_speech_spawn(sp, listen_main, j)) {
    if (j->s) {
      http_stream_close(j->s);
    } else {
      api_error_last(req, ERR_NOMEM, NULL);
    }
    listen_opts_free(&j->o);
    goto fail_job;
  }
  if (!streaming) {
    json_t *accepted = json_pack("{s:s}", "request_id", request_id);
    api_speech_respond_json(req, 200, accepted);
    json_decref(accepted);
  }
  goto out;
fail_job:
  if (j->first) stt_stream_free(j->first);
  audio_pcm_free(&j->pcm);
  free(j);
out:
  free(bytes);
  listen_opts_free(&o);
}
