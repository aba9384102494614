/*
 * models.c - the LM Studio model listings and the route table:
 * GET /api/v0/models, GET /api/v0/models/{model} (ids may hold '/', raw or
 * percent-encoded: the final {model...} segment takes the rest of the
 * path), GET /api/v1/models (and /lmstudio/v1/models), GET
 * /lmstudio-greeting.
 *
 * Every model the registry lists is described (LM Studio lists downloaded
 * models, loaded or not, because JIT loading serves any of them). v0 says
 * type "llm" | "vlm" | "embeddings" (plural), compatibility_type "gguf"
 * (Zed parses it as a closed enum), state "loaded" | "not-loaded" and,
 * when loaded, loaded_context_length; v1 says type "llm" | "embedding"
 * (singular) and leaves architecture, capabilities and description out for
 * embedding models, as the spec's section 2.3 shows. Both add parley's
 * "family" and "family_display" (the detected model family).
 */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/lmstudio/lmstudio.h"
#include "base/err.h"
#include "base/util.h"
#include "base/version.h"

void lms_greeting(http_req *req, void *ctx) {
  (void)ctx;
  json_t *body = json_pack("{s:b, s:s, s:s}", "lmstudio", 1, "server", "parley", "version", PARLEY_VERSION);
  if (body) api_respond_json(req, 200, body);
  else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
  json_decref(body);
}

/* parley's extra fields: the detected family ("voxtral-realtime") and its
 * display name, which arch alone ("llama") cannot tell apart. */
static void lms_set_family(json_t *m, const registry_entry *e) {
  json_object_set_new(m, "family", json_string(family_name(e->family)));
  json_object_set_new(m, "family_display", json_string(family_display(e->family)));
}

/* ---- v0 ---------------------------------------------------------------------- */

static json_t *v0_entry(lmstudio_ctx *lc, const registry_entry *e) {
  char pub[128];
  lms_publisher(e->name, pub, sizeof pub);
  json_t *caps = json_array();
  if (caps && (e->caps & FAMILY_CAP_TOOLS)) json_array_append_new(caps, json_string("tool_use"));
  if (caps && ((e->caps & FAMILY_CAP_VISION) || e->projector)) json_array_append_new(caps, json_string("vision"));
  int64_t loaded = lms_loaded_ctx(lc, e->name);
  json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I}", "id", e->name, "object", "model", "type",
                        lms_v0_type(e), "publisher", pub, "arch", e->arch[0] ? e->arch : "unknown",
                        "compatibility_type", "gguf", "quantization", e->quant[0] ? e->quant : "unknown", "state",
                        loaded > 0 ? "loaded" : "not-loaded", "max_context_length",
                        (json_int_t)e->context_length);
  if (!m || !caps) {
    json_decref(m);
    json_decref(caps);
    return NULL;
  }
  if (loaded > 0) json_object_set_new(m, "loaded_context_length", json_integer(loaded));
  json_object_set_new(m, "capabilities", caps);
  lms_set_family(m, e);
  return m;
}

void lms_v0_models_list(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  registry_snapshot *snap = registry_snapshot_acquire(lc->reg);
  json_t *data = json_array();
  for (size_t i = 0; data && i < registry_snapshot_count(snap); i++) {
    json_t *m = v0_entry(lc, registry_snapshot_at(snap, i));
    if (!m || json_array_append_new(data, m)) {
      json_decref(data);
      data = NULL;
    }
  }
  registry_snapshot_release(snap);
  json_t *body = data ? json_pack("{s:s, s:o}", "object", "list", "data", data) : NULL;
  if (body) api_respond_json(req, 200, body);
  else api_error(req, 500, ERR_NOMEM, "out of memory listing models", NULL);
  json_decref(body);
}

void lms_v0_models_get(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  const char *id = http_req_param(req, "model");
  registry_entry *e = NULL;
  if (!id || !*id || registry_lookup(lc->reg, id, &e)) {
    json_t *valid = id ? json_string(id) : NULL; /* NULL for invalid UTF-8 */
    lms_error(req, 404, "model_not_found", "model_not_found", "model", "Model \"%.400s\" not found",
              valid ? id : "(not valid UTF-8)");
    json_decref(valid);
    return;
  }
  json_t *m = v0_entry(lc, e);
  registry_entry_free(e);
  if (m) api_respond_json(req, 200, m);
  else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
  json_decref(m);
}

/* ---- v1 ---------------------------------------------------------------------- */

/* Approximate bits per weight of the common GGUF quantizations (what the
 * block formats store, including their scales); null when unknown. */
static json_t *bits_per_weight(const char *quant) {
  static const struct {
    const char *q;
    double bits;
  } T[] = {{"F32", 32}, {"F16", 16},     {"BF16", 16},   {"Q8_0", 8.5},   {"Q6_K", 6.5625}, {"Q5_K_M", 5.5},
           {"Q5_K_S", 5.5}, {"Q5_0", 5.5}, {"Q5_1", 6},  {"Q4_K_M", 4.5}, {"Q4_K_S", 4.5},  {"Q4_0", 4.5},
           {"Q4_1", 5},   {"Q3_K_M", 3.4375}, {"Q3_K_S", 3.4375}, {"Q3_K_L", 3.4375}, {"Q2_K", 2.625}};
  for (size_t i = 0; i < ARRAY_LEN(T); i++)
    if (strcmp(quant, T[i].q) == 0) return json_real(T[i].bits);
  return json_null();
}

static json_t *v1_entry(lmstudio_ctx *lc, const registry_entry *e) {
  char pub[128];
  lms_publisher(e->name, pub, sizeof pub);
  const char *slash = strrchr(e->name, '/');
  const char *display = slash ? slash + 1 : e->name;
  bool emb = lms_is_embedding(e);
  json_t *quant = json_pack("{s:o, s:o}", "name", e->quant[0] ? json_string(e->quant) : json_null(),
                            "bits_per_weight", bits_per_weight(e->quant));
  json_t *m = json_pack("{s:s, s:s, s:s, s:s}", "type", emb ? "embedding" : "llm", "publisher", pub, "key",
                        e->name, "display_name", display);
  json_t *inst = lms_loaded_instances(lc, e->name);
  if (!m || !quant || !inst) {
    json_decref(m);
    json_decref(quant);
    json_decref(inst);
    return NULL;
  }
  if (!emb) json_object_set_new(m, "architecture", e->arch[0] ? json_string(e->arch) : json_null());
  json_object_set_new(m, "quantization", quant);
  json_object_set_new(m, "size_bytes", json_integer((json_int_t)e->size));
  json_object_set_new(m, "params_string", json_null());
  json_object_set_new(m, "loaded_instances", inst);
  json_object_set_new(m, "max_context_length", json_integer((json_int_t)e->context_length));
  json_object_set_new(m, "format", json_string("gguf"));
  lms_set_family(m, e);
  if (!emb) {
    json_t *caps = json_pack("{s:b, s:b}", "vision", (e->caps & FAMILY_CAP_VISION) || e->projector, "trained_for_tool_use",
                             (e->caps & FAMILY_CAP_TOOLS) != 0);
    /* a model whose reasoning has levels (gpt-oss) cannot turn it off */
    if (caps && (e->caps & FAMILY_CAP_REASONING_LEVELS))
      json_object_set_new(caps, "reasoning",
                          json_pack("{s:[s,s,s], s:s}", "allowed_options", "low", "medium", "high", "default", "medium"));
    else if (caps && (e->caps & FAMILY_CAP_REASONING))
      json_object_set_new(caps, "reasoning", json_pack("{s:[s,s,s,s,s], s:s}", "allowed_options", "off", "on", "low",
                                                       "medium", "high", "default", "on"));
    json_object_set_new(m, "capabilities", caps ? caps : json_object());
    json_object_set_new(m, "description", json_null());
  }
  return m;
}

void lms_v1_models(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  registry_snapshot *snap = registry_snapshot_acquire(lc->reg);
  json_t *list = json_array();
  for (size_t i = 0; list && i < registry_snapshot_count(snap); i++) {
    json_t *m = v1_entry(lc, registry_snapshot_at(snap, i));
    if (!m || json_array_append_new(list, m)) {
      json_decref(list);
      list = NULL;
    }
  }
  registry_snapshot_release(snap);
  json_t *body = list ? json_pack("{s:o}", "models", list) : NULL;
  if (body) api_respond_json(req, 200, body);
  else api_error(req, 500, ERR_NOMEM, "out of memory listing models", NULL);
  json_decref(body);
}

/* ---- routes -------------------------------------------------------------------- */

#define V1_ROUTES(P, N)                                                                                     \
  {"GET", P "/models", lms_v1_models, NULL, 0, N ".models.list"},                                           \
      {"POST", P "/chat", lms_v1_chat, NULL, HTTP_BODY_JSON, N ".chat"},                                    \
      {"POST", P "/models/load", lms_v1_load, NULL, HTTP_BODY_JSON, N ".models.load"},                      \
      {"POST", P "/models/unload", lms_v1_unload, NULL, HTTP_BODY_JSON, N ".models.unload"},                \
      {"POST", P "/models/download", lms_v1_download, NULL, HTTP_BODY_JSON, N ".models.download"},          \
      {"GET", P "/models/download/status", lms_v1_download_status, NULL, 0, N ".models.download.list"},     \
      {"GET", P "/models/download/status/{job_id}", lms_v1_download_status, NULL, 0, N ".models.download.status"}

static http_route ROUTES[] = {
    {"GET", "/lmstudio-greeting", lms_greeting, NULL, HTTP_ROUTE_PUBLIC, "lmstudio.greeting"},
    {"GET", "/api/v0/models", lms_v0_models_list, NULL, 0, "lmstudio.v0.models.list"},
    {"GET", "/api/v0/models/{model...}", lms_v0_models_get, NULL, 0, "lmstudio.v0.models.get"},
    {"POST", "/api/v0/chat/completions", lms_v0_chat, NULL, HTTP_BODY_JSON, "lmstudio.v0.chat.completions"},
    {"POST", "/api/v0/completions", lms_v0_completions, NULL, HTTP_BODY_JSON, "lmstudio.v0.completions"},
    {"POST", "/api/v0/embeddings", lms_v0_embeddings, NULL, HTTP_BODY_JSON, "lmstudio.v0.embeddings"},
    V1_ROUTES("/api/v1", "lmstudio.v1"),
    V1_ROUTES("/lmstudio/v1", "lmstudio.alias.v1"),
};

size_t lmstudio_routes(lmstudio_ctx *lctx, const http_route **out) {
  lctx->oa.reg = lctx->reg;
  lctx->oa.mgr = lctx->mgr;
  lctx->oa.st = lctx->st;
  for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) ROUTES[i].ctx = lctx;
  *out = ROUTES;
  return ARRAY_LEN(ROUTES);
}
