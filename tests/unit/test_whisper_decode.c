/*
 * test_whisper_decode.c - Whisper's decoding rules (speech/whisper_decode.h)
 * against a scripted logits source: each test scripts what the "model"
 * prefers at each step, so that every rule (special ids, prompt layout,
 * suppression, blank, the timestamp rules, fallback on compression ratio
 * and log-probability, silence, language detection, the length limits)
 * changes the outcome when it is broken. Expected ids are whisper.cpp's
 * token layout, written out by hand.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/testgen_whisper.h"
#include "speech/whisper_decode.h"
#include "speech/whisper_file.h"
#include "speech/whisper_model.h"
#include "test.h"

#define V_ML 51865

/* Token texts of the scripted vocabulary: the 256 single bytes, then none. */
static const char *byte_text(void *ctx, int32_t tok, size_t *len) {
  static char bytes[256];
  (void)ctx;
  if (tok < 0 || tok >= 256) return *len = 0, NULL;
  for (int i = 0; i < 256; i++) bytes[i] = (char)i;
  *len = 1;
  return bytes + tok;
}

/* Token texts of a whisper file. */
static const char *file_text(void *ctx, int32_t tok, size_t *len) {
  return whisper_file_token(ctx, (size_t)tok, len);
}

typedef struct script script;
/* Fills logits [n_vocab] for the token after seq[n] (the whole sequence
 * fed so far, prompt included); k = tokens sampled so far. */
typedef void (*rule_fn)(script *s, const int32_t *seq, int n, int k, float *logits);

struct script {
  whisper_vocab v;
  rule_fn rule;
  int np;             /* prompt length the window uses (for k) */
  int32_t seq[1024];  /* what was fed, by position */
  int n_calls, n_resets, max_pos;
  int n_text_ctx;
  const int32_t *text; /* tokens a rule plays back */
  int n_text;
  float peak;
};

static int script_fn(void *ctx, const int32_t *toks, int n, int n_past, float *logits, bool all) {
  script *s = ctx;
  if (all) return err_set(ERR_INVALID, "script: all rows not scripted");
  if (n_past + n > s->n_text_ctx) return err_set(ERR_CONTEXT, "script: %d + %d past the context", n_past, n);
  if (n_past == 0) s->n_resets++;
  s->n_calls++;
  memcpy(s->seq + n_past, toks, (size_t)n * sizeof *toks);
  if (n_past + n > s->max_pos) s->max_pos = n_past + n;
  for (int32_t i = 0; i < s->v.n_vocab; i++) logits[i] = 0.0f;
  s->rule(s, s->seq, n_past + n, n_past + n - s->np, logits);
  return 0;
}

static void script_init(script *s, rule_fn rule) {
  memset(s, 0, sizeof *s);
  ASSERT_INT_EQ(whisper_vocab_init(V_ML, byte_text, NULL, &s->v), 0);
  s->rule = rule;
  s->n_text_ctx = 448;
  s->peak = 30.0f;
}

/* The prompt length o gives (language index lang). */
static int prompt_len(const script *s, const whisper_decode_opts *o, int lang) {
  int32_t p[512];
  int n = 0, at = 0;
  if (whisper_build_prompt(&s->v, o, lang, p, 512, &n, &at)) return -1;
  return n;
}

TEST(whisper_decode_vocab_ids) {
  whisper_vocab v;
  ASSERT_INT_EQ(whisper_vocab_init(51865, NULL, NULL, &v), 0); /* tiny .. large-v2 */
  EXPECT_TRUE(v.multilingual);
  EXPECT_INT_EQ(v.n_langs, 99);
  EXPECT_INT_EQ(v.eot, 50257);
  EXPECT_INT_EQ(v.sot, 50258);
  EXPECT_INT_EQ(v.translate, 50358);
  EXPECT_INT_EQ(v.transcribe, 50359);
  EXPECT_INT_EQ(v.solm, 50360);
  EXPECT_INT_EQ(v.prev, 50361);
  EXPECT_INT_EQ(v.nosp, 50362);
  EXPECT_INT_EQ(v.notimestamps, 50363);
  EXPECT_INT_EQ(v.ts_begin, 50364);
  EXPECT_INT_EQ(v.blank, -1);
  ASSERT_INT_EQ(whisper_vocab_init(51864, NULL, NULL, &v), 0); /* *.en */
  EXPECT_FALSE(v.multilingual);
  EXPECT_INT_EQ(v.eot, 50256);
  EXPECT_INT_EQ(v.sot, 50257);
  EXPECT_INT_EQ(v.translate, 50357);
  EXPECT_INT_EQ(v.notimestamps, 50362);
  EXPECT_INT_EQ(v.ts_begin, 50363);
  ASSERT_INT_EQ(whisper_vocab_init(51866, NULL, NULL, &v), 0); /* large-v3: one more language */
  EXPECT_INT_EQ(v.n_langs, 100);
  EXPECT_INT_EQ(v.sot, 50258);
  EXPECT_INT_EQ(v.translate, 50359);
  EXPECT_INT_EQ(v.nosp, 50363);
  EXPECT_INT_EQ(v.ts_begin, 50365);
  EXPECT_INT_EQ(v.n_vocab - v.ts_begin, 1501); /* 0.00 .. 30.00 s */
  EXPECT_INT_EQ(whisper_vocab_init(300, NULL, NULL, &v), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "300 tokens");
  ASSERT_INT_EQ(whisper_vocab_init(51865, byte_text, NULL, &v), 0);
  EXPECT_INT_EQ(v.blank, 32);
  EXPECT_INT_EQ(whisper_lang_index("en"), 0);
  EXPECT_INT_EQ(whisper_lang_index("de"), 2);
  EXPECT_INT_EQ(whisper_lang_index("ja"), 7);
  EXPECT_INT_EQ(whisper_lang_index("yue"), 99);
  EXPECT_INT_EQ(whisper_lang_index("xx"), -1);
  EXPECT_STR_EQ(whisper_lang_code(3), "es");
  EXPECT_TRUE(whisper_lang_code(100) == NULL);
}

TEST(whisper_decode_prompt_layout) {
  whisper_vocab v, en;
  ASSERT_INT_EQ(whisper_vocab_init(V_ML, NULL, NULL, &v), 0);
  ASSERT_INT_EQ(whisper_vocab_init(51864, NULL, NULL, &en), 0);
  whisper_decode_opts o = whisper_decode_defaults();
  int32_t p[512];
  int n = 0, at = -1;
  ASSERT_INT_EQ(whisper_build_prompt(&v, &o, 0, p, 512, &n, &at), 0);
  ASSERT_INT_EQ(n, 3);
  EXPECT_INT_EQ(at, 0);
  EXPECT_INT_EQ(p[0], 50258);
  EXPECT_INT_EQ(p[1], 50259); /* en */
  EXPECT_INT_EQ(p[2], 50359); /* transcribe */
  o.task = WHISPER_TASK_TRANSLATE;
  o.timestamps = false;
  ASSERT_INT_EQ(whisper_build_prompt(&v, &o, 2, p, 512, &n, &at), 0);
  ASSERT_INT_EQ(n, 4);
  EXPECT_INT_EQ(p[1], 50261); /* de */
  EXPECT_INT_EQ(p[2], 50358); /* translate */
  EXPECT_INT_EQ(p[3], 50363); /* notimestamps */
  /* previous text: <|startofprev|> and its last 223 tokens before SOT */
  int32_t prev[300];
  for (int i = 0; i < 300; i++) prev[i] = 1000 + i;
  o.prompt = prev;
  o.n_prompt = 300;
  ASSERT_INT_EQ(whisper_build_prompt(&v, &o, 0, p, 512, &n, &at), 0);
  EXPECT_INT_EQ(n, 1 + 223 + 4);
  EXPECT_INT_EQ(at, 224);
  EXPECT_INT_EQ(p[0], 50361);
  EXPECT_INT_EQ(p[1], 1000 + 300 - 223);
  EXPECT_INT_EQ(p[223], 1299);
  EXPECT_INT_EQ(p[224], 50258);
  EXPECT_INT_EQ(whisper_build_prompt(&v, &o, 0, p, 100, &n, &at), ERR_TOO_LARGE);
  /* English-only: SOT alone (and notimestamps) */
  o.prompt = NULL;
  o.n_prompt = 0;
  ASSERT_INT_EQ(whisper_build_prompt(&en, &o, 0, p, 512, &n, &at), 0);
  ASSERT_INT_EQ(n, 2);
  EXPECT_INT_EQ(p[0], 50257);
  EXPECT_INT_EQ(p[1], 50362);
}

static bool masked(const float *x, int32_t t) { return isinf(x[t]) && x[t] < 0; }

TEST(whisper_decode_filters) {
  whisper_vocab v;
  ASSERT_INT_EQ(whisper_vocab_init(V_ML, byte_text, NULL, &v), 0);
  whisper_decode_opts o = whisper_decode_defaults();
  float *x = malloc(V_ML * sizeof *x);
  const int32_t tb = v.ts_begin;
#define FILL() for (int i_ = 0; i_ < V_ML; i_++) x[i_] = 0.0f
  /* no timestamps: every special and every timestamp masked, EOT kept
   * after the first token, blank and EOT masked at the first */
  o.timestamps = false;
  int32_t s1[1] = {65};
  FILL();
  whisper_filter_logits(&v, &o, s1, 1, x);
  EXPECT_FALSE(masked(x, v.eot));
  for (int32_t t = v.sot; t < tb; t++) EXPECT_TRUE(masked(x, t));
  EXPECT_TRUE(masked(x, tb));
  EXPECT_TRUE(masked(x, V_ML - 1));
  EXPECT_FALSE(masked(x, 32));
  FILL();
  whisper_filter_logits(&v, &o, NULL, 0, x);
  EXPECT_TRUE(masked(x, 32));
  EXPECT_TRUE(masked(x, v.eot));
  EXPECT_FALSE(masked(x, 65));
  o.suppress_blank = false;
  FILL();
  whisper_filter_logits(&v, &o, NULL, 0, x);
  EXPECT_FALSE(masked(x, 32));
  /* the caller's list */
  int32_t sup[2] = {65, 66};
  o.suppress = sup;
  o.n_suppress = 2;
  FILL();
  whisper_filter_logits(&v, &o, s1, 1, x);
  EXPECT_TRUE(masked(x, 65));
  EXPECT_TRUE(masked(x, 66));
  EXPECT_FALSE(masked(x, 67));
  o.n_suppress = 0;
  /* timestamps: the first token is a timestamp of at most 1.00 s */
  o.timestamps = true;
  FILL();
  whisper_filter_logits(&v, &o, NULL, 0, x);
  EXPECT_TRUE(masked(x, 65));
  EXPECT_TRUE(masked(x, v.eot));
  EXPECT_FALSE(masked(x, tb));
  EXPECT_FALSE(masked(x, tb + 50));
  EXPECT_TRUE(masked(x, tb + 51));
  o.max_initial_ts = -1;
  FILL();
  whisper_filter_logits(&v, &o, NULL, 0, x);
  EXPECT_FALSE(masked(x, tb + 700));
  /* text after a begin timestamp: later timestamps only (not below the last + 1) */
  int32_t s2[2] = {tb + 10, 65};
  FILL();
  x[66] = 9.0f; /* above the timestamps' total (below) */
  whisper_filter_logits(&v, &o, s2, 2, x);
  EXPECT_TRUE(masked(x, tb + 10));
  EXPECT_FALSE(masked(x, tb + 11));
  EXPECT_FALSE(masked(x, 66));
  /* a segment just ended (text, then a timestamp): no text; EOT or a timestamp >= it */
  int32_t s3[3] = {tb + 10, 65, tb + 20};
  FILL();
  x[v.eot] = 9.0f;
  whisper_filter_logits(&v, &o, s3, 3, x);
  EXPECT_TRUE(masked(x, 65));
  EXPECT_TRUE(masked(x, 0));
  EXPECT_FALSE(masked(x, v.eot));
  EXPECT_TRUE(masked(x, tb + 19));
  EXPECT_FALSE(masked(x, tb + 20));
  /* a pair just closed (two timestamps): text next, no timestamp */
  int32_t s4[4] = {tb + 10, 65, tb + 20, tb + 20};
  FILL();
  x[66] = 3.0f;
  whisper_filter_logits(&v, &o, s4, 4, x);
  EXPECT_FALSE(masked(x, 66));
  EXPECT_TRUE(masked(x, tb + 20));
  EXPECT_TRUE(masked(x, tb + 1000));
  /* the timestamps' total probability beats the best text token: only timestamps */
  FILL();
  x[66] = 5.0f; /* 1501 timestamps at 0: log-sum 7.3 > 5 */
  whisper_filter_logits(&v, &o, s2, 2, x);
  EXPECT_TRUE(masked(x, 66));
  EXPECT_FALSE(masked(x, tb + 30));
  FILL();
  x[66] = 9.0f; /* the remaining timestamps (tb+11 ..) sum to about 7.3 < 9 */
  whisper_filter_logits(&v, &o, s2, 2, x);
  EXPECT_FALSE(masked(x, 66));
#undef FILL
  free(x);
}

/* Plays s->text back one token per step (timestamps and text alike), then
 * EOT; the played token gets s->peak, the rest 0. */
static void rule_play(script *s, const int32_t *seq, int n, int k, float *x) {
  (void)seq, (void)n;
  if (k >= 0) x[k < s->n_text ? s->text[k] : s->v.eot] = s->peak;
}

static whisper_decode_opts opts_en(void) {
  whisper_decode_opts o = whisper_decode_defaults();
  o.lang = 0;
  return o;
}

TEST(whisper_decode_greedy_with_timestamps) {
  script s;
  script_init(&s, rule_play);
  const int32_t tb = s.v.ts_begin;
  int32_t text[] = {tb + 0, 'T', 'h', 'e', ' ', 'c', 'a', 't', tb + 40, tb + 40, ' ', 'r', 'a', 'n', tb + 90};
  s.text = text;
  s.n_text = (int)(sizeof text / sizeof text[0]);
  whisper_decode_opts o = opts_en();
  s.np = prompt_len(&s, &o, 0);
  whisper_result r;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  ASSERT_INT_EQ(r.n_tokens, s.n_text);
  EXPECT_MEM_EQ(r.tokens, text, sizeof text);
  EXPECT_TRUE(r.ended);
  EXPECT_INT_EQ(r.n_attempts, 1);
  EXPECT_NEAR(r.temperature, 0.0, 0);
  EXPECT_TRUE(r.avg_logprob < 0 && r.avg_logprob > -0.01);
  EXPECT_TRUE(r.compression_ratio > 0 && r.compression_ratio < 2.4);
  EXPECT_INT_EQ(r.lang, 0);
  EXPECT_INT_EQ(s.seq[0], s.v.sot);
  EXPECT_INT_EQ(s.seq[1], s.v.sot + 1);
  EXPECT_INT_EQ(s.seq[2], s.v.transcribe);
  whisper_result_free(&r);
  /* a script that breaks the rules is held to them: text first, a
   * decreasing timestamp, text straight after a segment end */
  int32_t bad[] = {'x', tb + 60, 'a', tb + 5, 'b', tb + 70, 'c'};
  s.text = bad;
  s.n_text = 7;
  s.n_resets = 0;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  ASSERT_TRUE(r.n_tokens >= 1);
  EXPECT_TRUE(r.tokens[0] >= tb && r.tokens[0] <= tb + 50); /* a timestamp within 1 s, not 'x' */
  int32_t last_ts = -1;
  for (int i = 0; i < r.n_tokens; i++) {
    if (r.tokens[i] >= tb) {
      EXPECT_TRUE(r.tokens[i] >= last_ts);
      last_ts = r.tokens[i];
    }
    if (i >= 2 && r.tokens[i - 1] >= tb && r.tokens[i - 2] < tb) EXPECT_TRUE(r.tokens[i] >= tb); /* no text after an end */
  }
  whisper_result_free(&r);
}

/* The log-probabilities by hand: with timestamps off the candidates are
 * the 50257 text tokens and EOT; the played token has logit 3, the others
 * 0, so each step scores 3 - ln(e^3 + 50257), and the average divides the
 * sum over 'a', 'b' and EOT (3 lp) by 2 + 1. */
TEST(whisper_decode_logprobs) {
  script s;
  script_init(&s, rule_play);
  int32_t text[] = {'a', 'b'};
  s.text = text;
  s.n_text = 2;
  s.peak = 3.0f;
  whisper_decode_opts o = opts_en();
  o.timestamps = false;
  o.suppress_blank = false;
  o.logprob_min = 0;
  s.np = prompt_len(&s, &o, 0);
  whisper_result r;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  ASSERT_INT_EQ(r.n_tokens, 2);
  double lp = 3.0 - log(exp(3.0) + 50257.0);
  EXPECT_NEAR(r.logprobs[0], lp, 1e-5);
  EXPECT_NEAR(r.logprobs[1], lp, 1e-5);
  EXPECT_NEAR(r.avg_logprob, 3 * lp / 3, 1e-6);
  EXPECT_NEAR(r.no_speech_prob, 1.0 / V_ML, 1e-9); /* flat logits at SOT */
  whisper_result_free(&r);
}

TEST(whisper_decode_blank_and_suppress) {
  script s;
  script_init(&s, rule_play);
  int32_t text[] = {' ', 'o', 'k'};
  s.text = text;
  s.n_text = 3;
  whisper_decode_opts o = opts_en();
  o.timestamps = false;
  s.np = prompt_len(&s, &o, 0);
  whisper_result r;
  /* blank first is refused: with every other logit equal, token 0 wins */
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  ASSERT_TRUE(r.n_tokens >= 1);
  EXPECT_INT_NE(r.tokens[0], ' ');
  whisper_result_free(&r);
  o.suppress_blank = false;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  ASSERT_INT_EQ(r.n_tokens, 3);
  EXPECT_INT_EQ(r.tokens[0], ' ');
  whisper_result_free(&r);
  /* a suppressed token is never chosen */
  int32_t sup[1] = {'o'};
  o.suppress = sup;
  o.n_suppress = 1;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  for (int i = 0; i < r.n_tokens; i++) EXPECT_INT_NE(r.tokens[i], 'o');
  whisper_result_free(&r);
  /* the nonspeech list of a byte vocabulary holds the symbols */
  int32_t ns[128];
  int n_ns = whisper_nonspeech_tokens(&s.v, ns, 128);
  bool has_paren = false, has_a = false;
  for (int i = 0; i < n_ns; i++) has_paren |= ns[i] == '(', has_a |= ns[i] == 'a';
  EXPECT_TRUE(has_paren);
  EXPECT_FALSE(has_a);
}

/* Attempt by attempt (counted by prompt feeds): attempt 0 repeats one
 * token (compressible), attempt 1 plays varied text. */
static void rule_repeat_then_vary(script *s, const int32_t *seq, int n, int k, float *x) {
  (void)seq, (void)n;
  if (k < 0) return;
  static const char varied[] = "the quick brown fox jumps over";
  if (s->n_resets <= 1 || s->n_text == 0) x[k < 120 ? 'a' : s->v.eot] = s->peak;
  else x[k < (int)sizeof varied - 1 ? (unsigned char)varied[k] : s->v.eot] = s->peak;
}

TEST(whisper_decode_fallback_on_compression) {
  script s;
  script_init(&s, rule_repeat_then_vary);
  whisper_decode_opts o = opts_en();
  o.timestamps = false;
  s.np = prompt_len(&s, &o, 0);
  whisper_result r;
  /* repeats on every attempt: all six temperatures tried, the last kept */
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  EXPECT_INT_EQ(r.n_attempts, 6);
  EXPECT_NEAR(r.temperature, 1.0, 1e-6);
  EXPECT_TRUE(r.compression_ratio > 2.4);
  EXPECT_INT_EQ(s.n_resets, 6);
  whisper_result_free(&r);
  /* attempt 2 (temperature 0.2) varies: accepted */
  s.n_text = 1;
  s.n_resets = 0;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  EXPECT_INT_EQ(r.n_attempts, 2);
  EXPECT_NEAR(r.temperature, 0.2, 1e-6);
  EXPECT_INT_EQ(r.n_tokens, 30);
  EXPECT_TRUE(r.compression_ratio < 2.4);
  whisper_result_free(&r);
  /* the threshold off: the first attempt stands */
  s.n_text = 0;
  s.n_resets = 0;
  o.compression_ratio_max = 0;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  EXPECT_INT_EQ(r.n_attempts, 1);
  EXPECT_INT_EQ(r.n_tokens, 120);
  whisper_result_free(&r);
}

/* Flat logits (every token as likely: avg logprob about -ln 50257);
 * nosp prob set at the SOT position by s->peak. */
static void rule_flat(script *s, const int32_t *seq, int n, int k, float *x) {
  if (n >= 1 && seq[n - 1] == s->v.sot && s->n_text) x[s->v.nosp] = 20.0f;
  if (k >= 0) x[k < 5 ? 'a' + k : s->v.eot] = 0.5f; /* a slight preference, far below certainty */
}

TEST(whisper_decode_fallback_on_logprob_and_silence) {
  script s;
  script_init(&s, rule_flat);
  whisper_decode_opts o = opts_en();
  o.timestamps = false;
  o.max_tokens = 32; /* the sampled attempts wander without an end */
  s.np = prompt_len(&s, &o, 0);
  whisper_result r;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  EXPECT_TRUE(r.avg_logprob < -5.0);
  EXPECT_INT_EQ(r.n_attempts, 6); /* too unlikely at every temperature */
  EXPECT_FALSE(r.no_speech);
  EXPECT_TRUE(r.no_speech_prob < 0.01);
  whisper_result_free(&r);
  /* the same with <|nospeech|> likely at SOT: silence, no fallback */
  s.n_text = 1;
  s.n_resets = 0;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  EXPECT_TRUE(r.no_speech_prob > 0.6);
  EXPECT_TRUE(r.no_speech);
  EXPECT_INT_EQ(r.n_attempts, 1);
  whisper_result_free(&r);
  /* the logprob threshold off: accepted at once */
  s.n_text = 0;
  o.logprob_min = 0;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  EXPECT_INT_EQ(r.n_attempts, 1);
  EXPECT_INT_EQ(r.n_tokens, 5);
  EXPECT_INT_EQ(r.tokens[4], 'e');
  whisper_result_free(&r);
}

/* After a lone SOT: a text token above every language, then de and fr
 * equal above the rest. In the window: play "ja". */
static void rule_lang(script *s, const int32_t *seq, int n, int k, float *x) {
  if (n == 1 && seq[0] == s->v.sot) {
    x[1000] = 50.0f;
    x[s->v.sot + 1 + 2] = 5.0f; /* de */
    x[s->v.sot + 1 + 6] = 5.0f; /* fr */
    x[s->v.sot + 1 + 0] = 4.0f; /* en */
    return;
  }
  if (k >= 0) x[k < 2 ? "ja"[k] : s->v.eot] = s->peak;
}

TEST(whisper_decode_language_detection) {
  script s;
  script_init(&s, rule_lang);
  float probs[WHISPER_MAX_LANGS];
  int lang = -1;
  float p = 0;
  ASSERT_INT_EQ(whisper_detect_language(&s.v, script_fn, &s, probs, &lang, &p), 0);
  EXPECT_INT_EQ(lang, 2); /* de: ties go to the first in token order */
  double z = 2 * exp(5.0) + exp(4.0) + 96;
  EXPECT_NEAR(p, exp(5.0) / z, 1e-5);
  EXPECT_NEAR(probs[6], exp(5.0) / z, 1e-5);
  EXPECT_NEAR(probs[0], exp(4.0) / z, 1e-5);
  EXPECT_NEAR(probs[50], 1.0 / z, 1e-6);
  /* a window without a language detects it first and prompts with it */
  whisper_decode_opts o = whisper_decode_defaults();
  o.timestamps = false;
  s.np = prompt_len(&s, &o, 2);
  whisper_result r;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  EXPECT_INT_EQ(r.lang, 2);
  EXPECT_NEAR(r.lang_prob, exp(5.0) / z, 1e-5);
  EXPECT_INT_EQ(s.seq[1], s.v.sot + 1 + 2);
  ASSERT_INT_EQ(r.n_tokens, 2);
  EXPECT_INT_EQ(r.tokens[0], 'j');
  whisper_result_free(&r);
  /* English-only models do not detect */
  whisper_vocab en;
  ASSERT_INT_EQ(whisper_vocab_init(51864, NULL, NULL, &en), 0);
  EXPECT_INT_EQ(whisper_detect_language(&en, script_fn, &s, NULL, &lang, NULL), ERR_UNSUPPORTED);
  /* bad options */
  o.lang = 99;
  EXPECT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), ERR_INVALID);
  o.lang = 0;
  o.n_temps = 0;
  EXPECT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), ERR_INVALID);
}

/* Never ends: text forever. */
static void rule_endless(script *s, const int32_t *seq, int n, int k, float *x) {
  (void)s, (void)seq, (void)n;
  if (k >= 0) x['a' + k % 26] = 30.0f;
}

TEST(whisper_decode_length_limits) {
  script s;
  script_init(&s, rule_endless);
  whisper_decode_opts o = opts_en();
  o.timestamps = false;
  o.compression_ratio_max = 0;
  s.np = prompt_len(&s, &o, 0);
  whisper_result r;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  EXPECT_INT_EQ(r.n_tokens, 224);
  EXPECT_FALSE(r.ended);
  whisper_result_free(&r);
  /* a long previous prompt: 1 + 223 + 4 tokens leave 220 of the 448 */
  int32_t prev[400];
  for (int i = 0; i < 400; i++) prev[i] = 'a' + i % 26;
  o.prompt = prev;
  o.n_prompt = 400;
  s.np = prompt_len(&s, &o, 0);
  EXPECT_INT_EQ(s.np, 228);
  s.max_pos = 0;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &r), 0);
  EXPECT_INT_EQ(r.n_tokens, 448 - 228);
  EXPECT_INT_LE(s.max_pos, 448);
  EXPECT_INT_EQ(s.seq[0], s.v.prev);
  whisper_result_free(&r);
}

/* The rules over the real forward pass: a random-weight model with a
 * multilingual vocabulary decodes one window (gibberish, but by the rules:
 * a language detected, the first token a timestamp within 1 s, every
 * token a text token or a timestamp, timestamps never decreasing). */
TEST(whisper_decode_on_the_model) {
  whisper_testgen g = whisper_testgen_small();
  g.n_vocab = 51865;
  g.n_text_ctx = 64;
  char path[512];
  snprintf(path, sizeof path, "%s/w-dec.bin", test_tmpdir());
  ASSERT_INT_EQ(whisper_testgen_write(&g, path), 0);
  whisper_file *f = NULL;
  whisper_model *m = NULL;
  whisper_state *st = NULL;
  ASSERT_INT_EQ(whisper_file_open(path, &f), 0);
  ASSERT_INT_EQ(whisper_model_new(f, &m), 0);
  ASSERT_INT_EQ(whisper_state_new(m, NULL, &st), 0);
  float mel[80 * 64];
  for (int i = 0; i < 80 * 64; i++) mel[i] = (float)sin(i * 0.37) * 0.8f;
  ASSERT_INT_EQ(whisper_encode(st, mel, 64), 0);
  whisper_vocab v;
  ASSERT_INT_EQ(whisper_vocab_init(g.n_vocab, file_text, f, &v), 0);
  EXPECT_INT_EQ(v.blank, 32);
  whisper_decode_opts o = whisper_decode_defaults();
  o.n_text_ctx = g.n_text_ctx;
  o.max_tokens = 20;
  whisper_result r;
  ASSERT_INT_EQ(whisper_decode_window(&v, whisper_state_logits, st, &o, &r), 0);
  EXPECT_TRUE(r.lang >= 0 && r.lang < v.n_langs);
  EXPECT_TRUE(r.lang_prob > 0 && r.lang_prob <= 1);
  EXPECT_TRUE(r.n_tokens >= 1 && r.n_tokens <= 20);
  EXPECT_TRUE(r.n_attempts >= 1 && r.n_attempts <= 6);
  if (r.n_tokens >= 1) EXPECT_TRUE(r.tokens[0] >= v.ts_begin && r.tokens[0] <= v.ts_begin + 50);
  int32_t last = -1;
  for (int i = 0; i < r.n_tokens; i++) {
    EXPECT_TRUE(r.tokens[i] < v.eot || r.tokens[i] >= v.ts_begin);
    if (r.tokens[i] >= v.ts_begin) {
      EXPECT_TRUE(r.tokens[i] >= last);
      last = r.tokens[i];
    }
    EXPECT_TRUE(r.logprobs[i] <= 0);
  }
  printf("    random model: lang %s (p %.3f), %d tokens, %d attempt(s), avg logprob %.2f\n",
         whisper_lang_code(r.lang), r.lang_prob, r.n_tokens, r.n_attempts, r.avg_logprob);
  whisper_result_free(&r);
  /* beam search on the model: its beams re-feed the one cache from where
   * they part, so the winner's recorded log-probabilities must be those a
   * fresh decode of the winner's tokens gives, step by step */
  o.beam_size = 5;
  o.temps[0] = 0;
  o.n_temps = 1;
  o.lang = 0;
  ASSERT_INT_EQ(whisper_decode_window(&v, whisper_state_logits, st, &o, &r), 0);
  ASSERT_TRUE(r.n_tokens >= 1);
  int32_t seq[128];
  int np = 0, sot_at = 0;
  ASSERT_INT_EQ(whisper_build_prompt(&v, &o, 0, seq, 128, &np, &sot_at), 0);
  float *x = malloc((size_t)v.n_vocab * sizeof *x);
  ASSERT_TRUE(x != NULL);
  ASSERT_INT_EQ(whisper_state_logits(st, seq, np, 0, x, false), 0);
  double worst = 0, sum = 0;
  for (int i = 0; i <= r.n_tokens; i++) {
    whisper_filter_logits(&v, &o, r.tokens, i, x);
    double mx = -INFINITY, z = 0;
    for (int32_t t = 0; t < v.n_vocab; t++) mx = x[t] > mx ? x[t] : mx;
    for (int32_t t = 0; t < v.n_vocab; t++) z += exp((double)x[t] - mx);
    int32_t tok = i < r.n_tokens ? r.tokens[i] : v.eot;
    double lp = (double)x[tok] - mx - log(z);
    sum += lp;
    if (i < r.n_tokens) {
      worst = fmax(worst, fabs(lp - r.logprobs[i]));
      ASSERT_INT_EQ(whisper_state_logits(st, &tok, 1, np + i, x, false), 0);
    }
  }
  printf("    beam 5: %d tokens, avg logprob %.2f, worst step difference %.2g\n", r.n_tokens, r.avg_logprob, worst);
  EXPECT_TRUE(worst < 1e-4);
  if (r.ended) EXPECT_NEAR(r.avg_logprob, sum / (r.n_tokens + 1), 1e-4);
  free(x);
  whisper_result_free(&r);
  whisper_state_free(st);
  whisper_model_free(m);
  whisper_file_close(f);
}

/* A garden path: 'a' leads 'b' by 0.1 at the first step, but after 'a'
 * nothing is likely, while after 'b' a 'c' is certain; then EOT. */
static void rule_garden(script *s, const int32_t *seq, int n, int k, float *x) {
  if (k == 0) {
    x['a'] = 2.0f, x['b'] = 1.9f;
  } else if (k == 1) {
    if (seq[n - 1] == 'b') x['c'] = s->peak;
  } else {
    x[s->v.eot] = s->peak;
  }
}

TEST(whisper_decode_beam_search) {
  script s;
  script_init(&s, rule_garden);
  whisper_decode_opts o = opts_en();
  o.timestamps = false;
  o.n_temps = 1;
  s.np = prompt_len(&s, &o, 0);
  whisper_result g, b;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &g), 0);
  ASSERT_INT_EQ(g.n_tokens, 2);
  EXPECT_INT_EQ(g.tokens[0], 'a'); /* greedy takes the lead and is stuck with a flat step */
  o.beam_size = 5;
  ASSERT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &b), 0);
  ASSERT_INT_EQ(b.n_tokens, 2);
  EXPECT_INT_EQ(b.tokens[0], 'b');
  EXPECT_INT_EQ(b.tokens[1], 'c');
  EXPECT_TRUE(b.ended);
  EXPECT_TRUE(b.avg_logprob > g.avg_logprob);
  /* the log-probabilities are those of the beam's own steps: 'b' at the
   * first (1.9 against 2.0 and 50256 zeros), 'c' certain, EOT certain */
  double z = exp(2.0) + exp(1.9) + (s.v.eot + 1 - 2);
  EXPECT_NEAR(b.logprobs[0], 1.9 - log(z), 1e-4);
  EXPECT_NEAR(b.logprobs[1], 0.0, 1e-4);
  EXPECT_NEAR(b.avg_logprob, (1.9 - log(z)) / 3, 1e-4);
  /* the source saw each beam's tokens at their own positions: the last
   * sequence fed ends with the winner's */
  whisper_result_free(&g);
  whisper_result_free(&b);
  /* above the maximum, refused */
  o.beam_size = 9;
  EXPECT_INT_EQ(whisper_decode_window(&s.v, script_fn, &s, &o, &b), ERR_INVALID);
  whisper_result_free(&b);
}
