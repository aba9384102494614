/*
 * gptoss.c - the gpt-oss architecture (general.architecture = "gpt-oss"):
 * OpenAI gpt-oss-20b (24 layers, 32 experts) and gpt-oss-120b (36 layers,
 * 128 experts), both top-4, n_embd 2880, 64 query heads and 8 KV heads of
 * 64 dimensions (so n_head * head_dim = 4096 != n_embd).
 *
 * moe_dec.c's decoder with every option gpt-oss adds switched on:
 *   - attention: q/k/v biases and an output bias, NeoX RoPE, scores
 *     scaled by 1/sqrt(head_dim), and attention sinks: blk.N.attn_sinks
 *     [n_head], a learned logit per head in every softmax denominator
 *     (model_attention_sinks);
 *   - layers alternate a sliding window of ARCH.attention.sliding_window
 *     (128 in the released files; required) with full attention, the
 *     even layers sliding (pattern 2, as gemma2; llama.cpp's reading);
 *   - the feed-forward's input norm is blk.N.post_attention_norm (the
 *     converter's name for it here);
 *   - experts: router with a bias, top-k of the logits then the softmax of
 *     those k (gating 3), no renormalisation, gate / up / down each with a
 *     bias per expert, and the clamped SwiGLU (moe.h,
 *     MODEL_MOE_ACT_SWIGLU_OAI: alpha 1.702, limit 7, the (up + 1) term);
 *     released files store the expert matrices as MXFP4.
 * RoPE: every released file declares YaRN (factor 32 over an original
 * 4096 positions, betas 32 and 1); the shared loader (model.c,
 * load_rope_scaling) reads it, with llama.cpp's rounded ramp bounds, and
 * the sliding layers rotate the same way as the global ones.
 */
#include "model/moe.h"

static const model_moe_dec_spec GPT_OSS = {
    .rope_style = OPS_ROPE_NEOX,
    .attn_flags = MODEL_ATTN_BIAS | MODEL_ATTN_OUT_BIAS | MODEL_ATTN_SINKS | MODEL_ATTN_POST_NORM,
    .swa_pattern = 2,
    .moe = {.gating = MODEL_MOE_SOFTMAX_WEIGHT, .norm_w = false, .act = MODEL_MOE_ACT_SWIGLU_OAI, .biases = true},
};

const model_arch_ops model_arch_gpt_oss = MODEL_MOE_DEC_ROW("gpt-oss", &GPT_OSS);
