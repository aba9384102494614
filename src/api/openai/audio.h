/*
 * audio.h - the OpenAI audio routes (../shared/specs/openai.md section 6):
 * POST /v1/audio/transcriptions, POST /v1/audio/translations (501 while no
 * local backend translates), POST /v1/audio/speech and GET /v1/audio/voices,
 * on the local engines of speech/ (pocketsphinx, flite, espeak-ng) reached
 * through the shared speech service (api/speech_svc.h).
 *
 * Wiring (app/main.c): with an open api_speech *sp that outlives the server,
 *   const http_route *ar; size_t n_ar = openai_audio_routes(sp, &ar);
 *   http_server_add_routes(srv, ar, n_ar);
 * docs/speech.md traces one request through these handlers.
 */
#ifndef PARLEY_API_OPENAI_AUDIO_H
#define PARLEY_API_OPENAI_AUDIO_H

#include <stddef.h>

#include "api/speech_svc.h"
#include "http/http.h"

/* The route table; every entry's ctx is sp. */
size_t openai_audio_routes(api_speech *sp, const http_route **out);

#endif
