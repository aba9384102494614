/*
 * test_fuzz_replay.c - every fuzz harness of tests/fuzz/ runs on its whole
 * seed folder in the unit run. The harnesses are compiled into this binary
 * with FUZZ_REPLAY (tests/fuzz/fuzz.h), where FUZZ_TARGET registers them
 * here; the test feeds each file of tests/fuzz/seeds/<name>/ through the
 * harness's entry point, exactly as libFuzzer would, so a crash input kept
 * as a seed fails `make test` until its bug is fixed. It also fails when a
 * harness file is not registered or a seed folder has no harness.
 * FUZZ_REPLAY_TIMES=1 prints the time each input took.
 */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#include "test.h"

#define MAX_HARNESSES 64

static struct harness {
  const char *name, *file;
  int (*one)(const uint8_t *, size_t);
  void (*init)(void);
} g_h[MAX_HARNESSES];
static size_t g_n;

static struct harness *slot(const char *name) {
  for (size_t i = 0; i < g_n; i++)
    if (strcmp(g_h[i].name, name) == 0) return &g_h[i];
  if (g_n == MAX_HARNESSES) abort(); /* raise MAX_HARNESSES */
  g_h[g_n].name = name;
  return &g_h[g_n++];
}

void fuzz_replay_register(const char *name, const char *file, int (*one)(const uint8_t *, size_t));
void fuzz_replay_register_init(const char *name, void (*init)(void));
void fuzz_replay_register(const char *name, const char *file, int (*one)(const uint8_t *, size_t)) {
  struct harness *h = slot(name);
  h->file = file;
  h->one = one;
}
void fuzz_replay_register_init(const char *name, void (*init)(void)) { slot(name)->init = init; }

struct replay {
  struct harness *h;
  int n;
};

/* The input being replayed, named by the signal handler when a harness
 * aborts or crashes on it. */
static char g_current[512];

static void on_crash(int sig) {
  static const char pre[] = "fuzz_seeds_replay: crashed on ";
  ssize_t w = write(2, pre, sizeof pre - 1);
  w = write(2, g_current, strlen(g_current));
  w = write(2, "\n", 1);
  (void)w;
  signal(sig, SIG_DFL);
  raise(sig);
}

static void replay_file(const char *name, const char *path, const unsigned char *data, size_t n, void *ud) {
  (void)name;
  struct replay *r = ud;
  snprintf(g_current, sizeof g_current, "fuzz_%s < %s", r->h->name, path);
  /* a copy of exactly n bytes, so ASan sees a read past the input */
  uint8_t *copy = malloc(n ? n : 1);
  if (!copy) abort();
  memcpy(copy, data, n);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  r->h->one(copy, n);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (getenv("FUZZ_REPLAY_TIMES"))
    fprintf(stderr, "%8.3f s  %s\n", (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9, g_current);
  free(copy);
  r->n++;
}

static bool registered(const char *name) {
  for (size_t i = 0; i < g_n; i++)
    if (strcmp(g_h[i].name, name) == 0 && g_h[i].one) return true;
  return false;
}

TEST(fuzz_seeds_replay) {
  static const int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], on_crash);
  DIR *d = opendir("tests/fuzz");
  if (!d) TEST_SKIP("tests/fuzz not found (run from the repository root)");
  struct dirent *e;
  while ((e = readdir(d))) { /* every harness file registered itself */
    size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, "fuzz_", 5) != 0 || len < 8 || strcmp(e->d_name + len - 2, ".c") != 0) continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(len - 7), e->d_name + 5);
    if (!registered(name)) test_fail_at(__FILE__, __LINE__, "tests/fuzz/%s: no FUZZ_TARGET(%s)", e->d_name, name);
  }
  closedir(d);
  if ((d = opendir("tests/fuzz/seeds"))) { /* every seed folder has its harness */
    while ((e = readdir(d)))
      if (e->d_name[0] != '.' && !registered(e->d_name))
        test_fail_at(__FILE__, __LINE__, "tests/fuzz/seeds/%s: no harness of that name", e->d_name);
    closedir(d);
  }
  for (size_t i = 0; i < g_n; i++) {
    struct harness *h = &g_h[i];
    if (!h->one) continue;
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/seeds/%s", h->name);
    if (h->init) h->init();
    struct replay r = {h, 0};
    int n = test_each_file(dir, 16u << 20, replay_file, &r);
    if (n <= 0) test_fail_at(__FILE__, __LINE__, "%s: harness fuzz_%s has no seeds", dir, h->name);
  }
}
