/*
 * loopback.c - see loopback.h: the loopback server and request the API unit
 * tests share.
 */
#include "loopback.h"

#include <string.h>

#include "api/api.h"

int loopback_start(const http_route *routes, size_t n_routes, const char *spool_dir, http_server **out) {
  http_config cfg = {.host = "127.0.0.1", .max_json_body = 65536, .max_upload = 1 << 20, .spool_dir = spool_dir,
                     .n_threads = 2, .on_error = api_http_on_error, .decorate = api_http_decorate};
  *out = NULL;
  int rc = http_server_new(&cfg, out);
  if (!rc) rc = http_server_add_routes(*out, routes, n_routes);
  if (!rc) rc = http_server_start(*out);
  if (rc) {
    http_server_free(*out);
    *out = NULL;
  }
  return rc;
}

static size_t collect(char *p, size_t sz, size_t n, void *ud) {
  buf_append((buf *)ud, p, sz * n);
  return sz * n;
}

long loopback_request(int port, const char *method, const char *path, curl_mime *(*mk)(CURL *, void *), void *arg,
                      const char *json, buf *out) {
  buf_reset(out);
  CURL *c = curl_easy_init();
  if (!c) return -1;
  char url[512];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
  struct curl_slist *sl = curl_slist_append(NULL, "Expect:");
  if (json) {
    sl = curl_slist_append(sl, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, sl);
  curl_mime *m = mk ? mk(c, arg) : NULL;
  if (m) curl_easy_setopt(c, CURLOPT_MIMEPOST, m);
  if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  long status = -1;
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_mime_free(m);
  curl_slist_free_all(sl);
  curl_easy_cleanup(c);
  return status;
}
