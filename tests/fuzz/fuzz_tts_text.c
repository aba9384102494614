/*
 * fuzz_tts_text.c - libFuzzer harness for the text-to-speech front end on a
 * client's request: the voice name (/v1/audio/speech `voice`, Deepgram
 * `model`, a realtime session's voice) through tts_voice_resolve, and the
 * input text through tts_synthesize's checks, its sentence splitter and the
 * flite backend. Input: byte 0 picks the speed (valid and invalid ones), the
 * bytes up to the first '\n' are the voice name, the rest is the text. Text
 * reaches the server as a JSON string, so only valid UTF-8 without NUL is
 * synthesized (anything else is what the JSON decoder refuses first).
 *
 * Properties: resolution gives a voice from the front end's own list or
 * ERR_NOT_FOUND with a message; an exact local name resolves to itself;
 * synthesis gives 0 or a clean error with a message, and every chunk of audio
 * has samples and the same rate.
 *
 * espeak-ng voices are resolved but not synthesized here: libespeak-ng
 * crashes on some inputs (issue #25 item 1), which is why it must run out of
 * process; fuzzing it in-process would only find that library's bugs.
 */
#include "fuzz.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "http/ws.h"
#include "speech/speech.h"

static tts *g_tts;

FUZZ_INIT(tts_text) {
  if (tts_open(&g_tts) != 0) abort();
}

typedef struct chunks {
  int rate;
  size_t n_samples;
} chunks;

/* Stops after a minute of audio: a longer text only repeats the same path. */
static int on_pcm(void *user, const int16_t *pcm, size_t n, int rate) {
  chunks *c = user;
  if (!pcm || n == 0 || rate <= 0) abort();
  if (c->rate && rate != c->rate) abort();
  c->rate = rate;
  c->n_samples += n;
  return c->n_samples > (size_t)rate * 60;
}

static const double SPEEDS[] = {1.0, 0.25, 4.0, 2.5, 0.5, 0.0, 4.01, -1.0, NAN, INFINITY};

FUZZ_TARGET(tts_text) {
  if (size < 1 || size > 2048) return 0;
  double speed = SPEEDS[data[0] % (sizeof SPEEDS / sizeof SPEEDS[0])];
  const char *p = (const char *)data + 1, *end = (const char *)data + size;
  const char *nl = memchr(p, '\n', (size_t)(end - p));
  if (!nl) nl = end;
  size_t vlen = (size_t)(nl - p);
  if (memchr(p, 0, vlen)) return 0; /* a C string cannot hold it */
  char *voice = strndup(p, vlen);
  const char *tp = nl < end ? nl + 1 : end;
  size_t tlen = (size_t)(end - tp);
  if (!voice) abort();

  tts_choice c;
  int rc = tts_voice_resolve(g_tts, voice, &c);
  if (rc) {
    if (rc != ERR_NOT_FOUND || !err_detail()[0]) abort();
    free(voice);
    return 0;
  }
  bool listed = false;
  for (size_t i = 0; i < tts_n_voices(g_tts); i++) listed |= tts_voice_at(g_tts, i) == c.voice;
  if (!listed) abort();
  for (size_t i = 0; i < tts_n_voices(g_tts); i++)
    if (strcasecmp(tts_voice_at(g_tts, i)->name, voice) == 0 && tts_voice_at(g_tts, i) != c.voice) abort();
  free(voice);

  if (strcmp(c.voice->backend, "espeak-ng") == 0) return 0;
  if (memchr(tp, 0, tlen) || !ws_utf8_valid((const uint8_t *)tp, tlen)) return 0;
  char *text = strndup(tp, tlen);
  if (!text) abort();
  chunks got = {0, 0};
  rc = tts_synthesize(g_tts, &c, text, speed, on_pcm, &got);
  if (rc && rc != ERR_CANCELLED && (rc > 0 || !err_detail()[0])) abort();
  if (rc == 0 && !(speed >= TTS_SPEED_MIN && speed <= TTS_SPEED_MAX)) abort();
  free(text);
  return 0;
}
