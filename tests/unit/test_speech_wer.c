/*
 * test_speech_wer.c - the measurement behind docs/speech.md: word error
 * rate of the STT backend on Debian's pocketsphinx test recordings (against
 * their shipped transcripts) and on TTS output of each local English voice
 * (against the text spoken), with real-time factors (median of 3 runs).
 *
 * Slow (one to a few minutes), so it runs only with PARLEY_SPEECH_BENCH=1:
 *   PARLEY_SPEECH_BENCH=1 PARLEY_TEST_TIMEOUT=900 ./build/unit-tests speech_wer_report
 * It prints a Markdown table and fails only when a WER is absurd (> 90%).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audio/audio.h"
#include "base/err.h"
#include "base/util.h"
#include "speech/speech.h"
#include "test.h"
#include "test_audio_util.h"
#include "wer.h"

#define PS_DATA "/usr/share/pocketsphinx/test/data"

TEST(speech_wer_word_errors) {
  size_t n;
  EXPECT_INT_EQ(word_errors("go forward ten meters", "go forward ten meters", &n), 0);
  EXPECT_INT_EQ(n, 4);
  EXPECT_INT_EQ(word_errors("go forward ten meters", "go for word ten meters", &n), 2);
  EXPECT_INT_EQ(word_errors("a b c", "", &n), 3);
  EXPECT_INT_EQ(word_errors("a b c", "x a b c", &n), 1);
}

/* Process CPU time in seconds: on a shared machine wall time measures the
 * other processes too, CPU time measures us. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct clip {
  char name[96];
  char ref[512];
  int16_t *pcm;
  size_t n;
} clip;

/* Reads "<s> words </s> (id)" lines of a pocketsphinx transcription file. */
static size_t load_corpus(const char *dir, const char *trans, clip *out, size_t max) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, trans);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[1024];
  size_t n = 0;
  while (n < max && fgets(line, sizeof line, f)) {
    char *open = strrchr(line, '('), *close = open ? strchr(open, ')') : NULL;
    if (!open || !close) continue;
    *close = '\0';
    *open = '\0';
    char *ref = strstr(line, "<s>");
    ref = ref ? ref + 3 : line;
    char *end = strstr(ref, "</s>");
    if (end) *end = '\0';
    clip *c = &out[n];
    snprintf(c->name, sizeof c->name, "%s", open + 1);
    snprintf(c->ref, sizeof c->ref, "%.500s", ref);
    snprintf(path, sizeof path, "%s/%s.wav", dir, open + 1);
    size_t len;
    unsigned char *bytes = (unsigned char *)test_read_file(path, &len);
    if (!bytes) continue;
    audio_decode_opts o = {.target_rate = 16000, .target_channels = 1, .fmt = AUDIO_SAMPLE_S16};
    audio_pcm p;
    int rc = audio_decode(bytes, len, &o, &p);
    free(bytes);
    if (rc) continue;
    c->pcm = p.data;
    c->n = p.n_frames;
    n++;
  }
  fclose(f);
  return n;
}

/* Transcribes each clip 3 times: WER summed over the set, RTF median. */
static void measure(stt *s, const char *label, clip *clips, size_t n, double *wer_out) {
  size_t errs = 0, words = 0;
  double rtf[3], crtf[3];
  for (int run = 0; run < 3; run++) {
    double dec = 0, audio = 0, cpu = 0;
    for (size_t i = 0; i < n; i++) {
      stt_result r;
      double c0 = cpu_s();
      int rc = stt_transcribe(s, clips[i].pcm, clips[i].n, &r);
      cpu += cpu_s() - c0;
      if (rc != 0) continue;
      dec += r.decode_seconds;
      audio += r.audio_seconds;
      if (run == 0) {
        size_t nr;
        errs += word_errors(clips[i].ref, r.text, &nr);
        words += nr;
        printf("    %-28s ref: %s\n    %-28s hyp: %s\n", clips[i].name, clips[i].ref, "", r.text);
      }
      stt_result_free(&r);
    }
    rtf[run] = audio > 0 ? dec / audio : 0;
    crtf[run] = audio > 0 ? cpu / audio : 0;
  }
  qsort(rtf, 3, sizeof rtf[0], cmp_double);
  qsort(crtf, 3, sizeof crtf[0], cmp_double);
  double wer = words ? (double)errs / (double)words : 1.0;
  printf("| %s | %zu | %zu | %.1f%% | %.3f | %.3f |\n", label, n, words, 100.0 * wer, crtf[1], rtf[1]);
  *wer_out = wer;
}

static const char *const SENTENCES[] = {
    "the birch canoe slid on the smooth planks",   "glue the sheet to the dark blue background",
    "it is easy to tell the depth of a well",      "these days a chicken leg is a rare dish",
    "rice is often served in round bowls",         "the quick brown fox jumps over the lazy dog",
};

typedef struct first_t {
  uint64_t t0, first_ns;
} first_t;

static int first_cb(void *user, const int16_t *pcm, size_t n, int rate) {
  (void)pcm, (void)n, (void)rate;
  first_t *f = user;
  if (!f->first_ns) f->first_ns = time_mono_ns() - f->t0;
  return 0;
}

TEST(speech_wer_report) {
  const char *env = getenv("PARLEY_SPEECH_BENCH");
  if (!env || strcmp(env, "1") != 0) TEST_SKIP("set PARLEY_SPEECH_BENCH=1 to measure WER and RTF");
  stt *s;
  int rc = stt_open(&s, NULL);
  if (rc) TEST_SKIP("pocketsphinx model not installed");
  static clip clips[32];
  double wer;
  printf("\n| set | clips | words | WER | STT RTF, CPU (median of 3) | STT RTF, wall |\n|---|---|---|---|---|---|\n");
  size_t n = load_corpus(PS_DATA "/librivox", "transcription", clips, 32);
  if (n) {
    measure(s, "librivox (read speech)", clips, n, &wer);
    EXPECT_TRUE(wer < 0.9);
  }
  size_t m = load_corpus(PS_DATA "/cards", "cards.transcription", clips + n, 32 - n);
  if (m) measure(s, "cards (short commands)", clips + n, m, &wer);
  size_t len;
  unsigned char *gf = (unsigned char *)test_read_file(PS_DATA "/goforward.raw", &len);
  if (gf) {
    clip g = {"goforward", "go forward ten meters", (int16_t *)gf, len / 2};
    measure(s, "goforward.raw", &g, 1, &wer);
  }
  for (size_t i = 0; i < n + m; i++) free(clips[i].pcm);
  free(gf);

  tts *t;
  ASSERT_INT_EQ(tts_open(&t), 0);
  const char *voices[] = {"slt",          "rms",          "awb",             "kal16",
                          "kal",          "espeak:en-us", "espeak:en-gb",    "espeak:en-us+f3",
                          "espeak:en-us+klatt"};
  printf("\n| TTS voice | sentences | words | STT WER | TTS RTF, CPU (median of 3) | TTS RTF, wall |\n|---|---|---|---|---|---|\n");
  for (size_t v = 0; v < sizeof voices / sizeof voices[0]; v++) {
    size_t ns = sizeof SENTENCES / sizeof SENTENCES[0];
    clip tc[8] = {0};
    double trtf[3] = {0}, tcpu[3] = {0};
    for (int run = 0; run < 3; run++) {
      double synth = 0, audio = 0, cpu = 0;
      for (size_t i = 0; i < ns; i++) {
        audio_pcm p;
        uint64_t t0 = time_mono_ns();
        double c0 = cpu_s();
        rc = tts_synthesize_pcm(t, voices[v], SENTENCES[i], 1.0, &p);
        cpu += cpu_s() - c0;
        synth += (double)(time_mono_ns() - t0) / 1e9;
        ASSERT_INT_EQ(rc, 0);
        audio += audio_pcm_seconds(&p);
        if (run == 0) {
          snprintf(tc[i].name, sizeof tc[i].name, "%s #%zu", voices[v], i);
          snprintf(tc[i].ref, sizeof tc[i].ref, "%s", SENTENCES[i]);
          int16_t *res;
          size_t nres;
          ASSERT_INT_EQ(audio_resample_s16(p.data, p.n_frames, 1, p.rate, 16000, &res, &nres), 0);
          tc[i].pcm = res, tc[i].n = nres;
        }
        audio_pcm_free(&p);
      }
      trtf[run] = synth / audio;
      tcpu[run] = cpu / audio;
    }
    qsort(trtf, 3, sizeof trtf[0], cmp_double);
    qsort(tcpu, 3, sizeof tcpu[0], cmp_double);
    size_t errs = 0, words = 0;
    for (size_t i = 0; i < ns; i++) {
      stt_result r;
      ASSERT_INT_EQ(stt_transcribe(s, tc[i].pcm, tc[i].n, &r), 0);
      size_t nr;
      errs += word_errors(tc[i].ref, r.text, &nr);
      words += nr;
      printf("    %-28s hyp: %s\n", tc[i].name, r.text);
      stt_result_free(&r);
      free(tc[i].pcm);
    }
    printf("| %s | %zu | %zu | %.1f%% | %.4f | %.4f |\n", voices[v], ns, words, 100.0 * errs / (double)words, tcpu[1],
           trtf[1]);
  }
  /* Time to the first audio chunk of a one-sentence input (what /speak's
   * first byte waits for, before encoding). */
  printf("\n| TTS voice | first audio after (ms, median of 3) |\n|---|---|\n");
  const char *fv[] = {"slt", "rms", "awb", "kal16", "espeak:en-us"};
  for (size_t v = 0; v < sizeof fv / sizeof fv[0]; v++) {
    tts_choice c;
    ASSERT_INT_EQ(tts_voice_resolve(t, fv[v], &c), 0);
    double ms[3];
    for (int run = 0; run < 3; run++) {
      first_t f = {time_mono_ns(), 0};
      ASSERT_INT_EQ(tts_synthesize(t, &c, "Hello, this is a one sentence answer from the local voice.", 1.0, first_cb, &f), 0);
      ms[run] = (double)f.first_ns / 1e6;
    }
    qsort(ms, 3, sizeof ms[0], cmp_double);
    printf("| %s | %.1f |\n", fv[v], ms[1]);
  }
  tts_close(t);
  stt_close(s);
}
