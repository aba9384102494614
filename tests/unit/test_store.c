/* test_store.c - tests of store/: schema and migrations, each table's CRUD
 * and paging, blobs and their crash rules, and concurrent use. Expected
 * orders and values are written out by hand; the database is inspected with
 * a separate raw SQLite connection where the API would be judging itself. */
#include "test.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"
#include "store/store.h"

/* ---- helpers ------------------------------------------------------------------- */

static const char *data_dir(void) {
  static char dir[600];
  snprintf(dir, sizeof dir, "%s/data", test_tmpdir());
  return dir;
}

static const char *blob_dir(void) {
  static char dir[700];
  snprintf(dir, sizeof dir, "%s/blobs", data_dir());
  return dir;
}

/* Counts entries of the blob directory: temp files and final-name blobs. */
static void count_blobs(int *n_tmp, int *n_final) {
  *n_tmp = *n_final = 0;
  DIR *d = opendir(blob_dir());
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' && (e->d_name[1] == '\0' || strcmp(e->d_name, "..") == 0)) continue;
    if (strncmp(e->d_name, ".tmp-", 5) == 0) (*n_tmp)++;
    else (*n_final)++;
  }
  closedir(d);
}

/* A raw SQL query returning one integer, on a separate connection. */
static long long raw_int(const char *sql) {
  char path[700];
  snprintf(path, sizeof path, "%s/parley.db", data_dir());
  sqlite3 *db = NULL;
  long long v = -1;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
      v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return v;
}

static int raw_exec(const char *sql) {
  char path[700];
  snprintf(path, sizeof path, "%s/parley.db", data_dir());
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
  sqlite3_close(db);
  return rc;
}

static int read_file(const char *path, char *out, size_t cap, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  *n = fread(out, 1, cap, f);
  fclose(f);
  return 0;
}

static int write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(data, 1, n, f);
  fclose(f);
  return w == n ? 0 : -1;
}

/* Concatenated ids of a file listing, "a,b,c". */
static const char *file_ids(const store_file_list *l) {
  static char out[512];
  out[0] = '\0';
  for (size_t i = 0; i < l->n_items; i++) {
    if (i) strcat(out, ",");
    strcat(out, l->items[i].id);
  }
  return out;
}

static const char *item_ids(const store_item_list *l) {
  static char out[512];
  out[0] = '\0';
  for (size_t i = 0; i < l->n_items; i++) {
    if (i) strcat(out, ",");
    strcat(out, l->items[i].item_id);
  }
  return out;
}

static store_file file_row(const char *id, const char *purpose, int64_t created_at, const char *blob) {
  store_file f = {0};
  f.id = (char *)id;
  f.purpose = (char *)purpose;
  f.filename = (char *)"data.jsonl";
  f.bytes = 10;
  f.created_at = created_at;
  f.blob = (char *)blob;
  return f;
}

/* A well-formed blob name that differs per n (the row test needs no file). */
static const char *fake_blob(int n) {
  static char names[16][STORE_BLOB_NAME_CAP];
  snprintf(names[n % 16], STORE_BLOB_NAME_CAP, "%032x", n);
  return names[n % 16];
}

/* ---- open, schema, versions --------------------------------------------------------- */

TEST(store_open_creates_schema_at_latest) {
  char nested[700];
  snprintf(nested, sizeof nested, "%s/a/b", data_dir());
  store *s = NULL;
  ASSERT_INT_EQ(store_open(nested, &s), 0);
  int v = -1;
  ASSERT_INT_EQ(store_schema_version(s, &v), 0);
  EXPECT_INT_EQ(v, 1);
  EXPECT_INT_EQ(store_schema_latest(), 1);
  EXPECT_STR_EQ(store_data_dir(s), nested);
  struct stat st;
  ASSERT_INT_EQ(stat(nested, &st), 0);
  EXPECT_INT_EQ(st.st_mode & 0777, 0700);
  char p[800];
  snprintf(p, sizeof p, "%s/blobs", nested);
  EXPECT_INT_EQ(stat(p, &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  snprintf(p, sizeof p, "%s/spool", nested);
  EXPECT_STR_EQ(store_spool_dir(s), p);
  EXPECT_INT_EQ(stat(p, &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  store_close(s);

  /* Inspect with a raw connection: every table, WAL, user_version. */
  snprintf(p, sizeof p, "%s/parley.db", nested);
  sqlite3 *db = NULL;
  ASSERT_INT_EQ(sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  static const char *const tables[] = {"files", "uploads", "upload_parts", "responses", "response_items",
                                       "conversations", "conversation_items", "jobs", "ephemeral_keys"};
  for (size_t i = 0; i < ARRAY_LEN(tables); i++) {
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", -1, &q, NULL);
    sqlite3_bind_text(q, 1, tables[i], -1, SQLITE_STATIC);
    EXPECT_INT_EQ(sqlite3_step(q), SQLITE_ROW);
    TEST_CHECK_(sqlite3_column_int(q, 0) == 1, 0, "table %s is missing", tables[i]);
    sqlite3_finalize(q);
  }
  sqlite3_stmt *q = NULL;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL);
  EXPECT_INT_EQ(sqlite3_step(q), SQLITE_ROW);
  EXPECT_STR_EQ((const char *)sqlite3_column_text(q, 0), "wal");
  sqlite3_finalize(q);
  sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL);
  EXPECT_INT_EQ(sqlite3_step(q), SQLITE_ROW);
  EXPECT_INT_EQ(sqlite3_column_int(q, 0), 1);
  sqlite3_finalize(q);
  sqlite3_close(db);
}

/* An existing data directory of mode 0755 under umask 022: the database,
 * its WAL and the blobs are still owner-only. */
TEST(store_files_are_owner_only_in_an_open_directory) {
  char dir[700], p[800];
  snprintf(dir, sizeof dir, "%s/open0755", test_tmpdir());
  ASSERT_INT_EQ(mkdir(dir, 0755), 0);
  ASSERT_INT_EQ(chmod(dir, 0755), 0);
  mode_t old = umask(022);
  store *s = NULL;
  ASSERT_INT_EQ(store_open(dir, &s), 0);
  store_file f = file_row("file-perm", "batch", 1, fake_blob(1));
  EXPECT_INT_EQ(store_file_insert(s, &f), 0); /* a write, so the WAL exists */
  store_blob_writer *w = NULL;
  char name[STORE_BLOB_NAME_CAP];
  ASSERT_INT_EQ(store_blob_writer_open(s, &w), 0);
  EXPECT_INT_EQ(store_blob_writer_write(w, "abc", 3), 0);
  ASSERT_INT_EQ(store_blob_writer_commit(w, name, sizeof name), 0);
  snprintf(p, sizeof p, "%s/loose.bin", dir); /* a file another writer left 0644 */
  FILE *lf = fopen(p, "wb");
  ASSERT_TRUE(lf != NULL);
  fputs("x", lf);
  fclose(lf);
  chmod(p, 0644);
  char adopted[STORE_BLOB_NAME_CAP];
  ASSERT_INT_EQ(store_blob_adopt(s, p, adopted, sizeof adopted), 0);
  struct stat st;
  static const char *const files[] = {"parley.db", "parley.db-wal"};
  for (size_t i = 0; i < ARRAY_LEN(files); i++) {
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    ASSERT_INT_EQ(stat(p, &st), 0);
    TEST_CHECK_((st.st_mode & 0777) == 0600, 0, "%s has mode %o", files[i], (unsigned)(st.st_mode & 0777));
  }
  const char *blobs[] = {name, adopted};
  for (size_t i = 0; i < 2; i++) {
    ASSERT_INT_EQ(store_blob_path(s, blobs[i], p, sizeof p), 0);
    ASSERT_INT_EQ(stat(p, &st), 0);
    TEST_CHECK_((st.st_mode & 0777) == 0600, 0, "blob %s has mode %o", blobs[i], (unsigned)(st.st_mode & 0777));
  }
  store_close(s);
  umask(old);
}

TEST(store_reopen_keeps_data) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  store_file f = file_row("file-1", "batch", 1700000000, fake_blob(1));
  f.expires_at = 1800000000;
  f.mime_type = (char *)"application/jsonl";
  ASSERT_INT_EQ(store_file_insert(s, &f), 0);
  store_close(s);
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  store_file g;
  ASSERT_INT_EQ(store_file_get(s, "file-1", &g), 0);
  EXPECT_STR_EQ(g.id, "file-1");
  EXPECT_STR_EQ(g.object, "file");
  EXPECT_STR_EQ(g.purpose, "batch");
  EXPECT_STR_EQ(g.filename, "data.jsonl");
  EXPECT_INT_EQ(g.bytes, 10);
  EXPECT_INT_EQ(g.created_at, 1700000000);
  EXPECT_INT_EQ(g.expires_at, 1800000000);
  EXPECT_STR_EQ(g.status, "processed");
  EXPECT_TRUE(g.status_details == NULL);
  EXPECT_STR_EQ(g.mime_type, "application/jsonl");
  EXPECT_STR_EQ(g.blob, fake_blob(1));
  store_file_free(&g);
  int v = 0;
  EXPECT_INT_EQ(store_schema_version(s, &v), 0);
  EXPECT_INT_EQ(v, 1);
  store_close(s);
}

TEST(store_newer_schema_is_refused) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  store_close(s);
  ASSERT_INT_EQ(raw_exec("PRAGMA user_version = 99"), SQLITE_OK);
  err_clear();
  EXPECT_INT_EQ(store_open(data_dir(), &s), ERR_UNSUPPORTED);
  EXPECT_TRUE(s == NULL);
  EXPECT_STR_CONTAINS(err_detail(), "schema version 99");
  EXPECT_STR_CONTAINS(err_detail(), "up to 1");
  EXPECT_STR_CONTAINS(err_detail(), "parley.db");
  /* Refusing must not have touched the database. */
  EXPECT_INT_EQ(raw_int("PRAGMA user_version"), 99);
}

TEST(store_garbage_file_is_corrupt) {
  ASSERT_INT_EQ(mkdir(data_dir(), 0700), 0);
  char path[700], junk[4096];
  snprintf(path, sizeof path, "%s/parley.db", data_dir());
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)('a' + i % 26);
  ASSERT_INT_EQ(write_file(path, junk, sizeof junk), 0);
  store *s = NULL;
  err_clear();
  EXPECT_INT_EQ(store_open(data_dir(), &s), ERR_CORRUPT);
  EXPECT_TRUE(s == NULL);
  EXPECT_STR_CONTAINS(err_detail(), path);
  /* The file is left as it was, for the user to inspect. */
  char back[4096];
  size_t n = 0;
  ASSERT_INT_EQ(read_file(path, back, sizeof back, &n), 0);
  EXPECT_INT_EQ(n, sizeof junk);
  EXPECT_MEM_EQ(back, junk, sizeof junk);
  /* Short files too: SQLite alone would take a 1-byte file for an empty
   * database and overwrite it. */
  static const size_t sizes[] = {1, 15, 16, 100};
  for (size_t i = 0; i < ARRAY_LEN(sizes); i++) {
    ASSERT_INT_EQ(write_file(path, junk, sizes[i]), 0);
    s = NULL;
    TEST_CHECK_(store_open(data_dir(), &s) == ERR_CORRUPT, 0, "garbage of %zu bytes not refused", sizes[i]);
    store_close(s);
    ASSERT_INT_EQ(read_file(path, back, sizeof back, &n), 0);
    EXPECT_INT_EQ(n, sizes[i]);
  }
  /* An empty file is a new database. */
  ASSERT_INT_EQ(write_file(path, "", 0), 0);
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  store_close(s);
}

TEST(store_failed_migration_leaves_the_old_version) {
  /* A database at version 0 that already has a `jobs` table: migration 1
   * fails part way and must leave no trace (one transaction per migration). */
  ASSERT_INT_EQ(mkdir(data_dir(), 0700), 0);
  char path[700];
  snprintf(path, sizeof path, "%s/parley.db", data_dir());
  sqlite3 *db = NULL;
  ASSERT_INT_EQ(sqlite3_open(path, &db), SQLITE_OK);
  ASSERT_INT_EQ(sqlite3_exec(db, "CREATE TABLE jobs (x INTEGER)", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  store *s = NULL;
  int rc = store_open(data_dir(), &s);
  EXPECT_INT_NE(rc, 0);
  EXPECT_TRUE(s == NULL);
  EXPECT_STR_CONTAINS(err_detail(), "migration 1");
  EXPECT_STR_CONTAINS(err_detail(), "jobs");
  EXPECT_INT_EQ(raw_int("PRAGMA user_version"), 0);
  EXPECT_INT_EQ(raw_int("SELECT count(*) FROM sqlite_master WHERE name = 'files'"), 0);
  store_close(s);
}

TEST(store_second_open_of_a_data_dir_conflicts) {
  store *a = NULL, *b = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &a), 0);
  EXPECT_INT_EQ(store_open(data_dir(), &b), ERR_CONFLICT);
  EXPECT_STR_CONTAINS(err_detail(), "in use");
  store_close(a);
  EXPECT_INT_EQ(store_open(data_dir(), &b), 0);
  store_close(b);
}

TEST(store_open_rejects_empty_dir_and_file_in_the_way) {
  store *s = NULL;
  EXPECT_INT_EQ(store_open("", &s), ERR_INVALID);
  char p[700];
  snprintf(p, sizeof p, "%s/plainfile", test_tmpdir());
  ASSERT_INT_EQ(write_file(p, "x", 1), 0);
  EXPECT_INT_EQ(store_open(p, &s), ERR_IO);
  EXPECT_STR_CONTAINS(err_detail(), "plainfile");
}

/* ---- files ------------------------------------------------------------------------------ */

TEST(store_files_crud_and_paging) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  /* f1 and f2 share a second, as do f4 and f5: order must still follow insertion. */
  const char *ids[5] = {"f1", "f2", "f3", "f4", "f5"};
  const int64_t at[5] = {100, 100, 101, 105, 105};
  const char *purpose[5] = {"batch", "assistants", "batch", "assistants", "assistants"};
  for (int i = 0; i < 5; i++) {
    store_file f = file_row(ids[i], purpose[i], at[i], fake_blob(i));
    ASSERT_INT_EQ(store_file_insert(s, &f), 0);
  }
  store_file dup = file_row("f3", "batch", 1, fake_blob(9));
  EXPECT_INT_EQ(store_file_insert(s, &dup), ERR_EXISTS);
  EXPECT_STR_CONTAINS(err_detail(), "f3");

  store_file_list l;
  store_page pg = {.limit = 2, .order = STORE_ORDER_ASC};
  ASSERT_INT_EQ(store_file_list_page(s, NULL, &pg, &l), 0);
  EXPECT_STR_EQ(file_ids(&l), "f1,f2");
  EXPECT_TRUE(l.has_more);
  store_file_list_free(&l);
  pg.after = "f2";
  ASSERT_INT_EQ(store_file_list_page(s, NULL, &pg, &l), 0);
  EXPECT_STR_EQ(file_ids(&l), "f3,f4");
  EXPECT_TRUE(l.has_more);
  store_file_list_free(&l);
  pg.after = "f4";
  ASSERT_INT_EQ(store_file_list_page(s, NULL, &pg, &l), 0);
  EXPECT_STR_EQ(file_ids(&l), "f5");
  EXPECT_FALSE(l.has_more);
  store_file_list_free(&l);

  pg = (store_page){.limit = 2, .order = STORE_ORDER_DESC};
  ASSERT_INT_EQ(store_file_list_page(s, NULL, &pg, &l), 0);
  EXPECT_STR_EQ(file_ids(&l), "f5,f4");
  EXPECT_TRUE(l.has_more);
  store_file_list_free(&l);
  pg.after = "f4";
  ASSERT_INT_EQ(store_file_list_page(s, NULL, &pg, &l), 0);
  EXPECT_STR_EQ(file_ids(&l), "f3,f2");
  EXPECT_TRUE(l.has_more);
  store_file_list_free(&l);
  pg.after = "f2";
  ASSERT_INT_EQ(store_file_list_page(s, NULL, &pg, &l), 0);
  EXPECT_STR_EQ(file_ids(&l), "f1");
  EXPECT_FALSE(l.has_more);
  store_file_list_free(&l);

  /* before: the page adjacent to the cursor, in the requested order. */
  pg = (store_page){.limit = 2, .order = STORE_ORDER_ASC, .before = "f4"};
  ASSERT_INT_EQ(store_file_list_page(s, NULL, &pg, &l), 0);
  EXPECT_STR_EQ(file_ids(&l), "f2,f3");
  EXPECT_TRUE(l.has_more);
  store_file_list_free(&l);
  pg = (store_page){.limit = 2, .order = STORE_ORDER_DESC, .before = "f2"};
  ASSERT_INT_EQ(store_file_list_page(s, NULL, &pg, &l), 0);
  EXPECT_STR_EQ(file_ids(&l), "f4,f3");
  EXPECT_TRUE(l.has_more);
  store_file_list_free(&l);
  pg = (store_page){.limit = 10, .order = STORE_ORDER_ASC, .after = "f1", .before = "f5"};
  ASSERT_INT_EQ(store_file_list_page(s, NULL, &pg, &l), 0);
  EXPECT_STR_EQ(file_ids(&l), "f2,f3,f4");
  EXPECT_FALSE(l.has_more);
  store_file_list_free(&l);

  /* Purpose filter, and a cursor outside the filtered set. */
  pg = (store_page){.order = STORE_ORDER_ASC};
  ASSERT_INT_EQ(store_file_list_page(s, "assistants", &pg, &l), 0);
  EXPECT_STR_EQ(file_ids(&l), "f2,f4,f5");
  EXPECT_FALSE(l.has_more);
  store_file_list_free(&l);
  pg.after = "f1";
  EXPECT_INT_EQ(store_file_list_page(s, "assistants", &pg, &l), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "f1");
  pg.after = "nope";
  EXPECT_INT_EQ(store_file_list_page(s, NULL, &pg, &l), ERR_NOT_FOUND);
  pg = (store_page){.limit = STORE_PAGE_MAX + 1};
  EXPECT_INT_EQ(store_file_list_page(s, NULL, &pg, &l), ERR_RANGE);

  ASSERT_INT_EQ(store_file_delete(s, "f3"), 0);
  store_file g;
  EXPECT_INT_EQ(store_file_get(s, "f3", &g), ERR_NOT_FOUND);
  EXPECT_INT_EQ(store_file_delete(s, "f3"), ERR_NOT_FOUND);
  pg = (store_page){.order = STORE_ORDER_ASC};
  ASSERT_INT_EQ(store_file_list_page(s, NULL, &pg, &l), 0);
  EXPECT_STR_EQ(file_ids(&l), "f1,f2,f4,f5");
  store_file_list_free(&l);
  store_close(s);
}

TEST(store_file_rows_are_validated) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  store_file f = file_row("f1", "batch", 1, "../../etc/passwd");
  EXPECT_INT_EQ(store_file_insert(s, &f), ERR_INVALID);
  f = file_row(NULL, "batch", 1, fake_blob(1));
  EXPECT_INT_EQ(store_file_insert(s, &f), ERR_INVALID);
  f = file_row("f1", "batch", 1, fake_blob(1));
  f.bytes = -1;
  EXPECT_INT_EQ(store_file_insert(s, &f), ERR_INVALID);
  char path[800];
  EXPECT_INT_EQ(store_blob_path(s, "../parley.db", path, sizeof path), ERR_INVALID);
  EXPECT_INT_EQ(store_blob_path(s, "0123456789abcdef0123456789ABCDEF", path, sizeof path), ERR_INVALID);
  EXPECT_INT_EQ(store_blob_path(s, fake_blob(3), path, 10), ERR_TOO_LARGE);
  store_close(s);
}

/* ---- responses ------------------------------------------------------------------------------ */

TEST(store_responses_items_and_cascade) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  store_response r = {.id = (char *)"resp_1", .created_at = 500, .status = (char *)"in_progress",
                      .model = (char *)"tiny", .previous_response_id = (char *)"resp_0",
                      .body = (char *)"{\"id\":\"resp_1\"}", .stored = true};
  ASSERT_INT_EQ(store_response_put(s, &r), 0);
  store_item in[3] = {{.item_id = (char *)"msg_a", .kind = (char *)"input", .body = (char *)"A", .created_at = 500},
                      {.item_id = (char *)"msg_b", .kind = (char *)"input", .body = (char *)"B", .created_at = 500},
                      {.item_id = (char *)"msg_c", .kind = (char *)"input", .body = (char *)"C", .created_at = 500}};
  ASSERT_INT_EQ(store_response_items_append(s, "resp_1", in, 3), 0);
  store_item out[2] = {{.item_id = (char *)"msg_d", .kind = (char *)"output", .body = (char *)"D"},
                       {.item_id = (char *)"msg_e", .kind = (char *)"output", .body = (char *)"E"}};
  ASSERT_INT_EQ(store_response_items_append(s, "resp_1", out, 2), 0);
  store_item bad = {.item_id = (char *)"x", .kind = (char *)"sideways", .body = (char *)"{}"};
  EXPECT_INT_EQ(store_response_items_append(s, "resp_1", &bad, 1), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "sideways");
  EXPECT_INT_EQ(store_response_items_append(s, "resp_missing", in, 1), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "resp_missing");

  /* Update keeps created_at and replaces the rest. */
  r.status = (char *)"completed";
  r.updated_at = 510;
  r.created_at = 999;
  r.body = (char *)"{\"done\":true}";
  ASSERT_INT_EQ(store_response_put(s, &r), 0);
  store_response g;
  ASSERT_INT_EQ(store_response_get(s, "resp_1", &g), 0);
  EXPECT_STR_EQ(g.status, "completed");
  EXPECT_INT_EQ(g.created_at, 500);
  EXPECT_INT_EQ(g.updated_at, 510);
  EXPECT_STR_EQ(g.model, "tiny");
  EXPECT_STR_EQ(g.previous_response_id, "resp_0");
  EXPECT_TRUE(g.conversation_id == NULL);
  EXPECT_STR_EQ(g.body, "{\"done\":true}");
  EXPECT_TRUE(g.stored);
  store_response_free(&g);

  store_item_list l;
  store_page pg = {.limit = 100, .order = STORE_ORDER_ASC};
  ASSERT_INT_EQ(store_response_items_list(s, "resp_1", NULL, &pg, &l), 0);
  EXPECT_STR_EQ(item_ids(&l), "msg_a,msg_b,msg_c,msg_d,msg_e");
  ASSERT_INT_EQ(l.n_items, 5);
  EXPECT_INT_EQ(l.items[0].seq, 1);
  EXPECT_INT_EQ(l.items[4].seq, 5);
  EXPECT_STR_EQ(l.items[3].kind, "output");
  EXPECT_STR_EQ(l.items[1].body, "B");
  store_item_list_free(&l);

  /* Input items, newest first, two at a time (the input_items endpoint). */
  pg = (store_page){.limit = 2, .order = STORE_ORDER_DESC};
  ASSERT_INT_EQ(store_response_items_list(s, "resp_1", "input", &pg, &l), 0);
  EXPECT_STR_EQ(item_ids(&l), "msg_c,msg_b");
  EXPECT_TRUE(l.has_more);
  store_item_list_free(&l);
  pg.after = "msg_b";
  ASSERT_INT_EQ(store_response_items_list(s, "resp_1", "input", &pg, &l), 0);
  EXPECT_STR_EQ(item_ids(&l), "msg_a");
  EXPECT_FALSE(l.has_more);
  store_item_list_free(&l);
  pg = (store_page){.limit = 1, .order = STORE_ORDER_ASC, .before = "msg_c"};
  ASSERT_INT_EQ(store_response_items_list(s, "resp_1", "input", &pg, &l), 0);
  EXPECT_STR_EQ(item_ids(&l), "msg_b");
  EXPECT_TRUE(l.has_more);
  store_item_list_free(&l);
  pg = (store_page){.limit = 5, .after = "msg_d"};
  EXPECT_INT_EQ(store_response_items_list(s, "resp_1", "input", &pg, &l), ERR_NOT_FOUND);
  EXPECT_INT_EQ(store_response_items_list(s, "resp_nope", NULL, &pg, &l), ERR_NOT_FOUND);

  EXPECT_INT_EQ(raw_int("SELECT count(*) FROM response_items WHERE response_id = 'resp_1'"), 5);
  ASSERT_INT_EQ(store_response_delete(s, "resp_1"), 0);
  EXPECT_INT_EQ(raw_int("SELECT count(*) FROM response_items"), 0);
  EXPECT_INT_EQ(store_response_get(s, "resp_1", &g), ERR_NOT_FOUND);
  EXPECT_INT_EQ(store_response_delete(s, "resp_1"), ERR_NOT_FOUND);
  store_close(s);
}

/* ---- conversations --------------------------------------------------------------------------- */

TEST(store_conversations_items_paging_and_cascade) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  store_conversation c = {.id = (char *)"conv_1", .created_at = 700, .metadata = (char *)"{\"topic\":\"x\"}"};
  store_item first[2] = {{.item_id = (char *)"i1", .body = (char *)"one"}, {.item_id = (char *)"i2", .body = (char *)"two"}};
  ASSERT_INT_EQ(store_conversation_create(s, &c, first, 2), 0);
  EXPECT_INT_EQ(store_conversation_create(s, &c, NULL, 0), ERR_EXISTS);
  store_item more[3] = {{.item_id = (char *)"i3", .body = (char *)"3"},
                        {.item_id = (char *)"i4", .body = (char *)"4"},
                        {.item_id = (char *)"i5", .body = (char *)"5"}};
  ASSERT_INT_EQ(store_conversation_items_append(s, "conv_1", more, 3), 0);
  /* A repeated item id fails the whole append. */
  store_item again[2] = {{.item_id = (char *)"i6", .body = (char *)"6"}, {.item_id = (char *)"i2", .body = (char *)"dup"}};
  EXPECT_INT_EQ(store_conversation_items_append(s, "conv_1", again, 2), ERR_EXISTS);
  EXPECT_INT_EQ(raw_int("SELECT count(*) FROM conversation_items"), 5);

  store_item_list l;
  store_page pg = {.limit = 2, .order = STORE_ORDER_ASC};
  ASSERT_INT_EQ(store_conversation_items_list(s, "conv_1", &pg, &l), 0);
  EXPECT_STR_EQ(item_ids(&l), "i1,i2");
  EXPECT_TRUE(l.has_more);
  ASSERT_INT_EQ(l.n_items, 2);
  EXPECT_TRUE(l.items[0].kind == NULL);
  store_item_list_free(&l);
  pg.after = "i2";
  ASSERT_INT_EQ(store_conversation_items_list(s, "conv_1", &pg, &l), 0);
  EXPECT_STR_EQ(item_ids(&l), "i3,i4");
  EXPECT_TRUE(l.has_more);
  store_item_list_free(&l);
  pg.after = "i4";
  ASSERT_INT_EQ(store_conversation_items_list(s, "conv_1", &pg, &l), 0);
  EXPECT_STR_EQ(item_ids(&l), "i5");
  EXPECT_FALSE(l.has_more);
  store_item_list_free(&l);
  pg = (store_page){.limit = 2, .order = STORE_ORDER_DESC};
  ASSERT_INT_EQ(store_conversation_items_list(s, "conv_1", &pg, &l), 0);
  EXPECT_STR_EQ(item_ids(&l), "i5,i4");
  EXPECT_TRUE(l.has_more);
  store_item_list_free(&l);

  store_item it;
  ASSERT_INT_EQ(store_conversation_item_get(s, "conv_1", "i4", &it), 0);
  EXPECT_STR_EQ(it.body, "4");
  EXPECT_INT_EQ(it.seq, 4);
  store_item_free(&it);
  ASSERT_INT_EQ(store_conversation_item_delete(s, "conv_1", "i4"), 0);
  EXPECT_INT_EQ(store_conversation_item_get(s, "conv_1", "i4", &it), ERR_NOT_FOUND);
  EXPECT_INT_EQ(store_conversation_item_delete(s, "conv_1", "i4"), ERR_NOT_FOUND);
  EXPECT_INT_EQ(store_conversation_item_get(s, "conv_x", "i1", &it), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "conv_x");
  /* Appending after a deletion continues after the highest seq. */
  store_item last = {.item_id = (char *)"i7", .body = (char *)"7"};
  ASSERT_INT_EQ(store_conversation_items_append(s, "conv_1", &last, 1), 0);
  ASSERT_INT_EQ(store_conversation_item_get(s, "conv_1", "i7", &it), 0);
  EXPECT_INT_EQ(it.seq, 6);
  store_item_free(&it);

  ASSERT_INT_EQ(store_conversation_update_metadata(s, "conv_1", "{\"topic\":\"y\"}", 800), 0);
  EXPECT_INT_EQ(store_conversation_update_metadata(s, "conv_2", "{}", 800), ERR_NOT_FOUND);
  store_conversation g;
  ASSERT_INT_EQ(store_conversation_get(s, "conv_1", &g), 0);
  EXPECT_STR_EQ(g.metadata, "{\"topic\":\"y\"}");
  EXPECT_INT_EQ(g.created_at, 700);
  EXPECT_INT_EQ(g.updated_at, 800);
  store_conversation_free(&g);

  ASSERT_INT_EQ(store_conversation_delete(s, "conv_1"), 0);
  EXPECT_INT_EQ(raw_int("SELECT count(*) FROM conversation_items"), 0);
  EXPECT_INT_EQ(store_conversation_get(s, "conv_1", &g), ERR_NOT_FOUND);
  EXPECT_INT_EQ(store_conversation_items_list(s, "conv_1", &pg, &l), ERR_NOT_FOUND);
  store_close(s);
}

/* ---- jobs and ephemeral keys ------------------------------------------------------------------- */

TEST(store_jobs_survive_close_and_reopen) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  store_job a = {.id = (char *)"job_a", .kind = (char *)"download", .name = (char *)"org/model-a",
                 .state = (char *)"queued", .bytes_total = 1000, .created_at = 10, .payload = (char *)"{\"u\":1}"};
  store_job b = {.id = (char *)"job_b", .kind = (char *)"convert", .name = (char *)"m-b", .state = (char *)"queued",
                 .created_at = 5};
  store_job c = {.id = (char *)"job_c", .kind = (char *)"download", .state = (char *)"queued", .created_at = 20};
  ASSERT_INT_EQ(store_job_upsert(s, &a), 0);
  ASSERT_INT_EQ(store_job_upsert(s, &b), 0);
  ASSERT_INT_EQ(store_job_upsert(s, &c), 0);
  ASSERT_INT_EQ(store_job_update_progress(s, "job_a", "running", 400, 1000, NULL, 12), 0);
  ASSERT_INT_EQ(store_job_update_progress(s, "job_c", "failed", 0, 0, "connection reset", 21), 0);
  EXPECT_INT_EQ(store_job_update_progress(s, "job_z", "running", 1, 2, NULL, 1), ERR_NOT_FOUND);
  store_close(s);

  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  store_job g;
  ASSERT_INT_EQ(store_job_get(s, "job_a", &g), 0);
  EXPECT_STR_EQ(g.state, "running");
  EXPECT_INT_EQ(g.bytes_done, 400);
  EXPECT_INT_EQ(g.bytes_total, 1000);
  EXPECT_STR_EQ(g.name, "org/model-a");
  EXPECT_STR_EQ(g.payload, "{\"u\":1}");
  EXPECT_TRUE(g.error == NULL);
  EXPECT_INT_EQ(g.created_at, 10);
  EXPECT_INT_EQ(g.updated_at, 12);
  store_job_free(&g);
  ASSERT_INT_EQ(store_job_get(s, "job_c", &g), 0);
  EXPECT_STR_EQ(g.state, "failed");
  EXPECT_STR_EQ(g.error, "connection reset");
  EXPECT_STR_EQ(g.name, "");
  store_job_free(&g);

  store_job_list l;
  ASSERT_INT_EQ(store_job_list_all(s, NULL, &l), 0);
  ASSERT_INT_EQ(l.n_items, 3);
  EXPECT_STR_EQ(l.items[0].id, "job_b");
  EXPECT_STR_EQ(l.items[1].id, "job_a");
  EXPECT_STR_EQ(l.items[2].id, "job_c");
  store_job_list_free(&l);
  ASSERT_INT_EQ(store_job_list_all(s, "download", &l), 0);
  ASSERT_INT_EQ(l.n_items, 2);
  EXPECT_STR_EQ(l.items[0].id, "job_a");
  EXPECT_STR_EQ(l.items[1].id, "job_c");
  store_job_list_free(&l);

  /* Upsert of an existing job keeps its created_at and clears the error. */
  c.created_at = 99;
  c.state = (char *)"queued";
  c.updated_at = 30;
  ASSERT_INT_EQ(store_job_upsert(s, &c), 0);
  ASSERT_INT_EQ(store_job_get(s, "job_c", &g), 0);
  EXPECT_INT_EQ(g.created_at, 20);
  EXPECT_INT_EQ(g.updated_at, 30);
  EXPECT_TRUE(g.error == NULL);
  store_job_free(&g);
  ASSERT_INT_EQ(store_job_delete(s, "job_b"), 0);
  EXPECT_INT_EQ(store_job_get(s, "job_b", &g), ERR_NOT_FOUND);
  EXPECT_INT_EQ(store_job_delete(s, "job_b"), ERR_NOT_FOUND);
  store_close(s);
}

TEST(store_ephemeral_keys_expire) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  store_ekey k1 = {.key_hash = (char *)"h1", .created_at = 900, .expires_at = 1000, .session = (char *)"{\"m\":1}"};
  store_ekey k2 = {.key_hash = (char *)"h2", .created_at = 900, .expires_at = 2000};
  ASSERT_INT_EQ(store_ekey_put(s, &k1), 0);
  ASSERT_INT_EQ(store_ekey_put(s, &k2), 0);
  EXPECT_INT_EQ(store_ekey_put(s, &k1), ERR_EXISTS);
  store_ekey g;
  ASSERT_INT_EQ(store_ekey_lookup(s, "h1", 999, &g), 0);
  EXPECT_STR_EQ(g.session, "{\"m\":1}");
  EXPECT_INT_EQ(g.expires_at, 1000);
  store_ekey_free(&g);
  EXPECT_INT_EQ(store_ekey_lookup(s, "h1", 1000, &g), ERR_NOT_FOUND);
  EXPECT_INT_EQ(store_ekey_lookup(s, "h3", 0, &g), ERR_NOT_FOUND);
  size_t n = 99;
  ASSERT_INT_EQ(store_ekey_purge(s, 1000, &n), 0);
  EXPECT_INT_EQ(n, 1);
  EXPECT_INT_EQ(raw_int("SELECT count(*) FROM ephemeral_keys"), 1);
  ASSERT_INT_EQ(store_ekey_lookup(s, "h2", 1999, &g), 0);
  EXPECT_TRUE(g.session == NULL);
  store_ekey_free(&g);
  ASSERT_INT_EQ(store_ekey_purge(s, 5000, &n), 0);
  EXPECT_INT_EQ(n, 1);
  store_close(s);
}

/* ---- transactions --------------------------------------------------------------------------------- */

TEST(store_transactions_commit_rollback_and_nest) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  store_job j = {.id = (char *)"j1", .kind = (char *)"k", .state = (char *)"queued", .created_at = 1};
  ASSERT_INT_EQ(store_begin(s), 0);
  ASSERT_INT_EQ(store_job_upsert(s, &j), 0);
  store_rollback(s);
  store_job g;
  EXPECT_INT_EQ(store_job_get(s, "j1", &g), ERR_NOT_FOUND);

  ASSERT_INT_EQ(store_begin(s), 0);
  ASSERT_INT_EQ(store_job_upsert(s, &j), 0);
  ASSERT_INT_EQ(store_begin(s), 0);
  store_job j2 = {.id = (char *)"j2", .kind = (char *)"k", .state = (char *)"queued", .created_at = 2};
  ASSERT_INT_EQ(store_job_upsert(s, &j2), 0);
  store_rollback(s);
  ASSERT_INT_EQ(store_commit(s), 0);
  EXPECT_INT_EQ(store_job_get(s, "j1", &g), 0);
  store_job_free(&g);
  EXPECT_INT_EQ(store_job_get(s, "j2", &g), ERR_NOT_FOUND);
  EXPECT_INT_EQ(store_commit(s), ERR_INVALID);
  EXPECT_INT_EQ(raw_int("SELECT count(*) FROM jobs"), 1);
  ASSERT_INT_EQ(store_exec(s, "UPDATE jobs SET name = 'n'"), 0);
  EXPECT_INT_EQ(store_exec(s, "UPDATE no_such_table SET x = 1"), ERR_INTERNAL);
  EXPECT_STR_CONTAINS(err_detail(), "no_such_table");
  store_close(s);
}

/* ---- blobs ---------------------------------------------------------------------------------------- */

TEST(store_blob_writer_commit_and_abort) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  enum { N = 300000 };
  char *data = malloc(N);
  ASSERT_TRUE(data != NULL);
  for (size_t i = 0; i < N; i++) data[i] = (char)(i * 7 + i / 256);
  store_blob_writer *w = NULL;
  ASSERT_INT_EQ(store_blob_writer_open(s, &w), 0);
  ASSERT_INT_EQ(store_blob_writer_write(w, data, 1), 0);
  ASSERT_INT_EQ(store_blob_writer_write(w, data + 1, 100000), 0);
  ASSERT_INT_EQ(store_blob_writer_write(w, data + 100001, N - 100001), 0);
  EXPECT_INT_EQ(store_blob_writer_bytes(w), N);
  int n_tmp, n_final;
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_tmp, 1);
  EXPECT_INT_EQ(n_final, 0);
  char name[STORE_BLOB_NAME_CAP];
  ASSERT_INT_EQ(store_blob_writer_commit(w, name, sizeof name), 0);
  EXPECT_INT_EQ(strlen(name), 32);
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_tmp, 0);
  EXPECT_INT_EQ(n_final, 1);
  char path[800];
  ASSERT_INT_EQ(store_blob_path(s, name, path, sizeof path), 0);
  char *back = malloc(N + 10);
  size_t n = 0;
  ASSERT_INT_EQ(read_file(path, back, N + 10, &n), 0);
  EXPECT_INT_EQ(n, N);
  EXPECT_MEM_EQ(back, data, N);
  free(back);

  ASSERT_INT_EQ(store_blob_writer_open(s, &w), 0);
  ASSERT_INT_EQ(store_blob_writer_write(w, data, 1000), 0);
  store_blob_writer_abort(w);
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_tmp, 0);
  EXPECT_INT_EQ(n_final, 1);

  ASSERT_INT_EQ(store_blob_delete(s, name), 0);
  ASSERT_INT_EQ(store_blob_delete(s, name), 0); /* already gone: fine */
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_final, 0);
  free(data);
  store_close(s);
}

TEST(store_blob_crash_mid_write_leaves_no_partial_blob) {
  /* The child is the process that crashes: it writes half a blob and
   * _exit()s without committing (no destructors, no cleanup). */
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    store *cs = NULL;
    if (store_open(data_dir(), &cs) != 0) _exit(3);
    store_blob_writer *w = NULL;
    if (store_blob_writer_open(cs, &w) != 0) _exit(4);
    char half[5000];
    memset(half, 'h', sizeof half);
    if (store_blob_writer_write(w, half, sizeof half) != 0) _exit(5);
    _exit(0);
  }
  int status = 0;
  ASSERT_INT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_INT_EQ(WEXITSTATUS(status), 0);
  int n_tmp, n_final;
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_tmp, 1);   /* the crash left its temp file ... */
  EXPECT_INT_EQ(n_final, 0); /* ... and nothing under a final name */
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_tmp, 0);
  EXPECT_INT_EQ(n_final, 0);
  store_close(s);
}

TEST(store_blob_orphans_older_than_an_hour_are_swept) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  char old_orphan[STORE_BLOB_NAME_CAP], old_used[STORE_BLOB_NAME_CAP], new_orphan[STORE_BLOB_NAME_CAP];
  char *names[3] = {old_orphan, old_used, new_orphan};
  for (int i = 0; i < 3; i++) {
    store_blob_writer *w = NULL;
    ASSERT_INT_EQ(store_blob_writer_open(s, &w), 0);
    ASSERT_INT_EQ(store_blob_writer_write(w, "abc", 3), 0);
    ASSERT_INT_EQ(store_blob_writer_commit(w, names[i], STORE_BLOB_NAME_CAP), 0);
  }
  store_file f = file_row("file-used", "batch", 1, old_used);
  ASSERT_INT_EQ(store_file_insert(s, &f), 0);
  /* Age two of them by two hours. */
  for (int i = 0; i < 2; i++) {
    char p[800];
    ASSERT_INT_EQ(store_blob_path(s, names[i], p, sizeof p), 0);
    struct timespec ts[2] = {{time_wall_s() - 7200, 0}, {time_wall_s() - 7200, 0}};
    ASSERT_INT_EQ(utimensat(AT_FDCWD, p, ts, 0), 0);
  }
  store_close(s);
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  char p[800];
  struct stat st;
  ASSERT_INT_EQ(store_blob_path(s, old_orphan, p, sizeof p), 0);
  EXPECT_INT_NE(stat(p, &st), 0);
  ASSERT_INT_EQ(store_blob_path(s, old_used, p, sizeof p), 0);
  EXPECT_INT_EQ(stat(p, &st), 0);
  ASSERT_INT_EQ(store_blob_path(s, new_orphan, p, sizeof p), 0);
  EXPECT_INT_EQ(stat(p, &st), 0);
  store_close(s);
}

TEST(store_blob_adopt_moves_a_spooled_file) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  char spool[700];
  snprintf(spool, sizeof spool, "%s/spool-1", test_tmpdir());
  ASSERT_INT_EQ(write_file(spool, "spooled bytes", 13), 0);
  char name[STORE_BLOB_NAME_CAP], path[800], back[64];
  size_t n = 0;
  ASSERT_INT_EQ(store_blob_adopt(s, spool, name, sizeof name), 0);
  EXPECT_INT_NE(access(spool, F_OK), 0);
  ASSERT_INT_EQ(store_blob_path(s, name, path, sizeof path), 0);
  ASSERT_INT_EQ(read_file(path, back, sizeof back, &n), 0);
  EXPECT_INT_EQ(n, 13);
  EXPECT_MEM_EQ(back, "spooled bytes", 13);
  EXPECT_INT_EQ(store_blob_adopt(s, spool, name, sizeof name), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "spool-1");
  store_close(s);
}

TEST(store_spool_leftovers_are_removed_at_open) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  char p[800];
  snprintf(p, sizeof p, "%s/partial-upload", store_spool_dir(s));
  ASSERT_INT_EQ(write_file(p, "half", 4), 0);
  store_close(s);
  EXPECT_INT_EQ(access(p, F_OK), 0);
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  EXPECT_INT_NE(access(p, F_OK), 0);
  store_close(s);
}

TEST(store_blob_adopt_across_filesystems_copies) {
  struct stat a, b;
  if (stat("/dev/shm", &b) != 0 || stat(test_tmpdir(), &a) != 0 || a.st_dev == b.st_dev) {
    TEST_SKIP("needs /dev/shm on a different filesystem than the test directory");
  }
  char spool[128];
  snprintf(spool, sizeof spool, "/dev/shm/parley-store-test-%d", (int)getpid());
  ASSERT_INT_EQ(write_file(spool, "across filesystems", 18), 0);
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  char name[STORE_BLOB_NAME_CAP], path[800], back[64];
  size_t n = 0;
  int rc = store_blob_adopt(s, spool, name, sizeof name);
  EXPECT_INT_EQ(rc, 0);
  EXPECT_INT_NE(access(spool, F_OK), 0);
  unlink(spool);
  ASSERT_INT_EQ(rc, 0);
  ASSERT_INT_EQ(store_blob_path(s, name, path, sizeof path), 0);
  ASSERT_INT_EQ(read_file(path, back, sizeof back, &n), 0);
  EXPECT_INT_EQ(n, 18);
  EXPECT_MEM_EQ(back, "across filesystems", 18);
  int n_tmp, n_final;
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_tmp, 0);
  EXPECT_INT_EQ(n_final, 1);
  store_close(s);
}

TEST(store_file_add_spooled_is_all_or_nothing) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  char spool[700];
  snprintf(spool, sizeof spool, "%s/upload.bin", test_tmpdir());
  ASSERT_INT_EQ(write_file(spool, "0123456789abcdefghij", 20), 0);
  store_file f = file_row("file-a", "assistants", 42, NULL);
  f.bytes = 999; /* ignored: the size comes from the file */
  char blob[STORE_BLOB_NAME_CAP];
  int64_t bytes = 0;
  ASSERT_INT_EQ(store_file_add_spooled(s, &f, spool, blob, sizeof blob, &bytes), 0);
  EXPECT_INT_EQ(bytes, 20);
  store_file g;
  ASSERT_INT_EQ(store_file_get(s, "file-a", &g), 0);
  EXPECT_INT_EQ(g.bytes, 20);
  EXPECT_STR_EQ(g.blob, blob);
  store_file_free(&g);

  /* Same id again: the row fails, and no blob may stay behind. */
  ASSERT_INT_EQ(write_file(spool, "second", 6), 0);
  EXPECT_INT_EQ(store_file_add_spooled(s, &f, spool, blob, sizeof blob, &bytes), ERR_EXISTS);
  int n_tmp, n_final;
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_tmp, 0);
  EXPECT_INT_EQ(n_final, 1);

  /* Deleting the file removes its blob too. */
  ASSERT_INT_EQ(store_file_delete(s, "file-a"), 0);
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_final, 0);
  store_close(s);
}

/* ---- threads ---------------------------------------------------------------------------------------- */

enum { THREADS = 4, PER_THREAD = 50 };

struct worker_arg {
  store *s;
  int t;
  int failures;
};

static void *insert_worker(void *p) {
  struct worker_arg *a = p;
  for (int i = 0; i < PER_THREAD; i++) {
    char id[32], blob[STORE_BLOB_NAME_CAP];
    snprintf(id, sizeof id, "file-t%d-%d", a->t, i);
    snprintf(blob, sizeof blob, "%032x", a->t * 1000 + i);
    store_file f = file_row(id, "batch", 1000 + i, blob);
    /* Every fifth insert goes through an explicit transaction with a job. */
    if (i % 5 == 0) {
      if (store_begin(a->s) != 0) { a->failures++; continue; }
      store_job j = {.id = id, .kind = (char *)"k", .state = (char *)"queued", .created_at = i};
      int rc = store_file_insert(a->s, &f);
      if (!rc) rc = store_job_upsert(a->s, &j);
      if (rc) { store_rollback(a->s); a->failures++; continue; }
      if (store_commit(a->s) != 0) a->failures++;
    } else if (store_file_insert(a->s, &f) != 0) {
      a->failures++;
    }
    store_file g;
    if (store_file_get(a->s, id, &g) != 0) a->failures++;
    store_file_free(&g);
  }
  return NULL;
}

TEST(store_concurrent_inserts_from_4_threads_all_land) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  pthread_t th[THREADS];
  struct worker_arg args[THREADS];
  for (int t = 0; t < THREADS; t++) {
    args[t] = (struct worker_arg){s, t, 0};
    ASSERT_INT_EQ(pthread_create(&th[t], NULL, insert_worker, &args[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) {
    pthread_join(th[t], NULL);
    EXPECT_INT_EQ(args[t].failures, 0);
  }
  store_page pg = {.limit = 1000};
  store_file_list l;
  ASSERT_INT_EQ(store_file_list_page(s, "batch", &pg, &l), 0);
  EXPECT_INT_EQ(l.n_items, THREADS * PER_THREAD);
  EXPECT_FALSE(l.has_more);
  store_file_list_free(&l);
  store_job_list jl;
  ASSERT_INT_EQ(store_job_list_all(s, NULL, &jl), 0);
  EXPECT_INT_EQ(jl.n_items, THREADS * PER_THREAD / 5);
  store_job_list_free(&jl);
  store_close(s);
  EXPECT_INT_EQ(raw_int("SELECT count(DISTINCT id) FROM files"), THREADS * PER_THREAD);
}

/* ---- uploads and file expiry ------------------------------------------------------------------------ */

/* Commits a blob holding text; returns its name in out. */
static int make_blob(store *s, const char *text, char *out) {
  store_blob_writer *w = NULL;
  int rc = store_blob_writer_open(s, &w);
  if (rc) return rc;
  rc = store_blob_writer_write(w, text, strlen(text));
  if (rc) {
    store_blob_writer_abort(w);
    return rc;
  }
  return store_blob_writer_commit(w, out, STORE_BLOB_NAME_CAP);
}

static int add_part(store *s, const char *upload_id, const char *part_id, const char *text) {
  char blob[STORE_BLOB_NAME_CAP];
  int rc = make_blob(s, text, blob);
  if (rc) return rc;
  store_upload_part p = {.id = (char *)part_id, .upload_id = (char *)upload_id, .created_at = 1,
                         .bytes = (int64_t)strlen(text), .blob = blob};
  rc = store_upload_part_add(s, &p);
  if (rc) store_blob_delete(s, blob);
  return rc;
}

TEST(store_uploads_complete_concatenates_parts) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  store_upload u = {.id = (char *)"upload_1", .created_at = 10, .filename = (char *)"big.txt",
                    .purpose = (char *)"assistants", .bytes = 11, .mime_type = (char *)"text/plain"};
  ASSERT_INT_EQ(store_upload_create(s, &u), 0);
  ASSERT_INT_EQ(add_part(s, "upload_1", "part_w", "world"), 0);
  ASSERT_INT_EQ(add_part(s, "upload_1", "part_h", "hello"), 0);
  ASSERT_INT_EQ(add_part(s, "upload_1", "part_s", " "), 0);
  EXPECT_INT_EQ(add_part(s, "upload_x", "part_q", "q"), ERR_NOT_FOUND);
  store_upload_part_list pl;
  ASSERT_INT_EQ(store_upload_parts_list(s, "upload_1", &pl), 0);
  ASSERT_INT_EQ(pl.n_items, 3);
  EXPECT_STR_EQ(pl.items[0].id, "part_w");
  EXPECT_STR_EQ(pl.items[2].id, "part_s");
  EXPECT_INT_EQ(pl.items[1].bytes, 5);
  store_upload_part_list_free(&pl);

  store_upload u2 = {.id = (char *)"upload_2", .created_at = 11, .filename = (char *)"o", .purpose = (char *)"batch",
                     .bytes = 1};
  ASSERT_INT_EQ(store_upload_create(s, &u2), 0);
  ASSERT_INT_EQ(add_part(s, "upload_2", "part_o", "o"), 0);

  store_file f = file_row("file-up", "assistants", 20, NULL);
  char blob[STORE_BLOB_NAME_CAP];
  int n_tmp, n_final;
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_final, 4);
  /* Refusals change nothing: repeated id, a part of another upload, a size mismatch. */
  const char *rep[3] = {"part_h", "part_s", "part_h"};
  EXPECT_INT_EQ(store_upload_complete(s, "upload_1", rep, 3, &f, blob, sizeof blob), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "repeated");
  const char *other[3] = {"part_h", "part_s", "part_o"};
  EXPECT_INT_EQ(store_upload_complete(s, "upload_1", other, 3, &f, blob, sizeof blob), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "part_o");
  const char *short_[2] = {"part_h", "part_w"};
  EXPECT_INT_EQ(store_upload_complete(s, "upload_1", short_, 2, &f, blob, sizeof blob), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "10 bytes but 11");
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_tmp, 0);
  EXPECT_INT_EQ(n_final, 4);

  const char *order[3] = {"part_h", "part_s", "part_w"};
  ASSERT_INT_EQ(store_upload_complete(s, "upload_1", order, 3, &f, blob, sizeof blob), 0);
  char path[800], back[64];
  size_t n = 0;
  ASSERT_INT_EQ(store_blob_path(s, blob, path, sizeof path), 0);
  ASSERT_INT_EQ(read_file(path, back, sizeof back, &n), 0);
  EXPECT_INT_EQ(n, 11);
  EXPECT_MEM_EQ(back, "hello world", 11);
  store_file g;
  ASSERT_INT_EQ(store_file_get(s, "file-up", &g), 0);
  EXPECT_INT_EQ(g.bytes, 11);
  EXPECT_STR_EQ(g.blob, blob);
  store_file_free(&g);
  store_upload ug;
  ASSERT_INT_EQ(store_upload_get(s, "upload_1", &ug), 0);
  EXPECT_STR_EQ(ug.status, "completed");
  EXPECT_STR_EQ(ug.file_id, "file-up");
  EXPECT_STR_EQ(ug.mime_type, "text/plain");
  store_upload_free(&ug);
  ASSERT_INT_EQ(store_upload_parts_list(s, "upload_1", &pl), 0);
  EXPECT_INT_EQ(pl.n_items, 0);
  store_upload_part_list_free(&pl);
  /* Three part blobs gone, one file blob added; upload_2's part remains. */
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_tmp, 0);
  EXPECT_INT_EQ(n_final, 2);

  f.id = (char *)"file-up2";
  EXPECT_INT_EQ(store_upload_complete(s, "upload_1", order, 3, &f, blob, sizeof blob), ERR_CONFLICT);
  EXPECT_INT_EQ(add_part(s, "upload_1", "part_late", "x"), ERR_CONFLICT);

  ASSERT_INT_EQ(store_upload_finish(s, "upload_2", "cancelled"), 0);
  ASSERT_INT_EQ(store_upload_get(s, "upload_2", &ug), 0);
  EXPECT_STR_EQ(ug.status, "cancelled");
  EXPECT_TRUE(ug.file_id == NULL);
  store_upload_free(&ug);
  EXPECT_INT_EQ(store_upload_finish(s, "upload_2", "cancelled"), ERR_CONFLICT);
  EXPECT_INT_EQ(store_upload_finish(s, "upload_9", "cancelled"), ERR_NOT_FOUND);
  count_blobs(&n_tmp, &n_final);
  EXPECT_INT_EQ(n_final, 1);
  store_close(s);
}

TEST(store_expired_files_are_purged_with_their_blobs) {
  store *s = NULL;
  ASSERT_INT_EQ(store_open(data_dir(), &s), 0);
  const int64_t expires[4] = {0, 100, 150, 200};
  char blobs[4][STORE_BLOB_NAME_CAP];
  for (int i = 0; i < 4; i++) {
    ASSERT_INT_EQ(make_blob(s, "x", blobs[i]), 0);
    char id[32];
    snprintf(id, sizeof id, "file-%d", i);
    store_file f = file_row(id, "batch", 1, blobs[i]);
    f.expires_at = expires[i];
    ASSERT_INT_EQ(store_file_insert(s, &f), 0);
  }
  size_t n = 0;
  ASSERT_INT_EQ(store_file_purge_expired(s, 150, &n), 0);
  EXPECT_INT_EQ(n, 2);
  store_file g;
  EXPECT_INT_EQ(store_file_get(s, "file-1", &g), ERR_NOT_FOUND);
  EXPECT_INT_EQ(store_file_get(s, "file-2", &g), ERR_NOT_FOUND);
  ASSERT_INT_EQ(store_file_get(s, "file-0", &g), 0);
  store_file_free(&g);
  ASSERT_INT_EQ(store_file_get(s, "file-3", &g), 0);
  store_file_free(&g);
  char p[800];
  struct stat st;
  for (int i = 0; i < 4; i++) {
    ASSERT_INT_EQ(store_blob_path(s, blobs[i], p, sizeof p), 0);
    TEST_CHECK_((stat(p, &st) == 0) == (i == 0 || i == 3), 0, "blob of file-%d present=%d", i, stat(p, &st) == 0);
  }
  store_close(s);
}
