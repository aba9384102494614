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
#include "base/buf.h"
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

/* The text of a content value (a string, or text parts joined by
 * newlines); image, audio and file parts are ERR_UNSUPPORTED naming the
 * part at path. */
int resp_content_text(const json_t *c, const char *path, buf *out);

/* ---- tools (resp_tools.c) ---- */

/* The kinds of client-run tools; each maps to its own call/output items. */
enum resp_tool_kind {
  RESP_TOOL_FUNCTION = 0, /* function_call / function_call_output */
  RESP_TOOL_CUSTOM,       /* custom_tool_call / custom_tool_call_output */
  RESP_TOOL_LOCAL_SHELL,  /* local_shell_call / local_shell_call_output */
  RESP_TOOL_SHELL,        /* shell_call / shell_call_output */
  RESP_TOOL_APPLY_PATCH,  /* apply_patch_call / apply_patch_call_output */
  RESP_TOOL_COMPUTER,     /* computer_call / computer_call_output */
  RESP_TOOL_KIND_COUNT
};

/* One tool the model sees: exposed is its function name there ("NS.NAME"
 * for a namespace member, the fixed name of local_shell, shell,
 * apply_patch and computer); name and ns are the request's. */
typedef struct resp_tool {
  enum resp_tool_kind kind;
  char *exposed, *name, *ns;
} resp_tool;

typedef struct resp_tools resp_tools;

/* A request's `tools`: *chat_tools becomes the OpenAI-shaped function tools
 * the template renders (NULL when none is client-run), *out the map from
 * their names back to the tools (NULL likewise). Hosted tools are skipped;
 * an unknown type, a missing name or a duplicate is ERR_INVALID naming
 * tools[i]. */
int resp_tools_parse(const json_t *tools, resp_tools **out, json_t **chat_tools);
void resp_tools_free(resp_tools *t);
/* The tool whose exposed name is exposed, or NULL. */
const resp_tool *resp_tools_find(const resp_tools *t, const char *exposed);
size_t resp_tools_count(const resp_tools *t);
/* The request's tools as a response echoes them: function tools carry
 * strict (true when left out) and parameters (null when left out). */
json_t *resp_tools_echo(const json_t *tools);
/* The exposed name an object tool_choice forces (function/custom by name,
 * the fixed-name types by type), or NULL for other forms.
 * ERR_NOT_FOUND the tool is not offered; ERR_UNSUPPORTED a hosted tool. */
int resp_tools_choice(const resp_tools *t, const json_t *tc, const char **forced);

/* The output item of a call the model wrote to tool (NULL: an unknown
 * name, made a function_call of that name): id, call_id, the arguments'
 * JSON text, status. NULL on allocation failure. */
json_t *resp_tool_call_item(const resp_tool *tool, const char *id, const char *call_id, const char *name,
                            const char *args, const char *status);
const char *resp_tool_call_type(const resp_tool *tool);
const char *resp_tool_call_prefix(const resp_tool *tool);

/* Input items of the tool kinds: calls and outputs. */
bool resp_item_is_call(const char *type);
bool resp_item_is_output(const char *type);
/* Checks a call or output item's required fields (ERR_INVALID naming
 * path; a computer_call_output, whose screenshot no model here can read,
 * is ERR_UNSUPPORTED). */
int resp_item_check(json_t *it, const char *type, const char *path);
/* The id prefix for an item of this type that came without an id. */
const char *resp_item_id_prefix(const char *type);
/* A call item as a canonical tool call {"id","type":"function","function":
 * {"name": the exposed name, "arguments"}}, or NULL when it is not one. */
json_t *resp_item_call_to_chat(const json_t *it);
/* An output item as a canonical tool message ({"role":"tool",
 * "tool_call_id","content"}); errors name path. */
int resp_item_output_to_chat(const json_t *it, const char *path, json_t **msg);

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
