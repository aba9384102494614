/*
 * testgen_vocab.c - vocabulary files the project writes itself
 * (`parley gen-vocab`), so the API tests and a fresh clone have a real
 * tokenizer without ../shared/vocab.
 *
 * Two kinds, in the layout llama.cpp's converter writes for the real ones:
 *   spm  tokenizer.ggml.model "llama": <unk> <s> </s>, the 256 byte-fallback
 *        tokens <0x00>..<0xFF> (type 6), then pieces with log-probability
 *        scores: common English words behind the "▁" word marker with every
 *        prefix of them (SentencePiece merges pairs of pieces, so a word is
 *        reachable only through its prefixes), suffixes, every printable
 *        ASCII character, runs of spaces, JSON punctuation pairs and every
 *        string of two or three lowercase letters. A piece's score grows with its length, so merges
 *        build whole words before they settle for parts.
 *   wpm  tokenizer.ggml.model "bert" (an uncased WordPiece vocabulary):
 *        [PAD] [UNK] [CLS] [SEP] [MASK] at their usual ids 0/100/101/102/103
 *        (the ids between are [unusedN]); in the converter's form, a
 *        word-initial piece is "▁word" and a continuation ("##ing") is bare:
 *        every printable character both ways, the words, the suffixes,
 *        two-letter strings both ways and three-letter continuations.
 *   fim  spm plus StarCoder's fill-in-the-middle control tokens
 *        <fim_prefix> <fim_suffix> <fim_middle> (type 3) at its end, for
 *        the suffix / infill tests of a code model.
 * The pieces are fixed tables, so the same command writes the same bytes.
 */
#include "model/testgen.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "gguf/gguf.h"

/* Words both kinds know, commonest first. */
static const char *const WORDS[] = {
    "the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on", "are", "as", "with",
    "his", "they", "at", "be", "this", "have", "from", "or", "one", "had", "by", "word", "but", "not", "what",
    "all", "were", "we", "when", "your", "can", "said", "there", "use", "an", "each", "which", "she", "do",
    "how", "their", "if", "will", "up", "other", "about", "out", "many", "then", "them", "these", "so",
    "some", "her", "would", "make", "like", "him", "into", "time", "has", "look", "two", "more", "write",
    "go", "see", "number", "no", "way", "could", "people", "my", "than", "first", "water", "been", "call",
    "who", "its", "now", "find", "long", "down", "day", "did", "get", "come", "made", "may", "part", "hello",
    "world", "weather", "city", "paris", "london", "tool", "call", "function", "name", "value", "answer",
    "question", "please", "tell", "me", "say", "hi", "yes", "ok", "thanks", "test", "model", "text", "json",
    "data", "list", "number", "red", "blue", "green", "one", "two", "three", "four", "five", "story",
    "short", "write", "reply", "user", "assistant", "system", "think", "search", "file", "code", "line",
    "time", "today", "now", "good", "new", "old", "big", "small", "cat", "dog", "sun", "moon", "sky",
    "water", "fire", "book", "read", "run", "stop", "go", "get", "put", "set", "key", "true", "false", "null",
};
/* Suffix pieces (spm: bare; wpm: after "##"). */
static const char *const SUFFIXES[] = {
    "s", "ed", "ing", "er", "ly", "es", "en", "est", "tion", "al", "ment", "ness", "able", "ful", "th",
    "on", "an", "in", "at", "or", "re", "le", "ll", "nd", "st",
};

/* JSON punctuation pieces (spm). */
static const char *const JSON_PIECES[] = {
    "\":", "\",", "{\"", "\"}", "},", "[{", "}]", "\":\"", "\",\"", "\xe2\x96\x81\"", "\xe2\x96\x81{", "\":\xe2\x96\x81\"",
    "\xe2\x96\x81}", "[]", "{}", "\xe2\x96\x81[",
};

/* A growable list of owned piece strings with their scores and types, and
 * an open-addressing index of the texts so each piece is added once. */
typedef struct {
  char **text;
  float *score;
  int32_t *type;
  size_t n, cap;
  int32_t *slot; /* index into text, -1 empty; n_slot a power of two */
  size_t n_slot;
} piece_list;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The slot holding s, or the empty slot where it goes. */
static size_t find_slot(const piece_list *l, const char *s) {
  size_t i = (size_t)hash_str(s) & (l->n_slot - 1);
  while (l->slot[i] >= 0 && strcmp(l->text[l->slot[i]], s) != 0) i = (i + 1) & (l->n_slot - 1);
  return i;
}

static int grow(piece_list *l) {
  size_t cap = l->cap ? l->cap * 2 : 1024;
  char **t = realloc(l->text, cap * sizeof *t);
  if (t) l->text = t;
  float *sc = realloc(l->score, cap * sizeof *sc);
  if (sc) l->score = sc;
  int32_t *ty = realloc(l->type, cap * sizeof *ty);
  if (ty) l->type = ty;
  int32_t *slot = malloc(2 * cap * sizeof *slot);
  if (!t || !sc || !ty || !slot) {
    free(slot);
    return err_set(ERR_NOMEM, "gen-vocab");
  }
  free(l->slot);
  l->slot = slot;
  l->n_slot = 2 * cap;
  for (size_t i = 0; i < l->n_slot; i++) l->slot[i] = -1;
  for (size_t i = 0; i < l->n; i++) l->slot[find_slot(l, l->text[i])] = (int32_t)i;
  l->cap = cap;
  return 0;
}

static int add_piece(piece_list *l, const char *s, int32_t type) {
  if (l->n == l->cap && grow(l)) return ERR_NOMEM;
  size_t at = find_slot(l, s);
  if (l->slot[at] >= 0) return 0; /* a piece once, at its first rank */
  if (!(l->text[l->n] = strdup(s))) return err_set(ERR_NOMEM, "gen-vocab");
  /* longer first, then earlier (commoner) first */
  l->score[l->n] = (float)strlen(s) - 1e-5f * (float)l->n;
  l->type[l->n] = type;
  l->slot[at] = (int32_t)l->n++;
  return 0;
}

static void free_pieces(piece_list *l) {
  for (size_t i = 0; i < l->n; i++) free(l->text[i]);
  free(l->text);
  free(l->score);
  free(l->type);
  free(l->slot);
}

/* "▁" (U+2581) before s: the word-start marker of both layouts. */
static int add_marked(piece_list *l, const char *s) {
  char b[64];
  snprintf(b, sizeof b, "\xe2\x96\x81%s", s);
  return add_piece(l, b, 1);
}

/* Every lowercase letter string of length len (2 or 3): 676 or 17,576
 * pieces, marked or bare. They give the vocabulary the bulk of multi-letter
 * pieces a real one has, so a random model picks a byte-fallback token about
 * as rarely as with a real vocabulary (text in a forced JSON string then
 * costs a similar number of tokens). */
static int add_letter_strings(piece_list *l, int len, bool marked) {
  char b[4] = {0};
  int n = len == 2 ? 26 * 26 : 26 * 26 * 26, rc = 0;
  for (int i = 0; !rc && i < n; i++) {
    for (int k = 0, v = i; k < len; k++, v /= 26) b[len - 1 - k] = (char)('a' + v % 26);
    b[len] = 0;
    rc = marked ? add_marked(l, b) : add_piece(l, b, 1);
  }
  return rc;
}

static int build_spm(piece_list *l) {
  int rc = add_piece(l, "<unk>", 2);
  if (!rc) rc = add_piece(l, "<s>", 3);
  if (!rc) rc = add_piece(l, "</s>", 3);
  for (int c = 0; !rc && c < 256; c++) {
    char b[8];
    snprintf(b, sizeof b, "<0x%02X>", c);
    rc = add_piece(l, b, 6);
  }
  for (size_t i = 0; !rc && i < sizeof WORDS / sizeof *WORDS; i++) {
    char pre[32];
    size_t n = strlen(WORDS[i]);
    for (size_t k = 1; !rc && k <= n && k < sizeof pre; k++) {
      memcpy(pre, WORDS[i], k);
      pre[k] = 0;
      rc = add_marked(l, pre);
    }
  }
  for (size_t i = 0; !rc && i < sizeof SUFFIXES / sizeof *SUFFIXES; i++) rc = add_piece(l, SUFFIXES[i], 1);
  if (!rc) rc = add_piece(l, "\xe2\x96\x81", 1);
  for (int c = 'A'; !rc && c <= 'Z'; c++) rc = add_marked(l, (char[]){(char)c, 0});
  for (int c = 0x21; !rc && c < 0x7f; c++) rc = add_piece(l, (char[]){(char)c, 0}, 1);
  /* runs of 2..16 spaces and JSON's punctuation pairs, as real vocabularies
   * have them: indentation and structure cost few tokens */
  char run[3 * 16 + 1] = "";
  for (int k = 1; !rc && k <= 16; k++) {
    strcat(run, "\xe2\x96\x81");
    if (k >= 2) rc = add_piece(l, run, 1);
  }
  for (size_t i = 0; !rc && i < sizeof JSON_PIECES / sizeof *JSON_PIECES; i++) rc = add_piece(l, JSON_PIECES[i], 1);
  if (!rc) rc = add_letter_strings(l, 2, true);
  if (!rc) rc = add_letter_strings(l, 2, false);
  if (!rc) rc = add_letter_strings(l, 3, false);
  return rc;
}

static int build_wpm(piece_list *l) {
  /* ids 0..103 as the BERT vocabularies lay them out */
  int rc = add_piece(l, "[PAD]", 3);
  for (int i = 1; !rc && i < 100; i++) {
    char b[16];
    snprintf(b, sizeof b, "[unused%d]", i - 1);
    rc = add_piece(l, b, 1);
  }
  if (!rc) rc = add_piece(l, "[UNK]", 3);
  if (!rc) rc = add_piece(l, "[CLS]", 3);
  if (!rc) rc = add_piece(l, "[SEP]", 3);
  if (!rc) rc = add_piece(l, "[MASK]", 3);
  for (size_t i = 0; !rc && i < sizeof WORDS / sizeof *WORDS; i++) rc = add_marked(l, WORDS[i]);
  for (size_t i = 0; !rc && i < sizeof SUFFIXES / sizeof *SUFFIXES; i++) rc = add_piece(l, SUFFIXES[i], 1);
  for (int c = 0x21; !rc && c < 0x7f; c++) {
    if (c >= 'A' && c <= 'Z') continue; /* uncased: text is lowercased first */
    rc = add_marked(l, (char[]){(char)c, 0});
    if (!rc) rc = add_piece(l, (char[]){(char)c, 0}, 1);
  }
  if (!rc) rc = add_letter_strings(l, 2, true);
  if (!rc) rc = add_letter_strings(l, 2, false);
  if (!rc) rc = add_letter_strings(l, 3, false);
  return rc;
}

int model_testgen_vocab_write(const char *path, const char *kind, int64_t *n_tokens) {
  bool fim = strcmp(kind, "fim") == 0, spm = fim || strcmp(kind, "spm") == 0;
  if (!spm && strcmp(kind, "wpm") != 0)
    return err_set(ERR_INVALID, "gen-vocab: kind is spm, wpm or fim, not '%s'", kind);
  piece_list l = {0};
  gguf_writer *w = NULL;
  int rc = spm ? build_spm(&l) : build_wpm(&l);
  static const char *const FIM[] = {"<fim_prefix>", "<fim_suffix>", "<fim_middle>"};
  for (size_t i = 0; fim && !rc && i < sizeof FIM / sizeof *FIM; i++) rc = add_piece(&l, FIM[i], 3);
  if (!rc) rc = gguf_writer_new(&w);
  const char *arch = spm ? "llama" : "bert";
  if (!rc) rc = gguf_writer_add_str(w, "general.architecture", arch);
  if (!rc) rc = gguf_writer_add_str(w, "general.name", spm ? "parley-vocab-spm" : "parley-vocab-wpm");
  if (!rc) rc = gguf_writer_add_str(w, "tokenizer.ggml.model", spm ? "llama" : "bert");
  if (!rc) rc = gguf_writer_add_str(w, "tokenizer.ggml.pre", spm ? "default" : "bert-bge");
  if (!rc) rc = gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)l.text, l.n);
  if (!rc && spm) rc = gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, l.score, l.n);
  if (!rc) rc = gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, l.type, l.n);
  if (spm) {
    if (!rc) rc = gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
    if (!rc) rc = gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (!rc) rc = gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (!rc) rc = gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true);
    if (!rc) rc = gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", false);
  } else {
    if (!rc) rc = gguf_writer_add_u32(w, "tokenizer.ggml.token_type_count", 2);
    if (!rc) rc = gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 100);
    if (!rc) rc = gguf_writer_add_u32(w, "tokenizer.ggml.cls_token_id", 101);
    if (!rc) rc = gguf_writer_add_u32(w, "tokenizer.ggml.seperator_token_id", 102);
    if (!rc) rc = gguf_writer_add_u32(w, "tokenizer.ggml.mask_token_id", 103);
    if (!rc) rc = gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", 0);
  }
  if (!rc) rc = gguf_writer_write_file(w, path);
  if (!rc && n_tokens) *n_tokens = (int64_t)l.n;
  gguf_writer_free(w);
  free_pieces(&l);
  return rc;
}
