/*
 * test_delta.c - the gated delta rule with state (kernels/delta.h): the
 * token-by-token reference and the chunked form against tools/ref_gdr.py
 * (float64 numpy, token by token) on random inputs shaped as a layer gives
 * them (q and k L2-normalised, q scaled by 1/sqrt(d_k), decays in [-2, 0],
 * write strengths in (0, 1), a non-zero starting state), fed in chunks of
 * 1, 7, 64 and a length that is not a multiple of the chunk; a head read
 * out of an interleaved [n][2 heads x d] layout through the strides.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/delta.h"
#include "model_ref.h"
#include "test.h"

#define REF "tools/ref_gdr.py"

enum { N = 100, DK = 16, DV = 24 };

static uint32_t rng = 2024u;
static float frand(void) { /* uniform in [-1, 1) */
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) * (1.0 / 8388608.0)) - 1.0f;
}

typedef struct inputs {
  float q[N][DK], k[N][DK], v[N][DV], a[N], beta[N], s0[DK][DV];
} inputs;

static void normalize(float *x, int n, float scale) {
  double s = 0;
  for (int i = 0; i < n; i++) s += (double)x[i] * x[i];
  float inv = scale / (float)sqrt(s);
  for (int i = 0; i < n; i++) x[i] *= inv;
}

static void make_inputs(inputs *in) {
  for (int t = 0; t < N; t++) {
    for (int i = 0; i < DK; i++) in->q[t][i] = frand(), in->k[t][i] = frand();
    normalize(in->q[t], DK, 1.0f / sqrtf((float)DK));
    normalize(in->k[t], DK, 1.0f);
    for (int j = 0; j < DV; j++) in->v[t][j] = frand();
    in->a[t] = t % 10 == 3 ? 0.0f : -(1.0f + frand()); /* some tokens forget nothing */
    in->beta[t] = 1.0f / (1.0f + expf(-3.0f * frand()));
  }
  for (int i = 0; i < DK; i++)
    for (int j = 0; j < DV; j++) in->s0[i][j] = 0.3f * frand();
}

/* numpy's o [N][DV] and final state [DK][DV], or NULL. */
static float *numpy_ref(const inputs *in) {
  char path[512], out[512], cmd[1400];
  snprintf(path, sizeof path, "%s/gdr_in.gguf", test_tmpdir());
  snprintf(out, sizeof out, "%s/gdr_out.f32", test_tmpdir());
  gguf_writer *w = NULL;
  if (gguf_writer_new(&w)) return NULL;
  const uint64_t dq[2] = {DK, N}, dv[2] = {DV, N}, dn[1] = {N}, ds[2] = {DV, DK};
  int rc = gguf_writer_add_tensor(w, "q", 0, 2, dq, in->q, sizeof in->q) ||
           gguf_writer_add_tensor(w, "k", 0, 2, dq, in->k, sizeof in->k) ||
           gguf_writer_add_tensor(w, "v", 0, 2, dv, in->v, sizeof in->v) ||
           gguf_writer_add_tensor(w, "a", 0, 1, dn, in->a, sizeof in->a) ||
           gguf_writer_add_tensor(w, "beta", 0, 1, dn, in->beta, sizeof in->beta) ||
           gguf_writer_add_tensor(w, "s0", 0, 2, ds, in->s0, sizeof in->s0) || gguf_writer_write_file(w, path);
  gguf_writer_free(w);
  if (rc) return NULL;
  snprintf(cmd, sizeof cmd, REF_PY " " REF " %s %s", path, out);
  return ref_run_floats(cmd, out, (size_t)N * DV + (size_t)DK * DV);
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
static void run(const inputs *in, int64_t piece, int64_t chunk, float *o, float *S) {
  memcpy(S, in->s0, sizeof in->s0);
  float *work = malloc(ops_gdr_work_floats(chunk > 0 ? chunk : 1, DV) * sizeof *work);
  for (int64_t t0 = 0; t0 < N; t0 += piece) {
    ops_gdr_io io = {.q = in->q[t0], .k = in->k[t0], .v = in->v[t0], .ldq = DK, .ldk = DK, .ldv = DV, .ldo = DV,
                     .a = in->a + t0, .beta = in->beta + t0, .o = o + t0 * DV,
                     .n = N - t0 < piece ? N - t0 : piece, .d_k = DK, .d_v = DV};
    if (chunk > 0) ops_gdr_chunked(&io, S, chunk, work);
    else ops_gdr_ref(&io, S);
  }
  free(work);
}

TEST(gdr_reference_and_chunked_match_numpy) {
  NEED_REF_PY(REF);
  static inputs in;
  make_inputs(&in);
  float *ref = numpy_ref(&in);
  ASSERT_TRUE(ref != NULL);
  const float *ref_s = ref + N * DV;
  static float o[N * DV], S[DK * DV], o1[N * DV], S1[DK * DV];
  /* the reference, whole and one token per call (the decode path): the same bits */
  run(&in, N, 0, o, S);
  double e = worst_err(o, ref, N * DV), es = worst_err(S, ref_s, DK * DV);
  printf("    reference: output %.3g, state %.3g\n", e, es);
  EXPECT_TRUE(e < 1e-6 && es < 1e-6);
  run(&in, 1, 0, o1, S1);
  EXPECT_MEM_EQ(o1, o, sizeof o);
  EXPECT_MEM_EQ(S1, S, sizeof S);
  /* the chunked form: chunks of 1, 7 (100 = 14 x 7 + 2), 64 (64 + 36) and
   * 128 (one short chunk), whole or in pieces of 37 tokens */
  static const int64_t chunks[] = {1, 7, 64, 128};
  for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
    for (int64_t piece = N; piece >= 37; piece -= N - 37) {
      run(&in, piece, chunks[c], o1, S1);
      e = worst_err(o1, ref, N * DV);
      es = worst_err(S1, ref_s, DK * DV);
      printf("    chunks of %lld, pieces of %lld: output %.3g, state %.3g\n", (long long)chunks[c], (long long)piece,
             e, es);
      EXPECT_TRUE(e < 1e-6 && es < 1e-6);
    }
  free(ref);
}

/* A head of an interleaved [n][2 x d] layout, through the strides: equal
 * to the same head laid out alone; the other head's rows untouched. */
TEST(gdr_strided_head_equals_contiguous) {
  static inputs in;
  make_inputs(&in);
  enum { T = 40 };
  static float q2[T][2 * DK], k2[T][2 * DK], v2[T][2 * DV], o2[T][2 * DV], o[T * DV], S[DK * DV], S2[DK * DV];
  for (int t = 0; t < T; t++) {
    for (int i = 0; i < DK; i++) q2[t][DK + i] = in.q[t][i], k2[t][DK + i] = in.k[t][i], q2[t][i] = k2[t][i] = 9.0f;
    for (int j = 0; j < DV; j++) v2[t][DV + j] = in.v[t][j], v2[t][j] = 9.0f, o2[t][j] = -7.0f;
  }
  float *work = malloc(ops_gdr_work_floats(7, DV) * sizeof *work);
  ASSERT_TRUE(work != NULL);
  ops_gdr_io a = {.q = in.q[0], .k = in.k[0], .v = in.v[0], .ldq = DK, .ldk = DK, .ldv = DV, .ldo = DV,
                  .a = in.a, .beta = in.beta, .o = o, .n = T, .d_k = DK, .d_v = DV};
  ops_gdr_io b = {.q = q2[0] + DK, .k = k2[0] + DK, .v = v2[0] + DV, .ldq = 2 * DK, .ldk = 2 * DK, .ldv = 2 * DV,
                  .ldo = 2 * DV, .a = in.a, .beta = in.beta, .o = o2[0] + DV, .n = T, .d_k = DK, .d_v = DV};
  memcpy(S, in.s0, sizeof S);
  memcpy(S2, in.s0, sizeof S2);
  ops_gdr_chunked(&a, S, 7, work);
  ops_gdr_chunked(&b, S2, 7, work);
  EXPECT_MEM_EQ(S, S2, sizeof S);
  for (int t = 0; t < T; t++) {
    EXPECT_MEM_EQ(o2[t] + DV, o + t * DV, DV * sizeof(float));
    EXPECT_TRUE(o2[t][0] == -7.0f && o2[t][DV - 1] == -7.0f);
  }
  free(work);
}
