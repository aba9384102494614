/*
 * fuzz_router.c - libFuzzer harness for the path router, the percent
 * decoder and the query-string parser: the first input byte picks the
 * method, the rest is a request target "path?query". A route table shaped
 * like the real ones (literal segments, {params}, a {rest...} tail, a
 * fallback tier, /v1-less and /v1/v1 path aliases) is matched against it.
 * Any input must give a match or a clean error.
 */
#include "fuzz.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_int.h"


static void nop(http_req *req, void *ctx) { (void)req, (void)ctx; }

static const http_route ROUTES[] = {
    {"GET", "/health", nop, NULL, HTTP_ROUTE_PUBLIC, NULL},
    {"GET", "/v1/models", nop, NULL, 0, NULL},
    {"GET", "/v1/models/{model}", nop, NULL, 0, NULL},
    {"DELETE", "/v1/models/{model}", nop, NULL, 0, NULL},
    {"POST", "/v1/responses/{id}/cancel", nop, NULL, 0, NULL},
    {"GET", "/v1/conversations/{cid}/items/{iid}", nop, NULL, 0, NULL},
    {"POST", "/api/blobs/{digest}", nop, NULL, 0, NULL},
    {"GET", "/files/{path...}", nop, NULL, 0, NULL},
    {"GET", "/v1/models/{model}", nop, NULL, HTTP_ROUTE_FALLBACK, NULL},
    {"POST", "/v1/chat/completions", nop, NULL, HTTP_ROUTE_FALLBACK | HTTP_BODY_IGNORE, NULL},
    {"GET", "/v1/{a}/{b}/{c}", nop, NULL, HTTP_ROUTE_FALLBACK, NULL},
};

FUZZ_TARGET(router) {
  static router *r;
  if (!r) {
    if (router_new(&r) || router_add(r, ROUTES, sizeof ROUTES / sizeof ROUTES[0]) ||
        router_add_alias(r, "/models", "/v1/models") || router_add_alias(r, "/v1/v1/models", "/v1/models") ||
        router_add_alias(r, "/chat", "/v1/chat") || router_add_alias(r, "/v1/v1", "/v1"))
      abort();
  }
  if (size < 1) return 0;
  static const char *const methods[] = {"GET", "HEAD", "POST", "DELETE", "PUT", "OPTIONS"};
  const char *method = methods[data[0] % 6];
  char *target = malloc(size);
  if (!target) return 0;
  memcpy(target, data + 1, size - 1);
  target[size - 1] = '\0';
  char *q = strchr(target, '?');
  if (q) *q++ = '\0';

  router_match m;
  memset(&m, 0, sizeof m);
  router_match_path(r, method, target, &m);
  router_match_free(&m);

  char *dec = NULL;
  size_t dec_len = 0;
  if (url_decode(target, strlen(target), false, &dec, &dec_len) == 0) free(dec);
  if (q) {
    url_query qs;
    memset(&qs, 0, sizeof qs);
    if (url_query_parse(q, strlen(q), &qs) == 0) {
      const char *vals[8];
      url_query_get(&qs, "include");
      url_query_get_all(&qs, "include", vals, 8);
    }
    url_query_free(&qs);
  }
  free(target);
  return 0;
}
