/*
 * buf.c - growable byte buffer. Growth doubles capacity; sizes are checked
 * for overflow before every allocation.
 */
#include "base/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

int buf_reserve(buf *b, size_t extra) {
  if (extra > SIZE_MAX - b->len - 1) return ERR_TOO_LARGE;
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) {
    if (cap > SIZE_MAX / 2) { cap = need; break; }
    cap *= 2;
  }
  char *p = realloc(b->data, cap);
  if (!p) return ERR_NOMEM;
  b->data = p;
  b->cap = cap;
  return 0;
}

int buf_append(buf *b, const void *data, size_t n) {
  int rc = buf_reserve(b, n);
  if (rc) return rc;
  if (n) memcpy(b->data + b->len, data, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int buf_append_str(buf *b, const char *s) { return buf_append(b, s, strlen(s)); }

int buf_append_byte(buf *b, char c) { return buf_append(b, &c, 1); }

int buf_vappendf(buf *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return ERR_INVALID;
  int rc = buf_reserve(b, (size_t)n);
  if (rc) return rc;
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
  return 0;
}

int buf_appendf(buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = buf_vappendf(b, fmt, ap);
  va_end(ap);
  return rc;
}

void buf_reset(buf *b) {
  b->len = 0;
  if (b->data) b->data[0] = '\0';
}

void buf_free(buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

char *buf_detach(buf *b, size_t *len_out) {
  if (!b->data && buf_reserve(b, 0)) return NULL;
  if (b->len == 0) b->data[0] = '\0';
  char *p = b->data;
  if (len_out) *len_out = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return p;
}
