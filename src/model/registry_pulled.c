/*
 * registry_pulled.c - models parley pulled itself (model/pull.h): a folder
 * of the models dir with a REGISTRY_PULL_MANIFEST sidecar is one entry,
 * named by the sidecar ("llama3.2:1b", "hf.co/owner/repo:Q4_K_M") rather
 * than by its path, with `pulled` set so that only these can be removed.
 *
 * The sidecar is written before the model file is renamed into place, so a
 * folder whose model file is missing is a pull in progress (or an
 * interrupted one) and is not listed. File names in the sidecar are plain
 * names inside the folder; anything else is an error entry, never a path
 * outside it. A model file whose size differs from the recorded one is
 * listed with an error (a truncated or replaced file).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "model/registry_int.h"

static bool plain(const char *s) {
  return s && *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

int reg_scan_pulled(reg_scan *s, const char *dir) {
  char *mpath = reg_path_join(dir, REGISTRY_PULL_MANIFEST, NULL);
  if (!mpath) return ERR_NOMEM;
  struct stat st;
  int rc = 0;
  if (stat(mpath, &st) != 0 || (uint64_t)st.st_size > REG_MAX_MANIFEST) {
    rc = reg_scan_add_error(s, REGISTRY_SOURCE_MODELS_DIR, mpath, mpath, "ERR_TOO_LARGE: %s is not a small file", mpath);
    free(mpath);
    return rc;
  }
  json_error_t je;
  json_t *m = json_load_file(mpath, JSON_REJECT_DUPLICATES, &je);
  const char *name = json_string_value(json_object_get(m, "name"));
  const char *model = json_string_value(json_object_get(m, "model"));
  if (!m || !json_is_object(m) || !name || !*name || !plain(model)) {
    char why[256];
    if (!m) snprintf(why, sizeof why, "line %d column %d: %s", je.line, je.column, je.text);
    else snprintf(why, sizeof why, "needs a \"name\" and a \"model\" file name in its folder");
    rc = reg_scan_add_error(s, REGISTRY_SOURCE_MODELS_DIR, mpath, name && *name ? name : mpath,
                            "ERR_PARSE: pulled-model manifest %s: %s", mpath, why);
    json_decref(m);
    free(mpath);
    return rc;
  }
  char *path = reg_path_join(dir, model, NULL);
  if (!path) rc = ERR_NOMEM;
  if (!rc && !reg_is_file(path)) { /* a pull in progress */
    free(path);
    json_decref(m);
    free(mpath);
    return 0;
  }
  registry_entry *e = NULL;
  if (!rc) rc = reg_scan_add(s, REGISTRY_SOURCE_MODELS_DIR, path, name, &e);
  if (!rc) {
    e->pulled = true;
    const char *dg = json_string_value(json_object_get(m, "digest"));
    if (dg && strncmp(dg, "sha256:", 7) == 0 && strlen(dg) == 71) snprintf(e->digest, sizeof e->digest, "%s", dg);
    json_t *sz = json_object_get(m, "size");
    if (!e->error && json_is_integer(sz) && json_integer_value(sz) >= 0 && (uint64_t)json_integer_value(sz) != e->size) {
      /* A split model's size counts every shard; compare the first only. */
      struct stat fs;
      if (stat(path, &fs) == 0 && (uint64_t)fs.st_size != (uint64_t)json_integer_value(sz))
        rc = reg_entry_set_error(e, "ERR_CORRUPT: %s has %llu bytes, the pull recorded %lld (truncated or replaced)",
                                 path, (unsigned long long)fs.st_size, (long long)json_integer_value(sz));
    }
    struct {
      const char *key;
      char **dst;
    } extra[] = {{"projector", &e->projector},
                 {"template", &e->template_path},
                 {"system", &e->system_path},
                 {"params", &e->params_path}};
    for (size_t k = 0; k < sizeof extra / sizeof *extra && !rc; k++) {
      const char *f = json_string_value(json_object_get(m, extra[k].key));
      if (!plain(f)) continue;
      char *p = reg_path_join(dir, f, NULL);
      if (!p) rc = ERR_NOMEM;
      else if (!reg_is_file(p)) free(p);
      else {
        free(*extra[k].dst);
        *extra[k].dst = p;
      }
    }
  }
  free(path);
  json_decref(m);
  free(mpath);
  return rc;
}
