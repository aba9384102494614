/*
 * speech_remote.c - the server's side of the speech workers: TTS and STT
 * backends whose every call is a wpool_call to a worker process
 * (speech_worker.c holds the engines), and audio decoding the same way.
 *
 * A synthesis takes a worker for one sentence (tts.c splits the text), so
 * concurrent requests interleave on the pool; an STT stream holds one
 * worker from stream_begin to stream_free, the worker holding the decoder.
 * Whatever a worker does wrong (crash, hang past its limit) arrives here as
 * ERR_WORKER / ERR_TIMEOUT from wpool_call; the pool has already reaped the
 * process and starts a fresh one for the next request.
 *
 * Start reading at remote_synth().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "speech/speech_worker.h"

/* The time limit of one call that involves audio_s seconds of audio. */
static int limit_ms(const speech_limits *lim, double audio_s) {
  double base = lim->call_ms > 0 ? lim->call_ms : 60000;
  double per = lim->per_audio_s > 0 ? lim->per_audio_s : 2000;
  double ms = base + per * (audio_s > 0 ? audio_s : 0);
  return ms > 2e9 ? 2000000000 : (int)ms;
}

/* ---- text to speech --------------------------------------------------------- */

typedef struct tts_remote {
  wpool *pool;
  speech_limits lim;
  tts_voice *voices; /* n; every string malloc'd */
  size_t n;
} tts_remote;

static void remote_tts_close(void *ctx) {
  tts_remote *r = ctx;
  if (!r) return;
  for (size_t i = 0; i < r->n; i++) {
    free((char *)r->voices[i].name);
    free((char *)r->voices[i].backend);
    free((char *)r->voices[i].language);
    free((char *)r->voices[i].gender);
    free((char *)r->voices[i].description);
  }
  free(r->voices);
  free(r);
}

static size_t remote_n_voices(void *ctx) { return ((tts_remote *)ctx)->n; }
static const tts_voice *remote_voice_at(void *ctx, size_t i) {
  tts_remote *r = ctx;
  return i < r->n ? &r->voices[i] : NULL;
}

typedef struct synth_call {
  tts_pcm_fn fn;
  void *user;
  int bad; /* a malformed chunk */
} synth_call;

static int on_pcm_chunk(void *user, uint32_t kind, const uint8_t *data, size_t n) {
  synth_call *sc = user;
  wmsg_rd r = wmsg_reader(data, n);
  int rate = wmsg_get_i32(&r);
  size_t len;
  const uint8_t *pcm = wmsg_get_bytes(&r, &len);
  if (kind != SPW_PCM || !r.ok || len % 2 || rate <= 0) {
    sc->bad = 1;
    return 1;
  }
  /* The frame buffer is malloc'd and the samples start 8 bytes in: aligned. */
  return sc->fn(sc->user, (const int16_t *)(const void *)pcm, len / 2, rate);
}

static int remote_synth(void *ctx, const tts_choice *c, const char *text, double speed, tts_pcm_fn fn, void *user) {
  tts_remote *r = ctx;
  buf req = BUF_INIT;
  if (wmsg_str(&req, c->voice->backend) || wmsg_str(&req, c->voice->name) || wmsg_str(&req, c->variant) ||
      wmsg_f64(&req, speed) || wmsg_str(&req, text)) {
    buf_free(&req);
    return err_set(ERR_NOMEM, "tts: request");
  }
  wpool_worker *w;
  int rc = wpool_acquire(r->pool, -1, &w);
  if (rc) {
    buf_free(&req);
    return rc;
  }
  synth_call sc = {fn, user, 0};
  rc = wpool_call(w, SPW_TTS_SYNTH, req.data, req.len, limit_ms(&r->lim, 0), on_pcm_chunk, &sc, NULL);
  wpool_release(w);
  buf_free(&req);
  if (sc.bad && rc == ERR_CANCELLED) rc = err_set(ERR_WORKER, "tts: the speech worker sent a malformed chunk");
  return rc;
}

/* One ops table per backend name: tts.c finds a voice's backend by name. */
#define REMOTE_TTS_OPS(NAME)                                                                                   \
  {.name = NAME, .open = NULL, .close = remote_tts_close, .n_voices = remote_n_voices,                        \
   .voice_at = remote_voice_at, .synth = remote_synth}
static const tts_backend_ops REMOTE_TTS[] = {REMOTE_TTS_OPS("flite"), REMOTE_TTS_OPS("espeak-ng")};

static int parse_voices(tts_remote *r, const char *backend, const buf *out) {
  wmsg_rd rd = wmsg_reader(out->data, out->len);
  uint32_t n = wmsg_get_u32(&rd);
  if (!rd.ok || n > 100000) return err_set(ERR_WORKER, "tts: the speech worker sent a malformed voice list");
  r->voices = calloc(n ? n : 1, sizeof *r->voices);
  if (!r->voices) return err_set(ERR_NOMEM, "tts: voice list");
  for (uint32_t i = 0; i < n; i++) {
    tts_voice *v = &r->voices[i];
    r->n = i + 1;
    v->name = wmsg_get_str(&rd);
    v->language = wmsg_get_str(&rd);
    v->gender = wmsg_get_str(&rd);
    v->sample_rate = wmsg_get_i32(&rd);
    v->description = wmsg_get_str(&rd);
    v->backend = str_dup(backend);
    if (!rd.ok || !v->name || !v->language || !v->gender || !v->description || !v->backend)
      return err_set(ERR_WORKER, "tts: the speech worker sent a malformed voice list");
  }
  return 0;
}

int tts_remote_backend(wpool *pool, const speech_limits *lim, const char *name, const tts_backend_ops **ops,
                       void **ctx) {
  *ops = NULL;
  *ctx = NULL;
  const tts_backend_ops *o = NULL;
  for (size_t i = 0; i < ARRAY_LEN(REMOTE_TTS); i++)
    if (strcmp(REMOTE_TTS[i].name, name) == 0) o = &REMOTE_TTS[i];
  if (!o) return err_set(ERR_NOT_FOUND, "tts: no backend %s", name);
  tts_remote *r = calloc(1, sizeof *r);
  if (!r) return err_set(ERR_NOMEM, "tts: backend");
  r->pool = pool;
  if (lim) r->lim = *lim;
  buf req = BUF_INIT, out = BUF_INIT;
  wpool_worker *w = NULL;
  int rc = wmsg_str(&req, name);
  if (!rc) rc = wpool_acquire(pool, -1, &w);
  if (!rc) rc = wpool_call(w, SPW_TTS_VOICES, req.data, req.len, limit_ms(&r->lim, 0), NULL, NULL, &out);
  if (w) wpool_release(w);
  if (!rc) rc = parse_voices(r, name, &out);
  buf_free(&req);
  buf_free(&out);
  if (rc) {
    remote_tts_close(r);
    return rc;
  }
  *ops = o;
  *ctx = r;
  return 0;
}

/* ---- speech to text ------------------------------------------------------------ */

typedef struct stt_remote {
  wpool *pool;
  speech_limits lim;
  int wait_ms;   /* how long stream_begin waits for a worker */
  buf blob;      /* the config, sent first in every request */
} stt_remote;

typedef struct stt_remote_stream {
  stt_remote *r;
  wpool_worker *w;
} stt_remote_stream;

int stt_remote_context(void **ctx, const stt_config *cfg, wpool *pool, const speech_limits *lim) {
  *ctx = NULL;
  stt_remote *r = calloc(1, sizeof *r);
  if (!r) return err_set(ERR_NOMEM, "stt: handle");
  r->pool = pool;
  if (lim) r->lim = *lim;
  stt_config c = cfg ? *cfg : (stt_config){0};
  r->wait_ms = c.wait_ms > 0 ? c.wait_ms : 30000;
  uint32_t n_opt = 0;
  while (c.options && c.options[n_opt]) n_opt++;
  /* n_preload and n_max are not sent: a worker holds one stream at a time
   * (the pool bounds how many run), so front ends that differ only there
   * share workers without reloading the model. */
  int rc = wmsg_str(&r->blob, c.model_dir) || wmsg_str(&r->blob, c.lm) || wmsg_str(&r->blob, c.dict) ||
           wmsg_f64(&r->blob, c.split_min_s) || wmsg_u32(&r->blob, n_opt);
  for (uint32_t i = 0; !rc && i < n_opt; i++) rc = wmsg_str(&r->blob, c.options[i]);
  /* Padded to 4 bytes so the samples after it in a request stay aligned. */
  while (!rc && r->blob.len % 4) rc = buf_append_byte(&r->blob, 0);
  if (rc) {
    buf_free(&r->blob);
    free(r);
    return err_set(ERR_NOMEM, "stt: config");
  }
  *ctx = r;
  return 0;
}

static void remote_stt_close(void *ctx) {
  stt_remote *r = ctx;
  if (!r) return;
  buf_free(&r->blob);
  free(r);
}

/* The request: the config blob, then pcm when given. */
static int stt_request(const stt_remote *r, const int16_t *pcm, size_t n, buf *req) {
  if (wmsg_bytes(req, r->blob.data, r->blob.len)) return err_set(ERR_NOMEM, "stt: request");
  if (pcm && wmsg_bytes(req, pcm, n * sizeof *pcm)) return err_set(ERR_TOO_LARGE, "stt: %zu samples in one request", n);
  return 0;
}

static int parse_result(const buf *out, stt_result *res) {
  memset(res, 0, sizeof *res);
  wmsg_rd rd = wmsg_reader(out->data, out->len);
  res->text = wmsg_get_str(&rd);
  res->confidence = wmsg_get_f64(&rd);
  res->audio_seconds = wmsg_get_f64(&rd);
  res->decode_seconds = wmsg_get_f64(&rd);
  res->parts = wmsg_get_i32(&rd);
  uint32_t n = wmsg_get_u32(&rd);
  if (rd.ok && n > rd.n / 4) rd.ok = false; /* each word takes at least 4 bytes */
  if (rd.ok && n) {
    res->words = calloc(n, sizeof *res->words);
    if (!res->words) rd.ok = false;
  }
  for (uint32_t i = 0; rd.ok && i < n; i++) {
    stt_word *w = &res->words[i];
    res->n_words = i + 1;
    w->word = wmsg_get_str(&rd);
    w->start = wmsg_get_f64(&rd);
    w->end = wmsg_get_f64(&rd);
    w->confidence = wmsg_get_f64(&rd);
    if (!w->word) rd.ok = false;
  }
  if (!rd.ok || !res->text) {
    stt_result_free(res);
    return err_set(ERR_WORKER, "stt: the speech worker sent a malformed result");
  }
  return 0;
}

/* One call on w carrying pcm (may be NULL); a result parsed into res when
 * res is given, a string into text when text is given. */
static int stt_call(stt_remote *r, wpool_worker *w, uint32_t kind, const int16_t *pcm, size_t n, stt_result *res,
                    char **text) {
  buf req = BUF_INIT, out = BUF_INIT;
  int rc = stt_request(r, pcm, n, &req);
  double seconds = (double)n / 16000.0;
  if (!rc) rc = wpool_call(w, kind, req.data, req.len, limit_ms(&r->lim, seconds), NULL, NULL, &out);
  if (!rc && res) rc = parse_result(&out, res);
  if (!rc && text) {
    wmsg_rd rd = wmsg_reader(out.data, out.len);
    *text = wmsg_get_str(&rd);
    if (!*text) rc = err_set(ERR_WORKER, "stt: the speech worker sent a malformed partial");
  }
  buf_free(&req);
  buf_free(&out);
  return rc;
}

static int remote_transcribe(void *ctx, const int16_t *pcm, size_t n, stt_result *out) {
  stt_remote *r = ctx;
  wpool_worker *w;
  int rc = wpool_acquire(r->pool, r->wait_ms, &w);
  if (rc) return rc;
  rc = stt_call(r, w, SPW_STT_TRANSCRIBE, pcm ? pcm : (const int16_t *)"", n, out, NULL);
  wpool_release(w);
  return rc;
}

static int remote_stream_begin(void *ctx, void **out) {
  stt_remote *r = ctx;
  *out = NULL;
  stt_remote_stream *st = calloc(1, sizeof *st);
  if (!st) return err_set(ERR_NOMEM, "stt: stream");
  st->r = r;
  int rc = wpool_acquire(r->pool, r->wait_ms, &st->w);
  if (!rc) rc = stt_call(r, st->w, SPW_STT_BEGIN, NULL, 0, NULL, NULL);
  if (rc) {
    if (st->w) wpool_release(st->w);
    free(st);
    return rc;
  }
  *out = st;
  return 0;
}

static int remote_stream_feed(void *s, const int16_t *pcm, size_t n) {
  stt_remote_stream *st = s;
  return stt_call(st->r, st->w, SPW_STT_FEED, pcm ? pcm : (const int16_t *)"", n, NULL, NULL);
}

static int remote_stream_partial(void *s, char **text) {
  stt_remote_stream *st = s;
  return stt_call(st->r, st->w, SPW_STT_PARTIAL, NULL, 0, NULL, text);
}

static int remote_stream_end(void *s, stt_result *out) {
  stt_remote_stream *st = s;
  return stt_call(st->r, st->w, SPW_STT_END, NULL, 0, out, NULL);
}

static int remote_stream_transcribe(void *s, const int16_t *pcm, size_t n, stt_result *out) {
  stt_remote_stream *st = s;
  return stt_call(st->r, st->w, SPW_STT_STREAM_TRANSCRIBE, pcm ? pcm : (const int16_t *)"", n, out, NULL);
}

static void remote_stream_free(void *s) {
  stt_remote_stream *st = s;
  if (!st) return;
  /* The worker drops its stream; a worker that fails even that is retired. */
  if (wpool_worker_alive(st->w)) stt_call(st->r, st->w, SPW_STT_FREE, NULL, 0, NULL, NULL);
  wpool_release(st->w);
  free(st);
}

const stt_backend_ops stt_backend_remote = {
    .name = "pocketsphinx",
    .sample_rate = 16000, /* pocketsphinx's; the worker refuses audio for another rate */
    .open = NULL,
    .close = remote_stt_close,
    .transcribe = remote_transcribe,
    .stream_begin = remote_stream_begin,
    .stream_feed = remote_stream_feed,
    .stream_partial = remote_stream_partial,
    .stream_end = remote_stream_end,
    .stream_free = remote_stream_free,
    .stream_transcribe = remote_stream_transcribe,
    .stream_try_begin = NULL, /* the worker splits long audio across its own decoders */
};

/* ---- decoding -------------------------------------------------------------------- */

static size_t sample_bytes(enum audio_sample_fmt f) { return f == AUDIO_SAMPLE_S16 ? 2 : 4; }

int speech_decode_remote(wpool *pool, const speech_limits *lim, const void *bytes, size_t len,
                         const audio_decode_opts *opts, audio_pcm *out) {
  memset(out, 0, sizeof *out);
  audio_decode_opts o = opts ? *opts : (audio_decode_opts){0};
  buf req = BUF_INIT, res = BUF_INIT;
  if (wmsg_i32(&req, (int32_t)o.raw) || wmsg_i32(&req, o.raw_rate) || wmsg_i32(&req, o.raw_channels) ||
      wmsg_i32(&req, o.target_rate) || wmsg_i32(&req, o.target_channels) || wmsg_i32(&req, o.split_channels) ||
      wmsg_i32(&req, (int32_t)o.fmt) || wmsg_f64(&req, o.max_seconds) || wmsg_str(&req, o.hint) ||
      wmsg_bytes(&req, bytes, len)) {
    buf_free(&req);
    return err_set(ERR_TOO_LARGE, "audio: %zu bytes is too large to decode", len);
  }
  speech_limits l = lim ? *lim : (speech_limits){0};
  wpool_worker *w;
  int rc = wpool_acquire(pool, -1, &w);
  /* Decoding runs far faster than real time: a second per MB covers it. */
  if (!rc) {
    rc = wpool_call(w, SPW_DECODE, req.data, req.len, limit_ms(&l, (double)len / 1e6), NULL, NULL, &res);
    wpool_release(w);
  }
  buf_free(&req);
  if (rc) {
    buf_free(&res);
    return rc;
  }
  wmsg_rd rd = wmsg_reader(res.data, res.len);
  out->rate = wmsg_get_i32(&rd);
  out->channels = wmsg_get_i32(&rd);
  out->fmt = wmsg_get_i32(&rd) == AUDIO_SAMPLE_S16 ? AUDIO_SAMPLE_S16 : AUDIO_SAMPLE_F32;
  out->planar = wmsg_get_i32(&rd) != 0;
  out->src_rate = wmsg_get_i32(&rd);
  out->src_channels = wmsg_get_i32(&rd);
  char *container = wmsg_get_str(&rd), *codec = wmsg_get_str(&rd);
  size_t n;
  const uint8_t *data = wmsg_get_bytes(&rd, &n);
  size_t frame = sample_bytes(out->fmt) * (size_t)(out->channels > 0 ? out->channels : 1);
  if (rd.ok && container && codec && out->channels > 0 && n % frame == 0) {
    snprintf(out->container, sizeof out->container, "%s", container);
    snprintf(out->codec, sizeof out->codec, "%s", codec);
    out->n_frames = n / frame;
    /* The samples move to the front of the reply buffer, which becomes
     * out->data: no second copy of a long recording. */
    memmove(res.data, data, n);
    res.len = n;
    out->data = buf_detach(&res, NULL);
  } else {
    rc = err_set(ERR_WORKER, "audio: the speech worker sent a malformed decoding result");
  }
  free(container);
  free(codec);
  buf_free(&res);
  return rc;
}
