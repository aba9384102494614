/*
 * whisper_dec.c - the Whisper decoder: token embedding plus learned
 * positions, blocks of causal self-attention over the state's cache,
 * cross-attention over the last encode's keys and values (whisper_enc.c),
 * and the MLP; the final LayerNorm; logits by the token embedding matrix
 * (tied weights: the same rows embed tokens and score them).
 *
 * Shapes (S = n_state, P = n_text_ctx): x [n][S] for the n tokens of the
 * call; the self-attention cache per layer head-major [H][P][hd], position
 * p of head h at (h * P + p) * hd, filled at n_past .. n_past + n - 1 by
 * this call and read at 0 .. n_past + n - 1 (query i sees positions up to
 * n_past + i).
 */
#include <string.h>

#include "base/err.h"
#include "kernels/ops.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"
#include "speech/whisper_int.h"

/* Row r of the token embedding as f32. */
static int tok_row(const wm_lin *tok, int64_t r, float *out) {
  if (tok->packed) return kern_packed_row_f32(tok->packed, r, out);
  size_t rb = 0;
  int rc = tensor_type_row_bytes((uint32_t)tok->type, tok->n_in, &rb);
  if (!rc) rc = ref_dequantize_row((uint32_t)tok->type, (const char *)tok->w + (size_t)r * rb, out, tok->n_in);
  return rc;
}

static int self_attention(whisper_state *s, const wm_attn *at, int l, int64_t n, int64_t n_past) {
  const int64_t S = s->S, P = s->m->hp.n_text_ctx, layer = s->H * P * s->hd;
  float *K = s->self_k + l * layer, *V = s->self_v + l * layer;
  wm_layernorm_rows(s->a, s->x, n, S, at->ln_w, at->ln_b);
  int rc = wm_linear3(s, &at->q, s->q, &at->k, s->k, &at->v, s->v, s->a, n);
  if (rc) return rc;
  wm_to_heads(K, s->k, n, n_past, P, s->H, s->hd);
  wm_to_heads(V, s->v, n, n_past, P, s->H, s->hd);
  wm_attention(s, s->q, n, K, V, P, n_past + n, n_past, s->a);
  if ((rc = wm_linear(s, &at->o, s->a, n, s->o))) return rc;
  ops_add(s->x, s->o, n * S);
  return 0;
}

static int cross_attention(whisper_state *s, const wm_attn *at, int l, int64_t n) {
  const int64_t S = s->S, cap = s->m->hp.n_audio_ctx, layer = s->H * cap * s->hd;
  wm_layernorm_rows(s->a, s->x, n, S, at->ln_w, at->ln_b);
  int rc = wm_linear(s, &at->q, s->a, n, s->q);
  if (rc) return rc;
  wm_attention(s, s->q, n, s->cross_k + l * layer, s->cross_v + l * layer, cap, s->n_ctx, -1, s->a);
  if ((rc = wm_linear(s, &at->o, s->a, n, s->o))) return rc;
  ops_add(s->x, s->o, n * S);
  return 0;
}

int wm_decode(whisper_state *s, const int32_t *toks, int n, int n_past, float *logits, bool all) {
  const whisper_model *m = s->m;
  const int64_t S = s->S;
  for (int i = 0; i < n; i++) {
    float *row = s->x + (int64_t)i * S;
    int rc = tok_row(&m->tok, toks[i], row);
    if (rc) return err_set(rc, "whisper decode: cannot read the embedding of token %d", toks[i]);
    ops_add(row, m->dec_pos + ((int64_t)n_past + i) * S, S);
  }
  int rc = 0;
  for (int l = 0; !rc && l < m->hp.n_text_layer; l++) {
    const wm_block *b = &m->dec[l];
    rc = self_attention(s, &b->attn, l, n, n_past);
    if (!rc) rc = cross_attention(s, &b->cross, l, n);
    if (!rc) rc = wm_mlp(s, b, s->x, n);
  }
  if (rc) return rc;
  const int64_t first = all ? 0 : n - 1, rows = all ? n : 1;
  wm_layernorm_rows(s->a, s->x + first * S, rows, S, m->dec_ln_w, m->dec_ln_b);
  return wm_linear(s, &m->tok, s->a, rows, logits);
}
