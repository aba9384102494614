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
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"
#include "http/http_int.h"

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
