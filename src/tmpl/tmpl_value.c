/*
 * tmpl_value.c - the template value type: heaps, strings, lists, ordered
 * dicts, and the Python semantics of values (truthiness, ==, <, str(),
 * repr()).
 *
 * Heap: every allocation is a block on a doubly linked list; freeing the heap
 * frees every block, so objects never need reference counts and cycles made
 * by templates cannot leak. A heap may carry a byte limit and a jmp_buf: the
 * interpreter's heaps longjmp on failure (see tmpl_internal.h), a caller's
 * heap makes the public constructors return ERR_NOMEM instead.
 *
 * Dicts keep insertion order in an entry array; an open-addressing index of
 * entry numbers is built once a dict grows past 8 entries.
 *
 * Start reading at hp_alloc, then tv_dict_set, then tv_to_str.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/err.h"
#include "base/util.h"
#include "tmpl/tmpl_internal.h"

/* ---------------------------------------------------------------- heap */

/* malloc's own bookkeeping, counted so that the limit tracks real memory */
#define HP_OVERHEAD (sizeof(hp_block) + 16)

tmpl_heap *tmpl_heap_new(void) {
  tmpl_heap *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->head.prev = h->head.next = &h->head;
  return h;
}

void tmpl_heap_free(tmpl_heap *h) {
  if (!h) return;
  hp_block *b = h->head.next;
  while (b != &h->head) {
    hp_block *n = b->next;
    free(b);
    b = n;
  }
  free(h);
}

_Noreturn void hp_fail(tmpl_heap *h, int code) {
  h->fail_code = code;
  longjmp(*h->on_fail, 1);
}

static void *hp_oom(tmpl_heap *h, size_t n) {
  if (h->on_fail) {
    if (h->limit && h->bytes + n + HP_OVERHEAD > h->limit) {
      err_set(ERR_TOO_LARGE, "template: memory limit of %zu bytes exceeded", h->limit);
      hp_fail(h, ERR_TOO_LARGE);
    }
    err_set(ERR_NOMEM, "template: out of memory allocating %zu bytes", n);
    hp_fail(h, ERR_NOMEM);
  }
  return NULL;
}

void *hp_alloc(tmpl_heap *h, size_t n) {
  size_t total;
  if (!size_add(n, sizeof(hp_block), &total)) return hp_oom(h, n);
  if (h->limit && h->bytes + n + HP_OVERHEAD > h->limit) return hp_oom(h, n);
  hp_block *b = calloc(1, total);
  if (!b) return hp_oom(h, n);
  b->size = n;
  b->next = h->head.next;
  b->prev = &h->head;
  h->head.next->prev = b;
  h->head.next = b;
  h->bytes += n + HP_OVERHEAD;
  return b + 1;
}

void *hp_realloc(tmpl_heap *h, void *p, size_t n) {
  if (!p) return hp_alloc(h, n);
  hp_block *b = (hp_block *)p - 1;
  size_t total;
  if (!size_add(n, sizeof(hp_block), &total)) return hp_oom(h, n);
  if (n > b->size && h->limit && h->bytes + (n - b->size) > h->limit) return hp_oom(h, n);
  hp_block *prev = b->prev, *next = b->next;
  hp_block *nb = realloc(b, total);
  if (!nb) return hp_oom(h, n);
  prev->next = nb;
  next->prev = nb;
  h->bytes = h->bytes - nb->size + n;
  nb->size = n;
  return nb + 1;
}

void hp_release(tmpl_heap *h, void *p) {
  if (!p) return;
  hp_block *b = (hp_block *)p - 1;
  b->prev->next = b->next;
  b->next->prev = b->prev;
  h->bytes -= b->size + HP_OVERHEAD;
  free(b);
}

/* --------------------------------------------------------- string builder */

void sb_init(sb *b, tmpl_heap *h) {
  memset(b, 0, sizeof *b);
  b->h = h;
}

void sb_add(sb *b, const char *s, size_t n) {
  if (n == 0) return;
  if (b->limit && b->len + n > b->limit) {
    err_set(ERR_TOO_LARGE, "template: output larger than %zu bytes", b->limit);
    hp_fail(b->h, ERR_TOO_LARGE);
  }
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n + 1) cap *= 2;
    b->data = hp_realloc(b->h, b->data, cap);
    if (!b->data) return;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void sb_adds(sb *b, const char *s) { sb_add(b, s, strlen(s)); }
void sb_addc(sb *b, char c) { sb_add(b, &c, 1); }

void sb_addf(sb *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    sb_add(b, tmp, (size_t)n);
    return;
  }
  char *big = hp_alloc(b->h, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb_add(b, big, (size_t)n);
  hp_release(b->h, big);
}

/* ----------------------------------------------------------------- UTF-8 */

size_t utf8_decode(const char *s, size_t n, uint32_t *cp) {
  const unsigned char *u = (const unsigned char *)s;
  if (n == 0) { *cp = 0; return 0; }
  if (u[0] < 0x80) { *cp = u[0]; return 1; }
  int len = u[0] >= 0xF0 ? 4 : u[0] >= 0xE0 ? 3 : u[0] >= 0xC0 ? 2 : 1;
  if (len == 1 || (size_t)len > n) { *cp = 0xFFFD; return 1; }
  uint32_t c = u[0] & (0x3F >> (len - 1));
  for (int i = 1; i < len; i++) {
    if ((u[i] & 0xC0) != 0x80) { *cp = 0xFFFD; return 1; }
    c = (c << 6) | (u[i] & 0x3F);
  }
  *cp = c;
  return (size_t)len;
}

size_t utf8_encode(uint32_t cp, char *o) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

size_t utf8_count(const char *s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++)
    if (((unsigned char)s[i] & 0xC0) != 0x80) c++;
  return c;
}

size_t utf8_offset(const char *s, size_t n, size_t cp) {
  size_t i = 0, c = 0;
  while (i < n) {
    if (((unsigned char)s[i] & 0xC0) != 0x80) {
      if (c == cp) return i;
      c++;
    }
    i++;
  }
  return n;
}

bool py_isspace(uint32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

size_t tv_len_cp(tmpl_value s) {
  return s.u.s->ascii ? s.u.s->len : utf8_count(s.u.s->data, s.u.s->len);
}

/* ----------------------------------------------------------- constructors */

tmpl_value tmpl_undefined(void) { tmpl_value v = {.type = TMPL_UNDEFINED}; return v; }
tmpl_value tmpl_none(void) { tmpl_value v = {.type = TMPL_NONE}; return v; }
tmpl_value tmpl_bool(bool b) { tmpl_value v = {.type = TMPL_BOOL, .u.b = b}; return v; }
tmpl_value tmpl_int(int64_t i) { tmpl_value v = {.type = TMPL_INT, .u.i = i}; return v; }
tmpl_value tmpl_float(double f) { tmpl_value v = {.type = TMPL_FLOAT, .u.f = f}; return v; }

static struct tmpl_str *str_make(tmpl_heap *h, const char *s, size_t n) {
  size_t sz;
  if (!size_add(sizeof(struct tmpl_str) + 1, n, &sz)) return hp_oom(h, n);
  struct tmpl_str *o = hp_alloc(h, sz);
  if (!o) return NULL;
  o->len = n;
  if (n) memcpy(o->data, s, n);
  o->data[n] = '\0';
  o->ascii = true;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] >= 0x80) { o->ascii = false; break; }
  return o;
}

tmpl_value tv_str(tmpl_heap *h, const char *s, size_t n) {
  tmpl_value v = {.type = TMPL_STRING};
  v.u.s = str_make(h, s, n);
  return v;
}
tmpl_value tv_strz(tmpl_heap *h, const char *s) { return tv_str(h, s, strlen(s)); }
tmpl_value tv_sb(sb *b) { return tv_str(b->h, b->data ? b->data : "", b->len); }

tmpl_value tv_list(tmpl_heap *h, size_t cap) {
  tmpl_value v = {.type = TMPL_LIST};
  v.u.l = hp_alloc(h, sizeof(struct tmpl_list));
  if (v.u.l && cap) {
    size_t sz;
    if (!size_mul(cap, sizeof(tmpl_value), &sz)) { hp_oom(h, SIZE_MAX); return v; }
    v.u.l->items = hp_alloc(h, sz);
    v.u.l->cap = cap;
  }
  return v;
}

static int list_push(tmpl_heap *h, struct tmpl_list *l, tmpl_value x) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 4, sz;
    if (!size_mul(cap, sizeof(tmpl_value), &sz)) { hp_oom(h, SIZE_MAX); return ERR_NOMEM; }
    tmpl_value *p = hp_realloc(h, l->items, sz);
    if (!p) return ERR_NOMEM;
    l->items = p;
    l->cap = cap;
  }
  l->items[l->n++] = x;
  return 0;
}

void tv_list_push(tmpl_heap *h, tmpl_value l, tmpl_value v) { list_push(h, l.u.l, v); }

tmpl_value tv_dict(tmpl_heap *h) {
  tmpl_value v = {.type = TMPL_DICT};
  v.u.d = hp_alloc(h, sizeof(struct tmpl_dict));
  return v;
}

tmpl_value tv_func(tmpl_heap *h, tm_func_kind kind, const char *name) {
  tmpl_value v = {.type = TMPL_FUNC};
  v.u.fn = hp_alloc(h, sizeof(tmpl_func));
  if (v.u.fn) {
    v.u.fn->kind = kind;
    v.u.fn->name = name;
  }
  return v;
}

/* ----------------------------------------------------------------- dicts */

uint64_t tv_hash(tmpl_value v) {
  uint64_t hsh = 1469598103934665603ull;
  switch (v.type) {
  case TMPL_STRING:
    for (size_t i = 0; i < v.u.s->len; i++) hsh = (hsh ^ (unsigned char)v.u.s->data[i]) * 1099511628211ull;
    return hsh;
  case TMPL_INT: return (uint64_t)v.u.i * 0x9E3779B97F4A7C15ull;
  case TMPL_BOOL: return (uint64_t)v.u.b * 0x9E3779B97F4A7C15ull;
  case TMPL_FLOAT:
    if (v.u.f == floor(v.u.f) && fabs(v.u.f) < 9e18) return (uint64_t)(int64_t)v.u.f * 0x9E3779B97F4A7C15ull;
    {
      uint64_t bits;
      memcpy(&bits, &v.u.f, sizeof bits);
      return bits * 0x9E3779B97F4A7C15ull;
    }
  default: return (uint64_t)v.type;
  }
}

static long dict_find(const struct tmpl_dict *d, tmpl_value k, uint64_t hsh) {
  if (d->index) {
    size_t mask = d->index_cap - 1;
    for (size_t i = hsh & mask;; i = (i + 1) & mask) {
      uint32_t e = d->index[i];
      if (!e) return -1;
      if (d->e[e - 1].hash == hsh && tv_equal(d->e[e - 1].key, k)) return (long)e - 1;
    }
  }
  for (size_t i = 0; i < d->n; i++)
    if (d->e[i].hash == hsh && tv_equal(d->e[i].key, k)) return (long)i;
  return -1;
}

static int dict_reindex(tmpl_heap *h, struct tmpl_dict *d) {
  size_t cap = 16;
  while (cap < d->n * 2 + 2) cap *= 2;
  uint32_t *idx = hp_alloc(h, cap * sizeof(uint32_t));
  if (!idx) return ERR_NOMEM;
  hp_release(h, d->index);
  d->index = idx;
  d->index_cap = cap;
  for (size_t j = 0; j < d->n; j++) {
    size_t i = d->e[j].hash & (cap - 1);
    while (idx[i]) i = (i + 1) & (cap - 1);
    idx[i] = (uint32_t)(j + 1);
  }
  return 0;
}

static int dict_set(tmpl_heap *h, struct tmpl_dict *d, tmpl_value k, tmpl_value v) {
  uint64_t hsh = tv_hash(k);
  long at = dict_find(d, k, hsh);
  if (at >= 0) {
    d->e[at].val = v;
    return 0;
  }
  if (d->n >= UINT32_MAX - 1) { hp_oom(h, SIZE_MAX); return ERR_TOO_LARGE; }
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 4, sz;
    if (!size_mul(cap, sizeof(tmpl_dict_entry), &sz)) { hp_oom(h, SIZE_MAX); return ERR_NOMEM; }
    tmpl_dict_entry *e = hp_realloc(h, d->e, sz);
    if (!e) return ERR_NOMEM;
    d->e = e;
    d->cap = cap;
  }
  d->e[d->n].key = k;
  d->e[d->n].val = v;
  d->e[d->n].hash = hsh;
  d->n++;
  if (d->n > 8 && (!d->index || d->n * 2 >= d->index_cap)) return dict_reindex(h, d);
  if (d->index) {
    size_t mask = d->index_cap - 1, i = hsh & mask;
    while (d->index[i]) i = (i + 1) & mask;
    d->index[i] = (uint32_t)d->n;
  }
  return 0;
}

void tv_dict_set(tmpl_heap *h, tmpl_value d, tmpl_value k, tmpl_value v) { dict_set(h, d.u.d, k, v); }

bool tv_dict_get(tmpl_value d, tmpl_value k, tmpl_value *out) {
  long at = dict_find(d.u.d, k, tv_hash(k));
  if (at < 0) return false;
  *out = d.u.d->e[at].val;
  return true;
}

/* lookup of a string key given as bytes, without building a string value */
bool tv_dict_get_s(tmpl_value d, const char *k, size_t n, tmpl_value *out) {
  const struct tmpl_dict *dd = d.u.d;
  uint64_t hsh = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) hsh = (hsh ^ (unsigned char)k[i]) * 1099511628211ull;
  if (dd->index) {
    size_t mask = dd->index_cap - 1;
    for (size_t i = hsh & mask;; i = (i + 1) & mask) {
      uint32_t e = dd->index[i];
      if (!e) return false;
      const tmpl_dict_entry *en = &dd->e[e - 1];
      if (en->hash == hsh && en->key.type == TMPL_STRING && en->key.u.s->len == n && memcmp(en->key.u.s->data, k, n) == 0) {
        *out = en->val;
        return true;
      }
    }
  }
  for (size_t i = 0; i < dd->n; i++) {
    const tmpl_dict_entry *en = &dd->e[i];
    if (en->hash == hsh && en->key.type == TMPL_STRING && en->key.u.s->len == n && memcmp(en->key.u.s->data, k, n) == 0) {
      *out = en->val;
      return true;
    }
  }
  return false;
}

bool tv_dict_del(tmpl_value d, tmpl_value k, tmpl_value *out) {
  struct tmpl_dict *dd = d.u.d;
  long at = dict_find(dd, k, tv_hash(k));
  if (at < 0) return false;
  if (out) *out = dd->e[at].val;
  memmove(dd->e + at, dd->e + at + 1, (dd->n - (size_t)at - 1) * sizeof(tmpl_dict_entry));
  dd->n--;
  if (dd->index) {
    /* rebuild in place: the table is large enough */
    memset(dd->index, 0, dd->index_cap * sizeof(uint32_t));
    for (size_t j = 0; j < dd->n; j++) {
      size_t i = dd->e[j].hash & (dd->index_cap - 1);
      while (dd->index[i]) i = (i + 1) & (dd->index_cap - 1);
      dd->index[i] = (uint32_t)(j + 1);
    }
  }
  return true;
}

/* --------------------------------------------------------- public (caller) */

int tmpl_string(tmpl_heap *h, const char *s, size_t len, tmpl_value *out) {
  struct tmpl_str *o = str_make(h, s, len);
  if (!o) return err_set(ERR_NOMEM, "template: out of memory for a string of %zu bytes", len);
  out->type = TMPL_STRING;
  out->u.s = o;
  return 0;
}

const char *tmpl_str_data(tmpl_value v, size_t *len) {
  if (v.type != TMPL_STRING) return NULL;
  if (len) *len = v.u.s->len;
  return v.u.s->data;
}

int tmpl_list_new(tmpl_heap *h, tmpl_value *out) {
  *out = tv_list(h, 0);
  return out->u.l ? 0 : err_set(ERR_NOMEM, "template: out of memory for a list");
}

int tmpl_list_push(tmpl_heap *h, tmpl_value list, tmpl_value item) {
  if (list.type != TMPL_LIST) return err_set(ERR_TYPE, "template: push onto a %s", tv_type_name(list));
  return list_push(h, list.u.l, item) ? err_set(ERR_NOMEM, "template: out of memory growing a list") : 0;
}

size_t tmpl_list_len(tmpl_value list) { return list.type == TMPL_LIST ? list.u.l->n : 0; }

tmpl_value tmpl_list_get(tmpl_value list, size_t i) {
  if (list.type != TMPL_LIST || i >= list.u.l->n) return tmpl_undefined();
  return list.u.l->items[i];
}

int tmpl_dict_new(tmpl_heap *h, tmpl_value *out) {
  *out = tv_dict(h);
  return out->u.d ? 0 : err_set(ERR_NOMEM, "template: out of memory for a dict");
}

int tmpl_dict_set(tmpl_heap *h, tmpl_value dict, tmpl_value key, tmpl_value val) {
  if (dict.type != TMPL_DICT) return err_set(ERR_TYPE, "template: set a key on a %s", tv_type_name(dict));
  if (key.type == TMPL_LIST || key.type == TMPL_DICT || key.type == TMPL_UNDEFINED)
    return err_set(ERR_TYPE, "template: a %s cannot be a dict key", tv_type_name(key));
  return dict_set(h, dict.u.d, key, val) ? err_set(ERR_NOMEM, "template: out of memory growing a dict") : 0;
}

int tmpl_dict_set_str(tmpl_heap *h, tmpl_value dict, const char *key, tmpl_value val) {
  tmpl_value k;
  int rc = tmpl_string(h, key, strlen(key), &k);
  return rc ? rc : tmpl_dict_set(h, dict, k, val);
}

tmpl_value tmpl_dict_get_str(tmpl_value dict, const char *key) {
  tmpl_value v = tmpl_undefined();
  if (dict.type == TMPL_DICT) tv_dict_get_s(dict, key, strlen(key), &v);
  return v;
}

int tmpl_native(tmpl_heap *h, const char *name, tmpl_native_fn fn, void *user, tmpl_value *out) {
  char *nm = hp_alloc(h, strlen(name) + 1);
  if (!nm) return err_set(ERR_NOMEM, "template: out of memory");
  strcpy(nm, name);
  *out = tv_func(h, TM_FUNC_NATIVE, nm);
  if (!out->u.fn) return err_set(ERR_NOMEM, "template: out of memory");
  out->u.fn->native = fn;
  out->u.fn->user = user;
  return 0;
}

int tmpl_value_to_str(tmpl_value v, buf *out) {
  tmpl_heap *h = tmpl_heap_new();
  if (!h) return ERR_NOMEM;
  jmp_buf jb;
  h->on_fail = &jb;
  if (setjmp(jb)) {
    int code = h->fail_code;
    tmpl_heap_free(h);
    return code;
  }
  sb b;
  sb_init(&b, h);
  tv_to_str(&b, v);
  int rc = buf_append(out, b.data ? b.data : "", b.len);
  tmpl_heap_free(h);
  return rc;
}

/* ------------------------------------------------------- Python semantics */

const char *tv_type_name(tmpl_value v) {
  switch (v.type) {
  case TMPL_UNDEFINED: return "undefined";
  case TMPL_NONE: return "NoneType";
  case TMPL_BOOL: return "bool";
  case TMPL_INT: return "int";
  case TMPL_FLOAT: return "float";
  case TMPL_STRING: return "str";
  case TMPL_LIST: return v.u.l->tuple ? "tuple" : "list";
  case TMPL_DICT: return "dict";
  case TMPL_FUNC: return "function";
  case TMPL_NAMESPACE: return "Namespace";
  }
  return "?";
}

bool tv_is_number(tmpl_value v) { return v.type == TMPL_INT || v.type == TMPL_FLOAT || v.type == TMPL_BOOL; }

double tv_num(tmpl_value v) {
  return v.type == TMPL_FLOAT ? v.u.f : v.type == TMPL_INT ? (double)v.u.i : v.type == TMPL_BOOL ? v.u.b : 0;
}

bool tv_truthy(tmpl_value v) {
  switch (v.type) {
  case TMPL_UNDEFINED:
  case TMPL_NONE: return false;
  case TMPL_BOOL: return v.u.b;
  case TMPL_INT: return v.u.i != 0;
  case TMPL_FLOAT: return v.u.f != 0;
  case TMPL_STRING: return v.u.s->len != 0;
  case TMPL_LIST: return v.u.l->n != 0;
  case TMPL_DICT: return v.u.d->n != 0;
  default: return true;
  }
}

bool tv_equal(tmpl_value a, tmpl_value b) {
  if (tv_is_number(a) && tv_is_number(b)) {
    if (a.type != TMPL_FLOAT && b.type != TMPL_FLOAT) {
      int64_t x = a.type == TMPL_INT ? a.u.i : a.u.b, y = b.type == TMPL_INT ? b.u.i : b.u.b;
      return x == y;
    }
    return tv_num(a) == tv_num(b);
  }
  if (a.type != b.type) return false;
  switch (a.type) {
  case TMPL_UNDEFINED:
  case TMPL_NONE: return true;
  case TMPL_STRING: return a.u.s->len == b.u.s->len && memcmp(a.u.s->data, b.u.s->data, a.u.s->len) == 0;
  case TMPL_LIST:
    if (a.u.l->tuple != b.u.l->tuple || a.u.l->n != b.u.l->n) return false;
    for (size_t i = 0; i < a.u.l->n; i++)
      if (!tv_equal(a.u.l->items[i], b.u.l->items[i])) return false;
    return true;
  case TMPL_DICT:
    if (a.u.d->n != b.u.d->n) return false;
    for (size_t i = 0; i < a.u.d->n; i++) {
      tmpl_value o;
      if (!tv_dict_get(b, a.u.d->e[i].key, &o) || !tv_equal(o, a.u.d->e[i].val)) return false;
    }
    return true;
  case TMPL_NAMESPACE: return a.u.d == b.u.d;
  case TMPL_FUNC: return a.u.fn == b.u.fn;
  default: return false;
  }
}

int tv_compare(tmpl_value a, tmpl_value b) {
  if (tv_is_number(a) && tv_is_number(b)) {
    if (a.type != TMPL_FLOAT && b.type != TMPL_FLOAT) {
      int64_t x = a.type == TMPL_INT ? a.u.i : a.u.b, y = b.type == TMPL_INT ? b.u.i : b.u.b;
      return x < y ? -1 : x > y;
    }
    double x = tv_num(a), y = tv_num(b);
    if (isnan(x) || isnan(y)) return 2; /* unordered: every comparison false */
    return x < y ? -1 : x > y;
  }
  if (a.type == TMPL_STRING && b.type == TMPL_STRING) {
    size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
    int c = memcmp(a.u.s->data, b.u.s->data, n);
    if (c) return c < 0 ? -1 : 1;
    return a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len;
  }
  if (a.type == TMPL_LIST && b.type == TMPL_LIST && a.u.l->tuple == b.u.l->tuple) {
    size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
    for (size_t i = 0; i < n; i++) {
      if (tv_equal(a.u.l->items[i], b.u.l->items[i])) continue;
      return tv_compare(a.u.l->items[i], b.u.l->items[i]);
    }
    return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
  }
  return -2;
}

/* Python's repr(float): the shortest digits that round-trip, in positional
 * form for exponents -4 <= e < 16, else d.ddde+XX. */
void tv_repr_float(sb *b, double f) {
  if (isnan(f)) { sb_adds(b, "nan"); return; }
  if (isinf(f)) { sb_adds(b, f < 0 ? "-inf" : "inf"); return; }
  char tmp[40];
  int prec;
  for (prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
    if (strtod(tmp, NULL) == f) break;
  }
  /* tmp = [-]d.ddddde[+-]XX ; collect digits and exponent */
  char digits[24];
  size_t nd = 0;
  const char *p = tmp;
  bool neg = false;
  if (*p == '-') { neg = true; p++; }
  for (; *p && *p != 'e'; p++)
    if (*p >= '0' && *p <= '9') digits[nd++] = *p;
  int exp = atoi(p + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  if (neg) sb_addc(b, '-');
  if (exp >= 16 || exp < -4) {
    sb_addc(b, digits[0]);
    if (nd > 1) {
      sb_addc(b, '.');
      sb_add(b, digits + 1, nd - 1);
    }
    sb_addf(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return;
  }
  if (exp < 0) {
    sb_adds(b, "0.");
    for (int i = 0; i < -exp - 1; i++) sb_addc(b, '0');
    sb_add(b, digits, nd);
    return;
  }
  /* exp >= 0: integer part has exp+1 digits */
  for (int i = 0; i <= exp; i++) sb_addc(b, (size_t)i < nd ? digits[i] : '0');
  sb_addc(b, '.');
  if ((size_t)exp + 1 < nd) sb_add(b, digits + exp + 1, nd - (size_t)exp - 1);
  else sb_addc(b, '0');
}

/* str.isprintable() for one code point: not "Other" (Cc Cf Cs Co Cn) and
 * not "Separator" (Zs Zl Zp) except the ASCII space */
static bool py_isprintable(uint32_t c) {
  if (c == ' ') return true;
  if (c < 0x80) return c > 0x20 && c < 0x7F;
  switch (utf8proc_category((int32_t)c)) {
  case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
  case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP:
    return false;
  default: return true;
  }
}

static void repr_str(sb *b, const char *s, size_t n) {
  bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
  char q = (has_sq && !has_dq) ? '"' : '\'';
  sb_addc(b, q);
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t k = utf8_decode(s + i, n - i, &cp);
    if (cp == (uint32_t)q || cp == '\\') { sb_addc(b, '\\'); sb_addc(b, (char)cp); }
    else if (cp == '\n') sb_adds(b, "\\n");
    else if (cp == '\r') sb_adds(b, "\\r");
    else if (cp == '\t') sb_adds(b, "\\t");
    else if (!py_isprintable(cp)) {
      if (cp < 0x100) sb_addf(b, "\\x%02x", cp);
      else if (cp < 0x10000) sb_addf(b, "\\u%04x", cp);
      else sb_addf(b, "\\U%08x", cp);
    } else sb_add(b, s + i, k);
    i += k;
  }
  sb_addc(b, q);
}

static void to_str_impl(sb *b, tmpl_value v, bool repr, int depth) {
  if (depth > 200) { sb_adds(b, "..."); return; }
  switch (v.type) {
  case TMPL_UNDEFINED: break;
  case TMPL_NONE: sb_adds(b, "None"); break;
  case TMPL_BOOL: sb_adds(b, v.u.b ? "True" : "False"); break;
  case TMPL_INT: sb_addf(b, "%lld", (long long)v.u.i); break;
  case TMPL_FLOAT: tv_repr_float(b, v.u.f); break;
  case TMPL_STRING:
    if (repr) repr_str(b, v.u.s->data, v.u.s->len);
    else sb_add(b, v.u.s->data, v.u.s->len);
    break;
  case TMPL_LIST:
    sb_addc(b, v.u.l->tuple ? '(' : '[');
    for (size_t i = 0; i < v.u.l->n; i++) {
      if (i) sb_adds(b, ", ");
      to_str_impl(b, v.u.l->items[i], true, depth + 1);
    }
    if (v.u.l->tuple && v.u.l->n == 1) sb_addc(b, ',');
    sb_addc(b, v.u.l->tuple ? ')' : ']');
    break;
  case TMPL_DICT:
    sb_addc(b, '{');
    for (size_t i = 0; i < v.u.d->n; i++) {
      if (i) sb_adds(b, ", ");
      to_str_impl(b, v.u.d->e[i].key, true, depth + 1);
      sb_adds(b, ": ");
      to_str_impl(b, v.u.d->e[i].val, true, depth + 1);
    }
    sb_addc(b, '}');
    break;
  case TMPL_NAMESPACE:
    sb_adds(b, "<Namespace {");
    for (size_t i = 0; i < v.u.d->n; i++) {
      if (i) sb_adds(b, ", ");
      to_str_impl(b, v.u.d->e[i].key, true, depth + 1);
      sb_adds(b, ": ");
      to_str_impl(b, v.u.d->e[i].val, true, depth + 1);
    }
    sb_adds(b, "}>");
    break;
  case TMPL_FUNC: sb_addf(b, "<function %s>", v.u.fn->name ? v.u.fn->name : "?"); break;
  }
}

void tv_to_str(sb *b, tmpl_value v) { to_str_impl(b, v, false, 0); }
void tv_repr(sb *b, tmpl_value v) {
  if (v.type == TMPL_UNDEFINED) { sb_adds(b, "Undefined"); return; }
  to_str_impl(b, v, true, 0);
}
