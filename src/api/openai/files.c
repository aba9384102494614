/*
 * files.c - OpenAI Files: upload (multipart), list (CursorPage), retrieve,
 * download and delete, plus the route table that also carries the Uploads
 * routes of uploads.c. Wire facts: ../shared/specs/openai.md 5.1 and 1.6.
 *
 * How an upload flows: the HTTP layer parses the multipart body and spools
 * the `file` part to store_spool_dir() (same filesystem as the blobs); we
 * validate the fields, take ownership of the spool file and hand it to
 * store_file_add_spooled(), which renames it into blobs/ and then writes the
 * row. Invariant: a row is only ever written after its blob is durable, and a
 * failed insert removes the blob, so a crash mid-upload leaves no visible
 * file and no orphan row (at worst an orphan blob, swept by store_open).
 *
 * Expiry: files with expires_at in the past are purged lazily, at the start
 * of every list, retrieve, content and delete request (one indexed DELETE),
 * so an expired file is never served. No timer is needed for correctness;
 * the blobs of files nobody asks about stay on disk until the next request.
 *
 * Start reading at files_create(); the route table is at the bottom.
 */
#include "api/openai/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/anthropic/anthropic.h"
#include "api/api.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

static const char *const PURPOSES[] = {"assistants", "batch", "fine-tune", "vision", "user_data", "evals"};
const char OPENAI_FILE_PURPOSES[] = "assistants, batch, fine-tune, vision, user_data, evals";

bool openai_file_purpose_ok(const char *purpose) {
  if (!purpose) return false;
  for (size_t i = 0; i < ARRAY_LEN(PURPOSES); i++)
    if (strcmp(purpose, PURPOSES[i]) == 0) return true;
  return false;
}

int openai_expires_after_check(const char *anchor, long long seconds, const char **param_out) {
  *param_out = NULL;
  if (!anchor || strcmp(anchor, "created_at") != 0) {
    *param_out = "expires_after[anchor]";
    return err_set(ERR_INVALID, "expires_after[anchor]: must be 'created_at', got '%s'", anchor ? anchor : "(missing)");
  }
  if (seconds < OPENAI_EXPIRES_MIN || seconds > OPENAI_EXPIRES_MAX) {
    *param_out = "expires_after[seconds]";
    return err_set(ERR_RANGE, "expires_after[seconds]: %lld is outside %d..%d", seconds, OPENAI_EXPIRES_MIN,
                   OPENAI_EXPIRES_MAX);
  }
  return 0;
}

json_t *openai_file_json(const store_file *f) {
  json_t *o = json_object();
  if (!o) return NULL;
  int bad = 0;
  bad |= json_object_set_new(o, "id", json_string(f->id));
  bad |= json_object_set_new(o, "object", json_string("file"));
  bad |= json_object_set_new(o, "bytes", json_integer(f->bytes));
  bad |= json_object_set_new(o, "created_at", json_integer(f->created_at));
  bad |= json_object_set_new(o, "expires_at", f->expires_at > 0 ? json_integer(f->expires_at) : json_null());
  bad |= json_object_set_new(o, "filename", json_string(f->filename ? f->filename : ""));
  bad |= json_object_set_new(o, "purpose", json_string(f->purpose ? f->purpose : ""));
  bad |= json_object_set_new(o, "status", json_string(f->status ? f->status : "processed"));
  bad |= json_object_set_new(o, "status_details", f->status_details ? json_string(f->status_details) : json_null());
  if (bad) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static store *ctx_store(void *ctx) { return ((openai_files_ctx *)ctx)->st; }

/* Answers with one object (or 500 when it could not be built); frees v. */
static void respond_owned(http_req *req, json_t *v) {
  if (!v) {
    api_error(req, 500, ERR_NOMEM, "building the response", NULL);
    return;
  }
  api_respond_json(req, 200, v);
  json_decref(v);
}

/* Lazy expiry (see the top comment). A failure is logged, not fatal: the
 * request itself can still be answered. */
static void purge_expired(store *st) {
  size_t n = 0;
  if (store_file_purge_expired(st, time_wall_s(), &n)) LOG_WARN("openai", "purging expired files: %s", err_detail());
  else if (n) LOG_INFO("openai", "purged %zu expired file(s)", n);
}

/* 404 in the shape the real API uses for an unknown file id. */
static void file_not_found(http_req *req, const char *id) {
  char msg[320];
  snprintf(msg, sizeof msg, "No such File object: %.256s", id ? id : "");
  api_error(req, 404, ERR_NOT_FOUND, msg, "file_id");
}

/* Reads the file named by the {file_id} path parameter, answering 404/500
 * itself on failure. Returns 0 when out was filled. */
static int file_lookup(http_req *req, store *st, store_file *out) {
  const char *id = http_req_param(req, "file_id");
  memset(out, 0, sizeof *out);
  int rc = store_file_get(st, id ? id : "", out);
  if (rc == ERR_NOT_FOUND) file_not_found(req, id);
  else if (rc) api_error_last(req, rc, NULL);
  return rc;
}

/* Plain multipart field value, NULL when absent or a file part. */
static const char *form_field(http_req *req, const char *name) {
  const http_part *p = http_req_part_named(req, name);
  return p && !p->filename ? p->value : NULL;
}

/* Parses a decimal integer form field; false when it is not one. */
static bool parse_ll(const char *s, long long *out) {
  if (!s || !*s) return false;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

/* ---- POST /v1/files ----------------------------------------------------- */

static void files_create(http_req *req, void *ctx) {
  if (anthropic_cloud_answer(req)) return; /* the same path, an Anthropic SDK */
  store *st = ctx_store(ctx);
  const char *purpose = form_field(req, "purpose");
  if (!purpose) {
    api_error(req, 400, ERR_INVALID, "purpose: required field is missing", "purpose");
    return;
  }
  if (!openai_file_purpose_ok(purpose)) {
    char msg[256];
    snprintf(msg, sizeof msg, "purpose: '%.64s' is not one of %s", purpose, OPENAI_FILE_PURPOSES);
    api_error(req, 400, ERR_INVALID, msg, "purpose");
    return;
  }
  /* expires_after arrives as expires_after[anchor] / expires_after[seconds]. */
  const char *anchor = form_field(req, "expires_after[anchor]");
  const char *secs = form_field(req, "expires_after[seconds]");
  long long seconds = 0;
  if (anchor || secs) {
    const char *param = NULL;
    if (!secs || !parse_ll(secs, &seconds)) {
      api_error(req, 400, ERR_INVALID, "expires_after[seconds]: expected an integer number of seconds",
                "expires_after[seconds]");
      return;
    }
    int rc = openai_expires_after_check(anchor, seconds, &param);
    if (rc) {
      api_error(req, 400, rc, err_detail(), param);
      return;
    }
  }
  /* The file part: the first part named "file" that carries a filename. */
  size_t idx = SIZE_MAX;
  for (size_t i = 0; i < http_req_n_parts(req); i++) {
    const http_part *p = http_req_part(req, i);
    if (strcmp(p->name, "file") == 0) {
      idx = i;
      break;
    }
  }
  const http_part *fp = idx == SIZE_MAX ? NULL : http_req_part(req, idx);
  if (!fp) {
    api_error(req, 400, ERR_INVALID, "file: required file part is missing", "file");
    return;
  }
  if (!fp->filename || !fp->file_path) {
    api_error(req, 400, ERR_INVALID, "file: must be a file part with a filename", "file");
    return;
  }
  char id[64];
  if (id_make(id, sizeof id, "file-", 12)) {
    api_error(req, 500, ERR_INTERNAL, "making a file id", NULL);
    return;
  }
  int64_t now = time_wall_s();
  store_file f = {
      .id = id,
      .object = "file",
      .purpose = (char *)purpose,
      .filename = (char *)(*fp->filename ? fp->filename : "upload"),
      .created_at = now,
      .expires_at = seconds ? now + seconds : 0,
      .status = "processed",
      .mime_type = (char *)fp->content_type,
  };
  /* From here the spool file is ours: store_file_add_spooled moves it, and
   * on failure we remove whatever is left of it. */
  char *spool = str_dup(fp->file_path);
  if (!spool || http_part_take_file(req, idx)) {
    free(spool);
    api_error(req, 500, ERR_NOMEM, "taking the uploaded file", NULL);
    return;
  }
  char blob[STORE_BLOB_NAME_CAP];
  int64_t bytes = 0;
  int rc = store_file_add_spooled(st, &f, spool, blob, sizeof blob, &bytes);
  if (rc) {
    unlink(spool); /* may already be gone: adopted then rolled back */
    free(spool);
    api_error(req, 500, rc, err_detail(), NULL);
    return;
  }
  free(spool);
  f.bytes = bytes;
  f.blob = blob;
  respond_owned(req, openai_file_json(&f));
}

/* ---- GET /v1/files ------------------------------------------------------ */

static void files_list(http_req *req, void *ctx) {
  if (anthropic_cloud_answer(req)) return; /* the same path, an Anthropic SDK */
  store *st = ctx_store(ctx);
  purge_expired(st);
  const char *purpose = http_req_query(req, "purpose");
  if (purpose && !*purpose) purpose = NULL;
  store_page page = {.limit = STORE_PAGE_MAX, .order = STORE_ORDER_DESC};
  const char *s = http_req_query(req, "limit");
  if (s) {
    long long lim = 0;
    if (!parse_ll(s, &lim) || lim < 1 || lim > STORE_PAGE_MAX) {
      char msg[160];
      snprintf(msg, sizeof msg, "limit: '%.32s' is not an integer in 1..%d", s, STORE_PAGE_MAX);
      api_error(req, 400, ERR_RANGE, msg, "limit");
      return;
    }
    page.limit = (size_t)lim;
  }
  s = http_req_query(req, "order");
  if (s) {
    if (strcmp(s, "asc") == 0) page.order = STORE_ORDER_ASC;
    else if (strcmp(s, "desc") == 0) page.order = STORE_ORDER_DESC;
    else {
      char msg[160];
      snprintf(msg, sizeof msg, "order: '%.32s' is not one of asc, desc", s);
      api_error(req, 400, ERR_INVALID, msg, "order");
      return;
    }
  }
  s = http_req_query(req, "after");
  if (s && *s) page.after = s;
  store_file_list l = {0};
  int rc = store_file_list_page(st, purpose, &page, &l);
  if (rc == ERR_NOT_FOUND) {
    char msg[320];
    snprintf(msg, sizeof msg, "after: no file with id '%.256s' in this list", page.after ? page.after : "");
    api_error(req, 400, ERR_INVALID, msg, "after");
    return;
  }
  if (rc) {
    api_error_last(req, rc, NULL);
    return;
  }
  json_t *data = json_array();
  json_t *body = json_object();
  int bad = !data || !body;
  for (size_t i = 0; i < l.n_items && !bad; i++) bad |= json_array_append_new(data, openai_file_json(&l.items[i]));
  if (!bad) {
    bad |= json_object_set_new(body, "object", json_string("list"));
    bad |= json_object_set(body, "data", data);
    /* The schema wants strings: an empty page has no ids, so none are sent. */
    if (l.n_items) {
      bad |= json_object_set_new(body, "first_id", json_string(l.items[0].id));
      bad |= json_object_set_new(body, "last_id", json_string(l.items[l.n_items - 1].id));
    }
    bad |= json_object_set_new(body, "has_more", json_boolean(l.has_more));
  }
  json_decref(data);
  store_file_list_free(&l);
  if (bad) {
    json_decref(body);
    body = NULL;
  }
  respond_owned(req, body);
}

/* ---- GET /v1/files/{file_id}, .../content, DELETE ----------------------- */

static void files_retrieve(http_req *req, void *ctx) {
  if (anthropic_cloud_answer(req)) return; /* the same path, an Anthropic SDK */
  store *st = ctx_store(ctx);
  purge_expired(st);
  store_file f;
  if (file_lookup(req, st, &f)) return;
  respond_owned(req, openai_file_json(&f));
  store_file_free(&f);
}

static void files_content(http_req *req, void *ctx) {
  if (anthropic_cloud_answer(req)) return; /* the same path, an Anthropic SDK */
  store *st = ctx_store(ctx);
  purge_expired(st);
  store_file f;
  if (file_lookup(req, st, &f)) return;
  char path[4096];
  int rc = store_blob_path(st, f.blob, path, sizeof path);
  if (!rc) rc = http_respond_file(req, 200, "application/octet-stream", path);
  /* A delete racing with this download may remove the blob between the
   * lookup and the open: that is the file going away, a 404. */
  if (rc == ERR_NOT_FOUND) file_not_found(req, f.id);
  else if (rc) api_error(req, 500, rc, err_detail(), NULL);
  store_file_free(&f);
}

static void files_delete(http_req *req, void *ctx) {
  if (anthropic_cloud_answer(req)) return; /* the same path, an Anthropic SDK */
  store *st = ctx_store(ctx);
  purge_expired(st);
  const char *id = http_req_param(req, "file_id");
  int rc = store_file_delete(st, id ? id : "");
  if (rc == ERR_NOT_FOUND) {
    file_not_found(req, id);
    return;
  }
  if (rc) {
    api_error_last(req, rc, NULL);
    return;
  }
  respond_owned(req, json_pack("{s:s, s:s, s:b}", "id", id, "object", "file", "deleted", 1));
}

/* ---- route table -------------------------------------------------------- */

static http_route ROUTES[] = {
    {"POST", "/v1/files", files_create, NULL, HTTP_BODY_MULTIPART, "openai_files_create"},
    {"GET", "/v1/files", files_list, NULL, 0, "openai_files_list"},
    {"GET", "/v1/files/{file_id}", files_retrieve, NULL, 0, "openai_files_retrieve"},
    {"DELETE", "/v1/files/{file_id}", files_delete, NULL, 0, "openai_files_delete"},
    {"GET", "/v1/files/{file_id}/content", files_content, NULL, 0, "openai_files_content"},
    {"POST", "/v1/uploads", openai_upload_create, NULL, HTTP_BODY_JSON, "openai_uploads_create"},
    {"POST", "/v1/uploads/{upload_id}/parts", openai_upload_part_add, NULL, HTTP_BODY_MULTIPART,
     "openai_uploads_parts_create"},
    {"POST", "/v1/uploads/{upload_id}/complete", openai_upload_complete, NULL, HTTP_BODY_JSON,
     "openai_uploads_complete"},
    {"POST", "/v1/uploads/{upload_id}/cancel", openai_upload_cancel, NULL, 0, "openai_uploads_cancel"},
};

size_t openai_files_routes(openai_files_ctx *fctx, const http_route **out) {
  for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) ROUTES[i].ctx = fctx;
  *out = ROUTES;
  return ARRAY_LEN(ROUTES);
}
