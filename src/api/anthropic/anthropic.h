/*
 * anthropic.h - the Anthropic Messages dialect (docs/anthropic.md):
 * POST /v1/messages (plain and SSE with named events),
 * POST /v1/messages/count_tokens, and the Anthropic shape of
 * GET /v1/models[/{id}] (the OpenAI handlers hand requests that carry an
 * anthropic-version header over to anthropic_models_list/_get, so both
 * vendors share the paths).
 *
 * A thin translation onto the canonical generation layer (api/gen.h):
 * request.c turns the Anthropic body into canonical chat messages, OpenAI-
 * shaped tools and gen_params; messages.c renders the layer's events as a
 * Message or its event stream; models.c lists the registry; cloud.c answers
 * the cloud-only resources (batches, files, ...) 501.
 */
#ifndef PARLEY_API_ANTHROPIC_H
#define PARLEY_API_ANTHROPIC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api/gen.h"
#include "api/request.h"
#include "engine/manager.h"
#include "http/http.h"
#include "model/registry.h"

typedef struct anthropic_ctx {
  registry *reg;
  manager *mgr;
} anthropic_ctx;

/* The route table (/v1/messages, /v1/messages/count_tokens); every entry's
 * ctx points at actx. /v1/models is routed by the OpenAI table. */
size_t anthropic_routes(anthropic_ctx *actx, const http_route **out);

/* GET /v1/models and GET /v1/models/{model} in the Anthropic shape. */
void anthropic_models_list(http_req *req, registry *reg);
void anthropic_models_get(http_req *req, registry *reg);

/* ---- cloud-only resources (cloud.c) -------------------------------------- */

/* True when path is at or under an Anthropic API resource parley does not
 * run (message batches, files, skills, agents, organizations, ...). */
bool anthropic_cloud_path(const char *path);
/* For an Anthropic client (api_dialect_of) on such a path: answers 501 in
 * Anthropic's shape and returns true; otherwise answers nothing and returns
 * false. Handlers of paths the dialects share call it first. */
bool anthropic_cloud_answer(http_req *req);

/* ---- request translation (request.c) ------------------------------------ */

/* One Messages request, translated: the canonical request (api/request.h;
 * model, messages, tools, chat, p, stream, one_call from
 * tool_choice.disable_parallel_tool_use, tool_name from tool_choice
 * {"type":"tool"}). */
typedef gen_request anthropic_req;

/* Translates body (an Anthropic Messages or count_tokens request; count
 * selects the latter: no max_tokens, no sampling fields read) into *out.
 * Pure: on failure returns ERR_INVALID/ERR_TYPE/ERR_RANGE/ERR_UNSUPPORTED
 * with err_detail() naming the JSON path ("messages[1].content[0].type:
 * ..."); out is then freed. */
int anthropic_req_parse(const json_t *body, bool count, anthropic_req *out);
void anthropic_req_free(anthropic_req *r);

/* ---- rendering helpers (messages.c) ------------------------------------- */

/* A thinking block's signature: an opaque, non-empty token derived from
 * its text ("parley:" + 16 hex digits). out holds >= 32 bytes. */
void anthropic_signature(const char *text, size_t len, char *out, size_t cap);
/* "call_<hex>" (the canonical id) -> "toolu_<hex>"; other ids are kept with
 * "toolu_" prepended. */
void anthropic_tool_id(const char *id, char *out, size_t cap);
/* engine finish + choice -> stop_reason. */
const char *anthropic_stop_reason(const gen_choice *c);
/* The error event's payload {"type":"error","error":{type,message}} for an
 * internal error code (the type follows the status api_status_for gives). */
json_t *anthropic_error_event(int code, const char *message);

#endif
