/*
 * tok_spm.c - SentencePiece-style BPE with scores ("llama" in GGUF), the
 * tokenizer of Llama 1/2, Mistral, Phi-3, Gemma and others.
 *
 * Behaviour follows llama.cpp's llm_tokenizer_spm (itself a port of
 * sentencepiece's bpe_model): the text is optionally prefixed with a space,
 * every space becomes U+2581 "▁", the text is cut into UTF-8 characters, and
 * the adjacent pair whose concatenation is a vocabulary token with the
 * highest score is merged, repeatedly (ties: the leftmost pair). A final
 * symbol that is not a token is emitted byte by byte through the <0xNN>
 * byte tokens ("byte fallback"), or [UNK] when the vocabulary has none.
 *
 * Invariant: symbols are contiguous slices of the escaped text; a merged-away
 * symbol has n == 0; a queued bigram is stale when its two symbols no longer
 * add up to the size it was queued with.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "tok/tok_int.h"

typedef struct sym {
  size_t start;
  size_t n;
  int prev, next;
} sym;

typedef struct bigram {
  float score;
  int left, right;
  size_t size;
} bigram;

/* a before b: higher score, then smaller left index */
static bool bg_before(const bigram *a, const bigram *b) {
  return a->score > b->score || (a->score == b->score && a->left < b->left);
}

#include "tok/tok_heap.h"

static int try_bigram(const tok *t, const char *text, const sym *syms, int left, int right, heap *h) {
  if (left < 0 || right < 0) return 0;
  size_t size = syms[left].n + syms[right].n;
  int32_t id = tok_lookup(t, text + syms[left].start, size);
  if (id < 0) return 0;
  return heap_push(h, (bigram){t->scores[id], left, right, size});
}

int tok_spm_encode_piece(const tok *t, const char *text, size_t len, bool add_prefix, tok_ids *out) {
  /* escape: optional leading space, ' ' -> U+2581 (3 bytes) */
  size_t n_spaces = add_prefix ? 1 : 0;
  for (size_t i = 0; i < len; i++) n_spaces += text[i] == ' ';
  size_t cap;
  if (!size_mul(n_spaces, 2, &cap) || !size_add(cap, len, &cap) || !size_add(cap, 1, &cap))
    return err_set(ERR_TOO_LARGE, "text to tokenize");
  char *esc = malloc(cap);
  if (!esc) return err_set(ERR_NOMEM, "text to tokenize (%zu bytes)", len);
  size_t m = 0;
  if (add_prefix) {
    memcpy(esc, "\xe2\x96\x81", 3);
    m = 3;
  }
  for (size_t i = 0; i < len; i++) {
    if (text[i] == ' ') {
      memcpy(esc + m, "\xe2\x96\x81", 3);
      m += 3;
    } else {
      esc[m++] = text[i];
    }
  }
  if (m == 0) {
    free(esc);
    return 0;
  }

  int rc = 0;
  heap h = {0};
  sym *syms = NULL;
  size_t n_syms = 0;
  /* one symbol per UTF-8 character (an invalid byte is a character of its own) */
  for (size_t off = 0; off < m; n_syms++) off += tok_utf8_len((uint8_t)esc[off]) < m - off ? tok_utf8_len((uint8_t)esc[off]) : m - off;
  if (n_syms > INT32_MAX - 1 || !(syms = malloc(n_syms * sizeof(sym)))) {
    rc = err_set(ERR_NOMEM, "text to tokenize (%zu bytes)", len);
    goto done;
  }
  size_t off = 0;
  for (size_t i = 0; i < n_syms; i++) {
    size_t cl = tok_utf8_len((uint8_t)esc[off]);
    if (cl > m - off) cl = m - off;
    syms[i] = (sym){off, cl, (int)i - 1, i + 1 == n_syms ? -1 : (int)i + 1};
    off += cl;
  }
  for (size_t i = 1; i < n_syms; i++)
    if ((rc = try_bigram(t, esc, syms, (int)i - 1, (int)i, &h))) goto done;

  while (h.n) {
    bigram b = heap_pop(&h);
    sym *l = &syms[b.left], *r = &syms[b.right];
    if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
    l->n += r->n;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0) syms[r->next].prev = b.left;
    if ((rc = try_bigram(t, esc, syms, l->prev, b.left, &h))) goto done;
    if ((rc = try_bigram(t, esc, syms, b.left, l->next, &h))) goto done;
  }

  for (int i = 0; i != -1; i = syms[i].next) {
    const sym *s = &syms[i];
    int32_t id = tok_lookup(t, esc + s->start, s->n);
    if (id >= 0) {
      if ((rc = tok_ids_push(out, id))) goto done;
      continue;
    }
    /* byte fallback */
    for (size_t j = 0; j < s->n; j++) {
      int32_t bid = t->byte_tok[(uint8_t)esc[s->start + j]];
      if (bid < 0) bid = t->special[TOK_SPECIAL_UNK];
      if (bid >= 0 && (rc = tok_ids_push(out, bid))) goto done;
    }
  }
done:
  free(h.v);
  free(syms);
  free(esc);
  return rc;
}
