/*
 * models.c - GET /v1/models and GET /v1/models/{model}, and the OpenAI route
 * table. Models are listed from the registry's current snapshot (every
 * source, executable or not), with created = the file's modification time.
 * Ids may hold '/' ("hf.co/owner/repo:Q4_K_M"): the route's final
 * {model...} segment takes the rest of the path, percent-decoded.
 * Requests with an anthropic-version header get the Anthropic shape
 * (api/anthropic/models.c) from the same routes.
 */
#include <string.h>

#include "api/anthropic/anthropic.h"
#include "api/api.h"
#include "api/openai/openai.h"
#include "base/err.h"
#include "base/util.h"

static json_t *model_object(const registry_entry *e) {
  return json_pack("{s:s, s:s, s:I, s:s}", "id", e->name, "object", "model", "created", (json_int_t)e->mtime,
                   "owned_by", "parley");
}

void openai_models_list(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  if (api_dialect_of(req) == API_DIALECT_ANTHROPIC) { /* same path, Anthropic SDK */
    anthropic_models_list(req, oc->reg);
    return;
  }
  registry_snapshot *snap = registry_snapshot_acquire(oc->reg);
  json_t *data = json_array();
  size_t n = registry_snapshot_count(snap);
  for (size_t i = 0; data && i < n; i++) {
    json_t *m = model_object(registry_snapshot_at(snap, i));
    if (!m || json_array_append_new(data, m)) {
      json_decref(data);
      data = NULL;
    }
  }
  registry_snapshot_release(snap);
  json_t *body = data ? json_pack("{s:s, s:o}", "object", "list", "data", data) : NULL;
  if (!body) {
    api_error(req, 500, ERR_NOMEM, "out of memory listing models", NULL);
    return;
  }
  api_respond_json(req, 200, body);
  json_decref(body);
}

void openai_models_get(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  if (api_dialect_of(req) == API_DIALECT_ANTHROPIC) {
    anthropic_models_get(req, oc->reg);
    return;
  }
  const char *id = http_req_param(req, "model");
  registry_entry *e = NULL;
  if (!id || !*id || registry_lookup(oc->reg, id, &e)) {
    char msg[512];
    json_t *valid = id ? json_string(id) : NULL; /* NULL for invalid UTF-8 */
    snprintf(msg, sizeof msg, valid ? "The model '%.400s' does not exist" : "The model%s does not exist (its id is not valid UTF-8)",
             valid ? id : "");
    json_decref(valid);
    openai_error_model_not_found(req, msg);
    return;
  }
  json_t *m = model_object(e);
  /* Answer with the id the client asked for, as OpenAI does for aliases. */
  if (m) json_object_set_new(m, "id", json_string(id));
  registry_entry_free(e);
  if (!m) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  api_respond_json(req, 200, m);
  json_decref(m);
}

static http_route ROUTES[] = {
    {"GET", "/v1/models", openai_models_list, NULL, 0, "openai.models.list"},
    {"GET", "/v1/models/{model...}", openai_models_get, NULL, 0, "openai.models.retrieve"},
    {"POST", "/v1/chat/completions", openai_chat_completions, NULL, HTTP_BODY_JSON, "openai.chat.completions"},
    {"POST", "/v1/completions", openai_completions, NULL, HTTP_BODY_JSON, "openai.completions"},
    {"POST", "/v1/embeddings", openai_embeddings, NULL, HTTP_BODY_JSON, "openai.embeddings"},
};

size_t openai_routes(openai_ctx *octx, const http_route **out) {
  for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) ROUTES[i].ctx = octx;
  *out = ROUTES;
  return ARRAY_LEN(ROUTES);
}
