/*
 * manager.h - the loaded-model manager: turns a model name from a request
 * into a ready-to-use loaded model (weights, tokenizer, family, compiled chat
 * templates, and a running engine), loading it on first use, unloading it
 * after an idle keep-alive, and keeping the loaded models within a memory
 * budget.
 *
 *   manager *mg; manager_new(reg, &params, &mg);
 *   manager_model *mm; manager_get(mg, "llama3.2:1b", &mm);  // loads once
 *   ... engine_submit(mm->eng, ...) ...
 *   manager_release(mm);                                     // every get
 *   manager_free(mg);                                        // at shutdown
 *
 * Threads: every function may be called from any thread. Concurrent first
 * requests for the same model load it once: the first caller loads (without
 * holding the manager's lock), the others wait on a condition variable. A
 * failed load is reported to everyone who waited for it; the next request
 * tries again. One reaper thread per manager unloads models whose keep-alive
 * expired (a timed wait on a condition variable until the earliest expiry).
 *
 * Lifetime: manager_get returns a counted reference; every successful
 * manager_get is paired with one manager_release when the caller (a handler,
 * or a stream that outlives its handler) no longer uses the model. A model
 * with references is never unloaded; one without may be (idle keep-alive,
 * memory budget, manager_unload), so a pointer must not be used after its
 * release.
 *
 * Keep-alive: when the last reference is released, the model stays loaded
 * for its keep-alive (default 5 minutes, manager_params.keep_alive_ms), then
 * the reaper unloads it. 0 unloads it as soon as it is idle; a negative value
 * keeps it until manager_unload, eviction or shutdown. Every request sets the
 * model's keep-alive: its own (manager_opts.keep_alive_ms, Ollama's
 * `keep_alive`) or else the model's base keep-alive, which is the manager's
 * default, or what manager_load was given (LM Studio's load with a TTL).
 *
 * Memory budget (manager_params.memory_budget, default 75% of physical RAM):
 * before a model's KV cache and buffers are allocated, its estimated size
 * (the file, which is mapped and read whole for every token, + the KV cache
 * for n_ctx x n_slots + compute buffers and logits) is reserved. When the
 * loaded models leave too little room, idle models (no references; whatever
 * their keep-alive) are unloaded, least recently used first. When even that
 * cannot make room the load fails: ERR_NOMEM when the model alone is larger
 * than the budget, ERR_OVERLOADED when busy models hold the memory (try
 * again later); the detail names how much is needed and how much is free.
 *
 * Instances: a model loaded by manager_get has the instance id of its
 * canonical name; manager_load may give another id (LM Studio's
 * `instance_id`) or another context length, which makes another instance of
 * the same file. manager_get(name) takes an instance whose id is name
 * exactly, else the instance keyed by the canonical name, else any loaded
 * instance of that model, else loads one.
 *
 * Errors: ERR_NOT_FOUND naming the model (unknown name, or no name and no
 * default); ERR_UNSUPPORTED naming the architecture (a family the runtime
 * cannot execute); ERR_NOMEM / ERR_OVERLOADED from the budget (above);
 * ERR_CONFLICT from manager_load for an instance id already loaded with
 * another context; otherwise what model_open/tok_load/engine_new report.
 */
#ifndef PARLEY_ENGINE_MANAGER_H
#define PARLEY_ENGINE_MANAGER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/embedq.h"
#include "engine/engine.h"
#include "model/family.h"
#include "model/model.h"
#include "model/registry.h"
#include "tmpl/tmpl.h"
#include "tok/tok.h"

typedef struct manager manager;

#define MANAGER_KEEP_ALIVE_DEFAULT_MS (5 * 60 * 1000) /* 5 minutes */
#define MANAGER_KEEP_ALIVE_FOREVER (-1)

typedef struct manager_params {
  int32_t n_slots;  /* engine slots per model (--parallel); 0 = 4 */
  int64_t n_ctx;    /* positions per slot (--ctx-size); 0 = the trained context */
  int n_threads;    /* compute threads per engine; 0 = the online CPUs */
  bool keep_alive_set;   /* false: keep-alive is MANAGER_KEEP_ALIVE_DEFAULT_MS */
  int64_t keep_alive_ms; /* idle time before unloading: > 0 ms, 0 = as soon
                            as idle, < 0 = never (--keep-alive) */
  int64_t memory_budget; /* bytes the loaded models may take; 0 = 75% of
                            physical RAM; < 0 = no limit (--memory-budget) */
  enum model_kv_type kv_type; /* the engines' KV cache (--cache-type); 0 = F16 */
  int32_t queue_max;     /* requests waiting per engine before new ones get
                            ERR_OVERLOADED (--queue-max); 0 = 64 */
  int32_t n_checkpoints; /* recurrent-state checkpoints per slot of a hybrid
                            model (--rs-checkpoints; engine_params.
                            n_checkpoints: 0 = ENGINE_CHECKPOINTS, < 0 = none) */
} manager_params;

/* Per-request / per-load options (all zero = the defaults). */
typedef struct manager_opts {
  bool keep_alive_set;     /* apply keep_alive_ms */
  int64_t keep_alive_ms;   /* as manager_params.keep_alive_ms */
  int64_t n_ctx;           /* manager_load: positions per slot; 0 = the
                              manager's (ignored by manager_get_opts) */
  const char *instance_id; /* manager_load: the instance's id; NULL = the
                              canonical name (ignored by manager_get_opts) */
} manager_opts;

/* One loaded model. Everything is read-only for callers except through the
 * engine's and the embedding lock's own rules. */
typedef struct manager_model {
  char *name;              /* canonical registry name */
  char *instance_id;       /* this instance's id (name, unless manager_load
                              gave another) */
  registry_entry *entry;   /* deep copy of the registry entry */
  model *m;
  tok *t;
  family_info fam;
  tmpl *chat;              /* the chat template, NULL when the family has none */
  tmpl *chat_tools;        /* the tool_use variant, or NULL (use chat) */
  char *bos, *eos;         /* token texts for the template, or NULL */
  engine *eng;             /* NULL for encoder-only models (bert) */
  /* Embeddings: the batcher (its model context is made on first use);
   * NULL for models that do not embed. */
  embedq *embq;
  int64_t loaded_at;       /* wall seconds */
  int64_t n_ctx;           /* positions per slot (the embedding context's
                              for encoder-only models) */
  int32_t n_slots;         /* engine slots (1 for encoder-only models) */
  uint64_t bytes;          /* estimated memory: file + KV cache +
                              recurrent state + buffers */
  uint64_t file_bytes, kv_bytes, rs_bytes, buf_bytes; /* the estimate's parts
                              (rs: hybrid models' per-slot recurrent state) */
  struct manager *owner;   /* the manager that loaded it */
  /* Under the manager's lock: */
  int32_t refs;            /* manager_get minus manager_release */
  int64_t last_used_ns;    /* monotonic, at the last release (or the load) */
  int64_t keep_alive_ms;   /* the current keep-alive (the last request's) */
  int64_t base_keep_alive_ms; /* what a request without its own gets */
} manager_model;

int manager_new(registry *r, const manager_params *p, manager **out);
/* Stops the reaper and every engine and frees every loaded model. */
void manager_free(manager *mg);

/* The loaded model for a request's model name (NULL or "" = the default),
 * loading it when needed; a counted reference (see Lifetime). */
int manager_get(manager *mg, const char *name, manager_model **out);
/* manager_get with per-request options (o may be NULL): keep_alive_ms sets
 * the model's keep-alive from now on (Ollama's keep_alive: -1 forever, 0
 * unload as soon as this request is done). */
int manager_get_opts(manager *mg, const char *name, const manager_opts *o, manager_model **out);
/* A chat model for a feature whose request names none (Deepgram's /read):
 * the default model when one is configured (--default-model, or the only
 * model), else the most recently used loaded model that chats, else the
 * registry's smallest runnable chat model, loading it when needed. A counted
 * reference, as manager_get. ERR_UNAVAILABLE saying what to set when no
 * chat model exists at all. */
int manager_get_chat(manager *mg, manager_model **out);
/* Gives back a reference from manager_get. NULL is ignored. */
void manager_release(manager_model *mm);
/* Sets the keep-alive of a model the caller holds a reference to (for an
 * adapter that learns it after manager_get). */
void manager_set_keep_alive(manager_model *mm, int64_t keep_alive_ms);

/* Loads a model now (LM Studio's /api/v1/models/load, Ollama's empty
 * generate). o->n_ctx overrides the context per slot, o->instance_id names
 * the instance, o->keep_alive_ms becomes the instance's base keep-alive (its
 * TTL; -1 = until unloaded). Already loaded and compatible: nothing is
 * loaded, the keep-alive is refreshed. Loaded under the same canonical name
 * with another context and no instance id given: a new instance "NAME:2"
 * (":3", ...). With out NULL no reference is kept (the keep-alive starts
 * now); with out it is a reference to release. */
int manager_load(manager *mg, const char *name, const manager_opts *o, manager_model **out);

/* Unloads the instance with id name, or every instance of the model name
 * resolves to: at once when idle (returns after it is freed), else as soon
 * as its last reference is released (its keep-alive becomes 0; a later
 * request sets it again). ERR_NOT_FOUND when nothing of that name is
 * loaded. */
int manager_unload(manager *mg, const char *name);

/* A snapshot of one loaded instance (Ollama /api/ps, LM Studio's
 * `state: loaded`). */
typedef struct manager_loaded {
  char *instance_id;
  registry_entry *entry;   /* deep copy: name, path, size, quant, arch,
                              family, caps, context_length, digest */
  uint64_t bytes;          /* estimated memory (manager_model.bytes) */
  uint64_t kv_bytes;       /* its KV cache part */
  int64_t n_ctx;           /* positions per slot */
  int32_t n_slots;
  int32_t refs;            /* requests using it now */
  int64_t loaded_at;       /* wall seconds */
  int64_t keep_alive_ms;   /* current keep-alive (< 0 = forever) */
  int64_t expires_at_ms;   /* wall milliseconds when it unloads if no new
                              request comes (for a busy model: now + its
                              keep-alive); 0 = never */
} manager_loaded;

/* Every READY instance, most recently used first. *out is NULL when none. */
int manager_list_loaded(manager *mg, manager_loaded **out, size_t *n);
void manager_loaded_free(manager_loaded *v, size_t n);

/* Estimated bytes of the loaded models and the budget (UINT64_MAX = no
 * limit), for metrics and admin. */
void manager_memory(manager *mg, uint64_t *used, uint64_t *budget);

/* True when the model can embed (an architecture with model_embed). */
bool manager_model_can_embed(const manager_model *mm);

/* Embeds tokens (pooled, normalized) into out[n_embd] through the model's
 * embedding batcher (batched with other requests' inputs). */
int manager_model_embed(manager_model *mm, const int32_t *tokens, int64_t n, float *out);
/* Embeds n inputs into out[n][n_embd] through the batcher, in batched
 * forward passes shared with other requests; on failure *failed is the
 * first failing input (embedq_embed). ERR_OVERLOADED when the batcher's
 * queue is full. */
int manager_model_embed_many(manager_model *mm, size_t n, const int32_t *const *tokens, const int64_t *lens,
                             float *out, size_t *failed);

/* Number of models loaded now (for tests and admin). */
int manager_n_loaded(manager *mg);

/* Parses a keep-alive duration into milliseconds: a number is seconds
 * ("300", "1.5"; Ollama's rule), else Go-style units ("5m", "30s", "1h30m",
 * "500ms"); any negative value ("-1", "-1m") is forever (-1), "0" is 0.
 * ERR_INVALID with the text in the detail. */
int manager_parse_keep_alive(const char *s, int64_t *ms);

/* Physical RAM in bytes (0 when unknown). */
uint64_t manager_physical_memory(void);

#endif
