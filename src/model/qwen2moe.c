/*
 * qwen2moe.c - the qwen2moe architecture (general.architecture =
 * "qwen2moe"): Qwen1.5-MoE-A2.7B and Qwen2-57B-A14B.
 *
 * A qwen2 decoder (qwen.c: NeoX RoPE, biases on the q, k and v
 * projections, no q/k norms) whose every block's feed-forward is a mixture
 * of experts (moe.c) plus one shared expert:
 *   out = h + sum_j w_j expert_{sel_j}(rms(h)) + sigmoid(g . rms(h)) shared(rms(h))
 * Router softmax over expert_count experts, the top expert_used_count of
 * them, weights not renormalised (Hugging Face's norm_topk_prob is false
 * for both released models, and llama.cpp ignores it; a file's
 * expert_weights_norm overrides), experts SwiGLU of width
 * expert_feed_forward_length; the shared expert is SwiGLU of width
 * expert_shared_feed_forward_length (default feed_forward_length, as
 * llama.cpp reads it) and its gate blk.N.ffn_gate_inp_shexp.weight
 * [n_embd] is required. The decoder itself is moe_dec.c's.
 */
#include "model/moe.h"

static const model_moe_dec_spec QWEN2MOE = {
    .rope_style = OPS_ROPE_NEOX,
    .attn_flags = MODEL_ATTN_BIAS,
    .moe = {.gating = MODEL_MOE_SOFTMAX, .norm_w = false, .shexp = true},
};

const model_arch_ops model_arch_qwen2moe = MODEL_MOE_DEC_ROW("qwen2moe", &QWEN2MOE);
