/*
 * embed.c - model_embed(): the architecture-independent half of computing
 * embeddings (argument checks, dispatch to the row's `embed`, optional L2
 * normalization). Encoders (bert.c) implement `embed`; decoders leave it
 * NULL and get ERR_UNSUPPORTED naming the architecture.
 *
 * Invariant: the arch's embed sees only valid arguments (n in 1..n_ctx,
 * every token inside the vocabulary, out not NULL).
 */
#include <math.h>

#include "base/err.h"
#include "model/model_int.h"

enum model_pooling model_embed_pooling(const model *m) {
  return m->ops->pooling ? m->ops->pooling(m) : MODEL_POOLING_NONE;
}

int model_embed(model_ctx *c, const int32_t *tokens, int64_t n, float *out_embd, unsigned flags) {
  const model *m = c->m;
  const model_hparams *hp = &m->hp;
  if (!m->ops->embed)
    return err_set(ERR_UNSUPPORTED, "architecture '%s' is a decoder: it has no embeddings (model_embed)",
                   m->ops->name);
  if (n <= 0) return err_set(ERR_RANGE, "model_embed: %lld tokens", (long long)n);
  if (!out_embd) return err_set(ERR_INVALID, "model_embed: out_embd is NULL");
  if (n > c->n_ctx)
    return err_set(ERR_CONTEXT, "%lld tokens need %lld positions, but the context holds %lld", (long long)n,
                   (long long)n, (long long)c->n_ctx);
  for (int64_t i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
      return err_set(ERR_RANGE, "token %d at index %lld is outside the vocabulary of %lld", tokens[i], (long long)i,
                     (long long)hp->n_vocab);
  int rc = m->ops->embed(c, tokens, n, out_embd, flags);
  if (rc) return rc;
  if (flags & MODEL_EMBED_NORMALIZE) {
    int64_t rows = model_embed_pooling(m) == MODEL_POOLING_NONE ? n : 1, E = hp->n_embd;
    for (int64_t r = 0; r < rows; r++) {
      float *v = out_embd + r * E;
      double s = 0;
      for (int64_t d = 0; d < E; d++) s += (double)v[d] * v[d];
      if (s > 0) {
        float inv = (float)(1.0 / sqrt(s));
        for (int64_t d = 0; d < E; d++) v[d] *= inv;
      }
    }
  }
  return 0;
}
