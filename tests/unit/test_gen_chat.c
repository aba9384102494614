/*
 * test_gen_chat.c - the conversion of canonical chat messages into a
 * template's input (gen_chat_render, api/gen.c), above all for templates
 * that do not render tools: the generic tool prompt must reach the prompt
 * text, word for word, in the system message or (for a template without
 * system messages) in front of the first user message, with the
 * conversation's calls and results written in the same Hermes format, and
 * such a request's output must be parsed in that format (gen_chat_prompt).
 * The expected texts are written out by hand from the templates' sources.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/gen.h"
#include "base/buf.h"
#include "base/err.h"
#include "gguf/gguf.h"
#include "tmpl/default_templates.h"
#include "test.h"

#define TOOLS                                                                                         \
  "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather of a city\","  \
  "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]"

/* The generic prompt for TOOLS, as tmpl_generic_tools_source writes it. */
#define TOOLS_PROMPT                                                                                          \
  "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"                          \
  "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"                     \
  "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather of a city\", " \
  "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, "                \
  "\"required\": [\"city\"]}}}\n</tools>\n\n"                                                                 \
  "For each function call, return a json object with function name and arguments within "                     \
  "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "               \
  "<args-json-object>}\n</tool_call>"

static tmpl *compile(const char *src) {
  tmpl *t = NULL;
  if (tmpl_compile(src, strlen(src), &t)) fprintf(stderr, "compile: %s\n", err_detail());
  return t;
}

/* Renders the request body `req` (messages, tools, tool_choice ignored)
 * through t measured by gen_chat_template_measure; NULL on error (printed). */
static char *render(const tmpl *t, const char *req, gen_chat_template *ct_out) {
  json_t *body = json_loads(req, 0, NULL);
  if (!body) return NULL;
  gen_chat_template ct = {.chat = t, .bos = "<s>", .eos = "</s>"};
  gen_chat_template_measure(&ct);
  if (ct_out) *ct_out = ct;
  gen_chat c = {.messages = json_object_get(body, "messages"), .tools = json_object_get(body, "tools"),
                .thinking = -1};
  buf out = BUF_INIT;
  int rc = gen_chat_render(&ct, &c, &out);
  if (rc) fprintf(stderr, "render: %s\n", err_detail());
  json_decref(body);
  if (rc) {
    buf_free(&out);
    return NULL;
  }
  return out.data ? out.data : calloc(1, 1);
}

/* Llama 2 (the family default a Llama 2 file without a template gets)
 * renders no tools: the generic prompt joins the system prompt, the call
 * and the result are written as Hermes text. */
TEST(gen_render_generic_tools_llama2) {
  tmpl *t = compile(tmpl_default_source(TMPL_DEFAULT_LLAMA2));
  ASSERT_TRUE(t != NULL);
  gen_chat_template ct;
  char *out = render(t,
                     "{\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},"
                     "{\"role\":\"user\",\"content\":\"Weather in Oslo?\"},"
                     "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
                     "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}}]},"
                     "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"12 C\"}],"
                     "\"tools\":" TOOLS "}",
                     &ct);
  EXPECT_FALSE(ct.renders_tools);
  EXPECT_TRUE(ct.renders_system);
  EXPECT_STR_EQ(out, "<s>[INST] <<SYS>>\nYou are terse.\n\n" TOOLS_PROMPT "\n<</SYS>>\n\nWeather in Oslo? [/INST]"
                     " <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call> </s>"
                     "<s>[INST] <tool_response>\n12 C\n</tool_response> [/INST]");
  free(out);
  /* no system message: one holding the prompt comes first; two results and
   * the user's next message share one user turn */
  out = render(t,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"Both?\"},"
               "{\"role\":\"assistant\",\"content\":\"Let me look.\",\"tool_calls\":["
               "{\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Rome\"}}},"
               "{\"id\":\"b\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Bern\"}}}]},"
               "{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":\"20 C\"},"
               "{\"role\":\"tool\",\"tool_call_id\":\"b\",\"content\":\"9 C\"},"
               "{\"role\":\"user\",\"content\":\"And now?\"}],"
               "\"tools\":" TOOLS "}",
               NULL);
  EXPECT_STR_EQ(out, "<s>[INST] <<SYS>>\n" TOOLS_PROMPT "\n<</SYS>>\n\nBoth? [/INST] Let me look.\n"
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>\n"
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Bern\"}}\n</tool_call> </s>"
                     "<s>[INST] <tool_response>\n20 C\n</tool_response>\n<tool_response>\n9 C\n</tool_response>\n"
                     "And now? [/INST]");
  free(out);
  /* without tools nothing is added */
  out = render(t, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":[]}", NULL);
  EXPECT_STR_EQ(out, "<s>[INST] Hi [/INST]");
  free(out);
  tmpl_free(t);
}

/* A template that renders no system message: the prompt goes in front of
 * the first user message. */
TEST(gen_render_generic_tools_without_system) {
  tmpl *t = compile("{% for m in messages %}{% if m.role != 'system' %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>"
                    "{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}");
  ASSERT_TRUE(t != NULL);
  gen_chat_template ct;
  char *out = render(t,
                     "{\"messages\":[{\"role\":\"system\",\"content\":\"Be kind.\"},{\"role\":\"user\",\"content\":\"Hi\"}],"
                     "\"tools\":" TOOLS "}",
                     &ct);
  EXPECT_FALSE(ct.renders_tools);
  EXPECT_FALSE(ct.renders_system);
  EXPECT_STR_EQ(out, "<user>" TOOLS_PROMPT "\n\nHi</user><assistant>");
  free(out);
  tmpl_free(t);
  /* Gemma 2's own template raises on a system message */
  char path[512];
  if (!test_shared_path("templates/google-gemma-2-2b-it.jinja", path, sizeof path))
    TEST_SKIP("../shared/templates is absent");
  char *src = test_read_file(path, NULL);
  ASSERT_TRUE(src != NULL);
  t = compile(src);
  free(src);
  ASSERT_TRUE(t != NULL);
  out = render(t, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":" TOOLS "}", &ct);
  EXPECT_FALSE(ct.renders_tools);
  EXPECT_FALSE(ct.renders_system);
  EXPECT_STR_EQ(out, "<s><start_of_turn>user\n" TOOLS_PROMPT "\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  free(out);
  tmpl_free(t);
}

/* A template that renders tools gets them as `tools`, and the messages as
 * they are (tool-call arguments as a mapping). */
TEST(gen_render_native_tools) {
  tmpl *t = compile("{% for t in tools %}[{{ t.function.name }}]{% endfor %}{% for m in messages %}"
                    "{% for c in m.tool_calls or [] %}{{ c.function.arguments is mapping }}"
                    "{% for k, v in c.function.arguments.items() %}{{ k }}={{ v }}{% endfor %}{% endfor %}"
                    "({{ m.role }}){% endfor %}");
  ASSERT_TRUE(t != NULL);
  gen_chat_template ct;
  char *out = render(t,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"\","
                     "\"tool_calls\":[{\"id\":\"x\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                     "\"arguments\":\"{\\\"city\\\": \\\"Oslo\\\"}\"}}]},{\"role\":\"tool\",\"content\":\"5 C\"}],"
                     "\"tools\":" TOOLS "}",
                     &ct);
  EXPECT_TRUE(ct.renders_tools);
  EXPECT_STR_EQ(out, "[get_weather](user)Truecity=Oslo(assistant)(tool)");
  free(out);
  tmpl_free(t);
}

/* The parser of a request with tools: the generic (Hermes) format where the
 * template does not show the tools or the family has no call syntax, the
 * family's own otherwise, the family's for tool_choice none; and a Hermes
 * call in the output is read as a call. */
struct got {
  int n_calls;
  char name[64];
  buf args;
};

static void on_ev(void *ctx, const outparse_event *ev) {
  struct got *g = ctx;
  if (ev->kind == OUTPARSE_TOOL_CALL_BEGIN) {
    g->n_calls++;
    snprintf(g->name, sizeof g->name, "%s", ev->name);
  } else if (ev->kind == OUTPARSE_TOOL_CALL_ARGS) {
    buf_append(&g->args, ev->text, ev->len);
  }
}

TEST(gen_prompt_parser_for_tools) {
  char vocab[512];
  if (!test_shared_path("vocab/ggml-vocab-llama-spm.gguf", vocab, sizeof vocab))
    TEST_SKIP("../shared/vocab is absent");
  gguf_file *f = NULL;
  ASSERT_INT_EQ(gguf_open(vocab, &f), 0);
  manager_model mm;
  memset(&mm, 0, sizeof mm);
  mm.name = "test";
  ASSERT_INT_EQ(tok_load(f, &mm.t), 0);
  gguf_close(f);
  mm.chat = compile(tmpl_default_source(TMPL_DEFAULT_LLAMA2));
  ASSERT_TRUE(mm.chat != NULL);
  mm.bos = "<s>";
  mm.eos = "</s>";
  json_t *tools = json_loads(TOOLS, 0, NULL);
  struct {
    family_parser parser;
    uint32_t caps;
    enum gen_tool_choice choice;
    enum outparse_format want;
    bool prompt_has_tools;
  } cases[] = {
      {FAMILY_PARSER_PLAIN, FAMILY_CAP_CHAT, GEN_TOOL_AUTO, OUTPARSE_HERMES, true},
      {FAMILY_PARSER_LLAMA3, FAMILY_CAP_CHAT, GEN_TOOL_REQUIRED, OUTPARSE_HERMES, true},
      {FAMILY_PARSER_PLAIN, FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS, GEN_TOOL_AUTO, OUTPARSE_HERMES, false},
      {FAMILY_PARSER_LLAMA3, FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS, GEN_TOOL_AUTO, OUTPARSE_LLAMA3, false},
      {FAMILY_PARSER_LLAMA3, FAMILY_CAP_CHAT, GEN_TOOL_NONE, OUTPARSE_LLAMA3, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    mm.fam.parser = cases[i].parser;
    mm.fam.caps = cases[i].caps;
    mm.fam.template_renders_system = true;
    json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"Weather in Oslo?\"}]", 0, NULL);
    gen_chat c = {.messages = msgs, .tools = tools, .tool_choice = cases[i].choice, .thinking = -1};
    buf text = BUF_INIT;
    tok_ids ids = TOK_IDS_INIT;
    outparse_config pc;
    ASSERT_INT_EQ(gen_chat_prompt(&mm, &c, &text, &ids, &pc), 0);
    TEST_CHECK_(pc.format == cases[i].want, 0, "case %zu: parser %s, want %s", i, outparse_format_name(pc.format),
                outparse_format_name(cases[i].want));
    EXPECT_INT_EQ(pc.tools_enabled, cases[i].choice != GEN_TOOL_NONE);
    /* the template shows no tools itself: only the generic prompt can */
    EXPECT_INT_EQ(strstr(text.data, "<tools>\n{\"type\": \"function\"") != NULL, cases[i].prompt_has_tools);
    EXPECT_TRUE(ids.n > 10);
    if (pc.format == OUTPARSE_HERMES && pc.tools_enabled) {
      struct got g = {0, "", BUF_INIT};
      outparse *op = NULL;
      ASSERT_INT_EQ(outparse_new(&pc, on_ev, &g, &op), 0);
      const char *said = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
      EXPECT_INT_EQ(outparse_feed(op, said, strlen(said)), 0);
      EXPECT_INT_EQ(outparse_finish(op), 0);
      outparse_free(op);
      EXPECT_INT_EQ(g.n_calls, 1);
      EXPECT_STR_EQ(g.name, "get_weather");
      EXPECT_STR_EQ(g.args.data, "{\"city\": \"Oslo\"}");
      buf_free(&g.args);
    }
    buf_free(&text);
    tok_ids_free(&ids);
    json_decref(msgs);
  }
  json_decref(tools);
  tmpl_free(mm.chat);
  tok_free(mm.t);
}

/* The reasoning level reaches the template as reasoning_effort: from the
 * request (gen_effort_of's names), LOW when thinking is switched off and no
 * level is given, the template's own default otherwise, and never over a
 * reasoning_effort the request passed in chat_template_kwargs. Rendered
 * through the harmony default, whose system message says the level. */
static char *render_effort(enum gen_effort e, int thinking, const char *kwargs) {
  tmpl *t = compile(tmpl_default_source(TMPL_DEFAULT_HARMONY));
  json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"Hi\"}]", 0, NULL);
  json_t *kw = kwargs ? json_loads(kwargs, 0, NULL) : NULL;
  gen_chat_template ct = {.chat = t, .bos = "", .eos = ""};
  gen_chat_template_measure(&ct);
  gen_chat c = {.messages = msgs, .thinking = thinking, .effort = e, .template_kwargs = kw};
  buf out = BUF_INIT;
  int rc = t && msgs ? gen_chat_render(&ct, &c, &out) : -1;
  json_decref(msgs);
  json_decref(kw);
  tmpl_free(t);
  if (rc) {
    buf_free(&out);
    return NULL;
  }
  return out.data;
}

TEST(gen_render_reasoning_effort) {
  EXPECT_INT_EQ(gen_effort_of("minimal"), GEN_EFFORT_LOW);
  EXPECT_INT_EQ(gen_effort_of("low"), GEN_EFFORT_LOW);
  EXPECT_INT_EQ(gen_effort_of("medium"), GEN_EFFORT_MEDIUM);
  EXPECT_INT_EQ(gen_effort_of("high"), GEN_EFFORT_HIGH);
  EXPECT_INT_EQ(gen_effort_of("xhigh"), GEN_EFFORT_HIGH);
  EXPECT_INT_EQ(gen_effort_of("max"), GEN_EFFORT_HIGH);
  EXPECT_INT_EQ(gen_effort_of("none"), GEN_EFFORT_DEFAULT);
  EXPECT_INT_EQ(gen_effort_of("on"), GEN_EFFORT_DEFAULT);
  EXPECT_INT_EQ(gen_effort_of(NULL), GEN_EFFORT_DEFAULT);
  static const struct {
    enum gen_effort e;
    int thinking;
    const char *kwargs, *want;
  } cases[] = {
      {GEN_EFFORT_HIGH, 1, NULL, "\n\nReasoning: high\n\n"},
      {GEN_EFFORT_LOW, 1, NULL, "\n\nReasoning: low\n\n"},
      {GEN_EFFORT_MEDIUM, -1, NULL, "\n\nReasoning: medium\n\n"},
      {GEN_EFFORT_DEFAULT, -1, NULL, "\n\nReasoning: medium\n\n"}, /* the template's default */
      {GEN_EFFORT_DEFAULT, 0, NULL, "\n\nReasoning: low\n\n"},     /* cannot be off: the lowest */
      {GEN_EFFORT_HIGH, 0, NULL, "\n\nReasoning: high\n\n"},
      {GEN_EFFORT_HIGH, 1, "{\"reasoning_effort\":\"low\"}", "\n\nReasoning: low\n\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *p = render_effort(cases[i].e, cases[i].thinking, cases[i].kwargs);
    TEST_CHECK_(p && strstr(p, cases[i].want), 0, "case %zu: %s", i, p ? p : "(render failed)");
    TEST_CHECK_(p && strstr(p, "<|start|>user<|message|>Hi<|end|><|start|>assistant"), 0, "case %zu", i);
    free(p);
  }
}
