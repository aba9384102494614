/*
 * admin.h - parley's own routes: liveness (GET|HEAD /, GET /health),
 * Prometheus metrics, and diagnostic routes that exercise the HTTP layer's
 * writers before the model dialects exist (JSON echo, SSE, NDJSON,
 * multipart, raw upload, WebSocket echo). The diagnostics need a key like
 * any other route when keys are configured.
 */
#ifndef PARLEY_API_ADMIN_H
#define PARLEY_API_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "http/http.h"

typedef struct admin_ctx {
  http_server *server;   /* for its metrics; set after http_server_new */
  uint64_t started_ns;   /* time_mono_ns() at start, for uptime */
} admin_ctx;

/* The route table; every entry's ctx points at actx. */
size_t admin_routes(admin_ctx *actx, const http_route **out);

#endif
