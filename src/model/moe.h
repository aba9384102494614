/*
 * moe.h - the mixture-of-experts feed-forward every MoE architecture
 * (qwen3moe.c, llama_moe.c, qwen2moe.c, olmoe.c, granitemoe.c, gptoss.c) shares: its hyper-parameters, the expert
 * tensors (3-D: one matrix per expert), routing, the grouped expert
 * products, and the decoder built on them (moe_dec.c). See moe.c for the design and docs/runtime.md ("Mixture of
 * experts") for a token traced through it. Not for use outside src/model/.
 */
#ifndef PARLEY_MODEL_MOE_H
#define PARLEY_MODEL_MOE_H

#include "model/model_int.h"

/* How router logits become expert weights; the numbers are the values of
 * ARCH.expert_gating_func as llama.cpp's converter writes them. */
enum model_moe_gating {
  MODEL_MOE_SOFTMAX = 1,        /* p = softmax(logits) over all experts, top-k of p */
  MODEL_MOE_SIGMOID = 2,        /* p = sigmoid(logits), top-k of p (+ selection bias) */
  MODEL_MOE_SOFTMAX_WEIGHT = 3  /* top-k of the logits, weights = softmax of those k */
};

/* The experts' gated activation, act(gate, up) per element. */
enum model_moe_act {
  MODEL_MOE_ACT_SILU = 0,  /* silu(g) * u (SwiGLU: every family but gpt-oss) */
  MODEL_MOE_ACT_SWIGLU_OAI /* gpt-oss's clamped form: x = min(g, 7),
                              y = clamp(u, -7, 7), x sigmoid(1.702 x) (y + 1)
                              (model_moe_swiglu_oai) */
};

/* gpt-oss's constants: no key carries them (llama.cpp and the checkpoint's
 * modelling code both hard-code them). */
#define MODEL_MOE_OAI_ALPHA 1.702f
#define MODEL_MOE_OAI_LIMIT 7.0f

/* Most experts a layer may have, and most a token may use (ggml's limits
 * are 512 / 1024 for the largest files; real models use <= 384 and <= 16). */
#define MODEL_MOE_MAX_EXPERT 1024
#define MODEL_MOE_MAX_USED 64

typedef struct model_moe_hparams {
  int64_t n_expert;    /* ARCH.expert_count (>= 1) */
  int64_t n_used;      /* ARCH.expert_used_count: k, 1..n_expert */
  int64_t n_ff_exp;    /* ARCH.expert_feed_forward_length (default n_ff):
                          rows of one expert's gate / up */
  int64_t n_ff_shexp;  /* ARCH.expert_shared_feed_forward_length: the shared
                          expert's width, 0 when the layers have none */
  enum model_moe_gating gating; /* ARCH.expert_gating_func (default: the
                                   architecture's) */
  bool norm_w;         /* ARCH.expert_weights_norm: divide the k weights by
                          their sum (Hugging Face's norm_topk_prob) */
  float w_scale;       /* ARCH.expert_weights_scale: multiplies the k
                          weights after normalising (1 = none; 0 in a file
                          means none, as llama.cpp reads it) */
  enum model_moe_act act; /* the architecture's (no key) */
  bool biases;         /* the router and every expert matrix carry a bias
                          (gpt-oss; the architecture's, no key) */
  bool shexp_gate;     /* the shared expert's sigmoid gate
                          ffn_gate_inp_shexp is required (qwen2moe; the
                          architecture's, no key) */
} model_moe_hparams;

/* What an architecture assumes when its files omit a key, and what it
 * fixes (act, biases). */
typedef struct model_moe_defaults {
  enum model_moe_gating gating;
  bool norm_w;
  enum model_moe_act act;
  bool biases;
  bool shexp;  /* every layer has a gated shared expert (qwen2moe): its
                  width expert_shared_feed_forward_length defaults to
                  feed_forward_length, as llama.cpp reads it, and
                  ffn_gate_inp_shexp is required (hparams.shexp_gate) */
} model_moe_defaults;

/* Reads the keys above (ARCH = the architecture's name) and checks them:
 * ERR_NOT_FOUND for a missing expert_count / expert_used_count, ERR_RANGE
 * naming the key for a count out of range ("key 'qwen3moe.expert_used_count'
 * is 9, more than the 8 experts (expert_count)"), ERR_UNSUPPORTED for an
 * unknown gating function. */
int model_moe_load_hparams(model *m, const model_moe_defaults *d, model_moe_hparams *out);

/* One 3-D tensor of a layer's experts, GGUF dims [n_cols, n_rows,
 * n_expert]: expert e's matrix (n_rows rows of n_cols elements, rows
 * contiguous) starts at data + e * expert_bytes. Left in the file mapping
 * (never copied or repacked): a token reads only its k experts' rows, so
 * what is resident grows with the experts actually used. */
typedef struct model_experts {
  const char *name;     /* owned by the gguf_file */
  uint32_t type;        /* enum tensor_type */
  int64_t n_cols, n_rows;
  const uint8_t *data;
  size_t row_bytes;
  size_t expert_bytes;  /* stride between experts (a fused gate_up tensor:
                           2 * n_rows rows) */
} model_experts;

/* A layer's MoE feed-forward. */
typedef struct model_moe_layer {
  model_tensor router;       /* ffn_gate_inp: [n_expert rows][n_embd] */
  const float *sel_bias;     /* exp_probs_b.bias [n_expert]: added to p for
                                the selection only, or NULL */
  model_experts gate, up;    /* [n_expert][n_ff_exp][n_embd]: ffn_gate_exps,
                                ffn_up_exps, or the halves (gate rows first)
                                of a fused ffn_gate_up_exps [2 n_ff_exp] */
  model_experts down;        /* ffn_down_exps [n_expert][n_embd][n_ff_exp] */
  /* with hparams.biases (else NULL): f32 copies */
  const float *router_b;     /* ffn_gate_inp.bias [n_expert]: added to the
                                logits before routing */
  const float *b_gate, *b_up; /* ffn_{gate,up}_exps.bias [n_expert][n_ff_exp] */
  const float *b_down;       /* ffn_down_exps.bias [n_expert][n_embd] */
  /* the shared expert (Qwen2-MoE style), every token, when n_ff_shexp > 0 */
  model_tensor sh_gate, sh_up; /* ffn_{gate,up}_shexp [n_ff_shexp][n_embd] */
  model_tensor sh_down;        /* ffn_down_shexp [n_embd][n_ff_shexp] */
  const float *sh_router;      /* ffn_gate_inp_shexp [n_embd]: the shared
                                  output is scaled by sigmoid(sh_router . x),
                                  or NULL (scale 1; never with shexp_gate) */
} model_moe_layer;

/* Binds layer i's router, experts (separate gate/up, or the fused
 * gate_up), optional selection bias and shared expert, checking every
 * shape against p and n_embd ("tensor 'blk.1.ffn_up_exps.weight' has shape
 * [64, 32, 3], expected [64, 32, 4]"); ERR_NOT_FOUND names a missing one. */
int model_moe_bind_layer(model *m, const model_moe_hparams *p, model_moe_layer *L, int i);

/* Routing of one token: from logits [n_expert] (and sel_bias, or NULL)
 * picks the k = n_used experts into sel[k] (highest score first; ties go to
 * the lower expert number; NaN scores lose) and their weights into w[k]
 * (gating, then norm_w, then w_scale). */
void model_moe_route(const model_moe_hparams *p, const float *logits, const float *sel_bias, int32_t *sel,
                     float *w);

/* gpt-oss's activation in place on g over n values (MODEL_MOE_ACT_SWIGLU_OAI):
 * g = min(g, 7) * sigmoid(1.702 min(g, 7)) * (clamp(u, -7, 7) + 1). */
void model_moe_swiglu_oai(float *g, const float *u, int64_t n);

/* Per-context buffers of model_moe_ffn, for sub-batches of model_ffn_rows
 * tokens (shapes in moe.c). */
typedef struct model_moe_bufs {
  float *logits;    /* [rows][n_expert] router logits */
  int32_t *sel;     /* [rows][k] */
  float *w;         /* [rows][k] */
  int32_t *count;   /* [n_expert + 1] tokens per expert, then offsets */
  int32_t *tok;     /* [rows * k + rows] token of each grouped row */
  float *tw;        /* [rows * k + rows] its weight */
  float *xg;        /* [rows * k][n_embd] gathered inputs, grouped by expert */
  float *act;       /* [rows * k + rows][max(n_ff_exp, n_ff_shexp)] */
  float *scratch;   /* per thread: see moe.c */
  size_t scratch_floats; /* per thread */
  void *groups;     /* [n_expert + 1] struct moe_group */
  size_t xg_bytes, act_bytes;
  size_t bytes;     /* all of the above */
} model_moe_bufs;

int model_moe_bufs_init(model_ctx *c, const model_moe_hparams *p, model_moe_bufs *b);
void model_moe_bufs_free(model_moe_bufs *b);
/* Returns the buffers' pages (after a long prompt, as model_dense_bufs_trim). */
void model_moe_bufs_trim(model_moe_bufs *b);

/* The MoE feed-forward of n tokens: xn rows (the normalized input,
 * [n][n_embd]) are replaced by sum_j w_j expert_{sel_j}(xn) (+ the shared
 * expert), in sub-batches of model_ffn_rows tokens. */
int model_moe_ffn(model_ctx *c, const model_moe_hparams *p, const model_moe_layer *L, model_moe_bufs *b, float *xn,
                  int64_t n);

/* ---- the shared MoE decoder (moe_dec.c) ------------------------------------ */

/* What an architecture file on moe_dec.c sets (model_arch_ops.spec). */
typedef struct model_moe_dec_spec {
  enum ops_rope_style rope_style;
  int attn_flags;            /* enum model_attn_flags */
  int32_t swa_pattern;       /* > 0: sliding-window layers by
                                model_load_swa_hparams with this default
                                pattern, ARCH.attention.sliding_window
                                required; 0: every layer global */
  bool granite_scales;       /* granite's multipliers (model_load_granite_scales):
                                embedding, residual, attention and logit */
  model_moe_defaults moe;
} model_moe_dec_spec;

/* An architecture row on moe_dec.c: name (general.architecture) and its
 * model_moe_dec_spec. */
#define MODEL_MOE_DEC_ROW(nm, sp)                                                                               \
  {                                                                                                             \
    .name = nm, .load = model_moe_dec_load, .unload = model_moe_dec_unload, .ctx_init = model_moe_dec_ctx_init, \
    .ctx_free = model_moe_dec_ctx_free, .forward = model_moe_dec_forward, .trim = model_moe_dec_trim,          \
    .moe = true, .spec = (sp),                                                                                  \
  }

/* The model_arch_ops functions of such a row. */
int model_moe_dec_load(model *m);
void model_moe_dec_unload(model *m);
int model_moe_dec_ctx_init(model_ctx *c);
void model_moe_dec_ctx_free(model_ctx *c);
void model_moe_dec_trim(model_ctx *c);
int model_moe_dec_forward(model_ctx *c, const model_step *st, float *logits);

#endif
