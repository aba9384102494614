/*
 * models.c - GET /v1/models and GET /v1/models/{model_id} in the Anthropic
 * shape (ModelInfo: type "model", id, display_name, created_at as an RFC
 * 3339 string, max_input_tokens, max_tokens, capabilities). The OpenAI
 * handlers own the paths and hand requests carrying anthropic-version over
 * here, so one route serves both vendors' SDKs.
 *
 * Listing: newest first (file modification time, then name), paged with
 * limit (1..1000, default 20) and after_id / before_id cursors; the page
 * says has_more, first_id and last_id, as the SDK's auto-pager reads them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/anthropic/anthropic.h"
#include "api/api.h"
#include "base/err.h"
#include "base/util.h"
#include "model/family.h"

static json_t *supported(bool b) { return json_pack("{s:b}", "supported", b); }

static json_t *model_info(const registry_entry *e, const char *id) {
  char created[32];
  time_t t = (time_t)e->mtime;
  struct tm tm;
  if (gmtime_r(&t, &tm)) strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
  else snprintf(created, sizeof created, "1970-01-01T00:00:00Z");
  bool reasoning = (e->caps & FAMILY_CAP_REASONING) != 0;
  json_t *caps = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:b, s:{s:o, s:o}}}", "batch", supported(false),
                           "citations", supported(false), "code_execution", supported(false), "image_input",
                           supported(false), "pdf_input", supported(false), "structured_outputs", supported(true),
                           "tools", supported((e->caps & FAMILY_CAP_TOOLS) != 0), "thinking", "supported", reasoning,
                           "types", "enabled", supported(reasoning), "adaptive", supported(reasoning));
  json_t *ctx = e->context_length ? json_integer((json_int_t)e->context_length) : json_null();
  return json_pack("{s:s, s:s, s:s, s:s, s:O, s:o, s:o}", "type", "model", "id", id, "display_name", id, "created_at",
                   created, "max_input_tokens", ctx, "max_tokens", ctx, "capabilities", caps ? caps : json_null());
}

/* Newest first, then by name: a stable order for the cursors. */
static int newest_first(const void *a, const void *b) {
  const registry_entry *x = *(const registry_entry *const *)a, *y = *(const registry_entry *const *)b;
  if (x->mtime != y->mtime) return x->mtime > y->mtime ? -1 : 1;
  return strcmp(x->name, y->name);
}

static size_t index_of(const registry_entry **v, size_t n, const char *id) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i]->name, id) == 0) return i;
  return n;
}

void anthropic_models_list(http_req *req, registry *reg) {
  long long limit = 20;
  const char *ls = http_req_query(req, "limit");
  if (ls) {
    char *end = NULL;
    limit = strtoll(ls, &end, 10);
    if (!*ls || *end || limit < 1 || limit > 1000) {
      api_error(req, 400, ERR_RANGE, "limit: expected an integer from 1 to 1000", "limit");
      return;
    }
  }
  const char *after = http_req_query(req, "after_id"), *before = http_req_query(req, "before_id");
  if (after && before) {
    api_error(req, 400, ERR_INVALID, "after_id and before_id cannot be used together", "after_id");
    return;
  }
  registry_snapshot *snap = registry_snapshot_acquire(reg);
  size_t n = registry_snapshot_count(snap);
  const registry_entry **v = calloc(n ? n : 1, sizeof *v);
  json_t *data = json_array();
  if (!v || !data) {
    free(v);
    json_decref(data);
    registry_snapshot_release(snap);
    api_error(req, 500, ERR_NOMEM, "out of memory listing models", NULL);
    return;
  }
  for (size_t i = 0; i < n; i++) v[i] = registry_snapshot_at(snap, i);
  qsort(v, n, sizeof *v, newest_first);
  size_t lo = 0, hi = n; /* the window the cursor leaves */
  const char *cursor = after ? after : before;
  if (cursor) {
    size_t at = index_of(v, n, cursor);
    if (at == n) {
      free(v);
      json_decref(data);
      registry_snapshot_release(snap);
      char msg[320];
      snprintf(msg, sizeof msg, "%s: no model '%.256s'", after ? "after_id" : "before_id", cursor);
      api_error(req, 400, ERR_INVALID, msg, after ? "after_id" : "before_id");
      return;
    }
    if (after) lo = at + 1;
    else hi = at;
  }
  /* before_id pages backwards: the last `limit` items before the cursor */
  size_t start = lo, end = hi;
  if (hi - lo > (size_t)limit) {
    if (before) start = hi - (size_t)limit;
    else end = lo + (size_t)limit;
  }
  bool has_more = before ? start > lo : end < hi;
  for (size_t i = start; i < end; i++) json_array_append_new(data, model_info(v[i], v[i]->name));
  json_t *body = json_pack("{s:o, s:b, s:o, s:o}", "data", data, "has_more", has_more, "first_id",
                           end > start ? json_string(v[start]->name) : json_null(), "last_id",
                           end > start ? json_string(v[end - 1]->name) : json_null());
  free(v);
  registry_snapshot_release(snap);
  if (!body) {
    api_error(req, 500, ERR_NOMEM, "out of memory listing models", NULL);
    return;
  }
  api_respond_json(req, 200, body);
  json_decref(body);
}

void anthropic_models_get(http_req *req, registry *reg) {
  const char *id = http_req_param(req, "model");
  registry_entry *e = NULL;
  if (!id || !*id || registry_lookup(reg, id, &e)) {
    char msg[320];
    json_t *valid = id ? json_string(id) : NULL; /* NULL for invalid UTF-8 */
    snprintf(msg, sizeof msg, "model: %.256s", valid ? id : "(not valid UTF-8)");
    json_decref(valid);
    api_error(req, 404, ERR_NOT_FOUND, msg, "model");
    return;
  }
  /* Answer with the id asked for (an alias resolves to its model). */
  json_t *m = model_info(e, id);
  registry_entry_free(e);
  if (!m) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  api_respond_json(req, 200, m);
  json_decref(m);
}
