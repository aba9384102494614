/*
 * test_audio.c - audio/: G.711 against hand-computed values and Python's
 * audioop, decoding Debian's pocketsphinx test WAVs against what sox reports,
 * and every output format encoded, decoded back and checked for duration and
 * the frequency of the tone that went in.
 */
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "base/buf.h"
#include "base/err.h"
#include "test.h"
#include "test_audio_util.h"

/* ---- G.711 ---- */

TEST(audio_g711_hand_values) {
  /* Worked by hand from the G.711 segment tables (see audio_pcm.c). */
  EXPECT_INT_EQ(g711_mulaw_encode(0), 0xFF);
  EXPECT_INT_EQ(g711_mulaw_encode(-1), 0x7E); /* -1/4 in 14 bits floors to -1 */
  EXPECT_INT_EQ(g711_mulaw_encode(32767), 0x80);
  EXPECT_INT_EQ(g711_mulaw_encode(-32768), 0x00);
  EXPECT_INT_EQ(g711_mulaw_encode(1000), 0xCE);
  EXPECT_INT_EQ(g711_mulaw_decode(0xCE), 988);
  EXPECT_INT_EQ(g711_mulaw_decode(0x80), 32124);
  EXPECT_INT_EQ(g711_mulaw_decode(0x00), -32124);
  EXPECT_INT_EQ(g711_mulaw_decode(0xFF), 0);
  EXPECT_INT_EQ(g711_mulaw_decode(0x7F), 0);
  EXPECT_INT_EQ(g711_alaw_encode(0), 0xD5);
  EXPECT_INT_EQ(g711_alaw_encode(-1), 0x55);
  EXPECT_INT_EQ(g711_alaw_encode(1000), 0xFA);
  EXPECT_INT_EQ(g711_alaw_decode(0xFA), 1008);
  EXPECT_INT_EQ(g711_alaw_decode(0xD5), 8);
  EXPECT_INT_EQ(g711_alaw_decode(0x55), -8);
  EXPECT_INT_EQ(g711_alaw_decode(0xAA), 32256);
  EXPECT_INT_EQ(g711_alaw_decode(0x2A), -32256);
}

/* Every 16-bit value against Python's audioop (an independent C
 * implementation); skipped when python3 or audioop is missing. */
TEST(audio_g711_vs_audioop) {
  char dir[256];
  snprintf(dir, sizeof dir, "%s", test_tmpdir());
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "python3 -W ignore -c \"import audioop,struct,sys\n"
           "pcm=struct.pack('<65536h',*range(-32768,32768))\n"
           "open('%s/mu','wb').write(audioop.lin2ulaw(pcm,2))\n"
           "open('%s/a','wb').write(audioop.lin2alaw(pcm,2))\n"
           "b=bytes(range(256))\n"
           "open('%s/mud','wb').write(audioop.ulaw2lin(b,2))\n"
           "open('%s/ad','wb').write(audioop.alaw2lin(b,2))\n"
           "print('ok')\" 2>/dev/null",
           dir, dir, dir, dir);
  char line[64];
  if (tau_popen_line(cmd, line, sizeof line) != 0) TEST_SKIP("python3 with audioop not available");
  char path[600];
  size_t n_mu = 0, n_a = 0, n_mud = 0, n_ad = 0;
  snprintf(path, sizeof path, "%s/mu", dir);
  unsigned char *mu = (unsigned char *)test_read_file(path, &n_mu);
  snprintf(path, sizeof path, "%s/a", dir);
  unsigned char *a = (unsigned char *)test_read_file(path, &n_a);
  snprintf(path, sizeof path, "%s/mud", dir);
  unsigned char *mud = (unsigned char *)test_read_file(path, &n_mud);
  snprintf(path, sizeof path, "%s/ad", dir);
  unsigned char *ad = (unsigned char *)test_read_file(path, &n_ad);
  ASSERT_TRUE(mu && a && mud && ad);
  ASSERT_INT_EQ(n_mu, 65536);
  ASSERT_INT_EQ(n_a, 65536);
  ASSERT_INT_EQ(n_mud, 512);
  ASSERT_INT_EQ(n_ad, 512);
  int bad_mu = 0, bad_a = 0, bad_dec = 0;
  for (int v = -32768; v < 32768; v++) {
    /* audioop's mu-law encoder works on 14 bits (v >> 2); ours on 16 with the
     * same segments, so a difference would show on every 4th value. */
    if (g711_mulaw_encode((int16_t)v) != mu[v + 32768] && bad_mu++ < 3)
      test_fail_at(__FILE__, __LINE__, "mulaw(%d) = 0x%02x, audioop 0x%02x", v, g711_mulaw_encode((int16_t)v),
                   mu[v + 32768]);
    if (g711_alaw_encode((int16_t)v) != a[v + 32768] && bad_a++ < 3)
      test_fail_at(__FILE__, __LINE__, "alaw(%d) = 0x%02x, audioop 0x%02x", v, g711_alaw_encode((int16_t)v),
                   a[v + 32768]);
  }
  for (int b = 0; b < 256; b++) {
    int16_t m = (int16_t)(mud[2 * b] | (mud[2 * b + 1] << 8));
    int16_t al = (int16_t)(ad[2 * b] | (ad[2 * b + 1] << 8));
    if ((g711_mulaw_decode((uint8_t)b) != m || g711_alaw_decode((uint8_t)b) != al) && bad_dec++ < 3)
      test_fail_at(__FILE__, __LINE__, "decode 0x%02x: mu %d/%d a %d/%d", b, g711_mulaw_decode((uint8_t)b), m,
                   g711_alaw_decode((uint8_t)b), al);
  }
  EXPECT_INT_EQ(bad_mu, 0);
  EXPECT_INT_EQ(bad_a, 0);
  EXPECT_INT_EQ(bad_dec, 0);
  free(mu), free(a), free(mud), free(ad);
}

TEST(audio_raw_mulaw_alaw_decode) {
  const uint8_t mu[] = {0xCE, 0x80, 0x00, 0xFF};
  const uint8_t al[] = {0xFA, 0xD5, 0x55, 0xAA};
  audio_decode_opts o = {.raw = AUDIO_RAW_MULAW, .raw_rate = 8000, .raw_channels = 1, .fmt = AUDIO_SAMPLE_S16};
  audio_pcm p;
  ASSERT_INT_EQ(audio_decode(mu, sizeof mu, &o, &p), 0);
  ASSERT_INT_EQ(p.n_frames, 4);
  const int16_t *s = p.data;
  EXPECT_INT_EQ(s[0], 988);
  EXPECT_INT_EQ(s[1], 32124);
  EXPECT_INT_EQ(s[2], -32124);
  EXPECT_INT_EQ(s[3], 0);
  EXPECT_STR_EQ(p.codec, "pcm_mulaw");
  audio_pcm_free(&p);
  o.raw = AUDIO_RAW_ALAW;
  ASSERT_INT_EQ(audio_decode(al, sizeof al, &o, &p), 0);
  s = p.data;
  EXPECT_INT_EQ(s[0], 1008);
  EXPECT_INT_EQ(s[1], 8);
  EXPECT_INT_EQ(s[2], -8);
  EXPECT_INT_EQ(s[3], 32256);
  audio_pcm_free(&p);
  /* linear16, stereo, little-endian; a trailing odd byte is dropped. */
  const uint8_t l16[] = {0x01, 0x00, 0xFF, 0xFF, 0x00, 0x80, 0xFF, 0x7F, 0x12};
  o = (audio_decode_opts){.raw = AUDIO_RAW_LINEAR16, .raw_rate = 16000, .raw_channels = 2, .fmt = AUDIO_SAMPLE_S16};
  ASSERT_INT_EQ(audio_decode(l16, sizeof l16, &o, &p), 0);
  ASSERT_INT_EQ(p.n_frames, 2);
  ASSERT_INT_EQ(p.channels, 2);
  s = p.data;
  EXPECT_INT_EQ(s[0], 1);
  EXPECT_INT_EQ(s[1], -1);
  EXPECT_INT_EQ(s[2], -32768);
  EXPECT_INT_EQ(s[3], 32767);
  audio_pcm_free(&p);
}

TEST(audio_raw_mulaw_alaw_encode) {
  const int16_t in[] = {1000, 0, -1, 32767};
  const uint8_t mu_want[] = {0xCE, 0xFF, 0x7E, 0x80};
  const uint8_t a_want[] = {0xFA, 0xD5, 0x55, 0xAA};
  buf b = BUF_INIT;
  audio_encode_opts o = {.format = AUDIO_FORMAT_MULAW};
  ASSERT_INT_EQ(audio_encode(in, 4, AUDIO_SAMPLE_S16, 8000, 1, &o, &b), 0);
  ASSERT_INT_EQ(b.len, 4);
  EXPECT_MEM_EQ(b.data, mu_want, 4);
  buf_reset(&b);
  o.format = AUDIO_FORMAT_ALAW;
  ASSERT_INT_EQ(audio_encode(in, 4, AUDIO_SAMPLE_S16, 8000, 1, &o, &b), 0);
  ASSERT_INT_EQ(b.len, 4);
  EXPECT_MEM_EQ(b.data, a_want, 4);
  buf_reset(&b);
  o.format = AUDIO_FORMAT_PCM16;
  ASSERT_INT_EQ(audio_encode(in, 4, AUDIO_SAMPLE_S16, 8000, 1, &o, &b), 0);
  const uint8_t l16[] = {0xE8, 0x03, 0, 0, 0xFF, 0xFF, 0xFF, 0x7F};
  ASSERT_INT_EQ(b.len, 8);
  EXPECT_MEM_EQ(b.data, l16, 8);
  buf_free(&b);
}

/* ---- decoding real files ---- */

static const char *const TESTDATA[] = {
    "/usr/share/pocketsphinx/test/data/cards/001.wav",
    "/usr/share/pocketsphinx/test/data/cards/005.wav",
    "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav",
    "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0880.wav",
};

TEST(audio_decode_testdata_vs_sox) {
  char line[128];
  if (tau_popen_line("sox --version", line, sizeof line) != 0) TEST_SKIP("sox not installed");
  int n_done = 0;
  for (size_t i = 0; i < sizeof TESTDATA / sizeof TESTDATA[0]; i++) {
    size_t len;
    unsigned char *bytes = (unsigned char *)test_read_file(TESTDATA[i], &len);
    if (!bytes) continue;
    char cmd[512];
    long rate = 0, samples = 0, channels = 0;
    snprintf(cmd, sizeof cmd, "sox --i -r '%s'", TESTDATA[i]);
    if (tau_popen_line(cmd, line, sizeof line) == 0) rate = atol(line);
    snprintf(cmd, sizeof cmd, "sox --i -s '%s'", TESTDATA[i]);
    if (tau_popen_line(cmd, line, sizeof line) == 0) samples = atol(line);
    snprintf(cmd, sizeof cmd, "sox --i -c '%s'", TESTDATA[i]);
    if (tau_popen_line(cmd, line, sizeof line) == 0) channels = atol(line);
    audio_pcm p;
    int rc = audio_decode(bytes, len, NULL, &p);
    EXPECT_INT_EQ(rc, 0);
    if (rc == 0) {
      EXPECT_INT_EQ(p.rate, rate);
      EXPECT_INT_EQ(p.n_frames, samples);
      EXPECT_INT_EQ(p.channels, channels);
      EXPECT_STR_EQ(p.container, "wav");
      n_done++;
    }
    audio_pcm_free(&p);
    /* Resampled to 8 kHz: half the samples (within a frame). */
    audio_decode_opts o = {.target_rate = 8000, .fmt = AUDIO_SAMPLE_S16};
    rc = audio_decode(bytes, len, &o, &p);
    EXPECT_INT_EQ(rc, 0);
    if (rc == 0) {
      EXPECT_INT_EQ(p.rate, 8000);
      EXPECT_TRUE(labs((long)p.n_frames - samples / 2) <= 2);
    }
    audio_pcm_free(&p);
    free(bytes);
  }
  if (n_done == 0) TEST_SKIP("pocketsphinx-testdata not installed");
}

/* ---- encode -> decode round trips ---- */

static void roundtrip(enum audio_format f, int rate, int channels, int bit_rate, const char *magic, size_t magic_off) {
  const double freq = 440.0, secs = 2.0;
  size_t n = (size_t)(secs * rate);
  float *pcm = tau_sine(n, rate, channels, freq, 0.5);
  buf b = BUF_INIT;
  audio_encode_opts o = {.format = f, .bit_rate = bit_rate};
  int rc = audio_encode(pcm, n, AUDIO_SAMPLE_F32, rate, channels, &o, &b);
  free(pcm);
  if (rc) test_fail_at(__FILE__, __LINE__, "encode %s: %s", audio_format_name(f), err_detail());
  ASSERT_INT_EQ(rc, 0);
  ASSERT_TRUE(b.len > 100);
  if (magic) {
    TEST_CHECK_(b.len > magic_off + strlen(magic) && memcmp(b.data + magic_off, magic, strlen(magic)) == 0, 0,
                "%s output does not start with %s", audio_format_name(f), magic);
  }
  audio_decode_opts d = {.fmt = AUDIO_SAMPLE_F32, .target_channels = 1};
  int out_rate = audio_format_rate(f, rate);
  if (f == AUDIO_FORMAT_PCM16) d.raw = AUDIO_RAW_LINEAR16;
  if (f == AUDIO_FORMAT_MULAW) d.raw = AUDIO_RAW_MULAW;
  if (f == AUDIO_FORMAT_ALAW) d.raw = AUDIO_RAW_ALAW;
  d.raw_rate = out_rate;
  d.raw_channels = channels;
  audio_pcm p;
  rc = audio_decode(b.data, b.len, &d, &p);
  if (rc) test_fail_at(__FILE__, __LINE__, "decode %s: %s", audio_format_name(f), err_detail());
  ASSERT_INT_EQ(rc, 0);
  EXPECT_INT_EQ(p.rate, f == AUDIO_FORMAT_OPUS ? 48000 : out_rate); /* Opus always decodes at 48 kHz */
  EXPECT_INT_EQ(p.channels, 1);
  double dur = audio_pcm_seconds(&p);
  TEST_CHECK_(fabs(dur - secs) <= 0.05 * secs, 0, "%s: decoded %.4f s, want %.2f +-5%%", audio_format_name(f), dur,
              secs);
  /* Skip the codec's start-up (priming) and compare the tone's bin with its
   * neighbours on the middle half. */
  size_t start = p.n_frames / 4, len = p.n_frames / 2;
  const float *x = (const float *)p.data + start;
  TEST_CHECK_(tau_dominant(x, len, 1, p.rate, freq, 100.0), 0, "%s: 440 Hz is not dominant (%g vs %g, %g)",
              audio_format_name(f), tau_power(x, len, 1, p.rate, freq), tau_power(x, len, 1, p.rate, freq * 0.7),
              tau_power(x, len, 1, p.rate, freq * 1.4));
  audio_pcm_free(&p);
  buf_free(&b);
}

TEST(audio_roundtrip_mp3) {
  if (!audio_format_available(AUDIO_FORMAT_MP3)) TEST_SKIP("no mp3 encoder in this FFmpeg");
  roundtrip(AUDIO_FORMAT_MP3, 24000, 1, 64000, NULL, 0);
  roundtrip(AUDIO_FORMAT_MP3, 44100, 2, 0, NULL, 0);
}
TEST(audio_roundtrip_opus) {
  if (!audio_format_available(AUDIO_FORMAT_OPUS)) TEST_SKIP("no opus encoder in this FFmpeg");
  roundtrip(AUDIO_FORMAT_OPUS, 24000, 1, 32000, "OggS", 0);
  roundtrip(AUDIO_FORMAT_OPUS, 44100, 2, 0, "OggS", 0); /* 44.1 kHz is not an Opus rate: 48 kHz */
}
TEST(audio_roundtrip_aac) {
  if (!audio_format_available(AUDIO_FORMAT_AAC)) TEST_SKIP("no aac encoder in this FFmpeg");
  roundtrip(AUDIO_FORMAT_AAC, 24000, 1, 0, "\xFF", 0);
}
TEST(audio_roundtrip_flac) { roundtrip(AUDIO_FORMAT_FLAC, 24000, 1, 0, "fLaC", 0); }
TEST(audio_roundtrip_wav) {
  roundtrip(AUDIO_FORMAT_WAV, 24000, 1, 0, "RIFF", 0);
  roundtrip(AUDIO_FORMAT_WAV, 16000, 2, 0, "WAVE", 8);
}
TEST(audio_roundtrip_raw) {
  roundtrip(AUDIO_FORMAT_PCM16, 24000, 1, 0, NULL, 0);
  roundtrip(AUDIO_FORMAT_MULAW, 8000, 1, 0, NULL, 0);
  roundtrip(AUDIO_FORMAT_ALAW, 8000, 1, 0, NULL, 0);
}

TEST(audio_encode_wav_header_sizes) {
  int16_t pcm[100] = {0};
  buf b = BUF_INIT;
  audio_encode_opts o = {.format = AUDIO_FORMAT_WAV};
  ASSERT_INT_EQ(audio_encode(pcm, 50, AUDIO_SAMPLE_S16, 16000, 2, &o, &b), 0);
  ASSERT_INT_EQ(b.len, 44 + 200);
  const uint8_t *h = (const uint8_t *)b.data;
  EXPECT_INT_EQ(h[4] | h[5] << 8 | h[6] << 16 | (uint32_t)h[7] << 24, 236);
  EXPECT_INT_EQ(h[40] | h[41] << 8 | h[42] << 16 | (uint32_t)h[43] << 24, 200);
  EXPECT_INT_EQ(h[22], 2);                                /* channels */
  EXPECT_INT_EQ(h[24] | h[25] << 8, 16000);               /* rate */
  EXPECT_INT_EQ(h[28] | h[29] << 8 | h[30] << 16, 64000); /* bytes per second */
  buf_free(&b);
}

TEST(audio_encode_rate_change) {
  /* 24 kHz in, 8 kHz mu-law out (a phone line): a third of the samples. */
  size_t n = 24000;
  float *pcm = tau_sine(n, 24000, 1, 440, 0.5);
  buf b = BUF_INIT;
  audio_encode_opts o = {.format = AUDIO_FORMAT_MULAW, .rate = 8000};
  ASSERT_INT_EQ(audio_encode(pcm, n, AUDIO_SAMPLE_F32, 24000, 1, &o, &b), 0);
  EXPECT_TRUE(labs((long)b.len - 8000) <= 16);
  free(pcm);
  buf_free(&b);
}

/* Streaming: bytes come out before finish; the whole decodes to the input. */
static void stream_case(enum audio_format f) {
  int rate = 24000;
  size_t n = (size_t)rate * 2, chunk = (size_t)rate / 10;
  float *pcm = tau_sine(n, rate, 1, 440, 0.5);
  audio_encoder *e;
  audio_encode_opts o = {.format = f};
  ASSERT_INT_EQ(audio_encoder_new(&e, AUDIO_SAMPLE_F32, rate, 1, &o), 0);
  buf b = BUF_INIT;
  size_t before_half = 0;
  for (size_t i = 0; i < n; i += chunk) {
    ASSERT_INT_EQ(audio_encoder_push(e, pcm + i, chunk, &b), 0);
    if (i + chunk == n / 2) before_half = b.len;
  }
  ASSERT_INT_EQ(audio_encoder_finish(e, &b), 0);
  TEST_CHECK_(before_half > 0, 0, "%s: no bytes out after 1 s of pushed audio", audio_format_name(f));
  EXPECT_TRUE(before_half < b.len);
  EXPECT_INT_EQ(audio_encoder_rate(e), audio_format_rate(f, rate));
  audio_encoder_free(e);
  audio_pcm p;
  audio_decode_opts d = {.fmt = AUDIO_SAMPLE_F32};
  int rc = audio_decode(b.data, b.len, &d, &p);
  if (rc) test_fail_at(__FILE__, __LINE__, "decode streamed %s: %s", audio_format_name(f), err_detail());
  ASSERT_INT_EQ(rc, 0);
  TEST_CHECK_(fabs(audio_pcm_seconds(&p) - 2.0) < 0.1, 0, "streamed %s: %.3f s", audio_format_name(f),
              audio_pcm_seconds(&p));
  audio_pcm_free(&p);
  buf_free(&b);
  free(pcm);
}

TEST(audio_stream_encoder) {
  stream_case(AUDIO_FORMAT_WAV);
  stream_case(AUDIO_FORMAT_FLAC);
  if (audio_format_available(AUDIO_FORMAT_MP3)) stream_case(AUDIO_FORMAT_MP3);
  if (audio_format_available(AUDIO_FORMAT_OPUS)) stream_case(AUDIO_FORMAT_OPUS);
  if (audio_format_available(AUDIO_FORMAT_AAC)) stream_case(AUDIO_FORMAT_AAC);
}

/* ---- channels ---- */

TEST(audio_decode_split_and_downmix) {
  int rate = 16000;
  size_t n = 16000;
  float *pcm = malloc(n * 2 * sizeof(float));
  for (size_t i = 0; i < n; i++) {
    pcm[2 * i] = (float)(0.4 * sin(2 * M_PI * 440.0 * (double)i / rate));
    pcm[2 * i + 1] = (float)(0.4 * sin(2 * M_PI * 1000.0 * (double)i / rate));
  }
  buf b = BUF_INIT;
  audio_encode_opts o = {.format = AUDIO_FORMAT_WAV};
  ASSERT_INT_EQ(audio_encode(pcm, n, AUDIO_SAMPLE_F32, rate, 2, &o, &b), 0);
  free(pcm);
  audio_pcm p;
  audio_decode_opts d = {.split_channels = true, .target_rate = 8000};
  ASSERT_INT_EQ(audio_decode(b.data, b.len, &d, &p), 0);
  ASSERT_INT_EQ(p.channels, 2);
  ASSERT_TRUE(p.planar);
  EXPECT_TRUE(labs((long)p.n_frames - 8000) <= 2);
  const float *left = p.data, *right = (const float *)p.data + p.n_frames;
  EXPECT_TRUE(tau_dominant(left + 1000, 6000, 1, 8000, 440, 100));
  EXPECT_TRUE(tau_dominant(right + 1000, 6000, 1, 8000, 1000, 100));
  EXPECT_TRUE(tau_power(left + 1000, 6000, 1, 8000, 1000) < 1e-3 * tau_power(left + 1000, 6000, 1, 8000, 440));
  audio_pcm_free(&p);
  d = (audio_decode_opts){.target_channels = 1};
  ASSERT_INT_EQ(audio_decode(b.data, b.len, &d, &p), 0);
  ASSERT_INT_EQ(p.channels, 1);
  EXPECT_FALSE(p.planar);
  const float *m = p.data;
  /* Both tones survive the downmix. */
  EXPECT_TRUE(tau_power(m + 1000, 8000, 1, rate, 440) > 1e-3);
  EXPECT_TRUE(tau_power(m + 1000, 8000, 1, rate, 1000) > 1e-3);
  audio_pcm_free(&p);
  buf_free(&b);
}

TEST(audio_decode_duration_limit) {
  size_t n = 16000;
  float *pcm = tau_sine(n, 16000, 1, 440, 0.5);
  buf b = BUF_INIT;
  audio_encode_opts o = {.format = AUDIO_FORMAT_FLAC};
  ASSERT_INT_EQ(audio_encode(pcm, n, AUDIO_SAMPLE_F32, 16000, 1, &o, &b), 0);
  audio_pcm p;
  audio_decode_opts d = {.max_seconds = 0.5};
  EXPECT_INT_EQ(audio_decode(b.data, b.len, &d, &p), ERR_TOO_LARGE);
  EXPECT_STR_CONTAINS(err_detail(), "limit");
  d.max_seconds = 2;
  EXPECT_INT_EQ(audio_decode(b.data, b.len, &d, &p), 0);
  audio_pcm_free(&p);
  buf_free(&b);
  free(pcm);
}

TEST(audio_format_names) {
  enum audio_format f;
  EXPECT_INT_EQ(audio_format_parse("pcm", &f), 0);
  EXPECT_INT_EQ(f, AUDIO_FORMAT_PCM16);
  EXPECT_INT_EQ(audio_format_parse("linear16", &f), 0);
  EXPECT_INT_EQ(f, AUDIO_FORMAT_PCM16);
  EXPECT_INT_EQ(audio_format_parse("g711_ulaw", &f), 0);
  EXPECT_INT_EQ(f, AUDIO_FORMAT_MULAW);
  EXPECT_INT_EQ(audio_format_parse("OPUS", &f), 0);
  EXPECT_INT_EQ(f, AUDIO_FORMAT_OPUS);
  EXPECT_INT_EQ(audio_format_parse("speex", &f), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "speex");
  EXPECT_STR_EQ(audio_format_mime(AUDIO_FORMAT_MP3), "audio/mpeg");
  EXPECT_INT_EQ(audio_format_rate(AUDIO_FORMAT_OPUS, 22050), 24000);
  EXPECT_INT_EQ(audio_format_rate(AUDIO_FORMAT_MP3, 22050), 22050);
  EXPECT_INT_EQ(audio_format_rate(AUDIO_FORMAT_WAV, 22050), 22050);
}
