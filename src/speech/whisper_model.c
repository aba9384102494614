/*
 * whisper_model.c - the Whisper model's weights and states, and the steps
 * the encoder (whisper_enc.c) and decoder (whisper_dec.c) share: linear
 * layers on kern_matmul, row LayerNorm, GELU over the pool, and attention
 * over head-major keys and values on kern_attn_tile. The network and the
 * contracts are in whisper_model.h; shapes in whisper_int.h.
 *
 * Loading: every vector (biases, norms) and both positional embeddings are
 * decoded to f32 into one block; every matrix is copied out of the
 * mapping into 64-byte aligned memory (the ggml format stores tensors
 * unpadded, so an F16 or Q8_0 row may start at an odd address), then
 * repacked by kern_pack when this CPU has a faster layout for its type.
 *
 * Attention: a task is (head, block of KERN_ATT_COLS query rows); it
 * transposes and scales its queries once and runs kern_attn_tile over
 * WM_TILE positions at a time with an online softmax, so keys and values
 * are read straight from the cache (rows of hd floats per head, the
 * layout kern_attn_tile takes as "rows of positions"). Tasks are dealt to
 * threads by index, so results do not depend on the thread count.
 */
#include "speech/whisper_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/attn.h"
#include "kernels/ops.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"

#define C KERN_ATT_COLS

/* ---- loading ---------------------------------------------------------------- */

typedef struct loader {
  whisper_model *m;
  size_t used, cap; /* floats of m->f32 */
} loader;

/* The tensor called fmt (with block index blk) decoded to f32 into the
 * block; NULL with the error set. */
static const float *load_vec(loader *ld, const char *fmt, int blk) {
  char name[WHISPER_NAME_MAX + 1];
  snprintf(name, sizeof name, fmt, blk);
  const whisper_tensor *t = whisper_file_find(ld->m->file, name);
  if (!t) {
    err_set(ERR_NOT_FOUND, "whisper model: tensor '%s' is missing", name);
    return NULL;
  }
  size_t n = (size_t)t->n_elements;
  if (n > ld->cap - ld->used) {
    err_set(ERR_INTERNAL, "whisper model: vector block too small at '%s'", name);
    return NULL;
  }
  float *dst = ld->m->f32 + ld->used;
  if (ref_dequantize_row(t->type, t->data, dst, (int64_t)n)) {
    err_set(ERR_UNSUPPORTED, "whisper model: tensor '%s' of type %s cannot be decoded", name, tensor_type_name(t->type));
    return NULL;
  }
  ld->used += (n + 15) / 16 * 16;
  return dst;
}

/* Matrix fmt: n_out = its last dim, n_in = the rest (a conv's [3, in, out]
 * is rows of in * 3 taps). bias_fmt NULL: no bias. */
static int load_lin(loader *ld, wm_lin *l, const char *fmt, const char *bias_fmt, int blk) {
  char name[WHISPER_NAME_MAX + 1];
  snprintf(name, sizeof name, fmt, blk);
  const whisper_tensor *t = whisper_file_find(ld->m->file, name);
  if (!t) return err_set(ERR_NOT_FOUND, "whisper model: tensor '%s' is missing", name);
  l->type = (int)t->type;
  l->n_out = t->dims[t->n_dims - 1];
  l->n_in = t->n_elements / l->n_out;
  l->w = kern_weights_alloc((size_t)t->n_bytes ? (size_t)t->n_bytes : 1);
  if (!l->w) return err_set(ERR_NOMEM, "whisper model: out of memory for '%s' (%llu bytes)", name,
                            (unsigned long long)t->n_bytes);
  memcpy(l->w, t->data, (size_t)t->n_bytes);
  int rc = kern_pack(l->type, l->w, l->n_out, l->n_in, &l->packed);
  if (rc) return err_set(rc, "whisper model: cannot repack '%s': %s", name, err_detail());
  if (l->packed) {
    free(l->w);
    l->w = NULL;
  }
  if (bias_fmt && !(l->b = load_vec(ld, bias_fmt, blk))) return err_last();
  return 0;
}

static void free_lin(wm_lin *l) {
  free(l->w);
  kern_packed_free(l->packed);
}

static int load_attn(loader *ld, wm_attn *a, const char *pfx, int blk) {
  char lw[128], lb[128], w[4][140], b[4][140];
  static const char *const proj[4] = {"query", "key", "value", "out"};
  snprintf(lw, sizeof lw, "%s_ln.weight", pfx);
  snprintf(lb, sizeof lb, "%s_ln.bias", pfx);
  for (int i = 0; i < 4; i++) {
    snprintf(w[i], sizeof w[i], "%s.%s.weight", pfx, proj[i]);
    snprintf(b[i], sizeof b[i], "%s.%s.bias", pfx, proj[i]);
  }
  if (!(a->ln_w = load_vec(ld, lw, blk)) || !(a->ln_b = load_vec(ld, lb, blk))) return err_last();
  int rc = load_lin(ld, &a->q, w[0], b[0], blk);
  if (!rc) rc = load_lin(ld, &a->k, w[1], NULL, blk); /* Whisper's key projection has no bias */
  if (!rc) rc = load_lin(ld, &a->v, w[2], b[2], blk);
  if (!rc) rc = load_lin(ld, &a->o, w[3], b[3], blk);
  return rc;
}

static int load_block(loader *ld, wm_block *b, const char *pfx, int blk, bool cross) {
  char a[64], x[64], lw[64], lb[64], m0[64], m0b[64], m2[64], m2b[64];
  snprintf(a, sizeof a, "%s.%%d.attn", pfx);
  snprintf(x, sizeof x, "%s.%%d.cross_attn", pfx);
  snprintf(lw, sizeof lw, "%s.%%d.mlp_ln.weight", pfx);
  snprintf(lb, sizeof lb, "%s.%%d.mlp_ln.bias", pfx);
  snprintf(m0, sizeof m0, "%s.%%d.mlp.0.weight", pfx);
  snprintf(m0b, sizeof m0b, "%s.%%d.mlp.0.bias", pfx);
  snprintf(m2, sizeof m2, "%s.%%d.mlp.2.weight", pfx);
  snprintf(m2b, sizeof m2b, "%s.%%d.mlp.2.bias", pfx);
  int rc = load_attn(ld, &b->attn, a, blk);
  if (!rc && cross) rc = load_attn(ld, &b->cross, x, blk);
  if (rc) return rc;
  if (!(b->mlp_ln_w = load_vec(ld, lw, blk)) || !(b->mlp_ln_b = load_vec(ld, lb, blk))) return err_last();
  rc = load_lin(ld, &b->mlp0, m0, m0b, blk);
  if (!rc) rc = load_lin(ld, &b->mlp2, m2, m2b, blk);
  return rc;
}

static void free_block(wm_block *b) {
  wm_lin *l[] = {&b->attn.q, &b->attn.k, &b->attn.v, &b->attn.o, &b->cross.q, &b->cross.k,
                 &b->cross.v, &b->cross.o, &b->mlp0, &b->mlp2};
  for (size_t i = 0; i < sizeof l / sizeof l[0]; i++) free_lin(l[i]);
}

int whisper_model_new(const whisper_file *f, whisper_model **out) {
  *out = NULL;
  whisper_model *m = calloc(1, sizeof *m);
  if (!m) return err_set(ERR_NOMEM, "whisper model: out of memory");
  m->file = f;
  m->hp = *whisper_file_hparams(f);
  const whisper_hparams *h = &m->hp;
  if (h->n_text_head != h->n_audio_head) {
    /* one head split serves both halves; released models always agree */
    int rc = err_set(ERR_UNSUPPORTED, "whisper model: n_text_head %d differs from n_audio_head %d", h->n_text_head,
                     h->n_audio_head);
    free(m);
    return rc;
  }
  const size_t S = (size_t)h->n_audio_state, pad = 16;
  /* vectors: per encoder block 13 S (two norms, q/v/out biases, mlp
   * biases 4S + S), per decoder block 5 S more for the cross-attention;
   * each vector is rounded up to 16 floats. */
  size_t cap = (size_t)h->n_audio_ctx * S + (size_t)h->n_text_ctx * S + 6 * (S + pad) +
               (size_t)h->n_audio_layer * 13 * (S + pad) + (size_t)h->n_text_layer * 18 * (S + pad) + pad;
  m->f32 = malloc(cap * sizeof *m->f32);
  m->enc = calloc((size_t)h->n_audio_layer, sizeof *m->enc);
  m->dec = calloc((size_t)h->n_text_layer, sizeof *m->dec);
  if (!m->f32 || !m->enc || !m->dec) {
    whisper_model_free(m);
    return err_set(ERR_NOMEM, "whisper model: out of memory");
  }
  loader ld = {m, 0, cap};
  int rc = 0;
  if (!(m->enc_pos = load_vec(&ld, "encoder.positional_embedding", 0)) ||
      !(m->dec_pos = load_vec(&ld, "decoder.positional_embedding", 0)) ||
      !(m->enc_ln_w = load_vec(&ld, "encoder.ln_post.weight", 0)) ||
      !(m->enc_ln_b = load_vec(&ld, "encoder.ln_post.bias", 0)) ||
      !(m->dec_ln_w = load_vec(&ld, "decoder.ln.weight", 0)) || !(m->dec_ln_b = load_vec(&ld, "decoder.ln.bias", 0)))
    rc = err_last();
  if (!rc) rc = load_lin(&ld, &m->conv1, "encoder.conv1.weight", "encoder.conv1.bias", 0);
  if (!rc) rc = load_lin(&ld, &m->conv2, "encoder.conv2.weight", "encoder.conv2.bias", 0);
  if (!rc) rc = load_lin(&ld, &m->tok, "decoder.token_embedding.weight", NULL, 0);
  for (int i = 0; !rc && i < h->n_audio_layer; i++) rc = load_block(&ld, &m->enc[i], "encoder.blocks", i, false);
  for (int i = 0; !rc && i < h->n_text_layer; i++) rc = load_block(&ld, &m->dec[i], "decoder.blocks", i, true);
  if (rc) {
    whisper_model_free(m);
    return rc;
  }
  *out = m;
  return 0;
}

void whisper_model_free(whisper_model *m) {
  if (!m) return;
  for (int i = 0; m->enc && i < m->hp.n_audio_layer; i++) free_block(&m->enc[i]);
  for (int i = 0; m->dec && i < m->hp.n_text_layer; i++) free_block(&m->dec[i]);
  free_lin(&m->conv1);
  free_lin(&m->conv2);
  free_lin(&m->tok);
  free(m->enc);
  free(m->dec);
  free(m->f32);
  free(m);
}

const whisper_hparams *whisper_model_hparams(const whisper_model *m) { return &m->hp; }

/* ---- states ------------------------------------------------------------------ */

static float *falloc(size_t n) {
  /* 64-byte aligned zeroed floats (attention scratch must be 32-aligned) */
  size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
  float *p = aligned_alloc(64, bytes ? bytes : 64);
  if (p) memset(p, 0, bytes);
  return p;
}

int whisper_state_new(const whisper_model *m, thread_pool *tp, whisper_state **out) {
  *out = NULL;
  whisper_state *s = calloc(1, sizeof *s);
  if (!s) return err_set(ERR_NOMEM, "whisper state: out of memory");
  const whisper_hparams *h = &m->hp;
  s->m = m;
  s->tp = tp;
  s->n_threads = tp ? tpool_n_threads(tp) : 1;
  s->S = h->n_audio_state;
  s->H = h->n_audio_head;
  s->hd = s->S / s->H;
  const size_t S = (size_t)s->S, actx = (size_t)h->n_audio_ctx, P = (size_t)h->n_text_ctx;
  const size_t Ld = (size_t)h->n_text_layer, wide = (size_t)(h->n_mels > h->n_audio_state ? h->n_mels : h->n_audio_state);
  s->n_rows = (int64_t)(actx > P ? actx : P);
  const size_t R = (size_t)s->n_rows;
  size_t hd16 = ((size_t)s->hd * C + 15) / 16 * 16;
  s->att_floats = (int64_t)(2 * hd16 + 2 * 16 + (size_t)WM_TILE * C);
  s->enc_out = falloc(actx * S);
  s->cross_k = falloc(Ld * actx * S);
  s->cross_v = falloc(Ld * actx * S);
  s->self_k = falloc(Ld * P * S);
  s->self_v = falloc(Ld * P * S);
  s->col = falloc(2 * actx * 3 * wide);
  s->h1 = falloc(2 * actx * S);
  s->x = falloc(R * S);
  s->a = falloc(R * S);
  s->q = falloc(R * S);
  s->k = falloc(R * S);
  s->v = falloc(R * S);
  s->o = falloc(R * S);
  s->ff = falloc(R * 4 * S);
  s->kh = falloc(actx * S);
  s->vh = falloc(actx * S);
  s->att = falloc((size_t)s->n_threads * (size_t)s->att_floats);
  float *all[] = {s->enc_out, s->cross_k, s->cross_v, s->self_k, s->self_v, s->col, s->h1, s->x, s->a,
                  s->q, s->k, s->v, s->o, s->ff, s->kh, s->vh, s->att};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (!all[i]) {
      whisper_state_free(s);
      return err_set(ERR_NOMEM, "whisper state: out of memory");
    }
  *out = s;
  return 0;
}

void whisper_state_free(whisper_state *s) {
  if (!s) return;
  float *all[] = {s->enc_out, s->cross_k, s->cross_v, s->self_k, s->self_v, s->col, s->h1, s->x, s->a,
                  s->q, s->k, s->v, s->o, s->ff, s->kh, s->vh, s->att};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
  free(s);
}

int whisper_encode(whisper_state *s, const float *mel, int64_t n_frames) {
  s->n_ctx = 0;
  if (!mel) return err_set(ERR_INVALID, "whisper encode: no mel input");
  if (n_frames < 1) return err_set(ERR_RANGE, "whisper encode: %lld mel frames (no audio)", (long long)n_frames);
  int64_t max = 2 * (int64_t)s->m->hp.n_audio_ctx;
  if (n_frames > max)
    return err_set(ERR_TOO_LARGE, "whisper encode: %lld mel frames is more than the model's window of %lld (%.1f s)",
                   (long long)n_frames, (long long)max, (double)max / 100.0);
  tpool_hold_begin(s->tp);
  int rc = wm_encode(s, mel, n_frames);
  tpool_hold_end(s->tp);
  if (rc) s->n_ctx = 0;
  return rc;
}

const float *whisper_encoder_output(const whisper_state *s, int64_t *n_ctx) {
  if (n_ctx) *n_ctx = s->n_ctx;
  return s->n_ctx ? s->enc_out : NULL;
}

int whisper_decode(whisper_state *s, const int32_t *toks, int n, int n_past, float *logits, enum whisper_logits which) {
  const whisper_hparams *h = &s->m->hp;
  if (!s->n_ctx) return err_set(ERR_INVALID, "whisper decode: no encoder output (encode first)");
  if (!toks || !logits || n < 1 || n_past < 0)
    return err_set(ERR_INVALID, "whisper decode: bad arguments (%d tokens after %d)", n, n_past);
  if ((int64_t)n_past + n > h->n_text_ctx)
    return err_set(ERR_CONTEXT, "whisper decode: %d tokens after %d exceed the text context of %d", n, n_past,
                   h->n_text_ctx);
  for (int i = 0; i < n; i++)
    if (toks[i] < 0 || toks[i] >= h->n_vocab)
      return err_set(ERR_RANGE, "whisper decode: token %d is %d, outside 0..%d", i, toks[i], h->n_vocab - 1);
  tpool_hold_begin(s->tp);
  int rc = wm_decode(s, toks, n, n_past, logits, which == WHISPER_LOGITS_ALL);
  tpool_hold_end(s->tp);
  return rc;
}

/* ---- shared steps ---------------------------------------------------------- */

static void add_bias(float *y, const float *b, int64_t n, int64_t n_out) {
  if (!b) return;
  for (int64_t t = 0; t < n; t++) ops_add(y + t * n_out, b, n_out);
}

int wm_linear(whisper_state *s, const wm_lin *l, const float *x, int64_t n, float *y) {
  int rc = l->packed ? kern_matmul_packed(s->tp, l->packed, x, n, y)
                     : kern_matmul(s->tp, l->type, l->w, l->n_out, l->n_in, x, n, y);
  if (rc) return rc;
  add_bias(y, l->b, n, l->n_out);
  return 0;
}

int wm_linear3(whisper_state *s, const wm_lin *l0, float *y0, const wm_lin *l1, float *y1, const wm_lin *l2,
               float *y2, const float *x, int64_t n) {
  const wm_lin *l[3] = {l0, l1, l2};
  float *y[3] = {y0, y1, y2};
  kern_mm_part parts[3];
  int np = 0;
  for (int i = 0; i < 3; i++) {
    if (!l[i]) continue;
    parts[np] = (kern_mm_part){l[i]->packed, l[i]->type, l[i]->w, l[i]->n_out, y[i]};
    np++;
  }
  int rc = kern_matmul_multi(s->tp, parts, np, l0->n_in, x, n);
  if (rc) return rc;
  for (int i = 0; i < 3; i++)
    if (l[i]) add_bias(y[i], l[i]->b, n, l[i]->n_out);
  return 0;
}

void wm_layernorm_rows(float *y, const float *x, int64_t n, int64_t S, const float *w, const float *b) {
  for (int64_t t = 0; t < n; t++) ops_layernorm(y + t * S, x + t * S, w, b, S, WM_LN_EPS);
}

void wm_to_heads(float *dst, const float *x, int64_t n, int64_t p0, int64_t cap, int64_t H, int64_t hd) {
  for (int64_t t = 0; t < n; t++)
    for (int64_t h = 0; h < H; h++)
      memcpy(dst + (h * cap + p0 + t) * hd, x + t * H * hd + h * hd, (size_t)hd * sizeof *dst);
}

struct gelu_job {
  float *x;
  int64_t n;
};

static void gelu_task(void *ctx, int ith, int nth) {
  struct gelu_job *j = ctx;
  int64_t per = (j->n + nth - 1) / nth, lo = per * ith, hi = lo + per < j->n ? lo + per : j->n;
  if (lo < hi) ops_gelu_erf(j->x + lo, hi - lo);
}

/* Elementwise, so the split never changes a value. */
void wm_gelu(whisper_state *s, float *x, int64_t n) {
  struct gelu_job j = {x, n};
  if (n < 4096) gelu_task(&j, 0, 1);
  else tpool_run(s->tp, gelu_task, &j);
}

int wm_mlp(whisper_state *s, const wm_block *b, float *x, int64_t n) {
  wm_layernorm_rows(s->a, x, n, s->S, b->mlp_ln_w, b->mlp_ln_b);
  int rc = wm_linear(s, &b->mlp0, s->a, n, s->ff);
  if (rc) return rc;
  wm_gelu(s, s->ff, n * 4 * s->S);
  if ((rc = wm_linear(s, &b->mlp2, s->ff, n, s->o))) return rc;
  ops_add(x, s->o, n * s->S);
  return 0;
}


struct att_job {
  whisper_state *s;
  const float *q, *K, *V;
  int64_t n_q, cap, n_kv, p0, n_blk;
  float *out;
};

static void att_task(void *ctx, int ith, int nth) {
  const struct att_job *j = ctx;
  const whisper_state *s = j->s;
  const int64_t hd = s->hd, S = s->S, hd16 = (hd * C + 15) / 16 * 16;
  float *qt = s->att + (size_t)ith * (size_t)s->att_floats, *ot = qt + hd16, *mx = ot + hd16, *l = mx + 16,
        *st = l + 16;
  const float scale = 1.0f / sqrtf((float)hd);
  int32_t lim[C];
  const int64_t n_tasks = s->H * j->n_blk;
  for (int64_t task = ith; task < n_tasks; task += nth) {
    const int64_t h = task / j->n_blk, i0 = (task % j->n_blk) * C;
    const int64_t nc = j->n_q - i0 < C ? j->n_q - i0 : C;
    for (int64_t d = 0; d < hd; d++)
      for (int64_t i = 0; i < C; i++) qt[d * C + i] = i < nc ? j->q[(i0 + i) * S + h * hd + d] * scale : 0.0f;
    memset(ot, 0, (size_t)(hd * C) * sizeof *ot);
    for (int i = 0; i < C; i++) mx[i] = KERN_ATT_M0, l[i] = 0.0f;
    int64_t end = j->n_kv;
    if (j->p0 >= 0 && j->p0 + i0 + nc < end) end = j->p0 + i0 + nc;
    const float *Kh = j->K + h * j->cap * hd, *Vh = j->V + h * j->cap * hd;
    for (int64_t t0 = 0; t0 < end; t0 += WM_TILE) {
      const int64_t np = end - t0 < WM_TILE ? end - t0 : WM_TILE;
      for (int64_t i = 0; i < C; i++)
        lim[i] = i >= nc ? 0 : j->p0 < 0 ? (int32_t)np : (int32_t)(j->p0 + i0 + i + 1 - t0);
      kern_attn_tile(qt, Kh + t0 * hd, Vh + t0 * hd, 1, hd, np, hd, lim, mx, l, ot, st, NULL);
    }
    for (int64_t i = 0; i < nc; i++) {
      float *o = j->out + (i0 + i) * S + h * hd;
      for (int64_t d = 0; d < hd; d++) o[d] = ot[d * C + i] / l[i];
    }
  }
}

void wm_attention(whisper_state *s, const float *q, int64_t n_q, const float *K, const float *V, int64_t cap,
                  int64_t n_kv, int64_t causal_p0, float *out) {
  struct att_job j = {s, q, K, V, n_q, cap, n_kv, causal_p0, (n_q + C - 1) / C, out};
  tpool_run(s->tp, att_task, &j);
}
