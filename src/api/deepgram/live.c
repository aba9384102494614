/*
 * live.c - Deepgram live speech to text over WebSocket, GET /v1/listen with
 * an upgrade (../shared/specs/deepgram.md section 4).
 *
 * Threads: the WebSocket loop thread runs on_message, which must not block:
 * it only copies audio and control messages into the session's queue and
 * wakes the session's worker thread. The worker turns bytes into 16 kHz
 * mono int16, runs a small energy voice-activity detector over 10 ms frames,
 * and drives one pocketsphinx stream per utterance (the pooled decoder is
 * held only while someone speaks). It sends every server message itself
 * (ws_send_* is thread-safe). The session is reference counted: one
 * reference for the loop (dropped in on_close) and one for the worker.
 *
 * Audio in: with `encoding` (linear16, mulaw, alaw + sample_rate, channels)
 * frames are raw; without it the stream is sniffed: a WAV header is parsed
 * and the samples after it are treated as raw (what both SDKs' examples
 * send); anything else is buffered and decoded with audio/ as it grows
 * (each attempt decodes the whole buffer, so attempts come every 16 KiB or
 * 1/8 of the buffer; a container that never decodes closes the socket with
 * 1002 DATA-0000).
 * Channels are downmixed, unless multichannel=true with raw or WAV input:
 * then each channel runs its own detector, utterances and clock, and its
 * messages carry channel_index [c, n] (each speaking channel holds a pooled
 * decoder; with more channels speaking than decoders, one waits).
 *
 * Utterances: speech starts when a frame's energy passes 3.5x the running
 * noise floor (and an absolute minimum); 300 ms of audio before it is fed as
 * pre-roll. An utterance ends (a final Results with speech_final true) after
 * max(endpointing, 300) ms of silence, with endpointing=false only at 15 s of
 * audio, on Finalize (from_finalize true) or on CloseStream. Finals cover
 * contiguous spans of the stream: each starts where the previous ended.
 * interim_results sends the partial hypothesis (is_final false, no word
 * timings yet) about once per second of speech. vad_events sends
 * SpeechStarted when an utterance begins; utterance_end_ms sends
 * UtteranceEnd once that long has passed without speech after the last
 * final word. KeepAlive only resets the 10 s idle timer (close 1011
 * NET-0001); CloseStream flushes, sends Metadata and closes with 1000.
 */
#include <math.h>
#include <libavutil/mem.h>
#include <libavutil/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/api.h"
#include "api/deepgram/deepgram.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "http/ws.h"

#define RATE 16000
#define FRAME 160                 /* 10 ms at 16 kHz */
#define PREROLL_FRAMES 30         /* 300 ms */
#define MIN_ENDPOINT_MS 300
#define MAX_UTT_S 15
#define INTERIM_EVERY_S 1.0
#define IDLE_TIMEOUT_MS 10000
#define QUEUE_MAX (32u << 20)     /* bytes waiting for the worker */
#define CONTAINER_MAX (64u << 20) /* buffered container bytes */
#define VAD_MIN_RMS 250.0

enum item_kind { ITEM_AUDIO, ITEM_FINALIZE, ITEM_CLOSE_STREAM };
typedef struct item {
  enum item_kind kind;
  struct item *next;
  size_t len;
  uint8_t data[];
} item;

enum in_mode { IN_RAW, IN_SNIFF, IN_CONTAINER };

typedef struct live_cfg {
  enum audio_raw raw;       /* AUDIO_RAW_NONE: sniff */
  int sample_rate, channels;
  bool interim, vad_events, multichannel;
  int endpoint_ms;          /* 0 = endpointing=false */
  int utterance_end_ms;     /* 0 = off */
  dg_fmt fmt;
} live_cfg;

/* One transcribed channel: its detector, utterance and clock. */
typedef struct lchan {
  int idx;
  int16_t *mono;            /* source-rate samples waiting for the resampler */
  size_t n_mono, cap_mono;
  int16_t frame[FRAME];
  size_t frame_fill;
  double noise;
  int16_t preroll[PREROLL_FRAMES * FRAME];
  size_t preroll_n;         /* samples in preroll (oldest first) */
  bool in_utt;
  stt_stream *st;
  uint64_t t;               /* 16 kHz samples processed */
  uint64_t utt_start, last_speech, last_final_end, last_interim;
  double last_word_end;     /* seconds; < 0 when none */
  bool utt_end_sent;
} lchan;

typedef struct live {
  stt_info info;            /* the model's (set before the session starts) */
  char language[16];        /* asked for, "" = the model's default */
  /* shared with the loop thread, under mu */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  item *head, *tail;
  size_t queued;
  bool gone;                /* on_close ran */
  int refs;
  uint64_t last_activity_ns;

  /* set before the worker starts */
  ws_conn *c;
  api_speech *sp;
  stt *stt;
  live_cfg cfg;
  char request_id[37], model_uuid[37];

  /* worker only */
  enum in_mode mode;
  int src_rate, src_channels;
  enum audio_raw src_raw;
  buf pending;              /* raw bytes short of a whole frame / WAV header / container bytes */
  size_t container_fed;     /* 16 kHz frames already fed from the container decode */
  size_t container_tried;   /* pending.len at the last decode attempt */
  struct AVSHA *sha;
  uint64_t bytes_in;
  lchan *ch;                /* AUDIO_CHANNELS_MAX of them; n_out in use */
  int n_out;                /* channels transcribed: 1, or the source's with multichannel */
  bool closing;             /* this side is closing: stop processing */
} live;

static void live_unref(live *L) {
  pthread_mutex_lock(&L->mu);
  int left = --L->refs;
  pthread_mutex_unlock(&L->mu);
  if (left) return;
  for (item *it = L->head; it;) {
    item *n = it->next;
    free(it);
    it = n;
  }
  for (int c = 0; L->ch && c < AUDIO_CHANNELS_MAX; c++) {
    if (L->ch[c].st) stt_stream_free(L->ch[c].st);
    free(L->ch[c].mono);
  }
  free(L->ch);
  buf_free(&L->pending);
  av_free(L->sha);
  pthread_cond_destroy(&L->cv);
  pthread_mutex_destroy(&L->mu);
  free(L);
}

/* ---- messages out ------------------------------------------------------------ */

static int send_json(live *L, json_t *v) {
  char *s = v ? api_speech_json_dumps(v) : NULL;
  json_decref(v);
  if (!s) return ERR_NOMEM;
  int rc = ws_send_text(L->c, s, strlen(s));
  free(s);
  return rc;
}

static void close_with(live *L, int code, const char *reason) {
  if (L->closing) return;
  L->closing = true;
  ws_close(L->c, code, reason);
}

static json_t *results_meta(const live *L) {
  return json_pack("{s:s, s:o, s:s}", "request_id", L->request_id, "model_info", dg_stt_model_info(&L->info), "model_uuid",
                   L->model_uuid);
}

static void send_results(live *L, lchan *C, json_t *alt, bool is_final, bool speech_final, bool from_finalize) {
  double start = (double)C->last_final_end / RATE, dur = (double)(C->t - C->last_final_end) / RATE;
  send_json(L, json_pack("{s:s, s:[i, i], s:f, s:f, s:b, s:b, s:b, s:{s:[o]}, s:o}", "type", "Results",
                         "channel_index", C->idx, L->n_out, "duration", dur, "start", start, "is_final", is_final,
                         "speech_final", speech_final, "from_finalize", from_finalize, "channel", "alternatives",
                         alt, "metadata", results_meta(L)));
}

/* ---- utterances ------------------------------------------------------------- */

static void finalize(live *L, lchan *C, bool speech_final, bool from_finalize) {
  stt_result r = {0};
  double offset = (double)C->utt_start / RATE;
  if (C->in_utt) {
    int rc = stt_stream_end(C->st, &r);
    stt_stream_free(C->st);
    C->st = NULL;
    C->in_utt = false;
    if (rc) LOG_WARN("deepgram", "live decode failed: %s", err_detail());
  }
  C->preroll_n = 0;
  json_t *alt = dg_alternative(&r, 0, r.n_words, offset, &L->cfg.fmt);
  send_results(L, C, alt, true, speech_final && r.n_words > 0, from_finalize);
  if (r.n_words) {
    C->last_word_end = r.words[r.n_words - 1].end + offset;
    C->utt_end_sent = false;
  }
  C->last_final_end = C->t;
  stt_result_free(&r);
}

static void interim(live *L, lchan *C) {
  char *text = NULL;
  if (stt_stream_partial(C->st, &text) == 0) {
    json_t *alt = json_pack("{s:s, s:f, s:[]}", "transcript", text ? text : "", "confidence", 0.0, "words");
    send_results(L, C, alt, false, false, false);
  }
  free(text);
  C->last_interim = C->t;
}

static int begin_utterance(live *L, lchan *C) {
  int rc = stt_stream_begin(L->stt, &C->st);
  stt_options so = {.language = L->language};
  if (!rc && (rc = stt_stream_set_options(C->st, &so))) {
    stt_stream_free(C->st);
    C->st = NULL;
  }
  if (rc) {
    LOG_WARN("deepgram", "live: no free decoder: %s", err_detail());
    close_with(L, WS_CLOSE_INTERNAL, "NET-0000: no speech decoder is free");
    return rc;
  }
  C->in_utt = true;
  C->utt_start = C->t - C->preroll_n;
  if (C->utt_start < C->last_final_end) C->utt_start = C->last_final_end;
  C->last_interim = C->t;
  if (C->preroll_n) stt_stream_feed(C->st, C->preroll, C->preroll_n);
  C->preroll_n = 0;
  if (L->cfg.vad_events)
    send_json(L, json_pack("{s:s, s:[i, i], s:f}", "type", "SpeechStarted", "channel", C->idx, L->n_out, "timestamp",
                           (double)C->t / RATE));
  return 0;
}

/* One 10 ms frame through the detector and, inside an utterance, the decoder. */
static void process_frame(live *L, lchan *C, const int16_t *f) {
  double e = 0;
  for (int i = 0; i < FRAME; i++) e += (double)f[i] * f[i];
  double rms = sqrt(e / FRAME);
  bool speech = rms > VAD_MIN_RMS && rms > 3.5 * C->noise;
  if (!speech) C->noise = 0.95 * C->noise + 0.05 * (rms > 1 ? rms : 1);
  if (!C->in_utt) {
    if (speech) {
      if (begin_utterance(L, C)) return;
    } else {
      if (C->preroll_n == PREROLL_FRAMES * FRAME) {
        memmove(C->preroll, C->preroll + FRAME, (PREROLL_FRAMES - 1) * FRAME * sizeof(int16_t));
        C->preroll_n -= FRAME;
      }
      memcpy(C->preroll + C->preroll_n, f, FRAME * sizeof(int16_t));
      C->preroll_n += FRAME;
    }
  }
  if (C->in_utt) stt_stream_feed(C->st, f, FRAME);
  C->t += FRAME;
  if (speech) C->last_speech = C->t;
  if (C->in_utt) {
    uint64_t ep = (uint64_t)(L->cfg.endpoint_ms < MIN_ENDPOINT_MS ? MIN_ENDPOINT_MS : L->cfg.endpoint_ms) * RATE / 1000;
    if (L->cfg.endpoint_ms && C->t - C->last_speech >= ep) finalize(L, C, true, false);
    else if (C->t - C->utt_start >= (uint64_t)MAX_UTT_S * RATE) finalize(L, C, false, false);
    else if (L->cfg.interim && C->t - C->last_interim >= (uint64_t)(INTERIM_EVERY_S * RATE)) interim(L, C);
  }
  if (L->cfg.utterance_end_ms && C->last_word_end >= 0 && !C->utt_end_sent) {
    double now = (double)C->t / RATE, quiet = (double)(C->t - C->last_speech) / RATE;
    double need = L->cfg.utterance_end_ms / 1000.0;
    if (now - C->last_word_end >= need && quiet >= need) {
      send_json(L, json_pack("{s:s, s:[i, i], s:f}", "type", "UtteranceEnd", "channel", C->idx, L->n_out, "last_word_end",
                             C->last_word_end));
      C->utt_end_sent = true;
    }
  }
}

/* 16 kHz mono samples, any count, into whole frames. */
static void feed_16k(live *L, lchan *C, const int16_t *s, size_t n) {
  for (size_t i = 0; i < n && !L->closing; i++) {
    C->frame[C->frame_fill++] = s[i];
    if (C->frame_fill == FRAME) {
      process_frame(L, C, C->frame);
      C->frame_fill = 0;
    }
  }
}

/* Source-rate mono samples: resampled in 100 ms blocks (whole blocks only
 * unless flushing, so block edges stay few). */
static void feed_mono(live *L, lchan *C, const int16_t *s, size_t n, bool flush) {
  if (L->src_rate == RATE) {
    feed_16k(L, C, s, n);
    return;
  }
  if (C->n_mono + n > C->cap_mono) {
    size_t cap = (C->n_mono + n) * 2;
    int16_t *m = realloc(C->mono, cap * sizeof *m);
    if (!m) return;
    C->mono = m;
    C->cap_mono = cap;
  }
  memcpy(C->mono + C->n_mono, s, n * sizeof *s);
  C->n_mono += n;
  size_t block = (size_t)L->src_rate / 10;
  size_t take = flush ? C->n_mono : C->n_mono / block * block;
  if (!take) return;
  int16_t *out = NULL;
  size_t n_out = 0;
  if (audio_resample_s16(C->mono, take, 1, L->src_rate, RATE, &out, &n_out) == 0) feed_16k(L, C, out, n_out);
  free(out);
  memmove(C->mono, C->mono + take, (C->n_mono - take) * sizeof *C->mono);
  C->n_mono -= take;
}

/* Raw frames in pending (linear16 or G.711, interleaved): one run per
 * transcribed channel, or the downmix. */
static void feed_raw(live *L, bool flush) {
  size_t bps = L->src_raw == AUDIO_RAW_LINEAR16 ? 2 : 1;
  size_t fsz = bps * (size_t)L->src_channels;
  size_t n = L->pending.len / fsz;
  if (!n) return;
  int16_t *m = malloc(n * sizeof *m);
  if (!m) return;
  const uint8_t *p = (const uint8_t *)L->pending.data;
  for (int out = 0; out < L->n_out; out++) {
    for (size_t i = 0; i < n; i++) {
      int sum = 0, from = L->n_out > 1 ? out : 0, to = L->n_out > 1 ? out + 1 : L->src_channels;
      for (int ch = from; ch < to; ch++) {
        const uint8_t *q = p + i * fsz + (size_t)ch * bps;
        int16_t v = L->src_raw == AUDIO_RAW_LINEAR16 ? (int16_t)(q[0] | (q[1] << 8))
                    : L->src_raw == AUDIO_RAW_MULAW  ? g711_mulaw_decode(q[0])
                                                     : g711_alaw_decode(q[0]);
        sum += v;
      }
      m[i] = (int16_t)(sum / (to - from));
    }
    feed_mono(L, &L->ch[out], m, n, flush);
  }
  size_t used = n * fsz;
  memmove(L->pending.data, L->pending.data + used, L->pending.len - used);
  L->pending.len -= used;
  free(m);
}

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Looks for a WAV header in pending: 1 = parsed (pending now holds samples),
 * 0 = need more bytes, -1 = not a WAV we read as raw (use the decoder). */
static int sniff_wav(live *L) {
  const uint8_t *p = (const uint8_t *)L->pending.data;
  size_t n = L->pending.len;
  if (n == 0) return 0;
  if (n < 12) return memcmp(p, "RIFF", n < 4 ? n : 4) == 0 ? 0 : -1;
  if (memcmp(p, "RIFF", 4) || memcmp(p + 8, "WAVE", 4)) return -1;
  size_t off = 12;
  int tag = -1, ch = 0, rate = 0, bits = 0;
  while (off + 8 <= n) {
    uint32_t sz = le32(p + off + 4);
    if (!memcmp(p + off, "fmt ", 4)) {
      if (off + 8 + 16 > n) return 0;
      tag = le16(p + off + 8);
      ch = le16(p + off + 10);
      rate = (int)le32(p + off + 12);
      bits = le16(p + off + 22);
      if (tag == 0xFFFE && sz >= 40) {
        if (off + 8 + 26 > n) return 0;
        tag = le16(p + off + 8 + 24); /* the extensible format's sub-format */
      }
    } else if (!memcmp(p + off, "data", 4)) {
      off += 8;
      if (ch < 1 || ch > AUDIO_CHANNELS_MAX || rate < AUDIO_RATE_MIN || rate > AUDIO_RATE_MAX) return -1;
      if (tag == 1 && bits == 16) L->src_raw = AUDIO_RAW_LINEAR16;
      else if (tag == 7 && bits == 8) L->src_raw = AUDIO_RAW_MULAW;
      else if (tag == 6 && bits == 8) L->src_raw = AUDIO_RAW_ALAW;
      else return -1;
      L->src_rate = rate;
      L->src_channels = ch;
      L->n_out = L->cfg.multichannel ? ch : 1;
      memmove(L->pending.data, L->pending.data + off, n - off);
      L->pending.len = n - off;
      return 1;
    }
    if (sz > (1u << 20)) return -1; /* a header chunk this big is no streaming WAV */
    off += 8 + sz + (sz & 1);
  }
  return 0;
}

/* Container bytes: decode everything buffered, feed what is new. */
static void feed_container(live *L, bool final) {
  /* each attempt decodes everything buffered, so attempts are spaced by
   * 16 KiB or an eighth of the buffer, whichever is more: the total work
   * stays a small multiple of the stream instead of growing with its square */
  size_t step = L->pending.len / 8 > 16384 ? L->pending.len / 8 : 16384;
  if (!final && L->pending.len - L->container_tried < step) return;
  L->container_tried = L->pending.len;
  audio_decode_opts o = {.target_rate = RATE, .target_channels = 1, .fmt = AUDIO_SAMPLE_S16};
  audio_pcm pcm = {0};
  int rc = api_speech_decode(L->sp, L->pending.data, L->pending.len, &o, &pcm);
  if (rc == ERR_WORKER || rc == ERR_TIMEOUT || rc == ERR_OVERLOADED) {
    /* The decoding worker died, hung or was not free: the server's fault,
     * not the audio's (1011, as for a missing decoder). */
    char reason[128];
    snprintf(reason, sizeof reason, "NET-0000: %.100s", err_detail());
    close_with(L, WS_CLOSE_INTERNAL, reason);
  } else if (rc) {
    if (final || L->pending.len >= 32768) {
      char reason[128];
      snprintf(reason, sizeof reason, "DATA-0000: the audio could not be decoded: %.70s", err_detail());
      close_with(L, WS_CLOSE_PROTOCOL, reason);
    }
  } else {
    size_t keep = final ? 0 : RATE / 10; /* the tail may still change as bytes arrive */
    if (pcm.n_frames > L->container_fed + keep) {
      size_t n = pcm.n_frames - keep - L->container_fed;
      feed_16k(L, &L->ch[0], (const int16_t *)pcm.data + L->container_fed, n);
      L->container_fed += n;
    }
  }
  audio_pcm_free(&pcm);
  if (L->pending.len > CONTAINER_MAX) close_with(L, WS_CLOSE_TOO_BIG, "DATA-0000: too much container audio");
}

static void on_audio(live *L, const uint8_t *d, size_t n, bool flush) {
  if (n) {
    av_sha_update(L->sha, d, n);
    L->bytes_in += n;
    if (buf_append(&L->pending, d, n)) return;
  }
  if (L->mode == IN_SNIFF) {
    int w = sniff_wav(L);
    if (w == 0 && L->pending.len > (4u << 20)) w = -1; /* no data chunk in 4 MiB: not a streaming WAV */
    if (w == 1) L->mode = IN_RAW;
    else if (w < 0 || (flush && L->pending.len)) L->mode = IN_CONTAINER;
    else return;
  }
  if (L->mode == IN_RAW) feed_raw(L, flush);
  else feed_container(L, flush);
  for (int c = 0; flush && c < L->n_out; c++)
    if (L->ch[c].n_mono) feed_mono(L, &L->ch[c], NULL, 0, true);
}

/* ---- the worker --------------------------------------------------------------- */

static void send_metadata(live *L) {
  uint8_t d[32];
  av_sha_final(L->sha, d);
  av_sha_init(L->sha, 256);
  char hex[65], created[40];
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
  api_speech_rfc3339_now(created, sizeof created);
  send_json(L, json_pack("{s:s, s:s, s:s, s:s, s:s, s:f, s:i, s:[s], s:{s:o}}", "type", "Metadata", "transaction_key",
                         "deprecated", "request_id", L->request_id, "sha256", hex, "created", created, "duration",
                         (double)L->ch[0].t / RATE, "channels", L->n_out, "models", L->model_uuid, "model_info", L->model_uuid,
                         dg_stt_model_info(&L->info)));
}

static void *live_main(void *arg) {
  live *L = arg;
  for (;;) {
    pthread_mutex_lock(&L->mu);
    while (!L->head && !L->gone) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 100000000;
      if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
      }
      pthread_cond_timedwait(&L->cv, &L->mu, &ts);
      if (!L->head && !L->gone && time_mono_ns() - L->last_activity_ns > (uint64_t)IDLE_TIMEOUT_MS * 1000000u) break;
    }
    item *it = L->head;
    if (it) {
      L->head = it->next;
      if (!L->head) L->tail = NULL;
      L->queued -= it->len;
    }
    bool gone = L->gone;
    pthread_mutex_unlock(&L->mu);
    if (gone) {
      free(it);
      break;
    }
    if (!it) { /* idle */
      close_with(L, WS_CLOSE_INTERNAL, "NET-0001: no audio or KeepAlive received for 10 seconds");
      break;
    }
    if (!L->closing) {
      if (it->kind == ITEM_AUDIO) {
        on_audio(L, it->data, it->len, false);
      } else {
        on_audio(L, NULL, 0, true);
        if (!L->closing) {
          for (int c = 0; c < L->n_out && !L->closing; c++) {
            lchan *C = &L->ch[c];
            if (C->frame_fill) { /* the last partial frame, padded with silence */
              memset(C->frame + C->frame_fill, 0, (FRAME - C->frame_fill) * sizeof(int16_t));
              C->frame_fill = 0;
              process_frame(L, C, C->frame);
            }
            finalize(L, C, it->kind == ITEM_CLOSE_STREAM, it->kind == ITEM_FINALIZE);
          }
          if (it->kind == ITEM_CLOSE_STREAM) {
            send_metadata(L);
            close_with(L, WS_CLOSE_NORMAL, "");
          }
        }
      }
    }
    free(it);
    if (L->closing) break;
  }
  ws_conn_unref(L->c);
  api_speech *sp = L->sp;
  live_unref(L);
  api_speech_job_done(sp);
  return NULL;
}

/* ---- loop-thread callbacks ---------------------------------------------------- */

static void enqueue(live *L, enum item_kind kind, const uint8_t *d, size_t n) {
  item *it = malloc(sizeof *it + n);
  if (!it) return;
  it->kind = kind;
  it->next = NULL;
  it->len = n;
  if (n) memcpy(it->data, d, n);
  pthread_mutex_lock(&L->mu);
  bool over = L->queued + n > QUEUE_MAX;
  if (!over) {
    if (L->tail) L->tail->next = it;
    else L->head = it;
    L->tail = it;
    L->queued += n;
  }
  L->last_activity_ns = time_mono_ns();
  pthread_cond_signal(&L->cv);
  pthread_mutex_unlock(&L->mu);
  if (over) {
    free(it);
    ws_close(L->c, WS_CLOSE_POLICY, "audio arrives faster than it can be transcribed");
  }
}

static void live_on_open(ws_conn *c, void *ctx) {
  live *L = ctx;
  L->c = c;
  ws_conn_ref(c);
  if (api_speech_spawn(L->sp, live_main, L)) {
    ws_conn_unref(c);
    live_unref(L);
    ws_close(c, WS_CLOSE_INTERNAL, "cannot start the transcription worker");
  }
}

static void live_on_message(ws_conn *c, enum ws_opcode op, const uint8_t *data, size_t len, void *ctx) {
  (void)c;
  live *L = ctx;
  if (op == WS_BINARY) {
    if (len) enqueue(L, ITEM_AUDIO, data, len);
    return;
  }
  json_t *v = NULL;
  const char *type = NULL;
  if (api_json_decode_object((const char *)data, len, &v) == 0) type = json_string_value(json_object_get(v, "type"));
  if (type && !strcmp(type, "Finalize")) enqueue(L, ITEM_FINALIZE, NULL, 0);
  else if (type && !strcmp(type, "CloseStream")) enqueue(L, ITEM_CLOSE_STREAM, NULL, 0);
  else { /* KeepAlive, Configure and unknown types: only the idle timer moves */
    pthread_mutex_lock(&L->mu);
    L->last_activity_ns = time_mono_ns();
    pthread_mutex_unlock(&L->mu);
  }
  json_decref(v);
}

static void live_on_close(ws_conn *c, int code, const char *reason, void *ctx) {
  (void)c;
  (void)code;
  (void)reason;
  live *L = ctx;
  pthread_mutex_lock(&L->mu);
  L->gone = true;
  pthread_cond_signal(&L->cv);
  pthread_mutex_unlock(&L->mu);
  live_unref(L);
}

static const ws_handler LIVE_HANDLER = {live_on_open, live_on_message, live_on_close};

/* ---- the handshake ------------------------------------------------------------- */

/* Checks the query of the upgrade request; answers 400 (before any 101)
 * naming the parameter. */
static int live_parse(http_req *req, live_cfg *o) {
  memset(o, 0, sizeof *o);
  bool punct = false, smart = false;
  long rate = 0, ch = 1, ue = 0;
  if (dg_query_bool(req, "interim_results", false, &o->interim) ||
      dg_query_bool(req, "vad_events", false, &o->vad_events) ||
      dg_query_bool(req, "multichannel", false, &o->multichannel) || dg_query_bool(req, "punctuate", false, &punct) ||
      dg_query_bool(req, "smart_format", false, &smart) || dg_query_bool(req, "diarize", false, &o->fmt.diarize) ||
      dg_query_int(req, "sample_rate", AUDIO_RATE_MIN, AUDIO_RATE_MAX, 0, &rate) ||
      dg_query_int(req, "channels", 1, AUDIO_CHANNELS_MAX, 1, &ch) ||
      dg_query_int(req, "utterance_end_ms", 0, 60000, 0, &ue))
    return ERR_INVALID;
  o->fmt.punctuate = punct || smart;
  o->sample_rate = (int)rate;
  o->channels = (int)ch;
  o->utterance_end_ms = (int)ue;
  const char *ep = http_req_query(req, "endpointing");
  o->endpoint_ms = 10;
  if (ep && (!strcasecmp(ep, "false") || !strcmp(ep, "0"))) o->endpoint_ms = 0;
  else if (ep && strcasecmp(ep, "true")) {
    long v;
    if (dg_query_int(req, "endpointing", 1, 60000, 10, &v)) return ERR_INVALID;
    o->endpoint_ms = (int)v;
  }
  const char *enc = http_req_query(req, "encoding");
  if (enc && *enc) {
    if (!strcmp(enc, "linear16")) o->raw = AUDIO_RAW_LINEAR16;
    else if (!strcmp(enc, "mulaw")) o->raw = AUDIO_RAW_MULAW;
    else if (!strcmp(enc, "alaw")) o->raw = AUDIO_RAW_ALAW;
    else if (strcmp(enc, "opus") && strcmp(enc, "ogg-opus") && strcmp(enc, "flac") && strcmp(enc, "amr-nb") &&
             strcmp(enc, "amr-wb") && strcmp(enc, "speex") && strcmp(enc, "linear32") && strcmp(enc, "g729")) {
      dg_bad_request(req, "encoding", "encoding: '%.32s' is not a known encoding", enc);
      return ERR_INVALID;
    }
    if (o->raw != AUDIO_RAW_NONE && !o->sample_rate) {
      dg_bad_request(req, "sample_rate", "sample_rate: required with encoding=%s", enc);
      return ERR_INVALID;
    }
  }
  return 0;
}

void dg_listen_ws(http_req *req, void *ctx) {
  api_speech *sp = ctx;
  live_cfg cfg;
  if (live_parse(req, &cfg)) return;
  stt *s = NULL;
  int rc = api_speech_stt_named(sp, http_req_query(req, "model"), &s);
  if (rc) {
    api_error_last(req, rc, NULL);
    return;
  }
  stt_info info;
  stt_get_info(s, &info);
  const char *lang = http_req_query(req, "language");
  if (lang && !strcasecmp(lang, "multi")) lang = NULL;
  if (lang && *lang && dg_check_language(&info, lang)) {
    dg_bad_request(req, "language", "%s", err_detail());
    return;
  }
  live *L = calloc(1, sizeof *L);
  if (!L || !(L->sha = av_sha_alloc()) || av_sha_init(L->sha, 256) < 0) {
    if (L) av_free(L->sha);
    free(L);
    api_error(req, 500, ERR_NOMEM, "starting the session", NULL);
    return;
  }
  pthread_mutex_init(&L->mu, NULL);
  pthread_cond_init(&L->cv, NULL);
  L->refs = 2; /* the loop's and the worker's */
  L->sp = sp;
  L->stt = s;
  L->info = info;
  snprintf(L->language, sizeof L->language, "%s", lang ? lang : "");
  L->cfg = cfg;
  L->ch = calloc(AUDIO_CHANNELS_MAX, sizeof *L->ch);
  if (!L->ch) {
    L->refs = 1;
    live_unref(L);
    api_error(req, 500, ERR_NOMEM, "starting the session", NULL);
    return;
  }
  for (int c = 0; c < AUDIO_CHANNELS_MAX; c++) {
    L->ch[c].idx = c;
    L->ch[c].noise = 100.0;
    L->ch[c].last_word_end = -1;
  }
  L->n_out = 1;
  L->last_activity_ns = time_mono_ns();
  dg_request_uuid(req, L->request_id);
  dg_model_uuid(!strcmp(info.backend, "pocketsphinx") ? DG_STT_MODEL_NAME : info.model, L->model_uuid);
  if (cfg.raw != AUDIO_RAW_NONE) {
    L->mode = IN_RAW;
    L->src_raw = cfg.raw;
    L->src_rate = cfg.sample_rate;
    L->src_channels = cfg.channels;
    L->n_out = cfg.multichannel ? cfg.channels : 1;
  } else {
    L->mode = IN_SNIFF;
  }
  const char *offered[16], *chosen = NULL;
  size_t n = http_req_ws_protocols(req, offered, 16);
  for (size_t i = 0; i < n && !chosen; i++)
    if (!strcasecmp(offered[i], "token") || !strcasecmp(offered[i], "bearer")) chosen = offered[i];
  if (http_ws_accept(req, &LIVE_HANDLER, L, chosen)) {
    api_error(req, 500, ERR_INTERNAL, "WebSocket upgrade failed", NULL);
    L->refs = 1;
    live_unref(L);
  }
}
