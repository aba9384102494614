/*
 * blob.c - file contents kept outside the database, in data_dir/blobs/.
 *
 * A blob is written under a temp name (.tmp-<32 hex>) that nothing reads,
 * fsync'ed, renamed to its final name (<32 hex>) and the directory fsync'ed.
 * rename() within one directory is atomic, so a crash at any point leaves
 * either a temp file or a complete blob under the final name, never a half
 * one. Temp files left by a crash are removed by store_open() (one process
 * owns a data directory: store_open holds parley.lock, so no live writer can
 * own a temp file at that moment).
 *
 * Rows name blobs (files.blob, upload_parts.blob). The rule that keeps rows
 * and blobs consistent: commit the blob first, then insert the row; if the
 * row fails, delete the blob. Deleting goes the other way: row first, then
 * blob. Either order can leave an orphan blob after a crash (never a row
 * without its blob); store_open sweeps orphans older than an hour, the age
 * guarding blobs that a caller committed but has not yet inserted.
 *
 * Names are generated here from the kernel's random source, and checked
 * (32 lowercase hex digits) wherever one comes back in, so a name can never
 * reach outside the blob directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "store/store_int.h"

#define BLOB_TMP_PREFIX ".tmp-"
#define BLOB_COPY_CHUNK (64 * 1024)

/* Tables whose rows name blobs; a blob named by none of them is an orphan. */
static const char *const store_blob_refs[] = {
    "SELECT 1 FROM files WHERE blob = ?1",
    "SELECT 1 FROM upload_parts WHERE blob = ?1",
};

struct store_blob_writer {
  store *s;
  int fd;
  uint64_t bytes;
  bool failed;
  char tmp_path[4096];
};

bool store_blob_name_ok(const char *name) {
  if (!name) return false;
  size_t i = 0;
  for (; name[i]; i++) {
    char c = name[i];
    if (i >= STORE_BLOB_NAME_LEN || !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return i == STORE_BLOB_NAME_LEN;
}

int store_blob_path(const store *s, const char *name, char *out, size_t cap) {
  if (!store_blob_name_ok(name)) return err_set(ERR_INVALID, "blob name '%s' is malformed", name ? name : "(null)");
  int n = snprintf(out, cap, "%s/%s", s->blob_dir, name);
  if (n < 0 || (size_t)n >= cap) return err_set(ERR_TOO_LARGE, "path of blob %s does not fit %zu bytes", name, cap);
  return 0;
}

static int fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return err_set(ERR_IO, "opening directory %s: %s", dir, strerror(errno));
  int rc = 0;
  if (fsync(fd) != 0 && errno != EINVAL) rc = err_set(ERR_IO, "fsync of directory %s: %s", dir, strerror(errno));
  close(fd);
  return rc;
}

static int new_name(char *name, size_t cap) {
  if (cap < STORE_BLOB_NAME_CAP) return err_set(ERR_TOO_LARGE, "blob name buffer of %zu bytes", cap);
  return id_make(name, cap, "", STORE_BLOB_NAME_LEN / 2);
}

/* ---- writer ------------------------------------------------------------------ */

int store_blob_writer_open(store *s, store_blob_writer **out) {
  *out = NULL;
  store_blob_writer *w = calloc(1, sizeof *w);
  if (!w) return err_set(ERR_NOMEM, "blob writer");
  w->s = s;
  char name[STORE_BLOB_NAME_CAP];
  int rc = new_name(name, sizeof name);
  if (rc) {
    free(w);
    return rc;
  }
  int n = snprintf(w->tmp_path, sizeof w->tmp_path, "%s/" BLOB_TMP_PREFIX "%s", s->blob_dir, name);
  if (n < 0 || (size_t)n >= sizeof w->tmp_path) {
    free(w);
    return err_set(ERR_TOO_LARGE, "blob directory path %s is too long", s->blob_dir);
  }
  w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (w->fd < 0) {
    rc = err_set(ERR_IO, "creating %s: %s", w->tmp_path, strerror(errno));
    free(w);
    return rc;
  }
  *out = w;
  return 0;
}

int store_blob_writer_write(store_blob_writer *w, const void *data, size_t n) {
  if (w->failed) return err_set(ERR_IO, "blob %s: an earlier write failed", w->tmp_path);
  const char *p = data;
  size_t left = n;
  while (left > 0) {
    ssize_t r = write(w->fd, p, left);
    if (r < 0) {
      if (errno == EINTR) continue;
      w->failed = true;
      return err_set(ERR_IO, "writing %s: %s", w->tmp_path, strerror(errno));
    }
    p += r;
    left -= (size_t)r;
  }
  w->bytes += n;
  return 0;
}

uint64_t store_blob_writer_bytes(const store_blob_writer *w) { return w->bytes; }

void store_blob_writer_abort(store_blob_writer *w) {
  if (!w) return;
  if (w->fd >= 0) close(w->fd);
  unlink(w->tmp_path);
  free(w);
}

int store_blob_writer_commit(store_blob_writer *w, char *name_out, size_t cap) {
  int rc = 0;
  char name[STORE_BLOB_NAME_CAP], final_path[4096];
  if (w->failed) rc = err_set(ERR_IO, "blob %s: an earlier write failed", w->tmp_path);
  if (!rc && cap < STORE_BLOB_NAME_CAP) rc = err_set(ERR_TOO_LARGE, "blob name buffer of %zu bytes", cap);
  if (!rc && fsync(w->fd) != 0) rc = err_set(ERR_IO, "fsync of %s: %s", w->tmp_path, strerror(errno));
  if (!rc) {
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) rc = err_set(ERR_IO, "closing %s: %s", w->tmp_path, strerror(errno));
  }
  if (!rc) rc = new_name(name, sizeof name);
  if (!rc) rc = store_blob_path(w->s, name, final_path, sizeof final_path);
  if (!rc && rename(w->tmp_path, final_path) != 0) {
    rc = err_set(ERR_IO, "renaming %s to %s: %s", w->tmp_path, final_path, strerror(errno));
  }
  if (rc) {
    store_blob_writer_abort(w);
    return rc;
  }
  store *s = w->s;
  free(w);
  /* The blob is complete under its final name; if the directory cannot be
   * fsync'ed the rename might not survive a power loss, so the blob is
   * removed and the commit reported as failed. */
  rc = fsync_dir(s->blob_dir);
  if (rc) {
    unlink(final_path);
    return rc;
  }
  memcpy(name_out, name, STORE_BLOB_NAME_CAP);
  return 0;
}

int store_blob_delete(store *s, const char *name) {
  char path[4096];
  int rc = store_blob_path(s, name, path, sizeof path);
  if (rc) return rc;
  if (unlink(path) != 0 && errno != ENOENT) return err_set(ERR_IO, "removing blob %s: %s", path, strerror(errno));
  return 0;
}

/* ---- adopting a finished file -------------------------------------------------- */

/* Copies src into a new blob (the cross-filesystem path of adopt). */
static int adopt_by_copy(store *s, int src_fd, const char *src_path, char *name_out, size_t cap) {
  store_blob_writer *w;
  int rc = store_blob_writer_open(s, &w);
  if (rc) return rc;
  char *chunk = malloc(BLOB_COPY_CHUNK);
  if (!chunk) {
    store_blob_writer_abort(w);
    return err_set(ERR_NOMEM, "copy buffer for %s", src_path);
  }
  for (;;) {
    ssize_t r = read(src_fd, chunk, BLOB_COPY_CHUNK);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      rc = err_set(ERR_IO, "reading %s: %s", src_path, strerror(errno));
      break;
    }
    if (r == 0) break;
    rc = store_blob_writer_write(w, chunk, (size_t)r);
    if (rc) break;
  }
  free(chunk);
  if (rc) {
    store_blob_writer_abort(w);
    return rc;
  }
  rc = store_blob_writer_commit(w, name_out, cap);
  if (rc) return rc;
  if (unlink(src_path) != 0 && errno != ENOENT) {
    LOG_WARN("store", "copied %s into blob %s but could not remove it: %s", src_path, name_out, strerror(errno));
  }
  return 0;
}

int store_blob_adopt(store *s, const char *src_path, char *name_out, size_t cap) {
  if (cap < STORE_BLOB_NAME_CAP) return err_set(ERR_TOO_LARGE, "blob name buffer of %zu bytes", cap);
  int fd = open(src_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err_set(errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "opening %s: %s", src_path, strerror(errno));
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0) rc = err_set(ERR_IO, "stat of %s: %s", src_path, strerror(errno));
  if (!rc && !S_ISREG(st.st_mode)) rc = err_set(ERR_INVALID, "%s is not a regular file", src_path);
  /* The writer of src may not have fsync'ed it; its bytes must be durable
   * before the rename makes them visible under a final name. */
  if (!rc && fsync(fd) != 0) rc = err_set(ERR_IO, "fsync of %s: %s", src_path, strerror(errno));
  /* Blobs are owner-only like the ones the writer creates, whatever mode
   * the adopted file had. */
  if (!rc && fchmod(fd, 0600) != 0) rc = err_set(ERR_IO, "chmod of %s: %s", src_path, strerror(errno));
  char name[STORE_BLOB_NAME_CAP], final_path[4096];
  if (!rc) rc = new_name(name, sizeof name);
  if (!rc) rc = store_blob_path(s, name, final_path, sizeof final_path);
  if (rc) {
    close(fd);
    return rc;
  }
  if (rename(src_path, final_path) != 0) {
    if (errno == EXDEV) {
      rc = adopt_by_copy(s, fd, src_path, name_out, cap);
    } else {
      rc = err_set(ERR_IO, "moving %s to %s: %s", src_path, final_path, strerror(errno));
    }
    close(fd);
    return rc;
  }
  close(fd);
  rc = fsync_dir(s->blob_dir);
  if (rc) {
    /* Give the file back rather than leave an unconfirmed blob. */
    if (rename(final_path, src_path) != 0) unlink(final_path);
    return rc;
  }
  memcpy(name_out, name, STORE_BLOB_NAME_CAP);
  return 0;
}

/* ---- blobs of deleted rows ----------------------------------------------------------- */

int store_blob_names_collect(store *s, sqlite3_stmt *st, struct store_rows *names, const char *what) {
  int step, rc = 0;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    const char *b = (const char *)sqlite3_column_text(st, 0);
    if (rc || !store_blob_name_ok(b)) continue;
    char *e = store_rows_push(names);
    if (!e) rc = err_set(ERR_NOMEM, "%s: list of blobs", what);
    else memcpy(e, b, STORE_BLOB_NAME_CAP);
  }
  if (step != SQLITE_DONE) {
    /* The statement failed and SQLite undid its deletions: the rows still
     * name these blobs, so they must not be removed. */
    if (!rc) rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), what);
    names->n = 0;
  }
  store_stmt_done(st);
  return rc;
}

void store_blob_names_delete(store *s, struct store_rows *names) {
  for (size_t i = 0; i < names->n; i++) {
    const char *name = (const char *)names->items + i * names->elem_size;
    if (store_blob_delete(s, name) != 0) LOG_WARN("store", "%s", err_detail());
  }
  free(names->items);
  names->items = NULL;
  names->n = names->cap = 0;
}

/* ---- sweeping at open ---------------------------------------------------------------- */

static int blob_referenced(store *s, const char *name, bool *yes) {
  *yes = false;
  for (size_t i = 0; i < ARRAY_LEN(store_blob_refs) && !*yes; i++) {
    sqlite3_stmt *st;
    int rc = store_stmt(s, store_blob_refs[i], &st);
    if (rc) return rc;
    store_bind_text(st, 1, name);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) *yes = true;
    else if (step != SQLITE_DONE) rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "checking blob references");
    store_stmt_done(st);
    if (rc) return rc;
  }
  return 0;
}

int store_blob_sweep(store *s, int64_t now, int64_t max_age_s) {
  DIR *d = opendir(s->blob_dir);
  if (!d) return err_set(ERR_IO, "opening blob directory %s: %s", s->blob_dir, strerror(errno));
  int rc = 0;
  size_t n_tmp = 0, n_orphans = 0;
  store_lock(s);
  struct dirent *e;
  while (!rc && (e = readdir(d)) != NULL) {
    const char *n = e->d_name;
    if (str_starts_with(n, BLOB_TMP_PREFIX)) {
      if (unlinkat(dirfd(d), n, 0) == 0) n_tmp++;
      else if (errno != ENOENT) LOG_WARN("store", "removing temp blob %s/%s: %s", s->blob_dir, n, strerror(errno));
      continue;
    }
    if (!store_blob_name_ok(n)) continue; /* not ours: leave it */
    struct stat st;
    if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if ((int64_t)st.st_mtime > now - max_age_s) continue;
    bool used = false;
    rc = blob_referenced(s, n, &used);
    if (rc || used) continue;
    if (unlinkat(dirfd(d), n, 0) == 0) n_orphans++;
    else if (errno != ENOENT) LOG_WARN("store", "removing orphan blob %s/%s: %s", s->blob_dir, n, strerror(errno));
  }
  store_unlock(s);
  closedir(d);
  if (n_tmp || n_orphans) {
    LOG_INFO("store", "%s: removed %zu unfinished and %zu orphan blob(s)", s->blob_dir, n_tmp, n_orphans);
  }
  return rc;
}
