/*
 * packed_k.c - the repacked layout of Q4_K weights (groups of 8 interleaved
 * rows, like the Q4_0 x 8 layout of packed.c) and its pack / unpack. The
 * driver (kern_matmul_packed) and the packing loop are packed.c's; the
 * x86 tile that reads this layout is kern_x86_q4kx8.h.
 *
 * Why: the row-major Q4_K tile (kern_x86_body.h body_q4_Kx) must transpose
 * its nibble vectors and spread the scales once per row and super-block,
 * reload every activation vector for every row, and end each (row, token)
 * with a horizontal sum. With 8 rows interleaved in 4-byte words one
 * vpmaddubsw multiplies 4 columns of 8 rows by a broadcast of 4 activation
 * bytes, the 8 lanes of one register are the 8 rows' results, and the
 * per-super-block scale unpacking is shared by 8 rows.
 *
 * Layout, Q4_K: rows in groups of 8 (a last partial group padded with zero
 * rows: d = dmin = 0, never written to y). Group g is n_cols / 256
 * super-blocks of 1152 bytes = 8 x 144, exactly the GGUF bytes of its 8
 * rows (4.5 bits per weight, no padding: 1152 is a multiple of 64), so a
 * one-token call reads no more than the row kernel. Super-block b:
 *   0..15    the 8 rows' f16 d, row order;
 *   16..31   the 8 rows' f16 dmin;
 *   32..95   scale bytes, two 32-byte vectors V = 0 (sub-blocks 0..3) and
 *            V = 1 (4..7): byte 32 V + 16 L + 4 k' + r' belongs to row
 *            4 L + r' and sub-block 4 V + k'; its bits 0..5 are that
 *            scale, bits 6..7 bits 4..5 of the min;
 *   96..127  the mins' low 4 bits: byte j's low nibble for scale byte j,
 *            its high nibble for scale byte 32 + j;
 *   128..    32 vectors of 32 bytes: byte 4 r + m of vector i is byte
 *            4 i + m of row r's qs (a transpose of 4-byte words). With
 *            p = i / 8, i' = i % 8, `& 15` gives elements 64 p + 4 i' ..
 *            + 3 (sub-block 2 p) of the 8 rows, `>> 4` elements
 *            64 p + 32 + 4 i' .. + 3 (sub-block 2 p + 1).
 * The scale bytes are placed so that one vpshufb per sub-block yields the
 * 8 rows' scales as int16 pairs in each row's two 16-bit lanes (both
 * 128-bit halves with one pattern), and one per pair of sub-blocks the
 * rows' two mins side by side (kern_x86_q4kx8.h).
 *
 * Layout, Q6_K (tile in kern_x86_q6kx8.h): groups of 8 rows as for Q4_K
 * (zero rows: d = 0, scales 0). Group g is n_cols / 256 super-blocks of
 * 1680 bytes = 8 x 210, exactly the GGUF bytes of its 8 rows (6.5625 bits
 * per weight, no padding; 1680 is not a multiple of 64, the tile loads
 * unaligned). The 6-bit q is split into a nibble plane and a 2-bit plane,
 * both in the x 8 transpose of 4-byte words. Super-block b:
 *   0..15     the 8 rows' f16 d, row order;
 *   16..143   int8 scales, four 32-byte vectors: byte 16 + 32 V + 4 r + k'
 *             is row r's scale of 16-element sub-block 4 V + k' (so one
 *             vpshufb + one 16-bit arithmetic shift put a sub-block's 8
 *             scales, sign-extended, in both 16-bit halves of lane r);
 *   144..     per sub-block k (elements 16 k .. 16 k + 15, quads c = 0..3
 *             of 4 elements) 96 bytes = 3 vectors of 32 bytes:
 *             N0, N1: byte 4 r + m of N_i: low nibble = low 4 bits of
 *               element 16 k + 4 i + m of row r (quad i), high nibble =
 *               those of element 16 k + 8 + 4 i + m (quad 2 + i);
 *             H: byte 4 r + m, bits 2 c .. 2 c + 1 = the high 2 bits of
 *               element 16 k + 4 c + m of row r.
 * So quad c of 8 rows is one 32-byte register of 6-bit q in 4 operations
 * (shift, and, shifted H and 0x30, or); the planes of a sub-block sit
 * together so that decode reads one forward stream.
 */
#include "kernels/packed_k.h"

#include <string.h>

#include "kernels/kernels_impl.h"
#include "kernels/tensor_type.h"

#define Q4KX8_SB 1152 /* bytes per super-block of a group: 8 x 144 */

#define Q6KX8_SB 1680 /* bytes per super-block of a group: 8 x 210 */

bool kpk_handles(int type) { return type == TENSOR_TYPE_Q4_K || type == TENSOR_TYPE_Q6_K; }

size_t kpk_group_bytes(int type, int64_t n_cols) {
  return (size_t)(n_cols / QK_K) * (type == TENSOR_TYPE_Q6_K ? Q6KX8_SB : Q4KX8_SB);
}

/* ---- Q6_K -------------------------------------------------------------- */

/* The 6-bit q of element j of a GGUF Q6_K block (tensor_type.h). */
static int q6k_get(const block_q6_K *x, int j) {
  int h = j / 128, s = (j % 128) / 32, l = j % 32;
  int lo = (x->ql[64 * h + l + 32 * (s & 1)] >> 4 * (s >> 1)) & 15;
  int hi = (x->qh[32 * h + l] >> 2 * s) & 3;
  return lo | hi << 4;
}

/* Byte offset in a packed super-block of element j's nibble (*shift 0 or
 * 4 within the byte) and of its 2 high bits (*hshift 0, 2, 4, 6), for row r. */
static void q6kx8_pos(int r, int j, int *nib, int *nshift, int *hb, int *hshift) {
  int k = j / 16, c = (j % 16) / 4, m = j % 4; /* sub-block, quad, column */
  *nib = 144 + 96 * k + 32 * (c % 2) + 4 * r + m;
  *nshift = 4 * (c / 2);
  *hb = 144 + 96 * k + 64 + 4 * r + m;
  *hshift = 2 * c;
}

/* Byte offset of row r's scale of sub-block k. */
static int q6kx8_scale_pos(int r, int k) { return 16 + 32 * (k / 4) + 4 * r + k % 4; }

static void q6k_pack_group(const uint8_t *W, size_t rb, int64_t n_rows, int64_t n_cols, int64_t g,
                           uint8_t *dst) {
  const int64_t nsb = n_cols / QK_K;
  memset(dst, 0, (size_t)nsb * Q6KX8_SB);
  for (int r = 0; r < KERN_PACK_ROWS; r++) {
    int64_t row = g * KERN_PACK_ROWS + r;
    if (row >= n_rows) break; /* zero rows: d = 0, scales 0, q 0 */
    const block_q6_K *src = (const block_q6_K *)(W + (size_t)row * rb);
    for (int64_t b = 0; b < nsb; b++) {
      uint8_t *o = dst + (size_t)b * Q6KX8_SB;
      const block_q6_K *x = src + b;
      memcpy(o + 2 * r, &x->d, 2);
      for (int k = 0; k < 16; k++) o[q6kx8_scale_pos(r, k)] = (uint8_t)x->scales[k];
      for (int j = 0; j < QK_K; j++) {
        int q = q6k_get(x, j), nib, ns, hb, hs;
        q6kx8_pos(r, j, &nib, &ns, &hb, &hs);
        o[nib] |= (uint8_t)((q & 15) << ns);
        o[hb] |= (uint8_t)((q >> 4) << hs);
      }
    }
  }
}

static void q6k_unpack_row(const uint8_t *grp, int64_t n_cols, int r, uint8_t *row) {
  const int64_t nsb = n_cols / QK_K;
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *o = grp + (size_t)b * Q6KX8_SB;
    block_q6_K *x = (block_q6_K *)row + b;
    memset(x, 0, sizeof *x);
    memcpy(&x->d, o + 2 * r, 2);
    for (int k = 0; k < 16; k++) x->scales[k] = (int8_t)o[q6kx8_scale_pos(r, k)];
    for (int j = 0; j < QK_K; j++) {
      int nib, ns, hb, hs;
      q6kx8_pos(r, j, &nib, &ns, &hb, &hs);
      int lo = (o[nib] >> ns) & 15, hi = (o[hb] >> hs) & 3;
      int h = j / 128, s = (j % 128) / 32, l = j % 32;
      x->ql[64 * h + l + 32 * (s & 1)] |= (uint8_t)(lo << 4 * (s >> 1));
      x->qh[32 * h + l] |= (uint8_t)(hi << 2 * s);
    }
  }
}

/* ---- Q4_K -------------------------------------------------------------- */

/* Byte offset within the 64 scale bytes of (row r, sub-block k). */
static int q4kx8_pos(int r, int k) { return 32 * (k / 4) + 16 * (r / 4) + 4 * (k % 4) + r % 4; }

/* The 6-bit scale and min of sub-block k of a GGUF Q4_K block (the
 * "scales12" packing of tensor_type.h). */
static void q4k_get(const uint8_t *s, int k, uint8_t *sc, uint8_t *mn) {
  if (k < 4) {
    *sc = s[k] & 63;
    *mn = s[k + 4] & 63;
  } else {
    *sc = (uint8_t)((s[k + 4] & 15) | (s[k - 4] >> 6) << 4);
    *mn = (uint8_t)((s[k + 4] >> 4) | (s[k] >> 6) << 4);
  }
}

/* The inverse of q4k_get for all 8 sub-blocks. */
static void q4k_put(uint8_t *s, const uint8_t *sc, const uint8_t *mn) {
  for (int k = 0; k < 4; k++) {
    s[k] = (uint8_t)((sc[k] & 63) | (sc[k + 4] >> 4) << 6);
    s[k + 4] = (uint8_t)((mn[k] & 63) | (mn[k + 4] >> 4) << 6);
    s[k + 8] = (uint8_t)((sc[k + 4] & 15) | (mn[k + 4] & 15) << 4);
  }
}

void kpk_pack_group(int type, const uint8_t *W, size_t rb, int64_t n_rows, int64_t n_cols, int64_t g,
                    uint8_t *dst) {
  if (type == TENSOR_TYPE_Q6_K) {
    q6k_pack_group(W, rb, n_rows, n_cols, g, dst);
    return;
  }
  const int64_t nsb = n_cols / QK_K;
  memset(dst, 0, (size_t)nsb * Q4KX8_SB);
  for (int r = 0; r < KERN_PACK_ROWS; r++) {
    int64_t row = g * KERN_PACK_ROWS + r;
    if (row >= n_rows) break; /* zero rows: d = dmin = 0, already cleared */
    const block_q4_K *src = (const block_q4_K *)(W + (size_t)row * rb);
    for (int64_t b = 0; b < nsb; b++) {
      uint8_t *o = dst + (size_t)b * Q4KX8_SB;
      const block_q4_K *x = src + b;
      memcpy(o + 2 * r, &x->d, 2);
      memcpy(o + 16 + 2 * r, &x->dmin, 2);
      for (int k = 0; k < 8; k++) {
        uint8_t sc, mn;
        q4k_get(x->scales, k, &sc, &mn);
        int pos = q4kx8_pos(r, k);
        o[32 + pos] = (uint8_t)(sc | (mn >> 4) << 6);
        o[96 + pos % 32] |= (uint8_t)((mn & 15) << (pos < 32 ? 0 : 4));
      }
      for (int i = 0; i < 32; i++) memcpy(o + 128 + 32 * i + 4 * r, x->qs + 4 * i, 4);
    }
  }
}

void kpk_unpack_row(int type, const uint8_t *grp, int64_t n_cols, int r, uint8_t *row) {
  if (type == TENSOR_TYPE_Q6_K) {
    q6k_unpack_row(grp, n_cols, r, row);
    return;
  }
  const int64_t nsb = n_cols / QK_K;
  for (int64_t b = 0; b < nsb; b++) {
    const uint8_t *o = grp + (size_t)b * Q4KX8_SB;
    block_q4_K *x = (block_q4_K *)row + b;
    memcpy(&x->d, o + 2 * r, 2);
    memcpy(&x->dmin, o + 16 + 2 * r, 2);
    uint8_t sc[8], mn[8];
    for (int k = 0; k < 8; k++) {
      int pos = q4kx8_pos(r, k);
      sc[k] = o[32 + pos] & 63;
      mn[k] = (uint8_t)(((o[96 + pos % 32] >> (pos < 32 ? 0 : 4)) & 15) | (o[32 + pos] >> 6) << 4);
    }
    q4k_put(x->scales, sc, mn);
    for (int i = 0; i < 32; i++) memcpy(x->qs + 4 * i, o + 128 + 32 * i + 4 * r, 4);
  }
}

/* Activations of packed Q4_K: block_q8_K rows whose bsums[k], k < 8, hold
 * the sums over 32-element sub-blocks (bsums[2k] + bsums[2k + 1] of the
 * plain block; |sum| <= 32 x 127 fits int16); bsums[8..15] are unused.
 * Packed Q6_K: plain block_q8_K rows (bsums per 16 = its sub-blocks). */
size_t kpk_act_row_bytes(int type, int64_t n_cols) {
  (void)type;
  return (size_t)(n_cols / QK_K) * sizeof(block_q8_K);
}
