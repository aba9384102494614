/* test_kernels_rect.c - the rectangle kernels (kern_ops.rect: register-
 * blocked F32/F16/BF16 x f32, src/kernels/kern_x86_f16.h) against the
 * one-row tiles, bit for bit: kern_matmul uses a rectangle kernel for 2+
 * tokens and the tile for one (decode), so any difference would make a
 * token's result depend on how many tokens share the call. Odd row counts
 * (R = 1 remainder), token counts that leave groups of 1 and 2, column
 * counts with 8-column and scalar tails, under 256 (handed to the tiles),
 * one k-chunk (whole rows) and past the 512-column k-chunk, the token
 * block (6) and the row sub-block (64 rows). The AVX-512 variant's own
 * kernels (kern_x512_f16.h: 32-column steps, a 16-column and a masked
 * tail, token groups of 6 in blocks of 12) are covered by the same lists:
 * 7, 33, 100 columns (tiles), 271 and 305 (a 16-column step plus masked
 * 15 and 1), 1043 (two k-chunks, 16 + 3 tail), 19 tokens (12 + 6 + 1),
 * 61 and 100 (many token blocks cut near-equal), 9 rows and 131 (past the
 * 64-row sub-block). Then the
 * same through kern_matmul on 1, 2 and 3 threads against each token alone,
 * and against a double-precision product. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"
#include "test.h"

static uint64_t kr_rng = 0x853c49e6748fea9bull;
static float kr_rand(void) { /* uniform in [-1, 1) */
  kr_rng ^= kr_rng >> 12;
  kr_rng ^= kr_rng << 25;
  kr_rng ^= kr_rng >> 27;
  return (float)((double)((kr_rng * 0x2545f4914f6cdd1dull) >> 11) * 0x1.0p-52 - 1.0);
}

static const int kr_types[] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16, TENSOR_TYPE_BF16};

/* Random weights (quantized with the reference) and activations. */
static int kr_make(int type, int64_t nr, int64_t nc, int64_t nt, size_t xs, uint8_t **W, size_t *rb, float **x) {
  if (tensor_type_row_bytes((uint32_t)type, nc, rb)) return -1;
  *W = malloc(*rb * (size_t)nr + 1);
  *x = calloc((size_t)nt, xs + 4);
  float *tmp = malloc(sizeof(float) * (size_t)nc + 4);
  if (!*W || !*x || !tmp) {
    free(tmp);
    return -1;
  }
  for (int64_t r = 0; r < nr; r++) {
    for (int64_t i = 0; i < nc; i++) tmp[i] = kr_rand() * (1.0f + (float)(r % 5));
    if (ref_quantize_row((uint32_t)type, tmp, *W + (size_t)r * *rb, nc)) {
      free(tmp);
      return -1;
    }
  }
  for (int64_t t = 0; t < nt; t++)
    for (int64_t i = 0; i < nc; i++) ((float *)((uint8_t *)*x + (size_t)t * xs))[i] = kr_rand() * (i % 211 == 3 ? 30.0f : 1.0f);
  free(tmp);
  return 0;
}

TEST(kernels_rect_equals_tile) {
  struct kern_ops v[2];
  int n = 0;
  memset(v, 0, sizeof v);
  if (kern_ops_avx512(&v[n])) n++;
  if (kern_ops_avx2(&v[n])) n++;
  static const int64_t rows[] = {1, 2, 3, 7, 9, 66, 131};
  static const int64_t cols[] = {1, 7, 17, 33, 40, 100, 256, 264, 271, 305, 520, 1043};
  static const int64_t toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 19, 61, 100};
  int n_checked = 0;
  for (int vi = 0; vi < n; vi++)
    for (size_t ti = 0; ti < sizeof kr_types / sizeof kr_types[0]; ti++) {
      int type = kr_types[ti];
      ASSERT_TRUE(v[vi].rect[type] != NULL && v[vi].tile[type] != NULL);
      for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
        for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
          int64_t nr = rows[ri], nc = cols[ci], nt_max = 100;
          if (nr > 7 && nc < 256 && nc != 17) continue; /* keep the run short */
          size_t xs = (size_t)nc * 4 + (ci % 2 ? 0 : 36); /* packed and padded token rows */
          uint8_t *W = NULL;
          float *x = NULL;
          size_t rb = 0;
          ASSERT_INT_EQ(kr_make(type, nr, nc, nt_max, xs, &W, &rb, &x), 0);
          size_t ys = (size_t)nr + 3;
          float *y1 = malloc(sizeof(float) * ys * (size_t)nt_max), *y2 = malloc(sizeof(float) * ys * (size_t)nt_max);
          ASSERT_TRUE(y1 && y2);
          for (int64_t t = 0; t < nt_max; t++)
            for (int64_t r = 0; r < nr; r++)
              v[vi].tile[type](W + (size_t)r * rb, nc, (const uint8_t *)x + (size_t)t * xs, xs, 1, &y1[(size_t)t * ys + (size_t)r], 1);
          for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++) {
            int64_t nt = toks[k];
            memset(y2, 0x7f, sizeof(float) * ys * (size_t)nt_max);
            v[vi].rect[type](W, rb, nr, nc, x, xs, nt, y2, ys);
            int bad = 0;
            for (int64_t t = 0; t < nt_max && !bad; t++)
              for (int64_t r = 0; r < (int64_t)ys && !bad; r++) {
                size_t o = (size_t)t * ys + (size_t)r;
                if (t < nt && r < nr) {
                  bad = memcmp(&y1[o], &y2[o], 4) != 0;
                  TEST_CHECK_(!bad, 0, "%s %s %lldx%lld nt %lld: token %lld row %lld tile %.9g rect %.9g", v[vi].isa,
                              tensor_type_name((uint32_t)type), (long long)nr, (long long)nc, (long long)nt,
                              (long long)t, (long long)r, y1[o], y2[o]);
                } else {
                  uint32_t u;
                  memcpy(&u, &y2[o], 4);
                  bad = u != 0x7f7f7f7fu;
                  TEST_CHECK_(!bad, 0, "%s %s %lldx%lld nt %lld wrote outside its rectangle (token %lld, row %lld)",
                              v[vi].isa, tensor_type_name((uint32_t)type), (long long)nr, (long long)nc, (long long)nt,
                              (long long)t, (long long)r);
                }
              }
            n_checked++;
          }
          free(y1);
          free(y2);
          free(W);
          free(x);
        }
    }
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) EXPECT_TRUE(n_checked >= 300);
#endif
}

/* Through kern_matmul: rows past a 64-row sub-block, columns past the
 * 512-column k-chunk with both tails, 1..14 and 40 tokens, 1-3 threads;
 * every token equals that token alone (the one-row tile path) and the
 * double product of the dequantized weights within f32 accumulation error. */
TEST(kernels_rect_matmul_batch_independent) {
  const int64_t nr = 150, nc = 1049, nt_max = 40;
  for (size_t ti = 0; ti < sizeof kr_types / sizeof kr_types[0]; ti++) {
    int type = kr_types[ti];
    uint8_t *W = NULL;
    float *x = NULL;
    size_t rb = 0;
    ASSERT_INT_EQ(kr_make(type, nr, nc, nt_max, (size_t)nc * 4, &W, &rb, &x), 0);
    float *wd = malloc(sizeof(float) * (size_t)(nr * nc));
    float *alone = malloc(sizeof(float) * (size_t)(nr * nt_max)), *y = malloc(sizeof(float) * (size_t)(nr * nt_max));
    ASSERT_TRUE(wd && alone && y);
    for (int64_t r = 0; r < nr; r++) ASSERT_INT_EQ(ref_dequantize_row((uint32_t)type, W + (size_t)r * rb, wd + r * nc, nc), 0);
    for (int64_t t = 0; t < nt_max; t++) ASSERT_INT_EQ(kern_matmul(NULL, type, W, nr, nc, x + t * nc, 1, alone + t * nr), 0);
    double worst = 0;
    for (int64_t t = 0; t < nt_max; t++)
      for (int64_t r = 0; r < nr; r++) {
        double d = 0, mag = 0;
        for (int64_t i = 0; i < nc; i++) {
          d += (double)wd[r * nc + i] * x[t * nc + i];
          mag += fabs((double)wd[r * nc + i] * x[t * nc + i]);
        }
        double e = fabs(alone[t * nr + r] - d) / mag;
        if (e > worst) worst = e;
      }
    EXPECT_TRUE(worst < 1e-5); /* f32 FMA chains of ~66 terms per lane: ~1e-6 of sum |w x| */
    for (int th = 1; th <= 3; th++) {
      thread_pool *tp = NULL;
      ASSERT_INT_EQ(tpool_new(th, &tp), 0);
      for (int64_t nt = 2; nt <= nt_max; nt = nt < 14 ? nt + 1 : nt_max) {
        memset(y, 0, sizeof(float) * (size_t)(nr * nt));
        ASSERT_INT_EQ(kern_matmul(tp, type, W, nr, nc, x, nt, y), 0);
        TEST_CHECK_(memcmp(y, alone, sizeof(float) * (size_t)(nr * nt)) == 0, 0,
                    "%s: %lld tokens on %d threads differ from each token alone", tensor_type_name((uint32_t)type),
                    (long long)nt, th);
        if (nt == nt_max) break;
      }
      tpool_free(tp);
    }
    free(wd);
    free(alone);
    free(y);
    free(W);
    free(x);
  }
}

/* The one-token many-row kernels (kern_ops.gemv: kern_x512_f16.h's groups
 * of 8 rows and kern_x86_f16.h's groups of 4 (AVX2 variant), both with
 * prefetch, used by kern_matmul for one token), of every variant the CPU
 * has, each against its own variant's
 * type's one-row tile at nt = 1, bit for bit, and against a double product
 * of the dequantized weights: every row count 1..17 (groups of 8, 4, 2, 1
 * and their mixes), every column count 1..100 (no 32-column step, the
 * 16-column and the masked tails) and 2048 plus 0, 1, 15, 16, 17, 31
 * columns (rows longer than the prefetch distance, where the prefetch
 * moves to the next group), rows at their packed stride and padded by
 * 64 bytes; nothing is written past y[nr - 1]. */
TEST(kernels_gemv_equals_tile) {
  struct kern_ops v[2];
  int n = 0;
  memset(v, 0, sizeof v);
  if (kern_ops_avx512(&v[n])) n++;
  if (kern_ops_avx2(&v[n])) n++;
  static const int64_t long_cols[] = {2048, 2049, 2063, 2064, 2065, 2079};
  int n_checked = 0, n_checked_v[2] = {0, 0};
  double worst = 0;
  for (int vi = 0; vi < n; vi++)
    for (size_t ti = 0; ti < sizeof kr_types / sizeof kr_types[0]; ti++) {
      int type = kr_types[ti];
      if (!v[vi].gemv[type]) continue;
      ASSERT_TRUE(v[vi].tile[type] != NULL);
      for (int64_t ci = 0; ci < 100 + (int64_t)(sizeof long_cols / sizeof long_cols[0]); ci++) {
        int64_t nc = ci < 100 ? ci + 1 : long_cols[ci - 100];
        const int64_t nr_max = 17;
        uint8_t *W0 = NULL;
        float *x = NULL;
        size_t rb0 = 0;
        ASSERT_INT_EQ(kr_make(type, nr_max, nc, 1, (size_t)nc * 4, &W0, &rb0, &x), 0);
        size_t rbp = rb0 + 64; /* padded stride */
        uint8_t *Wp = malloc(rbp * (size_t)nr_max);
        float *wd = malloc(sizeof(float) * (size_t)(nr_max * nc));
        float *y1 = malloc(sizeof(float) * (size_t)nr_max), *y2 = malloc(sizeof(float) * (size_t)(nr_max + 4));
        ASSERT_TRUE(Wp && wd && y1 && y2);
        for (int64_t r = 0; r < nr_max; r++) {
          memcpy(Wp + (size_t)r * rbp, W0 + (size_t)r * rb0, rb0);
          memset(Wp + (size_t)r * rbp + rb0, 0xff, rbp - rb0); /* NaN as F16/BF16/F32 if read */
          ASSERT_INT_EQ(ref_dequantize_row((uint32_t)type, W0 + (size_t)r * rb0, wd + r * nc, nc), 0);
          v[vi].tile[type](W0 + (size_t)r * rb0, nc, x, (size_t)nc * 4, 1, &y1[r], 1);
        }
        for (int64_t r = 0; r < nr_max; r++) {
          double d = 0, mag = 0;
          for (int64_t i = 0; i < nc; i++) {
            d += (double)wd[r * nc + i] * x[i];
            mag += fabs((double)wd[r * nc + i] * x[i]);
          }
          double e = mag > 0 ? fabs(y1[r] - d) / mag : fabs(y1[r]);
          if (e > worst) worst = e;
        }
        for (int pad = 0; pad < 2; pad++)
          for (int64_t nr = 1; nr <= nr_max; nr++) {
            if (nc > 100 && nr % 4 != 1 && nr != 8 && nr != 16) continue; /* keep the run short */
            memset(y2, 0x7f, sizeof(float) * (size_t)(nr_max + 4));
            v[vi].gemv[type](pad ? Wp : W0, pad ? rbp : rb0, nr, nc, x, y2);
            int bad = 0;
            for (int64_t r = 0; r < nr_max + 4 && !bad; r++) {
              if (r < nr) {
                bad = memcmp(&y1[r], &y2[r], 4) != 0;
                TEST_CHECK_(!bad, 0, "%s %s %lldx%lld%s: row %lld tile %.9g gemv %.9g", v[vi].isa,
                            tensor_type_name((uint32_t)type), (long long)nr, (long long)nc, pad ? " padded" : "",
                            (long long)r, y1[r], y2[r]);
              } else {
                uint32_t u;
                memcpy(&u, &y2[r], 4);
                bad = u != 0x7f7f7f7fu;
                TEST_CHECK_(!bad, 0, "%s %s %lldx%lld: gemv wrote y[%lld]", v[vi].isa,
                            tensor_type_name((uint32_t)type), (long long)nr, (long long)nc, (long long)r);
              }
            }
            n_checked++;
            n_checked_v[vi]++;
          }
        free(Wp);
        free(wd);
        free(y1);
        free(y2);
        free(W0);
        free(x);
      }
    }
  EXPECT_TRUE(worst < 1e-5); /* f32 FMA chains: ~1e-6 of sum |w x| */
  /* every x86 variant provides the F32/F16/BF16 gemv: none was skipped */
  for (int vi = 0; vi < n; vi++)
    TEST_CHECK_(n_checked_v[vi] >= 3 * 2 * (100 * 17 + 6 * 7), 0, "%s: %d gemv shapes checked", v[vi].isa,
                n_checked_v[vi]);
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni"))
    EXPECT_TRUE(n_checked >= 3 * 2 * (100 * 17 + 6 * 7));
#endif
}
