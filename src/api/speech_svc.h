/*
 * speech_svc.h - what the speech adapters (api/openai/audio.c and
 * api/deepgram/) share: the lazily opened TTS and STT front ends, the worker
 * threads that stream speech, and the pieces of transcript shaping that do
 * not depend on a vendor (sentences from word timings, light punctuation,
 * SRT/VTT time stamps, audio input mapped to a 400 that names the problem).
 *
 * Why lazily: opening pocketsphinx costs about a second and flite/espeak-ng
 * some memory; a server that never hears a speech request should pay neither.
 * The first request opens them under a mutex; a failure is remembered and
 * reported (503 naming the missing package) on every later request.
 *
 * Threads: api_speech_tts / api_speech_stt may be called from any thread.
 * A streaming response runs its producer on a detached thread started with
 * api_speech_spawn; api_speech_free waits (bounded) for those threads before
 * closing the engines, so it must run after the HTTP server is stopped.
 *
 * Ownership: the api_speech object belongs to app/main.c and outlives the
 * server; tts/stt handles returned here are borrowed.
 */
#ifndef PARLEY_API_SPEECH_SVC_H
#define PARLEY_API_SPEECH_SVC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "audio/audio.h"
#include "http/http.h"
#include "speech/speech.h"

typedef struct api_speech api_speech;

/* How the speech engines' worker processes run. */
typedef struct api_speech_config {
  const char *worker_exe; /* program started as a worker; NULL = this program */
  int n_workers;          /* per pool (synthesis, recognition, decoding); 0 = 4 */
  int call_ms;            /* time limit of one worker call before the audio share; 0 = 60000 */
  const char *models_dir; /* where ggml-*.bin Whisper files are found; NULL = none */
  const char *stt_model;  /* --stt-model: a Whisper file, the default STT model; NULL = none */
  int stt_threads;        /* threads of one Whisper transcription; 0 = 2 */
  int stt_beam_size;      /* Whisper beam search at temperature 0; 0/1 = greedy */
} api_speech_config;

/* cfg NULL = defaults. Starts no worker: the first speech request does.
 * Lists the installed STT models; a cfg->stt_model that does not open as
 * a Whisper file is an error naming the file and what is wrong with it. */
int api_speech_new(api_speech **out, const api_speech_config *cfg);
/* Waits up to 5 s for producer threads, then closes the engines. */
void api_speech_free(api_speech *sp);

/* The TTS / STT front end, opened on first use. ERR_UNAVAILABLE (detail names
 * what is missing) when the engine cannot start. */
int api_speech_tts(api_speech *sp, tts **out);
int api_speech_stt(api_speech *sp, stt **out);
/* The STT front end of the model a request names: an installed model
 * (api_speech_stt_models) by name, anything else the default: the first
 * installed Whisper file, else pocketsphinx. */
int api_speech_stt_named(api_speech *sp, const char *model, stt **out);
/* The installed STT models, the default first (borrowed). */
size_t api_speech_stt_models(const api_speech *sp, const stt_model_info **out);

/* A TTS / STT front end of the caller's own over the same engines (the
 * realtime sessions keep their own, with their own waiting limits: the
 * default STT model's, sharing its workers or its Whisper decoder pool);
 * close it with tts_close / stt_close before api_speech_free. */
int api_speech_open_tts(api_speech *sp, tts **out);
int api_speech_open_stt(api_speech *sp, const stt_config *cfg, stt **out);

/* Hosts outbound requests may reach (Deepgram {"url"} bodies and
 * callbacks): comma-separated names or addresses, "*" for any, "" for none;
 * max_bytes bounds a fetched body. Copied; set before the server starts. */
int api_speech_set_fetch(api_speech *sp, const char *hosts, uint64_t max_bytes);
const char *api_speech_fetch_hosts(const api_speech *sp);
/* The model manager Deepgram /read generates with (borrowed; set before the
 * server starts). */
struct manager;
void api_speech_set_manager(api_speech *sp, struct manager *mgr);
struct manager *api_speech_manager(const api_speech *sp);
uint64_t api_speech_fetch_max(const api_speech *sp);

/* Runs fn(arg) on a detached thread counted by sp (see api_speech_free). */
int api_speech_spawn(api_speech *sp, void *(*fn)(void *), void *arg);
/* A producer thread calls this as its very last action. */
void api_speech_job_done(api_speech *sp);

/* audio_decode of client bytes, run in a decoding worker: FFmpeg's
 * demuxers and decoders see hostile input, and their crash is answered as
 * ERR_WORKER instead of ending the server. */
int api_speech_decode(api_speech *sp, const void *bytes, size_t len, const audio_decode_opts *opts, audio_pcm *out);

/* The first sentence of a synthesis, spoken on the handler's thread before
 * the response opens: a worker that dies or passes its time limit on it is
 * answered with a 5xx in the dialect's shape (api_error_last) instead of a
 * 200 with no audio. The producer pushes pcm first, then speaks text + rest
 * (api_speech_head_play does both). */
typedef struct api_speech_head {
  buf pcm;     /* mono int16 samples at the voice's rate */
  size_t rest; /* bytes of the text already spoken */
} api_speech_head;
int api_speech_head_synth(tts *t, const tts_choice *c, const char *text, double speed, api_speech_head *h);
/* Hands the head's samples to fn, then synthesizes the rest of text to fn;
 * frees the head. */
int api_speech_head_play(api_speech_head *h, tts *t, const tts_choice *c, const char *text, double speed,
                         tts_pcm_fn fn, void *user);
void api_speech_head_free(api_speech_head *h);

/* HTTP status for an audio/ decoding error: bad, truncated or unsupported
 * input is the client's problem (400), too long is 413, anything else 500. */
int api_speech_decode_status(int rc);

/* Reads a whole file (a spooled upload) into memory: *out is malloc'd. */
int api_speech_read_file(const char *path, uint64_t max, uint8_t **out, size_t *len);

/* Lower-case hex SHA-256 of bytes (65 bytes with the NUL). */
void api_speech_sha256_hex(const void *data, size_t len, char out[65]);
/* A name-based UUID (SHA-256 of "parley:" + name, version 5 layout), so a
 * model keeps the same uuid across runs. */
void api_speech_name_uuid(const char *name, char out[37]);
/* Standard base64 with padding; returns a malloc'd string or NULL. */
char *api_speech_base64(const void *data, size_t len);
/* "2026-08-20T10:11:12.345Z" for now (cap >= 32). */
void api_speech_rfc3339_now(char *out, size_t cap);

/* Answers with v as compact JSON whose reals carry 10 significant digits
 * (0.41, not 0.40999999999999998). Steals nothing. */
int api_speech_respond_json(http_req *req, int status, const json_t *v);
/* The same rendering for one SSE data event; steals v (NULL gives ERR_NOMEM). */
int api_speech_sse_json(http_stream *s, json_t *v);
/* v rendered as above; malloc'd, NULL on failure. */
char *api_speech_json_dumps(const json_t *v);

/* ---- transcript shaping ---- */

/* A run of words [first, first + n) that reads as one sentence: split where
 * the gap between words is at least gap_s, or before a sentence would pass
 * max_s seconds. */
typedef struct api_span {
  size_t first, n;
  double start, end;
} api_span;
/* Returns the number of spans written into *out (malloc'd, NULL when there
 * are no words) or a negative error. */
int api_speech_spans(const stt_result *r, double gap_s, double max_s, api_span **out);
/* How the sentence of n words w ends: '?' when it reads as a question (an
 * interrogative first word, or an auxiliary verb followed by a pronoun or a
 * determiner: "is it", "can you", "do the"), '.' otherwise. */
char api_speech_sentence_end(const stt_word *w, size_t n);
/* The word with light punctuation for its place in a sentence: a capital at
 * the start of a sentence (and for "i", "i'm", ...), and end ('.' or '?';
 * 0 = not the last word) after it. */
void api_speech_punctuate(const char *word, bool first, char end, char *out, size_t cap);
/* Appends the words of span s, punctuated when punct, separated by spaces. */
int api_speech_span_text(const stt_result *r, const api_span *s, bool punct, buf *out);
/* "HH:MM:SS,mmm" (SRT, comma) or "HH:MM:SS.mmm" (VTT, dot). */
void api_speech_timestamp(double t, char sep, char out[16]);

#endif
