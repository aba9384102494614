/*
 * parse_xml.c - the XML-style tool-call formats of the output parsers:
 * Qwen3-Coder / Qwen3.5 (<function=NAME><parameter=KEY>VALUE</parameter>)
 * and GLM 4.5-4.7 (NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>).
 * Unlike the JSON formats, a call's arguments are built here: "{", then
 * per parameter its key as a JSON string and its value converted to JSON
 * (qx_value), then "}". Values are held until their closing tag (they must
 * be seen whole to be typed), names and keys until theirs (bounded).
 *
 * Invariants: every ARGS fragment emitted here leaves the concatenation a
 * prefix of one JSON object; a call opened here is closed here.
 * Start reading at op_st_qx; parse_calls.c dispatches to it.
 */
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "tmpl/outparse.h"
#include "tmpl/parse_int.h"

/* ---------- Qwen3-Coder / Qwen3.5 XML calls ----------
 * <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>...</function>\n</tool_call>
 * A value is the raw text between the tags minus one leading and one trailing
 * newline (the template writes them); it becomes JSON as itself when it is
 * one valid JSON value (numbers, objects, arrays: the template writes those
 * with tojson), as true/false/null when it is Python's True/False/None (the
 * template's str() of a bool or None), as JSON rewritten from a Python list
 * or dict literal (str() of one, as Seed-OSS writes them), and as a JSON
 * string otherwise. The
 * schema would settle the ambiguous cases; it is not known here. Each
 * parameter is emitted when its closing tag arrives. */

static bool json_whole(const char *s, size_t n) {
  jscan js;
  jscan_init(&js);
  for (size_t i = 0; i < n; i++) {
    int nd = -1;
    unsigned f = jscan_byte(&js, (unsigned char)s[i], NULL, &nd);
    if ((f & JF_NUMEND) && nd == 0) f = jscan_byte(&js, (unsigned char)s[i], NULL, NULL);
    if (f & JF_ERR) return false;
  }
  return jscan_complete(&js);
}

/* A Python list or dict literal (what str() of one prints, as Seed-OSS's
 * template writes non-string values: 'quoted' strings, True/False/None)
 * rewritten as JSON into out; false when it is not one. */
static bool py_to_json(const char *v, size_t n, buf *out) {
  size_t i = op_ws_len(v, n);
  if (i == n || (v[i] != '[' && v[i] != '{')) return false;
  while (i < n) {
    char c = v[i];
    int rc = 0;
    if (c == '\'' || c == '"') {
      for (rc = buf_append_byte(out, '"'), i++; !rc && i < n && v[i] != c; i++) {
        if ((unsigned char)v[i] < 0x20) return false;
        if (v[i] == '\\' && i + 1 < n) {
          i++;
          rc = v[i] == '\'' ? buf_append_byte(out, '\'') : buf_append(out, v + i - 1, 2);
        } else {
          rc = v[i] == '"' ? buf_append_str(out, "\\\"") : buf_append_byte(out, v[i]);
        }
      }
      if (rc || i >= n) return false;
      rc = buf_append_byte(out, '"');
      i++;
    } else if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) {
      static const char *const py[][2] = {{"True", "true"}, {"False", "false"}, {"None", "null"}};
      size_t k, l = 0;
      while (i + l < n && ((v[i + l] >= 'A' && v[i + l] <= 'Z') || (v[i + l] >= 'a' && v[i + l] <= 'z'))) l++;
      for (k = 0; k < 3; k++)
        if (l == strlen(py[k][0]) && !memcmp(v + i, py[k][0], l)) break;
      if (k == 3) return false;
      rc = buf_append_str(out, py[k][1]);
      i += l;
    } else {
      rc = buf_append_byte(out, c);
      i++;
    }
    if (rc) return false;
  }
  return json_whole(out->data ? out->data : "", out->len);
}

static int qx_value(outparse *p) {
  const char *v = p->tmp.data ? p->tmp.data : "";
  size_t n = p->tmp.len;
  if (n > 0 && v[0] == '\n') v++, n--;
  if (n > 0 && v[n - 1] == '\n') n--;
  static const char *const py[][2] = {{"True", "true"}, {"False", "false"}, {"None", "null"}};
  if (json_whole(v, n)) {
    size_t a = op_ws_len(v, n), b = n;
    while (b > a && op_is_ws(v[b - 1])) b--;
    op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, v + a, b - a);
    return 0;
  }
  for (size_t k = 0; k < 3; k++) {
    if (n == strlen(py[k][0]) && !memcmp(v, py[k][0], n)) {
      op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, py[k][1], strlen(py[k][1]));
      return 0;
    }
  }
  buf conv = BUF_INIT;
  if (py_to_json(v, n, &conv)) {
    op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, conv.data, conv.len);
    buf_free(&conv);
    return 0;
  }
  buf_free(&conv);
  op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "\"", 1);
  int rc = op_json_str_emit(p, v, n);
  op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "\"", 1);
  return rc;
}

int op_st_qx(outparse *p, const char *s, size_t n) {
  int rc;
  size_t w = op_ws_len(s, n);
  switch (p->state) {
  case S_QX_START: { /* after <tool_call>: <function=NAME> or a Hermes JSON object */
    if (w == n) {
      op_consume(p, w);
      return 0;
    }
    if (s[w] == '{') {
      op_consume(p, w);
      if ((rc = op_call_open(p))) return rc;
      p->state = S_CALLOBJ;
      return 0;
    }
    int m = op_match_at(p, s + w, n - w, "<function=");
    if (m == MATCH_PARTIAL) return 0;
    if (m == MATCH_NONE)
      return err_set(ERR_PARSE, "tool call: expected <function=NAME> or a JSON object after <tool_call>");
    op_consume(p, w + 10);
    buf_reset(&p->tmp);
    p->state = S_QX_FNAME;
    return 0;
  }
  case S_QX_FNAME:
  case S_QX_PNAME: {
    static const char *const gt[] = {">"};
    int k = op_head_until(p, s, n, gt, 1, &rc);
    if (rc) return rc;
    if (k < 0) return 0;
    if (p->state == S_QX_FNAME) {
      if ((rc = op_call_open(p))) return rc;
      if ((rc = op_call_set_name(p, p->tmp.data ? p->tmp.data : "", p->tmp.len))) return rc;
      op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "{", 1);
      p->call_has_args = true;
      p->bi_n_args = 0;
    } else {
      if (p->bi_n_args++) op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, ", ", 2);
      op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "\"", 1);
      if ((rc = op_json_str_emit(p, p->tmp.data ? p->tmp.data : "", p->tmp.len))) return rc;
      op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "\": ", 3);
    }
    buf_reset(&p->tmp);
    p->state = p->state == S_QX_FNAME ? S_QX_PARAMS : S_QX_PVAL;
    return 0;
  }
  case S_QX_PARAMS: {
    int m1 = op_match_at(p, s + w, n - w, "<parameter=");
    int m2 = op_match_at(p, s + w, n - w, "</function>");
    if (m1 == MATCH_FULL) {
      op_consume(p, w + 11);
      buf_reset(&p->tmp);
      p->state = S_QX_PNAME;
    } else if (m2 == MATCH_FULL) {
      op_consume(p, w + 11);
      op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "}", 1);
      if ((rc = op_call_close(p))) return rc;
      p->expect = p->cfg.format == OUTPARSE_SEED_OSS ? "</seed:tool_call>" : "</tool_call>";
      p->expect_next = S_SKIP_WS;
      p->state = S_EXPECT;
    } else if (m1 == MATCH_NONE && m2 == MATCH_NONE && w < n) {
      return err_set(ERR_PARSE, "tool call %d (%s): expected <parameter=NAME> or </function>",
                     p->call_index, p->call_name);
    } else {
      op_consume(p, w);
    }
    return 0;
  }
  default: { /* S_QX_PVAL: the value until </parameter> (or </function>, left for S_QX_PARAMS) */
    static const char *const end[] = {"</parameter>", "</function>"};
    int which;
    size_t i = op_scan_markers(p, s, n, end, 2, &which);
    if (p->tmp.len + i > PENDING_MAX)
      return err_set(ERR_TOO_LARGE, "tool call %d (%s): parameter value longer than %u bytes",
                     p->call_index, p->call_name, PENDING_MAX);
    if ((rc = buf_append(&p->tmp, s, i))) return rc;
    op_consume(p, i);
    if (which < 0) return 0;
    if (which == 0) op_consume(p, strlen(end[0]));
    if ((rc = qx_value(p))) return rc;
    buf_reset(&p->tmp);
    p->state = S_QX_PARAMS;
    return 0;
  }
  }
}

/* ---------- GLM 4.5-4.7 XML calls ----------
 * <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>
 * Values convert as Qwen3-Coder's (qx_value: the template writes strings raw
 * and everything else with tojson). */
int op_st_glm(outparse *p, const char *s, size_t n) {
  int rc;
  size_t w = op_ws_len(s, n);
  switch (p->state) {
  case S_GL_NAME: {
    static const char *const mk[] = {"<arg_key>", "</tool_call>"};
    int k = op_head_until(p, s, n, mk, 2, &rc);
    if (rc) return rc;
    if (k < 0) return 0;
    if ((rc = op_call_open(p))) return rc;
    if ((rc = op_call_set_name(p, p->tmp.data ? p->tmp.data : "", p->tmp.len))) return rc;
    buf_reset(&p->tmp);
    op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "{", 1);
    p->call_has_args = true;
    p->bi_n_args = 0;
    if (k == 1) {
      op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "}", 1);
      if ((rc = op_call_close(p))) return rc;
      p->state = S_SKIP_WS;
    } else {
      p->state = S_GL_KEY;
    }
    return 0;
  }
  case S_GL_KEY: {
    static const char *const mk[] = {"</arg_key>"};
    int k = op_head_until(p, s, n, mk, 1, &rc);
    if (rc) return rc;
    if (k < 0) return 0;
    if (p->bi_n_args++) op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, ", ", 2);
    op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "\"", 1);
    if ((rc = op_json_str_emit(p, p->tmp.data ? p->tmp.data : "", p->tmp.len))) return rc;
    op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "\": ", 3);
    buf_reset(&p->tmp);
    p->state = S_GL_VALOPEN;
    return 0;
  }
  case S_GL_VALOPEN:
  case S_GL_NEXT: {
    const char *want = p->state == S_GL_VALOPEN ? "<arg_value>" : "<arg_key>";
    int m1 = op_match_at(p, s + w, n - w, want);
    int m2 = p->state == S_GL_NEXT ? op_match_at(p, s + w, n - w, "</tool_call>") : MATCH_NONE;
    if (m1 == MATCH_FULL) {
      op_consume(p, w + strlen(want));
      buf_reset(&p->tmp);
      p->state = p->state == S_GL_VALOPEN ? S_GL_VAL : S_GL_KEY;
    } else if (m2 == MATCH_FULL) {
      op_consume(p, w + 12);
      op_emit_call(p, OUTPARSE_TOOL_CALL_ARGS, "}", 1);
      if ((rc = op_call_close(p))) return rc;
      p->state = S_SKIP_WS;
    } else if (m1 == MATCH_NONE && m2 == MATCH_NONE && w < n) {
      return err_set(ERR_PARSE, "tool call %d (%s): expected %s", p->call_index, p->call_name,
                     p->state == S_GL_VALOPEN ? "<arg_value>" : "<arg_key> or </tool_call>");
    } else {
      op_consume(p, w);
    }
    return 0;
  }
  default: { /* S_GL_VAL */
    static const char *const mk[] = {"</arg_value>"};
    int which;
    size_t i = op_scan_markers(p, s, n, mk, 1, &which);
    if (p->tmp.len + i > PENDING_MAX)
      return err_set(ERR_TOO_LARGE, "tool call %d (%s): argument value longer than %u bytes",
                     p->call_index, p->call_name, PENDING_MAX);
    if ((rc = buf_append(&p->tmp, s, i))) return rc;
    op_consume(p, i);
    if (which < 0) return 0;
    op_consume(p, strlen(mk[0]));
    if ((rc = qx_value(p))) return rc;
    buf_reset(&p->tmp);
    p->state = S_GL_NEXT;
    return 0;
  }
  }
}

