/*
 * testgen.h - writes random-weight llama GGUF files with the project's own
 * GGUF writer: test models for the unit tests (compared against the numpy
 * reference tools/ref_llama.py) and benchmark models of real shapes
 * (`parley bench` on TinyLlama's shape).
 *
 * Weights are drawn from a seeded generator, scaled so that activations stay
 * of order one through the layers (matrices uniform in +-sqrt(3/n_cols),
 * norms 1 +- 0.1, embeddings unit variance, output rows scaled so logits
 * spread over a few units): greedy choices are then clear-cut rather than
 * near ties. Quantized types are written with ref_quantize_row.
 */
#ifndef PARLEY_MODEL_TESTGEN_H
#define PARLEY_MODEL_TESTGEN_H

#include <stdbool.h>
#include <stdint.h>

typedef struct model_testgen {
  int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
  int64_t n_rot;            /* 0 = head_dim */
  uint32_t type;            /* enum tensor_type of the layer matrices */
  uint32_t type_embd;       /* token_embd.weight */
  uint32_t type_output;     /* output.weight (unused when tied) */
  uint32_t type_ffn_down;   /* blk.N.ffn_down.weight and blk.N.attn_v.weight
                               (a Q4_K_M-like mix uses Q6_K here) */
  bool tied;                /* no output.weight: logits use token_embd */
  bool rope_freqs;          /* write a Llama-3 style rope_freqs.weight */
  float rope_freq_base;     /* 0 = leave the key out (default 10000) */
  float rope_scale_linear;  /* 0 = no scaling keys */
  float norm_eps;           /* 0 = 1e-5 */
  uint64_t seed;
  const char *vocab_path;   /* NULL, or a GGUF whose tokenizer.* keys are
                               copied (n_vocab then becomes its token count) */
  const char *chat_template; /* NULL, or tokenizer.chat_template's text
                               (overrides the vocabulary file's) */
  const char *name;         /* general.name; NULL: "parley random llama"
                               (family detection reads it) */
} model_testgen;

/* The small test shape: n_embd 64, 2 layers, 4 heads, 2 KV heads, n_ff 160,
 * vocab 300, context 128, all F32, untied. */
model_testgen model_testgen_small(void);
/* TinyLlama-1.1B's shape (n_embd 2048, 22 layers, 32 heads, 4 KV heads,
 * n_ff 5632, vocab 32000, context 2048) in type t; Q4_K gives a Q4_K_M-like
 * mix (Q6_K output, ffn_down and attn_v). */
model_testgen model_testgen_tinyllama(uint32_t t);

/* Copies every tokenizer.* key of the GGUF file vocab_path into w (but
 * tokenizer.chat_template* when skip_template) and sets *n_vocab to its
 * token count. For the generators (testgen.c, testgen_arch.c). */
struct gguf_writer;
int model_testgen_copy_vocab(struct gguf_writer *w, const char *vocab_path, bool skip_template, int64_t *n_vocab);
/* For a file without a vocabulary: tokenizer.ggml.model "none" and
 * ARCH.vocab_size, the standard way to say so, which other GGUF readers
 * need to load the file (llama.cpp's, in bench/llamacpp.sh). */
int model_testgen_mark_no_vocab(struct gguf_writer *w, const char *arch, int64_t n_vocab);

/* Writes a vocabulary-only GGUF of the project's own (testgen_vocab.c):
 * kind "spm" (a SentencePiece "llama" tokenizer with byte fallback) or "wpm"
 * (an uncased BERT WordPiece one) or "fim" (spm with StarCoder's
 * fill-in-the-middle tokens), for --vocab where ../shared/vocab is
 * absent; *n_tokens (if not NULL) gets its token count. ERR_INVALID for
 * another kind. */
int model_testgen_vocab_write(const char *path, const char *kind, int64_t *n_tokens);

/* Writes the file (path.tmp, then renamed). ERR_RANGE for shapes a type
 * cannot hold (row lengths must be multiples of the block size). */
int model_testgen_write(const model_testgen *g, const char *path);

#endif
