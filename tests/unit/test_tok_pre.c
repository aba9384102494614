/*
 * test_tok_pre.c - the byte-level BPE pre-tokenizers against an independent
 * implementation: Python's `regex` module (Unicode properties like PCRE2's)
 * running the same patterns with its own segment-splitting loop. Only the
 * patterns (data, taken from the reference tokenizers) are shared; the
 * regex engine and the split procedure are not. Covers every name in the
 * table, including those that have no vectors in ../shared/vocab (Llama 3,
 * Qwen2, DeepSeek LLM, Falcon, ...). Skipped when python3 or its regex
 * module is missing.
 */
#include <jansson.h>
#include <stdlib.h>

#include "base/err.h"
#include "gguf/gguf.h"
#include "test.h"
#include "tok/tok_int.h"

#define ARRAY_N_(a) (sizeof(a) / sizeof((a)[0]))

static const char *const pre_names[] = {
    "default", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon",
    "starcoder", "refact", "mpt", "gpt-neox", "phi-2", "smollm", "command-r", "dbrx", "olmo", "stablelm2",
    "poro-chat", "viking", "tekken", "gpt-4o", "seed-coder", "bailingmoe", "chameleon"};

static const char *const corpus[] = {
    "Hello world", " Hello World!", "ied 4 \xc2\xbd months", "I'm  don't  WE'RE  they'LL  'S 's' ''' '",
    "line1\r\nline2\n\n\n  \t indented\n", "1234567 12,345.67 \xd9\xa1\xd9\xa2\xd9\xa3 \xe2\x85\xb7 \xc2\xb2 3..3",
    "\xc3\x9cn\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9 \xc3\x80\xc3\x89\xc3\x8e \xc3\x9f \xc7\x85 \xef\xac\x81 \xce\x86\xce\xbb\xcf\x86\xce\xb1",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 \xe4\xb8\xad\xe6\x96\x87 "
    "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4",
    "emoji \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 "
    "\xf0\x9f\x87\xab\xf0\x9f\x87\xb7",
    "code: if (x == 1) { return a->b; } // done\n\tx += 0x1F;", "trailing spaces   ", "   leading",
    "\xc2\xa0nbsp\xe2\x80\x83" "emsp\xe3\x80\x80ideo", "MixedCASEWords camelCase XMLHttpRequest HTTPServer",
    "\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80 \xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7",
    "x\xe2\x80\x8by", "!!!!!!?????? ------======= \"\"\"\"......", "<sentinel:12> IMGIMGABZ text",
    "path/to/file.txt\r\n/usr/bin", "C\xe1\xbb\xad" "a Vi\xe1\xbb\x87t",
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n",
    "Hello, y'all! How are you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c"
    "1314151\xe5\xa4\xa9\xef\xbd\x9e",
};

static const char py_script[] =
    "import json, sys, regex\n"
    "cases = json.load(open(sys.argv[1], encoding='utf-8'))\n"
    "for case in cases:\n"
    "    segs = [case['text']]\n"
    "    for p in case['patterns']:\n"
    "        p = regex.sub(r'\\\\x\\{([0-9A-Fa-f]+)\\}', lambda m: '\\\\U%08x' % int(m.group(1), 16), p)\n"
    "        if p.endswith('$'):\n"
    "            p = p[:-1] + '\\\\Z'\n"
    "        r = regex.compile(p)\n"
    "        new = []\n"
    "        for s in segs:\n"
    "            last = 0\n"
    "            for m in r.finditer(s):\n"
    "                if m.start() > last:\n"
    "                    new.append(s[last:m.start()])\n"
    "                if m.end() > m.start():\n"
    "                    new.append(m.group())\n"
    "                last = max(last, m.end())\n"
    "            if last < len(s):\n"
    "                new.append(s[last:])\n"
    "        segs = new\n"
    "    print(' '.join(str(len(x.encode('utf-8'))) for x in segs))\n";

static const char *const bpe_tokens[] = {"a", "b"};
static const int32_t bpe_types[] = {1, 1};
static const char *const bpe_merges[] = {"a b"};

TEST(tok_pre_matches_python_regex) {
  if (system("/usr/bin/python3 -c 'import regex' >/dev/null 2>&1") != 0)
    TEST_SKIP("python3 with the regex module (python3-regex) is not installed");
  char script[512], in_path[512], out_path[512], cmd[1600];
  snprintf(script, sizeof(script), "%s/presplit.py", test_tmpdir());
  snprintf(in_path, sizeof(in_path), "%s/cases.json", test_tmpdir());
  snprintf(out_path, sizeof(out_path), "%s/out.txt", test_tmpdir());
  FILE *f = fopen(script, "w");
  ASSERT_TRUE(f != NULL);
  fputs(py_script, f);
  fclose(f);

  /* C side: segment lengths per (pre, text); cases.json for Python */
  size_t n_cases = ARRAY_N_(pre_names) * ARRAY_N_(corpus);
  char **mine = calloc(n_cases, sizeof(char *));
  ASSERT_TRUE(mine != NULL);
  json_t *cases = json_array();
  size_t c = 0;
  for (size_t p = 0; p < ARRAY_N_(pre_names); p++) {
    gguf_writer *w = NULL;
    buf data = BUF_INIT;
    gguf_file *gf = NULL;
    tok *t = NULL;
    ASSERT_INT_EQ(gguf_writer_new(&w), 0);
    gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_add_str(w, "tokenizer.ggml.pre", pre_names[p]);
    gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", bpe_tokens, 2);
    gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, bpe_types, 2);
    gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", bpe_merges, 1);
    ASSERT_INT_EQ(gguf_writer_write_buf(w, &data), 0);
    gguf_writer_free(w);
    ASSERT_INT_EQ(gguf_open_mem(data.data, data.len, &gf), 0);
    ASSERT_INT_EQ(tok_load(gf, &t), 0);
    size_t n_pat;
    const char *const *pats = tok_bpe_pre_patterns(pre_names[p], &n_pat);
    ASSERT_TRUE(pats != NULL);
    for (size_t k = 0; k < ARRAY_N_(corpus); k++, c++) {
      size_t *offs, *lens, n;
      ASSERT_INT_EQ(tok_bpe_split(t, corpus[k], strlen(corpus[k]), &offs, &lens, &n), 0);
      buf line = BUF_INIT;
      buf_append_str(&line, "");
      for (size_t i = 0; i < n; i++) buf_appendf(&line, i ? " %zu" : "%zu", lens[i]);
      mine[c] = buf_detach(&line, NULL);
      free(offs);
      free(lens);
      json_t *jp = json_array();
      for (size_t i = 0; i < n_pat; i++) json_array_append_new(jp, json_string(pats[i]));
      json_t *cs = json_object();
      json_object_set_new(cs, "pre", json_string(pre_names[p]));
      json_object_set_new(cs, "patterns", jp);
      json_object_set_new(cs, "text", json_string(corpus[k]));
      json_array_append_new(cases, cs);
    }
    tok_free(t);
    gguf_close(gf);
    buf_free(&data);
  }
  ASSERT_INT_EQ(json_dump_file(cases, in_path, 0), 0);
  json_decref(cases);

  snprintf(cmd, sizeof(cmd), "/usr/bin/python3 '%s' '%s' > '%s'", script, in_path, out_path);
  ASSERT_INT_EQ(system(cmd), 0);
  f = fopen(out_path, "r");
  ASSERT_TRUE(f != NULL);
  char line[8192];
  int n_bad = 0;
  for (c = 0; c < n_cases; c++) {
    if (!fgets(line, sizeof(line), f)) {
      test_fail_at(__FILE__, __LINE__, "python printed fewer lines than cases");
      break;
    }
    line[strcspn(line, "\n")] = 0;
    if (strcmp(line, mine[c]) != 0) {
      n_bad++;
      fprintf(stderr, "pre %s, text %zu \"%s\":\n  python: %s\n  ours:   %s\n", pre_names[c / ARRAY_N_(corpus)],
              c % ARRAY_N_(corpus), corpus[c % ARRAY_N_(corpus)], line, mine[c]);
    }
  }
  fclose(f);
  EXPECT_INT_EQ(n_bad, 0);
  for (c = 0; c < n_cases; c++) free(mine[c]);
  free(mine);
}
