/*
 * kern_iq_common.h - what the portable (kern_generic_iq.h) and x86
 * (kern_x86_iq.h) tile kernels of the 256-element i-quants share: the
 * kinds, block sizes, and the arithmetic both follow, so that every
 * variant gives the same bits.
 *
 * Arithmetic per (row, token): every weight of a 256-block is an integer w
 * (IQ4 level or signed grid value) times an integer scale c of its 16 or
 * 32 elements times one float dw = f16(d) * K for the block, K a power of
 * two (the format's (d * (0.5 + s)) * 0.25 is d * (2s + 1) / 8: c = 2s + 1,
 * K = 1/8). Lane l (0..7) of the block's int32 sum adds, over the 8
 * sub-blocks s of 32, c * (sum of w * x over elements 32s + 4l .. 32s +
 * 4l + 3), exact (at most 8 x 32 x 4 x 127 x 127 < 2^31); then
 * acc[l] = fmaf(dw * d_x, (float)isum[l], acc[l]) per block, and the
 * result is the lane sum ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
 */
#ifndef PARLEY_KERNELS_KERN_IQ_COMMON_H
#define PARLEY_KERNELS_KERN_IQ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/iq_grids.h"
#include "kernels/tensor_type.h"

/* kinds of the 256-element i-quants (shared with kern_x86_iq.h) */
enum { IQK_IQ4_XS, IQK_IQ3_XXS, IQK_IQ3_S, IQK_IQ2_XXS, IQK_IQ2_XS, IQK_IQ2_S };

static inline uint32_t iqk_ld32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline unsigned iqk_ld16(const uint8_t *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }

/* Bytes of one block of kind k. */
static inline size_t iqk_bytes(int k) {
  static const size_t b[] = {sizeof(block_iq4_xs), sizeof(block_iq3_xxs), sizeof(block_iq3_s),
                             sizeof(block_iq2_xxs), sizeof(block_iq2_xs), sizeof(block_iq2_s)};
  return b[k];
}

/* The block's float factor K (see the header comment). */
static inline float iqk_k(int k) {
  return k == IQK_IQ4_XS || k == IQK_IQ3_S ? 1.0f : k == IQK_IQ3_XXS ? 0.25f : 0.125f;
}

#endif
