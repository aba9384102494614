/*
 * test_whisper_transcribe.c - the window loop of whisper_transcribe
 * (speech/whisper_transcribe.h) over scripted windows: each window's
 * "model" plays back a token sequence chosen by the window's start, so
 * seeking (after a closed window, to the last closing timestamp of a cut
 * one, past a silent one), the segments' times, the language detected once
 * and kept, the previous text as the next window's prompt, and times held
 * inside the audio each change the outcome when broken. Expected times are
 * worked out by hand from the played timestamps (0.02 s each, windows at
 * seek / 100 s).
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "speech/whisper_decode.h"
#include "speech/whisper_transcribe.h"
#include "test.h"

/* Token texts: the 256 single bytes. */
static const char *byte_text(void *ctx, int32_t tok, size_t *len) {
  static char bytes[256];
  (void)ctx;
  if (tok < 0 || tok >= 256) return *len = 0, NULL;
  for (int i = 0; i < 256; i++) bytes[i] = (char)i;
  *len = 1;
  return bytes + tok;
}

#define MAX_WIN 8

typedef struct wscript {
  whisper_vocab v;
  int64_t seek[MAX_WIN], size[MAX_WIN]; /* windows asked for, in order */
  int n_win;
  const int32_t *play[MAX_WIN];         /* per window: tokens to play, NULL = silence */
  int n_play[MAX_WIN];
  int lang_peak;                        /* language index the "model" prefers after SOT */
  int32_t seq[1024];                    /* fed so far in this window, by position */
  int32_t prompt_of[MAX_WIN][512];      /* each window's prompt up to SOT */
  int n_prompt_of[MAX_WIN];
} wscript;

static int w_window(void *ctx, int64_t seek, int64_t n) {
  wscript *s = ctx;
  if (s->n_win >= MAX_WIN) return err_set(ERR_INVALID, "script: too many windows");
  s->seek[s->n_win] = seek;
  s->size[s->n_win] = n;
  s->n_win++;
  return 0;
}

/* Logits for the token after seq[n]: after SOT the language (and, in a
 * silent window, no-speech); then the window's played tokens one per step
 * (peak 30, the rest 0), EOT after them; a silent window is flat. */
static int w_logits(void *ctx, const int32_t *toks, int n, int n_past, float *x, bool all) {
  wscript *s = ctx;
  if (all) return err_set(ERR_INVALID, "script: all rows not scripted");
  memcpy(s->seq + n_past, toks, (size_t)n * sizeof *toks);
  int len = n_past + n, w = s->n_win - 1;
  for (int32_t i = 0; i < s->v.n_vocab; i++) x[i] = 0.0f;
  int sot = -1;
  for (int i = 0; i < len; i++)
    if (s->seq[i] == s->v.sot) sot = i;
  if (sot < 0) return err_set(ERR_INVALID, "script: no SOT");
  if (sot == len - 1) {
    s->n_prompt_of[w] = sot;
    memcpy(s->prompt_of[w], s->seq, (size_t)sot * sizeof *s->seq);
    if (s->v.multilingual) x[s->v.sot + 1 + s->lang_peak] = 30.0f;
    if (!s->play[w]) x[s->v.nosp] = 30.0f;
    return 0;
  }
  int k = len - (sot + (s->v.multilingual ? 3 : 1));
  if (k < 0 || !s->play[w]) return 0;
  x[k < s->n_play[w] ? s->play[w][k] : s->v.eot] = 30.0f;
  return 0;
}

static whisper_transcribe_cfg cfg_of(wscript *s, int lang) {
  whisper_transcribe_cfg c = {.v = &s->v, .logits = w_logits, .window = w_window, .ctx = s, .window_frames = 3000,
                              .opts = whisper_decode_defaults(), .condition_on_previous = true, .anchor_min = 0.01f};
  c.opts.lang = lang;
  return c;
}

static int32_t text_of(const whisper_segment *g, char *out, size_t cap) {
  size_t k = 0;
  for (int i = 0; i < g->n_tokens && k + 1 < cap; i++) out[k++] = (char)g->tokens[i];
  out[k] = 0;
  return (int32_t)k;
}

TEST(whisper_transcribe_seeks_across_windows) {
  wscript s;
  memset(&s, 0, sizeof s);
  ASSERT_INT_EQ(whisper_vocab_init(51865, byte_text, NULL, &s.v), 0);
  const int32_t tb = s.v.ts_begin;
  s.lang_peak = 2; /* german */
  /* window 0: two closed segments, then one cut off after <|10.00|><|10.00|>: the next window starts at 10 s */
  int32_t w0[] = {tb + 0, 'a', 'b', tb + 100, tb + 100, ' ', 'c', 'd', tb + 500, tb + 500, ' ', 'e', 'f'};
  /* window 1 (at 10 s): one segment ended by a lone timestamp and no pair: [10, 11], the whole window consumed */
  int32_t w1[] = {tb + 0, ' ', 'g', tb + 50};
  /* window 2 (at 40 s, 30 s left): closed to its end by a lone timestamp */
  int32_t w2[] = {tb + 0, 'h', tb + 100, tb + 100, ' ', 'i', tb + 200};
  s.play[0] = w0, s.n_play[0] = (int)(sizeof w0 / sizeof *w0);
  s.play[1] = w1, s.n_play[1] = (int)(sizeof w1 / sizeof *w1);
  s.play[2] = w2, s.n_play[2] = (int)(sizeof w2 / sizeof *w2);
  whisper_transcribe_cfg c = cfg_of(&s, -1);
  whisper_transcript t;
  ASSERT_INT_EQ(whisper_transcribe(&c, 7000, &t), 0);
  ASSERT_INT_EQ(s.n_win, 3);
  EXPECT_INT_EQ(s.seek[0], 0);
  EXPECT_INT_EQ(s.size[0], 3000);
  EXPECT_INT_EQ(s.seek[1], 1000);
  EXPECT_INT_EQ(s.size[1], 3000);
  EXPECT_INT_EQ(s.seek[2], 4000);
  EXPECT_INT_EQ(s.size[2], 3000);
  EXPECT_INT_EQ(t.n_windows, 3);
  EXPECT_INT_EQ(t.lang, 2);
  ASSERT_INT_EQ(t.n_segs, 5);
  static const struct { const char *text; double start, end; int64_t seek; } want[] = {
      {"ab", 0.0, 2.0, 0}, {" cd", 2.0, 10.0, 0}, {" g", 10.0, 11.0, 1000}, {"h", 40.0, 42.0, 4000}, {" i", 42.0, 44.0, 4000}};
  for (int i = 0; i < 5; i++) {
    char txt[64];
    text_of(&t.segs[i], txt, sizeof txt);
    EXPECT_STR_EQ(txt, want[i].text);
    EXPECT_NEAR(t.segs[i].start, want[i].start, 1e-9);
    EXPECT_NEAR(t.segs[i].end, want[i].end, 1e-9);
    EXPECT_INT_EQ(t.segs[i].seek, want[i].seek);
  }
  /* the cut-off " ef" is not a segment: it is heard again in window 1 */
  /* the language was detected on window 0 and given to the later ones;
   * their prompts hold <|prev|> and every token decoded before */
  EXPECT_INT_EQ(s.n_prompt_of[0], 0);
  ASSERT_INT_EQ(s.n_prompt_of[1], 1 + s.n_play[0]);
  EXPECT_INT_EQ(s.prompt_of[1][0], s.v.prev);
  EXPECT_MEM_EQ(s.prompt_of[1] + 1, w0, sizeof w0);
  ASSERT_INT_EQ(s.n_prompt_of[2], 1 + s.n_play[0] + s.n_play[1]);
  EXPECT_MEM_EQ(s.prompt_of[2] + 1 + s.n_play[0], w1, sizeof w1);
  whisper_transcript_free(&t);

  /* without conditioning no window gets a prompt */
  memset(s.n_prompt_of, 0, sizeof s.n_prompt_of);
  s.n_win = 0;
  c.condition_on_previous = false;
  ASSERT_INT_EQ(whisper_transcribe(&c, 7000, &t), 0);
  ASSERT_INT_EQ(s.n_win, 3);
  for (int i = 0; i < 3; i++) EXPECT_INT_EQ(s.n_prompt_of[i], 0);
  EXPECT_INT_EQ(t.n_segs, 5);
  whisper_transcript_free(&t);
}

TEST(whisper_transcribe_skips_silence) {
  wscript s;
  memset(&s, 0, sizeof s);
  ASSERT_INT_EQ(whisper_vocab_init(51864, byte_text, NULL, &s.v), 0);
  const int32_t tb = s.v.ts_begin;
  int32_t w1[] = {tb + 0, 'o', 'k', tb + 25};
  s.play[0] = NULL; /* silence: no-speech at SOT, flat logits after */
  s.play[1] = w1, s.n_play[1] = 4;
  whisper_transcribe_cfg c = cfg_of(&s, 0);
  whisper_transcript t;
  ASSERT_INT_EQ(whisper_transcribe(&c, 4500, &t), 0);
  ASSERT_INT_EQ(s.n_win, 2);
  EXPECT_INT_EQ(s.seek[1], 3000);  /* the silent window is skipped whole */
  EXPECT_INT_EQ(s.size[1], 1500);
  ASSERT_INT_EQ(t.n_segs, 1);
  EXPECT_NEAR(t.segs[0].start, 30.0, 1e-9);
  EXPECT_NEAR(t.segs[0].end, 30.5, 1e-9);
  EXPECT_INT_EQ(s.n_prompt_of[1], 0); /* nothing from the silent window steers the next */
  whisper_transcript_free(&t);
}

TEST(whisper_transcribe_times_stay_inside_the_audio) {
  wscript s;
  memset(&s, 0, sizeof s);
  ASSERT_INT_EQ(whisper_vocab_init(51864, byte_text, NULL, &s.v), 0);
  const int32_t tb = s.v.ts_begin;
  /* 5 s of audio, zero-padded to the window: the model ends its segments at 6 and 8 s */
  int32_t w0[] = {tb + 0, 'a', tb + 300, tb + 300, 'b', tb + 400};
  s.play[0] = w0, s.n_play[0] = 6;
  whisper_transcribe_cfg c = cfg_of(&s, 0);
  whisper_transcript t;
  ASSERT_INT_EQ(whisper_transcribe(&c, 500, &t), 0);
  ASSERT_INT_EQ(t.n_segs, 2);
  EXPECT_NEAR(t.segs[0].start, 0.0, 1e-9);
  EXPECT_NEAR(t.segs[0].end, 5.0, 1e-9);
  EXPECT_NEAR(t.segs[1].start, 5.0, 1e-9);
  EXPECT_NEAR(t.segs[1].end, 5.0, 1e-9);
  whisper_word *w = NULL;
  int nw = whisper_segment_words(&s.v, &t.segs[1], &w);
  ASSERT_INT_EQ(nw, 1);
  EXPECT_TRUE(w[0].start <= 5.0 && w[0].end <= 5.0);
  whisper_words_free(w, nw);
  whisper_transcript_free(&t);
}

TEST(whisper_transcribe_bad_arguments) {
  wscript s;
  memset(&s, 0, sizeof s);
  ASSERT_INT_EQ(whisper_vocab_init(51864, byte_text, NULL, &s.v), 0);
  whisper_transcribe_cfg c = cfg_of(&s, 0);
  whisper_transcript t;
  c.window_frames = 1;
  EXPECT_INT_EQ(whisper_transcribe(&c, 100, &t), ERR_INVALID);
  c = cfg_of(&s, 0);
  EXPECT_INT_EQ(whisper_transcribe(&c, -1, &t), ERR_INVALID);
  /* no audio: no window, no segment */
  EXPECT_INT_EQ(whisper_transcribe(&c, 0, &t), 0);
  EXPECT_INT_EQ(t.n_segs, 0);
  EXPECT_INT_EQ(s.n_win, 0);
  whisper_transcript_free(&t);
}
