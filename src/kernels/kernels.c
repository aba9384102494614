/*
 * kernels.c - kern_matmul: argument checks, run-time ISA dispatch, the
 * activation quantization phase and the work split across the thread pool.
 *
 * Start at kern_matmul. Dispatch happens once (pthread_once): the first of
 * kern_ops_avx512 / kern_ops_avx2 / kern_ops_neon / kern_ops_scalar that
 * reports the CPU can run it fills a table of per-type tile kernels (the
 * variants are bit-identical to each other for the quantized types; for
 * F32/F16/BF16 the avx512 variant's 16-lane kernels sum in another order
 * and agree with the others to f32 rounding); a type with no tile kernel,
 * or every type while the reference is forced, goes through ref_vec_dot
 * (double accumulation), which is the definition of correct.
 *
 * Work split: output (row chunk x token group) rectangles handed out by an
 * atomic counter, so a thread slowed by another process does not hold up
 * the call. Every output element is computed by exactly one tile call whose
 * arithmetic does not depend on the split (kernels_impl.h), so results are
 * identical for any thread count. Within a rectangle, tokens are walked in
 * groups of KERN_MM_TOK_BLOCK outside the rows so that both the quantized
 * activations and the chunk's weight rows stay in L2.
 */
#include "kernels/kernels.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/attn.h"
#include "kernels/kernels_impl.h"
#include "kernels/ref.h"

#define KERN_MM_TOK_BLOCK 8 /* tokens per inner sweep over a row chunk */
/* A type with a wide one-row tile (tile_nt > KERN_TILE_TOKENS) uses it while
 * a token block's activations fit in this many bytes (L1 data cache); past
 * that, its two-row tile halves the activation traffic from L2 instead. */
#define KERN_MM_L1_ACT (32 * 1024)

static struct kern_ops g_ops;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static atomic_bool g_force_ref;
/* The chosen variant is avx2 or avx512-*: the x86 SIMD forms of the
 * element-wise ops and attention run (kern_avx2_fast, asked per op call,
 * so decided here once per dispatch instead of comparing names each time). */
static atomic_bool g_x86_simd;
static atomic_bool g_x86_512; /* ... and it is avx512-*: the 512-bit attention step (kern_x512_fast) */
static pthread_key_t g_scratch_key; /* per-thread scratch for calls without a pool */
static bool g_scratch_key_ok;
static pthread_key_t g_rect_key; /* per-thread working memory of rect kernels */
static bool g_rect_key_ok;

struct kern_tls_scratch {
  void *p;
  size_t cap;
};

static void kern_tls_scratch_free(void *arg) {
  struct kern_tls_scratch *s = arg;
  free(s->p);
  free(s);
}

/* The variants in order of preference, the best first. */
static int (*const g_variants[])(struct kern_ops *) = {kern_ops_avx512, kern_ops_avx2, kern_ops_neon,
                                                       kern_ops_scalar};

/* Fills g_ops with the best variant the CPU runs, skipping those ranked
 * above `cap` (an isa name, or NULL for no cap). False when cap names no
 * variant this CPU runs (g_ops then unchanged). */
static bool kern_dispatch(const char *cap) {
  bool capped = cap != NULL;
  for (size_t i = 0; i < sizeof g_variants / sizeof g_variants[0]; i++) {
    struct kern_ops o;
    memset(&o, 0, sizeof o);
    if (!g_variants[i](&o)) continue;
    if (capped && strcmp(o.isa, cap) != 0) continue;
    g_ops = o;
    atomic_store(&g_x86_simd, strcmp(o.isa, "avx2") == 0 || strncmp(o.isa, "avx512", 6) == 0);
    atomic_store(&g_x86_512, strncmp(o.isa, "avx512", 6) == 0);
    return true;
  }
  return false;
}

static void kern_init(void) {
  memset(&g_ops, 0, sizeof g_ops);
  g_ops.isa = "scalar";
  g_scratch_key_ok = pthread_key_create(&g_scratch_key, kern_tls_scratch_free) == 0;
  g_rect_key_ok = pthread_key_create(&g_rect_key, kern_tls_scratch_free) == 0;
  const char *env = getenv("PARLEY_KERNELS");
  if (env && strcmp(env, "reference") == 0) atomic_store(&g_force_ref, true);
  /* PARLEY_KERNELS=avx2 (any isa name): that variant, if the CPU runs it,
   * for A/B runs of two variants with one binary */
  if (!env || !*env || strcmp(env, "reference") == 0 || !kern_dispatch(env)) kern_dispatch(NULL);
}


static const struct kern_ops *kern_get_ops(void) {
  pthread_once(&g_once, kern_init);
  return &g_ops;
}

bool kern_use_isa(const char *isa) {
  kern_get_ops();
  return kern_dispatch(isa);
}

void kern_force_reference(bool on) {
  kern_get_ops();
  atomic_store(&g_force_ref, on);
}

const char *kern_isa(void) {
  const struct kern_ops *o = kern_get_ops();
  return atomic_load(&g_force_ref) ? "reference" : o->isa;
}

bool kern_has_fast(int type) {
  const struct kern_ops *o = kern_get_ops();
  return type >= 0 && type < TENSOR_TYPE_COUNT && o->tile[type] && !atomic_load(&g_force_ref);
}

/* The calling thread's buffer under `key`, of at least `bytes` (kept until
 * the thread exits). g_scratch_key's is for kern_matmul without a pool:
 * callers run it inside their own tpool workers (attention per head), where
 * a malloc per call would add up; g_rect_key's for kern_rect_scratch. */
static void *kern_tls_get(pthread_key_t key, bool key_ok, size_t bytes) {
  if (!key_ok) return NULL;
  struct kern_tls_scratch *s = pthread_getspecific(key);
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (pthread_setspecific(key, s) != 0) {
      free(s);
      return NULL;
    }
  }
  if (s->cap < bytes) {
    size_t cap = bytes < 4096 ? 4096 : bytes + bytes / 4;
    void *p = NULL;
    if (posix_memalign(&p, 64, cap) != 0) return NULL;
    free(s->p);
    s->p = p;
    s->cap = cap;
  }
  return s->p;
}

static void *kern_tls_scratch(size_t bytes) { return kern_tls_get(g_scratch_key, g_scratch_key_ok, bytes); }

void *kern_rect_scratch(size_t bytes) {
  kern_get_ops(); /* creates the key */
  return kern_tls_get(g_rect_key, g_rect_key_ok, bytes);
}

const struct kern_ops *kern_ops_get(void) { return kern_get_ops(); }
bool kern_ref_forced(void) { return atomic_load(&g_force_ref); }

bool kern_avx2_fast(void) {
  kern_get_ops();
  return atomic_load_explicit(&g_x86_simd, memory_order_relaxed) && !atomic_load(&g_force_ref);
}

bool kern_x512_fast(void) { return kern_avx2_fast() && atomic_load_explicit(&g_x86_512, memory_order_relaxed); }

void *kern_act_scratch(thread_pool *tp, size_t bytes) {
  return tp ? tpool_scratch(tp, 0, bytes) : kern_tls_scratch(bytes);
}

/* ---- portable activation quantizers ------------------------------------ */

void kern_quant_q8_c(const float *x, void *dst, int64_t n) {
  kern_block_q8 *b = dst;
  for (int64_t i = 0; i < n / 32; i++, x += 32) {
    float amax = 0.0f;
    bool bad = false;
    for (int j = 0; j < 32; j++) {
      float a = fabsf(x[j]);
      bad |= !(a <= FLT_MAX);
      amax = fmaxf(amax, a);
    }
    if (bad) { /* NaN or Inf: make every dot product with this block NaN */
      memset(b[i].qs, 0, sizeof b[i].qs);
      b[i].d = b[i].s = NAN;
      continue;
    }
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; j++) {
      int q = (int)lrintf(x[j] * id);
      b[i].qs[j] = (int8_t)q;
      sum += q;
    }
    b[i].d = d;
    b[i].s = d * (float)sum;
  }
}

void kern_quant_q8s_c(const float *x, void *dst, int64_t n) {
  kern_quant_q8_c(x, dst, n);
  kern_block_q8s *b = dst;
  for (int64_t i = 0; i < n / 32; i++) {
    int sum = 0;
    for (int j = 0; j < 32; j++) sum += b[i].qs[j];
    b[i].s8 = 8 * sum;
  }
}

void kern_quant_q8_K_c(const float *x, void *dst, int64_t n) {
  block_q8_K *b = dst;
  for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
    float amax = 0.0f;
    bool bad = false;
    for (int j = 0; j < QK_K; j++) {
      float a = fabsf(x[j]);
      bad |= !(a <= FLT_MAX);
      amax = fmaxf(amax, a);
    }
    if (bad) {
      memset(&b[i], 0, sizeof b[i]);
      b[i].d = NAN;
      continue;
    }
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK_K; j++) b[i].qs[j] = (int8_t)lrintf(x[j] * id);
    for (int k = 0; k < QK_K / 16; k++) {
      int s = 0;
      for (int j = 0; j < 16; j++) s += b[i].qs[16 * k + j];
      b[i].bsums[k] = (int16_t)s;
    }
    b[i].d = d;
  }
}

void kern_pair_from_q8(const kern_block_q8 *b, int nb, kern_pair_q8 *p) {
  memset(p, 0, sizeof *p);
  for (int k = 0; k < nb; k++) {
    memcpy(p->a + 16 * k, b[k].qs, 16);
    memcpy(p->b16 + 16 * k, b[k].qs + 16, 16);
    for (int l = 0; l < 4; l++) p->d[4 * k + l] = b[k].d;
  }
  for (int i = 0; i < 16; i++)
    p->c[i] = (int16_t)(8 * (p->a[2 * i] + p->a[2 * i + 1] + p->b16[2 * i] + p->b16[2 * i + 1]));
}

void kern_quant_q8p_c(const float *x, void *dst, int64_t n) {
  kern_pair_q8 *p = dst;
  kern_block_q8 tmp[2];
  for (int64_t i = 0; i < n; i += 64, p++) {
    int nb = n - i >= 64 ? 2 : 1;
    kern_quant_q8_c(x + i, tmp, 32 * nb);
    kern_pair_from_q8(tmp, nb, p);
  }
}

void kern_q8_K_interleave(block_q8_K *b, int64_t nb) {
  for (int64_t ib = 0; ib < nb; ib++) {
    int8_t tmp[QK_K];
    for (int m = 0; m < 4; m++)
      for (int h = 0; h < 2; h++)
        for (int half = 0; half < 2; half++)
          for (int i = 0; i < 4; i++)
            for (int k = 0; k < 4; k++)
              tmp[64 * m + 32 * h + 16 * half + 4 * i + k] = b[ib].qs[32 * (2 * i + h) + 16 * half + 4 * m + k];
    memcpy(b[ib].qs, tmp, sizeof tmp);
    float fsum[8];
    for (int k = 0; k < 8; k++) fsum[k] = b[ib].d * (float)(b[ib].bsums[2 * k] + b[ib].bsums[2 * k + 1]);
    _Static_assert(sizeof fsum == sizeof b[ib].bsums, "fsum fits bsums");
    memcpy(b[ib].bsums, fsum, sizeof fsum);
  }
}

void kern_quant_q8_Kx_c(const float *x, void *dst, int64_t n) {
  kern_quant_q8_K_c(x, dst, n);
  kern_q8_K_interleave(dst, n / QK_K);
}

void kern_q8_K6_interleave(block_q8_K *b, int64_t nb) {
  for (int64_t ib = 0; ib < nb; ib++) {
    int8_t tmp[QK_K];
    for (int c = 0; c < 4; c++)
      for (int u = 0; u < 2; u++)
        for (int j = 0; j < 2; j++)
          for (int w = 0; w < 4; w++)
            for (int k = 0; k < 4; k++)
              tmp[64 * c + 32 * u + 16 * j + 4 * w + k] =
                  b[ib].qs[64 * c + 32 * (w % 2) + 16 * j + 8 * u + 4 * (w / 2) + k];
    memcpy(b[ib].qs, tmp, sizeof tmp);
  }
}

void kern_quant_q8_K6x_c(const float *x, void *dst, int64_t n) {
  kern_quant_q8_K_c(x, dst, n);
  kern_q8_K6_interleave(dst, n / QK_K);
}

void kern_q8_K5_interleave(block_q8_K *b, int64_t nb) {
  for (int64_t ib = 0; ib < nb; ib++) {
    for (int p = 0; p < 4; p++) {
      int8_t tmp[16];
      memcpy(tmp, b[ib].qs + 64 * p + 16, 16);
      memcpy(b[ib].qs + 64 * p + 16, b[ib].qs + 64 * p + 32, 16);
      memcpy(b[ib].qs + 64 * p + 32, tmp, 16);
    }
    float fsum[8];
    for (int k = 0; k < 8; k++) fsum[k] = b[ib].d * (float)(b[ib].bsums[2 * k] + b[ib].bsums[2 * k + 1]);
    memcpy(b[ib].bsums, fsum, sizeof fsum);
  }
}

void kern_quant_q8_K5x_c(const float *x, void *dst, int64_t n) {
  kern_quant_q8_K_c(x, dst, n);
  kern_q8_K5_interleave(dst, n / QK_K);
}

void kern_q8_K3_interleave(block_q8_K *b, int64_t nb) {
  for (int64_t ib = 0; ib < nb; ib++) {
    int8_t tmp[QK_K];
    for (int h = 0; h < 2; h++)
      for (int m = 0; m < 4; m++)
        for (int j = 0; j < 2; j++)
          for (int i = 0; i < 4; i++)
            for (int k = 0; k < 4; k++)
              tmp[128 * h + 32 * m + 16 * j + 4 * i + k] = b[ib].qs[128 * h + 32 * i + 16 * j + 4 * m + k];
    memcpy(b[ib].qs, tmp, sizeof tmp);
  }
}

void kern_quant_q8_K3x_c(const float *x, void *dst, int64_t n) {
  kern_quant_q8_K_c(x, dst, n);
  kern_q8_K3_interleave(dst, n / QK_K);
}

void kern_split_tokens(int nth, int64_t n_row_chunks, int64_t n_tokens, int tnt, int64_t *chunk_toks,
                       int64_t *n_tok_chunks) {
  int64_t want = (int64_t)nth * 8;
  *chunk_toks = n_tokens;
  *n_tok_chunks = 1;
  if (nth > 1 && n_row_chunks < want && n_tokens > tnt) {
    int64_t groups = (n_tokens + tnt - 1) / tnt;
    int64_t split = (want + n_row_chunks - 1) / n_row_chunks;
    if (split > groups) split = groups;
    int64_t per = (groups + split - 1) / split;
    *chunk_toks = per * tnt;
    *n_tok_chunks = (n_tokens + *chunk_toks - 1) / *chunk_toks;
  }
}

size_t kern_act_row_bytes(int act, int64_t n_cols) {
  switch ((enum kern_act)act) {
  case KERN_ACT_Q8: return (size_t)(n_cols / 32) * sizeof(kern_block_q8);
  case KERN_ACT_Q8_K:
  case KERN_ACT_Q8_KX:
  case KERN_ACT_Q8_K6X:
  case KERN_ACT_Q8_K5X:
  case KERN_ACT_Q8_K3X: return (size_t)(n_cols / QK_K) * sizeof(block_q8_K);
  case KERN_ACT_Q8P: return (size_t)((n_cols / 32 + 1) / 2) * sizeof(kern_pair_q8);
  case KERN_ACT_F32: break;
  }
  return (size_t)n_cols * sizeof(float);
}

/* ---- the matmul driver --------------------------------------------------- */

struct mm_job {
  struct kern_mm mm;
  struct kern_split split;
};

static void mm_quant_worker(void *arg, int ith, int nth) {
  struct kern_mm *j = arg;
  int64_t t0 = j->n_tokens * ith / nth, t1 = j->n_tokens * (ith + 1) / nth;
  for (int64_t t = t0; t < t1; t++)
    j->quant(j->x + t * j->n_cols, j->xq + (size_t)t * j->xa_stride, j->n_cols);
}

void kern_mm_rect(const struct kern_mm *j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  if (!j->tile) {
    for (int64_t t = t0; t < t1; t++)
      for (int64_t r = r0; r < r1; r++)
        ref_vec_dot((uint32_t)j->type, j->W + (size_t)r * j->row_bytes, j->x + t * j->n_cols,
                    j->n_cols, &j->y[t * j->n_rows + r]);
    return;
  }
  if (j->rect && t1 - t0 > 1) { /* bit-identical to the tiles (kernels_impl.h) */
    j->rect(j->W + (size_t)r0 * j->row_bytes, j->row_bytes, r1 - r0, j->n_cols, j->xa + (size_t)t0 * j->xa_stride,
            j->xa_stride, t1 - t0, &j->y[t0 * j->n_rows + r0], (size_t)j->n_rows);
    return;
  }
  if (j->gemv && t1 - t0 == 1) { /* one token (decode): bit-identical to the tile at nt = 1 */
    j->gemv(j->W + (size_t)r0 * j->row_bytes, j->row_bytes, r1 - r0, j->n_cols, j->xa + (size_t)t0 * j->xa_stride,
            &j->y[t0 * j->n_rows + r0]);
    return;
  }
  for (int64_t tb = t0; tb < t1; tb += KERN_MM_TOK_BLOCK) {
    int64_t te = tb + KERN_MM_TOK_BLOCK < t1 ? tb + KERN_MM_TOK_BLOCK : t1;
    int64_t r = r0;
    /* pairs of rows only with several tokens: with one token (decode,
     * memory-bound) the two-row tile measured slower than the one-row
     * tile (Q8_0 tg 5-8 vs 6-12 t/s, interleaved runs) */
    if (j->rows2 && te - tb > 1)
      for (; r + 2 <= r1; r += 2) {
        const uint8_t *w = j->W + (size_t)r * j->row_bytes;
        for (int64_t t = tb; t < te; t += KERN_TILE_TOKENS) {
          int nt = (int)(te - t < KERN_TILE_TOKENS ? te - t : KERN_TILE_TOKENS);
          j->tile2(w, j->row_bytes, j->n_cols, j->xa + (size_t)t * j->xa_stride, j->xa_stride, nt,
                   &j->y[t * j->n_rows + r], (size_t)j->n_rows);
        }
      }
    for (; r < r1; r++) {
      const uint8_t *w = j->W + (size_t)r * j->row_bytes;
      for (int64_t t = tb; t < te; t += j->tnt) {
        int nt = (int)(te - t < j->tnt ? te - t : j->tnt);
        j->tile(w, j->n_cols, j->xa + (size_t)t * j->xa_stride, j->xa_stride, nt,
                &j->y[t * j->n_rows + r], (size_t)j->n_rows);
      }
    }
  }
}

static void mm_worker(void *arg, int ith, int nth) {
  (void)ith;
  (void)nth;
  struct mm_job *j = arg;
  int64_t r0, r1, t0, t1;
  while (kern_split_next(&j->split, &r0, &r1, &t0, &t1)) kern_mm_rect(&j->mm, r0, r1, t0, t1);
}

#ifndef KERN_DECODE_CHUNK_BYTES
#define KERN_DECODE_CHUNK_BYTES 32768 /* see kern_split_min_units in kernels_impl.h */
#endif

int64_t kern_split_min_units(size_t unit_bytes, int64_t n_tokens) {
  if (n_tokens != 1 || unit_bytes == 0 || KERN_DECODE_CHUNK_BYTES == 0) return 1;
  return (int64_t)((KERN_DECODE_CHUNK_BYTES + unit_bytes - 1) / unit_bytes);
}

/* n rounded up to a multiple of align (>= 1). */
static int64_t split_round(int64_t n, int64_t align) { return (n + align - 1) / align * align; }

#ifndef KERN_SPLIT_GUIDED_DIV
#define KERN_SPLIT_GUIDED_DIV 2 /* a guided claim takes unclaimed / (this x nth) units */
#endif

void kern_split_plan(struct kern_split *s, int nth, int64_t n_units, int64_t min_units, int64_t align,
                     int64_t n_tokens, int tnt) {
  if (align < 1) align = 1;
  min_units = split_round(min_units, align);
  int64_t want = (int64_t)nth * 8;
  int64_t cu = split_round((n_units + want - 1) / want, align);
  if (cu < min_units) cu = min_units;
  s->n_units = n_units;
  s->n_tokens = n_tokens;
  s->align = align;
  s->chunk = cu;
  s->n_unit_chunks = (n_units + cu - 1) / cu;
  s->guided_div = 0;
  kern_split_tokens(nth, s->n_unit_chunks, n_tokens, tnt, &s->chunk_toks, &s->n_tok_chunks);
  if (nth > 1 && s->n_tok_chunks == 1 && n_units >= (int64_t)nth * 16 * min_units) {
    s->guided_div = (int64_t)nth * KERN_SPLIT_GUIDED_DIV;
    s->chunk = min_units;
  }
  atomic_init(&s->next, 0);
}

int kern_mm_setup(struct kern_mm *j, int type, const void *W, int64_t n_rows, int64_t n_cols, const float *x,
                  int64_t n_tokens, float *y) {
  const struct kern_ops *ops = kern_get_ops();
  const struct tensor_type_traits *tr = tensor_type_get(type < 0 ? UINT32_MAX : (uint32_t)type);
  if (!tr || !tr->supported)
    return err_set(ERR_UNSUPPORTED, "matmul: tensor type %s (%d) has no kernel",
                   tensor_type_name(type < 0 ? UINT32_MAX : (uint32_t)type), type);
  if (n_rows < 0 || n_cols < 0 || n_tokens < 0)
    return err_set(ERR_RANGE, "matmul: negative size (%lld rows, %lld cols, %lld tokens)",
                   (long long)n_rows, (long long)n_cols, (long long)n_tokens);
  size_t row_bytes;
  int rc = tensor_type_row_bytes((uint32_t)type, n_cols, &row_bytes);
  if (rc) return rc;
  size_t total;
  if (__builtin_mul_overflow(row_bytes, (uint64_t)n_rows, &total))
    return err_set(ERR_RANGE, "matmul: %lld rows of %zu bytes overflow", (long long)n_rows,
                   row_bytes);
  memset(j, 0, sizeof *j);
  j->type = type;
  j->W = W;
  j->row_bytes = row_bytes;
  j->n_rows = n_rows;
  j->n_cols = n_cols;
  j->n_tokens = n_tokens;
  j->x = x;
  j->y = y;
  j->tnt = KERN_TILE_TOKENS;
  if (!atomic_load(&g_force_ref) && ops->tile[type]) {
    j->tile = ops->tile[type];
    j->tile2 = ops->tile2[type];
    j->rect = ops->rect[type];
    j->gemv = ops->gemv[type];
    if (ops->tile_nt[type]) j->tnt = ops->tile_nt[type];
    j->xa_stride = kern_act_row_bytes(ops->act[type], n_cols);
    j->rows2 = j->tile2 && !(j->tnt > KERN_TILE_TOKENS &&
                             j->xa_stride * KERN_MM_TOK_BLOCK <= KERN_MM_L1_ACT);
    switch ((enum kern_act)ops->act[type]) {
    case KERN_ACT_F32: j->xa = (const uint8_t *)x; break;
    case KERN_ACT_Q8: j->quant = ops->quant_q8; break;
    case KERN_ACT_Q8_K: j->quant = ops->quant_q8_K; break;
    case KERN_ACT_Q8_KX: j->quant = ops->quant_q8_Kx; break;
    case KERN_ACT_Q8_K6X: j->quant = ops->quant_q8_K6x; break;
    case KERN_ACT_Q8_K5X: j->quant = ops->quant_q8_K5x; break;
    case KERN_ACT_Q8_K3X: j->quant = ops->quant_q8_K3x; break;
    case KERN_ACT_Q8P: j->quant = ops->quant_q8p; break;
    }
    if (j->quant && __builtin_mul_overflow(j->xa_stride, (uint64_t)n_tokens, &total))
      return err_set(ERR_RANGE, "matmul: %lld tokens of %lld columns overflow",
                     (long long)n_tokens, (long long)n_cols);
  }
  return 0;
}

void kern_quant_rows(thread_pool *tp, kern_quant_fn quant, const float *x, int64_t n_tokens, int64_t n_cols,
                     uint8_t *xq, size_t stride) {
  struct kern_mm q;
  memset(&q, 0, sizeof q);
  q.quant = quant;
  q.x = x;
  q.n_tokens = n_tokens;
  q.n_cols = n_cols;
  q.xq = xq;
  q.xa_stride = stride;
  if (tp && n_tokens >= 2 * tpool_n_threads(tp) && n_tokens * n_cols >= 65536)
    tpool_run(tp, mm_quant_worker, &q);
  else
    mm_quant_worker(&q, 0, 1);
}

int kern_matmul(thread_pool *tp, int type, const void *W, int64_t n_rows, int64_t n_cols,
                const float *x, int64_t n_tokens, float *y) {
  struct mm_job j;
  int rc = kern_mm_setup(&j.mm, type, W, n_rows, n_cols, x, n_tokens, y);
  if (rc) return rc;
  if (n_rows == 0 || n_tokens == 0) return 0;
  if (j.mm.quant) {
    size_t bytes = j.mm.xa_stride * (size_t)n_tokens; /* checked by kern_mm_setup */
    if (bytes == 0) bytes = 1; /* n_cols 0: still a valid pointer */
    j.mm.xq = kern_act_scratch(tp, bytes);
    if (!j.mm.xq)
      return err_set(ERR_NOMEM, "matmul: %zu bytes of quantized activations", bytes);
    j.mm.xa = j.mm.xq;
    kern_quant_rows(tp, j.mm.quant, x, n_tokens, n_cols, j.mm.xq, j.mm.xa_stride);
  }
  /* units of one row, chunks of at least 8 rows */
  kern_split_plan(&j.split, tpool_n_threads(tp), n_rows, 8, 1, n_tokens, j.mm.tnt);
  tpool_run(tp, mm_worker, &j);
  return 0;
}
