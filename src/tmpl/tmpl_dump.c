/*
 * tmpl_dump.c - the tojson filter as transformers defines it for chat
 * templates: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
 * sort_keys=False). Reproduces CPython's json encoder output byte for byte:
 * ", " and ": " separators by default (", " becomes "," when indent is set),
 * floats as repr(), NaN/Infinity spelled as Python does, non-string keys
 * converted (True -> "true", None -> "null", 1 -> "1"), and control
 * characters escaped as \n, \t, ... or \u00XX. With ensure_ascii every
 * non-ASCII code point becomes \uXXXX (a surrogate pair above U+FFFF).
 *
 * Jinja2's own tojson (which HTML-escapes <, >, & and ') is NOT what chat
 * templates get, because transformers replaces it.
 */
#include <math.h>
#include <string.h>

#include "base/err.h"
#include "tmpl/tmpl_internal.h"

typedef struct dump_opts {
  bool ensure_ascii, sort_keys, has_indent;
  const char *indent;
  size_t indent_n;
  const char *item_sep, *key_sep;
  size_t item_sep_n, key_sep_n;
} dump_opts;

static void dump_str(sb *o, const char *s, size_t n, bool ensure_ascii) {
  sb_addc(o, '"');
  for (size_t i = 0; i < n;) {
    unsigned char ch = (unsigned char)s[i];
    if (ch < 0x80) {
      switch (ch) {
      case '"': sb_adds(o, "\\\""); break;
      case '\\': sb_adds(o, "\\\\"); break;
      case '\n': sb_adds(o, "\\n"); break;
      case '\r': sb_adds(o, "\\r"); break;
      case '\t': sb_adds(o, "\\t"); break;
      case '\b': sb_adds(o, "\\b"); break;
      case '\f': sb_adds(o, "\\f"); break;
      default:
        if (ch < 0x20) sb_addf(o, "\\u%04x", ch);
        else sb_addc(o, (char)ch);
      }
      i++;
      continue;
    }
    uint32_t cp;
    size_t k = utf8_decode(s + i, n - i, &cp);
    if (!ensure_ascii) sb_add(o, s + i, k);
    else if (cp < 0x10000) sb_addf(o, "\\u%04x", cp);
    else {
      uint32_t v = cp - 0x10000;
      sb_addf(o, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
    }
    i += k;
  }
  sb_addc(o, '"');
}

static void dump_float(sb *o, double f) {
  if (isnan(f)) sb_adds(o, "NaN");
  else if (isinf(f)) sb_adds(o, f < 0 ? "-Infinity" : "Infinity");
  else tv_repr_float(o, f);
}

static void newline_indent(sb *o, const dump_opts *op, int level) {
  sb_addc(o, '\n');
  for (int i = 0; i < level; i++) sb_add(o, op->indent, op->indent_n);
}

static int key_order(tm_ctx *c, tmpl_value a, tmpl_value b) {
  int r = tv_compare(a, b);
  if (r == -2) tm_error(c, ERR_TYPE, "tojson sort_keys: cannot compare %s and %s keys", tv_type_name(a), tv_type_name(b));
  return r == 2 ? 0 : r;
}

static void dump(tm_ctx *c, sb *o, tmpl_value v, const dump_opts *op, int level) {
  if (level > 256) tm_error(c, ERR_TOO_LARGE, "tojson: value nested deeper than 256 levels");
  switch (v.type) {
  case TMPL_NONE: sb_adds(o, "null"); return;
  case TMPL_BOOL: sb_adds(o, v.u.b ? "true" : "false"); return;
  case TMPL_INT: sb_addf(o, "%lld", (long long)v.u.i); return;
  case TMPL_FLOAT: dump_float(o, v.u.f); return;
  case TMPL_STRING: dump_str(o, v.u.s->data, v.u.s->len, op->ensure_ascii); return;
  case TMPL_LIST:
    if (v.u.l->n == 0) { sb_adds(o, "[]"); return; }
    sb_addc(o, '[');
    for (size_t i = 0; i < v.u.l->n; i++) {
      if (i) sb_add(o, op->item_sep, op->item_sep_n);
      if (op->has_indent) newline_indent(o, op, level + 1);
      dump(c, o, v.u.l->items[i], op, level + 1);
    }
    if (op->has_indent) newline_indent(o, op, level);
    sb_addc(o, ']');
    return;
  case TMPL_DICT: {
    size_t n = v.u.d->n;
    if (n == 0) { sb_adds(o, "{}"); return; }
    size_t *order = hp_alloc(c->h, n * sizeof *order);
    for (size_t i = 0; i < n; i++) order[i] = i;
    if (op->sort_keys) /* insertion sort keeps it simple; dicts here are small */
      for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && key_order(c, v.u.d->e[order[j - 1]].key, v.u.d->e[order[j]].key) > 0; j--) {
          size_t t = order[j];
          order[j] = order[j - 1];
          order[j - 1] = t;
        }
    sb_addc(o, '{');
    for (size_t i = 0; i < n; i++) {
      tmpl_dict_entry *e = &v.u.d->e[order[i]];
      if (i) sb_add(o, op->item_sep, op->item_sep_n);
      if (op->has_indent) newline_indent(o, op, level + 1);
      switch (e->key.type) {
      case TMPL_STRING: dump_str(o, e->key.u.s->data, e->key.u.s->len, op->ensure_ascii); break;
      case TMPL_INT: sb_addf(o, "\"%lld\"", (long long)e->key.u.i); break;
      case TMPL_BOOL: sb_adds(o, e->key.u.b ? "\"true\"" : "\"false\""); break;
      case TMPL_NONE: sb_adds(o, "\"null\""); break;
      case TMPL_FLOAT: sb_addc(o, '"'); dump_float(o, e->key.u.f); sb_addc(o, '"'); break;
      default: tm_error(c, ERR_TYPE, "tojson: keys must be str, int, float, bool or None, not %s", tv_type_name(e->key));
      }
      sb_add(o, op->key_sep, op->key_sep_n);
      dump(c, o, e->val, op, level + 1);
    }
    if (op->has_indent) newline_indent(o, op, level);
    sb_addc(o, '}');
    return;
  }
  default:
    tm_error(c, v.type == TMPL_UNDEFINED ? ERR_INVALID : ERR_TYPE, "tojson: object of type %s is not JSON serializable",
             v.type == TMPL_UNDEFINED ? "Undefined" : tv_type_name(v));
  }
}

void tm_dump_json(tm_ctx *c, sb *out, tmpl_value v, bool ensure_ascii, tmpl_value indent, tmpl_value separators,
                  bool sort_keys) {
  dump_opts op = {.ensure_ascii = ensure_ascii, .sort_keys = sort_keys};
  char *spaces = NULL;
  if (indent.type == TMPL_INT || indent.type == TMPL_BOOL) {
    int64_t k = indent.type == TMPL_INT ? indent.u.i : indent.u.b;
    if (k > 64) tm_error(c, ERR_TOO_LARGE, "tojson: indent larger than 64");
    if (k < 0) k = 0;
    spaces = hp_alloc(c->h, (size_t)k + 1);
    memset(spaces, ' ', (size_t)k);
    op.indent = spaces;
    op.indent_n = (size_t)k;
    op.has_indent = true;
  } else if (indent.type == TMPL_STRING) {
    op.indent = indent.u.s->data;
    op.indent_n = indent.u.s->len;
    op.has_indent = true;
  } else if (indent.type != TMPL_NONE && indent.type != TMPL_UNDEFINED) {
    tm_error(c, ERR_TYPE, "tojson: indent must be an int or a string, not %s", tv_type_name(indent));
  }
  op.item_sep = op.has_indent ? "," : ", ";
  op.item_sep_n = strlen(op.item_sep);
  op.key_sep = ": ";
  op.key_sep_n = 2;
  if (separators.type == TMPL_LIST) {
    if (separators.u.l->n != 2 || separators.u.l->items[0].type != TMPL_STRING || separators.u.l->items[1].type != TMPL_STRING)
      tm_error(c, ERR_TYPE, "tojson: separators must be a pair of strings");
    op.item_sep = separators.u.l->items[0].u.s->data;
    op.item_sep_n = separators.u.l->items[0].u.s->len;
    op.key_sep = separators.u.l->items[1].u.s->data;
    op.key_sep_n = separators.u.l->items[1].u.s->len;
  } else if (separators.type != TMPL_NONE && separators.type != TMPL_UNDEFINED) {
    tm_error(c, ERR_TYPE, "tojson: separators must be a pair of strings");
  }
  dump(c, out, v, &op, 0);
}
