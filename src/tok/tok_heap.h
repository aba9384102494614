/*
 * tok_heap.h - the binary heap of candidate merges that the two merging
 * tokenizers (tok_bpe.c by rank, tok_spm.c by score) pop best-first: one
 * copy of the sift-up and sift-down, each tokenizer keeping its own bigram
 * and order.
 *
 * Included inside those .c files, after they define
 *     typedef struct bigram { ...; int left, right; ... } bigram;
 *     static bool bg_before(const bigram *a, const bigram *b);  (a pops first)
 * it defines the static `heap` (free its v when done), heap_push and
 * heap_pop for that bigram. Not a public header: nothing else includes it.
 */
#ifndef PARLEY_TOK_HEAP_H
#define PARLEY_TOK_HEAP_H

#include <stdlib.h>

#include "base/err.h"

typedef struct heap {
  bigram *v;
  size_t n, cap;
} heap;

/* Adds b; ERR_NOMEM when the queue cannot grow. */
static int heap_push(heap *h, bigram b) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 64;
    bigram *p = realloc(h->v, cap * sizeof(bigram));
    if (!p) return err_set(ERR_NOMEM, "tokenizer merge queue");
    h->v = p;
    h->cap = cap;
  }
  size_t i = h->n++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!bg_before(&b, &h->v[parent])) break;
    h->v[i] = h->v[parent];
    i = parent;
  }
  h->v[i] = b;
  return 0;
}

/* Removes and returns the first bigram by bg_before; h must not be empty. */
static bigram heap_pop(heap *h) {
  bigram top = h->v[0];
  bigram last = h->v[--h->n];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, best = i;
    const bigram *bv = &last;
    if (l < h->n && bg_before(&h->v[l], bv)) {
      best = l;
      bv = &h->v[l];
    }
    if (r < h->n && bg_before(&h->v[r], bv)) best = r;
    if (best == i) break;
    h->v[i] = h->v[best];
    i = best;
  }
  if (h->n) h->v[i] = last;
  return top;
}

#endif
