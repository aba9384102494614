/*
 * test_ssm.c - the Mamba-2 scan with state and the gated norm
 * (kernels/ssm.h): the token-by-token reference and the chunked form
 * against tools/ref_ssm.py (float64 numpy, token by token) on random
 * inputs shaped as a layer gives them (4 heads of 8 in 2 groups, 16 state
 * values, dt around the softplus knee and one above its cut at 20, a
 * non-zero starting state), fed in chunks of 1, 7, 64 and a length that is
 * not a multiple of the chunk, whole or in pieces; the rows read out of an
 * interleaved projection through the strides.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ssm.h"
#include "model_ref.h"
#include "test.h"

#define REF "tools/ref_ssm.py"

enum { N = 100, H = 4, P = 8, G = 2, NS = 16, DI = H * P };
static const float EPS = 1e-5f;

static uint32_t rng = 77u;
static float frand(void) { /* uniform in [-1, 1) */
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) * (1.0 / 8388608.0)) - 1.0f;
}

typedef struct inputs {
  float x[N][DI], B[N][G * NS], C[N][G * NS], dt[N][H], z[N][DI];
  float dt_bias[H], A[H], D[H], norm[DI], s0[H * P * NS];
} inputs;

static void make_inputs(inputs *in) {
  for (int t = 0; t < N; t++) {
    for (int i = 0; i < DI; i++) in->x[t][i] = frand(), in->z[t][i] = 2.0f * frand();
    for (int i = 0; i < G * NS; i++) in->B[t][i] = frand(), in->C[t][i] = frand();
    for (int h = 0; h < H; h++) in->dt[t][h] = t == 17 && h == 1 ? 22.0f : 1.5f * frand();
  }
  for (int h = 0; h < H; h++) {
    in->dt_bias[h] = 0.5f * frand();
    in->A[h] = -expf(1.0f * frand()); /* -exp(A_log), as the file stores it */
    in->D[h] = frand();
  }
  for (int i = 0; i < DI; i++) in->norm[i] = 1.0f + 0.2f * frand();
  for (int i = 0; i < H * P * NS; i++) in->s0[i] = 0.3f * frand();
}

static size_t n_out(void) { return (size_t)N * DI * 2 + (size_t)H * P * NS; }

/* numpy's y [N][DI], final state [H][P][NS] and gated norm [N][DI], or NULL. */
static float *numpy_ref(const inputs *in) {
  char path[512], out[512], cmd[1400];
  snprintf(path, sizeof path, "%s/ssm_in.gguf", test_tmpdir());
  snprintf(out, sizeof out, "%s/ssm_out.f32", test_tmpdir());
  gguf_writer *w = NULL;
  if (gguf_writer_new(&w)) return NULL;
  const uint64_t dx[3] = {P, H, N}, db[3] = {NS, G, N}, ddt[2] = {H, N}, dh[1] = {H}, ds[3] = {NS, P, H},
                 dz[2] = {DI, N}, dn[1] = {DI};
  int rc = gguf_writer_add_f32(w, "eps", EPS) || gguf_writer_add_tensor(w, "x", 0, 3, dx, in->x, sizeof in->x) ||
           gguf_writer_add_tensor(w, "B", 0, 3, db, in->B, sizeof in->B) ||
           gguf_writer_add_tensor(w, "C", 0, 3, db, in->C, sizeof in->C) ||
           gguf_writer_add_tensor(w, "dt", 0, 2, ddt, in->dt, sizeof in->dt) ||
           gguf_writer_add_tensor(w, "dt_bias", 0, 1, dh, in->dt_bias, sizeof in->dt_bias) ||
           gguf_writer_add_tensor(w, "A", 0, 1, dh, in->A, sizeof in->A) ||
           gguf_writer_add_tensor(w, "D", 0, 1, dh, in->D, sizeof in->D) ||
           gguf_writer_add_tensor(w, "s0", 0, 3, ds, in->s0, sizeof in->s0) ||
           gguf_writer_add_tensor(w, "z", 0, 2, dz, in->z, sizeof in->z) ||
           gguf_writer_add_tensor(w, "norm", 0, 1, dn, in->norm, sizeof in->norm) || gguf_writer_write_file(w, path);
  gguf_writer_free(w);
  if (rc) return NULL;
  snprintf(cmd, sizeof cmd, REF_PY " " REF " %s %s", path, out);
  return ref_run_floats(cmd, out, n_out());
}

/* Largest |x - ref| / (1 + |ref|) over n values. */
static double worst_err(const float *x, const float *ref, size_t n) {
  double w = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)x[i] - ref[i]) / (1.0 + fabs((double)ref[i]));
    if (e > w) w = e;
  }
  return w;
}

/* Runs the sequence in pieces of `piece` tokens, each through the chunked
 * form with chunks of `chunk` (0: through the reference), from s0. */
static void run(const inputs *in, int64_t piece, int64_t chunk, float *y, float *S) {
  memcpy(S, in->s0, sizeof in->s0);
  float *work = malloc(ops_ssm_work_floats(chunk > 0 ? chunk : 1) * sizeof *work);
  for (int64_t t0 = 0; t0 < N; t0 += piece) {
    ops_ssm_io io = {.n = N - t0 < piece ? N - t0 : piece, .n_head = H, .head_dim = P, .d_state = NS, .n_group = G,
                     .x = in->x[t0], .ldx = DI, .B = in->B[t0], .ldb = G * NS, .C = in->C[t0], .ldc = G * NS,
                     .dt = in->dt[t0], .lddt = H, .dt_bias = in->dt_bias, .A = in->A, .D = in->D,
                     .y = y + t0 * DI, .ldy = DI};
    if (chunk > 0) ops_ssm_scan_chunked(&io, S, chunk, work);
    else ops_ssm_scan_ref(&io, S);
  }
  free(work);
}

TEST(ssm_reference_and_chunked_match_numpy) {
  NEED_REF_PY(REF);
  static inputs in;
  make_inputs(&in);
  float *ref = numpy_ref(&in);
  ASSERT_TRUE(ref != NULL);
  const float *ref_s = ref + N * DI, *ref_n = ref_s + H * P * NS;
  static float y[N * DI], S[H * P * NS], y1[N * DI], S1[H * P * NS];
  /* the reference, whole and one token per call (the decode path): the same bits */
  run(&in, N, 0, y, S);
  double e = worst_err(y, ref, N * DI), es = worst_err(S, ref_s, H * P * NS);
  printf("    reference: output %.3g, state %.3g\n", e, es);
  EXPECT_TRUE(e < 1e-5 && es < 1e-5);
  run(&in, 1, 0, y1, S1);
  EXPECT_MEM_EQ(y1, y, sizeof y);
  EXPECT_MEM_EQ(S1, S, sizeof S);
  /* the gated norm of the reference's output */
  memcpy(y1, y, sizeof y);
  ops_ssm_gated_norm(y1, DI, in.z[0], DI, N, DI, G, in.norm, EPS);
  e = worst_err(y1, ref_n, N * DI);
  printf("    gated norm: %.3g\n", e);
  EXPECT_TRUE(e < 1e-5);
  /* the chunked form: chunks of 1, 7 (100 = 14 x 7 + 2), 64 (64 + 36) and
   * 128 (one short chunk), whole or in pieces of 37 tokens */
  static const int64_t chunks[] = {1, 7, 64, 128};
  for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
    for (int64_t piece = N; piece >= 37; piece -= N - 37) {
      run(&in, piece, chunks[c], y1, S1);
      e = worst_err(y1, ref, N * DI);
      es = worst_err(S1, ref_s, H * P * NS);
      double ec = worst_err(y1, y, N * DI);
      printf("    chunks of %lld, pieces of %lld: output %.3g, state %.3g (vs the recurrence %.3g)\n",
             (long long)chunks[c], (long long)piece, e, es, ec);
      EXPECT_TRUE(e < 1e-5 && es < 1e-5 && ec < 1e-5);
    }
  free(ref);
}

/* Heads split in slices (ops_ssm_io_heads, as the model's threads take
 * them) give the whole scan's bits, chunked and recurrent. */
TEST(ssm_head_slices_equal_whole) {
  static inputs in;
  make_inputs(&in);
  static float y[N * DI], y2[N * DI], S[H * P * NS], S2[H * P * NS];
  float *work = malloc(ops_ssm_work_floats(7) * sizeof *work);
  ASSERT_TRUE(work != NULL);
  for (int chunked = 0; chunked < 2; chunked++) {
    ops_ssm_io a = {.n = N, .n_head = H, .head_dim = P, .d_state = NS, .n_group = G, .x = in.x[0], .ldx = DI,
                    .B = in.B[0], .ldb = G * NS, .C = in.C[0], .ldc = G * NS, .dt = in.dt[0], .lddt = H,
                    .dt_bias = in.dt_bias, .A = in.A, .D = in.D, .y = y, .ldy = DI};
    memcpy(S, in.s0, sizeof S);
    memcpy(S2, in.s0, sizeof S2);
    if (chunked) ops_ssm_scan_chunked(&a, S, 7, work);
    else ops_ssm_scan_ref(&a, S);
    a.y = y2;
    static const int cuts[][2] = {{0, 1}, {1, 2}, {2, 4}}; /* group 0: heads 0 | 1, group 1: both */
    for (int k = 0; k < 3; k++) {
      ops_ssm_io s = ops_ssm_io_heads(&a, cuts[k][0], cuts[k][1]);
      float *Sk = S2 + cuts[k][0] * P * NS;
      if (chunked) ops_ssm_scan_chunked(&s, Sk, 7, work);
      else ops_ssm_scan_ref(&s, Sk);
    }
    EXPECT_MEM_EQ(y2, y, sizeof y);
    EXPECT_MEM_EQ(S2, S, sizeof S);
  }
  free(work);
}

/* The scan's inputs read out of a wider projection row (x, B, C and dt
 * interleaved with other values) equal the contiguous inputs; the other
 * columns of y untouched. */
TEST(ssm_strided_rows_equal_contiguous) {
  static inputs in;
  make_inputs(&in);
  enum { T = 40, W = DI + 2 * G * NS + H + 3, WY = DI + 5 };
  static float row[T][W], y2[T][WY], y[T * DI], S[H * P * NS], S2[H * P * NS];
  for (int t = 0; t < T; t++) {
    for (int i = 0; i < W; i++) row[t][i] = 9.0f;
    memcpy(row[t], in.x[t], sizeof in.x[t]);
    memcpy(row[t] + DI, in.B[t], sizeof in.B[t]);
    memcpy(row[t] + DI + G * NS, in.C[t], sizeof in.C[t]);
    memcpy(row[t] + DI + 2 * G * NS, in.dt[t], sizeof in.dt[t]);
    for (int i = 0; i < WY; i++) y2[t][i] = -7.0f;
  }
  float *work = malloc(ops_ssm_work_floats(7) * sizeof *work);
  ASSERT_TRUE(work != NULL);
  ops_ssm_io a = {.n = T, .n_head = H, .head_dim = P, .d_state = NS, .n_group = G, .x = in.x[0], .ldx = DI,
                  .B = in.B[0], .ldb = G * NS, .C = in.C[0], .ldc = G * NS, .dt = in.dt[0], .lddt = H,
                  .dt_bias = in.dt_bias, .A = in.A, .D = in.D, .y = y, .ldy = DI};
  ops_ssm_io b = a;
  b.x = row[0], b.ldx = W, b.B = row[0] + DI, b.ldb = W, b.C = row[0] + DI + G * NS, b.ldc = W;
  b.dt = row[0] + DI + 2 * G * NS, b.lddt = W, b.y = y2[0], b.ldy = WY;
  memcpy(S, in.s0, sizeof S);
  memcpy(S2, in.s0, sizeof S2);
  ops_ssm_scan_chunked(&a, S, 7, work);
  ops_ssm_scan_chunked(&b, S2, 7, work);
  EXPECT_MEM_EQ(S, S2, sizeof S);
  for (int t = 0; t < T; t++) {
    EXPECT_MEM_EQ(y2[t], y + t * DI, DI * sizeof(float));
    EXPECT_TRUE(y2[t][DI] == -7.0f && y2[t][WY - 1] == -7.0f);
  }
  free(work);
}
