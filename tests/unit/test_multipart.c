/*
 * test_multipart.c - tests of http/multipart: boundary extraction, bodies in
 * the shape real clients send, every chunk split, binary data that looks like
 * a boundary, and a catalogue of bad inputs that must give clean errors.
 *
 * Expectations are written by hand (names, data bytes, error codes and
 * messages); the recorder below only serializes what the callbacks saw.
 */
#include "test.h"

#include <stdlib.h>

#include "base/buf.h"
#include "base/err.h"
#include "http/multipart.h"

/* ---- recorder: turns callbacks into one comparable string --------------- */

typedef struct rec {
  buf log;        /* "B name|filename|ct\n" "D<len>:<bytes>\n" per part, "E\n" */
  buf data;       /* data of the current part, joined */
  int n_data_calls;
  int stop_at_part; /* on_part_begin returns 99 on this part (1-based); 0 = never */
  int n_begun;
} rec;

static int rec_begin(void *ctx, const char *name, const char *filename, const char *ct) {
  rec *r = ctx;
  r->n_begun++;
  buf_appendf(&r->log, "B %s|%s|%s\n", name ? name : "(null)", filename ? filename : "(null)",
              ct ? ct : "(null)");
  buf_reset(&r->data);
  return r->n_begun == r->stop_at_part ? 99 : 0;
}

static int rec_data(void *ctx, const char *d, size_t n) {
  rec *r = ctx;
  r->n_data_calls++;
  if (n == 0) buf_append_str(&r->log, "ZERO-LENGTH-DATA\n");
  buf_append(&r->data, d, n);
  return 0;
}

static int rec_end(void *ctx) {
  rec *r = ctx;
  buf_appendf(&r->log, "D%zu:", r->data.len);
  buf_append(&r->log, r->data.data ? r->data.data : "", r->data.len);
  buf_append_str(&r->log, "\nE\n");
  buf_reset(&r->data);
  return 0;
}

static const mp_callbacks rec_cb = {rec_begin, rec_data, rec_end};

/* Feeds body split at the given cut points (ascending), then finish.
 * Returns a malloc'd "rc=<code>\n<log>" plus the error detail on failure. */
static char *run_cuts(const char *boundary, const char *body, size_t len, const size_t *cuts, int n_cuts) {
  rec r = {BUF_INIT, BUF_INIT, 0, 0, 0};
  mp_parser *p = NULL;
  int rc = mp_parser_new(boundary, &rec_cb, &r, &p);
  size_t pos = 0;
  for (int i = 0; i <= n_cuts && rc == 0; i++) {
    size_t to = i < n_cuts ? cuts[i] : len;
    rc = mp_parser_feed(p, body + pos, to - pos);
    pos = to;
  }
  if (rc == 0) rc = mp_parser_finish(p);
  mp_parser_free(p);
  buf out = BUF_INIT;
  buf_appendf(&out, "rc=%s\n", err_name(rc));
  buf_append(&out, r.log.data ? r.log.data : "", r.log.len);
  if (rc < 0) buf_appendf(&out, "detail=%s\n", err_detail());
  buf_free(&r.log);
  buf_free(&r.data);
  return buf_detach(&out, NULL);
}

static char *run_chunked(const char *boundary, const char *body, size_t len, size_t chunk) {
  size_t n = len / chunk + 1;
  size_t *cuts = malloc(n * sizeof *cuts);
  int nc = 0;
  for (size_t at = chunk; at < len; at += chunk) cuts[nc++] = at;
  char *s = run_cuts(boundary, body, len, cuts, nc);
  free(cuts);
  return s;
}

/* One expected part. */
typedef struct exp_part {
  const char *name, *filename, *ct;
  const char *data;
  size_t data_len;
} exp_part;

/* The recorder's string for a successful parse of parts[0..n) (test-side
 * serializer of hand-written expectations). */
static char *expect_string(const exp_part *parts, int n) {
  buf b = BUF_INIT;
  buf_append_str(&b, "rc=ERR_OK\n");
  for (int i = 0; i < n; i++) {
    buf_appendf(&b, "B %s|%s|%s\n", parts[i].name, parts[i].filename ? parts[i].filename : "(null)",
                parts[i].ct ? parts[i].ct : "(null)");
    buf_appendf(&b, "D%zu:", parts[i].data_len);
    buf_append(&b, parts[i].data, parts[i].data_len);
    buf_append_str(&b, "\nE\n");
  }
  return buf_detach(&b, NULL);
}

/* Checks that body gives `want` whole, split in two at every point, split in
 * three at a spread of points, and in 1-byte chunks. Returns failures seen. */
static int check_all_splits(const char *boundary, const char *body, size_t len, const char *want) {
  int bad = 0;
  char *got = run_cuts(boundary, body, len, NULL, 0);
  if (strcmp(got, want) != 0) {
    test_fail_at(__FILE__, __LINE__, "whole body:\n got: %s\nwant: %s", got, want);
    bad++;
  }
  free(got);
  for (size_t cut = 0; cut <= len && bad < 3; cut++) {
    got = run_cuts(boundary, body, len, &cut, 1);
    if (strcmp(got, want) != 0) {
      test_fail_at(__FILE__, __LINE__, "split at %zu:\n got: %s\nwant: %s", cut, got, want);
      bad++;
    }
    free(got);
  }
  for (size_t a = 0; a <= len && bad < 3; a += 7) {
    for (size_t c = a; c <= len && bad < 3; c += 5) {
      size_t cuts[2] = {a, c};
      got = run_cuts(boundary, body, len, cuts, 2);
      if (strcmp(got, want) != 0) {
        test_fail_at(__FILE__, __LINE__, "split at %zu,%zu:\n got: %s\nwant: %s", a, c, got, want);
        bad++;
      }
      free(got);
    }
  }
  for (size_t chunk = 1; chunk <= 3; chunk++) {
    got = run_chunked(boundary, body, len, chunk);
    if (strcmp(got, want) != 0) {
      test_fail_at(__FILE__, __LINE__, "%zu-byte chunks:\n got: %s\nwant: %s", chunk, got, want);
      bad++;
    }
    free(got);
  }
  return bad;
}

/* Runs body whole and in 1-byte chunks; both must fail with code and a
 * detail containing `detail`. */
static void check_error(const char *boundary, const char *body, size_t len, int code, const char *detail) {
  for (int mode = 0; mode < 2; mode++) {
    char *got = mode == 0 ? run_cuts(boundary, body, len, NULL, 0) : run_chunked(boundary, body, len, 1);
    char want_rc[64];
    snprintf(want_rc, sizeof want_rc, "rc=%s\n", err_name(code));
    TEST_CHECK_(strncmp(got, want_rc, strlen(want_rc)) == 0, 0, "%s: got %s, want %s", mode ? "1-byte" : "whole",
                got, want_rc);
    EXPECT_STR_CONTAINS(got, detail);
    free(got);
  }
}

#define S(lit) lit, sizeof(lit) - 1

/* ---- boundary from Content-Type ---------------------------------------- */

TEST(multipart_boundary_forms) {
  char b[MP_BOUNDARY_MAX + 1];
  ASSERT_INT_EQ(mp_boundary_from_content_type("multipart/form-data; boundary=----formdata-undici-0123456789", b, sizeof b), 0);
  EXPECT_STR_EQ(b, "----formdata-undici-0123456789");
  ASSERT_INT_EQ(mp_boundary_from_content_type("multipart/form-data; boundary=\"a b:c\"", b, sizeof b), 0);
  EXPECT_STR_EQ(b, "a b:c");
  ASSERT_INT_EQ(mp_boundary_from_content_type("Multipart/Form-Data;charset=utf-8;BOUNDARY=xyz ; foo=bar", b, sizeof b), 0);
  EXPECT_STR_EQ(b, "xyz");
  /* a "boundary=" inside another parameter's quoted value is not the boundary */
  ASSERT_INT_EQ(mp_boundary_from_content_type("multipart/form-data; x=\"a;boundary=evil\"; boundary=good", b, sizeof b), 0);
  EXPECT_STR_EQ(b, "good");
  ASSERT_INT_EQ(mp_boundary_from_content_type("multipart/form-data; boundary=\"q\\\"x\"", b, sizeof b), 0);
  EXPECT_STR_EQ(b, "q\"x");
  /* exactly 70 characters is allowed, 71 is not */
  char ct[200];
  snprintf(ct, sizeof ct, "multipart/form-data; boundary=%070d", 7);
  ASSERT_INT_EQ(mp_boundary_from_content_type(ct, b, sizeof b), 0);
  EXPECT_INT_EQ(strlen(b), 70);
  snprintf(ct, sizeof ct, "multipart/form-data; boundary=%071d", 7);
  EXPECT_INT_EQ(mp_boundary_from_content_type(ct, b, sizeof b), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "71 characters");
}

TEST(multipart_boundary_errors) {
  char b[MP_BOUNDARY_MAX + 1];
  EXPECT_INT_EQ(mp_boundary_from_content_type("multipart/form-data", b, sizeof b), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "no boundary parameter");
  EXPECT_INT_EQ(mp_boundary_from_content_type("multipart/form-data; charset=utf-8", b, sizeof b), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "no boundary parameter");
  EXPECT_INT_EQ(mp_boundary_from_content_type("application/json; boundary=x", b, sizeof b), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "not multipart");
  EXPECT_INT_EQ(mp_boundary_from_content_type("multipart/form-data; boundary=", b, sizeof b), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "empty");
  EXPECT_INT_EQ(mp_boundary_from_content_type("multipart/form-data; boundary=\"\"", b, sizeof b), ERR_PARSE);
  EXPECT_INT_EQ(mp_boundary_from_content_type("multipart/form-data; boundary=\"abc", b, sizeof b), ERR_PARSE);
  EXPECT_INT_EQ(mp_boundary_from_content_type("multipart/form-data; boundary=a\x01" "b", b, sizeof b), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "0x01");
  EXPECT_INT_EQ(mp_boundary_from_content_type(NULL, b, sizeof b), ERR_PARSE);
  EXPECT_INT_EQ(mp_boundary_from_content_type("multipart/form-data; boundary=abcdef", b, 4), ERR_INVALID);
}

TEST(multipart_parser_new_rejects_bad_boundary) {
  mp_parser *p = (mp_parser *)1;
  EXPECT_INT_EQ(mp_parser_new("", &rec_cb, NULL, &p), ERR_INVALID);
  EXPECT_TRUE(p == NULL);
  EXPECT_INT_EQ(mp_parser_new("a\r\nb", &rec_cb, NULL, &p), ERR_INVALID);
  char big[80];
  memset(big, 'x', 71);
  big[71] = 0;
  EXPECT_INT_EQ(mp_parser_new(big, &rec_cb, NULL, &p), ERR_INVALID);
  big[70] = 0;
  ASSERT_INT_EQ(mp_parser_new(big, NULL, NULL, &p), 0);
  mp_parser_free(p);
  mp_parser_free(NULL);
}

/* ---- good bodies -------------------------------------------------------- */

/* The exact serialization of undici's FormData (Node fetch; the OpenAI SDK
 * sends audio/files uploads through it): CRLF everywhere, each entry ends
 * with CRLF, files carry a Content-Type, and the body ends "--b--\r\n". */
static const char undici_body[] =
    "------formdata-undici-0123456789\r\n"
    "Content-Disposition: form-data; name=\"model\"\r\n"
    "\r\n"
    "whisper-1\r\n"
    "------formdata-undici-0123456789\r\n"
    "Content-Disposition: form-data; name=\"response_format\"\r\n"
    "\r\n"
    "verbose_json\r\n"
    "------formdata-undici-0123456789\r\n"
    "Content-Disposition: form-data; name=\"file\"; filename=\"speech.wav\"\r\n"
    "Content-Type: audio/wav\r\n"
    "\r\n"
    "RIFF\x24\x00\x00\x00WAVEfmt \r\n--\r\n\x00\xff\r\n"
    "------formdata-undici-0123456789--\r\n";

TEST(multipart_undici_formdata_every_split) {
  char ct[128];
  ASSERT_INT_EQ(mp_boundary_from_content_type("multipart/form-data; boundary=----formdata-undici-0123456789", ct, sizeof ct), 0);
  static const char wav[] = "RIFF\x24\x00\x00\x00WAVEfmt \r\n--\r\n\x00\xff";
  exp_part parts[] = {
      {"model", NULL, NULL, S("whisper-1")},
      {"response_format", NULL, NULL, S("verbose_json")},
      {"file", "speech.wav", "audio/wav", wav, sizeof wav - 1},
  };
  char *want = expect_string(parts, 3);
  EXPECT_INT_EQ(check_all_splits(ct, undici_body, sizeof undici_body - 1, want), 0);
  free(want);
}

TEST(multipart_binary_data_that_looks_like_a_boundary) {
  /* Data holds CR, LF, "--", "\r\n--", and prefixes of the delimiter right
   * up to one byte short of it, including at the very end of the part. */
  static const char data[] =
      "\r\n\r\r\n\n--\r\n--\n--b\r\n--bo\r\n--bou\r\n--boun\r\n--bound\r\n--bounda\r--boundary\n-boundary"
      "x--boundary\r\n-\r\n--bounda";
  static const char body[] =
      "--boundary\r\n"
      "Content-Disposition: form-data; name=\"bin\"; filename=\"x.bin\"\r\n"
      "Content-Type: application/octet-stream\r\n"
      "\r\n"
      "\r\n\r\r\n\n--\r\n--\n--b\r\n--bo\r\n--bou\r\n--boun\r\n--bound\r\n--bounda\r--boundary\n-boundary"
      "x--boundary\r\n-\r\n--bounda"
      "\r\n--boundary\r\n"
      "Content-Disposition: form-data; name=\"cr_end\"\r\n"
      "\r\n"
      "ends in CR\r"
      "\r\n--boundary\r\n"
      "Content-Disposition: form-data; name=\"crlf_end\"\r\n"
      "\r\n"
      "ends in CRLF\r\n"
      "\r\n--boundary--";
  exp_part parts[] = {
      {"bin", "x.bin", "application/octet-stream", data, sizeof data - 1},
      {"cr_end", NULL, NULL, S("ends in CR\r")},
      {"crlf_end", NULL, NULL, S("ends in CRLF\r\n")},
  };
  char *want = expect_string(parts, 3);
  EXPECT_INT_EQ(check_all_splits("boundary", body, sizeof body - 1, want), 0);
  free(want);
}

TEST(multipart_empty_parts_and_filenames) {
  static const char body[] =
      "--XyZ\r\n"
      "Content-Disposition: form-data; name=\"empty\"\r\n"
      "\r\n"
      "\r\n--XyZ\r\n"
      "content-disposition: FORM-DATA; name=\"\"; filename=\"\"\r\n"
      "\r\n"
      "\r\n--XyZ\r\n"
      "Content-Disposition: form-data; name=\"f\"; filename=\"old.txt\"; filename*=UTF-8''%E2%82%AC%20rates.txt\r\n"
      "CONTENT-TYPE:text/plain; charset=utf-8  \r\n"
      "X-Other: ignored\r\n"
      "\r\n"
      "euro\r\n--XyZ\r\n"
      "Content-Disposition: form-data; filename*=iso-8859-1'en'%E9t%E9.txt; name=latin\r\n"
      "\r\n"
      "x\r\n--XyZ--\r\n";
  exp_part parts[] = {
      {"empty", NULL, NULL, S("")},
      {"", "", NULL, S("")},
      {"f", "\xe2\x82\xac rates.txt", "text/plain; charset=utf-8", S("euro")},
      {"latin", "\xc3\xa9t\xc3\xa9.txt", NULL, S("x")},
  };
  char *want = expect_string(parts, 4);
  EXPECT_INT_EQ(check_all_splits("XyZ", body, sizeof body - 1, want), 0);
  free(want);
}

TEST(multipart_preamble_padding_epilogue_bare_lf_escapes) {
  static const char body[] =
      "This is the preamble. --XyZ is not at a line start.\r\n"
      "--XyZnot-a-delimiter-either? no: this line is preamble too\r\n"
      "--XyZ \t \r\n"
      "Content-Disposition: form-data; name=\"a\\\"b\\\\c\";filename=C:\\dir\\f.txt\n"
      "Content-Type : image/png\n"
      "\n"
      "lf body\n--XyZ\t\n"
      "Content-Disposition: form-data;name=\"semi;colon\"\r\n"
      "\n"
      "mixed\r\n--XyZ--  trailing junk\r\nepilogue --XyZ\r\nignored";
  exp_part parts[] = {
      {"a\"b\\c", "C:\\dir\\f.txt", "image/png", S("lf body")},
      {"semi;colon", NULL, NULL, S("mixed")},
  };
  char *want = expect_string(parts, 2);
  /* The second preamble line starts with "--XyZ" followed by "n": that is a
   * delimiter followed by junk, which RFC 2046 forbids; we report it. */
  char *got = run_cuts("XyZ", body, sizeof body - 1, NULL, 0);
  EXPECT_STR_CONTAINS(got, "rc=ERR_PARSE");
  EXPECT_STR_CONTAINS(got, "boundary 1 (\"--XyZ\") is followed by byte 0x6e");
  free(got);
  /* Without that line the rest parses. */
  const char *second = strstr(body, "--XyZnot");
  const char *third = strstr(second, "\r\n") + 2;
  buf b = BUF_INIT;
  buf_append(&b, body, (size_t)(second - body));
  buf_append_str(&b, third);
  EXPECT_INT_EQ(check_all_splits("XyZ", b.data, b.len, want), 0);
  buf_free(&b);
  free(want);
}

TEST(multipart_empty_form_and_no_trailing_crlf) {
  /* undici's serialization of an empty FormData */
  char *got = run_cuts("b", S("--b--\r\n"), NULL, 0);
  EXPECT_STR_EQ(got, "rc=ERR_OK\n");
  free(got);
  exp_part one[] = {{"k", NULL, NULL, S("v")}};
  char *want = expect_string(one, 1);
  EXPECT_INT_EQ(check_all_splits("b", S("--b\r\nContent-Disposition: form-data; name=k\r\n\r\nv\r\n--b--"), want), 0);
  free(want);
}

/* A large part arrives in pieces while it is fed (never buffered whole), and
 * the parser holds back no more than boundary length + 4 bytes. */
static size_t stream_seen;
static int stream_data(void *ctx, const char *d, size_t n) {
  (void)ctx;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)d[i] != (unsigned char)((stream_seen + i) * 31u % 251u)) return ERR_CORRUPT;
  stream_seen += n;
  return 0;
}

TEST(multipart_large_part_streams) {
  const char *bnd = "----formdata-undici-0123456789";
  mp_callbacks cb = {NULL, stream_data, NULL};
  mp_parser *p = NULL;
  ASSERT_INT_EQ(mp_parser_new(bnd, &cb, NULL, &p), 0);
  stream_seen = 0;
  char head[256];
  int hn = snprintf(head, sizeof head, "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n\r\n", bnd);
  ASSERT_INT_EQ(mp_parser_feed(p, head, (size_t)hn), 0);
  const size_t total = 3u << 20, chunk = 65536;
  char *blk = malloc(chunk);
  size_t fed = 0;
  while (fed < total) {
    for (size_t i = 0; i < chunk; i++) blk[i] = (char)((fed + i) * 31u % 251u);
    ASSERT_INT_EQ(mp_parser_feed(p, blk, chunk), 0);
    fed += chunk;
    /* everything but the held-back tail has been delivered */
    EXPECT_INT_EQ(stream_seen, fed - (strlen(bnd) + 4));
  }
  free(blk);
  char foot[128];
  int fn = snprintf(foot, sizeof foot, "\r\n--%s--\r\n", bnd);
  ASSERT_INT_EQ(mp_parser_feed(p, foot, (size_t)fn), 0);
  EXPECT_INT_EQ(mp_parser_finish(p), 0);
  EXPECT_INT_EQ(stream_seen, total);
  mp_parser_free(p);
}

TEST(multipart_callback_stop_is_returned_and_sticky) {
  rec r = {BUF_INIT, BUF_INIT, 0, 2, 0};
  mp_parser *p = NULL;
  ASSERT_INT_EQ(mp_parser_new("----formdata-undici-0123456789", &rec_cb, &r, &p), 0);
  EXPECT_INT_EQ(mp_parser_feed(p, undici_body, sizeof undici_body - 1), 99);
  EXPECT_INT_EQ(r.n_begun, 2);
  EXPECT_INT_EQ(mp_parser_feed(p, "x", 1), 99);
  EXPECT_INT_EQ(mp_parser_finish(p), 99);
  mp_parser_free(p);
  buf_free(&r.log);
  buf_free(&r.data);
}

/* ---- bad bodies ---------------------------------------------------------- */

TEST(multipart_error_body_without_boundary) {
  check_error("XyZ", S(""), ERR_PARSE, "body has no boundary \"--XyZ\"");
  check_error("XyZ", S("hello world, no multipart here\r\n"), ERR_PARSE, "body has no boundary \"--XyZ\"");
  check_error("XyZ", S("--other\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--other--\r\n"), ERR_PARSE,
              "body has no boundary");
  /* garbage longer than the preamble limit fails early, before finish */
  buf b = BUF_INIT;
  for (int i = 0; i < MP_PREAMBLE_MAX / 8 + 8; i++) buf_append_str(&b, "garbage\n");
  mp_parser *p = NULL;
  ASSERT_INT_EQ(mp_parser_new("XyZ", NULL, NULL, &p), 0);
  EXPECT_INT_EQ(mp_parser_feed(p, b.data, b.len), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "in the first 16384 bytes");
  mp_parser_free(p);
  buf_free(&b);
}

TEST(multipart_error_truncated) {
  check_error("b", S("--b"), ERR_PARSE, "body ended right after boundary 1");
  check_error("b", S("--b\r\nContent-Disposition: form-da"), ERR_PARSE, "body ended inside the headers of part 1");
  check_error("b", S("--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b\r\n"
                     "Content-Disposition: form-data; name=\"file\"\r\n\r\npartial data\r\n--"),
              ERR_PARSE, "multipart: body ended inside part 2 (\"file\")");
  check_error("b", S("--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b\r\n"), ERR_PARSE,
              "body ended after part 1 without the closing \"--b--\"");
  check_error("b", S("--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b-"), ERR_PARSE,
              "body ended right after boundary 2");
}

TEST(multipart_error_bad_headers) {
  check_error("b", S("--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--"), ERR_PARSE,
              "part 1 has no Content-Disposition header");
  check_error("b", S("--b\r\n\r\nx\r\n--b--"), ERR_PARSE, "part 1 has no Content-Disposition header");
  check_error("b", S("--b\r\nContent-Disposition: form-data; filename=\"a.txt\"\r\n\r\nx\r\n--b--"), ERR_PARSE,
              "part 1 Content-Disposition has no name parameter");
  check_error("b", S("--b\r\nContent-Disposition: form-data; name\r\n\r\nx\r\n--b--"), ERR_PARSE,
              "no name parameter");
  check_error("b", S("--b\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--b--"), ERR_PARSE,
              "expected form-data");
  check_error("b", S("--b\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--b--"), ERR_PARSE,
              "malformed parameters");
  check_error("b", S("--b\r\nContent-Disposition: form-data; name=\"a\"x\r\n\r\nx\r\n--b--"), ERR_PARSE,
              "malformed parameters");
  check_error("b", S("--b\r\nno colon here\r\n\r\nx\r\n--b--"), ERR_PARSE, "part 1 header line 1 has no ':'");
  check_error("b", S("--b\r\nContent-Disposition: form-data;\r\n name=a\r\n\r\nx\r\n--b--"), ERR_PARSE,
              "header line 2 is folded");
  check_error("b", S("--b\r\nContent-Disposition: form-data; name=a\x00z\r\n\r\nx\r\n--b--"), ERR_PARSE,
              "control byte 0x00");
  check_error("b", S("--b\r\nContent-Disposition: form-data; name=a; filename*=UTF-8''%4\r\n\r\nx\r\n--b--"),
              ERR_PARSE, "bad percent escape");
  check_error("b", S("--b\r\nContent-Disposition: form-data; name=a; filename*=UTF-8''a%00b\r\n\r\nx\r\n--b--"),
              ERR_PARSE, "control byte 0x00");
  check_error("b", S("--b\r\nContent-Disposition: form-data; name=a; filename*=koi8-r''x\r\n\r\nx\r\n--b--"),
              ERR_PARSE, "charset \"koi8-r\"");
  check_error("b", S("--b\r\nContent-Disposition: form-data; name=a; filename*=x.txt\r\n\r\nx\r\n--b--"),
              ERR_PARSE, "charset'language'value");
  check_error("b", S("--bX\r\n"), ERR_PARSE, "boundary 1 (\"--b\") is followed by byte 0x58");
  check_error("b", S("--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b-x"), ERR_PARSE,
              "boundary 2 (\"--b\") is followed by byte 0x78");
  check_error("b", S("--b\rX"), ERR_PARSE, "followed by byte 0x58");
}

TEST(multipart_error_header_block_too_big) {
  buf b = BUF_INIT;
  buf_append_str(&b, "--b\r\nContent-Disposition: form-data; name=a\r\nX-Pad: ");
  /* the header block is exactly MP_HEADER_MAX bytes: accepted */
  size_t block_start = strlen("--b\r\n");
  while (b.len - block_start < MP_HEADER_MAX - 4) buf_append_byte(&b, 'p');
  buf_append_str(&b, "\r\n\r\n");
  EXPECT_INT_EQ(b.len - block_start, MP_HEADER_MAX);
  buf_append_str(&b, "v\r\n--b--\r\n");
  exp_part one[] = {{"a", NULL, NULL, S("v")}};
  char *want = expect_string(one, 1);
  char *got = run_cuts("b", b.data, b.len, NULL, 0);
  EXPECT_STR_EQ(got, want);
  free(got);
  got = run_chunked("b", b.data, b.len, 1);
  EXPECT_STR_EQ(got, want);
  free(got);
  free(want);
  /* one byte more: refused */
  buf_reset(&b);
  buf_append_str(&b, "--b\r\nContent-Disposition: form-data; name=a\r\nX-Pad: ");
  while (b.len - block_start < MP_HEADER_MAX - 3) buf_append_byte(&b, 'p');
  buf_append_str(&b, "\r\n\r\nv\r\n--b--\r\n");
  check_error("b", b.data, b.len, ERR_TOO_LARGE, "headers of part 1 exceed 16384 bytes");
  /* a header that never ends is refused at the limit, not at finish */
  buf_reset(&b);
  buf_append_str(&b, "--b\r\nContent-Disposition: form-data; name=a\r\nX-Pad: ");
  for (int i = 0; i < 20000; i++) buf_append_byte(&b, 'p');
  mp_parser *p = NULL;
  ASSERT_INT_EQ(mp_parser_new("b", NULL, NULL, &p), 0);
  EXPECT_INT_EQ(mp_parser_feed(p, b.data, b.len), ERR_TOO_LARGE);
  mp_parser_free(p);
  buf_free(&b);
}

TEST(multipart_error_too_many_parts) {
  buf b = BUF_INIT;
  for (int i = 0; i < MP_PARTS_MAX; i++) buf_appendf(&b, "--b\r\nContent-Disposition: form-data; name=f%d\r\n\r\n%d\r\n", i, i);
  size_t at_limit = b.len;
  buf_append_str(&b, "--b--\r\n");
  rec r = {BUF_INIT, BUF_INIT, 0, 0, 0};
  mp_parser *p = NULL;
  ASSERT_INT_EQ(mp_parser_new("b", &rec_cb, &r, &p), 0);
  EXPECT_INT_EQ(mp_parser_feed(p, b.data, b.len), 0);
  EXPECT_INT_EQ(mp_parser_finish(p), 0);
  EXPECT_INT_EQ(r.n_begun, MP_PARTS_MAX);
  mp_parser_free(p);
  buf_free(&r.log);
  buf_free(&r.data);
  /* part 1001 */
  b.len = at_limit;
  buf_append_str(&b, "--b\r\nContent-Disposition: form-data; name=extra\r\n\r\nx\r\n--b--\r\n");
  ASSERT_INT_EQ(mp_parser_new("b", NULL, NULL, &p), 0);
  EXPECT_INT_EQ(mp_parser_feed(p, b.data, b.len), ERR_TOO_LARGE);
  EXPECT_STR_CONTAINS(err_detail(), "more than 1000 parts");
  mp_parser_free(p);
  buf_free(&b);
}

/* ---- fuzz inputs as regression tests -------------------------------------- */

/* Replays every file of tests/fuzz/seeds/multipart/ (seeds, and crash inputs
 * copied there after a fix) with the harness's layout (see
 * tests/fuzz/fuzz_multipart.c): the body must give the same result whole, in
 * the chunks the input chose, split at every point, and in 1-byte chunks.
 * Under SAN=1 this also replays them under ASan/UBSan. */

static int replay_one(const unsigned char *in, size_t size) {
  if (size < 1) return 0;
  if (in[0] & 0x80) {
    char ct[4096], out[MP_BOUNDARY_MAX + 1];
    size_t n = size - 1 < sizeof ct - 1 ? size - 1 : sizeof ct - 1;
    memcpy(ct, in + 1, n);
    ct[n] = '\0';
    int rc = mp_boundary_from_content_type(ct, out, sizeof out);
    return rc == 0 || rc == ERR_PARSE ? 0 : 1;
  }
  size_t n_chunks = in[0] & 7;
  if (size < 1 + n_chunks) return 0;
  const char *boundary = (in[0] & 0x40) ? "X" : "fuzzb";
  const char *body = (const char *)in + 1 + n_chunks;
  size_t len = size - 1 - n_chunks, cuts[8], pos = 0;
  for (size_t i = 0; i < n_chunks; i++) {
    pos += in[1 + i];
    cuts[i] = pos < len ? pos : len;
  }
  char *want = run_cuts(boundary, body, len, NULL, 0);
  char *got = run_cuts(boundary, body, len, cuts, (int)n_chunks);
  int bad = strcmp(got, want) != 0;
  free(got);
  if (!bad) bad = check_all_splits(boundary, body, len, want);
  free(want);
  return bad;
}

static void replay_seed(const char *name, const char *path, const unsigned char *in, size_t n, void *ud) {
  (void)name, (void)ud;
  TEST_CHECK_(replay_one(in, n) == 0, 0, "fuzz input %s: results differ", path);
}

TEST(multipart_fuzz_seeds_replay) {
  int n_files = test_each_file("tests/fuzz/seeds/multipart", 65536, replay_seed, NULL);
  if (n_files < 0) TEST_SKIP("tests/fuzz/seeds/multipart not found (run from the repository root)");
  EXPECT_INT_GE(n_files, 10);
}
