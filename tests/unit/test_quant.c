/* test_quant.c - the tensor type table, fp16/bf16 conversions and reference
 * (de)quantizers, checked against tools/quant_ref.py (numpy, written
 * independently from the layout description) bit for bit, plus error bounds
 * of our quantizers. */
#include "test.h"

#include <stdlib.h>
#include <unistd.h>

#include "base/err.h"
#include "kernels/iq_grids.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"

#define PY "/usr/bin/python3"
#define REF_SCRIPT "tools/quant_ref.py"

/* Skips when python3+numpy are missing; fails when our script is missing. */
static int python_ready(void) {
  if (access(REF_SCRIPT, R_OK) != 0) {
    test_fail_at(__FILE__, __LINE__, "%s not found (run the tests from the repository root)", REF_SCRIPT);
    return -1;
  }
  if (system(PY " -c 'import numpy' >/dev/null 2>&1") != 0) return 0;
  return 1;
}

static int write_file(const char *path, const void *data, size_t n) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return -1;
  size_t w = fwrite(data, 1, n, fp);
  fclose(fp);
  return w == n ? 0 : -1;
}

/* Reads exactly n bytes. */
static int read_file(const char *path, void *data, size_t n) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return -1;
  size_t r = fread(data, 1, n, fp);
  int extra = fgetc(fp);
  fclose(fp);
  return r == n && extra == EOF ? 0 : -1;
}

static int run_py(const char *args) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, PY " " REF_SCRIPT " %s", args);
  return system(cmd);
}

/* xorshift + Box-Muller: deterministic gaussian-ish data */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng_u32(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 32);
}
static float rng_unit(void) { return ((float)rng_u32() + 0.5f) / 4294967296.0f; }
static float rng_gauss(void) {
  return sqrtf(-2.0f * logf(rng_unit())) * cosf(6.2831853f * rng_unit());
}

static const uint32_t ref_types[] = {
    TENSOR_TYPE_F32,  TENSOR_TYPE_F16,  TENSOR_TYPE_BF16, TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1,
    TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q2_K, TENSOR_TYPE_Q3_K,
    TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K, TENSOR_TYPE_Q8_K, TENSOR_TYPE_IQ4_NL,
    TENSOR_TYPE_IQ4_XS, TENSOR_TYPE_MXFP4, TENSOR_TYPE_TQ1_0, TENSOR_TYPE_TQ2_0, TENSOR_TYPE_IQ2_XXS,
    TENSOR_TYPE_IQ2_XS, TENSOR_TYPE_IQ2_S, TENSOR_TYPE_IQ3_XXS, TENSOR_TYPE_IQ3_S, TENSOR_TYPE_IQ1_S,
    TENSOR_TYPE_IQ1_M};
#define N_REF (sizeof ref_types / sizeof ref_types[0])

/* ---- the table ------------------------------------------------------------ */

TEST(quant_type_table) {
  /* numbering and sizes are facts of the GGUF format */
  struct { uint32_t t; const char *name; uint32_t bs, ts; } want[] = {
      {0, "F32", 1, 4},       {1, "F16", 1, 2},     {2, "Q4_0", 32, 18},  {3, "Q4_1", 32, 20},
      {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},  {8, "Q8_0", 32, 34},  {9, "Q8_1", 32, 36},
      {10, "Q2_K", 256, 84},  {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
      {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {16, "IQ2_XXS", 256, 66}, {20, "IQ4_NL", 32, 18},
      {23, "IQ4_XS", 256, 136}, {28, "F64", 1, 8},  {30, "BF16", 1, 2},   {35, "TQ2_0", 256, 66}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const struct tensor_type_traits *tr = tensor_type_get(want[i].t);
    ASSERT_TRUE(tr != NULL);
    EXPECT_STR_EQ(tr->name, want[i].name);
    EXPECT_INT_EQ(tr->block_size, want[i].bs);
    EXPECT_INT_EQ(tr->type_size, want[i].ts);
  }
  EXPECT_TRUE(tensor_type_get(4) == NULL);
  EXPECT_TRUE(tensor_type_get(31) == NULL);
  EXPECT_TRUE(tensor_type_get(1000) == NULL);
  EXPECT_STR_EQ(tensor_type_name(5), "unknown");
  for (size_t i = 0; i < N_REF; i++) EXPECT_TRUE(tensor_type_get(ref_types[i])->supported);
  EXPECT_FALSE(tensor_type_get(TENSOR_TYPE_Q8_1)->supported);
  enum tensor_type t;
  EXPECT_INT_EQ(tensor_type_from_name("q6_k", &t), 0);
  EXPECT_INT_EQ(t, TENSOR_TYPE_Q6_K);
  EXPECT_INT_EQ(tensor_type_from_name("Q9_9", &t), ERR_NOT_FOUND);
  size_t n;
  EXPECT_INT_EQ(tensor_type_row_bytes(TENSOR_TYPE_Q4_K, 512, &n), 0);
  EXPECT_INT_EQ(n, 288);
  EXPECT_INT_EQ(tensor_type_row_bytes(TENSOR_TYPE_Q4_K, 100, &n), ERR_RANGE);
  EXPECT_INT_EQ(ref_dequantize_row(TENSOR_TYPE_Q8_1, NULL, NULL, 256), ERR_UNSUPPORTED);
  EXPECT_INT_EQ(ref_quantize_row(TENSOR_TYPE_Q8_0, NULL, NULL, 33), ERR_RANGE);
}

/* ---- half precision against numpy ---------------------------------------- */

static float bits_f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

TEST(quant_fp16_against_numpy) {
  int ready = python_ready();
  if (ready < 0) return;
  if (!ready) TEST_SKIP("/usr/bin/python3 with numpy not available");
  enum { NE = 48, NR = 4000 };
  static float x[NE + NR];
  const float edge[NE] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65505.0f, 65519.99f, 65520.0f, -65520.0f,
                          1e10f, 0x1p-24f, 0x1p-25f, 0x1.0001p-25f, 0x1.8p-24f, 0x1.8p-23f, 0x1.4p-24f,
                          0x1p-14f, 0x1.ff8p-15f, 0x1.ffcp-15f, 0x1p-26f, 1e-30f, 0x1.002p0f, 0x1.006p0f,
                          0x1.001p0f, 0x1.003p0f, 3.14159265f, -2.71828f, 0.1f, 1e-5f, 6e-8f, 5.96e-8f,
                          2049.0f, 2051.0f, 4097.0f, -4099.0f, 0x1.ffep15f, 0x1.ffdp15f, 1.5e-40f,
                          INFINITY, -INFINITY, NAN, -NAN, 0x1p-149f, 0x1.fffffep127f, 100.0f, -0.5f,
                          0x1.ffcp-14f, 0x1.ffep-14f};
  for (int i = 0; i < NE; i++) x[i] = edge[i];
  for (int i = 0; i < NR; i++) {
    /* random exponents across the half range, random mantissas */
    uint32_t u = (rng_u32() & 0x807fffffu) | ((uint32_t)(100 + rng_u32() % 50) << 23);
    x[NE + i] = bits_f(u);
  }
  const char *dir = test_tmpdir();
  char in[600], out[600], args[2000];
  snprintf(in, sizeof in, "%s/x.f32", dir);
  snprintf(out, sizeof out, "%s/x.f16", dir);
  ASSERT_INT_EQ(write_file(in, x, sizeof x), 0);
  snprintf(args, sizeof args, "f32_to_f16 %s %s", in, out);
  ASSERT_INT_EQ(run_py(args), 0);
  static uint16_t want[NE + NR];
  ASSERT_INT_EQ(read_file(out, want, sizeof want), 0);
  int bad = 0;
  for (int i = 0; i < NE + NR; i++) {
    uint16_t got = f32_to_fp16(x[i]);
    if (got != want[i] && bad++ < 10)
      test_fail_at(__FILE__, __LINE__, "f32_to_fp16(%a) = 0x%04x, numpy 0x%04x", (double)x[i], got, want[i]);
  }
  /* all 65536 halves back to f32 */
  static uint16_t h[65536];
  static uint32_t back[65536];
  for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  ASSERT_INT_EQ(write_file(in, h, sizeof h), 0);
  snprintf(args, sizeof args, "f16_to_f32 %s %s", in, out);
  ASSERT_INT_EQ(run_py(args), 0);
  ASSERT_INT_EQ(read_file(out, back, sizeof back), 0);
  for (int i = 0; i < 65536; i++) {
    float f = fp16_to_f32((uint16_t)i);
    uint32_t u;
    memcpy(&u, &f, 4);
    if (u != back[i] && bad++ < 20)
      test_fail_at(__FILE__, __LINE__, "fp16_to_f32(0x%04x) = 0x%08x, numpy 0x%08x", i, u, back[i]);
  }
  EXPECT_INT_EQ(bad, 0);
}

TEST(quant_bf16_against_exact_rounding) {
  int ready = python_ready();
  if (ready < 0) return;
  if (!ready) TEST_SKIP("/usr/bin/python3 with numpy not available");
  enum { NE = 16, NR = 2000 };
  static float x[NE + NR];
  const float edge[NE] = {0.0f, -0.0f, 1.0f, 0x1.01p0f, 0x1.03p0f, 0x1.0080p0f, 0x1.0180p0f, 0x1.fffffep127f,
                          0x1.ff8p127f, 0x1p-149f, 0x1.01p-130f, INFINITY, -INFINITY, NAN, -3.0e38f, 1e-40f};
  for (int i = 0; i < NE; i++) x[i] = edge[i];
  for (int i = 0; i < NR; i++) {
    uint32_t u = rng_u32();
    if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u; /* exact ties */
    if ((u & 0x7f800000u) == 0x7f800000u) u &= 0xbfffffffu; /* keep finite */
    x[NE + i] = bits_f(u);
  }
  const char *dir = test_tmpdir();
  char in[600], out[600], args[2000];
  snprintf(in, sizeof in, "%s/x.f32", dir);
  snprintf(out, sizeof out, "%s/x.bf16", dir);
  ASSERT_INT_EQ(write_file(in, x, sizeof x), 0);
  snprintf(args, sizeof args, "f32_to_bf16 %s %s", in, out);
  ASSERT_INT_EQ(run_py(args), 0);
  static uint16_t want[NE + NR];
  ASSERT_INT_EQ(read_file(out, want, sizeof want), 0);
  int bad = 0;
  for (int i = 0; i < NE + NR; i++) {
    uint16_t got = f32_to_bf16(x[i]);
    if (got != want[i] && bad++ < 10)
      test_fail_at(__FILE__, __LINE__, "f32_to_bf16(%a) = 0x%04x, exact 0x%04x", (double)x[i], got, want[i]);
  }
  EXPECT_INT_EQ(bad, 0);
  EXPECT_TRUE(bf16_to_f32(0x3f80) == 1.0f);
  EXPECT_TRUE(bf16_to_f32(0xc000) == -2.0f);
}

/* ---- dequantization bit-identical to numpy --------------------------------- */

enum { NQ = 256 * 12 };

/* Test data: gaussian rows with some special blocks (zeros, a constant,
 * positive-only, an outlier, tiny values) to reach edge paths. */
static void make_data(float *x, int n) {
  for (int i = 0; i < n; i++) x[i] = rng_gauss();
  for (int i = 0; i < 256; i++) x[256 + i] = 0.0f;
  for (int i = 0; i < 256; i++) x[512 + i] = 0.75f;
  for (int i = 0; i < 256; i++) x[768 + i] = fabsf(x[768 + i]) + 2.0f;
  x[1024 + 17] = 40.0f;
  for (int i = 0; i < 256; i++) x[1280 + i] *= 1e-6f;
  for (int i = 0; i < 256; i++) x[1536 + i] = -fabsf(x[1536 + i]) - 1.0f;
}

/* Where the f16 (or f32 for Q8_K) scale fields of a block are, so random
 * block bytes can be made finite: {offset, is_f32}. */
static void sane_scales(uint32_t t, uint8_t *blk) {
  int offs[2] = {-1, -1};
  switch (t) {
    case TENSOR_TYPE_Q4_0: case TENSOR_TYPE_Q5_0: case TENSOR_TYPE_Q8_0: case TENSOR_TYPE_IQ4_NL:
    case TENSOR_TYPE_IQ4_XS: case TENSOR_TYPE_IQ2_XXS: case TENSOR_TYPE_IQ2_XS: case TENSOR_TYPE_IQ2_S:
    case TENSOR_TYPE_IQ3_XXS: case TENSOR_TYPE_IQ3_S: case TENSOR_TYPE_IQ1_S:
      offs[0] = 0;
      break;
    case TENSOR_TYPE_TQ1_0: offs[0] = 52; break;
    case TENSOR_TYPE_TQ2_0: offs[0] = 64; break;
    case TENSOR_TYPE_IQ1_M: { /* the f16 d is the top nibbles of the 4 scale words at 48..55 */
      uint16_t h = f32_to_fp16(rng_gauss() * 0.05f);
      for (int k = 0; k < 4; k++) blk[48 + 2 * k + 1] = (uint8_t)((blk[48 + 2 * k + 1] & 0x0f) | ((h >> 4 * k) & 15) << 4);
      return;
    }
    case TENSOR_TYPE_Q4_1: case TENSOR_TYPE_Q5_1: case TENSOR_TYPE_Q4_K: case TENSOR_TYPE_Q5_K:
      offs[0] = 0, offs[1] = 2;
      break;
    case TENSOR_TYPE_Q2_K: offs[0] = 80, offs[1] = 82; break;
    case TENSOR_TYPE_Q3_K: offs[0] = 108; break;
    case TENSOR_TYPE_Q6_K: offs[0] = 208; break;
    case TENSOR_TYPE_Q8_K: {
      float d = rng_gauss() * 0.01f;
      memcpy(blk, &d, 4);
      return;
    }
    case TENSOR_TYPE_F32: /* keep random bits but finite */
      for (int i = 0; i < 4; i++) blk[i] = (uint8_t)(blk[i] & (i == 3 ? 0x3f : 0xff)); /* |x| < 2 */
      return;
    default: return; /* F16/BF16: every bit pattern, NaNs included */
  }
  for (int k = 0; k < 2; k++) {
    if (offs[k] < 0) continue;
    uint16_t h = f32_to_fp16(rng_gauss() * 0.05f);
    memcpy(blk + offs[k], &h, 2);
  }
}

static double nmse(const float *x, const float *y, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; i++) num += ((double)x[i] - y[i]) * ((double)x[i] - y[i]), den += (double)x[i] * x[i];
  return num / den;
}

TEST(quant_dequant_bit_identical_to_numpy) {
  int ready = python_ready();
  if (ready < 0) return;
  if (!ready) TEST_SKIP("/usr/bin/python3 with numpy not available");
  static float x[NQ];
  make_data(x, NQ);
  const char *dir = test_tmpdir();
  /* two inputs per type: our quantizer's output, and random block bytes */
  static uint8_t q[2][N_REF][NQ * 4];
  size_t nb[N_REF];
  char args[8192] = "dequant";
  for (size_t i = 0; i < N_REF; i++) {
    uint32_t t = ref_types[i];
    ASSERT_INT_EQ(tensor_type_row_bytes(t, NQ, &nb[i]), 0);
    ASSERT_INT_EQ(ref_quantize_row(t, x, q[0][i], NQ), 0);
    const struct tensor_type_traits *tr = tensor_type_get(t);
    for (size_t j = 0; j < nb[i]; j++) q[1][i][j] = (uint8_t)rng_u32();
    for (size_t b = 0; b < nb[i] / tr->type_size; b++) sane_scales(t, q[1][i] + b * tr->type_size);
    for (int v = 0; v < 2; v++) {
      char in[600], out[600];
      snprintf(in, sizeof in, "%s/%s.%d.bin", dir, tr->name, v);
      snprintf(out, sizeof out, "%s/%s.%d.f32", dir, tr->name, v);
      ASSERT_INT_EQ(write_file(in, q[v][i], nb[i]), 0);
      size_t len = strlen(args);
      snprintf(args + len, sizeof args - len, " %s %s %s", tr->name, in, out);
    }
  }
  ASSERT_INT_EQ(run_py(args), 0);
  static float want[NQ], got[NQ];
  for (size_t i = 0; i < N_REF; i++) {
    const struct tensor_type_traits *tr = tensor_type_get(ref_types[i]);
    for (int v = 0; v < 2; v++) {
      char out[600];
      snprintf(out, sizeof out, "%s/%s.%d.f32", dir, tr->name, v);
      ASSERT_INT_EQ(read_file(out, want, sizeof want), 0);
      ASSERT_INT_EQ(ref_dequantize_row(ref_types[i], q[v][i], got, NQ), 0);
      int bad = 0;
      for (int j = 0; j < NQ; j++) {
        uint32_t a, b;
        memcpy(&a, &got[j], 4), memcpy(&b, &want[j], 4);
        if (a != b && bad++ < 3)
          test_fail_at(__FILE__, __LINE__, "%s (%s input) element %d: C %.9g (0x%08x), numpy %.9g (0x%08x)",
                       tr->name, v ? "random" : "quantized", j, (double)got[j], a, (double)want[j], b);
      }
      /* the dot product reference agrees with a dot of numpy's values */
      if (v == 0) {
        double acc = 0;
        for (int j = 0; j < NQ; j++) acc += (double)want[j] * x[j];
        float dot;
        ASSERT_INT_EQ(ref_vec_dot(ref_types[i], q[v][i], x, NQ, &dot), 0);
        EXPECT_NEAR(dot, acc, 1e-5 * fabs(acc) + 1e-6);
      }
    }
  }
}

/* Quantize -> dequantize error on gaussian data (normalized MSE = sum of
 * squared errors / sum of squares). A uniform quantizer with step D has error
 * variance D^2/12. With sigma = 1 and a block's absmax about 2.1 (32 values)
 * or 1.8 (16 values), the expected NMSE is about:
 *   Q8_0  D = 2.1/127  -> 2.3e-5      bound 1e-4
 *   Q6_K  D = 1.8/32 (+ 8-bit scale) -> 2.6e-4   bound 1e-3
 *   Q5_0  D = 2.1/16   -> 1.4e-3      bound 4e-3
 *   Q5_1  D = 4.2/31   -> 1.5e-3      bound 4e-3
 *   Q5_K  D = 4.2/31 (+ 6-bit scales/mins) -> 1.5e-3  bound 4e-3
 *   Q4_0  D = 2.1/8    -> 5.7e-3      bound 1.5e-2
 *   Q4_1  D = 4.2/15   -> 6.5e-3      bound 1.5e-2
 *   Q4_K  D = 4.2/15   -> 6.5e-3      bound 1.5e-2
 *   Q3_K  D = 1.8/4    -> 1.7e-2      bound 4e-2
 *   Q2_K  D = 3.6/3    -> 1.2e-1 (the scan lowers it)  bound 2e-1
 *   F16   relative 2^-11 -> ~1e-7      bound 1e-6;  BF16 2^-8 -> ~5e-6  bound 3e-5
 * Bounds are about 2-3x the estimate: loose enough for the data's
 * variation, tight enough to catch a wrong scale or a swapped nibble.
 * Table and grid types, no simple step: the estimate is what a good
 * quantizer of a gaussian reaches at that rate (measured here: 5.4e-3
 * IQ4_NL, 5.5e-3 IQ4_XS, 1.3e-2 MXFP4, 0.20 TQ1_0, 0.14 TQ2_0, 0.11 IQ2_XXS,
 * 0.080 IQ2_XS, 0.057 IQ2_S, 0.032 IQ3_XXS, 0.017 IQ3_S, 0.20 IQ1_S, 0.17
 * IQ1_M; the Shannon limit at R bits per weight is 2^-2R, e.g. 0.0625 at 2):
 *   IQ4_NL, IQ4_XS  16 levels fitted to a gaussian, as Q4_0 -> bound 1.5e-2
 *   MXFP4  8 magnitudes 0..6 spaced ever wider, power-of-2 scale -> 3e-2
 *   TQ1_0  3 levels: the best 3-level quantizer of a gaussian has 0.19 -> 0.25
 *   TQ2_0  levels -1, 0, 1, 2 (the best symmetric 4-level has 0.12) -> 0.2
 *   IQ2_XXS 2.06 bpw -> 0.2, IQ2_XS 2.31 -> 0.15, IQ2_S 2.56 -> 0.12,
 *   IQ3_XXS 3.06 -> 0.07, IQ3_S 3.44 -> 0.04, IQ1_S 1.56 -> 0.3, IQ1_M 1.75 -> 0.26
 * A grid index off by one entry, a wrong sign field or a scale level off by
 * one doubles these errors at least. */
TEST(quant_error_bounds) {
  static float x[NQ], y[NQ];
  static uint8_t q[NQ * 4];
  for (int i = 0; i < NQ; i++) x[i] = rng_gauss();
  struct { uint32_t t; double bound; } b[] = {
      {TENSOR_TYPE_F32, 0},       {TENSOR_TYPE_F16, 1e-6},    {TENSOR_TYPE_BF16, 3e-5},
      {TENSOR_TYPE_Q8_0, 1e-4},   {TENSOR_TYPE_Q8_K, 1e-4},   {TENSOR_TYPE_Q6_K, 1e-3},
      {TENSOR_TYPE_Q5_0, 4e-3},   {TENSOR_TYPE_Q5_1, 4e-3},   {TENSOR_TYPE_Q5_K, 4e-3},
      {TENSOR_TYPE_Q4_0, 1.5e-2}, {TENSOR_TYPE_Q4_1, 1.5e-2}, {TENSOR_TYPE_Q4_K, 1.5e-2},
      {TENSOR_TYPE_Q3_K, 4e-2},   {TENSOR_TYPE_Q2_K, 2e-1},   {TENSOR_TYPE_IQ4_NL, 1.5e-2},
      {TENSOR_TYPE_IQ4_XS, 1.5e-2}, {TENSOR_TYPE_MXFP4, 3e-2},  {TENSOR_TYPE_TQ1_0, 0.25},
      {TENSOR_TYPE_TQ2_0, 0.2},   {TENSOR_TYPE_IQ2_XXS, 0.2}, {TENSOR_TYPE_IQ2_XS, 0.15},
      {TENSOR_TYPE_IQ2_S, 0.12},  {TENSOR_TYPE_IQ3_XXS, 0.07}, {TENSOR_TYPE_IQ3_S, 0.04},
      {TENSOR_TYPE_IQ1_S, 0.3},   {TENSOR_TYPE_IQ1_M, 0.26}};
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
    ASSERT_INT_EQ(ref_quantize_row(b[i].t, x, q, NQ), 0);
    ASSERT_INT_EQ(ref_dequantize_row(b[i].t, q, y, NQ), 0);
    double e = nmse(x, y, NQ);
    fprintf(stderr, "    %-5s nmse %.3g (bound %.3g)\n", tensor_type_name(b[i].t), e, b[i].bound);
    if (!(e <= b[i].bound))
      test_fail_at(__FILE__, __LINE__, "%s: nmse %.3g above %.3g", tensor_type_name(b[i].t), e, b[i].bound);
  }
  /* an all-zero row stays exactly zero, a constant row stays near-constant */
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
    for (int j = 0; j < 256; j++) x[j] = 0.0f;
    ASSERT_INT_EQ(ref_quantize_row(b[i].t, x, q, 256), 0);
    ASSERT_INT_EQ(ref_dequantize_row(b[i].t, q, y, 256), 0);
    for (int j = 0; j < 256; j++) EXPECT_TRUE(y[j] == 0.0f);
  }
}

/* Non-finite input must not crash a quantizer (no out-of-range float to int
 * conversion); values are unspecified but the call returns. */
TEST(quant_nonfinite_input_is_safe) {
  static float x[512];
  static uint8_t q[512 * 4];
  for (int i = 0; i < 512; i++) x[i] = (i % 3 == 0) ? NAN : (i % 3 == 1) ? INFINITY : -1e38f;
  for (size_t i = 0; i < N_REF; i++) EXPECT_INT_EQ(ref_quantize_row(ref_types[i], x, q, 512), 0);
}

/* Hand-made blocks with values computed by hand from the layout. */
TEST(quant_hand_blocks) {
  /* Q4_0: d = 0.5, nibble j = j % 16 for low, 15 - j%16 for high */
  block_q4_0 b4;
  b4.d = f32_to_fp16(0.5f);
  for (int j = 0; j < 16; j++) b4.qs[j] = (uint8_t)(j | (15 - j) << 4);
  float y[256];
  ref_dequant_q4_0(&b4, y, 32);
  EXPECT_TRUE(y[0] == -4.0f);    /* (0 - 8) * 0.5 */
  EXPECT_TRUE(y[15] == 3.5f);    /* (15 - 8) * 0.5 */
  EXPECT_TRUE(y[16] == 3.5f);    /* high nibble of qs[0] = 15 */
  EXPECT_TRUE(y[31] == -4.0f);
  /* Q8_0 */
  block_q8_0 b8;
  b8.d = f32_to_fp16(0.25f);
  for (int j = 0; j < 32; j++) b8.qs[j] = (int8_t)(j - 16);
  ref_dequant_q8_0(&b8, y, 32);
  EXPECT_TRUE(y[0] == -4.0f && y[31] == 3.75f);
  /* Q6_K: d = 1, all scales 2 except scale[15] = -1; q = 33 (-> +1) everywhere */
  block_q6_K b6;
  memset(&b6, 0, sizeof b6);
  b6.d = f32_to_fp16(1.0f);
  for (int k = 0; k < 16; k++) b6.scales[k] = 2;
  b6.scales[15] = -1;
  for (int j = 0; j < 128; j++) b6.ql[j] = 0x11; /* low4 = 1 in both nibbles */
  for (int j = 0; j < 64; j++) b6.qh[j] = 0xaa;  /* high2 = 2 -> q = 33 */
  ref_dequant_q6_K(&b6, y, 256);
  EXPECT_TRUE(y[0] == 2.0f);
  EXPECT_TRUE(y[255] == -1.0f); /* element 255: h 1, s 3, l 31 -> sub-block 15 */
  EXPECT_TRUE(y[240] == -1.0f);
  EXPECT_TRUE(y[239] == 2.0f);
}

/* The grids' transcription: sizes, value sets, distinct entries, and
 * entries copied by hand from the format's tables (ggml-common.h). */
TEST(quant_iq_grids_transcribed) {
  struct { const uint64_t *g64; const uint32_t *g32; int n, w; uint8_t vals[8]; int nvals; } gs[] = {
      {iq2xxs_grid, NULL, 256, 8, {8, 25, 43}, 3},  {iq2xs_grid, NULL, 512, 8, {8, 25, 43}, 3},
      {iq2s_grid, NULL, 1024, 8, {8, 25, 43}, 3},   {NULL, iq3xxs_grid, 256, 4, {4, 12, 20, 28, 36, 44, 52, 62}, 8},
      {NULL, iq3s_grid, 512, 4, {1, 3, 5, 7, 9, 11, 13, 15}, 8}, {iq1s_grid, NULL, 2048, 8, {0xff, 0, 1}, 3}};
  for (size_t k = 0; k < sizeof gs / sizeof gs[0]; k++) {
    int bad = 0;
    for (int e = 0; e < gs[k].n; e++) {
      uint64_t v = gs[k].g64 ? gs[k].g64[e] : gs[k].g32[e];
      for (int j = 0; j < gs[k].w; j++) {
        bool found = false;
        for (int m = 0; m < gs[k].nvals; m++) found |= iq_grid_byte(v, j) == gs[k].vals[m];
        bad += !found;
      }
      for (int f = 0; f < e; f++) bad += (gs[k].g64 ? gs[k].g64[f] : gs[k].g32[f]) == v;
    }
    EXPECT_INT_EQ(bad, 0);
  }
  EXPECT_TRUE(iq2xxs_grid[0] == 0x0808080808080808ull);
  EXPECT_TRUE(iq2xxs_grid[255] == 0x2b2b2b1908081908ull);
  EXPECT_TRUE(iq2xs_grid[511] == 0x2b2b2b2b2b2b2b2bull);
  EXPECT_TRUE(iq2s_grid[1023] == 0x2b2b2b2b2b2b2b2bull);
  EXPECT_TRUE(iq3xxs_grid[0] == 0x04040404u);
  EXPECT_TRUE(iq3xxs_grid[255] == 0x3e341c04u);
  EXPECT_TRUE(iq3s_grid[0] == 0x01010101u);
  EXPECT_TRUE(iq3s_grid[511] == 0x0f0f0101u);
  EXPECT_TRUE(iq1s_grid[0] == 0xffffffffffffffffull);
  EXPECT_TRUE(iq1s_grid[2047] == 0x0101010101010101ull);
  /* the parity sign expansion reproduces ggml's ksigns_iq2xs entries */
  EXPECT_INT_EQ(iq_signs7(0), 0);
  EXPECT_INT_EQ(iq_signs7(1), 129);
  EXPECT_INT_EQ(iq_signs7(3), 3);
  EXPECT_INT_EQ(iq_signs7(127), 255);
  EXPECT_INT_EQ(iq_signs7(80), 80);
  EXPECT_INT_EQ(iq_signs7(81), 209);
}

/* Hand-made blocks of the table and grid types, values worked out by hand. */
TEST(quant_hand_blocks_iq) {
  float y[256];
  /* IQ4_NL: d = 0.5, low nibbles j, high nibbles 15 - j */
  block_iq4_nl b4;
  b4.d = f32_to_fp16(0.5f);
  for (int j = 0; j < 16; j++) b4.qs[j] = (uint8_t)(j | (15 - j) << 4);
  ref_dequant_iq4_nl(&b4, y, 32);
  EXPECT_TRUE(y[0] == -63.5f && y[15] == 56.5f && y[16] == 56.5f && y[24] == -5.0f);
  /* IQ4_XS: d = 1, sub-block 3 scale 33 (-> 1): scales_l[1] high nibble 1, scales_h bits 6-7 = 2 */
  block_iq4_xs bx;
  memset(&bx, 0, sizeof bx);
  bx.d = f32_to_fp16(1.0f);
  bx.scales_l[1] = 0x10;
  bx.scales_h = 2 << 6;
  bx.qs[16 * 3] = 0xf8; /* element 96: level 8 (1), element 112: level 15 (113) */
  ref_dequant_iq4_xs(&bx, y, 256);
  EXPECT_TRUE(y[96] == 1.0f && y[112] == 113.0f);
  EXPECT_TRUE(y[0] == 32.0f * 127.0f); /* sub-block 0: ls 0 -> -32, level 0 -127 */
  /* MXFP4: e = 127 -> d = 0.5; nibble 7 -> 12 * 0.5 = 6, nibble 15 -> -6, nibble 9 -> -0.5 */
  block_mxfp4 bm;
  bm.e = 127;
  memset(bm.qs, 0, sizeof bm.qs);
  bm.qs[0] = 0xf7;
  bm.qs[1] = 0x09;
  ref_dequant_mxfp4(&bm, y, 32);
  EXPECT_TRUE(y[0] == 6.0f && y[16] == -6.0f && y[1] == -0.5f && y[17] == 0.0f);
  /* TQ2_0: d = 2, qs[0] = 0b11100100: elements 0, 32, 64, 96 are q 0..3 -> -2, 0, 2, 4 */
  block_tq2_0 bt;
  memset(&bt, 0, sizeof bt);
  bt.d = f32_to_fp16(2.0f);
  bt.qs[0] = 0xe4;
  ref_dequant_tq2_0(&bt, y, 256);
  EXPECT_TRUE(y[0] == -2.0f && y[32] == 0.0f && y[64] == 2.0f && y[96] == 4.0f && y[1] == -2.0f);
  /* TQ1_0: trits (2, 0, 1, 2, 1) -> v = 2*81 + 0 + 9 + 6 + 1 = 178, byte ceil(178 * 256 / 243) = 188 */
  block_tq1_0 b1;
  memset(&b1, 0, sizeof b1);
  b1.d = f32_to_fp16(1.0f);
  b1.qs[5] = 188;
  ref_dequant_tq1_0(&b1, y, 256);
  EXPECT_TRUE(y[5] == 1.0f && y[37] == -1.0f && y[69] == 0.0f && y[101] == 1.0f && y[133] == 0.0f);
  /* IQ2_XXS: d = 1, sub-block 0 scale 3 -> db = 3.5 * 0.25 = 0.875; group 0 entry 0 (all 8),
   * sign field 1 -> elements 0 and 7 negative */
  block_iq2_xxs bq;
  memset(&bq, 0, sizeof bq);
  bq.d = f32_to_fp16(1.0f);
  bq.qs[2] = 1; /* a1 low bits: sign field 1 */
  bq.qs[3] = 3 << 12; /* a1 >> 28 = 3 */
  ref_dequant_iq2_xxs(&bq, y, 256);
  EXPECT_TRUE(y[0] == -7.0f && y[1] == 7.0f && y[7] == -7.0f);
  /* IQ3_S: d = 1, sub-block 0 scale 1 -> 3; half-group 0 index 256 (qh bit 0) ->
   * iq3s_grid[256]; signs[0] bit 0 */
  block_iq3_s b3;
  memset(&b3, 0, sizeof b3);
  b3.d = f32_to_fp16(1.0f);
  b3.scales[0] = 1;
  b3.qh[0] = 1;
  b3.signs[0] = 1;
  ref_dequant_iq3_s(&b3, y, 256);
  EXPECT_TRUE(y[0] == -3.0f * (float)iq_grid_byte(iq3s_grid[256], 0));
  EXPECT_TRUE(y[1] == 3.0f * (float)iq_grid_byte(iq3s_grid[256], 1));
  EXPECT_TRUE(y[4] == 3.0f); /* half-group 1: entry 0, all ones */
  /* IQ1_S: d = 1, sub-block 0 qh = scale 2 (-> 5), delta -1/8, group 0 entry 2047 (all +1) */
  block_iq1_s bs;
  memset(&bs, 0, sizeof bs);
  bs.d = f32_to_fp16(1.0f);
  bs.qs[0] = 255;
  uint16_t h = (uint16_t)(0x8000 | 2 << 12 | 7);
  memcpy(&bs.qh[0], &h, 2);
  ref_dequant_iq1_s(&bs, y, 256);
  EXPECT_TRUE(y[0] == 5.0f * 0.875f && y[8] == 5.0f * -1.125f); /* group 1: entry 0, all -1 */
  /* IQ1_M: d = 2 (f16 0x4000: nibble 3 = 4 -> w[3] top nibble 4), sub-block 0 scales 1 and 0 */
  block_iq1_m bn;
  memset(&bn, 0, sizeof bn);
  bn.scales[0] = 1; /* w[0] = 1: groups 0-1 scale 1 (-> 3), groups 2-3 scale 0 (-> 1) */
  bn.scales[7] = 0x40;
  bn.qh[0] = 0x08; /* group 0: delta negative */
  ref_dequant_iq1_m(&bn, y, 256);
  EXPECT_TRUE(y[0] == 6.0f * -1.125f && y[8] == 6.0f * -0.875f && y[16] == 2.0f * -0.875f);
}

/* TQ1_0's base-3 bytes: every 5-trit value survives pack -> unpack, through
 * the quantizer (ternary data quantizes exactly). */
TEST(quant_tq1_roundtrip) {
  static float x[256 * 4], y[256 * 4];
  static uint8_t q[54 * 4];
  for (int i = 0; i < 256 * 4; i++) x[i] = (float)((int)(rng_u32() % 3) - 1) * 0.5f;
  ASSERT_INT_EQ(ref_quantize_row(TENSOR_TYPE_TQ1_0, x, q, 256 * 4), 0);
  ASSERT_INT_EQ(ref_dequantize_row(TENSOR_TYPE_TQ1_0, q, y, 256 * 4), 0);
  int bad = 0;
  for (int i = 0; i < 256 * 4; i++) bad += x[i] != y[i];
  EXPECT_INT_EQ(bad, 0);
}
