/*
 * testgen_arch.h - random-weight GGUF files of the qwen2, qwen3, bert,
 * gemma2, gemma3, phi3, granite and smollm3 architectures, for the tests
 * that compare src/model/qwen.c, bert.c, gemma.c and llamalike.c against
 * the numpy references (tools/ref_qwen.py, ref_bert.py, ref_gemma.py,
 * ref_llamalike.py). Tensor names
 * and keys are the ones llama.cpp's converter writes.
 *
 * Kept apart from testgen.c (the llama generator) so the two evolve
 * independently; the weight scaling follows the same rules (matrices
 * uniform in +-sqrt(3/n_cols), norm weights 1 +- 0.1, biases +-0.1,
 * embeddings of order one).
 */
#ifndef PARLEY_MODEL_TESTGEN_ARCH_H
#define PARLEY_MODEL_TESTGEN_ARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

typedef struct model_testgen_arch {
  enum model_arch arch;   /* MODEL_ARCH_QWEN2, QWEN3, BERT, GEMMA2, GEMMA3,
                             PHI3, GRANITE, SMOLLM3, OLMO2, GLM4, MISTRAL3,
                             QWEN3MOE, LLAMA_MOE (a "llama" file with
                             experts, Mixtral's layout), GPT_OSS (biases
                             everywhere, attention sinks, post_attention_norm,
                             expert biases), QWEN2MOE (qwen2's biases, a
                             gated shared expert), OLMOE (whole-row q/k
                             norms) or GRANITEMOE (granite's multipliers;
                             olmoe and granitemoe need n_ff == n_ff_exp) */
  int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
  int64_t head_dim;       /* 0 = n_embd / n_head; otherwise written as
                             attention.key_length / value_length */
  uint32_t type;          /* enum tensor_type of the layer matrices */
  uint32_t type_embd;     /* token_embd.weight (and bert's position and
                             token type embeddings) */
  uint32_t type_qkv;      /* phi3's fused attn_qkv; 0 (F32) = type */
  bool tied;              /* decoders: no output.weight */
  bool mixed;             /* attn_v and ffn_down take type_v / type_down
                             below instead of type: [1] in llama.cpp's
                             "more bits" layers (the first and last eighth
                             and every third between), [0] elsewhere */
  uint32_t type_v[2], type_down[2];
  float rope_freq_base;   /* 0 = leave the key out */
  float rope_scale_linear; /* > 0: rope.scaling.type "linear" with this
                             rope.scaling.factor; 0 = no scaling keys */
  float rope_yarn;        /* != 0 (tests: < 0 too): rope.scaling.type
                             "yarn" with this factor (n_ctx_orig,
                             rope_attn_factor and the yarn keys below go
                             with it where set) */
  float yarn_beta_fast, yarn_beta_slow, yarn_ext_factor; /* ARCH.rope.scaling.
                             yarn_*; written when != 0 */
  float yarn_log_mul;     /* ARCH.rope.scaling.yarn_log_multiplier;
                             written when != 0 */
  float attn_temp_scale;  /* mistral3: ARCH.attention.temperature_scale;
                             written when != 0 */
  int64_t sliding_window; /* gemma: ARCH.attention.sliding_window; < 0 =
                             leave the key out (0 is written, for tests) */
  int64_t swa_pattern;    /* > 0: ARCH.attention.sliding_window_pattern */
  const uint8_t *swa_layers; /* non-NULL: that key instead as n_layer (or
                             swa_layers_n, tests) bools, 1 = sliding, the
                             form the converter writes from layer_types */
  int64_t swa_layers_n;
  int64_t nextn;          /* > 0: ARCH.nextn_predict_layers (tests) */
  float attn_softcap;     /* gemma2: ARCH.attn_logit_softcapping; 0 = absent */
  float final_softcap;    /* gemma: ARCH.final_logit_softcapping; 0 = absent */
  float norm_eps;         /* 0 = 1e-6 (decoders), 1e-12 (bert) */
  int pooling_type;       /* written as ARCH.pooling_type; -1 = absent */
  int64_t n_rot;          /* > 0: ARCH.rope.dimension_count (partial
                             rotary); 0 = absent (head_dim) */
  bool separate_qkv;      /* phi3: attn_q/k/v instead of the fused attn_qkv
                             (ffn_up [gate | up] is always fused) */
  int rope_factors;       /* phi3 LongRoPE: 1 = rope_factors_short.weight
                             (1 +- 0.2) and rope_factors_long.weight (2..6);
                             2 = the long ones all negative, for tests;
                             0 = neither */
  int64_t n_ctx_orig;     /* phi3: ARCH.rope.scaling.original_context_length;
                             0 = absent */
  float rope_attn_factor; /* phi3: ARCH.rope.scaling.attn_factor; 0 = absent */
  float embd_scale, resid_scale, attn_scale, logit_scale; /* granite:
                             ARCH.embedding_scale, residual_scale,
                             attention.scale, logit_scale; 0 = absent */
  int rope_finetuned;     /* granite: ARCH.rope.scaling.finetuned (0 or 1);
                             -1 = absent */
  const char *bad_tensor; /* tests: this tensor gets one extra row (or
                             element, or expert), a wrong shape the loader must name */
  const char *missing_tensor; /* tests: this tensor is left out */
  /* mixture of experts (qwen3moe): the FFN of every block is n_expert
   * SwiGLU experts of width n_ff_exp stored as 3-D tensors, a router
   * ffn_gate_inp, optionally a shared expert; n_ff is still written as
   * feed_forward_length, as the converter does */
  int64_t n_expert, n_expert_used, n_ff_exp;
  int64_t n_ff_shexp;      /* > 0: ffn_{gate,up,down}_shexp and the
                              sigmoid gate ffn_gate_inp_shexp */
  bool fused_gate_up;      /* ffn_gate_up_exps instead of gate and up */
  bool sel_bias;           /* exp_probs_b.bias (selection bias) */
  int gating;              /* ARCH.expert_gating_func; 0 = key absent */
  int norm_w;              /* ARCH.expert_weights_norm 0/1; -1 = absent */
  float w_scale;           /* ARCH.expert_weights_scale; 0 = absent */
  int64_t expert_count_key; /* tests: > 0 is written as expert_count
                              instead of n_expert */
  uint64_t attn_layers;    /* lfm2: bit l set = layer l attends (its
                              head_count_kv entry is n_head_kv), clear = a
                              short convolution (entry 0) */
  int64_t d_conv;          /* lfm2: ARCH.shortconv.l_cache (taps); qwen35,
                              qwen35moe, qwen3next: ARCH.ssm.conv_kernel */
  /* qwen35, qwen35moe, qwen3next (testgen_qwen35.c): the gated delta-net
   * layers' ssm.state_size (key head width), group_count (key heads),
   * time_step_rank (value heads), inner_size (value heads x width);
   * full_attention_interval (0: key absent, read as 4; < 0: written as 0,
   * for tests); rope.dimension_sections (all 0: absent); positive_a: the
   * ssm_a decays drawn > 0 (tests) */
  struct {
    int64_t d_state, n_group, dt_rank, d_inner, interval;
    int32_t sections[4];
    bool positive_a;
  } gdn;
  bool fused_qkv;         /* glm4: one attn_qkv tensor (and bias) instead
                             of attn_q/k/v */
  /* gpt-oss: attention sinks uniform in sink_mid +- sink_spread (both 0:
   * +-1), and the experts' gate / up matrices scaled by gate_gain (0: 1;
   * larger pushes the clamped SwiGLU past its limit of 7) */
  float sink_mid, sink_spread, gate_gain;
  int64_t n_dense;         /* gemma-embedding: dense_2.weight [n_dense][n_embd]
                              and dense_3.weight [n_embd][n_dense] after
                              pooling; 0 = neither */
  int dense_keys;          /* gemma-embedding: 1 = write ARCH.dense_{2,3}_feat_
                              {in,out} with n_dense; 2 = dense_2_feat_out one
                              larger than the tensor (tests); 0 = no keys */
  uint32_t type_exps;      /* MoE: the expert matrices' type (gpt-oss ships
                              them MXFP4, the rest not); 0 (F32) = type */
  /* gemma4 (testgen_gemma4.c): the sliding layers' head width
   * (attention.key_length_swa; head_dim is the full layers'), the shared
   * KV layers at the end, the per-layer embedding width (0: none), the
   * shared layers' feed-forward width (> 0: feed_forward_length written
   * per layer, n_ff elsewhere), layer_output_scale tensors, and attn_v on
   * the full layers (false: their v is k's projection) */
  struct {
    int64_t head_dim_swa, n_shared, n_pl, n_ff_shared;
    bool out_scale, v_full;
  } g4;
  uint64_t seed;
  const char *vocab_path; /* NULL, or a GGUF whose tokenizer.* keys are
                             copied (n_vocab then becomes its token count) */
  const char *chat_template; /* NULL, or tokenizer.chat_template's text
                             (replacing the copied vocabulary's) */
} model_testgen_arch;

/* Small test shapes: n_embd 64, 2 layers, 4 heads, vocab 300, context 128,
 * all F32. qwen2: 2 KV heads, n_ff 160, untied. qwen3: 2 KV heads,
 * head_dim 32 (n_head*head_dim = 128 != n_embd), n_ff 160, tied. bert: 4 KV
 * heads, n_ff 128, mean pooling. gemma2: 2 KV heads, head_dim 16, n_ff 160,
 * tied, sliding window 8 (layer 0 slides, layer 1 is global), soft caps 5
 * (attention) and 8 (logits), small enough to bend the scores. gemma3:
 * 6 layers (five sliding, one global), 2 KV heads, head_dim 32, n_ff 160,
 * tied, window 8, rope base 1e6 (the sliding layers' 10000 is the
 * default). phi3: 2 KV heads, head_dim 16 with 12 rotated (partial, like
 * Phi-4-mini), fused attn_qkv and ffn_up, window 8, LongRoPE factors with
 * original context 32 and attn_factor 1.2. granite: 2 KV heads, tied,
 * multipliers embedding 12, residual 0.22, attention 0.15, logits / 8.
 * smollm3: 4 layers (layer 3 without RoPE), 2 KV heads, tied. lfm2: 4
 * layers (2 attends, 0, 1 and 3 are short convolutions of 3 taps), 2 KV
 * heads, tied. olmo2: 2 KV heads,
 * n_ff 160, untied. glm4: 2 KV heads, n_ff 160, untied, separate q/k/v
 * with biases, rotary on 8 of head_dim 16.
 * nomic-bert: 4 KV heads, n_ff 128, mean pooling, rope base 1000.
 * mistral3: 2 KV heads, untied, rope base 1000 with YaRN x4 over an
 * original 16 positions (betas 4 and 0.5, yarn_log_multiplier 1),
 * attention temperature 0.1. qwen3moe: head_dim 32, 4 experts of width 32,
 * top-2. gpt-oss: head_dim 32, YaRN x8 over an original 16 positions, window 8 (layer 0 slides, layer 1 is
 * global), 4 experts of width 32, top-2, sinks +-1. qwen2moe, olmoe,
 * granitemoe: 2 KV heads, 4 experts of width 32, top-2 (granitemoe tied,
 * the others untied); qwen2moe with a shared expert of width 48; olmoe and
 * granitemoe with n_ff 32; granitemoe with granite's multipliers.
 * gemma-embedding: gemma3's shape and window 8 (symmetric: 4 positions
 * on each side), mean pooling, dense projections through 96 features with
 * their keys.
 * gemma4: 6 layers (sliding, sliding, full, repeated), 4 heads on 2 KV
 * heads of 32 (full) and 16 (sliding), window 8, rope bases 1e6 / 10000
 * with proportional factors on the full layers, the last 3 layers sharing
 * the KV of layers 1 and 2 with n_ff 320 (160 elsewhere), per-layer
 * embeddings of 16, layer output scales, no attn_v on the full layers,
 * final soft cap 8, tied. */
model_testgen_arch model_testgen_arch_small(enum model_arch arch);

/* Qwen2.5-0.5B's shape (qwen2: n_embd 896, 24 layers, 14 heads, 2 KV
 * heads, head_dim 64, n_ff 4864, vocab 151936, tied embeddings, q/k/v
 * biases, rope base 1e6, RMS eps 1e-6; context written as 4096 of the
 * real 32768, enough to bench) in type t. k_m: the mix llama.cpp's Q4_K_M
 * gives this model, where 896-column rows cannot hold 256-blocks and fall
 * back (Q4_K -> Q5_0, Q6_K -> Q8_0): Q5_0 q/k/o/gate/up, attn_v Q8_0 in the
 * 12 "more bits" layers and Q5_0 in the others, ffn_down (4864 columns)
 * Q6_K / Q4_K likewise, token_embd Q8_0. */
model_testgen_arch model_testgen_arch_qwen25_05b(uint32_t t, bool k_m);
/* LFM2-1.2B's shape (16 layers of 2048, attention at 2, 5, 8, 10, 12, 14,
 * 32 heads on 8 KV heads, n_ff 8192, 3 taps, 65536 tokens unless a
 * vocabulary is copied), random weights of type t or llama.cpp's Q4_K_M
 * mix (k_m). */
model_testgen_arch model_testgen_arch_lfm2_12b(uint32_t t, bool k_m);
/* Qwen3.5-4B's shape (qwen35: n_embd 2560, 32 layers, every fourth
 * attending with 16 query and 4 KV heads of 256, 64 of them rotated in
 * M-RoPE sections 11/11/10/0, rope base 1e7; 24 delta-net layers of 16 key
 * and 32 value heads of 128, 4 taps; n_ff 9216, vocab 248320 unless a
 * vocabulary is copied, tied embeddings, context written as 4096), random
 * weights of type t, or with k_m Q4_K matrices and a Q6_K embedding
 * (testgen_qwen35.c). */
model_testgen_arch model_testgen_arch_qwen35_4b(uint32_t t, bool k_m);

/* Released mixture-of-experts shapes for the benchmarks, with n_layer of
 * their layers (0: all; fewer keep each layer's real shape where the whole
 * file would not fit the machine), context written as 4096:
 *   "gpt-oss-20b": n_embd 2880, 24 layers, 64 query heads and 8 KV heads of
 *     64, 32 experts of width 2880, top-4, window 128, vocab 201088, rope
 *     base 150000 with YaRN x32 over 4096, untied; experts MXFP4 as
 *     released, every other matrix and the embeddings Q8_0;
 *   "qwen3-30b-a3b": qwen3moe, n_embd 2048, 48 layers, 32 query heads and 4
 *     KV heads of 128, 128 experts of width 768, top-8, vocab 151936, rope
 *     base 1e6, untied; a Q4_K_M-like mix: Q4_K, attn_v and ffn_down(_exps)
 *     Q6_K in llama.cpp's "more bits" layers.
 * ERR_NOT_FOUND naming the shape for any other name. */
int model_testgen_arch_moe_shape(const char *name, int64_t n_layer, model_testgen_arch *out);

/* Released dense shapes for the benchmarks (issue #26), all layers,
 * random weights; type is a tensor type name (every matrix and the
 * embedding in it) or "Q4_K_M" (llama.cpp's mix for that model):
 *   "gemma-3-1b": gemma3, n_embd 1152, 26 layers, 4 query heads on 1 KV
 *     head of 256, n_ff 6912, vocab 262144 tied (the 262k-row output
 *     head), window 512 on five of six layers, rope base 1e6 (10000 on
 *     the sliding layers), context 32768; Q4_K_M: 1152-column rows cannot
 *     hold 256-blocks, so it is model_testgen_arch_qwen_k_m's fallback mix;
 *   "phi-4-mini": phi3, n_embd 3072, 32 layers, 24 query heads on 8 KV
 *     heads of 128, 96 of them rotated, n_ff 8192, vocab 200064 tied,
 *     LongRoPE factors over an original 4096 of 131072 (attn_factor
 *     1.19), the file's window 262144 (past the context: never slides);
 *     Q4_K_M: Q4_K, fused attn_qkv Q5_K, ffn_down Q6_K in the "more bits"
 *     layers, token_embd Q6_K (the tied output's type).
 * ERR_NOT_FOUND for any other name, ERR_RANGE for an unknown type. */
int model_testgen_arch_dense_shape(const char *name, const char *type, model_testgen_arch *out);

/* The tensor types of that Q4_K_M mix on any shape: type Q5_0, type_embd
 * Q8_0, mixed, type_v {Q5_0, Q8_0}, type_down {Q4_K, Q6_K}. ffn_down rows
 * (n_ff columns) must hold whole 256-blocks. */
void model_testgen_arch_qwen_k_m(model_testgen_arch *g);

/* Whether the writer gives arch's blocks experts (qwen3moe, llama with
 * experts, gpt-oss, qwen2moe, olmoe, granitemoe). */
bool testgen_moe_arch(enum model_arch a);

/* Writes the file (path.tmp, then renamed). */
int model_testgen_arch_write(const model_testgen_arch *g, const char *path);

#endif
