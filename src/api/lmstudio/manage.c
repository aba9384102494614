/*
 * manage.c - LM Studio's v1 model management: POST /api/v1/models/load,
 * /api/v1/models/unload, /api/v1/models/download and
 * GET /api/v1/models/download/status[/{job_id}] (also under /lmstudio/v1).
 *
 * Instances: a load takes a manager reference and keeps it in this
 * dialect's instance table, so the model stays loaded until the matching
 * unload. The first instance of a model is named by its key; loading the
 * same key again adds "key:2", "key:3"... (what LM Studio answers, spec
 * section 0). The model list's `state` / `loaded_instances` read this table.
 *
 * Downloads: jobs are the store's "download" rows (kind PULL_JOB_KIND of
 * the puller); the status routes read them. States map to LM Studio's:
 * queued/downloading/verifying -> downloading, completed -> completed,
 * failed/cancelled -> failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "api/lmstudio/lmstudio.h"
#include "base/err.h"
#include "base/util.h"

struct lms_instance {
  struct lms_instance *next;
  char *id;              /* "key" or "key:N" */
  manager_model *mm;     /* the reference this instance holds */
  int64_t n_ctx;
};

static void instance_free(struct lms_instance *in) {
  if (!in) return;
  manager_release(in->mm);
  free(in->id);
  free(in);
}

void lmstudio_shutdown(lmstudio_ctx *lc) {
  pthread_mutex_lock(&lc->lock);
  struct lms_instance *in = lc->instances;
  lc->instances = NULL;
  pthread_mutex_unlock(&lc->lock);
  while (in) {
    struct lms_instance *next = in->next;
    instance_free(in);
    in = next;
  }
  pthread_mutex_destroy(&lc->lock);
}

int64_t lms_loaded_ctx(lmstudio_ctx *lc, const char *name) {
  int64_t n = 0;
  pthread_mutex_lock(&lc->lock);
  for (struct lms_instance *in = lc->instances; in && !n; in = in->next)
    if (strcmp(in->mm->name, name) == 0) n = in->n_ctx;
  pthread_mutex_unlock(&lc->lock);
  return n;
}

json_t *lms_loaded_instances(lmstudio_ctx *lc, const char *name) {
  json_t *a = json_array();
  pthread_mutex_lock(&lc->lock);
  for (struct lms_instance *in = lc->instances; a && in; in = in->next) {
    if (strcmp(in->mm->name, name) != 0) continue;
    json_t *cfg = json_pack("{s:I}", "context_length", (json_int_t)in->n_ctx);
    if (cfg && in->mm->eng) json_object_set_new(cfg, "parallel", json_integer(engine_n_slots(in->mm->eng)));
    json_t *item = cfg ? json_pack("{s:s, s:o}", "id", in->id, "config", cfg) : NULL;
    if (!item || json_array_append_new(a, item)) {
      json_decref(a);
      a = NULL;
    }
  }
  pthread_mutex_unlock(&lc->lock);
  return a;
}

/* ---- load / unload ------------------------------------------------------------- */

static bool id_taken(lmstudio_ctx *lc, const char *id) {
  for (struct lms_instance *in = lc->instances; in; in = in->next)
    if (strcmp(in->id, id) == 0) return true;
  return false;
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
  uint64_t t0 = time_mono_ns();
  manager_model *mm = NULL;
  int rc = manager_get(lc->mgr, key, &mm);
  if (rc) {
    lms_error_manager(req, rc);
    goto done;
  }
  double load_s = lms_seconds(t0, time_mono_ns());
  struct lms_instance *in = calloc(1, sizeof *in);
  char id[600];
  pthread_mutex_lock(&lc->lock);
  snprintf(id, sizeof id, "%s", mm->name);
  for (int k = 2; id_taken(lc, id); k++) snprintf(id, sizeof id, "%s:%d", mm->name, k);
  if (in && (in->id = str_dup(id))) {
    in->mm = mm;
    in->n_ctx = mm->eng ? engine_n_ctx(mm->eng) : (int64_t)mm->entry->context_length;
    in->next = lc->instances;
    lc->instances = in;
  }
  pthread_mutex_unlock(&lc->lock);
  if (!in || !in->id) {
    free(in);
    manager_release(mm);
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    goto done;
  }
  json_t *res = json_pack("{s:s, s:s, s:s, s:f, s:s}", "type", lms_is_embedding(mm->entry) ? "embedding" : "llm",
                          "instance_id", id, "model_instance_id", id, "load_time_seconds", load_s, "status", "loaded");
  if (res && json_is_true(json_object_get(body, "echo_load_config"))) {
    json_t *cfg = json_pack("{s:I}", "context_length", (json_int_t)in->n_ctx);
    if (cfg && mm->eng) json_object_set_new(cfg, "parallel", json_integer(engine_n_slots(mm->eng)));
    json_object_set_new(res, "load_config", cfg ? cfg : json_object());
  }
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
  if (!id) {
    lms_error(req, 400, "invalid_request", "missing_required_parameter", "instance_id",
              "\"instance_id\" is required (a string: loaded_instances[].id from GET /api/v1/models)");
    json_decref(body);
    return;
  }
  struct lms_instance *found = NULL;
  pthread_mutex_lock(&lc->lock);
  for (struct lms_instance **p = &lc->instances; *p; p = &(*p)->next)
    if (strcmp((*p)->id, id) == 0) {
      found = *p;
      *p = found->next;
      break;
    }
  pthread_mutex_unlock(&lc->lock);
  if (!found) {
    lms_error(req, 404, "model_not_found", "instance_not_found", "instance_id", "no loaded instance '%.400s'", id);
  } else {
    json_t *res = json_pack("{s:s}", "instance_id", found->id);
    instance_free(found);
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

static const char *job_status(const char *state) {
  if (!state) return "downloading";
  if (strcmp(state, "completed") == 0 || strcmp(state, "done") == 0) return "completed";
  if (strcmp(state, "failed") == 0 || strcmp(state, "cancelled") == 0) return "failed";
  if (strcmp(state, "paused") == 0) return "paused";
  return "downloading";
}

static json_t *job_json(const store_job *j) {
  const char *st = job_status(j->state);
  json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:o}", "job_id", j->id, "status", st, "total_size_bytes",
                        (json_int_t)j->bytes_total, "downloaded_bytes", (json_int_t)j->bytes_done, "started_at",
                        iso_time(j->created_at));
  if (!o) return NULL;
  if (j->name) json_object_set_new(o, "model", json_string(j->name));
  if (strcmp(st, "completed") == 0) json_object_set_new(o, "completed_at", iso_time(j->updated_at));
  if (strcmp(st, "failed") == 0 && j->error) json_object_set_new(o, "error", json_string(j->error));
  if (strcmp(st, "downloading") == 0) {
    int64_t dt = j->updated_at - j->created_at;
    double rate = dt > 0 ? (double)j->bytes_done / (double)dt : 0.0;
    json_object_set_new(o, "bytes_per_second", json_real(rate));
    if (rate > 0 && j->bytes_total > j->bytes_done)
      json_object_set_new(o, "estimated_completion",
                          iso_time(time_wall_s() + (int64_t)((double)(j->bytes_total - j->bytes_done) / rate)));
  }
  return o;
}

void lms_v1_download_status(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  const char *id = http_req_param(req, "job_id");
  if (!lc->st) {
    lms_error(req, 503, "internal_error", NULL, NULL, "no job store is open");
    return;
  }
  json_t *res = NULL;
  if (id) {
    store_job j;
    int rc = store_job_get(lc->st, id, &j);
    if (rc == ERR_NOT_FOUND || (!rc && (!j.kind || strcmp(j.kind, "download") != 0))) {
      if (!rc) store_job_free(&j);
      lms_error(req, 404, "job_not_found", "job_not_found", "job_id", "no download job '%.200s'", id);
      return;
    }
    if (rc) {
      api_error_last(req, rc, NULL);
      return;
    }
    res = job_json(&j);
    store_job_free(&j);
  } else {
    store_job_list l = {0};
    int rc = store_job_list_all(lc->st, "download", &l);
    if (rc) {
      api_error_last(req, rc, NULL);
      return;
    }
    json_t *jobs = json_array();
    for (size_t i = 0; jobs && i < l.n_items; i++) json_array_append_new(jobs, job_json(&l.items[i]));
    store_job_list_free(&l);
    res = jobs ? json_pack("{s:o}", "jobs", jobs) : NULL;
  }
  if (res) api_respond_json(req, 200, res);
  else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
  json_decref(res);
}

void lms_v1_download(http_req *req, void *ctx) {
  lmstudio_ctx *lc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  const char *key = json_string_value(json_object_get(body, "model"));
  if (!key || !*key) {
    lms_error(req, 400, "invalid_request", "missing_required_parameter", "model",
              "\"model\" is required (a catalog id or a Hugging Face URL)");
    goto done;
  }
  if (!typed(req, body, "quantization", is_str, "string")) goto done;
  registry_entry *e = NULL;
  if (registry_lookup(lc->reg, key, &e) == 0) {
    registry_entry_free(e);
    json_t *res = json_pack("{s:s}", "status", "already_downloaded");
    if (res) api_respond_json(req, 200, res);
    json_decref(res);
    goto done;
  }
  lms_error(req, 501, "not_implemented", "not_implemented", NULL,
            "downloading '%.300s' needs the model puller, which this build does not have", key);
done:
  json_decref(body);
}
