/* test_gguf.c - GGUF writer -> reader round trips, the catalogue of corrupt
 * files (each with its own error code and a detail naming the key/tensor),
 * truncation at every byte, and the real converter's file in ../shared. */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "gguf/gguf.h"
#include "kernels/tensor_type.h"

/* ---- helpers ------------------------------------------------------------ */

static void put_u32(buf *b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; i++) b->data[off + i] = (char)(v >> (8 * i));
}

static void put_u64(buf *b, size_t off, uint64_t v) {
  for (int i = 0; i < 8; i++) b->data[off + i] = (char)(v >> (8 * i));
}

/* Offset just past the encoded string s (u64 length + bytes) in b. */
static size_t after_str(const buf *b, const char *s) {
  size_t n = strlen(s);
  for (size_t i = 8; i + n <= b->len; i++) {
    uint64_t len = 0;
    memcpy(&len, b->data + i - 8, 8);
    if (len == n && memcmp(b->data + i, s, n) == 0) return i + n;
  }
  return 0;
}

/* Opens b's bytes from a real file (the mmap path). */
static int open_bytes(const buf *b, gguf_file **out) {
  char path[600];
  snprintf(path, sizeof path, "%s/t.gguf", test_tmpdir());
  FILE *fp = fopen(path, "wb");
  if (!fp) return ERR_IO;
  fwrite(b->data, 1, b->len, fp);
  fclose(fp);
  return gguf_open(path, out);
}

static uint8_t tensor_a[4 * 64];   /* F32 [64] */
static uint8_t tensor_b[18 * 4];   /* Q4_0 [32, 4] */

/* A small valid file used as the base of most corrupt cases:
 * kvs: general.architecture, s.val (string), a.u32 (array), u.key (u8),
 * dup.a, dup.b; tensors t.a (F32 64) and t.b (Q4_0 32x4). */
static void base_file(buf *out, uint32_t extra_alignment_kv) {
  gguf_writer *w;
  if (gguf_writer_new(&w)) abort();
  for (size_t i = 0; i < sizeof tensor_a; i++) tensor_a[i] = (uint8_t)i;
  for (size_t i = 0; i < sizeof tensor_b; i++) tensor_b[i] = (uint8_t)(3 * i);
  uint32_t arr[3] = {1, 2, 3};
  int rc = gguf_writer_add_str(w, "general.architecture", "llama");
  rc |= gguf_writer_add_str(w, "s.val", "hello");
  rc |= gguf_writer_add_arr(w, "a.u32", GGUF_TYPE_UINT32, arr, 3);
  rc |= gguf_writer_add_u8(w, "u.key", 7);
  rc |= gguf_writer_add_i32(w, "dup.a", 1);
  rc |= gguf_writer_add_i32(w, "dup.b", 2);
  if (extra_alignment_kv) rc |= gguf_writer_add_u32(w, "general.alignment", 32);
  uint64_t da[1] = {64}, db[2] = {32, 4};
  rc |= gguf_writer_add_tensor(w, "t.a", TENSOR_TYPE_F32, 1, da, tensor_a, sizeof tensor_a);
  rc |= gguf_writer_add_tensor(w, "t.b", TENSOR_TYPE_Q4_0, 2, db, tensor_b, sizeof tensor_b);
  rc |= gguf_writer_write_buf(w, out);
  if (rc) abort();
  gguf_writer_free(w);
}

/* Expects opening b to fail with code and a detail containing needle. */
#define EXPECT_OPEN_FAILS(b, code, needle)                                      \
  do {                                                                          \
    gguf_file *f_ = NULL;                                                       \
    int rc_ = open_bytes((b), &f_);                                             \
    EXPECT_INT_EQ(rc_, (code));                                                 \
    EXPECT_TRUE(f_ == NULL);                                                    \
    EXPECT_STR_CONTAINS(err_detail(), (needle));                                \
    gguf_close(f_);                                                             \
  } while (0)

/* ---- round trips -------------------------------------------------------- */

static void round_trip(uint32_t alignment) {
  gguf_writer *w;
  ASSERT_INT_EQ(gguf_writer_new(&w), 0);
  if (alignment != 32) ASSERT_INT_EQ(gguf_writer_set_alignment(w, alignment), 0);
  ASSERT_INT_EQ(gguf_writer_add_u8(w, "v.u8", 250), 0);
  ASSERT_INT_EQ(gguf_writer_add_i8(w, "v.i8", -100), 0);
  ASSERT_INT_EQ(gguf_writer_add_u16(w, "v.u16", 65000), 0);
  ASSERT_INT_EQ(gguf_writer_add_i16(w, "v.i16", -32000), 0);
  ASSERT_INT_EQ(gguf_writer_add_u32(w, "v.u32", 4000000000u), 0);
  ASSERT_INT_EQ(gguf_writer_add_i32(w, "v.i32", -2000000000), 0);
  ASSERT_INT_EQ(gguf_writer_add_u64(w, "v.u64", 18000000000000000000ull), 0);
  ASSERT_INT_EQ(gguf_writer_add_i64(w, "v.i64", -9000000000000000000ll), 0);
  ASSERT_INT_EQ(gguf_writer_add_f32(w, "v.f32", 1.5f), 0);
  ASSERT_INT_EQ(gguf_writer_add_f64(w, "v.f64", -2.25e300), 0);
  ASSERT_INT_EQ(gguf_writer_add_bool(w, "v.bool", true), 0);
  ASSERT_INT_EQ(gguf_writer_add_str(w, "v.str", "héllo wörld"), 0);
  ASSERT_INT_EQ(gguf_writer_add_str(w, "v.empty", ""), 0);
  const char *toks[] = {"<s>", "</s>", "", "▁the", "a b"};
  ASSERT_INT_EQ(gguf_writer_add_arr_str(w, "v.arr_str", toks, 5), 0);
  float fl[4] = {0.5f, -1.0f, 3.25f, 1e-3f};
  ASSERT_INT_EQ(gguf_writer_add_arr(w, "v.arr_f32", GGUF_TYPE_FLOAT32, fl, 4), 0);
  int16_t i16[3] = {-1, 2, -32768};
  ASSERT_INT_EQ(gguf_writer_add_arr(w, "v.arr_i16", GGUF_TYPE_INT16, i16, 3), 0);
  ASSERT_INT_EQ(gguf_writer_add_arr(w, "v.arr_empty", GGUF_TYPE_UINT8, NULL, 0), 0);
  /* nested: [[1,2,3],[],[7]] of uint32, and [["x","yz"]] */
  buf nb = BUF_INIT;
  gguf_enc_arr_header(&nb, GGUF_TYPE_ARRAY, 3);
  gguf_enc_arr_header(&nb, GGUF_TYPE_UINT32, 3);
  gguf_enc_u32(&nb, 1), gguf_enc_u32(&nb, 2), gguf_enc_u32(&nb, 3);
  gguf_enc_arr_header(&nb, GGUF_TYPE_UINT32, 0);
  gguf_enc_arr_header(&nb, GGUF_TYPE_UINT32, 1);
  gguf_enc_u32(&nb, 7);
  ASSERT_INT_EQ(gguf_writer_add_raw(w, "v.nested", GGUF_TYPE_ARRAY, nb.data, nb.len), 0);
  buf_reset(&nb);
  gguf_enc_arr_header(&nb, GGUF_TYPE_ARRAY, 1);
  gguf_enc_arr_header(&nb, GGUF_TYPE_STRING, 2);
  gguf_enc_str(&nb, "x", 1), gguf_enc_str(&nb, "yz", 2);
  ASSERT_INT_EQ(gguf_writer_add_raw(w, "v.nested_str", GGUF_TYPE_ARRAY, nb.data, nb.len), 0);
  buf_free(&nb);
  EXPECT_INT_EQ(gguf_writer_add_u8(w, "v.u8", 1), ERR_EXISTS);

  /* 40 tensors of several types and shapes, with distinct byte patterns */
  static const uint32_t types[] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16, TENSOR_TYPE_BF16, TENSOR_TYPE_Q8_0,
                                   TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q6_K, TENSOR_TYPE_Q5_1};
  enum { NT = 40 };
  uint8_t *data[NT];
  size_t nbytes[NT];
  uint64_t dims[NT][3];
  for (int i = 0; i < NT; i++) {
    uint32_t t = types[i % 8];
    const struct tensor_type_traits *tr = tensor_type_get(t);
    dims[i][0] = tr->block_size * (uint64_t)(1 + i % 3);
    dims[i][1] = 1 + i % 5;
    dims[i][2] = 1 + i % 2;
    uint32_t nd = 1 + i % 3;
    nbytes[i] = dims[i][0] / tr->block_size * tr->type_size * (nd > 1 ? dims[i][1] : 1) * (nd > 2 ? dims[i][2] : 1);
    data[i] = malloc(nbytes[i]);
    for (size_t j = 0; j < nbytes[i]; j++) data[i][j] = (uint8_t)(j * 7 + i);
    char name[32];
    snprintf(name, sizeof name, "blk.%d.w", i);
    ASSERT_INT_EQ(gguf_writer_add_tensor(w, name, t, 1 + i % 3, dims[i], data[i], nbytes[i]), 0);
  }
  EXPECT_INT_EQ(gguf_writer_add_tensor(w, "blk.0.w", TENSOR_TYPE_F32, 1, dims[0], data[0], nbytes[0]), ERR_EXISTS);
  uint64_t bad_dims[1] = {33};
  EXPECT_INT_EQ(gguf_writer_add_tensor(w, "bad", TENSOR_TYPE_Q4_0, 1, bad_dims, data[0], 18), ERR_RANGE);

  char path[600];
  snprintf(path, sizeof path, "%s/rt.gguf", test_tmpdir());
  ASSERT_INT_EQ(gguf_writer_write_file(w, path), 0);
  buf mem = BUF_INIT;
  ASSERT_INT_EQ(gguf_writer_write_buf(w, &mem), 0);
  gguf_writer_free(w);

  gguf_file *f = NULL;
  int rc = gguf_open(path, &f);
  ASSERT_INT_EQ(rc, 0);
  EXPECT_INT_EQ(gguf_file_size(f), mem.len); /* file and buffer writers agree */
  EXPECT_INT_EQ(gguf_version(f), 3);
  EXPECT_INT_EQ(gguf_alignment(f), alignment);
  EXPECT_INT_EQ(gguf_data_offset(f) % alignment, 0);
  EXPECT_INT_EQ(gguf_n_kv(f), alignment != 32 ? 20 : 19);
  EXPECT_STR_EQ(gguf_kv_at(f, alignment != 32 ? 1 : 0)->key, "v.u8");

  uint32_t u32;
  uint64_t u64;
  int32_t i32;
  int64_t i64;
  float f32;
  bool bl;
  const char *s;
  EXPECT_INT_EQ(gguf_get_u32(f, "v.u8", &u32), 0);
  EXPECT_INT_EQ(u32, 250);
  EXPECT_INT_EQ(gguf_get_i32(f, "v.i8", &i32), 0);
  EXPECT_INT_EQ(i32, -100);
  EXPECT_INT_EQ(gguf_get_u32(f, "v.u16", &u32), 0);
  EXPECT_INT_EQ(u32, 65000);
  EXPECT_INT_EQ(gguf_get_i32(f, "v.i16", &i32), 0);
  EXPECT_INT_EQ(i32, -32000);
  EXPECT_INT_EQ(gguf_get_u32(f, "v.u32", &u32), 0);
  EXPECT_TRUE(u32 == 4000000000u);
  EXPECT_INT_EQ(gguf_get_i32(f, "v.i32", &i32), 0);
  EXPECT_INT_EQ(i32, -2000000000);
  EXPECT_INT_EQ(gguf_get_u64(f, "v.u64", &u64), 0);
  EXPECT_TRUE(u64 == 18000000000000000000ull);
  EXPECT_INT_EQ(gguf_get_i64(f, "v.i64", &i64), 0);
  EXPECT_TRUE(i64 == -9000000000000000000ll);
  EXPECT_INT_EQ(gguf_get_f32(f, "v.f32", &f32), 0);
  EXPECT_TRUE(f32 == 1.5f);
  EXPECT_TRUE(gguf_find(f, "v.f64")->type == GGUF_TYPE_FLOAT64);
  EXPECT_TRUE(gguf_find(f, "v.f64")->v.f64 == -2.25e300);
  EXPECT_INT_EQ(gguf_get_bool(f, "v.bool", &bl), 0);
  EXPECT_TRUE(bl);
  EXPECT_INT_EQ(gguf_get_str(f, "v.str", &s), 0);
  EXPECT_STR_EQ(s, "héllo wörld");
  EXPECT_INT_EQ(gguf_get_str(f, "v.empty", &s), 0);
  EXPECT_STR_EQ(s, "");
  /* type and range errors name the key and both types */
  EXPECT_INT_EQ(gguf_get_u32(f, "v.str", &u32), ERR_TYPE);
  EXPECT_STR_CONTAINS(err_detail(), "'v.str' is string, expected uint32");
  EXPECT_INT_EQ(gguf_get_str(f, "v.u8", &s), ERR_TYPE);
  EXPECT_STR_CONTAINS(err_detail(), "'v.u8' is uint8, expected string");
  EXPECT_INT_EQ(gguf_get_u32(f, "v.i8", &u32), ERR_RANGE);
  EXPECT_INT_EQ(gguf_get_i32(f, "v.u32", &i32), ERR_RANGE);
  EXPECT_INT_EQ(gguf_get_bool(f, "v.u8", &bl), ERR_TYPE);
  EXPECT_INT_EQ(gguf_get_f32(f, "nope", &f32), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "'nope'");

  const gguf_value *a;
  ASSERT_INT_EQ(gguf_get_arr(f, "v.arr_str", GGUF_TYPE_STRING, &a), 0);
  ASSERT_INT_EQ(a->v.arr.n, 5);
  for (int i = 0; i < 5; i++) {
    EXPECT_INT_EQ(a->v.arr.strs[i].len, strlen(toks[i]));
    EXPECT_TRUE(memcmp(a->v.arr.strs[i].data, toks[i], strlen(toks[i])) == 0);
  }
  EXPECT_INT_EQ(gguf_get_arr(f, "v.arr_str", GGUF_TYPE_INT32, &a), ERR_TYPE);
  EXPECT_STR_CONTAINS(err_detail(), "array of string, expected an array of int32");
  ASSERT_INT_EQ(gguf_get_arr(f, "v.arr_f32", GGUF_TYPE_FLOAT32, &a), 0);
  ASSERT_INT_EQ(a->v.arr.n, 4);
  for (int i = 0; i < 4; i++) EXPECT_TRUE(gguf_arr_f64(a, i) == fl[i]);
  ASSERT_INT_EQ(gguf_get_arr(f, "v.arr_i16", GGUF_TYPE_COUNT, &a), 0);
  EXPECT_INT_EQ(gguf_arr_i64(a, 0), -1);
  EXPECT_INT_EQ(gguf_arr_i64(a, 2), -32768);
  ASSERT_INT_EQ(gguf_get_arr(f, "v.arr_empty", GGUF_TYPE_UINT8, &a), 0);
  EXPECT_INT_EQ(a->v.arr.n, 0);
  ASSERT_INT_EQ(gguf_get_arr(f, "v.nested", GGUF_TYPE_ARRAY, &a), 0);
  ASSERT_INT_EQ(a->v.arr.n, 3);
  EXPECT_INT_EQ(a->v.arr.items[0].v.arr.n, 3);
  EXPECT_INT_EQ(gguf_arr_u64(&a->v.arr.items[0], 2), 3);
  EXPECT_INT_EQ(a->v.arr.items[1].v.arr.n, 0);
  EXPECT_INT_EQ(gguf_arr_u64(&a->v.arr.items[2], 0), 7);
  ASSERT_INT_EQ(gguf_get_arr(f, "v.nested_str", GGUF_TYPE_ARRAY, &a), 0);
  ASSERT_INT_EQ(a->v.arr.items[0].v.arr.elem_type, GGUF_TYPE_STRING);
  EXPECT_INT_EQ(a->v.arr.items[0].v.arr.strs[1].len, 2);
  EXPECT_TRUE(memcmp(a->v.arr.items[0].v.arr.strs[1].data, "yz", 2) == 0);

  ASSERT_INT_EQ(gguf_n_tensors(f), NT);
  for (int i = 0; i < NT; i++) {
    char name[32];
    snprintf(name, sizeof name, "blk.%d.w", i);
    const gguf_tensor *t = gguf_find_tensor(f, name);
    ASSERT_TRUE(t != NULL);
    EXPECT_TRUE(t == gguf_tensor_at(f, i));
    EXPECT_INT_EQ(t->type, types[i % 8]);
    EXPECT_INT_EQ(t->n_dims, 1 + i % 3);
    EXPECT_INT_EQ(t->dims[0], dims[i][0]);
    EXPECT_INT_EQ(t->n_bytes, nbytes[i]);
    EXPECT_INT_EQ(t->dims[1], t->n_dims > 1 ? dims[i][1] : 1);
    EXPECT_INT_EQ(t->offset % alignment, 0);
    EXPECT_INT_EQ((uintptr_t)t->data % alignment, 0);
    EXPECT_TRUE(memcmp(t->data, data[i], t->n_bytes) == 0);
    free(data[i]);
  }
  EXPECT_TRUE(gguf_find_tensor(f, "blk.99.w") == NULL);
  gguf_close(f);

  /* the in-memory reader sees the same file */
  ASSERT_INT_EQ(gguf_open_mem(mem.data, mem.len, &f), 0);
  EXPECT_INT_EQ(gguf_n_tensors(f), NT);
  gguf_close(f);
  buf_free(&mem);
}

TEST(gguf_round_trip_align32) { round_trip(32); }
TEST(gguf_round_trip_align64) { round_trip(64); }

TEST(gguf_empty_file_no_tensors) {
  gguf_writer *w;
  ASSERT_INT_EQ(gguf_writer_new(&w), 0);
  buf b = BUF_INIT;
  ASSERT_INT_EQ(gguf_writer_write_buf(w, &b), 0);
  gguf_writer_free(w);
  EXPECT_INT_EQ(b.len, 32); /* 24-byte header padded to 32 */
  gguf_file *f;
  ASSERT_INT_EQ(open_bytes(&b, &f), 0);
  EXPECT_INT_EQ(gguf_n_kv(f), 0);
  EXPECT_INT_EQ(gguf_n_tensors(f), 0);
  EXPECT_TRUE(gguf_find(f, "x") == NULL);
  gguf_close(f);
  buf_free(&b);
}

/* ---- the corrupt catalogue ---------------------------------------------- */

TEST(gguf_bad_magic) {
  buf b = BUF_INIT;
  base_file(&b, 0);
  b.data[0] = 'X';
  EXPECT_OPEN_FAILS(&b, ERR_PARSE, "not a GGUF file");
  buf_free(&b);
}

TEST(gguf_version_1_and_99) {
  buf b = BUF_INIT;
  base_file(&b, 0);
  put_u32(&b, 4, 1);
  EXPECT_OPEN_FAILS(&b, ERR_UNSUPPORTED, "version 1 ");
  put_u32(&b, 4, 99);
  EXPECT_OPEN_FAILS(&b, ERR_UNSUPPORTED, "version 99 is not supported");
  put_u32(&b, 4, 0x03000000); /* a big-endian v3 file */
  EXPECT_OPEN_FAILS(&b, ERR_UNSUPPORTED, "big-endian");
  put_u32(&b, 4, 2); /* v2 has the same layout: accepted */
  gguf_file *f = NULL;
  EXPECT_INT_EQ(open_bytes(&b, &f), 0);
  gguf_close(f);
  buf_free(&b);
}

TEST(gguf_huge_counts) {
  buf b = BUF_INIT;
  base_file(&b, 0);
  put_u64(&b, 8, 1ull << 60);
  EXPECT_OPEN_FAILS(&b, ERR_TOO_LARGE, "n_tensors 1152921504606846976 cannot fit");
  put_u64(&b, 8, 2);
  put_u64(&b, 16, UINT64_MAX);
  EXPECT_OPEN_FAILS(&b, ERR_TOO_LARGE, "n_kv");
  buf_free(&b);
}

TEST(gguf_string_past_eof) {
  buf b = BUF_INIT;
  base_file(&b, 0);
  size_t at = after_str(&b, "s.val");
  ASSERT_TRUE(at > 0);
  put_u64(&b, at + 4, 1000000); /* the value's length */
  EXPECT_OPEN_FAILS(&b, ERR_CORRUPT, "key 's.val' value: string length 1000000");
  /* a key length past the end */
  buf_reset(&b);
  base_file(&b, 0);
  at = after_str(&b, "s.val");
  put_u64(&b, at - 5 - 8, 1ull << 40);
  EXPECT_OPEN_FAILS(&b, ERR_CORRUPT, "kv #1 key: string length 1099511627776");
  buf_free(&b);
}

TEST(gguf_array_length_overflow) {
  buf b = BUF_INIT;
  base_file(&b, 0);
  size_t at = after_str(&b, "a.u32"); /* then u32 type, u32 elem type, u64 n */
  ASSERT_TRUE(at > 0);
  put_u64(&b, at + 8, (1ull << 62) + 1); /* x 4 bytes wraps 64 bits */
  EXPECT_OPEN_FAILS(&b, ERR_TOO_LARGE, "key 'a.u32': array of 4611686018427387905 uint32 elements overflows");
  put_u64(&b, at + 8, 1ull << 30); /* fits in 64 bits, not in the file */
  EXPECT_OPEN_FAILS(&b, ERR_CORRUPT, "key 'a.u32': array of 1073741824 uint32 elements");
  buf_free(&b);
}

TEST(gguf_nested_array_bomb) {
  /* 100 levels of arrays, each holding one array */
  gguf_writer *w;
  ASSERT_INT_EQ(gguf_writer_new(&w), 0);
  buf v = BUF_INIT;
  for (int i = 0; i < 100; i++) gguf_enc_arr_header(&v, GGUF_TYPE_ARRAY, 1);
  gguf_enc_arr_header(&v, GGUF_TYPE_UINT8, 0);
  ASSERT_INT_EQ(gguf_writer_add_raw(w, "bomb.deep", GGUF_TYPE_ARRAY, v.data, v.len), 0);
  buf b = BUF_INIT;
  ASSERT_INT_EQ(gguf_writer_write_buf(w, &b), 0);
  gguf_writer_free(w);
  EXPECT_OPEN_FAILS(&b, ERR_TOO_LARGE, "key 'bomb.deep': arrays nested deeper than 8");
  /* wide: an array claiming 2^40 empty arrays */
  ASSERT_INT_EQ(gguf_writer_new(&w), 0);
  buf_reset(&v);
  gguf_enc_arr_header(&v, GGUF_TYPE_ARRAY, 1ull << 40);
  for (int i = 0; i < 10; i++) gguf_enc_arr_header(&v, GGUF_TYPE_UINT8, 0);
  ASSERT_INT_EQ(gguf_writer_add_raw(w, "bomb.wide", GGUF_TYPE_ARRAY, v.data, v.len), 0);
  buf_reset(&b);
  ASSERT_INT_EQ(gguf_writer_write_buf(w, &b), 0);
  gguf_writer_free(w);
  EXPECT_OPEN_FAILS(&b, ERR_CORRUPT, "key 'bomb.wide': array of 1099511627776 array elements");
  buf_free(&v);
  buf_free(&b);
}

TEST(gguf_unknown_kv_type) {
  buf b = BUF_INIT;
  base_file(&b, 0);
  size_t at = after_str(&b, "u.key");
  put_u32(&b, at, 13);
  EXPECT_OPEN_FAILS(&b, ERR_PARSE, "key 'u.key': unknown value type 13");
  at = after_str(&b, "a.u32");
  buf_reset(&b);
  base_file(&b, 0);
  put_u32(&b, at + 4, 77); /* array element type */
  EXPECT_OPEN_FAILS(&b, ERR_PARSE, "key 'a.u32': unknown array element type 77");
  buf_free(&b);
}

TEST(gguf_duplicate_key_and_tensor) {
  buf b = BUF_INIT;
  base_file(&b, 0);
  size_t at = after_str(&b, "dup.b");
  b.data[at - 1] = 'a';
  EXPECT_OPEN_FAILS(&b, ERR_EXISTS, "duplicate key 'dup.a'");
  buf_reset(&b);
  base_file(&b, 0);
  at = after_str(&b, "t.b");
  b.data[at - 1] = 'a';
  EXPECT_OPEN_FAILS(&b, ERR_EXISTS, "duplicate tensor name 't.a'");
  buf_free(&b);
}

TEST(gguf_bad_dims) {
  buf b = BUF_INIT;
  base_file(&b, 0);
  size_t at = after_str(&b, "t.b"); /* n_dims u32, dims u64 x2, type u32, offset u64 */
  put_u32(&b, at, 5);
  EXPECT_OPEN_FAILS(&b, ERR_RANGE, "tensor 't.b': n_dims 5 is not in 1..4");
  put_u32(&b, at, 0);
  EXPECT_OPEN_FAILS(&b, ERR_RANGE, "tensor 't.b': n_dims 0");
  put_u32(&b, at, 2);
  put_u64(&b, at + 12, 0);
  EXPECT_OPEN_FAILS(&b, ERR_RANGE, "tensor 't.b': dim 1 is 0");
  put_u64(&b, at + 4, 1ull << 40);
  put_u64(&b, at + 12, 1ull << 40);
  EXPECT_OPEN_FAILS(&b, ERR_TOO_LARGE, "tensor 't.b': the product of its dims overflows");
  put_u64(&b, at + 4, 33);
  put_u64(&b, at + 12, 4);
  EXPECT_OPEN_FAILS(&b, ERR_RANGE, "tensor 't.b': row length 33 is not a multiple of Q4_0's block size 32");
  buf_free(&b);
}

TEST(gguf_unknown_tensor_type) {
  buf b = BUF_INIT;
  base_file(&b, 0);
  size_t at = after_str(&b, "t.b");
  put_u32(&b, at + 4 + 16, 4); /* Q4_2, removed from ggml */
  EXPECT_OPEN_FAILS(&b, ERR_UNSUPPORTED, "tensor 't.b': unknown tensor type 4");
  put_u32(&b, at + 4 + 16, 1000);
  EXPECT_OPEN_FAILS(&b, ERR_UNSUPPORTED, "tensor 't.b': unknown tensor type 1000");
  buf_free(&b);
}

TEST(gguf_misaligned_and_past_eof) {
  buf b = BUF_INIT;
  base_file(&b, 0);
  size_t at = after_str(&b, "t.b");
  size_t off_at = at + 4 + 16 + 4;
  uint64_t off;
  memcpy(&off, b.data + off_at, 8);
  EXPECT_INT_EQ(off, 256); /* t.a is 256 bytes */
  put_u64(&b, off_at, off + 1);
  EXPECT_OPEN_FAILS(&b, ERR_CORRUPT, "tensor 't.b': data offset 257 is not a multiple of the alignment 32");
  put_u64(&b, off_at, off);
  size_t full = b.len;
  b.len -= 10; /* truncate inside t.b's data */
  char want[200];
  snprintf(want, sizeof want, "tensor 't.b': data [offset 256, 72 bytes] extends past end of file (%zu bytes)",
           full - 10);
  EXPECT_OPEN_FAILS(&b, ERR_CORRUPT, want);
  b.len = full;
  put_u64(&b, off_at, UINT64_MAX - 31);
  EXPECT_OPEN_FAILS(&b, ERR_TOO_LARGE, "tensor 't.b': data");
  buf_free(&b);
}

TEST(gguf_bad_alignment_values) {
  static const uint32_t bad[] = {0, 3, 48};
  for (size_t i = 0; i < 3; i++) {
    buf b = BUF_INIT;
    base_file(&b, 1);
    size_t at = after_str(&b, "general.alignment");
    put_u32(&b, at + 4, bad[i]);
    char want[100];
    snprintf(want, sizeof want, "key 'general.alignment' is %u, not a power of two", bad[i]);
    EXPECT_OPEN_FAILS(&b, ERR_RANGE, want);
    buf_free(&b);
  }
  buf b = BUF_INIT;
  base_file(&b, 1);
  size_t at = after_str(&b, "general.alignment");
  put_u32(&b, at, GGUF_TYPE_INT32);
  EXPECT_OPEN_FAILS(&b, ERR_TYPE, "key 'general.alignment' is int32, expected uint32");
  buf_free(&b);
}

TEST(gguf_truncated_at_every_byte) {
  buf b = BUF_INIT;
  base_file(&b, 1);
  for (size_t n = 0; n < b.len; n++) {
    uint8_t *copy = malloc(n ? n : 1); /* exact size: the sanitizer sees overreads */
    memcpy(copy, b.data, n);
    gguf_file *f = NULL;
    int rc = gguf_open_mem(copy, n, &f);
    if (rc == 0) {
      /* only possible when just trailing padding after the last tensor was cut: never here */
      test_fail_at(__FILE__, __LINE__, "truncated to %zu of %zu bytes opened", n, b.len);
      gguf_close(f);
    } else if (rc != ERR_CORRUPT && rc != ERR_PARSE && rc != ERR_TOO_LARGE) {
      test_fail_at(__FILE__, __LINE__, "truncated to %zu: code %s (%s)", n, err_name(rc), err_detail());
    }
    free(copy);
  }
  buf_free(&b);
}

TEST(gguf_random_corruption_never_crashes) {
  buf b = BUF_INIT;
  base_file(&b, 1);
  uint32_t seed = 12345;
  for (int iter = 0; iter < 3000; iter++) {
    uint8_t *copy = malloc(b.len);
    memcpy(copy, b.data, b.len);
    int flips = 1 + iter % 4;
    for (int k = 0; k < flips; k++) {
      seed = seed * 1664525u + 1013904223u;
      size_t pos = (seed >> 8) % b.len;
      seed = seed * 1664525u + 1013904223u;
      copy[pos] = (uint8_t)(seed >> 24);
    }
    gguf_file *f = NULL;
    int rc = gguf_open_mem(copy, b.len, &f);
    if (rc == 0) {
      /* whatever opened must be in bounds */
      for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        EXPECT_TRUE((const uint8_t *)t->data >= copy &&
                    (const uint8_t *)t->data + t->n_bytes <= copy + b.len);
      }
      gguf_close(f);
    } else {
      EXPECT_TRUE(err_detail()[0] != 0);
    }
    free(copy);
  }
  buf_free(&b);
}

TEST(gguf_open_missing_file) {
  gguf_file *f = NULL;
  EXPECT_INT_EQ(gguf_open("/nonexistent/x.gguf", &f), ERR_IO);
  EXPECT_STR_CONTAINS(err_detail(), "/nonexistent/x.gguf");
  EXPECT_INT_EQ(gguf_open(test_tmpdir(), &f), ERR_IO); /* a directory */
}

/* ---- the real converter's file ------------------------------------------ */

TEST(gguf_shared_llama_tiny) {
  char path[600];
  if (!test_shared_path("models/llama-2-tiny-random.gguf", path, sizeof path))
    TEST_SKIP("../shared/models/llama-2-tiny-random.gguf absent");
  gguf_file *f = NULL;
  int rc = gguf_open(path, &f);
  if (rc) test_fail_at(__FILE__, __LINE__, "open: %s", err_detail());
  ASSERT_INT_EQ(rc, 0);
  const char *arch;
  ASSERT_INT_EQ(gguf_get_str(f, "general.architecture", &arch), 0);
  EXPECT_STR_EQ(arch, "llama");
  const gguf_value *toks, *scores, *types;
  ASSERT_INT_EQ(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks), 0);
  ASSERT_INT_EQ(gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores), 0);
  ASSERT_INT_EQ(gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types), 0);
  EXPECT_INT_EQ(toks->v.arr.n, 32000); /* the real Llama-2 SentencePiece vocabulary */
  EXPECT_INT_EQ(scores->v.arr.n, toks->v.arr.n);
  EXPECT_INT_EQ(types->v.arr.n, toks->v.arr.n);
  EXPECT_TRUE(toks->v.arr.strs[1].len == 3 && memcmp(toks->v.arr.strs[1].data, "<s>", 3) == 0);
  EXPECT_TRUE(toks->v.arr.strs[2].len == 4 && memcmp(toks->v.arr.strs[2].data, "</s>", 4) == 0);
  uint32_t n_embd;
  ASSERT_INT_EQ(gguf_get_u32(f, "llama.embedding_length", &n_embd), 0);
  const gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
  ASSERT_TRUE(emb != NULL);
  EXPECT_INT_EQ(emb->dims[0], n_embd);
  EXPECT_INT_EQ(emb->dims[1], toks->v.arr.n);
  ASSERT_TRUE(gguf_n_tensors(f) > 0);
  uint64_t total = 0;
  for (size_t i = 0; i < gguf_n_tensors(f); i++) {
    const gguf_tensor *t = gguf_tensor_at(f, i);
    EXPECT_TRUE(gguf_data_offset(f) + t->offset + t->n_bytes <= gguf_file_size(f));
    EXPECT_INT_EQ((uintptr_t)t->data % gguf_alignment(f), 0);
    total += t->n_bytes;
  }
  /* the tensors fill the data section up to padding */
  EXPECT_TRUE(total <= gguf_file_size(f) - gguf_data_offset(f));
  EXPECT_TRUE(total + gguf_n_tensors(f) * gguf_alignment(f) >= gguf_file_size(f) - gguf_data_offset(f));
  gguf_close(f);
}

TEST(gguf_shared_vocab_files_open) {
  char dir[600];
  if (!test_shared_path("vocab", dir, sizeof dir)) TEST_SKIP("../shared/vocab absent");
  static const char *names[] = {"llama-spm", "gpt-2", "bert-bge", "phi-3", "deepseek-coder", "starcoder"};
  int opened = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char path[800];
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, names[i]);
    FILE *fp = fopen(path, "rb");
    if (!fp) continue;
    fclose(fp);
    gguf_file *f = NULL;
    int rc = gguf_open(path, &f);
    if (rc) test_fail_at(__FILE__, __LINE__, "%s: %s", path, err_detail());
    if (rc) continue;
    const gguf_value *toks;
    EXPECT_INT_EQ(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks), 0);
    EXPECT_TRUE(gguf_n_tensors(f) == 0);
    opened++;
    gguf_close(f);
  }
  EXPECT_INT_GT(opened, 0);
}

/* ---- against the independent Python reader (tools/gguf_ref.py) ----------- */

static void dump_scalar_bits(buf *b, uint32_t type, double f) {
  if (type == GGUF_TYPE_FLOAT32) {
    float x = (float)f;
    uint32_t u;
    memcpy(&u, &x, 4);
    buf_appendf(b, "f32:%08x", u);
  } else {
    uint64_t u;
    memcpy(&u, &f, 8);
    buf_appendf(b, "f64:%016llx", (unsigned long long)u);
  }
}

static void dump_hex(buf *b, const char *s, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) buf_appendf(b, "%02x", (uint8_t)s[i]);
}

static void dump_value(buf *b, const gguf_value *v) {
  switch (v->type) {
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64: dump_scalar_bits(b, v->type, v->v.f64); break;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
      buf_appendf(b, "%lld", (long long)v->v.i64);
      break;
    case GGUF_TYPE_STRING: dump_hex(b, v->v.str.data, v->v.str.len); break;
    case GGUF_TYPE_ARRAY: {
      uint32_t et = v->v.arr.elem_type;
      buf_appendf(b, "[%s %llu: ", gguf_type_name(et), (unsigned long long)v->v.arr.n);
      for (uint64_t i = 0; i < v->v.arr.n; i++) {
        if (i) buf_append_byte(b, ',');
        if (et == GGUF_TYPE_STRING) dump_hex(b, v->v.arr.strs[i].data, v->v.arr.strs[i].len);
        else if (et == GGUF_TYPE_ARRAY) dump_value(b, &v->v.arr.items[i]);
        else if (et == GGUF_TYPE_FLOAT32 || et == GGUF_TYPE_FLOAT64) dump_scalar_bits(b, et, gguf_arr_f64(v, i));
        else if (et == GGUF_TYPE_BOOL) buf_appendf(b, "%d", gguf_arr_u64(v, i) != 0);
        else if (et == GGUF_TYPE_INT8 || et == GGUF_TYPE_INT16 || et == GGUF_TYPE_INT32 || et == GGUF_TYPE_INT64)
          buf_appendf(b, "%lld", (long long)gguf_arr_i64(v, i));
        else buf_appendf(b, "%llu", (unsigned long long)gguf_arr_u64(v, i));
      }
      buf_append_byte(b, ']');
      break;
    }
    default: buf_appendf(b, "%llu", (unsigned long long)v->v.u64); break;
  }
}

static void dump_file(const gguf_file *f, buf *b) {
  buf_appendf(b, "version %u\nalignment %u\ndata_offset %llu\n", gguf_version(f), gguf_alignment(f),
              (unsigned long long)gguf_data_offset(f));
  for (size_t i = 0; i < gguf_n_kv(f); i++) {
    const gguf_kv *kv = gguf_kv_at(f, i);
    buf_appendf(b, "kv %s %s ", kv->key, gguf_type_name(kv->value.type));
    dump_value(b, &kv->value);
    buf_append_byte(b, '\n');
  }
  for (size_t i = 0; i < gguf_n_tensors(f); i++) {
    const gguf_tensor *t = gguf_tensor_at(f, i);
    buf_appendf(b, "tensor %s %u ", t->name, t->type);
    for (uint32_t d = 0; d < t->n_dims; d++) buf_appendf(b, "%s%llu", d ? "," : "", (unsigned long long)t->dims[d]);
    buf_appendf(b, " %llu\n", (unsigned long long)t->offset);
  }
}

/* Compares our reader's dump of path with tools/gguf_ref.py's. */
static void compare_with_python(const char *path) {
  if (access("tools/gguf_ref.py", R_OK) != 0) {
    test_fail_at(__FILE__, __LINE__, "tools/gguf_ref.py not found (run from the repository root)");
    return;
  }
  if (system("/usr/bin/python3 -c 'import struct' >/dev/null 2>&1") != 0) TEST_SKIP("/usr/bin/python3 absent");
  char out[700], cmd[2000];
  snprintf(out, sizeof out, "%s/py_dump.txt", test_tmpdir());
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/gguf_ref.py dump '%s' '%s'", path, out);
  ASSERT_INT_EQ(system(cmd), 0);
  FILE *fp = fopen(out, "rb");
  ASSERT_TRUE(fp != NULL);
  buf want = BUF_INIT;
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) buf_append(&want, chunk, n);
  fclose(fp);
  gguf_file *f = NULL;
  ASSERT_INT_EQ(gguf_open(path, &f), 0);
  buf got = BUF_INIT;
  dump_file(f, &got);
  gguf_close(f);
  if (got.len != want.len || memcmp(got.data, want.data, got.len) != 0) {
    size_t i = 0;
    while (i < got.len && i < want.len && got.data[i] == want.data[i]) i++;
    size_t from = i > 60 ? i - 60 : 0;
    test_fail_at(__FILE__, __LINE__, "dumps differ at byte %zu:\n  C:      %.120s\n  python: %.120s", i,
                 got.data + from, want.data + from);
  }
  buf_free(&got);
  buf_free(&want);
}

TEST(gguf_writer_output_read_by_python) {
  gguf_writer *w;
  ASSERT_INT_EQ(gguf_writer_new(&w), 0);
  ASSERT_INT_EQ(gguf_writer_set_alignment(w, 64), 0);
  ASSERT_INT_EQ(gguf_writer_add_i8(w, "a.i8", -5), 0);
  ASSERT_INT_EQ(gguf_writer_add_u16(w, "a.u16", 513), 0);
  ASSERT_INT_EQ(gguf_writer_add_i64(w, "a.i64", -1234567890123ll), 0);
  ASSERT_INT_EQ(gguf_writer_add_f32(w, "a.f32", -0.1f), 0);
  ASSERT_INT_EQ(gguf_writer_add_f64(w, "a.f64", 1e-300), 0);
  ASSERT_INT_EQ(gguf_writer_add_bool(w, "a.bool", false), 0);
  ASSERT_INT_EQ(gguf_writer_add_str(w, "a.str", "tab\there \xe2\x96\x81"), 0);
  const char *strs[] = {"x", "", "yy"};
  ASSERT_INT_EQ(gguf_writer_add_arr_str(w, "a.strs", strs, 3), 0);
  double f64s[2] = {0.5, -3.0};
  ASSERT_INT_EQ(gguf_writer_add_arr(w, "a.f64s", GGUF_TYPE_FLOAT64, f64s, 2), 0);
  uint8_t bools[3] = {1, 0, 1};
  ASSERT_INT_EQ(gguf_writer_add_arr(w, "a.bools", GGUF_TYPE_BOOL, bools, 3), 0);
  buf nb = BUF_INIT;
  gguf_enc_arr_header(&nb, GGUF_TYPE_ARRAY, 2);
  gguf_enc_arr_header(&nb, GGUF_TYPE_INT32, 1);
  gguf_enc_u32(&nb, (uint32_t)-7);
  gguf_enc_arr_header(&nb, GGUF_TYPE_STRING, 1);
  gguf_enc_str(&nb, "deep", 4);
  ASSERT_INT_EQ(gguf_writer_add_raw(w, "a.nested", GGUF_TYPE_ARRAY, nb.data, nb.len), 0);
  buf_free(&nb);
  static uint8_t d1[4 * 96], d2[210 * 3];
  uint64_t dims1[2] = {32, 3}, dims2[1] = {768};
  ASSERT_INT_EQ(gguf_writer_add_tensor(w, "w.f32", TENSOR_TYPE_F32, 2, dims1, d1, sizeof d1), 0);
  ASSERT_INT_EQ(gguf_writer_add_tensor(w, "w.q6k", TENSOR_TYPE_Q6_K, 1, dims2, d2, sizeof d2), 0);
  char path[600];
  snprintf(path, sizeof path, "%s/w.gguf", test_tmpdir());
  ASSERT_INT_EQ(gguf_writer_write_file(w, path), 0);
  gguf_writer_free(w);
  compare_with_python(path);
}

TEST(gguf_shared_llama_tiny_matches_python) {
  char path[600];
  if (!test_shared_path("models/llama-2-tiny-random.gguf", path, sizeof path))
    TEST_SKIP("../shared/models/llama-2-tiny-random.gguf absent");
  compare_with_python(path);
}

/* Float array elements read as integers saturate instead of overflowing
 * (a conversion out of int64's range is undefined; found by fuzz_gguf). */
TEST(gguf_float_array_as_int_saturates) {
  gguf_writer *w = NULL;
  ASSERT_INT_EQ(gguf_writer_new(&w), 0);
  const float fl[] = {1e35f, -1e35f, NAN, 3.7f, -2.5f};
  ASSERT_INT_EQ(gguf_writer_add_arr(w, "f", GGUF_TYPE_FLOAT32, fl, 5), 0);
  buf mem = BUF_INIT;
  ASSERT_INT_EQ(gguf_writer_write_buf(w, &mem), 0);
  gguf_writer_free(w);
  gguf_file *f = NULL;
  ASSERT_INT_EQ(gguf_open_mem(mem.data, mem.len, &f), 0);
  const gguf_value *arr = NULL;
  ASSERT_INT_EQ(gguf_get_arr(f, "f", GGUF_TYPE_FLOAT32, &arr), 0);
  EXPECT_TRUE(gguf_arr_i64(arr, 0) == INT64_MAX);
  EXPECT_TRUE(gguf_arr_i64(arr, 1) == INT64_MIN);
  EXPECT_INT_EQ(gguf_arr_i64(arr, 2), 0);
  EXPECT_INT_EQ(gguf_arr_i64(arr, 3), 3);
  EXPECT_INT_EQ(gguf_arr_i64(arr, 4), -2);
  gguf_close(f);
  buf_free(&mem);
}
