/*
 * gguf.c - the GGUF reader: map the file, validate everything, index it.
 *
 * File layout (GGUF v2/v3, all little-endian):
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv
 *   n_kv x   { string key, u32 value_type, value }
 *   n_tensors x { string name, u32 n_dims, u64 dims[n_dims], u32 type, u64 offset }
 *   padding to general.alignment (default 32), then the data section;
 *   tensor data lives at data_offset + offset.
 *   string = u64 length + bytes; array = u32 elem_type, u64 n, n elements.
 *
 * Start reading at gguf_parse(): one pass with a bounds-checked cursor (rd_*),
 * every length checked against the bytes that remain and every product for
 * overflow before anything is allocated; then the alignment, the data
 * section and each tensor's extent. Lookup by key or tensor name goes through
 * a small open-addressing hash table (FNV-1a) built at open.
 *
 * Invariants after a successful open: every pointer in the gguf_file points
 * into the mapping or into memory owned by the gguf_file; keys and tensor
 * names are unique, non-empty and contain no NUL; every tensor's data range
 * [data, data + n_bytes) is inside the file and aligned.
 */
#include "gguf/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"
#include "kernels/tensor_type.h"

struct gguf_file {
  const uint8_t *base; /* mapping or borrowed buffer */
  size_t size;
  bool mapped;
  uint32_t version;
  uint32_t alignment;
  uint64_t data_offset;
  gguf_kv *kvs;
  size_t n_kv;
  gguf_tensor *tensors;
  size_t n_tensors;
  size_t *kv_hash;     /* index + 1, 0 = empty; kv_hash_cap slots */
  size_t kv_hash_cap;
  size_t *t_hash;
  size_t t_hash_cap;
};

static const struct {
  const char *name;
  size_t size;
} type_info[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = {"uint8", 1},   [GGUF_TYPE_INT8] = {"int8", 1},
    [GGUF_TYPE_UINT16] = {"uint16", 2}, [GGUF_TYPE_INT16] = {"int16", 2},
    [GGUF_TYPE_UINT32] = {"uint32", 4}, [GGUF_TYPE_INT32] = {"int32", 4},
    [GGUF_TYPE_FLOAT32] = {"float32", 4}, [GGUF_TYPE_BOOL] = {"bool", 1},
    [GGUF_TYPE_STRING] = {"string", 0}, [GGUF_TYPE_ARRAY] = {"array", 0},
    [GGUF_TYPE_UINT64] = {"uint64", 8}, [GGUF_TYPE_INT64] = {"int64", 8},
    [GGUF_TYPE_FLOAT64] = {"float64", 8},
};

const char *gguf_type_name(uint32_t t) { return t < GGUF_TYPE_COUNT ? type_info[t].name : "unknown"; }
size_t gguf_type_size(uint32_t t) { return t < GGUF_TYPE_COUNT ? type_info[t].size : 0; }

/* ---- bounds-checked cursor ---------------------------------------------- */

typedef struct rd {
  const uint8_t *p;
  size_t pos, size;
} rd;

static size_t rd_left(const rd *r) { return r->size - r->pos; }

static uint64_t ld_le(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Reads an n-byte little-endian integer; ERR_CORRUPT naming `what` if short. */
static int rd_uint(rd *r, size_t n, uint64_t *out, const char *what) {
  *out = 0;
  if (rd_left(r) < n)
    return err_set(ERR_CORRUPT, "gguf: %s at offset %zu: truncated (needs %zu bytes, %zu left)", what,
                   r->pos, n, rd_left(r));
  *out = ld_le(r->p + r->pos, n);
  r->pos += n;
  return 0;
}

static int rd_u32(rd *r, uint32_t *out, const char *what) {
  uint64_t v;
  int rc = rd_uint(r, 4, &v, what);
  *out = (uint32_t)v;
  return rc;
}

/* A string as a view into the buffer. */
static int rd_str(rd *r, gguf_str *out, const char *what) {
  uint64_t len;
  int rc = rd_uint(r, 8, &len, what);
  if (rc) return rc;
  if (len > rd_left(r))
    return err_set(ERR_CORRUPT, "gguf: %s: string length %llu at offset %zu extends past end of file (%zu bytes)",
                   what, (unsigned long long)len, r->pos - 8, r->size);
  out->data = (const char *)r->p + r->pos;
  out->len = len;
  r->pos += (size_t)len;
  return 0;
}

/* A key or tensor name: non-empty, no NUL, copied NUL-terminated. */
static int rd_name(rd *r, char **out, const char *what) {
  gguf_str s;
  int rc = rd_str(r, &s, what);
  if (rc) return rc;
  if (s.len == 0) return err_set(ERR_RANGE, "gguf: %s at offset %zu is empty", what, r->pos - 8);
  if (memchr(s.data, 0, s.len))
    return err_set(ERR_RANGE, "gguf: %s '%.*s' contains a NUL byte", what, (int)strnlen(s.data, 64), s.data);
  *out = strndup(s.data, s.len);
  if (!*out) return err_set(ERR_NOMEM, "gguf: %s: out of memory", what);
  return 0;
}

/* ---- values ------------------------------------------------------------- */

static void value_free(gguf_value *v) {
  if (v->type == GGUF_TYPE_STRING) {
    free((char *)v->v.str.data);
  } else if (v->type == GGUF_TYPE_ARRAY) {
    free(v->v.arr.strs);
    if (v->v.arr.items)
      for (uint64_t i = 0; i < v->v.arr.n; i++) value_free(&v->v.arr.items[i]);
    free(v->v.arr.items);
  }
  memset(v, 0, sizeof *v);
}

static int parse_array(rd *r, gguf_value *out, int depth, const char *key);

/* Parses one value of type `type` (already read) for key `key`. */
static int parse_value(rd *r, uint32_t type, gguf_value *out, int depth, const char *key) {
  memset(out, 0, sizeof *out);
  if (type >= GGUF_TYPE_COUNT)
    return err_set(ERR_PARSE, "gguf: key '%s': unknown value type %u", key, type);
  out->type = (enum gguf_type)type;
  char what[160];
  snprintf(what, sizeof what, "key '%s' value", key);
  uint64_t u;
  int rc;
  switch (out->type) {
    case GGUF_TYPE_STRING: {
      gguf_str s;
      if ((rc = rd_str(r, &s, what))) return rc;
      char *c = malloc((size_t)s.len + 1);
      if (!c) return err_set(ERR_NOMEM, "gguf: key '%s': out of memory", key);
      memcpy(c, s.data, (size_t)s.len);
      c[s.len] = 0;
      out->v.str.data = c;
      out->v.str.len = s.len;
      return 0;
    }
    case GGUF_TYPE_ARRAY:
      return parse_array(r, out, depth + 1, key);
    default:
      break;
  }
  size_t sz = type_info[type].size;
  if ((rc = rd_uint(r, sz, &u, what))) return rc;
  switch (out->type) {
    case GGUF_TYPE_INT8: out->v.i64 = (int8_t)u; break;
    case GGUF_TYPE_INT16: out->v.i64 = (int16_t)u; break;
    case GGUF_TYPE_INT32: out->v.i64 = (int32_t)u; break;
    case GGUF_TYPE_INT64: out->v.i64 = (int64_t)u; break;
    case GGUF_TYPE_FLOAT32: {
      uint32_t b = (uint32_t)u;
      float f;
      memcpy(&f, &b, 4);
      out->v.f64 = f;
      break;
    }
    case GGUF_TYPE_FLOAT64: memcpy(&out->v.f64, &u, 8); break;
    case GGUF_TYPE_BOOL: out->v.u64 = u != 0; break;
    default: out->v.u64 = u; break;
  }
  return 0;
}

static int parse_array(rd *r, gguf_value *out, int depth, const char *key) {
  if (depth > GGUF_MAX_ARRAY_DEPTH)
    return err_set(ERR_TOO_LARGE, "gguf: key '%s': arrays nested deeper than %d", key, GGUF_MAX_ARRAY_DEPTH);
  uint32_t et;
  uint64_t n;
  char what[160];
  snprintf(what, sizeof what, "key '%s' array header", key);
  int rc = rd_u32(r, &et, what);
  if (!rc) rc = rd_uint(r, 8, &n, what);
  if (rc) return rc;
  if (et >= GGUF_TYPE_COUNT)
    return err_set(ERR_PARSE, "gguf: key '%s': unknown array element type %u", key, et);
  out->v.arr.elem_type = (enum gguf_type)et;
  out->v.arr.n = n;
  /* minimum encoded size of one element */
  size_t min = et == GGUF_TYPE_STRING ? 8 : et == GGUF_TYPE_ARRAY ? 12 : type_info[et].size;
  size_t bytes;
  if (n > SIZE_MAX || !size_mul((size_t)n, min, &bytes))
    return err_set(ERR_TOO_LARGE, "gguf: key '%s': array of %llu %s elements overflows a size", key,
                   (unsigned long long)n, type_info[et].name);
  if (bytes > rd_left(r))
    return err_set(ERR_CORRUPT,
                   "gguf: key '%s': array of %llu %s elements (at least %zu bytes) extends past end of file (%zu bytes)",
                   key, (unsigned long long)n, type_info[et].name, bytes, r->size);
  if (et == GGUF_TYPE_STRING) {
    out->v.arr.strs = calloc(n ? (size_t)n : 1, sizeof(gguf_str));
    if (!out->v.arr.strs) return err_set(ERR_NOMEM, "gguf: key '%s': out of memory", key);
    snprintf(what, sizeof what, "key '%s' string element", key);
    for (uint64_t i = 0; i < n; i++)
      if ((rc = rd_str(r, &out->v.arr.strs[i], what))) return rc;
  } else if (et == GGUF_TYPE_ARRAY) {
    out->v.arr.items = calloc(n ? (size_t)n : 1, sizeof(gguf_value));
    if (!out->v.arr.items) return err_set(ERR_NOMEM, "gguf: key '%s': out of memory", key);
    for (uint64_t i = 0; i < n; i++) {
      out->v.arr.items[i].type = GGUF_TYPE_ARRAY;
      if ((rc = parse_array(r, &out->v.arr.items[i], depth + 1, key))) {
        out->v.arr.n = i + 1; /* free only what was filled */
        return rc;
      }
    }
  } else {
    out->v.arr.raw = r->p + r->pos;
    r->pos += bytes;
  }
  return 0;
}

/* ---- hash index --------------------------------------------------------- */

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

static int hash_alloc(size_t n, size_t **tab, size_t *cap) {
  size_t c = 16;
  while (c < 2 * n) c *= 2;
  *tab = calloc(c, sizeof(size_t));
  if (!*tab) return err_set(ERR_NOMEM, "gguf: out of memory for the index");
  *cap = c;
  return 0;
}

/* Finds name; names(i) gives the name of entry i. Returns the slot. */
static size_t hash_slot(const size_t *tab, size_t cap, const char *name, const void *items, size_t stride,
                        size_t name_off) {
  size_t i = (size_t)hash_str(name) & (cap - 1);
  for (;;) {
    if (!tab[i]) return i;
    const char *nm = *(const char *const *)((const char *)items + (tab[i] - 1) * stride + name_off);
    if (strcmp(nm, name) == 0) return i;
    i = (i + 1) & (cap - 1);
  }
}

/* ---- the parse ---------------------------------------------------------- */

void gguf_close(gguf_file *f) {
  if (!f) return;
  for (size_t i = 0; i < f->n_kv; i++) {
    free((char *)f->kvs[i].key);
    value_free(&f->kvs[i].value);
  }
  for (size_t i = 0; i < f->n_tensors; i++) free((char *)f->tensors[i].name);
  free(f->kvs);
  free(f->tensors);
  free(f->kv_hash);
  free(f->t_hash);
  if (f->mapped && f->base) munmap((void *)f->base, f->size);
  free(f);
}

static int parse_header(gguf_file *f, rd *r, uint64_t *n_tensors, uint64_t *n_kv) {
  *n_tensors = *n_kv = 0;
  if (r->size < 4 || memcmp(r->p, "GGUF", 4) != 0)
    return err_set(ERR_PARSE, "gguf: not a GGUF file (bad magic, %zu bytes)", r->size);
  r->pos = 4;
  int rc = rd_u32(r, &f->version, "header version");
  if (rc) return rc;
  if (f->version == 1)
    return err_set(ERR_UNSUPPORTED, "gguf: version 1 files are not supported (only 2 and 3); reconvert the model");
  if ((f->version & 0xffff) == 0)
    return err_set(ERR_UNSUPPORTED, "gguf: version %u looks byte-swapped: big-endian files are not supported",
                   f->version);
  if (f->version != 2 && f->version != 3)
    return err_set(ERR_UNSUPPORTED, "gguf: version %u is not supported (only 2 and 3)", f->version);
  if ((rc = rd_uint(r, 8, n_tensors, "header n_tensors"))) return rc;
  if ((rc = rd_uint(r, 8, n_kv, "header n_kv"))) return rc;
  /* Each kv takes at least 13 bytes (key length, 1-byte key, type, ... ) and
   * each tensor info at least 33: refuse counts the file cannot hold before
   * allocating anything for them. */
  if (*n_kv > rd_left(r) / 13)
    return err_set(ERR_TOO_LARGE, "gguf: n_kv %llu cannot fit in a file of %zu bytes", (unsigned long long)*n_kv,
                   r->size);
  if (*n_tensors > rd_left(r) / 33)
    return err_set(ERR_TOO_LARGE, "gguf: n_tensors %llu cannot fit in a file of %zu bytes",
                   (unsigned long long)*n_tensors, r->size);
  return 0;
}

static int parse_kvs(gguf_file *f, rd *r, uint64_t n_kv) {
  f->kvs = calloc(n_kv ? (size_t)n_kv : 1, sizeof(gguf_kv));
  if (!f->kvs) return err_set(ERR_NOMEM, "gguf: out of memory for %llu kvs", (unsigned long long)n_kv);
  int rc = hash_alloc((size_t)n_kv, &f->kv_hash, &f->kv_hash_cap);
  if (rc) return rc;
  for (uint64_t i = 0; i < n_kv; i++) {
    gguf_kv *kv = &f->kvs[i];
    char what[64];
    snprintf(what, sizeof what, "kv #%llu key", (unsigned long long)i);
    char *key = NULL;
    if ((rc = rd_name(r, &key, what))) return rc;
    kv->key = key;
    f->n_kv = i + 1; /* owned from here on: gguf_close frees it */
    size_t slot = hash_slot(f->kv_hash, f->kv_hash_cap, key, f->kvs, sizeof(gguf_kv), offsetof(gguf_kv, key));
    if (f->kv_hash[slot]) return err_set(ERR_EXISTS, "gguf: duplicate key '%s'", key);
    f->kv_hash[slot] = i + 1;
    uint32_t type;
    snprintf(what, sizeof what, "key '%.40s' type", key);
    if ((rc = rd_u32(r, &type, what))) return rc;
    if ((rc = parse_value(r, type, &kv->value, 0, key))) return rc;
  }
  return 0;
}

static int parse_alignment(gguf_file *f) {
  f->alignment = GGUF_DEFAULT_ALIGNMENT;
  const gguf_value *v = gguf_find(f, "general.alignment");
  if (!v) return 0;
  if (v->type != GGUF_TYPE_UINT32)
    return err_set(ERR_TYPE, "gguf: key 'general.alignment' is %s, expected uint32", gguf_type_name(v->type));
  uint64_t a = v->v.u64;
  if (a == 0 || (a & (a - 1)) != 0)
    return err_set(ERR_RANGE, "gguf: key 'general.alignment' is %llu, not a power of two",
                   (unsigned long long)a);
  f->alignment = (uint32_t)a;
  return 0;
}

static int parse_tensor_info(gguf_file *f, rd *r, size_t i, gguf_tensor *t) {
  char what[64];
  snprintf(what, sizeof what, "tensor #%zu name", i);
  char *name = NULL;
  int rc = rd_name(r, &name, what);
  if (rc) return rc;
  t->name = name;
  f->n_tensors = i + 1;
  size_t slot = hash_slot(f->t_hash, f->t_hash_cap, name, f->tensors, sizeof(gguf_tensor),
                          offsetof(gguf_tensor, name));
  if (f->t_hash[slot]) return err_set(ERR_EXISTS, "gguf: duplicate tensor name '%s'", name);
  f->t_hash[slot] = i + 1;
  char w2[128];
  snprintf(w2, sizeof w2, "tensor '%.64s' info", name);
  if ((rc = rd_u32(r, &t->n_dims, w2))) return rc;
  if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
    return err_set(ERR_RANGE, "gguf: tensor '%s': n_dims %u is not in 1..%d", name, t->n_dims, GGUF_MAX_DIMS);
  uint64_t n_el = 1;
  for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->dims[d] = 1;
  for (uint32_t d = 0; d < t->n_dims; d++) {
    if ((rc = rd_uint(r, 8, &t->dims[d], w2))) return rc;
    if (t->dims[d] == 0) return err_set(ERR_RANGE, "gguf: tensor '%s': dim %u is 0", name, d);
    if (__builtin_mul_overflow(n_el, t->dims[d], &n_el) || n_el > (uint64_t)INT64_MAX)
      return err_set(ERR_TOO_LARGE, "gguf: tensor '%s': the product of its dims overflows 63 bits", name);
  }
  t->n_elements = n_el;
  if ((rc = rd_u32(r, &t->type, w2))) return rc;
  const struct tensor_type_traits *tr = tensor_type_get(t->type);
  if (!tr) return err_set(ERR_UNSUPPORTED, "gguf: tensor '%s': unknown tensor type %u", name, t->type);
  if (t->dims[0] % tr->block_size != 0)
    return err_set(ERR_RANGE, "gguf: tensor '%s': row length %llu is not a multiple of %s's block size %u",
                   name, (unsigned long long)t->dims[0], tr->name, tr->block_size);
  if (__builtin_mul_overflow(n_el / tr->block_size, (uint64_t)tr->type_size, &t->n_bytes))
    return err_set(ERR_TOO_LARGE, "gguf: tensor '%s': byte size overflows 64 bits", name);
  if ((rc = rd_uint(r, 8, &t->offset, w2))) return rc;
  return 0;
}

static int parse_tensors(gguf_file *f, rd *r, uint64_t n_tensors) {
  f->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof(gguf_tensor));
  if (!f->tensors) return err_set(ERR_NOMEM, "gguf: out of memory for %llu tensors", (unsigned long long)n_tensors);
  int rc = hash_alloc((size_t)n_tensors, &f->t_hash, &f->t_hash_cap);
  if (rc) return rc;
  for (size_t i = 0; i < n_tensors; i++)
    if ((rc = parse_tensor_info(f, r, i, &f->tensors[i]))) return rc;
  /* data section: aligned start, then each tensor's extent */
  uint64_t a = f->alignment;
  f->data_offset = ((uint64_t)r->pos + a - 1) / a * a;
  for (size_t i = 0; i < f->n_tensors; i++) {
    gguf_tensor *t = &f->tensors[i];
    if (t->offset % a != 0)
      return err_set(ERR_CORRUPT, "gguf: tensor '%s': data offset %llu is not a multiple of the alignment %u",
                     t->name, (unsigned long long)t->offset, f->alignment);
    uint64_t start, end;
    if (__builtin_add_overflow(f->data_offset, t->offset, &start) ||
        __builtin_add_overflow(start, t->n_bytes, &end))
      return err_set(ERR_TOO_LARGE, "gguf: tensor '%s': data [offset %llu, %llu bytes] overflows 64 bits",
                     t->name, (unsigned long long)t->offset, (unsigned long long)t->n_bytes);
    if (end > f->size)
      return err_set(ERR_CORRUPT, "gguf: tensor '%s': data [offset %llu, %llu bytes] extends past end of file (%zu bytes)",
                     t->name, (unsigned long long)t->offset, (unsigned long long)t->n_bytes, f->size);
    t->data = f->base + start;
  }
  return 0;
}

static int gguf_parse(gguf_file *f) {
  rd r = {f->base, 0, f->size};
  uint64_t n_tensors = 0, n_kv = 0;
  int rc = parse_header(f, &r, &n_tensors, &n_kv);
  if (!rc) rc = parse_kvs(f, &r, n_kv);
  if (!rc) rc = parse_alignment(f);
  if (!rc) rc = parse_tensors(f, &r, n_tensors);
  return rc;
}

int gguf_open_mem(const void *data, size_t size, gguf_file **out) {
  *out = NULL;
  gguf_file *f = calloc(1, sizeof *f);
  if (!f) return err_set(ERR_NOMEM, "gguf: out of memory");
  f->base = data;
  f->size = size;
  int rc = gguf_parse(f);
  if (rc) {
    gguf_close(f);
    return rc;
  }
  *out = f;
  return 0;
}

int gguf_open(const char *path, gguf_file **out) {
  *out = NULL;
  const void *map;
  size_t size;
  int rc = file_map_ro(path, "gguf", "GGUF file", 4, &map, &size);
  if (rc) return rc;
  gguf_file *f = calloc(1, sizeof *f);
  if (!f) {
    munmap((void *)map, size);
    return err_set(ERR_NOMEM, "gguf: out of memory");
  }
  f->base = map;
  f->size = size;
  f->mapped = true;
  rc = gguf_parse(f);
  if (rc) {
    gguf_close(f);
    return rc;
  }
  *out = f;
  return 0;
}

/* ---- accessors ---------------------------------------------------------- */

uint32_t gguf_version(const gguf_file *f) { return f->version; }
uint32_t gguf_alignment(const gguf_file *f) { return f->alignment; }
size_t gguf_file_size(const gguf_file *f) { return f->size; }
bool gguf_is_mapped(const gguf_file *f) { return f->mapped; }
uint64_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
size_t gguf_n_kv(const gguf_file *f) { return f->n_kv; }
const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i) { return i < f->n_kv ? &f->kvs[i] : NULL; }
size_t gguf_n_tensors(const gguf_file *f) { return f->n_tensors; }
const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i) { return i < f->n_tensors ? &f->tensors[i] : NULL; }

const gguf_value *gguf_find(const gguf_file *f, const char *key) {
  if (!f->kv_hash) return NULL;
  size_t s = hash_slot(f->kv_hash, f->kv_hash_cap, key, f->kvs, sizeof(gguf_kv), offsetof(gguf_kv, key));
  return f->kv_hash[s] ? &f->kvs[f->kv_hash[s] - 1].value : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
  if (!f->t_hash) return NULL;
  size_t s = hash_slot(f->t_hash, f->t_hash_cap, name, f->tensors, sizeof(gguf_tensor),
                       offsetof(gguf_tensor, name));
  return f->t_hash[s] ? &f->tensors[f->t_hash[s] - 1] : NULL;
}

static bool is_uint_type(uint32_t t) {
  return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}
static bool is_int_type(uint32_t t) {
  return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}

static int find_typed(const gguf_file *f, const char *key, const char *want, bool ok_int, bool ok_float,
                      uint32_t exact, const gguf_value **out) {
  const gguf_value *v = gguf_find(f, key);
  if (!v) return err_set(ERR_NOT_FOUND, "gguf: key '%s' not found", key);
  bool ok = v->type == exact || (ok_int && (is_uint_type(v->type) || is_int_type(v->type))) ||
            (ok_float && (v->type == GGUF_TYPE_FLOAT32 || v->type == GGUF_TYPE_FLOAT64));
  if (!ok)
    return err_set(ERR_TYPE, "gguf: key '%s' is %s, expected %s", key, gguf_type_name(v->type), want);
  *out = v;
  return 0;
}

/* Integer value as a sign + magnitude pair, for range checks. */
static int get_int(const gguf_file *f, const char *key, const char *want, int64_t lo, uint64_t hi,
                   int64_t *si, uint64_t *ui) {
  const gguf_value *v = NULL; /* set by find_typed when it returns 0 */
  int rc = find_typed(f, key, want, true, false, GGUF_TYPE_COUNT, &v);
  if (rc) return rc;
  if (is_uint_type(v->type)) {
    if (v->v.u64 > hi)
      return err_set(ERR_RANGE, "gguf: key '%s' = %llu does not fit in %s", key, (unsigned long long)v->v.u64, want);
    *ui = v->v.u64;
    *si = (int64_t)v->v.u64; /* only used when it fits */
  } else {
    if (v->v.i64 < lo || (v->v.i64 > 0 && (uint64_t)v->v.i64 > hi))
      return err_set(ERR_RANGE, "gguf: key '%s' = %lld does not fit in %s", key, (long long)v->v.i64, want);
    *si = v->v.i64;
    *ui = (uint64_t)v->v.i64;
  }
  return 0;
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) {
  int64_t s;
  uint64_t u;
  int rc = get_int(f, key, "uint32", 0, UINT32_MAX, &s, &u);
  if (!rc) *out = (uint32_t)u;
  return rc;
}

int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out) {
  int64_t s;
  uint64_t u;
  int rc = get_int(f, key, "uint64", 0, UINT64_MAX, &s, &u);
  if (!rc) *out = u;
  return rc;
}

int gguf_get_i32(const gguf_file *f, const char *key, int32_t *out) {
  int64_t s;
  uint64_t u;
  int rc = get_int(f, key, "int32", INT32_MIN, INT32_MAX, &s, &u);
  if (!rc) *out = (int32_t)s;
  return rc;
}

int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out) {
  int64_t s;
  uint64_t u;
  int rc = get_int(f, key, "int64", INT64_MIN, INT64_MAX, &s, &u);
  if (!rc) *out = s;
  return rc;
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out) {
  const gguf_value *v = NULL; /* set by find_typed when it returns 0 */
  int rc = find_typed(f, key, "float32", false, true, GGUF_TYPE_FLOAT32, &v);
  if (!rc) *out = (float)v->v.f64;
  return rc;
}

int gguf_get_bool(const gguf_file *f, const char *key, bool *out) {
  const gguf_value *v = NULL; /* set by find_typed when it returns 0 */
  int rc = find_typed(f, key, "bool", false, false, GGUF_TYPE_BOOL, &v);
  if (!rc) *out = v->v.u64 != 0;
  return rc;
}

int gguf_get_str(const gguf_file *f, const char *key, const char **out) {
  const gguf_value *v = NULL; /* set by find_typed when it returns 0 */
  int rc = find_typed(f, key, "string", false, false, GGUF_TYPE_STRING, &v);
  if (!rc) *out = v->v.str.data;
  return rc;
}

int gguf_get_arr(const gguf_file *f, const char *key, uint32_t want_elem, const gguf_value **out) {
  const gguf_value *v = NULL; /* set by find_typed when it returns 0 */
  int rc = find_typed(f, key, "array", false, false, GGUF_TYPE_ARRAY, &v);
  if (rc) return rc;
  if (want_elem < GGUF_TYPE_COUNT && v->v.arr.elem_type != want_elem)
    return err_set(ERR_TYPE, "gguf: key '%s' is an array of %s, expected an array of %s", key,
                   gguf_type_name(v->v.arr.elem_type), gguf_type_name(want_elem));
  *out = v;
  return 0;
}

static uint64_t arr_raw(const gguf_value *arr, uint64_t i) {
  size_t sz = gguf_type_size(arr->v.arr.elem_type);
  return ld_le(arr->v.arr.raw + (size_t)i * sz, sz);
}

int64_t gguf_arr_i64(const gguf_value *arr, uint64_t i) {
  uint64_t u = arr_raw(arr, i);
  switch (arr->v.arr.elem_type) {
    case GGUF_TYPE_INT8: return (int8_t)u;
    case GGUF_TYPE_INT16: return (int16_t)u;
    case GGUF_TYPE_INT32: return (int32_t)u;
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64: {
      /* Converting a float outside int64's range is undefined: saturate,
       * and read NaN as 0 (found by fuzz_gguf). */
      double d = gguf_arr_f64(arr, i);
      if (d != d) return 0;
      if (d >= 9223372036854775807.0) return INT64_MAX;
      if (d <= -9223372036854775808.0) return INT64_MIN;
      return (int64_t)d;
    }
    default: return (int64_t)u;
  }
}

uint64_t gguf_arr_u64(const gguf_value *arr, uint64_t i) {
  if (is_int_type(arr->v.arr.elem_type) || arr->v.arr.elem_type == GGUF_TYPE_FLOAT32 ||
      arr->v.arr.elem_type == GGUF_TYPE_FLOAT64)
    return (uint64_t)gguf_arr_i64(arr, i);
  return arr_raw(arr, i);
}

double gguf_arr_f64(const gguf_value *arr, uint64_t i) {
  uint64_t u = arr_raw(arr, i);
  if (arr->v.arr.elem_type == GGUF_TYPE_FLOAT32) {
    uint32_t b = (uint32_t)u;
    float fl;
    memcpy(&fl, &b, 4);
    return fl;
  }
  if (arr->v.arr.elem_type == GGUF_TYPE_FLOAT64) {
    double d;
    memcpy(&d, &u, 8);
    return d;
  }
  if (is_int_type(arr->v.arr.elem_type)) return (double)gguf_arr_i64(arr, i);
  return (double)u;
}
