/*
 * rt_audio.c - a Realtime session's audio: the input buffer (pcm16 at
 * 24 kHz or G.711 at 8 kHz, kept as int16 at that rate), an energy voice
 * activity detector for turn_detection server_vad / semantic_vad, speech to
 * text (pocketsphinx: fed incrementally while the user speaks, finished at
 * commit) and text to speech for responses (flite / espeak-ng, resampled to
 * the output rate and encoded in the output format).
 *
 * VAD: 10 ms frames; a frame is voiced when its RMS level in dBFS exceeds
 * -70 + 60 * threshold (threshold 0.5 -> -40 dBFS). Three voiced frames in a
 * row start speech (audio_start_ms goes back prefix_padding_ms); a pause of
 * silence_duration_ms stops it and commits the turn. While nobody speaks
 * the buffer keeps only the prefix padding, so silence costs no memory.
 *
 * Threads: everything but rt_speak runs on the session worker under s->mu;
 * rt_speak runs on a response's producer thread without the lock.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/openai/rt_int.h"
#include "audio/audio.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

#define RT_MAX_BUFFER_SECONDS 900 /* one turn; longer input is an error */

struct rt_ain {
  int16_t *pcm;         /* buffered input since the last commit/clear */
  size_t n, cap;
  int rate;
  uint64_t total;       /* samples received in this session */
  uint64_t start;       /* session sample index of pcm[0] */
  size_t vad_pos;       /* next pcm index the VAD looks at */
  bool speaking;
  int above;            /* voiced frames in a row */
  uint64_t first_above; /* session sample where they began */
  uint64_t last_voice;  /* session sample after the last voiced frame */
  uint64_t idle_from;   /* session sample where the current idle wait began */
  char item_id[RT_ID_MAX];
  stt_stream *st;       /* incremental decoder while speaking */
  size_t fed;           /* pcm index fed to it */
  size_t since_partial; /* samples fed since the last partial hypothesis */
  buf said;             /* transcript sent as deltas in this turn */
};

struct rt_ain *rt_ain_new(void) { return calloc(1, sizeof(struct rt_ain)); }

static void reset_turn(struct rt_ain *a) {
  if (a->st) stt_stream_free(a->st);
  a->st = NULL;
  a->fed = 0;
  a->since_partial = 0;
  a->speaking = false;
  a->above = 0;
  a->vad_pos = 0;
  buf_reset(&a->said);
}

void rt_ain_free(struct rt_ain *a) {
  if (!a) return;
  reset_turn(a);
  buf_free(&a->said);
  free(a->pcm);
  free(a);
}

/* Drops the first k samples of the buffer. */
static void drop(struct rt_ain *a, size_t k) {
  if (k > a->n) k = a->n;
  if (k == 0) return;
  if (a->n > k) memmove(a->pcm, a->pcm + k, (a->n - k) * sizeof *a->pcm);
  a->n -= k;
  a->start += k;
  a->vad_pos = a->vad_pos > k ? a->vad_pos - k : 0;
  a->fed = a->fed > k ? a->fed - k : 0;
}

static long long ms_of(const struct rt_ain *a, uint64_t sample) {
  return a->rate ? (long long)(sample * 1000 / (uint64_t)a->rate) : 0;
}

/* ---- speech to text ----------------------------------------------------------- */

/* Feeds pcm[from..to) to the stream, resampled to the decoder's rate. */
static int stt_feed_range(rt_session *s, struct rt_ain *a, size_t from, size_t to) {
  stt *e = rt_stt(s->rc);
  if (!e || !a->st || to <= from) return 0;
  int16_t *res = NULL;
  size_t n_res = 0;
  int rc = audio_resample_s16(a->pcm + from, to - from, 1, a->rate, stt_sample_rate(e), &res, &n_res);
  if (!rc) rc = stt_stream_feed(a->st, res, n_res);
  free(res);
  a->since_partial += to - from;
  return rc;
}

static void send_delta(rt_session *s, const char *item_id, const char *delta, size_t len) {
  if (!len) return;
  rt_send(s, "conversation.item.input_audio_transcription.delta",
          json_pack("{s:s, s:i, s:s%}", "item_id", item_id, "content_index", 0, "delta", delta, len));
}

static bool tr_events(const rt_session *s) { return s->cfg.tr_enabled || s->cfg.transcription; }

/* Sends what a hypothesis adds to the text already sent (append-only). */
static void emit_growth(rt_session *s, struct rt_ain *a, const char *hyp, const char *item_id) {
  size_t have = a->said.len, n = strlen(hyp);
  if (n <= have || (have && memcmp(hyp, a->said.data, have) != 0)) return;
  /* Hold back a last word that may still change. */
  const char *end = hyp + n;
  if (hyp[n - 1] != ' ') {
    const char *sp = strrchr(hyp + have, ' ');
    if (!sp) return;
    end = sp + 1;
  }
  if ((size_t)(end - hyp) <= have) return;
  send_delta(s, item_id, hyp + have, (size_t)(end - hyp) - have);
  buf_append(&a->said, hyp + have, (size_t)(end - hyp) - have);
}

static int transcribe_pcm(stt *e, const int16_t *pcm, size_t n, int rate, stt_result *out) {
  int16_t *res = NULL;
  size_t n_res = 0;
  int rc = audio_resample_s16(pcm, n, 1, rate, stt_sample_rate(e), &res, &n_res);
  if (!rc) rc = stt_transcribe(e, res, n_res, out);
  free(res);
  return rc;
}

/* ---- input decoding --------------------------------------------------------------- */

static int decode_input(enum rt_fmt f, const uint8_t *bytes, size_t n, int16_t **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  if (f == RT_FMT_PCM16 && n % 2)
    return err_set(ERR_INVALID, "audio: pcm16 needs an even number of bytes, got %zu", n);
  size_t k = f == RT_FMT_PCM16 ? n / 2 : n;
  int16_t *p = malloc((k ? k : 1) * sizeof *p);
  if (!p) return err_set(ERR_NOMEM, "audio");
  for (size_t i = 0; i < k; i++) {
    if (f == RT_FMT_PCM16) p[i] = (int16_t)(uint16_t)(bytes[2 * i] | (bytes[2 * i + 1] << 8));
    else if (f == RT_FMT_ULAW) p[i] = g711_mulaw_decode(bytes[i]);
    else p[i] = g711_alaw_decode(bytes[i]);
  }
  *out = p;
  *n_out = k;
  return 0;
}

int rt_transcribe_b64(rt_session *s, const char *b64, char **text) {
  *text = NULL;
  uint8_t *bytes = NULL;
  size_t n = 0;
  int rc = rt_b64_decode(b64, strlen(b64), &bytes, &n);
  int16_t *pcm = NULL;
  size_t k = 0;
  if (!rc) rc = decode_input(s->cfg.in_fmt, bytes, n, &pcm, &k);
  free(bytes);
  stt *e = rc ? NULL : rt_stt(s->rc);
  if (!rc && !e) rc = err_set(ERR_UNAVAILABLE, "speech to text is not available on this server");
  stt_result r = {0};
  if (!rc && k) rc = transcribe_pcm(e, pcm, k, rt_fmt_rate(s->cfg.in_fmt), &r);
  if (!rc) *text = str_dup(r.text ? r.text : "");
  stt_result_free(&r);
  free(pcm);
  return rc;
}

/* ---- VAD ------------------------------------------------------------------------------ */

static bool voiced(const int16_t *p, size_t n, double threshold) {
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += (double)p[i] * p[i];
  double rms = sqrt(sum / (double)(n ? n : 1));
  double db = rms > 0 ? 20.0 * log10(rms / 32768.0) : -200.0;
  return db > -70.0 + 60.0 * threshold;
}

static void speech_started(rt_session *s, struct rt_ain *a) {
  uint64_t pad = (uint64_t)s->cfg.td_prefix_ms * (uint64_t)a->rate / 1000;
  uint64_t from = a->first_above > pad ? a->first_above - pad : 0;
  if (from < a->start) from = a->start;
  drop(a, (size_t)(from - a->start));
  a->speaking = true;
  a->fed = 0;
  a->idle_from = a->last_voice;
  rt_make_id(a->item_id, "item_");
  rt_send(s, "input_audio_buffer.speech_started",
          json_pack("{s:I, s:s}", "audio_start_ms", (json_int_t)ms_of(a, from), "item_id", a->item_id));
  if (s->resp && s->cfg.td_interrupt) rt_response_cancel(s, "turn_detected");
  stt *e = rt_stt(s->rc);
  if (e && stt_stream_begin(e, &a->st)) {
    LOG_WARN("realtime", "no speech decoder for the turn: %s", err_detail());
    a->st = NULL;
  }
}

/* server_vad idle_timeout_ms: no speech for that long (in audio time, not
 * counting while a response runs) commits the quiet buffer with
 * input_audio_buffer.timeout_triggered and, with create_response, asks the
 * model to go on. Returns true when it fired (the buffer was committed). */
static bool idle_timeout(rt_session *s, struct rt_ain *a, uint64_t now) {
  if (s->cfg.td != RT_TD_SERVER_VAD || s->cfg.td_idle_ms <= 0 || s->resp) {
    a->idle_from = now;
    return false;
  }
  uint64_t wait = (uint64_t)s->cfg.td_idle_ms * (uint64_t)a->rate / 1000;
  if (now - a->idle_from < wait) return false;
  rt_make_id(a->item_id, "item_");
  rt_send(s, "input_audio_buffer.timeout_triggered",
          json_pack("{s:I, s:I, s:s}", "audio_start_ms", (json_int_t)ms_of(a, a->idle_from), "audio_end_ms",
                    (json_int_t)ms_of(a, now), "item_id", a->item_id));
  a->idle_from = now;
  rt_audio_commit(s, NULL, true);
  return true;
}

static void run_vad(rt_session *s, struct rt_ain *a) {
  size_t frame = (size_t)a->rate / 100;
  uint64_t pad = (uint64_t)s->cfg.td_prefix_ms * (uint64_t)a->rate / 1000;
  uint64_t silence = (uint64_t)s->cfg.td_silence_ms * (uint64_t)a->rate / 1000;
  while (a->vad_pos + frame <= a->n) {
    bool v = voiced(a->pcm + a->vad_pos, frame, s->cfg.td_threshold);
    uint64_t frame_start = a->start + a->vad_pos, frame_end = frame_start + frame;
    a->vad_pos += frame;
    if (!a->speaking) {
      if (v) {
        if (a->above++ == 0) a->first_above = frame_start;
        if (a->above >= 3) {
          a->last_voice = frame_end;
          speech_started(s, a);
        }
      } else {
        a->above = 0;
        if (idle_timeout(s, a, frame_end)) continue;
        /* Keep only the prefix padding (and a little) while nobody speaks. */
        if (a->vad_pos > pad + 50 * frame) drop(a, a->vad_pos - pad - frame);
      }
      continue;
    }
    if (v) a->last_voice = frame_end;
    if (a->st && a->vad_pos - a->fed >= frame * 10) {
      stt_feed_range(s, a, a->fed, a->vad_pos);
      a->fed = a->vad_pos;
      if (tr_events(s) && a->since_partial >= (size_t)a->rate / 2) {
        char *hyp = NULL;
        a->since_partial = 0;
        if (!stt_stream_partial(a->st, &hyp) && hyp) emit_growth(s, a, hyp, a->item_id);
        free(hyp);
      }
    }
    if (frame_end - a->last_voice >= silence) {
      rt_send(s, "input_audio_buffer.speech_stopped",
              json_pack("{s:I, s:s}", "audio_end_ms", (json_int_t)ms_of(a, frame_end), "item_id", a->item_id));
      rt_audio_commit(s, NULL, true);
      if (a->n < frame) return;
    }
  }
}

int rt_audio_append(rt_session *s, const uint8_t *bytes, size_t n, const char *event_id) {
  (void)event_id;
  struct rt_ain *a = s->ain;
  int rate = rt_fmt_rate(s->cfg.in_fmt);
  if (a->rate != rate) { /* the input format changed: a new buffer */
    reset_turn(a);
    a->n = 0;
    a->start = a->total = 0;
    a->rate = rate;
  }
  int16_t *pcm = NULL;
  size_t k = 0;
  int rc = decode_input(s->cfg.in_fmt, bytes, n, &pcm, &k);
  if (rc) return rc;
  if (a->n + k > (size_t)RT_MAX_BUFFER_SECONDS * (size_t)rate) {
    free(pcm);
    return err_set(ERR_TOO_LARGE, "audio: the input buffer would exceed %d seconds; commit or clear it",
                   RT_MAX_BUFFER_SECONDS);
  }
  if (a->n + k > a->cap) {
    size_t cap = a->cap ? a->cap : (size_t)rate;
    while (cap < a->n + k) cap *= 2;
    int16_t *grown = realloc(a->pcm, cap * sizeof *grown);
    if (!grown) {
      free(pcm);
      return err_set(ERR_NOMEM, "audio buffer");
    }
    a->pcm = grown;
    a->cap = cap;
  }
  if (k) memcpy(a->pcm + a->n, pcm, k * sizeof *pcm);
  a->n += k;
  a->total += k;
  free(pcm);
  if (s->cfg.td != RT_TD_NONE) run_vad(s, a);
  return 0;
}

/* ---- commit / clear ------------------------------------------------------------------- */

void rt_audio_commit(rt_session *s, const char *event_id, bool vad) {
  struct rt_ain *a = s->ain;
  size_t n = vad ? a->vad_pos : a->n;
  if (!vad && (a->rate == 0 || n < (size_t)a->rate / 10)) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer "
             "only has %.2fms of audio.",
             a->rate ? (double)n * 1000.0 / a->rate : 0.0);
    rt_error(s, "invalid_request_error", "input_audio_buffer_commit_empty", msg, NULL, event_id);
    return;
  }
  char id[RT_ID_MAX];
  if (vad && a->item_id[0]) snprintf(id, sizeof id, "%s", a->item_id);
  else rt_make_id(id, "item_");
  char prev[RT_ID_MAX] = "";
  const char *last = rt_last_item_id(s);
  if (last) snprintf(prev, sizeof prev, "%s", last);
  rt_send(s, "input_audio_buffer.committed",
          json_pack("{s:o, s:s}", "previous_item_id", last ? json_string(prev) : json_null(), "item_id", id));
  json_t *item = NULL;
  if (!s->cfg.transcription) {
    item = json_pack("{s:s, s:s, s:s, s:s, s:s, s:[{s:s, s:n}]}", "id", id, "object", "realtime.item", "type",
                     "message", "status", "completed", "role", "user", "content", "type", "input_audio", "transcript");
    rt_item_append(s, item);
    rt_item_announce(s, item, last ? prev : NULL);
  }
  /* The transcript: the incremental decoder when it ran, else all at once. */
  stt *e = rt_stt(s->rc);
  stt_result r = {0};
  int rc;
  double seconds = a->rate ? (double)n / a->rate : 0;
  if (!e) {
    rc = err_set(ERR_UNAVAILABLE, "speech to text is not available on this server");
  } else if (a->st) {
    rc = stt_feed_range(s, a, a->fed, n);
    if (!rc) rc = stt_stream_end(a->st, &r);
  } else {
    rc = transcribe_pcm(e, a->pcm, n, a->rate, &r);
  }
  if (rc) {
    if (tr_events(s))
      rt_send(s, "conversation.item.input_audio_transcription.failed",
              json_pack("{s:s, s:i, s:{s:s, s:n, s:s, s:n}}", "item_id", id, "content_index", 0, "error", "type",
                        "transcription_error", "code", "message", err_detail(), "param"));
  } else {
    const char *text = r.text ? r.text : "";
    if (tr_events(s)) {
      size_t have = a->said.len;
      if (strlen(text) > have && (!have || memcmp(text, a->said.data, have) == 0))
        send_delta(s, id, text + have, strlen(text) - have);
      rt_send(s, "conversation.item.input_audio_transcription.completed",
              json_pack("{s:s, s:i, s:s, s:{s:s, s:f}}", "item_id", id, "content_index", 0, "transcript", text,
                        "usage", "type", "duration", "seconds", seconds));
    }
    if (item) json_object_set_new(json_array_get(json_object_get(item, "content"), 0), "transcript", json_string(text));
  }
  stt_result_free(&r);
  json_decref(item);
  drop(a, n);
  reset_turn(a);
  a->idle_from = a->start;
  a->item_id[0] = '\0';
  /* A response still speaking (interrupt_response false) keeps the floor:
   * the turn stays in the conversation for the next response. */
  if (vad && s->cfg.td_create_response && !s->cfg.transcription && !s->resp) rt_response_create(s, NULL, NULL);
}

void rt_audio_clear(rt_session *s) {
  struct rt_ain *a = s->ain;
  drop(a, a->n);
  reset_turn(a);
  a->item_id[0] = '\0';
}

/* ---- speech out ------------------------------------------------------------------------- */

struct speak {
  rt_session *s;
  struct rt_resp *r;
  const char *item_id;
  int ix;
  int out_rate;
  enum rt_fmt fmt;
  buf bytes;      /* encoded, not yet sent */
  size_t chunk;   /* bytes per delta (~200 ms) */
  double ms;
};

static void send_audio(struct speak *k, size_t len) {
  char *b64 = rt_b64_encode(k->bytes.data, len);
  if (b64)
    rt_send(k->s, "response.output_audio.delta",
            json_pack("{s:s, s:s, s:i, s:i, s:s}", "response_id", k->r->id, "item_id", k->item_id, "output_index",
                      k->ix, "content_index", 0, "delta", b64));
  free(b64);
  memmove(k->bytes.data, k->bytes.data + len, k->bytes.len - len);
  k->bytes.len -= len;
}

static int on_pcm(void *user, const int16_t *pcm, size_t n, int rate) {
  struct speak *k = user;
  if (atomic_load(&k->r->cancel)) return 1;
  int16_t *res = NULL;
  size_t n_res = 0;
  if (audio_resample_s16(pcm, n, 1, rate, k->out_rate, &res, &n_res)) return 1;
  for (size_t i = 0; i < n_res; i++) {
    if (k->fmt == RT_FMT_PCM16) {
      uint16_t u = (uint16_t)res[i];
      buf_append_byte(&k->bytes, (char)(u & 0xff));
      buf_append_byte(&k->bytes, (char)(u >> 8));
    } else {
      buf_append_byte(&k->bytes, (char)(k->fmt == RT_FMT_ULAW ? g711_mulaw_encode(res[i]) : g711_alaw_encode(res[i])));
    }
  }
  free(res);
  k->ms += (double)n_res * 1000.0 / k->out_rate;
  while (k->bytes.len >= k->chunk) send_audio(k, k->chunk);
  return 0;
}

int rt_speak(rt_session *s, struct rt_resp *r, const char *text, const char *item_id, int output_index) {
  tts *t = rt_tts(s->rc);
  if (!t || !text || !*text) return atomic_load(&r->cancel) ? 1 : 0;
  tts_choice ch;
  if (tts_voice_resolve(t, r->voice, &ch) && tts_voice_resolve(t, NULL, &ch)) return 0;
  struct speak k = {.s = s, .r = r, .item_id = item_id, .ix = output_index, .out_rate = rt_fmt_rate(r->out_fmt),
                    .fmt = r->out_fmt, .bytes = BUF_INIT};
  k.chunk = (size_t)k.out_rate / 5 * (r->out_fmt == RT_FMT_PCM16 ? 2 : 1);
  double speed = r->speed < TTS_SPEED_MIN ? 1.0 : r->speed;
  int rc = tts_synthesize(t, &ch, text, speed, on_pcm, &k);
  if (k.bytes.len && !atomic_load(&r->cancel)) send_audio(&k, k.bytes.len);
  buf_free(&k.bytes);
  r->audio_ms += k.ms;
  if (rc && rc != ERR_CANCELLED) {
    /* The speech worker crashed or passed its time limit: the client hears
     * why in an error event; the session and the server go on. */
    LOG_WARN("realtime", "speech synthesis failed: %s", err_detail());
    rt_error(s, "server_error", rc == ERR_TIMEOUT ? "speech_timeout" : "speech_failed", err_detail(), NULL, NULL);
  }
  return atomic_load(&r->cancel) ? 1 : 0;
}
