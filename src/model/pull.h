/*
 * pull.h - pulling models by name: from the Hugging Face hub
 * ("hf.co/owner/repo:QUANT", "owner/repo" with a file pattern) and from the
 * Ollama registry ("llama3.2:1b", OCI-style manifest and sha256-addressed
 * blobs), into parley's models directory, tracked as jobs in the store.
 *
 *   puller *p; puller_new(&(pull_config){.models_dir = d, .st = st, .reg = reg}, &p);
 *   char id[PULL_ID_CAP]; bool have;
 *   pull_start(p, "llama3.2:1b", NULL, id, sizeof id, &have);   // worker thread
 *   pull_status s; pull_get(p, id, &s); ... pull_status_free(&s);
 *   pull_wait(p, id, 250);            // until the job changes, or 250 ms
 *   pull_cancel(p, id);
 *   pull_remove(p, "llama3.2:1b");    // only models parley downloaded
 *   puller_free(p);                   // cancels and joins running jobs
 *
 * On disk: each pulled model is one folder under the models directory,
 * named from the model name ("hf.co/o/r:Q4_K_M" -> "hf.co--o--r@Q4_K_M",
 * "llama3.2:1b" -> "llama3.2@1b"), holding the files and a sidecar
 * REGISTRY_PULL_MANIFEST (model/registry.h) that names the model, its files
 * and digests. The registry lists such a folder as one entry under that
 * name with `pulled` set; only those can be removed. A file is downloaded
 * to "<file>.partial" (resumed with an HTTP Range request when it exists),
 * verified (sha256 when the source gives it: Ollama layer digests, the HF
 * LFS oid or x-linked-etag), and renamed into place only when every file of the model is
 * complete; the sidecar is written before the model file's rename, so the
 * registry never lists a model whose file is incomplete.
 *
 * Endpoints (for mirrors, and for tests on loopback): pull_config fields,
 * else $HF_ENDPOINT (default https://huggingface.co) and
 * $PARLEY_OLLAMA_REGISTRY (default https://registry.ollama.ai). $HF_TOKEN,
 * when set, is sent to the HF endpoint as a bearer token.
 *
 * Jobs: kind "download" rows in the store (store_job_*), states below;
 * progress is written at most once a second. A job that a restart
 * interrupted keeps its row; pull_start with the same name reuses the row
 * and resumes the .partial files, and puller_resume_interrupted() restarts
 * every such job (the server does at start).
 *
 * Threads: every function may be called from any thread. Each job runs on a
 * worker thread of its own; at most PULL_MAX_ACTIVE download at once, the
 * rest wait in state queued. Status reads copy under a short lock.
 *
 * Errors: functions return 0 or a negative ERR_* with err_detail(); a job's
 * failure is in its status (err_code and error text naming the model, the
 * file and what went wrong: "registry answered 404 for ...", "digest
 * mismatch ...", "disk full writing ...", "connection dropped after N of M
 * bytes ...").
 */
#ifndef PARLEY_MODEL_PULL_H
#define PARLEY_MODEL_PULL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/registry.h"
#include "store/store.h"

#define PULL_ID_CAP 32
#define PULL_MAX_ACTIVE 2
#define PULL_JOB_KIND "download"

typedef enum pull_state {
  PULL_QUEUED = 0,
  PULL_DOWNLOADING,
  PULL_VERIFYING,
  PULL_COMPLETED,
  PULL_FAILED,
  PULL_CANCELLED,
  PULL_STATE_COUNT
} pull_state;

/* "queued", "downloading", "verifying", "completed", "failed", "cancelled". */
const char *pull_state_name(pull_state s);
/* The state of a stored name; false when unknown. */
bool pull_state_parse(const char *name, pull_state *out);
/* completed, failed or cancelled. */
bool pull_state_is_final(pull_state s);

/* ---- names (pure) -------------------------------------------------------- */

typedef enum pull_source { PULL_SOURCE_HF = 0, PULL_SOURCE_OLLAMA } pull_source;

#define PULL_PART_CAP 128
#define PULL_FILE_CAP 512
#define PULL_NAME_CAP 800

/* A parsed model reference. */
typedef struct pull_ref {
  pull_source src;
  char host[PULL_PART_CAP];  /* Ollama: registry host ("registry.ollama.ai"); HF: "" */
  char ns[PULL_PART_CAP];    /* Ollama namespace ("library"); HF owner */
  char repo[PULL_PART_CAP];  /* Ollama model; HF repository */
  char tag[PULL_PART_CAP];   /* Ollama tag ("latest"); HF quant ("" = choose) */
  char file[PULL_FILE_CAP];  /* HF: a file path or fnmatch pattern ("" = by quant) */
  char name[PULL_NAME_CAP];  /* the registry name ("llama3.2:1b",
                                "hf.co/o/r:Q4_K_M"); for an HF pull by
                                pattern, set once the file is chosen */
} pull_ref;

/* Parses a name as a user writes it:
 *   hf.co/OWNER/REPO[:QUANT]   huggingface.co/..., hf://..., https://huggingface.co/OWNER/REPO[/resolve|blob/main/FILE]
 *   OWNER/REPO/PATH.gguf       a file of an HF repository
 *   OWNER/REPO with file_pattern (non-NULL, non-empty): HF, files matching the pattern
 *   [HOST/][NAMESPACE/]MODEL[:TAG]   the Ollama registry (namespace "library", tag "latest")
 * ERR_INVALID with a detail naming the bad part. Pure. */
int pull_ref_parse(const char *name, const char *file_pattern, pull_ref *out);

/* The folder name (under the models dir) for a registry name: '/' becomes
 * "--", ':' becomes '@'; every other byte outside [A-Za-z0-9._-] is
 * rejected (ERR_INVALID), as are "." and "..". Pure. */
int pull_dir_name(const char *name, char *out, size_t cap);

/* Chooses the files of an HF repository to download: the model (all shards
 * of a split model, "X-00001-of-00003.gguf" ...) matching quant (the quant
 * label of the file name, case-insensitive) or pattern (fnmatch on the path,
 * or on the base name), else Q4_K_M, else the only model file; plus a
 * multimodal projector ("mmproj" in the name) when the repository has one.
 * paths are the repository's file paths. Fills idx (cap entries) with
 * indexes into paths, the model's shards first in order; *n_model gets the
 * number of model shards, *n_out the total. ERR_NOT_FOUND / ERR_INVALID
 * (ambiguous) with a detail listing the choices. Pure. */
int pull_hf_select(const char *const *paths, size_t n_paths, const char *quant, const char *pattern, size_t *idx,
                   size_t cap, size_t *n_model, size_t *n_out);

/* One layer of an Ollama manifest. */
typedef enum pull_layer_kind {
  PULL_LAYER_MODEL = 0,
  PULL_LAYER_PROJECTOR,
  PULL_LAYER_TEMPLATE,
  PULL_LAYER_SYSTEM,
  PULL_LAYER_PARAMS,
  PULL_LAYER_OTHER, /* license, messages, config...: not downloaded */
} pull_layer_kind;

typedef struct pull_layer {
  pull_layer_kind kind;
  char digest[72];  /* "sha256:<64 hex>" */
  int64_t size;
} pull_layer;

/* Parses an Ollama (OCI / Docker v2) manifest: its "layers" array. Every
 * layer needs a "sha256:<64 hex>" digest and a non-negative size; exactly
 * the first model layer is kept. ERR_PARSE naming the JSON path
 * ("layers[2].digest: ..."). Fills up to cap layers (ERR_TOO_LARGE beyond).
 * Pure. */
int pull_ollama_manifest_parse(const char *json, size_t len, pull_layer *out, size_t cap, size_t *n_out);

/* ---- the puller ----------------------------------------------------------- */

typedef struct pull_config {
  const char *models_dir;      /* required; created when missing */
  store *st;                   /* job rows; NULL: jobs live in memory only */
  registry *reg;               /* refreshed after a pull or a removal; may be NULL */
  const char *hf_endpoint;     /* NULL: $HF_ENDPOINT, else https://huggingface.co */
  const char *ollama_registry; /* NULL: $PARLEY_OLLAMA_REGISTRY, else https://registry.ollama.ai */
} pull_config;

typedef struct puller puller;

int puller_new(const pull_config *cfg, puller **out);
/* Cancels running jobs (their .partial files stay for a resume) and joins
 * the workers. NULL is a no-op. */
void puller_free(puller *p);

/* Options of one pull; NULL fields mean "not given". */
typedef struct pull_opts {
  const char *file;  /* HF: file path or pattern ("*Q8_0*.gguf") */
  const char *quant; /* HF: quant ("Q8_0"); overrides a ":QUANT" in the name;
                        with it, "OWNER/REPO" names an HF repository */
} pull_opts;

/* Starts pulling name (see pull_ref_parse) on a worker thread and writes
 * the job id into id (cap >= PULL_ID_CAP). A job already running for the
 * same name is returned instead of a second one; a stored unfinished job
 * of that name is reused (its .partial files resume). *already (may be
 * NULL) is true when the registry already has a model of that name that
 * parley pulled: the job still runs (to check the source for a newer
 * version) but finds its files in place. ERR_INVALID for a bad name. */
int pull_start(puller *p, const char *name, const pull_opts *opts, char *id, size_t cap, bool *already);

/* One downloaded file of a job (an Ollama layer or an HF file). */
typedef struct pull_file_status {
  char *file;       /* name in the model's folder */
  char *digest;     /* "sha256:<hex>", or NULL when the source gives none */
  int64_t done;     /* bytes on disk */
  int64_t total;    /* -1 when unknown */
} pull_file_status;

/* A copy of a job's state (free with pull_status_free). */
typedef struct pull_status {
  char id[PULL_ID_CAP];
  char *name;             /* as requested */
  char *model;            /* the registry name, NULL until resolved */
  pull_state state;
  int64_t bytes_done;     /* all files */
  int64_t bytes_total;    /* all files; 0 until known */
  double rate;            /* bytes/s over the last seconds, 0 when idle */
  int err_code;           /* 0, or ERR_* when failed */
  char *error;            /* NULL unless failed or cancelled */
  pull_file_status *files;
  size_t n_files;
  size_t current;         /* index of the file being downloaded (n_files: none) */
  int64_t created_at;     /* Unix seconds */
  int64_t started_at;     /* 0 until downloading */
  int64_t completed_at;   /* 0 until final */
} pull_status;
void pull_status_free(pull_status *s);

/* The job's state. ERR_NOT_FOUND for an unknown id (also a job known only
 * to the store: its row is reported). */
int pull_get(puller *p, const char *id, pull_status *out);
/* Every job this puller knows (running, and finished this run), and the
 * store's download rows from earlier runs; oldest first. */
int pull_list(puller *p, pull_status **out, size_t *n);
void pull_list_free(pull_status *v, size_t n);
/* Blocks until the job's status changes (progress, state) or timeout_ms
 * pass. Returns 0, or ERR_NOT_FOUND. */
int pull_wait(puller *p, const char *id, int timeout_ms);
/* Asks a job to stop; it ends in state cancelled (the .partial files stay).
 * ERR_NOT_FOUND, or ERR_CONFLICT when it already ended. */
int pull_cancel(puller *p, const char *id);
/* Restarts every stored download job that a restart interrupted (state
 * queued, downloading or verifying). *n_started (may be NULL) gets the count. */
int puller_resume_interrupted(puller *p, size_t *n_started);

/* Deletes a model parley pulled: its folder's files, the sidecar, the folder.
 * ERR_NOT_FOUND for an unknown name; ERR_FORBIDDEN for a model parley did
 * not download (another tool's files, --model paths, files placed in the
 * models dir by hand); ERR_CONFLICT while a job pulls that name. Models
 * already loaded keep running from their mapping. *removed (may be NULL,
 * cap bytes) gets the canonical name. */
int pull_remove(puller *p, const char *name, char *removed, size_t cap);

/* ---- the transfer (pull_http.c) ----------------------------------------- */

/* One transfer: what to fetch and where, a progress callback, results. */
typedef struct pull_dl {
  const char *url;
  const char *partial;          /* the .partial path (resumed when present) */
  const char *sha256;           /* expected 64 lowercase hex, or NULL (then an
                                   x-linked-etag sha256 of the answer is used) */
  int64_t size;                 /* expected bytes, -1 unknown */
  const char *bearer;           /* Authorization token or NULL */
  /* callbacks: progress(ctx, done, total) returns true to cancel */
  bool (*progress)(void *ctx, int64_t done, int64_t total);
  void *ctx;
  /* results */
  bool resumed;                 /* a Range request continued the file */
  int64_t resumed_from;
  char sha256_got[65];          /* what the file hashed to */
} pull_dl;

/* Downloads url into d->partial, resuming from its current length with a
 * Range request, then checks the size and the sha256. On a digest mismatch
 * the .partial is removed (its bytes can never become the right file); on
 * other failures it stays for the next attempt. ERR_CANCELLED when the
 * progress callback asked to stop; ERR_CONFLICT when another process holds
 * the .partial; ERR_IO ("disk full writing ..."), ERR_NOT_FOUND (404),
 * ERR_UNAVAILABLE (5xx, connection failures and drops), ERR_CORRUPT (size
 * or digest mismatch). */
int pull_download(pull_dl *d);

/* GETs a small document (a manifest, a file listing) into *out (malloc'd,
 * NUL-terminated, at most max bytes; *len may be NULL). accept and bearer
 * may be NULL. cancelled (may be NULL) is polled during the transfer; true
 * stops it with ERR_CANCELLED. Errors as pull_download, ERR_TOO_LARGE
 * beyond max. */
int pull_fetch(const char *url, const char *accept, const char *bearer, size_t max, char **out, size_t *len,
               bool (*cancelled)(void *ctx), void *ctx);

/* Hashes a whole file: 64 lowercase hex digits into hex (cap >= 65). */
int pull_sha256_file(const char *path, char *hex, size_t cap);

#endif
