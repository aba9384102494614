/*
 * test_outparse.c - the streaming output parsers (src/tmpl/parse_*.c).
 *
 * Each case is a hand-written model output and the hand-written event
 * sequence it must give, written as a string: "|T:text" answer text,
 * "|R:text" reasoning, "|B0:name" call 0 begins, "|A0:json" its arguments,
 * "|E0" it ends (consecutive fragments of one kind are joined). check() feeds
 * the output whole, split in two at every position, one byte at a time and in
 * random chunks (fixed seeds), and requires the same sequence and return code
 * every time. The recorder also checks the event invariants: ids "call_..."
 * stable per call, indexes 0,1,2 in order, ARGS/END only inside a call, and
 * no event that splits a UTF-8 character.
 */
#include <stdlib.h>

#include "base/buf.h"
#include "base/err.h"
#include "test.h"
#include "tmpl/outparse.h"

typedef struct rec {
  buf out;
  int last_kind; /* -1 none */
  int last_idx;
  char ids[32][40];
  int n_begun;
  int open_idx; /* call between BEGIN and END, or -1 */
  char problem[200];
} rec;

static void rec_init(rec *r) {
  memset(r, 0, sizeof *r);
  r->last_kind = -1;
  r->open_idx = -1;
}

static void rec_problem(rec *r, const char *what) {
  if (!r->problem[0]) snprintf(r->problem, sizeof r->problem, "%s", what);
}

static bool utf8_whole(const char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)s[i];
    size_t l = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (l == 0 || i + l > n) return false;
    for (size_t k = 1; k < l; k++)
      if (((unsigned char)s[i + k] & 0xC0) != 0x80) return false;
    i += l;
  }
  return true;
}

static bool g_check_utf8 = true; /* off for inputs that are not UTF-8 */

static void rec_emit(void *ctx, const outparse_event *ev) {
  rec *r = ctx;
  switch (ev->kind) {
  case OUTPARSE_TEXT:
  case OUTPARSE_REASONING:
    if (ev->len == 0) rec_problem(r, "empty text event");
    if (ev->tool_index != -1 || ev->name || ev->id) rec_problem(r, "text event with call fields");
    if (g_check_utf8 && !utf8_whole(ev->text, ev->len)) rec_problem(r, "text event splits a UTF-8 character");
    if (r->last_kind != (int)ev->kind)
      buf_append_str(&r->out, ev->kind == OUTPARSE_TEXT ? "|T:" : "|R:");
    buf_append(&r->out, ev->text, ev->len);
    break;
  case OUTPARSE_TOOL_CALL_BEGIN:
    if (r->open_idx >= 0) rec_problem(r, "BEGIN inside a call");
    if (ev->tool_index != r->n_begun) rec_problem(r, "tool indexes not 0,1,2,...");
    if (!ev->id || strncmp(ev->id, "call_", 5) != 0 || strlen(ev->id) < 10) rec_problem(r, "bad id");
    if (!ev->name || !ev->name[0]) rec_problem(r, "BEGIN without a name");
    if (ev->tool_index >= 0 && ev->tool_index < 32 && ev->id) {
      snprintf(r->ids[ev->tool_index], 40, "%s", ev->id);
      for (int k = 0; k < ev->tool_index; k++)
        if (!strcmp(r->ids[k], ev->id)) rec_problem(r, "two calls with one id");
    }
    r->n_begun++;
    r->open_idx = ev->tool_index;
    buf_appendf(&r->out, "|B%d:%s", ev->tool_index, ev->name ? ev->name : "(null)");
    break;
  case OUTPARSE_TOOL_CALL_ARGS:
  case OUTPARSE_TOOL_CALL_END:
    if (ev->tool_index != r->open_idx) rec_problem(r, "ARGS/END outside its call");
    if (ev->tool_index >= 0 && ev->tool_index < 32 && (!ev->id || strcmp(ev->id, r->ids[ev->tool_index])))
      rec_problem(r, "id changed within a call");
    if (ev->kind == OUTPARSE_TOOL_CALL_END) {
      buf_appendf(&r->out, "|E%d", ev->tool_index);
      r->open_idx = -1;
    } else {
      if (ev->len == 0) rec_problem(r, "empty ARGS event");
      if (g_check_utf8 && !utf8_whole(ev->text, ev->len)) rec_problem(r, "ARGS event splits a UTF-8 character");
      if (r->last_kind != (int)ev->kind || r->last_idx != ev->tool_index)
        buf_appendf(&r->out, "|A%d:", ev->tool_index);
      buf_append(&r->out, ev->text, ev->len);
    }
    break;
  }
  r->last_kind = (int)ev->kind;
  r->last_idx = ev->tool_index;
}

/* Feeds `in` in the pieces that end at cuts[0..n_cuts) (then the rest). */
static int run_cuts(const outparse_config *cfg, const char *in, const size_t *cuts, size_t n_cuts,
                    rec *r) {
  rec_init(r);
  outparse *p;
  int rc = outparse_new(cfg, rec_emit, r, &p);
  if (rc) return rc;
  size_t len = strlen(in), at = 0;
  for (size_t k = 0; k <= n_cuts && !rc; k++) {
    size_t end = k < n_cuts ? cuts[k] : len;
    rc = outparse_feed(p, in + at, end - at);
    at = end;
  }
  if (!rc) rc = outparse_finish(p);
  outparse_free(p);
  return rc;
}

static unsigned lcg(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 16) & 0x7fff;
}

/* The key check: every split gives `want` (and return code want_rc). */
static void check_at(const char *file, int line, const outparse_config *cfg, const char *in,
                     const char *want, int want_rc) {
  size_t len = strlen(in);
  size_t *cuts = malloc((len + 1) * sizeof *cuts);
  if (!cuts) {
    test_fail_at(file, line, "out of memory");
    return;
  }
  int n_variants = 0, n_bad = 0;
  for (int variant = 0; variant < (int)len + 1 + 1 + 8 && n_bad < 3; variant++) {
    size_t n_cuts = 0;
    char label[64];
    if (variant == 0) {
      snprintf(label, sizeof label, "whole");
    } else if (variant <= (int)len) {
      cuts[n_cuts++] = (size_t)variant - 1; /* two pieces, split before byte variant-1 */
      snprintf(label, sizeof label, "split at %d", variant - 1);
    } else if (variant == (int)len + 1) {
      for (size_t i = 1; i < len; i++) cuts[n_cuts++] = i;
      snprintf(label, sizeof label, "byte by byte");
    } else {
      unsigned seed = (unsigned)(variant - (int)len - 1);
      snprintf(label, sizeof label, "random chunks seed %u", seed);
      size_t at = 0;
      for (;;) {
        at += 1 + lcg(&seed) % 9;
        if (at >= len) break;
        cuts[n_cuts++] = at;
      }
    }
    rec r;
    int rc = run_cuts(cfg, in, cuts, n_cuts, &r);
    const char *got = r.out.data ? r.out.data : "";
    n_variants++;
    if (rc != want_rc || strcmp(got, want) != 0 || r.problem[0]) {
      n_bad++;
      test_fail_at(file, line, "%s (%s): rc %d (want %d)%s%s\n  got  \"%s\"\n  want \"%s\"\n  input \"%s\"",
                   outparse_format_name(cfg->format), label, rc, want_rc,
                   r.problem[0] ? ", " : "", r.problem, got, want, in);
    }
    buf_free(&r.out);
  }
  free(cuts);
}
#define check(cfg, in, want, rc) check_at(__FILE__, __LINE__, (cfg), (in), (want), (rc))

static outparse_config cfg_of(enum outparse_format f, const char *open, const char *close,
                              bool starts, bool tools) {
  outparse_config c = {.format = f, .think_open = open, .think_close = close, .starts_in_reasoning = starts, .tools_enabled = tools};
  return c;
}

/* Arguments with every character that could fool a parser: markers of all
 * formats inside strings, escaped quotes and backslashes, brackets, unicode
 * (raw and escaped), numbers, literals, nesting. */
#define TRICKY_ARGS                                                                      \
  "{\"q\": \"</tool_call> <tool_call> [TOOL_CALLS] </function> >>> <|call|> "           \
  "<｜tool▁call▁end｜> ``` \\\"quoted\\\" }{ ][ \\\\\", \"u\": \"h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac " \
  "\\u00e9 \\ud83d\\ude00 \xf0\x9f\x98\x80\", \"n\": -1.5e3, \"t\": true, \"z\": null, "   \
  "\"arr\": [1, {\"x\": []}, 0]}"

#define WS10 " \n \t  \r\n  "
#define WS70 WS10 WS10 WS10 WS10 WS10 WS10 WS10

TEST(outparse_plain_reasoning) {
  outparse_config c = cfg_of(OUTPARSE_PLAIN, "<think>", "</think>", false, false);
  check(&c, "<think>\nLet me think.\n</think>\n\nHello!", "|R:Let me think.|T:Hello!", 0);
  check(&c, "<think>\n a \n\n b \n</think> c ", "|R:a \n\n b|T:c ", 0);
  check(&c, "<think>a  ", "|R:a", 0);
  /* a whitespace run longer than 64 bytes is kept whole */
  check(&c, "<think>a" WS70 "</think>b", "|R:a" WS70 "|T:b", 0);
  check(&c, "<think>a" WS70 "b" WS70 "</think>", "|R:a" WS70 "b" WS70, 0);
  check(&c, "<think>a" WS70 "b  </think>", "|R:a" WS70 "b", 0);
  check(&c, "Hello <b>world</b> & <thinking>", "|T:Hello <b>world</b> & <thinking>", 0);
  check(&c, "<thing> is text", "|T:<thing> is text", 0);
  check(&c, "<thin", "|T:<thin", 0);
  check(&c, "<think>abc", "|R:abc", 0); /* unterminated: all reasoning, no error */
  check(&c, "  \n<think>x</think>y", "|R:x|T:y", 0);
  check(&c, "a<think>b</think>", "|T:a<think>b</think>", 0); /* only at the start */
  check(&c, "<think></think>\n\nAnswer", "|T:Answer", 0);
  check(&c, "<think>\n\n</think>", "", 0);
  check(&c, "", "", 0);
  check(&c, "  \n", "|T:  \n", 0);
  check(&c, "<think>a</thin k></think>b", "|R:a</thin k>|T:b", 0);
  check(&c, "<think>h\xc3\xa9 \xe6\x97\xa5</think>\xf0\x9f\x98\x80 ok",
        "|R:h\xc3\xa9 \xe6\x97\xa5|T:\xf0\x9f\x98\x80 ok", 0);
  /* no think markers configured: all text */
  outparse_config c2 = cfg_of(OUTPARSE_PLAIN, NULL, NULL, false, true);
  check(&c2, "<think>x</think>y", "|T:<think>x</think>y", 0);
}

TEST(outparse_plain_starts_in_reasoning) {
  outparse_config c = cfg_of(OUTPARSE_PLAIN, "<think>", "</think>", true, false);
  check(&c, "abc</think>\n\nAnswer", "|R:abc|T:Answer", 0);
  check(&c, "\n<think>\nabc</think>Answer", "|R:abc|T:Answer", 0); /* repeated open is swallowed */
  check(&c, "Okay, so", "|R:Okay, so", 0);
  check(&c, "</think>Hi", "|T:Hi", 0);
  check(&c, "<thin>x</think>y", "|R:<thin>x|T:y", 0);
  outparse_config m = cfg_of(OUTPARSE_MISTRAL, "[THINK]", "[/THINK]", false, true);
  check(&m, "[THINK]hmm[/THINK]Answer", "|R:hmm|T:Answer", 0);
}

TEST(outparse_hermes) {
  outparse_config c = cfg_of(OUTPARSE_HERMES, "<think>", "</think>", false, true);
  check(&c, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        "|B0:get_weather|A0:{\"city\": \"Paris\"}|E0", 0);
  check(&c,
        "<think>\nNeed the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
        "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        "|R:Need the weather.|B0:get_weather|A0:{\"city\": \"Paris\"}|E0", 0);
  check(&c,
        "Let me check both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"y\": [2]}}\n</tool_call>",
        "|T:Let me check both.\n|B0:a|A0:{\"x\": 1}|E0|B1:b|A1:{\"y\": [2]}|E1", 0);
  check(&c, "<tool_call>{\"name\": \"f\", \"arguments\": " TRICKY_ARGS "}</tool_call>",
        "|B0:f|A0:" TRICKY_ARGS "|E0", 0);
  /* arguments before the name; other keys; escaped name; arguments as a string; none */
  check(&c, "<tool_call>{\"arguments\": {\"a\": 1}, \"id\": 7, \"name\": \"f\"}</tool_call>",
        "|B0:f|A0:{\"a\": 1}|E0", 0);
  check(&c, "<tool_call>{\"name\": \"get\\u005fx\", \"arguments\": {}}</tool_call>",
        "|B0:get_x|A0:{}|E0", 0);
  check(&c, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": \\\"\\u00e9\\\"}\"}</tool_call>",
        "|B0:f|A0:{\"a\": \"\xc3\xa9\"}|E0", 0);
  check(&c, "<tool_call>{\"name\": \"f\"}</tool_call>", "|B0:f|A0:{}|E0", 0);
  check(&c, "<tool_call>{\"name\": \"f\", \"arguments\": {\"n\": 10}}</tool_call>\nDone.",
        "|B0:f|A0:{\"n\": 10}|E0|T:Done.", 0);
  /* closing marker missing (a stop token): the call is complete */
  check(&c, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}",
        "|B0:f|A0:{\"a\": [1, 2]}|E0", 0);
  /* markers that turn out not to be */
  check(&c, "<tool_cal> <tool_callx <tool_call", "|T:<tool_cal> <tool_callx <tool_call", 0);
  /* tools disabled: markers are text */
  outparse_config off = cfg_of(OUTPARSE_HERMES, NULL, NULL, false, false);
  check(&off, "<tool_call>{\"name\": \"f\"}</tool_call>", "|T:<tool_call>{\"name\": \"f\"}</tool_call>", 0);
  /* Qwen3 with thinking on: the template opened the block */
  outparse_config q = cfg_of(OUTPARSE_HERMES, "<think>", "</think>", true, true);
  check(&q, "Hmm.\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
        "|R:Hmm.|B0:f|A0:{}|E0", 0);
  check(&q, "<tool_call>{\"name\": \"f\"}</tool_call></think>x",
        "|R:<tool_call>{\"name\": \"f\"}</tool_call>|T:x", 0); /* no calls inside reasoning */
}

TEST(outparse_hermes_errors) {
  outparse_config c = cfg_of(OUTPARSE_HERMES, NULL, NULL, false, true);
  check(&c, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": tru }}</tool_call>",
        "|B0:f|A0:{\"a\": tru", ERR_PARSE);
  check(&c, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1,}}</tool_call>",
        "|B0:f|A0:{\"a\": 1,", ERR_PARSE);
  check(&c, "<tool_call>not json</tool_call>", "", ERR_PARSE);
  check(&c, "<tool_call>[1]</tool_call>", "", ERR_PARSE);
  check(&c, "<tool_call>{\"name\": 5}</tool_call>", "", ERR_PARSE);
  check(&c, "<tool_call>{\"arguments\": {}}</tool_call>", "", ERR_PARSE);
  check(&c, "<tool_call>{\"name\": \"f\", \"argu", "|B0:f", ERR_PARSE); /* cut inside the JSON */
  /* cut inside the closing tag: the call stands, the cut tag is not text */
  check(&c, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_c", "|B0:f|A0:{}|E0", 0);
  check(&c, "<tool_call>{\"name\": \"f\"}</", "|B0:f|A0:{}|E0", 0);
  check(&c, "<tool_call>{\"name\": \"\"}", "", ERR_PARSE);
  check(&c, "<tool_call>{\"name\": \"a\\nb\"}", "", ERR_PARSE);   /* control character in the name */
  check(&c, "<tool_call>{\"name\": \"a\\u0000b\"}", "", ERR_PARSE); /* NUL */
  check(&c, "<tool_call>{\"name\": \"caf\xc3\xa9\"}", "|B0:caf\xc3\xa9|A0:{}|E0", 0);
  check(&c, "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"a\nb\"}}", "|B0:f|A0:{\"s\": \"a",
        ERR_PARSE); /* raw control character in a string */
  /* the detail names the call and the byte */
  outparse *p;
  rec r;
  rec_init(&r);
  ASSERT_INT_EQ(outparse_new(&c, rec_emit, &r, &p), 0);
  const char *in = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"a\" 1}}";
  EXPECT_INT_EQ(outparse_feed(p, in, strlen(in)), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "tool call 0 (get_weather)");
  EXPECT_STR_CONTAINS(err_detail(), "expected ':'");
  EXPECT_INT_EQ(outparse_feed(p, "x", 1), ERR_PARSE); /* sticky */
  EXPECT_INT_EQ(outparse_finish(p), ERR_PARSE);
  outparse_free(p);
  buf_free(&r.out);
}

TEST(outparse_llama3) {
  outparse_config c = cfg_of(OUTPARSE_LLAMA3, NULL, NULL, false, true);
  check(&c, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
        "|B0:get_weather|A0:{\"city\": \"Paris\"}|E0", 0);
  check(&c, "\n{\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}", "|B0:f|A0:{}|E0", 0);
  check(&c, "{\"name\": \"f\", \"parameters\": " TRICKY_ARGS "}", "|B0:f|A0:" TRICKY_ARGS "|E0", 0);
  check(&c, "{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"parameters\": {}}",
        "|B0:a|A0:{\"x\": 1}|E0|B1:b|A1:{}|E1", 0);
  /* JSON that is not a call, and plain text, stay text */
  check(&c, "{\"answer\": 42}", "|T:{\"answer\": 42}", 0);
  check(&c, "{\"type\": \"x\", \"value\": 1}", "|T:{\"type\": \"x\", \"value\": 1}", 0);
  check(&c, "{not json", "|T:{not json", 0);
  check(&c, "{\"name", "|T:{\"name", 0);
  check(&c, "{\"name\": \"John\", \"age\": 30}", "|T:{\"name\": \"John\", \"age\": 30}", 0);
  check(&c, "{\"name\": \"f\"}", "|T:{\"name\": \"f\"}", 0);
  check(&c, "{\"name\": 5, \"parameters\": {}}", "|T:{\"name\": 5, \"parameters\": {}}", 0);
  check(&c, "{\"type\": \"object\", \"name\": \"f\", \"parameters\": {}}",
        "|T:{\"type\": \"object\", \"name\": \"f\", \"parameters\": {}}", 0);
  check(&c, "{\"name\": \"f\", \"arguments\": {\"a\": 1}}", "|B0:f|A0:{\"a\": 1}|E0", 0);
  check(&c, "The answer is {\"name\": 1}", "|T:The answer is {\"name\": 1}", 0);
  check(&c, "Hello!", "|T:Hello!", 0);
  /* <|python_tag|>: JSON call or code */
  check(&c, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}", "|B0:f|A0:{\"a\": 1}|E0", 0);
  check(&c, "<|python_tag|>print(\"hi\")\n\tx = 1\\n",
        "|B0:python|A0:{\"code\":\"print(\\\"hi\\\")\\n\\tx = 1\\\\n\"}|E0", 0);
  /* built-in tools: name.call(k=v, ...) with JSON or Python literals */
  check(&c, "<|python_tag|>brave_search.call(query=\"weather in Paris\")<|eom_id|>",
        "|B0:brave_search|A0:{\"query\": \"weather in Paris\"}|E0", 0);
  check(&c, "<|python_tag|>wolfram_alpha.call(query='2+2 \\'x\\' \"y\" \\n \\q \xc3\xa9', n=-3, m = 1.5e2 ,exact=True, z=None, l=[1, {\"a\": \")\"}])",
        "|B0:wolfram_alpha|A0:{\"query\": \"2+2 'x' \\\"y\\\" \\n \\\\q \xc3\xa9\", \"n\": -3, \"m\": 1.5e2, \"exact\": true, \"z\": null, \"l\": [1, {\"a\": \")\"}]}|E0", 0);
  check(&c, "<|python_tag|>brave_search.call()", "|B0:brave_search|A0:{}|E0", 0);
  check(&c, "<|python_tag|>brave_search.call(query=)", "|B0:brave_search|A0:{\"query\": ", ERR_PARSE);
  check(&c, "<|python_tag|>brave_search.call(query \"x\")", "|B0:brave_search|A0:{", ERR_PARSE);
  check(&c, "<|python_tag|>brave_search.call(query=\"x\"", "|B0:brave_search|A0:{\"query\": \"x\"", ERR_PARSE);
  check(&c, "<|python_tag|>brave_search.callx(1)", "|B0:python|A0:{\"code\":\"brave_search.callx(1)\"}|E0", 0);
  check(&c, "<|python_tag|>x = \"<|eom\"<|eom_id|>", "|B0:python|A0:{\"code\":\"x = \\\"<|eom\\\"\"}|E0", 0);
  check(&c, "Sure.<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "|T:Sure.|B0:f|A0:{}|E0", 0);
  /* invalid JSON after the name committed it as a call: error */
  check(&c, "{\"name\": \"f\", \"parameters\": {\"a\": }}", "|B0:f|A0:{\"a\": ", ERR_PARSE);
  outparse_config off = cfg_of(OUTPARSE_LLAMA3, NULL, NULL, false, false);
  check(&off, "{\"name\": \"f\", \"parameters\": {}}", "|T:{\"name\": \"f\", \"parameters\": {}}", 0);
}

TEST(outparse_mistral) {
  outparse_config c = cfg_of(OUTPARSE_MISTRAL, NULL, NULL, false, true);
  check(&c,
        "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
        "\"abc123def\"}, {\"name\": \"b\", \"arguments\": {}}]",
        "|B0:get_weather|A0:{\"city\": \"Paris\"}|E0|B1:b|A1:{}|E1", 0);
  check(&c, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": " TRICKY_ARGS "}]",
        "|B0:f|A0:" TRICKY_ARGS "|E0", 0);
  check(&c, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]b[ARGS]{}",
        "|B0:get_weather|A0:{\"city\": \"Paris\"}|E0|B1:b|A1:{}|E1", 0);
  check(&c, "Sure. [TOOL_CALLS]f[CALL_ID]abc123def[ARGS]{\"a\": 1}",
        "|T:Sure. |B0:f|A0:{\"a\": 1}|E0", 0);
  check(&c, "[TOOL_CALLS]f[ARGS]" TRICKY_ARGS, "|B0:f|A0:" TRICKY_ARGS "|E0", 0);
  check(&c, "[TOOL_CALL] is not [TOOL_CALLS", "|T:[TOOL_CALL] is not [TOOL_CALLS", 0);
  check(&c, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}} {", "|B0:f|A0:{}|E0", ERR_PARSE);
  check(&c, "[TOOL_CALLS]f[ARGS]{\"a\": [}", "|B0:f|A0:{\"a\": [", ERR_PARSE);
  check(&c, "[TOOL_CALLS]get_wea", "", ERR_PARSE); /* output ended inside the header */
  outparse_config m = cfg_of(OUTPARSE_MISTRAL, "[THINK]", "[/THINK]", false, true);
  check(&m, "[THINK]Use the tool.[/THINK][TOOL_CALLS]f[ARGS]{}", "|R:Use the tool.|B0:f|A0:{}|E0", 0);
}

#define DS_CB "<｜tool▁calls▁begin｜>"
#define DS_C "<｜tool▁call▁begin｜>"
#define DS_S "<｜tool▁sep｜>"
#define DS_CE "<｜tool▁call▁end｜>"
#define DS_CSE "<｜tool▁calls▁end｜>"

TEST(outparse_deepseek) {
  outparse_config c = cfg_of(OUTPARSE_DEEPSEEK, "<think>", "</think>", true, true);
  check(&c,
        "Okay.\n</think>\n\n" DS_CB DS_C "function" DS_S "get_weather\n```json\n{\"city\": \"Paris\"}\n```" DS_CE
        "\n" DS_C "function" DS_S "b\n```json\n{}\n```" DS_CE DS_CSE,
        "|R:Okay.|B0:get_weather|A0:{\"city\": \"Paris\"}|E0|B1:b|A1:{}|E1", 0);
  check(&c, "Hmm</think>" DS_CB DS_C "get_weather" DS_S "{\"city\": \"Paris\"}" DS_CE DS_CSE,
        "|R:Hmm|B0:get_weather|A0:{\"city\": \"Paris\"}|E0", 0);
  check(&c, "x</think>Let me look." DS_CB DS_C "function" DS_S "f\n```json\n" TRICKY_ARGS "\n```" DS_CE DS_CSE "Done.",
        "|R:x|T:Let me look.|B0:f|A0:" TRICKY_ARGS "|E0|T:Done.", 0);
  check(&c, "x</think>Plain answer with <｜tool and ```", "|R:x|T:Plain answer with <｜tool and ```", 0);
  /* a call without the calls-begin wrapper, and a cut at the end (no end markers) */
  check(&c, "x</think>" DS_C "function" DS_S "f\n```json\n{\"a\": 1}", "|R:x|B0:f|A0:{\"a\": 1}|E0", 0);
  check(&c, "x</think>" DS_CB DS_C "function" DS_S "f\n```json\n{\"a\": ", "|R:x|B0:f|A0:{\"a\": ",
        ERR_PARSE);
  check(&c, "x</think>" DS_CB DS_C "function" DS_S "f\n```json\n{\"a\" 1}", "|R:x|B0:f|A0:{\"a\" ",
        ERR_PARSE);
}

TEST(outparse_harmony) {
  outparse_config c = cfg_of(OUTPARSE_HARMONY, NULL, NULL, false, true);
  check(&c,
        "<|channel|>analysis<|message|>User wants weather.<|end|><|start|>assistant<|channel|>final"
        "<|message|>It is sunny.<|return|>",
        "|R:User wants weather.|T:It is sunny.", 0);
  check(&c, "<|channel|>final<|message|>Just the answer.", "|T:Just the answer.", 0);
  check(&c,
        "<|channel|>analysis<|message|>Need a tool.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
        "|R:Need a tool.|B0:get_weather|A0:{\"city\": \"Paris\"}|E0", 0);
  check(&c,
        "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>" TRICKY_ARGS
        "<|call|><|start|>assistant to=functions.g<|channel|>commentary json<|message|>{}",
        "|B0:f|A0:" TRICKY_ARGS "|E0|B1:g|A1:{}|E1", 0);
  check(&c,
        "<|channel|>commentary<|message|>Checking now.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.f<|message|>{}<|call|>",
        "|T:Checking now.|B0:f|A0:{}|E0", 0);
  check(&c, "<|channel|>analysis<|message|>a <|en b<|end|>", "|R:a <|en b", 0);
  check(&c, "<|channel|>analysis<|message|>thinking forever", "|R:thinking forever", 0);
  check(&c, "<|channel|>commentary to=python<|message|>print(1)<|call|>",
        "|B0:python|A0:{\"code\":\"print(1)\"}|E0", 0);
  check(&c, "<|channel|>commentary to=functions.f<|message|>{\"a\": x}", "|B0:f|A0:{\"a\": ", ERR_PARSE);
  check(&c, "<|channel|>commentary to=functions.f", "", ERR_PARSE); /* ended inside the header */
  outparse_config off = cfg_of(OUTPARSE_HARMONY, NULL, NULL, false, false);
  check(&off, "<|channel|>commentary to=functions.f<|message|>{}<|call|>", "|T:{}", 0);
}

/* thinking switched off: the reasoning is still parsed (the answer and the
 * calls after it come out whole) but never emitted, in every format */
TEST(outparse_hide_reasoning) {
  outparse_config h = cfg_of(OUTPARSE_HARMONY, NULL, NULL, false, true);
  h.hide_reasoning = true;
  check(&h,
        "<|channel|>analysis<|message|>User wants weather.<|end|><|start|>assistant<|channel|>final"
        "<|message|>It is sunny.<|return|>",
        "|T:It is sunny.", 0);
  check(&h,
        "<|channel|>analysis<|message|>Need a tool.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
        "|B0:get_weather|A0:{\"city\": \"Paris\"}|E0", 0);
  outparse_config q = cfg_of(OUTPARSE_HERMES, "<think>", "</think>", true, true);
  q.hide_reasoning = true;
  check(&q, "hmm</think>Answer<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
        "|T:Answer|B0:f|A0:{}|E0", 0);
  q.hide_reasoning = false;
  check(&q, "hmm</think>Answer", "|R:hmm|T:Answer", 0);
}

TEST(outparse_granite) {
  outparse_config c = cfg_of(OUTPARSE_GRANITE, "<think>", "</think>", false, true);
  check(&c,
        "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": "
        "\"b\", \"arguments\": {}}]",
        "|B0:get_weather|A0:{\"city\": \"Paris\"}|E0|B1:b|A1:{}|E1", 0);
  check(&c, "<think>hmm</think><response>Answer</response>", "|R:hmm|T:Answer", 0);
  check(&c, "I will call it.<|tool_call|>[{\"name\": \"f\", \"arguments\": " TRICKY_ARGS "}]",
        "|T:I will call it.|B0:f|A0:" TRICKY_ARGS "|E0", 0);
  check(&c, "<|tool_call|>{\"name\": \"f\", \"arguments\": {}}", "|B0:f|A0:{}|E0", 0);
  check(&c, "<|tool_call|>[]", "", 0);
  check(&c, "<|tool_call|>oops", "", ERR_PARSE);
}

TEST(outparse_functionary) {
  outparse_config c = cfg_of(OUTPARSE_FUNCTIONARY_V31, NULL, NULL, false, true);
  check(&c, "<function=get_weather>{\"city\": \"Paris\"}</function>",
        "|B0:get_weather|A0:{\"city\": \"Paris\"}|E0", 0);
  check(&c, "Checking.<function=a>{}</function>\n<function=b>" TRICKY_ARGS "</function>",
        "|T:Checking.|B0:a|A0:{}|E0|B1:b|A1:" TRICKY_ARGS "|E1", 0);
  check(&c, "<|python_tag|>import math\nprint(math.pi)", "|B0:python|A0:{\"code\":\"import math\\nprint(math.pi)\"}|E0", 0);
  check(&c, "a <functio b", "|T:a <functio b", 0);
  /* arguments as a JSON string (the template's tojson of a string) are decoded */
  check(&c, "<function=f>\"{\\\"a\\\": \\\"\\u00e9\\\"}\"</function>", "|B0:f|A0:{\"a\": \"\xc3\xa9\"}|E0", 0);
  check(&c, "<function=f>\"{\\x\"</function>", "|B0:f", ERR_PARSE);
  check(&c, "<function=f>{oops}</function>", "|B0:f|A0:{", ERR_PARSE);
  outparse_config v = cfg_of(OUTPARSE_FUNCTIONARY_V32, NULL, NULL, false, true);
  check(&v, "all\nHello there", "|T:Hello there", 0);
  check(&v, "get_weather\n{\"city\": \"Paris\"}", "|B0:get_weather|A0:{\"city\": \"Paris\"}|E0", 0);
  check(&v, "all\nLet me check.>>>get_weather\n{\"city\": \"Paris\"}>>>b\n" TRICKY_ARGS,
        "|T:Let me check.|B0:get_weather|A0:{\"city\": \"Paris\"}|E0|B1:b|A1:" TRICKY_ARGS "|E1", 0);
  check(&v, "python\nprint(1)>>>all\nDone", "|B0:python|A0:{\"code\":\"print(1)\"}|E0|T:Done", 0);
  check(&v, "all\na >> b", "|T:a >> b", 0);
  check(&v, "no recipient line at all, just a long answer without a newline",
        "|T:no recipient line at all, just a long answer without a newline", 0);
}

#define KM_S "<|tool_calls_section_begin|>"
#define KM_C "<|tool_call_begin|>"
#define KM_A "<|tool_call_argument_begin|>"
#define KM_E "<|tool_call_end|>"
#define KM_SE "<|tool_calls_section_end|>"

TEST(outparse_kimi_k2) {
  outparse_config c = cfg_of(OUTPARSE_KIMI_K2, "<think>", "</think>", false, true);
  check(&c,
        KM_S KM_C "functions.get_weather:0" KM_A "{\"city\": \"Paris\"}" KM_E KM_C "functions.b:1" KM_A
        "{}" KM_E KM_SE,
        "|B0:get_weather|A0:{\"city\": \"Paris\"}|E0|B1:b|A1:{}|E1", 0);
  check(&c, "<think>Use it.</think>Checking." KM_S " " KM_C " functions.f:12 " KM_A " " TRICKY_ARGS " " KM_E " " KM_SE "Done.",
        "|R:Use it.|T:Checking.|B0:f|A0:" TRICKY_ARGS "|E0|T:Done.", 0);
  check(&c, KM_C "my.tool:x" KM_A "{\"a\": 1}", "|B0:my.tool:x|A0:{\"a\": 1}|E0", 0);
  check(&c, "<|tool_call_beg", "|T:<|tool_call_beg", 0);
  check(&c, KM_S KM_C "functions.f:0" KM_A "{\"a\": }", "|B0:f|A0:{\"a\": ", ERR_PARSE);
}

TEST(outparse_command_r7b) {
  outparse_config c = cfg_of(OUTPARSE_COMMAND_R7B, "<|START_THINKING|>", "<|END_THINKING|>", false, true);
  check(&c,
        "<|START_THINKING|>I will look it up.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", "
        "\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}},\n    {\"tool_call_id\": "
        "\"1\", \"tool_name\": \"b\", \"parameters\": " TRICKY_ARGS "}\n]<|END_ACTION|>",
        "|R:I will look it up.|B0:get_weather|A0:{\"city\": \"Paris\"}|E0|B1:b|A1:" TRICKY_ARGS "|E1", 0);
  check(&c, "<|START_RESPONSE|>Hello <b>there</b><|END_RESPONSE|>", "|T:Hello <b>there</b>", 0);
  check(&c, "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"parameters\": {}}]", "", ERR_PARSE);
  outparse_config off = cfg_of(OUTPARSE_COMMAND_R7B, NULL, NULL, false, false);
  check(&off, "<|START_RESPONSE|>Hi<|END_RESPONSE|><|START_ACTION|>[]<|END_ACTION|>",
        "|T:Hi<|START_ACTION|>[]<|END_ACTION|>", 0);
}

TEST(outparse_qwen3_coder) {
  outparse_config c = cfg_of(OUTPARSE_QWEN3_CODER, "<think>", "</think>", false, true);
  check(&c,
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
        "</parameter>\n<parameter=flags>\n[\"a\", {\"b\": null}]\n</parameter>\n<parameter=exact>\nTrue\n"
        "</parameter>\n<parameter=note>\nline1\nline \"2\" </tool_call> \\ \xc3\xa9\t\n</parameter>\n</function>\n</tool_call>",
        "|B0:get_weather|A0:{\"city\": \"Paris\", \"days\": 3, \"flags\": [\"a\", {\"b\": null}], \"exact\": true, "
        "\"note\": \"line1\\nline \\\"2\\\" </tool_call> \\\\ \xc3\xa9\\t\"}|E0", 0);
  check(&c,
        "<think>Two calls.</think>Let me check.\n<tool_call>\n<function=a>\n</function>\n</tool_call>\n<tool_call>\n"
        "<function=b>\n<parameter=x>\n-1.5e3\n</parameter>\n<parameter=y>\n12 monkeys\n</parameter>\n</function>\n</tool_call>",
        "|R:Two calls.|T:Let me check.\n|B0:a|A0:{}|E0|B1:b|A1:{\"x\": -1.5e3, \"y\": \"12 monkeys\"}|E1", 0);
  check(&c, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", "|B0:f|A0:{\"a\": 1}|E0", 0);
  check(&c, "<tool_call><function=f><parameter=a>x</function></tool_call>", "|B0:f|A0:{\"a\": \"x\"}|E0", 0);
  check(&c, "<tool_call>\n<func", "", ERR_PARSE);
  check(&c, "<tool_call><function=f><bad>", "|B0:f|A0:{", ERR_PARSE);
  check(&c, "<tool_call><function=f><parameter=a>\nx", "|B0:f|A0:{\"a\": ", ERR_PARSE);
}

TEST(outparse_glm) {
  outparse_config c = cfg_of(OUTPARSE_GLM, "<think>", "</think>", true, true);
  check(&c,
        "Plan.</think>Checking.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
        "<arg_key>n</arg_key><arg_value>[1, {\"a\": \"</arg_key>\"}]</arg_value></tool_call>"
        "<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>Europe/Paris \"x\" \xc3\xa9</arg_value>\n</tool_call>",
        "|R:Plan.|T:Checking.|B0:get_weather|A0:{\"city\": \"Paris\", \"n\": [1, {\"a\": \"</arg_key>\"}]}|E0"
        "|B1:get_time|A1:{\"tz\": \"Europe/Paris \\\"x\\\" \xc3\xa9\"}|E1", 0);
  check(&c, "</think><tool_call>f</tool_call>Done", "|B0:f|A0:{}|E0|T:Done", 0);
  check(&c, "</think><tool_call>f<arg_key>a</arg_key>oops", "|B0:f|A0:{\"a\": ", ERR_PARSE);
  check(&c, "</think><tool_call>f<arg_key>a</arg_key><arg_value>1", "|B0:f|A0:{\"a\": ", ERR_PARSE);
}

TEST(outparse_seed_oss) {
  outparse_config c = cfg_of(OUTPARSE_SEED_OSS, "<seed:think>", "</seed:think>", false, true);
  check(&c,
        "<seed:think>Look up.</seed:think>\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
        "<parameter=n>[1, 2.5, True, None, 'it\\'s', \"a\\\"b\"]</parameter>\n<parameter=d>{'k': False}</parameter>\n"
        "<parameter=t>(1, 2)</parameter>\n</function>\n</seed:tool_call>",
        "|R:Look up.|B0:get_weather|A0:{\"city\": \"Paris\", \"n\": [1, 2.5, true, null, \"it's\", \"a\\\"b\"], "
        "\"d\": {\"k\": false}, \"t\": \"(1, 2)\"}|E0", 0);
  check(&c, "<tool_call><function=f></function></tool_call>", "|T:<tool_call><function=f></function></tool_call>", 0);
  check(&c, "<seed:tool_call><function=f></function>", "|B0:f|A0:{}|E0", 0);
}

TEST(outparse_minimax_m1) {
  outparse_config c = cfg_of(OUTPARSE_MINIMAX_M1, "<think>", "</think>", false, true);
  check(&c,
        "<think>Two.</think>\n<tool_calls>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
        "{\"name\": \"b\", \"arguments\": " TRICKY_ARGS "}\n</tool_calls>",
        "|R:Two.|B0:get_weather|A0:{\"city\": \"Paris\"}|E0|B1:b|A1:" TRICKY_ARGS "|E1", 0);
  check(&c, "<tool_calls>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_ca", "|B0:f|A0:{}|E0|T:</tool_ca", 0);
  check(&c, "<tool_calls>\nnope", "", ERR_PARSE);
}

/* LFM2: a Python-syntax list of calls between <|tool_call_start|> and
 * <|tool_call_end|>, as LFM2.5's template writes them (strings in single
 * quotes, lists by str(), dicts by tojson); a JSON call object in the list
 * is read too. */
TEST(outparse_lfm2) {
  outparse_config c = cfg_of(OUTPARSE_LFM2, "<think>", "</think>", false, true);
  check(&c, "Checking.<|tool_call_start|>[get_weather(city='Paris', days=3)]<|tool_call_end|>",
        "|T:Checking.|B0:get_weather|A0:{\"city\": \"Paris\", \"days\": 3}|E0", 0);
  check(&c,
        "<think>Two.</think><|tool_call_start|>[a(s='it\\'s \"x\" \xc3\xa9\\n', n=[1, 2.5, True, None, 'y'], "
        "d={\"k\": false}), b.c-d(), e(x=-1e3)]<|tool_call_end|>Done.",
        "|R:Two.|B0:a|A0:{\"s\": \"it's \\\"x\\\" \xc3\xa9\\n\", \"n\": [1, 2.5, true, null, \"y\"], "
        "\"d\": {\"k\": false}}|E0|B1:b.c-d|A1:{}|E1|B2:e|A2:{\"x\": -1e3}|E2|T:Done.", 0);
  check(&c, "<|tool_call_start|>[{\"name\": \"f\", \"arguments\": {\"a\": 1}}, g(b=\"z\")]<|tool_call_end|>",
        "|B0:f|A0:{\"a\": 1}|E0|B1:g|A1:{\"b\": \"z\"}|E1", 0);
  check(&c, "<|tool_call_start|>[]<|tool_call_end|>", "", 0);
  check(&c, "<|tool_call_start|>[f(a=1)]", "|B0:f|A0:{\"a\": 1}|E0", 0); /* no end marker: lenient */
  /* not Python literals, or not the list's shape: errors naming it */
  check(&c, "<|tool_call_start|>[f(a=(1, 2))]", "|B0:f|A0:{\"a\": ", ERR_PARSE);
  check(&c, "<|tool_call_start|>[f(a=x)]", "|B0:f|A0:{\"a\": ", ERR_PARSE);
  check(&c, "<|tool_call_start|>[f(a=1.)]", "|B0:f|A0:{\"a\": 1.", ERR_PARSE);
  check(&c, "<|tool_call_start|>f(a=1)", "", ERR_PARSE);
  check(&c, "<|tool_call_start|>[f(a=1) g()]", "|B0:f|A0:{\"a\": 1}|E0", ERR_PARSE);
  check(&c, "<|tool_call_start|>[f(a='x'", "|B0:f|A0:{\"a\": \"x\"", ERR_PARSE);
  check(&c, "<|tool_call_start|>[f(a=1),", "|B0:f|A0:{\"a\": 1}|E0", ERR_PARSE);
  outparse_config off = cfg_of(OUTPARSE_LFM2, NULL, NULL, false, false);
  check(&off, "<|tool_call_start|>[f()]", "|T:<|tool_call_start|>[f()]", 0);
}

/* Hold-back is minimal: what cannot start a marker is out at once. */
TEST(outparse_holdback_minimal) {
  outparse_config c = cfg_of(OUTPARSE_HERMES, "<think>", "</think>", false, true);
  outparse *p;
  rec r;
  rec_init(&r);
  ASSERT_INT_EQ(outparse_new(&c, rec_emit, &r, &p), 0);
  EXPECT_INT_EQ(outparse_feed(p, "<thi", 4), 0);
  EXPECT_INT_EQ((int)r.out.len, 0);
  EXPECT_INT_EQ(outparse_feed(p, "s is", 4), 0);
  EXPECT_STR_EQ(r.out.data, "|T:<this is");
  EXPECT_INT_EQ(outparse_feed(p, " fine <tool", 11), 0);
  EXPECT_STR_EQ(r.out.data, "|T:<this is fine ");
  EXPECT_INT_EQ((int)outparse_held(p), 5);
  EXPECT_FALSE(outparse_in_tool_call(p));
  EXPECT_INT_EQ(outparse_feed(p, "s>", 2), 0);
  EXPECT_STR_EQ(r.out.data, "|T:<this is fine <tools>");
  EXPECT_INT_EQ(outparse_feed(p, "\xc3", 1), 0); /* half a character is held */
  EXPECT_STR_EQ(r.out.data, "|T:<this is fine <tools>");
  EXPECT_INT_EQ(outparse_feed(p, "\xa9", 1), 0);
  EXPECT_STR_EQ(r.out.data, "|T:<this is fine <tools>\xc3\xa9");
  const char *call = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"x";
  EXPECT_INT_EQ(outparse_feed(p, call, strlen(call)), 0);
  EXPECT_STR_EQ(r.out.data, "|T:<this is fine <tools>\xc3\xa9|B0:f|A0:{\"a\": \"x");
  EXPECT_TRUE(outparse_in_tool_call(p));
  EXPECT_INT_EQ(outparse_feed(p, "y", 1), 0);
  EXPECT_STR_EQ(r.out.data, "|T:<this is fine <tools>\xc3\xa9|B0:f|A0:{\"a\": \"xy");
  EXPECT_INT_EQ(outparse_finish(p), ERR_PARSE);
  outparse_free(p);
  buf_free(&r.out);

  /* byte by byte plain text: every byte out immediately */
  outparse_config pl = cfg_of(OUTPARSE_PLAIN, NULL, NULL, false, false);
  rec_init(&r);
  ASSERT_INT_EQ(outparse_new(&pl, rec_emit, &r, &p), 0);
  const char *t = "abc <x> [y]";
  for (size_t i = 0; t[i]; i++) {
    EXPECT_INT_EQ(outparse_feed(p, t + i, 1), 0);
    EXPECT_INT_EQ((int)r.out.len, (int)(3 + i + 1));
  }
  outparse_free(p);
  buf_free(&r.out);
}

static void count_emit(void *ctx, const outparse_event *ev) {
  size_t *n = ctx;
  if (ev->kind == OUTPARSE_REASONING || ev->kind == OUTPARSE_TEXT || ev->kind == OUTPARSE_TOOL_CALL_ARGS)
    *n += ev->len;
}

/* Megabytes without a closing marker: streamed, memory stays bounded. */
TEST(outparse_hostile) {
  enum { CHUNK = 4096, TOTAL = 4 << 20 };
  char *chunk = malloc(CHUNK);
  ASSERT_TRUE(chunk != NULL);
  struct {
    enum outparse_format f;
    const char *prefix;
    char fill;
    int want_rc;
  } cases[] = {
      {OUTPARSE_PLAIN, "<think>", 'a', 0},
      {OUTPARSE_PLAIN, "", '<', 0},
      {OUTPARSE_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"", 'b', ERR_PARSE},
      {OUTPARSE_HERMES, "", '<', 0},
      {OUTPARSE_HARMONY, "<|channel|>analysis<|message|>", 'c', 0},
      {OUTPARSE_LLAMA3, "<|python_tag|>", 'd', 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    outparse_config c = cfg_of(cases[k].f, "<think>", "</think>", false, true);
    size_t n_out = 0, max_held = 0;
    outparse *p;
    ASSERT_INT_EQ(outparse_new(&c, count_emit, &n_out, &p), 0);
    EXPECT_INT_EQ(outparse_feed(p, cases[k].prefix, strlen(cases[k].prefix)), 0);
    memset(chunk, cases[k].fill, CHUNK);
    for (size_t done = 0; done < TOTAL; done += CHUNK) {
      EXPECT_INT_EQ(outparse_feed(p, chunk, CHUNK), 0);
      if (outparse_held(p) > max_held) max_held = outparse_held(p);
    }
    EXPECT_INT_EQ(outparse_finish(p), cases[k].want_rc);
    EXPECT_INT_LE((int)max_held, 64);
    EXPECT_INT_GE((int)n_out, TOTAL);
    outparse_free(p);
  }
  free(chunk);

  /* errors for the unbounded shapes */
  outparse_config h = cfg_of(OUTPARSE_HERMES, NULL, NULL, false, true);
  size_t n_out = 0;
  outparse *p;
  ASSERT_INT_EQ(outparse_new(&h, count_emit, &n_out, &p), 0);
  const char *pre = "<tool_call>{\"name\": \"f\", \"arguments\": ";
  EXPECT_INT_EQ(outparse_feed(p, pre, strlen(pre)), 0);
  int rc = 0;
  for (int i = 0; i < 100 && !rc; i++) rc = outparse_feed(p, "[", 1);
  EXPECT_INT_EQ(rc, ERR_TOO_LARGE);
  outparse_free(p);

  ASSERT_INT_EQ(outparse_new(&h, count_emit, &n_out, &p), 0);
  pre = "<tool_call>{\"arguments\": \"";
  EXPECT_INT_EQ(outparse_feed(p, pre, strlen(pre)), 0);
  char big[65536];
  memset(big, 'x', sizeof big);
  rc = 0;
  for (int i = 0; i < 40 && !rc; i++) rc = outparse_feed(p, big, sizeof big);
  EXPECT_INT_EQ(rc, ERR_TOO_LARGE);
  outparse_free(p);

  ASSERT_INT_EQ(outparse_new(&h, count_emit, &n_out, &p), 0);
  pre = "<tool_call>{\"name\": \"";
  EXPECT_INT_EQ(outparse_feed(p, pre, strlen(pre)), 0);
  EXPECT_INT_EQ(outparse_feed(p, big, 4096), ERR_PARSE);
  outparse_free(p);

  outparse_config hm = cfg_of(OUTPARSE_HARMONY, NULL, NULL, false, true);
  ASSERT_INT_EQ(outparse_new(&hm, count_emit, &n_out, &p), 0);
  EXPECT_INT_EQ(outparse_feed(p, "<|start|>", 9), 0);
  EXPECT_INT_EQ(outparse_feed(p, big, sizeof big), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "header");
  outparse_free(p);
}

TEST(outparse_config_checks) {
  outparse *p = (outparse *)1;
  rec r;
  rec_init(&r);
  outparse_config c = cfg_of(OUTPARSE_HERMES, "<think>", NULL, false, true);
  EXPECT_INT_EQ(outparse_new(&c, rec_emit, &r, &p), ERR_INVALID);
  EXPECT_TRUE(p == NULL);
  c = cfg_of((enum outparse_format)99, NULL, NULL, false, true);
  EXPECT_INT_EQ(outparse_new(&c, rec_emit, &r, &p), ERR_INVALID);
  c = cfg_of(OUTPARSE_PLAIN, NULL, NULL, false, false);
  ASSERT_INT_EQ(outparse_new(&c, rec_emit, &r, &p), 0);
  EXPECT_INT_EQ(outparse_finish(p), 0);
  EXPECT_INT_EQ(outparse_feed(p, "x", 1), ERR_INVALID); /* after finish */
  outparse_free(p);
  outparse_free(NULL);
  EXPECT_STR_EQ(outparse_format_name(OUTPARSE_HARMONY), "harmony");
  EXPECT_STR_EQ(outparse_format_name((enum outparse_format)99), "unknown");
  enum outparse_format f = OUTPARSE_PLAIN;
  EXPECT_INT_EQ(outparse_format_from_name("Functionary-V3.2", &f), 0);
  EXPECT_INT_EQ(f, OUTPARSE_FUNCTIONARY_V32);
  EXPECT_INT_EQ(outparse_format_from_name("hermes", &f), 0);
  EXPECT_INT_EQ(f, OUTPARSE_HERMES);
  EXPECT_INT_EQ(outparse_format_from_name("qwen-xml", &f), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "qwen-xml");
}

/* Random outputs built from fragments that matter to each format (markers,
 * partial markers, JSON pieces, whitespace, multi-byte characters): whatever
 * the parse gives, it must give it the same way whole, byte by byte and in
 * random chunks, with the recorder's invariants holding. */
static const char *const FRAGS[] = {
    "<think>", "</think>", "<thin", "\n", "  ", "Hello", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80",
    "<tool_call>", "</tool_call>", "<tool_", "{", "}", "[", "]", ",", ":", "\"", "\\\"",
    "{\"name\": \"f\", \"arguments\": {\"a\": 1}}", "{\"name\": \"g\", \"parameters\": {}}",
    "{\"a\": [1, \"x\"]}", "\"name\"", "\"arguments\"", "true", "-2.5e1", "<|python_tag|>",
    "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]", DS_CB, DS_C, DS_S, DS_CE, DS_CSE,
    "```json\n", "```", "<|channel|>", "analysis", "final", "commentary to=functions.f", "<|message|>",
    "<|end|>", "<|call|>", "<|start|>assistant", "<|return|>", "<|tool_call|>", "<response>",
    "</response>", "<function=f>", "</function>", ">>>", "all\n", "f\n", "python\n", "<", KM_S, KM_C,
    KM_A, KM_E, KM_SE, "functions.f:0", "<|START_ACTION|>", "<|END_ACTION|>", "<|START_RESPONSE|>",
    "\"tool_name\"", "<parameter=k>", "</parameter>", "<function=", "True", "<arg_key>", "</arg_key>",
    "<arg_value>", "</arg_value>", "<seed:tool_call>", "</seed:tool_call>", "<tool_calls>", "</tool_calls>",
    "[1, True, 'x']", "<|tool_call_start|>", "<|tool_call_end|>", "f(a='x', b=[1, None])", "g(", ")",
};

TEST(outparse_random_split_invariance) {
  static const enum outparse_format fmts[] = {
      OUTPARSE_PLAIN, OUTPARSE_HERMES, OUTPARSE_LLAMA3, OUTPARSE_MISTRAL, OUTPARSE_DEEPSEEK,
      OUTPARSE_HARMONY, OUTPARSE_GRANITE, OUTPARSE_FUNCTIONARY_V31, OUTPARSE_FUNCTIONARY_V32,
      OUTPARSE_KIMI_K2, OUTPARSE_COMMAND_R7B, OUTPARSE_QWEN3_CODER, OUTPARSE_GLM, OUTPARSE_SEED_OSS,
      OUTPARSE_MINIMAX_M1, OUTPARSE_LFM2};
  unsigned seed = 12345;
  int n_failed = 0;
  for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
    for (int doc = 0; doc < 400 && n_failed < 3; doc++) {
      char in[1024];
      size_t len = 0;
      int n_frag = 1 + (int)(lcg(&seed) % 40);
      for (int k = 0; k < n_frag; k++) {
        const char *fr = FRAGS[lcg(&seed) % (sizeof FRAGS / sizeof FRAGS[0])];
        size_t l = strlen(fr);
        if (len + l >= sizeof in) break;
        memcpy(in + len, fr, l);
        len += l;
      }
      in[len] = '\0';
      bool starts = doc % 3 == 0;
      const char *open = fmts[f] == OUTPARSE_MISTRAL ? "[THINK]" : "<think>";
      const char *close = fmts[f] == OUTPARSE_MISTRAL ? "[/THINK]" : "</think>";
      outparse_config c = cfg_of(fmts[f], doc % 5 == 4 ? NULL : open, doc % 5 == 4 ? NULL : close,
                                 starts, doc % 7 != 6);
      rec ref;
      int ref_rc = run_cuts(&c, in, NULL, 0, &ref);
      const char *want = ref.out.data ? ref.out.data : "";
      size_t cuts[1024];
      for (int variant = 0; variant < 4; variant++) {
        size_t n_cuts = 0;
        if (variant == 0) {
          for (size_t i = 1; i < len; i++) cuts[n_cuts++] = i;
        } else {
          for (size_t at = 0;;) {
            at += 1 + lcg(&seed) % (variant == 1 ? 3 : 12);
            if (at >= len) break;
            cuts[n_cuts++] = at;
          }
        }
        rec r;
        int rc = run_cuts(&c, in, cuts, n_cuts, &r);
        const char *got = r.out.data ? r.out.data : "";
        if (rc != ref_rc || strcmp(got, want) || r.problem[0] || ref.problem[0]) {
          n_failed++;
          test_fail_at(__FILE__, __LINE__, "%s variant %d: rc %d vs %d %s%s\n  got  \"%s\"\n  want \"%s\"\n  input \"%s\"",
                       outparse_format_name(c.format), variant, rc, ref_rc, r.problem, ref.problem, got,
                       want, in);
        }
        buf_free(&r.out);
      }
      buf_free(&ref.out);
    }
  }
}

/* Arbitrary bytes (invalid UTF-8, NULs, markers' bytes) never crash the
 * parser (run under ASan), and still parse the same however they are split. */
TEST(outparse_random_bytes) {
  static const char alphabet[] = "<>|{}[]\":, \n\\/=_tcal!\x00\x80\xbf\xc3\xe2\xef\xf0\xff";
  unsigned seed = 777;
  g_check_utf8 = false;
  for (int f = 0; f < OUTPARSE_FORMAT_COUNT_; f++) {
    for (int doc = 0; doc < 60; doc++) {
      char in[200];
      size_t len = 1 + lcg(&seed) % (sizeof in - 1);
      for (size_t i = 0; i < len; i++) {
        in[i] = lcg(&seed) % 4 ? alphabet[lcg(&seed) % (sizeof alphabet - 1)] : (char)(lcg(&seed) & 0xff);
        if (in[i] == '\0') in[i] = '\x01'; /* run_cuts takes a C string */
      }
      in[len] = '\0';
      outparse_config c = cfg_of((enum outparse_format)f, "<think>", "</think>", doc % 2, true);
      rec ref;
      int ref_rc = run_cuts(&c, in, NULL, 0, &ref);
      size_t cuts[200];
      size_t n_cuts = 0;
      for (size_t i = 1; i < len; i++) cuts[n_cuts++] = i;
      rec r;
      int rc = run_cuts(&c, in, cuts, n_cuts, &r);
      TEST_CHECK_(rc == ref_rc && !strcmp(r.out.data ? r.out.data : "", ref.out.data ? ref.out.data : "") &&
                      !r.problem[0],
                  0, "%s doc %d: byte-by-byte differs from whole (%d vs %d) %s",
                  outparse_format_name(c.format), doc, rc, ref_rc, r.problem);
      buf_free(&r.out);
      buf_free(&ref.out);
    }
  }
  g_check_utf8 = true;
}
