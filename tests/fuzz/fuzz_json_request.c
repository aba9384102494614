/*
 * fuzz_json_request.c - libFuzzer harness for JSON request decoding: the
 * body decoder every adapter uses (api_json_decode_object) and the typed
 * field readers on whatever object it accepts. Any input must give 0 or a
 * clean error code, never a crash or a leak.
 */
#include "fuzz.h"
#include <stddef.h>
#include <stdint.h>

#include "api/api.h"


FUZZ_TARGET(json_request) {
  json_t *v = NULL;
  if (api_json_decode_object((const char *)data, size, &v) != 0) return 0;
  const char *s;
  long long n;
  double d;
  bool b;
  const char *key;
  json_t *val;
  json_object_foreach(v, key, val) {
    (void)val;
    api_json_str(v, "", key, false, &s);
    api_json_int(v, "x[0]", key, true, &n);
    api_json_num(v, "", key, false, &d);
    api_json_bool(v, "", key, false, &b);
  }
  json_decref(v);
  return 0;
}
