/*
 * parse_int.h - internals shared by the output parsers (parse_*.c): a
 * push-style JSON syntax checker that sees one byte at a time, and the
 * parser's state, shared by the core (parse_out.c) and the tool-call
 * formats (parse_calls.c, parse_xml.c).
 *
 * jscan validates one JSON value (RFC 8259 syntax, depth at most
 * JSCAN_MAX_DEPTH) and reports, per byte, where values and object keys start
 * and end, so a caller can cut the raw text of one member out of a document
 * that arrives in pieces without ever buffering it.
 */
#ifndef PARLEY_TMPL_PARSE_INT_H
#define PARLEY_TMPL_PARSE_INT_H

#include <stdbool.h>
#include <stddef.h>

#define JSCAN_MAX_DEPTH 64

typedef struct jscan {
  int state;      /* J_* in parse_json.c */
  int num;        /* number sub-state */
  int depth;      /* open containers */
  char stack[JSCAN_MAX_DEPTH]; /* '{' or '[' per open container */
  bool key;       /* the string being read is an object key */
  const char *lit; /* "true"/"false"/"null" being matched */
  int lit_i;
  int u_left;     /* hex digits left in a \uXXXX escape */
  size_t off;     /* bytes consumed so far (for messages) */
  const char *why; /* reason of the error, static string */
} jscan;

/* Flags returned by jscan_byte for the byte it was given. */
enum {
  JF_ERR = 1 << 0,     /* not valid JSON here */
  JF_TOODEEP = 1 << 1, /* with JF_ERR: nesting deeper than JSCAN_MAX_DEPTH */
  JF_VSTART = 1 << 2,  /* this byte starts a value at depth *vdepth */
  JF_VEND = 1 << 3,    /* this byte ends a value at depth *vdepth (inclusive) */
  JF_NUMEND = 1 << 4,  /* a number at depth *ndepth ended just before this byte */
  JF_KSTART = 1 << 5,  /* opening quote of an object key at depth *vdepth */
  JF_KEND = 1 << 6,    /* closing quote of an object key at depth *vdepth */
  JF_STRBODY = 1 << 7, /* a byte inside a string or key (not its quotes) */
  JF_DONE = 1 << 8     /* the top-level value is complete with this byte */
};

void jscan_init(jscan *s);
/* Depth counts the containers around a value: the top-level value is at 0,
 * a member of the top-level object at 1. A top-level number ends at the
 * first byte that cannot continue it: that byte gets JF_NUMEND | JF_DONE and
 * is not consumed (the caller decides what it is). After JF_DONE only
 * whitespace is accepted. */
unsigned jscan_byte(jscan *s, unsigned char c, int *vdepth, int *ndepth);
/* True when the bytes so far form one complete value (a top-level number
 * counts once it has a valid last digit). */
bool jscan_complete(const jscan *s);
/* Short reason for the JF_ERR ("expected an object key"), static storage. */
const char *jscan_expected(const jscan *s);

/* Decodes the body of a JSON string (escapes included, quotes excluded) into
 * out (UTF-8, NUL-terminated); false when it does not fit in cap or is not a
 * valid escape sequence. */
bool json_unescape(const char *s, size_t n, char *out, size_t cap);

/* ---------- the parser's state (parse_out.c: core, parse_calls.c: tool calls) ---------- */

#include "base/buf.h"
#include "tmpl/outparse.h"

#define WS_MAX 64              /* leading whitespace looked through for a reasoning tag / Llama 3 JSON */
#define PROBE_MAX 256          /* bytes of a Llama 3 JSON object read before deciding it is a call */
#define NAME_MAX_ 256          /* tool name bytes */
#define HEAD_MAX 512           /* tool-call header bytes (names, harmony headers) */
#define PENDING_MAX (1u << 20) /* arguments buffered before the name is known */
#define KEY_MAX 16             /* bytes of a call-object key kept (longer keys are "other") */

enum op_state {
  S_START,        /* output start: whitespace, then maybe think_open */
  S_REASON_OPEN,  /* template opened the block: swallow an optional repeated think_open */
  S_REASON_WS,    /* skip whitespace after think_open */
  S_REASON,       /* reasoning until think_close */
  S_AFTER_THINK,  /* skip whitespace after think_close */
  S_ANSWER_START, /* format-specific start of the answer */
  S_TEXT,         /* answer text, scanning the format's markers */
  S_SKIP_WS,      /* skip whitespace, then S_TEXT */
  S_CALLOBJ,      /* {"name":..,"arguments"|"parameters":..} */
  S_ARGS_OBJ,     /* the arguments object itself (name known) */
  S_CODE,         /* raw code streamed as {"code":"..."} */
  S_EXPECT,       /* optional whitespace and closing marker p->expect */
  S_ARR_START,    /* '[' (or a single '{') after a list-of-calls marker */
  S_ARR_ITEM,
  S_ARR_SEP,
  S_L3_PROBE,     /* Llama 3: is this '{' a tool call? */
  S_L3_AFTER,     /* Llama 3: after a call: another '{' or text */
  S_PY_START,     /* after <|python_tag|> */
  S_BI_KEY,       /* Llama 3 built-in call: argument name or ')' */
  S_BI_VAL,       /* Llama 3 built-in call: argument value */
  S_BI_SEP,       /* Llama 3 built-in call: ',' or ')' */
  S_PL_START,     /* LFM2: '[' after <|tool_call_start|> */
  S_PL_NAME,      /* LFM2: a call's name and '(' (or a JSON call object), or ']' */
  S_PL_SEP,       /* LFM2: ',' or ']' after a call */
  S_MI_START,     /* after [TOOL_CALLS] */
  S_MI_NAME,      /* name until [ARGS] or [CALL_ID] */
  S_MI_CALLID,    /* id until [ARGS] (discarded) */
  S_DS_CALLS,     /* DeepSeek: between calls */
  S_DS_HEAD,      /* DeepSeek: until <｜tool▁sep｜> */
  S_DS_AFTER_SEP, /* DeepSeek: V3.1 '{' or R1 name */
  S_DS_NAME,      /* DeepSeek R1: name until newline */
  S_DS_FENCE,     /* DeepSeek R1: ```json */
  S_DS_CLOSE,     /* DeepSeek: ``` and <｜tool▁call▁end｜> */
  S_QX_START,     /* Qwen3-Coder: after <tool_call> */
  S_QX_FNAME,     /* Qwen3-Coder: <function=NAME> */
  S_QX_PARAMS,    /* Qwen3-Coder: <parameter= or </function> */
  S_QX_PNAME,     /* Qwen3-Coder: <parameter=NAME> */
  S_QX_PVAL,      /* Qwen3-Coder: value until </parameter> */
  S_JL_ITEM,      /* MiniMax-M1: a call object per line, or </tool_calls> */
  S_GL_NAME,      /* GLM: name after <tool_call> */
  S_GL_KEY,       /* GLM: <arg_key>KEY</arg_key> */
  S_GL_VALOPEN,   /* GLM: <arg_value> */
  S_GL_VAL,       /* GLM: value until </arg_value> */
  S_GL_NEXT,      /* GLM: <arg_key> or </tool_call> */
  S_H_TEXT,       /* harmony: message content (or text outside messages) */
  S_H_HEAD,       /* harmony: header until <|message|> */
  S_H_AFTER_CALL, /* harmony: <|call|> after the arguments */
  S_FN_NAME,      /* functionary 3.1: name until '>' */
  S_FV_RECIP,     /* functionary 3.2: recipient until newline */
  S_FV_TEXT,      /* functionary 3.2: text until >>> */
  S_FV_AFTER      /* functionary 3.2: after arguments */
};

/* What a marker found in answer text does. */
enum op_action { A_HERMES, A_PYTAG, A_MISTRAL, A_DS_CALLS, A_DS_CALL, A_LIST, A_DROP, A_FUNC, A_QXML, A_GLM, A_JSONL, A_PYLIST };

struct outparse {
  outparse_config cfg;
  char *think_open, *think_close; /* owned copies, or NULL */
  outparse_emit_fn emit;
  void *ctx;

  buf in;     /* held input; in.data[pos..len) not consumed yet */
  size_t pos;
  bool eof;
  int err;    /* sticky error code */
  enum op_state state;

  const char *mk_text[8]; /* active answer-text markers */
  enum op_action mk_action[8];
  size_t n_mk;

  /* the open tool call */
  int n_calls;
  bool call_active, call_begun, call_has_args;
  int call_index;
  char call_id[40];
  char call_name[NAME_MAX_ + 1];
  buf pending;  /* arguments seen before the name */
  jscan js;
  enum op_state after;  /* state once the call's JSON is complete */
  bool code_ok;      /* S_ARGS_OBJ: non-JSON content is code */
  bool args_str;     /* S_ARGS_OBJ: the arguments are a JSON string being read into tmp */
  const char *code_term; /* S_CODE: marker that ends the code, or NULL (end of output) */
  enum op_state code_next;

  /* call-object key tracking (S_CALLOBJ) */
  int co_key;   /* K_* of the depth-1 member being read */
  int co_mode;  /* 0, M_NAME (name string body), M_ARGS (raw), M_ARGSTR (string to decode) */
  bool co_inkey;
  char co_keybuf[KEY_MAX + 1];
  size_t co_keylen;
  buf co_name;  /* raw (escaped) name bytes */

  buf tmp;      /* headers and names being read */
  const char *expect;
  enum op_state expect_next;
  enum outparse_event_kind h_kind; /* harmony: kind of the current content */
  int bi_n_args;       /* Python-syntax call: arguments emitted */
  char bi_quote;       /* Python-syntax call: the quote of the string being read, or 0 */
  bool bi_esc;         /* ... after that string's backslash */
  bool reason_ws_long; /* the reasoning whitespace run at the input's start was already emitted */
};

enum { K_OTHER, K_NAME, K_ARGS };
enum { M_NONE, M_NAME, M_ARGS, M_ARGSTR };
enum { MATCH_NONE, MATCH_PARTIAL, MATCH_FULL };


/* parse_out.c: hold-back primitives and event output */
bool op_is_ws(char c);
size_t op_ws_len(const char *s, size_t n);
/* Does s[0..n) start with lit (MATCH_FULL), could it with more input
 * (MATCH_PARTIAL, also for n == 0), or not? At eof PARTIAL becomes NONE. */
int op_match_at(const outparse *p, const char *s, size_t n, const char *lit);
/* Index of the first byte where one of mk starts (*which = its index) or
 * where the rest of s is a proper prefix of one (*which = -1; never at eof);
 * n when neither. */
size_t op_scan_markers(const outparse *p, const char *s, size_t n, const char *const *mk,
                       size_t n_mk, int *which);
void op_consume(outparse *p, size_t n);
void op_emit_text(outparse *p, enum outparse_event_kind kind, const char *s, size_t n);
void op_emit_call(outparse *p, enum outparse_event_kind kind, const char *s, size_t n);
/* Emits text of `kind` up to the first of mk; returns the marker's index
 * (consumed) or -1 when none is complete. */
int op_text_until(outparse *p, const char *s, size_t n, enum outparse_event_kind kind,
                  const char *const *mk, size_t n_mk);
/* Reads bytes into p->tmp (at most HEAD_MAX) until one of mk; returns its
 * index (consumed) or -1 (to wait, or with *rc set on error). */
int op_head_until(outparse *p, const char *s, size_t n, const char *const *mk, size_t n_mk, int *rc);

/* parse_calls.c: the open tool call */
int op_call_open(outparse *p);
const char *op_call_label(const outparse *p);
int op_call_set_name(outparse *p, const char *name, size_t n); /* emits BEGIN */
int op_call_args(outparse *p, const char *s, size_t n);       /* emits or buffers ARGS */
int op_call_close(outparse *p);                               /* emits END */
int op_json_error(outparse *p, const char *what);
int op_code_begin(outparse *p, const char *term, enum op_state next);
int op_code_end(outparse *p);
/* Emits s as the body of a JSON string (escaped) in ARGS fragments that
 * never split a character. */
int op_json_str_emit(outparse *p, const char *s, size_t n);
/* One step of a tool-call state (every state from S_CALLOBJ on). */
int op_step_call(outparse *p, const char *s, size_t n);

/* parse_py.c: Python-syntax calls, name(k=v, ...) (Llama 3 built-ins, LFM2) */
bool op_ident_char(char c, bool first);
/* The open call is named s[0..n) and its arguments follow: emits BEGIN and "{". */
int op_py_call_begin(outparse *p, const char *name, size_t n);
/* One step of S_BI_KEY, S_BI_VAL, S_BI_SEP and the S_PL_* states. */
int op_st_py(outparse *p, const char *s, size_t n);

/* parse_xml.c: the S_QX_* (Qwen3-Coder) and S_GL_* (GLM) states */
int op_st_qx(outparse *p, const char *s, size_t n);
int op_st_glm(outparse *p, const char *s, size_t n);

#endif
