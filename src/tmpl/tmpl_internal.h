/*
 * tmpl_internal.h - shared declarations of the template interpreter's parts:
 * heap and objects (tmpl_value.c), lexer (tmpl_lex.c), AST and parser
 * (tmpl_parse.c), evaluator (tmpl_eval.c), filters and tests
 * (tmpl_filters.c), methods and globals (tmpl_methods.c), tojson
 * (tmpl_dump.c).
 *
 * Failure inside a compile or a render does not return codes up the C stack:
 * it records the detail with err_set() and longjmps to the tmpl_compile or
 * tmpl_render entry point (heap->on_fail). That is safe because every byte a
 * compile or render allocates belongs to a heap that the entry point frees.
 */
#ifndef PARLEY_TMPL_INTERNAL_H
#define PARLEY_TMPL_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tmpl/tmpl.h"

/* ---- heap ---- */
/* A block header; the payload follows it at (hp_block *)b + 1. The aligned
 * member makes sizeof(hp_block) a multiple of max_align_t's alignment, so the
 * payload is aligned for any type. */
typedef struct hp_block {
  struct hp_block *prev, *next;
  _Alignas(max_align_t) size_t size;
} hp_block;

struct tmpl_heap {
  hp_block head;    /* sentinel of the doubly linked block list */
  size_t bytes;     /* bytes live, counting per-block overhead */
  size_t limit;     /* 0 = none */
  jmp_buf *on_fail; /* when set, allocation failure longjmps here */
  int fail_code;
};

void *hp_alloc(tmpl_heap *h, size_t n);             /* zeroed */
void *hp_realloc(tmpl_heap *h, void *p, size_t n);  /* p may be NULL */
void hp_release(tmpl_heap *h, void *p);
/* Records the error and longjmps to h->on_fail (never returns). */
_Noreturn void hp_fail(tmpl_heap *h, int code);

/* ---- objects ---- */
struct tmpl_str {
  size_t len;
  bool ascii; /* every byte < 0x80: code point index == byte index */
  bool safe;  /* a Markup string (|safe, |escape): '+' HTML-escapes the other operand */
  char data[];
};

struct tmpl_list {
  size_t n, cap;
  bool tuple;
  tmpl_value *items;
};

typedef struct tmpl_dict_entry {
  tmpl_value key, val;
  uint64_t hash;
} tmpl_dict_entry;

struct tmpl_dict {
  size_t n, cap;
  tmpl_dict_entry *e;
  uint32_t *index; /* open addressing, entry+1 (0 = empty); NULL while small */
  size_t index_cap;
  bool is_namespace;
};

typedef enum tm_func_kind {
  TM_FUNC_MACRO,
  TM_FUNC_NATIVE, /* tmpl_native_fn from a caller */
  TM_FUNC_BUILTIN, /* a global like range(), implemented in tmpl_methods.c */
  TM_FUNC_METHOD,  /* bound method: self + name */
  TM_FUNC_LOOP_CYCLE,
  TM_FUNC_LOOP,      /* the loop variable of a recursive for: self = its attributes, macro = the FOR node,
                        closure = the scope the loop runs in, builtin_id = depth0 */
  TM_FUNC_JOINER,    /* joiner(sep): self = [sep, used] */
  TM_FUNC_LOOP_CHANGED, /* self: a 1-item list holding the last value seen (empty at first) */
} tm_func_kind;

struct tm_node;
struct tm_scope;

typedef struct tmpl_func {
  tm_func_kind kind;
  const char *name;
  tmpl_value self; /* method receiver / loop index for cycle */
  tmpl_native_fn native;
  void *user;
  int builtin_id;
  const struct tm_node *macro; /* TM_N_MACRO node */
  struct tm_scope *closure;
  const struct tm_node *caller_body; /* for the caller() of a call block */
} tmpl_func;

/* string builder on a heap */
typedef struct sb {
  tmpl_heap *h;
  char *data;
  size_t len, cap;
  size_t limit; /* 0 = none */
} sb;
void sb_init(sb *b, tmpl_heap *h);
void sb_add(sb *b, const char *s, size_t n);
void sb_adds(sb *b, const char *s);
void sb_addc(sb *b, char c);
void sb_addf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* constructors that longjmp on failure (for use inside compile/render) */
tmpl_value tv_str(tmpl_heap *h, const char *s, size_t n);
tmpl_value tv_strz(tmpl_heap *h, const char *s);
tmpl_value tv_sb(sb *b); /* string from builder contents */
tmpl_value tv_list(tmpl_heap *h, size_t cap);
void tv_list_push(tmpl_heap *h, tmpl_value l, tmpl_value v);
tmpl_value tv_dict(tmpl_heap *h);
void tv_dict_set(tmpl_heap *h, tmpl_value d, tmpl_value k, tmpl_value v);
bool tv_dict_get(tmpl_value d, tmpl_value k, tmpl_value *out);
bool tv_dict_get_s(tmpl_value d, const char *k, size_t n, tmpl_value *out);
bool tv_dict_del(tmpl_value d, tmpl_value k, tmpl_value *out);
tmpl_value tv_func(tmpl_heap *h, tm_func_kind kind, const char *name);

/* Python semantics */
bool tv_truthy(tmpl_value v);
bool tv_equal(tmpl_value a, tmpl_value b);
/* -2 when not comparable, else -1/0/1 */
int tv_compare(tmpl_value a, tmpl_value b);
uint64_t tv_hash(tmpl_value v);
void tv_to_str(sb *b, tmpl_value v);  /* str() */
void tv_repr(sb *b, tmpl_value v);    /* repr() */
void tv_repr_float(sb *b, double f);
const char *tv_type_name(tmpl_value v);
bool tv_is_number(tmpl_value v); /* int, float or bool */
double tv_num(tmpl_value v);
/* UTF-8 helpers */
size_t utf8_count(const char *s, size_t n);
/* byte offset of code point index cp (cp <= count) */
size_t utf8_offset(const char *s, size_t n, size_t cp);
/* decodes one code point at s (n bytes left); returns its length (>=1) */
size_t utf8_decode(const char *s, size_t n, uint32_t *cp);
size_t utf8_encode(uint32_t cp, char *out);
bool py_isspace(uint32_t cp);
size_t tv_len_cp(tmpl_value s); /* code points of a string */

/* ---- lexer ---- */
typedef enum tm_tok_kind {
  TM_T_EOF,
  TM_T_TEXT,
  TM_T_VAR_BEGIN,
  TM_T_VAR_END,
  TM_T_BLOCK_BEGIN,
  TM_T_BLOCK_END,
  TM_T_NAME,
  TM_T_STRING,
  TM_T_INT,
  TM_T_FLOAT,
  TM_T_OP,
} tm_tok_kind;

typedef struct tm_tok {
  tm_tok_kind kind;
  int line, col;
  const char *s; /* TEXT/NAME/STRING (decoded)/OP text; heap or source */
  size_t n;
  int64_t i;
  double f;
} tm_tok;

typedef struct tm_toks {
  tm_tok *t;
  size_t n, cap;
} tm_toks;

/* Tokenizes a whole template into toks (allocated in h). */
void tm_lex(tmpl_heap *h, const char *src, size_t len, tm_toks *toks);
/* errors during compile: "template:L:C: msg" then longjmp */
_Noreturn void tm_compile_error(tmpl_heap *h, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- AST ---- */
typedef enum tm_node_kind {
  /* statements */
  TM_N_BODY,     /* kids: statements */
  TM_N_TEXT,     /* str */
  TM_N_OUTPUT,   /* a: expression */
  TM_N_IF,       /* a: cond, b: body, c: else (IF or BODY) or NULL */
  TM_N_FOR,      /* a: target, b: iter, c: body, d: else body, e: filter, op: 1 if recursive */
  TM_N_SET,      /* a: target, b: value (or NULL: block set with c: body, kids: filters) */
  TM_N_MACRO,    /* str: name, kids: params (NAME with optional a default), c: body */
  TM_N_CALLBLOCK,/* a: call expr, kids: caller params, c: body */
  TM_N_FILTERBLOCK, /* a: filter chain applied to TM_N_CAPTURED, c: body */
  TM_N_WITH,     /* kids: KWARG targets (values evaluated outside), c: body */
  TM_N_BREAK,
  TM_N_CONTINUE,
  /* expressions */
  TM_N_CONST,    /* val */
  TM_N_NAME,     /* str */
  TM_N_LIST,     /* kids */
  TM_N_TUPLE,    /* kids */
  TM_N_DICT,     /* kids: pairs key,value,... */
  TM_N_GETATTR,  /* a: obj, str: name */
  TM_N_GETITEM,  /* a: obj, b: key */
  TM_N_SLICE,    /* a: obj, b,c,d: start, stop, step (NULL allowed) */
  TM_N_CALL,     /* a: callee, kids: args (KWARG nodes for keywords) */
  TM_N_KWARG,    /* str: name, a: value; op 1: *a, op 2: **a (str NULL) */
  TM_N_FILTER,   /* a: input (NULL in filter blocks), str: name, kids: args */
  TM_N_TEST,     /* a: input, str: name, kids: args, op: 1 when negated */
  TM_N_UNARY,    /* op, a */
  TM_N_BINARY,   /* op, a, b */
  TM_N_AND,
  TM_N_OR,
  TM_N_NOT,
  TM_N_COMPARE,  /* a: first, kids: CMPOP nodes (op, a: operand) */
  TM_N_CMPOP,
  TM_N_COND,     /* a: cond, b: then, c: else (NULL -> undefined) */
  TM_N_CAPTURED, /* placeholder for the body text in a filter block */
} tm_node_kind;

typedef enum tm_op {
  TM_OP_ADD = 1, TM_OP_SUB, TM_OP_MUL, TM_OP_DIV, TM_OP_FLOORDIV, TM_OP_MOD, TM_OP_POW,
  TM_OP_CONCAT, TM_OP_NEG, TM_OP_POS,
  TM_OP_EQ, TM_OP_NE, TM_OP_LT, TM_OP_LE, TM_OP_GT, TM_OP_GE, TM_OP_IN, TM_OP_NOTIN,
} tm_op;

typedef struct tm_node {
  tm_node_kind kind;
  int line, col;
  int op;
  const char *str;
  size_t str_n;
  tmpl_value val;
  struct tm_node *a, *b, *c, *d, *e;
  struct tm_node **kids;
  size_t n_kids;
} tm_node;

struct tmpl {
  tmpl_heap *heap;
  tm_node *root;
};

tm_node *tm_parse(tmpl_heap *h, const tm_toks *toks);

/* ---- evaluator ---- */
typedef struct tm_scope {
  struct tm_scope *parent;
  tmpl_value vars; /* dict */
} tm_scope;

typedef struct tm_ctx {
  tmpl_heap *h;
  tm_scope *globals;
  const tm_node *at; /* node being evaluated, for error positions */
  sb *out;
  int depth;      /* macro calls */
  int eval_depth; /* eval/exec frames */
  uint64_t iterations;
  tmpl_value captured; /* body text of the enclosing filter block / block set */
} tm_ctx;

_Noreturn void tm_error(tm_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
tmpl_value tm_call(tm_ctx *c, tmpl_value fn, const tmpl_value *args, size_t n, tmpl_value kwargs);
tmpl_value tm_getattr(tm_ctx *c, tmpl_value obj, const char *name, size_t n);
tmpl_value tm_getitem(tm_ctx *c, tmpl_value obj, tmpl_value key);
/* list(v) as Python iterates it: strings by code point, dicts by key */
tmpl_value tm_iterate(tm_ctx *c, tmpl_value v);

/* filters/tests: return false when the name is unknown */
bool tm_filter_apply(tm_ctx *c, const char *name, tmpl_value in, const tmpl_value *args, size_t n,
                     tmpl_value kwargs, tmpl_value *out);
bool tm_filter_exists(const char *name);
bool tm_test_apply(tm_ctx *c, const char *name, tmpl_value in, const tmpl_value *args, size_t n,
                   bool *out);
bool tm_test_exists(const char *name);
/* kwargs lookup helper: positional index or keyword name */
tmpl_value tm_arg(const tmpl_value *args, size_t n, tmpl_value kwargs, size_t pos, const char *name);

/* methods and builtin globals (tmpl_methods.c) */
bool tm_method_exists(tmpl_value self, const char *name, size_t n);
tmpl_value tm_method_call(tm_ctx *c, tmpl_value self, const char *name, const tmpl_value *args,
                          size_t n, tmpl_value kwargs);
void tm_builtins_install(tm_ctx *c, tmpl_value dict);
tmpl_value tm_builtin_call(tm_ctx *c, int id, const tmpl_value *args, size_t n, tmpl_value kwargs);
/* Python str helpers shared by filters and methods */
tmpl_value tm_str_strip(tm_ctx *c, tmpl_value s, tmpl_value chars, bool left, bool right);
tmpl_value tm_str_lower(tm_ctx *c, tmpl_value s);
tmpl_value tm_str_upper(tm_ctx *c, tmpl_value s);
tmpl_value tm_str_replace(tm_ctx *c, tmpl_value s, tmpl_value old, tmpl_value new_, int64_t count);
tmpl_value tm_str_capitalize(tm_ctx *c, tmpl_value s);
tmpl_value tm_to_string(tm_ctx *c, tmpl_value v);
/* HTML-escapes s as markupsafe.escape does (& < > " ') */
tmpl_value tm_html_escape(tm_ctx *c, tmpl_value s);
/* a binary operator (TM_OP_ADD ...) with Python semantics */
tmpl_value tm_binop(tm_ctx *c, int op, tmpl_value a, tmpl_value b);
/* Python's printf-style "fmt" % args */
tmpl_value tm_str_mod(tm_ctx *c, tmpl_value fmt, tmpl_value args);
tmpl_value tm_splitlines(tm_ctx *c, tmpl_value s, bool keepends);

/* tojson (tmpl_dump.c): json.dumps(v, ensure_ascii, indent, separators, sort_keys) */
void tm_dump_json(tm_ctx *c, sb *out, tmpl_value v, bool ensure_ascii, tmpl_value indent,
                  tmpl_value separators, bool sort_keys);

#endif
