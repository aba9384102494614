/*
 * tmpl_eval.c - the tree-walking interpreter: statements write text, the
 * expression evaluator follows Python/jinja2 semantics, and tmpl_render is
 * the entry point.
 *
 * Scopes follow jinja2: a for-loop body gets a fresh scope on every
 * iteration (a {% set %} inside a loop is gone after it; namespaces exist for
 * that), macros get a scope whose parent is the scope they were defined in,
 * if-blocks share their enclosing scope. Lookup walks the chain up to the
 * caller's globals and then the builtins (range, namespace, dict,
 * raise_exception, strftime_now).
 *
 * Undefined follows jinja2's default Undefined: printing it gives "", it is
 * false, iterating it gives nothing, len() is 0, but taking an attribute or
 * item of it, calling it, or doing arithmetic with it is an error.
 *
 * Errors and limits longjmp out through hp_fail (see tmpl_internal.h) with a
 * "template:LINE:COL: ..." detail naming the node being evaluated.
 *
 * Start reading at tmpl_render, then exec_node and eval.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "tmpl/tmpl_internal.h"

#define MAX_MACRO_DEPTH 100
#define MAX_ITERATIONS 1000000u
#define MAX_EVAL_DEPTH 1000 /* nested eval/exec frames: bounds the C stack */
#define MAX_OUTPUT ((size_t)32 << 20)
#define MAX_MEMORY ((size_t)256 << 20)

enum { EXEC_OK, EXEC_BREAK, EXEC_CONTINUE };

_Noreturn void tm_error(tm_ctx *c, int code, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (c->at) err_set(code, "template:%d:%d: %s", c->at->line, c->at->col, msg);
  else err_set(code, "template: %s", msg);
  hp_fail(c->h, code);
}

static tm_scope *scope_new(tm_ctx *c, tm_scope *parent) {
  tm_scope *s = hp_alloc(c->h, sizeof *s);
  s->parent = parent;
  s->vars = tv_dict(c->h);
  return s;
}

static bool scope_lookup(tm_scope *s, const char *name, size_t n, tmpl_value *out) {
  for (; s; s = s->parent)
    if (s->vars.type == TMPL_DICT && tv_dict_get_s(s->vars, name, n, out)) return true;
  return false;
}

static void scope_set(tm_ctx *c, tm_scope *s, const char *name, size_t n, tmpl_value v) {
  tv_dict_set(c->h, s->vars, tv_str(c->h, name, n), v);
}

static tmpl_value eval(tm_ctx *c, const tm_node *n, tm_scope *s);
static int exec_node(tm_ctx *c, const tm_node *n, tm_scope *s);
static int run_for(tm_ctx *c, const tm_node *n, tm_scope *s, tmpl_value src, int depth0);

/* -------------------------------------------------------------- access */

tmpl_value tm_getattr(tm_ctx *c, tmpl_value obj, const char *name, size_t n) {
  tmpl_value v;
  switch (obj.type) {
  case TMPL_UNDEFINED: tm_error(c, ERR_INVALID, "cannot read attribute '%.*s' of an undefined value", (int)n, name);
  case TMPL_DICT:
    /* jinja2 tries getattr first: dict methods shadow keys of the same name */
    if (tm_method_exists(obj, name, n)) break;
    if (tv_dict_get_s(obj, name, n, &v)) return v;
    return tmpl_undefined();
  case TMPL_NAMESPACE:
    if (tv_dict_get_s(obj, name, n, &v)) return v;
    return tmpl_undefined();
  case TMPL_STRING:
  case TMPL_LIST:
    if (tm_method_exists(obj, name, n)) break;
    return tmpl_undefined();
  case TMPL_FUNC:
    if (obj.u.fn->kind == TM_FUNC_LOOP && tv_dict_get_s(obj.u.fn->self, name, n, &v)) return v;
    return tmpl_undefined();
  default: return tmpl_undefined();
  }
  char *nm = hp_alloc(c->h, n + 1);
  memcpy(nm, name, n);
  tmpl_value f = tv_func(c->h, TM_FUNC_METHOD, nm);
  f.u.fn->self = obj;
  return f;
}

static bool as_index(tmpl_value k, int64_t *out) {
  if (k.type == TMPL_INT) { *out = k.u.i; return true; }
  if (k.type == TMPL_BOOL) { *out = k.u.b; return true; }
  return false;
}

tmpl_value tm_getitem(tm_ctx *c, tmpl_value obj, tmpl_value key) {
  tmpl_value v;
  int64_t i;
  switch (obj.type) {
  case TMPL_UNDEFINED: tm_error(c, ERR_INVALID, "cannot subscript an undefined value");
  case TMPL_DICT:
    if (key.type == TMPL_LIST || key.type == TMPL_DICT) tm_error(c, ERR_TYPE, "unhashable type: '%s'", tv_type_name(key));
    if (tv_dict_get(obj, key, &v)) return v;
    break;
  case TMPL_LIST:
    if (as_index(key, &i)) {
      int64_t n = (int64_t)obj.u.l->n;
      if (i < 0) i += n;
      if (i < 0 || i >= n) return tmpl_undefined();
      return obj.u.l->items[i];
    }
    break;
  case TMPL_STRING:
    if (as_index(key, &i)) {
      int64_t n = (int64_t)tv_len_cp(obj);
      if (i < 0) i += n;
      if (i < 0 || i >= n) return tmpl_undefined();
      const char *d = obj.u.s->data;
      size_t off = obj.u.s->ascii ? (size_t)i : utf8_offset(d, obj.u.s->len, (size_t)i);
      uint32_t cp;
      size_t k = utf8_decode(d + off, obj.u.s->len - off, &cp);
      return tv_str(c->h, d + off, k);
    }
    break;
  default: break;
  }
  if (key.type == TMPL_STRING) return tm_getattr(c, obj, key.u.s->data, key.u.s->len);
  return tmpl_undefined();
}

tmpl_value tm_iterate(tm_ctx *c, tmpl_value v) {
  switch (v.type) {
  case TMPL_UNDEFINED: return tv_list(c->h, 0);
  case TMPL_LIST: return v;
  case TMPL_DICT: {
    tmpl_value l = tv_list(c->h, v.u.d->n);
    for (size_t i = 0; i < v.u.d->n; i++) tv_list_push(c->h, l, v.u.d->e[i].key);
    return l;
  }
  case TMPL_STRING: {
    tmpl_value l = tv_list(c->h, v.u.s->len);
    const char *d = v.u.s->data;
    for (size_t i = 0; i < v.u.s->len;) {
      uint32_t cp;
      size_t k = utf8_decode(d + i, v.u.s->len - i, &cp);
      tv_list_push(c->h, l, tv_str(c->h, d + i, k));
      i += k;
    }
    return l;
  }
  default: tm_error(c, ERR_TYPE, "'%s' object is not iterable", tv_type_name(v));
  }
}

static int64_t slice_bound(tm_ctx *c, tmpl_value v, int64_t len, int64_t step, bool is_start) {
  if (v.type == TMPL_NONE || v.type == TMPL_UNDEFINED) {
    if (step > 0) return is_start ? 0 : len;
    return is_start ? len - 1 : -1;
  }
  int64_t i;
  if (!as_index(v, &i)) tm_error(c, ERR_TYPE, "slice indices must be integers or None");
  if (i < 0) {
    i += len;
    if (i < 0) i = step > 0 ? 0 : -1;
  } else if (i >= len) {
    i = step > 0 ? len : len - 1;
  }
  return i;
}

static tmpl_value do_slice(tm_ctx *c, tmpl_value obj, tmpl_value a, tmpl_value b, tmpl_value st) {
  int64_t step = 1;
  if (st.type != TMPL_NONE && st.type != TMPL_UNDEFINED && !as_index(st, &step))
    tm_error(c, ERR_TYPE, "slice step must be an integer");
  if (step == 0) tm_error(c, ERR_INVALID, "slice step cannot be zero");
  if (obj.type == TMPL_UNDEFINED) tm_error(c, ERR_INVALID, "cannot slice an undefined value");
  if (obj.type == TMPL_LIST) {
    int64_t len = (int64_t)obj.u.l->n;
    int64_t lo = slice_bound(c, a, len, step, true), hi = slice_bound(c, b, len, step, false);
    tmpl_value r = tv_list(c->h, 0);
    r.u.l->tuple = obj.u.l->tuple;
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) tv_list_push(c->h, r, obj.u.l->items[i]);
    return r;
  }
  if (obj.type == TMPL_STRING) {
    tmpl_value chars = obj.u.s->ascii ? obj : tm_iterate(c, obj);
    int64_t len = (int64_t)(obj.u.s->ascii ? obj.u.s->len : chars.u.l->n);
    int64_t lo = slice_bound(c, a, len, step, true), hi = slice_bound(c, b, len, step, false);
    if (obj.u.s->ascii && step == 1) return tv_str(c->h, obj.u.s->data + lo, hi > lo ? (size_t)(hi - lo) : 0);
    sb o;
    sb_init(&o, c->h);
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) {
      if (obj.u.s->ascii) sb_addc(&o, obj.u.s->data[i]);
      else sb_add(&o, chars.u.l->items[i].u.s->data, chars.u.l->items[i].u.s->len);
    }
    return tv_sb(&o);
  }
  tm_error(c, ERR_TYPE, "'%s' object is not subscriptable", tv_type_name(obj));
}

/* ------------------------------------------------------------ operators */

tmpl_value tm_to_string(tm_ctx *c, tmpl_value v) {
  if (v.type == TMPL_STRING) return v;
  sb o;
  sb_init(&o, c->h);
  tv_to_str(&o, v);
  return tv_sb(&o);
}

tmpl_value tm_str_mod(tm_ctx *c, tmpl_value fmt, tmpl_value args) {
  /* printf-style "%s" % x: %s %r %d %i %f %% with optional width/precision */
  tmpl_value list = args;
  if (!(args.type == TMPL_LIST && args.u.l->tuple)) {
    list = tv_list(c->h, 1);
    tv_list_push(c->h, list, args);
  }
  size_t ai = 0;
  sb o;
  sb_init(&o, c->h);
  const char *f = fmt.u.s->data;
  size_t n = fmt.u.s->len;
  for (size_t i = 0; i < n; i++) {
    if (f[i] != '%') { sb_addc(&o, f[i]); continue; }
    if (i + 1 < n && f[i + 1] == '%') { sb_addc(&o, '%'); i++; continue; }
    char spec[32];
    size_t k = 0;
    spec[k++] = '%';
    i++;
    while (i < n && k < 20 && strchr("-+ 0#.0123456789", f[i])) spec[k++] = f[i++];
    if (i >= n) tm_error(c, ERR_INVALID, "incomplete format");
    char conv = f[i];
    if (ai >= list.u.l->n) tm_error(c, ERR_INVALID, "not enough arguments for format string");
    tmpl_value a = list.u.l->items[ai++];
    if (conv == 's' || conv == 'r') {
      tmpl_value s = conv == 's' ? tm_to_string(c, a) : tmpl_undefined();
      if (conv == 'r') {
        sb r;
        sb_init(&r, c->h);
        tv_repr(&r, a);
        s = tv_sb(&r);
      }
      spec[k++] = 's';
      spec[k] = 0;
      sb_addf(&o, spec, s.u.s->data);
    } else if (conv == 'd' || conv == 'i') {
      if (!tv_is_number(a)) tm_error(c, ERR_TYPE, "%%d format: a number is required, not %s", tv_type_name(a));
      memcpy(spec + k, "lld", 4);
      sb_addf(&o, spec, (long long)(a.type == TMPL_FLOAT ? (int64_t)a.u.f : a.type == TMPL_INT ? a.u.i : a.u.b));
    } else if (conv == 'f' || conv == 'e' || conv == 'g') {
      if (!tv_is_number(a)) tm_error(c, ERR_TYPE, "%%%c format: a number is required, not %s", conv, tv_type_name(a));
      spec[k++] = conv;
      spec[k] = 0;
      sb_addf(&o, spec, tv_num(a));
    } else tm_error(c, ERR_UNSUPPORTED, "unsupported format character '%c'", conv);
  }
  if (ai < list.u.l->n) tm_error(c, ERR_INVALID, "not all arguments converted during string formatting");
  return tv_sb(&o);
}

static _Noreturn void bad_operands(tm_ctx *c, const char *op, tmpl_value a, tmpl_value b) {
  if (a.type == TMPL_UNDEFINED || b.type == TMPL_UNDEFINED)
    tm_error(c, ERR_INVALID, "undefined value used with operator '%s'", op);
  tm_error(c, ERR_TYPE, "unsupported operand types for %s: '%s' and '%s'", op, tv_type_name(a), tv_type_name(b));
}

static int64_t ival(tmpl_value v) { return v.type == TMPL_INT ? v.u.i : v.u.b; }

static tmpl_value repeat(tm_ctx *c, tmpl_value seq, int64_t times) {
  if (times < 0) times = 0;
  size_t unit = seq.type == TMPL_STRING ? seq.u.s->len : seq.u.l->n, total;
  if (!size_mul(unit, (size_t)times, &total) || total > MAX_OUTPUT) tm_error(c, ERR_TOO_LARGE, "repetition too large");
  if (seq.type == TMPL_STRING) {
    sb o;
    sb_init(&o, c->h);
    for (int64_t i = 0; i < times; i++) sb_add(&o, seq.u.s->data, seq.u.s->len);
    return tv_sb(&o);
  }
  tmpl_value l = tv_list(c->h, total);
  for (int64_t i = 0; i < times; i++)
    for (size_t j = 0; j < unit; j++) tv_list_push(c->h, l, seq.u.l->items[j]);
  return l;
}

tmpl_value tm_binop(tm_ctx *c, int op, tmpl_value a, tmpl_value b) {
  static const char *const names[] = {"", "+", "-", "*", "/", "//", "%", "**"};
  if (op == TM_OP_CONCAT) {
    sb o;
    sb_init(&o, c->h);
    tv_to_str(&o, a);
    tv_to_str(&o, b);
    return tv_sb(&o);
  }
  bool nums = tv_is_number(a) && tv_is_number(b);
  bool ints = nums && a.type != TMPL_FLOAT && b.type != TMPL_FLOAT;
  int64_t r;
  switch (op) {
  case TM_OP_ADD:
    if (ints) {
      if (__builtin_add_overflow(ival(a), ival(b), &r)) tm_error(c, ERR_RANGE, "integer overflow in '+'");
      return tmpl_int(r);
    }
    if (nums) return tmpl_float(tv_num(a) + tv_num(b));
    if (a.type == TMPL_STRING && b.type == TMPL_STRING) {
      bool safe = a.u.s->safe || b.u.s->safe;
      if (safe) { /* markupsafe: Markup + str escapes the str */
        if (!a.u.s->safe) a = tm_html_escape(c, a);
        if (!b.u.s->safe) b = tm_html_escape(c, b);
      }
      sb o;
      sb_init(&o, c->h);
      sb_add(&o, a.u.s->data, a.u.s->len);
      sb_add(&o, b.u.s->data, b.u.s->len);
      tmpl_value cat = tv_sb(&o);
      cat.u.s->safe = safe;
      return cat;
    }
    if (a.type == TMPL_LIST && b.type == TMPL_LIST && a.u.l->tuple == b.u.l->tuple) {
      tmpl_value l = tv_list(c->h, a.u.l->n + b.u.l->n);
      l.u.l->tuple = a.u.l->tuple;
      for (size_t i = 0; i < a.u.l->n; i++) tv_list_push(c->h, l, a.u.l->items[i]);
      for (size_t i = 0; i < b.u.l->n; i++) tv_list_push(c->h, l, b.u.l->items[i]);
      return l;
    }
    break;
  case TM_OP_SUB:
    if (ints) {
      if (__builtin_sub_overflow(ival(a), ival(b), &r)) tm_error(c, ERR_RANGE, "integer overflow in '-'");
      return tmpl_int(r);
    }
    if (nums) return tmpl_float(tv_num(a) - tv_num(b));
    break;
  case TM_OP_MUL:
    if (ints) {
      if (__builtin_mul_overflow(ival(a), ival(b), &r)) tm_error(c, ERR_RANGE, "integer overflow in '*'");
      return tmpl_int(r);
    }
    if (nums) return tmpl_float(tv_num(a) * tv_num(b));
    if ((a.type == TMPL_STRING || a.type == TMPL_LIST) && (b.type == TMPL_INT || b.type == TMPL_BOOL)) return repeat(c, a, ival(b));
    if ((b.type == TMPL_STRING || b.type == TMPL_LIST) && (a.type == TMPL_INT || a.type == TMPL_BOOL)) return repeat(c, b, ival(a));
    break;
  case TM_OP_DIV:
    if (nums) {
      if (tv_num(b) == 0) tm_error(c, ERR_INVALID, "division by zero");
      return tmpl_float(tv_num(a) / tv_num(b));
    }
    break;
  case TM_OP_FLOORDIV:
  case TM_OP_MOD:
    if (ints) {
      int64_t x = ival(a), y = ival(b);
      if (y == 0) tm_error(c, ERR_INVALID, "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) tm_error(c, ERR_RANGE, "integer overflow in '//'");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) { q--; m += y; }
      return tmpl_int(op == TM_OP_FLOORDIV ? q : m);
    }
    if (nums) {
      double x = tv_num(a), y = tv_num(b);
      if (y == 0) tm_error(c, ERR_INVALID, "float division or modulo by zero");
      double m = fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      if (op == TM_OP_MOD) return tmpl_float(m);
      return tmpl_float(floor((x - m) / y + 0.5) == (x - m) / y ? (x - m) / y : floor(x / y));
    }
    if (op == TM_OP_MOD && a.type == TMPL_STRING) return tm_str_mod(c, a, b);
    break;
  case TM_OP_POW:
    if (ints && ival(b) >= 0) {
      int64_t base = ival(a), e = ival(b), acc = 1;
      while (e > 0) {
        if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) tm_error(c, ERR_RANGE, "integer overflow in '**'");
        e >>= 1;
        if (e && __builtin_mul_overflow(base, base, &base)) tm_error(c, ERR_RANGE, "integer overflow in '**'");
      }
      return tmpl_int(acc);
    }
    if (nums) return tmpl_float(pow(tv_num(a), tv_num(b)));
    break;
  }
  bad_operands(c, op >= 1 && op <= 7 ? names[op] : "?", a, b);
}

static bool contains(tm_ctx *c, tmpl_value item, tmpl_value seq) {
  switch (seq.type) {
  case TMPL_UNDEFINED: return false;
  case TMPL_STRING:
    if (item.type != TMPL_STRING) tm_error(c, ERR_TYPE, "'in <string>' requires string as left operand, not %s", tv_type_name(item));
    if (item.u.s->len == 0) return true;
    return memmem(seq.u.s->data, seq.u.s->len, item.u.s->data, item.u.s->len) != NULL;
  case TMPL_LIST:
    for (size_t i = 0; i < seq.u.l->n; i++)
      if (tv_equal(seq.u.l->items[i], item)) return true;
    return false;
  case TMPL_DICT: {
    tmpl_value v;
    return tv_dict_get(seq, item, &v);
  }
  default: tm_error(c, ERR_TYPE, "argument of type '%s' is not iterable", tv_type_name(seq));
  }
}

static bool compare(tm_ctx *c, int op, tmpl_value a, tmpl_value b) {
  switch (op) {
  case TM_OP_EQ: return tv_equal(a, b);
  case TM_OP_NE: return !tv_equal(a, b);
  case TM_OP_IN: return contains(c, a, b);
  case TM_OP_NOTIN: return !contains(c, a, b);
  default: break;
  }
  int r = tv_compare(a, b);
  if (r == -2) {
    static const char *const nm[] = {"<", "<=", ">", ">="};
    bad_operands(c, nm[op - TM_OP_LT], a, b);
  }
  if (r == 2) return false;
  switch (op) {
  case TM_OP_LT: return r < 0;
  case TM_OP_LE: return r <= 0;
  case TM_OP_GT: return r > 0;
  default: return r >= 0;
  }
}

/* ----------------------------------------------------------- calls */

static void eval_args(tm_ctx *c, const tm_node *n, tm_scope *s, tmpl_value **args, size_t *n_args, tmpl_value *kwargs) {
  tmpl_value pos = tv_list(c->h, n->n_kids);
  *kwargs = tmpl_undefined();
  for (size_t i = 0; i < n->n_kids; i++) {
    const tm_node *k = n->kids[i];
    if (k->kind == TM_N_KWARG && k->op == 1) { /* *iterable */
      tmpl_value it = tm_iterate(c, eval(c, k->a, s));
      for (size_t j = 0; j < it.u.l->n; j++) tv_list_push(c->h, pos, it.u.l->items[j]);
    } else if (k->kind == TM_N_KWARG && k->op == 2) { /* **mapping */
      tmpl_value d = eval(c, k->a, s);
      c->at = k;
      if (d.type != TMPL_DICT) tm_error(c, ERR_TYPE, "argument after ** must be a mapping, not %s", tv_type_name(d));
      if (kwargs->type != TMPL_DICT) *kwargs = tv_dict(c->h);
      for (size_t j = 0; j < d.u.d->n; j++) {
        if (d.u.d->e[j].key.type != TMPL_STRING) tm_error(c, ERR_TYPE, "keywords must be strings");
        tv_dict_set(c->h, *kwargs, d.u.d->e[j].key, d.u.d->e[j].val);
      }
    } else if (k->kind == TM_N_KWARG) {
      if (kwargs->type != TMPL_DICT) *kwargs = tv_dict(c->h);
      tv_dict_set(c->h, *kwargs, tv_str(c->h, k->str, k->str_n), eval(c, k->a, s));
    } else {
      if (kwargs->type == TMPL_DICT) {
        c->at = k;
        tm_error(c, ERR_PARSE, "positional argument follows keyword argument");
      }
      tv_list_push(c->h, pos, eval(c, k, s));
    }
  }
  *args = pos.u.l->items;
  *n_args = pos.u.l->n;
}

static tmpl_value call_macro(tm_ctx *c, tmpl_func *f, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  const tm_node *m = f->macro;
  if (c->depth >= MAX_MACRO_DEPTH) tm_error(c, ERR_TOO_LARGE, "macro calls nested deeper than %d (infinite recursion?)", MAX_MACRO_DEPTH);
  tm_scope *s = scope_new(c, f->closure);
  tmpl_value varargs = tv_list(c->h, 0);
  varargs.u.l->tuple = true;
  tmpl_value kw = tv_dict(c->h);
  for (size_t i = 0; i < n; i++) {
    if (i < m->n_kids) scope_set(c, s, m->kids[i]->str, m->kids[i]->str_n, args[i]);
    else tv_list_push(c->h, varargs, args[i]);
  }
  if (kwargs.type == TMPL_DICT)
    for (size_t i = 0; i < kwargs.u.d->n; i++) {
      tmpl_value k = kwargs.u.d->e[i].key;
      bool is_param = false;
      for (size_t j = 0; j < m->n_kids; j++)
        if (m->kids[j]->str_n == k.u.s->len && memcmp(m->kids[j]->str, k.u.s->data, k.u.s->len) == 0) {
          if (j < n) tm_error(c, ERR_INVALID, "macro '%s' got multiple values for argument '%s'", f->name, k.u.s->data);
          is_param = true;
        }
      if (is_param) tv_dict_set(c->h, s->vars, k, kwargs.u.d->e[i].val);
      else if (strcmp(k.u.s->data, "caller") == 0) tv_dict_set(c->h, s->vars, k, kwargs.u.d->e[i].val);
      else tv_dict_set(c->h, kw, k, kwargs.u.d->e[i].val);
    }
  /* defaults, evaluated in the macro's scope at call time as jinja2 does */
  for (size_t j = 0; j < m->n_kids; j++) {
    tmpl_value v;
    if (tv_dict_get_s(s->vars, m->kids[j]->str, m->kids[j]->str_n, &v)) continue;
    if (m->kids[j]->a) scope_set(c, s, m->kids[j]->str, m->kids[j]->str_n, eval(c, m->kids[j]->a, s));
    else scope_set(c, s, m->kids[j]->str, m->kids[j]->str_n, tmpl_undefined());
  }
  scope_set(c, s, "varargs", 7, varargs);
  scope_set(c, s, "kwargs", 6, kw);
  tmpl_value has_caller;
  if (!tv_dict_get_s(s->vars, "caller", 6, &has_caller)) scope_set(c, s, "caller", 6, tmpl_undefined());
  sb *saved = c->out;
  sb o;
  sb_init(&o, c->h);
  o.limit = MAX_OUTPUT;
  c->out = &o;
  c->depth++;
  const tm_node *at = c->at;
  exec_node(c, m->c, s);
  c->at = at;
  c->depth--;
  c->out = saved;
  return tv_sb(&o);
}

tmpl_value tm_call(tm_ctx *c, tmpl_value fn, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  if (fn.type == TMPL_UNDEFINED) tm_error(c, ERR_INVALID, "cannot call an undefined value");
  if (fn.type != TMPL_FUNC) tm_error(c, ERR_TYPE, "'%s' object is not callable", tv_type_name(fn));
  tmpl_func *f = fn.u.fn;
  switch (f->kind) {
  case TM_FUNC_MACRO: return call_macro(c, f, args, n, kwargs);
  case TM_FUNC_BUILTIN: return tm_builtin_call(c, f->builtin_id, args, n, kwargs);
  case TM_FUNC_METHOD: return tm_method_call(c, f->self, f->name, args, n, kwargs);
  case TM_FUNC_LOOP_CYCLE:
    if (n == 0) tm_error(c, ERR_INVALID, "no items for cycling given");
    return args[(size_t)f->self.u.i % n];
  case TM_FUNC_LOOP: {
    if (n != 1) tm_error(c, ERR_INVALID, "loop() takes exactly one argument");
    if (c->depth >= MAX_MACRO_DEPTH) tm_error(c, ERR_TOO_LARGE, "recursive loop deeper than %d", MAX_MACRO_DEPTH);
    sb *saved = c->out;
    sb o;
    sb_init(&o, c->h);
    o.limit = MAX_OUTPUT;
    c->out = &o;
    c->depth++;
    const tm_node *at = c->at;
    run_for(c, f->macro, f->closure, args[0], f->builtin_id + 1);
    c->at = at;
    c->depth--;
    c->out = saved;
    return tv_sb(&o);
  }
  case TM_FUNC_JOINER: {
    struct tmpl_list *st = f->self.u.l;
    if (!st->items[1].u.b) {
      st->items[1] = tmpl_bool(true);
      return tv_str(c->h, "", 0);
    }
    return st->items[0];
  }
  case TM_FUNC_LOOP_CHANGED: {
    tmpl_value cur = tv_list(c->h, n);
    cur.u.l->tuple = true;
    for (size_t i = 0; i < n; i++) tv_list_push(c->h, cur, args[i]);
    struct tmpl_list *st = f->self.u.l;
    if (st->n == 1 && tv_equal(st->items[0], cur)) return tmpl_bool(false);
    if (st->n == 0) tv_list_push(c->h, f->self, cur);
    else st->items[0] = cur;
    return tmpl_bool(true);
  }
  case TM_FUNC_NATIVE: {
    tmpl_value r = tmpl_undefined();
    int rc = f->native(c->h, f->user, args, n, kwargs, &r);
    if (rc) {
      char detail[400];
      snprintf(detail, sizeof detail, "%s", err_detail());
      tm_error(c, rc, "%s(): %s", f->name, detail);
    }
    return r;
  }
  }
  tm_error(c, ERR_INTERNAL, "bad function kind");
}

/* ------------------------------------------------------------ eval */

static tmpl_value eval_filter(tm_ctx *c, const tm_node *n, tm_scope *s) {
  tmpl_value in = (n->a == NULL || n->a->kind == TM_N_CAPTURED) ? c->captured : eval(c, n->a, s);
  tmpl_value *args, kwargs, out;
  size_t na;
  eval_args(c, n, s, &args, &na, &kwargs);
  c->at = n;
  if (!tm_filter_apply(c, n->str, in, args, na, kwargs, &out)) tm_error(c, ERR_PARSE, "no filter named '%s'", n->str);
  return out;
}

static tmpl_value eval_inner(tm_ctx *c, const tm_node *n, tm_scope *s) {
  c->at = n;
  switch (n->kind) {
  case TM_N_CONST: return n->val;
  case TM_N_NAME: {
    tmpl_value v;
    if (scope_lookup(s, n->str, n->str_n, &v)) return v;
    return tmpl_undefined();
  }
  case TM_N_LIST:
  case TM_N_TUPLE: {
    tmpl_value l = tv_list(c->h, n->n_kids);
    l.u.l->tuple = n->kind == TM_N_TUPLE;
    for (size_t i = 0; i < n->n_kids; i++) tv_list_push(c->h, l, eval(c, n->kids[i], s));
    return l;
  }
  case TM_N_DICT: {
    tmpl_value d = tv_dict(c->h);
    for (size_t i = 0; i + 1 < n->n_kids; i += 2) {
      tmpl_value k = eval(c, n->kids[i], s);
      if (k.type == TMPL_LIST || k.type == TMPL_DICT || k.type == TMPL_UNDEFINED) {
        c->at = n->kids[i];
        tm_error(c, ERR_TYPE, "a %s cannot be a dict key", tv_type_name(k));
      }
      tv_dict_set(c->h, d, k, eval(c, n->kids[i + 1], s));
    }
    return d;
  }
  case TM_N_GETATTR: {
    tmpl_value o = eval(c, n->a, s);
    c->at = n;
    if (o.type == TMPL_UNDEFINED && n->a->kind == TM_N_NAME)
      tm_error(c, ERR_INVALID, "'%s' is undefined (reading its attribute '%s')", n->a->str, n->str);
    return tm_getattr(c, o, n->str, n->str_n);
  }
  case TM_N_GETITEM: {
    tmpl_value o = eval(c, n->a, s);
    tmpl_value k = eval(c, n->b, s);
    c->at = n;
    if (o.type == TMPL_UNDEFINED && n->a->kind == TM_N_NAME) tm_error(c, ERR_INVALID, "'%s' is undefined (subscripting it)", n->a->str);
    return tm_getitem(c, o, k);
  }
  case TM_N_SLICE: {
    tmpl_value o = eval(c, n->a, s);
    tmpl_value a = n->b ? eval(c, n->b, s) : tmpl_none();
    tmpl_value b = n->c ? eval(c, n->c, s) : tmpl_none();
    tmpl_value st = n->d ? eval(c, n->d, s) : tmpl_none();
    c->at = n;
    return do_slice(c, o, a, b, st);
  }
  case TM_N_CALL: {
    tmpl_value fn = eval(c, n->a, s);
    tmpl_value *args, kwargs;
    size_t na;
    eval_args(c, n, s, &args, &na, &kwargs);
    c->at = n;
    if (fn.type == TMPL_UNDEFINED && n->a->kind == TM_N_NAME) tm_error(c, ERR_INVALID, "'%s' is undefined (calling it)", n->a->str);
    if (fn.type == TMPL_UNDEFINED && n->a->kind == TM_N_GETATTR) tm_error(c, ERR_INVALID, "no method '%s' here (calling it)", n->a->str);
    return tm_call(c, fn, args, na, kwargs);
  }
  case TM_N_FILTER: return eval_filter(c, n, s);
  case TM_N_TEST: {
    tmpl_value in = eval(c, n->a, s);
    tmpl_value *args, kwargs;
    size_t na;
    eval_args(c, n, s, &args, &na, &kwargs);
    c->at = n;
    bool r;
    if (!tm_test_apply(c, n->str, in, args, na, &r)) tm_error(c, ERR_PARSE, "no test named '%s'", n->str);
    return tmpl_bool(r);
  }
  case TM_N_UNARY: {
    tmpl_value v = eval(c, n->a, s);
    c->at = n;
    if (!tv_is_number(v)) tm_error(c, v.type == TMPL_UNDEFINED ? ERR_INVALID : ERR_TYPE, "bad operand type for unary %c: '%s'", n->op == TM_OP_NEG ? '-' : '+', tv_type_name(v));
    if (n->op == TM_OP_POS) return v.type == TMPL_BOOL ? tmpl_int(v.u.b) : v;
    if (v.type == TMPL_FLOAT) return tmpl_float(-v.u.f);
    if (ival(v) == INT64_MIN) tm_error(c, ERR_RANGE, "integer overflow in unary -");
    return tmpl_int(-ival(v));
  }
  case TM_N_BINARY: {
    tmpl_value a = eval(c, n->a, s);
    tmpl_value b = eval(c, n->b, s);
    c->at = n;
    return tm_binop(c, n->op, a, b);
  }
  case TM_N_AND: {
    tmpl_value a = eval(c, n->a, s);
    return tv_truthy(a) ? eval(c, n->b, s) : a;
  }
  case TM_N_OR: {
    tmpl_value a = eval(c, n->a, s);
    return tv_truthy(a) ? a : eval(c, n->b, s);
  }
  case TM_N_NOT: return tmpl_bool(!tv_truthy(eval(c, n->a, s)));
  case TM_N_COMPARE: {
    tmpl_value a = eval(c, n->a, s);
    for (size_t i = 0; i < n->n_kids; i++) {
      tmpl_value b = eval(c, n->kids[i]->a, s);
      c->at = n->kids[i];
      if (!compare(c, n->kids[i]->op, a, b)) return tmpl_bool(false);
      a = b;
    }
    return tmpl_bool(true);
  }
  case TM_N_COND:
    if (tv_truthy(eval(c, n->a, s))) return eval(c, n->b, s);
    return n->c ? eval(c, n->c, s) : tmpl_undefined();
  case TM_N_CAPTURED: return c->captured;
  default: tm_error(c, ERR_INTERNAL, "cannot evaluate node kind %d", (int)n->kind);
  }
}

/* --------------------------------------------------------- statements */

static void assign(tm_ctx *c, const tm_node *target, tmpl_value v, tm_scope *s) {
  if (target->kind == TM_N_NAME) {
    scope_set(c, s, target->str, target->str_n, v);
    return;
  }
  if (target->kind == TM_N_GETATTR) {
    tmpl_value ns = eval(c, target->a, s);
    c->at = target;
    if (ns.type != TMPL_NAMESPACE) tm_error(c, ERR_TYPE, "cannot assign attribute '%s' on a %s (only namespace objects)", target->str, tv_type_name(ns));
    tv_dict_set(c->h, (tmpl_value){.type = TMPL_DICT, .u.d = ns.u.d}, tv_str(c->h, target->str, target->str_n), v);
    return;
  }
  /* tuple unpacking */
  c->at = target;
  tmpl_value items = v.type == TMPL_LIST ? v : tm_iterate(c, v);
  if (items.u.l->n != target->n_kids)
    tm_error(c, ERR_INVALID, "cannot unpack %zu values into %zu names", items.u.l->n, target->n_kids);
  for (size_t i = 0; i < target->n_kids; i++) assign(c, target->kids[i], items.u.l->items[i], s);
}

static void write_value(tm_ctx *c, tmpl_value v) {
  if (v.type == TMPL_STRING) sb_add(c->out, v.u.s->data, v.u.s->len);
  else tv_to_str(c->out, v);
}

static tmpl_value capture(tm_ctx *c, const tm_node *body, tm_scope *s) {
  sb *saved = c->out;
  sb o;
  sb_init(&o, c->h);
  o.limit = MAX_OUTPUT;
  c->out = &o;
  exec_node(c, body, s);
  c->out = saved;
  return tv_sb(&o);
}

static tmpl_value loop_object(tm_ctx *c, tmpl_value items, size_t i, tmpl_value changed, int depth0) {
  tmpl_value d = tv_dict(c->h);
  size_t n = items.u.l->n;
#define LOOPSET(k, v) tv_dict_set(c->h, d, tv_strz(c->h, k), v)
  LOOPSET("index", tmpl_int((int64_t)i + 1));
  LOOPSET("index0", tmpl_int((int64_t)i));
  LOOPSET("revindex", tmpl_int((int64_t)(n - i)));
  LOOPSET("revindex0", tmpl_int((int64_t)(n - i - 1)));
  LOOPSET("first", tmpl_bool(i == 0));
  LOOPSET("last", tmpl_bool(i + 1 == n));
  LOOPSET("length", tmpl_int((int64_t)n));
  LOOPSET("depth", tmpl_int(depth0 + 1));
  LOOPSET("depth0", tmpl_int(depth0));
  if (i > 0) LOOPSET("previtem", items.u.l->items[i - 1]);
  if (i + 1 < n) LOOPSET("nextitem", items.u.l->items[i + 1]);
  tmpl_value cyc = tv_func(c->h, TM_FUNC_LOOP_CYCLE, "cycle");
  cyc.u.fn->self = tmpl_int((int64_t)i);
  LOOPSET("cycle", cyc);
  LOOPSET("changed", changed);
#undef LOOPSET
  return d;
}

static int exec_for(tm_ctx *c, const tm_node *n, tm_scope *s) {
  tmpl_value src = eval(c, n->b, s);
  return run_for(c, n, s, src, 0);
}

/* runs a for loop over src; depth0 > 0 for the inner calls of loop(...) in
 * a recursive loop */
static int run_for(tm_ctx *c, const tm_node *n, tm_scope *s, tmpl_value src, int depth0) {
  c->at = n->b;
  tmpl_value items = tm_iterate(c, src);
  /* snapshot, so that a body appending to the list does not loop forever */
  size_t cnt = items.u.l->n;
  tmpl_value snap = tv_list(c->h, cnt);
  for (size_t i = 0; i < cnt; i++) tv_list_push(c->h, snap, items.u.l->items[i]);
  if (n->e) {
    tmpl_value kept = tv_list(c->h, cnt);
    for (size_t i = 0; i < cnt; i++) {
      tm_scope *fs = scope_new(c, s);
      assign(c, n->a, snap.u.l->items[i], fs);
      if (tv_truthy(eval(c, n->e, fs))) tv_list_push(c->h, kept, snap.u.l->items[i]);
    }
    snap = kept;
  }
  size_t total = snap.u.l->n;
  tmpl_value changed = tv_func(c->h, TM_FUNC_LOOP_CHANGED, "changed");
  changed.u.fn->self = tv_list(c->h, 1);
  for (size_t i = 0; i < total; i++) {
    if (++c->iterations > MAX_ITERATIONS) {
      c->at = n;
      tm_error(c, ERR_TOO_LARGE, "more than %u loop iterations", MAX_ITERATIONS);
    }
    tm_scope *is = scope_new(c, s);
    tmpl_value lo = loop_object(c, snap, i, changed, depth0);
    if (n->op) { /* recursive: loop is also callable */
      tmpl_value f = tv_func(c->h, TM_FUNC_LOOP, "loop");
      f.u.fn->self = lo;
      f.u.fn->macro = n;
      f.u.fn->closure = s;
      f.u.fn->builtin_id = depth0;
      lo = f;
    }
    scope_set(c, is, "loop", 4, lo);
    c->at = n->a;
    assign(c, n->a, snap.u.l->items[i], is);
    int r = exec_node(c, n->c, is);
    if (r == EXEC_BREAK) break;
  }
  if (total == 0 && n->d) exec_node(c, n->d, s);
  return EXEC_OK;
}

static int exec_inner(tm_ctx *c, const tm_node *n, tm_scope *s) {
  c->at = n;
  switch (n->kind) {
  case TM_N_BODY:
    for (size_t i = 0; i < n->n_kids; i++) {
      int r = exec_node(c, n->kids[i], s);
      if (r != EXEC_OK) return r;
    }
    return EXEC_OK;
  case TM_N_TEXT: sb_add(c->out, n->str, n->str_n); return EXEC_OK;
  case TM_N_OUTPUT: write_value(c, eval(c, n->a, s)); return EXEC_OK;
  case TM_N_IF:
    if (tv_truthy(eval(c, n->a, s))) return exec_node(c, n->b, s);
    return n->c ? exec_node(c, n->c, s) : EXEC_OK;
  case TM_N_FOR: return exec_for(c, n, s);
  case TM_N_SET: {
    tmpl_value v;
    if (n->b) v = eval(c, n->b, s);
    else {
      v = capture(c, n->c, s);
      if (n->d) {
        tmpl_value saved = c->captured;
        c->captured = v;
        v = eval(c, n->d, s);
        c->captured = saved;
      }
    }
    c->at = n;
    assign(c, n->a, v, s);
    return EXEC_OK;
  }
  case TM_N_MACRO: {
    tmpl_value f = tv_func(c->h, TM_FUNC_MACRO, n->str);
    f.u.fn->macro = n;
    f.u.fn->closure = s;
    scope_set(c, s, n->str, n->str_n, f);
    return EXEC_OK;
  }
  case TM_N_CALLBLOCK: {
    const tm_node *call = n->a;
    tmpl_value caller = tv_func(c->h, TM_FUNC_MACRO, "caller");
    caller.u.fn->macro = n;
    caller.u.fn->closure = s;
    tmpl_value fn = eval(c, call->a, s);
    tmpl_value *args, kwargs;
    size_t na;
    eval_args(c, call, s, &args, &na, &kwargs);
    if (kwargs.type != TMPL_DICT) kwargs = tv_dict(c->h);
    tv_dict_set(c->h, kwargs, tv_strz(c->h, "caller"), caller);
    c->at = call;
    write_value(c, tm_call(c, fn, args, na, kwargs));
    return EXEC_OK;
  }
  case TM_N_FILTERBLOCK: {
    tmpl_value body = capture(c, n->c, s);
    tmpl_value saved = c->captured;
    c->captured = body;
    tmpl_value v = eval(c, n->a, s);
    c->captured = saved;
    write_value(c, v);
    return EXEC_OK;
  }
  case TM_N_WITH: {
    tm_scope *ws = scope_new(c, s);
    for (size_t i = 0; i < n->n_kids; i++) scope_set(c, ws, n->kids[i]->str, n->kids[i]->str_n, eval(c, n->kids[i]->a, s));
    return exec_node(c, n->c, ws);
  }
  case TM_N_BREAK: return EXEC_BREAK;
  case TM_N_CONTINUE: return EXEC_CONTINUE;
  default: write_value(c, eval(c, n, s)); return EXEC_OK;
  }
}

static void depth_check(tm_ctx *c, const tm_node *n) {
  if (++c->eval_depth > MAX_EVAL_DEPTH) {
    c->at = n;
    tm_error(c, ERR_TOO_LARGE, "expressions and calls nested deeper than %d", MAX_EVAL_DEPTH);
  }
}

static tmpl_value eval(tm_ctx *c, const tm_node *n, tm_scope *s) {
  depth_check(c, n);
  tmpl_value v = eval_inner(c, n, s);
  c->eval_depth--;
  return v;
}

static int exec_node(tm_ctx *c, const tm_node *n, tm_scope *s) {
  depth_check(c, n);
  int r = exec_inner(c, n, s);
  c->eval_depth--;
  return r;
}

/* -------------------------------------------------------------- render */

/* Containers of the caller's globals are copied into the render's heap, so a
 * template that mutates a list (append) or a dict never changes, or leaves
 * pointers into a freed heap in, the caller's values. Strings are shared:
 * they are immutable. */
static tmpl_value copy_in(tm_ctx *c, tmpl_value v, int depth) {
  if (depth > 512) tm_error(c, ERR_TOO_LARGE, "globals nested deeper than 512 levels");
  if (v.type == TMPL_LIST) {
    tmpl_value l = tv_list(c->h, v.u.l->n);
    l.u.l->tuple = v.u.l->tuple;
    for (size_t i = 0; i < v.u.l->n; i++) tv_list_push(c->h, l, copy_in(c, v.u.l->items[i], depth + 1));
    return l;
  }
  if (v.type == TMPL_DICT || v.type == TMPL_NAMESPACE) {
    tmpl_value d = tv_dict(c->h);
    for (size_t i = 0; i < v.u.d->n; i++) tv_dict_set(c->h, d, v.u.d->e[i].key, copy_in(c, v.u.d->e[i].val, depth + 1));
    d.type = v.type;
    d.u.d->is_namespace = v.type == TMPL_NAMESPACE;
    return d;
  }
  return v;
}

static int render_in(const tmpl *t, tmpl_value globals, buf *out, tmpl_heap *h) {
  tm_ctx c = {.h = h};
  if (globals.type == TMPL_DICT) globals = copy_in(&c, globals, 0);
  tm_scope *builtins = scope_new(&c, NULL);
  tm_builtins_install(&c, builtins->vars);
  tm_scope *g = builtins;
  if (globals.type == TMPL_DICT) {
    g = hp_alloc(h, sizeof *g);
    g->parent = builtins;
    g->vars = globals;
  }
  c.globals = g;
  tm_scope *top = scope_new(&c, g);
  sb o;
  sb_init(&o, h);
  o.limit = MAX_OUTPUT;
  c.out = &o;
  exec_node(&c, t->root, top);
  if (buf_append(out, o.data ? o.data : "", o.len)) return err_set(ERR_NOMEM, "template: out of memory for the output");
  return 0;
}

int tmpl_render(const tmpl *t, tmpl_value globals, buf *out) {
  if (!t) return err_set(ERR_INVALID, "template: NULL template");
  if (globals.type != TMPL_DICT && globals.type != TMPL_UNDEFINED)
    return err_set(ERR_INVALID, "template: globals must be a dict, not %s", tv_type_name(globals));
  tmpl_heap *volatile h = tmpl_heap_new();
  if (!h) return err_set(ERR_NOMEM, "template: out of memory");
  jmp_buf jb;
  h->on_fail = &jb;
  h->limit = MAX_MEMORY;
  if (setjmp(jb)) {
    int code = h->fail_code;
    tmpl_heap_free(h);
    return code;
  }
  int rc = render_in(t, globals, out, h);
  tmpl_heap_free(h);
  return rc;
}
