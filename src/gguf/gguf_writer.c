/*
 * gguf_writer.c - build a GGUF v3 file: metadata, tensor infos, aligned data.
 *
 * Used by the tests (valid files to read back, then patch into corrupt ones)
 * and by tools/ to generate random-weight test models. Each kv is kept
 * already encoded (key string, type tag, value bytes) in one buffer, so the
 * file is the concatenation of the header, that buffer, the tensor infos,
 * padding, and the tensor data at offsets that are multiples of the
 * alignment. Tensor data is borrowed from the caller until the write.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "gguf/gguf.h"
#include "kernels/tensor_type.h"

typedef struct wtensor {
  char *name;
  uint32_t type;
  uint32_t n_dims;
  uint64_t dims[GGUF_MAX_DIMS];
  const void *data;
  size_t n_bytes;
} wtensor;

struct gguf_writer {
  buf kvs;          /* encoded key/value pairs */
  size_t n_kv;
  char **keys;      /* for duplicate detection */
  wtensor *tensors;
  size_t n_tensors, cap_tensors;
  uint32_t alignment;
};

int gguf_enc_u32(buf *b, uint32_t v) {
  uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  return buf_append(b, x, 4);
}

int gguf_enc_u64(buf *b, uint64_t v) {
  uint8_t x[8];
  for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
  return buf_append(b, x, 8);
}

int gguf_enc_str(buf *b, const char *s, size_t len) {
  int rc = gguf_enc_u64(b, len);
  return rc ? rc : buf_append(b, s, len);
}

int gguf_enc_arr_header(buf *b, uint32_t elem_type, uint64_t n) {
  int rc = gguf_enc_u32(b, elem_type);
  return rc ? rc : gguf_enc_u64(b, n);
}

int gguf_writer_new(gguf_writer **out) {
  *out = calloc(1, sizeof **out);
  if (!*out) return err_set(ERR_NOMEM, "gguf writer: out of memory");
  (*out)->alignment = GGUF_DEFAULT_ALIGNMENT;
  return 0;
}

void gguf_writer_free(gguf_writer *w) {
  if (!w) return;
  buf_free(&w->kvs);
  for (size_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
  free(w->keys);
  for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
  free(w->tensors);
  free(w);
}

/* Appends key + type tag + encoded value. n_kv is small in practice (tens to
 * a few hundred), so the duplicate check is linear. */
int gguf_writer_add_raw(gguf_writer *w, const char *key, uint32_t type, const void *enc, size_t n) {
  if (!key || !*key) return err_set(ERR_INVALID, "gguf writer: empty key");
  for (size_t i = 0; i < w->n_kv; i++)
    if (strcmp(w->keys[i], key) == 0) return err_set(ERR_EXISTS, "gguf writer: duplicate key '%s'", key);
  char **keys = realloc(w->keys, (w->n_kv + 1) * sizeof *keys);
  if (!keys) return err_set(ERR_NOMEM, "gguf writer: out of memory");
  w->keys = keys;
  char *k = str_dup(key);
  if (!k) return err_set(ERR_NOMEM, "gguf writer: out of memory");
  size_t mark = w->kvs.len;
  int rc = gguf_enc_str(&w->kvs, key, strlen(key));
  if (!rc) rc = gguf_enc_u32(&w->kvs, type);
  if (!rc) rc = buf_append(&w->kvs, enc, n);
  if (rc) {
    w->kvs.len = mark;
    free(k);
    return rc;
  }
  w->keys[w->n_kv++] = k;
  return 0;
}

static int add_le(gguf_writer *w, const char *key, uint32_t type, uint64_t v, size_t n) {
  uint8_t x[8];
  for (size_t i = 0; i < n; i++) x[i] = (uint8_t)(v >> (8 * i));
  return gguf_writer_add_raw(w, key, type, x, n);
}

int gguf_writer_add_u8(gguf_writer *w, const char *k, uint8_t v) { return add_le(w, k, GGUF_TYPE_UINT8, v, 1); }
int gguf_writer_add_i8(gguf_writer *w, const char *k, int8_t v) { return add_le(w, k, GGUF_TYPE_INT8, (uint8_t)v, 1); }
int gguf_writer_add_u16(gguf_writer *w, const char *k, uint16_t v) { return add_le(w, k, GGUF_TYPE_UINT16, v, 2); }
int gguf_writer_add_i16(gguf_writer *w, const char *k, int16_t v) { return add_le(w, k, GGUF_TYPE_INT16, (uint16_t)v, 2); }
int gguf_writer_add_u32(gguf_writer *w, const char *k, uint32_t v) { return add_le(w, k, GGUF_TYPE_UINT32, v, 4); }
int gguf_writer_add_i32(gguf_writer *w, const char *k, int32_t v) { return add_le(w, k, GGUF_TYPE_INT32, (uint32_t)v, 4); }
int gguf_writer_add_u64(gguf_writer *w, const char *k, uint64_t v) { return add_le(w, k, GGUF_TYPE_UINT64, v, 8); }
int gguf_writer_add_i64(gguf_writer *w, const char *k, int64_t v) { return add_le(w, k, GGUF_TYPE_INT64, (uint64_t)v, 8); }
int gguf_writer_add_bool(gguf_writer *w, const char *k, bool v) { return add_le(w, k, GGUF_TYPE_BOOL, v, 1); }

int gguf_writer_add_f32(gguf_writer *w, const char *k, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  return add_le(w, k, GGUF_TYPE_FLOAT32, u, 4);
}

int gguf_writer_add_f64(gguf_writer *w, const char *k, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  return add_le(w, k, GGUF_TYPE_FLOAT64, u, 8);
}

int gguf_writer_add_str(gguf_writer *w, const char *k, const char *v) {
  buf b = BUF_INIT;
  int rc = gguf_enc_str(&b, v, strlen(v));
  if (!rc) rc = gguf_writer_add_raw(w, k, GGUF_TYPE_STRING, b.data, b.len);
  buf_free(&b);
  return rc;
}

int gguf_writer_add_arr(gguf_writer *w, const char *k, uint32_t elem_type, const void *data, size_t n) {
  size_t sz = gguf_type_size(elem_type);
  if (!sz) return err_set(ERR_INVALID, "gguf writer: key '%s': %s is not a numeric element type", k, gguf_type_name(elem_type));
  buf b = BUF_INIT;
  int rc = gguf_enc_arr_header(&b, elem_type, n);
  const uint8_t *p = data;
  for (size_t i = 0; !rc && i < n; i++) {
    uint64_t v = 0;
    memcpy(&v, p + i * sz, sz); /* host order is little-endian on our targets */
    uint8_t x[8];
    for (size_t j = 0; j < sz; j++) x[j] = (uint8_t)(v >> (8 * j));
    rc = buf_append(&b, x, sz);
  }
  if (!rc) rc = gguf_writer_add_raw(w, k, GGUF_TYPE_ARRAY, b.data, b.len);
  buf_free(&b);
  return rc;
}

int gguf_writer_add_arr_str(gguf_writer *w, const char *k, const char *const *strs, size_t n) {
  buf b = BUF_INIT;
  int rc = gguf_enc_arr_header(&b, GGUF_TYPE_STRING, n);
  for (size_t i = 0; !rc && i < n; i++) rc = gguf_enc_str(&b, strs[i], strlen(strs[i]));
  if (!rc) rc = gguf_writer_add_raw(w, k, GGUF_TYPE_ARRAY, b.data, b.len);
  buf_free(&b);
  return rc;
}

int gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)))
    return err_set(ERR_RANGE, "gguf writer: alignment %u is not a power of two", alignment);
  int rc = gguf_writer_add_u32(w, "general.alignment", alignment);
  if (!rc) w->alignment = alignment;
  return rc;
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const uint64_t *dims, const void *data, size_t n_bytes) {
  if (!name || !*name) return err_set(ERR_INVALID, "gguf writer: empty tensor name");
  if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
    return err_set(ERR_RANGE, "gguf writer: tensor '%s': n_dims %u not in 1..4", name, n_dims);
  for (size_t i = 0; i < w->n_tensors; i++)
    if (strcmp(w->tensors[i].name, name) == 0)
      return err_set(ERR_EXISTS, "gguf writer: duplicate tensor name '%s'", name);
  uint64_t n_el = 1;
  for (uint32_t d = 0; d < n_dims; d++)
    if (dims[d] == 0 || __builtin_mul_overflow(n_el, dims[d], &n_el) || n_el > (uint64_t)INT64_MAX)
      return err_set(ERR_RANGE, "gguf writer: tensor '%s': bad dims", name);
  size_t want;
  int rc = tensor_type_row_bytes(type, (int64_t)dims[0], &want);
  if (rc) return err_set(rc, "gguf writer: tensor '%s': %s", name, err_detail());
  if (!size_mul(want, (size_t)(n_el / dims[0]), &want) || want != n_bytes)
    return err_set(ERR_RANGE, "gguf writer: tensor '%s': %zu bytes given, %s dims need %zu", name, n_bytes,
                   tensor_type_name(type), want);
  if (w->n_tensors == w->cap_tensors) {
    size_t cap = w->cap_tensors ? 2 * w->cap_tensors : 16;
    wtensor *t = realloc(w->tensors, cap * sizeof *t);
    if (!t) return err_set(ERR_NOMEM, "gguf writer: out of memory");
    w->tensors = t;
    w->cap_tensors = cap;
  }
  wtensor *t = &w->tensors[w->n_tensors];
  memset(t, 0, sizeof *t);
  t->name = str_dup(name);
  if (!t->name) return err_set(ERR_NOMEM, "gguf writer: out of memory");
  t->type = type;
  t->n_dims = n_dims;
  for (uint32_t d = 0; d < n_dims; d++) t->dims[d] = dims[d];
  t->data = data;
  t->n_bytes = n_bytes;
  w->n_tensors++;
  return 0;
}

static size_t pad_to(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Appends zeros until out->len is a multiple of a. */
static int pad_buf(buf *out, size_t a) {
  static const char zeros[256];
  int rc = 0;
  while (!rc && out->len % a) {
    size_t pad = pad_to(out->len, a) - out->len;
    rc = buf_append(out, zeros, pad < sizeof zeros ? pad : sizeof zeros);
  }
  return rc;
}

/* Everything up to (not including) the data section, padded. */
static int write_head(const gguf_writer *w, buf *out) {
  int rc = buf_append(out, "GGUF", 4);
  if (!rc) rc = gguf_enc_u32(out, 3);
  if (!rc) rc = gguf_enc_u64(out, w->n_tensors);
  if (!rc) rc = gguf_enc_u64(out, w->n_kv);
  if (!rc && w->kvs.len) rc = buf_append(out, w->kvs.data, w->kvs.len);
  size_t off = 0;
  for (size_t i = 0; !rc && i < w->n_tensors; i++) {
    const wtensor *t = &w->tensors[i];
    rc = gguf_enc_str(out, t->name, strlen(t->name));
    if (!rc) rc = gguf_enc_u32(out, t->n_dims);
    for (uint32_t d = 0; !rc && d < t->n_dims; d++) rc = gguf_enc_u64(out, t->dims[d]);
    if (!rc) rc = gguf_enc_u32(out, t->type);
    if (!rc) rc = gguf_enc_u64(out, off);
    off = pad_to(off + t->n_bytes, w->alignment);
  }
  if (!rc) rc = pad_buf(out, w->alignment);
  return rc;
}

int gguf_writer_write_buf(const gguf_writer *w, buf *out) {
  size_t start = out->len; /* offsets are relative to out's start */
  if (start % w->alignment) return err_set(ERR_INVALID, "gguf writer: output buffer must start empty");
  int rc = write_head(w, out);
  for (size_t i = 0; !rc && i < w->n_tensors; i++) {
    rc = buf_append(out, w->tensors[i].data, w->tensors[i].n_bytes);
    if (!rc && i + 1 < w->n_tensors) rc = pad_buf(out, w->alignment);
  }
  return rc;
}

int gguf_writer_write_file(const gguf_writer *w, const char *path) {
  buf head = BUF_INIT;
  int rc = write_head(w, &head);
  if (rc) {
    buf_free(&head);
    return rc;
  }
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
    buf_free(&head);
    return err_set(ERR_INVALID, "gguf writer: path too long");
  }
  FILE *fp = fopen(tmp, "wb");
  if (!fp) {
    buf_free(&head);
    return err_set(ERR_IO, "gguf writer: cannot create '%s': %s", tmp, strerror(errno));
  }
  static const char zeros[256];
  bool ok = fwrite(head.data, 1, head.len, fp) == head.len;
  size_t pos = head.len;
  buf_free(&head);
  for (size_t i = 0; ok && i < w->n_tensors; i++) {
    const wtensor *t = &w->tensors[i];
    ok = fwrite(t->data, 1, t->n_bytes, fp) == t->n_bytes;
    pos += t->n_bytes;
    if (ok && i + 1 < w->n_tensors) {
      size_t pad = pad_to(pos, w->alignment) - pos;
      while (ok && pad) {
        size_t m = pad < sizeof zeros ? pad : sizeof zeros;
        ok = fwrite(zeros, 1, m, fp) == m;
        pad -= m, pos += m;
      }
    }
  }
  if (fclose(fp) != 0) ok = false;
  if (!ok || rename(tmp, path) != 0) {
    int e = errno;
    remove(tmp);
    return err_set(ERR_IO, "gguf writer: cannot write '%s': %s", path, strerror(e));
  }
  return 0;
}
