/*
 * schema_validate.h - a small JSON Schema validator for the keywords that
 * json_schema.c supports, written from the JSON Schema spec for the tests
 * (PCRE2 for `pattern`, a calendar check for `date`): independent evidence
 * that a generated document validates. Shared by test_json_schema.c (random
 * walks) and test_constrain.c (the engine under a grammar).
 */
#ifndef PARLEY_TEST_SCHEMA_VALIDATE_H
#define PARLEY_TEST_SCHEMA_VALIDATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* True when v validates against schema s; root resolves "$ref". */
bool schema_validate(const json_t *v, const json_t *s, const json_t *root);
/* The `format` check alone (date, time, date-time, uuid) on s[0..n). */
bool schema_valid_format(const char *format, const char *s, size_t n);

#endif
