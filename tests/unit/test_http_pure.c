/*
 * test_http_pure.c - the socket-free parts of src/http: router, URL and
 * query decoding, credential checks, SHA-1/base64 for the WebSocket accept
 * key. Expected values are written by hand (or are the RFC / FIPS vectors).
 */
#include <stdlib.h>

#include "base/err.h"
#include "base/util.h"
#include "http/http_int.h"
#include "test.h"

static void h_dummy(http_req *req, void *ctx) { (void)req, (void)ctx; }

static const http_route k_routes[] = {
    {"GET", "/v1/models", h_dummy, NULL, 0, "models"},
    {"GET", "/v1/models/{model}", h_dummy, NULL, 0, "model"},
    {"DELETE", "/v1/models/{model}", h_dummy, NULL, 0, "model_delete"},
    {"GET", "/v1/models/special", h_dummy, NULL, 0, "special"},
    {"POST", "/v1/chat/completions", h_dummy, NULL, 0, "chat"},
    {"GET", "/api/v0/models/{model...}", h_dummy, NULL, 0, "lms_model"},
    {"GET", "/v1/files/{id}/content", h_dummy, NULL, 0, "file_content"},
};

static router *make_router(void) {
  router *r = NULL;
  if (router_new(&r) != 0) return NULL;
  if (router_add(r, k_routes, ARRAY_LEN(k_routes)) != 0) {
    router_free(r);
    return NULL;
  }
  return r;
}

TEST(http_router_matches_and_decodes_after_split) {
  router *r = make_router();
  ASSERT_TRUE(r != NULL);
  router_match m;
  ASSERT_INT_EQ(router_match_path(r, "GET", "/v1/models/org%2Fname", &m), 0);
  EXPECT_STR_EQ(m.route->name, "model");
  ASSERT_INT_EQ(m.n_params, 1);
  EXPECT_STR_EQ(m.param_names[0], "model");
  EXPECT_STR_EQ(m.param_values[0], "org/name");
  router_match_free(&m);
  /* Literal beats parameter regardless of table order. */
  ASSERT_INT_EQ(router_match_path(r, "GET", "/v1/models/special", &m), 0);
  EXPECT_STR_EQ(m.route->name, "special");
  router_match_free(&m);
  /* Trailing and repeated slashes. */
  ASSERT_INT_EQ(router_match_path(r, "GET", "//v1///models/", &m), 0);
  EXPECT_STR_EQ(m.route->name, "models");
  router_match_free(&m);
  ASSERT_INT_EQ(router_match_path(r, "GET", "/v1/files/file-1/content/", &m), 0);
  EXPECT_STR_EQ(m.route->name, "file_content");
  EXPECT_STR_EQ(m.param_values[0], "file-1");
  router_match_free(&m);
  /* Rest parameter joins the remaining segments. */
  ASSERT_INT_EQ(router_match_path(r, "GET", "/api/v0/models/lmstudio-community/qwen%20x/gguf", &m), 0);
  EXPECT_STR_EQ(m.route->name, "lms_model");
  EXPECT_STR_EQ(m.param_values[0], "lmstudio-community/qwen x/gguf");
  router_match_free(&m);
  EXPECT_INT_EQ(router_match_path(r, "GET", "/api/v0/models/", &m), ERR_NOT_FOUND);
  router_match_free(&m);
  router_free(r);
}

TEST(http_router_head_method_and_not_found) {
  router *r = make_router();
  ASSERT_TRUE(r != NULL);
  router_match m;
  ASSERT_INT_EQ(router_match_path(r, "HEAD", "/v1/models", &m), 0);
  EXPECT_STR_EQ(m.route->name, "models");
  router_match_free(&m);
  EXPECT_INT_EQ(router_match_path(r, "POST", "/v1/models/x", &m), ERR_METHOD);
  EXPECT_STR_EQ(m.allow, "GET, HEAD, DELETE, OPTIONS");
  router_match_free(&m);
  EXPECT_INT_EQ(router_match_path(r, "GET", "/v1/chat/completions", &m), ERR_METHOD);
  EXPECT_STR_EQ(m.allow, "POST, OPTIONS");
  router_match_free(&m);
  EXPECT_INT_EQ(router_match_path(r, "GET", "/v1/nope", &m), ERR_NOT_FOUND);
  router_match_free(&m);
  EXPECT_INT_EQ(router_match_path(r, "GET", "/", &m), ERR_NOT_FOUND);
  router_match_free(&m);
  router_free(r);
}

TEST(http_router_rejects_bad_escapes_and_nul) {
  router *r = make_router();
  ASSERT_TRUE(r != NULL);
  router_match m;
  EXPECT_INT_EQ(router_match_path(r, "GET", "/v1/models/a%00b", &m), ERR_PARSE);
  router_match_free(&m);
  EXPECT_INT_EQ(router_match_path(r, "GET", "/v1/models/%zz", &m), ERR_PARSE);
  router_match_free(&m);
  EXPECT_INT_EQ(router_match_path(r, "GET", "/v1/models/%4", &m), ERR_PARSE);
  router_match_free(&m);
  /* Bytes that are not UTF-8 are passed through to the handler. */
  ASSERT_INT_EQ(router_match_path(r, "GET", "/v1/models/\xff\xfe", &m), 0);
  EXPECT_STR_EQ(m.param_values[0], "\xff\xfe");
  router_match_free(&m);
  router_free(r);
}

TEST(http_router_refuses_bad_patterns) {
  router *r = NULL;
  ASSERT_INT_EQ(router_new(&r), 0);
  http_route bad1[] = {{"GET", "/a/{rest...}/b", h_dummy, NULL, 0, NULL}};
  EXPECT_INT_EQ(router_add(r, bad1, 1), ERR_INVALID);
  http_route bad2[] = {{"GET", "/a/{}", h_dummy, NULL, 0, NULL}};
  EXPECT_INT_EQ(router_add(r, bad2, 1), ERR_INVALID);
  http_route bad3[] = {{"GET", "nope", h_dummy, NULL, 0, NULL}};
  EXPECT_INT_EQ(router_add(r, bad3, 1), ERR_INVALID);
  router_free(r);
}

/* Two tiers: a fallback answers only what no ordinary route answers, even
 * when the ordinary route is less specific or was added later. */
TEST(http_router_fallback_tier_loses_to_any_ordinary_route) {
  router *r = NULL;
  ASSERT_INT_EQ(router_new(&r), 0);
  static const http_route fb[] = {
      {"GET", "/v1/models/{model}", h_dummy, NULL, HTTP_ROUTE_FALLBACK, "fb_get"},
      {"DELETE", "/v1/models/{model}", h_dummy, NULL, HTTP_ROUTE_FALLBACK, "fb_delete"},
      {"POST", "/v1/responses/compact", h_dummy, NULL, HTTP_ROUTE_FALLBACK, "fb_compact"},
      {"GET", "/v1/responses/{id}", h_dummy, NULL, HTTP_ROUTE_FALLBACK, "fb_resp"},
  };
  static const http_route real[] = {
      {"GET", "/v1/models/{model...}", h_dummy, NULL, 0, "real_get"},
      {"GET", "/v1/responses/{rest...}", h_dummy, NULL, 0, "real_resp"},
  };
  ASSERT_INT_EQ(router_add(r, fb, ARRAY_LEN(fb)), 0); /* fallbacks first on purpose */
  ASSERT_INT_EQ(router_add(r, real, ARRAY_LEN(real)), 0);
  router_match m;
  ASSERT_INT_EQ(router_match_path(r, "GET", "/v1/models/x", &m), 0);
  EXPECT_STR_EQ(m.route->name, "real_get"); /* rest beats a fallback {param} */
  router_match_free(&m);
  ASSERT_INT_EQ(router_match_path(r, "DELETE", "/v1/models/x", &m), 0);
  EXPECT_STR_EQ(m.route->name, "fb_delete");
  EXPECT_STR_EQ(m.param_values[0], "x");
  router_match_free(&m);
  ASSERT_INT_EQ(router_match_path(r, "GET", "/v1/responses/resp_1", &m), 0);
  EXPECT_STR_EQ(m.route->name, "real_resp");
  router_match_free(&m);
  ASSERT_INT_EQ(router_match_path(r, "POST", "/v1/responses/compact", &m), 0);
  EXPECT_STR_EQ(m.route->name, "fb_compact");
  router_match_free(&m);
  /* A method no tier has: 405 listing both tiers' methods. */
  EXPECT_INT_EQ(router_match_path(r, "PUT", "/v1/models/x", &m), ERR_METHOD);
  EXPECT_TRUE(strstr(m.allow, "GET") && strstr(m.allow, "DELETE"));
  router_match_free(&m);
  router_free(r);
}

TEST(http_router_aliases_only_for_paths_without_a_route) {
  router *r = make_router();
  ASSERT_TRUE(r != NULL);
  static const http_route own[] = {{"GET", "/models/local", h_dummy, NULL, 0, "own"}};
  ASSERT_INT_EQ(router_add(r, own, 1), 0);
  ASSERT_INT_EQ(router_add_alias(r, "/models", "/v1/models"), 0);
  ASSERT_INT_EQ(router_add_alias(r, "/v1/v1/models", "/v1/models"), 0);
  ASSERT_INT_EQ(router_add_alias(r, "/v1/v1", "/nowhere"), 0); /* shorter: loses to the one above */
  ASSERT_INT_EQ(router_add_alias(r, "/chat", "/v1/chat"), 0);
  router_match m;
  ASSERT_INT_EQ(router_match_path(r, "GET", "/models", &m), 0);
  EXPECT_STR_EQ(m.route->name, "models");
  router_match_free(&m);
  ASSERT_INT_EQ(router_match_path(r, "GET", "/models/org%2Fname", &m), 0);
  EXPECT_STR_EQ(m.route->name, "model");
  EXPECT_STR_EQ(m.param_values[0], "org/name");
  router_match_free(&m);
  ASSERT_INT_EQ(router_match_path(r, "GET", "/v1/v1/models/abc/", &m), 0);
  EXPECT_STR_EQ(m.route->name, "model");
  EXPECT_STR_EQ(m.param_values[0], "abc");
  router_match_free(&m);
  /* A path with a route of its own is never rewritten. */
  ASSERT_INT_EQ(router_match_path(r, "GET", "/models/local", &m), 0);
  EXPECT_STR_EQ(m.route->name, "own");
  router_match_free(&m);
  /* Wrong method through an alias: 405 for the aliased route. */
  EXPECT_INT_EQ(router_match_path(r, "GET", "/chat/completions", &m), ERR_METHOD);
  EXPECT_TRUE(strstr(m.allow, "POST") != NULL);
  router_match_free(&m);
  /* Whole segments only; unknown stays 404. */
  EXPECT_INT_EQ(router_match_path(r, "GET", "/modelsx", &m), ERR_NOT_FOUND);
  router_match_free(&m);
  EXPECT_INT_EQ(router_match_path(r, "GET", "/v1/v1/nope", &m), ERR_NOT_FOUND);
  router_match_free(&m);
  EXPECT_INT_EQ(router_add_alias(r, "/", "/v1"), ERR_INVALID);
  EXPECT_INT_EQ(router_add_alias(r, "/a/{x}", "/v1"), ERR_INVALID);
  EXPECT_INT_EQ(router_add_alias(r, "chat", "/v1"), ERR_INVALID);
  router_free(r);
}

TEST(http_url_decode_and_query) {
  char *s = NULL;
  size_t n = 0;
  ASSERT_INT_EQ(url_decode("a%20b+c%2Fd", 11, true, &s, &n), 0);
  EXPECT_STR_EQ(s, "a b c/d");
  EXPECT_INT_EQ(n, 7);
  free(s);
  ASSERT_INT_EQ(url_decode("a+b", 3, false, &s, NULL), 0);
  EXPECT_STR_EQ(s, "a+b");
  free(s);
  EXPECT_INT_EQ(url_decode("%", 1, false, &s, NULL), ERR_PARSE);
  EXPECT_INT_EQ(url_decode("%0g", 3, false, &s, NULL), ERR_PARSE);
  EXPECT_INT_EQ(url_decode("%00", 3, false, &s, NULL), ERR_PARSE);

  url_query q;
  const char *qs = "include[]=a&include[]=b%2Cc&limit=10&&flag&x=&after=f+1";
  ASSERT_INT_EQ(url_query_parse(qs, strlen(qs), &q), 0);
  EXPECT_INT_EQ(q.n_kv, 6);
  EXPECT_STR_EQ(url_query_get(&q, "include"), "a");
  const char *vals[4];
  ASSERT_INT_EQ(url_query_get_all(&q, "include", vals, 4), 2);
  EXPECT_STR_EQ(vals[0], "a");
  EXPECT_STR_EQ(vals[1], "b,c");
  EXPECT_INT_EQ(url_query_get_all(&q, "include", vals, 1), 1);
  EXPECT_INT_EQ(url_query_get_all(&q, "include[]", vals, 4), 2);
  EXPECT_STR_EQ(url_query_get(&q, "include[]"), "a");
  EXPECT_TRUE(url_query_get(&q, "inc") == NULL);
  EXPECT_TRUE(url_query_get(&q, "includ") == NULL);
  EXPECT_STR_EQ(url_query_get(&q, "limit"), "10");
  EXPECT_STR_EQ(url_query_get(&q, "flag"), "");
  EXPECT_STR_EQ(url_query_get(&q, "x"), "");
  EXPECT_STR_EQ(url_query_get(&q, "after"), "f 1");
  EXPECT_TRUE(url_query_get(&q, "missing") == NULL);
  url_query_free(&q);
  EXPECT_INT_EQ(url_query_parse("a=%zz", 5, &q), ERR_PARSE);
  EXPECT_INT_EQ(q.n_kv, 0);
  /* Too many parameters. */
  size_t big_len = 4 * 1001;
  char *big = malloc(big_len + 1);
  ASSERT_TRUE(big != NULL);
  for (size_t i = 0; i < 1001; i++) memcpy(big + 4 * i, "a=1&", 4);
  EXPECT_INT_EQ(url_query_parse(big, big_len, &q), ERR_TOO_LARGE);
  free(big);
}

TEST(http_auth_every_form) {
  const char *keys[] = {"sk-one", "second"};
  auth_input in = {0};
  EXPECT_FALSE(auth_check(keys, 2, &in));
  EXPECT_TRUE(auth_check(keys, 0, &in)); /* no keys: open */
  in.authorization = "Bearer sk-one";
  EXPECT_TRUE(auth_check(keys, 2, &in));
  in.authorization = "bEaReR second";
  EXPECT_TRUE(auth_check(keys, 2, &in));
  in.authorization = "Token sk-one";
  EXPECT_TRUE(auth_check(keys, 2, &in));
  in.authorization = "Basic sk-one";
  EXPECT_FALSE(auth_check(keys, 2, &in));
  in.authorization = "sk-one";
  EXPECT_FALSE(auth_check(keys, 2, &in));
  in.authorization = "Bearer sk-on";
  EXPECT_FALSE(auth_check(keys, 2, &in));
  in.authorization = "Bearer sk-onex";
  EXPECT_FALSE(auth_check(keys, 2, &in));
  in.authorization = NULL;
  in.x_api_key = "second";
  EXPECT_TRUE(auth_check(keys, 2, &in));
  in.x_api_key = "";
  EXPECT_FALSE(auth_check(keys, 2, &in));
  in.x_api_key = NULL;
  in.api_key = "sk-one";
  EXPECT_TRUE(auth_check(keys, 2, &in));
  in.api_key = NULL;
  const char *p1[] = {"realtime", "openai-insecure-api-key.sk-one"};
  in.ws_protocols = p1;
  in.n_ws_protocols = 2;
  EXPECT_TRUE(auth_check(keys, 2, &in));
  const char *p2[] = {"token", "second"};
  in.ws_protocols = p2;
  EXPECT_TRUE(auth_check(keys, 2, &in));
  const char *p3[] = {"Bearer", "sk-one"};
  in.ws_protocols = p3;
  EXPECT_TRUE(auth_check(keys, 2, &in));
  const char *p4[] = {"token", "wrong"};
  in.ws_protocols = p4;
  EXPECT_FALSE(auth_check(keys, 2, &in));
  const char *p5[] = {"sk-one"}; /* a bare key is not a credential form */
  in.ws_protocols = p5;
  in.n_ws_protocols = 1;
  EXPECT_FALSE(auth_check(keys, 2, &in));

  char *scratch = NULL;
  const char *out[4];
  size_t n = auth_split_protocols(" token ,  abc,,x ", &scratch, out, 4);
  ASSERT_INT_EQ(n, 3);
  EXPECT_STR_EQ(out[0], "token");
  EXPECT_STR_EQ(out[1], "abc");
  EXPECT_STR_EQ(out[2], "x");
  free(scratch);
}

TEST(http_sha1_base64_ws_accept) {
  /* FIPS 180 vectors. */
  uint8_t d[20];
  char hex[41];
  sha1_digest("abc", 3, d);
  for (int i = 0; i < 20; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
  EXPECT_STR_EQ(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  sha1_digest(two, strlen(two), d);
  for (int i = 0; i < 20; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
  EXPECT_STR_EQ(hex, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  sha1_digest("", 0, d);
  for (int i = 0; i < 20; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
  EXPECT_STR_EQ(hex, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  char b64[16];
  base64_encode((const uint8_t *)"f", 1, b64);
  EXPECT_STR_EQ(b64, "Zg==");
  base64_encode((const uint8_t *)"fo", 2, b64);
  EXPECT_STR_EQ(b64, "Zm8=");
  base64_encode((const uint8_t *)"foobar", 6, b64);
  EXPECT_STR_EQ(b64, "Zm9vYmFy");
  /* RFC 6455 section 1.3's sample (also python3 hashlib + base64). */
  char acc[29];
  ASSERT_INT_EQ(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", acc), 0);
  EXPECT_STR_EQ(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

/* The DNS-rebinding guard (auth.c host_header_allowed), against
 * ../shared/specs/ollama.md 0.4: loopback, private and unspecified
 * addresses with or without a port, localhost, the machine's name and
 * .localhost/.local/.internal names pass; any other name is refused. */
TEST(http_host_header_guard) {
  const char *ok[] = {"localhost:11434", "LOCALHOST", "localhost", "localhost.", "127.0.0.1:8080", "127.0.0.1",
                      "127.1.2.3:1", "[::1]", "[::1]:11434", "::1", "0.0.0.0:11434", "[::]:80", "10.1.2.3",
                      "192.168.1.20:11434", "172.16.0.1", "172.31.255.255:9", "169.254.1.1", "[fd00::1]:80",
                      "[fe80::1]", "[::ffff:127.0.0.1]:5", "app.localhost:3000", "printer.local", "svc.internal:80",
                      "mybox", "MyBox:11434", "", NULL};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    TEST_CHECK_(host_header_allowed(ok[i], "mybox"), 0, "allowed: %s", ok[i] ? ok[i] : "(absent)");
  }
  const char *bad[] = {"evil.example.com", "evil.example.com:11434", "8.8.8.8", "8.8.8.8:11434", "172.32.0.1",
                       "[2001:db8::1]:80", "[::ffff:8.8.8.8]", "localhost.evil.com", "evil-localhost",
                       "notlocal", "127.0.0.1.evil.com", "[::1", "[::1]x", "local", "mybox.evil.com"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    TEST_CHECK_(!host_header_allowed(bad[i], "mybox"), 0, "refused: %s", bad[i]);
  }
  /* no hostname known: only the fixed rules */
  EXPECT_FALSE(host_header_allowed("mybox", NULL));
  EXPECT_TRUE(host_header_allowed("localhost", ""));
  char longname[400];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  EXPECT_FALSE(host_header_allowed(longname, NULL));
}
