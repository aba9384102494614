/*
 * tmpl_filters.c - jinja2's builtin filters and tests that chat templates
 * use, with jinja2 3.x semantics (jinja2/filters.py, jinja2/tests.py), and
 * tojson as transformers overrides it (json.dumps with ensure_ascii=False).
 *
 * Each filter is a function in a table indexed by name; arguments arrive as
 * positional values plus a kwargs dict and are read with tm_arg(pos, name),
 * which mirrors Python's binding of the filter's signature.
 *
 * Notable jinja2 behaviours kept: sort/unique/dictsort/min/max compare
 * strings case-insensitively by default; title() capitalizes after spaces,
 * dashes and brackets; indent() does not indent blank lines unless blank=True;
 * default() replaces only undefined unless boolean=True; round() rounds half
 * away from zero and returns a float.
 *
 * Start reading at the FILTERS table at the bottom.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "tmpl/tmpl_internal.h"

tmpl_value tm_arg(const tmpl_value *args, size_t n, tmpl_value kwargs, size_t pos, const char *name) {
  if (pos < n) return args[pos];
  if (kwargs.type == TMPL_DICT && name) {
    tmpl_value v;
    if (tv_dict_get_s(kwargs, name, strlen(name), &v)) return v;
  }
  return tmpl_undefined();
}

#define ARG(pos, name) tm_arg(args, n, kwargs, pos, name)
#define HAS(v) ((v).type != TMPL_UNDEFINED)

typedef tmpl_value (*filter_fn)(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs);

static tmpl_value need_str(tm_ctx *c, tmpl_value v) { return tm_to_string(c, v); }

static int64_t need_int(tm_ctx *c, tmpl_value v, int64_t dflt, const char *what) {
  if (!HAS(v) || v.type == TMPL_NONE) return dflt;
  if (v.type == TMPL_INT) return v.u.i;
  if (v.type == TMPL_BOOL) return v.u.b;
  if (v.type == TMPL_FLOAT) return (int64_t)v.u.f;
  tm_error(c, ERR_TYPE, "%s must be an integer, not %s", what, tv_type_name(v));
}

/* attribute path "a.b.0" as jinja2's make_attrgetter resolves it */
static tmpl_value attr_get(tm_ctx *c, tmpl_value item, tmpl_value attr) {
  if (attr.type == TMPL_INT) return tm_getitem(c, item, attr);
  tmpl_value a = need_str(c, attr);
  const char *p = a.u.s->data, *end = p + a.u.s->len;
  while (p <= end) {
    const char *dot = memchr(p, '.', (size_t)(end - p));
    if (!dot) dot = end;
    tmpl_value key = tv_str(c->h, p, (size_t)(dot - p));
    bool digits = dot > p;
    for (const char *q = p; q < dot; q++)
      if (*q < '0' || *q > '9') digits = false;
    if (digits) key = tmpl_int(strtoll(p, NULL, 10));
    if (item.type == TMPL_UNDEFINED) return item;
    item = tm_getitem(c, item, key);
    p = dot + 1;
  }
  return item;
}

/* ------------------------------------------------------- sorting helpers */

typedef struct sort_key {
  tmpl_value key, item;
} sort_key;

static tmpl_value fold_case(tm_ctx *c, tmpl_value v, bool case_sensitive) {
  if (!case_sensitive && v.type == TMPL_STRING) return tm_str_lower(c, v);
  return v;
}

static int key_cmp(tm_ctx *c, tmpl_value a, tmpl_value b) {
  int r = tv_compare(a, b);
  if (r == -2) tm_error(c, ERR_TYPE, "'<' not supported between instances of '%s' and '%s'", tv_type_name(a), tv_type_name(b));
  return r == 2 ? 0 : r;
}

static void merge_sort(tm_ctx *c, sort_key *v, size_t n, sort_key *tmp, bool reverse) {
  if (n < 2) return;
  size_t m = n / 2;
  merge_sort(c, v, m, tmp, reverse);
  merge_sort(c, v + m, n - m, tmp, reverse);
  size_t i = 0, j = m, k = 0;
  while (i < m && j < n) {
    int r = key_cmp(c, v[j].key, v[i].key);
    /* stable: take from the right only when strictly before */
    bool right_first = reverse ? r > 0 : r < 0;
    tmp[k++] = right_first ? v[j++] : v[i++];
  }
  while (i < m) tmp[k++] = v[i++];
  while (j < n) tmp[k++] = v[j++];
  memcpy(v, tmp, n * sizeof *v);
}

static void sort_keys_run(tm_ctx *c, sort_key *v, size_t n, bool reverse) {
  sort_key *tmp = hp_alloc(c->h, (n ? n : 1) * sizeof *tmp);
  merge_sort(c, v, n, tmp, reverse);
}

/* ---------------------------------------------------------------- filters */

static tmpl_value f_tojson(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value ea = ARG(0, "ensure_ascii"), indent = ARG(1, "indent"), seps = ARG(2, "separators"), sk = ARG(3, "sort_keys");
  sb o;
  sb_init(&o, c->h);
  tm_dump_json(c, &o, in, HAS(ea) && tv_truthy(ea), indent, seps, HAS(sk) && tv_truthy(sk));
  return tv_sb(&o);
}

static tmpl_value f_length(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  switch (in.type) {
  case TMPL_UNDEFINED: return tmpl_int(0);
  case TMPL_STRING: return tmpl_int((int64_t)tv_len_cp(in));
  case TMPL_LIST: return tmpl_int((int64_t)in.u.l->n);
  case TMPL_DICT: return tmpl_int((int64_t)in.u.d->n);
  default: tm_error(c, ERR_TYPE, "object of type '%s' has no len()", tv_type_name(in));
  }
}

static tmpl_value f_join(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value d = ARG(0, "d"), attr = ARG(1, "attribute");
  tmpl_value items = tm_iterate(c, in);
  sb o;
  sb_init(&o, c->h);
  for (size_t i = 0; i < items.u.l->n; i++) {
    if (i && HAS(d)) tv_to_str(&o, d);
    tmpl_value it = items.u.l->items[i];
    if (HAS(attr)) it = attr_get(c, it, attr);
    tv_to_str(&o, it);
  }
  return tv_sb(&o);
}

static tmpl_value f_trim(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  return tm_str_strip(c, need_str(c, in), ARG(0, "chars"), true, true);
}

static tmpl_value f_default(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)c;
  tmpl_value dv = ARG(0, "default_value"), boolean = ARG(1, "boolean");
  if (!HAS(dv) && n == 0 && !(kwargs.type == TMPL_DICT && tv_dict_get_s(kwargs, "default_value", 13, &dv))) dv = tv_str(c->h, "", 0);
  if (in.type == TMPL_UNDEFINED || (HAS(boolean) && tv_truthy(boolean) && !tv_truthy(in))) return dv;
  return in;
}

static tmpl_value f_items(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  if (in.type == TMPL_UNDEFINED) return tv_list(c->h, 0);
  if (in.type != TMPL_DICT) tm_error(c, ERR_TYPE, "can only get item pairs from a mapping, not %s", tv_type_name(in));
  return tm_method_call(c, in, "items", NULL, 0, tmpl_undefined());
}

static tmpl_value f_list(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  tmpl_value it = tm_iterate(c, in);
  tmpl_value l = tv_list(c->h, it.u.l->n);
  for (size_t i = 0; i < it.u.l->n; i++) tv_list_push(c->h, l, it.u.l->items[i]);
  return l;
}

static tmpl_value f_first(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  tmpl_value it = tm_iterate(c, in);
  return it.u.l->n ? it.u.l->items[0] : tmpl_undefined();
}

static tmpl_value f_last(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  tmpl_value it = tm_iterate(c, in);
  return it.u.l->n ? it.u.l->items[it.u.l->n - 1] : tmpl_undefined();
}

static tmpl_value f_map(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  /* jinja2: "if value: for item in value" - a false input maps to nothing */
  tmpl_value items = tv_truthy(in) ? tm_iterate(c, in) : tv_list(c->h, 0);
  tmpl_value out = tv_list(c->h, items.u.l->n);
  tmpl_value attr = tmpl_undefined(), dflt = tmpl_undefined();
  if (n == 0 && kwargs.type == TMPL_DICT) {
    tv_dict_get_s(kwargs, "attribute", 9, &attr);
    tv_dict_get_s(kwargs, "default", 7, &dflt);
  }
  if (HAS(attr)) {
    for (size_t i = 0; i < items.u.l->n; i++) {
      tmpl_value v = attr_get(c, items.u.l->items[i], attr);
      if (v.type == TMPL_UNDEFINED && HAS(dflt)) v = dflt;
      tv_list_push(c->h, out, v);
    }
    return out;
  }
  if (n == 0) tm_error(c, ERR_INVALID, "map: a filter name or attribute= is required");
  tmpl_value fname = need_str(c, args[0]);
  for (size_t i = 0; i < items.u.l->n; i++) {
    tmpl_value r;
    if (!tm_filter_apply(c, fname.u.s->data, items.u.l->items[i], args + 1, n - 1, kwargs, &r))
      tm_error(c, ERR_INVALID, "map: no filter named '%s'", fname.u.s->data);
    tv_list_push(c->h, out, r);
  }
  return out;
}

static tmpl_value select_impl(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, bool by_attr, bool want) {
  tmpl_value items = tv_truthy(in) ? tm_iterate(c, in) : tv_list(c->h, 0);
  tmpl_value out = tv_list(c->h, 0);
  size_t a0 = by_attr ? 1 : 0;
  if (by_attr && n == 0) tm_error(c, ERR_INVALID, "selectattr/rejectattr: missing attribute name");
  tmpl_value tname = n > a0 ? need_str(c, args[a0]) : tmpl_undefined();
  for (size_t i = 0; i < items.u.l->n; i++) {
    tmpl_value it = items.u.l->items[i];
    tmpl_value v = by_attr ? attr_get(c, it, args[0]) : it;
    bool r;
    if (HAS(tname)) {
      if (!tm_test_apply(c, tname.u.s->data, v, args + a0 + 1, n - a0 - 1, &r))
        tm_error(c, ERR_INVALID, "no test named '%s'", tname.u.s->data);
    } else r = tv_truthy(v);
    if (r == want) tv_list_push(c->h, out, it);
  }
  return out;
}

static tmpl_value f_select(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)kwargs;
  return select_impl(c, in, args, n, false, true);
}
static tmpl_value f_reject(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)kwargs;
  return select_impl(c, in, args, n, false, false);
}
static tmpl_value f_selectattr(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)kwargs;
  return select_impl(c, in, args, n, true, true);
}
static tmpl_value f_rejectattr(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)kwargs;
  return select_impl(c, in, args, n, true, false);
}

static tmpl_value f_indent(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value w = ARG(0, "width"), first = ARG(1, "first"), blank = ARG(2, "blank");
  sb ind;
  sb_init(&ind, c->h);
  if (w.type == TMPL_STRING) sb_add(&ind, w.u.s->data, w.u.s->len);
  else {
    int64_t k = need_int(c, w, 4, "indent width");
    for (int64_t i = 0; i < k && i < 1000; i++) sb_addc(&ind, ' ');
  }
  tmpl_value s = need_str(c, in);
  sb tmp;
  sb_init(&tmp, c->h);
  sb_add(&tmp, s.u.s->data, s.u.s->len);
  sb_addc(&tmp, '\n');
  tmpl_value lines = tm_splitlines(c, tv_sb(&tmp), false);
  sb o;
  sb_init(&o, c->h);
  if (HAS(first) && tv_truthy(first)) sb_add(&o, ind.data, ind.len);
  for (size_t i = 0; i < lines.u.l->n; i++) {
    tmpl_value ln = lines.u.l->items[i];
    if (i) {
      sb_addc(&o, '\n');
      if (ln.u.s->len || (HAS(blank) && tv_truthy(blank))) sb_add(&o, ind.data, ind.len);
    }
    sb_add(&o, ln.u.s->data, ln.u.s->len);
  }
  return tv_sb(&o);
}

static tmpl_value f_unique(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value cs = ARG(0, "case_sensitive"), attr = ARG(1, "attribute");
  tmpl_value items = tm_iterate(c, in);
  tmpl_value seen = tv_dict(c->h), out = tv_list(c->h, 0);
  for (size_t i = 0; i < items.u.l->n; i++) {
    tmpl_value it = items.u.l->items[i];
    tmpl_value k = fold_case(c, HAS(attr) ? attr_get(c, it, attr) : it, HAS(cs) && tv_truthy(cs));
    tmpl_value dummy;
    if (k.type == TMPL_LIST || k.type == TMPL_DICT) tm_error(c, ERR_TYPE, "unhashable type: '%s'", tv_type_name(k));
    if (tv_dict_get(seen, k, &dummy)) continue;
    tv_dict_set(c->h, seen, k, tmpl_none());
    tv_list_push(c->h, out, it);
  }
  return out;
}

static tmpl_value f_safe(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  if (in.type == TMPL_STRING && in.u.s->safe) return in;
  tmpl_value s = need_str(c, in);
  tmpl_value r = tv_str(c->h, s.u.s->data, s.u.s->len);
  r.u.s->safe = true;
  return r;
}

static tmpl_value f_string(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  return need_str(c, in);
}

static bool parse_int_str(const char *s, size_t len, int base, int64_t *out) {
  char tmp[80];
  size_t a = 0, b = len;
  while (a < b && py_isspace((unsigned char)s[a])) a++;
  while (b > a && py_isspace((unsigned char)s[b - 1])) b--;
  if (b - a == 0 || b - a >= sizeof tmp) return false;
  size_t k = 0;
  for (size_t i = a; i < b; i++)
    if (s[i] != '_') tmp[k++] = s[i];
  tmp[k] = 0;
  char *end;
  errno = 0;
  long long v = strtoll(tmp, &end, base);
  if (*end || errno) return false;
  *out = v;
  return true;
}

static tmpl_value f_int(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value d = ARG(0, "default"), base = ARG(1, "base");
  int64_t dflt = need_int(c, d, 0, "int default");
  switch (in.type) {
  case TMPL_INT: return in;
  case TMPL_BOOL: return tmpl_int(in.u.b);
  case TMPL_FLOAT:
    if (isnan(in.u.f) || fabs(in.u.f) >= 9.2e18) return tmpl_int(dflt);
    return tmpl_int((int64_t)in.u.f);
  case TMPL_STRING: {
    int64_t v;
    if (parse_int_str(in.u.s->data, in.u.s->len, (int)need_int(c, base, 10, "base"), &v)) return tmpl_int(v);
    char *end;
    double f = strtod(in.u.s->data, &end);
    while (*end && py_isspace((unsigned char)*end)) end++;
    if (*end == 0 && end != in.u.s->data && isfinite(f) && fabs(f) < 9.2e18) return tmpl_int((int64_t)f);
    return tmpl_int(dflt);
  }
  default: return tmpl_int(dflt);
  }
}

static tmpl_value f_float(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value d = ARG(0, "default");
  double dflt = HAS(d) && tv_is_number(d) ? tv_num(d) : 0.0;
  if (tv_is_number(in)) return tmpl_float(tv_num(in));
  if (in.type == TMPL_STRING) {
    char *end;
    double f = strtod(in.u.s->data, &end);
    while (*end && py_isspace((unsigned char)*end)) end++;
    if (*end == 0 && end != in.u.s->data) return tmpl_float(f);
  }
  (void)c;
  return tmpl_float(dflt);
}

static tmpl_value f_abs(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  if (in.type == TMPL_FLOAT) return tmpl_float(fabs(in.u.f));
  if (in.type == TMPL_INT) {
    if (in.u.i == INT64_MIN) tm_error(c, ERR_RANGE, "integer overflow in abs");
    return tmpl_int(in.u.i < 0 ? -in.u.i : in.u.i);
  }
  if (in.type == TMPL_BOOL) return tmpl_int(in.u.b);
  tm_error(c, ERR_TYPE, "bad operand type for abs(): '%s'", tv_type_name(in));
}

static tmpl_value f_lower(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  return tm_str_lower(c, need_str(c, in));
}
static tmpl_value f_upper(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  return tm_str_upper(c, need_str(c, in));
}
static tmpl_value f_capitalize(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  return tm_str_capitalize(c, need_str(c, in));
}

static tmpl_value f_title(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  /* words begin after runs of [-\s({[<]; first char upper, rest lower */
  tmpl_value s = need_str(c, in);
  tmpl_value chars = tm_iterate(c, s);
  sb o;
  sb_init(&o, c->h);
  bool start = true;
  for (size_t i = 0; i < chars.u.l->n; i++) {
    tmpl_value ch = chars.u.l->items[i];
    uint32_t cp;
    utf8_decode(ch.u.s->data, ch.u.s->len, &cp);
    bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || py_isspace(cp);
    tmpl_value w = sep ? ch : start ? tm_str_upper(c, ch) : tm_str_lower(c, ch);
    sb_add(&o, w.u.s->data, w.u.s->len);
    start = sep;
  }
  return tv_sb(&o);
}

static tmpl_value f_replace(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value old = ARG(0, "old"), nw = ARG(1, "new"), cnt = ARG(2, "count");
  return tm_str_replace(c, need_str(c, in), need_str(c, old), need_str(c, nw), need_int(c, cnt, -1, "count"));
}

static tmpl_value f_round(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value prec = ARG(0, "precision"), method = ARG(1, "method");
  if (!tv_is_number(in)) tm_error(c, ERR_TYPE, "round: a number is required, not %s", tv_type_name(in));
  int64_t p = need_int(c, prec, 0, "precision");
  double x = tv_num(in), m = pow(10, (double)p);
  const char *meth = HAS(method) ? need_str(c, method).u.s->data : "common";
  double r;
  if (strcmp(meth, "common") == 0 && (in.type == TMPL_INT || in.type == TMPL_BOOL)) {
    /* round(int, p) stays an int */
    int64_t v = in.type == TMPL_INT ? in.u.i : in.u.b;
    if (p >= 0) return tmpl_int(v);
    double y = (double)v * m, fl = floor(y), diff = y - fl;
    r = diff > 0.5 ? fl + 1 : diff < 0.5 ? fl : (fmod(fl, 2) == 0 ? fl : fl + 1);
    return tmpl_int((int64_t)(r / m));
  }
  if (strcmp(meth, "common") == 0) {
    /* Python's round(): correctly rounded from the exact binary value, ties
     * to even - which is what glibc's printf does for p >= 0 */
    if (p >= 0 && p <= 300 && isfinite(x)) {
      char tmp[400];
      snprintf(tmp, sizeof tmp, "%.*f", (int)p, x);
      r = strtod(tmp, NULL);
    } else {
      double y = x * m, fl = floor(y), diff = y - fl;
      if (diff > 0.5) r = fl + 1;
      else if (diff < 0.5) r = fl;
      else r = fmod(fl, 2) == 0 ? fl : fl + 1;
      r /= m;
    }
  } else if (strcmp(meth, "ceil") == 0) r = ceil(x * m) / m;
  else if (strcmp(meth, "floor") == 0) r = floor(x * m) / m;
  else tm_error(c, ERR_INVALID, "round: method must be common, ceil or floor");
  return tmpl_float(r);
}

static tmpl_value f_sort(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value rev = ARG(0, "reverse"), cs = ARG(1, "case_sensitive"), attr = ARG(2, "attribute");
  tmpl_value items = tm_iterate(c, in);
  size_t k = items.u.l->n;
  sort_key *v = hp_alloc(c->h, (k ? k : 1) * sizeof *v);
  for (size_t i = 0; i < k; i++) {
    v[i].item = items.u.l->items[i];
    v[i].key = fold_case(c, HAS(attr) ? attr_get(c, v[i].item, attr) : v[i].item, HAS(cs) && tv_truthy(cs));
  }
  sort_keys_run(c, v, k, HAS(rev) && tv_truthy(rev));
  tmpl_value out = tv_list(c->h, k);
  for (size_t i = 0; i < k; i++) tv_list_push(c->h, out, v[i].item);
  return out;
}

static tmpl_value f_dictsort(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value cs = ARG(0, "case_sensitive"), by = ARG(1, "by"), rev = ARG(2, "reverse");
  if (in.type != TMPL_DICT) tm_error(c, ERR_TYPE, "dictsort: a mapping is required, not %s", tv_type_name(in));
  bool by_value = HAS(by) && by.type == TMPL_STRING && strcmp(by.u.s->data, "value") == 0;
  size_t k = in.u.d->n;
  sort_key *v = hp_alloc(c->h, (k ? k : 1) * sizeof *v);
  for (size_t i = 0; i < k; i++) {
    tmpl_value pair = tv_list(c->h, 2);
    pair.u.l->tuple = true;
    tv_list_push(c->h, pair, in.u.d->e[i].key);
    tv_list_push(c->h, pair, in.u.d->e[i].val);
    v[i].item = pair;
    v[i].key = fold_case(c, by_value ? in.u.d->e[i].val : in.u.d->e[i].key, HAS(cs) && tv_truthy(cs));
  }
  sort_keys_run(c, v, k, HAS(rev) && tv_truthy(rev));
  tmpl_value out = tv_list(c->h, k);
  for (size_t i = 0; i < k; i++) tv_list_push(c->h, out, v[i].item);
  return out;
}

static tmpl_value f_reverse(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  tmpl_value items = tm_iterate(c, in);
  if (in.type == TMPL_STRING) {
    sb o;
    sb_init(&o, c->h);
    for (size_t i = items.u.l->n; i-- > 0;) sb_add(&o, items.u.l->items[i].u.s->data, items.u.l->items[i].u.s->len);
    return tv_sb(&o);
  }
  tmpl_value out = tv_list(c->h, items.u.l->n);
  for (size_t i = items.u.l->n; i-- > 0;) tv_list_push(c->h, out, items.u.l->items[i]);
  return out;
}

static tmpl_value f_batch(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  int64_t size = need_int(c, ARG(0, "linecount"), 1, "batch size");
  tmpl_value fill = ARG(1, "fill_with");
  if (size <= 0) tm_error(c, ERR_INVALID, "batch size must be positive");
  tmpl_value items = tm_iterate(c, in), out = tv_list(c->h, 0), cur = tmpl_undefined();
  for (size_t i = 0; i < items.u.l->n; i++) {
    if (cur.type == TMPL_UNDEFINED || (int64_t)cur.u.l->n == size) {
      cur = tv_list(c->h, (size_t)size < 64 ? (size_t)size : 64);
      tv_list_push(c->h, out, cur);
    }
    tv_list_push(c->h, cur, items.u.l->items[i]);
  }
  if (HAS(fill) && cur.type == TMPL_LIST)
    while ((int64_t)cur.u.l->n < size) tv_list_push(c->h, cur, fill);
  return out;
}

static tmpl_value f_sum(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value attr = ARG(0, "attribute"), start = ARG(1, "start");
  tmpl_value acc = HAS(start) ? start : tmpl_int(0);
  tmpl_value items = tm_iterate(c, in);
  for (size_t i = 0; i < items.u.l->n; i++) {
    tmpl_value v = HAS(attr) ? attr_get(c, items.u.l->items[i], attr) : items.u.l->items[i];
    acc = tm_binop(c, TM_OP_ADD, acc, v);
  }
  return acc;
}

static tmpl_value minmax(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs, int want) {
  tmpl_value cs = ARG(0, "case_sensitive"), attr = ARG(1, "attribute");
  tmpl_value items = tm_iterate(c, in);
  if (items.u.l->n == 0) return tmpl_undefined();
  tmpl_value best = items.u.l->items[0];
  tmpl_value bk = fold_case(c, HAS(attr) ? attr_get(c, best, attr) : best, HAS(cs) && tv_truthy(cs));
  for (size_t i = 1; i < items.u.l->n; i++) {
    tmpl_value it = items.u.l->items[i];
    tmpl_value k = fold_case(c, HAS(attr) ? attr_get(c, it, attr) : it, HAS(cs) && tv_truthy(cs));
    if (key_cmp(c, k, bk) == want) { best = it; bk = k; }
  }
  return best;
}
static tmpl_value f_min(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  return minmax(c, in, args, n, kwargs, -1);
}
static tmpl_value f_max(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  return minmax(c, in, args, n, kwargs, 1);
}

static tmpl_value f_wordcount(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  tmpl_value s = need_str(c, in);
  int64_t cnt = 0;
  bool inword = false;
  for (size_t i = 0; i < s.u.s->len;) {
    uint32_t cp;
    size_t k = utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
    bool w = cp == '_' || (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp >= 0x80;
    if (w && !inword) cnt++;
    inword = w;
    i += k;
  }
  return tmpl_int(cnt);
}

static tmpl_value f_center(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value s = need_str(c, in);
  tmpl_value w = ARG(0, "width");
  tmpl_value a[1] = {HAS(w) ? w : tmpl_int(80)};
  return tm_method_call(c, s, "center", a, 1, tmpl_undefined());
}

static tmpl_value f_truncate(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value s = need_str(c, in);
  int64_t length = need_int(c, ARG(0, "length"), 255, "length");
  tmpl_value kw = ARG(1, "killwords"), end = ARG(2, "end"), lee = ARG(3, "leeway");
  tmpl_value e = HAS(end) ? need_str(c, end) : tv_strz(c->h, "...");
  int64_t leeway = need_int(c, lee, 5, "leeway");
  int64_t len = (int64_t)tv_len_cp(s), elen = (int64_t)tv_len_cp(e);
  if (length < elen) tm_error(c, ERR_INVALID, "truncate: expected length >= %lld", (long long)elen);
  if (len <= length + leeway) return s;
  size_t cut = utf8_offset(s.u.s->data, s.u.s->len, (size_t)(length - elen));
  sb o;
  sb_init(&o, c->h);
  if (HAS(kw) && tv_truthy(kw)) {
    sb_add(&o, s.u.s->data, cut);
  } else {
    /* drop the last (partial) word: rsplit(" ", 1)[0] */
    size_t k = cut;
    while (k > 0 && s.u.s->data[k - 1] != ' ') k--;
    sb_add(&o, s.u.s->data, k ? k - 1 : cut);
  }
  sb_add(&o, e.u.s->data, e.u.s->len);
  return tv_sb(&o);
}

static tmpl_value f_escape(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  if (in.type == TMPL_STRING && in.u.s->safe) return in;
  return tm_html_escape(c, need_str(c, in));
}

tmpl_value tm_html_escape(tm_ctx *c, tmpl_value s) {
  sb o;
  sb_init(&o, c->h);
  for (size_t i = 0; i < s.u.s->len; i++) {
    char ch = s.u.s->data[i];
    switch (ch) {
    case '&': sb_adds(&o, "&amp;"); break;
    case '<': sb_adds(&o, "&lt;"); break;
    case '>': sb_adds(&o, "&gt;"); break;
    case '"': sb_adds(&o, "&#34;"); break;
    case '\'': sb_adds(&o, "&#39;"); break;
    default: sb_addc(&o, ch);
    }
  }
  tmpl_value r = tv_sb(&o);
  r.u.s->safe = true;
  return r;
}

static tmpl_value f_striptags(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  tmpl_value s = need_str(c, in);
  sb o;
  sb_init(&o, c->h);
  bool space = false;
  for (size_t i = 0; i < s.u.s->len; i++) {
    char ch = s.u.s->data[i];
    if (ch == '<') {
      const char *e = memchr(s.u.s->data + i, '>', s.u.s->len - i);
      if (e) { i = (size_t)(e - s.u.s->data); space = true; continue; }
    }
    if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r') { space = true; continue; }
    if (space && o.len) sb_addc(&o, ' ');
    space = false;
    /* Markup.striptags() also unescapes the common entities */
    static const struct { const char *ent, *ch; } ENT[] = {
        {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#34;", "\""}, {"&#39;", "'"}};
    bool done = false;
    for (size_t e = 0; e < ARRAY_LEN(ENT) && ch == '&'; e++) {
      size_t el = strlen(ENT[e].ent);
      if (s.u.s->len - i >= el && memcmp(s.u.s->data + i, ENT[e].ent, el) == 0) {
        sb_adds(&o, ENT[e].ch);
        i += el - 1;
        done = true;
        break;
      }
    }
    if (!done) sb_addc(&o, ch);
  }
  return tv_sb(&o);
}

static tmpl_value f_format(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)kwargs;
  tmpl_value tup = tv_list(c->h, n);
  tup.u.l->tuple = true;
  for (size_t i = 0; i < n; i++) tv_list_push(c->h, tup, args[i]);
  tmpl_value s = need_str(c, in);
  /* reuse the % operator through a tiny call into the method layer */
  return tm_method_call(c, s, "__mod__", &tup, 1, tmpl_undefined());
}

static tmpl_value f_attr(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  tmpl_value name = need_str(c, ARG(0, "name"));
  return tm_getattr(c, in, name.u.s->data, name.u.s->len);
}

static tmpl_value f_pprint(tm_ctx *c, tmpl_value in, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  (void)args, (void)n, (void)kwargs;
  sb o;
  sb_init(&o, c->h);
  tv_repr(&o, in);
  return tv_sb(&o);
}

typedef struct filter_entry {
  const char *name;
  filter_fn fn;
} filter_entry;

static const filter_entry FILTERS[] = {
    {"abs", f_abs},         {"attr", f_attr},           {"batch", f_batch},       {"capitalize", f_capitalize},
    {"center", f_center},   {"count", f_length},        {"d", f_default},         {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},          {"escape", f_escape},     {"first", f_first},
    {"float", f_float},     {"format", f_format},       {"indent", f_indent},     {"int", f_int},
    {"items", f_items},     {"join", f_join},           {"last", f_last},         {"length", f_length},
    {"list", f_list},       {"lower", f_lower},         {"map", f_map},           {"max", f_max},
    {"min", f_min},         {"pprint", f_pprint},       {"reject", f_reject},     {"rejectattr", f_rejectattr},
    {"replace", f_replace}, {"reverse", f_reverse},     {"round", f_round},       {"safe", f_safe},
    {"select", f_select},   {"selectattr", f_selectattr}, {"sort", f_sort},       {"string", f_string},
    {"striptags", f_striptags}, {"sum", f_sum},         {"title", f_title},       {"tojson", f_tojson},
    {"trim", f_trim},       {"truncate", f_truncate},   {"unique", f_unique},     {"upper", f_upper},
    {"wordcount", f_wordcount},
};

static const filter_entry *filter_find(const char *name) {
  for (size_t i = 0; i < ARRAY_LEN(FILTERS); i++)
    if (strcmp(FILTERS[i].name, name) == 0) return &FILTERS[i];
  return NULL;
}

bool tm_filter_exists(const char *name) { return filter_find(name) != NULL; }

bool tm_filter_apply(tm_ctx *c, const char *name, tmpl_value in, const tmpl_value *args, size_t n,
                     tmpl_value kwargs, tmpl_value *out) {
  const filter_entry *f = filter_find(name);
  if (!f) return false;
  *out = f->fn(c, in, args, n, kwargs);
  return true;
}

/* ------------------------------------------------------------------ tests */

static bool str_all_cased(tmpl_value s, bool upper) {
  /* Python islower/isupper: at least one cased char, none of the other case */
  bool any = false;
  for (size_t i = 0; i < s.u.s->len; i++) {
    char ch = s.u.s->data[i];
    if (ch >= 'a' && ch <= 'z') { if (upper) return false; any = true; }
    if (ch >= 'A' && ch <= 'Z') { if (!upper) return false; any = true; }
  }
  return any;
}

bool tm_test_apply(tm_ctx *c, const char *name, tmpl_value v, const tmpl_value *args, size_t n, bool *out) {
  tmpl_value a0 = n ? args[0] : tmpl_undefined();
  tmpl_type t = v.type;
  bool r;
  if (!strcmp(name, "defined")) r = t != TMPL_UNDEFINED;
  else if (!strcmp(name, "undefined")) r = t == TMPL_UNDEFINED;
  else if (!strcmp(name, "none")) r = t == TMPL_NONE;
  else if (!strcmp(name, "string")) r = t == TMPL_STRING;
  else if (!strcmp(name, "number")) r = t == TMPL_INT || t == TMPL_FLOAT || t == TMPL_BOOL;
  else if (!strcmp(name, "integer")) r = t == TMPL_INT;
  else if (!strcmp(name, "float")) r = t == TMPL_FLOAT;
  else if (!strcmp(name, "boolean")) r = t == TMPL_BOOL;
  else if (!strcmp(name, "true")) r = t == TMPL_BOOL && v.u.b;
  else if (!strcmp(name, "false")) r = t == TMPL_BOOL && !v.u.b;
  else if (!strcmp(name, "mapping")) r = t == TMPL_DICT;
  else if (!strcmp(name, "iterable") || !strcmp(name, "sequence"))
    r = t == TMPL_STRING || t == TMPL_LIST || t == TMPL_DICT || t == TMPL_UNDEFINED;
  else if (!strcmp(name, "callable")) r = t == TMPL_FUNC;
  else if (!strcmp(name, "odd") || !strcmp(name, "even")) {
    if (t != TMPL_INT && t != TMPL_BOOL) tm_error(c, ERR_TYPE, "test '%s' needs an integer, not %s", name, tv_type_name(v));
    int64_t x = t == TMPL_INT ? v.u.i : v.u.b;
    r = ((x % 2) != 0) == (name[0] == 'o');
  } else if (!strcmp(name, "divisibleby")) {
    if (!tv_is_number(v) || !tv_is_number(a0)) tm_error(c, ERR_TYPE, "divisibleby needs numbers");
    if (tv_num(a0) == 0) tm_error(c, ERR_INVALID, "divisibleby zero");
    r = fmod(tv_num(v), tv_num(a0)) == 0;
  } else if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) r = tv_equal(v, a0);
  else if (!strcmp(name, "ne") || !strcmp(name, "!=")) r = !tv_equal(v, a0);
  else if (!strcmp(name, "<") || !strcmp(name, "<=") || !strcmp(name, ">") || !strcmp(name, ">=")) {
    const char *alias = name[0] == '<' ? (name[1] ? "le" : "lt") : (name[1] ? "ge" : "gt");
    return tm_test_apply(c, alias, v, args, n, out);
  }
  else if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "le") || !strcmp(name, "gt") ||
           !strcmp(name, "greaterthan") || !strcmp(name, "ge")) {
    int cmp = tv_compare(v, a0);
    if (cmp == -2) tm_error(c, ERR_TYPE, "test '%s': cannot compare %s and %s", name, tv_type_name(v), tv_type_name(a0));
    if (name[0] == 'l') r = (name[1] == 'e') ? cmp <= 0 : cmp < 0;
    else r = (name[1] == 'e') ? cmp >= 0 : cmp > 0;
    if (cmp == 2) r = false;
  } else if (!strcmp(name, "in")) {
    if (a0.type == TMPL_STRING) r = v.type == TMPL_STRING && memmem(a0.u.s->data, a0.u.s->len, v.u.s->data, v.u.s->len) != NULL;
    else if (a0.type == TMPL_LIST) {
      r = false;
      for (size_t i = 0; i < a0.u.l->n && !r; i++) r = tv_equal(a0.u.l->items[i], v);
    } else if (a0.type == TMPL_DICT) {
      tmpl_value x;
      r = tv_dict_get(a0, v, &x);
    } else tm_error(c, ERR_TYPE, "test 'in' needs a container, not %s", tv_type_name(a0));
  } else if (!strcmp(name, "lower")) r = t == TMPL_STRING ? str_all_cased(v, false) : str_all_cased(tm_to_string(c, v), false);
  else if (!strcmp(name, "upper")) r = t == TMPL_STRING ? str_all_cased(v, true) : str_all_cased(tm_to_string(c, v), true);
  else if (!strcmp(name, "sameas")) {
    if (t != a0.type) r = false;
    else if (t == TMPL_NONE || t == TMPL_UNDEFINED) r = true;
    else if (t == TMPL_BOOL) r = v.u.b == a0.u.b;
    else if (t == TMPL_INT) r = v.u.i == a0.u.i && v.u.i >= -5 && v.u.i <= 256;
    else if (t == TMPL_STRING) r = tv_equal(v, a0); /* CPython interns equal literals */
    else if (t == TMPL_LIST) r = v.u.l == a0.u.l;
    else if (t == TMPL_DICT || t == TMPL_NAMESPACE) r = v.u.d == a0.u.d;
    else if (t == TMPL_FUNC) r = v.u.fn == a0.u.fn;
    else r = false;
  } else if (!strcmp(name, "escaped")) r = false;
  else if (!strcmp(name, "filter")) r = t == TMPL_STRING && tm_filter_exists(v.u.s->data);
  else if (!strcmp(name, "test")) r = t == TMPL_STRING && tm_test_exists(v.u.s->data);
  else return false;
  *out = r;
  return true;
}

static const char *const TESTS[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true", "false",
    "mapping", "iterable", "sequence", "callable", "odd", "even", "divisibleby", "eq", "equalto", "==",
    "ne", "!=", "<", "<=", ">", ">=", "lt", "lessthan", "le", "gt", "greaterthan", "ge", "in", "lower", "upper", "sameas",
    "escaped", "filter", "test",
};

bool tm_test_exists(const char *name) {
  for (size_t i = 0; i < ARRAY_LEN(TESTS); i++)
    if (strcmp(TESTS[i], name) == 0) return true;
  return false;
}
