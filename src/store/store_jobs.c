/*
 * store_jobs.c - long-running jobs (model downloads) and ephemeral realtime
 * keys: small tables with simple lifetimes.
 *
 * Jobs are rewritten often (progress), so the progress update is one
 * UPDATE of a cached statement. Ephemeral keys are looked up by a hash the
 * caller computed; a key is valid while now < expires_at, and purging is a
 * separate call so a lookup never writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "store/store_int.h"

/* ---- jobs ------------------------------------------------------------------ */

#define JOB_COLS "id, kind, name, state, bytes_done, bytes_total, error, created_at, updated_at, payload"

void store_job_free(store_job *j) {
  if (!j) return;
  free(j->id);
  free(j->kind);
  free(j->name);
  free(j->state);
  free(j->error);
  free(j->payload);
  memset(j, 0, sizeof *j);
}

void store_job_list_free(store_job_list *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n_items; i++) store_job_free(&l->items[i]);
  free(l->items);
  memset(l, 0, sizeof *l);
}

static int job_read(sqlite3_stmt *st, store_job *j) {
  bool oom = false;
  j->id = store_col_text(st, 0, &oom);
  j->kind = store_col_text(st, 1, &oom);
  j->name = store_col_text(st, 2, &oom);
  j->state = store_col_text(st, 3, &oom);
  j->bytes_done = sqlite3_column_int64(st, 4);
  j->bytes_total = sqlite3_column_int64(st, 5);
  j->error = store_col_text(st, 6, &oom);
  j->created_at = sqlite3_column_int64(st, 7);
  j->updated_at = sqlite3_column_int64(st, 8);
  j->payload = store_col_text(st, 9, &oom);
  return oom ? ERR_NOMEM : 0;
}

int store_job_upsert(store *s, const store_job *j) {
  if (!j->id || !*j->id) return err_set(ERR_INVALID, "job row: id is missing");
  if (!j->kind || !*j->kind) return err_set(ERR_INVALID, "job %s: kind is missing", j->id);
  if (!j->state || !*j->state) return err_set(ERR_INVALID, "job %s: state is missing", j->id);
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s,
                      "INSERT INTO jobs (id, kind, name, state, bytes_done, bytes_total, error, created_at,"
                      " updated_at, payload) VALUES (?1, ?2, coalesce(?3, ''), ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                      " ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, name = excluded.name,"
                      " state = excluded.state, bytes_done = excluded.bytes_done,"
                      " bytes_total = excluded.bytes_total, error = excluded.error,"
                      " updated_at = excluded.updated_at, payload = excluded.payload",
                      &st);
  if (!rc) {
    store_bind_text(st, 1, j->id);
    store_bind_text(st, 2, j->kind);
    store_bind_text(st, 3, j->name);
    store_bind_text(st, 4, j->state);
    sqlite3_bind_int64(st, 5, j->bytes_done);
    sqlite3_bind_int64(st, 6, j->bytes_total);
    store_bind_text(st, 7, j->error);
    sqlite3_bind_int64(st, 8, j->created_at);
    sqlite3_bind_int64(st, 9, j->updated_at ? j->updated_at : j->created_at);
    store_bind_text(st, 10, j->payload);
    char what[160];
    snprintf(what, sizeof what, "storing job %s", j->id);
    rc = store_step_done(s, st, what);
  }
  store_unlock(s);
  return rc;
}

int store_job_get(store *s, const char *id, store_job *out) {
  memset(out, 0, sizeof *out);
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s, "SELECT " JOB_COLS " FROM jobs WHERE id = ?1", &st);
  if (!rc) {
    store_bind_text(st, 1, id);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
      if (job_read(st, out)) rc = err_set(ERR_NOMEM, "reading job %s", id);
    } else if (step == SQLITE_DONE) {
      rc = err_set(ERR_NOT_FOUND, "no job with id '%s'", id);
    } else {
      rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "reading a job row");
    }
    store_stmt_done(st);
  }
  store_unlock(s);
  if (rc) store_job_free(out);
  return rc;
}

int store_job_list_all(store *s, const char *kind, store_job_list *out) {
  memset(out, 0, sizeof *out);
  struct store_rows rows = {.elem_size = sizeof(store_job)};
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s,
                      kind ? "SELECT " JOB_COLS " FROM jobs WHERE kind = ?1 ORDER BY created_at, seq"
                           : "SELECT " JOB_COLS " FROM jobs ORDER BY created_at, seq",
                      &st);
  if (!rc) {
    if (kind) store_bind_text(st, 1, kind);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
      store_job *j = store_rows_push(&rows);
      if (!j || job_read(st, j)) {
        rc = err_set(ERR_NOMEM, "listing jobs");
        break;
      }
    }
    if (!rc && step != SQLITE_DONE) rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "listing jobs");
    store_stmt_done(st);
  }
  store_unlock(s);
  out->items = rows.items;
  out->n_items = rows.n;
  if (rc) store_job_list_free(out);
  return rc;
}

int store_job_update_progress(store *s, const char *id, const char *state, int64_t bytes_done,
                              int64_t bytes_total, const char *error, int64_t updated_at) {
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s,
                      "UPDATE jobs SET state = coalesce(?2, state), bytes_done = ?3, bytes_total = ?4,"
                      " error = coalesce(?5, error), updated_at = ?6 WHERE id = ?1",
                      &st);
  if (!rc) {
    store_bind_text(st, 1, id);
    store_bind_text(st, 2, state);
    sqlite3_bind_int64(st, 3, bytes_done);
    sqlite3_bind_int64(st, 4, bytes_total);
    store_bind_text(st, 5, error);
    sqlite3_bind_int64(st, 6, updated_at);
    rc = store_step_done(s, st, "updating job progress");
    if (!rc && sqlite3_changes(s->db) == 0) rc = err_set(ERR_NOT_FOUND, "no job with id '%s'", id);
  }
  store_unlock(s);
  return rc;
}

int store_job_delete(store *s, const char *id) {
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s, "DELETE FROM jobs WHERE id = ?1", &st);
  if (!rc) {
    store_bind_text(st, 1, id);
    rc = store_step_done(s, st, "deleting a job");
    if (!rc && sqlite3_changes(s->db) == 0) rc = err_set(ERR_NOT_FOUND, "no job with id '%s'", id);
  }
  store_unlock(s);
  return rc;
}

/* ---- ephemeral keys ------------------------------------------------------------- */

void store_ekey_free(store_ekey *k) {
  if (!k) return;
  free(k->key_hash);
  free(k->session);
  memset(k, 0, sizeof *k);
}

int store_ekey_put(store *s, const store_ekey *k) {
  if (!k->key_hash || !*k->key_hash) return err_set(ERR_INVALID, "ephemeral key: key_hash is missing");
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s,
                      "INSERT INTO ephemeral_keys (key_hash, created_at, expires_at, session)"
                      " VALUES (?1, ?2, ?3, ?4)",
                      &st);
  if (!rc) {
    store_bind_text(st, 1, k->key_hash);
    sqlite3_bind_int64(st, 2, k->created_at);
    sqlite3_bind_int64(st, 3, k->expires_at);
    store_bind_text(st, 4, k->session);
    rc = store_step_done(s, st, "storing an ephemeral key");
  }
  store_unlock(s);
  return rc;
}

int store_ekey_lookup(store *s, const char *key_hash, int64_t now, store_ekey *out) {
  memset(out, 0, sizeof *out);
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s,
                      "SELECT key_hash, created_at, expires_at, session FROM ephemeral_keys"
                      " WHERE key_hash = ?1 AND expires_at > ?2",
                      &st);
  if (!rc) {
    store_bind_text(st, 1, key_hash);
    sqlite3_bind_int64(st, 2, now);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
      bool oom = false;
      out->key_hash = store_col_text(st, 0, &oom);
      out->created_at = sqlite3_column_int64(st, 1);
      out->expires_at = sqlite3_column_int64(st, 2);
      out->session = store_col_text(st, 3, &oom);
      if (oom) rc = err_set(ERR_NOMEM, "reading an ephemeral key");
    } else if (step == SQLITE_DONE) {
      /* The hash is not echoed: it is derived from a secret. */
      rc = err_set(ERR_NOT_FOUND, "no valid ephemeral key with that value");
    } else {
      rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "looking up an ephemeral key");
    }
    store_stmt_done(st);
  }
  store_unlock(s);
  if (rc) store_ekey_free(out);
  return rc;
}

int store_ekey_purge(store *s, int64_t now, size_t *n_purged) {
  if (n_purged) *n_purged = 0;
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s, "DELETE FROM ephemeral_keys WHERE expires_at <= ?1", &st);
  if (!rc) {
    sqlite3_bind_int64(st, 1, now);
    rc = store_step_done(s, st, "purging ephemeral keys");
    if (!rc && n_purged) *n_purged = (size_t)sqlite3_changes(s->db);
  }
  store_unlock(s);
  return rc;
}
