/*
 * kern_neon.c - the portable kernels of kern_generic_body.h as the
 * "neon" variant, for arm64, where NEON is part of the base ISA. On arm64 the compiler turns the 8-lane loops into NEON
 * vector code (NEON is baseline there, no target attribute needed); the
 * arithmetic is bit-identical to the x86 variants, so the tests run on x86
 * check it through the scalar variant, which is the same source.
 */
#include "kernels/kernels_impl.h"

#if defined(__aarch64__)

#define GEN_FN
#include "kernels/kern_generic_body.h"
#include "kernels/kern_generic_iq.h"

int kern_ops_neon(struct kern_ops *ops) {
  ops->isa = "neon";
  gen_fill_ops(ops);
  gen_fill_iq_ops(ops);
  return 1;
}

#else

int kern_ops_neon(struct kern_ops *ops) {
  (void)ops;
  return 0;
}

#endif
