/*
 * audio.h - decode what clients send, encode what the APIs return.
 *
 * Decoding takes a whole file in memory (wav, mp3, m4a/aac, ogg/opus,
 * ogg/vorbis, webm/opus, flac, ... anything libavformat probes) or headerless
 * raw samples (linear16, mu-law, A-law at a given rate and channel count) and
 * returns PCM at the rate, channel count and sample type the caller asks for.
 * Encoding turns PCM into mp3, opus in ogg, aac in adts, flac, wav or raw
 * pcm16 / mu-law / A-law, whole or as a stream (push PCM, pull bytes).
 *
 * Ownership: audio_pcm and audio_encoder belong to the caller, who frees them
 * with audio_pcm_free() / audio_encoder_free(). Bytes passed in are only
 * read, never kept. Every function is safe to call from any thread; nothing
 * here keeps global state except FFmpeg's log callback (set once).
 *
 * Errors: ERR_PARSE (malformed, truncated), ERR_UNSUPPORTED (a codec or
 * format we cannot handle), ERR_TOO_LARGE (more than max_seconds of audio),
 * ERR_INVALID (absurd parameters), ERR_NOMEM; the detail names the thing.
 */
#ifndef PARLEY_AUDIO_AUDIO_H
#define PARLEY_AUDIO_AUDIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Limits on parameters, in and out. */
#define AUDIO_RATE_MIN 1000
#define AUDIO_RATE_MAX 384000
#define AUDIO_CHANNELS_MAX 16
#define AUDIO_MAX_SECONDS_DEFAULT (4.0 * 3600.0)

enum audio_sample_fmt {
  AUDIO_SAMPLE_F32, /* float in [-1, 1] */
  AUDIO_SAMPLE_S16  /* int16_t, native endianness */
};

/* Headerless input encodings (Deepgram's `encoding` query parameter). */
enum audio_raw {
  AUDIO_RAW_NONE,     /* a container or a self-describing stream: probe it */
  AUDIO_RAW_LINEAR16, /* signed 16-bit little-endian, interleaved */
  AUDIO_RAW_MULAW,    /* G.711 mu-law, one byte per sample */
  AUDIO_RAW_ALAW      /* G.711 A-law, one byte per sample */
};

typedef struct audio_decode_opts {
  const char *hint;        /* file name ("a.mp3") or MIME type ("audio/ogg"), or NULL */
  enum audio_raw raw;      /* AUDIO_RAW_NONE unless the input has no header */
  int raw_rate;            /* samples per second of raw input */
  int raw_channels;        /* channels of raw input (interleaved) */
  int target_rate;         /* output rate; 0 = the source's */
  int target_channels;     /* 0 = the source's; 1 = downmix; ignored when split */
  bool split_channels;     /* keep every source channel apart: planar output */
  enum audio_sample_fmt fmt;
  double max_seconds;      /* refuse longer audio; 0 = AUDIO_MAX_SECONDS_DEFAULT */
} audio_decode_opts;

typedef struct audio_pcm {
  void *data;              /* n_frames * channels samples of fmt; malloc'd */
  size_t n_frames;         /* samples per channel */
  int rate;                /* samples per second */
  int channels;
  enum audio_sample_fmt fmt;
  bool planar;             /* true: channel c is the c-th run of n_frames samples */
  /* What the input was, for metadata and logs. */
  char container[32];      /* FFmpeg demuxer name ("wav", "ogg", "mov,mp4,...") or "raw" */
  char codec[32];          /* FFmpeg codec name ("mp3float", "opus", "pcm_mulaw") */
  int src_rate;
  int src_channels;
} audio_pcm;

/* Decodes len bytes into out (which is overwritten; free with audio_pcm_free
 * even after a failure is harmless). opts NULL = probe, keep rate and
 * channels, float output. */
int audio_decode(const void *bytes, size_t len, const audio_decode_opts *opts, audio_pcm *out);
void audio_pcm_free(audio_pcm *p);
/* Seconds of audio in p. */
double audio_pcm_seconds(const audio_pcm *p);

/* ---- encoding ---- */

enum audio_format {
  AUDIO_FORMAT_MP3,   /* MPEG-1/2 layer III, libmp3lame */
  AUDIO_FORMAT_OPUS,  /* Opus in Ogg */
  AUDIO_FORMAT_AAC,   /* AAC-LC in ADTS */
  AUDIO_FORMAT_FLAC,  /* native FLAC stream */
  AUDIO_FORMAT_WAV,   /* RIFF WAVE, PCM 16-bit */
  AUDIO_FORMAT_PCM16, /* raw s16le, no header */
  AUDIO_FORMAT_MULAW, /* raw G.711 mu-law, no header */
  AUDIO_FORMAT_ALAW,  /* raw G.711 A-law, no header */
  AUDIO_FORMAT_COUNT_
};

/* "mp3", "opus", "aac", "flac", "wav", "pcm" (also "pcm16", "linear16"),
 * "mulaw" (also "ulaw", "g711_ulaw", "pcmu"), "alaw" (also "g711_alaw",
 * "pcma"). Returns 0 or ERR_UNSUPPORTED. */
int audio_format_parse(const char *name, enum audio_format *out);
const char *audio_format_name(enum audio_format f);
const char *audio_format_mime(enum audio_format f);
/* Whether this FFmpeg build has the encoder the format needs (checked at run
 * time with avcodec_find_encoder); detail names the encoder when not. */
bool audio_format_available(enum audio_format f);
/* The output rate a format will use when asked for rate (opus only knows
 * 8/12/16/24/48 kHz, mp3 and aac their own lists): the nearest supported. */
int audio_format_rate(enum audio_format f, int rate);

typedef struct audio_encode_opts {
  enum audio_format format;
  int rate;      /* output rate; 0 = the input's (adjusted by audio_format_rate) */
  int channels;  /* output channels; 0 = the input's */
  int bit_rate;  /* bits per second for lossy formats; 0 = the encoder's default */
} audio_encode_opts;

/* Encodes n_frames of interleaved pcm (fmt, rate, channels) and appends the
 * encoded file to out. */
int audio_encode(const void *pcm, size_t n_frames, enum audio_sample_fmt fmt, int rate,
                 int channels, const audio_encode_opts *opts, buf *out);

/* Streaming: push PCM as it is produced; every call appends to out the
 * encoded bytes that are ready (possibly none), finish flushes the encoder
 * and the container trailer. The stream is written without seeking, so a
 * streamed WAV carries 0xFFFFFFFF sizes as streamed WAVs do. */
typedef struct audio_encoder audio_encoder;
int audio_encoder_new(audio_encoder **out, enum audio_sample_fmt fmt, int rate, int channels,
                      const audio_encode_opts *opts);
int audio_encoder_push(audio_encoder *e, const void *pcm, size_t n_frames, buf *out);
int audio_encoder_finish(audio_encoder *e, buf *out);
/* Actual output rate and channels. */
int audio_encoder_rate(const audio_encoder *e);
int audio_encoder_channels(const audio_encoder *e);
void audio_encoder_free(audio_encoder *e);

/* ---- G.711 (ITU-T G.711, written from the standard's segment tables) ---- */
uint8_t g711_mulaw_encode(int16_t s);
int16_t g711_mulaw_decode(uint8_t u);
uint8_t g711_alaw_encode(int16_t s);
int16_t g711_alaw_decode(uint8_t a);

/* ---- small helpers used by speech/ ---- */

/* Converts between float and int16 (clipping, rounding to nearest). */
void audio_f32_to_s16(const float *in, int16_t *out, size_t n);
void audio_s16_to_f32(const int16_t *in, float *out, size_t n);
/* Resamples interleaved int16 PCM (in_rate -> out_rate, same channels) into
 * a new malloc'd array; *n_out receives the frame count. */
int audio_resample_s16(const int16_t *in, size_t n_frames, int channels, int in_rate, int out_rate,
                       int16_t **out, size_t *n_out);

/* Routes FFmpeg's own log lines to our log at debug level (idempotent;
 * audio_decode and the encoders call it). */
void audio_quiet_ffmpeg(void);

#endif
