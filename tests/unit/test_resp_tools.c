/*
 * test_resp_tools.c - the Responses tool kinds (src/api/openai/resp_tools.c):
 * which request tools the model sees and under which names, the output
 * item each kind's call becomes (local_shell_call, shell_call,
 * apply_patch_call, computer_call, custom_tool_call, a namespaced
 * function_call) with the fields the SDK types require, the way back from
 * a replayed call item to the canonical tool call the template renders,
 * the strict/parameters echo, and tool_choice forms. The API tests force
 * calls through a random model only where the arguments are bounded (a
 * namespace member, a custom tool with a regex); the fixed-schema kinds'
 * items are checked here with arguments written by hand.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/openai/resp.h"
#include "base/err.h"
#include "base/util.h"
#include "test.h"

static json_t *load(const char *text) {
  json_error_t e;
  json_t *v = json_loads(text, 0, &e);
  if (!v) fprintf(stderr, "bad test JSON at %d: %s\n", e.column, e.text);
  return v;
}

static const char *TOOLS =
    "[{\"type\":\"local_shell\"},{\"type\":\"shell\"},{\"type\":\"apply_patch\"},"
    "{\"type\":\"computer_use_preview\",\"display_width\":1024,\"display_height\":768,\"environment\":\"linux\"},"
    "{\"type\":\"custom\",\"name\":\"word\",\"format\":{\"type\":\"grammar\",\"syntax\":\"regex\",\"definition\":\"[a-z]+\"}},"
    "{\"type\":\"web_search\"},{\"type\":\"mcp\",\"server_label\":\"x\"},"
    "{\"type\":\"namespace\",\"name\":\"crm\",\"description\":\"CRM.\",\"tools\":[{\"type\":\"function\",\"name\":\"lookup\"},"
    "{\"type\":\"custom\",\"name\":\"note\"}]},"
    "{\"type\":\"function\",\"name\":\"ping\"}]";

TEST(resp_tools_expose_client_tools_and_skip_hosted_ones) {
  json_t *tools = load(TOOLS), *chat = NULL;
  resp_tools *t = NULL;
  ASSERT_INT_EQ(resp_tools_parse(tools, &t, &chat), 0);
  static const char *const names[] = {"local_shell", "shell", "apply_patch", "computer", "word", "crm.lookup", "crm.note", "ping"};
  ASSERT_INT_EQ(json_array_size(chat), ARRAY_LEN(names));
  ASSERT_INT_EQ(resp_tools_count(t), ARRAY_LEN(names));
  for (size_t i = 0; i < ARRAY_LEN(names); i++) {
    json_t *fn = json_object_get(json_array_get(chat, i), "function");
    EXPECT_STR_EQ(json_string_value(json_object_get(json_array_get(chat, i), "type")), "function");
    EXPECT_STR_EQ(json_string_value(json_object_get(fn, "name")), names[i]);
    EXPECT_TRUE(resp_tools_find(t, names[i]) != NULL);
  }
  /* fixed-name kinds carry their action schema; computer its display */
  json_t *computer = json_object_get(json_array_get(chat, 3), "function");
  EXPECT_STR_CONTAINS(json_string_value(json_object_get(computer, "description")), "1024x768");
  EXPECT_TRUE(json_is_object(json_object_get(computer, "parameters")));
  /* a custom tool's regex becomes an anchored pattern on its input */
  json_t *word = json_object_get(json_array_get(chat, 4), "function");
  EXPECT_STR_EQ(json_string_value(json_object_get(
                    json_object_get(json_object_get(json_object_get(word, "parameters"), "properties"), "input"), "pattern")),
                "^([a-z]+)$");
  /* namespace members keep their own name and the namespace */
  const resp_tool *lookup = resp_tools_find(t, "crm.lookup");
  EXPECT_INT_EQ(lookup->kind, RESP_TOOL_FUNCTION);
  EXPECT_STR_EQ(lookup->name, "lookup");
  EXPECT_STR_EQ(lookup->ns, "crm");
  EXPECT_INT_EQ(resp_tools_find(t, "crm.note")->kind, RESP_TOOL_CUSTOM);
  EXPECT_TRUE(resp_tools_find(t, "web_search") == NULL);
  resp_tools_free(t);
  json_decref(chat);
  json_decref(tools);
  /* only hosted tools: nothing for the template */
  tools = load("[{\"type\":\"web_search_preview\"},{\"type\":\"file_search\",\"vector_store_ids\":[]}]");
  EXPECT_INT_EQ(resp_tools_parse(tools, &t, &chat), 0);
  EXPECT_TRUE(t == NULL && chat == NULL);
  json_decref(tools);
}

/* The item of a call to `exposed` with args, checked against want (every
 * key of want must be equal in the item), then replayed: the canonical
 * call must name exposed again with arguments that rebuild the item. */
static void check_call(const resp_tools *t, const char *exposed, const char *args, const char *want_json) {
  const resp_tool *tool = resp_tools_find(t, exposed);
  ASSERT_TRUE(tool != NULL);
  json_t *it = resp_tool_call_item(tool, "x_1", "call_1", exposed, args, "completed");
  ASSERT_TRUE(it != NULL);
  json_t *want = load(want_json);
  const char *k;
  json_t *v;
  json_object_foreach(want, k, v) {
    if (!json_equal(json_object_get(it, k), v)) {
      char *got = json_dumps(it, JSON_COMPACT);
      TEST_CHECK_(0, 0, "%s: key %s differs in %s", exposed, k, got);
      free(got);
    }
  }
  EXPECT_STR_EQ(json_string_value(json_object_get(it, "call_id")), "call_1");
  EXPECT_STR_EQ(json_string_value(json_object_get(it, "status")), "completed");
  json_t *call = resp_item_call_to_chat(it);
  ASSERT_TRUE(call != NULL);
  json_t *fn = json_object_get(call, "function");
  EXPECT_STR_EQ(json_string_value(json_object_get(fn, "name")), exposed);
  EXPECT_STR_EQ(json_string_value(json_object_get(call, "id")), "call_1");
  const json_t *a = json_object_get(fn, "arguments");
  char *text = json_is_string(a) ? strdup(json_string_value(a)) : json_dumps(a, JSON_COMPACT);
  json_t *again = resp_tool_call_item(tool, "x_1", "call_1", exposed, text, "completed");
  EXPECT_TRUE(json_equal(again, it));
  free(text);
  json_decref(again);
  json_decref(call);
  json_decref(want);
  json_decref(it);
}

TEST(resp_tools_calls_become_their_kinds_items_and_replay) {
  json_t *tools = load(TOOLS), *chat = NULL;
  resp_tools *t = NULL;
  ASSERT_INT_EQ(resp_tools_parse(tools, &t, &chat), 0);
  check_call(t, "local_shell", "{\"command\":[\"ls\",\"-l\"],\"working_directory\":\"/tmp\"}",
             "{\"type\":\"local_shell_call\",\"action\":{\"type\":\"exec\",\"command\":[\"ls\",\"-l\"],"
             "\"working_directory\":\"/tmp\",\"env\":{},\"timeout_ms\":null,\"user\":null}}");
  check_call(t, "shell", "{\"commands\":[\"git status\"]}",
             "{\"type\":\"shell_call\",\"action\":{\"commands\":[\"git status\"],\"timeout_ms\":null,"
             "\"max_output_length\":null},\"environment\":null}");
  check_call(t, "apply_patch", "{\"type\":\"delete_file\",\"path\":\"a.c\"}",
             "{\"type\":\"apply_patch_call\",\"operation\":{\"type\":\"delete_file\",\"path\":\"a.c\"}}");
  check_call(t, "apply_patch", "{\"type\":\"create_file\",\"path\":\"b.c\",\"diff\":\"+x\\n\"}",
             "{\"type\":\"apply_patch_call\",\"operation\":{\"type\":\"create_file\",\"path\":\"b.c\",\"diff\":\"+x\\n\"}}");
  check_call(t, "computer", "{\"type\":\"click\",\"x\":3,\"y\":4,\"button\":\"left\"}",
             "{\"type\":\"computer_call\",\"action\":{\"type\":\"click\",\"x\":3,\"y\":4,\"button\":\"left\"},"
             "\"pending_safety_checks\":[]}");
  check_call(t, "word", "{\"input\":\"hello\"}", "{\"type\":\"custom_tool_call\",\"name\":\"word\",\"input\":\"hello\"}");
  check_call(t, "crm.note", "{\"input\":\"call back\"}",
             "{\"type\":\"custom_tool_call\",\"name\":\"note\",\"namespace\":\"crm\",\"input\":\"call back\"}");
  check_call(t, "crm.lookup", "{\"id\":\"7\"}",
             "{\"type\":\"function_call\",\"name\":\"lookup\",\"namespace\":\"crm\",\"arguments\":\"{\\\"id\\\":\\\"7\\\"}\"}");
  check_call(t, "ping", "{}", "{\"type\":\"function_call\",\"name\":\"ping\",\"arguments\":\"{}\"}");
  /* a custom call whose model wrote no "input" passes its text on */
  json_t *raw = resp_tool_call_item(resp_tools_find(t, "word"), "x", "c", "word", "not json", "completed");
  EXPECT_STR_EQ(json_string_value(json_object_get(raw, "input")), "not json");
  json_decref(raw);
  /* an incomplete apply_patch call says completed: its type knows no more */
  json_t *ap = resp_tool_call_item(resp_tools_find(t, "apply_patch"), "x", "c", NULL, "{", "incomplete");
  EXPECT_STR_EQ(json_string_value(json_object_get(ap, "status")), "completed");
  json_decref(ap);
  resp_tools_free(t);
  json_decref(chat);
  json_decref(tools);
}

TEST(resp_tools_outputs_render_as_tool_messages) {
  struct {
    const char *item, *content;
  } cases[] = {
      {"{\"type\":\"shell_call_output\",\"call_id\":\"c\",\"output\":[{\"stdout\":\"ok\",\"stderr\":\"warn\","
       "\"outcome\":{\"type\":\"exit\",\"exit_code\":2}},{\"stdout\":\"\",\"stderr\":\"\",\"outcome\":{\"type\":\"timeout\"}}]}",
       "ok\nstderr:\nwarn\n(exit code 2)\n(timed out)"},
      {"{\"type\":\"local_shell_call_output\",\"id\":\"c\",\"output\":\"files\"}", "files"},
      {"{\"type\":\"apply_patch_call_output\",\"call_id\":\"c\",\"status\":\"failed\",\"output\":\"no such file\"}",
       "failed: no such file"},
      {"{\"type\":\"custom_tool_call_output\",\"call_id\":\"c\",\"output\":[{\"type\":\"input_text\",\"text\":\"a\"}]}", "a"},
  };
  for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
    json_t *it = load(cases[i].item), *msg = NULL;
    const char *type = json_string_value(json_object_get(it, "type"));
    EXPECT_TRUE(resp_item_is_output(type));
    EXPECT_INT_EQ(resp_item_check(it, type, "input[0]"), 0);
    ASSERT_INT_EQ(resp_item_output_to_chat(it, "input[0]", &msg), 0);
    EXPECT_STR_EQ(json_string_value(json_object_get(msg, "role")), "tool");
    EXPECT_STR_EQ(json_string_value(json_object_get(msg, "tool_call_id")), "c");
    EXPECT_STR_EQ(json_string_value(json_object_get(msg, "content")), cases[i].content);
    json_decref(msg);
    json_decref(it);
  }
  json_t *shot = load("{\"type\":\"computer_call_output\",\"call_id\":\"c\",\"output\":{\"type\":\"computer_screenshot\"}}");
  EXPECT_INT_EQ(resp_item_check(shot, "computer_call_output", "input[3]"), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "input[3].output");
  json_decref(shot);
  json_t *bad = load("{\"type\":\"shell_call\",\"call_id\":\"c\"}");
  EXPECT_INT_EQ(resp_item_check(bad, "shell_call", "input[1]"), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "action");
  json_decref(bad);
}

TEST(resp_tools_echo_strict_and_choices) {
  json_t *tools = load("[{\"type\":\"function\",\"name\":\"a\"},{\"type\":\"function\",\"name\":\"b\",\"strict\":false,"
                       "\"parameters\":{\"type\":\"object\"}},{\"type\":\"shell\"}]");
  json_t *echo = resp_tools_echo(tools);
  json_t *want = load("[{\"type\":\"function\",\"name\":\"a\",\"strict\":true,\"parameters\":null},{\"type\":\"function\","
                      "\"name\":\"b\",\"strict\":false,\"parameters\":{\"type\":\"object\"}},{\"type\":\"shell\"}]");
  EXPECT_TRUE(json_equal(echo, want));
  json_decref(echo);
  json_decref(want);
  resp_tools *t = NULL;
  json_t *chat = NULL;
  ASSERT_INT_EQ(resp_tools_parse(tools, &t, &chat), 0);
  const char *forced = NULL;
  json_t *tc = load("{\"type\":\"shell\"}");
  EXPECT_INT_EQ(resp_tools_choice(t, tc, &forced), 0);
  EXPECT_STR_EQ(forced, "shell");
  json_decref(tc);
  tc = load("{\"type\":\"apply_patch\"}");
  EXPECT_INT_EQ(resp_tools_choice(t, tc, &forced), ERR_NOT_FOUND);
  json_decref(tc);
  tc = load("{\"type\":\"image_generation\"}");
  EXPECT_INT_EQ(resp_tools_choice(t, tc, &forced), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "hosted");
  json_decref(tc);
  resp_tools_free(t);
  json_decref(chat);
  json_decref(tools);
  /* a bad tool list names the entry */
  tools = load("[{\"type\":\"function\",\"name\":\"x\"},{\"type\":\"function\"}]");
  EXPECT_INT_EQ(resp_tools_parse(tools, &t, &chat), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "tools[1].name");
  json_decref(tools);
}
