/*
 * packed_k.h - the repacked layouts of the K-quants (Q4_K, Q6_K), beside the
 * x 8 Q4_0 / Q8_0 layouts of packed.c, which calls these through a small
 * per-type hook. Internal to src/kernels/; the layout is described in
 * packed_k.c.
 */
#ifndef PARLEY_KERNELS_PACKED_K_H
#define PARLEY_KERNELS_PACKED_K_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True for the types packed_k.c lays out. */
bool kpk_handles(int type);
/* Bytes of one group of 8 rows of n_cols (a multiple of 256) elements. */
size_t kpk_group_bytes(int type, int64_t n_cols);
/* Packs rows 8g..8g+7 of W (GGUF rows of rb bytes; rows >= n_rows as zero
 * rows) into dst, group_bytes of it. */
void kpk_pack_group(int type, const uint8_t *W, size_t rb, int64_t n_rows, int64_t n_cols, int64_t g,
                    uint8_t *dst);
/* Row r (0..7) of a packed group back to its GGUF row (bit-exact inverse). */
void kpk_unpack_row(int type, const uint8_t *grp, int64_t n_cols, int r, uint8_t *row);
/* Bytes of one token's activations in the format the packed tile reads. */
size_t kpk_act_row_bytes(int type, int64_t n_cols);

#endif
