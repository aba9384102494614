/*
 * test_kernels_packed.c - weights repacked by kern_pack and multiplied by
 * kern_matmul_packed, against independent expectations.
 *
 * Expected values come from the reference kernels only: a double product of
 * the weights dequantized by ref_dequantize_row (with the 8-bit activation
 * tolerance test_kernels.c derives), ref_vec_dot for the forced reference
 * path, and the plain kern_matmul for a much tighter check: both quantize
 * the activations identically and their per-block integer sums are exact,
 * so they may differ only by f32 rounding of the block sums' accumulation
 * (<= 1e-5 of sum |w x|). A wrong nibble, row or scale order breaks that by
 * orders of magnitude. Shapes: row counts that are not multiples of the
 * 8-row groups, 1..7 blocks, 1..17 tokens. The K-quants (Q4_K, Q6_K) run the
 * same checks on blocks of 256 columns (their activations are quantized
 * in blocks of 256, which the tolerance follows).
 */
#include <math.h>
#include <stdlib.h>

#include "base/err.h"
#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"
#include "test.h"

/* Columns per weight block, which is also the activation block of the
 * packed types (Q8_K-style 256 for the K-quants, 32 otherwise). */
static int64_t kp_blk(int type) { return type == TENSOR_TYPE_Q4_K || type == TENSOR_TYPE_Q6_K ? 256 : 32; }

static uint64_t kp_rng = 0x9e3779b97f4a7c15ull;
static float kp_rand(void) { /* uniform in [-1, 1) */
  kp_rng ^= kp_rng << 13;
  kp_rng ^= kp_rng >> 7;
  kp_rng ^= kp_rng << 17;
  return (float)((double)(kp_rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

struct kp_case {
  int type;
  int64_t n_rows, n_cols, n_tokens;
  size_t row_bytes;
  uint8_t *W; /* n_rows GGUF rows */
  float *wd;  /* the same dequantized by the reference */
  float *x;   /* n_tokens x n_cols, a few outliers */
};

static void kp_free(struct kp_case *c) {
  free(c->W);
  free(c->wd);
  free(c->x);
}

static int kp_init(struct kp_case *c, int type, int64_t n_rows, int64_t n_cols, int64_t n_tokens) {
  memset(c, 0, sizeof *c);
  c->type = type;
  c->n_rows = n_rows;
  c->n_cols = n_cols;
  c->n_tokens = n_tokens;
  if (tensor_type_row_bytes((uint32_t)type, n_cols, &c->row_bytes)) return -1;
  c->W = malloc(c->row_bytes * (size_t)n_rows);
  c->wd = malloc(sizeof(float) * (size_t)(n_rows * n_cols));
  c->x = malloc(sizeof(float) * (size_t)(n_tokens * n_cols));
  float *tmp = malloc(sizeof(float) * (size_t)n_cols);
  int rc = (!c->W || !c->wd || !c->x || !tmp) ? -1 : 0;
  for (int64_t r = 0; r < n_rows && !rc; r++) {
    float scale = 0.1f + (float)(r % 5), offset = r % 3 == 0 ? 0.4f : 0.0f;
    for (int64_t i = 0; i < n_cols; i++) tmp[i] = kp_rand() * scale + offset;
    uint8_t *row = c->W + (size_t)r * c->row_bytes;
    if (ref_quantize_row((uint32_t)type, tmp, row, n_cols)) rc = -1;
    /* -128 is a valid Q8_0 value no quantizer here makes (the sign trick's
     * extreme): put one in every other row */
    if (type == TENSOR_TYPE_Q8_0 && r % 2 == 1) ((block_q8_0 *)row)->qs[5] = -128;
    if (ref_dequantize_row((uint32_t)type, row, c->wd + r * n_cols, n_cols)) rc = -1;
  }
  for (int64_t i = 0; !rc && i < n_tokens * n_cols; i++) c->x[i] = kp_rand() * (i % 611 == 7 ? 25.0f : 1.0f);
  free(tmp);
  return rc;
}

/* sum_j |w_j x_j| for (row r, token t). */
static double kp_abs(const struct kp_case *c, int64_t r, int64_t t) {
  double s = 0;
  for (int64_t i = 0; i < c->n_cols; i++) s += fabs((double)c->wd[r * c->n_cols + i] * c->x[t * c->n_cols + i]);
  return s;
}

/* y against the double product with the 8-bit activation bound (blocks of
 * kp_blk); returns the number of elements out of tolerance. */
static int kp_check_double(const struct kp_case *c, const float *y, const char *what) {
  int bad = 0;
  for (int64_t t = 0; t < c->n_tokens; t++)
    for (int64_t r = 0; r < c->n_rows; r++) {
      const float *w = c->wd + r * c->n_cols, *x = c->x + t * c->n_cols;
      double ref = 0, qerr = 0, sum_x = 0, wmax = 0;
      for (int64_t i = 0; i < c->n_cols; i++) {
        ref += (double)w[i] * x[i];
        sum_x += fabs((double)x[i]);
        if (fabs(w[i]) > wmax) wmax = fabs(w[i]);
      }
      const int64_t ab = kp_blk(c->type);
      for (int64_t b = 0; b < c->n_cols; b += ab) {
        double amax = 0, ws = 0;
        for (int64_t i = b; i < b + ab; i++) {
          if (fabs(x[i]) > amax) amax = fabs(x[i]);
          ws += fabs(w[i]);
        }
        qerr += ws * amax / 254.0;
      }
      double tol = qerr * (1 + 1e-5) + 1e-5 * kp_abs(c, r, t) + 1e-5 * sum_x * wmax + 1e-30;
      double got = y[t * c->n_rows + r];
      if (!(fabs(got - ref) <= tol)) {
        if (!bad)
          test_fail_at(__FILE__, __LINE__, "%s rows %lld cols %lld tokens %lld: y[%lld][%lld] = %.9g, expected %.9g (tol %.3g)",
                       what, (long long)c->n_rows, (long long)c->n_cols, (long long)c->n_tokens, (long long)t,
                       (long long)r, got, ref, tol);
        bad++;
      }
    }
  return bad;
}

/* True when this CPU packs type (x86 with AVX2 today). */
static bool kp_packs(int type) {
  kern_packed *p = NULL;
  uint8_t w[210 * 8] = {0}; /* 8 rows of one block of the largest packed type (Q6_K) */
  if (kern_pack(type, w, 8, kp_blk(type), &p) || !p) return false;
  kern_packed_free(p);
  return true;
}

#define NEED_PACK(type)                                                        \
  do {                                                                         \
    if (!kp_packs(type)) TEST_SKIP("no packed layout for this type on this CPU"); \
  } while (0)

/* Odd shapes on a 2-thread pool: against the double product and, tightly,
 * against the plain kern_matmul on the same rows. */
static void kp_shapes(int type, bool all_tokens) {
  static const int64_t rows[] = {1, 3, 7, 8, 9, 17, 64, 131};
  static const int64_t blocks[] = {1, 2, 3, 7};
  static const int64_t toks[] = {1, 2, 3, 4, 5, 9, 17};
  const int n_toks = all_tokens ? 17 : 7;
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  for (int ri = 0; ri < 8; ri++)
    for (int bi = 0; bi < 4; bi++)
      for (int ki = 0; ki < n_toks; ki++) {
        struct kp_case c;
        if (kp_init(&c, type, rows[ri], kp_blk(type) * blocks[bi], all_tokens ? ki + 1 : toks[ki])) {
          kp_free(&c);
          ASSERT_TRUE(!"setup");
        }
        kern_packed *p = NULL;
        ASSERT_INT_EQ(kern_pack(c.type, c.W, c.n_rows, c.n_cols, &p), 0);
        ASSERT_TRUE(p != NULL);
        size_t ny = (size_t)(c.n_rows * c.n_tokens);
        float *y = malloc(sizeof(float) * ny), *yp = malloc(sizeof(float) * ny);
        ASSERT_TRUE(y && yp);
        EXPECT_INT_EQ(kern_matmul_packed(tp, p, c.x, c.n_tokens, yp), 0);
        EXPECT_INT_EQ(kern_matmul(tp, c.type, c.W, c.n_rows, c.n_cols, c.x, c.n_tokens, y), 0);
        int bad = kp_check_double(&c, yp, tensor_type_name((uint32_t)type));
        for (int64_t t = 0; t < c.n_tokens && !bad; t++)
          for (int64_t r = 0; r < c.n_rows && !bad; r++) {
            double a = y[t * c.n_rows + r], b = yp[t * c.n_rows + r], tol = 1e-5 * kp_abs(&c, r, t) + 1e-30;
            if (!(fabs(a - b) <= tol)) {
              test_fail_at(__FILE__, __LINE__, "rows %lld cols %lld tokens %lld: packed y[%lld][%lld] = %.9g, plain %.9g",
                           (long long)c.n_rows, (long long)c.n_cols, (long long)c.n_tokens, (long long)t,
                           (long long)r, b, a);
              bad = 1;
            }
          }
        free(y);
        free(yp);
        kern_packed_free(p);
        kp_free(&c);
        if (bad) goto done;
      }
done:
  tpool_free(tp);
}

/* kp_shapes under every kernel variant this CPU runs (on an AVX-512
 * machine both the AVX-512 and the AVX2 tiles), then the best again. */
static void kp_shapes_each_isa(int type, bool all_tokens) {
  static const char *const isas[] = {"avx512-vnni", "avx2", "neon"};
  for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++)
    if (kern_use_isa(isas[i])) kp_shapes(type, all_tokens);
  kern_use_isa(NULL);
}

TEST(kernels_packed_q4_0_shapes) {
  NEED_PACK(TENSOR_TYPE_Q4_0);
  kp_shapes_each_isa(TENSOR_TYPE_Q4_0, false);
}

TEST(kernels_packed_q5_0_shapes) {
  NEED_PACK(TENSOR_TYPE_Q5_0);
  kp_shapes_each_isa(TENSOR_TYPE_Q5_0, false);
}

TEST(kernels_packed_q8_0_shapes) {
  NEED_PACK(TENSOR_TYPE_Q8_0);
  kp_shapes_each_isa(TENSOR_TYPE_Q8_0, false);
}

/* Every token count 1..17 (whole 8-token tiles, a partial one, both). */
TEST(kernels_packed_q4_k_shapes) {
  NEED_PACK(TENSOR_TYPE_Q4_K);
  kp_shapes_each_isa(TENSOR_TYPE_Q4_K, true);
}

TEST(kernels_packed_q6_k_shapes) {
  NEED_PACK(TENSOR_TYPE_Q6_K);
  kp_shapes_each_isa(TENSOR_TYPE_Q6_K, true);
}

/* Weight e (0..31) of block b of a GGUF row of the x8 types, minus the
 * type's offset: the integer the kernels multiply. */
static int kp_qw(int type, const uint8_t *row, int64_t b, int e) {
  if (type == TENSOR_TYPE_Q8_0) return ((const block_q8_0 *)row)[b].qs[e];
  if (type == TENSOR_TYPE_Q4_0) {
    const block_q4_0 *k = (const block_q4_0 *)row + b;
    return (e < 16 ? k->qs[e] & 15 : k->qs[e - 16] >> 4) - 8;
  }
  const block_q5_0 *k = (const block_q5_0 *)row + b;
  uint32_t qh = (uint32_t)k->qh[0] | (uint32_t)k->qh[1] << 8 | (uint32_t)k->qh[2] << 16 | (uint32_t)k->qh[3] << 24;
  int lo = e < 16 ? k->qs[e] & 15 : k->qs[e - 16] >> 4;
  return (lo | (int)((qh >> e) & 1) << 4) - 16;
}

/* kern_matmul_packed of W (n_rows x n_cols of an x8 type) on a 2-thread
 * pool against the definition the x8 tiles implement, bit for bit: x
 * quantized by the portable kern_quant_q8_c (the SIMD quantizers equal it,
 * test_kernels.c), the exact integer sum of each block, then acc =
 * fmaf(sum, d_w * d_x, acc) block after block. Returns the mismatches. */
static int kp_exact(thread_pool *tp, int type, const uint8_t *W, size_t rb, int64_t n_rows, int64_t n_cols,
                    const float *x, int64_t n_tokens) {
  const int64_t nb = n_cols / 32;
  kern_block_q8 *a = malloc(sizeof *a * (size_t)(nb * n_tokens));
  float *y = malloc(sizeof(float) * (size_t)(n_rows * n_tokens));
  kern_packed *p = NULL;
  if (!a || !y || kern_pack(type, W, n_rows, n_cols, &p) || !p) {
    free(a);
    free(y);
    return -1;
  }
  for (int64_t t = 0; t < n_tokens; t++) kern_quant_q8_c(x + t * n_cols, a + t * nb, n_cols);
  int bad = kern_matmul_packed(tp, p, x, n_tokens, y) ? 1 : 0;
  for (int64_t t = 0; t < n_tokens; t++)
    for (int64_t r = 0; r < n_rows; r++) {
      const uint8_t *row = W + (size_t)r * rb;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; b++) {
        const kern_block_q8 *xb = a + t * nb + b;
        int32_t isum = 0;
        for (int e = 0; e < 32; e++) isum += kp_qw(type, row, b, e) * xb->qs[e];
        uint16_t dh;
        memcpy(&dh, row + (size_t)b * (rb / (size_t)nb), 2); /* every x8 block starts with its f16 d */
        float dwx = fp16_to_f32(dh) * xb->d;
        acc = fmaf((float)isum, dwx, acc);
      }
      float got = y[t * n_rows + r];
      if (memcmp(&got, &acc, sizeof acc) != 0) {
        if (!bad)
          test_fail_at(__FILE__, __LINE__, "%s %lld x %lld, %lld tokens: y[%lld][%lld] = %.9g, expected %.9g",
                       tensor_type_name((uint32_t)type), (long long)n_rows, (long long)n_cols,
                       (long long)n_tokens, (long long)t, (long long)r, got, acc);
        bad++;
      }
    }
  kern_packed_free(p);
  free(a);
  free(y);
  return bad;
}

/* The x8 tiles (Q4_0, Q5_0, Q8_0) bit for bit against their definition,
 * on random rows of odd shapes and on the extremes: rows of all-largest
 * and all-smallest q against activations of one sign, where a plain
 * 16-bit sum of q x would pass 32767 (Q5_0: 16 x 31 x 127 per lane; the
 * kernel starts each lane at its offset correction instead). A tail that
 * rounds differently (mul + add for the FMA) fails here while the
 * tolerance-based tests pass. */
TEST(kernels_packed_x8_exact) {
  static const int types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q8_0};
  static const int64_t rows[] = {8, 13, 24}, blocks[] = {1, 3, 7}, toks[] = {1, 3, 8, 11};
  NEED_PACK(TENSOR_TYPE_Q4_0);
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  for (int ti = 0; ti < 3; ti++) {
    if (!kp_packs(types[ti])) continue;
    for (int ri = 0; ri < 3; ri++)
      for (int bi = 0; bi < 3; bi++)
        for (int ki = 0; ki < 4; ki++) {
          struct kp_case c;
          ASSERT_INT_EQ(kp_init(&c, types[ti], rows[ri], 32 * blocks[bi], toks[ki]), 0);
          int bad = kp_exact(tp, c.type, c.W, c.row_bytes, c.n_rows, c.n_cols, c.x, c.n_tokens);
          kp_free(&c);
          EXPECT_INT_EQ(bad, 0);
          if (bad) goto done;
        }
    /* extremes: 16 rows x 2 blocks; row r % 4: 0 all largest q, 1 all
     * smallest, 2 alternating, 3 random; tokens: all +1, all -1, +-1 in
     * pairs, random */
    struct kp_case c;
    ASSERT_INT_EQ(kp_init(&c, types[ti], 16, 64, 4), 0);
    for (int64_t r = 0; r < 16; r++)
      for (int64_t b = 0; b < 2 && r % 4 != 3; b++) {
        uint8_t *blk = c.W + (size_t)r * c.row_bytes + (size_t)b * (c.row_bytes / 2);
        uint16_t d = f32_to_fp16(0.25f + 0.125f * (float)r);
        memcpy(blk, &d, 2);
        for (int e = 0; e < 32; e++) {
          int hi = r % 4 == 0 || (r % 4 == 2 && e % 2 == 0); /* largest q, else smallest */
          if (types[ti] == TENSOR_TYPE_Q8_0) {
            ((block_q8_0 *)blk)->qs[e] = (int8_t)(hi ? 127 : -128);
          } else if (types[ti] == TENSOR_TYPE_Q4_0) {
            uint8_t *q = ((block_q4_0 *)blk)->qs + e % 16;
            *q = (uint8_t)(e < 16 ? (*q & 0xf0) | (hi ? 15 : 0) : (*q & 0x0f) | (hi ? 0xf0 : 0));
          } else {
            block_q5_0 *k = (block_q5_0 *)blk;
            uint8_t *q = k->qs + e % 16;
            *q = (uint8_t)(e < 16 ? (*q & 0xf0) | (hi ? 15 : 0) : (*q & 0x0f) | (hi ? 0xf0 : 0));
            k->qh[e / 8] = (uint8_t)((k->qh[e / 8] & ~(1u << (e % 8))) | (unsigned)hi << (e % 8));
          }
        }
      }
    for (int64_t i = 0; i < 64; i++) {
      c.x[i] = 1.0f;
      c.x[64 + i] = -1.0f;
      c.x[128 + i] = (i / 2) % 2 ? -1.0f : 1.0f;
    }
    int bad = kp_exact(tp, c.type, c.W, c.row_bytes, 16, 64, c.x, 4);
    kp_free(&c);
    EXPECT_INT_EQ(bad, 0);
    if (bad) break;
  }
done:
  tpool_free(tp);
}

/* Bit-identical results for 1, 2, 3 threads and for a token alone vs in a
 * batch of 37 (the property the engine's batching relies on). */
static void kp_deterministic(int type) {
  thread_pool *tps[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) ASSERT_INT_EQ(tpool_new(i + 1, &tps[i]), 0);
  struct kp_case c;
  ASSERT_INT_EQ(kp_init(&c, type, 133, 5 * kp_blk(type), 37), 0);
  kern_packed *p = NULL;
  ASSERT_INT_EQ(kern_pack(c.type, c.W, c.n_rows, c.n_cols, &p), 0);
  ASSERT_TRUE(p != NULL);
  size_t ny = (size_t)(c.n_rows * c.n_tokens);
  float *y[3], *y1 = malloc(sizeof(float) * (size_t)c.n_rows);
  for (int i = 0; i < 3; i++) {
    y[i] = malloc(sizeof(float) * ny);
    ASSERT_INT_EQ(kern_matmul_packed(tps[i], p, c.x, c.n_tokens, y[i]), 0);
  }
  EXPECT_INT_EQ(kp_check_double(&c, y[0], "1 thread"), 0);
  EXPECT_MEM_EQ(y[0], y[1], ny * sizeof(float));
  EXPECT_MEM_EQ(y[0], y[2], ny * sizeof(float));
  for (int64_t t = 0; t < c.n_tokens; t += 3) {
    ASSERT_INT_EQ(kern_matmul_packed(NULL, p, c.x + t * c.n_cols, 1, y1), 0);
    EXPECT_MEM_EQ(y1, y[0] + t * c.n_rows, (size_t)c.n_rows * sizeof(float));
  }
  for (int i = 0; i < 3; i++) free(y[i]);
  free(y1);
  kern_packed_free(p);
  kp_free(&c);
  for (int i = 0; i < 3; i++) tpool_free(tps[i]);
}

TEST(kernels_packed_deterministic) {
  NEED_PACK(TENSOR_TYPE_Q4_0);
  kp_deterministic(TENSOR_TYPE_Q4_0);
  NEED_PACK(TENSOR_TYPE_Q8_0);
  kp_deterministic(TENSOR_TYPE_Q8_0);
  NEED_PACK(TENSOR_TYPE_Q5_0);
  kp_deterministic(TENSOR_TYPE_Q5_0);
  NEED_PACK(TENSOR_TYPE_Q4_K);
  kp_deterministic(TENSOR_TYPE_Q4_K);
  NEED_PACK(TENSOR_TYPE_Q6_K);
  kp_deterministic(TENSOR_TYPE_Q6_K);
}

/* With the reference forced: kern_pack declines, and weights packed before
 * go through ref_vec_dot on the unpacked rows (bit for bit). */
static void kp_reference(int type) {
  struct kp_case c;
  ASSERT_INT_EQ(kp_init(&c, type, 21, 3 * kp_blk(type), 4), 0);
  kern_packed *p = NULL;
  ASSERT_INT_EQ(kern_pack(c.type, c.W, c.n_rows, c.n_cols, &p), 0);
  ASSERT_TRUE(p != NULL);
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  kern_force_reference(true);
  kern_packed *q = (kern_packed *)1;
  EXPECT_INT_EQ(kern_pack(c.type, c.W, c.n_rows, c.n_cols, &q), 0);
  EXPECT_TRUE(q == NULL);
  float y[21 * 4];
  EXPECT_INT_EQ(kern_matmul_packed(tp, p, c.x, c.n_tokens, y), 0);
  kern_force_reference(false);
  for (int64_t t = 0; t < c.n_tokens; t++)
    for (int64_t r = 0; r < c.n_rows; r++) {
      float e;
      ASSERT_INT_EQ(ref_vec_dot((uint32_t)c.type, c.W + (size_t)r * c.row_bytes, c.x + t * c.n_cols, c.n_cols, &e), 0);
      EXPECT_TRUE(memcmp(&e, &y[t * c.n_rows + r], sizeof e) == 0);
    }
  tpool_free(tp);
  kern_packed_free(p);
  kp_free(&c);
}

TEST(kernels_packed_reference_path) {
  NEED_PACK(TENSOR_TYPE_Q4_0);
  kp_reference(TENSOR_TYPE_Q4_0);
  NEED_PACK(TENSOR_TYPE_Q8_0);
  kp_reference(TENSOR_TYPE_Q8_0);
  NEED_PACK(TENSOR_TYPE_Q5_0);
  kp_reference(TENSOR_TYPE_Q5_0);
  NEED_PACK(TENSOR_TYPE_Q4_K);
  kp_reference(TENSOR_TYPE_Q4_K);
  NEED_PACK(TENSOR_TYPE_Q6_K);
  kp_reference(TENSOR_TYPE_Q6_K);
}

/* Types without a packed layout, bad sizes, non-finite activations. */
TEST(kernels_packed_edges) {
  kern_packed *p = (kern_packed *)1;
  uint8_t w[512] = {0};
  EXPECT_INT_EQ(kern_pack(TENSOR_TYPE_Q5_K, w, 1, 256, &p), 0);
  EXPECT_TRUE(p == NULL);
  p = (kern_packed *)1;
  EXPECT_INT_EQ(kern_pack(TENSOR_TYPE_Q4_1, w, 2, 32, &p), 0);
  EXPECT_TRUE(p == NULL);
  EXPECT_INT_EQ(kern_matmul_packed(NULL, NULL, NULL, 1, NULL), ERR_INVALID);
  if (!kp_packs(TENSOR_TYPE_Q4_0)) return;
  EXPECT_INT_EQ(kern_pack(TENSOR_TYPE_Q4_0, w, 1, 33, &p), ERR_RANGE);
  struct kp_case c;
  ASSERT_INT_EQ(kp_init(&c, TENSOR_TYPE_Q4_0, 11, 64, 3), 0);
  ASSERT_INT_EQ(kern_pack(c.type, c.W, c.n_rows, c.n_cols, &p), 0);
  ASSERT_TRUE(p != NULL);
  EXPECT_TRUE(kern_packed_bytes(p) >= c.row_bytes * (size_t)c.n_rows);
  float y[11 * 3];
  EXPECT_INT_EQ(kern_matmul_packed(NULL, p, c.x, -1, y), ERR_RANGE);
  EXPECT_INT_EQ(kern_matmul_packed(NULL, p, c.x, 0, y), 0);
  c.x[64 + 40] = NAN; /* token 1, second block */
  c.x[2 * 64 + 3] = INFINITY;
  EXPECT_INT_EQ(kern_matmul_packed(NULL, p, c.x, 3, y), 0);
  for (int r = 0; r < 11; r++) {
    EXPECT_TRUE(isfinite(y[r]));
    EXPECT_FALSE(isfinite(y[11 + r]));
    EXPECT_FALSE(isfinite(y[22 + r]));
  }
  kern_packed_free(p);
  kp_free(&c);
}

struct kp_ranges {
  const uint8_t *next; /* where the next slice must start */
  int calls;
  bool in_order;
};

static void kp_done(const void *src, size_t bytes, void *ctx) {
  struct kp_ranges *r = ctx;
  if ((const uint8_t *)src != r->next || bytes == 0) r->in_order = false;
  r->next = (const uint8_t *)src + bytes;
  r->calls++;
}

/* kern_pack_ex reports the source rows it has copied: in order, each byte
 * once, the whole tensor (what the model relies on to release pages), and
 * packs the same as kern_pack. */
TEST(kernels_packed_progress) {
  NEED_PACK(TENSOR_TYPE_Q8_0);
  struct kp_case c;
  ASSERT_INT_EQ(kp_init(&c, TENSOR_TYPE_Q8_0, 2 * 1024 + 13, 32, 2), 0);
  struct kp_ranges r = {c.W, 0, true};
  kern_packed *p = NULL, *q = NULL;
  ASSERT_INT_EQ(kern_pack_ex(c.type, c.W, c.n_rows, c.n_cols, kp_done, &r, &p), 0);
  ASSERT_TRUE(p != NULL);
  EXPECT_TRUE(r.in_order);
  EXPECT_TRUE(r.next == c.W + c.row_bytes * (size_t)c.n_rows);
  EXPECT_INT_EQ(r.calls, 3); /* 1024 + 1024 + 13 rows */
  ASSERT_INT_EQ(kern_pack(c.type, c.W, c.n_rows, c.n_cols, &q), 0);
  float y1[2 * (2 * 1024 + 13)], y2[2 * (2 * 1024 + 13)];
  EXPECT_INT_EQ(kern_matmul_packed(NULL, p, c.x, 2, y1), 0);
  EXPECT_INT_EQ(kern_matmul_packed(NULL, q, c.x, 2, y2), 0);
  EXPECT_MEM_EQ(y1, y2, sizeof y1);
  EXPECT_INT_EQ(kp_check_double(&c, y1, "progress"), 0);
  kern_packed_free(p);
  kern_packed_free(q);
  kp_free(&c);
}

/* kern_packed_row_f32 (embedding lookups of a tied token_embd kept only
 * packed) gives exactly ref_dequantize_row of the original GGUF row, for
 * rows in every position of a group and rows long enough to be unpacked in
 * several pieces; rows out of range are refused. */
TEST(kernels_packed_row_f32) {
  static const int types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q6_K};
  int tested = 0;
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
    int type = types[ti];
    if (!kp_packs(type)) continue;
    const int64_t n_cols = kp_blk(type) == 256 ? 256 * 11 : 32 * 70, n_rows = 13;
    struct kp_case c;
    ASSERT_INT_EQ(kp_init(&c, type, n_rows, n_cols, 1), 0);
    kern_packed *p = NULL;
    ASSERT_INT_EQ(kern_pack(type, c.W, n_rows, n_cols, &p), 0);
    ASSERT_TRUE(p != NULL);
    float *got = malloc(sizeof(float) * (size_t)n_cols);
    for (int64_t r = 0; r < n_rows; r++) {
      ASSERT_INT_EQ(kern_packed_row_f32(p, r, got), 0);
      if (memcmp(got, c.wd + r * n_cols, sizeof(float) * (size_t)n_cols) != 0) {
        test_fail_at(__FILE__, __LINE__, "%s row %lld differs from the GGUF row", tensor_type_name((uint32_t)type),
                     (long long)r);
        break;
      }
    }
    EXPECT_INT_EQ(kern_packed_row_f32(p, n_rows, got), ERR_RANGE);
    EXPECT_INT_EQ(kern_packed_row_f32(p, -1, got), ERR_RANGE);
    free(got);
    kern_packed_free(p);
    kp_free(&c);
    tested++;
  }
  if (!tested) TEST_SKIP("no packed layout on this CPU");
}

/* The AVX-512 packed tiles (kern_x512_q4x8.h: two row groups per zmm
 * through ptile2, the one-group ymm tile for a lone group) against the
 * AVX2 tiles, bit for bit, on the same packed weights: 1..8 tokens (one
 * call each, so every nt of the tile), 1, 2, 3 and 7 blocks, row counts
 * that pair every group, leave one group alone, or end in a partial group,
 * on one thread and on two.
 * Skipped where the CPU lacks either variant. */
TEST(kernels_packed_x8_avx512_vs_avx2) {
  static const int types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q5_0};
  static const int64_t rows[] = {8, 13, 16, 24, 33, 40, 131, 200}, blocks[] = {1, 2, 3, 7};
  if (!kern_use_isa("avx2") || !kern_use_isa("avx512-vnni")) {
    kern_use_isa(NULL);
    TEST_SKIP("needs both the AVX-512 VNNI and the AVX2 kernels");
  }
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  int bad = 0;
  /* twice: Q5_0's GFNI tiles (where the CPU has GFNI), then with
   * PARLEY_NO_GFNI the plain AVX-512 ones (read when a variant is filled:
   * kern_use_isa refills), so both paths are tested on a GFNI machine */
  for (int no_gfni = 0; no_gfni < 2 && !bad; no_gfni++)
  for (int ti = 0; ti < 3 && !bad; ti++)
    for (int ri = 0; ri < 8 && !bad; ri++)
      for (int bi = 0; bi < 4 && !bad; bi++) {
        if (no_gfni) setenv("PARLEY_NO_GFNI", "1", 1);
        struct kp_case c;
        ASSERT_INT_EQ(kp_init(&c, types[ti], rows[ri], 32 * blocks[bi], 8), 0);
        kern_packed *p = NULL;
        ASSERT_INT_EQ(kern_pack(c.type, c.W, c.n_rows, c.n_cols, &p), 0);
        ASSERT_TRUE(p != NULL);
        float ya[8 * 200], yb[8 * 200];
        for (int64_t nt = 1; nt <= 8 && !bad; nt++) {
          ASSERT_TRUE(kern_use_isa("avx512-vnni"));
          /* one thread (odd group counts: a lone last group) or the pool */
          EXPECT_INT_EQ(kern_matmul_packed(nt % 2 ? NULL : tp, p, c.x, nt, ya), 0);
          ASSERT_TRUE(kern_use_isa("avx2"));
          EXPECT_INT_EQ(kern_matmul_packed(tp, p, c.x, nt, yb), 0);
          if (memcmp(ya, yb, sizeof(float) * (size_t)(nt * c.n_rows)) != 0) {
            test_fail_at(__FILE__, __LINE__, "%s %lld x %lld, %lld tokens%s: AVX-512 and AVX2 tiles differ",
                         tensor_type_name((uint32_t)c.type), (long long)c.n_rows, (long long)c.n_cols,
                         (long long)nt, no_gfni ? " (PARLEY_NO_GFNI)" : "");
            bad = 1;
          }
        }
        kern_packed_free(p);
        kp_free(&c);
      }
  unsetenv("PARLEY_NO_GFNI");
  kern_use_isa(NULL);
  tpool_free(tp);
}

/* The same comparison at the integer extremes: every
 * weight at its lowest or highest code (Q4_0 nibbles 0 and 15, Q5_0 0 and
 * 31, Q8_0 -128 and 127, in row-dependent patterns, so both the low and
 * the high nibbles of a byte take both values) against activations all at
 * +-127 after quantization, one sign per token or alternating by column.
 * Where a tile splits a block sum over accumulators (Q4_0's high nibbles
 * times 16 at 1-2 tokens) these are the largest lanes. Also checked
 * against the double product, so equal-but-wrong variants fail too. */
static void kp_extreme_weights(struct kp_case *c) {
  const size_t bb = c->type == TENSOR_TYPE_Q8_0 ? 34 : c->type == TENSOR_TYPE_Q5_0 ? 22 : 18;
  for (int64_t r = 0; r < c->n_rows; r++)
    for (int64_t b = 0; b < c->n_cols / 32; b++) {
      uint8_t *blk = c->W + (size_t)r * c->row_bytes + bb * (size_t)b;
      const int pat = (int)((r + b) % 4); /* 0: all low, 1: all high, 2, 3: mixed */
      for (size_t i = 2; i < bb; i++) { /* after the f16 scale: Q5_0's qh too */
        uint8_t v = pat == 0 ? 0x00 : pat == 1 ? 0xff : pat == 2 ? 0x0f : 0xf0;
        if (c->type == TENSOR_TYPE_Q8_0) v = pat == 0 ? 0x80 : pat == 1 ? 0x7f : (i % 2 == (size_t)(pat - 2)) ? 0x80 : 0x7f;
        blk[i] = v;
      }
    }
  for (int64_t r = 0; r < c->n_rows; r++)
    ref_dequantize_row((uint32_t)c->type, c->W + (size_t)r * c->row_bytes, c->wd + r * c->n_cols, c->n_cols);
  for (int64_t t = 0; t < c->n_tokens; t++)
    for (int64_t i = 0; i < c->n_cols; i++) {
      const float sg = t % 3 == 0 ? 1.0f : t % 3 == 1 ? -1.0f : (i % 2 ? 1.0f : -1.0f);
      c->x[t * c->n_cols + i] = sg * 0.5f;
    }
}

TEST(kernels_packed_x8_avx512_extremes) {
  static const int types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q5_0};
  static const int64_t rows[] = {8, 16, 24, 40}, blocks[] = {1, 3, 8};
  if (!kern_use_isa("avx2") || !kern_use_isa("avx512-vnni")) {
    kern_use_isa(NULL);
    TEST_SKIP("needs both the AVX-512 VNNI and the AVX2 kernels");
  }
  int bad = 0;
  for (int ti = 0; ti < 3 && !bad; ti++)
    for (int ri = 0; ri < 4 && !bad; ri++)
      for (int bi = 0; bi < 3 && !bad; bi++) {
        struct kp_case c;
        ASSERT_INT_EQ(kp_init(&c, types[ti], rows[ri], 32 * blocks[bi], 8), 0);
        kp_extreme_weights(&c);
        kern_packed *p = NULL;
        ASSERT_INT_EQ(kern_pack(c.type, c.W, c.n_rows, c.n_cols, &p), 0);
        ASSERT_TRUE(p != NULL);
        float ya[8 * 40], yb[8 * 40];
        for (int64_t nt = 1; nt <= 8 && !bad; nt++) {
          ASSERT_TRUE(kern_use_isa("avx512-vnni"));
          EXPECT_INT_EQ(kern_matmul_packed(NULL, p, c.x, nt, ya), 0);
          ASSERT_TRUE(kern_use_isa("avx2"));
          EXPECT_INT_EQ(kern_matmul_packed(NULL, p, c.x, nt, yb), 0);
          if (memcmp(ya, yb, sizeof(float) * (size_t)(nt * c.n_rows)) != 0) {
            test_fail_at(__FILE__, __LINE__, "%s %lld x %lld, %lld tokens (extremes): AVX-512 and AVX2 tiles differ",
                         tensor_type_name((uint32_t)c.type), (long long)c.n_rows, (long long)c.n_cols, (long long)nt);
            bad = 1;
          }
          c.n_tokens = nt;
          if (kp_check_double(&c, ya, "x512 extremes")) bad = 1;
          c.n_tokens = 8;
        }
        kern_packed_free(p);
        kp_free(&c);
      }
  kern_use_isa(NULL);
}

/* ---- AVX-512 packed K-quant tiles against the AVX2 ones
 * kern_x512_qk.h promises the AVX2 tiles' results bit for bit (the same
 * exact integers, then the same float steps). Same packed weights, both
 * variants, memcmp of every output; on random GGUF bytes (every scale and
 * min bit pattern) and on the extremes where a lane's 16-bit partial sum
 * is largest (all q at their maximum against activations of one sign).
 * Skipped unless the CPU runs both variants. */

/* Random GGUF bytes for n_rows rows of type (Q4_K or Q6_K), with finite f16
 * scales; ext: q and scales at their extremes instead. */
static void kx_fill(int type, uint8_t *W, size_t rb, int64_t n_rows, bool ext) {
  for (size_t i = 0; i < rb * (size_t)n_rows; i++) W[i] = ext ? 0xff : (uint8_t)(kp_rand() * 128.0f + 128.0f);
  const size_t bb = type == TENSOR_TYPE_Q4_K ? 144 : 210;
  for (size_t o = 0; o < rb * (size_t)n_rows; o += bb) {
    uint16_t d = f32_to_fp16(0.001f + 0.01f * fabsf(kp_rand())), dm = f32_to_fp16(0.002f * fabsf(kp_rand()));
    if (type == TENSOR_TYPE_Q4_K) {
      memcpy(W + o, &d, 2);
      memcpy(W + o + 2, &dm, 2);
    } else {
      if (ext) memset(W + o + 192, kp_rand() < 0 ? 0x80 : 0x7f, 16); /* scales -128 or 127 */
      memcpy(W + o + 208, &d, 2);
    }
  }
}

static int kx_compare(thread_pool *tp, int type, int64_t n_rows, int64_t nb, int64_t n_tokens, bool ext) {
  const int64_t n_cols = 256 * nb;
  size_t rb;
  if (tensor_type_row_bytes((uint32_t)type, n_cols, &rb)) return -1;
  uint8_t *W = malloc(rb * (size_t)n_rows);
  float *x = malloc(sizeof(float) * (size_t)(n_cols * n_tokens));
  float *y2 = malloc(sizeof(float) * (size_t)(n_rows * n_tokens)), *y5 = malloc(sizeof(float) * (size_t)(n_rows * n_tokens));
  kern_packed *p = NULL;
  int bad = -1;
  if (!W || !x || !y2 || !y5) goto out;
  kx_fill(type, W, rb, n_rows, ext);
  for (int64_t i = 0; i < n_cols * n_tokens; i++) x[i] = ext ? 1.0f + 0.001f * (float)(i % 7) : kp_rand();
  if (ext)
    for (int64_t t = 1; t < n_tokens; t += 2)
      for (int64_t i = 0; i < n_cols; i++) x[t * n_cols + i] = -x[t * n_cols + i]; /* odd tokens all negative */
  if (kern_pack(type, W, n_rows, n_cols, &p) || !p) goto out;
  if (!kern_use_isa("avx2") || kern_matmul_packed(tp, p, x, n_tokens, y2)) goto out;
  if (!kern_use_isa("avx512-vnni") || kern_matmul_packed(tp, p, x, n_tokens, y5)) goto out;
  bad = 0;
  for (int64_t i = 0; i < n_rows * n_tokens; i++)
    if (memcmp(&y2[i], &y5[i], sizeof(float)) != 0) {
      if (!bad)
        test_fail_at(__FILE__, __LINE__, "%s %lld x %lld, %lld tokens%s: y[%lld][%lld] avx512 %.9g, avx2 %.9g",
                     tensor_type_name((uint32_t)type), (long long)n_rows, (long long)n_cols, (long long)n_tokens,
                     ext ? " (extremes)" : "", (long long)(i / n_rows), (long long)(i % n_rows), y5[i], y2[i]);
      bad++;
    }
out:
  kern_use_isa(NULL);
  kern_packed_free(p);
  free(W);
  free(x);
  free(y2);
  free(y5);
  return bad;
}

TEST(kernels_packed_k_x512_vs_avx2) {
  static const int types[] = {TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q6_K};
  static const int64_t rows[] = {1, 8, 13, 24};
  if (!kern_use_isa("avx512-vnni") || !kern_use_isa("avx2")) {
    kern_use_isa(NULL);
    TEST_SKIP("needs both the avx512-vnni and the avx2 variant");
  }
  kern_use_isa(NULL);
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  for (int ti = 0; ti < 2; ti++) {
    if (!kp_packs(types[ti])) continue;
    for (int ext = 0; ext < 2; ext++)
      for (int ri = 0; ri < 4; ri++)
        for (int64_t nb = 1; nb <= 3; nb++)
          for (int64_t nt = 1; nt <= 9; nt++) EXPECT_INT_EQ(kx_compare(tp, types[ti], rows[ri], nb, nt, ext), 0);
  }
  tpool_free(tp);
}

/* kernels_packed_k_x512_vs_avx2 again with PARLEY_NO_GFNI (read when a
 * variant is filled): on a GFNI machine the test above runs Q6_K's GFNI
 * tile, this one the plain AVX-512 one. */
TEST(kernels_packed_k_x512_no_gfni_vs_avx2) {
  static const int64_t rows[] = {1, 13, 24};
  if (!kern_use_isa("avx512-vnni") || !kern_use_isa("avx2")) {
    kern_use_isa(NULL);
    TEST_SKIP("needs both the avx512-vnni and the avx2 variant");
  }
  kern_use_isa(NULL);
  if (!kp_packs(TENSOR_TYPE_Q6_K)) TEST_SKIP("no packed Q6_K on this CPU");
  setenv("PARLEY_NO_GFNI", "1", 1);
  thread_pool *tp = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  for (int ext = 0; ext < 2; ext++)
    for (int ri = 0; ri < 3; ri++)
      for (int64_t nt = 1; nt <= 9; nt += 4) EXPECT_INT_EQ(kx_compare(tp, TENSOR_TYPE_Q6_K, rows[ri], 2, nt, ext), 0);
  tpool_free(tp);
  unsetenv("PARLEY_NO_GFNI");
  kern_use_isa(NULL);
}
