/*
 * fetch.c - the only outbound HTTP parley's Deepgram adapter makes: reading
 * the audio of a {"url": ...} body and POSTing (or PUTting) a result to a
 * `callback` URL, with libcurl.
 *
 * Both go only to hosts the operator lists in --fetch-hosts
 * (PARLEY_FETCH_HOSTS); with the default (none) every such request is
 * refused with a 400 that names the option. "*" means any public address:
 * loopback, private, link-local (cloud metadata at 169.254.169.254),
 * shared, multicast and reserved ranges are reached only when the host is
 * named in the list itself. The check is made on the address curl actually
 * connects to (CURLOPT_OPENSOCKETFUNCTION), so a public name that resolves
 * to a private address is refused too. Only http and https
 * are allowed, redirects are not followed (a redirect could leave the
 * allowed hosts), a fetched body is bounded by --max-upload, and both calls
 * time out (60 s fetch, 30 s callback).
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
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

/* True for an address anyone on the internet could also reach: not
 * 0/8, 10/8, 100.64/10 (shared), 127/8, 169.254/16 (link-local, cloud
 * metadata), 172.16/12, 192.0.0/24, 192.168/16, 198.18/15 (benchmarking),
 * 224/3 (multicast, reserved, broadcast); for IPv6 not ::, ::1, fc00::/7,
 * fe80::/10, ff00::/8, and IPv4-mapped / NAT64 forms by their IPv4 rule. */
static bool v4_public(const uint8_t a[4]) {
  return !(a[0] == 0 || a[0] == 10 || (a[0] == 100 && (a[1] & 0xc0) == 64) || a[0] == 127 ||
           (a[0] == 169 && a[1] == 254) || (a[0] == 172 && (a[1] & 0xf0) == 16) ||
           (a[0] == 192 && a[1] == 0 && a[2] == 0) || (a[0] == 192 && a[1] == 168) ||
           (a[0] == 198 && (a[1] & 0xfe) == 18) || a[0] >= 224);
}

static bool addr_public(int family, const void *addr) {
  if (family == AF_INET) return v4_public(addr);
  if (family != AF_INET6) return false;
  const uint8_t *a = addr;
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (!memcmp(a, mapped, 12) || !memcmp(a, nat64, 12)) return v4_public(a + 12);
  bool zero = true;
  for (int i = 0; i < 15; i++) zero &= a[i] == 0;
  if (zero) return false; /* :: and ::1 (and the deprecated IPv4-compatible forms) */
  return !((a[0] & 0xfe) == 0xfc || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) || a[0] == 0xff);
}

/* True when host is named in allow itself (not only matched by "*"). */
static bool host_named(const char *allow, const char *have, bool *star) {
  char want[256];
  bool named = false;
  *star = false;
  char *list = str_dup(allow ? allow : "");
  char *save = NULL;
  for (char *h = list ? strtok_r(list, ", ", &save) : NULL; h && !named; h = strtok_r(NULL, ", ", &save)) {
    bare_host(h, want, sizeof want);
    if (!strcmp(want, "*")) *star = true;
    else named = !strcasecmp(want, have);
  }
  free(list);
  return named;
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
    char have[256];
    bare_host(host, have, sizeof have);
    bool star = false, ok = host_named(allow, have, &star);
    uint8_t ip[16];
    if (!ok && star) {
      bool v4 = inet_pton(AF_INET, have, ip) == 1, v6 = !v4 && inet_pton(AF_INET6, have, ip) == 1;
      ok = !(v4 || v6) || addr_public(v4 ? AF_INET : AF_INET6, ip);
      if (!ok)
        rc = err_set(ERR_FORBIDDEN,
                     "%s: '%s' is a loopback, private or reserved address, which '*' in --fetch-hosts does not "
                     "cover (name it: --fetch-hosts %s)",
                     param, have, have);
    } else if (!ok)
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

/* What the connect-time check needs: a host allowed only through "*" may
 * connect to public addresses only. */
typedef struct fetch_guard {
  bool public_only;
} fetch_guard;

static curl_socket_t guarded_socket(void *user, curlsocktype purpose, struct curl_sockaddr *a) {
  fetch_guard *g = user;
  (void)purpose;
  if (g->public_only) {
    const void *ip = NULL;
    if (a->family == AF_INET) ip = &((const struct sockaddr_in *)(const void *)&a->addr)->sin_addr;
    else if (a->family == AF_INET6) ip = &((const struct sockaddr_in6 *)(const void *)&a->addr)->sin6_addr;
    if (!ip || !addr_public(a->family, ip)) return CURL_SOCKET_BAD;
  }
  return socket(a->family, a->socktype, a->protocol);
}

/* Sets the connect-time guard of url's host on c. */
static void guard_set(CURL *c, fetch_guard *g, const char *allow, const char *url) {
  g->public_only = true;
  CURLU *u = curl_url();
  char *host = NULL;
  if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK && curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
    char have[256];
    bool star;
    bare_host(host, have, sizeof have);
    g->public_only = !host_named(allow, have, &star);
  }
  curl_free(host);
  curl_url_cleanup(u);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, guarded_socket);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, g);
}

static const char *refused_note(CURLcode cc, const fetch_guard *g) {
  return cc == CURLE_COULDNT_CONNECT && g->public_only
             ? " (a host allowed only by '*' in --fetch-hosts may not reach loopback, private or reserved addresses)"
             : "";
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

int dg_fetch(const char *allow, const char *url, uint64_t max, uint8_t **out, size_t *len) {
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
  fetch_guard g;
  guard_set(c, &g, allow, url);
  CURLcode cc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  int rc = 0;
  if (s.over) rc = err_set(ERR_TOO_LARGE, "url: the audio at %.200s is larger than %llu bytes", url, (unsigned long long)max);
  else if (cc != CURLE_OK)
    rc = err_set(ERR_INVALID, "url: could not fetch %.200s: %s%s", url, errbuf[0] ? errbuf : curl_easy_strerror(cc),
                 refused_note(cc, &g));
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

int dg_post_json(const char *allow, const char *url, const char *method, const char *body) {
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
  fetch_guard g;
  guard_set(c, &g, allow, url);
  CURLcode cc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  if (cc != CURLE_OK)
    return err_set(ERR_IO, "callback %.200s: %s%s", url, errbuf[0] ? errbuf : curl_easy_strerror(cc), refused_note(cc, &g));
  if (status < 200 || status > 299) return err_set(ERR_IO, "callback %.200s answered HTTP %ld", url, status);
  return 0;
}
