/*
 * gen.h - the canonical generation layer that every dialect adapter shares
 * (OpenAI chat and completions, Anthropic messages, Ollama chat/generate,
 * LM Studio). An adapter translates its vendor JSON into
 *
 *   - gen_params: sampling, limits, stop strings, logit bias, output format
 *     (plain, any JSON object, or a JSON schema enforced by the grammar
 *     sampler), and
 *   - either canonical chat messages (gen_chat, rendered here through the
 *     model's own chat template) or a raw prompt it tokenizes itself,
 *
 * and hands them to gen_run together with a gen_sink: a table of callbacks
 * that renders canonical events (text and reasoning deltas, tool-call
 * begin/arguments/end, logprobs, per-choice finish, the end with usage and
 * timings) in the dialect's wire form. So a feature added here (a parser, a
 * constraint, a timing) reaches every dialect at once.
 *
 * Canonical chat messages are the shape Hugging Face chat templates read:
 *   {"role": "system"|"user"|"assistant"|"tool",
 *    "content": string (null allowed for an assistant turn with tool calls),
 *    "tool_calls": [{"id", "type": "function",
 *                    "function": {"name", "arguments": object or JSON text}}],
 *    "tool_call_id": string (tool role), "name": string (optional),
 *    "reasoning_content": string (optional, a previous turn's thinking)}
 * Tools are OpenAI-shaped: [{"type":"function","function":{"name",
 * "description","parameters"}}]. Adapters reject content the model cannot
 * take (images, audio) with a 400 naming the part before they get here.
 *
 * Threads: gen_run is called on an HTTP pool thread. Without streaming it
 * consumes the engine's events on that thread and calls on_end there to
 * answer. With streaming it opens the stream, starts a producer thread of
 * its own that owns the job, and returns; every sink callback then runs on
 * that thread, in engine order. The stream's cancel callback (client gone,
 * server stopping) cancels the engine request, so the slot is freed within
 * a step even while nothing is being written (a notify-driven producer pool
 * instead of a thread per stream is later work).
 */
#ifndef PARLEY_API_GEN_H
#define PARLEY_API_GEN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "engine/engine.h"
#include "engine/manager.h"
#include "http/http.h"
#include "tmpl/outparse.h"
#include "tmpl/tmpl.h"
#include "tok/tok.h"

/* ---- parameters ------------------------------------------------------------ */

enum gen_format {
  GEN_FORMAT_TEXT = 0,   /* unconstrained */
  GEN_FORMAT_JSON = 1,   /* any JSON object */
  GEN_FORMAT_SCHEMA = 2, /* a document valid against gen_params.schema */
  GEN_FORMAT_GRAMMAR = 3 /* gen_params.gbnf (forced tool calls) */
};

typedef struct gen_params {
  engine_request er;      /* sampling, max_tokens, n, logprobs, timeout; er.stop
                             and er.sample.bias point into the owned arrays
                             below; er.prompt is set by gen_run */
  char **stop;            /* [n_stop] owned stop strings */
  size_t n_stop;
  sample_bias *bias;      /* [er.sample.n_bias] owned, or NULL */
  enum gen_format format;
  json_t *schema;         /* GEN_FORMAT_SCHEMA: owned private copy */
  const char *format_param; /* JSON path named when the schema cannot be
                               compiled ("response_format", "format", ...) */
  char *gbnf;             /* GEN_FORMAT_GRAMMAR: owned grammar text, start
                             rule "root" */
  char *prefill;          /* owned text, or NULL: gen_run appends its tokens
                             (special tokens parsed, no BOS) to the prompt and
                             feeds the text to each choice's output parser
                             before the generated text, so the output starts
                             inside what it opened (a forced tool call whose
                             opener is special tokens a grammar cannot
                             produce; set by gen_chat_force_tools) */
} gen_params;

/* Zeroed parameters with engine_request_default(). */
void gen_params_init(gen_params *g);
/* Appends a copy of a stop string (an empty one is ignored: it means
 * nothing). ERR_NOMEM. */
int gen_params_add_stop(gen_params *g, const char *s, size_t len);
/* Adds a logit bias for token (cap entries allocated on first use).
 * ERR_NOMEM, ERR_RANGE when more than cap. */
int gen_params_add_bias(gen_params *g, size_t cap, int32_t token, float bias);
/* Sets the output format; schema is borrowed and deep-copied: the params
 * move to a stream's producer thread, and a jansson value shared by two
 * threads races on its reference count (json_decref reads it plainly). */
void gen_params_set_format(gen_params *g, enum gen_format f, const json_t *schema, const char *param);
void gen_params_free(gen_params *g);

/* ---- chat prompts ---------------------------------------------------------- */

enum gen_tool_choice {
  GEN_TOOL_AUTO = 0,      /* the model decides */
  GEN_TOOL_NONE = 1,      /* tools are shown to the template but calls are
                             not parsed out of the text */
  GEN_TOOL_REQUIRED = 2,  /* some call (forced by gen_chat_force_tools) */
  GEN_TOOL_FUNCTION = 3   /* a named call (forced by gen_chat_force_tools) */
};

/* A reasoning level, for templates that take one (FAMILY_CAP_REASONING_LEVELS:
 * gpt-oss reads the reasoning_effort global); DEFAULT leaves the template's
 * own. */
enum gen_effort { GEN_EFFORT_DEFAULT = 0, GEN_EFFORT_LOW, GEN_EFFORT_MEDIUM, GEN_EFFORT_HIGH };

/* The level a vendor's effort name asks for: "minimal", "low" -> LOW;
 * "medium"; "high", "xhigh", "max" -> HIGH; anything else ("none", "off",
 * "on", NULL) -> DEFAULT (the dialects map "none" and "off" to thinking 0). */
enum gen_effort gen_effort_of(const char *name);

typedef struct gen_chat {
  json_t *messages;              /* canonical messages (see above); tool-call
                                    arguments given as JSON text are parsed
                                    into objects in place, as templates
                                    expect (so every dialect renders the same
                                    conversation to the same tokens) */
  const json_t *tools;           /* OpenAI-shaped tools, or NULL */
  enum gen_tool_choice tool_choice;
  int thinking;                  /* -1 the model's default, 0 off, 1 on:
                                    sets enable_thinking for the template
                                    and the parser's starting state */
  enum gen_effort effort;        /* the reasoning_effort global given to the
                                    template (thinking 0 on a model whose
                                    reasoning has levels: LOW, and the
                                    reasoning is not returned) */
  const json_t *template_kwargs; /* extra template globals, or NULL */
  bool continue_final;           /* no generation prompt: the model goes on
                                    writing the last (assistant) message
                                    (the text is cut after its content) */
  bool no_generation_prompt;     /* rendered without the generation prompt
                                    (OpenAI chat's add_generation_prompt
                                    false, a vLLM extension) */
} gen_chat;

/* What rendering a chat needs: a model's templates, its special tokens and
 * what its templates do with tools and system messages. From a loaded model
 * (gen_chat_template_of: the facts family detection measured), or from a
 * template alone (parley chat-template: gen_chat_template_measure probes
 * it with the same tmpl_renders_* functions). Borrowed pointers. */
typedef struct gen_chat_template {
  const tmpl *chat;       /* the chat template */
  const tmpl *chat_tools; /* the tool_use variant (rendered when tools are
                             given), or NULL */
  const char *bos, *eos;  /* bos_token / eos_token; NULL: undefined */
  bool renders_tools;     /* the template a request with tools gets shows
                             them to the model (else the generic tool
                             prompt is added, see gen_chat_render) */
  bool renders_system;    /* ... renders a system message's text */
} gen_chat_template;

void gen_chat_template_of(const manager_model *mm, gen_chat_template *ct);
/* Sets renders_tools and renders_system by rendering the probe
 * conversation of tmpl_renders_tools / tmpl_renders_system. */
void gen_chat_template_measure(gen_chat_template *ct);

/* Renders c through ct and appends the text to out: the one conversion of
 * canonical messages into what a template sees, shared by the server and
 * `parley chat-template`. Tool-call arguments given as JSON text are parsed
 * into objects in c->messages. A template that renders tools gets them as
 * `tools`. One that does not gets the generic tool-calling prompt instead
 * (Hermes format: tmpl_generic_tools_source), in the system message (or,
 * when the template renders no system message, in front of the first user
 * message), with the conversation's calls written as <tool_call> text in
 * the assistant turns and tool results as <tool_response> text in user
 * turns, so the model is never left without the tools it was given; the
 * output is then parsed in that format (gen_chat_prompt). ERR_TYPE a
 * malformed message list; ERR_INVALID a template error (line and column);
 * ERR_NOMEM. */
int gen_chat_render(const gen_chat_template *ct, gen_chat *c, buf *out);

/* Renders c through mm's chat template (gen_chat_render), tokenizes the
 * text with special tokens parsed (and a BOS the vocabulary wants), and
 * fills the output parser's configuration: the family's format, or the
 * generic (Hermes) one when tools are given and the template does not show
 * them or the family has no call syntax of its own. prompt may be NULL (the
 * text is then not kept). Errors: ERR_UNSUPPORTED the model has no chat
 * template; ERR_INVALID a template error (the detail names line and column)
 * or an empty prompt; ERR_TYPE a malformed message; ERR_NOMEM. */
int gen_chat_prompt(const manager_model *mm, gen_chat *c, buf *prompt, tok_ids *ids, outparse_config *pc);

/* Forces a tool call when c->tool_choice is REQUIRED (any of the tools)
 * or FUNCTION (named by name): sets g to a grammar that makes the model
 * write one call in its family's syntax, which the output parser then
 * reads as a tool call, and, where that syntax opens with special tokens a
 * grammar cannot produce, g->prefill to the opener (gen_run appends it to
 * the prompt). Per parser family (docs/text.md, "Forced tool calls"):
 *   Hermes    <tool_call>\n{"name": .., "arguments": ..}\n</tool_call>
 *   Llama 3   {"name": .., "parameters": ..}
 *   Mistral   prefill [TOOL_CALLS], then [{"name": .., "arguments": ..}]
 *   Granite   prefill <|tool_call|>, then [{"name": .., "arguments": ..}]
 *   Functionary v3.1  <function=NAME>{args}</function>
 *   DeepSeek  prefill <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>,
 *             then NAME\n```json\n{args}\n```
 *   Harmony   prefill <|channel|>commentary to=functions., then
 *             NAME <|constrain|>json<|message|>{args}
 * For the last three a single candidate tool's name (and the text around
 * it) joins the prefill, so only the arguments are generated. A template
 * that opens the think block gets its closing marker first in the prefill.
 * The arguments follow the tool's parameters schema (any object when the
 * grammar cannot express it). The syntax is the one gen_chat_prompt parses:
 * the family's, or the generic Hermes one for a template that does not show
 * tools or a family without a call syntax, so every forced choice yields a
 * call. Nothing changes when the choice is auto/none, there are no tools or
 * g already has a format. ERR_NOT_FOUND when name is no tool's name;
 * ERR_NOMEM. */
int gen_chat_force_tools(const manager_model *mm, const gen_chat *c, const char *name, gen_params *g);

/* Encodes text with special-token parsing (or not) and a leading BOS when
 * the vocabulary adds one and the text does not already start with it. */
int gen_tokenize(const tok *t, const char *text, size_t len, bool parse_special, tok_ids *out);

/* ---- running ---------------------------------------------------------------- */

/* What one choice produced. content/reasoning/tool_calls are filled in both
 * modes (a streaming sink may ignore them; stores use them). */
typedef struct gen_choice {
  int index;
  buf content;              /* visible text (the raw text when the output
                               parser failed) */
  buf reasoning;            /* thinking text */
  json_t *tool_calls;       /* [{"id","type":"function","function":{"name",
                               "arguments": JSON text}}], or NULL */
  int32_t *tokens;          /* [n_tokens] completion tokens (EOG/stop tokens
                               excluded) */
  size_t n_tokens;
  enum engine_finish finish;
  int32_t stop_index;       /* a stop string's index, or -1 */
  bool finished;
  bool parse_failed;        /* the output parser gave up (non-streaming
                               answers fall back to the raw text) */
} gen_choice;

typedef struct gen_result {
  int n;                    /* choices */
  gen_choice *ch;           /* [n] */
  int64_t n_prompt, n_cached, n_completion; /* tokens, as the engine counted
                               (n_prompt and n_cached are known from the
                               engine's first event on, before the first
                               text or tool callback) */
  uint64_t t_start_ns;      /* monotonic: submitted */
  uint64_t t_first_ns;      /* the engine sampled the first completion token
                               (0: none) */
  uint64_t t_last_ns;       /* ... and the last one (0: none) */
  uint64_t t_end_ns;        /* last event */
  int err_code;             /* the first choice error (0: none) */
  char *err_msg;
} gen_result;

/* True when the choice produced at least one parsed tool call. */
bool gen_choice_has_calls(const gen_choice *c);

typedef struct gen_job gen_job;

/* The dialect's renderer. Every callback may be NULL. Streaming callbacks
 * return 0, or nonzero when writing failed (the client is gone: the request
 * is cancelled and no further streaming callback but on_end is made). */
typedef struct gen_sink {
  /* Streaming only, in this order per choice: start once, then deltas. */
  int (*on_start)(void *ctx, gen_job *j);
  int (*on_text)(void *ctx, gen_job *j, int choice, bool reasoning, const char *text, size_t len);
  int (*on_tool_begin)(void *ctx, gen_job *j, int choice, int tool_index, const char *id, const char *name);
  int (*on_tool_args)(void *ctx, gen_job *j, int choice, int tool_index, const char *text, size_t len);
  int (*on_tool_end)(void *ctx, gen_job *j, int choice, int tool_index);
  /* Both modes: the sampled tokens' logprobs (only when er.logprobs), in
   * order, before the text they produced reaches on_text. */
  int (*on_logprobs)(void *ctx, gen_job *j, int choice, const sample_result *r, size_t n);
  /* Streaming only: a choice finished (after its last delta). */
  int (*on_choice_end)(void *ctx, gen_job *j, const gen_choice *c);
  /* Exactly once, last. Streaming: write the trailer (usage, done marker)
   * or, when r->err_code, the dialect's error event. Not streaming: answer
   * gen_job_req(j) (with the dialect's error when r->err_code). */
  void (*on_end)(void *ctx, gen_job *j, const gen_result *r);
  /* Frees ctx; called exactly once after on_end (or instead of it when
   * gen_run answered an error itself). */
  void (*free)(void *ctx);
} gen_sink;

typedef struct gen_opts {
  bool stream;
  bool detached;                     /* run on a producer thread with no
                                        client stream (background work): the
                                        streaming callbacks are made, writes
                                        go nowhere, gen_run does not answer
                                        req when it accepts the job */
  enum http_stream_kind stream_kind;  /* HTTP_STREAM_SSE or _NDJSON */
  const char *content_type;          /* NULL: the kind's default */
  const char *prompt_param;          /* JSON path named by a context error
                                        ("messages", "prompt") */
} gen_opts;

/* Submits ids with g's parameters to mm's engine and answers req through
 * sink. Takes ownership of the caller's manager reference (released when
 * the job ends), of g's contents (g is zeroed) and of ctx (sink->free).
 * pc may be NULL (plain text). Errors before the engine accepted the
 * request (no generative model, prompt longer than the context, a schema
 * that does not compile, queue full: 429/503) are answered here with
 * api_error in the request's dialect. */
int gen_run(http_req *req, manager_model *mm, gen_params *g, const tok_ids *ids, const outparse_config *pc,
            const gen_opts *opts, const gen_sink *sink, void *ctx);
/* Returns 0 when the job was accepted (and, unless detached, req answered
 * or streaming), or the error it answered req with. A detached job may
 * have no request at all (req NULL: WebSocket sessions): a refusal is then
 * only returned, with err_detail(). */

/* Asks the engine to stop the job (any thread, while the job runs: from
 * its callbacks, or under a lock that on_end also takes). */
void gen_job_cancel(gen_job *j);

/* For callbacks: the job's model, parameters, results so far, the request
 * (not streaming: valid until on_end returns) and the stream (streaming).
 * gen_job_write_* write one event and remember a failure. */
manager_model *gen_job_model(const gen_job *j);
const gen_params *gen_job_params(const gen_job *j);
const gen_result *gen_job_result(const gen_job *j);
http_req *gen_job_req(gen_job *j);
http_stream *gen_job_stream(gen_job *j);
int gen_job_write_sse(gen_job *j, const char *event, const json_t *v); /* compact JSON in data: */
int gen_job_write_sse_raw(gen_job *j, const char *event, const char *data, size_t len);
int gen_job_write_ndjson(gen_job *j, const json_t *v);
/* Not streaming, in on_end: when r failed, answers gen_job_req(j) with the
 * error in the request's dialect (a context error names opts.prompt_param)
 * and returns true. */
bool gen_job_answer_error(gen_job *j, const gen_result *r);
/* Not streaming, in on_end: answers 200 with body (consumed; NULL is
 * answered as a 500 out of memory). */
void gen_job_answer_json(gen_job *j, json_t *body);

/* Waits up to timeout_ms for every stream producer thread to end (they end
 * soon after the server cancels their streams); call before manager_free. */
void gen_wait_streams(int timeout_ms);

#endif
