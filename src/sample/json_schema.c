/*
 * json_schema.c - compiles a JSON schema (jansson value) into GBNF text and
 * from there into a grammar (grammar.c).
 *
 * Every schema node becomes one rule "rN ::= ..." whose body is built in a
 * local buffer while nested nodes append their own rules to the output, so a
 * body never interleaves with another. Fixed rules (whitespace, any value,
 * strings, numbers, formats) come from a prelude with "j-" names. $ref
 * targets get one rule each, reserved before the target is compiled, so
 * recursive schemas terminate. Objects with declared properties use two
 * chains of rules, "nothing emitted yet" (fN) and "something emitted" (tN),
 * so optional properties can be left out without stray commas, in linear
 * size. A regex subset (pattern) is translated to GBNF over the JSON-escaped
 * text of the string. json_schema.h lists what is accepted and how the
 * grammar is stricter than the schema.
 *
 * Start reading at json_schema_to_gbnf(), then gen_schema().
 */
#include "sample/json_schema.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"

#define JS_MAX_DEPTH 64

static const char PRELUDE[] =
    "ws ::= [ \\t]{0,4} | \"\\n\" [ \\t]{0,40}\n"
    "j-value ::= j-object | j-array | j-string | j-number | \"true\" | \"false\" | \"null\"\n"
    "j-object ::= \"{\" ws ( j-member ( \",\" ws j-member )* )? \"}\"\n"
    "j-member ::= j-string ws \":\" ws j-value ws\n"
    "j-array ::= \"[\" ws ( j-value ws ( \",\" ws j-value ws )* )? \"]\"\n"
    "j-string ::= \"\\\"\" j-char* \"\\\"\"\n"
    "j-char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" j-u4 )\n"
    "j-u4 ::= [0-9a-cA-CeEfF] j-hex{3} | [dD] [0-7] j-hex{2}"
    " | [dD] [89abAB] j-hex{2} \"\\\\u\" [dD] [c-fC-F] j-hex{2}\n"
    "j-hex ::= [0-9a-fA-F]\n"
    "j-number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,17} ) ( \".\" [0-9]{1,20} )?"
    " ( [eE] [-+]? [0-9]{1,2} )?\n"
    "j-integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,17} )\n"
    "j-boolean ::= \"true\" | \"false\"\n"
    "j-date ::= [0-9]{4} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )"
    " | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" )"
    " | \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )\n"
    "j-time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )?"
    " ( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n"
    "j-uuid ::= j-hex{8} \"-\" j-hex{4} \"-\" j-hex{4} \"-\" j-hex{4} \"-\" j-hex{12}\n"
    "j-sq ::= \"\\\"\"\n"
    "j-rawchar ::= [^\"\\\\\\x00-\\x1f]\n";

typedef struct jref {
  char *ptr; /* "#/$defs/x" */
  int rule;
} jref;

typedef struct jsctx {
  const json_t *root;
  buf out;
  int n_rules;
  jref *refs;
  size_t n_refs, cap_refs;
  unsigned depth;
} jsctx;

/* ---- small helpers ---------------------------------------------------- */

static int path_err(int code, const char *path, const char *key, const char *what) {
  return err_set(code, "json schema %s%s%s: %s", *path ? path : "/", key && *path ? "/" : "",
                 key ? key : "", what);
}

/* Appends a JSON pointer segment (~ and / escaped). */
static void path_push(char *dst, size_t cap, const char *base, const char *seg) {
  size_t n = (size_t)snprintf(dst, cap, "%s/", base);
  for (const char *s = seg; *s && n + 3 < cap; s++) {
    if (*s == '~') dst[n++] = '~', dst[n++] = '0';
    else if (*s == '/') dst[n++] = '~', dst[n++] = '1';
    else dst[n++] = *s;
  }
  if (n >= cap) n = cap - 1;
  dst[n] = '\0';
}

/* A GBNF string literal for n bytes of UTF-8. */
static int gbnf_lit(buf *b, const char *s, size_t n) {
  int rc = buf_append_byte(b, '"');
  for (size_t i = 0; i < n && !rc; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') rc = buf_appendf(b, "\\%c", c);
    else if (c == '\n') rc = buf_append_str(b, "\\n");
    else if (c == '\r') rc = buf_append_str(b, "\\r");
    else if (c == '\t') rc = buf_append_str(b, "\\t");
    else if (c < 0x20 || c == 0x7f) rc = buf_appendf(b, "\\x%02x", c);
    else rc = buf_append_byte(b, (char)c);
  }
  return rc ? rc : buf_append_str(b, "\" ");
}

/* A literal for the compact JSON text of v. */
static int gbnf_json_lit(buf *b, const json_t *v) {
  char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  if (!s) return ERR_NOMEM;
  int rc = gbnf_lit(b, s, strlen(s));
  free(s);
  return rc;
}

static int add_rule(jsctx *c, int id, const buf *body) {
  return buf_appendf(&c->out, "r%d ::= %s\n", id, body->data ? body->data : "\"\"");
}

static const char *const ANNOTATIONS[] = {"title",   "description", "default",  "examples",
                                          "$schema", "$id",         "$comment", "readOnly",
                                          "writeOnly", "deprecated", "$defs",   "definitions",
                                          NULL};

static bool is_annotation(const char *k) {
  for (size_t i = 0; ANNOTATIONS[i]; i++)
    if (strcmp(k, ANNOTATIONS[i]) == 0) return true;
  return false;
}

/* Fails with the first key of schema that is neither an annotation nor in
 * the NULL-terminated list allowed. */
static int check_keys(const json_t *schema, const char *path, const char *const *allowed,
                      const char *context) {
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)schema, k, v) {
    (void)v;
    if (is_annotation(k)) continue;
    bool ok = false;
    for (size_t i = 0; allowed[i] && !ok; i++) ok = strcmp(k, allowed[i]) == 0;
    if (!ok) {
      char what[160];
      snprintf(what, sizeof what, "keyword not supported%s%s", context ? " " : "",
               context ? context : "");
      return path_err(ERR_UNSUPPORTED, path, k, what);
    }
  }
  return 0;
}

static int get_count(const json_t *schema, const char *key, const char *path, long *out, long dflt) {
  const json_t *v = json_object_get(schema, key);
  *out = dflt;
  if (!v) return 0;
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return path_err(ERR_INVALID, path, key, "must be a non-negative integer");
  if (json_integer_value(v) > GRAMMAR_MAX_REPEAT) {
    char what[80];
    snprintf(what, sizeof what, "above the supported %d", GRAMMAR_MAX_REPEAT);
    return path_err(ERR_TOO_LARGE, path, key, what);
  }
  *out = (long)json_integer_value(v);
  return 0;
}

/* "{m,n}" / "{m,}" suffix for [min, max] (max < 0: unbounded). */
static int rep(buf *b, long min, long max) {
  if (max < 0) return buf_appendf(b, "{%ld,} ", min);
  return buf_appendf(b, "{%ld,%ld} ", min, max);
}

static int gen_schema(jsctx *c, const json_t *s, const char *path, int *id);

/* ---- $ref ------------------------------------------------------------- */

static int gen_ref(jsctx *c, const char *ref, const char *path, int *id) {
  for (size_t i = 0; i < c->n_refs; i++)
    if (strcmp(c->refs[i].ptr, ref) == 0) {
      *id = c->refs[i].rule;
      return 0;
    }
  if (ref[0] != '#' || (ref[1] != '\0' && ref[1] != '/'))
    return path_err(ERR_UNSUPPORTED, path, "$ref", "only local references (#, #/...) are supported");
  const json_t *t = c->root;
  const char *p = ref + 1;
  while (*p == '/') {
    p++;
    char seg[256];
    size_t n = 0;
    while (*p && *p != '/' && n + 1 < sizeof seg) {
      if (p[0] == '~' && p[1] == '0') seg[n++] = '~', p += 2;
      else if (p[0] == '~' && p[1] == '1') seg[n++] = '/', p += 2;
      else seg[n++] = *p++;
    }
    seg[n] = '\0';
    if (json_is_object(t)) t = json_object_get(t, seg);
    else if (json_is_array(t)) {
      char *end;
      long ix = strtol(seg, &end, 10);
      t = (*end || ix < 0) ? NULL : json_array_get(t, (size_t)ix);
    } else t = NULL;
    if (!t) {
      char what[320];
      snprintf(what, sizeof what, "reference \"%.256s\" does not resolve", ref);
      return path_err(ERR_INVALID, path, "$ref", what);
    }
  }
  if (c->n_refs == c->cap_refs) {
    size_t nc = c->cap_refs ? c->cap_refs * 2 : 8;
    jref *nr = realloc(c->refs, nc * sizeof *nr);
    if (!nr) return ERR_NOMEM;
    c->refs = nr, c->cap_refs = nc;
  }
  char *copy = strdup(ref);
  if (!copy) return ERR_NOMEM;
  int rid = c->n_rules++;
  c->refs[c->n_refs++] = (jref){copy, rid};
  int sub;
  char tpath[512];
  snprintf(tpath, sizeof tpath, "%s", ref + 1);
  int rc = gen_schema(c, t, tpath, &sub);
  if (rc) return rc;
  *id = rid;
  return buf_appendf(&c->out, "r%d ::= r%d\n", rid, sub);
}

/* ---- strings and patterns ---------------------------------------------- */

/* Regex subset -> GBNF over the JSON-escaped characters of a string. */
typedef struct rx {
  const char *s;
  size_t pos, len;
  const char *path;
  unsigned depth;
} rx;

static int rx_err(const rx *r, const char *what) {
  char msg[200];
  snprintf(msg, sizeof msg, "pattern at offset %zu: %s", r->pos, what);
  return path_err(ERR_UNSUPPORTED, r->path, "pattern", msg);
}

/* GBNF for one literal code point as it appears inside a JSON string. */
static int rx_emit_char(buf *b, uint32_t cp) {
  switch (cp) {
  case '"': return buf_append_str(b, "\"\\\\\\\"\" ");
  case '\\': return buf_append_str(b, "\"\\\\\\\\\" ");
  case '\n': return buf_append_str(b, "\"\\\\n\" ");
  case '\r': return buf_append_str(b, "\"\\\\r\" ");
  case '\t': return buf_append_str(b, "\"\\\\t\" ");
  case '\b': return buf_append_str(b, "\"\\\\b\" ");
  case '\f': return buf_append_str(b, "\"\\\\f\" ");
  default:
    if (cp < 0x20) return buf_appendf(b, "\"\\\\u%04x\" ", (unsigned)cp);
    return buf_appendf(b, "[\\U%08x] ", (unsigned)cp);
  }
}

static int rx_utf8(rx *r, uint32_t *cp) {
  const unsigned char *u = (const unsigned char *)r->s + r->pos;
  size_t left = r->len - r->pos;
  unsigned n = u[0] < 0x80 ? 1 : u[0] < 0xE0 ? 2 : u[0] < 0xF0 ? 3 : 4;
  if (n > left) return rx_err(r, "truncated UTF-8");
  uint32_t v = n == 1 ? u[0] : n == 2 ? (u[0] & 0x1Fu) : n == 3 ? (u[0] & 0x0Fu) : (u[0] & 0x07u);
  for (unsigned i = 1; i < n; i++) v = (v << 6) | (u[i] & 0x3Fu);
  r->pos += n;
  *cp = v;
  return 0;
}

/* Class ranges collected as lo,hi pairs. */
typedef struct rclass {
  uint32_t r[256];
  size_t n;
} rclass;

static int rclass_add(rx *r, rclass *k, uint32_t lo, uint32_t hi) {
  if (k->n + 2 > sizeof k->r / sizeof k->r[0]) return rx_err(r, "character class too large");
  k->r[k->n++] = lo, k->r[k->n++] = hi;
  return 0;
}

/* \d \w \s (and uppercase: negated) inside or outside a class. */
static int rx_class_escape(rx *r, rclass *k, char e) {
  int rc = 0;
  switch (e) {
  case 'd': return rclass_add(r, k, '0', '9');
  case 'w':
    if ((rc = rclass_add(r, k, 'a', 'z')) || (rc = rclass_add(r, k, 'A', 'Z')) ||
        (rc = rclass_add(r, k, '0', '9')))
      return rc;
    return rclass_add(r, k, '_', '_');
  case 's':
    if ((rc = rclass_add(r, k, ' ', ' '))) return rc;
    return rclass_add(r, k, '\t', '\r');
  }
  return rx_err(r, "unsupported escape in character class");
}

/* Emits a class: raw code points as one GBNF class, and the characters that
 * JSON must escape as alternatives. Negated: no escaped characters allowed. */
static int rx_emit_class(buf *b, const rclass *k, bool neg) {
  int rc;
  if (neg) {
    if ((rc = buf_append_str(b, "[^\"\\\\\\x00-\\x1f"))) return rc;
    for (size_t i = 0; i < k->n; i += 2)
      if ((rc = buf_appendf(b, "\\U%08x-\\U%08x", (unsigned)k->r[i], (unsigned)k->r[i + 1]))) return rc;
    return buf_append_str(b, "] ");
  }
  if ((rc = buf_append_str(b, "( "))) return rc;
  bool any = false;
  /* raw part: each range minus 0x00-0x1f, '"' and '\' */
  buf raw = BUF_INIT;
  for (size_t i = 0; i < k->n && !rc; i += 2) {
    uint32_t lo = k->r[i], hi = k->r[i + 1];
    if (lo < 0x20) lo = 0x20;
    uint32_t cuts[2] = {'"', '\\'};
    for (int ci = 0; ci < 2 && lo <= hi && !rc; ci++) {
      if (cuts[ci] >= lo && cuts[ci] <= hi) {
        if (cuts[ci] > lo) rc = buf_appendf(&raw, "\\U%08x-\\U%08x", (unsigned)lo, (unsigned)cuts[ci] - 1);
        lo = cuts[ci] + 1;
      }
    }
    if (!rc && lo <= hi) rc = buf_appendf(&raw, "\\U%08x-\\U%08x", (unsigned)lo, (unsigned)hi);
  }
  if (!rc && raw.len) {
    rc = buf_appendf(b, "[%s] ", raw.data);
    any = true;
  }
  buf_free(&raw);
  /* escaped part */
  for (uint32_t cp = 0; cp <= '\\' && !rc; cp++) {
    if (cp >= 0x20 && cp != '"' && cp != '\\') continue;
    bool in = false;
    for (size_t i = 0; i < k->n && !in; i += 2) in = cp >= k->r[i] && cp <= k->r[i + 1];
    if (!in) continue;
    if (any) rc = buf_append_str(b, "| ");
    if (!rc) rc = rx_emit_char(b, cp);
    any = true;
  }
  if (rc) return rc;
  if (!any) return buf_append_str(b, "[^\\x00-\\U0010ffff] )"); /* matches nothing */
  return buf_append_str(b, ") ");
}

static int rx_alt(rx *r, buf *b);

static int rx_atom(rx *r, buf *b) {
  char ch = r->s[r->pos];
  int rc;
  rclass k = {.n = 0};
  if (ch == '(') {
    if (++r->depth > 64) return rx_err(r, "groups nested too deeply");
    r->pos++;
    if (r->pos + 1 < r->len && r->s[r->pos] == '?') {
      if (r->s[r->pos + 1] != ':') return rx_err(r, "only (?: ) groups are supported");
      r->pos += 2;
    }
    if ((rc = buf_append_str(b, "( "))) return rc;
    if ((rc = rx_alt(r, b))) return rc;
    if (r->pos >= r->len || r->s[r->pos] != ')') return rx_err(r, "unclosed group");
    r->pos++;
    r->depth--;
    return buf_append_str(b, ") ");
  }
  if (ch == '[') {
    r->pos++;
    bool neg = false;
    if (r->pos < r->len && r->s[r->pos] == '^') neg = true, r->pos++;
    bool first = true;
    for (;;) {
      if (r->pos >= r->len) return rx_err(r, "unterminated class");
      if (r->s[r->pos] == ']' && !first) {
        r->pos++;
        break;
      }
      first = false;
      uint32_t lo;
      if (r->s[r->pos] == '\\') {
        if (r->pos + 1 >= r->len) return rx_err(r, "trailing backslash");
        char e = r->s[r->pos + 1];
        r->pos += 2;
        if (strchr("dws", e)) {
          if ((rc = rx_class_escape(r, &k, e))) return rc;
          continue;
        }
        if (strchr("DWS", e)) return rx_err(r, "negated escapes inside a class are not supported");
        lo = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : (unsigned char)e;
        if ((unsigned char)e >= 0x80 || (e >= 'a' && e <= 'z' && !strchr("ntr", e)) ||
            (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
          return rx_err(r, "unsupported escape");
      } else if ((rc = rx_utf8(r, &lo))) {
        return rc;
      }
      uint32_t hi = lo;
      if (r->pos + 1 < r->len && r->s[r->pos] == '-' && r->s[r->pos + 1] != ']') {
        r->pos++;
        if (r->s[r->pos] == '\\') return rx_err(r, "escaped range end is not supported");
        if ((rc = rx_utf8(r, &hi))) return rc;
        if (hi < lo) return rx_err(r, "range out of order");
      }
      if ((rc = rclass_add(r, &k, lo, hi))) return rc;
    }
    return rx_emit_class(b, &k, neg);
  }
  if (ch == '.') {
    r->pos++;
    return buf_append_str(b, "[^\"\\\\\\x00-\\x1f] ");
  }
  if (ch == '\\') {
    if (r->pos + 1 >= r->len) return rx_err(r, "trailing backslash");
    char e = r->s[r->pos + 1];
    r->pos += 2;
    if (strchr("dws", e)) {
      if ((rc = rx_class_escape(r, &k, e))) return rc;
      return rx_emit_class(b, &k, false);
    }
    if (strchr("DWS", e)) {
      if ((rc = rx_class_escape(r, &k, (char)(e + 32)))) return rc;
      return rx_emit_class(b, &k, true);
    }
    if (e == 'n') return rx_emit_char(b, '\n');
    if (e == 't') return rx_emit_char(b, '\t');
    if (e == 'r') return rx_emit_char(b, '\r');
    if ((unsigned char)e >= 0x80 || (e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') ||
        (e >= '0' && e <= '9'))
      return rx_err(r, "unsupported escape (backreferences, \\b, \\p ... are not supported)");
    return rx_emit_char(b, (unsigned char)e);
  }
  if (ch == '^' || ch == '$') return rx_err(r, "anchors are only supported at the ends");
  if (ch == '*' || ch == '+' || ch == '?' || ch == '{') return rx_err(r, "quantifier without an operand");
  uint32_t cp;
  if ((rc = rx_utf8(r, &cp))) return rc;
  return rx_emit_char(b, cp);
}

static int rx_seq(rx *r, buf *b) {
  bool empty = true;
  while (r->pos < r->len && r->s[r->pos] != '|' && r->s[r->pos] != ')') {
    if (r->s[r->pos] == '$' && r->pos + 1 == r->len) break;
    int rc = rx_atom(r, b);
    if (rc) return rc;
    empty = false;
    if (r->pos >= r->len) break;
    char q = r->s[r->pos];
    if ((q == '*' || q == '+' || q == '?' || q == '{') && b->len && b->data[b->len - 1] == ' ')
      b->data[--b->len] = '\0'; /* a GBNF quantifier must touch its operand */
    if (q == '*' || q == '+' || q == '?') {
      r->pos++;
      if ((rc = buf_appendf(b, "%c ", q))) return rc;
    } else if (q == '{') {
      size_t close = r->pos;
      while (close < r->len && r->s[close] != '}') close++;
      if (close >= r->len) return rx_err(r, "unterminated {m,n}");
      for (size_t i = r->pos + 1; i < close; i++)
        if (!((r->s[i] >= '0' && r->s[i] <= '9') || r->s[i] == ','))
          return rx_err(r, "malformed {m,n}");
      if ((rc = buf_append(b, r->s + r->pos, close - r->pos + 1)) || (rc = buf_append_byte(b, ' ')))
        return rc;
      r->pos = close + 1;
    } else {
      continue;
    }
    if (r->pos < r->len && (r->s[r->pos] == '?' || r->s[r->pos] == '+'))
      return rx_err(r, "lazy and possessive quantifiers are not supported");
  }
  if (empty) return buf_append_str(b, "\"\" ");
  return 0;
}

static int rx_alt(rx *r, buf *b) {
  int rc = rx_seq(r, b);
  while (!rc && r->pos < r->len && r->s[r->pos] == '|') {
    r->pos++;
    if ((rc = buf_append_str(b, "| "))) return rc;
    rc = rx_seq(r, b);
  }
  return rc;
}

static int gen_pattern(jsctx *c, const char *pat, const char *path, buf *body) {
  (void)c;
  rx r = {pat, 0, strlen(pat), path, 0};
  bool start = r.len && pat[0] == '^';
  if (start) r.pos = 1;
  bool end = r.len > r.pos && pat[r.len - 1] == '$' && (r.len < 2 || pat[r.len - 2] != '\\');
  int rc = buf_append_str(body, "j-sq ");
  if (!rc && !start) rc = buf_append_str(body, "j-char* ");
  if (!rc) rc = buf_append_str(body, "( ");
  if (!rc) rc = rx_alt(&r, body);
  if (rc) return rc;
  if (r.pos < r.len && !(end && r.pos == r.len - 1)) return rx_err(&r, "unexpected ')'");
  rc = buf_append_str(body, ") ");
  if (!rc && !end) rc = buf_append_str(body, "j-char* ");
  if (!rc) rc = buf_append_str(body, "j-sq");
  return rc;
}

static int gen_string(jsctx *c, const json_t *s, const char *path, buf *body) {
  const json_t *fmt = json_object_get(s, "format");
  const json_t *pat = json_object_get(s, "pattern");
  long min, max;
  int rc;
  if ((rc = get_count(s, "minLength", path, &min, 0)) || (rc = get_count(s, "maxLength", path, &max, -1)))
    return rc;
  bool has_len = json_object_get(s, "minLength") || json_object_get(s, "maxLength");
  if (fmt) {
    if (!json_is_string(fmt)) return path_err(ERR_INVALID, path, "format", "must be a string");
    if (pat || has_len)
      return path_err(ERR_UNSUPPORTED, path, "format", "format together with pattern or a length");
    const char *f = json_string_value(fmt);
    const char *rule = strcmp(f, "date") == 0        ? "j-date"
                       : strcmp(f, "time") == 0      ? "j-time"
                       : strcmp(f, "date-time") == 0 ? "j-date \"T\" j-time"
                       : strcmp(f, "uuid") == 0      ? "j-uuid"
                                                     : NULL;
    if (!rule) {
      char what[200];
      snprintf(what, sizeof what, "format \"%.100s\" not supported (date, time, date-time, uuid are)", f);
      return path_err(ERR_UNSUPPORTED, path, "format", what);
    }
    return buf_appendf(body, "j-sq %s j-sq", rule);
  }
  if (pat) {
    if (!json_is_string(pat)) return path_err(ERR_INVALID, path, "pattern", "must be a string");
    if (has_len) return path_err(ERR_UNSUPPORTED, path, "pattern", "pattern together with a length");
    return gen_pattern(c, json_string_value(pat), path, body);
  }
  if (max >= 0 && max < min)
    return path_err(ERR_INVALID, path, "maxLength", "smaller than minLength");
  if (!has_len) return buf_append_str(body, "j-string");
  if ((rc = buf_append_str(body, "j-sq j-char"))) return rc;
  if ((rc = rep(body, min, max))) return rc;
  return buf_append_str(body, "j-sq");
}

/* ---- objects and arrays ------------------------------------------------ */

/* Key rules for extra members: a JSON string without escapes that differs
 * from every declared key. keys[i] are code point arrays of the declared
 * names that a raw string can spell; all share their first d code points.
 * The rule for a trie node allows: ending here (unless a key ends here), a
 * child's code point followed by the child's rule, or any other raw code
 * point followed by anything. */
typedef struct ckey {
  uint32_t *cp;
  size_t n;
} ckey;

static int gen_key_excl(jsctx *c, ckey *keys, size_t n_keys, size_t d, int *id) {
  buf body = BUF_INIT;
  int rc = 0;
  bool ends_here = false;
  for (size_t i = 0; i < n_keys; i++) ends_here |= keys[i].n == d;
  *id = c->n_rules++;
  if (!ends_here) rc = buf_append_str(&body, "j-sq | ");
  if (!rc) rc = buf_append_str(&body, "[^\"\\\\\\x00-\\x1f");
  for (size_t i = 0; i < n_keys && !rc; i++)
    if (keys[i].n > d) rc = buf_appendf(&body, "\\U%08x", (unsigned)keys[i].cp[d]);
  if (!rc) rc = buf_append_str(&body, "] j-rawchar* j-sq");
  /* one child per distinct next code point (keys grouped in place) */
  for (size_t i = 0; i < n_keys && !rc; i++) {
    if (keys[i].n <= d) continue;
    uint32_t cp = keys[i].cp[d];
    bool seen = false;
    for (size_t j = 0; j < i && !seen; j++) seen = keys[j].n > d && keys[j].cp[d] == cp;
    if (seen) continue;
    /* move the keys with this code point to a contiguous run after i */
    size_t m = i + 1;
    for (size_t j = i + 1; j < n_keys; j++)
      if (keys[j].n > d && keys[j].cp[d] == cp) {
        ckey t = keys[m];
        keys[m] = keys[j];
        keys[j] = t;
        m++;
      }
    int child;
    rc = gen_key_excl(c, keys + i, m - i, d + 1, &child);
    if (!rc) rc = buf_appendf(&body, " | [\\U%08x] r%d", (unsigned)cp, child);
  }
  if (!rc) rc = add_rule(c, *id, &body);
  buf_free(&body);
  return rc;
}

/* The key rule for extras of an object whose declared names are props. */
static int gen_extra_key(jsctx *c, const json_t *props, char *name, size_t cap) {
  size_t n = json_object_size(props);
  ckey *keys = calloc(n ? n : 1, sizeof *keys);
  if (!keys) return ERR_NOMEM;
  size_t k = 0;
  int rc = 0;
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)props, key, v) {
    (void)v;
    size_t len = strlen(key);
    bool raw = true;
    for (size_t i = 0; i < len; i++) raw &= (unsigned char)key[i] >= 0x20 && key[i] != '"' && key[i] != '\\';
    if (!raw) continue; /* a raw string can never spell it */
    keys[k].cp = malloc((len + 1) * sizeof *keys[k].cp);
    if (!keys[k].cp) {
      rc = ERR_NOMEM;
      break;
    }
    const unsigned char *u = (const unsigned char *)key;
    size_t m = 0;
    for (size_t i = 0; i < len;) {
      unsigned l = u[i] < 0x80 ? 1 : u[i] < 0xE0 ? 2 : u[i] < 0xF0 ? 3 : 4;
      uint32_t cp = l == 1 ? u[i] : l == 2 ? (u[i] & 0x1Fu) : l == 3 ? (u[i] & 0x0Fu) : (u[i] & 0x07u);
      for (unsigned j = 1; j < l && i + j < len; j++) cp = (cp << 6) | (u[i + j] & 0x3Fu);
      keys[k].cp[m++] = cp;
      i += l;
    }
    keys[k++].n = m;
  }
  int id = 0;
  if (!rc) rc = gen_key_excl(c, keys, k, 0, &id);
  for (size_t i = 0; i < k; i++) free(keys[i].cp);
  free(keys);
  if (!rc) snprintf(name, cap, "j-sq r%d", id);
  return rc;
}

static int gen_object(jsctx *c, const json_t *s, const char *path, buf *body) {
  const json_t *props = json_object_get(s, "properties");
  const json_t *req = json_object_get(s, "required");
  const json_t *addl = json_object_get(s, "additionalProperties");
  char sub[512];
  int rc;
  if (props && !json_is_object(props)) return path_err(ERR_INVALID, path, "properties", "must be an object");
  if (req && !json_is_array(req)) return path_err(ERR_INVALID, path, "required", "must be an array");
  if (addl && !json_is_boolean(addl) && !json_is_object(addl))
    return path_err(ERR_INVALID, path, "additionalProperties", "must be a boolean or a schema");
  size_t n = props ? json_object_size(props) : 0;
  /* extra members: -1 none, else a rule for the member */
  int extra = -1;
  char key_rule[48] = "j-string";
  if (n && addl && !json_is_false(addl) && (rc = gen_extra_key(c, props, key_rule, sizeof key_rule)))
    return rc;
  if (!addl && n == 0) {
    extra = -2; /* any member: j-member */
  } else if (addl && json_is_true(addl) && n == 0) {
    extra = -2;
  } else if (addl && !json_is_false(addl)) {
    int vid = -1;
    if (json_is_object(addl)) {
      path_push(sub, sizeof sub, path, "additionalProperties");
      if ((rc = gen_schema(c, addl, sub, &vid))) return rc;
    }
    extra = c->n_rules++;
    if (vid >= 0) rc = buf_appendf(&c->out, "r%d ::= %s ws \":\" ws r%d ws\n", extra, key_rule, vid);
    else rc = buf_appendf(&c->out, "r%d ::= %s ws \":\" ws j-value ws\n", extra, key_rule);
    if (rc) return rc;
  }
  char extra_name[32];
  if (extra == -2) snprintf(extra_name, sizeof extra_name, "j-member");
  else snprintf(extra_name, sizeof extra_name, "r%d", extra);
  /* required names must be declared */
  for (size_t i = 0; req && i < json_array_size(req); i++) {
    const json_t *r = json_array_get(req, i);
    if (!json_is_string(r)) return path_err(ERR_INVALID, path, "required", "entries must be strings");
    if (!props || !json_object_get(props, json_string_value(r))) {
      char what[200];
      snprintf(what, sizeof what, "\"%.100s\" is required but not in properties", json_string_value(r));
      return path_err(ERR_UNSUPPORTED, path, "required", what);
    }
  }
  /* tail rules after the last property */
  int f_next = c->n_rules++, t_next = c->n_rules++;
  if (extra == -1) {
    rc = buf_appendf(&c->out, "r%d ::= \"\"\nr%d ::= \"\"\n", f_next, t_next);
  } else {
    rc = buf_appendf(&c->out, "r%d ::= ( %s ( \",\" ws %s )* )?\nr%d ::= ( \",\" ws %s )*\n", f_next,
                     extra_name, extra_name, t_next, extra_name);
  }
  if (rc) return rc;
  /* properties in reverse order build the chains */
  const char **keys = NULL;
  if (n) {
    keys = malloc(n * sizeof *keys);
    if (!keys) return ERR_NOMEM;
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)props, k, v) {
      (void)v;
      keys[i++] = k;
    }
  }
  for (size_t ii = n; ii-- > 0;) {
    const char *k = keys[ii];
    bool required = false;
    for (size_t j = 0; req && j < json_array_size(req) && !required; j++)
      required = strcmp(json_string_value(json_array_get(req, j)), k) == 0;
    char p1[512];
    path_push(p1, sizeof p1, path, "properties");
    path_push(sub, sizeof sub, p1, k);
    int vid;
    if ((rc = gen_schema(c, json_object_get(props, k), sub, &vid))) break;
    int kv = c->n_rules++, f = c->n_rules++, t = c->n_rules++;
    buf line = BUF_INIT;
    json_t *ks = json_string(k);
    rc = ks ? gbnf_json_lit(&line, ks) : ERR_NOMEM;
    json_decref(ks);
    if (!rc) rc = buf_appendf(&c->out, "r%d ::= %sws \":\" ws r%d ws\n", kv, line.data, vid);
    buf_free(&line);
    if (rc) break;
    if (required)
      rc = buf_appendf(&c->out, "r%d ::= r%d r%d\nr%d ::= \",\" ws r%d r%d\n", f, kv, t_next, t, kv, t_next);
    else
      rc = buf_appendf(&c->out, "r%d ::= r%d r%d | r%d\nr%d ::= ( \",\" ws r%d )? r%d\n", f, kv, t_next,
                       f_next, t, kv, t_next);
    if (rc) break;
    f_next = f, t_next = t;
  }
  free(keys);
  if (rc) return rc;
  return buf_appendf(body, "\"{\" ws r%d \"}\"", f_next);
}

static int gen_array(jsctx *c, const json_t *s, const char *path, buf *body) {
  const json_t *items = json_object_get(s, "items");
  long min, max;
  int rc;
  if ((rc = get_count(s, "minItems", path, &min, 0)) || (rc = get_count(s, "maxItems", path, &max, -1)))
    return rc;
  if (max >= 0 && max < min) return path_err(ERR_INVALID, path, "maxItems", "smaller than minItems");
  char item[32] = "j-value";
  if (items) {
    if (!json_is_object(items) && !json_is_boolean(items))
      return path_err(ERR_UNSUPPORTED, path, "items", "must be a schema (tuple form is not supported)");
    char sub[512];
    path_push(sub, sizeof sub, path, "items");
    int id;
    if ((rc = gen_schema(c, items, sub, &id))) return rc;
    snprintf(item, sizeof item, "r%d", id);
  }
  if (max == 0) return buf_append_str(body, "\"[\" ws \"]\"");
  if (min == 0) {
    if ((rc = buf_appendf(body, "\"[\" ws ( %s ws ( \",\" ws %s ws )", item, item))) return rc;
    if ((rc = rep(body, 0, max < 0 ? -1 : max - 1))) return rc;
    return buf_append_str(body, ")? \"]\"");
  }
  if ((rc = buf_appendf(body, "\"[\" ws %s ws ( \",\" ws %s ws )", item, item))) return rc;
  if ((rc = rep(body, min - 1, max < 0 ? -1 : max - 1))) return rc;
  return buf_append_str(body, "\"]\"");
}


/* ---- numeric bounds ----------------------------------------------------- */

/* Integers have at most 18 digits in our grammar (j-integer), so every
 * bound is clamped to +-(10^18 - 1). */
#define JS_INT_LIMIT 999999999999999999LL

/* Digits of v (v >= 0) into d, zero-padded on the left to n. */
static void digits_of(long long v, int n, char *d) {
  for (int i = n - 1; i >= 0; i--, v /= 10) d[i] = (char)('0' + v % 10);
  d[n] = 0;
}

static int n_digits(long long v) {
  int n = 1;
  while (v >= 10) v /= 10, n++;
  return n;
}

/* Alternatives matching the digit strings from lo to hi (same length n,
 * lo <= hi, as decimal digit strings) appended to b as one group. */
static int range_same_len(buf *b, const char *lo, const char *hi, int n) {
  if (n == 0) return buf_append_str(b, "\"\"");
  if (strncmp(lo, hi, (size_t)n) == 0) return buf_appendf(b, "\"%.*s\"", n, lo);
  if (lo[0] == hi[0]) {
    int rc = buf_appendf(b, "\"%c\" ", lo[0]);
    return rc ? rc : range_same_len(b, lo + 1, hi + 1, n - 1);
  }
  int rc = buf_append_str(b, "( ");
  bool first = true;
  char nines[20], zeros[20];
  memset(nines, '9', sizeof nines);
  memset(zeros, '0', sizeof zeros);
  /* lo and hi are digit runs of length n, not NUL-terminated strings. */
  bool lo_rest_zero = true, hi_rest_nine = true;
  for (int i = 1; i < n; i++) {
    lo_rest_zero &= lo[i] == '0';
    hi_rest_nine &= hi[i] == '9';
  }
  char from = lo[0], to = hi[0];
  if (!lo_rest_zero) { /* lo[0] followed by lo[1:]..99 */
    rc = rc ? rc : buf_appendf(b, "\"%c\" ", lo[0]);
    rc = rc ? rc : range_same_len(b, lo + 1, nines, n - 1);
    first = false;
    from++;
  }
  if (!hi_rest_nine) to--;
  if (!rc && from <= to) {
    rc = buf_appendf(b, "%s[%c-%c]", first ? "" : " | ", from, to);
    for (int i = 1; !rc && i < n; i++) rc = buf_append_str(b, " [0-9]");
    first = false;
  }
  if (!rc && !hi_rest_nine) { /* hi[0] followed by 00..hi[1:] */
    rc = buf_appendf(b, "%s\"%c\" ", first ? "" : " | ", hi[0]);
    rc = rc ? rc : range_same_len(b, zeros, hi + 1, n - 1);
  }
  return rc ? rc : buf_append_str(b, " )");
}

/* A group matching the decimal forms (no leading zeros) of lo..hi, with
 * 0 <= lo <= hi <= JS_INT_LIMIT. */
static int range_nonneg(buf *b, long long lo, long long hi) {
  int rc = buf_append_str(b, "( ");
  bool first = true;
  for (int n = n_digits(lo); !rc && n <= n_digits(hi); n++) {
    long long pow = 1;
    for (int i = 1; i < n; i++) pow *= 10;
    long long a = n == n_digits(lo) ? lo : pow, z = n == n_digits(hi) ? hi : pow * 10 - 1;
    char da[20], dz[20];
    digits_of(a, n, da);
    digits_of(z, n, dz);
    if (!first) rc = buf_append_str(b, " | ");
    if (!rc) rc = range_same_len(b, da, dz, n);
    first = false;
  }
  return rc ? rc : buf_append_str(b, " )");
}

/* Reads minimum / maximum / exclusiveMinimum / exclusiveMaximum (draft 6+
 * numbers, or draft 4 booleans) as an inclusive integer range. Bounds that
 * are not integers are rounded inwards: the grammar then accepts a subset
 * of the numbers the schema accepts, never more. */
static int int_bounds(const json_t *s, const char *path, long long *lo, long long *hi) {
  *lo = -JS_INT_LIMIT;
  *hi = JS_INT_LIMIT;
  static const char *const KEYS[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
  for (size_t k = 0; k < 4; k++) {
    const json_t *v = json_object_get(s, KEYS[k]);
    if (!v || json_is_boolean(v)) continue;
    if (!json_is_number(v)) return path_err(ERR_INVALID, path, KEYS[k], "must be a number");
    bool is_min = k < 2;
    bool excl = k == 1 || k == 3 || json_is_true(json_object_get(s, is_min ? "exclusiveMinimum" : "exclusiveMaximum"));
    double x = json_number_value(v);
    if (x > 1e18) x = 1e18;
    if (x < -1e18) x = -1e18;
    long long r;
    if (is_min) {
      double c = ceil(x);
      r = (long long)c + (excl && c == x ? 1 : 0);
      if (r > *lo) *lo = r;
    } else {
      double f = floor(x);
      r = (long long)f - (excl && f == x ? 1 : 0);
      if (r < *hi) *hi = r;
    }
  }
  if (*lo < -JS_INT_LIMIT) *lo = -JS_INT_LIMIT;
  if (*hi > JS_INT_LIMIT) *hi = JS_INT_LIMIT;
  if (*lo > *hi)
    return path_err(ERR_UNSUPPORTED, path, "minimum", "no integer lies within minimum..maximum (the grammar writes numbers with integer bounds)");
  return 0;
}

/* multipleOf for integers: a decimal automaton over residues (k <= 1000),
 * one rule per residue, written once per schema. Writes the rule name of
 * the digits that follow a first digit into *start_rule. */
static int multiple_rules(jsctx *c, long long k, int *base) {
  *base = c->n_rules;
  c->n_rules += (int)k;
  int rc = 0;
  for (long long r = 0; !rc && r < k; r++) {
    rc = buf_appendf(&c->out, "r%lld ::= ", *base + r);
    for (int d = 0; !rc && d <= 9; d++)
      rc = buf_appendf(&c->out, "%s\"%d\" r%lld", d ? " | " : "", d, *base + (r * 10 + d) % k);
    if (!rc && r == 0) rc = buf_append_str(&c->out, " | \"\"");
    if (!rc) rc = buf_append_str(&c->out, "\n");
  }
  return rc;
}

/* Body for an integer or number with bounds or multipleOf. */
static int gen_number(jsctx *c, const json_t *s, bool integer, const char *path, buf *body) {
  const json_t *mo = json_object_get(s, "multipleOf");
  bool bounded = json_object_get(s, "minimum") || json_object_get(s, "maximum") ||
                 json_object_get(s, "exclusiveMinimum") || json_object_get(s, "exclusiveMaximum");
  int rc;
  if (mo) {
    if (!json_is_number(mo) || !(json_number_value(mo) > 0))
      return path_err(ERR_INVALID, path, "multipleOf", "must be a number above 0");
    double m = json_number_value(mo);
    if (bounded) return path_err(ERR_UNSUPPORTED, path, "multipleOf", "not supported together with minimum/maximum");
    if (m == floor(m) && m <= 1000) {
      long long k = (long long)m;
      if (k == 1) return buf_append_str(body, "j-integer");
      int base;
      if ((rc = multiple_rules(c, k, &base))) return rc;
      /* 0, or an optional minus and a first digit 1-9 then the automaton
       * from that digit's residue. */
      if ((rc = buf_append_str(body, "( \"0\" | \"-\"? ( "))) return rc;
      for (int d = 1; !rc && d <= 9; d++) rc = buf_appendf(body, "%s\"%d\" r%lld", d > 1 ? " | " : "", d, base + d % k);
      return rc ? rc : buf_append_str(body, " ) )");
    }
    if (!integer) { /* 10^-n: at most n decimals */
      for (int n = 1; n <= 20; n++) {
        double p = pow(10.0, -n);
        if (fabs(m - p) < p * 1e-9)
          return buf_appendf(body, "\"-\"? ( \"0\" | [1-9] [0-9]{0,17} ) ( \".\" [0-9]{1,%d} )?", n);
      }
    }
    return path_err(ERR_UNSUPPORTED, path, "multipleOf",
                    "supported values: an integer up to 1000, or 0.1, 0.01, ... for numbers");
  }
  if (!bounded) return buf_append_str(body, integer ? "j-integer" : "j-number");
  long long lo, hi;
  if ((rc = int_bounds(s, path, &lo, &hi))) return rc;
  const char *frac = integer ? "" : " ( \".\" [0-9]{1,20} )?";
  rc = buf_append_str(body, "( ");
  bool first = true;
  if (!rc && lo < 0) { /* negative values -m, m in [max(1,-hi), -lo] */
    long long m_lo = hi < 0 ? -hi : 1, m_hi = -lo;
    /* A fraction moves -m further down: only below -lo's magnitude. */
    if (!integer && m_hi - 1 >= (hi < 0 ? -hi : 0)) {
      rc = buf_append_str(body, "\"-\" ");
      if (!rc) rc = range_nonneg(body, hi < 0 ? -hi : 0, m_hi - 1);
      if (!rc) rc = buf_append_str(body, " \".\" [0-9]{1,20}");
      first = false;
    }
    if (!rc && m_lo <= m_hi) {
      rc = buf_appendf(body, "%s\"-\" ", first ? "" : " | ");
      if (!rc) rc = range_nonneg(body, m_lo, m_hi);
      first = false;
    }
  }
  if (!rc && hi >= 0) { /* values in [max(0,lo), hi]; a fraction only below hi */
    long long a = lo > 0 ? lo : 0;
    if (!integer && a <= hi - 1) {
      rc = buf_appendf(body, "%s", first ? "" : " | ");
      if (!rc) rc = range_nonneg(body, a, hi - 1);
      if (!rc) rc = buf_appendf(body, "%s", frac);
      first = false;
    }
    if (!rc) {
      rc = buf_appendf(body, "%s", first ? "" : " | ");
      if (!rc) rc = integer ? range_nonneg(body, a, hi) : range_nonneg(body, hi, hi);
      first = false;
    }
  }
  return rc ? rc : buf_append_str(body, " )");
}

/* ---- dispatch ---------------------------------------------------------- */

static const char *const TYPE_KEYS[] = {
    "type",     "properties", "required",  "additionalProperties", "items",            "minItems",
    "maxItems", "minLength",  "maxLength", "pattern",              "format",           "minimum",
    "maximum",  "exclusiveMinimum", "exclusiveMaximum", "multipleOf", NULL};

/* Body for one type name, with s's type-specific keywords. */
static int gen_type(jsctx *c, const json_t *s, const char *type, const char *path, buf *body) {
  if (strcmp(type, "object") == 0) return gen_object(c, s, path, body);
  if (strcmp(type, "array") == 0) return gen_array(c, s, path, body);
  if (strcmp(type, "string") == 0) return gen_string(c, s, path, body);
  if (strcmp(type, "number") == 0) return gen_number(c, s, false, path, body);
  if (strcmp(type, "integer") == 0) return gen_number(c, s, true, path, body);
  if (strcmp(type, "boolean") == 0) return buf_append_str(body, "j-boolean");
  if (strcmp(type, "null") == 0) return buf_append_str(body, "\"null\"");
  char what[160];
  snprintf(what, sizeof what, "unknown type \"%.100s\"", type);
  return path_err(ERR_INVALID, path, "type", what);
}

/* Keywords that only make sense for some types: reject those that do not
 * belong to any of the schema's types (e.g. minimum on a string). */
static int gen_typed(jsctx *c, const json_t *s, const char *path, buf *body) {
  static const char *const NUMERIC[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                        "multipleOf", NULL};
  const json_t *ty = json_object_get(s, "type");
  bool numeric = false;
  for (size_t i = 0; ty && i < (json_is_array(ty) ? json_array_size(ty) : 1); i++) {
    const char *t = json_string_value(json_is_array(ty) ? json_array_get(ty, i) : ty);
    numeric |= t && (strcmp(t, "number") == 0 || strcmp(t, "integer") == 0);
  }
  for (size_t i = 0; NUMERIC[i] && !numeric; i++)
    if (json_object_get(s, NUMERIC[i]))
      return path_err(ERR_UNSUPPORTED, path, NUMERIC[i], "applies only to a schema of type number or integer");
  int rc = check_keys(s, path, TYPE_KEYS, NULL);
  if (rc) return rc;
  const json_t *type = json_object_get(s, "type");
  if (!type) {
    /* infer from keywords, else any value */
    if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties") ||
        json_object_get(s, "required"))
      return gen_object(c, s, path, body);
    if (json_object_get(s, "items") || json_object_get(s, "minItems") || json_object_get(s, "maxItems"))
      return gen_array(c, s, path, body);
    if (json_object_get(s, "pattern") || json_object_get(s, "format") ||
        json_object_get(s, "minLength") || json_object_get(s, "maxLength"))
      return gen_string(c, s, path, body);
    return buf_append_str(body, "j-value");
  }
  if (json_is_string(type)) return gen_type(c, s, json_string_value(type), path, body);
  if (!json_is_array(type) || json_array_size(type) == 0)
    return path_err(ERR_INVALID, path, "type", "must be a string or a non-empty array of strings");
  for (size_t i = 0; i < json_array_size(type); i++) {
    const json_t *t = json_array_get(type, i);
    if (!json_is_string(t)) return path_err(ERR_INVALID, path, "type", "entries must be strings");
    if (i && (rc = buf_append_str(body, " | "))) return rc;
    buf alt = BUF_INIT;
    rc = gen_type(c, s, json_string_value(t), path, &alt);
    if (!rc) rc = buf_appendf(body, "( %s )", alt.data ? alt.data : "");
    buf_free(&alt);
    if (rc) return rc;
  }
  return 0;
}

static int gen_schema(jsctx *c, const json_t *s, const char *path, int *id) {
  int rc;
  if (json_is_true(s) || (json_is_object(s) && json_object_size(s) == 0)) {
    *id = c->n_rules++;
    return buf_appendf(&c->out, "r%d ::= j-value\n", *id);
  }
  if (json_is_false(s)) return path_err(ERR_UNSUPPORTED, path, NULL, "schema false accepts nothing");
  if (!json_is_object(s)) return path_err(ERR_INVALID, path, NULL, "a schema must be an object or a boolean");
  if (++c->depth > JS_MAX_DEPTH) return path_err(ERR_TOO_LARGE, path, NULL, "schema nested too deeply");
  const json_t *ref = json_object_get(s, "$ref");
  const json_t *en = json_object_get(s, "enum");
  const json_t *cn = json_object_get(s, "const");
  const json_t *any = json_object_get(s, "anyOf");
  const char *any_key = "anyOf";
  if (!any) any = json_object_get(s, "oneOf"), any_key = "oneOf";
  const json_t *all = json_object_get(s, "allOf");
  buf body = BUF_INIT;
  char sub[512];
  if (ref) {
    static const char *const K[] = {"$ref", NULL};
    if (!json_is_string(ref)) rc = path_err(ERR_INVALID, path, "$ref", "must be a string");
    else if (!(rc = check_keys(s, path, K, "alongside $ref"))) rc = gen_ref(c, json_string_value(ref), path, id);
    c->depth--;
    return rc;
  }
  *id = c->n_rules++;
  if (en || cn) {
    static const char *const K[] = {"enum", "const", "type", NULL};
    if ((rc = check_keys(s, path, K, "alongside enum/const"))) goto out;
    if (cn) {
      rc = gbnf_json_lit(&body, cn);
    } else if (!json_is_array(en) || json_array_size(en) == 0) {
      rc = path_err(ERR_INVALID, path, "enum", "must be a non-empty array");
    } else {
      for (size_t i = 0; i < json_array_size(en) && !rc; i++) {
        if (i) rc = buf_append_str(&body, "| ");
        if (!rc) rc = gbnf_json_lit(&body, json_array_get(en, i));
      }
    }
  } else if (any || all) {
    static const char *const K[] = {"anyOf", "oneOf", "allOf", NULL};
    if ((rc = check_keys(s, path, K, "alongside anyOf/oneOf/allOf"))) goto out;
    if (any && all) {
      rc = path_err(ERR_UNSUPPORTED, path, "allOf", "allOf together with anyOf/oneOf");
      goto out;
    }
    if (all) {
      if (!json_is_array(all) || json_array_size(all) != 1) {
        rc = path_err(ERR_UNSUPPORTED, path, "allOf", "only allOf with exactly one schema is supported");
        goto out;
      }
      any = all, any_key = "allOf";
    }
    if (!json_is_array(any) || json_array_size(any) == 0) {
      rc = path_err(ERR_INVALID, path, any_key, "must be a non-empty array");
      goto out;
    }
    for (size_t i = 0; i < json_array_size(any) && !rc; i++) {
      char p1[512], ix[24];
      path_push(p1, sizeof p1, path, any_key);
      snprintf(ix, sizeof ix, "%zu", i);
      path_push(sub, sizeof sub, p1, ix);
      int alt;
      rc = gen_schema(c, json_array_get(any, i), sub, &alt);
      if (!rc) rc = buf_appendf(&body, "%sr%d ", i ? "| " : "", alt);
    }
  } else {
    rc = gen_typed(c, s, path, &body);
  }
  if (!rc) rc = add_rule(c, *id, &body);
out:
  buf_free(&body);
  c->depth--;
  return rc;
}

int json_schema_to_gbnf(const json_t *schema, char **out, size_t *len_out) {
  *out = NULL;
  if (len_out) *len_out = 0;
  jsctx c = {.root = schema, .out = BUF_INIT};
  int rc = buf_append_str(&c.out, PRELUDE);
  if (!rc && !schema) {
    rc = buf_append_str(&c.out, "root ::= ws j-object ws\n");
  } else if (!rc) {
    int id;
    rc = gen_schema(&c, schema, "", &id);
    if (!rc) rc = buf_appendf(&c.out, "root ::= ws r%d ws\n", id);
  }
  for (size_t i = 0; i < c.n_refs; i++) free(c.refs[i].ptr);
  free(c.refs);
  if (rc) {
    buf_free(&c.out);
    return rc;
  }
  *out = buf_detach(&c.out, len_out);
  return 0;
}

int json_schema_grammar(const json_t *schema, grammar **out) {
  *out = NULL;
  char *text;
  size_t len;
  int rc = json_schema_to_gbnf(schema, &text, &len);
  if (rc) return rc;
  rc = grammar_parse(text, len, "root", out);
  free(text);
  return rc;
}
