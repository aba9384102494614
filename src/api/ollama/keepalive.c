/*
 * keepalive.c - Ollama's model lifetime on top of the manager: a request's
 * keep_alive, the load-only and unload-only forms of generate/chat, and the
 * loaded-model list of /api/ps.
 *
 * The manager on this branch loads a model on first use and keeps it; the
 * per-request keep-alive, explicit unload and the loaded list come with the
 * manager's keep-alive API (manager_get_opts / manager_unload /
 * manager_list_loaded). Until then keep_alive is parsed and checked but not
 * applied, and /api/ps lists nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/ollama/ollama.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

int ollama_model_get(ollama_ctx *c, const char *name, bool ka_set, int64_t ka_ms, manager_model **out) {
  (void)ka_set;
  (void)ka_ms;
  char canon[1024];
  return manager_get(c->mgr, ollama_resolve(c, name, canon, sizeof canon), out);
}

void ollama_model_unload(ollama_ctx *c, const char *name) {
  (void)c;
  LOG_INFO("ollama", "keep_alive 0 for %s: this manager has no explicit unload", name);
}

void ollama_ps(http_req *req, void *ctx) {
  (void)ctx;
  json_t *body = json_pack("{s:[]}", "models");
  ollama_json(req, 200, body);
  json_decref(body);
}
