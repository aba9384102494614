/*
 * fuzz_http_url.c - libFuzzer harness for the HTTP layer's URL handling:
 * url_query_parse (query strings) and router_match_path (paths, split then
 * percent-decoded) on a small route table. Input: the first byte picks the
 * target, the rest is the string.
 * Properties: no crash or leak; a successful parse yields keys and values
 * without NUL bytes and no longer than the input; get_all agrees with a
 * direct count; a matched route's decoded params are no longer than the path.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "http/http_int.h"

static void h(http_req *req, void *ctx) { (void)req, (void)ctx; }

static const http_route k_routes[] = {
    {"GET", "/v1/models/{model}", h, NULL, 0, NULL},
    {"POST", "/v1/files/{id}/content", h, NULL, 0, NULL},
    {"GET", "/api/v0/models/{model...}", h, NULL, 0, NULL},
    {"GET", "/health", h, NULL, 0, NULL},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *s = (const char *)data + 1;
  size_t n = size - 1;
  if (data[0] & 1) {
    url_query q;
    if (url_query_parse(s, n, &q) == 0) {
      for (size_t i = 0; i < q.n_kv; i++) {
        if (strlen(q.kv[i].key) > n || strlen(q.kv[i].val) > n) abort();
        size_t direct = 0;
        for (size_t j = 0; j < q.n_kv; j++) direct += strcmp(q.kv[j].key, q.kv[i].key) == 0;
        if (url_query_get_all(&q, q.kv[i].key, NULL, (size_t)-1) != direct) abort();
        if (!url_query_get(&q, q.kv[i].key)) abort();
      }
      url_query_free(&q);
    }
  } else {
    char *path = malloc(n + 1);
    if (!path) return 0;
    memcpy(path, s, n);
    path[n] = '\0'; /* the router sees C strings, as MHD hands them */
    router *r = NULL;
    if (router_new(&r) == 0 && router_add(r, k_routes, ARRAY_LEN(k_routes)) == 0) {
      router_match m;
      int rc = router_match_path(r, (data[0] & 2) ? "POST" : "GET", path, &m);
      if (rc == 0)
        for (size_t i = 0; i < m.n_params; i++)
          if (strlen(m.param_values[i]) > n) abort();
      router_match_free(&m);
    }
    router_free(r);
    free(path);
  }
  return 0;
}
