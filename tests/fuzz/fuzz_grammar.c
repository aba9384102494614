/*
 * fuzz_grammar.c - libFuzzer harness for the GBNF compiler, the matcher and
 * the JSON schema compiler.
 *
 * Input: first byte picks the mode, the rest up to a NUL byte is the
 * grammar (mode even) or a JSON schema (mode odd); the bytes after the NUL
 * are output to match. Properties checked (abort() on violation):
 *   - feeding the output in one piece or byte by byte gives the same answer;
 *   - grammar_token_allowed() agrees with grammar_accept_bytes() on a clone;
 *   - the mask over a small fixed vocabulary equals the per-token answers.
 * Errors from the compilers are fine; crashes, leaks and hangs are not.
 */
#include "fuzz.h"
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sample/grammar.h"
#include "sample/json_schema.h"


static const char *const VOCAB[] = {"{", "}", "\"", "a", "ab", "1", " ", ",", ":", "[", "]", "\xc3",
                                    "\xa9", "\xc3\xa9", "true", "null", "\\", "x\xe2\x82", "\xac"};
#define N_VOCAB (sizeof VOCAB / sizeof VOCAB[0])

static void check(const grammar *g, const uint8_t *out, size_t n) {
  static grammar_vocab *v;
  if (!v) {
    size_t lens[N_VOCAB];
    for (size_t i = 0; i < N_VOCAB; i++) lens[i] = strlen(VOCAB[i]);
    if (grammar_vocab_new(VOCAB, lens, N_VOCAB, &v)) abort();
  }
  grammar_state *whole, *bytes;
  if (grammar_state_new(g, &whole)) return;
  if (grammar_state_new(g, &bytes)) {
    grammar_state_free(whole);
    return;
  }
  bool allowed = grammar_token_allowed(whole, out, n);
  int rc_whole = grammar_accept_bytes(whole, out, n);
  if (n && allowed != (rc_whole == 0)) abort();
  int rc_bytes = 0;
  for (size_t i = 0; i < n && !rc_bytes; i++) rc_bytes = grammar_accept_bytes(bytes, out + i, 1);
  if ((rc_whole == 0) != (rc_bytes == 0) && rc_whole != -5 && rc_bytes != -5) abort();
  if (rc_whole == 0 && grammar_can_end(whole) != grammar_can_end(bytes)) abort();
  uint8_t mask[N_VOCAB];
  bool eos;
  if (grammar_mask(bytes, v, mask, &eos) == 0) {
    if (eos != grammar_can_end(bytes)) abort();
    for (size_t i = 0; i < N_VOCAB; i++) {
      grammar_state *c;
      if (grammar_state_clone(bytes, &c)) break;
      int r = grammar_accept_bytes(c, VOCAB[i], strlen(VOCAB[i]));
      grammar_state_free(c);
      if (r != -5 && (r == 0) != (mask[i] != 0)) abort();
    }
  }
  grammar_state_free(whole);
  grammar_state_free(bytes);
}

FUZZ_TARGET(grammar) {
  if (size < 1 || size > 4096) return 0;
  uint8_t mode = data[0];
  const uint8_t *text = data + 1;
  size_t rest = size - 1;
  const uint8_t *nul = memchr(text, 0, rest);
  size_t text_len = nul ? (size_t)(nul - text) : rest;
  const uint8_t *out = nul ? nul + 1 : text + rest;
  size_t out_len = nul ? rest - text_len - 1 : 0;
  grammar *g = NULL;
  if (mode % 2 == 0) {
    if (grammar_parse((const char *)text, text_len, NULL, &g)) return 0;
  } else {
    json_t *s = json_loadb((const char *)text, text_len, JSON_DECODE_ANY, NULL);
    if (!s) return 0;
    int rc = json_schema_grammar(s, &g);
    json_decref(s);
    if (rc) return 0;
  }
  check(g, out, out_len);
  grammar_free(g);
  return 0;
}
