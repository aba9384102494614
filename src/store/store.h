/*
 * store.h - parley's persistent state: one SQLite database (data_dir/parley.db)
 * plus a directory of blobs (data_dir/blobs/) for file contents.
 *
 * What lives here: uploaded files and multipart uploads (OpenAI Files and
 * Uploads), stored Responses with their input/output items, Conversations
 * with their items, model download jobs, and ephemeral realtime keys.
 *
 * What does not: JSON and HTTP. Callers hand in the serialized bodies they
 * want kept (TEXT) and plain values; this module never looks inside them.
 *
 * Threads: one store is shared by every thread. It holds one SQLite
 * connection (opened SQLITE_OPEN_FULLMUTEX) behind one recursive mutex; every
 * call below takes the mutex for its duration, and store_begin() keeps it
 * until the matching store_commit()/store_rollback(), so a transaction is
 * private to the thread that began it. Calls are short; nothing here waits
 * on the network. One data_dir serves one process: store_open() takes an
 * exclusive lock (data_dir/parley.lock) and fails with ERR_CONFLICT if another
 * process holds it.
 *
 * Ownership: rows returned by *_get / *_list are filled by the store and
 * owned by the caller; every char* field is malloc'ed and released by the
 * row type's *_free() (which frees the fields, not the struct, and zeroes it).
 * Rows passed *in* are only read.
 *
 * Time: every *_at field is Unix seconds, chosen by the caller (so tests can
 * pass fixed clocks). 0 in an optional time field (expires_at) means "none".
 *
 * Errors: 0 or a negative ERR_* code with err_detail() naming the row or
 * file: ERR_NOT_FOUND (no such id), ERR_EXISTS (duplicate id), ERR_CORRUPT
 * (not a database), ERR_UNSUPPORTED (database newer than this binary),
 * ERR_UNAVAILABLE (database busy), ERR_IO, ERR_NOMEM, ERR_INVALID.
 *
 * Start reading at store_open(); docs/storage.md has the schema, the crash
 * rules for blobs and a traced file upload.
 */
#ifndef PARLEY_STORE_STORE_H
#define PARLEY_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct store store;

/* ---- open, close, generic helpers ---------------------------------------- */

/* Creates data_dir (mode 0700), data_dir/blobs and data_dir/spool if
 * missing, opens data_dir/parley.db, applies pending schema migrations and
 * sweeps leftovers of a crash (blob temp files; blobs no row names, older
 * than an hour; spool files). */
int store_open(const char *data_dir, store **out);
/* Finalizes cached statements and closes the database; NULL is a no-op. No
 * call may be in flight on another thread. */
void store_close(store *s);

/* Number of migrations this binary knows (the latest schema version). */
int store_schema_latest(void);
/* Schema version of the open database (PRAGMA user_version). */
int store_schema_version(store *s, int *version);
const char *store_data_dir(const store *s);
/* data_dir/spool: a directory on the blobs' filesystem, for the HTTP layer
 * to spool uploads into, so that store_blob_adopt is a rename rather than a
 * copy. store_open creates it and removes whatever a previous run left there
 * (files only; subdirectories are left alone). */
const char *store_spool_dir(const store *s);

/* Runs one or more SQL statements with no parameters and no results (used by
 * migrations; available for maintenance). */
int store_exec(store *s, const char *sql);

/* Transactions. store_begin takes the store's mutex and starts a write
 * transaction (BEGIN IMMEDIATE); nested begins on the same thread become
 * savepoints. Every store_begin must be paired with exactly one
 * store_commit or store_rollback on the same thread. A failed commit rolls
 * back and returns the error. Per-table calls may be made in between. */
int store_begin(store *s);
int store_commit(store *s);
void store_rollback(store *s);

/* ---- paging ---------------------------------------------------------------- */

enum store_order { STORE_ORDER_ASC = 0, STORE_ORDER_DESC = 1 };

#define STORE_PAGE_DEFAULT 20
#define STORE_PAGE_MAX 10000

/* One page request. after/before name rows by id: `after` returns the rows
 * that follow that row in the chosen order; `before` the rows that precede it
 * (the page nearest to it, still in the chosen order). Both may be given.
 * limit 0 means STORE_PAGE_DEFAULT; above STORE_PAGE_MAX is ERR_RANGE.
 * An id that names no row in the listed set is ERR_NOT_FOUND. */
typedef struct store_page {
  const char *after;
  const char *before;
  size_t limit;
  enum store_order order;
} store_page;

/* ---- blobs ------------------------------------------------------------------ */

/* Blob names are 32 lowercase hex digits; the file is data_dir/blobs/<name>. */
#define STORE_BLOB_NAME_LEN 32
#define STORE_BLOB_NAME_CAP (STORE_BLOB_NAME_LEN + 1)

typedef struct store_blob_writer store_blob_writer;

/* Starts a new blob: a temp file (blobs/.tmp-<random>) that no reader sees. */
int store_blob_writer_open(store *s, store_blob_writer **out);
int store_blob_writer_write(store_blob_writer *w, const void *data, size_t n);
uint64_t store_blob_writer_bytes(const store_blob_writer *w);
/* fsyncs the file, renames it to its final name, fsyncs the directory and
 * writes the name into name_out (cap >= STORE_BLOB_NAME_CAP). Always frees w;
 * on failure the temp file is removed. */
int store_blob_writer_commit(store_blob_writer *w, char *name_out, size_t cap);
/* Removes the temp file and frees w. NULL is a no-op. */
void store_blob_writer_abort(store_blob_writer *w);

/* Moves an existing complete file (e.g. an HTTP spool file) into the blob
 * directory under a new name: fsync + rename when on the same filesystem,
 * otherwise copy through a blob writer and unlink the source. On success the
 * source path no longer exists. */
int store_blob_adopt(store *s, const char *src_path, char *name_out, size_t cap);
/* Full path of a blob; ERR_INVALID for a malformed name, ERR_TOO_LARGE when
 * cap is too small. Does not check that the blob exists. */
int store_blob_path(const store *s, const char *name, char *out, size_t cap);
/* Removes a blob; a missing blob is not an error. */
int store_blob_delete(store *s, const char *name);

/* ---- files (OpenAI Files) --------------------------------------------------- */

typedef struct store_file {
  char *id;             /* "file-..." */
  char *object;         /* object kind, "file" */
  char *purpose;        /* "assistants", "batch", "fine-tune", "user_data", ... */
  char *filename;
  int64_t bytes;
  int64_t created_at;
  int64_t expires_at;   /* 0: never */
  char *status;         /* "uploaded" | "processed" | "error" */
  char *status_details; /* NULL when none */
  char *mime_type;      /* NULL when unknown */
  char *blob;           /* blob name holding the content */
} store_file;
void store_file_free(store_file *f);

typedef struct store_file_list {
  store_file *items;
  size_t n_items;
  bool has_more;
} store_file_list;
void store_file_list_free(store_file_list *l);

/* Inserts a row whose blob is already committed. ERR_EXISTS on a duplicate
 * id. On failure the blob is left alone: the caller that committed it
 * deletes it (or use store_file_add_spooled, which does). object and status
 * may be NULL ("file", "processed"). */
int store_file_insert(store *s, const store_file *f);
/* The all-or-nothing path for an upload: adopts spool_path as a new blob
 * (see store_blob_adopt), then inserts f with its blob and bytes replaced by
 * the new blob's name and size (f->blob and f->bytes are ignored); if the
 * row cannot be inserted the blob is deleted, and on any failure no blob
 * remains (the spool file itself may be gone). On success blob_out
 * (cap >= STORE_BLOB_NAME_CAP) receives the blob name and *bytes_out (may be
 * NULL) the size. */
int store_file_add_spooled(store *s, const store_file *f, const char *spool_path, char *blob_out, size_t cap,
                           int64_t *bytes_out);
int store_file_get(store *s, const char *id, store_file *out);
/* Files ordered by (created_at, insertion); purpose NULL lists all. */
int store_file_list_page(store *s, const char *purpose, const store_page *page, store_file_list *out);
/* Deletes the row, then its blob (a crash in between leaves an orphan blob
 * that store_open sweeps). ERR_NOT_FOUND when absent. */
int store_file_delete(store *s, const char *id);

/* Deletes every file with 0 < expires_at <= now (rows, then blobs);
 * *n_purged (may be NULL) gets the count. */
int store_file_purge_expired(store *s, int64_t now, size_t *n_purged);

/* ---- uploads (OpenAI Uploads: a file sent in parts) ------------------------- */

typedef struct store_upload {
  char *id;           /* "upload_..." */
  int64_t created_at;
  int64_t expires_at; /* 0: never */
  char *filename;
  char *purpose;
  int64_t bytes;      /* the size the client declared */
  char *mime_type;    /* NULL when unknown */
  char *status;       /* "pending" | "completed" | "cancelled" | "expired" */
  char *file_id;      /* the file made on completion; NULL before */
} store_upload;
void store_upload_free(store_upload *u);

typedef struct store_upload_part {
  char *id;           /* "part_..." */
  char *upload_id;
  int64_t created_at;
  int64_t bytes;
  char *blob;
} store_upload_part;
void store_upload_part_free(store_upload_part *p);

typedef struct store_upload_part_list {
  store_upload_part *items;
  size_t n_items;
} store_upload_part_list;
void store_upload_part_list_free(store_upload_part_list *l);

/* Creates a pending upload (status NULL means "pending"). */
int store_upload_create(store *s, const store_upload *u);
int store_upload_get(store *s, const char *id, store_upload *out);
/* Moves a pending upload to status ("cancelled", "expired"); ERR_CONFLICT
 * when it is no longer pending. Its parts are deleted (rows, then blobs). */
int store_upload_finish(store *s, const char *id, const char *status);
/* Registers a part whose blob is already committed (store_blob_writer_*).
 * ERR_NOT_FOUND without the upload, ERR_CONFLICT when it is not pending.
 * On failure the blob is left alone: the caller deletes it. */
int store_upload_part_add(store *s, const store_upload_part *p);
/* The upload's parts in the order they were added. */
int store_upload_parts_list(store *s, const char *upload_id, store_upload_part_list *out);
/* Completes a pending upload: concatenates the named parts, in the order
 * given, into one new blob (without holding the store lock), then in one
 * transaction inserts file f (its blob and bytes replaced), marks the upload
 * "completed" with file_id = f->id and deletes the part rows; the part blobs
 * are removed after the commit. ERR_INVALID when a part id is not of this
 * upload or repeats, or when the parts' total differs from the declared
 * bytes; ERR_CONFLICT when the upload is not pending (also when another
 * thread completed it meanwhile). On failure nothing changes and the new blob
 * is removed. blob_out (cap >= STORE_BLOB_NAME_CAP) receives the file's blob. */
int store_upload_complete(store *s, const char *upload_id, const char *const *part_ids, size_t n_part_ids,
                          const store_file *f, char *blob_out, size_t cap);

/* ---- items (of responses and of conversations) ------------------------------ */

typedef struct store_item {
  char *item_id;      /* the item's API id ("msg_...") */
  char *kind;         /* response items: "input" | "output"; conversation items: NULL */
  char *body;         /* serialized item, as the caller handed it in */
  int64_t seq;        /* position within its owner, assigned by the store (from 1) */
  int64_t created_at;
} store_item;
void store_item_free(store_item *it);

typedef struct store_item_list {
  store_item *items;
  size_t n_items;
  bool has_more;
} store_item_list;
void store_item_list_free(store_item_list *l);

/* ---- responses (OpenAI Responses) -------------------------------------------- */

typedef struct store_response {
  char *id;                   /* "resp_..." */
  int64_t created_at;
  int64_t updated_at;
  char *status;               /* "queued" | "in_progress" | "completed" | ... */
  char *model;
  char *previous_response_id; /* NULL when none */
  char *conversation_id;      /* NULL when none */
  char *body;                 /* the serialized response object */
  bool stored;                /* the request's `store` flag */
} store_response;
void store_response_free(store_response *r);

/* Inserts, or replaces every column of an existing response with the same id
 * (created_at is kept). Items are untouched. */
int store_response_put(store *s, const store_response *r);
int store_response_get(store *s, const char *id, store_response *out);
/* Deletes the response and (cascade) its items. */
int store_response_delete(store *s, const char *id);
/* Appends items after the response's last one, in one transaction; seq
 * is assigned by the store (items[i].seq is ignored). kind must be "input" or
 * "output". ERR_NOT_FOUND when the response does not exist. */
int store_response_items_append(store *s, const char *response_id, const store_item *items, size_t n_items);
/* Items in seq order; kind NULL lists both kinds. Cursors name item ids
 * (if an id repeats within a response, its first occurrence is used). */
int store_response_items_list(store *s, const char *response_id, const char *kind, const store_page *page,
                              store_item_list *out);

/* ---- conversations (OpenAI Conversations) ------------------------------------- */

typedef struct store_conversation {
  char *id;         /* "conv_..." */
  int64_t created_at;
  int64_t updated_at;
  char *metadata;   /* serialized metadata object; NULL when none */
} store_conversation;
void store_conversation_free(store_conversation *c);

/* Creates the conversation and its first items in one transaction. */
int store_conversation_create(store *s, const store_conversation *c, const store_item *items, size_t n_items);
int store_conversation_get(store *s, const char *id, store_conversation *out);
int store_conversation_update_metadata(store *s, const char *id, const char *metadata, int64_t updated_at);
/* Deletes the conversation and (cascade) its items. */
int store_conversation_delete(store *s, const char *id);
/* Appends items (item ids must be unique within the conversation:
 * ERR_EXISTS otherwise, and nothing is appended). */
int store_conversation_items_append(store *s, const char *conversation_id, const store_item *items,
                                    size_t n_items);
int store_conversation_items_list(store *s, const char *conversation_id, const store_page *page,
                                  store_item_list *out);
int store_conversation_item_get(store *s, const char *conversation_id, const char *item_id, store_item *out);
int store_conversation_item_delete(store *s, const char *conversation_id, const char *item_id);

/* ---- jobs (model downloads and other long work) -------------------------------- */

typedef struct store_job {
  char *id;
  char *kind;         /* "download", ... */
  char *name;         /* what the job works on (a model name) */
  char *state;        /* "queued" | "running" | "done" | "failed" | "cancelled" | ... */
  int64_t bytes_done;
  int64_t bytes_total; /* 0: unknown */
  char *error;        /* NULL unless failed */
  int64_t created_at;
  int64_t updated_at;
  char *payload;      /* serialized job parameters; NULL when none */
} store_job;
void store_job_free(store_job *j);

typedef struct store_job_list {
  store_job *items;
  size_t n_items;
} store_job_list;
void store_job_list_free(store_job_list *l);

/* Inserts or replaces the job with this id (created_at of an existing job is kept). */
int store_job_upsert(store *s, const store_job *j);
int store_job_get(store *s, const char *id, store_job *out);
/* Every job (kind NULL) or those of one kind, oldest first. */
int store_job_list_all(store *s, const char *kind, store_job_list *out);
/* Updates progress; state and error NULL keep the current values. */
int store_job_update_progress(store *s, const char *id, const char *state, int64_t bytes_done,
                              int64_t bytes_total, const char *error, int64_t updated_at);
int store_job_delete(store *s, const char *id);

/* ---- ephemeral keys (realtime client secrets) ----------------------------------- */

/* The store never sees a key itself: callers pass a hash of it (hex). */
typedef struct store_ekey {
  char *key_hash;
  int64_t created_at;
  int64_t expires_at;
  char *session;      /* serialized session configuration; NULL when none */
} store_ekey;
void store_ekey_free(store_ekey *k);

/* Inserts a key; ERR_EXISTS when the hash is already present. */
int store_ekey_put(store *s, const store_ekey *k);
/* The key with this hash if it exists and now < expires_at; otherwise
 * ERR_NOT_FOUND (an expired key is reported as not found). */
int store_ekey_lookup(store *s, const char *key_hash, int64_t now, store_ekey *out);
/* Deletes every key with expires_at <= now; *n_purged (may be NULL) gets the count. */
int store_ekey_purge(store *s, int64_t now, size_t *n_purged);

#endif
