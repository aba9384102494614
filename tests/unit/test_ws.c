/*
 * test_ws.c - tests of http/ws: a ws_loop over one end of a socketpair, the
 * other end driven by the small RFC 6455 client codec below (masked frames
 * out, unmasked frames in), written independently of ws.c and of wslay.
 */
#include "test.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "base/err.h"
#include "base/util.h"
#include "http/ws.h"

/* ---- client codec --------------------------------------------------------- */

enum { OP_CONT = 0, OP_TEXT = 1, OP_BIN = 2, OP_CLOSE = 8, OP_PING = 9, OP_PONG = 10 };

/* Encodes one client frame into a malloc'd buffer; *n_out is its size. */
static uint8_t *frame_enc(int fin, int opcode, const void *payload, size_t n, bool mask,
                          size_t *n_out) {
  uint8_t *out = malloc(n + 14);
  size_t k = 0;
  out[k++] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0F));
  uint8_t mbit = mask ? 0x80 : 0;
  if (n < 126) {
    out[k++] = (uint8_t)(mbit | n);
  } else if (n < 65536) {
    out[k++] = mbit | 126;
    out[k++] = (uint8_t)(n >> 8);
    out[k++] = (uint8_t)n;
  } else {
    out[k++] = mbit | 127;
    for (int s = 56; s >= 0; s -= 8) out[k++] = (uint8_t)((uint64_t)n >> s);
  }
  const uint8_t key[4] = {0x37, 0xfa, 0x21, 0x3d};
  if (mask) {
    memcpy(out + k, key, 4);
    k += 4;
  }
  const uint8_t *p = payload;
  for (size_t i = 0; i < n; i++) out[k + i] = mask ? (uint8_t)(p[i] ^ key[i % 4]) : p[i];
  *n_out = k + n;
  return out;
}

static bool write_all(int fd, const void *buf, size_t n) {
  const uint8_t *p = buf;
  while (n > 0) {
    ssize_t r = write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}

static bool send_frame(int fd, int fin, int opcode, const void *payload, size_t n) {
  size_t len;
  uint8_t *f = frame_enc(fin, opcode, payload, n, true, &len);
  bool ok = write_all(fd, f, len);
  free(f);
  return ok;
}

static bool send_close(int fd, int code, const char *reason) {
  uint8_t p[125];
  size_t rl = strlen(reason);
  p[0] = (uint8_t)(code >> 8);
  p[1] = (uint8_t)code;
  memcpy(p + 2, reason, rl);
  return send_frame(fd, 1, OP_CLOSE, p, rl + 2);
}

/* 1 = all read, 0 = EOF, -1 = timeout or error. */
static int read_full(int fd, void *buf, size_t n, int timeout_ms) {
  uint8_t *p = buf;
  while (n > 0) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int pr = poll(&pfd, 1, timeout_ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) return -1;
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return 0;
    p += r;
    n -= (size_t)r;
  }
  return 1;
}

typedef struct frame {
  int fin, opcode, masked;
  uint8_t *data; /* malloc'd, NUL-terminated */
  size_t len;
} frame;

/* 1 = frame read, 0 = EOF before a frame, -1 = timeout or broken frame. */
static int read_frame(int fd, frame *f, int timeout_ms) {
  memset(f, 0, sizeof *f);
  uint8_t h[2];
  int r = read_full(fd, h, 2, timeout_ms);
  if (r <= 0) return r;
  f->fin = h[0] >> 7;
  f->opcode = h[0] & 0x0F;
  f->masked = h[1] >> 7;
  uint64_t n = h[1] & 0x7F;
  if (n == 126) {
    uint8_t e[2];
    if (read_full(fd, e, 2, timeout_ms) != 1) return -1;
    n = ((uint64_t)e[0] << 8) | e[1];
  } else if (n == 127) {
    uint8_t e[8];
    if (read_full(fd, e, 8, timeout_ms) != 1) return -1;
    n = 0;
    for (int i = 0; i < 8; i++) n = (n << 8) | e[i];
  }
  if (n > (64u << 20)) return -1;
  uint8_t key[4] = {0};
  if (f->masked && read_full(fd, key, 4, timeout_ms) != 1) return -1;
  f->data = malloc((size_t)n + 1);
  f->len = (size_t)n;
  if (n && read_full(fd, f->data, (size_t)n, timeout_ms) != 1) {
    free(f->data);
    f->data = NULL;
    return -1;
  }
  if (f->masked)
    for (size_t i = 0; i < n; i++) f->data[i] ^= key[i % 4];
  f->data[n] = 0;
  return 1;
}

static int close_code_of(const frame *f) {
  return f->len >= 2 ? (f->data[0] << 8) | f->data[1] : -1;
}

/* Reads frames until a close frame and returns its code (-1 on EOF/timeout). */
static int read_until_close(int fd, int timeout_ms) {
  for (;;) {
    frame f;
    if (read_frame(fd, &f, timeout_ms) != 1) return -1;
    int op = f.opcode, code = close_code_of(&f);
    free(f.data);
    if (op == OP_CLOSE) return code;
  }
}

/* ---- server-side test handler ---------------------------------------------- */

typedef struct tstate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n_open, n_msg, n_close;
  int close_code;
  char close_reason[128];
  bool echo;
  bool keep;            /* keep a reference to the last opened conn */
  ws_conn *conn;
  const char *greeting; /* sent from on_open when set */
  bool close_in_open;   /* on_open sends "bye-data" then ws_close(close_code_req) */
  int close_code_req;
  int send_after_close_rc;
  int bad_utf8_send_rc;
  int bad_close_code_rc;
} tstate;

static void ts_init(tstate *ts) {
  memset(ts, 0, sizeof *ts);
  pthread_mutex_init(&ts->mu, NULL);
  pthread_cond_init(&ts->cv, NULL);
  ts->echo = true;
  ts->close_code = -1;
}

static void ts_free(tstate *ts) {
  if (ts->conn) ws_conn_unref(ts->conn);
  pthread_mutex_destroy(&ts->mu);
  pthread_cond_destroy(&ts->cv);
}

static void h_open(ws_conn *c, void *ctx) {
  tstate *ts = ctx;
  EXPECT_TRUE(ws_conn_ctx(c) == ctx);
  pthread_mutex_lock(&ts->mu);
  ts->n_open++;
  if (ts->keep) {
    ws_conn_ref(c);
    if (ts->conn) ws_conn_unref(ts->conn);
    ts->conn = c;
  }
  pthread_cond_broadcast(&ts->cv);
  pthread_mutex_unlock(&ts->mu);
  ts->bad_utf8_send_rc = ws_send_text(c, "\xff", 1);
  ts->bad_close_code_rc = ws_close(c, 1005, "no");
  if (ts->greeting) ws_send_text(c, ts->greeting, strlen(ts->greeting));
  if (ts->close_in_open) {
    ws_send_text(c, "bye-data", 8);
    ws_close(c, ts->close_code_req, "done");
  }
}

static void h_message(ws_conn *c, enum ws_opcode op, const uint8_t *data, size_t len, void *ctx) {
  tstate *ts = ctx;
  pthread_mutex_lock(&ts->mu);
  ts->n_msg++;
  pthread_cond_broadcast(&ts->cv);
  pthread_mutex_unlock(&ts->mu);
  if (!ts->echo) return;
  if (op == WS_TEXT)
    ws_send_text(c, (const char *)data, len);
  else
    ws_send_binary(c, data, len);
}

static void h_close(ws_conn *c, int code, const char *reason, void *ctx) {
  tstate *ts = ctx;
  int rc = ws_send_text(c, "late", 4);
  pthread_mutex_lock(&ts->mu);
  ts->n_close++;
  ts->close_code = code;
  snprintf(ts->close_reason, sizeof ts->close_reason, "%s", reason ? reason : "(null)");
  ts->send_after_close_rc = rc;
  pthread_cond_broadcast(&ts->cv);
  pthread_mutex_unlock(&ts->mu);
}

static const ws_handler g_handler = {h_open, h_message, h_close};

/* Waits until *field >= want (under ts->mu) or timeout; returns the value. */
static int ts_wait(tstate *ts, int *field, int want, int timeout_ms) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += timeout_ms / 1000;
  dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&ts->mu);
  while (*field < want) {
    if (pthread_cond_timedwait(&ts->cv, &ts->mu, &dl) == ETIMEDOUT) break;
  }
  int v = *field;
  pthread_mutex_unlock(&ts->mu);
  return v;
}

static int ts_get(tstate *ts, const int *field) {
  pthread_mutex_lock(&ts->mu);
  int v = *field;
  pthread_mutex_unlock(&ts->mu);
  return v;
}

/* Adopts one end of a new socketpair into loop; returns the client end. */
static int open_client(ws_loop *loop, tstate *ts, const void *extra, size_t n_extra) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return -1;
  if (ws_loop_adopt(loop, sv[0], extra, n_extra, &g_handler, ts, NULL, NULL) != 0) {
    close(sv[0]);
    close(sv[1]);
    return -1;
  }
  return sv[1];
}

static double now_ms(void) { return (double)time_mono_ns() / 1e6; }

/* Polls ws_loop_n_open until it equals want (it drops after on_close returns). */
static size_t wait_n_open(ws_loop *loop, size_t want, int timeout_ms) {
  double end = now_ms() + timeout_ms;
  while (ws_loop_n_open(loop) != want && now_ms() < end) usleep(1000);
  return ws_loop_n_open(loop);
}

/* ---- tests ----------------------------------------------------------------- */

TEST(ws_utf8_validator_cases) {
  static const struct {
    const char *s;
    size_t n;
    bool ok;
  } cases[] = {
      {"", 0, true},
      {"plain ascii", 11, true},
      {"caf\xc3\xa9", 5, true},             /* U+00E9 */
      {"\xe2\x82\xac", 3, true},            /* U+20AC euro */
      {"\xf0\x9f\x98\x80", 4, true},        /* U+1F600 */
      {"\xf4\x8f\xbf\xbf", 4, true},        /* U+10FFFF, the last code point */
      {"\xef\xbb\xbf", 3, true},            /* BOM U+FEFF */
      {"\xc3\x28", 2, false},               /* bad continuation */
      {"\xc0\xaf", 2, false},               /* overlong '/' */
      {"\xe0\x80\xaf", 3, false},           /* overlong 3-byte */
      {"\xf0\x80\x80\xaf", 4, false},       /* overlong 4-byte */
      {"\xed\xa0\x80", 3, false},           /* surrogate U+D800 */
      {"\xed\xbf\xbf", 3, false},           /* surrogate U+DFFF */
      {"\xed\x9f\xbf", 3, true},            /* U+D7FF, just below surrogates */
      {"\xf4\x90\x80\x80", 4, false},       /* U+110000 */
      {"\xf5\x80\x80\x80", 4, false},       /* lead byte F5 */
      {"\xff", 1, false},
      {"\x80", 1, false},                   /* lone continuation */
      {"\xe2\x82", 2, false},               /* truncated */
      {"a\x00" "b", 3, true},               /* NUL is a valid code point */
  };
  for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
    bool got = ws_utf8_valid((const uint8_t *)cases[i].s, cases[i].n);
    TEST_CHECK_(got == cases[i].ok, 0, "case %zu: expected %d got %d", i, cases[i].ok, got);
  }
}

TEST(ws_adopt_rejects_bad_arguments) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  EXPECT_INT_EQ(ws_loop_adopt(loop, -1, NULL, 0, &g_handler, &ts, NULL, NULL), ERR_INVALID);
  EXPECT_INT_EQ(ws_loop_adopt(loop, 0, NULL, 0, NULL, &ts, NULL, NULL), ERR_INVALID);
  EXPECT_INT_EQ(ws_loop_adopt(loop, 0, NULL, 5, &g_handler, &ts, NULL, NULL), ERR_INVALID);
  EXPECT_INT_EQ(wait_n_open(loop, 0, 2000), 0);
  ws_loop_free(loop);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_close), 0);
  ts_free(&ts);
}

TEST(ws_echo_text_and_binary) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  frame f;
  ASSERT_TRUE(send_frame(fd, 1, OP_TEXT, "hello", 5));
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
  EXPECT_INT_EQ(f.opcode, OP_TEXT);
  EXPECT_INT_EQ(f.fin, 1);
  EXPECT_INT_EQ(f.masked, 0); /* the server never masks */
  EXPECT_STR_EQ((char *)f.data, "hello");
  free(f.data);
  /* binary of 300 bytes (16-bit length) and 70000 bytes (64-bit length) */
  size_t sizes[] = {0, 300, 70000};
  for (size_t s = 0; s < ARRAY_LEN(sizes); s++) {
    size_t n = sizes[s];
    uint8_t *b = malloc(n + 1);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(i * 7 + 3);
    ASSERT_TRUE(send_frame(fd, 1, OP_BIN, b, n));
    ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
    EXPECT_INT_EQ(f.opcode, OP_BIN);
    EXPECT_INT_EQ(f.len, n);
    if (f.len == n) EXPECT_MEM_EQ(f.data, b, n);
    free(f.data);
    free(b);
  }
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_msg), 4);
  EXPECT_INT_EQ(ws_loop_n_open(loop), 1);
  ASSERT_TRUE(send_close(fd, 1000, ""));
  EXPECT_INT_EQ(read_until_close(fd, 2000), 1000);
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 2000), 1);
  EXPECT_INT_EQ(ts.close_code, 1000);
  EXPECT_INT_EQ(ts.bad_utf8_send_rc, ERR_INVALID);
  EXPECT_INT_EQ(ts.bad_close_code_rc, ERR_INVALID);
  EXPECT_INT_EQ(ts.send_after_close_rc, ERR_CANCELLED);
  close(fd);
  ws_loop_free(loop);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_close), 1);
  ts_free(&ts);
}

TEST(ws_fragmented_message_delivered_whole) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  ASSERT_TRUE(send_frame(fd, 0, OP_TEXT, "Hel", 3));
  ASSERT_TRUE(send_frame(fd, 1, OP_PING, "mid", 3)); /* control frame between fragments */
  ASSERT_TRUE(send_frame(fd, 0, OP_CONT, "lo, ", 4));
  ASSERT_TRUE(send_frame(fd, 1, OP_CONT, "world", 5));
  frame f;
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
  EXPECT_INT_EQ(f.opcode, OP_PONG);
  EXPECT_STR_EQ((char *)f.data, "mid");
  free(f.data);
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
  EXPECT_INT_EQ(f.opcode, OP_TEXT);
  EXPECT_STR_EQ((char *)f.data, "Hello, world");
  free(f.data);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_msg), 1);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

TEST(ws_ping_gets_pong_with_same_payload) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  uint8_t payload[125];
  for (int i = 0; i < 125; i++) payload[i] = (uint8_t)(255 - i);
  ASSERT_TRUE(send_frame(fd, 1, OP_PING, payload, sizeof payload));
  frame f;
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
  EXPECT_INT_EQ(f.opcode, OP_PONG);
  EXPECT_INT_EQ(f.len, 125);
  if (f.len == 125) EXPECT_MEM_EQ(f.data, payload, 125);
  free(f.data);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_msg), 0);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

TEST(ws_close_1000_reason_echoed) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  ASSERT_TRUE(send_close(fd, 1000, "bye"));
  frame f;
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
  EXPECT_INT_EQ(f.opcode, OP_CLOSE);
  ASSERT_INT_EQ(f.len, 5);
  const uint8_t want[5] = {0x03, 0xe8, 'b', 'y', 'e'};
  EXPECT_MEM_EQ(f.data, want, 5);
  free(f.data);
  uint8_t b;
  EXPECT_INT_EQ(read_full(fd, &b, 1, 2000), 0); /* then the server hangs up */
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 2000), 1);
  EXPECT_INT_EQ(ts.close_code, 1000);
  EXPECT_STR_EQ(ts.close_reason, "bye");
  usleep(100 * 1000);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_close), 1);
  EXPECT_INT_EQ(wait_n_open(loop, 0, 2000), 0);
  close(fd);
  ws_loop_free(loop);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_close), 1);
  ts_free(&ts);
}

TEST(ws_oversized_message_closes_1009) {
  ws_config cfg = {.max_message = 1024};
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(&cfg, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  uint8_t ok[1024] = {0}, big[2000] = {0};
  ASSERT_TRUE(send_frame(fd, 1, OP_BIN, ok, sizeof ok)); /* exactly the limit is fine */
  frame f;
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
  EXPECT_INT_EQ(f.len, 1024);
  free(f.data);
  ASSERT_TRUE(send_frame(fd, 1, OP_BIN, big, sizeof big));
  EXPECT_INT_EQ(read_until_close(fd, 2000), 1009);
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 2000), 1);
  EXPECT_INT_EQ(ts.close_code, 1009);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_msg), 1);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

TEST(ws_oversized_fragmented_message_closes_1009) {
  ws_config cfg = {.max_message = 1000};
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(&cfg, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  uint8_t part[600] = {0};
  ASSERT_TRUE(send_frame(fd, 0, OP_BIN, part, sizeof part));
  ASSERT_TRUE(send_frame(fd, 1, OP_CONT, part, sizeof part)); /* 1200 in total */
  EXPECT_INT_EQ(read_until_close(fd, 2000), 1009);
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 2000), 1);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_msg), 0);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

TEST(ws_invalid_utf8_text_closes_1007) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  ASSERT_TRUE(send_frame(fd, 1, OP_TEXT, "ok\xed\xa0\x80", 5)); /* a surrogate */
  EXPECT_INT_EQ(read_until_close(fd, 2000), 1007);
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 2000), 1);
  EXPECT_INT_EQ(ts.close_code, 1007);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_msg), 0);
  close(fd);
  /* a character split across fragments is fine; binary is never checked */
  ts_init(&ts);
  fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  ASSERT_TRUE(send_frame(fd, 0, OP_TEXT, "\xe2\x82", 2));
  ASSERT_TRUE(send_frame(fd, 1, OP_CONT, "\xac", 1));
  ASSERT_TRUE(send_frame(fd, 1, OP_BIN, "\xff\xfe", 2));
  frame f;
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
  EXPECT_STR_EQ((char *)f.data, "\xe2\x82\xac");
  free(f.data);
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
  EXPECT_INT_EQ(f.opcode, OP_BIN);
  free(f.data);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

TEST(ws_unmasked_client_frame_closes_1002) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  size_t n;
  uint8_t *raw = frame_enc(1, OP_TEXT, "hi", 2, false, &n);
  ASSERT_TRUE(write_all(fd, raw, n));
  free(raw);
  EXPECT_INT_EQ(read_until_close(fd, 2000), 1002);
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 2000), 1);
  EXPECT_INT_EQ(ts.close_code, 1002);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_msg), 0);
  close(fd);
  /* a reserved opcode is a protocol error too */
  ts_init(&ts);
  fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  ASSERT_TRUE(send_frame(fd, 1, 3, "x", 1));
  EXPECT_INT_EQ(read_until_close(fd, 2000), 1002);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

TEST(ws_abrupt_disconnect_gives_1006) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  ASSERT_INT_EQ(ts_wait(&ts, &ts.n_open, 1, 2000), 1);
  ASSERT_TRUE(send_frame(fd, 0, OP_TEXT, "half a mess", 11)); /* mid-message */
  close(fd);
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 2000), 1);
  EXPECT_INT_EQ(ts.close_code, 1006);
  EXPECT_INT_EQ(wait_n_open(loop, 0, 2000), 0);
  ws_loop_free(loop);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_close), 1);
  ts_free(&ts);
}

typedef struct sender_arg {
  ws_conn *c;
  int n;
  int n_failed;
} sender_arg;

static void *sender_main(void *p) {
  sender_arg *a = p;
  char buf[32];
  for (int i = 0; i < a->n; i++) {
    int len = snprintf(buf, sizeof buf, "t%d", i);
    if (ws_send_text(a->c, buf, (size_t)len) != 0) a->n_failed++;
    if (i % 16 == 0) usleep(100);
  }
  return NULL;
}

TEST(ws_send_from_other_thread_while_messages_flow) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  ts.keep = true;
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  ASSERT_INT_EQ(ts_wait(&ts, &ts.n_open, 1, 2000), 1);
  enum { N = 300 };
  sender_arg a = {ts.conn, N, 0};
  pthread_t th;
  ASSERT_INT_EQ(pthread_create(&th, NULL, sender_main, &a), 0);
  for (int i = 0; i < N; i++) {
    uint8_t b[4] = {(uint8_t)(i >> 8), (uint8_t)i, 0xAB, 0xCD};
    ASSERT_TRUE(send_frame(fd, 1, OP_BIN, b, 4));
  }
  int next_text = 0, next_bin = 0, bad = 0;
  while (next_text < N || next_bin < N) {
    frame f;
    if (read_frame(fd, &f, 3000) != 1) break;
    if (f.opcode == OP_TEXT) {
      char want[32];
      snprintf(want, sizeof want, "t%d", next_text);
      if (strcmp((char *)f.data, want) != 0) bad++;
      next_text++;
    } else if (f.opcode == OP_BIN && f.len == 4) {
      if (((f.data[0] << 8) | f.data[1]) != next_bin) bad++;
      next_bin++;
    } else {
      bad++;
    }
    free(f.data);
  }
  pthread_join(th, NULL);
  EXPECT_INT_EQ(next_text, N);
  EXPECT_INT_EQ(next_bin, N);
  EXPECT_INT_EQ(bad, 0);
  EXPECT_INT_EQ(a.n_failed, 0);
  close(fd);
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 2000), 1);
  EXPECT_INT_EQ(ws_send_text(ts.conn, "x", 1), ERR_CANCELLED); /* our reference keeps it valid */
  ws_loop_free(loop);
  EXPECT_INT_EQ(ws_close(ts.conn, 1000, ""), ERR_CANCELLED); /* still valid after the loop is gone */
  ts_free(&ts);
}

TEST(ws_idle_timeout_closes_1001) {
  ws_config cfg = {.idle_timeout_ms = 250};
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(&cfg, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  /* activity keeps it open past the timeout */
  for (int i = 0; i < 5; i++) {
    usleep(100 * 1000);
    ASSERT_TRUE(send_frame(fd, 1, OP_PING, "p", 1));
    frame f;
    ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
    EXPECT_INT_EQ(f.opcode, OP_PONG);
    free(f.data);
  }
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_close), 0);
  double t0 = now_ms();
  EXPECT_INT_EQ(read_until_close(fd, 3000), 1001);
  double dt = now_ms() - t0;
  EXPECT_TRUE(dt >= 150 && dt < 1500);
  ASSERT_TRUE(send_close(fd, 1001, ""));
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 3000), 1);
  EXPECT_INT_EQ(ts.close_code, 1001);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

/* A silent peer is pinged; one that answers stays, one that does not is
 * closed 1001 about one interval after the ping. */
TEST(ws_ping_timeout_closes_a_dead_peer) {
  ws_config cfg = {.ping_interval_ms = 200};
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(&cfg, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  for (int i = 0; i < 3; i++) { /* answering keeps it open */
    frame f;
    ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
    EXPECT_INT_EQ(f.opcode, OP_PING);
    ASSERT_TRUE(send_frame(fd, 1, OP_PONG, f.data, f.len));
    free(f.data);
  }
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_close), 0);
  frame f;
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1); /* the next ping, left unanswered */
  EXPECT_INT_EQ(f.opcode, OP_PING);
  free(f.data);
  double t0 = now_ms();
  EXPECT_INT_EQ(read_until_close(fd, 3000), 1001);
  double dt = now_ms() - t0;
  EXPECT_TRUE(dt >= 100 && dt < 1500);
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 4000), 1);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

/* Pongs alone do not count as use: a peer that only answers pings is idle. */
TEST(ws_idle_timeout_ignores_pongs) {
  ws_config cfg = {.ping_interval_ms = 100, .idle_timeout_ms = 600};
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(&cfg, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  double t0 = now_ms();
  int code = -1;
  for (;;) {
    frame f;
    if (read_frame(fd, &f, 3000) != 1) break;
    int op = f.opcode;
    if (op == OP_PING) send_frame(fd, 1, OP_PONG, f.data, f.len);
    if (op == OP_CLOSE) code = close_code_of(&f);
    free(f.data);
    if (op == OP_CLOSE) break;
  }
  EXPECT_INT_EQ(code, 1001);
  double dt = now_ms() - t0;
  EXPECT_TRUE(dt >= 500 && dt < 2500);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

TEST(ws_loop_free_closes_open_connections_1001) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fds[3];
  for (int i = 0; i < 3; i++) ASSERT_TRUE((fds[i] = open_client(loop, &ts, NULL, 0)) >= 0);
  ASSERT_INT_EQ(ts_wait(&ts, &ts.n_open, 3, 2000), 3);
  double t0 = now_ms();
  ws_loop_free(loop);
  EXPECT_TRUE(now_ms() - t0 < 1000); /* no waiting for peers that are writable */
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_close), 3);
  EXPECT_INT_EQ(ts.close_code, 1001);
  for (int i = 0; i < 3; i++) {
    EXPECT_INT_EQ(read_until_close(fds[i], 2000), 1001);
    close(fds[i]);
  }
  ts_free(&ts);
}

TEST(ws_many_connections_on_one_loop) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  enum { N = 50 };
  int fds[N];
  for (int i = 0; i < N; i++) ASSERT_TRUE((fds[i] = open_client(loop, &ts, NULL, 0)) >= 0);
  EXPECT_INT_EQ(ws_loop_n_open(loop), N);
  for (int i = 0; i < N; i++) {
    char m[16];
    int n = snprintf(m, sizeof m, "m%d", i);
    ASSERT_TRUE(send_frame(fds[i], 1, OP_TEXT, m, (size_t)n));
  }
  int good = 0;
  for (int i = 0; i < N; i++) {
    char m[16];
    snprintf(m, sizeof m, "m%d", i);
    frame f;
    if (read_frame(fds[i], &f, 2000) == 1) {
      if (f.opcode == OP_TEXT && strcmp((char *)f.data, m) == 0) good++;
      free(f.data);
    }
  }
  EXPECT_INT_EQ(good, N);
  for (int i = 0; i < N; i++) close(fds[i]);
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, N, 3000), N);
  EXPECT_INT_EQ(wait_n_open(loop, 0, 2000), 0);
  ws_loop_free(loop);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_close), N);
  ts_free(&ts);
}

TEST(ws_adopt_with_first_frame_in_extra) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  ts.greeting = "welcome";
  size_t n1, n2;
  uint8_t *f1 = frame_enc(1, OP_TEXT, "first", 5, true, &n1);
  uint8_t *f2 = frame_enc(1, OP_TEXT, "second", 6, true, &n2);
  uint8_t extra[64];
  memcpy(extra, f1, n1);
  memcpy(extra + n1, f2, 3); /* the second frame starts in extra ... */
  int fd = open_client(loop, &ts, extra, n1 + 3);
  ASSERT_TRUE(fd >= 0);
  frame f;
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1); /* on_open runs before any message */
  EXPECT_STR_EQ((char *)f.data, "welcome");
  free(f.data);
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1); /* extra is read without any socket data */
  EXPECT_STR_EQ((char *)f.data, "first");
  free(f.data);
  ASSERT_TRUE(write_all(fd, f2 + 3, n2 - 3)); /* ... and ends on the socket */
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
  EXPECT_STR_EQ((char *)f.data, "second");
  free(f.data);
  free(f1);
  free(f2);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

TEST(ws_close_api_flushes_then_closes) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  ts.close_in_open = true;
  ts.close_code_req = 1000;
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  frame f;
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
  EXPECT_INT_EQ(f.opcode, OP_TEXT);
  EXPECT_STR_EQ((char *)f.data, "bye-data"); /* queued before ws_close: sent first */
  free(f.data);
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
  EXPECT_INT_EQ(f.opcode, OP_CLOSE);
  EXPECT_INT_EQ(close_code_of(&f), 1000);
  EXPECT_TRUE(f.len == 6 && memcmp(f.data + 2, "done", 4) == 0);
  free(f.data);
  /* messages after the server's close are not delivered */
  ASSERT_TRUE(send_frame(fd, 1, OP_TEXT, "ignored", 7));
  ASSERT_TRUE(send_close(fd, 1000, "ok"));
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 2000), 1);
  EXPECT_INT_EQ(ts.close_code, 1000);
  EXPECT_STR_EQ(ts.close_reason, "ok");
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_msg), 0);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

TEST(ws_close_api_force_closes_silent_peer) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  ts.close_in_open = true;
  ts.close_code_req = 4000;
  double t0 = now_ms();
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  EXPECT_INT_EQ(read_until_close(fd, 2000), 4000);
  /* never answer */
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 5000), 1);
  double dt = now_ms() - t0;
  EXPECT_TRUE(dt >= 1800 && dt < 4000);
  EXPECT_INT_EQ(ts.close_code, 4000);
  uint8_t b;
  EXPECT_INT_EQ(read_full(fd, &b, 1, 2000), 0);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

TEST(ws_slow_reader_dropped_with_1008) {
  ws_config cfg = {.max_send_queue = 64 * 1024};
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(&cfg, &loop), 0);
  tstate ts;
  ts_init(&ts);
  ts.keep = true;
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  ASSERT_INT_EQ(ts_wait(&ts, &ts.n_open, 1, 2000), 1);
  static uint8_t chunk[16 * 1024];
  int overloaded_at = -1;
  for (int i = 0; i < 400 && overloaded_at < 0; i++) {
    int r = ws_send_binary(ts.conn, chunk, sizeof chunk);
    if (r == ERR_OVERLOADED) overloaded_at = i;
    else if (r != 0) break;
    if (i % 4 == 3) usleep(2000); /* let the loop fill the socket buffer */
  }
  EXPECT_TRUE(overloaded_at > 0);
  EXPECT_INT_EQ(ws_send_binary(ts.conn, chunk, 1), ERR_CANCELLED);
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 5000), 1);
  EXPECT_INT_EQ(ts.close_code, 1008);
  /* the client finally reads: data frames, possibly the close, then EOF */
  int last_op = -1, last_code = -1;
  for (;;) {
    frame f;
    if (read_frame(fd, &f, 2000) != 1) break;
    last_op = f.opcode;
    last_code = close_code_of(&f);
    free(f.data);
  }
  if (last_op == OP_CLOSE) EXPECT_INT_EQ(last_code, 1008);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

static int g_released;
static void release_fd(void *arg) {
  g_released++;
  (void)arg;
}

TEST(ws_release_callback_replaces_close) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int sv[2];
  ASSERT_INT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_INT_EQ(ws_loop_adopt(loop, sv[0], NULL, 0, &g_handler, &ts, release_fd, NULL), 0);
  ASSERT_TRUE(send_close(sv[1], 1000, ""));
  EXPECT_INT_EQ(read_until_close(sv[1], 2000), 1000);
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 2000), 1);
  EXPECT_INT_EQ(g_released, 1);
  EXPECT_TRUE(fcntl(sv[0], F_GETFD) >= 0); /* still open: the releaser owns it */
  close(sv[0]);
  close(sv[1]);
  ws_loop_free(loop);
  EXPECT_INT_EQ(g_released, 1);
  ts_free(&ts);
}

TEST(ws_loop_new_and_free_without_connections) {
  ws_loop_free(NULL);
  EXPECT_INT_EQ(ws_loop_n_open(NULL), 0);
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  ws_loop_free(loop);
}

typedef struct multi_arg {
  ws_conn *c;
  int id, n;
  int n_ok, n_cancelled, n_other;
} multi_arg;

static void *multi_sender(void *p) {
  multi_arg *a = p;
  for (int i = 0; i < a->n; i++) {
    uint8_t b[3] = {(uint8_t)a->id, (uint8_t)(i >> 8), (uint8_t)i};
    int r = ws_send_binary(a->c, b, 3);
    if (r == 0)
      a->n_ok++;
    else if (r == ERR_CANCELLED)
      a->n_cancelled++;
    else
      a->n_other++;
    if (i % 32 == 0) usleep(200);
  }
  return NULL;
}

TEST(ws_concurrent_senders_then_close_from_another_thread) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  ts.keep = true;
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  ASSERT_INT_EQ(ts_wait(&ts, &ts.n_open, 1, 2000), 1);
  enum { T = 4, N = 1000 };
  multi_arg args[T];
  pthread_t th[T];
  for (int t = 0; t < T; t++) {
    args[t] = (multi_arg){ts.conn, t, N, 0, 0, 0};
    ASSERT_INT_EQ(pthread_create(&th[t], NULL, multi_sender, &args[t]), 0);
  }
  usleep(5000);
  EXPECT_INT_EQ(ws_close(ts.conn, 1000, "enough"), 0);
  EXPECT_INT_EQ(ws_close(ts.conn, 1000, "again"), ERR_CANCELLED);
  for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
  int next[T] = {0}, bad = 0, close_code = -1;
  for (;;) {
    frame f;
    if (read_frame(fd, &f, 2000) != 1) break;
    if (f.opcode == OP_CLOSE) {
      close_code = close_code_of(&f);
      free(f.data);
      break;
    }
    if (f.opcode != OP_BIN || f.len != 3 || f.data[0] >= T) {
      bad++;
    } else {
      int t = f.data[0], i = (f.data[1] << 8) | f.data[2];
      if (i != next[t]) bad++; /* each thread's messages arrive in order, none lost */
      next[t] = i + 1;
    }
    free(f.data);
  }
  EXPECT_INT_EQ(close_code, 1000);
  EXPECT_INT_EQ(bad, 0);
  for (int t = 0; t < T; t++) {
    EXPECT_INT_EQ(args[t].n_other, 0);
    EXPECT_INT_EQ(args[t].n_ok + args[t].n_cancelled, N);
    EXPECT_INT_EQ(next[t], args[t].n_ok); /* every accepted message was delivered */
  }
  ASSERT_TRUE(send_close(fd, 1000, ""));
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 2000), 1);
  EXPECT_INT_EQ(ts.close_code, 1000);
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

TEST(ws_peer_close_without_code_reports_1005) {
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(NULL, &loop), 0);
  tstate ts;
  ts_init(&ts);
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  ASSERT_TRUE(send_frame(fd, 1, OP_CLOSE, "", 0));
  frame f;
  ASSERT_INT_EQ(read_frame(fd, &f, 2000), 1);
  EXPECT_INT_EQ(f.opcode, OP_CLOSE);
  EXPECT_INT_EQ(f.len, 0); /* echoed as an empty close */
  free(f.data);
  EXPECT_INT_EQ(ts_wait(&ts, &ts.n_close, 1, 2000), 1);
  EXPECT_INT_EQ(ts.close_code, 1005);
  EXPECT_STR_EQ(ts.close_reason, "");
  close(fd);
  ws_loop_free(loop);
  ts_free(&ts);
}

TEST(ws_loop_free_bounded_with_peer_that_never_reads) {
  ws_config cfg = {.max_send_queue = 4u << 20};
  ws_loop *loop;
  ASSERT_INT_EQ(ws_loop_new(&cfg, &loop), 0);
  tstate ts;
  ts_init(&ts);
  ts.keep = true;
  int fd = open_client(loop, &ts, NULL, 0);
  ASSERT_TRUE(fd >= 0);
  ASSERT_INT_EQ(ts_wait(&ts, &ts.n_open, 1, 2000), 1);
  static uint8_t chunk[64 * 1024];
  for (int i = 0; i < 16; i++) ASSERT_INT_EQ(ws_send_binary(ts.conn, chunk, sizeof chunk), 0);
  usleep(50 * 1000); /* the socket buffer fills; the rest waits in the queue */
  double t0 = now_ms();
  ws_loop_free(loop);
  double dt = now_ms() - t0;
  EXPECT_TRUE(dt < 3500);
  EXPECT_INT_EQ(ts_get(&ts, &ts.n_close), 1);
  EXPECT_INT_EQ(ts.close_code, 1001);
  close(fd);
  ts_free(&ts);
}
