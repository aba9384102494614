/*
 * log.c - formats one line into a stack buffer and writes it with a single
 * write(2), so lines from different threads never interleave.
 */
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"

static _Atomic int g_level = LOG_LEVEL_INFO;
static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR", "OFF"};

void log_set_level(enum log_level level) { atomic_store(&g_level, (int)level); }
enum log_level log_get_level(void) { return (enum log_level)atomic_load(&g_level); }

int log_level_parse(const char *s, enum log_level *out) {
  static const char *const names[] = {"debug", "info", "warn", "error", "off"};
  for (int i = 0; i < 5; i++) {
    if (strcasecmp(s, names[i]) == 0) {
      *out = (enum log_level)i;
      return 0;
    }
  }
  if (strcasecmp(s, "warning") == 0) { *out = LOG_LEVEL_WARN; return 0; }
  return ERR_INVALID;
}

void log_write(enum log_level level, const char *module, const char *fmt, ...) {
  if ((int)level < atomic_load(&g_level)) return;
  char line[4096];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: ", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                   level_names[level], module);
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;
}
