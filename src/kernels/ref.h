/*
 * ref.h - reference (plain scalar C) kernels: dequantize a row, quantize a
 * row, dot product of a quantized row with an f32 vector.
 *
 * These are the definition of correct for every fast kernel: readable, one
 * type at a time, no intrinsics. n is always a multiple of the type's block
 * size (callers check with tensor_type_row_bytes). The quantizers are simple
 * (min/max scales, a short scale search for the K-quants), good enough to
 * generate test models; their bit layout is exactly ggml's, so files they
 * write decode anywhere and real files decode here.
 */
#ifndef PARLEY_KERNELS_REF_H
#define PARLEY_KERNELS_REF_H

#include <stdint.h>

#include "kernels/tensor_type.h"

/* Table-driven entry points: return 0, or ERR_UNSUPPORTED (type without a
 * reference kernel) / ERR_RANGE (n not a multiple of the block size). */
int ref_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
int ref_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);
/* Dot product of the n-element row (in `type`) with x, accumulated in double
 * after dequantizing block by block. */
int ref_vec_dot(uint32_t type, const void *row, const float *x, int64_t n, float *out);

/* Per-type kernels (also reachable through tensor_type_get()->...). */
void ref_dequant_f32(const void *src, float *dst, int64_t n);
void ref_dequant_f16(const void *src, float *dst, int64_t n);
void ref_dequant_bf16(const void *src, float *dst, int64_t n);
void ref_dequant_q4_0(const void *src, float *dst, int64_t n);
void ref_dequant_q4_1(const void *src, float *dst, int64_t n);
void ref_dequant_q5_0(const void *src, float *dst, int64_t n);
void ref_dequant_q5_1(const void *src, float *dst, int64_t n);
void ref_dequant_q8_0(const void *src, float *dst, int64_t n);
void ref_dequant_q2_K(const void *src, float *dst, int64_t n);
void ref_dequant_q3_K(const void *src, float *dst, int64_t n);
void ref_dequant_q4_K(const void *src, float *dst, int64_t n);
void ref_dequant_q5_K(const void *src, float *dst, int64_t n);
void ref_dequant_q6_K(const void *src, float *dst, int64_t n);
void ref_dequant_q8_K(const void *src, float *dst, int64_t n);
void ref_dequant_iq4_nl(const void *src, float *dst, int64_t n);
void ref_dequant_iq4_xs(const void *src, float *dst, int64_t n);
void ref_dequant_mxfp4(const void *src, float *dst, int64_t n);
void ref_dequant_tq1_0(const void *src, float *dst, int64_t n);
void ref_dequant_tq2_0(const void *src, float *dst, int64_t n);
void ref_dequant_iq2_xxs(const void *src, float *dst, int64_t n);
void ref_dequant_iq2_xs(const void *src, float *dst, int64_t n);
void ref_dequant_iq2_s(const void *src, float *dst, int64_t n);
void ref_dequant_iq3_xxs(const void *src, float *dst, int64_t n);
void ref_dequant_iq3_s(const void *src, float *dst, int64_t n);
void ref_dequant_iq1_s(const void *src, float *dst, int64_t n);
void ref_dequant_iq1_m(const void *src, float *dst, int64_t n);

void ref_quant_f32(const float *src, void *dst, int64_t n);
void ref_quant_f16(const float *src, void *dst, int64_t n);
void ref_quant_bf16(const float *src, void *dst, int64_t n);
void ref_quant_q4_0(const float *src, void *dst, int64_t n);
void ref_quant_q4_1(const float *src, void *dst, int64_t n);
void ref_quant_q5_0(const float *src, void *dst, int64_t n);
void ref_quant_q5_1(const float *src, void *dst, int64_t n);
void ref_quant_q8_0(const float *src, void *dst, int64_t n);
void ref_quant_q2_K(const float *src, void *dst, int64_t n);
void ref_quant_q3_K(const float *src, void *dst, int64_t n);
void ref_quant_q4_K(const float *src, void *dst, int64_t n);
void ref_quant_q5_K(const float *src, void *dst, int64_t n);
void ref_quant_q6_K(const float *src, void *dst, int64_t n);
void ref_quant_q8_K(const float *src, void *dst, int64_t n);
void ref_quant_iq4_nl(const float *src, void *dst, int64_t n);
void ref_quant_iq4_xs(const float *src, void *dst, int64_t n);
void ref_quant_mxfp4(const float *src, void *dst, int64_t n);
void ref_quant_tq1_0(const float *src, void *dst, int64_t n);
void ref_quant_tq2_0(const float *src, void *dst, int64_t n);
void ref_quant_iq2_xxs(const float *src, void *dst, int64_t n);
void ref_quant_iq2_xs(const float *src, void *dst, int64_t n);
void ref_quant_iq2_s(const float *src, void *dst, int64_t n);
void ref_quant_iq3_xxs(const float *src, void *dst, int64_t n);
void ref_quant_iq3_s(const float *src, void *dst, int64_t n);
void ref_quant_iq1_s(const float *src, void *dst, int64_t n);
void ref_quant_iq1_m(const float *src, void *dst, int64_t n);

#endif
