/*
 * conversations.c - the OpenAI Conversations API (../shared/specs/openai.md
 * 4.6): a conversation is a stored list of items that Responses created
 * with `conversation` read as their history and append their input and
 * output to. Objects and items live in the SQLite store (store/).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/openai/resp.h"
#include "base/err.h"
#include "base/util.h"

json_t *resp_conversation_json(const store_conversation *c) {
  json_t *md = c->metadata ? json_loads(c->metadata, JSON_ALLOW_NUL, NULL) : NULL;
  return json_pack("{s:s, s:s, s:I, s:o}", "id", c->id, "object", "conversation", "created_at",
                   (json_int_t)c->created_at, "metadata", json_is_object(md) ? md : json_object());
}

static void not_found(http_req *req, const char *what, const char *id, const char *param) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s with id '%.128s' not found.", what, id ? id : "");
  api_error(req, 404, ERR_NOT_FOUND, msg, param);
}

/* Loads the path's conversation; answers 404 and returns nonzero when it
 * does not exist. */
static int load(http_req *req, store *st, store_conversation *c) {
  const char *id = http_req_param(req, "conversation_id");
  if (store_conversation_get(st, id, c)) {
    not_found(req, "Conversation", id, "conversation_id");
    return ERR_NOT_FOUND;
  }
  return 0;
}

static void answer_conversation(http_req *req, const store_conversation *c) {
  json_t *o = resp_conversation_json(c);
  if (o) api_respond_json(req, 200, o);
  else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
  json_decref(o);
}

/* metadata: an object of at most 16 string values. Returns its JSON text
 * (malloc'ed; NULL when absent) or answers 400. */
static int metadata_text(http_req *req, const json_t *body, bool required, char **out) {
  *out = NULL;
  const json_t *md = json_object_get(body, "metadata");
  if (!md || json_is_null(md)) {
    if (!required) return 0;
    api_error(req, 400, ERR_INVALID, "metadata: required field is missing", "metadata");
    return ERR_INVALID;
  }
  if (!json_is_object(md) || json_object_size(md) > 16) {
    api_error(req, 400, ERR_INVALID, "metadata: expected an object of at most 16 string values", "metadata");
    return ERR_INVALID;
  }
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)md, k, v) if (!json_is_string(v)) {
      api_error(req, 400, ERR_TYPE, "metadata: every value must be a string", "metadata");
      return ERR_TYPE;
    }
  if (!(*out = json_dumps(md, JSON_COMPACT))) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return ERR_NOMEM;
  }
  return 0;
}

/* The request's `items` (at most 20), normalized with ids; answers 400. */
static int items_of(http_req *req, const json_t *body, bool required, json_t **out) {
  *out = NULL;
  const json_t *items = json_object_get(body, "items");
  if (!items || json_is_null(items)) {
    if (!required) return 0;
    api_error(req, 400, ERR_INVALID, "items: required field is missing", "items");
    return ERR_INVALID;
  }
  if (!json_is_array(items) || json_array_size(items) > 20) {
    api_error(req, 400, ERR_INVALID, "items: expected an array of at most 20 items", "items");
    return ERR_INVALID;
  }
  int rc = resp_input_normalize(items, "items", out);
  if (rc) api_error(req, 400, rc, err_detail(), "items");
  return rc;
}

void openai_conversations_create(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  char *md = NULL;
  json_t *items = NULL;
  store_item *si = NULL;
  if (metadata_text(req, body, false, &md) || items_of(req, body, false, &items)) goto done;
  char id[64];
  openai_make_id(id, sizeof id, "conv_");
  store_conversation c = {.id = id, .created_at = time_wall_s(), .updated_at = time_wall_s(), .metadata = md};
  size_t n = json_array_size(items);
  si = n ? calloc(n, sizeof *si) : NULL;
  for (size_t i = 0; i < n; i++) {
    si[i].item_id = (char *)json_string_value(json_object_get(json_array_get(items, i), "id"));
    si[i].body = json_dumps(json_array_get(items, i), JSON_COMPACT);
    si[i].created_at = c.created_at;
  }
  int rc = (n && !si) ? ERR_NOMEM : store_conversation_create(oc->st, &c, si, n);
  if (rc == ERR_EXISTS) api_error(req, 400, rc, "items: two items share one id", "items");
  else if (rc) api_error_last(req, rc, NULL);
  else answer_conversation(req, &c);
  for (size_t i = 0; si && i < n; i++) free(si[i].body);
done:
  free(si);
  free(md);
  json_decref(items);
  json_decref(body);
}

void openai_conversations_get(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  store_conversation c;
  if (load(req, oc->st, &c)) return;
  answer_conversation(req, &c);
  store_conversation_free(&c);
}

void openai_conversations_update(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  store_conversation c;
  char *md = NULL;
  if (load(req, oc->st, &c)) goto out;
  if (metadata_text(req, body, true, &md)) goto done;
  int rc = store_conversation_update_metadata(oc->st, c.id, md, time_wall_s());
  if (rc) {
    api_error_last(req, rc, NULL);
    goto done;
  }
  free(c.metadata);
  c.metadata = md;
  md = NULL;
  answer_conversation(req, &c);
done:
  store_conversation_free(&c);
out:
  free(md);
  json_decref(body);
}

void openai_conversations_delete(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  store_conversation c;
  if (load(req, oc->st, &c)) return;
  int rc = store_conversation_delete(oc->st, c.id);
  if (rc) api_error_last(req, rc, NULL);
  else {
    json_t *o = json_pack("{s:s, s:s, s:b}", "id", c.id, "object", "conversation.deleted", "deleted", 1);
    api_respond_json(req, 200, o);
    json_decref(o);
  }
  store_conversation_free(&c);
}

void openai_conversations_items_add(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  store_conversation c;
  json_t *items = NULL;
  if (load(req, oc->st, &c)) goto out;
  if (items_of(req, body, true, &items)) goto done;
  int rc = resp_store_items(oc->st, NULL, NULL, c.id, items);
  if (rc == ERR_EXISTS) {
    api_error(req, 400, rc, "items: an item with this id is already in the conversation", "items");
    goto done;
  }
  if (rc) {
    api_error_last(req, rc, NULL);
    goto done;
  }
  size_t n = json_array_size(items);
  json_t *o = json_pack("{s:s, s:O, s:o, s:o, s:b}", "object", "list", "data", items, "first_id",
                        n ? json_incref(json_object_get(json_array_get(items, 0), "id")) : json_null(), "last_id",
                        n ? json_incref(json_object_get(json_array_get(items, n - 1), "id")) : json_null(), "has_more",
                        0);
  api_respond_json(req, 200, o);
  json_decref(o);
done:
  store_conversation_free(&c);
out:
  json_decref(items);
  json_decref(body);
}

void openai_conversations_items_list(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  store_conversation c;
  if (load(req, oc->st, &c)) return;
  store_page page;
  store_item_list l = {0};
  if (!resp_page_from_query(req, STORE_ORDER_DESC, &page)) {
    int rc = store_conversation_items_list(oc->st, c.id, &page, &l);
    if (rc == ERR_NOT_FOUND)
      api_error(req, 400, rc, "after/before: no item with that id in this conversation", page.after ? "after" : "before");
    else if (rc) api_error_last(req, rc, NULL);
    else {
      json_t *o = resp_list_json(&l);
      if (o) api_respond_json(req, 200, o);
      else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
      json_decref(o);
    }
  }
  store_item_list_free(&l);
  store_conversation_free(&c);
}

void openai_conversations_item_get(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  store_conversation c;
  if (load(req, oc->st, &c)) return;
  const char *item_id = http_req_param(req, "item_id");
  store_item it;
  if (store_conversation_item_get(oc->st, c.id, item_id, &it)) {
    not_found(req, "Item", item_id, "item_id");
  } else {
    json_t *o = json_loads(it.body, JSON_ALLOW_NUL, NULL);
    if (o) api_respond_json(req, 200, o);
    else api_error(req, 500, ERR_CORRUPT, "the stored item is not valid JSON", NULL);
    json_decref(o);
    store_item_free(&it);
  }
  store_conversation_free(&c);
}

void openai_conversations_item_delete(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  store_conversation c;
  if (load(req, oc->st, &c)) return;
  const char *item_id = http_req_param(req, "item_id");
  if (store_conversation_item_delete(oc->st, c.id, item_id)) not_found(req, "Item", item_id, "item_id");
  else answer_conversation(req, &c);
  store_conversation_free(&c);
}
