/*
 * whisper_int.h - what the three files of the Whisper forward pass share
 * (whisper_model.c: weights, states and the shared steps; whisper_enc.c:
 * the conv front end and the encoder; whisper_dec.c: the decoder). Not a
 * public header: speech/whisper_model.h is.
 *
 * Shapes use S = n_state, H = heads, hd = S / H, T = encoder positions of
 * the current encode, P = n_text_ctx. Every activation is f32 and
 * row-major with one row per position or token.
 */
#ifndef PARLEY_SPEECH_WHISPER_INT_H
#define PARLEY_SPEECH_WHISPER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "speech/whisper_model.h"

#define WM_LN_EPS 1e-5f
/* Key positions per attention tile (kern_attn_tile's np). */
#define WM_TILE 128

/* y = W x (+ b): W [n_out][n_in] rows of `type` in aligned memory, or its
 * repacked copy. */
typedef struct wm_lin {
  int type;                 /* enum tensor_type */
  void *w;                  /* [n_out][n_in] rows, 64-byte aligned; NULL when packed */
  kern_packed *packed;      /* or NULL */
  int64_t n_out, n_in;
  const float *b;           /* [n_out] or NULL (the key projections) */
} wm_lin;

/* One attention: its pre-LayerNorm and four projections. */
typedef struct wm_attn {
  const float *ln_w, *ln_b; /* [S] */
  wm_lin q, k, v, o;        /* [S][S]; k without a bias */
} wm_attn;

typedef struct wm_block {
  wm_attn attn;             /* self-attention */
  wm_attn cross;            /* decoder blocks only */
  const float *mlp_ln_w, *mlp_ln_b; /* [S] */
  wm_lin mlp0;              /* [4S][S] + [4S] */
  wm_lin mlp2;              /* [S][4S] + [S] */
} wm_block;

struct whisper_model {
  const whisper_file *file;
  whisper_hparams hp;
  float *f32;               /* every vector and embedding below, one block */
  const float *enc_pos;     /* [n_audio_ctx][S] sinusoids */
  wm_lin conv1;             /* [S][n_mels * 3]: tap k of input c at c * 3 + k */
  wm_lin conv2;             /* [S][S * 3] */
  const float *enc_ln_w, *enc_ln_b; /* ln_post [S] */
  wm_block *enc;            /* [n_audio_layer] */
  const float *dec_pos;     /* [n_text_ctx][S] */
  wm_lin tok;               /* token embedding [n_vocab][S], also the output layer */
  wm_block *dec;            /* [n_text_layer] */
  const float *dec_ln_w, *dec_ln_b; /* [S] */
};

/* Per-thread attention scratch (floats): qt, ot [hd][C]; m, l [C]; st
 * [WM_TILE][C], each part rounded to 16 floats (so 64-byte aligned). */
struct whisper_state {
  const whisper_model *m;
  thread_pool *tp;
  int n_threads;
  int64_t S, H, hd;
  int64_t n_ctx;            /* encoder positions of the last encode; 0: none */
  float *enc_out;           /* [n_audio_ctx][S] */
  float *cross_k, *cross_v; /* [n_text_layer][H][n_audio_ctx][hd] */
  float *self_k, *self_v;   /* [n_text_layer][H][P][hd] */
  /* encoder scratch, for 2 * n_audio_ctx frames */
  float *col;               /* im2col [2 n_audio_ctx][3 max(n_mels, S)] */
  float *h1;                /* conv1 output [2 n_audio_ctx][S] */
  /* shared by both halves, for max(n_audio_ctx, P) rows */
  int64_t n_rows;
  float *x, *a, *q, *k, *v, *o; /* [n_rows][S] */
  float *ff;                /* [n_rows][4S] */
  float *kh, *vh;           /* head-major keys/values of the encoder [H][n_audio_ctx][hd] */
  float *att;               /* [n_threads][att_floats] */
  int64_t att_floats;
};

/* y[n][n_out] = x[n][n_in] W^T + b. */
int wm_linear(whisper_state *s, const wm_lin *l, const float *x, int64_t n, float *y);
/* The same for up to three projections of one x in one pool job. */
int wm_linear3(whisper_state *s, const wm_lin *l0, float *y0, const wm_lin *l1, float *y1, const wm_lin *l2,
               float *y2, const float *x, int64_t n);
/* y[i] = LayerNorm(x[i]) * w + b for n rows of S. */
void wm_layernorm_rows(float *y, const float *x, int64_t n, int64_t S, const float *w, const float *b);
/* x[n][S] (S-strided rows) scattered into head-major dst [H][cap][hd] at
 * positions p0 .. p0 + n - 1. */
void wm_to_heads(float *dst, const float *x, int64_t n, int64_t p0, int64_t cap, int64_t H, int64_t hd);
/* out[n_q][S] = softmax(q k^T / sqrt(hd)) v per head, keys and values
 * head-major [H][cap][hd] with n_kv positions; causal_p0 >= 0: query i sits
 * at position causal_p0 + i and sees keys 0..causal_p0 + i; < 0: every
 * query sees every key. */
void wm_attention(whisper_state *s, const float *q, int64_t n_q, const float *K, const float *V, int64_t cap,
                  int64_t n_kv, int64_t causal_p0, float *out);
/* Exact GELU in place on n floats, split across the pool. */
void wm_gelu(whisper_state *s, float *x, int64_t n);
/* x += mlp(LN(x)) for n rows (a and ff are scratch). */
int wm_mlp(whisper_state *s, const wm_block *b, float *x, int64_t n);

/* whisper_enc.c / whisper_dec.c: the halves. */
int wm_encode(whisper_state *s, const float *mel, int64_t n_frames);
int wm_decode(whisper_state *s, const int32_t *toks, int n, int n_past, float *logits, bool all);

#endif
