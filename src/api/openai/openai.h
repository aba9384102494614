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
 * Streams: each streaming request runs its producer on a small thread of its
 * own that blocks on engine_req_next and writes SSE events (a per-request
 * thread is the simple first form; a shared producer pool driven by the
 * engine's notify callback is later work). The producer polls the stream's
 * cancelled state between events and cancels the engine request when the
 * client goes away.
 */
#ifndef PARLEY_API_OPENAI_H
#define PARLEY_API_OPENAI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/manager.h"
#include "http/http.h"
#include "model/pull.h"
#include "model/registry.h"

typedef struct openai_ctx {
  registry *reg;
  manager *mgr;
  puller *pull;   /* DELETE /v1/models/{id} removes pulled models; may be NULL */
} openai_ctx;

/* The route table; every entry's ctx points at octx. */
size_t openai_routes(openai_ctx *octx, const http_route **out);

/* ---- shared by the handlers (common.c) --------------------------------- */

/* 404 with code "model_not_found" and param "model", in the OpenAI shape. */
void openai_error_model_not_found(http_req *req, const char *message);
/* Answers a manager_get failure (404 model_not_found, 501, 500...). */
void openai_error_manager(http_req *req, int rc);

/* Generation parameters common to chat and legacy completions. */
typedef struct openai_gen {
  engine_request er;         /* sample params, max_tokens, n, stop */
  char **stop;               /* owned copies for er.stop */
  size_t n_stop;
  sample_bias *bias;         /* owned, er.sample.bias */
  bool stream;
  bool include_usage;        /* stream_options.include_usage */
  bool logprobs;
  int32_t top_logprobs;
} openai_gen;

/* Parses and checks the sampling fields of body. chat selects the chat
 * spellings (max_completion_tokens, logprobs bool + top_logprobs) over the
 * legacy ones (logprobs int). On error answers 400 naming the field and
 * returns the error code. */
int openai_gen_parse(http_req *req, const json_t *body, bool chat, const manager_model *mm, openai_gen *g);
void openai_gen_free(openai_gen *g);

/* "chatcmpl-" / "cmpl-" + 24 random hex digits into out (cap >= 40). */
void openai_make_id(char *out, size_t cap, const char *prefix);
/* engine finish -> "stop" | "length" (cancel/error give "stop"). */
const char *openai_finish_reason(enum engine_finish f);
/* One chat-style logprobs entry for a sampled token ({token, logprob, bytes,
 * top_logprobs}); NULL on allocation failure. */
json_t *openai_logprob_entry(const tok *t, const sample_result *r, int32_t n_top);
/* Encodes text with special-token parsing and a leading BOS when the
 * vocabulary adds one and the text does not already start with it. */
int openai_tokenize_prompt(const tok *t, const char *text, size_t len, bool parse_special, tok_ids *out);
/* Writes one SSE data event of v (compact JSON); ERR_CANCELLED when gone. */
int openai_sse_json(http_stream *s, const json_t *v);

/* The generation driver (chat.c) for both endpoints: submits ids with g's
 * parameters and answers req, streaming or not. kind selects the response
 * shapes; for chat, parse (may be zeroed: plain text) configures the output
 * parser. echo (legacy, may be NULL) is prepended to each choice's text.
 * Takes ownership of nothing; g stays the caller's. */
enum openai_kind { OPENAI_KIND_CHAT, OPENAI_KIND_COMPLETION };
struct outparse_config;
void openai_generate(http_req *req, manager_model *mm, const char *model_label, openai_gen *g, const tok_ids *ids,
                     enum openai_kind kind, const struct outparse_config *parse, const char *echo);

/* Waits up to timeout_ms for every stream producer thread to end (they end
 * soon after the server cancels their streams); call before manager_free. */
void openai_wait_streams(int timeout_ms);

/* ---- handlers ------------------------------------------------------------ */
void openai_models_list(http_req *req, void *ctx);
void openai_models_get(http_req *req, void *ctx);
void openai_models_delete(http_req *req, void *ctx);
void openai_chat_completions(http_req *req, void *ctx);
void openai_completions(http_req *req, void *ctx);
void openai_embeddings(http_req *req, void *ctx);

#endif
