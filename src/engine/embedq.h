/*
 * embedq.h - the serving engine's embedding batcher: one per loaded model
 * that embeds. Every embedding request (each input of a request, and the
 * inputs of concurrent requests) is queued here, and batches of queued
 * inputs go through the model together (model_embed_batch: one forward pass
 * for several sequences where the architecture can, bert), as generation
 * requests share the engine's batched steps. Knows token ids and vectors,
 * never JSON or a dialect.
 *
 * No thread of its own: a caller whose inputs are queued and finds no batch
 * running becomes the runner, forms a batch from the queue and runs it; it
 * keeps doing so until its own inputs are done, then hands over to a waiting
 * caller (leader/follower). Batches take inputs round-robin across the
 * queued requests (one from each in turn), so a request with 2,000 inputs
 * does not hold back a request with one.
 */
#ifndef PARLEY_ENGINE_EMBEDQ_H
#define PARLEY_ENGINE_EMBEDQ_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

typedef struct embedq embedq;

typedef struct embedq_params {
  int32_t max_seqs;   /* inputs per forward pass (default 64) */
  int64_t max_tokens; /* tokens per forward pass, summed (0 = what the model's
                         batch takes, model_embed_batch_tokens) */
  int64_t queue_max;  /* queued inputs of all requests before a new request
                         is refused ERR_OVERLOADED (default 8192) */
  int32_t n_threads;  /* the context's threads (default 1) */
  enum model_kv_type kv_type; /* for decoder embedders' context (F32 default) */
} embedq_params;

typedef struct embedq_stats {
  uint64_t inputs;  /* inputs embedded */
  uint64_t batches; /* forward passes (model_embed_batch calls) */
  uint64_t tokens;  /* tokens embedded */
  int64_t queued;   /* inputs waiting now */
} embedq_stats;

embedq_params embedq_default_params(void);
/* A batcher for model m (borrowed; must outlive it). The model context is
 * made on first use. */
int embedq_new(model *m, const embedq_params *p, embedq **out);
/* Callers must have returned from embedq_embed. */
void embedq_free(embedq *q);

/* Embeds n inputs (tokens[i][0..lens[i]-1]) to unit vectors at
 * out + i * n_embd, blocking until all are done. On failure returns the
 * error of the first failing input and sets *failed (when not NULL) to its
 * index; the other inputs' vectors may or may not be written. Each input
 * must fit the context (ERR_CONTEXT otherwise). ERR_OVERLOADED when the
 * queue holds queue_max inputs already (nothing is queued then). */
int embedq_embed(embedq *q, size_t n, const int32_t *const *tokens, const int64_t *lens, float *out, size_t *failed);

void embedq_get_stats(embedq *q, embedq_stats *st);

#endif
