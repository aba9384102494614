/*
 * pull_source.c - what to download for a name, per source, and the sidecar
 * manifest that makes a pulled folder one registry entry.
 *
 * Hugging Face: GET {HF}/api/models/{owner}/{repo}/tree/main?recursive=true
 * lists the repository's files (path, size, lfs.oid = sha256 of LFS files);
 * pull_hf_select() chooses the model file(s) and a projector; each is
 * fetched from {HF}/{owner}/{repo}/resolve/main/{path} (the hub redirects to
 * its CDN; curl follows). When the tree endpoint answers 404 (a mirror
 * without it), GET {HF}/api/models/{owner}/{repo}?blobs=true gives the same
 * as {"siblings":[{rfilename, size, lfs:{sha256,size}}]}.
 *
 * Ollama: GET {registry}/v2/{namespace}/{model}/manifests/{tag} (Accept: the
 * Docker v2 manifest type) gives the layers; each layer is
 * {registry}/v2/{namespace}/{model}/blobs/{digest}, verified against its
 * sha256 digest. The model, projector, template, system and params layers
 * are kept, as model.gguf, projector.gguf, template, system, params.json.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"
#include "model/pull_int.h"

void pull_plan_free(pull_plan *pl) {
  if (!pl) return;
  for (size_t i = 0; i < pl->n_files; i++) {
    free(pl->files[i].url);
    free(pl->files[i].dest);
    free(pl->files[i].digest);
  }
  free(pl->origin);
  memset(pl, 0, sizeof *pl);
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* Appends path to b with every segment percent-encoded. */
static int append_escaped_path(buf *b, const char *path) {
  const char *seg = path;
  while (seg) {
    const char *sl = strchr(seg, '/');
    size_t n = sl ? (size_t)(sl - seg) : strlen(seg);
    char *e = curl_easy_escape(NULL, seg, (int)n);
    if (!e) return ERR_NOMEM;
    int rc = buf_appendf(b, "%s%s", e, sl ? "/" : "");
    curl_free(e);
    if (rc) return rc;
    seg = sl ? sl + 1 : NULL;
  }
  return 0;
}

static int add_file(pull_plan *pl, char *url, const char *dest, const char *digest, int64_t size,
                    pull_layer_kind kind) {
  if (pl->n_files >= PULL_MAX_FILES) {
    free(url);
    return err_set(ERR_TOO_LARGE, "%s: more than %d files to download", pl->name, PULL_MAX_FILES);
  }
  pull_pfile *f = &pl->files[pl->n_files];
  f->url = url;
  f->dest = str_dup(dest);
  f->digest = digest ? str_dup(digest) : NULL;
  f->size = size;
  f->kind = kind;
  pl->n_files++;
  if (!f->url || !f->dest || (digest && !f->digest)) return ERR_NOMEM;
  return 0;
}

/* ---- Hugging Face ------------------------------------------------------------ */

/* One listed file: path, size (-1), sha256 hex of its LFS object (or NULL). */
typedef struct hf_item {
  const char *path;
  int64_t size;
  const char *sha;
} hf_item;

static bool hex64(const char *s) {
  if (!s || strlen(s) != 64) return false;
  for (int i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

static int hf_items(json_t *doc, hf_item **out, size_t *n) {
  json_t *arr = json_is_array(doc) ? doc : json_object_get(doc, "siblings");
  if (!json_is_array(arr))
    return err_set(ERR_PARSE, "repository listing: expected an array of files (or an object with \"siblings\")");
  hf_item *v = calloc(json_array_size(arr) + 1, sizeof *v);
  if (!v) return ERR_NOMEM;
  size_t k = 0, i;
  json_t *it;
  json_array_foreach(arr, i, it) {
    const char *type = json_string_value(json_object_get(it, "type"));
    if (type && strcmp(type, "file") != 0) continue;
    const char *path = json_string_value(json_object_get(it, "path"));
    if (!path) path = json_string_value(json_object_get(it, "rfilename"));
    if (!path) continue;
    json_t *lfs = json_object_get(it, "lfs");
    json_t *sz = json_object_get(it, "size");
    if (!json_is_integer(sz) && json_is_object(lfs)) sz = json_object_get(lfs, "size");
    const char *sha = json_is_object(lfs) ? json_string_value(json_object_get(lfs, "oid")) : NULL;
    if (!sha && json_is_object(lfs)) sha = json_string_value(json_object_get(lfs, "sha256"));
    if (sha && strncmp(sha, "sha256:", 7) == 0) sha += 7;
    v[k].path = path;
    v[k].size = json_is_integer(sz) && json_integer_value(sz) >= 0 ? (int64_t)json_integer_value(sz) : -1;
    v[k].sha = hex64(sha) ? sha : NULL;
    k++;
  }
  *out = v;
  *n = k;
  return 0;
}

static int plan_hf(const pull_endpoints *ep, const pull_ref *ref, const char *quant, const char *file,
                   pull_plan *pl) {
  const char *q = quant && *quant ? quant : ref->tag[0] ? ref->tag : NULL;
  const char *pat = file && *file ? file : ref->file[0] ? ref->file : NULL;
  buf url = BUF_INIT;
  if (buf_appendf(&url, "%s/api/models/%s/%s/tree/main?recursive=true", ep->hf, ref->ns, ref->repo)) return ERR_NOMEM;
  char *doc = NULL;
  size_t len = 0;
  int rc = pull_fetch(url.data, "application/json", ep->hf_token, PULL_MAX_DOC, &doc, &len, ep->cancelled,
                      ep->cancel_ctx);
  if (rc == ERR_NOT_FOUND) {
    /* A mirror without the tree endpoint: the model info with file sizes. */
    buf_reset(&url);
    if (buf_appendf(&url, "%s/api/models/%s/%s?blobs=true", ep->hf, ref->ns, ref->repo)) rc = ERR_NOMEM;
    else rc = pull_fetch(url.data, "application/json", ep->hf_token, PULL_MAX_DOC, &doc, &len, ep->cancelled,
                         ep->cancel_ctx);
  }
  if (rc == ERR_NOT_FOUND)
    rc = pull_err_prefix(ERR_NOT_FOUND, "hf.co/%s/%s: repository not found on %s", ref->ns, ref->repo, ep->hf);
  else if (rc && rc != ERR_CANCELLED) rc = pull_err_prefix(rc, "hf.co/%s/%s: cannot list the repository", ref->ns, ref->repo);
  buf_free(&url);
  if (rc) return rc;
  json_error_t je;
  json_t *j = json_loadb(doc, len, 0, &je);
  free(doc);
  if (!j)
    return err_set(ERR_PARSE, "hf.co/%s/%s: the file listing is not JSON (line %d column %d: %s)", ref->ns, ref->repo,
                   je.line, je.column, je.text);
  hf_item *items = NULL;
  size_t n = 0;
  rc = hf_items(j, &items, &n);
  const char **paths = rc ? NULL : calloc(n + 1, sizeof *paths);
  if (!rc && !paths) rc = ERR_NOMEM;
  for (size_t i = 0; !rc && i < n; i++) paths[i] = items[i].path;
  size_t idx[PULL_MAX_FILES], n_model = 0, n_sel = 0;
  if (!rc) {
    rc = pull_hf_select(paths, n, q, pat, idx, PULL_MAX_FILES, &n_model, &n_sel);
    if (rc) rc = pull_err_prefix(rc, "hf.co/%s/%s", ref->ns, ref->repo);
  }
  if (!rc) {
    pl->src = PULL_SOURCE_HF;
    pl->n_model = n_model;
    if (ref->tag[0] && !(quant && *quant)) {
      snprintf(pl->name, sizeof pl->name, "%s", ref->name);
    } else {
      char label[PULL_FILE_CAP];
      const char *first = base_name(items[idx[0]].path);
      if (q) snprintf(label, sizeof label, "%s", q);
      else if (!registry_quant_from_filename(first, label, sizeof label))
        snprintf(label, sizeof label, "%.*s", (int)(strlen(first) > 5 ? strlen(first) - 5 : strlen(first)), first);
      snprintf(pl->name, sizeof pl->name, "hf.co/%s/%s:%s", ref->ns, ref->repo, label);
    }
    buf o = BUF_INIT;
    if (buf_appendf(&o, "%s/%s/%s", ep->hf, ref->ns, ref->repo)) rc = ERR_NOMEM;
    pl->origin = buf_detach(&o, NULL);
  }
  for (size_t k = 0; !rc && k < n_sel; k++) {
    const hf_item *it = &items[idx[k]];
    buf u = BUF_INIT;
    rc = buf_appendf(&u, "%s/%s/%s/resolve/main/", ep->hf, ref->ns, ref->repo);
    if (!rc) rc = append_escaped_path(&u, it->path);
    char dg[80];
    if (it->sha) snprintf(dg, sizeof dg, "sha256:%s", it->sha);
    if (!rc) rc = add_file(pl, buf_detach(&u, NULL), base_name(it->path), it->sha ? dg : NULL, it->size,
                           k < n_model ? PULL_LAYER_MODEL : PULL_LAYER_PROJECTOR);
    else buf_free(&u);
  }
  free(paths);
  free(items);
  json_decref(j);
  return rc;
}

/* ---- Ollama ---------------------------------------------------------------------- */

static const char *const LAYER_FILES[] = {
    [PULL_LAYER_MODEL] = "model.gguf", [PULL_LAYER_PROJECTOR] = "projector.gguf",
    [PULL_LAYER_TEMPLATE] = "template", [PULL_LAYER_SYSTEM] = "system",
    [PULL_LAYER_PARAMS] = "params.json",
};

static int plan_ollama(const pull_endpoints *ep, const pull_ref *ref, pull_plan *pl) {
  buf base = BUF_INIT;
  int rc = strcasecmp(ref->host, "registry.ollama.ai") == 0 ? buf_append_str(&base, ep->ollama)
                                                            : buf_appendf(&base, "https://%s", ref->host);
  buf murl = BUF_INIT;
  if (!rc) rc = buf_appendf(&murl, "%s/v2/%s/%s/manifests/%s", base.data, ref->ns, ref->repo, ref->tag);
  char *doc = NULL;
  size_t len = 0;
  if (!rc) {
    rc = pull_fetch(murl.data, "application/vnd.docker.distribution.manifest.v2+json", NULL, PULL_MAX_DOC, &doc, &len,
                    ep->cancelled, ep->cancel_ctx);
    if (rc == ERR_NOT_FOUND)
      rc = pull_err_prefix(ERR_NOT_FOUND, "%s: no such model or tag in the registry", ref->name);
    else if (rc && rc != ERR_CANCELLED) rc = pull_err_prefix(rc, "%s: cannot read the manifest", ref->name);
  }
  pull_layer layers[PULL_MAX_FILES];
  size_t n = 0;
  if (!rc) {
    rc = pull_ollama_manifest_parse(doc, len, layers, PULL_MAX_FILES, &n);
    if (rc) rc = pull_err_prefix(rc, "%s", ref->name);
  }
  free(doc);
  if (!rc) {
    pl->src = PULL_SOURCE_OLLAMA;
    snprintf(pl->name, sizeof pl->name, "%s", ref->name);
    pl->origin = buf_detach(&murl, NULL);
  }
  /* The model layer first, the rest after: the order of the renames. */
  for (int pass = 0; pass < 2 && !rc; pass++)
    for (size_t i = 0; i < n && !rc; i++) {
      if ((layers[i].kind == PULL_LAYER_MODEL) != (pass == 0)) continue;
      bool dup = false; /* one file per kind (a second template layer replaces nothing) */
      for (size_t k = 0; k < pl->n_files; k++) dup |= pl->files[k].kind == layers[i].kind;
      if (dup) continue;
      buf u = BUF_INIT;
      if (buf_appendf(&u, "%s/v2/%s/%s/blobs/%s", base.data, ref->ns, ref->repo, layers[i].digest)) {
        buf_free(&u);
        rc = ERR_NOMEM;
        break;
      }
      rc = add_file(pl, buf_detach(&u, NULL), LAYER_FILES[layers[i].kind], layers[i].digest, layers[i].size,
                    layers[i].kind);
      if (!rc && layers[i].kind == PULL_LAYER_MODEL) pl->n_model = 1;
    }
  buf_free(&base);
  buf_free(&murl);
  return rc;
}

int pull_plan_resolve(const pull_endpoints *ep, const pull_ref *ref, const char *quant, const char *file,
                      pull_plan *out) {
  memset(out, 0, sizeof *out);
  int rc = ref->src == PULL_SOURCE_HF ? plan_hf(ep, ref, quant, file, out) : plan_ollama(ep, ref, out);
  if (!rc) rc = pull_dir_name(out->name, out->dir, sizeof out->dir);
  if (rc) pull_plan_free(out);
  return rc;
}

/* ---- the sidecar ------------------------------------------------------------------ */

static const char *kind_key(pull_layer_kind k) {
  switch (k) {
  case PULL_LAYER_PROJECTOR: return "projector";
  case PULL_LAYER_TEMPLATE: return "template";
  case PULL_LAYER_SYSTEM: return "system";
  case PULL_LAYER_PARAMS: return "params";
  default: return NULL;
  }
}

int pull_sidecar_write(const char *dir, const pull_plan *pl, int64_t now) {
  json_t *files = json_array();
  json_t *doc = json_object();
  if (!files || !doc) {
    json_decref(files);
    json_decref(doc);
    return ERR_NOMEM;
  }
  json_object_set_new(doc, "name", json_string(pl->name));
  json_object_set_new(doc, "source", json_string(pl->src == PULL_SOURCE_HF ? "huggingface" : "ollama"));
  if (pl->origin) json_object_set_new(doc, "origin", json_string(pl->origin));
  const pull_pfile *model = pl->n_model ? &pl->files[0] : NULL;
  for (size_t i = 0; i < pl->n_files; i++)
    if (pl->files[i].kind == PULL_LAYER_MODEL) {
      model = &pl->files[i];
      break;
    }
  if (model) {
    json_object_set_new(doc, "model", json_string(model->dest));
    if (model->digest) json_object_set_new(doc, "digest", json_string(model->digest));
    if (model->size >= 0) json_object_set_new(doc, "size", json_integer(model->size));
  }
  for (size_t i = 0; i < pl->n_files; i++) {
    const pull_pfile *f = &pl->files[i];
    const char *k = kind_key(f->kind);
    if (k && !json_object_get(doc, k)) json_object_set_new(doc, k, json_string(f->dest));
    json_array_append_new(files, json_pack("{s:s, s:s?, s:I}", "file", f->dest, "digest", f->digest, "size",
                                           (json_int_t)f->size));
  }
  json_object_set_new(doc, "files", files);
  json_object_set_new(doc, "pulled_at", json_integer(now));
  char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(doc);
  if (!text) return ERR_NOMEM;
  buf tmp = BUF_INIT, fin = BUF_INIT;
  int rc = 0;
  if (buf_appendf(&tmp, "%s/.%s.tmp", dir, REGISTRY_PULL_MANIFEST) ||
      buf_appendf(&fin, "%s/%s", dir, REGISTRY_PULL_MANIFEST))
    rc = ERR_NOMEM;
  int fd = rc ? -1 : open(tmp.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (!rc && fd < 0) rc = err_set(ERR_IO, "cannot create %s: %s", tmp.data, strerror(errno));
  if (!rc) {
    size_t n = strlen(text), off = 0;
    while (!rc && off < n) {
      ssize_t w = write(fd, text + off, n - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) rc = err_set(ERR_IO, "%s %s: %s", errno == ENOSPC ? "disk full writing" : "writing", tmp.data,
                               strerror(w < 0 ? errno : ENOSPC));
      else off += (size_t)w;
    }
    if (!rc && fsync(fd) != 0) rc = err_set(ERR_IO, "syncing %s: %s", tmp.data, strerror(errno));
    close(fd);
    if (!rc && rename(tmp.data, fin.data) != 0)
      rc = err_set(ERR_IO, "renaming %s: %s", tmp.data, strerror(errno));
    if (rc) unlink(tmp.data);
  }
  free(text);
  buf_free(&tmp);
  buf_free(&fin);
  return rc;
}

static json_t *sidecar_load(const char *dir) {
  buf p = BUF_INIT;
  if (buf_appendf(&p, "%s/%s", dir, REGISTRY_PULL_MANIFEST)) return NULL;
  json_t *j = json_load_file(p.data, 0, NULL);
  buf_free(&p);
  if (j && !json_is_object(j)) {
    json_decref(j);
    j = NULL;
  }
  return j;
}

bool pull_sidecar_file(const char *dir, const char *dest, char *digest, size_t cap, int64_t *size) {
  json_t *j = sidecar_load(dir);
  if (!j) return false;
  bool found = false;
  size_t i;
  json_t *f;
  json_array_foreach(json_object_get(j, "files"), i, f) {
    const char *nm = json_string_value(json_object_get(f, "file"));
    if (!nm || strcmp(nm, dest) != 0) continue;
    const char *dg = json_string_value(json_object_get(f, "digest"));
    snprintf(digest, cap, "%s", dg ? dg : "");
    json_t *sz = json_object_get(f, "size");
    *size = json_is_integer(sz) ? (int64_t)json_integer_value(sz) : -1;
    found = true;
    break;
  }
  json_decref(j);
  return found;
}

char *pull_sidecar_read(const char *dir, char ***files, size_t *n_files) {
  *files = NULL;
  *n_files = 0;
  json_t *j = sidecar_load(dir);
  if (!j) return NULL;
  char *name = str_dup(json_string_value(json_object_get(j, "name")));
  json_t *arr = json_object_get(j, "files");
  size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
  char **v = n ? calloc(n, sizeof *v) : NULL;
  size_t k = 0, i;
  json_t *f;
  if (v) json_array_foreach(arr, i, f) {
      const char *nm = json_string_value(json_object_get(f, "file"));
      /* Only plain names in this folder: a sidecar cannot point elsewhere. */
      if (!nm || !*nm || strchr(nm, '/') || strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0) continue;
      if ((v[k] = str_dup(nm))) k++;
    }
  *files = v;
  *n_files = k;
  json_decref(j);
  return name;
}
