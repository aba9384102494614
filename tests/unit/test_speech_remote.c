/*
 * test_speech_remote.c - the speech front ends whose engines run in worker
 * processes (speech/speech_remote.c, speech/speech_worker.c) against the
 * same engines in this process: the voice list, the samples of a synthesis,
 * a decoded recording and a transcript come back identical through the
 * worker protocol; an engine error travels back with its code and detail;
 * a worker killed in the middle of a synthesis fails that call with
 * ERR_WORKER and the next call runs on a fresh worker.
 *
 * The workers are this test binary in its `__worker speech` mode
 * (tests/unit/main.c), exactly what the server runs.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "speech/speech_worker.h"
#include "test.h"

#define PS_DATA "/usr/share/pocketsphinx/test/data"

/* The real speech worker, for this file's pools and for every test whose
 * server runs speech in worker processes (`unit-tests __worker speech`). */
TEST_WORKER(SPEECH_WORKER_ARG1, speech_worker_main)

static wpool *speech_pool(int n_max) {
  static const char *const args[] = {SPEECH_WORKER_ARG0, SPEECH_WORKER_ARG1, NULL};
  wpool_config cfg = {.name = "speech", .args = args, .n_max = n_max};
  wpool *p = NULL;
  return wpool_new(&p, &cfg) ? NULL : p;
}

TEST(speech_remote_tts_matches_local) {
  tts *local;
  if (tts_open(&local)) TEST_SKIP("no TTS backend installed");
  wpool *p = speech_pool(1);
  ASSERT_TRUE(p != NULL);
  tts *remote;
  ASSERT_INT_EQ(tts_open_remote(&remote, p, NULL), 0);
  /* The same voices, in the same order, with the same facts. */
  ASSERT_INT_EQ(tts_n_voices(remote), tts_n_voices(local));
  for (size_t i = 0; i < tts_n_voices(local); i++) {
    const tts_voice *a = tts_voice_at(local, i), *b = tts_voice_at(remote, i);
    EXPECT_STR_EQ(b->name, a->name);
    EXPECT_STR_EQ(b->backend, a->backend);
    EXPECT_STR_EQ(b->language, a->language);
    EXPECT_INT_EQ(b->sample_rate, a->sample_rate);
  }
  EXPECT_STR_EQ(tts_default_voice(remote), tts_default_voice(local));
  /* Two sentences (two worker calls), flite and espeak-ng: the samples
   * are the engine's, byte for byte. */
  const char *voices[] = {"slt", "espeak:en-us+f3"};
  for (size_t v = 0; v < 2; v++) {
    audio_pcm a, b;
    if (tts_synthesize_pcm(local, voices[v], "Hello world. How are you?", 1.0, &a)) continue;
    ASSERT_INT_EQ(tts_synthesize_pcm(remote, voices[v], "Hello world. How are you?", 1.0, &b), 0);
    EXPECT_INT_GT(a.n_frames, 8000);
    EXPECT_INT_EQ(b.n_frames, a.n_frames);
    EXPECT_INT_EQ(b.rate, a.rate);
    if (a.n_frames == b.n_frames) EXPECT_MEM_EQ(a.data, b.data, a.n_frames * 2);
    audio_pcm_free(&a);
    audio_pcm_free(&b);
  }
  /* An unknown voice is resolved here, not in the worker. */
  tts_choice c;
  EXPECT_INT_EQ(tts_voice_resolve(remote, "no-such-voice", &c), ERR_NOT_FOUND);
  tts_close(remote);
  tts_close(local);
  wpool_free(p);
}

/* Sends SIGKILL to this process's speech workers on the first chunk, as a
 * crash inside the engine would end them. */
typedef struct killer {
  int n_chunks;
  int n_killed;
} killer;

static int kill_workers(void) {
  int n = 0;
  DIR *d = opendir("/proc");
  for (struct dirent *e; d && (e = readdir(d));) {
    int pid = atoi(e->d_name);
    if (pid <= 0) continue;
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t len = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[len] = '\0';
    const char *rp = strrchr(stat, ')');
    int ppid = 0;
    char state;
    if (!rp || sscanf(rp + 2, "%c %d", &state, &ppid) != 2 || ppid != getpid() || state == 'Z') continue;
    if (kill(pid, SIGKILL) == 0) n++;
  }
  if (d) closedir(d);
  return n;
}

static int on_chunk_kill(void *user, const int16_t *pcm, size_t n, int rate) {
  killer *k = user;
  (void)pcm, (void)n, (void)rate;
  if (k->n_chunks++ == 0) k->n_killed = kill_workers();
  return 0;
}

static int count_samples(void *user, const int16_t *pcm, size_t n, int rate) {
  (void)pcm, (void)rate;
  *(size_t *)user += n;
  return 0;
}

TEST(speech_remote_worker_killed_mid_synthesis) {
  wpool *p = speech_pool(1);
  ASSERT_TRUE(p != NULL);
  tts *t;
  int rc = tts_open_remote(&t, p, NULL);
  if (rc == ERR_UNAVAILABLE) {
    wpool_free(p);
    TEST_SKIP("no TTS backend installed");
  }
  ASSERT_INT_EQ(rc, 0);
  tts_choice c;
  ASSERT_INT_EQ(tts_voice_resolve(t, "espeak:en-us", &c) && tts_voice_resolve(t, "slt", &c), 0);
  /* espeak-ng sends many chunks per sentence; flite one: either way the
   * workers die at the first, while the call still waits for DONE. */
  killer k = {0};
  /* long enough that a busy machine cannot let the worker finish (and send
   * DONE) between its first chunk and the kill */
  char text[4096] = "One sentence.";
  for (int i = 0; i < 40; i++) strcat(text, " And another one that never comes, because the worker dies first.");
  /* a worker that sent its last chunk and DONE before the signal landed
   * finished honestly: try again (a loaded machine), at most five times */
  int attempt = 0;
  for (; attempt < 5; attempt++) {
    k = (killer){0};
    rc = tts_synthesize(t, &c, text, 1.0, on_chunk_kill, &k);
    if (rc != 0) break;
    wpool_stats s0;
    wpool_get_stats(p, &s0);
    if (s0.n_died) break;
  }
  EXPECT_INT_GE(k.n_killed, 1);
  EXPECT_INT_EQ(rc, ERR_WORKER);
  EXPECT_STR_CONTAINS(err_detail(), "the speech worker process was killed by signal 9");
  wpool_stats st;
  wpool_get_stats(p, &st);
  EXPECT_INT_EQ(st.n_live, 0); /* reaped */
  EXPECT_INT_EQ(st.n_died, 1);
  /* The next synthesis starts a fresh worker and speaks (one more per
   * attempt the worker finished before it was killed). */
  const int n_before = (int)st.n_started;
  size_t n = 0;
  EXPECT_INT_EQ(tts_synthesize(t, &c, "Hello again.", 1.0, count_samples, &n), 0);
  EXPECT_INT_GT(n, 4000);
  wpool_get_stats(p, &st);
  EXPECT_INT_EQ(st.n_started, n_before + 1);
  EXPECT_INT_LE(n_before, 1 + attempt);
  tts_close(t);
  wpool_free(p);
}

TEST(speech_remote_decode_matches_local) {
  const char *path = PS_DATA "/librivox/sense_and_sensibility_01_austen_64kb-0880.wav";
  size_t len;
  unsigned char *bytes = (unsigned char *)test_read_file(path, &len);
  if (!bytes) TEST_SKIP("pocketsphinx-testdata not installed");
  wpool *p = speech_pool(1);
  ASSERT_TRUE(p != NULL);
  audio_decode_opts o = {.target_rate = 8000, .target_channels = 1, .fmt = AUDIO_SAMPLE_S16, .hint = "x.wav"};
  audio_pcm a, b;
  ASSERT_INT_EQ(audio_decode(bytes, len, &o, &a), 0);
  ASSERT_INT_EQ(speech_decode_remote(p, NULL, bytes, len, &o, &b), 0);
  EXPECT_INT_EQ(b.rate, a.rate);
  EXPECT_INT_EQ(b.channels, a.channels);
  EXPECT_INT_EQ(b.src_rate, a.src_rate);
  EXPECT_STR_EQ(b.container, a.container);
  EXPECT_STR_EQ(b.codec, a.codec);
  ASSERT_INT_EQ(b.n_frames, a.n_frames);
  EXPECT_MEM_EQ(b.data, a.data, a.n_frames * 2);
  audio_pcm_free(&a);
  audio_pcm_free(&b);
  /* Bad input: the decoder's own error, code and detail, from the worker. */
  audio_pcm c;
  int rl = audio_decode("not audio at all, just text", 27, NULL, &c);
  char local_detail[256];
  snprintf(local_detail, sizeof local_detail, "%s", err_detail());
  EXPECT_INT_NE(rl, 0);
  EXPECT_INT_EQ(speech_decode_remote(p, NULL, "not audio at all, just text", 27, NULL, &c), rl);
  EXPECT_STR_EQ(err_detail(), local_detail);
  free(bytes);
  wpool_free(p);
}

TEST(speech_remote_stt_matches_local) {
  size_t len;
  unsigned char *raw = (unsigned char *)test_read_file(PS_DATA "/goforward.raw", &len);
  if (!raw) TEST_SKIP("pocketsphinx-testdata not installed (goforward.raw)");
  stt *local;
  int rc = stt_open(&local, NULL);
  if (rc == ERR_NOT_FOUND) {
    free(raw);
    TEST_SKIP("pocketsphinx-en-us model not installed");
  }
  ASSERT_INT_EQ(rc, 0);
  wpool *p = speech_pool(1);
  ASSERT_TRUE(p != NULL);
  stt *remote;
  ASSERT_INT_EQ(stt_open_remote(&remote, NULL, p, NULL), 0);
  EXPECT_INT_EQ(stt_sample_rate(remote), 16000);
  const int16_t *pcm = (const int16_t *)(const void *)raw;
  size_t n = len / 2;
  stt_result a, b;
  ASSERT_INT_EQ(stt_transcribe(local, pcm, n, &a), 0);
  ASSERT_INT_EQ(stt_transcribe(remote, pcm, n, &b), 0);
  EXPECT_STR_EQ(b.text, a.text);
  ASSERT_INT_EQ(b.n_words, a.n_words);
  for (size_t i = 0; i < a.n_words; i++) {
    EXPECT_STR_EQ(b.words[i].word, a.words[i].word);
    EXPECT_NEAR(b.words[i].start, a.words[i].start, 1e-9);
    EXPECT_NEAR(b.words[i].confidence, a.words[i].confidence, 1e-9);
  }
  stt_result_free(&b);
  /* Incremental: feed in 0.25 s pieces, partial, end: the same words. */
  stt_stream *st;
  ASSERT_INT_EQ(stt_stream_begin(remote, &st), 0);
  for (size_t off = 0; off < n; off += 4000) ASSERT_INT_EQ(stt_stream_feed(st, pcm + off, n - off < 4000 ? n - off : 4000), 0);
  char *partial = NULL;
  EXPECT_INT_EQ(stt_stream_partial(st, &partial), 0);
  EXPECT_TRUE(partial != NULL);
  free(partial);
  ASSERT_INT_EQ(stt_stream_end(st, &b), 0);
  EXPECT_STR_EQ(b.text, a.text);
  stt_result_free(&b);
  stt_stream_free(st);
  /* The pool holds one worker: a held stream makes a second begin wait,
   * then fail as overloaded. */
  stt *busy;
  stt_config quick = {.wait_ms = 50};
  ASSERT_INT_EQ(stt_open_remote(&busy, &quick, p, NULL), 0);
  ASSERT_INT_EQ(stt_stream_begin(remote, &st), 0);
  stt_stream *st2;
  EXPECT_INT_EQ(stt_stream_begin(busy, &st2), ERR_OVERLOADED);
  stt_stream_free(st);
  stt_close(busy);
  stt_result_free(&a);
  stt_close(remote);
  stt_close(local);
  wpool_free(p);
  free(raw);
}
