/*
 * speak.h - the output-format rules of Deepgram's /speak, shared by the
 * REST handler (speak.c) and the WebSocket one (speak_ws.c).
 */
#ifndef PARLEY_API_DEEPGRAM_SPEAK_H
#define PARLEY_API_DEEPGRAM_SPEAK_H

#include <stdbool.h>
#include <stdint.h>

#include "api/deepgram/deepgram.h"

typedef struct dg_speak_format {
  char encoding[16];        /* as requested: linear16, mulaw, alaw, mp3, opus, flac, aac */
  enum audio_format format; /* what the encoder writes */
  bool wav;                 /* container=wav */
  bool g711_wav;            /* mu-law / A-law in a WAV container: header written by us */
  int sample_rate;
  int bit_rate;             /* 0 = encoder default */
  double speed;
  char content_type[48];
} dg_speak_format;

/* Reads encoding, container, sample_rate, bit_rate and speed from the query
 * with Deepgram's defaults and allowed combinations (the socket allows only
 * raw linear16/mulaw/alaw). Answers 400 naming the parameter and returns
 * nonzero when a value is not allowed. */
int dg_speak_format_parse(http_req *req, bool websocket, dg_speak_format *f);

/* The voice of the `model` query (default aura-asteria-en); 400 naming it
 * when unknown. *model_out is the name as requested. */
int dg_speak_voice(http_req *req, tts *t, tts_choice *c, const char **model_out);

#define DG_G711_WAV_HEADER 46
void dg_g711_wav_header(const dg_speak_format *f, uint8_t out[DG_G711_WAV_HEADER]);

#endif
