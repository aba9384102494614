/*
 * err.c - names and messages of the error table, and the per-thread detail.
 *
 * The detail is thread-local so that a deep parser can say exactly what was
 * wrong without every layer passing a buffer down; the reporter reads it
 * right after the failing call returns.
 */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char tl_detail[1024];
static _Thread_local int tl_code;

const char *err_name(int code) {
  switch (code) {
#define ERR_NAME(name, value, msg) case value: return #name;
    ERR_TABLE(ERR_NAME)
#undef ERR_NAME
  }
  return "ERR_UNKNOWN";
}

const char *err_message(int code) {
  switch (code) {
#define ERR_MSG(name, value, msg) case value: return msg;
    ERR_TABLE(ERR_MSG)
#undef ERR_MSG
  }
  return "unknown error";
}

int err_set(int code, const char *fmt, ...) {
  /* Formatted into a local buffer first: callers may pass err_detail()
   * itself as an argument ("prefix: %s"), which must not overlap the
   * destination of vsnprintf. */
  char tmp[sizeof tl_detail];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  memcpy(tl_detail, tmp, sizeof tl_detail);
  tl_code = code;
  return code;
}

const char *err_detail(void) {
  if (tl_detail[0] == '\0') return err_message(tl_code);
  return tl_detail;
}

int err_last(void) { return tl_code; }

void err_clear(void) {
  tl_detail[0] = '\0';
  tl_code = 0;
}
