/*
 * whisper_enc.c - the Whisper encoder: the convolutional front end, the
 * encoder blocks, ln_post, and the cross-attention keys and values every
 * decoder layer reads from its output (computed here, once per encode).
 *
 * The two convolutions (kernel 3, padding 1; the second with stride 2) are
 * matrix products: the input is unrolled (im2col) into one row of in * 3
 * values per output position, ordered as the weights' rows are (tap k of
 * input channel c at c * 3 + k, the converter's [3, in, out] layout), and
 * multiplied by the weight matrix with kern_matmul, whatever its type.
 * Padding positions are zeros, as torch's Conv1d pads.
 *
 * Shapes (S = n_state): mel [n_mels][n_frames] -> conv1 [n_frames][S] ->
 * conv2 [T][S], T = ceil(n_frames / 2) -> blocks [T][S] -> enc_out [T][S];
 * cross keys and values per layer head-major [H][n_audio_ctx][hd].
 */
#include <string.h>

#include "kernels/ops.h"
#include "speech/whisper_int.h"

/* col[t][c * 3 + k] = in(c, t * stride + k - 1), zero outside 0..n_in-1;
 * in(c, p) = src[c * cs + p * ps] (the mel is channel-major, conv1's output
 * position-major). */
static void im2col(float *col, const float *src, int64_t n_ch, int64_t cs, int64_t ps, int64_t n_in, int64_t n_out,
                   int stride) {
  for (int64_t t = 0; t < n_out; t++) {
    float *row = col + t * n_ch * 3;
    for (int k = 0; k < 3; k++) {
      int64_t p = t * stride + k - 1;
      if (p < 0 || p >= n_in) {
        for (int64_t c = 0; c < n_ch; c++) row[c * 3 + k] = 0.0f;
        continue;
      }
      for (int64_t c = 0; c < n_ch; c++) row[c * 3 + k] = src[c * cs + p * ps];
    }
  }
}

/* x[T][S] = gelu(conv2(gelu(conv1(mel)))) + positions. */
static int front_end(whisper_state *s, const float *mel, int64_t n_frames, int64_t T) {
  const whisper_model *m = s->m;
  const int64_t S = s->S, nm = m->hp.n_mels;
  im2col(s->col, mel, nm, n_frames, 1, n_frames, n_frames, 1);
  int rc = wm_linear(s, &m->conv1, s->col, n_frames, s->h1);
  if (rc) return rc;
  wm_gelu(s, s->h1, n_frames * S);
  im2col(s->col, s->h1, S, 1, S, n_frames, T, 2);
  if ((rc = wm_linear(s, &m->conv2, s->col, T, s->x))) return rc;
  wm_gelu(s, s->x, T * S);
  ops_add(s->x, m->enc_pos, T * S);
  return 0;
}

/* x += out(attn(LN(x))) over all T positions, no mask. */
static int enc_attention(whisper_state *s, const wm_attn *at, int64_t T) {
  const int64_t S = s->S, cap = s->m->hp.n_audio_ctx;
  wm_layernorm_rows(s->a, s->x, T, S, at->ln_w, at->ln_b);
  int rc = wm_linear3(s, &at->q, s->q, &at->k, s->k, &at->v, s->v, s->a, T);
  if (rc) return rc;
  wm_to_heads(s->kh, s->k, T, 0, cap, s->H, s->hd);
  wm_to_heads(s->vh, s->v, T, 0, cap, s->H, s->hd);
  wm_attention(s, s->q, T, s->kh, s->vh, cap, T, -1, s->a);
  if ((rc = wm_linear(s, &at->o, s->a, T, s->o))) return rc;
  ops_add(s->x, s->o, T * S);
  return 0;
}

/* The keys and values of every decoder layer's cross-attention. */
static int cross_kv(whisper_state *s, int64_t T) {
  const whisper_model *m = s->m;
  const int64_t cap = m->hp.n_audio_ctx, layer = s->H * cap * s->hd;
  for (int l = 0; l < m->hp.n_text_layer; l++) {
    const wm_attn *x = &m->dec[l].cross;
    int rc = wm_linear3(s, &x->k, s->k, &x->v, s->v, NULL, NULL, s->enc_out, T);
    if (rc) return rc;
    wm_to_heads(s->cross_k + l * layer, s->k, T, 0, cap, s->H, s->hd);
    wm_to_heads(s->cross_v + l * layer, s->v, T, 0, cap, s->H, s->hd);
  }
  return 0;
}

int wm_encode(whisper_state *s, const float *mel, int64_t n_frames) {
  const whisper_model *m = s->m;
  const int64_t T = (n_frames + 1) / 2;
  int rc = front_end(s, mel, n_frames, T);
  for (int l = 0; !rc && l < m->hp.n_audio_layer; l++) {
    rc = enc_attention(s, &m->enc[l].attn, T);
    if (!rc) rc = wm_mlp(s, &m->enc[l], s->x, T);
  }
  if (rc) return rc;
  wm_layernorm_rows(s->enc_out, s->x, T, s->S, m->enc_ln_w, m->enc_ln_b);
  if ((rc = cross_kv(s, T))) return rc;
  s->n_ctx = T;
  return 0;
}
