/*
 * manager.c - loads models on first use and keeps them loaded.
 *
 * State: a linked list of slots, one per canonical model name, each LOADING,
 * READY or FAILED, under one mutex; a condition variable wakes the callers
 * that wait for a LOADING slot. The loading itself (model_open, tok_load,
 * template compile, engine_new) runs without the lock, by the caller that
 * found no slot (or a FAILED one). Invariant: a READY slot's model never
 * changes or goes away until manager_free.
 *
 * Start reading at manager_get.
 */
#include "engine/manager.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

enum slot_state { SLOT_LOADING, SLOT_READY, SLOT_FAILED };

struct slot {
  struct slot *next;
  char *name;
  enum slot_state state;
  manager_model *mm;  /* READY */
  int err_code;       /* FAILED */
  char *err_msg;
};

struct manager {
  registry *reg;
  manager_params p;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct slot *slots;
};

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
  pthread_mutex_init(&mg->lock, NULL);
  pthread_cond_init(&mg->cond, NULL);
  *out = mg;
  return 0;
}

static void model_unload(manager_model *mm) {
  if (!mm) return;
  if (mm->eng) engine_free(mm->eng);
  if (mm->embed_ctx) model_ctx_free(mm->embed_ctx);
  pthread_mutex_destroy(&mm->embed_lock);
  tmpl_free(mm->chat);
  tmpl_free(mm->chat_tools);
  tok_free(mm->t);
  model_free(mm->m);
  registry_entry_free(mm->entry);
  free(mm->bos);
  free(mm->eos);
  free(mm->name);
  free(mm);
}

void manager_free(manager *mg) {
  if (!mg) return;
  struct slot *s = mg->slots;
  while (s) {
    struct slot *n = s->next;
    model_unload(s->mm);
    free(s->name);
    free(s->err_msg);
    free(s);
    s = n;
  }
  pthread_cond_destroy(&mg->cond);
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

/* Loads one model; the caller holds no lock. */
static int model_load_entry(manager *mg, const registry_entry *e, manager_model **out) {
  *out = NULL;
  if (e->error) return err_set(ERR_UNSUPPORTED, "model '%s' cannot be used: %s", e->name, e->error);
  manager_model *mm = calloc(1, sizeof *mm);
  if (!mm) return err_set(ERR_NOMEM, "out of memory loading model '%s'", e->name);
  pthread_mutex_init(&mm->embed_lock, NULL);
  int rc = 0;
  mm->name = str_dup(e->name);
  mm->entry = registry_entry_dup(e);
  if (!mm->name || !mm->entry) {
    rc = err_set(ERR_NOMEM, "out of memory loading model '%s'", e->name);
    goto fail;
  }
  char prefix[600];
  snprintf(prefix, sizeof prefix, "model '%s'", e->name);
  /* The family first: a model the runtime cannot execute is named by its
   * architecture rather than by the first tensor the loader misses. */
  gguf_file *file = NULL;
  if ((rc = gguf_open(e->path, &file))) {
    rc = wrap_err(rc, prefix);
    goto fail;
  }
  family_detect(file, &mm->fam);
  if ((rc = family_require_executable(&mm->fam))) {
    gguf_close(file);
    goto fail;
  }
  if ((rc = model_load(file, &mm->m))) { /* takes the file, also on failure */
    rc = wrap_err(rc, prefix);
    goto fail;
  }
  const gguf_file *gf = model_gguf(mm->m);
  if ((rc = tok_load(gf, &mm->t))) {
    rc = wrap_err(rc, prefix);
    goto fail;
  }
  if ((rc = compile_template(gf, &mm->fam, false, &mm->chat))) goto fail;
  if (mm->fam.has_tool_template && (rc = compile_template(gf, &mm->fam, true, &mm->chat_tools))) goto fail;
  mm->bos = token_text(mm->t, TOK_SPECIAL_BOS);
  mm->eos = token_text(mm->t, TOK_SPECIAL_EOS);
  if (model_arch_of(mm->m) != MODEL_ARCH_BERT) {
    engine_params ep = engine_default_params();
    ep.n_slots = mg->p.n_slots;
    ep.n_ctx = mg->p.n_ctx;
    ep.n_threads = mg->p.n_threads;
    if ((rc = engine_new(mm->m, mm->t, &ep, &mm->eng))) {
      rc = wrap_err(rc, prefix);
      goto fail;
    }
  }
  mm->loaded_at = time_wall_s();
  *out = mm;
  return 0;
fail:
  model_unload(mm);
  return rc;
}

static struct slot *slot_find(manager *mg, const char *name) {
  for (struct slot *s = mg->slots; s; s = s->next)
    if (strcmp(s->name, name) == 0) return s;
  return NULL;
}

int manager_get(manager *mg, const char *name, manager_model **out) {
  *out = NULL;
  registry_entry *e = NULL;
  int rc;
  if (!name || !*name) {
    rc = registry_lookup_or_default(mg->reg, NULL, &e);
    if (rc) return err_set(ERR_NOT_FOUND, "no model given and no default model is configured (--default-model)");
  } else if ((rc = registry_lookup(mg->reg, name, &e))) {
    return err_set(ERR_NOT_FOUND, "The model '%s' does not exist", name);
  }
  pthread_mutex_lock(&mg->lock);
  struct slot *s = slot_find(mg, e->name);
  for (;;) {
    if (!s) {
      s = calloc(1, sizeof *s);
      if (!s || !(s->name = str_dup(e->name))) {
        free(s);
        pthread_mutex_unlock(&mg->lock);
        registry_entry_free(e);
        return err_set(ERR_NOMEM, "out of memory");
      }
      s->state = SLOT_LOADING;
      s->next = mg->slots;
      mg->slots = s;
      break; /* we load it */
    }
    if (s->state == SLOT_READY) {
      s->mm->refs++;
      *out = s->mm;
      pthread_mutex_unlock(&mg->lock);
      registry_entry_free(e);
      return 0;
    }
    if (s->state == SLOT_FAILED) { /* try again */
      s->state = SLOT_LOADING;
      free(s->err_msg);
      s->err_msg = NULL;
      break;
    }
    /* LOADING by another caller: wait for its outcome */
    while (s->state == SLOT_LOADING) pthread_cond_wait(&mg->cond, &mg->lock);
    if (s->state == SLOT_FAILED) {
      rc = s->err_code;
      err_set(rc, "%s", s->err_msg ? s->err_msg : err_message(rc));
      pthread_mutex_unlock(&mg->lock);
      registry_entry_free(e);
      return rc;
    }
  }
  pthread_mutex_unlock(&mg->lock);

  LOG_INFO("manager", "loading model '%s' from %s", e->name, e->path);
  uint64_t t0 = time_mono_ns();
  manager_model *mm = NULL;
  rc = model_load_entry(mg, e, &mm);
  char *msg = rc ? str_dup(err_detail()) : NULL;
  if (rc) LOG_WARN("manager", "loading model '%s' failed: %s", e->name, err_detail());
  else LOG_INFO("manager", "model '%s' loaded in %.0f ms", e->name, (double)(time_mono_ns() - t0) / 1e6);
  registry_entry_free(e);

  pthread_mutex_lock(&mg->lock);
  if (rc) {
    s->state = SLOT_FAILED;
    s->err_code = rc;
    s->err_msg = msg;
  } else {
    s->state = SLOT_READY;
    mm->owner = mg;
    mm->refs = 1;
    s->mm = mm;
    *out = mm;
  }
  pthread_cond_broadcast(&mg->cond);
  pthread_mutex_unlock(&mg->lock);
  if (rc) err_set(rc, "%s", msg ? msg : err_message(rc));
  return rc;
}

void manager_release(manager_model *mm) {
  if (!mm) return;
  manager *mg = mm->owner;
  pthread_mutex_lock(&mg->lock);
  if (mm->refs > 0) mm->refs--;
  mm->last_used_ns = (int64_t)time_mono_ns();
  pthread_mutex_unlock(&mg->lock);
}

bool manager_model_can_embed(const manager_model *mm) {
  return model_embed_pooling(mm->m) != MODEL_POOLING_NONE;
}

int manager_model_embed(manager_model *mm, const int32_t *tokens, int64_t n, float *out) {
  if (!manager_model_can_embed(mm))
    return err_set(ERR_UNSUPPORTED, "model '%s' (%s) does not produce embeddings", mm->name,
                   model_arch_name(model_arch_of(mm->m)));
  pthread_mutex_lock(&mm->embed_lock);
  int rc = 0;
  if (!mm->embed_ctx) {
    model_ctx_params cp = model_ctx_default_params();
    cp.n_seq = 1;
    cp.n_threads = 1;
    cp.kv_type = MODEL_KV_F32;
    rc = model_ctx_new(mm->m, &cp, &mm->embed_ctx);
  }
  if (!rc) rc = model_embed(mm->embed_ctx, tokens, n, out, MODEL_EMBED_NORMALIZE);
  pthread_mutex_unlock(&mm->embed_lock);
  return rc;
}

int manager_n_loaded(manager *mg) {
  int n = 0;
  pthread_mutex_lock(&mg->lock);
  for (struct slot *s = mg->slots; s; s = s->next) n += s->state == SLOT_READY;
  pthread_mutex_unlock(&mg->lock);
  return n;
}
