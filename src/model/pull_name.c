/*
 * pull_name.c - the pure parts of pulling: parsing a model name into a
 * source reference, the folder a pulled model lives in, choosing the files
 * of a Hugging Face repository, and parsing an Ollama manifest. No I/O, so
 * tests/unit/test_pull.c drives each directly.
 *
 * Naming follows the tools users already know: Ollama's
 * `[host/][namespace/]model[:tag]` with defaults registry.ollama.ai,
 * library, latest (and its display form that drops the defaults), and
 * Ollama's `hf.co/owner/repo:QUANT` for Hugging Face repositories.
 */
#include <ctype.h>
#include <stdarg.h>
#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"
#include "model/pull_int.h"

#define OLLAMA_DEFAULT_HOST "registry.ollama.ai"

static const char *const STATE_NAMES[PULL_STATE_COUNT] = {"queued",    "downloading", "verifying",
                                                          "completed", "failed",      "cancelled"};

const char *pull_state_name(pull_state s) { return (unsigned)s < PULL_STATE_COUNT ? STATE_NAMES[s] : "unknown"; }

bool pull_state_parse(const char *name, pull_state *out) {
  for (int i = 0; name && i < PULL_STATE_COUNT; i++)
    if (strcmp(name, STATE_NAMES[i]) == 0) {
      *out = (pull_state)i;
      return true;
    }
  return false;
}

bool pull_state_is_final(pull_state s) { return s == PULL_COMPLETED || s == PULL_FAILED || s == PULL_CANCELLED; }

int pull_err_prefix(int rc, const char *fmt, ...) {
  char detail[1024], prefix[1024];
  snprintf(detail, sizeof detail, "%s", err_detail());
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  return err_set(rc, "%s: %s", prefix, detail);
}

/* ---- names ------------------------------------------------------------------ */

/* Ollama part: first byte alphanumeric or '_', then alphanumerics, '_', '-', '.'. */
static bool ollama_part_ok(const char *s, size_t n, bool host) {
  if (n == 0 || n >= PULL_PART_CAP) return false;
  if (!isalnum((unsigned char)s[0]) && s[0] != '_') return false;
  for (size_t i = 1; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!isalnum(c) && c != '_' && c != '-' && c != '.' && !(host && c == ':')) return false;
  }
  return !(n == 2 && s[0] == '.' && s[1] == '.');
}

/* HF owner or repository: alphanumerics, '_', '-', '.'; no "..", no "--". */
static bool hf_part_ok(const char *s, size_t n) {
  if (n == 0 || n >= PULL_PART_CAP) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!isalnum(c) && c != '_' && c != '-' && c != '.') return false;
    if (i && ((c == '.' && s[i - 1] == '.') || (c == '-' && s[i - 1] == '-'))) return false;
  }
  return s[0] != '.' && s[0] != '-';
}

/* A path inside a repository: printable, no empty, "." or ".." segment. */
static bool hf_path_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= PULL_FILE_CAP || s[0] == '/') return false;
  const char *seg = s;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && ((unsigned char)s[i] < 0x20 || s[i] == 0x7f || s[i] == '\\')) return false;
    if (i == n || s[i] == '/') {
      size_t l = (size_t)(s + i - seg);
      if (l == 0 || (l == 1 && seg[0] == '.') || (l == 2 && seg[0] == '.' && seg[1] == '.')) return false;
      seg = s + i + 1;
    }
  }
  return true;
}

static bool quant_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= PULL_PART_CAP) return false;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.') return false;
  return true;
}

static void copy_n(char *dst, size_t cap, const char *src, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = 0;
}

/* "owner/repo[:quant]" or "owner/repo/path/file.gguf" after an hf prefix. */
static int parse_hf(const char *orig, const char *rest, const char *pattern, pull_ref *r) {
  r->src = PULL_SOURCE_HF;
  const char *s1 = strchr(rest, '/');
  if (!s1) return err_set(ERR_INVALID, "model name '%s': a Hugging Face name is hf.co/OWNER/REPO[:QUANT]", orig);
  if (!hf_part_ok(rest, (size_t)(s1 - rest)))
    return err_set(ERR_INVALID, "model name '%s': bad repository owner '%.*s'", orig, (int)(s1 - rest), rest);
  copy_n(r->ns, sizeof r->ns, rest, (size_t)(s1 - rest));
  const char *repo = s1 + 1;
  const char *s2 = strchr(repo, '/');
  const char *colon = strchr(repo, ':');
  size_t repo_len = s2 ? (size_t)(s2 - repo) : colon ? (size_t)(colon - repo) : strlen(repo);
  if (s2 && colon && colon < s2) repo_len = (size_t)(colon - repo);
  if (!hf_part_ok(repo, repo_len))
    return err_set(ERR_INVALID, "model name '%s': bad repository name '%.*s'", orig, (int)repo_len, repo);
  copy_n(r->repo, sizeof r->repo, repo, repo_len);
  const char *after = repo + repo_len;
  if (*after == ':') {
    if (!quant_ok(after + 1)) return err_set(ERR_INVALID, "model name '%s': bad quantization '%s'", orig, after + 1);
    snprintf(r->tag, sizeof r->tag, "%s", after + 1);
  } else if (*after == '/') {
    const char *file = after + 1;
    /* A browser URL: /resolve/main/FILE or /blob/main/FILE. */
    if (strncmp(file, "resolve/main/", 13) == 0) file += 13;
    else if (strncmp(file, "blob/main/", 10) == 0) file += 10;
    if (!hf_path_ok(file)) return err_set(ERR_INVALID, "model name '%s': bad file path '%s'", orig, file);
    snprintf(r->file, sizeof r->file, "%s", file);
  }
  if (pattern && *pattern) {
    if (!hf_path_ok(pattern)) return err_set(ERR_INVALID, "file pattern '%s' is not a path in a repository", pattern);
    snprintf(r->file, sizeof r->file, "%s", pattern);
  }
  if (r->tag[0]) snprintf(r->name, sizeof r->name, "hf.co/%s/%s:%s", r->ns, r->repo, r->tag);
  else r->name[0] = 0; /* known once a file is chosen */
  return 0;
}

int pull_ref_parse(const char *name, const char *file_pattern, pull_ref *r) {
  memset(r, 0, sizeof *r);
  if (!name || !*name) return err_set(ERR_INVALID, "model name is empty");
  size_t n = strlen(name);
  if (n >= PULL_NAME_CAP - 16) return err_set(ERR_INVALID, "model name is too long (%zu bytes)", n);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)name[i] <= 0x20 || name[i] == 0x7f)
      return err_set(ERR_INVALID, "model name '%s' holds a space or control character", name);
  static const char *const hf_prefixes[] = {"https://huggingface.co/", "https://hf.co/", "http://huggingface.co/",
                                            "hf://", "hf.co/", "huggingface.co/"};
  for (size_t i = 0; i < ARRAY_LEN(hf_prefixes); i++) {
    size_t l = strlen(hf_prefixes[i]);
    if (strncasecmp(name, hf_prefixes[i], l) == 0) return parse_hf(name, name + l, file_pattern, r);
  }
  if (file_pattern && *file_pattern) return parse_hf(name, name, file_pattern, r);
  if (str_ends_with(name, ".gguf") || str_ends_with(name, ".GGUF")) {
    if (!strchr(name, '/')) return err_set(ERR_INVALID, "model name '%s': a file needs OWNER/REPO/ before it", name);
    return parse_hf(name, name, NULL, r);
  }

  /* Ollama: [host/][namespace/]model[:tag]; the tag follows the last ':'
   * after the last '/' (a host may carry a port). */
  r->src = PULL_SOURCE_OLLAMA;
  const char *last_slash = strrchr(name, '/');
  const char *model = last_slash ? last_slash + 1 : name;
  const char *colon = strchr(model, ':');
  size_t model_len = colon ? (size_t)(colon - model) : strlen(model);
  if (colon) {
    const char *tag = colon + 1;
    size_t tl = strlen(tag);
    if (!ollama_part_ok(tag, tl, false))
      return err_set(ERR_INVALID, "model name '%s': bad tag '%s'", name, tag);
    snprintf(r->tag, sizeof r->tag, "%s", tag);
  } else {
    snprintf(r->tag, sizeof r->tag, "latest");
  }
  if (!ollama_part_ok(model, model_len, false))
    return err_set(ERR_INVALID, "model name '%s': bad model part '%.*s'", name, (int)model_len, model);
  copy_n(r->repo, sizeof r->repo, model, model_len);
  snprintf(r->host, sizeof r->host, OLLAMA_DEFAULT_HOST);
  snprintf(r->ns, sizeof r->ns, "library");
  if (last_slash) {
    const char *first_slash = strchr(name, '/');
    if (first_slash == last_slash) { /* ns/model */
      if (!ollama_part_ok(name, (size_t)(first_slash - name), false))
        return err_set(ERR_INVALID, "model name '%s': bad namespace '%.*s'", name, (int)(first_slash - name), name);
      copy_n(r->ns, sizeof r->ns, name, (size_t)(first_slash - name));
    } else { /* host/ns/model */
      const char *ns = first_slash + 1;
      if (strchr(ns, '/') != last_slash) return err_set(ERR_INVALID, "model name '%s': too many '/' parts", name);
      if (!ollama_part_ok(name, (size_t)(first_slash - name), true))
        return err_set(ERR_INVALID, "model name '%s': bad host '%.*s'", name, (int)(first_slash - name), name);
      if (!ollama_part_ok(ns, (size_t)(last_slash - ns), false))
        return err_set(ERR_INVALID, "model name '%s': bad namespace '%.*s'", name, (int)(last_slash - ns), ns);
      copy_n(r->host, sizeof r->host, name, (size_t)(first_slash - name));
      copy_n(r->ns, sizeof r->ns, ns, (size_t)(last_slash - ns));
    }
  }
  /* The display form drops the default host and namespace. */
  if (strcasecmp(r->host, OLLAMA_DEFAULT_HOST) != 0)
    snprintf(r->name, sizeof r->name, "%s/%s/%s:%s", r->host, r->ns, r->repo, r->tag);
  else if (strcmp(r->ns, "library") != 0)
    snprintf(r->name, sizeof r->name, "%s/%s:%s", r->ns, r->repo, r->tag);
  else
    snprintf(r->name, sizeof r->name, "%s:%s", r->repo, r->tag);
  return 0;
}

int pull_dir_name(const char *name, char *out, size_t cap) {
  if (!name || !*name) return err_set(ERR_INVALID, "model name is empty");
  if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
    return err_set(ERR_INVALID, "model name '%s' cannot name a folder", name);
  size_t o = 0;
  for (const char *p = name; *p; p++) {
    unsigned char c = (unsigned char)*p;
    const char *rep = NULL;
    char one[2] = {(char)c, 0};
    if (c == '/') rep = "--";
    else if (c == ':') rep = "@";
    else if (isalnum(c) || c == '.' || c == '_' || c == '-') rep = one;
    else return err_set(ERR_INVALID, "model name '%s': byte 0x%02x cannot be part of a folder name", name, c);
    size_t l = strlen(rep);
    if (o + l + 1 > cap) return err_set(ERR_TOO_LARGE, "model name '%s' is too long for a folder name", name);
    memcpy(out + o, rep, l);
    o += l;
  }
  out[o] = 0;
  if (out[0] == '.') return err_set(ERR_INVALID, "model name '%s' would make a hidden folder", name);
  return 0;
}

/* ---- choosing HF files ---------------------------------------------------------- */

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static bool is_gguf(const char *p) { return strlen(p) > 5 && strcasecmp(p + strlen(p) - 5, ".gguf") == 0; }
static bool is_mmproj(const char *p) { return strcasestr(base_name(p), "mmproj") != NULL; }

/* "X-00002-of-00003.gguf": shard 2 of 3 with stem length of X. */
static bool split_parse(const char *file, unsigned *idx, unsigned *cnt, size_t *stem) {
  size_t n = strlen(file);
  if (n < 5 + 15) return false;
  const char *s = file + n - 5 - 15; /* "-00001-of-00003" */
  if (s[0] != '-' || strncmp(s + 6, "-of-", 4) != 0) return false;
  for (int i = 1; i < 6; i++)
    if (!isdigit((unsigned char)s[i]) || !isdigit((unsigned char)s[i + 9])) return false;
  *idx = (unsigned)strtoul(s + 1, NULL, 10);
  *cnt = (unsigned)strtoul(s + 10, NULL, 10);
  *stem = (size_t)(s - file);
  return *idx >= 1 && *cnt >= 1 && *idx <= *cnt;
}

/* Same model: same path up to the shard suffix (or the same path). */
static bool same_model(const char *a, const char *b) {
  unsigned ia, ca, ib, cb;
  size_t sa, sb;
  bool pa = split_parse(a, &ia, &ca, &sa), pb = split_parse(b, &ib, &cb, &sb);
  if (!pa || !pb) return strcmp(a, b) == 0;
  return sa == sb && ca == cb && strncmp(a, b, sa) == 0;
}

static bool quant_matches(const char *path, const char *quant) {
  char q[REGISTRY_QUANT_MAX];
  if (registry_quant_from_filename(base_name(path), q, sizeof q) && strcasecmp(q, quant) == 0) return true;
  return false;
}

static bool pattern_matches(const char *path, const char *pattern) {
  if (strcasecmp(path, pattern) == 0 || strcasecmp(base_name(path), pattern) == 0) return true;
  return fnmatch(pattern, path, FNM_CASEFOLD) == 0 || fnmatch(pattern, base_name(path), FNM_CASEFOLD) == 0;
}

/* Lists the distinct quant labels of the model files, for error messages. */
static void list_choices(const char *const *paths, size_t n, buf *b) {
  for (size_t i = 0; i < n; i++) {
    if (!is_gguf(paths[i]) || is_mmproj(paths[i])) continue;
    unsigned idx, cnt;
    size_t st;
    if (split_parse(paths[i], &idx, &cnt, &st) && idx != 1) continue;
    char q[REGISTRY_QUANT_MAX];
    const char *label = registry_quant_from_filename(base_name(paths[i]), q, sizeof q) ? q : paths[i];
    buf_appendf(b, "%s%s", b->len ? ", " : "", label);
  }
}

int pull_hf_select(const char *const *paths, size_t n_paths, const char *quant, const char *pattern, size_t *idx,
                   size_t cap, size_t *n_model, size_t *n_out) {
  *n_model = *n_out = 0;
  if (quant && !*quant) quant = NULL;
  if (pattern && !*pattern) pattern = NULL;
  /* Pass 1: the candidates (model files matching the request). */
  size_t first = SIZE_MAX, n_distinct = 0;
  const char *want_default = (quant || pattern) ? NULL : "Q4_K_M";
  for (int pass = 0; pass < 2 && first == SIZE_MAX; pass++) {
    n_distinct = 0;
    for (size_t i = 0; i < n_paths; i++) {
      const char *p = paths[i];
      if (!is_gguf(p) || is_mmproj(p)) continue;
      bool ok;
      if (pattern) ok = pattern_matches(p, pattern);
      else if (quant) ok = quant_matches(p, quant);
      else ok = pass == 0 ? quant_matches(p, want_default) : true;
      if (!ok) continue;
      if (first == SIZE_MAX) {
        first = i;
        n_distinct = 1;
      } else if (!same_model(paths[first], p)) {
        n_distinct++;
      }
    }
    if (quant || pattern) break;
  }
  if (first == SIZE_MAX) {
    buf b = BUF_INIT;
    list_choices(paths, n_paths, &b);
    int rc = err_set(ERR_NOT_FOUND, "no GGUF file %s%s%s in the repository%s%s", quant ? "of quantization " : "",
                     quant ? quant : pattern ? "matching " : "", pattern && !quant ? pattern : "",
                     b.len ? "; it has: " : " (it holds no .gguf file)", b.len ? b.data : "");
    buf_free(&b);
    return rc;
  }
  if (n_distinct > 1) {
    buf b = BUF_INIT;
    list_choices(paths, n_paths, &b);
    int rc = err_set(ERR_INVALID, "%zu GGUF files match; name one by its quantization (hf.co/OWNER/REPO:QUANT): %s",
                     n_distinct, b.data ? b.data : "");
    buf_free(&b);
    return rc;
  }
  /* The shards of the chosen model, in shard order. */
  unsigned idx0, cnt;
  size_t stem;
  if (split_parse(paths[first], &idx0, &cnt, &stem)) {
    for (unsigned want = 1; want <= cnt; want++) {
      size_t found = SIZE_MAX;
      for (size_t i = 0; i < n_paths && found == SIZE_MAX; i++) {
        unsigned ii, cc;
        size_t ss;
        if (same_model(paths[first], paths[i]) && split_parse(paths[i], &ii, &cc, &ss) && ii == want) found = i;
      }
      if (found == SIZE_MAX)
        return err_set(ERR_NOT_FOUND, "split model %.*s: shard %u of %u is missing from the repository", (int)stem,
                       paths[first], want, cnt);
      if (*n_out >= cap) return err_set(ERR_TOO_LARGE, "split model has more than %zu shards", cap);
      idx[(*n_out)++] = found;
    }
  } else {
    if (cap < 1) return err_set(ERR_TOO_LARGE, "no room for the chosen file");
    idx[(*n_out)++] = first;
  }
  *n_model = *n_out;
  /* A projector: prefer one in the model's folder, F16 over others. */
  size_t proj = SIZE_MAX;
  for (size_t i = 0; i < n_paths; i++) {
    if (!is_gguf(paths[i]) || !is_mmproj(paths[i])) continue;
    if (proj == SIZE_MAX || (strcasestr(base_name(paths[i]), "f16") && !strcasestr(base_name(paths[proj]), "f16")))
      proj = i;
  }
  if (proj != SIZE_MAX && *n_out < cap) idx[(*n_out)++] = proj;
  return 0;
}

/* ---- Ollama manifests ---------------------------------------------------------- */

#define OLLAMA_MT "application/vnd.ollama.image."

static bool digest_ok(const char *d) {
  if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 71) return false;
  for (int i = 7; i < 71; i++)
    if (!isxdigit((unsigned char)d[i]) || isupper((unsigned char)d[i])) return false;
  return true;
}

int pull_ollama_manifest_parse(const char *json, size_t len, pull_layer *out, size_t cap, size_t *n_out) {
  *n_out = 0;
  json_error_t je;
  json_t *m = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
  if (!m) return err_set(ERR_PARSE, "manifest is not JSON: line %d column %d: %s", je.line, je.column, je.text);
  int rc = 0;
  json_t *layers = json_object_get(m, "layers");
  if (!json_is_object(m)) rc = err_set(ERR_PARSE, "manifest: expected an object");
  else if (!json_is_array(layers)) rc = err_set(ERR_PARSE, "manifest: \"layers\" is missing or not an array");
  bool have_model = false;
  size_t i;
  json_t *l;
  if (!rc) json_array_foreach(layers, i, l) {
      const char *mt = json_string_value(json_object_get(l, "mediaType"));
      const char *dg = json_string_value(json_object_get(l, "digest"));
      json_t *sz = json_object_get(l, "size");
      if (!json_is_object(l)) {
        rc = err_set(ERR_PARSE, "manifest: layers[%zu]: expected an object", i);
        break;
      }
      if (!mt) {
        rc = err_set(ERR_PARSE, "manifest: layers[%zu].mediaType: expected a string", i);
        break;
      }
      if (!digest_ok(dg)) {
        rc = err_set(ERR_PARSE, "manifest: layers[%zu].digest: expected \"sha256:<64 lowercase hex>\", got '%.80s'", i,
                     dg ? dg : "(none)");
        break;
      }
      if (!json_is_integer(sz) || json_integer_value(sz) < 0) {
        rc = err_set(ERR_PARSE, "manifest: layers[%zu].size: expected a non-negative integer", i);
        break;
      }
      pull_layer_kind k = PULL_LAYER_OTHER;
      if (strncmp(mt, OLLAMA_MT, strlen(OLLAMA_MT)) == 0) {
        const char *kind = mt + strlen(OLLAMA_MT);
        if (strcmp(kind, "model") == 0) k = PULL_LAYER_MODEL;
        else if (strcmp(kind, "projector") == 0) k = PULL_LAYER_PROJECTOR;
        else if (strcmp(kind, "template") == 0) k = PULL_LAYER_TEMPLATE;
        else if (strcmp(kind, "system") == 0) k = PULL_LAYER_SYSTEM;
        else if (strcmp(kind, "params") == 0) k = PULL_LAYER_PARAMS;
      }
      if (k == PULL_LAYER_OTHER) continue;
      if (k == PULL_LAYER_MODEL) {
        if (have_model) continue;
        have_model = true;
      }
      if (*n_out >= cap) {
        rc = err_set(ERR_TOO_LARGE, "manifest: more than %zu layers", cap);
        break;
      }
      out[*n_out].kind = k;
      snprintf(out[*n_out].digest, sizeof out[*n_out].digest, "%s", dg);
      out[*n_out].size = (int64_t)json_integer_value(sz);
      (*n_out)++;
    }
  if (!rc && !have_model) rc = err_set(ERR_PARSE, "manifest: no layer of type " OLLAMA_MT "model");
  json_decref(m);
  if (rc) *n_out = 0;
  return rc;
}
