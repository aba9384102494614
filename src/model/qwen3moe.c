/*
 * qwen3moe.c - the qwen3moe architecture (general.architecture =
 * "qwen3moe"): Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B.
 *
 * A qwen3 decoder (qwen.c: NeoX RoPE, per-head RMS norms of q and k before
 * RoPE, head_dim from attention.key_length, no biases) whose every block's
 * feed-forward is a mixture of experts (moe.c): router softmax over
 * expert_count experts, the top expert_used_count of them, weights
 * renormalised to sum 1 (Hugging Face's norm_topk_prob, true for every
 * released Qwen3 MoE; expert_weights_norm in a file overrides it), experts
 * SwiGLU of width expert_feed_forward_length, no shared expert. The
 * decoder itself is moe_dec.c's.
 */
#include "model/moe.h"

static const model_moe_dec_spec QWEN3MOE = {
    .rope_style = OPS_ROPE_NEOX,
    .attn_flags = MODEL_ATTN_QK_NORM,
    .moe = {.gating = MODEL_MOE_SOFTMAX, .norm_w = true},
};

const model_arch_ops model_arch_qwen3moe = MODEL_MOE_DEC_ROW("qwen3moe", &QWEN3MOE);
