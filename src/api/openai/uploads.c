/*
 * uploads.c - OpenAI Uploads: a file sent in parts (../shared/specs/openai.md
 * 5.2). POST /v1/uploads declares filename, purpose, bytes and mime_type and
 * gets a pending Upload that expires an hour later; each POST
 * /v1/uploads/{id}/parts sends one multipart `data` part, which becomes a
 * blob and a part row; POST .../complete names the parts in order and the
 * store concatenates them into one new file (the sizes must add up to the
 * declared bytes); POST .../cancel drops the parts.
 *
 * Invariants (kept by the store, relied on here): a part row exists only
 * once its blob is durable, and a failure to register it deletes the blob;
 * completion writes the new blob first, then in one transaction the file row
 * and the upload's new status, so a crash leaves either the pending upload
 * or the completed one with its file - never a file without content.
 *
 * Expiry: an upload past expires_at is moved to "expired" by whichever
 * request touches it next (part, complete or cancel), which then answers 400.
 *
 * md5 on complete, when given, is checked against the named parts before
 * anything is assembled (a mismatch is 400 and the upload stays pending).
 *
 * The Upload's own expires_after (for the resulting file) is accepted and
 * validated but not kept: the uploads table has no column for it yet, so the
 * completed file never expires.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api/api.h"
#include "api/openai/files.h"
#include "api/openai/md5.h"
#include "base/err.h"
#include "base/util.h"

/* An upload may be used for an hour (the real API's rule). */
#define UPLOAD_TTL_S 3600
/* Limits of the real API: a part up to 64 MB, a whole upload up to 8 GB. */
#define UPLOAD_PART_MAX ((int64_t)64 * 1000 * 1000)
#define UPLOAD_BYTES_MAX ((int64_t)8 * 1000 * 1000 * 1000)
/* Part ids one completion may name. */
#define UPLOAD_MAX_PARTS 10000

static store *ctx_store(void *ctx) { return ((openai_files_ctx *)ctx)->st; }

static void respond_owned(http_req *req, json_t *v) {
  if (!v) {
    api_error(req, 500, ERR_NOMEM, "building the response", NULL);
    return;
  }
  api_respond_json(req, 200, v);
  json_decref(v);
}

/* The Upload object; file may be NULL (null in the JSON). */
static json_t *upload_json(const store_upload *u, const store_file *file) {
  json_t *o = json_object();
  if (!o) return NULL;
  int bad = 0;
  bad |= json_object_set_new(o, "id", json_string(u->id));
  bad |= json_object_set_new(o, "object", json_string("upload"));
  bad |= json_object_set_new(o, "bytes", json_integer(u->bytes));
  bad |= json_object_set_new(o, "created_at", json_integer(u->created_at));
  bad |= json_object_set_new(o, "expires_at", json_integer(u->expires_at));
  bad |= json_object_set_new(o, "filename", json_string(u->filename));
  bad |= json_object_set_new(o, "purpose", json_string(u->purpose));
  bad |= json_object_set_new(o, "status", json_string(u->status ? u->status : "pending"));
  bad |= json_object_set_new(o, "file", file ? openai_file_json(file) : json_null());
  if (bad) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static void upload_not_found(http_req *req, const char *id) {
  char msg[320];
  snprintf(msg, sizeof msg, "No such Upload object: %.256s", id ? id : "");
  api_error(req, 404, ERR_NOT_FOUND, msg, "upload_id");
}

/* Loads the {upload_id} upload and checks it is still pending, expiring it
 * first when its hour is over. Answers the request itself on failure
 * (404, 400 for not pending or expired, 500). Returns 0 when u was filled. */
static int pending_upload(http_req *req, store *st, store_upload *u) {
  const char *id = http_req_param(req, "upload_id");
  memset(u, 0, sizeof *u);
  int rc = store_upload_get(st, id ? id : "", u);
  if (rc == ERR_NOT_FOUND) {
    upload_not_found(req, id);
    return rc;
  }
  if (rc) {
    api_error_last(req, rc, NULL);
    return rc;
  }
  if (strcmp(u->status, "pending") == 0 && u->expires_at > 0 && u->expires_at <= time_wall_s()) {
    if (store_upload_finish(st, u->id, "expired") == 0) {
      free(u->status);
      u->status = str_dup("expired");
    }
  }
  if (!u->status || strcmp(u->status, "pending") != 0) {
    char msg[320];
    snprintf(msg, sizeof msg, "Upload %.64s is %s, not pending: it can no longer be changed", u->id,
             u->status ? u->status : "in an unknown state");
    /* 400, not 409: the SDKs retry a 409, and this state will not change. */
    api_error(req, 400, ERR_CONFLICT, msg, "upload_id");
    store_upload_free(u);
    return ERR_CONFLICT;
  }
  return 0;
}

/* ---- POST /v1/uploads ---------------------------------------------------- */

void openai_upload_create(http_req *req, void *ctx) {
  store *st = ctx_store(ctx);
  json_t *body = api_parse_body(req);
  if (!body) return;
  const char *filename = NULL, *purpose = NULL, *mime = NULL;
  long long bytes = 0;
  const char *param = NULL;
  int rc = api_json_str(body, "", "filename", true, &filename);
  if (rc) param = "filename";
  if (!rc) {
    rc = api_json_str(body, "", "purpose", true, &purpose);
    if (rc) param = "purpose";
  }
  if (!rc && !openai_file_purpose_ok(purpose)) {
    rc = err_set(ERR_INVALID, "purpose: '%.64s' is not one of %s", purpose, OPENAI_FILE_PURPOSES);
    param = "purpose";
  }
  if (!rc) {
    rc = api_json_int(body, "", "bytes", true, &bytes);
    if (rc) param = "bytes";
  }
  if (!rc && (bytes < 0 || bytes > UPLOAD_BYTES_MAX)) {
    rc = err_set(ERR_RANGE, "bytes: %lld is outside 0..%lld", bytes, (long long)UPLOAD_BYTES_MAX);
    param = "bytes";
  }
  if (!rc) {
    rc = api_json_str(body, "", "mime_type", false, &mime);
    if (rc == ERR_NOT_FOUND) rc = 0, mime = NULL;
    if (rc) param = "mime_type";
  }
  if (!rc && !*filename) {
    rc = err_set(ERR_INVALID, "filename: must not be empty");
    param = "filename";
  }
  /* expires_after is checked like the Files one (see the top comment). */
  json_t *ea = json_object_get(body, "expires_after");
  if (!rc && ea && !json_is_null(ea)) {
    const char *anchor = NULL;
    long long seconds = 0;
    if (!json_is_object(ea)) {
      rc = err_set(ERR_TYPE, "expires_after: expected object, got %s", api_json_type_name(ea));
      param = "expires_after";
    } else if ((rc = api_json_str(ea, "expires_after", "anchor", true, &anchor)) != 0) {
      param = "expires_after.anchor";
    } else if ((rc = api_json_int(ea, "expires_after", "seconds", true, &seconds)) != 0) {
      param = "expires_after.seconds";
    } else {
      rc = openai_expires_after_check(anchor, seconds, &param);
    }
  }
  if (rc) {
    api_error(req, 400, rc, err_detail(), param);
    json_decref(body);
    return;
  }
  char id[64];
  if (id_make(id, sizeof id, "upload_", 12)) {
    api_error(req, 500, ERR_INTERNAL, "making an upload id", NULL);
    json_decref(body);
    return;
  }
  int64_t now = time_wall_s();
  store_upload u = {
      .id = id,
      .created_at = now,
      .expires_at = now + UPLOAD_TTL_S,
      .filename = (char *)filename,
      .purpose = (char *)purpose,
      .bytes = bytes,
      .mime_type = (char *)mime,
      .status = "pending",
  };
  rc = store_upload_create(st, &u);
  if (rc) api_error_last(req, rc, NULL);
  else respond_owned(req, upload_json(&u, NULL));
  json_decref(body);
}

/* ---- POST /v1/uploads/{upload_id}/parts --------------------------------- */

/* Writes an in-memory part (a `data` field sent without a filename) as a
 * new blob. */
static int blob_from_memory(store *st, const char *data, size_t len, char *blob, size_t cap) {
  store_blob_writer *w = NULL;
  int rc = store_blob_writer_open(st, &w);
  if (rc) return rc;
  rc = store_blob_writer_write(w, data, len);
  if (rc) {
    store_blob_writer_abort(w);
    return rc;
  }
  return store_blob_writer_commit(w, blob, cap);
}

void openai_upload_part_add(http_req *req, void *ctx) {
  store *st = ctx_store(ctx);
  store_upload u;
  if (pending_upload(req, st, &u)) return;
  size_t idx = SIZE_MAX;
  for (size_t i = 0; i < http_req_n_parts(req) && idx == SIZE_MAX; i++)
    if (strcmp(http_req_part(req, i)->name, "data") == 0) idx = i;
  const http_part *dp = idx == SIZE_MAX ? NULL : http_req_part(req, idx);
  if (!dp) {
    api_error(req, 400, ERR_INVALID, "data: required part is missing", "data");
    store_upload_free(&u);
    return;
  }
  uint64_t size = dp->file_path ? dp->file_size : dp->value_len;
  if (size > (uint64_t)UPLOAD_PART_MAX) {
    char msg[160];
    snprintf(msg, sizeof msg, "data: a part may hold at most %lld bytes, this one holds %llu",
             (long long)UPLOAD_PART_MAX, (unsigned long long)size);
    api_error(req, 413, ERR_TOO_LARGE, msg, "data");
    store_upload_free(&u);
    return;
  }
  char blob[STORE_BLOB_NAME_CAP];
  int rc;
  if (dp->file_path) {
    char *spool = str_dup(dp->file_path);
    rc = spool && http_part_take_file(req, idx) == 0 ? 0 : err_set(ERR_NOMEM, "taking the uploaded part");
    if (!rc) {
      rc = store_blob_adopt(st, spool, blob, sizeof blob);
      if (rc) unlink(spool);
    }
    free(spool);
  } else {
    rc = blob_from_memory(st, dp->value, dp->value_len, blob, sizeof blob);
  }
  if (rc) {
    api_error(req, 500, rc, err_detail(), NULL);
    store_upload_free(&u);
    return;
  }
  char id[64];
  id_make(id, sizeof id, "part_", 12);
  store_upload_part p = {
      .id = id, .upload_id = u.id, .created_at = time_wall_s(), .bytes = (int64_t)size, .blob = blob};
  rc = store_upload_part_add(st, &p);
  if (rc) {
    store_blob_delete(st, blob);
    /* Completed or cancelled by another request meanwhile: same 400 as above. */
    api_error(req, rc == ERR_CONFLICT ? 400 : 0, rc, err_detail(), rc == ERR_CONFLICT ? "upload_id" : NULL);
  } else {
    respond_owned(req, json_pack("{s:s, s:s, s:I, s:s}", "id", id, "object", "upload.part", "created_at",
                                 (json_int_t)p.created_at, "upload_id", u.id));
  }
  store_upload_free(&u);
}

/* ---- POST /v1/uploads/{upload_id}/complete ------------------------------ */

/* MD5 of the named parts' bytes in the order given, as 32 hex digits. A part
 * id that is not one of this upload's parts yields ERR_NOT_FOUND, left for
 * store_upload_complete to report with its own message. */
static int parts_md5(store *st, const char *upload_id, const char *const *ids, size_t n, char hex[33]) {
  store_upload_part_list parts = {0};
  int rc = store_upload_parts_list(st, upload_id, &parts);
  if (rc) return rc;
  enum { CHUNK = 1 << 16 };
  unsigned char *chunk = malloc(CHUNK);
  if (!chunk) rc = err_set(ERR_NOMEM, "md5 buffer");
  openai_md5 m;
  openai_md5_init(&m);
  for (size_t i = 0; i < n && !rc; i++) {
    const store_upload_part *p = NULL;
    for (size_t j = 0; j < parts.n_items && !p; j++)
      if (strcmp(parts.items[j].id, ids[i]) == 0) p = &parts.items[j];
    if (!p) {
      rc = ERR_NOT_FOUND;
      break;
    }
    char path[4096];
    rc = store_blob_path(st, p->blob, path, sizeof path);
    FILE *fp = rc ? NULL : fopen(path, "rb");
    if (!rc && !fp) rc = err_set(ERR_IO, "opening part %s: %s", p->id, strerror(errno));
    while (fp) {
      size_t got = fread(chunk, 1, CHUNK, fp);
      openai_md5_update(&m, chunk, got);
      if (got < CHUNK) {
        if (ferror(fp)) rc = err_set(ERR_IO, "reading part %s", p->id);
        fclose(fp);
        fp = NULL;
      }
    }
  }
  if (!rc) openai_md5_final_hex(&m, hex);
  free(chunk);
  store_upload_part_list_free(&parts);
  return rc;
}

static bool is_md5_hex(const char *s) {
  if (strlen(s) != 32) return false;
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F'))) return false;
  return true;
}

void openai_upload_complete(http_req *req, void *ctx) {
  store *st = ctx_store(ctx);
  json_t *body = api_parse_body(req);
  if (!body) return;
  store_upload u;
  if (pending_upload(req, st, &u)) {
    json_decref(body);
    return;
  }
  const char **ids = NULL;
  size_t n = 0;
  int rc = 0;
  const char *param = "part_ids";
  json_t *arr = json_object_get(body, "part_ids");
  if (!arr || json_is_null(arr)) rc = err_set(ERR_INVALID, "part_ids: required field is missing");
  else if (!json_is_array(arr)) rc = err_set(ERR_TYPE, "part_ids: expected array, got %s", api_json_type_name(arr));
  else if ((n = json_array_size(arr)) > UPLOAD_MAX_PARTS)
    rc = err_set(ERR_TOO_LARGE, "part_ids: %zu ids, at most %d", n, UPLOAD_MAX_PARTS);
  else if (n && !(ids = calloc(n, sizeof *ids))) rc = err_set(ERR_NOMEM, "part_ids: %zu ids", n);
  for (size_t i = 0; i < n && !rc; i++) {
    json_t *v = json_array_get(arr, i);
    if (!json_is_string(v)) rc = err_set(ERR_TYPE, "part_ids[%zu]: expected string, got %s", i, api_json_type_name(v));
    else ids[i] = json_string_value(v);
  }
  const char *md5 = NULL;
  if (!rc) {
    rc = api_json_str(body, "", "md5", false, &md5);
    if (rc == ERR_NOT_FOUND) rc = 0;
    else if (rc) param = "md5";
  }
  if (!rc && md5 && !is_md5_hex(md5)) {
    rc = err_set(ERR_INVALID, "md5: expected 32 hexadecimal digits, got '%.64s'", md5);
    param = "md5";
  }
  if (rc) {
    api_error(req, 400, rc, err_detail(), param);
    goto done;
  }
  if (md5) {
    char got[33];
    rc = parts_md5(st, u.id, ids, n, got);
    if (rc && rc != ERR_NOT_FOUND) {
      api_error(req, 500, rc, err_detail(), NULL);
      goto done;
    }
    if (!rc && strcasecmp(got, md5) != 0) {
      char msg[200];
      snprintf(msg, sizeof msg, "md5: the parts hash to %s, not %.32s", got, md5);
      api_error(req, 400, ERR_INVALID, msg, "md5");
      goto done;
    }
  }
  char fid[64];
  id_make(fid, sizeof fid, "file-", 12);
  store_file f = {
      .id = fid,
      .object = "file",
      .purpose = u.purpose,
      .filename = u.filename,
      .created_at = time_wall_s(),
      .status = "processed",
      .mime_type = u.mime_type,
  };
  char blob[STORE_BLOB_NAME_CAP];
  rc = store_upload_complete(st, u.id, ids, n, &f, blob, sizeof blob);
  if (rc) {
    /* ERR_INVALID: a foreign or repeated part id, or the sizes do not add
     * up to the declared bytes; ERR_CONFLICT: finished meanwhile. */
    api_error(req, rc == ERR_INVALID || rc == ERR_CONFLICT || rc == ERR_RANGE ? 400 : 0, rc, err_detail(),
              rc == ERR_CONFLICT ? "upload_id" : "part_ids");
    goto done;
  }
  store_file file;
  rc = store_file_get(st, fid, &file);
  if (rc) {
    api_error_last(req, rc, NULL);
    goto done;
  }
  free(u.status);
  u.status = str_dup("completed");
  respond_owned(req, upload_json(&u, &file));
  store_file_free(&file);
done:
  free(ids);
  store_upload_free(&u);
  json_decref(body);
}

/* ---- POST /v1/uploads/{upload_id}/cancel -------------------------------- */

void openai_upload_cancel(http_req *req, void *ctx) {
  store *st = ctx_store(ctx);
  store_upload u;
  if (pending_upload(req, st, &u)) return;
  int rc = store_upload_finish(st, u.id, "cancelled");
  if (rc) {
    api_error(req, rc == ERR_CONFLICT ? 400 : 0, rc, err_detail(), rc == ERR_CONFLICT ? "upload_id" : NULL);
  } else {
    free(u.status);
    u.status = str_dup("cancelled");
    respond_owned(req, upload_json(&u, NULL));
  }
  store_upload_free(&u);
}
