/*
 * fuzz_tok.c - libFuzzer harness for the tokenizers on client text: the
 * first byte picks a real vocabulary from ../shared/vocab (SentencePiece,
 * byte-level BPE with its pre-tokenizer regex, WordPiece) and the encode
 * flags; the rest is the text, as a prompt would reach tok_encode. Every id
 * must be in the vocabulary, decoding them must succeed, and when the whole
 * decode is valid UTF-8 the streaming decoder must give the same bytes. Without the shared
 * folder ($PARLEY_SHARED or ../shared) the harness does nothing.
 */
#include "fuzz.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "gguf/gguf.h"
#include "tok/tok.h"

static const char *const VOCABS[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-bert-bge.gguf",
                                     "ggml-vocab-phi-3.gguf"};
#define N_VOCABS (sizeof VOCABS / sizeof VOCABS[0])
static gguf_file *g_file[N_VOCABS];

/* Strict UTF-8 (no overlongs, surrogates or values past U+10FFFF): what the
 * streaming decoder passes through unchanged. */
static bool utf8_ok(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t k = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 4;
    if (k == 4 || i + k >= n) return false;
    unsigned cp = k == 0 ? c : k == 1 ? c & 0x1F : k == 2 ? c & 0x0F : c & 0x07;
    for (size_t j = 1; j <= k; j++) {
      if ((s[i + j] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + j] & 0x3F);
    }
    static const unsigned MIN[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < MIN[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += k + 1;
  }
  return true;
}
static tok *g_tok[N_VOCABS];

FUZZ_INIT(tok) {
  const char *shared = getenv("PARLEY_SHARED");
  for (size_t i = 0; i < N_VOCABS; i++) {
    if (g_tok[i]) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/%s", shared && *shared ? shared : "../shared", VOCABS[i]);
    if (gguf_open(path, &g_file[i]) != 0) continue;
    if (tok_load(g_file[i], &g_tok[i]) != 0) g_tok[i] = NULL;
  }
}

FUZZ_TARGET(tok) {
  if (size < 1 || size > 4096) return 0;
  const tok *t = g_tok[data[0] % N_VOCABS];
  if (!t) return 0;
  unsigned flags = (data[0] >> 2) & (TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL);
  tok_ids ids = TOK_IDS_INIT;
  if (tok_encode(t, (const char *)data + 1, size - 1, flags, &ids) == 0) {
    int32_t n_vocab = tok_n_vocab(t);
    for (size_t i = 0; i < ids.n; i++)
      if (ids.ids[i] < 0 || ids.ids[i] >= n_vocab) abort();
    buf whole = BUF_INIT, streamed = BUF_INIT;
    if (tok_decode(t, ids.ids, ids.n, 0, &whole) != 0) abort();
    tok_stream st;
    tok_stream_init(&st, t, 0);
    for (size_t i = 0; i < ids.n; i++)
      if (tok_stream_feed(&st, ids.ids[i], &streamed) != 0) abort();
    tok_stream_flush(&st, &streamed);
    bool valid = utf8_ok((const unsigned char *)whole.data, whole.len);
    if (valid && (whole.len != streamed.len || (whole.len && memcmp(whole.data, streamed.data, whole.len) != 0)))
      abort();
    buf_free(&whole);
    buf_free(&streamed);
  }
  tok_ids_free(&ids);
  return 0;
}
