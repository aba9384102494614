/*
 * request.h - the dialect input interface: one canonical request that every
 * chat-like handler's parser fills, and one driver that runs it.
 *
 * A dialect's parser is pure: `int X_parse(const json_t *body, gen_request
 * *out)` reads the vendor body and fills the canonical request (model name,
 * canonical messages and OpenAI-shaped tools, tool choice, thinking and
 * effort, sampling, stop strings, output format, stream flags). It answers
 * nothing: on failure it returns an ERR_* code with err_detail() naming
 * what is wrong and out->param the JSON path at fault, and is fuzzed
 * (tests/fuzz/). The driver, gen_handle, then does everything that needs
 * the model, in one order for every dialect: resolve the model, apply the
 * request's idle time to a model it loaded, the model-bound checks (choices
 * against the engine's slots, logit_bias against the vocabulary), the chat
 * template, prompt rendering, tool forcing and gen_run; every error on the
 * way is answered once, through the dialect's error writer (gen_front).
 *
 * The canonical normalisation of OpenAI-shaped input (chat messages, tools,
 * tool_choice), which OpenAI chat and LM Studio v0 share, lives here too:
 * one copy that every such dialect calls.
 *
 * Threads: parsers and the driver run on the HTTP pool's thread that
 * handles the request; nothing here keeps state between requests.
 */
#ifndef PARLEY_API_REQUEST_H
#define PARLEY_API_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/gen.h"
#include "engine/manager.h"
#include "http/http.h"

#define GEN_PARAM_MAX 256

/* No idle time asked (gen_request.ttl_ms): the model keeps its own. */
#define GEN_TTL_NONE INT64_MIN

typedef struct gen_request {
  const char *model;          /* borrowed from the body; NULL: the default */
  json_t *messages;           /* canonical messages (gen.h), owned */
  json_t *tools;              /* OpenAI-shaped tools, owned, or NULL */
  gen_chat chat;              /* points at messages/tools; tool_choice,
                                 thinking, effort, template kwargs, prefill */
  const char *prompt;         /* a raw prompt instead of messages (borrowed;
                                 tokenized as text, no template), or NULL */
  size_t prompt_len;
  const char *tool_name;      /* GEN_TOOL_FUNCTION: the forced tool's name
                                 (borrowed from the body), else NULL */
  gen_params p;               /* sampling, limits, stop strings, format */
  bool stream;
  bool include_usage;         /* stream_options.include_usage */
  bool logprobs;
  int32_t top_logprobs;
  bool one_call;              /* answer at most one tool call */
  bool images;                /* a message carries images (refused by the
                                 handler: the runtime reads none yet) */
  const json_t *logit_bias;   /* borrowed {"token id": bias} object, checked
                                 against the model's vocabulary and moved
                                 into p by the driver; NULL: none */
  int64_t ttl_ms;             /* idle time before a model this request
                                 loaded unloads (MANAGER_KEEP_ALIVE_FOREVER:
                                 never), or GEN_TTL_NONE */
  const char *prompt_param;   /* the field that holds the prompt, named by
                                 a template or context error ("messages") */
  char param[GEN_PARAM_MAX];  /* after a parse error: the JSON path at
                                 fault, "" when the message alone names it;
                                 kept by gen_request_free */
} gen_request;

/* Zeroes r, gen_params_init, thinking -1, ttl none, prompt_param
 * "messages". Parsers call it first. */
void gen_request_init(gen_request *r);
/* Frees what r owns (param is kept, so a failed parse can still be
 * answered naming it). */
void gen_request_free(gen_request *r);
/* Records a parse error: err_set(code, ...) and r->param = param (NULL:
 * ""). Returns code. */
int gen_request_fail(gen_request *r, int code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- canonical normalisation of OpenAI-shaped input ------------------------ */

/* body.messages (OpenAI chat shape) into r->messages, a canonical copy:
 * roles system, developer (rendered as system), user, assistant, tool,
 * function; content a string, null (assistant only) or text parts joined
 * with "\n"; a part of another kind is refused naming it (images: this
 * model has no vision). Pure. */
int gen_openai_messages(const json_t *body, gen_request *r);
/* body.tools (OpenAI function tools) into r->tools (a copy; every
 * function needs a name). Pure. */
int gen_openai_tools(const json_t *body, gen_request *r);
/* body.tool_choice: "none" | "auto" | "required" |
 * {"type":"function","function":{"name"}} (the name must be one of
 * r->tools: call after gen_openai_tools). Pure. */
int gen_openai_tool_choice(const json_t *body, gen_request *r);

/* ---- the driver --------------------------------------------------------------- */

/* A dialect's answers, for the driver's errors. */
typedef struct gen_front {
  /* Answers an error in the dialect's shape (status 0: from the code;
   * param the JSON path or NULL). NULL: api_error. */
  void (*error)(http_req *req, int status, int code, const char *message, const char *param);
  /* The message of a model name the manager does not know (%s: the name as
   * asked; NULL: the manager's own detail). */
  const char *not_found_fmt;
  /* The message when the model has no chat template (%s: its name). */
  const char *no_chat_fmt;
  /* Put before a template error's detail ("" or NULL: nothing). */
  const char *template_prefix;
  enum http_stream_kind stream_kind; /* HTTP_STREAM_SSE or _NDJSON */
} gen_front;

/* Answers an error the dialect's way (front->error or api_error). */
void gen_front_error(const gen_front *f, http_req *req, int status, int code, const char *message, const char *param);
/* Answers a parser's failure rc: 400 (500 out of memory) with err_detail()
 * and r->param. Returns rc. */
int gen_front_parse_error(const gen_front *f, http_req *req, const gen_request *r, int rc);

/* The checks that need the model: choices (p.er.n) within the engine's
 * slots, logit_bias keys token ids of its vocabulary (moved into p). Pure
 * but for reading mm; errors as a parser's. */
int gen_request_bind(gen_request *r, const manager_model *mm);

/* What the driver hands the dialect once the prompt is ready: the loaded
 * model (the caller's reference, to pass to gen_run or release), the
 * prompt's tokens and the output parser's configuration. */
typedef struct gen_ready {
  manager_model *mm;
  tok_ids ids;
  outparse_config pc;
} gen_ready;

/* Runs r up to the prompt: model resolution (mgr), its idle time, the
 * model-bound checks, then for a chat the chat template, prompt rendering
 * (r->chat) and tool forcing (into r->p), or for a raw prompt (r->prompt)
 * its tokens (special tokens as text, a BOS the vocabulary wants). On failure answers req through f and returns the
 * code (nothing to release). On success fills *out: the caller then runs
 * it (gen_handle) or answers from it (count_tokens) and calls
 * gen_ready_free. */
int gen_prepare(http_req *req, manager *mgr, const gen_front *f, gen_request *r, gen_ready *out);
void gen_ready_free(gen_ready *g);

/* Makes the dialect renderer's context once the model is known (the label
 * answered as "model", the prompt's size...); NULL: out of memory. */
typedef void *(*gen_make_ctx)(void *arg, const gen_request *r, const gen_ready *g);

/* The whole request: gen_prepare, then the renderer's context (make), then
 * gen_run with sink. r's parameters move to the job; the caller still
 * frees r (and its body). Every error is answered once, through f (the
 * ones gen_run finds in the request's dialect, as it does). */
void gen_handle(http_req *req, manager *mgr, const gen_front *f, gen_request *r, const gen_sink *sink,
                gen_make_ctx make, void *arg);

#endif
