/*
 * tmpl.h - a Jinja2 interpreter for the chat templates models ship.
 *
 * Compile a template once (tmpl_compile), render it many times with a dict of
 * globals (tmpl_render). The language is Jinja2 as Hugging Face transformers
 * configures it for chat templates: trim_blocks and lstrip_blocks on, the
 * loopcontrols extension (break/continue), a {% generation %} tag that just
 * renders its body, and the globals raise_exception(msg) and strftime_now(fmt)
 * plus a tojson filter that behaves like json.dumps(ensure_ascii=False).
 *
 * Values. A tmpl_value is a small struct passed by value. Strings, lists,
 * dicts, namespaces and functions point to objects owned by a tmpl_heap: every
 * object lives until its heap is freed (no reference counts, no cycles to
 * worry about). A caller builds the globals in a heap of its own, renders, and
 * frees the heap; the render keeps its temporaries in a private heap that is
 * freed before tmpl_render returns, so nothing allocated by a render outlives
 * it except the text appended to `out`. Values from one heap may be stored in
 * containers of another only if the first outlives the second.
 *
 * Errors. Functions return 0 or a negative ERR_* code (base/err.h) with a
 * detail naming the template line and column, e.g.
 * "template:12:5: no filter named 'foo'". raise_exception(msg) gives
 * ERR_INVALID with the message. Limits on recursion depth, loop iterations,
 * output size and memory turn hostile templates into ERR_TOO_LARGE errors.
 *
 * This module knows nothing of JSON or HTTP; tmpl_json.c converts jansson
 * values for the callers that have them (the CLI and tests).
 */
#ifndef PARLEY_TMPL_TMPL_H
#define PARLEY_TMPL_TMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef enum tmpl_type {
  TMPL_UNDEFINED = 0, /* a missing name or key; prints as "" */
  TMPL_NONE,
  TMPL_BOOL,
  TMPL_INT,   /* int64_t */
  TMPL_FLOAT, /* double */
  TMPL_STRING,
  TMPL_LIST,  /* also tuples (a flag on the list) */
  TMPL_DICT,  /* insertion-ordered */
  TMPL_FUNC,  /* macro, builtin or bound method */
  TMPL_NAMESPACE,
} tmpl_type;

typedef struct tmpl_heap tmpl_heap;
typedef struct tmpl tmpl;

typedef struct tmpl_value {
  tmpl_type type;
  union {
    bool b;
    int64_t i;
    double f;
    struct tmpl_str *s;
    struct tmpl_list *l;
    struct tmpl_dict *d; /* dicts and namespaces */
    struct tmpl_func *fn;
  } u;
} tmpl_value;

/* Heaps. A heap created by a caller fails allocations by returning
 * ERR_NOMEM from the constructors below. */
tmpl_heap *tmpl_heap_new(void);
void tmpl_heap_free(tmpl_heap *h);

/* Scalars need no heap. */
tmpl_value tmpl_undefined(void);
tmpl_value tmpl_none(void);
tmpl_value tmpl_bool(bool b);
tmpl_value tmpl_int(int64_t i);
tmpl_value tmpl_float(double f);

/* Strings are UTF-8, length-counted, copied into the heap. */
int tmpl_string(tmpl_heap *h, const char *s, size_t len, tmpl_value *out);
/* Read access: pointer and length of a string value (NULL for other types). */
const char *tmpl_str_data(tmpl_value v, size_t *len);

int tmpl_list_new(tmpl_heap *h, tmpl_value *out);
int tmpl_list_push(tmpl_heap *h, tmpl_value list, tmpl_value item);
size_t tmpl_list_len(tmpl_value list);
tmpl_value tmpl_list_get(tmpl_value list, size_t i);

int tmpl_dict_new(tmpl_heap *h, tmpl_value *out);
/* Sets key (any scalar or string value) to val; replaces an existing key in
 * place, keeping its position. */
int tmpl_dict_set(tmpl_heap *h, tmpl_value dict, tmpl_value key, tmpl_value val);
/* Convenience: a NUL-terminated string key. */
int tmpl_dict_set_str(tmpl_heap *h, tmpl_value dict, const char *key, tmpl_value val);
/* Value for a string key, or undefined. */
tmpl_value tmpl_dict_get_str(tmpl_value dict, const char *key);

/* A native function callable from templates. args holds n_args positional
 * values; kwargs is a dict of keyword arguments (or undefined when none).
 * Return 0 with *ret set, or a negative code after err_set(). Values it
 * creates must be allocated in h (the render's heap). */
typedef int (*tmpl_native_fn)(tmpl_heap *h, void *user, const tmpl_value *args, size_t n_args,
                              tmpl_value kwargs, tmpl_value *ret);
int tmpl_native(tmpl_heap *h, const char *name, tmpl_native_fn fn, void *user, tmpl_value *out);

/* Compiles src (len bytes, UTF-8). On failure returns ERR_PARSE with a
 * "template:LINE:COL: ..." detail and *out stays NULL. */
int tmpl_compile(const char *src, size_t len, tmpl **out);
void tmpl_free(tmpl *t);

/* Renders with the given globals (a dict, or undefined for none) and appends
 * the text to out. The builtin globals (range, namespace, dict,
 * raise_exception, strftime_now using the local time) are visible unless the
 * globals dict overrides them. On failure out keeps its previous contents. */
int tmpl_render(const tmpl *t, tmpl_value globals, buf *out);

/* Python's str() of a value, as a template prints it (True, None, 1.0,
 * ['a', 1], {'k': 'v'}). Appends to out. */
int tmpl_value_to_str(tmpl_value v, buf *out);

/* Probes (tmpl_probe.c): what a compiled template does with a request,
 * measured by rendering one fixed conversation (a user "Hi", add_generation_
 * prompt and enable_thinking true). A template that cannot render the probe
 * answers false (-1 for the think probe). No error is left behind. */
/* A tool given in `tools` reaches the prompt (its name is in the text). */
bool tmpl_renders_tools(const tmpl *t);
/* A system message's text reaches the prompt. */
bool tmpl_renders_system(const tmpl *t);
/* Whether the reasoning_effort global ("low" vs "high") changes the prompt:
 * the template takes reasoning levels (gpt-oss's harmony). */
bool tmpl_renders_effort(const tmpl *t);
/* 1 when the generation prompt ends inside an opened think block (the text
 * ends with `open`, trailing whitespace aside), 0 when not, -1 when the
 * template does not render. */
int tmpl_probe_opens_think(const tmpl *t, const char *open);

/* The jansson bridge lives in tmpl_json.c: declared here with an opaque
 * pointer so that this header stays free of JSON. `json` is a json_t *. */
int tmpl_from_json(tmpl_heap *h, const void *json, tmpl_value *out);

/* The globals of a chat-template render for an OpenAI-style chat request
 * body `request` (a json_t * object), as transformers' apply_chat_template
 * passes them: messages, tools (None when absent), documents (None),
 * add_generation_prompt (false when absent), bos_token and eos_token (when
 * not NULL), then every key of "chat_template_kwargs" (enable_thinking, ...),
 * which may override the others. The caller may add more keys (strftime_now,
 * other special tokens) with tmpl_dict_set_str. ERR_INVALID names the bad
 * field ("messages must be an array"). */
int tmpl_globals_from_request(tmpl_heap *h, const void *request, const char *bos_token,
                              const char *eos_token, tmpl_value *out);

#endif
