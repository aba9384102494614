/*
 * testgen.c - random-weight llama GGUF files (see testgen.h).
 *
 * Every tensor is generated in f32 from one xorshift64* stream (seeded from
 * g->seed, tensors in file order, so a seed names a model), then converted
 * to its type with the reference quantizer. The writer borrows tensor data
 * until the file is written, so all buffers live until the end.
 */
#include "model/testgen.h"
#include "model/testgen_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "gguf/gguf.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"

model_testgen model_testgen_small(void) {
  model_testgen g;
  memset(&g, 0, sizeof g);
  g.n_embd = 64;
  g.n_layer = 2;
  g.n_head = 4;
  g.n_head_kv = 2;
  g.n_ff = 160;
  g.n_vocab = 300;
  g.n_ctx = 128;
  g.type = g.type_embd = g.type_output = g.type_ffn_down = TENSOR_TYPE_F32;
  g.seed = 1;
  return g;
}

model_testgen model_testgen_tinyllama(uint32_t t) {
  model_testgen g = model_testgen_small();
  g.n_embd = 2048;
  g.n_layer = 22;
  g.n_head = 32;
  g.n_head_kv = 4;
  g.n_ff = 5632;
  g.n_vocab = 32000;
  g.n_ctx = 2048;
  g.type = g.type_embd = g.type_output = g.type_ffn_down = t;
  if (t == TENSOR_TYPE_Q4_K) g.type_output = g.type_ffn_down = TENSOR_TYPE_Q6_K;
  return g;
}

int testgen_gen_init(testgen_gen *s, uint64_t seed, uint64_t salt) {
  memset(s, 0, sizeof *s);
  s->rng = seed * 0x9e3779b97f4a7c15ull + salt;
  if (!s->rng) s->rng = 1;
  return gguf_writer_new(&s->w);
}

int testgen_gen_finish(testgen_gen *s, const char *path) {
  int rc = path ? gguf_writer_write_file(s->w, path) : 0;
  gguf_writer_free(s->w);
  for (size_t i = 0; i < s->n_bufs; i++) free(s->bufs[i]);
  free(s->bufs);
  memset(s, 0, sizeof *s);
  return rc;
}

static float gen_uniform(testgen_gen *s) { /* in [-1, 1) */
  s->rng ^= s->rng >> 12;
  s->rng ^= s->rng << 25;
  s->rng ^= s->rng >> 27;
  uint64_t r = s->rng * 0x2545f4914f6cdd1dull;
  return (float)((double)(r >> 11) * 0x1.0p-52 - 1.0);
}

static int keep(testgen_gen *s, void *p) {
  if (s->n_bufs == s->cap_bufs) {
    size_t cap = s->cap_bufs ? s->cap_bufs * 2 : 64;
    void **b = realloc(s->bufs, cap * sizeof *b);
    if (!b) return ERR_NOMEM;
    s->bufs = b;
    s->cap_bufs = cap;
  }
  s->bufs[s->n_bufs++] = p;
  return 0;
}

int testgen_add_tensor(testgen_gen *s, const char *name, uint32_t type, int64_t n_cols, int64_t n_rows, float center,
                       float amp) {
  return testgen_add_tensor3(s, name, type, n_cols, n_rows, 0, center, amp);
}

int testgen_add_tensor3(testgen_gen *s, const char *name, uint32_t type, int64_t n_cols, int64_t n_rows,
                        int64_t n_mat, float center, float amp) {
  if (s->missing && strcmp(s->missing, name) == 0) return 0; /* for load-error tests */
  if (s->bad && strcmp(s->bad, name) == 0) { /* a deliberately wrong shape, for load-error tests */
    if (n_mat) n_mat++;
    else if (n_rows) n_rows++;
    else n_cols++;
  }
  int64_t rows = (n_rows ? n_rows : 1) * (n_mat ? n_mat : 1);
  size_t n = 0, row_bytes = 0, bytes = 0;
  if (!size_mul((size_t)n_cols, (size_t)rows, &n)) return err_set(ERR_TOO_LARGE, "testgen: '%s' too large", name);
  int rc = tensor_type_row_bytes(type, n_cols, &row_bytes);
  if (rc)
    return err_set(rc, "testgen: tensor '%s': rows of %lld do not fit type %s", name, (long long)n_cols,
                   tensor_type_name(type));
  const struct tensor_type_traits *tt = tensor_type_get(type);
  if (!tt || !tt->supported) return err_set(ERR_UNSUPPORTED, "testgen: type %s cannot be written", tensor_type_name(type));
  bytes = row_bytes * (size_t)rows;
  float *f = malloc(n * sizeof *f);
  void *q = type == TENSOR_TYPE_F32 ? (void *)f : malloc(bytes);
  if (!f || !q) {
    free(f);
    if (q != f) free(q);
    return err_set(ERR_NOMEM, "testgen: out of memory for '%s'", name);
  }
  for (size_t i = 0; i < n; i++) f[i] = center + amp * gen_uniform(s);
  if (q != f) {
    for (int64_t r = 0; r < rows; r++)
      ref_quantize_row(type, f + (size_t)r * (size_t)n_cols, (uint8_t *)q + (size_t)r * row_bytes, n_cols);
    free(f);
  }
  if (keep(s, q)) {
    free(q);
    return err_set(ERR_NOMEM, "testgen: out of memory");
  }
  uint64_t dims[3] = {(uint64_t)n_cols, (uint64_t)(n_rows ? n_rows : 1), (uint64_t)n_mat};
  return gguf_writer_add_tensor(s->w, name, type, n_mat ? 3 : n_rows ? 2 : 1, dims, q, bytes);
}

/* Appends v's on-disk encoding (the bytes after its type tag) to b. */
static int enc_value(buf *b, const gguf_value *v) {
  int rc = 0;
  switch (v->type) {
    case GGUF_TYPE_STRING:
      return gguf_enc_str(b, v->v.str.data, v->v.str.len);
    case GGUF_TYPE_ARRAY: {
      if ((rc = gguf_enc_arr_header(b, v->v.arr.elem_type, v->v.arr.n))) return rc;
      if (v->v.arr.elem_type == GGUF_TYPE_STRING) {
        for (uint64_t i = 0; !rc && i < v->v.arr.n; i++)
          rc = gguf_enc_str(b, v->v.arr.strs[i].data, v->v.arr.strs[i].len);
        return rc;
      }
      if (v->v.arr.elem_type == GGUF_TYPE_ARRAY) {
        for (uint64_t i = 0; !rc && i < v->v.arr.n; i++) rc = enc_value(b, &v->v.arr.items[i]);
        return rc;
      }
      size_t es = gguf_type_size(v->v.arr.elem_type), n;
      if (!es || !size_mul(es, (size_t)v->v.arr.n, &n)) return err_set(ERR_RANGE, "testgen: bad array in vocab");
      return buf_append(b, v->v.arr.raw, n);
    }
    case GGUF_TYPE_FLOAT32: {
      float f = (float)v->v.f64;
      return buf_append(b, &f, 4);
    }
    case GGUF_TYPE_FLOAT64:
      return buf_append(b, &v->v.f64, 8);
    default: {
      size_t es = gguf_type_size(v->type);
      if (!es || es > 8) return err_set(ERR_RANGE, "testgen: bad value type %d in vocab", (int)v->type);
      uint64_t u = v->v.u64; /* little-endian host: the low bytes are the value */
      return buf_append(b, &u, es);
    }
  }
}

/* Copies every tokenizer.* key of the vocabulary file (but the chat template
 * when one is given) and reports its token count. */
int model_testgen_copy_vocab(gguf_writer *w, const char *vocab_path, bool skip_template, int64_t *n_vocab) {
  gguf_file *f = NULL;
  int rc = gguf_open(vocab_path, &f);
  if (rc) return err_set(rc, "testgen: vocabulary '%s': %s", vocab_path, err_detail());
  const gguf_value *toks = NULL;
  if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks)) {
    gguf_close(f);
    return err_set(ERR_NOT_FOUND, "testgen: '%s' has no tokenizer.ggml.tokens", vocab_path);
  }
  *n_vocab = (int64_t)toks->v.arr.n;
  buf b = BUF_INIT;
  for (size_t i = 0; !rc && i < gguf_n_kv(f); i++) {
    const gguf_kv *kv = gguf_kv_at(f, i);
    if (strncmp(kv->key, "tokenizer.", 10) != 0) continue;
    if (skip_template && strncmp(kv->key, "tokenizer.chat_template", 23) == 0) continue;
    buf_reset(&b);
    if (!(rc = enc_value(&b, &kv->value))) rc = gguf_writer_add_raw(w, kv->key, kv->value.type, b.data, b.len);
  }
  buf_free(&b);
  gguf_close(f);
  return rc;
}

int model_testgen_mark_no_vocab(gguf_writer *w, const char *arch, int64_t n_vocab) {
  char key[96];
  snprintf(key, sizeof key, "%s.vocab_size", arch);
  int rc = gguf_writer_add_str(w, "tokenizer.ggml.model", "none");
  return rc ? rc : gguf_writer_add_u32(w, key, (uint32_t)n_vocab);
}

int model_testgen_write(const model_testgen *g_in, const char *path) {
  model_testgen g_copy = *g_in;
  const model_testgen *g = &g_copy;
  if (g->n_embd <= 0 || g->n_layer <= 0 || g->n_head <= 0 || g->n_head_kv <= 0 || g->n_ff <= 0 || g->n_vocab <= 0 ||
      g->n_ctx <= 0 || g->n_embd % g->n_head || g->n_head % g->n_head_kv)
    return err_set(ERR_RANGE, "testgen: inconsistent shape");
  testgen_gen s;
  int rc = testgen_gen_init(&s, g->seed, 0x1234567ull);
  if (rc) return rc;
  const int64_t E = g->n_embd, hd = E / g->n_head, Q = g->n_head * hd, KV = g->n_head_kv * hd, F = g->n_ff;
  const int64_t n_rot = g->n_rot ? g->n_rot : hd;
  char name[96];
#define CK(x) \
  if ((rc = (x))) goto done
  CK(gguf_writer_add_str(s.w, "general.architecture", "llama"));
  CK(gguf_writer_add_str(s.w, "general.name", g->name ? g->name : "parley random llama"));
  if (g->vocab_path) {
    CK(model_testgen_copy_vocab(s.w, g->vocab_path, g->chat_template != NULL, &g_copy.n_vocab));
  } else {
    CK(model_testgen_mark_no_vocab(s.w, "llama", g->n_vocab));
  }
  if (g->chat_template) CK(gguf_writer_add_str(s.w, "tokenizer.chat_template", g->chat_template));
  CK(gguf_writer_add_u32(s.w, "llama.context_length", (uint32_t)g->n_ctx));
  CK(gguf_writer_add_u32(s.w, "llama.embedding_length", (uint32_t)E));
  CK(gguf_writer_add_u32(s.w, "llama.block_count", (uint32_t)g->n_layer));
  CK(gguf_writer_add_u32(s.w, "llama.feed_forward_length", (uint32_t)F));
  CK(gguf_writer_add_u32(s.w, "llama.attention.head_count", (uint32_t)g->n_head));
  CK(gguf_writer_add_u32(s.w, "llama.attention.head_count_kv", (uint32_t)g->n_head_kv));
  CK(gguf_writer_add_u32(s.w, "llama.rope.dimension_count", (uint32_t)n_rot));
  CK(gguf_writer_add_f32(s.w, "llama.attention.layer_norm_rms_epsilon", g->norm_eps > 0 ? g->norm_eps : 1e-5f));
  if (g->rope_freq_base > 0) CK(gguf_writer_add_f32(s.w, "llama.rope.freq_base", g->rope_freq_base));
  if (g->rope_scale_linear > 0) {
    CK(gguf_writer_add_str(s.w, "llama.rope.scaling.type", "linear"));
    CK(gguf_writer_add_f32(s.w, "llama.rope.scaling.factor", g->rope_scale_linear));
  }

  const float a_embd = g->tied ? 3.0f * sqrtf(3.0f / (float)E) : sqrtf(3.0f);
  const float a_out = 3.0f * sqrtf(3.0f / (float)E);
  CK(testgen_add_tensor(&s, "token_embd.weight", g->type_embd, E, g->n_vocab, 0.0f, a_embd));
  if (g->rope_freqs) /* Llama 3 style: divisors growing from 1 to 8 */
    CK(testgen_add_tensor(&s, "rope_freqs.weight", TENSOR_TYPE_F32, n_rot / 2, 0, 4.5f, 3.5f));
  for (int64_t l = 0; l < g->n_layer; l++) {
    int i = (int)l;
#define T(fmt, type, cols, rows, c, a)          \
  snprintf(name, sizeof name, fmt, i);          \
  CK(testgen_add_tensor(&s, name, type, cols, rows, c, a))
    T("blk.%d.attn_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
    T("blk.%d.attn_q.weight", g->type, E, Q, 0.0f, sqrtf(3.0f / (float)E));
    T("blk.%d.attn_k.weight", g->type, E, KV, 0.0f, sqrtf(3.0f / (float)E));
    T("blk.%d.attn_v.weight", g->type_ffn_down, E, KV, 0.0f, sqrtf(3.0f / (float)E));
    T("blk.%d.attn_output.weight", g->type, Q, E, 0.0f, sqrtf(3.0f / (float)Q));
    T("blk.%d.ffn_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
    T("blk.%d.ffn_gate.weight", g->type, E, F, 0.0f, sqrtf(3.0f / (float)E));
    T("blk.%d.ffn_up.weight", g->type, E, F, 0.0f, sqrtf(3.0f / (float)E));
    T("blk.%d.ffn_down.weight", g->type_ffn_down, F, E, 0.0f, sqrtf(3.0f / (float)F));
#undef T
  }
  CK(testgen_add_tensor(&s, "output_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f));
  if (!g->tied) CK(testgen_add_tensor(&s, "output.weight", g->type_output, E, g->n_vocab, 0.0f, a_out));
#undef CK
  return testgen_gen_finish(&s, path);
done:
  testgen_gen_finish(&s, NULL);
  return rc;
}
