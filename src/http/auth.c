/*
 * auth.c - API key checks for every credential form the dialects' SDKs send.
 *
 * Accepted, when keys are configured:
 *   Authorization: Bearer <key> | Token <key>   (scheme case-insensitive)
 *   x-api-key: <key>        (Anthropic)
 *   api-key: <key>          (Azure-style OpenAI clients)
 *   Sec-WebSocket-Protocol: openai-insecure-api-key.<key>   (browsers)
 *   Sec-WebSocket-Protocol: token, <key>  |  bearer, <key>  (Deepgram SDKs)
 * Every candidate is compared against every key with ct_equal and the
 * results are OR-ed without an early exit, so timing does not tell which
 * key (or which prefix) was close. Pure: no I/O, no logging of values.
 *
 * Also the Host-header guard of a loopback listener (host_header_allowed):
 * a web page on evil.example.com whose name is re-pointed at 127.0.0.1
 * (DNS rebinding) reaches a local server with `Host: evil.example.com`;
 * Ollama answers such requests 403 (../shared/specs/ollama.md 0.4), and so
 * does parley, on every route.
 */
#include <arpa/inet.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"
#include "http/http_int.h"

const char AUTH_FAILED_MESSAGE[] =
    "Invalid or missing API key. Send it as 'Authorization: Bearer <key>' or 'Authorization: Token <key>', in the "
    "x-api-key or api-key header, or (WebSocket) as the subprotocol 'openai-insecure-api-key.<key>' or the pair "
    "'token, <key>'.";

static bool match_any(const char *const *keys, size_t n_keys, const char *cand, size_t len) {
  bool ok = false;
  for (size_t i = 0; i < n_keys; i++) ok |= ct_equal(keys[i], strlen(keys[i]), cand, len);
  return ok;
}

static const char *skip_ws(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

static size_t trimmed_len(const char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  return n;
}

bool auth_check(const char *const *keys, size_t n_keys, const auth_input *in) {
  if (n_keys == 0) return true;
  bool ok = false;
  if (in->authorization) {
    const char *a = skip_ws(in->authorization);
    const char *rest = NULL;
    if (strncasecmp(a, "bearer ", 7) == 0) rest = a + 7;
    else if (strncasecmp(a, "token ", 6) == 0) rest = a + 6;
    if (rest) {
      rest = skip_ws(rest);
      ok |= match_any(keys, n_keys, rest, trimmed_len(rest));
    }
  }
  if (in->x_api_key) {
    const char *v = skip_ws(in->x_api_key);
    ok |= match_any(keys, n_keys, v, trimmed_len(v));
  }
  if (in->api_key) {
    const char *v = skip_ws(in->api_key);
    ok |= match_any(keys, n_keys, v, trimmed_len(v));
  }
  static const char ws_prefix[] = "openai-insecure-api-key.";
  for (size_t i = 0; i < in->n_ws_protocols; i++) {
    const char *p = in->ws_protocols[i];
    if (strncmp(p, ws_prefix, sizeof ws_prefix - 1) == 0)
      ok |= match_any(keys, n_keys, p + sizeof ws_prefix - 1, strlen(p + sizeof ws_prefix - 1));
    if (i + 1 < in->n_ws_protocols && (strcasecmp(p, "token") == 0 || strcasecmp(p, "bearer") == 0))
      ok |= match_any(keys, n_keys, in->ws_protocols[i + 1], strlen(in->ws_protocols[i + 1]));
  }
  return ok;
}

size_t auth_split_protocols(const char *value, char **scratch, const char **out, size_t max) {
  *scratch = NULL;
  if (!value) return 0;
  char *s = str_dup(value);
  if (!s) return 0;
  *scratch = s;
  size_t n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(s, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ' || *tok == '\t') tok++;
    size_t l = strlen(tok);
    while (l && (tok[l - 1] == ' ' || tok[l - 1] == '\t')) tok[--l] = '\0';
    if (l) out[n++] = tok;
  }
  return n;
}

/* True when the address text is loopback, private, link-local or
 * unspecified (IPv4 127/8, 10/8, 172.16/12, 192.168/16, 169.254/16,
 * 0.0.0.0; IPv6 ::1, ::, fc00::/7, fe80::/10, and IPv4-mapped forms of the
 * IPv4 ones). False when it is not an address at all. */
static bool ip_is_local(const char *text) {
  unsigned char a[16];
  if (inet_pton(AF_INET, text, a) == 1) {
    return a[0] == 127 || a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) || (a[0] == 192 && a[1] == 168) ||
           (a[0] == 169 && a[1] == 254) || (a[0] == 0 && a[1] == 0 && a[2] == 0 && a[3] == 0);
  }
  if (inet_pton(AF_INET6, text, a) != 1) return false;
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (memcmp(a, mapped, 12) == 0) {
    char v4[INET_ADDRSTRLEN];
    snprintf(v4, sizeof v4, "%u.%u.%u.%u", a[12], a[13], a[14], a[15]);
    return ip_is_local(v4);
  }
  bool zero15 = true;
  for (int i = 0; i < 15; i++) zero15 &= a[i] == 0;
  if (zero15 && (a[15] == 0 || a[15] == 1)) return true; /* :: and ::1 */
  return (a[0] & 0xfe) == 0xfc || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80);
}

static bool ends_with_ci(const char *s, size_t n, const char *suffix) {
  size_t k = strlen(suffix);
  return n >= k && strncasecmp(s + n - k, suffix, k) == 0;
}

bool host_header_allowed(const char *host, const char *hostname) {
  if (!host) return true; /* HTTP/1.0 without Host: not a browser */
  size_t n = strlen(host);
  if (n == 0) return true;
  if (n > 255) return false;
  char name[256];
  if (host[0] == '[') { /* [v6]:port */
    const char *end = strchr(host, ']');
    if (!end || (end[1] != '\0' && end[1] != ':')) return false;
    n = (size_t)(end - host - 1);
    memcpy(name, host + 1, n);
  } else {
    const char *colon = strchr(host, ':');
    if (colon && !strchr(colon + 1, ':')) n = (size_t)(colon - host); /* name:port */
    memcpy(name, host, n);                                            /* else a bare v6 address, or no port */
  }
  name[n] = '\0';
  if (n && name[n - 1] == '.') name[--n] = '\0'; /* "localhost." */
  if (ip_is_local(name)) return true;
  if (strcasecmp(name, "localhost") == 0) return true;
  if (hostname && *hostname && strcasecmp(name, hostname) == 0) return true;
  return ends_with_ci(name, n, ".localhost") || ends_with_ci(name, n, ".local") || ends_with_ci(name, n, ".internal");
}

/* Ollama's default: the browser origins of the same machine and of desktop
 * app shells. Ours are the same idea, written from its documented list. */
static const char *const k_local_schemes[] = {"app://", "file://", "tauri://", "vscode-webview://", "vscode-file://"};

static bool origin_is_local(const char *o) {
  for (size_t i = 0; i < ARRAY_LEN(k_local_schemes); i++)
    if (strncasecmp(o, k_local_schemes[i], strlen(k_local_schemes[i])) == 0) return true;
  const char *h;
  if (strncasecmp(o, "http://", 7) == 0) h = o + 7;
  else if (strncasecmp(o, "https://", 8) == 0) h = o + 8;
  else return false;
  char name[256];
  size_t n;
  const char *rest;
  if (h[0] == '[') {
    const char *end = strchr(h, ']');
    if (!end) return false;
    n = (size_t)(end - h - 1);
    rest = end + 1;
    h++;
  } else {
    n = strcspn(h, ":/");
    rest = h + n;
  }
  if (n == 0 || n >= sizeof name) return false;
  if (*rest == ':') {
    rest++;
    size_t digits = strspn(rest, "0123456789");
    if (digits == 0 || digits > 5) return false;
    rest += digits;
  }
  if (*rest) return false; /* an Origin is scheme://host[:port], nothing after */
  memcpy(name, h, n);
  name[n] = '\0';
  if (strcasecmp(name, "localhost") == 0 || ends_with_ci(name, n, ".localhost")) return true;
  unsigned char a[16];
  if (inet_pton(AF_INET, name, a) == 1) return a[0] == 127 || (a[0] | a[1] | a[2] | a[3]) == 0;
  return strcmp(name, "::1") == 0;
}

bool origin_allowed(const char *origin, const char *extra) {
  if (!origin || !*origin) return true;
  if (strpbrk(origin, "\r\n") || strlen(origin) > 1024) return false;
  if (origin_is_local(origin)) return true;
  if (!extra || !*extra) return false;
  char *list = str_dup(extra), *save = NULL;
  bool ok = false;
  for (char *e = list ? strtok_r(list, ", ", &save) : NULL; e && !ok; e = strtok_r(NULL, ", ", &save)) {
    size_t l = strlen(e);
    while (l > 1 && e[l - 1] == '/') e[--l] = '\0'; /* "https://a.example/" names the same origin */
    if (strcmp(e, "*") == 0) ok = true;
    else if (strchr(e, '*')) ok = fnmatch(e, origin, FNM_CASEFOLD) == 0;
    else ok = strcasecmp(e, origin) == 0;
  }
  free(list);
  return ok;
}
