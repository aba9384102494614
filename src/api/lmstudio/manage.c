/*
 * manage.c - LM Studio's v1 model management: POST /api/v1/models/load,
 * /api/v1/models/unload, /api/v1/models/download and
 * GET /api/v1/models/download/status[/{job_id}] (also under /lmstudio/v1).
 *
 * Instances are the manager's (engine/manager.h): a load is manager_load
 * with the requested context and no TTL (LM Studio: models loaded
 * explicitly stay until unloaded); the first instance of a model is named
 * by its key, loading the same key again names the next free "key:2",
 * "key:3"... (what LM Studio answers, spec section 0). Unload is
 * manager_unload of the instance id. The listings' `state`,
 * `loaded_context_length` and `loaded_instances` read manager_list_loaded,
 * so models loaded on demand by any dialect show too.
 *
 * Downloads run on the puller (model/pull.h): a catalog id "OWNER/REPO" is
 * the Hugging Face repository hf.co/OWNER/REPO (quantization picks the
 * file), a Hugging Face URL or an hf.co/... or Ollama name is pulled as
 * given. The answer waits up to two seconds for the job to learn its size.
 * Status reads the puller's jobs (this run's and the store's earlier rows).
 * States map to LM Studio's: queued/downloading/verifying -> downloading,
 * completed -> completed, failed/cancelled -> failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "api/lmstudio/lmstudio.h"
#include "base/err.h"
#include "base/util.h"
#include "model/pull.h"

static int list_loaded(manager *mg, manager_loaded **v, size_t *n) {
  *v = NULL;
  *n = 0;
  return manager_list_loaded(mg, v, n);
}

int64_t lms_loaded_ctx(lmstudio_ctx *lc, const char *name) {
  manager_loaded *v = NULL;
  size_t n = 0;
  int64_t ctx = 0;
  if (list_loaded(lc->mgr, &v, &n)) return 0;
  for (size_t i = 0; i < n && !ctx; i++)
    if (v[i].entry && strcmp(v[i].entry->name, name) == 0) ctx = v[i].n_ctx;
  manager_loaded_free(v, n);
  return ctx;
}

json_t *lms_loaded_instances(lmstudio_ctx *lc, const char *name) {
  manager_loaded *v = NULL;
  size_t n = 0;
  json_t *a = json_array();
  if (!a || list_loaded(lc->mgr, &v, &n)) {
    json_decref(a);
    return NULL;
  }
  for (size_t i = 0; a && i < n; i++) {
    if (!v[i].entry || strcmp(v[i].entry->name, name) != 0) continue;
    json_t *item = json_pack("{s:s, s:{s:I, s:i}}", "id", v[i].instance_id, "config", "context_length",
                             (json_int_t)v[i].n_ctx, "parallel", (int)v[i].n_slots);
    if (!item || json_array_append_new(a, item)) {
      json_decref(a);
      a = NULL;
    }
  }
  manager_loaded_free(v, n);
  return a;
}

/* ---- load / unload ------------------------------------------------------------- */

/* The id for a new instance of the model key resolves to: the canonical
 * name when none is loaded, else the first free "name:N". */
static int next_instance_id(lmstudio_ctx *lc, const char *key, char *out, size_t cap) {
  char canon[512];
  int rc = registry_resolve(lc->reg, key, canon, sizeof canon);
  if (rc) return rc;
  manager_loaded *v = NULL;
  size_t n = 0;
  if ((rc = list_loaded(lc->mgr, &v, &n))) return rc;
  snprintf(out, cap, "%s", canon);
  for (int k = 2;; k++) {
    bool taken = false;
    for (size_t i = 0; i < n && !taken; i++) taken = strcmp(v[i].instance_id, out) == 0;
    if (!taken) break;
    snprintf(out, cap, "%s:%d", canon, k);
  }
  manager_loaded_free(v, n);
  return 0;
}

/* Checks an optional field's JSON type; answers 400 and returns false. */
static bool typed(http_req *req, const json_t *body, const char *key, bool (*ok)(const json_t *), const char *want) {
  const json_t *v = json_object_get(body, key);
  if (!v || json_is_null(v) || ok(v)) return true;
  lms_error(req, 400, "invalid_request", "invalid_type", key, "%s: expected %s, got %s", key, want, api_json_type_name(v));
  return false;
}
static bool is_posint(const json_t *v) { return json_is_integer(v) && json_integer_value(v) > 0; }
static bool is_bool(const json_t *v) { return json_is_boolean(v); }
static bool is_str(const json_t *v) { return json_is_string(v); }

void lms_v1_load(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  const char *key = json_string_value(json_object_get(body, "model"));
  if (!key) {
    lms_error(req, 400, "invalid_request", "missing_required_parameter", "model", "\"model\" is required (a string)");
    goto done;
  }
  if (!typed(req, body, "context_length", is_posint, "a positive integer") ||
      !typed(req, body, "eval_batch_size", is_posint, "a positive integer") ||
      !typed(req, body, "num_experts", is_posint, "a positive integer") ||
      !typed(req, body, "flash_attention", is_bool, "boolean") ||
      !typed(req, body, "offload_kv_cache_to_gpu", is_bool, "boolean") ||
      !typed(req, body, "echo_load_config", is_bool, "boolean"))
    goto done;
  char id[600];
  int rc = next_instance_id(lc, key, id, sizeof id);
  if (rc) {
    lms_error_manager(req, rc);
    goto done;
  }
  manager_opts o = {.keep_alive_set = true, .keep_alive_ms = MANAGER_KEEP_ALIVE_FOREVER, .instance_id = id,
                    .n_ctx = json_integer_value(json_object_get(body, "context_length"))};
  uint64_t t0 = time_mono_ns();
  manager_model *mm = NULL;
  if ((rc = manager_load(lc->mgr, key, &o, &mm))) {
    if (rc == ERR_NOMEM || rc == ERR_OVERLOADED || rc == ERR_RANGE || rc == ERR_CONFLICT)
      lms_error(req, api_status_for(rc), rc == ERR_RANGE ? "invalid_request" : "internal_error", NULL,
                rc == ERR_RANGE ? "context_length" : NULL, "%s", err_detail());
    else lms_error_manager(req, rc);
    goto done;
  }
  double load_s = lms_seconds(t0, time_mono_ns());
  json_t *res = json_pack("{s:s, s:s, s:s, s:f, s:s}", "type", lms_is_embedding(mm->entry) ? "embedding" : "llm",
                          "instance_id", mm->instance_id, "model_instance_id", mm->instance_id, "load_time_seconds",
                          load_s, "status", "loaded");
  if (res && json_is_true(json_object_get(body, "echo_load_config"))) {
    json_t *cfg = json_pack("{s:I}", "context_length", (json_int_t)mm->n_ctx);
    if (cfg && mm->eng) json_object_set_new(cfg, "parallel", json_integer(mm->n_slots));
    json_object_set_new(res, "load_config", cfg ? cfg : json_object());
  }
  manager_release(mm);
  if (res) api_respond_json(req, 200, res);
  else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
  json_decref(res);
done:
  json_decref(body);
}

void lms_v1_unload(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  const char *id = json_string_value(json_object_get(body, "instance_id"));
  if (!id || !*id) {
    lms_error(req, 400, "invalid_request", "missing_required_parameter", "instance_id",
              "\"instance_id\" is required (a string: loaded_instances[].id from GET /api/v1/models)");
    json_decref(body);
    return;
  }
  int rc = manager_unload(lc->mgr, id);
  if (rc == ERR_NOT_FOUND) {
    lms_error(req, 404, "model_not_found", "instance_not_found", "instance_id", "no loaded instance '%.400s'", id);
  } else if (rc) {
    api_error_last(req, rc, "instance_id");
  } else {
    json_t *res = json_pack("{s:s}", "instance_id", id);
    if (res) api_respond_json(req, 200, res);
    else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    json_decref(res);
  }
  json_decref(body);
}

/* ---- downloads ------------------------------------------------------------------ */

/* Unix seconds as ISO 8601 UTC ("2025-10-03T15:33:23.000Z"). */
static json_t *iso_time(int64_t t) {
  time_t tt = (time_t)t;
  struct tm tm;
  char s[40];
  if (!gmtime_r(&tt, &tm) || !strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S.000Z", &tm)) return json_null();
  return json_string(s);
}

static const char *job_status(pull_state st) {
  switch (st) {
    case PULL_COMPLETED: return "completed";
    case PULL_FAILED: case PULL_CANCELLED: return "failed";
    default: return "downloading";
  }
}

static json_t *job_json(const pull_status *j) {
  const char *st = job_status(j->state);
  json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:o}", "job_id", j->id, "status", st, "total_size_bytes",
                        (json_int_t)j->bytes_total, "downloaded_bytes", (json_int_t)j->bytes_done, "started_at",
                        iso_time(j->started_at ? j->started_at : j->created_at));
  if (!o) return NULL;
  if (j->model || j->name) json_object_set_new(o, "model", json_string(j->model ? j->model : j->name));
  if (j->state == PULL_COMPLETED) json_object_set_new(o, "completed_at", iso_time(j->completed_at ? j->completed_at : time_wall_s()));
  if (strcmp(st, "failed") == 0 && j->error) json_object_set_new(o, "error", json_string(j->error));
  if (strcmp(st, "downloading") == 0) {
    json_object_set_new(o, "bytes_per_second", json_real(j->rate));
    if (j->rate > 0 && j->bytes_total > j->bytes_done)
      json_object_set_new(o, "estimated_completion",
                          iso_time(time_wall_s() + (int64_t)((double)(j->bytes_total - j->bytes_done) / j->rate)));
  }
  return o;
}

void lms_v1_download_status(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  const char *id = http_req_param(req, "job_id");
  if (!lc->pull) {
    lms_error(req, 501, "not_implemented", "not_implemented", NULL, "this server has no model puller");
    return;
  }
  json_t *res = NULL;
  if (id) {
    pull_status st;
    int rc = pull_get(lc->pull, id, &st);
    if (rc == ERR_NOT_FOUND) {
      lms_error(req, 404, "job_not_found", "job_not_found", "job_id", "no download job '%.200s'", id);
      return;
    }
    if (rc) {
      api_error_last(req, rc, NULL);
      return;
    }
    res = job_json(&st);
    pull_status_free(&st);
  } else {
    pull_status *v = NULL;
    size_t n = 0;
    int rc = pull_list(lc->pull, &v, &n);
    if (rc) {
      api_error_last(req, rc, NULL);
      return;
    }
    json_t *jobs = json_array();
    for (size_t i = 0; jobs && i < n; i++) json_array_append_new(jobs, job_json(&v[i]));
    pull_list_free(v, n);
    res = jobs ? json_pack("{s:o}", "jobs", jobs) : NULL;
  }
  if (res) api_respond_json(req, 200, res);
  else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
  json_decref(res);
}

/* The puller's name for an LM Studio model id: OWNER/REPO (a catalog id)
 * is a Hugging Face repository; URLs, hf.co/... and other names as given. */
static void pull_name(const char *key, char *out, size_t cap) {
  const char *slash = strchr(key, '/');
  bool catalog = slash && slash != key && !strchr(slash + 1, '/') && !strchr(key, ':') && !strchr(key, '.');
  snprintf(out, cap, catalog ? "hf.co/%s" : "%s", key);
}

void lms_v1_download(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  const char *key = json_string_value(json_object_get(body, "model"));
  const char *quant = json_string_value(json_object_get(body, "quantization"));
  char name[1024], lookup[1100];
  if (!key || !*key) {
    lms_error(req, 400, "invalid_request", "missing_required_parameter", "model",
              "\"model\" is required (a catalog id or a Hugging Face URL)");
    goto done;
  }
  if (!typed(req, body, "quantization", is_str, "string")) goto done;
  pull_name(key, name, sizeof name);
  snprintf(lookup, sizeof lookup, quant && *quant && str_starts_with(name, "hf.co/") ? "%s:%s" : "%s", name, quant);
  registry_entry *e = NULL;
  if (registry_lookup(lc->reg, key, &e) == 0 || registry_lookup(lc->reg, lookup, &e) == 0) {
    registry_entry_free(e);
    json_t *res = json_pack("{s:s}", "status", "already_downloaded");
    if (res) api_respond_json(req, 200, res);
    json_decref(res);
    goto done;
  }
  if (!lc->pull) {
    lms_error(req, 501, "not_implemented", "not_implemented", NULL, "this server has no model puller");
    goto done;
  }
  char id[PULL_ID_CAP];
  pull_opts po = {.quant = quant && *quant ? quant : NULL};
  int rc = pull_start(lc->pull, name, &po, id, sizeof id, NULL);
  if (rc) {
    if (rc == ERR_INVALID) lms_error(req, 400, "invalid_request", "invalid_value", "model", "%s", err_detail());
    else api_error_last(req, rc, "model");
    goto done;
  }
  pull_status st;
  memset(&st, 0, sizeof st);
  for (int i = 0; i < 20; i++) { /* up to 2 s for the size */
    if (pull_get(lc->pull, id, &st)) break;
    if (st.bytes_total > 0 || pull_state_is_final(st.state)) break;
    pull_status_free(&st);
    memset(&st, 0, sizeof st);
    pull_wait(lc->pull, id, 100);
  }
  json_t *res = st.id[0] ? job_json(&st) : json_pack("{s:s, s:s, s:o}", "job_id", id, "status", "downloading",
                                                       "started_at", iso_time(time_wall_s()));
  if (res && st.id[0] && st.bytes_total <= 0) json_object_del(res, "total_size_bytes");
  pull_status_free(&st);
  if (res) api_respond_json(req, 200, res);
  else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
  json_decref(res);
done:
  json_decref(body);
}
