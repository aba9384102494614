/*
 * test_wpool.c - the worker process pool (base/wpool.c) against a scripted
 * worker that runs in this test binary (`unit-tests __worker test`): calls
 * and reuse, chunks and cancel, a worker that crashes, one that hangs past
 * its deadline, one that exits, one killed while idle, the pool limit and
 * waiting for a free worker, and the payload reader on short input.
 */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/err.h"
#include "base/wpool.h"
#include "test.h"

enum { K_ECHO = WPOOL_KIND_USER, K_PID, K_CHUNKS, K_CRASH, K_HANG, K_EXIT, K_FAIL, K_CHUNK, K_FDS };

static int w_echo(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  (void)ctx, (void)c;
  return buf_append(out, req, n);
}
static int w_pid(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  (void)ctx, (void)c, (void)req, (void)n;
  return wmsg_i32(out, (int32_t)getpid());
}
/* u32 count: sends count chunks (u32 index each), stopping at a CANCEL. */
static int w_chunks(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  (void)ctx;
  wmsg_rd r = wmsg_reader(req, n);
  uint32_t count = wmsg_get_u32(&r);
  for (uint32_t i = 0; i < count; i++) {
    buf b = BUF_INIT;
    wmsg_u32(&b, i);
    int rc = wpool_conn_send(c, K_CHUNK, b.data, b.len);
    buf_free(&b);
    if (rc) return rc;
    usleep(1000);
    if (wpool_conn_cancelled(c)) return err_set(ERR_CANCELLED, "stopped after %u chunks", i + 1);
  }
  return wmsg_u32(out, count);
}
static int w_crash(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  (void)ctx, (void)c, (void)req, (void)n, (void)out;
  /* The default action, not a sanitizer's handler (which would exit 1). */
  signal(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
  return 0;
}
static int w_hang(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  (void)ctx, (void)c, (void)req, (void)n, (void)out;
  for (;;) pause();
  return 0;
}
static int w_exit(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  (void)ctx, (void)c, (void)req, (void)n, (void)out;
  _exit(7);
}
static int w_fail(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  (void)ctx, (void)c, (void)req, (void)n, (void)out;
  return err_set(ERR_NOT_FOUND, "no such thing as '%.*s'", (int)n, (const char *)req);
}

/* The worker's open descriptors, as u32 each, from /proc/self/fd. */
static int w_fds(void *ctx, wpool_conn *c, const uint8_t *req, size_t n, buf *out) {
  (void)ctx, (void)c, (void)req, (void)n;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return err_set(ERR_IO, "/proc/self/fd: %s", strerror(errno));
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d)) wmsg_u32(out, (uint32_t)atoi(e->d_name));
  closedir(d);
  return 0;
}

/* The scripted worker process (`unit-tests __worker test`). */
static int test_worker_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  static const wpool_route routes[] = {{K_ECHO, w_echo}, {K_PID, w_pid},   {K_CHUNKS, w_chunks}, {K_CRASH, w_crash},
                                       {K_HANG, w_hang}, {K_EXIT, w_exit}, {K_FAIL, w_fail},     {K_FDS, w_fds}};
  int rc = wpool_worker_setup(WPOOL_FD);
  return rc ? rc : wpool_serve(WPOOL_FD, routes, sizeof routes / sizeof routes[0], NULL);
}

TEST_WORKER("test", test_worker_main)

static wpool *new_pool(int n_max, int wait_ms) {
  static const char *const args[] = {"__worker", "test", NULL};
  wpool_config cfg = {.name = "test", .args = args, .n_max = n_max, .wait_ms = wait_ms};
  wpool *p = NULL;
  if (wpool_new(&p, &cfg)) return NULL;
  return p;
}

static int worker_pid(wpool_worker *w) {
  buf out = BUF_INIT;
  int rc = wpool_call(w, K_PID, NULL, 0, 10000, NULL, NULL, &out);
  wmsg_rd r = wmsg_reader(out.data, out.len);
  int pid = rc ? -1 : wmsg_get_i32(&r);
  buf_free(&out);
  return pid;
}

static bool process_gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

/* State Z in /proc/PID/stat (dead, not yet reaped) and no thread left in
 * /proc/PID/task but the main one: the main thread turns zombie while
 * others (the worker's watchdog) still exit, holding the descriptors. */
static bool process_is_zombie(pid_t pid) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  int n_threads = 0;
  for (struct dirent *e; d && (e = readdir(d));) n_threads += e->d_name[0] != '.';
  if (d) closedir(d);
  if (n_threads != 1) return false;
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = '\0';
  const char *close_paren = strrchr(line, ')');
  return close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z';
}

TEST(wpool_call_echo_and_reuse) {
  wpool *p = new_pool(2, 0);
  ASSERT_TRUE(p != NULL);
  wpool_worker *w;
  ASSERT_INT_EQ(wpool_acquire(p, -1, &w), 0);
  EXPECT_INT_NE(wpool_worker_pid(w), getpid());
  buf out = BUF_INIT;
  EXPECT_INT_EQ(wpool_call(w, K_ECHO, "hello", 5, 10000, NULL, NULL, &out), 0);
  EXPECT_INT_EQ(out.len, 5);
  EXPECT_MEM_EQ(out.data, "hello", 5);
  int pid = worker_pid(w);
  EXPECT_INT_EQ(pid, wpool_worker_pid(w));
  /* An error in the worker travels back with its code and detail. */
  EXPECT_INT_EQ(wpool_call(w, K_FAIL, "zebra", 5, 10000, NULL, NULL, NULL), ERR_NOT_FOUND);
  EXPECT_STR_EQ(err_detail(), "no such thing as 'zebra'");
  /* So does an unknown request kind, and the worker stays usable. */
  EXPECT_INT_EQ(wpool_call(w, 999, NULL, 0, 10000, NULL, NULL, NULL), ERR_UNSUPPORTED);
  EXPECT_TRUE(wpool_worker_alive(w));
  wpool_release(w);
  /* The idle worker is reused, not started again. */
  ASSERT_INT_EQ(wpool_acquire(p, -1, &w), 0);
  EXPECT_INT_EQ(worker_pid(w), pid);
  wpool_release(w);
  wpool_stats st;
  wpool_get_stats(p, &st);
  EXPECT_INT_EQ(st.n_started, 1);
  EXPECT_INT_EQ(st.n_live, 1);
  EXPECT_INT_EQ(st.n_busy, 0);
  buf_free(&out);
  wpool_free(p);
  /* Freeing the pool ends its workers. */
  for (int i = 0; i < 200 && !process_gone(pid); i++) usleep(10000);
  EXPECT_TRUE(process_gone(pid));
}

typedef struct chunk_seen {
  uint32_t n, next;
  bool in_order;
  uint32_t stop_after;
} chunk_seen;

static int on_chunk(void *user, uint32_t kind, const uint8_t *data, size_t n) {
  chunk_seen *s = user;
  wmsg_rd r = wmsg_reader(data, n);
  uint32_t i = wmsg_get_u32(&r);
  if (kind != K_CHUNK || !r.ok || i != s->next) s->in_order = false;
  s->next = i + 1;
  s->n++;
  return s->stop_after && s->n >= s->stop_after;
}

TEST(wpool_chunks_and_cancel) {
  wpool *p = new_pool(1, 0);
  ASSERT_TRUE(p != NULL);
  wpool_worker *w;
  ASSERT_INT_EQ(wpool_acquire(p, -1, &w), 0);
  buf req = BUF_INIT, out = BUF_INIT;
  wmsg_u32(&req, 20);
  chunk_seen s = {.in_order = true};
  EXPECT_INT_EQ(wpool_call(w, K_CHUNKS, req.data, req.len, 10000, on_chunk, &s, &out), 0);
  EXPECT_INT_EQ(s.n, 20);
  EXPECT_TRUE(s.in_order);
  /* Asking to stop after 3 chunks: the worker sees CANCEL and ends early;
   * the chunks it sent meanwhile are read and dropped. */
  buf_reset(&req);
  wmsg_u32(&req, 100000);
  chunk_seen c = {.in_order = true, .stop_after = 3};
  EXPECT_INT_EQ(wpool_call(w, K_CHUNKS, req.data, req.len, 30000, on_chunk, &c, NULL), ERR_CANCELLED);
  EXPECT_INT_EQ(c.n, 3);
  EXPECT_TRUE(wpool_worker_alive(w));
  /* The stream is still in step. */
  buf_reset(&out);
  EXPECT_INT_EQ(wpool_call(w, K_ECHO, "x", 1, 10000, NULL, NULL, &out), 0);
  EXPECT_INT_EQ(out.len, 1);
  wpool_release(w);
  buf_free(&req);
  buf_free(&out);
  wpool_free(p);
}

TEST(wpool_crashing_worker_is_restarted) {
  wpool *p = new_pool(1, 0);
  ASSERT_TRUE(p != NULL);
  wpool_worker *w;
  ASSERT_INT_EQ(wpool_acquire(p, -1, &w), 0);
  int pid = worker_pid(w);
  ASSERT_INT_GT(pid, 0);
  EXPECT_INT_EQ(wpool_call(w, K_CRASH, NULL, 0, 10000, NULL, NULL, NULL), ERR_WORKER);
  EXPECT_STR_CONTAINS(err_detail(), "the test worker process was killed by signal 11");
  EXPECT_FALSE(wpool_worker_alive(w));
  /* Every later call on it fails at once; release reaps it. */
  EXPECT_INT_EQ(wpool_call(w, K_ECHO, "x", 1, 10000, NULL, NULL, NULL), ERR_WORKER);
  wpool_release(w);
  EXPECT_TRUE(process_gone(pid)); /* reaped: no zombie left */
  wpool_stats st;
  wpool_get_stats(p, &st);
  EXPECT_INT_EQ(st.n_died, 1);
  EXPECT_INT_EQ(st.n_live, 0);
  /* The next acquire starts a fresh worker in the freed slot. */
  ASSERT_INT_EQ(wpool_acquire(p, -1, &w), 0);
  int pid2 = worker_pid(w);
  EXPECT_INT_GT(pid2, 0);
  EXPECT_INT_NE(pid2, pid);
  /* A worker that exits mid-call is reported with its status. */
  EXPECT_INT_EQ(wpool_call(w, K_EXIT, NULL, 0, 10000, NULL, NULL, NULL), ERR_WORKER);
  EXPECT_STR_CONTAINS(err_detail(), "exited with status 7");
  wpool_release(w);
  wpool_get_stats(p, &st);
  EXPECT_INT_EQ(st.n_started, 2);
  EXPECT_INT_EQ(st.n_died, 2);
  wpool_free(p);
}

TEST(wpool_hanging_worker_is_killed_at_its_deadline) {
  wpool *p = new_pool(1, 0);
  ASSERT_TRUE(p != NULL);
  wpool_worker *w;
  ASSERT_INT_EQ(wpool_acquire(p, -1, &w), 0);
  int pid = worker_pid(w);
  EXPECT_INT_EQ(wpool_call(w, K_HANG, NULL, 0, 300, NULL, NULL, NULL), ERR_TIMEOUT);
  EXPECT_STR_CONTAINS(err_detail(), "took longer than 0.3 s");
  EXPECT_TRUE(process_gone(pid)); /* killed and reaped within the call */
  wpool_release(w);
  ASSERT_INT_EQ(wpool_acquire(p, -1, &w), 0);
  buf out = BUF_INIT;
  EXPECT_INT_EQ(wpool_call(w, K_ECHO, "ok", 2, 10000, NULL, NULL, &out), 0);
  EXPECT_INT_EQ(out.len, 2);
  EXPECT_INT_NE(wpool_worker_pid(w), pid);
  /* A worker that stops reading (stopped here) while a large request is
   * sent: the send itself is bounded by the deadline. */
  int pid2 = wpool_worker_pid(w);
  kill(pid2, SIGSTOP);
  size_t big = (size_t)16 << 20;
  char *junk = calloc(1, big);
  ASSERT_TRUE(junk != NULL);
  EXPECT_INT_EQ(wpool_call(w, K_ECHO, junk, big, 300, NULL, NULL, NULL), ERR_TIMEOUT);
  EXPECT_TRUE(process_gone(pid2));
  free(junk);
  wpool_release(w);
  buf_free(&out);
  wpool_free(p);
}

TEST(wpool_idle_worker_killed_from_outside) {
  wpool *p = new_pool(1, 0);
  ASSERT_TRUE(p != NULL);
  wpool_worker *w;
  ASSERT_INT_EQ(wpool_acquire(p, -1, &w), 0);
  int pid = worker_pid(w);
  wpool_release(w);
  kill(pid, SIGKILL);
  /* Until it is a zombie (the pool, its parent, has not reaped it yet) with
   * its descriptors closed: its socket has hung up by then. */
  for (int i = 0; i < 500 && !process_is_zombie(pid); i++) usleep(10000);
  EXPECT_TRUE(process_is_zombie(pid));
  /* acquire notices the dead idle worker and starts another instead. */
  ASSERT_INT_EQ(wpool_acquire(p, -1, &w), 0);
  int pid2 = worker_pid(w);
  EXPECT_INT_GT(pid2, 0);
  EXPECT_INT_NE(pid2, pid);
  wpool_release(w);
  wpool_free(p);
}

typedef struct releaser {
  wpool_worker *w;
} releaser;

static void *release_later(void *arg) {
  releaser *r = arg;
  usleep(200000);
  wpool_release(r->w);
  return NULL;
}

TEST(wpool_limit_and_waiting) {
  wpool *p = new_pool(2, 0);
  ASSERT_TRUE(p != NULL);
  wpool_worker *a, *b, *c;
  ASSERT_INT_EQ(wpool_acquire(p, -1, &a), 0);
  ASSERT_INT_EQ(wpool_acquire(p, -1, &b), 0);
  EXPECT_INT_NE(wpool_worker_pid(a), wpool_worker_pid(b));
  /* Both busy: no third process, ERR_OVERLOADED at once or after the wait. */
  EXPECT_INT_EQ(wpool_acquire(p, 0, &c), ERR_OVERLOADED);
  EXPECT_STR_CONTAINS(err_detail(), "all 2 test workers are busy");
  EXPECT_INT_EQ(wpool_acquire(p, 50, &c), ERR_OVERLOADED);
  wpool_stats st;
  wpool_get_stats(p, &st);
  EXPECT_INT_EQ(st.n_live, 2);
  EXPECT_INT_EQ(st.n_busy, 2);
  /* A waiter gets the worker another thread gives back. */
  releaser r = {b};
  pthread_t th;
  ASSERT_INT_EQ(pthread_create(&th, NULL, release_later, &r), 0);
  EXPECT_INT_EQ(wpool_acquire(p, 20000, &c), 0);
  pthread_join(th, NULL);
  EXPECT_TRUE(c == b);
  wpool_release(a);
  wpool_release(c);
  wpool_get_stats(p, &st);
  EXPECT_INT_EQ(st.n_started, 2);
  wpool_free(p);
}

TEST(wpool_payload_reader) {
  buf b = BUF_INIT;
  ASSERT_INT_EQ(wmsg_u32(&b, 0xdeadbeef), 0);
  ASSERT_INT_EQ(wmsg_i32(&b, -5), 0);
  ASSERT_INT_EQ(wmsg_f64(&b, 0.25), 0);
  ASSERT_INT_EQ(wmsg_str(&b, "espeak:hi"), 0);
  ASSERT_INT_EQ(wmsg_bytes(&b, "\0\1\2", 3), 0);
  EXPECT_INT_EQ(b.len, 4 + 4 + 8 + 4 + 9 + 4 + 3);
  wmsg_rd r = wmsg_reader(b.data, b.len);
  EXPECT_INT_EQ(wmsg_get_u32(&r), 0xdeadbeef);
  EXPECT_INT_EQ(wmsg_get_i32(&r), -5);
  EXPECT_NEAR(wmsg_get_f64(&r), 0.25, 0);
  char *s = wmsg_get_str(&r);
  EXPECT_STR_EQ(s, "espeak:hi");
  free(s);
  size_t n;
  const uint8_t *p = wmsg_get_bytes(&r, &n);
  EXPECT_INT_EQ(n, 3);
  EXPECT_INT_EQ(p[2], 2);
  EXPECT_TRUE(r.ok);
  EXPECT_INT_EQ(r.n, 0);
  /* A length past the end: not ok, and every later read is empty. */
  for (size_t cut = 0; cut < b.len; cut++) {
    wmsg_rd t = wmsg_reader(b.data, cut);
    wmsg_get_u32(&t), wmsg_get_i32(&t), wmsg_get_f64(&t);
    char *x = wmsg_get_str(&t);
    wmsg_get_bytes(&t, &n);
    EXPECT_FALSE(t.ok);
    free(x);
  }
  buf_free(&b);
}

/* A listening socket the server left inheritable (no close-on-exec) does
 * not reach the worker: it sees stdin, stdout, stderr and its own socket. */
TEST(wpool_worker_inherits_no_descriptors) {
  int ls = socket(AF_INET, SOCK_STREAM, 0); /* deliberately without SOCK_CLOEXEC */
  ASSERT_TRUE(ls >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ASSERT_INT_EQ(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
  ASSERT_INT_EQ(listen(ls, 4), 0);
  wpool *p = new_pool(1, 0);
  ASSERT_TRUE(p != NULL);
  wpool_worker *w;
  ASSERT_INT_EQ(wpool_acquire(p, -1, &w), 0);
  buf out = BUF_INIT;
  ASSERT_INT_EQ(wpool_call(w, K_FDS, NULL, 0, 10000, NULL, NULL, &out), 0);
  wmsg_rd r = wmsg_reader(out.data, out.len);
  bool seen[4] = {false};
  size_t n = 0;
  while (r.ok && r.n) {
    uint32_t fd = wmsg_get_u32(&r);
    n++;
    EXPECT_INT_LE(fd, WPOOL_FD);
    if (fd <= WPOOL_FD) seen[fd] = true;
  }
  EXPECT_INT_EQ(n, 4);
  for (int i = 0; i <= WPOOL_FD; i++) EXPECT_TRUE(seen[i]);
  wpool_release(w);
  buf_free(&out);
  wpool_free(p);
  close(ls);
}
