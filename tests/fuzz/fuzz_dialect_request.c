/*
 * fuzz_dialect_request.c - libFuzzer harness for the request parsers of the
 * OpenAI, Anthropic, LM Studio, Ollama and Deepgram dialects, driven through
 * their real handlers on an in-process server (fuzz_server.h) with a tiny
 * model loaded: those parsers answer through the request they parse, so the
 * request is their entry point. Input: the first byte picks the route, the
 * bytes up to the first '\n' are the query string, the rest is the body.
 * Properties: the server answers every request with a status line, never
 * 500 (a 500 on client input is a bug; 501, 503 and 429 are answers), and
 * stays reachable. FUZZ_SHOW_STATUS=1 prints each input's status and route
 * (to check that a new seed reaches what it is meant to).
 */
#include "fuzz.h"

#include "fuzz_server.h"

static const struct {
  const char *path, *content_type;
} ROUTES[] = {
    {"/v1/chat/completions", "application/json"},
    {"/v1/completions", "application/json"},
    {"/v1/embeddings", "application/json"},
    {"/v1/responses", "application/json"},
    {"/v1/messages", "application/json"},
    {"/v1/messages/count_tokens", "application/json"},
    {"/api/v0/chat/completions", "application/json"},
    {"/api/v0/completions", "application/json"},
    {"/api/v1/chat", "application/json"},
    {"/api/chat", "application/json"},
    {"/api/generate", "application/json"},
    {"/api/embed", "application/json"},
    {"/api/embeddings", "application/json"},
    {"/api/show", "application/json"},
    {"/deepgram/v1/read", "application/json"},
    {"/deepgram/v1/listen", "audio/wav"},
};
#define N_ROUTES (sizeof ROUTES / sizeof ROUTES[0])

FUZZ_INIT(dialect_request) { fuzz_server_start(NULL); }

FUZZ_TARGET(dialect_request) {
  if (size < 1 || size > 65536) return 0;
  size_t r = data[0] % N_ROUTES;
  const char *rest = (const char *)data + 1;
  size_t n = size - 1;
  const char *nl = memchr(rest, '\n', n);
  size_t qlen = nl ? (size_t)(nl - rest) : 0;
  const char *body = nl ? nl + 1 : rest;
  size_t blen = n - (nl ? qlen + 1 : 0);
  buf req = BUF_INIT, out = BUF_INIT;
  buf_appendf(&req, "POST %s%s", ROUTES[r].path, qlen ? "?" : "");
  /* the query as raw bytes, but no CR, LF, space or NUL: those would end
   * the request line, which is fuzz_http_front's business */
  for (size_t i = 0; i < qlen; i++) {
    char c = rest[i];
    buf_append_byte(&req, c == ' ' || c == '\r' || c == '\0' ? '+' : c);
  }
  buf_appendf(&req, " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
              ROUTES[r].content_type, blen);
  buf_append(&req, body, blen);
  int status = fuzz_server_exchange(req.data, req.len, &out);
  if (status < 0) abort(); /* the server is gone */
  if (getenv("FUZZ_SHOW_STATUS")) fprintf(stderr, "%d %s\n", status, ROUTES[r].path);
  if (status == 0 || status == 500) {
    fprintf(stderr, "fuzz_dialect_request: %s answered %d:\n%.*s\n", ROUTES[r].path, status,
            (int)(out.len < 2000 ? out.len : 2000), out.data ? out.data : "");
    abort();
  }
  buf_free(&req);
  buf_free(&out);
  return 0;
}
