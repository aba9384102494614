/*
 * whisper_transcribe.h - long audio through Whisper: 30 s windows with
 * seeking, segments from the timestamp tokens, the previous window's text
 * as the next one's prompt (OpenAI's whisper/transcribe.py), and the text
 * side of a transcript (token bytes to UTF-8, words with times from the
 * token timestamps, prompts tokenized against the file's vocabulary).
 *
 * The loop is written over two callbacks: one that encodes a window of
 * audio (the model: whisper_mel + whisper_encode; a test: a script) and
 * the logits source of whisper_decode.h, so seeking is tested on scripted
 * windows as the decoding rules are.
 *
 * Times: a window starts at frame `seek` (10 ms mel frames); a timestamp
 * token ts_begin + i in it is seek * 0.01 + i * 0.02 seconds.
 */
#ifndef PARLEY_SPEECH_WHISPER_TRANSCRIBE_H
#define PARLEY_SPEECH_WHISPER_TRANSCRIBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "speech/whisper_decode.h"

typedef struct whisper_segment {
  int64_t seek;            /* start of its window, in 10 ms frames */
  double start, end;       /* seconds from the start of the audio */
  int32_t *tokens;         /* text tokens [n_tokens], no timestamps (malloc'd) */
  float *logprobs;         /* [n_tokens] as sampled */
  double *tok_time;        /* [n_tokens] time anchor in seconds from the timestamp distribution, -1 = none */
  int n_tokens;
  float temperature;       /* of the window's accepted attempt */
  double avg_logprob, compression_ratio, no_speech_prob; /* the window's */
} whisper_segment;

typedef struct whisper_transcript {
  whisper_segment *segs;   /* in time order (malloc'd) */
  int n_segs;
  int lang;                /* language index used (detected on the first window, or given) */
  float lang_prob;         /* its probability when detected, else 1 */
  int n_windows;           /* windows decoded */
} whisper_transcript;

void whisper_transcript_free(whisper_transcript *t);

/* Prepares the window of n frames (1 <= n <= window_frames) that starts at
 * frame seek for decoding (the model encodes it, zero audio after n). */
typedef int (*whisper_window_fn)(void *ctx, int64_t seek, int64_t n);
/* Receives each segment as soon as its window is decoded; nonzero stops
 * the transcription with ERR_CANCELLED. */
typedef int (*whisper_segment_fn)(void *user, const whisper_segment *s);

typedef struct whisper_transcribe_cfg {
  const whisper_vocab *v;
  whisper_logits_fn logits;
  whisper_window_fn window;
  void *ctx;                  /* of logits and window */
  int64_t window_frames;      /* frames per window: 2 * n_audio_ctx (3000) */
  whisper_decode_opts opts;   /* lang -1 = detect on the first window; prompt = the initial prompt */
  bool condition_on_previous; /* the text so far as each window's prompt (Whisper's default) */
  float anchor_min;           /* a token's timestamp anchor counts above this probability (0.01) */
  whisper_segment_fn on_segment; /* may be NULL */
  void *user;
} whisper_transcribe_cfg;

/* Transcribes n_frames of audio window by window. ERR_INVALID for bad
 * arguments, what the callbacks return, ERR_NOMEM. */
int whisper_transcribe(const whisper_transcribe_cfg *c, int64_t n_frames, whisper_transcript *out);

/* ---- text (whisper_text.c) ---- */

/* The bytes of toks[n] (text tokens; others skipped) as UTF-8: NUL bytes
 * dropped, ill-formed sequences replaced by U+FFFD. malloc'd, NULL on OOM. */
char *whisper_tokens_text(const whisper_vocab *v, const int32_t *toks, int n);

typedef struct whisper_word {
  char *text;              /* as written: cased, with its punctuation, no leading space (malloc'd) */
  double start, end;       /* seconds */
  double prob;             /* exp of its tokens' mean log-probability */
  int first_token, n_tokens;
} whisper_word;

/* The words of segment s: a token whose bytes start with a space begins a
 * word, others continue it (so punctuation stays with its word). Times:
 * the segment's start and end and every token anchor that keeps them in
 * order are fixed points; between them time runs in proportion to the
 * characters (whisper.cpp's token-timestamp heuristic, without its energy
 * step). *out malloc'd (NULL when none); returns the count or an error. */
int whisper_segment_words(const whisper_vocab *v, const whisper_segment *s, whisper_word **out);
void whisper_words_free(whisper_word *w, int n);

/* A prompt tokenizer over the vocabulary's token bytes: greedy longest
 * match (whisper.cpp tokenizes its prompts the same way; the file has no
 * BPE merges). */
typedef struct whisper_tokenizer whisper_tokenizer;
int whisper_tokenizer_new(const whisper_vocab *v, whisper_tokenizer **out);
void whisper_tokenizer_free(whisper_tokenizer *t);
/* Tokens of text into out[cap]; *n the count. Bytes no token covers are
 * skipped. ERR_TOO_LARGE when cap is short. */
int whisper_tokenize(const whisper_tokenizer *t, const char *text, int32_t *out, int cap, int *n);

#endif
