/*
 * completions.c - POST /v1/completions, the legacy text completion: the
 * prompt is one string (or an array holding one string), tokenized as plain
 * text (special tokens are not parsed: a prompt is user text) with the
 * vocabulary's BOS; echo prepends the prompt to each choice's text. The
 * generation itself is openai_generate (chat.c) with the text_completion
 * shapes. Token-id prompts and several prompts per request are not
 * supported yet (400 naming `prompt`).
 */
#include <string.h>

#include "api/api.h"
#include "api/openai/openai.h"
#include "base/err.h"

void openai_completions(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  openai_gen g;
  memset(&g, 0, sizeof g);
  tok_ids ids = TOK_IDS_INIT;
  manager_model *mm = NULL;
  const char *model_name = NULL;
  int rc = api_json_str(body, "", "model", false, &model_name);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "model");
    goto done;
  }
  const json_t *p = json_object_get(body, "prompt");
  if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
  if (!json_is_string(p)) {
    api_error(req, 400, p ? ERR_UNSUPPORTED : ERR_INVALID,
              p ? "prompt: only a string (or an array of one string) is supported" : "prompt: required field is missing",
              "prompt");
    goto done;
  }
  bool echo = false;
  rc = api_json_bool(body, "", "echo", false, &echo);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "echo");
    goto done;
  }
  if ((rc = manager_get(oc->mgr, model_name, &mm))) {
    openai_error_manager(req, rc);
    goto done;
  }
  if (openai_gen_parse(req, body, false, mm, &g)) goto done;
  if ((rc = gen_tokenize(mm->t, json_string_value(p), json_string_length(p), false, &ids)) || !ids.n) {
    api_error(req, 400, rc ? rc : ERR_INVALID, rc ? err_detail() : "prompt: empty", "prompt");
    goto done;
  }
  openai_generate(req, mm, model_name, &g, &ids, OPENAI_KIND_COMPLETION, NULL, echo ? json_string_value(p) : NULL);
  mm = NULL; /* the job holds the reference now */
done:
  manager_release(mm);
  tok_ids_free(&ids);
  openai_gen_free(&g);
  json_decref(body);
}
