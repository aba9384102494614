/*
 * models.c - GET /v1/models and GET /v1/models/{model}, and the OpenAI route
 * table. Models are listed from the registry's current snapshot (every
 * source, executable or not), with created = the file's modification time.
 * The list's JSON is cached while the registry is unchanged (keyed by its
 * refresh count), since clients poll it: the body depends on the snapshot
 * only. A field that depends on anything else (a model's load state) must
 * bypass or key the cache.
 * GET /v1/models/{model} adds parley's fields family, family_display and
 * architecture (the detected family tells apart models that share an
 * architecture: a Voxtral Realtime file is architecture llama).
 * Ids may hold '/' ("hf.co/owner/repo:Q4_K_M"): the route's final
 * {model...} segment takes the rest of the path, percent-decoded.
 * Requests with an anthropic-version header get the Anthropic shape
 * (api/anthropic/models.c) from the same routes, and those of a Deepgram
 * SDK based at the root (x-deepgram-session-id, Authorization: Token) the
 * Deepgram one (api/deepgram/common.c); api_dialect_of decides.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/anthropic/anthropic.h"
#include "api/api.h"
#include "api/deepgram/deepgram.h"
#include "api/openai/openai.h"
#include "api/speech_svc.h"
#include "base/err.h"
#include "base/util.h"

static json_t *model_object(const registry_entry *e) {
  return json_pack("{s:s, s:s, s:I, s:s}", "id", e->name, "object", "model", "created", (json_int_t)e->mtime,
                   "owned_by", "parley");
}

/* An installed speech-to-text model (api/speech_svc.h) as a model object;
 * parley's fields say what it is. */
static json_t *stt_model_object(const stt_model_info *m, bool is_default) {
  return json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:b}", "id", m->name, "object", "model", "created",
                   (json_int_t)m->mtime, "owned_by", "parley", "kind", "speech-to-text", "backend", m->backend,
                   "default_transcription_model", is_default);
}

/* The installed STT model named id, or NULL. */
static const stt_model_info *stt_model_named(const openai_ctx *oc, const char *id, bool *is_default) {
  const stt_model_info *m = NULL;
  size_t n = oc->speech && id ? api_speech_stt_models(oc->speech, &m) : 0;
  for (size_t i = 0; i < n; i++)
    if (strcmp(m[i].name, id) == 0) {
      *is_default = i == 0;
      return &m[i];
    }
  return NULL;
}

/* The list body of the current snapshot and the STT models, compact JSON (malloc'd). */
static char *models_list_json(const openai_ctx *oc) {
  registry *reg = oc->reg;
  registry_snapshot *snap = registry_snapshot_acquire(reg);
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
  const stt_model_info *sm = NULL;
  size_t n_stt = oc->speech ? api_speech_stt_models(oc->speech, &sm) : 0;
  for (size_t i = 0; data && i < n_stt; i++) {
    json_t *m = stt_model_object(&sm[i], i == 0);
    if (!m || json_array_append_new(data, m)) {
      json_decref(data);
      data = NULL;
    }
  }
  json_t *body = data ? json_pack("{s:s, s:o}", "object", "list", "data", data) : NULL;
  char *s = body ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(body);
  return s;
}

/* The cached body: valid for `reg` while its refresh count equals `gen`. */
static struct {
  pthread_mutex_t mu;
  const registry *reg;
  uint64_t gen;
  char *json;
  size_t len;
} g_list_cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

void openai_models_list(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  enum api_dialect d = api_dialect_of(req);
  if (d == API_DIALECT_ANTHROPIC) { /* same path, Anthropic SDK */
    anthropic_models_list(req, oc->reg);
    return;
  }
  if (d == API_DIALECT_DEEPGRAM) { /* same path, a Deepgram SDK at the root */
    dg_models_list(req, oc->speech);
    return;
  }
  /* The count is read before the snapshot: a refresh in between only makes
   * the cached body newer than its key, and the next request rebuilds. */
  registry_stats st;
  registry_get_stats(oc->reg, &st);
  char stack[4096];
  char *copy = NULL;
  size_t len = 0;
  pthread_mutex_lock(&g_list_cache.mu);
  if (g_list_cache.json && g_list_cache.reg == oc->reg && g_list_cache.gen == st.n_refresh) {
    len = g_list_cache.len;
    copy = len < sizeof stack ? stack : malloc(len);
    if (copy) memcpy(copy, g_list_cache.json, len);
  }
  pthread_mutex_unlock(&g_list_cache.mu);
  if (!copy) {
    char *fresh = models_list_json(oc);
    if (!fresh) {
      api_error(req, 500, ERR_NOMEM, "out of memory listing models", NULL);
      return;
    }
    len = strlen(fresh);
    http_respond(req, 200, "application/json", fresh, len);
    pthread_mutex_lock(&g_list_cache.mu);
    free(g_list_cache.json);
    g_list_cache.json = fresh;
    g_list_cache.len = len;
    g_list_cache.reg = oc->reg;
    g_list_cache.gen = st.n_refresh;
    pthread_mutex_unlock(&g_list_cache.mu);
    return;
  }
  http_respond(req, 200, "application/json", copy, len);
  if (copy != stack) free(copy);
}

void openai_models_get(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  enum api_dialect d = api_dialect_of(req);
  if (d == API_DIALECT_ANTHROPIC) {
    anthropic_models_get(req, oc->reg);
    return;
  }
  if (d == API_DIALECT_DEEPGRAM) {
    dg_models_get(req, oc->speech);
    return;
  }
  const char *id = http_req_param(req, "model");
  registry_entry *e = NULL;
  bool stt_default = false;
  const stt_model_info *sm = stt_model_named(oc, id, &stt_default);
  if (sm) {
    json_t *m = stt_model_object(sm, stt_default);
    if (m) api_respond_json(req, 200, m);
    else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    json_decref(m);
    return;
  }
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
  /* parley's extra fields: what the model is, beyond its id */
  if (m) {
    json_object_set_new(m, "family", json_string(family_name(e->family)));
    json_object_set_new(m, "family_display", json_string(family_display(e->family)));
    json_object_set_new(m, "architecture", json_string(e->arch));
  }
  registry_entry_free(e);
  if (!m) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  api_respond_json(req, 200, m);
  json_decref(m);
}

/* DELETE /v1/models/{model}: removes a model parley pulled (model/pull.h).
 * {"id","object":"model","deleted":true}; 404 model_not_found for an
 * unknown id; 403 for another tool's model or a file parley did not
 * download; 409 while it is being downloaded. A loaded model keeps
 * answering from its mapping until it is unloaded. */
void openai_models_delete(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  const char *id = http_req_param(req, "model");
  if (!id || !*id) {
    openai_error_model_not_found(req, "The model id is missing");
    return;
  }
  json_t *valid = json_string(id);
  if (!valid) {
    openai_error_model_not_found(req, "The model does not exist (its id is not valid UTF-8)");
    return;
  }
  json_decref(valid);
  if (!oc->pull) {
    api_error(req, 501, ERR_UNSUPPORTED, "deleting models is not available on this server", NULL);
    return;
  }
  char removed[PULL_NAME_CAP];
  int rc = pull_remove(oc->pull, id, removed, sizeof removed);
  if (rc == ERR_NOT_FOUND) {
    char msg[600];
    snprintf(msg, sizeof msg, "The model '%.400s' does not exist", id);
    openai_error_model_not_found(req, msg);
    return;
  }
  if (rc) {
    api_error(req, rc == ERR_FORBIDDEN ? 403 : rc == ERR_CONFLICT ? 409 : 0, rc, err_detail(), "model");
    return;
  }
  json_t *body = json_pack("{s:s, s:s, s:b}", "id", id, "object", "model", "deleted", 1);
  if (!body) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  api_respond_json(req, 200, body);
  json_decref(body);
}

static http_route ROUTES[] = {
    {"GET", "/v1/models", openai_models_list, NULL, 0, "openai.models.list"},
    {"GET", "/v1/models/{model...}", openai_models_get, NULL, 0, "openai.models.retrieve"},
    {"DELETE", "/v1/models/{model...}", openai_models_delete, NULL, 0, "openai.models.delete"},
    {"POST", "/v1/chat/completions", openai_chat_completions, NULL, HTTP_BODY_JSON, "openai.chat.completions"},
    {"POST", "/v1/completions", openai_completions, NULL, HTTP_BODY_JSON, "openai.completions"},
    {"POST", "/v1/embeddings", openai_embeddings, NULL, HTTP_BODY_JSON, "openai.embeddings"},
};

size_t openai_routes(openai_ctx *octx, const http_route **out) {
  for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) ROUTES[i].ctx = octx;
  *out = ROUTES;
  return ARRAY_LEN(ROUTES);
}
