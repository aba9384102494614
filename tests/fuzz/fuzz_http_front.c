/*
 * fuzz_http_front.c - libFuzzer harness for the HTTP front door: the input
 * is the raw bytes of a connection to an in-process server (fuzz_server.h)
 * that requires the key "sk-fuzz" and guards the loopback Host, so request
 * lines, header folding and encodings, Content-Length and chunked framing,
 * Expect, the key check and the Host guard all meet hostile bytes, before
 * and after a route is matched. Property: the server answers or closes,
 * never a 500, and stays reachable for the next connection.
 */
#include "fuzz.h"

#include "fuzz_server.h"

FUZZ_INIT(http_front) { fuzz_server_start("sk-fuzz"); }

FUZZ_TARGET(http_front) {
  if (size > 65536) return 0;
  buf out = BUF_INIT;
  int status = fuzz_server_exchange(data, size, &out);
  if (status < 0) abort();
  if (status == 500) {
    fprintf(stderr, "fuzz_http_front: answered 500:\n%.*s\n", (int)(out.len < 2000 ? out.len : 2000), out.data);
    abort();
  }
  buf_free(&out);
  return 0;
}
