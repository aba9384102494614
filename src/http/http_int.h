/*
 * http_int.h - internals shared by the files of src/http/ (not for api/).
 *
 * Pure pieces (url.c, router.c, auth.c, sha1.c) are declared here so that
 * unit tests and fuzz harnesses can drive them without a socket. server.c
 * and stream.c share the request and server structs through this header.
 */
#ifndef PARLEY_HTTP_HTTP_INT_H
#define PARLEY_HTTP_HTTP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/http.h"

/* ---- url.c: percent decoding and query strings ------------------------ */

/* Decodes n bytes of in (percent escapes; '+' becomes ' ' when plus_space)
 * into a new NUL-terminated string *out. ERR_PARSE for a bad escape ("%4",
 * "%zz") or an encoded NUL ("%00"); ERR_NOMEM. */
int url_decode(const char *in, size_t n, bool plus_space, char **out, size_t *out_len);

typedef struct url_kv {
  char *key;  /* decoded, a trailing "[]" removed */
  char *val;  /* decoded; "" for "key" without '=' */
} url_kv;

typedef struct url_query {
  url_kv *kv;
  size_t n_kv;
} url_query;

#define URL_QUERY_MAX_PARAMS 256 /* see QUERY_POOL_BYTES_PER_ARG in server.c */

/* Parses "a=1&b[]=2&b[]=3" (without the '?'). Empty pieces are skipped.
 * ERR_PARSE on a bad escape or NUL, ERR_TOO_LARGE past URL_QUERY_MAX_PARAMS.
 * On error q is left empty. Pure: the entry point of the query fuzz harness. */
int url_query_parse(const char *qs, size_t len, url_query *q);
const char *url_query_get(const url_query *q, const char *name);
size_t url_query_get_all(const url_query *q, const char *name, const char **out, size_t max);
void url_query_free(url_query *q);

/* ---- router.c --------------------------------------------------------- */

#define ROUTER_MAX_SEGMENTS 64
#define ROUTER_MAX_PARAMS 16

typedef struct router router;

typedef struct router_match {
  const http_route *route;             /* the matched route (owned by the caller's table) */
  size_t n_params;
  const char *param_names[ROUTER_MAX_PARAMS]; /* point into the router */
  char *param_values[ROUTER_MAX_PARAMS];      /* decoded, owned by the match */
  char allow[128];                     /* for ERR_METHOD: "GET, HEAD, POST" */
} router_match;

int router_new(router **out);
void router_free(router *r);
/* Adds routes (the table must outlive the router). ERR_INVALID for a bad
 * pattern (a rest parameter not last, an empty parameter name). */
int router_add(router *r, const http_route *routes, size_t n_routes);
/* The registered routes in registration order (i < router_n_routes). */
size_t router_n_routes(const router *r);
const http_route *router_route(const router *r, size_t i);
/* Adds a path alias: a path with no route of its own whose first segments
 * are `from` ("/chat") is matched as if they were `to` ("/v1/chat"). Both
 * are literal paths; the longest matching `from` wins. ERR_INVALID for a
 * pattern, an empty `from` or a path not starting with '/'. */
int router_add_alias(router *r, const char *from, const char *to);
/* Matches method and raw path (no query). Returns 0 with m filled,
 * ERR_NOT_FOUND, ERR_METHOD (m->allow set), or ERR_PARSE for a path that
 * cannot be decoded (bad escape, NUL). Always call router_match_free. */
int router_match_path(const router *r, const char *method, const char *path, router_match *m);
void router_match_free(router_match *m);

/* ---- auth.c ----------------------------------------------------------- */

typedef struct auth_input {
  const char *authorization;  /* "Bearer k" / "Token k" */
  const char *x_api_key;
  const char *api_key;
  const char *const *ws_protocols; /* offered subprotocols (WebSocket upgrades) */
  size_t n_ws_protocols;
} auth_input;

/* True when some credential in in matches one of keys. Every candidate is
 * compared with every key in constant time (ct_equal), no early exit. */
bool auth_check(const char *const *keys, size_t n_keys, const auth_input *in);
/* The 401 message: names every form auth_check accepts. */
extern const char AUTH_FAILED_MESSAGE[];
/* The DNS-rebinding guard of a loopback listener: true when a request's
 * Host header (NULL or "" = absent) names this machine: a loopback,
 * private, link-local or unspecified address (with or without a port,
 * IPv6 in brackets), localhost, the machine's hostname (may be NULL), or a
 * name under .localhost, .local or .internal. Case-insensitive. */
bool host_header_allowed(const char *host, const char *hostname);
/* The origin policy of a server without an API key: true when origin (an
 * Origin header value) is local — http or https to localhost, a name under
 * .localhost, 127.0.0.0/8, 0.0.0.0 or [::1], any port; or an app://,
 * file://, tauri://, vscode-webview:// or vscode-file:// origin — or
 * matches an entry of extra (comma-separated; "*" matches any origin, an
 * entry with '*' is a shell-style pattern, others compare exactly,
 * case-insensitively). "null" is never local (sandboxed frames of any site
 * send it). */
bool origin_allowed(const char *origin, const char *extra);
/* Splits a Sec-WebSocket-Protocol value on commas (trimming blanks) into
 * pointers into scratch (a copy the caller frees). Returns the count. */
size_t auth_split_protocols(const char *value, char **scratch, const char **out, size_t max);

/* ---- sha1.c ----------------------------------------------------------- */

void sha1_digest(const void *data, size_t len, uint8_t out[20]);
/* Standard base64 with padding; out needs 4*ceil(n/3)+1 bytes. */
void base64_encode(const uint8_t *in, size_t n, char *out);
/* Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(SHA1(key+GUID)),
 * 28 characters + NUL. ERR_INVALID when the key is too long. */
int ws_accept_key(const char *key, char out[29]);

/* ---- server.c <-> stream.c -------------------------------------------- */

/* now - since, or 0 when since is later (a timestamp taken on another
 * thread after now was read): the guard and the keep-alive timer must never
 * see a wrapped, huge difference. */
static inline uint64_t http_elapsed_ns(uint64_t now, uint64_t since) { return now > since ? now - since : 0; }

struct MHD_Connection;

/* stream.c: the monitor thread and stream list of one server. */
typedef struct stream_hub stream_hub;
int stream_hub_new(unsigned sse_keepalive_ms, stream_hub **out);
/* Cancels every stream (callbacks fire) and resumes their connections. */
void stream_hub_cancel_all(stream_hub *h);
void stream_hub_free(stream_hub *h);
size_t stream_hub_n_open(stream_hub *h);
/* fn(arg) runs on the monitor thread at least once a second (the server's
 * slowloris guard); NULL clears it. Returns after any running tick ends. */
void stream_hub_set_tick(stream_hub *h, void (*fn)(void *arg), void *arg);

/* server.c: called by stream.c to add the common headers to a response and
 * queue it; returns 0 or ERR_*. */
struct MHD_Response;
int http_req_queue_(http_req *req, int status, struct MHD_Response *resp);
stream_hub *http_req_hub_(http_req *req);
struct MHD_Connection *http_req_conn_(http_req *req);
void http_req_set_stream_(http_req *req, http_stream *s);
/* stream.c: bytes delivered to the socket so far (for the access log). */
uint64_t http_stream_bytes_sent_(http_stream *s);
/* stream.c: the request finished (MHD is done with the connection). */
void http_stream_detach_(http_stream *s, bool completed_ok);

/* ---- metrics.c --------------------------------------------------------- */

typedef struct http_metrics http_metrics;
int http_metrics_new(http_metrics **out);
void http_metrics_free(http_metrics *m);
/* One finished request. route is a route name/pattern or "unmatched";
 * method is folded to a known method or "OTHER" (bounded label values). */
void http_metrics_observe(http_metrics *m, const char *route, const char *method, int status,
                          double seconds);
int http_metrics_render(http_metrics *m, buf *out, long in_flight, size_t open_streams,
                        size_t ws_sessions);

#endif
