/*
 * store.c - opening the database, schema migrations, the statement cache,
 * transactions and the paged-listing helper that the table files share.
 *
 * Why one connection behind a recursive mutex: parley is one process with a
 * pool of HTTP threads whose store calls are short (a few rows each). One
 * serialized connection is simple and correct; a transaction (store_begin ..
 * store_commit) holds the mutex so no other thread's statement can slip into
 * it. WAL keeps readers of other processes (sqlite3 CLI, backups) from
 * blocking us. If the store ever becomes a bottleneck, a pool of read
 * connections is the next step; the API does not expose the connection.
 *
 * Invariants:
 * - s->mu is held around every use of s->db and of the statement cache.
 * - s->tx_depth counts store_begin calls not yet committed/rolled back; the
 *   mutex is held once per level, so it is held exactly while tx_depth > 0
 *   (plus during individual calls).
 * - Cached statements are reset with bindings cleared between uses.
 *
 * Start reading at store_open(); the tables are in store_files.c,
 * store_uploads.c, store_items.c and store_jobs.c, blobs in blob.c, the
 * schema in migrations.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "store/store_int.h"

#define STORE_BUSY_TIMEOUT_MS 5000
#define STORE_ORPHAN_AGE_S 3600

/* ---- locking -------------------------------------------------------------- */

void store_lock(store *s) { pthread_mutex_lock(&s->mu); }
void store_unlock(store *s) { pthread_mutex_unlock(&s->mu); }

/* ---- errors --------------------------------------------------------------- */

int store_sqlite_err(store *s, int rc, const char *what) {
  int code;
  switch (rc & 0xff) {
    case SQLITE_NOMEM: code = ERR_NOMEM; break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: code = ERR_UNAVAILABLE; break;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT: code = ERR_CORRUPT; break;
    case SQLITE_TOOBIG: code = ERR_TOO_LARGE; break;
    case SQLITE_RANGE:
    case SQLITE_MISMATCH: code = ERR_INVALID; break;
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM: code = ERR_IO; break;
    case SQLITE_CONSTRAINT:
      if (rc == SQLITE_CONSTRAINT_PRIMARYKEY || rc == SQLITE_CONSTRAINT_UNIQUE) code = ERR_EXISTS;
      else if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) code = ERR_NOT_FOUND;
      else code = ERR_INVALID;
      break;
    default: code = ERR_INTERNAL; break;
  }
  const char *msg = s && s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
  return err_set(code, "%s: %s", what, msg);
}

/* ---- statement cache ------------------------------------------------------ */

static uint64_t sql_hash(const char *sql) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)sql; *p; p++) {
    h ^= *p;
    h *= 1099511628211ull;
  }
  return h;
}

static int cache_grow(store *s) {
  size_t n = s->n_slots ? s->n_slots * 2 : 64;
  struct store_stmt_slot *slots = calloc(n, sizeof *slots);
  if (!slots) return err_set(ERR_NOMEM, "statement cache of %zu slots", n);
  for (size_t i = 0; i < s->n_slots; i++) {
    if (!s->slots[i].sql) continue;
    size_t j = (size_t)s->slots[i].hash & (n - 1);
    while (slots[j].sql) j = (j + 1) & (n - 1);
    slots[j] = s->slots[i];
  }
  free(s->slots);
  s->slots = slots;
  s->n_slots = n;
  return 0;
}

int store_stmt(store *s, const char *sql, sqlite3_stmt **out) {
  *out = NULL;
  if (s->n_slots == 0 || (s->n_used + 1) * 2 > s->n_slots) {
    int rc = cache_grow(s);
    if (rc) return rc;
  }
  uint64_t h = sql_hash(sql);
  size_t j = (size_t)h & (s->n_slots - 1);
  while (s->slots[j].sql) {
    if (s->slots[j].hash == h && strcmp(s->slots[j].sql, sql) == 0) {
      *out = s->slots[j].stmt;
      return 0;
    }
    j = (j + 1) & (s->n_slots - 1);
  }
  sqlite3_stmt *st = NULL;
  const char *tail = NULL;
  int rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, &tail);
  if (rc != SQLITE_OK) return store_sqlite_err(s, rc, "preparing a statement");
  if (!st) return err_set(ERR_INTERNAL, "empty SQL statement");
  while (tail && (*tail == ' ' || *tail == '\n' || *tail == '\t' || *tail == ';')) tail++;
  if (tail && *tail) {
    sqlite3_finalize(st);
    return err_set(ERR_INTERNAL, "cached SQL holds more than one statement: %.60s", sql);
  }
  char *copy = str_dup(sql);
  if (!copy) {
    sqlite3_finalize(st);
    return err_set(ERR_NOMEM, "statement cache entry");
  }
  s->slots[j] = (struct store_stmt_slot){copy, h, st};
  s->n_used++;
  *out = st;
  return 0;
}

void store_stmt_done(sqlite3_stmt *st) {
  if (!st) return;
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
}

int store_step_done(store *s, sqlite3_stmt *st, const char *what) {
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
  }
  int out = rc == SQLITE_DONE ? 0 : store_sqlite_err(s, sqlite3_extended_errcode(s->db), what);
  store_stmt_done(st);
  return out;
}

static void cache_free(store *s) {
  for (size_t i = 0; i < s->n_slots; i++) {
    if (!s->slots[i].sql) continue;
    sqlite3_finalize(s->slots[i].stmt);
    free(s->slots[i].sql);
  }
  free(s->slots);
  s->slots = NULL;
  s->n_slots = s->n_used = 0;
}

/* ---- binding and reading helpers ------------------------------------------ */

int store_bind_text(sqlite3_stmt *st, int i, const char *v) {
  return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

int store_bind_opt_time(sqlite3_stmt *st, int i, int64_t v) {
  return v ? sqlite3_bind_int64(st, i, v) : sqlite3_bind_null(st, i);
}

char *store_col_text(sqlite3_stmt *st, int i, bool *oom) {
  if (sqlite3_column_type(st, i) == SQLITE_NULL) return NULL;
  const unsigned char *t = sqlite3_column_text(st, i);
  if (!t) {
    *oom = true; /* a non-NULL value that could not be converted */
    return NULL;
  }
  size_t n = (size_t)sqlite3_column_bytes(st, i);
  char *p = str_ndup((const char *)t, n);
  if (!p) *oom = true;
  return p;
}

void *store_rows_push(struct store_rows *r) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 8, bytes;
    if (!size_mul(cap, r->elem_size, &bytes)) return NULL;
    void *p = realloc(r->items, bytes);
    if (!p) return NULL;
    r->items = p;
    r->cap = cap;
  }
  void *e = (char *)r->items + r->n * r->elem_size;
  memset(e, 0, r->elem_size);
  r->n++;
  return e;
}

/* ---- generic exec and transactions ------------------------------------------ */

int store_exec(store *s, const char *sql) {
  store_lock(s);
  char *msg = NULL;
  int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
  int out = 0;
  if (rc != SQLITE_OK) {
    out = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "executing SQL");
  }
  sqlite3_free(msg);
  store_unlock(s);
  return out;
}

/* A cached parameterless statement run to completion (BEGIN, COMMIT, ...). */
static int exec_cached(store *s, const char *sql) {
  sqlite3_stmt *st;
  int rc = store_stmt(s, sql, &st);
  if (rc) return rc;
  return store_step_done(s, st, sql);
}

int store_begin(store *s) {
  store_lock(s);
  int rc;
  if (s->tx_depth == 0) {
    rc = exec_cached(s, "BEGIN IMMEDIATE");
  } else {
    char sp[48];
    snprintf(sp, sizeof sp, "SAVEPOINT store_sp%d", s->tx_depth);
    rc = exec_cached(s, sp);
  }
  if (rc) {
    store_unlock(s);
    return rc;
  }
  s->tx_depth++;
  return 0;
}

int store_commit(store *s) {
  store_lock(s);
  if (s->tx_depth <= 0) {
    store_unlock(s);
    return err_set(ERR_INVALID, "store_commit without store_begin");
  }
  s->tx_depth--;
  int rc;
  if (s->tx_depth == 0) {
    rc = exec_cached(s, "COMMIT");
    if (rc) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  } else {
    char sp[48];
    snprintf(sp, sizeof sp, "RELEASE store_sp%d", s->tx_depth);
    rc = exec_cached(s, sp);
    if (rc) {
      char rb[96];
      snprintf(rb, sizeof rb, "ROLLBACK TO store_sp%d; RELEASE store_sp%d", s->tx_depth, s->tx_depth);
      sqlite3_exec(s->db, rb, NULL, NULL, NULL);
    }
  }
  store_unlock(s); /* the level's lock */
  store_unlock(s); /* this call's lock */
  return rc;
}

void store_rollback(store *s) {
  store_lock(s);
  if (s->tx_depth <= 0) {
    store_unlock(s);
    return;
  }
  s->tx_depth--;
  /* Errors are ignored (SQLite may already have rolled back after a failed
   * statement) and must not overwrite the caller's error detail. */
  if (s->tx_depth == 0) {
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  } else {
    char rb[96];
    snprintf(rb, sizeof rb, "ROLLBACK TO store_sp%d; RELEASE store_sp%d", s->tx_depth, s->tx_depth);
    sqlite3_exec(s->db, rb, NULL, NULL, NULL);
  }
  store_unlock(s);
  store_unlock(s);
}

/* ---- schema ---------------------------------------------------------------------- */

int store_schema_latest(void) { return (int)store_n_migrations; }

static int read_user_version(store *s, int *version) {
  sqlite3_stmt *st;
  int rc = store_stmt(s, "PRAGMA user_version", &st);
  if (rc) return rc;
  rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    int e = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "reading PRAGMA user_version");
    store_stmt_done(st);
    return e;
  }
  *version = sqlite3_column_int(st, 0);
  store_stmt_done(st);
  return 0;
}

int store_schema_version(store *s, int *version) {
  store_lock(s);
  int rc = read_user_version(s, version);
  store_unlock(s);
  return rc;
}

/* Applies migrations from..latest, each in its own transaction with its
 * user_version bump. */
static int migrate(store *s, int from) {
  for (int v = from; v < (int)store_n_migrations; v++) {
    int rc = store_begin(s);
    if (rc) return rc;
    char *msg = NULL;
    int src = sqlite3_exec(s->db, store_migrations[v], NULL, NULL, &msg);
    if (src == SQLITE_OK) {
      char bump[64];
      snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
      sqlite3_free(msg);
      msg = NULL;
      src = sqlite3_exec(s->db, bump, NULL, NULL, &msg);
    }
    if (src != SQLITE_OK) {
      char what[96];
      snprintf(what, sizeof what, "migration %d of %s", v + 1, s->db_path);
      rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), what);
      sqlite3_free(msg);
      store_rollback(s);
      return rc;
    }
    sqlite3_free(msg);
    rc = store_commit(s);
    if (rc) return rc;
    LOG_INFO("store", "%s: applied schema migration %d", s->db_path, v + 1);
  }
  return 0;
}

/* ---- open / close ---------------------------------------------------------------- */

/* mkdir -p with mode 0700 for every directory it creates. */
static int make_dirs(const char *path) {
  char *p = str_dup(path);
  if (!p) return err_set(ERR_NOMEM, "copying %s", path);
  int rc = 0;
  for (char *c = p + 1;; c++) {
    if (*c != '/' && *c != '\0') continue;
    char saved = *c;
    *c = '\0';
    if (mkdir(p, 0700) != 0 && errno != EEXIST) {
      rc = err_set(ERR_IO, "creating directory %s: %s", p, strerror(errno));
      break;
    }
    *c = saved;
    if (saved == '\0') break;
  }
  free(p);
  if (rc) return rc;
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return err_set(ERR_IO, "%s is not a directory", path);
  return 0;
}

static char *path_join(const char *a, const char *b) {
  buf out = BUF_INIT;
  if (buf_appendf(&out, "%s/%s", a, b)) {
    buf_free(&out);
    return NULL;
  }
  return buf_detach(&out, NULL);
}

/* Sets the per-connection pragmas; WAL is persistent but asked every time. */
static int set_pragmas(store *s) {
  sqlite3_stmt *st;
  int rc = store_stmt(s, "PRAGMA journal_mode = WAL", &st);
  if (rc) return rc;
  rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    int e = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "setting journal_mode=WAL");
    store_stmt_done(st);
    return e;
  }
  const char *mode = (const char *)sqlite3_column_text(st, 0);
  bool wal = mode && strcmp(mode, "wal") == 0;
  store_stmt_done(st);
  if (!wal) return err_set(ERR_IO, "%s: the database refused journal_mode=WAL", s->db_path);
  char *msg = NULL;
  rc = sqlite3_exec(s->db, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;", NULL, NULL, &msg);
  sqlite3_free(msg);
  if (rc != SQLITE_OK) return store_sqlite_err(s, sqlite3_extended_errcode(s->db), "setting pragmas");
  return 0;
}

static int open_lock(store *s) {
  char *lock_path = path_join(s->dir, "parley.lock");
  if (!lock_path) return err_set(ERR_NOMEM, "lock path");
  s->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (s->lock_fd < 0) {
    int rc = err_set(ERR_IO, "opening %s: %s", lock_path, strerror(errno));
    free(lock_path);
    return rc;
  }
  if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    int rc = errno == EWOULDBLOCK
                 ? err_set(ERR_CONFLICT, "data directory %s is in use by another process (%s is locked)", s->dir,
                           lock_path)
                 : err_set(ERR_IO, "locking %s: %s", lock_path, strerror(errno));
    free(lock_path);
    return rc;
  }
  free(lock_path);
  return 0;
}

/* SQLite treats a very short file of any content as an empty database and
 * would overwrite it; refuse any non-empty file without the SQLite header. */
static int check_header(store *s) {
  static const char magic[16] = "SQLite format 3"; /* 15 chars + NUL */
  int fd = open(s->db_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    return err_set(ERR_IO, "opening database %s: %s", s->db_path, strerror(errno));
  }
  char head[16];
  ssize_t n;
  do {
    n = read(fd, head, sizeof head);
  } while (n < 0 && errno == EINTR);
  int saved = errno;
  close(fd);
  if (n < 0) return err_set(ERR_IO, "reading database %s: %s", s->db_path, strerror(saved));
  if (n == 0) return 0; /* empty: SQLite initializes it */
  if (n < (ssize_t)sizeof head || memcmp(head, magic, sizeof magic) != 0) {
    return err_set(ERR_CORRUPT, "%s is not a SQLite database (bad header)", s->db_path);
  }
  return 0;
}

/* The database holds uploaded files' metadata, stored responses and
 * conversations: owner-only, whatever the directory's mode or the umask.
 * SQLite creates files 0644 and gives its -wal and -shm files the mode of
 * the database, so the database is created (or tightened) 0600 first and
 * journals left by an older run are tightened too. */
static void db_files_private(const store *s) {
  int fd = open(s->db_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) {
    if (fchmod(fd, 0600) != 0) LOG_WARN("store", "cannot make %s owner-only: %s", s->db_path, strerror(errno));
    close(fd);
  }
  static const char *const suffixes[] = {"-wal", "-shm", "-journal"};
  for (size_t i = 0; i < ARRAY_LEN(suffixes); i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s%s", s->db_path, suffixes[i]);
    if (chmod(p, 0600) != 0 && errno != ENOENT) LOG_WARN("store", "cannot make %s owner-only: %s", p, strerror(errno));
  }
}

static int open_db(store *s) {
  if (!sqlite3_threadsafe()) return err_set(ERR_UNSUPPORTED, "libsqlite3 was built without thread safety");
  int rc = check_header(s);
  if (rc) return rc;
  db_files_private(s);
  rc = sqlite3_open_v2(s->db_path, &s->db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
  if (rc != SQLITE_OK) {
    int e = err_set(ERR_IO, "opening database %s: %s", s->db_path,
                    s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
    return e;
  }
  sqlite3_extended_result_codes(s->db, 1);
  sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);

  int version = 0;
  rc = read_user_version(s, &version);
  if (rc == ERR_CORRUPT) return err_set(ERR_CORRUPT, "%s is not a SQLite database (or is corrupt)", s->db_path);
  if (rc) return rc;
  if (version > (int)store_n_migrations || version < 0) {
    return err_set(ERR_UNSUPPORTED,
                   "database %s has schema version %d; this parley knows versions up to %d (use a newer parley)",
                   s->db_path, version, (int)store_n_migrations);
  }
  rc = set_pragmas(s);
  if (rc == ERR_CORRUPT) return err_set(ERR_CORRUPT, "%s is not a SQLite database (or is corrupt)", s->db_path);
  if (rc) return rc;
  return migrate(s, version);
}

/* Empties the spool directory: anything there was being received when the
 * previous process stopped (this process holds the data directory's lock). */
static void spool_sweep(store *s) {
  DIR *d = opendir(s->spool_dir);
  if (!d) return;
  struct dirent *e;
  size_t n = 0;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (unlinkat(dirfd(d), e->d_name, 0) == 0) n++;
  }
  closedir(d);
  if (n) LOG_INFO("store", "%s: removed %zu leftover spool file(s)", s->spool_dir, n);
}

int store_open(const char *data_dir, store **out) {
  *out = NULL;
  if (!data_dir || !*data_dir) return err_set(ERR_INVALID, "store_open: empty data directory");
  store *s = calloc(1, sizeof *s);
  if (!s) return err_set(ERR_NOMEM, "store");
  s->lock_fd = -1;
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&s->mu, &attr);
  pthread_mutexattr_destroy(&attr);

  int rc = 0;
  s->dir = str_dup(data_dir);
  s->db_path = path_join(data_dir, "parley.db");
  s->blob_dir = path_join(data_dir, "blobs");
  s->spool_dir = path_join(data_dir, "spool");
  if (!s->dir || !s->db_path || !s->blob_dir || !s->spool_dir) rc = err_set(ERR_NOMEM, "store paths");
  if (!rc) rc = make_dirs(data_dir);
  if (!rc) rc = make_dirs(s->blob_dir);
  if (!rc) rc = make_dirs(s->spool_dir);
  if (!rc) rc = open_lock(s);
  if (!rc) rc = open_db(s);
  if (!rc) rc = store_blob_sweep(s, time_wall_s(), STORE_ORPHAN_AGE_S);
  if (!rc) spool_sweep(s);
  if (rc) {
    /* store_close would overwrite nothing of the detail: it calls no err_set. */
    store_close(s);
    return rc;
  }
  *out = s;
  return 0;
}

void store_close(store *s) {
  if (!s) return;
  cache_free(s);
  if (s->db) {
    int rc = sqlite3_close(s->db);
    if (rc != SQLITE_OK) LOG_WARN("store", "closing %s: %s", s->db_path, sqlite3_errstr(rc));
  }
  if (s->lock_fd >= 0) close(s->lock_fd); /* releases the flock */
  pthread_mutex_destroy(&s->mu);
  free(s->dir);
  free(s->db_path);
  free(s->blob_dir);
  free(s->spool_dir);
  free(s);
}

const char *store_data_dir(const store *s) { return s->dir; }
const char *store_spool_dir(const store *s) { return s->spool_dir; }

/* ---- paged listings ---------------------------------------------------------------- */

static void bind_scope(sqlite3_stmt *st, const struct store_page_spec *spec) {
  for (int i = 0; i < spec->n_scope_args; i++) store_bind_text(st, i + 1, spec->scope_args[i]);
}

/* Finds the ordering key of the row a cursor names (within the scope). */
static int cursor_key(store *s, const struct store_page_spec *spec, const char *id, const char *which,
                      int64_t key[2]) {
  buf sql = BUF_INIT;
  int rc = buf_appendf(&sql, "SELECT %s%s%s FROM %s WHERE %s = ?4", spec->key[0], spec->key[1] ? ", " : "",
                       spec->key[1] ? spec->key[1] : "", spec->from, spec->id_col);
  if (!rc && spec->scope) rc = buf_appendf(&sql, " AND (%s)", spec->scope);
  if (!rc) rc = buf_appendf(&sql, " ORDER BY %s LIMIT 1", spec->key[0]);
  if (rc) {
    buf_free(&sql);
    return err_set(ERR_NOMEM, "cursor query");
  }
  sqlite3_stmt *st;
  rc = store_stmt(s, sql.data, &st);
  buf_free(&sql);
  if (rc) return rc;
  bind_scope(st, spec);
  store_bind_text(st, 4, id);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    key[0] = sqlite3_column_int64(st, 0);
    key[1] = spec->key[1] ? sqlite3_column_int64(st, 1) : 0;
    rc = 0;
  } else if (step == SQLITE_DONE) {
    rc = err_set(ERR_NOT_FOUND, "%s: no %s with id '%s'", which, spec->what, id);
  } else {
    rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "looking up a page cursor");
  }
  store_stmt_done(st);
  return rc;
}

/* Appends "AND (k0, k1) op (?a, ?b)" for a cursor bound at ?first. */
static int append_cursor_cond(buf *sql, const struct store_page_spec *spec, const char *op, int first) {
  if (spec->key[1]) {
    return buf_appendf(sql, " AND (%s, %s) %s (?%d, ?%d)", spec->key[0], spec->key[1], op, first, first + 1);
  }
  return buf_appendf(sql, " AND %s %s ?%d", spec->key[0], op, first);
}

static void rows_reverse(struct store_rows *r) {
  char tmp[256];
  if (r->elem_size > sizeof tmp) return; /* rows are small structs; see static_assert below */
  for (size_t i = 0, j = r->n ? r->n - 1 : 0; i < j; i++, j--) {
    char *a = (char *)r->items + i * r->elem_size, *b = (char *)r->items + j * r->elem_size;
    memcpy(tmp, a, r->elem_size);
    memcpy(a, b, r->elem_size);
    memcpy(b, tmp, r->elem_size);
  }
}

_Static_assert(sizeof(store_file) <= 256 && sizeof(store_item) <= 256, "rows_reverse buffer");

int store_page_run(store *s, const struct store_page_spec *spec, const store_page *page, store_row_read_fn read,
                   store_row_free_fn free_row, struct store_rows *out, bool *has_more) {
  *has_more = false;
  size_t limit = page->limit ? page->limit : STORE_PAGE_DEFAULT;
  if (limit > STORE_PAGE_MAX) return err_set(ERR_RANGE, "limit %zu is above %d", limit, STORE_PAGE_MAX);
  bool desc = page->order == STORE_ORDER_DESC;
  bool has_after = page->after && *page->after, has_before = page->before && *page->before;
  int64_t after_key[2] = {0, 0}, before_key[2] = {0, 0};
  int rc = 0;
  if (has_after) rc = cursor_key(s, spec, page->after, "after", after_key);
  if (!rc && has_before) rc = cursor_key(s, spec, page->before, "before", before_key);
  if (rc) return rc;

  /* With only `before`, walk backwards from it and flip the page at the end,
   * so the page is the one adjacent to the cursor. */
  bool reverse = has_before && !has_after;
  bool scan_desc = reverse ? !desc : desc;
  buf sql = BUF_INIT;
  rc = buf_appendf(&sql, "SELECT %s FROM %s WHERE 1", spec->cols, spec->from);
  if (!rc && spec->scope) rc = buf_appendf(&sql, " AND (%s)", spec->scope);
  if (!rc && has_after) rc = append_cursor_cond(&sql, spec, desc ? "<" : ">", 5);
  if (!rc && has_before) rc = append_cursor_cond(&sql, spec, desc ? ">" : "<", 7);
  const char *dir = scan_desc ? "DESC" : "ASC";
  if (!rc) rc = buf_appendf(&sql, " ORDER BY %s %s", spec->key[0], dir);
  if (!rc && spec->key[1]) rc = buf_appendf(&sql, ", %s %s", spec->key[1], dir);
  if (!rc) rc = buf_appendf(&sql, " LIMIT ?9");
  if (rc) {
    buf_free(&sql);
    return err_set(ERR_NOMEM, "listing query");
  }
  sqlite3_stmt *st;
  rc = store_stmt(s, sql.data, &st);
  buf_free(&sql);
  if (rc) return rc;
  bind_scope(st, spec);
  if (has_after) {
    sqlite3_bind_int64(st, 5, after_key[0]);
    if (spec->key[1]) sqlite3_bind_int64(st, 6, after_key[1]);
  }
  if (has_before) {
    sqlite3_bind_int64(st, 7, before_key[0]);
    if (spec->key[1]) sqlite3_bind_int64(st, 8, before_key[1]);
  }
  sqlite3_bind_int64(st, 9, (sqlite3_int64)limit + 1);

  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    if (out->n == limit) {
      *has_more = true;
      break;
    }
    void *e = store_rows_push(out);
    if (!e) {
      rc = err_set(ERR_NOMEM, "listing %s rows", spec->what);
      break;
    }
    rc = read(st, e);
    if (rc) {
      rc = err_set(ERR_NOMEM, "reading a %s row", spec->what);
      break;
    }
  }
  if (!rc && step != SQLITE_ROW && step != SQLITE_DONE) {
    rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "listing rows");
  }
  store_stmt_done(st);
  if (rc) {
    for (size_t i = 0; i < out->n; i++) free_row((char *)out->items + i * out->elem_size);
    free(out->items);
    out->items = NULL;
    out->n = out->cap = 0;
    return rc;
  }
  if (reverse) rows_reverse(out);
  return 0;
}
