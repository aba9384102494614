/*
 * ws.c - WebSocket connections after the HTTP upgrade: one epoll loop thread
 * per ws_loop drives wslay (RFC 6455 framing) over non-blocking sockets.
 *
 * Start reading at loop_main(), then conn_service(), which is the one place
 * that decides, after anything happened to a connection, whether to send,
 * start a close, finish it, or change what epoll waits for.
 *
 * Threads. Only the loop thread touches a connection's wslay context, its fd
 * and the loop's connection list. Other threads talk to a connection through
 * its mutex-protected outbox: ws_send_*() and ws_close() append there, put
 * the connection on the loop's dirty list (holding a reference) and write the
 * loop's eventfd; the loop moves outbox messages into wslay. Lock order is
 * conn->mu then loop->mu; the loop thread never holds loop->mu while taking a
 * conn->mu. Handler callbacks run on the loop thread with no lock held.
 *
 * Lifetime. ws_conn is reference counted. The loop holds one reference from
 * adoption until the connection is finished and reaped; every dirty-list entry
 * holds one; other holders take their own with ws_conn_ref(). "Finished" means
 * the socket was closed (or handed to release()), the wslay context freed,
 * on_close called (exactly once) and conn->closed set, after which every send
 * returns ERR_CANCELLED without touching the loop. ws_loop_free() finishes
 * every connection before it returns, so a late sender never reaches a freed
 * loop (the closed check and the dirty-list push happen under one conn->mu).
 *
 * Closing. A close frame from the peer is echoed by wslay (same code and
 * reason) and the connection finishes once the echo is written. Protocol
 * errors (unmasked client frame, bad opcode, reserved bits: 1002), invalid
 * UTF-8 in text (1007) and messages over max_message (1009) are detected by
 * wslay, which queues the close and stops reading; we finish once it is sent.
 * Text messages are checked again with ws_utf8_valid() before on_message.
 * ws_close() is graceful: frames queued before it are sent first, then the
 * close frame; the connection waits for the peer's close and is force-closed
 * WS_CLOSE_WAIT_MS after ws_close() if the peer never answers. Idle timeout
 * (no data message either way) and ping timeout (a peer silent for a ping
 * interval is pinged, and one more interval without a byte from it, the
 * pong, ends it) send 1001 at once (no data is pending that matters). ws_loop_free() sends
 * 1001 to every peer and finishes each connection as soon as its close frame
 * is written (or after WS_CLOSE_WAIT_MS), without waiting for the answers.
 * Once a close has started, no more on_message is delivered.
 *
 * Slow readers (drop policy). Each connection counts the bytes it has queued
 * and not yet written to the socket (outbox plus wslay's queue). A ws_send_*()
 * that would push that count over max_send_queue is refused: the message is
 * dropped, the call returns ERR_OVERLOADED, every message still in the outbox
 * is dropped too, and the connection is closed with 1008 "send queue full".
 * The close frame jumps ahead of the data frames wslay still holds (only the
 * frame being written is completed), so those are dropped as well. A peer that
 * reads nothing at all never gets the close frame and is cut off after
 * WS_CLOSE_WAIT_MS. A single message larger than max_send_queue therefore
 * always closes the connection; raise the limit for such traffic.
 *
 * on_close code: the peer's close code when the peer sent a close frame (1005
 * when its frame had no code); otherwise the code we sent or queued when we
 * closed (1001 idle/shutdown, 1002, 1007, 1008, 1009, or ws_close's code);
 * otherwise 1006 (the transport dropped).
 */
#include "http/ws.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

#define WS_CLOSE_WAIT_MS 2000u
#define WS_DEFAULT_MAX_MESSAGE (16u << 20)
#define WS_DEFAULT_MAX_SEND_QUEUE (8u << 20)
#define WS_MAX_REASON 123 /* close payload is at most 125 bytes: code + reason */
#define WS_MAX_EVENTS 64
#define WS_RX_BUDGET (256u << 10) /* per connection per wake-up, for fairness */
#define NS_PER_MS 1000000ull

/* One message waiting in a connection's outbox. */
typedef struct ws_msg {
  struct ws_msg *next;
  uint8_t opcode; /* WSLAY_TEXT_FRAME or WSLAY_BINARY_FRAME */
  size_t len;     /* bytes in data */
  uint8_t data[];
} ws_msg;

enum ws_conn_state {
  WS_CONN_PENDING, /* adopted, not yet seen by the loop */
  WS_CONN_OPEN,    /* registered with epoll */
  WS_CONN_DEAD,    /* finished; waiting to be reaped at the end of the batch */
};

struct ws_conn {
  atomic_int refs;
  ws_loop *loop;
  int fd;
  void (*release)(void *arg);
  void *release_arg;
  ws_handler h;
  void *ctx;

  /* Shared with other threads, under mu. */
  pthread_mutex_t mu;
  ws_msg *out_head, *out_tail; /* outbox, oldest first */
  size_t out_bytes;            /* payload bytes in the outbox */
  size_t wslay_bytes;          /* bytes wslay still holds (snapshot by the loop) */
  bool dirty;                  /* on the loop's dirty list */
  bool send_closed;            /* no more sends accepted (closing or closed) */
  bool closed;                 /* finished: never touch loop again */
  bool close_req;              /* a close was asked for (ws_close or overflow) */
  bool close_req_urgent;       /* drop pending output and close at once */
  int close_req_code;
  char close_req_reason[WS_MAX_REASON + 1];

  /* Loop thread only. */
  enum ws_conn_state state;
  wslay_event_context_ptr wslay;
  struct ws_conn *next, *prev; /* loop->conns list */
  struct ws_conn *pending_next;
  uint8_t *extra; /* bytes read past the handshake, fed to wslay first */
  size_t extra_len, extra_off;
  size_t rx_budget;        /* socket bytes this read round may still take */
  uint32_t ep_events;      /* what epoll currently waits for */
  uint64_t last_rx_ns;     /* last time bytes arrived (pongs included) */
  uint64_t last_msg_ns;    /* last data message either way or ping from the peer (idle timeout) */
  uint64_t ping_sent_ns;   /* our unanswered ping, 0 when none */
  uint64_t close_deadline; /* force-close time once closing, 0 before */
  bool want_close;         /* a graceful close waits for the outbox to drain */
  int want_close_code;
  char want_close_reason[WS_MAX_REASON + 1];
  bool close_queued; /* we queued a close frame in wslay */
  int our_code;      /* code of the close we queued, 0 if none */
  char our_reason[WS_MAX_REASON + 1];
  bool peer_closed; /* the peer's close frame arrived */
  int peer_code;
  char peer_reason[WS_MAX_REASON + 1];
  bool linger_off; /* finish as soon as our close frame is written (shutdown) */
};

struct ws_loop {
  ws_config cfg;
  int epfd, evfd;
  pthread_t thread;
  atomic_size_t n_open;

  pthread_mutex_t mu; /* guards pending, dirty, stopping */
  ws_conn *pending;   /* adopted, LIFO; reversed when taken */
  struct dirty_ref {
    ws_conn *c;
    struct dirty_ref *next;
  } *dirty; /* connections with outbox work, each holding a reference */
  bool stopping;

  /* Loop thread only. */
  ws_conn *conns; /* open connections */
  ws_conn *dead;  /* finished this batch, reaped after it */
  bool stop_seen;
  uint64_t next_timer_ns; /* earliest idle or close deadline; UINT64_MAX none */
};

/* ---- UTF-8 ---------------------------------------------------------------- */

bool ws_utf8_valid(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t b = s[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    size_t need;
    uint32_t cp, min;
    if (b >= 0xC2 && b <= 0xDF) {
      need = 1, cp = b & 0x1Fu, min = 0x80;
    } else if (b >= 0xE0 && b <= 0xEF) {
      need = 2, cp = b & 0x0Fu, min = 0x800;
    } else if (b >= 0xF0 && b <= 0xF4) {
      need = 3, cp = b & 0x07u, min = 0x10000;
    } else {
      return false; /* continuation byte, overlong lead C0/C1, or F5..FF */
    }
    if (n - i - 1 < need) return false;
    for (size_t k = 1; k <= need; k++) {
      uint8_t cb = s[i + k];
      if ((cb & 0xC0u) != 0x80u) return false;
      cp = (cp << 6) | (cb & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += need + 1;
  }
  return true;
}

/* Copies reason into out (WS_MAX_REASON + 1 bytes), cut at a character
 * boundary so the result stays valid UTF-8; invalid input gives "". */
static void reason_copy(char *out, const char *reason, size_t len) {
  out[0] = '\0';
  if (!reason) return;
  if (len > WS_MAX_REASON) {
    len = WS_MAX_REASON;
    while (len > 0 && ((uint8_t)reason[len] & 0xC0u) == 0x80u) len--;
  }
  if (!ws_utf8_valid((const uint8_t *)reason, len)) return;
  memcpy(out, reason, len);
  out[len] = '\0';
}

/* ---- references and small helpers ---------------------------------------- */

static void msg_list_free(ws_msg *m) {
  while (m) {
    ws_msg *next = m->next;
    free(m);
    m = next;
  }
}

void ws_conn_ref(ws_conn *c) { atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed); }

void ws_conn_unref(ws_conn *c) {
  if (!c) return;
  if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
  /* Last reference: the loop has finished the connection (it held one until
   * then), so nobody else can reach the fields below. */
  if (c->wslay) wslay_event_context_free(c->wslay);
  msg_list_free(c->out_head);
  free(c->extra);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

void *ws_conn_ctx(ws_conn *c) { return c ? c->ctx : NULL; }

size_t ws_loop_n_open(ws_loop *loop) {
  return loop ? atomic_load_explicit(&loop->n_open, memory_order_relaxed) : 0;
}

static void loop_wake(ws_loop *loop) {
  uint64_t one = 1;
  ssize_t r;
  do {
    r = write(loop->evfd, &one, sizeof one);
  } while (r < 0 && errno == EINTR);
  /* EAGAIN means the counter is saturated: the loop is woken anyway. */
}

/* Called with c->mu held. Puts c on the dirty list (once) and wakes the loop. */
static int conn_mark_dirty_locked(ws_conn *c) {
  if (c->dirty) return 0;
  struct dirty_ref *d = malloc(sizeof *d);
  if (!d) return err_set(ERR_NOMEM, "ws: no memory to queue a send");
  ws_conn_ref(c);
  d->c = c;
  ws_loop *loop = c->loop;
  pthread_mutex_lock(&loop->mu);
  d->next = loop->dirty;
  loop->dirty = d;
  pthread_mutex_unlock(&loop->mu);
  c->dirty = true;
  loop_wake(loop);
  return 0;
}

static uint64_t ms_to_ns(unsigned ms) { return (uint64_t)ms * NS_PER_MS; }

static void loop_timer_at(ws_loop *loop, uint64_t t) {
  if (t < loop->next_timer_ns) loop->next_timer_ns = t;
}

/* ---- sending from any thread ---------------------------------------------- */

static int conn_send(ws_conn *c, uint8_t opcode, const void *data, size_t len) {
  if (!c || (!data && len > 0)) return err_set(ERR_INVALID, "ws send: null connection or data");
  size_t total;
  if (!size_add(sizeof(ws_msg), len, &total))
    return err_set(ERR_TOO_LARGE, "ws send: message of %zu bytes is too large", len);
  pthread_mutex_lock(&c->mu);
  if (c->send_closed) {
    pthread_mutex_unlock(&c->mu);
    return err_set(ERR_CANCELLED, "ws send: connection is closing or closed");
  }
  size_t limit = c->loop->cfg.max_send_queue;
  size_t queued = c->out_bytes + c->wslay_bytes;
  if (queued > limit || len > limit - queued) {
    /* Drop policy (see the file comment): refuse, drop the outbox, close 1008. */
    msg_list_free(c->out_head);
    c->out_head = c->out_tail = NULL;
    c->out_bytes = 0;
    c->send_closed = true;
    c->close_req = true;
    c->close_req_urgent = true;
    c->close_req_code = WS_CLOSE_POLICY;
    reason_copy(c->close_req_reason, "send queue full", strlen("send queue full"));
    int r = conn_mark_dirty_locked(c);
    pthread_mutex_unlock(&c->mu);
    (void)r;
    return err_set(ERR_OVERLOADED,
                   "ws send: %zu bytes queued for a slow reader plus %zu exceed max_send_queue %zu; "
                   "closing with 1008",
                   queued, len, limit);
  }
  ws_msg *m = malloc(total);
  if (!m) {
    pthread_mutex_unlock(&c->mu);
    return err_set(ERR_NOMEM, "ws send: no memory for a %zu-byte message", len);
  }
  m->next = NULL;
  m->opcode = opcode;
  m->len = len;
  if (len) memcpy(m->data, data, len);
  int r = conn_mark_dirty_locked(c);
  if (r < 0) {
    pthread_mutex_unlock(&c->mu);
    free(m);
    return r;
  }
  if (c->out_tail)
    c->out_tail->next = m;
  else
    c->out_head = m;
  c->out_tail = m;
  c->out_bytes += len;
  pthread_mutex_unlock(&c->mu);
  return 0;
}

int ws_send_text(ws_conn *c, const char *data, size_t len) {
  if (data && !ws_utf8_valid((const uint8_t *)data, len))
    return err_set(ERR_INVALID, "ws_send_text: text is not valid UTF-8");
  return conn_send(c, WSLAY_TEXT_FRAME, data, len);
}

int ws_send_binary(ws_conn *c, const void *data, size_t len) {
  return conn_send(c, WSLAY_BINARY_FRAME, data, len);
}

static bool close_code_sendable(int code) {
  return (code >= 1000 && code <= 1014 && code != 1004 && code != 1005 && code != 1006) ||
         (code >= 3000 && code <= 4999);
}

int ws_close(ws_conn *c, int code, const char *reason) {
  if (!c) return err_set(ERR_INVALID, "ws_close: null connection");
  if (!close_code_sendable(code))
    return err_set(ERR_INVALID, "ws_close: close code %d may not be sent (RFC 6455 7.4)", code);
  pthread_mutex_lock(&c->mu);
  if (c->send_closed) {
    pthread_mutex_unlock(&c->mu);
    return err_set(ERR_CANCELLED, "ws_close: connection is already closing or closed");
  }
  c->send_closed = true;
  c->close_req = true;
  c->close_req_urgent = false;
  c->close_req_code = code;
  reason_copy(c->close_req_reason, reason, reason ? strlen(reason) : 0);
  int r = conn_mark_dirty_locked(c);
  pthread_mutex_unlock(&c->mu);
  return r;
}

/* ---- wslay callbacks (loop thread, inside wslay_event_recv/send) ---------- */

static ssize_t cb_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
                       void *user) {
  (void)flags;
  ws_conn *c = user;
  if (c->extra_off < c->extra_len) {
    size_t n = c->extra_len - c->extra_off;
    if (n > len) n = len;
    memcpy(buf, c->extra + c->extra_off, n);
    c->extra_off += n;
    if (c->extra_off == c->extra_len) {
      free(c->extra);
      c->extra = NULL;
      c->extra_len = c->extra_off = 0;
    }
    c->last_rx_ns = time_mono_ns();
    return (ssize_t)n;
  }
  if (c->rx_budget == 0) {
    /* Fairness: let other connections run; level-triggered epoll comes back. */
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  if (len > c->rx_budget) len = c->rx_budget;
  ssize_t r;
  do {
    r = recv(c->fd, buf, len, 0);
  } while (r < 0 && errno == EINTR);
  if (r > 0) {
    c->last_rx_ns = time_mono_ns();
    c->rx_budget -= (size_t)r;
    return r;
  }
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
  else
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE); /* EOF or error */
  return -1;
}

static ssize_t cb_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user) {
  ws_conn *c = user;
  int sflags = MSG_NOSIGNAL | ((flags & WSLAY_MSG_MORE) ? MSG_MORE : 0);
  ssize_t r;
  do {
    r = send(c->fd, data, len, sflags);
  } while (r < 0 && errno == EINTR);
  if (r >= 0) return r;
  if (errno == EAGAIN || errno == EWOULDBLOCK)
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
  else
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
  return -1;
}

static bool conn_closing(const ws_conn *c) {
  return c->close_queued || c->peer_closed || c->want_close;
}

/* Queues our close frame in wslay and starts the force-close timer. */
static void conn_queue_close(ws_conn *c, int code, const char *reason) {
  if (c->close_queued || wslay_event_get_close_sent(c->wslay)) return;
  size_t rlen = strlen(reason);
  int r = wslay_event_queue_close(c->wslay, (uint16_t)code, (const uint8_t *)reason, rlen);
  if (r == 0) {
    c->close_queued = true;
    c->our_code = code;
    memcpy(c->our_reason, reason, rlen + 1);
  } else if (r != WSLAY_ERR_NO_MORE_MSG) {
    wslay_event_shutdown_read(c->wslay); /* cannot even queue: give up on the peer */
    wslay_event_shutdown_write(c->wslay);
  }
}

static void cb_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                   void *user) {
  ws_conn *c = user;
  if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
    c->peer_closed = true;
    c->peer_code = arg->status_code ? arg->status_code : 1005;
    if (arg->msg_length > 2)
      reason_copy(c->peer_reason, (const char *)arg->msg + 2, arg->msg_length - 2);
    return;
  }
  /* The peer's own pings count as activity, its pongs (answers to ours) do not. */
  if (arg->opcode == WSLAY_PING) c->last_msg_ns = time_mono_ns();
  if (arg->opcode != WSLAY_TEXT_FRAME && arg->opcode != WSLAY_BINARY_FRAME) return; /* ping/pong */
  c->last_msg_ns = time_mono_ns();
  if (conn_closing(c)) return; /* no messages once a close has started */
  pthread_mutex_lock(&c->mu);
  bool close_asked = c->send_closed; /* ws_close or overflow not yet seen by the loop */
  pthread_mutex_unlock(&c->mu);
  if (close_asked) return;
  if (arg->opcode == WSLAY_TEXT_FRAME && !ws_utf8_valid(arg->msg, arg->msg_length)) {
    conn_queue_close(c, WS_CLOSE_INVALID_DATA, "invalid UTF-8 in text message");
    wslay_event_shutdown_read(ctx);
    return;
  }
  if (c->h.on_message) {
    static const uint8_t empty[1];
    c->h.on_message(c, arg->opcode == WSLAY_TEXT_FRAME ? WS_TEXT : WS_BINARY,
                    arg->msg ? arg->msg : empty, arg->msg_length, c->ctx);
  }
}

/* ---- the loop ------------------------------------------------------------- */

static void sock_drain(int fd) {
  char tmp[4096];
  for (int i = 0; i < 16; i++) {
    ssize_t r = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (r <= 0) break;
  }
}

/* Ends the connection: socket gone, wslay freed, on_close called once. */
static void conn_finish(ws_loop *loop, ws_conn *c) {
  if (c->state == WS_CONN_DEAD) return;
  int code;
  const char *reason;
  if (c->peer_closed) {
    code = c->peer_code;
    reason = c->peer_reason;
  } else if (c->our_code) {
    code = c->our_code;
    reason = c->our_reason;
  } else if (c->wslay && wslay_event_get_close_sent(c->wslay)) {
    code = wslay_event_get_status_code_sent(c->wslay);
    reason = "";
  } else if (c->wslay && wslay_event_get_close_received(c->wslay)) {
    code = wslay_event_get_status_code_received(c->wslay);
    reason = "";
  } else {
    code = 1006;
    reason = "";
  }
  if (c->state == WS_CONN_OPEN) {
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    /* unlink from the open list */
    if (c->prev)
      c->prev->next = c->next;
    else
      loop->conns = c->next;
    if (c->next) c->next->prev = c->prev;
  }
  c->next = loop->dead;
  c->prev = NULL;
  loop->dead = c;
  c->state = WS_CONN_DEAD;

  pthread_mutex_lock(&c->mu);
  c->closed = true;
  c->send_closed = true;
  msg_list_free(c->out_head);
  c->out_head = c->out_tail = NULL;
  c->out_bytes = c->wslay_bytes = 0;
  pthread_mutex_unlock(&c->mu);

  /* Send what we wrote as a FIN, and swallow unread input so that closing a
   * TCP socket does not turn into a reset that could destroy our close frame. */
  shutdown(c->fd, SHUT_WR);
  sock_drain(c->fd);
  if (c->release)
    c->release(c->release_arg);
  else
    close(c->fd);
  c->fd = -1;
  if (c->wslay) {
    wslay_event_context_free(c->wslay);
    c->wslay = NULL;
  }
  if (c->h.on_close) c->h.on_close(c, code, reason, c->ctx);
  atomic_fetch_sub_explicit(&loop->n_open, 1, memory_order_release);
}

/* True when ws_close() asked for a close and everything queued before it has
 * left wslay's queue, so the close frame can go out last. */
static bool conn_graceful_close_due(ws_conn *c) {
  if (!c->want_close || c->close_queued || wslay_event_get_queued_msg_count(c->wslay) != 0)
    return false;
  pthread_mutex_lock(&c->mu);
  bool outbox_empty = c->out_head == NULL;
  pthread_mutex_unlock(&c->mu);
  return outbox_empty;
}

/* After anything happened to c: flush, close, finish or re-arm epoll. */
static void conn_service(ws_loop *loop, ws_conn *c) {
  if (c->state != WS_CONN_OPEN) return;
  uint64_t now = time_mono_ns();
  /* Send; a graceful close is queued once everything before it has been
   * written, which may happen in this very pass (hence two rounds). */
  for (int round = 0; round < 2; round++) {
    if (conn_graceful_close_due(c)) conn_queue_close(c, c->want_close_code, c->want_close_reason);
    if (wslay_event_want_write(c->wslay) && wslay_event_send(c->wslay) < 0) {
      conn_finish(loop, c);
      return;
    }
  }
  bool closing = conn_closing(c) || wslay_event_get_close_sent(c->wslay) ||
                 !wslay_event_get_read_enabled(c->wslay);
  pthread_mutex_lock(&c->mu);
  c->wslay_bytes = wslay_event_get_queued_msg_length(c->wslay);
  if (closing) c->send_closed = true;
  pthread_mutex_unlock(&c->mu);
  if (closing && c->close_deadline == 0) {
    c->close_deadline = now + ms_to_ns(WS_CLOSE_WAIT_MS);
    loop_timer_at(loop, c->close_deadline);
  }

  int want_r = wslay_event_want_read(c->wslay);
  int want_w = wslay_event_want_write(c->wslay);
  if ((!want_r && !want_w) || (c->linger_off && wslay_event_get_close_sent(c->wslay))) {
    conn_finish(loop, c);
    return;
  }
  uint32_t ev = (want_r ? EPOLLIN : 0) | (want_w ? EPOLLOUT : 0);
  if (ev != c->ep_events) {
    struct epoll_event e = {.events = ev, .data.ptr = c};
    if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, c->fd, &e) < 0) {
      LOG_WARN("ws", "epoll_ctl MOD on fd %d failed: %s", c->fd, strerror(errno));
      conn_finish(loop, c);
      return;
    }
    c->ep_events = ev;
  }
}

static void conn_read(ws_loop *loop, ws_conn *c) {
  if (!wslay_event_want_read(c->wslay)) return;
  c->rx_budget = WS_RX_BUDGET;
  if (wslay_event_recv(c->wslay) < 0) {
    conn_finish(loop, c);
    return;
  }
}

static void conn_on_io(ws_loop *loop, ws_conn *c, uint32_t events) {
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) conn_read(loop, c);
  if (c->state != WS_CONN_OPEN) return;
  if ((events & (EPOLLHUP | EPOLLERR)) && !wslay_event_want_read(c->wslay)) {
    /* Peer gone while we only had writing left: try once, then finish. */
    if (wslay_event_want_write(c->wslay)) (void)wslay_event_send(c->wslay);
    conn_finish(loop, c);
    return;
  }
  conn_service(loop, c);
}

/* Starts closing c for a reason of the loop's own (idle, shutdown). */
static void conn_close_now(ws_loop *loop, ws_conn *c, int code, const char *reason) {
  pthread_mutex_lock(&c->mu);
  c->send_closed = true;
  msg_list_free(c->out_head);
  c->out_head = c->out_tail = NULL;
  c->out_bytes = 0;
  pthread_mutex_unlock(&c->mu);
  conn_queue_close(c, code, reason);
  conn_service(loop, c);
}

static void loop_register(ws_loop *loop, ws_conn *c, uint64_t now) {
  c->next = loop->conns;
  c->prev = NULL;
  if (loop->conns) loop->conns->prev = c;
  loop->conns = c;
  c->state = WS_CONN_OPEN;
  c->last_rx_ns = c->last_msg_ns = now;
  c->ep_events = EPOLLIN;
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
  if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, c->fd, &e) < 0) {
    LOG_WARN("ws", "epoll_ctl ADD on fd %d failed: %s", c->fd, strerror(errno));
    conn_finish(loop, c);
    return;
  }
  if (loop->cfg.idle_timeout_ms) loop_timer_at(loop, now + ms_to_ns(loop->cfg.idle_timeout_ms));
  if (loop->cfg.ping_interval_ms) loop_timer_at(loop, now + ms_to_ns(loop->cfg.ping_interval_ms));
  if (c->h.on_open) c->h.on_open(c, c->ctx);
  /* Bytes that came with the handshake never wake epoll: read them now. */
  if (c->extra_len > 0) conn_read(loop, c);
  conn_service(loop, c);
}

static void loop_take_pending(ws_loop *loop) {
  pthread_mutex_lock(&loop->mu);
  ws_conn *list = loop->pending;
  loop->pending = NULL;
  if (loop->stopping) loop->stop_seen = true;
  pthread_mutex_unlock(&loop->mu);
  ws_conn *rev = NULL; /* restore adoption order */
  while (list) {
    ws_conn *n = list->pending_next;
    list->pending_next = rev;
    rev = list;
    list = n;
  }
  uint64_t now = time_mono_ns();
  while (rev) {
    ws_conn *n = rev->pending_next;
    rev->pending_next = NULL;
    loop_register(loop, rev, now);
    rev = n;
  }
}

/* Moves every dirty connection's outbox into wslay and applies close requests. */
static void loop_take_dirty(ws_loop *loop) {
  pthread_mutex_lock(&loop->mu);
  struct dirty_ref *d = loop->dirty;
  loop->dirty = NULL;
  pthread_mutex_unlock(&loop->mu);
  while (d) {
    struct dirty_ref *next = d->next;
    ws_conn *c = d->c;
    free(d);
    pthread_mutex_lock(&c->mu);
    c->dirty = false;
    ws_msg *msgs = c->out_head;
    c->out_head = c->out_tail = NULL;
    c->out_bytes = 0;
    bool req = c->close_req, urgent = c->close_req_urgent;
    int code = c->close_req_code;
    char reason[WS_MAX_REASON + 1];
    memcpy(reason, c->close_req_reason, sizeof reason);
    c->close_req = false;
    pthread_mutex_unlock(&c->mu);
    if (c->state == WS_CONN_OPEN) {
      if (msgs) c->last_msg_ns = time_mono_ns();
      for (ws_msg *m = msgs; m; m = m->next) {
        struct wslay_event_msg wm = {.opcode = m->opcode, .msg = m->data, .msg_length = m->len};
        int r = wslay_event_queue_msg(c->wslay, &wm);
        if (r != 0 && r != WSLAY_ERR_NO_MORE_MSG) {
          LOG_WARN("ws", "cannot queue a %zu-byte message: wslay error %d", m->len, r);
          conn_close_now(loop, c, WS_CLOSE_INTERNAL, "cannot queue message");
          break;
        }
      }
      if (c->state == WS_CONN_OPEN && req) {
        if (urgent) {
          conn_close_now(loop, c, code, reason);
        } else if (!conn_closing(c)) {
          c->want_close = true;
          c->want_close_code = code;
          memcpy(c->want_close_reason, reason, sizeof reason);
        }
      }
      conn_service(loop, c);
    }
    msg_list_free(msgs);
    ws_conn_unref(c);
    d = next;
  }
}

/* Liveness of one open connection: a peer silent for a ping interval is
 * pinged, and closed when nothing (the pong) came back one interval later;
 * a connection without data messages either way for idle_timeout_ms is
 * closed 1001. Returns the next time c needs looking at. */
static uint64_t conn_liveness(ws_loop *loop, ws_conn *c, uint64_t now) {
  uint64_t idle = ms_to_ns(loop->cfg.idle_timeout_ms), ping = ms_to_ns(loop->cfg.ping_interval_ms);
  uint64_t next = UINT64_MAX;
  if (idle) {
    if (now >= c->last_msg_ns + idle) {
      conn_close_now(loop, c, WS_CLOSE_GOING_AWAY, "idle timeout");
      return c->close_deadline ? c->close_deadline : UINT64_MAX;
    }
    next = c->last_msg_ns + idle;
  }
  if (ping) {
    if (c->ping_sent_ns && c->last_rx_ns > c->ping_sent_ns) c->ping_sent_ns = 0; /* answered */
    if (c->ping_sent_ns && now >= c->ping_sent_ns + ping) {
      conn_close_now(loop, c, WS_CLOSE_GOING_AWAY, "ping timeout");
      return c->close_deadline ? c->close_deadline : UINT64_MAX;
    }
    if (!c->ping_sent_ns && now >= c->last_rx_ns + ping) {
      struct wslay_event_msg pm = {.opcode = WSLAY_PING, .msg = NULL, .msg_length = 0};
      if (wslay_event_queue_msg(c->wslay, &pm) == 0) {
        c->ping_sent_ns = now;
        conn_service(loop, c);
      }
    }
    uint64_t t = c->ping_sent_ns ? c->ping_sent_ns + ping : c->last_rx_ns + ping;
    if (t < next) next = t;
  }
  return next;
}

static void loop_timers(ws_loop *loop, uint64_t now) {
  if (now < loop->next_timer_ns) return;
  loop->next_timer_ns = UINT64_MAX;
  ws_conn *c = loop->conns;
  while (c) {
    ws_conn *next = c->next; /* c may finish below */
    if (c->close_deadline) {
      if (now >= c->close_deadline)
        conn_finish(loop, c);
      else
        loop_timer_at(loop, c->close_deadline);
    } else {
      uint64_t t = conn_liveness(loop, c, now);
      if (c->state == WS_CONN_OPEN && t != UINT64_MAX) loop_timer_at(loop, t);
    }
    c = next;
  }
}

static void loop_reap(ws_loop *loop) {
  while (loop->dead) {
    ws_conn *c = loop->dead;
    loop->dead = c->next;
    c->next = NULL;
    ws_conn_unref(c);
  }
}

static void *loop_main(void *arg) {
  ws_loop *loop = arg;
  struct epoll_event evs[WS_MAX_EVENTS];
  bool stop_started = false;
  for (;;) {
    int timeout = -1;
    if (loop->next_timer_ns != UINT64_MAX) {
      uint64_t now = time_mono_ns();
      uint64_t ms = loop->next_timer_ns > now ? (loop->next_timer_ns - now + NS_PER_MS - 1) / NS_PER_MS : 0;
      timeout = ms > 60000 ? 60000 : (int)ms;
    }
    int n = epoll_wait(loop->epfd, evs, WS_MAX_EVENTS, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      LOG_ERROR("ws", "epoll_wait failed: %s", strerror(errno));
      n = 0;
    }
    for (int i = 0; i < n; i++) {
      if (evs[i].data.ptr == NULL) {
        uint64_t v;
        ssize_t r = read(loop->evfd, &v, sizeof v);
        (void)r;
        continue;
      }
      ws_conn *c = evs[i].data.ptr;
      if (c->state == WS_CONN_OPEN) conn_on_io(loop, c, evs[i].events);
    }
    loop_take_pending(loop);
    loop_take_dirty(loop);
    if (loop->stop_seen && !stop_started) {
      stop_started = true;
      for (ws_conn *c = loop->conns, *next; c; c = next) {
        next = c->next;
        c->linger_off = true;
        conn_close_now(loop, c, WS_CLOSE_GOING_AWAY, "server shutting down");
      }
    }
    loop_timers(loop, time_mono_ns());
    loop_reap(loop);
    if (stop_started && loop->conns == NULL) break;
  }
  /* Drop dirty references queued after the last connection finished. */
  pthread_mutex_lock(&loop->mu);
  struct dirty_ref *d = loop->dirty;
  loop->dirty = NULL;
  pthread_mutex_unlock(&loop->mu);
  while (d) {
    struct dirty_ref *next = d->next;
    pthread_mutex_lock(&d->c->mu);
    d->c->dirty = false;
    pthread_mutex_unlock(&d->c->mu);
    ws_conn_unref(d->c);
    free(d);
    d = next;
  }
  return NULL;
}

/* ---- public: loop and adoption -------------------------------------------- */

int ws_loop_new(const ws_config *cfg, ws_loop **out) {
  if (!out) return err_set(ERR_INVALID, "ws_loop_new: null out");
  *out = NULL;
  ws_loop *loop = calloc(1, sizeof *loop);
  if (!loop) return err_set(ERR_NOMEM, "ws_loop_new: no memory");
  if (cfg) loop->cfg = *cfg;
  if (!loop->cfg.max_message) loop->cfg.max_message = WS_DEFAULT_MAX_MESSAGE;
  if (!loop->cfg.max_send_queue) loop->cfg.max_send_queue = WS_DEFAULT_MAX_SEND_QUEUE;
  loop->next_timer_ns = UINT64_MAX;
  loop->epfd = epoll_create1(EPOLL_CLOEXEC);
  loop->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (loop->epfd < 0 || loop->evfd < 0) {
    int e = errno;
    if (loop->epfd >= 0) close(loop->epfd);
    if (loop->evfd >= 0) close(loop->evfd);
    free(loop);
    return err_set(ERR_IO, "ws_loop_new: epoll/eventfd: %s", strerror(e));
  }
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL};
  if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->evfd, &e) < 0) {
    int en = errno;
    close(loop->epfd);
    close(loop->evfd);
    free(loop);
    return err_set(ERR_IO, "ws_loop_new: epoll_ctl eventfd: %s", strerror(en));
  }
  pthread_mutex_init(&loop->mu, NULL);
  int r = pthread_create(&loop->thread, NULL, loop_main, loop);
  if (r != 0) {
    pthread_mutex_destroy(&loop->mu);
    close(loop->epfd);
    close(loop->evfd);
    free(loop);
    return err_set(ERR_INTERNAL, "ws_loop_new: pthread_create: %s", strerror(r));
  }
  *out = loop;
  return 0;
}

void ws_loop_free(ws_loop *loop) {
  if (!loop) return;
  pthread_mutex_lock(&loop->mu);
  loop->stopping = true;
  pthread_mutex_unlock(&loop->mu);
  loop_wake(loop);
  pthread_join(loop->thread, NULL);
  close(loop->epfd);
  close(loop->evfd);
  pthread_mutex_destroy(&loop->mu);
  free(loop);
}

int ws_loop_adopt(ws_loop *loop, int fd, const void *extra, size_t extra_len, const ws_handler *h,
                  void *ctx, void (*release)(void *arg), void *release_arg) {
  if (!loop || fd < 0 || !h || (!extra && extra_len > 0))
    return err_set(ERR_INVALID, "ws_loop_adopt: null loop/handler/extra or bad fd %d", fd);
  ws_conn *c = calloc(1, sizeof *c);
  if (!c) return err_set(ERR_NOMEM, "ws_loop_adopt: no memory");
  if (extra_len > 0) {
    c->extra = malloc(extra_len);
    if (!c->extra) {
      free(c);
      return err_set(ERR_NOMEM, "ws_loop_adopt: no memory for %zu extra bytes", extra_len);
    }
    memcpy(c->extra, extra, extra_len);
    c->extra_len = extra_len;
  }
  atomic_init(&c->refs, 1);
  c->loop = loop;
  c->fd = fd;
  c->release = release;
  c->release_arg = release_arg;
  c->h = *h;
  c->ctx = ctx;
  c->state = WS_CONN_PENDING;
  struct wslay_event_callbacks cbs = {
      .recv_callback = cb_recv,
      .send_callback = cb_send,
      .on_msg_recv_callback = cb_msg,
  };
  if (wslay_event_context_server_init(&c->wslay, &cbs, c) != 0) {
    free(c->extra);
    free(c);
    return err_set(ERR_NOMEM, "ws_loop_adopt: wslay context");
  }
  wslay_event_config_set_max_recv_msg_length(c->wslay, loop->cfg.max_message);
  pthread_mutex_init(&c->mu, NULL);
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    int e = errno;
    ws_conn_unref(c);
    return err_set(ERR_IO, "ws_loop_adopt: fd %d: %s", fd, strerror(e));
  }
  pthread_mutex_lock(&loop->mu);
  if (loop->stopping) {
    pthread_mutex_unlock(&loop->mu);
    fcntl(fd, F_SETFL, fl);
    ws_conn_unref(c);
    return err_set(ERR_CANCELLED, "ws_loop_adopt: the loop is stopping");
  }
  c->pending_next = loop->pending;
  loop->pending = c;
  atomic_fetch_add_explicit(&loop->n_open, 1, memory_order_relaxed);
  pthread_mutex_unlock(&loop->mu);
  loop_wake(loop);
  return 0;
}
