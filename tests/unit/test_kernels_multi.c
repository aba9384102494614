/*
 * test_kernels_multi.c - kern_matmul_multi (several products of one x in
 * one pool job) gives, for every part, exactly the bytes kern_matmul or
 * kern_matmul_packed gives for that part alone.
 *
 * The single-product drivers are checked against the reference kernels in
 * test_kernels.c and test_kernels_packed.c; here the expected values are
 * those drivers' outputs on one thread, and the fused call must match them
 * bit for bit: odd row counts (chunks that span the end of one matrix and
 * the start of the next, short last units), 1 to 19 tokens, no pool and 1
 * to 3 threads, packed and GGUF-row parts, mixed activation formats in one
 * call (Q4_K q/k with Q6_K v, as the Q4_K_M mix has), enough rows for the
 * guided one-token chunk plan, and the forced reference path. Also the
 * shared split plan itself: every (unit, token) handed out exactly once,
 * and with align 2 every chunk starts and ends at an even unit (bar the
 * matrix's end), which is what keeps pairs of packed groups together.
 */
#include <stdlib.h>

#include "base/err.h"
#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"
#include "test.h"

static uint64_t km_rng = 0x2545f4914f6cdd1dull;
static float km_rand(void) { /* uniform in [-1, 1) */
  km_rng ^= km_rng << 13;
  km_rng ^= km_rng >> 7;
  km_rng ^= km_rng << 17;
  return (float)((double)(km_rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

struct km_mat {
  int type;
  bool pack;       /* asked for packed weights */
  int64_t n_rows;
  uint8_t *W;      /* GGUF rows */
  kern_packed *p;  /* when pack */
};

/* Random rows of `type`, packed when asked; false when this CPU has no
 * packed layout for it (the caller skips). */
static bool km_make(struct km_mat *m, int type, bool pack, int64_t n_rows, int64_t n_cols) {
  memset(m, 0, sizeof *m);
  m->type = type;
  m->pack = pack;
  m->n_rows = n_rows;
  size_t rb = 0;
  if (tensor_type_row_bytes((uint32_t)type, n_cols, &rb)) return false;
  m->W = malloc(rb * (size_t)n_rows);
  float *tmp = malloc(sizeof(float) * (size_t)n_cols);
  if (!m->W || !tmp) abort();
  for (int64_t r = 0; r < n_rows; r++) {
    float scale = 0.2f + (float)(r % 4);
    for (int64_t i = 0; i < n_cols; i++) tmp[i] = km_rand() * scale + (r % 3 == 0 ? 0.3f : 0.0f);
    if (ref_quantize_row((uint32_t)type, tmp, m->W + (size_t)r * rb, n_cols)) abort();
  }
  free(tmp);
  if (pack && (kern_pack(type, m->W, n_rows, n_cols, &m->p) || !m->p)) return false;
  return true;
}

static void km_free(struct km_mat *m) {
  free(m->W);
  kern_packed_free(m->p);
}

/* The parts of mats[0..n) against their separate products (tp NULL), for
 * several token counts and pools; returns the number of mismatches. */
static int km_compare(const struct km_mat *mats, int n, int64_t n_cols, const char *what) {
  static const int64_t toks[] = {1, 2, 5, 19};
  const int64_t max_t = 19;
  thread_pool *tps[4] = {NULL, NULL, NULL, NULL};
  for (int i = 1; i < 4; i++)
    if (tpool_new(i, &tps[i])) abort();
  float *x = malloc(sizeof(float) * (size_t)(max_t * n_cols));
  float *want[KERN_MULTI_MAX], *got[KERN_MULTI_MAX];
  for (int64_t i = 0; i < max_t * n_cols; i++) x[i] = km_rand() * (i % 97 == 3 ? 20.0f : 1.0f);
  for (int k = 0; k < n; k++) {
    want[k] = malloc(sizeof(float) * (size_t)(max_t * mats[k].n_rows));
    got[k] = malloc(sizeof(float) * (size_t)(max_t * mats[k].n_rows));
  }
  int bad = 0;
  for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
    int64_t nt = toks[ti];
    for (int k = 0; k < n; k++) {
      int rc = mats[k].p ? kern_matmul_packed(NULL, mats[k].p, x, nt, want[k])
                         : kern_matmul(NULL, mats[k].type, mats[k].W, mats[k].n_rows, n_cols, x, nt, want[k]);
      if (rc) abort();
    }
    for (int pi = 0; pi < 4; pi++) {
      kern_mm_part parts[KERN_MULTI_MAX];
      for (int k = 0; k < n; k++) {
        parts[k] = (kern_mm_part){.packed = mats[k].p, .type = mats[k].type, .W = mats[k].W,
                                  .n_rows = mats[k].n_rows, .y = got[k]};
        for (int64_t e = 0; e < nt * mats[k].n_rows; e++) got[k][e] = NAN; /* unwritten shows */
      }
      int rc = kern_matmul_multi(tps[pi], parts, n, n_cols, x, nt);
      if (rc) {
        test_fail_at(__FILE__, __LINE__, "%s: kern_matmul_multi failed: %s", what, err_detail());
        bad++;
        continue;
      }
      for (int k = 0; k < n; k++)
        if (memcmp(want[k], got[k], sizeof(float) * (size_t)(nt * mats[k].n_rows)) != 0) {
          int64_t e = 0;
          while (e < nt * mats[k].n_rows && memcmp(&want[k][e], &got[k][e], sizeof(float)) == 0) e++;
          test_fail_at(__FILE__, __LINE__, "%s: part %d (%s%s, %lld rows), %lld tokens, %d threads: y[%lld] = %.9g, separately %.9g",
                       what, k, tensor_type_name((uint32_t)mats[k].type), mats[k].p ? " packed" : "",
                       (long long)mats[k].n_rows, (long long)nt, pi, (long long)e, got[k][e], want[k][e]);
          bad++;
        }
    }
  }
  for (int k = 0; k < n; k++) {
    free(want[k]);
    free(got[k]);
  }
  free(x);
  for (int i = 1; i < 4; i++) tpool_free(tps[i]);
  return bad;
}

struct km_spec {
  int type;
  bool pack;
  int64_t n_rows;
};

/* Makes the matrices of spec (skipping the test when a packed layout is
 * missing on this CPU) and compares; with `reference` the comparison runs
 * with the reference kernels forced (packing happens before). */
static void km_case(const struct km_spec *spec, int n, int64_t n_cols, bool reference, const char *what) {
  struct km_mat m[KERN_MULTI_MAX];
  bool ok = true;
  for (int k = 0; k < n; k++) ok &= km_make(&m[k], spec[k].type, spec[k].pack, spec[k].n_rows, n_cols);
  if (ok) {
    if (reference) kern_force_reference(true);
    EXPECT_INT_EQ(km_compare(m, n, n_cols, what), 0);
    if (reference) kern_force_reference(false);
  }
  for (int k = 0; k < n; k++) km_free(&m[k]);
  if (!ok) TEST_SKIP("a packed layout this case needs is missing on this CPU");
}

/* The Q4_K_M layer mix: Q4_K q and k, Q6_K v, all packed (two activation
 * formats); and gate/up of one type. */
TEST(kernels_multi_q4_k_m_mix) {
  const struct km_spec qkv[] = {{TENSOR_TYPE_Q4_K, true, 37}, {TENSOR_TYPE_Q4_K, true, 9}, {TENSOR_TYPE_Q6_K, true, 11}};
  km_case(qkv, 3, 512, false, "Q4_K/Q4_K/Q6_K packed");
  const struct km_spec gu[] = {{TENSOR_TYPE_Q4_K, true, 45}, {TENSOR_TYPE_Q4_K, true, 45}};
  km_case(gu, 2, 256, false, "Q4_K gate/up");
}

/* Packed x8 types next to GGUF-row parts of other formats in one call. */
TEST(kernels_multi_packed_and_rows) {
  const struct km_spec a[] = {{TENSOR_TYPE_Q4_0, true, 19}, {TENSOR_TYPE_Q8_0, true, 8}, {TENSOR_TYPE_Q5_0, false, 13},
                              {TENSOR_TYPE_Q8_0, false, 3}};
  km_case(a, 4, 96, false, "Q4_0 packed, Q8_0 packed, Q5_0 rows, Q8_0 rows");
  const struct km_spec b[] = {{TENSOR_TYPE_Q4_K, false, 17}, {TENSOR_TYPE_Q4_K, true, 17}, {TENSOR_TYPE_Q6_K, false, 3}};
  km_case(b, 3, 256, false, "Q4_K rows, Q4_K packed, Q6_K rows");
}

/* GGUF rows only, f32 activations (F16, F32) and an 8-bit one. */
TEST(kernels_multi_rows_only) {
  const struct km_spec a[] = {{TENSOR_TYPE_F16, false, 21}, {TENSOR_TYPE_F32, false, 5}, {TENSOR_TYPE_Q8_0, false, 131}};
  km_case(a, 3, 64, false, "F16, F32, Q8_0 rows");
  const struct km_spec b[] = {{TENSOR_TYPE_F16, false, 1}};
  km_case(b, 1, 32, false, "one F16 row");
}

/* Enough units (groups of 8 rows) for the guided plan of one token on 2
 * and 3 threads: 61 units of ~38 KiB (so the least claim is one unit)
 * against the 16 per thread the plan needs. */
TEST(kernels_multi_big_plan) {
  const struct km_spec a[] = {{TENSOR_TYPE_Q8_0, true, 300}, {TENSOR_TYPE_Q8_0, true, 100}, {TENSOR_TYPE_F16, false, 77}};
  const int64_t n_cols = 4096, units = 38 + 13 + 10;
  const size_t wbytes = 400 * (size_t)(n_cols / 32 * 34) + 77 * (size_t)(n_cols * 2);
  struct kern_split sp;
  kern_split_plan(&sp, 3, units, kern_split_min_units(wbytes / (size_t)units, 1), 1, 1, 8);
  EXPECT_TRUE(sp.guided_div > 0); /* the shape below reaches the guided plan */
  km_case(a, 3, n_cols, false, "Q8_0 packed x2, F16 rows (guided plan)");
}

/* Reference kernels forced: packed parts unpack, GGUF rows use
 * ref_vec_dot, still bit-identical to the separate calls. */
TEST(kernels_multi_reference) {
  const struct km_spec a[] = {{TENSOR_TYPE_Q4_K, true, 13}, {TENSOR_TYPE_Q6_K, true, 9}, {TENSOR_TYPE_Q4_K, false, 5}};
  km_case(a, 3, 256, true, "reference: Q4_K packed, Q6_K packed, Q4_K rows");
}

/* Bad calls are refused with a message naming the part. */
TEST(kernels_multi_errors) {
  float x[64] = {0}, y[64];
  kern_mm_part ok = {.type = TENSOR_TYPE_F32, .W = x, .n_rows = 1, .y = y};
  kern_mm_part five[5] = {ok, ok, ok, ok, ok};
  EXPECT_INT_EQ(kern_matmul_multi(NULL, five, 0, 32, x, 1), ERR_RANGE);
  EXPECT_INT_EQ(kern_matmul_multi(NULL, five, 5, 32, x, 1), ERR_RANGE);
  kern_mm_part bad[2] = {ok, ok};
  bad[1].type = 1000;
  EXPECT_INT_EQ(kern_matmul_multi(NULL, bad, 2, 32, x, 1), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "product 2 of 2");
  bad[1] = ok;
  bad[1].type = TENSOR_TYPE_Q8_0; /* 33 columns are not whole blocks */
  EXPECT_INT_NE(kern_matmul_multi(NULL, bad, 2, 33, x, 1), 0);
  struct km_mat m;
  if (km_make(&m, TENSOR_TYPE_Q8_0, true, 8, 64)) {
    kern_mm_part pp[2] = {ok, {.packed = m.p, .y = y}};
    EXPECT_INT_EQ(kern_matmul_multi(NULL, pp, 2, 32, x, 1), ERR_RANGE); /* packed with 64 columns */
  }
  km_free(&m);
  EXPECT_INT_EQ(kern_matmul_multi(NULL, five, 2, 32, x, 0), 0); /* no tokens: nothing to do */
}

/* kern_split_plan / kern_split_next: exact coverage, aligned cuts, chunks
 * of at least min_units units (1, 3, 5; all but the last), for thread
 * counts 1..4, unit counts around the guided plan's threshold, one token
 * (generation) and several token chunks. */
TEST(kernels_split_plan_aligned_cover_once) {
  static const int64_t units[] = {1, 2, 3, 7, 16, 31, 63, 64, 65, 127, 128, 129, 255, 257, 511, 1000};
  static unsigned char seen[1024 * 40];
  for (int nth = 1; nth <= 4; nth++)
    for (size_t ui = 0; ui < sizeof units / sizeof units[0]; ui++)
      for (int64_t align = 1; align <= 2; align++)
        for (int64_t nt = 1; nt <= 37; nt += 36)
          for (int64_t mu = 1; mu <= 5; mu += 2) {
            const int64_t nu = units[ui];
            struct kern_split sp;
            kern_split_plan(&sp, nth, nu, mu, align, nt, 8);
            memset(seen, 0, (size_t)(nu * nt));
            int64_t u0, u1, t0, t1;
            while (kern_split_next(&sp, &u0, &u1, &t0, &t1)) {
              EXPECT_TRUE(u0 >= 0 && u0 < u1 && u1 <= nu && t0 >= 0 && t0 < t1 && t1 <= nt);
              EXPECT_INT_EQ((long long)(u0 % align), 0);
              EXPECT_TRUE(u1 == nu || u1 % align == 0);
              EXPECT_TRUE(u1 == nu || u1 - u0 >= mu);
              for (int64_t u = u0; u < u1 && u < nu; u++)
                for (int64_t t = t0; t < t1 && t < nt; t++) seen[u * nt + t]++;
            }
            for (int64_t i = 0; i < nu * nt; i++)
              if (seen[i] != 1) {
                EXPECT_INT_EQ(seen[i], 1);
                break;
              }
          }
}

/* The guided plan (one token chunk: generation, or a prompt whose rows
 * alone give enough chunks): claims never grow, the first takes
 * 1 / (2 nth) of the units, and the job ends on claims of min_units (bar
 * the matrix's end), so the threads finish within one short chunk. */
TEST(kernels_split_guided_claims_shrink) {
  for (int nth = 2; nth <= 4; nth++)
    for (int64_t mu = 1; mu <= 8; mu += 7) {
      const int64_t nu = 5000;
      struct kern_split sp;
      kern_split_plan(&sp, nth, nu, mu, 1, 1, 8);
      EXPECT_INT_EQ((long long)sp.guided_div, 2LL * nth);
      int64_t u0, u1, t0, t1, prev = nu + 1, n_claims = 0, last_len = 0, next_u = 0;
      while (kern_split_next(&sp, &u0, &u1, &t0, &t1)) {
        EXPECT_INT_EQ((long long)u0, (long long)next_u); /* in order, no gaps */
        if (n_claims == 0) EXPECT_INT_EQ((long long)(u1 - u0), (long long)((nu + 2 * nth - 1) / (2 * nth)));
        EXPECT_TRUE(u1 - u0 <= prev);
        prev = u1 - u0;
        if (u1 < nu) last_len = u1 - u0;
        next_u = u1;
        n_claims++;
      }
      EXPECT_INT_EQ((long long)next_u, (long long)nu);
      EXPECT_INT_EQ((long long)last_len, (long long)mu);
      EXPECT_TRUE(n_claims < nu / mu / 4); /* far fewer claims than min chunks */
    }
  /* below the threshold (16 x nth x min_units), with tokens split into
   * chunks, or on one thread the plan stays fixed */
  struct kern_split sp;
  kern_split_plan(&sp, 2, 31, 1, 1, 1, 8);
  EXPECT_INT_EQ((long long)sp.guided_div, 0);
  kern_split_plan(&sp, 2, 8, 1, 1, 64, 8);
  EXPECT_TRUE(sp.n_tok_chunks > 1 && sp.guided_div == 0);
  kern_split_plan(&sp, 1, 5000, 1, 1, 1, 8);
  EXPECT_INT_EQ((long long)sp.guided_div, 0);
}

/* One-token chunks of at least KERN_DECODE_CHUNK_BYTES (32 KiB) of
 * weights; prompts keep single units. */
TEST(kernels_split_min_units_decode_bytes) {
  EXPECT_INT_EQ((long long)kern_split_min_units(1000, 1), 33); /* 32768 / 1000, rounded up */
  EXPECT_INT_EQ((long long)kern_split_min_units(8192, 1), 4);
  EXPECT_INT_EQ((long long)kern_split_min_units(40000, 1), 1);
  EXPECT_INT_EQ((long long)kern_split_min_units(1000, 2), 1);
  EXPECT_INT_EQ((long long)kern_split_min_units(0, 1), 1);
}
