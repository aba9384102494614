/*
 * test_kernels_xf.c - F32, F16 and BF16 weights packed as float panels
 * (packed_f.c: groups of 32 rows, column-major) and multiplied by
 * kern_matmul_packed / kern_matmul_multi.
 *
 * The layout fixes each (row, token) result to acc = fmaf(w, x, acc) over
 * the columns in order from +0 (kernels_impl.h), so the expected value is
 * that plain C loop over the reference's dequantized weights: every result
 * must equal it bit for bit, one token (decode's kernel) or many (the
 * panel kernel), on one thread or a pool. A row, column or padding mix-up
 * changes the sum by far more than a rounding. Shapes: row counts around
 * the 32-row group (1, 31, 33, 70), 1..300 columns, 1..30 tokens (partial
 * 12-token calls). Weights include F16 subnormals, -0 and large exponents.
 * Only variants with panel kernels pack this way (AVX-512 and AVX2);
 * elsewhere the tests skip and say so.
 */
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "base/err.h"
#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "kernels/packed_f.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"
#include "test.h"

static uint64_t xt_rng = 0x243f6a8885a308d3ull;
static uint32_t xt_u32(void) {
  xt_rng ^= xt_rng << 13;
  xt_rng ^= xt_rng >> 7;
  xt_rng ^= xt_rng << 17;
  return (uint32_t)(xt_rng >> 32);
}
static float xt_rand(void) { return (float)((double)xt_u32() / 4294967296.0 * 2.0 - 1.0); } /* [-1, 1) */

struct xt_case {
  int type;
  int64_t n_rows, n_cols, n_tokens;
  size_t row_bytes;
  uint8_t *W; /* GGUF rows */
  float *wd;  /* the same, dequantized by the reference */
  float *x;   /* n_tokens x n_cols */
};

static void xt_free(struct xt_case *c) {
  free(c->W);
  free(c->wd);
  free(c->x);
}

/* One weight element of type at e from v; every 97th an F16 subnormal
 * (bits 0x0001..0x03ff) or -0, every 89th a large magnitude. */
static void xt_put(int type, uint8_t *e, float v, int64_t i) {
  if (type == TENSOR_TYPE_F32) {
    memcpy(e, &v, 4);
    return;
  }
  uint16_t h;
  if (type == TENSOR_TYPE_F16) {
    h = f32_to_fp16(i % 89 == 5 ? v * 3000.0f : v);
    if (i % 97 == 3) h = (uint16_t)(i % 2 ? 0x8000u : (xt_u32() & 0x3ffu) | 1u);
  } else { /* BF16: the top half of the f32 bits (truncated) */
    uint32_t b;
    float w = i % 89 == 5 ? v * 1e20f : v;
    memcpy(&b, &w, 4);
    h = (uint16_t)(b >> 16);
  }
  memcpy(e, &h, 2);
}

static int xt_init(struct xt_case *c, int type, int64_t n_rows, int64_t n_cols, int64_t n_tokens) {
  memset(c, 0, sizeof *c);
  c->type = type;
  c->n_rows = n_rows;
  c->n_cols = n_cols;
  c->n_tokens = n_tokens;
  if (tensor_type_row_bytes((uint32_t)type, n_cols, &c->row_bytes)) return -1;
  c->W = malloc(c->row_bytes * (size_t)n_rows);
  c->wd = malloc(sizeof(float) * (size_t)(n_rows * n_cols));
  c->x = malloc(sizeof(float) * (size_t)(n_tokens * n_cols));
  if (!c->W || !c->wd || !c->x) return -1;
  const size_t es = c->row_bytes / (size_t)n_cols;
  for (int64_t r = 0; r < n_rows; r++) {
    uint8_t *row = c->W + (size_t)r * c->row_bytes;
    for (int64_t i = 0; i < n_cols; i++) xt_put(type, row + es * (size_t)i, xt_rand() * (float)(1 + r % 4), r * n_cols + i);
    if (ref_dequantize_row((uint32_t)type, row, c->wd + r * n_cols, n_cols)) return -1;
  }
  for (int64_t i = 0; i < n_tokens * n_cols; i++) c->x[i] = xt_rand() * (i % 611 == 7 ? 25.0f : 1.0f);
  return 0;
}

/* xt_init, then the weights packed (NULL if either fails). */
static kern_packed *xt_packed(struct xt_case *c, int type, int64_t n_rows, int64_t n_cols, int64_t n_tokens) {
  kern_packed *p = NULL;
  if (xt_init(c, type, n_rows, n_cols, n_tokens) || kern_pack(c->type, c->W, c->n_rows, c->n_cols, &p)) return NULL;
  return p;
}

/* The layout's defined result for (row r, token t). */
static float xt_expect(const struct xt_case *c, int64_t r, int64_t t) {
  float acc = 0.0f;
  for (int64_t k = 0; k < c->n_cols; k++) acc = fmaf(c->wd[r * c->n_cols + k], c->x[t * c->n_cols + k], acc);
  return acc;
}

/* Number of results of y (n_tokens x n_rows) that differ in any bit from
 * xt_expect; the first is reported. */
static int xt_check(const struct xt_case *c, const float *y, const char *what) {
  int bad = 0;
  for (int64_t t = 0; t < c->n_tokens; t++)
    for (int64_t r = 0; r < c->n_rows; r++) {
      float e = xt_expect(c, r, t), got = y[t * c->n_rows + r];
      if (memcmp(&e, &got, sizeof e) != 0) {
        if (!bad)
          test_fail_at(__FILE__, __LINE__, "%s %s rows %lld cols %lld tokens %lld: y[%lld][%lld] = %.9g, fmaf loop %.9g",
                       what, tensor_type_name((uint32_t)c->type), (long long)c->n_rows, (long long)c->n_cols,
                       (long long)c->n_tokens, (long long)t, (long long)r, got, e);
        bad++;
      }
    }
  return bad;
}

/* One shape of type packed and run without a pool and on tp, each result
 * checked bit for bit, with a guard past y; the number of failures (each
 * reported). */
static int xt_one(int type, int64_t n_rows, int64_t n_cols, int64_t n_tokens, thread_pool *tp) {
  struct xt_case c;
  kern_packed *p = xt_packed(&c, type, n_rows, n_cols, n_tokens);
  size_t ny = (size_t)(n_rows * n_tokens);
  float *y = p ? malloc(sizeof(float) * (ny + 1)) : NULL;
  int bad = 0;
  if (!y) {
    test_fail_at(__FILE__, __LINE__, "%s %lld x %lld: no packed weights or no memory", tensor_type_name((uint32_t)type),
                 (long long)n_rows, (long long)n_cols);
    bad = 1;
    goto out;
  }
  if (kern_packed_bytes(p) < c.row_bytes * (size_t)n_rows) {
    test_fail_at(__FILE__, __LINE__, "packed bytes %zu below the GGUF rows'", kern_packed_bytes(p));
    bad++;
  }
  y[ny] = 1234.5f; /* guard: nothing is written past the last row */
  for (int pass = 0; pass < 2; pass++) {
    memset(y, 0xff, sizeof(float) * ny);
    if (kern_matmul_packed(pass ? tp : NULL, p, c.x, n_tokens, y) != 0) {
      test_fail_at(__FILE__, __LINE__, "kern_matmul_packed failed: %s", err_detail());
      bad++;
      continue;
    }
    bad += xt_check(&c, y, pass ? "2 threads" : "no pool");
  }
  if (y[ny] != 1234.5f) {
    test_fail_at(__FILE__, __LINE__, "written past y");
    bad++;
  }
out:
  free(y);
  kern_packed_free(p);
  xt_free(&c);
  return bad;
}

/* True when the running variant lays type out as float panels. */
static bool xt_panels(int type) { return kern_ops_get()->xf[type] != NULL; }

#define NEED_PANELS()                                                                               \
  do {                                                                                              \
    if (!xt_panels(TENSOR_TYPE_F16))                                                                \
      TEST_SKIP("no float-panel kernels on this CPU (AVX-512, AVX2 only): F16/BF16/F32 stay GGUF rows"); \
  } while (0)

static const int xt_types[] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16, TENSOR_TYPE_BF16};

/* Odd shapes, no pool and a 2-thread pool: bit-equal to the fmaf loop. */
TEST(kernels_xf_exact) {
  NEED_PANELS();
  static const int64_t rows[] = {1, 31, 33, 70};
  static const int64_t cols[] = {1, 2, 17, 64, 300};
  static const int64_t toks[] = {1, 2, 5, 8, 12, 13, 30};
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  /* the best variant, then the AVX2 one where the best is AVX-512 (each
   * has its own panel kernels; both must give the fmaf loop's bits) */
  for (int v = 0; v < 2; v++) {
    if (v == 1 && (strcmp(kern_isa(), "avx2") == 0 || !kern_use_isa("avx2"))) break;
    for (int ti = 0; ti < 3; ti++)
      for (int ri = 0; ri < 4; ri++)
        for (int ci = 0; ci < 5; ci++)
          for (int ki = 0; ki < 7; ki++)
            if (xt_one(xt_types[ti], rows[ri], cols[ci], toks[ki], tp)) goto done;
  }
done:
  kern_use_isa(NULL);
  tpool_free(tp);
}

/* A decode-sized shape through the pool: many groups per thread, the
 * one-token kernel's 4-group passes and remainders, 1 and 25 tokens. */
TEST(kernels_xf_large) {
  NEED_PANELS();
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  for (int ti = 0; ti < 3; ti++)
    for (int64_t nt = 1; nt <= 25; nt += 24) {
      struct xt_case c;
      kern_packed *p = xt_packed(&c, xt_types[ti], 1000, 512, nt);
      ASSERT_TRUE(p != NULL);
      float *y = malloc(sizeof(float) * (size_t)(c.n_rows * nt));
      ASSERT_TRUE(y != NULL);
      EXPECT_INT_EQ(kern_matmul_packed(tp, p, c.x, nt, y), 0);
      xt_check(&c, y, "1000 rows");
      free(y);
      kern_packed_free(p);
      xt_free(&c);
    }
  tpool_free(tp);
}

/* Prompts cut a row into column chunks (packed_f.c, XPF_KC: 2048) whose
 * calls continue each other's sums, over passes of XPF_GB (2) groups: 2
 * and 3 chunks with a short last one, 5 groups (a last pass of one with or
 * without the pool, a short last group), a partial token tile and one past
 * the 12-token tile. A chunk that restarted its sums, or one left out,
 * fails the bit check. Sized for the sanitizer run (-O1 + ASan: 13-15 s;
 * 330 rows and 37 tokens took 106 s there, near the 120 s alarm). */
TEST(kernels_xf_chunks) {
  NEED_PANELS();
  static const int64_t cols[] = {2100, 4200};
  static const int64_t toks[] = {2, 13};
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  for (int ti = 0; ti < 3; ti++)
    for (int ci = 0; ci < 2; ci++)
      for (int ki = 0; ki < 2; ki++)
        if (xt_one(xt_types[ti], 145, cols[ci], toks[ki], tp)) goto done;
done:
  tpool_free(tp);
}

/* The panel kernels' own contract, below the driver: a row cut into two
 * calls, the second continuing with acc, gives the bits of one call (the
 * F16/BF16 converting kernel runs prompts this way when the widening
 * buffer cannot be had); the widening op (xfw) followed by the F32 kernel
 * gives them too; and those bits are the fmaf loop's. 20 real rows of a
 * 32-row group (masked loads and stores), 300 columns cut at 100, 5
 * tokens. */
TEST(kernels_xf_kernel_acc) {
  NEED_PANELS();
  const struct kern_ops *ops = kern_ops_get();
  enum { R = 20, N = 300, T = 5, CUT = 100 };
  for (int ti = 0; ti < 3; ti++) {
    const int type = xt_types[ti];
    struct xt_case c;
    uint8_t *grp = NULL;
    float *wf = NULL;
    ASSERT_INT_EQ(xt_init(&c, type, R, N, T), 0);
    grp = malloc(xpf_group_bytes(type, N));
    wf = malloc(sizeof(float) * KERN_XF_ROWS * N);
    ASSERT_TRUE(grp != NULL && wf != NULL);
    xpf_pack_group(type, c.W, c.row_bytes, R, N, 0, grp);
    const size_t cs = xpf_group_bytes(type, N) / N;
    float y1[T * KERN_XF_ROWS], y2[T * KERN_XF_ROWS], y3[T * KERN_XF_ROWS];
    ops->xf[type](grp, N, c.x, N, T, y1, KERN_XF_ROWS, R, false);
    ops->xf[type](grp, CUT, c.x, N, T, y2, KERN_XF_ROWS, R, false);
    ops->xf[type](grp + cs * CUT, N - CUT, c.x + CUT, N, T, y2, KERN_XF_ROWS, R, true);
    for (int t = 0; t < T; t++) {
      for (int r = 0; r < R; r++) {
        const float e = xt_expect(&c, r, t);
        EXPECT_TRUE(memcmp(&y1[t * KERN_XF_ROWS + r], &e, sizeof e) == 0);
        EXPECT_TRUE(memcmp(&y2[t * KERN_XF_ROWS + r], &e, sizeof e) == 0);
      }
    }
    if (ops->xfw[type]) { /* F16, BF16 */
      ops->xfw[type](grp, N, wf);
      ops->xf[TENSOR_TYPE_F32]((const uint8_t *)wf, N, c.x, N, T, y3, KERN_XF_ROWS, R, false);
      for (int t = 0; t < T; t++)
        EXPECT_TRUE(memcmp(&y3[t * KERN_XF_ROWS], &y1[t * KERN_XF_ROWS], sizeof(float) * R) == 0);
    }
    free(grp);
    free(wf);
    xt_free(&c);
  }
}

/* kern_packed_row_f32 gives back every row as the reference dequantizes
 * the GGUF row (also past 256 columns, its piece size). */
TEST(kernels_xf_row_f32) {
  NEED_PANELS();
  for (int ti = 0; ti < 3; ti++) {
    struct xt_case c;
    kern_packed *p = xt_packed(&c, xt_types[ti], 37, 300, 1);
    ASSERT_TRUE(p != NULL);
    float row[300];
    for (int64_t r = 0; r < c.n_rows; r++) {
      ASSERT_INT_EQ(kern_packed_row_f32(p, r, row), 0);
      EXPECT_TRUE(memcmp(row, c.wd + r * c.n_cols, sizeof row) == 0);
    }
    EXPECT_INT_EQ(kern_packed_row_f32(p, 37, row), ERR_RANGE);
    kern_packed_free(p);
    xt_free(&c);
  }
}

/* Panels packed, then the reference forced or the scalar variant (no panel
 * kernels): ref_vec_dot on the unpacked GGUF rows, bit for bit. */
TEST(kernels_xf_other_paths) {
  NEED_PANELS();
  for (int ti = 0; ti < 3; ti++)
    for (int mode = 0; mode < 2; mode++) {
      struct xt_case c;
      kern_packed *p = xt_packed(&c, xt_types[ti], 35, 40, 3);
      ASSERT_TRUE(p != NULL);
      if (mode == 0)
        kern_force_reference(true);
      else if (!kern_use_isa("scalar")) {
        kern_packed_free(p);
        xt_free(&c);
        continue;
      }
      float y[35 * 3];
      EXPECT_INT_EQ(kern_matmul_packed(NULL, p, c.x, c.n_tokens, y), 0);
      kern_force_reference(false);
      kern_use_isa(NULL);
      for (int64_t t = 0; t < c.n_tokens; t++)
        for (int64_t r = 0; r < c.n_rows; r++) {
          float e;
          ASSERT_INT_EQ(ref_vec_dot((uint32_t)c.type, c.W + (size_t)r * c.row_bytes, c.x + t * c.n_cols, c.n_cols, &e), 0);
          EXPECT_TRUE(memcmp(&e, &y[t * c.n_rows + r], sizeof e) == 0);
        }
      kern_packed_free(p);
      xt_free(&c);
    }
}

/* Panels fused with other parts in one job (a layer's Q, K, V or gate and
 * up): each result equals its separate product, whatever the part order
 * (a panel part after an odd-length 8-row part starts at a 32-row unit). */
TEST(kernels_xf_multi) {
  NEED_PANELS();
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  for (int64_t nt = 1; nt <= 17; nt += 16) {
    struct xt_case a, b, q;
    kern_packed *pa = xt_packed(&a, TENSOR_TYPE_F16, 70, 64, nt), *pb = xt_packed(&b, TENSOR_TYPE_F32, 33, 64, nt);
    ASSERT_TRUE(pa && pb);
    memcpy(b.x, a.x, sizeof(float) * (size_t)(64 * nt));
    /* a Q8_0 part (x8 layout) of 9 rows between them, same activations */
    memset(&q, 0, sizeof q);
    q.n_rows = 9;
    ASSERT_INT_EQ(tensor_type_row_bytes(TENSOR_TYPE_Q8_0, 64, &q.row_bytes), 0);
    uint8_t qw[9 * 68];
    float tmp[64];
    for (int r = 0; r < 9; r++) {
      for (int i = 0; i < 64; i++) tmp[i] = xt_rand();
      ASSERT_INT_EQ(ref_quantize_row(TENSOR_TYPE_Q8_0, tmp, qw + (size_t)r * q.row_bytes, 64), 0);
    }
    kern_packed *pq = NULL;
    ASSERT_INT_EQ(kern_pack(TENSOR_TYPE_Q8_0, qw, 9, 64, &pq), 0);
    float ya[70 * 17], yb[33 * 17], yq[9 * 17], sq[9 * 17];
    kern_mm_part parts[3] = {{.packed = pa, .type = a.type, .n_rows = 70, .y = ya},
                             {.packed = pq, .type = TENSOR_TYPE_Q8_0, .W = qw, .n_rows = 9, .y = yq},
                             {.packed = pb, .type = b.type, .n_rows = 33, .y = yb}};
    EXPECT_INT_EQ(kern_matmul_multi(tp, parts, 3, 64, a.x, nt), 0);
    xt_check(&a, ya, "multi part 1");
    xt_check(&b, yb, "multi part 3");
    if (pq)
      EXPECT_INT_EQ(kern_matmul_packed(tp, pq, a.x, nt, sq), 0);
    else
      EXPECT_INT_EQ(kern_matmul(tp, TENSOR_TYPE_Q8_0, qw, 9, 64, a.x, nt, sq), 0);
    EXPECT_TRUE(memcmp(sq, yq, sizeof(float) * (size_t)(9 * nt)) == 0);
    kern_packed_free(pa);
    kern_packed_free(pb);
    kern_packed_free(pq);
    xt_free(&a);
    xt_free(&b);
  }
  tpool_free(tp);
}
