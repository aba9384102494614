/*
 * test_engine_chunk.c - the prompt-chunk scheduler's arithmetic (engine/
 * chunk.c) on fake step costs: what it learns from measured steps and how
 * many prompt tokens it then lets a step carry. Expected values are worked
 * out by hand from the model in chunk.h (base + k x tok), in milliseconds.
 */
#include <string.h>

#include "engine/chunk.h"
#include "test.h"

#define MS 1000000ull

/* A fresh cost model that has seen one decode-only step of n_dec tokens
 * taking base_ms, then one step of n_dec + n_prompt tokens taking step_ms. */
static chunk_cost taught(int64_t n_dec, uint64_t base_ms, int64_t n_prompt, uint64_t step_ms) {
  chunk_cost c;
  memset(&c, 0, sizeof c);
  chunk_cost_observe(&c, n_dec, 0, base_ms * MS);
  chunk_cost_observe(&c, n_dec, n_prompt, step_ms * MS);
  return c;
}

/* Nothing measured: a small fixed chunk, never "no cap". */
TEST(engine_chunk_cost_cold) {
  chunk_cost c;
  memset(&c, 0, sizeof c);
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 200 * MS), CHUNK_COLD);
  EXPECT_INT_EQ((int64_t)chunk_cost_base(&c, 3), 0);
}

/* Decode-only steps of 3 tokens at 50 ms, then a step of 3 + 16 prompt
 * tokens at 290 ms: a prompt token costs (290 - 50) / 16 = 15 ms, so a
 * 200 ms budget leaves (200 - 50) / 15 = 10 prompt tokens. */
TEST(engine_chunk_cost_budget) {
  chunk_cost c;
  memset(&c, 0, sizeof c);
  for (int i = 0; i < 4; i++) chunk_cost_observe(&c, 3, 0, 50 * MS);
  EXPECT_INT_EQ((int64_t)(chunk_cost_base(&c, 3) / MS), 50);
  chunk_cost_observe(&c, 3, 16, 290 * MS);
  EXPECT_INT_EQ((int64_t)(c.tok_ns / MS), 15);
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 200 * MS), 10);
  /* a bigger budget, a proportionally bigger chunk: (500 - 50) / 15 */
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 500 * MS), 30);
}

/* The prompt advances and its tokens get dearer (attention over a longer
 * cache): each measured step moves the estimate halfway, so the chunk
 * shrinks within two steps. 10 tokens at 25 ms each: tok 15 -> 20 -> 22.5,
 * chunk (200 - 50) / 22.5 = 6. */
TEST(engine_chunk_cost_follows_position) {
  chunk_cost c = taught(3, 50, 16, 290);
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 200 * MS), 10);
  chunk_cost_observe(&c, 3, 10, 300 * MS);
  EXPECT_INT_EQ((int64_t)(c.tok_ns / MS), 20);
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 200 * MS), 7);
  chunk_cost_observe(&c, 3, 10, 300 * MS);
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 200 * MS), 6);
}

/* A loaded machine: a decode step alone takes 150 ms and a prompt token
 * 30 ms, so the budget leaves (200 - 150) / 30 = 1 token; the prompt still
 * gets as much of the step as the decoding: 150 / 30 = 5 tokens. A budget
 * below the decode step alone: the same 5. */
TEST(engine_chunk_cost_floor_under_load) {
  chunk_cost c = taught(3, 150, 10, 450);
  EXPECT_INT_EQ((int64_t)(c.tok_ns / MS), 30);
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 200 * MS), 5);
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 1 * MS), 5);
  /* cheap decode, dear tokens: never below CHUNK_MIN */
  c = taught(1, 10, 2, 410);
  EXPECT_INT_EQ(chunk_tokens(&c, 1, 200 * MS), CHUNK_MIN);
}

/* A step can be faster than the recorded decode step (that one met a load
 * spike): the prompt tokens are then charged at least half the step's mean
 * per token, not ~0 (which would let the next chunk fill n_batch). 3 + 7
 * tokens in 100 ms with a stale base of 120 ms: 100 / 10 / 2 = 5 ms. */
TEST(engine_chunk_cost_stale_base) {
  chunk_cost c = taught(3, 120, 7, 100);
  EXPECT_INT_EQ((int64_t)(c.tok_ns / MS), 5);
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 200 * MS), 24); /* the share floor: 120 / 5 */
}

/* Prompt-only steps: the first token stands for the weights' read (a
 * decode step of one), so a one-token step (a prompt served from the
 * prefix cache) teaches nothing about tok, and a 101-token step at
 * 40 + 100 x 10 ms with base(1) = 40 gives 10 ms. */
TEST(engine_chunk_cost_prompt_only) {
  chunk_cost c;
  memset(&c, 0, sizeof c);
  chunk_cost_observe(&c, 0, 1, 70 * MS);
  EXPECT_INT_EQ((int64_t)c.tok_ns, 0);
  chunk_cost_observe(&c, 1, 0, 40 * MS);
  chunk_cost_observe(&c, 0, 101, 1040 * MS);
  EXPECT_INT_EQ((int64_t)(c.tok_ns / MS), 10);
  chunk_cost_observe(&c, 0, 1, 70 * MS);
  EXPECT_INT_EQ((int64_t)(c.tok_ns / MS), 10);
}

/* base(d) for a width never measured: the nearest measured width (ties go
 * to the larger), else d x tok. */
TEST(engine_chunk_cost_base_nearest) {
  chunk_cost c;
  memset(&c, 0, sizeof c);
  chunk_cost_observe(&c, 0, 11, 110 * MS); /* tok = 110 / 10 = 11 ms */
  EXPECT_INT_EQ((int64_t)(chunk_cost_base(&c, 2) / MS), 22);
  chunk_cost_observe(&c, 1, 0, 40 * MS);
  chunk_cost_observe(&c, 3, 0, 60 * MS);
  EXPECT_INT_EQ((int64_t)(chunk_cost_base(&c, 2) / MS), 60);
  EXPECT_INT_EQ((int64_t)(chunk_cost_base(&c, 1) / MS), 40);
  EXPECT_INT_EQ((int64_t)(chunk_cost_base(&c, 5) / MS), 60);
  EXPECT_INT_EQ((int64_t)(chunk_cost_base(&c, 200) / MS), 60);
  /* the moving average: 60 -> (60 + 100) / 2 = 80 */
  chunk_cost_observe(&c, 3, 0, 100 * MS);
  EXPECT_INT_EQ((int64_t)(chunk_cost_base(&c, 3) / MS), 80);
}

/* While a long prompt prefills, every step carries prompt tokens and base
 * is never measured; after CHUNK_REBASE such steps one step carries none
 * (chunk 0), and its decode-only time is the new base. Here the load
 * doubled meanwhile: without the new base (50 ms, now 100) the doubled
 * step times would all be charged to the prompt tokens. */
TEST(engine_chunk_cost_rebase) {
  chunk_cost c = taught(3, 50, 10, 200); /* tok 15 */
  int64_t k = chunk_tokens(&c, 3, 200 * MS);
  EXPECT_INT_EQ(k, 10);
  for (int i = 1; i < CHUNK_REBASE; i++) {
    EXPECT_INT_GT(chunk_tokens(&c, 3, 200 * MS), 0);
    chunk_cost_observe(&c, 3, 5, 2 * (50 + 5 * 15) * MS); /* twice as slow: 250 ms */
  }
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 200 * MS), 0);
  /* charged to the prompt alone the 250 ms steps made a token cost 40 ms */
  EXPECT_INT_EQ((int64_t)(c.tok_ns / MS), 39); /* 15 -> 27.5 -> ... -> 39.8 */
  chunk_cost_observe(&c, 3, 0, 100 * MS);
  EXPECT_INT_EQ((int64_t)(chunk_cost_base(&c, 3) / MS), 75);
  EXPECT_INT_GT(chunk_tokens(&c, 3, 200 * MS), 0);
  /* with the base re-measured the next steps split right: 2 x (50 + 5 x 15)
   * = 100 + 5 x 30, so tok heads to 30 ms, not 40 */
  for (int i = 0; i < 6; i++) {
    chunk_cost_observe(&c, 3, 0, 100 * MS);
    chunk_cost_observe(&c, 3, 5, 250 * MS);
  }
  EXPECT_INT_EQ((int64_t)(c.tok_ns / MS), 30);
}

/* A prompt-only step (a big batch against a one-token base) only seeds
 * tok: here it says 7 ms while a token of a small mixed step costs 11. So
 * the first mixed step carries CHUNK_COLD tokens (sized by the seed it
 * would have carried (200 - 41) / 7 = 22, a 41 + 22 x 11 = 283 ms step).
 * Its measurement then replaces the seed outright (averaged, (7 + 11) / 2
 * would still overshoot), and later prompt-only steps no longer move tok. */
TEST(engine_chunk_cost_bulk_then_mixed) {
  chunk_cost c;
  memset(&c, 0, sizeof c);
  chunk_cost_observe(&c, 1, 0, 27 * MS);
  chunk_cost_observe(&c, 0, 96, (27 + 95 * 7) * MS);
  EXPECT_INT_EQ((int64_t)(c.tok_ns / MS), 7);
  for (int i = 0; i < 4; i++) chunk_cost_observe(&c, 3, 0, 41 * MS);
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 200 * MS), CHUNK_COLD);
  chunk_cost_observe(&c, 3, CHUNK_COLD, (41 + CHUNK_COLD * 11) * MS);
  EXPECT_INT_EQ((int64_t)(c.tok_ns / MS), 11);
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 200 * MS), 14); /* (200 - 41) / 11 */
  chunk_cost_observe(&c, 0, 96, (27 + 95 * 7) * MS);
  EXPECT_INT_EQ((int64_t)(c.tok_ns / MS), 11);
  EXPECT_INT_EQ(chunk_tokens(&c, 3, 200 * MS), 14);
}
