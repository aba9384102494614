/*
 * fuzz_gguf.c - libFuzzer harness for the GGUF reader: any bytes must give 0
 * or a clean error, never a crash, an out-of-bounds read or a leak. On a file
 * that opens, every kv, array element and tensor byte is touched, so a
 * pointer the reader hands out that is not inside the input is caught.
 * Seeds: tests/fuzz/seeds/gguf/ (small files made by the project's writer).
 */
#include "fuzz.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"


static volatile uint64_t sink;

static void touch_value(const gguf_value *v) {
  if (v->type == GGUF_TYPE_STRING) {
    sink += strlen(v->v.str.data);
  } else if (v->type == GGUF_TYPE_ARRAY) {
    for (uint64_t i = 0; i < v->v.arr.n; i++) {
      if (v->v.arr.elem_type == GGUF_TYPE_STRING) {
        const gguf_str *s = &v->v.arr.strs[i];
        if (s->len) sink += (uint8_t)s->data[s->len - 1];
      } else if (v->v.arr.elem_type == GGUF_TYPE_ARRAY) {
        touch_value(&v->v.arr.items[i]);
      } else {
        sink += gguf_arr_u64(v, i);
      }
    }
  }
}

FUZZ_TARGET(gguf) {
  /* an exact-size copy, so reading one byte past the end is caught */
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  gguf_file *f = NULL;
  if (gguf_open_mem(copy, size, &f) == 0) {
    for (size_t i = 0; i < gguf_n_kv(f); i++) {
      const gguf_kv *kv = gguf_kv_at(f, i);
      touch_value(&kv->value);
      if (gguf_find(f, kv->key) != &kv->value) abort();
    }
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
      const gguf_tensor *t = gguf_tensor_at(f, i);
      const uint8_t *p = t->data;
      if (t->n_bytes) sink += p[0] + p[t->n_bytes - 1];
      if (gguf_find_tensor(f, t->name) != t) abort();
    }
    gguf_close(f);
  }
  free(copy);
  return 0;
}
