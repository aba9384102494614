/*
 * manager.c - loads models on first use or on demand, unloads them after an
 * idle keep-alive or to make room within the memory budget.
 *
 * State: a linked list of slots, one per instance id, each LOADING, READY,
 * FAILED or UNLOADING, under one mutex (mg->lock). Two condition variables
 * go with it: `cond` wakes callers waiting for a LOADING or UNLOADING slot,
 * `reap_cond` wakes the reaper thread (a release, a keep-alive change, a new
 * model, shutdown). The slow work - loading (model_load, tok_load, template
 * compile, engine_new) and unloading (engine_free, model_free) - runs
 * without the lock, by the thread that moved the slot into LOADING or
 * UNLOADING.
 *
 * Invariants:
 *   - a READY slot's model does not change; it goes away only through
 *     UNLOADING, which only a slot whose model has no references enters;
 *   - a slot is freed only by the thread that moved it to UNLOADING (or by
 *     manager_free); a thread that waited re-finds slots by key, except a
 *     LOADING slot it created itself, which nobody else frees;
 *   - the budget counts the bytes of LOADING (reserved) and READY slots; an
 *     UNLOADING slot's memory is on its way out and no longer counted.
 *
 * Start reading at acquire().
 */
#include "engine/manager.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

enum slot_state { SLOT_LOADING, SLOT_READY, SLOT_FAILED, SLOT_UNLOADING };

struct slot {
  struct slot *next;
  char *key;          /* instance id */
  char *model_name;   /* canonical registry name */
  enum slot_state state;
  manager_model *mm;  /* READY, UNLOADING */
  uint64_t attempt;   /* the load attempt a LOADING/FAILED slot belongs to */
  uint64_t bytes;     /* reserved (LOADING) or estimated (READY) */
  int err_code;       /* FAILED */
  char *err_msg;
  struct slot *victim_next; /* in a list of slots being unloaded together */
};

struct manager {
  registry *reg;
  manager_params p;
  int64_t keep_alive_ms;  /* default keep-alive, normalised (-1 = forever) */
  uint64_t budget;        /* bytes; UINT64_MAX = no limit */
  pthread_mutex_t lock;
  pthread_cond_t cond;      /* a slot left LOADING or UNLOADING */
  pthread_cond_t reap_cond; /* something the reaper may care about */
  struct slot *slots;
  uint64_t attempts;
  pthread_t reaper;
  bool stopping;
};

static void *reaper_main(void *arg);

uint64_t manager_physical_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || psz <= 0) return 0;
  return (uint64_t)pages * (uint64_t)psz;
}

static int64_t keep_alive_norm(int64_t ms) { return ms < 0 ? MANAGER_KEEP_ALIVE_FOREVER : ms; }

/* "17.2 MiB" */
static const char *fmt_bytes(uint64_t b, char *text, size_t cap) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = (double)b;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < ARRAY_LEN(units)) {
    v /= 1024.0;
    u++;
  }
  if (u == 0) snprintf(text, cap, "%llu B", (unsigned long long)b);
  else snprintf(text, cap, "%.1f %s", v, units[u]);
  return text;
}

static int cond_init_mono(pthread_cond_t *c) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
  return rc;
}

int manager_new(registry *r, const manager_params *p, manager **out) {
  *out = NULL;
  manager *mg = calloc(1, sizeof *mg);
  if (!mg) return err_set(ERR_NOMEM, "out of memory creating the model manager");
  mg->reg = r;
  if (p) mg->p = *p;
  if (mg->p.n_slots <= 0) mg->p.n_slots = 4;
  if (mg->p.n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    mg->p.n_threads = n > 0 ? (int)n : 1;
  }
  mg->keep_alive_ms = mg->p.keep_alive_set ? keep_alive_norm(mg->p.keep_alive_ms) : MANAGER_KEEP_ALIVE_DEFAULT_MS;
  if (mg->p.memory_budget < 0) {
    mg->budget = UINT64_MAX;
  } else if (mg->p.memory_budget > 0) {
    mg->budget = (uint64_t)mg->p.memory_budget;
  } else {
    uint64_t phys = manager_physical_memory();
    mg->budget = phys ? phys / 4 * 3 : UINT64_MAX;
  }
  pthread_mutex_init(&mg->lock, NULL);
  cond_init_mono(&mg->cond);
  cond_init_mono(&mg->reap_cond);
  if (pthread_create(&mg->reaper, NULL, reaper_main, mg) != 0) {
    pthread_cond_destroy(&mg->cond);
    pthread_cond_destroy(&mg->reap_cond);
    pthread_mutex_destroy(&mg->lock);
    free(mg);
    return err_set(ERR_NOMEM, "cannot start the model manager's reaper thread");
  }
  char b[32];
  if (mg->budget == UINT64_MAX) LOG_INFO("manager", "memory budget: no limit");
  else LOG_INFO("manager", "memory budget: %s", fmt_bytes(mg->budget, b, sizeof b));
  *out = mg;
  return 0;
}

static void model_unload(manager_model *mm) {
  if (!mm) return;
  if (mm->eng) engine_free(mm->eng);
  embedq_free(mm->embq);
  tmpl_free(mm->chat);
  tmpl_free(mm->chat_tools);
  tok_free(mm->t);
  model_free(mm->m);
  registry_entry_free(mm->entry);
  free(mm->bos);
  free(mm->eos);
  free(mm->name);
  free(mm->instance_id);
  free(mm);
}

static void slot_free(struct slot *s) {
  if (!s) return;
  model_unload(s->mm);
  free(s->key);
  free(s->model_name);
  free(s->err_msg);
  free(s);
}

static void slot_remove(manager *mg, struct slot *s) {
  for (struct slot **pp = &mg->slots; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      return;
    }
}

void manager_free(manager *mg) {
  if (!mg) return;
  pthread_mutex_lock(&mg->lock);
  mg->stopping = true;
  pthread_cond_signal(&mg->reap_cond);
  pthread_mutex_unlock(&mg->lock);
  pthread_join(mg->reaper, NULL);
  struct slot *s = mg->slots;
  while (s) {
    struct slot *n = s->next;
    slot_free(s);
    s = n;
  }
  pthread_cond_destroy(&mg->cond);
  pthread_cond_destroy(&mg->reap_cond);
  pthread_mutex_destroy(&mg->lock);
  free(mg);
}

/* Re-raises rc with prefix before the current detail (copied first: err_set
 * formats into the same thread buffer err_detail() points at). */
static int wrap_err(int rc, const char *prefix) {
  char detail[768];
  snprintf(detail, sizeof detail, "%s", err_detail());
  return err_set(rc, "%s: %s", prefix, detail);
}

/* A listed model whose file does not load is the server's problem, not a
 * missing model nor a bad request: whatever the loader reported (a missing
 * tensor is ERR_NOT_FOUND, a malformed header ERR_PARSE) becomes ERR_IO
 * (a 500) naming the model and its file. Out of memory keeps its code. */
static int load_err(int rc, const registry_entry *e, const char *detail) {
  if (rc == ERR_NOMEM) return rc;
  char d[768];
  snprintf(d, sizeof d, "%s", detail ? detail : err_detail());
  return err_set(ERR_IO, "model '%s' could not be loaded from %s: %s", e->name, e->path, d);
}

static char *token_text(const tok *t, enum tok_special role) {
  int32_t id = tok_special(t, role);
  if (id < 0) return NULL;
  size_t len = 0;
  const char *s = tok_token_text(t, id, &len);
  return s ? str_ndup(s, len) : NULL;
}

static int compile_template(const gguf_file *f, const family_info *fi, bool tools, tmpl **out) {
  const char *src = NULL, *origin = NULL;
  *out = NULL;
  if (family_chat_template(f, fi, tools, &src, &origin)) return 0; /* no chat format */
  int rc = tmpl_compile(src, strlen(src), out);
  if (rc) {
    char prefix[128];
    snprintf(prefix, sizeof prefix, "chat template (%s)", origin ? origin : "?");
    return wrap_err(rc, prefix);
  }
  return 0;
}

static uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* Fills mm->n_ctx and the memory estimate from the hyper-parameters, before
 * anything big is allocated. It follows what model_ctx_new and engine_new
 * allocate (KV cache rounded up to whole 128-position attention tiles, in
 * the manager's cache type; batch buffers of the architecture
 * files; the engine's logits and token histories), plus the whole file,
 * which is mapped and read for every token. An estimate: it errs high. */
static void estimate(const manager *mg, manager_model *mm, int64_t n_ctx_req) {
  const model_hparams *hp = model_get_hparams(mm->m);
  bool encoder = model_is_encoder(mm->m);
  int64_t train = hp->n_ctx_train > 0 ? hp->n_ctx_train : 1;
  mm->n_slots = encoder ? 1 : mg->p.n_slots;
  mm->n_ctx = encoder || n_ctx_req <= 0 || n_ctx_req > train ? train : n_ctx_req;
  uint64_t n_seq = (uint64_t)mm->n_slots, n_ctx = (uint64_t)mm->n_ctx;
  /* bytes of one head row of keys (or values) in the cache type the context
   * will really use (q8_0 falls back to f16 for head sizes not a multiple
   * of 32); bert's embedding context is F32 */
  uint64_t kv_row = model_kv_row_bytes(hp->head_dim, encoder ? MODEL_KV_F32 : mg->p.kv_type);
  uint64_t pad = (n_ctx + 127) / 128 * 128;
  uint64_t E = (uint64_t)hp->n_embd, hd = (uint64_t)hp->head_dim, F = (uint64_t)hp->n_ff;
  uint64_t Q = sat_mul((uint64_t)hp->n_head, hd), KV = sat_mul((uint64_t)hp->n_head_kv, hd);
  /* attention layers only: recurrent ones (hybrid models) keep a fixed
   * state per slot instead, which does not grow with the context */
  uint64_t kv = encoder ? 0 /* no cache (model_ctx_new) */
                        : sat_mul(sat_mul(sat_mul(2 * (uint64_t)hp->n_layer_kv, (uint64_t)hp->n_head_kv), pad),
                                  sat_mul(kv_row, n_seq));
  /* ... and its checkpoints (engine_params.n_checkpoints) */
  uint64_t n_states = 1 + (uint64_t)engine_n_checkpoints(mm->m, mg->p.n_checkpoints);
  uint64_t rs = sat_mul(sat_mul(model_rs_seq_bytes(hp), n_seq), n_states);
  uint64_t nb = sat_mul(n_ctx, n_seq);
  if (nb > 512) nb = 512;
  if (encoder) /* bert's rows hold a batch of inputs: max(n_ctx, 512) */
    nb = n_ctx > 512 ? n_ctx : 512;
  uint64_t width = sat_add(sat_add(sat_mul(2, E), sat_mul(2, Q)), sat_add(sat_mul(2, KV), sat_mul(2, F)));
  width = sat_add(width, (uint64_t)hp->rope.n_rot + 8);
  uint64_t gqa = hp->n_head_kv > 0 ? (uint64_t)(hp->n_head / hp->n_head_kv) : 1;
  uint64_t att = sat_mul(sat_mul((uint64_t)mg->p.n_threads, 16 * gqa), sat_add(3 * hd, 2 * 128 + 3));
  if (encoder) /* enc_attn.c's per thread: keys and values of a sequence, 64 queries' scores */
    att = sat_mul((uint64_t)mg->p.n_threads, sat_add(sat_mul(2 * n_ctx, hd), sat_mul(64, 2 * hd + n_ctx)));
  if (model_kv_type_for(hp->head_dim, mg->p.kv_type) == MODEL_KV_Q8_0 && !encoder) /* dequantized value tile */
    att = sat_add(att, sat_mul((uint64_t)mg->p.n_threads, sat_mul(hd, 128)));
  uint64_t bufs = sat_mul(sat_add(sat_mul(nb, width), att), sizeof(float));
  if (!encoder) /* logits of every slot, token history of every slot */
    bufs = sat_add(bufs, sat_mul(sat_mul(n_seq, (uint64_t)hp->n_vocab + n_ctx), sizeof(float)));
  mm->kv_bytes = kv;
  mm->rs_bytes = rs;
  mm->buf_bytes = bufs;
  mm->bytes = sat_add(sat_add(sat_add(mm->file_bytes, kv), rs), bufs);
}

/* Opens the model, its tokenizer and templates (the file is mapped, not
 * read) and estimates its memory; the caller holds no lock. */
static int model_open_entry(manager *mg, const registry_entry *e, const char *instance_id, int64_t n_ctx_req,
                            manager_model **out) {
  *out = NULL;
  if (e->error) return load_err(ERR_CORRUPT, e, e->error);
  manager_model *mm = calloc(1, sizeof *mm);
  if (!mm) return err_set(ERR_NOMEM, "out of memory loading model '%s'", e->name);
  int rc = 0;
  mm->name = str_dup(e->name);
  mm->instance_id = str_dup(instance_id);
  mm->entry = registry_entry_dup(e);
  if (!mm->name || !mm->instance_id || !mm->entry) {
    rc = err_set(ERR_NOMEM, "out of memory loading model '%s'", e->name);
    goto fail;
  }
  /* The family first: a model the runtime cannot execute is named by its
   * architecture rather than by the first tensor the loader misses. */
  gguf_file *file = NULL;
  if ((rc = gguf_open(e->path, &file))) {
    rc = load_err(rc, e, NULL);
    goto fail;
  }
  family_detect(file, &mm->fam);
  if ((rc = family_require_executable(&mm->fam))) {
    gguf_close(file);
    goto fail;
  }
  if ((rc = model_load(file, &mm->m))) { /* takes the file, also on failure */
    rc = load_err(rc, e, NULL);
    goto fail;
  }
  if (model_embed_pooling(mm->m) != MODEL_POOLING_NONE) {
    embedq_params ep = embedq_default_params();
    ep.n_threads = 1;
    if ((rc = embedq_new(mm->m, &ep, &mm->embq))) goto fail;
  }
  const gguf_file *gf = model_gguf(mm->m);
  if ((rc = tok_load(gf, &mm->t))) {
    rc = load_err(rc, e, NULL);
    goto fail;
  }
  if ((rc = compile_template(gf, &mm->fam, false, &mm->chat))) goto fail;
  if (mm->fam.has_tool_template && (rc = compile_template(gf, &mm->fam, true, &mm->chat_tools))) goto fail;
  mm->bos = token_text(mm->t, TOK_SPECIAL_BOS);
  mm->eos = token_text(mm->t, TOK_SPECIAL_EOS);
  mm->file_bytes = e->size ? e->size : model_weight_bytes(mm->m);
  estimate(mg, mm, n_ctx_req);
  *out = mm;
  return 0;
fail:
  model_unload(mm);
  return rc;
}

/* Allocates the KV cache and starts the engine (not for encoder-only
 * models, whose embedding context is made on first use). */
static int model_start(manager *mg, manager_model *mm) {
  if (!model_is_encoder(mm->m)) {
    engine_params ep = engine_default_params();
    ep.n_slots = mg->p.n_slots;
    ep.queue_max = mg->p.queue_max; /* 0 = the engine's default */
    ep.n_ctx = mm->n_ctx;
    ep.n_threads = mg->p.n_threads;
    ep.kv_type = mg->p.kv_type;
    ep.n_checkpoints = mg->p.n_checkpoints;
    /* a long prompt delays other streams' next token by about this much
     * (issue 5 asks <= 250 ms; engine.h) */
    ep.chunk_budget_ms = ENGINE_CHUNK_BUDGET_MS;
    int rc = engine_new(mm->m, mm->t, &ep, &mm->eng);
    if (rc) {
      char prefix[600];
      snprintf(prefix, sizeof prefix, "model '%s'", mm->name);
      return wrap_err(rc, prefix);
    }
    mm->n_ctx = engine_n_ctx(mm->eng);
  }
  mm->loaded_at = time_wall_s();
  return 0;
}

static struct slot *slot_find(manager *mg, const char *key) {
  for (struct slot *s = mg->slots; s; s = s->next)
    if (strcmp(s->key, key) == 0) return s;
  return NULL;
}

/* A READY (else LOADING) instance of a model, whatever its id. */
static struct slot *slot_find_model(manager *mg, const char *model_name) {
  struct slot *loading = NULL;
  for (struct slot *s = mg->slots; s; s = s->next) {
    if (strcmp(s->model_name, model_name) != 0) continue;
    if (s->state == SLOT_READY) return s;
    if (s->state == SLOT_LOADING && !loading) loading = s;
  }
  return loading;
}

/* Unloads a list of slots already marked UNLOADING (no lock held), then
 * takes them out of the list. */
static void unload_victims(manager *mg, struct slot *v, const char *why) {
  char b[32];
  for (struct slot *s = v; s; s = s->victim_next) {
    LOG_INFO("manager", "unloading model '%s' (%s, %s)", s->key, why, fmt_bytes(s->bytes, b, sizeof b));
    model_unload(s->mm);
    s->mm = NULL;
  }
  pthread_mutex_lock(&mg->lock);
  while (v) {
    struct slot *n = v->victim_next;
    slot_remove(mg, v);
    slot_free(v);
    v = n;
  }
  pthread_cond_broadcast(&mg->cond);
  pthread_mutex_unlock(&mg->lock);
}

/* Reserves mm->bytes for self within the budget, marking the least recently
 * used idle models UNLOADING (into *victims) when that makes room. Under the
 * lock. */
static int budget_reserve(manager *mg, struct slot *self, const manager_model *mm, struct slot **victims) {
  *victims = NULL;
  uint64_t need = mm->bytes;
  if (mg->budget == UINT64_MAX) {
    self->bytes = need;
    return 0;
  }
  char b1[32], b2[32], b3[32], b4[32], b5[32];
  if (need > mg->budget)
    return err_set(ERR_NOMEM,
                   "model '%s' needs about %s (file %s, KV cache and recurrent state %s for %d x %lld positions, "
                   "buffers %s), more "
                   "than the whole memory budget of %s (--memory-budget)%s",
                   mm->instance_id, fmt_bytes(need, b1, sizeof b1), fmt_bytes(mm->file_bytes, b2, sizeof b2),
                   fmt_bytes(mm->kv_bytes + mm->rs_bytes, b3, sizeof b3), mm->n_slots, (long long)mm->n_ctx,
                   fmt_bytes(mm->buf_bytes, b4, sizeof b4), fmt_bytes(mg->budget, b5, sizeof b5),
                   mm->file_bytes < mg->budget ? "; a smaller context (--ctx-size) or fewer slots (--parallel) "
                                                 "shrinks the KV cache"
                                               : "");
  uint64_t used = 0, idle = 0;
  for (struct slot *s = mg->slots; s; s = s->next) {
    if (s == self || (s->state != SLOT_LOADING && s->state != SLOT_READY)) continue;
    used = sat_add(used, s->bytes);
    if (s->state == SLOT_READY && s->mm->refs == 0) idle += s->bytes;
  }
  if (used <= mg->budget && need <= mg->budget - used) {
    self->bytes = need;
    return 0;
  }
  uint64_t busy = used - idle;
  if (busy > mg->budget || need > mg->budget - busy) {
    char names[512] = "";
    size_t len = 0;
    for (struct slot *s = mg->slots; s && len < sizeof names - 64; s = s->next) {
      if (s == self || (s->state != SLOT_LOADING && s->state != SLOT_READY)) continue;
      if (s->state == SLOT_READY && s->mm->refs == 0) continue;
      int k = snprintf(names + len, sizeof names - len, "%s%s (%s, %s)", len ? ", " : "", s->key,
                       fmt_bytes(s->bytes, b1, sizeof b1), s->state == SLOT_LOADING ? "loading" : "in use");
      if (k > 0) len += (size_t)k < sizeof names - len ? (size_t)k : sizeof names - len - 1;
    }
    uint64_t free_now = used < mg->budget ? mg->budget - used : 0;
    return err_set(ERR_OVERLOADED,
                   "model '%s' needs about %s but only %s of the %s memory budget is free (%s with idle models "
                   "unloaded); busy models hold the rest: %s; try again when they finish",
                   mm->instance_id, fmt_bytes(need, b1, sizeof b1), fmt_bytes(free_now, b2, sizeof b2),
                   fmt_bytes(mg->budget, b3, sizeof b3), fmt_bytes(mg->budget - busy, b4, sizeof b4), names);
  }
  while (used > mg->budget || need > mg->budget - used) {
    struct slot *lru = NULL;
    for (struct slot *s = mg->slots; s; s = s->next)
      if (s->state == SLOT_READY && s->mm->refs == 0 && (!lru || s->mm->last_used_ns < lru->mm->last_used_ns))
        lru = s;
    if (!lru) break; /* cannot happen: idle covered the difference */
    lru->state = SLOT_UNLOADING;
    lru->victim_next = *victims;
    *victims = lru;
    used -= lru->bytes;
  }
  self->bytes = need;
  return 0;
}

/* Takes a READY slot for a request (a reference when out) or an explicit
 * load (no reference); applies the options' keep-alive. Under the lock. */
static void take(manager *mg, struct slot *s, const manager_opts *o, bool load, manager_model **out) {
  manager_model *mm = s->mm;
  if (o->keep_alive_set) {
    mm->keep_alive_ms = keep_alive_norm(o->keep_alive_ms);
    if (load) mm->base_keep_alive_ms = mm->keep_alive_ms;
  } else if (!load) {
    mm->keep_alive_ms = mm->base_keep_alive_ms;
  }
  if (out) {
    mm->refs++;
    *out = mm;
  } else if (mm->refs == 0) {
    mm->last_used_ns = (int64_t)time_mono_ns();
  }
  pthread_cond_signal(&mg->reap_cond);
}

/* Whether a loaded instance satisfies a requested context (0 = any). */
static bool ctx_compatible(const manager_model *mm, int64_t n_ctx_req) {
  if (n_ctx_req <= 0) return true;
  int64_t train = model_get_hparams(mm->m)->n_ctx_train;
  int64_t want = train > 0 && n_ctx_req > train ? train : n_ctx_req;
  return want == mm->n_ctx;
}

/* manager_get_opts (load false: a reference) and manager_load (load true:
 * instance ids and context overrides, a reference only when out). */
static int acquire(manager *mg, const char *name, const manager_opts *o, bool load, manager_model **out) {
  manager_opts none;
  memset(&none, 0, sizeof none);
  if (!o) o = &none;
  if (out) *out = NULL;
  if (load && o->n_ctx < 0) return err_set(ERR_RANGE, "context length %lld is negative", (long long)o->n_ctx);
  int rc;
  char *msg = NULL;
  /* an instance id, exactly (LM Studio's "model:2") */
  if (!load && name && *name) {
    pthread_mutex_lock(&mg->lock);
    struct slot *s = slot_find(mg, name);
    if (s && s->state == SLOT_READY) {
      take(mg, s, o, load, out);
      pthread_mutex_unlock(&mg->lock);
      return 0;
    }
    pthread_mutex_unlock(&mg->lock);
  }
  registry_entry *e = NULL;
  if (!name || !*name) {
    rc = registry_lookup_or_default(mg->reg, NULL, &e);
    /* Naming no model is the request's omission, not a missing model: the
     * dialects answer 400 naming their model field. */
    if (rc) return err_set(ERR_INVALID, "%s: name the model to use", err_detail());
  } else if ((rc = registry_lookup(mg->reg, name, &e))) {
    return err_set(ERR_NOT_FOUND, "The model '%s' does not exist", name);
  }
  bool explicit_id = load && o->instance_id && *o->instance_id;
  char *key = str_dup(explicit_id ? o->instance_id : e->name);
  if (!key) {
    registry_entry_free(e);
    return err_set(ERR_NOMEM, "out of memory");
  }
  uint64_t waited = 0;
  struct slot *s = NULL;
  pthread_mutex_lock(&mg->lock);
  for (;;) {
    s = slot_find(mg, key);
    if (!load && (!s || (s->state == SLOT_FAILED && !(waited && s->attempt == waited)))) {
      struct slot *t = slot_find_model(mg, e->name); /* another instance of it */
      if (t) s = t;
    }
    if (!s) {
      s = calloc(1, sizeof *s);
      if (!s || !(s->key = str_dup(key)) || !(s->model_name = str_dup(e->name))) {
        if (s) free(s->key);
        free(s);
        rc = err_set(ERR_NOMEM, "out of memory");
        goto out_locked;
      }
      s->state = SLOT_LOADING;
      s->attempt = ++mg->attempts;
      s->next = mg->slots;
      mg->slots = s;
      break; /* we load it */
    }
    if (load && explicit_id && s->state == SLOT_READY && strcmp(s->model_name, e->name) != 0) {
      rc = err_set(ERR_CONFLICT, "instance '%s' is already loaded with model '%s', not '%s'", key, s->model_name,
                   e->name);
      goto out_locked;
    }
    if (s->state == SLOT_READY) {
      if (load && !ctx_compatible(s->mm, o->n_ctx)) {
        if (explicit_id) {
          rc = err_set(ERR_CONFLICT, "instance '%s' is already loaded with a context of %lld positions (not %lld); "
                       "unload it first or give another instance id", key, (long long)s->mm->n_ctx,
                       (long long)o->n_ctx);
          goto out_locked;
        }
        /* another instance of the same model: NAME:2, NAME:3, ... */
        size_t cap = strlen(e->name) + 16;
        char *k2 = malloc(cap);
        if (!k2) {
          rc = err_set(ERR_NOMEM, "out of memory");
          goto out_locked;
        }
        bool found = false;
        for (int i = 2; i < 1000 && !found; i++) {
          snprintf(k2, cap, "%s:%d", e->name, i);
          struct slot *t = slot_find(mg, k2);
          found = !t || (strcmp(t->model_name, e->name) == 0 &&
                         (t->state != SLOT_READY || ctx_compatible(t->mm, o->n_ctx)));
        }
        if (!found) {
          free(k2);
          rc = err_set(ERR_CONFLICT, "model '%s' has too many loaded instances", e->name);
          goto out_locked;
        }
        free(key);
        key = k2;
        continue;
      }
      take(mg, s, o, load, out);
      rc = 0;
      goto out_locked;
    }
    if (s->state == SLOT_FAILED) {
      if (waited && s->attempt == waited) { /* the load we waited for failed */
        rc = s->err_code;
        err_set(rc, "%s", s->err_msg ? s->err_msg : err_message(rc));
        goto out_locked;
      }
      s->state = SLOT_LOADING; /* try again */
      s->attempt = ++mg->attempts;
      free(s->err_msg);
      s->err_msg = NULL;
      if (strcmp(s->model_name, e->name) != 0) {
        char *mn = str_dup(e->name);
        if (mn) {
          free(s->model_name);
          s->model_name = mn;
        }
      }
      break;
    }
    /* LOADING or UNLOADING by another thread: wait for its outcome */
    waited = s->state == SLOT_LOADING ? s->attempt : 0;
    pthread_cond_wait(&mg->cond, &mg->lock);
  }
  pthread_mutex_unlock(&mg->lock);

  LOG_INFO("manager", "loading model '%s' from %s", key, e->path);
  uint64_t t0 = time_mono_ns();
  manager_model *mm = NULL;
  struct slot *victims = NULL;
  rc = model_open_entry(mg, e, key, load && o->n_ctx > 0 ? o->n_ctx : mg->p.n_ctx, &mm);
  if (!rc) {
    pthread_mutex_lock(&mg->lock);
    rc = budget_reserve(mg, s, mm, &victims);
    pthread_mutex_unlock(&mg->lock);
    if (victims) unload_victims(mg, victims, "least recently used, to make room");
    if (!rc) rc = model_start(mg, mm);
  }
  msg = rc ? str_dup(err_detail()) : NULL;
  char b[32];
  if (rc) {
    LOG_WARN("manager", "loading model '%s' failed: %s", key, msg ? msg : err_message(rc));
    model_unload(mm);
    mm = NULL;
  } else {
    LOG_INFO("manager", "model '%s' loaded in %.0f ms (about %s)", key, (double)(time_mono_ns() - t0) / 1e6,
             fmt_bytes(mm->bytes, b, sizeof b));
  }

  pthread_mutex_lock(&mg->lock);
  if (rc) {
    s->state = SLOT_FAILED;
    s->bytes = 0;
    s->err_code = rc;
    s->err_msg = msg; /* the slot's now: report it before unlocking */
    err_set(rc, "%s", msg ? msg : err_message(rc));
  } else {
    s->state = SLOT_READY;
    s->mm = mm;
    mm->owner = mg;
    mm->base_keep_alive_ms = load && o->keep_alive_set ? keep_alive_norm(o->keep_alive_ms) : mg->keep_alive_ms;
    mm->keep_alive_ms = o->keep_alive_set ? keep_alive_norm(o->keep_alive_ms) : mm->base_keep_alive_ms;
    mm->last_used_ns = (int64_t)time_mono_ns();
    if (out) {
      mm->refs = 1;
      *out = mm;
    }
  }
  pthread_cond_broadcast(&mg->cond);
  pthread_cond_signal(&mg->reap_cond);
out_locked:
  pthread_mutex_unlock(&mg->lock);
  registry_entry_free(e);
  free(key);
  return rc;
}

int manager_get(manager *mg, const char *name, manager_model **out) { return acquire(mg, name, NULL, false, out); }

int manager_get_opts(manager *mg, const char *name, const manager_opts *o, manager_model **out) {
  return acquire(mg, name, o, false, out);
}

int manager_load(manager *mg, const char *name, const manager_opts *o, manager_model **out) {
  return acquire(mg, name, o, true, out);
}

void manager_release(manager_model *mm) {
  if (!mm) return;
  manager *mg = mm->owner;
  pthread_mutex_lock(&mg->lock);
  if (mm->refs > 0) mm->refs--;
  mm->last_used_ns = (int64_t)time_mono_ns();
  if (mm->refs == 0) pthread_cond_signal(&mg->reap_cond);
  pthread_mutex_unlock(&mg->lock);
}

void manager_set_keep_alive(manager_model *mm, int64_t keep_alive_ms) {
  if (!mm) return;
  manager *mg = mm->owner;
  pthread_mutex_lock(&mg->lock);
  mm->keep_alive_ms = keep_alive_norm(keep_alive_ms);
  pthread_cond_signal(&mg->reap_cond);
  pthread_mutex_unlock(&mg->lock);
}

int manager_unload(manager *mg, const char *name) {
  if (!name || !*name) return err_set(ERR_INVALID, "no model named to unload");
  char canon[1024];
  if (registry_resolve(mg->reg, name, canon, sizeof canon)) canon[0] = '\0';
  struct slot *victims = NULL;
  bool any = false;
  pthread_mutex_lock(&mg->lock);
  struct slot *by_id = slot_find(mg, name);
  if (by_id && by_id->state != SLOT_READY) by_id = NULL;
  for (struct slot *s = mg->slots; s; s = s->next) {
    if (s->state != SLOT_READY) continue;
    if (by_id ? s != by_id : (!canon[0] || strcmp(s->model_name, canon) != 0)) continue;
    any = true;
    if (s->mm->refs == 0) {
      s->state = SLOT_UNLOADING;
      s->victim_next = victims;
      victims = s;
    } else {
      s->mm->keep_alive_ms = 0; /* the reaper unloads it when the last reference goes */
      LOG_INFO("manager", "model '%s' unloads when its %d request(s) finish", s->key, (int)s->mm->refs);
    }
  }
  pthread_mutex_unlock(&mg->lock);
  if (!any) return err_set(ERR_NOT_FOUND, "model '%s' is not loaded", name);
  if (victims) unload_victims(mg, victims, "unload requested");
  return 0;
}

/* Busy first, then most recently used first. */
static int cmp_recent(const void *a, const void *b) {
  const manager_model *x = (*(const struct slot *const *)a)->mm, *y = (*(const struct slot *const *)b)->mm;
  if ((x->refs > 0) != (y->refs > 0)) return x->refs > 0 ? -1 : 1;
  return x->last_used_ns > y->last_used_ns ? -1 : x->last_used_ns < y->last_used_ns;
}

void manager_loaded_free(manager_loaded *v, size_t n) {
  if (!v) return;
  for (size_t i = 0; i < n; i++) {
    free(v[i].instance_id);
    registry_entry_free(v[i].entry);
  }
  free(v);
}

int manager_list_loaded(manager *mg, manager_loaded **out, size_t *n) {
  *out = NULL;
  *n = 0;
  int rc = 0;
  pthread_mutex_lock(&mg->lock);
  size_t k = 0;
  for (struct slot *s = mg->slots; s; s = s->next) k += s->state == SLOT_READY;
  struct slot **v = k ? calloc(k, sizeof *v) : NULL;
  manager_loaded *l = k ? calloc(k, sizeof *l) : NULL;
  if (k && (!v || !l)) {
    rc = err_set(ERR_NOMEM, "out of memory listing the loaded models");
    goto done;
  }
  size_t i = 0;
  for (struct slot *s = mg->slots; s; s = s->next)
    if (s->state == SLOT_READY) v[i++] = s;
  if (k) qsort(v, k, sizeof *v, cmp_recent); /* v may be NULL when nothing is loaded */
  int64_t now_ns = (int64_t)time_mono_ns(), now_ms = time_wall_ms();
  for (i = 0; i < k; i++) {
    const manager_model *mm = v[i]->mm;
    manager_loaded *d = &l[i];
    d->instance_id = str_dup(mm->instance_id);
    d->entry = registry_entry_dup(mm->entry);
    if (!d->instance_id || !d->entry) {
      rc = err_set(ERR_NOMEM, "out of memory listing the loaded models");
      goto done;
    }
    d->bytes = mm->bytes;
    d->kv_bytes = mm->kv_bytes;
    d->n_ctx = mm->n_ctx;
    d->n_slots = mm->n_slots;
    d->refs = mm->refs;
    d->loaded_at = mm->loaded_at;
    d->keep_alive_ms = mm->keep_alive_ms;
    if (mm->keep_alive_ms < 0) d->expires_at_ms = 0;
    else if (mm->refs > 0) d->expires_at_ms = now_ms + mm->keep_alive_ms;
    else d->expires_at_ms = now_ms + (mm->last_used_ns - now_ns) / 1000000 + mm->keep_alive_ms;
  }
done:
  pthread_mutex_unlock(&mg->lock);
  free(v);
  if (rc) {
    manager_loaded_free(l, k);
    return rc;
  }
  *out = l;
  *n = k;
  return 0;
}

void manager_memory(manager *mg, uint64_t *used, uint64_t *budget) {
  uint64_t u = 0;
  pthread_mutex_lock(&mg->lock);
  for (struct slot *s = mg->slots; s; s = s->next)
    if (s->state == SLOT_READY || s->state == SLOT_LOADING) u = sat_add(u, s->bytes);
  pthread_mutex_unlock(&mg->lock);
  if (used) *used = u;
  if (budget) *budget = mg->budget;
}

/* The reaper: unloads idle models whose keep-alive has run out, one at a
 * time without the lock, and otherwise sleeps until the earliest expiry (or
 * until a release, a keep-alive change or shutdown signals reap_cond). */
static void *reaper_main(void *arg) {
  manager *mg = arg;
  pthread_mutex_lock(&mg->lock);
  while (!mg->stopping) {
    int64_t now = (int64_t)time_mono_ns(), next = INT64_MAX;
    struct slot *victim = NULL;
    for (struct slot *s = mg->slots; s && !victim; s = s->next) {
      if (s->state != SLOT_READY || s->mm->refs > 0 || s->mm->keep_alive_ms < 0) continue;
      int64_t ka_ns = s->mm->keep_alive_ms > INT64_MAX / 1000000 ? INT64_MAX : s->mm->keep_alive_ms * 1000000;
      int64_t exp = s->mm->last_used_ns > INT64_MAX - ka_ns ? INT64_MAX : s->mm->last_used_ns + ka_ns;
      if (exp <= now) victim = s;
      else if (exp < next) next = exp;
    }
    if (victim) {
      victim->state = SLOT_UNLOADING;
      victim->victim_next = NULL;
      pthread_mutex_unlock(&mg->lock);
      unload_victims(mg, victim, "keep-alive expired");
      pthread_mutex_lock(&mg->lock);
      continue;
    }
    if (next == INT64_MAX) {
      pthread_cond_wait(&mg->reap_cond, &mg->lock);
    } else {
      struct timespec ts = {.tv_sec = (time_t)(next / 1000000000), .tv_nsec = (long)(next % 1000000000)};
      pthread_cond_timedwait(&mg->reap_cond, &mg->lock, &ts);
    }
  }
  pthread_mutex_unlock(&mg->lock);
  return NULL;
}

bool manager_model_can_embed(const manager_model *mm) {
  return model_embed_pooling(mm->m) != MODEL_POOLING_NONE;
}

int manager_model_embed(manager_model *mm, const int32_t *tokens, int64_t n, float *out) {
  if (!manager_model_can_embed(mm))
    return err_set(ERR_UNSUPPORTED, "model '%s' (%s) does not produce embeddings", mm->name,
                   model_arch_name(model_arch_of(mm->m)));
  return embedq_embed(mm->embq, 1, &tokens, &n, out, NULL);
}

int manager_model_embed_many(manager_model *mm, size_t n, const int32_t *const *tokens, const int64_t *lens,
                             float *out, size_t *failed) {
  if (failed) *failed = 0;
  if (!manager_model_can_embed(mm))
    return err_set(ERR_UNSUPPORTED, "model '%s' (%s) does not produce embeddings", mm->name,
                   model_arch_name(model_arch_of(mm->m)));
  return embedq_embed(mm->embq, n, tokens, lens, out, failed);
}

int manager_n_loaded(manager *mg) {
  int n = 0;
  pthread_mutex_lock(&mg->lock);
  for (struct slot *s = mg->slots; s; s = s->next) n += s->state == SLOT_READY;
  pthread_mutex_unlock(&mg->lock);
  return n;
}

int manager_parse_keep_alive(const char *text, int64_t *ms) {
  if (!text) return err_set(ERR_INVALID, "keep-alive: missing value");
  const char *p = text;
  while (*p == ' ' || *p == '\t') p++;
  bool neg = false;
  if (*p == '-' || *p == '+') neg = *p++ == '-';
  double total = 0;
  int parts = 0;
  bool bare = false; /* a number without a unit: seconds, only alone */
  while (*p && *p != ' ' && *p != '\t') {
    const char *num = p;
    double v = 0;
    while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
    if (*p == '.') {
      p++;
      for (double f = 0.1; *p >= '0' && *p <= '9'; f /= 10) v += (*p++ - '0') * f;
    }
    if (p == num || (p == num + 1 && *num == '.')) goto bad;
    double unit;
    if (strncmp(p, "ns", 2) == 0) unit = 1e-6, p += 2;
    else if (strncmp(p, "us", 2) == 0) unit = 1e-3, p += 2;
    else if (strncmp(p, "\xc2\xb5s", 3) == 0) unit = 1e-3, p += 3;
    else if (strncmp(p, "ms", 2) == 0) unit = 1, p += 2;
    else if (*p == 's') unit = 1000, p++;
    else if (*p == 'm') unit = 60000, p++;
    else if (*p == 'h') unit = 3600000, p++;
    else if (*p == '\0' || *p == ' ' || *p == '\t') unit = 1000, bare = true;
    else goto bad;
    total += v * unit;
    parts++;
  }
  while (*p == ' ' || *p == '\t') p++;
  if (*p || parts == 0 || (bare && parts > 1)) goto bad;
  if (total > 9.0e15) return err_set(ERR_INVALID, "keep-alive '%s' is too long (use -1 to keep a model forever)", text);
  if (neg) *ms = total > 0 ? MANAGER_KEEP_ALIVE_FOREVER : 0;
  else *ms = (int64_t)ceil(total);
  return 0;
bad:
  return err_set(ERR_INVALID,
                 "keep-alive '%s' is not a duration (expected seconds, or units like 5m, 30s, 1h30m, 500ms; -1 = "
                 "forever, 0 = unload at once)",
                 text);
}

/* ---- a chat model for requests that name none ---------------------------- */

static bool entry_chats(const registry_entry *e) { return e->executable && (e->caps & FAMILY_CAP_CHAT); }

int manager_get_chat(manager *mg, manager_model **out) {
  *out = NULL;
  /* the configured default (whatever it is: the user chose it), or the
   * registry's only model when that one chats */
  char *def = registry_default_name(mg->reg);
  registry_entry *only = NULL;
  bool use_default = def || (registry_lookup_or_default(mg->reg, NULL, &only) == 0 && entry_chats(only));
  free(def);
  registry_entry_free(only);
  if (use_default) return manager_get(mg, NULL, out);
  /* a loaded chat model, most recently used first */
  manager_loaded *l = NULL;
  size_t n = 0;
  char *pick = NULL;
  if (manager_list_loaded(mg, &l, &n) == 0)
    for (size_t i = 0; i < n && !pick; i++)
      if (entry_chats(l[i].entry)) pick = str_dup(l[i].instance_id);
  manager_loaded_free(l, n);
  /* else the smallest runnable chat model on disk (the only one, if so) */
  if (!pick) {
    registry_snapshot *snap = registry_snapshot_acquire(mg->reg);
    const registry_entry *best = NULL;
    for (size_t i = 0; i < registry_snapshot_count(snap); i++) {
      const registry_entry *e = registry_snapshot_at(snap, i);
      if (entry_chats(e) && (!best || e->size < best->size)) best = e;
    }
    if (best) pick = str_dup(best->name);
    registry_snapshot_release(snap);
    if (!best)
      return err_set(ERR_UNAVAILABLE, "no chat model is available: put one in the models directory "
                                      "(--models-dir) or start parley with --default-model (or --model) naming one");
  }
  if (!pick) return err_set(ERR_NOMEM, "out of memory");
  int rc = manager_get(mg, pick, out);
  free(pick);
  return rc;
}
