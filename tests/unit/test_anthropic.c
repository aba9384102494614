/* test_anthropic.c - the Anthropic dialect's pure parts: a Messages body
 * translated into canonical chat messages, tools and parameters (the same
 * conversation an OpenAI client would send), errors naming the JSON path,
 * and the renderer's helpers (stop reasons, ids, signatures, the mid-stream
 * error event's type for each failure). */
#include "test.h"

#include <stdlib.h>

#include "api/anthropic/anthropic.h"
#include "api/api.h"
#include "base/err.h"

static json_t *load(const char *text) {
  json_error_t e;
  json_t *v = json_loads(text, 0, &e);
  if (!v) fprintf(stderr, "bad test JSON at %d:%d: %s\n", e.line, e.column, e.text);
  return v;
}

/* Parses body; returns the code (out is filled on 0). */
static int parse(const char *body, bool count, anthropic_req *out) {
  json_t *b = load(body);
  if (!b) return ERR_PARSE;
  int rc = anthropic_req_parse(b, count, out);
  /* the translation must not borrow from the body except the model name */
  if (!rc) out->model = NULL;
  json_decref(b);
  return rc;
}

static bool same_json(const json_t *a, const char *expected) {
  json_t *e = load(expected);
  bool ok = e && json_equal(a, e);
  if (!ok) {
    char *s = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
    fprintf(stderr, "got      %s\nexpected %s\n", s ? s : "(null)", expected);
    free(s);
  }
  json_decref(e);
  return ok;
}

TEST(anthropic_translates_a_tool_conversation_to_canonical_messages) {
  anthropic_req r;
  ASSERT_INT_EQ(parse("{\"model\":\"m\",\"max_tokens\":9,"
                      "\"system\":[{\"type\":\"text\",\"text\":\"Be brief.\"},{\"type\":\"text\",\"text\":\"Use tools.\"}],"
                      "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Weather in\"},"
                      "{\"type\":\"text\",\"text\":\"Oslo?\"}]},"
                      "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"Call it.\",\"signature\":\"s\"},"
                      "{\"type\":\"redacted_thinking\",\"data\":\"x\"},{\"type\":\"text\",\"text\":\"Checking.\"},"
                      "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":\"Oslo\"}},"
                      "{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"get_time\",\"input\":{}}]},"
                      "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"12 C\"},"
                      "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_2\",\"is_error\":true,"
                      "\"content\":[{\"type\":\"text\",\"text\":\"no clock\"}]},{\"type\":\"text\",\"text\":\"Thanks\"}]}]}",
                      false, &r),
                0);
  EXPECT_TRUE(same_json(r.messages,
                        "[{\"role\":\"system\",\"content\":\"Be brief.\\nUse tools.\"},"
                        "{\"role\":\"user\",\"content\":\"Weather in\\nOslo?\"},"
                        "{\"role\":\"assistant\",\"content\":\"Checking.\",\"reasoning_content\":\"Call it.\","
                        "\"tool_calls\":[{\"id\":\"toolu_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                        "\"arguments\":{\"city\":\"Oslo\"}}},{\"id\":\"toolu_2\",\"type\":\"function\","
                        "\"function\":{\"name\":\"get_time\",\"arguments\":{}}}]},"
                        "{\"role\":\"tool\",\"tool_call_id\":\"toolu_1\",\"content\":\"12 C\"},"
                        "{\"role\":\"tool\",\"tool_call_id\":\"toolu_2\",\"content\":\"Error: no clock\"},"
                        "{\"role\":\"user\",\"content\":\"Thanks\"}]"));
  EXPECT_FALSE(r.chat.continue_final);
  EXPECT_INT_EQ(r.p.er.max_tokens, 9);
  EXPECT_TRUE(r.chat.messages == r.messages);
  anthropic_req_free(&r);
}

TEST(anthropic_tool_calls_only_turn_has_null_content_and_tools_are_openai_shaped) {
  anthropic_req r;
  ASSERT_INT_EQ(parse("{\"model\":\"m\",\"max_tokens\":1,\"tools\":[{\"name\":\"f\",\"description\":\"d\","
                      "\"input_schema\":{\"type\":\"object\"}},{\"type\":\"custom\",\"name\":\"g\",\"input_schema\":{}}],"
                      "\"tool_choice\":{\"type\":\"tool\",\"name\":\"g\"},"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":"
                      "[{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"f\",\"input\":{\"a\":[1]}}]},"
                      "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_9\"}]}]}",
                      false, &r),
                0);
  EXPECT_TRUE(same_json(r.tools, "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
                                 "\"parameters\":{\"type\":\"object\"}}},{\"type\":\"function\",\"function\":"
                                 "{\"name\":\"g\",\"parameters\":{}}}]"));
  EXPECT_TRUE(r.chat.tools == r.tools);
  EXPECT_INT_EQ(r.chat.tool_choice, GEN_TOOL_FUNCTION);
  EXPECT_TRUE(json_is_null(json_object_get(json_array_get(r.messages, 1), "content")));
  EXPECT_TRUE(same_json(json_array_get(r.messages, 2), "{\"role\":\"tool\",\"tool_call_id\":\"toolu_9\",\"content\":\"\"}"));
  EXPECT_INT_EQ(json_array_size(r.messages), 3);
  EXPECT_FALSE(r.one_call);
  anthropic_req_free(&r);
  ASSERT_INT_EQ(parse("{\"model\":\"m\",\"max_tokens\":1,\"tools\":[{\"name\":\"f\",\"input_schema\":{}}],"
                      "\"tool_choice\":{\"type\":\"any\",\"disable_parallel_tool_use\":true},"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                      false, &r),
                0);
  EXPECT_INT_EQ(r.chat.tool_choice, GEN_TOOL_REQUIRED);
  EXPECT_TRUE(r.one_call);
  anthropic_req_free(&r);
}

TEST(anthropic_merges_same_role_turns_and_detects_prefill) {
  anthropic_req r;
  ASSERT_INT_EQ(parse("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"b\"}]},"
                      "{\"role\":\"assistant\",\"content\":\"{\\\"x\\\": \"}]}",
                      false, &r),
                0);
  EXPECT_TRUE(same_json(r.messages, "[{\"role\":\"user\",\"content\":\"a\\nb\"},"
                                    "{\"role\":\"assistant\",\"content\":\"{\\\"x\\\": \"}]"));
  EXPECT_TRUE(r.chat.continue_final);
  anthropic_req_free(&r);
  /* an empty final assistant turn is no prefill: it is dropped */
  ASSERT_INT_EQ(parse("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                      "{\"role\":\"assistant\",\"content\":[]}]}",
                      false, &r),
                0);
  EXPECT_INT_EQ(json_array_size(r.messages), 1);
  EXPECT_FALSE(r.chat.continue_final);
  anthropic_req_free(&r);
}

TEST(anthropic_parameters_map_onto_gen_params) {
  anthropic_req r;
  ASSERT_INT_EQ(parse("{\"model\":\"m\",\"max_tokens\":40,\"temperature\":0,\"top_p\":0.5,\"top_k\":7,"
                      "\"stop_sequences\":[\"STOP\",\"\",\"END\"],\"stream\":true,\"metadata\":{\"user_id\":\"u\"},"
                      "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024},"
                      "\"output_config\":{\"effort\":\"low\",\"format\":{\"type\":\"json_schema\",\"schema\":{\"type\":\"object\"}}},"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                      false, &r),
                0);
  EXPECT_INT_EQ(r.p.er.max_tokens, 40);
  EXPECT_NEAR(r.p.er.sample.temperature, 0.0, 1e-6);
  EXPECT_NEAR(r.p.er.sample.top_p, 0.5, 1e-6);
  EXPECT_INT_EQ(r.p.er.sample.top_k, 7);
  ASSERT_INT_EQ(r.p.n_stop, 2); /* the empty one means nothing */
  EXPECT_STR_EQ(r.p.stop[1], "END");
  EXPECT_TRUE(r.stream);
  EXPECT_INT_EQ(r.chat.thinking, 1);
  EXPECT_INT_EQ(r.p.format, GEN_FORMAT_SCHEMA);
  anthropic_req_free(&r);
  ASSERT_INT_EQ(parse("{\"model\":\"m\",\"max_tokens\":1,\"thinking\":{\"type\":\"disabled\"},"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", false, &r), 0);
  EXPECT_INT_EQ(r.chat.thinking, 0);
  anthropic_req_free(&r);
  ASSERT_INT_EQ(parse("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", false, &r), 0);
  EXPECT_INT_EQ(r.chat.thinking, -1); /* absent: the model's default */
  EXPECT_INT_EQ(r.chat.tool_choice, GEN_TOOL_AUTO);
  anthropic_req_free(&r);
  /* count_tokens needs no max_tokens */
  ASSERT_INT_EQ(parse("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", true, &r), 0);
  anthropic_req_free(&r);
}

TEST(anthropic_errors_name_the_json_path) {
  static const struct {
    const char *body;
    int code;
    const char *path;
  } cases[] = {
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", ERR_INVALID, "max_tokens"},
      {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", ERR_INVALID, "model"},
      {"{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\","
       "\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{}}]},{\"role\":\"user\","
       "\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_2\",\"content\":\"r\"}]}]}",
       ERR_INVALID, "messages[2].content[0].tool_use_id"},
      /* a tool_result may answer only the immediately preceding assistant turn */
      {"{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\","
       "\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{}}]},{\"role\":\"user\","
       "\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\"}]},{\"role\":\"assistant\",\"content\":\"ok\"},"
       "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\"}]}]}",
       ERR_INVALID, "messages[4].content[0].tool_use_id"},
      {"{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
       "\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"AA==\"}}]}]}",
       ERR_UNSUPPORTED, "messages[0].content[0]: image"},
      {"{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
       "\"source\":{\"type\":\"base64\",\"media_type\":\"image/bmp\",\"data\":\"AA==\"}}]}]}",
       ERR_INVALID, "messages[0].content[0].source.media_type"},
      {"{\"model\":\"m\",\"max_tokens\":1,\"tools\":[{\"type\":\"bash_20250124\",\"name\":\"bash\"}],"
       "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
       ERR_UNSUPPORTED, "tools[0].type"},
      {"{\"model\":\"m\",\"max_tokens\":1,\"temperature\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
       ERR_RANGE, "temperature"},
      {"{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\","
       "\"content\":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":[]}]}]}",
       ERR_TYPE, "messages[1].content[0].input"},
      {"{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[]}]}", ERR_INVALID,
       "messages[0].content"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    anthropic_req r;
    int rc = parse(cases[i].body, false, &r);
    EXPECT_INT_EQ(rc, cases[i].code);
    if (rc) EXPECT_STR_CONTAINS(err_detail(), cases[i].path);
    else anthropic_req_free(&r);
  }
}

TEST(anthropic_renderer_helpers) {
  char a[48], b[48], id[96];
  anthropic_signature("thinking", 8, a, sizeof a);
  anthropic_signature("thinking", 8, b, sizeof b);
  EXPECT_STR_EQ(a, b);
  EXPECT_INT_EQ(strlen(a), 23);
  anthropic_signature("thinkinG", 8, b, sizeof b);
  EXPECT_TRUE(strcmp(a, b) != 0);
  anthropic_tool_id("call_0123abcd", id, sizeof id);
  EXPECT_STR_EQ(id, "toolu_0123abcd");
  anthropic_tool_id("toolu_x", id, sizeof id);
  EXPECT_STR_EQ(id, "toolu_x");

  gen_choice c;
  memset(&c, 0, sizeof c);
  c.stop_index = -1;
  c.finish = ENGINE_FINISH_STOP;
  EXPECT_STR_EQ(anthropic_stop_reason(&c), "end_turn");
  c.finish = ENGINE_FINISH_LENGTH;
  EXPECT_STR_EQ(anthropic_stop_reason(&c), "max_tokens");
  c.finish = ENGINE_FINISH_STOP;
  c.stop_index = 0;
  EXPECT_STR_EQ(anthropic_stop_reason(&c), "stop_sequence");
  c.stop_index = -1;
  c.tool_calls = json_pack("[{s:s}]", "id", "call_1");
  EXPECT_STR_EQ(anthropic_stop_reason(&c), "tool_use");
  json_decref(c.tool_calls);

  /* the payload of a mid-stream `error` event, per failure */
  static const struct {
    int code;
    const char *type;
  } ev[] = {{ERR_UNAVAILABLE, "overloaded_error"}, {ERR_OVERLOADED, "rate_limit_error"},
            {ERR_TIMEOUT, "timeout_error"},        {ERR_INTERNAL, "api_error"},
            {ERR_CONTEXT, "invalid_request_error"}, {ERR_NOT_FOUND, "not_found_error"}};
  for (size_t i = 0; i < sizeof ev / sizeof *ev; i++) {
    json_t *e = anthropic_error_event(ev[i].code, "boom");
    ASSERT_TRUE(e != NULL);
    EXPECT_STR_EQ(json_string_value(json_object_get(e, "type")), "error");
    EXPECT_STR_EQ(json_string_value(json_object_get(json_object_get(e, "error"), "type")), ev[i].type);
    EXPECT_STR_EQ(json_string_value(json_object_get(json_object_get(e, "error"), "message")), "boom");
    json_decref(e);
  }
}

/* Every fuzz seed goes through the translation as the harness feeds it:
 * a clean result either way, and the seeds that are valid requests parse. */
static void parse_seed(const char *name, const char *path, const unsigned char *in, size_t n, void *ud) {
  int *n_ok = ud;
  (void)name;
  json_t *v = NULL;
  if (api_json_decode_object((const char *)in, n, &v)) return;
  for (int count = 0; count < 2; count++) {
    anthropic_req r;
    int rc = anthropic_req_parse(v, count == 1, &r);
    TEST_CHECK_(rc <= 0, 0, "%s: positive return %d", path, rc);
    if (rc) continue;
    (*n_ok)++;
    EXPECT_TRUE(json_is_array(r.messages));
    anthropic_req_free(&r);
  }
  json_decref(v);
}

TEST(anthropic_fuzz_seeds_replay) {
  int n_ok = 0;
  int n_files = test_each_file("tests/fuzz/seeds/anthropic_request", 65536, parse_seed, &n_ok);
  if (n_files < 0) TEST_SKIP("tests/fuzz/seeds/anthropic_request not found (run from the repository root)");
  EXPECT_INT_GE(n_files, 7);
  EXPECT_INT_GE(n_ok, 5);
}
