/*
 * tts.c - the text-to-speech front end: opens the backends, merges their
 * voice lists, resolves a requested name (local, backend-qualified, vendor)
 * to one voice, checks text and speed, and offers a collect-everything
 * helper on top of the streaming synthesis.
 *
 * Resolution order: "" -> the default voice; an exact local name;
 * "flite:<name>"; "espeak:<lang>+<variant>" (variant split off); then the
 * vendor table (speech_voices.c), whose target is resolved the same way. A
 * vendor voice whose target backend is missing falls back to the default
 * voice, so an app never fails on a voice name the table knows.
 *
 * Synthesis goes one sentence at a time (sentence_len), so the first audio
 * comes after the first sentence is synthesized, not the whole text.
 *
 * Start reading at tts_voice_resolve().
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "speech/speech.h"
#include "speech/speech_worker.h"

typedef struct tts_slot {
  const tts_backend_ops *ops;
  void *ctx;
} tts_slot;

struct tts {
  tts_slot slots[4];
  size_t n_slots;
  const tts_voice **voices; /* all backends' voices, in backend order */
  size_t n_voices;
};

static const tts_backend_ops *const BACKENDS[] = {&tts_backend_flite, &tts_backend_espeak};

/* Builds the merged voice list once the slots are filled. */
static int tts_finish(tts *t, tts **out) {
  if (t->n_slots == 0) {
    free(t);
    return err_set(ERR_UNAVAILABLE, "tts: no text-to-speech backend could start");
  }
  size_t total = 0;
  for (size_t s = 0; s < t->n_slots; s++) total += t->slots[s].ops->n_voices(t->slots[s].ctx);
  t->voices = calloc(total ? total : 1, sizeof *t->voices);
  if (!t->voices) {
    tts_close(t);
    return err_set(ERR_NOMEM, "tts: voice list");
  }
  for (size_t s = 0; s < t->n_slots; s++) {
    size_t n = t->slots[s].ops->n_voices(t->slots[s].ctx);
    for (size_t i = 0; i < n; i++) t->voices[t->n_voices++] = t->slots[s].ops->voice_at(t->slots[s].ctx, i);
  }
  *out = t;
  return 0;
}

int tts_open(tts **out) {
  *out = NULL;
  tts *t = calloc(1, sizeof *t);
  if (!t) return err_set(ERR_NOMEM, "tts: handle");
  for (size_t i = 0; i < ARRAY_LEN(BACKENDS); i++) {
    void *ctx = NULL;
    int rc = BACKENDS[i]->open(&ctx);
    if (rc) {
      LOG_WARN("tts", "backend %s unavailable: %s", BACKENDS[i]->name, err_detail());
      continue;
    }
    t->slots[t->n_slots++] = (tts_slot){BACKENDS[i], ctx};
  }
  return tts_finish(t, out);
}

/* The same backends, each behind a proxy that runs it in pool's workers. */
int tts_open_remote(tts **out, wpool *pool, const speech_limits *lim) {
  *out = NULL;
  tts *t = calloc(1, sizeof *t);
  if (!t) return err_set(ERR_NOMEM, "tts: handle");
  for (size_t i = 0; i < ARRAY_LEN(BACKENDS); i++) {
    const tts_backend_ops *ops;
    void *ctx;
    int rc = tts_remote_backend(pool, lim, BACKENDS[i]->name, &ops, &ctx);
    if (rc) {
      LOG_WARN("tts", "backend %s unavailable in the speech worker: %s", BACKENDS[i]->name, err_detail());
      if (rc == ERR_WORKER || rc == ERR_TIMEOUT || rc == ERR_OVERLOADED) {
        /* The worker itself failed, not the backend: do not remember a
         * server without voices. */
        int keep = rc;
        char why[512];
        snprintf(why, sizeof why, "%s", err_detail());
        tts_close(t);
        return err_set(keep, "%s", why);
      }
      continue;
    }
    t->slots[t->n_slots++] = (tts_slot){ops, ctx};
  }
  return tts_finish(t, out);
}

void tts_close(tts *t) {
  if (!t) return;
  for (size_t s = 0; s < t->n_slots; s++) t->slots[s].ops->close(t->slots[s].ctx);
  free(t->voices);
  free(t);
}

size_t tts_n_voices(const tts *t) { return t->n_voices; }
const tts_voice *tts_voice_at(const tts *t, size_t i) { return i < t->n_voices ? t->voices[i] : NULL; }

const char *tts_default_voice(const tts *t) {
  for (size_t i = 0; i < t->n_voices; i++)
    if (strcmp(t->voices[i]->name, "slt") == 0) return "slt";
  return t->n_voices ? t->voices[0]->name : "";
}

static const tts_voice *find_local(const tts *t, const char *name) {
  for (size_t i = 0; i < t->n_voices; i++)
    if (strcasecmp(t->voices[i]->name, name) == 0) return t->voices[i];
  return NULL;
}

/* Resolves a local or backend-qualified name (no vendor names). */
static int resolve_local(const tts *t, const char *name, tts_choice *out) {
  const char *base = name;
  if (strncasecmp(name, "flite:", 6) == 0) base = name + 6;
  if (strncasecmp(name, "cmu_us_", 7) == 0) base = name + 7;
  char tmp[96];
  const char *plus = strchr(base, '+');
  out->variant[0] = '\0';
  if (plus) {
    size_t n = (size_t)(plus - name);
    const char *var = plus + 1;
    size_t vl = strlen(var);
    if (n >= sizeof tmp || vl == 0 || vl >= sizeof out->variant) return ERR_NOT_FOUND;
    for (size_t i = 0; i < vl; i++)
      if (!isalnum((unsigned char)var[i]) && var[i] != '_' && var[i] != '-') return ERR_NOT_FOUND;
    memcpy(tmp, name, n);
    tmp[n] = '\0';
    memcpy(out->variant, var, vl + 1);
    base = tmp;
    if (strncasecmp(base, "flite:", 6) == 0) base += 6;
  }
  const tts_voice *v = find_local(t, base);
  if (!v) return ERR_NOT_FOUND;
  if (out->variant[0] && strcmp(v->backend, "espeak-ng") != 0) return ERR_NOT_FOUND; /* variants are espeak's */
  out->voice = v;
  return 0;
}

int tts_voice_resolve(const tts *t, const char *name, tts_choice *out) {
  memset(out, 0, sizeof *out);
  if (!name || !*name) name = tts_default_voice(t);
  snprintf(out->requested, sizeof out->requested, "%s", name);
  if (strlen(name) > 80) return err_set(ERR_NOT_FOUND, "voice '%.40s...': no such voice (name too long)", name);
  if (resolve_local(t, name, out) == 0) return 0;
  char scratch[96];
  const char *target = tts_vendor_lookup(name, scratch, sizeof scratch);
  if (target) {
    out->vendor = true;
    if (resolve_local(t, target, out) == 0) return 0;
    /* The mapped backend is missing here: the default voice. */
    LOG_DEBUG("tts", "voice %s maps to %s, which is not available: using %s", name, target, tts_default_voice(t));
    if (resolve_local(t, tts_default_voice(t), out) == 0) return 0;
  }
  return err_set(ERR_NOT_FOUND,
                 "voice '%s' is neither a local voice (see /v1/audio/voices) nor a known OpenAI or Deepgram voice",
                 name);
}

/* Bytes up to and including the end of the first sentence: a run of
 * . ! ? followed by white space, or a line break; the whole rest when none. */
static size_t sentence_len(const char *s) {
  size_t i = 0;
  while (s[i]) {
    if (s[i] == '\n') return i + 1;
    if (s[i] == '.' || s[i] == '!' || s[i] == '?') {
      size_t j = i;
      while (s[j] == '.' || s[j] == '!' || s[j] == '?') j++;
      if (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') return j + 1;
      i = j;
      continue;
    }
    i++;
  }
  return i;
}

static bool has_word(const char *s, size_t n) {
  for (size_t i = 0; i < n && s[i]; i++)
    if (!isspace((unsigned char)s[i]) && !ispunct((unsigned char)s[i])) return true;
  return false;
}

size_t tts_first_sentence(const char *text) {
  size_t pos = 0;
  while (text[pos]) {
    size_t n = sentence_len(text + pos);
    bool word = has_word(text + pos, n);
    pos += n;
    if (word) break;
  }
  return pos;
}

int tts_synthesize(tts *t, const tts_choice *c, const char *text, double speed, tts_pcm_fn fn, void *user) {
  if (!c || !c->voice) return err_set(ERR_INVALID, "tts: no voice chosen");
  if (!text) return err_set(ERR_INVALID, "tts: no input text");
  size_t len = strlen(text);
  if (len > TTS_TEXT_MAX)
    return err_set(ERR_TOO_LARGE, "tts: input of %zu bytes is longer than %d", len, TTS_TEXT_MAX);
  if (!(speed >= TTS_SPEED_MIN && speed <= TTS_SPEED_MAX))
    return err_set(ERR_RANGE, "tts: speed %g is outside %.2f..%.1f", speed, TTS_SPEED_MIN, TTS_SPEED_MAX);
  const tts_slot *slot = NULL;
  for (size_t s = 0; s < t->n_slots; s++)
    if (strcmp(t->slots[s].ops->name, c->voice->backend) == 0) slot = &t->slots[s];
  if (!slot) return err_set(ERR_NOT_FOUND, "tts: backend %s of voice %s is not open", c->voice->backend, c->voice->name);
  /* One sentence at a time: engines synthesize a whole utterance before
   * their first sample, so this bounds the time to the first audio by the
   * first sentence, not the whole text. */
  size_t pos = 0;
  char *piece = malloc(len + 1);
  if (!piece) return err_set(ERR_NOMEM, "tts: %zu bytes", len);
  int rc = 0;
  do {
    size_t n = sentence_len(text + pos);
    memcpy(piece, text + pos, n);
    piece[n] = '\0';
    pos += n;
    if (n == 0 || !has_word(piece, n)) continue;
    rc = slot->ops->synth(slot->ctx, c, piece, speed, fn, user);
  } while (rc == 0 && text[pos]);
  free(piece);
  return rc;
}

typedef struct collect {
  buf data;
  int rate;
  size_t max_samples;
} collect;

static int collect_fn(void *user, const int16_t *pcm, size_t n, int rate) {
  collect *c = user;
  if (c->rate == 0) c->rate = rate;
  if (rate != c->rate) return 1;
  if (c->data.len / 2 + n > c->max_samples) return 1;
  return buf_append(&c->data, pcm, n * sizeof *pcm) ? 1 : 0;
}

int tts_synthesize_pcm(tts *t, const char *voice, const char *text, double speed, audio_pcm *out) {
  memset(out, 0, sizeof *out);
  tts_choice c;
  int rc = tts_voice_resolve(t, voice, &c);
  if (rc) return rc;
  collect col = {BUF_INIT, 0, (size_t)(3600.0 * 48000)};
  rc = tts_synthesize(t, &c, text, speed, collect_fn, &col);
  if (rc) {
    buf_free(&col.data);
    return rc == ERR_CANCELLED ? err_set(ERR_TOO_LARGE, "tts: synthesized audio too large") : rc;
  }
  out->n_frames = col.data.len / 2;
  out->data = buf_detach(&col.data, NULL);
  out->rate = col.rate ? col.rate : c.voice->sample_rate;
  out->channels = 1;
  out->fmt = AUDIO_SAMPLE_S16;
  snprintf(out->container, sizeof out->container, "tts");
  snprintf(out->codec, sizeof out->codec, "%s", c.voice->backend);
  out->src_rate = out->rate;
  out->src_channels = 1;
  return 0;
}
