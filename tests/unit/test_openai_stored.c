/*
 * test_openai_stored.c - stored Responses objects and items whose text holds
 * a NUL load again. A model may emit the byte token <0x00>; the server
 * stores what json_dumps writes ("\u0000"), which jansson reads back only
 * with JSON_ALLOW_NUL (a random test model hit this: DELETE
 * /v1/responses/{id} answered 500). The rows are written straight into a
 * real store, as the create path would have written them, so the NUL is
 * there every run; the real route table then serves them over loopback
 * (loopback.h): GET and DELETE of the response, its input_items, and a
 * conversation's metadata and items one by one and listed.
 *
 * Expectations are written by hand from ../shared/specs/openai.md 4.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/openai/openai.h"
#include "base/buf.h"
#include "base/util.h"
#include "loopback.h"
#include "store/store.h"
#include "test.h"

/* "a", NUL, "b": the text of every stored item below. */
static const char NUL_TEXT[] = {'a', '\0', 'b'};

/* A message item {id, type, role, content: [{type: part, text: NUL_TEXT}]}
 * serialized the way the server stores it. */
static char *item_text(const char *id, const char *role, const char *part) {
  json_t *it = json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:s%}]}", "id", id, "type", "message", "role", role,
                         "status", "completed", "content", "type", part, "text", NUL_TEXT, sizeof NUL_TEXT);
  char *s = it ? json_dumps(it, JSON_COMPACT) : NULL;
  json_decref(it);
  return s;
}

/* Parses an answer body (NULs allowed, as a client's parser allows them). */
static json_t *parse(const buf *b) { return json_loadb(b->data ? b->data : "", b->len, JSON_ALLOW_NUL, NULL); }

/* True when item (a message) carries NUL_TEXT as its first part's text. */
static bool has_nul_text(const json_t *item) {
  const json_t *t = json_object_get(json_array_get(json_object_get(item, "content"), 0), "text");
  return json_is_string(t) && json_string_length(t) == sizeof NUL_TEXT &&
         memcmp(json_string_value(t), NUL_TEXT, sizeof NUL_TEXT) == 0;
}

TEST(openai_stored_nul_text_loads) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/openai-stored-%d", test_tmpdir(), (int)getpid());
  store *st = NULL;
  ASSERT_INT_EQ(store_open(dir, &st), 0);
  openai_ctx oc = {.st = st};
  const http_route *routes;
  size_t n_routes = openai_responses_routes(&oc, &routes);
  http_server *srv = NULL;
  ASSERT_INT_EQ(loopback_start(routes, n_routes, store_spool_dir(st), &srv), 0);
  int port = http_server_port(srv);
  buf out = BUF_INIT;

  /* a completed response whose output text holds a NUL, with one input item
   * and one output item holding one too */
  char *in_item = item_text("msg_in", "user", "input_text");
  char *out_item = item_text("msg_out", "assistant", "output_text");
  json_t *out_obj = json_loads(out_item, JSON_ALLOW_NUL, NULL);
  json_t *resp = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o], s:b}", "id", "resp_nul", "object", "response",
                           "created_at", (json_int_t)1760000000, "status", "completed", "model", "org/tiny", "output",
                           out_obj, "store", 1);
  char *body = resp ? json_dumps(resp, JSON_COMPACT) : NULL;
  json_decref(resp);
  ASSERT_TRUE(in_item && out_item && body);
  EXPECT_TRUE(strstr(body, "a\\u0000b") != NULL); /* the stored form the server reads back */
  store_response r = {.id = "resp_nul", .created_at = 1760000000, .updated_at = 1760000000, .status = "completed",
                      .model = "org/tiny", .body = body, .stored = true};
  ASSERT_INT_EQ(store_response_put(st, &r), 0);
  store_item in = {.item_id = "msg_in", .kind = "input", .body = in_item, .created_at = 1760000000};
  store_item outi = {.item_id = "msg_out", .kind = "output", .body = out_item, .created_at = 1760000000};
  ASSERT_INT_EQ(store_response_items_append(st, "resp_nul", &in, 1), 0);
  ASSERT_INT_EQ(store_response_items_append(st, "resp_nul", &outi, 1), 0);

  EXPECT_INT_EQ(loopback_request(port, "GET", "/v1/responses/resp_nul", NULL, NULL, NULL, &out), 200);
  json_t *got = parse(&out);
  EXPECT_STR_EQ(json_string_value(json_object_get(got, "id")), "resp_nul");
  EXPECT_TRUE(has_nul_text(json_array_get(json_object_get(got, "output"), 0)));
  json_decref(got);

  EXPECT_INT_EQ(loopback_request(port, "GET", "/v1/responses/resp_nul/input_items", NULL, NULL, NULL, &out), 200);
  got = parse(&out);
  json_t *data = json_object_get(got, "data");
  EXPECT_INT_EQ(json_array_size(data), 1);
  EXPECT_STR_EQ(json_string_value(json_object_get(json_array_get(data, 0), "id")), "msg_in");
  EXPECT_TRUE(has_nul_text(json_array_get(data, 0)));
  json_decref(got);

  EXPECT_INT_EQ(loopback_request(port, "DELETE", "/v1/responses/resp_nul", NULL, NULL, NULL, &out), 200);
  got = parse(&out);
  EXPECT_TRUE(json_is_true(json_object_get(got, "deleted")));
  json_decref(got);
  EXPECT_INT_EQ(loopback_request(port, "GET", "/v1/responses/resp_nul", NULL, NULL, NULL, &out), 404);

  /* a conversation holding the output item: one by one and listed */
  store_conversation c = {.id = "conv_nul", .created_at = 1760000000, .updated_at = 1760000000,
                          .metadata = "{\"topic\":\"a\\u0000b\"}"};
  store_item ci = {.item_id = "msg_out", .body = out_item, .created_at = 1760000000};
  ASSERT_INT_EQ(store_conversation_create(st, &c, &ci, 1), 0);
  /* its metadata (a client's strings) keeps the NUL too */
  EXPECT_INT_EQ(loopback_request(port, "GET", "/v1/conversations/conv_nul", NULL, NULL, NULL, &out), 200);
  got = parse(&out);
  const json_t *topic = json_object_get(json_object_get(got, "metadata"), "topic");
  EXPECT_TRUE(json_is_string(topic) && json_string_length(topic) == sizeof NUL_TEXT &&
              memcmp(json_string_value(topic), NUL_TEXT, sizeof NUL_TEXT) == 0);
  json_decref(got);
  EXPECT_INT_EQ(loopback_request(port, "GET", "/v1/conversations/conv_nul/items/msg_out", NULL, NULL, NULL, &out), 200);
  got = parse(&out);
  EXPECT_TRUE(has_nul_text(got));
  json_decref(got);
  EXPECT_INT_EQ(loopback_request(port, "GET", "/v1/conversations/conv_nul/items", NULL, NULL, NULL, &out), 200);
  got = parse(&out);
  EXPECT_INT_EQ(json_array_size(json_object_get(got, "data")), 1);
  EXPECT_TRUE(has_nul_text(json_array_get(json_object_get(got, "data"), 0)));
  json_decref(got);

  free(in_item);
  free(out_item);
  free(body);
  buf_free(&out);
  http_server_free(srv);
  store_close(st);
}
