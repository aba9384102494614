/*
 * http_client.h - the client side of the HTTP layer's loopback tests
 * (test_http_server.c, test_http_edges.c): a libcurl request that keeps the
 * status, body and raw header block, and a raw socket exchange for requests
 * curl would tidy up.
 */
#ifndef PARLEY_TEST_HTTP_CLIENT_H
#define PARLEY_TEST_HTTP_CLIENT_H

#include "base/buf.h"
#include "http/http.h"

typedef struct resp {
  long status;
  buf body;
  buf headers; /* raw header block(s), lowercase names kept as sent */
} resp;

void resp_free(resp *r);
/* Value of header name in r (case-insensitive), copied to out, or NULL. */
const char *resp_header(const resp *r, const char *name, char *out, size_t cap);
/* One request with curl (5 s timeout); hdrs is NULL-terminated. 0 or -CURLcode. */
int do_req(http_server *srv, const char *method, const char *path, const char *const *hdrs, const char *body,
           long body_len, resp *r);
/* Sends raw bytes, reads until the peer closes or timeout_ms; out gets the text. */
int raw_req(http_server *srv, const char *data, size_t len, buf *out, int timeout_ms);
/* The status of a raw response, 0 when there is none. */
int raw_status(const buf *b);

#endif
