/*
 * ref_quant_iq.c - reference dequantize/quantize for the grid i-quants:
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M. Each group of 8
 * (IQ2, IQ1) or 4 (IQ3) elements is one entry of a codebook (iq_grids.h)
 * times a sub-block scale, with sign bits (IQ2, IQ3) or a +-1/8 shift (IQ1).
 *
 * Decoders follow the block comments in tensor_type.h in ggml's arithmetic
 * order ((d * (0.5 + s)) * 0.25, then * grid value, then * sign), so they
 * are bit-identical with other decoders (tools/quant_ref.py checks).
 *
 * Quantizers (ours, for test models; no importance matrix): signs are taken
 * from the data (for a 7-bit sign field with an odd count of negatives the
 * element of least magnitude gets the wrong sign, as the format forces); a
 * sub-block's scale is the best of a scan of candidates, each group taking
 * the codebook entry nearest to it (exhaustive over the grid, dot products
 * computed once per group), refitted by least squares; the sub-block scales
 * are then quantized against the super-block scale and the groups re-chosen
 * at the scales as they decode.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "kernels/iq_grids.h"
#include "kernels/ref.h"
#include "kernels/ref_round.h"

static inline uint32_t ld32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void st32(uint8_t *p, uint32_t v) {
  for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> 8 * k);
}
static inline uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline void st16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

/* y[j] = (db * g[j]) * (sign bit j ? -1 : 1) for one entry of w magnitudes. */
static void grid_put(float db, uint64_t entry, int w, unsigned signs, float *y) {
  for (int j = 0; j < w; j++)
    y[j] = db * (float)iq_grid_byte(entry, j) * ((signs >> j) & 1 ? -1.0f : 1.0f);
}

/* ---- decoders ---------------------------------------------------------- */

void ref_dequant_iq2_xxs(const void *src, float *dst, int64_t n) {
  const uint8_t *p = src;
  for (int64_t i = 0; i < n / QK_K; i++, p += sizeof(block_iq2_xxs)) {
    float d = fp16_to_f32(ld16(p));
    for (int ib = 0; ib < 8; ib++) {
      uint32_t a0 = ld32(p + 2 + 8 * ib), a1 = ld32(p + 6 + 8 * ib);
      float db = d * (0.5f + (float)(a1 >> 28)) * 0.25f;
      for (int l = 0; l < 4; l++)
        grid_put(db, iq2xxs_grid[(a0 >> 8 * l) & 255], 8, iq_signs7(a1 >> 7 * l),
                 dst + i * QK_K + 32 * ib + 8 * l);
    }
  }
}

void ref_dequant_iq2_xs(const void *src, float *dst, int64_t n) {
  const uint8_t *p = src;
  for (int64_t i = 0; i < n / QK_K; i++, p += sizeof(block_iq2_xs)) {
    float d = fp16_to_f32(ld16(p));
    for (int ib = 0; ib < 8; ib++) {
      uint8_t sc = p[66 + ib];
      float db[2] = {d * (0.5f + (float)(sc & 15)) * 0.25f, d * (0.5f + (float)(sc >> 4)) * 0.25f};
      for (int l = 0; l < 4; l++) {
        uint16_t v = ld16(p + 2 + 2 * (4 * ib + l));
        grid_put(db[l / 2], iq2xs_grid[v & 511], 8, iq_signs7(v >> 9), dst + i * QK_K + 32 * ib + 8 * l);
      }
    }
  }
}

void ref_dequant_iq2_s(const void *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++) {
    block_iq2_s b;
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    for (int ib = 0; ib < 8; ib++) {
      float db[2] = {d * (0.5f + (float)(b.scales[ib] & 15)) * 0.25f,
                     d * (0.5f + (float)(b.scales[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; l++) {
        int idx = b.qs[4 * ib + l] | ((b.qh[ib] >> 2 * l) & 3) << 8;
        grid_put(db[l / 2], iq2s_grid[idx], 8, b.qs[32 + 4 * ib + l], dst + i * QK_K + 32 * ib + 8 * l);
      }
    }
  }
}

void ref_dequant_iq3_xxs(const void *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++) {
    block_iq3_xxs b;
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    for (int ib = 0; ib < 8; ib++) {
      uint32_t a = ld32(b.qs + 64 + 4 * ib);
      float db = d * (0.5f + (float)(a >> 28)) * 0.5f;
      for (int l = 0; l < 4; l++) {
        unsigned s = iq_signs7(a >> 7 * l);
        float *y = dst + i * QK_K + 32 * ib + 8 * l;
        grid_put(db, iq3xxs_grid[b.qs[8 * ib + 2 * l]], 4, s, y);
        grid_put(db, iq3xxs_grid[b.qs[8 * ib + 2 * l + 1]], 4, s >> 4, y + 4);
      }
    }
  }
}

void ref_dequant_iq3_s(const void *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++) {
    block_iq3_s b;
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    for (int ib = 0; ib < 8; ib++) {
      float db = d * (float)(1 + 2 * ((b.scales[ib / 2] >> 4 * (ib % 2)) & 15));
      for (int h = 0; h < 8; h++) {
        int idx = b.qs[8 * ib + h] | ((b.qh[ib] >> h) & 1) << 8;
        grid_put(db, iq3s_grid[idx], 4, b.signs[4 * ib + h / 2] >> 4 * (h % 2),
                 dst + i * QK_K + 32 * ib + 4 * h);
      }
    }
  }
}

/* y[j] = dl * (g[j] + delta) for one IQ1 entry (int8 values -1/0/1). */
static void iq1_put(float dl, int idx, float delta, float *y) {
  for (int j = 0; j < 8; j++) y[j] = dl * ((float)(int8_t)iq_grid_byte(iq1s_grid[idx], j) + delta);
}

void ref_dequant_iq1_s(const void *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++) {
    block_iq1_s b;
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(b.d);
    for (int ib = 0; ib < 8; ib++) {
      unsigned h = ld16((const uint8_t *)&b.qh[ib]);
      float dl = d * (float)(2 * ((h >> 12) & 7) + 1);
      float delta = h & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
      for (int l = 0; l < 4; l++)
        iq1_put(dl, b.qs[4 * ib + l] | ((h >> 3 * l) & 7) << 8, delta, dst + i * QK_K + 32 * ib + 8 * l);
    }
  }
}

/* IQ1_M's f16 super-block scale, spread over the top nibbles of the 4 scale words. */
static uint16_t iq1m_d_bits(const uint8_t *scales) {
  uint16_t w[4];
  for (int k = 0; k < 4; k++) w[k] = ld16(scales + 2 * k);
  return (uint16_t)((w[0] >> 12) | ((w[1] >> 8) & 0x00f0) | ((w[2] >> 4) & 0x0f00) | (w[3] & 0xf000));
}

void ref_dequant_iq1_m(const void *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++) {
    block_iq1_m b;
    memcpy(&b, (const uint8_t *)src + i * sizeof b, sizeof b);
    float d = fp16_to_f32(iq1m_d_bits(b.scales));
    for (int ib = 0; ib < 8; ib++) {
      unsigned w = ld16(b.scales + 2 * (ib / 2));
      float dl[2] = {d * (float)(2 * ((w >> (6 * (ib % 2))) & 7) + 1),
                     d * (float)(2 * ((w >> (6 * (ib % 2) + 3)) & 7) + 1)};
      for (int l = 0; l < 4; l++) {
        unsigned nib = b.qh[2 * ib + l / 2] >> 4 * (l % 2);
        iq1_put(dl[l / 2], b.qs[4 * ib + l] | (nib & 7) << 8, nib & 8 ? -IQ1_DELTA : IQ1_DELTA,
                dst + i * QK_K + 32 * ib + 8 * l);
      }
    }
  }
}

/* ---- codebook search --------------------------------------------------- */

/* A grid as floats for the search: n entries of w values and their squared norms. */
struct cbook {
  int n, w;
  float *v;    /* n * w */
  float *vt;   /* w * n: the same values by element, for the dot products */
  float *norm; /* n */
  int *order;  /* n: the entries by ascending norm */
  float vmax;  /* the largest |value| */
};

enum { CB_IQ2XXS, CB_IQ2XS, CB_IQ2S, CB_IQ3XXS, CB_IQ3S, CB_IQ1P, CB_IQ1M, CB_COUNT };
static struct cbook g_cb[CB_COUNT];
static pthread_once_t g_cb_once = PTHREAD_ONCE_INIT;

static const float *g_sort_norm; /* by_norm's keys (cb_init runs once, under pthread_once) */
static int by_norm(const void *a, const void *b) {
  float x = g_sort_norm[*(const int *)a], y = g_sort_norm[*(const int *)b];
  return x < y ? -1 : x > y ? 1 : *(const int *)a - *(const int *)b;
}

/* Entry e of a grid as floats: g64 (8 bytes; int8 values when is_signed) or
 * g32 (4 bytes), plus shift (IQ1's delta). */
static void cb_make(struct cbook *cb, int n, int w, const uint64_t *g64, const uint32_t *g32, bool is_signed,
                    float shift) {
  cb->n = n;
  cb->w = w;
  cb->v = malloc(sizeof(float) * (size_t)(2 * n * w + n));
  cb->order = malloc(sizeof(int) * (size_t)n);
  if (!cb->v || !cb->order) abort(); /* a few hundred KiB once per process */
  cb->norm = cb->v + n * w;
  cb->vt = cb->norm + n;
  for (int e = 0; e < n; e++) {
    float s2 = 0.0f;
    for (int j = 0; j < w; j++) {
      uint8_t byte = iq_grid_byte(g64 ? g64[e] : g32[e], j);
      float v = (is_signed ? (float)(int8_t)byte : (float)byte) + shift;
      cb->v[e * w + j] = v;
      cb->vt[j * n + e] = v;
      s2 += v * v;
    }
    cb->norm[e] = s2;
  }
  cb->vmax = 0.0f;
  for (int j = 0; j < n * w; j++) cb->vmax = fmaxf(cb->vmax, fabsf(cb->v[j]));
  g_sort_norm = cb->norm;
  for (int e = 0; e < n; e++) cb->order[e] = e;
  qsort(cb->order, (size_t)n, sizeof(int), by_norm);
}

static void cb_init(void) {
  cb_make(&g_cb[CB_IQ2XXS], 256, 8, iq2xxs_grid, NULL, false, 0.0f);
  cb_make(&g_cb[CB_IQ2XS], 512, 8, iq2xs_grid, NULL, false, 0.0f);
  cb_make(&g_cb[CB_IQ2S], 1024, 8, iq2s_grid, NULL, false, 0.0f);
  cb_make(&g_cb[CB_IQ3XXS], 256, 4, NULL, iq3xxs_grid, false, 0.0f);
  cb_make(&g_cb[CB_IQ3S], 512, 4, NULL, iq3s_grid, false, 0.0f);
  cb_make(&g_cb[CB_IQ1P], 2048, 8, iq1s_grid, NULL, true, IQ1_DELTA);
  cb_make(&g_cb[CB_IQ1M], 2048, 8, iq1s_grid, NULL, true, -IQ1_DELTA);
}

static const struct cbook *cb_get(int k) {
  pthread_once(&g_cb_once, cb_init);
  return &g_cb[k];
}

#define MAX_GROUPS 8   /* entries per sub-block searched together */
#define MAX_CB 2       /* codebooks a group may choose from (IQ1_M: both deltas) */
#define MAX_ENTRIES 2048
#define DOTS_FLOATS (32 * MAX_CB * MAX_ENTRIES) /* one block's dot products, any type */

/* One sub-block's search state: ng groups of targets (cb->w values each) and
 * the dot products of each target with every entry of each codebook. */
struct sub_search {
  const struct cbook *cb[MAX_CB];
  int ncb, ng;
  const float *t; /* ng * w targets */
  float *dots;    /* [g][c][e], MAX_ENTRIES apart */
  int *hull;      /* [g][c][k]: the entries that can win at some scale > 0 */
  int nh[MAX_GROUPS][MAX_CB];
};

/* The entries e that minimize s^2 |g_e|^2 - 2 s (t . g_e) for some s > 0:
 * the upper convex hull of the points (norm[e], dot[e]) from the least norm
 * to the largest dot (any other entry loses at every scale), so each scale
 * tried costs the hull's few points instead of the whole grid. */
static int make_hull(const struct cbook *cb, const float *dot, int *h) {
  int m = 0;
  for (int i = 0; i < cb->n; i++) {
    int e = cb->order[i];
    double x = cb->norm[e], y = dot[e];
    if (m && cb->norm[h[m - 1]] == x) {
      if (y <= dot[h[m - 1]]) continue;
      m--;
    }
    while (m >= 2) {
      double ox = cb->norm[h[m - 2]], oy = dot[h[m - 2]], ax = cb->norm[h[m - 1]], ay = dot[h[m - 1]];
      if ((ax - ox) * (y - oy) - (ay - oy) * (x - ox) < 0.0) break; /* a clockwise turn: a stays */
      m--;
    }
    h[m++] = e;
  }
  int top = 0; /* past the largest dot the hull only loses */
  for (int k = 1; k < m; k++)
    if (dot[h[k]] > dot[h[top]]) top = k;
  return top + 1;
}

static void fill_dots(struct sub_search *ss) {
  for (int g = 0; g < ss->ng; g++) {
    for (int c = 0; c < ss->ncb; c++) {
      const struct cbook *cb = ss->cb[c];
      const float *t = ss->t + g * cb->w;
      float *dot = ss->dots + (size_t)(g * ss->ncb + c) * MAX_ENTRIES;
      /* element-major, so consecutive entries' sums are independent (no
       * add-latency chain); each entry still adds its elements in order */
      for (int e0 = 0; e0 < cb->n; e0 += 8) { /* grids have a multiple of 8 entries */
        float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int j = 0; j < cb->w; j++) {
          const float *vj = cb->vt + (size_t)j * cb->n + e0;
          for (int k = 0; k < 8; k++) a[k] += t[j] * vj[k];
        }
        memcpy(dot + e0, a, sizeof a);
      }
      ss->nh[g][c] = make_hull(cb, dot, ss->hull + (size_t)(g * ss->ncb + c) * MAX_ENTRIES);
    }
  }
}

/* Best entry over the codebooks for group g at scale s; returns c * n + e and
 * adds its squared error minus |t|^2 to *err. */
static int group_best(const struct sub_search *ss, int g, float s, float *err) {
  int best = 0;
  float be = INFINITY;
  for (int c = 0; c < ss->ncb; c++) {
    const struct cbook *cb = ss->cb[c];
    const float *dot = ss->dots + (size_t)(g * ss->ncb + c) * MAX_ENTRIES;
    const int *h = ss->hull + (size_t)(g * ss->ncb + c) * MAX_ENTRIES;
    for (int k = 0; k < ss->nh[g][c]; k++) {
      int e = h[k];
      float v = s * s * cb->norm[e] - 2.0f * s * dot[e];
      if (v < be) {
        be = v;
        best = c * cb->n + e;
      }
    }
  }
  *err += be;
  return best;
}

/* Chooses the groups' entries at scale s; returns the error (minus |t|^2). */
static float groups_at(const struct sub_search *ss, float s, int *idx) {
  float err = 0.0f;
  for (int g = 0; g < ss->ng; g++) idx[g] = group_best(ss, g, s, &err);
  return err;
}

static const float *entry_vals(const struct sub_search *ss, int code) {
  const struct cbook *cb = ss->cb[code / ss->cb[0]->n];
  return cb->v + (size_t)(code % cb->n) * cb->w;
}

/* The sub-block's best positive scale: a scan of candidates around
 * amax / (largest entry value), each refitted by least squares; *err_out is
 * its error (minus |t|^2). Needs fill_dots first. */
static float sub_scale(const struct sub_search *ss, float *err_out) {
  int w = ss->cb[0]->w, nt = ss->ng * w;
  float amax = 0.0f, vmax = 0.0f;
  for (int j = 0; j < nt; j++) amax = fmaxf(amax, fabsf(ss->t[j]));
  *err_out = 0.0f;
  if (amax == 0.0f) return 0.0f;
  for (int c = 0; c < ss->ncb; c++)
    vmax = fmaxf(vmax, ss->cb[c]->vmax);
  float best_s = amax / vmax, best_e = INFINITY;
  int idx[MAX_GROUPS];
  for (int c = 0; c < 12; c++) {
    float s = amax / vmax * (0.6f + 0.1f * (float)c);
    groups_at(ss, s, idx);
    double num = 0.0, den = 0.0;
    for (int g = 0; g < ss->ng; g++) {
      const float *v = entry_vals(ss, idx[g]);
      for (int j = 0; j < w; j++) {
        num += (double)ss->t[g * w + j] * v[j];
        den += (double)v[j] * v[j];
      }
    }
    if (den > 0.0 && num > 0.0) s = (float)(num / den);
    float e = groups_at(ss, s, idx);
    if (e < best_e) {
      best_e = e;
      best_s = s;
    }
  }
  *err_out = best_e;
  return best_s;
}

/* Sub-block scale levels: the decoded scale is d * (a + b * s), s in 0..L-1. */
struct scale_map {
  float a, b;
  int levels;
};

/* Macros, not const objects: they initialise static structs below, and a
 * const object is not a constant expression in C17 (clang refuses it). */
#define SM_IQ2 {0.125f, 0.25f, 16}
#define SM_IQ3XXS {0.25f, 0.5f, 16}
#define SM_IQ3S {1.0f, 2.0f, 16}
#define SM_IQ1 {1.0f, 2.0f, 8}

/* Targets of one group of 8 with a sign field: |x|, except that with
 * `parity` and an odd count of negatives the least |x| keeps the wrong sign
 * (its target is -|x|). Returns the 8 sign bits to store. */
static unsigned signed_targets(const float *x, bool parity, float *t) {
  unsigned s = 0;
  int least = 0;
  for (int j = 0; j < 8; j++) {
    t[j] = fabsf(x[j]);
    if (x[j] < 0.0f) s |= 1u << j;
    if (t[j] < t[least]) least = j;
  }
  if (parity && __builtin_popcount(s) % 2) {
    s ^= 1u << least;
    t[least] = -t[least];
  }
  return s;
}

/* How one grid type is searched. */
struct grid_spec {
  int sub;           /* elements per sub-block scale */
  int cb[MAX_CB];    /* codebooks (enum CB_*) */
  int ncb;
  bool per_sub;      /* the codebook is chosen per sub-block (IQ1_S's delta), else per group */
  bool has_signs, parity;
  struct scale_map m;
};

/* The result for one 256-element block. */
struct grid_block {
  uint16_t d;        /* f16 super-block scale */
  int sc[16];        /* scale level per sub-block */
  int cbsel[16];     /* per_sub: the codebook chosen per sub-block */
  int code[64];      /* per group of w: c * n + e (per group) or e (per_sub) */
  unsigned signs[32];/* 8 sign bits per 8 elements */
};

static void quant_grid_block(const float *x, const struct grid_spec *gs, float *dots, int *hull,
                             struct grid_block *out) {
  float t[QK_K];
  for (int k = 0; k < 32; k++) {
    if (gs->has_signs) out->signs[k] = signed_targets(x + 8 * k, gs->parity, t + 8 * k);
    else memcpy(t + 8 * k, x + 8 * k, 8 * sizeof(float));
  }
  const struct cbook *cb0 = cb_get(gs->cb[0]);
  int nsub = QK_K / gs->sub, gps = gs->sub / cb0->w;
  int nopt = gs->per_sub ? gs->ncb : 1; /* searches per sub-block */
  struct sub_search ss[16][MAX_CB];
  float s[16], mx = 0.0f;
  for (int k = 0; k < nsub; k++) {
    float best = INFINITY;
    for (int o = 0; o < nopt; o++) {
      struct sub_search *q = &ss[k][o];
      q->ncb = gs->per_sub ? 1 : gs->ncb;
      for (int c = 0; c < q->ncb; c++) q->cb[c] = cb_get(gs->cb[gs->per_sub ? o : c]);
      q->ng = gps;
      q->t = t + k * gs->sub;
      q->dots = dots + (size_t)(k * nopt + o) * gps * q->ncb * MAX_ENTRIES;
      q->hull = hull + (size_t)(k * nopt + o) * gps * q->ncb * MAX_ENTRIES;
      fill_dots(q);
      float e, sk = sub_scale(q, &e);
      if (e < best) {
        best = e;
        s[k] = sk;
        out->cbsel[k] = o;
      }
    }
    mx = fmaxf(mx, s[k]);
  }
  out->d = f32_to_fp16(mx / (gs->m.a + gs->m.b * (float)(gs->m.levels - 1)));
  float d = fp16_to_f32(out->d);
  for (int k = 0; k < nsub; k++) {
    out->sc[k] = d == 0.0f ? 0 : qround((s[k] / d - gs->m.a) / gs->m.b, 0, gs->m.levels - 1);
    groups_at(&ss[k][out->cbsel[k]], d * (gs->m.a + gs->m.b * (float)out->sc[k]), out->code + k * gps);
  }
}

/* Runs quant_grid_block over a row, handing each block to `put`. */
static void quant_grid_row(const float *src, void *dst, int64_t n, size_t bytes, const struct grid_spec *gs,
                           void (*put)(const struct grid_block *gb, uint8_t *out)) {
  float *dots = malloc(sizeof(float) * DOTS_FLOATS);
  int *hull = malloc(sizeof(int) * DOTS_FLOATS);
  if (!dots || !hull) abort();
  for (int64_t i = 0; i < n / QK_K; i++) {
    struct grid_block gb;
    memset(&gb, 0, sizeof gb);
    quant_grid_block(src + i * QK_K, gs, dots, hull, &gb);
    put(&gb, (uint8_t *)dst + (size_t)i * bytes);
  }
  free(dots);
  free(hull);
}

/* ---- quantizers -------------------------------------------------------- */

static void put_iq2_xxs(const struct grid_block *gb, uint8_t *p) {
  st16(p, gb->d);
  for (int ib = 0; ib < 8; ib++) {
    uint32_t a0 = 0, a1 = (uint32_t)gb->sc[ib] << 28;
    for (int l = 0; l < 4; l++) {
      a0 |= (uint32_t)gb->code[4 * ib + l] << 8 * l;
      a1 |= (gb->signs[4 * ib + l] & 127u) << 7 * l;
    }
    st32(p + 2 + 8 * ib, a0);
    st32(p + 6 + 8 * ib, a1);
  }
}

void ref_quant_iq2_xxs(const float *src, void *dst, int64_t n) {
  static const struct grid_spec gs = {32, {CB_IQ2XXS}, 1, false, true, true, SM_IQ2};
  quant_grid_row(src, dst, n, sizeof(block_iq2_xxs), &gs, put_iq2_xxs);
}

static void put_iq2_xs(const struct grid_block *gb, uint8_t *p) {
  st16(p, gb->d);
  for (int g = 0; g < 32; g++) st16(p + 2 + 2 * g, (uint16_t)(gb->code[g] | (gb->signs[g] & 127u) << 9));
  for (int ib = 0; ib < 8; ib++) p[66 + ib] = (uint8_t)(gb->sc[2 * ib] | gb->sc[2 * ib + 1] << 4);
}

void ref_quant_iq2_xs(const float *src, void *dst, int64_t n) {
  static const struct grid_spec gs = {16, {CB_IQ2XS}, 1, false, true, true, SM_IQ2};
  quant_grid_row(src, dst, n, sizeof(block_iq2_xs), &gs, put_iq2_xs);
}

static void put_iq2_s(const struct grid_block *gb, uint8_t *p) {
  block_iq2_s b;
  memset(&b, 0, sizeof b);
  b.d = gb->d;
  for (int g = 0; g < 32; g++) {
    b.qs[g] = (uint8_t)gb->code[g];
    b.qh[g / 4] |= (uint8_t)((gb->code[g] >> 8) << 2 * (g % 4));
    b.qs[32 + g] = (uint8_t)gb->signs[g];
  }
  for (int ib = 0; ib < 8; ib++) b.scales[ib] = (uint8_t)(gb->sc[2 * ib] | gb->sc[2 * ib + 1] << 4);
  memcpy(p, &b, sizeof b);
}

void ref_quant_iq2_s(const float *src, void *dst, int64_t n) {
  static const struct grid_spec gs = {16, {CB_IQ2S}, 1, false, true, false, SM_IQ2};
  quant_grid_row(src, dst, n, sizeof(block_iq2_s), &gs, put_iq2_s);
}

static void put_iq3_xxs(const struct grid_block *gb, uint8_t *p) {
  block_iq3_xxs b;
  b.d = gb->d;
  for (int h = 0; h < 64; h++) b.qs[h] = (uint8_t)gb->code[h];
  for (int ib = 0; ib < 8; ib++) {
    uint32_t a = (uint32_t)gb->sc[ib] << 28;
    for (int l = 0; l < 4; l++) a |= (gb->signs[4 * ib + l] & 127u) << 7 * l;
    st32(b.qs + 64 + 4 * ib, a);
  }
  memcpy(p, &b, sizeof b);
}

void ref_quant_iq3_xxs(const float *src, void *dst, int64_t n) {
  static const struct grid_spec gs = {32, {CB_IQ3XXS}, 1, false, true, true, SM_IQ3XXS};
  quant_grid_row(src, dst, n, sizeof(block_iq3_xxs), &gs, put_iq3_xxs);
}

static void put_iq3_s(const struct grid_block *gb, uint8_t *p) {
  block_iq3_s b;
  memset(&b, 0, sizeof b);
  b.d = gb->d;
  for (int h = 0; h < 64; h++) {
    b.qs[h] = (uint8_t)gb->code[h];
    b.qh[h / 8] |= (uint8_t)((gb->code[h] >> 8) << h % 8);
  }
  for (int g = 0; g < 32; g++) b.signs[g] = (uint8_t)gb->signs[g];
  for (int ib = 0; ib < 8; ib++) b.scales[ib / 2] |= (uint8_t)(gb->sc[ib] << 4 * (ib % 2));
  memcpy(p, &b, sizeof b);
}

void ref_quant_iq3_s(const float *src, void *dst, int64_t n) {
  static const struct grid_spec gs = {32, {CB_IQ3S}, 1, false, true, false, SM_IQ3S};
  quant_grid_row(src, dst, n, sizeof(block_iq3_s), &gs, put_iq3_s);
}

static void put_iq1_s(const struct grid_block *gb, uint8_t *p) {
  block_iq1_s b;
  b.d = gb->d;
  for (int ib = 0; ib < 8; ib++) {
    unsigned h = (unsigned)gb->sc[ib] << 12 | (gb->cbsel[ib] ? 0x8000u : 0u);
    for (int l = 0; l < 4; l++) {
      int e = gb->code[4 * ib + l];
      b.qs[4 * ib + l] = (uint8_t)e;
      h |= (unsigned)(e >> 8) << 3 * l;
    }
    st16((uint8_t *)&b.qh[ib], (uint16_t)h);
  }
  memcpy(p, &b, sizeof b);
}

void ref_quant_iq1_s(const float *src, void *dst, int64_t n) {
  static const struct grid_spec gs = {32, {CB_IQ1P, CB_IQ1M}, 2, true, false, false, SM_IQ1};
  quant_grid_row(src, dst, n, sizeof(block_iq1_s), &gs, put_iq1_s);
}

static void put_iq1_m(const struct grid_block *gb, uint8_t *p) {
  block_iq1_m b;
  memset(&b, 0, sizeof b);
  uint16_t w[4] = {0, 0, 0, 0};
  for (int ib = 0; ib < 8; ib++) {
    w[ib / 2] |= (uint16_t)((gb->sc[2 * ib] | gb->sc[2 * ib + 1] << 3) << 6 * (ib % 2));
    for (int l = 0; l < 4; l++) {
      int code = gb->code[4 * ib + l], e = code % 2048, neg = code / 2048;
      b.qs[4 * ib + l] = (uint8_t)e;
      b.qh[2 * ib + l / 2] |= (uint8_t)(((e >> 8) | neg << 3) << 4 * (l % 2));
    }
  }
  for (int k = 0; k < 4; k++) {
    w[k] |= (uint16_t)(((gb->d >> 4 * k) & 15) << 12);
    st16(b.scales + 2 * k, w[k]);
  }
  memcpy(p, &b, sizeof b);
}

void ref_quant_iq1_m(const float *src, void *dst, int64_t n) {
  static const struct grid_spec gs = {16, {CB_IQ1P, CB_IQ1M}, 2, false, false, false, SM_IQ1};
  quant_grid_row(src, dst, n, sizeof(block_iq1_m), &gs, put_iq1_m);
}
