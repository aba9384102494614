/*
 * test_tmpl_probe.c - the template probes (tmpl/tmpl_probe.c): whether a
 * template shows the tools it is given, renders a system message, or opens
 * a think block, measured by rendering. Hand-made templates for the corners
 * (mentions tools but prints none of them, raises, does not compile into a
 * tmpl at all: NULL), then real templates from ../shared/templates.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "tmpl/default_templates.h"
#include "tmpl/tmpl.h"
#include "test.h"

static tmpl *compile(const char *src) {
  tmpl *t = NULL;
  return tmpl_compile(src, strlen(src), &t) == 0 ? t : NULL;
}

TEST(tmpl_probe_by_hand) {
  struct {
    const char *src;
    bool tools, system;
    int think;
  } cases[] = {
      {"{% for t in tools or [] %}{{ t | tojson }}{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}", true,
       true, 0},
      {"{% if tools %}TOOLS:{{ tools | length }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}", false,
       true, 0},
      {"{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}{% endif %}"
       "{{ m.content }}{% endfor %}{% if tools %}{{ tools[0].function.name }}{% endif %}",
       true, false, 0},
      {"{% if tools %}{{ raise_exception('no tools') }}{% endif %}{% for m in messages %}{% if m.role != 'system' %}"
       "{{ m.content }}{% endif %}{% endfor %}{% if add_generation_prompt %}<think>\n{% endif %}",
       false, false, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    tmpl *t = compile(cases[i].src);
    ASSERT_TRUE(t != NULL);
    TEST_CHECK_(tmpl_renders_tools(t) == cases[i].tools, 0, "case %zu: tools", i);
    TEST_CHECK_(tmpl_renders_system(t) == cases[i].system, 0, "case %zu: system", i);
    TEST_CHECK_(tmpl_probe_opens_think(t, "<think>") == cases[i].think, 0, "case %zu: think", i);
    tmpl_free(t);
  }
  /* a template that fails on every input */
  tmpl *t = compile("{{ raise_exception('never') }}");
  ASSERT_TRUE(t != NULL);
  EXPECT_FALSE(tmpl_renders_tools(t));
  EXPECT_FALSE(tmpl_renders_system(t));
  EXPECT_INT_EQ(tmpl_probe_opens_think(t, "<think>"), -1);
  EXPECT_INT_EQ(err_last(), 0); /* no error left behind */
  tmpl_free(t);
  EXPECT_FALSE(tmpl_renders_tools(NULL));
  EXPECT_INT_EQ(tmpl_probe_opens_think(NULL, "<think>"), -1);
}

/* The defaults: all show tools but Llama 2's and DeepSeek-R1's; all render
 * a system prompt; harmony alone reads reasoning_effort. */
TEST(tmpl_probe_defaults) {
  for (int d = TMPL_DEFAULT_CHATML; d < TMPL_DEFAULT_COUNT; d++) {
    tmpl *t = compile(tmpl_default_source((tmpl_default_id)d));
    ASSERT_TRUE(t != NULL);
    bool want_tools = d != TMPL_DEFAULT_LLAMA2 && d != TMPL_DEFAULT_DEEPSEEK;
    TEST_CHECK_(tmpl_renders_tools(t) == want_tools, 0, "default %s: tools", tmpl_default_name((tmpl_default_id)d));
    TEST_CHECK_(tmpl_renders_system(t), 0, "default %s: system", tmpl_default_name((tmpl_default_id)d));
    /* only harmony takes reasoning levels */
    TEST_CHECK_(tmpl_renders_effort(t) == (d == TMPL_DEFAULT_HARMONY), 0, "default %s: effort",
                tmpl_default_name((tmpl_default_id)d));
    tmpl_free(t);
  }
}

TEST(tmpl_probe_real_templates) {
  struct {
    const char *file;
    bool tools, system;
    int think;
  } cases[] = {
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", true, true, -2},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", true, true, -2},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", true, true, -2},
      {"meetkai-functionary-medium-v3.1.jinja", true, true, -2},
      {"google-gemma-2-2b-it.jinja", false, false, -2},
      {"microsoft-Phi-3.5-mini-instruct.jinja", false, true, -2},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", false, true, 1},
      {"Qwen-Qwen3-0.6B.jinja", true, true, 0},
  };
  int n = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char rel[256], path[512];
    snprintf(rel, sizeof rel, "templates/%s", cases[i].file);
    if (!test_shared_path(rel, path, sizeof path)) continue;
    char *src = test_read_file(path, NULL);
    ASSERT_TRUE(src != NULL);
    tmpl *t = compile(src);
    free(src);
    ASSERT_TRUE(t != NULL);
    TEST_CHECK_(tmpl_renders_tools(t) == cases[i].tools, 0, "%s: tools", cases[i].file);
    TEST_CHECK_(tmpl_renders_system(t) == cases[i].system, 0, "%s: system", cases[i].file);
    if (cases[i].think != -2)
      TEST_CHECK_(tmpl_probe_opens_think(t, "<think>") == cases[i].think, 0, "%s: think", cases[i].file);
    tmpl_free(t);
    n++;
  }
  if (!n) TEST_SKIP("../shared/templates is absent");
}

/* A template that writes reasoning_effort only when it is defined changes
 * with it; one that never reads it, or cannot render, does not. */
TEST(tmpl_probe_effort) {
  tmpl *t = compile("{{ messages[0].content }}{% if reasoning_effort is defined %} [{{ reasoning_effort }}]{% endif %}");
  ASSERT_TRUE(t != NULL);
  EXPECT_TRUE(tmpl_renders_effort(t));
  tmpl_free(t);
  t = compile("{{ messages[0].content }}{% if enable_thinking %} think{% endif %}");
  ASSERT_TRUE(t != NULL);
  EXPECT_FALSE(tmpl_renders_effort(t));
  tmpl_free(t);
  t = compile("{{ raise_exception('no') }}");
  ASSERT_TRUE(t != NULL);
  EXPECT_FALSE(tmpl_renders_effort(t));
  tmpl_free(t);
  EXPECT_FALSE(tmpl_renders_effort(NULL));
}
