/*
 * unimplemented.h - the OpenAI API's full list of operations (from the
 * spec's paths), the 501 fallback route table built from it, and the path
 * aliases (no /v1 prefix, doubled /v1/v1 prefix) of every OpenAI route.
 * See unimplemented.c and docs/openai.md, "The whole surface".
 */
#ifndef PARLEY_API_OPENAI_UNIMPLEMENTED_H
#define PARLEY_API_OPENAI_UNIMPLEMENTED_H

#include <stddef.h>

#include "http/http.h"

/* The error code of every 501 answer. */
#define OPENAI_NOT_IMPLEMENTED_CODE "not_implemented_local"

/* One operation of the spec; path is relative to the /v1 base, with
 * {param} templates ("/files/{file_id}/content"). */
typedef struct openai_op {
  const char *method;
  const char *path;
  const char *operation; /* the spec's operationId */
} openai_op;

/* The spec's operations (281 distinct method+path pairs). */
size_t openai_ops(const openai_op **out);
/* The 501 table: one HTTP_ROUTE_FALLBACK | HTTP_BODY_IGNORE route per
 * operation, pattern "/v1" + path, named by the operationId. Static; 0 on
 * an internal error (a path too long for the pattern buffer). */
size_t openai_unimplemented_routes(const http_route **out);
/* The distinct first segments of the operations' paths ("/chat", "/models",
 * ...): the prefixes that get the no-/v1 and /v1/v1 aliases. */
size_t openai_path_prefixes(const char *const **out);
/* Adds the 501 table and, for each prefix P, the aliases P -> /v1P and
 * /v1/v1P -> /v1P to srv (before http_server_start). */
int openai_surface_install(http_server *srv);

#endif
