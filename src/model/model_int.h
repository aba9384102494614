/*
 * model_int.h - what architecture files (llama.c, later qwen2.c, qwen3.c,
 * bert.c) share with model.c: the model and context structs, tensor binding
 * with shape checks, hyper-parameter getters, the KV cache and attention
 * (attention in attn.c).
 * Not for use outside src/model/.
 */
#ifndef PARLEY_MODEL_INT_H
#define PARLEY_MODEL_INT_H

#include <stdatomic.h>

#include "model/model.h"

/* Positions per key/value tile and tokens per task in model_attention(). */
#define ATT_TILE_POS 128
#define ATT_TILE_TOK 16

/* A weight matrix bound from the file: n_rows rows of n_cols elements of
 * `type`, rows contiguous in the mapping (GGUF dims = [n_cols, n_rows]). */
typedef struct model_tensor {
  const char *name;  /* owned by the gguf_file */
  uint32_t type;     /* enum tensor_type */
  int64_t n_cols;    /* dims[0] */
  int64_t n_rows;    /* dims[1] (1 for a vector) */
  const void *data;  /* in the mapping, or the model's copy (bind_copy) */
  size_t row_bytes;
  kern_packed *packed; /* the rows repacked for this CPU (owned by the model),
                          or NULL: kern_matmul_packed instead of kern_matmul */
} model_tensor;

struct model {
  gguf_file *f;
  enum model_arch arch;
  const model_arch_ops *ops;
  model_hparams hp;
  uint64_t weight_bytes;   /* sum of bound tensors' bytes */
  void **owned;            /* buffers the model allocated (vectors copied
                              or dequantized to f32, repacked matrices),
                              freed with the model */
  size_t n_owned, cap_owned;
  struct model_span { const void *p; size_t n; } *copied; /* ranges of the
                              mapping the model holds a copy of: released
                              once more at the end of load (see
                              release_copied in model.c) */
  size_t n_copied, cap_copied;
  void *arch_data;         /* the architecture's tensors (llama.c) */
  /* Layer kinds (model_set_recurrent), NULL when every layer attends:
   * layer l's KV block index among the attention layers, or -1, and its
   * state index among the recurrent layers, or -1. [n_layer] each. */
  int32_t *layer_kv, *layer_rs;
};

/* A run of consecutive tokens of one sequence inside a step, at most
 * ATT_TILE_TOK long: the unit of attention work (times kv heads). */
typedef struct model_att_run {
  int64_t t0, t1;  /* token indices in the step */
  int32_t seq;
  int64_t pos0;    /* position of token t0; token t is at pos0 + t - t0 */
} model_att_run;

struct model_ctx {
  model *m;
  int64_t n_ctx;           /* positions per sequence */
  int64_t n_ctx_pad;       /* n_ctx rounded up to ATT_TILE_POS */
  int64_t n_batch;         /* most tokens per forward step */
  int32_t n_seq;
  int64_t *n_past;         /* [n_seq] positions filled per sequence */
  int64_t *seq_next;       /* [n_seq] scratch of model_decode */
  int64_t *seq_last;       /* [n_seq] scratch of model_decode */
  int32_t *step_seq;       /* [n_batch] */
  int64_t *step_pos;       /* [n_batch] */
  int64_t *step_out;       /* [n_batch] */
  model_att_run *runs;     /* [n_batch] */
  enum model_kv_type kv_type;
  size_t kv_elem;          /* 2 (F16) or 4 (F32); 0 for Q8_0 (blocks) */
  size_t kv_row;           /* bytes of one head row (head_dim values) */
  thread_pool *tp;
  bool own_tp;
  int n_threads;
  /* KV cache, one block per sequence, layer and kind, elements of kv_type:
   *   k : [n_head_kv][n_ctx_pad][head_dim]: one kv head's keys for
   *       positions 0..p are contiguous rows
   *   v : [n_head_kv][n_ctx_pad / ATT_TILE_POS][head_dim][ATT_TILE_POS]:
   *       each tile of positions transposed, so that P V is a matmul
   *   Q8_0: k and v both [n_head_kv][n_ctx_pad] rows of head_dim / 32
   *       blocks (a row is quantized once, when its token is stored); the
   *       attention dequantizes a value tile into its scratch, transposed
   * block (s, l, kind) starts at kv + ((s * n_layer + l) * 2 + kind) * kv_layer_bytes */
  uint8_t *kv;
  size_t kv_layer_bytes;   /* bytes of one k (or v) block */
  /* Recurrent state, f32, zeroed: [n_seq][n_layer_rs][rs_floats]; holds
   * exactly what the sequence's n_past tokens left (zero when n_past is
   * 0). NULL without recurrent layers. */
  float *rs;
  float *rope_cs;          /* [n_batch][n_rot] cos/sin of the step's positions */
  float *att_scratch;      /* per thread: see model_attention() */
  size_t att_scratch_floats;
  size_t buf_bytes;        /* compute buffers, for model_ctx_buf_bytes */
  model_prof *prof;        /* model_ctx_set_prof, or NULL */
  void *arch_data;         /* the architecture's buffers */
};

/* ---- binding (model.c) --------------------------------------------------- */

enum model_bind_flags {
  MODEL_BIND_OPTIONAL = 1, /* absent: 0 with t->data NULL */
  MODEL_BIND_ROWS = 2      /* read by rows (embeddings), not multiplied:
                              never repacked nor copied. A tied token_embd
                              (also the output matrix) is bound without it,
                              so the output product runs on the copy */
};

/* Binds the tensor named by fmt... as a matrix of n_rows x n_cols (n_rows 0:
 * a 1-D tensor of n_cols), checking its shape and that kern_matmul supports
 * its type. Adds its bytes to m->weight_bytes. A matrix without
 * MODEL_BIND_ROWS whose type has a packed layout on this CPU (kern_pack) is
 * repacked into t->packed, and when the file is mapped the mapping's pages
 * of the original are released (madvise DONTNEED: they were only read, so
 * resident memory holds one copy; t->data stays valid, re-read on use). */
int model_bind_matrix(model *m, model_tensor *t, int64_t n_cols, int64_t n_rows, int flags,
                      const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* A fused matrix (phi3's attn_qkv [q | k | v rows], ffn_up [gate | up
 * rows]) bound as n_parts consecutive row ranges of part_rows[i] rows
 * each, every part its own matrix (repacked or copied as
 * model_bind_matrix does), so products read them like separate tensors.
 * The shape check and its error are the whole tensor's ([n_cols, sum of
 * part_rows]). Only MODEL_BIND_OPTIONAL is honoured in flags: absent, every
 * part's data is NULL. */
int model_bind_matrix_parts(model *m, model_tensor *parts, int n_parts, const int64_t *part_rows, int64_t n_cols,
                            int flags, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* madvise(DONTNEED) on the whole pages inside p..p + bytes (a read-only
 * mapping's pages are re-read from the file on use, anonymous memory's
 * come back zeroed). Advisory: errors ignored. */
void model_release_pages(const void *p, size_t bytes);
/* Binds a 1-D tensor of n elements as f32: in place when it is F32 (and
 * aligned), dequantized into a buffer the model owns otherwise. *out NULL
 * when optional and absent. */
int model_bind_vector(model *m, const float **out, int64_t n, int flags, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* A 2-D tensor [n, n_rows] (GGUF dims) as n_rows f32 vectors of n, one
 * copy the model owns (MoE expert biases: one row per expert). */
int model_bind_vectors(model *m, const float **out, int64_t n, int64_t n_rows, int flags, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* "ARCH.suffix" getters with defaults (required when def is NULL). Each
 * checks the range [lo, hi] and names the key in the error. */
int model_key_i64(model *m, const char *suffix, const int64_t *def, int64_t lo, int64_t hi, int64_t *out);
int model_key_f32(model *m, const char *suffix, const float *def, float *out);
/* Reads the hyper-parameters every decoder architecture names the same
 * way (see model_hparams) and checks them against each other. */
int model_load_common_hparams(model *m, enum ops_rope_style style);
/* YaRN's magnitude from ARCH.rope.scaling.yarn_log_multiplier (after
 * model_load_common_hparams; for the rows whose converter writes it):
 * L = the key times unit (the converters store mscale_all_dim: unit 1 for
 * mistral3), and when L != 0 and the file is YaRN with a ramp,
 * hp.rope.attn_factor = rope.scaling.attn_factor * g(factor, 1) / g(factor,
 * L), g(s, k) = 1 + 0.1 k ln s for s > 1, else 1 (llama-context.cpp's
 * get_mscale ratio; L = 1 makes it 1). Absent or 0: unchanged. */
int model_rope_yarn_log_mul(model *m, float unit);
/* After those: the sliding-window keys (see model_hparams). The window is
 * ARCH.attention.sliding_window (def_window when absent; NULL: required),
 * 1..context_length; the layer pattern ARCH.attention.sliding_window_pattern
 * or `pattern`; the sliding layers' RoPE base ARCH.rope.freq_base_swa or
 * def_base_swa (with no scaling; 0: the global layers' RoPE as it is). */
int model_load_swa_hparams(model *m, int32_t pattern, const int64_t *def_window, float def_base_swa);
/* A soft-capping key ARCH.suffix (def when absent, NULL: required) into
 * *out: finite, positive (or 0 = none when zero_ok), at most 1e6. */
int model_load_softcap(model *m, const char *suffix, const float *def, bool zero_ok, float *out);

/* ---- matrix products (model.c) -------------------------------------------- */

/* y = t x for n tokens (x [n][t->n_cols], y [n][t->n_rows]) through
 * kern_matmul_packed or kern_matmul on the context's pool; errors name the
 * tensor. */
int model_matmul(model_ctx *c, const model_tensor *t, const float *x, int64_t n, float *y);
/* ys[i] = ts[i] x for i < n_parts (<= KERN_MULTI_MAX, all with the same
 * n_cols) in one pool job (kern_matmul_multi): a layer's Q, K, V and gate,
 * up read the same normalized x. Bit-identical to model_matmul per tensor;
 * errors name the tensors. */
int model_matmul_multi(model_ctx *c, int n_parts, const model_tensor *const *ts, float *const *ys, const float *x,
                       int64_t n);

/* Row r of t as n_cols f32 into out (an embedding lookup): from the packed
 * layout when t is packed (a tied token_embd), else from t->data. Errors
 * name the tensor. */
int model_tensor_row_f32(const model_tensor *t, int64_t r, float *out);

/* ---- decode profiling (prof.c) ----------------------------------------- */

/* Closes the piece of work since the previous mark as an event of seg
 * (no-op unless profiling: the check is inline). */
void model_prof_mark_(model_ctx *c, int seg);
static inline void model_prof_mark(model_ctx *c, int seg) {
  if (__builtin_expect(c->prof != NULL, 0)) model_prof_mark_(c, seg);
}
/* Called by model_matmul(_multi) around a product when profiling: notes
 * the weights read and turns the pool's trace on (begin) / off (end). */
void model_prof_product_begin(model_ctx *c, int n, const model_tensor *const *ts);
void model_prof_product_end(model_ctx *c);
/* Starts a pass (model_decode): the next event begins now. */
void model_prof_start(model_ctx *c);

/* ---- KV cache (model.c) and attention (attn.c) --------------------------- */

/* KV block kl (of the hp.n_layer_kv attention layers) of sequence seq:
 * its k (which 0) or v (1) block. */
static inline uint8_t *model_kv_block_at(model_ctx *c, int32_t seq, int64_t kl, int which) {
  return c->kv + (((size_t)seq * (size_t)c->m->hp.n_layer_kv + (size_t)kl) * 2 + (size_t)which) * c->kv_layer_bytes;
}
/* Layer l's (an attention layer) k (which 0) or v (1) block of sequence seq. */
static inline uint8_t *model_kv_block(model_ctx *c, int32_t seq, int64_t l, int which) {
  return model_kv_block_at(c, seq, c->m->layer_kv ? c->m->layer_kv[l] : l, which);
}
/* Recurrent layer l's state of sequence seq: hp.rs_floats values. */
static inline float *model_rs_state(model_ctx *c, int32_t seq, int64_t l) {
  const model_hparams *hp = &c->m->hp;
  return c->rs + ((size_t)seq * (size_t)hp->n_layer_rs + (size_t)c->m->layer_rs[l]) * (size_t)hp->rs_floats;
}
/* Declares the layers for which recurrent[l] is true recurrent, each with
 * rs_floats values of state per sequence (called by an architecture's
 * load after model_load_common_hparams): sets hp.n_layer_kv, n_layer_rs,
 * rs_floats and the layer maps. */
int model_set_recurrent(model *m, const bool *recurrent, int64_t rs_floats);
/* The same where some layers keep neither a KV cache nor a state
 * (stateless[l]: nemotron_h's feed-forward-only layers; NULL: none). */
int model_set_layer_kinds(model *m, const bool *recurrent, const bool *stateless, int64_t rs_floats);
/* Layer l's feed-forward width: ARCH.feed_forward_length's entry l when
 * the key is a per-layer array (hybrid rows), else hp.n_ff. */
int64_t model_layer_ff(model *m, int64_t l);
/* Layer l's kv head count: ARCH.attention.head_count_kv's entry l when the
 * key is a per-layer array (0: a recurrent layer), else hp.n_head_kv. */
int64_t model_layer_kv_heads(model *m, int64_t l);
/* A small tensor of n_rows x n_cols (n_rows >= 1) of any type as f32 in a
 * buffer the model owns (LFM2's convolution taps). */
int model_bind_f32(model *m, const float **out, int64_t n_cols, int64_t n_rows, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Element offset of (kv head g, position p, dim d) in a k block (rows of
 * positions) and in a v block (tiles of ATT_TILE_POS positions stored
 * transposed: [tile][d][p % ATT_TILE_POS]). */
static inline size_t model_kv_k_index(const model_ctx *c, int64_t g, int64_t p, int64_t d) {
  return ((size_t)g * (size_t)c->n_ctx_pad + (size_t)p) * (size_t)c->m->hp.head_dim + (size_t)d;
}
/* Byte offset of kv head g's row for position p: the k layout of every
 * type, and the v layout of Q8_0 (rows of blocks). */
static inline size_t model_kv_row_off(const model_ctx *c, int64_t g, int64_t p) {
  return ((size_t)g * (size_t)c->n_ctx_pad + (size_t)p) * c->kv_row;
}
static inline size_t model_kv_v_index(const model_ctx *c, int64_t g, int64_t p, int64_t d) {
  size_t hd = (size_t)c->m->hp.head_dim;
  return (size_t)g * (size_t)c->n_ctx_pad * hd + (size_t)(p / ATT_TILE_POS) * hd * ATT_TILE_POS +
         (size_t)d * ATT_TILE_POS + (size_t)(p % ATT_TILE_POS);
}

/* Stores k[n][n_head_kv*head_dim] and v (same shape) of the step's tokens
 * into layer l of their sequences' caches at their positions. */
void model_kv_store(model_ctx *c, int64_t l, const model_step *s, const float *k, const float *v);
/* Causal multi-head attention with grouped query heads for the step's
 * tokens, reading layer l's cache (the step's own keys already stored):
 *   out[t][h] = sum_p softmax_p(scale * q[t][h] . K[seq t][g][p]) V[seq t][g][p],
 *   p <= pos[t], g = h / (n_head / n_head_kv);
 * on a sliding layer (model_layer_window(hp, l) = W > 0) also p > pos[t] - W,
 * and with hp->attn_softcap = c > 0 each score s is c tanh(s / c) first.
 * q and out are [n][n_head*head_dim]. Threads split (kv head, run of up to
 * ATT_TILE_TOK consecutive tokens of one sequence) tasks; each task reads
 * keys and values in tiles of ATT_TILE_POS positions, converted to f32
 * once per tile, against all its query rows (kern_attn_tile, online
 * softmax), so the scratch does not grow with the context. Returns 0 (the
 * int is kept for callers that check it). */
int model_attention(model_ctx *c, int64_t l, const model_step *s, const float *q, float *out, float scale);
/* model_attention with attention sinks: sinks [n_head] (NULL: none) is a
 * logit per query head added to every row's softmax denominator (a
 * position with no value): out[t][h] = sum_p exp(s_p) V_p / (sum_p exp(s_p)
 * + exp(sinks[h])), s_p the scaled (and capped) scores. */
int model_attention_sinks(model_ctx *c, int64_t l, const model_step *s, const float *q, float *out, float scale,
                          const float *sinks);
/* Floats of per-thread scratch model_attention needs (a multiple of 16). */
size_t model_att_scratch_floats(const model_hparams *hp);

/* ---- encoders' bidirectional attention (enc_attn.c) and pooling (embed.c) - */

/* One layer's attention over a batch of n_seq sequences whose rows lie one
 * after another (sequence s is rows off[s] .. off[s + 1] - 1):
 *   out[t][h] = sum_p softmax_p(scale q[t][h] . k[p][g]) v[p][g],
 *   g = h / (n_head / n_head_kv), p over t's sequence, and with window W > 0
 *   only |p - t| <= W / 2 (a symmetric sliding window: gemma-embedding). */
typedef struct model_enc_att {
  int64_t n_seq;
  const int64_t *off;    /* [n_seq + 1] first row of each sequence */
  const float *q;        /* [rows][n_head*head_dim] */
  const float *k, *v;    /* [rows][n_head_kv*head_dim] */
  float *out;            /* [rows][n_head*head_dim] */
  float scale;           /* the query scale */
  int64_t window;        /* 0: every position of the sequence */
  float *scr;            /* per thread: scr_floats, model_enc_att_scratch_floats */
  size_t scr_floats;
} model_enc_att;
/* Floats of scratch one thread needs for sequences of up to n_max tokens. */
size_t model_enc_att_scratch_floats(int64_t n_max, int64_t head_dim);
/* Runs a on the context's pool. */
int model_enc_attention(model_ctx *c, const model_enc_att *a);
/* The pooled vector of one sequence's n rows x [n][E] into o[E] (MEAN,
 * CLS = the first, LAST); NONE copies all n rows to o [n][E]. */
void model_pool_rows(enum model_pooling p, const float *x, int64_t n, int64_t E, float *o);
/* ARCH.pooling_type into *out, def when absent: 0..3 (none, mean, cls,
 * last); rank (4) and beyond are ERR_UNSUPPORTED naming the key when
 * !allow_rank, else kept (qwen: loadable for generation). */
int model_load_pooling(model *m, enum model_pooling def, bool allow_rank, int64_t *out);

/* Architecture rows. */
extern const model_arch_ops model_arch_llama;
extern const model_arch_ops model_arch_qwen2; /* qwen.c */
extern const model_arch_ops model_arch_qwen3; /* qwen.c */
extern const model_arch_ops model_arch_bert;  /* bert.c */
extern const model_arch_ops model_arch_gemma2; /* gemma.c */
extern const model_arch_ops model_arch_gemma3; /* gemma.c */
extern const model_arch_ops model_arch_gemma_embedding; /* gemma.c */
extern const model_arch_ops model_arch_phi3;    /* llamalike.c */
extern const model_arch_ops model_arch_granite; /* llamalike.c */
extern const model_arch_ops model_arch_smollm3; /* llamalike.c */
extern const model_arch_ops model_arch_qwen3moe; /* qwen3moe.c */
extern const model_arch_ops model_arch_llama_moe; /* llama_moe.c */
extern const model_arch_ops model_arch_lfm2;      /* lfm2.c */
extern const model_arch_ops model_arch_olmo2; /* olmo2.c */
extern const model_arch_ops model_arch_exaone4; /* olmo2.c */
extern const model_arch_ops model_arch_glm4;  /* glm4.c */
extern const model_arch_ops model_arch_mistral3; /* llamalike.c */
extern const model_arch_ops model_arch_nomic_bert; /* bert.c */
extern const model_arch_ops model_arch_gpt_oss; /* gptoss.c */
extern const model_arch_ops model_arch_qwen2moe; /* qwen2moe.c */
extern const model_arch_ops model_arch_olmoe;    /* olmoe.c */
extern const model_arch_ops model_arch_granitemoe; /* granitemoe.c */
extern const model_arch_ops model_arch_qwen35;     /* qwen35.c */
extern const model_arch_ops model_arch_qwen35moe;  /* qwen35.c */
extern const model_arch_ops model_arch_qwen3next;  /* qwen35.c */
extern const model_arch_ops model_arch_mamba2;        /* mamba2.c */
extern const model_arch_ops model_arch_granitehybrid; /* mamba2.c */
extern const model_arch_ops model_arch_nemotron_h;    /* mamba2.c */
extern const model_arch_ops model_arch_gemma4;        /* gemma4.c */

/* ---- dense decoder blocks: llama, qwen2, qwen3 (dense.c) ----------------- */

/* Tokens per feed-forward sub-batch (dense.c says why). */
#define MODEL_FFN_ROWS 512
/* A model_decode call with a step of more tokens than this ends by
 * returning the compute buffers' pages (model_arch_ops.trim): they stay
 * out of the resident set while generating. Smaller steps keep them (a
 * step of n tokens touches n rows of each buffer). */
#define MODEL_TRIM_TOKENS 128

/* Per-context activations of a dense decoder block, f32. x, xn:
 * [n_batch][n_embd]; q, att: [n_batch][n_head*head_dim]; k, v:
 * [n_batch][n_head_kv*head_dim]; g, u: [model_ffn_rows][n_ff]. */
typedef struct model_dense_bufs {
  float *x;    /* residual stream */
  float *xn;   /* normalized input / projection output */
  float *q, *k, *v;
  float *att;  /* attention output */
  float *g;    /* FFN gate, then silu(gate)*up */
  float *u;    /* FFN up */
  float *work; /* the one allocation behind q, k, v, att and g, u: the
                  attention buffers are dead once Wo has read att, before
                  the FFN writes g and u, so both sets share it */
  size_t bytes[3]; /* of x, xn, work */
} model_dense_bufs;

/* min(n_batch, MODEL_FFN_ROWS). */
int64_t model_ffn_rows(const model_ctx *c);
/* Allocates b's buffers for c's batch (counted in c->buf_bytes). On error
 * what was allocated stays in b for model_dense_bufs_free. */
int model_dense_bufs_init(model_ctx *c, model_dense_bufs *b);
/* The same for `rows` tokens (encoders: a whole batch of sequences). */
int model_dense_bufs_init_rows(model_ctx *c, model_dense_bufs *b, int64_t rows);
void model_dense_bufs_free(model_dense_bufs *b);
/* Returns the pages of b's buffers to the system (contents lost: every
 * step writes them before reading). */
void model_dense_bufs_trim(model_dense_bufs *b);
/* g[i] = silu(g[i]) * u[i] over n values, split across the context's pool
 * when n is large enough to pay for the wake-up. */
void model_swiglu(model_ctx *c, float *g, const float *u, int64_t n);
/* The gate's activation of a gated feed-forward. */
enum model_ffn_act {
  MODEL_FFN_SILU = 0, /* SwiGLU: silu(gate) * up (llama, qwen) */
  MODEL_FFN_GELU      /* GeGLU: gelu_tanh(gate) * up (gemma) */
};
/* g[i] = act(g[i]) * u[i]: model_swiglu's split, for either activation. */
void model_glu(model_ctx *c, enum model_ffn_act act, float *g, const float *u, int64_t n);
/* model_dense_ffn with the gate's activation act. */
int model_dense_ffn_act(model_ctx *c, enum model_ffn_act act, const model_tensor *gate, const model_tensor *up,
                        const model_tensor *down, model_dense_bufs *b, int64_t n);
/* x[i] = cap * tanh(x[i] / cap) (the final-logit soft cap); cap <= 0: none. */
void model_logit_softcap(float *x, int64_t n, float cap);
/* The SwiGLU feed-forward of n tokens: b->xn rows (the normalized input)
 * are replaced by down . (silu(gate . xn) * (up . xn)), in sub-batches of
 * model_ffn_rows tokens through b->g and b->u (gate and up in one fused
 * job, model_matmul_multi). */
int model_dense_ffn(model_ctx *c, const model_tensor *gate, const model_tensor *up, const model_tensor *down,
                    model_dense_bufs *b, int64_t n);
/* b->x rows = the step's token embeddings (rows of tok_embd), and the
 * context's RoPE cos/sin cache for the step's positions. */
int model_dense_embed(model_ctx *c, const model_step *st, const model_tensor *tok_embd, model_dense_bufs *b);
/* b->xn rows = rms(b->x rows) with weight norm [n_embd] (the first layer's
 * input norm: later layers' comes from model_dense_add_norm). */
void model_dense_norm(model_ctx *c, model_dense_bufs *b, int64_t n, const float *norm);
/* The residual add of a block's sub-layer output (in b->xn): x += xn, then
 * xn = rms(x) with weight norm, the next sub-layer's input norm, in one
 * pass (ops_add_rmsnorm, bit-identical to the two); norm NULL (after the
 * last layer): the add alone. */
void model_dense_add_norm(model_ctx *c, model_dense_bufs *b, int64_t n, const float *norm);
/* rows[r] = rms(rows[r]) * norm for n rows of width w, in place: the
 * post-sub-layer norms and per-head q/k norms of every architecture. */
void model_norm_rows(float *rows, int64_t n, int64_t w, const float *norm, float eps);
/* b->xn row i = rms(b->x row st->out[i]) with the output norm, for the
 * st->n_out tokens whose logits (or embeddings) are wanted. */
void model_dense_out_norm(model_ctx *c, const model_step *st, model_dense_bufs *b, const float *norm);


/* ---- the attention sub-layer and the model's ends, for the decoders built
 * on these buffers after qwen.c and llama.c (dense.c) -------------------- */

/* One block's attention tensors (qwen3-style q/k norms and qwen2-style
 * biases optional). */
typedef struct model_attn_layer {
  const float *attn_norm;      /* [n_embd] */
  model_tensor wq;             /* [n_head*head_dim][n_embd] */
  model_tensor wk, wv;         /* [n_head_kv*head_dim][n_embd] */
  model_tensor wo;             /* [n_embd][n_head*head_dim] */
  const float *bq, *bk, *bv;   /* [n_head*head_dim], [kv], [kv] or NULL */
  const float *q_norm, *k_norm; /* [head_dim] (per head), [n_head*head_dim]
                                   / [n_head_kv*head_dim] (qk_whole), or NULL */
  bool qk_whole;               /* the q/k norms span the whole projection
                                  (model_qk_norm) */
  float scale;                 /* score multiplier: 1/sqrt(head_dim), or
                                  the architecture's (granite's
                                  attention.scale) set after binding */
  const float *bo;             /* [n_embd] or NULL: attn_output.bias */
  const float *sinks;          /* [n_head] or NULL: attn_sinks.weight, one
                                  logit per query head (model_attention_sinks) */
  const float *ffn_norm;       /* [n_embd] */
} model_attn_layer;

enum model_attn_flags {
  MODEL_ATTN_QK_NORM = 1,  /* blk.N.attn_{q,k}_norm.weight required */
  MODEL_ATTN_BIAS = 2,     /* blk.N.attn_{q,k,v}.bias required */
  MODEL_ATTN_OUT_BIAS = 4, /* blk.N.attn_output.bias required */
  MODEL_ATTN_SINKS = 8,    /* blk.N.attn_sinks.weight [n_head] required */
  MODEL_ATTN_POST_NORM = 16, /* the feed-forward's input norm is named
                               blk.N.post_attention_norm.weight (gpt-oss's
                               converter), not ffn_norm */
  MODEL_ATTN_QK_NORM_WHOLE = 32 /* blk.N.attn_{q,k}_norm.weight required,
                               over the whole q / k row (olmoe, as olmo2) */
};
/* RMS norms of q [n][n_head*head_dim] and k [n][n_head_kv*head_dim] in
 * place: with whole, each token's row at once (q_norm [n_head*head_dim],
 * k_norm [n_head_kv*head_dim]: OLMo 2, OLMoE), else each head's head_dim
 * values (q_norm, k_norm [head_dim]: qwen3). */
void model_qk_norm(const model_hparams *hp, float *q, float *k, int64_t n, const float *q_norm, const float *k_norm,
                   bool whole);
/* Binds layer i's attention tensors and its two norms. */
int model_attn_bind(model *m, model_attn_layer *L, int i, int flags);
/* b->xn rows (the normalized input of n tokens) become Wo attention(...)
 * of layer l: q, k, v products in one job, biases, q/k norms, RoPE, the
 * cache store and model_attention, as qwen.c does. */
int model_attn_forward(model_ctx *c, const model_step *st, int64_t l, const model_attn_layer *L, model_dense_bufs *b);

/* Granite's four multipliers (granite in llamalike.c, granitemoe in
 * moe_dec.c); model_scales_none is every other architecture's identity. */
typedef struct model_scales {
  float embd;  /* x0 = token_embd[tok] * embd (1 = none) */
  float resid; /* each sub-layer's output times resid before its residual
                  add (1 = none) */
  float attn;  /* attention score scale: 1/sqrt(head_dim) unless set */
  float logit; /* logits divided by it (1 = none) */
} model_scales;
void model_scales_none(const model *m, model_scales *s);
/* Granite's keys: ARCH.logit_scale (required, > 0), ARCH.embedding_scale,
 * residual_scale and attention.scale (absent or 0: none, else > 0); and
 * ARCH.rope.scaling.finetuned false turns RoPE off on every layer
 * (hp.nope_step = 1, llama.cpp's reading; default true). After
 * model_load_common_hparams. */
int model_load_granite_scales(model *m, model_scales *s);
/* x[i] *= s over n values (nothing when s is 1). */
void model_scale_rows(float *x, int64_t n, float s);

/* The decoder's ends: token_embd (its row count sets hp->n_vocab),
 * output_norm and output, token_embd when output.weight is absent (then
 * bound for products: see qwen.c). */
typedef struct model_io {
  model_tensor tok_embd;    /* [n_vocab][n_embd] */
  const float *output_norm; /* [n_embd] */
  model_tensor output;      /* [n_vocab][n_embd]; tok_embd when tied */
  bool tied;
} model_io;
int model_io_bind(model *m, model_io *io);
/* Logits of the step's wanted tokens from the residual stream b->x. */
int model_io_logits(model_ctx *c, const model_step *st, const model_io *io, model_dense_bufs *b, float *logits);

#endif
