/*
 * tmpl_probe.c - what a chat template does, measured by rendering it for a
 * fixed probe conversation rather than guessed from its source text (a
 * template may mention `tools` only to raise, or test `tools` and print
 * nothing of them).
 *
 *   tmpl_probe_opens_think  does the generation prompt open a think block?
 *   tmpl_renders_tools      does a tool given in `tools` reach the prompt?
 *   tmpl_renders_system     does a system message's text reach the prompt?
 *   tmpl_renders_effort     does the reasoning_effort global change it?
 *
 * The probe conversation is one user message ("Hi"), optionally after a
 * system message and with one tool, rendered with add_generation_prompt and
 * enable_thinking true and empty bos/eos tokens. A template that fails to
 * render the probe counts as "no" (-1 for the think probe). The probes run
 * once per model (model/family.c), and for the template a user hands to
 * `parley chat-template`; they leave no error behind.
 */
#include <ctype.h>
#include <string.h>

#include "base/err.h"
#include "tmpl/tmpl.h"

/* Distinctive texts the probes look for in the output. */
#define PROBE_TOOL "parley_probe_tool_5e1f"
#define PROBE_SYSTEM "parley probe system text 5e1f"

static int set_s(tmpl_heap *h, tmpl_value d, const char *key, const char *s) {
  tmpl_value v;
  int rc = tmpl_string(h, s, strlen(s), &v);
  return rc ? rc : tmpl_dict_set_str(h, d, key, v);
}

static int add_message(tmpl_heap *h, tmpl_value msgs, const char *role, const char *content) {
  tmpl_value m;
  int rc = tmpl_dict_new(h, &m);
  if (!rc) rc = set_s(h, m, "role", role);
  if (!rc) rc = set_s(h, m, "content", content);
  return rc ? rc : tmpl_list_push(h, msgs, m);
}

/* [{"type": "function", "function": {"name": PROBE_TOOL, "description",
 * "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
 * "required": ["q"]}}}] */
static int probe_tools(tmpl_heap *h, tmpl_value *out) {
  tmpl_value tool, fn, params, props, q, req, name;
  int rc = tmpl_list_new(h, out);
  if (!rc) rc = tmpl_dict_new(h, &tool);
  if (!rc) rc = tmpl_dict_new(h, &fn);
  if (!rc) rc = tmpl_dict_new(h, &params);
  if (!rc) rc = tmpl_dict_new(h, &props);
  if (!rc) rc = tmpl_dict_new(h, &q);
  if (!rc) rc = tmpl_list_new(h, &req);
  if (!rc) rc = set_s(h, q, "type", "string");
  if (!rc) rc = tmpl_dict_set_str(h, props, "q", q);
  if (!rc) rc = tmpl_string(h, "q", 1, &name);
  if (!rc) rc = tmpl_list_push(h, req, name);
  if (!rc) rc = set_s(h, params, "type", "object");
  if (!rc) rc = tmpl_dict_set_str(h, params, "properties", props);
  if (!rc) rc = tmpl_dict_set_str(h, params, "required", req);
  if (!rc) rc = set_s(h, fn, "name", PROBE_TOOL);
  if (!rc) rc = set_s(h, fn, "description", "Looks something up.");
  if (!rc) rc = tmpl_dict_set_str(h, fn, "parameters", params);
  if (!rc) rc = set_s(h, tool, "type", "function");
  if (!rc) rc = tmpl_dict_set_str(h, tool, "function", fn);
  return rc ? rc : tmpl_list_push(h, *out, tool);
}

/* Renders the probe conversation into out; 0 or the render's error. */
static int probe_render(const tmpl *t, bool with_system, bool with_tool, const char *effort, buf *out) {
  tmpl_heap *h = tmpl_heap_new();
  if (!h) return ERR_NOMEM;
  tmpl_value g, msgs, tools = tmpl_none();
  int rc = tmpl_dict_new(h, &g);
  if (!rc) rc = tmpl_list_new(h, &msgs);
  if (!rc && with_system) rc = add_message(h, msgs, "system", PROBE_SYSTEM);
  if (!rc) rc = add_message(h, msgs, "user", "Hi");
  if (!rc && with_tool) rc = probe_tools(h, &tools);
  if (!rc) rc = tmpl_dict_set_str(h, g, "messages", msgs);
  if (!rc) rc = tmpl_dict_set_str(h, g, "tools", tools);
  if (!rc) rc = tmpl_dict_set_str(h, g, "add_generation_prompt", tmpl_bool(true));
  if (!rc) rc = tmpl_dict_set_str(h, g, "enable_thinking", tmpl_bool(true));
  if (!rc) rc = set_s(h, g, "bos_token", "");
  if (!rc) rc = set_s(h, g, "eos_token", "");
  if (!rc && effort) rc = set_s(h, g, "reasoning_effort", effort);
  if (!rc) rc = tmpl_render(t, g, out);
  tmpl_heap_free(h);
  err_clear();
  return rc;
}

/* Whether the probe's output holds mark. */
static bool probe_shows(const tmpl *t, bool with_system, bool with_tool, const char *mark) {
  buf out = BUF_INIT;
  bool shown = t && probe_render(t, with_system, with_tool, NULL, &out) == 0 && out.data && strstr(out.data, mark);
  buf_free(&out);
  return shown;
}

bool tmpl_renders_tools(const tmpl *t) { return probe_shows(t, false, true, PROBE_TOOL); }

bool tmpl_renders_system(const tmpl *t) { return probe_shows(t, true, false, PROBE_SYSTEM); }

int tmpl_probe_opens_think(const tmpl *t, const char *open) {
  buf out = BUF_INIT;
  int opens = -1;
  if (t && open && probe_render(t, false, false, NULL, &out) == 0) {
    size_t n = out.len, k = strlen(open);
    while (n > 0 && isspace((unsigned char)out.data[n - 1])) n--;
    opens = n >= k && memcmp(out.data + n - k, open, k) == 0;
  }
  buf_free(&out);
  return opens;
}

bool tmpl_renders_effort(const tmpl *t) {
  buf lo = BUF_INIT, hi = BUF_INIT;
  bool differ = t && probe_render(t, false, false, "low", &lo) == 0 && probe_render(t, false, false, "high", &hi) == 0 &&
                (lo.len != hi.len || memcmp(lo.data ? lo.data : "", hi.data ? hi.data : "", lo.len) != 0);
  buf_free(&lo);
  buf_free(&hi);
  return differ;
}
