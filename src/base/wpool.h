/*
 * wpool.h - a bounded pool of worker processes for code that cannot be
 * trusted not to crash or hang (third-party speech engines, FFmpeg decoding
 * of client media), and the framed protocol the server and a worker speak.
 *
 * A worker is this program itself, exec'd in a hidden mode (fork without
 * exec from a multi-threaded server is unsafe), talking over one
 * socketpair end that the child sees as fd 3 (WPOOL_FD). Each message is a
 * frame: u32 payload length, u32 kind (little-endian), then the payload.
 * A call is one request frame, any number of intermediate frames from the
 * worker (chunks of a result), then one WPOOL_KIND_DONE frame carrying the
 * handler's return code, its error detail and its output. The caller may
 * send WPOOL_KIND_CANCEL while it reads chunks; the worker's handler sees it
 * through wpool_conn_cancelled().
 *
 * Failure handling is the point of the module: a worker that dies (EOF on
 * its socket) makes the call fail with ERR_WORKER naming the signal or exit
 * status; a call past its deadline gets the worker killed (SIGKILL) and
 * fails with ERR_TIMEOUT. Either way the worker is reaped, its slot freed,
 * and the next acquire starts a fresh one: the pool restarts what dies.
 * A worker keeps whatever it loaded between calls (engines are slow to
 * start), so callers reuse idle workers before starting new ones.
 *
 * Threads: the pool may be used from any thread; a wpool_worker belongs to
 * the one thread that acquired it until wpool_release().
 * Ownership: the pool owns its workers; wpool_free() kills the idle ones and
 * must run after every acquired worker has been released.
 */
#ifndef PARLEY_BASE_WPOOL_H
#define PARLEY_BASE_WPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"

/* The file descriptor a worker reads requests from and writes replies to. */
#define WPOOL_FD 3
/* Largest frame either side accepts (a decoded 4-hour recording is ~460 MB). */
#define WPOOL_FRAME_MAX ((size_t)1 << 30)

/* Frame kinds the protocol reserves; a worker's own request and chunk kinds
 * start at WPOOL_KIND_USER. */
enum wpool_kind {
  WPOOL_KIND_DONE = 1,   /* worker -> caller: i32 rc, str detail, then the output bytes */
  WPOOL_KIND_CANCEL = 2, /* caller -> worker: stop the call in progress */
  WPOOL_KIND_USER = 16,
};

typedef struct wpool_config {
  const char *name;        /* what the workers do, for logs and errors: "speech" */
  const char *exe;         /* program to exec; NULL = this program (/proc/self/exe) */
  const char *const *args; /* argv[1..], NULL-terminated, e.g. {"__worker", "speech", NULL} */
  int n_max;               /* workers at most (live and busy together); 0 = 2 */
  int wait_ms;             /* how long acquire waits for a free worker; 0 = 30000 */
} wpool_config;

typedef struct wpool wpool;
typedef struct wpool_worker wpool_worker;

/* Starts no worker yet: the first acquire does. The config is copied. */
int wpool_new(wpool **out, const wpool_config *cfg);
void wpool_free(wpool *p);

/* An idle worker, else a newly started one when the pool has room, else
 * waits up to wait_ms (< 0: the pool's wait_ms; 0: not at all), then
 * ERR_OVERLOADED. */
int wpool_acquire(wpool *p, int wait_ms, wpool_worker **out);
/* Gives the worker back: idle if healthy, reaped (its slot freed) if it
 * died, timed out or was left mid-call. */
void wpool_release(wpool_worker *w);
pid_t wpool_worker_pid(const wpool_worker *w);
/* False once the worker died or was killed: every later call fails. */
bool wpool_worker_alive(const wpool_worker *w);

/* Receives each intermediate frame of a call; nonzero asks the worker to
 * stop (one CANCEL frame is sent, the call still waits for DONE). */
typedef int (*wpool_chunk_fn)(void *user, uint32_t kind, const uint8_t *data, size_t n);

/* One call: sends the request frame (kind, req[0..n)), passes chunks to fn,
 * and returns the rc carried by DONE (with its detail set by err_set), its
 * output appended to out (may be NULL). deadline_ms bounds the whole call;
 * past it the worker is killed and ERR_TIMEOUT returned. A dead worker is
 * ERR_WORKER. */
int wpool_call(wpool_worker *w, uint32_t kind, const void *req, size_t n, int deadline_ms, wpool_chunk_fn fn,
               void *user, buf *out);

/* Counters for tests and logs. */
typedef struct wpool_stats {
  int n_live;      /* worker processes running now */
  int n_busy;      /* acquired */
  long n_started;  /* processes started since wpool_new */
  long n_died;     /* ended by a crash, an exit or a kill */
} wpool_stats;
void wpool_get_stats(wpool *p, wpool_stats *st);

/* ---- the worker side ---- */

typedef struct wpool_conn wpool_conn;
/* Handles one request: fills out (sent in DONE) and returns 0 or an error
 * code (then DONE carries err_detail()). May send chunks meanwhile. */
typedef int (*wpool_handler)(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out);
typedef struct wpool_route {
  uint32_t kind;
  wpool_handler fn;
} wpool_route;
/* The worker's loop on fd: reads requests and dispatches them by kind until
 * the caller closes its end. Returns the process exit status (0 on EOF). */
int wpool_serve(int fd, const wpool_route *routes, size_t n_routes, void *ctx);
/* Sends an intermediate frame of the current call; ERR_IO when the caller
 * is gone. */
int wpool_conn_send(wpool_conn *c, uint32_t kind, const void *data, size_t n);
/* True once the caller sent CANCEL for the current call (non-blocking). */
bool wpool_conn_cancelled(wpool_conn *c);
/* What a worker's main does first: closes inherited descriptors above fd,
 * checks fd is a socket and starts a watchdog that exits the process when
 * the parent process is gone. */
int wpool_worker_setup(int fd);

/* ---- payload encoding: little-endian fixed-width fields, strings and
 * byte runs as u32 length + bytes ---- */

int wmsg_u32(buf *b, uint32_t v);
int wmsg_i32(buf *b, int32_t v);
int wmsg_f64(buf *b, double v);
int wmsg_str(buf *b, const char *s); /* NULL is sent as "" */
int wmsg_bytes(buf *b, const void *p, size_t n);

/* A reader over a payload; a short or malformed payload sets ok = false and
 * every later read returns zeros / "". */
typedef struct wmsg_rd {
  const uint8_t *p;
  size_t n;
  bool ok;
} wmsg_rd;
wmsg_rd wmsg_reader(const void *p, size_t n);
uint32_t wmsg_get_u32(wmsg_rd *r);
int32_t wmsg_get_i32(wmsg_rd *r);
double wmsg_get_f64(wmsg_rd *r);
/* A byte run: points into the payload; *len gets its length. */
const uint8_t *wmsg_get_bytes(wmsg_rd *r, size_t *len);
/* A string copied into a malloc'd, NUL-terminated buffer (NULL on failure). */
char *wmsg_get_str(wmsg_rd *r);

#endif
