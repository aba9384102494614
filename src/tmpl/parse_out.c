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
 * This file is the core: configuration, hold-back primitives, the reasoning
 * block and answer text, and the API. When answer text meets a tool-call
 * marker, the tool-call states in parse_calls.c take over (op_step_call);
 * the state struct is in parse_int.h.
 *
 * Invariants: `pos` <= in.len; events never carry bytes that a later byte
 * could reinterpret. At eof (outparse_finish) every state resolves what it
 * holds: partial markers become text, except a closing marker cut right
 * after a complete call (parse_calls.c st_expect), which is dropped.
 *
 * Start reading at outparse_feed -> drive -> step; one state per case.
 */
#include "tmpl/outparse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"
#include "tmpl/parse_int.h"


struct marker {
  const char *text;
  enum op_action action;
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
static const struct marker MK_KIMI[] = {{"<|tool_calls_section_begin|>", A_DS_CALLS, false},
                                        {"<|tool_call_begin|>", A_DS_CALL, false}};
static const struct marker MK_COMMAND[] = {{"<|START_ACTION|>", A_LIST, false},
                                           {"<|END_ACTION|>", A_DROP, false},
                                           {"<|START_RESPONSE|>", A_DROP, true},
                                           {"<|END_RESPONSE|>", A_DROP, true}};
static const struct marker MK_QWEN3_CODER[] = {{"<tool_call>", A_QXML, false}};
static const struct marker MK_GLM[] = {{"<tool_call>", A_GLM, false}};
static const struct marker MK_SEED[] = {{"<seed:tool_call>", A_QXML, false}};
static const struct marker MK_MINIMAX[] = {{"<tool_calls>", A_JSONL, false}};
static const struct marker MK_LFM2[] = {{"<|tool_call_start|>", A_PYLIST, false}};
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
    [OUTPARSE_KIMI_K2] = {"kimi-k2", MK_KIMI, ARRAY_LEN(MK_KIMI)},
    [OUTPARSE_COMMAND_R7B] = {"command-r7b", MK_COMMAND, ARRAY_LEN(MK_COMMAND)},
    [OUTPARSE_QWEN3_CODER] = {"qwen3-coder", MK_QWEN3_CODER, ARRAY_LEN(MK_QWEN3_CODER)},
    [OUTPARSE_GLM] = {"glm", MK_GLM, ARRAY_LEN(MK_GLM)},
    [OUTPARSE_SEED_OSS] = {"seed-oss", MK_SEED, ARRAY_LEN(MK_SEED)},
    [OUTPARSE_MINIMAX_M1] = {"minimax-m1", MK_MINIMAX, ARRAY_LEN(MK_MINIMAX)},
    [OUTPARSE_LFM2] = {"lfm2", MK_LFM2, ARRAY_LEN(MK_LFM2)},
};

/* ---------- small helpers ---------- */

bool op_is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t op_ws_len(const char *s, size_t n) {
  size_t i = 0;
  while (i < n && op_is_ws(s[i])) i++;
  return i;
}

/* Does s[0..n) start with lit (FULL), could it with more input (PARTIAL;
 * also when n == 0), or not (NONE)? At eof PARTIAL becomes NONE. */
int op_match_at(const outparse *p, const char *s, size_t n, const char *lit) {
  size_t l = strlen(lit);
  if (n >= l) return memcmp(s, lit, l) == 0 ? MATCH_FULL : MATCH_NONE;
  if (n > 0 && memcmp(s, lit, n) != 0) return MATCH_NONE;
  return p->eof ? MATCH_NONE : MATCH_PARTIAL;
}

/* Index of the first byte where one of mk starts (*which = its index) or
 * where the rest of s is a proper prefix of one (*which = -1; not at eof);
 * n when neither. */
size_t op_scan_markers(const outparse *p, const char *s, size_t n, const char *const *mk,
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

void op_consume(outparse *p, size_t n) { p->pos += n; }

void op_emit_text(outparse *p, enum outparse_event_kind kind, const char *s, size_t n) {
  if (n == 0 || (kind == OUTPARSE_REASONING && p->cfg.hide_reasoning)) return;
  outparse_event ev = {kind, -1, s, n, NULL, NULL};
  p->emit(p->ctx, &ev);
}

void op_emit_call(outparse *p, enum outparse_event_kind kind, const char *s, size_t n) {
  outparse_event ev = {kind, p->call_index, s, n, p->call_name, p->call_id};
  p->emit(p->ctx, &ev);
}

/* ---------- states ---------- */

/* Emits text of `kind` up to the first marker. Returns the marker's index
 * (consumed) or -1 when none is complete (the rest is held, or emitted at eof). */
int op_text_until(outparse *p, const char *s, size_t n, enum outparse_event_kind kind,
                  const char *const *mk, size_t n_mk) {
  int which;
  size_t i = op_scan_markers(p, s, n, mk, n_mk, &which);
  op_emit_text(p, kind, s, i);
  op_consume(p, i);
  if (which < 0) return -1;
  op_consume(p, strlen(mk[which]));
  return which;
}

/* Reads bytes until one of mk into tmp (bounded). Returns the marker index
 * (consumed), -1 to wait. */
int op_head_until(outparse *p, const char *s, size_t n, const char *const *mk, size_t n_mk,
                  int *rc) {
  int which;
  size_t i = op_scan_markers(p, s, n, mk, n_mk, &which);
  *rc = 0;
  if (p->tmp.len + i > HEAD_MAX) {
    *rc = err_set(ERR_PARSE, "tool call header longer than %d bytes (no %s)", HEAD_MAX, mk[0]);
    return -1;
  }
  if ((*rc = buf_append(&p->tmp, s, i))) return -1;
  op_consume(p, i);
  if (which < 0) return -1;
  op_consume(p, strlen(mk[which]));
  return which;
}

/* Reasoning until think_close. A whitespace run is held until something
 * other than whitespace follows (then it is emitted), or think_close or the
 * end of output does (then it is dropped: reasoning ends without trailing
 * whitespace, as llama.cpp strips it). A run longer than WS_MAX is emitted
 * whole instead, which bounds what is held and keeps the result independent
 * of how the text was split. */
static int st_reason(outparse *p, const char *s, size_t n) {
  const char *mk = p->think_close;
  int which;
  size_t i = op_scan_markers(p, s, n, &mk, 1, &which);
  size_t t = 0;
  while (t < i && op_is_ws(s[i - 1 - t])) t++;
  bool is_long = (t == i && p->reason_ws_long) || t > WS_MAX;
  size_t out = i;
  if (which >= 0) {
    if (!is_long) out = i - t;
    op_emit_text(p, OUTPARSE_REASONING, s, out);
    op_consume(p, i + strlen(mk));
    p->reason_ws_long = false;
    p->state = S_AFTER_THINK;
    return 0;
  }
  /* no think_close yet: hold a short trailing run (dropped at eof, as at think_close) */
  if (!is_long) out = i - t;
  op_emit_text(p, OUTPARSE_REASONING, s, out);
  op_consume(p, p->eof ? i : out);
  if (i > 0) p->reason_ws_long = out == i && t > 0 && is_long;
  return 0;
}

static int st_start(outparse *p, const char *s, size_t n) {
  size_t w = op_ws_len(s, n);
  if (p->think_open && w <= WS_MAX) {
    int m = op_match_at(p, s + w, n - w, p->think_open);
    if (m == MATCH_FULL) {
      op_consume(p, w + strlen(p->think_open));
      p->state = S_REASON_WS;
      return 0;
    }
    if (m == MATCH_PARTIAL) return 0;
  }
  p->state = S_ANSWER_START;
  return 0;
}

static int st_reason_open(outparse *p, const char *s, size_t n) {
  size_t w = op_ws_len(s, n);
  if (w <= WS_MAX) {
    int m = op_match_at(p, s + w, n - w, p->think_open);
    if (m == MATCH_FULL) op_consume(p, w + strlen(p->think_open));
    else if (m == MATCH_PARTIAL) return 0;
  }
  p->state = S_REASON_WS;
  return 0;
}

/* Skips whitespace; moves to next once something else shows up. */
static void skip_ws_then(outparse *p, const char *s, size_t n, enum op_state next) {
  size_t w = op_ws_len(s, n);
  op_consume(p, w);
  if (w < n) p->state = next;
}

static int st_answer_start(outparse *p, const char *s, size_t n) {
  switch (p->cfg.format) {
  case OUTPARSE_LLAMA3:
    if (p->cfg.tools_enabled) {
      size_t w = op_ws_len(s, n);
      if (w == n && !p->eof && w <= WS_MAX) return 0;
      if (w < n && s[w] == '{') {
        op_consume(p, w);
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
  int k = op_text_until(p, s, n, OUTPARSE_TEXT, p->mk_text, p->n_mk);
  if (k < 0) return 0;
  int rc;
  switch (p->mk_action[k]) {
  case A_DROP:
    return 0;
  case A_HERMES:
    if ((rc = op_call_open(p))) return rc;
    p->state = S_CALLOBJ;
    p->after = S_EXPECT;
    p->expect = "</tool_call>";
    p->expect_next = S_SKIP_WS;
    return 0;
  case A_QXML:
    p->after = S_EXPECT; /* for a JSON object instead of <function=...> */
    p->expect = p->cfg.format == OUTPARSE_SEED_OSS ? "</seed:tool_call>" : "</tool_call>";
    p->expect_next = S_SKIP_WS;
    p->state = S_QX_START;
    return 0;
  case A_JSONL:
    p->state = S_JL_ITEM;
    return 0;
  case A_GLM:
    buf_reset(&p->tmp);
    p->state = S_GL_NAME;
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
  case A_PYLIST:
    p->state = S_PL_START;
    return 0;
  case A_FUNC:
    buf_reset(&p->tmp);
    p->state = S_FN_NAME;
    return 0;
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
  default: return op_step_call(p, s, n);
  }
  return err_set(ERR_INTERNAL, "outparse: bad state %d", (int)p->state);
}

static int drive(outparse *p) {
  for (;;) {
    const char *s = p->in.data ? p->in.data + p->pos : "";
    size_t n = p->in.len - p->pos;
    if (!p->eof) n -= utf8_tail(s, n);
    size_t old_pos = p->pos;
    enum op_state old_state = p->state;
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

int outparse_format_from_name(const char *name, enum outparse_format *out) {
  for (int f = 0; name && f < OUTPARSE_FORMAT_COUNT_; f++) {
    if (!strcasecmp(name, FORMATS[f].name)) {
      *out = (enum outparse_format)f;
      return 0;
    }
  }
  return err_set(ERR_NOT_FOUND, "unknown output format \"%s\"", name ? name : "(null)");
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
    if (p->n_mk == ARRAY_LEN(p->mk_text)) break; /* the tables above hold at most 4 */
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
    if ((rc = op_code_end(p))) return p->err = rc;
  } else if (p->call_active) {
    return p->err = err_set(ERR_PARSE, "tool call %d (%s): output ended inside the call",
                            p->call_index, op_call_label(p));
  } else if (p->state == S_MI_NAME || p->state == S_MI_CALLID || p->state == S_DS_HEAD ||
             p->state == S_FN_NAME || p->state == S_H_HEAD || p->state == S_PL_START ||
             p->state == S_PL_NAME || p->state == S_PL_SEP ||
             (p->state == S_DS_AFTER_SEP)) {
    return p->err = err_set(ERR_PARSE, "output ended inside a tool-call header (%s format)",
                            outparse_format_name(p->cfg.format));
  }
  return 0;
}

bool outparse_in_tool_call(const outparse *p) { return p->call_active; }

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
