/*
 * speech.h - text to speech and speech to text behind one interface each.
 *
 * A backend is a table of function pointers (tts_backend_ops,
 * stt_backend_ops) plus the context pointer its open() returns; the front
 * ends (tts, stt) own the backends and hold what every backend shares:
 * the voice list and the vendor voice table for TTS, the whole-buffer
 * helper for STT. Adding an engine is one new file with one ops table.
 *
 * TTS backends: flite (its CMU voices: slt, kal, kal16, awb, rms) and
 * espeak-ng (every language it ships, "espeak:<lang>[+variant]"). Vendor
 * names (OpenAI alloy...cedar, Deepgram aura-* / aura-2-*) map onto local
 * voices by the table in speech_voices.c, documented in docs/speech.md.
 * STT backends: pocketsphinx with Debian's en-us model, and Whisper files
 * (whisper.cpp's ggml format) on parley's kernels; both 16 kHz mono int16.
 * The table of them is stt_backends() (stt.c).
 *
 * Threads: every function may be called from any thread. Backends with
 * global state (flite, espeak-ng) serialize synthesis with a mutex, so one
 * synthesis runs at a time per backend; pocketsphinx decoders are pooled and
 * a stream holds one decoder from begin to free.
 *
 * Ownership: tts/stt handles belong to whoever opened them and must outlive
 * every stream and synthesis using them. Strings in results are malloc'd
 * and freed by stt_result_free(); tts_voice pointers stay valid until
 * tts_close().
 */
#ifndef PARLEY_SPEECH_SPEECH_H
#define PARLEY_SPEECH_SPEECH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audio/audio.h"

/* Longest text one synthesis accepts (bytes); OpenAI's limit is 4096 chars. */
#define TTS_TEXT_MAX (64 * 1024)
#define TTS_SPEED_MIN 0.25
#define TTS_SPEED_MAX 4.0

/* ======================= text to speech ======================= */

typedef struct tts_voice {
  const char *name;        /* local name, unique: "slt", "espeak:en-us" */
  const char *backend;     /* "flite", "espeak-ng" */
  const char *language;    /* "en-US", "fr", ... */
  const char *gender;      /* "female", "male" or "" */
  int sample_rate;         /* native output rate in Hz */
  const char *description;
} tts_voice;

/* A resolved voice request. */
typedef struct tts_choice {
  const tts_voice *voice;
  char variant[32];        /* espeak-ng variant ("f3", "m7") or "" */
  char requested[64];      /* the name the caller asked for (truncated) */
  bool vendor;             /* requested was a vendor name mapped by the table */
} tts_choice;

/* Receives each chunk of synthesized mono int16 PCM at rate Hz as soon as
 * the engine produces it; returns 0 to go on, nonzero to stop (then the
 * synthesis returns ERR_CANCELLED). */
typedef int (*tts_pcm_fn)(void *user, const int16_t *pcm, size_t n, int rate);

typedef struct tts_backend_ops {
  const char *name;
  int (*open)(void **ctx);   /* 0 or an error: the backend is then skipped */
  void (*close)(void *ctx);
  size_t (*n_voices)(void *ctx);
  const tts_voice *(*voice_at)(void *ctx, size_t i);
  /* speed is in [TTS_SPEED_MIN, TTS_SPEED_MAX]; 1 = the voice's own pace. */
  int (*synth)(void *ctx, const tts_choice *c, const char *text, double speed, tts_pcm_fn fn, void *user);
} tts_backend_ops;

extern const tts_backend_ops tts_backend_flite;
extern const tts_backend_ops tts_backend_espeak;

typedef struct tts tts;
/* Opens every backend; one that fails to start is logged and left out.
 * ERR_UNAVAILABLE when none starts. */
int tts_open(tts **out);
void tts_close(tts *t);
size_t tts_n_voices(const tts *t);
const tts_voice *tts_voice_at(const tts *t, size_t i);
/* The default voice's local name (flite slt when present). */
const char *tts_default_voice(const tts *t);
/* Local name, "flite:<name>", "espeak:<lang>[+variant]", or a vendor name;
 * NULL or "" = the default voice. ERR_NOT_FOUND with the name otherwise. */
int tts_voice_resolve(const tts *t, const char *name, tts_choice *out);
/* Streams the speech of text (UTF-8) to fn. */
int tts_synthesize(tts *t, const tts_choice *c, const char *text, double speed, tts_pcm_fn fn, void *user);
/* Bytes of text up to and including the first sentence that has a word in
 * it (tts_synthesize speaks one such sentence per backend call); strlen
 * when there is one sentence or none. */
size_t tts_first_sentence(const char *text);
/* Whole synthesis into one buffer: out gets mono int16 at the voice's rate. */
int tts_synthesize_pcm(tts *t, const char *voice, const char *text, double speed, audio_pcm *out);

/* The vendor voice table (speech_voices.c). */
typedef struct tts_vendor_voice {
  const char *vendor_name; /* "alloy", "aura-asteria-en" */
  const char *local;       /* "slt", "espeak:en-us+f3" */
  const char *note;        /* why this local voice */
} tts_vendor_voice;
size_t tts_vendor_n(void);
const tts_vendor_voice *tts_vendor_at(size_t i);
/* The local target of a vendor name (table first, then the aura rule:
 * aura-*-<lang> / aura-2-*-<lang> -> "espeak:<lang>", "en" -> the default);
 * NULL when the name is not a vendor voice. */
const char *tts_vendor_lookup(const char *name, char *scratch, size_t cap);

/* ======================= speech to text ======================= */

typedef struct stt_word {
  char *word;              /* lower case, no pronunciation marks or punctuation */
  double start, end;       /* seconds from the start of the audio */
  double confidence;       /* posterior probability in [0, 1] */
  char *punctuated;        /* as the model wrote it (casing, punctuation); NULL = the backend writes none */
} stt_word;

/* A stretch of the transcript as a backend that segments (Whisper) cut it:
 * its text as written and its words [first_word, first_word + n_words). */
typedef struct stt_segment {
  double start, end;       /* seconds */
  char *text;              /* cased and punctuated, no leading space */
  int32_t *tokens;         /* the model's token ids [n_tokens] */
  size_t n_tokens;
  size_t first_word, n_words;
  int64_t seek;            /* start of the window it was decoded in, 10 ms frames */
  double temperature, avg_logprob, compression_ratio, no_speech_prob;
} stt_segment;

typedef struct stt_result {
  char *text;              /* words joined by single spaces, or the segments' text; "" when silent */
  stt_word *words;
  size_t n_words;
  double confidence;       /* mean word confidence, 0 with no words */
  double audio_seconds;    /* audio fed */
  double decode_seconds;   /* wall time spent decoding */
  int parts;               /* whole-buffer decoding: decoders it ran on (2 = split) */
  stt_segment *segments;   /* NULL for backends that do not segment (pocketsphinx) */
  size_t n_segments;
  char language[16];       /* ISO 639-1 code of the language heard ("en"); "" = not said */
  double language_prob;    /* its probability when detected, 1 when given */
  bool punctuated;         /* text and words carry the model's own casing and punctuation */
} stt_result;
void stt_result_free(stt_result *r);

/* What a request asks of a transcription beyond the audio. */
typedef struct stt_options {
  const char *language;    /* ISO 639-1 code; NULL or "" = detect (multilingual models) or English */
  const char *prompt;      /* text the audio continues (Whisper's initial prompt); NULL = none */
  bool translate;          /* into English (Whisper's translate task) */
  double temperature;      /* > 0: sample at this temperature only; 0 = greedy with fallback */
} stt_options;

/* What a backend can do, for the adapters' checks and model lists. */
typedef struct stt_info {
  const char *backend;     /* "pocketsphinx", "whisper" */
  const char *model;       /* the model's name: "pocketsphinx-en-us", "whisper-base.en" */
  bool multilingual;       /* languages besides English, and detection */
  bool translates;         /* the translate task */
  bool prompts;            /* stt_options.prompt is used */
  bool punctuates;         /* results are cased and punctuated by the model */
} stt_info;

typedef struct stt_config {
  const char *model_dir;   /* acoustic model dir; NULL = /usr/share/pocketsphinx/model/en-us/en-us */
  const char *lm;          /* language model; NULL = .../en-us.lm.bin */
  const char *dict;        /* pronunciation dictionary; NULL = .../cmudict-en-us.dict */
  int n_preload;           /* decoders created at open; 0 = 1 */
  int n_max;               /* pool size: concurrent streams; 0 = 2 */
  int wait_ms;             /* how long begin waits for a free decoder; 0 = 30000 */
  /* Backend options as name/value pairs, NULL-terminated ({"-beam", "1e-40",
   * NULL}); they override the backend's defaults. NULL = none. */
  const char *const *options;
  /* Whole-buffer decoding (stt_transcribe, stt_stream_transcribe) of audio
   * at least this long is split at the quietest point near its middle and
   * the two halves decoded at once on two pooled decoders, when a second
   * one is idle (for audio over 5 times this long, also when the pool has
   * room to make one): about half the wall time on two cores, the same CPU
   * time. 0 = 30 s; negative = never split. */
  double split_min_s;
} stt_config;

typedef struct stt_backend_ops {
  const char *name;
  int sample_rate;         /* what feed() takes: mono int16 at this rate */
  int (*open)(void **ctx, const stt_config *cfg);
  void (*close)(void *ctx);
  /* Whole buffer in one go; NULL = begin + feed + end. */
  int (*transcribe)(void *ctx, const int16_t *pcm, size_t n, stt_result *out);
  int (*stream_begin)(void *ctx, void **st);
  int (*stream_feed)(void *st, const int16_t *pcm, size_t n);
  /* Best hypothesis so far (malloc'd, may be ""). */
  int (*stream_partial)(void *st, char **text);
  int (*stream_end)(void *st, stt_result *out);
  void (*stream_free)(void *st);
  /* Whole buffer on a begun, not yet fed stream, then end: the same result
   * as transcribe. NULL = feed + end. */
  int (*stream_transcribe)(void *st, const int16_t *pcm, size_t n, stt_result *out);
  /* stream_begin that never waits: ERR_OVERLOADED at once when no decoder
   * is idle (and, unless may_create, none is made either: making one costs
   * about a second). NULL = the front end never splits. */
  int (*stream_try_begin)(void *ctx, void **st, bool may_create);
  /* Options for the stream's next transcription (before any feed); NULL =
   * the backend takes none (the front end refuses what it cannot honour). */
  int (*stream_options)(void *st, const stt_options *o);
  /* What the backend can do; NULL = pocketsphinx-en-us's (English only). */
  void (*info)(void *ctx, stt_info *out);
} stt_backend_ops;

extern const stt_backend_ops stt_backend_pocketsphinx;
extern const stt_backend_ops stt_backend_whisper;

typedef struct stt stt;
/* cfg NULL = defaults. ERR_NOT_FOUND naming the file when the model is missing. */
int stt_open(stt **out, const stt_config *cfg);
void stt_close(stt *s);
const char *stt_name(const stt *s);
int stt_sample_rate(const stt *s);
void stt_get_info(const stt *s, stt_info *out);

/* The table of STT backends (stt_catalog.c), in order of preference: a
 * Whisper file when one is installed, else pocketsphinx. */
typedef struct stt_backend_row {
  const char *name;        /* "whisper", "pocketsphinx" */
  const char *file_prefix, *file_suffix; /* its model files ("ggml-", ".bin"); NULL = a system package */
  const char *model_prefix; /* of the names given to its files ("whisper-") */
  const char *model;       /* the one model of a package backend ("pocketsphinx-en-us") */
  const char *package;     /* what to install when it is missing */
} stt_backend_row;
const stt_backend_row *stt_backends(size_t *n);

/* An installed STT model. */
typedef struct stt_model_info {
  char *name;              /* "whisper-base.en", "pocketsphinx-en-us" */
  char *path;              /* its file; NULL for a package backend */
  const char *backend;     /* the row's name */
  int64_t size, mtime;     /* of the file (0 for a package) */
} stt_model_info;
/* Every installed model, by the table's order: stt_model (--stt-model; may
 * be NULL) first, then ggml-*.bin in models_dir by name, then pocketsphinx.
 * ERR_NOT_FOUND naming stt_model when it does not exist. */
int stt_models_scan(const char *models_dir, const char *stt_model, stt_model_info **out, size_t *n);
void stt_models_free(stt_model_info *m, size_t n);

/* A Whisper engine: one model file, loaded once, and a pool of decoding
 * states that every front end opened on it shares (stt_open_whisper), so
 * the server's requests and its realtime sessions draw from one pool.
 * n_states 0 = 2, n_threads 0 = 2 per state. ERR_* of whisper_file_open
 * (naming the field) for a bad file. The engine must outlive its front ends. */
typedef struct whisper_engine whisper_engine;
typedef struct whisper_engine_config {
  const char *path;        /* a ggml-*.bin file */
  const char *name;        /* the model's name ("whisper-base.en"); NULL = from the file name */
  int n_states;            /* transcriptions at once */
  int n_threads;           /* threads of one transcription */
  int beam_size;           /* > 1: beam search at temperature 0; else greedy */
} whisper_engine_config;
int whisper_engine_open(const whisper_engine_config *cfg, whisper_engine **out);
void whisper_engine_close(whisper_engine *e);
/* A front end on e; cfg's wait_ms bounds how long a stream waits for a state. */
int stt_open_whisper(stt **out, whisper_engine *e, const stt_config *cfg);
/* The backend context of such a front end (stt.c wraps it). */
int whisper_engine_context(whisper_engine *e, const stt_config *cfg, void **ctx);
/* Whole-buffer transcription of mono int16 at stt_sample_rate(). */
int stt_transcribe(stt *s, const int16_t *pcm, size_t n, stt_result *out);
/* Incremental: begin takes a pooled decoder (waits up to wait_ms, then
 * ERR_OVERLOADED), feed any number of chunks, partial at any time, end once
 * for the final result, free always. */
typedef struct stt_stream stt_stream;
int stt_stream_begin(stt *s, stt_stream **out);
int stt_stream_feed(stt_stream *st, const int16_t *pcm, size_t n);
int stt_stream_partial(stt_stream *st, char **text);
int stt_stream_end(stt_stream *st, stt_result *out);
void stt_stream_free(stt_stream *st);
/* Whole-buffer decoding on a stream just begun (nothing fed): the result of
 * stt_transcribe, with the decoder taken beforehand, so a server can take
 * it (and answer "busy") on one thread and decode on another. Ends the
 * stream; free it as usual. */
int stt_stream_transcribe(stt_stream *st, const int16_t *pcm, size_t n, stt_result *out);
/* Sets the options of a stream's transcription, before anything is fed.
 * ERR_UNSUPPORTED naming the option when the backend cannot honour it (a
 * language other than English, translation, on pocketsphinx); ERR_INVALID
 * for a language code the model does not know. */
int stt_stream_set_options(stt_stream *st, const stt_options *o);

#endif
