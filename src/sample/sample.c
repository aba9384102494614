/*
 * sample.c - the sampler chain of sample.h.
 *
 * Start at sample_next(). Per call: copy the logits, apply bias and
 * penalties, (optionally) log-softmax for the log-probabilities, then either
 * take the argmax or build the candidate list (token, weight) and truncate
 * it: top-k by a deterministic quickselect (no full sort of a 150k
 * vocabulary), top-p by a quickselect that follows the mass (no sort), min-p by a
 * linear filter. The draw walks the kept candidates in token-id order, so
 * the outcome of a seed depends only on the kept set and its weights.
 *
 * Invariants: counts[t] is the number of times t occurs in the window ring;
 * stamp[] holds values < gen (each sample_next takes a fresh gen) except the
 * tokens already penalized in this call.
 */
#include "sample/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

struct sampler {
  sample_params p;
  sample_bias *bias;    /* [n_bias], owned copy */
  int32_t n_vocab;
  float *logits;        /* [n_vocab] working copy */
  int32_t *ids;         /* [n_vocab] candidates */
  float *w;             /* [n_vocab] unnormalized probabilities of ids[] */
  int32_t *ring;        /* [penalty_last_n] recent tokens */
  int32_t n_ring, ring_head;
  uint32_t *counts;     /* [n_vocab] occurrences in ring */
  uint32_t *stamp;      /* [n_vocab] penalized-this-call markers */
  uint8_t *mark;        /* [n_vocab] all 0 between calls (kept-set scratch) */
  uint32_t gen;
  sample_rng rng;
};

/* ---- generator ------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void sample_rng_seed(sample_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sample_rng_next(sample_rng *r) {
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

double sample_rng_uniform(sample_rng *r) { return (double)(sample_rng_next(r) >> 11) * 0x1.0p-53; }

/* ---- setup ---------------------------------------------------------------- */

sample_params sample_default_params(void) {
  sample_params p;
  memset(&p, 0, sizeof p);
  p.temperature = 1.0f;
  p.top_p = 1.0f;
  p.repeat_penalty = 1.0f;
  return p;
}

int sample_new(const sample_params *p, int32_t n_vocab, sampler **out) {
  *out = NULL;
  if (n_vocab <= 0) return err_set(ERR_RANGE, "sampler: vocabulary size %d", n_vocab);
  if (isnan(p->temperature)) return err_set(ERR_RANGE, "sampler: temperature is NaN");
  if (p->top_k < 0) return err_set(ERR_RANGE, "sampler: top_k %d is negative", p->top_k);
  if (!(p->top_p > 0.0f && p->top_p <= 1.0f)) return err_set(ERR_RANGE, "sampler: top_p %g is not in (0, 1]", p->top_p);
  if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) return err_set(ERR_RANGE, "sampler: min_p %g is not in [0, 1]", p->min_p);
  if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
    return err_set(ERR_RANGE, "sampler: repeat_penalty %g is not a positive number", p->repeat_penalty);
  if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
    return err_set(ERR_RANGE, "sampler: presence/frequency penalty is not finite");
  if (p->penalty_last_n < 0) return err_set(ERR_RANGE, "sampler: penalty_last_n %d is negative", p->penalty_last_n);
  if (p->n_logprobs < 0 || p->n_logprobs > SAMPLE_MAX_LOGPROBS)
    return err_set(ERR_RANGE, "sampler: n_logprobs %d is not in 0..%d", p->n_logprobs, SAMPLE_MAX_LOGPROBS);
  for (size_t i = 0; i < p->n_bias; i++) {
    if (p->bias[i].token < 0 || p->bias[i].token >= n_vocab)
      return err_set(ERR_RANGE, "sampler: logit bias token %d is outside the vocabulary of %d", p->bias[i].token,
                     n_vocab);
    if (isnan(p->bias[i].bias) || p->bias[i].bias == INFINITY)
      return err_set(ERR_RANGE, "sampler: logit bias of token %d is not a number or +inf", p->bias[i].token);
  }
  sampler *s = calloc(1, sizeof *s);
  if (!s) return err_set(ERR_NOMEM, "sampler: out of memory");
  s->p = *p;
  s->n_vocab = n_vocab;
  size_t V = (size_t)n_vocab;
  s->logits = malloc(V * sizeof *s->logits);
  s->ids = malloc(V * sizeof *s->ids);
  s->w = malloc(V * sizeof *s->w);
  s->counts = calloc(V, sizeof *s->counts);
  s->stamp = calloc(V, sizeof *s->stamp);
  s->mark = calloc(V, sizeof *s->mark);
  s->ring = malloc((p->penalty_last_n ? (size_t)p->penalty_last_n : 1) * sizeof *s->ring);
  s->bias = malloc((p->n_bias ? p->n_bias : 1) * sizeof *s->bias);
  if (!s->logits || !s->ids || !s->w || !s->counts || !s->stamp || !s->mark || !s->ring || !s->bias) {
    sample_free(s);
    return err_set(ERR_NOMEM, "sampler: out of memory for a vocabulary of %d", n_vocab);
  }
  if (p->n_bias) memcpy(s->bias, p->bias, p->n_bias * sizeof *s->bias);
  s->p.bias = s->bias;
  sample_rng_seed(&s->rng, p->seed);
  *out = s;
  return 0;
}

void sample_free(sampler *s) {
  if (!s) return;
  free(s->logits);
  free(s->ids);
  free(s->w);
  free(s->counts);
  free(s->stamp);
  free(s->mark);
  free(s->ring);
  free(s->bias);
  free(s);
}

void sample_accept(sampler *s, int32_t token) {
  int32_t cap = s->p.penalty_last_n;
  if (cap == 0 || token < 0 || token >= s->n_vocab) return;
  if (s->n_ring == cap) { /* drop the oldest */
    s->counts[s->ring[s->ring_head]]--;
    s->ring[s->ring_head] = token;
    s->ring_head = (s->ring_head + 1) % cap;
  } else {
    s->ring[(s->ring_head + s->n_ring) % cap] = token;
    s->n_ring++;
  }
  s->counts[token]++;
}

void sample_reset(sampler *s, uint64_t seed) {
  memset(s->counts, 0, (size_t)s->n_vocab * sizeof *s->counts);
  s->n_ring = s->ring_head = 0;
  sample_rng_seed(&s->rng, seed);
}

/* ---- selection helpers ---------------------------------------------------- */

/* Candidate order: higher weight first, lower id on ties. */
static inline bool before(const float *w, const int32_t *ids, int64_t a, int64_t b) {
  return w[a] > w[b] || (w[a] == w[b] && ids[a] < ids[b]);
}

static inline void swap_cand(float *w, int32_t *ids, int64_t a, int64_t b) {
  float tw = w[a];
  w[a] = w[b];
  w[b] = tw;
  int32_t ti = ids[a];
  ids[a] = ids[b];
  ids[b] = ti;
}

/* Partitions [lo, hi) (hi - lo >= 2) around a median-of-three pivot:
 * returns its final index piv, with [lo, piv) before it in candidate order
 * and (piv, hi) after it. Deterministic. */
static int64_t partition(float *w, int32_t *ids, int64_t lo, int64_t hi) {
  int64_t mid = lo + (hi - lo) / 2;
  if (before(w, ids, mid, lo)) swap_cand(w, ids, mid, lo);
  if (before(w, ids, hi - 1, lo)) swap_cand(w, ids, hi - 1, lo);
  if (before(w, ids, hi - 1, mid)) swap_cand(w, ids, hi - 1, mid);
  /* pivot = median, moved to lo */
  swap_cand(w, ids, lo, mid);
  int64_t store = lo + 1;
  for (int64_t i = lo + 1; i < hi; i++)
    if (before(w, ids, i, lo)) swap_cand(w, ids, i, store++);
  int64_t piv = store - 1;
  swap_cand(w, ids, lo, piv);
  return piv;
}

/* Rearranges [lo, hi) so that its first k elements (k < hi - lo) are the k
 * first in candidate order. Hoare-style quickselect with a median-of-three
 * pivot: deterministic, O(n) on average. */
static void select_top(float *w, int32_t *ids, int64_t lo, int64_t hi, int64_t k) {
  while (hi - lo > 1) {
    int64_t piv = partition(w, ids, lo, hi);
    int64_t rank = piv - lo; /* elements before the pivot */
    if (rank == k || rank + 1 == k) return;
    if (rank > k) {
      hi = piv;
    } else {
      k -= rank + 1;
      lo = piv + 1;
    }
  }
}

/* Heap order for select_top_heap: the root is the candidate that comes
 * last in candidate order among the kept ones. */
static void heap_sift(float *w, int32_t *ids, int64_t k, int64_t i) {
  for (;;) {
    int64_t c = 2 * i + 1, worst = i;
    if (c < k && before(w, ids, worst, c)) worst = c;
    if (c + 1 < k && before(w, ids, worst, c + 1)) worst = c + 1;
    if (worst == i) return;
    swap_cand(w, ids, i, worst);
    i = worst;
  }
}

/* select_top for a small k (k < n): one pass over [0, n) with the k first
 * candidates so far in a heap at [0, k); a newcomer that does not beat the
 * root costs one comparison, so top-40 of 32k candidates is ~n comparisons
 * instead of a quickselect's repeated partitions of both arrays. Leaves the
 * same set at [0, k) as select_top (in another order). */
static void select_top_heap(float *w, int32_t *ids, int64_t n, int64_t k) {
  for (int64_t i = k / 2 - 1; i >= 0; i--) heap_sift(w, ids, k, i);
  for (int64_t i = k; i < n; i++)
    if (before(w, ids, i, 0)) {
      swap_cand(w, ids, 0, i);
      heap_sift(w, ids, k, 0);
    }
}

/* The nucleus without sorting: rearranges [0, n) so that [0, k) are the k
 * first candidates (in no order) for the smallest k whose weights reach
 * target, and returns k (n if none does). *m_prev and *m_k get the mass of
 * the first k - 1 and k candidates as summed here. A quickselect that
 * follows the mass instead of a rank: O(n) on average. */
static int64_t select_mass(float *w, int32_t *ids, int64_t n, double target, double *m_prev, double *m_k) {
  int64_t lo = 0, hi = n;
  double acc = 0.0; /* mass of [0, lo): all before [lo, hi), and < target */
  while (hi - lo > 1) {
    int64_t piv = partition(w, ids, lo, hi);
    double upper = 0.0;
    for (int64_t i = lo; i < piv; i++) upper += w[i];
    if (acc + upper >= target) {
      hi = piv;
    } else if (acc + upper + w[piv] >= target) {
      *m_prev = acc + upper;
      *m_k = acc + upper + w[piv];
      return piv + 1;
    } else {
      acc += upper + w[piv];
      lo = piv + 1;
    }
  }
  *m_prev = acc;
  *m_k = lo < n ? acc + w[lo] : acc;
  return lo < n ? lo + 1 : n;
}

/* Sorts [0, n) into candidate order (insertion sort for short lists, else
 * quickselect-driven recursion halves). */
static void sort_cands(float *w, int32_t *ids, int64_t lo, int64_t hi) {
  while (hi - lo > 16) {
    int64_t mid = lo + (hi - lo) / 2;
    select_top(w, ids, lo, hi, mid - lo); /* [lo, mid) before [mid, hi) */
    sort_cands(w, ids, lo, mid);
    lo = mid;
  }
  for (int64_t i = lo + 1; i < hi; i++)
    for (int64_t j = i; j > lo && before(w, ids, j, j - 1); j--) swap_cand(w, ids, j, j - 1);
}

static int cmp_id(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* ---- the chain ------------------------------------------------------------ */

static void apply_bias_and_penalties(sampler *s) {
  float *L = s->logits;
  for (size_t i = 0; i < s->p.n_bias; i++) L[s->bias[i].token] += s->bias[i].bias;
  if (s->n_ring == 0) return;
  const float rp = s->p.repeat_penalty, fp = s->p.frequency_penalty, pp = s->p.presence_penalty;
  if (rp == 1.0f && fp == 0.0f && pp == 0.0f) return;
  if (++s->gen == 0) { /* wrapped: clear the stamps once every 2^32 calls */
    memset(s->stamp, 0, (size_t)s->n_vocab * sizeof *s->stamp);
    s->gen = 1;
  }
  int32_t cap = s->p.penalty_last_n;
  for (int32_t i = 0; i < s->n_ring; i++) {
    int32_t t = s->ring[(s->ring_head + i) % cap];
    if (s->stamp[t] == s->gen) continue;
    s->stamp[t] = s->gen;
    float v = L[t];
    if (rp != 1.0f) v = v > 0.0f ? v / rp : v * rp;
    v -= (float)s->counts[t] * fp + pp;
    L[t] = v;
  }
}

static void fill_logprobs(sampler *s, sample_result *out) {
  const float *L = s->logits;
  const int32_t V = s->n_vocab;
  float mx = -INFINITY;
  for (int32_t i = 0; i < V; i++)
    if (L[i] > mx) mx = L[i];
  double sum = 0.0;
  for (int32_t i = 0; i < V; i++) sum += exp((double)L[i] - mx);
  double lse = (double)mx + log(sum);
  int32_t n = s->p.n_logprobs, have = 0;
  for (int32_t i = 0; i < V && n > 0; i++) {
    float lp = (float)((double)L[i] - lse);
    if (have == n && !(lp > out->top[n - 1].logprob)) continue; /* strict: lower id wins ties */
    int32_t j = have < n ? have++ : n - 1;
    while (j > 0 && lp > out->top[j - 1].logprob) {
      out->top[j] = out->top[j - 1];
      j--;
    }
    out->top[j].token = i;
    out->top[j].logprob = lp;
  }
  out->n_top = have;
  out->logprob = (float)lse; /* temporarily: the caller subtracts */
}

int sample_next(sampler *s, const float *logits, bool want_logprob, sample_result *out) {
  const int32_t V = s->n_vocab;
  float *L = s->logits;
  memcpy(L, logits, (size_t)V * sizeof *L);
  apply_bias_and_penalties(s);
  out->n_top = 0;
  out->logprob = NAN;
  bool lp = want_logprob || s->p.n_logprobs > 0;
  double lse = 0.0;
  if (lp) {
    fill_logprobs(s, out);
    lse = out->logprob;
  }

  /* argmax, the first on ties; -inf and NaN never win (the running maximum
   * stays in a register: comparing with L[best] made every element wait
   * for the previous one's load, 3x slower) */
  int32_t best = -1;
  float best_v = -INFINITY;
  for (int32_t i = 0; i < V; i++)
    if (L[i] > best_v) {
      best_v = L[i];
      best = i;
    }
  if (best < 0) return err_set(ERR_INVALID, "sampler: every token has a logit of -inf or NaN (all banned?)");

  int32_t tok = best;
  if (s->p.temperature > 0.0f) {
    /* candidates: every finite logit; top-k selects on the logits (the
     * order exp preserves), so only the survivors pay for an exp */
    const float inv_t = 1.0f / s->p.temperature, mx = L[best];
    int64_t n = 0;
    double total = 0.0;
    for (int32_t i = 0; i < V; i++) {
      if (!(L[i] > -INFINITY)) continue;
      s->ids[n] = i;
      s->w[n] = L[i];
      n++;
    }
    bool reordered = false;
    if (s->p.top_k > 0 && s->p.top_k < n) {
      if (s->p.top_k <= 1024 && (int64_t)s->p.top_k * 8 < n) select_top_heap(s->w, s->ids, n, s->p.top_k);
      else select_top(s->w, s->ids, 0, n, s->p.top_k);
      n = s->p.top_k;
      reordered = true;
    }
    for (int64_t i = 0; i < n; i++) s->w[i] = expf((s->w[i] - mx) * inv_t);
    if (s->p.top_p < 1.0f && n > 1) {
      total = 0.0;
      for (int64_t i = 0; i < n; i++) total += s->w[i];
      /* The nucleus is the shortest prefix of the candidate order whose
       * mass reaches p. Found by a mass-following quickselect, without
       * sorting: with a flat distribution (high temperature, a random
       * model) it is most of a 32k vocabulary, and sorting it cost ~10 ms
       * per token. Only when the mass lands within rounding of p, where
       * the summation order could decide, is the prefix sorted and summed
       * in candidate order as the definition says. */
      double target = (double)s->p.top_p * total, m_prev = 0.0, m_k = 0.0;
      double eps = 1e-9 * total;
      /* first, when the weights above a small threshold already reach p
       * (a peaked distribution), only those can be in the nucleus: one
       * cheap pass shrinks the list (they all come before the rest) */
      const float thr = 1e-4f; /* w is relative to the max (<= 1) */
      double above = 0.0;
      int64_t n_above = 0;
      for (int64_t i = 0; i < n; i++)
        if (s->w[i] >= thr) above += s->w[i];
      if (above >= target + eps) {
        for (int64_t i = 0; i < n; i++)
          if (s->w[i] >= thr) swap_cand(s->w, s->ids, i, n_above++);
      } else {
        n_above = n;
      }
      int64_t keep = select_mass(s->w, s->ids, n_above, target, &m_prev, &m_k);
      if (!(m_prev < target - eps && m_k >= target + eps)) {
        int64_t m = keep < n ? keep + 1 : n;
        sort_cands(s->w, s->ids, 0, m);
        double cum = 0.0;
        keep = m;
        for (int64_t i = 0; i < m; i++) {
          cum += s->w[i];
          if (cum >= target) {
            keep = i + 1;
            break;
          }
        }
      }
      n = keep;
      reordered = true;
    }
    if (s->p.min_p > 0.0f && n > 1) {
      float wmax = 0.0f;
      for (int64_t i = 0; i < n; i++)
        if (s->w[i] > wmax) wmax = s->w[i];
      float floor_w = s->p.min_p * wmax;
      int64_t m = 0;
      for (int64_t i = 0; i < n; i++)
        if (s->w[i] >= floor_w) {
          s->ids[m] = s->ids[i];
          s->w[m] = s->w[i];
          m++;
        }
      n = m;
    }
    if (reordered && n > 1) {
      /* back to token-id order for the draw: sort ids, then look weights up
       * again from the logits (the same expression, so the same values) */
      if (n > V / 64) { /* many: mark and collect in one pass over the vocabulary */
        for (int64_t i = 0; i < n; i++) s->mark[s->ids[i]] = 1;
        int64_t j = 0;
        for (int32_t t = 0; t < V; t++)
          if (s->mark[t]) {
            s->mark[t] = 0;
            s->ids[j++] = t;
          }
      } else {
        qsort(s->ids, (size_t)n, sizeof *s->ids, cmp_id);
      }
      for (int64_t i = 0; i < n; i++) s->w[i] = expf((L[s->ids[i]] - mx) * inv_t);
    }
    total = 0.0;
    for (int64_t i = 0; i < n; i++) total += s->w[i];
    double target = sample_rng_uniform(&s->rng) * total, cum = 0.0;
    tok = s->ids[n - 1];
    for (int64_t i = 0; i < n; i++) {
      cum += s->w[i];
      if (cum > target) {
        tok = s->ids[i];
        break;
      }
    }
  }
  out->token = tok;
  if (lp) out->logprob = (float)((double)L[tok] - lse);
  return 0;
}
