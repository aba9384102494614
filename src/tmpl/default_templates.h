/*
 * default_templates.h - chat templates for models whose GGUF file carries no
 * tokenizer.chat_template.
 *
 * Each default is Jinja source that our interpreter (tmpl.h) compiles, in the
 * prompt format of one model family: ChatML (Qwen, SmolLM, Hermes, unknown
 * models), Llama 2, Llama 3, Mistral (v3/tekken), Gemma, Phi-3, Granite,
 * DeepSeek-R1 and gpt-oss's harmony. Where a real template of the family exists, the default renders
 * the same text for plain conversations (system, user and assistant turns);
 * unlike most real templates it never raises: it accepts any role order,
 * content given as a list of text parts, tool calls whose arguments are an
 * object or a JSON string, and tool results.
 *
 * The family table (model/family.h) names which default a family uses; an
 * unknown model gets ChatML. The strings are static and never freed.
 */
#ifndef PARLEY_TMPL_DEFAULT_TEMPLATES_H
#define PARLEY_TMPL_DEFAULT_TEMPLATES_H

typedef enum tmpl_default_id {
  TMPL_DEFAULT_NONE = 0, /* no chat format (embedding and transcription models) */
  TMPL_DEFAULT_CHATML,
  TMPL_DEFAULT_LLAMA2,
  TMPL_DEFAULT_LLAMA3,
  TMPL_DEFAULT_MISTRAL,
  TMPL_DEFAULT_GEMMA,
  TMPL_DEFAULT_PHI3,
  TMPL_DEFAULT_GRANITE,
  TMPL_DEFAULT_DEEPSEEK,
  TMPL_DEFAULT_HARMONY,
  TMPL_DEFAULT_COUNT
} tmpl_default_id;

/* Jinja source of a default (NUL-terminated, static); NULL for
 * TMPL_DEFAULT_NONE and values outside the enum. */
const char *tmpl_default_source(tmpl_default_id id);
/* Short stable name: "none", "chatml", "llama2", "llama3", "mistral", "gemma",
 * "phi3", "granite", "deepseek", "harmony"; "unknown" outside the enum. */
const char *tmpl_default_name(tmpl_default_id id);
/* The id for a name above; ERR_NOT_FOUND (naming it) when there is none. */
int tmpl_default_by_name(const char *name, tmpl_default_id *out);

/* Jinja source of the generic tool-calling prompt (Hermes format) that
 * api/gen.c adds for a template that does not render tools: rendered with
 * the global `tools` it gives the tools block of the system prompt (the
 * tools as JSON lines in <tools></tools> and how to write a call); with
 * `calls` (a message's tool_calls, arguments an object or JSON text) it
 * gives those calls, each as <tool_call>\n{"name": .., "arguments": ..}\n
 * </tool_call>, one per line. Static. */
const char *tmpl_generic_tools_source(void);

#endif
