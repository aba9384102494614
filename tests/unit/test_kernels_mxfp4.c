/* test_kernels_mxfp4.c - the MXFP4 kernels (kern_x86_mxfp4x8.h: the 8-row
 * tile built in registers from GGUF rows, as kern_ops.rect for prompts and
 * kern_ops.gemv for one token; the one-row tile; kern_generic_body.h's
 * gen_tile_mxfp4) against the reference dot product and against each
 * other. Every (row, token) must be bit-identical across the three entry
 * points and the variants (so a token's result does not depend on the
 * other tokens of a call, nor on the ISA), and within the 8-bit activation
 * bound of ref_vec_dot's double product. Weights are random block bytes:
 * every nibble, E8M0 exponents around 1 and the subnormal half scales
 * (e = 0, 1) and the first normal one (e = 2). Row counts 1..17, 24 and
 * 41 (whole groups of 8 and every remainder), 1, 3 and 90 blocks (gpt-oss's
 * 2880 columns), 1..9, 16 and 19 tokens (tiles of 8 and their tails), and
 * rows padded past their bytes (the stride is not the row size). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"
#include "test.h"

static uint64_t km_rng = 0x9e3779b97f4a7c15ull;
static uint32_t km_u32(void) {
  km_rng ^= km_rng << 13;
  km_rng ^= km_rng >> 7;
  km_rng ^= km_rng << 17;
  return (uint32_t)(km_rng >> 32);
}

/* nr rows of n columns at stride rb (>= the row bytes), random blocks. */
static void km_weights(uint8_t *W, int64_t nr, int64_t n, size_t rb) {
  memset(W, 0xa5, rb * (size_t)nr);
  for (int64_t r = 0; r < nr; r++)
    for (int64_t b = 0; b < n / 32; b++) {
      block_mxfp4 *blk = (block_mxfp4 *)(W + (size_t)r * rb) + b;
      uint32_t u = km_u32();
      blk->e = (uint8_t)(u % 11 == 0 ? u / 11 % 3 : 120 + u / 11 % 14); /* 0, 1, 2 or 2^-8 .. 2^5 */
      for (int j = 0; j < 16; j++) blk->qs[j] = (uint8_t)km_u32();
    }
}

static void km_acts(float *x, int64_t nt, int64_t n) {
  for (int64_t i = 0; i < nt * n; i++) {
    float v = (float)((double)km_u32() / 4294967296.0 * 2.0 - 1.0);
    x[i] = i % 313 == 7 ? 25.0f * v : v;
  }
}

/* ref_vec_dot's double product and the 8-bit activation bound (as
 * test_kernels.c's kt_check: sum |w| amax_b / 254 plus f32 rounding). */
static bool km_near_ref(const uint8_t *row, const float *x, int64_t n, float got) {
  float wd[2880];
  if (n > 2880 || ref_dequantize_row(TENSOR_TYPE_MXFP4, row, wd, n)) return false;
  double ref = 0, sabs = 0, qerr = 0;
  for (int64_t b = 0; b < n; b += 32) {
    double amax = 0, ws = 0;
    for (int64_t i = b; i < b + 32; i++) {
      ref += (double)wd[i] * x[i];
      sabs += fabs((double)wd[i] * x[i]);
      if (fabs(x[i]) > amax) amax = fabs(x[i]);
      ws += fabs(wd[i]);
    }
    qerr += ws * amax / 254.0;
  }
  return fabs((double)got - ref) <= qerr * (1 + 1e-5) + 1e-5 * sabs + 1e-30;
}

TEST(kernels_mxfp4_x8_tiles_match_reference) {
  struct kern_ops v[3], sc;
  int n = 0;
  memset(v, 0, sizeof v);
  memset(&sc, 0, sizeof sc);
  if (kern_ops_avx512(&v[n])) n++;
  if (kern_ops_avx2(&v[n])) n++;
  ASSERT_INT_EQ(kern_ops_scalar(&sc), 1);
  v[n++] = sc; /* the generic one-row tile alone (no rect, no gemv) */
  static const int64_t rows[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 24, 41};
  static const int64_t blocks[] = {1, 3, 90};
  static const int64_t toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 19};
  const int64_t nt_max = 19, nr_max = 41;
  int n_rect = 0, n_gemv = 0, n_bad = 0;
  for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
    const int64_t nc = 32 * blocks[bi];
    const size_t rb0 = (size_t)(nc / 32) * sizeof(block_mxfp4);
    for (int pad = 0; pad < 2; pad++) {
      const size_t rb = rb0 + (pad ? 13 : 0); /* padded rows: the stride is not the row size */
      uint8_t *W = malloc(rb * (size_t)nr_max);
      float *x = malloc(sizeof(float) * (size_t)(nt_max * nc));
      const size_t xs = kern_act_row_bytes(KERN_ACT_Q8, nc);
      uint8_t *xa = malloc(xs * (size_t)nt_max);
      const size_t ys = (size_t)nr_max + 2;
      float *y1 = malloc(sizeof(float) * ys * (size_t)nt_max), *y2 = malloc(sizeof(float) * ys * (size_t)nt_max);
      ASSERT_TRUE(W && x && xa && y1 && y2);
      km_weights(W, nr_max, nc, rb);
      km_acts(x, nt_max, nc);
      /* the scalar quantizer; the x86 ones match it bit for bit
       * (kernels_isa_variants_agree) */
      for (int64_t t = 0; t < nt_max; t++) sc.quant_q8(x + t * nc, xa + (size_t)t * xs, nc);
      /* the expected bits: the scalar variant's one-row tile, token by token */
      for (int64_t t = 0; t < nt_max; t++)
        for (int64_t r = 0; r < nr_max; r++) {
          sc.tile[TENSOR_TYPE_MXFP4](W + (size_t)r * rb, nc, xa + (size_t)t * xs, xs, 1, &y1[(size_t)t * ys + (size_t)r],
                                     1);
          if (!km_near_ref(W + (size_t)r * rb, x + t * nc, nc, y1[(size_t)t * ys + (size_t)r]) && n_bad++ == 0)
            TEST_CHECK_(0, 0, "scalar MXFP4 tile, %lld cols, row %lld token %lld: %.9g off the reference",
                        (long long)nc, (long long)r, (long long)t, y1[(size_t)t * ys + (size_t)r]);
        }
      for (int vi = 0; vi < n; vi++) {
        const struct kern_ops *o = &v[vi];
        ASSERT_TRUE(o->tile[TENSOR_TYPE_MXFP4] != NULL);
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
          const int64_t nr = rows[ri];
          for (size_t ki = 0; ki < sizeof toks / sizeof toks[0]; ki++) {
            const int64_t nt = toks[ki];
            memset(y2, 0x7f, sizeof(float) * ys * (size_t)nt_max);
            const char *path;
            if (o->rect[TENSOR_TYPE_MXFP4] && nt > 1) {
              o->rect[TENSOR_TYPE_MXFP4](W, rb, nr, nc, xa, xs, nt, y2, ys);
              path = "rect";
              n_rect++;
            } else if (o->gemv[TENSOR_TYPE_MXFP4] && nt == 1) {
              o->gemv[TENSOR_TYPE_MXFP4](W, rb, nr, nc, xa, y2);
              path = "gemv";
              n_gemv++;
            } else { /* the one-row tile in widths up to 4 */
              for (int64_t r = 0; r < nr; r++)
                for (int64_t t = 0; t < nt; t += 4)
                  o->tile[TENSOR_TYPE_MXFP4](W + (size_t)r * rb, nc, xa + (size_t)t * xs, xs,
                                             (int)(nt - t < 4 ? nt - t : 4), &y2[(size_t)t * ys + (size_t)r], ys);
              path = "tile";
            }
            int bad = 0;
            for (int64_t t = 0; t < nt_max && !bad; t++)
              for (int64_t r = 0; r < (int64_t)ys && !bad; r++) {
                size_t o1 = (size_t)t * ys + (size_t)r;
                if (t < nt && r < nr) {
                  bad = memcmp(&y1[o1], &y2[o1], 4) != 0;
                  TEST_CHECK_(!bad, 0, "%s %s %lld rows x %lld cols%s, %lld tokens: token %lld row %lld %.9g, scalar tile %.9g",
                              o->isa, path, (long long)nr, (long long)nc, pad ? " (padded)" : "", (long long)nt,
                              (long long)t, (long long)r, y2[o1], y1[o1]);
                } else {
                  uint32_t u;
                  memcpy(&u, &y2[o1], 4);
                  bad = u != 0x7f7f7f7fu;
                  TEST_CHECK_(!bad, 0, "%s %s %lld rows, %lld tokens wrote outside its rectangle (token %lld, row %lld)",
                              o->isa, path, (long long)nr, (long long)nt, (long long)t, (long long)r);
                }
              }
          }
        }
      }
      free(W);
      free(x);
      free(xa);
      free(y1);
      free(y2);
    }
  }
  EXPECT_INT_EQ(n_bad, 0);
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_TRUE(n_rect >= 6 * 12 * 10); /* every x86 variant has the rect and the gemv */
    EXPECT_TRUE(n_gemv >= 6 * 12);
  }
#endif
}

/* Through kern_matmul on 1-3 threads: a prompt-sized call (gpt-oss's expert
 * shape cut to 2880 x 200 rows, 37 tokens) gives each token the bits it
 * gets alone, and near the reference. */
TEST(kernels_mxfp4_matmul_batch_equals_alone) {
  const int64_t nr = 203, nc = 2880, nt = 37;
  const size_t rb = (size_t)(nc / 32) * sizeof(block_mxfp4);
  uint8_t *W = malloc(rb * (size_t)nr);
  float *x = malloc(sizeof(float) * (size_t)(nt * nc));
  float *alone = malloc(sizeof(float) * (size_t)(nr * nt)), *y = malloc(sizeof(float) * (size_t)(nr * nt));
  ASSERT_TRUE(W && x && alone && y);
  km_weights(W, nr, nc, rb);
  km_acts(x, nt, nc);
  int far = 0;
  for (int64_t t = 0; t < nt; t++) {
    ASSERT_INT_EQ(kern_matmul(NULL, TENSOR_TYPE_MXFP4, W, nr, nc, x + t * nc, 1, alone + t * nr), 0);
    for (int64_t r = 0; r < nr; r++) far += !km_near_ref(W + (size_t)r * rb, x + t * nc, nc, alone[t * nr + r]);
  }
  EXPECT_INT_EQ(far, 0);
  for (int th = 1; th <= 3; th++) {
    thread_pool *tp = NULL;
    ASSERT_INT_EQ(tpool_new(th, &tp), 0);
    memset(y, 0, sizeof(float) * (size_t)(nr * nt));
    ASSERT_INT_EQ(kern_matmul(tp, TENSOR_TYPE_MXFP4, W, nr, nc, x, nt, y), 0);
    TEST_CHECK_(memcmp(y, alone, sizeof(float) * (size_t)(nr * nt)) == 0, 0,
                "%d threads: %lld tokens differ from each token alone", th, (long long)nt);
    tpool_free(tp);
  }
  free(W);
  free(x);
  free(alone);
  free(y);
}
