/*
 * tts_espeak.c - the espeak-ng text-to-speech backend: every language
 * espeak-ng ships, named "espeak:<language>" ("espeak:en-us", "espeak:fr"),
 * with its voice variants selectable as "+f3", "+m7", ...
 *
 * espeak-ng is one global synthesizer, so it is initialized once per
 * process (in synchronous mode: espeak_Synth returns when the text is
 * spoken, handing samples to our callback as it goes) and every synthesis
 * holds one mutex. The voice list is read once at the first open and kept
 * for the life of the process, as espeak-ng itself is.
 * Speed maps to espeakRATE = 175 words per minute * speed, clamped to
 * espeak-ng's 80..450 (speed about 0.46..2.57).
 */
#include <espeak-ng/speak_lib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "speech/speech.h"

typedef struct espeak_entry {
  tts_voice info;
  char name[48];
  char lang[40];
  char desc[64];
  char ident[64]; /* espeak-ng voice file ("gmw/en"): what SetVoiceByName takes reliably */
} espeak_entry;

static pthread_mutex_t espeak_lock = PTHREAD_MUTEX_INITIALIZER;
static bool espeak_ready;
static int espeak_rate_hz;
static espeak_entry *espeak_voices; /* kept until exit */
static size_t espeak_n;

typedef struct espeak_call {
  tts_pcm_fn fn;
  void *user;
  bool stopped;
} espeak_call;

static int espeak_cb(short *wav, int n, espeak_EVENT *ev) {
  espeak_call *c = ev ? ev->user_data : NULL;
  if (!c) return 0;
  if (c->stopped) return 1;
  if (wav && n > 0 && c->fn(c->user, wav, (size_t)n, espeak_rate_hz) != 0) {
    c->stopped = true;
    return 1;
  }
  return 0;
}

/* One local voice per language any espeak-ng voice claims; when several
 * claim it ("en" is claimed by seven), the one with the best (lowest)
 * priority byte describes it. */
static int load_voices(void) {
  const espeak_VOICE **list = espeak_ListVoices(NULL);
  size_t n = 0, n_lang = 0;
  for (; list && list[n]; n++)
    for (const char *p = list[n]->languages; p && p[0]; p += strlen(p + 1) + 2) n_lang++;
  espeak_voices = calloc(n_lang ? n_lang : 1, sizeof *espeak_voices);
  int *prio = calloc(n_lang ? n_lang : 1, sizeof *prio);
  if (!espeak_voices || !prio) {
    free(prio);
    return err_set(ERR_NOMEM, "espeak-ng: voice list");
  }
  for (size_t i = 0; i < n; i++) {
    const espeak_VOICE *v = list[i];
    for (const char *p = v->languages; p && p[0]; p += strlen(p + 1) + 2) {
      int pr = (unsigned char)p[0];
      const char *lang = p + 1;
      if (strcmp(lang, "variant") == 0 || strlen(lang) >= sizeof espeak_voices[0].lang || !v->identifier ||
          strlen(v->identifier) >= sizeof espeak_voices[0].ident)
        continue;
      size_t k = 0;
      while (k < espeak_n && strcmp(espeak_voices[k].lang, lang) != 0) k++;
      if (k < espeak_n && prio[k] <= pr) continue;
      if (k == espeak_n) espeak_n++;
      prio[k] = pr;
      espeak_entry *e = &espeak_voices[k];
      snprintf(e->lang, sizeof e->lang, "%s", lang);
      snprintf(e->name, sizeof e->name, "espeak:%s", lang);
      snprintf(e->ident, sizeof e->ident, "%s", v->identifier);
      snprintf(e->desc, sizeof e->desc, "espeak-ng %s", v->name ? v->name : lang);
      e->info = (tts_voice){e->name, "espeak-ng", e->lang, v->gender == 1 ? "male" : v->gender == 2 ? "female" : "",
                            espeak_rate_hz, e->desc};
    }
  }
  free(prio);
  return 0;
}

static int espeak_open(void **ctx) {
  *ctx = NULL;
  int rc = 0;
  pthread_mutex_lock(&espeak_lock);
  if (!espeak_ready) {
    int rate = espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 100, NULL, espeakINITIALIZE_DONT_EXIT);
    if (rate <= 0) {
      rc = err_set(ERR_UNAVAILABLE, "espeak-ng: initialization failed (is espeak-ng-data installed?)");
    } else {
      espeak_rate_hz = rate;
      espeak_SetSynthCallback(espeak_cb);
      rc = load_voices();
      if (rc == 0) espeak_ready = true;
    }
  }
  pthread_mutex_unlock(&espeak_lock);
  return rc;
}

static void espeak_close(void *ctx) { (void)ctx; }
static size_t espeak_n_voices(void *ctx) {
  (void)ctx;
  return espeak_n;
}
static const tts_voice *espeak_voice_at(void *ctx, size_t i) {
  (void)ctx;
  return i < espeak_n ? &espeak_voices[i].info : NULL;
}

static int espeak_synth(void *ctx, const tts_choice *ch, const char *text, double speed, tts_pcm_fn fn,
                        void *user) {
  (void)ctx;
  const espeak_entry *entry = NULL;
  for (size_t i = 0; i < espeak_n; i++)
    if (&espeak_voices[i].info == ch->voice) entry = &espeak_voices[i];
  if (!entry) return err_set(ERR_NOT_FOUND, "espeak-ng: voice %s is not one of ours", ch->voice->name);
  char name[112];
  if (ch->variant[0])
    snprintf(name, sizeof name, "%s+%s", entry->ident, ch->variant);
  else
    snprintf(name, sizeof name, "%s", entry->ident);
  int wpm = (int)(espeakRATE_NORMAL * speed + 0.5);
  if (wpm < espeakRATE_MINIMUM) wpm = espeakRATE_MINIMUM;
  if (wpm > espeakRATE_MAXIMUM) wpm = espeakRATE_MAXIMUM;
  espeak_call call = {fn, user, false};
  int rc = 0;
  pthread_mutex_lock(&espeak_lock);
  if (espeak_SetVoiceByName(name) != EE_OK) {
    rc = err_set(ERR_NOT_FOUND, "espeak-ng has no voice '%s'", name);
  } else {
    espeak_SetParameter(espeakRATE, wpm, 0);
    espeak_ERROR e = espeak_Synth(text, strlen(text) + 1, 0, POS_CHARACTER, 0, espeakCHARS_UTF8, NULL, &call);
    if (call.stopped)
      rc = err_set(ERR_CANCELLED, "tts: synthesis stopped by the receiver");
    else if (e != EE_OK)
      rc = err_set(ERR_INTERNAL, "espeak-ng: synthesis failed (code %d) for voice %s", (int)e, name);
  }
  pthread_mutex_unlock(&espeak_lock);
  return rc;
}

const tts_backend_ops tts_backend_espeak = {
    .name = "espeak-ng",
    .open = espeak_open,
    .close = espeak_close,
    .n_voices = espeak_n_voices,
    .voice_at = espeak_voice_at,
    .synth = espeak_synth,
};
