/*
 * llama.c - the llama architecture (general.architecture = "llama"): Llama
 * 1/2/3.x, Mistral (dense), TinyLlama, SmolLM and other files converted to
 * the same tensor names.
 *
 * One block, for x[n][n_embd] (n tokens of one forward step):
 *   h   = x + Wo . attention(rope(Wq . rms(x)), rope(Wk . rms(x)), Wv . rms(x))
 *   out = h + Wdown . (silu(Wgate . rms(h)) * (Wup . rms(h)))
 * where rms(v) = v / sqrt(mean(v^2) + eps) * norm_weight, RoPE is the
 * "normal" style (adjacent pairs: the usual converter permutes the q and k
 * rows of Hugging Face checkpoints so that this style reproduces them), and
 * attention is causal with grouped query heads (attn.c). Logits =
 * output . rms(out) with output.weight, or token_embd.weight when the file
 * has no output tensor (tied embeddings).
 *
 * Every matrix product goes through kern_matmul (or kern_matmul_packed)
 * with all n tokens of the step at once (matrix-matrix for a prompt,
 * matrix-vector for one token); Wq, Wk, Wv and Wgate, Wup, which read the
 * same normalized x, run as one pool job each (model_matmul_multi).
 * Each residual add is folded into the RMSNorm that reads its result
 * (ops_add_rmsnorm: x += d and xn = rms(x) in one call, bit-identical to
 * the two), so a layer's input norm is done by the previous layer's end.
 * Buffers are allocated once per context (llama_ctx_init).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/ref.h"
#include "model/model_int.h"

typedef struct llama_layer {
  const float *attn_norm;  /* [n_embd] */
  model_tensor wq;         /* [n_head*head_dim rows][n_embd cols] */
  model_tensor wk;         /* [n_head_kv*head_dim][n_embd] */
  model_tensor wv;         /* [n_head_kv*head_dim][n_embd] */
  model_tensor wo;         /* [n_embd][n_head*head_dim] */
  const float *ffn_norm;   /* [n_embd] */
  model_tensor gate;       /* [n_ff][n_embd] */
  model_tensor up;         /* [n_ff][n_embd] */
  model_tensor down;       /* [n_embd][n_ff] */
} llama_layer;

typedef struct llama_weights {
  model_tensor tok_embd;     /* [n_vocab][n_embd], any supported type */
  llama_layer *layers;       /* [n_layer] */
  const float *output_norm;  /* [n_embd] */
  model_tensor output;       /* [n_vocab][n_embd]; a copy of tok_embd when tied */
  bool tied;
} llama_weights;


static int llama_load(model *m) {
  model_hparams *hp = &m->hp;
  int rc = model_load_common_hparams(m, OPS_ROPE_NORMAL);
  if (rc) return rc;
  const gguf_tensor *te = gguf_find_tensor(m->f, "token_embd.weight");
  if (!te) return err_set(ERR_NOT_FOUND, "tensor 'token_embd.weight' is missing");
  if (te->n_dims != 2 || te->dims[1] > (uint64_t)INT32_MAX)
    return err_set(ERR_RANGE, "tensor 'token_embd.weight' has %u dims and %llu rows, expected 2 dims and < 2^31 rows",
                   te->n_dims, (unsigned long long)te->dims[1]);
  hp->n_vocab = (int64_t)te->dims[1];

  llama_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "llama: out of memory");
  m->arch_data = w;
  w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
  if (!w->layers) return err_set(ERR_NOMEM, "llama: out of memory");

  const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim, F = hp->n_ff;
  /* Tied (no output.weight): token_embd is also the output matrix, read
   * whole every token, so it is copied (and repacked) like the other
   * matrices rather than left in the file mapping; lookups read the copy. */
  const bool tied = gguf_find_tensor(m->f, "output.weight") == NULL;
  if ((rc = model_bind_matrix(m, &w->tok_embd, E, hp->n_vocab, tied ? 0 : MODEL_BIND_ROWS, "token_embd.weight")))
    return rc;
  for (int64_t l = 0; l < hp->n_layer; l++) {
    llama_layer *L = &w->layers[l];
    int i = (int)l;
    if ((rc = model_bind_vector(m, &L->attn_norm, E, 0, "blk.%d.attn_norm.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wq, E, Q, 0, "blk.%d.attn_q.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wk, E, KV, 0, "blk.%d.attn_k.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wv, E, KV, 0, "blk.%d.attn_v.weight", i)) ||
        (rc = model_bind_matrix(m, &L->wo, Q, E, 0, "blk.%d.attn_output.weight", i)) ||
        (rc = model_bind_vector(m, &L->ffn_norm, E, 0, "blk.%d.ffn_norm.weight", i)) ||
        (rc = model_bind_matrix(m, &L->gate, E, F, 0, "blk.%d.ffn_gate.weight", i)) ||
        (rc = model_bind_matrix(m, &L->up, E, F, 0, "blk.%d.ffn_up.weight", i)) ||
        (rc = model_bind_matrix(m, &L->down, F, E, 0, "blk.%d.ffn_down.weight", i)))
      return rc;
  }
  if ((rc = model_bind_vector(m, &w->output_norm, E, 0, "output_norm.weight"))) return rc;
  if ((rc = model_bind_matrix(m, &w->output, E, hp->n_vocab, MODEL_BIND_OPTIONAL, "output.weight"))) return rc;
  if (!w->output.data) {
    w->output = w->tok_embd;
    w->tied = true;
  }
  return 0;
}

static void llama_unload(model *m) {
  llama_weights *w = m->arch_data;
  if (!w) return;
  free(w->layers);
  free(w);
  m->arch_data = NULL;
}

static int llama_ctx_init(model_ctx *c) {
  model_dense_bufs *b = calloc(1, sizeof *b);
  if (!b) return err_set(ERR_NOMEM, "llama context: out of memory");
  c->arch_data = b;
  return model_dense_bufs_init(c, b);
}

static void llama_ctx_free(model_ctx *c) {
  model_dense_bufs_free(c->arch_data);
  free(c->arch_data);
  c->arch_data = NULL;
}

static void llama_ctx_trim(model_ctx *c) { model_dense_bufs_trim(c->arch_data); }

static int llama_forward(model_ctx *c, const model_step *st, float *logits) {
  const int64_t n = st->n;
  const model_hparams *hp = &c->m->hp;
  const llama_weights *w = c->m->arch_data;
  model_dense_bufs *b = c->arch_data;
  const int64_t hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd;
  const int32_t n_rot = hp->rope.n_rot;
  const float scale = 1.0f / sqrtf((float)hd);
  int rc;

  if ((rc = model_dense_embed(c, st, &w->tok_embd, b))) return rc;

  for (int64_t l = 0; l < hp->n_layer; l++) {
    const llama_layer *L = &w->layers[l];
    if (l == 0) model_dense_norm(c, b, n, L->attn_norm); /* later layers': the previous layer's last add */
    const model_tensor *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *const qkv_y[3] = {b->q, b->k, b->v};
    if ((rc = model_matmul_multi(c, 3, qkv, qkv_y, b->xn, n))) return rc;
    model_prof_mark(c, MODEL_PROF_QKV);
    for (int64_t t = 0; t < n; t++) {
      ops_rope_apply_cached(&hp->rope, c->rope_cs + t * n_rot, b->q + t * Q, (int32_t)hp->n_head, (int32_t)hd);
      ops_rope_apply_cached(&hp->rope, c->rope_cs + t * n_rot, b->k + t * KV, (int32_t)hp->n_head_kv, (int32_t)hd);
    }
    model_kv_store(c, l, st, b->k, b->v);
    model_prof_mark(c, MODEL_PROF_ROPE_KV);
    if ((rc = model_attention(c, l, st, b->q, b->att, scale))) return rc;
    model_prof_mark(c, MODEL_PROF_ATTN);
    if ((rc = model_matmul(c, &L->wo, b->att, n, b->xn))) return rc;
    model_prof_mark(c, MODEL_PROF_WO);
    model_dense_add_norm(c, b, n, L->ffn_norm); /* x += Wo . att, xn = rms(x) */
    if ((rc = model_dense_ffn(c, &L->gate, &L->up, &L->down, b, n))) return rc;
    /* x += ffn, xn = the next layer's rms(x) */
    model_dense_add_norm(c, b, n, l + 1 < hp->n_layer ? w->layers[l + 1].attn_norm : NULL);
  }

  if (st->n_out == 0) return 0;
  model_dense_out_norm(c, st, b, w->output_norm);
  rc = model_matmul(c, &w->output, b->xn, st->n_out, logits);
  model_prof_mark(c, MODEL_PROF_LOGITS);
  return rc;
}

const model_arch_ops model_arch_llama = {
    .name = "llama",
    .load = llama_load,
    .unload = llama_unload,
    .ctx_init = llama_ctx_init,
    .ctx_free = llama_ctx_free,
    .forward = llama_forward,
    .trim = llama_ctx_trim,
};
