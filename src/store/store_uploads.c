/*
 * store_uploads.c - multipart uploads (OpenAI Uploads): a pending upload
 * collects parts (each a committed blob plus an upload_parts row); completing
 * it concatenates chosen parts into one new blob and turns it into a file.
 *
 * Invariants: parts are only added to, and only removed from, a pending
 * upload; once an upload leaves "pending" it has no parts. Completion copies
 * bytes without holding the store lock (parts can be gigabytes), then
 * re-checks that the upload is still pending inside the transaction that
 * inserts the file, so two racing completions produce one file: the loser
 * gets ERR_CONFLICT and its copy is removed. Part blobs are deleted after the
 * commit (blob.c's rule: rows first, then blobs).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"
#include "store/store_int.h"

#define UPLOAD_COLS "id, created_at, expires_at, filename, purpose, bytes, mime_type, status, file_id"
#define COPY_CHUNK (64 * 1024)

void store_upload_free(store_upload *u) {
  if (!u) return;
  free(u->id);
  free(u->filename);
  free(u->purpose);
  free(u->mime_type);
  free(u->status);
  free(u->file_id);
  memset(u, 0, sizeof *u);
}

void store_upload_part_free(store_upload_part *p) {
  if (!p) return;
  free(p->id);
  free(p->upload_id);
  free(p->blob);
  memset(p, 0, sizeof *p);
}

void store_upload_part_list_free(store_upload_part_list *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n_items; i++) store_upload_part_free(&l->items[i]);
  free(l->items);
  memset(l, 0, sizeof *l);
}

static int upload_read(sqlite3_stmt *st, store_upload *u) {
  bool oom = false;
  u->id = store_col_text(st, 0, &oom);
  u->created_at = sqlite3_column_int64(st, 1);
  u->expires_at = sqlite3_column_int64(st, 2);
  u->filename = store_col_text(st, 3, &oom);
  u->purpose = store_col_text(st, 4, &oom);
  u->bytes = sqlite3_column_int64(st, 5);
  u->mime_type = store_col_text(st, 6, &oom);
  u->status = store_col_text(st, 7, &oom);
  u->file_id = store_col_text(st, 8, &oom);
  return oom ? ERR_NOMEM : 0;
}

int store_upload_create(store *s, const store_upload *u) {
  if (!u->id || !*u->id) return err_set(ERR_INVALID, "upload row: id is missing");
  if (!u->filename || !u->purpose) return err_set(ERR_INVALID, "upload %s: filename or purpose is missing", u->id);
  if (u->bytes < 0) return err_set(ERR_INVALID, "upload %s: bytes %lld is negative", u->id, (long long)u->bytes);
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s,
                      "INSERT INTO uploads (id, created_at, expires_at, filename, purpose, bytes, mime_type, status)"
                      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, coalesce(?8, 'pending'))",
                      &st);
  if (!rc) {
    store_bind_text(st, 1, u->id);
    sqlite3_bind_int64(st, 2, u->created_at);
    store_bind_opt_time(st, 3, u->expires_at);
    store_bind_text(st, 4, u->filename);
    store_bind_text(st, 5, u->purpose);
    sqlite3_bind_int64(st, 6, u->bytes);
    store_bind_text(st, 7, u->mime_type);
    store_bind_text(st, 8, u->status);
    char what[160];
    snprintf(what, sizeof what, "creating upload %s", u->id);
    rc = store_step_done(s, st, what);
  }
  store_unlock(s);
  return rc;
}

/* Reads an upload row; caller holds the lock. */
static int upload_get_locked(store *s, const char *id, store_upload *out) {
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st;
  int rc = store_stmt(s, "SELECT " UPLOAD_COLS " FROM uploads WHERE id = ?1", &st);
  if (rc) return rc;
  store_bind_text(st, 1, id);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    if (upload_read(st, out)) rc = err_set(ERR_NOMEM, "reading upload %s", id);
  } else if (step == SQLITE_DONE) {
    rc = err_set(ERR_NOT_FOUND, "no upload with id '%s'", id);
  } else {
    rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "reading an upload row");
  }
  store_stmt_done(st);
  if (rc) store_upload_free(out);
  return rc;
}

int store_upload_get(store *s, const char *id, store_upload *out) {
  store_lock(s);
  int rc = upload_get_locked(s, id, out);
  store_unlock(s);
  return rc;
}

/* ERR_NOT_FOUND / ERR_CONFLICT unless the upload exists and is pending. */
static int upload_check_pending(store *s, const char *id, int64_t *declared) {
  store_upload u;
  int rc = upload_get_locked(s, id, &u);
  if (rc) return rc;
  if (strcmp(u.status, "pending") != 0) rc = err_set(ERR_CONFLICT, "upload %s is %s, not pending", id, u.status);
  if (declared) *declared = u.bytes;
  store_upload_free(&u);
  return rc;
}

/* Deletes every part row of an upload, collecting their blobs. */
static int parts_delete(store *s, const char *upload_id, struct store_rows *names) {
  sqlite3_stmt *st;
  int rc = store_stmt(s, "DELETE FROM upload_parts WHERE upload_id = ?1 RETURNING blob", &st);
  if (rc) return rc;
  store_bind_text(st, 1, upload_id);
  return store_blob_names_collect(s, st, names, "deleting upload parts");
}

static int set_status(store *s, const char *id, const char *status, const char *file_id) {
  sqlite3_stmt *st;
  int rc = store_stmt(s, "UPDATE uploads SET status = ?2, file_id = coalesce(?3, file_id) WHERE id = ?1", &st);
  if (rc) return rc;
  store_bind_text(st, 1, id);
  store_bind_text(st, 2, status);
  store_bind_text(st, 3, file_id);
  return store_step_done(s, st, "updating an upload's status");
}

int store_upload_finish(store *s, const char *id, const char *status) {
  if (!status || !*status || strcmp(status, "pending") == 0) {
    return err_set(ERR_INVALID, "upload %s: cannot finish with status '%s'", id, status ? status : "(null)");
  }
  struct store_rows names = {.elem_size = STORE_BLOB_NAME_CAP};
  int rc = store_begin(s);
  if (rc) return rc;
  rc = upload_check_pending(s, id, NULL);
  if (!rc) rc = set_status(s, id, status, NULL);
  if (!rc) rc = parts_delete(s, id, &names);
  if (rc) {
    store_rollback(s);
    free(names.items);
    return rc;
  }
  rc = store_commit(s);
  if (rc) {
    free(names.items);
    return rc;
  }
  store_blob_names_delete(s, &names);
  return 0;
}

int store_upload_part_add(store *s, const store_upload_part *p) {
  if (!p->id || !*p->id) return err_set(ERR_INVALID, "upload part: id is missing");
  if (!p->upload_id) return err_set(ERR_INVALID, "upload part %s: upload_id is missing", p->id);
  if (p->bytes < 0) return err_set(ERR_INVALID, "upload part %s: bytes %lld is negative", p->id, (long long)p->bytes);
  if (!store_blob_name_ok(p->blob)) {
    return err_set(ERR_INVALID, "upload part %s: blob name '%s' is malformed", p->id, p->blob ? p->blob : "(null)");
  }
  store_lock(s);
  int rc = upload_check_pending(s, p->upload_id, NULL);
  sqlite3_stmt *st;
  if (!rc) {
    rc = store_stmt(s,
                    "INSERT INTO upload_parts (id, upload_id, created_at, bytes, blob) VALUES (?1, ?2, ?3, ?4, ?5)",
                    &st);
  }
  if (!rc) {
    store_bind_text(st, 1, p->id);
    store_bind_text(st, 2, p->upload_id);
    sqlite3_bind_int64(st, 3, p->created_at);
    sqlite3_bind_int64(st, 4, p->bytes);
    store_bind_text(st, 5, p->blob);
    char what[160];
    snprintf(what, sizeof what, "adding part %s", p->id);
    rc = store_step_done(s, st, what);
  }
  store_unlock(s);
  return rc;
}

static int part_read(sqlite3_stmt *st, store_upload_part *p) {
  bool oom = false;
  p->id = store_col_text(st, 0, &oom);
  p->upload_id = store_col_text(st, 1, &oom);
  p->created_at = sqlite3_column_int64(st, 2);
  p->bytes = sqlite3_column_int64(st, 3);
  p->blob = store_col_text(st, 4, &oom);
  return oom ? ERR_NOMEM : 0;
}

int store_upload_parts_list(store *s, const char *upload_id, store_upload_part_list *out) {
  memset(out, 0, sizeof *out);
  struct store_rows rows = {.elem_size = sizeof(store_upload_part)};
  store_lock(s);
  store_upload u;
  int rc = upload_get_locked(s, upload_id, &u);
  store_upload_free(&u);
  sqlite3_stmt *st;
  if (!rc) {
    rc = store_stmt(s,
                    "SELECT id, upload_id, created_at, bytes, blob FROM upload_parts WHERE upload_id = ?1 ORDER BY seq",
                    &st);
  }
  if (!rc) {
    store_bind_text(st, 1, upload_id);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
      store_upload_part *p = store_rows_push(&rows);
      if (!p || part_read(st, p)) {
        rc = err_set(ERR_NOMEM, "listing parts of upload %s", upload_id);
        break;
      }
    }
    if (!rc && step != SQLITE_DONE) rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "listing parts");
    store_stmt_done(st);
  }
  store_unlock(s);
  out->items = rows.items;
  out->n_items = rows.n;
  if (rc) store_upload_part_list_free(out);
  return rc;
}

/* ---- completion ------------------------------------------------------------------- */

static int cmp_str_ptr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Looks up the chosen parts (under the lock): their blob names in order,
 * and their total size checked against the declared size. */
static int completion_plan(store *s, const char *upload_id, const char *const *part_ids, size_t n,
                           char (*blobs)[STORE_BLOB_NAME_CAP]) {
  int64_t declared = 0, total = 0;
  int rc = upload_check_pending(s, upload_id, &declared);
  for (size_t i = 0; !rc && i < n; i++) {
    sqlite3_stmt *st;
    rc = store_stmt(s, "SELECT bytes, blob FROM upload_parts WHERE id = ?1 AND upload_id = ?2", &st);
    if (rc) break;
    store_bind_text(st, 1, part_ids[i]);
    store_bind_text(st, 2, upload_id);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
      const char *b = (const char *)sqlite3_column_text(st, 1);
      int64_t bytes = sqlite3_column_int64(st, 0);
      if (!store_blob_name_ok(b)) rc = err_set(ERR_CORRUPT, "part %s names a malformed blob", part_ids[i]);
      else if (__builtin_add_overflow(total, bytes, &total)) rc = err_set(ERR_RANGE, "upload %s: size overflows", upload_id);
      else memcpy(blobs[i], b, STORE_BLOB_NAME_CAP);
    } else if (step == SQLITE_DONE) {
      rc = err_set(ERR_INVALID, "part_ids[%zu]: '%s' is not a part of upload %s", i, part_ids[i], upload_id);
    } else {
      rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "reading an upload part");
    }
    store_stmt_done(st);
  }
  if (!rc && total != declared) {
    rc = err_set(ERR_INVALID, "upload %s: the parts hold %lld bytes but %lld were declared", upload_id,
                 (long long)total, (long long)declared);
  }
  return rc;
}

/* Concatenates part blobs into a new blob (no store lock held). */
static int concat_blobs(store *s, char (*blobs)[STORE_BLOB_NAME_CAP], size_t n, char *name_out) {
  store_blob_writer *w;
  int rc = store_blob_writer_open(s, &w);
  if (rc) return rc;
  char *chunk = malloc(COPY_CHUNK);
  if (!chunk) rc = err_set(ERR_NOMEM, "copy buffer");
  for (size_t i = 0; !rc && i < n; i++) {
    char path[4096];
    rc = store_blob_path(s, blobs[i], path, sizeof path);
    if (rc) break;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      rc = err_set(ERR_IO, "opening part blob %s: %s", path, strerror(errno));
      break;
    }
    for (;;) {
      ssize_t r = read(fd, chunk, COPY_CHUNK);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) rc = err_set(ERR_IO, "reading part blob %s: %s", path, strerror(errno));
      if (r <= 0) break;
      rc = store_blob_writer_write(w, chunk, (size_t)r);
      if (rc) break;
    }
    close(fd);
  }
  free(chunk);
  if (rc) {
    store_blob_writer_abort(w);
    return rc;
  }
  return store_blob_writer_commit(w, name_out, STORE_BLOB_NAME_CAP);
}

int store_upload_complete(store *s, const char *upload_id, const char *const *part_ids, size_t n_part_ids,
                          const store_file *f, char *blob_out, size_t cap) {
  if (cap < STORE_BLOB_NAME_CAP) return err_set(ERR_TOO_LARGE, "blob name buffer of %zu bytes", cap);
  if (!f->id || !*f->id) return err_set(ERR_INVALID, "upload %s: the file id is missing", upload_id);
  size_t bytes_needed;
  if (!size_mul(n_part_ids ? n_part_ids : 1, STORE_BLOB_NAME_CAP, &bytes_needed)) {
    return err_set(ERR_TOO_LARGE, "upload %s: %zu part ids", upload_id, n_part_ids);
  }
  /* Repeated part ids are refused (sorted copy, neighbours compared). */
  const char **sorted = malloc((n_part_ids ? n_part_ids : 1) * sizeof *sorted);
  char (*blobs)[STORE_BLOB_NAME_CAP] = malloc(bytes_needed);
  int rc = sorted && blobs ? 0 : err_set(ERR_NOMEM, "completing upload %s", upload_id);
  for (size_t i = 0; !rc && i < n_part_ids; i++) {
    if (!part_ids[i]) rc = err_set(ERR_INVALID, "part_ids[%zu] is missing", i);
    else sorted[i] = part_ids[i];
  }
  if (!rc && n_part_ids > 1) {
    qsort(sorted, n_part_ids, sizeof *sorted, cmp_str_ptr);
    for (size_t i = 1; !rc && i < n_part_ids; i++) {
      if (strcmp(sorted[i - 1], sorted[i]) == 0) rc = err_set(ERR_INVALID, "part id '%s' is repeated", sorted[i]);
    }
  }
  free(sorted);
  if (!rc) {
    store_lock(s);
    rc = completion_plan(s, upload_id, part_ids, n_part_ids, blobs);
    store_unlock(s);
  }
  char name[STORE_BLOB_NAME_CAP] = "";
  if (!rc) rc = concat_blobs(s, blobs, n_part_ids, name);
  free(blobs);
  if (rc) return rc;

  struct store_rows names = {.elem_size = STORE_BLOB_NAME_CAP};
  rc = store_begin(s);
  if (!rc) {
    int64_t declared = 0;
    rc = upload_check_pending(s, upload_id, &declared);
    if (!rc) {
      store_file row = *f;
      row.blob = name;
      row.bytes = declared;
      rc = store_file_insert(s, &row);
    }
    if (!rc) rc = set_status(s, upload_id, "completed", f->id);
    if (!rc) rc = parts_delete(s, upload_id, &names);
    if (rc) store_rollback(s);
    else rc = store_commit(s);
  }
  if (rc) {
    free(names.items);
    store_blob_delete(s, name);
    return rc;
  }
  store_blob_names_delete(s, &names);
  memcpy(blob_out, name, STORE_BLOB_NAME_CAP);
  return 0;
}
