/*
 * cloud.c - the Anthropic API's cloud-only resources answer an Anthropic
 * client honestly: 501 in Anthropic's error shape ({"type":"error",
 * "error":{"type":"api_error","message"},"request_id"}, x-should-retry:
 * false), the message naming the path and not_implemented_local (the code
 * the OpenAI fallbacks give, api/openai/unimplemented.c), never a 404
 * "Invalid URL" nor an OpenAI body.
 *
 * CLOUD_PREFIXES is every resource of the Anthropic SDK (@anthropic-ai/sdk,
 * its resources folder) that parley does not run: message batches, legacy
 * text completions, files, skills, and the agent, session, environment,
 * memory, vault and organization (admin) APIs. A path at or under a prefix is one of
 * them, whatever the method. Three ways lead here:
 *   - a path no route matches (api_http_on_error turns the 404 into this);
 *   - a path the OpenAI dialect serves (/v1/files...): its handlers ask
 *     anthropic_cloud_answer first, since an Anthropic SDK always sends
 *     anthropic-version and an OpenAI SDK never does;
 *   - an OpenAI 501 fallback on a shared path (/v1/skills), whose wording
 *     would name an OpenAI operation.
 * Anything else under /v1/messages (a typo) stays a 404 not_found_error.
 */
#include <stdio.h>
#include <string.h>

#include "api/anthropic/anthropic.h"
#include "api/api.h"
#include "base/err.h"
#include "base/util.h"

static const char *const CLOUD_PREFIXES[] = {
    "/v1/messages/batches", "/v1/complete",     "/v1/files",        "/v1/skills",
    "/v1/agents",           "/v1/sessions",     "/v1/environments", "/v1/deployments",
    "/v1/deployment_runs",  "/v1/dreams",       "/v1/memory_stores", "/v1/vaults",
    "/v1/tunnels",          "/v1/user_profiles", "/v1/organizations", "/v1/compliance",
};

bool anthropic_cloud_path(const char *path) {
  while (path[0] == '/' && path[1] == '/') path++;
  for (size_t i = 0; i < ARRAY_LEN(CLOUD_PREFIXES); i++) {
    size_t n = strlen(CLOUD_PREFIXES[i]);
    if (strncmp(path, CLOUD_PREFIXES[i], n) == 0 && (path[n] == '\0' || path[n] == '/')) return true;
  }
  return false;
}

bool anthropic_cloud_answer(http_req *req) {
  const char *path = http_req_path(req);
  if (api_dialect_of(req) != API_DIALECT_ANTHROPIC || !anthropic_cloud_path(path)) return false;
  char shown[200];
  snprintf(shown, sizeof shown, "%s", path);
  for (char *c = shown; *c; c++)
    if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
  char msg[400];
  snprintf(msg, sizeof msg,
           "%s %s is an Anthropic cloud feature with no local equivalent in parley, so this server does not "
           "implement it (not_implemented_local); retrying will not help.",
           http_req_method(req), shown);
  api_error(req, 501, ERR_UNSUPPORTED, msg, NULL);
  return true;
}
