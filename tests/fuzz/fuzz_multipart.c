/*
 * fuzz_multipart.c - libFuzzer harness for http/multipart.
 *
 * Input layout:
 *   byte 0, bit 7 set: the rest is a Content-Type value for
 *                      mp_boundary_from_content_type();
 *   otherwise          bits 0-2 = n, the number of chunk-length bytes that
 *                      follow (each 0..255; zero-length feeds included);
 *                      bit 6 picks the boundary ("fuzzb" or the 1-byte "X");
 *                      the rest is the body.
 *
 * The body is parsed twice, in one feed and in the chunks the input chose
 * (the remainder is the last chunk), and both runs must see exactly the same
 * callbacks, data, return code and error detail: chunking must never change
 * the result. Callback order (begin, data*, end) and "no empty data" are
 * checked too. Any difference aborts, which libFuzzer reports as a crash.
 */
#include "fuzz.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "http/multipart.h"

typedef struct fz_rec {
  buf log;
  int in_part;
} fz_rec;

static void fz_check(int cond, const char *what) {
  if (!cond) {
    fprintf(stderr, "fuzz_multipart: invariant broken: %s\n", what);
    abort();
  }
}

static void fz_add_str(buf *b, const char *s) {
  if (s) buf_append(b, s, strlen(s) + 1); /* with its NUL as separator */
  else buf_append(b, "\x01", 2);
}

static int fz_begin(void *ctx, const char *name, const char *filename, const char *ct) {
  fz_rec *r = ctx;
  fz_check(!r->in_part, "on_part_begin inside a part");
  fz_check(name != NULL, "on_part_begin without a name");
  r->in_part = 1;
  buf_append(&r->log, "B", 1);
  fz_add_str(&r->log, name);
  fz_add_str(&r->log, filename);
  fz_add_str(&r->log, ct);
  return 0;
}

static int fz_data(void *ctx, const char *d, size_t n) {
  fz_rec *r = ctx;
  fz_check(r->in_part, "on_part_data outside a part");
  fz_check(n > 0, "on_part_data with length 0");
  buf_append(&r->log, d, n);
  return 0;
}

static int fz_end(void *ctx) {
  fz_rec *r = ctx;
  fz_check(r->in_part, "on_part_end outside a part");
  r->in_part = 0;
  buf_append(&r->log, "\0E", 2);
  return 0;
}

static const mp_callbacks fz_cb = {fz_begin, fz_data, fz_end};

/* Parses body in the given chunks; returns the code, fills r and detail. */
static int fz_run(const char *boundary, const uint8_t *body, size_t len, const uint8_t *chunks, size_t n_chunks,
                  fz_rec *r, buf *detail) {
  mp_parser *p = NULL;
  int rc = mp_parser_new(boundary, &fz_cb, r, &p);
  fz_check(rc == 0, "mp_parser_new failed on a valid boundary");
  size_t pos = 0;
  for (size_t i = 0; i < n_chunks && rc == 0; i++) {
    size_t n = chunks[i];
    if (n > len - pos) n = len - pos;
    rc = mp_parser_feed(p, (const char *)body + pos, n);
    pos += n;
  }
  if (rc == 0) rc = mp_parser_feed(p, (const char *)body + pos, len - pos);
  if (rc == 0) rc = mp_parser_finish(p);
  if (rc == 0) fz_check(!r->in_part, "finish succeeded inside a part");
  fz_check(rc == 0 || rc == ERR_PARSE || rc == ERR_TOO_LARGE || rc == ERR_NOMEM, "unexpected error code");
  if (rc) buf_append_str(detail, err_detail());
  /* errors are sticky */
  if (rc) fz_check(mp_parser_feed(p, "x", 1) == rc && mp_parser_finish(p) == rc, "error not sticky");
  mp_parser_free(p);
  return rc;
}

static void fz_content_type(const uint8_t *data, size_t size) {
  char ct[4096];
  if (size >= sizeof ct) size = sizeof ct - 1;
  memcpy(ct, data, size);
  ct[size] = '\0';
  char out[MP_BOUNDARY_MAX + 1];
  int rc = mp_boundary_from_content_type(ct, out, sizeof out);
  if (rc == 0) {
    size_t n = strlen(out);
    fz_check(n >= 1 && n <= MP_BOUNDARY_MAX, "boundary length out of range");
    for (size_t i = 0; i < n; i++) fz_check(out[i] >= 0x20 && out[i] <= 0x7e, "boundary byte not printable");
    mp_parser *p = NULL;
    fz_check(mp_parser_new(out, NULL, NULL, &p) == 0, "extracted boundary refused by mp_parser_new");
    mp_parser_free(p);
  } else {
    fz_check(rc == ERR_PARSE, "content type error is not ERR_PARSE");
  }
}

FUZZ_TARGET(multipart) {
  if (size < 1) return 0;
  uint8_t mode = data[0];
  if (mode & 0x80) {
    fz_content_type(data + 1, size - 1);
    return 0;
  }
  size_t n_chunks = mode & 7;
  if (size < 1 + n_chunks) return 0;
  const char *boundary = (mode & 0x40) ? "X" : "fuzzb";
  const uint8_t *chunks = data + 1, *body = data + 1 + n_chunks;
  size_t len = size - 1 - n_chunks;

  fz_rec a = {BUF_INIT, 0}, b = {BUF_INIT, 0};
  buf da = BUF_INIT, db = BUF_INIT;
  int rca = fz_run(boundary, body, len, NULL, 0, &a, &da);
  int rcb = fz_run(boundary, body, len, chunks, n_chunks, &b, &db);
  if (rca != rcb || a.log.len != b.log.len || (a.log.len && memcmp(a.log.data, b.log.data, a.log.len) != 0) ||
      da.len != db.len || (da.len && memcmp(da.data, db.data, da.len) != 0)) {
    fprintf(stderr, "whole: rc %d, %zu log bytes, detail \"%s\"\nchunked: rc %d, %zu log bytes, detail \"%s\"\n", rca,
            a.log.len, da.data ? da.data : "", rcb, b.log.len, db.data ? db.data : "");
    fz_check(0, "chunked parse differs from whole parse");
  }
  buf_free(&a.log);
  buf_free(&b.log);
  buf_free(&da);
  buf_free(&db);
  return 0;
}
