/*
 * test_deepgram_fetch.c - the outbound allow list of the Deepgram adapter
 * (--fetch-hosts): "*" reaches public addresses only; loopback, private,
 * link-local (cloud metadata) and reserved ones need the host named. Checked
 * on URL literals (dg_url_check) and on the address actually connected to
 * (dg_fetch against a loopback server reached by the name "localhost").
 */
#include <stdlib.h>
#include <string.h>

#include "api/deepgram/deepgram.h"
#include "base/err.h"
#include "base/util.h"
#include "http/http.h"
#include "loopback.h"
#include "test.h"

TEST(deepgram_fetch_star_means_public_addresses) {
  static const struct {
    const char *allow, *url;
    int rc;
  } k_cases[] = {
      {"*", "http://169.254.169.254/latest/meta-data/", ERR_FORBIDDEN},
      {"*", "http://10.0.0.1/a.wav", ERR_FORBIDDEN},
      {"*", "http://192.168.1.1/a.wav", ERR_FORBIDDEN},
      {"*", "http://172.20.0.5/a.wav", ERR_FORBIDDEN},
      {"*", "http://100.100.100.200/a.wav", ERR_FORBIDDEN},
      {"*", "http://127.0.0.1:8080/a.wav", ERR_FORBIDDEN},
      {"*", "http://0.0.0.0/a.wav", ERR_FORBIDDEN},
      {"*", "http://[::1]/a.wav", ERR_FORBIDDEN},
      {"*", "http://[fd00:ec2::254]/a.wav", ERR_FORBIDDEN},
      {"*", "http://[::ffff:169.254.169.254]/a.wav", ERR_FORBIDDEN},
      {"*", "http://93.184.216.34/a.wav", 0},
      {"*", "https://[2606:4700::1111]/a.wav", 0},
      {"*", "https://example.com/a.wav", 0}, /* a name: checked again when connecting */
      {"10.0.0.1,*", "http://10.0.0.1/a.wav", 0},
      {"169.254.169.254", "http://169.254.169.254/x", 0},
      {"", "https://example.com/a.wav", ERR_FORBIDDEN},
  };
  for (size_t i = 0; i < ARRAY_LEN(k_cases); i++) {
    int rc = dg_url_check(k_cases[i].allow, k_cases[i].url, "url");
    TEST_CHECK_(rc == k_cases[i].rc, 0, "%s with --fetch-hosts '%s': %d (%s)", k_cases[i].url, k_cases[i].allow, rc,
                rc ? err_detail() : "allowed");
  }
  EXPECT_INT_EQ(dg_url_check("*", "http://169.254.169.254/", "url"), ERR_FORBIDDEN);
  EXPECT_STR_CONTAINS(err_detail(), "--fetch-hosts 169.254.169.254");
}

static void h_audio(http_req *req, void *ctx) {
  (void)ctx;
  http_respond(req, 200, "audio/wav", "RIFFdata", 8);
}

static const http_route k_routes[] = {{"GET", "/a.wav", h_audio, NULL, HTTP_ROUTE_PUBLIC, "a"}};

TEST(deepgram_fetch_star_refuses_a_name_resolving_to_loopback) {
  http_server *srv = NULL;
  ASSERT_INT_EQ(loopback_start(k_routes, ARRAY_LEN(k_routes), test_tmpdir(), &srv), 0);
  char url[128];
  snprintf(url, sizeof url, "http://localhost:%d/a.wav", http_server_port(srv));
  uint8_t *got = NULL;
  size_t n = 0;
  EXPECT_INT_EQ(dg_url_check("*", url, "url"), 0); /* a name passes the literal check */
  int rc = dg_fetch("*", url, 1 << 20, &got, &n);
  EXPECT_INT_NE(rc, 0);
  if (rc) EXPECT_STR_CONTAINS(err_detail(), "'*'");
  free(got);
  got = NULL;
  EXPECT_INT_EQ(dg_fetch("localhost", url, 1 << 20, &got, &n), 0);
  EXPECT_INT_EQ(n, 8);
  if (got && n == 8) EXPECT_MEM_EQ(got, "RIFFdata", 8);
  free(got);
  http_server_free(srv);
}
