/*
 * ws.h - WebSocket connections after the HTTP upgrade, framed with wslay.
 *
 * One I/O thread (the ws loop) runs epoll over every upgraded socket, reads
 * and writes frames with wslay's event API, reassembles fragmented messages,
 * answers pings, enforces the maximum message size (close 1009) and performs
 * the close handshake. Handler callbacks run on the loop thread and must not
 * block: hand longer work to another thread, which may then send with
 * ws_send_*() (thread-safe; queued and flushed by the loop).
 *
 * Ownership: the loop owns ws_conn. A thread other than the loop that keeps a
 * pointer takes a reference (ws_conn_ref) and drops it (ws_conn_unref) when
 * done; sends on a closed connection return ERR_CANCELLED.
 */
#ifndef PARLEY_HTTP_WS_H
#define PARLEY_HTTP_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ws_conn ws_conn;
typedef struct ws_loop ws_loop;

enum ws_opcode { WS_TEXT = 1, WS_BINARY = 2 };

/* Close codes used by the layer (RFC 6455 section 7.4.1). */
enum ws_close_code {
  WS_CLOSE_NORMAL = 1000,
  WS_CLOSE_GOING_AWAY = 1001,
  WS_CLOSE_PROTOCOL = 1002,
  WS_CLOSE_UNSUPPORTED = 1003,
  WS_CLOSE_INVALID_DATA = 1007,
  WS_CLOSE_POLICY = 1008,
  WS_CLOSE_TOO_BIG = 1009,
  WS_CLOSE_INTERNAL = 1011,
};

typedef struct ws_handler {
  /* After the upgrade, before any message. May send. */
  void (*on_open)(ws_conn *c, void *ctx);
  /* One whole message (fragments joined). Text messages are valid UTF-8
   * (invalid text closes the connection with 1007 before this is called). */
  void (*on_message)(ws_conn *c, enum ws_opcode op, const uint8_t *data, size_t len, void *ctx);
  /* Exactly once, when the connection is gone (close handshake, error or
   * server stop). code is the peer's close code, or 1006 when none. After
   * this returns, ctx is no longer used by the loop.
   * In detail: the peer's code when it sent a close frame (1005 when that
   * frame carried no code); else the code this side sent when it closed
   * first (1001 idle timeout or ws_loop_free, 1002 protocol error, 1007
   * invalid UTF-8, 1008 send queue full, 1009 message too big, or the code
   * given to ws_close when the peer never answered); else 1006. reason is
   * never NULL ("" when none) and is valid only during the call. */
  void (*on_close)(ws_conn *c, int code, const char *reason, void *ctx);
} ws_handler;

typedef struct ws_config {
  size_t max_message;        /* bytes; default 16 MiB */
  unsigned idle_timeout_ms;  /* close 1001 after this long without a data message
                                either way or a ping from the peer; 0 = never */
  unsigned ping_interval_ms; /* ping a peer silent this long; close 1001 "ping timeout"
                                when nothing came back one interval later; 0 = never */
  size_t max_send_queue;     /* bytes queued for a slow reader before frames are dropped
                                and the connection closed with 1008; default 8 MiB */
} ws_config;

/* cfg may be NULL; zero fields take the defaults. */
int ws_loop_new(const ws_config *cfg, ws_loop **out);
/* Closes every connection with 1001 and joins the thread. Each connection is
 * finished (on_close called) once its close frame is written, or after 2 s.
 * Must not be called from a handler callback (it would join its own thread). */
void ws_loop_free(ws_loop *loop);
/* Takes over a connected socket (already upgraded). extra holds bytes the
 * HTTP layer read past the handshake (may be 0). release(release_arg) is
 * called once the socket is finished with (for the HTTP library's upgrade
 * handle); the loop never closes fd itself when release is given. */
/* The fd is made non-blocking; extra is copied; on_open runs on the loop
 * thread. On failure (ERR_INVALID, ERR_NOMEM, ERR_IO, ERR_CANCELLED when the
 * loop is stopping) nothing was taken: the caller still owns fd and release
 * is not called. */
int ws_loop_adopt(ws_loop *loop, int fd, const void *extra, size_t extra_len, const ws_handler *h,
                  void *ctx, void (*release)(void *arg), void *release_arg);
/* Connections adopted and not yet finished (a connection leaves the count
 * after its on_close has returned). */
size_t ws_loop_n_open(ws_loop *loop);

/* Queue one whole message (copied); any thread. Return 0, ERR_CANCELLED once
 * the connection is closing or closed, ERR_INVALID for text that is not valid
 * UTF-8, or ERR_OVERLOADED when the bytes queued for this peer would exceed
 * max_send_queue: then the message is dropped and the connection is closed
 * with 1008 (slow-reader policy, see ws.c). */
int ws_send_text(ws_conn *c, const char *data, size_t len);
int ws_send_binary(ws_conn *c, const void *data, size_t len);
/* Starts the close handshake with code and a short reason (cut to 123 bytes;
 * "" when not valid UTF-8). Messages queued before are sent first; after it
 * sends return ERR_CANCELLED and no more on_message is delivered. The
 * connection is force-closed when the peer has not answered within 2 s.
 * ERR_INVALID for a code that may not be sent (1004-1006, <1000, 1015..2999,
 * >4999); ERR_CANCELLED when already closing. Any thread. */
int ws_close(ws_conn *c, int code, const char *reason);
void ws_conn_ref(ws_conn *c);
void ws_conn_unref(ws_conn *c);
/* Per-connection user pointer for handlers. */
void *ws_conn_ctx(ws_conn *c);

/* True when s[0..n) is well-formed UTF-8 (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF). */
bool ws_utf8_valid(const uint8_t *s, size_t n);

#endif
