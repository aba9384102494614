/*
 * fuzz_ollama_chat.c - libFuzzer harness for Ollama's /api/chat parser
 * (api/ollama/ollama.h: ollama_chat_parse): any JSON object the body
 * decoder accepts. It must give 0 or a clean error code with a detail,
 * never a crash or a leak. On success the model is a non-empty name, the
 * chat points at the request's own messages and tools, and every canonical
 * message has a lower-case role of system/user/assistant/tool and string
 * content, with tool calls carrying an id and object arguments.
 */
#include "fuzz.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/ollama/ollama.h"
#include "api/request.h"
#include "base/err.h"

static void check_messages(const json_t *msgs) {
  static const char *const roles[] = {"system", "user", "assistant", "tool"};
  size_t i, k;
  json_t *m, *tc;
  json_array_foreach(msgs, i, m) {
    const char *role = json_string_value(json_object_get(m, "role"));
    bool ok = false;
    for (k = 0; role && k < 4; k++) ok |= strcmp(role, roles[k]) == 0;
    if (!ok || !json_is_string(json_object_get(m, "content"))) abort();
    json_array_foreach(json_object_get(m, "tool_calls"), k, tc) {
      if (!json_string_length(json_object_get(tc, "id"))) abort();
      if (!json_is_object(json_object_get(json_object_get(tc, "function"), "arguments"))) abort();
    }
  }
}

FUZZ_TARGET(ollama_chat) {
  json_t *v = NULL;
  if (api_json_decode_object((const char *)data, size, &v) != 0) return 0;
  gen_request r;
  int rc = ollama_chat_parse(v, &r);
  if (rc) {
    if (rc > 0 || !err_detail() || !*err_detail()) abort();
  } else {
    if (!r.model || !*r.model || r.chat.messages != r.messages || r.chat.tools != r.tools) abort();
    if (r.messages && !json_array_size(r.messages)) abort();
    if (r.top_logprobs < 0 || r.top_logprobs > 20 || (r.top_logprobs && !r.logprobs)) abort();
    check_messages(r.messages);
  }
  gen_request_free(&r);
  json_decref(v);
  return 0;
}
