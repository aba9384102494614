/*
 * fuzz_ws.c - libFuzzer harness for http/ws: arbitrary client bytes into a
 * real ws_loop, half through the adopt "extra" path and half through the
 * socket, then EOF. Checks that the connection always ends with exactly one
 * on_close, that every server frame is well formed and unmasked, and that
 * ws_utf8_valid agrees with an independent table-driven validator (Unicode
 * Table 3-7, well-formed byte sequences).
 *
 * Input layout: byte 0 picks how many of the remaining bytes go into extra
 * (byte0 * n / 255); the rest is written to the socket.
 */
#include "fuzz.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/ws.h"

/* Unicode 15, Table 3-7. Independent of ws.c's decode-and-range approach. */
static int ref_utf8_valid(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t b = s[i];
    uint8_t lo = 0x80, hi = 0xBF;
    size_t k;
    if (b <= 0x7F) { i++; continue; }
    else if (b >= 0xC2 && b <= 0xDF) k = 1;
    else if (b == 0xE0) { k = 2; lo = 0xA0; }
    else if (b >= 0xE1 && b <= 0xEC) k = 2;
    else if (b == 0xED) { k = 2; hi = 0x9F; }
    else if (b >= 0xEE && b <= 0xEF) k = 2;
    else if (b == 0xF0) { k = 3; lo = 0x90; }
    else if (b >= 0xF1 && b <= 0xF3) k = 3;
    else if (b == 0xF4) { k = 3; hi = 0x8F; }
    else return 0;
    if (k >= n - i) return 0; /* truncated: needs bytes i+1 .. i+k */
    if (s[i + 1] < lo || s[i + 1] > hi) return 0;
    for (size_t j = 2; j <= k; j++)
      if (s[i + j] < 0x80 || s[i + j] > 0xBF) return 0;
    i += k + 1;
  }
  return 1;
}

typedef struct fstate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n_close;
  int code;
} fstate;

static void on_message(ws_conn *c, enum ws_opcode op, const uint8_t *d, size_t n, void *ctx) {
  (void)ctx;
  if (op == WS_TEXT) {
    if (!ws_utf8_valid(d, n)) __builtin_trap(); /* text reaching a handler is valid */
    ws_send_text(c, (const char *)d, n);
  } else {
    ws_send_binary(c, d, n);
  }
  if (n > 0 && d[0] == 'Q') ws_close(c, 1000, "bye");
}

static void on_close(ws_conn *c, int code, const char *reason, void *ctx) {
  (void)c;
  fstate *fs = ctx;
  if (!reason) __builtin_trap();
  pthread_mutex_lock(&fs->mu);
  fs->n_close++;
  fs->code = code;
  pthread_cond_broadcast(&fs->cv);
  pthread_mutex_unlock(&fs->mu);
}

static const ws_handler g_h = {NULL, on_message, on_close};
static ws_loop *g_loop;

/* Reads and checks every server frame until EOF. */
static void drain_and_check(int fd) {
  static uint8_t buf[1 << 20];
  size_t have = 0;
  for (;;) {
    ssize_t r = recv(fd, buf + have, sizeof buf - have, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += (size_t)r;
    if (have == sizeof buf) have = 0; /* output larger than the window: stop checking */
  }
  size_t off = 0;
  while (off + 2 <= have) {
    uint8_t b1 = buf[off + 1];
    if (b1 & 0x80) __builtin_trap(); /* server frames are never masked */
    uint64_t len = b1 & 0x7F;
    size_t h = 2;
    if (len == 126) {
      if (off + 4 > have) break;
      len = ((uint64_t)buf[off + 2] << 8) | buf[off + 3];
      h = 4;
    } else if (len == 127) {
      if (off + 10 > have) break;
      len = 0;
      for (int i = 0; i < 8; i++) len = (len << 8) | buf[off + 2 + i];
      h = 10;
    }
    if (len > have - off - h) break;
    int op = buf[off] & 0x0F;
    if (op == 8 && len == 1) __builtin_trap(); /* close payload is 0 or >= 2 bytes */
    if (op == 1 && !ref_utf8_valid(buf + off + h, (size_t)len)) __builtin_trap();
    off += h + (size_t)len;
  }
}

FUZZ_INIT(ws) {
  signal(SIGPIPE, SIG_IGN);
  ws_config cfg = {.max_message = 64 * 1024, .max_send_queue = 1 << 20};
  if (ws_loop_new(&cfg, &g_loop) != 0) abort();
}

FUZZ_TARGET(ws) {
  if (ws_utf8_valid(data, size) != (ref_utf8_valid(data, size) != 0)) __builtin_trap();
  if (size < 1 || size > 65536) return 0;
  size_t rest = size - 1;
  size_t n_extra = (size_t)data[0] * rest / 255;
  const uint8_t *p = data + 1;

  static fstate fs = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
  pthread_mutex_lock(&fs.mu);
  fs.n_close = 0;
  pthread_mutex_unlock(&fs.mu);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) abort();
  if (ws_loop_adopt(g_loop, sv[0], p, n_extra, &g_h, &fs, NULL, NULL) != 0) abort();
  size_t off = n_extra;
  while (off < rest) {
    ssize_t r = send(sv[1], p + off, rest - off, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break; /* the server already hung up */
    off += (size_t)r;
  }
  shutdown(sv[1], SHUT_WR);
  drain_and_check(sv[1]);
  pthread_mutex_lock(&fs.mu);
  while (fs.n_close == 0) pthread_cond_wait(&fs.cv, &fs.mu);
  pthread_mutex_unlock(&fs.mu);
  close(sv[1]);
  /* n_open drops after on_close has returned: then nothing more may come. */
  while (ws_loop_n_open(g_loop) != 0) usleep(10);
  pthread_mutex_lock(&fs.mu);
  int n_close = fs.n_close, code = fs.code;
  pthread_mutex_unlock(&fs.mu);
  if (n_close != 1) __builtin_trap();
  if (code < 1000 || code > 4999) __builtin_trap();
  return 0;
}
