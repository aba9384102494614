/*
 * test_json_schema.c - JSON schema -> grammar.
 *
 * Three kinds of evidence: hand-written documents a schema accepts or
 * rejects (validity decided by hand from the JSON Schema spec); errors for
 * unsupported keywords naming the JSON pointer; and random walks: from the
 * start state, repeatedly pick a random allowed token of a small vocabulary
 * (via grammar_mask) until the grammar can end, then parse the text with
 * jansson and check it against the schema with the small validator in
 * schema_validate.c (PCRE2 for `pattern`, a calendar check for `date`), 100 seeds per
 * schema.
 */
#include <jansson.h>
#include <stdlib.h>

#include "base/buf.h"
#include "base/err.h"
#include "sample/json_schema.h"
#include "schema_validate.h"
#include "base/util.h"
#include "test.h"

static grammar *js_compile(const char *schema_text) {
  json_error_t je;
  json_t *s = json_loads(schema_text, 0, &je);
  if (!s) {
    fprintf(stderr, "bad test schema: %s\n", je.text);
    return NULL;
  }
  grammar *g = NULL;
  if (json_schema_grammar(s, &g)) fprintf(stderr, "json_schema_grammar: %s\n", err_detail());
  json_decref(s);
  return g;
}

static int js_rc(const char *schema_text) {
  json_t *s = json_loads(schema_text, JSON_DECODE_ANY, NULL);
  if (!s) return 12345;
  grammar *g = NULL;
  int rc = json_schema_grammar(s, &g);
  grammar_free(g);
  json_decref(s);
  return rc;
}

/* 1 complete, 0 valid prefix, -1 rejected */
static int doc(const grammar *g, const char *text) {
  grammar_state *s;
  if (grammar_state_new(g, &s)) return -2;
  int r = grammar_accept_bytes(s, text, strlen(text)) ? -1 : grammar_can_end(s) ? 1 : 0;
  grammar_state_free(s);
  return r;
}

TEST(json_schema_object_mode) {
  grammar *g = NULL;
  ASSERT_INT_EQ(json_schema_grammar(NULL, &g), 0);
  EXPECT_INT_EQ(doc(g, "{}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"a\": [1, 2.5e-3, -0, true, null, \"x\\u00e9\\ud83d\\ude00\"], \"b\": {}}"), 1);
  EXPECT_INT_EQ(doc(g, "{\n  \"a\": {\n    \"b\": []\n  }\n}\n"), 1);
  EXPECT_INT_EQ(doc(g, "[1]"), -1);
  EXPECT_INT_EQ(doc(g, "\"x\""), -1);
  EXPECT_INT_EQ(doc(g, "{\"a\": 01}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"a\": 1,}"), -1);
  EXPECT_INT_EQ(doc(g, "{'a': 1}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"a\": \"\\ud800\"}"), -1); /* lone surrogate */
  EXPECT_INT_EQ(doc(g, "{\"a\": \"\\x\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"a\": \"tab\there\"}"), -1); /* raw control character */
  EXPECT_INT_EQ(doc(g, "{\"a\": 1"), 0);
  /* whitespace is bounded: 5 spaces in a row are not allowed, newline+40 are */
  EXPECT_INT_EQ(doc(g, "{     }"), -1);
  EXPECT_INT_EQ(doc(g, "{\n                                        }"), 1);
  EXPECT_INT_EQ(doc(g, "{\n\n}"), -1);
  grammar_free(g);
}

static const char S_PERSON[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":8},"
    "\"age\":{\"type\":\"integer\"},"
    "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":3},"
    "\"active\":{\"type\":\"boolean\"}},"
    "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}";

TEST(json_schema_properties_required_order) {
  grammar *g = js_compile(S_PERSON);
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(doc(g, "{\"name\":\"Al\",\"age\":3}"), 1);
  EXPECT_INT_EQ(doc(g, "{ \"name\": \"\\u00e9\\\"\", \"age\": -12, \"active\": false }"), 1);
  EXPECT_INT_EQ(doc(g, "{\"name\":\"Al\",\"age\":3,\"id\":\"123e4567-e89b-12d3-a456-426614174000\","
                       "\"tags\":[\"a\",\"b\",\"c\"],\"active\":true}"),
                1);
  EXPECT_INT_EQ(doc(g, "{\"name\":\"Al\",\"age\":3,\"tags\":[]}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"name\":\"Al\"}"), -1);                  /* age required */
  EXPECT_INT_EQ(doc(g, "{\"age\":3,\"name\":\"Al\"}"), -1);         /* declared order */
  EXPECT_INT_EQ(doc(g, "{\"name\":\"\",\"age\":3}"), -1);           /* minLength 1 */
  EXPECT_INT_EQ(doc(g, "{\"name\":\"123456789\",\"age\":3}"), -1);  /* maxLength 8 */
  EXPECT_INT_EQ(doc(g, "{\"name\":\"12345678\",\"age\":3}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"name\":\"Al\",\"age\":3.5}"), -1);       /* integer */
  EXPECT_INT_EQ(doc(g, "{\"name\":\"Al\",\"age\":3,\"x\":1}"), -1); /* no extras */
  EXPECT_INT_EQ(doc(g, "{\"name\":\"Al\",\"age\":3,\"tags\":[\"a\",\"b\",\"c\",\"d\"]}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"name\":\"Al\",\"age\":3,\"id\":\"123e4567-e89b-12d3-a456\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"name\":\"Al\",\"age\":3,\"active\":\"yes\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"name\":\"Al\",,\"age\":3}"), -1);
  grammar_free(g);
  /* all optional: any subset in order, commas right */
  g = js_compile("{\"properties\":{\"a\":{\"type\":\"null\"},\"b\":{\"type\":\"null\"},"
                 "\"c\":{\"type\":\"null\"}}}");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(doc(g, "{}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"b\":null}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"a\":null,\"c\":null}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"a\":null,\"b\":null,\"c\":null}"), 1);
  EXPECT_INT_EQ(doc(g, "{,\"b\":null}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"b\":null,}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"c\":null,\"a\":null}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"d\":null}"), -1); /* additionalProperties absent: no extras */
  grammar_free(g);
  /* additionalProperties true: extras after the declared ones */
  g = js_compile("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
                 "\"additionalProperties\":true}");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(doc(g, "{\"a\":1,\"zz\":[{}],\"y\":\"q\"}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"zz\":[{}]}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"a\":\"1\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"a\":1,\"a\":2}"), -1);  /* an extra may not repeat a declared key */
  EXPECT_INT_EQ(doc(g, "{\"ab\":1,\"\":2}"), 1);    /* keys that merely start like one are fine */
  EXPECT_INT_EQ(doc(g, "{\"\\u0061\":2}"), -1);     /* extra keys are written without escapes */
  grammar_free(g);
}

TEST(json_schema_enum_const_anyof_types) {
  grammar *g = js_compile(
      "{\"type\":\"object\",\"properties\":{"
      "\"kind\":{\"enum\":[\"a\",\"b\\\"c\",1,null,{\"x\":[1,2]}]},"
      "\"v\":{\"const\":\"fixed\"},"
      "\"u\":{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"null\"}]},"
      "\"t\":{\"type\":[\"string\",\"null\"]}},"
      "\"required\":[\"kind\",\"v\",\"u\"]}");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(doc(g, "{\"kind\":\"a\",\"v\":\"fixed\",\"u\":1.5}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"kind\":\"b\\\"c\",\"v\":\"fixed\",\"u\":null,\"t\":\"s\"}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"kind\":{\"x\":[1,2]},\"v\":\"fixed\",\"u\":-2e10,\"t\":null}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"kind\":1,\"v\":\"fixed\",\"u\":0}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"kind\":2,\"v\":\"fixed\",\"u\":0}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"kind\":\"c\",\"v\":\"fixed\",\"u\":0}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"kind\":1,\"v\":\"other\",\"u\":0}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"kind\":1,\"v\":\"fixed\",\"u\":\"0\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"kind\":1,\"v\":\"fixed\",\"u\":0,\"t\":3}"), -1);
  grammar_free(g);
}

TEST(json_schema_arrays_refs_patterns_formats) {
  grammar *g = js_compile("{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":2,\"maxItems\":3}");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(doc(g, "[1,2]"), 1);
  EXPECT_INT_EQ(doc(g, "[ 1 , 2 , 3 ]"), 1);
  EXPECT_INT_EQ(doc(g, "[1"), 0);
  EXPECT_INT_EQ(doc(g, "[1]"), -1);
  EXPECT_INT_EQ(doc(g, "[1,2,3,4]"), -1);
  EXPECT_INT_EQ(doc(g, "[]"), -1);
  grammar_free(g);
  g = js_compile("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{"
                 "\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},"
                 "\"required\":[\"v\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(doc(g, "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[{\"v\":4,\"kids\":[]}]}]}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"v\":1,\"kids\":[{\"w\":2}]}"), -1);
  grammar_free(g);
  g = js_compile("{\"type\":\"object\",\"properties\":{"
                 "\"code\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"},"
                 "\"free\":{\"type\":\"string\",\"pattern\":\"ab+c\"},"
                 "\"q\":{\"type\":\"string\",\"pattern\":\"^(x|y\\\"z|[\\\\\\\\.])*$\"},"
                 "\"d\":{\"type\":\"string\",\"format\":\"date\"},"
                 "\"t\":{\"type\":\"string\",\"format\":\"time\"},"
                 "\"dt\":{\"type\":\"string\",\"format\":\"date-time\"}}}");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(doc(g, "{\"code\":\"AB-123\"}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"code\":\"AB-12\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"code\":\"ab-123\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"free\":\"xxabbbcyy\"}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"free\":\"abc\"}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"free\":\"ac\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"q\":\"xy\\\"z\\\\.x\"}"), 1); /* x, y"z, \, ., x */
  EXPECT_INT_EQ(doc(g, "{\"q\":\"xyz\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"d\":\"2024-12-31\"}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"d\":\"2024-11-31\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"d\":\"2024-13-01\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"t\":\"23:59:59.5Z\"}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"t\":\"24:00:00Z\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"t\":\"10:00:00"), 0);       /* zone still missing */
  EXPECT_INT_EQ(doc(g, "{\"t\":\"10:00:00\"}"), -1);
  EXPECT_INT_EQ(doc(g, "{\"dt\":\"2024-02-28T10:00:00+05:30\"}"), 1);
  EXPECT_INT_EQ(doc(g, "{\"dt\":\"2024-02-30T10:00:00Z\"}"), -1);
  grammar_free(g);
}

TEST(json_schema_errors_name_the_keyword) {
  EXPECT_INT_EQ(js_rc("{\"type\":\"object\",\"properties\":{\"age\":{\"type\":\"string\",\"minimum\":0}}}"),
                ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "/properties/age/minimum");
  EXPECT_INT_EQ(js_rc("{\"type\":\"number\",\"minimum\":0.2,\"maximum\":0.8}"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "minimum");
  EXPECT_INT_EQ(js_rc("{\"type\":\"integer\",\"multipleOf\":7,\"maximum\":9}"), ERR_UNSUPPORTED);
  EXPECT_INT_EQ(js_rc("{\"type\":\"integer\",\"multipleOf\":0}"), ERR_INVALID);
  EXPECT_INT_EQ(js_rc("{\"type\":\"number\",\"multipleOf\":0.3}"), ERR_UNSUPPORTED);
  EXPECT_INT_EQ(js_rc("{\"type\":\"array\",\"prefixItems\":[]}"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "/prefixItems");
  EXPECT_INT_EQ(js_rc("{\"type\":\"string\",\"format\":\"email\"}"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "/format");
  EXPECT_INT_EQ(js_rc("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "pattern");
  EXPECT_INT_EQ(js_rc("{\"type\":\"string\",\"pattern\":\"a(?=b)\"}"), ERR_UNSUPPORTED);
  EXPECT_INT_EQ(js_rc("{\"$ref\":\"#/$defs/missing\"}"), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "#/$defs/missing");
  EXPECT_INT_EQ(js_rc("{\"$ref\":\"http://x/y\"}"), ERR_UNSUPPORTED);
  EXPECT_INT_EQ(js_rc("{\"type\":\"strin\"}"), ERR_INVALID);
  EXPECT_INT_EQ(js_rc("{\"anyOf\":[{\"type\":\"null\"},{\"not\":{}}]}"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "/anyOf/1/not");
  EXPECT_INT_EQ(js_rc("{\"properties\":{\"a\":{}},\"required\":[\"b\"]}"), ERR_UNSUPPORTED);
  EXPECT_INT_EQ(js_rc("{\"type\":\"array\",\"maxItems\":1,\"minItems\":2}"), ERR_INVALID);
  EXPECT_INT_EQ(js_rc("{\"type\":\"string\",\"maxLength\":100000}"), ERR_TOO_LARGE);
  EXPECT_INT_EQ(js_rc("false"), ERR_UNSUPPORTED);
  EXPECT_INT_EQ(js_rc("{\"title\":\"t\",\"description\":\"d\",\"type\":\"null\"}"), 0);
  EXPECT_INT_EQ(js_rc("true"), 0);
  char deep[2000] = "";
  for (int i = 0; i < 80; i++) strcat(deep, "{\"items\":");
  strcat(deep, "{}");
  for (int i = 0; i < 80; i++) strcat(deep, "}");
  EXPECT_INT_EQ(js_rc(deep), ERR_TOO_LARGE);
}

TEST(json_schema_validator_self_check) {
  /* the validator itself must reject what it should */
  json_t *s = json_loads(S_PERSON, 0, NULL);
  ASSERT_TRUE(s != NULL);
  json_t *ok = json_loads("{\"name\":\"x\",\"age\":1}", 0, NULL);
  json_t *bad1 = json_loads("{\"name\":\"x\"}", 0, NULL);
  json_t *bad2 = json_loads("{\"name\":\"x\",\"age\":1,\"zz\":1}", 0, NULL);
  json_t *bad3 = json_loads("{\"name\":\"123456789\",\"age\":1}", 0, NULL);
  EXPECT_TRUE(schema_validate(ok, s, s));
  EXPECT_FALSE(schema_validate(bad1, s, s));
  EXPECT_FALSE(schema_validate(bad2, s, s));
  EXPECT_FALSE(schema_validate(bad3, s, s));
  EXPECT_TRUE(schema_valid_format("date", "2024-02-29", 10));
  EXPECT_FALSE(schema_valid_format("date", "2023-02-29", 10));
  EXPECT_FALSE(schema_valid_format("time", "10:00:00", 8));
  json_decref(ok), json_decref(bad1), json_decref(bad2), json_decref(bad3), json_decref(s);
}

/* ---- random walks ---- */

static const char *const WALK_VOCAB[] = {
    " ", "!", "\"", "#", "$", "%", "&", "'", "(", ")", "*", "+", ",", "-", ".", "/", "0", "1", "2",
    "3", "4", "5", "6", "7", "8", "9", ":", ";", "<", "=", ">", "?", "@", "A", "B", "C", "D", "E",
    "F", "G", "H", "I", "J", "K", "L", "M", "N", "O", "P", "Q", "R", "S", "T", "U", "V", "W", "X",
    "Y", "Z", "[", "\\", "]", "^", "_", "`", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k",
    "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z", "{", "|", "}", "~",
    "  ", "\n", "\n  ", "\t", "true", "false", "null",
    "{\"", "\":", "\": ", "\",", ", \"", "\"}", "\\u00e9", "\\n", "\\\"", "ab", "bc", "\xc3\xa9",
    "\xc3", "\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "id", "name", "age", "\"name\"", "kind",
    "fixed", "\"fixed\"", "-12", "00", "34:56", "2024-02-", "12-30",
};
#define N_WALK (sizeof WALK_VOCAB / sizeof WALK_VOCAB[0])

static uint64_t rng_next(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

/* One walk; returns the text (caller frees) or NULL on a dead end. */
static char *walk_once(const grammar *g, const grammar_vocab *v, uint64_t seed, int *steps_out,
                       bool *ok_out) {
  grammar_state *s;
  if (grammar_state_new(g, &s)) return NULL;
  uint64_t x = seed * 2654435761u + 88172645463325252ull;
  buf out = BUF_INIT;
  uint8_t mask[N_WALK];
  int steps = 0;
  bool ok = false;
  for (; steps < 20000; steps++) {
    bool can_end;
    if (grammar_mask(s, v, mask, &can_end)) break;
    if (can_end && (rng_next(&x) % 3 == 0 || steps > 200)) {
      ok = true;
      break;
    }
    size_t cand[N_WALK], n = 0;
    for (size_t i = 0; i < N_WALK; i++)
      if (mask[i]) cand[n++] = i;
    if (n == 0) {
      ok = can_end;
      break;
    }
    size_t pick = cand[rng_next(&x) % n];
    if (steps > 200) { /* steer towards closing what is open */
      static const char *const closers[] = {"\"", "}", "]", "0"};
      for (size_t ci = 0; ci < 4; ci++)
        for (size_t i = 0; i < n; i++)
          if (strcmp(WALK_VOCAB[cand[i]], closers[ci]) == 0 && rng_next(&x) % 4) {
            pick = cand[i];
            goto picked;
          }
    }
  picked:
    if (grammar_accept_bytes(s, WALK_VOCAB[pick], strlen(WALK_VOCAB[pick]))) break; /* mask lied */
    buf_append_str(&out, WALK_VOCAB[pick]);
  }
  grammar_state_free(s);
  *steps_out = steps;
  *ok_out = ok;
  return buf_detach(&out, NULL);
}

static void walk_schema(const char *schema_text, int n_seeds) {
  json_t *schema = schema_text ? json_loads(schema_text, 0, NULL) : NULL;
  TEST_CHECK_(!schema_text || schema, 1, "bad test schema");
  grammar *g = NULL;
  TEST_CHECK_(json_schema_grammar(schema, &g) == 0, 1, "compile: %s", err_detail());
  size_t lens[N_WALK];
  for (size_t i = 0; i < N_WALK; i++) lens[i] = strlen(WALK_VOCAB[i]);
  grammar_vocab *v = NULL;
  TEST_CHECK_(grammar_vocab_new(WALK_VOCAB, lens, N_WALK, &v) == 0, 1, "vocab");
  int failures = 0;
  for (int seed = 1; seed <= n_seeds && failures < 3; seed++) {
    int steps = 0;
    bool ok;
    char *text = walk_once(g, v, (uint64_t)seed, &steps, &ok);
    if (!text) return;
    if (!ok) {
      test_fail_at(__FILE__, __LINE__, "seed %d: walk hit a dead end or the limit (%d steps): %s", seed,
                   steps, text);
      failures++;
      free(text);
      continue;
    }
    json_error_t je;
    json_t *doc = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!doc) {
      test_fail_at(__FILE__, __LINE__, "seed %d: jansson rejects %s: %s", seed, text, je.text);
      failures++;
    } else if (schema ? !schema_validate(doc, schema, schema) : !json_is_object(doc)) {
      test_fail_at(__FILE__, __LINE__, "seed %d: document does not validate: %s", seed, text);
      failures++;
    }
    json_decref(doc);
    free(text);
  }
  grammar_vocab_free(v);
  grammar_free(g);
  json_decref(schema);
}

TEST(json_schema_walk_object_mode) { walk_schema(NULL, 100); }
TEST(json_schema_walk_person) { walk_schema(S_PERSON, 100); }
TEST(json_schema_walk_enum_anyof) {
  walk_schema("{\"type\":\"object\",\"properties\":{"
              "\"kind\":{\"enum\":[\"a\",\"b\\\"c\",1,null,{\"x\":[1,2]}]},"
              "\"v\":{\"const\":\"fixed\"},"
              "\"u\":{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"null\"}]},"
              "\"t\":{\"type\":[\"string\",\"null\"],\"maxLength\":4}},"
              "\"required\":[\"kind\",\"v\",\"u\"]}",
              100);
}
TEST(json_schema_walk_recursive_ref) {
  walk_schema("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{"
              "\"value\":{\"type\":\"integer\"},\"children\":{\"type\":\"array\","
              "\"items\":{\"$ref\":\"#/$defs/node\"},\"maxItems\":2}},"
              "\"required\":[\"value\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}",
              100);
}
TEST(json_schema_walk_arrays_oneof) {
  walk_schema("{\"definitions\":{\"pt\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},"
              "\"y\":{\"type\":\"number\"}},\"required\":[\"x\",\"y\"],\"additionalProperties\":false}},"
              "\"type\":\"array\",\"minItems\":1,\"maxItems\":4,\"items\":{\"oneOf\":[{\"$ref\":\"#/definitions/pt\"},"
              "{\"type\":\"string\",\"maxLength\":3},{\"type\":\"boolean\"}]}}",
              100);
}
TEST(json_schema_walk_patterns_formats) {
  walk_schema("{\"type\":\"object\",\"properties\":{"
              "\"code\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"},"
              "\"free\":{\"type\":\"string\",\"pattern\":\"\\\\d\"},"
              "\"q\":{\"type\":\"string\",\"pattern\":\"^(x|y\\\"z|[\\\\\\\\.]|\\\\s)*$\"},"
              "\"d\":{\"type\":\"string\",\"format\":\"date\"},"
              "\"t\":{\"type\":\"string\",\"format\":\"time\"},"
              "\"dt\":{\"type\":\"string\",\"format\":\"date-time\"},"
              "\"u\":{\"type\":\"string\",\"format\":\"uuid\"}},"
              "\"required\":[\"code\",\"free\",\"q\",\"d\",\"t\",\"dt\",\"u\"]}",
              100);
}
TEST(json_schema_walk_additional_schema) {
  walk_schema("{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"required\":[\"id\"],"
              "\"additionalProperties\":{\"type\":\"string\",\"maxLength\":5}}",
              100);
}

/* Integer bounds: for many ranges, every integer in a window is accepted
 * exactly when it lies in the range (arithmetic is the oracle). */
static void check_int_range(const char *schema, long long lo, long long hi, long long from, long long to) {
  grammar *g = js_compile(schema);
  TEST_CHECK_(g != NULL, 1, "compile %s", schema);
  if (!g) return;
  int bad = 0;
  for (long long i = from; i <= to && bad < 3; i++) {
    char t[32];
    snprintf(t, sizeof t, "%lld", i);
    int want = i >= lo && i <= hi ? 1 : -1;
    int got = doc(g, t);
    if (got == 0) got = -1; /* a prefix of a longer accepted number */
    if (got != want) {
      test_fail_at(__FILE__, __LINE__, "%s: %s gave %d, want %d", schema, t, got, want);
      bad++;
    }
  }
  grammar_free(g);
}

TEST(json_schema_integer_bounds) {
  struct { long long lo, hi; } cases[] = {{0, 0}, {1, 9}, {0, 100}, {7, 1234}, {-5, 5}, {-100, -7}, {-1, 0},
                                          {10, 10}, {99, 101}, {-1000, 999}, {123, 4567}, {-4567, -123}};
  for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
    char s[160];
    snprintf(s, sizeof s, "{\"type\":\"integer\",\"minimum\":%lld,\"maximum\":%lld}", cases[i].lo, cases[i].hi);
    check_int_range(s, cases[i].lo, cases[i].hi, -5000, 5000);
  }
  uint64_t x = 42;
  for (int k = 0; k < 20; k++) { /* random ranges */
    long long a = (long long)(rng_next(&x) % 20001) - 10000, b = (long long)(rng_next(&x) % 20001) - 10000;
    if (a > b) { long long t = a; a = b; b = t; }
    char s[160];
    snprintf(s, sizeof s, "{\"type\":\"integer\",\"minimum\":%lld,\"maximum\":%lld}", a, b);
    check_int_range(s, a, b, a - 300, b + 300);
  }
  /* exclusive bounds (numbers and draft-4 booleans), one-sided, rounding */
  check_int_range("{\"type\":\"integer\",\"exclusiveMinimum\":3,\"exclusiveMaximum\":9}", 4, 8, -50, 50);
  check_int_range("{\"type\":\"integer\",\"minimum\":3,\"exclusiveMinimum\":true,\"maximum\":9}", 4, 9, -50, 50);
  check_int_range("{\"type\":\"integer\",\"minimum\":1}", 1, 999999999, -2000, 2000);
  check_int_range("{\"type\":\"integer\",\"maximum\":-3}", -999999999, -3, -2000, 2000);
  check_int_range("{\"type\":\"integer\",\"minimum\":0.5,\"maximum\":4.5}", 1, 4, -50, 50);
  grammar *g = js_compile("{\"type\":\"integer\",\"minimum\":0,\"maximum\":100}");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(doc(g, "007"), -1);
  EXPECT_INT_EQ(doc(g, "-0"), -1);
  EXPECT_INT_EQ(doc(g, "5.0"), -1);
  grammar_free(g);
}

TEST(json_schema_number_bounds_are_sound) {
  grammar *g = js_compile("{\"type\":\"number\",\"minimum\":-3,\"maximum\":2}");
  ASSERT_TRUE(g != NULL);
  /* every accepted document is within the bounds; integers inside all are */
  const char *probe[] = {"-3", "-2.5", "-3.5", "-3.0001", "-0.25", "0", "0.75", "1.999", "2", "2.5", "2.0001",
                         "3", "-4", "1e3", "-2", "1.5"};
  for (size_t i = 0; i < ARRAY_LEN(probe); i++) {
    double v = strtod(probe[i], NULL);
    int got = doc(g, probe[i]);
    if (got == 1) EXPECT_TRUE(v >= -3 && v <= 2);
    if (v == (long long)v && v >= -3 && v <= 2 && !strchr(probe[i], 'e')) EXPECT_INT_EQ(got, 1);
  }
  EXPECT_INT_EQ(doc(g, "1.5"), 1);
  EXPECT_INT_EQ(doc(g, "-2.5"), 1);
  grammar_free(g);
}

TEST(json_schema_multiple_of) {
  long long ks[] = {2, 3, 7, 10, 25};
  for (size_t i = 0; i < ARRAY_LEN(ks); i++) {
    char s[96];
    snprintf(s, sizeof s, "{\"type\":\"integer\",\"multipleOf\":%lld}", ks[i]);
    grammar *g = js_compile(s);
    ASSERT_TRUE(g != NULL);
    for (long long v = -600; v <= 600; v++) {
      char t[32];
      snprintf(t, sizeof t, "%lld", v);
      int got = doc(g, t);
      /* a non-multiple may still be a prefix of one (e.g. 1 -> 10): complete only for multiples */
      EXPECT_TRUE((got == 1) == (v % ks[i] == 0));
    }
    grammar_free(g);
  }
  grammar *g = js_compile("{\"type\":\"number\",\"multipleOf\":0.01}");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(doc(g, "3.14"), 1);
  EXPECT_INT_EQ(doc(g, "-0.5"), 1);
  EXPECT_INT_EQ(doc(g, "3.141"), -1);
  grammar_free(g);
}

TEST(json_schema_walk_numeric_bounds) {
  walk_schema("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":-20,\"maximum\":300},"
              "\"x\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}},\"required\":[\"n\",\"x\"]}",
              60);
}
