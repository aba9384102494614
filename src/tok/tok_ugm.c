/*
 * tok_ugm.c - the Unigram tokenizer ("t5" in GGUF: SentencePiece's unigram
 * model), the tokenizer of T5 and of XLM-RoBERTa files such as bge-m3 and
 * multilingual-e5.
 *
 * Behaviour follows llama.cpp's llm_tokenizer_ugm (a port of
 * sentencepiece's normalizer and unigram Viterbi):
 *   1. normalization, one prefix of the input at a time: a user-defined
 *      token's text is kept as it is; else the longest prefix found in the
 *      precompiled charsmap (tokenizer.ggml.precompiled_charsmap: u32 n,
 *      then n bytes of an XOR-compressed double array (XCDA) over the input
 *      bytes, then NUL-terminated replacement strings the array's values
 *      index) is replaced; else one UTF-8 character is copied (an invalid
 *      byte becomes U+FFFD). Spaces of the result become U+2581 "▁"
 *      (escape_whitespaces); with remove_extra_whitespaces runs of spaces
 *      collapse to one "▁" before the next non-space and trailing ones go;
 *      with add_space_prefix a "▁" comes before the first non-space;
 *   2. Viterbi over the normalized bytes: best[e] is the highest sum of
 *      scores (double) of a segmentation of bytes 0..e; every vocabulary
 *      token of type normal, user-defined (score 0) or unused that starts
 *      at a character boundary s extends best[s]; a character no token of
 *      exactly its length covers may be the unknown token at score
 *      min(normal scores) - 10. Ties keep the earlier candidate (strict >).
 *      The path is read back from the end, consecutive unknown tokens
 *      merged into one.
 * Tokens are looked up by text (tok_lookup) for every length up to the
 * longest token, so no trie is built.
 *
 * XCDA unit (32 bits): BASE in bits 10-30 (shifted left by 8 more when bit 9
 * is set), LEAF in bit 8, LCHECK (the label) in bits 0-7 and bit 31; a
 * value unit has bit 31 set and the value in bits 0-30. From the root's
 * s = BASE(0), byte c leads to unit u = s ^ c when LCHECK(u) == c, and then
 * s = u ^ BASE(u); when LEAF(u), unit s holds the replacement's offset.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "gguf/gguf.h"
#include "tok/tok_int.h"

#define UGM_UNK_PENALTY 10.0f

static const char ESCAPED_SPACE[3] = {(char)0xE2, (char)0x96, (char)0x81};
static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

int tok_ugm_init(tok *t, const gguf_file *f) {
  const gguf_value *arr = NULL;
  int rc = gguf_get_arr(f, "tokenizer.ggml.precompiled_charsmap", GGUF_TYPE_COUNT, &arr);
  if (rc && rc != ERR_NOT_FOUND) return rc;
  if (rc == 0 && arr->v.arr.n > 0) {
    const uint32_t et = arr->v.arr.elem_type;
    if (et != GGUF_TYPE_UINT8 && et != GGUF_TYPE_INT8)
      return err_set(ERR_TYPE, "tokenizer.ggml.precompiled_charsmap: expected bytes, got %s elements",
                     gguf_type_name(et));
    const size_t n = (size_t)arr->v.arr.n;
    const uint8_t *p = arr->v.arr.raw;
    uint32_t blob = 0;
    if (n >= 4) memcpy(&blob, p, 4); /* little-endian, as the file */
    if (n < 4 || blob % 4 || (size_t)blob + 4 >= n)
      return err_set(ERR_CORRUPT,
                     "tokenizer.ggml.precompiled_charsmap: %zu bytes cannot hold a double array of %u bytes and "
                     "its replacement strings",
                     n, blob);
    t->ugm_xcda_n = blob / 4;
    t->ugm_repl_n = n - 4 - blob;
    if (!(t->ugm_xcda = malloc(blob ? blob : 4)) || !(t->ugm_repl = malloc(t->ugm_repl_n)))
      return err_set(ERR_NOMEM, "tokenizer charsmap");
    memcpy(t->ugm_xcda, p + 4, blob); /* aligned copy */
    memcpy(t->ugm_repl, p + 4 + blob, t->ugm_repl_n);
  }
  /* sentencepiece's defaults for the unigram normalizer, then the file's */
  t->ugm_escape_ws = true;
  if ((rc = gguf_get_bool(f, "tokenizer.ggml.remove_extra_whitespaces", &t->ugm_merge_ws)) && rc != ERR_NOT_FOUND)
    return rc;
  float min_score = FLT_MAX;
  for (int32_t i = 0; i < t->n_vocab; i++) {
    if (t->types[i] == TOK_TYPE_NORMAL && t->scores[i] < min_score) min_score = t->scores[i];
    if (t->types[i] == TOK_TYPE_USER_DEFINED && t->len[i] > 0) t->ugm_has_user = true;
  }
  t->ugm_unk_score = (min_score == FLT_MAX ? 0.0f : min_score) - UGM_UNK_PENALTY;
  if (t->special[TOK_SPECIAL_UNK] < 0)
    return err_set(ERR_NOT_FOUND, "tokenizer.ggml.model \"t5\": the vocabulary has no unknown token "
                                  "(tokenizer.ggml.unknown_token_id), which unigram tokenization needs");
  return 0;
}

void tok_ugm_free(tok *t) {
  free(t->ugm_xcda);
  free(t->ugm_repl);
  t->ugm_xcda = NULL;
  t->ugm_repl = NULL;
}

/* BASE, LCHECK, LEAF and value of XCDA unit i (see the header); out of the
 * array: a unit that matches nothing. */
static uint32_t xcda_unit(const tok *t, uint32_t i) { return i < t->ugm_xcda_n ? t->ugm_xcda[i] : 0; }
static uint32_t xcda_base(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

/* Longest prefix of text[0..n) the charsmap replaces: its length (0: none)
 * and the replacement in *rep, *rep_n. */
static size_t charsmap_prefix(const tok *t, const char *text, size_t n, const char **rep, size_t *rep_n) {
  if (!t->ugm_xcda_n) return 0;
  size_t best = 0, best_off = 0;
  uint32_t s = xcda_base(xcda_unit(t, 0));
  for (size_t k = 0; k < n; k++) {
    const uint8_t c = (uint8_t)text[k];
    if (c == 0) break;
    const uint32_t u = s ^ c, unit = xcda_unit(t, u);
    if ((unit & ((1u << 31) | 0xffu)) != c) break;
    s = u ^ xcda_base(unit);
    if ((unit >> 8) & 1) {
      best = k + 1;
      best_off = xcda_unit(t, s) & ((1u << 31) - 1);
    }
  }
  if (!best || best_off >= t->ugm_repl_n) return 0; /* a value past the strings: no replacement */
  *rep = t->ugm_repl + best_off;
  *rep_n = strnlen(*rep, t->ugm_repl_n - best_off);
  return best;
}

/* Length of the longest user-defined token text[0..n) starts with, or 0. */
static size_t user_prefix(const tok *t, const char *text, size_t n) {
  size_t max = n < t->max_token_len ? n : t->max_token_len;
  for (size_t l = max; l > 0; l--) {
    int32_t id = tok_lookup(t, text, l);
    if (id >= 0 && t->types[id] == TOK_TYPE_USER_DEFINED) return l;
  }
  return 0;
}

/* Step 1 of the header into out. */
static int normalize(const tok *t, const char *text, size_t len, buf *out) {
  bool prepended = false, in_word = false;
  const bool prepend = t->add_space_prefix;
  for (size_t off = 0; off < len;) {
    const char *piece = text + off;
    size_t piece_n = 0, used = 0;
    if (t->ugm_has_user && (used = user_prefix(t, text + off, len - off))) {
      piece_n = used;
    } else if ((used = charsmap_prefix(t, text + off, len - off, &piece, &piece_n))) {
    } else if ((used = utf8_seq_len(text + off, len - off))) {
      piece_n = used;
    } else {
      piece = REPLACEMENT, piece_n = 3, used = 1;
    }
    for (size_t i = 0; i < piece_n; i++) {
      const char c = piece[i];
      if (c != ' ') {
        if (!in_word) {
          in_word = true;
          if ((prepend && !prepended) || t->ugm_merge_ws) {
            if (t->ugm_escape_ws ? buf_append(out, ESCAPED_SPACE, 3) : buf_append_byte(out, ' ')) return ERR_NOMEM;
            prepended = true;
          }
        }
        if (buf_append_byte(out, c)) return ERR_NOMEM;
      } else {
        in_word = false;
        if (!t->ugm_merge_ws && (t->ugm_escape_ws ? buf_append(out, ESCAPED_SPACE, 3) : buf_append_byte(out, ' ')))
          return ERR_NOMEM;
      }
    }
    off += used;
  }
  return 0;
}

typedef struct ugm_best {
  int32_t id;    /* the last token of the best segmentation ending here */
  size_t start;  /* where that token starts */
  double score;
} ugm_best;

int tok_ugm_encode_piece(const tok *t, const char *text, size_t len, tok_ids *out) {
  buf nb = {0};
  int rc = normalize(t, text, len, &nb);
  const size_t n = nb.len;
  if (rc || n == 0) {
    buf_free(&nb);
    return rc ? err_set(ERR_NOMEM, "tokenizer") : 0;
  }
  /* nb.data is NUL-terminated (buf), and the walk below never reads past n */
  const char *s = nb.data;
  const int32_t unk = t->special[TOK_SPECIAL_UNK];
  ugm_best *best = malloc((n + 1) * sizeof *best);
  if (!best) {
    buf_free(&nb);
    return err_set(ERR_NOMEM, "tokenizer");
  }
  for (size_t i = 0; i <= n; i++) best[i] = (ugm_best){unk, 0, -DBL_MAX};
  best[0].score = 0;
  for (size_t off = 0; off < n;) {
    size_t ch = tok_utf8_len((uint8_t)s[off]);
    if (ch > n - off) ch = n - off;
    bool whole_char = false;
    const size_t max = n - off < t->max_token_len ? n - off : t->max_token_len;
    for (size_t l = 1; l <= max; l++) {
      int32_t id = tok_lookup(t, s + off, l);
      if (id < 0) continue;
      const uint8_t ty = t->types[id];
      if (ty != TOK_TYPE_NORMAL && ty != TOK_TYPE_USER_DEFINED && ty != TOK_TYPE_UNUSED) continue;
      if (l == ch) whole_char = true;
      const double sc = best[off].score + (ty == TOK_TYPE_USER_DEFINED ? 0.0 : (double)t->scores[id]);
      if (sc > best[off + l].score) best[off + l] = (ugm_best){id, off, sc};
    }
    if (!whole_char) {
      const double sc = best[off].score + (double)t->ugm_unk_score;
      if (sc > best[off + ch].score) best[off + ch] = (ugm_best){unk, off, sc};
    }
    off += ch;
  }
  /* read the path back (reversed in place afterwards), unknowns merged */
  const size_t n0 = out->n;
  bool prev_unk = false;
  for (size_t e = n;;) {
    const bool is_unk = best[e].id == unk;
    if (!(prev_unk && is_unk) && (rc = tok_ids_push(out, best[e].id))) break;
    if (best[e].start == 0) break;
    prev_unk = is_unk;
    e = best[e].start;
  }
  for (size_t i = n0, j = out->n; rc == 0 && i + 1 < j; i++, j--) {
    int32_t tmp = out->ids[i];
    out->ids[i] = out->ids[j - 1];
    out->ids[j - 1] = tmp;
  }
  free(best);
  buf_free(&nb);
  return rc;
}
