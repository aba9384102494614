/*
 * fields.c - the JSON type of every field the OpenAI spec types, per request
 * shape (../shared/specs/openai.md 2.1, 3.1, 3.2), checked before a handler
 * reads the body: `user: 5` or `parallel_tool_calls: "yes"` is a 400 naming
 * the field, never a 200 that silently ignored it. Ranges and enumerations
 * stay with the code that reads the field (openai_gen_parse, chat.c); this
 * table only says which JSON types a field may hold. null counts as absent,
 * as the SDKs send it for "not set".
 */
#include "api/openai/openai.h"

#define N API_T_NULL
#define S (API_T_STRING | N)
#define I (API_T_INT | N)
#define F (API_T_NUMBER | N)
#define B (API_T_BOOL | N)
#define O (API_T_OBJECT | N)
#define A (API_T_ARRAY | N)

/* Sampling and streaming fields chat and legacy completions share. */
#define OPENAI_GEN_FIELDS                                                                              \
  {"model", S, 0, 0}, {"temperature", F, 0, 0}, {"top_p", F, 0, 0}, {"presence_penalty", F, 0, 0},     \
      {"frequency_penalty", F, 0, 0}, {"seed", I, 0, 0}, {"max_tokens", I, 0, 0}, {"n", I, 0, 0},      \
      {"stop", S | A, 0, 0}, {"stop[]", API_T_STRING, 0, 0}, {"logit_bias", O, 0, 0},                    \
      {"logit_bias.*", API_T_NUMBER, 0, 0}, {"stream", B, 0, 0}, {"stream_options", O, 0, 0},           \
      {"stream_options.include_usage", B, 0, 0}, {"stream_options.include_obfuscation", B, 0, 0},        \
      {"user", S, 0, 0}

static const api_field CHAT[] = {
    OPENAI_GEN_FIELDS,
    {"messages", API_T_ARRAY, 0, 0},
    {"messages[]", API_T_OBJECT, 0, 0},
    {"messages[].role", API_T_STRING, 0, 0},
    {"messages[].name", S, 0, 0},
    {"messages[].content", S | A, 0, 0},
    {"messages[].refusal", S, 0, 0},
    {"messages[].tool_call_id", S, 0, 0},
    {"messages[].tool_calls", A, 0, 0},
    {"messages[].tool_calls[]", API_T_OBJECT, 0, 0},
    {"messages[].tool_calls[].id", S, 0, 0},
    {"messages[].tool_calls[].type", S, 0, 0},
    {"messages[].tool_calls[].function", O, 0, 0},
    {"messages[].tool_calls[].function.name", API_T_STRING, 0, 0},
    {"messages[].tool_calls[].function.arguments", S, 0, 0},
    {"tools", A, 0, 0},
    {"tools[]", API_T_OBJECT, 0, 0},
    {"tools[].type", API_T_STRING, 0, 0},
    {"tools[].function", O, 0, 0},
    {"tools[].function.name", API_T_STRING, 0, 0},
    {"tools[].function.description", S, 0, 0},
    {"tools[].function.parameters", O, 0, 0},
    {"tools[].function.strict", B, 0, 0},
    {"tool_choice", S | O, 0, 0},
    {"parallel_tool_calls", B, 0, 0},
    {"functions", A, 0, 0},
    {"function_call", S | O, 0, 0},
    {"max_completion_tokens", I, 0, 0},
    {"logprobs", B, 0, 0},
    {"top_logprobs", I, 0, 0},
    {"response_format", O, 0, 0},
    {"reasoning_effort", S, 0, 0},
    {"verbosity", S, 0, 0},
    {"modalities", A, 0, 0},
    {"modalities[]", API_T_STRING, 0, 0},
    {"audio", O, 0, 0},
    {"metadata", O, 0, 0},
    {"metadata.*", API_T_STRING, 0, 0},
    {"store", B, 0, 0},
    {"service_tier", S, 0, 0},
    {"safety_identifier", S, 0, 0},
    {"prompt_cache_key", S, 0, 0},
    {"prompt_cache_retention", S, 0, 0},
    {"prediction", O, 0, 0},
    {"web_search_options", O, 0, 0},
    {"chat_template_kwargs", O, 0, 0},
};

static const api_field COMPLETION[] = {
    OPENAI_GEN_FIELDS,
    {"prompt", S | A, 0, 0},
    {"suffix", S, 0, 0},
    {"echo", B, 0, 0},
    {"best_of", I, 0, 0},
    {"logprobs", I, 0, 0},
};

static const api_field EMBEDDING[] = {
    {"model", S, 0, 0},
    {"input", API_T_STRING | API_T_ARRAY, 0, 0},
    {"encoding_format", S, 0, 0},
    {"dimensions", I, 0, 0},
    {"user", S, 0, 0},
};

static const struct {
  const api_field *fields;
  size_t n;
} SHAPES[OPENAI_SHAPE_COUNT] = {
    [OPENAI_SHAPE_CHAT] = {CHAT, sizeof CHAT / sizeof CHAT[0]},
    [OPENAI_SHAPE_COMPLETION] = {COMPLETION, sizeof COMPLETION / sizeof COMPLETION[0]},
    [OPENAI_SHAPE_EMBEDDING] = {EMBEDDING, sizeof EMBEDDING / sizeof EMBEDDING[0]},
};

const api_field *openai_shape_fields(enum openai_shape shape, size_t *n) {
  *n = SHAPES[shape].n;
  return SHAPES[shape].fields;
}

int openai_check_fields(http_req *req, const json_t *body, enum openai_shape shape) {
  return api_check_fields(req, body, SHAPES[shape].fields, SHAPES[shape].n);
}
