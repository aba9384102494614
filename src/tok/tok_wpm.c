/*
 * tok_wpm.c - WordPiece ("bert" in GGUF): BERT and the embedding models
 * built on it (bge, MiniLM, nomic, ...), uncased.
 *
 * Follows Hugging Face tokenizers' BertNormalizer + BertPreTokenizer +
 * WordPiece, with utf8proc for the Unicode facts:
 *   normalize  drop NUL, U+FFFD and control characters (category C* except
 *              \t \n \r); whitespace becomes ' '; CJK ideographs get a space
 *              on each side; NFD and drop non-spacing marks (Mn) = strip
 *              accents; lowercase.
 *   split      on whitespace (removed), and around every punctuation
 *              character (ASCII punctuation or category P*; kept as a word).
 *   WordPiece  greedy longest match from the left; a word longer than 100
 *              characters, or with a part no token matches, is [UNK].
 * GGUF stores the vocabulary converted by llama.cpp: a word-initial token
 * "the" is "▁the" and a continuation "##ing" is "ing"; we look up in that
 * form.
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/err.h"
#include "base/util.h"
#include "tok/tok_int.h"

#define WPM_MAX_WORD_CHARS 100

static bool is_ws(int32_t c) {
  switch (c) {
  case '\t': case '\n': case '\r': case ' ': case 0xA0: case 0x1680: case 0x2028: case 0x2029:
  case 0x202F: case 0x205F: case 0x3000:
    return true;
  default:
    return c >= 0x2000 && c <= 0x200A;
  }
}

static bool is_control(int32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  utf8proc_category_t cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CS ||
         cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CN;
}

static bool is_cjk(int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool is_punct(int32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  utf8proc_category_t cat = utf8proc_category(c);
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

typedef struct cps {
  int32_t *v;
  size_t n, cap;
} cps;

static int cps_push(cps *a, int32_t c) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 256;
    int32_t *p = realloc(a->v, cap * sizeof(int32_t));
    if (!p) return err_set(ERR_NOMEM, "normalized text");
    a->v = p;
    a->cap = cap;
  }
  a->v[a->n++] = c;
  return 0;
}

/* Normalized code points of text; invalid UTF-8 bytes are dropped (they
 * would be U+FFFD, which BERT's cleaning removes). */
static int normalize(const char *text, size_t len, cps *out) {
  size_t i = 0;
  while (i < len) {
    utf8proc_int32_t c;
    utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(len - i), &c);
    if (n <= 0) {
      i++;
      continue;
    }
    i += (size_t)n;
    if (c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (is_ws(c)) {
      if (cps_push(out, ' ')) return ERR_NOMEM;
      continue;
    }
    bool cjk = is_cjk(c);
    if (cjk && cps_push(out, ' ')) return ERR_NOMEM;
    utf8proc_int32_t dec[8];
    utf8proc_ssize_t nd = utf8proc_decompose_char(c, dec, 8, UTF8PROC_DECOMPOSE, NULL);
    if (nd <= 0 || nd > 8) {
      dec[0] = c;
      nd = 1;
    }
    for (utf8proc_ssize_t k = 0; k < nd; k++) {
      if (utf8proc_category(dec[k]) == UTF8PROC_CATEGORY_MN) continue;
      if (cps_push(out, utf8proc_tolower(dec[k]))) return ERR_NOMEM;
    }
    if (cjk && cps_push(out, ' ')) return ERR_NOMEM;
  }
  return 0;
}

/* WordPiece on one word (code points w[0..n)). */
static int wordpiece(const tok *t, const int32_t *w, size_t n, buf *scratch, size_t *offs, tok_ids *out) {
  int32_t unk = t->special[TOK_SPECIAL_UNK];
  if (n > WPM_MAX_WORD_CHARS) return unk >= 0 ? tok_ids_push(out, unk) : 0;
  /* UTF-8 of the word with "▁" in front; offs[k] = byte offset of char k */
  buf_reset(scratch);
  if (buf_append(scratch, "\xe2\x96\x81", 3)) return ERR_NOMEM;
  for (size_t k = 0; k < n; k++) {
    offs[k] = scratch->len;
    utf8proc_uint8_t enc[4];
    utf8proc_ssize_t l = utf8proc_encode_char(w[k], enc);
    if (buf_append(scratch, enc, (size_t)l)) return ERR_NOMEM;
  }
  offs[n] = scratch->len;
  size_t n0 = out->n, start = 0;
  while (start < n) {
    int32_t found = -1;
    size_t end = n;
    for (; end > start; end--) {
      size_t b0 = start == 0 ? 0 : offs[start];
      size_t bl = offs[end] - b0;
      if (bl > t->max_token_len) continue;
      found = tok_lookup(t, scratch->data + b0, bl);
      if (found >= 0) break;
    }
    if (found < 0) {
      out->n = n0;
      return unk >= 0 ? tok_ids_push(out, unk) : 0;
    }
    if (tok_ids_push(out, found)) return ERR_NOMEM;
    start = end;
  }
  return 0;
}

int tok_wpm_encode_piece(const tok *t, const char *text, size_t len, tok_ids *out) {
  cps norm = {0};
  buf scratch = BUF_INIT;
  size_t offs[WPM_MAX_WORD_CHARS + 1];
  int rc = normalize(text, len, &norm);
  size_t i = 0;
  while (!rc && i < norm.n) {
    if (norm.v[i] == ' ' || is_ws(norm.v[i])) {
      i++;
      continue;
    }
    if (is_punct(norm.v[i])) {
      rc = wordpiece(t, norm.v + i, 1, &scratch, offs, out);
      i++;
      continue;
    }
    size_t j = i;
    while (j < norm.n && !is_ws(norm.v[j]) && !is_punct(norm.v[j])) j++;
    rc = wordpiece(t, norm.v + i, j - i, &scratch, offs, out);
    i = j;
  }
  free(norm.v);
  buf_free(&scratch);
  return rc;
}
