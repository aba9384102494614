/*
 * tmpl_json.c - converts a jansson json_t into template values: objects
 * become insertion-ordered dicts, arrays lists, integers int64, reals
 * doubles. This is the template module's one JSON touch point, used by the
 * CLI (parley chat-template) and the tests; the interpreter itself never
 * sees JSON.
 */
#include <jansson.h>

#include "base/err.h"
#include "tmpl/tmpl_internal.h"

#define MAX_DEPTH 256

static int conv(tmpl_heap *h, const json_t *j, tmpl_value *out, int depth) {
  if (depth > MAX_DEPTH) return err_set(ERR_TOO_LARGE, "template: JSON nested deeper than %d levels", MAX_DEPTH);
  int rc;
  switch (json_typeof(j)) {
  case JSON_NULL: *out = tmpl_none(); return 0;
  case JSON_TRUE: *out = tmpl_bool(true); return 0;
  case JSON_FALSE: *out = tmpl_bool(false); return 0;
  case JSON_INTEGER: *out = tmpl_int((int64_t)json_integer_value(j)); return 0;
  case JSON_REAL: *out = tmpl_float(json_real_value(j)); return 0;
  case JSON_STRING: return tmpl_string(h, json_string_value(j), json_string_length(j), out);
  case JSON_ARRAY: {
    if ((rc = tmpl_list_new(h, out))) return rc;
    size_t i;
    json_t *v;
    json_array_foreach(j, i, v) {
      tmpl_value x;
      if ((rc = conv(h, v, &x, depth + 1)) || (rc = tmpl_list_push(h, *out, x))) return rc;
    }
    return 0;
  }
  case JSON_OBJECT: {
    if ((rc = tmpl_dict_new(h, out))) return rc;
    const char *k;
    size_t klen;
    json_t *v;
    void *tmp;
    json_object_keylen_foreach_safe((json_t *)j, tmp, k, klen, v) {
      tmpl_value key, x;
      if ((rc = tmpl_string(h, k, klen, &key)) || (rc = conv(h, v, &x, depth + 1)) ||
          (rc = tmpl_dict_set(h, *out, key, x)))
        return rc;
    }
    return 0;
  }
  }
  return err_set(ERR_INVALID, "template: unknown JSON type");
}

int tmpl_from_json(tmpl_heap *h, const void *json, tmpl_value *out) {
  *out = tmpl_undefined();
  if (!json) return err_set(ERR_INVALID, "template: NULL JSON value");
  return conv(h, (const json_t *)json, out, 0);
}
