/*
 * packed.c - weights repacked once at model load into a layout the CPU's
 * kernels multiply faster than GGUF rows, and the matmul driver for them
 * (kern_pack / kern_matmul_packed in kernels.h).
 *
 * Layout (Q4_0, Q5_0 and Q8_0, whose blocks are an f16 scale and QB = 16
 * or 32 bytes of qs, Q5_0 with 4 bytes of high bits between): rows in
 * groups of KERN_PACK_ROWS = 8; a last partial group is padded with zero
 * rows (scale 0, never written to y). Group g is group_bytes long: nb =
 * n_cols / 32 packed blocks (144 bytes for Q4_0, 176 for Q5_0, 272 for
 * Q8_0), padded to a multiple of 64. Packed block b:
 *   bytes 0..15: the 8 rows' f16 scales of block b, row order;
 *   then QB / 4 vectors of 32 bytes: byte 4 r + m of vector i is byte
 *       4 i + m of row 8 g + r's block b qs (a transpose of 4-byte words).
 *       Q4_0, Q5_0: `& 15` gives elements 4 i .. 4 i + 3 of each of the 8
 *       rows, `>> 4` elements 16 + 4 i .. 16 + 4 i + 3; Q8_0: vector i is
 *       elements 4 i .. 4 i + 3;
 *   Q5_0 only, then one 32-byte vector H of the high bits (bit 4 of each
 *       5-bit q): byte 4 r + m, bit i is that of element 4 i + m of row r,
 *       bit 4 + i that of element 16 + 4 i + m. So for nibble vector i a
 *       16-bit shift of H by 4 - i (left) or i (right) and `& 0x10` put
 *       the high bits of its low or high nibbles at bit 4 of the very bytes
 *       the nibbles occupy: 5-bit q in three operations more per half
 *       (shift, and, or).
 * Scales next to their nibbles keep decode a single forward stream: with
 * the scales in a separate area after the group's vectors, one-token calls
 * streaming from DRAM were 20-30% slower (5.6 against 4.3-4.8 ms for
 * 65536 x 2048 Q4_0 on one core).
 * Same bytes as the GGUF rows (plus padding), so decode reads no more.
 * Q4_K has its own layout (packed_k.c, same bytes as its rows too); the
 * driver and the packing loop below serve both, switched by kpk_handles.
 * F32/F16/BF16 become float panels (packed_f.c: 32-row column-major
 * groups) where the variant has panel kernels (kern_ops.xf): the packing
 * loop packs them too, and kern_pk_rect hands their rectangles to
 * xpf_rect.
 *
 * The driver mirrors kern_matmul's (kernels.c): activations quantized once
 * per call into the type's packed format, output rectangles (row groups x
 * tokens) handed out by an atomic counter, tokens walked in blocks of 8
 * outside the groups, one tile call (one group, or two consecutive full
 * groups when the variant has ptile2, x up to ptile_nt tokens) per output
 * element. Every (row, token) result comes from one tile call whose
 * per-token arithmetic is fixed, so results do not depend on the thread
 * count or on the other tokens of the call.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/err.h"
#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "kernels/packed_f.h"
#include "kernels/packed_k.h"
#include "kernels/ref.h"

#ifndef PK_TOK_BLOCK
#define PK_TOK_BLOCK 8 /* tokens per sweep over a chunk of groups */
#endif
#define PK_HDR 64      /* header bytes before the data (keeps it 64-aligned) */

struct kern_packed {
  int type;
  bool xf;             /* float panels (packed_f.c): groups of 32 rows */
  int64_t n_rows, n_cols;
  int64_t n_groups;    /* ceil(n_rows / 8): the driver's units */
  size_t group_bytes;  /* bytes per group of 8 rows (of 32 with xf) */
  size_t row_bytes;    /* bytes of one GGUF row (for unpacking) */
  size_t bytes;        /* group_bytes x the groups (of 8 or 32 rows) */
  uint8_t *data;       /* this + PK_HDR */
};
_Static_assert(sizeof(struct kern_packed) <= PK_HDR, "packed header");

/* ---- the x 8 layouts (Q4_0, Q5_0, Q8_0) ---------------------------------- */

/* True for the types packed in the x 8 layout. */
static bool x8_type(int type) {
  return type == TENSOR_TYPE_Q4_0 || type == TENSOR_TYPE_Q5_0 || type == TENSOR_TYPE_Q8_0;
}

/* Bytes of qs per block and row: 16 (Q4_0, Q5_0 nibbles) or 32 (Q8_0
 * int8). */
static int x8_qb(int type) { return type == TENSOR_TYPE_Q8_0 ? 32 : 16; }

/* Bytes of one packed block of 8 rows: 16 of scales, 8 qb of qs, and for
 * Q5_0 32 of high bits. */
static size_t x8_pb(int type) { return (size_t)(16 + 8 * x8_qb(type) + (type == TENSOR_TYPE_Q5_0 ? 32 : 0)); }

static size_t x8_group_bytes(int type, int64_t n_cols) {
  size_t b = (size_t)(n_cols / 32) * x8_pb(type);
  return (b + 63) & ~(size_t)63;
}

/* Q5_0 high bits of one row's block (qh, bit j = bit 4 of element j) to
 * the 4 bytes of the packed H vector (byte m: bit i = element 4 i + m, bit
 * 4 + i = element 16 + 4 i + m), and back. */
static void x8_q5_hbits(const uint8_t qh[4], uint8_t h[4]) {
  uint32_t q = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
  /* byte m gathers bits m, m + 4, ..., m + 28 of q into bits 0..7 (bit
   * 16 + 4 i + m = 4 (4 + i) + m lands at 4 + i): pairs, then nibbles,
   * then the byte, by shifts and masks (model load packs millions) */
  for (int m = 0; m < 4; m++) {
    uint32_t v = (q >> m) & 0x11111111u;
    v = (v | v >> 3) & 0x03030303u;
    v = (v | v >> 6) & 0x000f000fu;
    h[m] = (uint8_t)(v | v >> 12);
  }
}

static void x8_q5_qh(const uint8_t h[4], uint8_t qh[4]) {
  uint32_t q = 0;
  for (int m = 0; m < 4; m++)
    for (int i = 0; i < 4; i++)
      q |= (uint32_t)((h[m] >> i) & 1) << (4 * i + m) | (uint32_t)((h[m] >> (4 + i)) & 1) << (16 + 4 * i + m);
  for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(q >> (8 * k));
}

/* Packs rows 8g..8g+7 (those < n_rows; the others as zeros) into dst in
 * the layout above. */
static void x8_pack_group(int type, const uint8_t *W, size_t rb, int64_t n_rows, int64_t nb, int64_t g,
                          uint8_t *dst) {
  const int qb = x8_qb(type), nv = qb / 4, q5 = type == TENSOR_TYPE_Q5_0;
  const size_t bs = (size_t)qb + 2 + (q5 ? 4 : 0), qo = q5 ? 6 : 2, pb = x8_pb(type);
  for (int r = 0; r < KERN_PACK_ROWS; r++) {
    int64_t row = g * KERN_PACK_ROWS + r;
    const uint8_t *src = row < n_rows ? W + (size_t)row * rb : NULL;
    for (int64_t b = 0; b < nb; b++) {
      uint8_t *blk = dst + pb * (size_t)b;
      const uint8_t *sb = src ? src + bs * (size_t)b : NULL;
      for (int i = 0; i < nv; i++) {
        uint8_t *o = blk + 16 + 32 * i + 4 * r;
        if (sb)
          memcpy(o, sb + qo + 4 * i, 4);
        else
          memset(o, 0, 4);
      }
      if (q5) {
        uint8_t *o = blk + 16 + 32 * nv + 4 * r;
        if (sb)
          x8_q5_hbits(sb + 2, o);
        else
          memset(o, 0, 4);
      }
      if (sb)
        memcpy(blk + 2 * r, sb, 2);
      else
        memset(blk + 2 * r, 0, 2);
    }
  }
}

/* Row r (0..7) of a packed group back to a GGUF row (the inverse). */
static void x8_unpack_row(int type, const uint8_t *grp, int64_t nb, int r, uint8_t *row) {
  const int qb = x8_qb(type), nv = qb / 4, q5 = type == TENSOR_TYPE_Q5_0;
  const size_t bs = (size_t)qb + 2 + (q5 ? 4 : 0), qo = q5 ? 6 : 2, pb = x8_pb(type);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = grp + pb * (size_t)b;
    uint8_t *ob = row + bs * (size_t)b;
    for (int i = 0; i < nv; i++) memcpy(ob + qo + 4 * i, blk + 16 + 32 * i + 4 * r, 4);
    if (q5) x8_q5_qh(blk + 16 + 32 * nv + 4 * r, ob + 2);
    memcpy(ob, blk + 2 * r, 2);
  }
}

/* ---- packing -------------------------------------------------------------- */

#define PK_HUGE ((size_t)2 << 20) /* x86-64 transparent huge page */

/* kernels.h. Advised before the first write (the system's THP mode is
 * usually "madvise": nothing else asks). Only whole huge pages inside n
 * are advised, so the tail never rounds the resident size up (a tail huge
 * page would cost up to 2 MiB per tensor). Measured: one thread, Q4_0
 * TinyLlama generation, 47-52 against 56-69 ms CPU per token (loaded
 * machine, docs/perf-decisions.md, "Weights in huge pages"). */
void *kern_weights_alloc(size_t n) {
  if (n < PK_HUGE) {
    void *p = NULL;
    return posix_memalign(&p, 64, n) == 0 ? p : NULL;
  }
  void *p = NULL;
  if (posix_memalign(&p, PK_HUGE, n) != 0) return NULL;
#ifdef MADV_HUGEPAGE
  if (p) (void)madvise(p, n & ~(PK_HUGE - 1), MADV_HUGEPAGE); /* advisory */
#endif
  return p;
}

int kern_pack(int type, const void *W, int64_t n_rows, int64_t n_cols, kern_packed **out) {
  return kern_pack_ex(type, W, n_rows, n_cols, NULL, NULL, out);
}

int kern_pack_ex(int type, const void *W, int64_t n_rows, int64_t n_cols,
                 void (*done)(const void *src, size_t bytes, void *ctx), void *ctx,
                 kern_packed **out) {
  *out = NULL;
  const struct kern_ops *ops = kern_ops_get();
  const bool kq = kpk_handles(type); /* a K-quant layout (packed_k.c) */
  const bool xf = xpf_handles(type) && ops->xf[type] && ops->xfv[type]; /* float panels (packed_f.c) */
  if (kern_ref_forced() || (!xf && ((!x8_type(type) && !kq) || !ops->ptile[type]))) return 0;
  if (n_rows <= 0 || n_cols <= 0) return 0;
  size_t rb;
  int rc = tensor_type_row_bytes((uint32_t)type, n_cols, &rb);
  if (rc) return rc;
  const int gr = xf ? KERN_XF_ROWS : KERN_PACK_ROWS; /* rows per packed group */
  int64_t ng = (n_rows + gr - 1) / gr, nb = n_cols / 32;
  size_t gb = xf ? xpf_group_bytes(type, n_cols) : kq ? kpk_group_bytes(type, n_cols) : x8_group_bytes(type, n_cols);
  size_t used = kq || xf ? gb : (size_t)nb * x8_pb(type), bytes;
  if (__builtin_mul_overflow(gb, (uint64_t)ng, &bytes) || bytes > SIZE_MAX - PK_HDR)
    return err_set(ERR_RANGE, "pack: %lld rows of %lld columns overflow", (long long)n_rows,
                   (long long)n_cols);
  void *mem = kern_weights_alloc(PK_HDR + bytes);
  if (!mem) return err_set(ERR_NOMEM, "pack: %zu bytes for repacked weights", bytes);
  struct kern_packed *p = mem;
  memset(p, 0, PK_HDR);
  p->type = type;
  p->n_rows = n_rows;
  p->n_cols = n_cols;
  p->n_groups = (n_rows + KERN_PACK_ROWS - 1) / KERN_PACK_ROWS;
  p->xf = xf;
  p->group_bytes = gb;
  p->row_bytes = rb;
  p->bytes = bytes;
  p->data = (uint8_t *)mem + PK_HDR;
  const int64_t slice = 1024 / gr; /* groups between done() calls: 1024 rows */
  for (int64_t g = 0; g < ng; g++) {
    uint8_t *dst = p->data + (size_t)g * gb;
    memset(dst + used, 0, gb - used);
    if (xf)
      xpf_pack_group(type, W, rb, n_rows, n_cols, g, dst);
    else if (kq)
      kpk_pack_group(type, W, rb, n_rows, n_cols, g, dst);
    else
      x8_pack_group(type, W, rb, n_rows, nb, g, dst);
    if (done && ((g + 1) % slice == 0 || g + 1 == ng)) {
      int64_t r0 = (g + 1 - ((g + 1) % slice ? (g + 1) % slice : slice)) * gr;
      int64_t r1 = (g + 1) * gr < n_rows ? (g + 1) * gr : n_rows;
      done((const uint8_t *)W + (size_t)r0 * rb, (size_t)(r1 - r0) * rb, ctx);
    }
  }
  *out = p;
  return 0;
}

void kern_packed_free(kern_packed *p) { free(p); }

/* A float-panel row, gathered and converted 256 columns at a time. */
static int xf_row_f32(const kern_packed *p, int64_t r, float *out) {
  const uint8_t *grp = p->data + (size_t)(r / KERN_XF_ROWS) * p->group_bytes;
  const size_t cs = xpf_group_bytes(p->type, 1); /* bytes per column */
  uint8_t buf[256 * sizeof(float)];
  for (int64_t k0 = 0; k0 < p->n_cols; k0 += 256) {
    int64_t nk = p->n_cols - k0 < 256 ? p->n_cols - k0 : 256;
    xpf_unpack_row(p->type, grp + cs * (size_t)k0, nk, (int)(r % KERN_XF_ROWS), buf);
    int rc = ref_dequantize_row((uint32_t)p->type, buf, out + k0, nk);
    if (rc) return rc;
  }
  return 0;
}

/* Both layouts keep each block (32 columns, x 8) or super-block (256, K)
 * of a group in its own byte range, so a row is unpacked and dequantized
 * piece by piece through a stack buffer: no allocation, whatever n_cols. */
int kern_packed_row_f32(const kern_packed *p, int64_t r, float *out) {
  if (!p || r < 0 || r >= p->n_rows)
    return err_set(ERR_RANGE, "packed row %lld of %lld", (long long)r, p ? (long long)p->n_rows : 0LL);
  if (p->xf) return xf_row_f32(p, r, out);
  const bool kq = kpk_handles(p->type);
  const int64_t blk = kq ? 256 : 32, per = kq ? 8 : 32; /* columns per block, blocks per piece */
  const size_t pb = kq ? kpk_group_bytes(p->type, 256) : x8_pb(p->type); /* packed bytes per block */
  size_t rb;
  int rc = tensor_type_row_bytes((uint32_t)p->type, blk * per, &rb);
  uint8_t buf[2048];
  if (rc || rb > sizeof buf) return err_set(ERR_INTERNAL, "packed row: %zu bytes per piece", rb);
  const uint8_t *grp = p->data + (size_t)(r / KERN_PACK_ROWS) * p->group_bytes;
  const int rr = (int)(r % KERN_PACK_ROWS);
  for (int64_t b0 = 0; b0 < p->n_cols / blk; b0 += per) {
    int64_t nb = p->n_cols / blk - b0 < per ? p->n_cols / blk - b0 : per;
    if (kq)
      kpk_unpack_row(p->type, grp + pb * (size_t)b0, nb * blk, rr, buf);
    else
      x8_unpack_row(p->type, grp + pb * (size_t)b0, nb, rr, buf);
    if ((rc = ref_dequantize_row((uint32_t)p->type, buf, out + b0 * blk, nb * blk))) return rc;
  }
  return 0;
}

size_t kern_packed_bytes(const kern_packed *p) { return p ? p->bytes : 0; }

/* ---- the driver ----------------------------------------------------------- */

struct pk_job {
  struct kern_pk pk;
  struct kern_split split; /* units: row groups */
  atomic_int failed;       /* reference path: a row buffer could not be had */
};

static void pk_rect_ref(const struct kern_pk *j, int64_t g0, int64_t g1, int64_t t0, int64_t t1) {
  const kern_packed *p = j->p;
  uint8_t *row = malloc(p->row_bytes);
  if (!row) {
    atomic_store(j->failed, 1);
    return;
  }
  for (int64_t g = g0; g < g1; g++)
    for (int r = 0; r < KERN_PACK_ROWS; r++) {
      int64_t rr = g * KERN_PACK_ROWS + r;
      if (rr >= p->n_rows) break;
      if (p->xf)
        xpf_unpack_row(p->type, p->data + (size_t)(rr / KERN_XF_ROWS) * p->group_bytes, p->n_cols,
                       (int)(rr % KERN_XF_ROWS), row);
      else if (kpk_handles(p->type))
        kpk_unpack_row(p->type, p->data + (size_t)g * p->group_bytes, p->n_cols, r, row);
      else
        x8_unpack_row(p->type, p->data + (size_t)g * p->group_bytes, p->n_cols / 32, r, row);
      for (int64_t t = t0; t < t1; t++)
        ref_vec_dot((uint32_t)p->type, row, j->x + t * p->n_cols, p->n_cols, &j->y[t * p->n_rows + rr]);
    }
  free(row);
}

void kern_pk_rect(const struct kern_pk *j, int64_t g0, int64_t g1, int64_t t0, int64_t t1) {
  if (j->xf) {
    xpf_rect(j, j->p->data, j->p->group_bytes, g0, g1, t0, t1);
    return;
  }
  if (!j->tile) {
    pk_rect_ref(j, g0, g1, t0, t1);
    return;
  }
  const kern_packed *p = j->p;
  float tmp[KERN_PACK_ROWS * KERN_TILE_TOKENS_MAX];
  for (int64_t tb = t0; tb < t1; tb += PK_TOK_BLOCK) {
    int64_t te = tb + PK_TOK_BLOCK < t1 ? tb + PK_TOK_BLOCK : t1;
    for (int64_t g = g0; g < g1; g++) {
      const uint8_t *w = p->data + (size_t)g * p->group_bytes;
      int64_t r0 = g * KERN_PACK_ROWS;
      if (j->tile2 && g + 1 < g1 && r0 + 2 * KERN_PACK_ROWS <= p->n_rows) { /* two full groups */
        for (int64_t t = tb; t < te; t += j->tnt) {
          int nt = (int)(te - t < j->tnt ? te - t : j->tnt);
          const kern_ptile2_fn tile2 = t == tb ? j->tile2 : j->tile2_warm;
          tile2(w, p->group_bytes, p->n_cols, j->xq + (size_t)t * j->xa_stride, j->xa_stride, nt,
                &j->y[t * p->n_rows + r0], (size_t)p->n_rows);
        }
        g++;
        continue;
      }
      int nr = p->n_rows - r0 < KERN_PACK_ROWS ? (int)(p->n_rows - r0) : KERN_PACK_ROWS;
      for (int64_t t = tb; t < te; t += j->tnt) {
        int nt = (int)(te - t < j->tnt ? te - t : j->tnt);
        const uint8_t *xa = j->xq + (size_t)t * j->xa_stride;
        /* the first token tile streams the group in (and prefetches the
         * next); later ones find it in cache */
        const kern_ptile_fn tile = t == tb ? j->tile : j->tile_warm;
        if (nr == KERN_PACK_ROWS) {
          tile(w, p->n_cols, xa, j->xa_stride, nt, &j->y[t * p->n_rows + r0], (size_t)p->n_rows);
        } else { /* padded last group: only its real rows reach y */
          tile(w, p->n_cols, xa, j->xa_stride, nt, tmp, KERN_PACK_ROWS);
          for (int k = 0; k < nt; k++)
            memcpy(&j->y[(t + k) * p->n_rows + r0], tmp + k * KERN_PACK_ROWS, sizeof(float) * (size_t)nr);
        }
      }
    }
  }
}

static void pk_worker(void *arg, int ith, int nth) {
  (void)ith;
  (void)nth;
  struct pk_job *j = arg;
  int64_t u0, u1, t0, t1;
  while (kern_split_next(&j->split, &u0, &u1, &t0, &t1)) kern_pk_rect(&j->pk, u0, u1, t0, t1);
}

int kern_pk_setup(struct kern_pk *j, const kern_packed *p, const float *x, int64_t n_tokens, float *y) {
  if (!p) return err_set(ERR_INVALID, "matmul: no packed weights");
  if (n_tokens < 0)
    return err_set(ERR_RANGE, "matmul: negative size (%lld tokens)", (long long)n_tokens);
  const struct kern_ops *ops = kern_ops_get();
  memset(j, 0, sizeof *j);
  j->p = p;
  j->n_rows = p->n_rows;
  j->n_cols = p->n_cols;
  j->n_groups = p->n_groups;
  j->x = x;
  j->y = y;
  j->n_tokens = n_tokens;
  j->tnt = KERN_TILE_TOKENS;
  if (p->xf) { /* float panels: f32 activations in padded rows; no kernel on this variant: reference */
    if (!kern_ref_forced() && ops->xf[p->type] && ops->xfv[p->type]) {
      j->xf = ops->xf[p->type];
      j->xfv = ops->xfv[p->type];
      if (ops->xfw[p->type] && ops->xf[TENSOR_TYPE_F32]) {
        j->xfw = ops->xfw[p->type];
        j->xf32 = ops->xf[TENSOR_TYPE_F32];
      }
      j->quant = xpf_act_copy;
      j->xa_stride = xpf_act_row_bytes(p->n_cols);
      j->tnt = KERN_XF_NT;
    }
  } else if (!kern_ref_forced() && ops->ptile[p->type]) {
    j->tile = ops->ptile[p->type];
    j->tile_warm = ops->ptile_warm[p->type] ? ops->ptile_warm[p->type] : j->tile;
    j->tnt = ops->ptile_nt[p->type];
    j->tile2 = ops->ptile2[p->type];
    j->tile2_warm = ops->ptile2_warm[p->type] ? ops->ptile2_warm[p->type] : j->tile2;
    j->quant = ops->pquant[p->type];
    _Static_assert(sizeof(kern_block_q8s) == sizeof(kern_block_q8), "40-byte activation blocks");
    j->xa_stride = kpk_handles(p->type) ? kpk_act_row_bytes(p->type, p->n_cols)
                                        : (size_t)(p->n_cols / 32) * sizeof(kern_block_q8s);
  }
  size_t bytes;
  if (j->quant && __builtin_mul_overflow(j->xa_stride, (uint64_t)n_tokens, &bytes))
    return err_set(ERR_RANGE, "matmul: %lld tokens of %lld columns overflow", (long long)n_tokens,
                   (long long)p->n_cols);
  return 0;
}

int kern_matmul_packed(thread_pool *tp, const kern_packed *p, const float *x, int64_t n_tokens,
                       float *y) {
  struct pk_job j;
  int rc = kern_pk_setup(&j.pk, p, x, n_tokens, y);
  if (rc) return rc;
  if (n_tokens == 0) return 0;
  atomic_init(&j.failed, 0);
  j.pk.failed = &j.failed;
  if (j.pk.quant) {
    size_t bytes = j.pk.xa_stride * (size_t)n_tokens; /* checked by kern_pk_setup */
    j.pk.xq = kern_act_scratch(tp, bytes);
    if (!j.pk.xq) return err_set(ERR_NOMEM, "matmul: %zu bytes of quantized activations", bytes);
    kern_quant_rows(tp, j.pk.quant, x, n_tokens, p->n_cols, j.pk.xq, j.pk.xa_stride);
  }
  /* units of one group of 8 rows, chunks of whole pairs with a two-group
   * tile (so that no chunk but the last holds a group the tile cannot pair) */
  kern_split_plan(&j.split, tpool_n_threads(tp), p->n_groups,
                  kern_split_min_units(p->row_bytes * KERN_PACK_ROWS, n_tokens), kern_pk_align(&j.pk),
                  n_tokens, j.pk.tnt);
  tpool_run(tp, pk_worker, &j);
  if (atomic_load(&j.failed)) return err_set(ERR_NOMEM, "matmul: a row buffer for the reference path");
  return 0;
}
