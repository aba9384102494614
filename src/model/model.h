/*
 * model.h - language models on the CPU: load a GGUF file's architecture,
 * hyper-parameters and weights, keep a KV cache per context, and run the
 * forward pass from token ids to logits.
 *
 * Layers (see docs/runtime.md, "Forward pass"):
 *   model       the opened file: hyper-parameters and weight tensors that
 *               borrow from the read-only mapping (never copied). Immutable
 *               after model_open(), so several contexts may share it.
 *   model_ctx   the state of n_seq sequences (slots): a KV cache per
 *               sequence (F16 by default) and the compute buffers, all
 *               allocated once in model_ctx_new(). A forward pass may mix
 *               tokens of several sequences (model_decode). A context
 *               belongs to one thread at a time.
 *   arch ops    a table of function pointers per architecture (llama, qwen2,
 *               qwen3, bert, gemma2, gemma3, phi3, granite, smollm3) chosen
 *               by general.architecture.
 *
 * Errors (negative ERR_* codes, err_detail() names the key or tensor):
 *   ERR_UNSUPPORTED  unknown general.architecture, a tensor type without a
 *                    kernel, a feature the architecture code lacks (YaRN,
 *                    experts in an architecture without them); ERR_NOT_FOUND a required key or tensor is
 *                    missing; ERR_TYPE a key of the wrong type; ERR_RANGE a
 *                    hyper-parameter out of range, a tensor shape that does
 *                    not match ("tensor 'blk.0.attn_k.weight' has shape
 *                    [64, 64], expected [64, 32]"), a token id outside the
 *                    vocabulary; ERR_CONTEXT a batch that does not fit the
 *                    context (both numbers in the detail).
 */
#ifndef PARLEY_MODEL_MODEL_H
#define PARLEY_MODEL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"

enum model_arch {
  MODEL_ARCH_LLAMA = 0,
  MODEL_ARCH_QWEN2,  /* qwen.c */
  MODEL_ARCH_QWEN3,  /* qwen.c */
  MODEL_ARCH_BERT,   /* bert.c: encoder only, model_embed() */
  MODEL_ARCH_GEMMA2, /* gemma.c */
  MODEL_ARCH_GEMMA3, /* gemma.c */
  MODEL_ARCH_PHI3,    /* llamalike.c */
  MODEL_ARCH_GRANITE, /* llamalike.c */
  MODEL_ARCH_SMOLLM3, /* llamalike.c */
  MODEL_ARCH_QWEN3MOE, /* qwen3moe.c: mixture of experts (moe.c) */
  MODEL_ARCH_LLAMA_MOE, /* llama_moe.c: "llama" files with experts (Mixtral) */
  MODEL_ARCH_LFM2,    /* lfm2.c: short convolutions and attention (hybrid) */
  MODEL_ARCH_OLMO2,  /* olmo2.c */
  MODEL_ARCH_GLM4,   /* glm4.c */
  MODEL_ARCH_NOMIC_BERT, /* bert.c: nomic-embed-text, model_embed() */
  MODEL_ARCH_MISTRAL3, /* llamalike.c: Ministral 3, Mistral Small 3.x text */
  MODEL_ARCH_GPT_OSS,   /* gptoss.c: OpenAI gpt-oss (moe.c, attention sinks) */
  MODEL_ARCH_QWEN2MOE,  /* qwen2moe.c: experts + a gated shared expert */
  MODEL_ARCH_OLMOE,     /* olmoe.c: experts, whole-row q/k norms */
  MODEL_ARCH_GRANITEMOE, /* granitemoe.c: experts with granite's multipliers */
  MODEL_ARCH_GEMMA_EMBEDDING, /* gemma.c: EmbeddingGemma, an encoder: model_embed() */
  MODEL_ARCH_EXAONE4,   /* olmo2.c: LG EXAONE 4.0 */
  MODEL_ARCH_QWEN35,    /* qwen35.c: Qwen3.5 (gated delta net + gated attention, hybrid) */
  MODEL_ARCH_QWEN35MOE, /* qwen35.c: Qwen3.5 with experts */
  MODEL_ARCH_QWEN3NEXT, /* qwen35.c: Qwen3-Next (experts, fused beta/alpha) */
  MODEL_ARCH_MAMBA2,    /* mamba2.c: Mamba-2 state-space layers only */
  MODEL_ARCH_GRANITEHYBRID, /* mamba2.c: Granite 4.0 H (Mamba-2 + attention, experts) */
  MODEL_ARCH_NEMOTRON_H, /* mamba2.c: Nemotron-H (Mamba-2, attention, MLP layers) */
  MODEL_ARCH_GEMMA4,    /* gemma4.c: Gemma 4 text (per-layer embeddings, shared KV) */
  MODEL_ARCH_COUNT
};

/* Hyper-parameters, read from `ARCH.*` metadata keys (ARCH =
 * general.architecture) and from tensor shapes. */
typedef struct model_hparams {
  int64_t n_ctx_train;   /* ARCH.context_length: the trained context */
  int64_t n_embd;        /* ARCH.embedding_length */
  int64_t n_layer;       /* ARCH.block_count */
  int64_t n_ff;          /* ARCH.feed_forward_length */
  int64_t n_head;        /* ARCH.attention.head_count */
  int64_t n_head_kv;     /* ARCH.attention.head_count_kv (default n_head) */
  int64_t head_dim;      /* ARCH.attention.key_length, default n_embd / n_head */
  int64_t n_vocab;       /* rows of token_embd.weight */
  float norm_eps;        /* ARCH.attention.layer_norm_rms_epsilon (or _epsilon) */
  ops_rope rope;         /* style from the architecture; n_rot =
                            ARCH.rope.dimension_count (default head_dim);
                            freq_base = ARCH.rope.freq_base (default 10000);
                            freq_scale = 1 / ARCH.rope.scaling.factor for
                            rope.scaling.type "linear" or "yarn" (or 1 /
                            ARCH.rope.scale_linear); freq_factors =
                            rope_freqs.weight (Llama 3) or NULL; YaRN's
                            ramp and attn_factor as model.c's
                            load_rope_scaling reads them */
  /* Per-layer attention variants (model_load_swa_hparams,
   * model_load_softcap; all zero for architectures without them). */
  int64_t n_swa;         /* ARCH.attention.sliding_window: on a sliding
                            layer the token at position p attends to
                            positions p - n_swa + 1 .. p only; 0 = every
                            layer attends to the whole context */
  int32_t swa_pattern;   /* layer l slides when l % swa_pattern <
                            swa_pattern - 1 (gemma2: 2, every other layer
                            from layer 0; gemma3: 6, five sliding then one
                            global); the architecture's constant, or
                            ARCH.attention.sliding_window_pattern; 0 =
                            every layer slides (phi3), as in llama.cpp */
  ops_rope rope_swa;     /* the sliding layers' RoPE: rope with base
                            ARCH.rope.freq_base_swa (gemma3: default
                            10000, no scaling) */
  float attn_softcap;    /* ARCH.attn_logit_softcapping: attention scores
                            s become c tanh(s / c) before the softmax; 0 =
                            none */
  float final_softcap;   /* ARCH.final_logit_softcapping: the same on the
                            output logits; 0 = none */
  int32_t nope_step;     /* NoPE layers: layer l applies no RoPE when
                            (l + 1) % nope_step == 0 (smollm3: 4, every
                            fourth layer); 0 = every layer rotates */
  /* Recurrent layers (hybrid models: a short convolution, later an SSM or
   * delta-rule layer, in place of attention). The architecture's load
   * declares them (model_set_recurrent); zero for pure transformers. A
   * recurrent layer keeps no KV cache: each sequence owns a fixed-size
   * state per such layer instead, which does not grow with the context. */
  int64_t n_layer_kv;    /* layers with a KV cache (n_layer - n_layer_rs) */
  int64_t n_layer_rs;    /* layers with recurrent state */
  int64_t rs_floats;     /* f32 values of one recurrent layer's state for
                            one sequence (LFM2: (d_conv - 1) * n_embd) */
} model_hparams;

/* Bytes of recurrent state one sequence owns (all its recurrent layers). */
static inline uint64_t model_rs_seq_bytes(const model_hparams *hp) {
  return (uint64_t)hp->n_layer_rs * (uint64_t)hp->rs_floats * sizeof(float);
}

/* The window layer l attends within (hp->n_swa), or 0: the whole context. */
static inline int64_t model_layer_window(const model_hparams *hp, int64_t l) {
  if (hp->n_swa <= 0) return 0;
  return hp->swa_pattern == 0 || l % hp->swa_pattern < hp->swa_pattern - 1 ? hp->n_swa : 0;
}

/* Whether layer l rotates q and k (false on the NoPE layers, hp->nope_step). */
static inline bool model_layer_rope(const model_hparams *hp, int64_t l) {
  return hp->nope_step <= 0 || (l + 1) % hp->nope_step != 0;
}

typedef struct model model;
typedef struct model_ctx model_ctx;

/* Opens path (gguf_open) and loads it. *out is NULL on failure. */
int model_open(const char *path, model **out);
/* A file's parameter counts, from its header alone (no model is loaded):
 * total = general.parameter_count when the file states it, else the sum of
 * its tensors' elements; active = what one token reads: total minus the
 * experts it does not use. An expert tensor (a name holding "_exps.", its
 * last dimension ARCH.expert_count, arch = general.architecture) counts
 * k / n_expert of its elements, k = ARCH.expert_used_count: the routed
 * experts' matrices and biases; router, shared expert, attention, norms,
 * embeddings and output count whole. A dense file (no expert_count) has
 * active = total. Never fails: missing keys make the file dense. */
void model_file_params(const gguf_file *f, const char *arch, uint64_t *total, uint64_t *active);
/* The bytes of those skipped experts: what a generated token does not read
 * of the file (0 for a dense file). */
uint64_t model_file_idle_expert_bytes(const gguf_file *f, const char *arch);
/* Loads from an opened file, which the model takes over (closed by
 * model_free, also on failure). */
int model_load(gguf_file *f, model **out);
void model_free(model *m);

enum model_arch model_arch_of(const model *m);
const char *model_arch_name(enum model_arch a);
/* Whether some architecture row runs files whose general.architecture is
 * name (the one list of what the runtime executes). */
bool model_arch_runs(const char *name);
const model_hparams *model_get_hparams(const model *m);
const gguf_file *model_gguf(const model *m);
/* Bytes of all weight tensors the forward pass reads (for bandwidth
 * estimates: a generated token reads each of them once). */
uint64_t model_weight_bytes(const model *m);
/* Whether the model has recurrent layers (hp.n_layer_rs > 0): its
 * sequences cannot be truncated to a proper prefix. */
bool model_is_recurrent(const model *m);

/* ---- contexts ------------------------------------------------------------ */

enum model_kv_type {
  MODEL_KV_F16 = 0, /* default: halves the cache against F32 */
  MODEL_KV_F32 = 1, /* exact, for tests and debugging */
  MODEL_KV_Q8_0 = 2 /* keys and values as Q8_0 blocks (32 values, one f16
                       scale: 34 bytes, 1.0625 bytes per value), quantized
                       per token row on write; needs head_dim % 32 == 0,
                       otherwise the context uses F16 (logged; see
                       model_kv_type_for) */
};
#define MODEL_KV_TYPE_COUNT 3

/* "f16", "f32", "q8_0" ("unknown" out of range). */
const char *model_kv_type_name(enum model_kv_type t);
/* Parses a name as model_kv_type_name gives it (case-insensitive);
 * ERR_INVALID naming the value and the choices. */
int model_kv_type_parse(const char *s, enum model_kv_type *out);
/* The type a context of this head size really uses when t is requested:
 * t, except Q8_0 with head_dim not a multiple of 32, which is F16. */
enum model_kv_type model_kv_type_for(int64_t head_dim, enum model_kv_type t);
/* Bytes one cached key (or value) row of head_dim values takes in type
 * model_kv_type_for(head_dim, t): the manager's memory estimate uses it. */
size_t model_kv_row_bytes(int64_t head_dim, enum model_kv_type t);

typedef struct model_ctx_params {
  int64_t n_ctx;        /* requested context in tokens, per sequence; 0 or
                           more than the trained context = the trained one */
  int64_t n_batch;      /* most tokens per internal step of a forward pass
                           (compute buffers are sized for it); 0 = 512 */
  int32_t n_seq;        /* independent sequences (slots) whose tokens can
                           share one forward pass, each with its own n_ctx
                           positions of cache; 0 = 1 */
  enum model_kv_type kv_type;
  thread_pool *tp;      /* borrowed; NULL = the context creates its own */
  int n_threads;        /* threads of the context's own pool (tp NULL);
                           0 = 1 */
} model_ctx_params;

/* Zeroed params: trained context, batch 512, one sequence, F16 cache, one
 * thread. */
model_ctx_params model_ctx_default_params(void);

int model_ctx_new(model *m, const model_ctx_params *p, model_ctx **out);
void model_ctx_free(model_ctx *c);
/* Positions per sequence. */
int64_t model_ctx_n_ctx(const model_ctx *c);
int32_t model_ctx_n_seq(const model_ctx *c);
/* Tokens held in sequence seq's cache (positions 0..n_past-1); 0 for a seq
 * out of range. model_ctx_n_past is sequence 0's. */
int64_t model_ctx_seq_n_past(const model_ctx *c, int32_t seq);
int64_t model_ctx_n_past(const model_ctx *c);
/* Forgets positions >= n of a sequence (n <= n_past): rewinds for
 * regeneration, a new prompt sharing a prefix (n > 0) or a new request
 * (n = 0). model_ctx_truncate is sequence 0's. A model with recurrent
 * layers cannot rewind its state: any n < n_past forgets the whole
 * sequence (n_past becomes 0, its state zeroes), so callers keeping a
 * prefix check model_ctx_seq_n_past afterwards. */
void model_ctx_seq_truncate(model_ctx *c, int32_t seq, int64_t n);
void model_ctx_truncate(model_ctx *c, int64_t n);
/* Copies the first n cached positions of sequence src into dst (dst's
 * n_past becomes n): a shared prompt prefix (a system prompt) is computed
 * once. ERR_RANGE for sequences out of range, src == dst, or n > src's
 * n_past. With recurrent layers the state is copied too, which only
 * exists for the whole sequence: n must equal src's n_past (ERR_RANGE). */
int model_ctx_seq_copy(model_ctx *c, int32_t dst, int32_t src, int64_t n);
/* Recurrent-state checkpoints (models with recurrent layers; the engine's
 * prefix cache, docs/engine.md). model_ctx_seq_state_save copies sequence
 * seq's whole recurrent state - model_rs_seq_bytes(hp) bytes, the state
 * after its n_past positions - to dst. model_ctx_seq_state_restore makes
 * seq hold its first n positions again with state src: the caller promises
 * that src was saved when seq held exactly those n positions and that its
 * cache of positions < n has not been rewritten since (the sequence only
 * grew, or was cut back to n or more). ERR_UNSUPPORTED without recurrent
 * layers; ERR_RANGE for a sequence out of range or n outside 0..n_past. */
int model_ctx_seq_state_save(const model_ctx *c, int32_t seq, void *dst);
int model_ctx_seq_state_restore(model_ctx *c, int32_t seq, int64_t n, const void *src);
/* The cache type the context uses (the requested one after
 * model_kv_type_for's fallback). */
enum model_kv_type model_ctx_kv_type(const model_ctx *c);
/* Bytes of the KV cache (all sequences, attention layers only) / of the
 * recurrent state (all sequences) / of the compute buffers. */
size_t model_ctx_kv_bytes(const model_ctx *c);
size_t model_ctx_rs_bytes(const model_ctx *c);
size_t model_ctx_buf_bytes(const model_ctx *c);
/* The pool the context computes with (its own or the borrowed one). */
thread_pool *model_ctx_pool(model_ctx *c);

/* ---- decode profiling (bench/decode_wall.c; src/model/prof.c) -----------
 * While a model_prof is set on a context, each forward pass of the dense
 * decoders (llama, qwen) appends one event per piece of its work, in
 * order: the piece's wall time and, for a matrix product, the weight
 * buffers it read and the pool's timeline of its job (tpool_trace). Off
 * (NULL, the default) it costs one branch per piece. For measuring only. */
enum model_prof_seg {
  MODEL_PROF_EMBED,   /* embedding rows, rope cache */
  MODEL_PROF_NORM,    /* rms norms */
  MODEL_PROF_QKV,     /* Wq, Wk, Wv (one job) */
  MODEL_PROF_ROPE_KV, /* biases, rope, storing k and v */
  MODEL_PROF_ATTN,    /* model_attention */
  MODEL_PROF_WO,
  MODEL_PROF_ADD,     /* residual adds */
  MODEL_PROF_GATEUP,  /* gate, up (one job) */
  MODEL_PROF_SWIGLU,
  MODEL_PROF_DOWN,
  MODEL_PROF_LOGITS,  /* output norm and product */
  MODEL_PROF_COUNT
};
#define MODEL_PROF_MAX_W 4
typedef struct model_prof_ev {
  int seg;                             /* enum model_prof_seg */
  int64_t t0_ns, t1_ns;                /* CLOCK_MONOTONIC */
  int n_w;                             /* weight buffers read (products) */
  const void *w[MODEL_PROF_MAX_W];
  size_t w_bytes[MODEL_PROF_MAX_W];
  int n_jobs;                          /* pool jobs of the piece */
  tpool_trace job;                     /* the last one's timeline */
} model_prof_ev;
typedef struct model_prof {
  model_prof_ev *ev; /* caller's array of cap events */
  int cap, n;        /* n: events so far (reset it between passes) */
  int64_t t_last;    /* end of the previous event */
  /* internal: the product the next event closes */
  int pend_n_w;
  const void *pend_w[MODEL_PROF_MAX_W];
  size_t pend_bytes[MODEL_PROF_MAX_W];
  tpool_trace trace;
} model_prof;
const char *model_prof_seg_name(int seg);
void model_ctx_set_prof(model_ctx *c, model_prof *p);

enum model_logits {
  MODEL_LOGITS_LAST = 0, /* the last token (of each sequence) only */
  MODEL_LOGITS_ALL = 1,  /* one row per token */
  MODEL_LOGITS_NONE = 2  /* fill the cache only (logits may be NULL) */
};

/* A batch for model_decode: token i belongs to sequence seq[i] at position
 * pos[i]. The tokens of one sequence must appear in batch order with
 * consecutive positions (they may interleave with other sequences'), the
 * first at most that sequence's n_past (a smaller one rewinds it first).
 * This is what continuous batching feeds: one prompt chunk of a new request
 * next to the single next tokens of the running ones, all sharing each
 * weight matrix read. */
typedef struct model_batch {
  int64_t n;
  const int32_t *tokens;  /* [n] */
  const int32_t *seq;     /* [n] 0..n_seq-1; NULL = every token in sequence 0 */
  const int64_t *pos;     /* [n]; NULL = each sequence continues at its n_past */
  const bool *want;       /* [n] which tokens' logits to write; NULL = as
                             `logits` says */
  enum model_logits logits; /* without want: LAST (0, the default) = the
                               last token of each sequence in the batch,
                               ALL = every token, NONE = none */
} model_batch;

/* Runs the batch (in steps of at most n_batch tokens, each step's matrix
 * products over all its tokens at once), appends keys and values to each
 * sequence's cache, and writes one row of n_vocab logits per wanted token,
 * in batch order. Errors, checked before anything runs: ERR_RANGE (token
 * outside the vocabulary, sequence out of range, positions not consecutive
 * or past n_past; with recurrent layers also a first position between 0
 * and n_past: the state cannot rewind, position 0 restarts the sequence),
 * ERR_CONTEXT (a position >= n_ctx; the message says both numbers). On a
 * later failure (out of memory in a kernel) the sequences of the failed
 * step keep only positions before it; with recurrent layers, whose state
 * the step may have half advanced, they restart empty (n_past 0). */
int model_decode(model_ctx *c, const model_batch *b, float *logits);

/* One sequence's convenience form of model_decode: tokens[0..n-1] of
 * sequence 0 at positions pos..pos+n-1 (pos <= n_past; a smaller pos
 * rewinds). pos + n > n_ctx is ERR_CONTEXT ("14 tokens at position 10 need
 * 24 positions, but the context holds 20"). */
int model_forward(model_ctx *c, const int32_t *tokens, int64_t n, int64_t pos, float *logits,
                  enum model_logits mode);

/* ---- embeddings (embed.c) -------------------------------------------------
 * Encoder architectures (bert) turn a whole sequence into one vector; they
 * have no logits (model_forward is ERR_UNSUPPORTED naming the
 * architecture). qwen2/qwen3 embed too (Qwen3-Embedding, gte-Qwen2: the
 * final-normed hidden state, last-token pooling by default) through
 * sequence 0 of the context, which afterwards holds the tokens. Other
 * decoders (llama) have no embed: ERR_UNSUPPORTED. */
enum model_pooling {
  MODEL_POOLING_NONE = 0, /* every token's vector: out is [n][n_embd] */
  MODEL_POOLING_MEAN = 1, /* mean over the tokens: out is [n_embd] */
  MODEL_POOLING_CLS = 2,  /* the first token's vector: out is [n_embd] */
  MODEL_POOLING_LAST = 3  /* the last token's vector: out is [n_embd] */
};
enum model_embed_flags {
  MODEL_EMBED_NORMALIZE = 1 /* scale each output vector to unit L2 norm */
};
/* The pooling model_embed applies (ARCH.pooling_type, or the
 * architecture's default); NONE for architectures without embed. */
enum model_pooling model_embed_pooling(const model *m);
/* Encodes tokens[0..n-1] (positions 0..n-1, one sequence; each call is
 * independent of earlier ones) and writes the pooled vector of n_embd floats to
 * out_embd (n * n_embd for MODEL_POOLING_NONE). flags: model_embed_flags.
 * ERR_CONTEXT when n exceeds the context, ERR_RANGE for a token outside the
 * vocabulary. */
int model_embed(model_ctx *c, const int32_t *tokens, int64_t n, float *out_embd, unsigned flags);
/* Encodes n_seq independent sequences (tokens[s][0..n[s]-1], positions
 * 0..n[s]-1 each) and writes sequence s's pooled vector to
 * out_embd + s * n_embd. Architectures that can (bert) run them in one
 * forward pass: every weight matrix multiplies the rows of all sequences at
 * once, attention stays within each sequence; others run model_embed once
 * per sequence. The result for a sequence does not depend on its companions
 * beyond float rounding. The summed tokens may not exceed
 * model_embed_batch_tokens(c) (ERR_RANGE); pooling NONE is refused
 * (ERR_UNSUPPORTED: use model_embed). */
int model_embed_batch(model_ctx *c, int64_t n_seq, const int32_t *const *tokens, const int64_t *n, float *out_embd,
                      unsigned flags);
/* Most tokens, summed over the sequences, one model_embed_batch call takes
 * (at least the context: any single sequence fits). */
int64_t model_embed_batch_tokens(const model_ctx *c);

/* ---- architecture interface ---------------------------------------------
 * One row per architecture (model.c holds the table; llama.c implements the
 * llama row). `load` reads the hyper-parameters and binds the tensors into
 * arch data it allocates (m->arch_data); `ctx_init` allocates per-context
 * buffers into c->arch_data; `forward` runs one step. */

/* One step of at most n_batch tokens, positions already checked. */
typedef struct model_step {
  int64_t n;
  const int32_t *tokens;  /* [n] */
  const int32_t *seq;     /* [n] */
  const int64_t *pos;     /* [n] */
  const int64_t *out;     /* [n_out] increasing indices of the tokens whose
                             logits are written, row by row */
  int64_t n_out;
} model_step;

typedef struct model_arch_ops {
  const char *name; /* general.architecture value */
  int (*load)(model *m);
  void (*unload)(model *m);
  int (*ctx_init)(model_ctx *c);
  void (*ctx_free)(model_ctx *c);
  int (*forward)(model_ctx *c, const model_step *s, float *logits);
  /* NULL for architectures without embeddings: model_embed after argument
   * checks (embed) and the pooling it applies (pooling). */
  int (*embed)(model_ctx *c, const int32_t *tokens, int64_t n, float *out_embd, unsigned flags);
  /* NULL: model_embed_batch loops over embed. Otherwise n_seq sequences of
   * at most embed_batch_tokens(c) tokens in all, pooled (never NONE). */
  int (*embed_batch)(model_ctx *c, int64_t n_seq, const int32_t *const *tokens, const int64_t *n, float *out_embd);
  int64_t (*embed_batch_tokens)(const model_ctx *c);
  enum model_pooling (*pooling)(const model *m);
  /* NULL, or: returns the pages of the context's compute buffers to the
   * system (model_decode calls it after a step of more than
   * MODEL_TRIM_TOKENS tokens; the next step faults back what it touches). */
  void (*trim)(model_ctx *c);
  /* true: the architecture reads ARCH.expert_count and expert tensors
   * (moe.c). A file whose general.architecture names both a dense and an
   * MoE row ("llama") goes to the MoE one when ARCH.expert_count > 0; files
   * of other dense rows declaring experts are refused. */
  bool moe;
  /* true: ARCH.attention.head_count_kv may be a per-layer array whose 0
   * entries are recurrent layers (model_set_recurrent) */
  bool hybrid;
  const void *spec; /* the row's parameters for code several rows share
                       (moe_dec.c: a model_moe_dec_spec), or NULL */
  /* true: an encoder (bert, nomic-bert): bidirectional, no KV cache, no
   * logits; only embeddings (model_is_encoder). */
  bool encoder;
} model_arch_ops;

/* Whether the model's architecture is an encoder (its row's `encoder`):
 * the manager serves it embeddings only, without a generation engine. */
bool model_is_encoder(const model *m);

#endif
