/*
 * util.c - clocks, random ids, constant-time compare, string helpers.
 */
#include "base/util.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"

uint64_t time_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t time_wall_s(void) { return (int64_t)time(NULL); }

int64_t time_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rand_bytes(void *out, size_t n) {
  unsigned char *p = out;
  while (n > 0) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return err_set(ERR_IO, "getrandom failed: %s", strerror(errno));
    }
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

int id_make(char *out, size_t cap, const char *prefix, size_t n_bytes) {
  static const char hex[] = "0123456789abcdef";
  size_t plen = strlen(prefix);
  if (n_bytes > 64 || cap < plen + 2 * n_bytes + 1) return ERR_TOO_LARGE;
  unsigned char raw[64];
  int rc = rand_bytes(raw, n_bytes);
  if (rc) return rc;
  memcpy(out, prefix, plen);
  for (size_t i = 0; i < n_bytes; i++) {
    out[plen + 2 * i] = hex[raw[i] >> 4];
    out[plen + 2 * i + 1] = hex[raw[i] & 15];
  }
  out[plen + 2 * n_bytes] = '\0';
  return 0;
}

int id_uuid(char *out, size_t cap) {
  static const char hex[] = "0123456789abcdef";
  if (cap < 37) return ERR_TOO_LARGE;
  unsigned char r[16];
  int rc = rand_bytes(r, sizeof r);
  if (rc) return rc;
  r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
  r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
  size_t o = 0;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
    out[o++] = hex[r[i] >> 4];
    out[o++] = hex[r[i] & 15];
  }
  out[o] = '\0';
  return 0;
}

bool ct_equal(const void *a, size_t alen, const void *b, size_t blen) {
  const unsigned char *x = a, *y = b;
  /* Compare over max length so timing does not reveal a common prefix. */
  size_t n = alen > blen ? alen : blen;
  unsigned diff = (unsigned)(alen ^ blen);
  for (size_t i = 0; i < n; i++) {
    unsigned char cx = i < alen ? x[i] : 0;
    unsigned char cy = i < blen ? y[i] : 0;
    diff |= (unsigned)(cx ^ cy);
  }
  return diff == 0;
}

char *str_dup(const char *s) { return s ? strdup(s) : NULL; }

char *str_ndup(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

bool str_starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

bool str_ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

void malloc_bound_arenas(int n) {
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
  if (!getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, n);
#else
  (void)n;
#endif
}

void malloc_stats_read(malloc_stats_bytes *out) {
  *out = (malloc_stats_bytes){0};
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  *out = (malloc_stats_bytes){.in_use = mi.uordblks + mi.hblkhd, .free = mi.fordblks, .arena = mi.arena,
                              .mmapped = mi.hblkhd};
#endif
}

#if defined(__GLIBC__)
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  pthread_t thread;
  bool running, stopping;
  int period_ms;
} g_trim = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *trimmer_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_trim.mu);
  while (!g_trim.stopping) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = ts.tv_nsec + (long long)g_trim.period_ms * 1000000LL;
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    while (!g_trim.stopping && pthread_cond_timedwait(&g_trim.cv, &g_trim.mu, &ts) != ETIMEDOUT) {
    }
    if (g_trim.stopping) break;
    pthread_mutex_unlock(&g_trim.mu);
    malloc_trim(0);
    pthread_mutex_lock(&g_trim.mu);
  }
  pthread_mutex_unlock(&g_trim.mu);
  return NULL;
}

int malloc_trimmer_start(int period_ms) {
  pthread_mutex_lock(&g_trim.mu);
  int rc = 0;
  if (!g_trim.running) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&g_trim.cv, &a);
    pthread_condattr_destroy(&a);
    g_trim.period_ms = period_ms > 0 ? period_ms : 1;
    g_trim.stopping = false;
    if (pthread_create(&g_trim.thread, NULL, trimmer_main, NULL) == 0) {
      g_trim.running = true;
    } else {
      pthread_cond_destroy(&g_trim.cv);
      rc = err_set(ERR_INTERNAL, "cannot start the malloc trimmer thread");
    }
  }
  pthread_mutex_unlock(&g_trim.mu);
  return rc;
}

void malloc_trimmer_stop(void) {
  pthread_mutex_lock(&g_trim.mu);
  bool was = g_trim.running;
  g_trim.stopping = true;
  if (was) pthread_cond_signal(&g_trim.cv);
  pthread_mutex_unlock(&g_trim.mu);
  if (!was) return;
  pthread_join(g_trim.thread, NULL);
  pthread_mutex_lock(&g_trim.mu);
  g_trim.running = false;
  pthread_cond_destroy(&g_trim.cv);
  pthread_mutex_unlock(&g_trim.mu);
}
#else
int malloc_trimmer_start(int period_ms) {
  (void)period_ms;
  return 0;
}
void malloc_trimmer_stop(void) {}
#endif

size_t utf8_seq_len(const char *s, size_t n) {
  const uint8_t *u = (const uint8_t *)s;
  if (n == 0) return 0;
  if (u[0] < 0x80) return 1;
  size_t len = u[0] >= 0xF0 ? 4 : u[0] >= 0xE0 ? 3 : u[0] >= 0xC0 ? 2 : 0;
  if (!len || u[0] > 0xF4 || u[0] == 0xC0 || u[0] == 0xC1 || len > n) return 0;
  uint32_t cp = u[0] & (0x7F >> len);
  for (size_t i = 1; i < len; i++) {
    if ((u[i] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (u[i] & 0x3F);
  }
  static const uint32_t MIN[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < MIN[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

bool utf8_valid(const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    size_t k = utf8_seq_len(s + i, n - i);
    if (!k) return false;
    i += k;
  }
  return true;
}

char *str_utf8_lossy(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s), cap;
  if (!size_mul(n, 3, &cap) || !size_add(cap, 1, &cap)) return NULL; /* each byte may become 3 */
  char *out = malloc(cap);
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t k = utf8_seq_len(s + i, n - i);
    if (k) {
      memcpy(out + o, s + i, k);
      o += k;
      i += k;
    } else {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      i++;
    }
  }
  out[o] = '\0';
  return out;
}

int file_map_ro(const char *path, const char *who, const char *kind, size_t min_size, const void **base, size_t *size) {
  *base = NULL;
  *size = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err_set(ERR_IO, "%s: cannot open '%s': %s", who, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return err_set(ERR_IO, "%s: cannot stat '%s': %s", who, path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return err_set(ERR_IO, "%s: '%s' is not a regular file", who, path);
  }
  /* mmap of 0 bytes fails, so min_size also guards that */
  if ((uint64_t)st.st_size < (uint64_t)(min_size ? min_size : 1)) {
    close(fd);
    return err_set(ERR_PARSE, "%s: '%s' is not a %s (%lld bytes)", who, path, kind, (long long)st.st_size);
  }
  void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  close(fd);
  if (map == MAP_FAILED) return err_set(ERR_IO, "%s: cannot map '%s': %s", who, path, strerror(e));
  *base = map;
  *size = (size_t)st.st_size;
  return 0;
}
