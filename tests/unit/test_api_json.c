/* test_api_json.c - request-body decoding and typed field access name the
 * JSON path, line and column of what is wrong; an error message quoting
 * client bytes that are not UTF-8 is still a JSON answer. */
#include "test.h"

#include <stdlib.h>

#include "api/api.h"
#include "api/openai/openai.h"
#include "api/deepgram/deepgram.h"
#include "base/err.h"
#include "base/util.h"
#include "loopback.h"

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

/* Checks body (JSON text) against one OpenAI shape's field table: the
 * return code, and the message and param when it fails. */
static void expect_fields(enum openai_shape shape, const char *body, int want_rc, const char *want_msg,
                          const char *want_param) {
  json_t *v = json_loads(body, 0, NULL);
  if (!v) { test_fail_at(__FILE__, __LINE__, "bad test JSON: %s", body); return; }
  size_t n = 0;
  const api_field *f = openai_shape_fields(shape, &n);
  char param[256] = "unset";
  int rc = api_json_check_fields(v, f, n, param, sizeof param);
  json_decref(v);
  if (rc != want_rc) test_fail_at(__FILE__, __LINE__, "%s: code %d, want %d (%s)", body, rc, want_rc, err_detail());
  if (want_rc && strcmp(err_detail(), want_msg) != 0)
    test_fail_at(__FILE__, __LINE__, "%s: message \"%s\", want \"%s\"", body, err_detail(), want_msg);
  if (want_rc && strcmp(param, want_param) != 0)
    test_fail_at(__FILE__, __LINE__, "%s: param \"%s\", want \"%s\"", body, param, want_param);
}

/* The chat fields the spec types and the handler used to ignore whatever
 * their type: each wrong one is now an error naming its JSON path. */
TEST(api_json_field_tables_check_chat_types) {
  const char *ok = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"name\":\"bob\"}],"
                   "\"user\":\"u1\",\"metadata\":{\"a\":\"b\"},\"parallel_tool_calls\":false,\"store\":null,"
                   "\"stop\":[\"x\"],\"logit_bias\":{\"5\":-1.5},\"seed\":7}";
  expect_fields(OPENAI_SHAPE_CHAT, ok, 0, NULL, NULL);
  expect_fields(OPENAI_SHAPE_CHAT, "{\"user\":5}", ERR_TYPE, "user: expected string or null, got number", "user");
  expect_fields(OPENAI_SHAPE_CHAT, "{\"metadata\":\"x\"}", ERR_TYPE, "metadata: expected object or null, got string",
                "metadata");
  expect_fields(OPENAI_SHAPE_CHAT, "{\"metadata\":{\"k\":1}}", ERR_TYPE, "metadata.k: expected string, got number",
                "metadata.k");
  expect_fields(OPENAI_SHAPE_CHAT, "{\"parallel_tool_calls\":\"yes\"}", ERR_TYPE,
                "parallel_tool_calls: expected boolean or null, got string", "parallel_tool_calls");
  expect_fields(OPENAI_SHAPE_CHAT, "{\"messages\":[{\"role\":\"user\"},{\"role\":\"user\",\"name\":[]}]}", ERR_TYPE,
                "messages[1].name: expected string or null, got array", "messages[1].name");
  expect_fields(OPENAI_SHAPE_CHAT,
                "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"function\":{\"name\":3}}]}]}",
                ERR_TYPE, "messages[0].tool_calls[0].function.name: expected string, got number",
                "messages[0].tool_calls[0].function.name");
  expect_fields(OPENAI_SHAPE_CHAT, "{\"seed\":1.5}", ERR_TYPE, "seed: expected integer or null, got number", "seed");
  expect_fields(OPENAI_SHAPE_CHAT, "{\"stop\":[\"a\",false]}", ERR_TYPE, "stop[1]: expected string, got boolean",
                "stop[1]");
  /* a legacy completion's logprobs is an integer, a chat's a boolean */
  expect_fields(OPENAI_SHAPE_COMPLETION, "{\"prompt\":\"p\",\"logprobs\":2}", 0, NULL, NULL);
  expect_fields(OPENAI_SHAPE_CHAT, "{\"logprobs\":2}", ERR_TYPE, "logprobs: expected boolean or null, got number",
                "logprobs");
  expect_fields(OPENAI_SHAPE_EMBEDDING, "{\"input\":\"a\",\"dimensions\":\"8\"}", ERR_TYPE,
                "dimensions: expected integer or null, got string", "dimensions");
}

/* Ranges in a table row, and a row whose parent has another type (the
 * parent's own row reports it, the walk does not crash on it). */
TEST(api_json_field_tables_ranges_and_odd_parents) {
  static const api_field F[] = {
      {"options", API_T_OBJECT, 0, 0},
      {"options.num_ctx", API_T_INT, 1, 1e9},
      {"list[].x", API_T_STRING, 0, 0},
  };
  json_t *v = json_loads("{\"options\":{\"num_ctx\":-1}}", 0, NULL);
  char param[64];
  EXPECT_INT_EQ(api_json_check_fields(v, F, 3, param, sizeof param), ERR_RANGE);
  EXPECT_STR_EQ(err_detail(), "options.num_ctx: -1 is out of range (expected 1 to 1e+09)");
  EXPECT_STR_EQ(param, "options.num_ctx");
  json_decref(v);
  v = json_loads("{\"options\":[1],\"list\":[5,{\"x\":\"s\"},{\"y\":1}]}", 0, NULL);
  EXPECT_INT_EQ(api_json_check_fields(v, F + 1, 2, param, sizeof param), 0);
  EXPECT_INT_EQ(api_json_check_fields(v, F, 1, param, sizeof param), ERR_TYPE);
  EXPECT_STR_EQ(param, "options");
  json_decref(v);
}

/* Deepgram's text-intelligence query flags, parsed as /v1/read does; the
 * error quotes the bad value. */
static void h_read_flags(http_req *req, void *ctx) {
  (void)ctx;
  dg_intel in;
  if (dg_intel_parse(req, &in) == 0) http_respond(req, 200, "application/json", "{}", 2);
}

TEST(api_error_quoting_bytes_that_are_not_utf8_answers_400) {
  static const http_route routes[] = {{"POST", "/deepgram/v1/read", h_read_flags, NULL, HTTP_ROUTE_PUBLIC, "read"}};
  http_server *srv = NULL;
  ASSERT_INT_EQ(loopback_start(routes, ARRAY_LEN(routes), test_tmpdir(), &srv), 0);
  int port = http_server_port(srv);
  buf out = BUF_INIT;
  /* the fuzz input: a value with bytes that are not UTF-8 (was 500 "out of memory") */
  EXPECT_INT_EQ(loopback_request(port, "POST", "/deepgram/v1/read?summarize=v%CA%D9%93%9Eng", NULL, NULL, "{}", &out),
                400);
  EXPECT_STR_CONTAINS(out.data ? out.data : "", "\"err_msg\":\"summarize: expected true or false, got 'v\xEF\xBF\xBD");
  /* valid UTF-8 cut inside a character by the message's '%.32s' */
  EXPECT_INT_EQ(loopback_request(port, "POST", "/deepgram/v1/read?topics=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa%C3%A9", NULL,
                                 NULL, "{}", &out),
                400);
  EXPECT_STR_CONTAINS(out.data ? out.data : "", "got 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xEF\xBF\xBD'");
  EXPECT_TRUE(out.data && utf8_valid(out.data, out.len));
  buf_free(&out);
  http_server_free(srv);
}
