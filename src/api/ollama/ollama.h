/*
 * ollama.h - the Ollama dialect (../shared/specs/ollama.md): /api/version,
 * /api/tags, /api/ps, /api/show, /api/generate, /api/chat, /api/embed,
 * /api/embeddings, /api/copy, /api/delete, /api/create, /api/blobs/:digest,
 * /api/pull, /api/push, /api/status. GET|HEAD / lives in api/admin.
 *
 * A thin translation onto the canonical generation layer (api/gen.h):
 * Ollama JSON (options, think, format, keep_alive, messages with images and
 * tool calls) becomes gen_params and canonical messages; the NDJSON sink in
 * generate.c renders canonical events as Ollama records (deltas, then one
 * `done: true` record with the timings in nanoseconds).
 *
 * Models Ollama clients make (copy, create) are kept in an "overlay":
 * data_dir/ollama/models.json names each one, with what it resolves to (an
 * alias of another model, or a GGUF file registered as an explicit model)
 * and its SYSTEM, TEMPLATE, PARAMETER and MESSAGE settings. It is loaded at
 * start and re-registered with the model registry, so the other dialects
 * see the same names. Uploaded blobs live in data_dir/ollama/blobs as
 * sha256-<hex>, as Ollama names them.
 *
 * Threads: handlers run on HTTP pool threads; the overlay is guarded by the
 * context's mutex; streams run on gen_run's producer thread.
 */
#ifndef PARLEY_API_OLLAMA_H
#define PARLEY_API_OLLAMA_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/gen.h"
#include "api/request.h"
#include "engine/manager.h"
#include "http/http.h"
#include "model/pull.h"
#include "model/registry.h"

/* The Ollama version /api/version reports. Clients gate features on it
 * (Codex's --oss mode refuses anything before 0.13.4; think levels, tools),
 * so it is the release of the Ollama tree ../shared/specs/ollama.md was
 * written from (August 2026): the routes and fields this dialect implements
 * are that release's, "max" think level and /api/status included. */
#define OLLAMA_VERSION "0.32.8"

typedef struct ollama_ctx {
  registry *reg;
  manager *mgr;
  puller *puller;          /* downloads (/api/pull, /api/delete of pulled
                              models); NULL: pull answers 501 */
  _Atomic int n_pull_streams; /* pull progress threads alive */
  char *dir;               /* data_dir/ollama */
  char *blob_dir;          /* data_dir/ollama/blobs */
  char *overlay_path;      /* data_dir/ollama/models.json */
  pthread_mutex_t lock;    /* guards overlay and the file */
  json_t *overlay;         /* {"models": [{name, from|path, system, template,
                              parameters, messages, modified_at}]} */
  pthread_mutex_t info_lock;
  json_t *info_cache;      /* digest -> {"params": n, "embd": n} from GGUF headers */
} ollama_ctx;

/* Prepares the data directory and loads the overlay, registering its
 * models with reg (refreshing it when a file model was added). Problems
 * with single entries are logged, not fatal. */
int ollama_init(ollama_ctx *c, registry *reg, manager *mgr, const char *data_dir);
void ollama_free(ollama_ctx *c);
size_t ollama_routes(ollama_ctx *c, const http_route **out);

/* ---- common.c ---------------------------------------------------------- */

/* 200/any status JSON with "application/json; charset=utf-8". */
void ollama_json(http_req *req, int status, const json_t *v);
/* {"error": printf(...)} with status. */
void ollama_err(http_req *req, int status, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* RFC 3339 UTC with nanoseconds ("2026-01-02T03:04:05.123456789Z"). */
void ollama_time(int64_t wall_ns, char *out, size_t cap);
int64_t ollama_now_ns(void);

/* The Ollama name grammar: [host/][namespace/]model[:tag]. */
bool ollama_name_valid(const char *name);

/* The name to give the registry/manager: an overlay model's stored name
 * ("mycopy" -> "mycopy:latest"), else name itself; written into out. */
const char *ollama_resolve(ollama_ctx *c, const char *name, char *out, size_t cap);
/* The body as a JSON object; an empty body is 400 `missing request body`. */
json_t *ollama_body(http_req *req);
/* registry.ollama.ai/library/NAME:latest as Ollama spells a model in
 * capability errors. */
void ollama_full_name(const char *name, char *out, size_t cap);

/* A copy of the overlay entry for name (case-insensitive, ":latest"
 * tried), or NULL. */
json_t *ollama_overlay_get(ollama_ctx *c, const char *name);

/* The field readers below are pure: they return 0 or an ERR_* code with
 * err_detail() in Ollama's words, and the handler answers it once with
 * ollama_answer (400, or 500 out of memory; returns rc). */
int ollama_answer(http_req *req, int rc);
/* Sampling options into g (already initialised with Ollama's defaults by
 * ollama_params_init). Unknown keys are ignored; a known key of the wrong
 * type is `option "k" must be of type T`. */
void ollama_params_init(gen_params *g);
int ollama_options(const json_t *options, gen_params *g);
/* format: null/"" none, "json", or a schema object. */
int ollama_format(const json_t *format, gen_params *g);
/* think: absent -1, false 0, true or a level 1, the level ("max" is
 * high, as Ollama maps it for gpt-oss) in *effort. */
int ollama_think(const json_t *think, int *out, enum gen_effort *effort);
/* keep_alive: absent false; number seconds / duration string; -1 forever
 * (ms < 0). */
int ollama_keep_alive(const json_t *v, bool *set, int64_t *ms);
/* stream: absent/null true (Ollama's default). */
int ollama_stream(const json_t *body, bool *stream);

/* Capability names of an entry's caps, Ollama spelling. */
json_t *ollama_capabilities(uint32_t caps, bool executable);
/* {parent_model, format, family, families, parameter_size,
 * quantization_level, context_length?, embedding_length?}. */
json_t *ollama_details(ollama_ctx *c, const registry_entry *e);
/* The 64-hex digest shown for an entry. */
void ollama_digest_hex(const registry_entry *e, char out[65]);

/* Standard base64 check (what Go's []byte decoding accepts). */
bool ollama_base64_valid(const char *s, size_t len);

/* ---- keep-alive and loading (keepalive.c) --------------------------------- */

/* manager_get with the request's keep-alive. */
int ollama_model_get(ollama_ctx *c, const char *name, bool ka_set, int64_t ka_ms, manager_model **out);
/* Unloads name when loaded (Ollama's keep_alive 0 with nothing to do). */
void ollama_model_unload(ollama_ctx *c, const char *name);

/* ---- generation (generate.c) --------------------------------------------- */

enum ollama_kind { OLLAMA_GENERATE, OLLAMA_CHAT };

typedef struct ollama_run {
  enum ollama_kind kind;
  const char *model;        /* echoed as given */
  bool stream;
  bool context;             /* generate, not raw: return context */
  bool logprobs;
  bool think_off;           /* think:false: no `thinking` at all */
  int32_t top_logprobs;
  uint64_t t0_ns;           /* the request began (monotonic) */
  uint64_t load_ns;         /* time spent getting the model */
} ollama_run;

/* Runs ids through gen_run with the Ollama renderer. Takes the manager
 * reference and g's contents. */
void ollama_generate_run(http_req *req, manager_model *mm, gen_params *g, const tok_ids *ids,
                         const outparse_config *pc, const ollama_run *run);
/* The load / unload answer of an empty generate or chat. */
void ollama_answer_load(http_req *req, enum ollama_kind kind, const char *model, const char *reason);
/* `_debug_render_only`: answers the rendered prompt (ids decoded with
 * their special tokens) instead of generating; false when not asked. */
bool ollama_debug_render(http_req *req, const json_t *body, const manager_model *mm, enum ollama_kind kind,
                         const char *name, const tok_ids *ids);
/* 404 `model 'NAME' not found` (or a manager error). */
void ollama_error_manager(http_req *req, int rc, const char *name);
/* logprobs / top_logprobs (0..20, checked before the model is looked up,
 * as Ollama does). Pure, as the readers above. */
int ollama_logprobs_fields(const json_t *body, bool *lp, int32_t *top);

/* ---- chat (chat.c) ------------------------------------------------------- */

/* POST /api/chat's body into the canonical request (api/request.h), pure:
 * model (required, Ollama's name grammar), messages (canonical: roles
 * lower-cased, thinking as reasoning_content, tool calls OpenAI-shaped with
 * ids, tool results linked to their call), tools, stream, think,
 * keep_alive (into ttl_ms: GEN_TTL_NONE absent, -1 forever), format,
 * options, logprobs. An empty or absent messages array leaves
 * out->messages NULL (a load or unload). Errors in Ollama's words, which
 * name their field. */
int ollama_chat_parse(const json_t *body, gen_request *out);

/* ---- Go template subset (gotmpl.c) --------------------------------------- */

/* Renders an Ollama (Go text/template) prompt template with .System,
 * .Prompt, .Suffix, .Response; supports {{ .X }}, {{ if .X }} ... {{ else }}
 * ... {{ end }}, trim markers and comments. ERR_PARSE naming the action. */
int ollama_gotmpl_render(const char *tmpl, const char *system, const char *prompt, const char *suffix, buf *out);

/* ---- sha256.c ----------------------------------------------------------- */
typedef struct ollama_sha256 {
  uint32_t h[8];
  uint64_t n;
  uint8_t block[64];
  size_t used;
} ollama_sha256;
void ollama_sha256_init(ollama_sha256 *s);
void ollama_sha256_update(ollama_sha256 *s, const void *data, size_t len);
void ollama_sha256_hex(ollama_sha256 *s, char out[65]);
int ollama_sha256_file(const char *path, char out[65]);

/* ---- handlers ------------------------------------------------------------ */
void ollama_version(http_req *req, void *ctx);
void ollama_status(http_req *req, void *ctx);
void ollama_tags(http_req *req, void *ctx);
void ollama_ps(http_req *req, void *ctx);
void ollama_show(http_req *req, void *ctx);
void ollama_generate(http_req *req, void *ctx);
void ollama_chat(http_req *req, void *ctx);
void ollama_embed(http_req *req, void *ctx);
void ollama_embeddings(http_req *req, void *ctx);
void ollama_copy(http_req *req, void *ctx);
void ollama_delete(http_req *req, void *ctx);
void ollama_create(http_req *req, void *ctx);
void ollama_blob_head(http_req *req, void *ctx);
void ollama_blob_post(http_req *req, void *ctx);
void ollama_pull(http_req *req, void *ctx);
void ollama_push(http_req *req, void *ctx);

#endif
