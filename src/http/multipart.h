/*
 * multipart.h - a streaming multipart/form-data parser (RFC 7578).
 *
 * Bytes are fed in chunks of any size (a chunk may end anywhere, even inside
 * the boundary); the parser calls back with each part's headers, then its
 * data in pieces, then its end. It never holds a whole part in memory, so a
 * 500 MiB upload costs a few KiB here. Limits: header block per part 16 KiB,
 * 1,000 parts. Errors (missing boundary, truncated body, bad part headers,
 * a limit crossed) are reported with err_set() detail and ERR_PARSE /
 * ERR_TOO_LARGE, never by asserting.
 */
#ifndef PARLEY_HTTP_MULTIPART_H
#define PARLEY_HTTP_MULTIPART_H

#include <stddef.h>

typedef struct mp_parser mp_parser;

typedef struct mp_callbacks {
  /* A part begins. name/filename/content_type come from its headers
   * (filename and content_type may be NULL). Return 0 or an ERR_* to stop. */
  int (*on_part_begin)(void *ctx, const char *name, const char *filename, const char *content_type);
  int (*on_part_data)(void *ctx, const char *data, size_t len);
  int (*on_part_end)(void *ctx);
} mp_callbacks;

/* Extracts the boundary from a Content-Type header value
 * (multipart/form-data; boundary=...; quoted or not) into out. */
int mp_boundary_from_content_type(const char *content_type, char *out, size_t cap);
int mp_parser_new(const char *boundary, const mp_callbacks *cb, void *ctx, mp_parser **out);
int mp_parser_feed(mp_parser *p, const char *data, size_t len);
/* The body ended: ERR_PARSE unless the closing boundary was seen. */
int mp_parser_finish(mp_parser *p);
void mp_parser_free(mp_parser *p);

#endif
