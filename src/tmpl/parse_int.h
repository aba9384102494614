/*
 * parse_int.h - internals shared by the output parsers (parse_*.c): a
 * push-style JSON syntax checker that sees one byte at a time.
 *
 * jscan validates one JSON value (RFC 8259 syntax, depth at most
 * JSCAN_MAX_DEPTH) and reports, per byte, where values and object keys start
 * and end, so a caller can cut the raw text of one member out of a document
 * that arrives in pieces without ever buffering it.
 */
#ifndef PARLEY_TMPL_PARSE_INT_H
#define PARLEY_TMPL_PARSE_INT_H

#include <stdbool.h>
#include <stddef.h>

#define JSCAN_MAX_DEPTH 64

typedef struct jscan {
  int state;      /* J_* in parse_json.c */
  int num;        /* number sub-state */
  int depth;      /* open containers */
  char stack[JSCAN_MAX_DEPTH]; /* '{' or '[' per open container */
  bool key;       /* the string being read is an object key */
  const char *lit; /* "true"/"false"/"null" being matched */
  int lit_i;
  int u_left;     /* hex digits left in a \uXXXX escape */
  size_t off;     /* bytes consumed so far (for messages) */
  const char *why; /* reason of the error, static string */
} jscan;

/* Flags returned by jscan_byte for the byte it was given. */
enum {
  JF_ERR = 1 << 0,     /* not valid JSON here */
  JF_TOODEEP = 1 << 1, /* with JF_ERR: nesting deeper than JSCAN_MAX_DEPTH */
  JF_VSTART = 1 << 2,  /* this byte starts a value at depth *vdepth */
  JF_VEND = 1 << 3,    /* this byte ends a value at depth *vdepth (inclusive) */
  JF_NUMEND = 1 << 4,  /* a number at depth *ndepth ended just before this byte */
  JF_KSTART = 1 << 5,  /* opening quote of an object key at depth *vdepth */
  JF_KEND = 1 << 6,    /* closing quote of an object key at depth *vdepth */
  JF_STRBODY = 1 << 7, /* a byte inside a string or key (not its quotes) */
  JF_DONE = 1 << 8     /* the top-level value is complete with this byte */
};

void jscan_init(jscan *s);
/* Depth counts the containers around a value: the top-level value is at 0,
 * a member of the top-level object at 1. A top-level number ends at the
 * first byte that cannot continue it: that byte gets JF_NUMEND | JF_DONE and
 * is not consumed (the caller decides what it is). After JF_DONE only
 * whitespace is accepted. */
unsigned jscan_byte(jscan *s, unsigned char c, int *vdepth, int *ndepth);
/* True when the bytes so far form one complete value (a top-level number
 * counts once it has a valid last digit). */
bool jscan_complete(const jscan *s);
/* Short reason for the JF_ERR ("expected an object key"), static storage. */
const char *jscan_expected(const jscan *s);

/* Decodes the body of a JSON string (escapes included, quotes excluded) into
 * out (UTF-8, NUL-terminated); false when it does not fit in cap or is not a
 * valid escape sequence. */
bool json_unescape(const char *s, size_t n, char *out, size_t cap);

#endif
