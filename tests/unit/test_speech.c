/*
 * test_speech.c - speech/: the voice list and the vendor voice table, TTS
 * on each backend (plausible duration, speed, streaming, stop), STT on
 * Debian's pocketsphinx test recordings (known transcripts), incremental
 * decoding, the decoder pool, and a TTS -> STT round trip.
 */
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "base/err.h"
#include "base/util.h"
#include "speech/speech.h"
#include "test.h"
#include "test_audio_util.h"

#define PS_DATA "/usr/share/pocketsphinx/test/data"

/* ---- TTS ---- */

static double rms_s16(const int16_t *x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return n ? sqrt(s / (double)n) : 0;
}

TEST(speech_tts_voices_listed) {
  tts *t;
  ASSERT_INT_EQ(tts_open(&t), 0);
  const char *want[] = {"slt", "rms", "awb", "kal16", "kal", "espeak:en-us", "espeak:fr", "espeak:de"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    bool found = false;
    for (size_t k = 0; k < tts_n_voices(t); k++)
      if (strcmp(tts_voice_at(t, k)->name, want[i]) == 0) found = true;
    TEST_CHECK_(found, 0, "voice %s not listed", want[i]);
  }
  EXPECT_TRUE(tts_n_voices(t) > 50); /* espeak-ng ships around a hundred languages */
  EXPECT_STR_EQ(tts_default_voice(t), "slt");
  /* Names are unique. */
  for (size_t a = 0; a < tts_n_voices(t); a++)
    for (size_t b = a + 1; b < tts_n_voices(t); b++)
      TEST_CHECK_(strcmp(tts_voice_at(t, a)->name, tts_voice_at(t, b)->name) != 0, 0, "duplicate voice %s",
                  tts_voice_at(t, a)->name);
  tts_close(t);
}

TEST(speech_tts_vendor_table_resolves) {
  tts *t;
  ASSERT_INT_EQ(tts_open(&t), 0);
  tts_choice c;
  /* Every table entry resolves to its own target (not to the fallback). */
  for (size_t i = 0; i < tts_vendor_n(); i++) {
    const tts_vendor_voice *v = tts_vendor_at(i);
    int rc = tts_voice_resolve(t, v->vendor_name, &c);
    TEST_CHECK_(rc == 0, 0, "vendor voice %s: %s", v->vendor_name, err_detail());
    if (rc) continue;
    EXPECT_TRUE(c.vendor);
    char want[96];
    snprintf(want, sizeof want, "%s", v->local);
    char *plus = strchr(want, '+');
    if (plus) *plus = '\0';
    TEST_CHECK_(strcmp(c.voice->name, want) == 0, 0, "%s -> %s, table says %s", v->vendor_name, c.voice->name,
                v->local);
    EXPECT_STR_EQ(c.variant, plus ? plus + 1 : "");
  }
  /* All thirteen OpenAI names are in the table. */
  const char *openai[] = {"alloy", "ash", "ballad", "coral", "echo", "fable", "nova",
                          "onyx",  "sage", "shimmer", "verse", "marin", "cedar"};
  for (size_t i = 0; i < sizeof openai / sizeof openai[0]; i++) {
    char scratch[64];
    TEST_CHECK_(tts_vendor_lookup(openai[i], scratch, sizeof scratch) != NULL, 0, "%s not mapped", openai[i]);
  }
  /* The aura rule for names not in the table. */
  ASSERT_INT_EQ(tts_voice_resolve(t, "aura-2-unknown-fr", &c), 0);
  EXPECT_STR_EQ(c.voice->name, "espeak:fr");
  ASSERT_INT_EQ(tts_voice_resolve(t, "aura-someone-en", &c), 0);
  EXPECT_STR_EQ(c.voice->name, "slt");
  /* Local names, qualified names, variants, case. */
  ASSERT_INT_EQ(tts_voice_resolve(t, "flite:awb", &c), 0);
  EXPECT_STR_EQ(c.voice->name, "awb");
  EXPECT_FALSE(c.vendor);
  ASSERT_INT_EQ(tts_voice_resolve(t, "espeak:en-us+m3", &c), 0);
  EXPECT_STR_EQ(c.voice->name, "espeak:en-us");
  EXPECT_STR_EQ(c.variant, "m3");
  ASSERT_INT_EQ(tts_voice_resolve(t, "SLT", &c), 0);
  ASSERT_INT_EQ(tts_voice_resolve(t, NULL, &c), 0);
  EXPECT_STR_EQ(c.voice->name, "slt");
  /* Unknown names and bad variants. */
  EXPECT_INT_EQ(tts_voice_resolve(t, "bogus-voice", &c), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "bogus-voice");
  EXPECT_INT_EQ(tts_voice_resolve(t, "slt+f3", &c), ERR_NOT_FOUND);
  EXPECT_INT_EQ(tts_voice_resolve(t, "espeak:en-us+../../x", &c), ERR_NOT_FOUND);
  EXPECT_INT_EQ(tts_voice_resolve(t, "aura-", &c), ERR_NOT_FOUND);
  tts_close(t);
}

static void hello(const char *voice) {
  tts *t;
  ASSERT_INT_EQ(tts_open(&t), 0);
  audio_pcm p;
  int rc = tts_synthesize_pcm(t, voice, "hello world", 1.0, &p);
  TEST_CHECK_(rc == 0, 1, "voice %s: %s", voice, err_detail());
  double secs = audio_pcm_seconds(&p);
  TEST_CHECK_(secs >= 0.3 && secs <= 3.0, 0, "voice %s: %.3f s for 'hello world'", voice, secs);
  EXPECT_TRUE(p.rate >= 8000 && p.rate <= 48000);
  EXPECT_TRUE(rms_s16(p.data, p.n_frames) > 300); /* not silence */
  audio_pcm_free(&p);
  tts_close(t);
}

TEST(speech_tts_hello_flite) {
  hello("slt");
  hello("kal");
  hello("awb");
}
TEST(speech_tts_hello_espeak) {
  hello("espeak:en-us");
  hello("espeak:en-us+f3");
  hello("espeak:de");
}
TEST(speech_tts_hello_vendor) {
  hello("alloy");
  hello("aura-2-thalia-en");
}

TEST(speech_tts_speed) {
  tts *t;
  ASSERT_INT_EQ(tts_open(&t), 0);
  const char *voices[] = {"slt", "espeak:en-us"};
  for (size_t i = 0; i < 2; i++) {
    audio_pcm slow, fast;
    ASSERT_INT_EQ(tts_synthesize_pcm(t, voices[i], "this sentence is spoken at two speeds", 0.5, &slow), 0);
    ASSERT_INT_EQ(tts_synthesize_pcm(t, voices[i], "this sentence is spoken at two speeds", 2.0, &fast), 0);
    double r = audio_pcm_seconds(&slow) / audio_pcm_seconds(&fast);
    TEST_CHECK_(r > 2.0, 0, "%s: speed 0.5 gives %.2f s, 2.0 gives %.2f s", voices[i], audio_pcm_seconds(&slow),
                audio_pcm_seconds(&fast));
    audio_pcm_free(&slow);
    audio_pcm_free(&fast);
  }
  audio_pcm p;
  EXPECT_INT_EQ(tts_synthesize_pcm(t, "slt", "x", 5.0, &p), ERR_RANGE);
  EXPECT_INT_EQ(tts_synthesize_pcm(t, "slt", "x", 0.0, &p), ERR_RANGE);
  tts_close(t);
}

typedef struct chunks {
  int n;
  size_t samples;
  int stop_after;
} chunks;

static int count_chunk(void *user, const int16_t *pcm, size_t n, int rate) {
  (void)pcm, (void)rate;
  chunks *c = user;
  c->n++;
  c->samples += n;
  return c->stop_after && c->n >= c->stop_after;
}

TEST(speech_tts_streams_and_stops) {
  tts *t;
  ASSERT_INT_EQ(tts_open(&t), 0);
  const char *text = "This is a longer sentence, so that the engine has to deliver its audio in several pieces.";
  const char *voices[] = {"slt", "espeak:en-us"};
  for (size_t i = 0; i < 2; i++) {
    tts_choice c;
    ASSERT_INT_EQ(tts_voice_resolve(t, voices[i], &c), 0);
    chunks k = {0};
    ASSERT_INT_EQ(tts_synthesize(t, &c, text, 1.0, count_chunk, &k), 0);
    TEST_CHECK_(k.n > 3, 0, "%s: %d chunks", voices[i], k.n);
    chunks s = {.stop_after = 2};
    EXPECT_INT_EQ(tts_synthesize(t, &c, text, 1.0, count_chunk, &s), ERR_CANCELLED);
    EXPECT_INT_EQ(s.n, 2);
    /* The backend is usable after a stop. */
    chunks again = {0};
    EXPECT_INT_EQ(tts_synthesize(t, &c, "again", 1.0, count_chunk, &again), 0);
    EXPECT_TRUE(again.samples > 0);
  }
  tts_choice c;
  ASSERT_INT_EQ(tts_voice_resolve(t, "slt", &c), 0);
  char *big = malloc(TTS_TEXT_MAX + 2);
  memset(big, 'a', TTS_TEXT_MAX + 1);
  big[TTS_TEXT_MAX + 1] = '\0';
  chunks k = {0};
  EXPECT_INT_EQ(tts_synthesize(t, &c, big, 1.0, count_chunk, &k), ERR_TOO_LARGE);
  free(big);
  /* Empty text and odd bytes do not break anything. */
  EXPECT_INT_EQ(tts_synthesize(t, &c, "", 1.0, count_chunk, &k), 0);
  ASSERT_INT_EQ(tts_voice_resolve(t, "espeak:en-us", &c), 0);
  EXPECT_INT_EQ(tts_synthesize(t, &c, "\xff\xfe<speak>&amp;", 1.0, count_chunk, &k), 0);
  tts_close(t);
}

/* ---- STT ---- */

static int16_t *load_16k(const char *path, bool raw, size_t *n) {
  size_t len;
  unsigned char *bytes = (unsigned char *)test_read_file(path, &len);
  if (!bytes) return NULL;
  audio_decode_opts o = {.target_rate = 16000, .target_channels = 1, .fmt = AUDIO_SAMPLE_S16};
  if (raw) o.raw = AUDIO_RAW_LINEAR16, o.raw_rate = 16000, o.raw_channels = 1;
  audio_pcm p;
  int rc = audio_decode(bytes, len, &o, &p);
  free(bytes);
  if (rc) return NULL;
  *n = p.n_frames;
  return p.data;
}

static int count_words(const char *text, const char *const *words) {
  int k = 0;
  for (; *words; words++) {
    char pad[64], hay[1024];
    snprintf(pad, sizeof pad, " %s ", *words);
    snprintf(hay, sizeof hay, " %s ", text);
    if (strstr(hay, pad)) k++;
  }
  return k;
}

TEST(speech_stt_goforward) {
  size_t n;
  int16_t *pcm = load_16k(PS_DATA "/goforward.raw", true, &n);
  if (!pcm) TEST_SKIP("pocketsphinx-testdata not installed (goforward.raw)");
  stt *s;
  int rc = stt_open(&s, NULL);
  if (rc == ERR_NOT_FOUND) TEST_SKIP("pocketsphinx-en-us model not installed");
  ASSERT_INT_EQ(rc, 0);
  EXPECT_INT_EQ(stt_sample_rate(s), 16000);
  stt_result r;
  ASSERT_INT_EQ(stt_transcribe(s, pcm, n, &r), 0);
  /* The recording says "go forward ten meters". */
  const char *key[] = {"go", "forward", "ten", "meters", NULL};
  TEST_CHECK_(count_words(r.text, key) >= 3, 0, "transcript '%s'", r.text);
  EXPECT_NEAR(r.audio_seconds, n / 16000.0, 1e-9);
  ASSERT_TRUE(r.n_words >= 3);
  for (size_t i = 0; i < r.n_words; i++) {
    EXPECT_TRUE(r.words[i].start >= 0 && r.words[i].end > r.words[i].start);
    EXPECT_TRUE(r.words[i].end <= r.audio_seconds + 0.02);
    if (i) EXPECT_TRUE(r.words[i].start >= r.words[i - 1].end - 1e-9);
    EXPECT_TRUE(r.words[i].confidence >= 0 && r.words[i].confidence <= 1);
  }
  EXPECT_TRUE(r.confidence > 0);
  stt_result_free(&r);
  stt_close(s);
  free(pcm);
}

TEST(speech_stt_librivox) {
  size_t n;
  int16_t *pcm = load_16k(PS_DATA "/librivox/sense_and_sensibility_01_austen_64kb-0880.wav", false, &n);
  if (!pcm) TEST_SKIP("pocketsphinx-testdata not installed");
  stt *s;
  int rc = stt_open(&s, NULL);
  if (rc == ERR_NOT_FOUND) TEST_SKIP("pocketsphinx-en-us model not installed");
  ASSERT_INT_EQ(rc, 0);
  stt_result r;
  ASSERT_INT_EQ(stt_transcribe(s, pcm, n, &r), 0);
  /* "he was not an ill disposed young man" */
  const char *key[] = {"he", "was", "not", "an", "ill", "disposed", "young", "man", NULL};
  TEST_CHECK_(count_words(r.text, key) >= 4, 0, "transcript '%s'", r.text);
  stt_result_free(&r);
  stt_close(s);
  free(pcm);
}

/* Long whole-buffer audio is split at a pause near its middle across two
 * decoders: the words of both halves come back in order, with the second
 * half's times shifted to where it lies in the recording; with the pool's
 * other decoder busy, or splitting off, the same audio decodes whole. */
TEST(speech_stt_split_long_audio) {
  size_t ng, nl;
  int16_t *gf = load_16k(PS_DATA "/goforward.raw", true, &ng);
  int16_t *lv = load_16k(PS_DATA "/librivox/sense_and_sensibility_01_austen_64kb-0880.wav", false, &nl);
  if (!gf || !lv) TEST_SKIP("pocketsphinx-testdata not installed");
  /* goforward, 1.5 s of faint noise, the librivox clip, 1.5 s, goforward */
  size_t gap = 24000, n = 2 * ng + nl + 2 * gap;
  int16_t *pcm = malloc(n * sizeof *pcm);
  ASSERT_TRUE(pcm != NULL);
  size_t at = 0;
  uint32_t seed = 7;
  memcpy(pcm, gf, ng * sizeof *pcm), at += ng;
  for (size_t i = 0; i < gap; i++) seed = seed * 1103515245u + 12345u, pcm[at++] = (int16_t)((seed >> 16) % 41) - 20;
  memcpy(pcm + at, lv, nl * sizeof *pcm), at += nl;
  for (size_t i = 0; i < gap; i++) seed = seed * 1103515245u + 12345u, pcm[at++] = (int16_t)((seed >> 16) % 41) - 20;
  memcpy(pcm + at, gf, ng * sizeof *pcm);
  double last_start = (double)(ng + gap + nl + gap) / 16000.0; /* where the second goforward begins */
  stt *s;
  stt_config cfg = {.split_min_s = 4, .n_max = 2, .n_preload = 2};
  int rc = stt_open(&s, &cfg);
  if (rc == ERR_NOT_FOUND) TEST_SKIP("pocketsphinx-en-us model not installed");
  ASSERT_INT_EQ(rc, 0);
  stt_result r;
  ASSERT_INT_EQ(stt_transcribe(s, pcm, n, &r), 0);
  EXPECT_INT_EQ(r.parts, 2);
  EXPECT_NEAR(r.audio_seconds, n / 16000.0, 1e-6);
  const char *key[] = {"forward", "ten", "meters", "young", "man", NULL};
  TEST_CHECK_(count_words(r.text, key) >= 5, 0, "transcript '%s'", r.text);
  size_t n_fwd = 0;
  for (size_t i = 0; i < r.n_words; i++) {
    EXPECT_TRUE(r.words[i].end > r.words[i].start && r.words[i].end <= r.audio_seconds + 0.02);
    if (i) TEST_CHECK_(r.words[i].start >= r.words[i - 1].end - 1e-9, 0, "word %zu '%s' at %.2f before %.2f", i,
                       r.words[i].word, r.words[i].start, r.words[i - 1].end);
    if (!strcmp(r.words[i].word, "forward")) {
      /* the first "forward" is in goforward's first second, the second one
       * in the last 2.8 s: the offset of the second half was applied */
      if (n_fwd++ == 0) EXPECT_TRUE(r.words[i].start < 1.5);
      else TEST_CHECK_(r.words[i].start > last_start && r.words[i].start < last_start + 1.5, 0, "second forward at %.2f",
                       r.words[i].start);
    }
  }
  EXPECT_INT_EQ(n_fwd, 2);
  stt_result_free(&r);
  /* the other decoder busy: decoded whole on one */
  stt_stream *busy;
  ASSERT_INT_EQ(stt_stream_begin(s, &busy), 0);
  ASSERT_INT_EQ(stt_transcribe(s, pcm, n, &r), 0);
  EXPECT_INT_EQ(r.parts, 1);
  TEST_CHECK_(count_words(r.text, key) >= 5, 0, "whole transcript '%s'", r.text);
  /* whole, the words after the pauses keep their times too (pocketsphinx's
   * silence removal, now off, used to pull them early by the pauses) */
  ASSERT_TRUE(r.n_words >= 4);
  TEST_CHECK_(r.words[r.n_words - 1].end > last_start + 1.5, 0, "last word ends at %.2f", r.words[r.n_words - 1].end);
  stt_result_free(&r);
  stt_stream_free(busy);
  stt_close(s);
  /* splitting off */
  stt_config off = {.split_min_s = -1};
  ASSERT_INT_EQ(stt_open(&s, &off), 0);
  ASSERT_INT_EQ(stt_transcribe(s, pcm, n, &r), 0);
  EXPECT_INT_EQ(r.parts, 1);
  stt_result_free(&r);
  stt_close(s);
  free(pcm);
  free(gf);
  free(lv);
}

/* A pooled decoder reports the same word times for the same audio however
 * many utterances it decoded before (pocketsphinx keeps segment times
 * stream-wide; each utterance starts a new stream). */
TEST(speech_stt_times_do_not_drift) {
  size_t n;
  int16_t *pcm = load_16k(PS_DATA "/goforward.raw", true, &n);
  if (!pcm) TEST_SKIP("pocketsphinx-testdata not installed (goforward.raw)");
  stt *s;
  stt_config cfg = {.n_preload = 1, .n_max = 1};
  int rc = stt_open(&s, &cfg);
  if (rc == ERR_NOT_FOUND) TEST_SKIP("pocketsphinx-en-us model not installed");
  ASSERT_INT_EQ(rc, 0);
  double first = -1;
  for (int round = 0; round < 3; round++) {
    stt_result r;
    ASSERT_INT_EQ(stt_transcribe(s, pcm, n, &r), 0);
    ASSERT_TRUE(r.n_words >= 1);
    if (round == 0) first = r.words[0].start;
    TEST_CHECK_(r.words[0].start == first, 0, "round %d: first word at %.2f s, round 0 at %.2f s", round,
                r.words[0].start, first);
    EXPECT_TRUE(r.words[r.n_words - 1].end <= r.audio_seconds + 0.02);
    stt_result_free(&r);
    stt_stream *st;
    ASSERT_INT_EQ(stt_stream_begin(s, &st), 0);
    ASSERT_INT_EQ(stt_stream_feed(st, pcm, n), 0);
    ASSERT_INT_EQ(stt_stream_end(st, &r), 0);
    ASSERT_TRUE(r.n_words >= 1);
    EXPECT_TRUE(r.words[r.n_words - 1].end <= r.audio_seconds + 0.02);
    stt_stream_free(st);
    stt_result_free(&r);
  }
  stt_close(s);
  free(pcm);
}

/* Taking the decoder first and decoding later gives what stt_transcribe
 * gives. */
TEST(speech_stt_stream_transcribe) {
  size_t n;
  int16_t *pcm = load_16k(PS_DATA "/goforward.raw", true, &n);
  if (!pcm) TEST_SKIP("pocketsphinx-testdata not installed (goforward.raw)");
  stt *s;
  int rc = stt_open(&s, NULL);
  if (rc == ERR_NOT_FOUND) TEST_SKIP("pocketsphinx-en-us model not installed");
  ASSERT_INT_EQ(rc, 0);
  stt_result a, b;
  ASSERT_INT_EQ(stt_transcribe(s, pcm, n, &a), 0);
  stt_stream *st;
  ASSERT_INT_EQ(stt_stream_begin(s, &st), 0);
  ASSERT_INT_EQ(stt_stream_transcribe(st, pcm, n, &b), 0);
  stt_result_free(&b);
  EXPECT_INT_EQ(stt_stream_transcribe(st, pcm, n, &b), ERR_INVALID); /* ended */
  stt_stream_free(st);
  ASSERT_INT_EQ(stt_stream_begin(s, &st), 0);
  stt_result c;
  ASSERT_INT_EQ(stt_stream_transcribe(st, pcm, n, &c), 0);
  stt_stream_free(st);
  EXPECT_STR_EQ(a.text, c.text);
  ASSERT_TRUE(a.n_words == c.n_words && a.n_words > 0);
  for (size_t i = 0; i < a.n_words; i++) EXPECT_NEAR(a.words[i].start, c.words[i].start, 1e-9);
  stt_result_free(&a);
  stt_result_free(&c);
  stt_close(s);
  free(pcm);
}

TEST(speech_stt_incremental) {
  size_t n;
  int16_t *pcm = load_16k(PS_DATA "/goforward.raw", true, &n);
  if (!pcm) TEST_SKIP("pocketsphinx-testdata not installed (goforward.raw)");
  stt *s;
  int rc = stt_open(&s, NULL);
  if (rc == ERR_NOT_FOUND) TEST_SKIP("pocketsphinx-en-us model not installed");
  ASSERT_INT_EQ(rc, 0);
  stt_stream *st;
  ASSERT_INT_EQ(stt_stream_begin(s, &st), 0);
  size_t chunk = 1600; /* 100 ms */
  int n_partial = 0;
  for (size_t i = 0; i < n; i += chunk) {
    ASSERT_INT_EQ(stt_stream_feed(st, pcm + i, i + chunk <= n ? chunk : n - i), 0);
    char *p;
    ASSERT_INT_EQ(stt_stream_partial(st, &p), 0);
    if (p[0]) n_partial++;
    free(p);
  }
  EXPECT_TRUE(n_partial > 0);
  stt_result r;
  ASSERT_INT_EQ(stt_stream_end(st, &r), 0);
  const char *key[] = {"go", "forward", "ten", "meters", NULL};
  TEST_CHECK_(count_words(r.text, key) >= 3, 0, "streamed transcript '%s'", r.text);
  EXPECT_INT_EQ(stt_stream_feed(st, pcm, 10), ERR_INVALID);
  stt_stream_free(st);
  stt_result_free(&r);
  stt_close(s);
  free(pcm);
}

TEST(speech_stt_pool) {
  stt *s;
  stt_config cfg = {.n_preload = 1, .n_max = 1, .wait_ms = 200};
  int rc = stt_open(&s, &cfg);
  if (rc == ERR_NOT_FOUND) TEST_SKIP("pocketsphinx-en-us model not installed");
  ASSERT_INT_EQ(rc, 0);
  stt_stream *a, *b;
  ASSERT_INT_EQ(stt_stream_begin(s, &a), 0);
  EXPECT_INT_EQ(stt_stream_begin(s, &b), ERR_OVERLOADED);
  stt_stream_free(a); /* abandoned without end: the decoder goes back clean */
  /* The same decoder serves the next stream at once. */
  uint64_t t0 = time_mono_ns();
  ASSERT_INT_EQ(stt_stream_begin(s, &b), 0);
  double ms = (double)(time_mono_ns() - t0) / 1e6;
  EXPECT_TRUE(ms < 100);
  int16_t silence[16000] = {0};
  ASSERT_INT_EQ(stt_stream_feed(b, silence, 16000), 0);
  stt_result r;
  ASSERT_INT_EQ(stt_stream_end(b, &r), 0);
  EXPECT_INT_EQ(r.n_words, 0);
  stt_result_free(&r);
  stt_stream_free(b);
  stt_close(s);
  const char *half[] = {"-topn", NULL};
  stt_config badopt = {.options = half};
  EXPECT_INT_EQ(stt_open(&s, &badopt), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "-topn");
  const char *unknown[] = {"-no-such-option", "1", NULL};
  stt_config badname = {.options = unknown};
  EXPECT_INT_EQ(stt_open(&s, &badname), ERR_INVALID);
  /* overriding one of our defaults (-topn) is allowed, not a duplicate */
  const char *over[] = {"-topn", "4", "-maxwpf", "12", NULL};
  stt_config overcfg = {.options = over};
  EXPECT_INT_EQ(stt_open(&s, &overcfg), 0);
  stt_close(s);
  stt_config bad = {.model_dir = "/nonexistent/model"};
  EXPECT_INT_EQ(stt_open(&s, &bad), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "/nonexistent/model");
}

/* ---- round trip ---- */

TEST(speech_roundtrip_flite_to_sphinx) {
  tts *t;
  ASSERT_INT_EQ(tts_open(&t), 0);
  stt *s;
  int rc = stt_open(&s, NULL);
  if (rc == ERR_NOT_FOUND) TEST_SKIP("pocketsphinx-en-us model not installed");
  ASSERT_INT_EQ(rc, 0);
  audio_pcm p;
  ASSERT_INT_EQ(tts_synthesize_pcm(t, "slt", "the quick brown fox jumps over the lazy dog", 1.0, &p), 0);
  int16_t *pcm16 = p.data;
  size_t n = p.n_frames;
  int16_t *res = NULL;
  if (p.rate != 16000) {
    ASSERT_INT_EQ(audio_resample_s16(p.data, p.n_frames, 1, p.rate, 16000, &res, &n), 0);
    pcm16 = res;
  }
  stt_result r;
  ASSERT_INT_EQ(stt_transcribe(s, pcm16, n, &r), 0);
  const char *key[] = {"quick", "brown", "fox", "jumps", "over", "lazy", "dog", NULL};
  TEST_CHECK_(count_words(r.text, key) >= 2, 0, "transcript of flite slt: '%s'", r.text);
  stt_result_free(&r);
  free(res);
  audio_pcm_free(&p);
  stt_close(s);
  tts_close(t);
}

/* Every listed espeak-ng voice can actually be selected and speaks. */
TEST(speech_tts_every_espeak_voice_speaks) {
  tts *t;
  ASSERT_INT_EQ(tts_open(&t), 0);
  int n = 0;
  for (size_t i = 0; i < tts_n_voices(t); i++) {
    const tts_voice *v = tts_voice_at(t, i);
    if (strcmp(v->backend, "espeak-ng") != 0) continue;
    tts_choice c;
    ASSERT_INT_EQ(tts_voice_resolve(t, v->name, &c), 0);
    chunks k = {0};
    int rc = tts_synthesize(t, &c, "1", 1.0, count_chunk, &k);
    TEST_CHECK_(rc == 0 && k.samples > 0, 0, "%s: rc %d, %zu samples (%s)", v->name, rc, k.samples, err_detail());
    n++;
  }
  EXPECT_TRUE(n > 50);
  tts_close(t);
}

typedef struct first_chunk {
  uint64_t t0, first_ns;
  size_t samples;
} first_chunk;

static int note_first(void *user, const int16_t *pcm, size_t n, int rate) {
  (void)pcm, (void)rate;
  first_chunk *f = user;
  if (!f->first_ns) f->first_ns = time_mono_ns() - f->t0;
  f->samples += n;
  return 0;
}

/* Long text streams sentence by sentence: the first audio arrives well
 * before the whole text is synthesized. */
TEST(speech_tts_first_audio_early) {
  tts *t;
  ASSERT_INT_EQ(tts_open(&t), 0);
  const char *text =
      "The first sentence is short. The second sentence is a good deal longer than the first one was. "
      "A third sentence follows, with some more words in it to take time! Does a fourth one help? "
      "Finally, the fifth sentence closes this little paragraph of text.";
  const char *voices[] = {"slt", "espeak:en-us"};
  for (size_t i = 0; i < 2; i++) {
    tts_choice c;
    ASSERT_INT_EQ(tts_voice_resolve(t, voices[i], &c), 0);
    first_chunk f = {.t0 = time_mono_ns()};
    ASSERT_INT_EQ(tts_synthesize(t, &c, text, 1.0, note_first, &f), 0);
    uint64_t total = time_mono_ns() - f.t0;
    TEST_CHECK_(f.first_ns > 0 && f.first_ns * 3 < total, 0, "%s: first audio after %.1f ms of %.1f ms", voices[i],
                f.first_ns / 1e6, total / 1e6);
    EXPECT_TRUE(f.samples > (size_t)c.voice->sample_rate * 5); /* > 5 s of speech */
  }
  tts_close(t);
}

/* Two threads transcribe at once on a pool of two decoders, and two more
 * threads synthesize on flite and espeak-ng at the same time. */
#include <pthread.h>

typedef struct par_job {
  stt *s;
  tts *t;
  const int16_t *pcm;
  size_t n;
  const char *voice;
  int rc;
  char text[256];
} par_job;

static void *par_stt(void *arg) {
  par_job *j = arg;
  stt_result r;
  j->rc = stt_transcribe(j->s, j->pcm, j->n, &r);
  if (j->rc == 0) snprintf(j->text, sizeof j->text, "%s", r.text);
  stt_result_free(&r);
  return NULL;
}

static void *par_tts(void *arg) {
  par_job *j = arg;
  audio_pcm p;
  for (int i = 0; i < 3 && j->rc == 0; i++) {
    j->rc = tts_synthesize_pcm(j->t, j->voice, "several threads speak at once", 1.0, &p);
    if (j->rc == 0 && audio_pcm_seconds(&p) < 0.5) j->rc = -100;
    audio_pcm_free(&p);
  }
  return NULL;
}

TEST(speech_parallel) {
  size_t n;
  int16_t *pcm = load_16k(PS_DATA "/goforward.raw", true, &n);
  if (!pcm) TEST_SKIP("pocketsphinx-testdata not installed (goforward.raw)");
  stt *s;
  stt_config cfg = {.n_preload = 2, .n_max = 2};
  int rc = stt_open(&s, &cfg);
  if (rc == ERR_NOT_FOUND) TEST_SKIP("pocketsphinx-en-us model not installed");
  ASSERT_INT_EQ(rc, 0);
  tts *t;
  ASSERT_INT_EQ(tts_open(&t), 0);
  par_job jobs[4] = {{.s = s, .pcm = pcm, .n = n}, {.s = s, .pcm = pcm, .n = n}, {.t = t, .voice = "slt"},
                     {.t = t, .voice = "espeak:en-us"}};
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, i < 2 ? par_stt : par_tts, &jobs[i]);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  const char *key[] = {"go", "forward", "ten", "meters", NULL};
  for (int i = 0; i < 2; i++) {
    EXPECT_INT_EQ(jobs[i].rc, 0);
    TEST_CHECK_(count_words(jobs[i].text, key) >= 3, 0, "thread %d: '%s'", i, jobs[i].text);
  }
  EXPECT_INT_EQ(jobs[2].rc, 0);
  EXPECT_INT_EQ(jobs[3].rc, 0);
  tts_close(t);
  stt_close(s);
  free(pcm);
}
