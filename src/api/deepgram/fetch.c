/*
 * fetch.c - the only outbound HTTP parley's Deepgram adapter makes: reading
 * the audio of a {"url": ...} body and POSTing (or PUTting) a result to a
 * `callback` URL, with libcurl.
 *
 * Both go only to hosts the operator lists in --fetch-hosts
 * (PARLEY_FETCH_HOSTS; "*" = any); with the default (none) every such
 * request is refused with a 400 that names the option. Only http and https
 * are allowed, redirects are not followed (a redirect could leave the
 * allowed hosts), a fetched body is bounded by --max-upload, and both calls
 * time out (60 s fetch, 30 s callback).
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/deepgram/deepgram.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

/* host without IPv6 brackets into out. */
static void bare_host(const char *h, char *out, size_t cap) {
  size_t n = strlen(h);
  if (n >= 2 && h[0] == '[' && h[n - 1] == ']') snprintf(out, cap, "%.*s", (int)(n - 2), h + 1);
  else snprintf(out, cap, "%s", h);
}

int dg_url_check(const char *allow, const char *url, const char *param) {
  CURLU *u = curl_url();
  if (!u) return err_set(ERR_NOMEM, "url");
  char *scheme = NULL, *host = NULL;
  int rc = 0;
  if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK || curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
    rc = err_set(ERR_INVALID, "%s: '%.200s' is not a valid absolute URL", param, url);
  } else if (strcasecmp(scheme, "http") && strcasecmp(scheme, "https")) {
    rc = err_set(ERR_INVALID, "%s: only http and https URLs are allowed, not %s", param, scheme);
  } else if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
    rc = err_set(ERR_INVALID, "%s: '%.200s' names no host", param, url);
  } else {
    char want[256], have[256];
    bare_host(host, have, sizeof have);
    bool ok = false;
    char *list = str_dup(allow ? allow : "");
    char *save = NULL;
    for (char *h = list ? strtok_r(list, ", ", &save) : NULL; h && !ok; h = strtok_r(NULL, ", ", &save)) {
      bare_host(h, want, sizeof want);
      ok = !strcmp(want, "*") || !strcasecmp(want, have);
    }
    free(list);
    if (!ok)
      rc = err_set(ERR_FORBIDDEN,
                   "%s: this server makes outbound requests only to hosts its operator allows, and '%s' is not "
                   "one of them (start parley with --fetch-hosts %s to allow it)",
                   param, have, have);
  }
  curl_free(scheme);
  curl_free(host);
  curl_url_cleanup(u);
  return rc;
}

typedef struct sink {
  buf b;
  uint64_t max;
  bool over;
} sink;

static size_t on_data(char *p, size_t size, size_t n, void *user) {
  sink *s = user;
  size_t len = size * n;
  if (s->b.len + len > s->max) {
    s->over = true;
    return 0;
  }
  return buf_append(&s->b, p, len) ? 0 : len;
}

int dg_fetch(const char *url, uint64_t max, uint8_t **out, size_t *len) {
  pthread_once(&g_curl_once, curl_init_once);
  *out = NULL;
  *len = 0;
  CURL *c = curl_easy_init();
  if (!c) return err_set(ERR_NOMEM, "curl");
  sink s = {.max = max};
  char errbuf[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "parley");
  CURLcode cc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  int rc = 0;
  if (s.over) rc = err_set(ERR_TOO_LARGE, "url: the audio at %.200s is larger than %llu bytes", url, (unsigned long long)max);
  else if (cc != CURLE_OK)
    rc = err_set(ERR_INVALID, "url: could not fetch %.200s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(cc));
  else if (status < 200 || status > 299)
    rc = err_set(ERR_INVALID, "url: fetching %.200s answered HTTP %ld", url, status);
  if (rc) {
    buf_free(&s.b);
    return rc;
  }
  *len = s.b.len;
  *out = (uint8_t *)buf_detach(&s.b, NULL);
  if (!*out) *out = calloc(1, 1);
  return *out ? 0 : err_set(ERR_NOMEM, "fetch");
}

static size_t discard(char *p, size_t size, size_t n, void *user) {
  (void)p;
  (void)user;
  return size * n;
}

int dg_post_json(const char *url, const char *method, const char *body) {
  pthread_once(&g_curl_once, curl_init_once);
  CURL *c = curl_easy_init();
  if (!c) return err_set(ERR_NOMEM, "curl");
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
  char errbuf[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method && !strcasecmp(method, "PUT") ? "PUT" : "POST");
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "parley");
  CURLcode cc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  if (cc != CURLE_OK) return err_set(ERR_IO, "callback %.200s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(cc));
  if (status < 200 || status > 299) return err_set(ERR_IO, "callback %.200s answered HTTP %ld", url, status);
  return 0;
}
