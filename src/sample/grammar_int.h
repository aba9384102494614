/*
 * grammar_int.h - the compiled grammar shared by the GBNF compiler
 * (grammar.c) and the matcher (grammar_match.c). Not a public header.
 *
 * A compiled grammar is one flat array of elements. Rule r has alternatives
 * alt_off[rule_alt[r]] .. alt_off[rule_alt[r+1]-1]; each alternative is a run
 * of CHAR and REF elements ended by an END element (an empty alternative is
 * a lone END). A CHAR element matches one code point against the ranges
 * ranges[2*a .. 2*(a+b)) (inclusive lo, hi pairs), inverted when negate.
 * A REF element names rule a. Invariant checked at compile time: no rule is
 * left-recursive, so depth-first expansion of REFs always terminates.
 */
#ifndef PARLEY_SAMPLE_GRAMMAR_INT_H
#define PARLEY_SAMPLE_GRAMMAR_INT_H

#include <stdint.h>

#include "sample/grammar.h"

enum gelem_type { GELEM_END = 0, GELEM_CHAR = 1, GELEM_REF = 2 };

typedef struct gelem {
  uint8_t type;   /* enum gelem_type */
  uint8_t negate; /* CHAR: match code points outside the ranges */
  uint32_t a;     /* CHAR: first range; REF: rule index */
  uint32_t b;     /* CHAR: number of ranges */
} gelem;

struct grammar {
  gelem *elems;
  uint32_t n_elems;
  uint32_t *ranges; /* lo, hi pairs */
  uint32_t n_ranges;
  uint32_t *alt_off;  /* element index where each alternative starts */
  uint32_t *rule_alt; /* n_rules + 1 entries into alt_off */
  uint32_t n_rules;
  uint32_t root;
  char **names; /* n_rules rule names, for messages */
};

#endif
