/*
 * speech_worker.c - the worker process's side: the real engines (tts_open,
 * stt_open, audio_decode) behind the request kinds of speech_worker.h.
 *
 * A worker serves one call at a time (wpool_serve), so its state needs no
 * lock: the TTS front end opened at the first TTS request, the STT front
 * end opened at the first STT request with the config the server sent
 * (reopened if a later request carries another config and no stream is
 * open), and at most one STT stream, held between SPW_STT_BEGIN and
 * SPW_STT_FREE. Engines stay loaded until the server closes the socket.
 *
 * Start reading at speech_worker_main().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "speech/speech_worker.h"

typedef struct spw_state {
  tts *tts;
  int tts_rc;
  char tts_err[256];
  stt *stt;
  buf stt_blob;     /* the config stt was opened with */
  stt_stream *st;   /* the open stream, or NULL */
} spw_state;

/* ---- text to speech --------------------------------------------------------- */

static int need_tts(spw_state *S) {
  if (!S->tts && !S->tts_rc) {
    S->tts_rc = tts_open(&S->tts);
    if (S->tts_rc) snprintf(S->tts_err, sizeof S->tts_err, "%s", err_detail());
  }
  return S->tts_rc ? err_set(S->tts_rc, "%s", S->tts_err) : 0;
}

static int h_tts_voices(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  spw_state *S = ctx;
  (void)c;
  wmsg_rd rd = wmsg_reader(req, n);
  char *backend = wmsg_get_str(&rd);
  int rc = backend ? need_tts(S) : err_set(ERR_PARSE, "worker: bad voices request");
  uint32_t count = 0;
  for (size_t i = 0; !rc && i < tts_n_voices(S->tts); i++) count += strcmp(tts_voice_at(S->tts, i)->backend, backend) == 0;
  if (!rc && count == 0) rc = err_set(ERR_NOT_FOUND, "tts: backend %s is not available in the worker", backend);
  if (!rc) rc = wmsg_u32(out, count);
  for (size_t i = 0; !rc && i < tts_n_voices(S->tts); i++) {
    const tts_voice *v = tts_voice_at(S->tts, i);
    if (strcmp(v->backend, backend) != 0) continue;
    rc = wmsg_str(out, v->name) || wmsg_str(out, v->language) || wmsg_str(out, v->gender) ||
                 wmsg_i32(out, v->sample_rate) || wmsg_str(out, v->description)
             ? err_set(ERR_NOMEM, "worker: voice list")
             : 0;
  }
  free(backend);
  return rc;
}

typedef struct synth_ctx {
  wpool_conn *c;
  buf chunk;
} synth_ctx;

/* Each chunk goes to the server as it comes; a CANCEL from the server (its
 * client went away, or a Clear) stops the engine at the next chunk. */
static int send_pcm(void *user, const int16_t *pcm, size_t n, int rate) {
  synth_ctx *sc = user;
  buf_reset(&sc->chunk);
  if (wmsg_i32(&sc->chunk, rate) || wmsg_bytes(&sc->chunk, pcm, n * sizeof *pcm)) return 1;
  if (wpool_conn_send(sc->c, SPW_PCM, sc->chunk.data, sc->chunk.len)) return 1;
  return wpool_conn_cancelled(sc->c);
}

static int h_tts_synth(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  spw_state *S = ctx;
  (void)out;
  wmsg_rd rd = wmsg_reader(req, n);
  char *backend = wmsg_get_str(&rd), *voice = wmsg_get_str(&rd), *variant = wmsg_get_str(&rd);
  double speed = wmsg_get_f64(&rd);
  char *text = wmsg_get_str(&rd);
  int rc = rd.ok && backend && voice && variant && text ? need_tts(S) : err_set(ERR_PARSE, "worker: bad synthesis request");
  tts_choice ch;
  if (!rc) rc = tts_voice_resolve(S->tts, voice, &ch);
  if (!rc && strcmp(ch.voice->backend, backend) != 0)
    rc = err_set(ERR_NOT_FOUND, "tts: voice %s is not a %s voice in the worker", voice, backend);
  if (!rc) {
    snprintf(ch.variant, sizeof ch.variant, "%s", variant);
    synth_ctx sc = {c, BUF_INIT};
    rc = tts_synthesize(S->tts, &ch, text, speed, send_pcm, &sc);
    buf_free(&sc.chunk);
  }
  free(backend);
  free(voice);
  free(variant);
  free(text);
  return rc;
}

/* ---- speech to text --------------------------------------------------------------- */

/* Opens (or reopens) the STT front end for the config blob that leads req;
 * *pcm / *n_pcm get the samples that follow it, if any. */
static int need_stt(spw_state *S, wmsg_rd *rd, const int16_t **pcm, size_t *n_pcm) {
  size_t bl;
  const uint8_t *blob = wmsg_get_bytes(rd, &bl);
  if (pcm) {
    size_t nb;
    const uint8_t *p = wmsg_get_bytes(rd, &nb);
    if (nb % 2) rd->ok = false;
    /* The server pads the blob to 4 bytes, so the samples are aligned. */
    *pcm = (const int16_t *)(const void *)p;
    *n_pcm = nb / 2;
    if ((uintptr_t)p % 2) rd->ok = false;
  }
  if (!rd->ok) return err_set(ERR_PARSE, "worker: bad speech-to-text request");
  if (S->stt && S->stt_blob.len == bl && memcmp(S->stt_blob.data, blob, bl) == 0) return 0;
  if (S->st) return err_set(ERR_INVALID, "worker: a stream is open; the config cannot change");
  wmsg_rd c = wmsg_reader(blob, bl);
  char *model_dir = wmsg_get_str(&c), *lm = wmsg_get_str(&c), *dict = wmsg_get_str(&c);
  /* One stream at a time, and a second decoder for the far half of a long
   * recording (stt_transcribe splits past split_min_s). */
  stt_config cfg = {.n_preload = 1, .n_max = 2};
  cfg.split_min_s = wmsg_get_f64(&c);
  uint32_t n_opt = wmsg_get_u32(&c);
  char **opts = c.ok && n_opt < 1000 ? calloc(n_opt + 1, sizeof *opts) : NULL;
  int rc = opts && model_dir && lm && dict ? 0 : err_set(ERR_PARSE, "worker: bad speech-to-text config");
  for (uint32_t i = 0; !rc && i < n_opt; i++)
    if (!(opts[i] = wmsg_get_str(&c))) rc = err_set(ERR_PARSE, "worker: bad speech-to-text option");
  if (!rc) {
    cfg.model_dir = *model_dir ? model_dir : NULL;
    cfg.lm = *lm ? lm : NULL;
    cfg.dict = *dict ? dict : NULL;
    cfg.options = n_opt ? (const char *const *)opts : NULL;
    cfg.wait_ms = 1; /* nothing else here waits for a decoder */
    stt_close(S->stt);
    S->stt = NULL;
    buf_reset(&S->stt_blob);
    rc = stt_open(&S->stt, &cfg);
    if (!rc && stt_sample_rate(S->stt) != stt_backend_remote.sample_rate)
      rc = err_set(ERR_INTERNAL, "worker: the decoder takes %d Hz, the server sends %d Hz", stt_sample_rate(S->stt),
                   stt_backend_remote.sample_rate);
    if (!rc && buf_append(&S->stt_blob, blob, bl)) rc = err_set(ERR_NOMEM, "worker: config");
    if (rc && S->stt) {
      stt_close(S->stt);
      S->stt = NULL;
    }
  }
  for (uint32_t i = 0; opts && i < n_opt; i++) free(opts[i]);
  free(opts);
  free(model_dir);
  free(lm);
  free(dict);
  return rc;
}

static int put_result(buf *out, const stt_result *r) {
  int rc = wmsg_str(out, r->text) || wmsg_f64(out, r->confidence) || wmsg_f64(out, r->audio_seconds) ||
           wmsg_f64(out, r->decode_seconds) || wmsg_i32(out, r->parts) || wmsg_u32(out, (uint32_t)r->n_words);
  for (size_t i = 0; !rc && i < r->n_words; i++)
    rc = wmsg_str(out, r->words[i].word) || wmsg_f64(out, r->words[i].start) || wmsg_f64(out, r->words[i].end) ||
         wmsg_f64(out, r->words[i].confidence);
  return rc ? err_set(ERR_NOMEM, "worker: result") : 0;
}

static int need_stream(spw_state *S) { return S->st ? 0 : err_set(ERR_INVALID, "worker: no stream is open"); }

/* Whole-buffer recognition, on the front end (which may split long audio)
 * or on the open stream's decoder. */
static int transcribe(spw_state *S, const uint8_t *req, size_t n, buf *out, bool on_stream) {
  wmsg_rd rd = wmsg_reader(req, n);
  const int16_t *pcm;
  size_t np;
  int rc = need_stt(S, &rd, &pcm, &np);
  if (!rc && on_stream) rc = need_stream(S);
  stt_result r = {0};
  if (!rc) rc = on_stream ? stt_stream_transcribe(S->st, pcm, np, &r) : stt_transcribe(S->stt, pcm, np, &r);
  if (!rc) rc = put_result(out, &r);
  stt_result_free(&r);
  return rc;
}

static int h_stt_transcribe(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  (void)c;
  return transcribe(ctx, req, n, out, false);
}

static int h_stt_begin(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  spw_state *S = ctx;
  (void)c, (void)out;
  wmsg_rd rd = wmsg_reader(req, n);
  int rc = need_stt(S, &rd, NULL, NULL);
  if (!rc && S->st) rc = err_set(ERR_INVALID, "worker: a stream is already open");
  if (!rc) rc = stt_stream_begin(S->stt, &S->st);
  return rc;
}

static int h_stt_feed(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  spw_state *S = ctx;
  (void)c, (void)out;
  wmsg_rd rd = wmsg_reader(req, n);
  const int16_t *pcm;
  size_t np;
  int rc = need_stt(S, &rd, &pcm, &np);
  if (!rc) rc = need_stream(S);
  if (!rc) rc = stt_stream_feed(S->st, pcm, np);
  return rc;
}

static int h_stt_partial(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  spw_state *S = ctx;
  (void)c;
  wmsg_rd rd = wmsg_reader(req, n);
  int rc = need_stt(S, &rd, NULL, NULL);
  if (!rc) rc = need_stream(S);
  char *text = NULL;
  if (!rc) rc = stt_stream_partial(S->st, &text);
  if (!rc && wmsg_str(out, text ? text : "")) rc = err_set(ERR_NOMEM, "worker: partial");
  free(text);
  return rc;
}

static int h_stt_end(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  spw_state *S = ctx;
  (void)c;
  wmsg_rd rd = wmsg_reader(req, n);
  int rc = need_stt(S, &rd, NULL, NULL);
  if (!rc) rc = need_stream(S);
  stt_result r = {0};
  if (!rc) rc = stt_stream_end(S->st, &r);
  if (!rc) rc = put_result(out, &r);
  stt_result_free(&r);
  return rc;
}

static int h_stt_stream_transcribe(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  (void)c;
  return transcribe(ctx, req, n, out, true);
}

static int h_stt_free(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  spw_state *S = ctx;
  (void)c, (void)req, (void)n, (void)out;
  stt_stream_free(S->st);
  S->st = NULL;
  return 0;
}

/* ---- decoding ------------------------------------------------------------------------ */

static int h_decode(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  (void)ctx, (void)c;
  wmsg_rd rd = wmsg_reader(req, n);
  audio_decode_opts o = {0};
  int32_t raw = wmsg_get_i32(&rd);
  o.raw = raw == AUDIO_RAW_LINEAR16 ? AUDIO_RAW_LINEAR16 : raw == AUDIO_RAW_MULAW ? AUDIO_RAW_MULAW
          : raw == AUDIO_RAW_ALAW ? AUDIO_RAW_ALAW : AUDIO_RAW_NONE;
  o.raw_rate = wmsg_get_i32(&rd);
  o.raw_channels = wmsg_get_i32(&rd);
  o.target_rate = wmsg_get_i32(&rd);
  o.target_channels = wmsg_get_i32(&rd);
  o.split_channels = wmsg_get_i32(&rd) != 0;
  o.fmt = wmsg_get_i32(&rd) == AUDIO_SAMPLE_S16 ? AUDIO_SAMPLE_S16 : AUDIO_SAMPLE_F32;
  o.max_seconds = wmsg_get_f64(&rd);
  char *hint = wmsg_get_str(&rd);
  size_t len;
  const uint8_t *bytes = wmsg_get_bytes(&rd, &len);
  if (!rd.ok || !hint) {
    free(hint);
    return err_set(ERR_PARSE, "worker: bad decode request");
  }
  o.hint = *hint ? hint : NULL;
  audio_pcm pcm;
  int rc = audio_decode(bytes, len, &o, &pcm);
  free(hint);
  if (!rc) {
    size_t sz = (pcm.fmt == AUDIO_SAMPLE_S16 ? 2 : 4) * (size_t)pcm.channels * pcm.n_frames;
    if (wmsg_i32(out, pcm.rate) || wmsg_i32(out, pcm.channels) || wmsg_i32(out, (int32_t)pcm.fmt) ||
        wmsg_i32(out, pcm.planar) || wmsg_i32(out, pcm.src_rate) || wmsg_i32(out, pcm.src_channels) ||
        wmsg_str(out, pcm.container) || wmsg_str(out, pcm.codec) || wmsg_bytes(out, pcm.data, sz))
      rc = err_set(ERR_NOMEM, "worker: decoded audio of %zu bytes", sz);
  }
  audio_pcm_free(&pcm);
  return rc;
}

static const wpool_route ROUTES[] = {
    {SPW_TTS_VOICES, h_tts_voices},
    {SPW_TTS_SYNTH, h_tts_synth},
    {SPW_STT_TRANSCRIBE, h_stt_transcribe},
    {SPW_STT_BEGIN, h_stt_begin},
    {SPW_STT_FEED, h_stt_feed},
    {SPW_STT_PARTIAL, h_stt_partial},
    {SPW_STT_END, h_stt_end},
    {SPW_STT_STREAM_TRANSCRIBE, h_stt_stream_transcribe},
    {SPW_STT_FREE, h_stt_free},
    {SPW_DECODE, h_decode},
};

int speech_worker_main(int argc, char **argv) {
  (void)argc, (void)argv;
  int rc = wpool_worker_setup(WPOOL_FD);
  if (rc) return rc;
  audio_quiet_ffmpeg();
  spw_state S = {0};
  rc = wpool_serve(WPOOL_FD, ROUTES, ARRAY_LEN(ROUTES), &S);
  stt_stream_free(S.st);
  stt_close(S.stt);
  tts_close(S.tts);
  buf_free(&S.stt_blob);
  return rc;
}
