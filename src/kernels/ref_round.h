/*
 * ref_round.h - the clamped rounding the reference quantizers share
 * (ref_quant.c, ref_quant_k.c). Clamping happens in float first, so no
 * out-of-range float-to-int conversion can occur; NaN gives the in-range
 * value closest to 0.
 */
#ifndef PARLEY_KERNELS_REF_ROUND_H
#define PARLEY_KERNELS_REF_ROUND_H

#include <math.h>

/* Rounds v to the nearest integer (ties to even) and clamps it to lo..hi. */
static inline int qround(float v, int lo, int hi) {
  if (v != v) return lo > 0 ? lo : hi < 0 ? hi : 0;
  if (v < (float)lo) return lo;
  if (v > (float)hi) return hi;
  return (int)lrintf(v);
}

/* floor, clamped the same way (the absmax quantizers add 8.5 / 16.5). */
static inline int qfloor(float v, int lo, int hi) {
  if (v != v) return lo > 0 ? lo : hi < 0 ? hi : 0;
  if (v < (float)lo) return lo;
  if (v > (float)hi) return hi;
  return (int)floorf(v);
}

#endif
