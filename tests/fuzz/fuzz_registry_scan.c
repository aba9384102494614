/*
 * fuzz_registry_scan.c - libFuzzer harness for the model-store scanners
 * (model/registry_scan.c, registry_pulled.c): the files they read were
 * written by other tools or a user, so their contents are outside input.
 * The input holds up to four NUL-separated parts: an Ollama manifest, a
 * Hugging Face refs/main, a model file name, and a parley-pull.json. Each
 * run lays them out in a fresh tree (Ollama's manifests/ and blobs/, an HF
 * hub cache, an LM Studio folder, a models dir with a pulled folder) whose
 * model files are links to one small valid GGUF, and refreshes a registry
 * over it. Properties: the refresh succeeds (a broken item is an entry with
 * an error, never a failed scan), every entry has a unique name, and every
 * path an entry names lies inside the tree (a manifest cannot point out of
 * its store).
 */
#include "fuzz.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/registry.h"
#include "model/testgen.h"

#define BLOB_HEX "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static char g_base[64], g_gguf[128];
static unsigned g_run;

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static void cleanup(void) {
  if (g_base[0]) nftw(g_base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

FUZZ_INIT(registry_scan) {
  snprintf(g_base, sizeof g_base, "/tmp/parley-fuzz-reg-XXXXXX");
  if (!mkdtemp(g_base)) abort();
  atexit(cleanup);
  snprintf(g_gguf, sizeof g_gguf, "%s/model.gguf", g_base);
  model_testgen g = model_testgen_small();
  if (model_testgen_write(&g, g_gguf) != 0) abort();
}

/* snprintf into a PATH_CAP buffer; a path that does not fit is cut, which
 * only makes that file land elsewhere (never a crash). */
#define PATH_CAP 2048
static void pathf(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pathf(char *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, PATH_CAP, fmt, ap);
  va_end(ap);
}

static void mkdirs(const char *path) {
  char p[PATH_CAP];
  pathf(p, "%s", path);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      mkdir(p, 0700);
      *s = '/';
    }
  mkdir(p, 0700);
}

static void write_file(const char *path, const char *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  if (n) fwrite(data, 1, n, f);
  fclose(f);
}

/* A name usable as one path component: not empty, no '/', not . or .. */
static bool component_ok(const char *s, size_t n) {
  if (!n || n > 200 || memchr(s, '/', n)) return false;
  return !(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.');
}

FUZZ_TARGET(registry_scan) {
  if (size > 16384) return 0;
  const char *part[4] = {"", "", "", ""};
  size_t plen[4] = {0, 0, 0, 0};
  const char *p = (const char *)data, *end = p + size;
  for (int i = 0; i < 4 && p <= end; i++) {
    const char *z = memchr(p, 0, (size_t)(end - p));
    part[i] = p;
    plen[i] = z ? (size_t)(z - p) : (size_t)(end - p);
    if (!z) break;
    p = z + 1;
  }
  char root[128], path[PATH_CAP], dir[PATH_CAP];
  snprintf(root, sizeof root, "%s/%u", g_base, g_run++);
  /* Ollama: one manifest and the one blob its seeds name */
  pathf(dir, "%s/ollama/manifests/registry.ollama.ai/library/m", root);
  mkdirs(dir);
  pathf(path, "%s/latest", dir);
  write_file(path, part[0], plen[0]);
  pathf(dir, "%s/ollama/blobs", root);
  mkdirs(dir);
  pathf(path, "%s/sha256-" BLOB_HEX, dir);
  if (link(g_gguf, path) != 0) abort();
  /* the model file name, where a name is a path component */
  char fname[256] = "model.gguf";
  if (component_ok(part[2], plen[2])) snprintf(fname, sizeof fname, "%.*s", (int)plen[2], part[2]);
  /* Hugging Face: refs/main, and the snapshot it names when it is a name */
  pathf(dir, "%s/hf/models--org--repo/refs", root);
  mkdirs(dir);
  pathf(path, "%s/main", dir);
  write_file(path, part[1], plen[1]);
  size_t rl = plen[1];
  while (rl && (part[1][rl - 1] == '\n' || part[1][rl - 1] == ' ')) rl--;
  if (component_ok(part[1], rl) && !memchr(part[1], 0, rl)) {
    pathf(dir, "%s/hf/models--org--repo/snapshots/%.*s", root, (int)rl, part[1]);
    mkdirs(dir);
    pathf(path, "%s/%s", dir, fname);
    link(g_gguf, path);
  }
  /* LM Studio: publisher/repo/<name> */
  pathf(dir, "%s/lms/pub/repo", root);
  mkdirs(dir);
  pathf(path, "%s/%s", dir, fname);
  link(g_gguf, path);
  /* models dir: a plain file and a pulled folder with its manifest */
  pathf(dir, "%s/models/pulled", root);
  mkdirs(dir);
  pathf(path, "%s/models/%s", root, fname);
  link(g_gguf, path);
  pathf(path, "%s/%s", dir, fname);
  link(g_gguf, path);
  pathf(path, "%s/" REGISTRY_PULL_MANIFEST, dir);
  write_file(path, part[3], plen[3]);

  registry *r = NULL;
  if (registry_new(&r) != 0) abort();
  char d[PATH_CAP];
  pathf(d, "%s/models", root);
  registry_set_models_dir(r, d);
  pathf(d, "%s/ollama", root);
  registry_set_source_dir(r, REGISTRY_SOURCE_OLLAMA, d);
  pathf(d, "%s/lms", root);
  registry_set_source_dir(r, REGISTRY_SOURCE_LMSTUDIO, d);
  pathf(d, "%s/hf", root);
  registry_set_source_dir(r, REGISTRY_SOURCE_HF, d);
  if (registry_refresh(r) != 0) abort();
  registry_snapshot *s = registry_snapshot_acquire(r);
  size_t n = registry_snapshot_count(s), rootlen = strlen(root);
  for (size_t i = 0; i < n; i++) {
    const registry_entry *e = registry_snapshot_at(s, i);
    if (!e->name || !*e->name || !e->path) abort();
    for (size_t k = 0; k < i; k++)
      if (strcmp(registry_snapshot_at(s, k)->name, e->name) == 0) abort();
    const char *paths[] = {e->path, e->projector, e->template_path, e->system_path, e->params_path};
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++)
      if (paths[k] && (strncmp(paths[k], root, rootlen) != 0 || strstr(paths[k], "/../"))) abort();
  }
  registry_snapshot_release(s);
  registry_free(r);
  nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}
