/*
 * test_tmpl_golden.c - parity of the C template interpreter with Python
 * jinja2 on real chat templates.
 *
 * For every template in ../shared/templates and every conversation in
 * tests/golden/conversations, tools/render_jinja.py (run once, in batch, by
 * /usr/bin/python3 with Debian's jinja2) renders the reference text with the
 * environment transformers uses; the C side renders the same pair with the
 * same globals and the two must be byte-identical. Pairs jinja2 rejects are
 * skipped. Pairs listed in KNOWN_MISMATCHES below are expected to differ
 * (each with its reason); any other difference fails the test, and a listed
 * pair that starts matching is reported so its line can be deleted.
 */
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/buf.h"
#include "base/err.h"
#include "test.h"
#include "tmpl/tmpl.h"

typedef struct known_mismatch {
  const char *tmpl, *conv, *reason;
} known_mismatch;

/* template (file name without .jinja), conversation (without .json) or "*",
 * and why the C render differs from jinja2's. */
static const known_mismatch KNOWN_MISMATCHES[] = {
    {NULL, NULL, NULL},
};

static bool is_known(const char *t, const char *c) {
  for (size_t i = 0; KNOWN_MISMATCHES[i].tmpl; i++)
    if (strcmp(KNOWN_MISMATCHES[i].tmpl, t) == 0 &&
        (strcmp(KNOWN_MISMATCHES[i].conv, "*") == 0 || strcmp(KNOWN_MISMATCHES[i].conv, c) == 0))
      return true;
  return false;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  buf b = BUF_INIT;
  char tmp[65536];
  size_t n;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) buf_append(&b, tmp, n);
  fclose(f);
  return buf_detach(&b, len);
}

static int list_dir(const char *dir, const char *suffix, char ***out) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0, cap = 0;
  char **v = NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name), sl = strlen(suffix);
    if (l <= sl || strcmp(e->d_name + l - sl, suffix) != 0) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      v = realloc(v, (size_t)cap * sizeof *v);
    }
    v[n++] = strndup(e->d_name, l - sl);
  }
  closedir(d);
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
      char *t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  *out = v;
  return n;
}

/* strftime_now for tests: always 26 Jul 2024 12:00, like render_jinja.py */
static int fixed_strftime(tmpl_heap *h, void *user, const tmpl_value *args, size_t n, tmpl_value kwargs,
                          tmpl_value *ret) {
  (void)user, (void)kwargs;
  const char *fmt = n ? tmpl_str_data(args[0], NULL) : NULL;
  if (!fmt) return err_set(ERR_TYPE, "format must be a string");
  struct tm t = {.tm_year = 124, .tm_mon = 6, .tm_mday = 26, .tm_hour = 12, .tm_wday = 5, .tm_yday = 207};
  char out[256];
  size_t k = strftime(out, sizeof out, fmt, &t);
  return tmpl_string(h, out, k, ret);
}

/* Globals as render_jinja.py builds them. */
int tmpl_test_globals(tmpl_heap *h, const char *conv_json, size_t len, tmpl_value *out);
int tmpl_test_globals(tmpl_heap *h, const char *conv_json, size_t len, tmpl_value *out) {
  json_error_t jerr;
  json_t *j = json_loadb(conv_json, len, 0, &jerr);
  if (!j) return err_set(ERR_PARSE, "conversation JSON: %s", jerr.text);
  tmpl_value g, v;
  int rc = tmpl_dict_new(h, &g);
  if (!rc) rc = tmpl_from_json(h, json_object_get(j, "messages"), &v);
  if (!rc) rc = tmpl_dict_set_str(h, g, "messages", v);
  json_t *tools = json_object_get(j, "tools");
  if (!rc && tools) rc = tmpl_from_json(h, tools, &v);
  else v = tmpl_none();
  if (!rc) rc = tmpl_dict_set_str(h, g, "tools", v);
  if (!rc) rc = tmpl_dict_set_str(h, g, "documents", tmpl_none());
  if (!rc) rc = tmpl_dict_set_str(h, g, "add_generation_prompt", tmpl_bool(json_is_true(json_object_get(j, "add_generation_prompt"))));
  if (!rc) rc = tmpl_string(h, "<s>", 3, &v);
  if (!rc) rc = tmpl_dict_set_str(h, g, "bos_token", v);
  if (!rc) rc = tmpl_string(h, "</s>", 4, &v);
  if (!rc) rc = tmpl_dict_set_str(h, g, "eos_token", v);
  if (!rc) rc = tmpl_native(h, "strftime_now", fixed_strftime, NULL, &v);
  if (!rc) rc = tmpl_dict_set_str(h, g, "strftime_now", v);
  json_t *extra = json_object_get(j, "extra");
  const char *k;
  json_t *x;
  if (extra && !rc)
    json_object_foreach(extra, k, x) {
      if ((rc = tmpl_from_json(h, x, &v)) || (rc = tmpl_dict_set_str(h, g, k, v))) break;
    }
  json_decref(j);
  *out = g;
  return rc;
}

static void show_diff(const char *t, const char *c, const char *want, size_t wn, const char *got, size_t gn) {
  size_t i = 0;
  while (i < wn && i < gn && want[i] == got[i]) i++;
  size_t from = i > 40 ? i - 40 : 0;
  int wl = (int)((wn - from) < 80 ? (wn - from) : 80), gl = (int)((gn - from) < 80 ? (gn - from) : 80);
  fprintf(stderr, "  MISMATCH %s x %s at byte %zu (jinja2 %zu bytes, C %zu bytes)\n    jinja2: %.*s\n    C:      %.*s\n",
          t, c, i, wn, gn, wl, want + from, gl, got + from);
}

TEST(tmpl_golden_templates) {
  char tdir[512];
  if (!test_shared_path("templates", tdir, sizeof tdir)) TEST_SKIP("../shared/templates is absent");
  const char *cdir = "tests/golden/conversations";
  struct stat st;
  if (stat("/usr/bin/python3", &st) != 0) TEST_SKIP("/usr/bin/python3 is absent");
  if (system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") != 0) TEST_SKIP("python3-jinja2 is absent");
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/render_jinja.py --batch '%s' '%s' '%s'", test_tmpdir(), tdir, cdir);
  ASSERT_INT_EQ(system(cmd), 0);

  char **tn = NULL, **cn = NULL;
  int nt = list_dir(tdir, ".jinja", &tn), nc = list_dir(cdir, ".json", &cn);
  ASSERT_TRUE(nt > 0 && nc > 0);
  char **convs = calloc((size_t)nc, sizeof *convs);
  size_t *conv_len = calloc((size_t)nc, sizeof *conv_len);
  for (int c = 0; c < nc; c++) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.json", cdir, cn[c]);
    convs[c] = read_file(p, &conv_len[c]);
    ASSERT_TRUE(convs[c] != NULL);
  }
  int all_match = 0, failures = 0, known = 0, fixed = 0;
  fprintf(stderr, "%-52s %5s %5s %5s %5s\n", "template", "match", "diff", "known", "skip");
  for (int t = 0; t < nt; t++) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.jinja", tdir, tn[t]);
    size_t sl;
    char *src = read_file(p, &sl);
    ASSERT_TRUE(src != NULL);
    tmpl *tp = NULL;
    int crc = tmpl_compile(src, sl, &tp);
    char cerr[512];
    snprintf(cerr, sizeof cerr, "%s", crc ? err_detail() : "");
    int n_match = 0, n_diff = 0, n_known = 0, n_skip = 0;
    for (int c = 0; c < nc; c++) {
      char base[900];
      if ((size_t)snprintf(base, sizeof base, "%s/%s__%s", test_tmpdir(), tn[t], cn[c]) >= sizeof base) continue;
      snprintf(p, sizeof p, "%s.err", base);
      if (stat(p, &st) == 0) { n_skip++; continue; }
      snprintf(p, sizeof p, "%s.out", base);
      size_t wn;
      char *want = read_file(p, &wn);
      if (!want) { n_skip++; continue; }
      buf got = BUF_INIT;
      int rc = crc;
      char rerr[600] = "";
      if (!crc) {
        tmpl_heap *h = tmpl_heap_new();
        tmpl_value g;
        rc = tmpl_test_globals(h, convs[c], conv_len[c], &g);
        if (!rc) rc = tmpl_render(tp, g, &got);
        if (rc) snprintf(rerr, sizeof rerr, "%s", err_detail());
        tmpl_heap_free(h);
      } else snprintf(rerr, sizeof rerr, "compile: %s", cerr);
      bool same = rc == 0 && got.len == wn && memcmp(got.data ? got.data : "", want, wn) == 0;
      bool is_k = is_known(tn[t], cn[c]);
      if (same) {
        n_match++;
        if (is_k) { fixed++; fprintf(stderr, "  NOW MATCHES (delete from KNOWN_MISMATCHES): %s x %s\n", tn[t], cn[c]); }
      } else if (is_k) {
        n_known++;
        known++;
      } else {
        n_diff++;
        failures++;
        if (rc) fprintf(stderr, "  MISMATCH %s x %s: C failed: %s\n", tn[t], cn[c], rerr);
        else show_diff(tn[t], cn[c], want, wn, got.data ? got.data : "", got.len);
      }
      buf_free(&got);
      free(want);
    }
    if (n_diff == 0 && n_known == 0) all_match++;
    fprintf(stderr, "%-52s %5d %5d %5d %5d\n", tn[t], n_match, n_diff, n_known, n_skip);
    tmpl_free(tp);
    free(src);
    free(tn[t]);
  }
  fprintf(stderr, "templates matching on every conversation jinja2 accepts: %d of %d; unexpected mismatches: %d; known: %d; known now matching: %d\n",
          all_match, nt, failures, known, fixed);
  for (int c = 0; c < nc; c++) { free(convs[c]); free(cn[c]); }
  free(convs);
  free(conv_len);
  free(tn);
  free(cn);
  EXPECT_INT_EQ(failures, 0);
}
