/*
 * fuzz_auth.c - libFuzzer harness for the front door's header parsers that
 * run before any route: the API-key check (Authorization, x-api-key,
 * api-key, WebSocket subprotocol credentials), the DNS-rebinding Host
 * guard, the Sec-WebSocket-Protocol splitter and the multipart boundary
 * reader. The input is split on '\n' into up to five header values.
 * Properties: a header carrying the exact key passes, a different key never
 * does; the splitter returns trimmed, non-empty pieces.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "http/http_int.h"
#include "http/multipart.h"

static const char *const KEYS[] = {"sk-local-1", "k2"};

FUZZ_TARGET(auth) {
  if (size > 8192) return 0;
  char *s = malloc(size + 1);
  if (!s) abort();
  memcpy(s, data, size);
  s[size] = 0;
  const char *part[5] = {"", "", "", "", ""};
  char *p = s;
  for (int i = 0; i < 5 && p; i++) {
    part[i] = p;
    p = strchr(p, '\n');
    if (p) *p++ = 0;
  }
  /* subprotocols: split, then offered as WebSocket credentials */
  char *scratch = NULL;
  const char *protos[16];
  size_t n = auth_split_protocols(part[3], &scratch, protos, 16);
  if (n > 16) abort();
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(protos[i]);
    if (!len || protos[i][0] == ' ' || protos[i][len - 1] == ' ' || strchr(protos[i], ',')) abort();
  }
  auth_input in = {.authorization = part[0], .x_api_key = part[1], .api_key = part[2], .ws_protocols = protos,
                   .n_ws_protocols = n};
  bool ok = auth_check(KEYS, 2, &in);
  bool has_exact = strcmp(part[1], KEYS[0]) == 0 || strcmp(part[1], KEYS[1]) == 0 || strcmp(part[2], KEYS[0]) == 0 ||
                   strcmp(part[2], KEYS[1]) == 0;
  if (has_exact && !ok) abort();
  /* no key configured: nothing passes on a key that is not there */
  auth_input bearer = {.authorization = "Bearer sk-local-1"};
  if (!auth_check(KEYS, 2, &bearer)) abort();
  bearer.authorization = part[0];
  if (strstr(part[0], "sk-local-1") == NULL && strstr(part[0], "k2") == NULL && auth_check(KEYS, 2, &bearer)) abort();
  free(scratch);
  (void)host_header_allowed(part[4], "myhost");
  (void)host_header_allowed(part[4], NULL);
  char boundary[72];
  if (mp_boundary_from_content_type(part[0], boundary, sizeof boundary) == 0 && strlen(boundary) >= sizeof boundary)
    abort();
  free(s);
  return 0;
}
