/*
 * test.h - the C unit-test harness: named tests that register themselves,
 * typed assertions that print both sides, and skips with a reason.
 *
 * A test file writes
 *     TEST(buf_append_grows) { buf b = BUF_INIT; EXPECT_INT_EQ(buf_append(&b, "x", 1), 0); ... }
 * and is picked up by the Makefile (every .c under tests/unit) with no list to edit.
 * The runner (main.c) forks a process per test with a time limit, so a crash
 * or a leak in one test never hides another; `build/unit-tests NAME...` runs
 * only the named tests (a trailing '*' matches a prefix).
 *
 * EXPECT_* records a failure and continues; ASSERT_* records and returns from
 * the test. TEST_SKIP("why") ends the test as skipped.
 */
#ifndef PARLEY_TEST_H
#define PARLEY_TEST_H

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*test_fn)(void);
void test_register(const char *name, const char *file, test_fn fn);
void test_fail_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void test_skip(const char *why);
/* Path of a file under ../shared (or $PARLEY_SHARED), or NULL when the
 * shared folder is absent. The returned string is static per call site use. */
const char *test_shared_path(const char *rel, char *out, size_t cap);
/* A fresh empty directory for this test's files, removed after the test. */
const char *test_tmpdir(void);
/* Calls fn for every file of dir whose name does not start with '.' (the
 * fuzz seed folders), in directory order, with its first max bytes (name:
 * the file's name, path: dir/name). Returns how many files were read, -1
 * when dir cannot be opened. */
/* The whole file, NUL-terminated, malloc'd (its length in *len when len is
 * not NULL), or NULL when it cannot be read. */
char *test_read_file(const char *path, size_t *len);
/* Runs fn(argc, argv) (a command's entry point) with stdout and stderr
 * captured into files of test_tmpdir(); returns its exit status, *out and
 * *err get what it wrote (malloc'd, the caller frees). -100 when the
 * capture could not be set up. */
int test_capture(int (*fn)(int, char **), int argc, const char **argv, char **out, char **err);
typedef void (*test_file_fn)(const char *name, const char *path, const unsigned char *data, size_t n, void *ud);
int test_each_file(const char *dir, size_t max, test_file_fn fn, void *ud);
extern int test_failed_flag;
/* Worker processes the tests start run this same binary as
 * `unit-tests __worker NAME ARGS...`; a test file registers the entry point
 * of NAME with TEST_WORKER, so the runner links with any subset of the test
 * files (the arm64 kernel-test build has no speech or pool tests). */
typedef int (*test_worker_fn)(int argc, char **argv);
void test_register_worker(const char *name, test_worker_fn fn);
#define TEST_WORKER(name, fn)                                                   \
  __attribute__((constructor)) static void test_worker_reg_##fn(void) {         \
    test_register_worker(name, fn);                                             \
  }

#define TEST(name)                                                              \
  static void test_##name(void);                                                \
  __attribute__((constructor)) static void test_reg_##name(void) {              \
    test_register(#name, __FILE__, test_##name);                                \
  }                                                                             \
  static void test_##name(void)

#define TEST_SKIP(why) do { test_skip(why); return; } while (0)

#define TEST_CHECK_(cond, fatal, ...)                                           \
  do {                                                                          \
    if (!(cond)) {                                                              \
      test_fail_at(__FILE__, __LINE__, __VA_ARGS__);                            \
      if (fatal) return;                                                        \
    }                                                                           \
  } while (0)

#define TEST_INT_CMP_(a, op, b, fatal)                                          \
  do {                                                                          \
    long long a_ = (long long)(a), b_ = (long long)(b);                         \
    TEST_CHECK_(a_ op b_, fatal, "%s %s %s: left %lld, right %lld", #a, #op, #b, \
                a_, b_);                                                        \
  } while (0)

#define TEST_STR_EQ_(a, b, fatal)                                               \
  do {                                                                          \
    const char *a_ = (a), *b_ = (b);                                            \
    TEST_CHECK_(a_ && b_ && strcmp(a_, b_) == 0, fatal,                         \
                "%s == %s: left \"%s\", right \"%s\"", #a, #b, a_ ? a_ : "(null)", \
                b_ ? b_ : "(null)");                                            \
  } while (0)

#define TEST_NEAR_(a, b, tol, fatal)                                            \
  do {                                                                          \
    double a_ = (double)(a), b_ = (double)(b);                                  \
    TEST_CHECK_(fabs(a_ - b_) <= (tol), fatal, "%s ~= %s: left %.9g, right %.9g (tol %g)", \
                #a, #b, a_, b_, (double)(tol));                                 \
  } while (0)

#define EXPECT_TRUE(c) TEST_CHECK_((c), 0, "expected true: %s", #c)
#define ASSERT_TRUE(c) TEST_CHECK_((c), 1, "expected true: %s", #c)
#define EXPECT_FALSE(c) TEST_CHECK_(!(c), 0, "expected false: %s", #c)
#define ASSERT_FALSE(c) TEST_CHECK_(!(c), 1, "expected false: %s", #c)
#define EXPECT_INT_EQ(a, b) TEST_INT_CMP_(a, ==, b, 0)
#define ASSERT_INT_EQ(a, b) TEST_INT_CMP_(a, ==, b, 1)
#define EXPECT_INT_NE(a, b) TEST_INT_CMP_(a, !=, b, 0)
#define EXPECT_INT_LT(a, b) TEST_INT_CMP_(a, <, b, 0)
#define EXPECT_INT_LE(a, b) TEST_INT_CMP_(a, <=, b, 0)
#define EXPECT_INT_GT(a, b) TEST_INT_CMP_(a, >, b, 0)
#define EXPECT_INT_GE(a, b) TEST_INT_CMP_(a, >=, b, 0)
#define ASSERT_INT_GT(a, b) TEST_INT_CMP_(a, >, b, 1)
#define EXPECT_STR_EQ(a, b) TEST_STR_EQ_(a, b, 0)
#define ASSERT_STR_EQ(a, b) TEST_STR_EQ_(a, b, 1)
#define EXPECT_NEAR(a, b, tol) TEST_NEAR_(a, b, tol, 0)
#define ASSERT_NEAR(a, b, tol) TEST_NEAR_(a, b, tol, 1)
#define EXPECT_MEM_EQ(a, b, n) TEST_CHECK_(memcmp((a), (b), (n)) == 0, 0, "memory differs: %s vs %s (%zu bytes)", #a, #b, (size_t)(n))
#define EXPECT_STR_CONTAINS(hay, needle)                                        \
  do {                                                                          \
    const char *h_ = (hay), *n_ = (needle);                                     \
    TEST_CHECK_(h_ && strstr(h_, n_), 0, "\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", n_); \
  } while (0)

#endif
