/*
 * buf.h - a growable byte buffer, always NUL-terminated after len bytes.
 *
 * Owner frees with buf_free(). Appends return 0 or ERR_NOMEM / ERR_TOO_LARGE
 * and leave the buffer unchanged on failure, so a caller can report and go on.
 */
#ifndef PARLEY_BASE_BUF_H
#define PARLEY_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct buf {
  char *data;  /* NULL until the first append; data[len] == '\0' after that */
  size_t len;  /* bytes used */
  size_t cap;  /* bytes allocated (including the terminator slot) */
} buf;

#define BUF_INIT {NULL, 0, 0}

int buf_reserve(buf *b, size_t extra);
int buf_append(buf *b, const void *data, size_t n);
int buf_append_str(buf *b, const char *s);
int buf_append_byte(buf *b, char c);
int buf_appendf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vappendf(buf *b, const char *fmt, va_list ap);
void buf_reset(buf *b); /* len = 0, keeps the allocation */
void buf_free(buf *b);
/* Hands the data to the caller (who frees it) and leaves b empty. Never NULL
 * on success: an empty buffer gives an allocated "". */
char *buf_detach(buf *b, size_t *len_out);

#endif
