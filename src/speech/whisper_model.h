/*
 * whisper_model.h - the Whisper encoder-decoder forward pass on parley's
 * kernels (kern_matmul over every weight type, kern_attn_tile, ops.h, the
 * thread pool), over a model file opened by whisper_file.h.
 *
 * The network is OpenAI's whisper/model.py:
 *   encoder: mel [n_mels][n_frames] -> conv1 (k 3, pad 1) -> GELU -> conv2
 *     (k 3, stride 2, pad 1) -> GELU -> + sinusoidal positions -> blocks ->
 *     LayerNorm (ln_post): [n_ctx][n_state], n_ctx = ceil(n_frames / 2)
 *   encoder block: x += attn(LN(x)); x += mlp(LN(x)), attention with biases
 *     on query, value and out but none on key; mlp = Linear 4S, GELU, Linear S
 *   decoder: token embedding + learned positions -> blocks -> LayerNorm ->
 *     logits by the token embedding (tied)
 *   decoder block: x += causal self-attn(LN(x)) over a cache of earlier
 *     tokens; x += cross-attn(LN(x)) over the encoder output, whose keys and
 *     values are computed once per encode; x += mlp(LN(x))
 *   GELU is the exact erf form (PyTorch's nn.GELU, what the weights were
 *   trained with; whisper.cpp computes the tanh approximation); LayerNorm
 *   eps 1e-5; attention scores scaled by 1/sqrt(head_dim).
 *
 * n_frames may be anything from 1 to 2 * n_audio_ctx: Whisper itself always
 * feeds 30 s (3000 frames, the audio zero-padded before the log-mel), and a
 * caller that wants its exact outputs pads the same way; a shorter mel runs
 * the encoder over fewer positions (what whisper.cpp's audio_ctx option
 * does), positions 0..n_ctx-1 of the embedding.
 *
 * Ownership and threads: a whisper_model borrows its whisper_file (which
 * must outlive it) and holds the weight matrices copied into aligned memory
 * (repacked where the CPU has a faster layout); it is immutable, so any
 * number of states on any threads may share it. A whisper_state is one
 * decoding stream (encoder output, cross-attention keys/values, the
 * self-attention cache, scratch) used by one thread at a time; it borrows
 * the thread pool given at creation (NULL: single-threaded), which must
 * outlive it and serve one caller at a time (kernels.h).
 */
#ifndef PARLEY_SPEECH_WHISPER_MODEL_H
#define PARLEY_SPEECH_WHISPER_MODEL_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "speech/whisper_file.h"

typedef struct whisper_model whisper_model;
typedef struct whisper_state whisper_state;

/* Binds the tensors of f (already checked by whisper_file_open) and copies
 * the matrices out of the mapping. ERR_NOMEM, or ERR_UNSUPPORTED when a
 * tensor's type has no kernel. */
int whisper_model_new(const whisper_file *f, whisper_model **out);
void whisper_model_free(whisper_model *m);
const whisper_hparams *whisper_model_hparams(const whisper_model *m);

/* A state with caches for n_audio_ctx encoder positions and n_text_ctx
 * tokens. tp borrowed (NULL: run on the calling thread). */
int whisper_state_new(const whisper_model *m, thread_pool *tp, whisper_state **out);
void whisper_state_free(whisper_state *s);

/* Runs the encoder on mel [n_mels][n_frames] (mel-major, whisper_mel's
 * layout) and the cross-attention keys and values of every decoder layer;
 * the self-attention cache is emptied. ERR_RANGE for n_frames < 1 (no
 * audio), ERR_TOO_LARGE for more than 2 * n_audio_ctx frames (over 30 s:
 * the caller windows long audio), ERR_INVALID for a NULL mel. On error the
 * state has no encoder output (a decode refuses until the next encode). */
int whisper_encode(whisper_state *s, const float *mel, int64_t n_frames);
/* The last encode's output [n_ctx][n_state] (valid until the next encode);
 * NULL before any. */
const float *whisper_encoder_output(const whisper_state *s, int64_t *n_ctx);

enum whisper_logits { WHISPER_LOGITS_LAST = 0, WHISPER_LOGITS_ALL = 1 };

/* Decodes toks[n] at positions n_past .. n_past + n - 1 after the n_past
 * tokens already in the cache (entries from n_past on are overwritten), and
 * writes logits [n_vocab] of the last token, or [n][n_vocab] for
 * WHISPER_LOGITS_ALL. Errors: ERR_INVALID before an encode or for n < 1,
 * n_past < 0 or NULL pointers; ERR_CONTEXT when n_past + n exceeds
 * n_text_ctx (naming both); ERR_RANGE for a token outside 0..n_vocab-1
 * (naming its index and value). A failed call leaves the cache before
 * n_past intact. */
int whisper_decode(whisper_state *s, const int32_t *toks, int n, int n_past, float *logits, enum whisper_logits which);

#endif
