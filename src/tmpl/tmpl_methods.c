/*
 * tmpl_methods.c - Python methods on template values (str.strip, str.split,
 * dict.get, dict.items, list.append, ...) and the builtin globals (range,
 * namespace, dict, raise_exception, strftime_now, joiner).
 *
 * Strings are UTF-8; methods that count or index (find, center, zfill, ...)
 * work in code points as Python does. Case mapping uses utf8proc's simple
 * per-code-point mappings, which equal Python's for everything but a few
 * special cases (e.g. German sharp s uppercases to "SS" in Python).
 *
 * Mutating methods (append, pop, update, ...) are provided although
 * transformers' ImmutableSandboxedEnvironment refuses them: llama.cpp and
 * other runtimes accept them, and templates that use them would otherwise not
 * render at all. The render copied the caller's containers (tmpl_eval.c), so
 * mutation never reaches the caller's values.
 *
 * Start reading at tm_method_call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "base/err.h"
#include "base/util.h"
#include "tmpl/tmpl_internal.h"

#define ARG(pos, name) tm_arg(args, n, kwargs, pos, name)
#define HAS(v) ((v).type != TMPL_UNDEFINED)
#define MAX_RANGE 100000

/* -------------------------------------------------------- string helpers */

static tmpl_value map_case(tm_ctx *c, tmpl_value s, int mode /* 0 lower, 1 upper, 2 swap */) {
  if (s.u.s->ascii) {
    tmpl_value r = tv_str(c->h, s.u.s->data, s.u.s->len);
    char *d = r.u.s->data;
    for (size_t i = 0; i < r.u.s->len; i++) {
      char ch = d[i];
      bool lo = ch >= 'a' && ch <= 'z', up = ch >= 'A' && ch <= 'Z';
      if ((mode == 0 || mode == 2) && up) d[i] = (char)(ch + 32);
      else if ((mode == 1 || mode == 2) && lo) d[i] = (char)(ch - 32);
    }
    return r;
  }
  sb o;
  sb_init(&o, c->h);
  for (size_t i = 0; i < s.u.s->len;) {
    uint32_t cp;
    size_t k = utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
    int32_t m = (int32_t)cp;
    if (cp == 0xDF && mode != 0) { /* Python's full mapping: sharp s uppercases to "SS" */
      sb_adds(&o, "SS");
      i += k;
      continue;
    }
    if (mode == 0) m = utf8proc_tolower(m);
    else if (mode == 1) m = utf8proc_toupper(m);
    else m = utf8proc_islower(m) ? utf8proc_toupper(m) : utf8proc_isupper(m) ? utf8proc_tolower(m) : m;
    if ((uint32_t)m == cp) sb_add(&o, s.u.s->data + i, k);
    else {
      char u8[4];
      sb_add(&o, u8, utf8_encode((uint32_t)m, u8));
    }
    i += k;
  }
  return tv_sb(&o);
}

tmpl_value tm_str_lower(tm_ctx *c, tmpl_value s) { return map_case(c, s, 0); }
tmpl_value tm_str_upper(tm_ctx *c, tmpl_value s) { return map_case(c, s, 1); }

static bool is_cased_letter(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  return utf8proc_islower((int32_t)cp) || utf8proc_isupper((int32_t)cp);
}

tmpl_value tm_str_capitalize(tm_ctx *c, tmpl_value s) {
  sb o;
  sb_init(&o, c->h);
  for (size_t i = 0; i < s.u.s->len;) {
    uint32_t cp;
    size_t k = utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
    int32_t m = i == 0 ? utf8proc_toupper((int32_t)cp) : utf8proc_tolower((int32_t)cp);
    char u8[4];
    sb_add(&o, u8, utf8_encode((uint32_t)m, u8));
    i += k;
  }
  return tv_sb(&o);
}

static tmpl_value str_title(tm_ctx *c, tmpl_value s) {
  sb o;
  sb_init(&o, c->h);
  bool prev_cased = false;
  for (size_t i = 0; i < s.u.s->len;) {
    uint32_t cp;
    size_t k = utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
    bool cased = is_cased_letter(cp);
    int32_t m = cased ? (prev_cased ? utf8proc_tolower((int32_t)cp) : utf8proc_toupper((int32_t)cp)) : (int32_t)cp;
    char u8[4];
    sb_add(&o, u8, utf8_encode((uint32_t)m, u8));
    prev_cased = cased;
    i += k;
  }
  return tv_sb(&o);
}

/* is code point cp in the strip set (NULL set = whitespace) */
static bool in_set(uint32_t cp, tmpl_value chars) {
  if (chars.type != TMPL_STRING) return py_isspace(cp);
  const char *d = chars.u.s->data;
  for (size_t i = 0; i < chars.u.s->len;) {
    uint32_t x;
    size_t k = utf8_decode(d + i, chars.u.s->len - i, &x);
    if (x == cp) return true;
    i += k;
  }
  return false;
}

tmpl_value tm_str_strip(tm_ctx *c, tmpl_value s, tmpl_value chars, bool left, bool right) {
  if (chars.type != TMPL_STRING && chars.type != TMPL_UNDEFINED && chars.type != TMPL_NONE)
    tm_error(c, ERR_TYPE, "strip arg must be None or str, not %s", tv_type_name(chars));
  const char *d = s.u.s->data;
  size_t a = 0, b = s.u.s->len;
  if (left)
    while (a < b) {
      uint32_t cp;
      size_t k = utf8_decode(d + a, b - a, &cp);
      if (!in_set(cp, chars)) break;
      a += k;
    }
  if (right)
    while (b > a) {
      size_t st = b - 1;
      while (st > a && ((unsigned char)d[st] & 0xC0) == 0x80) st--;
      uint32_t cp;
      utf8_decode(d + st, b - st, &cp);
      if (!in_set(cp, chars)) break;
      b = st;
    }
  if (a == 0 && b == s.u.s->len) return s;
  return tv_str(c->h, d + a, b - a);
}

tmpl_value tm_str_replace(tm_ctx *c, tmpl_value s, tmpl_value old, tmpl_value nw, int64_t count) {
  sb o;
  sb_init(&o, c->h);
  const char *d = s.u.s->data;
  size_t n = s.u.s->len, on = old.u.s->len;
  if (on == 0) {
    /* Python inserts new between every character and at both ends */
    int64_t done = 0;
    for (size_t i = 0; i <= n;) {
      if (count < 0 || done < count) { sb_add(&o, nw.u.s->data, nw.u.s->len); done++; }
      if (i == n) break;
      uint32_t cp;
      size_t k = utf8_decode(d + i, n - i, &cp);
      sb_add(&o, d + i, k);
      i += k;
    }
    return tv_sb(&o);
  }
  size_t i = 0;
  int64_t done = 0;
  while (i < n) {
    const char *f = (count < 0 || done < count) ? memmem(d + i, n - i, old.u.s->data, on) : NULL;
    if (!f) break;
    sb_add(&o, d + i, (size_t)(f - (d + i)));
    sb_add(&o, nw.u.s->data, nw.u.s->len);
    i = (size_t)(f - d) + on;
    done++;
  }
  sb_add(&o, d + i, n - i);
  return tv_sb(&o);
}

tmpl_value tm_splitlines(tm_ctx *c, tmpl_value s, bool keepends) {
  tmpl_value out = tv_list(c->h, 0);
  const char *d = s.u.s->data;
  size_t n = s.u.s->len, start = 0;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t k = utf8_decode(d + i, n - i, &cp);
    bool br = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D || cp == 0x1E ||
              cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!br) { i += k; continue; }
    size_t end = i;
    i += k;
    if (cp == '\r' && i < n && d[i] == '\n') i++;
    tv_list_push(c->h, out, tv_str(c->h, d + start, (keepends ? i : end) - start));
    start = i;
  }
  if (start < n) tv_list_push(c->h, out, tv_str(c->h, d + start, n - start));
  return out;
}

static tmpl_value str_split(tm_ctx *c, tmpl_value s, tmpl_value sep, int64_t maxsplit, bool from_right) {
  tmpl_value out = tv_list(c->h, 0);
  const char *d = s.u.s->data;
  size_t n = s.u.s->len;
  if (sep.type == TMPL_STRING) {
    size_t sn = sep.u.s->len;
    if (sn == 0) tm_error(c, ERR_INVALID, "split: empty separator");
    if (!from_right) {
      size_t i = 0;
      int64_t done = 0;
      for (;;) {
        const char *f = (maxsplit < 0 || done < maxsplit) ? memmem(d + i, n - i, sep.u.s->data, sn) : NULL;
        if (!f) break;
        tv_list_push(c->h, out, tv_str(c->h, d + i, (size_t)(f - (d + i))));
        i = (size_t)(f - d) + sn;
        done++;
      }
      tv_list_push(c->h, out, tv_str(c->h, d + i, n - i));
      return out;
    }
    /* rsplit: collect from the right then reverse */
    tmpl_value rev = tv_list(c->h, 0);
    size_t end = n;
    int64_t done = 0;
    while (maxsplit < 0 || done < maxsplit) {
      size_t found = SIZE_MAX;
      for (size_t j = end; j >= sn; j--)
        if (memcmp(d + j - sn, sep.u.s->data, sn) == 0) { found = j - sn; break; }
      if (found == SIZE_MAX) break;
      tv_list_push(c->h, rev, tv_str(c->h, d + found + sn, end - found - sn));
      end = found;
      done++;
    }
    tv_list_push(c->h, rev, tv_str(c->h, d, end));
    for (size_t i = rev.u.l->n; i-- > 0;) tv_list_push(c->h, out, rev.u.l->items[i]);
    return out;
  }
  /* whitespace runs */
  if (!from_right) {
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
      while (i < n) {
        uint32_t cp;
        size_t k = utf8_decode(d + i, n - i, &cp);
        if (!py_isspace(cp)) break;
        i += k;
      }
      if (i >= n) break;
      if (maxsplit >= 0 && done >= maxsplit) { /* the rest, trailing spaces kept, as Python */
        tv_list_push(c->h, out, tv_str(c->h, d + i, n - i));
        break;
      }
      size_t st = i;
      while (i < n) {
        uint32_t cp;
        size_t k = utf8_decode(d + i, n - i, &cp);
        if (py_isspace(cp)) break;
        i += k;
      }
      tv_list_push(c->h, out, tv_str(c->h, d + st, i - st));
      done++;
    }
    return out;
  }
  tmpl_value all = str_split(c, s, tmpl_none(), -1, false);
  if (maxsplit < 0 || (int64_t)all.u.l->n <= maxsplit + 1) return all;
  /* the first (words - maxsplit) words stay together as in the source */
  size_t keep = all.u.l->n - (size_t)maxsplit;
  size_t i = 0, w = 0, first_end = 0;
  while (i < n && w < keep) {
    while (i < n && py_isspace((unsigned char)d[i])) i++;
    while (i < n && !py_isspace((unsigned char)d[i])) i++;
    w++;
    first_end = i;
  }
  tv_list_push(c->h, out, tv_str(c->h, d, first_end)); /* leading spaces kept, as Python */
  for (size_t k = keep; k < all.u.l->n; k++) tv_list_push(c->h, out, all.u.l->items[k]);
  return out;
}

static int64_t str_find(tmpl_value s, tmpl_value sub, bool from_right) {
  const char *d = s.u.s->data;
  size_t n = s.u.s->len, m = sub.u.s->len;
  if (m > n) return -1;
  if (!from_right) {
    const char *f = m ? memmem(d, n, sub.u.s->data, m) : d;
    return f ? (int64_t)utf8_count(d, (size_t)(f - d)) : -1;
  }
  for (size_t j = n - m + 1; j-- > 0;)
    if (memcmp(d + j, sub.u.s->data, m) == 0) return (int64_t)utf8_count(d, j);
  return -1;
}

static bool affix_match(tm_ctx *c, tmpl_value s, tmpl_value a, bool suffix) {
  if (a.type == TMPL_LIST) {
    for (size_t i = 0; i < a.u.l->n; i++)
      if (affix_match(c, s, a.u.l->items[i], suffix)) return true;
    return false;
  }
  if (a.type != TMPL_STRING) tm_error(c, ERR_TYPE, "%s arg must be str or a tuple of str, not %s", suffix ? "endswith" : "startswith", tv_type_name(a));
  size_t n = s.u.s->len, m = a.u.s->len;
  if (m > n) return false;
  return memcmp(s.u.s->data + (suffix ? n - m : 0), a.u.s->data, m) == 0;
}

static tmpl_value pad(tm_ctx *c, tmpl_value s, int64_t width, tmpl_value fill, int where /* 0 c, 1 l, 2 r */) {
  int64_t len = (int64_t)tv_len_cp(s);
  if (width > 1000000) tm_error(c, ERR_TOO_LARGE, "padding width too large");
  if (width <= len) return s;
  const char *f = " ";
  size_t fl = 1;
  if (fill.type == TMPL_STRING) { f = fill.u.s->data; fl = fill.u.s->len; }
  int64_t total = width - len, left;
  if (where == 1) left = 0;
  else if (where == 2) left = total;
  else left = total / 2 + ((total & width & 1) ? 1 : 0);
  sb o;
  sb_init(&o, c->h);
  for (int64_t i = 0; i < left; i++) sb_add(&o, f, fl);
  sb_add(&o, s.u.s->data, s.u.s->len);
  for (int64_t i = 0; i < total - left; i++) sb_add(&o, f, fl);
  return tv_sb(&o);
}

/* str.format: {} {0} {name} {name.attr} with !r/!s and a basic spec */
static tmpl_value str_format(tm_ctx *c, tmpl_value s, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  sb o;
  sb_init(&o, c->h);
  const char *d = s.u.s->data;
  size_t len = s.u.s->len, auto_i = 0;
  for (size_t i = 0; i < len; i++) {
    char ch = d[i];
    if (ch == '{' && i + 1 < len && d[i + 1] == '{') { sb_addc(&o, '{'); i++; continue; }
    if (ch == '}' && i + 1 < len && d[i + 1] == '}') { sb_addc(&o, '}'); i++; continue; }
    if (ch != '{') { sb_addc(&o, ch); continue; }
    const char *e = memchr(d + i, '}', len - i);
    if (!e) tm_error(c, ERR_INVALID, "format: single '{' encountered");
    const char *f = d + i + 1;
    size_t fl = (size_t)(e - f);
    const char *colon = memchr(f, ':', fl), *bang = memchr(f, '!', fl);
    size_t name_len = bang && (!colon || bang < colon) ? (size_t)(bang - f) : colon ? (size_t)(colon - f) : fl;
    tmpl_value v;
    if (name_len == 0) {
      if (auto_i >= n) tm_error(c, ERR_INVALID, "format: not enough positional arguments");
      v = args[auto_i++];
    } else if (f[0] >= '0' && f[0] <= '9') {
      size_t k = (size_t)strtoul(f, NULL, 10);
      if (k >= n) tm_error(c, ERR_INVALID, "format: index %zu out of range", k);
      v = args[k];
    } else {
      if (kwargs.type != TMPL_DICT || !tv_dict_get_s(kwargs, f, name_len, &v))
        tm_error(c, ERR_INVALID, "format: missing argument '%.*s'", (int)name_len, f);
    }
    tmpl_value str;
    if (bang && bang + 1 < e && bang[1] == 'r') {
      sb r;
      sb_init(&r, c->h);
      tv_repr(&r, v);
      str = tv_sb(&r);
    } else if (colon && colon + 1 < e) {
      char spec[32];
      size_t sl = (size_t)(e - colon - 1);
      if (sl >= 24) tm_error(c, ERR_UNSUPPORTED, "format: spec too long");
      char type = colon[sl];
      char fmt[40];
      memcpy(spec, colon + 1, sl);
      spec[sl] = 0;
      sb r;
      sb_init(&r, c->h);
      if ((type == 'd' || type == 'f' || type == 'e' || type == 'g') && tv_is_number(v)) {
        char body[28];
        memcpy(body, spec, sl - 1);
        body[sl - 1] = 0;
        bool left = body[0] == '<';
        const char *w = (body[0] == '<' || body[0] == '>') ? body + 1 : body;
        if (type == 'd') {
          snprintf(fmt, sizeof fmt, "%%%s%slld", left ? "-" : "", w);
          sb_addf(&r, fmt, (long long)(v.type == TMPL_FLOAT ? (int64_t)v.u.f : v.type == TMPL_INT ? v.u.i : v.u.b));
        } else {
          snprintf(fmt, sizeof fmt, "%%%s%s%c", left ? "-" : "", w, type);
          sb_addf(&r, fmt, tv_num(v));
        }
      } else {
        tmpl_value sv = tm_to_string(c, v);
        const char *w = spec;
        int where = v.type == TMPL_STRING ? 1 : 2;
        if (w[0] == '<') { where = 1; w++; } else if (w[0] == '>') { where = 2; w++; } else if (w[0] == '^') { where = 0; w++; }
        sv = pad(c, sv, strtoll(w, NULL, 10), tmpl_undefined(), where);
        sb_add(&r, sv.u.s->data, sv.u.s->len);
      }
      str = tv_sb(&r);
    } else str = tm_to_string(c, v);
    sb_add(&o, str.u.s->data, str.u.s->len);
    i = (size_t)(e - d);
  }
  return tv_sb(&o);
}

static bool str_all(tmpl_value s, int kind) {
  if (s.u.s->len == 0) return false;
  for (size_t i = 0; i < s.u.s->len;) {
    uint32_t cp;
    size_t k = utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
    utf8proc_category_t cat = utf8proc_category((int32_t)cp);
    bool ok;
    switch (kind) {
    case 0: ok = cat == UTF8PROC_CATEGORY_ND; break;                    /* isdigit (approx.) */
    case 1: ok = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO; break; /* isalpha */
    case 2: ok = (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) || (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO); break;
    case 3: ok = py_isspace(cp); break;
    default: ok = (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO); break; /* isnumeric */
    }
    if (!ok) return false;
    i += k;
  }
  return true;
}

static const char *const STR_METHODS[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "upper", "lower",
    "title", "capitalize", "swapcase", "casefold", "find", "rfind", "index", "rindex", "count", "format",
    "join", "splitlines", "isdigit", "isdecimal", "isnumeric", "isalpha", "isalnum", "isspace", "isupper",
    "islower", "zfill", "center", "ljust", "rjust", "partition", "rpartition", "removeprefix",
    "removesuffix", NULL};
static const char *const DICT_METHODS[] = {"get", "items", "keys", "values", "pop", "setdefault", "update",
                                           "copy", "clear", NULL};
static const char *const LIST_METHODS[] = {"append", "pop", "index", "count", "extend", "insert", "remove",
                                           "reverse", "sort", "copy", "clear", NULL};

static bool in_list(const char *const *names, const char *name, size_t n) {
  for (size_t i = 0; names[i]; i++)
    if (strlen(names[i]) == n && memcmp(names[i], name, n) == 0) return true;
  return false;
}

bool tm_method_exists(tmpl_value self, const char *name, size_t n) {
  switch (self.type) {
  case TMPL_STRING: return in_list(STR_METHODS, name, n);
  case TMPL_DICT: return in_list(DICT_METHODS, name, n);
  case TMPL_LIST: return in_list(LIST_METHODS, name, n) && (!self.u.l->tuple || (n == 5 && !memcmp(name, "index", 5)) || (n == 5 && !memcmp(name, "count", 5)));
  default: return false;
  }
}

static tmpl_value str_method(tm_ctx *c, tmpl_value s, const char *m, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  if (!strcmp(m, "strip")) return tm_str_strip(c, s, ARG(0, "chars"), true, true);
  if (!strcmp(m, "lstrip")) return tm_str_strip(c, s, ARG(0, "chars"), true, false);
  if (!strcmp(m, "rstrip")) return tm_str_strip(c, s, ARG(0, "chars"), false, true);
  if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
    tmpl_value sep = ARG(0, "sep"), ms = ARG(1, "maxsplit");
    int64_t maxsplit = ms.type == TMPL_INT ? ms.u.i : -1;
    return str_split(c, s, sep.type == TMPL_STRING ? sep : tmpl_none(), maxsplit, m[0] == 'r');
  }
  if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) return tmpl_bool(affix_match(c, s, ARG(0, "prefix"), m[0] == 'e'));
  if (!strcmp(m, "replace")) {
    tmpl_value a = ARG(0, "old"), b = ARG(1, "new"), cnt = ARG(2, "count");
    if (a.type != TMPL_STRING || b.type != TMPL_STRING) tm_error(c, ERR_TYPE, "replace() arguments must be str");
    return tm_str_replace(c, s, a, b, cnt.type == TMPL_INT ? cnt.u.i : -1);
  }
  if (!strcmp(m, "upper")) return map_case(c, s, 1);
  if (!strcmp(m, "lower") || !strcmp(m, "casefold")) return map_case(c, s, 0);
  if (!strcmp(m, "swapcase")) return map_case(c, s, 2);
  if (!strcmp(m, "title")) return str_title(c, s);
  if (!strcmp(m, "capitalize")) return tm_str_capitalize(c, s);
  if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex")) {
    tmpl_value sub = ARG(0, "sub");
    if (sub.type != TMPL_STRING) tm_error(c, ERR_TYPE, "%s() argument must be str, not %s", m, tv_type_name(sub));
    int64_t r = str_find(s, sub, m[0] == 'r');
    if (r < 0 && strstr(m, "index")) tm_error(c, ERR_INVALID, "substring not found");
    return tmpl_int(r);
  }
  if (!strcmp(m, "count")) {
    tmpl_value sub = ARG(0, "sub");
    if (sub.type != TMPL_STRING) tm_error(c, ERR_TYPE, "count() argument must be str");
    if (sub.u.s->len == 0) return tmpl_int((int64_t)tv_len_cp(s) + 1);
    int64_t k = 0;
    const char *d = s.u.s->data, *end = d + s.u.s->len;
    while (d < end) {
      const char *f = memmem(d, (size_t)(end - d), sub.u.s->data, sub.u.s->len);
      if (!f) break;
      k++;
      d = f + sub.u.s->len;
    }
    return tmpl_int(k);
  }
  if (!strcmp(m, "format")) return str_format(c, s, args, n, kwargs);
  if (!strcmp(m, "__mod__")) {
    /* used by the format filter: "fmt" % tuple */
    return tm_str_mod(c, s, args[0]);
  }
  if (!strcmp(m, "join")) {
    tmpl_value items = tm_iterate(c, ARG(0, "iterable"));
    sb o;
    sb_init(&o, c->h);
    for (size_t i = 0; i < items.u.l->n; i++) {
      if (items.u.l->items[i].type != TMPL_STRING) tm_error(c, ERR_TYPE, "sequence item %zu: expected str instance, %s found", i, tv_type_name(items.u.l->items[i]));
      if (i) sb_add(&o, s.u.s->data, s.u.s->len);
      sb_add(&o, items.u.l->items[i].u.s->data, items.u.l->items[i].u.s->len);
    }
    return tv_sb(&o);
  }
  if (!strcmp(m, "splitlines")) {
    tmpl_value ke = ARG(0, "keepends");
    return tm_splitlines(c, s, HAS(ke) && tv_truthy(ke));
  }
  if (!strcmp(m, "isdigit") || !strcmp(m, "isdecimal")) return tmpl_bool(str_all(s, 0));
  if (!strcmp(m, "isnumeric")) return tmpl_bool(str_all(s, 4));
  if (!strcmp(m, "isalpha")) return tmpl_bool(str_all(s, 1));
  if (!strcmp(m, "isalnum")) return tmpl_bool(str_all(s, 2));
  if (!strcmp(m, "isspace")) return tmpl_bool(str_all(s, 3));
  if (!strcmp(m, "isupper") || !strcmp(m, "islower")) {
    bool want_upper = m[2] == 'u', any = false;
    for (size_t i = 0; i < s.u.s->len;) {
      uint32_t cp;
      size_t k = utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
      if (utf8proc_isupper((int32_t)cp)) { if (!want_upper) return tmpl_bool(false); any = true; }
      else if (utf8proc_islower((int32_t)cp)) { if (want_upper) return tmpl_bool(false); any = true; }
      i += k;
    }
    return tmpl_bool(any);
  }
  if (!strcmp(m, "zfill")) {
    tmpl_value w = ARG(0, "width");
    int64_t width = w.type == TMPL_INT ? w.u.i : 0, len = (int64_t)tv_len_cp(s);
    if (width > 1000000) tm_error(c, ERR_TOO_LARGE, "zfill width too large");
    if (width <= len) return s;
    sb o;
    sb_init(&o, c->h);
    size_t at = 0;
    if (s.u.s->len && (s.u.s->data[0] == '-' || s.u.s->data[0] == '+')) { sb_addc(&o, s.u.s->data[0]); at = 1; }
    for (int64_t i = 0; i < width - len; i++) sb_addc(&o, '0');
    sb_add(&o, s.u.s->data + at, s.u.s->len - at);
    return tv_sb(&o);
  }
  if (!strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust")) {
    tmpl_value w = ARG(0, "width");
    if (w.type != TMPL_INT) tm_error(c, ERR_TYPE, "%s() width must be an integer", m);
    return pad(c, s, w.u.i, ARG(1, "fillchar"), m[0] == 'c' ? 0 : m[0] == 'l' ? 1 : 2);
  }
  if (!strcmp(m, "partition") || !strcmp(m, "rpartition")) {
    tmpl_value sep = ARG(0, "sep");
    if (sep.type != TMPL_STRING || sep.u.s->len == 0) tm_error(c, ERR_INVALID, "%s: bad separator", m);
    tmpl_value t = tv_list(c->h, 3);
    t.u.l->tuple = true;
    int64_t at = str_find(s, sep, m[0] == 'r');
    tmpl_value empty = tv_str(c->h, "", 0);
    if (at < 0) {
      if (m[0] == 'r') { tv_list_push(c->h, t, empty); tv_list_push(c->h, t, empty); tv_list_push(c->h, t, s); }
      else { tv_list_push(c->h, t, s); tv_list_push(c->h, t, empty); tv_list_push(c->h, t, empty); }
      return t;
    }
    size_t b = utf8_offset(s.u.s->data, s.u.s->len, (size_t)at);
    tv_list_push(c->h, t, tv_str(c->h, s.u.s->data, b));
    tv_list_push(c->h, t, sep);
    tv_list_push(c->h, t, tv_str(c->h, s.u.s->data + b + sep.u.s->len, s.u.s->len - b - sep.u.s->len));
    return t;
  }
  if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
    tmpl_value a = ARG(0, "prefix");
    if (a.type != TMPL_STRING) tm_error(c, ERR_TYPE, "%s() argument must be str", m);
    bool suf = m[6] == 's';
    if (!affix_match(c, s, a, suf)) return s;
    return tv_str(c->h, s.u.s->data + (suf ? 0 : a.u.s->len), s.u.s->len - a.u.s->len);
  }
  tm_error(c, ERR_UNSUPPORTED, "str has no method '%s'", m);
}

static tmpl_value dict_method(tm_ctx *c, tmpl_value d, const char *m, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  struct tmpl_dict *dd = d.u.d;
  if (!strcmp(m, "get")) {
    tmpl_value k = ARG(0, "key"), v;
    if (k.type == TMPL_LIST || k.type == TMPL_DICT) tm_error(c, ERR_TYPE, "unhashable type: '%s'", tv_type_name(k));
    if (tv_dict_get(d, k, &v)) return v;
    tmpl_value dflt = ARG(1, "default");
    return HAS(dflt) ? dflt : tmpl_none();
  }
  if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
    tmpl_value l = tv_list(c->h, dd->n);
    for (size_t i = 0; i < dd->n; i++) {
      if (m[0] == 'k') tv_list_push(c->h, l, dd->e[i].key);
      else if (m[0] == 'v') tv_list_push(c->h, l, dd->e[i].val);
      else {
        tmpl_value p = tv_list(c->h, 2);
        p.u.l->tuple = true;
        tv_list_push(c->h, p, dd->e[i].key);
        tv_list_push(c->h, p, dd->e[i].val);
        tv_list_push(c->h, l, p);
      }
    }
    return l;
  }
  if (!strcmp(m, "pop")) {
    tmpl_value k = ARG(0, "key"), v;
    if (tv_dict_del(d, k, &v)) return v;
    tmpl_value dflt = ARG(1, "default");
    if (HAS(dflt)) return dflt;
    tm_error(c, ERR_NOT_FOUND, "pop: key not found");
  }
  if (!strcmp(m, "setdefault")) {
    tmpl_value k = ARG(0, "key"), v;
    if (tv_dict_get(d, k, &v)) return v;
    tmpl_value dflt = ARG(1, "default");
    if (!HAS(dflt)) dflt = tmpl_none();
    tv_dict_set(c->h, d, k, dflt);
    return dflt;
  }
  if (!strcmp(m, "update")) {
    tmpl_value o = ARG(0, NULL);
    if (o.type == TMPL_DICT)
      for (size_t i = 0; i < o.u.d->n; i++) tv_dict_set(c->h, d, o.u.d->e[i].key, o.u.d->e[i].val);
    if (kwargs.type == TMPL_DICT)
      for (size_t i = 0; i < kwargs.u.d->n; i++) tv_dict_set(c->h, d, kwargs.u.d->e[i].key, kwargs.u.d->e[i].val);
    return tmpl_none();
  }
  if (!strcmp(m, "copy")) {
    tmpl_value r = tv_dict(c->h);
    for (size_t i = 0; i < dd->n; i++) tv_dict_set(c->h, r, dd->e[i].key, dd->e[i].val);
    return r;
  }
  if (!strcmp(m, "clear")) {
    dd->n = 0;
    if (dd->index) memset(dd->index, 0, dd->index_cap * sizeof(uint32_t));
    return tmpl_none();
  }
  tm_error(c, ERR_UNSUPPORTED, "dict has no method '%s'", m);
}

static tmpl_value list_method(tm_ctx *c, tmpl_value l, const char *m, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  struct tmpl_list *ll = l.u.l;
  if (!strcmp(m, "append")) {
    tv_list_push(c->h, l, ARG(0, "object"));
    return tmpl_none();
  }
  if (!strcmp(m, "extend")) {
    tmpl_value it = tm_iterate(c, ARG(0, "iterable"));
    size_t k = it.u.l->n;
    for (size_t i = 0; i < k; i++) tv_list_push(c->h, l, it.u.l->items[i]);
    return tmpl_none();
  }
  if (!strcmp(m, "pop")) {
    if (ll->n == 0) tm_error(c, ERR_INVALID, "pop from empty list");
    tmpl_value ix = ARG(0, "index");
    int64_t i = ix.type == TMPL_INT ? ix.u.i : -1;
    if (i < 0) i += (int64_t)ll->n;
    if (i < 0 || i >= (int64_t)ll->n) tm_error(c, ERR_RANGE, "pop index out of range");
    tmpl_value v = ll->items[i];
    memmove(ll->items + i, ll->items + i + 1, (ll->n - (size_t)i - 1) * sizeof(tmpl_value));
    ll->n--;
    return v;
  }
  if (!strcmp(m, "insert")) {
    tmpl_value ix = ARG(0, "index");
    int64_t i = ix.type == TMPL_INT ? ix.u.i : 0;
    if (i < 0) i += (int64_t)ll->n;
    if (i < 0) i = 0;
    if (i > (int64_t)ll->n) i = (int64_t)ll->n;
    tv_list_push(c->h, l, tmpl_none());
    memmove(ll->items + i + 1, ll->items + i, (ll->n - (size_t)i - 1) * sizeof(tmpl_value));
    ll->items[i] = ARG(1, "object");
    return tmpl_none();
  }
  if (!strcmp(m, "index") || !strcmp(m, "count") || !strcmp(m, "remove")) {
    tmpl_value x = ARG(0, "value");
    int64_t cnt = 0;
    for (size_t i = 0; i < ll->n; i++)
      if (tv_equal(ll->items[i], x)) {
        if (m[0] == 'i') return tmpl_int((int64_t)i);
        if (m[0] == 'r') {
          memmove(ll->items + i, ll->items + i + 1, (ll->n - i - 1) * sizeof(tmpl_value));
          ll->n--;
          return tmpl_none();
        }
        cnt++;
      }
    if (m[0] == 'c') return tmpl_int(cnt);
    tm_error(c, ERR_NOT_FOUND, "%s: value not in list", m);
  }
  if (!strcmp(m, "reverse")) {
    for (size_t i = 0; i < ll->n / 2; i++) {
      tmpl_value t = ll->items[i];
      ll->items[i] = ll->items[ll->n - 1 - i];
      ll->items[ll->n - 1 - i] = t;
    }
    return tmpl_none();
  }
  if (!strcmp(m, "copy")) {
    tmpl_value r = tv_list(c->h, ll->n);
    for (size_t i = 0; i < ll->n; i++) tv_list_push(c->h, r, ll->items[i]);
    return r;
  }
  if (!strcmp(m, "clear")) {
    ll->n = 0;
    return tmpl_none();
  }
  if (!strcmp(m, "sort")) {
    tmpl_value rev = ARG(0, "reverse");
    tmpl_value kw = tv_dict(c->h);
    tv_dict_set(c->h, kw, tv_strz(c->h, "reverse"), HAS(rev) ? rev : tmpl_bool(false));
    tv_dict_set(c->h, kw, tv_strz(c->h, "case_sensitive"), tmpl_bool(true));
    tmpl_value sorted;
    tm_filter_apply(c, "sort", l, NULL, 0, kw, &sorted);
    for (size_t i = 0; i < ll->n; i++) ll->items[i] = sorted.u.l->items[i];
    return tmpl_none();
  }
  tm_error(c, ERR_UNSUPPORTED, "list has no method '%s'", m);
}

tmpl_value tm_method_call(tm_ctx *c, tmpl_value self, const char *name, const tmpl_value *args, size_t n,
                          tmpl_value kwargs) {
  switch (self.type) {
  case TMPL_STRING: return str_method(c, self, name, args, n, kwargs);
  case TMPL_DICT: return dict_method(c, self, name, args, n, kwargs);
  case TMPL_LIST: return list_method(c, self, name, args, n, kwargs);
  default: tm_error(c, ERR_TYPE, "'%s' object has no method '%s'", tv_type_name(self), name);
  }
}

/* --------------------------------------------------------------- globals */

enum { BI_RANGE, BI_NAMESPACE, BI_DICT, BI_RAISE, BI_STRFTIME, BI_JOINER, BI_COUNT_ };
static const char *const BI_NAMES[BI_COUNT_] = {"range", "namespace", "dict", "raise_exception", "strftime_now", "joiner"};

void tm_builtins_install(tm_ctx *c, tmpl_value dict) {
  for (int i = 0; i < BI_COUNT_; i++) {
    tmpl_value f = tv_func(c->h, TM_FUNC_BUILTIN, BI_NAMES[i]);
    f.u.fn->builtin_id = i;
    tv_dict_set(c->h, dict, tv_strz(c->h, BI_NAMES[i]), f);
  }
}

static int64_t int_arg(tm_ctx *c, tmpl_value v, const char *what) {
  if (v.type == TMPL_INT) return v.u.i;
  if (v.type == TMPL_BOOL) return v.u.b;
  tm_error(c, ERR_TYPE, "%s: '%s' object cannot be interpreted as an integer", what, tv_type_name(v));
}

tmpl_value tm_builtin_call(tm_ctx *c, int id, const tmpl_value *args, size_t n, tmpl_value kwargs) {
  switch (id) {
  case BI_RANGE: {
    if (n == 0 || n > 3) tm_error(c, ERR_INVALID, "range expected 1 to 3 arguments, got %zu", n);
    int64_t start = 0, stop, step = 1;
    if (n == 1) stop = int_arg(c, args[0], "range");
    else {
      start = int_arg(c, args[0], "range");
      stop = int_arg(c, args[1], "range");
      if (n == 3) step = int_arg(c, args[2], "range");
    }
    if (step == 0) tm_error(c, ERR_INVALID, "range() arg 3 must not be zero");
    tmpl_value l = tv_list(c->h, 0);
    int64_t count = 0;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (++count > MAX_RANGE) tm_error(c, ERR_TOO_LARGE, "range too big: more than %d items", MAX_RANGE);
      tv_list_push(c->h, l, tmpl_int(i));
      if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
    }
    return l;
  }
  case BI_NAMESPACE:
  case BI_DICT: {
    tmpl_value d = tv_dict(c->h);
    if (n > 1) tm_error(c, ERR_INVALID, "%s() takes at most one positional argument", BI_NAMES[id]);
    if (n == 1) {
      if (args[0].type != TMPL_DICT) tm_error(c, ERR_TYPE, "%s(): argument must be a mapping, not %s", BI_NAMES[id], tv_type_name(args[0]));
      for (size_t i = 0; i < args[0].u.d->n; i++) tv_dict_set(c->h, d, args[0].u.d->e[i].key, args[0].u.d->e[i].val);
    }
    if (kwargs.type == TMPL_DICT)
      for (size_t i = 0; i < kwargs.u.d->n; i++) tv_dict_set(c->h, d, kwargs.u.d->e[i].key, kwargs.u.d->e[i].val);
    if (id == BI_NAMESPACE) {
      d.type = TMPL_NAMESPACE;
      d.u.d->is_namespace = true;
    }
    return d;
  }
  case BI_RAISE: {
    tmpl_value msg = tm_to_string(c, tm_arg(args, n, kwargs, 0, "message"));
    tm_error(c, ERR_INVALID, "raise_exception: %s", msg.u.s->data);
  }
  case BI_STRFTIME: {
    tmpl_value fmt = tm_arg(args, n, kwargs, 0, "format");
    if (fmt.type != TMPL_STRING) tm_error(c, ERR_TYPE, "strftime_now: format must be a string");
    time_t now = time(NULL);
    struct tm tmv;
    localtime_r(&now, &tmv);
    char out[256];
    size_t k = strftime(out, sizeof out, fmt.u.s->data, &tmv);
    return tv_str(c->h, out, k);
  }
  case BI_JOINER: {
    tmpl_value sep = tm_arg(args, n, kwargs, 0, "sep");
    tmpl_value f = tv_func(c->h, TM_FUNC_JOINER, "joiner");
    f.u.fn->self = tv_list(c->h, 2);
    tv_list_push(c->h, f.u.fn->self, HAS(sep) ? tm_to_string(c, sep) : tv_strz(c->h, ", "));
    tv_list_push(c->h, f.u.fn->self, tmpl_bool(false));
    return f;
  }
  default: tm_error(c, ERR_INTERNAL, "unknown builtin %d", id);
  }
}
