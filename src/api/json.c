/*
 * json.c - request-body parsing and typed field access that names the JSON
 * path of whatever is wrong ("messages[2].content: expected string, got
 * number"), so every adapter reports bad input the same way.
 */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "base/err.h"

/* Bodies nest at most this deep; deeper input is refused before it can
 * exhaust the stack of whoever walks it. */
#define API_JSON_MAX_DEPTH 128

const char *api_json_type_name(const json_t *v) {
  if (!v) return "nothing";
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: case JSON_REAL: return "number";
    case JSON_TRUE: case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
  }
  return "unknown";
}

static int depth_of(const json_t *v, int depth) {
  if (depth > API_JSON_MAX_DEPTH) return depth;
  int max = depth;
  if (json_is_object(v)) {
    const char *k;
    json_t *c;
    json_object_foreach((json_t *)v, k, c) {
      int d = depth_of(c, depth + 1);
      if (d > max) max = d;
      if (max > API_JSON_MAX_DEPTH) break;
    }
  } else if (json_is_array(v)) {
    size_t i;
    json_t *c;
    json_array_foreach(v, i, c) {
      int d = depth_of(c, depth + 1);
      if (d > max) max = d;
      if (max > API_JSON_MAX_DEPTH) break;
    }
  }
  return max;
}

int api_json_decode_object(const char *body, size_t len, json_t **out) {
  *out = NULL;
  if (!body || len == 0) return err_set(ERR_PARSE, "request body is empty: expected a JSON object");
  json_error_t jerr;
  /* JSON_ALLOW_NUL keeps "\u0000" from being a parse error; strings holding
   * it are refused where they are read (api_json_str). */
  json_t *v = json_loadb(body, len, JSON_ALLOW_NUL, &jerr);
  if (!v)
    return err_set(ERR_PARSE, "invalid JSON in request body at line %d column %d: %s", jerr.line, jerr.column,
                   jerr.text);
  if (!json_is_object(v)) {
    int rc = err_set(ERR_TYPE, "request body must be a JSON object, got %s", api_json_type_name(v));
    json_decref(v);
    return rc;
  }
  if (depth_of(v, 0) > API_JSON_MAX_DEPTH) {
    json_decref(v);
    return err_set(ERR_TOO_LARGE, "request body nests deeper than %d levels", API_JSON_MAX_DEPTH);
  }
  *out = v;
  return 0;
}

json_t *api_parse_body(http_req *req) {
  size_t len = 0;
  const char *body = http_req_body(req, &len);
  json_t *v = NULL;
  int rc = api_json_decode_object(body, len, &v);
  if (rc) {
    api_error(req, 400, rc, err_detail(), NULL);
    return NULL;
  }
  return v;
}

static void join_path(char *out, size_t cap, const char *path, const char *key) {
  if (path && *path) snprintf(out, cap, "%s.%s", path, key);
  else snprintf(out, cap, "%s", key);
}

/* Shared lookup: absent/null handling and the "expected X, got Y" message. */
static int field(const json_t *obj, const char *path, const char *key, bool required, const char *want,
                 int (*ok)(const json_t *), const json_t **out) {
  const json_t *v = json_object_get(obj, key);
  char full[256];
  join_path(full, sizeof full, path, key);
  if (!v || json_is_null(v)) {
    if (required) return err_set(ERR_INVALID, "%s: required field is missing", full);
    return ERR_NOT_FOUND;
  }
  if (!ok(v)) return err_set(ERR_TYPE, "%s: expected %s, got %s", full, want, api_json_type_name(v));
  *out = v;
  return 0;
}

static int is_str(const json_t *v) { return json_is_string(v); }
static int is_int(const json_t *v) { return json_is_integer(v); }
static int is_num(const json_t *v) { return json_is_number(v); }
static int is_bool(const json_t *v) { return json_is_boolean(v); }

int api_json_str(const json_t *obj, const char *path, const char *key, bool required, const char **out) {
  const json_t *v;
  int rc = field(obj, path, key, required, "string", is_str, &v);
  if (rc) return rc;
  if (strlen(json_string_value(v)) != json_string_length(v)) {
    char full[256];
    join_path(full, sizeof full, path, key);
    return err_set(ERR_INVALID, "%s: string contains a NUL character", full);
  }
  *out = json_string_value(v);
  return 0;
}

int api_json_text(const json_t *obj, const char *path, const char *key, bool required, const char **out,
                  size_t *len) {
  const json_t *v;
  int rc = field(obj, path, key, required, "string", is_str, &v);
  if (rc) return rc;
  *out = json_string_value(v);
  *len = json_string_length(v);
  return 0;
}

int api_json_int(const json_t *obj, const char *path, const char *key, bool required, long long *out) {
  const json_t *v;
  int rc = field(obj, path, key, required, "integer", is_int, &v);
  if (rc) return rc;
  *out = json_integer_value(v);
  return 0;
}

int api_json_num(const json_t *obj, const char *path, const char *key, bool required, double *out) {
  const json_t *v;
  int rc = field(obj, path, key, required, "number", is_num, &v);
  if (rc) return rc;
  *out = json_number_value(v);
  return 0;
}

int api_json_bool(const json_t *obj, const char *path, const char *key, bool required, bool *out) {
  const json_t *v;
  int rc = field(obj, path, key, required, "boolean", is_bool, &v);
  if (rc) return rc;
  *out = json_is_true(v);
  return 0;
}
