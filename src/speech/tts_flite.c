/*
 * tts_flite.c - the flite text-to-speech backend with the CMU voices Debian
 * ships as libraries (slt, kal, kal16, awb, rms).
 *
 * flite keeps global state (its language and lexicon registries, and
 * settings held in each voice's feature list, which we change per call), so
 * one mutex serializes every synthesis. Voices are registered once per
 * process (flite_init and register_cmu_us_* are not undone: the process
 * keeps them until exit, which is also what flite's own tools do).
 *
 * Audio leaves as flite makes it: a streaming callback set through the
 * voice's "streaming_info" feature hands us each stretch of samples; a
 * voice that never calls it gets its whole wave delivered at the end.
 * Speed is flite's duration_stretch = 1 / speed.
 */
#include <flite/flite.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "speech/speech.h"

cst_voice *register_cmu_us_slt(const char *voxdir);
cst_voice *register_cmu_us_kal(const char *voxdir);
cst_voice *register_cmu_us_kal16(const char *voxdir);
cst_voice *register_cmu_us_awb(const char *voxdir);
cst_voice *register_cmu_us_rms(const char *voxdir);

typedef struct flite_voice_def {
  tts_voice info;
  cst_voice *(*reg)(const char *);
} flite_voice_def;

static flite_voice_def VOICES[] = {
    {{"slt", "flite", "en-US", "female", 16000, "CMU US English female (clunits)"}, register_cmu_us_slt},
    {{"rms", "flite", "en-US", "male", 16000, "CMU US English male (clunits)"}, register_cmu_us_rms},
    {{"awb", "flite", "en-GB-scotland", "male", 16000, "CMU Scottish English male (clunits)"}, register_cmu_us_awb},
    {{"kal16", "flite", "en-US", "male", 16000, "CMU US English male (diphone, 16 kHz)"}, register_cmu_us_kal16},
    {{"kal", "flite", "en-US", "male", 8000, "CMU US English male (diphone, 8 kHz)"}, register_cmu_us_kal},
};

static pthread_mutex_t flite_lock = PTHREAD_MUTEX_INITIALIZER;
static cst_voice *flite_voices[ARRAY_LEN(VOICES)];
static bool flite_ready;

static int flite_open(void **ctx) {
  pthread_mutex_lock(&flite_lock);
  if (!flite_ready) {
    flite_init();
    for (size_t i = 0; i < ARRAY_LEN(VOICES); i++) {
      flite_voices[i] = VOICES[i].reg(NULL);
      if (!flite_voices[i]) LOG_WARN("tts", "flite voice %s failed to register", VOICES[i].info.name);
    }
    flite_ready = true;
  }
  pthread_mutex_unlock(&flite_lock);
  *ctx = NULL;
  return flite_voices[0] ? 0 : err_set(ERR_UNAVAILABLE, "flite: voice slt did not register");
}

static void flite_close(void *ctx) { (void)ctx; }

static size_t flite_n_voices(void *ctx) {
  (void)ctx;
  size_t n = 0;
  for (size_t i = 0; i < ARRAY_LEN(VOICES); i++) n += flite_voices[i] != NULL;
  return n;
}

static const tts_voice *flite_voice_at(void *ctx, size_t k) {
  (void)ctx;
  for (size_t i = 0; i < ARRAY_LEN(VOICES); i++)
    if (flite_voices[i] && k-- == 0) return &VOICES[i].info;
  return NULL;
}

typedef struct flite_call {
  tts_pcm_fn fn;
  void *user;
  bool streamed;
  bool stopped;
} flite_call;

static int flite_chunk(const cst_wave *w, int start, int size, int last, cst_audio_streaming_info *asi) {
  (void)last;
  flite_call *c = asi->userdata;
  if (c->stopped) return CST_AUDIO_STREAM_STOP;
  c->streamed = true;
  if (size <= 0 || start < 0 || start + size > w->num_samples) return CST_AUDIO_STREAM_CONT;
  if (c->fn(c->user, w->samples + start, (size_t)size, w->sample_rate) != 0) {
    c->stopped = true;
    return CST_AUDIO_STREAM_STOP;
  }
  return CST_AUDIO_STREAM_CONT;
}

static int flite_synth(void *ctx, const tts_choice *ch, const char *text, double speed, tts_pcm_fn fn, void *user) {
  (void)ctx;
  cst_voice *v = NULL;
  for (size_t i = 0; i < ARRAY_LEN(VOICES); i++)
    if (&VOICES[i].info == ch->voice) v = flite_voices[i];
  if (!v) return err_set(ERR_NOT_FOUND, "flite: voice %s is not registered", ch->voice->name);
  flite_call call = {fn, user, false, false};
  int rc = 0;
  pthread_mutex_lock(&flite_lock);
  cst_audio_streaming_info *asi = new_audio_streaming_info();
  asi->min_buffsize = 1024; /* samples per callback: 64 ms at 16 kHz */
  asi->asc = flite_chunk;
  asi->userdata = &call;
  /* The feature owns asi from here; removing it frees asi. */
  feat_set(v->features, "streaming_info", audio_streaming_info_val(asi));
  feat_set_float(v->features, "duration_stretch", (float)(1.0 / speed));
  cst_utterance *u = flite_synth_text(text, v);
  if (!u) {
    rc = err_set(ERR_INTERNAL, "flite: synthesis failed for voice %s", ch->voice->name);
  } else if (call.stopped) {
    rc = ERR_CANCELLED;
  } else if (!call.streamed) {
    cst_wave *w = utt_wave(u);
    if (w && w->num_samples > 0 && fn(user, w->samples, (size_t)w->num_samples, w->sample_rate) != 0)
      rc = ERR_CANCELLED;
  }
  if (u) delete_utterance(u);
  feat_remove(v->features, "streaming_info");
  feat_set_float(v->features, "duration_stretch", 1.0f);
  pthread_mutex_unlock(&flite_lock);
  if (rc == ERR_CANCELLED) err_set(ERR_CANCELLED, "tts: synthesis stopped by the receiver");
  return rc;
}

const tts_backend_ops tts_backend_flite = {
    .name = "flite",
    .open = flite_open,
    .close = flite_close,
    .n_voices = flite_n_voices,
    .voice_at = flite_voice_at,
    .synth = flite_synth,
};
