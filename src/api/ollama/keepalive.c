/*
 * keepalive.c - Ollama's model lifetime on the manager's keep-alive API: a
 * request's keep_alive (manager_get_opts: seconds or a duration, negative
 * = forever, 0 = unload once idle), the unload-only form of generate/chat
 * (manager_unload, which never loads), and GET /api/ps from the manager's
 * snapshot of loaded instances (manager_list_loaded).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/ollama/ollama.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

int ollama_model_get(ollama_ctx *c, const char *name, bool ka_set, int64_t ka_ms, manager_model **out) {
  char canon[1024];
  manager_opts o = {.keep_alive_set = ka_set, .keep_alive_ms = ka_ms < 0 ? MANAGER_KEEP_ALIVE_FOREVER : ka_ms};
  return manager_get_opts(c->mgr, ollama_resolve(c, name, canon, sizeof canon), &o, out);
}

void ollama_model_unload(ollama_ctx *c, const char *name) {
  char canon[1024];
  int rc = manager_unload(c->mgr, ollama_resolve(c, name, canon, sizeof canon));
  if (rc && rc != ERR_NOT_FOUND) LOG_WARN("ollama", "unload %s: %s", name, err_detail());
}

static int by_expiry_desc(const void *a, const void *b) {
  const manager_loaded *x = a, *y = b;
  int64_t ex = x->expires_at_ms ? x->expires_at_ms : INT64_MAX, ey = y->expires_at_ms ? y->expires_at_ms : INT64_MAX;
  return ex < ey ? 1 : ex > ey ? -1 : 0;
}

void ollama_ps(http_req *req, void *ctx) {
  ollama_ctx *c = ctx;
  manager_loaded *v = NULL;
  size_t n = 0;
  if (manager_list_loaded(c->mgr, &v, &n)) {
    ollama_err(req, 500, ERR_NOMEM, "cannot list the loaded models: %s", err_detail());
    return;
  }
  if (n) qsort(v, n, sizeof *v, by_expiry_desc);
  json_t *list = json_array();
  for (size_t i = 0; list && i < n; i++) {
    const registry_entry *e = v[i].entry;
    char ts[48], dg[65];
    /* "forever" is the latest time Go's time.Time renders from a duration */
    ollama_time(v[i].expires_at_ms ? v[i].expires_at_ms * 1000000LL : INT64_MAX, ts, sizeof ts);
    ollama_digest_hex(e, dg);
    const char *name = v[i].instance_id && *v[i].instance_id ? v[i].instance_id : e->name;
    json_t *details = ollama_details(c, e);
    json_t *m = json_pack("{s:s, s:s, s:I, s:s, s:o, s:s, s:i, s:I}", "name", name, "model", name, "size",
                          (json_int_t)v[i].bytes, "digest", dg, "details", details ? details : json_object(),
                          "expires_at", ts, "size_vram", 0, "context_length", (json_int_t)v[i].n_ctx);
    if (m) json_array_append_new(list, m);
  }
  manager_loaded_free(v, n);
  json_t *body = list ? json_pack("{s:o}", "models", list) : NULL;
  if (body) ollama_json(req, 200, body);
  else ollama_err(req, 500, ERR_NOMEM, "out of memory");
  json_decref(body);
}
