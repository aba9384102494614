/*
 * packed_f.c - F32, F16 and BF16 weights repacked at load into float
 * panels (kernels_impl.h: groups of 32 rows, column-major inside a group),
 * and the rectangle driver for them; packed.c's kern_pack /
 * kern_matmul_packed call in here for these types when the variant has
 * panel kernels (kern_ops.xf: AVX-512, kern_x512_xf.h; AVX2, kern_x86_xf.h).
 *
 * Why: over GGUF rows a prompt's F16 product is a set of dot products,
 * each (row, token) summing 16-lane partial products that a horizontal add
 * ends; the register-blocked rectangle (kern_x512_f16.h) could not get past
 * ~100 GFLOP/s per core on the Emerald Rapids guest (L2 traffic of parked
 * accumulators, converted weights reused over only 6 tokens). With 32 rows
 * of one column in two registers, a token block is an outer product: per
 * column, 2 weight loads (converted once) and for each of 12 tokens one
 * broadcast of x[t][k] and 2 FMAs into 24 accumulators that stay in
 * registers for the whole row: FMA-bound. A stand-alone probe of that loop
 * read 178-186 GFLOP/s per core with F16 panels (docs/perf-decisions.md,
 * "Float panels"), against a 2-core FMA peak of ~365. Decode (one token)
 * reads the same bytes as GGUF rows (a group is n_cols x 32 values, no padding inside), as one
 * forward stream per group.
 *
 * Result order (every kernel, every token count): acc = fma(w, x, acc)
 * column after column from +0 (kernels_impl.h), so a prompt's rows equal
 * decode's bit for bit, and both equal a plain fmaf loop (the tests' check).
 *
 * Activations: copied once per call (kern_quant_rows, like the quantized
 * types' activation formats) into rows padded by 64 bytes: token rows
 * n_cols x 4 bytes apart (8 KiB for 2048 columns) all fall into the same L1
 * set, and the panel kernel broadcasts from 12 of them at once (the probe:
 * 153-167 GFLOP/s unpadded, 175-180 padded).
 *
 * Prompts: the panel kernel converting F16/BF16 in its inner
 * loop spends 2 of every 26 FMA-port slots on vcvtph2ps; over f32 weights
 * the same loop read 1.1-1.5x more GFLOP/s (stand-alone, alternated). So
 * the rows of XPF_GB groups are widened to f32 once, in chunks of XPF_KC
 * columns (2 x 256 KiB, the thread's kern_rect_scratch: L2), and the F32
 * panel kernel runs every token tile of the rectangle over them, both
 * groups per tile (the tile's activations read once for the two); a row
 * longer than a chunk continues the sums the previous chunk left in y
 * (same order, same bits). Measured on TinyLlama's shapes at 512 tokens:
 * chunks of 512 columns over 8 groups (activations in L2, y parked 4x per
 * row) 146-149 GFLOP/s on one thread, 2048 over one group 155-161; in
 * the model (2 threads, alternated) 2 groups beat 1 in 7 rounds of 7 (by
 * 0.4-11%), 4 did not. F32 weights take the same loops without the copy.
 */
#include <string.h>

#include "kernels/kernels_impl.h"
#include "kernels/packed_f.h"

#ifndef XPF_KC
#define XPF_KC 2048 /* columns per widened chunk (256 KiB of f32 per group) */
#endif
#ifndef XPF_GB
#define XPF_GB 2 /* groups widened and run together */
#endif

/* Bytes per element: F32 4, F16 and BF16 2 (0: not a panel type). */
static size_t xpf_es(int type) {
  return type == TENSOR_TYPE_F32 ? 4 : type == TENSOR_TYPE_F16 || type == TENSOR_TYPE_BF16 ? 2 : 0;
}

bool xpf_handles(int type) { return xpf_es(type) != 0; }

size_t xpf_group_bytes(int type, int64_t n_cols) { return (size_t)n_cols * KERN_XF_ROWS * xpf_es(type); }

/* Column blocks of XPF_PACK_COLS: the block's slice of dst (32 rows x 64
 * columns, 4-8 KiB) stays in L1 while the 32 source rows pass through it
 * (row after row over whole columns wrote 2-4 bytes into a different cache
 * line of a 128-360 KiB group each time: ~1 s more per GB of F16 at load). */
#define XPF_PACK_COLS 64
void xpf_pack_group(int type, const uint8_t *W, size_t rb, int64_t n_rows, int64_t n_cols, int64_t g,
                    uint8_t *dst) {
  const size_t es = xpf_es(type), cs = es * KERN_XF_ROWS; /* bytes per element, per column */
  for (int64_t k0 = 0; k0 < n_cols; k0 += XPF_PACK_COLS) {
    const int64_t k1 = k0 + XPF_PACK_COLS < n_cols ? k0 + XPF_PACK_COLS : n_cols;
    for (int r = 0; r < KERN_XF_ROWS; r++) {
      const int64_t row = g * KERN_XF_ROWS + r;
      uint8_t *o = dst + es * (size_t)r;
      if (row >= n_rows) {
        for (int64_t k = k0; k < k1; k++) memset(o + cs * (size_t)k, 0, es);
        continue;
      }
      const uint8_t *src = W + rb * (size_t)row;
      if (es == 2)
        for (int64_t k = k0; k < k1; k++) memcpy(o + cs * (size_t)k, src + 2 * k, 2);
      else
        for (int64_t k = k0; k < k1; k++) memcpy(o + cs * (size_t)k, src + 4 * k, 4);
    }
  }
}

void xpf_unpack_row(int type, const uint8_t *grp, int64_t n_cols, int r, uint8_t *row) {
  const size_t es = xpf_es(type), cs = es * KERN_XF_ROWS;
  for (int64_t k = 0; k < n_cols; k++) memcpy(row + es * (size_t)k, grp + cs * (size_t)k + es * (size_t)r, es);
}

size_t xpf_act_row_bytes(int64_t n_cols) { return ((size_t)n_cols * sizeof(float) + 63) / 64 * 64 + 64; }

void xpf_act_copy(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * sizeof(float)); }

void xpf_rect(const struct kern_pk *j, const uint8_t *data, size_t gb, int64_t u0, int64_t u1, int64_t t0,
              int64_t t1) {
  const int per = KERN_XF_ROWS / KERN_PACK_ROWS;
  const int64_t g0 = u0 / per, g1 = (u1 + per - 1) / per, n = j->n_cols, nrow = j->n_rows;
  const size_t xs = j->xa_stride / sizeof(float);
  const float *xa = (const float *)(const void *)j->xq;
  if (g0 >= g1 || t0 >= t1) return;
  if (t1 - t0 == 1) { /* decode: one pass over the groups */
    int64_t r1 = g1 * KERN_XF_ROWS < nrow ? g1 * KERN_XF_ROWS : nrow;
    j->xfv(data + gb * (size_t)g0, gb, g1 - g0, n, xa + xs * (size_t)t0, j->y + t0 * nrow + g0 * KERN_XF_ROWS,
           r1 - g0 * KERN_XF_ROWS);
    return;
  }
  const size_t cs = gb / (size_t)n; /* bytes per column of a group */
  const int64_t kmax = n < XPF_KC ? n : XPF_KC;
  const size_t wstep = (size_t)KERN_XF_ROWS * (size_t)kmax; /* floats per widened group chunk */
  /* the widened chunks; no memory for them: the panel kernel converts as it goes */
  float *wf = j->xfw ? kern_rect_scratch(sizeof(float) * wstep * XPF_GB) : NULL;
  const kern_xf_fn xf = wf ? j->xf32 : j->xf;
  for (int64_t gq = g0; gq < g1; gq += XPF_GB) {
    const int64_t gq1 = gq + XPF_GB < g1 ? gq + XPF_GB : g1;
    for (int64_t k0 = 0; k0 < n; k0 += XPF_KC) {
      const int64_t kc = n - k0 < XPF_KC ? n - k0 : XPF_KC;
      if (wf)
        for (int64_t g = gq; g < gq1; g++)
          j->xfw(data + gb * (size_t)g + cs * (size_t)k0, kc, wf + wstep * (size_t)(g - gq));
      for (int64_t t = t0; t < t1; t += KERN_XF_NT) {
        const int nt = t1 - t < KERN_XF_NT ? (int)(t1 - t) : KERN_XF_NT;
        for (int64_t g = gq; g < gq1; g++) {
          const int nr = nrow - g * KERN_XF_ROWS < KERN_XF_ROWS ? (int)(nrow - g * KERN_XF_ROWS) : KERN_XF_ROWS;
          const uint8_t *w =
              wf ? (const uint8_t *)(wf + wstep * (size_t)(g - gq)) : data + gb * (size_t)g + cs * (size_t)k0;
          xf(w, kc, xa + xs * (size_t)t + k0, xs, nt, j->y + t * nrow + g * KERN_XF_ROWS, (size_t)nrow, nr, k0 > 0);
        }
      }
    }
  }
}
