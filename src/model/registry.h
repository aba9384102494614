/*
 * registry.h - the models parley can serve: one merged, named list built from
 * parley's own models directory, explicit --model paths, and the stores of
 * other tools that already hold GGUF files (Ollama, LM Studio, the Hugging
 * Face hub cache). Files are read in place, read-only; nothing is copied,
 * renamed or written in another tool's folders.
 *
 * Life cycle:
 *     registry *r; registry_new(&r);
 *     registry_set_models_dir(r, cfg.models_dir);
 *     registry_add_model(r, "/x/y.gguf", NULL);      // --model PATH
 *     registry_add_alias(r, "fast", "llama3.2:1b");  // --alias fast=llama3.2:1b
 *     registry_set_default(r, "fast");
 *     registry_refresh(r);                           // scan; again on demand
 *     registry_entry *e; registry_lookup(r, "Llama3.2:1B", &e); ... registry_entry_free(e);
 *     registry_free(r);
 *
 * Threads: every function may be called from any thread. Configuration
 * setters and lookups take a short lock; registry_refresh() scans without
 * holding it (one refresh at a time) and then swaps in a new immutable
 * snapshot. A registry_snapshot obtained with registry_snapshot_acquire()
 * stays valid and unchanged until released, whatever refreshes happen.
 *
 * Names (docs/models.md has the full rules):
 *   models dir   stem of the file; "sub/stem" for files in subfolders
 *   --model      the name given, else the file stem
 *   Ollama       "model:tag" for registry.ollama.ai/library, "ns/model:tag"
 *                for other namespaces, "host/ns/model:tag" for other hosts
 *   LM Studio    "publisher/model" (the folder), "publisher/model@QUANT" when
 *                the folder holds several GGUF files
 *   HF cache     "hf.co/owner/repo:QUANT"
 * A name two sources produce is kept by the first (in the order above) and
 * the other gets "@source" appended ("phi3@lmstudio").
 * Lookups: exact, then case-insensitive; a name without a tag tries
 * ":latest"; "hf.co/owner/repo" without a quant picks the only file or
 * Q4_K_M; "huggingface.co/" counts as "hf.co/"; aliases are resolved first.
 */
#ifndef PARLEY_MODEL_REGISTRY_H
#define PARLEY_MODEL_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/family.h"

typedef enum registry_source {
  REGISTRY_SOURCE_EXPLICIT = 0, /* --model PATH */
  REGISTRY_SOURCE_MODELS_DIR,   /* parley's own models directory */
  REGISTRY_SOURCE_OLLAMA,
  REGISTRY_SOURCE_LMSTUDIO,
  REGISTRY_SOURCE_HF,
  REGISTRY_SOURCE_COUNT
} registry_source;

/* "model", "parley", "ollama", "lmstudio", "huggingface"; "unknown" outside. */
const char *registry_source_name(registry_source s);

#define REGISTRY_QUANT_MAX 24
#define REGISTRY_DIGEST_MAX 80

/* One model. Strings are owned by the entry (or by the snapshot holding it). */
typedef struct registry_entry {
  char *name;                 /* stable, unique in one snapshot */
  registry_source source;
  char *path;                 /* the GGUF file as found (HF: the snapshot symlink) */
  char *projector;            /* multimodal projector GGUF, or NULL */
  char *template_path;        /* Ollama template layer blob, or NULL */
  char *system_path;          /* Ollama system layer blob, or NULL */
  char *params_path;          /* Ollama params layer blob (JSON), or NULL */
  uint64_t size;              /* bytes of the model file (symlinks followed;
                                 all shards for split files) */
  int64_t mtime;              /* modification time, seconds since the epoch */
  char quant[REGISTRY_QUANT_MAX]; /* "Q4_K_M", "F16"...; "" when unknown */
  char arch[64];              /* general.architecture; "" when unreadable */
  family_id family;
  uint32_t caps;              /* FAMILY_CAP_* */
  bool executable;            /* the runtime can run it (and it opened cleanly) */
  uint64_t context_length;    /* ARCH.context_length; 0 when absent */
  uint64_t n_params;          /* parameters of the file (model_file_params) */
  uint64_t n_params_active;   /* of them, what one token reads: < n_params
                                 for a mixture of experts, else equal */
  char digest[REGISTRY_DIGEST_MAX]; /* "sha256:<64 hex>" when the store names the
                                 blob by its content hash (Ollama, HF), else
                                 "fnv1a64:<16 hex>" of path, size and mtime */
  char *error;                /* NULL, or why the file cannot be used
                                 ("ERR_CORRUPT: tensor ... past the end") */
  bool pulled;                /* parley downloaded it (model/pull.h): a folder of
                                 the models dir with a REGISTRY_PULL_MANIFEST;
                                 only such models may be removed */
} registry_entry;

/* The sidecar manifest of a pulled model's folder (model/pull.h writes it):
 * {"name", "model", "projector"?, "template"?, "system"?, "params"?,
 *  "digest"?, "size"?, "files": [...]}. The folder is listed as one entry
 * under "name"; while "model" is missing (a pull in progress) it is not
 * listed at all. */
#define REGISTRY_PULL_MANIFEST "parley-pull.json"

void registry_entry_free(registry_entry *e);
/* Deep copy; NULL when out of memory. */
registry_entry *registry_entry_dup(const registry_entry *e);

typedef struct registry registry;
typedef struct registry_snapshot registry_snapshot;

int registry_new(registry **out);
void registry_free(registry *r);

/* parley's models directory (NULL: none). Takes effect at the next refresh. */
int registry_set_models_dir(registry *r, const char *dir);
/* Overrides where a source is looked for: NULL restores the default from the
 * environment, "" disables the source. Only OLLAMA, LMSTUDIO, HF and
 * MODELS_DIR accept a directory. Defaults:
 *   OLLAMA    $OLLAMA_MODELS, else ~/.ollama/models
 *   LMSTUDIO  $PARLEY_LMSTUDIO_MODELS, else ~/.lmstudio/models, else
 *             ~/.cache/lm-studio/models (the first that exists)
 *   HF        $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
 * $PARLEY_NO_EXTERNAL_MODELS=1 disables the three external stores. */
int registry_set_source_dir(registry *r, registry_source src, const char *dir);
/* Adds an explicit model file; name NULL means the file stem. ERR_EXISTS if
 * the name is already an explicit model or an alias. */
int registry_add_model(registry *r, const char *path, const char *name);
/* "alias" -> "target" (a model name or another alias; resolved at lookup).
 * ERR_INVALID for empty names, ERR_EXISTS for a second alias of that name. */
int registry_add_alias(registry *r, const char *alias, const char *target);
/* Removes an alias (case-insensitive) or an explicit model (exact name)
 * added at run time (Ollama's /api/delete of a copy or a created model);
 * an explicit model leaves the list at the next refresh. ERR_NOT_FOUND
 * when the name is neither. */
int registry_remove_name(registry *r, const char *name);
/* Parses "alias=target". */
int registry_add_alias_spec(registry *r, const char *spec);
/* The model used when a request names none (NULL clears it). */
int registry_set_default(registry *r, const char *name);

/* The configured aliases, in the order added, copied: *out is an array of
 * *n pairs (free with registry_aliases_free). */
typedef struct registry_alias {
  char *alias;
  char *target;
} registry_alias;
int registry_aliases(registry *r, registry_alias **out, size_t *n);
void registry_aliases_free(registry_alias *v, size_t n);
/* The configured default (malloc'd copy), or NULL when none is set. */
char *registry_default_name(registry *r);

/* Rescans every source and swaps in the new list. Files whose (path, size,
 * mtime) did not change are not reopened. Per-file problems become entry
 * errors; this fails only for ERR_NOMEM. */
int registry_refresh(registry *r);

/* Looks a name up (see the header comment for the rules) and returns a deep
 * copy in *out (free with registry_entry_free). ERR_NOT_FOUND with a detail
 * naming the model; ERR_INVALID for an empty name. */
int registry_lookup(registry *r, const char *name, registry_entry **out);
/* As registry_lookup, but a NULL/empty or unknown name gives the default
 * model (the configured default, else the only model when there is one). */
int registry_lookup_or_default(registry *r, const char *name, registry_entry **out);
/* The canonical name a request name resolves to, into out (cap bytes). */
int registry_resolve(registry *r, const char *name, char *out, size_t cap);

/* The current list, pinned: valid until registry_snapshot_release(). Never
 * NULL (an empty snapshot before the first refresh). Entries are sorted by
 * source (in enum order), then by name. */
registry_snapshot *registry_snapshot_acquire(registry *r);
void registry_snapshot_release(registry_snapshot *s);
size_t registry_snapshot_count(const registry_snapshot *s);
const registry_entry *registry_snapshot_at(const registry_snapshot *s, size_t i);
/* Exact name only (no aliases, no case folding); NULL when absent. */
const registry_entry *registry_snapshot_find(const registry_snapshot *s, const char *name);

/* Counters for tests and the admin API. */
typedef struct registry_stats {
  uint64_t n_refresh;     /* completed refreshes */
  uint64_t n_opened;      /* GGUF headers read (cache misses), all time */
  uint64_t n_cached;      /* GGUF headers served from the cache, all time */
} registry_stats;
void registry_get_stats(registry *r, registry_stats *out);

/* Quantization label found in a file name ("...-Q4_K_M.gguf" -> "Q4_K_M",
 * upper case) into out; false when the name holds none. */
bool registry_quant_from_filename(const char *filename, char *out, size_t cap);
/* Label of a general.file_type value (15 -> "Q4_K_M"); NULL when unknown. */
const char *registry_quant_from_file_type(uint32_t file_type);

#endif
