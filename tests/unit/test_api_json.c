/* test_api_json.c - request-body decoding and typed field access name the
 * JSON path, line and column of what is wrong. */
#include "test.h"

#include <stdlib.h>

#include "api/api.h"
#include "base/err.h"

TEST(api_json_decode_reports_line_and_column) {
  json_t *v = NULL;
  const char *bad = "{\n  \"a\": 1,\n  \"b\": tru\n}";
  ASSERT_INT_EQ(api_json_decode_object(bad, strlen(bad), &v), ERR_PARSE);
  EXPECT_TRUE(v == NULL);
  EXPECT_STR_CONTAINS(err_detail(), "line 3 column");
}

TEST(api_json_decode_refuses_non_objects_empty_and_deep) {
  json_t *v = NULL;
  EXPECT_INT_EQ(api_json_decode_object("[1]", 3, &v), ERR_TYPE);
  EXPECT_STR_CONTAINS(err_detail(), "got array");
  EXPECT_INT_EQ(api_json_decode_object("", 0, &v), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "empty");
  char deep[600];
  size_t n = 0;
  deep[n++] = '{';
  deep[n++] = '"'; deep[n++] = 'a'; deep[n++] = '"'; deep[n++] = ':';
  for (int i = 0; i < 200; i++) deep[n++] = '[';
  for (int i = 0; i < 200; i++) deep[n++] = ']';
  deep[n++] = '}';
  EXPECT_INT_EQ(api_json_decode_object(deep, n, &v), ERR_TOO_LARGE);
  const char *bad_utf8 = "{\"a\":\"\xff\"}";
  EXPECT_INT_EQ(api_json_decode_object(bad_utf8, strlen(bad_utf8), &v), ERR_PARSE);
}

TEST(api_json_fields_name_their_path) {
  json_t *v = NULL;
  const char *s = "{\"role\":\"user\",\"n\":3,\"t\":0.5,\"stream\":true,\"bad\":7,\"nul\":\"a\\u0000b\",\"z\":null}";
  ASSERT_INT_EQ(api_json_decode_object(s, strlen(s), &v), 0);
  const char *str = NULL;
  long long n = 0;
  double d = 0;
  bool b = false;
  EXPECT_INT_EQ(api_json_str(v, "messages[2]", "role", true, &str), 0);
  EXPECT_STR_EQ(str, "user");
  EXPECT_INT_EQ(api_json_int(v, "", "n", true, &n), 0);
  EXPECT_INT_EQ(n, 3);
  EXPECT_INT_EQ(api_json_num(v, "", "t", true, &d), 0);
  EXPECT_NEAR(d, 0.5, 0);
  EXPECT_INT_EQ(api_json_num(v, "", "n", true, &d), 0);
  EXPECT_NEAR(d, 3.0, 0);
  EXPECT_INT_EQ(api_json_bool(v, "", "stream", true, &b), 0);
  EXPECT_TRUE(b);
  EXPECT_INT_EQ(api_json_str(v, "messages[2]", "bad", true, &str), ERR_TYPE);
  EXPECT_STR_EQ(err_detail(), "messages[2].bad: expected string, got number");
  EXPECT_INT_EQ(api_json_int(v, "", "t", true, &n), ERR_TYPE);
  EXPECT_STR_EQ(err_detail(), "t: expected integer, got number");
  EXPECT_INT_EQ(api_json_str(v, "", "missing", false, &str), ERR_NOT_FOUND);
  EXPECT_INT_EQ(api_json_str(v, "", "z", false, &str), ERR_NOT_FOUND);
  EXPECT_INT_EQ(api_json_str(v, "", "missing", true, &str), ERR_INVALID);
  EXPECT_STR_EQ(err_detail(), "missing: required field is missing");
  EXPECT_INT_EQ(api_json_str(v, "", "nul", true, &str), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "NUL");
  json_decref(v);
}

TEST(api_status_for_codes) {
  EXPECT_INT_EQ(api_status_for(ERR_PARSE), 400);
  EXPECT_INT_EQ(api_status_for(ERR_AUTH), 401);
  EXPECT_INT_EQ(api_status_for(ERR_NOT_FOUND), 404);
  EXPECT_INT_EQ(api_status_for(ERR_TOO_LARGE), 413);
  EXPECT_INT_EQ(api_status_for(ERR_OVERLOADED), 429);
  EXPECT_INT_EQ(api_status_for(ERR_UNAVAILABLE), 503);
  EXPECT_INT_EQ(api_status_for(ERR_INTERNAL), 500);
}
