/*
 * files.h - the OpenAI Files and Uploads routes (../shared/specs/openai.md
 * section 5): POST/GET /v1/files, GET/DELETE /v1/files/{file_id},
 * GET /v1/files/{file_id}/content, POST /v1/uploads and its parts, complete
 * and cancel. Metadata lives in the store's files/uploads tables, bytes in
 * its blob directory (store/store.h); multipart bodies arrive spooled to
 * disk by the HTTP layer and are adopted by rename.
 *
 * Wiring (app/main.c): fill an openai_files_ctx with the open store, then
 *   const http_route *fr; size_t n_fr = openai_files_routes(&fctx, &fr);
 *   http_server_add_routes(srv, fr, n_fr);
 * The ctx must outlive the server.
 */
#ifndef PARLEY_API_OPENAI_FILES_H
#define PARLEY_API_OPENAI_FILES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "http/http.h"
#include "store/store.h"

typedef struct openai_files_ctx {
  store *st; /* the open store; borrowed */
} openai_files_ctx;

/* The route table (files and uploads); every entry's ctx points at fctx. */
size_t openai_files_routes(openai_files_ctx *fctx, const http_route **out);

/* ---- shared by files.c and uploads.c (and their unit tests) ------------- */

/* True when purpose is one a client may upload with: assistants, batch,
 * fine-tune, vision, user_data, evals. */
bool openai_file_purpose_ok(const char *purpose);
/* The purposes above as one comma-separated string, for messages. */
extern const char OPENAI_FILE_PURPOSES[];
/* expires_after: anchor must be "created_at", seconds 3600..2592000. Returns
 * 0 or ERR_INVALID/ERR_RANGE with err_detail() naming prefix[anchor] or
 * prefix[seconds] ("expires_after[seconds]: ..."); *param_out gets the
 * offending field name (a static string). */
int openai_expires_after_check(const char *anchor, long long seconds, const char **param_out);
#define OPENAI_EXPIRES_MIN 3600
#define OPENAI_EXPIRES_MAX 2592000
/* The File object of a stored file, as the API returns it (new reference). */
json_t *openai_file_json(const store_file *f);

/* Upload handlers (uploads.c), ctx is the openai_files_ctx. */
void openai_upload_create(http_req *req, void *ctx);
void openai_upload_part_add(http_req *req, void *ctx);
void openai_upload_complete(http_req *req, void *ctx);
void openai_upload_cancel(http_req *req, void *ctx);

#endif
