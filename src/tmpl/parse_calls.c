/*
 * parse_calls.c - the tool-call half of the output parsers: the open call
 * (BEGIN with a fresh id, ARGS fragments, END) and one state function per
 * piece of each family's tool-call syntax (see the table in docs/text.md,
 * "Output parsers"). The core (parse_out.c) hands over when it meets a
 * tool-call marker in answer text; each state here consumes what it is sure
 * of, streams argument bytes as jscan (parse_json.c) accepts them, and sets
 * p->state back to a text state when the call is over.
 *
 * Invariants: a call is open (call_active) exactly between op_call_open and
 * op_call_close; BEGIN is emitted once the name is known, never before;
 * bytes of the arguments are emitted in order and only once.
 * Start reading at op_step_call (the dispatch, at the end), then
 * st_callobj (the JSON call object that most formats use).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"
#include "tmpl/outparse.h"
#include "tmpl/parse_int.h"

/* Formats with a section of calls, each "begin HEAD sep ARGS end": DeepSeek
 * (HEAD is the name, V3.1, or "function" with the name after sep, R1) and
 * Kimi K2 (HEAD is "functions.NAME:INDEX"). */
struct sectioned {
  const char *call_begin, *sep, *call_end, *calls_end;
  bool kimi_ids;
};
static const struct sectioned SEC_DEEPSEEK = {"<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                                              "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", false};
static const struct sectioned SEC_KIMI = {"<|tool_call_begin|>", "<|tool_call_argument_begin|>",
                                          "<|tool_call_end|>", "<|tool_calls_section_end|>", true};

static const struct sectioned *sec_of(const outparse *p) {
  return p->cfg.format == OUTPARSE_KIMI_K2 ? &SEC_KIMI : &SEC_DEEPSEEK;
}

/* Harmony content markers, in the order h_text tests their index. */
static const char *const H_CONTENT_MK[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>",
                                           "<|channel|>"};

/* ---------- tool calls ---------- */

int op_call_open(outparse *p) {
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
  p->args_str = false;
  return 0;
}

const char *op_call_label(const outparse *p) {
  return p->call_name[0] ? p->call_name : "(unnamed)";
}

/* A name is UTF-8 without control characters (it goes into JSON and logs). */
static bool name_ok(const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (l == 0 || i + l > n || (l == 1 && (c < 0x20 || c == 0x7f))) return false;
    for (size_t k = 1; k < l; k++)
      if (((unsigned char)s[i + k] & 0xC0) != 0x80) return false;
    i += l;
  }
  return true;
}

int op_call_set_name(outparse *p, const char *name, size_t n) {
  while (n > 0 && op_is_ws(*name)) name++, n--;
  while (n > 0 && op_is_ws(name[n - 1])) n--;
  if (n == 0) return err_set(ERR_PARSE, "tool call %d: empty function name", p->call_index);
  if (n > NAME_MAX_)
    return err_set(ERR_PARSE, "tool call %d: function name longer than %d bytes", p->call_index,
                   NAME_MAX_);
  if (!name_ok(name, n))
    return err_set(ERR_PARSE, "tool call %d: the function name is not valid UTF-8 text", p->call_index);
  if (p->call_begun)
    return err_set(ERR_PARSE, "tool call %d (%s): a second \"name\"", p->call_index, p->call_name);
  memcpy(p->call_name, name, n);
  p->call_name[n] = '\0';
  p->call_begun = true;
  op_emit_call(p, OUTPARSE_TOOL_CALL_BEGIN, NULL, 0);
  if (p->pending.len) op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, p->pending.data, p->pending.len);
  buf_reset(&p->pending);
  return 0;
}

int op_call_args(outparse *p, const char *s, size_t n) {
  if (n == 0) return 0;
  p->call_has_args = true;
  if (p->call_begun) {
    op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, s, n);
    return 0;
  }
  if (p->pending.len + n > PENDING_MAX)
    return err_set(ERR_TOO_LARGE, "tool call %d: more than %u bytes of arguments before its name",
                   p->call_index, PENDING_MAX);
  return buf_append(&p->pending, s, n);
}

int op_call_close(outparse *p) {
  if (!p->call_begun) return err_set(ERR_PARSE, "tool call %d has no \"name\"", p->call_index);
  if (!p->call_has_args) op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "{}", 2);
  op_emit_call(p, OUTPARSE_TOOL_CALL_END, NULL, 0);
  p->call_active = false;
  return 0;
}

int op_json_error(outparse *p, const char *what) {
  return err_set(ERR_PARSE, "tool call %d (%s): invalid JSON in %s at byte %zu: %s",
                 p->call_index, op_call_label(p), what, p->js.off, jscan_expected(&p->js));
}

/* Emits text as the body of a JSON string (escaped), in fragments that never split a character. */
int op_json_str_emit(outparse *p, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  char out[288];
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (o >= 256 && (c & 0xC0) != 0x80) { /* flush between characters only */
      op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, out, o);
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
  if (o) op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, out, o);
  return 0;
}

/* The open call becomes a code call: {"code":"<escaped text>"}. */
int op_code_begin(outparse *p, const char *term, enum op_state next) {
  if (!p->call_begun) {
    int rc = op_call_set_name(p, "python", 6);
    if (rc) return rc;
  }
  p->call_has_args = true;
  op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "{\"code\":\"", 9);
  p->code_term = term;
  p->code_next = next;
  p->state = S_CODE;
  return 0;
}

int op_code_end(outparse *p) {
  op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "\"}", 2);
  return op_call_close(p);
}

/* Arguments given as a JSON string (whose body is in p->tmp): decoded, they
 * are the arguments' JSON text. */
static int args_string_done(outparse *p) {
  size_t cap = p->tmp.len + 1;
  char *dec = malloc(cap);
  if (!dec) return ERR_NOMEM;
  bool ok = json_unescape(p->tmp.data ? p->tmp.data : "", p->tmp.len, dec, cap);
  int rc = ok ? op_call_args(p, dec, strlen(dec)) : 0;
  free(dec);
  if (!ok) return err_set(ERR_PARSE, "tool call %d: bad escape in the arguments string", p->call_index);
  p->call_has_args = true;
  return rc;
}

static int args_string_byte(outparse *p, char c) {
  if (p->tmp.len >= PENDING_MAX)
    return err_set(ERR_TOO_LARGE, "tool call %d: arguments string longer than %u bytes",
                   p->call_index, PENDING_MAX);
  return buf_append_byte(&p->tmp, c);
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
      if (run != SIZE_MAX && (rc = op_call_args(p, s + run, i - run))) return rc;
      op_consume(p, i);
      if (f & JF_TOODEEP)
        return err_set(ERR_TOO_LARGE, "tool call %d (%s): arguments nested deeper than %d",
                       p->call_index, op_call_label(p), JSCAN_MAX_DEPTH);
      return op_json_error(p, "the call object");
    }
    if ((f & JF_NUMEND) && nd == 1 && p->co_mode == M_ARGS) {
      if ((rc = op_call_args(p, s + run, i - run))) return rc;
      run = SIZE_MAX;
      p->co_mode = M_NONE;
    }
    if ((f & JF_VSTART) && vd == 0 && c != '{') {
      p->js.why = "a tool call must be a JSON object";
      return op_json_error(p, "the call object");
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
      if ((l == 4 && !memcmp(p->co_keybuf, "name", 4)) ||
          (l == 9 && !memcmp(p->co_keybuf, "tool_name", 9))) /* Command R7B */
        p->co_key = K_NAME;
      else if ((l == 9 && !memcmp(p->co_keybuf, "arguments", 9)) ||
               (l == 10 && !memcmp(p->co_keybuf, "parameters", 10)))
        p->co_key = K_ARGS;
    }
    if ((f & JF_VSTART) && vd == 1) {
      if (p->co_key == K_NAME) {
        if (c != '"') {
          op_consume(p, i);
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
          op_consume(p, i);
          return err_set(ERR_PARSE, "tool call %d: function name longer than %d bytes",
                         p->call_index, NAME_MAX_);
        }
        if ((rc = buf_append_byte(&p->co_name, (char)c))) return rc;
      } else if (p->co_mode == M_ARGSTR) {
        if ((rc = args_string_byte(p, (char)c))) return rc;
      }
    }
    if ((f & JF_VEND) && vd == 1) {
      if (p->co_mode == M_NAME) {
        char name[NAME_MAX_ + 1];
        op_consume(p, i + 1);
        if (!json_unescape(p->co_name.data ? p->co_name.data : "", p->co_name.len, name, sizeof name))
          return err_set(ERR_PARSE, "tool call %d: bad function name string", p->call_index);
        buf_reset(&p->co_name);
        if ((rc = op_call_set_name(p, name, strlen(name)))) return rc;
        p->co_mode = M_NONE;
        return 0; /* the rest on the next step, with s relative to the new pos */
      }
      if (p->co_mode == M_ARGS) {
        if ((rc = op_call_args(p, s + run, i + 1 - run))) return rc;
        run = SIZE_MAX;
        p->co_mode = M_NONE;
      } else if (p->co_mode == M_ARGSTR) {
        if ((rc = args_string_done(p))) return rc;
        p->co_mode = M_NONE;
      }
    }
    if (f & JF_DONE) {
      op_consume(p, i + 1);
      if ((rc = op_call_close(p))) return rc;
      p->state = p->after;
      return 0;
    }
  }
  if (run != SIZE_MAX && (rc = op_call_args(p, s + run, n - run))) return rc;
  op_consume(p, n);
  return 0;
}

/* The arguments object alone, streamed from '{' to '}'. */
static int st_args_obj(outparse *p, const char *s, size_t n) {
  size_t run = p->js.depth > 0 ? 0 : SIZE_MAX;
  int rc;
  if (p->js.off == 0) { /* leading whitespace is not part of the arguments */
    size_t w = op_ws_len(s, n);
    op_consume(p, w);
    s += w, n -= w;
    if (n == 0) return 0;
    if (s[0] == '"') { /* arguments as a JSON string, as some templates write them */
      p->args_str = true;
      buf_reset(&p->tmp);
    } else if (s[0] != '{') {
      if (p->code_ok) return op_code_begin(p, p->code_term, p->code_next);
      p->js.off = 1;
      p->js.why = "expected '{' to open the arguments object";
      return op_json_error(p, "the arguments");
    }
  }
  if (p->args_str) {
    for (size_t i = 0; i < n; i++) {
      unsigned f = jscan_byte(&p->js, (unsigned char)s[i], NULL, NULL);
      if (f & JF_ERR) {
        op_consume(p, i);
        return op_json_error(p, "the arguments string");
      }
      if ((f & JF_STRBODY) && (rc = args_string_byte(p, s[i]))) return rc;
      if (f & JF_DONE) {
        op_consume(p, i + 1);
        if ((rc = args_string_done(p)) || (rc = op_call_close(p))) return rc;
        p->state = p->after;
        return 0;
      }
    }
    op_consume(p, n);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    int vd = -1;
    unsigned f = jscan_byte(&p->js, c, &vd, NULL);
    if (f & JF_ERR) {
      if (run != SIZE_MAX && (rc = op_call_args(p, s + run, i - run))) return rc;
      op_consume(p, i);
      if (f & JF_TOODEEP)
        return err_set(ERR_TOO_LARGE, "tool call %d (%s): arguments nested deeper than %d",
                       p->call_index, op_call_label(p), JSCAN_MAX_DEPTH);
      return op_json_error(p, "the arguments");
    }
    if (f & JF_VSTART && vd == 0) run = i;
    if (f & JF_DONE) {
      if ((rc = op_call_args(p, s + run, i + 1 - run))) return rc;
      op_consume(p, i + 1);
      if ((rc = op_call_close(p))) return rc;
      p->state = p->after;
      return 0;
    }
  }
  if (run != SIZE_MAX && (rc = op_call_args(p, s + run, n - run))) return rc;
  op_consume(p, n);
  return 0;
}

static int st_code(outparse *p, const char *s, size_t n) {
  int which = -1;
  size_t i = n;
  if (p->code_term) i = op_scan_markers(p, s, n, &p->code_term, 1, &which);
  int rc = op_json_str_emit(p, s, i);
  if (rc) return rc;
  op_consume(p, i);
  if (which < 0) return 0;
  op_consume(p, strlen(p->code_term));
  if ((rc = op_code_end(p))) return rc;
  p->state = p->code_next;
  return 0;
}

static int st_expect(outparse *p, const char *s, size_t n) {
  size_t w = op_ws_len(s, n);
  int m = op_match_at(p, s + w, n - w, p->expect);
  if (m == MATCH_FULL) {
    op_consume(p, w + strlen(p->expect));
    p->state = p->expect_next;
  } else if (m == MATCH_NONE) {
    size_t k = strlen(p->expect);
    if (p->eof && n - w < k && memcmp(s + w, p->expect, n - w) == 0) {
      /* The output was cut inside the closing marker (max_tokens): the call
       * is complete, and "</tool_c" is no answer text. */
      op_consume(p, n);
      p->state = p->expect_next;
      return 0;
    }
    /* Lenient: the call is complete; whatever follows is text. */
    if (w < n || p->eof) {
      op_consume(p, w);
      p->state = S_TEXT;
    }
  }
  return 0;
}

static int st_arr(outparse *p, const char *s, size_t n) {
  size_t w = op_ws_len(s, n);
  op_consume(p, w);
  if (w == n) return 0;
  char c = s[w];
  int rc;
  if (p->state == S_ARR_START) {
    if (c == '[') {
      op_consume(p, 1);
      p->state = S_ARR_ITEM;
      return 0;
    }
    if (c == '{') {
      if ((rc = op_call_open(p))) return rc;
      p->after = S_SKIP_WS;
      p->state = S_CALLOBJ;
      return 0;
    }
    return err_set(ERR_PARSE, "tool calls: expected '[' after the tool-call marker, got byte 0x%02x",
                   (unsigned char)c);
  }
  if (p->state == S_ARR_ITEM && c == '{') {
    if ((rc = op_call_open(p))) return rc;
    p->after = S_ARR_SEP;
    p->state = S_CALLOBJ;
    return 0;
  }
  if (p->state == S_ARR_SEP && c == ',') {
    op_consume(p, 1);
    p->state = S_ARR_ITEM;
    return 0;
  }
  if (c == ']') {
    op_consume(p, 1);
    p->state = S_SKIP_WS;
    return 0;
  }
  return err_set(ERR_PARSE, "tool calls: expected %s in the list of calls, got byte 0x%02x",
                 p->state == S_ARR_ITEM ? "'{' or ']'" : "',' or ']'", (unsigned char)c);
}

/* Llama 3: a '{' at the start of the answer is a tool call when its members
 * begin the way Llama's template writes a call (and llama.cpp recognizes
 * one): optionally "type": "function", then "name": "<string>", then
 * "parameters" (or "arguments"). Anything else is text. The object is only
 * looked at here (at most PROBE_MAX bytes); S_CALLOBJ parses it from the
 * start. */
static bool key_is(const char *key, size_t kl, const char *want) {
  return kl == strlen(want) && !memcmp(key, want, kl);
}

static int st_l3_probe(outparse *p, const char *s, size_t n) {
  jscan js;
  jscan_init(&js);
  char key[KEY_MAX + 1], val[KEY_MAX + 1];
  size_t kl = 0, vl = 0;
  bool inkey = false, inval = false;
  int step = 0;    /* members matched so far: 0 none, 1 type, 2 name */
  int verdict = 0; /* 1 call, -1 text */
  size_t i;
  for (i = 0; i < n && i < PROBE_MAX && !verdict; i++) {
    int vd = -1;
    unsigned char c = (unsigned char)s[i];
    unsigned f = jscan_byte(&js, c, &vd, NULL);
    if (f & (JF_ERR | JF_DONE)) {
      verdict = -1;
    } else if ((f & JF_KSTART) && vd == 1) {
      inkey = true, kl = 0;
    } else if ((inkey || inval) && (f & JF_STRBODY)) {
      size_t *l = inkey ? &kl : &vl;
      if (*l < KEY_MAX) (inkey ? key : val)[*l] = (char)c;
      (*l)++;
    } else if (inkey && (f & JF_KEND)) {
      inkey = false;
      if (step < 2 && key_is(key, kl, "name")) step = 2;
      else if (step == 0 && key_is(key, kl, "type")) step = 1;
      else if (step == 2 && (key_is(key, kl, "parameters") || key_is(key, kl, "arguments"))) verdict = 1;
      else verdict = -1;
    } else if ((f & JF_VSTART) && vd == 1) {
      if (c != '"') verdict = -1; /* "type" and "name" take strings */
      inval = true, vl = 0;
    } else if (inval && (f & JF_VEND) && vd == 1) {
      inval = false;
      if (step == 1 && !key_is(val, vl, "function")) verdict = -1;
    }
  }
  if (!verdict && (p->eof || i >= PROBE_MAX)) verdict = -1;
  if (verdict > 0) {
    int rc = op_call_open(p);
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
  while (w < n && (op_is_ws(s[w]) || s[w] == ';')) w++;
  op_consume(p, w);
  if (w == n) return 0;
  p->state = s[w] == '{' ? S_L3_PROBE : S_TEXT;
  return 0;
}

/* Is s a Llama 3 built-in tool call, `name.call(`? MATCH_FULL with the name's
 * length in *name_len, MATCH_PARTIAL to wait, MATCH_NONE. */
static int bi_peek(const outparse *p, const char *s, size_t n, size_t *name_len) {
  size_t i = 0;
  while (i < n && i <= WS_MAX && op_ident_char(s[i], i == 0)) i++;
  if (i == 0 || i > WS_MAX) return MATCH_NONE;
  if (i == n) return p->eof ? MATCH_NONE : MATCH_PARTIAL;
  *name_len = i;
  return op_match_at(p, s + i, n - i, ".call(");
}

static int st_py_start(outparse *p, const char *s, size_t n) {
  size_t w = op_ws_len(s, n);
  op_consume(p, w);
  if (w == n) return 0;
  s += w, n -= w;
  size_t nl = 0;
  int m = s[0] == '{' ? MATCH_NONE : bi_peek(p, s, n, &nl);
  if (m == MATCH_PARTIAL) return 0;
  int rc = op_call_open(p);
  if (rc) return rc;
  if (s[0] == '{') {
    p->after = p->cfg.format == OUTPARSE_LLAMA3 ? S_L3_AFTER : S_SKIP_WS;
    p->state = S_CALLOBJ;
    return 0;
  }
  if (m == MATCH_FULL && p->cfg.format == OUTPARSE_LLAMA3) {
    /* brave_search.call(query="x") -> brave_search {"query": "x"} */
    op_consume(p, nl + 6);
    return op_py_call_begin(p, s, nl);
  }
  return op_code_begin(p, "<|eom_id|>", S_SKIP_WS); /* Llama's end-of-message token, if fed */
}

static int st_mi_start(outparse *p, const char *s, size_t n) {
  size_t w = op_ws_len(s, n);
  op_consume(p, w);
  if (w == n) return 0;
  if (s[w] == '[') {
    p->state = S_ARR_START;
    return 0;
  }
  int rc = op_call_open(p);
  if (rc) return rc;
  buf_reset(&p->tmp);
  p->state = S_MI_NAME;
  return 0;
}

static int st_mi_name(outparse *p, const char *s, size_t n) {
  static const char *const mk[] = {"[ARGS]", "[CALL_ID]"};
  int rc;
  int k = op_head_until(p, s, n, mk, p->state == S_MI_NAME ? 2 : 1, &rc); /* mk[0] ends an id */
  if (rc) return rc;
  if (k < 0) return 0;
  if (p->state == S_MI_NAME) {
    if ((rc = op_call_set_name(p, p->tmp.data ? p->tmp.data : "", p->tmp.len))) return rc;
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
  const struct sectioned *sec = sec_of(p);
  size_t w = op_ws_len(s, n);
  int m1 = op_match_at(p, s + w, n - w, sec->call_begin);
  int m2 = op_match_at(p, s + w, n - w, sec->calls_end);
  if (m1 == MATCH_FULL) {
    op_consume(p, w + strlen(sec->call_begin));
    buf_reset(&p->tmp);
    p->state = S_DS_HEAD;
  } else if (m2 == MATCH_FULL) {
    op_consume(p, w + strlen(sec->calls_end));
    p->state = S_SKIP_WS;
  } else if (m1 == MATCH_NONE && m2 == MATCH_NONE) {
    op_consume(p, w);
    if (w < n) p->state = S_TEXT;
  }
  return 0;
}

static int st_ds_head(outparse *p, const char *s, size_t n) {
  const char *mk[] = {sec_of(p)->sep};
  int rc;
  int k = op_head_until(p, s, n, mk, 1, &rc);
  if (rc) return rc;
  if (k >= 0) p->state = S_DS_AFTER_SEP;
  return 0;
}

/* Kimi's call id "functions.get_weather:0" names get_weather. */
static void kimi_name(const char **name, size_t *n) {
  const char *s = *name;
  size_t l = *n;
  while (l > 0 && op_is_ws(*s)) s++, l--;
  while (l > 0 && op_is_ws(s[l - 1])) l--;
  if (l > 10 && !memcmp(s, "functions.", 10)) s += 10, l -= 10;
  size_t colon = l;
  while (colon > 0 && s[colon - 1] >= '0' && s[colon - 1] <= '9') colon--;
  if (colon > 0 && colon < l && s[colon - 1] == ':') l = colon - 1;
  *name = s;
  *n = l;
}

static int st_ds_after_sep(outparse *p, const char *s, size_t n) {
  const struct sectioned *sec = sec_of(p);
  size_t w = op_ws_len(s, n);
  if (w == n) return 0;
  int rc = op_call_open(p);
  if (rc) return rc;
  if (s[w] == '{' || sec->kimi_ids) { /* V3.1 and Kimi: name<sep>{args} */
    const char *name = p->tmp.data ? p->tmp.data : "";
    size_t nl = p->tmp.len;
    if (sec->kimi_ids) kimi_name(&name, &nl);
    op_consume(p, w);
    if ((rc = op_call_set_name(p, name, nl))) return rc;
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
  int k = op_head_until(p, s, n, mk, 1, &rc);
  if (rc) return rc;
  if (k < 0) return 0;
  if ((rc = op_call_set_name(p, p->tmp.data ? p->tmp.data : "", p->tmp.len))) return rc;
  p->state = S_DS_FENCE;
  return 0;
}

static int st_ds_fence(outparse *p, const char *s, size_t n) {
  size_t w = op_ws_len(s, n);
  if (w == n) {
    op_consume(p, w);
    return 0;
  }
  int m = op_match_at(p, s + w, n - w, "```json");
  if (m == MATCH_PARTIAL) return 0;
  if (m == MATCH_FULL) w += 7;
  else if (op_match_at(p, s + w, n - w, "```") == MATCH_FULL) w += 3;
  op_consume(p, w);
  p->after = S_DS_CLOSE;
  p->state = S_ARGS_OBJ;
  return 0;
}

static int st_ds_close(outparse *p, const char *s, size_t n) {
  size_t w = op_ws_len(s, n);
  int m = op_match_at(p, s + w, n - w, "```");
  if (m == MATCH_PARTIAL && w < n) return 0;
  if (m == MATCH_FULL) {
    w += 3;
    w += op_ws_len(s + w, n - w);
  }
  const char *call_end = sec_of(p)->call_end;
  m = op_match_at(p, s + w, n - w, call_end);
  if (m == MATCH_FULL) {
    op_consume(p, w + strlen(call_end));
    p->state = S_DS_CALLS;
  } else if (m == MATCH_NONE) {
    op_consume(p, w);
    if (w < n || p->eof) p->state = S_TEXT;
  }
  return 0;
}

/* MiniMax-M1: <tool_calls> then one call object per line, then </tool_calls>. */
static int st_jl_item(outparse *p, const char *s, size_t n) {
  size_t w = op_ws_len(s, n);
  if (w < n && s[w] == '{') {
    op_consume(p, w);
    int rc = op_call_open(p);
    if (rc) return rc;
    p->after = S_JL_ITEM;
    p->state = S_CALLOBJ;
    return 0;
  }
  int m = op_match_at(p, s + w, n - w, "</tool_calls>");
  if (m == MATCH_FULL) {
    op_consume(p, w + 13);
    p->state = S_SKIP_WS;
  } else if (m == MATCH_NONE) {
    op_consume(p, w);
    if (w < n && p->eof) p->state = S_TEXT; /* a cut closing tag at the end: text */
    else if (w < n) return err_set(ERR_PARSE, "tool calls: expected a JSON call object or </tool_calls>");
  }
  return 0;
}

static int st_h_text(outparse *p, const char *s, size_t n) {
  int k = op_text_until(p, s, n, p->h_kind, H_CONTENT_MK, ARRAY_LEN(H_CONTENT_MK));
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
  while (at[l] && !op_is_ws(at[l]) && at[l] != '<') l++;
  *len = l;
  return at;
}

static int st_h_head(outparse *p, const char *s, size_t n) {
  static const char *const mk[] = {"<|message|>"};
  int rc;
  int k = op_head_until(p, s, n, mk, 1, &rc);
  if (rc) return rc;
  if (k < 0) return 0;
  const char *head = p->tmp.data ? p->tmp.data : "";
  size_t cl = 0, rl = 0;
  const char *chan = h_word(head, "<|channel|>", &cl);
  const char *to = h_word(head, "to=", &rl);
  if (to && rl > 0 && p->cfg.tools_enabled) {
    if ((rc = op_call_open(p))) return rc;
    if (rl > 10 && !memcmp(to, "functions.", 10)) to += 10, rl -= 10;
    if ((rc = op_call_set_name(p, to, rl))) return rc;
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
  size_t w = op_ws_len(s, n);
  int m1 = op_match_at(p, s + w, n - w, "<|call|>");
  int m2 = op_match_at(p, s + w, n - w, "<|end|>");
  if (m1 == MATCH_FULL || m2 == MATCH_FULL) {
    op_consume(p, w + (m1 == MATCH_FULL ? 8 : 7));
    p->state = S_H_TEXT;
  } else if (m1 == MATCH_NONE && m2 == MATCH_NONE) {
    op_consume(p, w);
    if (w < n || p->eof) p->state = S_H_TEXT;
  }
  return 0;
}

static int st_fn_name(outparse *p, const char *s, size_t n) {
  static const char *const mk[] = {">"};
  int rc;
  int k = op_head_until(p, s, n, mk, 1, &rc);
  if (rc) return rc;
  if (k < 0) return 0;
  if ((rc = op_call_open(p))) return rc;
  if ((rc = op_call_set_name(p, p->tmp.data ? p->tmp.data : "", p->tmp.len))) return rc;
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
  op_consume(p, i + 1);
  if ((rl == 3 && !memcmp(s, "all", 3)) || !p->cfg.tools_enabled) {
    p->state = S_FV_TEXT;
    return 0;
  }
  int rc = op_call_open(p);
  if (rc) return rc;
  if ((rc = op_call_set_name(p, s, rl))) return rc;
  p->code_ok = true;
  p->code_term = ">>>";
  p->code_next = S_FV_RECIP;
  p->after = S_FV_AFTER;
  p->state = S_ARGS_OBJ;
  return 0;
}

static int st_fv_text(outparse *p, const char *s, size_t n) {
  static const char *const mk[] = {">>>"};
  if (op_text_until(p, s, n, OUTPARSE_TEXT, mk, 1) >= 0) {
    buf_reset(&p->tmp);
    p->state = S_FV_RECIP;
  }
  return 0;
}

static int st_fv_after(outparse *p, const char *s, size_t n) {
  size_t w = op_ws_len(s, n);
  int m = op_match_at(p, s + w, n - w, ">>>");
  if (m == MATCH_FULL) {
    op_consume(p, w + 3);
    buf_reset(&p->tmp);
    p->state = S_FV_RECIP;
  } else if (m == MATCH_NONE) {
    op_consume(p, w);
    if (w < n || p->eof) p->state = S_FV_TEXT;
  }
  return 0;
}

int op_step_call(outparse *p, const char *s, size_t n) {
  switch (p->state) {
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
  case S_BI_SEP:
  case S_BI_VAL:
  case S_PL_START:
  case S_PL_NAME:
  case S_PL_SEP: return op_st_py(p, s, n);
  case S_MI_START: return st_mi_start(p, s, n);
  case S_MI_NAME:
  case S_MI_CALLID: return st_mi_name(p, s, n);
  case S_DS_CALLS: return st_ds_calls(p, s, n);
  case S_DS_HEAD: return st_ds_head(p, s, n);
  case S_DS_AFTER_SEP: return st_ds_after_sep(p, s, n);
  case S_DS_NAME: return st_ds_name(p, s, n);
  case S_DS_FENCE: return st_ds_fence(p, s, n);
  case S_DS_CLOSE: return st_ds_close(p, s, n);
  case S_QX_START:
  case S_QX_FNAME:
  case S_QX_PARAMS:
  case S_QX_PNAME:
  case S_QX_PVAL: return op_st_qx(p, s, n);
  case S_JL_ITEM: return st_jl_item(p, s, n);
  case S_GL_NAME:
  case S_GL_KEY:
  case S_GL_VALOPEN:
  case S_GL_VAL:
  case S_GL_NEXT: return op_st_glm(p, s, n);
  case S_H_TEXT: return st_h_text(p, s, n);
  case S_H_HEAD: return st_h_head(p, s, n);
  case S_H_AFTER_CALL: return st_h_after_call(p, s, n);
  case S_FN_NAME: return st_fn_name(p, s, n);
  case S_FV_RECIP: return st_fv_recip(p, s, n);
  case S_FV_TEXT: return st_fv_text(p, s, n);
  case S_FV_AFTER: return st_fv_after(p, s, n);
  default: break;
  }
  return err_set(ERR_INTERNAL, "outparse: bad state %d", (int)p->state);
}
