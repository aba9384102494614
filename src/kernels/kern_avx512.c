/*
 * kern_avx512.c - the x86 kernels of kern_x86_body.h compiled with AVX-512
 * (F, BW, VL) and VNNI enabled: the 8-bit dot products become one
 * vpdpbusd (256-bit, EVEX) instead of vpmaddubsw + vpmaddwd, and the
 * compiler may use the 32 vector registers. For the integer weight types
 * results are bit-identical to the AVX2 variant (the dot product agrees
 * exactly when maddubs cannot saturate, see kern_x86_body.h), so tests run
 * on AVX2 machines cover the arithmetic; only the instruction selection
 * differs. Packed Q4_0, Q5_0 and Q8_0 get their own 512-bit VNNI tiles
 * (kern_x512_q4x8.h, two row groups per zmm) and the packed K-quants zmm
 * VNNI tiles (kern_x512_qk.h), bit-identical to the AVX2 ones as well.
 * F32/F16/BF16 weights have their own 512-bit kernels (kern_x512_f16.h,
 * installed over the 256-bit ones by x512_fill_f16_ops): they add the same
 * products in another order, so they agree with AVX2 only to f32 rounding
 * (within 2 n FLT_EPSILON sum |w x|, tested), while within this variant
 * every result is still independent of the token count and the thread
 * split.
 *
 * Chosen by kernels.c before AVX2 when the CPU reports avx512f, avx512bw,
 * avx512vl and avx512vnni (Ice Lake and later, Zen 4 and later).
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)

#define X86_TARGET_512 "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
#define TGT __attribute__((target(X86_TARGET_512)))
#define TGT_INL static inline __attribute__((always_inline, target(X86_TARGET_512)))
#define X86_DOT_U8S8(u, s) _mm256_dpbusd_epi32(_mm256_setzero_si256(), (u), (s))

#include "kernels/kern_x86_body.h"
#include "kernels/kern_x86_f16.h"
#include "kernels/kern_x86_q4x8.h"
#include "kernels/kern_x86_mxfp4x8.h"
#include "kernels/kern_x86_q4kx8.h"
#include "kernels/kern_x86_q6kx8.h"
#include "kernels/kern_x512_q4x8.h"
#include "kernels/kern_x512_qk.h"
#include "kernels/kern_x512_f16.h"
#include "kernels/kern_x512_xf.h"
#include "kernels/kern_x86_iq.h"

int kern_ops_avx512(struct kern_ops *ops) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
      !x86_has_f16c() || !__builtin_cpu_supports("avx512f") ||
      !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl") ||
      !__builtin_cpu_supports("avx512vnni"))
    return 0;
  ops->isa = "avx512-vnni";
  x86_fill_ops(ops);
  x86_fill_iq_ops(ops); /* IQ4_XS, IQ3_*, IQ2_* */
  x86_fill_ops_rect(ops);
  x86_fill_mxfp4_ops(ops); /* MXFP4: 8-row tiles from the GGUF rows */
  x512_fill_f16_ops(ops); /* 512-bit F32/F16/BF16 tile and rect */
  x86_fill_packed_ops(ops);
  x86_fill_packed_k_ops(ops);
  x86_fill_packed_q6k_ops(ops);
  x512_fill_packed_q4_ops(ops);
  x512_fill_packed_qk_ops(ops); /* zmm VNNI tiles for the packed K-quants */
  x512_fill_xf_ops(ops);        /* float panels: F32/F16/BF16 weights are packed */
  return 1;
}

#else

int kern_ops_avx512(struct kern_ops *ops) {
  (void)ops;
  return 0;
}

#endif
