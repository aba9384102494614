/*
 * resp.h - internals shared by the Responses API (responses.c) and the
 * Conversations API (conversations.c): Responses items <-> canonical chat
 * messages, item ids, and store helpers. See docs/openai.md, "Responses".
 *
 * Items are kept as JSON objects in the shapes of the spec (section 4.3 and
 * 4.4 of ../shared/specs/openai.md): every stored item has an "id".
 */
#ifndef PARLEY_API_OPENAI_RESP_H
#define PARLEY_API_OPENAI_RESP_H

#include <jansson.h>
#include <stdbool.h>

#include "api/openai/openai.h"
#include "store/store.h"

/* Normalizes a request's `input` (a string, or an array of items, the
 * easy {"role","content"} form included) into full items with ids and
 * status: strings become a user message with one input_text part.
 * path names the field in errors ("input", "items"). ERR_TYPE/ERR_INVALID
 * with the JSON path in err_detail(). *out is a new array. */
int resp_input_normalize(const json_t *input, const char *path, json_t **out);

/* Appends the canonical chat messages (api/gen.h) for items to msgs.
 * reasoning items attach to the next assistant turn; consecutive
 * function_call items join one assistant turn. Image, audio and file
 * parts are ERR_UNSUPPORTED naming the part; item_reference too. */
int resp_items_to_messages(const json_t *items, const char *path, json_t *msgs);

/* Items of a stored response chain, oldest first: for each response from
 * the first of the chain to id, its input items then its output items.
 * ERR_NOT_FOUND naming the id when one is missing. */
int resp_chain_items(store *st, const char *id, json_t *items);

/* Every item of a conversation, oldest first (ERR_NOT_FOUND naming it). */
int resp_conversation_items(store *st, const char *conv_id, json_t *items);

/* Stores items (each with an "id") under a response (kind "input" or
 * "output") or a conversation (response_id NULL). */
int resp_store_items(store *st, const char *response_id, const char *kind, const char *conv_id, const json_t *items);

/* The list page of items (`after`, `before`, `limit` 1..100, `order`
 * asc|desc; default_order when absent): reads the query; 400 answered
 * (naming the parameter) and nonzero returned on a bad value. */
int resp_page_from_query(http_req *req, enum store_order default_order, store_page *page);

/* {"object":"list","data":[...],"first_id","last_id","has_more"} from a
 * store listing (bodies parsed back to JSON). NULL on allocation failure. */
json_t *resp_list_json(const store_item_list *l);

/* Route handlers of conversations.c. */
void openai_conversations_create(http_req *req, void *ctx);
void openai_conversations_get(http_req *req, void *ctx);
void openai_conversations_update(http_req *req, void *ctx);
void openai_conversations_delete(http_req *req, void *ctx);
void openai_conversations_items_add(http_req *req, void *ctx);
void openai_conversations_items_list(http_req *req, void *ctx);
void openai_conversations_item_get(http_req *req, void *ctx);
void openai_conversations_item_delete(http_req *req, void *ctx);

/* The conversation object {"id","object":"conversation","created_at","metadata"}. */
json_t *resp_conversation_json(const store_conversation *c);

#endif
