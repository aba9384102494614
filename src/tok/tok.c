/*
 * tok.c - loading a tokenizer from GGUF metadata, the parts every algorithm
 * shares, decoding and the streaming detokenizer.
 *
 * Encoding is two stages, as in llama.cpp's llama-vocab.cpp and Hugging Face
 * tokenizers' added-token handling:
 *   1. split_specials(): tokens that must never be broken up (user-defined
 *      tokens always; control and unknown tokens when the caller asks to
 *      parse specials) are found in the text, longest first, and cut out as
 *      finished ids; what remains are pieces of raw text.
 *   2. each raw piece goes through the model's algorithm: tok_spm.c
 *      (SentencePiece bigram merges by score), tok_bpe.c (regex
 *      pre-tokenizer + byte-level BPE merges by rank), tok_wpm.c (BERT
 *      normalization + WordPiece).
 * BOS/EOS (CLS/SEP for WordPiece) are added around the result on request.
 *
 * Invariants after tok_load(): every id in special[] is -1 or < n_vocab;
 * scores/types have n_vocab entries; the text hash maps every token text to
 * its id (the highest id wins for duplicate texts, as llama.cpp's map does).
 *
 * Start reading at tok_load(), then tok_encode().
 */
#include "tok/tok_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/util.h"

/* ---- small helpers ------------------------------------------------------ */

uint64_t tok_hash_bytes(const void *p, size_t n) {
  const uint8_t *s = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= s[i];
    h *= 1099511628211ull;
  }
  return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

int tok_ids_push(tok_ids *v, int32_t id) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 64, bytes;
    if (!size_mul(cap, sizeof(int32_t), &bytes)) return err_set(ERR_TOO_LARGE, "token id array");
    int32_t *p = realloc(v->ids, bytes);
    if (!p) return err_set(ERR_NOMEM, "token id array of %zu", cap);
    v->ids = p;
    v->cap = cap;
  }
  v->ids[v->n++] = id;
  return 0;
}

void tok_ids_free(tok_ids *v) {
  free(v->ids);
  v->ids = NULL;
  v->n = v->cap = 0;
}

int32_t tok_lookup(const tok *t, const char *text, size_t len) {
  size_t mask = t->hash_cap - 1;
  for (size_t i = tok_hash_bytes(text, len) & mask;; i = (i + 1) & mask) {
    uint32_t slot = t->hash[i];
    if (!slot) return -1;
    int32_t id = (int32_t)(slot - 1);
    if (t->len[id] == len && memcmp(tok_text_(t, id), text, len) == 0) return id;
  }
}

int32_t tok_merge_rank(const tok *t, int32_t a, int32_t b) {
  if (!t->merge_cap) return -1;
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  size_t mask = t->merge_cap - 1;
  for (size_t i = hash_u64(key) & mask;; i = (i + 1) & mask) {
    if (t->merge_ranks[i] < 0) return -1;
    if (t->merge_keys[i] == key) return t->merge_ranks[i];
  }
}

static size_t pow2_at_least(size_t n) {
  size_t c = 16;
  while (c < n) c *= 2;
  return c;
}

/* ---- loading ------------------------------------------------------------ */

static const struct {
  const char *key;
  enum tok_special role;
} special_keys[] = {
    {"tokenizer.ggml.bos_token_id", TOK_SPECIAL_BOS},
    {"tokenizer.ggml.eos_token_id", TOK_SPECIAL_EOS},
    {"tokenizer.ggml.eot_token_id", TOK_SPECIAL_EOT},
    {"tokenizer.ggml.unknown_token_id", TOK_SPECIAL_UNK},
    {"tokenizer.ggml.padding_token_id", TOK_SPECIAL_PAD},
    {"tokenizer.ggml.seperator_token_id", TOK_SPECIAL_SEP}, /* llama.cpp's spelling */
    {"tokenizer.ggml.separator_token_id", TOK_SPECIAL_SEP},
    {"tokenizer.ggml.cls_token_id", TOK_SPECIAL_CLS},
    {"tokenizer.ggml.mask_token_id", TOK_SPECIAL_MASK},
};

/* Texts that end a turn in the families we know, for tok_is_eog (the same
 * list llama.cpp uses to guess end-of-generation tokens). */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "<|end_of_text|>", "<|return|>", "<|call|>", "</s>",
};

static int load_tokens(tok *t, const gguf_file *f) {
  const gguf_value *arr;
  int rc = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &arr);
  if (rc == ERR_NOT_FOUND) return err_set(ERR_NOT_FOUND, "tokenizer.ggml.tokens is missing");
  if (rc) return rc;
  uint64_t n = arr->v.arr.n;
  if (n == 0 || n > INT32_MAX / 2) return err_set(ERR_RANGE, "tokenizer.ggml.tokens has %llu entries", (unsigned long long)n);
  t->n_vocab = (int32_t)n;
  size_t total = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t l = arr->v.arr.strs[i].len;
    if (l > UINT32_MAX / 2 || !size_add(total, (size_t)l + 1, &total) || total > UINT32_MAX)
      return err_set(ERR_TOO_LARGE, "tokenizer.ggml.tokens: texts too long (token %llu)", (unsigned long long)i);
  }
  t->blob = malloc(total ? total : 1);
  t->off = malloc(n * sizeof(uint32_t));
  t->len = malloc(n * sizeof(uint32_t));
  t->scores = calloc(n, sizeof(float));
  t->types = malloc(n);
  t->hash_cap = pow2_at_least((size_t)n * 2);
  t->hash = calloc(t->hash_cap, sizeof(uint32_t));
  if (!t->blob || !t->off || !t->len || !t->scores || !t->types || !t->hash)
    return err_set(ERR_NOMEM, "tokenizer vocabulary of %llu tokens", (unsigned long long)n);
  size_t pos = 0;
  for (uint64_t i = 0; i < n; i++) {
    const gguf_str *s = &arr->v.arr.strs[i];
    memcpy(t->blob + pos, s->data, s->len);
    t->blob[pos + s->len] = '\0';
    t->off[i] = (uint32_t)pos;
    t->len[i] = (uint32_t)s->len;
    pos += s->len + 1;
    if (s->len > t->max_token_len) t->max_token_len = s->len;
    t->types[i] = TOK_TYPE_NORMAL;
    /* insert; a later duplicate replaces the earlier id */
    size_t mask = t->hash_cap - 1;
    for (size_t j = tok_hash_bytes(s->data, s->len) & mask;; j = (j + 1) & mask) {
      uint32_t slot = t->hash[j];
      if (!slot) {
        t->hash[j] = (uint32_t)i + 1;
        break;
      }
      int32_t other = (int32_t)(slot - 1);
      if (t->len[other] == s->len && memcmp(tok_text_(t, other), s->data, s->len) == 0) {
        t->hash[j] = (uint32_t)i + 1;
        break;
      }
    }
  }

  if ((rc = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_TYPE_COUNT, &arr)) == 0) {
    if (arr->v.arr.elem_type != GGUF_TYPE_FLOAT32 && arr->v.arr.elem_type != GGUF_TYPE_FLOAT64)
      return err_set(ERR_TYPE, "tokenizer.ggml.scores: expected float32 elements, got %s", gguf_type_name(arr->v.arr.elem_type));
    if (arr->v.arr.n != n)
      return err_set(ERR_CORRUPT, "tokenizer.ggml.scores has %llu entries for %llu tokens",
                     (unsigned long long)arr->v.arr.n, (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) t->scores[i] = (float)gguf_arr_f64(arr, i);
  } else if (rc != ERR_NOT_FOUND) {
    return rc;
  }

  if ((rc = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_COUNT, &arr)) == 0) {
    uint32_t et = arr->v.arr.elem_type;
    if (et == GGUF_TYPE_STRING || et == GGUF_TYPE_ARRAY || et == GGUF_TYPE_FLOAT32 || et == GGUF_TYPE_FLOAT64)
      return err_set(ERR_TYPE, "tokenizer.ggml.token_type: expected int32 elements, got %s", gguf_type_name(et));
    if (arr->v.arr.n != n)
      return err_set(ERR_CORRUPT, "tokenizer.ggml.token_type has %llu entries for %llu tokens",
                     (unsigned long long)arr->v.arr.n, (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
      int64_t ty = gguf_arr_i64(arr, i);
      t->types[i] = (ty >= TOK_TYPE_NORMAL && ty <= TOK_TYPE_BYTE) ? (uint8_t)ty : TOK_TYPE_NORMAL;
    }
  } else if (rc != ERR_NOT_FOUND) {
    return rc;
  }
  return 0;
}

static int load_merges(tok *t, const gguf_file *f) {
  const gguf_value *arr;
  int rc = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &arr);
  if (rc == ERR_NOT_FOUND) return err_set(ERR_NOT_FOUND, "tokenizer.ggml.merges is missing (needed by a gpt2 tokenizer)");
  if (rc) return rc;
  uint64_t n = arr->v.arr.n;
  if (n > INT32_MAX / 4) return err_set(ERR_TOO_LARGE, "tokenizer.ggml.merges has %llu entries", (unsigned long long)n);
  t->merge_cap = pow2_at_least((size_t)n * 2 + 1);
  t->merge_keys = malloc(t->merge_cap * sizeof(uint64_t));
  t->merge_ranks = malloc(t->merge_cap * sizeof(int32_t));
  if (!t->merge_keys || !t->merge_ranks) return err_set(ERR_NOMEM, "tokenizer.ggml.merges table");
  memset(t->merge_ranks, 0xff, t->merge_cap * sizeof(int32_t));
  size_t mask = t->merge_cap - 1;
  for (uint64_t r = 0; r < n; r++) {
    const gguf_str *s = &arr->v.arr.strs[r];
    /* "left right": split at the first space after the first byte */
    const char *sp = s->len > 1 ? memchr(s->data + 1, ' ', s->len - 1) : NULL;
    if (!sp) continue; /* malformed entry: unusable, as in llama.cpp */
    size_t la = (size_t)(sp - s->data);
    int32_t a = tok_lookup(t, s->data, la);
    int32_t b = tok_lookup(t, sp + 1, s->len - la - 1);
    if (a < 0 || b < 0) continue; /* a merge whose parts are no tokens never applies */
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = hash_u64(key) & mask;; i = (i + 1) & mask) {
      if (t->merge_ranks[i] < 0) {
        t->merge_keys[i] = key;
        t->merge_ranks[i] = (int32_t)r;
        break;
      }
      if (t->merge_keys[i] == key) break; /* the first (lowest) rank stays */
    }
  }
  return 0;
}

static int cmp_split(const void *pa, const void *pb, void *ctx) {
  const tok *t = ctx;
  int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
  if (t->len[a] != t->len[b]) return t->len[a] > t->len[b] ? -1 : 1;
  return (a > b) - (a < b);
}

static bool contains_ci(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (const char *p = hay; *p; p++)
    if (strncasecmp(p, needle, n) == 0) return true;
  return false;
}

static void set_strip(tok *t, const char *text, uint8_t bit, bool on) {
  int32_t id = tok_lookup(t, text, strlen(text));
  if (id < 0) return;
  if (on) t->strip[id] |= bit;
  else t->strip[id] &= (uint8_t)~bit;
}

/* Whitespace-eating special tokens. GGUF has no key for Hugging Face's
 * lstrip/rstrip flags, so, as llama.cpp does, they are set by model name:
 * Phi-3's special tokens eat the whitespace after them (except <unk>, <s>,
 * <|endoftext|>), and jina-v2 / nomic-bert-moe / jina-bert-v3's <mask> eats
 * the whitespace before it. */
static int set_strip_rules(tok *t, const gguf_file *f) {
  const char *name = "", *arch = "";
  if (gguf_get_str(f, "general.name", &name)) name = "";
  if (gguf_get_str(f, "general.architecture", &arch)) arch = "";
  bool phi3 = contains_ci(name, "phi-3") || contains_ci(name, "phi3");
  bool jina = strcmp(t->pre_name, "jina-v2-de") == 0 || strcmp(t->pre_name, "jina-v2-es") == 0 ||
              strcmp(t->pre_name, "jina-v2-code") == 0 || strcmp(arch, "nomic-bert-moe") == 0 ||
              strcmp(arch, "jina-bert-v3") == 0;
  if (!phi3 && !jina) return 0;
  if (!(t->strip = calloc((size_t)t->n_vocab, 1))) return err_set(ERR_NOMEM, "tokenizer strip flags");
  if (phi3) {
    for (size_t i = 0; i < t->n_split; i++) t->strip[t->split_ids[i]] |= TOK_STRIP_RIGHT;
    set_strip(t, "</s>", TOK_STRIP_RIGHT, true);
    set_strip(t, "<unk>", TOK_STRIP_RIGHT, false);
    set_strip(t, "<s>", TOK_STRIP_RIGHT, false);
    set_strip(t, "<|endoftext|>", TOK_STRIP_RIGHT, false);
  }
  if (jina) set_strip(t, "<mask>", TOK_STRIP_LEFT, true);
  return 0;
}

static int get_bool_opt(const gguf_file *f, const char *key, bool *v) {
  int rc = gguf_get_bool(f, key, v);
  return rc == ERR_NOT_FOUND ? 0 : rc;
}

int tok_load(const gguf_file *f, tok **out) {
  *out = NULL;
  const char *model;
  int rc = gguf_get_str(f, "tokenizer.ggml.model", &model);
  if (rc == ERR_NOT_FOUND) return err_set(ERR_NOT_FOUND, "tokenizer.ggml.model is missing: the file has no tokenizer");
  if (rc) return rc;
  enum tok_model kind;
  if (strcmp(model, "llama") == 0) kind = TOK_MODEL_SPM;
  else if (strcmp(model, "gpt2") == 0) kind = TOK_MODEL_BPE;
  else if (strcmp(model, "bert") == 0) kind = TOK_MODEL_WPM;
  else if (strcmp(model, "t5") == 0) kind = TOK_MODEL_UGM;
  else if (strcmp(model, "rwkv") == 0)
    return err_set(ERR_UNSUPPORTED, "tokenizer.ggml.model \"rwkv\" (RWKV trie tokenizer) is not supported yet");
  else if (strcmp(model, "none") == 0 || strcmp(model, "no_vocab") == 0)
    return err_set(ERR_UNSUPPORTED, "tokenizer.ggml.model \"%s\": the model has no vocabulary", model);
  else
    return err_set(ERR_UNSUPPORTED, "tokenizer.ggml.model \"%s\" is not a known tokenizer", model);

  tok *t = calloc(1, sizeof(*t));
  if (!t) return err_set(ERR_NOMEM, "tokenizer");
  t->model = kind;
  for (int i = 0; i < TOK_SPECIAL_COUNT; i++) t->special[i] = -1;
  for (int i = 0; i < 256; i++) t->byte_tok[i] = -1;

  const char *pre = "default";
  rc = gguf_get_str(f, "tokenizer.ggml.pre", &pre);
  if (rc == ERR_NOT_FOUND) pre = "default";
  else if (rc) goto fail;
  if (!(t->pre_name = str_dup(pre))) {
    rc = err_set(ERR_NOMEM, "tokenizer");
    goto fail;
  }

  if ((rc = load_tokens(t, f))) goto fail;

  /* defaults per model, then the file's keys */
  switch (kind) {
  case TOK_MODEL_SPM:
    t->special[TOK_SPECIAL_BOS] = 1;
    t->special[TOK_SPECIAL_EOS] = 2;
    t->special[TOK_SPECIAL_UNK] = 0;
    t->add_bos = true;
    t->add_space_prefix = true;
    break;
  case TOK_MODEL_BPE:
    t->add_bos = tok_bpe_pre_adds_bos(t->pre_name);
    break;
  case TOK_MODEL_UGM: /* T5's; XLM-RoBERTa files write their own ids and add_bos */
    t->special[TOK_SPECIAL_PAD] = 0;
    t->special[TOK_SPECIAL_EOS] = 1;
    t->special[TOK_SPECIAL_UNK] = 2;
    t->add_eos = true;
    t->add_space_prefix = true;
    break;
  case TOK_MODEL_WPM:
    t->special[TOK_SPECIAL_UNK] = 100;
    t->special[TOK_SPECIAL_CLS] = 101;
    t->special[TOK_SPECIAL_SEP] = 102;
    t->special[TOK_SPECIAL_PAD] = 0;
    t->special[TOK_SPECIAL_MASK] = 103;
    t->add_bos = true;
    t->add_eos = true;
    break;
  }
  for (size_t i = 0; i < ARRAY_LEN(special_keys); i++) {
    uint32_t id;
    rc = gguf_get_u32(f, special_keys[i].key, &id);
    if (rc == ERR_NOT_FOUND) continue;
    if (rc == ERR_TYPE) {
      int32_t sid; /* some converters write -1 as int32 for "none" */
      if (gguf_get_i32(f, special_keys[i].key, &sid) == 0 && sid < 0) {
        t->special[special_keys[i].role] = -1;
        continue;
      }
    }
    if (rc) goto fail;
    t->special[special_keys[i].role] = id < (uint32_t)t->n_vocab ? (int32_t)id : -1;
  }
  for (int i = 0; i < TOK_SPECIAL_COUNT; i++)
    if (t->special[i] >= t->n_vocab) t->special[i] = -1;

  if ((rc = get_bool_opt(f, "tokenizer.ggml.add_bos_token", &t->add_bos))) goto fail;
  if ((rc = get_bool_opt(f, "tokenizer.ggml.add_eos_token", &t->add_eos))) goto fail;
  if ((rc = get_bool_opt(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix))) goto fail;

  /* byte tokens (SPM byte fallback) */
  if (kind == TOK_MODEL_SPM) {
    static const char hex[] = "0123456789ABCDEF";
    for (int c = 0; c < 256; c++) {
      char name[7] = {'<', '0', 'x', hex[c >> 4], hex[c & 15], '>', 0};
      int32_t id = tok_lookup(t, name, 6);
      if (id < 0) {
        char one = (char)c;
        id = tok_lookup(t, &one, 1);
      }
      t->byte_tok[c] = id;
    }
  }

  /* tokens split out of the text before tokenizing */
  size_t n_split = 0;
  for (int32_t i = 0; i < t->n_vocab; i++) {
    uint8_t ty = t->types[i];
    if ((ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNKNOWN) && t->len[i] > 0) n_split++;
  }
  if (n_split) {
    if (!(t->split_ids = malloc(n_split * sizeof(int32_t)))) {
      rc = err_set(ERR_NOMEM, "tokenizer special tokens");
      goto fail;
    }
    for (int32_t i = 0; i < t->n_vocab; i++) {
      uint8_t ty = t->types[i];
      if ((ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNKNOWN) && t->len[i] > 0)
        t->split_ids[t->n_split++] = i;
    }
    qsort_r(t->split_ids, t->n_split, sizeof(int32_t), cmp_split, t);
  }

  if ((rc = set_strip_rules(t, f))) goto fail;

  if (kind == TOK_MODEL_BPE) {
    if ((rc = load_merges(t, f))) goto fail;
    if ((rc = tok_bpe_init(t))) goto fail;
  }
  if (kind == TOK_MODEL_UGM && (rc = tok_ugm_init(t, f))) goto fail;
  *out = t;
  return 0;
fail:
  tok_free(t);
  return rc;
}

void tok_free(tok *t) {
  if (!t) return;
  tok_bpe_free(t);
  tok_ugm_free(t);
  free(t->pre_name);
  free(t->blob);
  free(t->off);
  free(t->len);
  free(t->scores);
  free(t->types);
  free(t->hash);
  free(t->merge_keys);
  free(t->merge_ranks);
  free(t->split_ids);
  free(t->strip);
  free(t);
}

/* ---- queries ------------------------------------------------------------ */

enum tok_model tok_model_kind(const tok *t) { return t->model; }

const char *tok_model_name(const tok *t) {
  static const char *const names[] = {"llama", "gpt2", "bert", "t5"};
  return names[t->model];
}

const char *tok_pre_name(const tok *t) { return t->pre_name; }
int32_t tok_n_vocab(const tok *t) { return t->n_vocab; }

int32_t tok_special(const tok *t, enum tok_special role) {
  return (unsigned)role < TOK_SPECIAL_COUNT ? t->special[role] : -1;
}

bool tok_add_bos(const tok *t) { return t->add_bos; }
bool tok_add_eos(const tok *t) { return t->add_eos; }

enum tok_type tok_token_type(const tok *t, int32_t id) {
  return (id >= 0 && id < t->n_vocab) ? (enum tok_type)t->types[id] : TOK_TYPE_UNDEFINED;
}

bool tok_is_eog(const tok *t, int32_t id) {
  if (id < 0 || id >= t->n_vocab) return false;
  if (id == t->special[TOK_SPECIAL_EOS] || id == t->special[TOK_SPECIAL_EOT]) return true;
  if (t->types[id] != TOK_TYPE_CONTROL && t->types[id] != TOK_TYPE_USER_DEFINED) return false;
  for (size_t i = 0; i < ARRAY_LEN(eog_texts); i++)
    if (strlen(eog_texts[i]) == t->len[id] && memcmp(eog_texts[i], tok_text_(t, id), t->len[id]) == 0) return true;
  return false;
}

const char *tok_token_text(const tok *t, int32_t id, size_t *len) {
  if (id < 0 || id >= t->n_vocab) return NULL;
  if (len) *len = t->len[id];
  return tok_text_(t, id);
}

/* ---- encoding ----------------------------------------------------------- */

/* A piece of the input: raw text (id < 0) or a finished special token. */
typedef struct frag {
  int32_t id;
  size_t off, len;
} frag;

typedef struct frag_list {
  frag *v;
  size_t n, cap;
} frag_list;

static int frag_push(frag_list *l, int32_t id, size_t off, size_t len) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    frag *p = realloc(l->v, cap * sizeof(frag));
    if (!p) return err_set(ERR_NOMEM, "tokenizer fragments");
    l->v = p;
    l->cap = cap;
  }
  l->v[l->n++] = (frag){id, off, len};
  return 0;
}

static bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Cuts every occurrence of each splittable token out of the raw-text
 * fragments, longest token first, leftmost occurrence first. */
static int split_specials(const tok *t, const char *text, size_t len, bool parse_special, frag_list *out) {
  frag_list cur = {0}, next = {0};
  int rc = 0;
  if (len == 0) {
    *out = cur;
    return 0;
  }
  if ((rc = frag_push(&cur, -1, 0, len))) return rc;
  for (size_t k = 0; k < t->n_split; k++) {
    int32_t sid = t->split_ids[k];
    uint8_t ty = t->types[sid];
    if (!parse_special && ty != TOK_TYPE_USER_DEFINED) continue;
    const char *st = tok_text_(t, sid);
    size_t sl = t->len[sid];
    bool any = false;
    for (size_t i = 0; i < cur.n && !any; i++)
      if (cur.v[i].id < 0 && cur.v[i].len >= sl && memmem(text + cur.v[i].off, cur.v[i].len, st, sl)) any = true;
    if (!any) continue;
    next.n = 0;
    for (size_t i = 0; i < cur.n; i++) {
      frag fr = cur.v[i];
      if (fr.id >= 0) {
        if ((rc = frag_push(&next, fr.id, 0, 0))) goto done;
        continue;
      }
      size_t pos = fr.off, end = fr.off + fr.len;
      while (pos < end) {
        const char *m = end - pos >= sl ? memmem(text + pos, end - pos, st, sl) : NULL;
        if (!m) {
          if ((rc = frag_push(&next, -1, pos, end - pos))) goto done;
          break;
        }
        size_t mpos = (size_t)(m - text), left_end = mpos;
        uint8_t strip = t->strip ? t->strip[sid] : 0;
        if (strip & TOK_STRIP_LEFT)
          while (left_end > pos && is_ascii_space(text[left_end - 1])) left_end--;
        if (left_end > pos && (rc = frag_push(&next, -1, pos, left_end - pos))) goto done;
        if ((rc = frag_push(&next, sid, 0, 0))) goto done;
        pos = mpos + sl;
        if (strip & TOK_STRIP_RIGHT)
          while (pos < end && is_ascii_space(text[pos])) pos++;
      }
    }
    frag_list tmp = cur;
    cur = next;
    next = tmp;
  }
done:
  free(next.v);
  if (rc) {
    free(cur.v);
    return rc;
  }
  *out = cur;
  return 0;
}

int tok_encode(const tok *t, const char *text, size_t len, unsigned flags, tok_ids *out) {
  size_t n0 = out->n;
  bool add_special = flags & TOK_ENCODE_ADD_SPECIAL;
  frag_list fl = {0};
  int rc = split_specials(t, text, len, (flags & TOK_ENCODE_PARSE_SPECIAL) != 0, &fl);
  if (rc) return rc;

  int32_t first = -1, last = -1;
  if (add_special) {
    if (t->model == TOK_MODEL_WPM) {
      first = t->special[TOK_SPECIAL_CLS] >= 0 ? t->special[TOK_SPECIAL_CLS] : t->special[TOK_SPECIAL_BOS];
      last = t->special[TOK_SPECIAL_SEP] >= 0 ? t->special[TOK_SPECIAL_SEP] : t->special[TOK_SPECIAL_EOS];
    } else {
      first = t->special[TOK_SPECIAL_BOS];
      last = t->special[TOK_SPECIAL_EOS];
    }
    if (!t->add_bos) first = -1;
    if (!t->add_eos) last = -1;
  }
  if (first >= 0 && (rc = tok_ids_push(out, first))) goto fail;

  bool prev_special = true; /* SPM: the text start counts as after a special */
  for (size_t i = 0; i < fl.n; i++) {
    frag fr = fl.v[i];
    if (fr.id >= 0) {
      if ((rc = tok_ids_push(out, fr.id))) goto fail;
      prev_special = true;
      continue;
    }
    switch (t->model) {
    case TOK_MODEL_SPM:
      rc = tok_spm_encode_piece(t, text + fr.off, fr.len, t->add_space_prefix && prev_special, out);
      break;
    case TOK_MODEL_BPE:
      rc = tok_bpe_encode_piece(t, text + fr.off, fr.len, out);
      break;
    case TOK_MODEL_WPM:
      rc = tok_wpm_encode_piece(t, text + fr.off, fr.len, out);
      break;
    case TOK_MODEL_UGM: /* every raw fragment gets its own space prefix (llama.cpp's) */
      rc = tok_ugm_encode_piece(t, text + fr.off, fr.len, out);
      break;
    }
    if (rc) goto fail;
    prev_special = false;
  }
  if (last >= 0 && (rc = tok_ids_push(out, last))) goto fail;
  free(fl.v);
  return 0;
fail:
  free(fl.v);
  out->n = n0;
  return rc;
}

/* ---- decoding ----------------------------------------------------------- */

static int unescape_spaces(const char *s, size_t n, buf *out) {
  size_t i = 0, run = 0;
  while (i < n) {
    if (i + 2 < n && (uint8_t)s[i] == 0xE2 && (uint8_t)s[i + 1] == 0x96 && (uint8_t)s[i + 2] == 0x81) {
      if (run && buf_append(out, s + i - run, run)) return ERR_NOMEM;
      run = 0;
      if (buf_append_byte(out, ' ')) return ERR_NOMEM;
      i += 3;
    } else {
      run++;
      i++;
    }
  }
  if (run && buf_append(out, s + n - run, run)) return ERR_NOMEM;
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

int tok_decode_piece(const tok *t, int32_t id, unsigned flags, buf *out) {
  if (id < 0 || id >= t->n_vocab) return err_set(ERR_RANGE, "token id %d is outside the vocabulary of %d", (int)id, (int)t->n_vocab);
  const char *s = tok_text_(t, id);
  size_t n = t->len[id];
  switch (t->types[id]) {
  case TOK_TYPE_CONTROL:
  case TOK_TYPE_UNKNOWN:
  case TOK_TYPE_UNUSED:
  case TOK_TYPE_UNDEFINED:
    if (!(flags & TOK_DECODE_SPECIAL)) return 0;
    return buf_append(out, s, n) ? ERR_NOMEM : 0;
  case TOK_TYPE_USER_DEFINED:
    return buf_append(out, s, n) ? ERR_NOMEM : 0;
  case TOK_TYPE_BYTE:
    if (n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>' && hexval(s[3]) >= 0 && hexval(s[4]) >= 0)
      return buf_append_byte(out, (char)(hexval(s[3]) * 16 + hexval(s[4]))) ? ERR_NOMEM : 0;
    return buf_append(out, s, n) ? ERR_NOMEM : 0;
  default:
    break;
  }
  if (t->model == TOK_MODEL_BPE) return tok_bpe_unmap(s, n, out);
  return unescape_spaces(s, n, out);
}

/* ---- streaming ---------------------------------------------------------- */

void tok_stream_init(tok_stream *s, const tok *t, unsigned flags) {
  memset(s, 0, sizeof(*s));
  s->t = t;
  s->flags = flags;
}

static const char replacement[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Is c acceptable as byte number k (1..3) of a sequence led by lead? */
static bool utf8_cont_ok(uint8_t lead, size_t k, uint8_t c) {
  if (k == 1) {
    if (lead == 0xE0) return c >= 0xA0 && c <= 0xBF;
    if (lead == 0xED) return c >= 0x80 && c <= 0x9F;
    if (lead == 0xF0) return c >= 0x90 && c <= 0xBF;
    if (lead == 0xF4) return c >= 0x80 && c <= 0x8F;
  }
  return c >= 0x80 && c <= 0xBF;
}

static size_t utf8_need(uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

/* Feeds bytes through the held state, appending whole characters. A NUL
 * byte (a <0x00> byte token, or a byte-level BPE token for byte 0) is
 * dropped: generated text never holds U+0000, which every dialect would
 * have to carry as "\u0000" and which clients that replay their history
 * (Claude Code) then send back in every later request. */
static int stream_bytes(tok_stream *s, const uint8_t *p, size_t n, buf *out) {
  size_t i = 0;
  while (i < n) {
    if (s->n_held == 0) {
      /* fast path: a run of ASCII */
      size_t j = i;
      while (j < n && p[j] < 0x80 && p[j]) j++;
      if (j > i) {
        if (buf_append(out, p + i, j - i)) return ERR_NOMEM;
        i = j;
        continue;
      }
      if (!p[i]) {
        i++;
        continue;
      }
      if (utf8_need(p[i])) s->held[s->n_held++] = p[i];
      else if (buf_append(out, replacement, 3)) return ERR_NOMEM;
      i++;
      continue;
    }
    uint8_t c = p[i];
    if (utf8_cont_ok(s->held[0], s->n_held, c)) {
      s->held[s->n_held++] = c;
      i++;
      if (s->n_held == utf8_need(s->held[0])) {
        if (buf_append(out, s->held, s->n_held)) return ERR_NOMEM;
        s->n_held = 0;
      }
    } else {
      /* the held sequence can never complete: replace it, then re-read c */
      if (buf_append(out, replacement, 3)) return ERR_NOMEM;
      s->n_held = 0;
    }
  }
  return 0;
}

int tok_stream_feed(tok_stream *s, int32_t id, buf *out) {
  buf_reset(&s->scratch);
  int rc = tok_decode_piece(s->t, id, s->flags, &s->scratch);
  if (rc) return rc;
  const uint8_t *p = (const uint8_t *)s->scratch.data;
  size_t n = s->scratch.len;
  uint8_t ty = s->t->types[id]; /* id was checked by tok_decode_piece */
  bool is_text = ty == TOK_TYPE_NORMAL || ty == TOK_TYPE_BYTE || ty == TOK_TYPE_USER_DEFINED;
  if (n && !s->started && is_text) { /* a BOS shown as "<s>" does not count */
    s->started = true;
    bool prefixed = s->t->model == TOK_MODEL_WPM ||
                  ((s->t->model == TOK_MODEL_SPM || s->t->model == TOK_MODEL_UGM) && s->t->add_space_prefix);
    if ((s->flags & TOK_DECODE_STRIP_SPACE) && prefixed && p[0] == ' ') {
      p++;
      n--;
    }
  }
  return stream_bytes(s, p, n, out);
}

int tok_stream_flush(tok_stream *s, buf *out) {
  int rc = 0;
  if (s->n_held && buf_append(out, replacement, 3)) rc = ERR_NOMEM;
  s->n_held = 0;
  s->started = false;
  buf_free(&s->scratch);
  return rc;
}

int tok_decode(const tok *t, const int32_t *ids, size_t n, unsigned flags, buf *out) {
  tok_stream s;
  tok_stream_init(&s, t, flags);
  for (size_t i = 0; i < n; i++) {
    int rc = tok_stream_feed(&s, ids[i], out);
    if (rc) {
      tok_stream_flush(&s, out);
      return rc;
    }
  }
  return tok_stream_flush(&s, out);
}
