/*
 * pull_http.c - the network side of pulling, over libcurl: small documents
 * (manifests, file listings) into memory, and model files into a .partial
 * file that is resumed with an HTTP Range request and checked (size,
 * sha256) before anyone renames it into place.
 *
 * Invariants:
 * - The .partial is held with flock(LOCK_EX) for the whole transfer, so two
 *   processes (a server and a CLI sharing a models dir) never write one file.
 * - The sha256 covers exactly the bytes in the file: when resuming, the
 *   existing bytes are hashed first; when the server ignores the Range and
 *   answers 200, the file is truncated and the hash restarted.
 * - A digest mismatch removes the .partial (resuming it could never give
 *   the right bytes); every other failure keeps it for the next attempt.
 * - Error bodies (4xx/5xx) never reach the file (CURLOPT_FAILONERROR).
 * SHA-256 comes from GnuTLS (already linked through libmicrohttpd).
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"
#include "model/pull.h"

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static void hex_of(const unsigned char *d, size_t n, char *out) {
  static const char hx[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hx[d[i] >> 4];
    out[2 * i + 1] = hx[d[i] & 15];
  }
  out[2 * n] = 0;
}

/* Feeds fd's bytes [0, upto) into h. */
static int hash_fd(gnutls_hash_hd_t h, int fd, int64_t upto, const char *path) {
  static __thread unsigned char chunk[1 << 16];
  int64_t off = 0;
  while (off < upto) {
    size_t want = (size_t)(upto - off < (int64_t)sizeof chunk ? upto - off : (int64_t)sizeof chunk);
    ssize_t r = pread(fd, chunk, want, off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return err_set(ERR_IO, "reading %s: %s", path, r < 0 ? strerror(errno) : "unexpected end of file");
    gnutls_hash(h, chunk, (size_t)r);
    off += r;
  }
  return 0;
}

int pull_sha256_file(const char *path, char *hex, size_t cap) {
  if (cap < 65) return err_set(ERR_TOO_LARGE, "sha256: output buffer too small");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err_set(errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "opening %s: %s", path, strerror(errno));
  struct stat st;
  gnutls_hash_hd_t h;
  int rc = fstat(fd, &st) ? err_set(ERR_IO, "stat %s: %s", path, strerror(errno)) : 0;
  if (!rc && gnutls_hash_init(&h, GNUTLS_DIG_SHA256) < 0) rc = err_set(ERR_INTERNAL, "sha256: cannot start a hash");
  if (!rc) {
    rc = hash_fd(h, fd, st.st_size, path);
    unsigned char d[32];
    gnutls_hash_deinit(h, d);
    if (!rc) hex_of(d, 32, hex);
  }
  close(fd);
  return rc;
}

/* ---- small documents ----------------------------------------------------------- */

typedef struct mem_sink {
  char *data;
  size_t len, max;
  bool too_large;
} mem_sink;

static size_t mem_write(char *p, size_t size, size_t nmemb, void *ud) {
  mem_sink *m = ud;
  size_t n = size * nmemb;
  if (m->len + n > m->max) {
    m->too_large = true;
    return 0;
  }
  char *nd = realloc(m->data, m->len + n + 1);
  if (!nd) return 0;
  m->data = nd;
  memcpy(m->data + m->len, p, n);
  m->len += n;
  m->data[m->len] = 0;
  return n;
}

static struct curl_slist *base_headers(const char *accept, const char *bearer) {
  struct curl_slist *h = NULL;
  char line[1200];
  if (accept) {
    snprintf(line, sizeof line, "Accept: %s", accept);
    h = curl_slist_append(h, line);
  }
  if (bearer && *bearer) {
    snprintf(line, sizeof line, "Authorization: Bearer %.1100s", bearer);
    h = curl_slist_append(h, line);
  }
  h = curl_slist_append(h, "User-Agent: parley");
  return h;
}

static void common_opts(CURL *c, const char *url) {
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  /* A stalled transfer (no byte for a minute) fails instead of hanging. */
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
  curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
}

/* Maps a finished transfer to an error naming what and where. */
static int curl_error(CURL *c, CURLcode cc, const char *what, const char *url) {
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (cc == CURLE_HTTP_RETURNED_ERROR) {
    int code = status == 404 ? ERR_NOT_FOUND
               : status == 401 || status == 403 ? ERR_AUTH
               : status >= 500 ? ERR_UNAVAILABLE
                               : ERR_INVALID;
    return err_set(code, "%s: the server answered HTTP %ld for %s%s", what, status, url,
                   status == 404 ? " (no such model, tag or file)" : "");
  }
  if (cc == CURLE_ABORTED_BY_CALLBACK) return err_set(ERR_CANCELLED, "%s: cancelled", what);
  if (cc == CURLE_OPERATION_TIMEDOUT) return err_set(ERR_TIMEOUT, "%s: timed out (%s) for %s", what, curl_easy_strerror(cc), url);
  return err_set(ERR_UNAVAILABLE, "%s: %s for %s", what, curl_easy_strerror(cc), url);
}

typedef struct fetch_cancel {
  bool (*cancelled)(void *ctx);
  void *ctx;
} fetch_cancel;

static int fetch_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
  (void)a, (void)b, (void)c, (void)d;
  fetch_cancel *fc = ud;
  return fc->cancelled(fc->ctx) ? 1 : 0;
}

int pull_fetch(const char *url, const char *accept, const char *bearer, size_t max, char **out, size_t *len,
               bool (*cancelled)(void *ctx), void *ctx) {
  pthread_once(&g_curl_once, curl_init_once);
  *out = NULL;
  if (len) *len = 0;
  CURL *c = curl_easy_init();
  if (!c) return err_set(ERR_NOMEM, "cannot start an HTTP transfer");
  mem_sink m = {.max = max};
  struct curl_slist *h = base_headers(accept, bearer);
  common_opts(c, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mem_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &m);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
  fetch_cancel fc = {cancelled, ctx};
  if (cancelled) {
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, fetch_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &fc);
  }
  CURLcode cc = curl_easy_perform(c);
  int rc = 0;
  if (m.too_large) rc = err_set(ERR_TOO_LARGE, "%s: answer larger than %zu bytes", url, max);
  else if (cc != CURLE_OK) rc = curl_error(c, cc, "fetching", url);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  if (rc) {
    free(m.data);
    return rc;
  }
  if (!m.data && !(m.data = calloc(1, 1))) return ERR_NOMEM;
  *out = m.data;
  if (len) *len = m.len;
  return 0;
}

/* ---- model files ------------------------------------------------------------ */

typedef struct file_sink {
  pull_dl *d;
  CURL *c;
  int fd;
  int64_t have;          /* bytes in the file */
  int64_t start;         /* where this transfer started writing */
  gnutls_hash_hd_t h;
  bool checked;          /* first body byte: status looked at */
  bool restarted;        /* the server ignored Range: started over */
  int werr;              /* errno of a failed write */
  int64_t total;         /* expected final size, -1 unknown */
  uint64_t last_cb_ns;
  bool cancel;
  char etag_sha[65];     /* the hub's x-linked-etag when it is a sha256 */
} file_sink;

/* Hugging Face answers a resolve request for an LFS file with
 * `x-linked-etag: "<sha256>"` (on the redirect to its CDN): the digest to
 * check when the file listing gave none. */
static size_t file_header(char *p, size_t size, size_t nmemb, void *ud) {
  file_sink *s = ud;
  size_t n = size * nmemb;
  static const char key[] = "x-linked-etag:";
  if (n > sizeof key && strncasecmp(p, key, sizeof key - 1) == 0 && !s->etag_sha[0]) {
    const char *v = p + sizeof key - 1;
    const char *end = p + n;
    while (v < end && (*v == ' ' || *v == '"')) v++;
    size_t k = 0;
    while (v + k < end && k < 64 && ((v[k] >= '0' && v[k] <= '9') || (v[k] >= 'a' && v[k] <= 'f'))) k++;
    if (k == 64 && (v + k == end || v[k] == '"' || v[k] == '\r' || v[k] == '\n' || v[k] == ' ')) {
      memcpy(s->etag_sha, v, 64);
      s->etag_sha[64] = 0;
    }
  }
  return n;
}

static size_t file_write(char *p, size_t size, size_t nmemb, void *ud) {
  file_sink *s = ud;
  size_t n = size * nmemb;
  if (!s->checked) {
    s->checked = true;
    long status = 0;
    curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &status);
    if (status == 200 && s->have > 0) {
      /* The server sent the whole file: start over. */
      if (ftruncate(s->fd, 0) != 0) {
        s->werr = errno;
        return 0;
      }
      gnutls_hash_deinit(s->h, NULL);
      if (gnutls_hash_init(&s->h, GNUTLS_DIG_SHA256) < 0) {
        s->werr = ENOMEM;
        return 0;
      }
      s->have = 0;
      s->restarted = true;
      s->d->resumed = false;
      s->d->resumed_from = 0;
    }
  }
  size_t off = 0;
  while (off < n) {
    ssize_t w = pwrite(s->fd, p + off, n - off, s->have);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      s->werr = w < 0 ? errno : ENOSPC;
      return 0;
    }
    gnutls_hash(s->h, p + off, (size_t)w);
    off += (size_t)w;
    s->have += w;
  }
  return n;
}

static int file_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
  (void)dlnow, (void)ultotal, (void)ulnow;
  file_sink *s = ud;
  if (s->total < 0 && dltotal > 0) s->total = s->have - dlnow + dltotal;
  uint64_t now = time_mono_ns();
  if (s->d->progress && now - s->last_cb_ns > 50 * 1000000ull) {
    s->last_cb_ns = now;
    if (s->d->progress(s->d->ctx, s->have, s->total)) s->cancel = true;
  }
  return s->cancel ? 1 : 0;
}

static bool parse_sha(const char *exp) {
  if (!exp || strlen(exp) != 64) return false;
  for (int i = 0; i < 64; i++)
    if (!((exp[i] >= '0' && exp[i] <= '9') || (exp[i] >= 'a' && exp[i] <= 'f'))) return false;
  return true;
}

int pull_download(pull_dl *d) {
  pthread_once(&g_curl_once, curl_init_once);
  d->resumed = false;
  d->resumed_from = 0;
  d->sha256_got[0] = 0;
  if (d->sha256 && !parse_sha(d->sha256)) return err_set(ERR_INVALID, "expected digest '%.80s' is not 64 hex digits", d->sha256);
  int fd = open(d->partial, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return err_set(errno == ENOSPC ? ERR_IO : ERR_IO, "cannot open %s: %s", d->partial, strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return err_set(ERR_CONFLICT, "%s is being downloaded by another process", d->partial);
  }
  file_sink s = {.d = d, .fd = fd, .total = d->size};
  struct stat st = {0};
  int rc = 0;
  if (fstat(fd, &st) != 0) rc = err_set(ERR_IO, "stat %s: %s", d->partial, strerror(errno));
  if (!rc && S_ISREG(st.st_mode)) s.have = st.st_size;
  if (!rc && d->size >= 0 && s.have > d->size) {
    /* Longer than the file can be: not a prefix of it. */
    if (ftruncate(fd, 0) != 0) rc = err_set(ERR_IO, "truncating %s: %s", d->partial, strerror(errno));
    s.have = 0;
  }
  if (!rc && gnutls_hash_init(&s.h, GNUTLS_DIG_SHA256) < 0) rc = err_set(ERR_INTERNAL, "sha256: cannot start a hash");
  bool hashing = !rc;
  if (!rc && s.have > 0) rc = hash_fd(s.h, fd, s.have, d->partial);
  CURLcode cc = CURLE_OK;
  CURL *c = NULL;
  struct curl_slist *h = NULL;
  bool need = !rc && !(d->size >= 0 && s.have == d->size);
  if (need) {
    c = curl_easy_init();
    if (!c) rc = err_set(ERR_NOMEM, "cannot start an HTTP transfer");
  }
  if (need && !rc) {
    s.c = c;
    s.start = s.have;
    h = base_headers(NULL, d->bearer);
    common_opts(c, d->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, file_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, file_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &s);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, file_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);
    char range[32];
    if (s.have > 0) {
      /* CURLOPT_RANGE rather than RESUME_FROM: a server that ignores the
       * Range and answers 200 is then handled (start over), not an error. */
      snprintf(range, sizeof range, "%lld-", (long long)s.have);
      curl_easy_setopt(c, CURLOPT_RANGE, range);
      d->resumed = true;
      d->resumed_from = s.have;
    }
    if (d->progress && d->progress(d->ctx, s.have, s.total)) s.cancel = true;
    cc = s.cancel ? CURLE_ABORTED_BY_CALLBACK : curl_easy_perform(c);
    if (s.werr) {
      rc = s.werr == ENOSPC || s.werr == EDQUOT
               ? err_set(ERR_IO, "disk full writing %s after %lld bytes: %s", d->partial, (long long)s.have,
                         strerror(s.werr))
               : err_set(ERR_IO, "writing %s: %s", d->partial, strerror(s.werr));
    } else if (cc == CURLE_PARTIAL_FILE || cc == CURLE_RECV_ERROR ||
               (cc == CURLE_GOT_NOTHING && s.have > s.start)) {
      rc = err_set(ERR_UNAVAILABLE, "connection dropped after %lld of %lld bytes of %s (%s); pull again to resume",
                   (long long)s.have, (long long)s.total, d->url, curl_easy_strerror(cc));
    } else if (cc == CURLE_RANGE_ERROR) {
      rc = err_set(ERR_UNAVAILABLE, "the server cannot resume %s at byte %lld", d->url, (long long)s.have);
    } else if (cc != CURLE_OK) {
      long status = 0;
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
      if (cc == CURLE_HTTP_RETURNED_ERROR && status == 416 && s.have > 0) {
        /* Range not satisfiable: what we hold is not a prefix; start over. */
        if (ftruncate(fd, 0) == 0) s.have = 0;
        rc = err_set(ERR_UNAVAILABLE, "the server refused to resume %s (HTTP 416); the partial file was reset, pull again",
                     d->url);
      } else {
        rc = curl_error(c, cc, "downloading", d->url);
      }
    }
    if (d->progress) d->progress(d->ctx, s.have, s.total);
  }
  if (!rc && fsync(fd) != 0 && errno != EINVAL)
    rc = errno == ENOSPC ? err_set(ERR_IO, "disk full writing %s: %s", d->partial, strerror(errno))
                         : err_set(ERR_IO, "syncing %s: %s", d->partial, strerror(errno));
  if (!rc && d->size >= 0 && s.have != d->size)
    rc = err_set(ERR_CORRUPT, "%s: got %lld bytes, the source says %lld (truncated download)", d->url,
                 (long long)s.have, (long long)d->size);
  if (hashing) {
    unsigned char dg[32];
    gnutls_hash_deinit(s.h, dg);
    if (!rc) hex_of(dg, 32, d->sha256_got);
  }
  const char *want = d->sha256 ? d->sha256 : s.etag_sha[0] ? s.etag_sha : NULL;
  if (!rc && want && strcmp(want, d->sha256_got) != 0) {
    rc = err_set(ERR_CORRUPT, "digest mismatch for %s: expected sha256:%s, got sha256:%s", d->url, want,
                 d->sha256_got);
    if (S_ISREG(st.st_mode)) unlink(d->partial); /* never resumable */
  }
  if (rc && s.have == 0 && rc != ERR_CONFLICT && S_ISREG(st.st_mode)) unlink(d->partial); /* nothing to resume */
  if (c) curl_easy_cleanup(c);
  curl_slist_free_all(h);
  close(fd);
  return rc;
}
