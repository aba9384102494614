/*
 * tok.h - tokenizers read from GGUF metadata: SentencePiece-style BPE with
 * scores ("llama"), byte-level BPE with a named pre-tokenizer ("gpt2") and
 * WordPiece ("bert"); plus token-to-bytes decoding and a streaming
 * detokenizer that only ever emits whole UTF-8 characters.
 *
 * Ownership: tok_load() copies everything it needs out of the gguf_file, so
 * the file may be closed afterwards. A tok is immutable after load and may be
 * used by several threads at once (each call allocates its own scratch).
 *
 * Errors: negative ERR_* codes with an err_set() detail:
 *   ERR_NOT_FOUND    tokenizer.ggml.model or tokenizer.ggml.tokens absent
 *   ERR_UNSUPPORTED  a tokenizer model we do not implement ("t5", "rwkv",
 *                    "none", unknown names) or an unknown tokenizer.ggml.pre
 *   ERR_TYPE         a tokenizer key with the wrong GGUF type
 *   ERR_CORRUPT      scores/token_type/merges inconsistent with the vocabulary
 *   ERR_NOMEM        allocation failed
 * tok_encode() never fails on the text itself: invalid UTF-8, NUL bytes and
 * long inputs all give ids (invalid bytes go through byte fallback, or [UNK]
 * for WordPiece).
 */
#ifndef PARLEY_TOK_H
#define PARLEY_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "gguf/gguf.h"

typedef struct tok tok;

enum tok_model {
  TOK_MODEL_SPM = 0, /* "llama": SentencePiece BPE with scores, byte fallback */
  TOK_MODEL_BPE = 1, /* "gpt2":  byte-level BPE with merges */
  TOK_MODEL_WPM = 2, /* "bert":  WordPiece */
  TOK_MODEL_UGM = 3, /* "t5":    SentencePiece unigram (T5, XLM-RoBERTa) */
};

/* Token types as stored in tokenizer.ggml.token_type. */
enum tok_type {
  TOK_TYPE_UNDEFINED = 0,
  TOK_TYPE_NORMAL = 1,
  TOK_TYPE_UNKNOWN = 2,
  TOK_TYPE_CONTROL = 3,
  TOK_TYPE_USER_DEFINED = 4,
  TOK_TYPE_UNUSED = 5,
  TOK_TYPE_BYTE = 6,
};

/* Special token roles; tok_special() gives -1 for a role the vocabulary lacks. */
enum tok_special {
  TOK_SPECIAL_BOS = 0,
  TOK_SPECIAL_EOS,
  TOK_SPECIAL_EOT,
  TOK_SPECIAL_UNK,
  TOK_SPECIAL_PAD,
  TOK_SPECIAL_SEP,
  TOK_SPECIAL_CLS,
  TOK_SPECIAL_MASK,
  TOK_SPECIAL_COUNT
};

/* tok_encode flags. */
enum {
  /* Add BOS/EOS (CLS/SEP for WordPiece) as the vocabulary's add_bos_token and
   * add_eos_token say. */
  TOK_ENCODE_ADD_SPECIAL = 1u << 0,
  /* Recognise control tokens written in the text ("<|im_start|>") as those
   * tokens. User-defined tokens are always recognised, as Hugging Face does. */
  TOK_ENCODE_PARSE_SPECIAL = 1u << 1,
};

/* tok_decode_piece / tok_stream flags. */
enum {
  /* Render control and unknown tokens as their text (otherwise nothing). */
  TOK_DECODE_SPECIAL = 1u << 0,
  /* Drop one leading space of the first text emitted when the vocabulary
   * adds a space prefix (SentencePiece, WordPiece): for decoding a whole
   * encoded text, not for continuing a prompt. */
  TOK_DECODE_STRIP_SPACE = 1u << 1,
};

/* A growable array of token ids. */
typedef struct tok_ids {
  int32_t *ids;
  size_t n;
  size_t cap;
} tok_ids;

#define TOK_IDS_INIT {NULL, 0, 0}
int tok_ids_push(tok_ids *v, int32_t id);
void tok_ids_free(tok_ids *v);

int tok_load(const gguf_file *f, tok **out);
void tok_free(tok *t);

enum tok_model tok_model_kind(const tok *t);
/* "llama", "gpt2", "bert", "t5". */
const char *tok_model_name(const tok *t);
/* The tokenizer.ggml.pre name in use ("default" when absent). */
const char *tok_pre_name(const tok *t);
int32_t tok_n_vocab(const tok *t);
int32_t tok_special(const tok *t, enum tok_special role);
bool tok_add_bos(const tok *t);
bool tok_add_eos(const tok *t);
/* Type of id; TOK_TYPE_UNDEFINED when id is out of range. */
enum tok_type tok_token_type(const tok *t, int32_t id);
/* True for control tokens and for EOS/EOT: generation should stop there. */
bool tok_is_eog(const tok *t, int32_t id);
/* The token's stored text (not decoded: "▁the", "Ġthe", "<0x0A>"), NULL when
 * out of range. *len gets its length. */
const char *tok_token_text(const tok *t, int32_t id, size_t *len);
/* Id of an exact stored token text, or -1. */
int32_t tok_lookup(const tok *t, const char *text, size_t len);

/* Appends the ids of text[0..len) to out. flags: TOK_ENCODE_*. On failure
 * (only ERR_NOMEM) out keeps its previous length. */
int tok_encode(const tok *t, const char *text, size_t len, unsigned flags, tok_ids *out);

/* Appends the bytes of one token to out (may be part of a UTF-8 character,
 * e.g. a <0xE2> byte token). flags: TOK_DECODE_SPECIAL. ERR_RANGE for an id
 * outside the vocabulary. */
int tok_decode_piece(const tok *t, int32_t id, unsigned flags, buf *out);

/* Whole-sequence decoding through a tok_stream (complete UTF-8 only; bytes
 * that cannot form UTF-8 come out as U+FFFD; NUL bytes are dropped). */
int tok_decode(const tok *t, const int32_t *ids, size_t n, unsigned flags, buf *out);

/* Streaming detokenizer: feed ids one at a time; each call appends only whole,
 * valid UTF-8 characters, holding back up to 3 bytes of an unfinished one.
 * Byte sequences that can never become valid UTF-8 are emitted as U+FFFD,
 * and NUL bytes not at all (generated text never holds U+0000). 
 * tok_stream_flush() emits what is held (an unfinished tail becomes U+FFFD)
 * and resets the stream. No allocation of its own: init/flush, no free. */
typedef struct tok_stream {
  const tok *t;
  unsigned flags;
  bool started; /* some text has been emitted (for TOK_DECODE_STRIP_SPACE) */
  uint8_t n_held;
  uint8_t held[4];
  buf scratch;  /* the current piece; freed by tok_stream_flush */
} tok_stream;

void tok_stream_init(tok_stream *s, const tok *t, unsigned flags);
int tok_stream_feed(tok_stream *s, int32_t id, buf *out);
int tok_stream_flush(tok_stream *s, buf *out);

#endif
