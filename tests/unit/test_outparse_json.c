/*
 * test_outparse_json.c - jscan, the byte-at-a-time JSON checker under the
 * output parsers (src/tmpl/parse_json.c): hand-picked valid and invalid
 * documents, the member boundaries it reports, and a cross-check of its
 * verdict against Python's json module on random token soups.
 */
#include <stdlib.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "test.h"
#include "tmpl/parse_int.h"

/* 1 valid, 0 invalid, -1 incomplete (valid prefix). */
static int verdict(const char *s, size_t n) {
  jscan js;
  jscan_init(&js);
  for (size_t i = 0; i < n; i++) {
    int nd = -1;
    unsigned f = jscan_byte(&js, (unsigned char)s[i], NULL, &nd);
    if (f & JF_ERR) return 0;
    if ((f & JF_NUMEND) && nd == 0) { /* the byte after a top-level number: re-feed */
      f = jscan_byte(&js, (unsigned char)s[i], NULL, NULL);
      if (f & JF_ERR) return 0;
    }
  }
  return jscan_complete(&js) ? 1 : -1;
}

TEST(outparse_jscan_cases) {
  static const char *const valid[] = {
      "{}", "[]", " { } ", "{\"a\":1}", "[1, 2.5, -0, 1e5, 1E+2, -1.0e-3, 0.25]",
      "{\"k\": [true, false, null, {\"x\": []}, \"s\"]}",
      "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\"", "\"h\xc3\xa9llo\"", "0", "-12",
      "3.5e-7", "true", "null", "[[[[[]]]]]", "{\"a\":{\"b\":{\"c\":\"}\"}}}", "\t\r\n[1]\n"};
  static const char *const invalid[] = {
      "{\"a\"}", "{\"a\":}", "{,}", "[1,]", "{\"a\":1,}", "01", ".5", "+1", "tru ", "nul]",
      "\"\\x\"", "\"\\u12g4\"", "\"a\nb\"", "[1 2]", "{\"a\" 1}", "{1:2}", "]", "[}", "{\"a\":1}}",
      "NaN", "'a'", "{\"a\":1 \"b\":2}", "[-]", "1.e5", "[1e+]", "[1.]", "{\"a\":tRue}", "[] x"};
  static const char *const incomplete[] = {"{", "[1,", "{\"a\":", "\"abc", "-", "1.", "1e", "tru", "[1, {\"a\": [", ""};
  for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
    TEST_CHECK_(verdict(valid[i], strlen(valid[i])) == 1, 0, "should be valid: %s", valid[i]);
  for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
    TEST_CHECK_(verdict(invalid[i], strlen(invalid[i])) == 0, 0, "should be invalid: %s", invalid[i]);
  for (size_t i = 0; i < sizeof incomplete / sizeof incomplete[0]; i++)
    TEST_CHECK_(verdict(incomplete[i], strlen(incomplete[i])) == -1, 0, "should be incomplete: %s",
                incomplete[i]);
  /* nesting limit */
  char deep[JSCAN_MAX_DEPTH + 2];
  memset(deep, '[', sizeof deep);
  jscan js;
  jscan_init(&js);
  unsigned f = 0;
  for (size_t i = 0; i < sizeof deep && !(f & JF_ERR); i++) f = jscan_byte(&js, '[', NULL, NULL);
  EXPECT_TRUE((f & JF_ERR) && (f & JF_TOODEEP));
  EXPECT_INT_EQ(verdict(deep, JSCAN_MAX_DEPTH), -1);
}

/* The flags mark where members start and end, which the parsers rely on. */
TEST(outparse_jscan_boundaries) {
  const char *doc = "{\"name\": \"f\", \"n\": 12, \"a\": {\"x\": [1]}}";
  /*                 0123456789012345678901234567890123456789 */
  jscan js;
  jscan_init(&js);
  buf marks = BUF_INIT;
  for (size_t i = 0; doc[i]; i++) {
    int vd = -9, nd = -9;
    unsigned f = jscan_byte(&js, (unsigned char)doc[i], &vd, &nd);
    if ((f & JF_KSTART) && vd == 1) buf_appendf(&marks, "k%zu ", i);
    if ((f & JF_KEND) && vd == 1) buf_appendf(&marks, "K%zu ", i);
    if ((f & JF_VSTART) && vd == 1) buf_appendf(&marks, "v%zu ", i);
    if ((f & JF_VEND) && vd == 1) buf_appendf(&marks, "V%zu ", i);
    if ((f & JF_NUMEND) && nd == 1) buf_appendf(&marks, "N%zu ", i);
    if (f & JF_DONE) buf_appendf(&marks, "D%zu", i);
  }
  /* keys "name" 1-6, "n" 14-16, "a" 23-25; values "f" 9-11, 12 at 19 ending
   * before the comma at 21, {"x": [1]} 28-37; the whole closes at 38 */
  EXPECT_STR_EQ(marks.data, "k1 K6 v9 V11 k14 K16 v19 N21 k23 K25 v28 V37 D38");
  buf_free(&marks);
}

static unsigned lcg(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 16) & 0x7fff;
}

/* Random token soups, judged by jscan and by Python's json.loads (with
 * NaN/Infinity refused; the alphabet cannot spell them anyway). */
TEST(outparse_jscan_vs_python) {
  struct stat st;
  if (stat("/usr/bin/python3", &st) != 0) TEST_SKIP("/usr/bin/python3 is absent");
  static const char *const tok[] = {"{", "}", "[", "]", ",", ":", "\"a\"", "\"\\u00e9\"", "\"\\n\"",
                                    "1", "-", "0", ".", "e", "5", "true", "null", " ", "\"", "\\",
                                    "\"k\":", "{\"k\":1}", "[1,2]", "\t", "+", "x"};
  enum { N_DOCS = 3000 };
  char path[512], out_path[512];
  snprintf(path, sizeof path, "%s/docs.txt", test_tmpdir());
  snprintf(out_path, sizeof out_path, "%s/verdicts.txt", test_tmpdir());
  FILE *fp = fopen(path, "w");
  ASSERT_TRUE(fp != NULL);
  static char docs[N_DOCS][160];
  unsigned seed = 2024;
  for (int d = 0; d < N_DOCS; d++) {
    size_t len = 0;
    int n = 1 + (int)(lcg(&seed) % 12);
    for (int k = 0; k < n; k++) {
      const char *t = tok[lcg(&seed) % (sizeof tok / sizeof tok[0])];
      int w = snprintf(docs[d] + len, sizeof docs[d] - len, "%s", t);
      if (w < 0 || (size_t)w >= sizeof docs[d] - len) break;
      len += (size_t)w;
    }
    docs[d][len] = '\0';
    fprintf(fp, "%s\n", docs[d]);
  }
  fclose(fp);
  char cmd[1400];
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 -c 'import json,sys\n"
           "def bad(x): raise ValueError(x)\n"
           "for line in open(sys.argv[1], encoding=\"utf-8\"):\n"
           "  s = line[:-1]\n"
           "  try:\n"
           "    json.loads(s, parse_constant=bad); print(1)\n"
           "  except ValueError: print(0)\n' '%s' > '%s'",
           path, out_path);
  ASSERT_INT_EQ(system(cmd), 0);
  fp = fopen(out_path, "r");
  ASSERT_TRUE(fp != NULL);
  int n_valid = 0, n_bad = 0;
  for (int d = 0; d < N_DOCS; d++) {
    int py = -1;
    if (fscanf(fp, "%d", &py) != 1) break;
    /* Python strips surrounding whitespace; an incomplete prefix is invalid to it */
    int c = verdict(docs[d], strlen(docs[d]));
    int ours = c == 1 ? 1 : 0;
    n_valid += py;
    if (ours != py && n_bad++ < 5) test_fail_at(__FILE__, __LINE__, "doc \"%s\": jscan %d, python %d", docs[d], c, py);
  }
  fclose(fp);
  EXPECT_INT_GT(n_valid, 100); /* the soup holds a fair share of valid documents */
}
