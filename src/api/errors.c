/*
 * errors.c - the dialect table (one row per dialect: the path prefixes it
 * owns, the headers that claim a request for it elsewhere, its error body
 * writer, its per-response headers, its overloaded status) and one table
 * that maps (dialect, status) to each vendor's error type names.
 *
 * Shapes come from ../shared/specs: OpenAI {"error":{message,type,param,code}};
 * Anthropic {"type":"error","error":{type,message},"request_id"}; Ollama
 * {"error":"..."} (plain text "404 page not found" / "405 method not allowed"
 * for unknown routes, as gin answers); LM Studio {"error":{message,type,param,
 * code}} (the object form, which both its native and OpenAI-style clients
 * read); Deepgram {"err_code","err_msg","request_id"} plus category/message.
 * The admin routes use the OpenAI shape.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/anthropic/anthropic.h"
#include "api/api.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

static bool path_has_prefix(const char *path, const char *prefix) {
  size_t n = strlen(prefix);
  return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Requests a dialect's clients send to paths another dialect owns, known by
 * their headers. */
static bool anthropic_sniff(const http_req *req) { return http_req_header(req, "anthropic-version") != NULL; }
/* The Deepgram SDKs, based at the server root, share /v1/models with
 * OpenAI: every request of theirs carries a session id, and a key in
 * Deepgram's own scheme (no other dialect's SDK sends "Token"). */
static bool deepgram_sniff(const http_req *req) {
  const char *authz = http_req_header(req, "Authorization");
  return http_req_header(req, "x-deepgram-session-id") || (authz && strncasecmp(authz, "token ", 6) == 0);
}

int api_status_for(int code) {
  switch (code) {
    case ERR_PARSE: case ERR_INVALID: case ERR_TYPE: case ERR_RANGE: case ERR_CONTEXT: case ERR_CORRUPT:
      return 400;
    case ERR_AUTH: return 401;
    case ERR_FORBIDDEN: return 403;
    case ERR_NOT_FOUND: return 404;
    case ERR_METHOD: return 405;
    case ERR_CONFLICT: case ERR_EXISTS: return 409;
    case ERR_TOO_LARGE: return 413;
    case ERR_OVERLOADED: return 429;
    case ERR_CANCELLED: return 499;
    case ERR_UNSUPPORTED: return 501;
    case ERR_UNAVAILABLE: return 503;
    case ERR_TIMEOUT: return 504;
    default: return 500;
  }
}

/* Error type strings per status, one column per dialect that has them. */
struct status_types {
  int status;
  const char *openai, *openai_code, *anthropic, *lmstudio, *deepgram;
};
static const struct status_types STATUS_TYPES[] = {
    {400, "invalid_request_error", NULL, "invalid_request_error", "invalid_request", "Bad Request"},
    {401, "invalid_request_error", "invalid_api_key", "authentication_error", "invalid_request", "INVALID_AUTH"},
    {403, "permission_error", NULL, "permission_error", "invalid_request", "INSUFFICIENT_PERMISSIONS"},
    {404, "invalid_request_error", NULL, "not_found_error", "invalid_request", "NOT_FOUND"},
    {405, "invalid_request_error", NULL, "invalid_request_error", "invalid_request", "Bad Request"},
    {409, "invalid_request_error", NULL, "invalid_request_error", "invalid_request", "Bad Request"},
    {413, "invalid_request_error", "request_too_large", "request_too_large", "invalid_request", "PAYLOAD_TOO_LARGE"},
    {429, "requests", "rate_limit_exceeded", "rate_limit_error", "internal_error", "TOO_MANY_REQUESTS"},
    {499, "invalid_request_error", NULL, "invalid_request_error", "invalid_request", "Bad Request"},
    {501, "server_error", "not_implemented", "api_error", "not_implemented", "NOT_IMPLEMENTED"},
    {503, "server_error", "engine_overloaded", "overloaded_error", "internal_error", "SERVICE_UNAVAILABLE"},
    {504, "server_error", "timeout", "timeout_error", "internal_error", "TIMEOUT"},
    {529, "server_error", "engine_overloaded", "overloaded_error", "internal_error", "SERVICE_UNAVAILABLE"},
};
static const struct status_types STATUS_DEFAULT_4XX = {400, "invalid_request_error", NULL, "invalid_request_error",
                                                       "invalid_request", "Bad Request"};
static const struct status_types STATUS_DEFAULT_5XX = {500, "server_error", NULL, "api_error", "internal_error",
                                                       "INTERNAL_SERVER_ERROR"};

static const struct status_types *types_for(int status) {
  for (size_t i = 0; i < ARRAY_LEN(STATUS_TYPES); i++)
    if (STATUS_TYPES[i].status == status) return &STATUS_TYPES[i];
  return status >= 500 ? &STATUS_DEFAULT_5XX : &STATUS_DEFAULT_4XX;
}

/* OpenAI-style codes that say more than the status does. */
static const char *openai_code_for(int code, const struct status_types *t) {
  switch (code) {
    case ERR_CONTEXT: return "context_length_exceeded";
    case ERR_UNSUPPORTED: return "unsupported_parameter";
    case ERR_RANGE: return "invalid_value";
    default: return t->openai_code;
  }
}

/* A retry helps only for these statuses; everything else is deterministic. */
static bool retry_can_help(int status) {
  return status == 408 || status == 409 || status == 429 || status == 503 || status == 504 || status == 529;
}

/* Deepgram's request_id is a UUID: format the first 16 bytes of our
 * req_<32 hex> id as one so the body and dg-request-id agree. */
static void deepgram_request_uuid(const http_req *req, char out[37]) {
  const char *id = http_req_id(req);
  const char *hex = strncmp(id, "req_", 4) == 0 ? id + 4 : id;
  size_t o = 0;
  for (size_t i = 0; i < 32 && hex[i]; i++) {
    if (i == 8 || i == 12 || i == 16 || i == 20) out[o++] = '-';
    out[o++] = hex[i];
  }
  out[o] = '\0';
}

static json_t *json_str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

/* "Overloaded" (ERR_OVERLOADED: an engine's queue is full, or busy models
 * hold the memory a load needs) in each dialect's own words:
 *   Ollama     503 {"error":"server busy, please try again.  maximum pending
 *              requests exceeded"} (its scheduler's queue-full answer, two
 *              spaces included; specs/ollama.md 0.3, check 34);
 *   OpenAI, LM Studio (OpenAI-style clients), Deepgram: 429 (RateLimitError,
 *              retried; OpenAI type "requests", code rate_limit_exceeded);
 *   Anthropic  429 rate_limit_error ("local concurrency/queue limits" in
 *              specs/anthropic.md 1.3; 529 is for a model still loading).
 * Every one carries retry-after: 1 and retry-after-ms: 1000 (read first by
 * the OpenAI and Anthropic SDKs). */
#define OLLAMA_BUSY "server busy, please try again.  maximum pending requests exceeded"

/* ---- the dialect table ------------------------------------------------------ */

/* Each dialect's error body for a status's type names t, an internal code,
 * the message and the JSON path (or NULL). */
/* OpenAI's error object, with the type name of the dialect's column. */
static json_t *openai_shaped(const char *type, const struct status_types *t, int code, const char *msg,
                             const char *param) {
  return json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", msg, "type", type, "param",
                   json_str_or_null(param), "code", json_str_or_null(openai_code_for(code, t)));
}

static json_t *openai_body(const http_req *req, const struct status_types *t, int code, const char *msg,
                           const char *param) {
  (void)req;
  return openai_shaped(t->openai, t, code, msg, param);
}

static json_t *anthropic_body(const http_req *req, const struct status_types *t, int code, const char *msg,
                              const char *param) {
  (void)code, (void)param;
  return json_pack("{s:s, s:{s:s, s:s}, s:s}", "type", "error", "error", "type", t->anthropic, "message", msg,
                   "request_id", http_req_id(req));
}

static json_t *ollama_body(const http_req *req, const struct status_types *t, int code, const char *msg,
                           const char *param) {
  (void)req, (void)t, (void)code, (void)param;
  return json_pack("{s:s}", "error", msg);
}

static json_t *lmstudio_body(const http_req *req, const struct status_types *t, int code, const char *msg,
                             const char *param) {
  (void)req;
  return openai_shaped(t->lmstudio, t, code, msg, param);
}

static json_t *deepgram_body(const http_req *req, const struct status_types *t, int code, const char *msg,
                             const char *param) {
  (void)code, (void)param;
  char uuid[37];
  deepgram_request_uuid(req, uuid);
  return json_pack("{s:s, s:s, s:s, s:s, s:s}", "err_code", t->deepgram, "err_msg", msg, "category", t->deepgram,
                   "message", msg, "request_id", uuid);
}

/* Each dialect's own headers on every response. */
static void anthropic_decorate(http_req *req) { http_resp_header(req, "request-id", http_req_id(req)); }

static void deepgram_decorate(http_req *req) {
  char uuid[37];
  deepgram_request_uuid(req, uuid);
  http_resp_header(req, "dg-request-id", uuid);
}

static void openai_decorate(http_req *req) {
  http_resp_header(req, "openai-version", "2020-10-01");
  http_resp_timing_header(req, "openai-processing-ms");
}

/* A prompt that does not fit the context, in each vendor's own words
 * (clients match them: Claude Code recognises only Anthropic's and then
 * compacts the conversation instead of retrying):
 *   Anthropic  "prompt is too long: N tokens > M maximum" (M the most the
 *              prompt may hold: the context less the one token a reply needs);
 *   Ollama     "the input length exceeds the context length" (its runner's
 *              words, specs/ollama.md 2.12);
 *   OpenAI and the OpenAI-shaped dialects: the Chat Completions sentence
 *              with the model's context and the prompt's size, or for a
 *              Responses "input" the Responses one; the code is
 *              context_length_exceeded either way (openai_code_for). */
static void anthropic_context(const char *param, int64_t n_prompt, int64_t n_ctx, char *out, size_t cap) {
  (void)param;
  snprintf(out, cap, "prompt is too long: %lld tokens > %lld maximum", (long long)n_prompt, (long long)(n_ctx - 1));
}

static void ollama_context(const char *param, int64_t n_prompt, int64_t n_ctx, char *out, size_t cap) {
  (void)param, (void)n_prompt, (void)n_ctx;
  snprintf(out, cap, "the input length exceeds the context length");
}

static void openai_context(const char *param, int64_t n_prompt, int64_t n_ctx, char *out, size_t cap) {
  if (param && strcmp(param, "input") == 0)
    snprintf(out, cap, "Your input exceeds the context window of this model. Please adjust your input and try "
             "again. (The input is %lld tokens; the model's context holds %lld.)", (long long)n_prompt,
             (long long)n_ctx);
  else
    snprintf(out, cap, "This model's maximum context length is %lld tokens. However, your %s resulted in %lld "
             "tokens. Please reduce the length of the %s.", (long long)n_ctx,
             param && strcmp(param, "prompt") == 0 ? "prompt" : "messages", (long long)n_prompt,
             param && strcmp(param, "prompt") == 0 ? "prompt" : "messages");
}

/* One row per dialect: what api_dialect_of, api_error, api_context_message
 * and api_http_decorate read. A new dialect is one row (and its enum value). */
struct dialect_row {
  const char *name;
  const char *const *prefixes; /* path prefixes it owns, NULL-terminated ("/": the root alone) */
  bool (*sniff)(const http_req *req); /* or a request its clients send elsewhere, by header; may be NULL */
  json_t *(*error_body)(const http_req *req, const struct status_types *t, int code, const char *msg,
                        const char *param);
  void (*decorate)(http_req *req); /* may be NULL */
  /* a prompt past the context, in its own words (param: the request field) */
  void (*context_message)(const char *param, int64_t n_prompt, int64_t n_ctx, char *out, size_t cap);
  int overloaded_status;           /* ERR_OVERLOADED's status */
  const char *overloaded_message;  /* ... and its own words, or NULL (a
                                      message that starts with its first
                                      11 bytes, "server busy", is kept) */
  bool plain_unknown_route;        /* unknown routes answer gin's plain text */
};

static const char *const DEEPGRAM_PREFIXES[] = {"/deepgram", "/v1/listen", "/v1/speak", "/v1/read", NULL};
static const char *const LMSTUDIO_PREFIXES[] = {"/api/v0", "/api/v1", "/lmstudio", "/lmstudio-greeting", NULL};
static const char *const OLLAMA_PREFIXES[] = {"/api", "/", NULL};
static const char *const ADMIN_PREFIXES[] = {"/admin", "/health", "/metrics", NULL};
static const char *const ANTHROPIC_PREFIXES[] = {"/v1/messages", NULL};
static const char *const NO_PREFIXES[] = {NULL};

static const struct dialect_row ROWS[API_DIALECT_COUNT] = {
    [API_DIALECT_OPENAI] = {"openai", NO_PREFIXES, NULL, openai_body, openai_decorate, openai_context, 429, NULL,
                            false},
    [API_DIALECT_ANTHROPIC] = {"anthropic", ANTHROPIC_PREFIXES, anthropic_sniff, anthropic_body, anthropic_decorate,
                               anthropic_context, 429, NULL, false},
    [API_DIALECT_OLLAMA] = {"ollama", OLLAMA_PREFIXES, NULL, ollama_body, NULL, ollama_context, 503, OLLAMA_BUSY,
                            true},
    [API_DIALECT_LMSTUDIO] = {"lmstudio", LMSTUDIO_PREFIXES, NULL, lmstudio_body, NULL, openai_context, 429, NULL,
                              false},
    [API_DIALECT_DEEPGRAM] = {"deepgram", DEEPGRAM_PREFIXES, deepgram_sniff, deepgram_body, deepgram_decorate,
                              openai_context, 429, NULL, false},
    [API_DIALECT_ADMIN] = {"admin", ADMIN_PREFIXES, NULL, openai_body, NULL, openai_context, 429, NULL, false},
};

/* Prefixes are tried first, in this order (LM Studio's /api/v0 before
 * Ollama's /api), then the header sniffs; OpenAI takes the rest. */
static const enum api_dialect BY_PREFIX[] = {API_DIALECT_DEEPGRAM, API_DIALECT_LMSTUDIO, API_DIALECT_OLLAMA,
                                             API_DIALECT_ADMIN, API_DIALECT_ANTHROPIC};
static const enum api_dialect BY_SNIFF[] = {API_DIALECT_ANTHROPIC, API_DIALECT_DEEPGRAM};

const char *api_dialect_name(enum api_dialect d) {
  return (unsigned)d < API_DIALECT_COUNT ? ROWS[d].name : "unknown";
}

enum api_dialect api_dialect_of(const http_req *req) {
  const char *p = http_req_path(req);
  while (p[0] == '/' && p[1] == '/') p++; /* tolerate repeated leading slashes */
  for (size_t i = 0; i < ARRAY_LEN(BY_PREFIX); i++)
    for (const char *const *pre = ROWS[BY_PREFIX[i]].prefixes; *pre; pre++)
      if (path_has_prefix(p, *pre)) return BY_PREFIX[i];
  for (size_t i = 0; i < ARRAY_LEN(BY_SNIFF); i++)
    if (ROWS[BY_SNIFF[i]].sniff(req)) return BY_SNIFF[i];
  return API_DIALECT_OPENAI;
}

int api_overloaded_status(enum api_dialect d) {
  return (unsigned)d < API_DIALECT_COUNT ? ROWS[d].overloaded_status : 429;
}

void api_error(http_req *req, int status, int code, const char *message, const char *param) {
  enum api_dialect d = api_dialect_of(req);
  if (code == ERR_OVERLOADED && (status == 0 || status == 429 || status == 503)) {
    status = api_overloaded_status(d);
    const char *own = ROWS[d].overloaded_message;
    if (own && (!message || strncmp(message, own, 11) != 0)) {
      if (message) LOG_INFO("api", "overloaded: %s", message);
      message = own;
    }
  }
  if (status == 0) status = api_status_for(code);
  if (!message) message = err_message(code);
  /* A message may quote client bytes (a bad query value) or be cut inside a
   * character by a '%.32s': jansson makes no string of bytes that are not
   * UTF-8, which would turn a 400 into a 500, so such bytes become U+FFFD. */
  char *clean_msg = utf8_valid(message, strlen(message)) ? NULL : str_utf8_lossy(message);
  char *clean_param = !param || utf8_valid(param, strlen(param)) ? NULL : str_utf8_lossy(param);
  if (clean_msg) message = clean_msg;
  if (clean_param) param = clean_param;
  const struct status_types *t = types_for(status);
  if (!retry_can_help(status)) http_resp_header(req, "x-should-retry", "false");
  if (status == 429 || status == 503 || status == 529) {
    http_resp_header(req, "retry-after", "1");
    http_resp_header(req, "retry-after-ms", "1000");
  }

  /* Ollama's router answers unknown routes in plain text, as gin does. */
  if (ROWS[d].plain_unknown_route && (status == 404 || status == 405) && http_req_route_name(req) == NULL) {
    const char *text = status == 404 ? "404 page not found" : "405 method not allowed";
    http_respond(req, status, "text/plain", text, strlen(text));
    free(clean_msg);
    free(clean_param);
    return;
  }
  json_t *body = ROWS[d].error_body(req, t, code, message, param);
  free(clean_msg);
  free(clean_param);
  if (!body) {
    static const char fallback[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}";
    http_respond(req, 500, "application/json", fallback, sizeof fallback - 1);
    return;
  }
  api_respond_json(req, status, body);
  json_decref(body);
}

void api_context_message(enum api_dialect d, const char *param, int64_t n_prompt, int64_t n_ctx, char *out,
                         size_t cap) {
  ROWS[(unsigned)d < API_DIALECT_COUNT ? d : API_DIALECT_OPENAI].context_message(param, n_prompt, n_ctx, out, cap);
}

void api_error_last(http_req *req, int code, const char *param) { api_error(req, 0, code, err_detail(), param); }

void api_http_on_error(http_req *req, int status, int code, const char *message, const char *param, void *ctx) {
  (void)ctx;
  /* an Anthropic cloud resource parley has no route for is not "Invalid URL" */
  if (status == 404 && code == ERR_NOT_FOUND && anthropic_cloud_answer(req)) return;
  api_error(req, status, code, message, param);
}

void api_http_decorate(http_req *req, void *ctx) {
  (void)ctx;
  const struct dialect_row *row = &ROWS[api_dialect_of(req)];
  if (row->decorate) row->decorate(req);
}

int api_respond_json(http_req *req, int status, const json_t *v) {
  char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (!s) {
    static const char fallback[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}";
    return http_respond(req, 500, "application/json", fallback, sizeof fallback - 1);
  }
  int rc = http_respond(req, status, "application/json", s, strlen(s));
  free(s);
  return rc;
}
