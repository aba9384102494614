/* test_sample.c - the sampler chain against hand-computed distributions:
 * greedy, log-probabilities, temperature, top-k, top-p, min-p, penalties
 * over a window, logit bias, seeds; draws are checked statistically (counts
 * within 5 standard deviations of the expected probabilities) and kept sets
 * against a brute-force sort written here. */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "sample/sample.h"

/* xoshiro256** seeded with splitmix64: values computed by a separate Python
 * transcription of the published algorithms (Vigna's reference C code). */
TEST(sample_rng_known_values) {
  sample_rng r;
  sample_rng_seed(&r, 0);
  EXPECT_TRUE(sample_rng_next(&r) == 0x99ec5f36cb75f2b4ull);
  EXPECT_TRUE(sample_rng_next(&r) == 0xbf6e1f784956452aull);
  EXPECT_TRUE(sample_rng_next(&r) == 0x1a5f849d4933e6e0ull);
  sample_rng_seed(&r, 42);
  EXPECT_TRUE(sample_rng_next(&r) == 0x15780b2e0c2ec716ull);
  EXPECT_TRUE(sample_rng_next(&r) == 0x6104d9866d113a7eull);
  EXPECT_TRUE(sample_rng_next(&r) == 0xae17533239e499a1ull);
  for (int i = 0; i < 1000; i++) {
    double u = sample_rng_uniform(&r);
    ASSERT_TRUE(u >= 0.0 && u < 1.0);
  }
}

static sampler *mk(const sample_params *p, int32_t n_vocab) {
  sampler *s = NULL;
  int rc = sample_new(p, n_vocab, &s);
  if (rc) test_fail_at(__FILE__, __LINE__, "sample_new: %s", err_detail());
  return s;
}

TEST(sample_greedy_and_logprobs) {
  sample_params p = sample_default_params();
  p.temperature = 0.0f;
  p.n_logprobs = 3;
  /* logits 0, ln 3, ln 3, -inf: probabilities 1/7, 3/7, 3/7, 0 */
  float lg[4] = {0.0f, logf(3.0f), logf(3.0f), -INFINITY};
  sampler *s = mk(&p, 4);
  ASSERT_TRUE(s);
  sample_result r;
  ASSERT_INT_EQ(sample_next(s, lg, false, &r), 0);
  EXPECT_INT_EQ(r.token, 1); /* tie: lowest id */
  EXPECT_NEAR(r.logprob, log(3.0 / 7.0), 1e-6);
  EXPECT_INT_EQ(r.n_top, 3);
  EXPECT_INT_EQ(r.top[0].token, 1);
  EXPECT_INT_EQ(r.top[1].token, 2);
  EXPECT_INT_EQ(r.top[2].token, 0);
  EXPECT_NEAR(r.top[2].logprob, log(1.0 / 7.0), 1e-6);
  sample_free(s);
  /* no logprobs asked: NAN */
  p.n_logprobs = 0;
  s = mk(&p, 4);
  ASSERT_INT_EQ(sample_next(s, lg, false, &r), 0);
  EXPECT_TRUE(isnan(r.logprob));
  EXPECT_INT_EQ(r.n_top, 0);
  ASSERT_INT_EQ(sample_next(s, lg, true, &r), 0);
  EXPECT_NEAR(r.logprob, log(3.0 / 7.0), 1e-6);
  sample_free(s);
}

/* Draws n tokens and checks each count against probs within 5 sigma. */
static void check_dist(sampler *s, const float *lg, int32_t V, const double *probs, int n) {
  int counts[64] = {0};
  sample_result r;
  for (int i = 0; i < n; i++) {
    if (sample_next(s, lg, false, &r)) return test_fail_at(__FILE__, __LINE__, "sample_next: %s", err_detail());
    if (r.token < 0 || r.token >= V) return test_fail_at(__FILE__, __LINE__, "token %d out of range", r.token);
    counts[r.token]++;
  }
  for (int32_t t = 0; t < V; t++) {
    double want = probs[t] * n, sd = sqrt(n * probs[t] * (1 - probs[t]));
    if (probs[t] == 0.0) {
      EXPECT_INT_EQ(counts[t], 0);
    } else if (fabs(counts[t] - want) > 5 * sd + 1) {
      test_fail_at(__FILE__, __LINE__, "token %d drawn %d times, expected %.1f +- %.1f", t, counts[t], want, sd);
    }
  }
}

TEST(sample_temperature_distribution) {
  /* logits ln(1), ln(2), ln(3), ln(4): at T=1 probabilities k/10; at T=0.5
   * they square: k^2/30 */
  float lg[4] = {0.0f, logf(2.0f), logf(3.0f), logf(4.0f)};
  sample_params p = sample_default_params();
  p.seed = 7;
  sampler *s = mk(&p, 4);
  ASSERT_TRUE(s);
  double p1[4] = {0.1, 0.2, 0.3, 0.4};
  check_dist(s, lg, 4, p1, 40000);
  sample_free(s);
  p.temperature = 0.5f;
  s = mk(&p, 4);
  double p2[4] = {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0};
  check_dist(s, lg, 4, p2, 40000);
  sample_free(s);
}

TEST(sample_top_k_top_p_min_p) {
  /* probabilities 0.05, 0.5, 0.15, 0.3 (token order shuffled on purpose) */
  float lg[4] = {logf(0.05f), logf(0.5f), logf(0.15f), logf(0.3f)};
  sample_params p = sample_default_params();
  p.seed = 11;
  p.top_k = 2; /* keep 1 and 3: 0.5/0.8, 0.3/0.8 */
  sampler *s = mk(&p, 4);
  double pk[4] = {0, 0.625, 0, 0.375};
  check_dist(s, lg, 4, pk, 40000);
  sample_free(s);
  p.top_k = 0;
  p.top_p = 0.7f; /* 0.5 < 0.7 <= 0.8: keep 1 and 3 */
  s = mk(&p, 4);
  check_dist(s, lg, 4, pk, 40000);
  sample_free(s);
  p.top_p = 0.9f; /* 0.8 < 0.9 <= 0.95: keep 1, 3, 2 */
  s = mk(&p, 4);
  double pp[4] = {0, 0.5 / 0.95, 0.15 / 0.95, 0.3 / 0.95};
  check_dist(s, lg, 4, pp, 40000);
  sample_free(s);
  p.top_p = 1.0f;
  p.min_p = 0.25f; /* keep p >= 0.125: 0.5, 0.15, 0.3 */
  s = mk(&p, 4);
  check_dist(s, lg, 4, pp, 40000);
  sample_free(s);
  /* all three: top-k 3 keeps {1,3,2}, top-p 0.6 of that (0.5/0.95 = 0.526,
   * + 0.3/0.95 = 0.842) keeps {1,3}, min-p 0.7 keeps p >= 0.35: {1} */
  p.top_k = 3;
  p.top_p = 0.6f;
  p.min_p = 0.7f;
  s = mk(&p, 4);
  double one[4] = {0, 1, 0, 0};
  check_dist(s, lg, 4, one, 1000);
  sample_free(s);
}

/* Keeps (by brute force) vs the sampler on a large vocabulary: with a huge
 * temperature the kept tokens are near-uniform, so every kept token shows
 * up and nothing else does. */
static int cmp_desc(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x < y) - (x > y);
}

TEST(sample_large_vocab_kept_sets) {
  enum { V = 5000 };
  static float lg[V], sorted[V];
  uint64_t st = 99;
  for (int i = 0; i < V; i++) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    lg[i] = (float)((st >> 33) % 100000) / 1000.0f; /* 0..100, distinct enough */
    sorted[i] = lg[i];
  }
  qsort(sorted, V, sizeof *sorted, cmp_desc);
  sample_params p = sample_default_params();
  p.top_k = 40;
  p.temperature = 1e4f;
  sampler *s = mk(&p, V);
  ASSERT_TRUE(s);
  static int seen[V];
  sample_result r;
  for (int i = 0; i < 2000; i++) {
    ASSERT_INT_EQ(sample_next(s, lg, false, &r), 0);
    seen[r.token]++;
  }
  int kept = 0, wrong = 0;
  for (int i = 0; i < V; i++) {
    if (seen[i]) kept++;
    if (seen[i] && lg[i] < sorted[39]) wrong++;
  }
  EXPECT_INT_EQ(kept, 40);
  EXPECT_INT_EQ(wrong, 0);
  sample_free(s);

  /* top-p at T=1 on the same logits: the nucleus by brute force */
  memset(seen, 0, sizeof seen);
  p = sample_default_params();
  p.top_p = 0.5f;
  s = mk(&p, V);
  double total = 0, cum = 0;
  for (int i = 0; i < V; i++) total += exp((double)sorted[i] - sorted[0]);
  int n_nucleus = 0;
  while (cum < 0.5 * total) cum += exp((double)sorted[n_nucleus++] - sorted[0]);
  for (int i = 0; i < 1500; i++) {
    ASSERT_INT_EQ(sample_next(s, lg, false, &r), 0);
    seen[r.token]++;
  }
  wrong = 0;
  for (int i = 0; i < V; i++)
    if (seen[i] && lg[i] < sorted[n_nucleus - 1]) wrong++;
  EXPECT_INT_EQ(wrong, 0);
  sample_free(s);
}

TEST(sample_penalties_and_window) {
  sample_params p = sample_default_params();
  p.temperature = 0.0f;
  p.n_logprobs = 4;
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 1.0f;
  p.penalty_last_n = 4;
  sampler *s = mk(&p, 4);
  ASSERT_TRUE(s);
  /* window after 5 accepts of 0,0,1,0,2 holds 0,1,0,2 (the first 0 fell out):
   * counts {2, 1, 1, 0} */
  int32_t hist[5] = {0, 0, 1, 0, 2};
  for (int i = 0; i < 5; i++) sample_accept(s, hist[i]);
  float lg[4] = {4.0f, -1.0f, 2.0f, 0.5f};
  /* token 0: 4/2 - 2*0.5 - 1 = 0; token 1: -1*2 - 0.5 - 1 = -3.5;
   * token 2: 2/2 - 0.5 - 1 = -0.5; token 3 untouched 0.5 */
  double adj[4] = {0.0, -3.5, -0.5, 0.5};
  double lse = log(exp(adj[0]) + exp(adj[1]) + exp(adj[2]) + exp(adj[3]));
  sample_result r;
  ASSERT_INT_EQ(sample_next(s, lg, false, &r), 0);
  EXPECT_INT_EQ(r.token, 3);
  EXPECT_NEAR(r.logprob, adj[3] - lse, 1e-6);
  ASSERT_INT_EQ(r.n_top, 4);
  EXPECT_INT_EQ(r.top[1].token, 0);
  EXPECT_NEAR(r.top[1].logprob, adj[0] - lse, 1e-6);
  EXPECT_INT_EQ(r.top[3].token, 1);
  EXPECT_NEAR(r.top[3].logprob, adj[1] - lse, 1e-6);
  /* reset empties the window: no penalties, token 0 wins */
  sample_reset(s, 0);
  ASSERT_INT_EQ(sample_next(s, lg, false, &r), 0);
  EXPECT_INT_EQ(r.token, 0);
  sample_free(s);
}

TEST(sample_logit_bias) {
  float lg[3] = {5.0f, 1.0f, 0.0f};
  sample_bias b[2] = {{0, -INFINITY}, {2, 1.5f}};
  sample_params p = sample_default_params();
  p.temperature = 0.0f;
  p.bias = b;
  p.n_bias = 2;
  sampler *s = mk(&p, 3);
  sample_result r;
  ASSERT_INT_EQ(sample_next(s, lg, true, &r), 0);
  EXPECT_INT_EQ(r.token, 2); /* 0 banned, 2 lifted to 1.5 > 1 */
  EXPECT_NEAR(r.logprob, 1.5 - log(exp(1.0) + exp(1.5)), 1e-6);
  sample_free(s);
  /* sampling never returns a banned token */
  p.temperature = 1.0f;
  p.n_bias = 1;
  s = mk(&p, 3);
  double probs[3] = {0, 1 / (1 + exp(-1.0)), exp(-1.0) / (1 + exp(-1.0))};
  check_dist(s, lg, 3, probs, 20000);
  sample_free(s);
  /* banning everything is an error, not a crash */
  sample_bias all[3] = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}};
  p.bias = all;
  p.n_bias = 3;
  s = mk(&p, 3);
  EXPECT_INT_EQ(sample_next(s, lg, false, &r), ERR_INVALID);
  sample_free(s);
}

TEST(sample_seed_reproduces) {
  float lg[16];
  for (int i = 0; i < 16; i++) lg[i] = (float)(i % 5) * 0.3f;
  sample_params p = sample_default_params();
  p.seed = 1234;
  p.top_p = 0.95f;
  sampler *a = mk(&p, 16), *b = mk(&p, 16);
  p.seed = 1235;
  sampler *c = mk(&p, 16);
  sample_result ra, rb, rc;
  int diff = 0;
  for (int i = 0; i < 200; i++) {
    ASSERT_INT_EQ(sample_next(a, lg, false, &ra), 0);
    ASSERT_INT_EQ(sample_next(b, lg, false, &rb), 0);
    ASSERT_INT_EQ(sample_next(c, lg, false, &rc), 0);
    EXPECT_INT_EQ(ra.token, rb.token);
    diff += ra.token != rc.token;
  }
  EXPECT_TRUE(diff > 50);
  /* reset with the seed replays the sequence */
  sample_reset(a, 1234);
  sample_reset(b, 1234);
  for (int i = 0; i < 20; i++) {
    sample_next(a, lg, false, &ra);
    sample_next(b, lg, false, &rb);
    EXPECT_INT_EQ(ra.token, rb.token);
  }
  sample_free(a);
  sample_free(b);
  sample_free(c);
}

TEST(sample_bad_params) {
  sampler *s = NULL;
  sample_params p = sample_default_params();
  p.top_p = 0.0f;
  EXPECT_INT_EQ(sample_new(&p, 10, &s), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "top_p");
  p = sample_default_params();
  p.min_p = 1.5f;
  EXPECT_INT_EQ(sample_new(&p, 10, &s), ERR_RANGE);
  p = sample_default_params();
  p.top_k = -1;
  EXPECT_INT_EQ(sample_new(&p, 10, &s), ERR_RANGE);
  p = sample_default_params();
  p.n_logprobs = SAMPLE_MAX_LOGPROBS + 1;
  EXPECT_INT_EQ(sample_new(&p, 10, &s), ERR_RANGE);
  p = sample_default_params();
  sample_bias b = {10, 1.0f};
  p.bias = &b;
  p.n_bias = 1;
  EXPECT_INT_EQ(sample_new(&p, 10, &s), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "token 10");
  p = sample_default_params();
  p.repeat_penalty = 0.0f;
  EXPECT_INT_EQ(sample_new(&p, 10, &s), ERR_RANGE);
  EXPECT_TRUE(s == NULL);
}

/* ---- exact draws on a 32k vocabulary against a brute-force chain -------- */

typedef struct cand_ref {
  float lg;
  int32_t id;
} cand_ref;

/* candidate order: higher logit first, lower id on ties */
static int cmp_cand_ref(const void *a, const void *b) {
  const cand_ref *x = a, *y = b;
  if (x->lg != y->lg) return x->lg > y->lg ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* The sampler's documented chain written the slow way: c[] holds every
 * candidate sorted (once per logits vector); cut top-k, cut the shortest
 * prefix whose weights reach top_p, mark the kept tokens. */
static void ref_keep(const cand_ref *c, int32_t V, float temp, int32_t top_k, float top_p, char *kept) {
  const float inv_t = 1.0f / temp, mx = c[0].lg;
  int32_t n = top_k > 0 && top_k < V ? top_k : V;
  if (top_p < 1.0f) {
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) total += expf((c[i].lg - mx) * inv_t);
    double cum = 0.0;
    for (int32_t i = 0; i < n; i++) {
      cum += expf((c[i].lg - mx) * inv_t);
      if (cum >= (double)top_p * total) {
        n = i + 1;
        break;
      }
    }
  }
  memset(kept, 0, (size_t)V);
  for (int32_t i = 0; i < n; i++) kept[c[i].id] = 1;
}

/* The draw: u x total, walking the kept tokens in id order. */
static int32_t ref_draw(const float *lg, int32_t V, float mx, float temp, const char *kept, double u) {
  const float inv_t = 1.0f / temp;
  double total = 0.0;
  for (int32_t i = 0; i < V; i++)
    if (kept[i]) total += expf((lg[i] - mx) * inv_t);
  double target = u * total, cum = 0.0;
  int32_t last = -1;
  for (int32_t i = 0; i < V; i++) {
    if (!kept[i]) continue;
    last = i;
    cum += expf((lg[i] - mx) * inv_t);
    if (cum > target) return i;
  }
  return last;
}

/* top-k (small k: one heap pass; large k: quickselect) and top-p (a
 * quickselect that follows the mass) on 32,000 logits, flat, peaked and
 * full of ties (the lower id must win at the cut): 100 seeded draws each
 * equal the brute-force chain token for token. */
TEST(sample_exact_draws_large_vocab) {
  enum { V = 32000 };
  static float lg[V];
  static cand_ref c[V];
  static char kept[V];
  struct {
    float temp;
    int32_t top_k;
    float top_p;
  } cfg[] = {{1.0f, 40, 1.0f}, {0.7f, 0, 0.9f}, {1.0f, 0, 0.5f}, {0.8f, 40, 0.95f},
             {1.3f, 2000, 0.99f}, {1.0f, 9000, 1.0f}, {0.5f, 1, 1.0f}};
  for (int shape = 0; shape < 3; shape++) {
    uint64_t st = 7 + (uint64_t)shape;
    for (int32_t i = 0; i < V; i++) {
      st = st * 6364136223846793005ull + 1442695040888963407ull;
      double u = (double)(st >> 11) * (1.0 / 9007199254740992.0);
      if (shape == 0) lg[i] = (float)(u * 8.0 - 4.0);               /* flat */
      else if (shape == 1) lg[i] = (float)(-3.0 * log(-log(u + 1e-300) + 1e-12)); /* long right tail */
      else lg[i] = (float)(int)(u * 12.0);                          /* 12 values: ties everywhere */
    }
    for (int32_t i = 0; i < V; i++) {
      c[i].lg = lg[i];
      c[i].id = i;
    }
    qsort(c, (size_t)V, sizeof *c, cmp_cand_ref);
    for (size_t k = 0; k < ARRAY_LEN(cfg); k++) {
      ref_keep(c, V, cfg[k].temp, cfg[k].top_k, cfg[k].top_p, kept);
      sample_params p = sample_default_params();
      p.temperature = cfg[k].temp;
      p.top_k = cfg[k].top_k;
      p.top_p = cfg[k].top_p;
      p.seed = 1000 + k;
      sampler *s = mk(&p, V);
      ASSERT_TRUE(s);
      sample_rng r;
      sample_rng_seed(&r, p.seed);
      int bad = 0;
      for (int d = 0; d < 100; d++) {
        sample_result res;
        ASSERT_INT_EQ(sample_next(s, lg, false, &res), 0);
        int32_t want = ref_draw(lg, V, c[0].lg, p.temperature, kept, sample_rng_uniform(&r));
        if (res.token != want && bad++ == 0)
          test_fail_at(__FILE__, __LINE__, "shape %d config %zu draw %d: token %d, brute force %d", shape, k, d,
                       res.token, want);
      }
      sample_free(s);
    }
  }
}
