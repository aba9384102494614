/*
 * fuzz_tmpl.c - libFuzzer harness for the Jinja chat-template interpreter:
 * the input is a template source, compiled and rendered against a small
 * conversation (system, user, assistant with a tool call, tool result) and
 * add_generation_prompt. Any input must compile or fail cleanly, and render
 * or fail cleanly within the interpreter's limits.
 */
#include "fuzz.h"
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "tmpl/tmpl.h"


static const char REQUEST[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Weather in Paris? \\u00e9\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
    "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"sunny\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}}],"
    "\"add_generation_prompt\":true}";

#include <jansson.h>

FUZZ_TARGET(tmpl) {
  tmpl *t = NULL;
  if (tmpl_compile((const char *)data, size, &t) != 0) return 0;
  json_t *req = json_loads(REQUEST, 0, NULL);
  tmpl_heap *h = tmpl_heap_new();
  tmpl_value g;
  if (req && h && tmpl_globals_from_request(h, req, "<s>", "</s>", &g) == 0) {
    buf out = BUF_INIT;
    tmpl_render(t, g, &out);
    buf_free(&out);
  }
  if (h) tmpl_heap_free(h);
  json_decref(req);
  tmpl_free(t);
  return 0;
}
