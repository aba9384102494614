/*
 * store_int.h - what the files of src/store/ share and nobody else sees: the
 * store struct, the statement cache, SQLite error mapping, the paged-query
 * helper and small row helpers.
 *
 * Locking rule for everything declared here: the caller holds s->mu
 * (store_lock) from store_stmt() until it is done with the statement, and a
 * cached statement is never used by two loops at once (no function iterates
 * a statement while calling another that prepares the same SQL).
 */
#ifndef PARLEY_STORE_STORE_INT_H
#define PARLEY_STORE_STORE_INT_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* The migrations: store_migrations[i] brings the schema from version i to
 * i + 1 (migrations.c). */
extern const char *const store_migrations[];
extern const size_t store_n_migrations;

struct store_stmt_slot {
  char *sql;           /* key: the SQL text (owned copy) */
  uint64_t hash;
  sqlite3_stmt *stmt;
};

struct store {
  sqlite3 *db;
  pthread_mutex_t mu;  /* recursive; guards db, the cache and tx_depth */
  char *dir;           /* data_dir as given */
  char *db_path;       /* dir/parley.db */
  char *blob_dir;      /* dir/blobs */
  char *spool_dir;     /* dir/spool */
  int lock_fd;         /* holds flock(LOCK_EX) on dir/parley.lock */
  struct store_stmt_slot *slots; /* open-addressing table, n_slots a power of two */
  size_t n_slots;
  size_t n_used;
  int tx_depth;        /* 0 outside store_begin; >1 inside savepoints */
};

void store_lock(store *s);
void store_unlock(store *s);

/* A cached, reset statement for this SQL text (prepared on first use). */
int store_stmt(store *s, const char *sql, sqlite3_stmt **out);
/* Resets the statement and clears its bindings (call after every use). */
void store_stmt_done(sqlite3_stmt *st);
/* Maps a SQLite result code to ERR_* and sets the detail "<what>: <sqlite message>". */
int store_sqlite_err(store *s, int rc, const char *what);
/* Steps a statement with no result rows to completion. */
int store_step_done(store *s, sqlite3_stmt *st, const char *what);

/* Binds text or NULL. */
int store_bind_text(sqlite3_stmt *st, int i, const char *v);
/* Binds an optional time: 0 becomes NULL. */
int store_bind_opt_time(sqlite3_stmt *st, int i, int64_t v);
/* Copies a text column (NULL stays NULL). Sets *oom on allocation failure. */
char *store_col_text(sqlite3_stmt *st, int i, bool *oom);

/* A growable array of rows of elem_size bytes (zeroed on growth). */
struct store_rows {
  void *items;
  size_t n;
  size_t cap;
  size_t elem_size;
};
/* Pointer to a new zeroed element, or NULL when out of memory. */
void *store_rows_push(struct store_rows *r);

/* Reads the current row of st into elem; returns 0 or ERR_NOMEM. */
typedef int (*store_row_read_fn)(sqlite3_stmt *st, void *elem);
typedef void (*store_row_free_fn)(void *elem);

/* A paged listing over one table (see store_page in store.h). */
struct store_page_spec {
  const char *from;          /* table */
  const char *cols;          /* select list, read by read() */
  const char *id_col;        /* column the cursors name ("id", "item_id") */
  const char *key[2];        /* integer columns giving a total order; key[1] may be NULL */
  const char *scope;         /* extra WHERE term using ?1..?3, or NULL */
  const char *scope_args[3]; /* bound to ?1..?3 */
  int n_scope_args;
  const char *what;          /* for messages: "file", "response item" */
};
/* Runs the listing; rows land in out (elem_size set by the caller), in the
 * requested order, at most page->limit of them. Caller holds the lock. */
int store_page_run(store *s, const struct store_page_spec *spec, const store_page *page, store_row_read_fn read,
                   store_row_free_fn free_row, struct store_rows *out, bool *has_more);

/* Blob helpers for store.c: sweep temp files at open, and orphans older
 * than max_age_s whose name no row holds (blob.c). */
int store_blob_sweep(store *s, int64_t now, int64_t max_age_s);
/* Whether a blob name is well formed (32 lowercase hex digits). */
bool store_blob_name_ok(const char *name);

/* Steps st (a DELETE ... RETURNING blob) to completion, collecting the
 * well-formed names of column 0 into names (elem_size STORE_BLOB_NAME_CAP).
 * Caller holds the lock; st is reset on return. */
int store_blob_names_collect(store *s, sqlite3_stmt *st, struct store_rows *names, const char *what);
/* Deletes the collected blobs (logging failures: they become orphans that a
 * later sweep removes) and frees names. Call without holding the lock. */
void store_blob_names_delete(store *s, struct store_rows *names);

#endif
