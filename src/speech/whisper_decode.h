/*
 * whisper_decode.h - Whisper's decoding rules over any source of logits:
 * the special tokens of a vocabulary, the prompt (previous text, SOT,
 * language, task, no-timestamps), language detection, the logit filters
 * (suppressed tokens, blank suppression, the timestamp rules) and greedy
 * decoding of one 30 s window with temperature fallback on the
 * compression-ratio and average-log-probability thresholds.
 *
 * The rules are those of OpenAI's whisper/decoding.py and transcribe.py;
 * token ids follow whisper.cpp's layout by vocabulary size. Differences:
 * one sample per temperature above 0 (Whisper's best_of 5 is a later
 * option), beam search re-feeds each beam's tokens since it parted from
 * what the logits source last saw (the source keeps one sequence), all special tokens but EOT are suppressed (Whisper suppresses
 * the task, SOT, previous-text and no-speech tokens, not the language
 * tokens), and without timestamps the timestamp tokens are suppressed too
 * (as whisper.cpp does).
 *
 * The logits come from a function (whisper_logits_fn) with
 * whisper_decode()'s contract: the model (whisper_state_logits) or, in the
 * tests, a script. No allocation survives a call but the result's arrays.
 */
#ifndef PARLEY_SPEECH_WHISPER_DECODE_H
#define PARLEY_SPEECH_WHISPER_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WHISPER_MAX_LANGS 100
#define WHISPER_MAX_TEMPS 8

/* Bytes of token tok (not NUL-terminated), NULL when it has none. */
typedef const char *(*whisper_token_text_fn)(void *ctx, int32_t tok, size_t *len);

typedef struct whisper_vocab {
  int32_t n_vocab;
  bool multilingual;       /* 51865+ tokens; English-only models have 51864 */
  int32_t n_langs;         /* language tokens sot+1 .. sot+n_langs (99, or 100 from large-v3) */
  int32_t eot, sot, translate, transcribe, solm, prev, nosp, notimestamps;
  int32_t ts_begin;        /* <|0.00|>; ts_begin + i is i * 0.02 s, up to 30 s */
  int32_t blank;           /* the token of " ", or -1 */
  whisper_token_text_fn text;
  void *text_ctx;
} whisper_vocab;

/* The ids for a vocabulary of n_vocab tokens; text (may be NULL) names
 * token bytes, for the blank token and compression ratios. ERR_UNSUPPORTED
 * when n_vocab is not a Whisper vocabulary (51864..51866). */
int whisper_vocab_init(int32_t n_vocab, whisper_token_text_fn text, void *text_ctx, whisper_vocab *out);

/* Language index of a code ("en", "de", "yue"), -1 when unknown; the code
 * of an index, NULL out of range. */
int whisper_lang_index(const char *code);
const char *whisper_lang_code(int index);
/* The language's English name ("english", "german"), NULL out of range. */
const char *whisper_lang_name(int index);

/* Logits of toks[n] after the n_past tokens already given (entries from
 * n_past on are replaced): the last row [n_vocab], or [n][n_vocab] when
 * all. As whisper_decode(). */
typedef int (*whisper_logits_fn)(void *ctx, const int32_t *toks, int n, int n_past, float *logits, bool all);

enum whisper_task { WHISPER_TASK_TRANSCRIBE = 0, WHISPER_TASK_TRANSLATE = 1 };

typedef struct whisper_decode_opts {
  enum whisper_task task;
  int lang;                       /* language index, -1: detect (multilingual models) */
  bool timestamps;                /* false: <|notimestamps|> in the prompt */
  bool suppress_blank;            /* no " " or EOT as the first token */
  const int32_t *suppress;        /* more tokens never to emit (e.g. whisper_nonspeech_tokens) */
  int n_suppress;
  const int32_t *prompt;          /* previous text tokens, or NULL */
  int n_prompt;
  float temps[WHISPER_MAX_TEMPS]; /* tried in order until one passes */
  int n_temps;
  float compression_ratio_max;    /* fallback above it (2.4); <= 0: off */
  float logprob_min;              /* fallback below it (-1.0); >= 0: off */
  float no_speech_min;            /* silence above it (0.6) when the logprob is also low */
  float max_initial_ts;           /* the first timestamp at most this (1.0 s); < 0: off */
  int max_tokens;                 /* sampled tokens per window (n_text_ctx / 2 = 224) */
  int n_text_ctx;                 /* the model's (448) */
  uint64_t seed;                  /* of the sampler above temperature 0 */
  int beam_size;                  /* > 1: beam search at temperature 0 (Whisper's option: 5); else greedy */
} whisper_decode_opts;

/* Whisper's defaults: transcribe, detect, timestamps, blank suppressed,
 * temperatures 0, 0.2, .. 1.0, thresholds 2.4 / -1.0 / 0.6, 1 s, 224 of
 * a 448 context. */
whisper_decode_opts whisper_decode_defaults(void);

typedef struct whisper_result {
  int32_t *tokens;        /* the sampled tokens, EOT not included (malloc'd) */
  float *logprobs;        /* log-probability of each, as sampled */
  int32_t *ts_tok;        /* per token: the likeliest timestamp token at its step (its time anchor) */
  float *ts_prob;         /* per token: that timestamp's probability (0 when timestamps were masked) */
  int n_tokens;
  bool ended;             /* an EOT closed the window (else max_tokens) */
  int lang;               /* the language used (detected or given) */
  float lang_prob;        /* its probability when detected, else 1 */
  float temperature;      /* of the accepted attempt */
  int n_attempts;         /* temperatures tried */
  double avg_logprob;     /* sum of log-probabilities (EOT's too) / (n_tokens + 1) */
  double compression_ratio; /* text bytes / zlib-compressed bytes */
  double no_speech_prob;  /* P(<|nospeech|>) at the SOT position */
  bool no_speech;         /* no_speech_prob above the threshold and the logprob below: silence */
} whisper_result;

void whisper_result_free(whisper_result *r);

/* Language probabilities after [SOT] (probs [n_langs], may be NULL) and the
 * most likely index into *lang (*prob its probability, may be NULL). */
int whisper_detect_language(const whisper_vocab *v, whisper_logits_fn fn, void *ctx, float *probs, int *lang,
                            float *prob);

/* The prompt for options o and language lang into out (cap tokens;
 * ERR_TOO_LARGE if short), its length into *n and the position of SOT
 * into *sot_at. */
int whisper_build_prompt(const whisper_vocab *v, const whisper_decode_opts *o, int lang, int32_t *out, int cap,
                         int *n, int *sot_at);

/* The rules applied to logits [n_vocab] of the next token after the
 * tokens sampled[n] this window has produced (suppression, blank at the
 * start, the timestamp rules). */
void whisper_filter_logits(const whisper_vocab *v, const whisper_decode_opts *o, const int32_t *sampled, int n,
                           float *logits);

/* Decodes one window: detects the language if asked, then samples with
 * fallback. ERR_INVALID for bad options, what fn returns, ERR_NOMEM. */
int whisper_decode_window(const whisper_vocab *v, whisper_logits_fn fn, void *ctx, const whisper_decode_opts *o,
                          whisper_result *out);

/* whisper_logits_fn over a whisper_state (speech/whisper_model.h): the
 * model as the logits source of the rules above. */
int whisper_state_logits(void *state, const int32_t *toks, int n, int n_past, float *logits, bool all);

/* Whisper's non-speech symbol tokens (quotes, brackets, music signs, ...,
 * with and without a leading space) found in v's token texts, into out
 * (cap); returns the count. */
int whisper_nonspeech_tokens(const whisper_vocab *v, int32_t *out, int cap);

#endif
