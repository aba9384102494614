/*
 * openai.h - the OpenAI dialect's model routes: GET /v1/models,
 * GET /v1/models/{model}, POST /v1/chat/completions, POST /v1/completions,
 * POST /v1/embeddings (docs/openai.md, "Chat, completions, models").
 *
 * The adapter turns OpenAI JSON into canonical engine requests (templated,
 * tokenized, sampling parameters checked with errors naming the JSON path)
 * and engine events back into OpenAI JSON or SSE chunks. Models come from
 * the registry (listing) and the manager (loaded on first use).
 *
 * Generation goes through the canonical layer (api/gen.h), which owns the
 * engine job and the stream's producer thread; this dialect only renders.
 */
#ifndef PARLEY_API_OPENAI_H
#define PARLEY_API_OPENAI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api.h"
#include "api/gen.h"
#include "api/request.h"
#include "engine/engine.h"
#include "engine/manager.h"
#include "http/http.h"
#include "model/pull.h"
#include "model/registry.h"

struct store;

typedef struct openai_ctx {
  registry *reg;
  manager *mgr;
  struct store *st;          /* responses and conversations */
  puller *pull;              /* DELETE /v1/models/{id} removes pulled models; may be NULL */
  struct api_speech *speech; /* its installed STT models join /v1/models; may be NULL */
} openai_ctx;

/* The route table; every entry's ctx points at octx. */
size_t openai_routes(openai_ctx *octx, const http_route **out);
/* Responses and Conversations (responses.c). */
size_t openai_responses_routes(openai_ctx *octx, const http_route **out);

/* ---- request field types (fields.c) ------------------------------------ */

enum openai_shape { OPENAI_SHAPE_CHAT, OPENAI_SHAPE_COMPLETION, OPENAI_SHAPE_EMBEDDING, OPENAI_SHAPE_COUNT };
/* The field-type table of a request shape (the fuzz harness checks with it). */
const api_field *openai_shape_fields(enum openai_shape shape, size_t *n);
/* Checks body's field types for shape; answers 400 naming the path and
 * returns the code on the first wrong one. */
int openai_check_fields(http_req *req, const json_t *body, enum openai_shape shape);

/* ---- shared by the handlers (common.c) --------------------------------- */

/* 404 with code "model_not_found" and param "model", in the OpenAI shape. */
void openai_error_model_not_found(http_req *req, const char *message);
/* Answers a manager_get failure: 404 model_not_found (an unknown name), 400
 * param "model" (no name with no default, an unsupported family), 500 (a
 * listed model whose file does not load, naming the file), ... */
void openai_error_manager(http_req *req, int rc);

/* Generation parameters common to chat and legacy completions: the
 * canonical parameters plus the OpenAI-only switches. */
typedef struct openai_gen {
  gen_params p;              /* sampling, limits, stop, bias, format */
  bool stream;
  bool include_usage;        /* stream_options.include_usage */
  bool logprobs;
  int32_t top_logprobs;
} openai_gen;

/* Parses and checks the sampling fields of body. chat selects the chat
 * spellings (max_completion_tokens, logprobs bool + top_logprobs,
 * response_format) over the legacy ones (logprobs int). On error answers 400
 * naming the field and returns the error code. */
int openai_gen_parse(http_req *req, const json_t *body, bool chat, const manager_model *mm, openai_gen *g);
void openai_gen_free(openai_gen *g);

/* "chatcmpl-" / "cmpl-" + 24 random hex digits into out (cap >= 40). */
void openai_make_id(char *out, size_t cap, const char *prefix);
/* engine finish -> "stop" | "length" (cancel/error give "stop"). */
const char *openai_finish_reason(enum engine_finish f);
/* One chat-style logprobs entry for a sampled token ({token, logprob, bytes,
 * top_logprobs}); NULL on allocation failure. */
json_t *openai_logprob_entry(const tok *t, const sample_result *r, int32_t n_top);
/* Writes one SSE data event of v (compact JSON); ERR_CANCELLED when gone. */
int openai_sse_json(http_stream *s, const json_t *v);

/* ---- handlers ------------------------------------------------------------ */
void openai_models_list(http_req *req, void *ctx);
void openai_models_get(http_req *req, void *ctx);
void openai_models_delete(http_req *req, void *ctx);
void openai_chat_completions(http_req *req, void *ctx);
/* The canonical request of a /v1/chat/completions body (request.h): field
 * types (fields.c), messages and tools copied into canonical form, tool
 * choice, thinking (reasoning_effort, chat_template_kwargs), the generation
 * prompt (add_generation_prompt, continue_final_message), sampling. Pure;
 * the server and `parley chat-template` both read a request through it. 0,
 * or an error (err_detail names it, out->param the JSON path at fault). */
int openai_chat_parse(const json_t *body, gen_request *out);
/* openai_chat_parse without the field-type table, on an initialised r: for
 * dialects whose chat bodies are OpenAI's plus their own fields (LM Studio
 * v0). */
int openai_chat_body(const json_t *body, gen_request *r);
/* The sampling fields (chat: the chat spellings max_completion_tokens,
 * logprobs bool + top_logprobs, response_format; else the legacy ones) into
 * r. Pure; n and logit_bias are checked against the model by
 * gen_request_bind. */
int openai_sampling_parse(const json_t *body, bool chat, gen_request *r);
void openai_completions(http_req *req, void *ctx);
void openai_embeddings(http_req *req, void *ctx);

#endif
