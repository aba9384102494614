/*
 * fuzz_fields.c - libFuzzer harness for the request field-type tables
 * (api_json_check_fields with the OpenAI chat, completions and embeddings
 * tables): any JSON object the body decoder accepts is checked against each
 * shape. It must answer 0 or ERR_TYPE / ERR_RANGE, and on an error the
 * concrete path it names must be a prefix of its message.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/openai/openai.h"
#include "base/err.h"

FUZZ_TARGET(fields) {
  json_t *v = NULL;
  if (api_json_decode_object((const char *)data, size, &v) != 0) return 0;
  for (int s = 0; s < OPENAI_SHAPE_COUNT; s++) {
    size_t n = 0;
    const api_field *f = openai_shape_fields((enum openai_shape)s, &n);
    char param[256];
    int rc = api_json_check_fields(v, f, n, param, sizeof param);
    if (rc == 0) continue;
    if (rc != ERR_TYPE && rc != ERR_RANGE) abort();
    size_t pl = strlen(param);
    if (!pl || strncmp(err_detail(), param, pl) != 0 || err_detail()[pl] != ':') abort();
  }
  json_decref(v);
  return 0;
}
