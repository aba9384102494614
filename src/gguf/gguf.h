/*
 * gguf.h - read GGUF model files (versions 2 and 3, little-endian), and write
 * them (gguf_writer_*).
 *
 * Reading: gguf_open() maps the file read-only (PROT_READ, MAP_PRIVATE) and
 * checks all of it before returning: the header, every key/value (all value
 * types, arrays of any type including nested arrays), every tensor info, and
 * that every tensor's data lies inside the file at an aligned offset. After a
 * successful open nothing read through this API can point outside the
 * mapping. Failures return a negative ERR_* code with an err_set() detail
 * naming the key or tensor:
 *   ERR_IO          the file cannot be opened, stat'ed or mapped
 *   ERR_PARSE       not a GGUF file (magic), unknown metadata value type
 *   ERR_UNSUPPORTED version other than 2 and 3 (v1, big-endian, future),
 *                   unknown tensor type number
 *   ERR_CORRUPT     truncated: a string, array, value, tensor info or tensor
 *                   data extends past the end of the file; misaligned data
 *   ERR_TOO_LARGE   a count or size whose bytes cannot fit in the file or
 *                   overflow 64 bits (n_tensors, n_kv, array length x element
 *                   size, dims product), arrays nested deeper than 8
 *   ERR_EXISTS      duplicate key, duplicate tensor name
 *   ERR_RANGE       n_dims not in 1..4, a dim of 0, a row not a multiple of
 *                   the type's block size, general.alignment 0 or not a
 *                   power of two, a key or name with a NUL byte or empty
 *   ERR_TYPE        general.alignment is not a uint32
 *   ERR_NOMEM       allocation failed
 *
 * Ownership: the gguf_file owns the mapping and every pointer it hands out;
 * all of them stay valid until gguf_close(). A gguf_file is immutable after
 * open, so several threads may read it at once.
 *
 * Strings in GGUF are length-prefixed, not NUL-terminated. Keys, tensor names
 * and scalar string values are copied NUL-terminated at open; elements of
 * string arrays (the tokenizer vocabulary) are gguf_str views into the
 * mapping with an explicit length.
 */
#ifndef PARLEY_GGUF_H
#define PARLEY_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_ARRAY_DEPTH 8

/* Metadata value types, numbered as in the file. */
enum gguf_type {
  GGUF_TYPE_UINT8 = 0,
  GGUF_TYPE_INT8 = 1,
  GGUF_TYPE_UINT16 = 2,
  GGUF_TYPE_INT16 = 3,
  GGUF_TYPE_UINT32 = 4,
  GGUF_TYPE_INT32 = 5,
  GGUF_TYPE_FLOAT32 = 6,
  GGUF_TYPE_BOOL = 7,
  GGUF_TYPE_STRING = 8,
  GGUF_TYPE_ARRAY = 9,
  GGUF_TYPE_UINT64 = 10,
  GGUF_TYPE_INT64 = 11,
  GGUF_TYPE_FLOAT64 = 12,
  GGUF_TYPE_COUNT = 13
};

/* "uint32", "string", "array"...; "unknown" outside the enum. */
const char *gguf_type_name(uint32_t t);
/* Bytes of one scalar value of type t (0 for string, array, unknown). */
size_t gguf_type_size(uint32_t t);

typedef struct gguf_str {
  const char *data; /* NOT NUL-terminated when it points into the mapping */
  uint64_t len;
} gguf_str;

/* One metadata value. Scalars are decoded; arrays describe their elements:
 * numeric/bool arrays point at the raw little-endian elements in the file
 * (read them with gguf_arr_*), string arrays have strs[], arrays of arrays
 * have items[]. */
typedef struct gguf_value {
  enum gguf_type type;
  union {
    uint64_t u64;  /* UINT8, UINT16, UINT32, UINT64, BOOL (0/1) */
    int64_t i64;   /* INT8, INT16, INT32, INT64 */
    double f64;    /* FLOAT32, FLOAT64 */
    gguf_str str;  /* STRING: NUL-terminated copy, len excludes the NUL */
    struct {
      enum gguf_type elem_type;
      uint64_t n;                /* element count */
      const uint8_t *raw;        /* numeric/bool elements in the file */
      gguf_str *strs;            /* STRING elements (views into the file) */
      struct gguf_value *items;  /* ARRAY elements, each of type ARRAY */
    } arr;
  } v;
} gguf_value;

typedef struct gguf_kv {
  const char *key; /* NUL-terminated */
  gguf_value value;
} gguf_kv;

typedef struct gguf_tensor {
  const char *name;                /* NUL-terminated */
  uint32_t type;                   /* enum tensor_type (kernels/tensor_type.h) */
  uint32_t n_dims;                 /* 1..4 */
  uint64_t dims[GGUF_MAX_DIMS];    /* ggml order: dims[0] is the row length;
                                      unused dims are 1 */
  uint64_t n_elements;             /* product of dims */
  uint64_t n_bytes;                /* n_elements / block size * type size */
  uint64_t offset;                 /* from the start of the data section */
  const void *data;                /* in the mapping, aligned to the file's alignment */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* Opens and validates path; *out is NULL on failure. */
int gguf_open(const char *path, gguf_file **out);
/* Same on a caller's buffer (borrowed until gguf_close; used by the fuzz
 * harness and tests). */
int gguf_open_mem(const void *data, size_t size, gguf_file **out);
void gguf_close(gguf_file *f);

uint32_t gguf_version(const gguf_file *f);
uint32_t gguf_alignment(const gguf_file *f);
size_t gguf_file_size(const gguf_file *f);
/* True when the file is memory-mapped by gguf_open (not a caller's buffer). */
bool gguf_is_mapped(const gguf_file *f);
/* Offset in the file where the (aligned) tensor data section starts. */
uint64_t gguf_data_offset(const gguf_file *f);

/* Metadata, in file order. */
size_t gguf_n_kv(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i);
/* NULL when key is absent (no error set). */
const gguf_value *gguf_find(const gguf_file *f, const char *key);

/* Typed getters: 0, ERR_NOT_FOUND (key absent), or ERR_TYPE whose detail
 * names the key, the expected and the actual type. Integer getters accept any
 * integer type whose value fits (e.g. a UINT8 for get_u32); get_f32 accepts
 * FLOAT32 and FLOAT64; get_bool only BOOL. */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out);
int gguf_get_i32(const gguf_file *f, const char *key, int32_t *out);
int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out);
int gguf_get_f32(const gguf_file *f, const char *key, float *out);
int gguf_get_bool(const gguf_file *f, const char *key, bool *out);
/* *out is NUL-terminated, owned by f. */
int gguf_get_str(const gguf_file *f, const char *key, const char **out);
/* The array value of key; ERR_TYPE if not an array, or if want_elem is not
 * GGUF_TYPE_COUNT and the element type differs. */
int gguf_get_arr(const gguf_file *f, const char *key, uint32_t want_elem, const gguf_value **out);

/* Element i (< arr->v.arr.n) of a numeric or bool array, converted. */
int64_t gguf_arr_i64(const gguf_value *arr, uint64_t i);
uint64_t gguf_arr_u64(const gguf_value *arr, uint64_t i);
double gguf_arr_f64(const gguf_value *arr, uint64_t i);

/* Tensors, in file order, and by name (hash lookup). */
size_t gguf_n_tensors(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i);
/* NULL when absent (no error set). */
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* ---- writer -------------------------------------------------------------
 * Builds a GGUF v3 file in memory order: kvs and tensors in the order added.
 * Keys and names are copied; tensor data is BORROWED and must stay valid
 * until gguf_writer_write_*() returns. Adding a duplicate key or tensor name
 * gives ERR_EXISTS. gguf_writer_set_alignment() also stores general.alignment. */
typedef struct gguf_writer gguf_writer;

int gguf_writer_new(gguf_writer **out);
void gguf_writer_free(gguf_writer *w);
int gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment);

int gguf_writer_add_u8(gguf_writer *w, const char *key, uint8_t v);
int gguf_writer_add_i8(gguf_writer *w, const char *key, int8_t v);
int gguf_writer_add_u16(gguf_writer *w, const char *key, uint16_t v);
int gguf_writer_add_i16(gguf_writer *w, const char *key, int16_t v);
int gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_add_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_writer_add_u64(gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_add_i64(gguf_writer *w, const char *key, int64_t v);
int gguf_writer_add_f32(gguf_writer *w, const char *key, float v);
int gguf_writer_add_f64(gguf_writer *w, const char *key, double v);
int gguf_writer_add_bool(gguf_writer *w, const char *key, bool v);
int gguf_writer_add_str(gguf_writer *w, const char *key, const char *v);
/* n elements of a numeric or bool type, little-endian host values in data. */
int gguf_writer_add_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *data, size_t n);
int gguf_writer_add_arr_str(gguf_writer *w, const char *key, const char *const *strs, size_t n);
/* A value given already encoded (the bytes after the type tag), e.g. a
 * nested array built with the gguf_enc_* helpers. Not validated. */
int gguf_writer_add_raw(gguf_writer *w, const char *key, uint32_t type, const void *enc, size_t n);

/* Encoders that append the on-disk form to b, for gguf_writer_add_raw. */
int gguf_enc_u32(buf *b, uint32_t v);
int gguf_enc_u64(buf *b, uint64_t v);
int gguf_enc_str(buf *b, const char *s, size_t len);
/* Array header: element type and count; the caller appends the elements. */
int gguf_enc_arr_header(buf *b, uint32_t elem_type, uint64_t n);

/* dims in ggml order (dims[0] = row length). n_bytes must equal the size the
 * type table gives for those dims (ERR_RANGE otherwise). */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const uint64_t *dims, const void *data, size_t n_bytes);

/* Serializes to a buffer / to a file (written to path.tmp, then renamed). */
int gguf_writer_write_buf(const gguf_writer *w, buf *out);
int gguf_writer_write_file(const gguf_writer *w, const char *path);

#endif
