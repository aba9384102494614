/*
 * test_http_edges.c - the HTTP layer's defences against hostile or careless
 * clients, over loopback: query-argument floods, the origin policy (CORS and
 * WebSocket upgrades), transport edges (Transfer-Encoding, huge
 * Content-Length), the
 * WebSocket idle and ping timeouts, the per-address cap and the reserve for
 * health routes, and the global budget of buffered bodies.
 *
 * Expectations are written by hand from the contract in http/http.h and
 * docs/http.md. Every exchange has a timeout; every socket is loopback.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"
#include "http/http.h"
#include "http/http_int.h"
#include "http/ws.h"
#include "http_client.h"
#include "test.h"

static void e_hello(http_req *req, void *ctx) {
  (void)ctx;
  http_respond(req, 200, "text/plain", "hello", 5);
}

static void e_echo(http_req *req, void *ctx) {
  (void)ctx;
  size_t n = 0;
  const char *b = http_req_body(req, &n);
  http_respond(req, 200, "application/json", b, n);
}

static void e_ws(http_req *req, void *ctx);

static const http_route k_edge_routes[] = {
    {"GET", "/ws", e_ws, NULL, HTTP_ROUTE_WS, "ws"},
    {"GET", "/diag", e_hello, NULL, HTTP_ROUTE_ADMIN, "diag"},
    {"GET", "/health", e_hello, NULL, HTTP_ROUTE_PUBLIC | HTTP_ROUTE_RESERVED, "health"},
    {"GET", "/hello", e_hello, NULL, 0, "hello"},
    {"POST", "/echo", e_echo, NULL, HTTP_BODY_JSON, "echo"},
};

/* A server on 127.0.0.1 with the layer's own error renderer; cfg fields set
 * by the caller are kept. */
static http_server *edge_start(http_config *cfg) {
  cfg->host = "127.0.0.1";
  cfg->port = 0;
  if (!cfg->max_json_body) cfg->max_json_body = 4096;
  if (!cfg->max_upload) cfg->max_upload = 65536;
  cfg->spool_dir = test_tmpdir();
  cfg->n_threads = 2;
  if (!cfg->conn_timeout_s) cfg->conn_timeout_s = 5;
  http_server *srv = NULL;
  if (http_server_new(cfg, &srv) != 0) return NULL;
  if (http_server_add_routes(srv, k_edge_routes, ARRAY_LEN(k_edge_routes)) != 0 || http_server_start(srv) != 0) {
    http_server_free(srv);
    return NULL;
  }
  return srv;
}

/* ---- query-argument flood ------------------------------------------------ */

TEST(http_edges_query_argument_flood_gets_414) {
  http_config cfg = {0};
  http_server *srv = edge_start(&cfg);
  ASSERT_TRUE(srv != NULL);
  static const int k_n_args[] = {200, 990, 1001, 3000};
  for (size_t k = 0; k < ARRAY_LEN(k_n_args); k++) {
    int n_args = k_n_args[k];
    buf req = BUF_INIT, b = BUF_INIT;
    buf_append_str(&req, "GET /hello?");
    for (int i = 0; i < n_args; i++) buf_appendf(&req, "%sa%d=%d", i ? "&" : "", i, i);
    buf_append_str(&req, " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    uint64_t t0 = time_mono_ns();
    raw_req(srv, req.data, req.len, &b, 3000);
    int st = raw_status(&b);
    if (st != (n_args <= URL_QUERY_MAX_PARAMS ? 200 : 414)) fprintf(stderr, "    %d arguments: status %d\n", n_args, st);
    /* Up to the cap the request is served; past it 414; never silence. */
    EXPECT_TRUE(n_args <= URL_QUERY_MAX_PARAMS ? st == 200 : st == 414);
    EXPECT_INT_LT((time_mono_ns() - t0) / 1000000, 2500);
    if (st == 414) EXPECT_STR_CONTAINS(b.data, "\"error\"");
    buf_free(&req);
    buf_free(&b);
  }
  resp r;
  ASSERT_INT_EQ(do_req(srv, "GET", "/hello", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  resp_free(&r);
  http_server_free(srv);
}

/* ---- transport edges ------------------------------------------------------ */

/* One raw exchange; returns the status (0 for none) and fills out. */
static int raw_exchange(http_server *srv, const char *text, size_t len, buf *out) {
  uint64_t t0 = time_mono_ns();
  raw_req(srv, text, len, out, 3000);
  if ((time_mono_ns() - t0) / 1000000 > 2500) return -1; /* left to time out, not answered */
  return raw_status(out);
}

TEST(http_edges_transfer_encoding_and_length_refused_at_once) {
  http_config cfg = {0};
  http_server *srv = edge_start(&cfg);
  ASSERT_TRUE(srv != NULL);
  static const struct {
    const char *req;
    int status;
  } k_cases[] = {
      {"POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\nabc", 501},
      {"POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n", 501},
      {"POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n", 400},
      {"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 18446744073709551610\r\n\r\n{}", 413},
      {"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 18446744073709551615\r\n\r\n{}", 413},
  };
  for (size_t i = 0; i < ARRAY_LEN(k_cases); i++) {
    buf b = BUF_INIT;
    int st = raw_exchange(srv, k_cases[i].req, strlen(k_cases[i].req), &b);
    if (st != k_cases[i].status) fprintf(stderr, "    case %zu: got %d\n", i, st);
    EXPECT_INT_EQ(st, k_cases[i].status);
    EXPECT_STR_CONTAINS(b.data, "application/json");
    EXPECT_STR_CONTAINS(b.data, "\"error\"");
    buf_free(&b);
  }
  /* chunked alone still works */
  const char ok[] = "POST /echo HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "2\r\n{}\r\n0\r\n\r\n";
  buf b = BUF_INIT;
  EXPECT_INT_EQ(raw_exchange(srv, ok, sizeof ok - 1, &b), 200);
  buf_free(&b);
  http_server_free(srv);
}

/* ---- origin policy ------------------------------------------------------- */

TEST(http_edges_origin_allowed_table) {
  static const struct {
    const char *origin, *extra;
    bool ok;
  } k_cases[] = {
      {"http://localhost", NULL, true},           {"http://localhost:3000", NULL, true},
      {"https://127.0.0.1:8443", NULL, true},     {"http://[::1]:5173", NULL, true},
      {"http://app.localhost:8080", NULL, true},  {"app://obsidian.md", NULL, true},
      {"file://", NULL, true},                    {"tauri://localhost", NULL, true},
      {"vscode-webview://abc123", NULL, true},    {"http://0.0.0.0:8080", NULL, true},
      {"https://evil.example", NULL, false},      {"null", NULL, false},
      {"http://localhost.evil.example", NULL, false}, {"http://127.0.0.1.evil.example", NULL, false},
      {"http://localhost:3000/path", NULL, false}, {"http://192.168.1.10", NULL, false},
      {"https://evil.example", "*", true},        {"https://a.example", "https://b.example, https://a.example", true},
      {"https://a.example", "https://a.example/", true}, {"https://x.a.example", "https://*.a.example", true},
      {"https://a.example.evil", "https://*.a.example", false}, {"http://a.example", "https://a.example", false},
  };
  for (size_t i = 0; i < ARRAY_LEN(k_cases); i++) {
    bool got = origin_allowed(k_cases[i].origin, k_cases[i].extra);
    if (got != k_cases[i].ok) fprintf(stderr, "    %s (extra %s): got %d\n", k_cases[i].origin, k_cases[i].extra ? k_cases[i].extra : "-", got);
    EXPECT_TRUE(got == k_cases[i].ok);
  }
}

static void ws_noop_message(ws_conn *c, enum ws_opcode op, const uint8_t *data, size_t len, void *ctx) {
  (void)ctx;
  if (op == WS_TEXT) ws_send_text(c, (const char *)data, len);
}
static const ws_handler k_ws_noop = {NULL, ws_noop_message, NULL};

static void e_ws(http_req *req, void *ctx) {
  (void)ctx;
  if (http_ws_accept(req, &k_ws_noop, NULL, NULL) != 0) http_respond(req, 500, "text/plain", "accept failed", 13);
}


/* The upgrade request of a WebSocket client from origin (NULL: none). */
static int ws_upgrade_status(http_server *srv, const char *origin) {
  char req[512];
  snprintf(req, sizeof req,
           "GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n%s%s%s\r\n",
           origin ? "Origin: " : "", origin ? origin : "", origin ? "\r\n" : "");
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(srv))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  struct timeval tv = {3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  send(fd, req, strlen(req), MSG_NOSIGNAL);
  char tmp[512];
  ssize_t n = recv(fd, tmp, sizeof tmp - 1, 0);
  close(fd);
  if (n < 12) return 0;
  tmp[n] = '\0';
  return atoi(tmp + 9);
}

TEST(http_edges_origin_policy_without_a_key) {
  http_config cfg = {0};
  http_server *srv = edge_start(&cfg);
  ASSERT_TRUE(srv != NULL);
  resp r;
  char v[256];
  const char *evil[] = {"Origin: https://evil.example", NULL};
  ASSERT_INT_EQ(do_req(srv, "GET", "/hello", evil, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 403);
  EXPECT_STR_CONTAINS(r.body.data, "--allowed-origins");
  EXPECT_TRUE(resp_header(&r, "access-control-allow-origin", v, sizeof v) == NULL);
  resp_free(&r);
  const char *pre[] = {"Origin: https://evil.example", "Access-Control-Request-Method: POST", NULL};
  ASSERT_INT_EQ(do_req(srv, "OPTIONS", "/echo", pre, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 403);
  resp_free(&r);
  const char *local[] = {"Origin: http://localhost:5173", NULL};
  ASSERT_INT_EQ(do_req(srv, "GET", "/hello", local, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_STR_EQ(resp_header(&r, "access-control-allow-origin", v, sizeof v), "http://localhost:5173");
  EXPECT_STR_CONTAINS(resp_header(&r, "vary", v, sizeof v), "Origin");
  resp_free(&r);
  ASSERT_INT_EQ(do_req(srv, "GET", "/hello", NULL, NULL, 0, &r), 0); /* SDKs and curl send no Origin */
  EXPECT_INT_EQ(r.status, 200);
  resp_free(&r);
  EXPECT_INT_EQ(ws_upgrade_status(srv, "https://evil.example"), 403);
  EXPECT_INT_EQ(ws_upgrade_status(srv, "http://127.0.0.1:3000"), 101);
  EXPECT_INT_EQ(ws_upgrade_status(srv, NULL), 101);
  http_server_free(srv);

  http_config more = {.allowed_origins = "https://*.example.org,https://app.example"};
  srv = edge_start(&more);
  ASSERT_TRUE(srv != NULL);
  const char *added[] = {"Origin: https://app.example", NULL};
  ASSERT_INT_EQ(do_req(srv, "GET", "/hello", added, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  resp_free(&r);
  EXPECT_INT_EQ(ws_upgrade_status(srv, "https://chat.example.org"), 101);
  EXPECT_INT_EQ(ws_upgrade_status(srv, "https://evil.example"), 403);
  http_server_free(srv);
}

TEST(http_edges_origin_policy_with_a_key_is_open) {
  static const char *keys[] = {"sk-edge"};
  http_config cfg = {.api_keys = keys, .n_api_keys = 1};
  http_server *srv = edge_start(&cfg);
  ASSERT_TRUE(srv != NULL);
  resp r;
  char v[256];
  const char *evil[] = {"Origin: https://evil.example", "Authorization: Bearer sk-edge", NULL};
  ASSERT_INT_EQ(do_req(srv, "GET", "/hello", evil, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_STR_EQ(resp_header(&r, "access-control-allow-origin", v, sizeof v), "*");
  resp_free(&r);
  http_server_free(srv);
}

/* ---- admin routes ------------------------------------------------------- */

TEST(http_edges_admin_routes_only_when_asked_or_keyed) {
  http_config cfg = {0};
  http_server *srv = edge_start(&cfg);
  ASSERT_TRUE(srv != NULL);
  resp r;
  ASSERT_INT_EQ(do_req(srv, "GET", "/diag", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 404);
  resp_free(&r);
  http_server_free(srv);
  http_config on = {.admin_routes = true};
  srv = edge_start(&on);
  ASSERT_TRUE(srv != NULL);
  ASSERT_INT_EQ(do_req(srv, "GET", "/diag", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  resp_free(&r);
  http_server_free(srv);
  static const char *keys[] = {"sk-edge"};
  http_config keyed = {.api_keys = keys, .n_api_keys = 1};
  srv = edge_start(&keyed);
  ASSERT_TRUE(srv != NULL);
  const char *auth[] = {"Authorization: Bearer sk-edge", NULL};
  ASSERT_INT_EQ(do_req(srv, "GET", "/diag", auth, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  resp_free(&r);
  http_server_free(srv);
}

/* ---- the guard's clock ---------------------------------------------------- */

TEST(http_edges_elapsed_never_wraps) {
  /* A timestamp written on another thread after `now` was read. */
  EXPECT_TRUE(http_elapsed_ns(1000, 2000) == 0);
  EXPECT_TRUE(http_elapsed_ns(5000, 2000) == 3000);
  EXPECT_TRUE(http_elapsed_ns(7, 7) == 0);
}

/* Many short keep-alive requests on several connections while the guard
 * runs every second with a 1 s limit: none may be cut. */
TEST(http_edges_guard_spares_busy_keepalive_connections) {
  http_config cfg = {.conn_timeout_s = 1};
  http_server *srv = edge_start(&cfg);
  ASSERT_TRUE(srv != NULL);
  enum { N_CONN = 8 };
  int fds[N_CONN];
  for (int i = 0; i < N_CONN; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(srv))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_INT_EQ(connect(fds[i], (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {2, 0};
    setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  const char req[] = "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n";
  int failures = 0, done = 0;
  uint64_t t0 = time_mono_ns();
  while (time_mono_ns() - t0 < 2500000000ull) {
    for (int i = 0; i < N_CONN; i++) {
      if (send(fds[i], req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) {
        failures++;
        continue;
      }
      char tmp[1024];
      ssize_t n = recv(fds[i], tmp, sizeof tmp, 0);
      if (n <= 0 || strncmp(tmp, "HTTP/1.1 200", 12) != 0) failures++;
      else done++;
    }
  }
  for (int i = 0; i < N_CONN; i++) close(fds[i]);
  EXPECT_INT_EQ(failures, 0);
  EXPECT_INT_GT(done, 100);
  http_server_free(srv);
}

/* ---- connection caps and the reserve ----------------------------------------- */

static int connect_loopback(http_server *srv) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(srv))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  struct timeval tv = {3, 0};
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/* Opens a WebSocket on a new socket: the fd when the answer was 101, else
 * -status. */
static int ws_open(http_server *srv) {
  int fd = connect_loopback(srv);
  if (fd < 0) return -1;
  static const char req[] = "GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
  send(fd, req, sizeof req - 1, MSG_NOSIGNAL);
  char tmp[1024];
  ssize_t n = recv(fd, tmp, sizeof tmp - 1, 0);
  int st = n >= 12 ? atoi(tmp + 9) : 0;
  if (st == 101) return fd;
  close(fd);
  return -st;
}

TEST(http_edges_idle_websockets_cannot_starve_health) {
  http_config cfg = {.max_conns_per_addr = 4, .max_connections = 40, .conn_reserve = 8};
  http_server *srv = edge_start(&cfg);
  ASSERT_TRUE(srv != NULL);
  int fds[4];
  for (int i = 0; i < 4; i++) {
    fds[i] = ws_open(srv);
    EXPECT_TRUE(fds[i] >= 0);
  }
  EXPECT_INT_EQ(ws_open(srv), -503); /* a fifth from the same address */
  resp r;
  ASSERT_INT_EQ(do_req(srv, "GET", "/hello", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 503);
  EXPECT_STR_CONTAINS(r.body.data, "connections open");
  resp_free(&r);
  ASSERT_INT_EQ(do_req(srv, "GET", "/health", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200); /* the reserve */
  resp_free(&r);
  for (int i = 0; i < 4; i++)
    if (fds[i] >= 0) close(fds[i]);
  usleep(300 * 1000); /* the WebSocket loop notices the closes */
  ASSERT_INT_EQ(do_req(srv, "GET", "/hello", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  resp_free(&r);
  http_server_free(srv);
}

TEST(http_edges_websocket_idle_timeout_through_the_server) {
  http_config cfg = {.ws_idle_timeout_ms = 300, .ws_ping_interval_ms = 5000};
  http_server *srv = edge_start(&cfg);
  ASSERT_TRUE(srv != NULL);
  int fd = ws_open(srv);
  ASSERT_TRUE(fd >= 0);
  uint64_t t0 = time_mono_ns();
  uint8_t tmp[64];
  ssize_t n = recv(fd, tmp, sizeof tmp, 0); /* the close frame */
  EXPECT_INT_GE(n, 4);
  if (n >= 4) {
    EXPECT_INT_EQ(tmp[0] & 0x0f, 8);
    EXPECT_INT_EQ((tmp[2] << 8) | tmp[3], 1001);
  }
  EXPECT_INT_LT((time_mono_ns() - t0) / 1000000, 2000);
  close(fd);
  http_server_free(srv);
}

/* ---- the budget of buffered bodies ----------------------------------------- */

/* Sends a request head announcing len body bytes and the first `part` of
 * them, and leaves the socket open. */
static int slow_upload(http_server *srv, size_t len, size_t part) {
  int fd = connect_loopback(srv);
  if (fd < 0) return -1;
  char head[256];
  int hn = snprintf(head, sizeof head, "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                                       "Content-Length: %zu\r\n\r\n", len);
  send(fd, head, (size_t)hn, MSG_NOSIGNAL);
  char *body = malloc(part);
  memset(body, ' ', part);
  if (part) body[0] = '[';
  send(fd, body, part, MSG_NOSIGNAL);
  free(body);
  return fd;
}

/* A whole JSON body of len bytes: ["xxx...x"]. */
static void json_body(buf *b, size_t len) {
  buf_append_str(b, "[\"");
  for (size_t i = 0; i + 4 < len; i++) buf_append_byte(b, (char)('a' + i % 26));
  buf_append_str(b, "\"]");
}

TEST(http_edges_body_budget_refuses_with_503) {
  http_config cfg = {.body_budget = 8192};
  http_server *srv = edge_start(&cfg);
  ASSERT_TRUE(srv != NULL);
  int a = slow_upload(srv, 3000, 100), b = slow_upload(srv, 3000, 100);
  ASSERT_TRUE(a >= 0 && b >= 0);
  usleep(200 * 1000);
  buf body = BUF_INIT;
  json_body(&body, 3000);
  resp r;
  ASSERT_INT_EQ(do_req(srv, "POST", "/echo", NULL, body.data, (long)body.len, &r), 0);
  EXPECT_INT_EQ(r.status, 503);
  EXPECT_STR_CONTAINS(r.body.data, "budget");
  char v[64];
  EXPECT_TRUE(resp_header(&r, "retry-after", v, sizeof v) != NULL);
  resp_free(&r);
  close(a);
  close(b);
  usleep(300 * 1000);
  ASSERT_INT_EQ(do_req(srv, "POST", "/echo", NULL, body.data, (long)body.len, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  resp_free(&r);
  buf_free(&body);
  http_server_free(srv);
}

/* Large bodies trickling in are spooled: they hold none of the budget until
 * complete, and arrive intact. */
TEST(http_edges_large_slow_bodies_spool_to_disk) {
  http_config cfg = {.body_budget = (uint64_t)3 << 20, .max_json_body = (size_t)4 << 20};
  http_server *srv = edge_start(&cfg);
  ASSERT_TRUE(srv != NULL);
  size_t big = (size_t)2 << 20;
  int a = slow_upload(srv, big, (size_t)1500 << 10), b = slow_upload(srv, big, (size_t)1500 << 10);
  ASSERT_TRUE(a >= 0 && b >= 0);
  usleep(300 * 1000);
  buf body = BUF_INIT;
  json_body(&body, big);
  resp r;
  ASSERT_INT_EQ(do_req(srv, "POST", "/echo", NULL, body.data, (long)body.len, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_INT_EQ(r.body.len, body.len);
  if (r.body.len == body.len) EXPECT_MEM_EQ(r.body.data, body.data, body.len);
  resp_free(&r);
  close(a);
  close(b);
  buf_free(&body);
  http_server_free(srv);
}
