/* test_attn.c - the attention kernel (kernels/attn.c) and model_attention
 * (model/attn.c): the exp polynomial against double exp over its whole
 * range, and causal grouped-query attention against a plain double
 * reference on odd shapes (cache lengths and query runs that are not
 * multiples of the tiles, GQA ratios 1, 4 and 7, head sizes 32 and 40,
 * F16, Q8_0 and F32 caches, one and two threads), with the AVX2 body and
 * with the plain C body (reference kernels forced); and the tile step's
 * plain, AVX2 and AVX-512 forms against each other bit for bit. */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/attn.h"
#include "kernels/kernels.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/model_int.h"
#include "model/testgen.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}
static float grand(void) {
  double u = urand(), v = urand();
  return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

/* Max relative error of kern_exp_f32 against exp over [-87, 88] (a dense
 * grid plus random points), and its edge values. */
static double exp_max_rel_err(void) {
  enum { N = 1 << 20 };
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  for (int i = 0; i < N; i++) x[i] = i < N / 2 ? -87.0f + 175.0f * (float)i / (N / 2) : (float)(-87.0 + 175.0 * urand());
  kern_exp_f32(x, y, N);
  double worst = 0;
  for (int i = 0; i < N; i++) {
    double e = exp((double)x[i]), r = fabs((double)y[i] - e) / e;
    if (r > worst) worst = r;
  }
  free(x), free(y);
  return worst;
}

TEST(attn_exp_error_bound) {
  for (int ref = 0; ref <= 1; ref++) {
    kern_force_reference(ref);
    double w = exp_max_rel_err();
    printf("    %s: max relative error %.3g\n", kern_avx2_fast() ? "avx2" : "plain C", w);
    EXPECT_TRUE(w < 4e-7);
    /* edges (9 values: also the scalar tail of the vector loop) */
    float x[9] = {0.0f, -INFINITY, -87.5f, -1000.0f, 100.0f, 1.0f, -1.0f, 88.0f, -87.0f}, y[9];
    kern_exp_f32(x, y, 9);
    EXPECT_TRUE(y[0] == 1.0f);
    EXPECT_TRUE(y[1] == 0.0f && y[2] == 0.0f && y[3] == 0.0f);
    EXPECT_TRUE(isfinite(y[4]) && y[4] > 1e38f);
    EXPECT_NEAR(y[5], 2.718281828, 1e-6);
    EXPECT_NEAR(y[6], 0.367879441, 1e-7);
    EXPECT_TRUE(fabs(y[7] / exp(88.0) - 1) < 4e-7);
    EXPECT_TRUE(fabs(y[8] / exp(-87.0) - 1) < 4e-7);
  }
  kern_force_reference(false);
}

/* What the cache gives back for x: F16 rounding, Q8_0 block quantization
 * (rows of hd), or x itself. */
static void cache_round(enum model_kv_type kv, const float *x, float *out, size_t n, int64_t hd) {
  if (kv == MODEL_KV_F16) {
    for (size_t i = 0; i < n; i++) out[i] = fp16_to_f32(f32_to_fp16(x[i]));
  } else if (kv == MODEL_KV_Q8_0) {
    uint8_t blk[64 * sizeof(block_q8_0)];
    for (size_t r = 0; r < n / (size_t)hd; r++) {
      ref_quant_q8_0(x + r * (size_t)hd, blk, hd);
      ref_dequant_q8_0(blk, out + r * (size_t)hd, hd);
    }
  } else {
    memcpy(out, x, n * sizeof *x);
  }
}

/* One shape: n_head query heads over n_kv KV heads of hd; L cached
 * positions, the last T of them queried in one step. Returns the NMSE of
 * model_attention against the double reference (negative on setup error). */
static double attn_case(int64_t n_head, int64_t n_kv, int64_t hd, enum model_kv_type kv, int64_t L, int64_t T,
                        int threads) {
  model_testgen g = model_testgen_small();
  g.n_head = n_head;
  g.n_head_kv = n_kv;
  g.n_embd = n_head * hd;
  g.n_layer = 2;
  g.n_ctx = 512;
  char path[256];
  snprintf(path, sizeof path, "build/test-attn-%lld-%lld-%lld.gguf", (long long)n_head, (long long)n_kv,
           (long long)hd);
  model *m = NULL;
  if (model_testgen_write(&g, path) || model_open(path, &m)) {
    test_fail_at(__FILE__, __LINE__, "model: %s", err_detail());
    return -1;
  }
  model_ctx_params p = model_ctx_default_params();
  p.kv_type = kv;
  p.n_threads = threads;
  model_ctx *c = NULL;
  if (model_ctx_new(m, &p, &c) || model_ctx_kv_type(c) != kv) {
    test_fail_at(__FILE__, __LINE__, "context: %s", err_detail());
    model_free(m);
    return -1;
  }
  const int64_t rep = n_head / n_kv;
  size_t kvn = (size_t)(L * n_kv * hd), qn = (size_t)(T * n_head * hd);
  float *k = malloc(kvn * sizeof *k), *v = malloc(kvn * sizeof *v);
  float *kd = malloc(kvn * sizeof *kd), *vd = malloc(kvn * sizeof *vd);
  float *q = malloc(qn * sizeof *q), *out = malloc(qn * sizeof *out), *ref = malloc(qn * sizeof *ref);
  int32_t *seq = calloc((size_t)L, sizeof *seq);
  int64_t *pos = malloc((size_t)L * sizeof *pos);
  double *s = malloc((size_t)L * sizeof *s);
  for (size_t i = 0; i < kvn; i++) k[i] = 2.0f * grand(), v[i] = grand();
  for (size_t i = 0; i < qn; i++) q[i] = grand();
  for (int64_t t = 0; t < L; t++) pos[t] = t;
  cache_round(kv, k, kd, kvn, hd);
  cache_round(kv, v, vd, kvn, hd);
  model_step st = {.n = L, .seq = seq, .pos = pos};
  model_kv_store(c, 1, &st, k, v);
  model_step qs = {.n = T, .seq = seq, .pos = pos + (L - T)};
  float scale = 1.0f / sqrtf((float)hd);
  model_attention(c, 1, &qs, q, out, scale);
  for (int64_t t = 0; t < T; t++) {
    int64_t P = L - T + t + 1;
    for (int64_t h = 0; h < n_head; h++) {
      int64_t gi = h / rep;
      const float *qr = q + (t * n_head + h) * hd;
      double mx = -INFINITY, sum = 0;
      for (int64_t pp = 0; pp < P; pp++) {
        double d = 0;
        for (int64_t e = 0; e < hd; e++) d += (double)qr[e] * kd[(pp * n_kv + gi) * hd + e];
        s[pp] = d * scale;
        if (s[pp] > mx) mx = s[pp];
      }
      for (int64_t pp = 0; pp < P; pp++) sum += (s[pp] = exp(s[pp] - mx));
      for (int64_t e = 0; e < hd; e++) {
        double a = 0;
        for (int64_t pp = 0; pp < P; pp++) a += s[pp] * vd[(pp * n_kv + gi) * hd + e];
        ref[(t * n_head + h) * hd + e] = (float)(a / sum);
      }
    }
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < qn; i++) {
    double d = (double)out[i] - ref[i];
    num += d * d;
    den += (double)ref[i] * ref[i];
  }
  free(k), free(v), free(kd), free(vd), free(q), free(out), free(ref), free(seq), free(pos), free(s);
  model_ctx_free(c);
  model_free(m);
  return den > 0 ? num / den : (num == 0 ? 0 : 1);
}

/* The kernel's error is f32 rounding (scores of spread ~2 summed over hd
 * terms, exp to 2.5e-7): NMSE around 1e-13. The bound 1e-10 is far above
 * that and far below what a mask off by one position (a visible score
 * dropped or a future one let in: ~1e-4 and up), a wrong tile, block or
 * head offset, or a stale correction factor give. */
TEST(attn_against_double_reference) {
  static const struct {
    int64_t nh, nkv, hd;
  } shapes[] = {{2, 2, 40}, {8, 2, 32}, {7, 1, 40}, {14, 2, 32}};
  static const struct {
    int64_t L, T;
  } lens[] = {{1, 1}, {7, 7}, {129, 1}, {130, 37}, {300, 300}, {511, 17}};
  const enum model_kv_type kvs[] = {MODEL_KV_F16, MODEL_KV_Q8_0, MODEL_KV_F32};
  for (int ref = 0; ref <= 1; ref++) {
    kern_force_reference(ref);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
      for (size_t ki = 0; ki < 3; ki++) {
        if (kvs[ki] == MODEL_KV_Q8_0 && shapes[si].hd % 32) continue;
        if (ref && kvs[ki] == MODEL_KV_F32) continue; /* the plain body is the same for every cache */
        double worst = 0;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
          for (int th = 1; th <= 2; th++) {
            if (ref && lens[li].T > 40) continue; /* the plain body is slow */
            double e = attn_case(shapes[si].nh, shapes[si].nkv, shapes[si].hd, kvs[ki], lens[li].L, lens[li].T, th);
            if (e < 0 || e > 1e-10)
              test_fail_at(__FILE__, __LINE__, "%s heads %lld/%lld hd %lld %s L=%lld T=%lld threads %d: nmse %.3g",
                           kern_avx2_fast() ? "avx2" : "plain", (long long)shapes[si].nh, (long long)shapes[si].nkv,
                           (long long)shapes[si].hd, model_kv_type_name(kvs[ki]), (long long)lens[li].L,
                           (long long)lens[li].T, th, e);
            if (e > worst) worst = e;
          }
        printf("    %s heads %lld/%lld hd %lld %s: worst nmse %.3g\n", kern_avx2_fast() ? "avx2" : "plain",
               (long long)shapes[si].nh, (long long)shapes[si].nkv, (long long)shapes[si].hd,
               model_kv_type_name(kvs[ki]), worst);
      }
  }
  kern_force_reference(false);
}

/* The AVX2 forms of RMSNorm, SiLU, SwiGLU and add (kernels/ops_avx2.c)
 * against the plain forms (reference kernels forced: libm expf, scalar
 * double sums) at lengths with vector tails, inputs spanning the range
 * where SiLU saturates. Bounds: SiLU 1e-6 relative (the exp polynomial's
 * 4e-7 plus a division; measured 4.5e-7), SwiGLU 2e-6 (one more product
 * rounded on both sides; measured 1e-6), RMSNorm 1e-6 relative, add exact. */
TEST(attn_ops_avx2_match_plain) {
  if (!kern_avx2_fast()) TEST_SKIP("no AVX2 on this CPU");
  const int64_t lens[] = {1, 7, 8, 13, 64, 2053};
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    int64_t n = lens[li];
    float *x = malloc((size_t)n * sizeof *x), *u = malloc((size_t)n * sizeof *u), *w = malloc((size_t)n * sizeof *w);
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    for (int64_t i = 0; i < n; i++) {
      x[i] = (float)(200.0 * urand() - 100.0) * (i % 3 ? 0.05f : 1.0f);
      u[i] = grand();
      w[i] = grand();
    }
    double worst[4] = {0, 0, 0, 0};
    for (int op = 0; op < 4; op++) {
      for (int ref = 1; ref >= 0; ref--) {
        float *o = ref ? a : b;
        kern_force_reference(ref);
        memcpy(o, x, (size_t)n * sizeof *o);
        if (op == 0) ops_silu(o, n);
        if (op == 1) ops_swiglu(o, u, n);
        if (op == 2) ops_rmsnorm(o, x, w, n, 1e-5f);
        if (op == 3) ops_add(o, u, n);
      }
      for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]), s = fabs((double)a[i]) + 1e-30;
        if (op < 2 && fabs((double)x[i]) < 1e-20) continue;
        if (d / s > worst[op] && a[i] != b[i]) worst[op] = d / s;
      }
    }
    kern_force_reference(false);
    if (!(worst[0] < 1e-6 && worst[1] < 2e-6 && worst[2] < 1e-6 && worst[3] == 0))
      test_fail_at(__FILE__, __LINE__, "n=%lld: silu %.3g swiglu %.3g rmsnorm %.3g add %.3g", (long long)n, worst[0],
                   worst[1], worst[2], worst[3]);
    if (li == sizeof lens / sizeof lens[0] - 1)
      printf("    n=%lld: worst relative silu %.3g swiglu %.3g rmsnorm %.3g add %.3g\n", (long long)n, worst[0],
             worst[1], worst[2], worst[3]);
    free(x), free(u), free(w), free(a), free(b);
  }
}

/* ops_add_rmsnorm (the residual add folded into the next RMSNorm) bit for
 * bit against ops_add then ops_rmsnorm, in the plain and the AVX2 forms,
 * at lengths with vector tails, with y aliasing d (how the models call
 * it) and apart, w given or NULL: the fused form promises the same
 * operations in the same order, so no tolerance. */
TEST(attn_add_rmsnorm_matches_add_then_norm) {
  const int64_t lens[] = {1, 3, 8, 15, 64, 2053};
  for (int ref = 0; ref <= 1; ref++) {
    kern_force_reference(ref);
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
      int64_t n = lens[li];
      size_t sz = (size_t)n * sizeof(float);
      float *x0 = malloc(sz), *d0 = malloc(sz), *w = malloc(sz);
      float *xa = malloc(sz), *ya = malloc(sz), *xb = malloc(sz), *db = malloc(sz), *yb = malloc(sz);
      for (int64_t i = 0; i < n; i++) {
        x0[i] = grand() * 3.0f;
        d0[i] = grand();
        w[i] = grand();
      }
      for (int alias = 0; alias <= 1; alias++)
        for (int wn = 0; wn <= 1; wn++) {
          const float *ww = wn ? NULL : w;
          memcpy(xa, x0, sz);
          ops_add(xa, d0, n);
          ops_rmsnorm(ya, xa, ww, n, 1e-6f);
          memcpy(xb, x0, sz);
          memcpy(db, d0, sz);
          float *y = alias ? db : yb;
          ops_add_rmsnorm(xb, db, y, ww, n, 1e-6f);
          if (memcmp(xa, xb, sz) || memcmp(ya, y, sz))
            test_fail_at(__FILE__, __LINE__, "%s n=%lld alias %d w %s: x %s, y %s", ref ? "plain" : "fast",
                         (long long)n, alias, wn ? "NULL" : "given", memcmp(xa, xb, sz) ? "differs" : "same",
                         memcmp(ya, y, sz) ? "differs" : "same");
        }
      free(x0), free(d0), free(w), free(xa), free(ya), free(xb), free(db), free(yb);
    }
  }
  kern_force_reference(false);
}

/* kern_f32_to_f16_sat (F16C on x86) bit for bit against f32_to_fp16 of the
 * clamped value, over random bit patterns (normals, half subnormals and
 * underflows, values past 65504, infinities) and ties; NaN stays NaN. */
TEST(attn_f16_store_exact) {
  enum { N = 1 << 16 };
  float *x = malloc(N * sizeof *x);
  uint16_t *h = malloc(N * sizeof *h);
  for (int i = 0; i < N; i++) {
    uint32_t u = (uint32_t)(urand() * 4294967296.0);
    if (i % 4 == 0) u = (u & 0x807fffffu) | ((uint32_t)(100 + i % 50) << 23); /* near the half range */
    if (i % 8 == 1) u = (u & 0xffffe000u) | 0x1000u;                           /* exact ties */
    memcpy(&x[i], &u, sizeof u);
    if (x[i] != x[i]) x[i] = (i & 1) ? INFINITY : -INFINITY;
  }
  for (int ref = 0; ref <= 1; ref++) {
    kern_force_reference(ref);
    kern_f32_to_f16_sat(x, h, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
      float c = x[i] > 65504.0f ? 65504.0f : x[i] < -65504.0f ? -65504.0f : x[i];
      if (h[i] != f32_to_fp16(c) && bad++ < 3)
        test_fail_at(__FILE__, __LINE__, "%s: %.9g -> 0x%04x, expected 0x%04x", ref ? "plain" : "fast", x[i], h[i],
                     f32_to_fp16(c));
    }
    float nan[9] = {NAN, 1, 1, 1, 1, 1, 1, 1, NAN};
    uint16_t hn[9];
    kern_f32_to_f16_sat(nan, hn, 9);
    EXPECT_TRUE(isnan(fp16_to_f32(hn[0])) && isnan(fp16_to_f32(hn[8])));
  }
  kern_force_reference(false);
  free(x), free(h);
}

/* RoPE with cached angles, AVX2 against plain, both pair styles, n_rot
 * below head_dim with vector tails (n_rot 20 and 128 of head_dim 24 and
 * 128, 3 heads): the rotation is a 2x2 product, so the forms differ by an
 * FMA rounding only: 1e-6 of the vector's size. */
TEST(attn_rope_avx2_match_plain) {
  if (!kern_avx2_fast()) TEST_SKIP("no AVX2 on this CPU");
  const int32_t shapes[2][2] = {{20, 24}, {128, 128}};
  for (int st = 0; st < 2; st++)
    for (int si = 0; si < 2; si++) {
      int32_t n_rot = shapes[si][0], hd = shapes[si][1];
      ops_rope r = {.style = st ? OPS_ROPE_NEOX : OPS_ROPE_NORMAL, .n_rot = n_rot, .freq_base = 10000.0f,
                    .freq_scale = 1.0f};
      float cs[128], a[3 * 128], b[3 * 128];
      ops_rope_cache(&r, 777, cs);
      for (int i = 0; i < 3 * hd; i++) a[i] = b[i] = grand();
      kern_force_reference(true);
      ops_rope_apply_cached(&r, cs, a, 3, hd);
      kern_force_reference(false);
      ops_rope_apply_cached(&r, cs, b, 3, hd);
      double worst = 0;
      for (int i = 0; i < 3 * hd; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
      if (!(worst < 1e-6))
        test_fail_at(__FILE__, __LINE__, "%s n_rot %d hd %d: max difference %.3g", st ? "neox" : "normal", n_rot, hd,
                     worst);
      for (int i = n_rot; i < hd; i++) EXPECT_TRUE(a[i] == b[i]); /* unrotated dims untouched */
    }
}

/* One block's state through three tile steps of one form: m, l and ot
 * after each step, for comparison across forms. */
struct att_tile_run {
  float m[KERN_ATT_COLS], l[KERN_ATT_COLS];
  float *ot; /* [hd][KERN_ATT_COLS] */
};

static void att_tile_steps(const float *qt, const float *k, const float *vt, int64_t ldv, int64_t vps, int64_t np,
                           int64_t hd, const int32_t lim[3][KERN_ATT_COLS], float *st, struct att_tile_run *o,
                           const kern_att_pf *pf) {
  for (int i = 0; i < KERN_ATT_COLS; i++) o->m[i] = KERN_ATT_M0, o->l[i] = 0.0f;
  memset(o->ot, 0, sizeof(float) * (size_t)(hd * KERN_ATT_COLS));
  for (int s = 0; s < 3; s++) /* the same keys again stand for the next tile: the state's continuation is what counts */
    kern_attn_tile(qt, k, vt, ldv, vps, np, hd, lim[s], o->m, o->l, o->ot, st, pf);
}

/* kern_attn_tile's forms (plain C, AVX2, AVX-512 where the CPU has it)
 * promise the same operations in the same order per column, so their
 * states agree bit for bit: head sizes with every register-block
 * remainder (1..16 rows), tile lengths 1..128, limits per column that
 * see nothing, part or all of the tile, blocks whose columns 8..15 see
 * nothing (the AVX2 form's one-vector path: decode with 8 or fewer query
 * heads), three steps continuing the running max, sum and output; the
 * fast forms with a prefetch (kern_att_pf), the plain one without; and
 * every form again with the values as rows of positions (strides 1, hd:
 * the Q8_0 cache's layout) instead of the transposed tile. */
TEST(attn_tile_forms_agree) {
  if (!kern_avx2_fast()) TEST_SKIP("no AVX2 on this CPU: only the plain form runs");
  enum { C = KERN_ATT_COLS, NP = 128, HD = 128 };
  const int64_t hds[] = {1, 7, 15, 31, 40, 64, 77, 128};
  const int64_t nps[] = {1, 5, 17, 64, 127, 128};
  float *qt = aligned_alloc(64, sizeof(float) * HD * C), *k = aligned_alloc(64, sizeof(float) * NP * HD);
  float *vt = aligned_alloc(64, sizeof(float) * HD * NP), *st = aligned_alloc(64, sizeof(float) * NP * C);
  float *vr = aligned_alloc(64, sizeof(float) * NP * HD); /* vt's values as rows: vr[p][d] */
  struct att_tile_run run[4]; /* the three forms, then one form on vr */
  for (int f = 0; f < 4; f++) run[f].ot = aligned_alloc(64, sizeof(float) * HD * C);
  const char *names[3] = {"plain C", "avx2", "avx512"};
  int bad = 0, n_cases = 0;
  for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
    for (size_t ni = 0; ni < sizeof nps / sizeof nps[0]; ni++)
      for (int shape = 0; shape < 3; shape++) {
        const int64_t hd = hds[hi], np = nps[ni];
        for (int64_t i = 0; i < hd * C; i++) qt[i] = grand() * 0.5f;
        for (int64_t i = 0; i < np * hd; i++) k[i] = 2.0f * grand();
        for (int64_t i = 0; i < hd * np; i++) vt[i] = grand();
        for (int64_t d = 0; d < hd; d++)
          for (int64_t p = 0; p < np; p++) vr[p * hd + d] = vt[d * np + p];
        int32_t lim[3][C];
        for (int s = 0; s < 3; s++)
          for (int i = 0; i < C; i++) {
            /* shape 0: causal-like rising limits; 1: random, some columns
             * empty or past np; 2: only columns 0..7 see anything */
            int32_t v = shape == 0 ? (int32_t)(np * (i + 1) / C)
                                   : (int32_t)(urand() * (double)(np + 4)) - 2;
            lim[s][i] = shape == 2 && i >= 8 ? 0 : v;
          }
        for (int f = 0; f < 3; f++) {
          if (f == 0) kern_force_reference(true);
          if (f == 1 && !kern_use_isa("avx2")) break;
          if (f == 2 && (!kern_use_isa(NULL) || !kern_x512_fast())) break;
          /* the fast forms prefetch (the tile's own keys and values
           * standing for the next tile's): no effect on the bits */
          const kern_att_pf pf = {k, vt, hd * (int64_t)sizeof(float)};
          att_tile_steps(qt, k, vt, np, 1, np, hd, lim, st, &run[f], f ? &pf : NULL);
          att_tile_steps(qt, k, vr, 1, hd, np, hd, lim, st, &run[3], f ? &pf : NULL);
          kern_force_reference(false);
          size_t ob = sizeof(float) * (size_t)(hd * C);
          const int against[2] = {f, 3}; /* this form (plain C is the baseline itself), then its rows run */
          for (int a = f == 0; a < 2; a++) {
            const int g = against[a];
            if ((memcmp(run[g].m, run[0].m, sizeof run[0].m) || memcmp(run[g].l, run[0].l, sizeof run[0].l) ||
                 memcmp(run[g].ot, run[0].ot, ob)) &&
                bad++ < 3)
              test_fail_at(__FILE__, __LINE__,
                           "hd %lld np %lld shape %d: %s%s differs from plain C (m %s, l %s, ot %s)", (long long)hd,
                           (long long)np, shape, names[f], g == 3 ? " on value rows" : "",
                           memcmp(run[g].m, run[0].m, sizeof run[0].m) ? "differs" : "same",
                           memcmp(run[g].l, run[0].l, sizeof run[0].l) ? "differs" : "same",
                           memcmp(run[g].ot, run[0].ot, ob) ? "differs" : "same");
          }
          n_cases += f == 2;
        }
      }
  kern_use_isa(NULL);
  kern_force_reference(false);
  printf("    %d cases with the avx512 form (0: the CPU has none)\n", n_cases);
  free(qt), free(k), free(vt), free(vr), free(st);
  for (int f = 0; f < 4; f++) free(run[f].ot);
}
