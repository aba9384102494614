/*
 * test_outparse_templates.c - the output parsers read back what each
 * family's own chat template writes for an assistant tool-call turn.
 *
 * The reference is the template itself, rendered by Python jinja2
 * (tools/render_jinja.py, configured as transformers configures it): a
 * conversation [user] with add_generation_prompt gives the prompt; the same
 * conversation plus an assistant turn with one or two tool calls gives the
 * prompt followed by exactly the text the model is trained to produce. That
 * suffix is fed to the family's parser (whole, byte by byte, in random
 * chunks), and the calls must come back with their names and with arguments
 * equal (as JSON values, compared with jansson) to the ones rendered, with no
 * other text than the turn's end token. The arguments hold every format's
 * markers inside a string, escaped quotes and a non-ASCII character. Skipped
 * when ../shared/templates, python3 or jinja2 is absent.
 */
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "test.h"
#include "tmpl/outparse.h"

#define A1_JSON                                                                               \
  "{\"city\": \"Paris\", \"unit\": \"\xc2\xb0"                                                  \
  "C\", \"note\": \"a \\\"quoted\\\" </tool_call> [TOOL_CALLS] <function=x> >>>all }\"}"
#define A2_JSON "{\"tz\": \"Europe/Paris\", \"n\": [1, 2.5, true, null]}"

static const char *const CONVS[] = {"one_obj", "one_str", "two_obj", "two_str"};

static const struct row {
  const char *tmpl;
  enum outparse_format format;
  const char *think_open, *think_close;
  const char *prompt_strip; /* ends the prompt but not the history (an empty think block) */
  unsigned convs;           /* bit i: CONVS[i] renders with this template */
  bool starts_in_reasoning; /* the prompt opens the think block */
} ROWS[] = {
    {"Qwen-Qwen3-0.6B", OUTPARSE_HERMES, "<think>", "</think>", NULL, 15, false},
    {"Qwen-QwQ-32B", OUTPARSE_HERMES, "<think>", "</think>", "<think>\n</think>", 15, false},
    {"Qwen-Qwen2.5-7B-Instruct", OUTPARSE_HERMES, NULL, NULL, NULL, 15, false},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", OUTPARSE_HERMES, NULL, NULL, NULL, 15, false},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", OUTPARSE_HERMES, NULL, NULL, NULL, 15, false},
    {"ibm-granite-granite-4.1", OUTPARSE_HERMES, "<think>", "</think>", NULL, 15, false},
    {"meta-llama-Llama-3.1-8B-Instruct", OUTPARSE_LLAMA3, NULL, NULL, NULL, 3, false},
    {"meta-llama-Llama-3.2-3B-Instruct", OUTPARSE_LLAMA3, NULL, NULL, NULL, 3, false},
    {"meta-llama-Llama-3.3-70B-Instruct", OUTPARSE_LLAMA3, NULL, NULL, NULL, 3, false},
    {"mistralai-Mistral-Nemo-Instruct-2407", OUTPARSE_MISTRAL, NULL, NULL, NULL, 15, false},
    {"unsloth-mistral-Devstral-Small-2507", OUTPARSE_MISTRAL, NULL, NULL, NULL, 15, false},
    {"mistralai-Ministral-3-14B-Reasoning-2512", OUTPARSE_MISTRAL, "[THINK]", "[/THINK]", NULL, 15, false},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", OUTPARSE_DEEPSEEK, "<think>", "</think>", "<think>\n</think>", 15, false},
    {"meetkai-functionary-medium-v3.1", OUTPARSE_FUNCTIONARY_V31, NULL, NULL, NULL, 15, false},
    {"meetkai-functionary-medium-v3.2", OUTPARSE_FUNCTIONARY_V32, NULL, NULL, NULL, 10, false},
    {"moonshotai-Kimi-K2", OUTPARSE_KIMI_K2, "<think>", "</think>", NULL, 15, false},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", OUTPARSE_COMMAND_R7B, "<|START_THINKING|>",
     "<|END_THINKING|>", NULL, 15, false},
    {"Qwen3-Coder", OUTPARSE_QWEN3_CODER, NULL, NULL, NULL, 5, false},
    {"Qwen3.5-4B", OUTPARSE_QWEN3_CODER, "<think>", "</think>", NULL, 5, true},
    {"GLM-4.7-Flash", OUTPARSE_GLM, "<think>", "</think>", "<think>", 5, true},
    {"ByteDance-Seed-OSS", OUTPARSE_SEED_OSS, "<seed:think>", "</seed:think>", NULL, 5, false},
    {"MiniMax-M1", OUTPARSE_MINIMAX_M1, "<think>", "</think>", NULL, 15, false},
    {"LFM2.5-8B-A1B", OUTPARSE_LFM2, "<think>", "</think>", NULL, 5, false},
};

/* End-of-turn tokens a render puts after the calls (never fed by the engine,
 * which stops on them; here they arrive as text and are allowed). The
 * DeepSeek R1 template also renders the turn's empty content as a second
 * "<｜Assistant｜><｜end▁of▁sentence｜>". */
static const char *const END_TOKENS[] = {
    "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<|end_of_text|>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>",
    /* Command R7B's template ends every render with the next turn's opening */
    "<|END_OF_TURN_TOKEN|>", "<|START_OF_TURN_TOKEN|>", "<|CHATBOT_TOKEN|>", "<|START_THINKING|>",
    "<|END_THINKING|>", "<end_of_sentence>", "<seed:eos>"};

typedef struct got {
  buf text, reasoning;
  buf names[4], args[4];
  int n_calls;
} got;

static void got_emit(void *ctx, const outparse_event *ev) {
  got *g = ctx;
  switch (ev->kind) {
  case OUTPARSE_TEXT: buf_append(&g->text, ev->text, ev->len); break;
  case OUTPARSE_REASONING: buf_append(&g->reasoning, ev->text, ev->len); break;
  case OUTPARSE_TOOL_CALL_BEGIN:
    if (g->n_calls < 4) buf_append_str(&g->names[g->n_calls], ev->name);
    g->n_calls++;
    break;
  case OUTPARSE_TOOL_CALL_ARGS:
    if (ev->tool_index >= 0 && ev->tool_index < 4) buf_append(&g->args[ev->tool_index], ev->text, ev->len);
    break;
  case OUTPARSE_TOOL_CALL_END: break;
  }
}

static void got_free(got *g) {
  buf_free(&g->text);
  buf_free(&g->reasoning);
  for (int i = 0; i < 4; i++) buf_free(&g->names[i]), buf_free(&g->args[i]);
}

static json_t *tool_call(const char *id, const char *name, const char *args_json, bool as_str) {
  json_t *args = as_str ? json_string(args_json) : json_loads(args_json, 0, NULL);
  return json_pack("{s:s, s:s, s:{s:s, s:o}}", "id", id, "type", "function", "function", "name", name,
                   "arguments", args);
}

static int write_convs(const char *dir) {
  json_t *tools = json_loads(
      "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather.\", "
      "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, "
      "\"unit\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}, {\"type\": \"function\", "
      "\"function\": {\"name\": \"get_time\", \"description\": \"Time.\", \"parameters\": {\"type\": "
      "\"object\", \"properties\": {\"tz\": {\"type\": \"string\"}}}}}]",
      0, NULL);
  if (!tools) return -1;
  for (int k = -1; k < 4; k++) {
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", "Weather and time in Paris?");
    if (k >= 0) {
      bool as_str = k % 2 == 1;
      json_t *calls = json_array();
      json_array_append_new(calls, tool_call("abc123450", "get_weather", A1_JSON, as_str));
      if (k >= 2) json_array_append_new(calls, tool_call("abc123451", "get_time", A2_JSON, as_str));
      json_array_append_new(msgs, json_pack("{s:s, s:s, s:o}", "role", "assistant", "content", "",
                                            "tool_calls", calls));
    }
    json_t *conv = json_pack("{s:o, s:O, s:b}", "messages", msgs, "tools", tools,
                             "add_generation_prompt", k < 0);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.json", dir, k < 0 ? "prompt" : CONVS[k]);
    int rc = json_dump_file(conv, path, JSON_INDENT(1));
    json_decref(conv);
    if (rc) {
      json_decref(tools);
      return -1;
    }
  }
  json_decref(tools);
  return 0;
}

/* Feeds text in pieces of `chunk` bytes (0 = whole). */
static int parse_with(const outparse_config *cfg, const char *text, size_t chunk, got *g) {
  memset(g, 0, sizeof *g);
  outparse *p;
  int rc = outparse_new(cfg, got_emit, g, &p);
  if (rc) return rc;
  size_t len = strlen(text);
  unsigned seed = 99;
  for (size_t at = 0; at < len && !rc;) {
    size_t n = chunk == 0 ? len : chunk == 7 ? 1 + (seed = seed * 1103515245u + 12345u) % 7 : chunk;
    if (n > len - at) n = len - at;
    rc = outparse_feed(p, text + at, n);
    at += n;
  }
  if (!rc) rc = outparse_finish(p);
  outparse_free(p);
  return rc;
}

/* Text left after removing end tokens and whitespace. */
static bool only_end_tokens(const char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    if (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r') {
      i++;
      continue;
    }
    bool hit = false;
    for (size_t k = 0; k < sizeof END_TOKENS / sizeof END_TOKENS[0] && !hit; k++) {
      size_t l = strlen(END_TOKENS[k]);
      if (n - i >= l && !memcmp(s + i, END_TOKENS[k], l)) i += l, hit = true;
    }
    if (!hit) return false;
  }
  return true;
}

TEST(outparse_template_roundtrip) {
  char rel[512], tdir_src[PATH_MAX];
  if (!test_shared_path("templates", rel, sizeof rel)) TEST_SKIP("../shared/templates is absent");
  if (!realpath(rel, tdir_src)) TEST_SKIP("../shared/templates is absent");
  struct stat st;
  if (stat("/usr/bin/python3", &st) != 0) TEST_SKIP("/usr/bin/python3 is absent");
  if (system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") != 0) TEST_SKIP("python3-jinja2 is absent");
  char tdir[600], cdir[600], odir[600], path[1200], cmd[2400];
  snprintf(tdir, sizeof tdir, "%s/t", test_tmpdir());
  snprintf(cdir, sizeof cdir, "%s/c", test_tmpdir());
  snprintf(odir, sizeof odir, "%s/o", test_tmpdir());
  ASSERT_INT_EQ(mkdir(tdir, 0700) | mkdir(cdir, 0700) | mkdir(odir, 0700), 0);
  for (size_t r = 0; r < sizeof ROWS / sizeof ROWS[0]; r++) {
    char src[PATH_MAX + 200];
    snprintf(src, sizeof src, "%s/%s.jinja", tdir_src, ROWS[r].tmpl);
    snprintf(path, sizeof path, "%s/%s.jinja", tdir, ROWS[r].tmpl);
    if (stat(src, &st) != 0) TEST_SKIP("a template of the table is missing from ../shared/templates");
    ASSERT_INT_EQ(symlink(src, path), 0);
  }
  ASSERT_INT_EQ(write_convs(cdir), 0);
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/render_jinja.py --batch '%s' '%s' '%s'", odir, tdir, cdir);
  ASSERT_INT_EQ(system(cmd), 0);

  json_t *want_args[2] = {json_loads(A1_JSON, 0, NULL), json_loads(A2_JSON, 0, NULL)};
  const char *want_names[2] = {"get_weather", "get_time"};
  ASSERT_TRUE(want_args[0] && want_args[1]);
  int n_checked = 0;
  for (size_t r = 0; r < sizeof ROWS / sizeof ROWS[0]; r++) {
    const struct row *row = &ROWS[r];
    snprintf(path, sizeof path, "%s/%s__prompt.out", odir, row->tmpl);
    char *prompt = test_read_file(path, NULL);
    TEST_CHECK_(prompt != NULL, 0, "%s: jinja2 did not render the prompt", row->tmpl);
    if (!prompt) continue;
    size_t plen = strlen(prompt);
    if (row->prompt_strip && plen >= strlen(row->prompt_strip) &&
        !strcmp(prompt + plen - strlen(row->prompt_strip), row->prompt_strip))
      plen -= strlen(row->prompt_strip);
    for (int k = 0; k < 4; k++) {
      if (!(row->convs & (1u << k))) continue;
      snprintf(path, sizeof path, "%s/%s__%s.out", odir, row->tmpl, CONVS[k]);
      char *full = test_read_file(path, NULL);
      TEST_CHECK_(full != NULL, 0, "%s %s: jinja2 did not render it", row->tmpl, CONVS[k]);
      if (!full) continue;
      TEST_CHECK_(strlen(full) >= plen && !memcmp(full, prompt, plen), 0,
                  "%s %s: the prompt is not a prefix of the rendered turn", row->tmpl, CONVS[k]);
      if (strlen(full) < plen || memcmp(full, prompt, plen)) {
        free(full);
        continue;
      }
      const char *turn = full + plen;
      int n_want = k >= 2 ? 2 : 1;
      outparse_config cfg = {.format = row->format, .think_open = row->think_open, .think_close = row->think_close,
                             .starts_in_reasoning = row->starts_in_reasoning, .tools_enabled = true};
      static const size_t chunks[] = {0, 1, 7};
      for (size_t c = 0; c < 3; c++) {
        got g;
        int rc = parse_with(&cfg, turn, chunks[c], &g);
        n_checked++;
        bool ok = rc == 0 && g.n_calls == n_want && g.reasoning.len == 0 &&
                  only_end_tokens(g.text.data ? g.text.data : "", g.text.len);
        for (int i = 0; ok && i < n_want; i++) {
          json_error_t jerr;
          json_t *a = g.args[i].data ? json_loads(g.args[i].data, 0, &jerr) : NULL;
          ok = g.names[i].data && !strcmp(g.names[i].data, want_names[i]) && a &&
               json_equal(a, want_args[i]);
          json_decref(a);
        }
        TEST_CHECK_(ok, 0,
                    "%s %s (chunks %zu): rc %d, %d calls; call 0 %s %s; text \"%s\"; reasoning \"%s\"\n  turn \"%s\"",
                    row->tmpl, CONVS[k], chunks[c], rc, g.n_calls,
                    g.names[0].data ? g.names[0].data : "-", g.args[0].data ? g.args[0].data : "-",
                    g.text.data ? g.text.data : "", g.reasoning.data ? g.reasoning.data : "", turn);
        got_free(&g);
      }
      free(full);
    }
    free(prompt);
  }
  json_decref(want_args[0]);
  json_decref(want_args[1]);
  EXPECT_INT_GE(n_checked, 3 * 72);
}
