/*
 * tok_int.h - the tokenizer's internal state, shared by tok.c (loading,
 * special-token splitting, decoding, streaming) and the four algorithms
 * (tok_spm.c, tok_bpe.c, tok_wpm.c, tok_ugm.c). Not for use outside src/tok/.
 */
#ifndef PARLEY_TOK_INT_H
#define PARLEY_TOK_INT_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "gguf/gguf.h"
#include "tok/tok.h"

#define TOK_MAX_REGEX 6
#define TOK_STRIP_LEFT 1u
#define TOK_STRIP_RIGHT 2u

struct tok {
  enum tok_model model;
  char *pre_name;          /* tokenizer.ggml.pre, or "default" */
  int32_t n_vocab;

  /* Token texts, all in one allocation: text i is blob[off[i] .. off[i]+len[i]). */
  char *blob;
  uint32_t *off;
  uint32_t *len;
  float *scores;           /* n_vocab; 0 when the file has none */
  uint8_t *types;          /* n_vocab; enum tok_type */
  size_t max_token_len;    /* longest text in bytes */

  int32_t special[TOK_SPECIAL_COUNT];
  bool add_bos, add_eos;
  bool add_space_prefix;   /* SPM: prefix text with a space; decode strips it */
  bool ignore_merges;      /* BPE (llama3): a whole pre-token in the vocab wins */

  /* text -> id: open addressing, slots hold id+1 (0 = empty); cap power of 2 */
  uint32_t *hash;
  size_t hash_cap;

  /* BPE merges: (left id, right id) -> rank; keys packed as left<<32|right,
   * ranks[] -1 = empty slot. */
  uint64_t *merge_keys;
  int32_t *merge_ranks;
  size_t merge_cap;

  /* SPM: id of <0xNN> (or the one-byte token) per byte, -1 when absent. */
  int32_t byte_tok[256];

  /* Tokens split out of the text before the algorithm runs: control, unknown
   * and user-defined tokens, longest text first (ties: lower id first). */
  int32_t *split_ids;
  size_t n_split;
  /* Per token: TOK_STRIP_LEFT/RIGHT eat ASCII whitespace beside the token
   * when it is split out of the text (NULL when no token has them). */
  uint8_t *strip;

  /* UGM (tok_ugm.c): the precompiled charsmap's double array [ugm_xcda_n]
   * and replacement strings [ugm_repl_n] (copies; NULL when the file has
   * none), the normalizer's switches, the unknown token's score. */
  uint32_t *ugm_xcda;
  size_t ugm_xcda_n;
  char *ugm_repl;
  size_t ugm_repl_n;
  bool ugm_escape_ws, ugm_merge_ws, ugm_has_user;
  float ugm_unk_score;

  /* BPE pre-tokenizer: regexes applied in sequence (each splits every piece
   * the previous ones left, keeping matches and the gaps between them). */
  pcre2_code *re[TOK_MAX_REGEX];
  size_t n_re;
};

static inline const char *tok_text_(const tok *t, int32_t id) { return t->blob + t->off[id]; }

/* Hash of a byte string (FNV-1a, 64-bit). */
uint64_t tok_hash_bytes(const void *p, size_t n);
/* Rank of merging tokens a and b, or -1. */
int32_t tok_merge_rank(const tok *t, int32_t a, int32_t b);

/* Length of the UTF-8 sequence a lead byte announces (1 for invalid bytes,
 * as the reference implementations do, so every byte is consumed). */
static inline size_t tok_utf8_len(uint8_t c) {
  static const uint8_t lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lens[c >> 4];
}

/* The algorithms, each on one piece of raw text (special tokens already
 * split out). They append to out; only ERR_NOMEM can fail. */
int tok_spm_encode_piece(const tok *t, const char *text, size_t len, bool add_prefix, tok_ids *out);
int tok_bpe_encode_piece(const tok *t, const char *text, size_t len, tok_ids *out);
int tok_wpm_encode_piece(const tok *t, const char *text, size_t len, tok_ids *out);
int tok_ugm_encode_piece(const tok *t, const char *text, size_t len, tok_ids *out);
/* UGM setup at load (after the tokens, types, scores and specials): the
 * charsmap and the normalizer keys. */
int tok_ugm_init(tok *t, const gguf_file *f);
void tok_ugm_free(tok *t);

/* BPE setup at load: pick the pre-tokenizer by name and compile it. */
int tok_bpe_init(tok *t);
void tok_bpe_free(tok *t);
/* For tests: the pre-tokenizer's segments of text (offsets and lengths,
 * malloc'ed, caller frees), and the patterns of a pre-tokenizer name. */
int tok_bpe_split(const tok *t, const char *text, size_t len, size_t **offs, size_t **lens, size_t *n);
const char *const *tok_bpe_pre_patterns(const char *name, size_t *n);
/* Default of add_bos_token for a pre-tokenizer name (true for Llama 3). */
bool tok_bpe_pre_adds_bos(const char *pre);
/* Appends the bytes a byte-level BPE token text stands for. */
int tok_bpe_unmap(const char *text, size_t len, buf *out);

#endif
