/*
 * json.c - request-body parsing and typed field access that names the JSON
 * path of whatever is wrong ("messages[2].content: expected string, got
 * number"), so every adapter reports bad input the same way.
 */
#include <stdbool.h>
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

/* ---- field-type tables ----------------------------------------------------- */

static bool type_ok(const json_t *v, unsigned types) {
  switch (json_typeof(v)) {
    case JSON_STRING: return types & API_T_STRING;
    case JSON_INTEGER: return types & (API_T_INT | API_T_NUMBER);
    case JSON_REAL: return types & API_T_NUMBER;
    case JSON_TRUE: case JSON_FALSE: return types & API_T_BOOL;
    case JSON_OBJECT: return types & API_T_OBJECT;
    case JSON_ARRAY: return types & API_T_ARRAY;
    case JSON_NULL: return types & API_T_NULL;
  }
  return false;
}

/* "string or null" from a type mask. */
static void types_words(unsigned types, char *out, size_t cap) {
  static const struct { unsigned bit; const char *word; } W[] = {
      {API_T_STRING, "string"}, {API_T_INT, "integer"}, {API_T_NUMBER, "number"}, {API_T_BOOL, "boolean"},
      {API_T_OBJECT, "object"}, {API_T_ARRAY, "array"},  {API_T_NULL, "null"},
  };
  size_t k = 0;
  out[0] = 0;
  for (size_t i = 0; i < sizeof W / sizeof W[0]; i++) {
    if (!(types & W[i].bit)) continue;
    if (W[i].bit == API_T_INT && (types & API_T_NUMBER)) continue;
    int w = snprintf(out + k, cap - k, "%s%s", k ? " or " : "", W[i].word);
    if (w < 0 || (size_t)w >= cap - k) break;
    k += (size_t)w;
  }
}

/* Walks the rest of a table path (rest) from v, whose concrete path is at. */
static int check_walk(const json_t *v, const char *rest, const api_field *f, char *at, size_t cap) {
  size_t len = strlen(at);
  if (!*rest) {
    if (!type_ok(v, f->types)) {
      char want[96];
      types_words(f->types, want, sizeof want);
      return err_set(ERR_TYPE, "%s: expected %s, got %s", at, want, api_json_type_name(v));
    }
    if (f->lo < f->hi && json_is_number(v)) {
      double d = json_number_value(v);
      if (!(d >= f->lo && d <= f->hi))
        return err_set(ERR_RANGE, "%s: %g is out of range (expected %g to %g)", at, d, f->lo, f->hi);
    }
    return 0;
  }
  const char *dot = strchr(rest, '.');
  size_t seg = dot ? (size_t)(dot - rest) : strlen(rest);
  const char *next = dot ? dot + 1 : "";
  bool each = seg >= 2 && rest[seg - 2] == '[' && rest[seg - 1] == ']';
  size_t name_len = each ? seg - 2 : seg;
  int rc = 0;
  if (name_len == 1 && rest[0] == '*') { /* every member of an object */
    const char *key;
    json_t *c;
    if (!json_is_object(v)) return 0;
    json_object_foreach((json_t *)v, key, c) {
      snprintf(at + len, cap - len, "%s%.64s", len ? "." : "", key);
      if ((rc = check_walk(c, next, f, at, cap))) return rc;
    }
    at[len] = 0;
    return 0;
  }
  if (!json_is_object(v)) return 0; /* the parent's own row types it */
  char name[64];
  if (name_len >= sizeof name) return 0;
  memcpy(name, rest, name_len);
  name[name_len] = 0;
  const json_t *c = json_object_get(v, name);
  if (!c) return 0;
  snprintf(at + len, cap - len, "%s%s", len ? "." : "", name);
  if (each) {
    if (!json_is_array(c)) { at[len] = 0; return 0; }
    size_t len2 = strlen(at), i;
    json_t *e;
    json_array_foreach(c, i, e) {
      snprintf(at + len2, cap - len2, "[%zu]", i);
      if ((rc = check_walk(e, next, f, at, cap))) return rc;
    }
  } else if ((rc = check_walk(c, next, f, at, cap))) {
    return rc;
  }
  at[len] = 0;
  return 0;
}

int api_json_check_fields(const json_t *body, const api_field *fields, size_t n, char *param, size_t cap) {
  char at[256];
  for (size_t i = 0; i < n; i++) {
    at[0] = 0;
    int rc = check_walk(body, fields[i].path, &fields[i], at, sizeof at);
    if (rc) {
      if (param && cap) snprintf(param, cap, "%s", at);
      return rc;
    }
  }
  if (param && cap) param[0] = 0;
  return 0;
}

int api_check_fields(http_req *req, const json_t *body, const api_field *fields, size_t n) {
  char param[256];
  int rc = api_json_check_fields(body, fields, n, param, sizeof param);
  if (rc) api_error(req, 400, rc, err_detail(), param);
  return rc;
}
