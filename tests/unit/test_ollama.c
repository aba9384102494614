/*
 * test_ollama.c - the pure parts of the Ollama dialect: SHA-256 against the
 * FIPS 180-4 vectors, the Go-template subset, the model-name grammar and
 * the base64 check for images; registry_remove_name, which /api/delete uses.
 */
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
