/*
 * lmstudio.h - the LM Studio dialect (docs/lmstudio.md, wire facts in
 * ../shared/specs/lmstudio.md):
 *
 *   REST v0  GET /api/v0/models, GET /api/v0/models/{model},
 *            POST /api/v0/chat/completions, /api/v0/completions,
 *            /api/v0/embeddings: OpenAI shapes plus `stats`, `model_info`
 *            and `runtime` (v0.c, models.c)
 *   REST v1  POST /api/v1/chat (stateful through the store, named SSE
 *            events chat.start .. chat.end: v1.c), GET /api/v1/models,
 *            POST /api/v1/models/load, /unload, /download,
 *            GET /api/v1/models/download/status[/{job_id}] (manage.c);
 *            the same v1 routes again under /lmstudio/v1/...
 *   GET /lmstudio-greeting (what the official SDK probes).
 *
 * A thin translation onto the canonical generation layer (api/gen.h): each
 * handler turns LM Studio JSON into gen_params and canonical messages, and
 * its own gen_sink renders the canonical events back.
 *
 * Errors: {"error":{"type","message","code"?,"param"?}} with type one of the
 * spec's v1 kinds (invalid_request, model_not_found, job_not_found,
 * not_implemented, internal_error, unknown); errors raised by shared code
 * (gen_run, the body parser) come through api_error's LM Studio column.
 */
#ifndef PARLEY_API_LMSTUDIO_H
#define PARLEY_API_LMSTUDIO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/gen.h"
#include "api/openai/openai.h"
#include "engine/manager.h"
#include "http/http.h"
#include "model/pull.h"
#include "model/registry.h"
#include "store/store.h"

typedef struct lmstudio_ctx {
  registry *reg;
  manager *mgr;
  store *st;                    /* stateful v1 chats; NULL: nothing is stored */
  puller *pull;                 /* model downloads; NULL: 501 */
  /* private, set up by lmstudio_routes */
  openai_ctx oa;                /* v0 embeddings reuse the OpenAI handler */
} lmstudio_ctx;

/* Fills lctx's private part and returns the route table (every entry's ctx
 * is lctx). The dialect keeps nothing between requests: instances live in
 * the manager, conversations in the store. */
size_t lmstudio_routes(lmstudio_ctx *lctx, const http_route **out);

/* ---- shared by the handlers (common.c) --------------------------------- */

/* Answers {"error":{type, message, code?, param?}} with status. code and
 * param may be NULL (left out). */
void lms_error(http_req *req, int status, const char *type, const char *code, const char *param,
               const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The error object itself (for SSE error events); NULL on allocation
 * failure. */
json_t *lms_error_object(const char *type, const char *code, const char *param, const char *message);
/* Answers a manager_get failure: 404 model_not_found, 400 for a model the
 * runtime cannot run, else the code's status. */
void lms_error_manager(http_req *req, int rc);

/* "publisher" of a registry name: the owner segment ("org/x" -> "org",
 * "hf.co/owner/repo:Q" -> "owner"), else "parley". Writes into out. */
void lms_publisher(const char *name, char *out, size_t cap);
/* v0 type: "llm", "vlm" or "embeddings". */
const char *lms_v0_type(const registry_entry *e);
bool lms_is_embedding(const registry_entry *e);

/* What is loaded now (manager_list_loaded): the context of a loaded
 * instance of model `name` (0 when none is loaded). */
int64_t lms_loaded_ctx(lmstudio_ctx *lc, const char *name);
/* The loaded instances of name: [{id, config:{context_length, parallel}}]. */
json_t *lms_loaded_instances(lmstudio_ctx *lc, const char *name);

/* stats.stop_reason in the SDK's camelCase vocabulary for a choice. */
const char *lms_stop_reason(const gen_choice *c, int64_t max_tokens);
/* model_info {arch, quant, format, context_length} and runtime {name,
 * version, supported_formats} of a loaded model. */
json_t *lms_model_info(const manager_model *mm);
json_t *lms_runtime(void);
/* Seconds between two monotonic stamps (0 when either is 0). */
double lms_seconds(uint64_t from_ns, uint64_t to_ns);
/* stats' generation time and rate, on the engine's clock: seconds from the
 * first sampled token to the last, and the tokens sampled after the first
 * per second of it (0 and 0 for an answer of one token: no rate was
 * measured). Never the handler's wake-up times, which for a short answer
 * are microseconds apart whatever the engine took. */
void lms_gen_timing(const gen_result *r, double *gen_s, double *tokens_per_s);

/* ---- handlers ------------------------------------------------------------ */
void lms_greeting(http_req *req, void *ctx);
void lms_v0_models_list(http_req *req, void *ctx);
void lms_v0_models_get(http_req *req, void *ctx);
void lms_v0_chat(http_req *req, void *ctx);
struct gen_request;
/* The canonical requests of /api/v0/chat/completions and
 * /api/v0/completions bodies (api/request.h): the OpenAI parsers plus
 * LM Studio's fields. Pure; errors as request.h says. */
int lms_v0_chat_parse(const json_t *body, struct gen_request *r);
int lms_v0_completion_parse(const json_t *body, struct gen_request *r);
void lms_v0_completions(http_req *req, void *ctx);
void lms_v0_embeddings(http_req *req, void *ctx);
void lms_v1_models(http_req *req, void *ctx);
void lms_v1_chat(http_req *req, void *ctx);
void lms_v1_load(http_req *req, void *ctx);
void lms_v1_unload(http_req *req, void *ctx);
void lms_v1_download(http_req *req, void *ctx);
void lms_v1_download_status(http_req *req, void *ctx);

#endif
