/*
 * test_audio_hostile.c - audio_decode on broken and hostile input: every
 * format truncated at many lengths, random bytes, WAV headers with absurd
 * fields. Each must give 0 with at most the audio that is there, or a
 * negative code with a detail; never a crash (the sanitizer run checks
 * memory).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "base/buf.h"
#include "base/err.h"
#include "test.h"
#include "test_audio_util.h"

static int encode_tone(enum audio_format f, double secs, buf *b) {
  int rate = 16000;
  size_t n = (size_t)(secs * rate);
  float *pcm = tau_sine(n, rate, 1, 440, 0.5);
  audio_encode_opts o = {.format = f};
  int rc = audio_encode(pcm, n, AUDIO_SAMPLE_F32, rate, 1, &o, b);
  free(pcm);
  return rc;
}

static bool clean_code(int rc) {
  return rc == ERR_PARSE || rc == ERR_UNSUPPORTED || rc == ERR_TOO_LARGE || rc == ERR_INVALID;
}

TEST(audio_hostile_truncated) {
  const enum audio_format fmts[] = {AUDIO_FORMAT_WAV, AUDIO_FORMAT_FLAC, AUDIO_FORMAT_MP3, AUDIO_FORMAT_OPUS,
                                    AUDIO_FORMAT_AAC};
  for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
    if (!audio_format_available(fmts[k])) continue;
    buf b = BUF_INIT;
    ASSERT_INT_EQ(encode_tone(fmts[k], 0.5, &b), 0);
    int n_ok = 0, n_err = 0;
    /* Every length in the first 200 bytes (headers), then 40 spread lengths. */
    for (size_t cut = 1; cut < b.len; cut += cut < 200 ? 1 : b.len / 40 + 1) {
      audio_pcm p;
      int rc = audio_decode(b.data, cut, NULL, &p);
      if (rc == 0) {
        n_ok++;
        TEST_CHECK_(audio_pcm_seconds(&p) <= 0.5 + 0.1, 0, "%s cut at %zu: %.3f s from 0.5 s",
                    audio_format_name(fmts[k]), cut, audio_pcm_seconds(&p));
      } else {
        n_err++;
        TEST_CHECK_(clean_code(rc), 0, "%s cut at %zu: code %d (%s)", audio_format_name(fmts[k]), cut, rc,
                    err_detail());
        TEST_CHECK_(strlen(err_detail()) > 5, 0, "no detail");
      }
      audio_pcm_free(&p);
    }
    EXPECT_TRUE(n_err > 0); /* a few header bytes are never audio */
    buf_free(&b);
  }
}

TEST(audio_hostile_random_bytes) {
  unsigned seed = 12345;
  for (int round = 0; round < 60; round++) {
    size_t len = 1 + (size_t)(round * 97 % 5000);
    unsigned char *junk = malloc(len);
    for (size_t i = 0; i < len; i++) {
      seed = seed * 1103515245u + 12345u;
      junk[i] = (unsigned char)(seed >> 16);
    }
    /* Every third round wears a real magic so a demuxer gets further. */
    static const char *magic[] = {"RIFF\x24\x00\x00\x00WAVEfmt ", "fLaC", "OggS", "ID3\x03", "\xff\xf1", "\x1a\x45\xdf\xa3"};
    if (round % 3 == 0) {
      const char *m = magic[(round / 3) % 6];
      size_t ml = strlen(m) > len ? len : strlen(m);
      memcpy(junk, m, ml);
    }
    audio_pcm p;
    int rc = audio_decode(junk, len, NULL, &p);
    if (rc) TEST_CHECK_(clean_code(rc), 0, "round %d: code %d (%s)", round, rc, err_detail());
    audio_pcm_free(&p);
    free(junk);
  }
}

static void put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)(v >> 16),
  p[3] = (unsigned char)(v >> 24);
}

/* A WAV header with the given fields followed by data_len bytes of silence. */
static unsigned char *make_wav(uint16_t fmt, uint16_t channels, uint32_t rate, uint16_t bits, uint32_t claimed,
                               size_t data_len, size_t *len) {
  *len = 44 + data_len;
  unsigned char *w = calloc(1, *len);
  memcpy(w, "RIFF", 4);
  put32(w + 4, claimed == 0xFFFFFFFFu ? claimed : claimed + 36);
  memcpy(w + 8, "WAVEfmt ", 8);
  put32(w + 16, 16);
  w[20] = (unsigned char)fmt, w[21] = (unsigned char)(fmt >> 8);
  w[22] = (unsigned char)channels, w[23] = (unsigned char)(channels >> 8);
  put32(w + 24, rate);
  put32(w + 28, rate * channels * (bits / 8u));
  w[32] = (unsigned char)(channels * bits / 8), w[34] = (unsigned char)bits;
  memcpy(w + 36, "data", 4);
  put32(w + 40, claimed);
  return w;
}

TEST(audio_hostile_wav_headers) {
  size_t len;
  audio_pcm p;
  /* Claims 4 GB of data but holds one second: decodes what is there. */
  unsigned char *w = make_wav(1, 1, 16000, 16, 0xFFFFFFF0u, 32000, &len);
  int rc = audio_decode(w, len, NULL, &p);
  EXPECT_INT_EQ(rc, 0);
  if (rc == 0) EXPECT_INT_EQ(p.n_frames, 16000);
  audio_pcm_free(&p);
  free(w);
  /* Streamed-WAV form (0xFFFFFFFF sizes) is accepted the same way. */
  w = make_wav(1, 1, 16000, 16, 0xFFFFFFFFu, 3200, &len);
  rc = audio_decode(w, len, NULL, &p);
  EXPECT_INT_EQ(rc, 0);
  if (rc == 0) EXPECT_INT_EQ(p.n_frames, 1600);
  audio_pcm_free(&p);
  free(w);
  /* 4 GB claimed, with a limit of 0.5 s: refused, not allocated. */
  w = make_wav(1, 1, 16000, 16, 0xFFFFFFF0u, 32000, &len);
  audio_decode_opts o = {.max_seconds = 0.5};
  EXPECT_INT_EQ(audio_decode(w, len, &o, &p), ERR_TOO_LARGE);
  free(w);
  /* Absurd fields: each a clean error. */
  struct {
    uint16_t fmt, ch;
    uint32_t rate;
    uint16_t bits;
  } bad[] = {
      {1, 0, 16000, 16},     /* no channels */
      {1, 1000, 16000, 16},  /* 1000 channels */
      {1, 1, 0, 16},         /* rate 0 */
      {1, 1, 100, 16},       /* rate 100 Hz */
      {1, 1, 4000000, 16},   /* 4 MHz */
      {1, 1, 16000, 0},      /* 0 bits */
      {0x1234, 1, 16000, 16} /* unknown codec tag */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    w = make_wav(bad[i].fmt, bad[i].ch, bad[i].rate, bad[i].bits, 3200, 3200, &len);
    rc = audio_decode(w, len, NULL, &p);
    TEST_CHECK_(clean_code(rc), 0, "bad header %zu: code %d (%s)", i, rc, err_detail());
    audio_pcm_free(&p);
    free(w);
  }
}

TEST(audio_hostile_params) {
  const uint8_t bytes[64] = {0};
  audio_pcm p;
  audio_decode_opts o = {.raw = AUDIO_RAW_LINEAR16, .raw_rate = 0, .raw_channels = 1};
  EXPECT_INT_EQ(audio_decode(bytes, sizeof bytes, &o, &p), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "sample_rate");
  o.raw_rate = 16000, o.raw_channels = 99;
  EXPECT_INT_EQ(audio_decode(bytes, sizeof bytes, &o, &p), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "channels");
  o.raw_channels = 1, o.target_rate = 5;
  EXPECT_INT_EQ(audio_decode(bytes, sizeof bytes, &o, &p), ERR_INVALID);
  o = (audio_decode_opts){.raw = AUDIO_RAW_LINEAR16, .raw_rate = 16000, .raw_channels = 1};
  EXPECT_INT_EQ(audio_decode(bytes, 1, &o, &p), ERR_PARSE); /* half a sample */
  EXPECT_INT_EQ(audio_decode(bytes, 0, NULL, &p), ERR_PARSE);
  EXPECT_INT_EQ(audio_decode(NULL, 10, NULL, &p), ERR_PARSE);
  audio_encoder *e;
  audio_encode_opts eo = {.format = AUDIO_FORMAT_MP3};
  EXPECT_INT_EQ(audio_encoder_new(&e, AUDIO_SAMPLE_F32, 0, 1, &eo), ERR_INVALID);
  EXPECT_INT_EQ(audio_encoder_new(&e, AUDIO_SAMPLE_F32, 16000, 100, &eo), ERR_INVALID);
  eo.bit_rate = -5;
  EXPECT_INT_EQ(audio_encoder_new(&e, AUDIO_SAMPLE_F32, 16000, 1, &eo), ERR_INVALID);
  eo = (audio_encode_opts){.format = (enum audio_format)99};
  EXPECT_INT_EQ(audio_encoder_new(&e, AUDIO_SAMPLE_F32, 16000, 1, &eo), ERR_INVALID);
}

TEST(audio_mp3_whole_is_gapless) {
  if (!audio_format_available(AUDIO_FORMAT_MP3)) TEST_SKIP("no mp3 encoder");
  buf b = BUF_INIT;
  ASSERT_INT_EQ(encode_tone(AUDIO_FORMAT_MP3, 1.0, &b), 0);
  audio_pcm p;
  ASSERT_INT_EQ(audio_decode(b.data, b.len, NULL, &p), 0);
  /* The LAME tag carries encoder delay and padding, which FFmpeg trims. */
  EXPECT_NEAR(audio_pcm_seconds(&p), 1.0, 0.01);
  audio_pcm_free(&p);
  buf_free(&b);
}

TEST(audio_decode_hint_forces_demuxer) {
  /* Raw ADTS AAC is recognised from the bytes; a MIME hint works too. */
  if (!audio_format_available(AUDIO_FORMAT_AAC)) TEST_SKIP("no aac encoder");
  buf b = BUF_INIT;
  ASSERT_INT_EQ(encode_tone(AUDIO_FORMAT_AAC, 1.0, &b), 0);
  audio_pcm p;
  audio_decode_opts o = {.hint = "audio/aac"};
  ASSERT_INT_EQ(audio_decode(b.data, b.len, &o, &p), 0);
  EXPECT_STR_EQ(p.codec, "aac");
  audio_pcm_free(&p);
  o.hint = "voice.aac";
  ASSERT_INT_EQ(audio_decode(b.data, b.len, &o, &p), 0);
  audio_pcm_free(&p);
  buf_free(&b);
}

/* Every fuzz seed (valid files, cut files, and inputs that once crashed the
 * harness, e.g. crash-adts-layout-copy: an ADTS stream whose frames change
 * channel layout, which made sink_setup copy into an uninitialized layout)
 * decodes the way tests/fuzz/fuzz_audio.c decodes it, cleanly. */
static void decode_seed(const char *name, const char *path, const unsigned char *bytes, size_t len, void *ud) {
  (void)path, (void)ud;
  audio_pcm p;
  audio_decode_opts o = {.target_rate = 16000, .target_channels = 1, .max_seconds = 30};
  int rc = audio_decode(bytes, len, &o, &p);
  if (rc == 0) {
    EXPECT_INT_EQ(p.rate, 16000);
    EXPECT_INT_EQ(p.channels, 1);
    EXPECT_TRUE(p.n_frames > 0);
    const float *x = p.data;
    size_t bad = 0;
    for (size_t i = 0; i < p.n_frames; i++) bad += !(x[i] >= -1.0f && x[i] <= 1.0f);
    TEST_CHECK_(bad == 0, 0, "%s: %zu samples outside [-1, 1]", name, bad);
  } else {
    TEST_CHECK_(clean_code(rc), 0, "%s: code %d (%s)", name, rc, err_detail());
  }
  audio_pcm_free(&p);
}

TEST(audio_fuzz_seeds_decode_cleanly) {
  int n = test_each_file("tests/fuzz/seeds/audio", SIZE_MAX, decode_seed, NULL);
  if (n < 0) TEST_SKIP("tests/fuzz/seeds/audio not found (run from the repository root)");
  EXPECT_TRUE(n >= 10);
}
