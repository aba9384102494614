/*
 * test_openai_files.c - the OpenAI Files/Uploads adapter: its pure helpers
 * (purpose list, expires_after bounds, the File object) and one in-process
 * round trip over loopback (a real store, the real route table, libcurl as
 * the client: loopback.h) that also checks where the bytes end up on disk:
 * the spool is empty after an upload, one blob per file, none after delete.
 *
 * Expectations are written by hand from ../shared/specs/openai.md 5.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "api/openai/files.h"
#include "api/openai/md5.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"
#include "loopback.h"
#include "test.h"

TEST(openai_files_purpose) {
  const char *ok[] = {"assistants", "batch", "fine-tune", "vision", "user_data", "evals"};
  for (size_t i = 0; i < ARRAY_LEN(ok); i++) EXPECT_TRUE(openai_file_purpose_ok(ok[i]));
  const char *bad[] = {"", "Batch", "training", "fine_tune", "assistants_output", "batch_output", "batch "};
  for (size_t i = 0; i < ARRAY_LEN(bad); i++) EXPECT_FALSE(openai_file_purpose_ok(bad[i]));
  EXPECT_FALSE(openai_file_purpose_ok(NULL));
}

TEST(openai_files_expires_after) {
  const char *param = "x";
  EXPECT_INT_EQ(openai_expires_after_check("created_at", 3600, &param), 0);
  EXPECT_TRUE(param == NULL);
  EXPECT_INT_EQ(openai_expires_after_check("created_at", 2592000, &param), 0);
  EXPECT_INT_EQ(openai_expires_after_check("created_at", 3599, &param), ERR_RANGE);
  EXPECT_STR_EQ(param, "expires_after[seconds]");
  EXPECT_STR_CONTAINS(err_detail(), "3599");
  EXPECT_INT_EQ(openai_expires_after_check("created_at", 2592001, &param), ERR_RANGE);
  EXPECT_INT_EQ(openai_expires_after_check("created_at", -1, &param), ERR_RANGE);
  EXPECT_INT_EQ(openai_expires_after_check("last_active_at", 3600, &param), ERR_INVALID);
  EXPECT_STR_EQ(param, "expires_after[anchor]");
  EXPECT_STR_CONTAINS(err_detail(), "last_active_at");
  EXPECT_INT_EQ(openai_expires_after_check(NULL, 3600, &param), ERR_INVALID);
}

TEST(openai_files_object_json) {
  store_file f = {.id = "file-abc", .purpose = "user_data", .filename = "notes.pdf", .bytes = 120000,
                  .created_at = 1760000000, .expires_at = 1760003600, .status = "processed"};
  json_t *o = openai_file_json(&f);
  ASSERT_TRUE(o != NULL);
  char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  EXPECT_STR_EQ(s, "{\"bytes\":120000,\"created_at\":1760000000,\"expires_at\":1760003600,\"filename\":\"notes.pdf\","
                   "\"id\":\"file-abc\",\"object\":\"file\",\"purpose\":\"user_data\",\"status\":\"processed\","
                   "\"status_details\":null}");
  free(s);
  json_decref(o);
  f.expires_at = 0; /* no expiry: null, key still present */
  o = openai_file_json(&f);
  ASSERT_TRUE(o != NULL);
  EXPECT_TRUE(json_is_null(json_object_get(o, "expires_at")));
  json_decref(o);
}

/* ---- loopback round trip ------------------------------------------------ */

typedef struct upload_arg {
  const char *purpose;
  const void *data;
  size_t len;
  const char *filename;
  const char *field; /* "file" or "data" */
} upload_arg;

static curl_mime *mk_upload(CURL *c, void *arg) {
  upload_arg *a = arg;
  curl_mime *m = curl_mime_init(c);
  curl_mimepart *p;
  if (a->purpose) {
    p = curl_mime_addpart(m);
    curl_mime_name(p, "purpose");
    curl_mime_data(p, a->purpose, CURL_ZERO_TERMINATED);
  }
  p = curl_mime_addpart(m);
  curl_mime_name(p, a->field);
  curl_mime_data(p, a->data, a->len);
  curl_mime_filename(p, a->filename);
  return m;
}

/* Regular files in dir, dot-files included (blob temp files start with "."). */
static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

static const char *jstr(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

TEST(openai_files_loopback_roundtrip) {
  char dir[512], blobs[600];
  snprintf(dir, sizeof dir, "%s/openai-files-%d", test_tmpdir(), (int)getpid());
  snprintf(blobs, sizeof blobs, "%s/blobs", dir);
  store *st = NULL;
  ASSERT_INT_EQ(store_open(dir, &st), 0);
  openai_files_ctx fctx = {.st = st};
  const http_route *routes;
  size_t n_routes = openai_files_routes(&fctx, &routes);
  EXPECT_INT_EQ(n_routes, 9);
  http_server *srv = NULL;
  ASSERT_INT_EQ(loopback_start(routes, n_routes, store_spool_dir(st), &srv), 0);
  int port = http_server_port(srv);

  unsigned char data[1000];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(255 - i % 256);
  buf out = BUF_INIT;
  upload_arg ua = {"batch", data, sizeof data, "d.bin", "file"};
  long st_code = loopback_request(port, "POST", "/v1/files", mk_upload, &ua, NULL, &out);
  EXPECT_INT_EQ(st_code, 200);
  json_t *f = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
  ASSERT_TRUE(f != NULL);
  EXPECT_STR_EQ(jstr(f, "object"), "file");
  EXPECT_STR_EQ(jstr(f, "filename"), "d.bin");
  EXPECT_STR_EQ(jstr(f, "purpose"), "batch");
  EXPECT_INT_EQ(json_integer_value(json_object_get(f, "bytes")), 1000);
  char id[64];
  snprintf(id, sizeof id, "%s", jstr(f, "id") ? jstr(f, "id") : "");
  json_decref(f);
  EXPECT_TRUE(str_starts_with(id, "file-"));
  /* the spool file was moved, not copied: spool empty, one blob */
  EXPECT_INT_EQ(count_files(store_spool_dir(st)), 0);
  EXPECT_INT_EQ(count_files(blobs), 1);

  char path[256];
  snprintf(path, sizeof path, "/v1/files/%s/content", id);
  EXPECT_INT_EQ(loopback_request(port, "GET", path, NULL, NULL, NULL, &out), 200);
  EXPECT_INT_EQ(out.len, 1000);
  if (out.len == 1000) EXPECT_MEM_EQ(out.data, data, 1000);

  /* a rejected upload stores nothing and leaves no spool file */
  upload_arg bad = {"training", data, sizeof data, "d.bin", "file"};
  EXPECT_INT_EQ(loopback_request(port, "POST", "/v1/files", mk_upload, &bad, NULL, &out), 400);
  /* the layer removes a spool file nobody took once the request is done,
   * which may be just after the client has the answer: wait up to 2 s */
  for (int i = 0; i < 200 && count_files(store_spool_dir(st)) != 0; i++) usleep(10000);
  EXPECT_INT_EQ(count_files(store_spool_dir(st)), 0);
  EXPECT_INT_EQ(count_files(blobs), 1);

  /* uploads: two parts, complete, the file is the concatenation */
  EXPECT_INT_EQ(loopback_request(port, "POST", "/v1/uploads", NULL, NULL,
                        "{\"filename\":\"u.bin\",\"purpose\":\"assistants\",\"bytes\":1500,\"mime_type\":\"x/y\"}", &out),
                200);
  json_t *u = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
  ASSERT_TRUE(u != NULL);
  char uid[64];
  snprintf(uid, sizeof uid, "%s", jstr(u, "id") ? jstr(u, "id") : "");
  EXPECT_STR_EQ(jstr(u, "status"), "pending");
  json_decref(u);
  char pids[2][64];
  for (int i = 0; i < 2; i++) {
    /* part 0: data[0..1000), part 1: data[0..500) */
    upload_arg pa = {NULL, data, i == 0 ? 1000 : 500, "blob", "data"};
    snprintf(path, sizeof path, "/v1/uploads/%s/parts", uid);
    EXPECT_INT_EQ(loopback_request(port, "POST", path, mk_upload, &pa, NULL, &out), 200);
    json_t *p = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
    snprintf(pids[i], sizeof pids[i], "%s", p && jstr(p, "id") ? jstr(p, "id") : "");
    EXPECT_TRUE(str_starts_with(pids[i], "part_"));
    json_decref(p);
  }
  EXPECT_INT_EQ(count_files(store_spool_dir(st)), 0);
  EXPECT_INT_EQ(count_files(blobs), 3); /* the file and two parts */
  char body[256];
  snprintf(body, sizeof body, "{\"part_ids\":[\"%s\",\"%s\"]}", pids[1], pids[0]);
  snprintf(path, sizeof path, "/v1/uploads/%s/complete", uid);
  EXPECT_INT_EQ(loopback_request(port, "POST", path, NULL, NULL, body, &out), 200);
  u = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
  ASSERT_TRUE(u != NULL);
  EXPECT_STR_EQ(jstr(u, "status"), "completed");
  json_t *uf = json_object_get(u, "file");
  EXPECT_INT_EQ(json_integer_value(json_object_get(uf, "bytes")), 1500);
  snprintf(path, sizeof path, "/v1/files/%s/content", jstr(uf, "id") ? jstr(uf, "id") : "");
  json_decref(u);
  /* parts are gone, the new file's blob is there */
  EXPECT_INT_EQ(count_files(blobs), 2);
  EXPECT_INT_EQ(loopback_request(port, "GET", path, NULL, NULL, NULL, &out), 200);
  /* part_ids order: the 500-byte part (data[0..500)) first, then data[0..1000) */
  EXPECT_INT_EQ(out.len, 1500);
  if (out.len == 1500) {
    EXPECT_MEM_EQ(out.data, data, 500);
    EXPECT_MEM_EQ(out.data + 500, data, 1000);
  }

  snprintf(path, sizeof path, "/v1/files/%s", id);
  EXPECT_INT_EQ(loopback_request(port, "DELETE", path, NULL, NULL, NULL, &out), 200);
  EXPECT_INT_EQ(count_files(blobs), 1);
  EXPECT_INT_EQ(loopback_request(port, "GET", path, NULL, NULL, NULL, &out), 404);
  json_t *e = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
  json_t *err = json_object_get(e, "error");
  EXPECT_STR_EQ(jstr(err, "type"), "invalid_request_error");
  EXPECT_STR_EQ(jstr(err, "param"), "file_id");
  EXPECT_TRUE(json_is_null(json_object_get(err, "code")));
  json_decref(e);

  buf_free(&out);
  http_server_free(srv);
  store_close(st);
}

TEST(openai_files_expired_are_purged) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/openai-files-exp-%d", test_tmpdir(), (int)getpid());
  store *st = NULL;
  ASSERT_INT_EQ(store_open(dir, &st), 0);
  openai_files_ctx fctx = {.st = st};
  const http_route *routes;
  size_t n_routes = openai_files_routes(&fctx, &routes);
  http_server *srv = NULL;
  ASSERT_INT_EQ(loopback_start(routes, n_routes, store_spool_dir(st), &srv), 0);
  /* A row that expired a second ago, inserted directly (the API only allows
   * expiry an hour out), next to one that never expires. */
  char blob[STORE_BLOB_NAME_CAP], blob2[STORE_BLOB_NAME_CAP];
  store_blob_writer *w = NULL;
  ASSERT_INT_EQ(store_blob_writer_open(st, &w), 0);
  ASSERT_INT_EQ(store_blob_writer_commit(w, blob, sizeof blob), 0);
  ASSERT_INT_EQ(store_blob_writer_open(st, &w), 0);
  ASSERT_INT_EQ(store_blob_writer_commit(w, blob2, sizeof blob2), 0);
  int64_t now = time_wall_s();
  store_file old = {.id = "file-old", .purpose = "batch", .filename = "o", .created_at = now - 7200,
                    .expires_at = now - 1, .blob = blob};
  store_file keep = {.id = "file-keep", .purpose = "batch", .filename = "k", .created_at = now, .blob = blob2};
  ASSERT_INT_EQ(store_file_insert(st, &old), 0);
  ASSERT_INT_EQ(store_file_insert(st, &keep), 0);
  buf out = BUF_INIT;
  EXPECT_INT_EQ(loopback_request(http_server_port(srv), "GET", "/v1/files/file-old", NULL, NULL, NULL, &out), 404);
  EXPECT_INT_EQ(loopback_request(http_server_port(srv), "GET", "/v1/files?order=asc", NULL, NULL, NULL, &out), 200);
  json_t *l = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
  json_t *data = json_object_get(l, "data");
  EXPECT_INT_EQ(json_array_size(data), 1);
  EXPECT_STR_EQ(jstr(json_array_get(data, 0), "id"), "file-keep");
  json_decref(l);
  store_file gone;
  EXPECT_INT_EQ(store_file_get(st, "file-old", &gone), ERR_NOT_FOUND);
  /* An upload past its hour: the next call marks it expired and says so. */
  store_upload up = {.id = "upload_old", .created_at = now - 3700, .expires_at = now - 100, .filename = "u",
                     .purpose = "batch", .bytes = 3};
  ASSERT_INT_EQ(store_upload_create(st, &up), 0);
  EXPECT_INT_EQ(loopback_request(http_server_port(srv), "POST", "/v1/uploads/upload_old/complete", NULL, NULL,
                        "{\"part_ids\":[]}", &out),
                400);
  EXPECT_STR_CONTAINS(out.data, "expired");
  store_upload got = {0};
  ASSERT_INT_EQ(store_upload_get(st, "upload_old", &got), 0);
  EXPECT_STR_EQ(got.status, "expired");
  store_upload_free(&got);
  buf_free(&out);
  http_server_free(srv);
  store_close(st);
}

/* Digests from Python's hashlib.md5 of bytes((i*7+3)%256 for i in range(n)). */
TEST(openai_files_md5_vectors) {
  static const struct { size_t n; const char *hex; } V[] = {
      {0, "d41d8cd98f00b204e9800998ecf8427e"},   {1, "8666683506aacd900bbd5a74ac4edf68"},
      {3, "c9aee4810523ef8658121b8d492c6b41"},   {55, "52c0e574e1198de5fe3f8f11440dcb1b"},
      {56, "46c9907fc908ee68b1e7b8e71286a518"},  {57, "1c805dd236c35cab25fcb1bc73802c51"},
      {63, "a62f6d59e837867693f042f5b8f5a236"},  {64, "7160b8fb5e9e4023d549c3971fbaeead"},
      {65, "70bd662e7aefbda85a0f7244167b7897"},  {127, "acce2474d6cc8302120d09c818d17ef7"},
      {128, "10b2da1a82f16d99a81a7203fe9f02cb"}, {129, "03fefbbcebe2959cf2270241aafe0250"},
      {1000, "10046f077f2082ac19676b8079f1cb1a"},
  };
  unsigned char data[1000];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)((i * 7 + 3) % 256);
  char hex[33];
  for (size_t v = 0; v < ARRAY_LEN(V); v++) {
    openai_md5 m;
    openai_md5_init(&m);
    openai_md5_update(&m, data, V[v].n);
    openai_md5_final_hex(&m, hex);
    EXPECT_STR_EQ(hex, V[v].hex);
    /* the same bytes fed in uneven pieces (1, 2, 3, ... bytes) */
    openai_md5_init(&m);
    for (size_t off = 0, step = 1; off < V[v].n; off += step, step++)
      openai_md5_update(&m, data + off, off + step <= V[v].n ? step : V[v].n - off);
    openai_md5_final_hex(&m, hex);
    EXPECT_STR_EQ(hex, V[v].hex);
  }
  openai_md5 m;
  openai_md5_init(&m);
  openai_md5_update(&m, "abc", 3);
  openai_md5_final_hex(&m, hex);
  EXPECT_STR_EQ(hex, "900150983cd24fb0d6963f7d28e17f72"); /* RFC 1321 A.5 */
}
