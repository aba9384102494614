/* test_lmstudio.c - the LM Studio dialect's pure helpers: publisher and
 * type of a registry entry, the SDK's stop_reason vocabulary, the v1 error
 * object (optional keys left out, client bytes that are not UTF-8 kept as
 * U+FFFD instead of failing the answer). */
#include "test.h"

#include <string.h>

#include "api/lmstudio/lmstudio.h"

TEST(lmstudio_publisher_from_names) {
  char p[64];
  lms_publisher("org/tiny", p, sizeof p);
  EXPECT_STR_EQ(p, "org");
  lms_publisher("hf.co/owner/repo:Q4_K_M", p, sizeof p);
  EXPECT_STR_EQ(p, "owner");
  lms_publisher("lmstudio-community/Qwen2-GGUF", p, sizeof p);
  EXPECT_STR_EQ(p, "lmstudio-community");
  lms_publisher("llama3.2:1b", p, sizeof p);
  EXPECT_STR_EQ(p, "parley");
  lms_publisher("/odd", p, sizeof p);
  EXPECT_STR_EQ(p, "parley");
}

TEST(lmstudio_v0_type_of_entries) {
  registry_entry e;
  memset(&e, 0, sizeof e);
  e.caps = FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS;
  EXPECT_STR_EQ(lms_v0_type(&e), "llm");
  e.caps |= FAMILY_CAP_VISION;
  EXPECT_STR_EQ(lms_v0_type(&e), "vlm");
  e.caps = FAMILY_CAP_EMBED;
  EXPECT_STR_EQ(lms_v0_type(&e), "embeddings");
  EXPECT_TRUE(lms_is_embedding(&e));
  e.caps = FAMILY_CAP_CHAT;
  char proj[] = "/x/mmproj.gguf";
  e.projector = proj;
  EXPECT_STR_EQ(lms_v0_type(&e), "vlm");
}

TEST(lmstudio_stop_reasons_use_the_sdk_vocabulary) {
  gen_choice c;
  memset(&c, 0, sizeof c);
  c.stop_index = -1;
  c.finish = ENGINE_FINISH_STOP;
  EXPECT_STR_EQ(lms_stop_reason(&c, 0), "eosFound");
  c.stop_index = 0;
  EXPECT_STR_EQ(lms_stop_reason(&c, 0), "stopStringFound");
  c.stop_index = -1;
  c.tool_calls = json_pack("[{s:s}]", "id", "call_1");
  EXPECT_STR_EQ(lms_stop_reason(&c, 0), "toolCalls");
  json_decref(c.tool_calls);
  c.tool_calls = NULL;
  c.finish = ENGINE_FINISH_LENGTH;
  c.n_tokens = 10;
  EXPECT_STR_EQ(lms_stop_reason(&c, 10), "maxPredictedTokensReached");
  EXPECT_STR_EQ(lms_stop_reason(&c, 0), "contextLengthReached");
  EXPECT_STR_EQ(lms_stop_reason(&c, 20), "contextLengthReached");
  c.finish = ENGINE_FINISH_CANCELLED;
  EXPECT_STR_EQ(lms_stop_reason(&c, 0), "userStopped");
  c.finish = ENGINE_FINISH_ERROR;
  EXPECT_STR_EQ(lms_stop_reason(&c, 0), "failed");
}

TEST(lmstudio_error_object_leaves_out_absent_keys) {
  json_t *e = lms_error_object("invalid_request", "missing_required_parameter", "model", "\"model\" is required");
  ASSERT_TRUE(e != NULL);
  EXPECT_STR_EQ(json_string_value(json_object_get(e, "type")), "invalid_request");
  EXPECT_STR_EQ(json_string_value(json_object_get(e, "param")), "model");
  EXPECT_STR_EQ(json_string_value(json_object_get(e, "code")), "missing_required_parameter");
  json_decref(e);
  e = lms_error_object("job_not_found", NULL, NULL, "no job");
  EXPECT_TRUE(json_object_get(e, "code") == NULL);
  EXPECT_TRUE(json_object_get(e, "param") == NULL);
  EXPECT_INT_EQ((long long)json_object_size(e), 2);
  json_decref(e);
  EXPECT_TRUE(lms_seconds(0, 5) == 0.0);
  EXPECT_TRUE(lms_seconds(1000000000ull, 3000000000ull) == 2.0);
}

/* GET /api/v1/models/download/status/%ff%fe quoted the raw job id in its
 * 404: the object could not be made and the client got a 500. */
TEST(lmstudio_error_object_takes_bytes_that_are_not_utf8) {
  json_t *e = lms_error_object("job_not_found", "job_not_found", "job\xc3", "no download job '\xff\xfe'");
  ASSERT_TRUE(e != NULL);
  EXPECT_STR_EQ(json_string_value(json_object_get(e, "message")), "no download job '\xEF\xBF\xBD\xEF\xBF\xBD'");
  EXPECT_STR_EQ(json_string_value(json_object_get(e, "param")), "job\xEF\xBF\xBD");
  EXPECT_STR_EQ(json_string_value(json_object_get(e, "type")), "job_not_found");
  json_decref(e);
}
