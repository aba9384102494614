/*
 * test_cmd_chat_template.c - `parley chat-template` (app/cmd_chat_template.c)
 * called in-process with argv, stdout and stderr redirected (dup2) to files
 * in the test's directory.
 *
 * The model is a synthetic GGUF (metadata only: a template, a small
 * vocabulary whose tokens 1 and 2 are "<s>" and "</s>", the bos/eos ids), so
 * the command's bos/eos come from the vocabulary and equal what
 * tools/render_jinja.py passes; the reference output is jinja2's render of the
 * same template and request by that script.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/gen.h"
#include "api/openai/openai.h"
#include "app/commands.h"
#include "base/err.h"
#include "engine/manager.h"
#include "gguf/gguf.h"
#include "model/registry.h"
#include "model/testgen.h"
#include "test.h"

#define CONV_DIR "tests/golden/conversations"

static int ct_put(const char *path, const char *s) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t n = strlen(s);
  int ok = fwrite(s, 1, n, f) == n;
  return fclose(f) == 0 && ok ? 0 : -1;
}

/* Runs cmd_chat_template(argv) with stdout/stderr captured (test_capture). */
static int ct_run(char **out, char **err, int argc, const char **argv) {
  return test_capture(cmd_chat_template, argc, argv, out, err);
}

/* A metadata-only GGUF with a template (may be NULL) and an optional tool_use variant. */
static int ct_model(const char *path, const char *arch, const char *name, const char *tsrc, const char *tmpl_tool) {
  gguf_writer *w = NULL;
  int rc = gguf_writer_new(&w);
  if (rc) return rc;
  const char *toks[] = {"<unk>", "<s>", "</s>", "[INST]", "[/INST]", "hello", "world"};
  rc |= gguf_writer_add_str(w, "general.architecture", arch);
  if (name) rc |= gguf_writer_add_str(w, "general.name", name);
  rc |= gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
  rc |= gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, sizeof toks / sizeof *toks);
  rc |= gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
  rc |= gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
  if (tsrc) rc |= gguf_writer_add_str(w, "tokenizer.chat_template", tsrc);
  if (tmpl_tool) rc |= gguf_writer_add_str(w, "tokenizer.chat_template.tool_use", tmpl_tool);
  if (!rc) rc = gguf_writer_write_file(w, path);
  gguf_writer_free(w);
  return rc;
}

static bool ct_have_jinja2(void) {
  struct stat st;
  return stat("/usr/bin/python3", &st) == 0 && system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") == 0;
}

/* jinja2's render of template file t for conversation c, or NULL when jinja2 rejects it. */
static char *ct_reference(const char *t, const char *c) {
  char out[600], cmd[4096];
  snprintf(out, sizeof out, "%s/ref.txt", test_tmpdir());
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/render_jinja.py '%s' '%s' > '%s' 2>/dev/null", t, c, out);
  if (system(cmd) != 0) return NULL;
  return test_read_file(out, NULL);
}

static const char *const CONVS[] = {"01_single_user", "03_multi_turn", "06_tool_call_object_args",
                                    "08_reasoning",   "12_thinking_off", "13_thinking_history",
                                    "21_reasoning_tool_call"};

/* A real template stored in a GGUF: the command prints what jinja2 prints. */
TEST(cmd_chat_template_model_matches_jinja2) {
  if (!ct_have_jinja2()) TEST_SKIP("/usr/bin/python3 with jinja2 is absent");
  char shared[512];
  const char *tpath = NULL;
  char tbuf[1024];
  if (test_shared_path("templates/Qwen-Qwen3-0.6B.jinja", shared, sizeof shared)) {
    tpath = shared;
  } else {
    /* a template of our own when ../shared is absent */
    snprintf(tbuf, sizeof tbuf, "%s/own.jinja", test_tmpdir());
    ASSERT_INT_EQ(ct_put(tbuf, "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}"
                               "{% endfor %}{% if tools %}T{{ tools | length }}{% endif %}"
                               "{% if add_generation_prompt %}<|assistant|>{% if enable_thinking is false %}"
                               "<think></think>{% endif %}{% endif %}"),
                  0);
    tpath = tbuf;
  }
  char *src = test_read_file(tpath, NULL);
  ASSERT_TRUE(src != NULL);
  char mpath[600];
  snprintf(mpath, sizeof mpath, "%s/m.gguf", test_tmpdir());
  ASSERT_INT_EQ(ct_model(mpath, "qwen3", "Qwen3 0.6B", src, NULL), 0);
  free(src);
  int compared = 0;
  for (size_t i = 0; i < sizeof CONVS / sizeof *CONVS; i++) {
    char conv[256];
    snprintf(conv, sizeof conv, "%s/%s.json", CONV_DIR, CONVS[i]);
    char *want = ct_reference(tpath, conv);
    if (!want) continue;
    char *out = NULL, *err = NULL;
    const char *argv[] = {"--model", mpath, "--request", conv};
    int rc = ct_run(&out, &err, 4, argv);
    EXPECT_INT_EQ(rc, 0);
    TEST_CHECK_(out && strcmp(out, want) == 0, 0, "%s: command printed\n%s\n--- jinja2 printed\n%s\n--- stderr: %s",
                CONVS[i], out ? out : "(null)", want, err ? err : "");
    EXPECT_STR_EQ(err, "");
    compared++;
    free(out);
    free(err);
    free(want);
  }
  EXPECT_INT_GE(compared, 5);
}

/* --template FILE with --bos/--eos given on the command line. */
TEST(cmd_chat_template_template_file_matches_jinja2) {
  if (!ct_have_jinja2()) TEST_SKIP("/usr/bin/python3 with jinja2 is absent");
  char shared[512];
  if (!test_shared_path("templates/meta-llama-Llama-3.1-8B-Instruct.jinja", shared, sizeof shared))
    TEST_SKIP("../shared/templates is absent");
  for (size_t i = 0; i < sizeof CONVS / sizeof *CONVS; i++) {
    char conv[256];
    snprintf(conv, sizeof conv, "%s/%s.json", CONV_DIR, CONVS[i]);
    char *want = ct_reference(shared, conv);
    if (!want) continue;
    char *out = NULL, *err = NULL;
    const char *argv[] = {"--template", shared, "--request", conv, "--bos", "<s>", "--eos", "</s>"};
    EXPECT_INT_EQ(ct_run(&out, &err, 8, argv), 0);
    TEST_CHECK_(out && strcmp(out, want) == 0, 0, "%s differs from jinja2: %s", CONVS[i], err ? err : "");
    free(out);
    free(err);
    free(want);
  }
}

TEST(cmd_chat_template_tool_use_variant_and_override) {
  char mpath[600], conv_tools[600], conv_plain[600], over[600];
  snprintf(mpath, sizeof mpath, "%s/m.gguf", test_tmpdir());
  snprintf(conv_tools, sizeof conv_tools, "%s/ct.json", test_tmpdir());
  snprintf(conv_plain, sizeof conv_plain, "%s/cp.json", test_tmpdir());
  snprintf(over, sizeof over, "%s/over.jinja", test_tmpdir());
  ASSERT_INT_EQ(ct_model(mpath, "llama", "Hermes 2 Pro Llama 3 8B", "MAIN {{ messages | length }}{{ bos_token }}",
                         "TOOLS {{ tools | length }} {{ tools[0].function.name }}{{ eos_token }}"),
                0);
  ASSERT_INT_EQ(ct_put(conv_tools, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                                   "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}"),
                0);
  ASSERT_INT_EQ(ct_put(conv_plain, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[],"
                                   "\"chat_template_kwargs\":{\"flavour\":\"mint\"}}"),
                0);
  ASSERT_INT_EQ(ct_put(over, "OVER {{ flavour }} {{ add_generation_prompt }}"), 0);
  char conv_nogen[600];
  snprintf(conv_nogen, sizeof conv_nogen, "%s/cn.json", test_tmpdir());
  ASSERT_INT_EQ(ct_put(conv_nogen, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                                   "\"add_generation_prompt\":false,\"chat_template_kwargs\":{\"flavour\":\"lime\"}}"),
                0);
  char *out = NULL, *err = NULL;
  const char *a1[] = {"--model", mpath, "--request", conv_tools};
  EXPECT_INT_EQ(ct_run(&out, &err, 4, a1), 0);
  EXPECT_STR_EQ(out, "TOOLS 1 f</s>");
  free(out), free(err);
  const char *a2[] = {"--model", mpath, "--request", conv_plain};
  EXPECT_INT_EQ(ct_run(&out, &err, 4, a2), 0);
  EXPECT_STR_EQ(out, "MAIN 1<s>");
  free(out), free(err);
  const char *a3[] = {"--model", mpath, "--request", conv_plain, "--chat-template", over};
  EXPECT_INT_EQ(ct_run(&out, &err, 6, a3), 0);
  EXPECT_STR_EQ(out, "OVER mint True"); /* the server's default: a generation prompt */
  free(out), free(err);
  const char *a5[] = {"--model", mpath, "--request", conv_nogen, "--chat-template", over};
  EXPECT_INT_EQ(ct_run(&out, &err, 6, a5), 0);
  EXPECT_STR_EQ(out, "OVER lime False");
  free(out), free(err);
  const char *a4[] = {"--model", mpath, "--request", conv_plain, "--bos", "[B]", "-v"};
  EXPECT_INT_EQ(ct_run(&out, &err, 7, a4), 0);
  EXPECT_STR_EQ(out, "MAIN 1[B]");
  EXPECT_STR_CONTAINS(err, "family: Hermes");
  EXPECT_STR_CONTAINS(err, "template: tokenizer.chat_template");
  free(out), free(err);
}

/* A mpath without a template gets its family's default. */
TEST(cmd_chat_template_family_default) {
  char mpath[600];
  snprintf(mpath, sizeof mpath, "%s/m.gguf", test_tmpdir());
  ASSERT_INT_EQ(ct_model(mpath, "llama", "Mistral 7B Instruct v0.3", NULL, NULL), 0);
  char *out = NULL, *err = NULL;
  const char *argv[] = {"--model", mpath, "--request", CONV_DIR "/03_multi_turn.json"};
  EXPECT_INT_EQ(ct_run(&out, &err, 4, argv), 0);
  EXPECT_STR_EQ(out, "<s>[INST]Hi[/INST]Hello! How can I help?</s>[INST]Tell me a joke.[/INST]"
                     "Why did the chicken cross the road? To get to the other side.</s>"
                     "[INST]You are terse.\n\nAnother one, please.[/INST]");
  free(out), free(err);
  /* unknown architecture: ChatML */
  ASSERT_INT_EQ(ct_model(mpath, "rwkv7", NULL, NULL, NULL), 0);
  const char *a2[] = {"--model", mpath, "--request", CONV_DIR "/01_single_user.json"};
  EXPECT_INT_EQ(ct_run(&out, &err, 4, a2), 0);
  EXPECT_STR_EQ(out, "<|im_start|>user\nHello, who are you?<|im_end|>\n<|im_start|>assistant\n");
  free(out), free(err);
  /* an embedder has no chat format */
  ASSERT_INT_EQ(ct_model(mpath, "bert", NULL, NULL, NULL), 0);
  EXPECT_INT_EQ(ct_run(&out, &err, 4, a2), 1);
  EXPECT_STR_EQ(out, "");
  EXPECT_STR_CONTAINS(err, "no chat template");
  free(out), free(err);
}

TEST(cmd_chat_template_errors) {
  char mpath[600], bad_json[600], bad_tmpl[600], not_obj[600], bad_msgs[600];
  snprintf(mpath, sizeof mpath, "%s/m.gguf", test_tmpdir());
  snprintf(bad_json, sizeof bad_json, "%s/bad.json", test_tmpdir());
  snprintf(bad_tmpl, sizeof bad_tmpl, "%s/bad.jinja", test_tmpdir());
  snprintf(not_obj, sizeof not_obj, "%s/arr.json", test_tmpdir());
  snprintf(bad_msgs, sizeof bad_msgs, "%s/msgs.json", test_tmpdir());
  ASSERT_INT_EQ(ct_put(bad_json, "{\n  \"messages\": [\n    {\"role\": \"user\",, }\n  ]\n}\n"), 0);
  ASSERT_INT_EQ(ct_put(bad_tmpl, "line one\n{% for m in messages %}{{ m.content }\n{% endfor %}"), 0);
  ASSERT_INT_EQ(ct_put(not_obj, "[1, 2]"), 0);
  ASSERT_INT_EQ(ct_put(bad_msgs, "{\"messages\": 5}"), 0);
  ASSERT_INT_EQ(ct_model(mpath, "qwen2", NULL, "{{ raise_exception('no system, please') }}", NULL), 0);
  char *out = NULL, *err = NULL;

  const char *missing[] = {"--template", bad_tmpl, "--request", "/nonexistent/req.json"};
  EXPECT_INT_EQ(ct_run(&out, &err, 4, missing), 1);
  EXPECT_STR_CONTAINS(err, "/nonexistent/req.json");
  EXPECT_STR_CONTAINS(err, "No such file");
  free(out), free(err);

  const char *json_err[] = {"--template", bad_tmpl, "--request", bad_json};
  EXPECT_INT_EQ(ct_run(&out, &err, 4, json_err), 1);
  EXPECT_STR_CONTAINS(err, "not valid JSON: line 3, column");
  free(out), free(err);

  const char *tmpl_err[] = {"--template", bad_tmpl, "--request", CONV_DIR "/01_single_user.json"};
  EXPECT_INT_EQ(ct_run(&out, &err, 4, tmpl_err), 1);
  EXPECT_STR_CONTAINS(err, "template:2:");
  EXPECT_STR_CONTAINS(err, bad_tmpl);
  EXPECT_STR_EQ(out, "");
  free(out), free(err);

  const char *arr[] = {"--template", bad_tmpl, "--request", not_obj};
  EXPECT_INT_EQ(ct_run(&out, &err, 4, arr), 1);
  EXPECT_STR_CONTAINS(err, "must hold a JSON object");
  free(out), free(err);

  const char *raise[] = {"--model", mpath, "--request", CONV_DIR "/01_single_user.json"};
  EXPECT_INT_EQ(ct_run(&out, &err, 4, raise), 1);
  EXPECT_STR_CONTAINS(err, "no system, please");
  free(out), free(err);

  const char *msgs[] = {"--model", mpath, "--request", bad_msgs};
  EXPECT_INT_EQ(ct_run(&out, &err, 4, msgs), 1);
  EXPECT_STR_CONTAINS(err, "messages");
  free(out), free(err);

  const char *no_model[] = {"--model", "/nonexistent/m.gguf", "--request", CONV_DIR "/01_single_user.json"};
  EXPECT_INT_EQ(ct_run(&out, &err, 4, no_model), 1);
  EXPECT_STR_CONTAINS(err, "cannot open model '/nonexistent/m.gguf'");
  free(out), free(err);

  const char *no_model_file[] = {"--model", bad_json, "--request", CONV_DIR "/01_single_user.json"};
  EXPECT_INT_EQ(ct_run(&out, &err, 4, no_model_file), 1);
  EXPECT_STR_CONTAINS(err, "cannot open model");
  free(out), free(err);
}

TEST(cmd_chat_template_usage) {
  char *out = NULL, *err = NULL;
  EXPECT_INT_EQ(ct_run(&out, &err, 0, NULL), 2);
  EXPECT_STR_CONTAINS(err, "usage: parley chat-template");
  free(out), free(err);
  const char *both[] = {"--model", "a", "--template", "b", "--request", "c"};
  EXPECT_INT_EQ(ct_run(&out, &err, 6, both), 2);
  free(out), free(err);
  const char *noreq[] = {"--template", "b"};
  EXPECT_INT_EQ(ct_run(&out, &err, 2, noreq), 2);
  free(out), free(err);
  const char *dangling[] = {"--template", "b", "--request"};
  EXPECT_INT_EQ(ct_run(&out, &err, 3, dangling), 2);
  EXPECT_STR_CONTAINS(err, "--request needs a value");
  free(out), free(err);
  const char *unknown[] = {"--frobnicate"};
  EXPECT_INT_EQ(ct_run(&out, &err, 1, unknown), 2);
  EXPECT_STR_CONTAINS(err, "unknown option '--frobnicate'");
  free(out), free(err);
  const char *help[] = {"--help"};
  EXPECT_INT_EQ(ct_run(&out, &err, 1, help), 0);
  EXPECT_STR_CONTAINS(out, "usage: parley chat-template");
  free(out), free(err);
}

/* What the server renders for request file `req` on the mpath file `path`:
 * the mpath loaded by the manager, the body read by openai_chat_body and
 * rendered by gen_chat_prompt, as POST /v1/chat/completions does. */
static char *ct_server_render(const char *path, const char *req) {
  registry *r = NULL;
  manager *mg = NULL;
  manager_model *mm = NULL;
  char *text = NULL;
  if (registry_new(&r)) return NULL;
  registry_set_models_dir(r, NULL);
  for (int s = REGISTRY_SOURCE_OLLAMA; s < REGISTRY_SOURCE_COUNT; s++) registry_set_source_dir(r, s, "");
  json_t *body = json_load_file(req, 0, NULL);
  gen_request creq;
  gen_request_init(&creq);
  if (body && !registry_add_model(r, path, "m") && (registry_refresh(r), !manager_new(r, NULL, &mg)) &&
      !manager_get(mg, "m", &mm) && !openai_chat_body(body, &creq)) {
    gen_chat chat = creq.chat;
    buf b = BUF_INIT;
    tok_ids ids = TOK_IDS_INIT;
    outparse_config pc;
    if (gen_chat_prompt(mm, &chat, &b, &ids, &pc) == 0) text = b.data ? b.data : calloc(1, 1);
    else buf_free(&b);
    tok_ids_free(&ids);
  }
  if (!text) fprintf(stderr, "server path: %s\n", err_detail());
  gen_request_free(&creq);
  json_decref(body);
  manager_release(mm);
  manager_free(mg);
  registry_free(r);
  return text;
}

/* The command prints what the server renders, for templates that read
 * tool-call arguments as a mapping (arguments.items(), `is mapping`) while
 * the request sends them as JSON text, and for a template that shows no
 * tools (the generic tool prompt). */
TEST(cmd_chat_template_renders_what_the_server_renders) {
  char vocab[512];
  if (!test_shared_path("vocab/ggml-vocab-llama-spm.gguf", vocab, sizeof vocab))
    TEST_SKIP("../shared/vocab is absent");
  static const char *const TEMPLATES[] = {
      /* the shapes GLM-4.6, MiniMax-M2, Mistral and gpt-oss templates use */
      "{{ bos_token }}{% for t in tools or [] %}<tool>{{ t.function.name }}</tool>{% endfor %}"
      "{% for m in messages %}<{{ m.role }}>{{ m.content or '' }}"
      "{% for c in m.tool_calls or [] %}{% set a = c.function.arguments %}[{{ c.function.name }} {{ a is mapping }}"
      "{% for k, v in a.items() %} {{ k }}={{ v | tojson }}{% endfor %}]{% endfor %}</{{ m.role }}>{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}",
      /* shows no tools at all */
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content or '' }}</{{ m.role }}>{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}",
  };
  static const char *const WANT[] = {"[get_weather True city=\"Oslo\" days=2]", "<tools>\n{\"type\": \"function\""};
  char req[600];
  snprintf(req, sizeof req, "%s/req.json", test_tmpdir());
  ASSERT_INT_EQ(ct_put(req, "{\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief.\"},"
                            "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Oslo\"},"
                            "{\"type\":\"text\",\"text\":\"weather?\"}]},"
                            "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","
                            "\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                            "\"arguments\":\"{\\\"city\\\": \\\"Oslo\\\", \\\"days\\\": 2}\"}}]},"
                            "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"12 C\"}],"
                            "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                            "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
                            "\"days\":{\"type\":\"integer\"}}}}}]}"),
                0);
  for (size_t i = 0; i < sizeof TEMPLATES / sizeof *TEMPLATES; i++) {
    char mpath[600];
    snprintf(mpath, sizeof mpath, "%s/m%zu.gguf", test_tmpdir(), i);
    model_testgen g = model_testgen_small();
    g.vocab_path = vocab;
    g.chat_template = TEMPLATES[i];
    ASSERT_INT_EQ(model_testgen_write(&g, mpath), 0);
    char *server = ct_server_render(mpath, req);
    ASSERT_TRUE(server != NULL);
    char *out = NULL, *err = NULL;
    const char *argv[] = {"--model", mpath, "--request", req};
    EXPECT_INT_EQ(ct_run(&out, &err, 4, argv), 0);
    TEST_CHECK_(out && strcmp(out, server) == 0, 0, "template %zu: command printed\n%s\n--- the server renders\n%s\n"
                "--- stderr: %s", i, out ? out : "(null)", server, err ? err : "");
    EXPECT_STR_CONTAINS(out, WANT[i]);
    EXPECT_STR_CONTAINS(out, "Oslo\nweather?"); /* text parts joined as the server joins them */
    free(out);
    free(err);
    free(server);
  }
}
