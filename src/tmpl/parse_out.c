/*
 * parse_out.c - streaming output parsers: generated text in, canonical
 * events (text, reasoning, tool-call begin/args/end) out. API in outparse.h;
 * the formats and the rules chosen are documented in docs/text.md
 * ("Output parsers").
 *
 * How it works: every fed byte is appended to `in`; drive() runs step() on
 * the unconsumed bytes until a step neither consumes nor changes state; what
 * is left is held for the next feed (and then compacted to the front). Each
 * state consumes what it is certain of and emits it at once. What it may hold:
 *   - a possible prefix of a marker at the end of the input (scan_markers);
 *   - an incomplete UTF-8 sequence at the end of the input (never split a
 *     character into two events);
 *   - bounded look-aheads: leading whitespace before a reasoning tag (64
 *     bytes), a Llama 3 JSON object until its first key says whether it is a
 *     tool call (256 bytes), a tool name or header (tmp, 512 bytes).
 * Tool-call arguments are streamed byte for byte while jscan (parse_json.c)
 * checks them; only arguments that arrive before the name (a JSON call object
 * with "arguments" first) are buffered, up to 1 MB.
 *
 * Invariants: `pos` <= in.len; a call is open (call_active) exactly between
 * call_open() and call_close(); events never carry bytes that a later byte
 * could reinterpret. At eof (outparse_finish) every state resolves what it
 * holds: partial markers become text.
 *
 * Start reading at outparse_feed -> drive -> step; one state per case.
 */
#include "tmpl/outparse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"
#include "tmpl/parse_int.h"

#define WS_MAX 64              /* leading whitespace looked through for a reasoning tag / Llama 3 JSON */
#define PROBE_MAX 256          /* bytes of a Llama 3 JSON object read before deciding it is a call */
#define NAME_MAX_ 256          /* tool name bytes */
#define HEAD_MAX 512           /* tool-call header bytes (names, harmony headers) */
#define PENDING_MAX (1u << 20) /* arguments buffered before the name is known */
#define KEY_MAX 16             /* bytes of a call-object key kept (longer keys are "other") */

enum state {
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
  S_MI_START,     /* after [TOOL_CALLS] */
  S_MI_NAME,      /* name until [ARGS] or [CALL_ID] */
  S_MI_CALLID,    /* id until [ARGS] (discarded) */
  S_DS_CALLS,     /* DeepSeek: between calls */
  S_DS_HEAD,      /* DeepSeek: until <｜tool▁sep｜> */
  S_DS_AFTER_SEP, /* DeepSeek: V3.1 '{' or R1 name */
  S_DS_NAME,      /* DeepSeek R1: name until newline */
  S_DS_FENCE,     /* DeepSeek R1: ```json */
  S_DS_CLOSE,     /* DeepSeek: ``` and <｜tool▁call▁end｜> */
  S_H_TEXT,       /* harmony: message content (or text outside messages) */
  S_H_HEAD,       /* harmony: header until <|message|> */
  S_H_AFTER_CALL, /* harmony: <|call|> after the arguments */
  S_FN_NAME,      /* functionary 3.1: name until '>' */
  S_FV_RECIP,     /* functionary 3.2: recipient until newline */
  S_FV_TEXT,      /* functionary 3.2: text until >>> */
  S_FV_AFTER      /* functionary 3.2: after arguments */
};

/* What a marker found in answer text does. */
enum action { A_HERMES, A_PYTAG, A_MISTRAL, A_DS_CALLS, A_DS_CALL, A_LIST, A_DROP, A_FUNC };

struct marker {
  const char *text;
  enum action action;
  bool always; /* active even without tools */
};

static const struct marker MK_HERMES[] = {{"<tool_call>", A_HERMES, false}};
static const struct marker MK_LLAMA3[] = {{"<|python_tag|>", A_PYTAG, false}};
static const struct marker MK_MISTRAL[] = {{"[TOOL_CALLS]", A_MISTRAL, false}};
static const struct marker MK_DEEPSEEK[] = {{"<｜tool▁calls▁begin｜>", A_DS_CALLS, false},
                                            {"<｜tool▁call▁begin｜>", A_DS_CALL, false}};
static const struct marker MK_GRANITE[] = {{"<|tool_call|>", A_LIST, false},
                                           {"<response>", A_DROP, true},
                                           {"</response>", A_DROP, true}};
static const struct marker MK_FUNC31[] = {{"<function=", A_FUNC, false},
                                          {"<|python_tag|>", A_PYTAG, false}};

static const struct {
  const char *name;
  const struct marker *markers;
  size_t n_markers;
} FORMATS[OUTPARSE_FORMAT_COUNT_] = {
    [OUTPARSE_PLAIN] = {"plain", NULL, 0},
    [OUTPARSE_HERMES] = {"hermes", MK_HERMES, ARRAY_LEN(MK_HERMES)},
    [OUTPARSE_LLAMA3] = {"llama3", MK_LLAMA3, ARRAY_LEN(MK_LLAMA3)},
    [OUTPARSE_MISTRAL] = {"mistral", MK_MISTRAL, ARRAY_LEN(MK_MISTRAL)},
    [OUTPARSE_DEEPSEEK] = {"deepseek", MK_DEEPSEEK, ARRAY_LEN(MK_DEEPSEEK)},
    [OUTPARSE_HARMONY] = {"harmony", NULL, 0},
    [OUTPARSE_GRANITE] = {"granite", MK_GRANITE, ARRAY_LEN(MK_GRANITE)},
    [OUTPARSE_FUNCTIONARY_V31] = {"functionary-v3.1", MK_FUNC31, ARRAY_LEN(MK_FUNC31)},
    [OUTPARSE_FUNCTIONARY_V32] = {"functionary-v3.2", NULL, 0},
};

#define DS_SEP "<｜tool▁sep｜>"
#define DS_CALL_BEGIN "<｜tool▁call▁begin｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"

/* Harmony content markers, in the order h_text tests their index. */
static const char *const H_CONTENT_MK[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>",
                                           "<|channel|>"};

struct outparse {
  outparse_config cfg;
  char *think_open, *think_close; /* owned copies, or NULL */
  outparse_emit_fn emit;
  void *ctx;

  buf in;     /* held input; in.data[pos..len) not consumed yet */
  size_t pos;
  bool eof;
  int err;    /* sticky error code */
  enum state state;

  const char *mk_text[4]; /* active answer-text markers */
  enum action mk_action[4];
  size_t n_mk;

  /* the open tool call */
  int n_calls;
  bool call_active, call_begun, call_has_args;
  int call_index;
  char call_id[40];
  char call_name[NAME_MAX_ + 1];
  buf pending;  /* arguments seen before the name */
  jscan js;
  enum state after;  /* state once the call's JSON is complete */
  bool code_ok;      /* S_ARGS_OBJ: non-JSON content is code */
  const char *code_term; /* S_CODE: marker that ends the code, or NULL (end of output) */
  enum state code_next;

  /* call-object key tracking (S_CALLOBJ) */
  int co_key;   /* K_* of the depth-1 member being read */
  int co_mode;  /* 0, M_NAME (name string body), M_ARGS (raw), M_ARGSTR (string to decode) */
  bool co_inkey;
  char co_keybuf[KEY_MAX + 1];
  size_t co_keylen;
  buf co_name;  /* raw (escaped) name bytes */

  buf tmp;      /* headers and names being read */
  const char *expect;
  enum state expect_next;
  enum outparse_event_kind h_kind; /* harmony: kind of the current content */
  int bi_n_args;       /* Llama 3 built-in call: arguments emitted */
  bool bi_quote, bi_esc; /* inside a Python '...' string, after its backslash */
  bool reason_ws_long; /* the reasoning whitespace run at the input's start was already emitted */
};

enum { K_OTHER, K_NAME, K_ARGS };
enum { M_NONE, M_NAME, M_ARGS, M_ARGSTR };
enum { MATCH_NONE, MATCH_PARTIAL, MATCH_FULL };

/* ---------- small helpers ---------- */

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t ws_len(const char *s, size_t n) {
  size_t i = 0;
  while (i < n && is_ws(s[i])) i++;
  return i;
}

/* Does s[0..n) start with lit (FULL), could it with more input (PARTIAL;
 * also when n == 0), or not (NONE)? At eof PARTIAL becomes NONE. */
static int match_at(const outparse *p, const char *s, size_t n, const char *lit) {
  size_t l = strlen(lit);
  if (n >= l) return memcmp(s, lit, l) == 0 ? MATCH_FULL : MATCH_NONE;
  if (n > 0 && memcmp(s, lit, n) != 0) return MATCH_NONE;
  return p->eof ? MATCH_NONE : MATCH_PARTIAL;
}

/* Index of the first byte where one of mk starts (*which = its index) or
 * where the rest of s is a proper prefix of one (*which = -1; not at eof);
 * n when neither. */
static size_t scan_markers(const outparse *p, const char *s, size_t n, const char *const *mk,
                           size_t n_mk, int *which) {
  *which = -1;
  for (size_t i = 0; i < n; i++) {
    bool partial = false;
    for (size_t k = 0; k < n_mk; k++) {
      if (mk[k][0] != s[i]) continue;
      size_t l = strlen(mk[k]);
      if (n - i >= l) {
        if (memcmp(s + i, mk[k], l) == 0) {
          *which = (int)k;
          return i;
        }
      } else if (!p->eof && memcmp(s + i, mk[k], n - i) == 0) {
        partial = true;
      }
    }
    if (partial) return i;
  }
  return n;
}

/* Bytes at the end of s that are an incomplete UTF-8 sequence. */
static size_t utf8_tail(const char *s, size_t n) {
  for (size_t back = 1; back <= 3 && back <= n; back++) {
    unsigned char c = (unsigned char)s[n - back];
    if ((c & 0xC0) == 0x80) continue;
    if (c < 0xC0) return 0;
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    return need > back ? back : 0;
  }
  return 0;
}

static void consume(outparse *p, size_t n) { p->pos += n; }

static void emit_text(outparse *p, enum outparse_event_kind kind, const char *s, size_t n) {
  if (n == 0) return;
  outparse_event ev = {kind, -1, s, n, NULL, NULL};
  p->emit(p->ctx, &ev);
}

static void emit_call(outparse *p, enum outparse_event_kind kind, const char *s, size_t n) {
  outparse_event ev = {kind, p->call_index, s, n, p->call_name, p->call_id};
  p->emit(p->ctx, &ev);
}

/* ---------- tool calls ---------- */

static int call_open(outparse *p) {
  int rc = id_make(p->call_id, sizeof p->call_id, "call_", 12);
  if (rc) return rc;
  p->call_index = p->n_calls++;
  p->call_active = true;
  p->call_begun = false;
  p->call_has_args = false;
  p->call_name[0] = '\0';
  buf_reset(&p->pending);
  jscan_init(&p->js);
  p->co_key = K_OTHER;
  p->co_mode = M_NONE;
  p->co_inkey = false;
  p->co_keylen = 0;
  buf_reset(&p->co_name);
  p->code_ok = false;
  return 0;
}

static const char *call_label(const outparse *p) {
  return p->call_name[0] ? p->call_name : "(unnamed)";
}

static int call_set_name(outparse *p, const char *name, size_t n) {
  while (n > 0 && is_ws(*name)) name++, n--;
  while (n > 0 && is_ws(name[n - 1])) n--;
  if (n == 0) return err_set(ERR_PARSE, "tool call %d: empty function name", p->call_index);
  if (n > NAME_MAX_)
    return err_set(ERR_PARSE, "tool call %d: function name longer than %d bytes", p->call_index,
                   NAME_MAX_);
  if (memchr(name, '\0', n))
    return err_set(ERR_PARSE, "tool call %d: NUL byte in the function name", p->call_index);
  if (p->call_begun)
    return err_set(ERR_PARSE, "tool call %d (%s): a second \"name\"", p->call_index, p->call_name);
  memcpy(p->call_name, name, n);
  p->call_name[n] = '\0';
  p->call_begun = true;
  emit_call(p, OUTPARSE_TOOL_CALL_BEGIN, NULL, 0);
  if (p->pending.len) emit_call(p, OUTPARSE_TOOL_CALL_ARGS, p->pending.data, p->pending.len);
  buf_reset(&p->pending);
  return 0;
}

static int call_args(outparse *p, const char *s, size_t n) {
  if (n == 0) return 0;
  p->call_has_args = true;
  if (p->call_begun) {
    emit_call(p, OUTPARSE_TOOL_CALL_ARGS, s, n);
    return 0;
  }
  if (p->pending.len + n > PENDING_MAX)
    return err_set(ERR_TOO_LARGE, "tool call %d: more than %u bytes of arguments before its name",
                   p->call_index, PENDING_MAX);
  return buf_append(&p->pending, s, n);
}

static int call_close(outparse *p) {
  if (!p->call_begun) return err_set(ERR_PARSE, "tool call %d has no \"name\"", p->call_index);
  if (!p->call_has_args) emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "{}", 2);
  emit_call(p, OUTPARSE_TOOL_CALL_END, NULL, 0);
  p->call_active = false;
  return 0;
}

static int json_error(outparse *p, const char *what) {
  return err_set(ERR_PARSE, "tool call %d (%s): invalid JSON in %s at byte %zu: %s",
                 p->call_index, call_label(p), what, p->js.off, jscan_expected(&p->js));
}

/* Streams a code call's text as the body of a JSON string. */
static int code_emit(outparse *p, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  char out[288];
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (o >= 256 && (c & 0xC0) != 0x80) { /* flush between characters only */
      emit_call(p, OUTPARSE_TOOL_CALL_ARGS, out, o);
      o = 0;
    }
    if (c == '"' || c == '\\') {
      out[o++] = '\\';
      out[o++] = (char)c;
    } else if (c == '\n') {
      out[o++] = '\\';
      out[o++] = 'n';
    } else if (c == '\t') {
      out[o++] = '\\';
      out[o++] = 't';
    } else if (c == '\r') {
      out[o++] = '\\';
      out[o++] = 'r';
    } else if (c < 0x20) {
      memcpy(out + o, "\\u00", 4);
      out[o + 4] = hex[c >> 4];
      out[o + 5] = hex[c & 15];
      o += 6;
    } else {
      out[o++] = (char)c;
    }
  }
  if (o) emit_call(p, OUTPARSE_TOOL_CALL_ARGS, out, o);
  return 0;
}

/* The open call becomes a code call: {"code":"<escaped text>"}. */
static int code_begin(outparse *p, const char *term, enum state next) {
  if (!p->call_begun) {
    int rc = call_set_name(p, "python", 6);
    if (rc) return rc;
  }
  p->call_has_args = true;
  emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "{\"code\":\"", 9);
  p->code_term = term;
  p->code_next = next;
  p->state = S_CODE;
  return 0;
}

static int code_end(outparse *p) {
  emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "\"}", 2);
  return call_close(p);
}

/* ---------- states ---------- */

/* Emits text of `kind` up to the first marker. Returns the marker's index
 * (consumed) or -1 when none is complete (the rest is held, or emitted at eof). */
static int text_until(outparse *p, const char *s, size_t n, enum outparse_event_kind kind,
                      const char *const *mk, size_t n_mk) {
  int which;
  size_t i = scan_markers(p, s, n, mk, n_mk, &which);
  emit_text(p, kind, s, i);
  consume(p, i);
  if (which < 0) return -1;
  consume(p, strlen(mk[which]));
  return which;
}

/* Reads bytes until one of mk into tmp (bounded). Returns the marker index
 * (consumed), -1 to wait. */
static int head_until(outparse *p, const char *s, size_t n, const char *const *mk, size_t n_mk,
                      int *rc) {
  int which;
  size_t i = scan_markers(p, s, n, mk, n_mk, &which);
  *rc = 0;
  if (p->tmp.len + i > HEAD_MAX) {
    *rc = err_set(ERR_PARSE, "tool call header longer than %d bytes (no %s)", HEAD_MAX, mk[0]);
    return -1;
  }
  if ((*rc = buf_append(&p->tmp, s, i))) return -1;
  consume(p, i);
  if (which < 0) return -1;
  consume(p, strlen(mk[which]));
  return which;
}

/* Reasoning until think_close. A whitespace run is held until something
 * other than whitespace follows (then it is emitted) or think_close does
 * or the end of output does (then it is dropped: reasoning ends without
 * trailing whitespace, as llama.cpp strips it); a run longer than WS_MAX is emitted whole instead,
 * which bounds what is held and keeps the result independent of splits. */
static int st_reason(outparse *p, const char *s, size_t n) {
  const char *mk = p->think_close;
  int which;
  size_t i = scan_markers(p, s, n, &mk, 1, &which);
  size_t t = 0;
  while (t < i && is_ws(s[i - 1 - t])) t++;
  bool is_long = (t == i && p->reason_ws_long) || t > WS_MAX;
  size_t out = i;
  if (which >= 0) {
    if (!is_long) out = i - t;
    emit_text(p, OUTPARSE_REASONING, s, out);
    consume(p, i + strlen(mk));
    p->reason_ws_long = false;
    p->state = S_AFTER_THINK;
    return 0;
  }
  /* no think_close yet: hold a short trailing run (dropped at eof, as at think_close) */
  if (!is_long) out = i - t;
  emit_text(p, OUTPARSE_REASONING, s, out);
  consume(p, p->eof ? i : out);
  if (i > 0) p->reason_ws_long = out == i && t > 0 && is_long;
  return 0;
}

static int st_start(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  if (p->think_open && w <= WS_MAX) {
    int m = match_at(p, s + w, n - w, p->think_open);
    if (m == MATCH_FULL) {
      consume(p, w + strlen(p->think_open));
      p->state = S_REASON_WS;
      return 0;
    }
    if (m == MATCH_PARTIAL) return 0;
  }
  p->state = S_ANSWER_START;
  return 0;
}

static int st_reason_open(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  if (w <= WS_MAX) {
    int m = match_at(p, s + w, n - w, p->think_open);
    if (m == MATCH_FULL) consume(p, w + strlen(p->think_open));
    else if (m == MATCH_PARTIAL) return 0;
  }
  p->state = S_REASON_WS;
  return 0;
}

/* Skips whitespace; moves to next once something else shows up. */
static void skip_ws_then(outparse *p, const char *s, size_t n, enum state next) {
  size_t w = ws_len(s, n);
  consume(p, w);
  if (w < n) p->state = next;
}

static int st_answer_start(outparse *p, const char *s, size_t n) {
  switch (p->cfg.format) {
  case OUTPARSE_LLAMA3:
    if (p->cfg.tools_enabled) {
      size_t w = ws_len(s, n);
      if (w == n && !p->eof && w <= WS_MAX) return 0;
      if (w < n && s[w] == '{') {
        consume(p, w);
        p->state = S_L3_PROBE;
        return 0;
      }
    }
    p->state = S_TEXT;
    return 0;
  case OUTPARSE_FUNCTIONARY_V32:
    buf_reset(&p->tmp);
    p->state = S_FV_RECIP;
    return 0;
  case OUTPARSE_HARMONY:
    p->h_kind = OUTPARSE_TEXT;
    p->state = S_H_TEXT;
    return 0;
  default:
    p->state = S_TEXT;
    return 0;
  }
}

static int st_text(outparse *p, const char *s, size_t n) {
  int k = text_until(p, s, n, OUTPARSE_TEXT, p->mk_text, p->n_mk);
  if (k < 0) return 0;
  int rc;
  switch (p->mk_action[k]) {
  case A_DROP:
    return 0;
  case A_HERMES:
    if ((rc = call_open(p))) return rc;
    p->state = S_CALLOBJ;
    p->after = S_EXPECT;
    p->expect = "</tool_call>";
    p->expect_next = S_SKIP_WS;
    return 0;
  case A_PYTAG:
    p->state = S_PY_START;
    return 0;
  case A_MISTRAL:
    p->state = S_MI_START;
    return 0;
  case A_DS_CALLS:
    p->state = S_DS_CALLS;
    return 0;
  case A_DS_CALL:
    buf_reset(&p->tmp);
    p->state = S_DS_HEAD;
    return 0;
  case A_LIST:
    p->state = S_ARR_START;
    return 0;
  case A_FUNC:
    buf_reset(&p->tmp);
    p->state = S_FN_NAME;
    return 0;
  }
  return 0;
}

/* {"name": "...", "arguments": {...}} (or "parameters"), streaming the
 * arguments' raw text. Other members are checked and ignored. */
static int st_callobj(outparse *p, const char *s, size_t n) {
  size_t run = p->co_mode == M_ARGS ? 0 : SIZE_MAX; /* start of an args run in s */
  size_t i;
  int rc;
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    int vd = -1, nd = -1;
    unsigned f = jscan_byte(&p->js, c, &vd, &nd);
    if (f & JF_ERR) {
      if (run != SIZE_MAX && (rc = call_args(p, s + run, i - run))) return rc;
      consume(p, i);
      if (f & JF_TOODEEP)
        return err_set(ERR_TOO_LARGE, "tool call %d (%s): arguments nested deeper than %d",
                       p->call_index, call_label(p), JSCAN_MAX_DEPTH);
      return json_error(p, "the call object");
    }
    if ((f & JF_NUMEND) && nd == 1 && p->co_mode == M_ARGS) {
      if ((rc = call_args(p, s + run, i - run))) return rc;
      run = SIZE_MAX;
      p->co_mode = M_NONE;
    }
    if ((f & JF_VSTART) && vd == 0 && c != '{') {
      p->js.why = "a tool call must be a JSON object";
      return json_error(p, "the call object");
    }
    if ((f & JF_KSTART) && vd == 1) {
      p->co_inkey = true;
      p->co_keylen = 0;
    } else if (p->co_inkey && (f & JF_STRBODY)) {
      if (p->co_keylen < KEY_MAX) p->co_keybuf[p->co_keylen] = (char)c;
      p->co_keylen++;
    } else if (p->co_inkey && (f & JF_KEND)) {
      p->co_inkey = false;
      size_t l = p->co_keylen;
      p->co_key = K_OTHER;
      if (l == 4 && !memcmp(p->co_keybuf, "name", 4)) p->co_key = K_NAME;
      else if ((l == 9 && !memcmp(p->co_keybuf, "arguments", 9)) ||
               (l == 10 && !memcmp(p->co_keybuf, "parameters", 10)))
        p->co_key = K_ARGS;
    }
    if ((f & JF_VSTART) && vd == 1) {
      if (p->co_key == K_NAME) {
        if (c != '"') {
          consume(p, i);
          return err_set(ERR_PARSE, "tool call %d: \"name\" is not a string", p->call_index);
        }
        p->co_mode = M_NAME;
        buf_reset(&p->co_name);
      } else if (p->co_key == K_ARGS) {
        if (c == '"') {
          p->co_mode = M_ARGSTR; /* arguments given as a JSON string: decode it */
          buf_reset(&p->tmp);
        } else {
          p->co_mode = M_ARGS;
          run = i;
        }
      }
    } else if (f & JF_STRBODY) {
      if (p->co_mode == M_NAME) {
        if (p->co_name.len >= 6 * NAME_MAX_) {
          consume(p, i);
          return err_set(ERR_PARSE, "tool call %d: function name longer than %d bytes",
                         p->call_index, NAME_MAX_);
        }
        if ((rc = buf_append_byte(&p->co_name, (char)c))) return rc;
      } else if (p->co_mode == M_ARGSTR) {
        if (p->tmp.len >= PENDING_MAX)
          return err_set(ERR_TOO_LARGE, "tool call %d: arguments string longer than %u bytes",
                         p->call_index, PENDING_MAX);
        if ((rc = buf_append_byte(&p->tmp, (char)c))) return rc;
      }
    }
    if ((f & JF_VEND) && vd == 1) {
      if (p->co_mode == M_NAME) {
        char name[NAME_MAX_ + 1];
        consume(p, i + 1);
        if (!json_unescape(p->co_name.data ? p->co_name.data : "", p->co_name.len, name, sizeof name))
          return err_set(ERR_PARSE, "tool call %d: bad function name string", p->call_index);
        if ((rc = call_set_name(p, name, strlen(name)))) return rc;
        p->co_mode = M_NONE;
        return 0; /* the rest on the next step, with s relative to the new pos */
      }
      if (p->co_mode == M_ARGS) {
        if ((rc = call_args(p, s + run, i + 1 - run))) return rc;
        run = SIZE_MAX;
        p->co_mode = M_NONE;
      } else if (p->co_mode == M_ARGSTR) {
        size_t cap = p->tmp.len + 1;
        char *dec = malloc(cap);
        if (!dec) return ERR_NOMEM;
        bool ok = json_unescape(p->tmp.data ? p->tmp.data : "", p->tmp.len, dec, cap);
        if (ok) rc = call_args(p, dec, strlen(dec));
        free(dec);
        if (!ok)
          return err_set(ERR_PARSE, "tool call %d: bad escape in the arguments string",
                         p->call_index);
        if (rc) return rc;
        p->call_has_args = true;
        p->co_mode = M_NONE;
      }
    }
    if (f & JF_DONE) {
      consume(p, i + 1);
      if ((rc = call_close(p))) return rc;
      p->state = p->after;
      return 0;
    }
  }
  if (run != SIZE_MAX && (rc = call_args(p, s + run, n - run))) return rc;
  consume(p, n);
  return 0;
}

/* The arguments object alone, streamed from '{' to '}'. */
static int st_args_obj(outparse *p, const char *s, size_t n) {
  size_t run = p->js.depth > 0 ? 0 : SIZE_MAX;
  int rc;
  if (p->js.off == 0) { /* leading whitespace is not part of the arguments */
    size_t w = ws_len(s, n);
    consume(p, w);
    s += w, n -= w;
    if (n == 0) return 0;
    if (s[0] != '{') {
      if (p->code_ok) return code_begin(p, p->code_term, p->code_next);
      p->js.off = 1;
      p->js.why = "expected '{' to open the arguments object";
      return json_error(p, "the arguments");
    }
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    int vd = -1;
    unsigned f = jscan_byte(&p->js, c, &vd, NULL);
    if (f & JF_ERR) {
      if (run != SIZE_MAX && (rc = call_args(p, s + run, i - run))) return rc;
      consume(p, i);
      if (f & JF_TOODEEP)
        return err_set(ERR_TOO_LARGE, "tool call %d (%s): arguments nested deeper than %d",
                       p->call_index, call_label(p), JSCAN_MAX_DEPTH);
      return json_error(p, "the arguments");
    }
    if (f & JF_VSTART && vd == 0) run = i;
    if (f & JF_DONE) {
      if ((rc = call_args(p, s + run, i + 1 - run))) return rc;
      consume(p, i + 1);
      if ((rc = call_close(p))) return rc;
      p->state = p->after;
      return 0;
    }
  }
  if (run != SIZE_MAX && (rc = call_args(p, s + run, n - run))) return rc;
  consume(p, n);
  return 0;
}

static int st_code(outparse *p, const char *s, size_t n) {
  int which = -1;
  size_t i = n;
  if (p->code_term) i = scan_markers(p, s, n, &p->code_term, 1, &which);
  int rc = code_emit(p, s, i);
  if (rc) return rc;
  consume(p, i);
  if (which < 0) return 0;
  consume(p, strlen(p->code_term));
  if ((rc = code_end(p))) return rc;
  p->state = p->code_next;
  return 0;
}

static int st_expect(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  int m = match_at(p, s + w, n - w, p->expect);
  if (m == MATCH_FULL) {
    consume(p, w + strlen(p->expect));
    p->state = p->expect_next;
  } else if (m == MATCH_NONE) {
    /* Lenient: the call is complete; whatever follows is text. */
    if (w < n || p->eof) {
      consume(p, w);
      p->state = S_TEXT;
    }
  }
  return 0;
}

static int st_arr(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  consume(p, w);
  if (w == n) return 0;
  char c = s[w];
  int rc;
  if (p->state == S_ARR_START) {
    if (c == '[') {
      consume(p, 1);
      p->state = S_ARR_ITEM;
      return 0;
    }
    if (c == '{') {
      if ((rc = call_open(p))) return rc;
      p->after = S_SKIP_WS;
      p->state = S_CALLOBJ;
      return 0;
    }
    return err_set(ERR_PARSE, "tool calls: expected '[' after the tool-call marker, got '%c'", c);
  }
  if (p->state == S_ARR_ITEM && c == '{') {
    if ((rc = call_open(p))) return rc;
    p->after = S_ARR_SEP;
    p->state = S_CALLOBJ;
    return 0;
  }
  if (p->state == S_ARR_SEP && c == ',') {
    consume(p, 1);
    p->state = S_ARR_ITEM;
    return 0;
  }
  if (c == ']') {
    consume(p, 1);
    p->state = S_SKIP_WS;
    return 0;
  }
  return err_set(ERR_PARSE, "tool calls: expected %s in the list of calls, got '%c'",
                 p->state == S_ARR_ITEM ? "'{' or ']'" : "',' or ']'", c);
}

/* Llama 3: a '{' at the start of the answer is a tool call when its first
 * key is "name" (or "type" then "name"), as Llama's template writes it. The
 * object is only looked at here; S_CALLOBJ parses it from the start. */
static int st_l3_probe(outparse *p, const char *s, size_t n) {
  jscan js;
  jscan_init(&js);
  char key[KEY_MAX + 1];
  size_t kl = 0;
  bool inkey = false, first_type = false;
  int n_keys = 0, verdict = 0; /* 1 call, -1 text */
  size_t i;
  for (i = 0; i < n && i < PROBE_MAX && !verdict; i++) {
    int vd = -1;
    unsigned f = jscan_byte(&js, (unsigned char)s[i], &vd, NULL);
    if (f & (JF_ERR | JF_DONE)) verdict = -1;
    else if ((f & JF_KSTART) && vd == 1) inkey = true, kl = 0;
    else if (inkey && (f & JF_STRBODY)) {
      if (kl < KEY_MAX) key[kl] = s[i];
      kl++;
    } else if (inkey && (f & JF_KEND)) {
      inkey = false;
      n_keys++;
      bool is_name = kl == 4 && !memcmp(key, "name", 4);
      if (is_name && (n_keys == 1 || first_type)) verdict = 1;
      else if (n_keys == 1 && kl == 4 && !memcmp(key, "type", 4)) first_type = true;
      else verdict = -1;
    }
  }
  if (!verdict && (p->eof || i >= PROBE_MAX)) verdict = -1;
  if (verdict > 0) {
    int rc = call_open(p);
    if (rc) return rc;
    p->after = S_L3_AFTER;
    p->state = S_CALLOBJ;
  } else if (verdict < 0) {
    p->state = S_TEXT;
  }
  return 0;
}

static int st_l3_after(outparse *p, const char *s, size_t n) {
  size_t w = 0;
  while (w < n && (is_ws(s[w]) || s[w] == ';')) w++;
  consume(p, w);
  if (w == n) return 0;
  p->state = s[w] == '{' ? S_L3_PROBE : S_TEXT;
  return 0;
}

static bool ident_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (!first && c >= '0' && c <= '9');
}

/* Is s a Llama 3 built-in tool call, `name.call(`? MATCH_FULL with the name's
 * length in *name_len, MATCH_PARTIAL to wait, MATCH_NONE. */
static int bi_peek(const outparse *p, const char *s, size_t n, size_t *name_len) {
  size_t i = 0;
  while (i < n && i <= WS_MAX && ident_char(s[i], i == 0)) i++;
  if (i == 0 || i > WS_MAX) return MATCH_NONE;
  if (i == n) return p->eof ? MATCH_NONE : MATCH_PARTIAL;
  *name_len = i;
  return match_at(p, s + i, n - i, ".call(");
}

static int st_py_start(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  consume(p, w);
  if (w == n) return 0;
  s += w, n -= w;
  size_t nl = 0;
  int m = s[0] == '{' ? MATCH_NONE : bi_peek(p, s, n, &nl);
  if (m == MATCH_PARTIAL) return 0;
  int rc = call_open(p);
  if (rc) return rc;
  if (s[0] == '{') {
    p->after = p->cfg.format == OUTPARSE_LLAMA3 ? S_L3_AFTER : S_SKIP_WS;
    p->state = S_CALLOBJ;
    return 0;
  }
  if (m == MATCH_FULL && p->cfg.format == OUTPARSE_LLAMA3) {
    /* brave_search.call(query="x") -> brave_search {"query": "x"} */
    if ((rc = call_set_name(p, s, nl))) return rc;
    consume(p, nl + 6);
    emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "{", 1);
    p->call_has_args = true;
    p->bi_n_args = 0;
    p->state = S_BI_KEY;
    return 0;
  }
  return code_begin(p, "<|eom_id|>", S_SKIP_WS); /* Llama's end-of-message token, if fed */
}

static int bi_end(outparse *p) {
  emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "}", 1);
  int rc = call_close(p);
  if (rc) return rc;
  p->expect = "<|eom_id|>";
  p->expect_next = S_SKIP_WS;
  p->state = S_EXPECT;
  return 0;
}

/* Built-in call arguments: `name = value` pairs, values in JSON or Python
 * literal syntax ('single quoted', True, False, None), until ')'. */
static int st_bi_key(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  if (w == n) {
    consume(p, w);
    return 0;
  }
  if (s[w] == ')') {
    consume(p, w + 1);
    return bi_end(p);
  }
  if (p->state == S_BI_SEP) {
    if (s[w] != ',')
      return err_set(ERR_PARSE, "tool call %d (%s): expected ',' or ')' in the built-in call",
                     p->call_index, p->call_name);
    consume(p, w + 1);
    p->state = S_BI_KEY;
    return 0;
  }
  size_t i = w;
  while (i < n && i - w <= WS_MAX && ident_char(s[i], i == w)) i++;
  size_t kl = i - w;
  size_t j = i + ws_len(s + i, n - i);
  if (j == n && kl <= WS_MAX && !p->eof) return 0; /* wait for the '=' */
  if (kl == 0 || kl > WS_MAX || j == n || s[j] != '=')
    return err_set(ERR_PARSE, "tool call %d (%s): expected name=value in the built-in call",
                   p->call_index, p->call_name);
  char key[WS_MAX + 8];
  int kn = snprintf(key, sizeof key, "%s\"%.*s\": ", p->bi_n_args ? ", " : "", (int)kl, s + w);
  emit_call(p, OUTPARSE_TOOL_CALL_ARGS, key, (size_t)kn);
  p->bi_n_args++;
  consume(p, j + 1);
  jscan_init(&p->js);
  p->bi_quote = false;
  p->state = S_BI_VAL;
  return 0;
}

static int st_bi_val(outparse *p, const char *s, size_t n) {
  int rc;
  if (p->js.off == 0 && !p->bi_quote) {
    size_t w = ws_len(s, n);
    consume(p, w);
    s += w, n -= w;
    if (n == 0) return 0;
    static const char *const py[][2] = {{"True", "true"}, {"False", "false"}, {"None", "null"}};
    for (size_t k = 0; k < 3; k++) {
      int m = match_at(p, s, n, py[k][0]);
      if (m == MATCH_PARTIAL) return 0;
      if (m == MATCH_FULL) {
        emit_call(p, OUTPARSE_TOOL_CALL_ARGS, py[k][1], strlen(py[k][1]));
        consume(p, strlen(py[k][0]));
        p->state = S_BI_SEP;
        return 0;
      }
    }
    if (s[0] == '\'') { /* Python single-quoted string -> JSON string */
      emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "\"", 1);
      consume(p, 1);
      p->bi_quote = true;
      p->bi_esc = false;
      return 0;
    }
  }
  if (p->bi_quote) {
    size_t i;
    for (i = 0; i < n; i++) {
      char c = s[i];
      if (p->bi_esc) { /* \' is a quote; escapes JSON shares pass; others are a backslash */
        p->bi_esc = false;
        if (c == '\'') {
          emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "'", 1);
        } else if (c && strchr("ntrbf\\\"/u", c)) {
          char e[2] = {'\\', c};
          emit_call(p, OUTPARSE_TOOL_CALL_ARGS, e, 2);
        } else {
          emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "\\\\", 2);
          i--; /* c again, as itself */
        }
      } else if (c == '\\') {
        p->bi_esc = true;
      } else if (c == '\'') {
        emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "\"", 1);
        consume(p, i + 1);
        p->bi_quote = false;
        p->state = S_BI_SEP;
        return 0;
      } else if (c == '"') {
        emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "\\\"", 2);
      } else {
        size_t j = i;
        while (j < n && s[j] != '\\' && s[j] != '\'' && s[j] != '"') j++;
        if ((rc = code_emit(p, s + i, j - i))) return rc;
        i = j - 1;
      }
    }
    consume(p, n);
    return 0;
  }
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    int nd = -1;
    unsigned f = jscan_byte(&p->js, (unsigned char)s[i], NULL, &nd);
    if (f & JF_ERR) {
      call_args(p, s + run, i - run);
      consume(p, i);
      return json_error(p, "a built-in call argument");
    }
    if ((f & JF_NUMEND) && nd == 0) { /* s[i] is the delimiter after a number */
      if ((rc = call_args(p, s + run, i - run))) return rc;
      consume(p, i);
      p->state = S_BI_SEP;
      return 0;
    }
    if (f & JF_DONE) {
      if ((rc = call_args(p, s + run, i + 1 - run))) return rc;
      consume(p, i + 1);
      p->state = S_BI_SEP;
      return 0;
    }
  }
  if ((rc = call_args(p, s + run, n - run))) return rc;
  consume(p, n);
  return 0;
}

static int st_mi_start(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  consume(p, w);
  if (w == n) return 0;
  if (s[w] == '[') {
    p->state = S_ARR_START;
    return 0;
  }
  int rc = call_open(p);
  if (rc) return rc;
  buf_reset(&p->tmp);
  p->state = S_MI_NAME;
  return 0;
}

static int st_mi_name(outparse *p, const char *s, size_t n) {
  static const char *const mk[] = {"[ARGS]", "[CALL_ID]"};
  int rc;
  int k = head_until(p, s, n, mk, p->state == S_MI_NAME ? 2 : 1, &rc); /* mk[0] ends an id */
  if (rc) return rc;
  if (k < 0) return 0;
  if (p->state == S_MI_NAME) {
    if ((rc = call_set_name(p, p->tmp.data ? p->tmp.data : "", p->tmp.len))) return rc;
    buf_reset(&p->tmp);
    if (k == 1) {
      p->state = S_MI_CALLID;
      return 0;
    }
  }
  p->after = S_SKIP_WS;
  p->state = S_ARGS_OBJ;
  return 0;
}

static int st_ds_calls(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  int m1 = match_at(p, s + w, n - w, DS_CALL_BEGIN);
  int m2 = match_at(p, s + w, n - w, DS_CALLS_END);
  if (m1 == MATCH_FULL) {
    consume(p, w + strlen(DS_CALL_BEGIN));
    buf_reset(&p->tmp);
    p->state = S_DS_HEAD;
  } else if (m2 == MATCH_FULL) {
    consume(p, w + strlen(DS_CALLS_END));
    p->state = S_SKIP_WS;
  } else if (m1 == MATCH_NONE && m2 == MATCH_NONE) {
    consume(p, w);
    if (w < n) p->state = S_TEXT;
  }
  return 0;
}

static int st_ds_head(outparse *p, const char *s, size_t n) {
  static const char *const mk[] = {DS_SEP};
  int rc;
  int k = head_until(p, s, n, mk, 1, &rc);
  if (rc) return rc;
  if (k >= 0) p->state = S_DS_AFTER_SEP;
  return 0;
}

static int st_ds_after_sep(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  if (w == n) return 0;
  int rc = call_open(p);
  if (rc) return rc;
  if (s[w] == '{') { /* V3.1: name<｜tool▁sep｜>{args} */
    consume(p, w);
    if ((rc = call_set_name(p, p->tmp.data ? p->tmp.data : "", p->tmp.len))) return rc;
    p->after = S_DS_CLOSE;
    p->state = S_ARGS_OBJ;
    return 0;
  }
  buf_reset(&p->tmp); /* R1: function<｜tool▁sep｜>name\n```json\n{args}\n``` */
  p->state = S_DS_NAME;
  return 0;
}

static int st_ds_name(outparse *p, const char *s, size_t n) {
  static const char *const mk[] = {"\n"};
  int rc;
  int k = head_until(p, s, n, mk, 1, &rc);
  if (rc) return rc;
  if (k < 0) return 0;
  if ((rc = call_set_name(p, p->tmp.data ? p->tmp.data : "", p->tmp.len))) return rc;
  p->state = S_DS_FENCE;
  return 0;
}

static int st_ds_fence(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  if (w == n) {
    consume(p, w);
    return 0;
  }
  int m = match_at(p, s + w, n - w, "```json");
  if (m == MATCH_PARTIAL) return 0;
  if (m == MATCH_FULL) w += 7;
  else if (match_at(p, s + w, n - w, "```") == MATCH_FULL) w += 3;
  consume(p, w);
  p->after = S_DS_CLOSE;
  p->state = S_ARGS_OBJ;
  return 0;
}

static int st_ds_close(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  int m = match_at(p, s + w, n - w, "```");
  if (m == MATCH_PARTIAL && w < n) return 0;
  if (m == MATCH_FULL) {
    w += 3;
    w += ws_len(s + w, n - w);
  }
  m = match_at(p, s + w, n - w, DS_CALL_END);
  if (m == MATCH_FULL) {
    consume(p, w + strlen(DS_CALL_END));
    p->state = S_DS_CALLS;
  } else if (m == MATCH_NONE) {
    consume(p, w);
    if (w < n || p->eof) p->state = S_TEXT;
  }
  return 0;
}

static int st_h_text(outparse *p, const char *s, size_t n) {
  int k = text_until(p, s, n, p->h_kind, H_CONTENT_MK, ARRAY_LEN(H_CONTENT_MK));
  if (k < 0) return 0;
  if (k <= 2) { /* <|end|> <|call|> <|return|>: back outside a message */
    p->h_kind = OUTPARSE_TEXT;
    return 0;
  }
  buf_reset(&p->tmp);
  if (k == 4) {
    int rc = buf_append_str(&p->tmp, "<|channel|>");
    if (rc) return rc;
  }
  p->state = S_H_HEAD;
  return 0;
}

/* Word after `key` in the header (up to whitespace or '<'), or NULL. */
static const char *h_word(const char *head, const char *key, size_t *len) {
  const char *at = strstr(head, key);
  if (!at) return NULL;
  at += strlen(key);
  size_t l = 0;
  while (at[l] && !is_ws(at[l]) && at[l] != '<') l++;
  *len = l;
  return at;
}

static int st_h_head(outparse *p, const char *s, size_t n) {
  static const char *const mk[] = {"<|message|>"};
  int rc;
  int k = head_until(p, s, n, mk, 1, &rc);
  if (rc) return rc;
  if (k < 0) return 0;
  const char *head = p->tmp.data ? p->tmp.data : "";
  size_t cl = 0, rl = 0;
  const char *chan = h_word(head, "<|channel|>", &cl);
  const char *to = h_word(head, "to=", &rl);
  if (to && rl > 0 && p->cfg.tools_enabled) {
    if ((rc = call_open(p))) return rc;
    if (rl > 10 && !memcmp(to, "functions.", 10)) to += 10, rl -= 10;
    if ((rc = call_set_name(p, to, rl))) return rc;
    p->code_ok = true;
    p->code_term = "<|call|>";
    p->code_next = S_H_TEXT;
    p->h_kind = OUTPARSE_TEXT;
    p->after = S_H_AFTER_CALL;
    p->state = S_ARGS_OBJ;
    return 0;
  }
  p->h_kind = chan && cl == 8 && !memcmp(chan, "analysis", 8) ? OUTPARSE_REASONING : OUTPARSE_TEXT;
  p->state = S_H_TEXT;
  return 0;
}

static int st_h_after_call(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  int m1 = match_at(p, s + w, n - w, "<|call|>");
  int m2 = match_at(p, s + w, n - w, "<|end|>");
  if (m1 == MATCH_FULL || m2 == MATCH_FULL) {
    consume(p, w + (m1 == MATCH_FULL ? 8 : 7));
    p->state = S_H_TEXT;
  } else if (m1 == MATCH_NONE && m2 == MATCH_NONE) {
    consume(p, w);
    if (w < n || p->eof) p->state = S_H_TEXT;
  }
  return 0;
}

static int st_fn_name(outparse *p, const char *s, size_t n) {
  static const char *const mk[] = {">"};
  int rc;
  int k = head_until(p, s, n, mk, 1, &rc);
  if (rc) return rc;
  if (k < 0) return 0;
  if ((rc = call_open(p))) return rc;
  if ((rc = call_set_name(p, p->tmp.data ? p->tmp.data : "", p->tmp.len))) return rc;
  p->after = S_EXPECT;
  p->expect = "</function>";
  p->expect_next = S_SKIP_WS;
  p->state = S_ARGS_OBJ;
  return 0;
}

/* Functionary 3.2: "recipient\n" starts a message. The line is only looked
 * at (held, at most WS_MAX bytes) until its newline; a line that is longer,
 * has no newline before the end, or holds anything but a name is text. */
static bool fv_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

static int st_fv_recip(outparse *p, const char *s, size_t n) {
  size_t i = 0;
  while (i < n && i <= WS_MAX && fv_name_char(s[i])) i++;
  if (i == n && i <= WS_MAX && !p->eof) return 0; /* line not complete yet */
  size_t rl = i;
  if (i < n && s[i] == '\r') {
    if (i + 1 == n && !p->eof) return 0;
    i++;
  }
  if (rl == 0 || rl > WS_MAX || i >= n || s[i] != '\n') { /* not a recipient line: text */
    p->state = S_FV_TEXT;
    return 0;
  }
  consume(p, i + 1);
  if ((rl == 3 && !memcmp(s, "all", 3)) || !p->cfg.tools_enabled) {
    p->state = S_FV_TEXT;
    return 0;
  }
  int rc = call_open(p);
  if (rc) return rc;
  if ((rc = call_set_name(p, s, rl))) return rc;
  p->code_ok = true;
  p->code_term = ">>>";
  p->code_next = S_FV_RECIP;
  p->after = S_FV_AFTER;
  p->state = S_ARGS_OBJ;
  return 0;
}

static int st_fv_text(outparse *p, const char *s, size_t n) {
  static const char *const mk[] = {">>>"};
  if (text_until(p, s, n, OUTPARSE_TEXT, mk, 1) >= 0) {
    buf_reset(&p->tmp);
    p->state = S_FV_RECIP;
  }
  return 0;
}

static int st_fv_after(outparse *p, const char *s, size_t n) {
  size_t w = ws_len(s, n);
  int m = match_at(p, s + w, n - w, ">>>");
  if (m == MATCH_FULL) {
    consume(p, w + 3);
    buf_reset(&p->tmp);
    p->state = S_FV_RECIP;
  } else if (m == MATCH_NONE) {
    consume(p, w);
    if (w < n || p->eof) p->state = S_FV_TEXT;
  }
  return 0;
}

static int step(outparse *p, const char *s, size_t n) {
  switch (p->state) {
  case S_START: return st_start(p, s, n);
  case S_REASON_OPEN: return st_reason_open(p, s, n);
  case S_REASON_WS: skip_ws_then(p, s, n, S_REASON); return 0;
  case S_REASON: return st_reason(p, s, n);
  case S_AFTER_THINK: skip_ws_then(p, s, n, S_ANSWER_START); return 0;
  case S_ANSWER_START: return st_answer_start(p, s, n);
  case S_TEXT: return st_text(p, s, n);
  case S_SKIP_WS: skip_ws_then(p, s, n, S_TEXT); return 0;
  case S_CALLOBJ: return st_callobj(p, s, n);
  case S_ARGS_OBJ: return st_args_obj(p, s, n);
  case S_CODE: return st_code(p, s, n);
  case S_EXPECT: return st_expect(p, s, n);
  case S_ARR_START:
  case S_ARR_ITEM:
  case S_ARR_SEP: return st_arr(p, s, n);
  case S_L3_PROBE: return st_l3_probe(p, s, n);
  case S_L3_AFTER: return st_l3_after(p, s, n);
  case S_PY_START: return st_py_start(p, s, n);
  case S_BI_KEY:
  case S_BI_SEP: return st_bi_key(p, s, n);
  case S_BI_VAL: return st_bi_val(p, s, n);
  case S_MI_START: return st_mi_start(p, s, n);
  case S_MI_NAME:
  case S_MI_CALLID: return st_mi_name(p, s, n);
  case S_DS_CALLS: return st_ds_calls(p, s, n);
  case S_DS_HEAD: return st_ds_head(p, s, n);
  case S_DS_AFTER_SEP: return st_ds_after_sep(p, s, n);
  case S_DS_NAME: return st_ds_name(p, s, n);
  case S_DS_FENCE: return st_ds_fence(p, s, n);
  case S_DS_CLOSE: return st_ds_close(p, s, n);
  case S_H_TEXT: return st_h_text(p, s, n);
  case S_H_HEAD: return st_h_head(p, s, n);
  case S_H_AFTER_CALL: return st_h_after_call(p, s, n);
  case S_FN_NAME: return st_fn_name(p, s, n);
  case S_FV_RECIP: return st_fv_recip(p, s, n);
  case S_FV_TEXT: return st_fv_text(p, s, n);
  case S_FV_AFTER: return st_fv_after(p, s, n);
  }
  return err_set(ERR_INTERNAL, "outparse: bad state %d", (int)p->state);
}

static int drive(outparse *p) {
  for (;;) {
    const char *s = p->in.data ? p->in.data + p->pos : "";
    size_t n = p->in.len - p->pos;
    if (!p->eof) n -= utf8_tail(s, n);
    size_t old_pos = p->pos;
    enum state old_state = p->state;
    int rc = step(p, s, n);
    if (rc < 0) {
      p->err = rc;
      return rc;
    }
    if (p->pos == old_pos && p->state == old_state) break;
  }
  if (p->pos > 0) {
    memmove(p->in.data, p->in.data + p->pos, p->in.len - p->pos);
    p->in.len -= p->pos;
    p->in.data[p->in.len] = '\0';
    p->pos = 0;
  }
  return 0;
}

/* ---------- public API ---------- */

const char *outparse_format_name(enum outparse_format f) {
  return (unsigned)f < OUTPARSE_FORMAT_COUNT_ ? FORMATS[f].name : "unknown";
}

int outparse_new(const outparse_config *cfg, outparse_emit_fn emit, void *ctx, outparse **out) {
  *out = NULL;
  if (!cfg || !emit || (unsigned)cfg->format >= OUTPARSE_FORMAT_COUNT_)
    return err_set(ERR_INVALID, "outparse: unknown output format %d", cfg ? (int)cfg->format : -1);
  bool has_open = cfg->think_open && cfg->think_open[0];
  bool has_close = cfg->think_close && cfg->think_close[0];
  if (has_open != has_close)
    return err_set(ERR_INVALID, "outparse: think_open and think_close must be given together");
  outparse *p = calloc(1, sizeof *p);
  if (!p) return ERR_NOMEM;
  p->cfg = *cfg;
  p->emit = emit;
  p->ctx = ctx;
  if (has_open && cfg->format != OUTPARSE_HARMONY) {
    p->think_open = str_dup(cfg->think_open);
    p->think_close = str_dup(cfg->think_close);
    if (!p->think_open || !p->think_close) {
      outparse_free(p);
      return ERR_NOMEM;
    }
  }
  p->cfg.think_open = p->think_open;
  p->cfg.think_close = p->think_close;
  const struct marker *mk = FORMATS[cfg->format].markers;
  for (size_t i = 0; i < FORMATS[cfg->format].n_markers; i++) {
    if (!cfg->tools_enabled && !mk[i].always) continue;
    p->mk_text[p->n_mk] = mk[i].text;
    p->mk_action[p->n_mk++] = mk[i].action;
  }
  p->state = p->think_open ? (cfg->starts_in_reasoning ? S_REASON_OPEN : S_START) : S_ANSWER_START;
  *out = p;
  return 0;
}

int outparse_feed(outparse *p, const char *text, size_t len) {
  if (p->err) return p->err;
  if (p->eof) return err_set(ERR_INVALID, "outparse_feed after outparse_finish");
  if (len == 0) return 0;
  int rc = buf_append(&p->in, text, len);
  if (rc) return p->err = rc;
  return drive(p);
}

int outparse_finish(outparse *p) {
  if (p->err) return p->err;
  if (p->eof) return 0;
  p->eof = true;
  int rc = drive(p);
  if (rc) return rc;
  if (p->state == S_CODE) {
    if ((rc = code_end(p))) return p->err = rc;
  } else if (p->call_active) {
    return p->err = err_set(ERR_PARSE, "tool call %d (%s): output ended inside the call",
                            p->call_index, call_label(p));
  } else if (p->state == S_MI_NAME || p->state == S_MI_CALLID || p->state == S_DS_HEAD ||
             p->state == S_FN_NAME || p->state == S_H_HEAD ||
             (p->state == S_DS_AFTER_SEP)) {
    return p->err = err_set(ERR_PARSE, "output ended inside a tool-call header (%s format)",
                            outparse_format_name(p->cfg.format));
  }
  return 0;
}

size_t outparse_held(const outparse *p) {
  return p->in.len - p->pos + p->tmp.len + p->pending.len + p->co_name.len;
}

void outparse_free(outparse *p) {
  if (!p) return;
  free(p->think_open);
  free(p->think_close);
  buf_free(&p->in);
  buf_free(&p->pending);
  buf_free(&p->co_name);
  buf_free(&p->tmp);
  free(p);
}
