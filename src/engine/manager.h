/*
 * manager.h - the loaded-model manager: turns a model name from a request
 * into a ready-to-use loaded model (weights, tokenizer, family, compiled chat
 * templates, and a running engine), loading it on first use.
 *
 *   manager *mg; manager_new(reg, &params, &mg);
 *   manager_model *mm; manager_get(mg, "llama3.2:1b", &mm);  // loads once
 *   ... engine_submit(mm->eng, ...) ...
 *   manager_free(mg);                                         // at shutdown
 *
 * Threads: manager_get may be called from any thread. Concurrent first
 * requests for the same model load it once: the first caller loads (without
 * holding the manager's lock), the others wait on a condition variable. A
 * failed load is reported to everyone who waited for it; the next request
 * tries again.
 *
 * Lifetime: manager_get returns a counted reference; every successful
 * manager_get is paired with one manager_release when the caller (a handler,
 * or a stream that outlives its handler) no longer uses the model. A model
 * with references is never unloaded; one without may be (idle keep-alive,
 * memory budget), so a pointer must not be used after its release.
 *
 * Errors: ERR_NOT_FOUND naming the model (unknown name, or no name and no
 * default); ERR_UNSUPPORTED naming the architecture (a family the runtime
 * cannot execute); otherwise what model_open/tok_load/engine_new report.
 */
#ifndef PARLEY_ENGINE_MANAGER_H
#define PARLEY_ENGINE_MANAGER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "model/family.h"
#include "model/model.h"
#include "model/registry.h"
#include "tmpl/tmpl.h"
#include "tok/tok.h"

typedef struct manager manager;

typedef struct manager_params {
  int32_t n_slots;  /* engine slots per model (--parallel); 0 = 4 */
  int64_t n_ctx;    /* positions per slot (--ctx-size); 0 = the trained context */
  int n_threads;    /* compute threads per engine; 0 = the online CPUs */
} manager_params;

/* One loaded model. Everything is read-only for callers except through the
 * engine's and the embedding lock's own rules. */
typedef struct manager_model {
  char *name;              /* canonical registry name */
  registry_entry *entry;   /* deep copy of the registry entry */
  model *m;
  tok *t;
  family_info fam;
  tmpl *chat;              /* the chat template, NULL when the family has none */
  tmpl *chat_tools;        /* the tool_use variant, or NULL (use chat) */
  char *bos, *eos;         /* token texts for the template, or NULL */
  engine *eng;             /* NULL for encoder-only models (bert) */
  /* Embeddings: one context of one sequence, used under embed_lock. */
  pthread_mutex_t embed_lock;
  model_ctx *embed_ctx;    /* created on first embedding request */
  int64_t loaded_at;       /* wall seconds */
  struct manager *owner;   /* the manager that loaded it */
  int32_t refs;            /* manager_get minus manager_release; under the
                              manager's lock */
  int64_t last_used_ns;    /* monotonic, at the last release */
} manager_model;

int manager_new(registry *r, const manager_params *p, manager **out);
/* Stops every engine and frees every loaded model. */
void manager_free(manager *mg);

/* The loaded model for a request's model name (NULL or "" = the default),
 * loading it when needed; a counted reference (see Lifetime). */
int manager_get(manager *mg, const char *name, manager_model **out);
/* Gives back a reference from manager_get. NULL is ignored. */
void manager_release(manager_model *mm);

/* True when the model can embed (an architecture with model_embed). */
bool manager_model_can_embed(const manager_model *mm);

/* Embeds tokens (pooled, normalized) into out[n_embd] under the model's
 * embedding lock. */
int manager_model_embed(manager_model *mm, const int32_t *tokens, int64_t n, float *out);

/* Number of models loaded now (for tests and admin). */
int manager_n_loaded(manager *mg);

#endif
