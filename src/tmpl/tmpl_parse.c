/*
 * tmpl_parse.c - recursive-descent parser from tokens to the AST
 * (tm_node, see tmpl_internal.h), and the tmpl_compile entry point.
 *
 * The expression grammar and its precedence follow jinja2's parser
 * (jinja2/parser.py), lowest first:
 *   condexpr  := or ('if' or ('else' condexpr)?)*
 *   or, and, not, compare (== != < <= > >= in, not in; chained)
 *   math1 (+ -), concat (~), math2 (* / // %), pow (**),
 *   unary (- +) then postfix (.name [sub] (call)) then filters (| name),
 *   tests (is [not] name) and further calls.
 * Statements: if/elif/else, for (targets, inline if, else, loop.*), set
 * (name, tuple, ns.attr, block set), macro, call, filter, with, break, continue,
 * generation (renders its body; transformers' extension). Unknown filters and
 * tests are render errors when reached (jinja2 3 defers them the same way
 * inside conditional code).
 *
 * Start reading at tmpl_compile, then parse_body and parse_stmt.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "tmpl/tmpl_internal.h"

#define MAX_NEST 200

typedef struct parser {
  tmpl_heap *h;
  const tm_tok *t;
  size_t n, i;
  int nest;
} parser;

static const tm_tok *cur(parser *P) { return &P->t[P->i]; }
static const tm_tok *peek(parser *P, size_t k) { return &P->t[P->i + k < P->n ? P->i + k : P->n - 1]; }
static void next(parser *P) { if (P->i + 1 < P->n) P->i++; }

static _Noreturn void perr(parser *P, const tm_tok *t, const char *fmt, const char *arg) {
  (void)P;
  char msg[256];
  snprintf(msg, sizeof msg, fmt, arg);
  tm_compile_error(P->h, t->line, t->col, "%s", msg);
}

static bool is_op(const tm_tok *t, const char *op) {
  return t->kind == TM_T_OP && t->n == strlen(op) && memcmp(t->s, op, t->n) == 0;
}
static bool is_name(const tm_tok *t, const char *name) {
  return t->kind == TM_T_NAME && t->n == strlen(name) && memcmp(t->s, name, t->n) == 0;
}
static bool skip_op(parser *P, const char *op) {
  if (is_op(cur(P), op)) { next(P); return true; }
  return false;
}
static bool skip_name(parser *P, const char *name) {
  if (is_name(cur(P), name)) { next(P); return true; }
  return false;
}
static const char *tok_desc(const tm_tok *t) {
  switch (t->kind) {
  case TM_T_EOF: return "end of template";
  case TM_T_BLOCK_END: return "end of block '%}'";
  case TM_T_VAR_END: return "end of print '}}'";
  case TM_T_NAME: return "a name";
  case TM_T_STRING: return "a string";
  default: return "a token";
  }
}
static void expect_op(parser *P, const char *op) {
  if (!skip_op(P, op)) {
    char msg[96];
    snprintf(msg, sizeof msg, "expected '%s', got %s", op, tok_desc(cur(P)));
    tm_compile_error(P->h, cur(P)->line, cur(P)->col, "%s", msg);
  }
}
static void expect_block_end(parser *P) {
  if (cur(P)->kind != TM_T_BLOCK_END) perr(P, cur(P), "expected end of block '%%}', got %s", tok_desc(cur(P)));
  next(P);
}

static tm_node *mk(parser *P, tm_node_kind k, const tm_tok *at) {
  tm_node *n = hp_alloc(P->h, sizeof *n);
  n->kind = k;
  n->line = at->line;
  n->col = at->col;
  return n;
}

static void add_kid(parser *P, tm_node *n, tm_node *kid) {
  if ((n->n_kids & (n->n_kids - 1)) == 0) { /* grow at powers of two */
    size_t cap = n->n_kids ? n->n_kids * 2 : 1;
    n->kids = hp_realloc(P->h, n->kids, cap * sizeof(tm_node *));
  }
  n->kids[n->n_kids++] = kid;
}

static char *tok_str(parser *P, const tm_tok *t) {
  char *s = hp_alloc(P->h, t->n + 1);
  memcpy(s, t->s, t->n);
  return s;
}

static tm_node *parse_expr(parser *P);
static tm_node *parse_or(parser *P);
static tm_node *parse_unary(parser *P, bool with_filter);
static tm_node *parse_body(parser *P, const char *const *ends, const char **which, const tm_tok *opener);

static void enter(parser *P) {
  if (++P->nest > MAX_NEST) perr(P, cur(P), "%s", "template nested too deeply");
}

/* ------------------------------------------------------------ expressions */

static tm_node *parse_tuple(parser *P, bool simplified, bool with_condexpr) {
  const tm_tok *at = cur(P);
  tm_node *first = simplified ? parse_unary(P, true) : with_condexpr ? parse_expr(P) : parse_or(P);
  if (!is_op(cur(P), ",")) return first;
  tm_node *t = mk(P, TM_N_TUPLE, at);
  add_kid(P, t, first);
  while (skip_op(P, ",")) {
    const tm_tok *c = cur(P);
    if (c->kind == TM_T_BLOCK_END || c->kind == TM_T_VAR_END || is_op(c, ")") || is_name(c, "in") || is_op(c, "=")) break;
    add_kid(P, t, simplified ? parse_unary(P, true) : with_condexpr ? parse_expr(P) : parse_or(P));
  }
  return t;
}

static void parse_call_args(parser *P, tm_node *call) {
  expect_op(P, "(");
  while (!is_op(cur(P), ")")) {
    if (call->n_kids && call->kids[call->n_kids - 1]->kind == TM_N_KWARG && call->kids[call->n_kids - 1]->op == 2)
      perr(P, cur(P), "%s", "invalid syntax for function call expression: **kwargs must come last");
    if (call->n_kids && !skip_op(P, ",")) perr(P, cur(P), "%s", "expected ',' or ')' in call arguments");
    if (is_op(cur(P), ")")) break;
    if (cur(P)->kind == TM_T_NAME && is_op(peek(P, 1), "=")) {
      tm_node *kw = mk(P, TM_N_KWARG, cur(P));
      kw->str = tok_str(P, cur(P));
      kw->str_n = cur(P)->n;
      next(P);
      next(P);
      kw->a = parse_expr(P);
      add_kid(P, call, kw);
    } else {
      if (is_op(cur(P), "*") || is_op(cur(P), "**")) { /* f(*list) and f(**dict) */
        tm_node *st = mk(P, TM_N_KWARG, cur(P));
        st->op = is_op(cur(P), "*") ? 1 : 2;
        next(P);
        st->a = parse_expr(P);
        add_kid(P, call, st);
        continue;
      }
      add_kid(P, call, parse_expr(P));
    }
  }
  next(P);
}

static tm_node *parse_primary(parser *P) {
  const tm_tok *t = cur(P);
  tm_node *n;
  switch (t->kind) {
  case TM_T_NAME:
    n = mk(P, TM_N_CONST, t);
    if (is_name(t, "true") || is_name(t, "True")) n->val = tmpl_bool(true);
    else if (is_name(t, "false") || is_name(t, "False")) n->val = tmpl_bool(false);
    else if (is_name(t, "none") || is_name(t, "None")) n->val = tmpl_none();
    else {
      n->kind = TM_N_NAME;
      n->str = tok_str(P, t);
      n->str_n = t->n;
    }
    next(P);
    return n;
  case TM_T_STRING: {
    n = mk(P, TM_N_CONST, t);
    sb b;
    sb_init(&b, P->h);
    while (cur(P)->kind == TM_T_STRING) { /* adjacent literals concatenate */
      sb_add(&b, cur(P)->s, cur(P)->n);
      next(P);
    }
    n->val = tv_sb(&b);
    return n;
  }
  case TM_T_INT:
    n = mk(P, TM_N_CONST, t);
    n->val = tmpl_int(t->i);
    next(P);
    return n;
  case TM_T_FLOAT:
    n = mk(P, TM_N_CONST, t);
    n->val = tmpl_float(t->f);
    next(P);
    return n;
  default: break;
  }
  if (is_op(t, "(")) {
    next(P);
    if (skip_op(P, ")")) {
      n = mk(P, TM_N_TUPLE, t);
      return n;
    }
    enter(P);
    tm_node *e = parse_tuple(P, false, true);
    P->nest--;
    expect_op(P, ")");
    return e;
  }
  if (is_op(t, "[")) {
    next(P);
    enter(P);
    n = mk(P, TM_N_LIST, t);
    while (!is_op(cur(P), "]")) {
      if (n->n_kids) expect_op(P, ",");
      if (is_op(cur(P), "]")) break;
      add_kid(P, n, parse_expr(P));
    }
    next(P);
    P->nest--;
    return n;
  }
  if (is_op(t, "{")) {
    next(P);
    enter(P);
    n = mk(P, TM_N_DICT, t);
    while (!is_op(cur(P), "}")) {
      if (n->n_kids) expect_op(P, ",");
      if (is_op(cur(P), "}")) break;
      add_kid(P, n, parse_expr(P));
      expect_op(P, ":");
      add_kid(P, n, parse_expr(P));
    }
    next(P);
    P->nest--;
    return n;
  }
  perr(P, t, "unexpected %s in expression", t->kind == TM_T_OP ? "operator" : tok_desc(t));
}

static tm_node *parse_subscript(parser *P, tm_node *obj, const tm_tok *at) {
  /* after '[' */
  tm_node *parts[3] = {NULL, NULL, NULL};
  int k = 0;
  bool is_slice = false;
  for (;;) {
    if (is_op(cur(P), ":")) {
      is_slice = true;
      if (k >= 2) perr(P, cur(P), "%s", "too many ':' in slice");
      k++;
      next(P);
      continue;
    }
    if (is_op(cur(P), "]")) break;
    if (parts[k]) perr(P, cur(P), "%s", "expected ']' or ':' in subscript");
    parts[k] = parse_expr(P);
    if (!is_slice && is_op(cur(P), ",")) perr(P, cur(P), "%s", "tuple subscripts are not supported");
  }
  next(P);
  tm_node *n = mk(P, is_slice ? TM_N_SLICE : TM_N_GETITEM, at);
  n->a = obj;
  if (is_slice) { n->b = parts[0]; n->c = parts[1]; n->d = parts[2]; }
  else {
    if (!parts[0]) perr(P, at, "%s", "empty subscript");
    n->b = parts[0];
  }
  return n;
}

static tm_node *parse_postfix(parser *P, tm_node *n) {
  for (;;) {
    const tm_tok *t = cur(P);
    if (is_op(t, ".")) {
      next(P);
      tm_node *g;
      if (cur(P)->kind == TM_T_NAME) {
        g = mk(P, TM_N_GETATTR, t);
        g->str = tok_str(P, cur(P));
        g->str_n = cur(P)->n;
      } else if (cur(P)->kind == TM_T_INT) {
        g = mk(P, TM_N_GETITEM, t);
        g->b = mk(P, TM_N_CONST, cur(P));
        g->b->val = tmpl_int(cur(P)->i);
      } else perr(P, cur(P), "%s", "expected an attribute name after '.'");
      next(P);
      g->a = n;
      n = g;
    } else if (is_op(t, "[")) {
      next(P);
      n = parse_subscript(P, n, t);
    } else if (is_op(t, "(")) {
      tm_node *c = mk(P, TM_N_CALL, t);
      c->line = n->line; /* errors of a call point at the callee */
      c->col = n->col;
      c->a = n;
      parse_call_args(P, c);
      n = c;
    } else return n;
  }
}

static void parse_filter_args(parser *P, tm_node *f) {
  if (is_op(cur(P), "(")) {
    tm_node tmp = {0};
    parse_call_args(P, &tmp);
    f->kids = tmp.kids;
    f->n_kids = tmp.n_kids;
  }
}

static tm_node *parse_filter(parser *P, tm_node *in, bool start_inline) {
  /* at '|' unless start_inline */
  while (start_inline || is_op(cur(P), "|")) {
    if (!start_inline) next(P);
    start_inline = false;
    const tm_tok *t = cur(P);
    if (t->kind != TM_T_NAME) perr(P, t, "%s", "expected a filter name after '|'");
    tm_node *f = mk(P, TM_N_FILTER, t);
    f->str = tok_str(P, t);
    f->str_n = t->n;
    /* an unknown filter is reported when reached, as jinja2 3 does for
     * filters in conditional code */
    next(P);
    parse_filter_args(P, f);
    f->a = in;
    in = f;
  }
  return in;
}

static tm_node *parse_test(parser *P, tm_node *in) {
  const tm_tok *at = cur(P);
  next(P); /* 'is' */
  bool neg = skip_name(P, "not");
  const tm_tok *t = cur(P);
  if (t->kind != TM_T_NAME) perr(P, t, "%s", "expected a test name after 'is'");
  tm_node *n = mk(P, TM_N_TEST, at);
  n->str = tok_str(P, t);
  n->str_n = t->n;
  if (is_name(t, "none") || is_name(t, "None")) n->str = "none";
  else if (is_name(t, "true") || is_name(t, "True")) n->str = "true";
  else if (is_name(t, "false") || is_name(t, "False")) n->str = "false";
  next(P);
  n->a = in;
  const tm_tok *c = cur(P);
  if (is_op(c, "(")) {
    parse_filter_args(P, n);
  } else if ((c->kind == TM_T_NAME || c->kind == TM_T_STRING || c->kind == TM_T_INT || c->kind == TM_T_FLOAT ||
              is_op(c, "[") || is_op(c, "{")) &&
             !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
    /* as jinja2: any other name right after a test is its argument
     * ("is divisibleby 3", "is sameas none"), so "x is defined if y" fails */
    tm_node *arg = parse_primary(P);
    arg = parse_postfix(P, arg);
    add_kid(P, n, arg);
  }
  if (neg) {
    tm_node *x = mk(P, TM_N_NOT, at);
    x->a = n;
    return x;
  }
  return n;
}

static tm_node *parse_filter_expr(parser *P, tm_node *n) {
  for (;;) {
    if (is_op(cur(P), "|")) n = parse_filter(P, n, false);
    else if (is_name(cur(P), "is")) n = parse_test(P, n);
    else if (is_op(cur(P), "(")) {
      tm_node *c = mk(P, TM_N_CALL, cur(P));
      c->line = n->line;
      c->col = n->col;
      c->a = n;
      parse_call_args(P, c);
      n = c;
    } else return n;
  }
}

static tm_node *parse_unary(parser *P, bool with_filter) {
  const tm_tok *t = cur(P);
  tm_node *n;
  enter(P);
  if (is_op(t, "-") || is_op(t, "+")) {
    next(P);
    n = mk(P, TM_N_UNARY, t);
    n->op = is_op(t, "-") ? TM_OP_NEG : TM_OP_POS;
    n->a = parse_unary(P, false);
  } else {
    n = parse_primary(P);
  }
  n = parse_postfix(P, n);
  if (with_filter) n = parse_filter_expr(P, n);
  P->nest--;
  return n;
}

static tm_node *binary(parser *P, const tm_tok *at, int op, tm_node *a, tm_node *b) {
  tm_node *n = mk(P, TM_N_BINARY, at);
  n->op = op;
  n->a = a;
  n->b = b;
  return n;
}

static tm_node *parse_pow(parser *P) {
  tm_node *n = parse_unary(P, true);
  while (is_op(cur(P), "**")) {
    const tm_tok *at = cur(P);
    next(P);
    n = binary(P, at, TM_OP_POW, n, parse_unary(P, true));
  }
  return n;
}

static tm_node *parse_math2(parser *P) {
  tm_node *n = parse_pow(P);
  for (;;) {
    const tm_tok *at = cur(P);
    int op = is_op(at, "*") ? TM_OP_MUL : is_op(at, "/") ? TM_OP_DIV : is_op(at, "//") ? TM_OP_FLOORDIV
             : is_op(at, "%") ? TM_OP_MOD : 0;
    if (!op) return n;
    next(P);
    n = binary(P, at, op, n, parse_pow(P));
  }
}

static tm_node *parse_concat(parser *P) {
  tm_node *n = parse_math2(P);
  while (is_op(cur(P), "~")) {
    const tm_tok *at = cur(P);
    next(P);
    n = binary(P, at, TM_OP_CONCAT, n, parse_math2(P));
  }
  return n;
}

static tm_node *parse_math1(parser *P) {
  tm_node *n = parse_concat(P);
  for (;;) {
    const tm_tok *at = cur(P);
    int op = is_op(at, "+") ? TM_OP_ADD : is_op(at, "-") ? TM_OP_SUB : 0;
    if (!op) return n;
    next(P);
    n = binary(P, at, op, n, parse_concat(P));
  }
}

static tm_node *parse_compare(parser *P) {
  tm_node *first = parse_math1(P);
  tm_node *cmp = NULL;
  for (;;) {
    const tm_tok *at = cur(P);
    int op = 0;
    if (is_op(at, "==")) op = TM_OP_EQ;
    else if (is_op(at, "!=")) op = TM_OP_NE;
    else if (is_op(at, "<")) op = TM_OP_LT;
    else if (is_op(at, "<=")) op = TM_OP_LE;
    else if (is_op(at, ">")) op = TM_OP_GT;
    else if (is_op(at, ">=")) op = TM_OP_GE;
    else if (is_name(at, "in")) op = TM_OP_IN;
    else if (is_name(at, "not") && is_name(peek(P, 1), "in")) { op = TM_OP_NOTIN; next(P); }
    if (!op) break;
    next(P);
    if (!cmp) {
      cmp = mk(P, TM_N_COMPARE, at);
      cmp->a = first;
    }
    tm_node *o = mk(P, TM_N_CMPOP, at);
    o->op = op;
    o->a = parse_math1(P);
    add_kid(P, cmp, o);
  }
  return cmp ? cmp : first;
}

static tm_node *parse_not(parser *P) {
  if (is_name(cur(P), "not")) {
    tm_node *n = mk(P, TM_N_NOT, cur(P));
    next(P);
    enter(P);
    n->a = parse_not(P);
    P->nest--;
    return n;
  }
  return parse_compare(P);
}

static tm_node *parse_and(parser *P) {
  tm_node *n = parse_not(P);
  while (is_name(cur(P), "and")) {
    tm_node *x = mk(P, TM_N_AND, cur(P));
    next(P);
    x->a = n;
    x->b = parse_not(P);
    n = x;
  }
  return n;
}

static tm_node *parse_or(parser *P) {
  tm_node *n = parse_and(P);
  while (is_name(cur(P), "or")) {
    tm_node *x = mk(P, TM_N_OR, cur(P));
    next(P);
    x->a = n;
    x->b = parse_and(P);
    n = x;
  }
  return n;
}

static tm_node *parse_expr(parser *P) {
  enter(P);
  tm_node *n = parse_or(P);
  while (is_name(cur(P), "if")) {
    tm_node *c = mk(P, TM_N_COND, cur(P));
    next(P);
    c->a = parse_or(P);
    c->b = n;
    if (skip_name(P, "else")) c->c = parse_expr(P);
    n = c;
  }
  P->nest--;
  return n;
}

/* ------------------------------------------------------------- statements */

static tm_node *parse_assign_target(parser *P, bool allow_attr) {
  const tm_tok *at = cur(P);
  bool paren = skip_op(P, "(");
  tm_node *first = NULL, *tuple = NULL;
  for (;;) {
    const tm_tok *t = cur(P);
    if (t->kind != TM_T_NAME) perr(P, t, "%s", "expected a variable name to assign to");
    tm_node *n = mk(P, TM_N_NAME, t);
    n->str = tok_str(P, t);
    n->str_n = t->n;
    next(P);
    if (allow_attr && is_op(cur(P), ".")) {
      next(P);
      if (cur(P)->kind != TM_T_NAME) perr(P, cur(P), "%s", "expected an attribute name after '.'");
      tm_node *g = mk(P, TM_N_GETATTR, cur(P));
      g->a = n;
      g->str = tok_str(P, cur(P));
      g->str_n = cur(P)->n;
      next(P);
      n = g;
    }
    if (!first) first = n;
    else {
      if (!tuple) {
        tuple = mk(P, TM_N_TUPLE, at);
        add_kid(P, tuple, first);
      }
      add_kid(P, tuple, n);
    }
    if (!skip_op(P, ",")) break;
    if (cur(P)->kind != TM_T_NAME) break;
  }
  if (paren) expect_op(P, ")");
  return tuple ? tuple : first;
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};
static const char *const END_FOR2[] = {"endfor", NULL};
static const char *const END_SET[] = {"endset", NULL};
static const char *const END_MACRO[] = {"endmacro", NULL};
static const char *const END_CALL[] = {"endcall", NULL};
static const char *const END_FILTER[] = {"endfilter", NULL};
static const char *const END_GEN[] = {"endgeneration", NULL};
static const char *const END_WITH[] = {"endwith", NULL};

/* at the end NAME after BLOCK_BEGIN: consume it and the block end */
static void end_tag(parser *P, const char *name) {
  (void)name;
  next(P);
  expect_block_end(P);
}

static tm_node *parse_params(parser *P, tm_node *owner) {
  /* (a, b=default, ...) */
  expect_op(P, "(");
  while (!is_op(cur(P), ")")) {
    if (owner->n_kids) expect_op(P, ",");
    if (is_op(cur(P), ")")) break;
    const tm_tok *t = cur(P);
    if (t->kind != TM_T_NAME) perr(P, t, "%s", "expected a parameter name");
    tm_node *p = mk(P, TM_N_NAME, t);
    p->str = tok_str(P, t);
    p->str_n = t->n;
    next(P);
    if (skip_op(P, "=")) p->a = parse_expr(P);
    add_kid(P, owner, p);
  }
  next(P);
  return owner;
}

static tm_node *parse_stmt(parser *P) {
  const tm_tok *at = cur(P); /* the keyword */
  if (at->kind != TM_T_NAME) perr(P, at, "%s", "expected a statement name after '{%'");
  enter(P);
  tm_node *n = NULL;
  const char *which;
  if (is_name(at, "if")) {
    next(P);
    /* parse_if handles elif chains; else bodies end at endif */
    n = mk(P, TM_N_IF, at);
    n->a = parse_tuple(P, false, true);
    expect_block_end(P);
    tm_node *last = n;
    last->b = parse_body(P, END_IF, &which, at);
    for (;;) {
      if (strcmp(which, "elif") == 0) {
        const tm_tok *e = cur(P);
        next(P);
        tm_node *x = mk(P, TM_N_IF, e);
        x->a = parse_tuple(P, false, true);
        expect_block_end(P);
        x->b = parse_body(P, END_IF, &which, at);
        last->c = x;
        last = x;
        continue;
      }
      if (strcmp(which, "else") == 0) {
        next(P);
        expect_block_end(P);
        static const char *const END_ENDIF[] = {"endif", NULL};
        last->c = parse_body(P, END_ENDIF, &which, at);
        continue;
      }
      break; /* endif */
    }
    end_tag(P, "endif");
  } else if (is_name(at, "for")) {
    next(P);
    n = mk(P, TM_N_FOR, at);
    n->a = parse_assign_target(P, false);
    if (!skip_name(P, "in")) perr(P, cur(P), "%s", "expected 'in' in for loop");
    n->b = parse_tuple(P, false, false);
    if (skip_name(P, "if")) n->e = parse_expr(P);
    if (skip_name(P, "recursive")) n->op = 1;
    expect_block_end(P);
    n->c = parse_body(P, END_FOR, &which, at);
    if (strcmp(which, "else") == 0) {
      next(P);
      expect_block_end(P);
      n->d = parse_body(P, END_FOR2, &which, at);
    }
    end_tag(P, "endfor");
  } else if (is_name(at, "set")) {
    next(P);
    n = mk(P, TM_N_SET, at);
    n->a = parse_assign_target(P, true);
    if (skip_op(P, "=")) {
      n->b = parse_tuple(P, false, true);
      expect_block_end(P);
    } else {
      if (n->a->kind != TM_N_NAME && n->a->kind != TM_N_GETATTR) perr(P, at, "%s", "block set needs one target");
      if (is_op(cur(P), "|")) n->d = parse_filter(P, NULL, false);
      expect_block_end(P);
      n->c = parse_body(P, END_SET, &which, at);
      end_tag(P, "endset");
    }
  } else if (is_name(at, "macro")) {
    next(P);
    n = mk(P, TM_N_MACRO, at);
    if (cur(P)->kind != TM_T_NAME) perr(P, cur(P), "%s", "expected a macro name");
    n->str = tok_str(P, cur(P));
    n->str_n = cur(P)->n;
    next(P);
    parse_params(P, n);
    expect_block_end(P);
    n->c = parse_body(P, END_MACRO, &which, at);
    end_tag(P, "endmacro");
  } else if (is_name(at, "call")) {
    next(P);
    n = mk(P, TM_N_CALLBLOCK, at);
    if (is_op(cur(P), "(")) parse_params(P, n);
    n->a = parse_expr(P);
    if (n->a->kind != TM_N_CALL) perr(P, at, "%s", "expected a call after 'call'");
    expect_block_end(P);
    n->c = parse_body(P, END_CALL, &which, at);
    end_tag(P, "endcall");
  } else if (is_name(at, "filter")) {
    next(P);
    n = mk(P, TM_N_FILTERBLOCK, at);
    n->a = parse_filter(P, mk(P, TM_N_CAPTURED, at), true);
    expect_block_end(P);
    n->c = parse_body(P, END_FILTER, &which, at);
    end_tag(P, "endfilter");
  } else if (is_name(at, "with")) {
    next(P);
    n = mk(P, TM_N_WITH, at);
    while (cur(P)->kind != TM_T_BLOCK_END) {
      if (n->n_kids) expect_op(P, ",");
      const tm_tok *t = cur(P);
      if (t->kind != TM_T_NAME) perr(P, t, "%s", "expected a variable name in with");
      tm_node *kw = mk(P, TM_N_KWARG, t);
      kw->str = tok_str(P, t);
      kw->str_n = t->n;
      next(P);
      expect_op(P, "=");
      kw->a = parse_expr(P);
      add_kid(P, n, kw);
    }
    expect_block_end(P);
    n->c = parse_body(P, END_WITH, &which, at);
    end_tag(P, "endwith");
  } else if (is_name(at, "generation")) {
    next(P);
    expect_block_end(P);
    n = parse_body(P, END_GEN, &which, at);
    end_tag(P, "endgeneration");
  } else if (is_name(at, "break") || is_name(at, "continue")) {
    n = mk(P, is_name(at, "break") ? TM_N_BREAK : TM_N_CONTINUE, at);
    next(P);
    expect_block_end(P);
  } else {
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(at->n < 60 ? at->n : 60), at->s);
    perr(P, at, "unknown tag '%s'", name);
  }
  P->nest--;
  return n;
}

/* Parses statements until EOF (ends == NULL) or a block whose name is in
 * ends; then *which is that name and the cursor is on the name token. */
static tm_node *parse_body(parser *P, const char *const *ends, const char **which, const tm_tok *opener) {
  tm_node *body = mk(P, TM_N_BODY, cur(P));
  const tm_tok *open = opener ? opener : cur(P);
  for (;;) {
    const tm_tok *t = cur(P);
    if (t->kind == TM_T_EOF) {
      if (ends) {
        char msg[160];
        snprintf(msg, sizeof msg, "unexpected end of template: expected '%s' to close the block opened here",
                 ends[0][0] == 'e' && strncmp(ends[0], "end", 3) == 0 ? ends[0] : ends[1] ? ends[1] : ends[0]);
        for (size_t k = 0; ends[k]; k++)
          if (strncmp(ends[k], "end", 3) == 0) {
            snprintf(msg, sizeof msg, "unexpected end of template: missing '{%% %s %%}' for the block opened here", ends[k]);
            break;
          }
        tm_compile_error(P->h, open->line, open->col, "%s", msg);
      }
      *which = NULL;
      return body;
    }
    if (t->kind == TM_T_TEXT) {
      tm_node *n = mk(P, TM_N_TEXT, t);
      n->str = t->s;
      n->str_n = t->n;
      add_kid(P, body, n);
      next(P);
    } else if (t->kind == TM_T_VAR_BEGIN) {
      next(P);
      tm_node *n = mk(P, TM_N_OUTPUT, t);
      n->a = parse_tuple(P, false, true);
      if (cur(P)->kind != TM_T_VAR_END) perr(P, cur(P), "expected end of print '}}', got %s", tok_desc(cur(P)));
      next(P);
      add_kid(P, body, n);
    } else if (t->kind == TM_T_BLOCK_BEGIN) {
      next(P);
      const tm_tok *nm = cur(P);
      if (ends && nm->kind == TM_T_NAME)
        for (size_t k = 0; ends[k]; k++)
          if (is_name(nm, ends[k])) {
            *which = ends[k];
            return body;
          }
      if (nm->kind == TM_T_NAME && nm->n > 3 && memcmp(nm->s, "end", 3) == 0) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(nm->n < 60 ? nm->n : 60), nm->s);
        perr(P, nm, "unexpected '%s'", name);
      }
      if (nm->kind == TM_T_NAME && (is_name(nm, "elif") || is_name(nm, "else")))
        perr(P, nm, "unexpected '%s' outside an if or for block", is_name(nm, "elif") ? "elif" : "else");
      add_kid(P, body, parse_stmt(P));
    } else {
      perr(P, t, "%s", "unexpected token");
    }
  }
}

/* -------------------------------------------------------------- compile */

int tmpl_compile(const char *src, size_t len, tmpl **out) {
  *out = NULL;
  if (!src && len) return err_set(ERR_INVALID, "template: NULL source");
  tmpl_heap *h = tmpl_heap_new();
  if (!h) return err_set(ERR_NOMEM, "template: out of memory");
  jmp_buf jb;
  h->on_fail = &jb;
  h->limit = (size_t)64 << 20;
  if (setjmp(jb)) {
    int code = h->fail_code;
    tmpl_heap_free(h);
    return code;
  }
  tm_toks toks = {0};
  tm_lex(h, src ? src : "", len, &toks);
  parser P = {.h = h, .t = toks.t, .n = toks.n};
  tm_node *root = parse_body(&P, NULL, &(const char *){NULL}, NULL);
  tmpl *t = hp_alloc(h, sizeof *t);
  t->heap = h;
  t->root = root;
  h->on_fail = NULL;
  *out = t;
  return 0;
}

void tmpl_free(tmpl *t) {
  if (t) tmpl_heap_free(t->heap);
}
