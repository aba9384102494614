/*
 * chunk.h - how many prompt tokens one continuous-batching step may carry
 * next to decoding streams so that the step stays within a time budget
 * (engine_params.chunk_budget_ms). Pure arithmetic over measured step
 * times, kept apart from the engine so that tests can feed it fake costs.
 *
 * The model (bench/step.c measures it): a step of d decode tokens and k
 * prompt tokens costs
 *
 *     base(d) + k x tok
 *
 * where base(d) is a decode-only step of d tokens (mostly reading every
 * weight once) and tok what one more prompt token adds. tok is not a
 * constant: a chunk token's attention reads every cached position before
 * it, so at position 2,000 a TinyLlama-shaped prompt token costs ~1.5x one
 * at position 0, and it moves 2-3x with the machine's load. So tok is
 * re-measured from every step that carried prompt tokens (its time minus
 * base(d), per prompt token) and weighted half-and-half with the previous
 * estimate: it follows the prompt's position and the load within a step or
 * two. base(d) is a moving average of decode-only steps per d; while a
 * long prompt prefills every step carries prompt tokens, so every
 * CHUNK_REBASE-th step carries none and measures base(d) again (a load
 * change would otherwise be charged to the prompt tokens, and a stale base
 * split the wrong way: a shrinking chunk, or one too big when the load
 * drops). That costs the prompt ~3% of its steps' time.
 */
#ifndef PARLEY_ENGINE_CHUNK_H
#define PARLEY_ENGINE_CHUNK_H

#include <stdint.h>

enum {
  CHUNK_N_BASE = 65,   /* base(d) is kept for d = 1..64 (more: base(64)) */
  CHUNK_COLD = 8,      /* prompt tokens per step before any cost is known */
  CHUNK_MIN = 4,       /* never fewer prompt tokens per step than this */
  CHUNK_REBASE = 8     /* after this many steps with prompt tokens next to
                          decoding, one decode-only step re-measures base */
};

typedef struct chunk_cost {
  uint64_t tok_ns;                  /* time one prompt token adds to a step,
                                       ns; 0 = not measured yet */
  uint64_t base_ns[CHUNK_N_BASE];   /* [d]: decode-only step of d tokens,
                                       ns (moving average); 0 = not yet */
  int32_t n_mixed;                  /* steps with decode and prompt tokens
                                       since the last decode-only step */
  int32_t tok_mixed;                /* 1: tok_ns was measured in a step with
                                       decode tokens (0: only in prompt-only
                                       steps, or not at all) */
} chunk_cost;

/* Records a step of n_dec decode tokens and n_prompt prompt tokens that
 * took ns. */
void chunk_cost_observe(chunk_cost *c, int64_t n_dec, int64_t n_prompt, uint64_t ns);

/* The estimated time of a decode-only step of n_dec tokens: the measured
 * one, else the nearest measured count's, else n_dec x tok_ns (0 when
 * nothing is known). */
uint64_t chunk_cost_base(const chunk_cost *c, int64_t n_dec);

/* Most prompt tokens a step with n_dec decode tokens may carry within
 * budget_ns: (budget - base(n_dec)) / tok, but at least CHUNK_MIN and at
 * least base(n_dec) / tok (the prompt always gets as much of a step as the
 * decoding streams, so a loaded machine, where the budget cannot hold
 * anyway, slows them by about 2x instead of starving the prompt);
 * CHUNK_COLD before a prompt token was measured in a step with decode
 * tokens (a prompt-only step is another shape: a big batch against a
 * one-token base, at other positions, maybe under another load; its
 * figure only seeds tok); 0 when base is due to be measured again
 * (CHUNK_REBASE). */
int64_t chunk_tokens(const chunk_cost *c, int64_t n_dec, uint64_t budget_ns);

#endif
