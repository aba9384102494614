/*
 * server.c - the libmicrohttpd daemon behind http.h: request lifecycle,
 * routing, auth, CORS, body reading and limits, fixed responses, the
 * WebSocket upgrade, access log and metrics.
 *
 * Lifecycle of one request (start reading at on_uri, then on_access):
 *   on_uri        MHD saw the request line: allocate http_req, keep the raw
 *                 URI (MHD would otherwise decode the path before we split
 *                 it), make the request id.
 *   on_access #1  headers are in: parse path and query, answer OPTIONS
 *                 preflights, route (404/405), check the key (401), check
 *                 Content-Length against the route's limit (413 before a
 *                 single body byte is read or allocated), set up the body
 *                 sink (memory, multipart parser, spool file).
 *   on_access #n  body chunks: counted against the limit as they arrive
 *                 (chunked bodies have no Content-Length), fed to the sink.
 *   on_access end body complete: run the handler on this pool thread; it
 *                 answers with http_respond*, http_stream_open (stream.c) or
 *                 http_ws_accept. No answer -> 500.
 *   on_completed  MHD is done: access log, metrics, spool files removed,
 *                 the stream detached, http_req freed.
 * Every response, errors included, passes through http_req_queue_, which
 * adds x-request-id and the CORS headers. An error found from the head
 * while a small body is still coming waits until the body is drained
 * (early_error), so the client is not reset before it reads the answer.
 * on_connection keeps a list of sockets for the slowloris guard (guard_tick,
 * run by the stream monitor): a socket that has not sent a whole request
 * head within conn_timeout_s is shut down, however slowly it trickles.
 *
 * Invariants: a request is answered at most once (req->answered); errors
 * found by the layer go through cfg.on_error (or a plain JSON fallback);
 * header values are never logged.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "http/http_int.h"
#include "http/multipart.h"
#include "http/ws.h"

#define DEFAULT_MAX_JSON_BODY ((size_t)32 << 20)
#define DEFAULT_MAX_UPLOAD ((uint64_t)512 << 20)
#define DEFAULT_MAX_FORM_FIELD ((size_t)1 << 20)
#define DEFAULT_WS_MAX_MESSAGE ((size_t)16 << 20)
#define DEFAULT_THREADS 4
#define CONN_MEMORY_LIMIT ((size_t)64 << 10) /* request line + headers must fit */
#define OVER_LIMIT_DRAIN ((uint64_t)4 << 20) /* body bytes swallowed after a limit, then close */
#define DEFAULT_MAX_CONNECTIONS 1000u
#define DEFAULT_MAX_CONNS_PER_ADDR 256u
#define DEFAULT_CONN_RESERVE 32u
#define DEFAULT_BODY_BUDGET ((uint64_t)256 << 20)
#define DEFAULT_WS_IDLE_MS 300000u
#define DEFAULT_WS_PING_MS 30000u
/* A JSON body past this many bytes is spooled to disk while it arrives and
 * read back into memory only once complete, so slow uploads pin no memory. */
#define BODY_SPOOL_AT ((size_t)1 << 20)
/* libmicrohttpd stores each query argument in the connection's memory pool
 * (about 56 bytes each, beside the request head), and a pool that runs out
 * there leaves the request unanswered. A request line whose arguments would
 * not fit comfortably is answered 414 before that happens (on_uri). */
#define QUERY_POOL_BYTES_PER_ARG 64u

static const char k_expose_headers[] =
    "x-request-id, request-id, openai-processing-ms, openai-version, openai-organization, "
    "anthropic-ratelimit-requests-remaining, retry-after, dg-request-id, dg-model-name, "
    "dg-model-uuid, dg-char-count, dg-error";
static const char k_allow_headers_default[] =
    "Authorization, Content-Type, Accept, x-api-key, api-key, anthropic-version, anthropic-beta, "
    "anthropic-dangerous-direct-browser-access, OpenAI-Organization, OpenAI-Project, OpenAI-Beta, "
    "X-Stainless-Lang, X-Stainless-Package-Version, X-Stainless-OS, X-Stainless-Arch, "
    "X-Stainless-Runtime, X-Stainless-Runtime-Version, X-Stainless-Retry-Count, "
    "X-Stainless-Timeout, X-Stainless-Helper-Method, x-request-id";

/* One accepted socket (MHD socket_context): the slowloris guard shuts down
 * sockets that have not delivered a whole request head within
 * conn_timeout_s of the connection opening or the previous request ending.
 * Listed from NOTIFY_STARTED to NOTIFY_CLOSED; MHD closes the fd only after
 * NOTIFY_CLOSED, which takes guard_mu, so shutdown() under guard_mu never
 * hits a reused descriptor. */
typedef struct conn_ctx {
  int fd;
  uint64_t waiting_since_ns; /* start of the wait for a request head */
  bool busy;                 /* a request is past its head (or upgraded) */
  struct http_req *req;      /* allocated by on_uri, not yet freed by on_completed:
                                freed at NOTIFY_CLOSED when MHD never completes it */
  uint8_t addr[17];          /* client address: family byte + 16 address bytes */
  struct conn_ctx *prev, *next;
} conn_ctx;

struct http_server {
  http_config cfg;       /* defaults filled; strings below are our copies */
  char *host;
  char hostname[256];    /* gethostname(), for the Host-header guard */
  char *spool_dir;
  char *allowed_origins; /* our copy of cfg.allowed_origins, or NULL */
  char **keys;
  router *rt;
  struct MHD_Daemon *d;
  struct MHD_Daemon *d_tls;  /* second listener serving TLS, or NULL */
  int tls_port;              /* 0 without TLS */
  int listen_fd_quiesced;
  ws_loop *ws;           /* NULL once stopping; read under ws_mu */
  pthread_mutex_t ws_mu; /* held across ws_loop_adopt, so free waits for it */
  stream_hub *hub;
  http_metrics *metrics;
  atomic_long in_flight;
  int port;
  bool started;
  pthread_mutex_t guard_mu;
  conn_ctx *conns;
  unsigned n_conns;      /* sockets in conns, under guard_mu */
  atomic_uint_least64_t body_mem; /* bytes of request bodies held in memory (body_budget) */
};

enum req_phase { PH_NEW, PH_BODY, PH_DONE };
enum sink_kind { SINK_DISCARD, SINK_MEMORY, SINK_MULTIPART, SINK_FILE };

typedef struct hdr {
  char *name, *value;
} hdr;

typedef struct part_int {
  http_part pub;
  char *name, *filename, *content_type, *file_path;
  buf value;
  int fd;
  bool taken;
} part_int;

struct http_req {
  http_server *srv;
  struct MHD_Connection *conn;
  char *uri;        /* raw request target */
  char *path;       /* raw path, no query */
  char *method;     /* our copy: MHD's lives in the connection pool */
  char id[40];
  uint64_t t_start_ns;
  enum req_phase phase;
  bool counted_in_flight;
  bool is_head;
  url_query query;
  router_match match;
  bool matched;
  /* body */
  enum sink_kind sink;
  uint64_t body_limit;
  uint64_t body_bytes;
  buf body;
  int err_status;     /* a limit or parse error found while reading the body */
  int err_code;
  char err_msg[512];
  int spool_fd;
  char *spool_path;
  uint64_t mem_held;  /* bytes of srv->body_mem this request holds */
  const char *origin; /* the Origin header when the origin policy allowed it */
  bool origin_refused; /* the origin policy refused it: no CORS headers */
  mp_parser *mp;
  part_int *parts;
  size_t n_parts, cap_parts;
  bool in_part;
  /* response */
  hdr *hdrs;
  size_t n_hdrs;
  const char *timing_hdr; /* http_resp_timing_header */
  bool decorated;
  bool answered;
  bool queue_failed; /* MHD refused the response: close the connection */
  int status;
  uint64_t resp_bytes;
  http_stream *stream;
  /* websocket */
  char *ws_scratch;
  const char *ws_protos[16];
  size_t n_ws_protos;
  bool ws_protos_parsed;
  const ws_handler *ws_h;
  void *ws_ctx;
  bool upgraded;
  conn_ctx *cc;
};

static void req_free(http_req *req);

/* ---- small helpers ------------------------------------------------------ */

static bool has_token_ci(const char *value, const char *token) {
  if (!value) return false;
  size_t tl = strlen(token);
  const char *p = value;
  while (*p) {
    while (*p == ' ' || *p == '\t' || *p == ',') p++;
    const char *e = p;
    while (*e && *e != ',') e++;
    const char *te = e;
    while (te > p && (te[-1] == ' ' || te[-1] == '\t')) te--;
    if ((size_t)(te - p) == tl && strncasecmp(p, token, tl) == 0) return true;
    p = e;
  }
  return false;
}

/* Copies s into out replacing bytes a log line must not carry. */
static void sanitize(const char *s, char *out, size_t cap) {
  size_t o = 0;
  for (; s && *s && o + 1 < cap; s++) out[o++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
  out[o] = '\0';
}

static int parse_u64(const char *s, uint64_t *out) {
  if (!s) return ERR_INVALID;
  while (*s == ' ') s++;
  if (*s < '0' || *s > '9') return ERR_INVALID;
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (v > (UINT64_MAX - 9) / 10) return ERR_RANGE;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  while (*s == ' ') s++;
  if (*s) return ERR_INVALID;
  *out = v;
  return 0;
}

/* ---- request ids ---------------------------------------------------------- */

/* Request ids need to be unique and unguessable enough for logs, not
 * secret: a per-thread xoshiro256** seeded once from the kernel replaces a
 * getrandom(2) call per request (a syscall on the hottest path). */
static _Thread_local uint64_t tl_rng[4];
static _Thread_local bool tl_rng_seeded;

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t fast_rand_u64(void) {
  if (!tl_rng_seeded) {
    if (rand_bytes(tl_rng, sizeof tl_rng) != 0) { /* no kernel randomness: clock and address */
      uint64_t z = time_mono_ns() ^ (uint64_t)(uintptr_t)&tl_rng;
      for (int i = 0; i < 4; i++) { /* splitmix64 */
        z += 0x9e3779b97f4a7c15ull;
        uint64_t x = z;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        tl_rng[i] = x ^ (x >> 31);
      }
    }
    if (!(tl_rng[0] | tl_rng[1] | tl_rng[2] | tl_rng[3])) tl_rng[0] = 1;
    tl_rng_seeded = true;
  }
  uint64_t *st = tl_rng;
  uint64_t result = rotl64(st[1] * 5, 7) * 9;
  uint64_t t = st[1] << 17;
  st[2] ^= st[0];
  st[3] ^= st[1];
  st[1] ^= st[2];
  st[0] ^= st[3];
  st[2] ^= t;
  st[3] = rotl64(st[3], 45);
  return result;
}

/* "req_" + 32 lowercase hex digits into out (>= 37 bytes). */
static void request_id_make(char *out) {
  static const char hex[] = "0123456789abcdef";
  memcpy(out, "req_", 4);
  for (int w = 0; w < 2; w++) {
    uint64_t v = fast_rand_u64();
    for (int i = 0; i < 16; i++) out[4 + w * 16 + i] = hex[(v >> (60 - 4 * i)) & 15];
  }
  out[36] = '\0';
}

/* ---- accessors ---------------------------------------------------------- */

const char *http_req_method(const http_req *req) { return req->method; }
const char *http_req_path(const http_req *req) { return req->path; }
const char *http_req_id(const http_req *req) { return req->id; }
const char *http_req_route_name(const http_req *req) {
  if (!req->matched) return NULL;
  return req->match.route->name ? req->match.route->name : req->match.route->pattern;
}
const char *http_req_param(const http_req *req, const char *name) {
  for (size_t i = 0; i < req->match.n_params; i++)
    if (strcmp(req->match.param_names[i], name) == 0) return req->match.param_values[i];
  return NULL;
}
const char *http_req_query(const http_req *req, const char *name) { return url_query_get(&req->query, name); }
size_t http_req_query_all(const http_req *req, const char *name, const char **out, size_t max) {
  return url_query_get_all(&req->query, name, out, max);
}
const char *http_req_header(const http_req *req, const char *name) {
  if (!req->conn) return NULL;
  return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}
const char *http_req_body(const http_req *req, size_t *len) {
  if (len) *len = req->sink == SINK_MEMORY ? req->body.len : 0;
  if (req->sink != SINK_MEMORY) return NULL;
  return req->body.data ? req->body.data : "";
}
const char *http_req_body_file(const http_req *req, uint64_t *size) {
  if (size) *size = req->spool_path ? req->body_bytes : 0;
  return req->spool_path;
}
size_t http_req_n_parts(const http_req *req) { return req->n_parts; }
const http_part *http_req_part(const http_req *req, size_t i) {
  return i < req->n_parts ? &req->parts[i].pub : NULL;
}
const http_part *http_req_part_named(const http_req *req, const char *name) {
  for (size_t i = 0; i < req->n_parts; i++)
    if (req->parts[i].name && strcmp(req->parts[i].name, name) == 0) return &req->parts[i].pub;
  return NULL;
}
int http_part_take_file(http_req *req, size_t i) {
  if (i >= req->n_parts || !req->parts[i].file_path)
    return err_set(ERR_INVALID, "part %zu has no spooled file", i);
  req->parts[i].taken = true;
  return 0;
}
size_t http_req_ws_protocols(const http_req *req, const char **out, size_t max) {
  http_req *r = (http_req *)req; /* lazily parsed cache */
  if (!r->ws_protos_parsed) {
    r->ws_protos_parsed = true;
    r->n_ws_protos = auth_split_protocols(http_req_header(req, "Sec-WebSocket-Protocol"), &r->ws_scratch,
                                          r->ws_protos, ARRAY_LEN(r->ws_protos));
  }
  size_t n = r->n_ws_protos < max ? r->n_ws_protos : max;
  for (size_t i = 0; i < n; i++) out[i] = r->ws_protos[i];
  return n;
}

stream_hub *http_req_hub_(http_req *req) { return req->srv->hub; }
struct MHD_Connection *http_req_conn_(http_req *req) { return req->conn; }
void http_req_set_stream_(http_req *req, http_stream *s) { req->stream = s; }

/* ---- responses ---------------------------------------------------------- */

int http_resp_header(http_req *req, const char *name, const char *value) {
  if (!name || !value || !*name) return err_set(ERR_INVALID, "response header: name and value required");
  if (strpbrk(name, "\r\n: ") || strpbrk(value, "\r\n"))
    return err_set(ERR_INVALID, "response header %s: CR, LF or bad name", name);
  if (req->answered) return err_set(ERR_INVALID, "response header %s: request already answered", name);
  hdr *nh = realloc(req->hdrs, (req->n_hdrs + 1) * sizeof *nh);
  if (!nh) return err_set(ERR_NOMEM, "response header %s", name);
  req->hdrs = nh;
  char *n = strdup(name), *v = strdup(value);
  if (!n || !v) {
    free(n);
    free(v);
    return err_set(ERR_NOMEM, "response header %s", name);
  }
  req->hdrs[req->n_hdrs++] = (hdr){n, v};
  return 0;
}

void http_resp_timing_header(http_req *req, const char *name) { req->timing_hdr = name; }

static bool has_user_header(const http_req *req, const char *name) {
  for (size_t i = 0; i < req->n_hdrs; i++)
    if (strcasecmp(req->hdrs[i].name, name) == 0) return true;
  return false;
}

int http_req_queue_(http_req *req, int status, struct MHD_Response *resp) {
  if (req->answered) {
    MHD_destroy_response(resp);
    return err_set(ERR_INVALID, "request %s answered twice", req->id);
  }
  req->answered = true;
  req->status = status;
  if (!has_user_header(req, "x-request-id")) MHD_add_response_header(resp, "x-request-id", req->id);
  /* An origin the policy checked is echoed (Vary: Origin keeps caches
   * honest); with a key, or without an Origin header, any origin. */
  if (req->origin) {
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", req->origin);
    MHD_add_response_header(resp, "Vary", "Origin");
  } else if (!req->origin_refused) {
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
  }
  MHD_add_response_header(resp, "Access-Control-Expose-Headers", k_expose_headers);
  for (size_t i = 0; i < req->n_hdrs; i++) MHD_add_response_header(resp, req->hdrs[i].name, req->hdrs[i].value);
  if (req->timing_hdr) {
    char ms[24];
    snprintf(ms, sizeof ms, "%llu", (unsigned long long)((time_mono_ns() - req->t_start_ns) / 1000000u));
    MHD_add_response_header(resp, req->timing_hdr, ms);
  }
  enum MHD_Result r = MHD_queue_response(req->conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  if (r != MHD_YES) {
    req->queue_failed = true;
    return err_set(ERR_IO, "request %s: could not queue the %d response", req->id, status);
  }
  return 0;
}

int http_respond(http_req *req, int status, const char *content_type, const void *body, size_t len) {
  if (req->answered) return err_set(ERR_INVALID, "request %s answered twice", req->id);
  struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)(body ? body : ""), MHD_RESPMEM_MUST_COPY);
  if (!r) return err_set(ERR_NOMEM, "response of %zu bytes", len);
  if (content_type && !has_user_header(req, "Content-Type")) MHD_add_response_header(r, "Content-Type", content_type);
  req->resp_bytes = req->is_head ? 0 : len;
  return http_req_queue_(req, status, r);
}

int http_respond_file(http_req *req, int status, const char *content_type, const char *path) {
  if (req->answered) return err_set(ERR_INVALID, "request %s answered twice", req->id);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err_set(errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return err_set(ERR_IO, "%s is not a regular file", path);
  }
  struct MHD_Response *r = MHD_create_response_from_fd64((uint64_t)st.st_size, fd);
  if (!r) {
    close(fd);
    return err_set(ERR_NOMEM, "file response for %s", path);
  }
  if (content_type && !has_user_header(req, "Content-Type")) MHD_add_response_header(r, "Content-Type", content_type);
  req->resp_bytes = req->is_head ? 0 : (uint64_t)st.st_size;
  return http_req_queue_(req, status, r);
}

static void decorate(http_req *req) {
  if (req->decorated) return;
  req->decorated = true;
  if (req->srv->cfg.decorate) req->srv->cfg.decorate(req, req->srv->cfg.hook_ctx);
}

static void json_escape(buf *b, const char *s) {
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') buf_append_byte(b, '\\'), buf_append_byte(b, (char)c);
    else if (c < 0x20 || c >= 0x7f) buf_append_byte(b, '?');
    else buf_append_byte(b, (char)c);
  }
}

/* An error found by the layer: through cfg.on_error, else plain JSON. */
static void emit_error(http_req *req, int status, int code, const char *message, const char *param) {
  if (req->answered) return;
  decorate(req);
  http_config *cfg = &req->srv->cfg;
  if (cfg->on_error) cfg->on_error(req, status, code, message, param, cfg->hook_ctx);
  if (req->answered) return;
  buf b = BUF_INIT;
  buf_append_str(&b, "{\"error\":{\"message\":\"");
  json_escape(&b, message);
  buf_appendf(&b, "\",\"type\":\"%s\",\"code\":\"%s\",\"param\":", status >= 500 ? "server_error" : "invalid_request_error",
              err_name(code));
  if (param) {
    buf_append_byte(&b, '"');
    json_escape(&b, param);
    buf_append_str(&b, "\"}}");
  } else {
    buf_append_str(&b, "null}}");
  }
  if (http_respond(req, status, "application/json", b.data ? b.data : "{}", b.len) != 0)
    LOG_WARN("http", "%s: could not send the %d error", req->id, status);
  buf_free(&b);
}

/* ---- body sinks ---------------------------------------------------------- */

static void set_body_error(http_req *req, int status, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_body_error(http_req *req, int status, int code, const char *fmt, ...) {
  if (req->err_status) return;
  req->err_status = status;
  req->err_code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(req->err_msg, sizeof req->err_msg, fmt, ap);
  va_end(ap);
}

/* Takes n bytes of the server's budget for bodies held in memory; false
 * (nothing taken) when the budget has no room. */
static bool body_mem_take(http_req *req, uint64_t n) {
  http_server *srv = req->srv;
  uint64_t cur = atomic_load(&srv->body_mem);
  do {
    if (cur + n > srv->cfg.body_budget) return false;
  } while (!atomic_compare_exchange_weak(&srv->body_mem, &cur, cur + n));
  req->mem_held += n;
  return true;
}

static void body_mem_release(http_req *req) {
  if (req->mem_held) atomic_fetch_sub(&req->srv->body_mem, req->mem_held);
  req->mem_held = 0;
}

static void body_over_budget(http_req *req) {
  http_resp_header(req, "Retry-After", "1");
  set_body_error(req, 503, ERR_OVERLOADED,
                 "the server is holding as many request bodies in memory as its budget allows (%llu bytes); "
                 "retry shortly",
                 (unsigned long long)req->srv->cfg.body_budget);
}

static int spool_open(http_req *req, char **path_out, int *fd_out) {
  size_t n = strlen(req->srv->spool_dir) + 32;
  char *p = malloc(n);
  if (!p) return err_set(ERR_NOMEM, "spool path");
  snprintf(p, n, "%s/parley-up-XXXXXX", req->srv->spool_dir);
  int fd = mkostemp(p, O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    free(p);
    return err_set(ERR_IO, "spool file in %s: %s", req->srv->spool_dir, strerror(e));
  }
  *path_out = p;
  *fd_out = fd;
  return 0;
}

static int write_all(int fd, const char *data, size_t len) {
  while (len) {
    ssize_t w = write(fd, data, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      return err_set(ERR_IO, "spool write: %s", strerror(errno));
    }
    data += w;
    len -= (size_t)w;
  }
  return 0;
}

static int mp_on_begin(void *ctx, const char *name, const char *filename, const char *content_type) {
  http_req *req = ctx;
  if (req->n_parts == req->cap_parts) {
    size_t ncap = req->cap_parts ? req->cap_parts * 2 : 8;
    part_int *np = realloc(req->parts, ncap * sizeof *np);
    if (!np) return err_set(ERR_NOMEM, "multipart: %zu parts", ncap);
    req->parts = np;
    req->cap_parts = ncap;
  }
  part_int *p = &req->parts[req->n_parts];
  memset(p, 0, sizeof *p);
  p->fd = -1;
  p->name = str_dup(name ? name : "");
  p->filename = str_dup(filename);
  p->content_type = str_dup(content_type);
  if (!p->name || (filename && !p->filename) || (content_type && !p->content_type)) {
    free(p->name), free(p->filename), free(p->content_type);
    return err_set(ERR_NOMEM, "multipart part headers");
  }
  req->n_parts++;
  req->in_part = true;
  if (filename) {
    int rc = spool_open(req, &p->file_path, &p->fd);
    if (rc) return rc;
  }
  return 0;
}

static int mp_on_data(void *ctx, const char *data, size_t len) {
  http_req *req = ctx;
  part_int *p = &req->parts[req->n_parts - 1];
  if (p->fd >= 0) {
    p->pub.file_size += len;
    return write_all(p->fd, data, len);
  }
  size_t cap = req->srv->cfg.max_form_field;
  if (p->value.len + len > cap)
    return err_set(ERR_TOO_LARGE, "form field \"%s\" is larger than %zu bytes", p->name, cap);
  if (!body_mem_take(req, len)) {
    body_over_budget(req);
    return 0;
  }
  return buf_append(&p->value, data, len);
}

static int mp_on_end(void *ctx) {
  http_req *req = ctx;
  part_int *p = &req->parts[req->n_parts - 1];
  req->in_part = false;
  if (p->fd >= 0) {
    close(p->fd);
    p->fd = -1;
  }
  return 0;
}

/* Fills the public views once the parts array no longer moves. */
static void parts_publish(http_req *req) {
  for (size_t i = 0; i < req->n_parts; i++) {
    part_int *p = &req->parts[i];
    p->pub.name = p->name;
    p->pub.filename = p->filename;
    p->pub.content_type = p->content_type;
    p->pub.file_path = p->file_path;
    if (!p->file_path) {
      p->pub.value = p->value.data ? p->value.data : "";
      p->pub.value_len = p->value.len;
    }
  }
}

/* Appends to a JSON body: in memory up to BODY_SPOOL_AT (from the budget),
 * then to a spool file that body_finish reads back. */
static int body_json_append(http_req *req, const char *data, size_t len) {
  if (req->spool_fd >= 0) return write_all(req->spool_fd, data, len);
  if (req->body.len + len <= BODY_SPOOL_AT) {
    if (req->body.len + len > req->mem_held && !body_mem_take(req, req->body.len + len - req->mem_held)) {
      body_over_budget(req);
      return 0;
    }
    return buf_append(&req->body, data, len);
  }
  int rc = spool_open(req, &req->spool_path, &req->spool_fd);
  if (!rc && req->body.len) rc = write_all(req->spool_fd, req->body.data, req->body.len);
  if (!rc) rc = write_all(req->spool_fd, data, len);
  buf_free(&req->body);
  body_mem_release(req);
  return rc;
}

/* A spooled JSON body comes back into memory (from the budget) for the
 * handler. */
static void body_json_load(http_req *req) {
  uint64_t n = req->body_bytes;
  if (!body_mem_take(req, n + 1)) {
    body_over_budget(req);
    return;
  }
  int rc = buf_reserve(&req->body, (size_t)n + 1);
  for (uint64_t off = 0; !rc && off < n;) {
    ssize_t r = pread(req->spool_fd, req->body.data + off, (size_t)(n - off), (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) rc = err_set(ERR_IO, "reading back the spooled request body: %s", r < 0 ? strerror(errno) : "short");
    else off += (uint64_t)r;
  }
  if (rc) {
    set_body_error(req, 500, rc, "%s", err_detail());
    return;
  }
  req->body.len = (size_t)n;
  req->body.data[n] = '\0';
}

static void body_consume(http_req *req, const char *data, size_t len) {
  req->body_bytes += len;
  if (req->err_status) return;
  if (req->body_bytes > req->body_limit) {
    set_body_error(req, 413, ERR_TOO_LARGE, "request body is larger than the limit of %llu bytes",
                   (unsigned long long)req->body_limit);
    return;
  }
  int rc = 0;
  switch (req->sink) {
  case SINK_DISCARD: break;
  case SINK_MEMORY: rc = body_json_append(req, data, len); break;
  case SINK_FILE: rc = write_all(req->spool_fd, data, len); break;
  case SINK_MULTIPART: rc = mp_parser_feed(req->mp, data, len); break;
  }
  if (rc == ERR_TOO_LARGE) set_body_error(req, 413, rc, "%s", err_detail());
  else if (rc == ERR_PARSE || rc == ERR_INVALID) set_body_error(req, 400, rc, "malformed multipart body: %s", err_detail());
  else if (rc) set_body_error(req, 500, rc, "reading the request body: %s", err_detail());
}

static void body_finish(http_req *req) {
  if (req->sink == SINK_MULTIPART && !req->err_status) {
    int rc = mp_parser_finish(req->mp);
    if (rc) set_body_error(req, 400, rc, "malformed multipart body: %s", err_detail());
  }
  if (req->sink == SINK_MEMORY && req->spool_fd >= 0) {
    if (!req->err_status) body_json_load(req);
    close(req->spool_fd);
    req->spool_fd = -1;
    unlink(req->spool_path);
    free(req->spool_path);
    req->spool_path = NULL; /* http_req_body_file is for HTTP_BODY_FILE routes only */
  }
  if (req->sink == SINK_FILE && req->spool_fd >= 0) {
    close(req->spool_fd);
    req->spool_fd = -1;
  }
  if (req->sink == SINK_MULTIPART) parts_publish(req);
}

/* ---- request phases ------------------------------------------------------ */

/* An error found from the request head. Answering at once and closing while
 * the client is still sending its body makes the kernel reset the
 * connection, and the client may never read the answer. So when a body is
 * coming (and the client did not ask for 100-continue) and it is small
 * enough to swallow, the error is kept and sent after the body was drained;
 * otherwise (no body, 100-continue, or a huge Content-Length) at once. */
static void early_error(http_req *req, int status, int code, const char *message, const char *param) {
  const char *cl = http_req_header(req, "Content-Length");
  const char *te = http_req_header(req, "Transfer-Encoding");
  const char *expect = http_req_header(req, "Expect");
  uint64_t clen = 0;
  bool has_cl = cl && parse_u64(cl, &clen) == 0;
  bool chunked = te && has_token_ci(te, "chunked");
  bool body_coming = (has_cl && clen > 0) || chunked;
  bool continue_asked = expect && has_token_ci(expect, "100-continue");
  if (body_coming && !continue_asked && (chunked || clen <= req->body_limit + OVER_LIMIT_DRAIN)) {
    set_body_error(req, status, code, "%s", message);
    req->sink = SINK_DISCARD;
    (void)param;
    return;
  }
  emit_error(req, status, code, message, param);
}

static void answer_preflight(http_req *req) {
  decorate(req);
  struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (!r) return;
  const char *want = http_req_header(req, "Access-Control-Request-Headers");
  bool want_ok = want && !strpbrk(want, "\r\n") && strlen(want) < 4096;
  MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS, HEAD");
  MHD_add_response_header(r, "Access-Control-Allow-Headers", want_ok ? want : k_allow_headers_default);
  MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
  http_req_queue_(req, 204, r);
}

static bool check_auth(http_req *req) {
  http_server *srv = req->srv;
  if (srv->cfg.n_api_keys == 0) return true;
  auth_input in = {
      .authorization = http_req_header(req, "Authorization"),
      .x_api_key = http_req_header(req, "x-api-key"),
      .api_key = http_req_header(req, "api-key"),
  };
  const char *protos[16];
  if (req->match.route && (req->match.route->flags & HTTP_ROUTE_WS)) {
    in.n_ws_protocols = http_req_ws_protocols(req, protos, ARRAY_LEN(protos));
    in.ws_protocols = protos;
  }
  return auth_check((const char *const *)srv->keys, srv->cfg.n_api_keys, &in);
}

/* Framing the layer refuses before reading a body byte, answered at once on
 * a connection that is then closed (its body cannot be skipped safely): a
 * Transfer-Encoding other than chunked (501; read to the end it would wait
 * for the client to close, and a proxy in front may frame it otherwise),
 * Transfer-Encoding with Content-Length (400, the smuggling pair), a
 * Content-Length too large to count (413) or not a number (400). */
static bool framing_refused(http_req *req) {
  char msg[256];
  const char *te = http_req_header(req, "Transfer-Encoding");
  const char *cl = http_req_header(req, "Content-Length");
  int status = 0, code = 0;
  uint64_t clen;
  if (te && !(has_token_ci(te, "chunked") && strspn(te, " \t") + strlen("chunked") <= strlen(te) &&
                     strcasecmp(te + strspn(te, " \t"), "chunked") == 0)) {
    char shown[80];
    sanitize(te, shown, sizeof shown);
    status = 501, code = ERR_UNSUPPORTED;
    snprintf(msg, sizeof msg, "Transfer-Encoding '%s' is not supported: send the body with Content-Length or "
                              "Transfer-Encoding: chunked", shown);
  } else if (te && cl) {
    status = 400, code = ERR_INVALID;
    snprintf(msg, sizeof msg, "a request may not carry both Transfer-Encoding and Content-Length");
  } else if (cl) {
    int rc = parse_u64(cl, &clen);
    if (rc == ERR_RANGE) {
      status = 413, code = ERR_TOO_LARGE;
      snprintf(msg, sizeof msg, "Content-Length %.40s is larger than any body this server accepts", cl);
    } else if (rc) {
      status = 400, code = ERR_PARSE;
      snprintf(msg, sizeof msg, "Content-Length must be a decimal number of bytes");
    }
  }
  if (!status) return false;
  http_resp_header(req, "Connection", "close");
  emit_error(req, status, code, msg, NULL);
  return true;
}

/* Connection caps: the server's sockets past max_connections - conn_reserve,
 * or a client address's past max_conns_per_addr, are answered 503 (and
 * closed) unless the route is HTTP_ROUTE_RESERVED, so health checks and the
 * admin routes still answer when idle WebSockets or a flood hold the rest. */
static bool conn_capped(http_req *req, char *msg, size_t cap) {
  http_server *srv = req->srv;
  if (!req->cc) return false;
  unsigned same = 0, total;
  pthread_mutex_lock(&srv->guard_mu);
  total = srv->n_conns;
  for (conn_ctx *c = srv->conns; c; c = c->next) same += memcmp(c->addr, req->cc->addr, sizeof c->addr) == 0;
  pthread_mutex_unlock(&srv->guard_mu);
  unsigned open_cap = srv->cfg.max_connections - srv->cfg.conn_reserve;
  if (total > open_cap)
    snprintf(msg, cap, "the server has %u connections open, its limit for this route is %u; retry shortly", total,
             open_cap);
  else if (same > srv->cfg.max_conns_per_addr)
    snprintf(msg, cap, "this client address has %u connections open, the limit is %u; close some and retry",
             same, srv->cfg.max_conns_per_addr);
  else return false;
  return true;
}

static enum MHD_Result begin_request(http_req *req) {
  http_server *srv = req->srv;
  char msg[512], spath[200];
  req->body_limit = 0; /* until the route is known: drain allowance only */
  if (framing_refused(req)) return MHD_YES;
  /* Query string. */
  const char *q = strchr(req->uri, '?');
  if (q) {
    int rc = url_query_parse(q + 1, strlen(q + 1), &req->query);
    if (rc) {
      early_error(req, rc == ERR_TOO_LARGE ? 414 : 400, rc, err_detail(), NULL);
      return MHD_YES;
    }
  }
  if (srv->cfg.host_check) {
    const char *h = http_req_header(req, "Host");
    if (!host_header_allowed(h, srv->hostname)) {
      char shown[120];
      sanitize(h, shown, sizeof shown);
      snprintf(msg, sizeof msg,
               "Host '%s' is not this machine: a server listening on loopback answers only requests addressed to "
               "localhost or a local address (DNS-rebinding guard)",
               shown);
      early_error(req, 403, ERR_FORBIDDEN, msg, NULL);
      return MHD_YES;
    }
  }
  /* The origin policy (no key configured): a web page of another site may
   * neither read answers nor open WebSockets. */
  const char *origin = http_req_header(req, "Origin");
  if (origin && srv->cfg.n_api_keys == 0) {
    if (!origin_allowed(origin, srv->cfg.allowed_origins)) {
      char shown[120];
      sanitize(origin, shown, sizeof shown);
      snprintf(msg, sizeof msg,
               "Origin '%s' is not allowed: without an API key this server answers web pages only from local "
               "origins (start parley with --allowed-origins '%s' to allow it, or set an API key)",
               shown, shown);
      req->origin_refused = true;
      early_error(req, 403, ERR_FORBIDDEN, msg, NULL);
      return MHD_YES;
    }
    if (!strpbrk(origin, "\r\n")) req->origin = origin;
  }
  if (strcmp(req->method, "OPTIONS") == 0) {
    answer_preflight(req);
    return MHD_YES;
  }
  sanitize(req->path, spath, sizeof spath);
  int rc = router_match_path(srv->rt, req->method, req->path, &req->match);
  /* Only a matched public route skips the key: unknown paths and wrong
   * methods answer 401 to a caller without a key, so routes stay private. */
  bool is_public = rc == 0 && (req->match.route->flags & HTTP_ROUTE_PUBLIC);
  if (!is_public && !check_auth(req)) {
    early_error(req, 401, ERR_AUTH, AUTH_FAILED_MESSAGE, NULL);
    return MHD_YES;
  }
  /* Diagnostic routes exist only on servers that ask for them (--admin) or
   * that need a key anyway. */
  if (rc == 0 && (req->match.route->flags & HTTP_ROUTE_ADMIN) && !srv->cfg.admin_routes && srv->cfg.n_api_keys == 0)
    rc = ERR_NOT_FOUND;
  if (rc == ERR_NOT_FOUND) {
    snprintf(msg, sizeof msg, "Invalid URL (%s %s)", req->method, spath);
    early_error(req, 404, ERR_NOT_FOUND, msg, NULL);
    return MHD_YES;
  }
  if (rc == ERR_METHOD) {
    http_resp_header(req, "Allow", req->match.allow);
    snprintf(msg, sizeof msg, "Method %s not allowed for %s (allowed: %s)", req->method, spath, req->match.allow);
    early_error(req, 405, ERR_METHOD, msg, NULL);
    return MHD_YES;
  }
  if (rc) {
    snprintf(msg, sizeof msg, "Invalid URL (%s %s): %s", req->method, spath, err_detail());
    early_error(req, 400, rc, msg, NULL);
    return MHD_YES;
  }
  req->matched = true;
  unsigned flags = req->match.route->flags;
  if (!(flags & HTTP_ROUTE_RESERVED) && conn_capped(req, msg, sizeof msg)) {
    http_resp_header(req, "Connection", "close");
    http_resp_header(req, "Retry-After", "1");
    early_error(req, 503, ERR_OVERLOADED, msg, NULL);
    return MHD_YES;
  }
  /* Body sink and limit. */
  if (flags & (HTTP_BODY_MULTIPART | HTTP_BODY_FILE | HTTP_BODY_IGNORE)) req->body_limit = srv->cfg.max_upload;
  else req->body_limit = srv->cfg.max_json_body;
  uint64_t clen = 0;
  const char *cl = http_req_header(req, "Content-Length");
  if (cl && parse_u64(cl, &clen) == 0 && clen > req->body_limit) {
    snprintf(msg, sizeof msg, "request body of %llu bytes is larger than the limit of %llu bytes",
             (unsigned long long)clen, (unsigned long long)req->body_limit);
    early_error(req, 413, ERR_TOO_LARGE, msg, NULL);
    return MHD_YES;
  }
  if (flags & HTTP_BODY_MULTIPART) {
    char boundary[256];
    const char *ct = http_req_header(req, "Content-Type");
    if (!ct || mp_boundary_from_content_type(ct, boundary, sizeof boundary) != 0) {
      snprintf(msg, sizeof msg, "Content-Type must be multipart/form-data with a boundary: %s", err_detail());
      early_error(req, 400, ERR_PARSE, msg, NULL);
      return MHD_YES;
    }
    static const mp_callbacks cbs = {mp_on_begin, mp_on_data, mp_on_end};
    rc = mp_parser_new(boundary, &cbs, req, &req->mp);
    if (rc) {
      early_error(req, rc == ERR_NOMEM ? 500 : 400, rc, err_detail(), NULL);
      return MHD_YES;
    }
    req->sink = SINK_MULTIPART;
  } else if (flags & HTTP_BODY_FILE) {
    rc = spool_open(req, &req->spool_path, &req->spool_fd);
    if (rc) {
      early_error(req, 500, rc, err_detail(), NULL);
      return MHD_YES;
    }
    req->sink = SINK_FILE;
  } else if (flags & HTTP_BODY_JSON) {
    req->sink = SINK_MEMORY;
    /* Room for a small declared body up front; a large one spools. */
    if (clen && clen <= BODY_SPOOL_AT) {
      if (!body_mem_take(req, clen)) { /* answered once the small body is drained */
        body_over_budget(req);
        req->sink = SINK_DISCARD;
        return MHD_YES;
      }
      if (buf_reserve(&req->body, (size_t)clen) != 0) {
        early_error(req, 500, ERR_NOMEM, "out of memory for the request body", NULL);
        return MHD_YES;
      }
    }
  }
  return MHD_YES;
}

static bool ws_validate(http_req *req) {
  const char *up = http_req_header(req, "Upgrade");
  if (!up || !has_token_ci(up, "websocket")) {
    http_resp_header(req, "Upgrade", "websocket");
    emit_error(req, 426, ERR_UNSUPPORTED, "this endpoint needs a WebSocket upgrade (Upgrade: websocket)", NULL);
    return false;
  }
  if (!has_token_ci(http_req_header(req, "Connection"), "upgrade")) {
    emit_error(req, 400, ERR_INVALID, "WebSocket handshake: the Connection header must contain 'upgrade'", NULL);
    return false;
  }
  const char *ver = http_req_header(req, "Sec-WebSocket-Version");
  if (!ver || strcmp(ver, "13") != 0) {
    http_resp_header(req, "Sec-WebSocket-Version", "13");
    emit_error(req, 426, ERR_UNSUPPORTED, "WebSocket handshake: Sec-WebSocket-Version must be 13", NULL);
    return false;
  }
  const char *key = http_req_header(req, "Sec-WebSocket-Key");
  if (!key || !*key || strlen(key) > 128) {
    emit_error(req, 400, ERR_INVALID, "WebSocket handshake: Sec-WebSocket-Key is missing or too long", NULL);
    return false;
  }
  return true;
}

static void run_handler(http_req *req) {
  if (req->err_status) { /* from the body, or from the head and deferred (early_error) */
    emit_error(req, req->err_status, req->err_code, req->err_msg, NULL);
    return;
  }
  const http_route *rt = req->match.route;
  if ((rt->flags & HTTP_ROUTE_WS) && !ws_validate(req)) return;
  decorate(req);
  err_clear();
  rt->fn(req, rt->ctx);
  if (!req->answered) {
    char msg[256];
    snprintf(msg, sizeof msg, "the handler for %s did not answer", http_req_route_name(req));
    LOG_ERROR("http", "%s: %s", req->id, msg);
    emit_error(req, 500, ERR_INTERNAL, msg, NULL);
  }
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls) {
  (void)cls, (void)url, (void)version;
  http_req *req = *con_cls;
  if (!req) return MHD_NO; /* allocation failed in on_uri */
  if (req->phase == PH_NEW) {
    req->conn = conn;
    req->method = strdup(method);
    if (!req->method) return MHD_NO;
    if (req->cc) {
      pthread_mutex_lock(&req->srv->guard_mu);
      req->cc->busy = true;
      pthread_mutex_unlock(&req->srv->guard_mu);
    }
    req->is_head = strcmp(method, "HEAD") == 0;
    req->phase = PH_BODY;
    atomic_fetch_add(&req->srv->in_flight, 1);
    req->counted_in_flight = true;
    enum MHD_Result r = begin_request(req);
    if (req->answered) req->phase = PH_DONE;
    return req->queue_failed ? MHD_NO : r;
  }
  if (req->phase == PH_BODY) {
    if (*upload_data_size) {
      body_consume(req, upload_data, *upload_data_size);
      *upload_data_size = 0;
      if (req->err_status && req->body_bytes > req->body_limit + OVER_LIMIT_DRAIN) return MHD_NO;
      return MHD_YES;
    }
    req->phase = PH_DONE;
    body_finish(req);
    run_handler(req);
    return req->queue_failed ? MHD_NO : MHD_YES;
  }
  /* PH_DONE: an early answer was queued; swallow whatever body still comes. */
  req->body_bytes += *upload_data_size;
  *upload_data_size = 0;
  return req->body_bytes > req->body_limit + OVER_LIMIT_DRAIN ? MHD_NO : MHD_YES;
}

/* Pieces of the query string that url_query_parse would keep. */
static size_t query_pieces(const char *uri) {
  const char *q = strchr(uri, '?');
  if (!q) return 0;
  size_t n = 0;
  for (const char *p = q + 1; *p;) {
    size_t l = strcspn(p, "&");
    n += l > 0;
    p += l;
    if (*p) p++;
  }
  return n;
}

/* Answers 414 on the raw socket of a request whose query arguments would
 * exhaust libmicrohttpd's connection pool (which would leave it unanswered)
 * and shuts the socket down, so MHD drops the connection. A TLS socket is
 * only shut down: plain bytes there would be garbage. */
static void refuse_query_flood(struct MHD_Connection *conn, size_t n_args) {
  const union MHD_ConnectionInfo *fi = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  const union MHD_ConnectionInfo *ti = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (!fi) return;
  if (!ti || !ti->tls_session) {
    char body[256], head[512];
    int bn = snprintf(body, sizeof body,
                      "{\"error\":{\"message\":\"the request has %zu query arguments or too long a query: at most "
                      "%d arguments fit\",\"type\":\"invalid_request_error\",\"code\":\"%s\",\"param\":null}}",
                      n_args, URL_QUERY_MAX_PARAMS, err_name(ERR_TOO_LARGE));
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 414 URI Too Long\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                      "Connection: close\r\n\r\n%s",
                      bn, body);
    if (hn > 0 && (size_t)hn < sizeof head) {
      ssize_t w = send(fi->connect_fd, head, (size_t)hn, MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)w;
    }
  }
  shutdown(fi->connect_fd, SHUT_RDWR);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  http_server *srv = cls;
  size_t n_args = query_pieces(uri ? uri : "");
  if (n_args > URL_QUERY_MAX_PARAMS || n_args * QUERY_POOL_BYTES_PER_ARG + strlen(uri) > CONN_MEMORY_LIMIT / 2) {
    refuse_query_flood(conn, n_args);
    return NULL; /* on_access sees no request and refuses the connection */
  }
  http_req *req = calloc(1, sizeof *req);
  if (!req) return NULL;
  req->srv = cls;
  req->spool_fd = -1;
  req->t_start_ns = time_mono_ns();
  req->uri = strdup(uri ? uri : "/");
  request_id_make(req->id);
  if (!req->uri) {
    free(req);
    return NULL;
  }
  /* Absolute-form targets ("http://host/p") keep only the path. */
  const char *p = req->uri;
  const char *scheme = strstr(p, "://");
  if (p[0] != '/' && scheme) {
    p = strchr(scheme + 3, '/');
    if (!p) p = "/";
  }
  size_t plen = strcspn(p, "?");
  req->path = str_ndup(p, plen);
  if (!req->path) {
    free(req->uri);
    free(req);
    return NULL;
  }
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  req->cc = ci ? ci->socket_context : NULL;
  if (req->cc) {
    pthread_mutex_lock(&srv->guard_mu);
    http_req *stale = req->cc->req; /* a request MHD dropped without completing it */
    req->cc->req = req;
    pthread_mutex_unlock(&srv->guard_mu);
    if (stale) req_free(stale);
  }
  return req;
}

static void req_free(http_req *req) {
  for (size_t i = 0; i < req->n_parts; i++) {
    part_int *p = &req->parts[i];
    if (p->fd >= 0) close(p->fd);
    if (p->file_path && !p->taken) unlink(p->file_path);
    free(p->name), free(p->filename), free(p->content_type), free(p->file_path);
    buf_free(&p->value);
  }
  free(req->parts);
  body_mem_release(req);
  if (req->mp) mp_parser_free(req->mp);
  if (req->spool_fd >= 0) close(req->spool_fd);
  if (req->spool_path) unlink(req->spool_path);
  free(req->spool_path);
  for (size_t i = 0; i < req->n_hdrs; i++) free(req->hdrs[i].name), free(req->hdrs[i].value);
  free(req->hdrs);
  buf_free(&req->body);
  url_query_free(&req->query);
  router_match_free(&req->match);
  free(req->ws_scratch);
  free(req->uri);
  free(req->path);
  free(req->method);
  free(req);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  http_server *srv = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    conn_ctx *cc = calloc(1, sizeof *cc);
    *socket_context = cc;
    if (!cc) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    cc->fd = ci ? ci->connect_fd : -1;
    cc->waiting_since_ns = time_mono_ns();
    const union MHD_ConnectionInfo *ai = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ai ? ai->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET) {
      cc->addr[0] = 4;
      memcpy(cc->addr + 1, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
      cc->addr[0] = 6;
      memcpy(cc->addr + 1, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    }
    pthread_mutex_lock(&srv->guard_mu);
    cc->next = srv->conns;
    if (srv->conns) srv->conns->prev = cc;
    srv->conns = cc;
    srv->n_conns++;
    pthread_mutex_unlock(&srv->guard_mu);
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    conn_ctx *cc = *socket_context;
    *socket_context = NULL;
    if (!cc) return;
    pthread_mutex_lock(&srv->guard_mu);
    if (cc->prev) cc->prev->next = cc->next;
    else srv->conns = cc->next;
    if (cc->next) cc->next->prev = cc->prev;
    srv->n_conns--;
    http_req *orphan = cc->req; /* MHD never completed it (e.g. its pool ran out) */
    pthread_mutex_unlock(&srv->guard_mu);
    if (orphan && !orphan->stream) {
      if (orphan->counted_in_flight) atomic_fetch_sub(&srv->in_flight, 1);
      orphan->cc = NULL;
      req_free(orphan);
    }
    free(cc);
  }
}

/* Runs on the stream monitor thread about once a second. */
static void guard_tick(void *arg) {
  http_server *srv = arg;
  uint64_t limit = (uint64_t)srv->cfg.conn_timeout_s * 1000000000ull;
  pthread_mutex_lock(&srv->guard_mu);
  /* The clock is read under the lock: a request that ended just before
   * would otherwise have waiting_since_ns after now. */
  uint64_t now = time_mono_ns();
  for (conn_ctx *cc = srv->conns; cc; cc = cc->next) {
    if (cc->busy || cc->fd < 0 || http_elapsed_ns(now, cc->waiting_since_ns) < limit) continue;
    shutdown(cc->fd, SHUT_RDWR); /* MHD sees the error and closes it */
    cc->fd = -1;
  }
  pthread_mutex_unlock(&srv->guard_mu);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)conn;
  http_server *srv = cls;
  http_req *req = *con_cls;
  if (!req) return;
  *con_cls = NULL;
  if (req->cc) {
    pthread_mutex_lock(&srv->guard_mu);
    if (req->cc->req == req) req->cc->req = NULL;
    pthread_mutex_unlock(&srv->guard_mu);
  }
  uint64_t bytes = req->resp_bytes;
  if (req->stream) {
    bytes = http_stream_bytes_sent_(req->stream);
    http_stream_detach_(req->stream, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
  }
  if (req->counted_in_flight) atomic_fetch_sub(&srv->in_flight, 1);
  if (req->cc && !req->upgraded) {
    pthread_mutex_lock(&srv->guard_mu);
    req->cc->busy = false;
    req->cc->waiting_since_ns = time_mono_ns();
    pthread_mutex_unlock(&srv->guard_mu);
  }
  double secs = (double)(time_mono_ns() - req->t_start_ns) / 1e9;
  int status = req->answered ? req->status : 0;
  if (req->method) {
    http_metrics_observe(srv->metrics, http_req_route_name(req), req->method, status, secs);
    if (srv->cfg.access_log) {
      char spath[200];
      sanitize(req->path, spath, sizeof spath);
      LOG_INFO("http", "%s %s %d %llu %.1fms %s%s", req->method, spath, status, (unsigned long long)bytes,
               secs * 1e3, req->id, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (aborted)");
    }
  }
  req_free(req);
}

/* ---- WebSocket upgrade --------------------------------------------------- */

static void ws_release(void *arg) { MHD_upgrade_action(arg, MHD_UPGRADE_ACTION_CLOSE); }

static void on_upgrade(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra_in,
                       size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
  (void)conn, (void)con_cls;
  http_req *req = cls;
  req->upgraded = true;
  if (req->cc) {
    pthread_mutex_lock(&req->srv->guard_mu);
    req->cc->busy = true; /* the ws loop owns it now */
    pthread_mutex_unlock(&req->srv->guard_mu);
  }
  if (req->counted_in_flight) {
    atomic_fetch_sub(&req->srv->in_flight, 1);
    req->counted_in_flight = false;
  }
  pthread_mutex_lock(&req->srv->ws_mu);
  int rc = req->srv->ws ? ws_loop_adopt(req->srv->ws, sock, extra_in, extra_in_size, req->ws_h, req->ws_ctx,
                                        ws_release, urh)
                        : err_set(ERR_CANCELLED, "server stopping");
  pthread_mutex_unlock(&req->srv->ws_mu);
  if (rc) {
    LOG_WARN("http", "%s: WebSocket adopt failed: %s", req->id, err_detail());
    MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
  }
}

int http_ws_accept(http_req *req, const struct ws_handler *h, void *ctx, const char *subprotocol) {
  if (req->answered) return err_set(ERR_INVALID, "request %s answered twice", req->id);
  if (!req->matched || !(req->match.route->flags & HTTP_ROUTE_WS))
    return err_set(ERR_INVALID, "http_ws_accept on route %s, which is not a WebSocket route",
                   http_req_route_name(req) ? http_req_route_name(req) : "(none)");
  pthread_mutex_lock(&req->srv->ws_mu);
  bool have_ws = req->srv->ws != NULL;
  pthread_mutex_unlock(&req->srv->ws_mu);
  if (!have_ws) return err_set(ERR_UNSUPPORTED, "WebSocket loop is not running");
  char accept[29];
  const char *key = http_req_header(req, "Sec-WebSocket-Key");
  if (!key) return err_set(ERR_INVALID, "Sec-WebSocket-Key missing");
  int rc = ws_accept_key(key, accept);
  if (rc) return rc;
  if (subprotocol && strpbrk(subprotocol, "\r\n,"))
    return err_set(ERR_INVALID, "WebSocket subprotocol contains CR, LF or a comma");
  req->ws_h = h;
  req->ws_ctx = ctx;
  struct MHD_Response *r = MHD_create_response_for_upgrade(on_upgrade, req);
  if (!r) return err_set(ERR_NOMEM, "upgrade response");
  MHD_add_response_header(r, "Upgrade", "websocket");
  MHD_add_response_header(r, "Sec-WebSocket-Accept", accept);
  if (subprotocol) MHD_add_response_header(r, "Sec-WebSocket-Protocol", subprotocol);
  return http_req_queue_(req, MHD_HTTP_SWITCHING_PROTOCOLS, r);
}

/* ---- server --------------------------------------------------------------- */

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char line[512];
  vsnprintf(line, sizeof line, fmt, ap);
  size_t n = strlen(line);
  while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
  LOG_DEBUG("http", "microhttpd: %s", line);
}

int http_server_new(const http_config *cfg, http_server **out) {
  *out = NULL;
  http_server *s = calloc(1, sizeof *s);
  if (!s) return err_set(ERR_NOMEM, "http server");
  s->cfg = *cfg;
  s->listen_fd_quiesced = -1;
  pthread_mutex_init(&s->guard_mu, NULL);
  pthread_mutex_init(&s->ws_mu, NULL);
  if (!s->cfg.max_json_body) s->cfg.max_json_body = DEFAULT_MAX_JSON_BODY;
  if (!s->cfg.max_upload) s->cfg.max_upload = DEFAULT_MAX_UPLOAD;
  if (!s->cfg.max_form_field) s->cfg.max_form_field = DEFAULT_MAX_FORM_FIELD;
  if (!s->cfg.sse_keepalive_ms) s->cfg.sse_keepalive_ms = 15000;
  if (!s->cfg.conn_timeout_s) s->cfg.conn_timeout_s = 60;
  if (!s->cfg.ws_max_message) s->cfg.ws_max_message = DEFAULT_WS_MAX_MESSAGE;
  if (!s->cfg.n_threads) s->cfg.n_threads = DEFAULT_THREADS;
  if (!s->cfg.max_connections) s->cfg.max_connections = DEFAULT_MAX_CONNECTIONS;
  if (!s->cfg.max_conns_per_addr) s->cfg.max_conns_per_addr = DEFAULT_MAX_CONNS_PER_ADDR;
  if (!s->cfg.conn_reserve) s->cfg.conn_reserve = DEFAULT_CONN_RESERVE;
  if (s->cfg.conn_reserve >= s->cfg.max_connections) s->cfg.conn_reserve = s->cfg.max_connections / 2;
  if (!s->cfg.body_budget) s->cfg.body_budget = DEFAULT_BODY_BUDGET;
  if (!s->cfg.ws_idle_timeout_ms) s->cfg.ws_idle_timeout_ms = DEFAULT_WS_IDLE_MS;
  if (!s->cfg.ws_ping_interval_ms) s->cfg.ws_ping_interval_ms = DEFAULT_WS_PING_MS;
  s->allowed_origins = cfg->allowed_origins ? str_dup(cfg->allowed_origins) : NULL;
  s->cfg.allowed_origins = s->allowed_origins;
  s->host = str_dup(cfg->host ? cfg->host : "127.0.0.1");
  if (gethostname(s->hostname, sizeof s->hostname - 1) != 0) s->hostname[0] = '\0';
  s->spool_dir = str_dup(cfg->spool_dir ? cfg->spool_dir : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp"));
  int rc = 0;
  if (!s->host || !s->spool_dir) rc = err_set(ERR_NOMEM, "http server config");
  if (!rc && cfg->n_api_keys) {
    s->keys = calloc(cfg->n_api_keys, sizeof *s->keys);
    if (!s->keys) rc = err_set(ERR_NOMEM, "api keys");
    for (size_t i = 0; !rc && i < cfg->n_api_keys; i++) {
      if (!cfg->api_keys[i] || !*cfg->api_keys[i]) rc = err_set(ERR_INVALID, "api key %zu is empty", i);
      else if (!(s->keys[i] = strdup(cfg->api_keys[i]))) rc = err_set(ERR_NOMEM, "api keys");
    }
  }
  s->cfg.host = s->host;
  s->cfg.spool_dir = s->spool_dir;
  s->cfg.api_keys = (const char *const *)s->keys;
  if (!rc) rc = router_new(&s->rt);
  if (!rc) rc = http_metrics_new(&s->metrics);
  if (!rc) rc = stream_hub_new(s->cfg.sse_keepalive_ms, &s->hub);
  if (rc) {
    http_server_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

int http_server_add_routes(http_server *srv, const http_route *routes, size_t n_routes) {
  if (srv->started) return err_set(ERR_INVALID, "routes must be added before http_server_start");
  return router_add(srv->rt, routes, n_routes);
}

size_t http_server_n_routes(const http_server *srv) { return router_n_routes(srv->rt); }

const http_route *http_server_route(const http_server *srv, size_t i) { return router_route(srv->rt, i); }

int http_server_add_alias(http_server *srv, const char *from, const char *to) {
  if (srv->started) return err_set(ERR_INVALID, "aliases must be added before http_server_start");
  return router_add_alias(srv->rt, from, to);
}

/* One listener with every callback of the server; tls adds GnuTLS with the
 * configured certificate and key. */
static struct MHD_Daemon *start_daemon(http_server *srv, unsigned flags, struct sockaddr *sa, uint16_t port, bool tls) {
  if (tls)
    return MHD_start_daemon(flags | MHD_USE_TLS, port, NULL, NULL, on_access, srv, MHD_OPTION_SOCK_ADDR, sa,
                            MHD_OPTION_HTTPS_MEM_CERT, srv->cfg.tls_cert_pem, MHD_OPTION_HTTPS_MEM_KEY,
                            srv->cfg.tls_key_pem, MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)srv->cfg.n_threads,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned int)srv->cfg.max_connections,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY_LIMIT,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)srv->cfg.conn_timeout_s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
                            NULL, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned int)1, MHD_OPTION_END);
  return MHD_start_daemon(flags, port, NULL, NULL, on_access, srv, MHD_OPTION_SOCK_ADDR, sa,
                          MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)srv->cfg.n_threads,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned int)srv->cfg.max_connections,
                          MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY_LIMIT,
                          MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)srv->cfg.conn_timeout_s,
                          MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
                          MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                          MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned int)1, MHD_OPTION_END);
}

int http_server_start(http_server *srv) {
  if (srv->started) return err_set(ERR_INVALID, "http server already started");
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE |
                   MHD_USE_ERROR_LOG;
  struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, srv->host, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)srv->cfg.port);
  } else if (inet_pton(AF_INET6, srv->host, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)srv->cfg.port);
    flags |= MHD_USE_IPv6;
    if (strcmp(srv->host, "::") == 0) flags |= MHD_USE_DUAL_STACK;
  } else {
    return err_set(ERR_INVALID, "listen address \"%s\" is not an IPv4 or IPv6 address", srv->host);
  }
  if (srv->cfg.port < 0 || srv->cfg.port > 65535) return err_set(ERR_RANGE, "port %d out of range", srv->cfg.port);
  ws_config wc = {.max_message = srv->cfg.ws_max_message,
                  .idle_timeout_ms = srv->cfg.ws_idle_timeout_ms,
                  .ping_interval_ms = srv->cfg.ws_ping_interval_ms};
  int rc = ws_loop_new(&wc, &srv->ws);
  if (rc) {
    LOG_WARN("http", "WebSocket loop unavailable: %s", err_detail());
    srv->ws = NULL;
  }
  bool tls = srv->cfg.tls_cert_pem && srv->cfg.tls_key_pem;
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    if (srv->ws) ws_loop_free(srv->ws);
    srv->ws = NULL;
    return err_set(ERR_UNSUPPORTED, "TLS was asked for, but this libmicrohttpd was built without TLS support");
  }
  bool main_tls = tls && srv->cfg.tls_port == 0;
  srv->d = start_daemon(srv, flags, (struct sockaddr *)&ss, (uint16_t)srv->cfg.port, main_tls);
  if (!srv->d) {
    if (srv->ws) ws_loop_free(srv->ws);
    srv->ws = NULL;
    return err_set(ERR_IO, "cannot listen on %s:%d (address in use or not permitted%s)", srv->host, srv->cfg.port,
                   main_tls ? ", or the TLS certificate and key do not load" : "");
  }
  if (tls && !main_tls) {
    int tp = srv->cfg.tls_port < 0 ? 0 : srv->cfg.tls_port;
    if (ss.ss_family == AF_INET) a4->sin_port = htons((uint16_t)tp);
    else a6->sin6_port = htons((uint16_t)tp);
    srv->d_tls = start_daemon(srv, flags, (struct sockaddr *)&ss, (uint16_t)tp, true);
    if (!srv->d_tls) {
      MHD_stop_daemon(srv->d);
      srv->d = NULL;
      if (srv->ws) ws_loop_free(srv->ws);
      srv->ws = NULL;
      return err_set(ERR_IO, "cannot serve TLS on %s:%d (address in use, or the certificate and key do not load)",
                     srv->host, tp);
    }
    const union MHD_DaemonInfo *ti = MHD_get_daemon_info(srv->d_tls, MHD_DAEMON_INFO_BIND_PORT);
    srv->tls_port = ti ? ti->port : tp;
  }
  stream_hub_set_tick(srv->hub, guard_tick, srv);
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->d, MHD_DAEMON_INFO_BIND_PORT);
  srv->port = info ? info->port : srv->cfg.port;
  if (main_tls) srv->tls_port = srv->port;
  srv->started = true;
  LOG_INFO("http", "listening on %s:%d (%u threads)", srv->host, srv->port, srv->cfg.n_threads);
  return 0;
}

int http_server_port(const http_server *srv) { return srv->port; }
int http_server_tls_port(const http_server *srv) { return srv->tls_port; }

void http_server_free(http_server *srv) {
  if (!srv) return;
  if (srv->hub) stream_hub_set_tick(srv->hub, NULL, NULL);
  if (srv->d) {
    /* No MHD_quiesce_daemon first: with a worker pool on epoll it races the
     * workers' own removal of the listen socket and MHD aborts the process
     * ("Failed to remove listen FD from epoll set", libmicrohttpd 0.9.x).
     * A connection accepted during shutdown is closed by MHD_stop_daemon,
     * which also closes the listen socket. */
    if (srv->hub) stream_hub_cancel_all(srv->hub);
    pthread_mutex_lock(&srv->ws_mu);
    ws_loop *ws = srv->ws;
    srv->ws = NULL; /* upgrades that complete from now on are closed */
    pthread_mutex_unlock(&srv->ws_mu);
    if (ws) ws_loop_free(ws);
    if (srv->d_tls) MHD_stop_daemon(srv->d_tls);
    srv->d_tls = NULL;
    MHD_stop_daemon(srv->d);
    srv->d = NULL;
  }
  if (srv->ws) ws_loop_free(srv->ws);
  stream_hub_free(srv->hub);
  http_metrics_free(srv->metrics);
  router_free(srv->rt);
  if (srv->keys)
    for (size_t i = 0; i < srv->cfg.n_api_keys; i++) free(srv->keys[i]);
  free(srv->keys);
  free(srv->host);
  free(srv->spool_dir);
  free(srv->allowed_origins);
  pthread_mutex_destroy(&srv->guard_mu);
  pthread_mutex_destroy(&srv->ws_mu);
  free(srv);
}

int http_server_metrics(http_server *srv, buf *out) {
  pthread_mutex_lock(&srv->ws_mu);
  size_t n_ws = srv->ws ? ws_loop_n_open(srv->ws) : 0;
  pthread_mutex_unlock(&srv->ws_mu);
  return http_metrics_render(srv->metrics, out, atomic_load(&srv->in_flight), stream_hub_n_open(srv->hub), n_ws);
}
