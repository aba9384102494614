/*
 * test_engine.c - the serving engine (src/engine) on a small random-weight
 * llama (model_testgen_small, F32 weights, F32 KV cache) and a synthetic
 * SentencePiece vocabulary of the same 300 tokens (<unk>, <s>, </s>, 256
 * byte tokens, 41 two-letter pieces).
 *
 * Expectations are computed independently: greedy continuations come from
 * a direct loop of model_forward + argmax on a separate one-sequence
 * context; log-probabilities from a log-softmax in double precision in the
 * test; texts from tok_decode of the whole token list.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/testgen.h"
#include "model/testgen_arch.h"
#include "test.h"

#include "engine_fx.h"

/* ---- tests ------------------------------------------------------------------ */

/* One request: the same greedy tokens as the direct loop, its text is the
 * whole-list decoding, its logprobs are the reference log-softmax, usage and
 * finish reason are right. */
TEST(engine_single_matches_direct_greedy) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t prompt[7];
  fx_make_prompt(prompt, 7, 1);
  fx_ref ref;
  ASSERT_TRUE(fx_greedy(&f, prompt, 7, 24, &ref));
  engine *e = fx_engine(&f, 2, 256, 64, 8);
  ASSERT_TRUE(e != NULL);
  engine_request q = fx_greedy_req(prompt, 7, 24);
  q.logprobs = true;
  q.sample.n_logprobs = 3;
  engine_req *h = NULL;
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  fx_result r;
  fx_collect(h, &r, NULL);
  EXPECT_TRUE(r.order_ok);
  EXPECT_TRUE(fx_tokens_equal(&r, &ref, 24));
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_LENGTH);
  EXPECT_INT_GE(r.n_deltas, 6); /* streamed, not all at the end */
  EXPECT_INT_EQ(r.n_prompt, 7);
  EXPECT_INT_EQ(r.n_cached, 0);
  EXPECT_INT_EQ(r.n_completion, 24);
  buf want = BUF_INIT;
  ASSERT_INT_EQ(tok_decode(f.t, ref.tokens, 24, 0, &want), 0);
  EXPECT_INT_EQ(r.text.len, want.len);
  EXPECT_TRUE(r.text.len == want.len && memcmp(r.text.data, want.data, want.len) == 0);
  EXPECT_TRUE(r.have_lp);
  for (int i = 0; i < 24 && r.have_lp; i++) {
    EXPECT_INT_EQ(r.lp[i].token, ref.tokens[i]);
    EXPECT_NEAR(r.lp[i].logprob, ref.logprob[i], 1e-4);
    EXPECT_INT_EQ(r.lp[i].n_top, 3);
    EXPECT_INT_EQ(r.lp[i].top[0].token, ref.tokens[i]); /* greedy = most probable */
  }
  buf_free(&want);
  fx_result_free(&r);
  engine_req_free(h);
  engine_free(e);
  fx_close(&f);
}

/* USAGE carries when the engine sampled the first and the last token: a
 * consumer that reads every event only after the request finished (a short
 * answer's handler wakes once) still gets the real span, not its own
 * instant. No duration is asserted, only the order of the clocks. */
TEST(engine_usage_token_times_are_the_engines) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t prompt[7];
  fx_make_prompt(prompt, 7, 5);
  engine *e = fx_engine(&f, 1, 256, 64, 8);
  ASSERT_TRUE(e != NULL);
  engine_request q = fx_greedy_req(prompt, 7, 12);
  engine_req *h = NULL;
  uint64_t t_submit = time_mono_ns();
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  engine_stats st;
  for (int i = 0; i < 30000; i++) { /* until the engine counts it finished */
    engine_get_stats(e, &st);
    if (st.n_requests == 1) break;
    usleep(1000);
  }
  ASSERT_INT_EQ(st.n_requests, 1);
  uint64_t t_pop = time_mono_ns();
  fx_result r;
  fx_collect(h, &r, NULL);
  EXPECT_TRUE(r.order_ok);
  EXPECT_INT_EQ(r.n_completion, 12);
  EXPECT_TRUE(r.t_first_ns >= t_submit);
  EXPECT_TRUE(r.t_last_ns > r.t_first_ns); /* 11 decode steps between them */
  EXPECT_TRUE(r.t_last_ns <= t_pop);       /* not when they were read */
  fx_result_free(&r);
  engine_req_free(h);
  engine_free(e);
  fx_close(&f);
}

/* Four prompts of different lengths submitted together (n_batch 8, so the
 * long prompts are prefilled in chunks next to the others' decoding) give
 * the same tokens as each alone through the direct loop. F32 weights and
 * cache: batching changes only the summation grouping inside a matrix
 * product at most, far below the gaps between the greedy choices. */
TEST(engine_batch_of_4_equals_alone) {
  fx f;
  if (!fx_open(&f)) return;
  static const int lens[4] = {3, 11, 29, 17};
  int32_t prompts[4][32];
  fx_ref ref[4];
  for (int i = 0; i < 4; i++) {
    fx_make_prompt(prompts[i], lens[i], 100 + (uint64_t)i);
    ASSERT_TRUE(fx_greedy(&f, prompts[i], lens[i], 20, &ref[i]));
  }
  engine *e = fx_engine(&f, 4, 128, 8, 8);
  ASSERT_TRUE(e != NULL);
  engine_pause(e, true);
  engine_req *h[4];
  for (int i = 0; i < 4; i++) {
    engine_request q = fx_greedy_req(prompts[i], (size_t)lens[i], 20);
    ASSERT_INT_EQ(engine_submit(e, &q, &h[i]), 0);
  }
  engine_pause(e, false);
  for (int i = 0; i < 4; i++) {
    fx_result r;
    fx_collect(h[i], &r, NULL);
    EXPECT_TRUE(r.order_ok);
    if (!fx_tokens_equal(&r, &ref[i], 20)) test_fail_at(__FILE__, __LINE__, "request %d differs from alone", i);
    EXPECT_INT_EQ(r.finish, ENGINE_FINISH_LENGTH);
    EXPECT_INT_EQ(r.n_prompt, lens[i]);
    EXPECT_INT_EQ(r.n_completion, 20);
    fx_result_free(&r);
    engine_req_free(h[i]);
  }
  engine_free(e);
  fx_close(&f);
}

/* Seeded sampling is per request: a batch of 4 with temperature gives each
 * request the tokens it gives alone (engine against engine, one slot). */
TEST(engine_sampled_batch_equals_alone) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t prompts[4][16];
  fx_result alone[4];
  engine *e1 = fx_engine(&f, 1, 128, 16, 8);
  ASSERT_TRUE(e1 != NULL);
  for (int i = 0; i < 4; i++) {
    fx_make_prompt(prompts[i], 5 + 3 * i, 200 + (uint64_t)i);
    engine_request q = fx_greedy_req(prompts[i], (size_t)(5 + 3 * i), 16);
    q.sample.temperature = 1.5f;
    q.sample.top_k = 40;
    q.sample.seed = 1000 + (uint64_t)i;
    engine_req *h = NULL;
    ASSERT_INT_EQ(engine_submit(e1, &q, &h), 0);
    fx_collect(h, &alone[i], NULL);
    engine_req_free(h);
  }
  engine_free(e1);
  engine *e = fx_engine(&f, 4, 128, 8, 8);
  ASSERT_TRUE(e != NULL);
  engine_pause(e, true);
  engine_req *h[4];
  for (int i = 0; i < 4; i++) {
    engine_request q = fx_greedy_req(prompts[i], (size_t)(5 + 3 * i), 16);
    q.sample.temperature = 1.5f;
    q.sample.top_k = 40;
    q.sample.seed = 1000 + (uint64_t)i;
    ASSERT_INT_EQ(engine_submit(e, &q, &h[i]), 0);
  }
  engine_pause(e, false);
  for (int i = 0; i < 4; i++) {
    fx_result r;
    fx_collect(h[i], &r, NULL);
    EXPECT_INT_EQ(r.n, 16);
    EXPECT_TRUE(r.n == alone[i].n && memcmp(r.tokens, alone[i].tokens, r.n * sizeof(int32_t)) == 0);
    fx_result_free(&r);
    fx_result_free(&alone[i]);
    engine_req_free(h[i]);
  }
  engine_free(e);
  fx_close(&f);
}

/* Two slots, two prompts: each repeat is served by the slot that holds its
 * prompt (cached = length - 1, the last token is decoded again for its
 * logits), and a longer prompt extending a finished one reuses the whole
 * earlier prompt. Outputs equal the direct loop. */
TEST(engine_prefix_cache) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t p[16], q[12];
  fx_make_prompt(p, 12, 300);
  fx_make_prompt(q, 9, 301);
  if (q[0] == p[0]) q[0] = p[0] == 3 ? 4 : 3;
  fx_ref rp, rq, rpx;
  ASSERT_TRUE(fx_greedy(&f, p, 12, 6, &rp));
  ASSERT_TRUE(fx_greedy(&f, q, 9, 6, &rq));
  engine *e = fx_engine(&f, 2, 128, 32, 8);
  ASSERT_TRUE(e != NULL);
  fx_result r;
  fx_run_one(e, p, 12, 6, &r);
  EXPECT_INT_EQ(r.n_cached, 0);
  EXPECT_TRUE(fx_tokens_equal(&r, &rp, 6));
  fx_result_free(&r);
  fx_run_one(e, q, 9, 6, &r);
  EXPECT_INT_EQ(r.n_cached, 0);
  EXPECT_TRUE(fx_tokens_equal(&r, &rq, 6));
  fx_result_free(&r);
  fx_run_one(e, p, 12, 6, &r);
  EXPECT_INT_EQ(r.n_cached, 11);
  EXPECT_INT_EQ(r.n_prompt, 12);
  EXPECT_TRUE(fx_tokens_equal(&r, &rp, 6));
  fx_result_free(&r);
  fx_run_one(e, q, 9, 6, &r);
  EXPECT_INT_EQ(r.n_cached, 8);
  EXPECT_TRUE(fx_tokens_equal(&r, &rq, 6));
  fx_result_free(&r);
  /* p followed by 3 tokens that differ from p's continuation */
  p[12] = rp.tokens[0] == 5 ? 6 : 5;
  p[13] = 77;
  p[14] = 78;
  ASSERT_TRUE(fx_greedy(&f, p, 15, 6, &rpx));
  fx_run_one(e, p, 15, 6, &r);
  EXPECT_INT_EQ(r.n_cached, 12);
  EXPECT_TRUE(fx_tokens_equal(&r, &rpx, 6));
  fx_result_free(&r);
  /* counters: 5 requests, 12+9+12+9+15 prompt tokens, 0+0+11+8+12 cached,
   * 5 x 6 completion tokens; decode steps: 6 per request (1 prefill
   * chunk + 5 decodes, n_batch 32 holds every prompt) */
  engine_stats st;
  engine_get_stats(e, &st);
  EXPECT_INT_EQ(st.n_slots, 2);
  EXPECT_INT_EQ(st.n_slots_busy, 0);
  EXPECT_INT_EQ(st.n_queued, 0);
  EXPECT_INT_EQ(st.n_requests, 5);
  EXPECT_INT_EQ(st.n_prompt_tokens, 57);
  EXPECT_INT_EQ(st.n_cached_tokens, 31);
  EXPECT_INT_EQ(st.n_completion_tokens, 30);
  EXPECT_INT_EQ(st.n_steps, 30);
  EXPECT_INT_EQ(st.n_batch_tokens, (57 - 31) + 5 * 5);
  engine_free(e);
  fx_close(&f);
}

/* The prefix cache with sliding-window layers (gemma3, window 8): a
 * repeated 20-token prompt reuses 19 positions, a prompt extending a
 * finished one reuses all of it, both more than the window; outputs equal
 * the direct loop on a fresh context (which test_model_gemma.c holds to
 * numpy). */
TEST(engine_prefix_cache_sliding_window) {
  fx f;
  if (!fx_open_path(&f, fx_gemma_path())) return;
  int32_t p[32];
  fx_make_prompt(p, 20, 310);
  fx_ref rp, rpx;
  ASSERT_TRUE(fx_greedy(&f, p, 20, 6, &rp));
  engine *e = fx_engine(&f, 1, 128, 32, 8);
  ASSERT_TRUE(e != NULL);
  fx_result r;
  fx_run_one(e, p, 20, 6, &r);
  EXPECT_INT_EQ(r.n_cached, 0);
  EXPECT_TRUE(fx_tokens_equal(&r, &rp, 6));
  fx_result_free(&r);
  fx_run_one(e, p, 20, 6, &r);
  EXPECT_INT_EQ(r.n_cached, 19);
  EXPECT_TRUE(fx_tokens_equal(&r, &rp, 6));
  fx_result_free(&r);
  for (int i = 0; i < 10; i++) p[20 + i] = 3 + (rp.tokens[0] + 7 * i + 1) % (N_VOCAB - 3);
  ASSERT_TRUE(fx_greedy(&f, p, 30, 6, &rpx));
  fx_run_one(e, p, 30, 6, &r);
  EXPECT_INT_GE(r.n_cached, 20);
  EXPECT_TRUE(fx_tokens_equal(&r, &rpx, 6));
  fx_result_free(&r);
  engine_free(e);
  fx_close(&f);
}

typedef struct cancel_ctx {
  engine_req *h;
  atomic_int n_calls;
  int sleep_us;
} cancel_ctx;

/* notify callback: cancels its request the first time it is called. */
static void cancel_on_first(void *arg) {
  cancel_ctx *c = arg;
  if (atomic_fetch_add(&c->n_calls, 1) == 0) engine_req_cancel(c->h);
}

static void slow_notify(void *arg) {
  cancel_ctx *c = arg;
  atomic_fetch_add(&c->n_calls, 1);
  usleep((useconds_t)c->sleep_us);
}

/* One slot: A would run to the end of the context but cancels itself at its
 * first event; C, queued, is cancelled before it runs; B, queued behind,
 * then gets the slot and runs to completion with the direct loop's tokens. */
TEST(engine_cancel_frees_slot) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t pa[5], pb[6];
  fx_make_prompt(pa, 5, 400);
  fx_make_prompt(pb, 6, 401);
  fx_ref rb;
  ASSERT_TRUE(fx_greedy(&f, pb, 6, 5, &rb));
  engine *e = fx_engine(&f, 1, 2048, 16, 8);
  ASSERT_TRUE(e != NULL);
  engine_pause(e, true);
  cancel_ctx ca = {0};
  engine_request qa = fx_greedy_req(pa, 5, 0);
  qa.notify = cancel_on_first;
  qa.notify_ctx = &ca;
  engine_req *ha = NULL, *hb = NULL, *hc = NULL;
  ASSERT_INT_EQ(engine_submit(e, &qa, &ha), 0);
  ca.h = ha;
  engine_request qc = fx_greedy_req(pb, 6, 5);
  ASSERT_INT_EQ(engine_submit(e, &qc, &hc), 0);
  engine_request qb = fx_greedy_req(pb, 6, 5);
  ASSERT_INT_EQ(engine_submit(e, &qb, &hb), 0);
  engine_req_cancel(hc);
  engine_pause(e, false);
  fx_result r;
  fx_collect(ha, &r, NULL);
  EXPECT_TRUE(r.order_ok);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_CANCELLED);
  EXPECT_INT_GE(r.n_completion, 1);
  EXPECT_INT_LE(r.n_completion, 3); /* stopped within a step of the cancel */
  fx_result_free(&r);
  fx_collect(hc, &r, NULL);
  EXPECT_TRUE(r.order_ok);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_CANCELLED);
  EXPECT_INT_EQ(r.n_completion, 0);
  EXPECT_INT_EQ(r.n_deltas, 0);
  fx_result_free(&r);
  fx_collect(hb, &r, NULL);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_LENGTH);
  EXPECT_TRUE(fx_tokens_equal(&r, &rb, 5));
  fx_result_free(&r);
  engine_req_free(ha);
  engine_req_free(hb);
  engine_req_free(hc);
  engine_free(e);
  fx_close(&f);
}

/* A paused engine admits nothing: with queue_max 2 the third submit is
 * refused with ERR_OVERLOADED; the queued ones still run afterwards. Bad
 * requests are refused synchronously with the thing named. */
TEST(engine_queue_full_and_bad_requests) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t p[4] = {10, 20, 30, 40};
  engine *e = fx_engine(&f, 1, 128, 16, 2);
  ASSERT_TRUE(e != NULL);
  engine_pause(e, true);
  engine_request q = fx_greedy_req(p, 4, 2);
  engine_req *h1 = NULL, *h2 = NULL, *h3 = NULL;
  ASSERT_INT_EQ(engine_submit(e, &q, &h1), 0);
  ASSERT_INT_EQ(engine_submit(e, &q, &h2), 0);
  EXPECT_INT_EQ(engine_submit(e, &q, &h3), ERR_OVERLOADED);
  EXPECT_STR_CONTAINS(err_detail(), "queue");
  EXPECT_TRUE(h3 == NULL);

  engine_request bad = q;
  bad.n_prompt = 0;
  EXPECT_INT_EQ(engine_submit(e, &bad, &h3), ERR_INVALID);
  int32_t bad_tok[2] = {5, 300};
  bad = fx_greedy_req(bad_tok, 2, 2);
  EXPECT_INT_EQ(engine_submit(e, &bad, &h3), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "300");
  bad = q;
  bad.n = 2; /* more choices than slots */
  EXPECT_INT_EQ(engine_submit(e, &bad, &h3), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "slots");
  bad = q;
  bad.sample.top_p = 2;
  EXPECT_INT_EQ(engine_submit(e, &bad, &h3), ERR_RANGE);
  const char *empty_stop[1] = {""};
  bad = q;
  bad.stop = empty_stop;
  bad.n_stop = 1;
  EXPECT_INT_EQ(engine_submit(e, &bad, &h3), ERR_INVALID);

  engine_pause(e, false);
  fx_result r;
  fx_collect(h1, &r, NULL);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_LENGTH);
  EXPECT_INT_EQ(r.n_completion, 2);
  fx_result_free(&r);
  fx_collect(h2, &r, NULL);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_LENGTH);
  EXPECT_INT_EQ(r.n_cached, 3); /* same prompt in the same slot */
  fx_result_free(&r);
  engine_req_free(h1);
  engine_req_free(h2);
  engine_free(e);
  fx_close(&f);
}

/* max_tokens ends with LENGTH after exactly that many tokens; a full
 * context too: a 120-token prompt in 128 positions decodes 8 generated
 * tokens at positions 120..127 and samples a 9th from the last logits. */
TEST(engine_length_limits) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t p[120];
  fx_make_prompt(p, 120, 500);
  fx_ref ref;
  ASSERT_TRUE(fx_greedy(&f, p, 120, 9, &ref));
  engine *e = fx_engine(&f, 2, 128, 64, 8);
  ASSERT_TRUE(e != NULL);
  fx_result r;
  fx_run_one(e, p, 120, 0, &r);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_LENGTH);
  EXPECT_INT_EQ(r.n_completion, 9);
  EXPECT_TRUE(fx_tokens_equal(&r, &ref, 9));
  fx_result_free(&r);
  fx_run_one(e, p + 100, 3, 4, &r);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_LENGTH);
  EXPECT_INT_EQ(r.n_completion, 4);
  EXPECT_INT_EQ(r.n, 4);
  fx_result_free(&r);
  engine_free(e);
  fx_close(&f);
}

static bool printable(char c) { return c > 0x20 && c < 0x7f; }

/* A two-byte stop string made of the last byte of one token's text and the
 * first of the next: the text ends exactly before its first occurrence in
 * the reference text, no delta ever contains it, finish is STOP with its
 * index; a stop string that never occurs changes nothing. */
TEST(engine_stop_string_split_across_tokens) {
  fx f;
  if (!fx_open(&f)) return;
  char stop[3] = {0};
  int32_t p[8];
  fx_ref ref;
  buf full = BUF_INIT, part = BUF_INIT;
  bool found = false;
  for (uint64_t seed = 600; seed < 640 && !found; seed++) {
    fx_make_prompt(p, 8, seed);
    ASSERT_TRUE(fx_greedy(&f, p, 8, 40, &ref));
    buf_reset(&full);
    ASSERT_INT_EQ(tok_decode(f.t, ref.tokens, 40, 0, &full), 0);
    for (int k = 2; k < 38 && !found; k++) {
      buf_reset(&part);
      ASSERT_INT_EQ(tok_decode(f.t, ref.tokens, (size_t)k, 0, &part), 0);
      size_t b = part.len;
      if (b == 0 || b >= full.len || memcmp(part.data, full.data, b) != 0) continue;
      if (!printable(full.data[b - 1]) || !printable(full.data[b])) continue;
      stop[0] = full.data[b - 1];
      stop[1] = full.data[b];
      found = true;
    }
  }
  if (!found) {
    buf_free(&full);
    buf_free(&part);
    fx_close(&f);
    TEST_SKIP("no printable token boundary in 40 prompts (random model)");
  }
  const char *at = memmem(full.data, full.len, stop, 2);
  ASSERT_TRUE(at != NULL);
  size_t want_len = (size_t)(at - full.data);

  engine *e = fx_engine(&f, 2, 128, 32, 8);
  ASSERT_TRUE(e != NULL);
  const char *stops[2] = {"\x7f\x7f never", stop};
  engine_request q = fx_greedy_req(p, 8, 40);
  q.stop = stops;
  q.n_stop = 2;
  engine_req *h = NULL;
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  fx_result r;
  fx_collect(h, &r, stop);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_STOP);
  EXPECT_INT_EQ(r.stop_index, 1);
  EXPECT_INT_EQ(r.text.len, want_len);
  EXPECT_TRUE(r.text.len == want_len && (want_len == 0 || memcmp(r.text.data, full.data, want_len) == 0));
  EXPECT_TRUE(r.bad_delta[0] == '\0');
  EXPECT_TRUE(r.text.len == 0 || memmem(r.text.data, r.text.len, stop, 2) == NULL);
  fx_result_free(&r);
  engine_req_free(h);

  /* the harmless stop string alone: the whole text */
  q.stop = stops;
  q.n_stop = 1;
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  fx_collect(h, &r, NULL);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_LENGTH);
  EXPECT_TRUE(r.text.len == full.len && memcmp(r.text.data, full.data, full.len) == 0);
  fx_result_free(&r);
  engine_req_free(h);
  engine_free(e);
  buf_free(&full);
  buf_free(&part);
  fx_close(&f);
}

/* A stop token ends with STOP and is not reported. */
TEST(engine_stop_token) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t p[6];
  fx_make_prompt(p, 6, 700);
  fx_ref ref;
  ASSERT_TRUE(fx_greedy(&f, p, 6, 10, &ref));
  engine *e = fx_engine(&f, 1, 128, 16, 8);
  ASSERT_TRUE(e != NULL);
  engine_request q = fx_greedy_req(p, 6, 10);
  int32_t st = ref.tokens[4];
  int first = 0;
  while (ref.tokens[first] != st) first++;
  q.stop_tokens = &st;
  q.n_stop_tokens = 1;
  engine_req *h = NULL;
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  fx_result r;
  fx_collect(h, &r, NULL);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_STOP);
  EXPECT_INT_EQ(r.stop_index, -1);
  EXPECT_TRUE(fx_tokens_equal(&r, &ref, first));
  EXPECT_INT_EQ(r.n_completion, first + 1);
  fx_result_free(&r);
  engine_req_free(h);
  engine_free(e);
  fx_close(&f);
}

/* A prompt longer than the context: USAGE then FINISH error ERR_CONTEXT
 * naming both numbers; the engine goes on serving. */
TEST(engine_prompt_too_long) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t p[130];
  fx_make_prompt(p, 130, 800);
  engine *e = fx_engine(&f, 2, 128, 32, 8);
  ASSERT_TRUE(e != NULL);
  engine_request q = fx_greedy_req(p, 130, 4);
  engine_req *h = NULL;
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  fx_result r;
  fx_collect(h, &r, NULL);
  EXPECT_TRUE(r.order_ok);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_ERROR);
  EXPECT_INT_EQ(r.err_code, ERR_CONTEXT);
  EXPECT_STR_CONTAINS(r.err_msg, "130");
  EXPECT_STR_CONTAINS(r.err_msg, "128");
  EXPECT_INT_EQ(r.n_completion, 0);
  fx_result_free(&r);
  engine_req_free(h);
  fx_run_one(e, p, 128, 3, &r); /* exactly the context: fits */
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_LENGTH);
  EXPECT_INT_EQ(r.n_completion, 1);
  fx_result_free(&r);
  engine_free(e);
  fx_close(&f);
}

/* A request whose timeout expires mid-generation ends with ERR_TIMEOUT. */
TEST(engine_timeout) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t p[5] = {50, 60, 70, 80, 90};
  engine *e = fx_engine(&f, 1, 2048, 16, 8);
  ASSERT_TRUE(e != NULL);
  cancel_ctx c = {.sleep_us = 2000};
  engine_request q = fx_greedy_req(p, 5, 0);
  q.timeout_ms = 40;
  q.notify = slow_notify;
  q.notify_ctx = &c;
  engine_req *h = NULL;
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  fx_result r;
  fx_collect(h, &r, NULL);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_ERROR);
  EXPECT_INT_EQ(r.err_code, ERR_TIMEOUT);
  EXPECT_STR_CONTAINS(r.err_msg, "40 ms");
  EXPECT_INT_GT(r.n_completion, 0);
  EXPECT_INT_LT(r.n_completion, 2000);
  fx_result_free(&r);
  engine_req_free(h);
  engine_free(e);
  fx_close(&f);
}

/* engine_free with two running (slowed by their notify callbacks, so they
 * would take seconds) and two queued requests returns promptly, and every
 * request ends with USAGE and FINISH cancelled. */
TEST(engine_free_drains_promptly) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t p[4][6];
  engine *e = fx_engine(&f, 2, 2048, 16, 8);
  ASSERT_TRUE(e != NULL);
  cancel_ctx c[4];
  engine_req *h[4];
  engine_pause(e, true);
  for (int i = 0; i < 4; i++) {
    fx_make_prompt(p[i], 6, 900 + (uint64_t)i);
    memset(&c[i], 0, sizeof c[i]);
    c[i].sleep_us = 2000;
    engine_request q = fx_greedy_req(p[i], 6, 0);
    q.notify = slow_notify;
    q.notify_ctx = &c[i];
    ASSERT_INT_EQ(engine_submit(e, &q, &h[i]), 0);
  }
  engine_pause(e, false);
  for (int i = 0; i < 2; i++) { /* both running requests have started */
    engine_event ev;
    ASSERT_INT_EQ(engine_req_next(h[i], 10000, &ev), 0);
    EXPECT_INT_EQ(ev.type, ENGINE_EVENT_TEXT_DELTA);
    engine_event_free(&ev);
  }
  uint64_t t0 = time_mono_ns();
  engine_free(e);
  double ms = (double)(time_mono_ns() - t0) / 1e6;
  EXPECT_TRUE(ms < 1000);
  for (int i = 0; i < 4; i++) {
    fx_result r;
    fx_collect(h[i], &r, NULL);
    EXPECT_TRUE(r.order_ok);
    EXPECT_TRUE(r.finish_seen);
    EXPECT_INT_EQ(r.finish, ENGINE_FINISH_CANCELLED);
    if (i >= 2) EXPECT_INT_EQ(r.n_completion, 0);
    fx_result_free(&r);
    engine_req_free(h[i]);
  }
  fx_close(&f);
}

/* engine_req_next times out on an empty channel without an event, and a
 * request freed before it finishes is cancelled (the engine goes on). */
TEST(engine_channel_timeout_and_early_free) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t p[5] = {11, 22, 33, 44, 55};
  engine *e = fx_engine(&f, 1, 2048, 16, 8);
  ASSERT_TRUE(e != NULL);
  engine_pause(e, true);
  engine_request q = fx_greedy_req(p, 5, 0);
  engine_req *h = NULL;
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  engine_event ev;
  uint64_t t0 = time_mono_ns();
  EXPECT_INT_EQ(engine_req_next(h, 30, &ev), ERR_TIMEOUT);
  EXPECT_TRUE(time_mono_ns() - t0 >= 25000000ull);
  EXPECT_INT_EQ(engine_req_next(h, 0, &ev), ERR_TIMEOUT);
  engine_req_free(h); /* never popped anything: the engine drops it */
  engine_pause(e, false);
  fx_result r;
  fx_run_one(e, p, 5, 3, &r);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_LENGTH);
  EXPECT_INT_EQ(r.n_completion, 3);
  fx_result_free(&r);
  engine_free(e);
  fx_close(&f);
}

/* Without a tokenizer: tokens only (no text), the same greedy tokens; stop
 * strings refused. Bad engine parameters are named. */
TEST(engine_without_tokenizer_and_bad_params) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t p[6];
  fx_make_prompt(p, 6, 1100);
  fx_ref ref;
  ASSERT_TRUE(fx_greedy(&f, p, 6, 8, &ref));
  engine_params ep = engine_default_params();
  ep.n_slots = 2;
  ep.n_ctx = 64;
  ep.kv_type = MODEL_KV_F32;
  engine *e = NULL;
  ASSERT_INT_EQ(engine_new(f.m, NULL, &ep, &e), 0);
  EXPECT_INT_EQ(engine_n_ctx(e), 64);
  EXPECT_INT_EQ(engine_n_slots(e), 2);
  fx_result r;
  fx_run_one(e, p, 6, 8, &r);
  EXPECT_TRUE(fx_tokens_equal(&r, &ref, 8));
  EXPECT_INT_EQ(r.text.len, 0);
  EXPECT_INT_EQ(r.n_deltas, 8); /* one token per delta, streamed */
  fx_result_free(&r);
  const char *stops[1] = {"x"};
  engine_request q = fx_greedy_req(p, 6, 8);
  q.stop = stops;
  q.n_stop = 1;
  engine_req *h = NULL;
  EXPECT_INT_EQ(engine_submit(e, &q, &h), ERR_INVALID);
  engine_free(e);

  ep.n_batch = 1;
  EXPECT_INT_EQ(engine_new(f.m, f.t, &ep, &e), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "n_batch");
  EXPECT_TRUE(e == NULL);
  ep = engine_default_params();
  ep.n_slots = -1;
  EXPECT_INT_EQ(engine_new(f.m, f.t, &ep, &e), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "n_slots");
  fx_close(&f);
}

/* Chunked prefill: a 100-token prompt submitted with three short ones
 * (n_batch 8) is prefilled in chunks of at most 5 tokens next to the three
 * decoding streams, so each of them has produced one token per step, about
 * 19 tokens, before the long prompt's first token (the notify callbacks run
 * on the engine thread in event order and log who got an event). */
static int g_order[1024];
static atomic_int g_n_order;

static void log_notify(void *arg) {
  int n = atomic_fetch_add(&g_n_order, 1);
  if (n < (int)ARRAY_LEN(g_order)) g_order[n] = *(const int *)arg;
}

/* Runs 3 two-token prompts (40 tokens each) and one 100-token prompt
 * submitted together; counts each short stream's events before the long
 * one's first token. */
static void interleave_run(fx *f, int64_t n_batch, int64_t n_chunk, int64_t budget_ms, int before[3]) {
  engine_params ep = engine_default_params();
  ep.n_slots = 4;
  ep.n_ctx = 256;
  ep.n_batch = n_batch;
  ep.n_chunk = n_chunk;
  ep.chunk_budget_ms = budget_ms;
  ep.kv_type = MODEL_KV_F32;
  engine *e = NULL;
  if (engine_new(f->m, NULL, &ep, &e)) { /* no tokenizer: one delta per token */
    test_fail_at(__FILE__, __LINE__, "engine_new: %s", err_detail());
    return;
  }
  int32_t p[4][100];
  static const int ids[4] = {0, 1, 2, 3};
  engine_req *h[4];
  atomic_store(&g_n_order, 0);
  engine_pause(e, true);
  for (int i = 0; i < 4; i++) {
    int n = i < 3 ? 2 : 100;
    fx_make_prompt(p[i], n, 1200 + (uint64_t)i);
    engine_request q = fx_greedy_req(p[i], (size_t)n, i < 3 ? 40 : 1);
    q.notify = log_notify;
    q.notify_ctx = (void *)&ids[i];
    if (engine_submit(e, &q, &h[i])) test_fail_at(__FILE__, __LINE__, "submit: %s", err_detail());
  }
  engine_pause(e, false);
  fx_result r[4];
  for (int i = 0; i < 4; i++) fx_collect(h[i], &r[i], NULL);
  before[0] = before[1] = before[2] = 0;
  int n = atomic_load(&g_n_order);
  for (int k = 0; k < n && k < (int)ARRAY_LEN(g_order) && g_order[k] != 3; k++) before[g_order[k]]++;
  for (int i = 0; i < 3; i++) EXPECT_INT_EQ(r[i].n_completion, 40);
  EXPECT_INT_EQ(r[3].n_completion, 1);
  for (int i = 0; i < 4; i++) {
    fx_result_free(&r[i]);
    engine_req_free(h[i]);
  }
  engine_free(e);
}

TEST(engine_long_prompt_interleaves_with_decoding) {
  fx f;
  if (!fx_open(&f)) return;
  int before[3];
  /* n_batch 8: step 1 prefills 2+2+2 and 2 of the long prompt; then 5 per
   * step next to the 3 decoding tokens: 98 / 5 -> 20 more steps */
  interleave_run(&f, 8, 0, 0, before);
  for (int i = 0; i < 3; i++) {
    EXPECT_INT_GE(before[i], 19);
    EXPECT_INT_LE(before[i], 21);
  }
  /* n_batch 64, n_chunk 5: step 1 (nobody decoding yet) takes 2+2+2+58,
   * then 5 per step: 42 / 5 -> 9 more steps */
  interleave_run(&f, 64, 5, 0, before);
  for (int i = 0; i < 3; i++) {
    EXPECT_INT_GE(before[i], 9);
    EXPECT_INT_LE(before[i], 11);
  }
  /* no cap: the rest of the prompt goes in step 2 */
  interleave_run(&f, 64, 0, 0, before);
  for (int i = 0; i < 3; i++) EXPECT_INT_LE(before[i], 2);
  fx_close(&f);
}

/* chunk_budget_ms: out of range is refused with the field named; a budget
 * so small that one prompt token per step exceeds it still prefills the
 * long prompt (one token per step at least) and every stream finishes. */
TEST(engine_chunk_budget) {
  fx f;
  if (!fx_open(&f)) return;
  engine_params ep = engine_default_params();
  ep.chunk_budget_ms = -1;
  engine *e = NULL;
  EXPECT_INT_EQ(engine_new(f.m, NULL, &ep, &e), ERR_RANGE);
  EXPECT_TRUE(strstr(err_detail(), "chunk_budget_ms") != NULL);
  int before[3];
  interleave_run(&f, 64, 0, 1, before);
  for (int i = 0; i < 3; i++) EXPECT_INT_GE(before[i], 1);
  fx_close(&f);
}

/* The shared tiny Llama-2 file with its real SentencePiece vocabulary:
 * a text prompt's greedy continuation (stopping at EOG) through the engine
 * equals the direct loop, and its streamed text equals tok_decode. */
TEST(engine_shared_tiny_llama_real_vocab) {
  char path[512];
  if (!test_shared_path("models/llama-2-tiny-random.gguf", path, sizeof path))
    TEST_SKIP("../shared/models/llama-2-tiny-random.gguf not found");
  fx f;
  memset(&f, 0, sizeof f);
  ASSERT_INT_EQ(model_open(path, &f.m), 0);
  ASSERT_INT_EQ(tok_load(model_gguf(f.m), &f.t), 0);
  tok_ids ids = TOK_IDS_INIT;
  const char *text = "Hello world, this is a test";
  ASSERT_INT_EQ(tok_encode(f.t, text, strlen(text), TOK_ENCODE_ADD_SPECIAL, &ids), 0);
  int64_t V = model_get_hparams(f.m)->n_vocab;
  /* reference: greedy until EOG or 16 tokens */
  model_ctx_params cp = model_ctx_default_params();
  cp.n_ctx = 128;
  cp.kv_type = MODEL_KV_F32;
  model_ctx *c = NULL;
  ASSERT_INT_EQ(model_ctx_new(f.m, &cp, &c), 0);
  float *lg = malloc((size_t)V * sizeof(float));
  int32_t want[16];
  int n_want = 0;
  bool eog = false;
  int rc = model_forward(c, ids.ids, (int64_t)ids.n, 0, lg, MODEL_LOGITS_LAST);
  for (int64_t pos = (int64_t)ids.n; rc == 0 && n_want < 16; pos++) {
    int32_t best = 0;
    for (int32_t i = 1; i < V; i++)
      if (lg[i] > lg[best]) best = i;
    if (tok_is_eog(f.t, best)) {
      eog = true;
      break;
    }
    want[n_want++] = best;
    if (n_want < 16) rc = model_forward(c, &best, 1, pos, lg, MODEL_LOGITS_LAST);
  }
  EXPECT_INT_EQ(rc, 0);
  free(lg);
  model_ctx_free(c);
  EXPECT_INT_GE(n_want, 4); /* a meaningful comparison, not an instant EOG */

  engine_params ep = engine_default_params();
  ep.n_slots = 2;
  ep.n_ctx = 128;
  ep.kv_type = MODEL_KV_F32;
  engine *e = NULL;
  ASSERT_INT_EQ(engine_new(f.m, f.t, &ep, &e), 0);
  engine_request q = engine_request_default();
  q.prompt = ids.ids;
  q.n_prompt = ids.n;
  q.sample.temperature = 0;
  q.max_tokens = 16;
  engine_req *h = NULL;
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  fx_result r;
  fx_collect(h, &r, NULL);
  EXPECT_INT_EQ(r.finish, eog ? ENGINE_FINISH_STOP : ENGINE_FINISH_LENGTH);
  EXPECT_INT_EQ(r.n, n_want);
  EXPECT_TRUE(r.n == (size_t)n_want && memcmp(r.tokens, want, (size_t)n_want * sizeof(int32_t)) == 0);
  buf wt = BUF_INIT;
  EXPECT_INT_EQ(tok_decode(f.t, want, (size_t)n_want, 0, &wt), 0);
  EXPECT_TRUE(r.text.len == wt.len && (wt.len == 0 || memcmp(r.text.data, wt.data, wt.len) == 0));
  buf_free(&wt);
  fx_result_free(&r);
  engine_req_free(h);
  engine_free(e);
  tok_ids_free(&ids);
  tok_free(f.t);
  model_free(f.m);
}

/* n = 3 choices share the prompt: choice 0 prefills, the others copy its
 * cache. Greedy: every choice is the direct loop's continuation. Sampled:
 * choice i is what n = 1 gives with seed + i. Events carry the choice index;
 * one USAGE (summing the choices) comes before the last FINISH; a request
 * with n = 1 queued behind runs once slots are free. */
typedef struct multi {
  int32_t tokens[3][64];
  int n[3];
  int n_finish, n_usage;
  bool usage_before_last_finish, order_ok;
  int64_t n_completion, n_cached;
} multi;

static void collect_multi(engine_req *h, multi *m) {
  memset(m, 0, sizeof(*m));
  m->order_ok = true;
  for (;;) {
    engine_event ev;
    int rc = engine_req_next(h, 10000, &ev);
    if (rc == ERR_NOT_FOUND) break;
    if (rc) {
      test_fail_at(__FILE__, __LINE__, "engine_req_next: %s", err_name(rc));
      return;
    }
    if (ev.type == ENGINE_EVENT_TEXT_DELTA) {
      if (ev.index < 0 || ev.index > 2) m->order_ok = false;
      else
        for (size_t i = 0; i < ev.n_tokens && m->n[ev.index] < 64; i++) m->tokens[ev.index][m->n[ev.index]++] = ev.tokens[i];
    } else if (ev.type == ENGINE_EVENT_USAGE) {
      m->n_usage++;
      m->usage_before_last_finish = m->n_finish == 2;
      m->n_completion = ev.n_completion;
      m->n_cached = ev.n_cached;
    } else {
      m->n_finish++;
      if (ev.finish != ENGINE_FINISH_LENGTH) m->order_ok = false;
    }
    engine_event_free(&ev);
  }
}

TEST(engine_n_choices_share_prompt) {
  fx f;
  if (!fx_open(&f)) return;
  int32_t p[13];
  fx_make_prompt(p, 13, 1300);
  fx_ref ref;
  ASSERT_TRUE(fx_greedy(&f, p, 13, 10, &ref));
  engine *e = fx_engine(&f, 4, 128, 8, 8);
  ASSERT_TRUE(e != NULL);
  engine_request q = fx_greedy_req(p, 13, 10);
  q.n = 3;
  engine_req *h = NULL, *h1 = NULL;
  engine_pause(e, true);
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  engine_request q1 = fx_greedy_req(p, 5, 4);
  ASSERT_INT_EQ(engine_submit(e, &q1, &h1), 0);
  engine_pause(e, false);
  multi m;
  collect_multi(h, &m);
  EXPECT_TRUE(m.order_ok);
  EXPECT_INT_EQ(m.n_finish, 3);
  EXPECT_INT_EQ(m.n_usage, 1);
  EXPECT_TRUE(m.usage_before_last_finish);
  EXPECT_INT_EQ(m.n_completion, 30);
  for (int c = 0; c < 3; c++) {
    EXPECT_INT_EQ(m.n[c], 10);
    if (m.n[c] != 10 || memcmp(m.tokens[c], ref.tokens, 10 * sizeof(int32_t)) != 0)
      test_fail_at(__FILE__, __LINE__, "choice %d differs from the direct loop", c);
  }
  engine_req_free(h);
  fx_result r;
  fx_collect(h1, &r, NULL);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_LENGTH);
  EXPECT_INT_EQ(r.n_completion, 4);
  fx_result_free(&r);
  engine_req_free(h1);

  /* sampled: choice i = n 1 with seed + i */
  q.sample.temperature = 1.5f;
  q.sample.seed = 77;
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  collect_multi(h, &m);
  engine_req_free(h);
  for (int c = 0; c < 3; c++) {
    engine_request qs = q;
    qs.n = 1;
    qs.sample.seed = 77 + (uint64_t)c;
    ASSERT_INT_EQ(engine_submit(e, &qs, &h), 0);
    fx_collect(h, &r, NULL);
    if ((int)r.n != m.n[c] || memcmp(r.tokens, m.tokens[c], r.n * sizeof(int32_t)) != 0)
      test_fail_at(__FILE__, __LINE__, "sampled choice %d differs from n = 1 with seed + %d", c, c);
    fx_result_free(&r);
    engine_req_free(h);
  }
  engine_free(e);
  fx_close(&f);
}

/* Stress: two submitter threads, 24 requests each, some cancelled at once,
 * some freed before they finish, the rest collected; the engine is freed
 * while some are still running. Every collected request ends with USAGE
 * then FINISH; nothing leaks or races (run under the sanitizers). */
typedef struct stress_arg {
  engine *e;
  fx *f;
  int id;
  int n_accepted, n_waited, n_done, n_overloaded;
  engine_req *late[24];
  int n_late;
} stress_arg;

static void *stress_thread(void *p) {
  stress_arg *a = p;
  sample_rng r;
  sample_rng_seed(&r, 4242 + (uint64_t)a->id);
  for (int i = 0; i < 24; i++) {
    int32_t prompt[8];
    int n = 1 + (int)(sample_rng_next(&r) % 8);
    fx_make_prompt(prompt, n, sample_rng_next(&r));
    engine_request q = fx_greedy_req(prompt, (size_t)n, 1 + (int64_t)(sample_rng_next(&r) % 12));
    q.n = 1 + (int)(sample_rng_next(&r) % 2);
    engine_req *h = NULL;
    int rc = engine_submit(a->e, &q, &h);
    if (rc == ERR_OVERLOADED) {
      a->n_overloaded++;
      continue;
    }
    if (rc) continue;
    a->n_accepted++;
    unsigned what = (unsigned)(sample_rng_next(&r) % 4);
    if (what == 0) {
      engine_req_free(h); /* client gone at once */
    } else if (what == 1 || i >= 20) {
      if (what == 1) engine_req_cancel(h);
      if (a->n_late < 24) a->late[a->n_late++] = h; /* collected after engine_free */
      else engine_req_free(h);
    } else {
      engine_event ev;
      int got_finish = 0;
      a->n_waited++;
      while (engine_req_next(h, 10000, &ev) == 0) {
        if (ev.type == ENGINE_EVENT_FINISH) got_finish++;
        engine_event_free(&ev);
      }
      if (got_finish == (q.n > 1 ? q.n : 1)) a->n_done++;
      engine_req_free(h);
    }
  }
  return NULL;
}

TEST(engine_stress_threads_cancel_free) {
  fx f;
  if (!fx_open(&f)) return;
  engine *e = fx_engine(&f, 4, 64, 16, 6);
  ASSERT_TRUE(e != NULL);
  stress_arg a[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    memset(&a[i], 0, sizeof a[i]);
    a[i].e = e;
    a[i].f = &f;
    a[i].id = i;
    pthread_create(&th[i], NULL, stress_thread, &a[i]);
  }
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  engine_free(e);
  int n_collected = 0;
  for (int i = 0; i < 2; i++) {
    for (int j = 0; j < a[i].n_late; j++) {
      engine_event ev;
      bool usage = false, finish = false;
      while (engine_req_next(a[i].late[j], 0, &ev) == 0) {
        if (ev.type == ENGINE_EVENT_USAGE) usage = true;
        if (ev.type == ENGINE_EVENT_FINISH) finish = true;
        engine_event_free(&ev);
      }
      EXPECT_TRUE(usage && finish);
      n_collected++;
      engine_req_free(a[i].late[j]);
    }
  }
  /* How many submissions the queue (6) refused depends on timing (the
   * machine's load), so counts are checked against what was accepted: the
   * queue takes at least its bound before it refuses any, and every
   * request a client waited for ended with its finish events. */
  EXPECT_INT_GE(a[0].n_accepted + a[1].n_accepted, 6);
  EXPECT_INT_EQ(a[0].n_done + a[1].n_done, a[0].n_waited + a[1].n_waited);
  EXPECT_INT_GT(a[0].n_waited + a[1].n_waited + n_collected, 0);
  fx_close(&f);
}
