/*
 * stt_whisper.c - the Whisper speech-to-text backend: a whisper.cpp model
 * file on parley's kernels behind stt_backend_ops (speech.h).
 *
 * A whisper_engine holds what every transcription shares: the checked
 * file, the model's weights (whisper_model, immutable), the vocabulary and
 * its prompt tokenizer, the non-speech tokens Whisper suppresses; and a
 * pool of slots, each a decoding state with its own thread pool, made on
 * first use. A stream holds one slot from begin to free, so "all busy" is
 * known before a server answers (429). Any number of front ends
 * (stt_open_whisper) share one engine and so one pool.
 *
 * Unlike pocketsphinx this runs in the server's process: it is our own
 * code over a file whose every count and offset whisper_file_open checked,
 * and a worker process per transcription would hold its own copy of the
 * weights (hundreds of MB to GB).
 *
 * Whole-buffer transcription: the audio in 30 s windows (2 * n_audio_ctx
 * frames) with seeking (whisper_transcribe), each window's samples zero-
 * padded to the window, log-mel (whisper_mel) and encoded; segments become
 * the result's segments, their words the result's words (with the model's
 * casing and punctuation in `punctuated`, lower case without punctuation
 * in `word`). Incremental: feed collects samples; a partial re-decodes the
 * last window (greedy, no timestamps, the encoder over the frames there
 * are) when a second of audio has come since the last one; end
 * transcribes everything fed, as the whole-buffer path does.
 *
 * Start reading at run_transcription().
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "speech/speech.h"
#include "speech/whisper_decode.h"
#include "speech/whisper_file.h"
#include "speech/whisper_mel.h"
#include "speech/whisper_model.h"
#include "speech/whisper_transcribe.h"

#define MAX_NONSPEECH 512
#define PROMPT_MAX 1024        /* prompt tokens kept from the caller's text (the model keeps 223) */
#define PARTIAL_EVERY (WHISPER_SAMPLE_RATE) /* samples of new audio between two partial decodes */
#define STREAM_MAX_SAMPLES ((size_t)4 * 3600 * WHISPER_SAMPLE_RATE)

typedef struct wslot {
  whisper_state *st;      /* NULL until first used */
  thread_pool *tp;
  bool busy;
} wslot;

struct whisper_engine {
  char *name;             /* "whisper-base.en" */
  whisper_file *f;
  whisper_model *m;
  whisper_vocab v;
  whisper_tokenizer *tok;
  int32_t nonspeech[MAX_NONSPEECH];
  int n_nonspeech;
  int n_threads;
  int beam_size;          /* of temperature-0 attempts; 0/1 = greedy */
  pthread_mutex_t mu;
  pthread_cond_t freed;
  wslot *slots;           /* [n_slots] */
  int n_slots;
};

/* A front end's context: the engine (borrowed) and its waiting rule. */
typedef struct wctx {
  whisper_engine *e;
  int wait_ms;
} wctx;

typedef struct wstream {
  wctx *c;
  int slot;
  stt_options o;          /* language and prompt copied below */
  char lang[16];
  char *prompt;
  buf pcm;                /* int16 samples fed */
  char *partial;          /* last partial text (malloc'd) */
  size_t partial_at;      /* samples when it was decoded */
} wstream;

static const char *token_text(void *ctx, int32_t tok, size_t *len) {
  const whisper_file *f = ctx;
  if (tok < 0 || (size_t)tok >= whisper_file_n_tokens(f)) return NULL;
  return whisper_file_token(f, (size_t)tok, len);
}

/* "ggml-base.en.bin" -> "whisper-base.en"; any other file name: its stem. */
static char *name_from_path(const char *path) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  size_t n = strlen(b);
  if (n > 4 && strcasecmp(b + n - 4, ".bin") == 0) n -= 4;
  if (n > 5 && strncmp(b, "ggml-", 5) == 0) b += 5, n -= 5;
  char *s = malloc(n + 9);
  if (s) snprintf(s, n + 9, "whisper-%.*s", (int)n, b);
  return s;
}

int whisper_engine_open(const whisper_engine_config *cfg, whisper_engine **out) {
  *out = NULL;
  whisper_engine *e = calloc(1, sizeof *e);
  if (!e) return err_set(ERR_NOMEM, "whisper engine");
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->freed, NULL);
  e->n_slots = cfg->n_states > 0 ? cfg->n_states : 2;
  e->n_threads = cfg->n_threads > 0 ? cfg->n_threads : 2;
  e->beam_size = cfg->beam_size;
  e->name = cfg->name ? str_dup(cfg->name) : name_from_path(cfg->path);
  e->slots = calloc((size_t)e->n_slots, sizeof *e->slots);
  int rc = e->name && e->slots ? 0 : err_set(ERR_NOMEM, "whisper engine");
  if (!rc) rc = whisper_file_open(cfg->path, &e->f);
  if (!rc) rc = whisper_vocab_init(whisper_file_hparams(e->f)->n_vocab, token_text, e->f, &e->v);
  if (!rc) rc = whisper_model_new(e->f, &e->m);
  if (!rc) rc = whisper_tokenizer_new(&e->v, &e->tok);
  if (!rc) e->n_nonspeech = whisper_nonspeech_tokens(&e->v, e->nonspeech, MAX_NONSPEECH);
  if (rc) {
    char detail[512];
    snprintf(detail, sizeof detail, "%s", err_detail());
    whisper_engine_close(e);
    return err_set(rc, "whisper model %s: %s", cfg->path, detail);
  }
  *out = e;
  return 0;
}

void whisper_engine_close(whisper_engine *e) {
  if (!e) return;
  for (int i = 0; e->slots && i < e->n_slots; i++) {
    whisper_state_free(e->slots[i].st);
    tpool_free(e->slots[i].tp);
  }
  free(e->slots);
  whisper_tokenizer_free(e->tok);
  whisper_model_free(e->m);
  whisper_file_close(e->f);
  pthread_cond_destroy(&e->freed);
  pthread_mutex_destroy(&e->mu);
  free(e->name);
  free(e);
}

int whisper_engine_context(whisper_engine *e, const stt_config *cfg, void **ctx) {
  wctx *c = calloc(1, sizeof *c);
  if (!c) return err_set(ERR_NOMEM, "stt: handle");
  c->e = e;
  c->wait_ms = cfg && cfg->wait_ms > 0 ? cfg->wait_ms : 30000;
  *ctx = c;
  return 0;
}

static void w_close(void *ctx) { free(ctx); }

static void w_info(void *ctx, stt_info *out) {
  const whisper_engine *e = ((wctx *)ctx)->e;
  *out = (stt_info){.backend = "whisper", .model = e->name, .multilingual = e->v.multilingual,
                    .translates = e->v.multilingual, .prompts = true, .punctuates = true};
}

/* ---- the slot pool ---------------------------------------------------------- */

/* Takes a free slot (waiting up to wait_ms), making its state on first use. */
static int take_slot(wctx *c, int *slot) {
  whisper_engine *e = c->e;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += c->wait_ms / 1000;
  until.tv_nsec += (long)(c->wait_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&e->mu);
  int got = -1;
  for (;;) {
    for (int i = 0; i < e->n_slots && got < 0; i++)
      if (!e->slots[i].busy) got = i;
    if (got >= 0) break;
    if (pthread_cond_timedwait(&e->freed, &e->mu, &until) == ETIMEDOUT) break;
  }
  if (got >= 0) e->slots[got].busy = true;
  pthread_mutex_unlock(&e->mu);
  if (got < 0)
    return err_set(ERR_OVERLOADED, "stt: all %d Whisper decoders stayed busy for %d ms", e->n_slots, c->wait_ms);
  wslot *s = &e->slots[got];
  int rc = 0;
  if (!s->tp && e->n_threads > 1) rc = tpool_new(e->n_threads, &s->tp);
  if (!rc && !s->st) rc = whisper_state_new(e->m, s->tp, &s->st);
  if (rc) {
    pthread_mutex_lock(&e->mu);
    s->busy = false;
    pthread_cond_signal(&e->freed);
    pthread_mutex_unlock(&e->mu);
    return rc;
  }
  *slot = got;
  return 0;
}

static void give_slot(whisper_engine *e, int slot) {
  pthread_mutex_lock(&e->mu);
  e->slots[slot].busy = false;
  pthread_cond_signal(&e->freed);
  pthread_mutex_unlock(&e->mu);
}

/* ---- one transcription -------------------------------------------------------- */

/* The window callback's context: the samples and the state to encode into. */
typedef struct wrun {
  whisper_engine *e;
  whisper_state *st;
  const int16_t *pcm;
  size_t n;
  float *samples;         /* [window_frames * HOP] */
  float *mel;             /* [n_mels][window_frames] */
  int64_t window_frames;
  bool exact_frames;      /* encode only the frames there are (partials) */
} wrun;

static int encode_window(void *ctx, int64_t seek, int64_t n_frames) {
  wrun *w = ctx;
  const whisper_hparams *hp = whisper_model_hparams(w->e->m);
  size_t len = (size_t)w->window_frames * WHISPER_HOP, from = (size_t)seek * WHISPER_HOP;
  for (size_t i = 0; i < len; i++) w->samples[i] = from + i < w->n ? (float)w->pcm[from + i] / 32768.0f : 0.0f;
  int rc = whisper_mel(w->samples, len, whisper_file_mel_filters(w->e->f), hp->n_mels, w->mel);
  if (rc) return rc;
  int64_t frames = w->window_frames;
  if (w->exact_frames) {
    /* the mel is [n_mels][window_frames]: move the first n_frames of each row together */
    frames = n_frames + (n_frames & 1);
    if (frames > w->window_frames) frames = w->window_frames;
    for (int b = 1; b < hp->n_mels; b++)
      memmove(w->mel + (size_t)b * (size_t)frames, w->mel + (size_t)b * (size_t)w->window_frames,
              (size_t)frames * sizeof *w->mel);
  }
  return whisper_encode(w->st, w->mel, frames);
}

/* The model's logits for whisper_transcribe, whose callbacks share ctx. */
static int run_logits(void *ctx, const int32_t *toks, int n, int n_past, float *logits, bool all) {
  return whisper_state_logits(((wrun *)ctx)->st, toks, n, n_past, logits, all);
}

/* The decoding options of stream s. */
static int stream_decode_opts(wstream *s, whisper_decode_opts *o, int32_t *prompt, int *n_prompt) {
  whisper_engine *e = s->c->e;
  const whisper_hparams *hp = whisper_model_hparams(e->m);
  *o = whisper_decode_defaults();
  o->task = s->o.translate ? WHISPER_TASK_TRANSLATE : WHISPER_TASK_TRANSCRIBE;
  o->lang = e->v.multilingual ? -1 : 0;
  if (s->lang[0] && e->v.multilingual) o->lang = whisper_lang_index(s->lang);
  o->suppress = e->nonspeech;
  o->n_suppress = e->n_nonspeech;
  o->n_text_ctx = hp->n_text_ctx;
  o->max_tokens = hp->n_text_ctx / 2;
  o->beam_size = e->beam_size;
  if (s->o.temperature > 0) {
    o->temps[0] = (float)s->o.temperature;
    o->n_temps = 1;
  }
  *n_prompt = 0;
  if (s->prompt && *s->prompt) {
    /* Whisper encodes " " + the stripped prompt */
    size_t l = strlen(s->prompt);
    char *p = malloc(l + 2);
    if (!p) return err_set(ERR_NOMEM, "stt: prompt");
    p[0] = ' ';
    const char *b = s->prompt;
    while (*b == ' ' || *b == '\n' || *b == '\t') b++;
    snprintf(p + 1, l + 1, "%s", b);
    for (size_t k = strlen(p); k > 1 && (p[k - 1] == ' ' || p[k - 1] == '\n' || p[k - 1] == '\t'); k--) p[k - 1] = 0;
    int rc = whisper_tokenize(e->tok, p, prompt, PROMPT_MAX, n_prompt);
    free(p);
    if (rc == ERR_TOO_LARGE) rc = 0, *n_prompt = PROMPT_MAX; /* the model keeps the last part anyway */
    if (rc) return rc;
    o->prompt = prompt;
    o->n_prompt = *n_prompt;
  }
  return 0;
}

/* Lower case without the punctuation around it ("Hello," -> "hello");
 * apostrophes inside a word stay ("don't"). malloc'd. */
static char *plain_word(const char *w) {
  size_t n = strlen(w);
  size_t a = 0, b = n;
  while (a < b && (unsigned char)w[a] < 0x80 && ispunct((unsigned char)w[a])) a++;
  while (b > a && (unsigned char)w[b - 1] < 0x80 && ispunct((unsigned char)w[b - 1])) b--;
  char *s = str_ndup(w + a, b - a);
  for (char *p = s; p && *p; p++)
    if ((unsigned char)*p < 0x80) *p = (char)tolower((unsigned char)*p);
  return s;
}

/* Text with leading and trailing blanks removed, in place. */
static char *trim(char *s) {
  if (!s) return s;
  size_t a = 0, n = strlen(s);
  while (s[a] == ' ') a++;
  while (n > a && (s[n - 1] == ' ' || s[n - 1] == '\n')) n--;
  memmove(s, s + a, n - a);
  s[n - a] = 0;
  return s;
}

/* The stt_result of transcript t. */
static int build_result(whisper_engine *e, const whisper_transcript *t, stt_result *out) {
  int rc = 0;
  buf all = BUF_INIT;
  double conf_sum = 0;
  if (t->n_segs) {
    out->segments = calloc((size_t)t->n_segs, sizeof *out->segments);
    if (!out->segments) return err_set(ERR_NOMEM, "stt: result");
  }
  for (int i = 0; !rc && i < t->n_segs; i++) {
    const whisper_segment *ws = &t->segs[i];
    stt_segment *ss = &out->segments[out->n_segments++];
    /* the temperature is a float in the decoder: 0.2f, not 0.200000003 */
    *ss = (stt_segment){.start = ws->start, .end = ws->end, .seek = ws->seek,
                        .temperature = round((double)ws->temperature * 1e6) / 1e6,
                        .avg_logprob = ws->avg_logprob, .compression_ratio = ws->compression_ratio,
                        .no_speech_prob = ws->no_speech_prob, .first_word = out->n_words};
    char *raw = whisper_tokens_text(&e->v, ws->tokens, ws->n_tokens);
    ss->tokens = malloc((size_t)(ws->n_tokens ? ws->n_tokens : 1) * sizeof *ss->tokens);
    if (!raw || !ss->tokens) {
      free(raw);
      rc = err_set(ERR_NOMEM, "stt: result");
      break;
    }
    memcpy(ss->tokens, ws->tokens, (size_t)ws->n_tokens * sizeof *ss->tokens);
    ss->n_tokens = (size_t)ws->n_tokens;
    ss->text = trim(raw);
    /* the text is the segments' texts joined by one space, so a client
     * that joins streamed segments gets exactly the final text */
    if (*ss->text && ((all.len && buf_append_byte(&all, ' ')) || buf_append_str(&all, ss->text))) {
      rc = err_set(ERR_NOMEM, "stt: result");
      break;
    }
    whisper_word *w = NULL;
    int nw = whisper_segment_words(&e->v, ws, &w);
    if (nw < 0) {
      rc = nw;
      break;
    }
    stt_word *nwords = nw ? realloc(out->words, (out->n_words + (size_t)nw) * sizeof *nwords) : out->words;
    if (nw && !nwords) rc = err_set(ERR_NOMEM, "stt: result");
    if (nwords) out->words = nwords;
    for (int k = 0; !rc && k < nw; k++) {
      char *plain = plain_word(w[k].text);
      if (!plain) {
        rc = err_set(ERR_NOMEM, "stt: result");
        break;
      }
      if (!*plain) { /* punctuation alone: in the text, not a word */
        free(plain);
        continue;
      }
      stt_word *sw = &out->words[out->n_words++];
      *sw = (stt_word){.word = plain, .punctuated = w[k].text, .start = w[k].start, .end = w[k].end,
                       .confidence = w[k].prob};
      w[k].text = NULL;
      conf_sum += sw->confidence;
      ss->n_words++;
    }
    whisper_words_free(w, nw);
  }
  if (!rc && buf_append_byte(&all, 0)) rc = err_set(ERR_NOMEM, "stt: result");
  if (!rc) out->text = str_dup(trim((char *)all.data));
  buf_free(&all);
  if (!rc && !out->text) rc = err_set(ERR_NOMEM, "stt: result");
  if (rc) return rc;
  out->confidence = out->n_words ? conf_sum / (double)out->n_words : 0;
  const char *code = whisper_lang_code(e->v.multilingual ? t->lang : 0);
  snprintf(out->language, sizeof out->language, "%s", code ? code : "");
  out->language_prob = t->lang_prob;
  out->punctuated = true;
  return 0;
}

/* Transcribes pcm[n] on stream s's slot: the whole-buffer path. */
static int run_transcription(wstream *s, const int16_t *pcm, size_t n, stt_result *out) {
  memset(out, 0, sizeof *out);
  whisper_engine *e = s->c->e;
  const whisper_hparams *hp = whisper_model_hparams(e->m);
  uint64_t t0 = time_mono_ns();
  wrun w = {.e = e, .st = e->slots[s->slot].st, .pcm = pcm, .n = n, .window_frames = 2 * (int64_t)hp->n_audio_ctx};
  w.samples = malloc((size_t)w.window_frames * WHISPER_HOP * sizeof *w.samples);
  w.mel = malloc((size_t)hp->n_mels * (size_t)w.window_frames * sizeof *w.mel);
  int32_t *prompt = malloc(PROMPT_MAX * sizeof *prompt);
  int rc = w.samples && w.mel && prompt ? 0 : err_set(ERR_NOMEM, "stt: whisper buffers");
  whisper_transcribe_cfg cfg = {.v = &e->v, .logits = run_logits, .window = encode_window, .ctx = &w,
                                .window_frames = w.window_frames, .condition_on_previous = true, .anchor_min = 0.01f};
  int n_prompt = 0;
  if (!rc) rc = stream_decode_opts(s, &cfg.opts, prompt, &n_prompt);
  whisper_transcript t = {0};
  if (!rc) rc = whisper_transcribe(&cfg, (int64_t)whisper_mel_n_frames(n), &t);
  if (!rc) rc = build_result(e, &t, out);
  whisper_transcript_free(&t);
  free(w.samples);
  free(w.mel);
  free(prompt);
  if (rc) {
    stt_result_free(out);
    return rc;
  }
  out->audio_seconds = (double)n / WHISPER_SAMPLE_RATE;
  out->decode_seconds = (double)(time_mono_ns() - t0) / 1e9;
  out->parts = 1;
  return 0;
}

/* ---- the backend's operations ---------------------------------------------------- */

static int w_stream_begin(void *ctx, void **out) {
  *out = NULL;
  wstream *s = calloc(1, sizeof *s);
  if (!s) return err_set(ERR_NOMEM, "stt: stream");
  s->c = ctx;
  s->pcm = (buf)BUF_INIT;
  int rc = take_slot(s->c, &s->slot);
  if (rc) {
    free(s);
    return rc;
  }
  *out = s;
  return 0;
}

static int w_stream_options(void *st, const stt_options *o) {
  wstream *s = st;
  const whisper_engine *e = s->c->e;
  if (o->translate && !e->v.multilingual)
    return err_set(ERR_UNSUPPORTED, "translate: %s is an English-only model; translation needs a multilingual one",
                   e->name);
  s->lang[0] = 0;
  if (o->language && *o->language) {
    char code[16];
    size_t k = 0;
    for (; o->language[k] && o->language[k] != '-' && o->language[k] != '_' && k + 1 < sizeof code; k++)
      code[k] = (char)tolower((unsigned char)o->language[k]);
    code[k] = 0;
    if (whisper_lang_index(code) < 0)
      return err_set(ERR_INVALID, "language: '%.32s' is not a language Whisper knows (ISO 639-1 codes: en, de, fr, ...)",
                     o->language);
    if (!e->v.multilingual && strcmp(code, "en") != 0)
      return err_set(ERR_UNSUPPORTED, "language: '%.32s' is not available; %s is an English-only model",
                     o->language, e->name);
    snprintf(s->lang, sizeof s->lang, "%s", code);
  }
  char *p = o->prompt ? str_dup(o->prompt) : NULL;
  if (o->prompt && !p) return err_set(ERR_NOMEM, "stt: prompt");
  free(s->prompt);
  s->prompt = p;
  s->o = *o;
  s->o.language = NULL;
  s->o.prompt = NULL;
  return 0;
}

static int w_stream_feed(void *st, const int16_t *pcm, size_t n) {
  wstream *s = st;
  if (s->pcm.len / 2 + n > STREAM_MAX_SAMPLES) return err_set(ERR_TOO_LARGE, "stt: more than 4 hours of audio");
  return buf_append(&s->pcm, pcm, n * sizeof *pcm) ? err_set(ERR_NOMEM, "stt: stream audio") : 0;
}

/* The last window heard, decoded greedily without timestamps. */
static int w_stream_partial(void *st, char **text) {
  wstream *s = st;
  whisper_engine *e = s->c->e;
  size_t n = s->pcm.len / 2;
  if (s->partial && n < s->partial_at + PARTIAL_EVERY) {
    *text = str_dup(s->partial);
    return *text ? 0 : err_set(ERR_NOMEM, "stt: partial");
  }
  const whisper_hparams *hp = whisper_model_hparams(e->m);
  int64_t window = 2 * (int64_t)hp->n_audio_ctx, frames = (int64_t)whisper_mel_n_frames(n);
  int64_t seek = frames > window ? frames - window : 0;
  if (frames - seek < 2) {
    *text = str_dup("");
    return *text ? 0 : err_set(ERR_NOMEM, "stt: partial");
  }
  wrun w = {.e = e, .st = e->slots[s->slot].st, .pcm = (const int16_t *)(const void *)s->pcm.data, .n = n,
            .window_frames = window, .exact_frames = true};
  w.samples = malloc((size_t)window * WHISPER_HOP * sizeof *w.samples);
  w.mel = malloc((size_t)hp->n_mels * (size_t)window * sizeof *w.mel);
  int32_t *prompt = malloc(PROMPT_MAX * sizeof *prompt);
  whisper_decode_opts o;
  int n_prompt = 0;
  int rc = w.samples && w.mel && prompt ? 0 : err_set(ERR_NOMEM, "stt: whisper buffers");
  if (!rc) rc = stream_decode_opts(s, &o, prompt, &n_prompt);
  whisper_result r = {0};
  if (!rc) {
    o.timestamps = false;
    o.n_temps = 1;
    o.beam_size = 0; /* a partial is a quick look: greedy */
    o.temps[0] = 0;
    rc = encode_window(&w, seek, frames - seek);
  }
  if (!rc) rc = whisper_decode_window(&e->v, whisper_state_logits, w.st, &o, &r);
  char *t = NULL;
  if (!rc) {
    t = r.no_speech ? str_dup("") : trim(whisper_tokens_text(&e->v, r.tokens, r.n_tokens));
    if (!t) rc = err_set(ERR_NOMEM, "stt: partial");
  }
  whisper_result_free(&r);
  free(w.samples);
  free(w.mel);
  free(prompt);
  if (rc) return rc;
  free(s->partial);
  s->partial = t;
  s->partial_at = n;
  *text = str_dup(t);
  return *text ? 0 : err_set(ERR_NOMEM, "stt: partial");
}

static int w_stream_end(void *st, stt_result *out) {
  wstream *s = st;
  return run_transcription(s, (const int16_t *)(const void *)s->pcm.data, s->pcm.len / 2, out);
}

static int w_stream_transcribe(void *st, const int16_t *pcm, size_t n, stt_result *out) {
  return run_transcription(st, pcm, n, out);
}

static void w_stream_free(void *st) {
  wstream *s = st;
  if (!s) return;
  give_slot(s->c->e, s->slot);
  buf_free(&s->pcm);
  free(s->partial);
  free(s->prompt);
  free(s);
}

static int w_transcribe(void *ctx, const int16_t *pcm, size_t n, stt_result *out) {
  void *st;
  int rc = w_stream_begin(ctx, &st);
  if (rc) return rc;
  rc = run_transcription(st, pcm, n, out);
  w_stream_free(st);
  return rc;
}

const stt_backend_ops stt_backend_whisper = {
    .name = "whisper",
    .sample_rate = WHISPER_SAMPLE_RATE,
    .open = NULL, /* contexts come from whisper_engine_context: they share an engine */
    .close = w_close,
    .transcribe = w_transcribe,
    .stream_begin = w_stream_begin,
    .stream_feed = w_stream_feed,
    .stream_partial = w_stream_partial,
    .stream_end = w_stream_end,
    .stream_free = w_stream_free,
    .stream_transcribe = w_stream_transcribe,
    .stream_try_begin = NULL, /* one transcription uses the slot's threads; nothing to split */
    .stream_options = w_stream_options,
    .info = w_info,
};
