/*
 * test_ollama.c - the pure parts of the Ollama dialect: SHA-256 against the
 * FIPS 180-4 vectors, the Go-template subset, the model-name grammar and
 * the base64 check for images; registry_remove_name, which /api/delete uses.
 */
#include <stdlib.h>
#include <string.h>

#include "api/ollama/ollama.h"
#include "base/buf.h"
#include "base/err.h"
#include "model/registry.h"
#include "test.h"

static void sha_hex(const char *s, size_t n, char out[65]) {
  ollama_sha256 h;
  ollama_sha256_init(&h);
  ollama_sha256_update(&h, s, n);
  ollama_sha256_hex(&h, out);
}

TEST(ollama_sha256_vectors) {
  char hex[65];
  sha_hex("", 0, hex);
  EXPECT_STR_EQ(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  sha_hex("abc", 3, hex);
  EXPECT_STR_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  sha_hex(two, strlen(two), hex);
  EXPECT_STR_EQ(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  /* a million 'a's fed in odd pieces */
  ollama_sha256 h;
  ollama_sha256_init(&h);
  char chunk[997];
  memset(chunk, 'a', sizeof chunk);
  size_t left = 1000000;
  while (left) {
    size_t n = left < sizeof chunk ? left : sizeof chunk;
    ollama_sha256_update(&h, chunk, n);
    left -= n;
  }
  ollama_sha256_hex(&h, hex);
  EXPECT_STR_EQ(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static const char *render(const char *t, const char *sys, const char *prompt, const char *suffix, buf *b) {
  buf_reset(b);
  if (ollama_gotmpl_render(t, sys, prompt, suffix, b)) return NULL;
  buf_append_byte(b, '\0');
  return b->data;
}

TEST(ollama_gotmpl_subset) {
  buf b = BUF_INIT;
  /* the prompts pinned by Ollama's TestGenerate */
  EXPECT_STR_EQ(render("{{ if .System }}{{ .System }} {{ end }}### USER {{ .Prompt }} ", "You can perform magic tricks.",
                       "Help me write tests.", "", &b),
                "You can perform magic tricks. ### USER Help me write tests. ");
  EXPECT_STR_EQ(render("<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>", "", "def add(", "    return c", &b),
                "<PRE> def add( <SUF>    return c <MID>");
  EXPECT_STR_EQ(render("{{ if .System }}S{{ else if .Prompt }}P{{ else }}N{{ end }}", "", "x", "", &b), "P");
  EXPECT_STR_EQ(render("{{ if .System }}S{{ else if .Suffix }}X{{ else }}N{{ end }}", "", "x", "", &b), "N");
  EXPECT_STR_EQ(render("a  {{- .Prompt -}}  b{{/* note */}}{{ .Response }}", "", "P", "", &b), "aPb");
  EXPECT_STR_EQ(render("{{ if .Prompt }}{{ if .System }}in{{ end }}out{{ end }}", "", "p", "", &b), "out");
  EXPECT_TRUE(render("{{ range .Messages }}{{ end }}", "", "", "", &b) == NULL);
  EXPECT_TRUE(render("{{ if .Prompt }}open", "", "p", "", &b) == NULL);
  EXPECT_TRUE(render("{{ end }}", "", "p", "", &b) == NULL);
  EXPECT_TRUE(render("{{ .Prompt ", "", "p", "", &b) == NULL);
  buf_free(&b);
}

TEST(ollama_names_and_base64) {
  EXPECT_TRUE(ollama_name_valid("llama3.2"));
  EXPECT_TRUE(ollama_name_valid("llama3.2:latest"));
  EXPECT_TRUE(ollama_name_valid("org/tiny"));
  EXPECT_TRUE(ollama_name_valid("myhost:5000/ns/model:tag"));
  EXPECT_TRUE(ollama_name_valid("hf.co/owner/repo:Q4_K_M"));
  EXPECT_FALSE(ollama_name_valid(""));
  EXPECT_FALSE(ollama_name_valid("a/b/c/d/e"));
  EXPECT_FALSE(ollama_name_valid("-bad"));
  EXPECT_FALSE(ollama_name_valid("ns/ model"));
  EXPECT_FALSE(ollama_name_valid("model:"));
  EXPECT_TRUE(ollama_base64_valid("QUJD", 4));
  EXPECT_TRUE(ollama_base64_valid("QUI=", 4));
  EXPECT_TRUE(ollama_base64_valid("QQ==", 4));
  EXPECT_FALSE(ollama_base64_valid("QUJ", 3));
  EXPECT_FALSE(ollama_base64_valid("Q=JD", 4));
  const char *d = "data:image/png;base64,QUJD";
  EXPECT_FALSE(ollama_base64_valid(d, strlen(d)));
}

/* registry_remove_name: what /api/delete uses for copies and created models. */
TEST(ollama_registry_remove_name) {
  registry *r = NULL;
  ASSERT_INT_EQ(registry_new(&r), 0);
  EXPECT_INT_EQ(registry_add_alias(r, "copy:latest", "org/tiny"), 0);
  EXPECT_INT_EQ(registry_add_model(r, "/nonexistent/x.gguf", "made:latest"), 0);
  registry_alias *v = NULL;
  size_t n = 0;
  EXPECT_INT_EQ(registry_aliases(r, &v, &n), 0);
  EXPECT_INT_EQ(n, 1);
  registry_aliases_free(v, n);
  EXPECT_INT_EQ(registry_remove_name(r, "COPY:latest"), 0); /* aliases fold case */
  EXPECT_INT_EQ(registry_aliases(r, &v, &n), 0);
  EXPECT_INT_EQ(n, 0);
  registry_aliases_free(v, n);
  EXPECT_INT_EQ(registry_remove_name(r, "made:latest"), 0);
  EXPECT_INT_EQ(registry_remove_name(r, "made:latest"), ERR_NOT_FOUND);
  EXPECT_INT_EQ(registry_add_model(r, "/nonexistent/x.gguf", "made:latest"), 0); /* the name is free again */
  EXPECT_INT_EQ(registry_remove_name(r, ""), ERR_INVALID);
  registry_free(r);
}

/* /api/chat's pure parser: Ollama messages into canonical ones (roles
 * lower-cased, thinking as reasoning_content, calls with ids and object
 * arguments, a tool result linked to its call), its fields into the
 * canonical request, and errors in Ollama's words. */
static json_t *chat_body(const char *text) {
  json_t *v = json_loads(text, 0, NULL);
  if (!v) abort(); /* the test's own JSON */
  return v;
}

TEST(ollama_chat_parse_fills_the_canonical_request) {
  json_t *body = chat_body(
      "{\"model\":\"m:1b\",\"messages\":[{\"role\":\"User\",\"content\":\"weather?\"},"
      "{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"look\",\"tool_calls\":[{\"function\":{\"name\":\"get\","
      "\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}}]},{\"role\":\"tool\",\"tool_name\":\"get\",\"content\":\"cold\"}],"
      "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get\"}}],\"think\":\"low\",\"keep_alive\":\"2s\","
      "\"stream\":false,\"top_logprobs\":2,\"options\":{\"temperature\":0.25,\"stop\":[\"END\"]}}");
  gen_request r;
  ASSERT_INT_EQ(ollama_chat_parse(body, &r), 0);
  EXPECT_TRUE(strcmp(r.model, "m:1b") == 0);
  EXPECT_TRUE(!r.stream && r.logprobs && r.top_logprobs == 2);
  EXPECT_TRUE(r.ttl_ms == 2000);
  EXPECT_TRUE(r.chat.thinking == 1 && r.chat.effort == GEN_EFFORT_LOW);
  EXPECT_TRUE(r.p.er.sample.temperature == 0.25f && r.p.n_stop == 1 && strcmp(r.p.stop[0], "END") == 0);
  EXPECT_TRUE(r.chat.messages == r.messages && r.chat.tools == r.tools && json_array_size(r.tools) == 1);
  EXPECT_TRUE(json_array_size(r.messages) == 3);
  EXPECT_TRUE(strcmp(json_string_value(json_object_get(json_array_get(r.messages, 0), "role")), "user") == 0);
  const json_t *a = json_array_get(r.messages, 1);
  EXPECT_TRUE(strcmp(json_string_value(json_object_get(a, "reasoning_content")), "look") == 0);
  const json_t *call = json_array_get(json_object_get(a, "tool_calls"), 0);
  EXPECT_TRUE(strcmp(json_string_value(json_object_get(call, "id")), "call_1_0") == 0);
  const json_t *args = json_object_get(json_object_get(call, "function"), "arguments");
  EXPECT_TRUE(strcmp(json_string_value(json_object_get(args, "city")), "Oslo") == 0);
  const json_t *t = json_array_get(r.messages, 2);
  EXPECT_TRUE(strcmp(json_string_value(json_object_get(t, "tool_call_id")), "call_1_0") == 0);
  EXPECT_TRUE(strcmp(json_string_value(json_object_get(t, "name")), "get") == 0);
  EXPECT_TRUE(!r.images);
  gen_request_free(&r);
  json_decref(body);

  body = chat_body("{\"model\":\"m\",\"keep_alive\":0}"); /* an unload: no messages */
  ASSERT_INT_EQ(ollama_chat_parse(body, &r), 0);
  EXPECT_TRUE(r.messages == NULL && r.ttl_ms == 0 && r.stream);
  gen_request_free(&r);
  json_decref(body);
}

TEST(ollama_chat_parse_errors_in_ollamas_words) {
  static const struct {
    const char *body;
    int code;
    const char *detail;
  } cases[] = {
      {"{\"messages\":[]}", ERR_INVALID, "model is required"},
      {"{\"model\":\"a b\"}", ERR_INVALID, "invalid model name"},
      {"{\"model\":\"m\",\"top_logprobs\":21}", ERR_RANGE, "top_logprobs must be between 0 and 20"},
      {"{\"model\":\"m\",\"messages\":{}}", ERR_TYPE, "messages: expected array, got object"},
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", ERR_INVALID,
       "messages[0].role: expected one of system, user, assistant, tool"},
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"images\":[\"@@\"]}]}", ERR_INVALID,
       "messages[0].images[0]: illegal base64 data"},
      {"{\"model\":\"m\",\"think\":\"sometimes\"}", ERR_INVALID, "invalid think value: \"sometimes\""},
      {"{\"model\":\"m\",\"keep_alive\":true}", ERR_TYPE, "Unsupported type: 'bool'"},
      {"{\"model\":\"m\",\"options\":{\"top_k\":\"x\"}}", ERR_TYPE, "option \"top_k\" must be of type integer"},
      {"{\"model\":\"m\",\"tools\":[{\"function\":{}}]}", ERR_INVALID,
       "tools[0].function.name: required string is missing"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *body = chat_body(cases[i].body);
    gen_request r;
    int rc = ollama_chat_parse(body, &r);
    TEST_CHECK_(rc == cases[i].code, 0, "%s: rc %d", cases[i].body, rc);
    TEST_CHECK_(strncmp(err_detail(), cases[i].detail, strlen(cases[i].detail)) == 0, 0, "%s: %s", cases[i].body,
                err_detail());
    gen_request_free(&r);
    json_decref(body);
  }
  json_t *body = chat_body("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"images\":[\"aGk=\"]}]}");
  gen_request r;
  EXPECT_TRUE(ollama_chat_parse(body, &r) == 0 && r.images);
  gen_request_free(&r);
  json_decref(body);
}
