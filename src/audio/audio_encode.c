/*
 * audio_encode.c - PCM to mp3 / opus-in-ogg / aac-in-adts / flac (FFmpeg
 * encoders and muxers) and to wav / raw pcm16 / mu-law / A-law (written
 * here), whole or streamed.
 *
 * One object does both: audio_encoder_new() sets up a resampler (libswresample,
 * input rate/channels/type -> the output's) and either an FFmpeg encoder +
 * muxer writing into a memory AVIOContext, or nothing more for the formats we
 * write ourselves. audio_encoder_push() converts, queues samples in an
 * AVAudioFifo until a whole codec frame is there, encodes, muxes, and moves
 * whatever bytes the muxer produced into the caller's buffer.
 * audio_encode() is push + finish in one call, with the WAV sizes patched.
 *
 * Invariants: the writer never seeks in streaming mode (output goes out as it
 * is produced, so headers that would need patching are written in their
 * "unknown length" form); pts counts output samples from 0.
 * Start reading at audio_encoder_new().
 */
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

const char *audio_format_encoder_name(enum audio_format f); /* audio_pcm.c */

struct audio_encoder {
  enum audio_format format;
  enum audio_sample_fmt in_fmt;
  int in_rate, in_channels;
  int out_rate, out_channels;
  bool header_done; /* own formats: WAV header written */
  bool finished;
  bool whole;       /* audio_encode(): the writer may seek; bytes go out at finish */
  size_t wpos;      /* whole mode: write position in pending */
  SwrContext *swr;
  buf pending; /* bytes produced and not yet handed to the caller */
  /* FFmpeg path */
  AVFormatContext *mux;
  AVIOContext *avio;
  AVCodecContext *enc;
  AVStream *st;
  AVAudioFifo *fifo;
  AVFrame *frame;
  AVPacket *pkt;
  int frame_size;
  int64_t pts;
};

static bool own_format(enum audio_format f) {
  return f == AUDIO_FORMAT_WAV || f == AUDIO_FORMAT_PCM16 || f == AUDIO_FORMAT_MULAW || f == AUDIO_FORMAT_ALAW;
}

static int av_write_cb(void *opaque, uint8_t *data, int n) {
  audio_encoder *e = opaque;
  if (n <= 0) return 0;
  if (!e->whole) return buf_append(&e->pending, data, (size_t)n) == 0 ? n : AVERROR(ENOMEM);
  /* Whole mode: overwrite after a seek back, extend at the end. */
  size_t k = (size_t)n, over = e->wpos < e->pending.len ? e->pending.len - e->wpos : 0;
  if (over > k) over = k;
  if (over) memcpy(e->pending.data + e->wpos, data, over);
  if (k > over && buf_append(&e->pending, data + over, k - over) != 0) return AVERROR(ENOMEM);
  e->wpos += k;
  return n;
}

static int64_t av_seek_cb(void *opaque, int64_t off, int whence) {
  audio_encoder *e = opaque;
  int64_t base;
  switch (whence & ~AVSEEK_FORCE) {
  case AVSEEK_SIZE: return (int64_t)e->pending.len;
  case SEEK_SET: base = 0; break;
  case SEEK_CUR: base = (int64_t)e->wpos; break;
  case SEEK_END: base = (int64_t)e->pending.len; break;
  default: return AVERROR(EINVAL);
  }
  if (off > INT64_MAX - base || base + off < 0 || (uint64_t)(base + off) > e->pending.len) return AVERROR(EINVAL);
  e->wpos = (size_t)(base + off);
  return (int64_t)e->wpos;
}

static void put_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}
static void put_le16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }

/* A 44-byte PCM WAV header; data_bytes 0xFFFFFFFF = unknown (streaming). */
static void wav_header(uint8_t h[44], int rate, int channels, uint32_t data_bytes) {
  memcpy(h, "RIFF", 4);
  put_le32(h + 4, data_bytes == 0xFFFFFFFFu ? 0xFFFFFFFFu : data_bytes + 36);
  memcpy(h + 8, "WAVEfmt ", 8);
  put_le32(h + 16, 16);
  put_le16(h + 20, 1); /* PCM */
  put_le16(h + 22, (uint16_t)channels);
  put_le32(h + 24, (uint32_t)rate);
  put_le32(h + 28, (uint32_t)rate * (uint32_t)channels * 2);
  put_le16(h + 32, (uint16_t)(channels * 2));
  put_le16(h + 34, 16);
  memcpy(h + 36, "data", 4);
  put_le32(h + 40, data_bytes);
}

/* ---- set-up ---- */

static int ffmpeg_setup(audio_encoder *e, const audio_encode_opts *o) {
  static const char *MUXER[AUDIO_FORMAT_COUNT_] = {
      [AUDIO_FORMAT_MP3] = "mp3", [AUDIO_FORMAT_OPUS] = "ogg", [AUDIO_FORMAT_AAC] = "adts",
      [AUDIO_FORMAT_FLAC] = "flac"};
  const char *enc_name = audio_format_encoder_name(e->format);
  const AVCodec *codec = avcodec_find_encoder_by_name(enc_name);
  if (!codec && e->format == AUDIO_FORMAT_OPUS) codec = avcodec_find_encoder_by_name("opus");
  if (!codec)
    return err_set(ERR_UNSUPPORTED, "audio format %s: this FFmpeg has no %s encoder", audio_format_name(e->format),
                   enc_name);
  e->enc = avcodec_alloc_context3(codec);
  if (!e->enc) return err_set(ERR_NOMEM, "audio: encoder context");
  e->enc->sample_rate = e->out_rate;
  av_channel_layout_default(&e->enc->ch_layout, e->out_channels);
  e->enc->sample_fmt = codec->sample_fmts ? codec->sample_fmts[0] : AV_SAMPLE_FMT_S16;
  /* Prefer packed/planar s16 when offered: smaller conversions, same result. */
  for (const enum AVSampleFormat *f = codec->sample_fmts; f && *f != AV_SAMPLE_FMT_NONE; f++)
    if (*f == AV_SAMPLE_FMT_S16 || *f == AV_SAMPLE_FMT_FLTP) {
      e->enc->sample_fmt = *f;
      break;
    }
  e->enc->time_base = (AVRational){1, e->out_rate};
  if (o->bit_rate > 0) e->enc->bit_rate = o->bit_rate;
  if (codec->capabilities & AV_CODEC_CAP_EXPERIMENTAL) e->enc->strict_std_compliance = FF_COMPLIANCE_EXPERIMENTAL;

  int rc = avformat_alloc_output_context2(&e->mux, NULL, MUXER[e->format], NULL);
  if (rc < 0 || !e->mux) return err_set(ERR_UNSUPPORTED, "audio: no %s muxer in this FFmpeg", MUXER[e->format]);
  if (e->mux->oformat->flags & AVFMT_GLOBALHEADER) e->enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  rc = avcodec_open2(e->enc, codec, NULL);
  if (rc < 0) {
    char msg[128];
    av_strerror(rc, msg, sizeof msg);
    return err_set(ERR_UNSUPPORTED, "audio: the %s encoder refuses %d Hz, %d channel(s), bit rate %d (%s)",
                   codec->name, e->out_rate, e->out_channels, o->bit_rate, msg);
  }
  e->st = avformat_new_stream(e->mux, NULL);
  if (!e->st) return err_set(ERR_NOMEM, "audio: stream");
  if (avcodec_parameters_from_context(e->st->codecpar, e->enc) < 0) return err_set(ERR_NOMEM, "audio: parameters");
  e->st->time_base = e->enc->time_base;

  enum { IO_BUF = 4096 };
  uint8_t *iobuf = av_malloc(IO_BUF);
  if (!iobuf) return err_set(ERR_NOMEM, "audio: I/O buffer");
  e->avio = avio_alloc_context(iobuf, IO_BUF, 1, e, NULL, av_write_cb, e->whole ? av_seek_cb : NULL);
  if (!e->avio) {
    av_free(iobuf);
    return err_set(ERR_NOMEM, "audio: I/O context");
  }
  e->mux->pb = e->avio;
  e->mux->flags |= AVFMT_FLAG_CUSTOM_IO | AVFMT_FLAG_FLUSH_PACKETS;
  AVDictionary *mopts = NULL;
  if (e->format == AUDIO_FORMAT_OPUS) av_dict_set(&mopts, "page_duration", "100000", 0); /* 100 ms pages */
  /* The Xing/LAME frame (length, encoder delay and padding for gapless
   * decoding) needs a seek back at the end: only in whole mode. */
  if (e->format == AUDIO_FORMAT_MP3 && !e->whole) av_dict_set(&mopts, "write_xing", "0", 0);
  rc = avformat_write_header(e->mux, &mopts);
  av_dict_free(&mopts);
  if (rc < 0) return err_set(ERR_INTERNAL, "audio: the %s muxer failed to write its header", MUXER[e->format]);

  e->frame_size = e->enc->frame_size > 0 ? e->enc->frame_size : 1024;
  e->fifo = av_audio_fifo_alloc(e->enc->sample_fmt, e->out_channels, e->frame_size * 2);
  e->frame = av_frame_alloc();
  e->pkt = av_packet_alloc();
  if (!e->fifo || !e->frame || !e->pkt) return err_set(ERR_NOMEM, "audio: encoder buffers");
  return 0;
}

static int encoder_create(audio_encoder **out, enum audio_sample_fmt fmt, int rate, int channels,
                          const audio_encode_opts *o, bool whole) {
  *out = NULL;
  if ((unsigned)o->format >= AUDIO_FORMAT_COUNT_) return err_set(ERR_INVALID, "audio: unknown output format %d", o->format);
  if (rate < AUDIO_RATE_MIN || rate > AUDIO_RATE_MAX)
    return err_set(ERR_INVALID, "audio: input rate %d is outside %d..%d", rate, AUDIO_RATE_MIN, AUDIO_RATE_MAX);
  if (channels < 1 || channels > AUDIO_CHANNELS_MAX)
    return err_set(ERR_INVALID, "audio: input channels %d is outside 1..%d", channels, AUDIO_CHANNELS_MAX);
  if (o->rate != 0 && (o->rate < AUDIO_RATE_MIN || o->rate > AUDIO_RATE_MAX))
    return err_set(ERR_INVALID, "audio: output rate %d is outside %d..%d", o->rate, AUDIO_RATE_MIN, AUDIO_RATE_MAX);
  if (o->channels < 0 || o->channels > AUDIO_CHANNELS_MAX)
    return err_set(ERR_INVALID, "audio: output channels %d is outside 0..%d", o->channels, AUDIO_CHANNELS_MAX);
  if (o->bit_rate < 0 || o->bit_rate > 2000000)
    return err_set(ERR_INVALID, "audio: bit rate %d is outside 0..2000000", o->bit_rate);
  audio_quiet_ffmpeg();
  audio_encoder *e = calloc(1, sizeof *e);
  if (!e) return err_set(ERR_NOMEM, "audio: encoder");
  e->format = o->format;
  e->whole = whole;
  e->in_fmt = fmt;
  e->in_rate = rate;
  e->in_channels = channels;
  e->out_rate = audio_format_rate(o->format, o->rate ? o->rate : rate);
  e->out_channels = o->channels ? o->channels : channels;
  if ((e->format == AUDIO_FORMAT_MP3 || e->format == AUDIO_FORMAT_OPUS) && e->out_channels > 2) e->out_channels = 2;
  int rc = 0;
  enum AVSampleFormat swr_out = AV_SAMPLE_FMT_S16;
  if (!own_format(e->format)) {
    rc = ffmpeg_setup(e, o);
    if (rc == 0) swr_out = e->enc->sample_fmt;
  }
  if (rc == 0) {
    AVChannelLayout in = {0}, outl = {0};
    av_channel_layout_default(&in, channels);
    av_channel_layout_default(&outl, e->out_channels);
    int r = swr_alloc_set_opts2(&e->swr, &outl, swr_out, e->out_rate, &in,
                                fmt == AUDIO_SAMPLE_S16 ? AV_SAMPLE_FMT_S16 : AV_SAMPLE_FMT_FLT, rate, 0, NULL);
    if (r < 0 || swr_init(e->swr) < 0) rc = err_set(ERR_INTERNAL, "audio: resampler %d -> %d Hz", rate, e->out_rate);
  }
  if (rc) {
    audio_encoder_free(e);
    return rc;
  }
  *out = e;
  return 0;
}

int audio_encoder_new(audio_encoder **out, enum audio_sample_fmt fmt, int rate, int channels,
                      const audio_encode_opts *o) {
  return encoder_create(out, fmt, rate, channels, o, false);
}

void audio_encoder_free(audio_encoder *e) {
  if (!e) return;
  swr_free(&e->swr);
  av_audio_fifo_free(e->fifo);
  av_frame_free(&e->frame);
  av_packet_free(&e->pkt);
  avcodec_free_context(&e->enc);
  if (e->mux) avformat_free_context(e->mux);
  if (e->avio) {
    av_freep(&e->avio->buffer);
    avio_context_free(&e->avio);
  }
  buf_free(&e->pending);
  free(e);
}

int audio_encoder_rate(const audio_encoder *e) { return e->out_rate; }
int audio_encoder_channels(const audio_encoder *e) { return e->out_channels; }

/* ---- encoding ---- */

static int drain_packets(audio_encoder *e) {
  int rc;
  while ((rc = avcodec_receive_packet(e->enc, e->pkt)) >= 0) {
    e->pkt->stream_index = e->st->index;
    av_packet_rescale_ts(e->pkt, e->enc->time_base, e->st->time_base);
    int w = av_write_frame(e->mux, e->pkt);
    av_packet_unref(e->pkt);
    if (w < 0) return err_set(ERR_INTERNAL, "audio: the muxer failed to write a packet");
  }
  if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return 0;
  return err_set(ERR_INTERNAL, "audio: the %s encoder failed", e->enc->codec->name);
}

/* Encodes whole frames from the fifo; with final, also the short last one. */
static int encode_fifo(audio_encoder *e, bool final) {
  while (av_audio_fifo_size(e->fifo) >= e->frame_size || (final && av_audio_fifo_size(e->fifo) > 0)) {
    int n = av_audio_fifo_size(e->fifo);
    if (n > e->frame_size) n = e->frame_size;
    bool pad = n < e->frame_size && !(e->enc->codec->capabilities &
                                        (AV_CODEC_CAP_SMALL_LAST_FRAME | AV_CODEC_CAP_VARIABLE_FRAME_SIZE));
    AVFrame *f = e->frame;
    av_frame_unref(f);
    f->nb_samples = pad ? e->frame_size : n;
    f->format = e->enc->sample_fmt;
    f->sample_rate = e->out_rate;
    if (av_channel_layout_copy(&f->ch_layout, &e->enc->ch_layout) < 0 || av_frame_get_buffer(f, 0) < 0)
      return err_set(ERR_NOMEM, "audio: frame");
    if (pad) av_samples_set_silence(f->extended_data, 0, f->nb_samples, e->out_channels, e->enc->sample_fmt);
    if (av_audio_fifo_read(e->fifo, (void **)f->extended_data, n) != n)
      return err_set(ERR_INTERNAL, "audio: fifo read");
    f->pts = e->pts;
    e->pts += f->nb_samples;
    if (avcodec_send_frame(e->enc, f) < 0) return err_set(ERR_INTERNAL, "audio: the %s encoder refused a frame", e->enc->codec->name);
    int rc = drain_packets(e);
    if (rc) return rc;
  }
  return 0;
}

/* Runs n input frames (NULL = drain the resampler) into the output. */
static int convert(audio_encoder *e, const void *pcm, size_t n) {
  if (n > (size_t)INT32_MAX / 8) return err_set(ERR_TOO_LARGE, "audio: %zu frames in one push", n);
  int room = swr_get_out_samples(e->swr, (int)n);
  if (room <= 0) return 0;
  const uint8_t *src[1] = {pcm};
  if (own_format(e->format)) {
    size_t bytes = (size_t)room * (size_t)e->out_channels * sizeof(int16_t);
    int16_t *tmp = malloc(bytes);
    if (!tmp) return err_set(ERR_NOMEM, "audio: %zu bytes", bytes);
    uint8_t *dst[1] = {(uint8_t *)tmp};
    int got = swr_convert(e->swr, dst, room, pcm ? src : NULL, (int)n);
    int rc = 0;
    if (got < 0) rc = err_set(ERR_INTERNAL, "audio: swr_convert failed");
    size_t ns = got > 0 ? (size_t)got * (size_t)e->out_channels : 0;
    if (rc == 0 && e->format == AUDIO_FORMAT_MULAW) {
      for (size_t i = 0; i < ns; i++) ((uint8_t *)tmp)[i] = g711_mulaw_encode(tmp[i]);
      rc = buf_append(&e->pending, tmp, ns);
    } else if (rc == 0 && e->format == AUDIO_FORMAT_ALAW) {
      for (size_t i = 0; i < ns; i++) ((uint8_t *)tmp)[i] = g711_alaw_encode(tmp[i]);
      rc = buf_append(&e->pending, tmp, ns);
    } else if (rc == 0) {
      uint8_t *b = (uint8_t *)tmp;
      for (size_t i = 0; i < ns; i++) put_le16(b + 2 * i, (uint16_t)tmp[i]); /* to little-endian in place */
      rc = buf_append(&e->pending, tmp, ns * 2);
    }
    free(tmp);
    return rc < 0 && rc != ERR_INTERNAL ? err_set(rc, "audio: output buffer") : rc;
  }
  /* Codec path: resample into a scratch frame, then into the fifo. */
  uint8_t **planes = NULL;
  int linesize;
  if (av_samples_alloc_array_and_samples(&planes, &linesize, e->out_channels, room, e->enc->sample_fmt, 0) < 0)
    return err_set(ERR_NOMEM, "audio: conversion buffer");
  int got = swr_convert(e->swr, planes, room, pcm ? src : NULL, (int)n);
  int rc = 0;
  if (got < 0)
    rc = err_set(ERR_INTERNAL, "audio: swr_convert failed");
  else if (got > 0 && av_audio_fifo_write(e->fifo, (void **)planes, got) < got)
    rc = err_set(ERR_NOMEM, "audio: fifo");
  av_freep(&planes[0]);
  av_freep(&planes);
  if (rc == 0) rc = encode_fifo(e, false);
  return rc;
}

static int hand_over(audio_encoder *e, buf *out) {
  if (e->avio) avio_flush(e->avio);
  if (e->whole && !e->finished) return 0;
  if (e->pending.len == 0) return 0;
  int rc = buf_append(out, e->pending.data, e->pending.len);
  if (rc) return err_set(rc, "audio: output of %zu bytes", out->len + e->pending.len);
  buf_reset(&e->pending);
  return 0;
}

int audio_encoder_push(audio_encoder *e, const void *pcm, size_t n_frames, buf *out) {
  if (e->finished) return err_set(ERR_INVALID, "audio: push after finish");
  if (e->format == AUDIO_FORMAT_WAV && !e->header_done) {
    uint8_t h[44];
    wav_header(h, e->out_rate, e->out_channels, 0xFFFFFFFFu);
    int rc = buf_append(&e->pending, h, sizeof h);
    if (rc) return err_set(rc, "audio: WAV header");
    e->wpos = e->pending.len;
    e->header_done = true;
  }
  if (n_frames > 0 && pcm) {
    int rc = convert(e, pcm, n_frames);
    if (rc) return rc;
  }
  return hand_over(e, out);
}

int audio_encoder_finish(audio_encoder *e, buf *out) {
  if (e->finished) return 0;
  int rc = audio_encoder_push(e, NULL, 0, out);
  if (rc) return rc;
  e->finished = true;
  rc = convert(e, NULL, 0);
  if (rc == 0 && e->enc) {
    rc = encode_fifo(e, true);
    if (rc == 0) {
      avcodec_send_frame(e->enc, NULL);
      rc = drain_packets(e);
    }
    if (rc == 0 && av_write_trailer(e->mux) < 0) rc = err_set(ERR_INTERNAL, "audio: muxer trailer");
  }
  if (rc == 0 && e->whole && e->format == AUDIO_FORMAT_WAV) {
    /* The sizes are known now. */
    size_t data = e->pending.len - 44;
    if (data > 0xFFFFFFFFu - 36) return err_set(ERR_TOO_LARGE, "audio: %zu bytes do not fit in a WAV file", data);
    put_le32((uint8_t *)e->pending.data + 4, (uint32_t)data + 36);
    put_le32((uint8_t *)e->pending.data + 40, (uint32_t)data);
  }
  if (rc) return rc;
  return hand_over(e, out);
}

int audio_encode(const void *pcm, size_t n_frames, enum audio_sample_fmt fmt, int rate, int channels,
                 const audio_encode_opts *opts, buf *out) {
  audio_encoder *e;
  int rc = encoder_create(&e, fmt, rate, channels, opts, true);
  if (rc) return rc;
  rc = audio_encoder_push(e, pcm, n_frames, out);
  if (rc == 0) rc = audio_encoder_finish(e, out); /* hands over the whole file */
  audio_encoder_free(e);
  return rc;
}
