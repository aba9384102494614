/*
 * common.c - what the LM Studio handlers share: the v1 error object, model
 * descriptions (publisher, type), and the extra objects LM Studio adds to
 * OpenAI-shaped answers (stats.stop_reason, model_info, runtime).
 *
 * stop_reason uses the SDK's vocabulary (lmstudio-js LLMPredictionStats):
 * eosFound, stopStringFound, toolCalls, maxPredictedTokensReached,
 * contextLengthReached, userStopped, failed. One 0.3.14 capture shows
 * "stop" instead (spec section 6.4); we emit the documented camelCase.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/lmstudio/lmstudio.h"
#include "base/err.h"
#include "base/util.h"
#include "base/version.h"

/* message and param may quote client bytes (a job id of %ff%fe) or be cut
 * inside a character by a '%.200s'; jansson refuses such strings, which
 * turned a 404 into a 500, so bytes that are not UTF-8 become U+FFFD. */
json_t *lms_error_object(const char *type, const char *code, const char *param, const char *message) {
  if (!message) message = "error";
  char *clean_msg = utf8_valid(message, strlen(message)) ? NULL : str_utf8_lossy(message);
  char *clean_param = !param || utf8_valid(param, strlen(param)) ? NULL : str_utf8_lossy(param);
  json_t *e = json_pack("{s:s, s:s}", "type", type, "message", clean_msg ? clean_msg : message);
  if (e && code) json_object_set_new(e, "code", json_string(code));
  if (e && param) json_object_set_new(e, "param", json_string(clean_param ? clean_param : param));
  free(clean_msg);
  free(clean_param);
  return e;
}

void lms_error(http_req *req, int status, const char *type, const char *code, const char *param, const char *fmt,
               ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_t *e = lms_error_object(type, code, param, msg);
  json_t *body = e ? json_pack("{s:o}", "error", e) : NULL;
  if (!body) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  if (status < 500 && status != 429) http_resp_header(req, "x-should-retry", "false");
  api_respond_json(req, status, body);
  json_decref(body);
}

void lms_error_manager(http_req *req, int rc) {
  if (rc == ERR_NOT_FOUND) lms_error(req, 404, "model_not_found", "model_not_found", "model", "%s", err_detail());
  else if (rc == ERR_UNSUPPORTED) lms_error(req, 400, "invalid_request", "model_not_supported", "model", "%s", err_detail());
  else api_error_last(req, rc, "model");
}

void lms_publisher(const char *name, char *out, size_t cap) {
  const char *s = name;
  if (str_starts_with(s, "hf.co/")) s += 6;
  const char *slash = strchr(s, '/');
  if (!slash || slash == s) {
    snprintf(out, cap, "parley");
    return;
  }
  snprintf(out, cap, "%.*s", (int)(slash - s), s);
}

bool lms_is_embedding(const registry_entry *e) {
  return (e->caps & FAMILY_CAP_EMBED) && !(e->caps & FAMILY_CAP_CHAT);
}

const char *lms_v0_type(const registry_entry *e) {
  if (lms_is_embedding(e)) return "embeddings";
  if (e->projector || (e->caps & FAMILY_CAP_VISION)) return "vlm";
  return "llm";
}

const char *lms_stop_reason(const gen_choice *c, int64_t max_tokens) {
  switch (c->finish) {
    case ENGINE_FINISH_STOP:
      if (gen_choice_has_calls(c)) return "toolCalls";
      return c->stop_index >= 0 ? "stopStringFound" : "eosFound";
    case ENGINE_FINISH_LENGTH:
      return max_tokens > 0 && (int64_t)c->n_tokens >= max_tokens ? "maxPredictedTokensReached"
                                                                   : "contextLengthReached";
    case ENGINE_FINISH_CANCELLED: return "userStopped";
    default: return "failed";
  }
}

json_t *lms_model_info(const manager_model *mm) {
  const registry_entry *e = mm->entry;
  int64_t ctx = mm->eng ? engine_n_ctx(mm->eng) : (int64_t)e->context_length;
  return json_pack("{s:s, s:s, s:s, s:I}", "arch", e->arch[0] ? e->arch : mm->fam.arch, "quant",
                   e->quant[0] ? e->quant : "unknown", "format", "gguf", "context_length", (json_int_t)ctx);
}

json_t *lms_runtime(void) {
#if defined(__x86_64__)
  const char *name = "parley-cpu-x86_64";
#elif defined(__aarch64__)
  const char *name = "parley-cpu-arm64";
#else
  const char *name = "parley-cpu";
#endif
  return json_pack("{s:s, s:s, s:[s]}", "name", name, "version", PARLEY_VERSION, "supported_formats", "gguf");
}

double lms_seconds(uint64_t from_ns, uint64_t to_ns) {
  if (!from_ns || !to_ns || to_ns < from_ns) return 0.0;
  return (double)(to_ns - from_ns) / 1e9;
}

void lms_gen_timing(const gen_result *r, double *gen_s, double *tokens_per_s) {
  *gen_s = lms_seconds(r->t_first_ns, r->t_last_ns);
  *tokens_per_s = *gen_s > 0 && r->n_completion > 1 ? (double)(r->n_completion - 1) / *gen_s : 0.0;
}
