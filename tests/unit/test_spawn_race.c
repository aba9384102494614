/*
 * test_spawn_race.c - handlers that hand a job to a thread of its own must
 * not touch the job after the spawn: the thread may finish and free it
 * before pthread_create returns in the handler. Such a read is a race the
 * sanitizers catch only when the thread happens to win; here the thread
 * always wins. This file defines pthread_create for the whole unit binary:
 * a pass-through to the C library's (or the sanitizer's) unless a test arms
 * it, and then the next thread created runs to its end before the creator
 * goes on. Under ASan (CI) a read of the freed job is then a
 * heap-use-after-free every time.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "../fuzz/fuzz_server.h"
#include "test.h"

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static atomic_int g_armed;  /* threads still to run first */
static atomic_int g_waited; /* threads that did */

struct first {
  void *(*fn)(void *);
  void *arg;
  sem_t done;
};

static void *run_first(void *p) {
  struct first *f = p;
  void *(*fn)(void *) = f->fn;
  void *arg = f->arg;
  /* The creator waits on f->done, then frees f: post after the routine,
   * and read nothing of f afterwards. */
  void *r = fn(arg);
  sem_post(&f->done);
  return r;
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  static create_fn real;
  if (!real) {
    /* A sanitizer runtime linked into the binary (clang) defines its
     * interceptor under this name; the shared runtime (gcc) and libc are
     * found as the next pthread_create after this one. */
    real = (create_fn)dlsym(RTLD_DEFAULT, "__interceptor_pthread_create");
    if (!real) real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!real) abort();
  }
  int one = 1;
  if (!atomic_compare_exchange_strong(&g_armed, &one, 0)) return real(t, attr, fn, arg);
  struct first *f = malloc(sizeof *f);
  if (!f) return real(t, attr, fn, arg);
  f->fn = fn;
  f->arg = arg;
  sem_init(&f->done, 0, 0);
  int rc = real(t, attr, run_first, f);
  if (rc) {
    sem_destroy(&f->done);
    free(f);
    return rc;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 30; /* a thread that never ends (a loop) must not hang the test */
  if (sem_timedwait(&f->done, &ts) == 0) {
    atomic_fetch_add(&g_waited, 1);
    sem_destroy(&f->done);
    free(f);
  } /* else: leaked on purpose, the thread still holds it */
  return 0;
}

/* A 16 kHz mono 16-bit WAV of n_samples of a quiet tone. */
static void wav_body(buf *b, int n_samples) {
  uint32_t data = (uint32_t)n_samples * 2, riff = 36 + data;
  uint8_t h[44] = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'A', 'V', 'E', 'f', 'm', 't', ' ', 16, 0, 0, 0, 1, 0, 1, 0,
                   0x80, 0x3e, 0, 0, 0, 0x7d, 0, 0, 2, 0, 16, 0, 'd', 'a', 't', 'a', 0, 0, 0, 0};
  memcpy(h + 4, &riff, 4);
  memcpy(h + 40, &data, 4);
  buf_append(b, h, sizeof h);
  for (int i = 0; i < n_samples; i++) {
    int16_t v = (int16_t)((i / 20) % 2 ? 300 : -300);
    buf_append(b, &v, 2);
  }
}

TEST(deepgram_listen_handler_reads_nothing_of_its_job_after_the_spawn) {
  fuzz_server_start(NULL);
  buf audio = BUF_INIT, req = BUF_INIT, out = BUF_INIT;
  wav_body(&audio, 8000);
  buf_appendf(&req,
              "POST /deepgram/v1/listen?punctuate=true HTTP/1.1\r\nHost: localhost\r\nContent-Type: audio/wav\r\n"
              "Content-Length: %zu\r\nConnection: close\r\n\r\n",
              audio.len);
  buf_append(&req, audio.data, audio.len);
  atomic_store(&g_waited, 0);
  atomic_store(&g_armed, 1); /* the job thread of this request finishes before the handler goes on */
  int status = fuzz_server_exchange(req.data, req.len, &out);
  EXPECT_INT_EQ(atomic_load(&g_armed), 0);  /* a thread was created... */
  EXPECT_INT_EQ(atomic_load(&g_waited), 1); /* ...and ran to its end first */
  EXPECT_INT_EQ(status, 200);
  buf_append_byte(&out, 0);
  EXPECT_TRUE(strstr(out.data, "\"results\"") != NULL);
  EXPECT_TRUE(strstr(out.data, "\"request_id\"") != NULL);
  buf_free(&audio);
  buf_free(&req);
  buf_free(&out);
}
