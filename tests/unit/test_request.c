/* test_request.c - the dialect input interface's pure parts (api/request.h):
 * the one normalisation of OpenAI-shaped messages, tools and tool_choice
 * that OpenAI chat and LM Studio v0 share, the OpenAI sampling fields, LM
 * Studio's extras (max_tokens -1, ttl) and its raw completion prompt, and
 * errors that name the JSON path in the request's param. */
#include "test.h"

#include <stdlib.h>

#include "api/api.h"
#include "api/lmstudio/lmstudio.h"
#include "api/openai/openai.h"
#include "api/request.h"
#include "base/err.h"

enum which { OPENAI, V0_CHAT, V0_COMPLETION };

/* Parses text with the chosen parser; the body is freed before the caller
 * reads out (only the model, tool name, kwargs and prompt are borrowed, and
 * the tests below do not read them after). */
static int parse(enum which w, const char *text, gen_request *out) {
  json_t *b = json_loads(text, 0, NULL);
  if (!b) return ERR_PARSE;
  int rc = w == OPENAI ? openai_chat_parse(b, out) : w == V0_CHAT ? lms_v0_chat_parse(b, out)
                                                                  : lms_v0_completion_parse(b, out);
  if (!rc) {
    out->model = NULL;
    out->tool_name = NULL;
    out->prompt = NULL;
    out->chat.template_kwargs = NULL;
  }
  json_decref(b);
  return rc;
}

TEST(request_openai_messages_are_normalised_into_a_copy) {
  gen_request r;
  const char *body = "{\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief.\"},"
                     "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
                     "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]}]}";
  for (int w = OPENAI; w <= V0_CHAT; w++) {
    ASSERT_INT_EQ(parse(w, body, &r), 0);
    ASSERT_INT_EQ((long long)json_array_size(r.messages), 3);
    EXPECT_STR_EQ(json_string_value(json_object_get(json_array_get(r.messages, 0), "role")), "system");
    EXPECT_STR_EQ(json_string_value(json_object_get(json_array_get(r.messages, 1), "content")), "a\nb");
    EXPECT_TRUE(json_is_null(json_object_get(json_array_get(r.messages, 2), "content")));
    EXPECT_TRUE(r.chat.messages == r.messages);
    EXPECT_INT_EQ(r.chat.thinking, -1);
    gen_request_free(&r);
  }
}

/* The same bad bodies fail the same way in both dialects: one normalisation. */
TEST(request_openai_shaped_errors_name_the_path_in_both_dialects) {
  static const struct {
    const char *body, *param;
    int code;
  } cases[] = {
      {"{}", "messages", ERR_INVALID},
      {"{\"messages\":[]}", "messages", ERR_INVALID},
      {"{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "messages[0].role", ERR_INVALID},
      {"{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content", ERR_INVALID},
      {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}",
       "messages[0].content[0]", ERR_UNSUPPORTED},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\"}]}",
       "tools[0].function.name", ERR_INVALID},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"sometimes\"}", "tool_choice",
       ERR_INVALID},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":"
       "{\"name\":\"a\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"b\"}}}",
       "tool_choice", ERR_INVALID},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":5}", "temperature", ERR_RANGE},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",1]}", "stop[1]", ERR_TYPE},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"xml\"}}",
       "response_format.type", ERR_INVALID},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    for (int w = OPENAI; w <= V0_CHAT; w++) {
      gen_request r;
      int rc = parse(w, cases[i].body, &r);
      EXPECT_INT_EQ(rc, cases[i].code);
      EXPECT_STR_EQ(r.param, cases[i].param);
      EXPECT_STR_CONTAINS(err_detail(), cases[i].param);
      gen_request_free(&r);
    }
  }
}

TEST(request_tool_choice_and_sampling_reach_the_canonical_request) {
  gen_request r;
  ASSERT_INT_EQ(parse(OPENAI,
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\","
                      "\"function\":{\"name\":\"w\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":"
                      "\"w\"}},\"temperature\":0.5,\"n\":2,\"stop\":[\"END\"],\"max_completion_tokens\":20,"
                      "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"logit_bias\":{\"3\":1},"
                      "\"reasoning_effort\":\"none\"}",
                      &r),
                0);
  EXPECT_INT_EQ(r.chat.tool_choice, GEN_TOOL_FUNCTION);
  EXPECT_INT_EQ((long long)json_array_size(r.tools), 1);
  EXPECT_TRUE(r.chat.tools == r.tools);
  EXPECT_NEAR(r.p.er.sample.temperature, 0.5, 1e-6);
  EXPECT_INT_EQ(r.p.er.n, 2);
  EXPECT_INT_EQ(r.p.er.max_tokens, 20);
  ASSERT_INT_EQ((long long)r.p.n_stop, 1);
  EXPECT_STR_EQ(r.p.stop[0], "END");
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_INT_EQ(r.chat.thinking, 0);
  gen_request_free(&r);
  /* the error path survives the free, for the answer */
  EXPECT_INT_EQ(parse(OPENAI, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":0}", &r), ERR_RANGE);
  gen_request_free(&r);
  EXPECT_STR_EQ(r.param, "n");
}

TEST(request_lmstudio_extras_unlimited_ttl_and_raw_prompt) {
  gen_request r;
  ASSERT_INT_EQ(parse(V0_CHAT,
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-1,\"top_k\":40,"
                      "\"min_p\":0.05,\"ttl\":300}",
                      &r),
                0);
  EXPECT_INT_EQ(r.p.er.max_tokens, 0);
  EXPECT_INT_EQ(r.p.er.sample.top_k, 40);
  EXPECT_NEAR(r.p.er.sample.min_p, 0.05, 1e-6);
  EXPECT_INT_EQ(r.ttl_ms, 300000);
  gen_request_free(&r);
  ASSERT_INT_EQ(parse(V0_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"ttl\":-1}", &r), 0);
  EXPECT_INT_EQ(r.ttl_ms, MANAGER_KEEP_ALIVE_FOREVER);
  gen_request_free(&r);
  ASSERT_INT_EQ(parse(V0_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r), 0);
  EXPECT_TRUE(r.ttl_ms == GEN_TTL_NONE);
  gen_request_free(&r);
  EXPECT_INT_EQ(parse(V0_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", &r),
                ERR_INVALID);
  EXPECT_STR_EQ(r.param, "max_tokens");
  gen_request_free(&r);
  EXPECT_INT_EQ(parse(V0_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"min_p\":2}", &r), ERR_INVALID);
  EXPECT_STR_EQ(r.param, "min_p");
  gen_request_free(&r);

  json_t *b = json_loads("{\"model\":\"m\",\"prompt\":[\"once\"]}", 0, NULL);
  ASSERT_TRUE(b != NULL);
  ASSERT_INT_EQ(lms_v0_completion_parse(b, &r), 0);
  EXPECT_STR_EQ(r.model, "m");
  ASSERT_TRUE(r.prompt != NULL);
  EXPECT_STR_EQ(r.prompt, "once");
  EXPECT_STR_EQ(r.prompt_param, "prompt");
  EXPECT_TRUE(r.messages == NULL);
  EXPECT_INT_EQ(r.p.er.max_tokens, 0); /* no 16-token default in LM Studio */
  gen_request_free(&r);
  json_decref(b);
  EXPECT_INT_EQ(parse(V0_COMPLETION, "{\"prompt\":3}", &r), ERR_INVALID);
  EXPECT_STR_EQ(r.param, "prompt");
  gen_request_free(&r);
}
