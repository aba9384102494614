/*
 * resp_tools.c - the tools of a Responses request: which ones the model
 * sees, under which function name, and how a call the model writes becomes
 * the output item the spec gives that tool type (and back, when the client
 * replays the call and its output as input).
 *
 * Tool types fall in three groups (../shared/specs/openai.md 4.2):
 *   - run by the client, shown to the model as function tools: function,
 *     custom (free-form input: the model sees one string argument "input"),
 *     namespace (a group of function/custom tools; a member is shown as
 *     "NS.NAME" - a dot no plain function name may hold, so names cannot
 *     collide), local_shell, shell, apply_patch and computer_use_preview /
 *     computer (each shown under a fixed name with a schema of its action);
 *   - hosted (web_search, file_search, code_interpreter, mcp, ...): parley
 *     cannot run them, so they are accepted and left out of what the model
 *     sees; a tool_choice forcing one is a 400;
 *   - anything else: a 400 naming the type.
 * KINDS[] holds the per-kind facts (tool type, call and output item types,
 * id prefixes, the fixed name and schema, the field that carries the
 * call's arguments); CALLS[]/OUTPUTS[] the item types history may hold.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/openai/resp.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"

/* Per-kind facts. args_field: the call item's field that holds the
 * model's arguments object (NULL: function calls carry them as JSON text
 * in "arguments"; custom calls carry the "input" string). */
struct kind_info {
  enum resp_tool_kind kind;
  const char *call_type, *output_type, *call_prefix;
  const char *fixed_name;  /* the name the model sees (NULL: the tool's own) */
  const char *description; /* for fixed-name tools */
  const char *params;      /* JSON schema of the arguments (fixed-name tools and custom) */
  const char *args_field;
};

static const struct kind_info KINDS[RESP_TOOL_KIND_COUNT] = {
    [RESP_TOOL_FUNCTION] = {RESP_TOOL_FUNCTION, "function_call", "function_call_output", "fc_", NULL, NULL, NULL, NULL},
    [RESP_TOOL_CUSTOM] = {RESP_TOOL_CUSTOM, "custom_tool_call", "custom_tool_call_output", "ctc_", NULL, NULL,
                          "{\"type\":\"object\",\"properties\":{\"input\":{\"type\":\"string\"}},"
                          "\"required\":[\"input\"],\"additionalProperties\":false}",
                          NULL},
    [RESP_TOOL_LOCAL_SHELL] = {RESP_TOOL_LOCAL_SHELL, "local_shell_call", "local_shell_call_output", "lsh_",
                               "local_shell",
                               "Runs a command on the user's machine and returns its output. command is the program "
                               "and its arguments, one per element.",
                               "{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"array\",\"items\":{"
                               "\"type\":\"string\"}},\"working_directory\":{\"type\":\"string\"},\"timeout_ms\":{"
                               "\"type\":\"integer\"}},\"required\":[\"command\"]}",
                               "action"},
    [RESP_TOOL_SHELL] = {RESP_TOOL_SHELL, "shell_call", "shell_call_output", "sh_", "shell",
                         "Runs shell commands on the user's machine, one after the other, and returns what each "
                         "printed and its exit code.",
                         "{\"type\":\"object\",\"properties\":{\"commands\":{\"type\":\"array\",\"items\":{\"type\":"
                         "\"string\"}},\"timeout_ms\":{\"type\":\"integer\"},\"max_output_length\":{\"type\":"
                         "\"integer\"}},\"required\":[\"commands\"]}",
                         "action"},
    [RESP_TOOL_APPLY_PATCH] = {RESP_TOOL_APPLY_PATCH, "apply_patch_call", "apply_patch_call_output", "apc_",
                               "apply_patch",
                               "Creates, updates or deletes a file on the user's machine: type says which, path names "
                               "the file, diff is the patch (create_file and update_file).",
                               "{\"type\":\"object\",\"properties\":{\"type\":{\"enum\":[\"create_file\",\"update_file\","
                               "\"delete_file\"]},\"path\":{\"type\":\"string\"},\"diff\":{\"type\":\"string\"}},"
                               "\"required\":[\"type\",\"path\"]}",
                               "operation"},
    [RESP_TOOL_COMPUTER] = {RESP_TOOL_COMPUTER, "computer_call", "computer_call_output", "cu_", "computer",
                            "Controls the user's computer with one action per call (type: click, double_click, drag, "
                            "keypress, move, screenshot, scroll, type, wait); a screenshot of the result comes back.",
                            "{\"type\":\"object\",\"properties\":{\"type\":{\"enum\":[\"click\",\"double_click\",\"drag\","
                            "\"keypress\",\"move\",\"screenshot\",\"scroll\",\"type\",\"wait\"]},\"x\":{\"type\":"
                            "\"integer\"},\"y\":{\"type\":\"integer\"},\"button\":{\"enum\":[\"left\",\"right\",\"wheel\","
                            "\"back\",\"forward\"]},\"keys\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
                            "\"text\":{\"type\":\"string\"},\"scroll_x\":{\"type\":\"integer\"},\"scroll_y\":{\"type\":"
                            "\"integer\"}},\"required\":[\"type\"]}",
                            "action"},
};

/* Request tool types run by the client, and their kind. */
static const struct {
  const char *type;
  enum resp_tool_kind kind;
} CLIENT_TYPES[] = {
    {"function", RESP_TOOL_FUNCTION},       {"custom", RESP_TOOL_CUSTOM},
    {"local_shell", RESP_TOOL_LOCAL_SHELL}, {"shell", RESP_TOOL_SHELL},
    {"apply_patch", RESP_TOOL_APPLY_PATCH}, {"computer_use_preview", RESP_TOOL_COMPUTER},
    {"computer", RESP_TOOL_COMPUTER},       {"computer_use", RESP_TOOL_COMPUTER},
};

/* Hosted tool types (dated variants included): accepted, not shown. */
static const char *const HOSTED[] = {
    "web_search",       "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11",
    "file_search",      "code_interpreter",      "image_generation",   "mcp",
    "tool_search",      "programmatic_tool_calling",
};

static bool is_hosted(const char *type) {
  for (size_t i = 0; type && i < ARRAY_LEN(HOSTED); i++)
    if (strcmp(type, HOSTED[i]) == 0) return true;
  return false;
}

static const struct kind_info *client_kind(const char *type) {
  for (size_t i = 0; type && i < ARRAY_LEN(CLIENT_TYPES); i++)
    if (strcmp(type, CLIENT_TYPES[i].type) == 0) return &KINDS[CLIENT_TYPES[i].kind];
  return NULL;
}

struct resp_tools {
  resp_tool *v; /* [n] */
  size_t n;
};

void resp_tools_free(resp_tools *t) {
  if (!t) return;
  for (size_t i = 0; i < t->n; i++) {
    free(t->v[i].exposed);
    free(t->v[i].name);
    free(t->v[i].ns);
  }
  free(t->v);
  free(t);
}

const resp_tool *resp_tools_find(const resp_tools *t, const char *exposed) {
  for (size_t i = 0; t && exposed && i < t->n; i++)
    if (strcmp(t->v[i].exposed, exposed) == 0) return &t->v[i];
  return NULL;
}

size_t resp_tools_count(const resp_tools *t) { return t ? t->n : 0; }

/* A custom tool whose format is a regex grammar: the input string must
 * match it whole, so the schema carries it as an anchored pattern (the
 * grammar sampler then enforces it on a forced call). Lark grammars are
 * only described to the model. */
static void custom_regex(json_t *params, const json_t *fmt) {
  const char *syntax = json_string_value(json_object_get(fmt, "syntax"));
  const char *def = json_string_value(json_object_get(fmt, "definition"));
  if (!syntax || strcmp(syntax, "regex") != 0 || !def) return;
  size_t n = strlen(def);
  buf pat = BUF_INIT;
  if (n >= 2 && def[0] == '^' && def[n - 1] == '$') buf_append_str(&pat, def);
  else buf_appendf(&pat, "^(%s)$", def);
  json_t *input = json_object_get(json_object_get(params, "properties"), "input");
  if (pat.data && input) json_object_set_new(input, "pattern", json_string(pat.data));
  buf_free(&pat);
}

/* Adds one client tool to the map and its function tool to chat. */
static int add_tool(resp_tools *t, json_t *chat, const json_t *tool, const struct kind_info *k, const char *ns,
                    const char *ns_desc, const char *path) {
  const char *name = json_string_value(json_object_get(tool, "name"));
  if (!k->fixed_name && (!name || !*name)) return err_set(ERR_INVALID, "%s.name: required string is missing", path);
  buf exposed = BUF_INIT;
  if (k->fixed_name) buf_append_str(&exposed, k->fixed_name);
  else if (ns) buf_appendf(&exposed, "%s.%s", ns, name);
  else buf_append_str(&exposed, name);
  if (!exposed.data) return err_set(ERR_NOMEM, "out of memory");
  if (resp_tools_find(t, exposed.data)) {
    int rc = err_set(ERR_INVALID, "%s: a tool named '%.128s' is already offered", path, exposed.data);
    buf_free(&exposed);
    return rc;
  }
  /* What the model reads. */
  buf desc = BUF_INIT;
  const char *d = json_string_value(json_object_get(tool, "description"));
  if (ns_desc && *ns_desc) buf_appendf(&desc, "%s ", ns_desc);
  if (k->description) buf_append_str(&desc, k->description);
  if (d) buf_append_str(&desc, d);
  if (k->kind == RESP_TOOL_COMPUTER) {
    const json_t *w = json_object_get(tool, "display_width"), *h = json_object_get(tool, "display_height");
    const char *env = json_string_value(json_object_get(tool, "environment"));
    if (json_is_integer(w) && json_is_integer(h))
      buf_appendf(&desc, " The display is %lldx%lld pixels.", (long long)json_integer_value(w),
                  (long long)json_integer_value(h));
    if (env) buf_appendf(&desc, " Environment: %.32s.", env);
  }
  if (k->kind == RESP_TOOL_CUSTOM) {
    const json_t *fmt = json_object_get(tool, "format");
    const char *def = json_string_value(json_object_get(fmt, "definition"));
    const char *syntax = json_string_value(json_object_get(fmt, "syntax"));
    if (def) buf_appendf(&desc, "%sThe input follows this %s grammar:\n%s", desc.len ? "\n" : "", syntax ? syntax : "",
                         def);
  }
  json_t *params = NULL;
  if (k->params) params = json_loads(k->params, 0, NULL);
  if (k->kind == RESP_TOOL_CUSTOM && params) custom_regex(params, json_object_get(tool, "format"));
  else if (json_is_object(json_object_get(tool, "parameters"))) params = json_incref(json_object_get(tool, "parameters"));
  json_t *fn = json_pack("{s:s}", "name", exposed.data);
  if (fn && desc.len) json_object_set_new(fn, "description", json_stringn(desc.data, desc.len));
  if (fn && params) json_object_set(fn, "parameters", params);
  json_decref(params);
  buf_free(&desc);
  json_t *ct = fn ? json_pack("{s:s, s:o}", "type", "function", "function", fn) : NULL;
  resp_tool *grown = realloc(t->v, (t->n + 1) * sizeof *grown);
  if (!ct || !grown || json_array_append_new(chat, ct)) {
    if (grown) t->v = grown;
    buf_free(&exposed);
    return err_set(ERR_NOMEM, "out of memory");
  }
  t->v = grown;
  resp_tool *e = &t->v[t->n];
  memset(e, 0, sizeof *e);
  e->kind = k->kind;
  e->exposed = exposed.data; /* moved */
  e->name = str_dup(name ? name : k->fixed_name);
  e->ns = ns ? str_dup(ns) : NULL;
  t->n++;
  if (!e->name || (ns && !e->ns)) return err_set(ERR_NOMEM, "out of memory");
  return 0;
}

int resp_tools_parse(const json_t *tools, resp_tools **out, json_t **chat_tools) {
  *out = NULL;
  *chat_tools = NULL;
  if (!tools || json_is_null(tools)) return 0;
  if (!json_is_array(tools)) return err_set(ERR_TYPE, "tools: expected array, got %s", api_json_type_name(tools));
  resp_tools *t = calloc(1, sizeof *t);
  json_t *chat = json_array();
  int rc = t && chat ? 0 : err_set(ERR_NOMEM, "out of memory");
  size_t i;
  json_t *tool;
  json_array_foreach(tools, i, tool) {
    if (rc) break;
    char p[48];
    snprintf(p, sizeof p, "tools[%zu]", i);
    const char *type = json_string_value(json_object_get(tool, "type"));
    if (!type) {
      rc = err_set(ERR_INVALID, "%s.type: required string is missing", p);
      break;
    }
    if (is_hosted(type)) continue;
    if (strcmp(type, "namespace") == 0) {
      const char *ns = json_string_value(json_object_get(tool, "name"));
      const json_t *members = json_object_get(tool, "tools");
      if (!ns || !*ns) rc = err_set(ERR_INVALID, "%s.name: required string is missing", p);
      else if (strchr(ns, '.')) rc = err_set(ERR_INVALID, "%s.name: '%.64s' may not hold a dot", p, ns);
      else if (!json_is_array(members)) rc = err_set(ERR_INVALID, "%s.tools: required array is missing", p);
      size_t k;
      json_t *m;
      json_array_foreach(members, k, m) {
        if (rc) break;
        char mp[80];
        snprintf(mp, sizeof mp, "%s.tools[%zu]", p, k);
        const char *mt = json_string_value(json_object_get(m, "type"));
        if (!mt || (strcmp(mt, "function") != 0 && strcmp(mt, "custom") != 0)) {
          rc = err_set(ERR_INVALID, "%s.type: a namespace holds function and custom tools, not '%.64s'", mp,
                       mt ? mt : "?");
          break;
        }
        rc = add_tool(t, chat, m, client_kind(mt), ns, json_string_value(json_object_get(tool, "description")), mp);
      }
      continue;
    }
    const struct kind_info *k = client_kind(type);
    if (!k) {
      rc = err_set(ERR_INVALID,
                   "%s.type: '%.64s' is not a tool type (expected function, custom, namespace, local_shell, shell, "
                   "apply_patch, computer_use_preview, or a hosted tool such as web_search)",
                   p, type);
      break;
    }
    rc = add_tool(t, chat, tool, k, NULL, NULL, p);
  }
  if (rc || !json_array_size(chat)) {
    resp_tools_free(t);
    json_decref(chat);
    return rc;
  }
  *out = t;
  *chat_tools = chat;
  return 0;
}

json_t *resp_tools_echo(const json_t *tools) {
  if (!json_is_array(tools)) return json_array();
  json_t *out = json_deep_copy(tools);
  size_t i;
  json_t *tool;
  json_array_foreach(out, i, tool) {
    const char *type = json_string_value(json_object_get(tool, "type"));
    if (!type || strcmp(type, "function") != 0) continue;
    /* FunctionTool requires both keys; the API echoes strict true when
     * the request left it out. */
    if (!json_object_get(tool, "strict")) json_object_set_new(tool, "strict", json_true());
    if (!json_object_get(tool, "parameters")) json_object_set_new(tool, "parameters", json_null());
  }
  return out ? out : json_array();
}

int resp_tools_choice(const resp_tools *t, const json_t *tc, const char **forced) {
  *forced = NULL;
  const char *type = json_string_value(json_object_get(tc, "type"));
  if (!type) return 0;
  if (strcmp(type, "function") == 0 || strcmp(type, "custom") == 0) {
    const char *name = json_string_value(json_object_get(tc, "name"));
    const resp_tool *hit = resp_tools_find(t, name);
    /* A namespace member may be named without its namespace when that is
     * unambiguous. */
    for (size_t i = 0; !hit && name && t && i < t->n; i++)
      if (t->v[i].ns && strcmp(t->v[i].name, name) == 0) {
        if (hit) return err_set(ERR_INVALID, "tool_choice.name: '%.64s' is in more than one namespace", name);
        hit = &t->v[i];
      }
    if (!hit) return err_set(ERR_NOT_FOUND, "tool_choice: no tool named '%.128s' in tools", name ? name : "");
    *forced = hit->exposed;
    return 0;
  }
  const struct kind_info *k = client_kind(type);
  if (k && k->fixed_name) {
    const resp_tool *hit = resp_tools_find(t, k->fixed_name);
    if (!hit) return err_set(ERR_NOT_FOUND, "tool_choice: a %.64s tool is not in tools", type);
    *forced = hit->exposed;
    return 0;
  }
  if (is_hosted(type))
    return err_set(ERR_UNSUPPORTED,
                   "tool_choice: '%.64s' is a hosted tool, which parley cannot run (only tools the client runs are "
                   "offered to the model)",
                   type);
  return 0;
}

/* ---- calls: the model's arguments <-> the item ------------------------------- */

const char *resp_tool_call_type(const resp_tool *tool) {
  return KINDS[tool ? tool->kind : RESP_TOOL_FUNCTION].call_type;
}

const char *resp_tool_call_prefix(const resp_tool *tool) {
  return KINDS[tool ? tool->kind : RESP_TOOL_FUNCTION].call_prefix;
}

/* The fixed-name kinds' action/operation object from the model's
 * arguments: what the schema offered, the rest of the spec's fields null
 * (the SDK types them as present). */
static json_t *action_of(enum resp_tool_kind kind, json_t *args) {
  json_t *a = json_is_object(args) ? json_deep_copy(args) : json_object();
  if (!a) return NULL;
  static const char *const LOCAL_SHELL_NULLS[] = {"timeout_ms", "user", "working_directory"};
  static const char *const SHELL_NULLS[] = {"timeout_ms", "max_output_length"};
  switch (kind) {
    case RESP_TOOL_LOCAL_SHELL:
      json_object_set_new(a, "type", json_string("exec"));
      if (!json_is_array(json_object_get(a, "command"))) json_object_set_new(a, "command", json_array());
      if (!json_is_object(json_object_get(a, "env"))) json_object_set_new(a, "env", json_object());
      for (size_t i = 0; i < ARRAY_LEN(LOCAL_SHELL_NULLS); i++)
        if (!json_object_get(a, LOCAL_SHELL_NULLS[i])) json_object_set_new(a, LOCAL_SHELL_NULLS[i], json_null());
      break;
    case RESP_TOOL_SHELL:
      if (!json_is_array(json_object_get(a, "commands"))) json_object_set_new(a, "commands", json_array());
      for (size_t i = 0; i < ARRAY_LEN(SHELL_NULLS); i++)
        if (!json_object_get(a, SHELL_NULLS[i])) json_object_set_new(a, SHELL_NULLS[i], json_null());
      break;
    case RESP_TOOL_APPLY_PATCH:
      if (!json_is_string(json_object_get(a, "type"))) json_object_set_new(a, "type", json_string("update_file"));
      if (!json_is_string(json_object_get(a, "path"))) json_object_set_new(a, "path", json_string(""));
      if (strcmp(json_string_value(json_object_get(a, "type")), "delete_file") == 0) json_object_del(a, "diff");
      else if (!json_is_string(json_object_get(a, "diff"))) json_object_set_new(a, "diff", json_string(""));
      break;
    default:
      if (!json_is_string(json_object_get(a, "type"))) json_object_set_new(a, "type", json_string("screenshot"));
      break;
  }
  return a;
}

json_t *resp_tool_call_item(const resp_tool *tool, const char *id, const char *call_id, const char *name,
                            const char *args, const char *status) {
  enum resp_tool_kind kind = tool ? tool->kind : RESP_TOOL_FUNCTION;
  const struct kind_info *k = &KINDS[kind];
  json_t *it = json_pack("{s:s, s:s, s:s}", "type", k->call_type, "id", id, "call_id", call_id);
  if (!it) return NULL;
  json_t *parsed = args ? json_loads(args, JSON_DECODE_ANY, NULL) : NULL;
  int bad = 0;
  if (kind == RESP_TOOL_FUNCTION || kind == RESP_TOOL_CUSTOM) {
    bad |= json_object_set_new(it, "name", json_string(tool ? tool->name : name));
    if (tool && tool->ns) bad |= json_object_set_new(it, "namespace", json_string(tool->ns));
    if (kind == RESP_TOOL_FUNCTION) bad |= json_object_set_new(it, "arguments", json_string(args ? args : ""));
    else {
      /* The input is the "input" string the model was offered; a model
       * that wrote something else has its text passed on as it is. */
      const json_t *in = json_object_get(parsed, "input");
      bad |= json_object_set_new(it, "input", json_is_string(in) ? json_incref((json_t *)in) : json_string(args ? args : ""));
    }
  } else {
    bad |= json_object_set_new(it, k->args_field, action_of(kind, parsed));
    if (kind == RESP_TOOL_SHELL) bad |= json_object_set_new(it, "environment", json_null());
    if (kind == RESP_TOOL_COMPUTER) bad |= json_object_set_new(it, "pending_safety_checks", json_array());
  }
  /* apply_patch calls know only in_progress and completed. */
  if (kind == RESP_TOOL_APPLY_PATCH && strcmp(status, "incomplete") == 0) status = "completed";
  bad |= json_object_set_new(it, "status", json_string(status));
  json_decref(parsed);
  if (bad) {
    json_decref(it);
    return NULL;
  }
  return it;
}

/* ---- history items: calls and their outputs --------------------------------- */

/* Which kind a call item type belongs to, or -1. */
static int call_kind(const char *type) {
  for (int k = 0; type && k < RESP_TOOL_KIND_COUNT; k++)
    if (strcmp(type, KINDS[k].call_type) == 0) return k;
  return -1;
}

static int output_kind(const char *type) {
  for (int k = 0; type && k < RESP_TOOL_KIND_COUNT; k++)
    if (strcmp(type, KINDS[k].output_type) == 0) return k;
  return -1;
}

bool resp_item_is_call(const char *type) { return call_kind(type) >= 0; }
bool resp_item_is_output(const char *type) { return output_kind(type) >= 0; }

int resp_item_check(json_t *it, const char *type, const char *path) {
  int k = call_kind(type);
  if (k >= 0) {
    if (!json_is_string(json_object_get(it, "call_id")))
      return err_set(ERR_INVALID, "%s: a %s needs a string call_id", path, type);
    bool ok = true;
    if (k == RESP_TOOL_FUNCTION)
      ok = json_is_string(json_object_get(it, "name")) && json_is_string(json_object_get(it, "arguments"));
    else if (k == RESP_TOOL_CUSTOM)
      ok = json_is_string(json_object_get(it, "name")) && json_is_string(json_object_get(it, "input"));
    else ok = json_is_object(json_object_get(it, KINDS[k].args_field));
    if (!ok)
      return err_set(ERR_INVALID, "%s: a %s needs %s", path, type,
                     k == RESP_TOOL_FUNCTION ? "string name and arguments"
                     : k == RESP_TOOL_CUSTOM ? "string name and input"
                                             : KINDS[k].args_field);
    return 0;
  }
  k = output_kind(type);
  if (k < 0) return err_set(ERR_INVALID, "%s: '%.64s' is not a tool call or output item", path, type);
  /* local_shell_call_output names its call by id (the spec's shape). */
  const char *key = k == RESP_TOOL_LOCAL_SHELL && !json_object_get(it, "call_id") ? "id" : "call_id";
  if (!json_is_string(json_object_get(it, key)))
    return err_set(ERR_INVALID, "%s: a %s needs a string %s", path, type, key);
  const json_t *o = json_object_get(it, "output");
  if (k == RESP_TOOL_APPLY_PATCH) {
    if (!json_is_string(json_object_get(it, "status")))
      return err_set(ERR_INVALID, "%s: an apply_patch_call_output needs a status (completed or failed)", path);
  } else if (k == RESP_TOOL_COMPUTER) {
    return err_set(ERR_UNSUPPORTED,
                   "%s.output: a computer_call_output carries a screenshot, an image, which the models parley runs "
                   "cannot read",
                   path);
  } else if (!json_is_string(o) && !json_is_array(o)) {
    return err_set(ERR_INVALID, "%s: a %s needs an output", path, type);
  }
  return 0;
}

const char *resp_item_id_prefix(const char *type) {
  int k = call_kind(type);
  if (k >= 0) return KINDS[k].call_prefix;
  return output_kind(type) >= 0 ? "fco_" : "item_";
}

json_t *resp_item_call_to_chat(const json_t *it) {
  const char *type = json_string_value(json_object_get(it, "type"));
  int k = call_kind(type);
  if (k < 0) return NULL;
  buf name = BUF_INIT;
  const char *ns = json_string_value(json_object_get(it, "namespace"));
  const char *n = json_string_value(json_object_get(it, "name"));
  if (KINDS[k].fixed_name) buf_append_str(&name, KINDS[k].fixed_name);
  else if (ns && *ns) buf_appendf(&name, "%s.%s", ns, n ? n : "");
  else buf_append_str(&name, n ? n : "");
  json_t *args;
  if (k == RESP_TOOL_FUNCTION) args = json_incref(json_object_get(it, "arguments"));
  else if (k == RESP_TOOL_CUSTOM) args = json_pack("{s:O}", "input", json_object_get(it, "input"));
  else {
    /* The action as the model wrote it: without the type tag we add. */
    args = json_deep_copy(json_object_get(it, KINDS[k].args_field));
    if (k == RESP_TOOL_LOCAL_SHELL) json_object_del(args, "type");
  }
  json_t *call = name.data && args ? json_pack("{s:O, s:s, s:{s:s, s:O}}", "id", json_object_get(it, "call_id"), "type",
                                               "function", "function", "name", name.data, "arguments", args)
                                   : NULL;
  json_decref(args);
  buf_free(&name);
  return call;
}

/* A shell_call_output's output array as text: each command's stdout,
 * stderr and how it ended. */
static int shell_output_text(const json_t *o, buf *out) {
  size_t i;
  json_t *e;
  json_array_foreach(o, i, e) {
    const char *so = json_string_value(json_object_get(e, "stdout"));
    const char *se = json_string_value(json_object_get(e, "stderr"));
    const json_t *oc = json_object_get(e, "outcome");
    const char *ot = json_string_value(json_object_get(oc, "type"));
    if (i) buf_append_byte(out, '\n');
    if (so && *so) buf_appendf(out, "%s\n", so);
    if (se && *se) buf_appendf(out, "stderr:\n%s\n", se);
    if (ot && strcmp(ot, "timeout") == 0) buf_append_str(out, "(timed out)");
    else if (json_is_integer(json_object_get(oc, "exit_code")))
      buf_appendf(out, "(exit code %lld)", (long long)json_integer_value(json_object_get(oc, "exit_code")));
  }
  return 0;
}

int resp_item_output_to_chat(const json_t *it, const char *path, json_t **msg) {
  *msg = NULL;
  const char *type = json_string_value(json_object_get(it, "type"));
  int k = output_kind(type);
  if (k < 0) return err_set(ERR_INVALID, "%s: not a tool output item", path);
  char cp[96];
  snprintf(cp, sizeof cp, "%s.output", path);
  const json_t *o = json_object_get(it, "output");
  buf text = BUF_INIT;
  int rc = 0;
  if (k == RESP_TOOL_SHELL && json_is_array(o)) rc = shell_output_text(o, &text);
  else if (k == RESP_TOOL_APPLY_PATCH) {
    const char *st = json_string_value(json_object_get(it, "status"));
    buf_appendf(&text, "%s", st ? st : "completed");
    if (json_is_string(o) && json_string_length(o)) buf_appendf(&text, ": %s", json_string_value(o));
  } else rc = resp_content_text(o, cp, &text); /* computer_call_output never gets here: resp_item_check */
  const json_t *call_id = json_object_get(it, "call_id");
  if (!call_id) call_id = json_object_get(it, "id");
  if (!rc) {
    *msg = json_pack("{s:s, s:O, s:s%}", "role", "tool", "tool_call_id", call_id, "content", text.data ? text.data : "",
                     text.len);
    if (!*msg) rc = err_set(ERR_INVALID, "%s: a %s needs a call_id and an output", path, type);
  }
  buf_free(&text);
  return rc;
}
