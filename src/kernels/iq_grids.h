/*
 * iq_grids.h - the codebooks and small value tables of the i-quant, MXFP4
 * and ternary tensor types (format data, defined by GGUF/ggml; the large
 * grids are in iq_grids.c).
 *
 * Grid entry e of a grid with 8-byte entries decodes to byte j of
 * grid[e] (element j in bits 8j..8j+7), so the tables read the same on any
 * host byte order.
 */
#ifndef PARLEY_KERNELS_IQ_GRIDS_H
#define PARLEY_KERNELS_IQ_GRIDS_H

#include <stdint.h>
#include <string.h>

extern const uint64_t iq2xxs_grid[256];  /* IQ2_XXS: 8 magnitudes in {8, 25, 43} */
extern const uint64_t iq2xs_grid[512];   /* IQ2_XS */
extern const uint64_t iq2s_grid[1024];   /* IQ2_S */
extern const uint32_t iq3xxs_grid[256];  /* IQ3_XXS: 4 magnitudes in {4, 12, ..., 62} */
extern const uint32_t iq3s_grid[512];    /* IQ3_S: 4 magnitudes in {1, 3, ..., 15} */
extern const uint64_t iq1s_grid[2048];   /* IQ1_S, IQ1_M: 8 int8 in {-1, 0, 1} */

/* The 16 non-linear levels of IQ4_NL and IQ4_XS (int8, times the scale). */
static const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};
/* MXFP4: the 16 E2M1 values doubled (index bit 3 is the sign), so a block's
 * scale is half its E8M0 power of two. */
static const int8_t kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Half of a block's E8M0 scale 2^(e - 127), the factor of the doubled
 * values above: 2^(e - 128), exact, built from its bits (e >= 2 normal,
 * e = 1 and 0 the subnormals 2^-127 and 2^-128) so every kernel variant
 * and the reference share one value. */
static inline float mxfp4_half_scale(uint8_t e) {
  uint32_t bits = e >= 2 ? (uint32_t)(e - 1) << 23 : 0x00200000u << e;
  float d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* IQ1_S / IQ1_M: every grid value is shifted by +-1/8 (the delta bit). */
#define IQ1_DELTA 0.125f

/* The 8 sign bits a 7-bit sign field stands for: bit 7 makes the count of
 * negatives even (ggml's ksigns_iq2xs table is this function tabulated). */
static inline uint8_t iq_signs7(unsigned s7) {
  unsigned p = s7 & 127;
  p ^= p >> 4;
  p ^= p >> 2;
  p ^= p >> 1;
  return (uint8_t)((s7 & 127) | (p & 1) << 7);
}

/* Byte j of an 8-byte or 4-byte grid entry. */
static inline uint8_t iq_grid_byte(uint64_t entry, int j) { return (uint8_t)(entry >> (8 * j)); }

#endif
