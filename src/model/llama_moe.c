/*
 * llama_moe.c - llama files with experts (general.architecture = "llama"
 * and llama.expert_count > 0): Mixtral 8x7B / 8x22B and other files
 * converted to that layout.
 *
 * llama.c's block (normal RoPE: adjacent pairs, rope_freqs when present,
 * no biases, no q/k norms) with a mixture of experts as the feed-forward
 * (moe.c): router softmax over the experts, the top expert_used_count,
 * their weights renormalised to sum 1 (Mixtral's softmax over the chosen
 * logits is the same thing), experts of width feed_forward_length (the
 * converter writes no expert_feed_forward_length for these files). Only
 * the 3-D expert layout (ffn_{gate,up,down}_exps) is read; the older
 * files with one 2-D tensor per expert (blk.N.ffn_gate.E.weight) are
 * refused with the missing tensor's name. model.c sends a "llama" file
 * here when it declares experts. The decoder itself is moe_dec.c's.
 */
#include "model/moe.h"

static const model_moe_dec_spec LLAMA_MOE = {
    .rope_style = OPS_ROPE_NORMAL,
    .attn_flags = 0,
    .moe = {.gating = MODEL_MOE_SOFTMAX, .norm_w = true},
};

const model_arch_ops model_arch_llama_moe = MODEL_MOE_DEC_ROW("llama", &LLAMA_MOE);
