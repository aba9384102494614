/*
 * resp_items.c - Responses/Conversations items: normalizing a request's
 * input into full items with ids, turning items into canonical chat
 * messages for the template (api/gen.h), and reading and writing items in
 * the store (response chains for previous_response_id, conversation
 * histories, list pages).
 *
 * Items follow ../shared/specs/openai.md 4.3: message (roles user, system,
 * developer, assistant; content a string or parts), reasoning,
 * item_reference, and the tool calls and outputs of every client-run tool
 * kind (function_call, custom_tool_call, shell_call, ... and their
 * *_output; resp_tools.c knows their shapes). Ids: msg_, rs_, the call
 * kind's prefix, fco_ + 24 hex digits when the client sent none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/openai/resp.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"

static const char *item_type(const json_t *it) {
  const char *t = json_string_value(json_object_get(it, "type"));
  if (!t && json_object_get(it, "role")) return "message"; /* the easy form */
  return t;
}

static int set_id(json_t *it, const char *prefix) {
  if (json_is_string(json_object_get(it, "id")) && json_string_length(json_object_get(it, "id"))) return 0;
  char id[64];
  openai_make_id(id, sizeof id, prefix);
  return json_object_set_new(it, "id", json_string(id)) ? err_set(ERR_NOMEM, "out of memory") : 0;
}

/* A message item's content as a parts array (a string becomes one text
 * part of the role's kind). Every output_text part gets the annotations
 * and logprobs arrays the schema requires, so stored and listed items
 * carry them whatever the client sent. */
static int message_parts(json_t *it, const char *path) {
  json_t *c = json_object_get(it, "content");
  const char *role = json_string_value(json_object_get(it, "role"));
  if (json_is_string(c)) {
    const char *kind = role && strcmp(role, "assistant") == 0 ? "output_text" : "input_text";
    json_t *part = json_pack("{s:s, s:O}", "type", kind, "text", c);
    json_t *parts = part ? json_pack("[o]", part) : NULL;
    if (!parts || json_object_set_new(it, "content", parts)) return err_set(ERR_NOMEM, "out of memory");
    c = parts;
  }
  if (!json_is_array(c)) return err_set(ERR_TYPE, "%s.content: expected string or array of content parts", path);
  size_t i;
  json_t *part;
  json_array_foreach(c, i, part) {
    const char *t = json_string_value(json_object_get(part, "type"));
    if (!t || strcmp(t, "output_text") != 0) continue;
    static const char *const KEYS[] = {"annotations", "logprobs"};
    for (size_t k = 0; k < ARRAY_LEN(KEYS); k++)
      if (!json_is_array(json_object_get(part, KEYS[k])) && json_object_set_new(part, KEYS[k], json_array()))
        return err_set(ERR_NOMEM, "out of memory");
  }
  return 0;
}

int resp_input_normalize(const json_t *input, const char *path, json_t **out) {
  *out = NULL;
  json_t *items = json_array();
  if (!items) return err_set(ERR_NOMEM, "out of memory");
  int rc = 0;
  if (json_is_string(input)) {
    json_t *it = json_pack("{s:s, s:s, s:O, s:s}", "type", "message", "role", "user", "content", input, "status",
                           "completed");
    if (!it || json_array_append_new(items, it)) rc = err_set(ERR_NOMEM, "out of memory");
    else if (!(rc = message_parts(it, path))) rc = set_id(it, "msg_");
  } else if (json_is_array(input)) {
    size_t i;
    json_t *src;
    json_array_foreach(input, i, src) {
      char p[64];
      snprintf(p, sizeof p, "%s[%zu]", path, i);
      if (!json_is_object(src)) {
        rc = err_set(ERR_TYPE, "%s: expected an item object", p);
        break;
      }
      json_t *it = json_deep_copy(src);
      if (!it || json_array_append_new(items, it)) {
        rc = err_set(ERR_NOMEM, "out of memory");
        break;
      }
      const char *t = item_type(it);
      if (!t) {
        rc = err_set(ERR_INVALID, "%s.type: required string is missing", p);
        break;
      }
      if (strcmp(t, "message") == 0) {
        static const char *const roles[] = {"user", "system", "developer", "assistant"};
        const char *role = json_string_value(json_object_get(it, "role"));
        bool ok = false;
        for (size_t r = 0; role && r < ARRAY_LEN(roles); r++) ok |= strcmp(role, roles[r]) == 0;
        if (!ok) {
          rc = err_set(ERR_INVALID, "%s.role: expected one of user, system, developer, assistant", p);
          break;
        }
        json_object_set_new(it, "type", json_string("message"));
        if ((rc = message_parts(it, p)) || (rc = set_id(it, "msg_"))) break;
      } else if (resp_item_is_call(t) || resp_item_is_output(t)) {
        if ((rc = resp_item_check(it, t, p)) || (rc = set_id(it, resp_item_id_prefix(t)))) break;
      } else if (strcmp(t, "reasoning") == 0) {
        if ((rc = set_id(it, "rs_"))) break;
      } else if (strcmp(t, "item_reference") == 0) {
        rc = err_set(ERR_UNSUPPORTED, "%s: item_reference items are not supported; send the item itself", p);
        break;
      } else {
        rc = err_set(ERR_UNSUPPORTED, "%s.type: '%.64s' items are not supported locally", p, t);
        break;
      }
      if (!json_object_get(it, "status")) json_object_set_new(it, "status", json_string("completed"));
    }
  } else {
    rc = err_set(ERR_TYPE, "%s: expected string or array of items, got %s", path, api_json_type_name(input));
  }
  if (rc) {
    json_decref(items);
    return rc;
  }
  *out = items;
  return 0;
}

/* The text of a content value (string or parts). Image, audio and file
 * parts are refused, naming the part. */
int resp_content_text(const json_t *c, const char *path, buf *out) {
  if (json_is_string(c)) return buf_append(out, json_string_value(c), json_string_length(c));
  if (!json_is_array(c)) return err_set(ERR_TYPE, "%s: expected string or array of content parts", path);
  size_t k;
  json_t *part;
  json_array_foreach(c, k, part) {
    const char *t = json_string_value(json_object_get(part, "type"));
    const json_t *text = json_object_get(part, "text");
    if (t && strcmp(t, "refusal") == 0) text = json_object_get(part, "refusal");
    if (t && (strcmp(t, "input_text") == 0 || strcmp(t, "output_text") == 0 || strcmp(t, "text") == 0 ||
              strcmp(t, "refusal") == 0 || strcmp(t, "reasoning_text") == 0 || strcmp(t, "summary_text") == 0) &&
        json_is_string(text)) {
      if (k && out->len) buf_append_byte(out, '\n');
      buf_append(out, json_string_value(text), json_string_length(text));
      continue;
    }
    if (t) return err_set(ERR_UNSUPPORTED, "%s[%zu].type: content part type '%.64s' is not supported by this model", path, k, t);
    return err_set(ERR_INVALID, "%s[%zu]: expected a content part with a type", path, k);
  }
  return 0;
}

int resp_items_to_messages(const json_t *items, const char *path, json_t *msgs) {
  buf reasoning = BUF_INIT;
  size_t i;
  json_t *it;
  int rc = 0;
  json_array_foreach(items, i, it) {
    char p[64], cp[80];
    snprintf(p, sizeof p, "%s[%zu]", path, i);
    const char *t = item_type(it);
    json_t *last = json_array_size(msgs) ? json_array_get(msgs, json_array_size(msgs) - 1) : NULL;
    const char *last_role = last ? json_string_value(json_object_get(last, "role")) : NULL;
    if (t && strcmp(t, "reasoning") == 0) {
      snprintf(cp, sizeof cp, "%s.content", p);
      const json_t *c = json_object_get(it, "content");
      if (!c || json_is_null(c)) c = json_object_get(it, "summary");
      if (c && !json_is_null(c) && (rc = resp_content_text(c, cp, &reasoning))) break;
      continue;
    }
    if (t && strcmp(t, "message") == 0) {
      const char *role = json_string_value(json_object_get(it, "role"));
      snprintf(cp, sizeof cp, "%s.content", p);
      buf text = BUF_INIT;
      if ((rc = resp_content_text(json_object_get(it, "content"), cp, &text))) {
        buf_free(&text);
        break;
      }
      json_t *m = json_pack("{s:s, s:s%}", "role", role && strcmp(role, "developer") == 0 ? "system" : role, "content",
                            text.data ? text.data : "", text.len);
      buf_free(&text);
      if (m && role && strcmp(role, "assistant") == 0 && reasoning.len) {
        json_object_set_new(m, "reasoning_content", json_stringn(reasoning.data, reasoning.len));
        buf_reset(&reasoning);
      }
      if (!m || json_array_append_new(msgs, m)) {
        rc = err_set(ERR_NOMEM, "out of memory");
        break;
      }
      continue;
    }
    if (t && resp_item_is_call(t)) {
      json_t *call = resp_item_call_to_chat(it);
      if (!call) {
        rc = err_set(ERR_INVALID, "%s: a %s needs a call_id and its arguments", p, t);
        break;
      }
      /* Calls join the assistant turn they follow (or open one). */
      json_t *turn = last && last_role && strcmp(last_role, "assistant") == 0 ? last : NULL;
      if (!turn) {
        turn = json_pack("{s:s, s:n}", "role", "assistant", "content");
        if (!turn || json_array_append_new(msgs, turn)) {
          json_decref(call);
          rc = err_set(ERR_NOMEM, "out of memory");
          break;
        }
      }
      if (reasoning.len && !json_object_get(turn, "reasoning_content")) {
        json_object_set_new(turn, "reasoning_content", json_stringn(reasoning.data, reasoning.len));
        buf_reset(&reasoning);
      }
      json_t *calls = json_object_get(turn, "tool_calls");
      if (!calls) json_object_set_new(turn, "tool_calls", calls = json_array());
      json_array_append_new(calls, call);
      continue;
    }
    if (t && resp_item_is_output(t)) {
      json_t *m = NULL;
      if ((rc = resp_item_output_to_chat(it, p, &m))) break;
      if (json_array_append_new(msgs, m)) {
        rc = err_set(ERR_NOMEM, "out of memory");
        break;
      }
      continue;
    }
    rc = err_set(ERR_UNSUPPORTED, "%s.type: '%.64s' items are not supported locally", p, t ? t : "?");
    break;
  }
  buf_free(&reasoning);
  return rc;
}

/* Appends the parsed bodies of a listing to items. */
static int append_bodies(const store_item_list *l, json_t *items) {
  for (size_t i = 0; i < l->n_items; i++) {
    json_t *v = json_loads(l->items[i].body, JSON_ALLOW_NUL, NULL);
    if (!v) return err_set(ERR_CORRUPT, "stored item %s is not valid JSON", l->items[i].item_id);
    if (json_array_append_new(items, v)) return err_set(ERR_NOMEM, "out of memory");
  }
  return 0;
}

int resp_chain_items(store *st, const char *id, json_t *items) {
  /* Walk back to the first response, then replay forwards. */
  char **chain = NULL;
  size_t n = 0;
  int rc = 0;
  char *cur = str_dup(id);
  while (cur && !rc) {
    if (n >= 4096) {
      rc = err_set(ERR_TOO_LARGE, "previous_response_id: the chain of responses is longer than 4096");
      break;
    }
    store_response r;
    if ((rc = store_response_get(st, cur, &r))) {
      rc = err_set(ERR_NOT_FOUND, "Previous response with id '%.128s' not found.", cur);
      break;
    }
    char **grown = realloc(chain, (n + 1) * sizeof *chain);
    if (!grown) {
      store_response_free(&r);
      rc = err_set(ERR_NOMEM, "out of memory");
      break;
    }
    chain = grown;
    chain[n++] = cur;
    cur = r.previous_response_id ? str_dup(r.previous_response_id) : NULL;
    store_response_free(&r);
  }
  free(cur);
  for (size_t k = n; !rc && k-- > 0;) {
    static const char *const kinds[] = {"input", "output"};
    for (size_t q = 0; !rc && q < 2; q++) {
      store_page page = {.limit = STORE_PAGE_MAX, .order = STORE_ORDER_ASC};
      store_item_list l = {0};
      if (!(rc = store_response_items_list(st, chain[k], kinds[q], &page, &l))) rc = append_bodies(&l, items);
      store_item_list_free(&l);
    }
  }
  for (size_t k = 0; k < n; k++) free(chain[k]);
  free(chain);
  return rc;
}

int resp_conversation_items(store *st, const char *conv_id, json_t *items) {
  store_page page = {.limit = STORE_PAGE_MAX, .order = STORE_ORDER_ASC};
  store_item_list l = {0};
  int rc = store_conversation_items_list(st, conv_id, &page, &l);
  if (rc == ERR_NOT_FOUND) rc = err_set(ERR_NOT_FOUND, "Conversation with id '%.128s' not found.", conv_id);
  if (!rc) rc = append_bodies(&l, items);
  store_item_list_free(&l);
  return rc;
}

int resp_store_items(store *st, const char *response_id, const char *kind, const char *conv_id, const json_t *items) {
  size_t n = json_array_size(items);
  if (!n) return 0;
  store_item *si = calloc(n, sizeof *si);
  if (!si) return err_set(ERR_NOMEM, "out of memory");
  int rc = 0;
  int64_t now = time_wall_s();
  for (size_t i = 0; i < n && !rc; i++) {
    const json_t *it = json_array_get(items, i);
    si[i].item_id = (char *)json_string_value(json_object_get(it, "id"));
    si[i].kind = (char *)kind;
    si[i].created_at = now;
    if (!si[i].item_id) rc = err_set(ERR_INVALID, "item %zu has no id", i);
    else if (!(si[i].body = json_dumps(it, JSON_COMPACT))) rc = err_set(ERR_NOMEM, "out of memory");
  }
  if (!rc) rc = response_id ? store_response_items_append(st, response_id, si, n)
                            : store_conversation_items_append(st, conv_id, si, n);
  for (size_t i = 0; i < n; i++) free(si[i].body);
  free(si);
  return rc;
}

int resp_page_from_query(http_req *req, enum store_order default_order, store_page *page) {
  memset(page, 0, sizeof *page);
  page->order = default_order;
  page->limit = 20;
  const char *s = http_req_query(req, "limit");
  if (s) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > 100) {
      api_error(req, 400, ERR_RANGE, "limit: expected an integer from 1 to 100", "limit");
      return ERR_RANGE;
    }
    page->limit = (size_t)v;
  }
  if ((s = http_req_query(req, "order"))) {
    if (strcmp(s, "asc") == 0) page->order = STORE_ORDER_ASC;
    else if (strcmp(s, "desc") == 0) page->order = STORE_ORDER_DESC;
    else {
      api_error(req, 400, ERR_INVALID, "order: expected asc or desc", "order");
      return ERR_INVALID;
    }
  }
  if ((s = http_req_query(req, "after")) && *s) page->after = s;
  if ((s = http_req_query(req, "before")) && *s) page->before = s;
  return 0;
}

json_t *resp_list_json(const store_item_list *l) {
  json_t *data = json_array();
  if (!data || append_bodies(l, data)) {
    json_decref(data);
    return NULL;
  }
  json_t *list = json_pack("{s:s, s:o, s:b}", "object", "list", "data", data, "has_more", l->has_more);
  /* first_id/last_id are strings in the schema: an empty page omits them. */
  if (list && l->n_items &&
      (json_object_set_new(list, "first_id", json_string(l->items[0].item_id)) ||
       json_object_set_new(list, "last_id", json_string(l->items[l->n_items - 1].item_id)))) {
    json_decref(list);
    return NULL;
  }
  return list;
}
