/*
 * family.c - the model family table and its detection from GGUF metadata.
 *
 * Start at FAMILIES[] (one row per family_id), then family_detect(). A row
 * lists the evidence that points to it and the facts that follow from it:
 *
 *   evidence                                   score (summed)
 *   general.architecture in archs[]            10  (the arch alone decides)
 *   general.architecture in weak_archs[]        1  (shared arch: needs more)
 *   name hint in general.name / .basename      12 + 2 x hint length
 *   name hint in general.base_model.N.name      4 + hint length
 *   each template mark in the chat template    15
 *   (names and marks count double when the architecture is a weak one:
 *   they are what tells a fine-tune - Hermes, an R1 distill, Voxtral -
 *   from the base model whose tokenizer it shares)
 *   tokenizer.ggml.model equal                  4
 *   tokenizer.ggml.pre in tok_pre[]             8
 *   each special token in the vocabulary        6
 *   moe_hint and <arch>.expert_count > 0       20
 *
 * A row is a candidate only when the architecture is in one of its two lists
 * (for a weak one, with at least one name, mark, special token or MoE hint
 * of its own: the tokenizer alone does not make a Qwen2-VL an Omni) and its
 * score reaches 10; the highest score wins, ties go to the earlier
 * row (so a bare SentencePiece "llama" file is Llama 2). Name hints are
 * compared on a normalized name (lowercase letters and digits only, so
 * "Meta-Llama-3.1-8B" is "metallama318b"); "a+b" needs both parts.
 *
 * Architecture strings are the ones llama.cpp's converter writes
 * (src/llama-arch.cpp): "llama", "qwen2", "qwen3", "qwen3moe", "gemma2",
 * "gemma3", "phi3", "gpt-oss", "granite", "bert", "nomic-bert", ... Mistral,
 * Mixtral, SmolLM2, Voxtral (text part) and the R1 Llama distill are written
 * as "llama"; the R1 Qwen distills as "qwen2"; Qwen2.5-Omni's thinker as
 * "qwen2vl". Audio and vision encoders live in a separate mmproj file
 * (general.architecture "clip"), which is not a family of its own here.
 *
 * Invariants: detection reads through the gguf typed getters only, treats a
 * key of the wrong type as absent, and bounds every copy; family_info never
 * points into the file.
 */
#include "model/family.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/model.h"
#include "tmpl/tmpl.h"

typedef struct family_row {
  const char *name, *display;
  const char *archs[10];      /* the architecture alone identifies the family */
  const char *weak_archs[4];  /* shared architectures: other evidence must agree */
  const char *names[5];       /* normalized name hints; "a+b" requires both */
  const char *marks[5];       /* substrings of tokenizer.chat_template */
  const char *tok_model;      /* tokenizer.ggml.model */
  const char *tok_pre[4];     /* tokenizer.ggml.pre */
  const char *specials[4];    /* tokens in tokenizer.ggml.tokens */
  bool moe_hint;              /* <arch>.expert_count > 0 points here */
  uint32_t caps;
  family_parser parser;
  tmpl_default_id tmpl;       /* default chat template */
  const char *think_open, *think_close;
  bool opens_think;           /* default when the template cannot be probed */
  const char *needs;          /* what the runtime lacks even when the arch runs */
} family_row;

enum {
  C_CHAT = FAMILY_CAP_CHAT, C_TOOLS = FAMILY_CAP_TOOLS, C_REASON = FAMILY_CAP_REASONING,
  C_VISION = FAMILY_CAP_VISION, C_AIN = FAMILY_CAP_AUDIO_IN, C_AOUT = FAMILY_CAP_AUDIO_OUT,
  C_STT = FAMILY_CAP_TRANSCRIBE, C_RT = FAMILY_CAP_REALTIME, C_EMBED = FAMILY_CAP_EMBED,
};

#define THINK "<think>", "</think>"
#define NO_THINK NULL, NULL

static const family_row FAMILIES[FAMILY_COUNT] = {
    [FAMILY_UNKNOWN] = {"unknown", "Unknown", .caps = 0, .tmpl = TMPL_DEFAULT_CHATML},
    [FAMILY_LLAMA2] = {"llama2", "Llama 2", {"llama"}, {NULL}, {"llama2", "codellama"}, {"<<SYS>>", "[INST]"},
                       "llama", {NULL}, {NULL}, false, C_CHAT, FAMILY_PARSER_PLAIN, TMPL_DEFAULT_LLAMA2, NO_THINK,
                       false, NULL},
    [FAMILY_LLAMA3] = {"llama3", "Llama 3.x", {"llama"}, {NULL}, {"llama3"},
                       {"<|start_header_id|>", "<|eot_id|>"}, "gpt2", {"llama-bpe", "llama3"},
                       {"<|eot_id|>", "<|start_header_id|>"}, false, C_CHAT | C_TOOLS, FAMILY_PARSER_LLAMA3,
                       TMPL_DEFAULT_LLAMA3, NO_THINK, false, NULL},
    [FAMILY_MISTRAL] = {"mistral", "Mistral", {"mistral3"}, {"llama"},
                        {"mistral", "ministral", "devstral", "magistral"},
                        {"[INST]", "[AVAILABLE_TOOLS]", "[SYSTEM_PROMPT]"}, NULL, {"tekken"},
                        {"[INST]", "[TOOL_CALLS]"}, false, C_CHAT | C_TOOLS, FAMILY_PARSER_MISTRAL,
                        TMPL_DEFAULT_MISTRAL, "[THINK]", "[/THINK]", false, NULL},
    [FAMILY_MIXTRAL] = {"mixtral", "Mixtral", {NULL}, {"llama"}, {"mixtral"}, {"[INST]"}, "llama", {NULL},
                        {"[INST]"}, true, C_CHAT | C_TOOLS, FAMILY_PARSER_MISTRAL, TMPL_DEFAULT_MISTRAL, NO_THINK,
                        false, NULL},
    [FAMILY_QWEN2] = {"qwen2", "Qwen2 / Qwen2.5", {"qwen2", "qwen2moe"}, {NULL}, {"qwen2", "qwq"},
                      {"<|im_start|>"}, "gpt2", {"qwen2"}, {"<|im_start|>"}, false, C_CHAT | C_TOOLS,
                      FAMILY_PARSER_HERMES, TMPL_DEFAULT_CHATML, NO_THINK, false, NULL},
    [FAMILY_QWEN3] = {"qwen3", "Qwen3", {"qwen3", "qwen3moe"}, {NULL}, {"qwen3"},
                      {"<|im_start|>", "enable_thinking"}, "gpt2", {"qwen2"}, {"<|im_start|>", "<think>"}, false,
                      C_CHAT | C_TOOLS | C_REASON, FAMILY_PARSER_HERMES, TMPL_DEFAULT_CHATML, THINK, false, NULL},
    [FAMILY_QWEN25_OMNI] = {"qwen2.5-omni", "Qwen2.5-Omni", {"qwen2.5omni", "qwen25omni", "qwen2omni"},
                            {"qwen2vl"}, {"qwen25omni", "qwen2+omni"}, {"<|AUDIO|>"}, "gpt2", {"qwen2"},
                            {"<|AUDIO|>", "<|audio_bos|>"}, false, C_CHAT | C_VISION | C_AIN | C_AOUT,
                            FAMILY_PARSER_HERMES, TMPL_DEFAULT_CHATML, NO_THINK, false,
                            "audio and vision input need its encoders (mmproj 'qwen2.5o') and speech output "
                            "needs its talker and code2wav decoder, none implemented yet"},
    [FAMILY_QWEN3_OMNI] = {"qwen3-omni", "Qwen3-Omni", {"qwen3omni", "qwen3omnimoe"},
                           {"qwen3vlmoe", "qwen3moe", "qwen3vl", "qwen3"}, {"qwen3omni", "qwen3+omni"},
                           {"<|audio_start|>"}, "gpt2", {"qwen2"}, {"<|audio_start|>", "<|audio_pad|>"}, false,
                           C_CHAT | C_TOOLS | C_VISION | C_AIN | C_AOUT, FAMILY_PARSER_HERMES,
                           TMPL_DEFAULT_CHATML, THINK, false,
                           "audio and vision input need its encoders (mmproj 'qwen3a'/'qwen3vl') and speech "
                           "output needs its talker and code2wav decoder, none implemented yet"},
    [FAMILY_VOXTRAL] = {"voxtral", "Voxtral", {"voxtral"}, {"llama"}, {"voxtral"}, {"[AUDIO]"}, NULL,
                        {"tekken"}, {"[AUDIO]", "[BEGIN_AUDIO]", "[TRANSCRIBE]"}, false,
                        C_CHAT | C_TOOLS | C_AIN | C_STT, FAMILY_PARSER_MISTRAL, TMPL_DEFAULT_MISTRAL, NO_THINK,
                        false,
                        "audio input needs the Voxtral audio encoder (Whisper-style, mmproj 'voxtral'), not "
                        "implemented yet"},
    [FAMILY_VOXTRAL_REALTIME] = {"voxtral-realtime", "Voxtral Realtime",
                                 {"voxtral_realtime", "voxtral-realtime", "voxtralrealtime", "voxtral_streaming"},
                                 {"voxtral", "llama"}, {"voxtral+realtime", "voxtral+streaming"}, {NULL}, NULL,
                                 {"tekken"}, {"[STREAMING_PAD]", "[TRANSCRIBE]"}, false, C_AIN | C_STT | C_RT,
                                 FAMILY_PARSER_PLAIN, TMPL_DEFAULT_NONE, NO_THINK, false,
                                 "streaming transcription needs Voxtral Realtime's causal audio encoder, not "
                                 "implemented yet"},
    [FAMILY_GEMMA2] = {"gemma2", "Gemma 2", {"gemma2"}, {NULL}, {"gemma2"}, {"<start_of_turn>"}, "llama",
                       {NULL}, {"<start_of_turn>", "<end_of_turn>"}, false, C_CHAT, FAMILY_PARSER_PLAIN,
                       TMPL_DEFAULT_GEMMA, NO_THINK, false, NULL},
    [FAMILY_GEMMA3] = {"gemma3", "Gemma 3", {"gemma3", "gemma3n"}, {NULL}, {"gemma3"}, {"<start_of_turn>"},
                       "llama", {NULL}, {"<start_of_turn>", "<start_of_image>"}, false, C_CHAT | C_VISION,
                       FAMILY_PARSER_PLAIN, TMPL_DEFAULT_GEMMA, NO_THINK, false,
                       "image input needs the SigLIP vision encoder (mmproj 'gemma3'), not implemented yet"},
    [FAMILY_PHI3] = {"phi3", "Phi-3", {"phi3", "phimoe"}, {NULL}, {"phi3"}, {"<|assistant|>", "<|end|>"},
                     "llama", {NULL}, {"<|assistant|>", "<|end|>"}, false, C_CHAT, FAMILY_PARSER_PLAIN,
                     TMPL_DEFAULT_PHI3, NO_THINK, false, NULL},
    [FAMILY_PHI4] = {"phi4", "Phi-4", {NULL}, {"phi3"}, {"phi4"}, {"<|im_sep|>", "<|tool|>"}, "gpt2",
                     {"gpt-4o", "dbrx"}, {"<|im_sep|>", "<|tool_call|>"}, false, C_CHAT | C_TOOLS,
                     FAMILY_PARSER_PLAIN, TMPL_DEFAULT_PHI3, THINK, false, NULL},
    [FAMILY_SMOLLM] = {"smollm", "SmolLM", {NULL}, {"llama"}, {"smollm"}, {"<|im_start|>"}, "gpt2", {"smollm"},
                       {"<|im_start|>"}, false, C_CHAT, FAMILY_PARSER_HERMES, TMPL_DEFAULT_CHATML, NO_THINK, false, NULL},
    [FAMILY_SMOLLM3] = {"smollm3", "SmolLM3", {"smollm3"}, {NULL}, {"smollm3"}, {"/no_think"}, "gpt2",
                        {"smollm", "llama-bpe"}, {NULL}, false, C_CHAT | C_TOOLS | C_REASON, FAMILY_PARSER_HERMES,
                        TMPL_DEFAULT_CHATML, THINK, false, NULL},
    [FAMILY_DEEPSEEK_R1_DISTILL] = {"deepseek-r1-distill", "DeepSeek-R1 distill", {NULL}, {"qwen2", "llama"},
                                    {"r1distill", "deepseekr1"},
                                    {"<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>", "<\xef\xbd\x9c" "User\xef\xbd\x9c>"},
                                    "gpt2", {"deepseek-r1-qwen"},
                                    {"<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"}, false, C_CHAT | C_REASON,
                                    FAMILY_PARSER_DEEPSEEK, TMPL_DEFAULT_DEEPSEEK, THINK, true, NULL},
    [FAMILY_GPT_OSS] = {"gpt-oss", "GPT-OSS", {"gpt-oss"}, {NULL}, {"gptoss"},
                        {"<|channel|>", "<|message|>"}, "gpt2", {"gpt-4o"}, {"<|channel|>", "<|message|>"},
                        false, C_CHAT | C_TOOLS | C_REASON, FAMILY_PARSER_HARMONY, TMPL_DEFAULT_HARMONY,
                        "<|channel|>analysis<|message|>", "<|end|>", false, NULL},
    [FAMILY_GRANITE] = {"granite", "Granite", {"granite", "granitemoe", "granitehybrid"}, {NULL}, {"granite"},
                        {"<|start_of_role|>"}, "gpt2", {"refact", "granite"}, {"<|start_of_role|>"}, false,
                        C_CHAT | C_TOOLS, FAMILY_PARSER_GRANITE, TMPL_DEFAULT_GRANITE, THINK, false, NULL},
    [FAMILY_HERMES] = {"hermes", "Hermes", {NULL}, {"llama"}, {"hermes"}, {"<tool_call>", "<|im_start|>"}, NULL, {NULL},
                       {"<|im_start|>"},
                       false, C_CHAT | C_TOOLS, FAMILY_PARSER_HERMES, TMPL_DEFAULT_CHATML, NO_THINK, false, NULL},
    [FAMILY_FUNCTIONARY] = {"functionary", "Functionary", {NULL}, {"llama"}, {"functionary"},
                            {">>>all", "<|NONE|>", "// Supported function definitions", "<function="}, NULL, {NULL}, {NULL}, false, C_CHAT | C_TOOLS,
                            FAMILY_PARSER_FUNCTIONARY, TMPL_DEFAULT_LLAMA3, NO_THINK, false, NULL},
    [FAMILY_BERT] = {"bert", "BERT embedder",
                     {"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3", "modern-bert",
                      "neo-bert", "eurobert"},
                     {NULL}, {NULL}, {NULL}, "bert", {NULL}, {"[CLS]", "[SEP]"}, false, C_EMBED,
                     FAMILY_PARSER_PLAIN, TMPL_DEFAULT_NONE, NO_THINK, false, NULL},
    [FAMILY_OLMO2] = {"olmo2", "OLMo 2", {"olmo2"}, {NULL}, {"olmo2"}, {"<|assistant|>"}, "gpt2", {NULL},
                      {NULL}, false, C_CHAT, FAMILY_PARSER_PLAIN, TMPL_DEFAULT_CHATML, NO_THINK, false, NULL},
    [FAMILY_GLM4] = {"glm4", "GLM-4", {"glm4"}, {NULL}, {"glm4", "glmz1"}, {"[gMASK]<sop>"}, "gpt2", {"glm4"},
                     {"[gMASK]", "<|user|>"}, false, C_CHAT, FAMILY_PARSER_PLAIN, TMPL_DEFAULT_CHATML, NO_THINK,
                     false, NULL},
    /* OLMoE-1B-7B-Instruct's template is the Tulu one OLMo 2 uses */
    [FAMILY_OLMOE] = {"olmoe", "OLMoE", {"olmoe"}, {NULL}, {"olmoe"}, {"<|assistant|>"}, "gpt2", {NULL}, {NULL},
                      false, C_CHAT, FAMILY_PARSER_PLAIN, TMPL_DEFAULT_CHATML, NO_THINK, false, NULL},
    /* LFM2's converter writes tokenizer.ggml.pre "lfm2"; the 8B-A1B MoE is
     * architecture lfm2moe (not run yet). Its templates list the tools in
     * the system turn ("List of tools: [...]", LFM2 wraps them in
     * <|tool_list_start|>); calls come back as a Python list (parse_py.c). */
    [FAMILY_LFM2] = {"lfm2", "LFM2", {"lfm2", "lfm2moe"}, {NULL}, {"lfm2"},
                     {"<|tool_list_start|>", "List of tools: [", "<|tool_call_start|>"}, "gpt2", {"lfm2"},
                     {"<|tool_call_start|>", "<|im_start|>"}, false, C_CHAT | C_TOOLS, FAMILY_PARSER_LFM2,
                     TMPL_DEFAULT_CHATML, THINK, false, NULL},
    [FAMILY_EMBEDDINGGEMMA] = {"embeddinggemma", "EmbeddingGemma", {"gemma-embedding"}, {NULL},
                               {"embeddinggemma"}, {NULL}, "llama", {NULL}, {"<start_of_turn>"}, false, C_EMBED,
                               FAMILY_PARSER_PLAIN, TMPL_DEFAULT_NONE, NO_THINK, false, NULL},
    [FAMILY_EXAONE4] = {"exaone4", "EXAONE 4.0", {"exaone4"}, {NULL}, {"exaone4", "exaone"},
                        {"[|assistant|]", "[|endofturn|]"}, "gpt2", {"exaone4"}, {"[|endofturn|]", "[|assistant|]"},
                        false, C_CHAT | C_TOOLS, FAMILY_PARSER_PLAIN, TMPL_DEFAULT_CHATML, NO_THINK, false, NULL},
    /* Qwen3.5 (dense and MoE) and Qwen3-Next, run by qwen35.c. Qwen3.5's
     * template (../shared/templates/Qwen3.5-4B.jinja) opens <think> in the
     * generation prompt and teaches Qwen3-Coder's XML calls
     * (<function=..><parameter=..>); Qwen3-Next's Hermes JSON calls, which
     * the same parser also reads. */
    [FAMILY_QWEN35] = {"qwen3.5", "Qwen3.5 / Qwen3-Next", {"qwen35", "qwen35moe", "qwen3next"}, {NULL},
                       {"qwen35", "qwen3next"}, {"<parameter=", "enable_thinking"}, "gpt2", {"qwen35", "qwen2"},
                       {"<|im_start|>", "<think>"}, false, C_CHAT | C_TOOLS | C_REASON, FAMILY_PARSER_QWEN3_CODER,
                       TMPL_DEFAULT_CHATML, THINK, true, NULL},
    /* Mamba-2 checkpoints are base models (no chat template; the
     * GPT-NeoX tokenizer); Mamba-1 ("mamba") is named but not run. */
    [FAMILY_MAMBA2] = {"mamba2", "Mamba-2", {"mamba2", "mamba"}, {NULL}, {"mamba2", "mambacodestral"}, {NULL},
                       "gpt2", {NULL}, {NULL}, false, C_CHAT, FAMILY_PARSER_PLAIN, TMPL_DEFAULT_CHATML, NO_THINK,
                       false, NULL},
    /* Nemotron-H (8B, Nano 9B v2: nemotron_h) and Nemotron 3 Nano
     * (nemotron_h_moe, not run yet): ChatML turns, <think> reasoning,
     * tool calls as <tool_call><function=NAME><parameter=...> (the Hermes
     * parser reads that form, parse_xml.c). */
    [FAMILY_NEMOTRON_H] = {"nemotron-h", "Nemotron-H", {"nemotron_h", "nemotron_h_moe"}, {NULL},
                           {"nemotronh", "nemotronnano", "nemotron3"}, {"truncate_history_thinking"}, "gpt2",
                           {NULL}, {"<|im_start|>", "<think>"}, false, C_CHAT | C_TOOLS | C_REASON,
                           FAMILY_PARSER_HERMES, TMPL_DEFAULT_CHATML, THINK, false, NULL},
    [FAMILY_GEMMA4] = {"gemma4", "Gemma 4", {"gemma4"}, {NULL}, {"gemma4", "gemma+4"}, {"<|turn>"}, NULL, {NULL},
                       {"<|turn>", "<turn|>"}, false, C_CHAT | C_VISION, FAMILY_PARSER_PLAIN, TMPL_DEFAULT_GEMMA,
                       NO_THINK, false,
                       "image and audio input need Gemma 4's encoders, tool calls (<|tool_call>) and its thought "
                       "channel are not parsed yet, and the mixture-of-experts 26B-A4B does not run yet"},
};

/* Vocabulary tokens that mean fill-in-the-middle. */
static const char *const FIM_TOKENS[] = {"<|fim_prefix|>", "<fim_prefix>", "<PRE>",
                                         "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>"};

static const char *const PARSER_NAMES[FAMILY_PARSER_COUNT] = {
    [FAMILY_PARSER_PLAIN] = "plain",         [FAMILY_PARSER_HERMES] = "hermes",
    [FAMILY_PARSER_LLAMA3] = "llama3",       [FAMILY_PARSER_MISTRAL] = "mistral",
    [FAMILY_PARSER_DEEPSEEK] = "deepseek",   [FAMILY_PARSER_HARMONY] = "harmony",
    [FAMILY_PARSER_GRANITE] = "granite",     [FAMILY_PARSER_FUNCTIONARY] = "functionary",
    [FAMILY_PARSER_LFM2] = "lfm2",           [FAMILY_PARSER_QWEN3_CODER] = "qwen3-coder",
};

static const char *const CAP_NAMES[FAMILY_CAP_COUNT_] = {
    "chat", "tools", "reasoning", "vision", "audio_in", "audio_out", "transcribe", "realtime", "embeddings", "insert",
};

/* ---- accessors ---------------------------------------------------------- */

const char *family_name(family_id id) {
  return (unsigned)id < FAMILY_COUNT ? FAMILIES[id].name : "unknown";
}

const char *family_display(family_id id) {
  return (unsigned)id < FAMILY_COUNT ? FAMILIES[id].display : "Unknown";
}

family_id family_by_name(const char *name) {
  for (int i = 0; name && i < FAMILY_COUNT; i++)
    if (strcmp(FAMILIES[i].name, name) == 0) return (family_id)i;
  return FAMILY_UNKNOWN;
}

const char *family_parser_name(family_parser p) {
  return (unsigned)p < FAMILY_PARSER_COUNT ? PARSER_NAMES[p] : "plain";
}

const char *family_cap_name(uint32_t bit) {
  for (int i = 0; i < FAMILY_CAP_COUNT_; i++)
    if (bit == (1u << i)) return CAP_NAMES[i];
  return NULL;
}

size_t family_caps_str(uint32_t caps, char *out, size_t cap) {
  size_t n = 0;
  if (cap) out[0] = '\0';
  for (int i = 0; i < FAMILY_CAP_COUNT_; i++) {
    if (!(caps & (1u << i))) continue;
    int k = snprintf(cap > n ? out + n : NULL, cap > n ? cap - n : 0, "%s%s", n ? "," : "", CAP_NAMES[i]);
    if (k > 0) n += (size_t)k;
  }
  return n;
}

/* What the runtime executes is model.c's architecture table itself (a new
 * architecture is one row there, and the family table follows). */
bool family_arch_executable(const char *arch) { return model_arch_runs(arch); }

const char *family_missing(const family_info *info) {
  return info && info->missing[0] ? info->missing : NULL;
}

int family_require_executable(const family_info *info) {
  if (!info) return err_set(ERR_INVALID, "no model family given");
  if (info->executable) return 0;
  if (!info->arch[0]) return err_set(ERR_UNSUPPORTED, "the model file has no general.architecture; cannot run it");
  return err_set(ERR_UNSUPPORTED, "cannot run this model (%s, architecture '%s'): %s", info->display, info->arch,
                 info->missing[0] ? info->missing : "not implemented yet");
}

/* ---- detection ---------------------------------------------------------- */

static bool in_list(const char *const *list, size_t n, const char *s) {
  for (size_t i = 0; i < n && list[i]; i++)
    if (strcmp(list[i], s) == 0) return true;
  return false;
}
#define IN_LIST(arr, s) in_list((arr), sizeof(arr) / sizeof *(arr), (s))

/* lowercase letters and digits of s, NUL-terminated, truncated to cap-1 */
static void normalize(const char *s, char *out, size_t cap) {
  size_t n = 0;
  for (; s && *s && n + 1 < cap; s++) {
    unsigned char ch = (unsigned char)*s;
    if (isalnum(ch)) out[n++] = (char)tolower(ch);
  }
  out[n] = '\0';
}

/* length of the hint's letters when every '+'-separated part occurs in name, else 0 */
static size_t hint_match(const char *name, const char *hint) {
  char part[64];
  size_t total = 0;
  while (*hint) {
    size_t k = strcspn(hint, "+");
    if (k == 0 || k >= sizeof part) return 0;
    memcpy(part, hint, k);
    part[k] = '\0';
    if (!strstr(name, part)) return 0;
    total += k;
    hint += k;
    if (*hint == '+') hint++;
  }
  return total;
}

static const char *get_str(const gguf_file *f, const char *key) {
  const char *s = NULL;
  return gguf_get_str(f, key, &s) == 0 ? s : NULL;
}

#define MAX_NAMES 10
#define MAX_SPECIALS 96

typedef struct evidence {
  char arch[64];
  char names[MAX_NAMES][160]; /* normalized */
  bool name_strong[MAX_NAMES];
  int n_names;
  const char *tmpl, *tmpl_tools;
  const char *tok_model, *tok_pre;
  bool moe;
  const char *specials[MAX_SPECIALS]; /* every special token the table mentions */
  bool found[MAX_SPECIALS];
  int n_specials;
} evidence;

static void add_name(evidence *ev, const char *s, bool strong) {
  if (!s || ev->n_names >= MAX_NAMES) return;
  normalize(s, ev->names[ev->n_names], sizeof ev->names[0]);
  if (!ev->names[ev->n_names][0]) return;
  ev->name_strong[ev->n_names++] = strong;
}

static void add_special(evidence *ev, const char *s) {
  if (!s) return;
  for (int i = 0; i < ev->n_specials; i++)
    if (strcmp(ev->specials[i], s) == 0) return;
  if (ev->n_specials < MAX_SPECIALS) ev->specials[ev->n_specials++] = s;
}

static bool special_found(const evidence *ev, const char *s) {
  for (int i = 0; i < ev->n_specials; i++)
    if (strcmp(ev->specials[i], s) == 0) return ev->found[i];
  return false;
}

static void scan_vocab(const gguf_file *f, evidence *ev) {
  for (int r = 0; r < FAMILY_COUNT; r++)
    for (size_t i = 0; i < sizeof FAMILIES[r].specials / sizeof *FAMILIES[r].specials; i++)
      add_special(ev, FAMILIES[r].specials[i]);
  for (size_t i = 0; i < sizeof FIM_TOKENS / sizeof *FIM_TOKENS; i++) add_special(ev, FIM_TOKENS[i]);
  const gguf_value *arr = NULL;
  if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &arr) != 0 || !arr->v.arr.strs) return;
  size_t lens[MAX_SPECIALS];
  for (int i = 0; i < ev->n_specials; i++) lens[i] = strlen(ev->specials[i]);
  for (uint64_t t = 0; t < arr->v.arr.n; t++) {
    const gguf_str *s = &arr->v.arr.strs[t];
    if (s->len < 3 || s->len > 40 || (s->data[0] != '<' && s->data[0] != '[')) continue;
    for (int i = 0; i < ev->n_specials; i++)
      if (!ev->found[i] && lens[i] == s->len && memcmp(ev->specials[i], s->data, s->len) == 0) ev->found[i] = true;
  }
}

static void gather(const gguf_file *f, evidence *ev) {
  const char *arch = get_str(f, "general.architecture");
  snprintf(ev->arch, sizeof ev->arch, "%s", arch ? arch : "");
  add_name(ev, get_str(f, "general.name"), true);
  add_name(ev, get_str(f, "general.basename"), true);
  uint32_t n_base = 0;
  if (gguf_get_u32(f, "general.base_model.count", &n_base) == 0) {
    for (uint32_t i = 0; i < n_base && i < 8; i++) {
      char key[64];
      snprintf(key, sizeof key, "general.base_model.%u.name", i);
      add_name(ev, get_str(f, key), false);
    }
  }
  ev->tmpl = get_str(f, "tokenizer.chat_template");
  ev->tmpl_tools = get_str(f, "tokenizer.chat_template.tool_use");
  ev->tok_model = get_str(f, "tokenizer.ggml.model");
  ev->tok_pre = get_str(f, "tokenizer.ggml.pre");
  if (arch) {
    char key[96];
    uint32_t n_exp = 0;
    snprintf(key, sizeof key, "%s.expert_count", arch);
    ev->moe = gguf_get_u32(f, key, &n_exp) == 0 && n_exp > 0;
  }
  scan_vocab(f, ev);
}

static bool tmpl_has(const evidence *ev, const char *mark) {
  return (ev->tmpl && strstr(ev->tmpl, mark)) || (ev->tmpl_tools && strstr(ev->tmpl_tools, mark));
}

/* score of a row, or -1 when its architecture lists do not hold ev->arch */
static int score_row(const family_row *r, const evidence *ev) {
  int base;
  if (IN_LIST(r->archs, ev->arch)) base = 10;
  else if (IN_LIST(r->weak_archs, ev->arch)) base = 1;
  else return -1;
  int own = 0; /* evidence that names this family, beyond the architecture and tokenizer */
  for (size_t h = 0; h < sizeof r->names / sizeof *r->names && r->names[h]; h++)
    for (int i = 0; i < ev->n_names; i++) {
      size_t k = hint_match(ev->names[i], r->names[h]);
      /* on a shared architecture the name is what tells a fine-tune
       * (Hermes, R1 distill, Voxtral) from its base: it counts double */
      if (k) own += (ev->name_strong[i] ? 12 + 2 * (int)k : 4 + (int)k) * (base == 1 ? 2 : 1);
    }
  for (size_t m = 0; m < sizeof r->marks / sizeof *r->marks && r->marks[m]; m++)
    if (tmpl_has(ev, r->marks[m])) own += base == 1 ? 30 : 15;
  for (size_t i = 0; i < sizeof r->specials / sizeof *r->specials && r->specials[i]; i++)
    if (special_found(ev, r->specials[i])) own += 6;
  if (r->moe_hint && ev->moe) own += 20;
  /* a shared architecture plus a matching tokenizer is not enough */
  if (base == 1 && own == 0) return -1;
  int s = base + own;
  if (r->tok_model && ev->tok_model && strcmp(r->tok_model, ev->tok_model) == 0) s += 4;
  if (ev->tok_pre && IN_LIST(r->tok_pre, ev->tok_pre)) s += 8;
  return s;
}

/* Compiles src, NULL when it does not compile (the probes then say no). */
static tmpl *compile_quiet(const char *src) {
  tmpl *t = NULL;
  if (src && tmpl_compile(src, strlen(src), &t) != 0) t = NULL;
  err_clear();
  return t;
}

static void append_missing(family_info *info, const char *text) {
  size_t n = strlen(info->missing);
  snprintf(info->missing + n, sizeof info->missing - n, "%s%s", n ? "; " : "", text);
}

int family_detect(const gguf_file *f, family_info *out) {
  if (!f || !out) return err_set(ERR_INVALID, "family_detect: no file or no output given");
  memset(out, 0, sizeof *out);
  evidence *ev = calloc(1, sizeof *ev);
  if (!ev) return err_set(ERR_NOMEM, "family_detect: out of memory");
  gather(f, ev);

  family_id best = FAMILY_UNKNOWN;
  int best_score = 9; /* a candidate needs 10 */
  for (int r = 1; r < FAMILY_COUNT; r++) {
    int s = score_row(&FAMILIES[r], ev);
    if (s > best_score) {
      best_score = s;
      best = (family_id)r;
    }
  }
  const family_row *row = &FAMILIES[best];
  out->id = best;
  out->name = row->name;
  out->display = row->display;
  snprintf(out->arch, sizeof out->arch, "%s", ev->arch);
  out->caps = row->caps;
  out->parser = row->parser;
  out->think_open = row->think_open;
  out->think_close = row->think_close;
  out->template_opens_think = row->opens_think;
  out->default_template = row->tmpl;
  out->has_template = ev->tmpl != NULL;
  out->has_tool_template = ev->tmpl_tools != NULL;

  /* refine the capabilities from the file: tools when the template that a
   * request with tools gets (the tool_use variant, the file's, or the
   * family default) shows them to the model, measured by rendering it */
  if (out->caps & FAMILY_CAP_CHAT) {
    const char *src = NULL;
    tmpl *t = family_chat_template(f, out, true, &src, NULL) == 0 ? compile_quiet(src) : NULL;
    err_clear();
    if (t && tmpl_renders_tools(t)) out->caps |= FAMILY_CAP_TOOLS;
    else out->caps &= ~(uint32_t)FAMILY_CAP_TOOLS;
    out->template_renders_system = t && tmpl_renders_system(t);
    if (t && tmpl_renders_effort(t)) out->caps |= FAMILY_CAP_REASONING_LEVELS;
    tmpl_free(t);
  }
  if ((out->caps & FAMILY_CAP_CHAT) && (ev->tmpl || ev->tmpl_tools)) {
    const char *close = out->think_close ? out->think_close : "</think>";
    if (tmpl_has(ev, close) && tmpl_has(ev, out->think_open ? out->think_open : "<think>")) {
      out->caps |= FAMILY_CAP_REASONING;
      if (!out->think_open) {
        out->think_open = "<think>";
        out->think_close = "</think>";
      }
    }
  }
  if (!(out->caps & FAMILY_CAP_REASONING)) {
    out->caps &= ~(uint32_t)FAMILY_CAP_REASONING_LEVELS;
    out->think_open = out->think_close = NULL;
    out->template_opens_think = false;
  } else if (ev->tmpl && out->think_open) {
    tmpl *t = compile_quiet(ev->tmpl);
    int o = tmpl_probe_opens_think(t, out->think_open);
    tmpl_free(t);
    if (o >= 0) out->template_opens_think = o;
  }
  for (size_t i = 0; i < sizeof FIM_TOKENS / sizeof *FIM_TOKENS; i++)
    if (special_found(ev, FIM_TOKENS[i])) out->caps |= FAMILY_CAP_INSERT;
  if (gguf_find(f, "tokenizer.ggml.fim_pre_token_id") || gguf_find(f, "tokenizer.ggml.prefix_token_id"))
    out->caps |= FAMILY_CAP_INSERT;
  if (ev->arch[0]) {
    char key[96];
    snprintf(key, sizeof key, "%s.pooling_type", ev->arch);
    if (gguf_find(f, key)) out->caps |= FAMILY_CAP_EMBED;
  }

  /* can the runtime run it, and what is missing */
  /* runnable: the architecture's graph exists and the family has a capability
   * that needs nothing more (a transcription-only model needs its encoder) */
  out->executable = best != FAMILY_UNKNOWN && family_arch_executable(ev->arch) &&
                    (row->caps & (FAMILY_CAP_CHAT | FAMILY_CAP_EMBED));
  char text[768];
  if (!ev->arch[0]) {
    append_missing(out, "the file has no general.architecture");
  } else if (best == FAMILY_UNKNOWN) {
    snprintf(text, sizeof text, "architecture '%.60s' is not recognized", ev->arch);
    append_missing(out, text);
  } else if (!out->executable && family_arch_executable(ev->arch)) {
    /* the graph runs; the family has nothing to do with text alone (its
     * `needs` below says which component it waits for) */
    snprintf(text, sizeof text, "%s is a %s family: it has no text chat or embeddings to run on architecture "
             "'%.60s' alone", row->display, (row->caps & C_STT) ? "transcription-only" : "non-text", ev->arch);
    append_missing(out, text);
  } else if (!out->executable) {
    /* the list is the runtime's architecture table itself, each name once
     * (llama's dense and MoE rows share theirs) */
    int n = snprintf(text, sizeof text, "architecture '%.60s' (%s) is not implemented yet; the runtime executes ",
                     ev->arch, row->display);
    for (int a = 0; a < MODEL_ARCH_COUNT && n > 0 && (size_t)n < sizeof text; a++) {
      const char *name = model_arch_name((enum model_arch)a);
      bool seen = false;
      for (int b = 0; b < a; b++) seen |= strcmp(name, model_arch_name((enum model_arch)b)) == 0;
      if (!seen) n += snprintf(text + n, sizeof text - (size_t)n, "%s%s", a == 0 ? "" : ", ", name);
    }
    append_missing(out, text);
  }
  if (row->needs) append_missing(out, row->needs);
  free(ev);
  return 0;
}

/* ---- templates ---------------------------------------------------------- */

int family_chat_template(const gguf_file *f, const family_info *info, bool want_tools, const char **src,
                         const char **origin) {
  static const char *const DEFAULT_ORIGINS[TMPL_DEFAULT_COUNT] = {
      [TMPL_DEFAULT_CHATML] = "default:chatml",   [TMPL_DEFAULT_LLAMA2] = "default:llama2",
      [TMPL_DEFAULT_LLAMA3] = "default:llama3",   [TMPL_DEFAULT_MISTRAL] = "default:mistral",
      [TMPL_DEFAULT_GEMMA] = "default:gemma",     [TMPL_DEFAULT_PHI3] = "default:phi3",
      [TMPL_DEFAULT_GRANITE] = "default:granite", [TMPL_DEFAULT_DEEPSEEK] = "default:deepseek",
      [TMPL_DEFAULT_HARMONY] = "default:harmony",
  };
  const char *s = NULL, *o = NULL;
  if (f && want_tools && (s = get_str(f, "tokenizer.chat_template.tool_use"))) o = "tokenizer.chat_template.tool_use";
  else if (f && (s = get_str(f, "tokenizer.chat_template"))) o = "tokenizer.chat_template";
  else {
    tmpl_default_id d = info ? info->default_template : TMPL_DEFAULT_CHATML;
    if (d == TMPL_DEFAULT_NONE)
      return err_set(ERR_NOT_FOUND, "the model (%s) has no chat template and no chat format",
                     info ? info->display : "unknown");
    if ((unsigned)d >= TMPL_DEFAULT_COUNT) d = TMPL_DEFAULT_CHATML;
    s = tmpl_default_source(d);
    o = DEFAULT_ORIGINS[d];
  }
  if (src) *src = s;
  if (origin) *origin = o;
  return 0;
}
