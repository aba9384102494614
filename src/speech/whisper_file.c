/*
 * whisper_file.c - the whisper.cpp ggml model reader (layout and error
 * codes in whisper_file.h).
 *
 * One pass with a bounds-checked cursor (rd_*): header, hyper-parameters,
 * filter bank, vocabulary, then tensor headers until the end of the file,
 * each size checked against the bytes that remain and each product for
 * overflow before anything is allocated. Then the table of the tensors a
 * whisper model needs (wf_need below: names as whisper.cpp's converter
 * writes them, shapes from the hyper-parameters) is checked against what
 * the file holds. Lookup by name is a linear scan at open (files hold a few
 * hundred tensors): a name-sorted index, binary-searched.
 */
#include "speech/whisper_file.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"
#include "kernels/tensor_type.h"

/* Largest value any hyper-parameter may take: large-v3's biggest is
 * n_vocab 51866; this leaves room for other vocabularies and contexts but
 * keeps every product of two of them inside 64 bits. */
#define WF_HPARAM_MAX (1 << 20)
#define WF_LAYER_MAX 256
#define WF_QNT_FACTOR 1000

struct whisper_file {
  const uint8_t *base;
  size_t size;
  bool mapped;
  whisper_hparams hp;
  float *filters;           /* [n_mels][WHISPER_N_FREQ] */
  size_t n_tokens;
  uint64_t *tok_off;        /* [n_tokens] offset of each token's bytes */
  uint32_t *tok_len;        /* [n_tokens] */
  whisper_tensor *tensors;
  size_t n_tensors, cap_tensors;
  size_t *by_name;          /* [n_tensors] indices sorted by name */
};

/* ---- cursor --------------------------------------------------------------- */

typedef struct rd {
  const uint8_t *p;
  size_t pos, size;
} rd;

static size_t rd_left(const rd *r) { return r->size - r->pos; }

static int rd_u32(rd *r, uint32_t *out, const char *what) {
  if (rd_left(r) < 4)
    return err_set(ERR_CORRUPT, "whisper file: %s at offset %zu: truncated (4 bytes needed, %zu left)", what, r->pos,
                   rd_left(r));
  const uint8_t *b = r->p + r->pos;
  *out = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
  r->pos += 4;
  return 0;
}

static int rd_i32(rd *r, int32_t *out, const char *what) {
  uint32_t u = 0;
  int rc = rd_u32(r, &u, what);
  memcpy(out, &u, sizeof u);
  return rc;
}

/* ---- header, filters, vocabulary ---------------------------------------- */

/* ggml ftypes whisper.cpp files use: all F32, mostly F16, Q4_0, Q4_1,
 * Q4_1 with some F16, Q8_0, Q5_0, Q5_1. */
static bool ftype_known(int32_t ft) { return (ft >= 0 && ft <= 4) || (ft >= 7 && ft <= 9); }

static int parse_hparams(whisper_file *f, rd *r) {
  uint32_t magic = 0;
  int rc = rd_u32(r, &magic, "magic");
  if (rc) return err_set(ERR_PARSE, "whisper file: not a whisper ggml file (%zu bytes)", r->size);
  if (magic != WHISPER_FILE_MAGIC)
    return err_set(ERR_PARSE, "whisper file: not a whisper ggml file (magic 0x%08x, expected 0x%08x)", magic,
                   WHISPER_FILE_MAGIC);
  static const struct {
    const char *name;
    size_t off;
    int32_t max;
  } hp_fields[] = {
      {"n_vocab", offsetof(whisper_hparams, n_vocab), WF_HPARAM_MAX},
      {"n_audio_ctx", offsetof(whisper_hparams, n_audio_ctx), WF_HPARAM_MAX},
      {"n_audio_state", offsetof(whisper_hparams, n_audio_state), WF_HPARAM_MAX},
      {"n_audio_head", offsetof(whisper_hparams, n_audio_head), WF_HPARAM_MAX},
      {"n_audio_layer", offsetof(whisper_hparams, n_audio_layer), WF_LAYER_MAX},
      {"n_text_ctx", offsetof(whisper_hparams, n_text_ctx), WF_HPARAM_MAX},
      {"n_text_state", offsetof(whisper_hparams, n_text_state), WF_HPARAM_MAX},
      {"n_text_head", offsetof(whisper_hparams, n_text_head), WF_HPARAM_MAX},
      {"n_text_layer", offsetof(whisper_hparams, n_text_layer), WF_LAYER_MAX},
      {"n_mels", offsetof(whisper_hparams, n_mels), 1024},
  };
  for (size_t i = 0; i < ARRAY_LEN(hp_fields); i++) {
    int32_t v = 0;
    if ((rc = rd_i32(r, &v, hp_fields[i].name))) return rc;
    if (v < 1 || v > hp_fields[i].max)
      return err_set(ERR_RANGE, "whisper file: %s = %d is out of range (1..%d)", hp_fields[i].name, v,
                     hp_fields[i].max);
    memcpy((char *)&f->hp + hp_fields[i].off, &v, sizeof v);
  }
  int32_t ft = 0;
  if ((rc = rd_i32(r, &ft, "ftype"))) return rc;
  if (ft < 0 || !ftype_known(ft % WF_QNT_FACTOR))
    return err_set(ERR_UNSUPPORTED, "whisper file: ftype %d is not a weight type this reader knows", ft);
  f->hp.ftype = ft % WF_QNT_FACTOR;
  f->hp.qnt_version = ft / WF_QNT_FACTOR;
  const whisper_hparams *h = &f->hp;
  if (h->n_audio_state % h->n_audio_head)
    return err_set(ERR_RANGE, "whisper file: n_audio_head %d does not divide n_audio_state %d", h->n_audio_head,
                   h->n_audio_state);
  if (h->n_text_state % h->n_text_head)
    return err_set(ERR_RANGE, "whisper file: n_text_head %d does not divide n_text_state %d", h->n_text_head,
                   h->n_text_state);
  if (h->n_text_state != h->n_audio_state)
    return err_set(ERR_RANGE, "whisper file: n_text_state %d differs from n_audio_state %d (cross-attention needs them equal)",
                   h->n_text_state, h->n_audio_state);
  return 0;
}

static int parse_filters(whisper_file *f, rd *r) {
  int32_t n_mel = 0, n_fft = 0;
  int rc = rd_i32(r, &n_mel, "mel filter count");
  if (!rc) rc = rd_i32(r, &n_fft, "mel filter length");
  if (rc) return rc;
  if (n_mel != f->hp.n_mels || n_fft != WHISPER_N_FREQ)
    return err_set(ERR_RANGE, "whisper file: mel filter bank is %d x %d, expected n_mels x %d = %d x %d", n_mel, n_fft,
                   WHISPER_N_FREQ, f->hp.n_mels, WHISPER_N_FREQ);
  size_t n = (size_t)n_mel * WHISPER_N_FREQ;
  if (rd_left(r) / 4 < n)
    return err_set(ERR_CORRUPT, "whisper file: mel filter bank (%zu floats) at offset %zu extends past the end (%zu bytes)",
                   n, r->pos, r->size);
  if (!(f->filters = malloc(n * sizeof *f->filters))) return err_set(ERR_NOMEM, "whisper file: out of memory");
  memcpy(f->filters, r->p + r->pos, n * sizeof *f->filters); /* little-endian hosts only, as the kernels */
  r->pos += n * 4;
  return 0;
}

static int parse_vocab(whisper_file *f, rd *r) {
  int32_t n = 0;
  int rc = rd_i32(r, &n, "vocabulary count");
  if (rc) return rc;
  if (n < 0 || n > f->hp.n_vocab)
    return err_set(ERR_TOO_LARGE, "whisper file: vocabulary count %d is outside 0..n_vocab (%d)", n, f->hp.n_vocab);
  if ((size_t)n > rd_left(r) / 4)
    return err_set(ERR_CORRUPT, "whisper file: vocabulary of %d tokens cannot fit in the %zu bytes left", n, rd_left(r));
  f->tok_off = malloc(((size_t)n + 1) * sizeof *f->tok_off);
  f->tok_len = malloc(((size_t)n + 1) * sizeof *f->tok_len);
  if (!f->tok_off || !f->tok_len) return err_set(ERR_NOMEM, "whisper file: out of memory");
  for (int32_t i = 0; i < n; i++) {
    uint32_t len = 0;
    char what[48];
    snprintf(what, sizeof what, "length of token %d", i);
    if ((rc = rd_u32(r, &len, what))) return rc;
    if (len > rd_left(r))
      return err_set(ERR_CORRUPT, "whisper file: token %d (%u bytes) at offset %zu extends past the end (%zu bytes)", i,
                     len, r->pos, r->size);
    f->tok_off[i] = r->pos;
    f->tok_len[i] = len;
    r->pos += len;
  }
  f->n_tokens = (size_t)n;
  return 0;
}

/* ---- tensors ---------------------------------------------------------------- */

static bool type_allowed(uint32_t t) {
  return t == TENSOR_TYPE_F32 || t == TENSOR_TYPE_F16 || t == TENSOR_TYPE_Q4_0 || t == TENSOR_TYPE_Q4_1 ||
         t == TENSOR_TYPE_Q5_0 || t == TENSOR_TYPE_Q5_1 || t == TENSOR_TYPE_Q8_0;
}

static int parse_tensor(whisper_file *f, rd *r, size_t idx) {
  whisper_tensor t;
  memset(&t, 0, sizeof t);
  size_t at = r->pos;
  int32_t n_dims = 0, name_len = 0;
  uint32_t type = 0;
  char what[64];
  snprintf(what, sizeof what, "header of tensor %zu", idx);
  int rc = rd_i32(r, &n_dims, what);
  if (!rc) rc = rd_i32(r, &name_len, what);
  if (!rc) rc = rd_u32(r, &type, what);
  if (rc) return rc;
  if (n_dims < 1 || n_dims > WHISPER_MAX_DIMS)
    return err_set(ERR_RANGE, "whisper file: tensor %zu at offset %zu: n_dims %d is not 1..%d", idx, at, n_dims,
                   WHISPER_MAX_DIMS);
  if (name_len < 1 || name_len > WHISPER_NAME_MAX)
    return err_set(ERR_RANGE, "whisper file: tensor %zu at offset %zu: name length %d is not 1..%d", idx, at, name_len,
                   WHISPER_NAME_MAX);
  t.n_dims = (uint32_t)n_dims;
  t.n_elements = 1;
  for (int d = 0; d < WHISPER_MAX_DIMS; d++) t.dims[d] = 1;
  for (int d = 0; d < n_dims; d++) {
    int32_t v = 0;
    if ((rc = rd_i32(r, &v, what))) return rc;
    if (v < 1)
      return err_set(ERR_RANGE, "whisper file: tensor %zu at offset %zu: dim %d is %d", idx, at, d, v);
    t.dims[d] = v;
    if (__builtin_mul_overflow(t.n_elements, (int64_t)v, &t.n_elements))
      return err_set(ERR_TOO_LARGE, "whisper file: tensor %zu: element count overflows", idx);
  }
  if ((size_t)name_len > rd_left(r))
    return err_set(ERR_CORRUPT, "whisper file: tensor %zu: name (%d bytes) at offset %zu extends past the end", idx,
                   name_len, r->pos);
  const char *nm = (const char *)r->p + r->pos;
  if (memchr(nm, 0, (size_t)name_len))
    return err_set(ERR_RANGE, "whisper file: tensor %zu at offset %zu: name has a NUL byte", idx, at);
  if (!(t.name = str_ndup(nm, (size_t)name_len))) return err_set(ERR_NOMEM, "whisper file: out of memory");
  r->pos += (size_t)name_len;
  /* From here t.name is owned by t: store t before any further error. */
  if (f->n_tensors == f->cap_tensors) {
    size_t cap = f->cap_tensors ? f->cap_tensors * 2 : 64;
    whisper_tensor *nt = realloc(f->tensors, cap * sizeof *nt);
    if (!nt) {
      free((char *)t.name);
      return err_set(ERR_NOMEM, "whisper file: out of memory");
    }
    f->tensors = nt;
    f->cap_tensors = cap;
  }
  whisper_tensor *dst = &f->tensors[f->n_tensors++];
  *dst = t;
  if (!type_allowed(type))
    return err_set(ERR_UNSUPPORTED, "whisper file: tensor '%s' has type %u (%s); whisper files use F32, F16, Q4_0, Q4_1, "
                   "Q5_0, Q5_1, Q8_0", dst->name, type, tensor_type_name(type));
  dst->type = type;
  size_t row_bytes = 0;
  if (tensor_type_row_bytes(type, dst->dims[0], &row_bytes))
    return err_set(ERR_RANGE, "whisper file: tensor '%s': row of %lld is not a multiple of %s's block", dst->name,
                   (long long)dst->dims[0], tensor_type_name(type));
  uint64_t n_rows = (uint64_t)(dst->n_elements / dst->dims[0]);
  if (__builtin_mul_overflow((uint64_t)row_bytes, n_rows, &dst->n_bytes))
    return err_set(ERR_TOO_LARGE, "whisper file: tensor '%s': byte size overflows", dst->name);
  if (dst->n_bytes > rd_left(r))
    return err_set(ERR_CORRUPT, "whisper file: tensor '%s': data (%llu bytes) at offset %zu extends past the end (%zu bytes)",
                   dst->name, (unsigned long long)dst->n_bytes, r->pos, r->size);
  dst->offset = r->pos;
  dst->data = r->p + r->pos;
  r->pos += (size_t)dst->n_bytes;
  return 0;
}

static int cmp_name(const void *a, const void *b) {
  const whisper_tensor *ta = *(const whisper_tensor *const *)a, *tb = *(const whisper_tensor *const *)b;
  return strcmp(ta->name, tb->name);
}

/* Sorted index by name, and duplicates refused. */
static int index_tensors(whisper_file *f) {
  const whisper_tensor **v = malloc((f->n_tensors + 1) * sizeof *v);
  f->by_name = malloc((f->n_tensors + 1) * sizeof *f->by_name);
  if (!v || !f->by_name) {
    free(v);
    return err_set(ERR_NOMEM, "whisper file: out of memory");
  }
  for (size_t i = 0; i < f->n_tensors; i++) v[i] = &f->tensors[i];
  qsort(v, f->n_tensors, sizeof *v, cmp_name);
  int rc = 0;
  for (size_t i = 0; i < f->n_tensors; i++) {
    f->by_name[i] = (size_t)(v[i] - f->tensors);
    if (i && !rc && strcmp(v[i]->name, v[i - 1]->name) == 0)
      rc = err_set(ERR_EXISTS, "whisper file: tensor '%s' appears twice", v[i]->name);
  }
  free(v);
  return rc;
}

const whisper_tensor *whisper_file_find(const whisper_file *f, const char *name) {
  size_t lo = 0, hi = f->n_tensors;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const whisper_tensor *t = &f->tensors[f->by_name[mid]];
    int c = strcmp(name, t->name);
    if (!c) return t;
    if (c < 0) hi = mid;
    else lo = mid + 1;
  }
  return NULL;
}

/* ---- the tensors a model needs --------------------------------------------- */

/* Dimension symbols of the table below. */
enum wf_dim { D_1 = 1, D_3, D_S, D_S4, D_ACTX, D_TCTX, D_VOCAB, D_MELS };

typedef struct wf_need {
  const char *fmt;      /* name; "%d" is the block index */
  char scope;           /* 'g' once, 'e' per encoder block, 'd' per decoder block */
  uint8_t n_dims;
  uint8_t d[3];         /* enum wf_dim, ggml order */
} wf_need;

/* Names and shapes as whisper.cpp's converter writes them: a Linear of
 * (out, in) is dims [in, out], conv weights (out, in, 3) are [3, in, out],
 * conv biases were reshaped to (n, 1), so [1, n]. */
static const wf_need wf_needs[] = {
    {"encoder.positional_embedding", 'g', 2, {D_S, D_ACTX}},
    {"encoder.conv1.weight", 'g', 3, {D_3, D_MELS, D_S}},
    {"encoder.conv1.bias", 'g', 2, {D_1, D_S}},
    {"encoder.conv2.weight", 'g', 3, {D_3, D_S, D_S}},
    {"encoder.conv2.bias", 'g', 2, {D_1, D_S}},
    {"encoder.ln_post.weight", 'g', 1, {D_S}},
    {"encoder.ln_post.bias", 'g', 1, {D_S}},
    {"decoder.positional_embedding", 'g', 2, {D_S, D_TCTX}},
    {"decoder.token_embedding.weight", 'g', 2, {D_S, D_VOCAB}},
    {"decoder.ln.weight", 'g', 1, {D_S}},
    {"decoder.ln.bias", 'g', 1, {D_S}},
#define WF_BLOCK(pfx, sc)                                           \
  {pfx ".%d.attn_ln.weight", sc, 1, {D_S}},                         \
  {pfx ".%d.attn_ln.bias", sc, 1, {D_S}},                           \
  {pfx ".%d.attn.query.weight", sc, 2, {D_S, D_S}},                 \
  {pfx ".%d.attn.query.bias", sc, 1, {D_S}},                        \
  {pfx ".%d.attn.key.weight", sc, 2, {D_S, D_S}},                   \
  {pfx ".%d.attn.value.weight", sc, 2, {D_S, D_S}},                 \
  {pfx ".%d.attn.value.bias", sc, 1, {D_S}},                        \
  {pfx ".%d.attn.out.weight", sc, 2, {D_S, D_S}},                   \
  {pfx ".%d.attn.out.bias", sc, 1, {D_S}},                          \
  {pfx ".%d.mlp_ln.weight", sc, 1, {D_S}},                          \
  {pfx ".%d.mlp_ln.bias", sc, 1, {D_S}},                            \
  {pfx ".%d.mlp.0.weight", sc, 2, {D_S, D_S4}},                     \
  {pfx ".%d.mlp.0.bias", sc, 1, {D_S4}},                            \
  {pfx ".%d.mlp.2.weight", sc, 2, {D_S4, D_S}},                     \
  {pfx ".%d.mlp.2.bias", sc, 1, {D_S}}
    WF_BLOCK("encoder.blocks", 'e'),
    WF_BLOCK("decoder.blocks", 'd'),
#undef WF_BLOCK
    {"decoder.blocks.%d.cross_attn_ln.weight", 'd', 1, {D_S}},
    {"decoder.blocks.%d.cross_attn_ln.bias", 'd', 1, {D_S}},
    {"decoder.blocks.%d.cross_attn.query.weight", 'd', 2, {D_S, D_S}},
    {"decoder.blocks.%d.cross_attn.query.bias", 'd', 1, {D_S}},
    {"decoder.blocks.%d.cross_attn.key.weight", 'd', 2, {D_S, D_S}},
    {"decoder.blocks.%d.cross_attn.value.weight", 'd', 2, {D_S, D_S}},
    {"decoder.blocks.%d.cross_attn.value.bias", 'd', 1, {D_S}},
    {"decoder.blocks.%d.cross_attn.out.weight", 'd', 2, {D_S, D_S}},
    {"decoder.blocks.%d.cross_attn.out.bias", 'd', 1, {D_S}},
};

static int64_t dim_value(const whisper_hparams *h, int d) {
  switch (d) {
    case D_1: return 1;
    case D_3: return 3;
    case D_S: return h->n_audio_state;
    case D_S4: return 4 * (int64_t)h->n_audio_state;
    case D_ACTX: return h->n_audio_ctx;
    case D_TCTX: return h->n_text_ctx;
    case D_VOCAB: return h->n_vocab;
    case D_MELS: return h->n_mels;
    default: return -1;
  }
}

static int check_one(const whisper_file *f, const wf_need *n, int blk) {
  char name[WHISPER_NAME_MAX + 1];
  snprintf(name, sizeof name, n->fmt, blk);
  const whisper_tensor *t = whisper_file_find(f, name);
  if (!t) return err_set(ERR_NOT_FOUND, "whisper file: tensor '%s' is missing", name);
  bool ok = t->n_dims == n->n_dims;
  for (int d = 0; ok && d < n->n_dims; d++) ok = t->dims[d] == dim_value(&f->hp, n->d[d]);
  if (!ok) {
    char want[64], got[64];
    int w = 0, g = 0;
    for (int d = 0; d < n->n_dims; d++)
      w += snprintf(want + w, sizeof want - (size_t)w, "%s%lld", d ? ", " : "", (long long)dim_value(&f->hp, n->d[d]));
    for (uint32_t d = 0; d < t->n_dims; d++)
      g += snprintf(got + g, sizeof got - (size_t)g, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
    return err_set(ERR_RANGE, "whisper file: tensor '%s' has dims [%s], expected [%s]", name, got, want);
  }
  return 0;
}

static int check_needs(const whisper_file *f) {
  for (size_t i = 0; i < ARRAY_LEN(wf_needs); i++) {
    const wf_need *n = &wf_needs[i];
    int n_blk = n->scope == 'e' ? f->hp.n_audio_layer : n->scope == 'd' ? f->hp.n_text_layer : 1;
    for (int b = 0; b < n_blk; b++) {
      int rc = check_one(f, n, b);
      if (rc) return rc;
    }
  }
  return 0;
}

/* ---- open / close ------------------------------------------------------------ */

static int wf_parse(whisper_file *f) {
  rd r = {f->base, 0, f->size};
  int rc = parse_hparams(f, &r);
  if (!rc) rc = parse_filters(f, &r);
  if (!rc) rc = parse_vocab(f, &r);
  for (size_t i = 0; !rc && rd_left(&r) > 0; i++) rc = parse_tensor(f, &r, i);
  if (!rc) rc = index_tensors(f);
  if (!rc) rc = check_needs(f);
  return rc;
}

int whisper_file_open_mem(const void *data, size_t size, whisper_file **out) {
  *out = NULL;
  whisper_file *f = calloc(1, sizeof *f);
  if (!f) return err_set(ERR_NOMEM, "whisper file: out of memory");
  f->base = data;
  f->size = size;
  int rc = wf_parse(f);
  if (rc) {
    whisper_file_close(f);
    return rc;
  }
  *out = f;
  return 0;
}

int whisper_file_open(const char *path, whisper_file **out) {
  *out = NULL;
  const void *map;
  size_t size;
  int rc = file_map_ro(path, "whisper file", "whisper ggml file", 4, &map, &size);
  if (rc) return rc;
  whisper_file *f = calloc(1, sizeof *f);
  if (!f) {
    munmap((void *)map, size);
    return err_set(ERR_NOMEM, "whisper file: out of memory");
  }
  f->base = map;
  f->size = size;
  f->mapped = true;
  rc = wf_parse(f);
  if (rc) {
    whisper_file_close(f);
    return rc;
  }
  *out = f;
  return 0;
}

void whisper_file_close(whisper_file *f) {
  if (!f) return;
  for (size_t i = 0; i < f->n_tensors; i++) free((char *)f->tensors[i].name);
  free(f->tensors);
  free(f->by_name);
  free(f->filters);
  free(f->tok_off);
  free(f->tok_len);
  if (f->mapped) munmap((void *)f->base, f->size);
  free(f);
}

const whisper_hparams *whisper_file_hparams(const whisper_file *f) { return &f->hp; }
const float *whisper_file_mel_filters(const whisper_file *f) { return f->filters; }
size_t whisper_file_n_tokens(const whisper_file *f) { return f->n_tokens; }
size_t whisper_file_n_tensors(const whisper_file *f) { return f->n_tensors; }

const char *whisper_file_token(const whisper_file *f, size_t i, size_t *len) {
  if (i >= f->n_tokens) {
    if (len) *len = 0;
    return NULL;
  }
  if (len) *len = f->tok_len[i];
  return (const char *)f->base + f->tok_off[i];
}

const whisper_tensor *whisper_file_tensor_at(const whisper_file *f, size_t i) {
  return i < f->n_tensors ? &f->tensors[i] : NULL;
}
