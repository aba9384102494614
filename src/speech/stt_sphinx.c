/*
 * stt_sphinx.c - the pocketsphinx speech-to-text backend (the 5prealpha API
 * Debian ships) with the en-us acoustic model, language model and
 * dictionary from pocketsphinx-en-us. Input: 16 kHz mono int16.
 *
 * Decoders are expensive to create (about a second and some tens of MB for
 * the en-us language model), so they live in a pool: n_preload are made at
 * open, more on demand up to n_max, and a stream holds one from begin to
 * free. Each decoder has its own configuration and is used by one thread at
 * a time, so decoding needs no lock; creation is serialized (pocketsphinx's
 * logging is global, and silenced once with err_set_logfp(NULL)).
 *
 * Results: words come from the segment iterator with frame numbers
 * (-frate, 100 per second) turned into seconds and ps_seg_prob's log
 * posterior turned into a probability with logmath_exp. Fillers (<s>,
 * </s>, <sil>, [NOISE], ++...++) are dropped and alternate pronunciation
 * marks ("read(2)") stripped.
 *
 * Start reading at stream_begin().
 */
#include <errno.h>
#include <pocketsphinx.h>
#include <sphinxbase/err.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "speech/speech.h"

#define SPHINX_MODEL_DIR "/usr/share/pocketsphinx/model/en-us"
#define SPHINX_RATE 16000

#define SPHINX_MAX_OPTS 32

typedef struct sphinx_ctx {
  char hmm[512], lm[512], dict[512];
  char *opts[2 * SPHINX_MAX_OPTS + 1]; /* caller's name/value pairs, copied */
  int n_opts;
  pthread_mutex_t lock;
  pthread_cond_t freed;
  ps_decoder_t **dec; /* n_made of n_max created */
  bool *busy;
  int n_made, n_max;
  int wait_ms;
} sphinx_ctx;

typedef struct sphinx_stream {
  sphinx_ctx *ctx;
  int slot;
  ps_decoder_t *ps;
  size_t n_samples;
  bool started, ended;
  uint64_t decode_ns;
} sphinx_stream;

static bool file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static int make_decoder(sphinx_ctx *c, ps_decoder_t **out) {
  *out = NULL;
  err_set_logfp(NULL); /* pocketsphinx logs a lot to stderr otherwise */
  /* Our defaults, then the caller's options. */
  char *argv[20 + 2 * SPHINX_MAX_OPTS + 1];
  int argc = 0;
  /* Speed settings measured on the librivox test recordings (docs/speech.md):
   * no flat-lexicon second pass, 2 Gaussians per frame, bounded active HMMs
   * and words per frame, a wider phone look-ahead. CPU RTF 0.62 -> ~0.25
   * with the same or better WER there. No silence removal: pocketsphinx's
   * VAD drops silent frames without counting them, so every word after a
   * pause came back early by the pause's length (same WER and speed
   * without it). */
  const char *base[] = {"-hmm",     c->hmm,  "-lm",     c->lm,   "-dict",      c->dict, "-samprate", "16000",
                        "-fwdflat", "no",    "-topn",   "2",     "-maxhmmpf",  "3000",  "-maxwpf",   "10",
                        "-pl_window", "10", "-remove_silence", "no"};
  /* a name given twice is a parse error in pocketsphinx: leave out the
   * defaults the caller overrides */
  for (size_t i = 0; i + 1 < ARRAY_LEN(base); i += 2) {
    bool overridden = false;
    for (int k = 0; k + 1 < c->n_opts && !overridden; k += 2) overridden = strcmp(c->opts[k], base[i]) == 0;
    if (overridden) continue;
    argv[argc++] = (char *)base[i];
    argv[argc++] = (char *)base[i + 1];
  }
  for (int i = 0; i < c->n_opts; i++) argv[argc++] = c->opts[i];
  argv[argc] = NULL;
  cmd_ln_t *cfg = cmd_ln_parse_r(NULL, ps_args(), argc, argv, TRUE);
  if (!cfg) return err_set(ERR_INVALID, "pocketsphinx: bad configuration (model %s)", c->hmm);
  uint64_t t0 = time_mono_ns();
  ps_decoder_t *ps = ps_init(cfg);
  cmd_ln_free_r(cfg); /* the decoder keeps its own reference */
  if (!ps) return err_set(ERR_INTERNAL, "pocketsphinx: decoder creation failed (model %s)", c->hmm);
  LOG_DEBUG("stt", "pocketsphinx decoder ready in %.0f ms", (double)(time_mono_ns() - t0) / 1e6);
  *out = ps;
  return 0;
}

static void sphinx_close(void *ctx);

static int sphinx_open(void **out, const stt_config *cfg) {
  *out = NULL;
  stt_config d = {0};
  if (!cfg) cfg = &d;
  sphinx_ctx *c = calloc(1, sizeof *c);
  if (!c) return err_set(ERR_NOMEM, "pocketsphinx: context");
  snprintf(c->hmm, sizeof c->hmm, "%s", cfg->model_dir ? cfg->model_dir : SPHINX_MODEL_DIR "/en-us");
  snprintf(c->lm, sizeof c->lm, "%s", cfg->lm ? cfg->lm : SPHINX_MODEL_DIR "/en-us.lm.bin");
  snprintf(c->dict, sizeof c->dict, "%s", cfg->dict ? cfg->dict : SPHINX_MODEL_DIR "/cmudict-en-us.dict");
  c->n_max = cfg->n_max > 0 ? cfg->n_max : 2;
  if (c->n_max > 64) c->n_max = 64;
  int n_pre = cfg->n_preload > 0 ? cfg->n_preload : 1;
  if (n_pre > c->n_max) n_pre = c->n_max;
  c->wait_ms = cfg->wait_ms > 0 ? cfg->wait_ms : 30000;
  char mdef[600];
  snprintf(mdef, sizeof mdef, "%s/mdef", c->hmm);
  const char *missing = !file_exists(mdef) ? mdef : !file_exists(c->lm) ? c->lm : !file_exists(c->dict) ? c->dict : NULL;
  if (missing) {
    int rc = err_set(ERR_NOT_FOUND, "pocketsphinx: model file %s not found (install pocketsphinx-en-us)", missing);
    free(c);
    return rc;
  }
  c->dec = calloc((size_t)c->n_max, sizeof *c->dec);
  c->busy = calloc((size_t)c->n_max, sizeof *c->busy);
  pthread_mutex_init(&c->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->freed, &ca);
  pthread_condattr_destroy(&ca);
  int rc = (!c->dec || !c->busy) ? err_set(ERR_NOMEM, "pocketsphinx: pool") : 0;
  for (const char *const *o = cfg->options; rc == 0 && o && o[0]; o += 2) {
    if (!o[1] || c->n_opts >= 2 * SPHINX_MAX_OPTS) {
      rc = err_set(ERR_INVALID, "pocketsphinx: option %s has no value, or more than %d options", o[0],
                   SPHINX_MAX_OPTS);
      break;
    }
    c->opts[c->n_opts++] = str_dup(o[0]);
    c->opts[c->n_opts++] = str_dup(o[1]);
  }
  for (int i = 0; rc == 0 && i < n_pre; i++) {
    rc = make_decoder(c, &c->dec[i]);
    if (rc == 0) c->n_made++;
  }
  if (rc) {
    sphinx_close(c);
    return rc;
  }
  *out = c;
  return 0;
}

static void sphinx_close(void *ctx) {
  sphinx_ctx *c = ctx;
  if (!c) return;
  for (int i = 0; i < c->n_opts; i++) free(c->opts[i]);
  for (int i = 0; i < c->n_made; i++) ps_free(c->dec[i]);
  free(c->dec);
  free(c->busy);
  pthread_cond_destroy(&c->freed);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* Takes an idle decoder, creates one if the pool has room (and create), or
 * waits (when wait; otherwise ERR_OVERLOADED at once). */
static int pool_acquire(sphinx_ctx *c, int *slot, bool wait, bool create) {
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += c->wait_ms / 1000;
  deadline.tv_nsec += (long)(c->wait_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) deadline.tv_sec++, deadline.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&c->lock);
  for (;;) {
    for (int i = 0; i < c->n_made; i++)
      if (!c->busy[i]) {
        c->busy[i] = true;
        *slot = i;
        pthread_mutex_unlock(&c->lock);
        return 0;
      }
    if (create && c->n_made < c->n_max) {
      /* Creating under the lock keeps creation serialized; others wait. */
      int i = c->n_made;
      int rc = make_decoder(c, &c->dec[i]);
      if (rc == 0) {
        c->n_made++;
        c->busy[i] = true;
        *slot = i;
      }
      pthread_mutex_unlock(&c->lock);
      return rc;
    }
    int w = wait ? pthread_cond_timedwait(&c->freed, &c->lock, &deadline) : ETIMEDOUT;
    if (w == ETIMEDOUT) {
      pthread_mutex_unlock(&c->lock);
      return err_set(ERR_OVERLOADED, "pocketsphinx: all %d decoders busy for %d ms", c->n_max, c->wait_ms);
    }
  }
}

static void pool_release(sphinx_ctx *c, int slot) {
  pthread_mutex_lock(&c->lock);
  c->busy[slot] = false;
  pthread_cond_signal(&c->freed);
  pthread_mutex_unlock(&c->lock);
}

static int stream_begin(void *ctx, void **out, bool wait, bool create) {
  *out = NULL;
  sphinx_ctx *c = ctx;
  sphinx_stream *s = calloc(1, sizeof *s);
  if (!s) return err_set(ERR_NOMEM, "pocketsphinx: stream");
  int rc = pool_acquire(c, &s->slot, wait, create);
  if (rc) {
    free(s);
    return rc;
  }
  s->ctx = c;
  s->ps = c->dec[s->slot];
  /* A new stream per utterance: pocketsphinx keeps segment times (and the
   * noise estimate) stream-wide, so a pooled decoder would otherwise report
   * word times offset by every utterance it decoded before. */
  if (ps_start_stream(s->ps) < 0 || ps_start_utt(s->ps) < 0) {
    pool_release(c, s->slot);
    free(s);
    return err_set(ERR_INTERNAL, "pocketsphinx: ps_start_utt failed");
  }
  s->started = true;
  *out = s;
  return 0;
}

static int sphinx_stream_begin(void *ctx, void **out) { return stream_begin(ctx, out, true, true); }
static int sphinx_stream_try_begin(void *ctx, void **out, bool may_create) {
  return stream_begin(ctx, out, false, may_create);
}

static int feed(sphinx_stream *s, const int16_t *pcm, size_t n, bool full) {
  if (s->ended) return err_set(ERR_INVALID, "stt: feed after end");
  if (n == 0) return 0;
  uint64_t t0 = time_mono_ns();
  int r = ps_process_raw(s->ps, pcm, n, FALSE, full ? TRUE : FALSE);
  s->decode_ns += time_mono_ns() - t0;
  if (r < 0) return err_set(ERR_INTERNAL, "pocketsphinx: ps_process_raw failed");
  s->n_samples += n;
  return 0;
}

static int sphinx_stream_feed(void *st, const int16_t *pcm, size_t n) { return feed(st, pcm, n, false); }

static int sphinx_stream_partial(void *st, char **text) {
  sphinx_stream *s = st;
  int32 score;
  const char *hyp = s->ended ? NULL : ps_get_hyp(s->ps, &score);
  *text = str_dup(hyp ? hyp : "");
  return *text ? 0 : err_set(ERR_NOMEM, "stt: partial");
}

static bool is_filler(const char *w) { return w[0] == '<' || w[0] == '[' || w[0] == '+' || w[0] == '\0'; }

static int collect_result(sphinx_stream *s, stt_result *out) {
  memset(out, 0, sizeof *out);
  out->audio_seconds = (double)s->n_samples / SPHINX_RATE;
  out->decode_seconds = (double)s->decode_ns / 1e9;
  logmath_t *lm = ps_get_logmath(s->ps);
  double frate = 100.0;
  buf text = BUF_INIT;
  size_t cap = 0;
  int rc = 0;
  int32 score;
  ps_get_hyp(s->ps, &score); /* makes the segment iterator use the final search */
  for (ps_seg_t *seg = ps_seg_iter(s->ps); seg; seg = ps_seg_next(seg)) {
    const char *w = ps_seg_word(seg);
    if (rc || !w || is_filler(w)) continue;
    int sf = 0, ef = 0;
    ps_seg_frames(seg, &sf, &ef);
    int32 a, l, b;
    double p = logmath_exp(lm, ps_seg_prob(seg, &a, &l, &b));
    if (!(p >= 0)) p = 0;
    if (p > 1) p = 1;
    if (out->n_words == cap) {
      size_t nc = cap ? cap * 2 : 16;
      stt_word *nw = realloc(out->words, nc * sizeof *nw);
      if (!nw) {
        rc = err_set(ERR_NOMEM, "stt: words");
        continue;
      }
      out->words = nw, cap = nc;
    }
    size_t wl = strcspn(w, "(");
    stt_word *sw = &out->words[out->n_words];
    *sw = (stt_word){0};
    sw->word = str_ndup(w, wl);
    if (!sw->word) {
      rc = err_set(ERR_NOMEM, "stt: word");
      continue;
    }
    sw->start = sf / frate;
    sw->end = (ef + 1) / frate;
    sw->confidence = p;
    out->n_words++;
    out->confidence += p;
    if (text.len) buf_append_byte(&text, ' ');
    buf_append(&text, w, wl);
  }
  if (out->n_words) out->confidence /= (double)out->n_words;
  out->text = buf_detach(&text, NULL);
  if (!out->text && rc == 0) rc = err_set(ERR_NOMEM, "stt: text");
  if (rc) stt_result_free(out);
  return rc;
}

static int sphinx_stream_end(void *st, stt_result *out) {
  sphinx_stream *s = st;
  if (s->ended) return err_set(ERR_INVALID, "stt: end called twice");
  uint64_t t0 = time_mono_ns();
  int r = ps_end_utt(s->ps);
  s->decode_ns += time_mono_ns() - t0;
  s->ended = true;
  if (r < 0) return err_set(ERR_INTERNAL, "pocketsphinx: ps_end_utt failed");
  return collect_result(s, out);
}

static void sphinx_stream_free(void *st) {
  sphinx_stream *s = st;
  if (!s) return;
  if (s->started && !s->ended) ps_end_utt(s->ps);
  pool_release(s->ctx, s->slot);
  free(s);
}

/* Whole buffer: one call with full_utt, so cepstral mean normalization is
 * computed over the whole recording instead of running from a guess. */
static int sphinx_transcribe(void *ctx, const int16_t *pcm, size_t n, stt_result *out) {
  void *st;
  int rc = sphinx_stream_begin(ctx, &st);
  if (rc) return rc;
  rc = feed(st, pcm, n, true);
  if (rc == 0) rc = sphinx_stream_end(st, out);
  sphinx_stream_free(st);
  return rc;
}

/* The whole-buffer path on a stream already holding its decoder. */
static int sphinx_stream_transcribe(void *st, const int16_t *pcm, size_t n, stt_result *out) {
  int rc = feed(st, pcm, n, true);
  return rc ? rc : sphinx_stream_end(st, out);
}

const stt_backend_ops stt_backend_pocketsphinx = {
    .name = "pocketsphinx",
    .sample_rate = SPHINX_RATE,
    .open = sphinx_open,
    .close = sphinx_close,
    .transcribe = sphinx_transcribe,
    .stream_begin = sphinx_stream_begin,
    .stream_feed = sphinx_stream_feed,
    .stream_partial = sphinx_stream_partial,
    .stream_end = sphinx_stream_end,
    .stream_free = sphinx_stream_free,
    .stream_transcribe = sphinx_stream_transcribe,
    .stream_try_begin = sphinx_stream_try_begin,
};
