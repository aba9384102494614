/*
 * stream.c - SSE, NDJSON and raw chunked streams written by producer threads.
 *
 * A stream is a byte queue between one producer (an engine or worker
 * thread) and libmicrohttpd's content-reader callback (a pool thread):
 *   - http_stream_write appends under s->mu and, if the connection is
 *     suspended, resumes it. It blocks while more than 4 MiB is queued.
 *   - stream_read (the MHD reader) hands out queued bytes; when the queue is
 *     empty it suspends the connection and returns 0, so no pool thread
 *     waits for a producer.
 *   - The hub's monitor thread polls the sockets of suspended connections
 *     for POLLRDHUP/POLLHUP/POLLERR: a client that goes away while the
 *     producer is silent is noticed at once, the stream is cancelled (cancel
 *     callback fires once, writes return ERR_CANCELLED) and the connection
 *     resumed so MHD can close it. It also injects the SSE keep-alive
 *     comment into idle suspended SSE streams.
 *
 * Lifetime: three references, the producer's (dropped by http_stream_close),
 * MHD's (dropped in the response's free callback, when MHD is done with the
 * connection) and the request's (dropped in http_stream_detach_, from the
 * request-completed callback, which MHD may call before or after freeing
 * the response). The stream is on the hub's list exactly while MHD holds
 * its reference; the monitor touches only listed streams, under hub->mu.
 * Lock order: hub->mu before s->mu. Callbacks run with no lock held.
 * A connection is resumed only while s->suspended is true (MHD never closes
 * a suspended connection), so s->conn is valid whenever it is resumed.
 */
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "http/http_int.h"

#define STREAM_MAX_QUEUED ((size_t)4 << 20)
#define STREAM_BLOCK_SIZE (32 * 1024)
#define MONITOR_MAX_WAIT_MS 1000

struct http_stream {
  pthread_mutex_t mu;
  pthread_cond_t space; /* signalled when the queue drains or the stream ends */
  int refs;
  stream_hub *hub;
  struct MHD_Connection *conn; /* NULL once MHD is done */
  int fd;
  enum http_stream_kind kind;
  buf q;
  size_t q_off;
  bool closed;     /* the producer is done */
  bool cancelled;  /* client gone or server stopping */
  bool suspended;
  bool mhd_done;
  bool cancel_fired;
  bool cancel_running; /* the callback is being called; close waits */
  void (*cancel_fn)(void *arg);
  void *cancel_arg;
  uint64_t last_activity_ns;
  uint64_t bytes_sent;
  unsigned epoch; /* bumped on every suspend */
  http_stream *prev, *next;
};

struct stream_hub {
  pthread_mutex_t mu;
  http_stream *head;
  size_t n_open;
  int efd;
  bool stop;
  pthread_t thread;
  bool thread_started;
  unsigned keepalive_ms;
  pthread_mutex_t tick_mu; /* held while tick runs */
  void (*tick)(void *arg);
  void *tick_arg;
};

/* ---- references and cancellation --------------------------------------- */

static void stream_unref(http_stream *s) {
  pthread_mutex_lock(&s->mu);
  bool last = --s->refs == 0;
  pthread_mutex_unlock(&s->mu);
  if (!last) return;
  buf_free(&s->q);
  pthread_cond_destroy(&s->space);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* With s->mu held: marks the stream cancelled and resumes a suspended
 * connection. Returns true when the caller must fire the callback (after
 * unlocking, holding a reference). */
static bool cancel_locked(http_stream *s) {
  s->cancelled = true; /* a closed stream with bytes still queued drops them */
  if (s->suspended && s->conn) {
    s->suspended = false;
    MHD_resume_connection(s->conn);
  }
  pthread_cond_broadcast(&s->space);
  /* cancel_fn is cleared by http_stream_close: a finished producer is never called. */
  if (s->cancel_fired || !s->cancel_fn) return false;
  s->cancel_fired = true;
  s->cancel_running = true;
  return true;
}

/* Calls the cancel callback (never under s->mu). The function and its
 * argument are read under the lock, and http_stream_close waits while
 * cancel_running: a producer that closes its stream may free the
 * callback's argument right after close returns. */
static void fire(http_stream *s) {
  pthread_mutex_lock(&s->mu);
  void (*fn)(void *) = s->cancel_fn;
  void *arg = s->cancel_arg;
  pthread_mutex_unlock(&s->mu);
  if (fn) fn(arg);
  pthread_mutex_lock(&s->mu);
  s->cancel_running = false;
  pthread_cond_broadcast(&s->space);
  pthread_mutex_unlock(&s->mu);
}

static void hub_wake(stream_hub *h) {
  uint64_t one = 1;
  ssize_t r = write(h->efd, &one, sizeof one);
  (void)r;
}

/* ---- the MHD side -------------------------------------------------------- */

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
  (void)pos;
  http_stream *s = cls;
  pthread_mutex_lock(&s->mu);
  if (s->cancelled) {
    pthread_mutex_unlock(&s->mu);
    return MHD_CONTENT_READER_END_WITH_ERROR;
  }
  size_t avail = s->q.len - s->q_off;
  if (avail) {
    size_t n = avail < max ? avail : max;
    memcpy(out, s->q.data + s->q_off, n);
    s->q_off += n;
    if (s->q_off == s->q.len) {
      buf_reset(&s->q);
      s->q_off = 0;
    } else if (s->q_off > (1u << 20)) {
      memmove(s->q.data, s->q.data + s->q_off, s->q.len - s->q_off);
      s->q.len -= s->q_off;
      s->q.data[s->q.len] = '\0';
      s->q_off = 0;
    }
    s->bytes_sent += n;
    pthread_cond_broadcast(&s->space);
    pthread_mutex_unlock(&s->mu);
    return (ssize_t)n;
  }
  if (s->closed) {
    pthread_mutex_unlock(&s->mu);
    return MHD_CONTENT_READER_END_OF_STREAM;
  }
  s->suspended = true;
  s->epoch++;
  MHD_suspend_connection(s->conn);
  pthread_mutex_unlock(&s->mu);
  hub_wake(s->hub);
  return 0;
}

/* MHD destroyed the response: the connection is done with the stream. */
static void stream_response_freed(void *cls) {
  http_stream *s = cls;
  stream_hub *h = s->hub;
  pthread_mutex_lock(&h->mu);
  if (s->prev) s->prev->next = s->next;
  else if (h->head == s) h->head = s->next;
  if (s->next) s->next->prev = s->prev;
  s->prev = s->next = NULL;
  h->n_open--;
  pthread_mutex_lock(&s->mu);
  s->suspended = false;
  bool do_fire = false;
  if (!s->closed || s->q.len > s->q_off) do_fire = cancel_locked(s);
  s->conn = NULL;
  s->mhd_done = true;
  pthread_cond_broadcast(&s->space);
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_unlock(&h->mu);
  if (do_fire) fire(s);
  stream_unref(s);
}

uint64_t http_stream_bytes_sent_(http_stream *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t n = s->bytes_sent;
  pthread_mutex_unlock(&s->mu);
  return n;
}

void http_stream_detach_(http_stream *s, bool completed_ok) {
  /* The response free callback does most of the work; this records an abort
   * that happened while MHD still holds the response, then drops the
   * request's reference. */
  bool do_fire = false;
  if (!completed_ok) {
    pthread_mutex_lock(&s->mu);
    if (!s->mhd_done && !s->closed) do_fire = cancel_locked(s);
    pthread_mutex_unlock(&s->mu);
  }
  if (do_fire) fire(s);
  stream_unref(s);
}

/* ---- producer API -------------------------------------------------------- */

http_stream *http_stream_open(http_req *req, int status, const char *content_type, enum http_stream_kind kind) {
  if (!content_type)
    content_type = kind == HTTP_STREAM_SSE      ? "text/event-stream; charset=utf-8"
                   : kind == HTTP_STREAM_NDJSON ? "application/x-ndjson"
                                                : "application/octet-stream";
  if (strpbrk(content_type, "\r\n")) {
    err_set(ERR_INVALID, "stream content type contains CR or LF");
    return NULL;
  }
  struct MHD_Connection *conn = http_req_conn_(req);
  stream_hub *h = http_req_hub_(req);
  http_stream *s = calloc(1, sizeof *s);
  if (!s) {
    err_set(ERR_NOMEM, "http stream");
    return NULL;
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->space, NULL);
  s->refs = 3; /* producer + MHD response + request */
  s->hub = h;
  s->conn = conn;
  s->kind = kind;
  s->fd = -1;
  s->last_activity_ns = time_mono_ns();
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (ci) s->fd = ci->connect_fd;
  pthread_mutex_lock(&h->mu);
  s->next = h->head;
  if (h->head) h->head->prev = s;
  h->head = s;
  h->n_open++;
  pthread_mutex_unlock(&h->mu);
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK_SIZE, stream_read, s,
                                                             stream_response_freed);
  if (!r) {
    stream_response_freed(s); /* drops MHD's reference */
    stream_unref(s);          /* the request's */
    stream_unref(s);          /* the producer's */
    err_set(ERR_NOMEM, "stream response");
    return NULL;
  }
  MHD_add_response_header(r, "Content-Type", content_type);
  MHD_add_response_header(r, "Cache-Control", "no-cache");
  MHD_add_response_header(r, "X-Accel-Buffering", "no");
  http_req_set_stream_(req, s);
  if (http_req_queue_(req, status, r) != 0) { /* destroys r: stream_response_freed ran */
    http_req_set_stream_(req, NULL);
    stream_unref(s);
    stream_unref(s);
    return NULL;
  }
  return s;
}

int http_stream_write(http_stream *s, const void *data, size_t len) {
  pthread_mutex_lock(&s->mu);
  while (!s->cancelled && !s->mhd_done && s->q.len - s->q_off > STREAM_MAX_QUEUED) pthread_cond_wait(&s->space, &s->mu);
  if (s->cancelled || s->mhd_done || s->closed) {
    bool closed = s->closed && !s->cancelled;
    pthread_mutex_unlock(&s->mu);
    return closed ? err_set(ERR_INVALID, "write on a closed stream")
                  : err_set(ERR_CANCELLED, "stream cancelled (client gone or server stopping)");
  }
  int rc = buf_append(&s->q, data, len);
  if (rc == 0) {
    s->last_activity_ns = time_mono_ns();
    if (s->suspended) {
      s->suspended = false;
      MHD_resume_connection(s->conn);
    }
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int http_stream_sse(http_stream *s, const char *event, const char *data, size_t len) {
  buf b = BUF_INIT;
  int rc = 0;
  if (event) {
    if (strpbrk(event, "\r\n")) return err_set(ERR_INVALID, "SSE event name contains CR or LF");
    rc = buf_appendf(&b, "event: %s\n", event);
  }
  /* Each line of data becomes one "data:" line (CRLF, CR and LF split). */
  size_t i = 0;
  while (!rc) {
    size_t j = i;
    while (j < len && data[j] != '\n' && data[j] != '\r') j++;
    rc = buf_append_str(&b, "data: ");
    if (!rc) rc = buf_append(&b, data + i, j - i);
    if (!rc) rc = buf_append_byte(&b, '\n');
    if (j >= len) break;
    if (data[j] == '\r' && j + 1 < len && data[j + 1] == '\n') j++;
    i = j + 1;
  }
  if (!rc) rc = buf_append_byte(&b, '\n');
  if (!rc) rc = http_stream_write(s, b.data, b.len);
  buf_free(&b);
  return rc;
}

int http_stream_ndjson(http_stream *s, const char *data, size_t len) {
  buf b = BUF_INIT;
  int rc = buf_reserve(&b, len + 1);
  if (!rc) rc = buf_append(&b, data, len);
  if (!rc) rc = buf_append_byte(&b, '\n');
  if (!rc) rc = http_stream_write(s, b.data, b.len);
  buf_free(&b);
  return rc;
}

bool http_stream_cancelled(const http_stream *s) {
  http_stream *m = (http_stream *)s;
  pthread_mutex_lock(&m->mu);
  bool c = m->cancelled || m->mhd_done;
  pthread_mutex_unlock(&m->mu);
  return c;
}

void http_stream_on_cancel(http_stream *s, void (*fn)(void *arg), void *arg) {
  pthread_mutex_lock(&s->mu);
  s->cancel_fn = fn;
  s->cancel_arg = arg;
  bool now = (s->cancelled || (s->mhd_done && !s->closed)) && !s->cancel_fired && fn;
  if (now) s->cancel_fired = s->cancel_running = true;
  pthread_mutex_unlock(&s->mu);
  if (now) fire(s);
}

void http_stream_close(http_stream *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->closed = true;
  s->cancel_fn = NULL; /* the producer is gone: never call it back */
  while (s->cancel_running) pthread_cond_wait(&s->space, &s->mu); /* ... nor let a call outlive close */
  if (s->suspended && s->conn) {
    s->suspended = false;
    MHD_resume_connection(s->conn);
  }
  pthread_mutex_unlock(&s->mu);
  stream_unref(s);
}

/* ---- hub and monitor ----------------------------------------------------- */

typedef struct watch {
  http_stream *s;
  unsigned epoch;
} watch;

static void *monitor_main(void *arg) {
  stream_hub *h = arg;
  struct pollfd *pfd = NULL;
  watch *w = NULL;
  size_t cap = 0;
  for (;;) {
    pthread_mutex_lock(&h->mu);
    if (h->stop) {
      pthread_mutex_unlock(&h->mu);
      break;
    }
    size_t need = h->n_open + 1;
    if (need > cap) {
      struct pollfd *np = realloc(pfd, need * sizeof *np);
      if (np) pfd = np;
      watch *nw = realloc(w, need * sizeof *nw);
      if (nw) w = nw;
      if (np && nw) cap = need;
    }
    size_t n = 1;
    pfd[0] = (struct pollfd){.fd = h->efd, .events = POLLIN};
    uint64_t ka_ns = (uint64_t)h->keepalive_ms * 1000000u;
    int timeout = MONITOR_MAX_WAIT_MS;
    http_stream *fire_list[64];
    size_t n_fire = 0;
    for (http_stream *s = h->head; s && n < cap; s = s->next) {
      pthread_mutex_lock(&s->mu);
      if (s->suspended && s->fd >= 0 && !s->cancelled) {
        /* A closed stream gets no comment after its last event; the clock
         * is read under the stream's lock, after the producer's last write. */
        if (s->kind == HTTP_STREAM_SSE && ka_ns && !s->closed) {
          uint64_t now = time_mono_ns();
          uint64_t idle = http_elapsed_ns(now, s->last_activity_ns);
          if (idle >= ka_ns) {
            buf_append_str(&s->q, ": keep-alive\n\n");
            s->last_activity_ns = now;
            s->suspended = false;
            MHD_resume_connection(s->conn);
            pthread_mutex_unlock(&s->mu);
            continue;
          }
          int left = (int)((ka_ns - idle) / 1000000u) + 1;
          if (left < timeout) timeout = left;
        }
        pfd[n] = (struct pollfd){.fd = s->fd, .events = POLLRDHUP};
        w[n] = (watch){s, s->epoch};
        n++;
      }
      pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&h->mu);
    pthread_mutex_lock(&h->tick_mu);
    if (h->tick) h->tick(h->tick_arg);
    pthread_mutex_unlock(&h->tick_mu);
    int pr = poll(pfd, n, timeout);
    if (pr <= 0) continue;
    if (pfd[0].revents & POLLIN) {
      uint64_t v;
      ssize_t r = read(h->efd, &v, sizeof v);
      (void)r;
    }
    pthread_mutex_lock(&h->mu);
    for (size_t i = 1; i < n; i++) {
      if (!(pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) continue;
      /* Still listed, still in the same suspension: the fd was valid. */
      http_stream *s = NULL;
      for (http_stream *it = h->head; it; it = it->next)
        if (it == w[i].s) s = it;
      if (!s) continue;
      pthread_mutex_lock(&s->mu);
      if (s->suspended && s->epoch == w[i].epoch && n_fire < ARRAY_LEN(fire_list)) {
        if (cancel_locked(s)) {
          s->refs++;
          fire_list[n_fire++] = s;
        }
      }
      pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&h->mu);
    for (size_t i = 0; i < n_fire; i++) {
      fire(fire_list[i]);
      stream_unref(fire_list[i]);
    }
  }
  free(pfd);
  free(w);
  return NULL;
}

int stream_hub_new(unsigned sse_keepalive_ms, stream_hub **out) {
  stream_hub *h = calloc(1, sizeof *h);
  if (!h) return err_set(ERR_NOMEM, "stream hub");
  pthread_mutex_init(&h->mu, NULL);
  pthread_mutex_init(&h->tick_mu, NULL);
  h->keepalive_ms = sse_keepalive_ms;
  h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (h->efd < 0) {
    int e = errno;
    pthread_mutex_destroy(&h->mu);
    free(h);
    return err_set(ERR_IO, "eventfd for the stream monitor: %s", strerror(e));
  }
  if (pthread_create(&h->thread, NULL, monitor_main, h) != 0) {
    close(h->efd);
    pthread_mutex_destroy(&h->mu);
    free(h);
    return err_set(ERR_IO, "cannot start the stream monitor thread");
  }
  h->thread_started = true;
  *out = h;
  return 0;
}

void stream_hub_cancel_all(stream_hub *h) {
  for (;;) {
    http_stream *to_fire = NULL;
    pthread_mutex_lock(&h->mu);
    for (http_stream *s = h->head; s; s = s->next) {
      pthread_mutex_lock(&s->mu);
      bool f = cancel_locked(s);
      if (f) s->refs++;
      pthread_mutex_unlock(&s->mu);
      if (f) {
        to_fire = s;
        break;
      }
    }
    pthread_mutex_unlock(&h->mu);
    if (!to_fire) break;
    fire(to_fire);
    stream_unref(to_fire);
  }
}

void stream_hub_set_tick(stream_hub *h, void (*fn)(void *arg), void *arg) {
  pthread_mutex_lock(&h->tick_mu);
  h->tick = fn;
  h->tick_arg = arg;
  pthread_mutex_unlock(&h->tick_mu);
}

size_t stream_hub_n_open(stream_hub *h) {
  pthread_mutex_lock(&h->mu);
  size_t n = h->n_open;
  pthread_mutex_unlock(&h->mu);
  return n;
}

void stream_hub_free(stream_hub *h) {
  if (!h) return;
  pthread_mutex_lock(&h->mu);
  h->stop = true;
  pthread_mutex_unlock(&h->mu);
  hub_wake(h);
  if (h->thread_started) pthread_join(h->thread, NULL);
  close(h->efd);
  pthread_mutex_destroy(&h->tick_mu);
  pthread_mutex_destroy(&h->mu);
  free(h);
}
