/*
 * pull.c - POST /api/pull: a model download with Ollama's progress records
 * ("pulling manifest", per-layer {status, digest, total, completed},
 * "verifying sha256 digest", "writing manifest", "success").
 *
 * Downloads need the model puller (model/pull.h), which this build does
 * not have yet: the route checks its request and answers a clear error.
 */
#include <string.h>

#include "api/api.h"
#include "api/ollama/ollama.h"
#include "base/err.h"

void ollama_pull(http_req *req, void *ctx) {
  (void)ctx;
  json_t *body = ollama_body(req);
  if (!body) return;
  const char *name = json_string_value(json_object_get(body, "model"));
  if (!name || !*name) name = json_string_value(json_object_get(body, "name"));
  if (!name || !*name) ollama_err(req, 400, ERR_INVALID, "model is required");
  else if (!ollama_name_valid(name)) ollama_err(req, 400, ERR_INVALID, "invalid model name");
  else ollama_err(req, 501, ERR_UNSUPPORTED, "pull %s: this build has no model downloader", name);
  json_decref(body);
}
