/*
 * http.h - parley's HTTP front door: listener, router, auth, body limits,
 * response writers (JSON, SSE, NDJSON, chunked bytes) and the WebSocket
 * upgrade. Bytes, not JSON: this layer never parses or builds JSON; the
 * adapters in api/ do, and hand finished bytes to the writers below.
 *
 * Threads: libmicrohttpd runs connections on its own pool (epoll). A route's
 * handler runs on a pool thread once the whole body has been read (JSON
 * buffered in memory up to max_json_body; multipart parsed as a stream with
 * file parts spooled to disk; raw bodies spooled to a file). The handler must
 * answer exactly once before it returns: http_respond*() or
 * http_stream_open(), or http_ws_accept() on a WebSocket route. If it answers
 * nothing, the layer answers 500.
 *
 * A stream's producer runs on another thread (an engine thread, a worker):
 * the connection is suspended while no data is queued and resumed when the
 * producer writes, so no pool thread ever waits for a producer. A client that
 * goes away is noticed at once (a monitor polls suspended sockets) and the
 * stream's cancel callback fires; further writes return ERR_CANCELLED.
 *
 * Ownership: the layer owns http_req and http_stream. A stream stays valid
 * for its producer until the producer calls http_stream_close(), even after
 * the client went away.
 */
#ifndef PARLEY_HTTP_HTTP_H
#define PARLEY_HTTP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct http_server http_server;
typedef struct http_req http_req;
typedef struct http_stream http_stream;
typedef struct ws_conn ws_conn;
struct ws_handler; /* http/ws.h */

/* ---- routes ---------------------------------------------------------- */

typedef void (*http_handler_fn)(http_req *req, void *ctx);

enum http_route_flags {
  HTTP_ROUTE_PUBLIC = 1u << 0,    /* no API key needed (GET /health, HEAD /) */
  HTTP_BODY_JSON = 1u << 1,       /* buffer the body in memory (max_json_body) */
  HTTP_BODY_MULTIPART = 1u << 2,  /* parse multipart/form-data, spool file parts */
  HTTP_BODY_FILE = 1u << 3,       /* spool any body to a temp file (max_upload) */
  HTTP_ROUTE_WS = 1u << 4,        /* GET that upgrades to a WebSocket */
  HTTP_ROUTE_FALLBACK = 1u << 5,  /* lower tier: chosen only when no ordinary route
                                     matches path and method (the 501 table) */
  HTTP_BODY_IGNORE = 1u << 6,     /* the handler never reads the body: it is drained
                                     and dropped, up to max_upload */
  HTTP_ROUTE_RESERVED = 1u << 7,  /* answered from the connection reserve (health,
                                     metrics, admin): still served when the
                                     connection or per-address caps refuse others */
  HTTP_ROUTE_ADMIN = 1u << 8,     /* a diagnostic route: served only with
                                     http_config.admin_routes or an API key */
};

/* One entry of a declarative route table. pattern is a path such as
 * "/v1/models/{model}"; a {name} segment matches one percent-decoded segment,
 * and a final "{name...}" matches the rest of the path (slashes included).
 * A GET route answers HEAD too. */
typedef struct http_route {
  const char *method;   /* "GET", "POST", "DELETE", ... */
  const char *pattern;
  http_handler_fn fn;
  void *ctx;            /* passed to fn */
  unsigned flags;       /* enum http_route_flags */
  const char *name;     /* label for metrics and logs; the pattern when NULL */
} http_route;

/* ---- server ---------------------------------------------------------- */

/* Renders an error found by the layer itself (unknown path 404, wrong method
 * 405, missing key 401, body over a limit 413, malformed body 400) in the
 * dialect of the request. code is an ERR_* value, message names what is
 * wrong, param the offending field or NULL. The callee must answer the
 * request with http_respond(). */
typedef void (*http_error_fn)(http_req *req, int status, int code, const char *message,
                              const char *param, void *ctx);
/* Called on every request before its handler or error renderer runs, so the
 * api layer can add dialect headers (request-id, dg-request-id, ...). */
typedef void (*http_decorate_fn)(http_req *req, void *ctx);

typedef struct http_config {
  const char *host;             /* listen address, e.g. "127.0.0.1" or "::" */
  int port;                     /* 0 picks a free port (see http_server_port) */
  const char *const *api_keys;  /* keys accepted; n_api_keys == 0 means open */
  size_t n_api_keys;
  size_t max_json_body;         /* bytes; default 32 MiB */
  uint64_t max_upload;          /* bytes; default 512 MiB, multipart and file bodies */
  const char *spool_dir;        /* where uploads are spooled (must exist) */
  unsigned n_threads;           /* pool size; 0 = default */
  unsigned sse_keepalive_ms;    /* idle SSE comment interval; 0 = 15000 */
  unsigned conn_timeout_s;      /* idle connection timeout; 0 = 60 */
  size_t ws_max_message;        /* bytes; default 16 MiB; larger -> close 1009 */
  size_t max_form_field;        /* bytes per multipart plain field; default 1 MiB (413 past it) */
  bool access_log;              /* one log line per request */
  /* Origin policy, used only while no API key is configured (with a key,
   * every origin is allowed as before: the key is the protection). A
   * request whose Origin header is not allowed is answered 403, WebSocket
   * upgrades and preflights included; requests without Origin (SDKs, curl)
   * are not affected. Allowed by default: local origins (see
   * origin_allowed in http_int.h); allowed_origins adds comma-separated
   * origins or patterns (https://STAR.example.com, a star matching any run), "*" allows every one. */
  const char *allowed_origins;
  bool admin_routes;            /* serve HTTP_ROUTE_ADMIN routes without a key */
  unsigned ws_idle_timeout_ms;  /* close 1001 after no message either way; 0 = 300000 */
  unsigned ws_ping_interval_ms; /* ping a silent peer this often and close it when
                                   the pong has not come one interval later; 0 = 30000 */
  unsigned max_connections;     /* open sockets; 0 = 1000 */
  unsigned max_conns_per_addr;  /* open sockets per client address; 0 = 256 */
  unsigned conn_reserve;        /* of max_connections, kept for HTTP_ROUTE_RESERVED
                                   routes; 0 = 32 */
  uint64_t body_budget;         /* bytes of request bodies held in memory at once by all
                                   requests; past it 503; 0 = 256 MiB */
  bool host_check;              /* answer 403 to a Host header that does not
                                   name this machine (host_header_allowed):
                                   the DNS-rebinding guard for a loopback
                                   listener */
  /* TLS (HTTPS and WSS through libmicrohttpd's GnuTLS support): PEM text of
   * the certificate chain and of the private key, both or neither. With
   * tls_port 0 the main port serves TLS only; with tls_port > 0 the main
   * port stays plain and a second listener on tls_port serves TLS (-1 there
   * picks a free port, see http_server_tls_port). */
  const char *tls_cert_pem;
  const char *tls_key_pem;
  int tls_port;
  http_error_fn on_error;
  http_decorate_fn decorate;
  void *hook_ctx;               /* ctx for on_error and decorate */
} http_config;

/* Builds a server with the given route tables (several tables may be added
 * before start). Among ordinary routes the most specific pattern wins,
 * earlier tables first on identical patterns; an HTTP_ROUTE_FALLBACK route
 * answers only what no ordinary route answers, whenever either was added. */
int http_server_new(const http_config *cfg, http_server **out);
int http_server_add_routes(http_server *srv, const http_route *routes, size_t n_routes);
/* The routes added so far, in the order they were added (i <
 * http_server_n_routes; NULL past the end). Read after start-up only: the
 * table does not change once the server runs. */
size_t http_server_n_routes(const http_server *srv);
const http_route *http_server_route(const http_server *srv, size_t i);
/* A path alias (before start): a request path that no route matches and
 * whose leading segments are `from` is routed as if they were `to`, e.g.
 * ("/chat", "/v1/chat") or ("/v1/v1/models", "/v1/models"). The route's
 * handler sees the original path in http_req_path and the same params. */
int http_server_add_alias(http_server *srv, const char *from, const char *to);
int http_server_start(http_server *srv);
int http_server_port(const http_server *srv);
/* The TLS listener's port: the main port when it serves TLS, the second
 * listener's when there is one, 0 without TLS. */
int http_server_tls_port(const http_server *srv);
/* Graceful stop: stop accepting, end open streams (their producers see
 * ERR_CANCELLED), close WebSockets with 1001, wait for handlers, free. */
void http_server_free(http_server *srv);
/* Prometheus text exposition of the layer's counters into out. */
int http_server_metrics(http_server *srv, buf *out);

/* ---- request --------------------------------------------------------- */

const char *http_req_method(const http_req *req);
const char *http_req_path(const http_req *req);      /* raw path, no query */
const char *http_req_route_name(const http_req *req);/* NULL when unrouted */
const char *http_req_id(const http_req *req);        /* "req_" + 32 hex */
/* Percent-decoded path parameter, NULL when absent. */
const char *http_req_param(const http_req *req, const char *name);
/* First value of a query parameter; a trailing "[]" on the key is ignored,
 * so "include[]=a" is found as "include". */
const char *http_req_query(const http_req *req, const char *name);
/* All values of a query parameter (for key[]=a&key[]=b); returns the count. */
size_t http_req_query_all(const http_req *req, const char *name, const char **out, size_t max);
/* Header value (case-insensitive name), NULL when absent. */
const char *http_req_header(const http_req *req, const char *name);
/* The body of an HTTP_BODY_JSON route, NUL-terminated; *len excludes it. */
const char *http_req_body(const http_req *req, size_t *len);
/* HTTP_BODY_FILE routes: path and size of the spooled body. */
const char *http_req_body_file(const http_req *req, uint64_t *size);

/* A multipart/form-data part. Fields are kept in memory (value, value_len);
 * file parts (those with a filename) are spooled to file_path. */
typedef struct http_part {
  const char *name;          /* form field name */
  const char *filename;      /* NULL for plain fields */
  const char *content_type;  /* NULL when the part named none */
  const char *value;         /* plain fields: NUL-terminated value */
  size_t value_len;
  const char *file_path;     /* file parts: spooled file, removed after the request */
  uint64_t file_size;
} http_part;
size_t http_req_n_parts(const http_req *req);
const http_part *http_req_part(const http_req *req, size_t i);
/* First part with this name (NULL when absent). */
const http_part *http_req_part_named(const http_req *req, const char *name);
/* Takes ownership of a spooled file: the layer will no longer delete it. The
 * caller renames or removes it. */
int http_part_take_file(http_req *req, size_t i);

/* ---- responses (on the handler's thread) ----------------------------- */

/* Adds a response header; call before answering. */
int http_resp_header(http_req *req, const char *name, const char *value);
/* Asks for a header `name` (a string that outlives the request, e.g. a
 * literal) carrying the whole milliseconds from the request line's arrival
 * to the moment the response head is queued ("openai-processing-ms"); for
 * streams that is the time to the stream's opening. */
void http_resp_timing_header(http_req *req, const char *name);
int http_respond(http_req *req, int status, const char *content_type, const void *body, size_t len);
/* Sends a file's bytes (for downloads), streamed from disk. */
int http_respond_file(http_req *req, int status, const char *content_type, const char *path);

/* ---- streams (producer on any thread) -------------------------------- */

enum http_stream_kind {
  HTTP_STREAM_SSE,     /* text/event-stream; keep-alive comments while idle */
  HTTP_STREAM_NDJSON,  /* application/x-ndjson */
  HTTP_STREAM_RAW,     /* chunked bytes of content_type (audio) */
};

/* Starts a chunked 200-type response on the handler's thread; the returned
 * stream is then written from any thread. content_type NULL picks the kind's
 * default. */
http_stream *http_stream_open(http_req *req, int status, const char *content_type,
                              enum http_stream_kind kind);
/* Queues bytes and wakes the connection. Blocks the producer (never a pool
 * thread) while more than 4 MiB is queued. ERR_CANCELLED once the client is
 * gone or the server is stopping. (Writing from the handler itself, before
 * it returns, is fine up to 4 MiB; more would wait on its own thread.) */
int http_stream_write(http_stream *s, const void *data, size_t len);
/* One SSE event: optional "event: NAME" line, then data split into "data:"
 * lines, then a blank line. */
int http_stream_sse(http_stream *s, const char *event, const char *data, size_t len);
/* One NDJSON record: data then "\n". */
int http_stream_ndjson(http_stream *s, const char *data, size_t len);
bool http_stream_cancelled(const http_stream *s);
/* fn(arg) is called once, on some thread, when the client goes away or the
 * server stops. Set it right after open. It is never called after
 * http_stream_close returns (close waits for a call in progress), so arg
 * may be freed then; fn must not close the stream itself. */
void http_stream_on_cancel(http_stream *s, void (*fn)(void *arg), void *arg);
/* The producer is done: flush what is queued, end the chunked body. The
 * stream must not be used afterwards. */
void http_stream_close(http_stream *s);

/* ---- WebSocket ------------------------------------------------------- */

/* Subprotocols the client offered (Sec-WebSocket-Protocol), split on commas. */
size_t http_req_ws_protocols(const http_req *req, const char **out, size_t max);
/* On an HTTP_ROUTE_WS route: completes the upgrade (101) and hands the
 * connection to the WebSocket loop with handler h (see http/ws.h).
 * subprotocol is echoed in Sec-WebSocket-Protocol, or NULL for none. */
int http_ws_accept(http_req *req, const struct ws_handler *h, void *ctx, const char *subprotocol);

#endif
