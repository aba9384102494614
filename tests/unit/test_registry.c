/*
 * test_registry.c - the model registry (model/registry.h) against fake
 * stores built here: parley's models dir, an explicit --model file, an
 * Ollama store (real-format manifests, sha256-named blobs), an LM Studio
 * folder and a Hugging Face hub cache (snapshots symlinked into blobs/).
 *
 * Expectations are written by hand (names, sources, labels) or measured
 * independently (sizes with stat()). The fixture ("the world") is the same
 * for most tests; world_build() documents every file in it.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/commands.h"
#include "base/buf.h"
#include "base/err.h"
#include "gguf/gguf.h"
#include "kernels/tensor_type.h"
#include "model/registry.h"
#include "test.h"

/* ---- helpers -------------------------------------------------------------- */

/* root/rel in one of 32 rotating buffers. */
static const char *tp(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *tp(const char *fmt, ...) {
  static char bufs[32][1024];
  static int k;
  char *b = bufs[k++ % 32];
  int n = snprintf(b, sizeof bufs[0], "%s/", test_tmpdir());
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b + n, sizeof bufs[0] - (size_t)n, fmt, ap);
  va_end(ap);
  return b;
}

static int mkdirs(const char *path) {
  char p[1024];
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = '\0';
      if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
      *s = '/';
    }
  return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* mkdirs of the folder holding path. */
static int mkparent(const char *path) {
  char p[1024];
  snprintf(p, sizeof p, "%s", path);
  char *s = strrchr(p, '/');
  if (!s) return 0;
  *s = '\0';
  return mkdirs(p);
}

static int put_text(const char *path, const char *text) {
  if (mkparent(path)) return -1;
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t n = strlen(text);
  int ok = fwrite(text, 1, n, f) == n;
  return fclose(f) == 0 && ok ? 0 : -1;
}

/* A metadata-only GGUF: general.architecture, ARCH.context_length, an
 * optional general.file_type (< 0: none) and one 8x2 F32 tensor. */
static int put_gguf(const char *path, const char *arch, uint32_t ctx, int file_type) {
  if (mkparent(path)) return -1;
  gguf_writer *w = NULL;
  int rc = gguf_writer_new(&w);
  if (rc) return rc;
  char key[128];
  snprintf(key, sizeof key, "%s.context_length", arch);
  float data[16] = {0};
  uint64_t dims[2] = {8, 2};
  rc |= gguf_writer_add_str(w, "general.architecture", arch);
  rc |= gguf_writer_add_u32(w, key, ctx);
  if (file_type >= 0) rc |= gguf_writer_add_u32(w, "general.file_type", (uint32_t)file_type);
  rc |= gguf_writer_add_tensor(w, "token_embd.weight", TENSOR_TYPE_F32, 2, dims, data, sizeof data);
  if (!rc) rc = gguf_writer_write_file(w, path);
  gguf_writer_free(w);
  return rc;
}

static int64_t fsize(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static const char *hex64(char c) {
  static char bufs[8][65];
  static int k;
  char *b = bufs[k++ % 8];
  memset(b, c, 64);
  b[64] = '\0';
  return b;
}

/* A real-format Ollama manifest: config, model layer (digest/size), an
 * optional template layer. */
static int put_manifest(const char *path, char model_hex, int64_t model_size, char template_hex) {
  char text[2048];
  char tmpl_layer[300] = "";
  if (template_hex)
    snprintf(tmpl_layer, sizeof tmpl_layer,
             ",{\"mediaType\":\"application/vnd.ollama.image.template\",\"digest\":\"sha256:%s\",\"size\":1429}",
             hex64(template_hex));
  snprintf(text, sizeof text,
           "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\","
           "\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\",\"digest\":\"sha256:%s\","
           "\"size\":561},\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":"
           "\"sha256:%s\",\"size\":%lld}%s,{\"mediaType\":\"application/vnd.ollama.image.params\",\"digest\":"
           "\"sha256:%s\",\"size\":96}]}",
           hex64('e'), hex64(model_hex), (long long)model_size, tmpl_layer, hex64('f'));
  return put_text(path, text);
}

static void clear_env(void) {
  unsetenv("HF_HUB_CACHE");
  unsetenv("HF_HOME");
  unsetenv("OLLAMA_MODELS");
  unsetenv("PARLEY_LMSTUDIO_MODELS");
  unsetenv("PARLEY_NO_EXTERNAL_MODELS");
  unsetenv("PARLEY_MODELS_DIR");
  unsetenv("PARLEY_DATA_DIR");
  unsetenv("XDG_DATA_HOME");
}

#define WORLD_N 20

/* The fixture. Returns 0 when every file was written.
 *   elsewhere/custom.gguf                       explicit, named "mine"
 *   models/tiny.gguf                            "tiny" (llama, ctx 2048, no file_type -> F32)
 *   models/acme/widget-Q8_0.gguf                "acme/widget-Q8_0" (quant from the name)
 *   models/big-0000{1,2}-of-00002.gguf          "big" (split: one entry, both sizes)
 *   models/broken.gguf                          truncated GGUF -> error
 *   models/garbage.gguf                         not a GGUF -> error
 *   ollama/blobs/sha256-aaaa (qwen3, ctx 4096, Q4_K_M), sha256-bbbb (template),
 *     sha256-cccc (llama), sha256-9999 (llama, the manifest says a larger size)
 *   ollama/manifests/registry.ollama.ai/library/llama3.2/{1b,latest} -> aaaa
 *   ollama/manifests/registry.ollama.ai/acme/tool/v1                 -> cccc
 *   ollama/manifests/hf.co/TheOwner/Tiny-GGUF/Q4_K_M                 -> cccc
 *   ollama/manifests/registry.ollama.ai/library/badjson/latest       not JSON -> error
 *   ollama/manifests/registry.ollama.ai/library/missing/latest       blob 7777 absent -> error
 *   ollama/manifests/registry.ollama.ai/library/short/latest         size mismatch -> error
 *   home/.lmstudio/models/lmstudio-community/Qwen2-GGUF/Qwen2-0.5B-Q4_K_M.gguf + mmproj-Qwen2-f16.gguf
 *   home/.lmstudio/models/publisher2/Multi/Multi-{Q4_K_M,Q8_0}.gguf
 *   hfhome/hub/models--TheOwner--Tiny-GGUF: blobs/<c64>, blobs/<d64>, blobs/<2...>;
 *     snapshots/rev1/tiny-{Q4_K_M,Q8_0}.gguf -> ../../blobs/..., refs/main = rev1,
 *     snapshots/rev0/tiny-Q2_K.gguf (an old revision: not listed)
 *   hfhome/hub/models--solo--One-GGUF/snapshots/r/one.gguf (a plain file, file_type 7 -> Q8_0)
 *   hfhome/hub/models--dang--Ling-GGUF/snapshots/r/ling-Q4_0.gguf -> missing blob -> error
 *   hfhome/hub/datasets--x--y/...  (not a model repo: ignored)
 */
static int world_build(void) {
  clear_env();
  int rc = 0;
  rc |= put_gguf(tp("elsewhere/custom.gguf"), "llama", 1024, 1);
  rc |= put_gguf(tp("models/tiny.gguf"), "llama", 2048, -1);
  rc |= put_gguf(tp("models/acme/widget-Q8_0.gguf"), "llama", 512, -1);
  rc |= put_gguf(tp("models/big-00001-of-00002.gguf"), "llama", 512, 2);
  rc |= put_text(tp("models/big-00002-of-00002.gguf"), "second shard bytes");
  rc |= put_gguf(tp("models/broken.gguf"), "llama", 512, 2);
  if (truncate(tp("models/broken.gguf"), fsize(tp("models/broken.gguf")) / 2)) rc = -1;
  rc |= put_text(tp("models/garbage.gguf"), "this is not a gguf file at all");
  rc |= put_text(tp("models/notes.txt"), "not a model");

  rc |= put_gguf(tp("ollama/blobs/sha256-%s", hex64('a')), "qwen3", 4096, 15);
  rc |= put_text(tp("ollama/blobs/sha256-%s", hex64('b')), "{{ .Prompt }}");
  rc |= put_gguf(tp("ollama/blobs/sha256-%s", hex64('c')), "llama", 8192, 7);
  rc |= put_gguf(tp("ollama/blobs/sha256-%s", hex64('9')), "llama", 8192, 7);
  int64_t sa = fsize(tp("ollama/blobs/sha256-%s", hex64('a')));
  int64_t sc = fsize(tp("ollama/blobs/sha256-%s", hex64('c')));
  const char *lib = "ollama/manifests/registry.ollama.ai/library";
  rc |= put_manifest(tp("%s/llama3.2/1b", lib), 'a', sa, 'b');
  rc |= put_manifest(tp("%s/llama3.2/latest", lib), 'a', sa, 'b');
  rc |= put_manifest(tp("ollama/manifests/registry.ollama.ai/acme/tool/v1"), 'c', sc, 0);
  rc |= put_manifest(tp("ollama/manifests/hf.co/TheOwner/Tiny-GGUF/Q4_K_M"), 'c', sc, 0);
  rc |= put_text(tp("%s/badjson/latest", lib), "{\"layers\": [ oops");
  rc |= put_manifest(tp("%s/missing/latest", lib), '7', 1000, 0);
  rc |= put_manifest(tp("%s/short/latest", lib), '9', sc + 100, 0);
  setenv("OLLAMA_MODELS", tp("ollama"), 1);

  const char *lms = "home/.lmstudio/models";
  rc |= put_gguf(tp("%s/lmstudio-community/Qwen2-GGUF/Qwen2-0.5B-Q4_K_M.gguf", lms), "qwen2", 32768, 15);
  rc |= put_gguf(tp("%s/lmstudio-community/Qwen2-GGUF/mmproj-Qwen2-f16.gguf", lms), "clip", 0, 1);
  rc |= put_gguf(tp("%s/publisher2/Multi/Multi-Q4_K_M.gguf", lms), "llama", 4096, 15);
  rc |= put_gguf(tp("%s/publisher2/Multi/Multi-Q8_0.gguf", lms), "llama", 4096, 7);
  setenv("HOME", tp("home"), 1);

  const char *hub = "hfhome/hub/models--TheOwner--Tiny-GGUF";
  rc |= put_gguf(tp("%s/blobs/%s", hub, hex64('c')), "llama", 2048, 15);
  rc |= put_gguf(tp("%s/blobs/%s", hub, hex64('d')), "llama", 2048, 7);
  rc |= put_gguf(tp("%s/blobs/%s", hub, hex64('2')), "llama", 2048, 10);
  rc |= mkdirs(tp("%s/snapshots/rev1", hub)) | mkdirs(tp("%s/snapshots/rev0", hub));
  char target[200];
  snprintf(target, sizeof target, "../../blobs/%s", hex64('c'));
  rc |= symlink(target, tp("%s/snapshots/rev1/tiny-Q4_K_M.gguf", hub));
  snprintf(target, sizeof target, "../../blobs/%s", hex64('d'));
  rc |= symlink(target, tp("%s/snapshots/rev1/tiny-Q8_0.gguf", hub));
  snprintf(target, sizeof target, "../../blobs/%s", hex64('2'));
  rc |= symlink(target, tp("%s/snapshots/rev0/tiny-Q2_K.gguf", hub));
  rc |= put_text(tp("%s/refs/main", hub), "rev1");
  rc |= put_gguf(tp("hfhome/hub/models--solo--One-GGUF/snapshots/r/one.gguf"), "llama", 1024, 7);
  rc |= mkdirs(tp("hfhome/hub/models--dang--Ling-GGUF/snapshots/r"));
  snprintf(target, sizeof target, "../../blobs/%s", hex64('3'));
  rc |= symlink(target, tp("hfhome/hub/models--dang--Ling-GGUF/snapshots/r/ling-Q4_0.gguf"));
  rc |= put_gguf(tp("hfhome/hub/datasets--x--y/snapshots/r/data-Q4_0.gguf"), "llama", 1, 2);
  setenv("HF_HOME", tp("hfhome"), 1);
  return rc;
}

/* A registry over the world with the explicit model, refreshed. */
static registry *world_registry(void) {
  registry *r = NULL;
  if (registry_new(&r)) return NULL;
  if (registry_set_models_dir(r, tp("models")) || registry_add_model(r, tp("elsewhere/custom.gguf"), "mine") ||
      registry_refresh(r)) {
    registry_free(r);
    return NULL;
  }
  return r;
}

static const char *const WORLD_NAMES[WORLD_N] = {
    "mine",
    "acme/widget-Q8_0", "big", "broken", "garbage", "tiny",
    "acme/tool:v1", "badjson:latest", "hf.co/TheOwner/Tiny-GGUF:Q4_K_M", "llama3.2:1b", "llama3.2:latest",
    "missing:latest", "short:latest",
    "lmstudio-community/Qwen2-GGUF", "publisher2/Multi@Q4_K_M", "publisher2/Multi@Q8_0",
    "hf.co/TheOwner/Tiny-GGUF:Q4_K_M@huggingface", "hf.co/TheOwner/Tiny-GGUF:Q8_0", "hf.co/dang/Ling-GGUF:Q4_0",
    "hf.co/solo/One-GGUF:Q8_0",
};
static const registry_source WORLD_SOURCES[WORLD_N] = {
    REGISTRY_SOURCE_EXPLICIT,
    REGISTRY_SOURCE_MODELS_DIR, REGISTRY_SOURCE_MODELS_DIR, REGISTRY_SOURCE_MODELS_DIR, REGISTRY_SOURCE_MODELS_DIR,
    REGISTRY_SOURCE_MODELS_DIR,
    REGISTRY_SOURCE_OLLAMA, REGISTRY_SOURCE_OLLAMA, REGISTRY_SOURCE_OLLAMA, REGISTRY_SOURCE_OLLAMA,
    REGISTRY_SOURCE_OLLAMA, REGISTRY_SOURCE_OLLAMA, REGISTRY_SOURCE_OLLAMA,
    REGISTRY_SOURCE_LMSTUDIO, REGISTRY_SOURCE_LMSTUDIO, REGISTRY_SOURCE_LMSTUDIO,
    REGISTRY_SOURCE_HF, REGISTRY_SOURCE_HF, REGISTRY_SOURCE_HF, REGISTRY_SOURCE_HF,
};
/* Entries that must carry an error. */
static bool world_broken(const char *name) {
  static const char *const bad[] = {"broken", "garbage", "badjson:latest", "missing:latest", "short:latest",
                                    "hf.co/dang/Ling-GGUF:Q4_0"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (strcmp(name, bad[i]) == 0) return true;
  return false;
}

/* Checks the snapshot holds exactly the world, in order. Returns failures. */
static int check_world(registry *r) {
  int fails = 0;
  registry_snapshot *s = registry_snapshot_acquire(r);
  if (registry_snapshot_count(s) != WORLD_N) {
    fprintf(stderr, "    count %zu, expected %d:\n", registry_snapshot_count(s), WORLD_N);
    for (size_t i = 0; i < registry_snapshot_count(s); i++)
      fprintf(stderr, "      %s (%s) %s\n", registry_snapshot_at(s, i)->name,
              registry_source_name(registry_snapshot_at(s, i)->source),
              registry_snapshot_at(s, i)->error ? registry_snapshot_at(s, i)->error : "");
    fails++;
  }
  for (size_t i = 0; i < WORLD_N && i < registry_snapshot_count(s); i++) {
    const registry_entry *e = registry_snapshot_at(s, i);
    if (strcmp(e->name, WORLD_NAMES[i]) != 0 || e->source != WORLD_SOURCES[i]) {
      fprintf(stderr, "    entry %zu: %s (%s), expected %s (%s)\n", i, e->name, registry_source_name(e->source),
              WORLD_NAMES[i], registry_source_name(WORLD_SOURCES[i]));
      fails++;
    }
    if (world_broken(e->name) != (e->error != NULL) || (e->error && e->executable)) {
      fprintf(stderr, "    entry %s: error '%s'\n", e->name, e->error ? e->error : "(none)");
      fails++;
    }
  }
  registry_snapshot_release(s);
  return fails;
}

/* ---- pure helpers ----------------------------------------------------------- */

TEST(registry_quant_from_filename) {
  static const struct {
    const char *file, *want;
  } cases[] = {
      {"Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M"},
      {"qwen2.5-0.5b-instruct-q8_0.gguf", "Q8_0"},
      {"model.IQ2_XXS.gguf", "IQ2_XXS"},
      {"model.IQ2_XS.gguf", "IQ2_XS"},
      {"gemma-3-4b-it-UD-Q4_K_XL.gguf", "Q4_K_XL"},
      {"mmproj-model-f16.gguf", "F16"},
      {"phi-4-BF16.gguf", "BF16"},
      {"dir/Mistral-7B-v0.3.Q5_K_S.gguf", "Q5_K_S"},
      {"Q4_0-first-then-Q6_K.gguf", "Q6_K"},
      {"model-q4_k_m-00001-of-00003.gguf", "Q4_K_M"},
      {"x-fp16.gguf", "F16"},
      {"model_Q4_0.gguf", "Q4_0"},
      {"m-Q4_0_4_4.gguf", "Q4_0_4_4"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char q[REGISTRY_QUANT_MAX] = "";
    EXPECT_TRUE(registry_quant_from_filename(cases[i].file, q, sizeof q));
    EXPECT_STR_EQ(q, cases[i].want);
  }
  static const char *const none[] = {"phi-3-mini.gguf", "tinyllama.gguf", "XQ4_K_M.gguf", "Q4_K_Mx.gguf",
                                     "model-q9_9.gguf"};
  for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
    char q[REGISTRY_QUANT_MAX] = "";
    EXPECT_FALSE(registry_quant_from_filename(none[i], q, sizeof q));
  }
  EXPECT_STR_EQ(registry_quant_from_file_type(15), "Q4_K_M");
  EXPECT_STR_EQ(registry_quant_from_file_type(1), "F16");
  EXPECT_STR_EQ(registry_quant_from_file_type(7), "Q8_0");
  EXPECT_STR_EQ(registry_quant_from_file_type(32), "BF16");
  EXPECT_TRUE(registry_quant_from_file_type(4) == NULL);
  EXPECT_TRUE(registry_quant_from_file_type(1000) == NULL);
  EXPECT_STR_EQ(registry_source_name(REGISTRY_SOURCE_HF), "huggingface");
  EXPECT_STR_EQ(registry_source_name((registry_source)99), "unknown");
}

TEST(registry_empty_and_config_errors) {
  clear_env();
  setenv("PARLEY_NO_EXTERNAL_MODELS", "1", 1);
  registry *r = NULL;
  ASSERT_INT_EQ(registry_new(&r), 0);
  registry_snapshot *s = registry_snapshot_acquire(r);
  EXPECT_INT_EQ(registry_snapshot_count(s), 0);
  registry_snapshot_release(s);
  registry_entry *e = NULL;
  EXPECT_INT_EQ(registry_lookup(r, "x", &e), ERR_NOT_FOUND);
  EXPECT_INT_EQ(registry_lookup(r, "", &e), ERR_INVALID);
  EXPECT_INT_EQ(registry_lookup_or_default(r, NULL, &e), ERR_NOT_FOUND);
  EXPECT_INT_EQ(registry_add_alias_spec(r, "noequals"), ERR_INVALID);
  EXPECT_INT_EQ(registry_add_alias_spec(r, "=x"), ERR_INVALID);
  EXPECT_INT_EQ(registry_add_alias_spec(r, "a="), ERR_INVALID);
  EXPECT_INT_EQ(registry_add_alias_spec(r, "a=b"), 0);
  EXPECT_INT_EQ(registry_add_alias(r, "A", "c"), ERR_EXISTS);
  EXPECT_INT_EQ(registry_add_model(r, "/x/m.gguf", NULL), 0);
  EXPECT_INT_EQ(registry_add_model(r, "/y/m.gguf", NULL), ERR_EXISTS);
  EXPECT_INT_EQ(registry_add_model(r, "/y/a.gguf", NULL), ERR_EXISTS); /* "a" is an alias */
  EXPECT_INT_EQ(registry_add_model(r, "", NULL), ERR_INVALID);
  EXPECT_INT_EQ(registry_set_source_dir(r, REGISTRY_SOURCE_EXPLICIT, "/x"), ERR_INVALID);
  /* A missing explicit file is listed with an error, never dropped. */
  ASSERT_INT_EQ(registry_refresh(r), 0);
  ASSERT_INT_EQ(registry_lookup(r, "m", &e), 0);
  EXPECT_STR_CONTAINS(e->error, "/x/m.gguf");
  EXPECT_FALSE(e->executable);
  registry_entry_free(e);
  registry_free(r);
}

/* ---- the merged list -------------------------------------------------------- */

TEST(registry_sources_merged) {
  ASSERT_INT_EQ(world_build(), 0);
  registry *r = world_registry();
  ASSERT_TRUE(r != NULL);
  EXPECT_INT_EQ(check_world(r), 0);
  registry_snapshot *s = registry_snapshot_acquire(r);

  const registry_entry *e = registry_snapshot_find(s, "llama3.2:1b");
  ASSERT_TRUE(e != NULL);
  EXPECT_STR_EQ(e->path, tp("ollama/blobs/sha256-%s", hex64('a')));
  EXPECT_INT_EQ(e->size, fsize(tp("ollama/blobs/sha256-%s", hex64('a'))));
  char want[100];
  snprintf(want, sizeof want, "sha256:%s", hex64('a'));
  EXPECT_STR_EQ(e->digest, want);
  EXPECT_STR_EQ(e->quant, "Q4_K_M");
  EXPECT_STR_EQ(e->arch, "qwen3");
  EXPECT_INT_EQ(e->family, FAMILY_QWEN3);
  EXPECT_INT_EQ(e->context_length, 4096);
  EXPECT_TRUE(e->caps & FAMILY_CAP_CHAT);
  EXPECT_STR_EQ(e->template_path, tp("ollama/blobs/sha256-%s", hex64('b')));
  EXPECT_STR_EQ(e->params_path, tp("ollama/blobs/sha256-%s", hex64('f')));
  EXPECT_TRUE(e->projector == NULL);
  EXPECT_TRUE(e->error == NULL);
  struct stat st;
  ASSERT_INT_EQ(stat(e->path, &st), 0);
  EXPECT_INT_EQ(e->mtime, st.st_mtime);

  e = registry_snapshot_find(s, "acme/tool:v1");
  ASSERT_TRUE(e != NULL);
  EXPECT_STR_EQ(e->quant, "Q8_0");
  EXPECT_INT_EQ(e->context_length, 8192);
  EXPECT_TRUE(e->template_path == NULL);

  e = registry_snapshot_find(s, "tiny");
  ASSERT_TRUE(e != NULL);
  EXPECT_STR_EQ(e->quant, "F32"); /* no file_type, no label in the name: the tensor type */
  EXPECT_INT_EQ(e->context_length, 2048);
  EXPECT_STR_EQ(e->arch, "llama");
  EXPECT_TRUE(e->executable);
  EXPECT_INT_EQ(e->size, fsize(tp("models/tiny.gguf")));
  EXPECT_TRUE(strncmp(e->digest, "fnv1a64:", 8) == 0 && strlen(e->digest) == 8 + 16);

  e = registry_snapshot_find(s, "acme/widget-Q8_0");
  ASSERT_TRUE(e != NULL);
  EXPECT_STR_EQ(e->quant, "Q8_0"); /* from the file name */

  e = registry_snapshot_find(s, "big");
  ASSERT_TRUE(e != NULL);
  EXPECT_INT_EQ(e->size, fsize(tp("models/big-00001-of-00002.gguf")) + fsize(tp("models/big-00002-of-00002.gguf")));
  EXPECT_STR_EQ(e->quant, "Q4_0");

  e = registry_snapshot_find(s, "mine");
  ASSERT_TRUE(e != NULL);
  EXPECT_STR_EQ(e->path, tp("elsewhere/custom.gguf"));
  EXPECT_STR_EQ(e->quant, "F16");

  e = registry_snapshot_find(s, "lmstudio-community/Qwen2-GGUF");
  ASSERT_TRUE(e != NULL);
  EXPECT_STR_EQ(e->projector, tp("home/.lmstudio/models/lmstudio-community/Qwen2-GGUF/mmproj-Qwen2-f16.gguf"));
  EXPECT_INT_EQ(e->context_length, 32768);
  EXPECT_INT_EQ(e->family, FAMILY_QWEN2);

  e = registry_snapshot_find(s, "publisher2/Multi@Q8_0");
  ASSERT_TRUE(e != NULL);
  EXPECT_STR_EQ(e->path, tp("home/.lmstudio/models/publisher2/Multi/Multi-Q8_0.gguf"));

  e = registry_snapshot_find(s, "hf.co/solo/One-GGUF:Q8_0");
  ASSERT_TRUE(e != NULL); /* the quant of the name came from general.file_type */
  EXPECT_TRUE(strncmp(e->digest, "fnv1a64:", 8) == 0);

  /* The Ollama copy of an hf.co model keeps the name; the HF cache one is
   * suffixed with its source. */
  e = registry_snapshot_find(s, "hf.co/TheOwner/Tiny-GGUF:Q4_K_M");
  ASSERT_TRUE(e != NULL);
  EXPECT_INT_EQ(e->source, REGISTRY_SOURCE_OLLAMA);
  registry_snapshot_release(s);
  registry_free(r);
}

TEST(registry_hf_symlinks) {
  ASSERT_INT_EQ(world_build(), 0);
  /* HF_HUB_CACHE wins over HF_HOME. */
  ASSERT_INT_EQ(rename(tp("hfhome/hub"), tp("hubcache")), 0);
  setenv("HF_HUB_CACHE", tp("hubcache"), 1);
  registry *r = world_registry();
  ASSERT_TRUE(r != NULL);
  EXPECT_INT_EQ(check_world(r), 0);
  registry_entry *e = NULL;
  ASSERT_INT_EQ(registry_lookup(r, "hf.co/TheOwner/Tiny-GGUF:Q8_0", &e), 0);
  EXPECT_STR_EQ(e->path, tp("hubcache/models--TheOwner--Tiny-GGUF/snapshots/rev1/tiny-Q8_0.gguf"));
  struct stat lst;
  ASSERT_INT_EQ(lstat(e->path, &lst), 0);
  EXPECT_TRUE(S_ISLNK(lst.st_mode));
  EXPECT_INT_EQ(e->size, fsize(tp("hubcache/models--TheOwner--Tiny-GGUF/blobs/%s", hex64('d'))));
  EXPECT_INT_NE(e->size, lst.st_size);
  char want[100];
  snprintf(want, sizeof want, "sha256:%s", hex64('d'));
  EXPECT_STR_EQ(e->digest, want);
  EXPECT_STR_EQ(e->quant, "Q8_0");
  EXPECT_INT_EQ(e->context_length, 2048);
  EXPECT_TRUE(e->error == NULL);
  registry_entry_free(e);
  /* The dangling link is listed with an error. */
  ASSERT_INT_EQ(registry_lookup(r, "hf.co/dang/Ling-GGUF:Q4_0", &e), 0);
  EXPECT_STR_CONTAINS(e->error, "cannot stat");
  registry_entry_free(e);
  /* rev0 is not refs/main: its Q2_K file is not listed. */
  EXPECT_INT_EQ(registry_lookup(r, "hf.co/TheOwner/Tiny-GGUF:Q2_K", &e), ERR_NOT_FOUND);
  /* Without refs/main, the newest snapshot is used. */
  ASSERT_INT_EQ(unlink(tp("hubcache/models--TheOwner--Tiny-GGUF/refs/main")), 0);
  struct timespec old[2] = {{1000000, 0}, {1000000, 0}};
  ASSERT_INT_EQ(utimensat(AT_FDCWD, tp("hubcache/models--TheOwner--Tiny-GGUF/snapshots/rev1"), old, 0), 0);
  ASSERT_INT_EQ(registry_refresh(r), 0);
  EXPECT_INT_EQ(registry_lookup(r, "hf.co/TheOwner/Tiny-GGUF:Q2_K", &e), 0);
  registry_entry_free(e);
  EXPECT_INT_EQ(registry_lookup(r, "hf.co/TheOwner/Tiny-GGUF:Q8_0", &e), ERR_NOT_FOUND);
  registry_free(r);
}

TEST(registry_corrupt_listed) {
  ASSERT_INT_EQ(world_build(), 0);
  registry *r = world_registry();
  ASSERT_TRUE(r != NULL);
  EXPECT_INT_EQ(check_world(r), 0);
  static const struct {
    const char *name, *needle;
  } cases[] = {
      {"broken", "ERR_"},
      {"garbage", "ERR_"},
      {"badjson:latest", "ERR_PARSE"},
      {"missing:latest", "cannot stat"},
      {"short:latest", "the manifest says"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    registry_entry *e = NULL;
    ASSERT_INT_EQ(registry_lookup(r, cases[i].name, &e), 0);
    EXPECT_STR_CONTAINS(e->error, cases[i].needle);
    EXPECT_FALSE(e->executable);
    registry_entry_free(e);
  }
  /* The broken ones disturb nothing: a neighbour in the same folder is fine. */
  registry_entry *e = NULL;
  ASSERT_INT_EQ(registry_lookup(r, "tiny", &e), 0);
  EXPECT_TRUE(e->error == NULL);
  registry_entry_free(e);
  registry_free(r);
}

TEST(registry_lookup_rules) {
  ASSERT_INT_EQ(world_build(), 0);
  registry *r = world_registry();
  ASSERT_TRUE(r != NULL);
  ASSERT_INT_EQ(registry_add_alias(r, "fast", "llama3.2"), 0);
  ASSERT_INT_EQ(registry_add_alias(r, "quick", "FAST"), 0);
  ASSERT_INT_EQ(registry_add_alias_spec(r, "hub=hf.co/TheOwner/Tiny-GGUF:Q8_0"), 0);
  registry_alias *al = NULL;
  size_t n_al = 0;
  ASSERT_INT_EQ(registry_aliases(r, &al, &n_al), 0);
  ASSERT_INT_EQ(n_al, 3);
  EXPECT_STR_EQ(al[1].alias, "quick");
  EXPECT_STR_EQ(al[1].target, "FAST");
  EXPECT_STR_EQ(al[2].target, "hf.co/TheOwner/Tiny-GGUF:Q8_0");
  registry_aliases_free(al, n_al);
  static const struct {
    const char *ask, *want;
  } cases[] = {
      {"llama3.2:1b", "llama3.2:1b"},
      {"LLAMA3.2:1B", "llama3.2:1b"},
      {"llama3.2", "llama3.2:latest"},
      {"Llama3.2", "llama3.2:latest"},
      {"registry.ollama.ai/library/llama3.2:1b", "llama3.2:1b"},
      {"registry.ollama.ai/acme/tool:v1", "acme/tool:v1"},
      {"ACME/Tool:V1", "acme/tool:v1"},
      {"hf.co/TheOwner/Tiny-GGUF:Q8_0", "hf.co/TheOwner/Tiny-GGUF:Q8_0"},
      {"hf.co/theowner/tiny-gguf:q8_0", "hf.co/TheOwner/Tiny-GGUF:Q8_0"},
      {"huggingface.co/TheOwner/Tiny-GGUF:Q8_0", "hf.co/TheOwner/Tiny-GGUF:Q8_0"},
      {"hf.co/solo/One-GGUF", "hf.co/solo/One-GGUF:Q8_0"},
      {"hf.co/TheOwner/Tiny-GGUF", "hf.co/TheOwner/Tiny-GGUF:Q4_K_M"},
      {"hf.co/TheOwner/Tiny-GGUF:Q4_K_M@huggingface", "hf.co/TheOwner/Tiny-GGUF:Q4_K_M@huggingface"},
      {"publisher2/multi@q8_0", "publisher2/Multi@Q8_0"},
      {"lmstudio-community/qwen2-gguf", "lmstudio-community/Qwen2-GGUF"},
      {"mine", "mine"},
      {"fast", "llama3.2:latest"},
      {"Quick", "llama3.2:latest"},
      {"hub", "hf.co/TheOwner/Tiny-GGUF:Q8_0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char name[256] = "";
    int rc = registry_resolve(r, cases[i].ask, name, sizeof name);
    if (rc) fprintf(stderr, "    %s: %s\n", cases[i].ask, err_detail());
    EXPECT_INT_EQ(rc, 0);
    EXPECT_STR_EQ(name, cases[i].want);
  }
  registry_entry *e = NULL;
  EXPECT_INT_EQ(registry_lookup(r, "nope:7b", &e), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "nope:7b");
  EXPECT_TRUE(e == NULL);
  EXPECT_INT_EQ(registry_lookup(r, "hf.co/TheOwner/Other", &e), ERR_NOT_FOUND);
  EXPECT_INT_EQ(registry_lookup(r, "llama3.2:1", &e), ERR_NOT_FOUND);
  EXPECT_INT_EQ(registry_lookup(r, "", &e), ERR_INVALID);

  /* Default model. */
  EXPECT_INT_EQ(registry_lookup_or_default(r, NULL, &e), ERR_NOT_FOUND);
  EXPECT_TRUE(registry_default_name(r) == NULL);
  ASSERT_INT_EQ(registry_set_default(r, "quick"), 0);
  char *dn = registry_default_name(r);
  EXPECT_STR_EQ(dn, "quick");
  free(dn);
  ASSERT_INT_EQ(registry_lookup_or_default(r, NULL, &e), 0);
  EXPECT_STR_EQ(e->name, "llama3.2:latest");
  registry_entry_free(e);
  ASSERT_INT_EQ(registry_lookup_or_default(r, "unknown-model", &e), 0);
  EXPECT_STR_EQ(e->name, "llama3.2:latest");
  registry_entry_free(e);
  ASSERT_INT_EQ(registry_lookup_or_default(r, "tiny", &e), 0);
  EXPECT_STR_EQ(e->name, "tiny");
  registry_entry_free(e);
  ASSERT_INT_EQ(registry_set_default(r, "gone"), 0);
  EXPECT_INT_EQ(registry_lookup_or_default(r, "", &e), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "gone");
  registry_free(r);
}

/* Two sources giving one name: the earlier source keeps it. */
TEST(registry_name_collisions) {
  clear_env();
  setenv("PARLEY_NO_EXTERNAL_MODELS", "1", 1);
  ASSERT_INT_EQ(put_gguf(tp("models/x.gguf"), "llama", 64, 2), 0);
  ASSERT_INT_EQ(put_gguf(tp("other/x.gguf"), "llama", 64, 2), 0);
  ASSERT_INT_EQ(put_gguf(tp("lms/p/m/a-Q4_0.gguf"), "llama", 64, 2), 0);
  ASSERT_INT_EQ(put_gguf(tp("models/p/m.gguf"), "llama", 64, 2), 0);
  registry *r = NULL;
  ASSERT_INT_EQ(registry_new(&r), 0);
  ASSERT_INT_EQ(registry_set_models_dir(r, tp("models")), 0);
  ASSERT_INT_EQ(registry_set_source_dir(r, REGISTRY_SOURCE_LMSTUDIO, tp("lms")), 0);
  ASSERT_INT_EQ(registry_add_model(r, tp("other/x.gguf"), NULL), 0);
  ASSERT_INT_EQ(registry_refresh(r), 0);
  registry_snapshot *s = registry_snapshot_acquire(r);
  ASSERT_INT_EQ(registry_snapshot_count(s), 4);
  EXPECT_STR_EQ(registry_snapshot_at(s, 0)->name, "x");
  EXPECT_STR_EQ(registry_snapshot_at(s, 0)->path, tp("other/x.gguf"));
  EXPECT_STR_EQ(registry_snapshot_at(s, 1)->name, "p/m");
  EXPECT_STR_EQ(registry_snapshot_at(s, 2)->name, "x@parley");
  EXPECT_STR_EQ(registry_snapshot_at(s, 3)->name, "p/m@lmstudio");
  registry_snapshot_release(s);
  registry_free(r);
}

/* ---- refresh, cache, threads -------------------------------------------------- */

TEST(registry_refresh_changes) {
  ASSERT_INT_EQ(world_build(), 0);
  registry *r = world_registry();
  ASSERT_TRUE(r != NULL);
  registry_stats st;
  registry_get_stats(r, &st);
  /* 17 entries stat cleanly; llama3.2:1b and :latest share one blob, and
   * acme/tool:v1 and hf.co/TheOwner/Tiny-GGUF:Q4_K_M another, so 15 headers
   * are read and two come from the cache. */
  EXPECT_INT_EQ(st.n_refresh, 1);
  EXPECT_INT_EQ(st.n_opened, 15);
  EXPECT_INT_EQ(st.n_cached, 2);
  ASSERT_INT_EQ(registry_refresh(r), 0);
  registry_get_stats(r, &st);
  EXPECT_INT_EQ(st.n_opened, 15);
  EXPECT_INT_EQ(st.n_cached, 19);
  EXPECT_INT_EQ(check_world(r), 0);

  /* A snapshot pinned before a refresh does not change. */
  registry_snapshot *pinned = registry_snapshot_acquire(r);

  ASSERT_INT_EQ(put_gguf(tp("models/new-Q4_0.gguf"), "llama", 100, -1), 0);
  ASSERT_INT_EQ(unlink(tp("models/tiny.gguf")), 0);
  /* Rewrite the widget with another context length and a distinct mtime. */
  ASSERT_INT_EQ(put_gguf(tp("models/acme/widget-Q8_0.gguf"), "llama", 777, -1), 0);
  struct timespec t[2] = {{2000000, 0}, {2000000, 0}};
  ASSERT_INT_EQ(utimensat(AT_FDCWD, tp("models/acme/widget-Q8_0.gguf"), t, 0), 0);
  ASSERT_INT_EQ(registry_refresh(r), 0);

  registry_entry *e = NULL;
  ASSERT_INT_EQ(registry_lookup(r, "new-Q4_0", &e), 0);
  EXPECT_STR_EQ(e->quant, "Q4_0");
  registry_entry_free(e);
  EXPECT_INT_EQ(registry_lookup(r, "tiny", &e), ERR_NOT_FOUND);
  ASSERT_INT_EQ(registry_lookup(r, "acme/widget-Q8_0", &e), 0);
  EXPECT_INT_EQ(e->context_length, 777);
  EXPECT_INT_EQ(e->mtime, 2000000);
  registry_entry_free(e);
  registry_get_stats(r, &st);
  EXPECT_INT_EQ(st.n_opened, 17); /* new + widget */

  EXPECT_INT_EQ(registry_snapshot_count(pinned), WORLD_N);
  const registry_entry *pe = registry_snapshot_find(pinned, "tiny");
  EXPECT_TRUE(pe != NULL);
  if (pe) EXPECT_INT_EQ(pe->context_length, 2048);
  registry_snapshot_release(pinned);

  /* Disabling a source drops its entries. */
  ASSERT_INT_EQ(registry_set_source_dir(r, REGISTRY_SOURCE_OLLAMA, ""), 0);
  ASSERT_INT_EQ(registry_refresh(r), 0);
  EXPECT_INT_EQ(registry_lookup(r, "llama3.2:1b", &e), ERR_NOT_FOUND);
  registry_free(r);
}

struct reader_arg {
  registry *r;
  int fails;
};

static void *reader_thread(void *p) {
  struct reader_arg *a = p;
  for (int i = 0; i < 300; i++) {
    registry_entry *e = NULL;
    if (registry_lookup(a->r, i % 2 ? "LLAMA3.2" : "hf.co/solo/One-GGUF", &e) != 0) a->fails++;
    registry_entry_free(e);
    registry_snapshot *s = registry_snapshot_acquire(a->r);
    size_t n = registry_snapshot_count(s);
    for (size_t k = 0; k < n; k++)
      if (!registry_snapshot_at(s, k)->name) a->fails++;
    if (n < WORLD_N) a->fails++;
    registry_snapshot_release(s);
  }
  return NULL;
}

TEST(registry_threads) {
  ASSERT_INT_EQ(world_build(), 0);
  registry *r = world_registry();
  ASSERT_TRUE(r != NULL);
  pthread_t th[3];
  struct reader_arg args[3];
  for (int i = 0; i < 3; i++) {
    args[i] = (struct reader_arg){r, 0};
    ASSERT_INT_EQ(pthread_create(&th[i], NULL, reader_thread, &args[i]), 0);
  }
  for (int i = 0; i < 8; i++) {
    if (i % 2) put_gguf(tp("models/flicker.gguf"), "llama", 64, 2);
    else unlink(tp("models/flicker.gguf"));
    EXPECT_INT_EQ(registry_refresh(r), 0);
  }
  for (int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    EXPECT_INT_EQ(args[i].fails, 0);
  }
  registry_free(r);
}

/* ---- read-only ---------------------------------------------------------------- */

static buf g_tree;

static int tree_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)flag, (void)ftw;
  buf_appendf(&g_tree, "%s %o %lld %lld.%09ld %lld.%09ld\n", path, (unsigned)sb->st_mode, (long long)sb->st_size,
              (long long)sb->st_mtim.tv_sec, sb->st_mtim.tv_nsec, (long long)sb->st_ctim.tv_sec,
              sb->st_ctim.tv_nsec);
  return 0;
}

/* Every path under root with its mode, size, mtime and ctime. */
static char *tree_state(const char *root) {
  buf_free(&g_tree);
  nftw(root, tree_cb, 16, FTW_PHYS);
  return buf_detach(&g_tree, NULL);
}

static int chmod_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)ftw;
  if (flag == FTW_SL) return 0;
  mode_t m = S_ISDIR(sb->st_mode) ? 0555 : 0444;
  return chmod(path, m);
}

static int unchmod_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)ftw;
  if (flag == FTW_SL) return 0;
  return chmod(path, S_ISDIR(sb->st_mode) ? 0755 : 0644);
}

TEST(registry_read_only) {
  ASSERT_INT_EQ(world_build(), 0);
  const char *stores[] = {tp("models"), tp("elsewhere"), tp("ollama"), tp("home"), tp("hfhome")};
  for (size_t i = 0; i < sizeof stores / sizeof *stores; i++) ASSERT_INT_EQ(nftw(stores[i], chmod_cb, 16, FTW_PHYS), 0);
  char *before = tree_state(test_tmpdir());

  /* As root, permission bits do not stop writes: scan as nobody in a child
   * (the tmpdir is opened to others for that). */
  bool as_nobody = geteuid() == 0;
  if (as_nobody) ASSERT_INT_EQ(chmod(test_tmpdir(), 0755), 0);
  char *before2 = tree_state(test_tmpdir());
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    if (as_nobody && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
    if (access(tp("models/tiny.gguf"), R_OK) != 0) _exit(4);
    registry *r = world_registry();
    if (!r) _exit(5);
    int fails = check_world(r);
    registry_entry *e = NULL;
    if (registry_lookup(r, "tiny", &e) || e->error || e->context_length != 2048) fails++;
    registry_entry_free(e);
    if (registry_refresh(r)) fails++;
    registry_free(r);
    _exit(fails ? 1 : 0);
  }
  int status = 0;
  ASSERT_INT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 4) fprintf(stderr, "    note: the tmpdir is not readable by nobody; scanned as root\n");
  else EXPECT_INT_EQ(WEXITSTATUS(status), 0);

  /* And in this process, whoever we are. */
  registry *r = world_registry();
  ASSERT_TRUE(r != NULL);
  EXPECT_INT_EQ(check_world(r), 0);
  registry_free(r);

  char *after = tree_state(test_tmpdir());
  EXPECT_STR_EQ(after, before2);
  (void)before;
  free(before);
  free(before2);
  free(after);
  for (size_t i = 0; i < sizeof stores / sizeof *stores; i++) nftw(stores[i], unchmod_cb, 16, FTW_PHYS);
}

/* ---- parley list ---------------------------------------------------------------- */

static int run_list(char **out, char **err, int argc, const char **argv) {
  return test_capture(cmd_list, argc, argv, out, err);
}

TEST(registry_cmd_list) {
  ASSERT_INT_EQ(world_build(), 0);
  char model_arg[1100];
  snprintf(model_arg, sizeof model_arg, "mine=%s", tp("elsewhere/custom.gguf"));
  const char *models = tp("models");
  const char *argv[] = {"--json", "--models-dir", models, "--model", model_arg, "--alias", "x=tiny",
                        "--default", "tiny"};
  char *out = NULL, *err = NULL;
  EXPECT_INT_EQ(run_list(&out, &err, 9, argv), 0);
  json_error_t je;
  json_t *doc = json_loads(out ? out : "", 0, &je);
  ASSERT_TRUE(doc != NULL);
  json_t *arr = json_object_get(doc, "models");
  EXPECT_INT_EQ(json_array_size(arr), WORLD_N);
  EXPECT_STR_EQ(json_string_value(json_object_get(doc, "default")), "tiny");
  EXPECT_STR_EQ(json_string_value(json_object_get(json_object_get(doc, "aliases"), "x")), "tiny");
  for (size_t i = 0; i < WORLD_N && i < json_array_size(arr); i++)
    EXPECT_STR_EQ(json_string_value(json_object_get(json_array_get(arr, i), "name")), WORLD_NAMES[i]);
  json_t *m = NULL;
  size_t i;
  json_t *it;
  json_array_foreach(arr, i, it) if (strcmp(json_string_value(json_object_get(it, "name")), "llama3.2:1b") == 0) m = it;
  ASSERT_TRUE(m != NULL);
  EXPECT_STR_EQ(json_string_value(json_object_get(m, "source")), "ollama");
  EXPECT_INT_EQ(json_integer_value(json_object_get(m, "size")), fsize(tp("ollama/blobs/sha256-%s", hex64('a'))));
  EXPECT_STR_EQ(json_string_value(json_object_get(m, "quant")), "Q4_K_M");
  EXPECT_STR_EQ(json_string_value(json_object_get(m, "family")), "qwen3");
  EXPECT_INT_EQ(json_integer_value(json_object_get(m, "context_length")), 4096);
  EXPECT_TRUE(json_is_null(json_object_get(m, "error")));
  EXPECT_STR_EQ(json_string_value(json_array_get(json_object_get(m, "capabilities"), 0)), "chat");
  json_decref(doc);
  free(out);
  free(err);

  const char *argv2[] = {"--models-dir", models, "--alias=fast=llama3.2", "--alias", "gone=nothing",
                         "--default=fast"};
  EXPECT_INT_EQ(run_list(&out, &err, 6, argv2), 0);
  EXPECT_STR_CONTAINS(out, "\nalias fast -> llama3.2:latest\n");
  EXPECT_STR_CONTAINS(out, "\nalias gone -> nothing (not found)\n");
  EXPECT_STR_CONTAINS(out, "\ndefault: fast -> llama3.2:latest\n");
  EXPECT_STR_CONTAINS(out, "NAME");
  EXPECT_STR_CONTAINS(out, "llama3.2:1b");
  EXPECT_STR_CONTAINS(out, "publisher2/Multi@Q8_0");
  EXPECT_STR_CONTAINS(out, "\nbroken: ERR_");
  free(out);
  free(err);

  const char *argv3[] = {"--bogus"};
  EXPECT_INT_EQ(run_list(&out, &err, 1, argv3), 2);
  EXPECT_STR_CONTAINS(err, "bogus");
  free(out);
  free(err);
  const char *argv4[] = {"--alias"};
  EXPECT_INT_EQ(run_list(&out, &err, 1, argv4), 2);
  free(out);
  free(err);
}

/* The real converted file in ../shared, read in place. */
TEST(registry_shared_model) {
  char p[1024];
  const char *dir = test_shared_path("models", p, sizeof p);
  if (!dir) TEST_SKIP("../shared/models is absent (set PARLEY_SHARED)");
  char file[1100];
  snprintf(file, sizeof file, "%s/llama-2-tiny-random.gguf", dir);
  if (fsize(file) < 0) TEST_SKIP("../shared/models/llama-2-tiny-random.gguf is absent");
  clear_env();
  setenv("PARLEY_NO_EXTERNAL_MODELS", "1", 1);
  registry *r = NULL;
  ASSERT_INT_EQ(registry_new(&r), 0);
  ASSERT_INT_EQ(registry_set_models_dir(r, dir), 0);
  ASSERT_INT_EQ(registry_refresh(r), 0);
  registry_entry *e = NULL;
  ASSERT_INT_EQ(registry_lookup(r, "LLAMA-2-tiny-random", &e), 0);
  EXPECT_STR_EQ(e->name, "llama-2-tiny-random");
  EXPECT_STR_EQ(e->path, file);
  EXPECT_INT_EQ(e->size, fsize(file));
  EXPECT_STR_EQ(e->arch, "llama");
  EXPECT_TRUE(e->error == NULL);
  EXPECT_TRUE(e->executable);
  EXPECT_INT_GT(e->context_length, 0);
  registry_entry_free(e);
  registry_free(r);
}
