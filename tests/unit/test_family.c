/*
 * test_family.c - model family detection from synthetic GGUF headers.
 *
 * Each test writes a metadata-only GGUF (no tensors, a handful of tokens)
 * with the project's GGUF writer, the way llama.cpp's converter labels that
 * family (architecture string, names, tokenizer model/pre, template marks,
 * special tokens), and checks the detected family, capabilities, output
 * parser, reasoning markers and whether the runtime can execute it. The
 * expected values are written by hand from the families' documentation.
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "gguf/gguf.h"
#include "model/family.h"
#include "model/model.h"
#include "test.h"
#include "tmpl/default_templates.h"

typedef struct fake_model {
  const char *arch, *name, *basename, *base_name;
  const char *tok_model, *tok_pre;
  const char *tmpl, *tmpl_tool;
  const char *tokens[8]; /* added after <unk> <s> </s> */
  uint32_t experts;
  bool pooling;
  bool fim_key;
} fake_model;

/* Builds the GGUF in memory and opens it; *mem must be freed after close. */
static int fake_open(const fake_model *m, gguf_file **out, char **mem) {
  gguf_writer *w = NULL;
  int rc = gguf_writer_new(&w);
  if (rc) return rc;
  if (m->arch) rc |= gguf_writer_add_str(w, "general.architecture", m->arch);
  if (m->name) rc |= gguf_writer_add_str(w, "general.name", m->name);
  if (m->basename) rc |= gguf_writer_add_str(w, "general.basename", m->basename);
  if (m->base_name) {
    rc |= gguf_writer_add_u32(w, "general.base_model.count", 1);
    rc |= gguf_writer_add_str(w, "general.base_model.0.name", m->base_name);
  }
  if (m->experts && m->arch) {
    char key[96];
    snprintf(key, sizeof key, "%s.expert_count", m->arch);
    rc |= gguf_writer_add_u32(w, key, m->experts);
  }
  if (m->pooling && m->arch) {
    char key[96];
    snprintf(key, sizeof key, "%s.pooling_type", m->arch);
    rc |= gguf_writer_add_u32(w, key, 1);
  }
  if (m->tok_model) rc |= gguf_writer_add_str(w, "tokenizer.ggml.model", m->tok_model);
  if (m->tok_pre) rc |= gguf_writer_add_str(w, "tokenizer.ggml.pre", m->tok_pre);
  const char *toks[16] = {"<unk>", "<s>", "</s>"};
  size_t n = 3;
  for (size_t i = 0; i < 8 && m->tokens[i]; i++) toks[n++] = m->tokens[i];
  toks[n++] = "a";
  toks[n++] = "b";
  rc |= gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, n);
  rc |= gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
  rc |= gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
  if (m->fim_key) rc |= gguf_writer_add_u32(w, "tokenizer.ggml.fim_pre_token_id", 3);
  if (m->tmpl) rc |= gguf_writer_add_str(w, "tokenizer.chat_template", m->tmpl);
  if (m->tmpl_tool) rc |= gguf_writer_add_str(w, "tokenizer.chat_template.tool_use", m->tmpl_tool);
  buf b = BUF_INIT;
  if (!rc) rc = gguf_writer_write_buf(w, &b);
  gguf_writer_free(w);
  if (rc) {
    buf_free(&b);
    return rc ? rc : ERR_INTERNAL;
  }
  *mem = b.data;
  rc = gguf_open_mem(b.data, b.len, out);
  if (rc) {
    free(b.data);
    *mem = NULL;
  }
  return rc;
}

/* Detects m; returns 0 and fills *fi. */
static int detect(const fake_model *m, family_info *fi) {
  gguf_file *f = NULL;
  char *mem = NULL;
  int rc = fake_open(m, &f, &mem);
  if (rc) return rc;
  rc = family_detect(f, fi);
  gguf_close(f);
  free(mem);
  return rc;
}

static const char QWEN3_TMPL[] =
    "{%- if tools %}<|im_start|>system\n# Tools{{ tools | tojson }}<|im_end|>\n{%- endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{%- if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{%- endif %}{%- endif %}";
static const char QWQ_TMPL[] =
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content.split('</think>')[-1] }}<|im_end|>\n"
    "{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n<think>\n{%- endif %}";
static const char R1_TMPL[] =
    "{{ bos_token }}{%- for m in messages %}{%- if m.role == 'user' %}{{ '<\xef\xbd\x9cUser\xef\xbd\x9c>' + m.content }}"
    "{%- else %}{{ '<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>' + m.content.split('</think>')[-1] }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<\xef\xbd\x9c" "Assistant\xef\xbd\x9c><think>\\n' }}{%- endif %}";
static const char MISTRAL_TMPL[] =
    "{{ bos_token }}{%- for m in messages %}{%- if m.role == 'user' %}{%- if tools and loop.last %}"
    "[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{%- endif %}[INST]{{ m.content }}[/INST]"
    "{%- else %}{{ m.content }}{{ eos_token }}{%- endif %}{%- endfor %}";
static const char MISTRAL_V1_TMPL[] =
    "{{ bos_token }}{%- for m in messages %}{%- if m.role == 'user' %}[INST] {{ m.content }} [/INST]"
    "{%- else %}{{ m.content }}{{ eos_token }}{%- endif %}{%- endfor %}";
static const char GRANITE_TMPL[] =
    "{%- for m in messages %}<|start_of_role|>{{ m.role }}<|end_of_role|>{{ m.content }}<|end_of_text|>\n"
    "{%- endfor %}{%- if tools %}<|start_of_role|>available_tools<|end_of_role|>{{ tools | tojson }}{%- endif %}"
    "{%- if add_generation_prompt %}<|start_of_role|>assistant<|end_of_role|>{%- endif %}";
static const char HARMONY_TMPL[] =
    "{%- for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{%- endfor %}"
    "{%- if tools %}<|start|>developer<|message|># Tools {{ tools | tojson }}<|end|>{%- endif %}"
    "{%- if add_generation_prompt %}<|start|>assistant{%- endif %}";

#define CAPS(fi) ((fi).caps)

TEST(family_llama2_bare_spm) {
  family_info fi;
  fake_model m = {.arch = "llama", .name = "Llama 2 7b Chat Hf", .tok_model = "llama"};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_LLAMA2);
  EXPECT_STR_EQ(fi.name, "llama2");
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "plain");
  EXPECT_TRUE(fi.executable);
  EXPECT_TRUE(family_missing(&fi) == NULL);
  EXPECT_FALSE(fi.has_template);
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_LLAMA2);
  EXPECT_TRUE(fi.think_open == NULL);
  /* no name at all: a SentencePiece llama is Llama 2 */
  fake_model bare = {.arch = "llama", .tok_model = "llama"};
  ASSERT_INT_EQ(detect(&bare, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_LLAMA2);
}

TEST(family_llama2_shared_tiny_model) {
  char p[512];
  if (!test_shared_path("models/llama-2-tiny-random.gguf", p, sizeof p))
    TEST_SKIP("../shared/models/llama-2-tiny-random.gguf is absent");
  gguf_file *f = NULL;
  ASSERT_INT_EQ(gguf_open(p, &f), 0);
  family_info fi;
  EXPECT_INT_EQ(family_detect(f, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_LLAMA2);
  EXPECT_STR_EQ(fi.arch, "llama");
  EXPECT_TRUE(fi.executable);
  gguf_close(f);
}

TEST(family_llama3) {
  family_info fi;
  fake_model m = {.arch = "llama", .name = "Meta Llama 3.1 8B Instruct", .tok_model = "gpt2", .tok_pre = "llama-bpe",
                  .tmpl = tmpl_default_source(TMPL_DEFAULT_LLAMA3), .tokens = {"<|start_header_id|>", "<|eot_id|>"}};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_LLAMA3);
  EXPECT_STR_EQ(fi.display, "Llama 3.x");
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "llama3");
  EXPECT_TRUE(fi.executable);
  EXPECT_TRUE(fi.has_template);
  /* without a name or template, the BPE tokenizer and its tokens decide */
  fake_model anon = {.arch = "llama", .tok_model = "gpt2", .tok_pre = "llama-bpe", .tokens = {"<|eot_id|>"}};
  ASSERT_INT_EQ(detect(&anon, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_LLAMA3);
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_LLAMA3);
}

TEST(family_mistral) {
  family_info fi;
  fake_model m = {.arch = "llama", .name = "Mistral 7B Instruct v0.3", .tok_model = "llama", .tmpl = MISTRAL_TMPL,
                  .tokens = {"[INST]", "[/INST]", "[TOOL_CALLS]"}};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_MISTRAL);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "mistral");
  EXPECT_TRUE(fi.executable);
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_MISTRAL);
  /* v0.1: a template without tools means no tool calling */
  fake_model v1 = {.arch = "llama", .name = "Mistral 7B Instruct v0.1", .tok_model = "llama", .tmpl = MISTRAL_V1_TMPL};
  ASSERT_INT_EQ(detect(&v1, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_MISTRAL);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT);
  /* Mistral Small 3.x and Ministral 3 have their own architecture, run by
   * llamalike.c's mistral3 row */
  fake_model small = {.arch = "mistral3", .name = "Mistral Small 3.2 24B Instruct 2506", .tok_model = "gpt2",
                      .tok_pre = "tekken"};
  ASSERT_INT_EQ(detect(&small, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_MISTRAL);
  EXPECT_TRUE(fi.executable);
  EXPECT_TRUE(family_missing(&fi) == NULL);
  /* a template with [THINK] .. [/THINK] (Ministral 3 Reasoning) reasons
   * with those markers; the plain Mistral templates above do not */
  fake_model rs = {.arch = "mistral3", .name = "Ministral 3 14B Reasoning 2512", .tok_model = "gpt2",
                   .tok_pre = "tekken",
                   .tmpl = "{{ '[SYSTEM_PROMPT]' }}{% for m in messages %}[INST]{{ m.content }}[/INST]{% endfor %}"
                           "{% if tools %}[AVAILABLE_TOOLS]{% endif %}{{ '[THINK]' }}{{ '[/THINK]' }}"};
  ASSERT_INT_EQ(detect(&rs, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_MISTRAL);
  EXPECT_TRUE((CAPS(fi) & FAMILY_CAP_REASONING) != 0);
  EXPECT_STR_EQ(fi.think_open, "[THINK]");
  EXPECT_STR_EQ(fi.think_close, "[/THINK]");
}

TEST(family_mixtral) {
  family_info fi;
  fake_model m = {.arch = "llama", .name = "Mixtral 8x7B Instruct v0.1", .tok_model = "llama", .experts = 8,
                  .tmpl = MISTRAL_V1_TMPL};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_MIXTRAL);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "mistral");
  EXPECT_TRUE(fi.executable);
  /* unnamed: the experts and the [INST] template say Mixtral */
  fake_model anon = {.arch = "llama", .tok_model = "llama", .experts = 8, .tmpl = MISTRAL_V1_TMPL};
  ASSERT_INT_EQ(detect(&anon, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_MIXTRAL);
}

TEST(family_qwen2) {
  family_info fi;
  fake_model m = {.arch = "qwen2", .name = "Qwen2.5 7B Instruct", .tok_model = "gpt2", .tok_pre = "qwen2",
                  .tmpl = tmpl_default_source(TMPL_DEFAULT_CHATML), .tokens = {"<|im_start|>", "<|im_end|>"}};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_QWEN2);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "hermes");
  EXPECT_TRUE(fi.think_open == NULL);
  EXPECT_TRUE(fi.executable);
  /* the coder variant has fill-in-the-middle tokens */
  fake_model coder = {.arch = "qwen2", .name = "Qwen2.5 Coder 7B", .tok_model = "gpt2", .tok_pre = "qwen2",
                      .tokens = {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"}};
  ASSERT_INT_EQ(detect(&coder, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_QWEN2);
  EXPECT_TRUE(CAPS(fi) & FAMILY_CAP_INSERT);
  /* QwQ: qwen2 architecture, a template that opens <think> itself */
  fake_model qwq = {.arch = "qwen2", .name = "QwQ 32B", .tok_model = "gpt2", .tok_pre = "qwen2", .tmpl = QWQ_TMPL};
  ASSERT_INT_EQ(detect(&qwq, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_QWEN2);
  EXPECT_TRUE(CAPS(fi) & FAMILY_CAP_REASONING);
  EXPECT_STR_EQ(fi.think_open, "<think>");
  EXPECT_STR_EQ(fi.think_close, "</think>");
  EXPECT_TRUE(fi.template_opens_think);
}

TEST(family_qwen3) {
  family_info fi;
  fake_model m = {.arch = "qwen3", .name = "Qwen3 0.6B", .tok_model = "gpt2", .tok_pre = "qwen2",
                  .tmpl = QWEN3_TMPL, .tokens = {"<|im_start|>", "<think>", "</think>"}};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_QWEN3);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS | FAMILY_CAP_REASONING);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "hermes");
  EXPECT_STR_EQ(fi.think_open, "<think>");
  EXPECT_STR_EQ(fi.think_close, "</think>");
  EXPECT_FALSE(fi.template_opens_think);
  EXPECT_TRUE(fi.executable);
  fake_model moe = {.arch = "qwen3moe", .name = "Qwen3 30B A3B", .tok_model = "gpt2", .tok_pre = "qwen2",
                    .experts = 128};
  ASSERT_INT_EQ(detect(&moe, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_QWEN3);
  EXPECT_TRUE(fi.executable); /* src/model/qwen3moe.c */
  EXPECT_TRUE(family_missing(&fi) == NULL);
  EXPECT_INT_EQ(family_require_executable(&fi), 0);
  /* an MoE architecture the runtime lacks */
  fake_model ds = {.arch = "deepseek2", .name = "DeepSeek V2 Lite Chat", .tok_model = "gpt2", .experts = 64};
  ASSERT_INT_EQ(detect(&ds, &fi), 0);
  EXPECT_FALSE(fi.executable);
  EXPECT_INT_EQ(family_require_executable(&fi), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "deepseek2");
}

/* The MoE rows qwen2moe.c, olmoe.c and granitemoe.c run: each in its
 * family, executable, with the family's capabilities, parser and default
 * template. */
TEST(family_moe_archs) {
  family_info fi;
  fake_model q = {.arch = "qwen2moe", .name = "Qwen1.5 MoE A2.7B Chat", .tok_model = "gpt2", .tok_pre = "qwen2",
                  .experts = 60, .tokens = {"<|im_start|>"}};
  ASSERT_INT_EQ(detect(&q, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_QWEN2);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "hermes");
  EXPECT_TRUE(fi.executable);
  EXPECT_INT_EQ(family_require_executable(&fi), 0);
  fake_model o = {.arch = "olmoe", .name = "OLMoE 1B 7B 0924 Instruct", .tok_model = "gpt2", .experts = 64};
  ASSERT_INT_EQ(detect(&o, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_OLMOE);
  EXPECT_STR_EQ(family_name(fi.id), "olmoe");
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS); /* the default template shows tools */
  EXPECT_STR_EQ(family_parser_name(fi.parser), "plain");
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_CHATML);
  EXPECT_TRUE(fi.executable);
  EXPECT_TRUE(family_missing(&fi) == NULL);
  fake_model g = {.arch = "granitemoe", .name = "Granite 3.1 3B A800M Instruct", .tok_model = "gpt2",
                  .tok_pre = "refact", .tmpl = GRANITE_TMPL, .experts = 40, .tokens = {"<|start_of_role|>"}};
  ASSERT_INT_EQ(detect(&g, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_GRANITE);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "granite");
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_GRANITE);
  EXPECT_TRUE(fi.executable);
  EXPECT_INT_EQ(family_require_executable(&fi), 0);
}

TEST(family_qwen3_omni) {
  family_info fi;
  fake_model m = {.arch = "qwen3moe", .name = "Qwen3 Omni 30B A3B Instruct", .tok_model = "gpt2", .tok_pre = "qwen2",
                  .tokens = {"<|im_start|>", "<|audio_start|>", "<|audio_pad|>", "<|audio_end|>"}};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_QWEN3_OMNI);
  uint32_t want = FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS | FAMILY_CAP_VISION | FAMILY_CAP_AUDIO_IN | FAMILY_CAP_AUDIO_OUT;
  EXPECT_INT_EQ(CAPS(fi) & want, want);
  EXPECT_TRUE(fi.executable); /* its thinker is a qwen3moe text decoder */
  EXPECT_STR_CONTAINS(family_missing(&fi), "talker");
  fake_model own = {.arch = "qwen3omnimoe", .tok_model = "gpt2"};
  ASSERT_INT_EQ(detect(&own, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_QWEN3_OMNI);
  EXPECT_STR_CONTAINS(family_missing(&fi), "'qwen3omnimoe'");
}

TEST(family_qwen25_omni) {
  family_info fi;
  fake_model m = {.arch = "qwen2vl", .name = "Qwen2.5 Omni 7B", .tok_model = "gpt2", .tok_pre = "qwen2",
                  .tokens = {"<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"}};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_QWEN25_OMNI);
  EXPECT_TRUE(CAPS(fi) & FAMILY_CAP_AUDIO_IN);
  EXPECT_TRUE(CAPS(fi) & FAMILY_CAP_AUDIO_OUT);
  EXPECT_FALSE(fi.executable);
  /* a plain Qwen2-VL shares the architecture but is not Omni */
  fake_model vl = {.arch = "qwen2vl", .name = "Qwen2 VL 7B Instruct", .tok_model = "gpt2", .tok_pre = "qwen2"};
  ASSERT_INT_EQ(detect(&vl, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_UNKNOWN);
  EXPECT_FALSE(fi.executable);
}

TEST(family_voxtral) {
  family_info fi;
  fake_model m = {.arch = "llama", .name = "Voxtral Mini 3B 2507", .tok_model = "gpt2", .tok_pre = "tekken",
                  .tokens = {"[INST]", "[AUDIO]", "[BEGIN_AUDIO]", "[TRANSCRIBE]"}};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_VOXTRAL);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS | FAMILY_CAP_AUDIO_IN | FAMILY_CAP_TRANSCRIBE);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "mistral");
  EXPECT_TRUE(fi.executable); /* its text decoder is a llama */
  EXPECT_STR_CONTAINS(family_missing(&fi), "Voxtral audio encoder");
}

TEST(family_voxtral_realtime) {
  family_info fi;
  fake_model m = {.arch = "llama", .name = "Voxtral Mini 4B Realtime 2602", .tok_model = "gpt2", .tok_pre = "tekken",
                  .tokens = {"[AUDIO]", "[BEGIN_AUDIO]"}};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_VOXTRAL_REALTIME);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_AUDIO_IN | FAMILY_CAP_TRANSCRIBE | FAMILY_CAP_REALTIME);
  EXPECT_FALSE(fi.executable); /* transcription needs the streaming encoder */
  EXPECT_STR_CONTAINS(family_missing(&fi), "causal audio encoder");
  /* the reason is the family, not the architecture (which runs) */
  EXPECT_STR_CONTAINS(family_missing(&fi), "transcription-only");
  EXPECT_TRUE(strstr(family_missing(&fi), "not implemented yet; the runtime executes") == NULL);
  ASSERT_INT_EQ(family_require_executable(&fi), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "Voxtral Realtime is a transcription-only family");
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_NONE);
  fake_model streaming = {.arch = "voxtral_realtime", .name = "Voxtral Streaming"};
  ASSERT_INT_EQ(detect(&streaming, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_VOXTRAL_REALTIME);
}

TEST(family_gemma) {
  family_info fi;
  fake_model g2 = {.arch = "gemma2", .name = "Gemma 2 2b It", .tok_model = "llama",
                   .tokens = {"<start_of_turn>", "<end_of_turn>"}};
  ASSERT_INT_EQ(detect(&g2, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_GEMMA2);
  /* no template in the file: the family default, which shows tools */
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "plain");
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_GEMMA);
  EXPECT_TRUE(fi.executable); /* src/model/gemma.c */
  EXPECT_TRUE(family_missing(&fi) == NULL);
  fake_model g3 = {.arch = "gemma3", .name = "Gemma 3 4b It", .tok_model = "llama",
                   .tokens = {"<start_of_turn>", "<start_of_image>"}};
  ASSERT_INT_EQ(detect(&g3, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_GEMMA3);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS | FAMILY_CAP_VISION);
  /* the text part runs; images still name what they need */
  EXPECT_TRUE(fi.executable);
  EXPECT_STR_CONTAINS(family_missing(&fi), "SigLIP vision encoder");
  fake_model g3n = {.arch = "gemma3n", .name = "Gemma 3n E2B", .tok_model = "llama"};
  ASSERT_INT_EQ(detect(&g3n, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_GEMMA3);
  EXPECT_FALSE(fi.executable); /* gemma3n is its own architecture */
  EXPECT_STR_CONTAINS(family_missing(&fi), "'gemma3n' (Gemma 3) is not implemented yet");
  /* the refusal lists what does run, from the runtime's own table */
  EXPECT_STR_CONTAINS(family_missing(&fi), "the runtime executes llama, qwen2, qwen3, bert");
  EXPECT_STR_CONTAINS(family_missing(&fi), ", nemotron_h");
  EXPECT_TRUE(strstr(family_missing(&fi), "llama, llama") == NULL);
}

/* Executable means "model.c has a row of that name": every row's name, and
 * nothing else. */
TEST(family_executable_is_the_runtime_table) {
  for (int a = 0; a < MODEL_ARCH_COUNT; a++) EXPECT_TRUE(family_arch_executable(model_arch_name((enum model_arch)a)));
  EXPECT_FALSE(family_arch_executable("gemma3n"));
  EXPECT_FALSE(family_arch_executable("llama4"));
  EXPECT_FALSE(family_arch_executable(""));
  EXPECT_FALSE(family_arch_executable(NULL));
}

TEST(family_phi) {
  family_info fi;
  fake_model p3 = {.arch = "phi3", .name = "Phi 3.5 Mini Instruct", .tok_model = "llama",
                   .tokens = {"<|assistant|>", "<|end|>", "<|user|>"}};
  ASSERT_INT_EQ(detect(&p3, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_PHI3);
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_PHI3);
  EXPECT_TRUE(fi.executable); /* src/model/llamalike.c */
  EXPECT_TRUE(family_missing(&fi) == NULL);
  fake_model p4 = {.arch = "phi3", .name = "Phi 4 Mini Instruct", .tok_model = "gpt2", .tok_pre = "gpt-4o",
                   .tokens = {"<|assistant|>", "<|end|>", "<|tool_call|>"}};
  ASSERT_INT_EQ(detect(&p4, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_PHI4);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS);
  EXPECT_TRUE(fi.executable);
  /* Phi-3.5-MoE shares the family, not the runtime */
  fake_model moe = {.arch = "phimoe", .name = "Phi 3.5 MoE Instruct", .tok_model = "llama"};
  ASSERT_INT_EQ(detect(&moe, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_PHI3);
  EXPECT_FALSE(fi.executable);
  EXPECT_STR_CONTAINS(family_missing(&fi), "'phimoe' (Phi-3) is not implemented yet");
}

TEST(family_smollm) {
  family_info fi;
  fake_model m = {.arch = "llama", .name = "SmolLM2 1.7B Instruct", .tok_model = "gpt2", .tok_pre = "smollm",
                  .tmpl = tmpl_default_source(TMPL_DEFAULT_CHATML), .tokens = {"<|im_start|>"}};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_SMOLLM);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "hermes");
  EXPECT_TRUE(fi.executable);
  fake_model m3 = {.arch = "smollm3", .name = "SmolLM3 3B", .tok_model = "gpt2"};
  ASSERT_INT_EQ(detect(&m3, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_SMOLLM3);
  EXPECT_TRUE(CAPS(fi) & FAMILY_CAP_REASONING);
  EXPECT_TRUE(fi.executable);
}

TEST(family_deepseek_r1_distill) {
  family_info fi;
  fake_model q = {.arch = "qwen2", .name = "DeepSeek R1 Distill Qwen 7B", .base_name = "Qwen2.5 Math 7B",
                  .tok_model = "gpt2", .tok_pre = "deepseek-r1-qwen", .tmpl = R1_TMPL,
                  .tokens = {"<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>", "<think>"}};
  ASSERT_INT_EQ(detect(&q, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_DEEPSEEK_R1_DISTILL);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_REASONING);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "deepseek");
  EXPECT_STR_EQ(fi.think_open, "<think>");
  EXPECT_TRUE(fi.template_opens_think);
  EXPECT_TRUE(fi.executable);
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_DEEPSEEK);
  /* the Llama distill: a Llama 3 tokenizer, but the name and the template win */
  fake_model l = {.arch = "llama", .name = "DeepSeek R1 Distill Llama 8B", .tok_model = "gpt2",
                  .tok_pre = "llama-bpe", .tmpl = R1_TMPL, .tokens = {"<|eot_id|>", "<|start_header_id|>"}};
  ASSERT_INT_EQ(detect(&l, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_DEEPSEEK_R1_DISTILL);
  EXPECT_TRUE(fi.executable);
}

TEST(family_gpt_oss) {
  family_info fi;
  fake_model m = {.arch = "gpt-oss", .name = "Gpt Oss 20b", .tok_model = "gpt2", .tok_pre = "gpt-4o",
                  .tmpl = HARMONY_TMPL, .tokens = {"<|channel|>", "<|message|>", "<|start|>", "<|end|>"}, .experts = 32};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_GPT_OSS);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS | FAMILY_CAP_REASONING);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "harmony");
  EXPECT_STR_EQ(fi.think_open, "<|channel|>analysis<|message|>");
  EXPECT_FALSE(fi.template_opens_think);
  EXPECT_TRUE(fi.executable); /* gptoss.c */
  EXPECT_TRUE(family_missing(&fi) == NULL);
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_HARMONY);
  /* without a template of its own: the harmony default, which takes
   * reasoning levels (the bit is not a listed capability) */
  fake_model bare = m;
  bare.tmpl = NULL;
  ASSERT_INT_EQ(detect(&bare, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_GPT_OSS);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS | FAMILY_CAP_REASONING | FAMILY_CAP_REASONING_LEVELS);
  char names[128];
  family_caps_str(CAPS(fi), names, sizeof names);
  EXPECT_STR_EQ(names, "chat,tools,reasoning");
}

TEST(family_granite) {
  family_info fi;
  fake_model m = {.arch = "granite", .name = "Granite 3.3 2b Instruct", .tok_model = "gpt2", .tok_pre = "refact",
                  .tmpl = GRANITE_TMPL, .tokens = {"<|start_of_role|>", "<|end_of_role|>"}};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_GRANITE);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "granite");
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_GRANITE);
  EXPECT_TRUE(fi.executable);
  fake_model h = {.arch = "granitehybrid", .name = "Granite 4.0 H Tiny"};
  ASSERT_INT_EQ(detect(&h, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_GRANITE);
  EXPECT_TRUE(fi.executable); /* the hybrid (Mamba-2) architecture: mamba2.c */
}

/* The Mamba-2 rows run by mamba2.c; Mamba-1 and the Nemotron-H MoE are
 * named but not run. */
TEST(family_mamba2_nemotron_h) {
  family_info fi;
  fake_model m = {.arch = "mamba2", .name = "Mamba2 2.7b", .tok_model = "gpt2"};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_MAMBA2);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS); /* ChatML default renders tools */
  EXPECT_TRUE(fi.executable);
  fake_model m1 = {.arch = "mamba", .name = "Mamba 130m", .tok_model = "gpt2"};
  ASSERT_INT_EQ(detect(&m1, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_MAMBA2);
  EXPECT_FALSE(fi.executable);
  EXPECT_TRUE(family_missing(&fi) != NULL && strstr(family_missing(&fi), "'mamba'"));
  fake_model n = {.arch = "nemotron_h", .name = "NVIDIA Nemotron Nano 9B v2", .tok_model = "gpt2",
                  .tokens = {"<|im_start|>", "<think>"}};
  ASSERT_INT_EQ(detect(&n, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_NEMOTRON_H);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "hermes");
  EXPECT_TRUE(fi.executable);
  EXPECT_TRUE(family_missing(&fi) == NULL);
  fake_model nm = {.arch = "nemotron_h_moe", .name = "NVIDIA Nemotron 3 Nano 30B A3B", .tok_model = "gpt2"};
  ASSERT_INT_EQ(detect(&nm, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_NEMOTRON_H);
  EXPECT_FALSE(fi.executable);
}

TEST(family_hermes_functionary) {
  family_info fi;
  fake_model h = {.arch = "llama", .name = "Hermes 3 Llama 3.1 8B", .tok_model = "gpt2", .tok_pre = "llama-bpe",
                  .tmpl = tmpl_default_source(TMPL_DEFAULT_CHATML), .tokens = {"<|eot_id|>", "<|im_start|>"}};
  ASSERT_INT_EQ(detect(&h, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_HERMES);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "hermes");
  fake_model f = {.arch = "llama", .name = "Functionary Medium V3.2", .tok_model = "gpt2", .tok_pre = "llama-bpe",
                  .tmpl = "{{ '>>>all\\n' }}{% if tools %}{% endif %}"};
  ASSERT_INT_EQ(detect(&f, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_FUNCTIONARY);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "functionary");
}

/* OLMo 2 and GLM-4: their own architectures, run by olmo2.c and glm4.c. */
TEST(family_olmo2_glm4) {
  family_info fi;
  fake_model o = {.arch = "olmo2", .name = "OLMo 2 1124 7B Instruct", .tok_model = "gpt2"};
  ASSERT_INT_EQ(detect(&o, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_OLMO2);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS); /* the default template shows tools */
  EXPECT_TRUE(fi.executable);
  EXPECT_TRUE(family_missing(&fi) == NULL);
  fake_model z = {.arch = "glm4", .name = "GLM 4 9B 0414", .tok_model = "gpt2", .tok_pre = "glm4",
                  .tokens = {"[gMASK]", "<|user|>"}};
  ASSERT_INT_EQ(detect(&z, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_GLM4);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS); /* the default template shows tools */
  EXPECT_TRUE(fi.executable);
  EXPECT_TRUE(family_missing(&fi) == NULL);
  /* the MoE GLM-4.5 is another architecture, named as missing */
  fake_model zm = {.arch = "glm4moe", .name = "GLM 4.5 Air", .tok_model = "gpt2", .tok_pre = "glm4"};
  ASSERT_INT_EQ(detect(&zm, &fi), 0);
  EXPECT_FALSE(fi.executable);
}

/* LFM2: a hybrid architecture run by lfm2.c; the MoE lfm2moe is named but
 * not run. */
TEST(family_lfm2) {
  family_info fi;
  fake_model l = {.arch = "lfm2", .name = "LFM2.5 1.2B Instruct", .tok_model = "gpt2", .tok_pre = "lfm2",
                  .tokens = {"<|im_start|>", "<|tool_call_start|>"}};
  ASSERT_INT_EQ(detect(&l, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_LFM2);
  EXPECT_STR_EQ(family_parser_name(fi.parser), "lfm2");
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS); /* ChatML default renders tools */
  EXPECT_TRUE(fi.executable);
  EXPECT_TRUE(family_missing(&fi) == NULL);
  fake_model m = {.arch = "lfm2moe", .name = "LFM2 8B A1B", .tok_model = "gpt2", .tok_pre = "lfm2"};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_LFM2);
  EXPECT_FALSE(fi.executable);
  EXPECT_TRUE(family_missing(&fi) != NULL && strstr(family_missing(&fi), "lfm2moe"));
}

/* Qwen3.5 (dense, MoE) and Qwen3-Next: the hybrids qwen35.c runs; the
 * Qwen3-Coder call parser (XML calls, Hermes JSON too); reasoning with a
 * template that opens <think> (the family default without a template). */
TEST(family_qwen35) {
  family_info fi;
  const char *archs[3] = {"qwen35", "qwen35moe", "qwen3next"};
  for (int i = 0; i < 3; i++) {
    fake_model q = {.arch = archs[i], .name = i < 2 ? "Qwen3.5 4B" : "Qwen3 Next 80B A3B Thinking",
                    .tok_model = "gpt2", .tok_pre = "qwen35", .tokens = {"<|im_start|>", "<think>", "</think>"}};
    ASSERT_INT_EQ(detect(&q, &fi), 0);
    EXPECT_INT_EQ(fi.id, FAMILY_QWEN35);
    EXPECT_STR_EQ(family_parser_name(fi.parser), "qwen3-coder");
    EXPECT_TRUE(fi.executable);
    EXPECT_TRUE(family_missing(&fi) == NULL);
    EXPECT_TRUE(fi.caps & FAMILY_CAP_CHAT);
    EXPECT_TRUE(fi.caps & FAMILY_CAP_TOOLS);
  }
}

TEST(family_bert_embedders) {
  family_info fi;
  fake_model b = {.arch = "bert", .name = "All MiniLM L6 v2", .tok_model = "bert", .pooling = true,
                  .tokens = {"[CLS]", "[SEP]", "[MASK]"}};
  ASSERT_INT_EQ(detect(&b, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_BERT);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_EMBED);
  EXPECT_TRUE(fi.executable);
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_NONE);
  /* nomic-embed-text runs (bert.c's nomic-bert row) */
  fake_model nomic = {.arch = "nomic-bert", .name = "Nomic Embed Text v1.5", .tok_model = "bert", .pooling = true};
  ASSERT_INT_EQ(detect(&nomic, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_BERT);
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_EMBED);
  EXPECT_TRUE(fi.executable);
  EXPECT_TRUE(family_missing(&fi) == NULL);
  const char *archs[] = {"jina-bert-v2", "modern-bert"};
  for (int i = 0; i < 2; i++) {
    fake_model o = {.arch = archs[i], .tok_model = "bert", .pooling = true};
    ASSERT_INT_EQ(detect(&o, &fi), 0);
    EXPECT_INT_EQ(fi.id, FAMILY_BERT);
    EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_EMBED);
    EXPECT_FALSE(fi.executable);
    EXPECT_STR_CONTAINS(family_missing(&fi), archs[i]);
  }
}

/* EmbeddingGemma: gemma3's tokenizer, its own (encoder) architecture, run
 * by gemma.c's gemma-embedding row: embeddings only, no chat template. */
TEST(family_embeddinggemma) {
  family_info fi;
  fake_model e = {.arch = "gemma-embedding", .name = "Embeddinggemma 300m", .tok_model = "llama", .pooling = true,
                  .tokens = {"<start_of_turn>", "<end_of_turn>"}};
  ASSERT_INT_EQ(detect(&e, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_EMBEDDINGGEMMA);
  EXPECT_STR_EQ(fi.name, "embeddinggemma");
  EXPECT_INT_EQ(CAPS(fi), FAMILY_CAP_EMBED);
  EXPECT_TRUE(fi.executable);
  EXPECT_TRUE(family_missing(&fi) == NULL);
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_NONE);
}

/* EXAONE 4.0: its own architecture (olmo2.c's exaone4 row); the real
 * template's think markers make it a reasoning model. */
TEST(family_exaone4) {
  family_info fi;
  fake_model e = {.arch = "exaone4", .name = "EXAONE 4.0 1.2B", .tok_model = "gpt2", .tok_pre = "exaone4",
                  .tokens = {"[|endofturn|]", "[|assistant|]", "<think>", "</think>"},
                  .tmpl = "{% for m in messages %}[|{{ m.role }}|]{{ m.content }}[|endofturn|]\n{% endfor %}"
                          "{% if add_generation_prompt %}[|assistant|]<think>\n{% endif %}{# </think> #}"};
  ASSERT_INT_EQ(detect(&e, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_EXAONE4);
  EXPECT_STR_EQ(fi.name, "exaone4");
  EXPECT_TRUE(CAPS(fi) & FAMILY_CAP_CHAT);
  EXPECT_TRUE(CAPS(fi) & FAMILY_CAP_REASONING);
  EXPECT_TRUE(fi.executable);
  EXPECT_TRUE(family_missing(&fi) == NULL);
  fake_model bare = {.arch = "exaone4", .tok_model = "gpt2"}; /* no template: the default, chat only */
  ASSERT_INT_EQ(detect(&bare, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_EXAONE4);
  EXPECT_FALSE(CAPS(fi) & FAMILY_CAP_REASONING);
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_CHATML);
}

TEST(family_unknown_never_crashes) {
  family_info fi;
  fake_model m = {.arch = "rwkv7", .name = "RWKV7 Goose World 1.5B", .tmpl = tmpl_default_source(TMPL_DEFAULT_CHATML)};
  ASSERT_INT_EQ(detect(&m, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_UNKNOWN);
  EXPECT_STR_EQ(fi.name, "unknown");
  EXPECT_FALSE(fi.executable);
  EXPECT_STR_CONTAINS(family_missing(&fi), "architecture 'rwkv7' is not recognized");
  EXPECT_INT_EQ(family_require_executable(&fi), ERR_UNSUPPORTED);
  EXPECT_STR_CONTAINS(err_detail(), "rwkv7");
  EXPECT_INT_EQ(fi.default_template, TMPL_DEFAULT_CHATML);
  /* a known name on an unknown architecture is still unknown */
  fake_model n = {.arch = "qwen99", .name = "Qwen3 8B"};
  ASSERT_INT_EQ(detect(&n, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_UNKNOWN);
  /* no architecture at all, no tokens of interest */
  fake_model none = {0};
  ASSERT_INT_EQ(detect(&none, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_UNKNOWN);
  EXPECT_STR_EQ(fi.arch, "");
  EXPECT_STR_CONTAINS(family_missing(&fi), "no general.architecture");
  /* a template that does not compile is ignored by the think probe */
  fake_model bad = {.arch = "qwen3", .tmpl = "{% if <think></think> %}"};
  ASSERT_INT_EQ(detect(&bad, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_QWEN3);
  EXPECT_INT_EQ(family_detect(NULL, &fi), ERR_INVALID);
}

TEST(family_wrong_types_count_as_absent) {
  gguf_writer *w = NULL;
  ASSERT_INT_EQ(gguf_writer_new(&w), 0);
  EXPECT_INT_EQ(gguf_writer_add_u32(w, "general.architecture", 7), 0);
  EXPECT_INT_EQ(gguf_writer_add_f32(w, "general.name", 1.5f), 0);
  EXPECT_INT_EQ(gguf_writer_add_u32(w, "tokenizer.ggml.tokens", 3), 0);
  EXPECT_INT_EQ(gguf_writer_add_str(w, "general.base_model.count", "many"), 0);
  uint32_t ids[2] = {1, 2};
  EXPECT_INT_EQ(gguf_writer_add_arr(w, "tokenizer.chat_template", GGUF_TYPE_UINT32, ids, 2), 0);
  buf b = BUF_INIT;
  ASSERT_INT_EQ(gguf_writer_write_buf(w, &b), 0);
  gguf_writer_free(w);
  gguf_file *f = NULL;
  ASSERT_INT_EQ(gguf_open_mem(b.data, b.len, &f), 0);
  family_info fi;
  EXPECT_INT_EQ(family_detect(f, &fi), 0);
  EXPECT_INT_EQ(fi.id, FAMILY_UNKNOWN);
  EXPECT_FALSE(fi.has_template);
  EXPECT_FALSE(fi.executable);
  gguf_close(f);
  buf_free(&b);
}

TEST(family_names_and_caps_strings) {
  EXPECT_STR_EQ(family_name(FAMILY_QWEN3), "qwen3");
  EXPECT_STR_EQ(family_name((family_id)999), "unknown");
  EXPECT_INT_EQ(family_by_name("gpt-oss"), FAMILY_GPT_OSS);
  EXPECT_INT_EQ(family_by_name("nope"), FAMILY_UNKNOWN);
  EXPECT_STR_EQ(family_cap_name(FAMILY_CAP_REALTIME), "realtime");
  EXPECT_TRUE(family_cap_name(3) == NULL);
  char s[128];
  size_t n = family_caps_str(FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS | FAMILY_CAP_EMBED, s, sizeof s);
  EXPECT_STR_EQ(s, "chat,tools,embeddings");
  EXPECT_INT_EQ(n, strlen("chat,tools,embeddings"));
  char small[6];
  n = family_caps_str(FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS, small, sizeof small);
  EXPECT_INT_EQ(n, strlen("chat,tools"));
  EXPECT_INT_EQ(strlen(small), 5);
  EXPECT_TRUE(family_arch_executable("qwen3"));
  EXPECT_TRUE(family_arch_executable("qwen3moe"));
  EXPECT_TRUE(family_arch_executable("olmoe"));
  EXPECT_FALSE(family_arch_executable("deepseek2"));
  EXPECT_FALSE(family_arch_executable(NULL));
  /* every row has a name, a display name and a known parser */
  for (int i = 0; i < FAMILY_COUNT; i++) {
    EXPECT_TRUE(family_name((family_id)i) && family_name((family_id)i)[0]);
    EXPECT_INT_EQ(family_by_name(family_name((family_id)i)), i);
  }
}

TEST(family_chat_template_choice) {
  const char *src = NULL, *origin = NULL;
  family_info fi;
  gguf_file *f = NULL;
  char *mem = NULL;
  fake_model m = {.arch = "qwen2", .tmpl = "MAIN", .tmpl_tool = "TOOLS"};
  ASSERT_INT_EQ(fake_open(&m, &f, &mem), 0);
  ASSERT_INT_EQ(family_detect(f, &fi), 0);
  EXPECT_TRUE(fi.has_tool_template);
  EXPECT_INT_EQ(family_chat_template(f, &fi, true, &src, &origin), 0);
  EXPECT_STR_EQ(src, "TOOLS");
  EXPECT_STR_EQ(origin, "tokenizer.chat_template.tool_use");
  EXPECT_INT_EQ(family_chat_template(f, &fi, false, &src, &origin), 0);
  EXPECT_STR_EQ(src, "MAIN");
  gguf_close(f);
  free(mem);
  fake_model g = {.arch = "gemma2"};
  ASSERT_INT_EQ(fake_open(&g, &f, &mem), 0);
  ASSERT_INT_EQ(family_detect(f, &fi), 0);
  EXPECT_INT_EQ(family_chat_template(f, &fi, true, &src, &origin), 0);
  EXPECT_STR_EQ(origin, "default:gemma");
  EXPECT_TRUE(src == tmpl_default_source(TMPL_DEFAULT_GEMMA));
  gguf_close(f);
  free(mem);
  fake_model u = {.arch = "mamba"};
  ASSERT_INT_EQ(fake_open(&u, &f, &mem), 0);
  ASSERT_INT_EQ(family_detect(f, &fi), 0);
  EXPECT_INT_EQ(family_chat_template(f, &fi, false, &src, &origin), 0);
  EXPECT_STR_EQ(origin, "default:chatml");
  gguf_close(f);
  free(mem);
  fake_model b = {.arch = "bert"};
  ASSERT_INT_EQ(fake_open(&b, &f, &mem), 0);
  ASSERT_INT_EQ(family_detect(f, &fi), 0);
  EXPECT_INT_EQ(family_chat_template(f, &fi, false, &src, &origin), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "no chat template");
  gguf_close(f);
  free(mem);
}

/* Real templates from ../shared/templates in otherwise anonymous files: the
 * template marks alone (with the architecture and tokenizer) find the family,
 * and the think probe sees which templates open the block themselves. */
typedef struct real_case {
  const char *file, *arch, *tok_pre;
  family_id want;
  int reasoning, opens; /* -1: do not check */
} real_case;

TEST(family_real_templates) {
  static const real_case CASES[] = {
      {"Qwen-Qwen3-0.6B", "qwen3", "qwen2", FAMILY_QWEN3, 1, 0},
      {"Qwen-Qwen2.5-7B-Instruct", "qwen2", "qwen2", FAMILY_QWEN2, 0, -1},
      {"Qwen-QwQ-32B", "qwen2", "qwen2", FAMILY_QWEN2, 1, 1},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "qwen2", "deepseek-r1-qwen", FAMILY_DEEPSEEK_R1_DISTILL, 1, 1},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "llama", "llama-bpe", FAMILY_DEEPSEEK_R1_DISTILL, 1, 1},
      {"meta-llama-Llama-3.1-8B-Instruct", "llama", "llama-bpe", FAMILY_LLAMA3, 0, -1},
      {"mistralai-Mistral-Nemo-Instruct-2407", "llama", "tekken", FAMILY_MISTRAL, 0, -1},
      {"google-gemma-2-2b-it", "gemma2", NULL, FAMILY_GEMMA2, 0, -1},
      {"microsoft-Phi-3.5-mini-instruct", "phi3", NULL, FAMILY_PHI3, 0, -1},
      {"ibm-granite-granite-3.3-2B-Instruct", "granite", "refact", FAMILY_GRANITE, -1, 0},
      {"meetkai-functionary-medium-v3.2", "llama", "llama-bpe", FAMILY_FUNCTIONARY, -1, -1},
      {"LFM2.5-Instruct", "lfm2", "lfm2", FAMILY_LFM2, 0, -1},
      {"LFM2-8B-A1B", "lfm2moe", "lfm2", FAMILY_LFM2, 0, -1},
      {"LFM2.5-8B-A1B", "lfm2moe", "lfm2", FAMILY_LFM2, 1, 0},
      {"Qwen3.5-4B", "qwen35", "qwen35", FAMILY_QWEN35, 1, 1},
      {"Qwen3.5-4B", "qwen35moe", "qwen2", FAMILY_QWEN35, 1, 1},
      {"ibm-granite-granite-4.1", "granitehybrid", "refact", FAMILY_GRANITE, -1, -1},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron_h_moe", NULL, FAMILY_NEMOTRON_H, 1, -1},
  };
  char dir[512];
  if (!test_shared_path("templates", dir, sizeof dir)) TEST_SKIP("../shared/templates is absent");
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
    const real_case *c = &CASES[i];
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.jinja", dir, c->file);
    FILE *fp = fopen(p, "rb");
    TEST_CHECK_(fp != NULL, 0, "cannot open %s", p);
    if (!fp) continue;
    buf src = BUF_INIT;
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, fp)) > 0) buf_append(&src, tmp, n);
    fclose(fp);
    fake_model m = {.arch = c->arch, .tok_model = c->tok_pre ? "gpt2" : "llama", .tok_pre = c->tok_pre,
                    .tmpl = src.data};
    family_info fi;
    EXPECT_INT_EQ(detect(&m, &fi), 0);
    TEST_CHECK_(fi.id == c->want, 0, "%s: detected %s, want %s", c->file, family_name(fi.id), family_name(c->want));
    if (c->reasoning >= 0)
      TEST_CHECK_(!!(fi.caps & FAMILY_CAP_REASONING) == c->reasoning, 0, "%s: reasoning %d", c->file,
                  !!(fi.caps & FAMILY_CAP_REASONING));
    if (c->opens >= 0)
      TEST_CHECK_(fi.template_opens_think == c->opens, 0, "%s: template_opens_think %d", c->file,
                  fi.template_opens_think);
    buf_free(&src);
  }
}

/* Corrupted copies of a full synthetic header: whatever the GGUF reader
 * accepts, detection must answer without crashing (the sanitizer build
 * checks the memory side). Deterministic: a fixed LCG picks the bytes. */
TEST(family_detect_survives_mutations) {
  fake_model m = {.arch = "qwen3", .name = "Qwen3 0.6B", .base_name = "Qwen3 Base", .tok_model = "gpt2",
                  .tok_pre = "qwen2", .tmpl = QWEN3_TMPL, .tmpl_tool = R1_TMPL, .experts = 4,
                  .tokens = {"<|im_start|>", "<think>", "</think>", "<|fim_prefix|>"}};
  gguf_file *f = NULL;
  char *mem = NULL;
  ASSERT_INT_EQ(fake_open(&m, &f, &mem), 0);
  size_t size = gguf_file_size(f);
  gguf_close(f);
  char *copy = malloc(size);
  ASSERT_TRUE(copy != NULL);
  uint32_t seed = 12345;
  int opened = 0;
  for (int round = 0; round < 300; round++) {
    memcpy(copy, mem, size);
    for (int k = 0; k < 1 + round % 4; k++) {
      seed = seed * 1103515245u + 12345u;
      size_t at = (seed >> 8) % size;
      seed = seed * 1103515245u + 12345u;
      copy[at] = (char)(seed >> 16);
    }
    gguf_file *g = NULL;
    if (gguf_open_mem(copy, size, &g) != 0) continue;
    opened++;
    family_info fi;
    EXPECT_INT_EQ(family_detect(g, &fi), 0);
    EXPECT_TRUE((unsigned)fi.id < FAMILY_COUNT);
    EXPECT_TRUE(strlen(fi.missing) < sizeof fi.missing);
    gguf_close(g);
  }
  EXPECT_INT_GT(opened, 10);
  free(copy);
  free(mem);
}
