/*
 * kern_scalar.c - the portable kernels of kern_generic_body.h as the
 * "scalar" variant, for every CPU without a SIMD variant (x86-64 without AVX2, other architectures). Slower than SIMD but still integer dot products on 8-bit
 * activations, and bit-identical to the x86 variants (the unit tests check
 * it against AVX2 where both run).
 */
#include "kernels/kernels_impl.h"

#define GEN_FN
#include "kernels/kern_generic_body.h"
#include "kernels/kern_generic_iq.h"

int kern_ops_scalar(struct kern_ops *ops) {
  ops->isa = "scalar";
  gen_fill_ops(ops);
  gen_fill_iq_ops(ops);
  return 1;
}
