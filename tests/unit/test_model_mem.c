/*
 * test_model_mem.c - the model does not keep the file's pages of tensors it
 * holds a copy of resident (docs/runtime.md, "Memory"): repacked matrices
 * (bind_pack), other matrices copied into huge pages (bind_copy) and 1-D
 * vectors, and a tied token_embd (the output matrix too, so copied or
 * repacked; lookups read the copy). Checked with /proc/self/pagemap's "present" bit of the mapping,
 * page by page, right after load and after a forward pass.
 * (mincore() would not do: it reports the page cache, which keeps the file
 * whatever this process maps.) Also: a long prompt step leaves no page of
 * the context's compute buffers resident (model_arch_ops.trim).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/model_int.h"
#include "model/testgen.h"
#include "model_ref.h"
#include "test.h"

/* Pages of [p, p + n) (whole pages only) mapped in this process, or -1
 * when pagemap cannot be read. Bit 63 of a pagemap entry: page present. */
static long present_pages(int fd, const void *p, size_t n) {
  long pg = sysconf(_SC_PAGESIZE);
  uintptr_t a = ((uintptr_t)p + (uintptr_t)pg - 1) / (uintptr_t)pg, e = ((uintptr_t)p + n) / (uintptr_t)pg;
  long count = 0;
  for (uintptr_t i = a; i < e; i++) {
    uint64_t ent;
    if (pread(fd, &ent, sizeof ent, (off_t)(i * sizeof ent)) != (ssize_t)sizeof ent) return -1;
    count += (long)(ent >> 63);
  }
  return count;
}

/* Q8_0 has a repacked layout on this CPU (kern_pack gives one). */
static int q8_packs(void) {
  uint8_t w[8 * 34];
  memset(w, 0, sizeof w);
  kern_packed *p = NULL;
  if (kern_pack(TENSOR_TYPE_Q8_0, w, 8, 32, &p)) return 0;
  kern_packed_free(p);
  return p != NULL;
}

/* Every tensor whose name starts with `prefix` (or any, for "") must have
 * no page present; token_embd is skipped unless tied (untied, it is read
 * row by row from the mapping). */
static void expect_released(int fd, const gguf_file *f, const char *prefix, const char *when, bool tied) {
  for (size_t i = 0; i < gguf_n_tensors(f); i++) {
    const gguf_tensor *t = gguf_tensor_at(f, i);
    if ((!tied && strcmp(t->name, "token_embd.weight") == 0) || strncmp(t->name, prefix, strlen(prefix)) != 0)
      continue;
    long n = present_pages(fd, t->data, (size_t)t->n_bytes);
    if (n != 0)
      test_fail_at(__FILE__, __LINE__, "%s: %ld pages of '%s' (%llu bytes) still mapped", when, n, t->name,
                   (unsigned long long)t->n_bytes);
  }
}

/* A model of type `type` whose tensors are several pages each (attn_q
 * 2048 x 2048, norms 8 KiB = 2 pages, every matrix at least 2 MiB in F16):
 * after load no page of a copied tensor is mapped, and after a forward
 * pass none of blk.1 and the output (see below); tied, no page of any
 * tensor, token_embd included, before or after. */
static void check_released(uint32_t type, const char *name, bool tied) {
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) TEST_SKIP("/proc/self/pagemap cannot be read");
  model_testgen g = model_testgen_small();
  g.n_embd = 2048;
  g.n_head = 16;
  g.n_head_kv = 4;
  g.n_ff = 1024;
  g.n_ctx = 64;
  g.n_vocab = 600;
  g.type = g.type_embd = g.type_output = g.type_ffn_down = type;
  g.tied = tied;
  char path[512];
  ASSERT_TRUE(ref_write_llama(&g, name, path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  const gguf_file *f = model_gguf(m);
  ASSERT_TRUE(gguf_is_mapped(f));
  EXPECT_TRUE((gguf_find_tensor(f, "output.weight") == NULL) == tied);
  expect_released(fd, f, "", "after load", tied);
  /* A forward pass reads token_embd rows from the mapping, whose faults may
   * map the folio (up to 2 MiB) around them, reaching into blk.0; blk.1 and
   * the output are beyond it and must stay unmapped. */
  model_ctx_params cp = model_ctx_default_params();
  cp.n_threads = 1;
  model_ctx *c = NULL;
  ASSERT_INT_EQ(model_ctx_new(m, &cp, &c), 0);
  const int32_t toks[3] = {1, 2, 3};
  float *logits = malloc((size_t)g.n_vocab * sizeof *logits);
  ASSERT_TRUE(logits != NULL);
  EXPECT_INT_EQ(model_forward(c, toks, 3, 0, logits, MODEL_LOGITS_LAST), 0);
  if (tied) { /* nothing reads the mapping any more */
    expect_released(fd, f, "", "after a forward pass", true);
  } else {
    expect_released(fd, f, "blk.1.", "after a forward pass", false);
    expect_released(fd, f, "output", "after a forward pass", false);
  }
  free(logits);
  model_ctx_free(c);
  model_free(m);
  close(fd);
  unlink(path);
}

/* Q8_0: matrices repacked (bind_pack), vectors copied. */
TEST(model_mem_packed_not_resident) {
  if (!q8_packs()) TEST_SKIP("Q8_0 is not repacked on this CPU");
  check_released(TENSOR_TYPE_Q8_0, "mem_q8", false);
}

/* Tied Q8_0 embeddings: token_embd repacked (it is the output matrix),
 * its file pages released, lookups served from the packed copy. */
TEST(model_mem_tied_packed_not_resident) {
  if (!q8_packs()) TEST_SKIP("Q8_0 is not repacked on this CPU");
  check_released(TENSOR_TYPE_Q8_0, "mem_q8_tied", true);
}

/* Tied F16 embeddings: token_embd copied into huge pages (bind_copy). */
TEST(model_mem_tied_copied_not_resident) {
  check_released(TENSOR_TYPE_F16, "mem_f16_tied", true);
}

/* F16: matrices copied into huge pages (bind_copy), vectors copied. */
TEST(model_mem_copied_not_resident) {
  check_released(TENSOR_TYPE_F16, "mem_f16", false);
}

/* Pages of a dense decoder's three compute buffers present (-1: pagemap
 * unreadable). */
static long dense_present(int fd, const model_dense_bufs *b) {
  long n = 0;
  const float *bufs[3] = {b->x, b->xn, b->work};
  for (int i = 0; i < 3; i++) {
    long k = present_pages(fd, bufs[i], b->bytes[i]);
    if (k < 0) return -1;
    n += k;
  }
  return n;
}

/* After a step of more than MODEL_TRIM_TOKENS tokens no whole page of the
 * compute buffers (x, xn, the attention/FFN work area) stays resident,
 * while a step of up to that many keeps what it touched; the steps after
 * a release give the logits of a context that never released (steps of
 * 100 tokens) and fault back only what they touch. */
TEST(model_mem_compute_buffers_released_after_long_step) {
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) TEST_SKIP("/proc/self/pagemap cannot be read");
  model_testgen g = model_testgen_small();
  g.n_ctx = 512;
  g.type = g.type_embd = g.type_output = g.type_ffn_down = TENSOR_TYPE_F16;
  char path[512];
  ASSERT_TRUE(ref_write_llama(&g, "mem_trim", path, sizeof path));
  model *m = NULL;
  ASSERT_INT_EQ(model_open(path, &m), 0);
  model_ctx_params cp = model_ctx_default_params();
  cp.n_threads = 2;
  model_ctx *c1 = NULL, *c2 = NULL;
  ASSERT_INT_EQ(model_ctx_new(m, &cp, &c1), 0);
  ASSERT_INT_EQ(model_ctx_new(m, &cp, &c2), 0);
  enum { N = 300 };
  int32_t toks[N + 1];
  for (int i = 0; i <= N; i++) toks[i] = (int32_t)((i * 37 + 11) % g.n_vocab);
  const int64_t V = g.n_vocab;
  float *l1 = malloc((size_t)V * sizeof *l1), *l2 = malloc((size_t)V * sizeof *l2);
  ASSERT_TRUE(l1 && l2);
  const model_dense_bufs *b1 = c1->arch_data;
  /* c1: 100 tokens (kept), then 200 in one step (released) */
  ASSERT_INT_EQ(model_forward(c1, toks, 100, 0, NULL, MODEL_LOGITS_NONE), 0);
  long kept = dense_present(fd, b1);
  ASSERT_INT_EQ(model_forward(c1, toks + 100, 200, 100, NULL, MODEL_LOGITS_NONE), 0);
  long after = dense_present(fd, b1);
  ASSERT_INT_EQ(model_forward(c1, toks + N, 1, N, l1, MODEL_LOGITS_LAST), 0);
  long decode = dense_present(fd, b1);
  printf("    compute buffer pages present: after 100 tokens %ld, after 200 more %ld, after 1 more %ld\n", kept,
         after, decode);
  EXPECT_TRUE(kept > 20);
  EXPECT_INT_EQ(after, 0);
  EXPECT_TRUE(decode > 0 && decode <= kept / 4);
  /* c2: steps of 100, never released */
  for (int i = 0; i < N; i += 100) ASSERT_INT_EQ(model_forward(c2, toks + i, 100, i, NULL, MODEL_LOGITS_NONE), 0);
  EXPECT_TRUE(dense_present(fd, c2->arch_data) > 20);
  ASSERT_INT_EQ(model_forward(c2, toks + N, 1, N, l2, MODEL_LOGITS_LAST), 0);
  double e = ref_nmse(l1, l2, (size_t)V);
  printf("    next token after the release vs never released: nmse %.3g\n", e);
  EXPECT_TRUE(e < 1e-10);
  free(l1);
  free(l2);
  model_ctx_free(c1);
  model_ctx_free(c2);
  model_free(m);
  close(fd);
  unlink(path);
}
