/*
 * tmpl_json.c - converts a jansson json_t into template values: objects
 * become insertion-ordered dicts, arrays lists, integers int64, reals
 * doubles. This is the template module's one JSON touch point, used by the
 * CLI (parley chat-template) and the tests; the interpreter itself never
 * sees JSON. tmpl_globals_from_request builds the render globals from a chat
 * request body the way transformers does, so that every caller agrees.
 */
#include <string.h>

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

static int set_str(tmpl_heap *h, tmpl_value d, const char *key, const char *val) {
  tmpl_value v;
  int rc = tmpl_string(h, val, strlen(val), &v);
  return rc ? rc : tmpl_dict_set_str(h, d, key, v);
}

int tmpl_globals_from_request(tmpl_heap *h, const void *request, const char *bos_token,
                              const char *eos_token, tmpl_value *out) {
  const json_t *req = request;
  *out = tmpl_undefined();
  if (!json_is_object(req)) return err_set(ERR_INVALID, "chat request must be a JSON object");
  const json_t *msgs = json_object_get(req, "messages"), *tools = json_object_get(req, "tools");
  const json_t *agp = json_object_get(req, "add_generation_prompt"), *kw = json_object_get(req, "chat_template_kwargs");
  if (!json_is_array(msgs)) return err_set(ERR_INVALID, "messages must be an array");
  if (tools && !json_is_array(tools) && !json_is_null(tools)) return err_set(ERR_INVALID, "tools must be an array");
  if (agp && !json_is_boolean(agp) && !json_is_null(agp)) return err_set(ERR_INVALID, "add_generation_prompt must be a boolean");
  if (kw && !json_is_object(kw) && !json_is_null(kw)) return err_set(ERR_INVALID, "chat_template_kwargs must be an object");
  tmpl_value g, v;
  int rc = tmpl_dict_new(h, &g);
  if (!rc) rc = tmpl_from_json(h, msgs, &v);
  if (!rc) rc = tmpl_dict_set_str(h, g, "messages", v);
  v = tmpl_none();
  if (!rc && json_is_array(tools)) rc = tmpl_from_json(h, tools, &v);
  if (!rc) rc = tmpl_dict_set_str(h, g, "tools", v);
  if (!rc) rc = tmpl_dict_set_str(h, g, "documents", tmpl_none());
  if (!rc) rc = tmpl_dict_set_str(h, g, "add_generation_prompt", tmpl_bool(json_is_true(agp)));
  if (!rc && bos_token) rc = set_str(h, g, "bos_token", bos_token);
  if (!rc && eos_token) rc = set_str(h, g, "eos_token", eos_token);
  if (!rc && json_is_object(kw)) {
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)kw, k, x) {
      if ((rc = tmpl_from_json(h, x, &v)) || (rc = tmpl_dict_set_str(h, g, k, v))) break;
    }
  }
  if (!rc) *out = g;
  return rc;
}
