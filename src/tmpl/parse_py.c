/*
 * parse_py.c - tool calls written in Python call syntax, `name(k=v, ...)`:
 * Llama 3's built-in tools (<|python_tag|>brave_search.call(query="x"))
 * and LFM2's call lists (<|tool_call_start|>[f(a='x', b=1), g()]<|tool_call_end|>,
 * the form LFM2.5's chat template writes for an assistant's tool calls).
 *
 * Arguments become one JSON object, streamed: `k=` gives `"k": `, and the
 * value is translated from a Python literal to JSON byte by byte: 'single'
 * and "double" quoted strings become JSON strings (\' a quote, escapes JSON
 * shares kept, any other backslash a literal one), True/False/None become
 * true/false/null, everything else (numbers, [lists], {dicts} - what
 * Jinja's `| string` and `| tojson` print) is copied. Every byte emitted also
 * goes through jscan, which rejects what is not JSON (a tuple, a bare word,
 * `1.`) with ERR_PARSE and says where a value ends: a top-level number at
 * the first byte that cannot continue it, anything else at its closing byte.
 * Nothing is held beyond a possible True/False/None prefix and a name.
 *
 * LFM2 may also write a JSON call object inside the list (when its system
 * prompt asks for JSON); S_PL_NAME hands that to S_CALLOBJ.
 * Start reading at op_st_py.
 */
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "tmpl/outparse.h"
#include "tmpl/parse_int.h"

bool op_ident_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
}

int op_py_call_begin(outparse *p, const char *name, size_t n) {
  int rc = op_call_set_name(p, name, n);
  if (rc) return rc;
  op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "{", 1);
  p->call_has_args = true;
  p->bi_n_args = 0;
  p->state = S_BI_KEY;
  return 0;
}

/* ')' closed the call's arguments. */
static int call_end(outparse *p) {
  op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "}", 1);
  int rc = op_call_close(p);
  if (rc) return rc;
  if (p->cfg.format == OUTPARSE_LFM2) {
    p->state = S_PL_SEP;
    return 0;
  }
  p->expect = "<|eom_id|>";
  p->expect_next = S_SKIP_WS;
  p->state = S_EXPECT;
  return 0;
}

/* Arguments: `name = value` pairs until ')'. */
static int st_key(outparse *p, const char *s, size_t n) {
  size_t w = op_ws_len(s, n);
  if (w == n) {
    op_consume(p, w);
    return 0;
  }
  if (s[w] == ')') {
    op_consume(p, w + 1);
    return call_end(p);
  }
  if (p->state == S_BI_SEP) {
    if (s[w] != ',')
      return err_set(ERR_PARSE, "tool call %d (%s): expected ',' or ')' after an argument", p->call_index,
                     p->call_name);
    op_consume(p, w + 1);
    p->state = S_BI_KEY;
    return 0;
  }
  size_t i = w;
  while (i < n && i - w <= WS_MAX && op_ident_char(s[i], i == w)) i++;
  size_t kl = i - w;
  size_t j = i + op_ws_len(s + i, n - i);
  if (j == n && kl <= WS_MAX && !p->eof) return 0; /* wait for the '=' */
  if (kl == 0 || kl > WS_MAX || j == n || s[j] != '=')
    return err_set(ERR_PARSE, "tool call %d (%s): expected name=value in the call's arguments", p->call_index,
                   p->call_name);
  char key[WS_MAX + 8];
  int kn = snprintf(key, sizeof key, "%s\"%.*s\": ", p->bi_n_args ? ", " : "", (int)kl, s + w);
  op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, key, (size_t)kn);
  p->bi_n_args++;
  op_consume(p, j + 1);
  jscan_init(&p->js);
  p->bi_quote = 0;
  p->state = S_BI_VAL;
  return 0;
}

/* Emits t[0..k) (JSON) after jscan accepts it; *done when it completed the
 * argument's value. */
static int put(outparse *p, const char *t, size_t k, bool *done) {
  for (size_t i = 0; i < k; i++) {
    unsigned f = jscan_byte(&p->js, (unsigned char)t[i], NULL, NULL);
    if (f & JF_ERR) {
      op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, t, i);
      return op_json_error(p, "a call argument");
    }
    if (f & JF_DONE) *done = true;
  }
  op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, t, k);
  return 0;
}

/* Plain bytes of a string body, escaped for JSON (control characters,
 * the double quote), emitted in pieces that never split a character. */
static int put_str(outparse *p, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  char out[300];
  size_t o = 0;
  bool done = false;
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    unsigned char c = (unsigned char)s[i];
    if (o >= 256 && (c & 0xC0) != 0x80) {
      rc = put(p, out, o, &done);
      o = 0;
    }
    if (c == '"') {
      out[o++] = '\\', out[o++] = '"';
    } else if (c < 0x20) {
      memcpy(out + o, "\\u00", 4);
      out[o + 4] = hex[c >> 4], out[o + 5] = hex[c & 15];
      o += 6;
    } else {
      out[o++] = (char)c;
    }
  }
  return rc || !o ? rc : put(p, out, o, &done);
}

/* One argument's value, Python literal in, JSON out (see the top). */
static int st_val(outparse *p, const char *s, size_t n) {
  static const char *const LIT[][2] = {{"True", "true"}, {"False", "false"}, {"None", "null"},
                                       {"true", "true"}, {"false", "false"}, {"null", "null"}};
  size_t i = 0;
  bool done = false;
  int rc = 0;
  if (p->js.off == 0 && !p->bi_quote) i = op_ws_len(s, n); /* before the value */
  while (i < n && !done && !rc) {
    char c = s[i];
    if (p->bi_quote) {
      if (p->bi_esc) {
        p->bi_esc = false;
        if (c == '\'') rc = put(p, "'", 1, &done);
        else if (c == '"') rc = put(p, "\\\"", 2, &done);
        else if (c && strchr("ntrbf\\/u", c)) rc = put(p, (char[2]){'\\', c}, 2, &done);
        else {
          rc = put(p, "\\\\", 2, &done);
          continue; /* c again, as itself */
        }
        i++;
      } else if (c == '\\') {
        p->bi_esc = true;
        i++;
      } else if (c == p->bi_quote) {
        p->bi_quote = 0;
        rc = put(p, "\"", 1, &done);
        i++;
      } else {
        size_t j = i;
        while (j < n && s[j] != '\\' && s[j] != p->bi_quote) j++;
        rc = put_str(p, s + i, j - i);
        i = j;
      }
      continue;
    }
    if (c == '\'' || c == '"') {
      p->bi_quote = c;
      p->bi_esc = false;
      rc = put(p, "\"", 1, &done);
      i++;
      continue;
    }
    if (strchr("TFNtfn", c)) { /* the literals' first letters (not a number's 'e') */
      size_t k = 0;
      int m = MATCH_NONE;
      for (; k < sizeof LIT / sizeof *LIT; k++)
        if ((m = op_match_at(p, s + i, n - i, LIT[k][0])) != MATCH_NONE) break;
      if (m == MATCH_PARTIAL) break; /* wait */
      if (m == MATCH_NONE)
        return err_set(ERR_PARSE, "tool call %d (%s): a call argument is not a literal (at '%c')", p->call_index,
                       p->call_name, c);
      rc = put(p, LIT[k][1], strlen(LIT[k][1]), &done);
      i += strlen(LIT[k][0]);
      continue;
    }
    int nd = -1;
    unsigned f = jscan_byte(&p->js, (unsigned char)c, NULL, &nd);
    if ((f & JF_NUMEND) && nd == 0) { /* c is the delimiter after a top-level number */
      done = true;
      break;
    }
    if (f & JF_ERR) return op_json_error(p, "a call argument");
    op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, s + i, 1);
    done = (f & JF_DONE) != 0;
    i++;
  }
  op_consume(p, i);
  if (done) p->state = S_BI_SEP;
  return rc;
}

/* LFM2's list: '[' then calls separated by ',' then ']' and <|tool_call_end|>. */
static int st_list(outparse *p, const char *s, size_t n) {
  size_t w = op_ws_len(s, n);
  if (w == n) {
    op_consume(p, w);
    return 0;
  }
  char c = s[w];
  if (p->state == S_PL_START) {
    if (c != '[')
      return err_set(ERR_PARSE, "tool calls: expected '[' after <|tool_call_start|>, got byte 0x%02x",
                     (unsigned char)c);
    op_consume(p, w + 1);
    p->state = S_PL_NAME;
    return 0;
  }
  if (c == ']') {
    op_consume(p, w + 1);
    p->expect = "<|tool_call_end|>";
    p->expect_next = S_SKIP_WS;
    p->state = S_EXPECT;
    return 0;
  }
  if (p->state == S_PL_SEP) {
    if (c != ',')
      return err_set(ERR_PARSE, "tool calls: expected ',' or ']' after a call, got byte 0x%02x", (unsigned char)c);
    op_consume(p, w + 1);
    p->state = S_PL_NAME;
    return 0;
  }
  int rc;
  if (c == '{') {
    op_consume(p, w);
    if ((rc = op_call_open(p))) return rc;
    p->after = S_PL_SEP;
    p->state = S_CALLOBJ;
    return 0;
  }
  /* name(: letters, digits, '_', '-', '.' (OpenAI allows '-', some tools use '.') */
  size_t i = w;
  while (i < n && i - w <= NAME_MAX_ && (op_ident_char(s[i], i == w) || (i > w && (s[i] == '-' || s[i] == '.')))) i++;
  if (i == n && i - w <= NAME_MAX_ && !p->eof) return 0; /* wait for the '(' */
  if (i == w || i - w > NAME_MAX_ || i == n || s[i] != '(')
    return err_set(ERR_PARSE, "tool calls: expected name( in the list of calls");
  if ((rc = op_call_open(p))) return rc;
  op_consume(p, i + 1);
  return op_py_call_begin(p, s + w, i - w);
}

int op_st_py(outparse *p, const char *s, size_t n) {
  switch (p->state) {
  case S_BI_KEY:
  case S_BI_SEP: return st_key(p, s, n);
  case S_BI_VAL: return st_val(p, s, n);
  default: return st_list(p, s, n);
  }
}
