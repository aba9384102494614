/*
 * olmoe.c - the olmoe architecture (general.architecture = "olmoe"): AI2's
 * OLMoE-1B-7B (16 layers, 64 experts, top-8) and its instruct tunes.
 *
 * A pre-norm decoder (attn_norm, ffn_norm) with NeoX RoPE whose q and k are
 * RMS-normalized over their whole projected width (all heads at once, the
 * way olmo2 does it: model_qk_norm, blk.N.attn_q_norm.weight
 * [n_head*head_dim], attn_k_norm [n_head_kv*head_dim]) before RoPE, and a
 * mixture of experts in every block (moe.c): router softmax over all
 * experts, the top expert_used_count, their probabilities used as they
 * are (no renormalisation: OLMoE's norm_topk_prob is false, and
 * llama.cpp's graph passes false), experts of width feed_forward_length.
 * output.weight is always present (OLMoE does not tie). The decoder
 * itself is moe_dec.c's.
 */
#include "model/moe.h"

static const model_moe_dec_spec OLMOE = {
    .rope_style = OPS_ROPE_NEOX,
    .attn_flags = MODEL_ATTN_QK_NORM_WHOLE,
    .moe = {.gating = MODEL_MOE_SOFTMAX, .norm_w = false},
};

const model_arch_ops model_arch_olmoe = MODEL_MOE_DEC_ROW("olmoe", &OLMOE);
