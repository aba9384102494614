/*
 * fuzz_chat_request.c - libFuzzer harness for the OpenAI-shaped chat and
 * completion parsers (api/request.h: openai_chat_parse, and LM Studio's
 * lms_v0_chat_parse / lms_v0_completion_parse on top of it): any JSON
 * object the body decoder accepts goes through each. Each must give 0 or a
 * clean error code with a detail, never a crash or a leak. On success the
 * canonical messages must be objects whose role is a canonical one
 * (developer rewritten as system) and whose content is a string (or null
 * for an assistant), the chat must point at the request's own messages and
 * tools, a forced tool choice must name one of the tools, and a completion
 * must carry its raw prompt.
 */
#include "fuzz.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/lmstudio/lmstudio.h"
#include "api/openai/openai.h"
#include "api/request.h"
#include "base/err.h"

static void check_chat(const gen_request *r) {
  if (!json_is_array(r->messages) || r->chat.messages != r->messages || r->chat.tools != r->tools) abort();
  size_t i;
  json_t *m;
  json_array_foreach(r->messages, i, m) {
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!role || strcmp(role, "developer") == 0) abort();
    const json_t *c = json_object_get(m, "content");
    if (!json_is_string(c) && !(strcmp(role, "assistant") == 0 && (!c || json_is_null(c)))) abort();
  }
  if ((r->chat.tool_choice == GEN_TOOL_FUNCTION) != (r->tool_name != NULL)) abort();
  if (r->tool_name) {
    bool found = false;
    json_t *t;
    json_array_foreach(r->tools, i, t) {
      const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
      found |= n && strcmp(n, r->tool_name) == 0;
    }
    if (!found) abort();
  }
}

FUZZ_TARGET(chat_request) {
  json_t *v = NULL;
  if (api_json_decode_object((const char *)data, size, &v) != 0) return 0;
  for (int which = 0; which < 3; which++) {
    gen_request r;
    int rc = which == 0 ? openai_chat_parse(v, &r) : which == 1 ? lms_v0_chat_parse(v, &r)
                                                                : lms_v0_completion_parse(v, &r);
    if (rc) {
      if (rc > 0 || !err_detail() || !*err_detail()) abort();
      gen_request_free(&r);
      continue;
    }
    if (r.p.er.n < 1 || r.p.n_stop > 4) abort();
    if (which < 2) check_chat(&r);
    else if (!r.prompt || r.messages || strcmp(r.prompt_param, "prompt") != 0) abort();
    gen_request_free(&r);
  }
  json_decref(v);
  return 0;
}
