/*
 * tmpl_lex.c - the template lexer: splits source into text runs and the
 * tokens inside {{ }}, {% %}; drops {# #} comments; applies whitespace
 * control exactly as jinja2's lexer does with trim_blocks=True and
 * lstrip_blocks=True (Hugging Face's chat-template environment).
 *
 * Rules reproduced from jinja2 3.x (jinja2/lexer.py), in the order it applies
 * them:
 *   - newlines are normalized to \n and one trailing newline of the source is
 *     dropped (keep_trailing_newline=False);
 *   - "{%-", "{{-", "{#-" strip all whitespace before the tag; otherwise, for
 *     block and comment tags not opened with "+", the spaces and tabs between
 *     the start of the line and the tag are removed when nothing else is on
 *     that line (lstrip_blocks);
 *   - "-%}", "-}}", "-#}" strip all whitespace after the tag; otherwise one
 *     newline right after "%}" or "#}" is removed (trim_blocks), unless the
 *     tag was closed with "+%}";
 *   - "}}" and "%}" only end a tag when no bracket opened inside it is still
 *     open, so dict literals may contain "}}";
 *   - {% raw %}...{% endraw %} is copied as text.
 *
 * Start reading at tm_lex.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "tmpl/tmpl_internal.h"

_Noreturn void tm_compile_error(tmpl_heap *h, int line, int col, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  err_set(ERR_PARSE, "template:%d:%d: %s", line, col, msg);
  hp_fail(h, ERR_PARSE);
}

typedef struct lexer {
  tmpl_heap *h;
  const char *src;
  size_t len;
  size_t pos;
  /* position cursor for line/col */
  size_t lc_pos;
  int line, col;
  tm_toks *out;
} lexer;

static void lx_where(lexer *L, size_t pos, int *line, int *col) {
  if (pos < L->lc_pos) { L->lc_pos = 0; L->line = 1; L->col = 1; }
  for (; L->lc_pos < pos; L->lc_pos++) {
    if (L->src[L->lc_pos] == '\n') { L->line++; L->col = 1; }
    else if (((unsigned char)L->src[L->lc_pos] & 0xC0) != 0x80) L->col++;
  }
  *line = L->line;
  *col = L->col;
}

static tm_tok *lx_push(lexer *L, tm_tok_kind kind, size_t at) {
  tm_toks *t = L->out;
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    t->t = hp_realloc(L->h, t->t, cap * sizeof(tm_tok));
    t->cap = cap;
  }
  tm_tok *k = &t->t[t->n++];
  memset(k, 0, sizeof *k);
  k->kind = kind;
  lx_where(L, at, &k->line, &k->col);
  return k;
}

static _Noreturn void lx_error(lexer *L, size_t at, const char *msg) {
  int line, col;
  lx_where(L, at, &line, &col);
  tm_compile_error(L->h, line, col, "%s", msg);
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Emits text src[a..b), applying the strip rules for the tag that follows. */
static void lx_text(lexer *L, size_t a, size_t b, char tag, char sign, bool line_starting) {
  if (sign == '-') {
    while (b > a && is_ws(L->src[b - 1])) b--;
  } else if (sign != '+' && tag != '{') {
    /* lstrip_blocks: whitespace between the line start and a block/comment tag */
    size_t l = b;
    while (l > a && L->src[l - 1] != '\n') l--;
    bool at_line_start = (l > a) || line_starting;
    if (at_line_start) {
      bool all_ws = true;
      for (size_t i = l; i < b; i++)
        if (!is_ws(L->src[i])) { all_ws = false; break; }
      if (all_ws) b = l;
    }
  }
  if (b > a) {
    tm_tok *t = lx_push(L, TM_T_TEXT, a);
    t->s = L->src + a;
    t->n = b - a;
  }
}

/* After a tag end at L->pos: '-' strips all whitespace, else trim one \n
 * when trim is allowed. */
static void lx_after_end(lexer *L, bool minus, bool trim) {
  if (minus) {
    while (L->pos < L->len && is_ws(L->src[L->pos])) L->pos++;
  } else if (trim && L->pos < L->len && L->src[L->pos] == '\n') {
    L->pos++;
  }
}

static void lx_string(lexer *L) {
  size_t start = L->pos;
  char q = L->src[L->pos++];
  sb b;
  sb_init(&b, L->h);
  for (;;) {
    if (L->pos >= L->len) lx_error(L, start, "unterminated string literal");
    char c = L->src[L->pos++];
    if (c == q) break;
    if (c != '\\') { sb_addc(&b, c); continue; }
    if (L->pos >= L->len) lx_error(L, start, "unterminated string literal");
    char e = L->src[L->pos++];
    switch (e) {
    case 'n': sb_addc(&b, '\n'); break;
    case 't': sb_addc(&b, '\t'); break;
    case 'r': sb_addc(&b, '\r'); break;
    case 'b': sb_addc(&b, '\b'); break;
    case 'f': sb_addc(&b, '\f'); break;
    case 'v': sb_addc(&b, '\v'); break;
    case 'a': sb_addc(&b, '\a'); break;
    case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
      /* octal escape, up to three digits, as Python's unicode-escape */
      uint32_t cp = (uint32_t)(e - '0');
      for (int k = 0; k < 2 && L->pos < L->len && L->src[L->pos] >= '0' && L->src[L->pos] <= '7'; k++)
        cp = cp * 8 + (uint32_t)(L->src[L->pos++] - '0');
      char u8[4];
      sb_add(&b, u8, utf8_encode(cp, u8));
      break;
    }
    case '\\': sb_addc(&b, '\\'); break;
    case '\'': sb_addc(&b, '\''); break;
    case '"': sb_addc(&b, '"'); break;
    case '\n': break;
    case 'x': case 'u': case 'U': {
      int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      uint32_t cp = 0;
      for (int i = 0; i < nd; i++) {
        if (L->pos >= L->len) lx_error(L, start, "truncated escape in string literal");
        char h = L->src[L->pos++];
        int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) lx_error(L, L->pos - 1, "bad hex digit in string escape");
        cp = cp * 16 + (uint32_t)d;
      }
      if (cp > 0x10FFFF) lx_error(L, start, "escape outside Unicode range");
      char u8[4];
      sb_add(&b, u8, utf8_encode(cp, u8));
      break;
    }
    default: /* Python keeps unknown escapes as written */
      sb_addc(&b, '\\');
      sb_addc(&b, e);
    }
  }
  tm_tok *t = lx_push(L, TM_T_STRING, start);
  t->s = b.data ? b.data : "";
  t->n = b.len;
}

/* A number literal: digits (with '_' separators), an optional fraction and
 * exponent. Its characters are copied into a fixed buffer for strtod/strtoll;
 * a literal that does not fit is a compile error rather than a silently
 * truncated value (no real template writes a 127-digit number). */
static void lx_number(lexer *L) {
  size_t start = L->pos;
  char tmp[128];
  size_t n = 0;
  bool is_float = false;
  while (L->pos < L->len && (is_digit(L->src[L->pos]) || L->src[L->pos] == '_')) {
    if (L->src[L->pos] != '_' && n < sizeof tmp - 1) tmp[n++] = L->src[L->pos];
    L->pos++;
  }
  if (L->pos + 1 < L->len && L->src[L->pos] == '.' && is_digit(L->src[L->pos + 1])) {
    is_float = true;
    if (n < sizeof tmp - 1) tmp[n++] = '.';
    L->pos++;
    while (L->pos < L->len && (is_digit(L->src[L->pos]) || L->src[L->pos] == '_')) {
      if (L->src[L->pos] != '_' && n < sizeof tmp - 1) tmp[n++] = L->src[L->pos];
      L->pos++;
    }
  }
  if (L->pos < L->len && (L->src[L->pos] == 'e' || L->src[L->pos] == 'E')) {
    size_t p = L->pos + 1;
    if (p < L->len && (L->src[p] == '+' || L->src[p] == '-')) p++;
    if (p < L->len && is_digit(L->src[p])) {
      is_float = true;
      if (n < sizeof tmp - 1) tmp[n++] = 'e';
      for (size_t i = L->pos + 1; i < p; i++)
        if (n < sizeof tmp - 1) tmp[n++] = L->src[i];
      L->pos = p;
      while (L->pos < L->len && (is_digit(L->src[L->pos]) || L->src[L->pos] == '_')) {
        if (L->src[L->pos] != '_' && n < sizeof tmp - 1) tmp[n++] = L->src[L->pos];
        L->pos++;
      }
    }
  }
  if (n >= sizeof tmp - 1) lx_error(L, start, "number literal longer than 126 characters");
  tmp[n] = 0;
  if (is_float) {
    tm_tok *t = lx_push(L, TM_T_FLOAT, start);
    t->f = strtod(tmp, NULL);
  } else {
    errno = 0;
    long long v = strtoll(tmp, NULL, 10);
    if (errno == ERANGE) lx_error(L, start, "integer literal too large");
    tm_tok *t = lx_push(L, TM_T_INT, start);
    t->i = v;
  }
}

static const char *const OPS2[] = {"//", "**", "==", "!=", "<=", ">="};
static const char OPS1[] = "+-/*%~[](){}<>=.:|,;";

/* Tokens of one {{ }} or {% %} tag; returns after consuming the end. */
static void lx_tag(lexer *L, bool block, size_t tag_start) {
  char stack[64];
  int depth = 0;
  for (;;) {
    while (L->pos < L->len && is_ws(L->src[L->pos])) L->pos++;
    if (L->pos >= L->len) lx_error(L, tag_start, block ? "unclosed block tag '{%'" : "unclosed variable tag '{{'");
    const char *p = L->src + L->pos;
    size_t left = L->len - L->pos;
    if (depth == 0) {
      const char *end = block ? "%}" : "}}";
      bool minus = left >= 3 && p[0] == '-' && memcmp(p + 1, end, 2) == 0;
      bool plus = block && left >= 3 && p[0] == '+' && memcmp(p + 1, end, 2) == 0;
      if (minus || plus || (left >= 2 && memcmp(p, end, 2) == 0)) {
        lx_push(L, block ? TM_T_BLOCK_END : TM_T_VAR_END, L->pos);
        L->pos += (minus || plus) ? 3 : 2;
        lx_after_end(L, minus, block && !plus);
        return;
      }
    }
    char c = *p;
    if (is_name0(c)) {
      size_t s = L->pos;
      while (L->pos < L->len && (is_name0(L->src[L->pos]) || is_digit(L->src[L->pos]))) L->pos++;
      tm_tok *t = lx_push(L, TM_T_NAME, s);
      t->s = L->src + s;
      t->n = L->pos - s;
      continue;
    }
    if (is_digit(c)) { lx_number(L); continue; }
    if (c == '\'' || c == '"') { lx_string(L); continue; }
    size_t oplen = 0;
    for (size_t i = 0; i < ARRAY_LEN(OPS2); i++)
      if (left >= 2 && memcmp(p, OPS2[i], 2) == 0) { oplen = 2; break; }
    if (!oplen && c && strchr(OPS1, c)) oplen = 1;
    if (!oplen) {
      char msg[64];
      snprintf(msg, sizeof msg, "unexpected character '%c'", c);
      lx_error(L, L->pos, msg);
    }
    if (oplen == 1) {
      if (c == '(' || c == '[' || c == '{') {
        if (depth >= (int)sizeof stack) lx_error(L, L->pos, "brackets nested too deeply");
        stack[depth++] = c;
      } else if (c == ')' || c == ']' || c == '}') {
        char want = c == ')' ? '(' : c == ']' ? '[' : '{';
        if (depth == 0 || stack[depth - 1] != want) lx_error(L, L->pos, "unbalanced bracket");
        depth--;
      }
    }
    tm_tok *t = lx_push(L, TM_T_OP, L->pos);
    t->s = p;
    t->n = oplen;
    L->pos += oplen;
  }
}

/* At "{%": is this "{% raw %}"? Returns the position after it or 0. */
static size_t lx_raw_open(lexer *L, size_t at, bool *minus_end) {
  size_t p = at + 2;
  if (p < L->len && (L->src[p] == '-' || L->src[p] == '+')) p++;
  while (p < L->len && is_ws(L->src[p])) p++;
  if (p + 3 > L->len || memcmp(L->src + p, "raw", 3) != 0) return 0;
  p += 3;
  if (p < L->len && (is_name0(L->src[p]) || is_digit(L->src[p]))) return 0;
  while (p < L->len && is_ws(L->src[p])) p++;
  *minus_end = false;
  if (p < L->len && (L->src[p] == '-' || L->src[p] == '+')) { *minus_end = L->src[p] == '-'; p++; }
  if (p + 2 > L->len || memcmp(L->src + p, "%}", 2) != 0) return 0;
  return p + 2;
}

static void lx_raw(lexer *L, size_t tag_start) {
  /* find {% [-+]? ws endraw ws [-+]? %} */
  for (size_t i = L->pos; i + 1 < L->len; i++) {
    if (L->src[i] != '{' || L->src[i + 1] != '%') continue;
    size_t p = i + 2;
    char sign = 0;
    if (p < L->len && (L->src[p] == '-' || L->src[p] == '+')) sign = L->src[p++];
    while (p < L->len && is_ws(L->src[p])) p++;
    if (p + 6 > L->len || memcmp(L->src + p, "endraw", 6) != 0) continue;
    p += 6;
    while (p < L->len && is_ws(L->src[p])) p++;
    char esign = 0;
    if (p < L->len && (L->src[p] == '-' || L->src[p] == '+')) esign = L->src[p++];
    if (p + 2 > L->len || memcmp(L->src + p, "%}", 2) != 0) continue;
    lx_text(L, L->pos, i, '%', sign, false);
    L->pos = p + 2;
    lx_after_end(L, esign == '-', esign != '+');
    return;
  }
  lx_error(L, tag_start, "unclosed raw block: missing '{% endraw %}'");
}

void tm_lex(tmpl_heap *h, const char *src0, size_t len0, tm_toks *toks) {
  /* normalize newlines, drop one trailing newline */
  char *src = hp_alloc(h, len0 + 1);
  size_t len = 0;
  for (size_t i = 0; i < len0; i++) {
    if (src0[i] == '\r') {
      src[len++] = '\n';
      if (i + 1 < len0 && src0[i + 1] == '\n') i++;
    } else src[len++] = src0[i];
  }
  if (len && src[len - 1] == '\n') len--;
  src[len] = 0;
  lexer L = {.h = h, .src = src, .len = len, .line = 1, .col = 1, .out = toks};
  bool line_starting = true;
  while (L.pos < L.len) {
    /* next tag start */
    size_t i = L.pos;
    const char *found = NULL;
    while (i + 1 < L.len) {
      const char *f = memchr(L.src + i, '{', L.len - i - 1);
      if (!f) break;
      char n = f[1];
      if (n == '{' || n == '%' || n == '#') { found = f; break; }
      i = (size_t)(f - L.src) + 1;
    }
    if (!found) {
      lx_text(&L, L.pos, L.len, '{', 0, false);
      break;
    }
    size_t at = (size_t)(found - L.src);
    char tag = found[1];
    char sign = (at + 2 < L.len && (found[2] == '-' || found[2] == '+')) ? found[2] : 0;
    if (tag == '{' && sign == '+') sign = 0; /* "+" only means something for blocks */
    bool minus_end;
    size_t raw_end = tag == '%' ? lx_raw_open(&L, at, &minus_end) : 0;
    lx_text(&L, L.pos, at, tag, sign, line_starting);
    if (tag == '#') {
      size_t p = at + 2;
      const char *e = NULL;
      for (size_t k = p; k + 1 < L.len; k++)
        if (L.src[k] == '#' && L.src[k + 1] == '}') { e = L.src + k; break; }
      if (!e) lx_error(&L, at, "unclosed comment: missing '#}'");
      size_t ep = (size_t)(e - L.src);
      bool minus = ep > p && L.src[ep - 1] == '-';
      bool plus = ep > p && L.src[ep - 1] == '+';
      L.pos = ep + 2;
      lx_after_end(&L, minus, !plus);
    } else if (raw_end) {
      L.pos = raw_end;
      lx_after_end(&L, minus_end, true);
      lx_raw(&L, at);
    } else {
      lx_push(&L, tag == '%' ? TM_T_BLOCK_BEGIN : TM_T_VAR_BEGIN, at);
      L.pos = at + 2 + (sign ? 1 : 0);
      lx_tag(&L, tag == '%', at);
    }
    line_starting = L.pos > 0 && L.src[L.pos - 1] == '\n';
  }
  lx_push(&L, TM_T_EOF, L.len);
}
