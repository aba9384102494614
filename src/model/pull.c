/*
 * pull.c - the puller: download jobs, their worker threads, their rows in
 * the store, and removing what parley pulled. Start reading at pull_start()
 * and job_main().
 *
 * One job pulls one model:
 *   queued -> (a free slot of PULL_MAX_ACTIVE) -> resolve the name into a
 *   plan (pull_source.c) -> downloading (each file into <file>.partial,
 *   resumed, pull_http.c) -> verifying -> sidecar written, .partial files
 *   renamed into place (the model's first file last) -> completed, registry
 *   refreshed. Any error -> failed with the reason; pull_cancel -> cancelled.
 *   The .partial files stay after a failure or a cancel, so a later pull of
 *   the same name resumes them.
 *
 * Threads: p->lock guards the job list and every job's fields; p->cond is
 * broadcast whenever a job changes (pull_wait) or a download slot frees.
 * Workers never hold p->lock across network or disk access. A job is
 * freed only by puller_free (after its thread is joined), so pointers to
 * jobs stay valid for the puller's life.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <limits.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "gguf/gguf.h"
#include "model/pull_int.h"

typedef struct pjob {
  char id[PULL_ID_CAP];
  char *name;            /* as requested */
  char *opt_file, *opt_quant;
  char *model;           /* registry name, once resolved */
  pull_state state;
  int err_code;
  char *error;
  int64_t created_at, started_at, completed_at;
  pull_file_status *files;
  size_t n_files, current;
  /* rate: bytes at the start of the current window */
  uint64_t rate_t0;
  int64_t rate_b0;
  double rate;
  int64_t last_store_s;
  atomic_bool cancel;
  pthread_t thread;
  bool has_thread;
  struct puller *p;
} pjob;

struct puller {
  char *models_dir;
  char *hf, *ollama, *hf_token;
  store *st;
  registry *reg;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pjob **jobs;
  size_t n_jobs, cap;
  int n_active;
  bool stopping;
};

/* ---- helpers ------------------------------------------------------------------ */

static char *trim_slash(const char *s) {
  char *d = str_dup(s);
  if (!d) return NULL;
  size_t n = strlen(d);
  while (n > 1 && d[n - 1] == '/') d[--n] = 0;
  return d;
}

/* mkdir -p. */
static int mkdirs(const char *path) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return err_set(ERR_TOO_LARGE, "path too long: %s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return err_set(ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    *p = '/';
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return err_set(ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
  return 0;
}

static void fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

static char *job_payload(const pjob *j) {
  json_t *o = json_pack("{s:s, s:s?, s:s?, s:s?}", "name", j->name, "file", j->opt_file, "quant", j->opt_quant,
                        "model", j->model);
  char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return t;
}

/* Writes the job's row (caller holds p->lock; the store has its own). */
static void job_store_locked(pjob *j) {
  if (!j->p->st) return;
  int64_t done = 0, total = 0;
  for (size_t i = 0; i < j->n_files; i++) {
    done += j->files[i].done;
    total += j->files[i].total > 0 ? j->files[i].total : 0;
  }
  char *payload = job_payload(j);
  store_job row = {.id = j->id,
                   .kind = PULL_JOB_KIND,
                   .name = j->name,
                   .state = (char *)pull_state_name(j->state),
                   .bytes_done = done,
                   .bytes_total = total,
                   .error = j->error,
                   .created_at = j->created_at,
                   .updated_at = time_wall_s(),
                   .payload = payload};
  if (store_job_upsert(j->p->st, &row)) LOG_WARN("pull", "job %s: cannot store progress: %s", j->id, err_detail());
  free(payload);
  j->last_store_s = time_wall_s();
}

static void job_set_state(pjob *j, pull_state s, int code, const char *msg) {
  puller *p = j->p;
  pthread_mutex_lock(&p->lock);
  j->state = s;
  if (code || msg) {
    j->err_code = code;
    free(j->error);
    j->error = msg ? str_dup(msg) : NULL;
  }
  if (s == PULL_DOWNLOADING && !j->started_at) j->started_at = time_wall_s();
  if (pull_state_is_final(s)) {
    j->completed_at = time_wall_s();
    j->rate = 0;
  }
  /* A job stopped by puller_free keeps its stored state: it resumes. */
  if (!(s == PULL_CANCELLED && p->stopping)) job_store_locked(j);
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
}

static void job_free(pjob *j) {
  if (!j) return;
  free(j->name);
  free(j->opt_file);
  free(j->opt_quant);
  free(j->model);
  free(j->error);
  for (size_t i = 0; i < j->n_files; i++) {
    free(j->files[i].file);
    free(j->files[i].digest);
  }
  free(j->files);
  free(j);
}

/* ---- the worker ------------------------------------------------------------------ */

typedef struct dl_ctx {
  pjob *j;
  size_t file;
} dl_ctx;

/* pull_dl progress: records bytes, updates the rate, stores once a second. */
static bool on_progress(void *ctx, int64_t done, int64_t total) {
  dl_ctx *c = ctx;
  pjob *j = c->j;
  puller *p = j->p;
  pthread_mutex_lock(&p->lock);
  j->files[c->file].done = done;
  if (total > 0) j->files[c->file].total = total;
  int64_t all = 0;
  for (size_t i = 0; i < j->n_files; i++) all += j->files[i].done;
  uint64_t now = time_mono_ns();
  if (!j->rate_t0) {
    j->rate_t0 = now;
    j->rate_b0 = all;
  } else if (now - j->rate_t0 >= 1000000000ull) {
    j->rate = (double)(all - j->rate_b0) * 1e9 / (double)(now - j->rate_t0);
    j->rate_t0 = now;
    j->rate_b0 = all;
  }
  if (time_wall_s() != j->last_store_s) job_store_locked(j);
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
  return atomic_load(&j->cancel);
}

static int job_fail(pjob *j, int rc) {
  if (rc == ERR_CANCELLED || atomic_load(&j->cancel)) {
    job_set_state(j, PULL_CANCELLED, ERR_CANCELLED, "cancelled; pull again to resume");
    return rc;
  }
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", err_detail());
  LOG_WARN("pull", "job %s (%s) failed: %s", j->id, j->name, msg);
  job_set_state(j, PULL_FAILED, rc, msg);
  return rc;
}

/* Takes a download slot; false when cancelled while queued. */
static bool acquire_slot(pjob *j) {
  puller *p = j->p;
  pthread_mutex_lock(&p->lock);
  while (p->n_active >= PULL_MAX_ACTIVE && !atomic_load(&j->cancel)) pthread_cond_wait(&p->cond, &p->lock);
  bool ok = !atomic_load(&j->cancel);
  if (ok) p->n_active++;
  pthread_mutex_unlock(&p->lock);
  return ok;
}

static void release_slot(puller *p) {
  pthread_mutex_lock(&p->lock);
  p->n_active--;
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
}

/* Publishes the plan's files in the job (sizes known before the download). */
static int job_take_plan(pjob *j, const pull_plan *pl) {
  pull_file_status *f = calloc(pl->n_files, sizeof *f);
  char *model = str_dup(pl->name);
  if (!f || !model) {
    free(f);
    free(model);
    return ERR_NOMEM;
  }
  for (size_t i = 0; i < pl->n_files; i++) {
    f[i].file = str_dup(pl->files[i].dest);
    f[i].digest = pl->files[i].digest ? str_dup(pl->files[i].digest) : NULL;
    f[i].total = pl->files[i].size;
  }
  puller *p = j->p;
  pthread_mutex_lock(&p->lock);
  free(j->model);
  j->model = model;
  for (size_t i = 0; i < j->n_files; i++) {
    free(j->files[i].file);
    free(j->files[i].digest);
  }
  free(j->files);
  j->files = f;
  j->n_files = pl->n_files;
  j->current = pl->n_files;
  pthread_mutex_unlock(&p->lock);
  return 0;
}

/* Downloads every file of the plan into dir as .partial (or finds it
 * already in place), then writes the sidecar and renames. */
static int job_run(pjob *j, const pull_plan *pl, const char *dir) {
  puller *p = j->p;
  bool in_place[PULL_MAX_FILES] = {0};
  for (size_t i = 0; i < pl->n_files; i++) {
    const pull_pfile *f = &pl->files[i];
    buf fin = BUF_INIT, part = BUF_INIT;
    int rc = buf_appendf(&fin, "%s/%s", dir, f->dest) || buf_appendf(&part, "%s/%s.partial", dir, f->dest) ? ERR_NOMEM : 0;
    /* The same file is already in place (a re-pull of an unchanged model). */
    char dg[80];
    int64_t sz = -1;
    struct stat st;
    if (!rc && stat(fin.data, &st) == 0 && pull_sidecar_file(dir, f->dest, dg, sizeof dg, &sz) &&
        sz == (int64_t)st.st_size && (f->size < 0 || f->size == sz) &&
        ((f->digest && strcmp(dg, f->digest) == 0) || (!f->digest && !dg[0]))) {
      in_place[i] = true;
      pthread_mutex_lock(&p->lock);
      j->files[i].done = j->files[i].total = sz;
      pthread_mutex_unlock(&p->lock);
    }
    if (!rc && !in_place[i]) {
      pthread_mutex_lock(&p->lock);
      j->current = i;
      pthread_mutex_unlock(&p->lock);
      dl_ctx c = {j, i};
      pull_dl d = {.url = f->url,
                   .partial = part.data,
                   .sha256 = f->digest ? f->digest + 7 : NULL,
                   .size = f->size,
                   .bearer = pl->src == PULL_SOURCE_HF ? p->hf_token : NULL,
                   .progress = on_progress,
                   .ctx = &c};
      rc = pull_download(&d);
      if (!rc && d.resumed) LOG_INFO("pull", "%s: resumed %s at byte %lld", pl->name, f->dest, (long long)d.resumed_from);
      if (rc) rc = pull_err_prefix(rc, "%s: %s", pl->name, f->dest);
    }
    buf_free(&fin);
    buf_free(&part);
    if (rc) return rc;
    if (atomic_load(&j->cancel)) return err_set(ERR_CANCELLED, "cancelled");
  }
  job_set_state(j, PULL_VERIFYING, 0, NULL);
  /* Every file is complete and matches its digest; the model file must also
   * be a GGUF file whose tensors lie inside it (a source can publish a
   * corrupt or truncated file under a correct digest). */
  for (size_t i = 0; i < pl->n_files; i++) {
    if (pl->files[i].kind != PULL_LAYER_MODEL && pl->files[i].kind != PULL_LAYER_PROJECTOR) continue;
    if (i > 0 && pl->files[i].kind == PULL_LAYER_MODEL) continue; /* later shards hold no header of their own */
    buf path = BUF_INIT;
    if (buf_appendf(&path, "%s/%s%s", dir, pl->files[i].dest, in_place[i] ? "" : ".partial")) return ERR_NOMEM;
    gguf_file *g = NULL;
    int grc = gguf_open(path.data, &g);
    gguf_close(g);
    if (grc) {
      grc = pull_err_prefix(ERR_CORRUPT, "%s: %s is not a usable GGUF file", pl->name, pl->files[i].dest);
      unlink(path.data); /* complete and verified, yet corrupt: never resumable */
    }
    buf_free(&path);
    if (grc) return grc;
  }
  /* Write the sidecar, then rename, the model's first file last. */
  int rc = pull_sidecar_write(dir, pl, time_wall_s());
  if (rc) return pull_err_prefix(rc, "%s", pl->name);
  for (size_t k = pl->n_files; k-- > 0 && !rc;) {
    if (in_place[k]) continue;
    buf fin = BUF_INIT, part = BUF_INIT;
    if (buf_appendf(&fin, "%s/%s", dir, pl->files[k].dest) || buf_appendf(&part, "%s/%s.partial", dir, pl->files[k].dest))
      rc = ERR_NOMEM;
    else if (rename(part.data, fin.data) != 0)
      rc = err_set(ERR_IO, "%s: renaming %s: %s", pl->name, part.data, strerror(errno));
    buf_free(&fin);
    buf_free(&part);
  }
  fsync_dir(dir);
  return rc;
}

/* pull_ref_parse with the options: OWNER/REPO with a quant (and no tag)
 * names a Hugging Face repository, as it does with a file pattern. */
static int parse_name(const char *name, const char *file, const char *quant, pull_ref *ref) {
  int rc = pull_ref_parse(name, file, ref);
  if (rc || ref->src == PULL_SOURCE_HF || !quant || !*quant) return rc;
  const char *sl = strchr(name, '/');
  if (sl && !strchr(sl + 1, '/') && !strchr(name, ':')) {
    char hf[PULL_NAME_CAP];
    snprintf(hf, sizeof hf, "hf.co/%s", name);
    return pull_ref_parse(hf, NULL, ref);
  }
  return err_set(ERR_INVALID, "quantization '%s' applies to Hugging Face names only; '%s' is an Ollama name", quant,
                 name);
}

static bool job_cancelled(void *ctx) { return atomic_load(&((pjob *)ctx)->cancel); }

static void *job_main(void *arg) {
  pjob *j = arg;
  puller *p = j->p;
  if (!acquire_slot(j)) {
    job_set_state(j, PULL_CANCELLED, ERR_CANCELLED, "cancelled while queued");
    return NULL;
  }
  pull_ref ref;
  pull_plan pl;
  memset(&pl, 0, sizeof pl);
  pull_endpoints ep = {.hf = p->hf, .ollama = p->ollama, .hf_token = p->hf_token, .cancelled = job_cancelled,
                       .cancel_ctx = j};
  job_set_state(j, PULL_DOWNLOADING, 0, NULL);
  int rc = parse_name(j->name, j->opt_file, j->opt_quant, &ref);
  if (!rc) rc = pull_plan_resolve(&ep, &ref, j->opt_quant, j->opt_file, &pl);
  if (!rc) rc = job_take_plan(j, &pl);
  buf dir = BUF_INIT;
  if (!rc && buf_appendf(&dir, "%s/%s", p->models_dir, pl.dir)) rc = ERR_NOMEM;
  if (!rc) rc = mkdirs(dir.data);
  if (!rc) {
    pthread_mutex_lock(&p->lock);
    job_store_locked(j);
    pthread_mutex_unlock(&p->lock);
    rc = job_run(j, &pl, dir.data);
  }
  release_slot(p);
  if (rc) {
    job_fail(j, rc);
  } else {
    if (p->reg && registry_refresh(p->reg)) LOG_WARN("pull", "registry refresh: %s", err_detail());
    LOG_INFO("pull", "pulled %s into %s", pl.name, dir.data);
    pthread_mutex_lock(&p->lock);
    j->current = j->n_files;
    pthread_mutex_unlock(&p->lock);
    job_set_state(j, PULL_COMPLETED, 0, NULL);
  }
  buf_free(&dir);
  pull_plan_free(&pl);
  return NULL;
}

/* ---- the public API -------------------------------------------------------------- */

int puller_new(const pull_config *cfg, puller **out) {
  *out = NULL;
  if (!cfg || !cfg->models_dir || !*cfg->models_dir) return err_set(ERR_INVALID, "puller: no models directory");
  puller *p = calloc(1, sizeof *p);
  if (!p) return ERR_NOMEM;
  const char *hf = cfg->hf_endpoint ? cfg->hf_endpoint : getenv("HF_ENDPOINT");
  const char *ol = cfg->ollama_registry ? cfg->ollama_registry : getenv("PARLEY_OLLAMA_REGISTRY");
  const char *tok = getenv("HF_TOKEN");
  p->models_dir = trim_slash(cfg->models_dir);
  p->hf = trim_slash(hf && *hf ? hf : "https://huggingface.co");
  p->ollama = trim_slash(ol && *ol ? ol : "https://registry.ollama.ai");
  p->hf_token = tok && *tok ? str_dup(tok) : NULL;
  p->st = cfg->st;
  p->reg = cfg->reg;
  pthread_mutex_init(&p->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cond, &ca);
  pthread_condattr_destroy(&ca);
  if (!p->models_dir || !p->hf || !p->ollama) {
    puller_free(p);
    return ERR_NOMEM;
  }
  *out = p;
  return 0;
}

void puller_free(puller *p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stopping = true;
  for (size_t i = 0; i < p->n_jobs; i++) atomic_store(&p->jobs[i]->cancel, true);
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
  for (size_t i = 0; i < p->n_jobs; i++)
    if (p->jobs[i]->has_thread) pthread_join(p->jobs[i]->thread, NULL);
  for (size_t i = 0; i < p->n_jobs; i++) job_free(p->jobs[i]);
  free(p->jobs);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->cond);
  free(p->models_dir);
  free(p->hf);
  free(p->ollama);
  free(p->hf_token);
  free(p);
}

static pjob *find_locked(puller *p, const char *id) {
  for (size_t i = 0; i < p->n_jobs; i++)
    if (strcmp(p->jobs[i]->id, id) == 0) return p->jobs[i];
  return NULL;
}

/* Starts a job with a given id (new or resumed); caller holds p->lock. */
static int start_locked(puller *p, const char *id, const char *name, const char *file, const char *quant,
                        int64_t created_at) {
  if (p->stopping) return err_set(ERR_UNAVAILABLE, "the puller is shutting down");
  if (p->n_jobs == p->cap) {
    size_t nc = p->cap ? p->cap * 2 : 8;
    pjob **nv = realloc(p->jobs, nc * sizeof *nv);
    if (!nv) return ERR_NOMEM;
    p->jobs = nv;
    p->cap = nc;
  }
  pjob *j = calloc(1, sizeof *j);
  if (!j) return ERR_NOMEM;
  snprintf(j->id, sizeof j->id, "%s", id);
  j->p = p;
  j->name = str_dup(name);
  j->opt_file = file && *file ? str_dup(file) : NULL;
  j->opt_quant = quant && *quant ? str_dup(quant) : NULL;
  j->created_at = created_at ? created_at : time_wall_s();
  j->state = PULL_QUEUED;
  atomic_init(&j->cancel, false);
  if (!j->name || (file && *file && !j->opt_file) || (quant && *quant && !j->opt_quant)) {
    job_free(j);
    return ERR_NOMEM;
  }
  job_store_locked(j);
  if (pthread_create(&j->thread, NULL, job_main, j) != 0) {
    job_free(j);
    return err_set(ERR_INTERNAL, "cannot start a download thread");
  }
  j->has_thread = true;
  p->jobs[p->n_jobs++] = j;
  return 0;
}

static bool same_opt(const char *a, const char *b) {
  return (!a || !*a) ? (!b || !*b) : (b && strcmp(a, b) == 0);
}

/* The stored unfinished download job of this name, if any (its id into id). */
static bool stored_unfinished(puller *p, const char *name, char *id, size_t cap, int64_t *created) {
  if (!p->st) return false;
  store_job_list l = {0};
  if (store_job_list_all(p->st, PULL_JOB_KIND, &l)) return false;
  bool found = false;
  for (size_t i = l.n_items; i-- > 0 && !found;) {
    pull_state s;
    if (!l.items[i].name || strcmp(l.items[i].name, name) != 0) continue;
    if (!pull_state_parse(l.items[i].state, &s) || pull_state_is_final(s)) continue;
    snprintf(id, cap, "%s", l.items[i].id);
    *created = l.items[i].created_at;
    found = true;
  }
  store_job_list_free(&l);
  return found;
}

int pull_start(puller *p, const char *name, const pull_opts *opts, char *id, size_t cap, bool *already) {
  if (already) *already = false;
  if (cap < PULL_ID_CAP) return err_set(ERR_TOO_LARGE, "pull_start: id buffer too small");
  const char *file = opts ? opts->file : NULL, *quant = opts ? opts->quant : NULL;
  pull_ref ref;
  int rc = parse_name(name, file, quant, &ref);
  if (rc) return rc;
  if (already && p->reg && ref.name[0]) {
    registry_entry *e = NULL;
    if (registry_lookup(p->reg, ref.name, &e) == 0 && e->pulled && !e->error) *already = true;
    registry_entry_free(e);
  }
  pthread_mutex_lock(&p->lock);
  for (size_t i = 0; i < p->n_jobs; i++) {
    pjob *j = p->jobs[i];
    if (!pull_state_is_final(j->state) && strcmp(j->name, name) == 0 && same_opt(j->opt_file, file) &&
        same_opt(j->opt_quant, quant)) {
      snprintf(id, cap, "%s", j->id);
      pthread_mutex_unlock(&p->lock);
      return 0;
    }
  }
  int64_t created = 0;
  char newid[PULL_ID_CAP];
  if (!stored_unfinished(p, name, newid, sizeof newid, &created) || find_locked(p, newid))
    rc = id_make(newid, sizeof newid, "job_", 6);
  if (!rc) rc = start_locked(p, newid, name, file, quant, created);
  if (!rc) snprintf(id, cap, "%s", newid);
  pthread_mutex_unlock(&p->lock);
  return rc;
}

int puller_resume_interrupted(puller *p, size_t *n_started) {
  if (n_started) *n_started = 0;
  if (!p->st) return 0;
  store_job_list l = {0};
  int rc = store_job_list_all(p->st, PULL_JOB_KIND, &l);
  if (rc) return rc;
  pthread_mutex_lock(&p->lock);
  for (size_t i = 0; i < l.n_items && !rc; i++) {
    store_job *r = &l.items[i];
    pull_state s;
    if (!pull_state_parse(r->state, &s) || pull_state_is_final(s) || find_locked(p, r->id) || !r->name) continue;
    json_t *pl = r->payload ? json_loads(r->payload, 0, NULL) : NULL;
    const char *file = json_string_value(json_object_get(pl, "file"));
    const char *quant = json_string_value(json_object_get(pl, "quant"));
    rc = start_locked(p, r->id, r->name, file, quant, r->created_at);
    json_decref(pl);
    if (!rc && n_started) (*n_started)++;
    if (!rc) LOG_INFO("pull", "resuming download job %s (%s)", r->id, r->name);
  }
  pthread_mutex_unlock(&p->lock);
  store_job_list_free(&l);
  return rc;
}

static int copy_status_locked(const pjob *j, pull_status *o) {
  memset(o, 0, sizeof *o);
  snprintf(o->id, sizeof o->id, "%s", j->id);
  o->name = str_dup(j->name);
  o->model = j->model ? str_dup(j->model) : NULL;
  o->state = j->state;
  o->rate = pull_state_is_final(j->state) ? 0 : j->rate;
  o->err_code = j->err_code;
  o->error = j->error ? str_dup(j->error) : NULL;
  o->created_at = j->created_at;
  o->started_at = j->started_at;
  o->completed_at = j->completed_at;
  o->current = j->current;
  if (j->n_files && !(o->files = calloc(j->n_files, sizeof *o->files))) {
    pull_status_free(o);
    return ERR_NOMEM;
  }
  o->n_files = j->n_files;
  for (size_t i = 0; i < j->n_files; i++) {
    o->files[i].file = str_dup(j->files[i].file);
    o->files[i].digest = j->files[i].digest ? str_dup(j->files[i].digest) : NULL;
    o->files[i].done = j->files[i].done;
    o->files[i].total = j->files[i].total;
    o->bytes_done += j->files[i].done;
    o->bytes_total += j->files[i].total > 0 ? j->files[i].total : 0;
  }
  return o->name ? 0 : ERR_NOMEM;
}

static int status_from_row(const store_job *r, pull_status *o) {
  memset(o, 0, sizeof *o);
  snprintf(o->id, sizeof o->id, "%s", r->id);
  o->name = str_dup(r->name ? r->name : "");
  json_t *pl = r->payload ? json_loads(r->payload, 0, NULL) : NULL;
  const char *model = json_string_value(json_object_get(pl, "model"));
  o->model = model ? str_dup(model) : NULL;
  json_decref(pl);
  if (!pull_state_parse(r->state, &o->state)) o->state = PULL_FAILED;
  /* An unfinished row no process is working on was interrupted. */
  if (!pull_state_is_final(o->state)) {
    o->state = PULL_FAILED;
    o->err_code = ERR_UNAVAILABLE;
    o->error = str_dup("interrupted (parley stopped); pull again to resume");
  } else {
    o->error = r->error ? str_dup(r->error) : NULL;
    if (o->state == PULL_FAILED) o->err_code = ERR_INTERNAL;
  }
  o->bytes_done = r->bytes_done;
  o->bytes_total = r->bytes_total;
  o->created_at = r->created_at;
  o->completed_at = pull_state_is_final(o->state) ? r->updated_at : 0;
  return o->name ? 0 : ERR_NOMEM;
}

void pull_status_free(pull_status *s) {
  if (!s) return;
  free(s->name);
  free(s->model);
  free(s->error);
  for (size_t i = 0; i < s->n_files; i++) {
    free(s->files[i].file);
    free(s->files[i].digest);
  }
  free(s->files);
  memset(s, 0, sizeof *s);
}

int pull_get(puller *p, const char *id, pull_status *out) {
  memset(out, 0, sizeof *out);
  if (!id || !*id) return err_set(ERR_INVALID, "job id is empty");
  pthread_mutex_lock(&p->lock);
  pjob *j = find_locked(p, id);
  int rc = j ? copy_status_locked(j, out) : ERR_NOT_FOUND;
  pthread_mutex_unlock(&p->lock);
  if (rc != ERR_NOT_FOUND) return rc;
  if (p->st) {
    store_job r = {0};
    if (store_job_get(p->st, id, &r) == 0 && r.kind && strcmp(r.kind, PULL_JOB_KIND) == 0) {
      rc = status_from_row(&r, out);
      store_job_free(&r);
      return rc;
    }
    store_job_free(&r);
  }
  return err_set(ERR_NOT_FOUND, "no download job '%s'", id);
}

void pull_list_free(pull_status *v, size_t n) {
  for (size_t i = 0; i < n; i++) pull_status_free(&v[i]);
  free(v);
}

/* Oldest first; ids break ties so the order is total. */
static int status_cmp(const void *a, const void *b) {
  const pull_status *x = a, *y = b;
  if (x->created_at != y->created_at) return x->created_at < y->created_at ? -1 : 1;
  return strcmp(x->id, y->id);
}

int pull_list(puller *p, pull_status **out, size_t *n) {
  *out = NULL;
  *n = 0;
  store_job_list l = {0};
  if (p->st && store_job_list_all(p->st, PULL_JOB_KIND, &l)) return ERR_IO;
  pthread_mutex_lock(&p->lock);
  size_t cap = l.n_items + p->n_jobs;
  pull_status *v = cap ? calloc(cap, sizeof *v) : NULL;
  int rc = cap && !v ? ERR_NOMEM : 0;
  size_t k = 0;
  for (size_t i = 0; i < l.n_items && !rc; i++)
    if (!find_locked(p, l.items[i].id)) rc = status_from_row(&l.items[i], &v[k++]);
  for (size_t i = 0; i < p->n_jobs && !rc; i++) rc = copy_status_locked(p->jobs[i], &v[k++]);
  pthread_mutex_unlock(&p->lock);
  store_job_list_free(&l);
  if (rc) {
    pull_list_free(v, k);
    return rc;
  }
  if (k > 1) qsort(v, k, sizeof *v, status_cmp);
  *out = v;
  *n = k;
  return 0;
}

int pull_wait(puller *p, const char *id, int timeout_ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += timeout_ms / 1000;
  ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&p->lock);
  pjob *j = find_locked(p, id);
  if (j && !pull_state_is_final(j->state)) pthread_cond_timedwait(&p->cond, &p->lock, &ts);
  pthread_mutex_unlock(&p->lock);
  return j ? 0 : err_set(ERR_NOT_FOUND, "no download job '%s'", id);
}

int pull_cancel(puller *p, const char *id) {
  pthread_mutex_lock(&p->lock);
  pjob *j = find_locked(p, id);
  int rc = 0;
  if (!j) rc = err_set(ERR_NOT_FOUND, "no running download job '%s'", id);
  else if (pull_state_is_final(j->state))
    rc = err_set(ERR_CONFLICT, "download job '%s' already ended (%s)", id, pull_state_name(j->state));
  else atomic_store(&j->cancel, true);
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
  return rc;
}

/* ---- removal ------------------------------------------------------------------ */

/* Deletes the files a sidecar lists (and their .partial), the sidecar, and
 * the folder when it is then empty. */
static int remove_folder(const char *dir) {
  char **files = NULL;
  size_t n = 0;
  char *name = pull_sidecar_read(dir, &files, &n);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    buf a = BUF_INIT;
    if (!buf_appendf(&a, "%s/%s", dir, files[i])) {
      if (unlink(a.data) != 0 && errno != ENOENT) rc = err_set(ERR_IO, "cannot delete %s: %s", a.data, strerror(errno));
      buf_append_str(&a, ".partial");
      unlink(a.data);
    }
    buf_free(&a);
    free(files[i]);
  }
  free(files);
  free(name);
  if (!rc) {
    buf s = BUF_INIT;
    if (!buf_appendf(&s, "%s/%s", dir, REGISTRY_PULL_MANIFEST) && unlink(s.data) != 0 && errno != ENOENT)
      rc = err_set(ERR_IO, "cannot delete %s: %s", s.data, strerror(errno));
    buf_free(&s);
    rmdir(dir); /* only when empty: files someone else put there stay */
  }
  return rc;
}

/* The folder of a registry path, checked to be directly under models_dir. */
static char *pulled_folder(const puller *p, const char *path) {
  char *d = str_dup(path);
  if (!d) return NULL;
  char *sl = strrchr(d, '/');
  if (!sl) {
    free(d);
    return NULL;
  }
  *sl = 0;
  char rd[PATH_MAX], rm[PATH_MAX];
  bool ok = realpath(d, rd) && realpath(p->models_dir, rm);
  const char *parent = ok ? strrchr(rd, '/') : NULL;
  ok = ok && parent && (size_t)(parent - rd) == strlen(rm) && strncmp(rd, rm, strlen(rm)) == 0;
  if (!ok) {
    free(d);
    return NULL;
  }
  return d;
}

int pull_remove(puller *p, const char *name, char *removed, size_t cap) {
  if (removed && cap) removed[0] = 0;
  if (!name || !*name) return err_set(ERR_INVALID, "model name is empty");
  registry_entry *e = NULL;
  int rc = p->reg ? registry_lookup(p->reg, name, &e) : err_set(ERR_NOT_FOUND, "no registry");
  char *dir = NULL;
  char canon[PULL_NAME_CAP];
  if (rc == ERR_NOT_FOUND) {
    /* Not listed: perhaps an incomplete pull (sidecar, no model file). */
    pull_ref ref;
    char dn[PULL_NAME_CAP];
    buf d = BUF_INIT;
    if (pull_ref_parse(name, NULL, &ref) == 0 && ref.name[0] && pull_dir_name(ref.name, dn, sizeof dn) == 0 &&
        !buf_appendf(&d, "%s/%s", p->models_dir, dn)) {
      char **files = NULL;
      size_t n = 0;
      char *sc = pull_sidecar_read(d.data, &files, &n);
      for (size_t i = 0; i < n; i++) free(files[i]);
      free(files);
      if (sc && strcmp(sc, ref.name) == 0) {
        dir = buf_detach(&d, NULL);
        snprintf(canon, sizeof canon, "%s", sc);
      }
      free(sc);
    }
    buf_free(&d);
    if (!dir) return err_set(ERR_NOT_FOUND, "model '%s' not found", name);
    rc = 0;
  } else if (rc) {
    return rc;
  } else {
    snprintf(canon, sizeof canon, "%s", e->name);
    if (!e->pulled) {
      rc = err_set(ERR_FORBIDDEN,
                   "model '%s' was not downloaded by parley (source %s, %s); parley removes only models it pulled",
                   e->name, registry_source_name(e->source), e->path);
      registry_entry_free(e);
      return rc;
    }
    dir = pulled_folder(p, e->path);
    registry_entry_free(e);
    if (!dir) return err_set(ERR_FORBIDDEN, "model '%s' is not in a folder of the models directory %s", canon, p->models_dir);
  }
  pthread_mutex_lock(&p->lock);
  for (size_t i = 0; i < p->n_jobs && !rc; i++) {
    pjob *j = p->jobs[i];
    if (!pull_state_is_final(j->state) && j->model && strcmp(j->model, canon) == 0)
      rc = err_set(ERR_CONFLICT, "model '%s' is being downloaded (job %s); cancel the job first", canon, j->id);
  }
  pthread_mutex_unlock(&p->lock);
  if (!rc) rc = remove_folder(dir);
  free(dir);
  if (!rc && p->reg && registry_refresh(p->reg)) LOG_WARN("pull", "registry refresh: %s", err_detail());
  if (!rc && removed) snprintf(removed, cap, "%s", canon);
  if (!rc) LOG_INFO("pull", "removed %s", canon);
  return rc;
}
