/*
 * api.h - what every dialect adapter shares: which dialect a request speaks,
 * the one place that turns an internal error into each dialect's error body
 * and status, and JSON helpers that name the JSON path of a bad field.
 *
 * Adapters (api/openai, api/anthropic, ...) own their route tables; this
 * file owns nothing but the mapping tables.
 */
#ifndef PARLEY_API_API_H
#define PARLEY_API_API_H

#include <jansson.h>
#include <stdbool.h>

#include "http/http.h"

enum api_dialect {
  API_DIALECT_OPENAI,
  API_DIALECT_ANTHROPIC,
  API_DIALECT_OLLAMA,
  API_DIALECT_LMSTUDIO,
  API_DIALECT_DEEPGRAM,
  API_DIALECT_ADMIN,
  API_DIALECT_COUNT
};

/* Decides the dialect from the path prefixes in errors.c's dialect table
 * and, for /v1 paths shared by OpenAI, Anthropic and Deepgram, the headers
 * their SDKs send (/v1/messages is always Anthropic); OpenAI takes the rest. */
enum api_dialect api_dialect_of(const http_req *req);
const char *api_dialect_name(enum api_dialect d);

/* Default HTTP status for an ERR_* code. */
int api_status_for(int code);
/* The status of ERR_OVERLOADED (queue full) in dialect d: 503 for Ollama,
 * 429 otherwise. api_error applies it (and Ollama's "server busy" text) to
 * every ERR_OVERLOADED answered with status 0, 429 or 503. */
int api_overloaded_status(enum api_dialect d);

/* Answers req with an error in its dialect. status 0 means api_status_for(code).
 * message names what is wrong; param is the offending field's JSON path or
 * NULL. Adds x-should-retry: false when a retry cannot help. */
void api_error(http_req *req, int status, int code, const char *message, const char *param);
/* The message for a prompt of n_prompt tokens that does not fit a context of
 * n_ctx positions (one is needed for the reply), in dialect d's own words;
 * param is the request field that holds the prompt ("messages", "prompt",
 * "input"). Answer it with code ERR_CONTEXT (400; OpenAI-shaped dialects add
 * code context_length_exceeded). */
void api_context_message(enum api_dialect d, const char *param, int64_t n_prompt, int64_t n_ctx, char *out,
                         size_t cap);
/* api_error with the calling thread's err_detail() as the message. */
void api_error_last(http_req *req, int code, const char *param);

/* http_config hooks: the layer's own errors and per-request headers. */
void api_http_on_error(http_req *req, int status, int code, const char *message, const char *param, void *ctx);
void api_http_decorate(http_req *req, void *ctx);

/* Writes v as compact JSON and answers with status. Steals nothing: the caller
 * still owns v. */
int api_respond_json(http_req *req, int status, const json_t *v);

/* Decodes bytes as one JSON object no deeper than 128 levels. Returns 0, or
 * ERR_PARSE (detail names line and column), ERR_TYPE (not an object) or
 * ERR_TOO_LARGE (too deep). Pure: the fuzz harness drives it directly. */
int api_json_decode_object(const char *body, size_t len, json_t **out);

/* Parses the request body as one JSON object. On failure answers 400 naming
 * the line and column (or "body must be a JSON object") and returns NULL. */
json_t *api_parse_body(http_req *req);

/* Typed field access that names the JSON path in errors. Each returns 0 when
 * the field has the right type, ERR_NOT_FOUND when absent or null (and not
 * required), or ERR_TYPE / ERR_INVALID with err_detail() like
 * "messages[2].content: expected string, got number". `path` is the object's
 * own path ("" for the top level). */
int api_json_str(const json_t *obj, const char *path, const char *key, bool required, const char **out);
/* api_json_str for text a model reads (message content, thinking): the
 * string may hold U+0000, as the vendors accept it there, so its length is
 * *len (api_json_str refuses a NUL: names, ids and enums never hold one). */
int api_json_text(const json_t *obj, const char *path, const char *key, bool required, const char **out,
                  size_t *len);
int api_json_int(const json_t *obj, const char *path, const char *key, bool required, long long *out);
int api_json_num(const json_t *obj, const char *path, const char *key, bool required, double *out);
int api_json_bool(const json_t *obj, const char *path, const char *key, bool required, bool *out);
/* The JSON type name used in messages: "string", "number", "object", ... */
const char *api_json_type_name(const json_t *v);

/* Field-type tables: one per request shape, one row per field a spec types,
 * checked in one pass before the handler reads the body, so a wrong type is
 * a 400 naming its JSON path and never a silently ignored field.
 *   path: dotted, from the body: "user", "stream_options.include_usage";
 *         "name[]" walks every element of an array, "name.*" every member of
 *         an object ("metadata.*", "messages[].tool_calls[].id").
 *   types: the API_T_* the field may hold; absent is always fine.
 *   lo, hi: when lo < hi, a number must lie in [lo, hi]. */
enum {
  API_T_STRING = 1u << 0,
  API_T_INT = 1u << 1,    /* an integer (a JSON number without fraction or exponent) */
  API_T_NUMBER = 1u << 2, /* any number */
  API_T_BOOL = 1u << 3,
  API_T_OBJECT = 1u << 4,
  API_T_ARRAY = 1u << 5,
  API_T_NULL = 1u << 6,
};
typedef struct api_field {
  const char *path;
  unsigned types;
  double lo, hi;
} api_field;
/* Checks body against fields. Returns 0, or ERR_TYPE / ERR_RANGE with
 * err_detail() "metadata.a: expected string, got number" and the concrete
 * path ("messages[2].name") in param (cap bytes). Pure. */
int api_json_check_fields(const json_t *body, const api_field *fields, size_t n, char *param, size_t cap);
/* api_json_check_fields answering a 400 in req's dialect; returns its code. */
int api_check_fields(http_req *req, const json_t *body, const api_field *fields, size_t n);

#endif
