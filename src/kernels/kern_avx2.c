/*
 * kern_avx2.c - AVX2 + FMA + F16C kernels (x86-64), chosen at run time by
 * kernels.c when the CPU has all three. The kernels themselves are in
 * kern_x86_body.h (shared with the AVX-512 variant); this file sets the
 * target and the 8-bit dot product, and says whether the CPU qualifies.
 *
 * Every function carries __attribute__((target)) instead of the file being
 * built with -mavx2, so the binary still runs on any x86-64: nothing here
 * executes unless kern_ops_avx2 said yes.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)

#define TGT __attribute__((target("avx2,fma,f16c")))
#define TGT_INL static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#define X86_DOT_U8S8(u, s) _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1))

#include "kernels/kern_x86_body.h"
#include "kernels/kern_x86_f16.h"
#include "kernels/kern_x86_q4x8.h"
#include "kernels/kern_x86_mxfp4x8.h"
#include "kernels/kern_x86_q4kx8.h"
#include "kernels/kern_x86_q6kx8.h"
#include "kernels/kern_x86_xf.h"
#include "kernels/kern_x86_iq.h"

int kern_ops_avx2(struct kern_ops *ops) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
      !x86_has_f16c())
    return 0;
  ops->isa = "avx2";
  x86_fill_ops(ops);
  x86_fill_iq_ops(ops); /* IQ4_XS, IQ3_*, IQ2_* */
  x86_fill_ops_rect(ops);
  x86_fill_mxfp4_ops(ops); /* MXFP4: 8-row tiles from the GGUF rows */
  x86_fill_ops_gemv(ops); /* one-token F32/F16/BF16 (decode) */
  x86_fill_packed_ops(ops);
  x86_fill_packed_k_ops(ops);
  x86_fill_packed_q6k_ops(ops);
  x86_fill_xf_ops(ops); /* float panels: F32/F16/BF16 weights are packed */
  return 1;
}

#else

int kern_ops_avx2(struct kern_ops *ops) {
  (void)ops;
  return 0;
}

#endif
