/*
 * wpool.c - worker processes: starting them (posix_spawn of this program,
 * so nothing of the multi-threaded parent survives in the child but fd 3),
 * framing, per-call deadlines, death detection, restarts; and the worker's
 * side of the protocol (wpool_serve). See wpool.h for the contract.
 *
 * Invariants: a slot is EMPTY (no process), IDLE (a live process waiting
 * for a request) or BUSY (acquired by one thread). Only the thread holding
 * a BUSY slot touches its socket. A slot whose process died or was killed
 * is marked broken; wpool_release reaps it (waitpid) and empties the slot,
 * so no zombie outlives the call that found it dead. A call that stopped
 * reading before DONE (an error on the caller's side) also leaves the
 * worker broken: the stream would be out of step otherwise.
 *
 * Start reading at wpool_call().
 */
#include "base/wpool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

extern char **environ;

enum slot_state { SLOT_EMPTY, SLOT_IDLE, SLOT_BUSY };

struct wpool_worker {
  wpool *pool;
  enum slot_state state;
  pid_t pid;
  int fd;      /* our end of the socketpair */
  bool broken; /* died, killed, or out of step: reap on release */
  int status;  /* waitpid status once reaped */
  bool reaped;
};

struct wpool {
  char name[32];
  char *exe;
  char **argv; /* exe, args..., NULL */
  int wait_ms;
  int n_max;
  wpool_worker *slots;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long n_started, n_died;
};

/* ---- frames ------------------------------------------------------------------ */

static void put_u32le(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}
static uint32_t get_u32le(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t now_ms(void) { return time_mono_ns() / 1000000u; }

/* Waits until fd is ready for events or the deadline (absolute ms; 0 =
 * none) passes: 0, ERR_TIMEOUT or ERR_IO. */
static int wait_fd(int fd, short events, uint64_t deadline) {
  while (deadline) {
    uint64_t t = now_ms();
    if (t >= deadline) return ERR_TIMEOUT;
    struct pollfd pfd = {.fd = fd, .events = events};
    uint64_t left = deadline - t;
    int pr = poll(&pfd, 1, left > 60000 ? 60000 : (int)left);
    if (pr < 0 && errno != EINTR) return ERR_IO;
    if (pr > 0) return 0;
  }
  return 0;
}

/* Writes all of p before deadline (a worker that stopped reading must not
 * hold the caller forever); MSG_NOSIGNAL so a dead peer is EPIPE, not
 * SIGPIPE. */
static int write_all(int fd, const void *p, size_t n, uint64_t deadline) {
  const uint8_t *b = p;
  while (n) {
    int rc = wait_fd(fd, POLLOUT, deadline);
    if (rc) return rc;
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL | (deadline ? MSG_DONTWAIT : 0));
    if (w < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (w <= 0) return ERR_IO;
    b += w, n -= (size_t)w;
  }
  return 0;
}

/* ERR_TOO_LARGE (nothing sent), ERR_IO or ERR_TIMEOUT. */
static int send_frame(int fd, uint64_t deadline, uint32_t kind, const void *a, size_t na, const void *b, size_t nb) {
  if (na + nb > WPOOL_FRAME_MAX) return err_set(ERR_TOO_LARGE, "worker frame of %zu bytes", na + nb);
  uint8_t h[8];
  put_u32le(h, (uint32_t)(na + nb));
  put_u32le(h + 4, kind);
  int rc = write_all(fd, h, sizeof h, deadline);
  if (!rc && na) rc = write_all(fd, a, na, deadline);
  if (!rc && nb) rc = write_all(fd, b, nb, deadline);
  return rc;
}

/* Reads exactly n bytes before deadline (absolute ms; 0 = none). Returns 0,
 * ERR_IO at EOF or error, ERR_TIMEOUT past the deadline. */
static int read_full(int fd, void *p, size_t n, uint64_t deadline) {
  uint8_t *b = p;
  while (n) {
    int rc = wait_fd(fd, POLLIN, deadline);
    if (rc) return rc;
    ssize_t r = read(fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return ERR_IO;
    b += r, n -= (size_t)r;
  }
  return 0;
}

/* One frame into b (replacing its contents). */
static int recv_frame(int fd, uint64_t deadline, uint32_t *kind, buf *b) {
  uint8_t h[8];
  int rc = read_full(fd, h, sizeof h, deadline);
  if (rc) return rc;
  uint32_t len = get_u32le(h);
  *kind = get_u32le(h + 4);
  if (len > WPOOL_FRAME_MAX) return ERR_PARSE;
  buf_reset(b);
  if (buf_reserve(b, len)) return ERR_NOMEM;
  if ((rc = read_full(fd, b->data, len, deadline))) return rc;
  b->len = len;
  b->data[len] = '\0';
  return 0;
}

/* ---- processes ----------------------------------------------------------------- */

static void describe_status(int status, char *out, size_t cap) {
  if (WIFSIGNALED(status))
    snprintf(out, cap, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else if (WIFEXITED(status))
    snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
  else
    snprintf(out, cap, "ended");
}

/* Waits for the worker's process (it is dead or killed: its socket hit EOF
 * or we sent SIGKILL); bounded so a process that closed its end but lives
 * on is killed rather than waited for forever. */
static void reap(wpool_worker *w) {
  if (w->reaped || w->pid <= 0) return;
  for (int i = 0; i < 200; i++) {
    pid_t r = waitpid(w->pid, &w->status, WNOHANG);
    if (r == w->pid || (r < 0 && errno != EINTR)) {
      w->reaped = true;
      return;
    }
    if (i == 100) kill(w->pid, SIGKILL);
    usleep(i < 10 ? 1000 : 10000);
  }
  kill(w->pid, SIGKILL);
  w->reaped = waitpid(w->pid, &w->status, 0) == w->pid;
}

static int spawn_worker(wpool *p, wpool_worker *w) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return err_set(ERR_IO, "%s worker: socketpair: %s", p->name, strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  /* The child end becomes fd 3 (dup2 clears close-on-exec); stdin is
   * /dev/null; stdout and stderr are shared with the server (logs). */
  posix_spawn_file_actions_adddup2(&fa, sv[1], WPOOL_FD);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  /* Nothing else crosses the exec: no listening socket, no client
   * connection, no database file (wpool_worker_setup closes them again
   * where this is not available). */
  posix_spawn_file_actions_addclosefrom_np(&fa, WPOOL_FD + 1);
#endif
  /* The server blocks its shutdown signals in every thread; the worker
   * starts with none blocked and default handlers, in its own process
   * group so a terminal's ^C reaches only the server, which then closes
   * the workers' sockets. */
  sigset_t none, dfl;
  sigemptyset(&none);
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGPIPE);
  sigaddset(&dfl, SIGINT);
  sigaddset(&dfl, SIGTERM);
  sigaddset(&dfl, SIGUSR1);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &dfl);
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid;
  int e = posix_spawn(&pid, p->exe, &fa, &at, p->argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(sv[1]);
  if (e != 0) {
    close(sv[0]);
    return err_set(ERR_UNAVAILABLE, "%s worker: cannot start %s: %s", p->name, p->exe, strerror(e));
  }
  *w = (wpool_worker){.pool = p, .state = SLOT_BUSY, .pid = pid, .fd = sv[0]};
  p->n_started++;
  LOG_DEBUG("wpool", "%s worker %d started", p->name, (int)pid);
  return 0;
}

/* An idle worker that died while waiting (killed from outside): its socket
 * reads EOF or hangs up. */
static bool idle_is_dead(const wpool_worker *w) {
  struct pollfd pfd = {.fd = w->fd, .events = POLLIN};
  return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR));
}

/* Frees the slot of a worker that is gone or must go. Called with p->mu. */
static void retire_locked(wpool *p, wpool_worker *w) {
  if (!w->reaped) {
    kill(w->pid, SIGKILL);
    reap(w);
  }
  if (w->fd >= 0) close(w->fd);
  p->n_died++;
  *w = (wpool_worker){.pool = p, .state = SLOT_EMPTY, .fd = -1};
}

/* ---- the pool ------------------------------------------------------------------ */

int wpool_new(wpool **out, const wpool_config *cfg) {
  *out = NULL;
  wpool *p = calloc(1, sizeof *p);
  if (!p) return err_set(ERR_NOMEM, "worker pool");
  snprintf(p->name, sizeof p->name, "%s", cfg->name ? cfg->name : "worker");
  p->n_max = cfg->n_max > 0 ? cfg->n_max : 2;
  p->wait_ms = cfg->wait_ms > 0 ? cfg->wait_ms : 30000;
  size_t n_args = 0;
  while (cfg->args && cfg->args[n_args]) n_args++;
  char self[4096];
  const char *exe = cfg->exe;
  if (!exe) {
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) {
      free(p);
      return err_set(ERR_UNAVAILABLE, "%s worker: cannot find this program (/proc/self/exe): %s", p->name,
                     strerror(errno));
    }
    self[k] = '\0';
    exe = self;
  }
  p->exe = str_dup(exe);
  p->argv = calloc(n_args + 2, sizeof *p->argv);
  p->slots = calloc((size_t)p->n_max, sizeof *p->slots);
  bool ok = p->exe && p->argv && p->slots;
  if (ok) p->argv[0] = p->exe;
  for (size_t i = 0; ok && i < n_args; i++) ok = (p->argv[i + 1] = str_dup(cfg->args[i])) != NULL;
  if (!ok) {
    wpool_free(p);
    return err_set(ERR_NOMEM, "worker pool");
  }
  for (int i = 0; i < p->n_max; i++) p->slots[i] = (wpool_worker){.pool = p, .state = SLOT_EMPTY, .fd = -1};
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  *out = p;
  return 0;
}

void wpool_free(wpool *p) {
  if (!p) return;
  if (p->slots) {
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->n_max; i++) {
      wpool_worker *w = &p->slots[i];
      if (w->state == SLOT_BUSY) LOG_WARN("wpool", "%s worker %d still busy at shutdown", p->name, (int)w->pid);
      if (w->state == SLOT_EMPTY) continue;
      /* Closing our end is the worker's signal to exit; it gets a moment
       * to do so before the kill in reap(). */
      close(w->fd);
      w->fd = -1;
      reap(w);
    }
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
  }
  if (p->argv)
    for (size_t i = 1; p->argv[i]; i++) free(p->argv[i]);
  free(p->argv);
  free(p->exe);
  free(p->slots);
  free(p);
}

int wpool_acquire(wpool *p, int wait_ms, wpool_worker **out) {
  *out = NULL;
  if (wait_ms < 0) wait_ms = p->wait_ms;
  uint64_t until = now_ms() + (uint64_t)wait_ms;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    wpool_worker *empty = NULL;
    for (int i = 0; i < p->n_max; i++) {
      wpool_worker *w = &p->slots[i];
      if (w->state == SLOT_IDLE && idle_is_dead(w)) {
        reap(w);
        char how[96];
        describe_status(w->status, how, sizeof how);
        LOG_WARN("wpool", "idle %s worker %d %s; starting another", p->name, (int)w->pid, how);
        retire_locked(p, w);
      }
      if (w->state == SLOT_IDLE) {
        w->state = SLOT_BUSY;
        pthread_mutex_unlock(&p->mu);
        *out = w;
        return 0;
      }
      if (w->state == SLOT_EMPTY && !empty) empty = w;
    }
    if (empty) {
      int rc = spawn_worker(p, empty);
      pthread_mutex_unlock(&p->mu);
      if (!rc) *out = empty;
      return rc;
    }
    uint64_t t = now_ms();
    if (t >= until) break;
    uint64_t left = until - t;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(left / 1000);
    ts.tv_nsec += (long)(left % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&p->cv, &p->mu, &ts);
  }
  pthread_mutex_unlock(&p->mu);
  return err_set(ERR_OVERLOADED, "all %d %s workers are busy (waited %d ms)", p->n_max, p->name, wait_ms);
}

void wpool_release(wpool_worker *w) {
  if (!w) return;
  wpool *p = w->pool;
  pthread_mutex_lock(&p->mu);
  if (w->broken) retire_locked(p, w);
  else w->state = SLOT_IDLE;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

pid_t wpool_worker_pid(const wpool_worker *w) { return w->pid; }
bool wpool_worker_alive(const wpool_worker *w) { return !w->broken; }

void wpool_get_stats(wpool *p, wpool_stats *st) {
  memset(st, 0, sizeof *st);
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < p->n_max; i++) {
    if (p->slots[i].state != SLOT_EMPTY) st->n_live++;
    if (p->slots[i].state == SLOT_BUSY) st->n_busy++;
  }
  st->n_started = p->n_started;
  st->n_died = p->n_died;
  pthread_mutex_unlock(&p->mu);
}

/* The error for a call that found its worker gone (rc from the read). */
static int worker_failed(wpool_worker *w, int rc, int deadline_ms) {
  wpool *p = w->pool;
  w->broken = true;
  if (rc == ERR_TIMEOUT) {
    kill(w->pid, SIGKILL);
    reap(w);
    LOG_WARN("wpool", "%s worker %d passed its %d ms deadline and was killed", p->name, (int)w->pid, deadline_ms);
    return err_set(ERR_TIMEOUT, "the %s worker took longer than %.1f s and was stopped", p->name,
                   deadline_ms / 1000.0);
  }
  if (rc == ERR_NOMEM || rc == ERR_PARSE) {
    kill(w->pid, SIGKILL);
    reap(w);
    return err_set(rc == ERR_NOMEM ? ERR_NOMEM : ERR_WORKER, "the %s worker's reply could not be read (%s)", p->name,
                   rc == ERR_NOMEM ? "out of memory" : "bad frame");
  }
  reap(w);
  char how[96];
  describe_status(w->status, how, sizeof how);
  LOG_WARN("wpool", "%s worker %d %s during a call", p->name, (int)w->pid, how);
  return err_set(ERR_WORKER, "the %s worker process %s while handling this request", p->name, how);
}

int wpool_call(wpool_worker *w, uint32_t kind, const void *req, size_t n, int deadline_ms, wpool_chunk_fn fn,
               void *user, buf *out) {
  if (w->broken) return err_set(ERR_WORKER, "the %s worker died earlier in this session", w->pool->name);
  uint64_t deadline = now_ms() + (uint64_t)(deadline_ms > 0 ? deadline_ms : 1);
  int rc = send_frame(w->fd, deadline, kind, req, n, NULL, 0);
  if (rc == ERR_TOO_LARGE) return rc; /* nothing was sent: still in step */
  if (rc) return worker_failed(w, rc, deadline_ms);
  buf frame = BUF_INIT;
  bool cancelled = false;
  for (;;) {
    uint32_t k;
    rc = recv_frame(w->fd, deadline, &k, &frame);
    if (rc) {
      buf_free(&frame);
      return worker_failed(w, rc, deadline_ms);
    }
    if (k == WPOOL_KIND_DONE) break;
    if (fn && !cancelled && fn(user, k, (const uint8_t *)frame.data, frame.len)) {
      cancelled = true;
      if ((rc = send_frame(w->fd, deadline, WPOOL_KIND_CANCEL, NULL, 0, NULL, 0))) {
        buf_free(&frame);
        return worker_failed(w, rc, deadline_ms);
      }
    }
  }
  wmsg_rd r = wmsg_reader(frame.data, frame.len);
  int32_t result = wmsg_get_i32(&r);
  char *detail = wmsg_get_str(&r);
  if (!r.ok || !detail) {
    free(detail);
    buf_free(&frame);
    return worker_failed(w, ERR_PARSE, deadline_ms);
  }
  if (result) err_set(result, "%s", detail);
  else if (out && r.n && buf_append(out, r.p, r.n)) result = err_set(ERR_NOMEM, "worker output of %zu bytes", r.n);
  free(detail);
  buf_free(&frame);
  return result;
}

/* ---- the worker side ------------------------------------------------------------ */

struct wpool_conn {
  int fd;
  bool cancelled;
  bool broken; /* the caller is gone: stop */
};

int wpool_conn_send(wpool_conn *c, uint32_t kind, const void *data, size_t n) {
  if (c->broken) return ERR_IO;
  if (send_frame(c->fd, 0, kind, data, n, NULL, 0)) {
    c->broken = true;
    return ERR_IO;
  }
  return 0;
}

bool wpool_conn_cancelled(wpool_conn *c) {
  if (c->cancelled || c->broken) return true;
  struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
  while (poll(&pfd, 1, 0) > 0) {
    uint8_t h[8];
    if (read_full(c->fd, h, sizeof h, 0)) {
      c->broken = true;
      return true;
    }
    uint32_t len = get_u32le(h), kind = get_u32le(h + 4);
    if (kind != WPOOL_KIND_CANCEL || len != 0) {
      /* Only CANCEL may arrive during a call. */
      c->broken = true;
      return true;
    }
    c->cancelled = true;
  }
  return c->cancelled;
}

static void *watchdog(void *arg) {
  pid_t parent = (pid_t)(intptr_t)arg;
  for (;;) {
    sleep(1);
    if (getppid() != parent) _exit(3); /* the server is gone, maybe mid-call */
  }
  return NULL;
}

int wpool_worker_setup(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    fprintf(stderr, "parley: the worker mode is started by the server itself (fd %d is not its socket)\n", fd);
    return 2;
  }
#ifdef __linux__
  /* Nothing above fd is ours: close what a careless parent left open. */
  if (close_range((unsigned)fd + 1, ~0u, 0) != 0)
#endif
    for (int i = fd + 1; i < 1024; i++) close(i);
  signal(SIGPIPE, SIG_IGN);
  pthread_t th;
  if (pthread_create(&th, NULL, watchdog, (void *)(intptr_t)getppid()) == 0) pthread_detach(th);
  return 0;
}

int wpool_serve(int fd, const wpool_route *routes, size_t n_routes, void *ctx) {
  buf req = BUF_INIT, out = BUF_INIT, done = BUF_INIT;
  int status = 0;
  for (;;) {
    uint32_t kind;
    int rc = recv_frame(fd, 0, &kind, &req);
    if (rc == ERR_IO) break; /* the server closed its end */
    if (rc) {
      status = 1;
      break;
    }
    if (kind == WPOOL_KIND_CANCEL) continue; /* arrived after the call ended */
    wpool_conn c = {.fd = fd};
    const wpool_route *route = NULL;
    for (size_t i = 0; i < n_routes; i++)
      if (routes[i].kind == kind) route = &routes[i];
    buf_reset(&out);
    err_clear();
    rc = route ? route->fn(ctx, &c, (const uint8_t *)req.data, req.len, &out)
               : err_set(ERR_UNSUPPORTED, "worker: unknown request kind %u", (unsigned)kind);
    if (c.broken) {
      status = 1;
      break;
    }
    buf_reset(&done);
    if (wmsg_i32(&done, rc) || wmsg_str(&done, rc ? err_detail() : "") ||
        send_frame(fd, 0, WPOOL_KIND_DONE, done.data, done.len, rc ? NULL : out.data, rc ? 0 : out.len)) {
      status = 1;
      break;
    }
  }
  buf_free(&req);
  buf_free(&out);
  buf_free(&done);
  return status;
}

/* ---- payloads -------------------------------------------------------------------- */

int wmsg_u32(buf *b, uint32_t v) {
  uint8_t p[4];
  put_u32le(p, v);
  return buf_append(b, p, 4);
}
int wmsg_i32(buf *b, int32_t v) { return wmsg_u32(b, (uint32_t)v); }
int wmsg_f64(buf *b, double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return wmsg_u32(b, (uint32_t)u) || wmsg_u32(b, (uint32_t)(u >> 32)) ? ERR_NOMEM : 0;
}
int wmsg_bytes(buf *b, const void *p, size_t n) {
  if (n > WPOOL_FRAME_MAX) return err_set(ERR_TOO_LARGE, "worker field of %zu bytes", n);
  return wmsg_u32(b, (uint32_t)n) || (n && buf_append(b, p, n)) ? ERR_NOMEM : 0;
}
int wmsg_str(buf *b, const char *s) { return wmsg_bytes(b, s ? s : "", s ? strlen(s) : 0); }

wmsg_rd wmsg_reader(const void *p, size_t n) { return (wmsg_rd){p, n, true}; }

static const uint8_t *take(wmsg_rd *r, size_t n) {
  if (!r->ok || r->n < n) {
    r->ok = false;
    return NULL;
  }
  const uint8_t *p = r->p;
  r->p += n, r->n -= n;
  return p;
}
uint32_t wmsg_get_u32(wmsg_rd *r) {
  const uint8_t *p = take(r, 4);
  return p ? get_u32le(p) : 0;
}
int32_t wmsg_get_i32(wmsg_rd *r) { return (int32_t)wmsg_get_u32(r); }
double wmsg_get_f64(wmsg_rd *r) {
  uint64_t lo = wmsg_get_u32(r), hi = wmsg_get_u32(r);
  uint64_t u = lo | hi << 32;
  double v;
  memcpy(&v, &u, sizeof v);
  return r->ok ? v : 0;
}
const uint8_t *wmsg_get_bytes(wmsg_rd *r, size_t *len) {
  size_t n = wmsg_get_u32(r);
  const uint8_t *p = take(r, n);
  *len = p ? n : 0;
  return p ? p : (const uint8_t *)"";
}
char *wmsg_get_str(wmsg_rd *r) {
  size_t n;
  const uint8_t *p = wmsg_get_bytes(r, &n);
  if (!r->ok) return NULL;
  char *s = malloc(n + 1);
  if (!s) return NULL;
  memcpy(s, p, n);
  s[n] = '\0';
  return s;
}
