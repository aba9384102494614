/*
 * speech_svc.c - the shared speech service of the adapters (see
 * speech_svc.h): lazy engines, producer threads, hashing and transcript
 * shaping helpers.
 *
 * Start reading at api_speech_tts(). SHA-256 and base64 come from libavutil
 * (already linked for audio/), so nothing here re-implements them.
 */
#include "api/speech_svc.h"

#include <ctype.h>
#include <errno.h>
#include <libavutil/base64.h>
#include <libavutil/mem.h>
#include <libavutil/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "speech/speech_worker.h"
#include "speech/whisper_file.h"

struct api_speech {
  pthread_mutex_t mu;
  /* The engines run in worker processes (speech/speech_worker.h): one pool
   * each for synthesis, recognition and decoding of client audio, so a
   * live session holding a recognizer never blocks a synthesis. */
  wpool *tts_pool, *stt_pool, *dec_pool;
  speech_limits lim;
  tts *tts;
  int tts_rc;               /* remembered failure (0 = not tried or fine) */
  char tts_err[256];
  /* The installed STT models (stt_models_scan), the default first; each
   * opened on first use: a Whisper file as an engine in this process (one
   * pool of decoding states for every front end on it), pocketsphinx in
   * the recognition workers. */
  stt_model_info *models;
  size_t n_models;
  struct stt_slot {
    whisper_engine *eng;
    stt *stt;
    int rc;                 /* remembered failure */
    char err[512];
  } *stt_slots;             /* [n_models] */
  int stt_threads;          /* threads of one Whisper transcription */
  int stt_beam_size;        /* of Whisper's temperature-0 attempts; 0/1 = greedy */
  _Atomic int n_jobs;       /* producer threads alive */
  char *fetch_hosts;        /* allow list for outbound requests; never NULL */
  uint64_t fetch_max;
  struct manager *mgr;      /* language models, for Deepgram /read; borrowed */
};

int api_speech_new(api_speech **out, const api_speech_config *cfg) {
  *out = NULL;
  api_speech *sp = calloc(1, sizeof *sp);
  if (!sp) return err_set(ERR_NOMEM, "speech service");
  pthread_mutex_init(&sp->mu, NULL);
  sp->fetch_hosts = str_dup("");
  sp->fetch_max = 512u << 20;
  api_speech_config c = cfg ? *cfg : (api_speech_config){0};
  sp->lim = (speech_limits){.call_ms = c.call_ms};
  sp->stt_threads = c.stt_threads;
  sp->stt_beam_size = c.stt_beam_size;
  int src = stt_models_scan(c.models_dir, c.stt_model, &sp->models, &sp->n_models);
  if (!src && c.stt_model && *c.stt_model) {
    /* a named file is checked now: a bad one stops the server with its reason */
    whisper_file *wf = NULL;
    src = whisper_file_open(c.stt_model, &wf);
    if (src) src = err_set(src, "--stt-model %s: %s", c.stt_model, err_detail());
    whisper_file_close(wf);
  }
  if (!src && !(sp->stt_slots = calloc(sp->n_models, sizeof *sp->stt_slots))) src = err_set(ERR_NOMEM, "speech service");
  if (src) {
    api_speech_free(sp);
    return src;
  }
  static const char *const args[] = {SPEECH_WORKER_ARG0, SPEECH_WORKER_ARG1, NULL};
  wpool_config tc = {.name = "text-to-speech", .exe = c.worker_exe, .args = args, .n_max = c.n_workers > 0 ? c.n_workers : 4};
  wpool_config sc = tc, dc = tc;
  sc.name = "speech-to-text";
  dc.name = "audio decoding";
  int rc = sp->fetch_hosts ? 0 : err_set(ERR_NOMEM, "speech service");
  if (!rc) rc = wpool_new(&sp->tts_pool, &tc);
  if (!rc) rc = wpool_new(&sp->stt_pool, &sc);
  if (!rc) rc = wpool_new(&sp->dec_pool, &dc);
  if (rc) {
    api_speech_free(sp);
    return rc;
  }
  *out = sp;
  return 0;
}

void api_speech_free(api_speech *sp) {
  if (!sp) return;
  for (int waited = 0; sp->n_jobs > 0 && waited < 5000; waited += 10) usleep(10000);
  if (sp->n_jobs > 0) {
    /* A producer is still inside an engine: leaking beats a use after free. */
    LOG_WARN("speech", "%d speech stream(s) still running at shutdown; engines left open", (int)sp->n_jobs);
    return;
  }
  if (sp->tts) tts_close(sp->tts);
  for (size_t i = 0; sp->stt_slots && i < sp->n_models; i++) {
    stt_close(sp->stt_slots[i].stt);
    whisper_engine_close(sp->stt_slots[i].eng);
  }
  free(sp->stt_slots);
  stt_models_free(sp->models, sp->n_models);
  wpool_free(sp->tts_pool);
  wpool_free(sp->stt_pool);
  wpool_free(sp->dec_pool);
  pthread_mutex_destroy(&sp->mu);
  free(sp->fetch_hosts);
  free(sp);
}

/* A worker that died or timed out while opening says nothing about the
 * engines: such a failure is not remembered, the next request tries again. */
static bool transient(int rc) { return rc == ERR_WORKER || rc == ERR_TIMEOUT || rc == ERR_OVERLOADED; }

int api_speech_open_tts(api_speech *sp, tts **out) { return tts_open_remote(out, sp->tts_pool, &sp->lim); }

/* Opens model i's engine (caller holds mu); 0, or the failure, remembered. */
static int stt_slot_open(api_speech *sp, size_t i) {
  struct stt_slot *sl = &sp->stt_slots[i];
  const stt_model_info *m = &sp->models[i];
  if (sl->stt || sl->rc) return sl->rc ? err_set(ERR_UNAVAILABLE, "%s", sl->err) : 0;
  int rc;
  if (m->path) {
    whisper_engine_config wc = {.path = m->path, .name = m->name, .n_threads = sp->stt_threads,
                              .beam_size = sp->stt_beam_size};
    rc = whisper_engine_open(&wc, &sl->eng);
    if (!rc) rc = stt_open_whisper(&sl->stt, sl->eng, NULL);
  } else {
    rc = stt_open_remote(&sl->stt, NULL, sp->stt_pool, &sp->lim);
  }
  if (rc) {
    if (transient(rc)) return rc;
    sl->rc = rc;
    snprintf(sl->err, sizeof sl->err, "speech to text is unavailable: %s (install %s)", err_detail(),
             m->path ? "a working whisper.cpp model file" : "pocketsphinx-en-us");
    LOG_WARN("speech", "%s", sl->err);
    return err_set(ERR_UNAVAILABLE, "%s", sl->err);
  }
  LOG_INFO("speech", "speech to text: %s (%s)", m->name, m->path ? m->path : m->backend);
  return 0;
}

/* Index of the model a request names: an installed model's name, else the
 * default (vendor names such as whisper-1, gpt-4o-transcribe, nova-3 and
 * anything else). The default is the first model that opens. */
static int stt_pick(api_speech *sp, const char *name, size_t *at) {
  for (size_t i = 0; name && i < sp->n_models; i++)
    if (strcasecmp(sp->models[i].name, name) == 0 ||
        (!strcasecmp(name, "pocketsphinx") && !strcmp(sp->models[i].backend, "pocketsphinx"))) {
      *at = i;
      return stt_slot_open(sp, i);
    }
  int rc = ERR_UNAVAILABLE;
  for (size_t i = 0; i < sp->n_models; i++) {
    *at = i;
    if (!(rc = stt_slot_open(sp, i)) || transient(rc)) return rc;
  }
  return rc;
}

int api_speech_open_stt(api_speech *sp, const stt_config *cfg, stt **out) {
  *out = NULL;
  pthread_mutex_lock(&sp->mu);
  size_t i = 0;
  int rc = stt_pick(sp, NULL, &i);
  whisper_engine *e = rc ? NULL : sp->stt_slots[i].eng;
  pthread_mutex_unlock(&sp->mu);
  if (rc) return rc;
  /* a Whisper engine is shared: the caller's front end draws on its pool */
  return e ? stt_open_whisper(out, e, cfg) : stt_open_remote(out, cfg, sp->stt_pool, &sp->lim);
}

size_t api_speech_stt_models(const api_speech *sp, const stt_model_info **out) {
  *out = sp->models;
  return sp->n_models;
}

int api_speech_decode(api_speech *sp, const void *bytes, size_t len, const audio_decode_opts *opts, audio_pcm *out) {
  return speech_decode_remote(sp->dec_pool, &sp->lim, bytes, len, opts, out);
}

/* The head's samples: one rate (a voice has one), bounded like a whole
 * synthesis (an hour at 48 kHz). */
static int head_collect(void *user, const int16_t *pcm, size_t n, int rate) {
  api_speech_head *h = user;
  (void)rate;
  if (h->pcm.len / 2 + n > (size_t)3600 * 48000) return 1;
  return buf_append(&h->pcm, pcm, n * sizeof *pcm) ? 1 : 0;
}

int api_speech_head_synth(tts *t, const tts_choice *c, const char *text, double speed, api_speech_head *h) {
  *h = (api_speech_head){.pcm = BUF_INIT};
  size_t n = tts_first_sentence(text);
  char *first = malloc(n + 1);
  if (!first) return err_set(ERR_NOMEM, "tts: %zu bytes", n);
  memcpy(first, text, n);
  first[n] = '\0';
  int rc = tts_synthesize(t, c, first, speed, head_collect, h);
  free(first);
  if (rc == ERR_CANCELLED) rc = err_set(ERR_TOO_LARGE, "tts: the first sentence's audio is longer than an hour");
  if (rc) {
    api_speech_head_free(h);
    return rc;
  }
  h->rest = n;
  return 0;
}

int api_speech_head_play(api_speech_head *h, tts *t, const tts_choice *c, const char *text, double speed,
                         tts_pcm_fn fn, void *user) {
  int rc = 0;
  if (h->pcm.len && fn(user, (const int16_t *)(const void *)h->pcm.data, h->pcm.len / 2, c->voice->sample_rate))
    rc = err_set(ERR_CANCELLED, "tts: stopped");
  size_t rest = h->rest;
  api_speech_head_free(h);
  if (!rc && text[rest]) rc = tts_synthesize(t, c, text + rest, speed, fn, user);
  return rc;
}

void api_speech_head_free(api_speech_head *h) {
  buf_free(&h->pcm);
  h->rest = 0;
}

int api_speech_set_fetch(api_speech *sp, const char *hosts, uint64_t max_bytes) {
  char *h = str_dup(hosts ? hosts : "");
  if (!h) return err_set(ERR_NOMEM, "fetch hosts");
  free(sp->fetch_hosts);
  sp->fetch_hosts = h;
  if (max_bytes) sp->fetch_max = max_bytes;
  return 0;
}

const char *api_speech_fetch_hosts(const api_speech *sp) { return sp->fetch_hosts; }
void api_speech_set_manager(api_speech *sp, struct manager *mgr) { sp->mgr = mgr; }
struct manager *api_speech_manager(const api_speech *sp) { return sp->mgr; }
uint64_t api_speech_fetch_max(const api_speech *sp) { return sp->fetch_max; }

int api_speech_tts(api_speech *sp, tts **out) {
  pthread_mutex_lock(&sp->mu);
  int rc = 0;
  if (!sp->tts && !sp->tts_rc) {
    rc = tts_open_remote(&sp->tts, sp->tts_pool, &sp->lim);
    if (rc && transient(rc)) {
      pthread_mutex_unlock(&sp->mu);
      *out = NULL;
      return rc;
    }
    if (rc) {
      sp->tts_rc = rc;
      snprintf(sp->tts_err, sizeof sp->tts_err, "text to speech is unavailable: %s", err_detail());
      LOG_WARN("speech", "%s", sp->tts_err);
    }
  }
  if (sp->tts_rc) rc = err_set(ERR_UNAVAILABLE, "%s", sp->tts_err);
  *out = sp->tts;
  pthread_mutex_unlock(&sp->mu);
  return rc;
}

int api_speech_stt_named(api_speech *sp, const char *model, stt **out) {
  pthread_mutex_lock(&sp->mu);
  size_t i = 0;
  int rc = stt_pick(sp, model, &i);
  *out = rc ? NULL : sp->stt_slots[i].stt;
  pthread_mutex_unlock(&sp->mu);
  return rc;
}

int api_speech_stt(api_speech *sp, stt **out) { return api_speech_stt_named(sp, NULL, out); }

int api_speech_spawn(api_speech *sp, void *(*fn)(void *), void *arg) {
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  sp->n_jobs++;
  int e = pthread_create(&t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  if (e) {
    sp->n_jobs--;
    return err_set(ERR_NOMEM, "cannot start a speech thread: %s", strerror(e));
  }
  return 0;
}

void api_speech_job_done(api_speech *sp) { sp->n_jobs--; }

int api_speech_decode_status(int rc) {
  switch (rc) {
    case ERR_PARSE: case ERR_UNSUPPORTED: case ERR_INVALID: case ERR_CORRUPT: case ERR_RANGE: case ERR_TYPE:
      return 400;
    case ERR_TOO_LARGE: return 413;
    case ERR_TIMEOUT: return 504;       /* the decoding worker passed its time limit */
    case ERR_OVERLOADED: return 429;    /* every decoding worker is busy */
    case ERR_NOMEM: case ERR_IO: case ERR_WORKER: default: return 500;
  }
}

int api_speech_read_file(const char *path, uint64_t max, uint8_t **out, size_t *len) {
  *out = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return err_set(ERR_IO, "cannot open the uploaded body: %s", strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || (uint64_t)st.st_size > max) {
    fclose(f);
    return err_set(ERR_TOO_LARGE, "the uploaded body is larger than %llu bytes", (unsigned long long)max);
  }
  size_t n = (size_t)st.st_size;
  uint8_t *b = malloc(n ? n : 1);
  if (!b) {
    fclose(f);
    return err_set(ERR_NOMEM, "reading %zu bytes of upload", n);
  }
  if (n && fread(b, 1, n, f) != n) {
    free(b);
    fclose(f);
    return err_set(ERR_IO, "reading the uploaded body failed");
  }
  fclose(f);
  *out = b;
  *len = n;
  return 0;
}

void api_speech_sha256_hex(const void *data, size_t len, char out[65]) {
  uint8_t d[32] = {0};
  struct AVSHA *ctx = av_sha_alloc();
  if (ctx && av_sha_init(ctx, 256) == 0) {
    av_sha_update(ctx, data, len);
    av_sha_final(ctx, d);
  }
  av_free(ctx);
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

void api_speech_name_uuid(const char *name, char out[37]) {
  char hex[65];
  size_t n = strlen(name);
  char *s = malloc(n + 8);
  if (s) {
    memcpy(s, "parley:", 7);
    memcpy(s + 7, name, n + 1);
    api_speech_sha256_hex(s, n + 7, hex);
    free(s);
  } else {
    api_speech_sha256_hex(name, n, hex);
  }
  hex[12] = '5';                                    /* version 5 layout */
  int v16 = hex[16] <= '9' ? hex[16] - '0' : hex[16] - 'a' + 10;
  hex[16] = "89ab"[v16 & 3];                        /* RFC 4122 variant */
  size_t o = 0;
  for (size_t i = 0; i < 32; i++) {
    if (i == 8 || i == 12 || i == 16 || i == 20) out[o++] = '-';
    out[o++] = hex[i];
  }
  out[o] = '\0';
}

char *api_speech_base64(const void *data, size_t len) {
  if (len > (size_t)(INT32_MAX / 4 * 3 - 4)) return NULL;
  size_t cap = AV_BASE64_SIZE(len);
  char *s = malloc(cap);
  if (!s) return NULL;
  if (!av_base64_encode(s, (int)cap, data, (int)len)) {
    free(s);
    return NULL;
  }
  return s;
}

void api_speech_rfc3339_now(char *out, size_t cap) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char base[24];
  strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, cap, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

char *api_speech_json_dumps(const json_t *v) {
  return json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
}

int api_speech_respond_json(http_req *req, int status, const json_t *v) {
  char *s = api_speech_json_dumps(v);
  if (!s) {
    static const char fallback[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}";
    return http_respond(req, 500, "application/json", fallback, sizeof fallback - 1);
  }
  int rc = http_respond(req, status, "application/json", s, strlen(s));
  free(s);
  return rc;
}

int api_speech_sse_json(http_stream *s, json_t *v) {
  char *d = v ? api_speech_json_dumps(v) : NULL;
  int rc = d ? http_stream_sse(s, NULL, d, strlen(d)) : ERR_NOMEM;
  free(d);
  json_decref(v);
  return rc;
}

/* ---- transcript shaping ---- */

int api_speech_spans(const stt_result *r, double gap_s, double max_s, api_span **out) {
  *out = NULL;
  if (!r->n_words) return 0;
  api_span *v = calloc(r->n_words, sizeof *v);
  if (!v) return err_set(ERR_NOMEM, "sentences");
  size_t n = 0;
  for (size_t i = 0; i < r->n_words; i++) {
    const stt_word *w = &r->words[i];
    bool split = n == 0 || w->start - r->words[i - 1].end >= gap_s || w->end - v[n - 1].start > max_s;
    if (split) {
      v[n].first = i;
      v[n].n = 0;
      v[n].start = w->start;
      n++;
    }
    v[n - 1].n++;
    v[n - 1].end = w->end;
  }
  *out = v;
  return (int)n;
}

static bool in_list(const char *w, const char *const *list) {
  for (; *list; list++)
    if (strcmp(w, *list) == 0) return true;
  return false;
}

char api_speech_sentence_end(const stt_word *w, size_t n) {
  static const char *const WH[] = {"what", "where", "who", "whom", "whose", "why", "how", "which", NULL};
  static const char *const AUX[] = {"is",     "are",    "was",      "were",  "am",     "do",     "does",
                                    "did",    "can",    "could",    "will",  "would",  "should", "shall",
                                    "may",    "might",  "have",     "has",   "had",    "isn't",  "aren't",
                                    "wasn't", "don't",  "doesn't",  "didn't", "can't", "won't",  "wouldn't",
                                    "couldn't", "shouldn't", "haven't", "hasn't", NULL};
  static const char *const SUBJ[] = {"i",    "you",   "he",   "she",    "it",     "we",      "they",     "there",
                                     "this", "that",  "these", "those", "the",    "a",       "an",       "my",
                                     "your", "his",   "her",  "our",    "their",  "anyone",  "anybody",  "someone",
                                     "somebody", "everyone", "anything", "something", NULL};
  if (n == 0) return '.';
  /* "how are you", "what time is it"; a lone "what" or "how" too */
  if (in_list(w[0].word, WH)) return '?';
  /* "do it now", "don't do that": an imperative, whose object looks like a subject */
  static const char *const DO[] = {"do", "don't", NULL}, *const OBJ[] = {"it", "this", "that", "these", "those", NULL};
  if (n >= 2 && in_list(w[0].word, DO) && in_list(w[1].word, OBJ)) return '.';
  if (n >= 2 && in_list(w[0].word, AUX) && in_list(w[1].word, SUBJ)) return '?';
  return '.';
}

void api_speech_punctuate(const char *word, bool first, char end, char *out, size_t cap) {
  snprintf(out, cap, "%s", word);
  size_t len = strlen(out);
  if (!len) return;
  /* "i" and its contractions are capitalised anywhere */
  bool is_i = (out[0] == 'i' && (out[1] == '\0' || out[1] == '\''));
  if ((first || is_i) && out[0] >= 'a' && out[0] <= 'z') out[0] = (char)toupper((unsigned char)out[0]);
  if (end && len + 1 < cap) {
    out[len] = end;
    out[len + 1] = '\0';
  }
}

int api_speech_span_text(const stt_result *r, const api_span *s, bool punct, buf *out) {
  char w[160];
  for (size_t k = 0; k < s->n; k++) {
    const char *word = r->words[s->first + k].word;
    if (punct)
      api_speech_punctuate(word, k == 0, k + 1 == s->n ? api_speech_sentence_end(&r->words[s->first], s->n) : 0, w,
                           sizeof w);
    else snprintf(w, sizeof w, "%s", word);
    int rc = buf_appendf(out, "%s%s", k ? " " : "", w);
    if (rc) return rc;
  }
  return 0;
}

void api_speech_timestamp(double t, char sep, char out[16]) {
  if (!(t >= 0)) t = 0;
  if (t > 359999.0) t = 359999.0; /* 99:59:59 */
  unsigned ms = (unsigned)(t * 1000.0 + 0.5);
  snprintf(out, 16, "%02u:%02u:%02u%c%03u", (ms / 3600000u) % 100u, (ms / 60000u) % 60u, (ms / 1000u) % 60u, sep,
           ms % 1000u);
}
