/*
 * registry.c - the model registry core: configuration (models dir, explicit
 * models, aliases, default), refresh into immutable snapshots, the header
 * cache, unique naming and lookups. The source scanners live in
 * registry_scan.c; start reading at registry_refresh().
 *
 * Why snapshots: the HTTP threads list and look up models while an admin
 * call or a timer rescans the disks. A refresh builds a complete new
 * snapshot without holding the registry lock (scans touch the disk and read
 * GGUF headers), then swaps the pointer under the lock. Readers either copy
 * an entry under the lock (registry_lookup) or pin a snapshot with a
 * reference count (registry_snapshot_acquire); a snapshot is never modified
 * after it is published.
 *
 * Invariants:
 *   - r->lock guards r->snap, the explicit models, aliases, default, source
 *     directories and stats; r->scan_lock serializes refreshes and guards
 *     the header cache. Lock order: scan_lock before lock.
 *   - Names in a snapshot are unique (exactly, byte for byte).
 *   - The header cache holds one row per (path, size, mtime) seen in the
 *     last refresh; rows not seen again are dropped, so it never grows past
 *     the number of files on disk.
 *   - Nothing here writes to a scanned directory: files are only stat'ed,
 *     read and mapped read-only by gguf_open().
 */
#include "model/registry.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/util.h"
#include "gguf/gguf.h"
#include "kernels/tensor_type.h"
#include "model/model.h"
#include "model/registry_int.h"

#define REG_MAX_ALIAS_DEPTH 8

static const char *const SOURCE_NAMES[REGISTRY_SOURCE_COUNT] = {
    [REGISTRY_SOURCE_EXPLICIT] = "model",   [REGISTRY_SOURCE_MODELS_DIR] = "parley",
    [REGISTRY_SOURCE_OLLAMA] = "ollama",    [REGISTRY_SOURCE_LMSTUDIO] = "lmstudio",
    [REGISTRY_SOURCE_HF] = "huggingface",
};

const char *registry_source_name(registry_source s) {
  return (unsigned)s < REGISTRY_SOURCE_COUNT ? SOURCE_NAMES[s] : "unknown";
}

/* ---- quantization labels ------------------------------------------------ */

/* general.file_type (llama.cpp's llama_ftype numbering) -> label. */
static const char *const FILE_TYPES[] = {
    [0] = "F32",      [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",    [7] = "Q8_0",
    [8] = "Q5_0",     [9] = "Q5_1",    [10] = "Q2_K",   [11] = "Q3_K_S", [12] = "Q3_K_M",
    [13] = "Q3_K_L",  [14] = "Q4_K_S", [15] = "Q4_K_M", [16] = "Q5_K_S", [17] = "Q5_K_M",
    [18] = "Q6_K",    [19] = "IQ2_XXS", [20] = "IQ2_XS", [21] = "Q2_K_S", [22] = "IQ3_XS",
    [23] = "IQ3_XXS", [24] = "IQ1_S",  [25] = "IQ4_NL", [26] = "IQ3_S",  [27] = "IQ3_M",
    [28] = "IQ2_S",   [29] = "IQ2_M",  [30] = "IQ4_XS", [31] = "IQ1_M",  [32] = "BF16",
    [36] = "TQ1_0",   [37] = "TQ2_0",  [38] = "MXFP4",
};

const char *registry_quant_from_file_type(uint32_t file_type) {
  return file_type < ARRAY_LEN(FILE_TYPES) ? FILE_TYPES[file_type] : NULL;
}

/* Labels recognised in file names, longest first where one is a prefix of
 * another (Q4_K_M before Q4_K, IQ2_XXS before IQ2_XS). */
static const char *const NAME_QUANTS[] = {
    "IQ1_S",  "IQ1_M",  "IQ2_XXS", "IQ2_XS", "IQ2_S",  "IQ2_M",  "IQ3_XXS", "IQ3_XS", "IQ3_S",
    "IQ3_M",  "IQ4_XS", "IQ4_NL",  "Q2_K_S", "Q2_K_L", "Q2_K_XL", "Q2_K",   "Q3_K_XL", "Q3_K_S",
    "Q3_K_M", "Q3_K_L", "Q3_K",    "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "Q4_0", "Q4_1", "Q4_K_XL",
    "Q4_K_S", "Q4_K_M", "Q4_K_L",  "Q4_K",   "Q5_0",   "Q5_1",   "Q5_K_XL", "Q5_K_S", "Q5_K_M",
    "Q5_K_L", "Q5_K",   "Q6_K_XL", "Q6_K_L", "Q6_K",   "Q8_0",   "Q8_K_XL", "TQ1_0",  "TQ2_0",
    "MXFP4",  "BF16",   "F16",     "F32",    "FP16",   "FP32",
};

static bool is_sep(char c) { return c == '-' || c == '.' || c == '_' || c == '/' || c == ' '; }

bool registry_quant_from_filename(const char *filename, char *out, size_t cap) {
  if (!filename || !out || !cap) return false;
  const char *base = strrchr(filename, '/');
  base = base ? base + 1 : filename;
  size_t n = strlen(base);
  if (n > 5 && strcasecmp(base + n - 5, ".gguf") == 0) n -= 5;
  /* The last match wins: the quant usually ends the name. At each position
   * that starts a word, the longest label that ends at a word end. */
  const char *best = NULL;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && !is_sep(base[i - 1])) continue;
    const char *hit = NULL;
    size_t hit_len = 0;
    for (size_t q = 0; q < ARRAY_LEN(NAME_QUANTS); q++) {
      size_t l = strlen(NAME_QUANTS[q]);
      if (l > n - i || l <= hit_len || strncasecmp(base + i, NAME_QUANTS[q], l) != 0) continue;
      /* '_' may start a label ("model_Q4_0") but not end one: "Q4_K_Mx"
       * is no Q4_K. */
      if (i + l < n && (!is_sep(base[i + l]) || base[i + l] == '_')) continue;
      hit = NAME_QUANTS[q];
      hit_len = l;
    }
    if (hit) best = hit;
  }
  if (!best) return false;
  if (strcmp(best, "FP16") == 0) best = "F16";
  if (strcmp(best, "FP32") == 0) best = "F32";
  snprintf(out, cap, "%s", best);
  return true;
}

/* ---- the registry ------------------------------------------------------- */

struct registry_snapshot {
  atomic_int refs;
  registry_entry *items;
  size_t n;
};

typedef struct reg_header {   /* facts read from one GGUF header */
  char quant_ft[REGISTRY_QUANT_MAX];  /* from general.file_type; "" when absent */
  char quant_dom[REGISTRY_QUANT_MAX]; /* the matrices' most common tensor type */
  char arch[64];
  family_id family;
  uint32_t caps;
  bool executable;
  uint64_t context_length;
  uint64_t n_params, n_params_active;
  char *error;                /* NULL when the file opened cleanly */
} reg_header;

typedef struct reg_cache_row {
  char *path;
  uint64_t size;
  int64_t mtime_ns;
  bool seen;                  /* used by the refresh in progress */
  reg_header h;
} reg_cache_row;

typedef struct reg_named { char *a, *b; } reg_named; /* alias -> target; name -> path */

struct registry {
  pthread_mutex_t lock;
  pthread_mutex_t scan_lock;
  registry_snapshot *snap;
  char *dirs[REGISTRY_SOURCE_COUNT]; /* overrides; NULL = default */
  bool dir_set[REGISTRY_SOURCE_COUNT];
  reg_named *models;          /* explicit: a = name (or NULL), b = path */
  size_t n_models;
  reg_named *aliases;         /* a = alias, b = target */
  size_t n_aliases;
  char *default_name;
  registry_stats stats;
  reg_cache_row *cache;       /* guarded by scan_lock */
  size_t n_cache;
};

static void entry_clear(registry_entry *e) {
  free(e->name);
  free(e->path);
  free(e->projector);
  free(e->template_path);
  free(e->system_path);
  free(e->params_path);
  free(e->error);
  memset(e, 0, sizeof *e);
}

void registry_entry_free(registry_entry *e) {
  if (!e) return;
  entry_clear(e);
  free(e);
}

static int entry_copy(registry_entry *dst, const registry_entry *src) {
  *dst = *src;
  dst->name = str_dup(src->name);
  dst->path = str_dup(src->path);
  dst->projector = str_dup(src->projector);
  dst->template_path = str_dup(src->template_path);
  dst->system_path = str_dup(src->system_path);
  dst->params_path = str_dup(src->params_path);
  dst->error = str_dup(src->error);
  if ((src->name && !dst->name) || (src->path && !dst->path) || (src->projector && !dst->projector) ||
      (src->template_path && !dst->template_path) || (src->system_path && !dst->system_path) ||
      (src->params_path && !dst->params_path) || (src->error && !dst->error)) {
    entry_clear(dst);
    return ERR_NOMEM;
  }
  return 0;
}

registry_entry *registry_entry_dup(const registry_entry *e) {
  registry_entry *d = malloc(sizeof *d);
  if (!d) return NULL;
  if (entry_copy(d, e)) {
    free(d);
    return NULL;
  }
  return d;
}

static registry_snapshot *snapshot_new(void) {
  registry_snapshot *s = calloc(1, sizeof *s);
  if (s) atomic_init(&s->refs, 1);
  return s;
}

void registry_snapshot_release(registry_snapshot *s) {
  if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
  for (size_t i = 0; i < s->n; i++) entry_clear(&s->items[i]);
  free(s->items);
  free(s);
}

int registry_new(registry **out) {
  if (!out) return err_set(ERR_INVALID, "registry_new: NULL out");
  *out = NULL;
  registry *r = calloc(1, sizeof *r);
  if (!r) return ERR_NOMEM;
  if (!(r->snap = snapshot_new())) {
    free(r);
    return ERR_NOMEM;
  }
  pthread_mutex_init(&r->lock, NULL);
  pthread_mutex_init(&r->scan_lock, NULL);
  *out = r;
  return 0;
}

static void named_free(reg_named *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(v[i].a);
    free(v[i].b);
  }
  free(v);
}

static void header_clear(reg_header *h) {
  free(h->error);
  memset(h, 0, sizeof *h);
}

void registry_free(registry *r) {
  if (!r) return;
  registry_snapshot_release(r->snap);
  for (size_t i = 0; i < REGISTRY_SOURCE_COUNT; i++) free(r->dirs[i]);
  named_free(r->models, r->n_models);
  named_free(r->aliases, r->n_aliases);
  free(r->default_name);
  for (size_t i = 0; i < r->n_cache; i++) {
    free(r->cache[i].path);
    header_clear(&r->cache[i].h);
  }
  free(r->cache);
  pthread_mutex_destroy(&r->lock);
  pthread_mutex_destroy(&r->scan_lock);
  free(r);
}

int registry_set_source_dir(registry *r, registry_source src, const char *dir) {
  if (!r || src == REGISTRY_SOURCE_EXPLICIT || (unsigned)src >= REGISTRY_SOURCE_COUNT)
    return err_set(ERR_INVALID, "registry_set_source_dir: source %d takes no directory", (int)src);
  char *copy = NULL;
  if (dir && !(copy = strdup(dir))) return ERR_NOMEM;
  pthread_mutex_lock(&r->lock);
  free(r->dirs[src]);
  r->dirs[src] = copy;
  r->dir_set[src] = dir != NULL;
  pthread_mutex_unlock(&r->lock);
  return 0;
}

int registry_set_models_dir(registry *r, const char *dir) {
  /* NULL means "no models dir" here, unlike registry_set_source_dir. */
  return registry_set_source_dir(r, REGISTRY_SOURCE_MODELS_DIR, dir ? dir : "");
}

static int named_push(reg_named **v, size_t *n, const char *a, const char *b) {
  reg_named *nv = realloc(*v, (*n + 1) * sizeof *nv);
  if (!nv) return ERR_NOMEM;
  *v = nv;
  char *ca = str_dup(a), *cb = str_dup(b);
  if ((a && !ca) || (b && !cb)) {
    free(ca);
    free(cb);
    return ERR_NOMEM;
  }
  nv[*n] = (reg_named){ca, cb};
  (*n)++;
  return 0;
}

/* The stem of a path: "dir/x.gguf" -> "x" (malloc'd). */
static char *path_stem(const char *path) {
  const char *b = strrchr(path, '/');
  b = b && b[1] ? b + 1 : path;
  size_t n = strlen(b);
  if (n > 5 && strcasecmp(b + n - 5, ".gguf") == 0) n -= 5;
  return str_ndup(b, n);
}

int registry_add_model(registry *r, const char *path, const char *name) {
  if (!r || !path || !*path) return err_set(ERR_INVALID, "--model: empty path");
  if (name && !*name) return err_set(ERR_INVALID, "--model %s: empty name", path);
  char *stem = name ? NULL : path_stem(path);
  if (!name && !stem) return ERR_NOMEM;
  const char *nm = name ? name : stem;
  int rc = 0;
  pthread_mutex_lock(&r->lock);
  for (size_t i = 0; i < r->n_models && !rc; i++)
    if (strcmp(r->models[i].a, nm) == 0) rc = err_set(ERR_EXISTS, "--model %s: the name '%s' is taken", path, nm);
  for (size_t i = 0; i < r->n_aliases && !rc; i++)
    if (strcasecmp(r->aliases[i].a, nm) == 0)
      rc = err_set(ERR_EXISTS, "--model %s: the name '%s' is an alias", path, nm);
  if (!rc) rc = named_push(&r->models, &r->n_models, nm, path);
  pthread_mutex_unlock(&r->lock);
  free(stem);
  return rc;
}

int registry_add_alias(registry *r, const char *alias, const char *target) {
  if (!r || !alias || !*alias || !target || !*target)
    return err_set(ERR_INVALID, "alias: expected name=model with both sides non-empty");
  int rc = 0;
  pthread_mutex_lock(&r->lock);
  for (size_t i = 0; i < r->n_aliases && !rc; i++)
    if (strcasecmp(r->aliases[i].a, alias) == 0) rc = err_set(ERR_EXISTS, "alias '%s' is defined twice", alias);
  if (!rc) rc = named_push(&r->aliases, &r->n_aliases, alias, target);
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int registry_remove_name(registry *r, const char *name) {
  if (!r || !name || !*name) return err_set(ERR_INVALID, "registry_remove_name: empty name");
  int rc = ERR_NOT_FOUND;
  pthread_mutex_lock(&r->lock);
  for (size_t i = 0; i < r->n_aliases && rc; i++)
    if (strcasecmp(r->aliases[i].a, name) == 0) {
      free(r->aliases[i].a);
      free(r->aliases[i].b);
      memmove(&r->aliases[i], &r->aliases[i + 1], (r->n_aliases - i - 1) * sizeof *r->aliases);
      r->n_aliases--;
      rc = 0;
    }
  for (size_t i = 0; i < r->n_models && rc; i++)
    if (r->models[i].a && strcmp(r->models[i].a, name) == 0) {
      free(r->models[i].a);
      free(r->models[i].b);
      memmove(&r->models[i], &r->models[i + 1], (r->n_models - i - 1) * sizeof *r->models);
      r->n_models--;
      rc = 0;
    }
  pthread_mutex_unlock(&r->lock);
  if (rc) err_set(rc, "no alias or explicit model named '%s'", name);
  return rc;
}

int registry_add_alias_spec(registry *r, const char *spec) {
  const char *eq = spec ? strchr(spec, '=') : NULL;
  if (!eq || eq == spec || !eq[1])
    return err_set(ERR_INVALID, "alias '%s': expected NAME=MODEL", spec ? spec : "(null)");
  char *a = str_ndup(spec, (size_t)(eq - spec));
  if (!a) return ERR_NOMEM;
  int rc = registry_add_alias(r, a, eq + 1);
  free(a);
  return rc;
}

int registry_set_default(registry *r, const char *name) {
  if (!r) return err_set(ERR_INVALID, "registry_set_default: NULL registry");
  char *c = NULL;
  if (name && *name && !(c = strdup(name))) return ERR_NOMEM;
  pthread_mutex_lock(&r->lock);
  free(r->default_name);
  r->default_name = c;
  pthread_mutex_unlock(&r->lock);
  return 0;
}

void registry_aliases_free(registry_alias *v, size_t n) {
  for (size_t i = 0; v && i < n; i++) {
    free(v[i].alias);
    free(v[i].target);
  }
  free(v);
}

int registry_aliases(registry *r, registry_alias **out, size_t *n) {
  *out = NULL;
  *n = 0;
  int rc = 0;
  pthread_mutex_lock(&r->lock);
  registry_alias *v = r->n_aliases ? calloc(r->n_aliases, sizeof *v) : NULL;
  if (r->n_aliases && !v) rc = ERR_NOMEM;
  for (size_t i = 0; i < r->n_aliases && !rc; i++) {
    v[i].alias = strdup(r->aliases[i].a);
    v[i].target = strdup(r->aliases[i].b);
    if (!v[i].alias || !v[i].target) rc = ERR_NOMEM;
  }
  size_t cnt = r->n_aliases;
  pthread_mutex_unlock(&r->lock);
  if (rc) {
    registry_aliases_free(v, cnt);
    return rc;
  }
  *out = v;
  *n = cnt;
  return 0;
}

char *registry_default_name(registry *r) {
  pthread_mutex_lock(&r->lock);
  char *d = str_dup(r->default_name);
  pthread_mutex_unlock(&r->lock);
  return d;
}

void registry_get_stats(registry *r, registry_stats *out) {
  pthread_mutex_lock(&r->lock);
  *out = r->stats;
  pthread_mutex_unlock(&r->lock);
}

/* ---- header probing and the cache --------------------------------------- */

/* The most common type (by bytes) among the matrices: the quant of a file
 * without general.file_type. */
static const char *dominant_type(const gguf_file *f) {
  uint64_t bytes[TENSOR_TYPE_COUNT] = {0};
  for (size_t i = 0; i < gguf_n_tensors(f); i++) {
    const gguf_tensor *t = gguf_tensor_at(f, i);
    if (t->n_dims >= 2 && t->type < TENSOR_TYPE_COUNT) bytes[t->type] += t->n_bytes;
  }
  size_t best = TENSOR_TYPE_COUNT;
  for (size_t t = 0; t < TENSOR_TYPE_COUNT; t++)
    if (bytes[t] && (best == TENSOR_TYPE_COUNT || bytes[t] > bytes[best])) best = t;
  return best == TENSOR_TYPE_COUNT ? NULL : tensor_type_name((uint32_t)best);
}

static int header_read(const char *path, reg_header *h) {
  memset(h, 0, sizeof *h);
  gguf_file *f = NULL;
  int rc = gguf_open(path, &f);
  if (rc) {
    if (rc == ERR_NOMEM) return rc;
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s", err_name(rc), err_detail());
    return (h->error = strdup(msg)) ? 0 : ERR_NOMEM;
  }
  family_info fi;
  if (family_detect(f, &fi) == 0) {
    snprintf(h->arch, sizeof h->arch, "%s", fi.arch);
    h->family = fi.id;
    h->caps = fi.caps;
    h->executable = fi.executable;
  }
  if (h->arch[0]) {
    char key[96];
    uint64_t ctx = 0;
    snprintf(key, sizeof key, "%s.context_length", h->arch);
    if (gguf_get_u64(f, key, &ctx) == 0) h->context_length = ctx;
  }
  model_file_params(f, h->arch[0] ? h->arch : NULL, &h->n_params, &h->n_params_active);
  uint32_t ft;
  const char *q = NULL;
  if (gguf_get_u32(f, "general.file_type", &ft) == 0 && (q = registry_quant_from_file_type(ft)))
    snprintf(h->quant_ft, sizeof h->quant_ft, "%s", q);
  if ((q = dominant_type(f))) snprintf(h->quant_dom, sizeof h->quant_dom, "%s", q);
  gguf_close(f);
  err_clear();
  return 0;
}

static int header_copy(reg_header *dst, const reg_header *src) {
  *dst = *src;
  dst->error = str_dup(src->error);
  return src->error && !dst->error ? ERR_NOMEM : 0;
}

/* The header facts of path (with its stat), from the cache or the file. */
static int header_get(registry *r, const char *path, uint64_t size, int64_t mtime_ns, reg_header *out) {
  for (size_t i = 0; i < r->n_cache; i++) {
    reg_cache_row *row = &r->cache[i];
    if (row->size == size && row->mtime_ns == mtime_ns && strcmp(row->path, path) == 0) {
      row->seen = true;
      pthread_mutex_lock(&r->lock);
      r->stats.n_cached++;
      pthread_mutex_unlock(&r->lock);
      return header_copy(out, &row->h);
    }
  }
  int rc = header_read(path, out);
  if (rc) return rc;
  pthread_mutex_lock(&r->lock);
  r->stats.n_opened++;
  pthread_mutex_unlock(&r->lock);
  reg_cache_row *nc = realloc(r->cache, (r->n_cache + 1) * sizeof *nc);
  if (!nc) return 0; /* not cached; the answer is still good */
  r->cache = nc;
  reg_cache_row *row = &nc[r->n_cache];
  memset(row, 0, sizeof *row);
  if (!(row->path = strdup(path)) || header_copy(&row->h, out)) {
    free(row->path);
    return 0;
  }
  row->size = size;
  row->mtime_ns = mtime_ns;
  row->seen = true;
  r->n_cache++;
  return 0;
}

static void cache_prune(registry *r) {
  size_t k = 0;
  for (size_t i = 0; i < r->n_cache; i++) {
    if (r->cache[i].seen) {
      r->cache[i].seen = false;
      r->cache[k++] = r->cache[i];
    } else {
      free(r->cache[i].path);
      header_clear(&r->cache[i].h);
    }
  }
  r->n_cache = k;
}

/* ---- scanning ----------------------------------------------------------- */

static uint64_t fnv1a64(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}

int reg_entry_set_error(registry_entry *e, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char *c = strdup(msg);
  if (!c) return ERR_NOMEM;
  free(e->error);
  e->error = c;
  e->executable = false;
  return 0;
}

/* Sum of the sizes of shards 2..count of a split file (same folder). */
static uint64_t split_rest_size(const char *path, unsigned count, size_t stem_len) {
  const char *b = strrchr(path, '/');
  size_t dir_len = b ? (size_t)(b - path) + 1 : 0;
  uint64_t total = 0;
  for (unsigned k = 2; k <= count; k++) {
    char p[4096];
    int n = snprintf(p, sizeof p, "%.*s%.*s-%05u-of-%05u.gguf", (int)dir_len, path, (int)stem_len, path + dir_len,
                     k, count);
    struct stat st;
    if (n > 0 && (size_t)n < sizeof p && stat(p, &st) == 0 && S_ISREG(st.st_mode)) total += (uint64_t)st.st_size;
  }
  return total;
}

static int scan_push(reg_scan *s, registry_source src, const char *path, const char *name, registry_entry **out) {
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 16;
    registry_entry *ni = realloc(s->items, nc * sizeof *ni);
    if (!ni) return ERR_NOMEM;
    s->items = ni;
    s->cap = nc;
  }
  registry_entry *e = &s->items[s->n];
  memset(e, 0, sizeof *e);
  e->source = src;
  if (!(e->path = strdup(path)) || (name && !(e->name = strdup(name)))) {
    entry_clear(e);
    return ERR_NOMEM;
  }
  s->n++;
  *out = e;
  return 0;
}

int reg_scan_add_error(reg_scan *s, registry_source src, const char *path, const char *name, const char *fmt, ...) {
  registry_entry *e;
  int rc = scan_push(s, src, path, name, &e);
  if (rc) return rc;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(e->digest, sizeof e->digest, "fnv1a64:%016llx",
           (unsigned long long)fnv1a64(UINT64_C(0xcbf29ce484222325), path, strlen(path) + 1));
  return reg_entry_set_error(e, "%s", msg);
}

int reg_scan_add(reg_scan *s, registry_source src, const char *path, const char *name, registry_entry **out) {
  int rc = scan_push(s, src, path, name, out);
  if (rc) return rc;
  registry_entry *e = *out;
  struct stat st;
  int64_t mtime_ns = 0;
  if (stat(path, &st) != 0) return reg_entry_set_error(e, "ERR_IO: cannot stat %s", path);
  if (!S_ISREG(st.st_mode)) return reg_entry_set_error(e, "ERR_IO: %s is not a regular file", path);
  e->size = (uint64_t)st.st_size;
  e->mtime = (int64_t)st.st_mtim.tv_sec;
  mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  h = fnv1a64(h, path, strlen(path) + 1);
  h = fnv1a64(h, &e->size, sizeof e->size);
  h = fnv1a64(h, &mtime_ns, sizeof mtime_ns);
  snprintf(e->digest, sizeof e->digest, "fnv1a64:%016llx", (unsigned long long)h);
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  unsigned idx, cnt;
  size_t stem_len;
  if (reg_split_parse(base, &idx, &cnt, &stem_len) && idx == 1) e->size += split_rest_size(path, cnt, stem_len);

  reg_header hd;
  rc = header_get(s->r, path, (uint64_t)st.st_size, mtime_ns, &hd);
  if (rc) return rc;
  snprintf(e->arch, sizeof e->arch, "%s", hd.arch);
  e->family = hd.family;
  e->caps = hd.caps;
  e->executable = hd.executable && !hd.error;
  e->context_length = hd.context_length;
  e->n_params = hd.n_params;
  e->n_params_active = hd.n_params_active;
  /* general.file_type names the recipe (Q4_K_M); the file name usually does
   * too; the dominant tensor type (Q4_K) is the last resort. */
  if (hd.quant_ft[0]) snprintf(e->quant, sizeof e->quant, "%s", hd.quant_ft);
  else if (!registry_quant_from_filename(base, e->quant, sizeof e->quant))
    snprintf(e->quant, sizeof e->quant, "%s", hd.quant_dom);
  e->error = hd.error; /* moved */
  return 0;
}

static int cmp_entries(const void *pa, const void *pb) {
  const registry_entry *a = pa, *b = pb;
  if (a->source != b->source) return (int)a->source - (int)b->source;
  return strcmp(a->name, b->name);
}

/* Makes names unique: the first (in source order, then scan order) keeps a
 * name; a later one becomes "name@source", then "name@source#2"... */
static int names_unique(registry_entry *v, size_t n) {
  for (size_t i = 1; i < n; i++) {
    bool clash = false;
    for (size_t j = 0; j < i && !clash; j++) clash = strcmp(v[j].name, v[i].name) == 0;
    if (!clash) continue;
    for (unsigned k = 1; clash; k++) {
      buf b = BUF_INIT;
      int rc = k == 1 ? buf_appendf(&b, "%s@%s", v[i].name, registry_source_name(v[i].source))
                      : buf_appendf(&b, "%s@%s#%u", v[i].name, registry_source_name(v[i].source), k);
      if (rc) return rc;
      clash = false;
      for (size_t j = 0; j < n && !clash; j++) clash = j != i && strcmp(v[j].name, b.data) == 0;
      if (!clash) {
        free(v[i].name);
        v[i].name = buf_detach(&b, NULL);
      } else {
        buf_free(&b);
      }
    }
  }
  return 0;
}

/* The directory a source is scanned in (malloc'd), or NULL when disabled. */
static char *source_dir(registry *r, registry_source src) {
  char *over = NULL;
  bool set;
  pthread_mutex_lock(&r->lock);
  set = r->dir_set[src];
  if (set) over = str_dup(r->dirs[src]);
  pthread_mutex_unlock(&r->lock);
  if (set) {
    if (over && !*over) {
      free(over);
      return NULL;
    }
    return over;
  }
  if (src == REGISTRY_SOURCE_MODELS_DIR) return NULL;
  const char *no_ext = getenv("PARLEY_NO_EXTERNAL_MODELS");
  if (no_ext && *no_ext && strcmp(no_ext, "0") != 0) return NULL;
  const char *home = getenv("HOME");
  const char *env;
  switch (src) {
  case REGISTRY_SOURCE_OLLAMA:
    if ((env = getenv("OLLAMA_MODELS")) && *env) return strdup(env);
    return home && *home ? reg_path_join(home, ".ollama/models", NULL) : NULL;
  case REGISTRY_SOURCE_LMSTUDIO: {
    if ((env = getenv("PARLEY_LMSTUDIO_MODELS")) && *env) return strdup(env);
    if (!home || !*home) return NULL;
    char *p = reg_path_join(home, ".lmstudio/models", NULL);
    if (p && reg_is_dir(p)) return p;
    free(p);
    return reg_path_join(home, ".cache/lm-studio/models", NULL);
  }
  case REGISTRY_SOURCE_HF:
    if ((env = getenv("HF_HUB_CACHE")) && *env) return strdup(env);
    if ((env = getenv("HF_HOME")) && *env) return reg_path_join(env, "hub", NULL);
    return home && *home ? reg_path_join(home, ".cache/huggingface/hub", NULL) : NULL;
  default:
    return NULL;
  }
}

int registry_refresh(registry *r) {
  if (!r) return err_set(ERR_INVALID, "registry_refresh: NULL registry");
  pthread_mutex_lock(&r->scan_lock);
  reg_scan s = {r, NULL, 0, 0};
  int rc = 0;

  /* Explicit models: copy the list, then scan without the lock. */
  reg_named *models = NULL;
  size_t n_models = 0;
  pthread_mutex_lock(&r->lock);
  for (size_t i = 0; i < r->n_models && !rc; i++) rc = named_push(&models, &n_models, r->models[i].a, r->models[i].b);
  pthread_mutex_unlock(&r->lock);
  for (size_t i = 0; i < n_models && !rc; i++) {
    registry_entry *e;
    rc = reg_scan_add(&s, REGISTRY_SOURCE_EXPLICIT, models[i].b, models[i].a, &e);
  }
  named_free(models, n_models);

  for (registry_source src = REGISTRY_SOURCE_MODELS_DIR; src < REGISTRY_SOURCE_COUNT && !rc; src++) {
    char *dir = source_dir(r, src);
    if (!dir) continue;
    switch (src) {
    case REGISTRY_SOURCE_MODELS_DIR: rc = reg_scan_models_dir(&s, dir); break;
    case REGISTRY_SOURCE_OLLAMA: rc = reg_scan_ollama(&s, dir); break;
    case REGISTRY_SOURCE_LMSTUDIO: rc = reg_scan_lmstudio(&s, dir); break;
    case REGISTRY_SOURCE_HF: rc = reg_scan_hf(&s, dir); break;
    default: break;
    }
    free(dir);
  }
  /* Every scanner names what it adds; a nameless entry is a bug there. */
  for (size_t i = 0; i < s.n && !rc; i++)
    if (!s.items[i].name && !(s.items[i].name = path_stem(s.items[i].path))) rc = ERR_NOMEM;
  if (!rc) rc = names_unique(s.items, s.n);
  registry_snapshot *snap = rc ? NULL : snapshot_new();
  if (!rc && !snap) rc = ERR_NOMEM;
  if (rc) {
    for (size_t i = 0; i < s.n; i++) entry_clear(&s.items[i]);
    free(s.items);
    for (size_t i = 0; i < r->n_cache; i++) r->cache[i].seen = true; /* keep the cache */
    cache_prune(r);
    pthread_mutex_unlock(&r->scan_lock);
    return rc;
  }
  if (s.n) qsort(s.items, s.n, sizeof *s.items, cmp_entries);
  snap->items = s.items;
  snap->n = s.n;
  cache_prune(r);
  pthread_mutex_lock(&r->lock);
  registry_snapshot *old = r->snap;
  r->snap = snap;
  r->stats.n_refresh++;
  pthread_mutex_unlock(&r->lock);
  registry_snapshot_release(old);
  pthread_mutex_unlock(&r->scan_lock);
  return 0;
}

/* ---- snapshots and lookups ---------------------------------------------- */

registry_snapshot *registry_snapshot_acquire(registry *r) {
  pthread_mutex_lock(&r->lock);
  registry_snapshot *s = r->snap;
  atomic_fetch_add(&s->refs, 1);
  pthread_mutex_unlock(&r->lock);
  return s;
}

size_t registry_snapshot_count(const registry_snapshot *s) { return s ? s->n : 0; }

const registry_entry *registry_snapshot_at(const registry_snapshot *s, size_t i) {
  return s && i < s->n ? &s->items[i] : NULL;
}

const registry_entry *registry_snapshot_find(const registry_snapshot *s, const char *name) {
  if (!s || !name) return NULL;
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->items[i].name, name) == 0) return &s->items[i];
  return NULL;
}

/* Exact, then case-insensitive (only when one entry matches that way). */
static const registry_entry *find_name(const registry_snapshot *s, const char *name) {
  const registry_entry *e = registry_snapshot_find(s, name);
  if (e) return e;
  const registry_entry *hit = NULL;
  for (size_t i = 0; i < s->n; i++)
    if (strcasecmp(s->items[i].name, name) == 0) {
      if (hit) return NULL;
      hit = &s->items[i];
    }
  return hit;
}

/* True when the last path segment of name has a ':' tag. */
static bool has_tag(const char *name) {
  const char *slash = strrchr(name, '/');
  return strchr(slash ? slash : name, ':') != NULL;
}

/* Finds a model by a request name: the rules in registry.h. Called with
 * r->lock held; the result points into r->snap. */
static const registry_entry *lookup_locked(registry *r, const char *name) {
  /* Aliases, possibly chained. */
  for (int depth = 0; depth < REG_MAX_ALIAS_DEPTH; depth++) {
    const char *next = NULL;
    for (size_t i = 0; i < r->n_aliases && !next; i++)
      if (strcasecmp(r->aliases[i].a, name) == 0) next = r->aliases[i].b;
    if (!next) break;
    name = next;
  }
  const registry_snapshot *s = r->snap;
  char norm[1024];
  if (strncasecmp(name, "huggingface.co/", 15) == 0) {
    snprintf(norm, sizeof norm, "hf.co/%s", name + 15);
    name = norm;
  } else if (strncasecmp(name, "registry.ollama.ai/library/", 27) == 0) {
    snprintf(norm, sizeof norm, "%s", name + 27);
    name = norm;
  } else if (strncasecmp(name, "registry.ollama.ai/", 19) == 0) {
    snprintf(norm, sizeof norm, "%s", name + 19);
    name = norm;
  }
  const registry_entry *e = find_name(s, name);
  if (e || has_tag(name)) return e;
  char tagged[1100];
  snprintf(tagged, sizeof tagged, "%s:latest", name);
  if ((e = find_name(s, tagged))) return e;
  if (strncasecmp(name, "hf.co/", 6) == 0) {
    /* hf.co/owner/repo without a quant: the only file, else Q4_K_M. */
    size_t n = strlen(name);
    const registry_entry *only = NULL, *q4 = NULL;
    size_t n_hits = 0;
    for (size_t i = 0; i < s->n; i++) {
      const registry_entry *c = &s->items[i];
      if (strncasecmp(c->name, name, n) != 0 || c->name[n] != ':') continue;
      n_hits++;
      only = c;
      if (strcasecmp(c->name + n + 1, "Q4_K_M") == 0) q4 = c;
    }
    if (n_hits == 1) return only;
    return q4;
  }
  return NULL;
}

static int copy_out(const registry_entry *e, registry_entry **out) {
  *out = registry_entry_dup(e);
  return *out ? 0 : ERR_NOMEM;
}

int registry_lookup(registry *r, const char *name, registry_entry **out) {
  if (!out) return err_set(ERR_INVALID, "registry_lookup: NULL out");
  *out = NULL;
  if (!r || !name || !*name) return err_set(ERR_INVALID, "model: empty name");
  pthread_mutex_lock(&r->lock);
  const registry_entry *e = lookup_locked(r, name);
  int rc = e ? copy_out(e, out) : 0;
  size_t n = r->snap->n;
  pthread_mutex_unlock(&r->lock);
  if (!e) return err_set(ERR_NOT_FOUND, "model '%s' not found (%zu models known; see parley list)", name, n);
  return rc;
}

int registry_lookup_or_default(registry *r, const char *name, registry_entry **out) {
  if (!out) return err_set(ERR_INVALID, "registry_lookup_or_default: NULL out");
  *out = NULL;
  if (!r) return err_set(ERR_INVALID, "registry_lookup_or_default: NULL registry");
  pthread_mutex_lock(&r->lock);
  const registry_entry *e = name && *name ? lookup_locked(r, name) : NULL;
  if (!e && r->default_name) e = lookup_locked(r, r->default_name);
  if (!e && !r->default_name && r->snap->n == 1) e = &r->snap->items[0];
  int rc = e ? copy_out(e, out) : 0;
  char *def = str_dup(r->default_name);
  size_t n = r->snap->n;
  pthread_mutex_unlock(&r->lock);
  if (!e) {
    if (def) rc = err_set(ERR_NOT_FOUND, "default model '%s' not found", def);
    else if (name && *name) rc = err_set(ERR_NOT_FOUND, "model '%s' not found and no default model is set", name);
    else rc = err_set(ERR_NOT_FOUND, "no model named and no default model is set (--default-model), with %zu models "
                                     "available",
                      n);
  }
  free(def);
  return rc;
}

int registry_resolve(registry *r, const char *name, char *out, size_t cap) {
  registry_entry *e = NULL;
  int rc = registry_lookup(r, name, &e);
  if (rc) return rc;
  if (strlen(e->name) >= cap) rc = err_set(ERR_TOO_LARGE, "model name '%s' does not fit", e->name);
  else memcpy(out, e->name, strlen(e->name) + 1);
  registry_entry_free(e);
  return rc;
}
