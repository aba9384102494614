/*
 * outparse.h - streaming output parsers: the model's generated text in,
 * canonical events (answer text, reasoning text, tool-call deltas) out.
 *
 * The engine feeds text deltas as they are detokenized (a delta may split a
 * marker, a JSON token or even a UTF-8 character anywhere); the parser emits
 * every byte it is sure of at once and holds back only what is still
 * ambiguous: a possible prefix of a marker, an incomplete UTF-8 sequence, and
 * a few bounded look-aheads listed in docs/text.md ("Output parsers"). The
 * sequence of events, once consecutive fragments of the same kind are joined,
 * does not depend on how the text was split.
 *
 *   outparse *p;
 *   outparse_config cfg = {.format = OUTPARSE_HERMES, .think_open = "<think>",
 *                          .think_close = "</think>", .starts_in_reasoning = true,
 *                          .tools_enabled = true};
 *   outparse_new(&cfg, on_event, ctx, &p);
 *   while (generating) if ((rc = outparse_feed(p, piece, n)) < 0) ...;  // ERR_PARSE etc.
 *   rc = outparse_finish(p);
 *   outparse_free(p);
 *
 * Event pointers (text, name, id) are valid only during the callback, which
 * must not call back into the same parser. Not thread-safe per parser (one
 * per generation); parsers share no state.
 * Tool calls: BEGIN (tool_index, id, name) once, then ARGS fragments whose
 * concatenation is the raw JSON text of the arguments object, then END.
 * Indexes count 0,1,2,... per generation; ids are "call_" + 24 random hex
 * digits, stable for the call. This module knows no JSON library type.
 */
#ifndef PARLEY_TMPL_OUTPARSE_H
#define PARLEY_TMPL_OUTPARSE_H

#include <stdbool.h>
#include <stddef.h>

enum outparse_format {
  OUTPARSE_PLAIN,          /* no tool calls; only the reasoning block, if configured */
  OUTPARSE_HERMES,         /* Hermes 2 Pro/3, Qwen2.5, Qwen3, Granite 4: <tool_call>{"name":..,"arguments":..}</tool_call> */
  OUTPARSE_LLAMA3,         /* Llama 3.1-3.3: {"name":..,"parameters":..} at the start, or <|python_tag|> */
  OUTPARSE_MISTRAL,        /* [TOOL_CALLS][{"name":..,"arguments":..},...] and [TOOL_CALLS]name[ARGS]{..} */
  OUTPARSE_DEEPSEEK,       /* R1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{..}\n```<｜tool▁call▁end｜>...; V3.1: ...name<｜tool▁sep｜>{..}... */
  OUTPARSE_HARMONY,        /* GPT-OSS: <|channel|>analysis<|message|>..<|end|>, commentary to=functions.x ...<|call|>, final */
  OUTPARSE_GRANITE,        /* Granite 3.x: <|tool_call|>[{"name":..,"arguments":..}]; <response> tags dropped */
  OUTPARSE_FUNCTIONARY_V31,/* <function=name>{..}</function>, <|python_tag|>code */
  OUTPARSE_FUNCTIONARY_V32,/* the prompt ends with ">>>": recipient\ncontent, then >>>recipient\n... ("all" = text) */
  OUTPARSE_KIMI_K2,        /* <|tool_calls_section_begin|><|tool_call_begin|>functions.name:0<|tool_call_argument_begin|>{..}<|tool_call_end|>... */
  OUTPARSE_COMMAND_R7B,    /* <|START_ACTION|>[{"tool_call_id":..,"tool_name":..,"parameters":..}]<|END_ACTION|>; <|START_RESPONSE|> tags dropped */
  OUTPARSE_QWEN3_CODER,    /* Qwen3-Coder, Qwen3.5: <tool_call><function=name><parameter=k>v</parameter></function></tool_call> (or Hermes JSON) */
  OUTPARSE_GLM,            /* GLM 4.5-4.7: <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call> */
  OUTPARSE_SEED_OSS,       /* Seed-OSS: Qwen3-Coder's XML inside <seed:tool_call>...</seed:tool_call> */
  OUTPARSE_MINIMAX_M1,     /* MiniMax-M1: <tool_calls>\n{"name":..,"arguments":..}\n{..}\n</tool_calls> */
  OUTPARSE_LFM2,           /* LFM2: <|tool_call_start|>[name(k='v', n=1), ...]<|tool_call_end|> (or JSON objects in the list) */
  OUTPARSE_FORMAT_COUNT_
};
#define OUTPARSE_FUNCTIONARY OUTPARSE_FUNCTIONARY_V31

typedef struct outparse_config {
  enum outparse_format format;
  /* Reasoning block markers, e.g. "<think>" / "</think>" or "[THINK]" /
   * "[/THINK]"; both NULL = no reasoning block (ignored for HARMONY, whose
   * channels say what is reasoning). */
  const char *think_open, *think_close;
  /* The prompt already opened the block (Qwen3 with thinking on, DeepSeek-R1
   * distills): output is reasoning until think_close. */
  bool starts_in_reasoning;
  /* false: tool-call markers are ordinary text. */
  bool tools_enabled;
  /* reasoning is parsed (it still ends where the format says) but not
   * emitted: the request switched thinking off. */
  bool hide_reasoning;
} outparse_config;

enum outparse_event_kind {
  OUTPARSE_TEXT,            /* text, len: answer text */
  OUTPARSE_REASONING,       /* text, len: reasoning text */
  OUTPARSE_TOOL_CALL_BEGIN, /* tool_index, id, name */
  OUTPARSE_TOOL_CALL_ARGS,  /* tool_index, id, name, text/len: a fragment of the arguments JSON */
  OUTPARSE_TOOL_CALL_END    /* tool_index, id, name */
};

typedef struct outparse_event {
  enum outparse_event_kind kind;
  int tool_index;   /* -1 for TEXT and REASONING */
  const char *text; /* not NUL-terminated; never splits a UTF-8 character of valid input */
  size_t len;
  const char *name; /* tool name (NUL-terminated), NULL for TEXT/REASONING */
  const char *id;   /* tool-call id (NUL-terminated), NULL for TEXT/REASONING */
} outparse_event;

typedef void (*outparse_emit_fn)(void *ctx, const outparse_event *ev);

typedef struct outparse outparse;

/* ERR_INVALID for an unknown format or half a pair of think markers. */
int outparse_new(const outparse_config *cfg, outparse_emit_fn emit, void *ctx, outparse **out);
/* Consumes len bytes. Returns 0, or ERR_PARSE (a tool call that is not valid
 * JSON or not in the format's shape; err_detail() names the call and the
 * byte), ERR_TOO_LARGE (JSON nested deeper than 64, arguments of more than
 * 1 MB before the name), ERR_NOMEM. After an error every call returns it again. */
int outparse_feed(outparse *p, const char *text, size_t len);
/* End of generation: flushes held text (a partial marker is text). An
 * unterminated reasoning block is fine (it all was reasoning). A tool call
 * whose arguments JSON is complete but whose closing marker never came is
 * completed (stop tokens such as <|call|> or <|eom_id|> are often not fed);
 * a tool call cut inside its JSON gives ERR_PARSE. */
int outparse_finish(outparse *p);
void outparse_free(outparse *p);
/* True between a tool call's opening marker and its end (for a sampler that
 * constrains argument JSON only inside calls). */
bool outparse_in_tool_call(const outparse *p);
/* Bytes the parser holds right now (input not yet emitted, headers, names,
 * arguments waiting for a name): for tests and metrics. */
size_t outparse_held(const outparse *p);

/* Name of a format ("hermes", "llama3", "mistral", "deepseek", "harmony",
 * "granite", "functionary-v3.1", "functionary-v3.2", "kimi-k2", "command-r7b",
 * "qwen3-coder", "glm", "seed-oss", "minimax-m1", "lfm2", "plain"), for logs,
 * configuration and tests; "unknown" for a bad value. */
const char *outparse_format_name(enum outparse_format f);
/* The format of a name above (ASCII case-insensitive); ERR_NOT_FOUND with a
 * detail naming it otherwise. */
int outparse_format_from_name(const char *name, enum outparse_format *out);

#endif
