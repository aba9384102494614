/* test_base.c - tests of base/: buffers, errors, ids, constant-time compare. */
#include "test.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"

TEST(base_buf_append_and_format) {
  buf b = BUF_INIT;
  ASSERT_INT_EQ(buf_append_str(&b, "abc"), 0);
  ASSERT_INT_EQ(buf_appendf(&b, "-%d-%s", 42, "x"), 0);
  EXPECT_STR_EQ(b.data, "abc-42-x");
  EXPECT_INT_EQ(b.len, 8);
  for (int i = 0; i < 1000; i++) ASSERT_INT_EQ(buf_append_byte(&b, 'z'), 0);
  EXPECT_INT_EQ(b.len, 1008);
  EXPECT_INT_EQ(b.data[1008], 0);
  size_t n = 0;
  char *p = buf_detach(&b, &n);
  EXPECT_INT_EQ(n, 1008);
  EXPECT_TRUE(b.data == NULL);
  free(p);
}

TEST(base_buf_reserve_overflow_is_refused) {
  buf b = BUF_INIT;
  ASSERT_INT_EQ(buf_append_str(&b, "x"), 0);
  EXPECT_INT_EQ(buf_reserve(&b, SIZE_MAX), ERR_TOO_LARGE);
  EXPECT_STR_EQ(b.data, "x");
  buf_free(&b);
}

TEST(base_err_table_and_detail) {
  EXPECT_STR_EQ(err_name(ERR_PARSE), "ERR_PARSE");
  EXPECT_STR_EQ(err_name(-999), "ERR_UNKNOWN");
  err_clear();
  EXPECT_STR_EQ(err_detail(), "ok");
  EXPECT_INT_EQ(err_set(ERR_NOT_FOUND, "model %s", "m1"), ERR_NOT_FOUND);
  EXPECT_STR_EQ(err_detail(), "model m1");
  EXPECT_INT_EQ(err_last(), ERR_NOT_FOUND);
}

TEST(base_ids_are_random_hex_with_prefix) {
  char a[64], b[64];
  ASSERT_INT_EQ(id_make(a, sizeof a, "req_", 12), 0);
  ASSERT_INT_EQ(id_make(b, sizeof b, "req_", 12), 0);
  EXPECT_INT_EQ(strlen(a), 28);
  EXPECT_TRUE(strncmp(a, "req_", 4) == 0);
  EXPECT_TRUE(strcmp(a, b) != 0);
  EXPECT_INT_EQ(id_make(a, 10, "req_", 12), ERR_TOO_LARGE);
  char u[40];
  ASSERT_INT_EQ(id_uuid(u, sizeof u), 0);
  EXPECT_INT_EQ(strlen(u), 36);
  EXPECT_INT_EQ(u[14], '4');
}

TEST(base_ct_equal) {
  EXPECT_TRUE(ct_equal("secret", 6, "secret", 6));
  EXPECT_FALSE(ct_equal("secret", 6, "secreT", 6));
  EXPECT_FALSE(ct_equal("secret", 6, "secret1", 7));
  EXPECT_FALSE(ct_equal("", 0, "a", 1));
  EXPECT_TRUE(ct_equal("", 0, "", 0));
}

/* A detail may quote the previous one ("prefix: %s", err_detail()). */
TEST(err_set_may_quote_the_previous_detail) {
  err_set(ERR_IO, "disk %s", "full");
  err_set(ERR_IO, "writing model.gguf: %s", err_detail());
  EXPECT_STR_EQ(err_detail(), "writing model.gguf: disk full");
}

TEST(file_map_ro_maps_and_names_what_is_wrong) {
  char path[600];
  snprintf(path, sizeof path, "%s/f.bin", test_tmpdir());
  const void *base = NULL;
  size_t size = 0;
  /* missing */
  EXPECT_INT_EQ(file_map_ro(path, "who", "thing", 4, &base, &size), ERR_IO);
  EXPECT_STR_CONTAINS(err_detail(), "who: cannot open '");
  EXPECT_TRUE(base == NULL);
  /* a directory */
  EXPECT_INT_EQ(file_map_ro(test_tmpdir(), "who", "thing", 4, &base, &size), ERR_IO);
  EXPECT_STR_CONTAINS(err_detail(), "is not a regular file");
  /* too short, and empty (an empty file cannot be mapped at all) */
  FILE *fp = fopen(path, "wb");
  ASSERT_TRUE(fp != NULL);
  fclose(fp);
  EXPECT_INT_EQ(file_map_ro(path, "who", "thing", 0, &base, &size), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "is not a thing (0 bytes)");
  fp = fopen(path, "wb");
  ASSERT_TRUE(fp != NULL);
  fwrite("abc", 1, 3, fp);
  fclose(fp);
  EXPECT_INT_EQ(file_map_ro(path, "who", "thing", 4, &base, &size), ERR_PARSE);
  EXPECT_STR_CONTAINS(err_detail(), "is not a thing (3 bytes)");
  /* long enough: the bytes, mapped */
  ASSERT_INT_EQ(file_map_ro(path, "who", "thing", 3, &base, &size), 0);
  EXPECT_INT_EQ((long long)size, 3);
  EXPECT_MEM_EQ(base, "abc", 3);
  munmap((void *)base, size);
}

TEST(utf8_lossy_replaces_what_json_cannot_hold) {
  static const struct {
    const char *in, *want;
  } k_cases[] = {
      {"plain", "plain"},
      {"caf\xC3\xA9 \xE2\x98\x83 \xF0\x9F\x98\x80", "caf\xC3\xA9 \xE2\x98\x83 \xF0\x9F\x98\x80"}, /* kept whole */
      /* the fuzz input's bytes: CA lacks its continuation, D9 93 is U+0653, 9E is stray */
      {"v\xCA\xD9\x93\x9Eng", "v\xEF\xBF\xBD\xD9\x93\xEF\xBF\xBDng"},
      {"cut \xE2\x98", "cut \xEF\xBF\xBD\xEF\xBF\xBD"},                            /* a sequence cut short */
      {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},                                    /* overlong '/' */
      {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},                    /* a surrogate */
      {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},    /* past U+10FFFF */
  };
  for (size_t i = 0; i < ARRAY_LEN(k_cases); i++) {
    char *got = str_utf8_lossy(k_cases[i].in);
    ASSERT_TRUE(got != NULL);
    TEST_CHECK_(strcmp(got, k_cases[i].want) == 0, 0, "case %zu", i);
    EXPECT_TRUE(utf8_valid(got, strlen(got)));
    EXPECT_INT_EQ(utf8_valid(k_cases[i].in, strlen(k_cases[i].in)), strcmp(k_cases[i].in, k_cases[i].want) == 0);
    free(got);
  }
  EXPECT_TRUE(str_utf8_lossy(NULL) == NULL);
}

/* Threads that allocate at once: each would get an arena of its own. */
static pthread_barrier_t g_arena_barrier;
static void *arena_churn(void *arg) {
  (void)arg;
  pthread_barrier_wait(&g_arena_barrier);
  void *keep[64]; /* held until every thread has allocated (a malloc/free pair alone is optimised away) */
  for (int i = 0; i < 64; i++) keep[i] = malloc(64 + (size_t)(i % 7) * 200);
  pthread_barrier_wait(&g_arena_barrier);
  for (int i = 0; i < 64; i++) free(keep[i]);
  return NULL;
}

/* Counts the arenas glibc reports (malloc_info's <heap nr=...> elements). */
static int arena_count(void) {
  char *text = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&text, &n);
  if (!f) return -1;
  malloc_info(0, f);
  fclose(f);
  int count = 0;
  for (const char *p = text; (p = strstr(p, "<heap nr=")); p++) count++;
  free(text);
  return count;
}

TEST(malloc_bound_arenas_keeps_allocating_threads_to_two_arenas) {
  if (getenv("MALLOC_ARENA_MAX")) return; /* the environment decides then */
  malloc_bound_arenas(2);
  enum { N = 8 };
  pthread_t t[N];
  pthread_barrier_init(&g_arena_barrier, NULL, N);
  for (int i = 0; i < N; i++) ASSERT_INT_EQ(pthread_create(&t[i], NULL, arena_churn, NULL), 0);
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&g_arena_barrier);
  EXPECT_INT_LE(arena_count(), 2); /* under a sanitizer's allocator glibc reports one */
}

/* Resident bytes of this process from /proc/self/statm. */
static long long rss_now(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long long size = 0, res = 0;
  if (!f) return -1;
  if (fscanf(f, "%lld %lld", &size, &res) != 2) res = -1;
  fclose(f);
  return res * sysconf(_SC_PAGESIZE);
}

/* 48 MiB in 4 KiB blocks, all freed but the last: the heap's top cannot
 * shrink, so glibc keeps the freed pages resident until the trimmer
 * returns them. The same check without the trimmer shows the retention the
 * trimmer is for. */
TEST(malloc_trimmer_returns_freed_pages_below_the_heap_top) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  TEST_SKIP("a sanitizer's allocator replaces glibc's: malloc_trim has nothing to trim");
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  TEST_SKIP("a sanitizer's allocator replaces glibc's: malloc_trim has nothing to trim");
#endif
#endif
  enum { N = 48 * 256, SZ = 4000 };
  char **b = malloc(N * sizeof *b);
  ASSERT_TRUE(b != NULL);
  for (int i = 0; i < N; i++) {
    b[i] = malloc(SZ);
    ASSERT_TRUE(b[i] != NULL);
    memset(b[i], 0x5a, SZ);
  }
  long long full = rss_now();
  for (int i = 0; i < N - 1; i++) free(b[i]);
  usleep(300000);
  long long kept = rss_now(); /* no trimmer yet: still resident */
  EXPECT_TRUE(full - kept < (16ll << 20));
  ASSERT_INT_EQ(malloc_trimmer_start(20), 0);
  long long after = kept;
  for (int w = 0; w < 100 && kept - after < (32ll << 20); w++) {
    usleep(20000);
    after = rss_now();
  }
  malloc_trimmer_stop();
  malloc_trimmer_stop(); /* twice is harmless */
  EXPECT_TRUE(kept - after >= (32ll << 20));
  free(b[N - 1]);
  free(b);
}
