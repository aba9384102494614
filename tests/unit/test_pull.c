/*
 * test_pull.c - model/pull.h: name parsing (Ollama and Hugging Face forms,
 * defaults), folder names, choosing HF files by quant/pattern (shards,
 * projectors, ambiguity), Ollama manifest parsing, the resumable verified
 * download against a tiny loopback HTTP server (Range, a server that
 * ignores Range, a digest mismatch, a dropped connection, a full disk via
 * /dev/full), and the registry's view of pulled folders plus pull_remove
 * refusing files parley did not download.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "gguf/gguf.h"
#include "kernels/tensor_type.h"
#include "model/pull.h"
#include "model/registry.h"
#include "store/store.h"
#include "test.h"

/* ---- names ------------------------------------------------------------------ */

TEST(pull_ref_ollama_defaults) {
  pull_ref r;
  ASSERT_INT_EQ(pull_ref_parse("llama3.2:1b", NULL, &r), 0);
  EXPECT_INT_EQ(r.src, PULL_SOURCE_OLLAMA);
  EXPECT_STR_EQ(r.host, "registry.ollama.ai");
  EXPECT_STR_EQ(r.ns, "library");
  EXPECT_STR_EQ(r.repo, "llama3.2");
  EXPECT_STR_EQ(r.tag, "1b");
  EXPECT_STR_EQ(r.name, "llama3.2:1b");

  ASSERT_INT_EQ(pull_ref_parse("llama3.2", NULL, &r), 0);
  EXPECT_STR_EQ(r.tag, "latest");
  EXPECT_STR_EQ(r.name, "llama3.2:latest");

  ASSERT_INT_EQ(pull_ref_parse("library/qwen3:0.6b", NULL, &r), 0);
  EXPECT_STR_EQ(r.name, "qwen3:0.6b"); /* the display form drops the default namespace */

  ASSERT_INT_EQ(pull_ref_parse("acme/tool:v1", NULL, &r), 0);
  EXPECT_STR_EQ(r.ns, "acme");
  EXPECT_STR_EQ(r.name, "acme/tool:v1");

  ASSERT_INT_EQ(pull_ref_parse("registry.ollama.ai/library/phi3:mini", NULL, &r), 0);
  EXPECT_STR_EQ(r.name, "phi3:mini");

  ASSERT_INT_EQ(pull_ref_parse("myhost:5000/ns/lips:code", NULL, &r), 0);
  EXPECT_STR_EQ(r.host, "myhost:5000");
  EXPECT_STR_EQ(r.name, "myhost:5000/ns/lips:code");
}

TEST(pull_ref_hf_forms) {
  pull_ref r;
  ASSERT_INT_EQ(pull_ref_parse("hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", NULL, &r), 0);
  EXPECT_INT_EQ(r.src, PULL_SOURCE_HF);
  EXPECT_STR_EQ(r.ns, "bartowski");
  EXPECT_STR_EQ(r.repo, "Llama-3.2-1B-Instruct-GGUF");
  EXPECT_STR_EQ(r.tag, "Q4_K_M");
  EXPECT_STR_EQ(r.name, "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M");

  ASSERT_INT_EQ(pull_ref_parse("huggingface.co/o/r", NULL, &r), 0);
  EXPECT_STR_EQ(r.tag, "");
  EXPECT_STR_EQ(r.name, ""); /* known once a file is chosen */

  ASSERT_INT_EQ(pull_ref_parse("o/r", "*Q8_0.gguf", &r), 0);
  EXPECT_INT_EQ(r.src, PULL_SOURCE_HF);
  EXPECT_STR_EQ(r.file, "*Q8_0.gguf");

  ASSERT_INT_EQ(pull_ref_parse("o/r/sub/model-Q8_0.gguf", NULL, &r), 0);
  EXPECT_INT_EQ(r.src, PULL_SOURCE_HF);
  EXPECT_STR_EQ(r.repo, "r");
  EXPECT_STR_EQ(r.file, "sub/model-Q8_0.gguf");

  ASSERT_INT_EQ(pull_ref_parse("https://huggingface.co/o/r/resolve/main/m.gguf", NULL, &r), 0);
  EXPECT_STR_EQ(r.file, "m.gguf");
  ASSERT_INT_EQ(pull_ref_parse("hf://o/r:q8_0", NULL, &r), 0);
  EXPECT_STR_EQ(r.tag, "q8_0");
}

TEST(pull_ref_rejects_bad_names) {
  pull_ref r;
  static const char *const bad[] = {"",           "has space",     "a/b/c/d:x",    "-x:1",
                                    "x:",         "x:-y",          "hf.co/owner",  "hf.co/o/r/../../etc.gguf",
                                    "hf.co/o/..", "hf.co/o/a--b",  "hf.co/o/r:Q4 K", "a\x01:b",
                                    "ns/.hidden"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int rc = pull_ref_parse(bad[i], NULL, &r);
    if (rc != ERR_INVALID) fprintf(stderr, "accepted '%s'\n", bad[i]);
    EXPECT_INT_EQ(rc, ERR_INVALID);
  }
  EXPECT_INT_EQ(pull_ref_parse("o/r", "../x.gguf", &r), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "../x.gguf");
}

TEST(pull_dir_names) {
  char d[256];
  ASSERT_INT_EQ(pull_dir_name("llama3.2:1b", d, sizeof d), 0);
  EXPECT_STR_EQ(d, "llama3.2@1b");
  ASSERT_INT_EQ(pull_dir_name("hf.co/o/r:Q4_K_M", d, sizeof d), 0);
  EXPECT_STR_EQ(d, "hf.co--o--r@Q4_K_M");
  EXPECT_INT_EQ(pull_dir_name("..", d, sizeof d), ERR_INVALID);
  EXPECT_INT_EQ(pull_dir_name("a b", d, sizeof d), ERR_INVALID);
  EXPECT_INT_EQ(pull_dir_name(".x", d, sizeof d), ERR_INVALID);
  EXPECT_INT_EQ(pull_dir_name("abcdef", d, 4), ERR_TOO_LARGE);
}

TEST(pull_state_names_roundtrip) {
  for (int s = 0; s < PULL_STATE_COUNT; s++) {
    pull_state back;
    ASSERT_TRUE(pull_state_parse(pull_state_name((pull_state)s), &back));
    EXPECT_INT_EQ(back, s);
  }
  pull_state x;
  EXPECT_FALSE(pull_state_parse("paused", &x));
  EXPECT_TRUE(pull_state_is_final(PULL_FAILED));
  EXPECT_FALSE(pull_state_is_final(PULL_VERIFYING));
}

/* ---- choosing HF files --------------------------------------------------------- */

TEST(pull_hf_select_by_quant_default_and_pattern) {
  const char *files[] = {"README.md", "m-Q8_0.gguf", "m-Q4_K_M.gguf", "m-F16.gguf", "mmproj-m-f16.gguf",
                         "mmproj-m-q8_0.gguf"};
  size_t idx[8], nm, n;
  ASSERT_INT_EQ(pull_hf_select(files, 6, "q8_0", NULL, idx, 8, &nm, &n), 0);
  EXPECT_INT_EQ(nm, 1);
  ASSERT_INT_EQ(n, 2);
  EXPECT_STR_EQ(files[idx[0]], "m-Q8_0.gguf");
  EXPECT_STR_EQ(files[idx[1]], "mmproj-m-f16.gguf"); /* the F16 projector */

  ASSERT_INT_EQ(pull_hf_select(files, 6, NULL, NULL, idx, 8, &nm, &n), 0);
  EXPECT_STR_EQ(files[idx[0]], "m-Q4_K_M.gguf"); /* default Q4_K_M */

  ASSERT_INT_EQ(pull_hf_select(files, 6, NULL, "*F16.gguf", idx, 8, &nm, &n), 0);
  EXPECT_STR_EQ(files[idx[0]], "m-F16.gguf");

  EXPECT_INT_EQ(pull_hf_select(files, 6, "Q5_K_M", NULL, idx, 8, &nm, &n), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "Q8_0"); /* lists what there is */

  EXPECT_INT_EQ(pull_hf_select(files, 6, NULL, "m-*.gguf", idx, 8, &nm, &n), ERR_INVALID); /* ambiguous */
  EXPECT_STR_CONTAINS(err_detail(), "3 GGUF files match");
}

TEST(pull_hf_select_only_file_and_shards) {
  const char *one[] = {"config.json", "weights.gguf"};
  size_t idx[8], nm, n;
  ASSERT_INT_EQ(pull_hf_select(one, 2, NULL, NULL, idx, 8, &nm, &n), 0);
  EXPECT_STR_EQ(one[idx[0]], "weights.gguf");

  const char *none[] = {"config.json"};
  EXPECT_INT_EQ(pull_hf_select(none, 1, NULL, NULL, idx, 8, &nm, &n), ERR_NOT_FOUND);

  const char *split[] = {"Q4_K_M/big-Q4_K_M-00002-of-00003.gguf", "Q4_K_M/big-Q4_K_M-00001-of-00003.gguf",
                         "Q4_K_M/big-Q4_K_M-00003-of-00003.gguf", "big-Q8_0.gguf"};
  ASSERT_INT_EQ(pull_hf_select(split, 4, "Q4_K_M", NULL, idx, 8, &nm, &n), 0);
  ASSERT_INT_EQ(nm, 3);
  EXPECT_STR_EQ(split[idx[0]], "Q4_K_M/big-Q4_K_M-00001-of-00003.gguf");
  EXPECT_STR_EQ(split[idx[1]], "Q4_K_M/big-Q4_K_M-00002-of-00003.gguf");
  EXPECT_STR_EQ(split[idx[2]], "Q4_K_M/big-Q4_K_M-00003-of-00003.gguf");

  const char *missing[] = {"big-Q4_K_M-00001-of-00002.gguf"};
  EXPECT_INT_EQ(pull_hf_select(missing, 1, NULL, NULL, idx, 8, &nm, &n), ERR_NOT_FOUND);
  EXPECT_STR_CONTAINS(err_detail(), "shard 2 of 2");
}

/* ---- Ollama manifests ------------------------------------------------------------ */

#define D64(c) "sha256:" c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c \
                         c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c

TEST(pull_manifest_parse_layers) {
  const char *m = "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D64("c") "\",\"size\":5},\"layers\":["
                  "{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":\"" D64("a") "\",\"size\":1000},"
                  "{\"mediaType\":\"application/vnd.ollama.image.license\",\"digest\":\"" D64("e") "\",\"size\":7},"
                  "{\"mediaType\":\"application/vnd.ollama.image.template\",\"digest\":\"" D64("b") "\",\"size\":12},"
                  "{\"mediaType\":\"application/vnd.ollama.image.params\",\"digest\":\"" D64("d") "\",\"size\":3}]}";
  pull_layer l[8];
  size_t n;
  ASSERT_INT_EQ(pull_ollama_manifest_parse(m, strlen(m), l, 8, &n), 0);
  ASSERT_INT_EQ(n, 3); /* the license is not kept */
  EXPECT_INT_EQ(l[0].kind, PULL_LAYER_MODEL);
  EXPECT_INT_EQ(l[0].size, 1000);
  EXPECT_STR_EQ(l[0].digest, D64("a"));
  EXPECT_INT_EQ(l[1].kind, PULL_LAYER_TEMPLATE);
  EXPECT_INT_EQ(l[2].kind, PULL_LAYER_PARAMS);
}

TEST(pull_manifest_parse_errors_name_the_field) {
  pull_layer l[8];
  size_t n;
  const char *bad_digest = "{\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":"
                           "\"sha256:../../etc/passwd\",\"size\":1}]}";
  EXPECT_INT_EQ(pull_ollama_manifest_parse(bad_digest, strlen(bad_digest), l, 8, &n), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "layers[0].digest");
  const char *neg = "{\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":\"" D64("a")
                    "\",\"size\":-4}]}";
  EXPECT_INT_EQ(pull_ollama_manifest_parse(neg, strlen(neg), l, 8, &n), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "layers[0].size");
  const char *no_model = "{\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.template\",\"digest\":\"" D64("a")
                         "\",\"size\":4}]}";
  EXPECT_INT_EQ(pull_ollama_manifest_parse(no_model, strlen(no_model), l, 8, &n), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "no layer");
  EXPECT_INT_EQ(pull_ollama_manifest_parse("{\"layers\":", 10, l, 8, &n), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "not JSON");
  EXPECT_INT_EQ(pull_ollama_manifest_parse("[]", 2, l, 8, &n), ERR_PARSE);
}

/* ---- downloads against a loopback server ------------------------------------------ */

enum srv_mode { SRV_NORMAL, SRV_IGNORE_RANGE, SRV_DROP, SRV_SLOW };

typedef struct srv {
  int fd, port;
  enum srv_mode mode;
  size_t drop_after;
  const unsigned char *body;
  size_t len;
  const char *manifest; /* answered for paths holding "/manifests/" */
  long last_range; /* -1: none */
  int n_requests;
  pthread_t t;
} srv;

static void write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w <= 0) return;
    c += w;
    n -= (size_t)w;
  }
}

/* Serves requests until the listening socket is shut down. */
static void *srv_main(void *arg) {
  srv *s = arg;
  for (;;) {
    int c = accept(s->fd, NULL, NULL);
    if (c < 0) return NULL;
    char req[4096];
    size_t got = 0;
    while (got < sizeof req - 1) {
      ssize_t r = recv(c, req + got, sizeof req - 1 - got, 0);
      if (r <= 0) break;
      got += (size_t)r;
      req[got] = 0;
      if (strstr(req, "\r\n\r\n")) break;
    }
    req[got] = 0;
    s->n_requests++;
    long start = -1;
    char *rg = strcasestr(req, "\r\nRange: bytes=");
    if (rg) start = strtol(rg + 15, NULL, 10);
    s->last_range = start;
    if (s->manifest && strstr(req, "/manifests/")) {
      char h[160];
      int hn = snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                        strlen(s->manifest));
      write_all(c, h, (size_t)hn);
      write_all(c, s->manifest, strlen(s->manifest));
      close(c);
      continue;
    }
    char hdr[256];
    size_t from = (start > 0 && s->mode != SRV_IGNORE_RANGE) ? (size_t)start : 0;
    int n;
    if (from)
      n = snprintf(hdr, sizeof hdr,
                   "HTTP/1.1 206 Partial Content\r\nContent-Length: %zu\r\nContent-Range: bytes %zu-%zu/%zu\r\n"
                   "Connection: close\r\n\r\n",
                   s->len - from, from, s->len - 1, s->len);
    else
      n = snprintf(hdr, sizeof hdr, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", s->len);
    write_all(c, hdr, (size_t)n);
    size_t upto = s->mode == SRV_DROP && s->drop_after < s->len - from ? s->drop_after : s->len - from;
    if (s->mode == SRV_SLOW) {
      for (size_t off = 0; off < upto; off += 8192) {
        size_t k = upto - off < 8192 ? upto - off : 8192;
        if (send(c, s->body + from + off, k, MSG_NOSIGNAL) <= 0) break;
        usleep(20000);
      }
    } else {
      write_all(c, s->body + from, upto);
    }
    close(c);
  }
}

static int srv_start(srv *s) {
  s->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof a) || listen(s->fd, 4) ||
      getsockname(s->fd, (struct sockaddr *)&a, &al))
    return -1;
  s->port = ntohs(a.sin_port);
  s->last_range = -1;
  return pthread_create(&s->t, NULL, srv_main, s);
}

static void srv_stop(srv *s) {
  shutdown(s->fd, SHUT_RDWR);
  close(s->fd);
  pthread_join(s->t, NULL);
}

static unsigned char *pattern_body(size_t n) {
  unsigned char *b = malloc(n);
  for (size_t i = 0; b && i < n; i++) b[i] = (unsigned char)(i * 131 + (i >> 8));
  return b;
}

static int write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(p, 1, n, f);
  return fclose(f) == 0 && w == n ? 0 : -1;
}

static int64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

typedef struct dl_fixture {
  srv s;
  unsigned char *body;
  size_t len;
  char sha[65];
  char url[128];
  char partial[512];
} dl_fixture;

/* A valid GGUF of about 300 KB (one F32 tensor of patterned values), so a
 * pulled "model" passes the GGUF check; its bytes are the served body. */
static unsigned char *gguf_body(const char *tmp, size_t *len) {
  enum { N = 75000 };
  unsigned char *vals = pattern_body(N * sizeof(float));
  gguf_writer *w = NULL;
  uint64_t dims[1] = {N};
  int rc = vals ? gguf_writer_new(&w) : -1;
  if (!rc) rc |= gguf_writer_add_str(w, "general.architecture", "llama");
  if (!rc) rc |= gguf_writer_add_tensor(w, "token_embd.weight", TENSOR_TYPE_F32, 1, dims, vals, N * sizeof(float));
  if (!rc) rc = gguf_writer_write_file(w, tmp);
  gguf_writer_free(w);
  free(vals);
  if (rc) return NULL;
  FILE *fp = fopen(tmp, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  unsigned char *b = n > 0 ? malloc((size_t)n) : NULL;
  if (b && fread(b, 1, (size_t)n, fp) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(fp);
  *len = (size_t)n;
  return b;
}

static int fixture_init(dl_fixture *f, enum srv_mode mode) {
  memset(f, 0, sizeof *f);
  snprintf(f->partial, sizeof f->partial, "%s/model.gguf.partial", test_tmpdir());
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s/whole", test_tmpdir());
  f->body = gguf_body(tmp, &f->len);
  if (!f->body || f->len < 300000 || pull_sha256_file(tmp, f->sha, sizeof f->sha)) return -1;
  unlink(tmp);
  f->s.body = f->body;
  f->s.len = f->len;
  f->s.mode = mode;
  f->s.drop_after = 100000;
  if (srv_start(&f->s)) return -1;
  snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d/blob", f->s.port);
  return 0;
}

static void fixture_free(dl_fixture *f) {
  srv_stop(&f->s);
  free(f->body);
}

TEST(pull_download_whole_then_resume_with_range) {
  dl_fixture f;
  ASSERT_INT_EQ(fixture_init(&f, SRV_NORMAL), 0);
  /* A partial file of the first 1000 bytes: the download continues there. */
  ASSERT_INT_EQ(write_file(f.partial, f.body, 1000), 0);
  pull_dl d = {.url = f.url, .partial = f.partial, .sha256 = f.sha, .size = (int64_t)f.len};
  EXPECT_INT_EQ(pull_download(&d), 0);
  EXPECT_TRUE(d.resumed);
  EXPECT_INT_EQ(d.resumed_from, 1000);
  EXPECT_INT_EQ(f.s.last_range, 1000);
  EXPECT_STR_EQ(d.sha256_got, f.sha);
  EXPECT_INT_EQ(file_size(f.partial), (int64_t)f.len);
  /* Complete already: no request at all. */
  int before = f.s.n_requests;
  EXPECT_INT_EQ(pull_download(&d), 0);
  EXPECT_INT_EQ(f.s.n_requests, before);
  fixture_free(&f);
}

TEST(pull_download_server_ignoring_range_starts_over) {
  dl_fixture f;
  ASSERT_INT_EQ(fixture_init(&f, SRV_IGNORE_RANGE), 0);
  ASSERT_INT_EQ(write_file(f.partial, f.body, 5000), 0);
  pull_dl d = {.url = f.url, .partial = f.partial, .sha256 = f.sha, .size = -1};
  EXPECT_INT_EQ(pull_download(&d), 0);
  EXPECT_FALSE(d.resumed); /* it answered 200: the file was rewritten from 0 */
  EXPECT_INT_EQ(file_size(f.partial), (int64_t)f.len);
  EXPECT_STR_EQ(d.sha256_got, f.sha);
  fixture_free(&f);
}

TEST(pull_download_digest_mismatch_removes_partial) {
  dl_fixture f;
  ASSERT_INT_EQ(fixture_init(&f, SRV_NORMAL), 0);
  char wrong[65];
  memset(wrong, 'a', 64);
  wrong[64] = 0;
  pull_dl d = {.url = f.url, .partial = f.partial, .sha256 = wrong, .size = (int64_t)f.len};
  EXPECT_INT_EQ(pull_download(&d), ERR_CORRUPT);
  EXPECT_STR_CONTAINS(err_detail(), "digest mismatch");
  EXPECT_INT_EQ(file_size(f.partial), -1);
  fixture_free(&f);
}

TEST(pull_download_dropped_connection_keeps_partial) {
  dl_fixture f;
  ASSERT_INT_EQ(fixture_init(&f, SRV_DROP), 0);
  pull_dl d = {.url = f.url, .partial = f.partial, .sha256 = f.sha, .size = (int64_t)f.len};
  EXPECT_INT_EQ(pull_download(&d), ERR_UNAVAILABLE);
  EXPECT_STR_CONTAINS(err_detail(), "connection dropped after 100000");
  EXPECT_INT_EQ(file_size(f.partial), 100000);
  /* The next attempt resumes; the server drops again after 100000 more. */
  EXPECT_INT_EQ(pull_download(&d), ERR_UNAVAILABLE);
  EXPECT_INT_EQ(f.s.last_range, 100000);
  f.s.mode = SRV_NORMAL;
  EXPECT_INT_EQ(pull_download(&d), 0);
  EXPECT_INT_EQ(f.s.last_range, 200000);
  EXPECT_STR_EQ(d.sha256_got, f.sha);
  fixture_free(&f);
}

TEST(pull_download_disk_full_is_a_clear_error) {
  if (access("/dev/full", W_OK) != 0) TEST_SKIP("/dev/full is not available");
  dl_fixture f;
  ASSERT_INT_EQ(fixture_init(&f, SRV_NORMAL), 0);
  /* Writes through this link fail with ENOSPC; the link itself is ours. */
  ASSERT_INT_EQ(symlink("/dev/full", f.partial), 0);
  pull_dl d = {.url = f.url, .partial = f.partial, .sha256 = f.sha, .size = (int64_t)f.len};
  EXPECT_INT_EQ(pull_download(&d), ERR_IO);
  EXPECT_STR_CONTAINS(err_detail(), "disk full");
  EXPECT_INT_EQ(access("/dev/full", F_OK), 0);
  fixture_free(&f);
}

TEST(pull_download_http_errors) {
  pull_dl d = {.url = "http://127.0.0.1:1/none", .size = -1};
  char p[512];
  snprintf(p, sizeof p, "%s/x.partial", test_tmpdir());
  d.partial = p;
  EXPECT_INT_EQ(pull_download(&d), ERR_UNAVAILABLE); /* connection refused */
  EXPECT_INT_EQ(file_size(p), -1);                   /* no empty leftover */
  char *doc = NULL;
  EXPECT_INT_EQ(pull_fetch("http://127.0.0.1:1/m", NULL, NULL, 100, &doc, NULL, NULL, NULL), ERR_UNAVAILABLE);
  EXPECT_TRUE(doc == NULL);
}

/* ---- pulled folders in the registry, and removal -------------------------------------- */

static int put_model(const char *path) {
  gguf_writer *w = NULL;
  int rc = gguf_writer_new(&w);
  float data[16] = {0};
  uint64_t dims[2] = {8, 2};
  if (!rc) rc |= gguf_writer_add_str(w, "general.architecture", "llama");
  if (!rc) rc |= gguf_writer_add_tensor(w, "token_embd.weight", TENSOR_TYPE_F32, 2, dims, data, sizeof data);
  if (!rc) rc = gguf_writer_write_file(w, path);
  gguf_writer_free(w);
  return rc;
}

static int put_text(const char *path, const char *text) { return write_file(path, text, strlen(text)); }

TEST(pull_registry_lists_pulled_folders_and_remove_guards) {
  char md[512], p[768];
  snprintf(md, sizeof md, "%s/models", test_tmpdir());
  mkdir(md, 0755);
  /* A pulled model. */
  snprintf(p, sizeof p, "%s/tiny@1b", md);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/tiny@1b/model.gguf", md);
  ASSERT_INT_EQ(put_model(p), 0);
  snprintf(p, sizeof p, "%s/tiny@1b/template", md);
  put_text(p, "{{ .Prompt }}");
  snprintf(p, sizeof p, "%s/tiny@1b/%s", md, REGISTRY_PULL_MANIFEST);
  put_text(p, "{\"name\":\"tiny:1b\",\"model\":\"model.gguf\",\"template\":\"template\","
              "\"files\":[{\"file\":\"model.gguf\"},{\"file\":\"template\"}]}");
  /* A pull in progress: sidecar, no model file yet. */
  snprintf(p, sizeof p, "%s/busy@1", md);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/busy@1/%s", md, REGISTRY_PULL_MANIFEST);
  put_text(p, "{\"name\":\"busy:1\",\"model\":\"model.gguf\"}");
  /* A sidecar pointing outside its folder. */
  snprintf(p, sizeof p, "%s/evil@1", md);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/evil@1/%s", md, REGISTRY_PULL_MANIFEST);
  put_text(p, "{\"name\":\"evil:1\",\"model\":\"../hand.gguf\"}");
  /* A file placed by hand. */
  snprintf(p, sizeof p, "%s/hand.gguf", md);
  ASSERT_INT_EQ(put_model(p), 0);

  registry *r = NULL;
  ASSERT_INT_EQ(registry_new(&r), 0);
  registry_set_models_dir(r, md);
  for (int s = REGISTRY_SOURCE_OLLAMA; s < REGISTRY_SOURCE_COUNT; s++) registry_set_source_dir(r, (registry_source)s, "");
  ASSERT_INT_EQ(registry_refresh(r), 0);
  registry_entry *e = NULL;
  ASSERT_INT_EQ(registry_lookup(r, "tiny:1b", &e), 0);
  EXPECT_TRUE(e->pulled);
  EXPECT_TRUE(e->error == NULL);
  EXPECT_TRUE(e->template_path && strstr(e->template_path, "tiny@1b/template"));
  registry_entry_free(e);
  EXPECT_INT_EQ(registry_lookup(r, "busy:1", &e), ERR_NOT_FOUND);
  ASSERT_INT_EQ(registry_lookup(r, "evil:1", &e), 0);
  EXPECT_TRUE(e->error != NULL);
  registry_entry_free(e);
  ASSERT_INT_EQ(registry_lookup(r, "hand", &e), 0);
  EXPECT_FALSE(e->pulled);
  registry_entry_free(e);

  puller *pl = NULL;
  pull_config pc = {.models_dir = md, .reg = r};
  ASSERT_INT_EQ(puller_new(&pc, &pl), 0);
  char removed[256];
  EXPECT_INT_EQ(pull_remove(pl, "hand", removed, sizeof removed), ERR_FORBIDDEN);
  EXPECT_STR_CONTAINS(err_detail(), "not downloaded by parley");
  snprintf(p, sizeof p, "%s/hand.gguf", md);
  EXPECT_TRUE(file_size(p) > 0);
  EXPECT_INT_EQ(pull_remove(pl, "nosuch:1", removed, sizeof removed), ERR_NOT_FOUND);
  EXPECT_INT_EQ(pull_remove(pl, "TINY:1B", removed, sizeof removed), 0);
  EXPECT_STR_EQ(removed, "tiny:1b");
  snprintf(p, sizeof p, "%s/tiny@1b", md);
  EXPECT_INT_EQ(file_size(p), -1); /* the folder is gone */
  EXPECT_INT_EQ(registry_lookup(r, "tiny:1b", &e), ERR_NOT_FOUND);
  /* The incomplete pull can be removed by name too. */
  EXPECT_INT_EQ(pull_remove(pl, "busy:1", removed, sizeof removed), 0);
  snprintf(p, sizeof p, "%s/busy@1", md);
  EXPECT_INT_EQ(file_size(p), -1);
  puller_free(pl);
  registry_free(r);
}

TEST(pull_start_rejects_bad_names_without_a_job) {
  char md[512];
  snprintf(md, sizeof md, "%s/models", test_tmpdir());
  puller *pl = NULL;
  pull_config pc = {.models_dir = md};
  ASSERT_INT_EQ(puller_new(&pc, &pl), 0);
  char id[PULL_ID_CAP];
  EXPECT_INT_EQ(pull_start(pl, "bad name", NULL, id, sizeof id, NULL), ERR_INVALID);
  pull_opts o = {.quant = "Q8_0"};
  EXPECT_INT_EQ(pull_start(pl, "llama3.2:1b", &o, id, sizeof id, NULL), ERR_INVALID);
  pull_status *v = NULL;
  size_t n = 9;
  EXPECT_INT_EQ(pull_list(pl, &v, &n), 0);
  EXPECT_INT_EQ(n, 0);
  pull_list_free(v, n);
  pull_status s;
  EXPECT_INT_EQ(pull_get(pl, "job_nope", &s), ERR_NOT_FOUND);
  EXPECT_INT_EQ(pull_cancel(pl, "job_nope"), ERR_NOT_FOUND);
  puller_free(pl);
}

/* ---- the puller end to end (jobs, store rows, cancel) --------------------------------- */

/* Waits until the job is final (or 20 s); returns its final status. */
static pull_state wait_final(puller *pl, const char *id, pull_status *out) {
  for (int i = 0; i < 400; i++) {
    pull_wait(pl, id, 50);
    if (pull_get(pl, id, out) == 0 && pull_state_is_final(out->state)) return out->state;
    pull_status_free(out);
  }
  memset(out, 0, sizeof *out);
  return PULL_QUEUED;
}

TEST(pull_job_from_ollama_registry_survives_a_restart) {
  dl_fixture f;
  ASSERT_INT_EQ(fixture_init(&f, SRV_NORMAL), 0);
  char man[1024];
  snprintf(man, sizeof man,
           "{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\","
           "\"digest\":\"sha256:%s\",\"size\":%zu}]}",
           f.sha, f.len);
  f.s.manifest = man;
  char data[512], md[600], reg_url[64];
  snprintf(data, sizeof data, "%s/data", test_tmpdir());
  snprintf(md, sizeof md, "%s/models", data);
  snprintf(reg_url, sizeof reg_url, "http://127.0.0.1:%d", f.s.port);
  store *st = NULL;
  ASSERT_INT_EQ(store_open(data, &st), 0);
  puller *pl = NULL;
  pull_config pc = {.models_dir = md, .st = st, .ollama_registry = reg_url};
  ASSERT_INT_EQ(puller_new(&pc, &pl), 0);
  char id[PULL_ID_CAP], id2[PULL_ID_CAP];
  ASSERT_INT_EQ(pull_start(pl, "t:1", NULL, id, sizeof id, NULL), 0);
  EXPECT_TRUE(strncmp(id, "job_", 4) == 0);
  pull_status s;
  ASSERT_INT_EQ(wait_final(pl, id, &s), PULL_COMPLETED);
  EXPECT_STR_EQ(s.model, "t:1");
  EXPECT_INT_EQ(s.bytes_done, (int64_t)f.len);
  EXPECT_INT_EQ(s.bytes_total, (int64_t)f.len);
  ASSERT_INT_EQ(s.n_files, 1);
  EXPECT_STR_EQ(s.files[0].file, "model.gguf");
  EXPECT_TRUE(s.files[0].digest && strcmp(s.files[0].digest + 7, f.sha) == 0);
  EXPECT_TRUE(s.completed_at > 0 && s.started_at > 0);
  EXPECT_TRUE(s.error == NULL);
  pull_status_free(&s);
  char p[800];
  snprintf(p, sizeof p, "%s/t@1/model.gguf", md);
  EXPECT_INT_EQ(file_size(p), (int64_t)f.len);
  EXPECT_INT_EQ(pull_cancel(pl, id), ERR_CONFLICT);
  /* A second pull of the same name is a new job that downloads nothing. */
  int before = f.s.n_requests;
  ASSERT_INT_EQ(pull_start(pl, "t:1", NULL, id2, sizeof id2, NULL), 0);
  EXPECT_INT_EQ(wait_final(pl, id2, &s), PULL_COMPLETED);
  pull_status_free(&s);
  EXPECT_INT_EQ(f.s.n_requests, before + 1); /* the manifest only */
  puller_free(pl);

  /* Another puller on the same store (a restart) reports the stored rows. */
  ASSERT_INT_EQ(puller_new(&pc, &pl), 0);
  ASSERT_INT_EQ(pull_get(pl, id, &s), 0);
  EXPECT_INT_EQ(s.state, PULL_COMPLETED);
  EXPECT_STR_EQ(s.name, "t:1");
  EXPECT_STR_EQ(s.model, "t:1");
  EXPECT_INT_EQ(s.bytes_done, (int64_t)f.len);
  pull_status_free(&s);
  pull_status *v = NULL;
  size_t n = 0;
  ASSERT_INT_EQ(pull_list(pl, &v, &n), 0);
  EXPECT_INT_EQ(n, 2);
  pull_list_free(v, n);
  size_t resumed = 9;
  EXPECT_INT_EQ(puller_resume_interrupted(pl, &resumed), 0);
  EXPECT_INT_EQ(resumed, 0);
  puller_free(pl);
  store_close(st);
  fixture_free(&f);
}

TEST(pull_job_cancel_keeps_the_partial_and_a_restart_resumes) {
  dl_fixture f;
  ASSERT_INT_EQ(fixture_init(&f, SRV_SLOW), 0);
  char man[1024];
  snprintf(man, sizeof man,
           "{\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":\"sha256:%s\",\"size\":%zu}]}",
           f.sha, f.len);
  f.s.manifest = man;
  char data[512], md[600], reg_url[64], part[800];
  snprintf(data, sizeof data, "%s/data", test_tmpdir());
  snprintf(md, sizeof md, "%s/models", data);
  snprintf(part, sizeof part, "%s/t@1/model.gguf.partial", md);
  snprintf(reg_url, sizeof reg_url, "http://127.0.0.1:%d", f.s.port);
  store *st = NULL;
  ASSERT_INT_EQ(store_open(data, &st), 0);
  puller *pl = NULL;
  pull_config pc = {.models_dir = md, .st = st, .ollama_registry = reg_url};
  ASSERT_INT_EQ(puller_new(&pc, &pl), 0);
  char id[PULL_ID_CAP];
  ASSERT_INT_EQ(pull_start(pl, "t:1", NULL, id, sizeof id, NULL), 0);
  pull_status s;
  bool moving = false;
  for (int i = 0; i < 200 && !moving; i++) {
    pull_wait(pl, id, 50);
    ASSERT_INT_EQ(pull_get(pl, id, &s), 0);
    moving = s.state == PULL_DOWNLOADING && s.bytes_done > 0;
    if (moving) {
      EXPECT_INT_EQ(s.bytes_total, (int64_t)f.len);
      ASSERT_INT_EQ(s.n_files, 1);
      EXPECT_INT_EQ(s.current, 0);
    }
    pull_status_free(&s);
  }
  ASSERT_TRUE(moving);
  EXPECT_INT_EQ(pull_cancel(pl, id), 0);
  EXPECT_INT_EQ(wait_final(pl, id, &s), PULL_CANCELLED);
  EXPECT_INT_EQ(s.err_code, ERR_CANCELLED);
  pull_status_free(&s);
  int64_t kept = file_size(part);
  EXPECT_TRUE(kept > 0 && kept < (int64_t)f.len);

  /* Shutting down mid-download leaves the row unfinished; the next puller
   * resumes it from the .partial. */
  char id2[PULL_ID_CAP];
  ASSERT_INT_EQ(pull_start(pl, "t:1", NULL, id2, sizeof id2, NULL), 0);
  for (int i = 0; i < 200; i++) {
    pull_wait(pl, id2, 50);
    ASSERT_INT_EQ(pull_get(pl, id2, &s), 0);
    bool more = s.bytes_done > kept;
    pull_status_free(&s);
    if (more) break;
  }
  puller_free(pl);
  store_job row = {0};
  ASSERT_INT_EQ(store_job_get(st, id2, &row), 0);
  EXPECT_STR_EQ(row.state, "downloading");
  store_job_free(&row);
  f.s.mode = SRV_NORMAL;
  ASSERT_INT_EQ(puller_new(&pc, &pl), 0);
  size_t resumed = 0;
  EXPECT_INT_EQ(puller_resume_interrupted(pl, &resumed), 0);
  EXPECT_INT_EQ(resumed, 1);
  EXPECT_INT_EQ(wait_final(pl, id2, &s), PULL_COMPLETED);
  pull_status_free(&s);
  EXPECT_TRUE(f.s.last_range > 0);
  char fin[800];
  snprintf(fin, sizeof fin, "%s/t@1/model.gguf", md);
  char got[65];
  ASSERT_INT_EQ(pull_sha256_file(fin, got, sizeof got), 0);
  EXPECT_STR_EQ(got, f.sha);
  EXPECT_INT_EQ(file_size(part), -1);
  puller_free(pl);
  store_close(st);
  fixture_free(&f);
}

/* ---- the fuzz seeds, replayed (tests/fuzz/fuzz_pull.c) ---------------------------------- */

/* Runs one seed through its target; returns 1 when the parser accepted it. */
static int replay_pull_seed(const unsigned char *in, size_t n) {
  if (n < 1) return 0;
  char s[4096];
  size_t k = n - 1 < sizeof s - 1 ? n - 1 : sizeof s - 1;
  memcpy(s, in + 1, k);
  s[k] = 0;
  if (in[0] % 3 == 0) {
    pull_layer l[16];
    size_t nl;
    return pull_ollama_manifest_parse(s, k, l, 16, &nl) == 0;
  }
  if (in[0] % 3 == 1) {
    char *pat = strchr(s, '\n');
    if (pat) *pat++ = 0;
    pull_ref r;
    return pull_ref_parse(s, pat, &r) == 0;
  }
  const char *paths[64];
  size_t np = 0;
  char *nl = strchr(s, '\n');
  if (nl) *nl = 0;
  for (char *p = nl ? nl + 1 : NULL; p && np < 64;) {
    char *e = strchr(p, '\n');
    if (e) *e = 0;
    paths[np++] = p;
    p = e ? e + 1 : NULL;
  }
  size_t idx[8], nm, no;
  return pull_hf_select(paths, np, s[0] == '=' ? NULL : s, s[0] == '=' ? s + 1 : NULL, idx, 8, &nm, &no) == 0;
}

/* Seeds named for a bad input must be rejected; the others accepted. */
static void check_pull_seed(const char *name, const char *path, const unsigned char *in, size_t n, void *ud) {
  (void)ud;
  int ok = replay_pull_seed(in, n);
  bool bad = strstr(name, "bad") || strstr(name, "dotdot") || strstr(name, "object") || strstr(name, "none");
  TEST_CHECK_(ok == !bad, 0, "seed %s: parser %s it", path, ok ? "accepted" : "rejected");
}

TEST(pull_fuzz_seeds_replay) {
  int n_files = test_each_file("tests/fuzz/seeds/pull", 8192, check_pull_seed, NULL);
  if (n_files < 0) TEST_SKIP("tests/fuzz/seeds/pull not found (run from the repository root)");
  EXPECT_INT_GE(n_files, 10);
}
