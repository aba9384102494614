/*
 * registry_scan.c - the registry's source scanners: parley's models
 * directory, Ollama's manifest store, LM Studio's model folder and the
 * Hugging Face hub cache. Each walks its folder, decides the names (rules in
 * registry.h and docs/models.md) and hands every model file to
 * reg_scan_add(), which reads the header.
 *
 * Why here and not in api/: these are on-disk layouts of other tools, not
 * wire formats. An Ollama manifest is a small JSON file, read with jansson
 * like any other file format; no HTTP is involved.
 *
 * Invariants: nothing is written, created, renamed or deleted anywhere under
 * a scanned folder; files are opened O_RDONLY (GGUF headers via gguf_open,
 * manifests and refs with fopen "r"). Every path built from file contents
 * (an Ollama blob digest, an HF ref) is checked to be a plain name first
 * (hex digits / no '/' and no "..") so a manifest cannot point outside the
 * store. A broken source item becomes an entry with an error, never a
 * failed scan; only ERR_NOMEM stops a scan.
 */
#include <ctype.h>
#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"
#include "model/registry_int.h"

/* ---- file helpers -------------------------------------------------------- */

bool reg_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool reg_is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *reg_path_join(const char *a, const char *b, const char *c) {
  buf out = BUF_INIT;
  int rc = c ? buf_appendf(&out, "%s/%s/%s", a, b, c) : buf_appendf(&out, "%s/%s", a, b);
  if (rc) {
    buf_free(&out);
    return NULL;
  }
  return buf_detach(&out, NULL);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void reg_names_free(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

int reg_list_dir(const char *dir, char ***out, size_t *n) {
  *out = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return 0;
  char **v = NULL;
  size_t cnt = 0, cap = 0;
  struct dirent *de;
  int rc = 0;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    if (cnt == cap) {
      size_t nc = cap ? cap * 2 : 16;
      char **nv = realloc(v, nc * sizeof *nv);
      if (!nv) {
        rc = ERR_NOMEM;
        break;
      }
      v = nv;
      cap = nc;
    }
    if (!(v[cnt] = strdup(de->d_name))) {
      rc = ERR_NOMEM;
      break;
    }
    cnt++;
  }
  closedir(d);
  if (rc) {
    reg_names_free(v, cnt);
    return rc;
  }
  if (cnt) qsort(v, cnt, sizeof *v, cmp_str);
  *out = v;
  *n = cnt;
  return 0;
}

bool reg_is_gguf(const char *filename) {
  size_t n = strlen(filename);
  return n > 5 && strcasecmp(filename + n - 5, ".gguf") == 0;
}

bool reg_is_projector(const char *filename) { return strcasestr(filename, "mmproj") != NULL; }

bool reg_split_parse(const char *filename, unsigned *index, unsigned *count, size_t *stem_len) {
  /* "<stem>-NNNNN-of-NNNNN.gguf": 5 + 4 + 5 + 5 = 19 characters after the stem. */
  size_t n = strlen(filename);
  if (n < 20 || !reg_is_gguf(filename)) return false;
  const char *p = filename + n - 20;
  if (p[0] != '-' || strncmp(p + 6, "-of-", 4) != 0) return false;
  unsigned a = 0, b = 0;
  for (int i = 1; i <= 5; i++) {
    if (!isdigit((unsigned char)p[i]) || !isdigit((unsigned char)p[i + 9])) return false;
    a = a * 10 + (unsigned)(p[i] - '0');
    b = b * 10 + (unsigned)(p[i + 9] - '0');
  }
  if (a == 0 || b == 0 || a > b) return false;
  *index = a;
  *count = b;
  *stem_len = (size_t)(p - filename);
  return true;
}

/* The model files of one folder: GGUF files that are neither projectors nor
 * shards after the first, sorted; and the first projector (or NULL). */
typedef struct reg_folder {
  char **names;   /* all entries of the folder */
  size_t n_names;
  size_t *models; /* indexes into names */
  size_t n_models;
  const char *projector;
} reg_folder;

static void folder_free(reg_folder *f) {
  reg_names_free(f->names, f->n_names);
  free(f->models);
  memset(f, 0, sizeof *f);
}

static int folder_read(const char *dir, reg_folder *f) {
  memset(f, 0, sizeof *f);
  int rc = reg_list_dir(dir, &f->names, &f->n_names);
  if (rc || !f->n_names) return rc;
  if (!(f->models = malloc(f->n_names * sizeof *f->models))) {
    folder_free(f);
    return ERR_NOMEM;
  }
  for (size_t i = 0; i < f->n_names; i++) {
    const char *nm = f->names[i];
    if (!reg_is_gguf(nm)) continue;
    char *full = reg_path_join(dir, nm, NULL);
    if (!full) {
      folder_free(f);
      return ERR_NOMEM;
    }
    bool file = reg_is_file(full) || !reg_is_dir(full); /* a dangling link is listed with an error */
    free(full);
    if (!file) continue;
    if (reg_is_projector(nm)) {
      if (!f->projector) f->projector = nm;
      continue;
    }
    unsigned idx, cnt;
    size_t sl;
    if (reg_split_parse(nm, &idx, &cnt, &sl) && idx != 1) continue;
    f->models[f->n_models++] = i;
  }
  return 0;
}

/* The display stem of a model file: without ".gguf" and a split suffix. */
static size_t model_stem_len(const char *nm) {
  unsigned idx, cnt;
  size_t sl;
  if (reg_split_parse(nm, &idx, &cnt, &sl)) return sl;
  return strlen(nm) - 5;
}

static int attach_projector(registry_entry *e, const char *dir, const char *projector) {
  if (!projector) return 0;
  return (e->projector = reg_path_join(dir, projector, NULL)) ? 0 : ERR_NOMEM;
}

/* ---- parley's models directory ------------------------------------------ */

/* rel is the folder's path under the root ("" at the root). */
static int scan_tree(reg_scan *s, const char *dir, const char *rel, int depth) {
  if (depth > 0) { /* a model parley pulled: one entry, named by its manifest */
    char *mf = reg_path_join(dir, REGISTRY_PULL_MANIFEST, NULL);
    if (!mf) return ERR_NOMEM;
    bool pulled = reg_is_file(mf);
    free(mf);
    if (pulled) return reg_scan_pulled(s, dir);
  }
  reg_folder f;
  int rc = folder_read(dir, &f);
  if (rc) return rc;
  for (size_t k = 0; k < f.n_models && !rc; k++) {
    const char *nm = f.names[f.models[k]];
    buf name = BUF_INIT;
    char *path = reg_path_join(dir, nm, NULL);
    registry_entry *e;
    if (!path || buf_appendf(&name, "%s%s%.*s", rel, *rel ? "/" : "", (int)model_stem_len(nm), nm)) rc = ERR_NOMEM;
    if (!rc) rc = reg_scan_add(s, REGISTRY_SOURCE_MODELS_DIR, path, name.data, &e);
    if (!rc) rc = attach_projector(e, dir, f.projector);
    free(path);
    buf_free(&name);
  }
  for (size_t i = 0; i < f.n_names && !rc && depth < REG_MAX_DEPTH; i++) {
    char *sub = reg_path_join(dir, f.names[i], NULL);
    if (!sub) {
      rc = ERR_NOMEM;
      break;
    }
    if (reg_is_dir(sub)) {
      buf r2 = BUF_INIT;
      if (buf_appendf(&r2, "%s%s%s", rel, *rel ? "/" : "", f.names[i])) rc = ERR_NOMEM;
      else rc = scan_tree(s, sub, r2.data, depth + 1);
      buf_free(&r2);
    }
    free(sub);
  }
  folder_free(&f);
  return rc;
}

int reg_scan_models_dir(reg_scan *s, const char *dir) { return scan_tree(s, dir, "", 0); }

/* ---- LM Studio ------------------------------------------------------------ */

/* <root>/<publisher>/<model>/NAME.gguf -> "publisher/model", or
 * "publisher/model@QUANT" when the folder has several model files. */
int reg_scan_lmstudio(reg_scan *s, const char *root) {
  char **pubs = NULL;
  size_t n_pubs = 0;
  int rc = reg_list_dir(root, &pubs, &n_pubs);
  for (size_t p = 0; p < n_pubs && !rc; p++) {
    char *pdir = reg_path_join(root, pubs[p], NULL);
    char **mods = NULL;
    size_t n_mods = 0;
    if (!pdir) rc = ERR_NOMEM;
    else if (reg_is_dir(pdir)) rc = reg_list_dir(pdir, &mods, &n_mods);
    for (size_t m = 0; m < n_mods && !rc; m++) {
      char *mdir = reg_path_join(pdir, mods[m], NULL);
      if (!mdir) {
        rc = ERR_NOMEM;
        break;
      }
      reg_folder f;
      if (!reg_is_dir(mdir) || (rc = folder_read(mdir, &f))) {
        free(mdir);
        continue;
      }
      for (size_t k = 0; k < f.n_models && !rc; k++) {
        const char *nm = f.names[f.models[k]];
        char *path = reg_path_join(mdir, nm, NULL);
        registry_entry *e = NULL;
        if (!path) rc = ERR_NOMEM;
        if (!rc) rc = reg_scan_add(s, REGISTRY_SOURCE_LMSTUDIO, path, NULL, &e);
        free(path);
        if (rc) break;
        buf name = BUF_INIT;
        char q[REGISTRY_QUANT_MAX];
        if (f.n_models == 1) rc = buf_appendf(&name, "%s/%s", pubs[p], mods[m]);
        else if (registry_quant_from_filename(nm, q, sizeof q))
          rc = buf_appendf(&name, "%s/%s@%s", pubs[p], mods[m], q);
        else rc = buf_appendf(&name, "%s/%s@%.*s", pubs[p], mods[m], (int)model_stem_len(nm), nm);
        if (!rc) e->name = buf_detach(&name, NULL);
        buf_free(&name);
        if (!rc) rc = attach_projector(e, mdir, f.projector);
      }
      folder_free(&f);
      free(mdir);
    }
    reg_names_free(mods, n_mods);
    free(pdir);
  }
  reg_names_free(pubs, n_pubs);
  return rc;
}

/* ---- Hugging Face hub cache ------------------------------------------------ */

static bool is_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isxdigit((unsigned char)s[i])) return false;
  return s[n] == '\0';
}

/* A path segment from file contents: non-empty, no '/', not "." or "..". */
static bool plain_name(const char *s) {
  return *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* Reads a small text file (at most cap-1 bytes) with trailing space cut. */
static bool read_small(const char *path, char *out, size_t cap) {
  FILE *fp = fopen(path, "r");
  if (!fp) return false;
  size_t n = fread(out, 1, cap - 1, fp);
  fclose(fp);
  out[n] = '\0';
  while (n && isspace((unsigned char)out[n - 1])) out[--n] = '\0';
  return n > 0;
}

/* The snapshot folder to list: refs/main when it names an existing one,
 * else the most recently modified snapshot. malloc'd; NULL when none. */
static char *hf_snapshot(const char *repo_dir, int *rc) {
  char ref[128];
  char *p = reg_path_join(repo_dir, "refs", "main");
  if (!p) {
    *rc = ERR_NOMEM;
    return NULL;
  }
  bool have_ref = read_small(p, ref, sizeof ref) && plain_name(ref);
  free(p);
  char *snaps = reg_path_join(repo_dir, "snapshots", NULL);
  if (!snaps) {
    *rc = ERR_NOMEM;
    return NULL;
  }
  if (have_ref) {
    char *d = reg_path_join(snaps, ref, NULL);
    if (d && reg_is_dir(d)) {
      free(snaps);
      return d;
    }
    free(d);
  }
  char **revs = NULL;
  size_t n_revs = 0;
  char *best = NULL;
  int64_t best_t = INT64_MIN;
  if ((*rc = reg_list_dir(snaps, &revs, &n_revs)) == 0) {
    for (size_t i = 0; i < n_revs; i++) {
      char *d = reg_path_join(snaps, revs[i], NULL);
      struct stat st;
      if (!d) {
        *rc = ERR_NOMEM;
        break;
      }
      if (stat(d, &st) == 0 && S_ISDIR(st.st_mode) && (int64_t)st.st_mtime > best_t) {
        free(best);
        best = d;
        best_t = (int64_t)st.st_mtime;
      } else {
        free(d);
      }
    }
  }
  reg_names_free(revs, n_revs);
  free(snaps);
  return best;
}

/* "sha256:<hex>" when path is a symlink into blobs/<64 hex> (the hub names
 * LFS blobs by the sha256 of their content). */
static void hf_digest(const char *path, registry_entry *e) {
  char target[PATH_MAX];
  ssize_t n = readlink(path, target, sizeof target - 1);
  if (n <= 0) return;
  target[n] = '\0';
  const char *b = strrchr(target, '/');
  b = b ? b + 1 : target;
  if (strlen(b) == 64 && is_hex(b, 64)) {
    /* "sha256:" + exactly 64 hex digits; copied by length so the compiler
     * can see it fits. */
    _Static_assert(REGISTRY_DIGEST_MAX >= 72, "digest holds sha256:<64 hex>");
    memcpy(e->digest, "sha256:", 7);
    memcpy(e->digest + 7, b, 64);
    e->digest[71] = '\0';
  }
}

static int hf_folder(reg_scan *s, const char *dir, const char *repo_name, const char *repo_projector_dir,
                     const char **projector, int depth) {
  reg_folder f;
  int rc = folder_read(dir, &f);
  if (rc) return rc;
  const char *proj = f.projector ? f.projector : *projector;
  const char *proj_dir = f.projector ? dir : repo_projector_dir;
  for (size_t k = 0; k < f.n_models && !rc; k++) {
    const char *nm = f.names[f.models[k]];
    char *path = reg_path_join(dir, nm, NULL);
    registry_entry *e = NULL;
    if (!path) rc = ERR_NOMEM;
    if (!rc) rc = reg_scan_add(s, REGISTRY_SOURCE_HF, path, NULL, &e);
    if (!rc) hf_digest(path, e);
    free(path);
    if (rc) break;
    char q[REGISTRY_QUANT_MAX];
    buf name = BUF_INIT;
    if (registry_quant_from_filename(nm, q, sizeof q)) rc = buf_appendf(&name, "%s:%s", repo_name, q);
    else if (e->quant[0]) rc = buf_appendf(&name, "%s:%s", repo_name, e->quant);
    else rc = buf_appendf(&name, "%s:%.*s", repo_name, (int)model_stem_len(nm), nm);
    if (!rc) e->name = buf_detach(&name, NULL);
    buf_free(&name);
    if (!rc && proj) rc = attach_projector(e, proj_dir, proj);
  }
  for (size_t i = 0; i < f.n_names && !rc && depth < 2; i++) {
    char *sub = reg_path_join(dir, f.names[i], NULL);
    if (!sub) rc = ERR_NOMEM;
    else if (reg_is_dir(sub)) rc = hf_folder(s, sub, repo_name, proj_dir, &proj, depth + 1);
    free(sub);
  }
  folder_free(&f);
  return rc;
}

int reg_scan_hf(reg_scan *s, const char *root) {
  char **repos = NULL;
  size_t n_repos = 0;
  int rc = reg_list_dir(root, &repos, &n_repos);
  for (size_t i = 0; i < n_repos && !rc; i++) {
    const char *d = repos[i];
    if (strncmp(d, "models--", 8) != 0) continue; /* datasets--, spaces-- */
    const char *owner = d + 8, *sep = strstr(owner, "--");
    if (!sep || sep == owner || !sep[2]) continue;
    buf name = BUF_INIT;
    if (buf_appendf(&name, "hf.co/%.*s/%s", (int)(sep - owner), owner, sep + 2)) {
      rc = ERR_NOMEM;
      break;
    }
    char *repo_dir = reg_path_join(root, d, NULL);
    char *snap = repo_dir ? hf_snapshot(repo_dir, &rc) : NULL;
    if (!repo_dir) rc = ERR_NOMEM;
    const char *proj = NULL;
    if (snap && !rc) rc = hf_folder(s, snap, name.data, snap, &proj, 0);
    free(snap);
    free(repo_dir);
    buf_free(&name);
  }
  reg_names_free(repos, n_repos);
  return rc;
}

/* ---- Ollama ---------------------------------------------------------------- */

#define OLLAMA_MT_PREFIX "application/vnd.ollama.image."

/* blobs/sha256-<hex> for a layer digest "sha256:<64 hex>"; NULL when the
 * digest has another form (*bad set) or out of memory. */
static char *ollama_blob(const char *root, const char *digest, bool *bad) {
  *bad = false;
  if (!digest || strncmp(digest, "sha256:", 7) != 0 || strlen(digest) != 71 || !is_hex(digest + 7, 64)) {
    *bad = true;
    return NULL;
  }
  buf b = BUF_INIT;
  if (buf_appendf(&b, "%s/blobs/sha256-%s", root, digest + 7)) {
    buf_free(&b);
    return NULL;
  }
  return buf_detach(&b, NULL);
}

/* Parses one manifest and adds its model. */
static int ollama_manifest(reg_scan *s, const char *root, const char *mpath, const char *name) {
  struct stat st;
  if (stat(mpath, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  if ((uint64_t)st.st_size > REG_MAX_MANIFEST)
    return reg_scan_add_error(s, REGISTRY_SOURCE_OLLAMA, mpath, name, "ERR_TOO_LARGE: manifest %s has %lld bytes",
                              mpath, (long long)st.st_size);
  json_error_t jerr;
  json_t *m = json_load_file(mpath, JSON_REJECT_DUPLICATES, &jerr);
  if (!m)
    return reg_scan_add_error(s, REGISTRY_SOURCE_OLLAMA, mpath, name, "ERR_PARSE: manifest %s line %d column %d: %s",
                              mpath, jerr.line, jerr.column, jerr.text);
  json_t *layers = json_object_get(m, "layers");
  int rc = 0;
  if (!json_is_array(layers)) {
    rc = reg_scan_add_error(s, REGISTRY_SOURCE_OLLAMA, mpath, name, "ERR_PARSE: manifest %s: no \"layers\" array",
                            mpath);
    json_decref(m);
    return rc;
  }
  const char *model_digest = NULL, *proj_digest = NULL, *tmpl_digest = NULL, *sys_digest = NULL,
             *params_digest = NULL;
  json_int_t model_size = -1;
  size_t i;
  json_t *layer;
  json_array_foreach(layers, i, layer) {
    const char *mt = json_string_value(json_object_get(layer, "mediaType"));
    const char *dg = json_string_value(json_object_get(layer, "digest"));
    if (!mt || !dg || strncmp(mt, OLLAMA_MT_PREFIX, strlen(OLLAMA_MT_PREFIX)) != 0) continue;
    const char *kind = mt + strlen(OLLAMA_MT_PREFIX);
    if (strcmp(kind, "model") == 0 && !model_digest) {
      model_digest = dg;
      json_t *sz = json_object_get(layer, "size");
      if (json_is_integer(sz)) model_size = json_integer_value(sz);
    } else if (strcmp(kind, "projector") == 0 && !proj_digest) {
      proj_digest = dg;
    } else if (strcmp(kind, "template") == 0) {
      tmpl_digest = dg;
    } else if (strcmp(kind, "system") == 0) {
      sys_digest = dg;
    } else if (strcmp(kind, "params") == 0) {
      params_digest = dg;
    }
  }
  if (!model_digest) {
    rc = reg_scan_add_error(s, REGISTRY_SOURCE_OLLAMA, mpath, name,
                            "ERR_PARSE: manifest %s: no layer of type " OLLAMA_MT_PREFIX "model", mpath);
    json_decref(m);
    return rc;
  }
  bool bad;
  char *blob = ollama_blob(root, model_digest, &bad);
  if (!blob) {
    rc = bad ? reg_scan_add_error(s, REGISTRY_SOURCE_OLLAMA, mpath, name,
                                  "ERR_PARSE: manifest %s: model digest '%.80s' is not sha256:<64 hex>", mpath,
                                  model_digest)
             : ERR_NOMEM;
    json_decref(m);
    return rc;
  }
  registry_entry *e = NULL;
  rc = reg_scan_add(s, REGISTRY_SOURCE_OLLAMA, blob, name, &e);
  if (!rc) {
    snprintf(e->digest, sizeof e->digest, "%s", model_digest);
    if (!e->error && model_size >= 0 && (uint64_t)model_size != e->size)
      rc = reg_entry_set_error(e, "ERR_CORRUPT: blob %s has %llu bytes, the manifest says %lld (incomplete download?)",
                               blob, (unsigned long long)e->size, (long long)model_size);
  }
  free(blob);
  struct {
    const char *digest;
    char **dst;
  } extra[] = {{proj_digest, rc ? NULL : &e->projector},
               {tmpl_digest, rc ? NULL : &e->template_path},
               {sys_digest, rc ? NULL : &e->system_path},
               {params_digest, rc ? NULL : &e->params_path}};
  for (size_t k = 0; k < ARRAY_LEN(extra) && !rc; k++) {
    if (!extra[k].digest) continue;
    char *p = ollama_blob(root, extra[k].digest, &bad);
    if (!p && !bad) rc = ERR_NOMEM;
    *extra[k].dst = p;
  }
  json_decref(m);
  return rc;
}

/* manifests/<host>/<namespace>/<model>/<tag>. */
int reg_scan_ollama(reg_scan *s, const char *root) {
  char *mroot = reg_path_join(root, "manifests", NULL);
  if (!mroot) return ERR_NOMEM;
  char **hosts = NULL;
  size_t n_hosts = 0;
  int rc = reg_list_dir(mroot, &hosts, &n_hosts);
  for (size_t h = 0; h < n_hosts && !rc; h++) {
    char *hdir = reg_path_join(mroot, hosts[h], NULL);
    char **nss = NULL;
    size_t n_ns = 0;
    if (!hdir) rc = ERR_NOMEM;
    else rc = reg_list_dir(hdir, &nss, &n_ns);
    for (size_t ns = 0; ns < n_ns && !rc; ns++) {
      char *nsdir = reg_path_join(hdir, nss[ns], NULL);
      char **models = NULL;
      size_t n_models = 0;
      if (!nsdir) rc = ERR_NOMEM;
      else rc = reg_list_dir(nsdir, &models, &n_models);
      for (size_t mi = 0; mi < n_models && !rc; mi++) {
        char *mdir = reg_path_join(nsdir, models[mi], NULL);
        char **tags = NULL;
        size_t n_tags = 0;
        if (!mdir) rc = ERR_NOMEM;
        else rc = reg_list_dir(mdir, &tags, &n_tags);
        for (size_t t = 0; t < n_tags && !rc; t++) {
          buf name = BUF_INIT;
          bool official = strcmp(hosts[h], "registry.ollama.ai") == 0;
          if (official && strcmp(nss[ns], "library") == 0) rc = buf_appendf(&name, "%s:%s", models[mi], tags[t]);
          else if (official) rc = buf_appendf(&name, "%s/%s:%s", nss[ns], models[mi], tags[t]);
          else rc = buf_appendf(&name, "%s/%s/%s:%s", hosts[h], nss[ns], models[mi], tags[t]);
          char *mpath = rc ? NULL : reg_path_join(mdir, tags[t], NULL);
          if (!rc && !mpath) rc = ERR_NOMEM;
          if (!rc) rc = ollama_manifest(s, root, mpath, name.data);
          free(mpath);
          buf_free(&name);
        }
        reg_names_free(tags, n_tags);
        free(mdir);
      }
      reg_names_free(models, n_models);
      free(nsdir);
    }
    reg_names_free(nss, n_ns);
    free(hdir);
  }
  reg_names_free(hosts, n_hosts);
  free(mroot);
  return rc;
}
