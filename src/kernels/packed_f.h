/*
 * packed_f.h - the float-panel layout of F32, F16 and BF16 weights (groups
 * of KERN_XF_ROWS rows, column-major inside a group: kernels_impl.h), beside
 * the x 8 layouts of packed.c and the K-quant layouts of packed_k.c; packed.c
 * calls these when the variant has float-panel kernels (kern_ops.xf).
 * Internal to src/kernels/; the why and the numbers are in packed_f.c.
 */
#ifndef PARLEY_KERNELS_PACKED_F_H
#define PARLEY_KERNELS_PACKED_F_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kern_pk;

/* True for the types packed_f.c lays out (F32, F16, BF16). */
bool xpf_handles(int type);
/* Bytes of one group of 32 rows of n_cols elements. */
size_t xpf_group_bytes(int type, int64_t n_cols);
/* Packs rows 32g..32g+31 of W (GGUF rows of rb bytes; rows >= n_rows as
 * zero rows) into dst, xpf_group_bytes of it. */
void xpf_pack_group(int type, const uint8_t *W, size_t rb, int64_t n_rows, int64_t n_cols, int64_t g,
                    uint8_t *dst);
/* Row r (0..31) of a packed group back to its GGUF row (bit-exact inverse). */
void xpf_unpack_row(int type, const uint8_t *grp, int64_t n_cols, int r, uint8_t *row);
/* Bytes of one token's activations as the panel kernels read them (f32,
 * padded so consecutive tokens do not alias in L1), and the copy into them
 * (a kern_quant_fn). */
size_t xpf_act_row_bytes(int64_t n_cols);
void xpf_act_copy(const float *x, void *dst, int64_t n);
/* Units [u0, u1) (of KERN_PACK_ROWS rows; u0 a multiple of 4) x tokens
 * [t0, t1) of a float-panel product set up by kern_pk_setup (j->xf set,
 * activations copied to j->xq); data and group_bytes: the packed groups. */
void xpf_rect(const struct kern_pk *j, const uint8_t *data, size_t group_bytes, int64_t u0, int64_t u1, int64_t t0,
              int64_t t1);

#endif
