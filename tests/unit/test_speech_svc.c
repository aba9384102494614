/*
 * test_speech_svc.c - the vendor-neutral transcript helpers of
 * api/speech_svc.c: sentence spans from word timings and the light
 * punctuation (capitals, periods, question marks) every speech API uses.
 * Expected values are written by hand.
 */
#include <string.h>

#include "api/speech_svc.h"
#include "test.h"

/* An stt_result over a space-separated sentence, words 0.3 s apart
 * except a 1 s pause before each word marked with a leading '|'. */
static void make_result(const char *text, stt_result *r, stt_word *w, char store[][32], size_t max) {
  memset(r, 0, sizeof *r);
  double t = 0;
  size_t n = 0;
  for (const char *p = text; *p && n < max;) {
    while (*p == ' ') p++;
    if (!*p) break;
    if (*p == '|') t += 1.0, p++;
    size_t k = 0;
    while (*p && *p != ' ' && k < 31) store[n][k++] = *p++;
    store[n][k] = '\0';
    w[n] = (stt_word){.word = store[n], .start = t, .end = t + 0.25, .confidence = 0.9};
    t += 0.3;
    n++;
  }
  r->words = w;
  r->n_words = n;
}

static void sentences(const char *text, char *out, size_t cap) {
  stt_result r;
  stt_word w[64];
  char store[64][32];
  make_result(text, &r, w, store, 64);
  api_span *spans = NULL;
  int n = api_speech_spans(&r, 0.6, 10.0, &spans);
  buf b = BUF_INIT;
  for (int i = 0; i < n; i++) {
    if (i) buf_append_byte(&b, ' ');
    api_speech_span_text(&r, &spans[i], true, &b);
  }
  snprintf(out, cap, "%s", b.data ? b.data : "");
  buf_free(&b);
  free(spans);
}

TEST(speech_svc_punctuation) {
  char out[256];
  sentences("go forward ten meters |then i stop", out, sizeof out);
  EXPECT_STR_EQ(out, "Go forward ten meters. Then I stop.");
  sentences("how are you |i am fine", out, sizeof out);
  EXPECT_STR_EQ(out, "How are you? I am fine.");
  sentences("is it raining |do you know |do it now |don't do that", out, sizeof out);
  EXPECT_STR_EQ(out, "Is it raining? Do you know? Do it now. Don't do that.");
  sentences("can the train stop here |what", out, sizeof out);
  EXPECT_STR_EQ(out, "Can the train stop here? What?");
  sentences("when i got home i slept", out, sizeof out); /* "when" opens clauses too */
  EXPECT_STR_EQ(out, "When I got home I slept.");
  sentences("i'm here |isn't it late", out, sizeof out);
  EXPECT_STR_EQ(out, "I'm here. Isn't it late?");
}

TEST(speech_svc_sentence_end) {
  stt_word w[3] = {{.word = "will"}, {.word = "they"}, {.word = "come"}};
  EXPECT_INT_EQ(api_speech_sentence_end(w, 3), '?');
  EXPECT_INT_EQ(api_speech_sentence_end(w, 1), '.'); /* "will" alone: not enough to tell */
  EXPECT_INT_EQ(api_speech_sentence_end(w, 0), '.');
  char out[16];
  api_speech_punctuate("x", false, 0, out, sizeof out);
  EXPECT_STR_EQ(out, "x");
  api_speech_punctuate("yes", true, '?', out, sizeof out);
  EXPECT_STR_EQ(out, "Yes?");
  api_speech_punctuate("abcdefghijklmno", false, '.', out, sizeof out); /* no room: word kept, no overflow */
  EXPECT_STR_EQ(out, "abcdefghijklmno");
}
