/*
 * test_tmpl.c - unit tests of the template language: each case renders a
 * small template with fixed globals and compares with the text Python
 * jinja2 3.1 produced for it in the transformers environment (trim_blocks,
 * lstrip_blocks, loopcontrols), pasted here as literals; then error cases
 * (line:col in messages, unknown filter, unclosed block, raise_exception,
 * runaway recursion and loops) and the public value API.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "test.h"
#include "tmpl/tmpl.h"

/* Renders src with globals taken from a JSON object; returns 0 and the text
 * in *out (malloc'd) or the error code with err_detail() set. */
static int render_json(const char *src, const char *globals_json, char **out) {
  *out = NULL;
  tmpl *t = NULL;
  int rc = tmpl_compile(src, strlen(src), &t);
  if (rc) return rc;
  tmpl_heap *h = tmpl_heap_new();
  tmpl_value g = tmpl_undefined();
  if (globals_json) {
    json_t *j = json_loads(globals_json, 0, NULL);
    if (!j) { tmpl_free(t); tmpl_heap_free(h); return ERR_PARSE; }
    rc = tmpl_from_json(h, j, &g);
    json_decref(j);
  }
  buf b = BUF_INIT;
  if (!rc) rc = tmpl_render(t, g, &b);
  if (!rc) *out = buf_detach(&b, NULL);
  buf_free(&b);
  tmpl_heap_free(h);
  tmpl_free(t);
  return rc;
}

static const char *const GLOBALS =
    "{\"msgs\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"yo\"}],"
    "\"d\":{\"b\":2,\"a\":1,\"C\":3},\"n\":null,\"s\":\"Hello World\",\"u\":\"h\303\251llo \344\270\255\346\226\207\"}";

static const struct { const char *src, *want; } CASES[] = {
    {"{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 2 ** 3 ** 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % -3 }}|{{ 7 / 2 }}|{{ 1 ~ 2 }}",
     "7|9|64|3|-4|-2|3.5|12"},
    {"{{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 1.0 }}|{{ 1e-5 }}|{{ 123456789012345678 }}|{{ 2.5e16 }}|{{ 3.0 * 2 }}",
     "0.30000000000000004|1e+20|1.0|1e-05|123456789012345678|2.5e+16|6.0"},
    {"{{ true }}|{{ none }}|{{ [1, 'a', none, true] }}|{{ {'k': 'v', 'n': 1.5} }}|{{ ('x',) }}|{{ \"it's\" }}|{{ [\"it's\"] }}",
     "True|None|[1, 'a', None, True]|{'k': 'v', 'n': 1.5}|('x',)|it's|[\"it's\"]"},
    {"{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 'a' in 'cat' }}|{{ 2 not in [1, 3] }}|{{ 1 == 1.0 }}|{{ 'b' > 'a' }}|{{ not 0 }}",
     "True|False|True|True|True|True|True"},
    {"{{ 'yes' if 1 else 'no' }}|{{ 'x' if false }}|{{ none or 'dflt' }}|{{ 0 and 1 }}|{{ [] or [1] }}",
     "yes||dflt|0|[1]"},
    {"{{ s[0] }}|{{ s[-1] }}|{{ s[1:4] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ [1,2,3,4,5][1:] }}|{{ [1,2,3,4,5][-2:] }}|{{ [1,2,3][::-1] }}|{{ u[1:4] }}|{{ u[-2:] }}",
     "H|d|ell|dlroW olleH|HloWrd|[2, 3, 4, 5]|[4, 5]|[3, 2, 1]|\303\251ll|\344\270\255\346\226\207"},
    {"{{ d.a }}|{{ d['b'] }}|{{ d.zz is defined }}|{{ d['zz'] is undefined }}|{{ msgs[0].role }}|{{ msgs[5] is defined }}|{{ n.x is defined }}",
     "1|2|False|True|user|False|False"},
    {"{% for m in msgs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('a','b') }};{% endfor %}",
     "1021TrueFalse2a;2110FalseTrue2b;"},
    {"{% for m in msgs %}{{ loop.previtem.role if loop.previtem is defined else '-' }}>{{ loop.nextitem.role if loop.nextitem is defined else '-' }} {% endfor %}",
     "->assistant user>- "},
    {"{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}",
     "b=2,a=1,C=3,|baC|empty"},
    {"{% for m in msgs if m.role == 'assistant' %}{{ loop.index }}:{{ m.content }}{% endfor %}",
     "1:yo"},
    {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
     "0134"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set x %}inner {{ a }}{% endset %}[{{ x }}]{% set ns = namespace(c=0) %}{% for i in [1,2,3] %}{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}",
     "12[inner 1]6"},
    {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}{% if true %}{% set y = 3 %}{% endif %}{{ y }}",
     "213"},
    {"{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Bob') }} {{ greet('Al', greeting='Hi') }} {{ greet('Cy', 'Yo') }}",
     "Hello, Bob! Hi, Al! Yo, Cy!"},
    {"{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}body{% endcall %}|{% filter upper %}shout {{ 'it' }}{% endfilter %}",
     "<body>|SHOUT IT"},
    {"{{ '  x  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ [1,2,3]|length }}|{{ 'h\303\251llo'|length }}|{{ [1,2]|join(',') }}|{{ msgs|map(attribute='role')|join('/') }}|{{ [3,1,2]|sort|list }}|{{ ['b','A','a']|sort }}",
     "x|hi|3|5|1,2|user/assistant|[1, 2, 3]|['A', 'a', 'b']"},
    {"{{ msgs|selectattr('role', 'equalto', 'user')|list|length }}|{{ msgs|rejectattr('role', 'eq', 'user')|map(attribute='content')|first }}|{{ [1,2,3,4]|select('odd')|list }}|{{ [1,2,3,4]|reject('even')|list }}|{{ [0,1,'',2]|select|list }}",
     "1|yo|[1, 3]|[1, 3]|[1, 2]"},
    {"{{ undefined_var|default('d') }}|{{ ''|default('e') }}|{{ ''|default('e', true) }}|{{ none|default('f') }}|{{ [1,2,3]|first }}|{{ [1,2,3]|last }}|{{ 'abc'|list }}|{{ d|items|list }}|{{ d|dictsort }}",
     "d||e|None|1|3|['a', 'b', 'c']|[('b', 2), ('a', 1), ('C', 3)]|[('a', 1), ('b', 2), ('C', 3)]"},
    {"{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'x\\n\\ny'|indent(1, blank=true) }}|{{ ['a','A','b','a']|unique|list }}|{{ '3'|int + 1 }}|{{ '2.5'|float }}|{{ 'x'|int }}|{{ -3|abs }}|{{ 2.567|round(2) }}|{{ 2.5|round }}",
     "a\n  b\n\n  c|  a\n  b|x\n \n y|['a', 'b']|4|2.5|0|3|2.57|2.0"},
    {"{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}|{{ 'AbC'|lower }}{{ 'AbC'|upper }}|{{ 'aXbXc'|replace('X', '-') }}|{{ [1,2,3]|reverse|list }}|{{ [1,2,3]|sum }}|{{ [3,1,2]|min }}{{ [3,1,2]|max }}|{{ 'a b  c'|wordcount }}|{{ [1,2,3,4,5]|batch(2)|list }}",
     "Hello World|Hello|abcABC|a-b-c|[3, 2, 1]|6|13|3|[[1, 2], [3, 4], [5]]"},
    {"{{ {'a': 1, 'b': [1, 2.5, none, true], 'c': '\303\251\"\\n'}|tojson }}|{{ {'b': 1, 'a': {'x': []}}|tojson(indent=2, sort_keys=true) }}|{{ [1,2]|tojson(separators=(',', ':')) }}|{{ '\303\251'|tojson(ensure_ascii=true) }}|{{ '<&>'|tojson }}",
     "{\"a\": 1, \"b\": [1, 2.5, null, true], \"c\": \"\303\251\\\"\\n\"}|{\n  \"a\": {\n    \"x\": []\n  },\n  \"b\": 1\n}|[1,2]|\"\\u00e9\"|\"<&>\""},
    {"{{ '  a b  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}",
     "a b|axx|xxa|['a', 'b', '', 'c']|['a', 'b']|['a', 'b,c']|['a,b', 'c']|TrueTrue"},
    {"{{ 'hello'.find('l') }}{{ 'hello'.rfind('l') }}{{ 'hello'.find('z') }}|{{ 'hello'.count('l') }}|{{ '{} and {}'.format('a', 1) }}|{{ '{0}{name}'.format('x', name='y') }}|{{ '-'.join(['a','b']) }}|{{ 'a\\nb'.splitlines() }}|{{ '12'.isdigit() }}{{ 'ab'.isalpha() }}{{ ' '.isspace() }}|{{ 'Hello World'.upper() }}{{ 'hello world'.title() }}",
     "23-1|2|a and 1|xy|a-b|['a', 'b']|TrueTrueTrue|HELLO WORLDHello World"},
    {"{{ d.get('a') }}|{{ d.get('zz', 'no') }}|{{ d.get('zz') }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.items()|list }}|{{ '%s-%d' % ('a', 3) }}|{{ '%05.1f' % 3.14159 }}",
     "1|no|None|['b', 'a', 'C']|[2, 1, 3]|[('b', 2), ('a', 1), ('C', 3)]|a-3|003.1"},
    {"{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 's' is string }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ {} is mapping }}{{ [] is iterable }}{{ 's' is sequence }}{{ true is boolean }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 1 is eq 1 }}{{ 'a' is in 'abc' }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ range is callable }}{{ none is sameas none }}{{ 1 is not string }}",
     "FalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue"},
    {"a\n  {% if true %}\n  b\n  {% endif %}\nc\n{# comment #}\nd {{- '  e' }}  {{ 'f' -}}  g\n{%- if true %} h{% endif %}\n",
     "a\n  b\nc\nd  e  fg h"},
    {"{% raw %}{{ not rendered }}{% endraw %}|{{ '{{' }}|{%+ if true %}x{% endif %}",
     "{{ not rendered }}|{{|x"},
    {"{% generation %}gen {{ 1 }}{% endgeneration %}|{{ 'multi' 'part' }}|{{ \"\\u00e9\\x41\\t|\" }}",
     "gen 1|multipart|\303\251A\t|"},
};

TEST(tmpl_language_cases) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    char *got = NULL;
    int rc = render_json(CASES[i].src, GLOBALS, &got);
    if (rc) {
      test_fail_at(__FILE__, __LINE__, "case %zu failed: %s\n  template: %s", i, err_detail(), CASES[i].src);
      continue;
    }
    if (strcmp(got, CASES[i].want) != 0)
      test_fail_at(__FILE__, __LINE__, "case %zu:\n  template: %s\n  want: %s\n  got:  %s", i, CASES[i].src, CASES[i].want, got);
    free(got);
  }
}

static void expect_error(const char *src, int code, const char *fragment) {
  char *got = NULL;
  int rc = render_json(src, GLOBALS, &got);
  if (rc != code) test_fail_at(__FILE__, __LINE__, "template %s: code %d (%s), want %d", src, rc, rc ? err_detail() : got, code);
  else if (!strstr(err_detail(), fragment)) test_fail_at(__FILE__, __LINE__, "template %s: message \"%s\" lacks \"%s\"", src, err_detail(), fragment);
  free(got);
}

TEST(tmpl_errors_name_line_and_column) {
  expect_error("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}", ERR_PARSE, "template:3:10:");
  expect_error("{{ x|no_such_filter }}", ERR_PARSE, "no filter named 'no_such_filter'");
  expect_error("ok\n  {{ s is no_such_test }}", ERR_PARSE, "template:2:8: no test named 'no_such_test'");
  expect_error("{% if true %}\nabc", ERR_PARSE, "template:1:4: unexpected end of template: missing '{% endif %}'");
  expect_error("{% for x in y %}abc{% endif %}", ERR_PARSE, "unexpected 'endif'");
  expect_error("{{ 'abc }}", ERR_PARSE, "unterminated string");
  expect_error("{% frobnicate %}", ERR_PARSE, "unknown tag 'frobnicate'");
  expect_error("{{ (1 }}", ERR_PARSE, "unbalanced bracket");
  expect_error("{# never closed", ERR_PARSE, "template:1:1: unclosed comment");
  expect_error("a\n{{ raise_exception('Only user and assistant roles are supported!') }}", ERR_INVALID,
               "template:2:4: raise_exception: Only user and assistant roles are supported!");
  expect_error("{{ missing.attr }}", ERR_INVALID, "'missing' is undefined");
  expect_error("{{ 1 + 'a' }}", ERR_TYPE, "unsupported operand types for +: 'int' and 'str'");
  expect_error("{{ 1 // 0 }}", ERR_INVALID, "division or modulo by zero");
  expect_error("{{ missing|tojson }}", ERR_INVALID, "not JSON serializable");
  expect_error("{% set x = 5 %}{% set x.y = 1 %}", ERR_TYPE, "only namespace objects");
}

TEST(tmpl_limits_stop_hostile_templates) {
  expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", ERR_TOO_LARGE, "infinite recursion");
  expect_error("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}", ERR_TOO_LARGE, "recursive loop deeper than");
  expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", ERR_TOO_LARGE, "");
  expect_error("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
               ERR_TOO_LARGE, "");
  expect_error("{{ 'x' * 1000000000 }}", ERR_TOO_LARGE, "repetition too large");
  expect_error("{{ range(1000000)|length }}", ERR_TOO_LARGE, "range too big");
  /* deep nesting is a parse error, not a stack overflow */
  static char deep[120000];
  size_t k = 0;
  k += (size_t)snprintf(deep + k, sizeof deep - k, "{{ ");
  for (int i = 0; i < 1500; i++) deep[k++] = '[';
  deep[k] = 0;
  expect_error(deep, ERR_PARSE, "");
  k = 0;
  for (int i = 0; i < 600; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, "{%% if 1 %%}");
  expect_error(deep, ERR_PARSE, "nested too deeply");
  /* long left-nested chains parse iteratively; the render bounds its depth */
  k = (size_t)snprintf(deep, sizeof deep, "{{ 1");
  for (int i = 0; i < 10000; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, "|string");
  snprintf(deep + k, sizeof deep - k, " }}");
  expect_error(deep, ERR_TOO_LARGE, "nested deeper than");
  k = (size_t)snprintf(deep, sizeof deep, "{{ 1");
  for (int i = 0; i < 10000; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, " + 1");
  snprintf(deep + k, sizeof deep - k, " }}");
  expect_error(deep, ERR_TOO_LARGE, "nested deeper than");
}

/* A 127-digit literal followed by a fraction wrote one byte past the lexer's
 * 128-byte number buffer (found by fuzz_tmpl; the seed is
 * tests/fuzz/seeds/tmpl/long-number-fraction). Over-long literals are now a
 * compile error; shorter ones still lex to their value. */
TEST(tmpl_long_number_literal_is_an_error) {
  char src[400];
  size_t k = (size_t)snprintf(src, sizeof src, "{{ ");
  for (int i = 0; i < 127; i++) src[k++] = '7';
  snprintf(src + k, sizeof src - k, ".5 }}");
  expect_error(src, ERR_PARSE, "template:1:4: number literal longer than 126 characters");
  k = (size_t)snprintf(src, sizeof src, "{{ 1");
  for (int i = 0; i < 200; i++) src[k++] = '0';
  snprintf(src + k, sizeof src - k, " }}");
  expect_error(src, ERR_PARSE, "number literal longer than");
  k = (size_t)snprintf(src, sizeof src, "{{ 1");
  for (int i = 0; i < 120; i++) src[k++] = '0';
  snprintf(src + k, sizeof src - k, ".0 > 9e119 and 1e121 > 1");
  k = strlen(src);
  for (int i = 0; i < 120; i++) src[k++] = '0';
  snprintf(src + k, sizeof src - k, ".0 }}");
  char *got = NULL;
  ASSERT_INT_EQ(render_json(src, NULL, &got), 0);
  EXPECT_STR_EQ(got, "True");
  free(got);
}

TEST(tmpl_render_does_not_mutate_globals) {
  /* list.append is a jinja2 SecurityError under transformers, but templates
   * in the wild call it; here it must work and leave the caller's list alone */
  tmpl *t = NULL;
  const char *src = "{% set l = msgs %}{{ l.append(3) or '' }}{{ l|length }}";
  ASSERT_INT_EQ(tmpl_compile(src, strlen(src), &t), 0);
  tmpl_heap *h = tmpl_heap_new();
  tmpl_value g, l;
  ASSERT_INT_EQ(tmpl_dict_new(h, &g), 0);
  ASSERT_INT_EQ(tmpl_list_new(h, &l), 0);
  ASSERT_INT_EQ(tmpl_list_push(h, l, tmpl_int(1)), 0);
  ASSERT_INT_EQ(tmpl_dict_set_str(h, g, "msgs", l), 0);
  for (int round = 0; round < 2; round++) {
    buf b = BUF_INIT;
    ASSERT_INT_EQ(tmpl_render(t, g, &b), 0);
    EXPECT_STR_EQ(b.data, "2");
    buf_free(&b);
  }
  EXPECT_INT_EQ(tmpl_list_len(l), 1);
  tmpl_heap_free(h);
  tmpl_free(t);
}

TEST(tmpl_value_api) {
  tmpl_heap *h = tmpl_heap_new();
  tmpl_value d, s, k2, v;
  ASSERT_INT_EQ(tmpl_dict_new(h, &d), 0);
  /* insertion order is kept across the switch to a hashed index */
  for (int i = 0; i < 40; i++) {
    char key[16];
    snprintf(key, sizeof key, "k%02d", 39 - i);
    ASSERT_INT_EQ(tmpl_dict_set_str(h, d, key, tmpl_int(i)), 0);
  }
  ASSERT_INT_EQ(tmpl_string(h, "k05", 3, &k2), 0);
  ASSERT_INT_EQ(tmpl_dict_set(h, d, k2, tmpl_float(0.5)), 0); /* replace in place */
  v = tmpl_dict_get_str(d, "k05");
  EXPECT_INT_EQ(v.type, TMPL_FLOAT);
  EXPECT_INT_EQ(tmpl_dict_get_str(d, "nope").type, TMPL_UNDEFINED);
  buf b = BUF_INIT;
  ASSERT_INT_EQ(tmpl_string(h, "a'b", 3, &s), 0);
  tmpl_value l;
  ASSERT_INT_EQ(tmpl_list_new(h, &l), 0);
  ASSERT_INT_EQ(tmpl_list_push(h, l, s), 0);
  ASSERT_INT_EQ(tmpl_list_push(h, l, tmpl_none()), 0);
  ASSERT_INT_EQ(tmpl_list_push(h, l, tmpl_float(1e16)), 0);
  ASSERT_INT_EQ(tmpl_list_push(h, l, tmpl_float(-0.0001)), 0);
  EXPECT_INT_EQ(tmpl_list_len(l), 4);
  EXPECT_INT_EQ(tmpl_list_get(l, 1).type, TMPL_NONE);
  EXPECT_INT_EQ(tmpl_list_get(l, 4).type, TMPL_UNDEFINED);
  size_t sl = 0;
  EXPECT_TRUE(tmpl_str_data(tmpl_list_get(l, 0), &sl) != NULL && sl == 3);
  EXPECT_TRUE(tmpl_str_data(tmpl_none(), NULL) == NULL);
  ASSERT_INT_EQ(tmpl_value_to_str(l, &b), 0);
  EXPECT_STR_EQ(b.data, "[\"a'b\", None, 1e+16, -0.0001]");
  buf_reset(&b);
  ASSERT_INT_EQ(tmpl_value_to_str(d, &b), 0);
  EXPECT_TRUE(strncmp(b.data, "{'k39': 0, 'k38': 1,", 20) == 0);
  EXPECT_STR_CONTAINS(b.data, "'k05': 0.5, 'k04': 35");
  buf_free(&b);
  tmpl_heap_free(h);
}

/* A compiled template is read-only during renders: threads share one. */
#include <pthread.h>

typedef struct thread_job {
  const tmpl *t;
  const char *want;
  int bad;
} thread_job;

static void *render_many(void *arg) {
  thread_job *j = arg;
  for (int i = 0; i < 200; i++) {
    tmpl_heap *h = tmpl_heap_new();
    tmpl_value g, l, s;
    buf b = BUF_INIT;
    if (tmpl_dict_new(h, &g) || tmpl_list_new(h, &l) || tmpl_string(h, "w\303\251", 3, &s) ||
        tmpl_list_push(h, l, s) || tmpl_dict_set_str(h, g, "xs", l) || tmpl_render(j->t, g, &b) ||
        !b.data || strcmp(b.data, j->want) != 0)
      j->bad++;
    buf_free(&b);
    tmpl_heap_free(h);
  }
  return NULL;
}

TEST(tmpl_concurrent_renders_share_a_template) {
  const char *src =
      "{% set ns = namespace(n=0) %}{% for x in xs + ['b', 'c'] %}{% set ns.n = ns.n + 1 %}"
      "{{ x|upper }}{{ loop.index }}{% endfor %}|{{ ns.n }}|{{ {'k': xs}|tojson }}";
  tmpl *t = NULL;
  ASSERT_INT_EQ(tmpl_compile(src, strlen(src), &t), 0);
  thread_job jobs[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (thread_job){t, "W\303\2111B2C3|3|{\"k\": [\"w\303\251\"]}", 0};
    ASSERT_INT_EQ(pthread_create(&th[i], NULL, render_many, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    EXPECT_INT_EQ(jobs[i].bad, 0);
  }
  tmpl_free(t);
}

TEST(tmpl_globals_from_request_checks_fields) {
  tmpl_heap *h = tmpl_heap_new();
  tmpl_value g;
  json_t *j = json_loads("{\"messages\": {}}", 0, NULL);
  EXPECT_INT_EQ(tmpl_globals_from_request(h, j, NULL, NULL, &g), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "messages must be an array");
  json_decref(j);
  j = json_loads("{\"messages\": [], \"chat_template_kwargs\": 3}", 0, NULL);
  EXPECT_INT_EQ(tmpl_globals_from_request(h, j, NULL, NULL, &g), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "chat_template_kwargs");
  json_decref(j);
  /* kwargs override the special tokens; tools absent -> None */
  j = json_loads("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"chat_template_kwargs\": "
                 "{\"bos_token\": \"[B]\", \"enable_thinking\": false}}", 0, NULL);
  ASSERT_INT_EQ(tmpl_globals_from_request(h, j, "<s>", "</s>", &g), 0);
  json_decref(j);
  const char *src = "{{ bos_token }}{{ eos_token }}{{ tools }}{{ documents }}{{ add_generation_prompt }}"
                    "{{ enable_thinking }}{{ messages[0].content }}";
  tmpl *t = NULL;
  ASSERT_INT_EQ(tmpl_compile(src, strlen(src), &t), 0);
  buf b = BUF_INIT;
  ASSERT_INT_EQ(tmpl_render(t, g, &b), 0);
  EXPECT_STR_EQ(b.data, "[B]</s>NoneNoneFalseFalsex");
  buf_free(&b);
  tmpl_free(t);
  tmpl_heap_free(h);
}
