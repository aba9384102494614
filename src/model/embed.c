/*
 * embed.c - model_embed(): the architecture-independent half of computing
 * embeddings (argument checks, dispatch to the row's `embed`, optional L2
 * normalization). Encoders (bert.c) implement `embed`; decoders leave it
 * NULL and get ERR_UNSUPPORTED naming the architecture. model_embed_batch
 * encodes several sequences at once: in one forward pass where the
 * architecture has `embed_batch` (bert), else one model_embed per sequence
 * (the serving engine's embedding batcher, engine/embedq.c, calls it).
 *
 * Invariant: the arch's embed sees only valid arguments (n in 1..n_ctx,
 * every token inside the vocabulary, out not NULL).
 */
#include <math.h>
#include <string.h>

#include "base/err.h"
#include "model/model_int.h"

/* Scales each of rows vectors of E floats to unit L2 norm (zero stays zero). */
static void normalize_rows(float *out, int64_t rows, int64_t E) {
  for (int64_t r = 0; r < rows; r++) {
    float *v = out + r * E;
    double s = 0;
    for (int64_t d = 0; d < E; d++) s += (double)v[d] * v[d];
    if (s > 0) {
      float inv = (float)(1.0 / sqrt(s));
      for (int64_t d = 0; d < E; d++) v[d] *= inv;
    }
  }
}

void model_pool_rows(enum model_pooling p, const float *x, int64_t n, int64_t E, float *o) {
  switch (p) {
  case MODEL_POOLING_NONE:
    memcpy(o, x, (size_t)(n * E) * sizeof(float));
    break;
  case MODEL_POOLING_CLS:
    memcpy(o, x, (size_t)E * sizeof(float));
    break;
  case MODEL_POOLING_LAST:
    memcpy(o, x + (n - 1) * E, (size_t)E * sizeof(float));
    break;
  case MODEL_POOLING_MEAN:
    for (int64_t d = 0; d < E; d++) {
      double sum = 0;
      for (int64_t t = 0; t < n; t++) sum += x[t * E + d];
      o[d] = (float)(sum / (double)n);
    }
    break;
  }
}

int model_load_pooling(model *m, enum model_pooling def, bool allow_rank, int64_t *out) {
  int64_t d = def;
  int rc = model_key_i64(m, "pooling_type", &d, 0, 1 << 16, out);
  if (rc) return rc;
  if (*out > MODEL_POOLING_LAST && !allow_rank)
    return err_set(ERR_UNSUPPORTED,
                   "key '%s.pooling_type' is %lld: only 0 (none), 1 (mean), 2 (cls) and 3 (last) are supported",
                   m->ops->name, (long long)*out);
  return 0;
}

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
  if (flags & MODEL_EMBED_NORMALIZE)
    normalize_rows(out_embd, model_embed_pooling(m) == MODEL_POOLING_NONE ? n : 1, hp->n_embd);
  return 0;
}

int64_t model_embed_batch_tokens(const model_ctx *c) {
  return c->m->ops->embed_batch_tokens ? c->m->ops->embed_batch_tokens(c) : c->n_ctx;
}

int model_embed_batch(model_ctx *c, int64_t n_seq, const int32_t *const *tokens, const int64_t *n, float *out_embd,
                      unsigned flags) {
  const model *m = c->m;
  const model_hparams *hp = &m->hp;
  if (!m->ops->embed)
    return err_set(ERR_UNSUPPORTED, "architecture '%s' is a decoder: it has no embeddings (model_embed)",
                   m->ops->name);
  if (model_embed_pooling(m) == MODEL_POOLING_NONE)
    return err_set(ERR_UNSUPPORTED, "model_embed_batch: the model's pooling is 'none' (one vector per token): use "
                                    "model_embed");
  if (n_seq <= 0 || !tokens || !n || !out_embd)
    return err_set(ERR_INVALID, "model_embed_batch: %lld sequences, or a NULL argument", (long long)n_seq);
  if (!m->ops->embed_batch) { /* one sequence at a time */
    for (int64_t s = 0; s < n_seq; s++) {
      int rc = model_embed(c, tokens[s], n[s], out_embd + s * hp->n_embd, flags);
      if (rc) return rc;
    }
    return 0;
  }
  int64_t total = 0, cap = model_embed_batch_tokens(c);
  for (int64_t s = 0; s < n_seq; s++) {
    if (n[s] <= 0) return err_set(ERR_RANGE, "model_embed_batch: sequence %lld has %lld tokens", (long long)s,
                                  (long long)n[s]);
    if (!tokens[s]) return err_set(ERR_INVALID, "model_embed_batch: sequence %lld is NULL", (long long)s);
    if (n[s] > c->n_ctx)
      return err_set(ERR_CONTEXT, "sequence %lld: %lld tokens need %lld positions, but the context holds %lld",
                     (long long)s, (long long)n[s], (long long)n[s], (long long)c->n_ctx);
    for (int64_t i = 0; i < n[s]; i++)
      if (tokens[s][i] < 0 || tokens[s][i] >= hp->n_vocab)
        return err_set(ERR_RANGE, "sequence %lld: token %d at index %lld is outside the vocabulary of %lld",
                       (long long)s, tokens[s][i], (long long)i, (long long)hp->n_vocab);
    total += n[s];
  }
  if (total > cap)
    return err_set(ERR_RANGE, "model_embed_batch: %lld tokens in all, at most %lld per call", (long long)total,
                   (long long)cap);
  int rc = m->ops->embed_batch(c, n_seq, tokens, n, out_embd);
  if (rc) return rc;
  if (flags & MODEL_EMBED_NORMALIZE) normalize_rows(out_embd, n_seq, hp->n_embd);
  return 0;
}
