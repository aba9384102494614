/*
 * grammar.c - the GBNF compiler: text -> struct grammar (grammar_int.h).
 *
 * Why: constrained decoding (JSON mode, JSON schema, forced tool calls)
 * needs a grammar the matcher can run code point by code point; the JSON
 * schema compiler (json_schema.c) emits GBNF text and compiles it here, and
 * users may send GBNF directly.
 *
 * How: a recursive-descent parser appends elements to per-rule lists
 * (struct prule). Groups become new rules; repetitions become small
 * right-recursive rules (x* => R ::= x R | "", x{m,n} => m copies of x then
 * a chain of n-m optional rules), so the matcher only knows CHAR, REF and
 * END. After parsing, names are resolved, the rules are flattened into one
 * array, and two checks run: every referenced rule is defined, and no rule
 * can reach itself at its leftmost position (through nullable prefixes
 * too), because the matcher expands depth-first and would not terminate.
 *
 * Start reading at grammar_parse().
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "sample/grammar_int.h"

typedef struct elist {
  gelem *v;
  size_t n, cap;
} elist;

typedef struct prule {
  char *name;
  elist alts;  /* alternatives, each ended by END */
  bool defined;
  size_t ref_pos; /* text offset of the first reference (for messages) */
} prule;

typedef struct gparser {
  const char *s;
  size_t len, pos;
  prule *rules;
  size_t n_rules, cap_rules;
  uint32_t *ranges;
  size_t n_ranges, cap_ranges;
  uint32_t *index; /* user rule names: rule index + 1, 0 empty */
  size_t cap_index, n_named;
  unsigned depth;
} gparser;

#define GRAMMAR_MAX_NESTING 256

static void line_col(const gparser *p, size_t pos, int *line, int *col) {
  int l = 1, c = 1;
  for (size_t i = 0; i < pos && i < p->len; i++) {
    if (p->s[i] == '\n') l++, c = 1;
    else if (((unsigned char)p->s[i] & 0xC0) != 0x80) c++;
  }
  *line = l, *col = c;
}

static int perr(const gparser *p, size_t pos, const char *what) {
  int l, c;
  line_col(p, pos, &l, &c);
  return err_set(ERR_PARSE, "grammar %d:%d: %s", l, c, what);
}

static int elist_push(elist *e, gelem x) {
  if (e->n == e->cap) {
    size_t nc = e->cap ? e->cap * 2 : 16;
    if (nc > (size_t)1 << 28) return err_set(ERR_TOO_LARGE, "grammar: rule too long");
    gelem *nv = realloc(e->v, nc * sizeof *nv);
    if (!nv) return ERR_NOMEM;
    e->v = nv, e->cap = nc;
  }
  e->v[e->n++] = x;
  return 0;
}

static int add_range(gparser *p, uint32_t lo, uint32_t hi) {
  if (p->n_ranges + 2 > p->cap_ranges) {
    size_t nc = p->cap_ranges ? p->cap_ranges * 2 : 64;
    if (nc > (size_t)1 << 28) return err_set(ERR_TOO_LARGE, "grammar: too many character ranges");
    uint32_t *nr = realloc(p->ranges, nc * sizeof *nr);
    if (!nr) return ERR_NOMEM;
    p->ranges = nr, p->cap_ranges = nc;
  }
  p->ranges[p->n_ranges++] = lo;
  p->ranges[p->n_ranges++] = hi;
  return 0;
}

static uint32_t name_hash(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

/* Appends a rule (undefined) named name[0..n); index or < 0. */
static long rule_append(gparser *p, const char *name, size_t n) {
  if (p->n_rules == p->cap_rules) {
    size_t nc = p->cap_rules ? p->cap_rules * 2 : 32;
    if (nc > (size_t)1 << 24) return err_set(ERR_TOO_LARGE, "grammar: too many rules");
    prule *nr = realloc(p->rules, nc * sizeof *nr);
    if (!nr) return ERR_NOMEM;
    p->rules = nr, p->cap_rules = nc;
  }
  char *copy = malloc(n + 1);
  if (!copy) return ERR_NOMEM;
  memcpy(copy, name, n);
  copy[n] = '\0';
  p->rules[p->n_rules] = (prule){copy, {NULL, 0, 0}, false, p->pos};
  return (long)p->n_rules++;
}

/* Index of the user rule called name (created undefined when new), or < 0.
 * Looked up in an open-addressing table of user names (generated rules are
 * never looked up by name). */
static long rule_get(gparser *p, const char *name, size_t n) {
  if ((p->n_named + 1) * 2 > p->cap_index) {
    size_t nc = p->cap_index ? p->cap_index * 2 : 64;
    uint32_t *ni = calloc(nc, sizeof *ni);
    if (!ni) return ERR_NOMEM;
    for (size_t i = 0; i < p->cap_index; i++) {
      if (!p->index[i]) continue;
      const char *nm = p->rules[p->index[i] - 1].name;
      size_t j = name_hash(nm, strlen(nm)) & (nc - 1);
      while (ni[j]) j = (j + 1) & (nc - 1);
      ni[j] = p->index[i];
    }
    free(p->index);
    p->index = ni, p->cap_index = nc;
  }
  size_t j = name_hash(name, n) & (p->cap_index - 1);
  while (p->index[j]) {
    const prule *r = &p->rules[p->index[j] - 1];
    if (strlen(r->name) == n && memcmp(r->name, name, n) == 0) return (long)p->index[j] - 1;
    j = (j + 1) & (p->cap_index - 1);
  }
  long r = rule_append(p, name, n);
  if (r < 0) return r;
  p->index[j] = (uint32_t)r + 1;
  p->n_named++;
  return r;
}

/* A generated rule named "<parent>#<k>" ('#' cannot occur in a user name). */
static long rule_new_gen(gparser *p, uint32_t parent) {
  char name[96];
  int n = snprintf(name, sizeof name, "%.60s#%zu", p->rules[parent].name, p->n_rules);
  long r = rule_append(p, name, (size_t)n);
  if (r >= 0) p->rules[r].defined = true;
  return r;
}

static int emit(gparser *p, uint32_t rule, gelem e) { return elist_push(&p->rules[rule].alts, e); }

static gelem ref_elem(uint32_t r) { return (gelem){GELEM_REF, 0, r, 0}; }
static const gelem END_ELEM = {GELEM_END, 0, 0, 0};

static bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

static void skip_ws(gparser *p) {
  while (p->pos < p->len) {
    char c = p->s[p->pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->pos++;
    else if (c == '#') {
      while (p->pos < p->len && p->s[p->pos] != '\n') p->pos++;
    } else break;
  }
}

/* At `name ::=` (the start of the next rule)? Does not move. */
static bool at_rule_start(const gparser *p) {
  size_t i = p->pos;
  if (i >= p->len || !is_name_char(p->s[i])) return false;
  while (i < p->len && is_name_char(p->s[i])) i++;
  while (i < p->len && (p->s[i] == ' ' || p->s[i] == '\t')) i++;
  return i + 3 <= p->len && memcmp(p->s + i, "::=", 3) == 0;
}

/* Decodes one UTF-8 code point at p->pos (for literal text). */
static int read_utf8(gparser *p, uint32_t *cp) {
  const unsigned char *u = (const unsigned char *)p->s + p->pos;
  size_t left = p->len - p->pos;
  unsigned n;
  uint32_t c;
  if (u[0] < 0x80) n = 1, c = u[0];
  else if (u[0] >= 0xC2 && u[0] <= 0xDF) n = 2, c = u[0] & 0x1F;
  else if (u[0] >= 0xE0 && u[0] <= 0xEF) n = 3, c = u[0] & 0x0F;
  else if (u[0] >= 0xF0 && u[0] <= 0xF4) n = 4, c = u[0] & 0x07;
  else return perr(p, p->pos, "invalid UTF-8");
  if (left < n) return perr(p, p->pos, "truncated UTF-8");
  for (unsigned i = 1; i < n; i++) {
    if ((u[i] & 0xC0) != 0x80) return perr(p, p->pos, "invalid UTF-8");
    c = (c << 6) | (u[i] & 0x3F);
  }
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < min_cp[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
    return perr(p, p->pos, "invalid UTF-8");
  p->pos += n;
  *cp = c;
  return 0;
}

static int hex_digits(gparser *p, unsigned n, uint32_t *out) {
  uint32_t v = 0;
  for (unsigned i = 0; i < n; i++) {
    if (p->pos >= p->len) return perr(p, p->pos, "truncated escape");
    char c = p->s[p->pos];
    unsigned d;
    if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
    else return perr(p, p->pos, "expected a hex digit in escape");
    v = v * 16 + d;
    p->pos++;
  }
  if (v > 0x10FFFF) return perr(p, p->pos, "escape above U+10FFFF");
  *out = v;
  return 0;
}

/* One character of a literal or class, escapes decoded. */
static int read_char(gparser *p, uint32_t *cp) {
  if (p->pos >= p->len) return perr(p, p->pos, "unexpected end of text");
  if (p->s[p->pos] != '\\') return read_utf8(p, cp);
  size_t at = p->pos++;
  if (p->pos >= p->len) return perr(p, at, "truncated escape");
  char c = p->s[p->pos++];
  switch (c) {
  case 'n': *cp = '\n'; return 0;
  case 'r': *cp = '\r'; return 0;
  case 't': *cp = '\t'; return 0;
  case '0': *cp = 0; return 0;
  case '\\': case '"': case '[': case ']': case '-': case '/': case '^': case '\'':
    *cp = (unsigned char)c;
    return 0;
  case 'x': return hex_digits(p, 2, cp);
  case 'u': return hex_digits(p, 4, cp);
  case 'U': return hex_digits(p, 8, cp);
  default: return perr(p, at, "unknown escape");
  }
}

static int parse_alternatives(gparser *p, uint32_t rule);

/* Wraps the elements rule.alts[from..] into a new rule and leaves a REF. */
static int wrap_tail(gparser *p, uint32_t rule, size_t from) {
  long nr = rule_new_gen(p, rule);
  if (nr < 0) return (int)nr;
  elist *src = &p->rules[rule].alts;
  for (size_t i = from; i < src->n; i++) {
    int rc = emit(p, (uint32_t)nr, src->v[i]);
    if (rc) return rc;
    src = &p->rules[rule].alts;
  }
  int rc = emit(p, (uint32_t)nr, END_ELEM);
  if (rc) return rc;
  p->rules[rule].alts.n = from;
  return emit(p, rule, ref_elem((uint32_t)nr));
}

static int read_count(gparser *p, unsigned long *out) {
  size_t at = p->pos;
  unsigned long v = 0;
  if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
    return perr(p, at, "expected a number in {m,n}");
  while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
    v = v * 10 + (unsigned long)(p->s[p->pos++] - '0');
    if (v > GRAMMAR_MAX_REPEAT) {
      int l, c;
      line_col(p, at, &l, &c);
      return err_set(ERR_TOO_LARGE, "grammar %d:%d: repetition count above %d", l, c,
                     GRAMMAR_MAX_REPEAT);
    }
  }
  *out = v;
  return 0;
}

/* Applies repetition [min, max] (max ULONG_MAX: unbounded) to the single
 * element x that was removed from the end of rule. */
static int apply_repeat(gparser *p, uint32_t rule, gelem x, unsigned long min, unsigned long max) {
  int rc;
  for (unsigned long i = 0; i < min; i++)
    if ((rc = emit(p, rule, x))) return rc;
  if (max == (unsigned long)-1) {
    long r = rule_new_gen(p, rule); /* R ::= x R | "" */
    if (r < 0) return (int)r;
    if ((rc = emit(p, (uint32_t)r, x)) || (rc = emit(p, (uint32_t)r, ref_elem((uint32_t)r))) ||
        (rc = emit(p, (uint32_t)r, END_ELEM)) || (rc = emit(p, (uint32_t)r, END_ELEM)))
      return rc;
    return emit(p, rule, ref_elem((uint32_t)r));
  }
  long prev = -1; /* O_k ::= x O_{k-1} | "" */
  for (unsigned long k = min; k < max; k++) {
    long r = rule_new_gen(p, rule);
    if (r < 0) return (int)r;
    if ((rc = emit(p, (uint32_t)r, x))) return rc;
    if (prev >= 0 && (rc = emit(p, (uint32_t)r, ref_elem((uint32_t)prev)))) return rc;
    if ((rc = emit(p, (uint32_t)r, END_ELEM)) || (rc = emit(p, (uint32_t)r, END_ELEM))) return rc;
    prev = r;
  }
  if (prev >= 0) return emit(p, rule, ref_elem((uint32_t)prev));
  return 0;
}

static int parse_class(gparser *p, uint32_t rule) {
  size_t at = p->pos++; /* '[' */
  bool neg = false;
  if (p->pos < p->len && p->s[p->pos] == '^') neg = true, p->pos++;
  size_t first = p->n_ranges / 2;
  int rc;
  for (;;) {
    if (p->pos >= p->len) return perr(p, at, "unterminated character class");
    if (p->s[p->pos] == ']') {
      p->pos++;
      break;
    }
    uint32_t lo, hi;
    if ((rc = read_char(p, &lo))) return rc;
    hi = lo;
    if (p->pos + 1 < p->len && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
      p->pos++;
      if ((rc = read_char(p, &hi))) return rc;
      if (hi < lo) return perr(p, at, "character range with end before start");
    }
    if ((rc = add_range(p, lo, hi))) return rc;
  }
  uint32_t n = (uint32_t)(p->n_ranges / 2 - first);
  if (n == 0 && !neg) return perr(p, at, "empty character class");
  return emit(p, rule, (gelem){GELEM_CHAR, (uint8_t)neg, (uint32_t)first, n});
}

/* One item (primary + optional repetition) appended to rule. */
static int parse_item(gparser *p, uint32_t rule) {
  size_t start = p->rules[rule].alts.n;
  size_t at = p->pos;
  char c = p->s[p->pos];
  int rc;
  if (c == '"') {
    p->pos++;
    for (;;) {
      if (p->pos >= p->len) return perr(p, at, "unterminated string literal");
      if (p->s[p->pos] == '"') {
        p->pos++;
        break;
      }
      if (p->s[p->pos] == '\n') return perr(p, p->pos, "newline in string literal");
      uint32_t cp;
      if ((rc = read_char(p, &cp))) return rc;
      uint32_t ri = (uint32_t)(p->n_ranges / 2);
      if ((rc = add_range(p, cp, cp))) return rc;
      if ((rc = emit(p, rule, (gelem){GELEM_CHAR, 0, ri, 1}))) return rc;
    }
  } else if (c == '[') {
    if ((rc = parse_class(p, rule))) return rc;
  } else if (c == '.') {
    p->pos++;
    uint32_t ri = (uint32_t)(p->n_ranges / 2);
    if ((rc = add_range(p, 0, 0x10FFFF))) return rc;
    if ((rc = emit(p, rule, (gelem){GELEM_CHAR, 0, ri, 1}))) return rc;
  } else if (c == '(') {
    if (++p->depth > GRAMMAR_MAX_NESTING) return perr(p, at, "groups nested too deeply");
    p->pos++;
    long g = rule_new_gen(p, rule);
    if (g < 0) return (int)g;
    if ((rc = parse_alternatives(p, (uint32_t)g))) return rc;
    skip_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != ')') return perr(p, at, "unclosed '('");
    p->pos++;
    p->depth--;
    if ((rc = emit(p, rule, ref_elem((uint32_t)g)))) return rc;
  } else if (is_name_char(c)) {
    size_t b = p->pos;
    while (p->pos < p->len && is_name_char(p->s[p->pos])) p->pos++;
    size_t save = p->pos;
    p->pos = b;
    long r = rule_get(p, p->s + b, save - b);
    p->pos = save;
    if (r < 0) return (int)r;
    if ((rc = emit(p, rule, ref_elem((uint32_t)r)))) return rc;
  } else {
    return perr(p, at, "expected a literal, class, rule name or '('");
  }
  /* repetition */
  if (p->pos >= p->len) return 0;
  c = p->s[p->pos];
  if (c != '*' && c != '+' && c != '?' && c != '{') return 0;
  unsigned long min = 0, max = (unsigned long)-1;
  size_t rat = p->pos++;
  if (c == '+') min = 1;
  else if (c == '?') max = 1;
  else if (c == '{') {
    skip_ws(p);
    if ((rc = read_count(p, &min))) return rc;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') max = min;
    else if (p->pos < p->len && p->s[p->pos] == ',') {
      p->pos++;
      skip_ws(p);
      if (p->pos < p->len && p->s[p->pos] != '}' && (rc = read_count(p, &max))) return rc;
      skip_ws(p);
    }
    if (p->pos >= p->len || p->s[p->pos] != '}') return perr(p, rat, "expected '}' closing {m,n}");
    p->pos++;
    if (max < min) return perr(p, rat, "repetition {m,n} with n < m");
  }
  if (p->rules[rule].alts.n == start) return 0; /* ""* and the like: still empty */
  if (p->rules[rule].alts.n - start > 1 && (rc = wrap_tail(p, rule, start))) return rc;
  gelem x = p->rules[rule].alts.v[start];
  p->rules[rule].alts.n = start;
  return apply_repeat(p, rule, x, min, max);
}

static int parse_sequence(gparser *p, uint32_t rule) {
  for (;;) {
    skip_ws(p);
    if (p->pos >= p->len) break;
    char c = p->s[p->pos];
    if (c == '|' || c == ')') break;
    if (at_rule_start(p)) break;
    int rc = parse_item(p, rule);
    if (rc) return rc;
  }
  return emit(p, rule, END_ELEM);
}

static int parse_alternatives(gparser *p, uint32_t rule) {
  int rc = parse_sequence(p, rule);
  if (rc) return rc;
  for (;;) {
    skip_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != '|') return 0;
    p->pos++;
    if ((rc = parse_sequence(p, rule))) return rc;
  }
}

static int parse_rule(gparser *p) {
  size_t at = p->pos;
  size_t b = p->pos;
  while (p->pos < p->len && is_name_char(p->s[p->pos])) p->pos++;
  if (p->pos == b) return perr(p, at, "expected a rule name");
  size_t e = p->pos;
  while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t')) p->pos++;
  if (p->pos + 3 > p->len || memcmp(p->s + p->pos, "::=", 3) != 0)
    return perr(p, p->pos, "expected '::=' after the rule name");
  long r = rule_get(p, p->s + b, e - b);
  if (r < 0) return (int)r;
  if (p->rules[r].defined) return perr(p, at, "rule defined twice");
  p->rules[r].defined = true;
  p->pos += 3;
  int rc = parse_alternatives(p, (uint32_t)r);
  if (rc) return rc;
  skip_ws(p);
  if (p->pos < p->len && !at_rule_start(p)) return perr(p, p->pos, "unexpected character");
  return 0;
}

static void parser_free(gparser *p) {
  for (size_t i = 0; i < p->n_rules; i++) {
    free(p->rules[i].name);
    free(p->rules[i].alts.v);
  }
  free(p->rules);
  free(p->ranges);
  free(p->index);
}

void grammar_free(grammar *g) {
  if (!g) return;
  if (g->names)
    for (uint32_t i = 0; i < g->n_rules; i++) free(g->names[i]);
  free(g->names);
  free(g->elems);
  free(g->ranges);
  free(g->alt_off);
  free(g->rule_alt);
  free(g);
}

size_t grammar_n_rules(const grammar *g) { return g ? g->n_rules : 0; }

/* Flattens the parser's rules into g (takes the names). */
static int flatten(gparser *p, grammar *g) {
  size_t n_el = 0, n_alt = 0;
  for (size_t i = 0; i < p->n_rules; i++) {
    n_el += p->rules[i].alts.n;
    for (size_t k = 0; k < p->rules[i].alts.n; k++) n_alt += p->rules[i].alts.v[k].type == GELEM_END;
  }
  if (n_el >= UINT32_MAX / 2) return err_set(ERR_TOO_LARGE, "grammar: too many elements");
  g->n_rules = (uint32_t)p->n_rules;
  g->elems = malloc((n_el + 1) * sizeof *g->elems);
  g->alt_off = malloc((n_alt + 1) * sizeof *g->alt_off);
  g->rule_alt = malloc((p->n_rules + 1) * sizeof *g->rule_alt);
  g->names = calloc(p->n_rules + 1, sizeof *g->names);
  g->ranges = malloc((p->n_ranges + 2) * sizeof *g->ranges);
  if (!g->elems || !g->alt_off || !g->rule_alt || !g->names || !g->ranges) return ERR_NOMEM;
  if (p->n_ranges) memcpy(g->ranges, p->ranges, p->n_ranges * sizeof *g->ranges);
  g->n_ranges = (uint32_t)(p->n_ranges / 2);
  uint32_t e = 0, a = 0;
  for (size_t i = 0; i < p->n_rules; i++) {
    g->rule_alt[i] = a;
    g->names[i] = p->rules[i].name;
    p->rules[i].name = NULL;
    bool at_start = true;
    for (size_t k = 0; k < p->rules[i].alts.n; k++) {
      if (at_start) g->alt_off[a++] = e;
      g->elems[e++] = p->rules[i].alts.v[k];
      at_start = p->rules[i].alts.v[k].type == GELEM_END;
    }
  }
  g->rule_alt[p->n_rules] = a;
  g->elems[e] = END_ELEM;
  g->n_elems = e;
  return 0;
}

/* Rejects rules that can reach themselves without consuming input. */
static int check_left_recursion(const grammar *g) {
  uint32_t n = g->n_rules;
  bool *nullable = calloc(n ? n : 1, sizeof *nullable);
  uint8_t *mark = calloc(n ? n : 1, 1);
  uint32_t *work = malloc((n ? n : 1) * 2 * sizeof *work);
  int rc = 0;
  if (!nullable || !mark || !work) {
    rc = ERR_NOMEM;
    goto out;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < n; r++) {
      if (nullable[r]) continue;
      for (uint32_t k = g->rule_alt[r]; k < g->rule_alt[r + 1] && !nullable[r]; k++) {
        uint32_t i = g->alt_off[k];
        while (g->elems[i].type == GELEM_REF && nullable[g->elems[i].a]) i++;
        if (g->elems[i].type == GELEM_END) nullable[r] = changed = true;
      }
    }
  }
  /* iterative DFS over "r can start with s" edges; mark 1 = on path, 2 = done */
  for (uint32_t r0 = 0; r0 < n; r0++) {
    if (mark[r0]) continue;
    size_t sp = 0;
    work[sp++] = r0, work[sp++] = 0; /* rule, next alternative-element cursor */
    mark[r0] = 1;
    while (sp) {
      uint32_t r = work[sp - 2];
      /* enumerate leftmost refs of r: flatten as a list of candidate elements */
      uint32_t cursor = work[sp - 1];
      uint32_t found = UINT32_MAX;
      uint32_t idx = 0;
      for (uint32_t k = g->rule_alt[r]; k < g->rule_alt[r + 1] && found == UINT32_MAX; k++) {
        for (uint32_t i = g->alt_off[k]; g->elems[i].type == GELEM_REF; i++) {
          if (idx++ == cursor) {
            found = g->elems[i].a;
            break;
          }
          if (!nullable[g->elems[i].a]) break;
        }
      }
      if (found == UINT32_MAX) {
        mark[r] = 2;
        sp -= 2;
        continue;
      }
      work[sp - 1] = cursor + 1;
      if (mark[found] == 1) {
        rc = err_set(ERR_PARSE, "grammar: rule '%s' is left-recursive (through '%s')",
                     g->names[found], g->names[r]);
        goto out;
      }
      if (mark[found] == 0) {
        mark[found] = 1;
        work[sp++] = found, work[sp++] = 0;
      }
    }
  }
out:
  free(nullable);
  free(mark);
  free(work);
  return rc;
}

int grammar_parse(const char *text, size_t len, const char *root, grammar **out) {
  *out = NULL;
  if (!text && len) return err_set(ERR_INVALID, "grammar: NULL text");
  if (len > GRAMMAR_MAX_TEXT) return err_set(ERR_TOO_LARGE, "grammar: text of %zu bytes", len);
  if (!root) root = "root";
  gparser p = {.s = text, .len = len};
  grammar *g = NULL;
  int rc = 0;
  skip_ws(&p);
  while (p.pos < p.len) {
    if ((rc = parse_rule(&p))) goto fail;
    skip_ws(&p);
  }
  for (size_t i = 0; i < p.n_rules; i++) {
    if (!p.rules[i].defined) {
      int l, c;
      line_col(&p, p.rules[i].ref_pos, &l, &c);
      rc = err_set(ERR_PARSE, "grammar %d:%d: rule '%s' is not defined", l, c, p.rules[i].name);
      goto fail;
    }
  }
  long root_i = -1;
  for (size_t i = 0; i < p.n_rules; i++)
    if (strcmp(p.rules[i].name, root) == 0) root_i = (long)i;
  if (root_i < 0) {
    rc = err_set(ERR_NOT_FOUND, "grammar: no rule named '%s' (the start rule)", root);
    goto fail;
  }
  g = calloc(1, sizeof *g);
  if (!g) {
    rc = ERR_NOMEM;
    goto fail;
  }
  g->root = (uint32_t)root_i;
  if ((rc = flatten(&p, g))) goto fail;
  if ((rc = check_left_recursion(g))) goto fail;
  parser_free(&p);
  *out = g;
  return 0;
fail:
  parser_free(&p);
  grammar_free(g);
  return rc;
}
