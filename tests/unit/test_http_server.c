/*
 * test_http_server.c - the HTTP layer driven over loopback: a server on
 * 127.0.0.1 port 0 with a small route table, requests with libcurl (easy
 * API) or a raw socket when curl would tidy the request up.
 *
 * Expectations are written by hand from the contract in http/http.h.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"
#include "http/http.h"
#include "http/ws.h"
#include "http_client.h"
#include "test.h"

/* ---- test server ------------------------------------------------------- */

static atomic_int g_errors;          /* on_error calls */
static atomic_int g_cancelled;       /* cancel callbacks fired */
static atomic_uint_least64_t g_cancel_ns;
static atomic_int g_decorated;

static void on_error(http_req *req, int status, int code, const char *message, const char *param, void *ctx) {
  (void)ctx, (void)param;
  atomic_fetch_add(&g_errors, 1);
  char body[700];
  int n = snprintf(body, sizeof body, "{\"status\":%d,\"code\":\"%s\",\"message\":\"%s\"}", status, err_name(code),
                   message);
  if (n < 0 || (size_t)n >= sizeof body) n = (int)strlen(body);
  http_respond(req, status, "application/json", body, (size_t)n);
}

static void decorate(http_req *req, void *ctx) {
  (void)ctx;
  atomic_fetch_add(&g_decorated, 1);
  http_resp_header(req, "x-decorated", "yes");
}

static void h_hello(http_req *req, void *ctx) {
  (void)ctx;
  http_respond(req, 200, "text/plain", "hello", 5);
}

static void h_model(http_req *req, void *ctx) {
  (void)ctx;
  const char *m = http_req_param(req, "model");
  char out[300];
  snprintf(out, sizeof out, "model=%s route=%s", m ? m : "(null)", http_req_route_name(req));
  http_respond(req, 200, "text/plain", out, strlen(out));
}

static void h_echo(http_req *req, void *ctx) {
  (void)ctx;
  size_t n = 0;
  const char *b = http_req_body(req, &n);
  http_respond(req, 200, "application/json", b, n);
}

static void h_query(http_req *req, void *ctx) {
  (void)ctx;
  const char *vals[8];
  size_t n = http_req_query_all(req, "include", vals, 8);
  buf b = BUF_INIT;
  buf_appendf(&b, "n=%zu", n);
  for (size_t i = 0; i < n; i++) buf_appendf(&b, " %s", vals[i]);
  const char *lim = http_req_query(req, "limit");
  buf_appendf(&b, " limit=%s", lim ? lim : "(null)");
  http_respond(req, 200, "text/plain", b.data, b.len);
  buf_free(&b);
}

static void h_silent(http_req *req, void *ctx) { (void)req, (void)ctx; }

typedef struct producer_arg {
  http_stream *s;
  int n;
  int interval_ms;
  bool ndjson;
} producer_arg;

static void *producer_main(void *arg) {
  producer_arg *pa = arg;
  for (int i = 0; i < pa->n; i++) {
    if (pa->interval_ms) usleep((useconds_t)pa->interval_ms * 1000);
    char line[64];
    int len = snprintf(line, sizeof line, "{\"index\":%d}", i);
    int rc = pa->ndjson ? http_stream_ndjson(pa->s, line, (size_t)len) : http_stream_sse(pa->s, "delta", line, (size_t)len);
    if (rc) break;
  }
  if (!pa->ndjson) http_stream_sse(pa->s, NULL, "[DONE]", 6);
  http_stream_close(pa->s);
  free(pa);
  return NULL;
}

static void start_producer(http_req *req, bool ndjson) {
  const char *n = http_req_query(req, "n");
  const char *iv = http_req_query(req, "interval_ms");
  http_stream *s = http_stream_open(req, 200, NULL, ndjson ? HTTP_STREAM_NDJSON : HTTP_STREAM_SSE);
  if (!s) return;
  producer_arg *pa = calloc(1, sizeof *pa);
  pa->s = s;
  pa->n = n ? atoi(n) : 5;
  pa->interval_ms = iv ? atoi(iv) : 0;
  pa->ndjson = ndjson;
  pthread_t t;
  pthread_create(&t, NULL, producer_main, pa);
  pthread_detach(t);
}

static void h_sse(http_req *req, void *ctx) {
  (void)ctx;
  start_producer(req, false);
}
static void h_ndjson(http_req *req, void *ctx) {
  (void)ctx;
  start_producer(req, true);
}

static void on_cancel(void *arg) {
  (void)arg;
  atomic_store(&g_cancel_ns, time_mono_ns());
  atomic_fetch_add(&g_cancelled, 1);
}

/* Writes one event, then an event every 20 s: the client leaves first. */
static void *slow_main(void *arg) {
  http_stream *s = arg;
  http_stream_sse(s, NULL, "first", 5);
  while (!http_stream_cancelled(s)) usleep(10 * 1000);
  int rc = http_stream_sse(s, NULL, "late", 4);
  if (rc != ERR_CANCELLED) atomic_fetch_add(&g_cancelled, 1000); /* flags a bug */
  http_stream_close(s);
  return NULL;
}

static void h_slow(http_req *req, void *ctx) {
  (void)ctx;
  http_stream *s = http_stream_open(req, 200, NULL, HTTP_STREAM_SSE);
  if (!s) return;
  http_stream_on_cancel(s, on_cancel, NULL);
  pthread_t t;
  pthread_create(&t, NULL, slow_main, s);
  pthread_detach(t);
}

static void h_upload(http_req *req, void *ctx) {
  (void)ctx;
  uint64_t size = 0;
  const char *path = http_req_body_file(req, &size);
  struct stat st;
  char out[128];
  snprintf(out, sizeof out, "bytes=%llu ondisk=%lld", (unsigned long long)size,
           path && stat(path, &st) == 0 ? (long long)st.st_size : -1LL);
  http_respond(req, 200, "text/plain", out, strlen(out));
}

/* Lists the parts as "name|filename|content_type|value-or-bytes:sum;" and
 * keeps the file of a part named "keep" (moved to keep.bin in the tmpdir). */
static void h_multipart(http_req *req, void *ctx) {
  (void)ctx;
  buf b = BUF_INIT;
  for (size_t i = 0; i < http_req_n_parts(req); i++) {
    const http_part *p = http_req_part(req, i);
    buf_appendf(&b, "%s|%s|%s|", p->name, p->filename ? p->filename : "-", p->content_type ? p->content_type : "-");
    if (p->file_path) {
      FILE *f = fopen(p->file_path, "rb");
      unsigned long sum = 0, n = 0;
      int c;
      while (f && (c = fgetc(f)) != EOF) sum += (unsigned)c, n++;
      if (f) fclose(f);
      buf_appendf(&b, "%lu:%lu;", n, sum);
      if (strcmp(p->name, "keep") == 0 && http_part_take_file(req, i) == 0) {
        char dst[600];
        snprintf(dst, sizeof dst, "%s/keep.bin", test_tmpdir());
        rename(p->file_path, dst);
      }
    } else {
      buf_appendf(&b, "%s;", p->value);
    }
  }
  const http_part *named = http_req_part_named(req, "purpose");
  buf_appendf(&b, "purpose=%s", named ? named->value : "(none)");
  http_respond(req, 200, "text/plain", b.data, b.len);
  buf_free(&b);
}

static void ws_echo_message(ws_conn *c, enum ws_opcode op, const uint8_t *data, size_t len, void *ctx) {
  (void)ctx;
  if (op == WS_TEXT) ws_send_text(c, (const char *)data, len);
  else ws_send_binary(c, data, len);
}
static const ws_handler k_ws_echo = {NULL, ws_echo_message, NULL};

static void h_ws(http_req *req, void *ctx) {
  (void)ctx;
  const char *protos[8];
  size_t n = http_req_ws_protocols(req, protos, 8);
  if (http_ws_accept(req, &k_ws_echo, NULL, n ? protos[0] : NULL) != 0)
    http_respond(req, 500, "text/plain", "accept failed", 13);
}

static void h_file(http_req *req, void *ctx) {
  (void)ctx;
  char path[600];
  snprintf(path, sizeof path, "%s/download.bin", test_tmpdir());
  FILE *f = fopen(path, "wb");
  for (int i = 0; f && i < 100000; i++) fputc((i * 31) & 255, f);
  if (f) fclose(f);
  if (http_respond_file(req, 200, "application/octet-stream", path) != 0)
    http_respond(req, 500, "text/plain", "file", 4);
}

static void *raw_main(void *arg) {
  http_stream *s = arg;
  unsigned char chunk[1000];
  for (int k = 0; k < 50; k++) {
    for (int i = 0; i < 1000; i++) chunk[i] = (unsigned char)((k * 1000 + i) & 255);
    if (http_stream_write(s, chunk, sizeof chunk) != 0) break;
  }
  http_stream_close(s);
  return NULL;
}

static void h_raw(http_req *req, void *ctx) {
  (void)ctx;
  http_stream *s = http_stream_open(req, 200, "audio/pcm", HTTP_STREAM_RAW);
  if (!s) return;
  pthread_t t;
  pthread_create(&t, NULL, raw_main, s);
  pthread_detach(t);
}

static atomic_size_t g_written;

static void *big_main(void *arg) {
  http_stream *s = arg;
  char *chunk = malloc(1 << 20);
  if (chunk) {
    memset(chunk, 'z', 1 << 20);
    for (int k = 0; k < 64; k++) {
      if (http_stream_write(s, chunk, 1 << 20) != 0) break;
      atomic_fetch_add(&g_written, (size_t)1 << 20);
    }
  }
  free(chunk);
  http_stream_close(s);
  return NULL;
}

static void h_big(http_req *req, void *ctx) {
  (void)ctx;
  http_stream *s = http_stream_open(req, 200, NULL, HTTP_STREAM_RAW);
  if (!s) return;
  pthread_t t;
  pthread_create(&t, NULL, big_main, s);
  pthread_detach(t);
}

static http_server *g_srv;

static void h_metrics(http_req *req, void *ctx) {
  (void)ctx;
  buf b = BUF_INIT;
  http_server_metrics(g_srv, &b);
  http_respond(req, 200, "text/plain; version=0.0.4", b.data, b.len);
  buf_free(&b);
}

static const http_route k_routes[] = {
    {"GET", "/hello", h_hello, NULL, HTTP_ROUTE_PUBLIC, "hello"},
    {"GET", "/v1/models/{model}", h_model, NULL, 0, "model"},
    {"POST", "/echo", h_echo, NULL, HTTP_BODY_JSON, "echo"},
    {"GET", "/q", h_query, NULL, 0, "query"},
    {"GET", "/silent", h_silent, NULL, 0, "silent"},
    {"GET", "/sse", h_sse, NULL, 0, "sse"},
    {"GET", "/ndjson", h_ndjson, NULL, 0, "ndjson"},
    {"GET", "/slow", h_slow, NULL, 0, "slow"},
    {"POST", "/upload", h_upload, NULL, HTTP_BODY_FILE, "upload"},
    {"GET", "/metrics", h_metrics, NULL, HTTP_ROUTE_PUBLIC, "metrics"},
    {"POST", "/mp", h_multipart, NULL, HTTP_BODY_MULTIPART, "multipart"},
    {"GET", "/ws", h_ws, NULL, HTTP_ROUTE_WS, "ws"},
    {"GET", "/file", h_file, NULL, 0, "file"},
    {"GET", "/raw", h_raw, NULL, 0, "raw"},
    {"GET", "/big", h_big, NULL, 0, "big"},
};

static const char *k_keys[] = {"sk-test-key", "other-key"};

static unsigned g_conn_timeout_s = 5;

static http_server *start(bool with_keys, unsigned keepalive_ms) {
  http_config cfg = {0};
  cfg.host = "127.0.0.1";
  cfg.port = 0;
  cfg.max_json_body = 4096;
  cfg.max_upload = 65536;
  cfg.spool_dir = test_tmpdir();
  cfg.n_threads = 2;
  cfg.sse_keepalive_ms = keepalive_ms;
  cfg.conn_timeout_s = g_conn_timeout_s;
  cfg.max_form_field = 1024;
  cfg.on_error = on_error;
  cfg.decorate = decorate;
  if (with_keys) {
    cfg.api_keys = k_keys;
    cfg.n_api_keys = 2;
  }
  http_server *srv = NULL;
  if (http_server_new(&cfg, &srv) != 0) return NULL;
  if (http_server_add_routes(srv, k_routes, ARRAY_LEN(k_routes)) != 0 || http_server_start(srv) != 0) {
    http_server_free(srv);
    return NULL;
  }
  g_srv = srv;
  return srv;
}


/* ---- tests -------------------------------------------------------------- */

TEST(http_server_routes_params_and_slashes) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  resp r;
  ASSERT_INT_EQ(do_req(srv, "GET", "/v1/models/org%2Fname", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_STR_EQ(r.body.data, "model=org/name route=model");
  resp_free(&r);
  const char *paths[] = {"/hello/", "//hello", "/hello?beta=true", "/%68ello"};
  for (size_t i = 0; i < ARRAY_LEN(paths); i++) {
    ASSERT_INT_EQ(do_req(srv, "GET", paths[i], NULL, NULL, 0, &r), 0);
    EXPECT_INT_EQ(r.status, 200);
    EXPECT_STR_EQ(r.body.data, "hello");
    resp_free(&r);
  }
  /* Query arrays. */
  ASSERT_INT_EQ(do_req(srv, "GET", "/q?include[]=a&include%5B%5D=b&limit=3&unknown=1", NULL, NULL, 0, &r), 0);
  EXPECT_STR_EQ(r.body.data, "n=2 a b limit=3");
  resp_free(&r);
  http_server_free(srv);
}

TEST(http_server_head_405_404_and_request_ids) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  resp r;
  char v[256], id1[64] = "", id2[64] = "";
  ASSERT_INT_EQ(do_req(srv, "HEAD", "/hello", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_INT_EQ(r.body.len, 0);
  EXPECT_STR_EQ(resp_header(&r, "content-length", v, sizeof v), "5");
  resp_free(&r);

  ASSERT_INT_EQ(do_req(srv, "DELETE", "/hello", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 405);
  EXPECT_STR_EQ(resp_header(&r, "allow", v, sizeof v), "GET, HEAD, OPTIONS");
  EXPECT_STR_CONTAINS(r.body.data, "\"status\":405");
  EXPECT_TRUE(resp_header(&r, "x-request-id", id1, sizeof id1) != NULL);
  resp_free(&r);

  int before = atomic_load(&g_errors);
  ASSERT_INT_EQ(do_req(srv, "POST", "/v1/nope", NULL, "{}", 2, &r), 0);
  EXPECT_INT_EQ(r.status, 404);
  EXPECT_STR_CONTAINS(r.body.data, "Invalid URL (POST /v1/nope)");
  EXPECT_INT_EQ(atomic_load(&g_errors), before + 1);
  EXPECT_STR_EQ(resp_header(&r, "x-decorated", v, sizeof v), "yes");
  EXPECT_TRUE(resp_header(&r, "x-request-id", id2, sizeof id2) != NULL);
  resp_free(&r);
  /* req_ + 32 lowercase hex, different per request. */
  EXPECT_INT_EQ(strlen(id1), 36);
  EXPECT_TRUE(strncmp(id1, "req_", 4) == 0 && strspn(id1 + 4, "0123456789abcdef") == 32);
  EXPECT_TRUE(strcmp(id1, id2) != 0);

  /* A handler that answers nothing gets a 500. */
  ASSERT_INT_EQ(do_req(srv, "GET", "/silent", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 500);
  resp_free(&r);

  /* Hostile paths: clean 400s, the server keeps serving. */
  buf b = BUF_INIT;
  const char bad1[] = "GET /v1/models/a%00b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  raw_req(srv, bad1, sizeof bad1 - 1, &b, 2000);
  EXPECT_INT_EQ(raw_status(&b), 400);
  buf_reset(&b);
  const char bad2[] = "GET /v1/models/%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  raw_req(srv, bad2, sizeof bad2 - 1, &b, 2000);
  EXPECT_INT_EQ(raw_status(&b), 400);
  buf_reset(&b);
  const char bad3[] = "GET /he\0llo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  raw_req(srv, bad3, sizeof bad3 - 1, &b, 2000);
  EXPECT_TRUE(raw_status(&b) == 400 || raw_status(&b) == 404);
  buf_free(&b);
  ASSERT_INT_EQ(do_req(srv, "GET", "/hello", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  resp_free(&r);
  http_server_free(srv);
}

TEST(http_server_fallback_error_without_on_error) {
  http_config cfg = {0};
  cfg.host = "127.0.0.1";
  cfg.spool_dir = test_tmpdir();
  http_server *srv = NULL;
  ASSERT_INT_EQ(http_server_new(&cfg, &srv), 0);
  ASSERT_INT_EQ(http_server_add_routes(srv, k_routes, ARRAY_LEN(k_routes)), 0);
  ASSERT_INT_EQ(http_server_start(srv), 0);
  resp r;
  ASSERT_INT_EQ(do_req(srv, "GET", "/nope\"x", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 404);
  EXPECT_STR_EQ(r.body.data, "{\"error\":{\"message\":\"Invalid URL (GET /nope\\\"x)\",\"type\":\"invalid_request_error\","
                             "\"code\":\"ERR_NOT_FOUND\",\"param\":null}}");
  resp_free(&r);
  http_server_free(srv);
}

TEST(http_server_json_body_limits) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  resp r;
  const char *json[] = {"Content-Type: application/json", NULL};
  ASSERT_INT_EQ(do_req(srv, "POST", "/echo", json, "{\"a\":1}", 7, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_STR_EQ(r.body.data, "{\"a\":1}");
  resp_free(&r);
  char *big = malloc(5000);
  ASSERT_TRUE(big != NULL);
  memset(big, 'x', 5000);
  ASSERT_INT_EQ(do_req(srv, "POST", "/echo", json, big, 5000, &r), 0);
  EXPECT_INT_EQ(r.status, 413);
  EXPECT_STR_CONTAINS(r.body.data, "4096");
  resp_free(&r);
  free(big);

  /* 10 GiB Content-Length: 413 at once, no body sent, nothing allocated. */
  buf b = BUF_INIT;
  const char huge[] = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10737418240\r\n\r\n";
  uint64_t t0 = time_mono_ns();
  raw_req(srv, huge, sizeof huge - 1, &b, 3000);
  EXPECT_INT_EQ(raw_status(&b), 413);
  EXPECT_INT_LT((time_mono_ns() - t0) / 1000000, 2500);
  EXPECT_STR_CONTAINS(b.data, "x-request-id: req_");
  buf_reset(&b);

  /* Chunked within the limit is read; chunked over it is 413. */
  const char ch_ok[] = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                       "5\r\n{\"a\":\r\n3\r\n 42\r\n1\r\n}\r\n0\r\n\r\n";
  raw_req(srv, ch_ok, sizeof ch_ok - 1, &b, 3000);
  EXPECT_INT_EQ(raw_status(&b), 200);
  EXPECT_STR_CONTAINS(b.data, "{\"a\": 42}");
  buf_reset(&b);
  buf over = BUF_INIT;
  buf_append_str(&over, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
  for (int i = 0; i < 10; i++) {
    buf_append_str(&over, "3e8\r\n");
    for (int j = 0; j < 1000; j++) buf_append_byte(&over, 'x');
    buf_append_str(&over, "\r\n");
  }
  buf_append_str(&over, "0\r\n\r\n");
  raw_req(srv, over.data, over.len, &b, 3000);
  EXPECT_INT_EQ(raw_status(&b), 413);
  buf_free(&over);
  buf_free(&b);
  http_server_free(srv);
}

TEST(http_server_file_body_spooled_and_removed) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  resp r;
  char *data = calloc(1, 50000);
  ASSERT_TRUE(data != NULL);
  ASSERT_INT_EQ(do_req(srv, "POST", "/upload", NULL, data, 50000, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_STR_EQ(r.body.data, "bytes=50000 ondisk=50000");
  resp_free(&r);
  free(data);
  /* The spool file is gone after the request (give MHD a moment to finish). */
  usleep(100 * 1000);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c parley-up- > /dev/null", test_tmpdir());
  EXPECT_INT_NE(system(cmd), 0);
  http_server_free(srv);
}

TEST(http_server_auth_forms) {
  http_server *srv = start(true, 0);
  ASSERT_TRUE(srv != NULL);
  resp r;
  const char *ok_forms[][2] = {
      {"Authorization: Bearer sk-test-key", NULL}, {"Authorization: bearer other-key", NULL},
      {"Authorization: TOKEN sk-test-key", NULL},  {"x-api-key: sk-test-key", NULL},
      {"api-key: other-key", NULL},
  };
  for (size_t i = 0; i < ARRAY_LEN(ok_forms); i++) {
    ASSERT_INT_EQ(do_req(srv, "GET", "/q", ok_forms[i], NULL, 0, &r), 0);
    EXPECT_INT_EQ(r.status, 200);
    resp_free(&r);
  }
  const char *bad_forms[][2] = {
      {"X-Nothing: 1", NULL},          {"Authorization: Bearer sk-test-ke", NULL},
      {"Authorization: Bearer sk-test-keyx", NULL}, {"Authorization: Basic sk-test-key", NULL},
      {"Authorization: sk-test-key", NULL}, {"x-api-key: wrong", NULL},
  };
  for (size_t i = 0; i < ARRAY_LEN(bad_forms); i++) {
    ASSERT_INT_EQ(do_req(srv, "GET", "/q", bad_forms[i], NULL, 0, &r), 0);
    EXPECT_INT_EQ(r.status, 401);
    EXPECT_STR_CONTAINS(r.body.data, "ERR_AUTH");
    /* the message names every accepted form */
    EXPECT_STR_CONTAINS(r.body.data, "Authorization: Bearer <key>");
    EXPECT_STR_CONTAINS(r.body.data, "Authorization: Token <key>");
    EXPECT_STR_CONTAINS(r.body.data, "x-api-key or api-key header");
    EXPECT_STR_CONTAINS(r.body.data, "openai-insecure-api-key.<key>");
    resp_free(&r);
  }
  /* Public route stays open; unknown paths need the key too (401, then 404). */
  ASSERT_INT_EQ(do_req(srv, "GET", "/hello", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  resp_free(&r);
  ASSERT_INT_EQ(do_req(srv, "GET", "/nope", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 401);
  resp_free(&r);
  /* A body sent blindly (head first, then the body in pieces, as undici
   * does) to a refused request: the 401 can still be read. Answering before
   * draining would let the kernel reset the connection under it. */
  {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_TRUE(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(srv))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_INT_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char head[] = "POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 262144\r\n\r\n";
    send(fd, head, sizeof head - 1, MSG_NOSIGNAL);
    usleep(20 * 1000);
    char piece[16384];
    memset(piece, 'b', sizeof piece);
    int n_sent = 0;
    for (int i = 0; i < 16; i++) {
      if (send(fd, piece, sizeof piece, MSG_NOSIGNAL) != (ssize_t)sizeof piece) break;
      n_sent++;
      usleep(2000);
    }
    EXPECT_INT_EQ(n_sent, 16);
    buf got = BUF_INIT;
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char tmp[4096];
    while (!got.data || !strstr(got.data, "\r\n\r\n")) {
      ssize_t n = recv(fd, tmp, sizeof tmp, 0);
      if (n <= 0) break;
      buf_append(&got, tmp, (size_t)n);
    }
    EXPECT_INT_EQ(raw_status(&got), 401);
    /* The body was consumed, so the connection stays usable (keep-alive). */
    buf_reset(&got);
    const char next[] = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    send(fd, next, sizeof next - 1, MSG_NOSIGNAL);
    while (!got.data || !strstr(got.data, "hello")) {
      ssize_t n = recv(fd, tmp, sizeof tmp, 0);
      if (n <= 0) break;
      buf_append(&got, tmp, (size_t)n);
    }
    EXPECT_TRUE(got.data && strstr(got.data, "HTTP/1.1 200"));
    buf_free(&got);
    close(fd);
  }
  const char *good[] = {"x-api-key: sk-test-key", NULL};
  ASSERT_INT_EQ(do_req(srv, "GET", "/nope", good, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 404);
  resp_free(&r);
  http_server_free(srv);
}

TEST(http_server_cors_preflight_and_expose) {
  http_server *srv = start(true, 0);
  ASSERT_TRUE(srv != NULL);
  resp r;
  char v[1024];
  const char *pre[] = {"Origin: http://localhost:3000", "Access-Control-Request-Method: POST",
                       "Access-Control-Request-Headers: authorization, content-type, x-stainless-os", NULL};
  ASSERT_INT_EQ(do_req(srv, "OPTIONS", "/v1/anything/at/all", pre, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 204);
  EXPECT_STR_EQ(resp_header(&r, "access-control-allow-origin", v, sizeof v), "*");
  EXPECT_STR_CONTAINS(resp_header(&r, "access-control-allow-methods", v, sizeof v), "POST");
  EXPECT_STR_EQ(resp_header(&r, "access-control-allow-headers", v, sizeof v),
                "authorization, content-type, x-stainless-os");
  EXPECT_TRUE(resp_header(&r, "access-control-max-age", v, sizeof v) != NULL);
  EXPECT_TRUE(resp_header(&r, "x-request-id", v, sizeof v) != NULL);
  resp_free(&r);
  const char *pre2[] = {"Origin: http://x", NULL};
  ASSERT_INT_EQ(do_req(srv, "OPTIONS", "/hello", pre2, NULL, 0, &r), 0);
  const char *ah = resp_header(&r, "access-control-allow-headers", v, sizeof v);
  EXPECT_STR_CONTAINS(ah, "Authorization");
  EXPECT_STR_CONTAINS(ah, "x-api-key");
  EXPECT_STR_CONTAINS(ah, "anthropic-version");
  EXPECT_STR_CONTAINS(ah, "X-Stainless-OS");
  resp_free(&r);
  ASSERT_INT_EQ(do_req(srv, "GET", "/nope", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 401); /* errors carry CORS too */
  EXPECT_STR_EQ(resp_header(&r, "access-control-allow-origin", v, sizeof v), "*");
  const char *eh = resp_header(&r, "access-control-expose-headers", v, sizeof v);
  EXPECT_STR_CONTAINS(eh, "x-request-id");
  EXPECT_STR_CONTAINS(eh, "dg-request-id");
  EXPECT_STR_CONTAINS(eh, "dg-char-count");
  resp_free(&r);
  http_server_free(srv);
}

/* Parses "event: X\ndata: Y\n\n" blocks: returns the number of data events
 * and checks that indices arrive in order. */
static int count_sse(const char *text, int *comments, bool *in_order) {
  int n = 0, expect = 0;
  *comments = 0;
  *in_order = true;
  for (const char *p = text; p && *p;) {
    if (strncmp(p, ": keep-alive", 12) == 0) (*comments)++;
    if (strncmp(p, "data: {\"index\":", 15) == 0) {
      if (atoi(p + 15) != expect) *in_order = false;
      expect++;
      n++;
    } else if (strncmp(p, "data: [DONE]", 12) == 0) {
      n++;
    }
    p = strchr(p, '\n');
    if (p) p++;
  }
  return n;
}

TEST(http_server_sse_stream_in_order_with_keepalive) {
  http_server *srv = start(false, 100);
  ASSERT_TRUE(srv != NULL);
  resp r;
  char v[256];
  ASSERT_INT_EQ(do_req(srv, "GET", "/sse?n=20", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_STR_CONTAINS(resp_header(&r, "content-type", v, sizeof v), "text/event-stream");
  EXPECT_STR_CONTAINS(resp_header(&r, "x-request-id", v, sizeof v), "req_");
  int comments;
  bool in_order;
  EXPECT_INT_EQ(count_sse(r.body.data, &comments, &in_order), 21);
  EXPECT_TRUE(in_order);
  EXPECT_STR_CONTAINS(r.body.data, "event: delta\ndata: {\"index\":0}\n\n");
  resp_free(&r);
  /* Two events 350 ms apart with a 100 ms keep-alive: comments in between. */
  ASSERT_INT_EQ(do_req(srv, "GET", "/sse?n=2&interval_ms=350", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(count_sse(r.body.data, &comments, &in_order), 3);
  EXPECT_INT_GE(comments, 1);
  EXPECT_STR_CONTAINS(r.body.data, ": keep-alive\n\n");
  resp_free(&r);
  http_server_free(srv);
}

TEST(http_server_ndjson_stream) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  resp r;
  char v[256];
  ASSERT_INT_EQ(do_req(srv, "GET", "/ndjson?n=7&interval_ms=5", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_STR_CONTAINS(resp_header(&r, "content-type", v, sizeof v), "application/x-ndjson");
  EXPECT_STR_EQ(r.body.data, "{\"index\":0}\n{\"index\":1}\n{\"index\":2}\n{\"index\":3}\n{\"index\":4}\n"
                             "{\"index\":5}\n{\"index\":6}\n");
  resp_free(&r);
  http_server_free(srv);
}

TEST(http_server_client_disconnect_cancels_stream) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  atomic_store(&g_cancelled, 0);
  buf b = BUF_INIT;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_TRUE(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(srv))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_INT_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const char req[] = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_INT_EQ(send(fd, req, sizeof req - 1, 0), (long)(sizeof req - 1));
  /* Read until the first event arrives. */
  struct timeval tv = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char tmp[2048];
  while (!b.data || !strstr(b.data, "data: first")) {
    ssize_t n = recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) break;
    buf_append(&b, tmp, (size_t)n);
  }
  EXPECT_STR_CONTAINS(b.data, "data: first");
  buf r = BUF_INIT;
  http_server_metrics(srv, &r);
  EXPECT_STR_CONTAINS(r.data, "parley_http_open_streams 1");
  buf_reset(&r);
  uint64_t t0 = time_mono_ns();
  close(fd);
  while (atomic_load(&g_cancelled) == 0 && time_mono_ns() - t0 < 5000000000ull) usleep(5000);
  EXPECT_INT_EQ(atomic_load(&g_cancelled), 1);
  uint64_t dt_ms = (atomic_load(&g_cancel_ns) - t0) / 1000000;
  EXPECT_INT_LT(dt_ms, 5000);
  /* The producer sees ERR_CANCELLED (else g_cancelled jumps by 1000) and the gauge drops. */
  usleep(100 * 1000);
  EXPECT_INT_EQ(atomic_load(&g_cancelled), 1);
  http_server_metrics(srv, &r);
  EXPECT_STR_CONTAINS(r.data, "parley_http_open_streams 0");
  buf_free(&r);
  buf_free(&b);
  http_server_free(srv);
}

TEST(http_server_stop_cancels_open_streams) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  atomic_store(&g_cancelled, 0);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_TRUE(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(srv))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_INT_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const char req[] = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
  send(fd, req, sizeof req - 1, 0);
  char tmp[2048];
  struct timeval tv = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ssize_t n = recv(fd, tmp, sizeof tmp, 0);
  EXPECT_INT_GT(n, 0);
  usleep(50 * 1000);
  http_server_free(srv);
  EXPECT_INT_EQ(atomic_load(&g_cancelled), 1);
  close(fd);
  usleep(50 * 1000); /* let the producer see ERR_CANCELLED and close */
}

TEST(http_server_metrics_count_requests) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  resp r;
  for (int i = 0; i < 3; i++) {
    do_req(srv, "GET", "/hello", NULL, NULL, 0, &r);
    resp_free(&r);
  }
  do_req(srv, "GET", "/nope", NULL, NULL, 0, &r);
  resp_free(&r);
  usleep(50 * 1000);
  ASSERT_INT_EQ(do_req(srv, "GET", "/metrics", NULL, NULL, 0, &r), 0);
  EXPECT_STR_CONTAINS(r.body.data, "# TYPE parley_http_requests_total counter");
  EXPECT_STR_CONTAINS(r.body.data, "parley_http_requests_total{route=\"hello\",method=\"GET\",status=\"200\"} 3\n");
  EXPECT_STR_CONTAINS(r.body.data, "parley_http_requests_total{route=\"unmatched\",method=\"GET\",status=\"404\"} 1\n");
  EXPECT_STR_CONTAINS(r.body.data, "parley_http_request_duration_seconds_bucket{route=\"hello\",le=\"+Inf\"} 3\n");
  EXPECT_STR_CONTAINS(r.body.data, "parley_http_request_duration_seconds_count{route=\"hello\"} 3\n");
  EXPECT_STR_CONTAINS(r.body.data, "parley_http_in_flight 1\n");
  EXPECT_STR_CONTAINS(r.body.data, "parley_http_open_streams 0\n");
  EXPECT_STR_CONTAINS(r.body.data, "parley_ws_sessions 0\n");
  resp_free(&r);
  http_server_free(srv);
}

TEST(http_server_header_flood_is_refused_cleanly) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  buf req = BUF_INIT, b = BUF_INIT;
  buf_append_str(&req, "GET /hello HTTP/1.1\r\nHost: x\r\n");
  for (int i = 0; i < 3000; i++) buf_appendf(&req, "X-H%d: %040d\r\n", i, i);
  buf_append_str(&req, "\r\n");
  raw_req(srv, req.data, req.len, &b, 3000);
  int st = raw_status(&b);
  EXPECT_TRUE(st == 431 || st == 413 || st == 400 || st == 0);
  buf_free(&req);
  buf_free(&b);
  resp r;
  ASSERT_INT_EQ(do_req(srv, "GET", "/hello", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  resp_free(&r);
  http_server_free(srv);
}

TEST(http_server_slowloris_is_cut_off) {
  g_conn_timeout_s = 1;
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_TRUE(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(srv))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_INT_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const char head[] = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  uint64_t t0 = time_mono_ns();
  bool closed = false;
  /* One byte every 100 ms keeps MHD's idle timer happy; the guard must not be. */
  for (int i = 0; i < 60 && !closed; i++) {
    char c = i < (int)sizeof head - 1 ? head[i] : 'a';
    if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) closed = true;
    char tmp[256];
    ssize_t n = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (n == 0) closed = true;
    usleep(100 * 1000);
  }
  EXPECT_TRUE(closed);
  EXPECT_INT_LT((time_mono_ns() - t0) / 1000000, 4000);
  close(fd);
  resp r;
  ASSERT_INT_EQ(do_req(srv, "GET", "/hello", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  resp_free(&r);
  http_server_free(srv);
}

static void mp_body(buf *b, const char *boundary, size_t file_len, bool close) {
  buf_appendf(b, "--%s\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n", boundary);
  buf_appendf(b, "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n"
                 "Content-Type: application/octet-stream\r\n\r\n", boundary);
  for (size_t i = 0; i < file_len; i++) buf_append_byte(b, (char)((i * 7 + 13) & 255));
  buf_appendf(b, "\r\n--%s\r\nContent-Disposition: form-data; name=\"keep\"; filename=\"k.txt\"\r\n\r\n"
                 "kept\r\n", boundary);
  buf_appendf(b, "--%s\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nh\xc3\xa9llo\r\n", boundary);
  if (close) buf_appendf(b, "--%s--\r\n", boundary);
}

TEST(http_server_multipart_fields_and_spooled_files) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  buf body = BUF_INIT;
  mp_body(&body, "XyZzy", 3000, true);
  /* Expected byte sum of the file part, computed independently here. */
  unsigned long sum = 0;
  for (size_t i = 0; i < 3000; i++) sum += (i * 7 + 13) & 255;
  char expect[512];
  snprintf(expect, sizeof expect,
           "purpose|-|-|batch;file|a.bin|application/octet-stream|3000:%lu;keep|k.txt|-|4:%lu;note|-|-|h\xc3\xa9llo;"
           "purpose=batch",
           sum, (unsigned long)('k' + 'e' + 'p' + 't'));
  resp r;
  const char *ct[] = {"Content-Type: multipart/form-data; boundary=XyZzy", NULL};
  ASSERT_INT_EQ(do_req(srv, "POST", "/mp", ct, body.data, (long)body.len, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_STR_EQ(r.body.data, expect);
  resp_free(&r);
  usleep(100 * 1000);
  /* Spooled files are gone, the taken one was kept. */
  char cmd[700];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q parley-up-", test_tmpdir());
  EXPECT_INT_NE(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "test \"$(cat '%s/keep.bin')\" = kept", test_tmpdir());
  EXPECT_INT_EQ(system(cmd), 0);

  /* Truncated body: 400 naming multipart. */
  buf_reset(&body);
  mp_body(&body, "XyZzy", 10, false);
  ASSERT_INT_EQ(do_req(srv, "POST", "/mp", ct, body.data, (long)body.len, &r), 0);
  EXPECT_INT_EQ(r.status, 400);
  EXPECT_STR_CONTAINS(r.body.data, "multipart");
  resp_free(&r);
  /* No boundary: 400. */
  const char *nob[] = {"Content-Type: multipart/form-data", NULL};
  ASSERT_INT_EQ(do_req(srv, "POST", "/mp", nob, "x", 1, &r), 0);
  EXPECT_INT_EQ(r.status, 400);
  resp_free(&r);
  /* A plain field over max_form_field (1024): 413. */
  buf_reset(&body);
  buf_append_str(&body, "--B\r\nContent-Disposition: form-data; name=\"big\"\r\n\r\n");
  for (int i = 0; i < 2000; i++) buf_append_byte(&body, 'v');
  buf_append_str(&body, "\r\n--B--\r\n");
  const char *ctb[] = {"Content-Type: multipart/form-data; boundary=B", NULL};
  ASSERT_INT_EQ(do_req(srv, "POST", "/mp", ctb, body.data, (long)body.len, &r), 0);
  EXPECT_INT_EQ(r.status, 413);
  EXPECT_STR_CONTAINS(r.body.data, "big");
  resp_free(&r);
  /* Over max_upload (65536) by Content-Length: 413. */
  buf_reset(&body);
  mp_body(&body, "XyZzy", 70000, true);
  ASSERT_INT_EQ(do_req(srv, "POST", "/mp", ct, body.data, (long)body.len, &r), 0);
  EXPECT_INT_EQ(r.status, 413);
  resp_free(&r);
  buf_free(&body);
  http_server_free(srv);
}

static int ws_connect_raw(http_server *srv, const char *extra_headers, buf *out) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(srv))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  struct timeval tv = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char req[1024];
  int n = snprintf(req, sizeof req, "GET /ws HTTP/1.1\r\nHost: x\r\n%s\r\n", extra_headers);
  send(fd, req, (size_t)n, MSG_NOSIGNAL);
  char tmp[2048];
  while (!out->data || !strstr(out->data, "\r\n\r\n")) {
    ssize_t k = recv(fd, tmp, sizeof tmp, 0);
    if (k <= 0) break;
    buf_append(out, tmp, (size_t)k);
  }
  return fd;
}

TEST(http_server_ws_handshake_and_echo) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  buf b = BUF_INIT;
  int fd = ws_connect_raw(srv,
                          "Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
                          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                          "Sec-WebSocket-Protocol: chat, superchat\r\n",
                          &b);
  ASSERT_TRUE(fd >= 0);
  EXPECT_INT_EQ(raw_status(&b), 101);
  /* RFC 6455 section 1.3: this key gives s3pPLMBiTxaQ9kYGzzhZRbK+xOo= */
  EXPECT_STR_CONTAINS(b.data, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n");
  EXPECT_STR_CONTAINS(b.data, "Sec-WebSocket-Protocol: chat\r\n");
  EXPECT_STR_CONTAINS(b.data, "x-request-id: req_");
  /* A masked text frame "hi" comes back unmasked. */
  const unsigned char frame[] = {0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2};
  send(fd, frame, sizeof frame, MSG_NOSIGNAL);
  unsigned char got[16];
  size_t have = 0;
  while (have < 4) {
    ssize_t k = recv(fd, got + have, sizeof got - have, 0);
    if (k <= 0) break;
    have += (size_t)k;
  }
  ASSERT_TRUE(have >= 4);
  EXPECT_INT_EQ(got[0], 0x81);
  EXPECT_INT_EQ(got[1], 2);
  EXPECT_INT_EQ(got[2], 'h');
  EXPECT_INT_EQ(got[3], 'i');
  buf m = BUF_INIT;
  http_server_metrics(srv, &m);
  EXPECT_STR_CONTAINS(m.data, "parley_ws_sessions 1");
  buf_free(&m);
  close(fd);
  buf_reset(&b);

  /* Refusals: no Upgrade header 426, bad version 426, no key 400. */
  fd = ws_connect_raw(srv, "Connection: close\r\n", &b);
  EXPECT_INT_EQ(raw_status(&b), 426);
  close(fd);
  buf_reset(&b);
  fd = ws_connect_raw(srv, "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: abc\r\n"
                           "Sec-WebSocket-Version: 8\r\n", &b);
  EXPECT_INT_EQ(raw_status(&b), 426);
  EXPECT_STR_CONTAINS(b.data, "Sec-WebSocket-Version: 13");
  close(fd);
  buf_reset(&b);
  fd = ws_connect_raw(srv, "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n", &b);
  EXPECT_INT_EQ(raw_status(&b), 400);
  close(fd);
  buf_free(&b);
  http_server_free(srv);
}

TEST(http_server_ws_auth_by_subprotocol) {
  http_server *srv = start(true, 0);
  ASSERT_TRUE(srv != NULL);
  const char *base = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n";
  struct {
    const char *extra;
    int status;
  } cases[] = {
      {"", 401},
      {"Sec-WebSocket-Protocol: token, sk-test-key\r\n", 101},
      {"Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.other-key\r\n", 101},
      {"Sec-WebSocket-Protocol: bearer, sk-test-key\r\n", 101},
      {"Sec-WebSocket-Protocol: token, wrong\r\n", 401},
      {"Authorization: Bearer sk-test-key\r\n", 101},
  };
  for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
    char hdrs[512];
    snprintf(hdrs, sizeof hdrs, "%s%s", base, cases[i].extra);
    buf b = BUF_INIT;
    int fd = ws_connect_raw(srv, hdrs, &b);
    EXPECT_INT_EQ(raw_status(&b), cases[i].status);
    if (fd >= 0) close(fd);
    buf_free(&b);
  }
  http_server_free(srv);
}

TEST(http_server_stream_survives_idle_longer_than_conn_timeout) {
  g_conn_timeout_s = 1;
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  resp r;
  /* Suspended for 1.3 s before the record with a 1 s idle timeout. */
  ASSERT_INT_EQ(do_req(srv, "GET", "/ndjson?n=1&interval_ms=1300", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_STR_EQ(r.body.data, "{\"index\":0}\n");
  resp_free(&r);
  http_server_free(srv);
}

TEST(http_server_file_and_raw_stream_bytes_exact) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  resp r;
  char v[128];
  ASSERT_INT_EQ(do_req(srv, "GET", "/file", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  ASSERT_INT_EQ(r.body.len, 100000);
  bool same = true;
  for (int i = 0; i < 100000; i++) same &= (unsigned char)r.body.data[i] == ((i * 31) & 255);
  EXPECT_TRUE(same);
  resp_free(&r);
  ASSERT_INT_EQ(do_req(srv, "HEAD", "/file", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_INT_EQ(r.body.len, 0);
  EXPECT_STR_EQ(resp_header(&r, "content-length", v, sizeof v), "100000");
  resp_free(&r);
  ASSERT_INT_EQ(do_req(srv, "GET", "/raw", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_STR_EQ(resp_header(&r, "content-type", v, sizeof v), "audio/pcm");
  EXPECT_STR_EQ(resp_header(&r, "transfer-encoding", v, sizeof v), "chunked");
  ASSERT_INT_EQ(r.body.len, 50000);
  same = true;
  for (int i = 0; i < 50000; i++) same &= (unsigned char)r.body.data[i] == (i & 255);
  EXPECT_TRUE(same);
  resp_free(&r);
  /* HEAD on a stream route: headers only, and the producer is released. */
  ASSERT_INT_EQ(do_req(srv, "HEAD", "/raw", NULL, NULL, 0, &r), 0);
  EXPECT_INT_EQ(r.status, 200);
  EXPECT_INT_EQ(r.body.len, 0);
  resp_free(&r);
  http_server_free(srv);
}

TEST(http_server_access_log_line_without_header_values) {
  char path[600];
  snprintf(path, sizeof path, "%s/stderr.log", test_tmpdir());
  fflush(stderr);
  int saved = dup(2);
  FILE *f = fopen(path, "w");
  ASSERT_TRUE(f != NULL);
  dup2(fileno(f), 2);
  http_config cfg = {0};
  cfg.host = "127.0.0.1";
  cfg.spool_dir = test_tmpdir();
  cfg.access_log = true;
  cfg.api_keys = k_keys;
  cfg.n_api_keys = 2;
  http_server *srv = NULL;
  int rc = http_server_new(&cfg, &srv);
  if (!rc) rc = http_server_add_routes(srv, k_routes, ARRAY_LEN(k_routes));
  if (!rc) rc = http_server_start(srv);
  resp r;
  const char *hdrs[] = {"Authorization: Bearer sk-test-key", "X-Secret: topsecret-value", NULL};
  char id[64] = "";
  if (!rc) {
    do_req(srv, "GET", "/q?include=a", hdrs, NULL, 0, &r);
    resp_header(&r, "x-request-id", id, sizeof id);
    resp_free(&r);
    usleep(50 * 1000);
  }
  http_server_free(srv);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  fclose(f);
  ASSERT_INT_EQ(rc, 0);
  buf log = BUF_INIT;
  FILE *in = fopen(path, "r");
  ASSERT_TRUE(in != NULL);
  char tmp[1024];
  size_t n;
  while ((n = fread(tmp, 1, sizeof tmp, in)) > 0) buf_append(&log, tmp, n);
  fclose(in);
  /* "GET /q 200 <bytes> <ms>ms <id>" */
  char want[128];
  snprintf(want, sizeof want, "GET /q 200 %d ", (int)strlen("n=1 a limit=(null)"));
  EXPECT_STR_CONTAINS(log.data, want);
  EXPECT_INT_EQ(strlen(id), 36);
  EXPECT_STR_CONTAINS(log.data, id);
  EXPECT_TRUE(strstr(log.data, "sk-test-key") == NULL);
  EXPECT_TRUE(strstr(log.data, "topsecret") == NULL);
  EXPECT_TRUE(strstr(log.data, "include=a") == NULL); /* the query is not logged either */
  buf_free(&log);
}

TEST(http_server_stream_backpressure_blocks_producer) {
  http_server *srv = start(false, 0);
  ASSERT_TRUE(srv != NULL);
  atomic_store(&g_written, 0);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_TRUE(fd >= 0);
  int rcv = 64 * 1024;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(srv))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_INT_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const char req[] = "GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  send(fd, req, sizeof req - 1, 0);
  usleep(400 * 1000); /* the client reads nothing: the producer must stall */
  size_t stalled = atomic_load(&g_written);
  EXPECT_INT_GT(stalled, 0);
  /* 4 MiB queue + kernel socket buffers; far below the 64 MiB produced. */
  EXPECT_INT_LT(stalled, (size_t)24 << 20);
  struct timeval tv = {3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char *tmp = malloc(1 << 16);
  ASSERT_TRUE(tmp != NULL);
  size_t total = 0;
  char tail[8] = {0};
  for (;;) {
    ssize_t n = recv(fd, tmp, 1 << 16, 0);
    if (n <= 0) break;
    total += (size_t)n;
    if (n >= 5) memcpy(tail, tmp + n - 5, 5);
  }
  free(tmp);
  close(fd);
  EXPECT_INT_GT(total, (size_t)64 << 20);
  EXPECT_STR_EQ(tail, "0\r\n\r\n");
  EXPECT_INT_EQ(atomic_load(&g_written), (size_t)64 << 20);
  http_server_free(srv);
}
