/*
 * test_manager.c - the loaded-model manager (src/engine/manager.c) and the
 * generator's --vocab copy (model_testgen.vocab_path): unknown names,
 * non-executable architectures, one load for concurrent first requests, and
 * a generated model that carries a real tokenizer.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
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
  snprintf(path, sizeof path, "%s/mgr-gemma.gguf", test_tmpdir());
  gguf_writer *w = NULL;
  ASSERT_INT_EQ(gguf_writer_new(&w), 0);
  gguf_writer_add_str(w, "general.architecture", "gemma3");
  gguf_writer_add_str(w, "general.name", "Gemma 3 test");
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
  EXPECT_STR_CONTAINS(err_detail(), "gemma3");
  EXPECT_INT_EQ(manager_n_loaded(mg), 0);
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
