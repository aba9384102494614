/*
 * chunk.c - the prompt-chunk size of a batching step from measured step
 * costs (the model and its reasons are in chunk.h). Used by engine.c's
 * step_build / step_run; tests feed it fake costs (tests/unit/test_engine.c,
 * engine_chunk_cost_*).
 */
#include "engine/chunk.h"

static int64_t base_index(int64_t n_dec) { return n_dec < CHUNK_N_BASE ? n_dec : CHUNK_N_BASE - 1; }

uint64_t chunk_cost_base(const chunk_cost *c, int64_t n_dec) {
  if (n_dec <= 0) return 0;
  int64_t i = base_index(n_dec);
  if (c->base_ns[i]) return c->base_ns[i];
  /* nearest measured count; on a tie the larger (its cost is higher) */
  for (int64_t d = 1; d < CHUNK_N_BASE; d++) {
    if (i + d < CHUNK_N_BASE && c->base_ns[i + d]) return c->base_ns[i + d];
    if (i - d >= 1 && c->base_ns[i - d]) return c->base_ns[i - d];
  }
  return (uint64_t)n_dec * c->tok_ns;
}

void chunk_cost_observe(chunk_cost *c, int64_t n_dec, int64_t n_prompt, uint64_t ns) {
  if (n_dec < 0 || n_prompt < 0 || n_dec + n_prompt == 0) return;
  if (n_prompt == 0) {
    uint64_t *b = &c->base_ns[base_index(n_dec)];
    *b = *b ? (*b + ns) / 2 : ns;
    c->n_mixed = 0;
    return;
  }
  if (n_dec > 0) c->n_mixed++;
  /* the prompt tokens' share: the step minus a decode-only step of the same
   * width. A prompt-only step counts its first token as that width (a step
   * of one prompt token, e.g. a prompt served from the prefix cache, costs
   * what a decode step does and says nothing about tok). A base inflated by
   * an earlier load spike could leave almost nothing, so the share is at
   * least half the step's mean per token (the true marginal cost is a
   * little below the mean: the weights are read once for all tokens) */
  uint64_t mean = ns / (uint64_t)(n_dec + n_prompt);
  const int mixed = n_dec > 0;
  if (n_dec == 0) {
    n_dec = 1;
    n_prompt--;
    if (n_prompt == 0) return;
  }
  uint64_t base = chunk_cost_base(c, n_dec);
  uint64_t per = ns > base ? (ns - base) / (uint64_t)n_prompt : 0;
  if (per < mean / 2) per = mean / 2;
  if (per == 0) per = 1;
  if (!mixed && c->tok_mixed) return; /* a bulk step would pull tok under a mixed step's */
  if (mixed && !c->tok_mixed) {       /* the first mixed step replaces a bulk figure */
    c->tok_mixed = 1;
    c->tok_ns = per;
    return;
  }
  c->tok_ns = c->tok_ns ? (c->tok_ns + per) / 2 : per;
}

int64_t chunk_tokens(const chunk_cost *c, int64_t n_dec, uint64_t budget_ns) {
  if (c->n_mixed >= CHUNK_REBASE) return 0;
  if (c->tok_ns == 0 || !c->tok_mixed) return CHUNK_COLD;
  uint64_t base = chunk_cost_base(c, n_dec);
  uint64_t fit = budget_ns > base ? (budget_ns - base) / c->tok_ns : 0;
  uint64_t share = (base + c->tok_ns - 1) / c->tok_ns; /* prompt time >= decode time */
  if (fit < share) fit = share;
  if (fit < CHUNK_MIN) fit = CHUNK_MIN;
  if (fit > (uint64_t)INT32_MAX) fit = INT32_MAX;
  return (int64_t)fit;
}
