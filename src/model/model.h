/*
 * model.h - language models on the CPU: load a GGUF file's architecture,
 * hyper-parameters and weights, keep a KV cache per context, and run the
 * forward pass from token ids to logits.
 *
 * Layers (see docs/runtime.md, "Forward pass"):
 *   model       the opened file: hyper-parameters and weight tensors that
 *               borrow from the read-only mapping (never copied). Immutable
 *               after model_open(), so several contexts may share it.
 *   model_ctx   one sequence's state: the KV cache (F16 by default) and the
 *               compute buffers, all allocated once in model_ctx_new(). A
 *               context belongs to one thread at a time.
 *   arch ops    a table of function pointers per architecture (llama; qwen2,
 *               qwen3 and bert are planned) chosen by general.architecture.
 *
 * Errors (negative ERR_* codes, err_detail() names the key or tensor):
 *   ERR_UNSUPPORTED  unknown general.architecture, a tensor type without a
 *                    kernel, a feature the architecture code lacks (MoE,
 *                    YaRN); ERR_NOT_FOUND a required key or tensor is
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
                            rope.scaling.type "linear" (or 1 /
                            ARCH.rope.scale_linear); freq_factors =
                            rope_freqs.weight (Llama 3) or NULL */
} model_hparams;

typedef struct model model;
typedef struct model_ctx model_ctx;

/* Opens path (gguf_open) and loads it. *out is NULL on failure. */
int model_open(const char *path, model **out);
/* Loads from an opened file, which the model takes over (closed by
 * model_free, also on failure). */
int model_load(gguf_file *f, model **out);
void model_free(model *m);

enum model_arch model_arch_of(const model *m);
const char *model_arch_name(enum model_arch a);
const model_hparams *model_get_hparams(const model *m);
const gguf_file *model_gguf(const model *m);
/* Bytes of all weight tensors the forward pass reads (for bandwidth
 * estimates: a generated token reads each of them once). */
uint64_t model_weight_bytes(const model *m);

/* ---- contexts ------------------------------------------------------------ */

enum model_kv_type {
  MODEL_KV_F16 = 0, /* default: halves the cache against F32 */
  MODEL_KV_F32 = 1  /* exact, for tests and debugging */
};

typedef struct model_ctx_params {
  int64_t n_ctx;        /* requested context in tokens; 0 or more than the
                           trained context = the trained context */
  int64_t n_batch;      /* most tokens per internal step of model_forward
                           (compute buffers are sized for it); 0 = 512 */
  enum model_kv_type kv_type;
  thread_pool *tp;      /* borrowed; NULL = the context creates its own */
  int n_threads;        /* threads of the context's own pool (tp NULL);
                           0 = 1 */
} model_ctx_params;

/* Zeroed params: trained context, batch 512, F16 cache, one thread. */
model_ctx_params model_ctx_default_params(void);

int model_ctx_new(model *m, const model_ctx_params *p, model_ctx **out);
void model_ctx_free(model_ctx *c);
int64_t model_ctx_n_ctx(const model_ctx *c);
/* Tokens held in the KV cache (positions 0..n_past-1). */
int64_t model_ctx_n_past(const model_ctx *c);
/* Forgets cache positions >= n (n <= n_past): rewinds for regeneration or a
 * new prompt that shares a prefix. */
void model_ctx_truncate(model_ctx *c, int64_t n);
/* Bytes of the KV cache / of the compute buffers. */
size_t model_ctx_kv_bytes(const model_ctx *c);
size_t model_ctx_buf_bytes(const model_ctx *c);
/* The pool the context computes with (its own or the borrowed one). */
thread_pool *model_ctx_pool(model_ctx *c);

enum model_logits {
  MODEL_LOGITS_LAST = 0, /* logits[n_vocab] of the last token only */
  MODEL_LOGITS_ALL = 1,  /* logits[n][n_vocab], one row per token */
  MODEL_LOGITS_NONE = 2  /* fill the cache only (logits may be NULL) */
};

/* Runs tokens[0..n-1] at positions pos..pos+n-1 through the model (in steps
 * of at most n_batch tokens, each a matrix-matrix product over the whole
 * step), appends their keys and values to the cache, and writes logits.
 * pos must be <= n_past (a smaller pos first truncates the cache to pos);
 * pos + n > n_ctx is ERR_CONTEXT. On error the cache keeps what it held
 * before the call. */
int model_forward(model_ctx *c, const int32_t *tokens, int64_t n, int64_t pos, float *logits,
                  enum model_logits mode);

/* ---- embeddings (embed.c) -------------------------------------------------
 * Encoder architectures (bert) turn a whole sequence into one vector; they
 * have no logits (model_forward is ERR_UNSUPPORTED naming the
 * architecture), and decoders have no embed (model_embed is
 * ERR_UNSUPPORTED). */
enum model_pooling {
  MODEL_POOLING_NONE = 0, /* every token's vector: out is [n][n_embd] */
  MODEL_POOLING_MEAN = 1, /* mean over the tokens: out is [n_embd] */
  MODEL_POOLING_CLS = 2   /* the first token's vector: out is [n_embd] */
};
enum model_embed_flags {
  MODEL_EMBED_NORMALIZE = 1 /* scale each output vector to unit L2 norm */
};
/* The pooling the file asks for (ARCH.pooling_type); NONE for decoders. */
enum model_pooling model_embed_pooling(const model *m);
/* Encodes tokens[0..n-1] (positions 0..n-1, one sequence, no cache: each
 * call is independent) and writes the pooled vector of n_embd floats to
 * out_embd (n * n_embd for MODEL_POOLING_NONE). flags: model_embed_flags.
 * ERR_CONTEXT when n exceeds the context, ERR_RANGE for a token outside the
 * vocabulary. */
int model_embed(model_ctx *c, const int32_t *tokens, int64_t n, float *out_embd, unsigned flags);

/* ---- architecture interface ---------------------------------------------
 * One row per architecture (model.c holds the table; llama.c implements the
 * llama row). `load` reads the hyper-parameters and binds the tensors into
 * arch data it allocates (m->arch); `ctx_init` allocates per-context buffers
 * into c->arch; `forward` runs one step of at most n_batch tokens. */
typedef struct model_arch_ops {
  const char *name; /* general.architecture value */
  int (*load)(model *m);
  void (*unload)(model *m);
  int (*ctx_init)(model_ctx *c);
  void (*ctx_free)(model_ctx *c);
  int (*forward)(model_ctx *c, const int32_t *tokens, int64_t n, int64_t pos, float *logits,
                 enum model_logits mode);
  /* Encoders only (NULL for decoders): model_embed after argument checks. */
  int (*embed)(model_ctx *c, const int32_t *tokens, int64_t n, float *out_embd, unsigned flags);
  enum model_pooling (*pooling)(const model *m);
} model_arch_ops;

#endif
