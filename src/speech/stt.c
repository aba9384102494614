/*
 * stt.c - the speech-to-text front end: owns one backend (pocketsphinx
 * today) and its context, checks arguments, and gives streams a type of
 * their own so callers never see the backend's pointers.
 *
 * Invariant: an stt_stream always holds a live backend stream until
 * stt_stream_free(), which the caller must call exactly once.
 *
 * Whole-buffer decoding of long audio is split in two at the quietest
 * 300 ms near the middle and the halves decoded at once on two pooled
 * decoders (the second on a short-lived thread) when the pool has one to
 * spare without waiting: pocketsphinx decodes on one thread, so this is
 * what lets a single transcription use both cores. Each half gets its own
 * cepstral mean and language-model sentence context; cutting in a pause
 * keeps that from costing accuracy (docs/speech.md has the measurement).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/util.h"
#include "speech/speech.h"
#include "speech/speech_worker.h"

struct stt {
  const stt_backend_ops *ops;
  void *ctx;
  size_t split_min; /* samples; 0 = never split */
};

struct stt_stream {
  stt *s;
  void *st;
  bool ended;
};

/* At most this much audio per transcription (the decoder's memory grows
 * with the utterance): 4 hours. */
#define STT_MAX_SAMPLES ((size_t)4 * 3600 * 16000)

/* The handle around an opened backend context. */
static int stt_wrap(stt **out, const stt_backend_ops *ops, void *ctx, const stt_config *cfg) {
  stt *s = calloc(1, sizeof *s);
  if (!s) {
    ops->close(ctx);
    return err_set(ERR_NOMEM, "stt: handle");
  }
  s->ops = ops;
  s->ctx = ctx;
  double split_s = cfg && cfg->split_min_s != 0 ? cfg->split_min_s : 30.0;
  s->split_min = split_s > 0 && ops->stream_try_begin ? (size_t)(split_s * ops->sample_rate) : 0;
  *out = s;
  return 0;
}

int stt_open(stt **out, const stt_config *cfg) {
  *out = NULL;
  void *ctx;
  int rc = stt_backend_pocketsphinx.open(&ctx, cfg);
  return rc ? rc : stt_wrap(out, &stt_backend_pocketsphinx, ctx, cfg);
}

/* The decoders live in pool's workers; splitting long audio happens there. */
int stt_open_remote(stt **out, const stt_config *cfg, wpool *pool, const speech_limits *lim) {
  *out = NULL;
  void *ctx;
  int rc = stt_remote_context(&ctx, cfg, pool, lim);
  return rc ? rc : stt_wrap(out, &stt_backend_remote, ctx, cfg);
}

void stt_close(stt *s) {
  if (!s) return;
  s->ops->close(s->ctx);
  free(s);
}

int stt_open_whisper(stt **out, whisper_engine *e, const stt_config *cfg) {
  *out = NULL;
  void *ctx;
  int rc = whisper_engine_context(e, cfg, &ctx);
  return rc ? rc : stt_wrap(out, &stt_backend_whisper, ctx, cfg);
}

const char *stt_name(const stt *s) { return s->ops->name; }
int stt_sample_rate(const stt *s) { return s->ops->sample_rate; }

void stt_get_info(const stt *s, stt_info *out) {
  *out = (stt_info){.backend = s->ops->name, .model = "pocketsphinx-en-us"};
  if (s->ops->info) s->ops->info(s->ctx, out);
}

void stt_result_free(stt_result *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_words; i++) {
    free(r->words[i].word);
    free(r->words[i].punctuated);
  }
  free(r->words);
  for (size_t i = 0; i < r->n_segments; i++) {
    free(r->segments[i].text);
    free(r->segments[i].tokens);
  }
  free(r->segments);
  free(r->text);
  memset(r, 0, sizeof *r);
}

int stt_stream_set_options(stt_stream *st, const stt_options *o) {
  if (st->ended) return err_set(ERR_INVALID, "stt: options after end");
  if (st->s->ops->stream_options) return st->s->ops->stream_options(st->st, o);
  /* a backend without options: English transcription, prompts unused */
  if (o->translate) return err_set(ERR_UNSUPPORTED, "translate: the %s model does not translate", st->s->ops->name);
  if (o->language && *o->language && strncasecmp(o->language, "en", 2) != 0)
    return err_set(ERR_UNSUPPORTED, "language: '%.32s' is not available; the %s model knows only English ('en')",
                   o->language, st->s->ops->name);
  return 0;
}

int stt_transcribe(stt *s, const int16_t *pcm, size_t n, stt_result *out) {
  memset(out, 0, sizeof *out);
  if (!pcm && n) return err_set(ERR_INVALID, "stt: no samples");
  if (n > STT_MAX_SAMPLES) return err_set(ERR_TOO_LARGE, "stt: %zu samples is more than 4 hours", n);
  if (s->ops->transcribe && !(s->split_min && n >= s->split_min)) {
    int rc = s->ops->transcribe(s->ctx, pcm, n, out);
    if (!rc && !out->parts) out->parts = 1;
    return rc;
  }
  stt_stream *st;
  int rc = stt_stream_begin(s, &st);
  if (rc) return rc;
  rc = stt_stream_transcribe(st, pcm, n, out);
  stt_stream_free(st);
  return rc;
}

int stt_stream_begin(stt *s, stt_stream **out) {
  *out = NULL;
  stt_stream *st = calloc(1, sizeof *st);
  if (!st) return err_set(ERR_NOMEM, "stt: stream");
  st->s = s;
  int rc = s->ops->stream_begin(s->ctx, &st->st);
  if (rc) {
    free(st);
    return rc;
  }
  *out = st;
  return 0;
}

int stt_stream_feed(stt_stream *st, const int16_t *pcm, size_t n) {
  if (st->ended) return err_set(ERR_INVALID, "stt: feed after end");
  if (!pcm && n) return err_set(ERR_INVALID, "stt: no samples");
  return st->s->ops->stream_feed(st->st, pcm, n);
}

int stt_stream_partial(stt_stream *st, char **text) {
  *text = NULL;
  return st->s->ops->stream_partial(st->st, text);
}

/* ---- splitting a whole-buffer decode across two decoders ------------------ */

/* The sample index to cut at: the middle of the quietest 300 ms window
 * (sum of squares over 10 ms frames) whose centre lies in the middle half
 * of the audio; among equals, the one nearest the middle. 0 when even that
 * window is not a pause (its energy above a tenth of the audio's mean, i.e.
 * less than 10 dB below it): cutting inside running speech breaks words. */
static size_t split_point(const int16_t *pcm, size_t n, int rate) {
  size_t fl = (size_t)rate / 100, nf = n / fl, win = 30;
  if (nf < 4 * win) return 0;
  double *e = malloc(nf * sizeof *e), total = 0;
  if (!e) return 0;
  for (size_t f = 0; f < nf; f++) {
    double acc = 0;
    for (size_t i = 0; i < fl; i++) acc += (double)pcm[f * fl + i] * pcm[f * fl + i];
    e[f] = acc;
    total += acc;
  }
  size_t lo = nf / 4, hi = 3 * nf / 4 - win, mid = nf / 2, best = lo;
  double sum = 0, best_sum = -1;
  for (size_t f = lo; f < lo + win; f++) sum += e[f];
  for (size_t f = lo;; f++) {
    size_t c = f + win / 2, bc = best + win / 2;
    size_t dc = c > mid ? c - mid : mid - c, db = bc > mid ? bc - mid : mid - bc;
    if (best_sum < 0 || sum < best_sum || (sum == best_sum && dc < db)) best_sum = sum, best = f;
    if (f + 1 > hi) break;
    sum += e[f + win] - e[f];
  }
  free(e);
  if (best_sum > 0.1 * total / (double)nf * (double)win) return 0;
  return (best + win / 2) * fl;
}

typedef struct half_job {
  const stt_backend_ops *ops;
  void *st;
  const int16_t *pcm;
  size_t n;
  stt_result r;
  int rc;
  char detail[256];
} half_job;

static void *half_main(void *arg) {
  half_job *h = arg;
  h->rc = h->ops->stream_transcribe ? h->ops->stream_transcribe(h->st, h->pcm, h->n, &h->r)
                                    : h->ops->stream_feed(h->st, h->pcm, h->n);
  if (!h->rc && !h->ops->stream_transcribe) h->rc = h->ops->stream_end(h->st, &h->r);
  if (h->rc) snprintf(h->detail, sizeof h->detail, "%s", err_detail());
  return NULL;
}

/* Appends b (times shifted by offset seconds) to a; frees b's words. */
static int merge_results(stt_result *a, stt_result *b, double offset) {
  size_t na = a->n_words, nb = b->n_words;
  if (nb) {
    stt_word *w = realloc(a->words, (na + nb) * sizeof *w);
    size_t la = a->text ? strlen(a->text) : 0, lb = b->text ? strlen(b->text) : 0;
    char *t = malloc(la + lb + 2);
    if (!w || !t) {
      if (w) a->words = w;
      free(t);
      return err_set(ERR_NOMEM, "stt: merging halves");
    }
    a->words = w;
    for (size_t i = 0; i < nb; i++) {
      w[na + i] = b->words[i];
      w[na + i].start += offset;
      w[na + i].end += offset;
    }
    memcpy(t, a->text ? a->text : "", la);
    size_t k = la;
    if (la && lb) t[k++] = ' ';
    memcpy(t + k, b->text, lb + 1);
    free(a->text);
    a->text = t;
    a->n_words = na + nb;
    a->confidence = (a->confidence * (double)na + b->confidence * (double)nb) / (double)(na + nb);
    free(b->words);
    b->words = NULL;
    b->n_words = 0;
  }
  a->audio_seconds += b->audio_seconds;
  if (b->decode_seconds > a->decode_seconds) a->decode_seconds = b->decode_seconds; /* they overlapped */
  return 0;
}

/* Whole-buffer decoding on st, split across a second decoder when the audio
 * is long and one is free. Returns 1 (out untouched) when it did not split. */
static int transcribe_split(stt_stream *st, const int16_t *pcm, size_t n, stt_result *out) {
  const stt_backend_ops *ops = st->s->ops;
  if (!st->s->split_min || n < st->s->split_min) return 1;
  size_t cut = split_point(pcm, n, ops->sample_rate);
  if (!cut) return 1; /* no pause near the middle */
  void *st2 = NULL;
  /* busy: decode whole on one; make a decoder (~1 s) only for long audio */
  if (ops->stream_try_begin(st->s->ctx, &st2, n >= 5 * st->s->split_min)) return 1;
  half_job h = {.ops = ops, .st = st2, .pcm = pcm + cut, .n = n - cut};
  pthread_t th;
  if (pthread_create(&th, NULL, half_main, &h) != 0) {
    ops->stream_free(st2);
    return 1;
  }
  int rc = ops->stream_transcribe ? ops->stream_transcribe(st->st, pcm, cut, out) : ops->stream_feed(st->st, pcm, cut);
  if (!rc && !ops->stream_transcribe) rc = ops->stream_end(st->st, out);
  pthread_join(th, NULL);
  ops->stream_free(st2);
  if (!rc && h.rc) rc = err_set(h.rc, "%s", h.detail);
  if (!rc) rc = merge_results(out, &h.r, (double)cut / ops->sample_rate);
  if (!rc) out->parts = 2;
  stt_result_free(&h.r);
  if (rc) stt_result_free(out);
  return rc;
}

int stt_stream_transcribe(stt_stream *st, const int16_t *pcm, size_t n, stt_result *out) {
  memset(out, 0, sizeof *out);
  if (st->ended) return err_set(ERR_INVALID, "stt: transcribe after end");
  if (!pcm && n) return err_set(ERR_INVALID, "stt: no samples");
  if (n > STT_MAX_SAMPLES) return err_set(ERR_TOO_LARGE, "stt: %zu samples is more than 4 hours", n);
  st->ended = true;
  int rc = transcribe_split(st, pcm, n, out);
  if (rc != 1) return rc;
  if (st->s->ops->stream_transcribe) {
    rc = st->s->ops->stream_transcribe(st->st, pcm, n, out);
  } else {
    rc = st->s->ops->stream_feed(st->st, pcm, n);
    if (!rc) rc = st->s->ops->stream_end(st->st, out);
  }
  if (!rc && !out->parts) out->parts = 1;
  return rc;
}

int stt_stream_end(stt_stream *st, stt_result *out) {
  memset(out, 0, sizeof *out);
  if (st->ended) return err_set(ERR_INVALID, "stt: end called twice");
  st->ended = true;
  return st->s->ops->stream_end(st->st, out);
}

void stt_stream_free(stt_stream *st) {
  if (!st) return;
  st->s->ops->stream_free(st->st);
  free(st);
}
