/*
 * family.h - what kind of model a GGUF file holds: its family, what it can do,
 * how to prompt it and parse its output, and whether this runtime can run it.
 *
 * One table (family.c, rows indexed by family_id) maps GGUF metadata to a
 * family: general.architecture, the names (general.name, general.basename,
 * general.base_model.N.name), tokenizer.ggml.model and .pre, fingerprints
 * (distinctive substrings) of tokenizer.chat_template and its named variants,
 * and special tokens present in tokenizer.ggml.tokens. family_detect() scores
 * every row whose architecture list holds the file's architecture and keeps
 * the best; a file whose architecture no row lists is FAMILY_UNKNOWN.
 *
 * The answer (family_info) is self-contained: it holds no pointer into the
 * gguf_file, only static strings and its own buffers, so it may outlive the
 * file. Detection never fails on odd metadata (a key of the wrong type counts
 * as absent); it returns an error only for NULL arguments.
 *
 * Capabilities start from the row and are refined by the file: tools when the
 * template a request with tools gets (the tool_use variant, the file's
 * template or the family default) shows a tool to the model, measured by
 * rendering it (tmpl_renders_tools), reasoning when it closes a think block, insert
 * (fill-in-the-middle) when the vocabulary has FIM tokens. Whether the
 * template opens the think block itself is measured by rendering it once for
 * a one-message conversation with add_generation_prompt and enable_thinking.
 */
#ifndef PARLEY_MODEL_FAMILY_H
#define PARLEY_MODEL_FAMILY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "tmpl/default_templates.h"

typedef enum family_id {
  FAMILY_UNKNOWN = 0,
  FAMILY_LLAMA2,
  FAMILY_LLAMA3,
  FAMILY_MISTRAL,
  FAMILY_MIXTRAL,
  FAMILY_QWEN2,            /* Qwen2, Qwen2.5 (and QwQ) */
  FAMILY_QWEN3,            /* Qwen3 with thinking */
  FAMILY_QWEN25_OMNI,
  FAMILY_QWEN3_OMNI,
  FAMILY_VOXTRAL,
  FAMILY_VOXTRAL_REALTIME, /* Voxtral Realtime / streaming transcription */
  FAMILY_GEMMA2,
  FAMILY_GEMMA3,
  FAMILY_PHI3,
  FAMILY_PHI4,
  FAMILY_SMOLLM,           /* SmolLM, SmolLM2 (llama architecture) */
  FAMILY_SMOLLM3,
  FAMILY_DEEPSEEK_R1_DISTILL,
  FAMILY_GPT_OSS,
  FAMILY_GRANITE,
  FAMILY_HERMES,           /* NousResearch Hermes fine-tunes */
  FAMILY_FUNCTIONARY,
  FAMILY_BERT,             /* bert, nomic-bert, jina-bert, modern-bert... embedders */
  FAMILY_OLMO2,            /* AI2 OLMo 2 */
  FAMILY_GLM4,             /* GLM-4 dense (0414, Z1) */
  FAMILY_OLMOE,            /* AI2 OLMoE (mixture of experts) */
  FAMILY_LFM2,             /* LiquidAI LFM2, LFM2.5 (hybrid: short convolutions + attention) */
  FAMILY_EMBEDDINGGEMMA,   /* EmbeddingGemma (gemma-embedding) */
  FAMILY_EXAONE4,          /* LG EXAONE 4.0 */
  FAMILY_QWEN35,           /* Qwen3.5, Qwen3.5-MoE, Qwen3-Next (hybrid: gated delta net + attention) */
  FAMILY_MAMBA2,           /* Mamba-2 / Mamba-Codestral (state-space layers only) */
  FAMILY_NEMOTRON_H,       /* NVIDIA Nemotron-H, Nemotron Nano 2 / 3 (Mamba-2 + attention) */
  FAMILY_GEMMA4,           /* Gemma 4 (text: E2B, E4B, 31B) */
  FAMILY_COUNT
} family_id;

/* Capability bits (family_info.caps). */
enum family_cap {
  FAMILY_CAP_CHAT = 1u << 0,
  FAMILY_CAP_TOOLS = 1u << 1,
  FAMILY_CAP_REASONING = 1u << 2,
  FAMILY_CAP_VISION = 1u << 3,
  FAMILY_CAP_AUDIO_IN = 1u << 4,
  FAMILY_CAP_AUDIO_OUT = 1u << 5,
  FAMILY_CAP_TRANSCRIBE = 1u << 6, /* speech to text */
  FAMILY_CAP_REALTIME = 1u << 7,   /* streaming (realtime) transcription */
  FAMILY_CAP_EMBED = 1u << 8,
  FAMILY_CAP_INSERT = 1u << 9,     /* fill-in-the-middle */
  FAMILY_CAP_COUNT_ = 10,
  /* Not a capability of its own (never named or listed): the reasoning of
   * a FAMILY_CAP_REASONING model comes in levels, set through the
   * template's reasoning_effort global (measured: tmpl_renders_effort),
   * and is never switched off (gpt-oss's analysis channel). */
  FAMILY_CAP_REASONING_LEVELS = 1u << 16
};

/* Output parser formats (tmpl/ output parsers are selected by name). */
typedef enum family_parser {
  FAMILY_PARSER_PLAIN = 0,
  FAMILY_PARSER_HERMES,
  FAMILY_PARSER_LLAMA3,
  FAMILY_PARSER_MISTRAL,
  FAMILY_PARSER_DEEPSEEK,
  FAMILY_PARSER_HARMONY,
  FAMILY_PARSER_GRANITE,
  FAMILY_PARSER_FUNCTIONARY,
  FAMILY_PARSER_LFM2,      /* <|tool_call_start|>[name(k=v, ...)]<|tool_call_end|> */
  FAMILY_PARSER_QWEN3_CODER, /* <tool_call><function=NAME><parameter=K>V</parameter></function></tool_call> (or Hermes JSON) */
  FAMILY_PARSER_COUNT
} family_parser;

typedef struct family_info {
  family_id id;
  const char *name;        /* stable key: "qwen3", "llama3", "unknown" */
  const char *display;     /* "Qwen3", "Llama 3.x" */
  char arch[64];           /* general.architecture ("" when absent; truncated) */
  uint32_t caps;           /* FAMILY_CAP_* bits */
  family_parser parser;
  const char *think_open;  /* reasoning block markers, NULL when none */
  const char *think_close;
  bool template_opens_think; /* the generation prompt already opens the block */
  bool has_template;       /* tokenizer.chat_template is present */
  bool has_tool_template;  /* tokenizer.chat_template.tool_use is present */
  bool template_renders_system; /* the template a request with tools gets
                              renders a system message's text (measured:
                              tmpl_renders_system); FAMILY_CAP_TOOLS says
                              whether it renders the tools */
  tmpl_default_id default_template; /* when the file has none */
  bool executable;         /* the runtime implements this architecture */
  char missing[1024];      /* what is missing to run it fully; "" when nothing (the refusal lists every architecture that runs) */
} family_info;

/* Detects the family of f. 0, or ERR_INVALID for NULL arguments. */
int family_detect(const gguf_file *f, family_info *out);

/* Table accessors; "unknown" / NULL outside the enum. */
const char *family_name(family_id id);
const char *family_display(family_id id);
/* The id whose name is `name`; FAMILY_UNKNOWN when none. */
family_id family_by_name(const char *name);
/* "hermes", "llama3", "mistral", "deepseek", "harmony", "granite",
 * "functionary", "lfm2", "qwen3-coder", "plain". */
const char *family_parser_name(family_parser p);
/* Name of one capability bit ("chat", "tools", "reasoning", "vision",
 * "audio_in", "audio_out", "transcribe", "realtime", "embeddings", "insert"),
 * NULL for anything else. */
const char *family_cap_name(uint32_t bit);
/* Comma-separated capability names into out (always NUL-terminated).
 * Returns the length it needed, like snprintf. */
size_t family_caps_str(uint32_t caps, char *out, size_t cap);

/* Whether the runtime can execute an architecture string. */
bool family_arch_executable(const char *arch);
/* What is missing, for the model list: NULL when nothing is. */
const char *family_missing(const family_info *info);
/* 0 when the model can run; otherwise ERR_UNSUPPORTED with a detail naming
 * the architecture and family, for a request that tries to run it. */
int family_require_executable(const family_info *info);

/* The chat template to render for a model: the tool_use variant when
 * want_tools and the file has it, else tokenizer.chat_template, else the
 * family default, else ChatML. *src stays owned by f (or is static); *origin
 * says which ("tokenizer.chat_template.tool_use", "tokenizer.chat_template",
 * "default:llama3", ...). ERR_NOT_FOUND when the family has no chat format
 * (embedders, transcription-only models). */
int family_chat_template(const gguf_file *f, const family_info *info, bool want_tools, const char **src,
                         const char **origin);

#endif
