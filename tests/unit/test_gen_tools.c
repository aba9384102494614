/*
 * test_gen_tools.c - forced tool calls (gen_chat_force_tools, api/gen.c) for
 * every parser family: the grammar and prefill it builds accept a
 * well-formed call in the family's syntax and reject a wrong one, and the
 * family's output parser, fed the prefill and then the generated text (byte
 * by byte, as the engine may split it), reads exactly one tool call with the
 * right name and arguments. The end-to-end path (prefill tokens in the
 * prompt, the engine under the grammar) is covered by
 * tests/api/openai/tools_families.test.mjs.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/gen.h"
#include "base/buf.h"
#include "base/err.h"
#include "sample/grammar.h"
#include "test.h"

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}}}]";

struct calls {
  int n_begin, n_end;
  char name[64];
  buf args;
  buf text;
};

static void on_ev(void *ctx, const outparse_event *ev) {
  struct calls *c = ctx;
  switch (ev->kind) {
    case OUTPARSE_TOOL_CALL_BEGIN:
      c->n_begin++;
      snprintf(c->name, sizeof c->name, "%s", ev->name);
      break;
    case OUTPARSE_TOOL_CALL_ARGS: buf_append(&c->args, ev->text, ev->len); break;
    case OUTPARSE_TOOL_CALL_END: c->n_end++; break;
    default: buf_append(&c->text, ev->text, ev->len); break;
  }
}

static enum outparse_format format_of(family_parser p) {
  switch (p) {
    case FAMILY_PARSER_HERMES: return OUTPARSE_HERMES;
    case FAMILY_PARSER_LLAMA3: return OUTPARSE_LLAMA3;
    case FAMILY_PARSER_MISTRAL: return OUTPARSE_MISTRAL;
    case FAMILY_PARSER_DEEPSEEK: return OUTPARSE_DEEPSEEK;
    case FAMILY_PARSER_HARMONY: return OUTPARSE_HARMONY;
    case FAMILY_PARSER_GRANITE: return OUTPARSE_GRANITE;
    case FAMILY_PARSER_FUNCTIONARY: return OUTPARSE_FUNCTIONARY_V31;
    case FAMILY_PARSER_LFM2: return OUTPARSE_LFM2;
    default: return OUTPARSE_PLAIN;
  }
}

/* Builds the forced call for parser p (a template that opens <think> when
 * opens_think) and checks: good is accepted to a possible end, bad is not,
 * and prefill+good parses to one call of want_name with want_args. */
static void check(family_parser p, bool opens_think, enum gen_tool_choice choice, const char *fname,
                  const char *good, const char *bad, const char *want_prefill, const char *want_name,
                  const char *want_args) {
  manager_model mm;
  memset(&mm, 0, sizeof mm);
  mm.name = "test";
  mm.fam.parser = p;
  mm.fam.caps = FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS; /* the template shows the tools */
  if (opens_think) {
    mm.fam.think_open = "<think>";
    mm.fam.think_close = "</think>";
    mm.fam.template_opens_think = true;
  }
  json_t *tools = json_loads(TOOLS, 0, NULL);
  ASSERT_TRUE(tools != NULL);
  gen_chat c = {.tools = tools, .tool_choice = choice, .thinking = -1};
  gen_params g;
  gen_params_init(&g);
  int rc = gen_chat_force_tools(&mm, &c, fname, &g);
  EXPECT_INT_EQ(rc, 0);
  EXPECT_INT_EQ(g.format, GEN_FORMAT_GRAMMAR);
  EXPECT_STR_EQ(g.prefill ? g.prefill : "", want_prefill);
  grammar *gr = NULL;
  rc = g.gbnf ? grammar_parse(g.gbnf, strlen(g.gbnf), "root", &gr) : ERR_INVALID;
  if (rc) fprintf(stderr, "grammar: %s\n%s\n", err_detail(), g.gbnf ? g.gbnf : "(none)");
  ASSERT_INT_EQ(rc, 0);
  grammar_state *st = NULL;
  ASSERT_INT_EQ(grammar_state_new(gr, &st), 0);
  EXPECT_INT_EQ(grammar_accept_bytes(st, good, strlen(good)), 0);
  EXPECT_TRUE(grammar_can_end(st));
  grammar_state_free(st);
  if (bad) {
    ASSERT_INT_EQ(grammar_state_new(gr, &st), 0);
    bool whole = grammar_accept_bytes(st, bad, strlen(bad)) == 0 && grammar_can_end(st);
    EXPECT_FALSE(whole);
    grammar_state_free(st);
  }
  grammar_free(gr);

  outparse_config pc = {.format = format_of(p), .tools_enabled = true};
  if (opens_think) {
    pc.think_open = "<think>";
    pc.think_close = "</think>";
    pc.starts_in_reasoning = true;
  }
  struct calls got = {0, 0, "", BUF_INIT, BUF_INIT};
  outparse *op = NULL;
  ASSERT_INT_EQ(outparse_new(&pc, on_ev, &got, &op), 0);
  if (g.prefill) EXPECT_INT_EQ(outparse_feed(op, g.prefill, strlen(g.prefill)), 0);
  for (const char *s = good; *s; s++) EXPECT_INT_EQ(outparse_feed(op, s, 1), 0);
  EXPECT_INT_EQ(outparse_finish(op), 0);
  outparse_free(op);
  EXPECT_INT_EQ(got.n_begin, 1);
  EXPECT_INT_EQ(got.n_end, 1);
  EXPECT_STR_EQ(got.name, want_name);
  json_t *args = json_loadb(got.args.data ? got.args.data : "", got.args.len, 0, NULL);
  json_t *want = json_loads(want_args, 0, NULL);
  EXPECT_TRUE(args && want && json_equal(args, want));
  if (!args) fprintf(stderr, "arguments: %.*s\n", (int)got.args.len, got.args.data ? got.args.data : "");
  EXPECT_INT_EQ(got.text.len, 0); /* nothing but the call */
  json_decref(args);
  json_decref(want);
  buf_free(&got.args);
  buf_free(&got.text);
  gen_params_free(&g);
  json_decref(tools);
}

TEST(gen_force_hermes) {
  check(FAMILY_PARSER_HERMES, false, GEN_TOOL_REQUIRED, NULL,
        "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"sub\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>", "", "add",
        "{\"a\":1,\"b\":2}");
  /* a template that opened the think block: the prefill closes it */
  check(FAMILY_PARSER_HERMES, true, GEN_TOOL_FUNCTION, "get_weather",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>", "</think>\n\n",
        "get_weather", "{\"city\":\"Paris\"}");
}

TEST(gen_force_llama3) {
  check(FAMILY_PARSER_LLAMA3, false, GEN_TOOL_REQUIRED, NULL,
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"c\"}}",
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"k\"}}", "", "get_weather",
        "{\"city\":\"Oslo\",\"unit\":\"c\"}");
}

TEST(gen_force_mistral) {
  check(FAMILY_PARSER_MISTRAL, false, GEN_TOOL_REQUIRED, NULL,
        "[{\"name\": \"add\", \"arguments\": {\"a\": 3, \"b\": -4}}]",
        "[{\"name\": \"add\", \"arguments\": {\"a\": \"3\", \"b\": -4}}]", "[TOOL_CALLS]", "add",
        "{\"a\":3,\"b\":-4}");
  check(FAMILY_PARSER_MISTRAL, false, GEN_TOOL_FUNCTION, "get_weather",
        "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]",
        "[{\"name\": \"add\", \"arguments\": {\"a\": 3, \"b\": 4}}]", "[TOOL_CALLS]", "get_weather",
        "{\"city\":\"Rome\"}");
}

TEST(gen_force_granite) {
  check(FAMILY_PARSER_GRANITE, false, GEN_TOOL_REQUIRED, NULL,
        "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}]",
        "[{\"name\": \"get_weather\", \"arguments\": {}}]", "<|tool_call|>", "get_weather",
        "{\"city\":\"Lima\"}");
}

TEST(gen_force_functionary) {
  check(FAMILY_PARSER_FUNCTIONARY, false, GEN_TOOL_REQUIRED, NULL,
        "<function=add>{\"a\": 10, \"b\": 20}</function>", "<function=add>{\"a\": 10}</function>", "", "add",
        "{\"a\":10,\"b\":20}");
  check(FAMILY_PARSER_FUNCTIONARY, false, GEN_TOOL_FUNCTION, "get_weather", "{\"city\": \"Kyiv\"}</function>",
        "{\"city\": 5}</function>", "<function=get_weather>", "get_weather", "{\"city\":\"Kyiv\"}");
}

/* LFM2: the special token prefilled, then a JSON call object in its list */
TEST(gen_force_lfm2) {
  check(FAMILY_PARSER_LFM2, false, GEN_TOOL_REQUIRED, NULL,
        "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]",
        "[get_weather(city='Oslo')]", "<|tool_call_start|>", "get_weather", "{\"city\":\"Oslo\"}");
}

#define DS_OPEN                                                                                              \
  "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81" "call" \
  "\xe2\x96\x81" "begin\xef\xbd\x9c>function<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>"

TEST(gen_force_deepseek) {
  /* R1 distills open the think block in the prompt: the prefill closes it */
  check(FAMILY_PARSER_DEEPSEEK, true, GEN_TOOL_REQUIRED, NULL,
        "add\n```json\n{\"a\": 1, \"b\": 1}\n```", "mul\n```json\n{\"a\": 1, \"b\": 1}\n```",
        "</think>\n\n" DS_OPEN, "add", "{\"a\":1,\"b\":1}");
  check(FAMILY_PARSER_DEEPSEEK, false, GEN_TOOL_FUNCTION, "get_weather", "{\"city\": \"Cairo\"}\n```",
        "{\"town\": \"Cairo\"}\n```", DS_OPEN "get_weather\n```json\n", "get_weather", "{\"city\":\"Cairo\"}");
}

TEST(gen_force_harmony) {
  check(FAMILY_PARSER_HARMONY, false, GEN_TOOL_REQUIRED, NULL,
        "get_weather <|constrain|>json<|message|>{\"city\": \"Bern\"}",
        "get_weather <|constrain|>json<|message|>{\"a\": 1}", "<|channel|>commentary to=functions.",
        "get_weather", "{\"city\":\"Bern\"}");
  check(FAMILY_PARSER_HARMONY, false, GEN_TOOL_FUNCTION, "add", "{\"a\": 7, \"b\": 8}", "{\"a\": 7}",
        "<|channel|>commentary to=functions.add <|constrain|>json<|message|>", "add", "{\"a\":7,\"b\":8}");
}

/* A tool name that needs escaping in a GBNF literal, and a parameters schema
 * the compiler cannot express (any object instead). */
TEST(gen_force_odd_names_and_schemas) {
  manager_model mm;
  memset(&mm, 0, sizeof mm);
  mm.name = "test";
  mm.fam.parser = FAMILY_PARSER_FUNCTIONARY;
  mm.fam.caps = FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS;
  json_t *tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"a\\\"b\\\\c\",\"parameters\":"
                             "{\"type\":\"object\",\"not\":{}}}},{\"type\":\"function\",\"function\":{\"name\":\"x\"}}]",
                             0, NULL);
  ASSERT_TRUE(tools != NULL);
  gen_chat c = {.tools = tools, .tool_choice = GEN_TOOL_REQUIRED, .thinking = -1};
  gen_params g;
  gen_params_init(&g);
  ASSERT_INT_EQ(gen_chat_force_tools(&mm, &c, NULL, &g), 0);
  grammar *gr = NULL;
  ASSERT_INT_EQ(grammar_parse(g.gbnf, strlen(g.gbnf), "root", &gr), 0);
  grammar_state *st = NULL;
  ASSERT_INT_EQ(grammar_state_new(gr, &st), 0);
  const char *text = "<function=a\"b\\c>{\"anything\": [1]}</function>";
  EXPECT_INT_EQ(grammar_accept_bytes(st, text, strlen(text)), 0);
  EXPECT_TRUE(grammar_can_end(st));
  grammar_state_free(st);
  grammar_free(gr);
  gen_params_free(&g);
  /* a named choice that is no tool */
  gen_params_init(&g);
  c.tool_choice = GEN_TOOL_FUNCTION;
  EXPECT_INT_EQ(gen_chat_force_tools(&mm, &c, "nope", &g), ERR_NOT_FOUND);
  EXPECT_TRUE(g.gbnf == NULL && g.prefill == NULL);
  gen_params_free(&g);
  json_decref(tools);
}

/* Where the model was not taught a call syntax of its own - a family with
 * none, or a template that does not show the tools (the generic prompt then
 * teaches Hermes) - a forced choice is forced in the Hermes syntax, which
 * the parser of such a request reads (gen_chat_prompt). */
TEST(gen_force_generic_syntax) {
  struct {
    family_parser parser;
    uint32_t caps;
  } cases[] = {{FAMILY_PARSER_PLAIN, FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS},
               {FAMILY_PARSER_PLAIN, FAMILY_CAP_CHAT},
               {FAMILY_PARSER_DEEPSEEK, FAMILY_CAP_CHAT},
               {FAMILY_PARSER_LLAMA3, FAMILY_CAP_CHAT}};
  json_t *tools = json_loads(TOOLS, 0, NULL);
  ASSERT_TRUE(tools != NULL);
  const char *good = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>";
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    manager_model mm;
    memset(&mm, 0, sizeof mm);
    mm.name = "test";
    mm.fam.parser = cases[i].parser;
    mm.fam.caps = cases[i].caps;
    gen_chat c = {.tools = tools, .tool_choice = GEN_TOOL_REQUIRED, .thinking = -1};
    gen_params g;
    gen_params_init(&g);
    EXPECT_INT_EQ(gen_chat_force_tools(&mm, &c, NULL, &g), 0);
    EXPECT_INT_EQ(g.format, GEN_FORMAT_GRAMMAR);
    EXPECT_TRUE(g.prefill == NULL);
    grammar *gr = NULL;
    ASSERT_INT_EQ(grammar_parse(g.gbnf, strlen(g.gbnf), "root", &gr), 0);
    grammar_state *st = NULL;
    ASSERT_INT_EQ(grammar_state_new(gr, &st), 0);
    EXPECT_INT_EQ(grammar_accept_bytes(st, good, strlen(good)), 0);
    EXPECT_TRUE(grammar_can_end(st));
    grammar_state_free(st);
    grammar_free(gr);
    gen_params_free(&g);
  }
  json_decref(tools);
}
