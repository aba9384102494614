/*
 * url.c - percent decoding and query-string parsing.
 *
 * Pure functions with no I/O, so the query parser can be fed to a fuzz
 * harness directly (url_query_parse). Decoding rejects what a handler should
 * never see: a malformed escape ("%4", "%g1") and an encoded NUL ("%00"),
 * both reported as ERR_PARSE naming the offending piece. Bytes are otherwise
 * passed through untouched (invalid UTF-8 is the adapter's business).
 *
 * Query keys lose a trailing "[]" so that "include[]=a&include[]=b" is found
 * under "include"; the order of values is the order in the URL.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "http/http_int.h"

static int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int url_decode(const char *in, size_t n, bool plus_space, char **out, size_t *out_len) {
  *out = NULL;
  if (out_len) *out_len = 0;
  char *o = malloc(n + 1); /* decoding never grows */
  if (!o) return err_set(ERR_NOMEM, "url_decode: %zu bytes", n + 1);
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    char c = in[i];
    if (c == '\0') {
      free(o);
      return err_set(ERR_PARSE, "NUL byte in URL");
    }
    if (c == '%') {
      int hi = i + 1 < n ? hex_val(in[i + 1]) : -1;
      int lo = i + 2 < n ? hex_val(in[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        free(o);
        return err_set(ERR_PARSE, "invalid percent escape at byte %zu of URL piece", i);
      }
      char v = (char)(hi * 16 + lo);
      if (v == '\0') {
        free(o);
        return err_set(ERR_PARSE, "encoded NUL (%%00) in URL");
      }
      o[j++] = v;
      i += 2;
    } else if (c == '+' && plus_space) {
      o[j++] = ' ';
    } else {
      o[j++] = c;
    }
  }
  o[j] = '\0';
  *out = o;
  if (out_len) *out_len = j;
  return 0;
}

void url_query_free(url_query *q) {
  for (size_t i = 0; i < q->n_kv; i++) {
    free(q->kv[i].key);
    free(q->kv[i].val);
  }
  free(q->kv);
  q->kv = NULL;
  q->n_kv = 0;
}

int url_query_parse(const char *qs, size_t len, url_query *q) {
  q->kv = NULL;
  q->n_kv = 0;
  size_t cap = 0;
  size_t i = 0;
  while (i < len) {
    size_t start = i;
    while (i < len && qs[i] != '&' && qs[i] != ';') i++;
    size_t end = i;
    if (i < len) i++; /* skip the separator */
    if (end == start) continue;
    size_t eq = start;
    while (eq < end && qs[eq] != '=') eq++;
    if (q->n_kv >= URL_QUERY_MAX_PARAMS) {
      url_query_free(q);
      return err_set(ERR_TOO_LARGE, "query string has more than %d parameters", URL_QUERY_MAX_PARAMS);
    }
    if (q->n_kv == cap) {
      size_t ncap = cap ? cap * 2 : 8;
      url_kv *nk = realloc(q->kv, ncap * sizeof *nk);
      if (!nk) {
        url_query_free(q);
        return err_set(ERR_NOMEM, "query string: %zu parameters", ncap);
      }
      q->kv = nk;
      cap = ncap;
    }
    char *key = NULL, *val = NULL;
    size_t klen = 0;
    int rc = url_decode(qs + start, eq - start, true, &key, &klen);
    if (rc == 0) rc = url_decode(qs + (eq < end ? eq + 1 : end), eq < end ? end - eq - 1 : 0, true, &val, NULL);
    if (rc != 0) {
      free(key);
      url_query_free(q);
      return err_set(rc, "query parameter %zu: %s", q->n_kv + 1, err_detail());
    }
    if (klen >= 2 && key[klen - 2] == '[' && key[klen - 1] == ']') key[klen - 2] = '\0';
    q->kv[q->n_kv].key = key;
    q->kv[q->n_kv].val = val;
    q->n_kv++;
  }
  return 0;
}

/* Keys are stored without a trailing "[]"; a name asked for with it matches too. */
static bool key_is(const char *key, const char *name) {
  size_t nl = strlen(name);
  if (nl >= 2 && name[nl - 2] == '[' && name[nl - 1] == ']') nl -= 2;
  return strncmp(key, name, nl) == 0 && key[nl] == '\0';
}

const char *url_query_get(const url_query *q, const char *name) {
  for (size_t i = 0; i < q->n_kv; i++)
    if (key_is(q->kv[i].key, name)) return q->kv[i].val;
  return NULL;
}

size_t url_query_get_all(const url_query *q, const char *name, const char **out, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < q->n_kv; i++) {
    if (!key_is(q->kv[i].key, name)) continue;
    if (n < max && out) out[n] = q->kv[i].val;
    n++;
  }
  return n < max ? n : max;
}
