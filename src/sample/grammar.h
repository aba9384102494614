/*
 * grammar.h - context-free grammars over Unicode code points (a GBNF text
 * form), an incremental matcher, and the per-step token mask that constrains
 * decoding to outputs the grammar can still complete.
 *
 * Three objects:
 *   grammar        compiled, immutable; shared by any number of states and
 *                  threads (grammar_parse, grammar_free).
 *   grammar_state  where one output is in the grammar: a set of pushdown
 *                  stacks plus a pending partial UTF-8 sequence. Owned by one
 *                  slot; clone it to look ahead (grammar_state_*).
 *   grammar_vocab  a byte trie of a tokenizer's decoded pieces, built once per
 *                  tokenizer and shared read-only (grammar_vocab_*).
 *
 * GBNF text form (the llama.cpp dialect):
 *   name ::= alternatives            one rule; `root` is the start rule
 *   a b c                            sequence
 *   a | b                            alternatives
 *   "lit\n"                          literal (escapes \n \r \t \\ \" \[ \] \-
 *                                    \/ \xHH \uHHHH \UHHHHHHHH)
 *   [a-z_] [^"\\]                    character class / negated class over
 *                                    code points (same escapes)
 *   .                                any code point
 *   ( ... )                          group
 *   x* x+ x? x{m} x{m,} x{m,n}       repetition (m, n <= GRAMMAR_MAX_REPEAT)
 *   # comment                        to end of line
 * A rule may continue over several lines; the next rule starts where a line
 * reads `name ::=`. Errors are ERR_PARSE with "line:col: what" detail; a
 * reference to an undefined rule, a missing root and a left-recursive rule
 * (including one through nullable prefixes, like ("a"?)*) are errors too,
 * because the matcher expands rules depth-first.
 *
 * Matching semantics: grammar_accept_bytes() takes UTF-8 in any split (a
 * token may end inside a code point). A partial code point is accepted when
 * its bytes are a valid UTF-8 prefix and some code point starting with them
 * can be matched next; the check is exact at the code-point level. The
 * mask and grammar_token_allowed() use the very same rule, so "token i is
 * allowed" == "a clone of the state accepts token i's bytes".
 *
 * Limits: a stack deeper than GRAMMAR_MAX_DEPTH, a state with more than
 * GRAMMAR_MAX_STACKS stacks, or more than GRAMMAR_MAX_STEP_WORK rule
 * expansions for one code point drops the paths beyond the limit (and
 * grammar_accept_bytes gives ERR_TOO_LARGE when none is left), so a
 * pathological grammar cannot exhaust memory or time. Grammars made by
 * json_schema.c stay far below these limits.
 */
#ifndef PARLEY_SAMPLE_GRAMMAR_H
#define PARLEY_SAMPLE_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GRAMMAR_MAX_REPEAT 10000
#define GRAMMAR_MAX_DEPTH 4096
#define GRAMMAR_MAX_STACKS 4096
#define GRAMMAR_MAX_STEP_WORK 100000 /* rule expansions per code point */
#define GRAMMAR_MAX_TEXT (16u << 20) /* bytes of GBNF text accepted */

typedef struct grammar grammar;
typedef struct grammar_state grammar_state;
typedef struct grammar_vocab grammar_vocab;

/* Parses and compiles GBNF text (len bytes, need not be NUL-terminated).
 * root: name of the start rule, NULL for "root". Errors: ERR_PARSE (syntax,
 * undefined rule, left recursion; detail "line:col: ..."), ERR_NOT_FOUND (no
 * start rule), ERR_TOO_LARGE (text or repetition counts over the limits),
 * ERR_NOMEM. */
int grammar_parse(const char *text, size_t len, const char *root, grammar **out);
void grammar_free(grammar *g);
/* Number of rules after compilation (repetitions and groups add rules). */
size_t grammar_n_rules(const grammar *g);

/* A state at the start of the output. */
int grammar_state_new(const grammar *g, grammar_state **out);
int grammar_state_clone(const grammar_state *s, grammar_state **out);
void grammar_state_free(grammar_state *s);
/* Advances by len bytes of UTF-8. Returns 0 when the bytes keep the output
 * a valid prefix; otherwise ERR_INVALID (rejected: invalid UTF-8 or no
 * stack matches) or ERR_TOO_LARGE (limits), and the state is unchanged. */
int grammar_accept_bytes(grammar_state *s, const void *bytes, size_t len);
/* True when the output so far is a complete sentence of the grammar (and no
 * code point is pending): end-of-sequence may be sampled. */
bool grammar_can_end(const grammar_state *s);
/* True when accepting these bytes would succeed; s is not modified. Zero
 * bytes give false (a piece that adds nothing is never allowed). Cheap: meant
 * for checking the sampled token first and computing the mask only when it
 * is rejected. */
bool grammar_token_allowed(const grammar_state *s, const void *bytes, size_t len);

/* Builds the trie of n pieces: pieces[i] has lens[i] bytes (decoded, raw
 * bytes of the token's text). A NULL piece or a zero length marks a token
 * that is never allowed under a grammar (control tokens, BOS/EOS: the caller
 * decides EOS with grammar_can_end). Errors: ERR_NOMEM, ERR_TOO_LARGE (more
 * than 2^31 tokens or a piece over 64 KiB). */
int grammar_vocab_new(const char *const *pieces, const size_t *lens, size_t n, grammar_vocab **out);
void grammar_vocab_free(grammar_vocab *v);
size_t grammar_vocab_n_tokens(const grammar_vocab *v);
size_t grammar_vocab_n_nodes(const grammar_vocab *v);

/* Fills allowed[0..n_tokens) with 1 for each token whose bytes the state
 * accepts and 0 otherwise, walking the trie and skipping every subtree
 * whose prefix is rejected. *eos_allowed (may be NULL) = grammar_can_end(s).
 * Returns 0 or ERR_NOMEM. */
int grammar_mask(const grammar_state *s, const grammar_vocab *v, uint8_t *allowed, bool *eos_allowed);

#endif
