/*
 * test_realtime.c - the pure parts of the Realtime API: session
 * configuration in both layouts (beta flat, GA nested) and its errors, the
 * beta event-name table and item respelling, base64 and the key hash.
 * The WebSocket flow itself is tested end to end in tests/api/realtime.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/openai/rt_int.h"
#include "base/err.h"
#include "test.h"

static json_t *parse(const char *s) { return json_loads(s, 0, NULL); }

TEST(realtime_config_ga_apply_and_render) {
  rt_config c;
  rt_config_defaults(&c, false, "org/tiny");
  json_t *s = parse("{\"type\":\"realtime\",\"instructions\":\"hi\",\"output_modalities\":[\"text\"],"
                    "\"audio\":{\"input\":{\"format\":{\"type\":\"audio/pcmu\"},\"turn_detection\":{\"type\":"
                    "\"server_vad\",\"threshold\":0.7,\"silence_duration_ms\":300}},\"output\":{\"voice\":\"echo\"}}}");
  const char *param = NULL;
  ASSERT_INT_EQ(rt_config_apply(&c, s, false, true, "session", &param), 0);
  EXPECT_STR_EQ(c.instructions, "hi");
  EXPECT_TRUE(c.out_text && !c.out_audio);
  EXPECT_INT_EQ(c.in_fmt, RT_FMT_ULAW);
  EXPECT_INT_EQ(c.td, RT_TD_SERVER_VAD);
  EXPECT_INT_EQ(c.td_silence_ms, 300);
  EXPECT_STR_EQ(c.voice, "echo");
  json_t *ga = rt_config_json(&c, false);
  EXPECT_STR_EQ(json_string_value(json_object_get(ga, "type")), "realtime");
  EXPECT_STR_EQ(json_string_value(json_object_get(json_object_get(json_object_get(json_object_get(ga, "audio"), "input"),
                                                                  "format"),
                                                  "type")),
                "audio/pcmu");
  json_t *beta = rt_config_json(&c, true);
  EXPECT_STR_EQ(json_string_value(json_object_get(beta, "input_audio_format")), "g711_ulaw");
  EXPECT_STR_EQ(json_string_value(json_object_get(beta, "voice")), "echo");
  /* The GA rendering reads back to the same configuration. */
  rt_config d;
  rt_config_defaults(&d, false, NULL);
  ASSERT_INT_EQ(rt_config_apply(&d, ga, false, true, "session", NULL), 0);
  EXPECT_INT_EQ(d.in_fmt, RT_FMT_ULAW);
  EXPECT_INT_EQ(d.td_silence_ms, 300);
  EXPECT_TRUE(d.out_text && !d.out_audio);
  rt_config_free(&d);
  json_decref(ga);
  json_decref(beta);
  json_decref(s);
  rt_config_free(&c);
}

TEST(realtime_config_errors_name_the_field_and_leave_it_unchanged) {
  rt_config c;
  rt_config_defaults(&c, false, NULL);
  const char *param = NULL;
  json_t *s = parse("{\"type\":\"realtime\",\"instructions\":\"changed\",\"audio\":{\"output\":{\"format\":"
                    "{\"type\":\"audio/mp3\"}}}}");
  EXPECT_INT_EQ(rt_config_apply(&c, s, false, true, "session", &param), ERR_INVALID);
  EXPECT_STR_EQ(param, "session.audio.output.format");
  EXPECT_TRUE(strcmp(c.instructions, "changed") != 0);
  json_decref(s);
  s = parse("{\"instructions\":\"x\"}");
  EXPECT_INT_EQ(rt_config_apply(&c, s, false, true, "session", &param), ERR_INVALID);
  EXPECT_STR_EQ(param, "session.type");
  json_decref(s);
  s = parse("{\"turn_detection\":{\"type\":\"server_vad\",\"threshold\":3}}");
  EXPECT_INT_EQ(rt_config_apply(&c, s, true, false, "session", &param), ERR_RANGE);
  EXPECT_STR_EQ(param, "session.turn_detection.threshold");
  json_decref(s);
  s = parse("{\"tools\":[{\"type\":\"function\"}]}");
  EXPECT_INT_EQ(rt_config_apply(&c, s, true, false, "response", &param), ERR_INVALID);
  EXPECT_STR_EQ(param, "response.tools[0]");
  json_decref(s);
  s = parse("{\"turn_detection\":null,\"input_audio_format\":\"g711_alaw\",\"max_response_output_tokens\":\"inf\"}");
  EXPECT_INT_EQ(rt_config_apply(&c, s, true, false, "session", &param), 0);
  EXPECT_INT_EQ(c.td, RT_TD_NONE);
  EXPECT_INT_EQ(c.in_fmt, RT_FMT_ALAW);
  EXPECT_INT_EQ(rt_fmt_rate(c.in_fmt), 8000);
  json_decref(s);
  rt_config_free(&c);
}

TEST(realtime_semantic_vad_maps_eagerness_to_silence) {
  rt_config c;
  rt_config_defaults(&c, false, NULL);
  json_t *s = parse("{\"turn_detection\":{\"type\":\"semantic_vad\",\"eagerness\":\"high\"}}");
  ASSERT_INT_EQ(rt_config_apply(&c, s, true, false, "session", NULL), 0);
  EXPECT_INT_EQ(c.td, RT_TD_SEMANTIC_VAD);
  EXPECT_INT_EQ(c.td_silence_ms, 250);
  json_decref(s);
  rt_config_free(&c);
}

TEST(realtime_beta_names_and_items) {
  EXPECT_STR_EQ(rt_beta_event_name("response.output_text.delta"), "response.text.delta");
  EXPECT_STR_EQ(rt_beta_event_name("response.output_audio_transcript.done"), "response.audio_transcript.done");
  EXPECT_STR_EQ(rt_beta_event_name("conversation.item.added"), "conversation.item.created");
  EXPECT_TRUE(rt_beta_event_name("conversation.item.done") == NULL);
  EXPECT_STR_EQ(rt_beta_event_name("response.done"), "response.done");
  json_t *it = parse("{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":"
                     "\"a\"},{\"type\":\"output_audio\",\"transcript\":\"b\"}]}");
  json_t *b = rt_item_beta(it);
  json_t *content = json_object_get(b, "content");
  EXPECT_STR_EQ(json_string_value(json_object_get(json_array_get(content, 0), "type")), "text");
  EXPECT_STR_EQ(json_string_value(json_object_get(json_array_get(content, 1), "type")), "audio");
  /* The original is untouched. */
  EXPECT_STR_EQ(json_string_value(json_object_get(json_array_get(json_object_get(it, "content"), 0), "type")),
                "output_text");
  json_decref(b);
  json_decref(it);
}

TEST(realtime_base64_and_key_hash) {
  char *e = rt_b64_encode("hello!", 6);
  ASSERT_TRUE(e != NULL);
  EXPECT_STR_EQ(e, "aGVsbG8h");
  uint8_t *d = NULL;
  size_t n = 0;
  ASSERT_INT_EQ(rt_b64_decode(e, strlen(e), &d, &n), 0);
  EXPECT_INT_EQ(n, 6);
  EXPECT_TRUE(memcmp(d, "hello!", 6) == 0);
  free(d);
  free(e);
  EXPECT_INT_EQ(rt_b64_decode("@@@@", 4, &d, &n), ERR_PARSE);
  EXPECT_INT_EQ(rt_b64_decode("abc", 3, &d, &n), ERR_PARSE);
  EXPECT_INT_EQ(rt_b64_decode("a=bc", 4, &d, &n), ERR_PARSE);
  ASSERT_INT_EQ(rt_b64_decode("", 0, &d, &n), 0);
  EXPECT_INT_EQ(n, 0);
  free(d);
  char h[65];
  rt_key_hash("abc", h);
  EXPECT_STR_EQ(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
