/*
 * gotmpl.c - the part of Go's text/template that Ollama prompt templates
 * for /api/generate use: text, {{ .System }}, {{ .Prompt }}, {{ .Suffix }},
 * {{ .Response }} (always empty: the model writes it), {{ if .X }} ...
 * {{ else if .Y }} ... {{ else }} ... {{ end }} (nested), comment actions,
 * and the trim markers "{{- " / " -}}" that eat the whitespace beside them.
 * Anything else (range, template calls, pipelines) is ERR_PARSE naming the
 * action and its byte offset, which the handler answers 400 (Ollama answers
 * its template parse errors 500; the template is the client's input).
 *
 * Rendering is one pass over the text with a small stack of if-states.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "api/ollama/ollama.h"
#include "base/err.h"

struct vars {
  const char *system, *prompt, *suffix;
};

static const char *var_value(const struct vars *v, const char *name, size_t n, bool *known) {
  *known = true;
  if (n == 6 && !memcmp(name, "System", 6)) return v->system;
  if (n == 6 && !memcmp(name, "Prompt", 6)) return v->prompt;
  if (n == 6 && !memcmp(name, "Suffix", 6)) return v->suffix;
  if (n == 8 && !memcmp(name, "Response", 8)) return "";
  *known = false;
  return "";
}

/* ".Name" -> its value; false when the expression is not a known variable. */
static bool eval_var(const struct vars *v, const char *e, size_t n, const char **out) {
  while (n && isspace((unsigned char)*e)) e++, n--;
  while (n && isspace((unsigned char)e[n - 1])) n--;
  if (n < 2 || e[0] != '.') return false;
  bool known;
  *out = var_value(v, e + 1, n - 1, &known);
  return known;
}

#define MAX_DEPTH 16

int ollama_gotmpl_render(const char *tmpl_text, const char *system, const char *prompt, const char *suffix, buf *out) {
  struct vars v = {system ? system : "", prompt ? prompt : "", suffix ? suffix : ""};
  /* per nesting level: is the current branch emitting; has a branch been
   * taken; was the enclosing level emitting */
  bool emit[MAX_DEPTH + 1] = {true}, taken[MAX_DEPTH + 1] = {true};
  int depth = 0;
  const char *p = tmpl_text;
  bool trim_next = false;
  while (*p) {
    const char *open = strstr(p, "{{");
    size_t text_len = open ? (size_t)(open - p) : strlen(p);
    const char *text = p;
    if (trim_next)
      while (text_len && isspace((unsigned char)*text)) text++, text_len--;
    bool trim_prev = open && open[2] == '-' && (open[3] == ' ' || open[3] == '\t' || open[3] == '\n');
    if (trim_prev)
      while (text_len && isspace((unsigned char)text[text_len - 1])) text_len--;
    if (emit[depth] && text_len && buf_append(out, text, text_len)) return ERR_NOMEM;
    if (!open) break;
    const char *a = open + 2 + (trim_prev ? 1 : 0);
    const char *close = strstr(a, "}}");
    if (!close) return err_set(ERR_PARSE, "template: unclosed action at offset %zu", (size_t)(open - tmpl_text));
    const char *ae = close;
    trim_next = ae > a && ae[-1] == '-' && ae - 1 > a && isspace((unsigned char)ae[-2]);
    if (trim_next) ae--;
    while (a < ae && isspace((unsigned char)*a)) a++;
    while (ae > a && isspace((unsigned char)ae[-1])) ae--;
    size_t n = (size_t)(ae - a);
    size_t off = (size_t)(open - tmpl_text);
    const char *val;
    if (n >= 4 && !memcmp(a, "/*", 2) && !memcmp(ae - 2, "*/", 2)) {
      /* comment */
    } else if (n > 3 && !memcmp(a, "if", 2) && isspace((unsigned char)a[2])) {
      if (depth == MAX_DEPTH) return err_set(ERR_PARSE, "template: ifs nested too deep at offset %zu", off);
      if (!eval_var(&v, a + 3, n - 3, &val))
        return err_set(ERR_PARSE, "template: unsupported condition \"%.*s\" at offset %zu", (int)n, a, off);
      depth++;
      emit[depth] = emit[depth - 1] && *val;
      taken[depth] = *val != '\0';
    } else if (n >= 4 && !memcmp(a, "else", 4)) {
      if (!depth) return err_set(ERR_PARSE, "template: else without if at offset %zu", off);
      const char *rest = a + 4;
      size_t rn = n - 4;
      while (rn && isspace((unsigned char)*rest)) rest++, rn--;
      bool parent = emit[depth - 1];
      if (!rn) {
        emit[depth] = parent && !taken[depth];
        taken[depth] = true;
      } else if (rn > 3 && !memcmp(rest, "if", 2) && isspace((unsigned char)rest[2])) {
        if (!eval_var(&v, rest + 3, rn - 3, &val))
          return err_set(ERR_PARSE, "template: unsupported condition \"%.*s\" at offset %zu", (int)n, a, off);
        emit[depth] = parent && !taken[depth] && *val;
        if (*val) taken[depth] = true;
      } else {
        return err_set(ERR_PARSE, "template: unsupported action \"%.*s\" at offset %zu", (int)n, a, off);
      }
    } else if (n == 3 && !memcmp(a, "end", 3)) {
      if (!depth) return err_set(ERR_PARSE, "template: end without if at offset %zu", off);
      depth--;
    } else if (eval_var(&v, a, n, &val)) {
      if (emit[depth] && buf_append_str(out, val)) return ERR_NOMEM;
    } else {
      return err_set(ERR_PARSE,
                     "template: unsupported action \"{{%.*s}}\" at offset %zu (parley renders .System, .Prompt, "
                     ".Suffix, .Response and if/else/end)",
                     (int)(n > 80 ? 80 : n), a, off);
    }
    p = close + 2;
  }
  if (depth) return err_set(ERR_PARSE, "template: unexpected EOF (an if without end)");
  return 0;
}
