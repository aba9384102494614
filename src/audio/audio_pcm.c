/*
 * audio_pcm.c - the pieces of audio/ that do not need a codec: G.711 mu-law
 * and A-law, float <-> int16, the output format table, FFmpeg log routing,
 * and a whole-buffer int16 resampler on libswresample.
 *
 * G.711 is written from ITU-T G.711 itself: mu-law adds a bias of 0x84 and
 * codes the position of the top bit (segment, 3 bits) and the next four bits
 * (mantissa), all inverted; A-law works on 13-bit magnitudes, segment and
 * mantissa likewise, and toggles the even bits (xor 0x55). Both are
 * symmetric around zero except mu-law's two zeros (0xFF and 0x7F).
 *
 * Start reading at the format table (audio_format_*), used by the encoders.
 */
#include <libavcodec/avcodec.h>
#include <libavutil/log.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "audio/audio.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

/* ---- G.711 ---- */

#define MULAW_BIAS 0x84 /* 33 in 14-bit units, 132 in 16-bit ones */
#define MULAW_CLIP14 8159

/* G.711 codes 14-bit magnitudes: the 16-bit input loses its two low bits
 * first (arithmetic shift, so negative values round away from zero), as in
 * the standard and in the widely used Sun reference. */
uint8_t g711_mulaw_encode(int16_t s) {
  int v = s >> 2;
  int mask = 0xFF;
  if (v < 0) {
    v = -v;
    mask = 0x7F;
  }
  if (v > MULAW_CLIP14) v = MULAW_CLIP14;
  v += MULAW_BIAS >> 2;
  /* Segment ends: 0x3F, 0x7F, ... 0x1FFF. */
  int seg = 0;
  while (seg < 8 && v > ((0x40 << seg) - 1)) seg++;
  if (seg >= 8) return (uint8_t)(0x7F ^ mask);
  int uval = (seg << 4) | ((v >> (seg + 1)) & 0x0F);
  return (uint8_t)(uval ^ mask);
}

int16_t g711_mulaw_decode(uint8_t u) {
  int x = (uint8_t)~u;
  int seg = (x >> 4) & 0x07;
  int mantissa = x & 0x0F;
  int v = (((mantissa << 3) + MULAW_BIAS) << seg) - MULAW_BIAS;
  return (int16_t)((x & 0x80) ? -v : v);
}

uint8_t g711_alaw_encode(int16_t s) {
  int v = s >> 3; /* 13-bit */
  int mask;
  if (v >= 0) {
    mask = 0xD5; /* sign bit set (positive) and even bits toggled */
  } else {
    mask = 0x55;
    v = -v - 1;
  }
  /* Segment ends of the 13-bit magnitude: 0x1F, 0x3F, 0x7F, ... 0xFFF. */
  int seg = 0;
  while (seg < 8 && v > ((0x20 << seg) - 1)) seg++;
  if (seg >= 8) return (uint8_t)(0x7F ^ mask);
  int aval = seg << 4;
  aval |= (seg < 2) ? ((v >> 1) & 0x0F) : ((v >> seg) & 0x0F);
  return (uint8_t)(aval ^ mask);
}

int16_t g711_alaw_decode(uint8_t a) {
  int x = a ^ 0x55;
  int t = (x & 0x0F) << 4;
  int seg = (x & 0x70) >> 4;
  if (seg == 0)
    t += 8;
  else if (seg == 1)
    t += 0x108;
  else
    t = (t + 0x108) << (seg - 1);
  return (int16_t)((x & 0x80) ? t : -t);
}

/* ---- sample conversion ---- */

void audio_f32_to_s16(const float *in, int16_t *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float v = in[i] * 32768.0f;
    if (!(v > -32768.0f)) v = -32768.0f; /* also catches NaN */
    if (v > 32767.0f) v = 32767.0f;
    out[i] = (int16_t)(v < 0 ? v - 0.5f : v + 0.5f);
  }
}

void audio_s16_to_f32(const int16_t *in, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = (float)in[i] / 32768.0f;
}

/* ---- FFmpeg logging ---- */

static void ffmpeg_log_cb(void *avcl, int level, const char *fmt, va_list vl) {
  (void)avcl;
  if (level > AV_LOG_INFO || log_get_level() > LOG_LEVEL_DEBUG) return;
  char line[512];
  vsnprintf(line, sizeof line, fmt, vl);
  size_t n = strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
  if (n > 0) LOG_DEBUG("ffmpeg", "%s", line);
}

static pthread_once_t quiet_once = PTHREAD_ONCE_INIT;
static void quiet_init(void) { av_log_set_callback(ffmpeg_log_cb); }
void audio_quiet_ffmpeg(void) { pthread_once(&quiet_once, quiet_init); }

/* ---- output formats ---- */

typedef struct format_info {
  const char *name;
  const char *mime;
  const char *encoder; /* FFmpeg encoder name, NULL = written here */
  const char *aliases[4];
} format_info;

static const format_info FORMATS[AUDIO_FORMAT_COUNT_] = {
    [AUDIO_FORMAT_MP3] = {"mp3", "audio/mpeg", "libmp3lame", {"mpeg", "audio/mpeg", NULL, NULL}},
    [AUDIO_FORMAT_OPUS] = {"opus", "audio/ogg", "libopus", {"ogg", "audio/ogg", "audio/opus", NULL}},
    [AUDIO_FORMAT_AAC] = {"aac", "audio/aac", "aac", {"adts", "audio/aac", NULL, NULL}},
    [AUDIO_FORMAT_FLAC] = {"flac", "audio/flac", "flac", {"audio/flac", NULL, NULL, NULL}},
    [AUDIO_FORMAT_WAV] = {"wav", "audio/wav", NULL, {"wave", "audio/wav", "audio/x-wav", NULL}},
    [AUDIO_FORMAT_PCM16] = {"pcm", "audio/pcm", NULL, {"pcm16", "linear16", "s16le", "audio/l16"}},
    [AUDIO_FORMAT_MULAW] = {"mulaw", "audio/basic", NULL, {"ulaw", "g711_ulaw", "pcmu", "audio/pcmu"}},
    [AUDIO_FORMAT_ALAW] = {"alaw", "audio/x-alaw-basic", NULL, {"g711_alaw", "pcma", "audio/pcma", NULL}},
};

int audio_format_parse(const char *name, enum audio_format *out) {
  if (!name) return err_set(ERR_INVALID, "audio format: none given");
  for (int f = 0; f < AUDIO_FORMAT_COUNT_; f++) {
    if (strcasecmp(name, FORMATS[f].name) == 0) {
      *out = (enum audio_format)f;
      return 0;
    }
    for (int a = 0; a < 4 && FORMATS[f].aliases[a]; a++)
      if (strcasecmp(name, FORMATS[f].aliases[a]) == 0) {
        *out = (enum audio_format)f;
        return 0;
      }
  }
  return err_set(ERR_UNSUPPORTED, "audio format '%s' is not one of mp3, opus, aac, flac, wav, pcm, mulaw, alaw",
                 name);
}

const char *audio_format_name(enum audio_format f) {
  return (unsigned)f < AUDIO_FORMAT_COUNT_ ? FORMATS[f].name : "unknown";
}
const char *audio_format_mime(enum audio_format f) {
  return (unsigned)f < AUDIO_FORMAT_COUNT_ ? FORMATS[f].mime : "application/octet-stream";
}

/* Internal: the FFmpeg encoder of a format (NULL when written here). */
const char *audio_format_encoder_name(enum audio_format f);
const char *audio_format_encoder_name(enum audio_format f) {
  return (unsigned)f < AUDIO_FORMAT_COUNT_ ? FORMATS[f].encoder : NULL;
}

bool audio_format_available(enum audio_format f) {
  if ((unsigned)f >= AUDIO_FORMAT_COUNT_) return false;
  if (!FORMATS[f].encoder) return true;
  if (avcodec_find_encoder_by_name(FORMATS[f].encoder)) return true;
  /* Opus has FFmpeg's native encoder as a fallback. */
  if (f == AUDIO_FORMAT_OPUS && avcodec_find_encoder_by_name("opus")) return true;
  err_set(ERR_UNSUPPORTED, "audio format %s: this FFmpeg has no %s encoder", FORMATS[f].name,
          FORMATS[f].encoder);
  return false;
}

static int nearest_rate(const int *rates, size_t n, int rate) {
  int best = rates[0];
  for (size_t i = 1; i < n; i++)
    if (abs(rates[i] - rate) < abs(best - rate)) best = rates[i];
  return best;
}

int audio_format_rate(enum audio_format f, int rate) {
  static const int opus[] = {8000, 12000, 16000, 24000, 48000};
  static const int mp3[] = {8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000};
  static const int aac[] = {8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000};
  switch (f) {
  case AUDIO_FORMAT_OPUS: return nearest_rate(opus, ARRAY_LEN(opus), rate);
  case AUDIO_FORMAT_MP3: return nearest_rate(mp3, ARRAY_LEN(mp3), rate);
  case AUDIO_FORMAT_AAC: return nearest_rate(aac, ARRAY_LEN(aac), rate);
  case AUDIO_FORMAT_FLAC: return rate > 655350 ? 655350 : rate;
  default: return rate;
  }
}

/* ---- whole-buffer resampling ---- */

int audio_resample_s16(const int16_t *in, size_t n_frames, int channels, int in_rate, int out_rate,
                       int16_t **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  if (channels < 1 || channels > AUDIO_CHANNELS_MAX || in_rate < AUDIO_RATE_MIN || in_rate > AUDIO_RATE_MAX ||
      out_rate < AUDIO_RATE_MIN || out_rate > AUDIO_RATE_MAX)
    return err_set(ERR_INVALID, "resample: rate %d -> %d with %d channels is out of range", in_rate, out_rate,
                   channels);
  if (n_frames > (size_t)INT32_MAX / 2) return err_set(ERR_TOO_LARGE, "resample: %zu frames", n_frames);
  audio_quiet_ffmpeg();
  int64_t cap64 = av_rescale_rnd((int64_t)n_frames, out_rate, in_rate, AV_ROUND_UP) + 256;
  size_t bytes;
  if (!size_mul((size_t)cap64, (size_t)channels * sizeof(int16_t), &bytes))
    return err_set(ERR_TOO_LARGE, "resample: output too large");
  int16_t *dst = malloc(bytes ? bytes : 1);
  if (!dst) return err_set(ERR_NOMEM, "resample: %zu bytes", bytes);
  AVChannelLayout layout = {0};
  av_channel_layout_default(&layout, channels);
  SwrContext *swr = NULL;
  int rc = swr_alloc_set_opts2(&swr, &layout, AV_SAMPLE_FMT_S16, out_rate, &layout, AV_SAMPLE_FMT_S16, in_rate, 0,
                               NULL);
  if (rc < 0 || swr_init(swr) < 0) {
    swr_free(&swr);
    free(dst);
    return err_set(ERR_INTERNAL, "resample: swr_init failed for %d -> %d Hz", in_rate, out_rate);
  }
  const uint8_t *src_planes[1] = {(const uint8_t *)in};
  uint8_t *dst_planes[1] = {(uint8_t *)dst};
  int got = swr_convert(swr, dst_planes, (int)cap64, src_planes, (int)n_frames);
  size_t total = got > 0 ? (size_t)got : 0;
  if (got >= 0) {
    dst_planes[0] = (uint8_t *)(dst + total * (size_t)channels);
    int more = swr_convert(swr, dst_planes, (int)(cap64 - (int64_t)total), NULL, 0);
    if (more > 0) total += (size_t)more;
  }
  swr_free(&swr);
  if (got < 0) {
    free(dst);
    return err_set(ERR_INTERNAL, "resample: swr_convert failed");
  }
  *out = dst;
  *n_out = total;
  return 0;
}
