/*
 * test_manager.c - the loaded-model manager (src/engine/manager.c) and the
 * generator's --vocab copy (model_testgen.vocab_path): unknown names,
 * non-executable architectures, one load for concurrent first requests, a
 * generated model that carries a real tokenizer; and loading/unloading:
 * keep-alive expiry, references that hold a model, keep-alive 0 and -1, LRU
 * eviction within a memory budget and the error when it cannot be met,
 * explicit load (instances, context override) and unload, requests racing
 * the reaper.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"
#include "engine/manager.h"
#include "gguf/gguf.h"
#include "model/registry.h"
#include "model/testgen.h"
#include "test.h"

/* A small llama with the shared llama-spm vocabulary, or NULL (skip). */
static const char *manager_test_model(char *out, size_t cap) {
  char vocab[512];
  if (!test_shared_path("vocab/ggml-vocab-llama-spm.gguf", vocab, sizeof vocab)) return NULL;
  snprintf(out, cap, "%s/mgr-tiny.gguf", test_tmpdir());
  model_testgen g = model_testgen_small();
  g.vocab_path = vocab;
  g.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  if (model_testgen_write(&g, out)) return NULL;
  return out;
}

TEST(manager_gen_model_copies_the_vocabulary) {
  char vocab[512], path[512];
  if (!test_shared_path("vocab/ggml-vocab-llama-spm.gguf", vocab, sizeof vocab))
    TEST_SKIP("../shared/vocab/ggml-vocab-llama-spm.gguf not found");
  ASSERT_TRUE(manager_test_model(path, sizeof path) != NULL);
  gguf_file *v = NULL, *m = NULL;
  ASSERT_INT_EQ(gguf_open(vocab, &v), 0);
  ASSERT_INT_EQ(gguf_open(path, &m), 0);
  const gguf_value *tv = NULL, *tm = NULL;
  ASSERT_INT_EQ(gguf_get_arr(v, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tv), 0);
  ASSERT_INT_EQ(gguf_get_arr(m, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tm), 0);
  ASSERT_INT_EQ(tv->v.arr.n, tm->v.arr.n);
  for (uint64_t i = 0; i < tv->v.arr.n; i += 997) {
    ASSERT_INT_EQ(tv->v.arr.strs[i].len, tm->v.arr.strs[i].len);
    EXPECT_MEM_EQ(tv->v.arr.strs[i].data, tm->v.arr.strs[i].data, tv->v.arr.strs[i].len);
  }
  const gguf_value *sv = NULL, *sm = NULL;
  if (gguf_get_arr(v, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &sv) == 0) {
    ASSERT_INT_EQ(gguf_get_arr(m, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &sm), 0);
    EXPECT_NEAR(gguf_arr_f64(sv, 1000), gguf_arr_f64(sm, 1000), 0);
  }
  uint32_t bv = 0, bm = 1;
  if (gguf_get_u32(v, "tokenizer.ggml.bos_token_id", &bv) == 0) {
    EXPECT_INT_EQ(gguf_get_u32(m, "tokenizer.ggml.bos_token_id", &bm), 0);
    EXPECT_INT_EQ(bv, bm);
  }
  const char *tsrc = NULL;
  EXPECT_INT_EQ(gguf_get_str(m, "tokenizer.chat_template", &tsrc), 0);
  if (tsrc) EXPECT_STR_EQ(tsrc, "{% for m in messages %}{{ m.content }}{% endfor %}");
  /* the embedding matrix follows the vocabulary */
  const gguf_tensor *te = gguf_find_tensor(m, "token_embd.weight");
  ASSERT_TRUE(te != NULL);
  EXPECT_INT_EQ(te->dims[1], tv->v.arr.n);
  gguf_close(v);
  gguf_close(m);
}

TEST(manager_unknown_model_is_not_found_naming_it) {
  registry *r = NULL;
  ASSERT_INT_EQ(registry_new(&r), 0);
  registry_set_models_dir(r, test_tmpdir());
  for (int s = REGISTRY_SOURCE_OLLAMA; s < REGISTRY_SOURCE_COUNT; s++) registry_set_source_dir(r, s, "");
  registry_refresh(r);
  manager *mg = NULL;
  ASSERT_INT_EQ(manager_new(r, NULL, &mg), 0);
  manager_model *mm = (manager_model *)1;
  EXPECT_INT_EQ(manager_get(mg, "no-such-model", &mm), ERR_NOT_FOUND);
  EXPECT_TRUE(mm == NULL);
  EXPECT_STR_CONTAINS(err_detail(), "no-such-model");
  manager_free(mg);
  registry_free(r);
}

TEST(manager_non_executable_architecture_is_unsupported) {
  char path[512];
  snprintf(path, sizeof path, "%s/mgr-phimoe.gguf", test_tmpdir());
  gguf_writer *w = NULL;
  ASSERT_INT_EQ(gguf_writer_new(&w), 0);
  gguf_writer_add_str(w, "general.architecture", "phimoe");
  gguf_writer_add_str(w, "general.name", "Phi 3.5 MoE test");
  ASSERT_INT_EQ(gguf_writer_write_file(w, path), 0);
  gguf_writer_free(w);
  registry *r = NULL;
  ASSERT_INT_EQ(registry_new(&r), 0);
  registry_set_models_dir(r, NULL);
  for (int s = REGISTRY_SOURCE_OLLAMA; s < REGISTRY_SOURCE_COUNT; s++) registry_set_source_dir(r, s, "");
  ASSERT_INT_EQ(registry_add_model(r, path, "gem"), 0);
  registry_refresh(r);
  manager *mg = NULL;
  ASSERT_INT_EQ(manager_new(r, NULL, &mg), 0);
  manager_model *mm = NULL;
  EXPECT_INT_EQ(manager_get(mg, "gem", &mm), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "phimoe");
  EXPECT_INT_EQ(manager_n_loaded(mg), 0);
  manager_free(mg);
  registry_free(r);
}

/* Two models and no default: naming none is the request's fault
 * (ERR_INVALID, which the dialects answer 400 naming their model field),
 * not a missing model. */
TEST(manager_no_name_among_several_models_is_invalid) {
  char path[512];
  if (!manager_test_model(path, sizeof path)) TEST_SKIP("../shared/vocab/ggml-vocab-llama-spm.gguf not found");
  registry *r = NULL;
  ASSERT_INT_EQ(registry_new(&r), 0);
  registry_set_models_dir(r, NULL);
  for (int s = REGISTRY_SOURCE_OLLAMA; s < REGISTRY_SOURCE_COUNT; s++) registry_set_source_dir(r, s, "");
  ASSERT_INT_EQ(registry_add_model(r, path, "one"), 0);
  ASSERT_INT_EQ(registry_add_model(r, path, "two"), 0); /* one file under two names is two models */
  registry_refresh(r);
  manager *mg = NULL;
  ASSERT_INT_EQ(manager_new(r, NULL, &mg), 0);
  manager_model *mm = NULL;
  EXPECT_INT_EQ(manager_get(mg, NULL, &mm), ERR_INVALID);
  EXPECT_TRUE(mm == NULL);
  EXPECT_STR_CONTAINS(err_detail(), "--default-model");
  EXPECT_STR_CONTAINS(err_detail(), "2 models");
  manager_free(mg);
  registry_free(r);
}

/* A listed model whose file fails to load (cut short after the scan, so
 * a tensor runs past the end) is ERR_IO naming the model and its file -
 * not ERR_NOT_FOUND, not a request error. */
TEST(manager_listed_model_that_fails_to_load_names_its_file) {
  char path[512], cut[600];
  if (!manager_test_model(path, sizeof path)) TEST_SKIP("../shared/vocab/ggml-vocab-llama-spm.gguf not found");
  snprintf(cut, sizeof cut, "%s/mgr-cut.gguf", test_tmpdir());
  FILE *in = fopen(path, "rb"), *out = fopen(cut, "wb");
  ASSERT_TRUE(in && out);
  char chunk[65536];
  size_t n, total = 0;
  while ((n = fread(chunk, 1, sizeof chunk, in)) > 0) total += fwrite(chunk, 1, n, out);
  fclose(in);
  fclose(out);
  registry *r = NULL;
  ASSERT_INT_EQ(registry_new(&r), 0);
  registry_set_models_dir(r, NULL);
  for (int s = REGISTRY_SOURCE_OLLAMA; s < REGISTRY_SOURCE_COUNT; s++) registry_set_source_dir(r, s, "");
  ASSERT_INT_EQ(registry_add_model(r, cut, "cut"), 0);
  registry_refresh(r);
  ASSERT_INT_EQ(truncate(cut, (off_t)(total / 2)), 0);
  manager *mg = NULL;
  ASSERT_INT_EQ(manager_new(r, NULL, &mg), 0);
  manager_model *mm = NULL;
  EXPECT_INT_EQ(manager_get(mg, "cut", &mm), ERR_IO);
  EXPECT_TRUE(mm == NULL);
  EXPECT_STR_CONTAINS(err_detail(), "model 'cut'");
  EXPECT_STR_CONTAINS(err_detail(), cut);
  /* the same when the scan already saw the damage */
  registry_refresh(r);
  EXPECT_INT_EQ(manager_get(mg, "cut", &mm), ERR_IO);
  EXPECT_STR_CONTAINS(err_detail(), cut);
  manager_free(mg);
  registry_free(r);
}

struct mgr_thread {
  manager *mg;
  manager_model *mm;
  int rc;
};

static void *mgr_thread_main(void *arg) {
  struct mgr_thread *t = arg;
  t->rc = manager_get(t->mg, "tiny", &t->mm);
  return NULL;
}

TEST(manager_concurrent_first_requests_load_once) {
  char path[512];
  if (!manager_test_model(path, sizeof path)) TEST_SKIP("../shared/vocab/ggml-vocab-llama-spm.gguf not found");
  registry *r = NULL;
  ASSERT_INT_EQ(registry_new(&r), 0);
  registry_set_models_dir(r, NULL);
  for (int s = REGISTRY_SOURCE_OLLAMA; s < REGISTRY_SOURCE_COUNT; s++) registry_set_source_dir(r, s, "");
  ASSERT_INT_EQ(registry_add_model(r, path, "tiny"), 0);
  registry_refresh(r);
  manager *mg = NULL;
  manager_params p = {.n_slots = 2, .n_ctx = 64, .n_threads = 1};
  ASSERT_INT_EQ(manager_new(r, &p, &mg), 0);
  struct mgr_thread th[4];
  pthread_t tid[4];
  for (int i = 0; i < 4; i++) {
    th[i] = (struct mgr_thread){.mg = mg};
    ASSERT_INT_EQ(pthread_create(&tid[i], NULL, mgr_thread_main, &th[i]), 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(tid[i], NULL);
  for (int i = 0; i < 4; i++) {
    EXPECT_INT_EQ(th[i].rc, 0);
    EXPECT_TRUE(th[i].mm == th[0].mm);
  }
  EXPECT_INT_EQ(manager_n_loaded(mg), 1);
  ASSERT_TRUE(th[0].mm != NULL);
  EXPECT_STR_EQ(th[0].mm->name, "tiny");
  EXPECT_INT_EQ(engine_n_slots(th[0].mm->eng), 2);
  EXPECT_INT_EQ(engine_n_ctx(th[0].mm->eng), 64);
  EXPECT_TRUE(th[0].mm->chat != NULL);
  EXPECT_STR_EQ(th[0].mm->bos, "<s>");
  /* the default (the only model) is the same loaded model */
  manager_model *d = NULL;
  EXPECT_INT_EQ(manager_get(mg, NULL, &d), 0);
  EXPECT_TRUE(d == th[0].mm);
  EXPECT_FALSE(manager_model_can_embed(d));
  manager_free(mg);
  registry_free(r);
}

/* ---- loading and unloading ------------------------------------------------
 * Timing: nothing asserts a duration. "Unloads" polls for up to 30 s (a
 * loaded 2-core machine); "stays" holds a reference or uses a keep-alive of
 * minutes and checks after a short sleep. */

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Polls until the manager has n models loaded; false after timeout_ms. */
static bool wait_loaded(manager *mg, int n, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 5) {
    if (manager_n_loaded(mg) == n) return true;
    sleep_ms(5);
  }
  return manager_n_loaded(mg) == n;
}

/* Whether an instance id is in the loaded list. */
static bool is_loaded(manager *mg, const char *id) {
  manager_loaded *l = NULL;
  size_t n = 0;
  if (manager_list_loaded(mg, &l, &n)) return false;
  bool found = false;
  for (size_t i = 0; i < n; i++) found |= strcmp(l[i].instance_id, id) == 0;
  manager_loaded_free(l, n);
  return found;
}

/* A registry with the test model under the names a, b and c (one file). */
static registry *abc_registry(const char *path) {
  registry *r = NULL;
  if (registry_new(&r)) return NULL;
  registry_set_models_dir(r, NULL);
  for (int s = REGISTRY_SOURCE_OLLAMA; s < REGISTRY_SOURCE_COUNT; s++) registry_set_source_dir(r, s, "");
  registry_add_model(r, path, "a");
  registry_add_model(r, path, "b");
  registry_add_model(r, path, "c");
  registry_refresh(r);
  return r;
}

#define NEED_MODEL(path)                                   \
  char path[512];                                          \
  if (!manager_test_model(path, sizeof path))              \
  TEST_SKIP("../shared/vocab/ggml-vocab-llama-spm.gguf not found")

/* The estimated size of one loaded test model (n_slots 2, n_ctx 64). */
static uint64_t model_bytes(registry *r) {
  manager *mg = NULL;
  manager_params p = {.n_slots = 2, .n_ctx = 64, .n_threads = 1};
  if (manager_new(r, &p, &mg)) return 0;
  manager_model *mm = NULL;
  uint64_t b = manager_get(mg, "a", &mm) ? 0 : mm->bytes;
  manager_release(mm);
  manager_free(mg);
  return b;
}

TEST(manager_parse_keep_alive_durations) {
  struct {
    const char *s;
    int64_t ms;
  } ok[] = {{"5m", 300000}, {"30s", 30000}, {"1h30m", 5400000}, {"500ms", 500}, {"300", 300000},
            {"1.5", 1500},  {"-1", -1},     {"0", 0},            {"-5m", -1},    {"0s", 0},
            {"10m0s", 600000}, {" 2h ", 7200000}, {"1us", 1}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    int64_t ms = 12345;
    EXPECT_INT_EQ(manager_parse_keep_alive(ok[i].s, &ms), 0);
    EXPECT_INT_EQ(ms, ok[i].ms);
  }
  const char *bad[] = {"", "abc", "5x", "5 m", "m", "1.2.3", "--1", "5m3", "."};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t ms = 0;
    EXPECT_INT_EQ(manager_parse_keep_alive(bad[i], &ms), ERR_INVALID);
    EXPECT_STR_CONTAINS(err_detail(), "keep-alive");
  }
}

TEST(manager_keep_alive_expires_after_release) {
  NEED_MODEL(path);
  registry *r = abc_registry(path);
  ASSERT_TRUE(r != NULL);
  manager *mg = NULL;
  manager_params p = {.n_slots = 2, .n_ctx = 64, .n_threads = 1, .keep_alive_set = true, .keep_alive_ms = 30};
  ASSERT_INT_EQ(manager_new(r, &p, &mg), 0);
  manager_model *mm = NULL;
  ASSERT_INT_EQ(manager_get(mg, "a", &mm), 0);
  EXPECT_INT_EQ(mm->keep_alive_ms, 30);
  /* a reference holds it however long the keep-alive is exceeded */
  sleep_ms(150);
  EXPECT_INT_EQ(manager_n_loaded(mg), 1);
  manager_loaded *l = NULL;
  size_t n = 0;
  ASSERT_INT_EQ(manager_list_loaded(mg, &l, &n), 0);
  ASSERT_INT_EQ(n, 1);
  EXPECT_STR_EQ(l[0].instance_id, "a");
  EXPECT_STR_EQ(l[0].entry->name, "a");
  EXPECT_INT_EQ(l[0].refs, 1);
  EXPECT_INT_EQ(l[0].n_ctx, 64);
  EXPECT_INT_EQ(l[0].n_slots, 2);
  EXPECT_TRUE(l[0].bytes > l[0].entry->size);
  EXPECT_TRUE(l[0].kv_bytes > 0);
  EXPECT_TRUE(l[0].expires_at_ms > 0);
  EXPECT_TRUE(l[0].loaded_at > 0);
  manager_loaded_free(l, n);
  manager_release(mm);
  EXPECT_TRUE(wait_loaded(mg, 0, 30000));
  uint64_t used = 1, budget = 0;
  manager_memory(mg, &used, &budget);
  EXPECT_INT_EQ(used, 0);
  EXPECT_TRUE(budget > 0);
  /* the next request loads it again */
  ASSERT_INT_EQ(manager_get(mg, "a", &mm), 0);
  EXPECT_INT_EQ(manager_n_loaded(mg), 1);
  manager_release(mm);
  EXPECT_TRUE(wait_loaded(mg, 0, 30000));
  manager_free(mg);
  registry_free(r);
}

TEST(manager_references_prevent_unload_and_keep_alive_zero_unloads_at_release) {
  NEED_MODEL(path);
  registry *r = abc_registry(path);
  ASSERT_TRUE(r != NULL);
  manager *mg = NULL;
  manager_params p = {.n_slots = 2, .n_ctx = 64, .n_threads = 1}; /* default keep-alive: 5 minutes */
  ASSERT_INT_EQ(manager_new(r, &p, &mg), 0);
  manager_opts now = {.keep_alive_set = true, .keep_alive_ms = 0};
  manager_model *m1 = NULL, *m2 = NULL;
  ASSERT_INT_EQ(manager_get_opts(mg, "a", &now, &m1), 0);
  ASSERT_INT_EQ(manager_get_opts(mg, "a", &now, &m2), 0);
  EXPECT_TRUE(m1 == m2);
  EXPECT_INT_EQ(m1->keep_alive_ms, 0);
  EXPECT_INT_EQ(m1->base_keep_alive_ms, MANAGER_KEEP_ALIVE_DEFAULT_MS);
  manager_release(m1);
  sleep_ms(200); /* one reference left: stays */
  EXPECT_INT_EQ(manager_n_loaded(mg), 1);
  EXPECT_TRUE(m2->eng != NULL);
  manager_release(m2);
  EXPECT_TRUE(wait_loaded(mg, 0, 30000));

  /* a request without keep_alive gets the default back: stays minutes */
  ASSERT_INT_EQ(manager_get_opts(mg, "a", &now, &m1), 0);
  ASSERT_INT_EQ(manager_get(mg, "a", &m2), 0);
  EXPECT_INT_EQ(m2->keep_alive_ms, MANAGER_KEEP_ALIVE_DEFAULT_MS);
  manager_release(m1);
  manager_release(m2);
  sleep_ms(200);
  EXPECT_INT_EQ(manager_n_loaded(mg), 1);
  manager_loaded *l = NULL;
  size_t n = 0;
  ASSERT_INT_EQ(manager_list_loaded(mg, &l, &n), 0);
  ASSERT_INT_EQ(n, 1);
  EXPECT_INT_EQ(l[0].refs, 0);
  int64_t left = l[0].expires_at_ms - time_wall_ms();
  EXPECT_TRUE(left > 60 * 1000 && left <= MANAGER_KEEP_ALIVE_DEFAULT_MS);
  manager_loaded_free(l, n);
  /* manager_set_keep_alive on a held reference */
  ASSERT_INT_EQ(manager_get(mg, "a", &m1), 0);
  manager_set_keep_alive(m1, 0);
  manager_release(m1);
  EXPECT_TRUE(wait_loaded(mg, 0, 30000));
  manager_free(mg);
  registry_free(r);
}

TEST(manager_keep_alive_forever_stays_until_unloaded) {
  NEED_MODEL(path);
  registry *r = abc_registry(path);
  ASSERT_TRUE(r != NULL);
  manager *mg = NULL;
  manager_params p = {.n_slots = 2, .n_ctx = 64, .n_threads = 1, .keep_alive_set = true, .keep_alive_ms = 20};
  ASSERT_INT_EQ(manager_new(r, &p, &mg), 0);
  manager_opts forever = {.keep_alive_set = true, .keep_alive_ms = -1};
  manager_model *mm = NULL;
  ASSERT_INT_EQ(manager_get_opts(mg, "a", &forever, &mm), 0);
  manager_release(mm);
  sleep_ms(300); /* 15 times the manager's keep-alive */
  EXPECT_INT_EQ(manager_n_loaded(mg), 1);
  manager_loaded *l = NULL;
  size_t n = 0;
  ASSERT_INT_EQ(manager_list_loaded(mg, &l, &n), 0);
  ASSERT_INT_EQ(n, 1);
  EXPECT_INT_EQ(l[0].expires_at_ms, 0);
  EXPECT_INT_EQ(l[0].keep_alive_ms, -1);
  manager_loaded_free(l, n);
  /* explicit unload of an idle model: gone when the call returns */
  EXPECT_INT_EQ(manager_unload(mg, "a"), 0);
  EXPECT_INT_EQ(manager_n_loaded(mg), 0);
  EXPECT_INT_EQ(manager_unload(mg, "a"), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "not loaded");
  EXPECT_INT_EQ(manager_unload(mg, "nothing-like-it"), ERR_NOT_FOUND);
  manager_free(mg);
  registry_free(r);
}

TEST(manager_budget_evicts_least_recently_used_idle_model) {
  NEED_MODEL(path);
  registry *r = abc_registry(path);
  ASSERT_TRUE(r != NULL);
  uint64_t one = model_bytes(r);
  ASSERT_TRUE(one > 0);
  manager *mg = NULL;
  manager_params p = {.n_slots = 2, .n_ctx = 64, .n_threads = 1, .memory_budget = (int64_t)(one * 5 / 2)};
  ASSERT_INT_EQ(manager_new(r, &p, &mg), 0);
  manager_model *mm = NULL;
  ASSERT_INT_EQ(manager_get(mg, "a", &mm), 0);
  manager_release(mm);
  sleep_ms(2);
  ASSERT_INT_EQ(manager_get(mg, "b", &mm), 0);
  manager_release(mm);
  sleep_ms(2);
  ASSERT_INT_EQ(manager_get(mg, "a", &mm), 0); /* a is used again: b is now the LRU */
  manager_release(mm);
  EXPECT_INT_EQ(manager_n_loaded(mg), 2);
  ASSERT_INT_EQ(manager_get(mg, "c", &mm), 0);
  EXPECT_INT_EQ(manager_n_loaded(mg), 2);
  EXPECT_TRUE(is_loaded(mg, "a"));
  EXPECT_FALSE(is_loaded(mg, "b"));
  EXPECT_TRUE(is_loaded(mg, "c"));
  uint64_t used = 0, budget = 0;
  manager_memory(mg, &used, &budget);
  EXPECT_INT_EQ(budget, one * 5 / 2);
  EXPECT_INT_EQ(used, 2 * one);
  /* the list: busy first (c), then most recently used */
  manager_loaded *l = NULL;
  size_t n = 0;
  ASSERT_INT_EQ(manager_list_loaded(mg, &l, &n), 0);
  ASSERT_INT_EQ(n, 2);
  EXPECT_STR_EQ(l[0].instance_id, "c");
  EXPECT_STR_EQ(l[1].instance_id, "a");
  manager_loaded_free(l, n);
  manager_release(mm);
  manager_free(mg);
  registry_free(r);
}

TEST(manager_budget_that_cannot_be_met_is_a_clear_error) {
  NEED_MODEL(path);
  registry *r = abc_registry(path);
  ASSERT_TRUE(r != NULL);
  uint64_t one = model_bytes(r);
  ASSERT_TRUE(one > 0);
  /* smaller than the model itself: ERR_NOMEM, nothing loaded */
  manager *mg = NULL;
  manager_params p = {.n_slots = 2, .n_ctx = 64, .n_threads = 1, .memory_budget = (int64_t)(one / 2)};
  ASSERT_INT_EQ(manager_new(r, &p, &mg), 0);
  manager_model *mm = (manager_model *)1;
  EXPECT_INT_EQ(manager_get(mg, "a", &mm), ERR_NOMEM);
  EXPECT_TRUE(mm == NULL);
  EXPECT_STR_CONTAINS(err_detail(), "'a' needs about");
  EXPECT_STR_CONTAINS(err_detail(), "memory budget");
  EXPECT_STR_CONTAINS(err_detail(), "KV cache");
  EXPECT_INT_EQ(manager_n_loaded(mg), 0);
  manager_free(mg);

  /* room for one: a busy model keeps b out (ERR_OVERLOADED naming both),
   * once a is idle it is evicted for b */
  p.memory_budget = (int64_t)(one * 3 / 2);
  ASSERT_INT_EQ(manager_new(r, &p, &mg), 0);
  manager_model *a = NULL, *b = NULL;
  ASSERT_INT_EQ(manager_get(mg, "a", &a), 0);
  EXPECT_INT_EQ(manager_get(mg, "b", &b), ERR_OVERLOADED);
  EXPECT_TRUE(b == NULL);
  EXPECT_STR_CONTAINS(err_detail(), "'b' needs about");
  EXPECT_STR_CONTAINS(err_detail(), "free");
  EXPECT_STR_CONTAINS(err_detail(), "a (");
  EXPECT_STR_CONTAINS(err_detail(), "in use");
  EXPECT_INT_EQ(manager_n_loaded(mg), 1);
  EXPECT_TRUE(a->eng != NULL); /* untouched */
  manager_release(a);
  ASSERT_INT_EQ(manager_get(mg, "b", &b), 0);
  EXPECT_TRUE(is_loaded(mg, "b"));
  EXPECT_FALSE(is_loaded(mg, "a"));
  manager_release(b);
  manager_free(mg);
  registry_free(r);
}

TEST(manager_explicit_load_instances_and_unload) {
  NEED_MODEL(path);
  registry *r = abc_registry(path);
  ASSERT_TRUE(r != NULL);
  manager *mg = NULL;
  manager_params p = {.n_slots = 2, .n_ctx = 64, .n_threads = 1};
  ASSERT_INT_EQ(manager_new(r, &p, &mg), 0);
  /* load without a reference: loaded, idle, the default keep-alive */
  ASSERT_INT_EQ(manager_load(mg, "a", NULL, NULL), 0);
  EXPECT_INT_EQ(manager_n_loaded(mg), 1);
  manager_loaded *l = NULL;
  size_t n = 0;
  ASSERT_INT_EQ(manager_list_loaded(mg, &l, &n), 0);
  ASSERT_INT_EQ(n, 1);
  EXPECT_INT_EQ(l[0].refs, 0);
  EXPECT_INT_EQ(l[0].n_ctx, 64);
  manager_loaded_free(l, n);
  /* loading it again changes nothing */
  ASSERT_INT_EQ(manager_load(mg, "a", NULL, NULL), 0);
  EXPECT_INT_EQ(manager_n_loaded(mg), 1);
  /* another context: a second instance a:2 */
  manager_opts o32 = {.n_ctx = 32};
  manager_model *mm = NULL;
  ASSERT_INT_EQ(manager_load(mg, "a", &o32, &mm), 0);
  EXPECT_STR_EQ(mm->instance_id, "a:2");
  EXPECT_STR_EQ(mm->name, "a");
  EXPECT_INT_EQ(mm->n_ctx, 32);
  EXPECT_INT_EQ(engine_n_ctx(mm->eng), 32);
  EXPECT_INT_EQ(mm->refs, 1);
  manager_release(mm);
  EXPECT_INT_EQ(manager_n_loaded(mg), 2);
  /* a named instance with a TTL-less keep-alive; requests reach it by id */
  manager_opts mine = {.n_ctx = 32, .instance_id = "mine", .keep_alive_set = true, .keep_alive_ms = -1};
  ASSERT_INT_EQ(manager_load(mg, "b", &mine, NULL), 0);
  ASSERT_INT_EQ(manager_get(mg, "mine", &mm), 0);
  EXPECT_STR_EQ(mm->instance_id, "mine");
  EXPECT_STR_EQ(mm->name, "b");
  EXPECT_INT_EQ(mm->keep_alive_ms, -1); /* the base keep-alive from the load */
  manager_release(mm);
  /* and requests for its model use it rather than loading another */
  ASSERT_INT_EQ(manager_get(mg, "b", &mm), 0);
  EXPECT_STR_EQ(mm->instance_id, "mine");
  manager_release(mm);
  EXPECT_INT_EQ(manager_n_loaded(mg), 3);
  manager_opts clash = {.n_ctx = 48, .instance_id = "mine"};
  EXPECT_INT_EQ(manager_load(mg, "b", &clash, NULL), ERR_CONFLICT);
  EXPECT_STR_CONTAINS(err_detail(), "mine");
  manager_opts other = {.instance_id = "mine"};
  EXPECT_INT_EQ(manager_load(mg, "c", &other, NULL), ERR_CONFLICT);
  EXPECT_STR_CONTAINS(err_detail(), "model 'b'");
  manager_opts neg = {.n_ctx = -5};
  EXPECT_INT_EQ(manager_load(mg, "b", &neg, NULL), ERR_RANGE);
  EXPECT_INT_EQ(manager_load(mg, "zzz", NULL, NULL), ERR_NOT_FOUND);
  /* unload by instance id, then by model name (every instance of it) */
  EXPECT_INT_EQ(manager_unload(mg, "a:2"), 0);
  EXPECT_FALSE(is_loaded(mg, "a:2"));
  EXPECT_TRUE(is_loaded(mg, "a"));
  EXPECT_INT_EQ(manager_unload(mg, "b"), 0);
  EXPECT_FALSE(is_loaded(mg, "mine"));
  EXPECT_INT_EQ(manager_n_loaded(mg), 1);
  /* unload while in use: deferred to the last release */
  ASSERT_INT_EQ(manager_get(mg, "a", &mm), 0);
  EXPECT_INT_EQ(manager_unload(mg, "a"), 0);
  sleep_ms(100);
  EXPECT_INT_EQ(manager_n_loaded(mg), 1);
  EXPECT_TRUE(mm->eng != NULL);
  manager_release(mm);
  EXPECT_TRUE(wait_loaded(mg, 0, 30000));
  manager_free(mg);
  registry_free(r);
}

struct churn {
  manager *mg;
  const char *name;
  int rounds, failures;
};

/* get / check / release in a loop, with a tiny keep-alive so that the reaper
 * unloads between rounds: loads and unloads race with new requests. */
static void *churn_main(void *arg) {
  struct churn *c = arg;
  for (int i = 0; i < c->rounds; i++) {
    manager_model *mm = NULL;
    if (manager_get(c->mg, c->name, &mm) || !mm || !mm->eng || strcmp(mm->name, c->name) != 0) c->failures++;
    if (mm && engine_n_ctx(mm->eng) != 64) c->failures++;
    manager_release(mm);
    if (i % 3 == 0) sleep_ms(2);
  }
  return NULL;
}

TEST(manager_requests_racing_the_reaper_always_get_a_live_model) {
  NEED_MODEL(path);
  registry *r = abc_registry(path);
  ASSERT_TRUE(r != NULL);
  manager *mg = NULL;
  manager_params p = {.n_slots = 2, .n_ctx = 64, .n_threads = 1, .keep_alive_set = true, .keep_alive_ms = 1};
  ASSERT_INT_EQ(manager_new(r, &p, &mg), 0);
  struct churn c[4] = {{mg, "a", 15, 0}, {mg, "a", 15, 0}, {mg, "b", 15, 0}, {mg, "b", 15, 0}};
  pthread_t t[4];
  for (int i = 0; i < 4; i++) ASSERT_INT_EQ(pthread_create(&t[i], NULL, churn_main, &c[i]), 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 4; i++) EXPECT_INT_EQ(c[i].failures, 0);
  EXPECT_TRUE(wait_loaded(mg, 0, 30000));
  manager_free(mg);
  registry_free(r);
}

/* A chat model for a request that names none (Deepgram's /read): the
 * smallest runnable chat model (never a file the runtime cannot run, however
 * small), a loaded one before that, the default before everything, and
 * ERR_UNAVAILABLE saying what to set when there is none. */
TEST(manager_get_chat_picks_default_loaded_then_smallest) {
  char vocab[512];
  if (!test_shared_path("vocab/ggml-vocab-llama-spm.gguf", vocab, sizeof vocab))
    TEST_SKIP("../shared/vocab/ggml-vocab-llama-spm.gguf not found");
  char small[512], big[512], gem[512];
  snprintf(small, sizeof small, "%s/chat-small.gguf", test_tmpdir());
  snprintf(big, sizeof big, "%s/chat-big.gguf", test_tmpdir());
  snprintf(gem, sizeof gem, "%s/chat-gemma.gguf", test_tmpdir());
  model_testgen g = model_testgen_small();
  g.vocab_path = vocab;
  g.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  ASSERT_INT_EQ(model_testgen_write(&g, small), 0);
  g.chat_template = "{% for m in messages %}{{ m.role }}: {{ m.content }} -- a longer template, a bigger file"
                    "{% endfor %}";
  ASSERT_INT_EQ(model_testgen_write(&g, big), 0);
  gguf_writer *w = NULL;
  ASSERT_INT_EQ(gguf_writer_new(&w), 0);
  gguf_writer_add_str(w, "general.architecture", "dbrx"); /* a family the runtime does not execute */
  ASSERT_INT_EQ(gguf_writer_write_file(w, gem), 0);
  gguf_writer_free(w);
  registry *r = NULL;
  ASSERT_INT_EQ(registry_new(&r), 0);
  registry_set_models_dir(r, NULL);
  for (int s = REGISTRY_SOURCE_OLLAMA; s < REGISTRY_SOURCE_COUNT; s++) registry_set_source_dir(r, s, "");
  ASSERT_INT_EQ(registry_add_model(r, gem, "gem"), 0);
  ASSERT_INT_EQ(registry_add_model(r, big, "big"), 0);
  ASSERT_INT_EQ(registry_add_model(r, small, "small"), 0);
  registry_refresh(r);
  manager *mg = NULL;
  manager_params p = {.n_slots = 1, .n_ctx = 64, .n_threads = 1};
  ASSERT_INT_EQ(manager_new(r, &p, &mg), 0);
  manager_model *mm = NULL;
  /* nothing loaded, no default, three models: the smallest that chats */
  ASSERT_INT_EQ(manager_get_chat(mg, &mm), 0);
  EXPECT_STR_EQ(mm->name, "small");
  manager_release(mm);
  /* a loaded chat model comes first: the most recently used one */
  ASSERT_INT_EQ(manager_get(mg, "big", &mm), 0);
  manager_release(mm);
  ASSERT_INT_EQ(manager_get_chat(mg, &mm), 0);
  EXPECT_STR_EQ(mm->name, "big");
  manager_release(mm);
  /* the configured default before everything */
  ASSERT_INT_EQ(registry_set_default(r, "small"), 0);
  ASSERT_INT_EQ(manager_get_chat(mg, &mm), 0);
  EXPECT_STR_EQ(mm->name, "small");
  manager_release(mm);
  manager_free(mg);
  registry_free(r);
  /* only a model the runtime cannot run: nothing to pick, say what to set */
  ASSERT_INT_EQ(registry_new(&r), 0);
  registry_set_models_dir(r, NULL);
  for (int s = REGISTRY_SOURCE_OLLAMA; s < REGISTRY_SOURCE_COUNT; s++) registry_set_source_dir(r, s, "");
  ASSERT_INT_EQ(registry_add_model(r, gem, "gem"), 0);
  ASSERT_INT_EQ(registry_add_model(r, gem, "gem2"), 0);
  registry_refresh(r);
  ASSERT_INT_EQ(manager_new(r, &p, &mg), 0);
  mm = (manager_model *)1;
  EXPECT_INT_EQ(manager_get_chat(mg, &mm), ERR_UNAVAILABLE);
  EXPECT_TRUE(mm == NULL);
  EXPECT_STR_CONTAINS(err_detail(), "--default-model");
  manager_free(mg);
  registry_free(r);
}
