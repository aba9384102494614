/*
 * granitemoe.c - the granitemoe architecture (general.architecture =
 * "granitemoe"): IBM Granite 3.0 / 3.1 MoE (1B-A400M, 3B-A800M) and the
 * Granite MoE files with a shared expert.
 *
 * granite's block (llamalike.c: normal RoPE, no biases, RoPE off when
 * rope.scaling.finetuned is false) with its four multipliers, shared with
 * granite through model_load_granite_scales: the embedding times
 * ARCH.embedding_scale, each sub-layer's output times ARCH.residual_scale
 * before its residual add, scores times ARCH.attention.scale, logits
 * divided by ARCH.logit_scale; the feed-forward is a mixture of experts
 * (moe.c): router softmax, top expert_used_count, weights renormalised to
 * sum 1 (llama.cpp's granite graph passes true), experts of width
 * feed_forward_length; with expert_shared_feed_forward_length > 0 a shared
 * expert (ffn_{gate,up,down}_shexp, no gate of its own) is added. The
 * decoder itself is moe_dec.c's.
 */
#include "model/moe.h"

static const model_moe_dec_spec GRANITEMOE = {
    .rope_style = OPS_ROPE_NORMAL,
    .granite_scales = true,
    .moe = {.gating = MODEL_MOE_SOFTMAX, .norm_w = true},
};

const model_arch_ops model_arch_granitemoe = MODEL_MOE_DEC_ROW("granitemoe", &GRANITEMOE);
