/*
 * fuzz_anthropic_request.c - libFuzzer harness for the Anthropic Messages
 * translation (api/anthropic/request.c): any JSON object the body decoder
 * accepts goes through anthropic_req_parse in both modes (messages and
 * count_tokens). It must give 0 or a clean error code with a detail, never a
 * crash or a leak; on success the canonical messages must be an array of
 * objects with a string role, and the chat must point at them.
 */
#include "fuzz.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/anthropic/anthropic.h"
#include "api/api.h"
#include "base/err.h"


FUZZ_TARGET(anthropic_request) {
  json_t *v = NULL;
  if (api_json_decode_object((const char *)data, size, &v) != 0) return 0;
  for (int count = 0; count < 2; count++) {
    anthropic_req r;
    int rc = anthropic_req_parse(v, count == 1, &r);
    if (rc) {
      if (rc > 0 || !err_detail() || !*err_detail()) abort();
      continue;
    }
    if (!json_is_array(r.messages) || r.chat.messages != r.messages) abort();
    size_t i;
    json_t *m;
    json_array_foreach(r.messages, i, m) if (!json_is_string(json_object_get(m, "role"))) abort();
    anthropic_req_free(&r);
  }
  json_decref(v);
  return 0;
}
