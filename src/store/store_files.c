/*
 * store_files.c - the files table (OpenAI Files): rows that describe an
 * uploaded file whose bytes are a blob (blob.c).
 *
 * Invariant: a files row names a blob that exists. Creation commits the blob
 * before inserting the row (and deletes the blob if the insert fails);
 * deletion removes the row before the blob. See blob.c for the crash rules.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/log.h"
#include "store/store_int.h"

#define FILE_COLS "id, object, purpose, filename, bytes, created_at, expires_at, status, status_details, mime_type, blob"

void store_file_free(store_file *f) {
  if (!f) return;
  free(f->id);
  free(f->object);
  free(f->purpose);
  free(f->filename);
  free(f->status);
  free(f->status_details);
  free(f->mime_type);
  free(f->blob);
  memset(f, 0, sizeof *f);
}

void store_file_list_free(store_file_list *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n_items; i++) store_file_free(&l->items[i]);
  free(l->items);
  memset(l, 0, sizeof *l);
}

static int file_read(sqlite3_stmt *st, void *elem) {
  store_file *f = elem;
  bool oom = false;
  f->id = store_col_text(st, 0, &oom);
  f->object = store_col_text(st, 1, &oom);
  f->purpose = store_col_text(st, 2, &oom);
  f->filename = store_col_text(st, 3, &oom);
  f->bytes = sqlite3_column_int64(st, 4);
  f->created_at = sqlite3_column_int64(st, 5);
  f->expires_at = sqlite3_column_int64(st, 6); /* NULL reads as 0 */
  f->status = store_col_text(st, 7, &oom);
  f->status_details = store_col_text(st, 8, &oom);
  f->mime_type = store_col_text(st, 9, &oom);
  f->blob = store_col_text(st, 10, &oom);
  return oom ? ERR_NOMEM : 0;
}

static void file_free_elem(void *elem) { store_file_free(elem); }

int store_file_insert(store *s, const store_file *f) {
  if (!f->id || !*f->id) return err_set(ERR_INVALID, "file row: id is missing");
  if (!f->purpose) return err_set(ERR_INVALID, "file %s: purpose is missing", f->id);
  if (!f->filename) return err_set(ERR_INVALID, "file %s: filename is missing", f->id);
  if (f->bytes < 0) return err_set(ERR_INVALID, "file %s: bytes %lld is negative", f->id, (long long)f->bytes);
  if (!store_blob_name_ok(f->blob)) {
    return err_set(ERR_INVALID, "file %s: blob name '%s' is malformed", f->id, f->blob ? f->blob : "(null)");
  }
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s,
                      "INSERT INTO files (id, object, purpose, filename, bytes, created_at, expires_at, status,"
                      " status_details, mime_type, blob)"
                      " VALUES (?1, coalesce(?2, 'file'), ?3, ?4, ?5, ?6, ?7, coalesce(?8, 'processed'), ?9, ?10, ?11)",
                      &st);
  if (!rc) {
    store_bind_text(st, 1, f->id);
    store_bind_text(st, 2, f->object);
    store_bind_text(st, 3, f->purpose);
    store_bind_text(st, 4, f->filename);
    sqlite3_bind_int64(st, 5, f->bytes);
    sqlite3_bind_int64(st, 6, f->created_at);
    store_bind_opt_time(st, 7, f->expires_at);
    store_bind_text(st, 8, f->status);
    store_bind_text(st, 9, f->status_details);
    store_bind_text(st, 10, f->mime_type);
    store_bind_text(st, 11, f->blob);
    char what[160];
    snprintf(what, sizeof what, "inserting file %s", f->id);
    rc = store_step_done(s, st, what);
  }
  store_unlock(s);
  return rc;
}

int store_file_add_spooled(store *s, const store_file *f, const char *spool_path, char *blob_out, size_t cap,
                           int64_t *bytes_out) {
  if (cap < STORE_BLOB_NAME_CAP) return err_set(ERR_TOO_LARGE, "blob name buffer of %zu bytes", cap);
  char name[STORE_BLOB_NAME_CAP], path[4096];
  int rc = store_blob_adopt(s, spool_path, name, sizeof name);
  if (rc) return rc;
  struct stat st;
  rc = store_blob_path(s, name, path, sizeof path);
  if (!rc && stat(path, &st) != 0) rc = err_set(ERR_IO, "stat of blob %s: %s", path, strerror(errno));
  if (!rc) {
    store_file row = *f;
    row.blob = name;
    row.bytes = (int64_t)st.st_size;
    rc = store_file_insert(s, &row);
  }
  if (rc) {
    store_blob_delete(s, name);
    return rc;
  }
  memcpy(blob_out, name, STORE_BLOB_NAME_CAP);
  if (bytes_out) *bytes_out = (int64_t)st.st_size;
  return 0;
}

int store_file_get(store *s, const char *id, store_file *out) {
  memset(out, 0, sizeof *out);
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s, "SELECT " FILE_COLS " FROM files WHERE id = ?1", &st);
  if (!rc) {
    store_bind_text(st, 1, id);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
      rc = file_read(st, out);
      if (rc) rc = err_set(ERR_NOMEM, "reading file %s", id);
    } else if (step == SQLITE_DONE) {
      rc = err_set(ERR_NOT_FOUND, "no file with id '%s'", id);
    } else {
      rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "reading a file row");
    }
    store_stmt_done(st);
  }
  store_unlock(s);
  if (rc) store_file_free(out);
  return rc;
}

int store_file_list_page(store *s, const char *purpose, const store_page *page, store_file_list *out) {
  memset(out, 0, sizeof *out);
  struct store_page_spec spec = {
      .from = "files",
      .cols = FILE_COLS,
      .id_col = "id",
      .key = {"created_at", "seq"},
      .scope = purpose ? "purpose = ?1" : NULL,
      .scope_args = {purpose},
      .n_scope_args = purpose ? 1 : 0,
      .what = "file",
  };
  struct store_rows rows = {.elem_size = sizeof(store_file)};
  store_lock(s);
  int rc = store_page_run(s, &spec, page, file_read, file_free_elem, &rows, &out->has_more);
  store_unlock(s);
  if (rc) return rc;
  out->items = rows.items;
  out->n_items = rows.n;
  return 0;
}

int store_file_delete(store *s, const char *id) {
  store_lock(s);
  sqlite3_stmt *st;
  char blob[STORE_BLOB_NAME_CAP] = "";
  int rc = store_stmt(s, "DELETE FROM files WHERE id = ?1 RETURNING blob", &st);
  if (!rc) {
    store_bind_text(st, 1, id);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
      const char *b = (const char *)sqlite3_column_text(st, 0);
      if (store_blob_name_ok(b)) memcpy(blob, b, STORE_BLOB_NAME_CAP);
      while ((step = sqlite3_step(st)) == SQLITE_ROW) {
      }
      if (step != SQLITE_DONE) rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "deleting a file row");
    } else if (step == SQLITE_DONE) {
      rc = err_set(ERR_NOT_FOUND, "no file with id '%s'", id);
    } else {
      rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "deleting a file row");
    }
    store_stmt_done(st);
  }
  store_unlock(s);
  if (rc || !blob[0]) return rc;
  /* The row is gone; a blob that cannot be removed now is an orphan that
   * the next store_open sweeps, so this is not the caller's failure. */
  if (store_blob_delete(s, blob) != 0) LOG_WARN("store", "file %s: %s", id, err_detail());
  return 0;
}

int store_file_purge_expired(store *s, int64_t now, size_t *n_purged) {
  if (n_purged) *n_purged = 0;
  struct store_rows names = {.elem_size = STORE_BLOB_NAME_CAP};
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s, "DELETE FROM files WHERE expires_at IS NOT NULL AND expires_at <= ?1 RETURNING blob", &st);
  size_t n = 0;
  if (!rc) {
    sqlite3_bind_int64(st, 1, now);
    rc = store_blob_names_collect(s, st, &names, "purging expired files");
    n = (size_t)sqlite3_changes(s->db);
  }
  store_unlock(s);
  /* Rows are gone even if collecting names failed part way (the statement
   * ran to completion); blobs not removed here become orphans. */
  store_blob_names_delete(s, &names);
  if (!rc && n_purged) *n_purged = n;
  return rc;
}
