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

/* Globals as render_jinja.py builds them: tmpl_globals_from_request plus a
 * fixed strftime_now. */
int tmpl_test_globals(tmpl_heap *h, const char *conv_json, size_t len, tmpl_value *out);
int tmpl_test_globals(tmpl_heap *h, const char *conv_json, size_t len, tmpl_value *out) {
  json_error_t jerr;
  json_t *j = json_loadb(conv_json, len, 0, &jerr);
  if (!j) return err_set(ERR_PARSE, "conversation JSON: %s", jerr.text);
  tmpl_value v;
  int rc = tmpl_globals_from_request(h, j, "<s>", "</s>", out);
  json_decref(j);
  if (!rc) rc = tmpl_native(h, "strftime_now", fixed_strftime, NULL, &v);
  if (!rc) rc = tmpl_dict_set_str(h, *out, "strftime_now", v);
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
    convs[c] = test_read_file(p, &conv_len[c]);
    ASSERT_TRUE(convs[c] != NULL);
  }
  int all_match = 0, failures = 0, known = 0, fixed = 0, lenient = 0;
  fprintf(stderr, "%-52s %5s %5s %5s %5s\n", "template", "match", "diff", "known", "skip");
  for (int t = 0; t < nt; t++) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.jinja", tdir, tn[t]);
    size_t sl;
    char *src = test_read_file(p, &sl);
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
      if (stat(p, &st) == 0) {
        /* jinja2 rejects this pair; still run it so that the sanitizers see the error paths */
        if (!crc) {
          tmpl_heap *h = tmpl_heap_new();
          tmpl_value g;
          buf b = BUF_INIT;
          if (!tmpl_test_globals(h, convs[c], conv_len[c], &g) && tmpl_render(tp, g, &b) == 0) {
            lenient++;
            fprintf(stderr, "  note: jinja2 rejects %s x %s, C renders it\n", tn[t], cn[c]);
          }
          buf_free(&b);
          tmpl_heap_free(h);
        }
        n_skip++;
        continue;
      }
      snprintf(p, sizeof p, "%s.out", base);
      size_t wn;
      char *want = test_read_file(p, &wn);
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
  fprintf(stderr, "templates matching on every conversation jinja2 accepts: %d of %d; unexpected mismatches: %d; known: %d; known now matching: %d; rejected by jinja2 but rendered by C: %d\n",
          all_match, nt, failures, known, fixed, lenient);
  for (int c = 0; c < nc; c++) { free(convs[c]); free(cn[c]); }
  free(convs);
  free(conv_len);
  free(tn);
  free(cn);
  EXPECT_INT_EQ(failures, 0);
}

/* Small templates aimed at the corners of the language (whitespace control,
 * number formatting, filters, tests, scoping), each rendered by jinja2 and by
 * the C interpreter with the same globals as an empty conversation. */
static const char *const SNIPPETS[] = {
    "  {% if true %}\nx\n  {% endif %}\ny",
    "a {% if true %}b{% endif %} c\n  {# comment #}\nd",
    "  {{ 'v' }}\n  {%- if true -%}\n    z\n  {%- endif %}\n",
    "line\n\t{% for i in [1,2] %}\n\t  {{ i }}\n\t{% endfor %}\nend",
    "{% raw -%}   raw  {%- endraw %}\nx",
    " {%+ if true %}keep{% endif +%}\nnext",
    "{% set x = {'a': {'b': 1}} %}{{ x }}{{ {'k': {'k2': 2}}}}",
    "a\n{#- c -#}\nb\n{# c2 #}    \nc",
    "{% macro m(a, b=2) -%}\n  [{{ a }}|{{ b }}|{{ varargs }}|{{ kwargs }}]\n{%- endmacro %}\n{{ m(1) }}{{ m(1, 3, 4, z=5) }}",
    "{%- for x in [1, 2, 3] -%}\n{{ x }}{{ ', ' if not loop.last }}\n{%- endfor %}",
    "{% if 'a' %}A{% elif 'b' %}B{% else %}C{% endif %}{% if '' %}A{% elif 0 %}B{% else %}C{% endif %}{% if none %}{% elif 1 %}E{% endif %}",
    "{{ \"a\\\\b\\'\\\"\" }}|{{ 'tab\\there' }}|{{ \"\\x41\\u00e9\\U0001F600\" }}",
    "{{ [1, 2] + [3] }}{{ 'ab' * 3 }}{{ 3 * 'x' }}{{ (1, 2) + (3,) }}{{ 1.5 // 1 }}{{ -1.5 % 1 }}{{ 10 ** -1 }}{{ 2 ** 0.5 }}",
    "{{ 3 - -2 }}{{ -2 ** 2 }}{{ not true == false }}{{ 1 if 0 else 2 if 0 else 3 }}",
    "{{ \"%s and %s\" % ('a', 'b') }}|{{ \"%d%%\" % 50 }}|{{ '%-5s|' % 'ab' }}|{{ \"%.2f\" % 1.005 }}|{{ '%r' % 'x' }}",
    "{{ [3, 1, 2]|sort(reverse=true) }}{{ [{'n': 'b'}, {'n': 'a'}]|sort(attribute='n')|map(attribute='n')|list }}{{ ['b', 'a']|map('upper')|list }}",
    "{{ 'abc'[5] is defined }}{{ [][0] is defined }}{{ {}.x is defined }}{{ none is defined }}{{ (none)['x'] is defined }}",
    "{% set l = [1, 2, 3] %}{{ l[1:] }}{{ l[:-1] }}{{ l[::2] }}{{ l[5:] }}{{ l[-10:2] }}{{ 'hello'[1:-1] }}{{ 'hello'[-3:] }}{{ 'hello'[10:] }}",
    "{{ 1 == 1 == 1 }}{{ 1 < 2 > 1 }}{{ 'a' < 'b' <= 'b' }}{{ [1, 2] < [1, 3] }}{{ (1, 2) == (1, 2) }}{{ [1] == (1,) }}",
    "{{ 0.1 }}{{ 1/3 }}{{ 2/3 }}{{ 1e100 }}{{ 1.5e300 * 1e10 }}{{ 123456789.123 }}{{ 0.000123 }}{{ 1e16 }}{{ 1e15 }}{{ 100.0 }}{{ -0.0 }}",
    "{{ {'a': 1}|tojson(indent=4) }}|{{ []|tojson(indent=2) }}|{{ {}|tojson }}|{{ [{}]|tojson(indent=1) }}|{{ 1.0|tojson }}|{{ 1e20|tojson }}|{{ \"\\u2028\\x7f\\x01\"|tojson }}|{{ {1: 2, none: 3, true: 4}|tojson }}",
    "{{ 'Hello World'|lower|replace('o', '0')|title }}{{ '  '|trim == '' }}{{ 'a-b c(d'|title }}{{ \"they're\"|title }}{{ \"they're\".title() }}",
    "{{ '\303\237'.upper() }}{{ '\303\200\303\211'.lower() }}{{ '\303\251a'|capitalize }}{{ '\307\205'|lower }}",
    "{{ \"a\\nb\\r\\nc\"|indent(2, first=true) }}|{{ ''|indent }}|{{ 'x'|indent }}|{{ \"a\\n\"|indent(3) }}|",
    "{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %}{% for a, b in {'x': 1}.items() %}{{ a }}{{ b }}{% endfor %}{% for (a, b) in [[5, 6]] %}{{ a * b }}{% endfor %}",
    "{% set ns = namespace(items=[], n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}{{ ns.items }}{{ ns.missing is defined }}",
    "{% for i in range(3) %}{% for j in range(3) %}{% if j > i %}{% break %}{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %}",
    "{{ range(5)|list }}{{ range(2, 8, 3)|list }}{{ range(5, 0, -2)|list }}{{ range(0)|list }}",
    "{% filter trim %}\n   padded   \n{% endfilter %}|{% set s | upper %}abc{% endset %}{{ s }}",
    "{{ '{\"a\": 1}' }}{{ '{' }}{{ '}' }} {{ \"}}\" }}",
    "{{ dict(a=1, b='x') }}{{ namespace(a=1).a }}{{ {'a': 1, 'a': 2} }}",
    "{{ 'x'.split('x') }}{{ ''.split() }}{{ ''.split(',') }}{{ '  a  b  '.split(None, 1) }}{{ 'a b c'.rsplit(None, 1) }}{{ 'a\\tb\\nc'.split() }}",
    "{{ '  abc  '|trim('a ') }}{{ 'xyz'.strip('') }}{{ 'aaa'.replace('a', 'b', 2) }}{{ 'abc'.replace('', '-') }}",
    "{{ [1, [2, 3], {'a': (4,)}] }}{{ ['\\n', '\\'', \"\\\"\", '\\\\'] }}{{ '\303\251' }}{{ ['\303\251', '\344\270\255'] }}{{ {'\320\272\320\273\321\216\321\207': '\320\267\320\275\320\260\321\207\320\265\320\275\320\270\320\265'} }}",
    "{{ [none, true, false]|tojson }}{{ \"\303\251\"|tojson(ensure_ascii=false) }}{{ \"\360\237\230\200\"|tojson(ensure_ascii=true) }}{{ 'a'|tojson(sort_keys=true) }}",
    "{{ true + 1 }}{{ true * 2.5 }}{{ 5 // true }}{{ 1 == true }}{{ [true] == [1] }}{{ {1: 'a'}[true] }}",
    "{{ [1, 2, 3]|batch(2, 'x')|list }}{{ 'abc'|reverse }}{{ [[1], [2]]|sum(start=[]) }}{{ [1.5, 2]|sum }}{{ {'a': 1}|list }}{{ 'ab'|first }}{{ 'ab'|last }}",
    "{{ 42|string + '!' }}{{ 3.0|int }}{{ '0x1A'|int(0, 16) }}{{ '  12  '|int }}{{ '1_000'|int }}{{ 'abc'|float }}{{ '1e3'|float }}{{ true|int }}",
    "{{ 'abc'|center(9) }}|{{ 'ab'|center(7) }}|{{ 'x'.ljust(3, '.') }}|{{ 'x'.rjust(3) }}|{{ '42'.zfill(5) }}|{{ '-42'.zfill(5) }}",
    "{{ 'The quick brown fox jumps'|truncate(12) }}|{{ 'The quick brown fox'|truncate(12, true) }}|{{ 'short'|truncate(10) }}|{{ 'The quick brown fox jumps over'|truncate(15, false, '\342\200\246', 0) }}",
    "{{ '<b>x</b> &amp;'|striptags }}|{{ '<a>'|e }}|{{ '<a>'|safe }}|{{ ('<' | safe) + '>' }}|{{ '<' ~ ('>'|safe) }}",
    "{{ [1, 2, 3]|select('>', 1)|list }}{{ [1, 2, 3]|reject('lt', 3)|list }}{{ ['a', 'B']|select('lower')|list }}{{ [1, 'a', none]|select('string')|list }}{{ [1, 2]|select('in', [2, 3])|list }}",
    "{{ [{'a': {'b': 1}}, {'a': {'b': 2}}]|map(attribute='a.b')|list }}{{ [{'x': 1}, {}]|map(attribute='x', default=0)|list }}{{ [[1, 2], [3]]|map('length')|list }}{{ [{'a':[5,6]}]|map(attribute='a.1')|list }}",
    "{{ {'b': 1, 'A': 2, 'a': 3}|dictsort }}{{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}{{ ['a', 'B', 'c']|max }}{{ ['a', 'B', 'c']|min(case_sensitive=true) }}{{ [{'v': 3}, {'v': 1}]|max(attribute='v') }}",
    "{{ loop }}{% for x in [1] %}{{ loop.depth }}{{ loop.depth0 }}{% endfor %}{{ x }}",
    "{% macro outer() %}{% macro inner() %}in{% endmacro %}[{{ inner() }}]{% endmacro %}{{ outer() }}{{ inner is defined }}",
    "{% set g = 'global' %}{% macro m() %}{{ g }}{% endmacro %}{% for i in [1] %}{% set g = 'loop' %}{{ m() }}{% endfor %}",
    "{% macro list_it(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) list_it([1, 2]) %}<{{ x }}>{% endcall %}",
    "{{ 'a' if true else undefined_thing.attr }}{{ undefined_thing or 'fallback' }}{{ undefined_thing is not defined and true }}",
    "{{ 'x' is sameas 'x' }}{{ 1 is sameas 1 }}{{ 1.0 is float }}{{ 2 is divisibleby(2) }}{{ 'abc' is iterable }}{{ 5 is iterable }}{{ none is iterable }}{{ 1 is le 1 }}{{ 2 is gt 1 }}",
    "{{ x is defined }}{{ x is iterable }}{{ x is sequence }}{{ x|length }}{{ x|list }}{{ x|join }}{{ x|default('d') }}{{ x|string }}{{ x|trim }}{{ x|lower }}{{ x|first is defined }}{{ x|items|list }}{{ not x }}{{ x == none }}{{ x != 1 }}{% for i in x %}never{% endfor %}{{ 'a' in x }}\n",
    "{% for a in [1, 2] %}{% set outer = loop %}{% for b in [3, 4] %}{{ outer.index }}{{ loop.index }} {% endfor %}{% endfor %}",
    "{% for x in [1, 2] %}{% for x in [x * 10] %}{{ x }}{% endfor %}{{ x }}{% endfor %}",
    "  {#- trimmed comment #}\nx\n    {#+ kept\? #}\ny",
    "{%- raw %}  raw {{ x }}\n{% endraw -%}\n  after",
    "{% macro m(x) -%}\n    {{ x }}\n{%- endmacro -%}\n[{{ m(1) }}]\n    {{- m(2) }}",
    "{{ 'a' is not none }}{{ none is not none }}{{ 1 not in [2] }}{{ not 1 in [1] }}{{ [1, 2]|length is odd }}{{ 'abc'|upper is upper }}",
    "{{ 'x{{y}}z' }}{{ \"{% not a tag %}\" }}{# {{ hidden }} #}|{{ '#}' }}",
    "{% set d = {'items': 'key'} %}{{ d['items'] }}|{{ d.items is callable }}",
    "{% set l = [3, 1, 2] %}{{ l|sort|first }}{{ (l|sort)[-1] }}{{ l[0:2]|join('-') }}{{ l.index(2) }}{{ l.count(1) }}",
    "{{ 10 is divisibleby 3 }}{{ 'b' is in ['a', 'b'] }}{{ none is sameas none }}{{ 1 is number and 1 is not string }}",
    "{%- set ns = namespace(found=false) -%}\n{%- for m in [{'r': 'a'}, {'r': 'b'}] -%}\n  {%- if m.r == 'b' -%}{%- set ns.found = true -%}{%- endif -%}\n{%- endfor -%}\n{{ ns.found }}",
    "{% if true %}\n    indented\n{% endif %}\n    {{ 'var' }}\n  {% for i in [1] %}\n  item\n  {% endfor %}",
    "{{ 1 }}\n{{ 2 }}\n\n{{ 3 }}",
    "text {% if false %}no{% else %}   yes   {% endif %}   text",
    "{% set x = [1, 2, 3] %}{% set y = x %}{{ x is sameas y }}{{ [1] is sameas [1] }}",
    "{{ \"%s\" % none }}{{ \"%s|%s\" % (1, 'a') }}{{ \"%5d|%-5d|\" % (42, 42) }}{{ '%x' % 255 if false else '' }}",
    "{{ '{:>6}|{:<4}|{:^5}|{:.3f}|{:5.1f}|{:d}|{:03d}'.format('ab', 'c', 'x', 3.14159, 2.25, 7, 5) }}",
    "{{ [1, 2, 3]|map('string')|join }}{{ ['a', 'b']|map('upper')|list }}{{ [' a ', 'b ']|map('trim')|list }}{{ ['x']|map('replace', 'x', 'y')|list }}",
    "{{ {'a': [1, {'b': 'c'}]}|tojson(indent=2) }}",
    "{{ [{'name': 'a', 'v': 1}, {'name': 'b'}]|selectattr('v', 'defined')|map(attribute='name')|list }}{{ [{'name': 'a', 'v': 1}, {'name': 'b'}]|rejectattr('v')|map(attribute='name')|list }}",
    "{{ ''.join(['a', 'b']) }}{{ ', '.join(['x']) }}{{ 'a b'.split(' ')|length }}{{ 'A-B'.lower().split('-') }}",
    "{{ \"it's \\\"q\\\"\" }}|{{ 'new\\nline'|tojson }}|{{ ['x\\ty']|tojson }}|{{ [\"\303\251\"]|string }}",
    "{{ (1, 2)|list }}{{ (1,)|tojson }}{{ ()|length }}{{ [(1, 'a')]|tojson }}{{ dict([]) if false else '' }}",
    "{% set a = 'x' %}{% set b = a ~ 'y' %}{% set c = b|upper %}{{ c }}{% set d, e = 'pq'|list %}{{ e }}{{ d }}",
    "{{ 7 // 2 * 2 }}{{ 2 + 3 * 4 ** 2 }}{{ (2 + 3) % 4 }}{{ -3 ** 2 }}{{ 10 - 2 - 3 }}{{ 100 / 10 / 2 }}{{ 'a' ~ 1 + 2 }}",
    "{{ 1.0 == 1 }}{{ 0.1 + 0.2 == 0.3 }}{{ 3 / 1 }}{{ 9 ** 0.5 }}{{ 1e3 }}{{ 1E3 }}{{ 1 }}",
    "{{ 'abc' < 'abd' }}{{ 'B' < 'a' }}{{ '\303\251' > 'z' }}{{ [2] > [1, 5] }}",
    "{%- for m in [{'role': 'user', 'content': 'hi'}] %}\n<|{{ m['role'] }}|>\n{{ m['content'] | trim }}\n{%- endfor %}\n<|assistant|>",
    "{{ 'A'|lower if true }}{{ 'b'|upper if false else 'c' }}{{ ('x' if true else 'y')|upper }}",
    "{% if [] %}a{% elif {} %}b{% elif '0' %}c{% endif %}{% if 0.0 %}d{% elif none %}e{% else %}f{% endif %}",
    "{% for i in 'ab' %}{{ i }}{{ loop.index }}{% endfor %}{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}{% for c in '' %}{% else %}E{% endfor %}",
    "{{ [1,2,3,4,5,6][1:5:2] }}{{ 'abcdef'[::-2] }}{{ 'abcdef'[-1:-4:-1] }}{{ [1,2,3][10:] }}{{ 'h\303\251llo'[::-1] }}{{ [1,2,3][-1::-2] }}",
    "{% macro f(a, b) %}{{ a }}-{{ b }}{% endmacro %}{{ f(1) }}|{{ f(b=2, a=1) }}|{{ f() }}",
    "{{ 'x'|default }}{{ missing|default }}|{{ missing|d('y') }}{{ none|d('z', true) }}{{ 0|d(5, boolean=true) }}",
    "{{ 'Hello'|replace('l', 'L', 1) }}{{ 'abc'|replace('', '.') }}{{ 'a.b.c'.split('.', -1) }}{{ 'aaa'.count('aa') }}",
    "{{ 'a\\nb'|wordcount }}{{ 'hello world'|truncate(9, leeway=0) }}{{ 'x'*3|length }}{{ ('x'*3)|length }}",
    "{{ x.y if x is defined else 'nox' }}{{ x['y'] is defined if x is defined else 'nox2' }}{{ (x or {}).get('k', 'd') }}",
    "{{ 2.675|round(2) }} {{ 0.125|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ -2.5|round }} {{ 1234.5678|round(-2) }} {{ 7|round }} {{ 1.23456|round(3, 'floor') }} {{ 1.2301|round(2, 'ceil') }}",
    "{{ '\\101\\0x\\7' }}|{{ '\\q\\d' }}|{{ \"\\x41\\u4e2d\\U0001F600\" }}",
    "{% set a = 1 %}{% with a = 2, b = a %}{{ a }}{{ b }}{% set c = 3 %}{% endwith %}{{ a }}{{ c is defined }}{% with %}x{% endwith %}",
    "{% for x in [1, 1, 2, 2, 1] %}{{ loop.changed(x) }}{% endfor %}",
    "{% set tree = [{'n': 'a', 'c': [{'n': 'b', 'c': []}, {'n': 'c', 'c': [{'n': 'd', 'c': []}]}]}, {'n': 'e', 'c': []}] %}{% for x in tree recursive %}{{ loop.depth }}{{ x.n }}{% if x.c %}({{ loop(x.c) }}){% endif %}{{ loop.index }};{% endfor %}",
    "{% for x in [[1, [2, 3]], 4] recursive %}{% if x is iterable %}[{{ loop(x) }}]{% else %}{{ x }}@{{ loop.depth0 }}{% endif %}{% endfor %}\n",
    "{{ 'Hello'.startswith('He', 1) if false else 'Hello'.startswith('He') }}{{ 'a.b'.partition('.') }}{{ 'a.b.c'.rpartition('.') }}{{ 'abc'.partition('x') }}{{ 'abc'.removeprefix('a') }}{{ 'abc'.removesuffix('c') }}",
    "{{ 'ab12'.isalnum() }}{{ 'ab 12'.isalnum() }}{{ ''.isdigit() }}{{ 'ABC'.isupper() }}{{ 'AbC'.islower() }}{{ '\331\241\331\242'.isdigit() }}{{ 'Ab'.swapcase() }}",
    "{{ 'a\\r\\nb\\rc\\n'.splitlines() }}{{ 'a\\nb'.splitlines(true) }}{{ ''.splitlines() }}{{ '\\n'.splitlines() }}",
    "{{ 'x'.center(4, '*') }}{{ 'abc'.center(6) }}|{{ '\303\251'.ljust(3, '-') }}|{{ 'hello world foo'.title() }}{{ \"o'neil mc-donald\".title() }}",
    "{{ 'tEST sTRING'.capitalize() }}{{ '\307\206'.upper() }}{{ '\303\237'.upper() }}",
    "{{ '%(a)s' if false else 'ok' }}{{ '{}{}'.format(1, [2]) }}{{ '{!r}'.format('q') }}{{ '{{}}{}'.format('x') }}{{ '{0}{0}'.format('z') }}",
    "{{ '  x\\t\\n'.rstrip() }}|{{ '\\u3000x\\u3000'.strip() }}|{{ 'aXbXc'.split('X', maxsplit=1) }}|{{ 'abcabc'.find('c', 3) if false else 'abcabc'.find('c') }}",
    "{{ [1, 2, 3]|join(', ') }}{{ [1, none, true]|join('|') }}{{ [{'a': 1}]|join }}{{ ['x', 'y']|join(attribute='0') if false else '' }}",
    "{{ {'a': 1}|items|list }}{{ {'a': 1}.items()|list|first }}{{ ({'a': 1}.items()|list)[0][1] }}{% for k, v in {'p': [1]}|items %}{{ k }}{{ v }}{% endfor %}",
    "{{ [1, 2, 2, 3, 1]|unique|list }}{{ ['a', 'A']|unique(case_sensitive=true)|list }}{{ [{'k': 'x'}, {'k': 'X'}]|unique(attribute='k')|list }}",
    "{{ messages|length }}{{ messages is sequence }}{{ tools is none }}{{ documents }}{{ add_generation_prompt }}{{ bos_token }}{{ eos_token }}{{ strftime_now('%d %b %Y') }}",
    "{%- for message in messages %}x{% endfor -%}\n{%- if add_generation_prompt %}<gen>{% endif -%}\n{{- raise_exception('boom') if false -}}\n{{ '  a  b  c  '.split(None, 1) }}{{ '  a  b  c  '.rsplit(None, 1) }}{{ ' a b c '.rsplit(None, 0) }}{{ ' a b '.rsplit() }}{{ 'x  y'.split(' ', 1) }}{{ 'a,b,c'.rsplit(',') }}{{ ' a b'.rsplit(None, 5) }}",
    "{{ ['a\\u00a0b', '\\u200b', '\\u3000', '\303\251\344\270\255\360\237\230\200', '\\x7f', '\\u2028', '\\u00ad', '\\U000e0001', '\307\205'] }}",
    "{% macro m(a, b, c=3) %}{{ a }}{{ b }}{{ c }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(*[1, 2]) }}|{{ m(1, **{'b': 5, 'c': 6}) }}|{{ m(*[1, 2, 3, 4]) }}|{{ m(1, 2, **{'z': 1}) }}|{{ '{}-{}'.format(*['a', 'b']) }}|{{ dict(b=2, **{'a': 1}) }}",
    "{{ dict(**{'a': 1}, b=2) }}",
    "{% set j = joiner(' | ') %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %}{% set k = joiner() %}{{ k() }}{{ k() }}\n",
};

TEST(tmpl_golden_snippets) {
  struct stat st;
  if (stat("/usr/bin/python3", &st) != 0) TEST_SKIP("/usr/bin/python3 is absent");
  if (system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") != 0) TEST_SKIP("python3-jinja2 is absent");
  char tdir[600], cdir[600], odir[600], p[800];
  snprintf(tdir, sizeof tdir, "%s/t", test_tmpdir());
  snprintf(cdir, sizeof cdir, "%s/c", test_tmpdir());
  snprintf(odir, sizeof odir, "%s/o", test_tmpdir());
  ASSERT_INT_EQ(mkdir(tdir, 0700) | mkdir(cdir, 0700) | mkdir(odir, 0700), 0);
  const char *conv = "{\"messages\": [], \"add_generation_prompt\": false}";
  snprintf(p, sizeof p, "%s/empty.json", cdir);
  FILE *f = fopen(p, "w");
  ASSERT_TRUE(f != NULL);
  fputs(conv, f);
  fclose(f);
  size_t n = sizeof SNIPPETS / sizeof SNIPPETS[0];
  for (size_t i = 0; i < n; i++) {
    snprintf(p, sizeof p, "%s/s%03zu.jinja", tdir, i);
    f = fopen(p, "w");
    ASSERT_TRUE(f != NULL);
    fputs(SNIPPETS[i], f);
    fclose(f);
  }
  char cmd[2200];
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/render_jinja.py --batch '%s' '%s' '%s'", odir, tdir, cdir);
  ASSERT_INT_EQ(system(cmd), 0);
  for (size_t i = 0; i < n; i++) {
    snprintf(p, sizeof p, "%s/s%03zu__empty.out", odir, i);
    size_t wn;
    char *want = test_read_file(p, &wn);
    tmpl *t = NULL;
    buf got = BUF_INIT;
    int rc = tmpl_compile(SNIPPETS[i], strlen(SNIPPETS[i]), &t);
    if (!rc) {
      tmpl_heap *h = tmpl_heap_new();
      tmpl_value g;
      rc = tmpl_test_globals(h, conv, strlen(conv), &g);
      if (!rc) rc = tmpl_render(t, g, &got);
      tmpl_heap_free(h);
    }
    if (!want) {
      if (rc == 0) test_fail_at(__FILE__, __LINE__, "snippet %zu: jinja2 fails but C renders \"%s\"", i, got.data ? got.data : "");
    } else if (rc) {
      test_fail_at(__FILE__, __LINE__, "snippet %zu: C fails: %s\n  template: %s", i, err_detail(), SNIPPETS[i]);
    } else if (got.len != wn || memcmp(got.data ? got.data : "", want, wn) != 0) {
      test_fail_at(__FILE__, __LINE__, "snippet %zu differs:\n  template: %s\n  jinja2: %s\n  C:      %s", i, SNIPPETS[i], want, got.data ? got.data : "");
    }
    free(want);
    buf_free(&got);
    tmpl_free(t);
  }
}

/* Every real template, cut short at many points and with bytes flipped,
 * must compile or fail with ERR_PARSE, and render or fail cleanly. */
TEST(tmpl_mutated_templates_fail_cleanly) {
  char tdir[512];
  if (!test_shared_path("templates", tdir, sizeof tdir)) TEST_SKIP("../shared/templates is absent");
  char **tn = NULL;
  int nt = list_dir(tdir, ".jinja", &tn);
  ASSERT_TRUE(nt > 0);
  const char *conv = "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"u\"}], \"add_generation_prompt\": true}";
  uint32_t seed = 12345;
  for (int t = 0; t < nt; t++) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.jinja", tdir, tn[t]);
    size_t sl;
    char *src = test_read_file(p, &sl);
    ASSERT_TRUE(src != NULL);
    char *m = malloc(sl + 1);
    for (int k = 0; k < 60; k++) {
      memcpy(m, src, sl);
      size_t len = sl;
      seed = seed * 1103515245u + 12345u;
      if (k < 30) len = (seed >> 8) % (sl + 1); /* truncate */
      else
        for (int f = 0; f < 4 && sl; f++) { /* flip bytes to template syntax */
          seed = seed * 1103515245u + 12345u;
          static const char junk[] = "{}%#-+()[]|.'\"~*/ \n";
          m[(seed >> 8) % sl] = junk[(seed >> 3) % (sizeof junk - 1)];
        }
      tmpl *tp = NULL;
      int rc = tmpl_compile(m, len, &tp);
      if (rc) {
        EXPECT_INT_EQ(rc, ERR_PARSE);
        EXPECT_STR_CONTAINS(err_detail(), "template:");
        continue;
      }
      tmpl_heap *h = tmpl_heap_new();
      tmpl_value g;
      buf b = BUF_INIT;
      ASSERT_INT_EQ(tmpl_test_globals(h, conv, strlen(conv), &g), 0);
      rc = tmpl_render(tp, g, &b);
      if (rc) EXPECT_STR_CONTAINS(err_detail(), "template");
      buf_free(&b);
      tmpl_heap_free(h);
      tmpl_free(tp);
    }
    free(m);
    free(src);
    free(tn[t]);
  }
  free(tn);
}
