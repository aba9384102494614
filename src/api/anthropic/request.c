/*
 * request.c - an Anthropic Messages (or count_tokens) body translated into
 * the canonical generation layer's terms (api/gen.h):
 *
 *   system (string or text blocks)      -> a leading "system" message
 *   user text blocks                    -> one "user" message (joined by \n)
 *   user tool_result blocks             -> "tool" messages with tool_call_id
 *                                          (before the turn's text)
 *   assistant text / thinking / tool_use -> one "assistant" message with
 *                                          content, reasoning_content and
 *                                          tool_calls (arguments as objects)
 *   tools [{name, description, input_schema}] -> OpenAI-shaped functions
 *   tool_choice auto|any|tool|none      -> gen_tool_choice (any/tool are
 *                                          then forced by a grammar where
 *                                          the family allows, gen.h)
 *   thinking enabled|adaptive|disabled  -> gen_chat.thinking 1|1|0 (enabled:
 *                                          budget_tokens -> gen_chat.effort)
 *   output_config.effort                -> gen_chat.effort
 *   max_tokens, temperature, top_p, top_k, stop_sequences,
 *   output_config.format (json_schema)  -> gen_params
 *
 * Consecutive turns of one role are merged, as the upstream API does; a
 * final assistant turn is a prefill the reply continues. Images and
 * documents are refused naming the block: no model this server runs has
 * vision. Every error names the JSON path of what is wrong. Pure: no I/O.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/anthropic/anthropic.h"
#include "api/api.h"
#include "base/err.h"
#include "base/util.h"

#define MAX_STOP_SEQUENCES 256

/* ---- content blocks ---------------------------------------------------------- */

static const char *block_type(const json_t *b, const char *path, int *rc) {
  const char *type = NULL;
  if (!json_is_object(b)) {
    *rc = err_set(ERR_TYPE, "%s: expected a content block object, got %s", path, api_json_type_name(b));
    return NULL;
  }
  if ((*rc = api_json_str(b, path, "type", true, &type))) return NULL;
  return type;
}

/* An image or document block: always refused, naming why. */
static int refuse_media(const json_t *b, const char *path, const char *type) {
  if (strcmp(type, "image") == 0) {
    const json_t *src = json_object_get(b, "source");
    const char *st = json_string_value(json_object_get(src, "type"));
    const char *mt = json_string_value(json_object_get(src, "media_type"));
    static const char *const ok[] = {"image/jpeg", "image/png", "image/gif", "image/webp"};
    bool known = false;
    for (size_t i = 0; mt && i < ARRAY_LEN(ok); i++) known |= strcmp(mt, ok[i]) == 0;
    if (st && strcmp(st, "base64") == 0 && !known)
      return err_set(ERR_INVALID, "%s.source.media_type: '%.64s' is not one of image/jpeg, image/png, image/gif, image/webp",
                     path, mt ? mt : "(missing)");
    return err_set(ERR_UNSUPPORTED, "%s: image content blocks are not supported: the models this server runs take no "
                   "image input", path);
  }
  return err_set(ERR_UNSUPPORTED, "%s: '%.64s' content blocks are not supported by this server", path, type);
}

/* The text of a text block into out (joined with '\n' after earlier text). */
static int take_text(const json_t *b, const char *path, buf *out) {
  const char *t = NULL;
  size_t n = 0;
  int rc = api_json_text(b, path, "text", true, &t, &n);
  if (rc) return rc;
  if (out->len) buf_append_byte(out, '\n');
  buf_append(out, t, n);
  return 0;
}

/* A string, or an array of text blocks (system, tool_result content). */
static int text_or_blocks(const json_t *v, const char *path, buf *out) {
  if (json_is_string(v)) { /* U+0000 included, as Anthropic takes it */
    buf_append(out, json_string_value(v), json_string_length(v));
    return 0;
  }
  if (!json_is_array(v))
    return err_set(ERR_TYPE, "%s: expected string or array of text blocks, got %s", path, api_json_type_name(v));
  size_t i;
  json_t *b;
  json_array_foreach(v, i, b) {
    char bp[160];
    snprintf(bp, sizeof bp, "%s[%zu]", path, i);
    int rc = 0;
    const char *type = block_type(b, bp, &rc);
    if (!type) return rc;
    if (strcmp(type, "text") == 0) {
      if ((rc = take_text(b, bp, out))) return rc;
    } else {
      char tp[176];
      snprintf(tp, sizeof tp, "%s.type", bp);
      return refuse_media(b, strcmp(type, "image") == 0 ? bp : tp, type);
    }
  }
  return 0;
}

/* ---- turns ------------------------------------------------------------------- */

/* Appends m to msgs, merging it into the previous message when both are
 * user or both assistant turns (consecutive same-role turns are one turn). */
static int append_turn(json_t *msgs, json_t *m) {
  json_t *last = json_array_size(msgs) ? json_array_get(msgs, json_array_size(msgs) - 1) : NULL;
  const char *role = json_string_value(json_object_get(m, "role"));
  const char *lrole = last ? json_string_value(json_object_get(last, "role")) : NULL;
  bool mergeable = lrole && strcmp(role, lrole) == 0 && (strcmp(role, "user") == 0 || strcmp(role, "assistant") == 0);
  if (!mergeable) return json_array_append_new(msgs, m) ? err_set(ERR_NOMEM, "out of memory") : 0;
  static const char *const keys[] = {"content", "reasoning_content"};
  for (size_t k = 0; k < ARRAY_LEN(keys); k++) { /* lengths: the text may hold U+0000 */
    const json_t *a = json_object_get(last, keys[k]);
    const json_t *b = json_object_get(m, keys[k]);
    if (!json_string_length(b)) continue;
    if (!json_string_length(a)) {
      json_object_set(last, keys[k], (json_t *)b);
      continue;
    }
    buf j = BUF_INIT;
    buf_append(&j, json_string_value(a), json_string_length(a));
    buf_append_byte(&j, '\n');
    buf_append(&j, json_string_value(b), json_string_length(b));
    json_object_set_new(last, keys[k], json_stringn(j.data ? j.data : "", j.len));
    buf_free(&j);
  }
  json_t *calls = json_object_get(m, "tool_calls");
  if (calls) {
    json_t *lc = json_object_get(last, "tool_calls");
    if (lc) json_array_extend(lc, calls);
    else json_object_set(last, "tool_calls", calls);
  }
  json_decref(m);
  return 0;
}

/* True when id names a tool_use of the preceding assistant turn. */
static bool call_known(const json_t *prev_calls, const char *id) {
  size_t i;
  json_t *c;
  json_array_foreach(prev_calls, i, c) {
    const char *cid = json_string_value(json_object_get(c, "id"));
    if (cid && strcmp(cid, id) == 0) return true;
  }
  return false;
}

/* A user (or system) turn: tool_result blocks become tool messages, the
 * text the turn's message. */
static int user_turn(const json_t *content, const char *path, const char *role, const json_t *prev_calls,
                     json_t *msgs) {
  buf text = BUF_INIT;
  int rc = 0;
  if (json_is_string(content) || strcmp(role, "system") == 0) {
    rc = text_or_blocks(content, path, &text);
  } else {
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
      char bp[128];
      snprintf(bp, sizeof bp, "%s[%zu]", path, i);
      const char *type = block_type(b, bp, &rc);
      if (!type) break;
      if (strcmp(type, "text") == 0) {
        if ((rc = take_text(b, bp, &text))) break;
      } else if (strcmp(type, "tool_result") == 0) {
        const char *id = NULL;
        if ((rc = api_json_str(b, bp, "tool_use_id", true, &id))) break;
        if (!call_known(prev_calls, id)) {
          rc = err_set(ERR_INVALID, "%s.tool_use_id: unexpected tool_use_id '%.80s': a tool_result must answer a "
                       "tool_use block of the immediately preceding assistant message", bp, id);
          break;
        }
        bool is_error = false;
        if ((rc = api_json_bool(b, bp, "is_error", false, &is_error)) && rc != ERR_NOT_FOUND) break;
        rc = 0;
        buf res = BUF_INIT, out = BUF_INIT;
        const json_t *rc_content = json_object_get(b, "content");
        char cp[160];
        snprintf(cp, sizeof cp, "%s.content", bp);
        if (rc_content && !json_is_null(rc_content)) rc = text_or_blocks(rc_content, cp, &res);
        /* the flag has no canonical field: the model reads it in the text */
        if (is_error) buf_append_str(&out, "Error: ");
        if (res.len) buf_append(&out, res.data, res.len);
        json_t *tm = rc ? NULL : json_pack("{s:s, s:s, s:s%}", "role", "tool", "tool_call_id", id, "content",
                                           out.data ? out.data : "", out.len);
        buf_free(&res);
        buf_free(&out);
        if (rc) break;
        if (!tm || json_array_append_new(msgs, tm)) {
          rc = err_set(ERR_NOMEM, "out of memory");
          break;
        }
      } else if (strcmp(type, "image") == 0 || strcmp(type, "document") == 0) {
        rc = refuse_media(b, bp, type);
        break;
      } else {
        rc = err_set(ERR_INVALID, "%s.type: '%.64s' is not a content block a user turn can hold (text, image, "
                     "tool_result)", bp, type);
        break;
      }
    }
  }
  if (!rc && (text.len || json_is_string(content) || strcmp(role, "system") == 0)) {
    json_t *m = json_pack("{s:s, s:s%}", "role", role, "content", text.data ? text.data : "", text.len);
    rc = m ? append_turn(msgs, m) : err_set(ERR_NOMEM, "out of memory");
  }
  buf_free(&text);
  return rc;
}

/* An assistant turn: text, thinking (-> reasoning_content), tool_use
 * (-> tool_calls with the input object as arguments). */
static int assistant_turn(const json_t *content, const char *path, json_t *msgs) {
  buf text = BUF_INIT, reasoning = BUF_INIT;
  json_t *calls = json_array();
  int rc = calls ? 0 : err_set(ERR_NOMEM, "out of memory");
  if (!rc && json_is_string(content)) {
    rc = text_or_blocks(content, path, &text);
  } else if (!rc) {
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
      char bp[128];
      snprintf(bp, sizeof bp, "%s[%zu]", path, i);
      const char *type = block_type(b, bp, &rc);
      if (!type) break;
      if (strcmp(type, "text") == 0) {
        if ((rc = take_text(b, bp, &text))) break;
      } else if (strcmp(type, "thinking") == 0) {
        const char *t = NULL;
        size_t n = 0;
        if ((rc = api_json_text(b, bp, "thinking", true, &t, &n))) break;
        if (reasoning.len && n) buf_append_byte(&reasoning, '\n');
        buf_append(&reasoning, t, n);
      } else if (strcmp(type, "redacted_thinking") == 0) {
        /* opaque by design: nothing a local template could render */
      } else if (strcmp(type, "tool_use") == 0) {
        const char *id = NULL, *name = NULL;
        if ((rc = api_json_str(b, bp, "id", true, &id)) || (rc = api_json_str(b, bp, "name", true, &name))) break;
        const json_t *input = json_object_get(b, "input");
        if (!json_is_object(input)) {
          rc = err_set(ERR_TYPE, "%s.input: expected object, got %s", bp, api_json_type_name(input));
          break;
        }
        json_t *call = json_pack("{s:s, s:s, s:{s:s, s:o}}", "id", id, "type", "function", "function", "name", name,
                                 "arguments", json_deep_copy(input));
        if (!call || json_array_append_new(calls, call)) {
          rc = err_set(ERR_NOMEM, "out of memory");
          break;
        }
      } else if (strcmp(type, "image") == 0 || strcmp(type, "document") == 0) {
        rc = refuse_media(b, bp, type);
        break;
      } else {
        rc = err_set(ERR_INVALID, "%s.type: '%.64s' is not a content block an assistant turn can hold (text, "
                     "thinking, redacted_thinking, tool_use)", bp, type);
        break;
      }
    }
  }
  if (!rc) {
    bool has_calls = json_array_size(calls) > 0;
    json_t *m = json_pack("{s:s, s:o}", "role", "assistant", "content",
                          text.len || !has_calls ? json_stringn(text.data ? text.data : "", text.len) : json_null());
    if (m && reasoning.len) json_object_set_new(m, "reasoning_content", json_stringn(reasoning.data, reasoning.len));
    if (m && has_calls) json_object_set(m, "tool_calls", calls);
    rc = m ? append_turn(msgs, m) : err_set(ERR_NOMEM, "out of memory");
  }
  json_decref(calls);
  buf_free(&text);
  buf_free(&reasoning);
  return rc;
}

static int parse_messages(const json_t *body, json_t *msgs, bool *prefill) {
  const json_t *list = json_object_get(body, "messages");
  if (!list || json_is_null(list)) return err_set(ERR_INVALID, "messages: required field is missing");
  if (!json_is_array(list)) return err_set(ERR_TYPE, "messages: expected array, got %s", api_json_type_name(list));
  if (!json_array_size(list)) return err_set(ERR_INVALID, "messages: must hold at least one message");
  size_t n = json_array_size(list);
  const json_t *prev_calls = NULL;
  *prefill = false;
  for (size_t i = 0; i < n; i++) {
    const json_t *m = json_array_get(list, i);
    char path[64];
    snprintf(path, sizeof path, "messages[%zu]", i);
    if (!json_is_object(m)) return err_set(ERR_TYPE, "%s: expected object, got %s", path, api_json_type_name(m));
    const char *role = NULL;
    int rc = api_json_str(m, path, "role", true, &role);
    if (rc) return rc;
    bool user = strcmp(role, "user") == 0, assistant = strcmp(role, "assistant") == 0;
    if (!user && !assistant && strcmp(role, "system") != 0)
      return err_set(ERR_INVALID, "%s.role: '%.32s' is not one of user, assistant", path, role);
    char cpath[80];
    snprintf(cpath, sizeof cpath, "%s.content", path);
    const json_t *content = json_object_get(m, "content");
    bool last = i + 1 == n;
    if (!content || json_is_null(content)) return err_set(ERR_INVALID, "%s: required field is missing", cpath);
    if (!json_is_string(content) && !json_is_array(content))
      return err_set(ERR_TYPE, "%s: expected string or array of content blocks, got %s", cpath,
                     api_json_type_name(content));
    if (json_is_array(content) && !json_array_size(content) && !(assistant && last))
      return err_set(ERR_INVALID, "%s: must not be empty (only a final assistant message may be)", cpath);
    size_t before = json_array_size(msgs);
    rc = assistant ? assistant_turn(content, cpath, msgs) : user_turn(content, cpath, role, prev_calls, msgs);
    if (rc) return rc;
    /* the tool calls the next user turn may answer */
    json_t *tail = json_array_size(msgs) ? json_array_get(msgs, json_array_size(msgs) - 1) : NULL;
    prev_calls = assistant ? json_object_get(tail, "tool_calls") : NULL;
    if (last && assistant && !json_object_get(tail, "tool_calls")) {
      /* a prefill: the reply continues it; an empty one is no prefill */
      const char *t = json_string_value(json_object_get(tail, "content"));
      if (t && *t) *prefill = true;
      else if (json_array_size(msgs) > before) json_array_remove(msgs, json_array_size(msgs) - 1);
    }
  }
  return 0;
}

/* ---- tools --------------------------------------------------------------------- */

static int parse_tools(const json_t *body, anthropic_req *r) {
  const json_t *tools = json_object_get(body, "tools");
  if (!tools || json_is_null(tools)) return 0;
  if (!json_is_array(tools)) return err_set(ERR_TYPE, "tools: expected array, got %s", api_json_type_name(tools));
  if (!(r->tools = json_array())) return err_set(ERR_NOMEM, "out of memory");
  size_t i;
  json_t *t;
  json_array_foreach(tools, i, t) {
    char path[48];
    snprintf(path, sizeof path, "tools[%zu]", i);
    if (!json_is_object(t)) return err_set(ERR_TYPE, "%s: expected object, got %s", path, api_json_type_name(t));
    const char *type = NULL, *name = NULL, *desc = NULL;
    int rc = api_json_str(t, path, "type", false, &type);
    if (rc && rc != ERR_NOT_FOUND) return rc;
    if (type && strcmp(type, "custom") != 0)
      return err_set(ERR_UNSUPPORTED, "%s.type: server tool '%.64s' is not supported by this server (only custom "
                     "tools with an input_schema)", path, type);
    if ((rc = api_json_str(t, path, "name", true, &name))) return rc;
    if (!*name) return err_set(ERR_INVALID, "%s.name: must not be empty", path);
    rc = api_json_str(t, path, "description", false, &desc);
    if (rc && rc != ERR_NOT_FOUND) return rc;
    const json_t *schema = json_object_get(t, "input_schema");
    if (!json_is_object(schema))
      return err_set(schema ? ERR_TYPE : ERR_INVALID, "%s.input_schema: %s%s", path,
                     schema ? "expected object, got " : "required field is missing",
                     schema ? api_json_type_name(schema) : "");
    /* keys in the order OpenAI clients write them: templates dump tools
     * with tojson, so the order is part of the prompt */
    json_t *fn = json_pack("{s:s}", "name", name);
    if (fn && desc) json_object_set_new(fn, "description", json_string(desc));
    if (fn) json_object_set(fn, "parameters", (json_t *)schema);
    json_t *ot = fn ? json_pack("{s:s, s:o}", "type", "function", "function", fn) : NULL;
    if (!ot || json_array_append_new(r->tools, ot)) return err_set(ERR_NOMEM, "out of memory");
  }
  return 0;
}

static bool tool_named(const json_t *tools, const char *name) {
  size_t i;
  json_t *t;
  json_array_foreach(tools, i, t) {
    const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
    if (n && strcmp(n, name) == 0) return true;
  }
  return false;
}

static int parse_tool_choice(const json_t *body, anthropic_req *r) {
  const json_t *tc = json_object_get(body, "tool_choice");
  r->chat.tool_choice = GEN_TOOL_AUTO;
  if (!tc || json_is_null(tc)) return 0;
  if (!json_is_object(tc)) return err_set(ERR_TYPE, "tool_choice: expected object, got %s", api_json_type_name(tc));
  const char *type = NULL;
  int rc = api_json_str(tc, "tool_choice", "type", true, &type);
  if (rc) return rc;
  bool dp = false;
  if ((rc = api_json_bool(tc, "tool_choice", "disable_parallel_tool_use", false, &dp)) && rc != ERR_NOT_FOUND)
    return rc;
  r->one_call = dp;
  if (strcmp(type, "auto") == 0) r->chat.tool_choice = GEN_TOOL_AUTO;
  else if (strcmp(type, "none") == 0) r->chat.tool_choice = GEN_TOOL_NONE;
  else if (strcmp(type, "any") == 0) r->chat.tool_choice = GEN_TOOL_REQUIRED;
  else if (strcmp(type, "tool") == 0) {
    const char *name = NULL;
    if ((rc = api_json_str(tc, "tool_choice", "name", true, &name))) return rc;
    if (!tool_named(r->tools, name))
      return err_set(ERR_INVALID, "tool_choice.name: no tool named '%.64s' in tools", name);
    r->chat.tool_choice = GEN_TOOL_FUNCTION;
    r->tool_name = name;
  } else {
    return err_set(ERR_INVALID, "tool_choice.type: '%.32s' is not one of auto, any, tool, none", type);
  }
  if ((r->chat.tool_choice == GEN_TOOL_REQUIRED || r->chat.tool_choice == GEN_TOOL_FUNCTION) &&
      !json_array_size(r->tools))
    return err_set(ERR_INVALID, "tool_choice: type '%s' needs at least one tool in tools", type);
  return 0;
}

/* ---- the rest of the fields ---------------------------------------------------- */

/* thinking: {"type":"enabled","budget_tokens":N} | {"type":"adaptive"} |
 * {"type":"disabled"}; absent: the model's default. The budget is checked
 * but not enforced separately: max_tokens caps thinking and answer. */
static int parse_thinking(const json_t *body, anthropic_req *r) {
  const json_t *th = json_object_get(body, "thinking");
  r->chat.thinking = -1;
  if (!th || json_is_null(th)) return 0;
  if (!json_is_object(th)) return err_set(ERR_TYPE, "thinking: expected object, got %s", api_json_type_name(th));
  const char *type = NULL;
  int rc = api_json_str(th, "thinking", "type", true, &type);
  if (rc) return rc;
  if (strcmp(type, "enabled") == 0) {
    long long budget = 0;
    if ((rc = api_json_int(th, "thinking", "budget_tokens", true, &budget))) return rc;
    if (budget < 1) return err_set(ERR_RANGE, "thinking.budget_tokens: %lld is out of range (at least 1)", budget);
    r->chat.thinking = 1;
    /* the level of a model whose reasoning has levels: the inverse of the
     * budgets LiteLLM gives OpenAI's efforts (low 1024, medium 2048, high
     * 4096), so an effort translated to a budget comes back as itself */
    r->chat.effort = budget <= 1024 ? GEN_EFFORT_LOW : budget <= 2048 ? GEN_EFFORT_MEDIUM : GEN_EFFORT_HIGH;
  } else if (strcmp(type, "adaptive") == 0) {
    r->chat.thinking = 1;
  } else if (strcmp(type, "disabled") == 0) {
    r->chat.thinking = 0;
  } else {
    return err_set(ERR_INVALID, "thinking.type: '%.32s' is not one of enabled, adaptive, disabled", type);
  }
  return 0;
}

static int num_in(const json_t *body, const char *key, double lo, double hi, double *out, bool *present) {
  *present = false;
  int rc = api_json_num(body, "", key, false, out);
  if (rc == ERR_NOT_FOUND) return 0;
  if (rc) return rc;
  if (!(*out >= lo && *out <= hi)) return err_set(ERR_RANGE, "%s: %g is out of range (expected %g to %g)", key, *out, lo, hi);
  *present = true;
  return 0;
}

static int parse_sampling(const json_t *body, anthropic_req *r) {
  long long max_tokens = 0;
  int rc = api_json_int(body, "", "max_tokens", true, &max_tokens);
  if (rc) return rc;
  if (max_tokens < 1 || max_tokens > INT32_MAX)
    return err_set(ERR_RANGE, "max_tokens: %lld is out of range (expected at least 1)", max_tokens);
  r->p.er.max_tokens = max_tokens;
  double v;
  bool has;
  if ((rc = num_in(body, "temperature", 0, 1, &v, &has))) return rc;
  if (has) r->p.er.sample.temperature = (float)v;
  if ((rc = num_in(body, "top_p", 0, 1, &v, &has))) return rc;
  if (has) r->p.er.sample.top_p = v > 0 ? (float)v : 1e-6f;
  long long k = 0;
  rc = api_json_int(body, "", "top_k", false, &k);
  if (rc && rc != ERR_NOT_FOUND) return rc;
  if (!rc && (k < 0 || k > INT32_MAX)) return err_set(ERR_RANGE, "top_k: %lld is out of range (expected 0 or more)", k);
  if (!rc) r->p.er.sample.top_k = (int32_t)k;
  uint64_t seed = 0;
  rand_bytes(&seed, sizeof seed);
  r->p.er.sample.seed = seed;

  const json_t *st = json_object_get(body, "stop_sequences");
  if (st && !json_is_null(st)) {
    if (!json_is_array(st))
      return err_set(ERR_TYPE, "stop_sequences: expected array of strings, got %s", api_json_type_name(st));
    if (json_array_size(st) > MAX_STOP_SEQUENCES)
      return err_set(ERR_RANGE, "stop_sequences: at most %d, got %zu", MAX_STOP_SEQUENCES, json_array_size(st));
    size_t i;
    json_t *s;
    json_array_foreach(st, i, s) {
      if (!json_is_string(s))
        return err_set(ERR_TYPE, "stop_sequences[%zu]: expected string, got %s", i, api_json_type_name(s));
      if (gen_params_add_stop(&r->p, json_string_value(s), json_string_length(s))) return ERR_NOMEM;
    }
  }
  if ((rc = api_json_bool(body, "", "stream", false, &r->stream)) && rc != ERR_NOT_FOUND) return rc;
  const json_t *md = json_object_get(body, "metadata");
  if (md && !json_is_null(md)) {
    if (!json_is_object(md)) return err_set(ERR_TYPE, "metadata: expected object, got %s", api_json_type_name(md));
    const char *uid = NULL;
    if ((rc = api_json_str(md, "metadata", "user_id", false, &uid)) && rc != ERR_NOT_FOUND) return rc;
  }
  return 0;
}

/* output_config: {"effort": ..., "format": {"type":"json_schema","schema":{}}}:
 * the schema is enforced by the grammar sampler. */
static int parse_output_config(const json_t *body, anthropic_req *r) {
  const json_t *oc = json_object_get(body, "output_config");
  if (!oc || json_is_null(oc)) return 0;
  if (!json_is_object(oc)) return err_set(ERR_TYPE, "output_config: expected object, got %s", api_json_type_name(oc));
  const char *effort = NULL;
  int rc = api_json_str(oc, "output_config", "effort", false, &effort);
  if (rc && rc != ERR_NOT_FOUND) return rc;
  static const char *const efforts[] = {"low", "medium", "high", "xhigh", "max"};
  bool ok = !effort;
  for (size_t i = 0; effort && i < ARRAY_LEN(efforts); i++) ok |= strcmp(effort, efforts[i]) == 0;
  if (!ok) return err_set(ERR_INVALID, "output_config.effort: '%.32s' is not one of low, medium, high, xhigh, max", effort);
  if (effort) r->chat.effort = gen_effort_of(effort); /* wins over a thinking budget */
  const json_t *f = json_object_get(oc, "format");
  if (!f || json_is_null(f)) return 0;
  if (!json_is_object(f))
    return err_set(ERR_TYPE, "output_config.format: expected object, got %s", api_json_type_name(f));
  const char *type = NULL;
  if ((rc = api_json_str(f, "output_config.format", "type", true, &type))) return rc;
  if (strcmp(type, "json_schema") != 0)
    return err_set(ERR_INVALID, "output_config.format.type: '%.32s' is not json_schema", type);
  const json_t *schema = json_object_get(f, "schema");
  if (!json_is_object(schema))
    return err_set(schema ? ERR_TYPE : ERR_INVALID, "output_config.format.schema: %s%s",
                   schema ? "expected object, got " : "required field is missing",
                   schema ? api_json_type_name(schema) : "");
  gen_params_set_format(&r->p, GEN_FORMAT_SCHEMA, schema, "output_config.format.schema");
  return 0;
}

/* ---- entry ------------------------------------------------------------------------ */

int anthropic_req_parse(const json_t *body, bool count, anthropic_req *r) {
  gen_request_init(r);
  int rc = api_json_str(body, "", "model", true, &r->model);
  if (!rc && !(r->messages = json_array())) rc = err_set(ERR_NOMEM, "out of memory");
  const json_t *sys = json_object_get(body, "system");
  if (!rc && sys && !json_is_null(sys)) {
    buf text = BUF_INIT;
    rc = text_or_blocks(sys, "system", &text);
    json_t *m = rc ? NULL : json_pack("{s:s, s:s%}", "role", "system", "content", text.data ? text.data : "", text.len);
    if (!rc && (!m || json_array_append_new(r->messages, m))) rc = err_set(ERR_NOMEM, "out of memory");
    buf_free(&text);
  }
  bool prefill = false;
  if (!rc) rc = parse_messages(body, r->messages, &prefill);
  if (!rc) rc = parse_tools(body, r);
  if (!rc) rc = parse_tool_choice(body, r);
  if (!rc) rc = parse_thinking(body, r);
  if (!rc) rc = parse_output_config(body, r);
  if (!rc && !count) rc = parse_sampling(body, r);
  if (rc) {
    anthropic_req_free(r);
    return rc;
  }
  r->chat.messages = r->messages;
  r->chat.tools = r->tools;
  r->chat.continue_final = prefill;
  return 0;
}

void anthropic_req_free(anthropic_req *r) { gen_request_free(r); }
