/*
 * http_client.c - see http_client.h.
 */
#include "http_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>


static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
  buf_append(&((resp *)ud)->body, p, sz * n);
  return sz * n;
}
static size_t on_header(char *p, size_t sz, size_t n, void *ud) {
  buf_append(&((resp *)ud)->headers, p, sz * n);
  return sz * n;
}

void resp_free(resp *r) {
  buf_free(&r->body);
  buf_free(&r->headers);
}

/* Value of header name in r (case-insensitive), copied to out, or NULL. */
const char *resp_header(const resp *r, const char *name, char *out, size_t cap) {
  if (!r->headers.data) return NULL;
  size_t nl = strlen(name);
  const char *p = r->headers.data;
  while (p && *p) {
    if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
      const char *v = p + nl + 1;
      while (*v == ' ') v++;
      size_t l = strcspn(v, "\r\n");
      if (l >= cap) l = cap - 1;
      memcpy(out, v, l);
      out[l] = '\0';
      return out;
    }
    p = strchr(p, '\n');
    if (p) p++;
  }
  return NULL;
}

int do_req(http_server *srv, const char *method, const char *path, const char *const *hdrs, const char *body,
                  long body_len, resp *r) {
  memset(r, 0, sizeof *r);
  CURL *c = curl_easy_init();
  if (!c) return -1;
  char url[512];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", http_server_port(srv), path);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
  if (strcmp(method, "HEAD") == 0) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  else if (strcmp(method, "GET") != 0) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  if (body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, body_len);
  }
  struct curl_slist *sl = NULL;
  for (size_t i = 0; hdrs && hdrs[i]; i++) sl = curl_slist_append(sl, hdrs[i]);
  sl = curl_slist_append(sl, "Expect:");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, sl);
  CURLcode cc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
  curl_slist_free_all(sl);
  curl_easy_cleanup(c);
  return cc == CURLE_OK ? 0 : -(int)cc;
}

/* Sends raw bytes, reads until the peer closes or timeout_ms; out gets the text. */
int raw_req(http_server *srv, const char *data, size_t len, buf *out, int timeout_ms) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(srv))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (len && send(fd, data, len, MSG_NOSIGNAL) < 0) {
    close(fd);
    return -1;
  }
  char tmp[4096];
  for (;;) {
    ssize_t n = recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) break;
    buf_append(out, tmp, (size_t)n);
  }
  close(fd);
  return 0;
}

int raw_status(const buf *b) {
  if (!b->data || strncmp(b->data, "HTTP/1.", 7) != 0) return 0;
  return atoi(b->data + 9);
}
