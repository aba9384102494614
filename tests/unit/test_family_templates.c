/*
 * test_family_templates.c - the family default chat templates
 * (tmpl/default_templates.c).
 *
 * 1. Every default compiles and renders every golden conversation
 *    (tests/golden/conversations) without error: defaults never raise.
 * 2. Python jinja2 (tools/render_jinja.py) renders the same defaults to the
 *    same bytes, so the sources mean what our interpreter thinks they mean.
 * 3. Defaults that mirror a real template in ../shared/templates render, for
 *    the listed conversations, exactly what jinja2 renders from the real
 *    template (the independent reference).
 * 4. Llama 2 (no real template in ../shared) against a hand-written prompt.
 */
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "test.h"
#include "tmpl/default_templates.h"
#include "tmpl/tmpl.h"

#define CONV_DIR "tests/golden/conversations"

static int ft_write(const char *path, const char *s) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t n = strlen(s);
  int ok = fwrite(s, 1, n, f) == n;
  return fclose(f) == 0 && ok ? 0 : -1;
}

/* strftime_now at 26 Jul 2024 12:00, as render_jinja.py fixes it */
static int ft_strftime(tmpl_heap *h, void *user, const tmpl_value *args, size_t n, tmpl_value kwargs, tmpl_value *ret) {
  (void)user, (void)kwargs;
  const char *fmt = n ? tmpl_str_data(args[0], NULL) : NULL;
  if (!fmt) return err_set(ERR_TYPE, "format must be a string");
  struct tm t = {.tm_year = 124, .tm_mon = 6, .tm_mday = 26, .tm_hour = 12, .tm_wday = 5, .tm_yday = 207};
  char out[256];
  size_t k = strftime(out, sizeof out, fmt, &t);
  return tmpl_string(h, out, k, ret);
}

/* Renders src for the conversation file conv (globals as render_jinja.py
 * builds them) into out. 0 or an error with err_detail(). */
static int ft_render(const char *src, const char *conv_path, buf *out) {
  size_t len;
  char *text = test_read_file(conv_path, &len);
  if (!text) return err_set(ERR_IO, "cannot read %s", conv_path);
  json_error_t jerr;
  json_t *j = json_loadb(text, len, 0, &jerr);
  free(text);
  if (!j) return err_set(ERR_PARSE, "%s: %s", conv_path, jerr.text);
  tmpl *t = NULL;
  int rc = tmpl_compile(src, strlen(src), &t);
  tmpl_heap *h = tmpl_heap_new();
  tmpl_value g, fn;
  if (!rc) rc = tmpl_globals_from_request(h, j, "<s>", "</s>", &g);
  if (!rc) rc = tmpl_native(h, "strftime_now", ft_strftime, NULL, &fn);
  if (!rc) rc = tmpl_dict_set_str(h, g, "strftime_now", fn);
  if (!rc) rc = tmpl_render(t, g, out);
  tmpl_heap_free(h);
  tmpl_free(t);
  json_decref(j);
  return rc;
}

static int ft_list_convs(char names[][64], int cap) {
  DIR *d = opendir(CONV_DIR);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < cap) {
    size_t l = strlen(e->d_name);
    if (l > 5 && l < 64 && strcmp(e->d_name + l - 5, ".json") == 0) {
      memcpy(names[n], e->d_name, l - 5);
      names[n][l - 5] = '\0';
      n++;
    }
  }
  closedir(d);
  return n;
}

static bool ft_have_jinja2(void) {
  struct stat st;
  return stat("/usr/bin/python3", &st) == 0 && system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") == 0;
}

TEST(family_templates_render_golden) {
  char convs[64][64];
  int nc = ft_list_convs(convs, 64);
  ASSERT_TRUE(nc >= 20);
  for (int d = 1; d < TMPL_DEFAULT_COUNT; d++) {
    const char *src = tmpl_default_source((tmpl_default_id)d);
    ASSERT_TRUE(src != NULL);
    tmpl *t = NULL;
    EXPECT_INT_EQ(tmpl_compile(src, strlen(src), &t), 0);
    tmpl_free(t);
    for (int c = 0; c < nc; c++) {
      char p[8400];
      snprintf(p, sizeof p, "%s/%s.json", CONV_DIR, convs[c]);
      buf out = BUF_INIT;
      int rc = ft_render(src, p, &out);
      TEST_CHECK_(rc == 0, 0, "default %s x %s: %s", tmpl_default_name((tmpl_default_id)d), convs[c], err_detail());
      EXPECT_TRUE(rc != 0 || out.len > 0);
      buf_free(&out);
    }
  }
}

TEST(family_templates_names) {
  EXPECT_TRUE(tmpl_default_source(TMPL_DEFAULT_NONE) == NULL);
  EXPECT_TRUE(tmpl_default_source(TMPL_DEFAULT_COUNT) == NULL);
  EXPECT_STR_EQ(tmpl_default_name(TMPL_DEFAULT_COUNT), "unknown");
  for (int d = 0; d < TMPL_DEFAULT_COUNT; d++) {
    tmpl_default_id id = TMPL_DEFAULT_COUNT;
    EXPECT_INT_EQ(tmpl_default_by_name(tmpl_default_name((tmpl_default_id)d), &id), 0);
    EXPECT_INT_EQ(id, d);
  }
  tmpl_default_id id;
  EXPECT_INT_EQ(tmpl_default_by_name("vicuna", &id), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "vicuna");
}

/* Every default x every conversation: C == jinja2 on the default's source. */
TEST(family_templates_jinja2_parity) {
  if (!ft_have_jinja2()) TEST_SKIP("/usr/bin/python3 with jinja2 is absent");
  char tdir[512], odir[512], cmd[2048];
  snprintf(tdir, sizeof tdir, "%s/defaults", test_tmpdir());
  snprintf(odir, sizeof odir, "%s/out", test_tmpdir());
  ASSERT_INT_EQ(mkdir(tdir, 0700), 0);
  ASSERT_INT_EQ(mkdir(odir, 0700), 0);
  for (int d = 1; d < TMPL_DEFAULT_COUNT; d++) {
    char p[8400];
    snprintf(p, sizeof p, "%s/%s.jinja", tdir, tmpl_default_name((tmpl_default_id)d));
    ASSERT_INT_EQ(ft_write(p, tmpl_default_source((tmpl_default_id)d)), 0);
  }
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/render_jinja.py --batch '%s' '%s' '%s'", odir, tdir, CONV_DIR);
  ASSERT_INT_EQ(system(cmd), 0);
  char convs[64][64];
  int nc = ft_list_convs(convs, 64);
  int compared = 0;
  for (int d = 1; d < TMPL_DEFAULT_COUNT; d++) {
    const char *name = tmpl_default_name((tmpl_default_id)d);
    for (int c = 0; c < nc; c++) {
      char p[8400];
      snprintf(p, sizeof p, "%s/%s__%s.err", odir, name, convs[c]);
      struct stat st;
      TEST_CHECK_(stat(p, &st) != 0, 0, "jinja2 rejects default %s x %s", name, convs[c]);
      snprintf(p, sizeof p, "%s/%s__%s.out", odir, name, convs[c]);
      size_t wn = 0;
      char *want = test_read_file(p, &wn);
      if (!want) continue;
      snprintf(p, sizeof p, "%s/%s.json", CONV_DIR, convs[c]);
      buf got = BUF_INIT;
      int rc = ft_render(tmpl_default_source((tmpl_default_id)d), p, &got);
      bool same = rc == 0 && got.len == wn && memcmp(got.data ? got.data : "", want, wn) == 0;
      TEST_CHECK_(same, 0, "default %s x %s: C render differs from jinja2\n--- jinja2:\n%s\n--- C:\n%s", name,
                  convs[c], want, got.data ? got.data : "(error)");
      compared++;
      buf_free(&got);
      free(want);
    }
  }
  EXPECT_INT_EQ(compared, (TMPL_DEFAULT_COUNT - 1) * nc);
}

typedef struct mirror {
  tmpl_default_id id;
  const char *real;  /* file name in ../shared/templates, without .jinja */
  const char *convs; /* conversation number prefixes that must match */
} mirror;

/* Where the defaults deliberately differ from the real template (tool calls,
 * thinking blocks, raise_exception), the conversation is not listed. */
static const mirror MIRRORS[] = {
    {TMPL_DEFAULT_CHATML, "Qwen-Qwen3-0.6B", "01 02 03 05 06 08 09 11 15 17 18 19"},
    {TMPL_DEFAULT_LLAMA3, "meta-llama-Llama-3.1-8B-Instruct", "01 02 03 04 05 06 08 09 11 12 13 14 15 16 17 19 21"},
    {TMPL_DEFAULT_MISTRAL, "mistralai-Mistral-Nemo-Instruct-2407", "01 02 03 04 05 08 09 11 12 13 15 17 19"},
    {TMPL_DEFAULT_GEMMA, "google-gemma-2-2b-it", "01 04 08 13 17"},
    {TMPL_DEFAULT_PHI3, "microsoft-Phi-3.5-mini-instruct", "01 02 03 04 08 09 11 12 13 17 19"},
    {TMPL_DEFAULT_GRANITE, "ibm-granite-granite-3.3-2B-Instruct", "01 02 03 04 05 08 09 11 12 13 15 17 19"},
    {TMPL_DEFAULT_DEEPSEEK, "deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "01 02 03 04 05 07 08 09 11 13 15 17 19"},
};

TEST(family_templates_mirror_real_templates) {
  char shared[512];
  if (!test_shared_path("templates", shared, sizeof shared)) TEST_SKIP("../shared/templates is absent");
  if (!ft_have_jinja2()) TEST_SKIP("/usr/bin/python3 with jinja2 is absent");
  char tdir[512], odir[512], cmd[2048];
  snprintf(tdir, sizeof tdir, "%s/real", test_tmpdir());
  snprintf(odir, sizeof odir, "%s/out", test_tmpdir());
  ASSERT_INT_EQ(mkdir(tdir, 0700), 0);
  ASSERT_INT_EQ(mkdir(odir, 0700), 0);
  size_t n_mirrors = sizeof MIRRORS / sizeof *MIRRORS;
  for (size_t i = 0; i < n_mirrors; i++) {
    char from[8400], to[8400];
    snprintf(from, sizeof from, "%s/%s.jinja", shared, MIRRORS[i].real);
    snprintf(to, sizeof to, "%s/%s.jinja", tdir, MIRRORS[i].real);
    char abs[4096];
    ASSERT_TRUE(realpath(from, abs) != NULL);
    ASSERT_INT_EQ(symlink(abs, to), 0); /* the real file, not a copy */
  }
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/render_jinja.py --batch '%s' '%s' '%s'", odir, tdir, CONV_DIR);
  ASSERT_INT_EQ(system(cmd), 0);
  char convs[64][64];
  int nc = ft_list_convs(convs, 64);
  int compared = 0;
  for (size_t i = 0; i < n_mirrors; i++) {
    const mirror *m = &MIRRORS[i];
    for (int c = 0; c < nc; c++) {
      char num[3] = {convs[c][0], convs[c][1], 0};
      if (!strstr(m->convs, num)) continue;
      char p[8400];
      snprintf(p, sizeof p, "%s/%s__%s.out", odir, m->real, convs[c]);
      size_t wn = 0;
      char *want = test_read_file(p, &wn);
      TEST_CHECK_(want != NULL, 0, "jinja2 did not render %s x %s", m->real, convs[c]);
      if (!want) continue;
      snprintf(p, sizeof p, "%s/%s.json", CONV_DIR, convs[c]);
      buf got = BUF_INIT;
      int rc = ft_render(tmpl_default_source(m->id), p, &got);
      bool same = rc == 0 && got.len == wn && memcmp(got.data ? got.data : "", want, wn) == 0;
      TEST_CHECK_(same, 0, "default %s x %s differs from %s\n--- real:\n%s\n--- default:\n%s", tmpl_default_name(m->id),
                  convs[c], m->real, want, got.data ? got.data : "(error)");
      compared++;
      buf_free(&got);
      free(want);
    }
  }
  EXPECT_INT_GE(compared, 80);
}

TEST(family_templates_llama2_by_hand) {
  buf out = BUF_INIT;
  ASSERT_INT_EQ(ft_render(tmpl_default_source(TMPL_DEFAULT_LLAMA2), CONV_DIR "/03_multi_turn.json", &out), 0);
  EXPECT_STR_EQ(out.data,
                "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello! How can I help? </s>"
                "<s>[INST] Tell me a joke. [/INST] Why did the chicken cross the road? To get to the other side. </s>"
                "<s>[INST] Another one, please. [/INST]");
  buf_reset(&out);
  ASSERT_INT_EQ(ft_render(tmpl_default_source(TMPL_DEFAULT_LLAMA2), CONV_DIR "/01_single_user.json", &out), 0);
  EXPECT_STR_EQ(out.data, "<s>[INST] Hello, who are you? [/INST]");
  buf_free(&out);
}

TEST(family_templates_content_parts_and_tools_by_hand) {
  buf out = BUF_INIT;
  /* list-of-parts content is joined with newlines */
  ASSERT_INT_EQ(ft_render(tmpl_default_source(TMPL_DEFAULT_CHATML), CONV_DIR "/10_content_parts.json", &out), 0);
  EXPECT_STR_EQ(out.data,
                "<|im_start|>system\nYou describe things.<|im_end|>\n"
                "<|im_start|>user\nFirst part.\nSecond part.<|im_end|>\n"
                "<|im_start|>assistant\nBoth parts read.<|im_end|>\n"
                "<|im_start|>user\nGood.<|im_end|>\n<|im_start|>assistant\n");
  buf_reset(&out);
  /* string arguments are written as given, consecutive tool results share a turn */
  ASSERT_INT_EQ(ft_render(tmpl_default_source(TMPL_DEFAULT_MISTRAL), CONV_DIR "/07_tool_call_string_args.json", &out),
                0);
  EXPECT_STR_CONTAINS(out.data, "[TOOL_CALLS][{\"name\": \"search\", \"arguments\": {\"query\": \"llamas\", \"limit\": 3}, "
                                "\"id\": \"call_a\"}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}, "
                                "\"id\": \"call_b\"}]</s>");
  EXPECT_STR_CONTAINS(out.data, "[TOOL_RESULTS]{\"content\": Llamas are camelids., \"call_id\": \"call_a\"}[/TOOL_RESULTS]");
  buf_free(&out);
}
