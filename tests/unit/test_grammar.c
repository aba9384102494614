/*
 * test_grammar.c - GBNF parsing, the matcher and the token mask.
 *
 * Expectations are hand-written (which strings a grammar accepts), and the
 * mask is checked against brute force: every token of a small vocabulary
 * tried on its own with grammar_accept_bytes() on a fresh clone.
 */
#include <stdlib.h>

#include "base/err.h"
#include "sample/grammar.h"
#include "test.h"

static grammar *compile(const char *text) {
  grammar *g = NULL;
  int rc = grammar_parse(text, strlen(text), NULL, &g);
  if (rc) fprintf(stderr, "grammar_parse: %s\n", err_detail());
  return g;
}

/* 1: whole input accepted and complete; 0: prefix accepted, not complete;
 * -1: rejected somewhere. Feeds the input in pieces of `chunk` bytes. */
static int run(const grammar *g, const char *in, size_t chunk) {
  grammar_state *s;
  if (grammar_state_new(g, &s)) return -2;
  size_t n = strlen(in);
  int res = 0;
  for (size_t i = 0; i < n; i += chunk) {
    size_t k = n - i < chunk ? n - i : chunk;
    if (grammar_accept_bytes(s, in + i, k)) {
      res = -1;
      break;
    }
  }
  if (res == 0 && grammar_can_end(s)) res = 1;
  grammar_state_free(s);
  return res;
}

/* Every split gives the same answer (partial UTF-8 across pieces). */
static int match(const grammar *g, const char *in) {
  int r1 = run(g, in, 1 << 20);
  int r2 = run(g, in, 1);
  int r3 = run(g, in, 2);
  if (r1 != r2 || r1 != r3) return 99;
  return r1;
}

static int parse_rc(const char *text) {
  grammar *g = NULL;
  int rc = grammar_parse(text, strlen(text), NULL, &g);
  grammar_free(g);
  return rc;
}

TEST(grammar_parse_errors) {
  EXPECT_INT_EQ(parse_rc("root ::= \"abc"), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "1:10");
  EXPECT_STR_CONTAINS(err_detail(), "unterminated");
  EXPECT_INT_EQ(parse_rc("root ::= a\n\nb ::= [a-"), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "3:7");
  EXPECT_INT_EQ(parse_rc("root ::= foo"), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "'foo' is not defined");
  EXPECT_STR_CONTAINS(err_detail(), "1:10");
  EXPECT_INT_EQ(parse_rc("other ::= \"x\""), ERR_NOT_FOUND);
  EXPECT_INT_EQ(parse_rc("root ::= root \"x\" | \"y\""), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "left-recursive");
  EXPECT_INT_EQ(parse_rc("root ::= a b\na ::= \"\" | \"q\"\nb ::= a root | \"z\""), ERR_PARSE);
  EXPECT_INT_EQ(parse_rc("root ::= (\"a\"?)*"), ERR_PARSE);
  EXPECT_INT_EQ(parse_rc("root ::= \"a\"{3,2}"), ERR_PARSE);
  EXPECT_INT_EQ(parse_rc("root ::= \"a\"{99999}"), ERR_TOO_LARGE);
  EXPECT_INT_EQ(parse_rc("root ::= (\"a\" | \"b\""), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "unclosed");
  EXPECT_INT_EQ(parse_rc("root ::= \"a\"\nroot ::= \"b\""), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "2:1");
  EXPECT_INT_EQ(parse_rc("root ::= \"\\q\""), ERR_PARSE);
  EXPECT_INT_EQ(parse_rc("root ::= [z-a]"), ERR_PARSE);
  EXPECT_INT_EQ(parse_rc("root = \"a\""), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "::=");
  EXPECT_INT_EQ(parse_rc("root ::= \"a\" )"), ERR_PARSE);
  EXPECT_INT_EQ(parse_rc("root ::= \"\xff\""), ERR_PARSE);
  EXPECT_INT_EQ(parse_rc("root ::= []"), ERR_PARSE);
  EXPECT_INT_EQ(parse_rc("  # only a comment\n"), ERR_NOT_FOUND);
  EXPECT_INT_EQ(parse_rc("root ::= \"a\" # comment\n  \"b\" # more\n"), 0);
  EXPECT_INT_EQ(parse_rc("root ::= \"\"* \"\"{2,3} \"x\""), 0); /* found by the fuzzer */
}

TEST(grammar_literals_and_sequences) {
  grammar *g = compile("root ::= \"ab\" c \"d\"\nc ::= \"x\" | \"yz\" | \"\"");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(match(g, "abxd"), 1);
  EXPECT_INT_EQ(match(g, "abyzd"), 1);
  EXPECT_INT_EQ(match(g, "abd"), 1);
  EXPECT_INT_EQ(match(g, "ab"), 0);
  EXPECT_INT_EQ(match(g, "aby"), 0);
  EXPECT_INT_EQ(match(g, "abyd"), -1);
  EXPECT_INT_EQ(match(g, "abxdd"), -1);
  EXPECT_INT_EQ(match(g, "b"), -1);
  EXPECT_INT_EQ(match(g, ""), 0);
  grammar_free(g);
}

TEST(grammar_classes_unicode) {
  grammar *g = compile("root ::= [a-c\\u00e9-\\u00ea] [^a-z\\n] . \"\\u20ac\"");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(match(g, "aA!\xe2\x82\xac"), 1);
  EXPECT_INT_EQ(match(g, "\xc3\xa9" "1" "\xf0\x9f\x98\x80" "\xe2\x82\xac"), 1); /* é 1 😀 € */
  EXPECT_INT_EQ(match(g, "\xc3\xaa" "\xc3\xa9" "x" "\xe2\x82\xac"), 1);
  EXPECT_INT_EQ(match(g, "\xc3\xab"), -1); /* ë outside é-ê */
  EXPECT_INT_EQ(match(g, "dA"), -1);
  EXPECT_INT_EQ(match(g, "aa"), -1);
  EXPECT_INT_EQ(match(g, "a\n"), -1);
  EXPECT_INT_EQ(match(g, "aAb\xe2\x82"), 0); /* partial euro sign */
  EXPECT_INT_EQ(match(g, "aAb\xe2\x82\xad"), -1); /* U+20AD */
  EXPECT_INT_EQ(match(g, "aAb\xe2\x81"), -1);     /* no U+204x can follow */
  EXPECT_INT_EQ(match(g, "aAb\xe3"), -1);          /* U+3xxx cannot follow */
  EXPECT_INT_EQ(match(g, "\xc3"), 0);              /* could be é */
  EXPECT_INT_EQ(match(g, "\xc4"), -1);             /* U+0100.. cannot */
  EXPECT_INT_EQ(match(g, "\x80"), -1);             /* invalid UTF-8 */
  EXPECT_INT_EQ(match(g, "a\xc0\x80"), -1);        /* overlong */
  EXPECT_INT_EQ(match(g, "a\xed\xa0\x80"), -1);    /* surrogate */
  grammar_free(g);
}

TEST(grammar_repetition) {
  grammar *g = compile("root ::= \"a\"* \"b\"+ (\"cd\")? \"e\"{2} \"f\"{1,3} \"g\"{2,}");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(match(g, "beefgg"), 1);
  EXPECT_INT_EQ(match(g, "aaabbcdeefffggggg"), 1);
  EXPECT_INT_EQ(match(g, "eefgg"), -1);
  EXPECT_INT_EQ(match(g, "bcdcdeefgg"), -1);
  EXPECT_INT_EQ(match(g, "beeefgg"), -1);
  EXPECT_INT_EQ(match(g, "beeffffgg"), -1);
  EXPECT_INT_EQ(match(g, "beefg"), 0);
  EXPECT_INT_EQ(match(g, "bc"), 0);
  EXPECT_INT_EQ(match(g, "bce"), -1);
  grammar_free(g);
  g = compile("root ::= x{0,3}\nx ::= [0-9]");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(match(g, ""), 1);
  EXPECT_INT_EQ(match(g, "123"), 1);
  EXPECT_INT_EQ(match(g, "1234"), -1);
  grammar_free(g);
}

TEST(grammar_recursion_nested) {
  /* balanced parentheses and a JSON-ish list, both right-recursive */
  grammar *g = compile("root ::= p\np ::= \"(\" p \")\" p | \"\"");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(match(g, "(()())()"), 1);
  EXPECT_INT_EQ(match(g, "(()"), 0);
  EXPECT_INT_EQ(match(g, "())"), -1);
  char deep[2001];
  for (int i = 0; i < 1000; i++) deep[i] = '(', deep[1000 + i] = ')';
  deep[2000] = '\0';
  EXPECT_INT_EQ(run(g, deep, 1 << 20), 1);
  grammar_free(g);
  g = compile("root ::= \"[\" ws (v (ws \",\" ws v)*)? ws \"]\"\n"
              "v ::= [0-9]+ | root\nws ::= [ ]*");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(match(g, "[1, [2,3 ], []]"), 1);
  EXPECT_INT_EQ(match(g, "[1,,2]"), -1);
  EXPECT_INT_EQ(match(g, "[  ]"), 1);
  grammar_free(g);
}

TEST(grammar_state_clone_independent) {
  grammar *g = compile("root ::= \"ab\" | \"ac\"");
  ASSERT_TRUE(g != NULL);
  grammar_state *s, *c;
  ASSERT_INT_EQ(grammar_state_new(g, &s), 0);
  ASSERT_INT_EQ(grammar_accept_bytes(s, "a", 1), 0);
  ASSERT_INT_EQ(grammar_state_clone(s, &c), 0);
  EXPECT_INT_EQ(grammar_accept_bytes(s, "b", 1), 0);
  EXPECT_INT_EQ(grammar_accept_bytes(c, "c", 1), 0);
  EXPECT_TRUE(grammar_can_end(s));
  EXPECT_TRUE(grammar_can_end(c));
  EXPECT_INT_EQ(grammar_accept_bytes(s, "x", 1), ERR_INVALID);
  EXPECT_TRUE(grammar_can_end(s)); /* unchanged after a rejection */
  EXPECT_FALSE(grammar_token_allowed(s, "", 0));
  grammar_state_free(s);
  grammar_state_free(c);
  grammar_free(g);
}

/* ---- mask vs brute force ---- */

static const char *const TINY_VOCAB[] = {
    "{", "}", "{\"", "\"", "\":", "\": ", ",", ", ", " ", "\n", "\n  ", "a", "ab", "abc", "b",
    "1", "12", "0", "-", "-1", ".", ".5", "e", "true", "tr", "ue", "null", "nu", "[", "]",
    "[]", "{}", "\xc3", "\xa9", "\xc3\xa9", "\xe2\x82", "\xac", "\xe2\x82\xac", "\xe2\x82\xac\"",
    "\xf0\x9f", "\x98\x80", "\xf0\x9f\x98\x80", "x\xc3", "\\", "\\n", "\\u00", "e9", "\"}",
    "\"a\"", "name", "\"name\"", "\":\"", "\x80", "\xff", "ab\"", "\"\n}", NULL, "", "\xed\xa0",
};
#define N_TINY (sizeof TINY_VOCAB / sizeof TINY_VOCAB[0])

static grammar_vocab *tiny_vocab(void) {
  size_t lens[N_TINY];
  for (size_t i = 0; i < N_TINY; i++) lens[i] = TINY_VOCAB[i] ? strlen(TINY_VOCAB[i]) : 0;
  grammar_vocab *v = NULL;
  grammar_vocab_new(TINY_VOCAB, lens, N_TINY, &v);
  return v;
}

/* Compares the mask at the state after `prefix` with per-token brute force.
 * Returns the number of allowed tokens, or -1 on a mismatch. */
static int check_mask(const grammar *g, const grammar_vocab *v, const char *prefix) {
  grammar_state *s;
  if (grammar_state_new(g, &s)) return -1;
  if (grammar_accept_bytes(s, prefix, strlen(prefix))) {
    fprintf(stderr, "prefix \"%s\" rejected\n", prefix);
    grammar_state_free(s);
    return -1;
  }
  uint8_t mask[N_TINY];
  bool eos;
  if (grammar_mask(s, v, mask, &eos)) return -1;
  int n_allowed = 0, bad = 0;
  for (size_t i = 0; i < N_TINY; i++) {
    const char *t = TINY_VOCAB[i];
    int brute = 0;
    if (t && *t) {
      grammar_state *c;
      if (grammar_state_clone(s, &c)) return -1;
      brute = grammar_accept_bytes(c, t, strlen(t)) == 0;
      grammar_state_free(c);
    }
    int lazy = grammar_token_allowed(s, t, t ? strlen(t) : 0);
    if (mask[i] != brute || lazy != brute) {
      fprintf(stderr, "prefix \"%s\" token %zu \"%s\": mask %d lazy %d brute %d\n", prefix, i,
              t ? t : "(null)", mask[i], lazy, brute);
      bad = 1;
    }
    n_allowed += brute;
  }
  if (eos != grammar_can_end(s)) bad = 1;
  grammar_state_free(s);
  return bad ? -1 : n_allowed;
}

TEST(grammar_mask_equals_brute_force) {
  grammar_vocab *v = tiny_vocab();
  ASSERT_TRUE(v != NULL);
  EXPECT_INT_EQ(grammar_vocab_n_tokens(v), N_TINY);
  static const char *const grammars[] = {
      /* JSON-ish object with string values and unicode */
      "root ::= \"{\" ws (kv (\",\" ws kv)*)? \"}\"\n"
      "kv ::= str \":\" ws (str | num | \"true\" | \"null\") ws\n"
      "str ::= \"\\\"\" ([^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}))* \"\\\"\"\n"
      "num ::= \"-\"? ([0-9] | [1-9] [0-9]+) (\".\" [0-9]+)? ([eE] [0-9]+)?\n"
      "ws ::= [ \\n]{0,3}",
      /* only the euro sign or é, and emoji */
      "root ::= (\"\\u20ac\" | [\\u00e9] | [\\U0001F600-\\U0001F64F])+ \"\\\"\"?",
      /* negated class, everything but ASCII letters */
      "root ::= [^a-zA-Z]*",
      /* fixed words */
      "root ::= (\"true\" | \"null\" | \"name\") \" \"?",
  };
  static const char *const prefixes[][6] = {
      {"", "{", "{\"", "{\"a\": ", "{\"a\": \"x\xc3", "{\"a\":1"},
      {"", "\xe2", "\xe2\x82\xac", "\xf0\x9f", "\xc3\xa9\xf0\x9f\x98\x80", NULL},
      {"", "1", "\xe2\x82", "\xc3", NULL, NULL},
      {"", "t", "nu", "name", NULL, NULL},
  };
  for (size_t gi = 0; gi < sizeof grammars / sizeof grammars[0]; gi++) {
    grammar *g = compile(grammars[gi]);
    ASSERT_TRUE(g != NULL);
    for (size_t pi = 0; pi < 6 && prefixes[gi][pi]; pi++) {
      int n = check_mask(g, v, prefixes[gi][pi]);
      TEST_CHECK_(n >= 0, 0, "grammar %zu prefix %zu: mask differs from brute force", gi, pi);
    }
    grammar_free(g);
  }
  /* a few hand-counted masks */
  grammar *g = compile("root ::= (\"true\" | \"null\" | \"name\") \" \"?");
  ASSERT_TRUE(g != NULL);
  EXPECT_INT_EQ(check_mask(g, v, ""), 5);   /* true tr null nu name */
  EXPECT_INT_EQ(check_mask(g, v, "nu"), 0);   /* no "ll" token */
  EXPECT_INT_EQ(check_mask(g, v, "tr"), 1);   /* "ue" */
  EXPECT_INT_EQ(check_mask(g, v, "true"), 1); /* " " */
  grammar_free(g);
  grammar_vocab_free(v);
}

TEST(grammar_limits_do_not_hang) {
  /* 6,000 nullable repetitions: the start state alone has more distinct
   * stacks than GRAMMAR_MAX_STACKS; the extra paths are dropped, nothing
   * crashes, and input still matches along the kept ones. */
  grammar *g = compile("root ::= a{0,6000} \"z\"\na ::= \"a\" | \"\"");
  ASSERT_TRUE(g != NULL);
  grammar_state *s;
  ASSERT_INT_EQ(grammar_state_new(g, &s), 0);
  int rc = grammar_accept_bytes(s, "aa", 2);
  EXPECT_TRUE(rc == 0 || rc == ERR_TOO_LARGE);
  grammar_state_free(s);
  grammar_free(g);
  /* deep nesting beyond GRAMMAR_MAX_DEPTH is rejected, not a crash */
  g = compile("root ::= \"(\" root \")\" | \"x\"");
  ASSERT_TRUE(g != NULL);
  ASSERT_INT_EQ(grammar_state_new(g, &s), 0);
  int first_fail = -1;
  for (int i = 0; i < GRAMMAR_MAX_DEPTH + 10 && first_fail < 0; i++)
    if (grammar_accept_bytes(s, "(", 1)) first_fail = i;
  EXPECT_INT_GT(first_fail, 1000);
  grammar_state_free(s);
  grammar_free(g);
}
