/*
 * main.c - runner of the C unit tests.
 *
 * Each test runs in its own forked process with a time limit (PARLEY_TEST_TIMEOUT
 * seconds, default 120) and its own temporary directory; the parent collects
 * the verdicts and ends with the line `N passed, N failed` (plus `, N skipped`).
 * Arguments select tests by exact name or by prefix with a trailing '*';
 * `--list` prints the names.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#define MAX_TESTS 4096
#define EXIT_SKIP 77

struct test_entry {
  const char *name;
  const char *file;
  test_fn fn;
};

static struct test_entry g_tests[MAX_TESTS];
static int g_n_tests;
int test_failed_flag;
static char g_tmpdir[512];

#define MAX_WORKERS 8
static struct {
  const char *name;
  test_worker_fn fn;
} g_workers[MAX_WORKERS];
static int g_n_workers;

void test_register_worker(const char *name, test_worker_fn fn) {
  if (g_n_workers >= MAX_WORKERS) {
    fprintf(stderr, "too many test workers\n");
    exit(2);
  }
  g_workers[g_n_workers].name = name;
  g_workers[g_n_workers++].fn = fn;
}

void test_register(const char *name, const char *file, test_fn fn) {
  if (g_n_tests >= MAX_TESTS) {
    fprintf(stderr, "too many tests\n");
    exit(2);
  }
  g_tests[g_n_tests++] = (struct test_entry){name, file, fn};
}

void test_fail_at(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "    %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  test_failed_flag = 1;
}

void test_skip(const char *why) {
  fprintf(stderr, "    skipped: %s\n", why);
  fflush(stderr);
  _exit(test_failed_flag ? 1 : EXIT_SKIP);
}

const char *test_shared_path(const char *rel, char *out, size_t cap) {
  const char *root = getenv("PARLEY_SHARED");
  if (!root || !*root) root = "../shared";
  snprintf(out, cap, "%s/%s", root, rel);
  struct stat st;
  if (stat(out, &st) != 0) return NULL;
  return out;
}

const char *test_tmpdir(void) { return g_tmpdir; }

char *test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *p = NULL;
  size_t n = 0, cap = 0, got;
  do {
    if (cap - n < 65536) {
      char *q = realloc(p, cap = cap * 2 + 65536 + 1);
      if (!q) {
        free(p);
        fclose(f);
        return NULL;
      }
      p = q;
    }
    got = fread(p + n, 1, cap - 1 - n, f);
    n += got;
  } while (got > 0);
  fclose(f);
  p[n] = '\0';
  if (len) *len = n;
  return p;
}

int test_capture(int (*fn)(int, char **), int argc, const char **argv, char **out, char **err) {
  char op[600], ep[600];
  snprintf(op, sizeof op, "%s/stdout.txt", test_tmpdir());
  snprintf(ep, sizeof ep, "%s/stderr.txt", test_tmpdir());
  fflush(stdout);
  fflush(stderr);
  int so = dup(1), se = dup(2);
  int fo = open(op, O_WRONLY | O_CREAT | O_TRUNC, 0600), fe = open(ep, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (so < 0 || se < 0 || fo < 0 || fe < 0) return -100;
  dup2(fo, 1);
  dup2(fe, 2);
  close(fo);
  close(fe);
  int rc = fn(argc, (char **)argv);
  fflush(stdout);
  fflush(stderr);
  dup2(so, 1);
  dup2(se, 2);
  close(so);
  close(se);
  *out = test_read_file(op, NULL);
  *err = test_read_file(ep, NULL);
  return rc;
}

int test_each_file(const char *dir, size_t max, test_file_fn fn, void *ud) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n_files = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    unsigned char *data = NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    size_t n = 0;
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0) {
      size_t want = (size_t)size < max ? (size_t)size : max;
      if ((data = malloc(want ? want : 1))) n = fread(data, 1, want, f);
    }
    fclose(f);
    if (!data) continue;
    n_files++;
    fn(e->d_name, path, data, n, ud);
    free(data);
  }
  closedir(d);
  return n_files;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static int cmp_tests(const void *a, const void *b) {
  return strcmp(((const struct test_entry *)a)->name, ((const struct test_entry *)b)->name);
}

static int selected(const char *name, int argc, char **argv) {
  int any = 0;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    any = 1;
    size_t n = strlen(argv[i]);
    if (n && argv[i][n - 1] == '*') {
      if (strncmp(name, argv[i], n - 1) == 0) return 1;
    } else if (strcmp(name, argv[i]) == 0) {
      return 1;
    }
  }
  return !any;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  /* Worker processes the tests start run this same binary (wpool execs
   * /proc/self/exe) as `__worker NAME ...`, NAME registered by TEST_WORKER. */
  if (argc >= 3 && strcmp(argv[1], "__worker") == 0) {
    for (int i = 0; i < g_n_workers; i++)
      if (strcmp(argv[2], g_workers[i].name) == 0) return g_workers[i].fn(argc - 3, argv + 3);
    fprintf(stderr, "unknown test worker '%s'\n", argv[2]);
    return 2;
  }
  qsort(g_tests, (size_t)g_n_tests, sizeof g_tests[0], cmp_tests);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--list") == 0) {
      for (int t = 0; t < g_n_tests; t++) printf("%s\n", g_tests[t].name);
      return 0;
    }
  }
  int timeout = 120;
  const char *te = getenv("PARLEY_TEST_TIMEOUT");
  if (te && atoi(te) > 0) timeout = atoi(te);
  const char *tmproot = getenv("TMPDIR");
  if (!tmproot || !*tmproot) tmproot = "/tmp";

  int passed = 0, failed = 0, skipped = 0, ran = 0;
  for (int t = 0; t < g_n_tests; t++) {
    if (!selected(g_tests[t].name, argc, argv)) continue;
    ran++;
    snprintf(g_tmpdir, sizeof g_tmpdir, "%s/parley-test-XXXXXX", tmproot);
    if (!mkdtemp(g_tmpdir)) {
      perror("mkdtemp");
      return 2;
    }
    fflush(stdout);
    fflush(stderr);
    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
      alarm((unsigned)timeout);
      test_failed_flag = 0;
      g_tests[t].fn();
      fflush(stdout);
      fflush(stderr);
      exit(test_failed_flag ? 1 : 0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    double dt = now_s() - t0;
    nftw(g_tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      passed++;
      printf("ok   %s (%.2fs)\n", g_tests[t].name, dt);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SKIP) {
      skipped++;
      printf("skip %s\n", g_tests[t].name);
    } else {
      failed++;
      if (WIFSIGNALED(status))
        printf("FAIL %s (%s: signal %d%s)\n", g_tests[t].name, g_tests[t].file, WTERMSIG(status),
               WTERMSIG(status) == SIGALRM ? ", timed out" : "");
      else
        printf("FAIL %s (%s)\n", g_tests[t].name, g_tests[t].file);
    }
  }
  if (ran == 0) {
    fprintf(stderr, "no test matched\n");
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed || ran == 0 ? 1 : 0;
}
