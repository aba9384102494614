/*
 * multipart.c - streaming multipart/form-data parser (RFC 7578 on RFC 2046).
 *
 * What: the body of an upload (OpenAI audio/files, Deepgram, browsers) is fed
 * in chunks of any size; the parser reports each part's headers, its data in
 * pieces, and its end, through the callbacks of multipart.h.
 *
 * Why this shape: uploads can be hundreds of MiB, so part data is never
 * buffered. Data is scanned with memmem() for the delimiter "\n--boundary";
 * the only bytes held back between feed() calls are the last K = boundary
 * length + 4 bytes (the tail), enough to see a delimiter that starts in one
 * chunk and ends in the next, plus the CR that precedes it.
 *
 * States (enum mp_state), in body order:
 *   PREAMBLE      scanning for the first "--boundary" at the start of a line;
 *                 the bytes before it are dropped (at most MP_PREAMBLE_MAX)
 *   BOUNDARY_END  just after a "--boundary": "--" closes the body, else
 *                 optional spaces/tabs then CRLF (or bare LF) start a part
 *   HEADERS       header lines collected in hdr (at most MP_HEADER_MAX bytes)
 *                 until the blank line; then parsed, on_part_begin called
 *   DATA          part data; the delimiter is "\r\n--boundary" (a bare
 *                 "\n--boundary" is accepted too) and ends the part
 *   EPILOGUE      after the closing "--boundary--": everything is ignored
 *
 * Strictness: a "--boundary" at a line start followed by anything but "--",
 * padding or a line end is an error, in the preamble and in data alike
 * (RFC 2046 forbids the boundary inside the body; Go's mime/multipart treats
 * such a line as data instead, which would cost holding the needle back one
 * more byte). Header lines with control bytes, folded lines, and lines
 * without ':' are errors too; unknown headers and parameters are ignored.
 *
 * Invariants:
 *   - tail_len <= K (= nlen + 1) and the tail never contains a whole needle;
 *     in PREAMBLE it starts as a virtual "\n" so a body that begins with
 *     "--boundary" matches the same needle as later delimiters.
 *   - Once any call fails, err holds the code and every later call returns it.
 *   - Bytes passed to on_part_data are never the delimiter or the CR/LF that
 *     belongs to it; a byte is passed only once it cannot start a delimiter.
 *
 * Start reading at mp_parser_feed(), then mp_scan() (data and preamble),
 * mp_headers_step() and mp_headers_parse() (part headers).
 */
#include "http/multipart.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/err.h"

#define MP_NONE SIZE_MAX      /* offset of an absent value in vals */
#define MP_NEEDLE_MAX (MP_BOUNDARY_MAX + 3)  /* "\n--" + boundary */
#define MP_TAIL_MAX (MP_NEEDLE_MAX + 1)

enum mp_state {
  MP_STATE_PREAMBLE,
  MP_STATE_BOUNDARY_END,
  MP_STATE_HEADERS,
  MP_STATE_DATA,
  MP_STATE_EPILOGUE,
};

/* Sub-state of MP_STATE_BOUNDARY_END. */
enum mp_after {
  MP_AFTER_START,   /* nothing seen after "--boundary" */
  MP_AFTER_DASH,    /* one '-' seen: the next must be '-' (close) */
  MP_AFTER_PAD,     /* spaces/tabs seen (transport padding) */
  MP_AFTER_CR,      /* CR seen: the next must be LF */
};

struct mp_parser {
  mp_callbacks cb;
  void *ctx;
  char boundary[MP_BOUNDARY_MAX + 1];
  char needle[MP_NEEDLE_MAX];  /* "\n--" + boundary, not NUL-terminated */
  size_t nlen;                 /* bytes of needle */
  char tail[MP_TAIL_MAX];      /* held-back bytes, see the invariants above */
  size_t tail_len;
  enum mp_state state;
  enum mp_after after;
  int err;                     /* sticky: first failure, or 0 */
  int n_parts;                 /* parts begun so far (the current one included) */
  size_t preamble_len;         /* bytes dropped before the first boundary */
  size_t pad_len;              /* padding bytes after the current boundary */
  buf hdr;                     /* the current part's raw header block */
  size_t line_start;           /* offset in hdr of the line being collected */
  buf vals;                    /* decoded values, each NUL-terminated */
  size_t name_off, fn_off, ct_off; /* offsets into vals, or MP_NONE */
};

/* ---- small string helpers ---------------------------------------------- */

static bool mp_is_ws(char c) { return c == ' ' || c == '\t'; }

static const char *mp_skip_ws(const char *s, const char *end) {
  while (s < end && mp_is_ws(*s)) s++;
  return s;
}

static const char *mp_trim_end(const char *s, const char *end) {
  while (end > s && mp_is_ws(end[-1])) end--;
  return end;
}

/* Case-insensitive comparison of s[0..n) with the NUL-terminated word. */
static bool mp_ieq(const char *s, size_t n, const char *word) {
  return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

static int mp_hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* One header parameter: name[=value]; value points inside the quotes when
 * quoted (escapes not yet removed), or is NULL when there was no '='. */
typedef struct mp_param {
  const char *name;
  size_t name_len;
  const char *val;
  size_t val_len;
  bool quoted;
} mp_param;

/* Reads the next "; name=value" from *pp (which points at ';', whitespace or
 * end). Returns 1 with *out filled, 0 at the end, ERR_PARSE on bad syntax
 * (unterminated quote, junk after a quoted value, empty name); the caller
 * adds the detail. Empty parameters (";;") are skipped. */
static int mp_param_next(const char **pp, const char *end, mp_param *out) {
  const char *s = *pp;
  for (;;) {
    s = mp_skip_ws(s, end);
    if (s == end) { *pp = s; return 0; }
    if (*s != ';') return ERR_PARSE;
    s = mp_skip_ws(s + 1, end);
    if (s == end) { *pp = s; return 0; }
    if (*s != ';') break;
  }
  const char *n = s;
  while (s < end && *s != '=' && *s != ';' && !mp_is_ws(*s)) s++;
  if (s == n) return ERR_PARSE;
  out->name = n;
  out->name_len = (size_t)(s - n);
  out->val = NULL;
  out->val_len = 0;
  out->quoted = false;
  s = mp_skip_ws(s, end);
  if (s == end || *s == ';') { *pp = s; return 1; }
  if (*s != '=') return ERR_PARSE;
  s = mp_skip_ws(s + 1, end);
  if (s < end && *s == '"') {
    const char *v = ++s;
    while (s < end && *s != '"') {
      if (*s == '\\' && s + 1 < end) s++;
      s++;
    }
    if (s >= end) return ERR_PARSE;
    out->val = v;
    out->val_len = (size_t)(s - v);
    out->quoted = true;
    s = mp_skip_ws(s + 1, end);
    if (s < end && *s != ';') return ERR_PARSE;
  } else {
    const char *v = s;
    while (s < end && *s != ';') s++;
    out->val = v;
    out->val_len = (size_t)(mp_trim_end(v, s) - v);
  }
  *pp = s;
  return 1;
}

/* Removes quoted-string escapes ("\x" -> "x") from s[0..n) into dst (which
 * may be NULL to only count). Returns the decoded length (<= n). */
static size_t mp_unescape(const char *s, size_t n, char *dst) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\' && i + 1 < n) i++;
    if (dst) dst[o] = s[i];
    o++;
  }
  return o;
}

/* ---- Content-Type boundary -------------------------------------------- */

int mp_boundary_from_content_type(const char *content_type, char *out, size_t cap) {
  if (!content_type) return err_set(ERR_PARSE, "multipart: no Content-Type header");
  const char *s = content_type, *end = s + strlen(s);
  s = mp_skip_ws(s, end);
  const char *semi = memchr(s, ';', (size_t)(end - s));
  const char *type_end = mp_trim_end(s, semi ? semi : end);
  size_t type_len = (size_t)(type_end - s);
  if (type_len <= 10 || strncasecmp(s, "multipart/", 10) != 0)
    return err_set(ERR_PARSE, "multipart: Content-Type \"%.*s\" is not multipart/*",
                   (int)(type_len > 100 ? 100 : type_len), s);
  const char *pp = type_end;
  mp_param prm;
  int rc;
  while ((rc = mp_param_next(&pp, end, &prm)) == 1) {
    if (!mp_ieq(prm.name, prm.name_len, "boundary")) continue;
    if (!prm.val) return err_set(ERR_PARSE, "multipart: Content-Type boundary parameter has no value");
    size_t n = prm.quoted ? mp_unescape(prm.val, prm.val_len, NULL) : prm.val_len;
    if (n == 0) return err_set(ERR_PARSE, "multipart: Content-Type boundary is empty");
    if (n > MP_BOUNDARY_MAX)
      return err_set(ERR_PARSE, "multipart: Content-Type boundary is %zu characters, at most %d allowed",
                     n, MP_BOUNDARY_MAX);
    char tmp[MP_BOUNDARY_MAX + 1];
    if (prm.quoted) mp_unescape(prm.val, prm.val_len, tmp);
    else memcpy(tmp, prm.val, n);
    tmp[n] = '\0';
    for (size_t i = 0; i < n; i++) {
      unsigned char c = (unsigned char)tmp[i];
      if (c < 0x20 || c > 0x7e)
        return err_set(ERR_PARSE, "multipart: Content-Type boundary has byte 0x%02x at %zu (RFC 2046 allows printable ASCII)",
                       c, i);
    }
    if (tmp[n - 1] == ' ') return err_set(ERR_PARSE, "multipart: Content-Type boundary ends with a space");
    if (cap < n + 1) return err_set(ERR_INVALID, "multipart: boundary needs %zu bytes, buffer holds %zu", n + 1, cap);
    memcpy(out, tmp, n + 1);
    return 0;
  }
  if (rc < 0)
    return err_set(ERR_PARSE, "multipart: Content-Type \"%.100s\" has malformed parameters", content_type);
  return err_set(ERR_PARSE, "multipart: Content-Type \"%.100s\" has no boundary parameter", content_type);
}

/* ---- parser lifetime --------------------------------------------------- */

int mp_parser_new(const char *boundary, const mp_callbacks *cb, void *ctx, mp_parser **out) {
  *out = NULL;
  size_t blen = boundary ? strlen(boundary) : 0;
  if (blen == 0 || blen > MP_BOUNDARY_MAX)
    return err_set(ERR_INVALID, "multipart: boundary must be 1..%d bytes, got %zu", MP_BOUNDARY_MAX, blen);
  for (size_t i = 0; i < blen; i++)
    if ((unsigned char)boundary[i] < 0x20 || (unsigned char)boundary[i] > 0x7e)
      return err_set(ERR_INVALID, "multipart: boundary has byte 0x%02x at %zu",
                     (unsigned char)boundary[i], i);
  mp_parser *p = calloc(1, sizeof *p);
  if (!p) return err_set(ERR_NOMEM, "multipart: out of memory for the parser");
  if (cb) p->cb = *cb;
  p->ctx = ctx;
  memcpy(p->boundary, boundary, blen + 1);
  memcpy(p->needle, "\n--", 3);
  memcpy(p->needle + 3, boundary, blen);
  p->nlen = blen + 3;
  p->tail[0] = '\n'; /* virtual line start before the body, see invariants */
  p->tail_len = 1;
  p->state = MP_STATE_PREAMBLE;
  p->name_off = p->fn_off = p->ct_off = MP_NONE;
  *out = p;
  return 0;
}

void mp_parser_free(mp_parser *p) {
  if (!p) return;
  buf_free(&p->hdr);
  buf_free(&p->vals);
  free(p);
}

static const char *mp_val(const mp_parser *p, size_t off) {
  return off == MP_NONE ? NULL : p->vals.data + off;
}

/* ---- data and preamble: delimiter scan --------------------------------- */

/* Passes n bytes on: to on_part_data in DATA, dropped (and counted) in the
 * preamble. */
static int mp_emit(mp_parser *p, const char *s, size_t n) {
  if (n == 0) return 0;
  if (p->state == MP_STATE_DATA) return p->cb.on_part_data ? p->cb.on_part_data(p->ctx, s, n) : 0;
  p->preamble_len += n;
  if (p->preamble_len > MP_PREAMBLE_MAX)
    return err_set(ERR_PARSE, "multipart: no boundary \"--%s\" in the first %d bytes of the body",
                   p->boundary, MP_PREAMBLE_MAX);
  return 0;
}

/* Scans tail ++ data[0..len) for the needle. Emits every byte that cannot
 * belong to a delimiter, keeps up to K bytes in the tail, and sets *used to
 * the bytes of data consumed (through the end of the needle when *found). */
static int mp_scan(mp_parser *p, const char *data, size_t len, size_t *used, bool *found) {
  const size_t nlen = p->nlen, k = nlen + 1;
  int rc;
  *found = false;
  if (p->tail_len) {
    /* A delimiter that starts in the tail ends within nlen - 1 bytes of data. */
    char w[MP_TAIL_MAX + MP_NEEDLE_MAX];
    size_t extra = len < nlen - 1 ? len : nlen - 1;
    memcpy(w, p->tail, p->tail_len);
    memcpy(w + p->tail_len, data, extra);
    const char *m = memmem(w, p->tail_len + extra, p->needle, nlen);
    if (m) {
      size_t at = (size_t)(m - w), end = at;
      if (end > 0 && w[end - 1] == '\r') end--;
      *used = at + nlen - p->tail_len;
      p->tail_len = 0;
      *found = true;
      return mp_emit(p, w, end);
    }
  }
  const char *m = len >= nlen ? memmem(data, len, p->needle, nlen) : NULL;
  if (m) {
    size_t at = (size_t)(m - data), end = at, tkeep = p->tail_len;
    if (at == 0 && tkeep && p->tail[tkeep - 1] == '\r') tkeep--;
    if (end > 0 && data[end - 1] == '\r') end--;
    p->tail_len = 0;
    *used = at + nlen;
    *found = true;
    if ((rc = mp_emit(p, p->tail, tkeep))) return rc;
    return mp_emit(p, data, end);
  }
  *used = len;
  size_t total = p->tail_len + len;
  if (total <= k) {
    memcpy(p->tail + p->tail_len, data, len);
    p->tail_len = total;
    return 0;
  }
  size_t n_emit = total - k;
  size_t from_tail = n_emit < p->tail_len ? n_emit : p->tail_len;
  if ((rc = mp_emit(p, p->tail, from_tail))) return rc;
  if ((rc = mp_emit(p, data, n_emit - from_tail))) return rc;
  if (len >= k) {
    memcpy(p->tail, data + len - k, k);
  } else {
    size_t keep = k - len;
    memmove(p->tail, p->tail + p->tail_len - keep, keep);
    memcpy(p->tail + keep, data, len);
  }
  p->tail_len = k;
  return 0;
}

/* A delimiter "--boundary" was consumed: the current part (if any) ends. */
static int mp_delimiter_found(mp_parser *p) {
  bool in_part = p->state == MP_STATE_DATA;
  p->state = MP_STATE_BOUNDARY_END;
  p->after = MP_AFTER_START;
  p->pad_len = 0;
  if (in_part && p->cb.on_part_end) return p->cb.on_part_end(p->ctx);
  return 0;
}

/* ---- after a boundary: close, or padding and line end ------------------ */

static int mp_part_start(mp_parser *p) {
  if (p->n_parts >= MP_PARTS_MAX)
    return err_set(ERR_TOO_LARGE, "multipart: more than %d parts", MP_PARTS_MAX);
  p->n_parts++;
  p->state = MP_STATE_HEADERS;
  buf_reset(&p->hdr);
  p->line_start = 0;
  return 0;
}

static int mp_boundary_end(mp_parser *p, const char *data, size_t len, size_t *used) {
  for (size_t i = 0; i < len; i++) {
    char c = data[i];
    *used = i + 1;
    switch (p->after) {
      case MP_AFTER_DASH:
        if (c != '-') break;
        p->state = MP_STATE_EPILOGUE;
        return 0;
      case MP_AFTER_CR:
        if (c != '\n') break;
        return mp_part_start(p);
      case MP_AFTER_START:
        if (c == '-') { p->after = MP_AFTER_DASH; continue; }
        /* fallthrough */
      case MP_AFTER_PAD:
        if (c == '\n') return mp_part_start(p);
        if (c == '\r') { p->after = MP_AFTER_CR; continue; }
        if (mp_is_ws(c)) {
          p->after = MP_AFTER_PAD;
          if (++p->pad_len > MP_HEADER_MAX)
            return err_set(ERR_TOO_LARGE, "multipart: more than %d padding bytes after boundary %d",
                           MP_HEADER_MAX, p->n_parts + 1);
          continue;
        }
        break;
    }
    return err_set(ERR_PARSE, "multipart: boundary %d (\"--%s\") is followed by byte 0x%02x, expected CRLF or \"--\"",
                   p->n_parts + 1, p->boundary, (unsigned char)c);
  }
  return 0;
}

/* ---- part headers ------------------------------------------------------ */

/* Appends s[0..n) (quoted-string escapes removed when quoted) and a NUL to
 * vals; *off receives its offset. */
static int mp_val_add(mp_parser *p, const char *s, size_t n, bool quoted, size_t *off) {
  if (buf_reserve(&p->vals, n + 1)) return err_set(ERR_NOMEM, "multipart: out of memory for part headers");
  char *dst = p->vals.data + p->vals.len;
  size_t o = quoted ? mp_unescape(s, n, dst) : (memcpy(dst, s, n), n);
  dst[o] = '\0';
  *off = p->vals.len;
  p->vals.len += o + 1;
  return 0;
}

/* Decodes an RFC 8187 ext-value (charset'language'pct-encoded) into vals as
 * UTF-8. Charsets: UTF-8 (kept as is) and ISO-8859-1 (converted). */
static int mp_ext_value_add(mp_parser *p, const char *s, size_t n, size_t *off) {
  const char *end = s + n;
  const char *q1 = memchr(s, '\'', n);
  const char *q2 = q1 ? memchr(q1 + 1, '\'', (size_t)(end - q1 - 1)) : NULL;
  if (!q2)
    return err_set(ERR_PARSE, "multipart: part %d filename* is not of the form charset'language'value", p->n_parts);
  bool latin1;
  if (mp_ieq(s, (size_t)(q1 - s), "utf-8")) latin1 = false;
  else if (mp_ieq(s, (size_t)(q1 - s), "iso-8859-1")) latin1 = true;
  else
    return err_set(ERR_PARSE, "multipart: part %d filename* charset \"%.*s\" is not UTF-8 or ISO-8859-1",
                   p->n_parts, (int)(q1 - s > 40 ? 40 : q1 - s), s);
  const char *v = q2 + 1;
  size_t vn = (size_t)(end - v);
  if (buf_reserve(&p->vals, 2 * vn + 1)) return err_set(ERR_NOMEM, "multipart: out of memory for part headers");
  char *dst = p->vals.data + p->vals.len;
  size_t o = 0;
  for (size_t i = 0; i < vn; i++) {
    unsigned char c = (unsigned char)v[i];
    if (c == '%') {
      int hi = i + 2 < vn ? mp_hex(v[i + 1]) : -1, lo = i + 2 < vn ? mp_hex(v[i + 2]) : -1;
      if (hi < 0 || lo < 0)
        return err_set(ERR_PARSE, "multipart: part %d filename* has a bad percent escape at %zu", p->n_parts, i);
      c = (unsigned char)(hi * 16 + lo);
      i += 2;
    }
    if (c < 0x20 || c == 0x7f)
      return err_set(ERR_PARSE, "multipart: part %d filename* decodes to control byte 0x%02x", p->n_parts, c);
    if (latin1 && c >= 0x80) {
      dst[o++] = (char)(0xc0 | (c >> 6));
      dst[o++] = (char)(0x80 | (c & 0x3f));
    } else {
      dst[o++] = (char)c;
    }
  }
  dst[o] = '\0';
  *off = p->vals.len;
  p->vals.len += o + 1;
  return 0;
}

/* Content-Disposition: form-data; name="..."; filename="..."; filename*=... */
static int mp_disposition_parse(mp_parser *p, const char *s, const char *end) {
  const char *semi = memchr(s, ';', (size_t)(end - s));
  const char *type_end = mp_trim_end(s, semi ? semi : end);
  if (!mp_ieq(s, (size_t)(type_end - s), "form-data"))
    return err_set(ERR_PARSE, "multipart: part %d Content-Disposition is \"%.*s\", expected form-data",
                   p->n_parts, (int)(type_end - s > 60 ? 60 : type_end - s), s);
  size_t fnstar_off = MP_NONE;
  const char *pp = type_end;
  mp_param prm;
  int rc;
  while ((rc = mp_param_next(&pp, end, &prm)) == 1) {
    if (!prm.val) continue;
    if (mp_ieq(prm.name, prm.name_len, "name")) {
      if (p->name_off == MP_NONE && (rc = mp_val_add(p, prm.val, prm.val_len, prm.quoted, &p->name_off))) return rc;
    } else if (mp_ieq(prm.name, prm.name_len, "filename")) {
      if (p->fn_off == MP_NONE && (rc = mp_val_add(p, prm.val, prm.val_len, prm.quoted, &p->fn_off))) return rc;
    } else if (mp_ieq(prm.name, prm.name_len, "filename*")) {
      if (fnstar_off == MP_NONE && (rc = mp_ext_value_add(p, prm.val, prm.val_len, &fnstar_off))) return rc;
    }
  }
  if (rc < 0)
    return err_set(ERR_PARSE, "multipart: part %d Content-Disposition has malformed parameters at column %zu",
                   p->n_parts, (size_t)(pp - s) + 1);
  if (fnstar_off != MP_NONE) p->fn_off = fnstar_off; /* RFC 6266: filename* wins */
  return 0;
}

/* Parses the complete header block hdr[0..block_len) (each line ends in LF). */
static int mp_headers_parse(mp_parser *p, size_t block_len) {
  const char *s = p->hdr.data, *end = s + block_len;
  bool seen_cd = false, seen_ct = false;
  int rc;
  buf_reset(&p->vals);
  p->name_off = p->fn_off = p->ct_off = MP_NONE;
  for (int line_no = 1; s < end; line_no++) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *line_end = nl > s && nl[-1] == '\r' ? nl - 1 : nl;
    for (const char *c = s; c < line_end; c++)
      if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
        return err_set(ERR_PARSE, "multipart: part %d header line %d has control byte 0x%02x",
                       p->n_parts, line_no, (unsigned char)*c);
    if (mp_is_ws(*s))
      return err_set(ERR_PARSE, "multipart: part %d header line %d is folded (starts with whitespace)",
                     p->n_parts, line_no);
    const char *colon = memchr(s, ':', (size_t)(line_end - s));
    if (!colon)
      return err_set(ERR_PARSE, "multipart: part %d header line %d has no ':'", p->n_parts, line_no);
    size_t name_len = (size_t)(mp_trim_end(s, colon) - s);
    const char *v = mp_skip_ws(colon + 1, line_end), *v_end = mp_trim_end(v, line_end);
    if (mp_ieq(s, name_len, "content-disposition") && !seen_cd) {
      seen_cd = true;
      if ((rc = mp_disposition_parse(p, v, v_end))) return rc;
    } else if (mp_ieq(s, name_len, "content-type") && !seen_ct) {
      seen_ct = true;
      if ((rc = mp_val_add(p, v, (size_t)(v_end - v), false, &p->ct_off))) return rc;
    }
    s = nl + 1;
  }
  if (!seen_cd) return err_set(ERR_PARSE, "multipart: part %d has no Content-Disposition header", p->n_parts);
  if (p->name_off == MP_NONE)
    return err_set(ERR_PARSE, "multipart: part %d Content-Disposition has no name parameter", p->n_parts);
  return 0;
}

/* Collects one header line (or the part of it in this chunk). */
static int mp_headers_step(mp_parser *p, const char *data, size_t len, size_t *used) {
  const char *nl = memchr(data, '\n', len);
  size_t take = nl ? (size_t)(nl - data) + 1 : len;
  *used = take;
  if (take > MP_HEADER_MAX - p->hdr.len)
    return err_set(ERR_TOO_LARGE, "multipart: headers of part %d exceed %d bytes", p->n_parts, MP_HEADER_MAX);
  if (buf_append(&p->hdr, data, take)) return err_set(ERR_NOMEM, "multipart: out of memory for part headers");
  if (!nl) return 0;
  const char *line = p->hdr.data + p->line_start;
  size_t n = p->hdr.len - p->line_start;
  if (!((n == 1 && line[0] == '\n') || (n == 2 && line[0] == '\r'))) {
    p->line_start = p->hdr.len;
    return 0;
  }
  int rc = mp_headers_parse(p, p->line_start);
  if (rc) return rc;
  p->state = MP_STATE_DATA;
  p->tail_len = 0;
  if (!p->cb.on_part_begin) return 0;
  return p->cb.on_part_begin(p->ctx, mp_val(p, p->name_off), mp_val(p, p->fn_off), mp_val(p, p->ct_off));
}

/* ---- driver ------------------------------------------------------------ */

int mp_parser_feed(mp_parser *p, const char *data, size_t len) {
  if (p->err) return p->err;
  while (len > 0) {
    size_t used = 0;
    bool found = false;
    int rc = 0;
    switch (p->state) {
      case MP_STATE_PREAMBLE:
      case MP_STATE_DATA:
        rc = mp_scan(p, data, len, &used, &found);
        if (!rc && found) rc = mp_delimiter_found(p);
        break;
      case MP_STATE_BOUNDARY_END: rc = mp_boundary_end(p, data, len, &used); break;
      case MP_STATE_HEADERS: rc = mp_headers_step(p, data, len, &used); break;
      case MP_STATE_EPILOGUE: used = len; break;
    }
    if (rc) return p->err = rc;
    data += used;
    len -= used;
  }
  return 0;
}

int mp_parser_finish(mp_parser *p) {
  if (p->err) return p->err;
  switch (p->state) {
    case MP_STATE_EPILOGUE: return 0;
    case MP_STATE_PREAMBLE:
      p->err = err_set(ERR_PARSE, "multipart: body has no boundary \"--%s\"", p->boundary);
      break;
    case MP_STATE_BOUNDARY_END:
      p->err = err_set(ERR_PARSE, "multipart: body ended right after boundary %d, before CRLF or the closing \"--\"",
                       p->n_parts + 1);
      break;
    case MP_STATE_HEADERS:
      if (p->hdr.len == 0 && p->n_parts > 1)
        p->err = err_set(ERR_PARSE, "multipart: body ended after part %d without the closing \"--%s--\"",
                         p->n_parts - 1, p->boundary);
      else
        p->err = err_set(ERR_PARSE, "multipart: body ended inside the headers of part %d", p->n_parts);
      break;
    case MP_STATE_DATA:
      p->err = err_set(ERR_PARSE, "multipart: body ended inside part %d (\"%.100s\") before its closing boundary",
                       p->n_parts, mp_val(p, p->name_off));
      break;
  }
  return p->err;
}
