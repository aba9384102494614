/*
 * loopback.h - an in-process HTTP server on 127.0.0.1 carrying one route
 * table (the real http layer and handlers), and a libcurl request against
 * it: the round-trip harness of the API unit tests that need a real store
 * behind real routes but no model (test_openai_files.c,
 * test_openai_stored.c).
 */
#ifndef PARLEY_TEST_LOOPBACK_H
#define PARLEY_TEST_LOOPBACK_H

#include <curl/curl.h>

#include "base/buf.h"
#include "http/http.h"

/* Starts a server with the API error shape and decorations, 2 threads, a
 * 64 KiB JSON limit and a 1 MiB upload limit; spool_dir is where uploads
 * are spooled. Returns 0 or the http layer's error; free with
 * http_server_free. */
int loopback_start(const http_route *routes, size_t n_routes, const char *spool_dir, http_server **out);

/* One request to path on port: json (NULL for none) is sent as an
 * application/json body, mk (NULL for none) builds a multipart body from
 * arg. Returns the status (-1 when the transfer failed); the body lands in
 * out. */
long loopback_request(int port, const char *method, const char *path, curl_mime *(*mk)(CURL *, void *), void *arg,
                      const char *json, buf *out);

#endif
