/*
 * metrics.c - the HTTP layer's Prometheus counters, rendered as text
 * exposition format 0.0.4.
 *
 *   parley_http_requests_total{route,method,status}      counter
 *   parley_http_request_duration_seconds{route}          histogram
 *   parley_http_in_flight, parley_http_open_streams, parley_ws_sessions  gauges
 *
 * Label values are bounded: routes come from the route tables (or
 * "unmatched"), methods are folded to a fixed list (else "OTHER"), so a
 * hostile client cannot grow the table. One mutex; observe is O(entries).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "http/http_int.h"

static const double k_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
#define N_BUCKETS (sizeof k_buckets / sizeof k_buckets[0])

typedef struct counter_entry {
  const char *route; /* owned copy */
  const char *method; /* static */
  int status;
  uint64_t count;
} counter_entry;

typedef struct hist_entry {
  const char *route; /* owned copy */
  uint64_t buckets[N_BUCKETS]; /* non-cumulative */
  uint64_t count;
  double sum;
} hist_entry;

struct http_metrics {
  pthread_mutex_t mu;
  counter_entry *c;
  size_t n_c, cap_c;
  hist_entry *h;
  size_t n_h, cap_h;
};

int http_metrics_new(http_metrics **out) {
  http_metrics *m = calloc(1, sizeof *m);
  if (!m) return err_set(ERR_NOMEM, "http metrics");
  pthread_mutex_init(&m->mu, NULL);
  *out = m;
  return 0;
}

void http_metrics_free(http_metrics *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n_c; i++) free((char *)m->c[i].route);
  for (size_t i = 0; i < m->n_h; i++) free((char *)m->h[i].route);
  free(m->c);
  free(m->h);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static const char *fold_method(const char *m) {
  static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (m && strcmp(m, known[i]) == 0) return known[i];
  return "OTHER";
}

void http_metrics_observe(http_metrics *m, const char *route, const char *method, int status,
                          double seconds) {
  const char *fm = fold_method(method);
  if (!route) route = "unmatched";
  pthread_mutex_lock(&m->mu);
  counter_entry *ce = NULL;
  for (size_t i = 0; i < m->n_c; i++)
    if (m->c[i].status == status && m->c[i].method == fm && strcmp(m->c[i].route, route) == 0) ce = &m->c[i];
  if (!ce && m->n_c == m->cap_c) {
    size_t ncap = m->cap_c ? m->cap_c * 2 : 32;
    counter_entry *nc = realloc(m->c, ncap * sizeof *nc);
    if (nc) m->c = nc, m->cap_c = ncap;
  }
  if (!ce && m->n_c < m->cap_c) {
    char *r = strdup(route);
    if (r) {
      ce = &m->c[m->n_c++];
      *ce = (counter_entry){r, fm, status, 0};
    }
  }
  if (ce) ce->count++;
  hist_entry *he = NULL;
  for (size_t i = 0; i < m->n_h; i++)
    if (strcmp(m->h[i].route, route) == 0) he = &m->h[i];
  if (!he && m->n_h == m->cap_h) {
    size_t ncap = m->cap_h ? m->cap_h * 2 : 16;
    hist_entry *nh = realloc(m->h, ncap * sizeof *nh);
    if (nh) m->h = nh, m->cap_h = ncap;
  }
  if (!he && m->n_h < m->cap_h) {
    char *r = strdup(route);
    if (r) {
      he = &m->h[m->n_h++];
      memset(he, 0, sizeof *he);
      he->route = r;
    }
  }
  if (he) {
    for (size_t b = 0; b < N_BUCKETS; b++)
      if (seconds <= k_buckets[b]) {
        he->buckets[b]++;
        break;
      }
    he->count++;
    he->sum += seconds;
  }
  pthread_mutex_unlock(&m->mu);
}

/* Label values: escape backslash, quote and newline. */
static int append_label(buf *out, const char *v) {
  int rc = 0;
  for (const char *p = v; *p && !rc; p++) {
    if (*p == '\\') rc = buf_append_str(out, "\\\\");
    else if (*p == '"') rc = buf_append_str(out, "\\\"");
    else if (*p == '\n') rc = buf_append_str(out, "\\n");
    else rc = buf_append_byte(out, *p);
  }
  return rc;
}

int http_metrics_render(http_metrics *m, buf *out, long in_flight, size_t open_streams,
                        size_t ws_sessions) {
  int rc = 0;
  pthread_mutex_lock(&m->mu);
  rc |= buf_append_str(out, "# HELP parley_http_requests_total HTTP requests answered.\n"
                            "# TYPE parley_http_requests_total counter\n");
  for (size_t i = 0; i < m->n_c && !rc; i++) {
    rc |= buf_append_str(out, "parley_http_requests_total{route=\"");
    rc |= append_label(out, m->c[i].route);
    rc |= buf_appendf(out, "\",method=\"%s\",status=\"%d\"} %llu\n", m->c[i].method, m->c[i].status,
                      (unsigned long long)m->c[i].count);
  }
  rc |= buf_append_str(out, "# HELP parley_http_request_duration_seconds Time from request line to last byte.\n"
                            "# TYPE parley_http_request_duration_seconds histogram\n");
  for (size_t i = 0; i < m->n_h && !rc; i++) {
    uint64_t cum = 0;
    for (size_t b = 0; b < N_BUCKETS; b++) {
      cum += m->h[i].buckets[b];
      rc |= buf_append_str(out, "parley_http_request_duration_seconds_bucket{route=\"");
      rc |= append_label(out, m->h[i].route);
      rc |= buf_appendf(out, "\",le=\"%g\"} %llu\n", k_buckets[b], (unsigned long long)cum);
    }
    rc |= buf_append_str(out, "parley_http_request_duration_seconds_bucket{route=\"");
    rc |= append_label(out, m->h[i].route);
    rc |= buf_appendf(out, "\",le=\"+Inf\"} %llu\n", (unsigned long long)m->h[i].count);
    rc |= buf_append_str(out, "parley_http_request_duration_seconds_sum{route=\"");
    rc |= append_label(out, m->h[i].route);
    rc |= buf_appendf(out, "\"} %.6f\n", m->h[i].sum);
    rc |= buf_append_str(out, "parley_http_request_duration_seconds_count{route=\"");
    rc |= append_label(out, m->h[i].route);
    rc |= buf_appendf(out, "\"} %llu\n", (unsigned long long)m->h[i].count);
  }
  pthread_mutex_unlock(&m->mu);
  rc |= buf_appendf(out,
                    "# HELP parley_http_in_flight Requests being handled now.\n"
                    "# TYPE parley_http_in_flight gauge\nparley_http_in_flight %ld\n"
                    "# HELP parley_http_open_streams SSE/NDJSON/raw streams open now.\n"
                    "# TYPE parley_http_open_streams gauge\nparley_http_open_streams %zu\n"
                    "# HELP parley_ws_sessions WebSocket connections open now.\n"
                    "# TYPE parley_ws_sessions gauge\nparley_ws_sessions %zu\n",
                    in_flight, open_streams, ws_sessions);
  return rc ? err_set(ERR_NOMEM, "metrics text") : 0;
}
