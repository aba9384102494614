/*
 * gen.c - the canonical generation layer (see gen.h): parameters, chat
 * prompts through the model's template, and the job that submits a request
 * to the engine, runs each choice's text through its output parser
 * (reasoning, tool calls) and drives a dialect's sink.
 *
 * Start reading at gen_run. A job lives from gen_run until its producer
 * (the handler's thread without streaming, a thread of its own with
 * streaming) has seen the engine's last FINISH and called on_end; job_free
 * then releases the engine handle, the grammar, the sink's context and the
 * manager reference, in that order (the grammar must outlive the engine
 * request, the model must outlive both).
 */
#include "api/gen.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "sample/json_schema.h"
#include "tmpl/tmpl.h"

/* ---- parameters ------------------------------------------------------------ */

void gen_params_init(gen_params *g) {
  memset(g, 0, sizeof *g);
  g->er = engine_request_default();
}

int gen_params_add_stop(gen_params *g, const char *s, size_t len) {
  if (!len) return 0;
  char **grown = realloc(g->stop, (g->n_stop + 1) * sizeof *grown);
  if (!grown) return err_set(ERR_NOMEM, "out of memory");
  g->stop = grown;
  if (!(g->stop[g->n_stop] = str_ndup(s, len))) return err_set(ERR_NOMEM, "out of memory");
  g->n_stop++;
  g->er.stop = (const char *const *)g->stop;
  g->er.n_stop = g->n_stop;
  return 0;
}

int gen_params_add_bias(gen_params *g, size_t cap, int32_t token, float bias) {
  if (!g->bias && !(g->bias = calloc(cap ? cap : 1, sizeof *g->bias))) return err_set(ERR_NOMEM, "out of memory");
  if (g->er.sample.n_bias >= cap) return err_set(ERR_RANGE, "too many logit biases (at most %zu)", cap);
  g->bias[g->er.sample.n_bias].token = token;
  g->bias[g->er.sample.n_bias++].bias = bias;
  g->er.sample.bias = g->bias;
  return 0;
}

void gen_params_set_format(gen_params *g, enum gen_format f, const json_t *schema, const char *param) {
  json_decref(g->schema);
  g->schema = f == GEN_FORMAT_SCHEMA && schema ? json_deep_copy(schema) : NULL;
  g->format = g->schema || f == GEN_FORMAT_JSON ? f : GEN_FORMAT_TEXT;
  g->format_param = param;
}

void gen_params_free(gen_params *g) {
  free(g->gbnf);
  free(g->prefill);
  for (size_t i = 0; i < g->n_stop; i++) free(g->stop[i]);
  free(g->stop);
  free(g->bias);
  json_decref(g->schema);
  memset(g, 0, sizeof *g);
}

/* ---- chat prompts ---------------------------------------------------------- */

int gen_tokenize(const tok *t, const char *text, size_t len, bool parse_special, tok_ids *out) {
  int rc = tok_encode(t, text, len, parse_special ? TOK_ENCODE_PARSE_SPECIAL : 0, out);
  if (rc) return rc;
  int32_t bos = tok_special(t, TOK_SPECIAL_BOS);
  if (tok_add_bos(t) && bos >= 0 && (out->n == 0 || out->ids[0] != bos)) {
    if ((rc = tok_ids_push(out, bos))) return rc;
    memmove(out->ids + 1, out->ids, (out->n - 1) * sizeof *out->ids);
    out->ids[0] = bos;
  }
  return 0;
}

static enum outparse_format parser_format(family_parser p) {
  switch (p) {
    case FAMILY_PARSER_HERMES: return OUTPARSE_HERMES;
    case FAMILY_PARSER_LLAMA3: return OUTPARSE_LLAMA3;
    case FAMILY_PARSER_MISTRAL: return OUTPARSE_MISTRAL;
    case FAMILY_PARSER_DEEPSEEK: return OUTPARSE_DEEPSEEK;
    case FAMILY_PARSER_HARMONY: return OUTPARSE_HARMONY;
    case FAMILY_PARSER_GRANITE: return OUTPARSE_GRANITE;
    case FAMILY_PARSER_FUNCTIONARY: return OUTPARSE_FUNCTIONARY_V31;
    case FAMILY_PARSER_LFM2: return OUTPARSE_LFM2;
    case FAMILY_PARSER_QWEN3_CODER: return OUTPARSE_QWEN3_CODER;
    default: return OUTPARSE_PLAIN;
  }
}

/* Templates read tool-call arguments as a mapping (`arguments | tojson`,
 * `arguments.items()`); OpenAI sends them as JSON text. Parse text that
 * holds an object; leave anything else as it is. */
static void arguments_as_objects(json_t *messages) {
  size_t i, k;
  json_t *m, *call;
  json_array_foreach(messages, i, m) {
    json_array_foreach(json_object_get(m, "tool_calls"), k, call) {
      json_t *fn = json_object_get(call, "function");
      json_t *args = json_object_get(fn, "arguments");
      if (!json_is_string(args)) continue;
      json_t *obj = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, NULL);
      if (json_is_object(obj)) json_object_set_new(fn, "arguments", obj);
      else json_decref(obj);
    }
  }
}

/* continue_final: templates close every message, so the text is cut right
 * after the last occurrence of the final message's content (as Hugging
 * Face's continue_final_message does) and the model goes on writing it. */
static void cut_after_final(const json_t *messages, buf *text, size_t from) {
  const json_t *last = json_array_get(messages, json_array_size(messages) - 1);
  const json_t *content = json_object_get(last, "content");
  size_t n = json_string_length(content);
  if (!json_is_string(content) || !n || !text->data || n > text->len - from) return;
  const char *s = json_string_value(content);
  for (size_t at = text->len - n + 1; at-- > from;)
    if (memcmp(text->data + at, s, n) == 0) {
      text->len = at + n;
      text->data[text->len] = '\0';
      return;
    }
}

static bool chat_has_tools(const gen_chat *c) { return json_is_array(c->tools) && json_array_size(c->tools) > 0; }

/* The call syntax of a request with tools on a model of family fam: the
 * family's own when its template shows the tools (the model was taught that
 * syntax), the generic Hermes one when the template does not (the generic
 * prompt teaches it) or the family has no call syntax. */
static family_parser chat_tool_syntax(const family_info *fam) {
  bool own = (fam->caps & FAMILY_CAP_TOOLS) && fam->parser != FAMILY_PARSER_PLAIN;
  return own ? fam->parser : FAMILY_PARSER_HERMES;
}

/* The output parser's configuration for a chat request on mm. */
static void chat_parser_config(const manager_model *mm, const gen_chat *c, outparse_config *pc) {
  const json_t *kwt = c->template_kwargs ? json_object_get(c->template_kwargs, "enable_thinking") : NULL;
  bool thinking = c->thinking >= 0 ? c->thinking != 0 : !json_is_false(kwt);
  memset(pc, 0, sizeof *pc);
  pc->tools_enabled = chat_has_tools(c) && c->tool_choice != GEN_TOOL_NONE;
  pc->format = parser_format(pc->tools_enabled ? chat_tool_syntax(&mm->fam) : mm->fam.parser);
  pc->think_open = mm->fam.think_open;
  pc->think_close = mm->fam.think_close;
  pc->starts_in_reasoning =
      mm->fam.template_opens_think && thinking && !c->continue_final && !c->no_generation_prompt;
  /* thinking switched off, yet a model whose reasoning cannot be (gpt-oss)
   * or a template that ignores the switch still reasons: not returned */
  pc->hide_reasoning = !thinking;
  if (!pc->think_open || !pc->think_close) pc->think_open = pc->think_close = NULL;
}

enum gen_effort gen_effort_of(const char *name) {
  static const struct {
    const char *name;
    enum gen_effort e;
  } NAMES[] = {{"minimal", GEN_EFFORT_LOW}, {"low", GEN_EFFORT_LOW},   {"medium", GEN_EFFORT_MEDIUM},
               {"high", GEN_EFFORT_HIGH},   {"xhigh", GEN_EFFORT_HIGH}, {"max", GEN_EFFORT_HIGH}};
  for (size_t i = 0; name && i < ARRAY_LEN(NAMES); i++)
    if (strcmp(name, NAMES[i].name) == 0) return NAMES[i].e;
  return GEN_EFFORT_DEFAULT;
}

void gen_chat_template_of(const manager_model *mm, gen_chat_template *ct) {
  *ct = (gen_chat_template){.chat = mm->chat,
                            .chat_tools = mm->chat_tools,
                            .bos = mm->bos,
                            .eos = mm->eos,
                            .renders_tools = (mm->fam.caps & FAMILY_CAP_TOOLS) != 0,
                            .renders_system = mm->fam.template_renders_system};
}

void gen_chat_template_measure(gen_chat_template *ct) {
  const tmpl *t = ct->chat_tools ? ct->chat_tools : ct->chat;
  ct->renders_tools = tmpl_renders_tools(t);
  ct->renders_system = tmpl_renders_system(t);
}

/* ---- the generic tool prompt ---- */

static tmpl *g_generic;     /* tmpl_generic_tools_source(), compiled once */
static int g_generic_rc;
static pthread_once_t g_generic_once = PTHREAD_ONCE_INIT;

static void generic_compile(void) {
  const char *src = tmpl_generic_tools_source();
  g_generic_rc = tmpl_compile(src, strlen(src), &g_generic);
}

/* Renders the generic template with one global (key: "tools" or "calls")
 * and appends the text to out. */
static int generic_render(const char *key, const json_t *v, buf *out) {
  pthread_once(&g_generic_once, generic_compile);
  if (g_generic_rc) return err_set(ERR_INTERNAL, "the generic tool prompt does not compile");
  tmpl_heap *h = tmpl_heap_new();
  tmpl_value g, x;
  int rc = h ? tmpl_dict_new(h, &g) : ERR_NOMEM;
  if (!rc) rc = tmpl_from_json(h, v, &x);
  if (!rc) rc = tmpl_dict_set_str(h, g, key, x);
  if (!rc) rc = tmpl_render(g_generic, g, out);
  tmpl_heap_free(h);
  return rc == ERR_NOMEM ? err_set(ERR_NOMEM, "out of memory") : rc;
}

/* A copy of m (its members shared) whose content is `text`. */
static json_t *with_content(const json_t *m, const char *text, size_t len) {
  json_t *c = json_copy((json_t *)m);
  if (c && json_object_set_new(c, "content", json_stringn(text, len))) {
    json_decref(c);
    c = NULL;
  }
  return c;
}

/* Appends a string content to b, after sep when b is not empty (nothing
 * for an empty or non-string content). */
static void append_content(buf *b, const json_t *content, const char *sep) {
  if (!json_is_string(content) || !json_string_length(content)) return;
  if (b->len) buf_append_str(b, sep);
  buf_append(b, json_string_value(content), json_string_length(content));
}

static bool is_role(const json_t *m, const char *role) {
  const char *r = json_string_value(json_object_get(m, "role"));
  return r && strcmp(r, role) == 0;
}

/* Puts the generic tool prompt into msgs: after the text of a leading
 * system message (a new one first when there is none), or, for a template
 * that renders no system message, before the text of the first user
 * message (a new one first when there is none). */
static int place_prompt(json_t *msgs, bool renders_system, const buf *prompt) {
  const char *role = renders_system ? "system" : "user";
  size_t at = 0;
  if (!renders_system)
    while (at < json_array_size(msgs) && !is_role(json_array_get(msgs, at), "user")) at++;
  json_t *m = json_array_get(msgs, at);
  if (!m || !is_role(m, role)) {
    json_t *p = json_pack("{s:s, s:s%}", "role", role, "content", prompt->data ? prompt->data : "", prompt->len);
    return p && !json_array_insert_new(msgs, 0, p) ? 0 : err_set(ERR_NOMEM, "out of memory");
  }
  buf b = BUF_INIT;
  if (renders_system) {
    append_content(&b, json_object_get(m, "content"), "");
    if (b.len) buf_append_str(&b, "\n\n");
    buf_append(&b, prompt->data ? prompt->data : "", prompt->len);
  } else {
    buf_append(&b, prompt->data ? prompt->data : "", prompt->len);
    append_content(&b, json_object_get(m, "content"), "\n\n");
  }
  json_t *c = b.data ? with_content(m, b.data, b.len) : NULL;
  buf_free(&b);
  return c && !json_array_set_new(msgs, at, c) ? 0 : err_set(ERR_NOMEM, "out of memory");
}

/* The conversation for a template that does not render tools, as a new
 * array (c->messages is not changed): assistant calls become <tool_call>
 * text after the turn's content, tool results <tool_response> text in a
 * user turn (consecutive results, and a user message right after them,
 * share one turn, so turns still alternate), and the generic tool prompt
 * goes in (place_prompt). */
static int generic_messages(const gen_chat *c, bool renders_system, json_t **out) {
  json_t *msgs = json_array();
  buf b = BUF_INIT;
  int rc = msgs ? 0 : err_set(ERR_NOMEM, "out of memory");
  bool results = false; /* the last message of msgs is a tool-result turn of our own */
  size_t i;
  const json_t *m;
  json_array_foreach(c->messages, i, m) {
    if (rc) break;
    const json_t *content = json_object_get(m, "content");
    const json_t *calls = json_object_get(m, "tool_calls");
    buf_reset(&b);
    json_t *add = NULL;
    bool tool = is_role(m, "tool");
    if (tool || (results && is_role(m, "user"))) {
      if (tool) buf_append_str(&b, "<tool_response>\n");
      append_content(&b, content, "");
      if (tool) buf_append_str(&b, "\n</tool_response>");
      json_t *prev = results ? json_array_get(msgs, json_array_size(msgs) - 1) : NULL;
      if (prev) { /* joins the results turn */
        buf joined = BUF_INIT;
        append_content(&joined, json_object_get(prev, "content"), "");
        if (joined.len && b.len) buf_append_byte(&joined, '\n');
        buf_append(&joined, b.data ? b.data : "", b.len);
        if (json_object_set_new(prev, "content", json_stringn(joined.data ? joined.data : "", joined.len)))
          rc = err_set(ERR_NOMEM, "out of memory");
        buf_free(&joined);
        continue;
      }
      add = json_pack("{s:s, s:s%}", "role", "user", "content", b.data ? b.data : "", b.len);
      results = true;
    } else if (is_role(m, "assistant") && json_array_size(calls)) {
      append_content(&b, content, "");
      if (b.len) buf_append_byte(&b, '\n');
      if ((rc = generic_render("calls", calls, &b))) break;
      if ((add = with_content(m, b.data ? b.data : "", b.len))) json_object_del(add, "tool_calls");
      results = false;
    } else {
      add = json_incref((json_t *)m);
      results = false;
    }
    if (!add || json_array_append_new(msgs, add)) rc = err_set(ERR_NOMEM, "out of memory");
  }
  buf_reset(&b);
  if (!rc) rc = generic_render("tools", c->tools, &b);
  if (!rc) rc = place_prompt(msgs, renders_system, &b);
  buf_free(&b);
  if (rc) {
    json_decref(msgs);
    return rc;
  }
  *out = msgs;
  return 0;
}

int gen_chat_render(const gen_chat_template *ct, gen_chat *c, buf *out) {
  if (!ct->chat) return err_set(ERR_UNSUPPORTED, "no chat template");
  if (!json_is_array(c->messages)) return err_set(ERR_TYPE, "messages: expected array");
  arguments_as_objects(c->messages);
  bool has_tools = chat_has_tools(c);
  bool generic = has_tools && !ct->renders_tools;
  json_t *msgs = NULL;
  int rc = generic ? generic_messages(c, ct->renders_system, &msgs) : 0;
  if (rc) return rc;
  if (!msgs) msgs = json_incref(c->messages);
  bool agp = !c->continue_final && !c->no_generation_prompt;
  json_t *req = json_pack("{s:O, s:b}", "messages", msgs, "add_generation_prompt", agp);
  json_t *kw = c->template_kwargs ? json_deep_copy(c->template_kwargs) : json_object();
  if (!req || !kw) rc = err_set(ERR_NOMEM, "out of memory");
  if (!rc && has_tools && !generic) json_object_set(req, "tools", (json_t *)c->tools);
  if (!rc && c->thinking >= 0) json_object_set_new(kw, "enable_thinking", json_boolean(c->thinking));
  static const char *const EFFORT_NAMES[] = {NULL, "low", "medium", "high"};
  enum gen_effort effort = c->effort == GEN_EFFORT_DEFAULT && c->thinking == 0 ? GEN_EFFORT_LOW : c->effort;
  if (!rc && (unsigned)effort < ARRAY_LEN(EFFORT_NAMES) && EFFORT_NAMES[effort] && !json_object_get(kw, "reasoning_effort"))
    json_object_set_new(kw, "reasoning_effort", json_string(EFFORT_NAMES[effort]));
  if (!rc) json_object_set(req, "chat_template_kwargs", kw);
  json_decref(kw);

  size_t before = out->len;
  tmpl_heap *h = rc ? NULL : tmpl_heap_new();
  tmpl_value globals;
  if (!rc) rc = h ? tmpl_globals_from_request(h, req, ct->bos, ct->eos, &globals) : err_set(ERR_NOMEM, "out of memory");
  if (!rc) {
    const tmpl *t = has_tools && ct->chat_tools ? ct->chat_tools : ct->chat;
    if ((rc = tmpl_render(t, globals, out))) rc = ERR_INVALID; /* detail: line and column */
  }
  tmpl_heap_free(h);
  json_decref(req);
  if (!rc && c->continue_final) cut_after_final(msgs, out, before);
  json_decref(msgs);
  return rc;
}

int gen_chat_prompt(const manager_model *mm, gen_chat *c, buf *prompt, tok_ids *ids, outparse_config *pc) {
  if (!mm->chat)
    return err_set(ERR_UNSUPPORTED, "model '%s' has no chat template (send a raw prompt instead)", mm->name);
  gen_chat_template ct;
  gen_chat_template_of(mm, &ct);
  buf local = BUF_INIT;
  buf *text = prompt ? prompt : &local;
  int rc = gen_chat_render(&ct, c, text);
  if (!rc) rc = gen_tokenize(mm->t, text->data ? text->data : "", text->len, true, ids);
  if (!rc && !ids->n) rc = err_set(ERR_INVALID, "the rendered prompt is empty");
  buf_free(&local);
  if (rc) return rc;
  chat_parser_config(mm, c, pc);
  return 0;
}

/* The tool's parameters schema when the grammar compiler can express it,
 * else any object. */
static json_t *params_schema(const json_t *tool) {
  const json_t *params = json_object_get(json_object_get(tool, "function"), "parameters");
  if (json_is_object(params)) {
    char *text = NULL;
    size_t len = 0;
    int rc = json_schema_to_gbnf(params, &text, &len);
    free(text);
    if (rc == 0) return json_deep_copy(params);
  }
  return json_pack("{s:s}", "type", "object");
}

/* The call object of one tool: {"name": const, ARGS_KEY: parameters}. */
static json_t *call_schema(const json_t *tool, const char *args_key) {
  const json_t *name = json_object_get(json_object_get(tool, "function"), "name");
  json_t *args = params_schema(tool);
  if (!args) return NULL;
  return json_pack("{s:s, s:{s:{s:O}, s:o}, s:[s, s], s:b}", "type", "object", "properties", "name", "const", name,
                   args_key, args, "required", "name", args_key, "additionalProperties", 0);
}

/* How a forced call is written, per output-parser format (docs/text.md,
 * "Forced tool calls"). Texts are raw (escaped for GBNF when written).
 *   !named: prefill, then open {"name": .., ARGS_KEY: ..} close, the
 *     call object constrained as a whole;
 *   named: prefill, then open NAME mid ARGUMENTS close, the name an
 *     alternation of the tools' names; with a single candidate tool, open
 *     NAME mid joins the prefill and only the arguments are generated.
 * The prefill is what a grammar cannot produce (special tokens): it ends
 * the prompt and is fed to the output parser before the generated text. */
struct force_fmt {
  bool named;
  const char *prefill, *open, *mid, *close, *args_key;
};

static const struct force_fmt *force_fmt_of(family_parser p) {
  static const struct force_fmt HERMES = {false, "", "<tool_call>\n", "", "\n</tool_call>", "arguments"};
  static const struct force_fmt LLAMA3 = {false, "", "", "", "", "parameters"};
  static const struct force_fmt MISTRAL = {false, "[TOOL_CALLS]", "[", "", "]", "arguments"};
  static const struct force_fmt GRANITE = {false, "<|tool_call|>", "[", "", "]", "arguments"};
  static const struct force_fmt FUNCTIONARY = {true, "", "<function=", ">", "</function>", NULL};
  /* LFM2's list holds JSON call objects as well as its Python calls */
  static const struct force_fmt LFM2 = {false, "<|tool_call_start|>", "[", "", "]", "arguments"};
  /* DeepSeek R1's form (the parser also reads V3.1's, whose name sits
   * before a special token); the closing tokens are left to the model or
   * to the parser's end-of-output rule. */
  static const struct force_fmt DEEPSEEK = {
      true, "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
            "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>function"
            "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>",
      "", "\n```json\n", "\n```", NULL};
  /* Harmony: the recipient is in the header, which <|message|> ends. */
  static const struct force_fmt HARMONY = {true, "<|channel|>commentary to=functions.", "",
                                           " <|constrain|>json<|message|>", "", NULL};
  switch (p) {
    case FAMILY_PARSER_HERMES: /* the Qwen3-Coder parser reads Hermes JSON calls too */
    case FAMILY_PARSER_QWEN3_CODER: return &HERMES;
    case FAMILY_PARSER_LLAMA3: return &LLAMA3;
    case FAMILY_PARSER_MISTRAL: return &MISTRAL;
    case FAMILY_PARSER_GRANITE: return &GRANITE;
    case FAMILY_PARSER_FUNCTIONARY: return &FUNCTIONARY;
    case FAMILY_PARSER_LFM2: return &LFM2;
    case FAMILY_PARSER_DEEPSEEK: return &DEEPSEEK;
    case FAMILY_PARSER_HARMONY: return &HARMONY;
    default: return NULL;
  }
}

/* Appends raw text as a GBNF literal and a space (nothing when empty). */
static int gbnf_lit(buf *b, const char *s) {
  if (!*s) return 0;
  int rc = buf_append_byte(b, '"');
  for (; *s && !rc; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') rc = buf_appendf(b, "\\%c", c);
    else if (c < 0x20 || c == 0x7f) rc = buf_appendf(b, "\\x%02X", c);
    else rc = buf_append_byte(b, (char)c);
  }
  return rc ? rc : buf_append_str(b, "\" ");
}

/* The rule ids of the alternatives of "r0 ::= rA | rB ...", the anyOf that
 * json_schema_to_gbnf makes the first rule of the schema {"anyOf": [...]};
 * ERR_INTERNAL when the text has another shape. */
static int anyof_rules(const char *text, size_t n, int *ids) {
  const char *at = strncmp(text, "r0 ::= ", 7) == 0 ? text : strstr(text, "\nr0 ::= ");
  if (!at) return err_set(ERR_INTERNAL, "tool-call grammar: no anyOf rule");
  at += at == text ? 7 : 8;
  for (size_t i = 0; i < n; i++) {
    while (*at == ' ' || (i && *at == '|')) at++;
    char *end;
    if (*at != 'r' || at[1] < '0' || at[1] > '9') return err_set(ERR_INTERNAL, "tool-call grammar: odd anyOf rule");
    long id = strtol(at + 1, &end, 10);
    ids[i] = (int)id;
    at = end;
  }
  while (*at == ' ') at++;
  return *at == '\n' ? 0 : err_set(ERR_INTERNAL, "tool-call grammar: odd anyOf rule");
}

int gen_chat_force_tools(const manager_model *mm, const gen_chat *c, const char *name, gen_params *g) {
  if ((c->tool_choice != GEN_TOOL_REQUIRED && c->tool_choice != GEN_TOOL_FUNCTION) || g->format != GEN_FORMAT_TEXT)
    return 0;
  if (!json_is_array(c->tools) || !json_array_size(c->tools)) return 0;
  const struct force_fmt *ff = force_fmt_of(chat_tool_syntax(&mm->fam));
  if (!ff) /* every syntax chat_tool_syntax gives has a row */
    return err_set(ERR_INTERNAL, "model '%s': no way to force a call in its tool-call syntax", mm->name);
  json_t *alts = json_array(), *names = json_array();
  size_t i;
  json_t *tool;
  int rc = alts && names ? 0 : err_set(ERR_NOMEM, "out of memory");
  json_array_foreach(c->tools, i, tool) {
    if (rc) break;
    const char *n = json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
    if (!n || (c->tool_choice == GEN_TOOL_FUNCTION && (!name || strcmp(n, name) != 0))) continue;
    json_t *sch = ff->named ? params_schema(tool) : call_schema(tool, ff->args_key);
    if (!sch || json_array_append_new(alts, sch) || json_array_append_new(names, json_string(n)))
      rc = err_set(ERR_NOMEM, "out of memory");
  }
  size_t n_alt = json_array_size(alts);
  if (!rc && !n_alt) rc = err_set(ERR_NOT_FOUND, "tool_choice: no tool named '%.128s' in tools", name ? name : "");
  json_t *schema = rc ? NULL : json_pack("{s:O}", "anyOf", alts);
  json_decref(alts);
  char *text = NULL;
  size_t len = 0;
  if (!rc) rc = schema ? json_schema_to_gbnf(schema, &text, &len) : err_set(ERR_NOMEM, "out of memory");
  json_decref(schema);
  /* The schema's start rule is replaced by ours, which wraps r0 (the anyOf)
   * or its alternatives. */
  char *line = rc ? NULL : strstr(text, "root ::= ");
  if (!rc && (!line || (line != text && line[-1] != '\n'))) rc = err_set(ERR_INTERNAL, "tool-call grammar: no root rule");
  int *ids = rc || !ff->named ? NULL : calloc(n_alt, sizeof *ids);
  if (!rc && ff->named && !ids) rc = err_set(ERR_NOMEM, "out of memory");
  if (!rc && ids) rc = anyof_rules(text, n_alt, ids);
  buf out = BUF_INIT, pre = BUF_INIT;
  if (!rc) {
    /* A template that opened the think block: close it first, so that the
     * parser reads the call as a call and not as reasoning. */
    outparse_config pc;
    chat_parser_config(mm, c, &pc);
    if (pc.starts_in_reasoning && pc.think_close) buf_appendf(&pre, "%s\n\n", pc.think_close);
    buf_append_str(&pre, ff->prefill);
    buf_append(&out, text, (size_t)(line - text));
    buf_append_str(&out, "root ::= ");
    if (!ff->named) {
      gbnf_lit(&out, ff->open);
      buf_append_str(&out, "r0 ");
    } else if (n_alt == 1) {
      buf_appendf(&pre, "%s%s%s", ff->open, json_string_value(json_array_get(names, 0)), ff->mid);
      buf_appendf(&out, "r%d ", ids[0]);
    } else {
      gbnf_lit(&out, ff->open);
      buf_append_str(&out, "( ");
      for (size_t k = 0; k < n_alt; k++) {
        if (k) buf_append_str(&out, "| ");
        gbnf_lit(&out, json_string_value(json_array_get(names, k)));
        gbnf_lit(&out, ff->mid);
        buf_appendf(&out, "r%d ", ids[k]);
      }
      buf_append_str(&out, ") ");
    }
    gbnf_lit(&out, ff->close);
    buf_append_byte(&out, '\n');
    if (!out.data || (pre.len && !pre.data)) rc = err_set(ERR_NOMEM, "out of memory");
  }
  free(ids);
  free(text);
  json_decref(names);
  if (rc) {
    buf_free(&out);
    buf_free(&pre);
    return rc;
  }
  free(g->gbnf);
  g->gbnf = out.data; /* buf's storage is a malloc'ed NUL-terminated string */
  free(g->prefill);
  g->prefill = pre.len ? pre.data : NULL;
  if (!pre.len) buf_free(&pre);
  g->format = GEN_FORMAT_GRAMMAR;
  g->format_param = "tool_choice";
  return 0;
}

/* ---- the job ---------------------------------------------------------------- */

struct parse_ctx {
  gen_job *j;
  int index;
};

struct gen_job {
  http_req *req;           /* not streaming */
  http_stream *s;          /* streaming */
  manager_model *mm;       /* a manager reference, released by job_free */
  gen_params g;            /* owned */
  grammar *gram;           /* owned; outlives h */
  engine_req *h;
  const gen_sink *sink;
  void *ctx;
  outparse **parsers;      /* [res.n] */
  struct parse_ctx *pcs;   /* [res.n] the parsers' callback contexts */
  buf *raw;                /* [res.n] everything generated per choice */
  gen_result res;
  tok_ids ids;             /* the prompt with gen_params.prefill's tokens
                              (empty without a prefill) */
  bool detached;           /* producer thread without a client stream */
  bool began;              /* first_event ran */
  int write_rc;            /* a streaming write failed: the client is gone */
  const char *prompt_param;
};

static _Atomic int g_n_streams; /* producer threads alive */

void gen_wait_streams(int timeout_ms) {
  for (int waited = 0; g_n_streams > 0 && waited < timeout_ms; waited += 10) usleep(10000);
}

manager_model *gen_job_model(const gen_job *j) { return j->mm; }
const gen_params *gen_job_params(const gen_job *j) { return &j->g; }
const gen_result *gen_job_result(const gen_job *j) { return &j->res; }
http_req *gen_job_req(gen_job *j) { return j->req; }
http_stream *gen_job_stream(gen_job *j) { return j->s; }

bool gen_choice_has_calls(const gen_choice *c) { return c->tool_calls && json_array_size(c->tool_calls) > 0; }

void gen_job_cancel(gen_job *j) {
  if (j && j->h) engine_req_cancel(j->h);
}

int gen_job_write_sse_raw(gen_job *j, const char *event, const char *data, size_t len) {
  if (!j->s) return j->detached ? 0 : ERR_INVALID;
  if (!j->write_rc) j->write_rc = http_stream_sse(j->s, event, data, len);
  return j->write_rc;
}

int gen_job_write_sse(gen_job *j, const char *event, const json_t *v) {
  char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
  if (!text) return j->write_rc ? j->write_rc : ERR_NOMEM;
  int rc = gen_job_write_sse_raw(j, event, text, strlen(text));
  free(text);
  return rc;
}

int gen_job_write_ndjson(gen_job *j, const json_t *v) {
  if (!j->s) return j->detached ? 0 : ERR_INVALID;
  char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
  if (!text) return j->write_rc ? j->write_rc : ERR_NOMEM;
  if (!j->write_rc) j->write_rc = http_stream_ndjson(j->s, text, strlen(text));
  free(text);
  return j->write_rc;
}

bool gen_job_answer_error(gen_job *j, const gen_result *r) {
  if (!r->err_code) return false;
  api_error(j->req, 0, r->err_code, r->err_msg, r->err_code == ERR_CONTEXT ? j->prompt_param : NULL);
  return true;
}

void gen_job_answer_json(gen_job *j, json_t *body) {
  if (body) api_respond_json(j->req, 200, body);
  else api_error(j->req, 500, ERR_NOMEM, "out of memory", NULL);
  json_decref(body);
}

/* A sink callback's result: a failure marks the client gone. */
static void note(gen_job *j, int rc) {
  if (rc && !j->write_rc) j->write_rc = rc;
}

/* Output-parser events of one choice: kept in the choice, and streamed. */
static void on_parse(void *arg, const outparse_event *ev) {
  gen_job *j = ((struct parse_ctx *)arg)->j;
  int ix = ((struct parse_ctx *)arg)->index;
  gen_choice *c = &j->res.ch[ix];
  const gen_sink *k = j->sink;
  bool live = (j->s || j->detached) && !j->write_rc;
  switch (ev->kind) {
    case OUTPARSE_TEXT:
    case OUTPARSE_REASONING: {
      bool r = ev->kind == OUTPARSE_REASONING;
      buf_append(r ? &c->reasoning : &c->content, ev->text, ev->len);
      if (live && ev->len && k->on_text) note(j, k->on_text(j->ctx, j, ix, r, ev->text, ev->len));
      return;
    }
    case OUTPARSE_TOOL_CALL_BEGIN: {
      if (!c->tool_calls) c->tool_calls = json_array();
      json_t *call = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", ev->id, "type", "function", "function", "name",
                               ev->name, "arguments", "");
      if (c->tool_calls && call) json_array_append_new(c->tool_calls, call);
      else json_decref(call);
      if (live && k->on_tool_begin) note(j, k->on_tool_begin(j->ctx, j, ix, ev->tool_index, ev->id, ev->name));
      return;
    }
    case OUTPARSE_TOOL_CALL_ARGS: {
      json_t *call = c->tool_calls ? json_array_get(c->tool_calls, (size_t)ev->tool_index) : NULL;
      json_t *fn = call ? json_object_get(call, "function") : NULL;
      const char *old = fn ? json_string_value(json_object_get(fn, "arguments")) : NULL;
      if (old) {
        buf b = BUF_INIT;
        buf_append_str(&b, old);
        buf_append(&b, ev->text, ev->len);
        json_object_set_new(fn, "arguments", json_stringn(b.data ? b.data : "", b.len));
        buf_free(&b);
      }
      if (live && ev->len && k->on_tool_args) note(j, k->on_tool_args(j->ctx, j, ix, ev->tool_index, ev->text, ev->len));
      return;
    }
    case OUTPARSE_TOOL_CALL_END:
      if (live && k->on_tool_end) note(j, k->on_tool_end(j->ctx, j, ix, ev->tool_index));
      return;
  }
}

static void on_event(gen_job *j, engine_event *ev) {
  if (ev->type == ENGINE_EVENT_USAGE) {
    j->res.n_prompt = ev->n_prompt;
    j->res.n_cached = ev->n_cached;
    j->res.n_completion = ev->n_completion;
    j->res.t_first_ns = ev->t_first_ns;
    j->res.t_last_ns = ev->t_last_ns;
    return;
  }
  if (ev->index < 0 || ev->index >= j->res.n) return;
  int ix = ev->index;
  gen_choice *c = &j->res.ch[ix];
  if (ev->type == ENGINE_EVENT_TEXT_DELTA) {
    if (ev->n_tokens) {
      int32_t *grown = realloc(c->tokens, (c->n_tokens + ev->n_tokens) * sizeof *grown);
      if (grown) {
        memcpy(grown + c->n_tokens, ev->tokens, ev->n_tokens * sizeof *grown);
        c->tokens = grown;
        c->n_tokens += ev->n_tokens;
      }
    }
    if (ev->logprobs && ev->n_tokens && j->sink->on_logprobs && !j->write_rc)
      note(j, j->sink->on_logprobs(j->ctx, j, ix, ev->logprobs, ev->n_tokens));
    if (ev->n_text) {
      buf_append(&j->raw[ix], ev->text, ev->n_text);
      if (!c->parse_failed && outparse_feed(j->parsers[ix], ev->text, ev->n_text)) c->parse_failed = true;
    }
    return;
  }
  /* FINISH */
  if (!c->parse_failed && outparse_finish(j->parsers[ix])) c->parse_failed = true;
  if (c->parse_failed && !j->s && !j->detached) { /* answer the raw text rather than nothing */
    buf_reset(&c->content);
    buf_reset(&c->reasoning);
    if (j->raw[ix].len) buf_append(&c->content, j->raw[ix].data, j->raw[ix].len);
    json_decref(c->tool_calls);
    c->tool_calls = NULL;
  }
  c->finished = true;
  c->finish = ev->finish;
  c->stop_index = ev->stop_index;
  if (ev->finish == ENGINE_FINISH_ERROR && !j->res.err_code) {
    j->res.err_code = ev->err_code ? ev->err_code : ERR_INTERNAL;
    j->res.err_msg = str_dup(ev->err_msg ? ev->err_msg : err_message(j->res.err_code));
  }
  if ((j->s || j->detached) && !j->write_rc && ev->finish != ENGINE_FINISH_ERROR && j->sink->on_choice_end)
    note(j, j->sink->on_choice_end(j->ctx, j, c));
}

/* The stream's cancel callback (client gone, server stopping): stop the
 * engine request; its FINISH then ends consume. */
static void on_stream_cancel(void *arg) { engine_req_cancel(((gen_job *)arg)->h); }

/* Runs once, at the engine's first event (first NULL: there was none):
 * the result takes the prompt's token counts as admitted (a sink that
 * reports them in its first event, Anthropic's message_start, sees the
 * cache split), then the parsers read the prefill, which opened the output
 * (a forced call's opener), after a streaming sink has had on_start. */
static void first_event(gen_job *j, const engine_event *first) {
  if (j->began) return;
  j->began = true;
  if (first && (first->type == ENGINE_EVENT_TEXT_DELTA || first->type == ENGINE_EVENT_USAGE)) {
    j->res.n_prompt = first->n_prompt;
    j->res.n_cached = first->n_cached;
  }
  const char *pre = j->g.prefill;
  for (int i = 0; pre && *pre && i < j->res.n; i++) {
    buf_append_str(&j->raw[i], pre);
    if (outparse_feed(j->parsers[i], pre, strlen(pre))) j->res.ch[i].parse_failed = true;
  }
}

static void consume(gen_job *j) {
  engine_event ev;
  for (;;) {
    int rc = engine_req_next(j->h, -1, &ev);
    if (rc == ERR_NOT_FOUND) break;
    if (rc == ERR_TIMEOUT) continue;
    if (rc) break;
    first_event(j, &ev);
    on_event(j, &ev);
    engine_event_free(&ev);
    if (j->s && j->write_rc) engine_req_cancel(j->h);
  }
  first_event(j, NULL);
  j->res.t_end_ns = time_mono_ns();
}

static void job_free(gen_job *j) {
  if (!j) return;
  if (j->h) engine_req_free(j->h);
  grammar_free(j->gram);
  if (j->sink && j->sink->free) j->sink->free(j->ctx);
  for (int i = 0; j->res.ch && i < j->res.n; i++) {
    gen_choice *c = &j->res.ch[i];
    if (j->parsers) outparse_free(j->parsers[i]);
    if (j->raw) buf_free(&j->raw[i]);
    buf_free(&c->content);
    buf_free(&c->reasoning);
    json_decref(c->tool_calls);
    free(c->tokens);
  }
  free(j->parsers);
  free(j->pcs);
  tok_ids_free(&j->ids);
  free(j->raw);
  free(j->res.ch);
  free(j->res.err_msg);
  gen_params_free(&j->g);
  manager_release(j->mm);
  free(j);
}

static void *stream_main(void *arg) {
  gen_job *j = arg;
  if (j->s) http_stream_on_cancel(j->s, on_stream_cancel, j);
  if (j->sink->on_start) note(j, j->sink->on_start(j->ctx, j));
  consume(j);
  if (j->res.n && j->res.ch[0].finish == ENGINE_FINISH_CANCELLED)
    LOG_INFO("gen", "stream cancelled (client gone) after %lld completion tokens", (long long)j->res.n_completion);
  if (j->sink->on_end) j->sink->on_end(j->ctx, j, &j->res);
  if (j->s) http_stream_close(j->s);
  job_free(j);
  g_n_streams--;
  return NULL;
}

/* Answers an error before the job started and frees everything. */
static int fail(http_req *req, gen_job *j, int status, int code, const char *msg, const char *param) {
  if (req) api_error(req, status, code, msg, param);
  else err_set(code ? code : ERR_INTERNAL, "%s", msg);
  job_free(j);
  return code ? code : ERR_INTERNAL;
}

int gen_run(http_req *req, manager_model *mm, gen_params *g, const tok_ids *ids, const outparse_config *pc,
            const gen_opts *opts, const gen_sink *sink, void *ctx) {
  gen_job *j = calloc(1, sizeof *j);
  if (!j) {
    if (req) api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    gen_params_free(g);
    if (sink->free) sink->free(ctx);
    manager_release(mm);
    return ERR_NOMEM;
  }
  j->mm = mm;
  j->g = *g;
  memset(g, 0, sizeof *g);
  j->sink = sink;
  j->ctx = ctx;
  j->prompt_param = opts->prompt_param ? opts->prompt_param : "messages";
  if (!mm->eng) {
    return fail(req, j, 400, ERR_UNSUPPORTED, "this model does not generate text (an embedding model)", "model");
  }
  /* The prefill's tokens end the prompt (j->ids, a copy; ids stays the
   * caller's). */
  if (j->g.prefill && *j->g.prefill) {
    int rc = 0;
    for (size_t i = 0; i < ids->n && !rc; i++) rc = tok_ids_push(&j->ids, ids->ids[i]);
    if (rc || tok_encode(mm->t, j->g.prefill, strlen(j->g.prefill), TOK_ENCODE_PARSE_SPECIAL, &j->ids)) {
      return fail(req, j, 500, ERR_NOMEM, "out of memory", NULL);
    }
    ids = &j->ids;
  }
  /* A prompt that cannot fit is refused before a stream opens, so streaming
   * clients get the same 400 as the others. */
  int64_t n_ctx = engine_n_ctx(mm->eng);
  if ((int64_t)ids->n >= n_ctx) {
    char msg[240];
    api_context_message(req ? api_dialect_of(req) : API_DIALECT_OPENAI, j->prompt_param, (int64_t)ids->n, n_ctx, msg,
                        sizeof msg);
    return fail(req, j, 400, ERR_CONTEXT, msg, j->prompt_param);
  }
  if (j->g.format != GEN_FORMAT_TEXT) {
    json_t *any = j->g.format == GEN_FORMAT_JSON ? json_pack("{s:s}", "type", "object") : NULL;
    int rc = j->g.format == GEN_FORMAT_GRAMMAR ? grammar_parse(j->g.gbnf, strlen(j->g.gbnf), "root", &j->gram)
                                              : json_schema_grammar(any ? any : j->g.schema, &j->gram);
    json_decref(any);
    if (rc) {
      char msg[600];
      snprintf(msg, sizeof msg, "%s: the JSON schema cannot be enforced: %s",
               j->g.format_param ? j->g.format_param : "format", err_detail());
      return fail(req, j, 400, rc, msg, j->g.format_param);
    }
    j->g.er.grammar = j->gram;
  }
  j->res.n = j->g.er.n > 0 ? j->g.er.n : 1;
  j->res.ch = calloc((size_t)j->res.n, sizeof *j->res.ch);
  j->parsers = calloc((size_t)j->res.n, sizeof *j->parsers);
  j->raw = calloc((size_t)j->res.n, sizeof *j->raw);
  struct parse_ctx *pcs = j->pcs = calloc((size_t)j->res.n, sizeof *pcs);
  if (!j->res.ch || !j->parsers || !j->raw || !pcs) {
    return fail(req, j, 500, ERR_NOMEM, "out of memory", NULL);
  }
  outparse_config plain = {.format = OUTPARSE_PLAIN};
  for (int i = 0; i < j->res.n; i++) {
    j->res.ch[i].index = i;
    j->res.ch[i].stop_index = -1;
    pcs[i] = (struct parse_ctx){.j = j, .index = i};
    if (outparse_new(pc ? pc : &plain, on_parse, &pcs[i], &j->parsers[i])) {
      return fail(req, j, 500, ERR_INTERNAL, err_detail(), NULL);
    }
  }
  j->g.er.prompt = ids->ids;
  j->g.er.n_prompt = ids->n;
  j->res.t_start_ns = time_mono_ns();
  int rc = engine_submit(mm->eng, &j->g.er, &j->h);
  j->g.er.prompt = NULL;
  j->g.er.n_prompt = 0;
  if (rc) {
    int status = rc == ERR_OVERLOADED ? 429 : rc == ERR_UNAVAILABLE ? 503 : 0;
    return fail(req, j, status, rc, err_detail(), NULL);
  }
  if (!opts->stream && !opts->detached) {
    j->req = req;
    consume(j);
    if (sink->on_end) sink->on_end(ctx, j, &j->res);
    j->req = NULL;
    job_free(j);
    return 0;
  }
  j->detached = opts->detached;
  if (!j->detached) j->s = http_stream_open(req, 200, opts->content_type, opts->stream_kind);
  if (!j->s && !j->detached) {
    return fail(req, j, 500, ERR_INTERNAL, "cannot open the response stream", NULL);
  }
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  g_n_streams++;
  rc = pthread_create(&t, &attr, stream_main, j);
  pthread_attr_destroy(&attr);
  if (rc) {
    g_n_streams--;
    LOG_WARN("gen", "cannot start a stream thread: %s", strerror(rc));
    engine_req_cancel(j->h);
    if (j->s) {
      http_stream_close(j->s);
      j->s = NULL;
      job_free(j);
      return 0; /* the stream was answered (and ended) */
    }
    return fail(req, j, 500, ERR_INTERNAL, "cannot start a producer thread", NULL);
  }
  return 0;
}
