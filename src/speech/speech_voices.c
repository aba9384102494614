/*
 * speech_voices.c - the table that maps vendors' voice names onto local
 * voices, so that an app asking OpenAI for "coral" or Deepgram for
 * "aura-2-thalia-en" gets a local voice of a similar kind.
 *
 * The choice per name is by the vendor's published description (gender,
 * accent); it cannot sound the same. Local voices: flite slt (US female),
 * rms (US male), awb (Scottish male), kal16 / kal (US male, diphone) and
 * espeak-ng languages with its variants f1..f5 (female) and m1..m7 (male).
 * Deepgram names not in the table follow a rule on their language suffix.
 * docs/speech.md prints this table; keep them in step.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"
#include "speech/speech.h"

static const tts_vendor_voice VENDOR[] = {
    /* OpenAI (audio.speech voices) */
    {"alloy", "slt", "neutral, the default: flite's clearest voice"},
    {"ash", "kal16", "male, warm"},
    {"ballad", "awb", "male, expressive"},
    {"coral", "espeak:en-us+f3", "female, bright"},
    {"echo", "rms", "male, even"},
    {"fable", "espeak:en-gb+m3", "male, British storyteller"},
    {"nova", "espeak:en-us+f2", "female, energetic"},
    {"onyx", "espeak:en-us+m7", "male, deep"},
    {"sage", "espeak:en-us+f4", "female, calm"},
    {"shimmer", "espeak:en-us+f5", "female, soft"},
    {"verse", "espeak:en-us+m1", "male, versatile"},
    {"marin", "slt", "female, natural"},
    {"cedar", "rms", "male, natural"},
    /* Deepgram Aura-1 */
    {"aura-asteria-en", "slt", "female, US (Deepgram's default)"},
    {"aura-luna-en", "espeak:en-us+f2", "female, US"},
    {"aura-stella-en", "espeak:en-us+f3", "female, US"},
    {"aura-athena-en", "espeak:en-gb+f4", "female, UK"},
    {"aura-hera-en", "espeak:en-us+f5", "female, US"},
    {"aura-orion-en", "rms", "male, US"},
    {"aura-arcas-en", "kal16", "male, US"},
    {"aura-perseus-en", "espeak:en-us+m3", "male, US"},
    {"aura-angus-en", "awb", "male, Irish (nearest: Scottish)"},
    {"aura-orpheus-en", "espeak:en-us+m1", "male, US"},
    {"aura-helios-en", "espeak:en-gb+m3", "male, UK"},
    {"aura-zeus-en", "espeak:en-us+m7", "male, US"},
    /* Deepgram Aura-2, English */
    {"aura-2-thalia-en", "slt", "female, US (Aura-2 default)"},
    {"aura-2-andromeda-en", "espeak:en-us+f2", "female, US"},
    {"aura-2-helena-en", "espeak:en-us+f3", "female, US"},
    {"aura-2-asteria-en", "slt", "female, US"},
    {"aura-2-luna-en", "espeak:en-us+f2", "female, US"},
    {"aura-2-athena-en", "espeak:en-gb+f4", "female, US"},
    {"aura-2-hera-en", "espeak:en-us+f5", "female, US"},
    {"aura-2-apollo-en", "rms", "male, US"},
    {"aura-2-arcas-en", "kal16", "male, US"},
    {"aura-2-aries-en", "espeak:en-us+m3", "male, US"},
    {"aura-2-atlas-en", "awb", "male, US"},
    {"aura-2-orion-en", "rms", "male, US"},
    {"aura-2-orpheus-en", "espeak:en-us+m1", "male, US"},
    {"aura-2-zeus-en", "espeak:en-us+m7", "male, US"},
    {"aura-2-odysseus-en", "espeak:en-us+m2", "male, US"},
    {"aura-2-draco-en", "espeak:en-gb+m3", "male, UK"},
    {"aura-2-pandora-en", "espeak:en-gb+f3", "female, UK"},
    /* Deepgram Aura-2, Spanish */
    {"aura-2-celeste-es", "espeak:es-419+f3", "female, Latin American Spanish"},
    {"aura-2-estrella-es", "espeak:es-419+f2", "female, Latin American Spanish"},
    {"aura-2-nestor-es", "espeak:es+m3", "male, Spanish"},
};

size_t tts_vendor_n(void) { return ARRAY_LEN(VENDOR); }
const tts_vendor_voice *tts_vendor_at(size_t i) { return i < ARRAY_LEN(VENDOR) ? &VENDOR[i] : NULL; }

const char *tts_vendor_lookup(const char *name, char *scratch, size_t cap) {
  if (!name) return NULL;
  for (size_t i = 0; i < ARRAY_LEN(VENDOR); i++)
    if (strcasecmp(name, VENDOR[i].vendor_name) == 0) return VENDOR[i].local;
  /* The rule for other Deepgram names: aura-<voice>-<lang> and
   * aura-2-<voice>-<lang>; English goes to the default voice, other
   * languages to espeak-ng's voice for the language. */
  if (strncasecmp(name, "aura-", 5) != 0) return NULL;
  const char *lang = strrchr(name, '-');
  if (!lang || lang == name + 4) return NULL;
  lang++;
  size_t n = strlen(lang);
  if (n < 2 || n > 8) return NULL;
  if (strcasecmp(lang, "en") == 0) return "slt";
  int w = snprintf(scratch, cap, "espeak:%s", lang);
  if (w < 0 || (size_t)w >= cap) return NULL;
  return scratch;
}
