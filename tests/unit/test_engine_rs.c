/*
 * test_engine_rs.c - the engine's prefix cache on a model with recurrent
 * layers (a small random-weight lfm2, 300 tokens, engine_fx.h's vocabulary):
 * recurrent-state checkpoints at prompt-chunk ends (engine.c, "recurrent-
 * state checkpoints").
 *
 * Every output is compared with the fixture's reference, a direct greedy
 * loop on a fresh one-sequence context (which test_model_lfm2.c holds to
 * numpy), so a resumed state that is off in any way shows as other tokens;
 * the cached counts are the chunk arithmetic of n_batch 16 worked out here.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "engine_fx.h"
#include "model/testgen_arch.h"
#include "model/testgen_ssm.h"
#include "test.h"

/* 4 layers, one of them attention (model_testgen_arch_small), 3 taps. */
static const char *lfm2_path(void) {
  static char path[512];
  static bool written;
  if (!written) {
    snprintf(path, sizeof path, "%s/engine_lfm2.gguf", test_tmpdir());
    model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_LFM2);
    g.n_ctx = 512;
    g.seed = 9;
    if (model_testgen_arch_write(&g, path)) {
      test_fail_at(__FILE__, __LINE__, "testgen: %s", err_detail());
      return NULL;
    }
    written = true;
  }
  return path;
}

/* n_batch 16: a prompt is prefilled in chunks of 16 from where it resumes. */
static engine *rs_engine(fx *f, int32_t n_slots, int32_t n_checkpoints) {
  engine_params p = engine_default_params();
  p.n_slots = n_slots;
  p.n_ctx = 256;
  p.n_batch = 16;
  p.kv_type = MODEL_KV_F32;
  p.n_checkpoints = n_checkpoints;
  engine *e = NULL;
  if (engine_new(f->m, f->t, &p, &e)) test_fail_at(__FILE__, __LINE__, "engine_new: %s", err_detail());
  return e;
}

/* Log-probabilities of the chosen tokens agree with the reference's (in
 * double) this closely: f32 rounding of other chunkings. */
#define LP_TOL 1e-5

/* The engine's tokens are the reference's and so are their
 * log-probabilities (a state off by a chunk moves them by ~1e-2 on this
 * model while rarely changing a greedy token). */
static bool same_as_ref(const fx_result *r, const fx_ref *ref, int n) {
  if (!r->order_ok || !fx_tokens_equal(r, ref, n) || !r->have_lp) return false;
  for (int i = 0; i < n; i++)
    if (fabs(r->lp[i].logprob - ref->logprob[i]) >= LP_TOL) return false;
  return true;
}

/* Submits a greedy request with log-probabilities and collects it. */
static engine_req *submit_lp(engine *e, const int32_t *prompt, int n, int n_gen) {
  engine_request q = fx_greedy_req(prompt, (size_t)n, n_gen);
  q.logprobs = true;
  engine_req *h = NULL;
  if (engine_submit(e, &q, &h)) test_fail_at(__FILE__, __LINE__, "engine_submit: %s", err_detail());
  return h;
}

/* Runs prompt greedily for n_gen tokens and checks them against the
 * reference; returns the request's cached count (-1 on a mismatch). */
static int64_t turn(fx *f, engine *e, const int32_t *prompt, int n, int n_gen, int32_t *gen_out) {
  fx_ref ref;
  if (!fx_greedy(f, prompt, n, n_gen, &ref)) return -1;
  engine_req *h = submit_lp(e, prompt, n, n_gen);
  if (!h) return -1;
  fx_result r;
  fx_collect(h, &r, NULL);
  engine_req_free(h);
  bool same = same_as_ref(&r, &ref, n_gen);
  if (!same) test_fail_at(__FILE__, __LINE__, "a %d-token prompt: the engine's tokens differ from the fresh reference", n);
  if (gen_out) memcpy(gen_out, ref.tokens, (size_t)n_gen * sizeof *gen_out);
  int64_t cached = r.n_cached;
  fx_result_free(&r);
  return same ? cached : -1;
}

/* A conversation whose re-sent history differs from what the slot decoded
 * (the answer re-tokenized otherwise) resumes from the checkpoint at the end
 * of the previous prompt instead of recomputing it; one that continues the
 * history whole uses the live state; an exact repeat resumes from the last
 * chunk end before its final token. Without checkpoints the same turns
 * recompute everything but give the same tokens. */
static void check_conversation(const char *path) {
  fx f;
  if (!fx_open_path(&f, path)) return;
  ASSERT_TRUE(model_is_recurrent(f.m));
  EXPECT_INT_EQ(engine_n_checkpoints(f.m, 0), ENGINE_CHECKPOINTS);
  EXPECT_INT_EQ(engine_n_checkpoints(f.m, -1), 0);
  for (int with = 1; with >= 0; with--) {
    engine *e = rs_engine(&f, 1, with ? 0 : -1);
    ASSERT_TRUE(e != NULL);
    int32_t conv[200], gen[8];
    fx_make_prompt(conv, 20, 500);
    /* turn 1: 20 tokens, chunks 16 + 4: checkpoints at 16 and 20 */
    EXPECT_INT_EQ(turn(&f, e, conv, 20, 6, gen), 0);
    /* turn 2: the answer comes back as other tokens, then 9 of the user's */
    int n = 20;
    for (int i = 0; i < 6; i++) conv[n++] = gen[i] == 7 ? 8 : 7;
    fx_make_prompt(conv + n, 9, 501);
    n += 9;
    EXPECT_INT_EQ(turn(&f, e, conv, n, 6, gen), with ? 20 : 0);
    int n2 = n;
    /* turn 3: continues the history whole (its 5 decoded answer tokens):
     * the live state, with or without checkpoints */
    for (int i = 0; i < 6; i++) conv[n++] = gen[i];
    fx_make_prompt(conv + n, 4, 502);
    n += 4;
    EXPECT_INT_EQ(turn(&f, e, conv, n, 6, NULL), n2 + 5);
    /* turn 4: turn 3 again; turn 3 resumed at n2 + 5 = 40 (a checkpoint
     * where its chunk began) and ran to 45: 40 is the last checkpoint inside
     * its first 44 tokens */
    EXPECT_INT_EQ(n, 45);
    EXPECT_INT_EQ(turn(&f, e, conv, n, 6, NULL), with ? 40 : 0);
    engine_stats st;
    engine_get_stats(e, &st);
    EXPECT_INT_EQ(st.n_rs_restores, with ? 2 : 0);
    engine_free(e);
  }
  fx_close(&f);
}

TEST(engine_rs_conversation_resumes_from_checkpoints) { check_conversation(lfm2_path()); }

/* The same turns on a Mamba-2 hybrid (granitehybrid with experts: Mamba-2
 * layers' conv tails and scan states as the checkpointed state). */
TEST(engine_rs_mamba2_conversation_resumes_from_checkpoints) {
  static char path[512];
  snprintf(path, sizeof path, "%s/engine_granitehybrid.gguf", test_tmpdir());
  model_testgen_ssm g = model_testgen_ssm_small(MODEL_ARCH_GRANITEHYBRID, true);
  g.n_ctx = 512;
  g.seed = 9;
  if (model_testgen_ssm_write(&g, path)) {
    test_fail_at(__FILE__, __LINE__, "testgen: %s", err_detail());
    return;
  }
  check_conversation(path);
}

/* Two slots resume the same prefix in the same steps: one from its own
 * checkpoint, the other from the copy an n = 2 request gave it (step_fork
 * copies the checkpoints with the sequence). Each continuation equals its
 * fresh reference, so neither state was shared or disturbed. */
TEST(engine_rs_two_slots_never_share_state) {
  fx f;
  if (!fx_open_path(&f, lfm2_path())) return;
  engine *e = rs_engine(&f, 2, 0);
  ASSERT_TRUE(e != NULL);
  int32_t a[40], b[40];
  fx_make_prompt(a, 20, 600);
  /* n = 2 over 20 tokens: both slots end up with checkpoints at 16 and 20 */
  fx_ref ref;
  ASSERT_TRUE(fx_greedy(&f, a, 20, 5, &ref));
  engine_request q = fx_greedy_req(a, 20, 5);
  q.n = 2;
  engine_req *h = NULL;
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  int n_done = 0;
  int32_t toks[2][8];
  int n_tok[2] = {0, 0};
  for (;;) {
    engine_event ev;
    if (engine_req_next(h, 10000, &ev)) break;
    if (ev.type == ENGINE_EVENT_TEXT_DELTA)
      for (size_t i = 0; i < ev.n_tokens && n_tok[ev.index] < 8; i++) toks[ev.index][n_tok[ev.index]++] = ev.tokens[i];
    if (ev.type == ENGINE_EVENT_FINISH) n_done++;
    engine_event_free(&ev);
    if (n_done == 2) break;
  }
  engine_req_free(h);
  ASSERT_INT_EQ(n_done, 2);
  for (int c = 0; c < 2; c++) {
    EXPECT_INT_EQ(n_tok[c], 5);
    EXPECT_MEM_EQ(toks[c], ref.tokens, 5 * sizeof(int32_t));
  }
  /* two prompts sharing a's first 20 tokens, then other tokens (not the
   * answer), at once */
  memcpy(b, a, 20 * sizeof *a);
  for (int i = 0; i < 5; i++) a[20 + i] = ref.tokens[i] == 9 ? 10 : 9;
  fx_make_prompt(a + 25, 7, 601);
  fx_make_prompt(b + 20, 11, 602);
  fx_ref ra, rb;
  ASSERT_TRUE(fx_greedy(&f, a, 32, 8, &ra));
  ASSERT_TRUE(fx_greedy(&f, b, 31, 8, &rb));
  engine_pause(e, true);
  engine_req *ha = submit_lp(e, a, 32, 8), *hb = submit_lp(e, b, 31, 8);
  ASSERT_TRUE(ha && hb);
  engine_pause(e, false);
  fx_result r;
  fx_collect(ha, &r, NULL);
  EXPECT_TRUE(same_as_ref(&r, &ra, 8));
  EXPECT_INT_EQ(r.n_cached, 20);
  fx_result_free(&r);
  fx_collect(hb, &r, NULL);
  EXPECT_TRUE(same_as_ref(&r, &rb, 8));
  EXPECT_INT_EQ(r.n_cached, 20);
  fx_result_free(&r);
  engine_req_free(ha);
  engine_req_free(hb);
  engine_stats st;
  engine_get_stats(e, &st);
  EXPECT_INT_EQ(st.n_rs_restores, 2);
  engine_free(e);
  fx_close(&f);
}

typedef struct cancel_first {
  engine_req *h;
  atomic_int n_calls;
} cancel_first;

static void cancel_on_first_event(void *arg) {
  cancel_first *c = arg;
  if (atomic_fetch_add(&c->n_calls, 1) == 0) engine_req_cancel(c->h);
}

/* Cancellation and slot reuse: a request cancelled at its first token
 * leaves checkpoints only where its history was decoded (16, 32, 40), and
 * a prompt diverging inside them resumes from 32; a different prompt that
 * then takes the only slot drops them all, so the diverging prompt after
 * it recomputes (a stale checkpoint would give other tokens). */
TEST(engine_rs_checkpoints_follow_cancel_and_reuse) {
  fx f;
  if (!fx_open_path(&f, lfm2_path())) return;
  engine *e = rs_engine(&f, 1, 0);
  ASSERT_TRUE(e != NULL);
  int32_t p[64], other[30];
  fx_make_prompt(p, 40, 700);
  fx_make_prompt(other, 30, 701);
  if (other[0] == p[0]) other[0] = p[0] == 3 ? 4 : 3;
  cancel_first cf = {0};
  engine_request q = fx_greedy_req(p, 40, 0);
  q.notify = cancel_on_first_event;
  q.notify_ctx = &cf;
  engine_req *h = NULL;
  engine_pause(e, true); /* cf.h is set before the first event */
  ASSERT_INT_EQ(engine_submit(e, &q, &h), 0);
  cf.h = h;
  engine_pause(e, false);
  fx_result r;
  fx_collect(h, &r, NULL);
  EXPECT_INT_EQ(r.finish, ENGINE_FINISH_CANCELLED);
  EXPECT_INT_LE(r.n_completion, 3); /* stopped within a step of the cancel */
  fx_result_free(&r);
  engine_req_free(h);
  /* p diverging at 35 */
  fx_make_prompt(p + 35, 10, 702);
  EXPECT_INT_EQ(turn(&f, e, p, 45, 5, NULL), 32);
  /* another prompt reuses the slot from 0 */
  EXPECT_INT_EQ(turn(&f, e, other, 30, 5, NULL), 0);
  /* p again: nothing of it is left */
  EXPECT_INT_EQ(turn(&f, e, p, 45, 5, NULL), 0);
  engine_stats st;
  engine_get_stats(e, &st);
  EXPECT_INT_EQ(st.n_rs_restores, 1);
  /* more checkpoints than 64 are refused, naming the field */
  engine_params bad = engine_default_params();
  bad.n_checkpoints = 65;
  engine *e2 = NULL;
  EXPECT_INT_EQ(engine_new(f.m, f.t, &bad, &e2), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "n_checkpoints");
  engine_free(e);
  fx_close(&f);
}

/* A restart drops every checkpoint: p's (at 10, and at 12 where its second
 * turn began) would otherwise sit below a later prompt's common prefix with
 * the new history (14 tokens of `other`, which shares only 5 with p) while
 * the new history's own checkpoints (16, 20) are above it. */
TEST(engine_rs_restart_drops_checkpoints) {
  fx f;
  if (!fx_open_path(&f, lfm2_path())) return;
  engine *e = rs_engine(&f, 1, 0);
  ASSERT_TRUE(e != NULL);
  int32_t p[32], other[32], gen[4];
  fx_make_prompt(p, 10, 800);
  EXPECT_INT_EQ(turn(&f, e, p, 10, 3, gen), 0); /* checkpoint 10; history 12 */
  memcpy(p + 10, gen, 3 * sizeof *gen);
  fx_make_prompt(p + 13, 4, 801);
  EXPECT_INT_EQ(turn(&f, e, p, 17, 3, NULL), 12); /* live state; checkpoints 12, 17 */
  memcpy(other, p, 5 * sizeof *p);
  fx_make_prompt(other + 5, 15, 802);
  if (other[5] == p[5]) other[5] = p[5] == 3 ? 4 : 3;
  EXPECT_INT_EQ(turn(&f, e, other, 20, 3, NULL), 0); /* restart: checkpoints 16, 20 */
  fx_make_prompt(other + 14, 6, 803);
  EXPECT_INT_EQ(turn(&f, e, other, 20, 3, NULL), 0); /* no checkpoint within 14 */
  engine_stats st;
  engine_get_stats(e, &st);
  EXPECT_INT_EQ(st.n_rs_restores, 0);
  engine_free(e);
  fx_close(&f);
}
