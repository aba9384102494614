/*
 * pull_int.h - shared by pull.c (jobs, workers) and pull_source.c (what to
 * download from each source, the sidecar manifest); not for other modules.
 *
 * A plan is what a source resolves a name to: the registry name, the folder
 * under the models dir, and the files with their URLs, sizes and digests.
 */
#ifndef PARLEY_MODEL_PULL_INT_H
#define PARLEY_MODEL_PULL_INT_H

#include "model/pull.h"

#define PULL_MAX_FILES 64
#define PULL_MAX_DOC (8u << 20) /* bytes of a manifest or file listing */

typedef struct pull_pfile {
  char *url;
  char *dest;             /* file name in the model's folder */
  char *digest;           /* "sha256:<hex>" or NULL */
  int64_t size;           /* -1 unknown */
  pull_layer_kind kind;   /* HF files: MODEL (every shard) or PROJECTOR */
} pull_pfile;

typedef struct pull_plan {
  pull_source src;
  char name[PULL_NAME_CAP];   /* registry name */
  char dir[PULL_NAME_CAP];    /* folder name under the models dir */
  char *origin;               /* manifest URL / repository URL, for the sidecar */
  pull_pfile files[PULL_MAX_FILES];
  size_t n_files;
  size_t n_model;             /* model files (shards) */
} pull_plan;

void pull_plan_free(pull_plan *pl);

/* err_set(rc, "<fmt>: <the current detail>"): prefixes the calling thread's
 * error detail (copied first: err_set's buffer cannot be its own argument). */
int pull_err_prefix(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Endpoints and credentials the sources use. */
typedef struct pull_endpoints {
  const char *hf;             /* "https://huggingface.co" */
  const char *ollama;         /* "https://registry.ollama.ai" */
  const char *hf_token;       /* or NULL */
  bool (*cancelled)(void *ctx); /* polled while fetching; may be NULL */
  void *cancel_ctx;
} pull_endpoints;

/* Resolves a parsed reference into a plan (network: the manifest or the
 * file listing). quant/file override the reference's for HF. */
int pull_plan_resolve(const pull_endpoints *ep, const pull_ref *ref, const char *quant, const char *file,
                      pull_plan *out);

/* Writes dir/REGISTRY_PULL_MANIFEST for plan atomically (temp, fsync, rename). */
int pull_sidecar_write(const char *dir, const pull_plan *pl, int64_t now);
/* Reads the digest and size recorded for file dest in dir's sidecar; false
 * when there is no sidecar or no such file. digest gets "" when none. */
bool pull_sidecar_file(const char *dir, const char *dest, char *digest, size_t cap, int64_t *size);
/* The sidecar's "name" (malloc'd) or NULL; *files gets the recorded file
 * names (malloc'd array of malloc'd strings, *n_files entries). */
char *pull_sidecar_read(const char *dir, char ***files, size_t *n_files);

#endif
