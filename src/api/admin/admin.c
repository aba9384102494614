/*
 * admin.c - liveness, health, metrics and the HTTP-layer diagnostics.
 *
 * GET|HEAD / answers "Ollama is running" because Ollama clients probe the
 * root for exactly that text (../shared/specs/ollama.md 2.1) and nothing
 * else claims the root. The diagnostic stream routes run their producer on
 * a thread of their own, as the engine will, so they exercise the same
 * suspend/resume path that model streams take.
 */
#include "api/admin/admin.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "base/err.h"
#include "base/util.h"
#include "base/version.h"
#include "http/ws.h"

static void root(http_req *req, void *ctx) {
  (void)ctx;
  static const char text[] = "Ollama is running";
  http_respond(req, 200, "text/plain; charset=utf-8", text, sizeof text - 1);
}

static void health(http_req *req, void *ctx) {
  admin_ctx *a = ctx;
  double uptime = (double)(time_mono_ns() - a->started_ns) / 1e9;
  json_t *body = json_pack("{s:s, s:s, s:f, s:[]}", "status", "ok", "version", PARLEY_VERSION, "uptime_seconds",
                           uptime, "models");
  api_respond_json(req, 200, body);
  json_decref(body);
}

/* Resident set size in bytes from /proc/self/statm, 0 when unknown. */
static uint64_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  int n = fscanf(f, "%llu %llu", &size, &resident);
  fclose(f);
  return n == 2 ? resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

static void metrics(http_req *req, void *ctx) {
  admin_ctx *a = ctx;
  buf out = BUF_INIT;
  int rc = http_server_metrics(a->server, &out);
  /* The allocator's split tells a structure that grows (in use) from
   * memory the allocator keeps (free): bench/soak.sh samples both. */
  malloc_stats_bytes ms;
  malloc_stats_read(&ms);
  if (!rc)
    rc = buf_appendf(&out,
                     "# HELP parley_uptime_seconds Seconds since the server started.\n"
                     "# TYPE parley_uptime_seconds gauge\nparley_uptime_seconds %.3f\n"
                     "# HELP parley_resident_memory_bytes Resident memory of the process.\n"
                     "# TYPE parley_resident_memory_bytes gauge\nparley_resident_memory_bytes %llu\n"
                     "# HELP parley_heap_in_use_bytes Bytes held by live allocations (malloc's count).\n"
                     "# TYPE parley_heap_in_use_bytes gauge\nparley_heap_in_use_bytes %llu\n"
                     "# HELP parley_heap_free_bytes Bytes malloc keeps free for reuse.\n"
                     "# TYPE parley_heap_free_bytes gauge\nparley_heap_free_bytes %llu\n",
                     (double)(time_mono_ns() - a->started_ns) / 1e9, (unsigned long long)rss_bytes(),
                     (unsigned long long)ms.in_use, (unsigned long long)ms.free);
  if (rc) api_error(req, 500, rc, "could not render metrics", NULL);
  else http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", out.data, out.len);
  buf_free(&out);
}

/* POST /admin/echo: answers the parsed JSON body, re-serialized. */
static void echo(http_req *req, void *ctx) {
  (void)ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  api_respond_json(req, 200, body);
  json_decref(body);
}

/* ---- diagnostic streams ------------------------------------------------ */

struct diag_stream {
  http_stream *s;
  enum http_stream_kind kind;
  long n;            /* events to send */
  long interval_ms;  /* pause before each event */
  bool done_marker;  /* SSE: end with data: [DONE] */
  char event[64];    /* SSE event name or "" */
};

static void *diag_producer(void *arg) {
  struct diag_stream *d = arg;
  for (long i = 0; i < d->n && !http_stream_cancelled(d->s); i++) {
    if (d->interval_ms > 0) {
      struct timespec ts = {d->interval_ms / 1000, (d->interval_ms % 1000) * 1000000L};
      nanosleep(&ts, NULL);
    }
    char data[128];
    int len = snprintf(data, sizeof data, "{\"index\":%ld,\"text\":\"event %ld\"}", i, i);
    int rc = d->kind == HTTP_STREAM_SSE ? http_stream_sse(d->s, d->event[0] ? d->event : NULL, data, (size_t)len)
                                        : http_stream_ndjson(d->s, data, (size_t)len);
    if (rc) break;
  }
  if (d->done_marker && !http_stream_cancelled(d->s)) http_stream_sse(d->s, NULL, "[DONE]", 6);
  http_stream_close(d->s);
  free(d);
  return NULL;
}

static long query_long(http_req *req, const char *name, long def, long lo, long hi) {
  const char *v = http_req_query(req, name);
  if (!v) return def;
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || x < lo || x > hi) return def;
  return x;
}

static void diag_stream_start(http_req *req, enum http_stream_kind kind) {
  struct diag_stream *d = calloc(1, sizeof *d);
  if (!d) { api_error(req, 500, ERR_NOMEM, NULL, NULL); return; }
  d->kind = kind;
  d->n = query_long(req, "n", 5, 0, 100000);
  d->interval_ms = query_long(req, "interval_ms", 0, 0, 60000);
  const char *done = http_req_query(req, "done");
  d->done_marker = done && strcmp(done, "true") == 0;
  const char *ev = http_req_query(req, "event");
  if (ev) snprintf(d->event, sizeof d->event, "%s", ev);
  d->s = http_stream_open(req, 200, NULL, kind);
  if (!d->s) { free(d); api_error(req, 500, ERR_INTERNAL, "could not open the stream", NULL); return; }
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, diag_producer, d) != 0) {
    http_stream_close(d->s);
    free(d);
  }
  pthread_attr_destroy(&attr);
}

static void diag_sse(http_req *req, void *ctx) { (void)ctx; diag_stream_start(req, HTTP_STREAM_SSE); }
static void diag_ndjson(http_req *req, void *ctx) { (void)ctx; diag_stream_start(req, HTTP_STREAM_NDJSON); }

/* POST /admin/multipart: describes the parts it received. */
static void diag_multipart(http_req *req, void *ctx) {
  (void)ctx;
  json_t *parts = json_array();
  for (size_t i = 0; i < http_req_n_parts(req); i++) {
    const http_part *p = http_req_part(req, i);
    json_t *o = json_pack("{s:s}", "name", p->name);
    if (p->filename) {
      json_object_set_new(o, "filename", json_string(p->filename));
      json_object_set_new(o, "size", json_integer((json_int_t)p->file_size));
    } else {
      json_object_set_new(o, "value", json_stringn(p->value, p->value_len));
    }
    if (p->content_type) json_object_set_new(o, "content_type", json_string(p->content_type));
    json_array_append_new(parts, o);
  }
  json_t *body = json_pack("{s:o}", "parts", parts);
  api_respond_json(req, 200, body);
  json_decref(body);
}

/* POST /admin/upload: a raw body spooled to disk; answers its size. */
static void diag_upload(http_req *req, void *ctx) {
  (void)ctx;
  uint64_t size = 0;
  const char *path = http_req_body_file(req, &size);
  json_t *body = json_pack("{s:I, s:b}", "bytes", (json_int_t)size, "spooled", path != NULL);
  api_respond_json(req, 200, body);
  json_decref(body);
}

/* GET /admin/routes: every registered route (method, pattern, name and its
 * flags by name), so a tool can walk the whole surface of this build
 * (bench/hostile.sh sends its hostile requests to each). */
static void diag_routes(http_req *req, void *ctx) {
  admin_ctx *a = ctx;
  static const struct { unsigned bit; const char *name; } FLAGS[] = {
      {HTTP_ROUTE_PUBLIC, "public"},     {HTTP_BODY_JSON, "json"},       {HTTP_BODY_MULTIPART, "multipart"},
      {HTTP_BODY_FILE, "file"},          {HTTP_ROUTE_WS, "websocket"},   {HTTP_ROUTE_FALLBACK, "fallback"},
      {HTTP_BODY_IGNORE, "body_ignored"}, {HTTP_ROUTE_RESERVED, "reserved"}, {HTTP_ROUTE_ADMIN, "admin"},
  };
  json_t *list = json_array();
  for (size_t i = 0; list && i < http_server_n_routes(a->server); i++) {
    const http_route *rt = http_server_route(a->server, i);
    json_t *flags = json_array();
    for (size_t f = 0; flags && f < ARRAY_LEN(FLAGS); f++)
      if (rt->flags & FLAGS[f].bit) json_array_append_new(flags, json_string(FLAGS[f].name));
    json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:o*}", "method", rt->method, "pattern", rt->pattern,
                                          "name", rt->name ? rt->name : rt->pattern, "flags", flags));
  }
  json_t *body = list ? json_pack("{s:o}", "routes", list) : NULL;
  if (body) api_respond_json(req, 200, body);
  else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
  json_decref(body);
}

/* ---- WebSocket echo ------------------------------------------------------ */

static void ws_echo_message(ws_conn *c, enum ws_opcode op, const uint8_t *data, size_t len, void *ctx) {
  (void)ctx;
  if (op == WS_TEXT) ws_send_text(c, (const char *)data, len);
  else ws_send_binary(c, data, len);
}

static const ws_handler WS_ECHO = {NULL, ws_echo_message, NULL};

/* Whether offered[i] is a credential rather than a protocol name: the
 * OpenAI browser form, or the entry after Deepgram's "token"/"bearer". */
static bool ws_protocol_is_secret(const char *const *offered, size_t i) {
  if (str_starts_with(offered[i], "openai-insecure-api-key.")) return true;
  return i > 0 && (strcmp(offered[i - 1], "token") == 0 || strcmp(offered[i - 1], "bearer") == 0);
}

static void ws_echo(http_req *req, void *ctx) {
  (void)ctx;
  /* Browsers abort a handshake whose answer names no offered subprotocol:
   * echo Deepgram's "token"/"bearer" marker when present, else the first
   * offered name that is not a credential. */
  const char *offered[16];
  size_t n = http_req_ws_protocols(req, offered, 16);
  const char *chosen = NULL;
  for (size_t i = 0; i < n && !chosen; i++)
    if (strcmp(offered[i], "token") == 0 || strcmp(offered[i], "bearer") == 0) chosen = offered[i];
  for (size_t i = 0; i < n && !chosen; i++)
    if (!ws_protocol_is_secret(offered, i)) chosen = offered[i];
  if (http_ws_accept(req, &WS_ECHO, NULL, chosen)) api_error(req, 500, ERR_INTERNAL, "WebSocket upgrade failed", NULL);
}

static http_route ROUTES[] = {
    {"GET", "/", root, NULL, HTTP_ROUTE_PUBLIC, "root"},
    {"GET", "/health", health, NULL, HTTP_ROUTE_PUBLIC | HTTP_ROUTE_RESERVED, "health"},
    {"GET", "/metrics", metrics, NULL, HTTP_ROUTE_RESERVED, "metrics"},
    /* Diagnostics: only with --admin or an API key (HTTP_ROUTE_ADMIN). */
    {"POST", "/admin/echo", echo, NULL, HTTP_BODY_JSON | HTTP_ROUTE_ADMIN | HTTP_ROUTE_RESERVED, "admin_echo"},
    {"GET", "/admin/sse", diag_sse, NULL, HTTP_ROUTE_ADMIN | HTTP_ROUTE_RESERVED, "admin_sse"},
    {"GET", "/admin/ndjson", diag_ndjson, NULL, HTTP_ROUTE_ADMIN | HTTP_ROUTE_RESERVED, "admin_ndjson"},
    {"POST", "/admin/multipart", diag_multipart, NULL, HTTP_BODY_MULTIPART | HTTP_ROUTE_ADMIN, "admin_multipart"},
    {"POST", "/admin/upload", diag_upload, NULL, HTTP_BODY_FILE | HTTP_ROUTE_ADMIN, "admin_upload"},
    {"GET", "/admin/ws-echo", ws_echo, NULL, HTTP_ROUTE_WS | HTTP_ROUTE_ADMIN, "admin_ws_echo"},
    {"GET", "/admin/routes", diag_routes, NULL, HTTP_ROUTE_ADMIN, "admin_routes"},
};

size_t admin_routes(admin_ctx *actx, const http_route **out) {
  for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) ROUTES[i].ctx = actx;
  *out = ROUTES;
  return ARRAY_LEN(ROUTES);
}
