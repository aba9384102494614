#!/usr/bin/env bash
# tests/arm64/run.sh - the arm64 build (issue 3: "the arm64 NEON build must
# at least compile"), checked on this x86 machine with Debian's cross
# compiler: every source file under src/ compiles for aarch64 with warnings
# as errors, and the kernel and quantization unit tests, linked statically
# for aarch64, run under qemu-user against the NEON variant (on arm64
# kern_ops_neon is the fast variant the tests compare with the reference).
# Libraries whose headers Debian keeps only in the x86_64 multiarch folder
# (curl, FFmpeg) are looked up there after the cross compiler's own folders:
# their declarations do not depend on the architecture, and glibc's headers
# still come from the aarch64 sysroot. Nothing is linked against them.
# Skips with a message when the cross compiler or qemu is missing.
# Ends with the unit runner's `N passed, N failed` line.
set -u
cd "$(dirname "$0")/../.."
CC_ARM=aarch64-linux-gnu-gcc
if ! command -v "$CC_ARM" >/dev/null; then
  echo "arm64: $CC_ARM not installed (scripts/deps.sh installs gcc-aarch64-linux-gnu); skipped"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
out=build/arm64
mkdir -p "$out"
FLAGS="-std=c17 -D_GNU_SOURCE -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror -pthread -Isrc"
INC="$(pkg-config --cflags-only-I pocketsphinx sphinxbase espeak-ng 2>/dev/null) -idirafter /usr/include/x86_64-linux-gnu"
export CC_ARM FLAGS INC out
# every file compiles (objects are thrown away: only the compiler's verdict counts)
if ! find src -name '*.c' | sort | xargs -P 2 -I{} sh -c \
    '$CC_ARM $FLAGS $INC -c "{}" -o "$out/$(echo "{}" | tr / _).o" 2>"$out/$(echo "{}" | tr / _).err" || { cat "$out/$(echo "{}" | tr / _).err"; exit 255; }'; then
  echo "arm64: the tree does not compile for aarch64"
  echo "0 passed, 1 failed"
  exit 1
fi
echo "arm64: every file under src/ compiles for aarch64"
# the kernel tests, run on the NEON variant
tests="tests/unit/main.c tests/unit/test_kernels.c tests/unit/test_kernels_packed.c tests/unit/test_kernels_rect.c tests/unit/test_quant.c"
if ! $CC_ARM $FLAGS -static -Itests/unit $tests src/kernels/*.c src/base/*.c src/gguf/*.c -lm -o "$out/kernel-tests" 2>"$out/link.err"; then
  cat "$out/link.err"; echo "arm64: the kernel tests do not link for aarch64"
  echo "0 passed, 1 failed"
  exit 1
fi
if ! command -v qemu-aarch64 >/dev/null; then
  echo "arm64: qemu-aarch64 not installed (scripts/deps.sh installs qemu-user); kernel tests built, not run"
  echo "1 passed, 0 failed, 1 skipped"
  exit 0
fi
# every kernel and quantization test but the scalar reference against double
# precision, which does not involve the NEON variant and is slow under qemu
names=$(qemu-aarch64 "$out/kernel-tests" --list | grep -v '^kernels_matmul_reference_vs_double$')
# shellcheck disable=SC2086
qemu-aarch64 "$out/kernel-tests" $names
