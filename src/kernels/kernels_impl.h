/*
 * kernels_impl.h - internal interface between the matmul driver
 * (kernels.c) and the per-ISA kernel files (kern_avx2.c, kern_avx512.c,
 * kern_neon.c, kern_scalar.c). Not for callers outside src/kernels/.
 *
 * A fast kernel for a weight type is a "tile" function: one weight row times
 * up to tile_nt (KERN_TILE_TOKENS, or up to KERN_TILE_TOKENS_MAX) activation
 * rows. Activations arrive in the format the type asks for (f32,
 * kern_block_q8, kern_pair_q8 or block_q8_K), prepared once per call by the
 * driver with the ISA's quantizer. Invariant every tile function keeps: the
 * result for a token is bit-identical whatever nt is (the per-token
 * arithmetic never depends on the other tokens of the tile), which is what
 * makes kern_matmul independent of thread count and batch composition.
 */
#ifndef PARLEY_KERNELS_KERNELS_IMPL_H
#define PARLEY_KERNELS_KERNELS_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/tensor_type.h"

#define KERN_TILE_TOKENS 4     /* tokens per tile call unless the type says more */
#define KERN_TILE_TOKENS_MAX 8 /* the widest tile (kern_ops.tile_nt) */

/* Activation block of 32 for the Q4_0/Q4_1/Q5_x/Q8_0 weights: like Q8_0 but
 * with an f32 scale (no f16 rounding, no conversion in the inner loop) and
 * the scaled sum s = d * sum(qs) that the offset types (Q4_1, Q5_1) need. */
typedef struct {
  float d;
  float s;
  int8_t qs[32];
} kern_block_q8;
_Static_assert(sizeof(kern_block_q8) == 40, "kern_block_q8");

/* Activations for Q4_0 weights, two blocks (b, b + 1) per 128 bytes, laid
 * out the way the kernel unpacks a pair of weight blocks into one 256-bit
 * register (block b in the low 128 bits, b + 1 in the high): a = elements
 * 0..15 of b then 0..15 of b + 1 (the low-nibble halves), b16 = elements
 * 16..31 of b then of b + 1 (the high-nibble halves). The kernel multiplies
 * the unsigned nibbles q (0..15): sum (q - 8) x = sum q x - 8 sum x, and
 * c[i] = 8 * (a[2i] + a[2i + 1] + b16[2i] + b16[2i + 1]) is that correction
 * for 16-bit lane i. d = the f32 scale of b in lanes 0..3, of b + 1 in lanes
 * 4..7. An odd last block is paired with a zero block (d = 0). 128 bytes
 * rather than a packed 80: measured faster while the activations of a
 * token block stay in L1 (one memory operand per use, no shuffles). */
typedef struct {
  int8_t a[32];
  int8_t b16[32];
  int16_t c[16];
  float d[8];
} kern_pair_q8;
_Static_assert(sizeof(kern_pair_q8) == 128, "kern_pair_q8");

enum kern_act {
  KERN_ACT_F32 = 0, /* x used as given */
  KERN_ACT_Q8,      /* x quantized to kern_block_q8 rows (blocks of 32) */
  KERN_ACT_Q8_K,    /* x quantized to block_q8_K rows */
  KERN_ACT_Q8P,     /* x quantized to kern_pair_q8 rows (pairs of 32-blocks) */
  KERN_ACT_Q8_KX,   /* block_q8_K rows with qs interleaved for Q4_K (below) */
  KERN_ACT_Q8_K6X,  /* block_q8_K rows with qs interleaved for Q6_K (below) */
  KERN_ACT_Q8_K5X,  /* block_q8_K rows with qs interleaved for Q5_K (below) */
  KERN_ACT_Q8_K3X,  /* block_q8_K rows with qs interleaved for Q3_K (below) */
};

/* y[t * y_stride] = dot(w_row, x_t) for t < nt (1..tile_nt of the type), where
 * x_t = (const char *)x + t * x_stride, n_cols elements (a multiple of the
 * block size). */
typedef void (*kern_tile_fn)(const void *w_row, int64_t n_cols, const void *x, size_t x_stride,
                             int nt, float *y, size_t y_stride);
/* Two consecutive weight rows at once: rows w and (const char *)w + rb,
 * results y[t * y_stride + r] for r = 0, 1. Each (row, token) result is
 * bit-identical to what the one-row tile gives (same per-token arithmetic);
 * the point is to load and sign-adjust each activation block once for two
 * rows and to run more independent accumulator chains. */
typedef void (*kern_tile2_fn)(const void *w, size_t rb, int64_t n_cols, const void *x,
                              size_t x_stride, int nt, float *y, size_t y_stride);
/* A whole output rectangle at once: nr rows (w + r * rb) x nt tokens (x +
 * t * x_stride), y[t * y_stride + r]. Optional per type (NULL: the tile
 * loop); kern_matmul uses it for rectangles of 2 or more tokens, so every
 * result must be bit-identical to the type's one-row tile (which decode
 * keeps using). For register-blocked F32/F16/BF16 (kern_x86_f16.h). */
typedef void (*kern_rect_fn)(const void *w, size_t rb, int64_t nr, int64_t n_cols, const void *x,
                             size_t x_stride, int64_t nt, float *y, size_t y_stride);
/* One token x nr consecutive rows (w + r * rb): y[r] = row r . x for
 * r < nr, x in the type's activation format. Optional per type (NULL: the
 * one-row tile per row); kern_matmul uses it for one-token rectangles
 * (decode), so every result must be bit-identical to the type's one-row
 * tile at nt = 1 (which is what the rect and the tiles agree with). The
 * point: several rows' loads in flight and software prefetch, which a
 * call per row cannot schedule (kern_x512_f16.h). */
typedef void (*kern_gemv_fn)(const void *w, size_t rb, int64_t nr, int64_t n_cols, const void *x, float *y);
/* Packed-weight tile (kernels/packed.c): KERN_PACK_ROWS interleaved rows
 * (one row group of the packed layout, nb blocks) x nt <= ptile_nt tokens of
 * activations x_t = x + t * x_stride; y[t * y_stride + r] for r < 8. Same
 * invariant as the tile functions: a token's results do not depend on nt. */
#define KERN_PACK_ROWS 8
typedef void (*kern_ptile_fn)(const void *w_group, int64_t n_cols, const void *x, size_t x_stride,
                              int nt, float *y, size_t y_stride);
/* Two consecutive full groups at once (w_group and w_group + group_bytes,
 * 16 rows): y[t * y_stride + r] for r < 16. Every (row, token) result is
 * bit-identical to the type's one-group ptile (same per-token arithmetic),
 * so the driver may pair any two groups or none. */
typedef void (*kern_ptile2_fn)(const void *w_group, size_t group_bytes, int64_t n_cols, const void *x,
                               size_t x_stride, int nt, float *y, size_t y_stride);
/* Activation block of 32 for packed Q4_0: kern_block_q8 with the integer
 * 8 * sum(qs) instead of the scaled float sum (the kernel subtracts it from
 * the unsigned-nibble dot product in int32). */
typedef struct {
  float d;
  int32_t s8;
  int8_t qs[32];
} kern_block_q8s;
_Static_assert(sizeof(kern_block_q8s) == 40, "kern_block_q8s");
/* Activation block of 32 for packed Q5_0: kern_block_q8's d and qs, and
 * instead of a sum the two 16-bit offset corrections c[j] = -16 * (sum of
 * qs[e] over the 16 elements e with (e / 2) % 2 == j). Those are the
 * elements the Q5_0 kernel's 16-bit lane j of every row sums (bytes 2j,
 * 2j + 1 of each 4-byte word), so starting that lane at c[j] and adding the
 * unsigned-q products keeps every partial sum within 16 bits (|.| <= 16 x
 * 16 x 127 = 32512, where a plain sum of q x would reach 16 x 31 x 127)
 * and ends at sum (q - 16) x exactly (kern_x86_q4x8.h). */
typedef struct {
  float d;
  int16_t c[2];
  int8_t qs[32];
} kern_block_q8c;
_Static_assert(sizeof(kern_block_q8c) == 40, "kern_block_q8c");
/* Quantizes n f32 (a multiple of the block size) into activation blocks. */
typedef void (*kern_quant_fn)(const float *x, void *dst, int64_t n);

/* Float-panel weights (packed_f.c): F32, F16 and BF16 rows in groups of
 * KERN_XF_ROWS, each group column-major (for column k the 32 rows' values
 * side by side: 128 bytes of F32 or 64 of F16/BF16 per column), so a
 * vector register holds 16 rows of one column and a product is an outer
 * product: acc[row lanes] += w[rows][k] * x[t][k]. Arithmetic per (row,
 * token), the same in every kernel of every variant: acc = fma(w[r][k],
 * x[t][k], acc) for k = 0, 1, ..., n_cols - 1 in order, from +0, y = acc
 * (w converted to f32 exactly first). So the panel kernel, the one-token
 * kernel and a plain C fmaf loop agree bit for bit, whatever the token
 * blocking or thread split. */
#define KERN_XF_ROWS 32
#define KERN_XF_NT 12 /* tokens per panel kernel call, at most */
/* One group (grp: n_cols columns of KERN_XF_ROWS rows) x nt (1..KERN_XF_NT)
 * tokens of f32 activations x + t * xs floats: y[t * ys + r] for the first
 * nr (1..32) rows (the others are padding, never written). With acc the
 * sums continue from y's values instead of +0: a row cut into column
 * chunks, each chunk's call continuing the previous one's, gives the same
 * bits as one call over the whole row. */
typedef void (*kern_xf_fn)(const uint8_t *grp, int64_t n_cols, const float *x, size_t xs, int nt, float *y,
                           size_t ys, int nr, bool acc);
/* Defines NAME, a kern_xf_fn (with the variant's target attribute TGT)
 * calling the always-inlined BODY(grp, n, x, xs, nt, y, ys, nr, acc, KIND)
 * with nt a compile-time constant, so its token loops unroll and the
 * accumulators stay in registers (kern_x512_xf.h, kern_x86_xf.h). */
#define KERN_XF_DEFINE_PANEL(NAME, BODY, KIND)                                                     \
  TGT static void NAME(const uint8_t *grp, int64_t n, const float *x, size_t xs, int nt, float *y, \
                       size_t ys, int nr, bool acc) {                                              \
    switch (nt) {                                                                                  \
    case 1: BODY(grp, n, x, xs, 1, y, ys, nr, acc, KIND); break;                                   \
    case 2: BODY(grp, n, x, xs, 2, y, ys, nr, acc, KIND); break;                                   \
    case 3: BODY(grp, n, x, xs, 3, y, ys, nr, acc, KIND); break;                                   \
    case 4: BODY(grp, n, x, xs, 4, y, ys, nr, acc, KIND); break;                                   \
    case 5: BODY(grp, n, x, xs, 5, y, ys, nr, acc, KIND); break;                                   \
    case 6: BODY(grp, n, x, xs, 6, y, ys, nr, acc, KIND); break;                                   \
    case 7: BODY(grp, n, x, xs, 7, y, ys, nr, acc, KIND); break;                                   \
    case 8: BODY(grp, n, x, xs, 8, y, ys, nr, acc, KIND); break;                                   \
    case 9: BODY(grp, n, x, xs, 9, y, ys, nr, acc, KIND); break;                                   \
    case 10: BODY(grp, n, x, xs, 10, y, ys, nr, acc, KIND); break;                                 \
    case 11: BODY(grp, n, x, xs, 11, y, ys, nr, acc, KIND); break;                                 \
    default: BODY(grp, n, x, xs, 12, y, ys, nr, acc, KIND); break;                                 \
    }                                                                                              \
  }
/* Columns [0, n_cols) of one group (grp points at column 0) widened to
 * f32, exactly: dst[k * KERN_XF_ROWS + r]. */
typedef void (*kern_xfw_fn)(const uint8_t *grp, int64_t n_cols, float *dst);
/* One token x ng consecutive groups (group_bytes apart): y[r] for the
 * first nr rows of the ng * 32 (nr > (ng - 1) * 32). */
typedef void (*kern_xfv_fn)(const uint8_t *grp, size_t group_bytes, int64_t ng, int64_t n_cols, const float *x,
                            float *y, int64_t nr);

struct kern_ops {
  const char *isa;
  kern_quant_fn quant_q8;
  kern_quant_fn quant_q8_K;
  kern_quant_fn quant_q8p;
  kern_quant_fn quant_q8_Kx;
  kern_quant_fn quant_q8_K6x;
  kern_quant_fn quant_q8_K5x;
  kern_quant_fn quant_q8_K3x;
  kern_tile_fn tile[TENSOR_TYPE_COUNT]; /* NULL: reference path */
  kern_tile2_fn tile2[TENSOR_TYPE_COUNT]; /* optional two-row tiles (NULL: use tile) */
  kern_rect_fn rect[TENSOR_TYPE_COUNT];   /* optional rectangle kernels (NULL: tiles) */
  kern_gemv_fn gemv[TENSOR_TYPE_COUNT];   /* optional one-token many-row kernels (NULL: tiles) */
  unsigned char act[TENSOR_TYPE_COUNT]; /* enum kern_act per type */
  unsigned char tile_nt[TENSOR_TYPE_COUNT]; /* tokens per tile call (0: KERN_TILE_TOKENS) */
  /* packed weights (packed.c): tile, tokens per call and activation
   * quantizer per type; ptile NULL: the type is never packed */
  kern_ptile_fn ptile[TENSOR_TYPE_COUNT];
  /* optional: the same tile without software prefetch, for calls whose
   * group was just read by the previous call (a prompt's later token
   * tiles); same arithmetic, so the same bits. NULL: ptile */
  kern_ptile_fn ptile_warm[TENSOR_TYPE_COUNT];
  /* optional two-group tiles (NULL: one group per call), same tokens per
   * call and activations as ptile; _warm as ptile_warm */
  kern_ptile2_fn ptile2[TENSOR_TYPE_COUNT];
  kern_ptile2_fn ptile2_warm[TENSOR_TYPE_COUNT];
  unsigned char ptile_nt[TENSOR_TYPE_COUNT];
  kern_quant_fn pquant[TENSOR_TYPE_COUNT];
  /* float-panel weights (packed_f.c), F32/F16/BF16: panel kernel and
   * one-token kernel; NULL: the variant does not pack the type that way */
  kern_xf_fn xf[TENSOR_TYPE_COUNT];
  kern_xfv_fn xfv[TENSOR_TYPE_COUNT];
  kern_xfw_fn xfw[TENSOR_TYPE_COUNT]; /* F16, BF16: widening to F32 panels (prompts) */
};

/* Each fills ops and returns 1 when compiled in and usable on this CPU. */
#if defined(__x86_64__)
#include <cpuid.h>
/* F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports
 * does not know the "f16c" name, so both compilers ask the CPU directly. */
static inline int x86_has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
#endif
int kern_ops_avx2(struct kern_ops *ops);
int kern_ops_avx512(struct kern_ops *ops);
int kern_ops_neon(struct kern_ops *ops);
int kern_ops_scalar(struct kern_ops *ops); /* always 1 */

/* Per-thread scratch owned by the pool (thread ith), grown on demand and
 * kept; NULL on allocation failure. Only for use inside tpool_run or by the
 * caller between runs (ith 0). */
void *tpool_scratch(thread_pool *tp, int ith, size_t bytes);

/* Portable activation quantizers (kernels.c), the definition the SIMD
 * quantizers match bit for bit: d = amax / 127 (f32), q = x * (1 / d) rounded
 * to nearest even (lrintf under the default rounding mode). */
void kern_quant_q8_c(const float *x, void *dst, int64_t n);
void kern_quant_q8_K_c(const float *x, void *dst, int64_t n);
void kern_quant_q8p_c(const float *x, void *dst, int64_t n);
void kern_quant_q8_Kx_c(const float *x, void *dst, int64_t n);
/* KERN_ACT_Q8_KX: a block_q8_K whose bsums bytes hold instead 8 floats,
 * fsum[k] = d * (bsums[2k] + bsums[2k + 1]) (x's sum over 32-element
 * sub-block k, so a Q4_K kernel applies its mins with one fused
 * multiply-add per token and super-block), and whose 256 qs are reordered so that the 32-byte group at 64m + 32h holds, in its
 * 4-byte slot i (i = 0..3) elements 4m..4m+3 of 32-element sub-block 2i + h
 * and in slot 4 + i elements 16 + 4m..16 + 4m + 3 of the same sub-block.
 * That is the order a Q4_K kernel gets by transposing the 4-byte words of
 * its four 32-byte nibble vectors: every 4-byte slot of the 4 groups of one
 * h belongs to one sub-block, so their 8-bit products can be summed in 16
 * bits before the one scale multiply. Reorders nb blocks in place. */
void kern_q8_K_interleave(block_q8_K *b, int64_t nb);
void kern_quant_q8_K6x_c(const float *x, void *dst, int64_t n);
/* KERN_ACT_Q8_K6X: a block_q8_K (bsums unchanged) whose qs are reordered
 * in each 64-byte chunk c (elements 64c..64c+63: 32-element groups 2c and
 * 2c + 1, i.e. 16-element sub-blocks 4c..4c+3) the way
 * _mm256_unpacklo_epi32 / _mm256_unpackhi_epi32 interleave the two groups'
 * 32-byte vectors X0, X1: byte 64c + 32u + 16j + 4w + b holds element
 * 64c + 32 (w % 2) + 16j + 8u + 4 (w / 2) + b (u, j = 0, 1; w = 0..3; b =
 * 0..3). A Q6_K kernel interleaves its weight vectors the same way, after
 * which every 4-byte slot of both 32-byte halves of a chunk belongs to one
 * sub-block (4c + 2 (w % 2) + j), so two 8-bit products can be summed in
 * 16 bits before the one scale multiply. Reorders nb blocks in place. */
void kern_q8_K6_interleave(block_q8_K *b, int64_t nb);
void kern_quant_q8_K5x_c(const float *x, void *dst, int64_t n);
/* KERN_ACT_Q8_K5X: a block_q8_K whose bsums bytes hold the 8 floats fsum[k]
 * of KERN_ACT_Q8_KX, and whose qs have the middle two 16-byte quarters of
 * every 64-byte chunk p swapped: bytes 64p + 0..15 hold elements 64p +
 * 0..15, 16..31 hold 64p + 32..47, 32..47 hold 64p + 16..31, 48..63 hold
 * 64p + 48..63. A Q5_K kernel builds the same halves from its two weight
 * vectors of sub-blocks 2p and 2p + 1 (vperm2i128), after which both
 * 32-byte halves of a chunk hold sub-block 2p in the low 128 bits and
 * 2p + 1 in the high, so two 8-bit products can be summed in 16 bits
 * before the one scale multiply. Reorders nb blocks in place. */
void kern_q8_K5_interleave(block_q8_K *b, int64_t nb);
void kern_quant_q8_K3x_c(const float *x, void *dst, int64_t n);
/* KERN_ACT_Q8_K3X: a block_q8_K (bsums unchanged) whose qs are reordered
 * in each 128-element half h the way a 4-byte word transpose of its four
 * 32-byte groups orders them: byte 128h + 32m + 16j + 4i + b holds element
 * 128h + 32i + 16j + 4m + b (m, i = 0..3; j = 0, 1; b = 0..3). After the
 * same transpose of a Q3_K kernel's four weight vectors of half h, every
 * 4-byte slot i of 128-bit half j of all four belongs to 16-element
 * sub-block 8h + 2i + j, so four 8-bit products can be summed in 16 bits
 * before the one scale multiply. Reorders nb blocks in place. */
void kern_q8_K3_interleave(block_q8_K *b, int64_t nb);
/* Rearranges nb (1 or 2) kern_block_q8 into one kern_pair_q8 (shared by
 * every variant's pair quantizer, so their outputs agree bit for bit). */
void kern_pair_from_q8(const kern_block_q8 *b, int nb, kern_pair_q8 *p);
/* The dispatched table, whether the reference is forced, and the
 * activation scratch kern_matmul uses (pool thread 0's, or the calling
 * thread's for tp NULL): for packed.c. */
const struct kern_ops *kern_ops_get(void);
bool kern_ref_forced(void);
void *kern_act_scratch(thread_pool *tp, size_t bytes);
/* The calling thread's working memory for a rect kernel (at least `bytes`,
 * 64-byte aligned, kept until the thread exits; NULL if out of memory):
 * separate from kern_act_scratch, whose buffer may hold the activations
 * the rect is reading. Valid until the thread's next call. */
void *kern_rect_scratch(size_t bytes);
/* The portable packed-Q4_0 activation quantizer (kern_block_q8s). */
void kern_quant_q8s_c(const float *x, void *dst, int64_t n);
/* Bytes of one activation row of n_cols in format act. */
size_t kern_act_row_bytes(int act, int64_t n_cols);
/* How kern_matmul and kern_matmul_packed split tokens when there are too
 * few row chunks (n_row_chunks, against 8 per thread) to keep nth threads
 * busy: token chunks of whole tiles (tnt tokens). Shared so the two paths
 * divide work the same way. */
void kern_split_tokens(int nth, int64_t n_row_chunks, int64_t n_tokens, int tnt, int64_t *chunk_toks,
                       int64_t *n_tok_chunks);

/* ---- the work split every matmul driver uses ------------------------------
 * Output rectangles (a chunk of row units x a chunk of tokens) handed out by
 * an atomic counter, so a thread slowed by another process does not hold up
 * the call. A unit is what the driver's kernels walk: one row for
 * kern_matmul, one group of KERN_PACK_ROWS rows for kern_matmul_packed and
 * kern_matmul_multi. kern_split_plan chooses the sizes: about 8 chunks per
 * thread of at least min_units units; tokens split (in whole tiles of tnt)
 * only when the units alone give too few chunks (kern_split_tokens). With
 * one token chunk (generation, or a prompt whose units alone give enough
 * chunks) and at least nth * 16 * min_units units, the
 * threads finish together only as closely as the last chunk is short, so
 * the split is guided: each claim takes 1 / (2 nth) of the units still
 * unclaimed, at least min_units, so the first chunks are long (few
 * prefetch ramps) and the last ones min_units long (the threads end
 * within one short chunk). A fixed plan of ~3 big chunks per thread for
 * 3/4 of the units and ~8 small ones per thread for the rest ends on a
 * chunk of 1/64 of the product (Qwen2.5-0.5B's gate/up: 145 KiB, ~9 us at
 * one thread's share of the bandwidth; its logits 2.3 MB); ~2 small chunks
 * per thread measured +1-2% on a quiet host, but 2-5x the threads' end
 * imbalance and a loss under load (docs/perf-decisions.md, "Guided
 * one-token split"). Every chunk
 * but the last starts and ends at a multiple of align units (chunk sizes
 * rounded up to it): packed drivers pass 2 when the type has a two-group
 * tile, so no chunk splits a pair of groups and sends both halves through
 * the one-group tile. Which thread computes a unit never changes its
 * result. */
struct kern_split {
  int64_t n_units, n_tokens;
  int64_t chunk;           /* units per chunk (the last may be short); guided: the least claim */
  int64_t n_unit_chunks;   /* fixed plan: chunks of `chunk` units */
  int64_t chunk_toks, n_tok_chunks;
  int64_t guided_div;      /* guided plan (one token chunk): claims of unclaimed / guided_div; 0: fixed */
  int64_t align;
  atomic_llong next;       /* fixed plan: next chunk to hand out; guided: first unclaimed unit */
};
void kern_split_plan(struct kern_split *s, int nth, int64_t n_units, int64_t min_units, int64_t align,
                     int64_t n_tokens, int tnt);

/* The min_units a packed driver passes kern_split_plan: for one token,
 * enough units of unit_bytes weight bytes each to make a chunk of at least
 * KERN_DECODE_CHUNK_BYTES (32 KiB), else 1. Why: each chunk starts a cold
 * stream (its first lines are demand misses, its prefetch ramps up), and
 * a small product (Qwen2.5-0.5B's 896 x 896 wo: 0.5-0.9 MiB) cut into ~20
 * chunks of ~10 KiB read at 0.6-0.7 of a plain read of its bytes; with
 * the minimum 0.73-0.8 (docs/perf-decisions.md). It is also the least
 * claim of the guided one-token plan. */
int64_t kern_split_min_units(size_t unit_bytes, int64_t n_tokens);

/* Claims the next rectangle: units [*u0, *u1) x tokens [*t0, *t1); false
 * when every chunk has been handed out. Chunks go unit chunk fastest, so a
 * token chunk's rows are all claimed before the next token chunk's. */
static inline bool kern_split_next(struct kern_split *s, int64_t *u0, int64_t *u1, int64_t *t0, int64_t *t1) {
  if (s->guided_div) { /* one token chunk: claim a share of what is left */
    long long cur = atomic_load_explicit(&s->next, memory_order_relaxed); /* atomic_llong's type */
    int64_t len;
    do {
      if (cur >= s->n_units) return false;
      len = (s->n_units - cur + s->guided_div - 1) / s->guided_div;
      len = (len + s->align - 1) / s->align * s->align;
      if (len < s->chunk) len = s->chunk;
    } while (!atomic_compare_exchange_weak(&s->next, &cur, cur + len));
    *u0 = cur;
    *u1 = cur + len < s->n_units ? cur + len : s->n_units;
    *t0 = 0;
    *t1 = s->n_tokens;
    return true;
  }
  int64_t c = atomic_fetch_add(&s->next, 1);
  if (c >= s->n_unit_chunks * s->n_tok_chunks) return false;
  int64_t uc = c % s->n_unit_chunks, tc = c / s->n_unit_chunks;
  *u0 = uc * s->chunk;
  *u1 = *u0 + s->chunk < s->n_units ? *u0 + s->chunk : s->n_units;
  *t0 = tc * s->chunk_toks;
  *t1 = *t0 + s->chunk_toks < s->n_tokens ? *t0 + s->chunk_toks : s->n_tokens;
  return true;
}

/* ---- one product's setup and rectangles ----------------------------------
 * kern_matmul and kern_matmul_packed are each a setup, the activation
 * quantization (kern_quant_rows), a kern_split plan and a pool job calling
 * the rect function per chunk; kern_matmul_multi (multi.c) runs several
 * setups in one job. */

/* A product over GGUF rows (kernels.c). */
struct kern_mm {
  int type;
  const uint8_t *W;
  size_t row_bytes;
  int64_t n_rows, n_cols, n_tokens;
  const float *x;
  float *y;
  /* activations as the tile kernel reads them */
  kern_tile_fn tile;   /* NULL: reference */
  kern_tile2_fn tile2; /* optional two-row tile */
  kern_rect_fn rect;   /* optional rectangle kernel, for 2+ tokens */
  kern_gemv_fn gemv;   /* optional one-token kernel over a row range */
  kern_quant_fn quant; /* NULL: f32 activations (xa = x) or reference */
  const uint8_t *xa;   /* the activations the tiles read: x, or xq once quantized */
  uint8_t *xq;         /* quantization target (the caller's scratch) */
  size_t xa_stride;    /* bytes per token of xa */
  int tnt;             /* tokens per tile call */
  bool rows2;          /* pairs of rows through tile2 */
};
/* Checks the arguments as kern_matmul documents and fills j (xq, xa left
 * for the caller when quant is set); no allocation. */
int kern_mm_setup(struct kern_mm *j, int type, const void *W, int64_t n_rows, int64_t n_cols, const float *x,
                  int64_t n_tokens, float *y);
/* Rows [r0, r1) x tokens [t0, t1) of the product. */
void kern_mm_rect(const struct kern_mm *j, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
/* Quantizes n_tokens rows of x (n_cols each) with quant into xq (stride
 * bytes per token): split across the pool when there are enough tokens to
 * pay for a job, on the calling thread otherwise. */
void kern_quant_rows(thread_pool *tp, kern_quant_fn quant, const float *x, int64_t n_tokens, int64_t n_cols,
                     uint8_t *xq, size_t stride);

/* A product over packed weights (packed.c). */
struct kern_pk {
  const kern_packed *p;
  int64_t n_rows, n_cols, n_groups; /* p's */
  const float *x;
  float *y;
  int64_t n_tokens;
  kern_ptile_fn tile; /* NULL: reference (unpack each row, ref_vec_dot) */
  kern_ptile_fn tile_warm; /* tile for a group's 2nd.. token tile in a sweep (ops ptile_warm, else tile) */
  kern_ptile2_fn tile2, tile2_warm; /* two full groups per call (NULL: one at a time) */
  kern_quant_fn quant;
  uint8_t *xq;        /* quantized activations (the caller's scratch) */
  size_t xa_stride;
  int tnt;
  atomic_int *failed; /* reference path: set when a row buffer could not be had */
  kern_xf_fn xf;      /* float panels (packed_f.c): panel kernel, NULL: not that layout or */
  kern_xfv_fn xfv;    /*   this variant has no kernel for it (then the reference path) */
  kern_xfw_fn xfw;    /* F16/BF16 panels: widening of column chunks, and the F32 */
  kern_xf_fn xf32;    /*   panel kernel that runs the prompt over them (NULL: F32 weights) */
};
/* Checks and fills j as kern_matmul_packed does (xq left for the caller
 * when quant is set); no allocation. */
int kern_pk_setup(struct kern_pk *j, const kern_packed *p, const float *x, int64_t n_tokens, float *y);
/* Row groups [g0, g1) x tokens [t0, t1). */
void kern_pk_rect(const struct kern_pk *j, int64_t g0, int64_t g1, int64_t t0, int64_t t1);
/* The kern_split_plan alignment, in groups of KERN_PACK_ROWS, a packed
 * product's rectangles should start at: 4 for float panels (a panel is 32
 * rows), 2 when its tile takes two groups at a time (tile2), else 1. */
static inline int64_t kern_pk_align(const struct kern_pk *j) {
  return j->xf ? KERN_XF_ROWS / KERN_PACK_ROWS : j->tile2 ? 2 : 1;
}

#endif
