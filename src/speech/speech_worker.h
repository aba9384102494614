/*
 * speech_worker.h - the speech engines run in worker processes.
 *
 * espeak-ng, flite, pocketsphinx and FFmpeg's demuxers and decoders are
 * third-party C that sees text and media from clients; a crash in any of
 * them must not take the server down. So the server does not call them: it
 * opens "remote" front ends (tts_open_remote, stt_open_remote, and
 * speech_decode_remote for client audio) whose backends forward every call
 * over base/wpool.h to a worker process running speech_worker_main, which
 * holds the real engines, loaded once and kept across calls.
 *
 * The request kinds below are the protocol; each names what its payload
 * holds (wmsg_* fields in order) and what DONE carries back.
 */
#ifndef PARLEY_SPEECH_SPEECH_WORKER_H
#define PARLEY_SPEECH_SPEECH_WORKER_H

#include "audio/audio.h"
#include "base/wpool.h"
#include "speech/speech.h"

/* The hidden command line of a speech worker: `parley __worker speech`. */
#define SPEECH_WORKER_ARG0 "__worker"
#define SPEECH_WORKER_ARG1 "speech"

enum spw_kind {
  /* str backend -> u32 n, n x {str name, str language, str gender, i32 rate, str description} */
  SPW_TTS_VOICES = WPOOL_KIND_USER,
  /* str backend, str voice, str variant, f64 speed, str text -> SPW_PCM chunks, then nothing */
  SPW_TTS_SYNTH,
  /* chunk: i32 rate, bytes int16 samples */
  SPW_PCM,
  /* The STT requests all begin with the config blob as one byte run: str
   * model_dir, str lm, str dict, f64 split_min_s, u32 n, n x str option,
   * zero-padded to 4 bytes (stt_remote_context builds it). A worker whose
   * open front end has another blob reopens it (between streams only).
   * A result is: str text, f64 confidence, f64 audio_seconds, f64
   * decode_seconds, i32 parts, u32 n, n x {str word, f64 start, f64 end,
   * f64 confidence}. */
  /* blob, bytes pcm -> result */
  SPW_STT_TRANSCRIBE,
  /* blob -> nothing; the worker holds one stream until SPW_STT_FREE */
  SPW_STT_BEGIN,
  /* blob, bytes pcm -> nothing */
  SPW_STT_FEED,
  /* blob -> str text */
  SPW_STT_PARTIAL,
  /* blob -> result */
  SPW_STT_END,
  /* blob, bytes pcm -> result */
  SPW_STT_STREAM_TRANSCRIBE,
  /* blob -> nothing */
  SPW_STT_FREE,
  /* i32 raw, i32 raw_rate, i32 raw_channels, i32 target_rate, i32 target_channels, i32 split,
   * i32 fmt, f64 max_seconds, str hint, bytes input -> i32 rate, i32 channels, i32 fmt, i32 planar,
   * i32 src_rate, i32 src_channels, str container, str codec, bytes samples */
  SPW_DECODE,
};

/* Per-call time limits of the remote front ends: a base for every call plus
 * a share of the audio involved, so a 4-hour transcription is not cut at
 * the limit meant for one sentence. */
typedef struct speech_limits {
  int call_ms;             /* every call; 0 = 60000 */
  double per_audio_s;      /* extra ms per second of audio fed; 0 = 2000 (RTF 2 on a loaded machine) */
} speech_limits;

/* The worker process's main (argv after "__worker speech"): serves on WPOOL_FD. */
int speech_worker_main(int argc, char **argv);

/* TTS and STT front ends whose engines run in pool's workers (borrowed:
 * the pool outlives them). tts_open_remote asks a worker for every
 * backend's voice list; stt_open_remote starts nothing until first use. */
int tts_open_remote(tts **out, wpool *pool, const speech_limits *lim);
int stt_open_remote(stt **out, const stt_config *cfg, wpool *pool, const speech_limits *lim);

/* audio_decode run in one of pool's workers: the same result, or the
 * worker's failure (ERR_WORKER / ERR_TIMEOUT) instead of a crash. */
int speech_decode_remote(wpool *pool, const speech_limits *lim, const void *bytes, size_t len,
                         const audio_decode_opts *opts, audio_pcm *out);

/* ---- used by tts.c / stt.c to build the remote front ends ---- */

/* The backend that forwards name ("flite", "espeak-ng") to a worker; ctx
 * holds its voice list. ERR_NOT_FOUND when the worker has no such backend. */
int tts_remote_backend(wpool *pool, const speech_limits *lim, const char *name, const tts_backend_ops **ops,
                       void **ctx);
/* The STT backend that forwards to a worker (its open is NULL: the context
 * comes from stt_remote_context, which copies cfg for the workers). */
extern const stt_backend_ops stt_backend_remote;
int stt_remote_context(void **ctx, const stt_config *cfg, wpool *pool, const speech_limits *lim);

#endif
