/*
 * fuzz.h - how a harness in tests/fuzz/ declares its entry points, so the
 * same file is both a libFuzzer target and part of the unit-test binary.
 *
 *     FUZZ_INIT(name) { ... }     optional: once, before the first input
 *     FUZZ_TARGET(name) { ... }   one input: const uint8_t *data, size_t size
 *
 * Built by tests/fuzz/run.sh (clang, -fsanitize=fuzzer) they are
 * LLVMFuzzerInitialize and LLVMFuzzerTestOneInput. Built into
 * build/unit-tests (the Makefile compiles every tests/fuzz/fuzz_*.c with
 * -DFUZZ_REPLAY) they register themselves under their name, and the unit
 * test fuzz_seeds_replay (tests/unit/test_fuzz_replay.c) feeds every file of
 * tests/fuzz/seeds/<name>/ through them: the seeds, and every crash input
 * kept as a seed, run on each `make test`. A harness signals a broken
 * property with abort() or __builtin_trap(), which fails that test.
 */
#ifndef PARLEY_FUZZ_H
#define PARLEY_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#ifdef FUZZ_REPLAY
void fuzz_replay_register(const char *name, const char *file, int (*one)(const uint8_t *, size_t));
void fuzz_replay_register_init(const char *name, void (*init)(void));
#define FUZZ_TARGET(name)                                                            \
  static int fuzz_one_##name(const uint8_t *data, size_t size);                      \
  __attribute__((constructor)) static void fuzz_reg_##name(void) {                   \
    fuzz_replay_register(#name, __FILE__, fuzz_one_##name);                          \
  }                                                                                  \
  static int fuzz_one_##name(const uint8_t *data, size_t size)
#define FUZZ_INIT(name)                                                              \
  static void fuzz_init_##name(void);                                                \
  __attribute__((constructor)) static void fuzz_reg_init_##name(void) {              \
    fuzz_replay_register_init(#name, fuzz_init_##name);                              \
  }                                                                                  \
  static void fuzz_init_##name(void)
#else
#include <stdlib.h>
#include <string.h>

#include "speech/speech_worker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
#define FUZZ_TARGET(name) int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
/* A harness that starts a server starts speech worker processes of its own
 * binary (`fuzz_x __worker speech`); libFuzzer calls LLVMFuzzerInitialize
 * before it reads its flags, so the worker runs from there and exits. */
#define FUZZ_INIT(name)                                                              \
  static void fuzz_init_##name(void);                                                \
  int LLVMFuzzerInitialize(int *argc, char ***argv) {                                \
    if (*argc >= 3 && strcmp((*argv)[1], SPEECH_WORKER_ARG0) == 0 &&                 \
        strcmp((*argv)[2], SPEECH_WORKER_ARG1) == 0)                                 \
      exit(speech_worker_main(*argc - 3, *argv + 3));                                \
    fuzz_init_##name();                                                              \
    return 0;                                                                        \
  }                                                                                  \
  static void fuzz_init_##name(void)
#endif

#endif
