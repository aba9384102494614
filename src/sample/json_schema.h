/*
 * json_schema.h - JSON schema -> GBNF grammar, for constrained JSON output
 * (response_format json_object / json_schema, Ollama `format`, forced tool
 * call arguments).
 *
 * The grammar accepts a subset of the documents the schema accepts (it is
 * stricter where noted), so every complete output validates. Supported:
 *   type (object, array, string, number, integer, boolean, null, and arrays
 *   of types), properties (emitted in declared order), required (optional
 *   properties may be left out), additionalProperties (false, true or a
 *   schema; ABSENT MEANS FALSE: no keys beyond `properties` are generated,
 *   except that an object schema without `properties` accepts any keys),
 *   enum, const, anyOf, oneOf (treated as anyOf), allOf with one element,
 *   items, minItems, maxItems, minLength, maxLength, pattern (a regex subset:
 *   literals, ., [classes], \d \w \s \D \W \S, groups, |, * + ? {m} {m,}
 *   {m,n}, ^ and $ at the ends; unanchored patterns may have any text around
 *   them), format date, time, date-time, uuid, $ref to "#", "#/$defs/...",
 *   "#/definitions/..." (any JSON pointer into the document, recursion
 *   allowed), $defs / definitions, the boolean schema true, and for
 *   integer/number: minimum, maximum, exclusiveMinimum, exclusiveMaximum
 *   (draft 6+ numbers or draft 4 booleans; digit-range alternations; bounds
 *   that are not integers round inwards, and a number's fraction is only
 *   allowed strictly inside the integer bounds: a subset, never more) and
 *   multipleOf (integers up to 1000 by a residue automaton, not combined
 *   with bounds; 0.1, 0.01, ... as a cap on decimals). Annotations
 *   are ignored: title, description, default, examples, $schema, $id,
 *   $comment, readOnly, writeOnly, deprecated.
 * Anything else (prefixItems, uniqueItems,
 * not, if/then/else, patternProperties, other formats, ...) gives
 * ERR_UNSUPPORTED with the JSON pointer of the keyword in the detail, e.g.
 * "json schema /properties/age/minimum: keyword not supported".
 *
 * Output shape, documented because it bounds what a model can emit:
 *   - whitespace between tokens is one of: up to 4 spaces/tabs, or one
 *     newline followed by up to 40 spaces/tabs; also before and after the
 *     whole document;
 *   - numbers: at most 18 integer digits (so every integer fits int64), 20
 *     fraction digits and 2 exponent digits;
 *   - strings: \uXXXX escapes must be valid (no lone surrogates), a
 *     string's length counts an escape or a surrogate pair as one character;
 *   - format date: days per month are checked but February stops at 28
 *     (no leap-year arithmetic in a grammar); time needs a zone (Z or
 *     +hh:mm) and has no leap second;
 *   - with additionalProperties true/schema (and declared properties),
 *     extra members come after the declared ones, their keys are written
 *     without escapes and never equal a declared name (extras may repeat
 *     each other);
 *   - enum/const values are matched in jansson's compact serialization
 *     (no whitespace inside, non-ASCII raw, not \u-escaped).
 */
#ifndef PARLEY_SAMPLE_JSON_SCHEMA_H
#define PARLEY_SAMPLE_JSON_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

#include "sample/grammar.h"

/* GBNF text for the schema (NULL: any JSON object, the json_object mode;
 * the schema `true` or {}: any JSON value).
 * The start rule is "root". *out is malloc'ed, NUL-terminated; the caller
 * frees it. Errors: ERR_UNSUPPORTED, ERR_INVALID (malformed schema: wrong
 * keyword types, unresolvable $ref), ERR_TOO_LARGE (nesting deeper than 64,
 * counts above GRAMMAR_MAX_REPEAT), ERR_NOMEM; the detail names the JSON
 * pointer of the offending keyword. */
int json_schema_to_gbnf(const json_t *schema, char **out, size_t *len_out);

/* json_schema_to_gbnf() then grammar_parse(). */
int json_schema_grammar(const json_t *schema, grammar **out);

#endif
