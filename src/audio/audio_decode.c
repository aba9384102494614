/*
 * audio_decode.c - whole-file decoding from memory on libavformat,
 * libavcodec and libswresample, plus headerless linear16 / G.711 input.
 *
 * Flow: audio_decode() -> decode_container() or decode_raw(); both push
 * samples into a `sink`, which converts them with libswresample to the
 * caller's rate, channel count and sample type and appends them to one
 * growing buffer, refusing to grow past max_seconds. Planar output (split
 * channels) is made at the end by de-interleaving.
 *
 * The container path reads through a custom AVIOContext over the caller's
 * bytes (no temporary files) and lets libavformat probe the format from the
 * bytes; a hint (file name or MIME type) is given to the prober as a file
 * name and, if probing fails, used to force a demuxer. Per-packet decoding
 * errors are tolerated (a truncated file yields what it holds); an input that
 * yields no samples at all is ERR_PARSE.
 *
 * Invariants: the sink's buffer always holds whole frames (n_frames *
 * channels samples); nothing here is global except the FFmpeg log callback.
 */
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavformat/avio.h>
#include <libavutil/channel_layout.h>
#include <libavutil/mem.h>
#include <libswresample/swresample.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "audio/audio.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

/* ---- the sink: converts and accumulates ---- */

typedef struct sink {
  SwrContext *swr;
  /* input parameters swr was set up for */
  int in_rate;
  int in_fmt;
  int in_channels;
  /* output */
  int out_rate;        /* 0 until the first input fixes it (target 0 = source) */
  int out_channels;    /* likewise */
  int target_rate;
  int target_channels; /* 0 = source's */
  enum AVSampleFormat out_fmt;
  size_t bytes_per_sample;
  double max_seconds;
  buf data;
  size_t n_frames;
} sink;

static int sink_setup(sink *s, int rate, enum AVSampleFormat fmt, const AVChannelLayout *src_layout) {
  int channels = src_layout->nb_channels;
  if (rate < AUDIO_RATE_MIN || rate > AUDIO_RATE_MAX)
    return err_set(ERR_UNSUPPORTED, "audio: sample rate %d Hz is outside %d..%d", rate, AUDIO_RATE_MIN,
                   AUDIO_RATE_MAX);
  if (channels < 1 || channels > AUDIO_CHANNELS_MAX)
    return err_set(ERR_UNSUPPORTED, "audio: %d channels (at most %d)", channels, AUDIO_CHANNELS_MAX);
  if (s->out_rate == 0) {
    s->out_rate = s->target_rate ? s->target_rate : rate;
    s->out_channels = s->target_channels ? s->target_channels : channels;
  } else if (s->target_channels == 0 && channels != s->out_channels) {
    return err_set(ERR_UNSUPPORTED, "audio: channel count changes mid-stream (%d -> %d)", s->out_channels, channels);
  }
  if (s->swr) {
    /* Parameters changed (chained streams): drain the old converter first. */
    swr_free(&s->swr);
  }
  AVChannelLayout in = {0}, out = {0}; /* copy() frees what dst holds: start empty */
  if (src_layout->order == AV_CHANNEL_ORDER_UNSPEC || av_channel_layout_check(src_layout) == 0)
    av_channel_layout_default(&in, channels);
  else if (av_channel_layout_copy(&in, src_layout) < 0)
    return err_set(ERR_NOMEM, "audio: channel layout");
  av_channel_layout_default(&out, s->out_channels);
  int rc = swr_alloc_set_opts2(&s->swr, &out, s->out_fmt, s->out_rate, &in, fmt, rate, 0, NULL);
  av_channel_layout_uninit(&in);
  av_channel_layout_uninit(&out);
  if (rc < 0 || swr_init(s->swr) < 0) {
    swr_free(&s->swr);
    return err_set(ERR_UNSUPPORTED, "audio: cannot convert %d Hz %d ch (%s) to %d Hz %d ch", rate, channels,
                   av_get_sample_fmt_name(fmt) ? av_get_sample_fmt_name(fmt) : "?", s->out_rate, s->out_channels);
  }
  s->in_rate = rate;
  s->in_fmt = fmt;
  s->in_channels = channels;
  return 0;
}

/* Runs n input frames (NULL planes = drain) through swr into the buffer. */
static int sink_convert(sink *s, const uint8_t **planes, int n) {
  int room = swr_get_out_samples(s->swr, n);
  if (room < 0) return err_set(ERR_INTERNAL, "audio: swr_get_out_samples failed");
  if (room == 0) return 0;
  size_t frame_bytes = s->bytes_per_sample * (size_t)s->out_channels;
  size_t need;
  if (!size_mul((size_t)room, frame_bytes, &need)) return err_set(ERR_TOO_LARGE, "audio: frame too large");
  int rc = buf_reserve(&s->data, need);
  if (rc) return err_set(rc, "audio: decoded output of %zu bytes", s->data.len + need);
  uint8_t *dst[1] = {(uint8_t *)s->data.data + s->data.len};
  int got = swr_convert(s->swr, dst, room, planes, n);
  if (got < 0) return err_set(ERR_INTERNAL, "audio: swr_convert failed");
  if (s->out_fmt == AV_SAMPLE_FMT_FLT) {
    /* Float decoders fed damaged streams can produce any value: keep the
     * promise of audio.h (finite, within [-1, 1]). */
    float *x = (float *)dst[0];
    for (size_t i = 0, k = (size_t)got * (size_t)s->out_channels; i < k; i++) {
      if (!(x[i] >= -1.0f)) x[i] = x[i] < -1.0f ? -1.0f : 0.0f; /* NaN -> 0 */
      else if (x[i] > 1.0f) x[i] = 1.0f;
    }
  }
  s->data.len += (size_t)got * frame_bytes;
  s->data.data[s->data.len] = '\0';
  s->n_frames += (size_t)got;
  double max = s->max_seconds > 0 ? s->max_seconds : AUDIO_MAX_SECONDS_DEFAULT;
  if ((double)s->n_frames > max * s->out_rate)
    return err_set(ERR_TOO_LARGE, "audio: longer than the limit of %.0f seconds", max);
  return 0;
}

static int sink_push(sink *s, const uint8_t **planes, int n, int rate, enum AVSampleFormat fmt,
                     const AVChannelLayout *layout) {
  if (n <= 0) return 0;
  if (!s->swr || rate != s->in_rate || (int)fmt != s->in_fmt || layout->nb_channels != s->in_channels) {
    if (s->swr) {
      int rc = sink_convert(s, NULL, 0);
      if (rc) return rc;
    }
    int rc = sink_setup(s, rate, fmt, layout);
    if (rc) return rc;
  }
  return sink_convert(s, planes, n);
}

static int sink_drain(sink *s) { return s->swr ? sink_convert(s, NULL, 0) : 0; }

/* ---- memory reader for AVIOContext ---- */

typedef struct mem_reader {
  const uint8_t *data;
  size_t len;
  size_t pos;
} mem_reader;

static int mem_read(void *opaque, uint8_t *dst, int n) {
  mem_reader *r = opaque;
  if (r->pos >= r->len) return AVERROR_EOF;
  size_t left = r->len - r->pos;
  size_t k = (size_t)n < left ? (size_t)n : left;
  memcpy(dst, r->data + r->pos, k);
  r->pos += k;
  return (int)k;
}

static int64_t mem_seek(void *opaque, int64_t off, int whence) {
  mem_reader *r = opaque;
  int64_t base;
  switch (whence & ~AVSEEK_FORCE) {
  case AVSEEK_SIZE: return (int64_t)r->len;
  case SEEK_SET: base = 0; break;
  case SEEK_CUR: base = (int64_t)r->pos; break;
  case SEEK_END: base = (int64_t)r->len; break;
  default: return AVERROR(EINVAL);
  }
  if (off > INT64_MAX - base) return AVERROR(EINVAL);
  int64_t p = base + off;
  if (p < 0 || (uint64_t)p > r->len) return AVERROR(EINVAL);
  r->pos = (size_t)p;
  return p;
}

/* ---- hints ---- */

/* Demuxer for a file name extension or MIME type, or NULL. */
static const char *hint_demuxer(const char *hint) {
  static const struct {
    const char *key;
    const char *demuxer;
  } MAP[] = {
      {"wav", "wav"},       {"wave", "wav"},      {"x-wav", "wav"},      {"mp3", "mp3"},
      {"mpeg", "mp3"},      {"mpga", "mp3"},      {"m4a", "mp4"},        {"mp4", "mp4"},
      {"x-m4a", "mp4"},     {"aac", "aac"},       {"ogg", "ogg"},        {"oga", "ogg"},
      {"opus", "ogg"},      {"webm", "matroska"}, {"mkv", "matroska"},   {"flac", "flac"},
      {"x-flac", "flac"},   {"amr", "amr"},       {"3gpp", "mp4"},
  };
  if (!hint || !*hint) return NULL;
  const char *key = strrchr(hint, '/'); /* MIME subtype */
  const char *dot = strrchr(hint, '.');
  if (dot && (!key || dot > key)) key = dot;
  key = key ? key + 1 : hint;
  char k[16];
  size_t n = strcspn(key, ";, ");
  if (n == 0 || n >= sizeof k) return NULL;
  memcpy(k, key, n);
  k[n] = '\0';
  for (size_t i = 0; i < ARRAY_LEN(MAP); i++)
    if (strcasecmp(k, MAP[i].key) == 0) return MAP[i].demuxer;
  return NULL;
}

/* ---- container decoding ---- */

typedef struct demux {
  mem_reader reader;
  AVIOContext *avio;
  AVFormatContext *fmt;
  AVCodecContext *dec;
  AVPacket *pkt;
  AVFrame *frame;
} demux;

static void demux_close(demux *d) {
  av_frame_free(&d->frame);
  av_packet_free(&d->pkt);
  avcodec_free_context(&d->dec);
  avformat_close_input(&d->fmt);
  if (d->avio) {
    av_freep(&d->avio->buffer);
    avio_context_free(&d->avio);
  }
}

static int demux_open(demux *d, const uint8_t *bytes, size_t len, const char *url, const AVInputFormat *force) {
  d->reader = (mem_reader){bytes, len, 0};
  enum { IO_BUF = 8192 };
  uint8_t *iobuf = av_malloc(IO_BUF);
  if (!iobuf) return err_set(ERR_NOMEM, "audio: I/O buffer");
  d->avio = avio_alloc_context(iobuf, IO_BUF, 0, &d->reader, mem_read, NULL, mem_seek);
  if (!d->avio) {
    av_free(iobuf);
    return err_set(ERR_NOMEM, "audio: I/O context");
  }
  d->fmt = avformat_alloc_context();
  if (!d->fmt) return err_set(ERR_NOMEM, "audio: format context");
  d->fmt->pb = d->avio;
  d->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  d->fmt->probesize = 1 << 20;
  d->fmt->max_analyze_duration = 5 * AV_TIME_BASE;
  d->fmt->max_streams = 64;
  int rc = avformat_open_input(&d->fmt, url, force, NULL);
  if (rc < 0) {
    /* avformat_open_input freed the context on failure. */
    d->fmt = NULL;
    char msg[128];
    av_strerror(rc, msg, sizeof msg);
    return err_set(ERR_PARSE, "audio: not a recognised audio file (%s)", msg);
  }
  return 0;
}

static int decode_frames(demux *d, sink *s) {
  int rc;
  while ((rc = avcodec_receive_frame(d->dec, d->frame)) >= 0) {
    AVFrame *f = d->frame;
    int e = sink_push(s, (const uint8_t **)f->extended_data, f->nb_samples, f->sample_rate, f->format,
                      &f->ch_layout);
    av_frame_unref(f);
    if (e) return e;
  }
  if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return 0;
  return 0; /* a decoding error in one frame: skip it */
}

static int decode_container(const uint8_t *bytes, size_t len, const audio_decode_opts *o, sink *s,
                            audio_pcm *out) {
  demux d = {0};
  const char *url = "";
  if (o->hint && strchr(o->hint, '.') && !strchr(o->hint, '/')) url = o->hint;
  int rc = demux_open(&d, bytes, len, url, NULL);
  if (rc) {
    const char *name = hint_demuxer(o->hint);
    const AVInputFormat *force = name ? av_find_input_format(name) : NULL;
    if (!force) goto done;
    demux_close(&d);
    memset(&d, 0, sizeof d);
    rc = demux_open(&d, bytes, len, url, force);
    if (rc) goto done;
  }
  if (avformat_find_stream_info(d.fmt, NULL) < 0) {
    rc = err_set(ERR_PARSE, "audio: cannot read stream parameters of the %s file", d.fmt->iformat->name);
    goto done;
  }
  const AVCodec *codec = NULL;
  int si = av_find_best_stream(d.fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
  if (si < 0 || !codec) {
    rc = si == AVERROR_DECODER_NOT_FOUND
             ? err_set(ERR_UNSUPPORTED, "audio: no decoder for the audio in the %s file", d.fmt->iformat->name)
             : err_set(ERR_PARSE, "audio: the %s file has no audio stream", d.fmt->iformat->name);
    goto done;
  }
  AVStream *st = d.fmt->streams[si];
  snprintf(out->container, sizeof out->container, "%s", d.fmt->iformat->name);
  snprintf(out->codec, sizeof out->codec, "%s", codec->name);
  d.dec = avcodec_alloc_context3(codec);
  d.pkt = av_packet_alloc();
  d.frame = av_frame_alloc();
  if (!d.dec || !d.pkt || !d.frame) {
    rc = err_set(ERR_NOMEM, "audio: decoder context");
    goto done;
  }
  if (avcodec_parameters_to_context(d.dec, st->codecpar) < 0 || avcodec_open2(d.dec, codec, NULL) < 0) {
    rc = err_set(ERR_UNSUPPORTED, "audio: cannot open the %s decoder (bad stream parameters)", codec->name);
    goto done;
  }
  out->src_rate = d.dec->sample_rate;
  out->src_channels = d.dec->ch_layout.nb_channels;
  if (out->src_rate != 0 && (out->src_rate < AUDIO_RATE_MIN || out->src_rate > AUDIO_RATE_MAX)) {
    rc = err_set(ERR_UNSUPPORTED, "audio: sample rate %d Hz is outside %d..%d", out->src_rate, AUDIO_RATE_MIN,
                 AUDIO_RATE_MAX);
    goto done;
  }
  if (out->src_channels > AUDIO_CHANNELS_MAX) {
    rc = err_set(ERR_UNSUPPORTED, "audio: %d channels (at most %d)", out->src_channels, AUDIO_CHANNELS_MAX);
    goto done;
  }
  rc = 0;
  while (rc == 0) {
    int r = av_read_frame(d.fmt, d.pkt);
    if (r < 0) break; /* EOF or a damaged tail: decode what we have */
    if (d.pkt->stream_index == si) {
      int sr = avcodec_send_packet(d.dec, d.pkt);
      if (sr == AVERROR(EAGAIN)) { /* output pending: take it, then resend */
        rc = decode_frames(&d, s);
        if (rc == 0) sr = avcodec_send_packet(d.dec, d.pkt);
      }
      if (rc == 0 && sr >= 0) rc = decode_frames(&d, s);
    }
    av_packet_unref(d.pkt);
  }
  if (rc == 0) {
    avcodec_send_packet(d.dec, NULL);
    rc = decode_frames(&d, s);
  }
  if (rc == 0) rc = sink_drain(s);
  if (rc == 0 && s->n_frames == 0)
    rc = err_set(ERR_PARSE, "audio: no audio could be decoded from the %s/%s input", out->container, out->codec);
  if (rc == 0 && out->src_channels == 0) out->src_channels = s->in_channels;
  if (rc == 0 && out->src_rate == 0) out->src_rate = s->in_rate;
done:
  demux_close(&d);
  return rc;
}

/* ---- raw decoding ---- */

static int decode_raw(const uint8_t *bytes, size_t len, const audio_decode_opts *o, sink *s, audio_pcm *out) {
  if (o->raw_rate < AUDIO_RATE_MIN || o->raw_rate > AUDIO_RATE_MAX)
    return err_set(ERR_INVALID, "audio: raw sample_rate %d is outside %d..%d", o->raw_rate, AUDIO_RATE_MIN,
                   AUDIO_RATE_MAX);
  if (o->raw_channels < 1 || o->raw_channels > AUDIO_CHANNELS_MAX)
    return err_set(ERR_INVALID, "audio: raw channels %d is outside 1..%d", o->raw_channels, AUDIO_CHANNELS_MAX);
  size_t bps = o->raw == AUDIO_RAW_LINEAR16 ? 2 : 1;
  size_t frame = bps * (size_t)o->raw_channels;
  size_t n_frames = len / frame; /* a partial trailing frame is dropped */
  const char *names[] = {"raw", "pcm_s16le", "pcm_mulaw", "pcm_alaw"};
  snprintf(out->container, sizeof out->container, "raw");
  snprintf(out->codec, sizeof out->codec, "%s", names[o->raw]);
  out->src_rate = o->raw_rate;
  out->src_channels = o->raw_channels;
  if (n_frames == 0) return err_set(ERR_PARSE, "audio: raw input of %zu bytes holds no whole sample frame", len);
  double max = o->max_seconds > 0 ? o->max_seconds : AUDIO_MAX_SECONDS_DEFAULT;
  if ((double)n_frames > max * o->raw_rate)
    return err_set(ERR_TOO_LARGE, "audio: raw input is longer than the limit of %.0f seconds", max);
  AVChannelLayout layout = {0};
  av_channel_layout_default(&layout, o->raw_channels);
  enum { CHUNK = 4096 };
  int16_t tmp[CHUNK * 2];
  size_t per = (sizeof tmp / sizeof tmp[0]) / (size_t)o->raw_channels;
  for (size_t f0 = 0; f0 < n_frames; f0 += per) {
    size_t nf = n_frames - f0 < per ? n_frames - f0 : per;
    size_t ns = nf * (size_t)o->raw_channels;
    const uint8_t *src = bytes + f0 * frame;
    for (size_t i = 0; i < ns; i++) {
      switch (o->raw) {
      case AUDIO_RAW_LINEAR16: tmp[i] = (int16_t)(uint16_t)(src[2 * i] | (src[2 * i + 1] << 8)); break;
      case AUDIO_RAW_MULAW: tmp[i] = g711_mulaw_decode(src[i]); break;
      default: tmp[i] = g711_alaw_decode(src[i]); break;
      }
    }
    const uint8_t *planes[1] = {(const uint8_t *)tmp};
    int rc = sink_push(s, planes, (int)nf, o->raw_rate, AV_SAMPLE_FMT_S16, &layout);
    if (rc) return rc;
  }
  return sink_drain(s);
}

/* ---- entry point ---- */

void audio_pcm_free(audio_pcm *p) {
  if (!p) return;
  free(p->data);
  p->data = NULL;
  p->n_frames = 0;
}

double audio_pcm_seconds(const audio_pcm *p) { return p->rate > 0 ? (double)p->n_frames / p->rate : 0.0; }

static int deinterleave(audio_pcm *p) {
  size_t bps = p->fmt == AUDIO_SAMPLE_F32 ? 4 : 2;
  size_t total = p->n_frames * (size_t)p->channels * bps;
  uint8_t *planar = malloc(total ? total : 1);
  if (!planar) return err_set(ERR_NOMEM, "audio: %zu bytes for split channels", total);
  const uint8_t *src = p->data;
  for (int c = 0; c < p->channels; c++)
    for (size_t i = 0; i < p->n_frames; i++)
      memcpy(planar + ((size_t)c * p->n_frames + i) * bps, src + (i * (size_t)p->channels + (size_t)c) * bps, bps);
  free(p->data);
  p->data = planar;
  p->planar = true;
  return 0;
}

int audio_decode(const void *bytes, size_t len, const audio_decode_opts *opts, audio_pcm *out) {
  audio_decode_opts defaults = {0};
  const audio_decode_opts *o = opts ? opts : &defaults;
  memset(out, 0, sizeof *out);
  if (!bytes || len == 0) return err_set(ERR_PARSE, "audio: the input is empty");
  if (o->target_rate != 0 && (o->target_rate < AUDIO_RATE_MIN || o->target_rate > AUDIO_RATE_MAX))
    return err_set(ERR_INVALID, "audio: target rate %d is outside %d..%d", o->target_rate, AUDIO_RATE_MIN,
                   AUDIO_RATE_MAX);
  if (o->target_channels < 0 || o->target_channels > AUDIO_CHANNELS_MAX)
    return err_set(ERR_INVALID, "audio: target channels %d is outside 0..%d", o->target_channels,
                   AUDIO_CHANNELS_MAX);
  if (len > (size_t)INT64_MAX / 2) return err_set(ERR_TOO_LARGE, "audio: input of %zu bytes", len);
  audio_quiet_ffmpeg();
  sink s = {0};
  s.target_rate = o->target_rate;
  s.target_channels = o->split_channels ? 0 : o->target_channels;
  s.out_fmt = o->fmt == AUDIO_SAMPLE_S16 ? AV_SAMPLE_FMT_S16 : AV_SAMPLE_FMT_FLT;
  s.bytes_per_sample = o->fmt == AUDIO_SAMPLE_S16 ? 2 : 4;
  s.max_seconds = o->max_seconds;
  int rc;
  if (o->raw != AUDIO_RAW_NONE) {
    if (o->raw != AUDIO_RAW_LINEAR16 && o->raw != AUDIO_RAW_MULAW && o->raw != AUDIO_RAW_ALAW)
      rc = err_set(ERR_INVALID, "audio: unknown raw encoding %d", (int)o->raw);
    else
      rc = decode_raw(bytes, len, o, &s, out);
  } else {
    rc = decode_container(bytes, len, o, &s, out);
  }
  swr_free(&s.swr);
  if (rc) {
    buf_free(&s.data);
    return rc;
  }
  out->data = buf_detach(&s.data, NULL);
  out->n_frames = s.n_frames;
  out->rate = s.out_rate;
  out->channels = s.out_channels;
  out->fmt = o->fmt == AUDIO_SAMPLE_S16 ? AUDIO_SAMPLE_S16 : AUDIO_SAMPLE_F32;
  if (o->split_channels && out->channels > 1) {
    rc = deinterleave(out);
    if (rc) {
      audio_pcm_free(out);
      return rc;
    }
  }
  return 0;
}
