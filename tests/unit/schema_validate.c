/*
 * schema_validate.c - the tests' JSON Schema validator (see
 * schema_validate.h). Plain recursion over the schema keywords json_schema.c
 * supports; anything else is ignored (the generator refuses it anyway).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "schema_validate.h"

#include <pcre2.h>
#include <stdio.h>
#include <string.h>


static size_t utf8_count(const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
  return k;
}

static bool re_search(const char *pat, const char *s, size_t n) {
  int errc;
  PCRE2_SIZE erroff;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &errc, &erroff, NULL);
  if (!re) return false;
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
  int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
  pcre2_match_data_free(md);
  pcre2_code_free(re);
  return rc >= 0;
}

static bool valid_date(const char *s) {
  int y, m, d;
  char tail;
  if (strlen(s) < 10 || sscanf(s, "%4d-%2d-%2d%c", &y, &m, &d, &tail) < 3) return false;
  if (!re_search("^[0-9]{4}-[0-9]{2}-[0-9]{2}", s, strlen(s))) return false;
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1]) return false;
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return !(m == 2 && d == 29 && !leap);
}

bool schema_valid_format(const char *f, const char *s, size_t n) {
  static const char TIME[] = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$";
  if (strcmp(f, "uuid") == 0)
    return re_search("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", s, n);
  if (strcmp(f, "date") == 0) return n == 10 && valid_date(s);
  char pat[256];
  if (strcmp(f, "time") == 0) {
    snprintf(pat, sizeof pat, "^%s", TIME);
    return re_search(pat, s, n);
  }
  if (strcmp(f, "date-time") == 0) {
    snprintf(pat, sizeof pat, "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt]%s", TIME);
    return n > 11 && valid_date(s) && re_search(pat, s, n);
  }
  return false;
}

static const json_t *resolve(const json_t *root, const char *ref) {
  if (strcmp(ref, "#") == 0) return root;
  const char *p = ref + 1;
  const json_t *t = root;
  char seg[128];
  while (*p == '/' && t) {
    p++;
    size_t n = strcspn(p, "/");
    if (n >= sizeof seg) return NULL;
    memcpy(seg, p, n);
    seg[n] = '\0';
    p += n;
    t = json_object_get(t, seg);
  }
  return t;
}

static bool type_ok(const json_t *v, const char *t) {
  if (strcmp(t, "object") == 0) return json_is_object(v);
  if (strcmp(t, "array") == 0) return json_is_array(v);
  if (strcmp(t, "string") == 0) return json_is_string(v);
  if (strcmp(t, "number") == 0) return json_is_number(v);
  if (strcmp(t, "integer") == 0) return json_is_integer(v);
  if (strcmp(t, "boolean") == 0) return json_is_boolean(v);
  if (strcmp(t, "null") == 0) return json_is_null(v);
  return false;
}

bool schema_validate(const json_t *v, const json_t *s, const json_t *root) {
  if (json_is_true(s)) return true;
  if (!json_is_object(s)) return false;
  const json_t *k;
  if ((k = json_object_get(s, "$ref"))) return schema_validate(v, resolve(root, json_string_value(k)), root);
  if ((k = json_object_get(s, "const")) && !json_equal(v, k)) return false;
  if ((k = json_object_get(s, "enum"))) {
    bool any = false;
    for (size_t i = 0; i < json_array_size(k); i++) any |= json_equal(v, json_array_get(k, i));
    if (!any) return false;
  }
  if ((k = json_object_get(s, "anyOf"))) {
    bool any = false;
    for (size_t i = 0; i < json_array_size(k); i++) any |= schema_validate(v, json_array_get(k, i), root);
    if (!any) return false;
  }
  if ((k = json_object_get(s, "oneOf"))) {
    int n = 0;
    for (size_t i = 0; i < json_array_size(k); i++) n += schema_validate(v, json_array_get(k, i), root);
    if (n != 1) return false;
  }
  if ((k = json_object_get(s, "type"))) {
    bool ok = false;
    if (json_is_string(k)) ok = type_ok(v, json_string_value(k));
    for (size_t i = 0; i < json_array_size(k); i++) ok |= type_ok(v, json_string_value(json_array_get(k, i)));
    if (!ok) return false;
  }
  if (json_is_object(v)) {
    const json_t *props = json_object_get(s, "properties"), *addl = json_object_get(s, "additionalProperties");
    const json_t *req = json_object_get(s, "required");
    for (size_t i = 0; i < json_array_size(req); i++)
      if (!json_object_get(v, json_string_value(json_array_get(req, i)))) return false;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
      const json_t *ps = props ? json_object_get(props, key) : NULL;
      if (ps) {
        if (!schema_validate(val, ps, root)) return false;
      } else if (json_is_false(addl)) {
        return false;
      } else if (addl && json_is_object(addl) && !schema_validate(val, addl, root)) {
        return false;
      }
    }
  }
  if (json_is_array(v)) {
    const json_t *items = json_object_get(s, "items");
    const json_t *mn = json_object_get(s, "minItems"), *mx = json_object_get(s, "maxItems");
    if (mn && json_array_size(v) < (size_t)json_integer_value(mn)) return false;
    if (mx && json_array_size(v) > (size_t)json_integer_value(mx)) return false;
    for (size_t i = 0; items && i < json_array_size(v); i++)
      if (!schema_validate(json_array_get(v, i), items, root)) return false;
  }
  if (json_is_number(v)) { /* numeric bounds, draft 6+ numbers and draft 4 booleans */
    double x = json_number_value(v);
    const json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
    const json_t *emn = json_object_get(s, "exclusiveMinimum"), *emx = json_object_get(s, "exclusiveMaximum");
    if (json_is_number(mn) && (json_is_true(emn) ? x <= json_number_value(mn) : x < json_number_value(mn))) return false;
    if (json_is_number(mx) && (json_is_true(emx) ? x >= json_number_value(mx) : x > json_number_value(mx))) return false;
    if (json_is_number(emn) && x <= json_number_value(emn)) return false;
    if (json_is_number(emx) && x >= json_number_value(emx)) return false;
  }
  if (json_is_string(v)) {
    const char *str = json_string_value(v);
    size_t n = json_string_length(v), cps = utf8_count(str, n);
    const json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
    if (mn && cps < (size_t)json_integer_value(mn)) return false;
    if (mx && cps > (size_t)json_integer_value(mx)) return false;
    if ((k = json_object_get(s, "pattern")) && !re_search(json_string_value(k), str, n)) return false;
    if ((k = json_object_get(s, "format")) && !schema_valid_format(json_string_value(k), str, n)) return false;
  }
  return true;
}

