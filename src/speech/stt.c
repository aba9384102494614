/*
 * stt.c - the speech-to-text front end: owns one backend (pocketsphinx
 * today) and its context, checks arguments, and gives streams a type of
 * their own so callers never see the backend's pointers.
 *
 * Invariant: an stt_stream always holds a live backend stream until
 * stt_stream_free(), which the caller must call exactly once.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "speech/speech.h"

struct stt {
  const stt_backend_ops *ops;
  void *ctx;
};

struct stt_stream {
  stt *s;
  void *st;
  bool ended;
};

/* At most this much audio per transcription (the decoder's memory grows
 * with the utterance): 4 hours. */
#define STT_MAX_SAMPLES ((size_t)4 * 3600 * 16000)

int stt_open(stt **out, const stt_config *cfg) {
  *out = NULL;
  stt *s = calloc(1, sizeof *s);
  if (!s) return err_set(ERR_NOMEM, "stt: handle");
  s->ops = &stt_backend_pocketsphinx;
  int rc = s->ops->open(&s->ctx, cfg);
  if (rc) {
    free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void stt_close(stt *s) {
  if (!s) return;
  s->ops->close(s->ctx);
  free(s);
}

const char *stt_name(const stt *s) { return s->ops->name; }
int stt_sample_rate(const stt *s) { return s->ops->sample_rate; }

void stt_result_free(stt_result *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_words; i++) free(r->words[i].word);
  free(r->words);
  free(r->text);
  memset(r, 0, sizeof *r);
}

int stt_transcribe(stt *s, const int16_t *pcm, size_t n, stt_result *out) {
  memset(out, 0, sizeof *out);
  if (!pcm && n) return err_set(ERR_INVALID, "stt: no samples");
  if (n > STT_MAX_SAMPLES) return err_set(ERR_TOO_LARGE, "stt: %zu samples is more than 4 hours", n);
  if (s->ops->transcribe) return s->ops->transcribe(s->ctx, pcm, n, out);
  stt_stream *st;
  int rc = stt_stream_begin(s, &st);
  if (rc) return rc;
  rc = stt_stream_feed(st, pcm, n);
  if (rc == 0) rc = stt_stream_end(st, out);
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

int stt_stream_transcribe(stt_stream *st, const int16_t *pcm, size_t n, stt_result *out) {
  memset(out, 0, sizeof *out);
  if (st->ended) return err_set(ERR_INVALID, "stt: transcribe after end");
  if (!pcm && n) return err_set(ERR_INVALID, "stt: no samples");
  if (n > STT_MAX_SAMPLES) return err_set(ERR_TOO_LARGE, "stt: %zu samples is more than 4 hours", n);
  st->ended = true;
  if (st->s->ops->stream_transcribe) return st->s->ops->stream_transcribe(st->st, pcm, n, out);
  int rc = st->s->ops->stream_feed(st->st, pcm, n);
  return rc ? rc : st->s->ops->stream_end(st->st, out);
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
