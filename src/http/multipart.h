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

/* Limits (RFC 2046 caps a boundary at 70 characters). */
#define MP_BOUNDARY_MAX 70       /* bytes of boundary, without the leading "--" */
#define MP_HEADER_MAX 16384      /* bytes of one part's header block -> ERR_TOO_LARGE */
#define MP_PARTS_MAX 1000        /* parts per body -> ERR_TOO_LARGE on the 1001st */
#define MP_PREAMBLE_MAX 16384    /* bytes before the first boundary -> ERR_PARSE */

typedef struct mp_parser mp_parser;

/* Callbacks run on the thread that calls mp_parser_feed/finish. Any of them
 * may be NULL. The strings passed to on_part_begin and the bytes passed to
 * on_part_data are owned by the parser (or the caller's chunk) and are valid
 * only during the call: copy what you keep. on_part_data never gets len 0.
 * A non-zero return stops the parser: feed/finish return that value, and so
 * does every later call. */
typedef struct mp_callbacks {
  /* A part begins. name/filename/content_type come from its headers
   * (filename and content_type may be NULL). Return 0 or an ERR_* to stop. */
  int (*on_part_begin)(void *ctx, const char *name, const char *filename, const char *content_type);
  int (*on_part_data)(void *ctx, const char *data, size_t len);
  int (*on_part_end)(void *ctx);
} mp_callbacks;

/* Extracts the boundary from a Content-Type header value
 * (multipart/form-data; boundary=...; quoted or not) into out. The media type
 * must be multipart/<any>; the parameter name is case-insensitive; other
 * parameters are ignored. ERR_PARSE when the boundary is missing, empty,
 * longer than MP_BOUNDARY_MAX or holds control/non-ASCII bytes; ERR_INVALID
 * when cap is too small (MP_BOUNDARY_MAX + 1 is always enough). */
int mp_boundary_from_content_type(const char *content_type, char *out, size_t cap);
/* boundary is the bare value (no "--"), 1..MP_BOUNDARY_MAX bytes; cb is
 * copied. ERR_INVALID for a bad boundary, ERR_NOMEM. */
int mp_parser_new(const char *boundary, const mp_callbacks *cb, void *ctx, mp_parser **out);
/* Consumes len bytes (any split). 0, ERR_PARSE / ERR_TOO_LARGE / ERR_NOMEM
 * (with err_set detail), or a callback's non-zero return. Errors are sticky. */
int mp_parser_feed(mp_parser *p, const char *data, size_t len);
/* The body ended: ERR_PARSE unless the closing boundary was seen. */
int mp_parser_finish(mp_parser *p);
void mp_parser_free(mp_parser *p); /* NULL is fine */

#endif
