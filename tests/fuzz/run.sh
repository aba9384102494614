#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS] [NAME...] - build and run the libFuzzer harnesses.
#
# Builds every tests/fuzz/fuzz_<name>.c (or only the NAMEs given) with clang,
# -fsanitize=fuzzer,address,undefined, against build-fuzz/libparley.a: every
# src/**/*.c except src/app/main.c, compiled by the project Makefile itself
# (same flags and pkg-config libraries) with CC=clang and BUILD=build-fuzz.
# Linking through the archive pulls in only the objects a harness needs.
# Then runs each harness for SECONDS (default 30) on build-fuzz/corpus/<name>/,
# which starts as a copy of tests/fuzz/seeds/<name>/ and keeps what the fuzzer
# finds across runs (the seeds in git are never modified). Prints one line per
# harness and exits non-zero if any harness failed to build or crashed; the
# crashing input stays in build-fuzz/crashes/<name>/ and the log in
# build-fuzz/logs/<name>.log.
#
# Adding a harness for a new parser:
#   1. Write tests/fuzz/fuzz_<name>.c defining
#        int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
#      It must never leak, must free what it allocates, and should check
#      properties (round trips, "chunked == whole", limits) and abort() when
#      one breaks; an error return from the parser is not a failure.
#   2. Add seeds: tests/fuzz/seeds/<name>/, about ten small valid and
#      invalid inputs, one per file (a harness without seeds starts empty).
#   3. Optional: tests/fuzz/fuzz_<name>.dict (libFuzzer dictionary of tokens)
#      and tests/fuzz/fuzz_<name>.options (extra libFuzzer flags on one line,
#      e.g. -max_len=65536).
#   4. bash tests/fuzz/run.sh 60 <name>
#
# When a harness crashes:
#   1. Reproduce: ./build-fuzz/fuzz_<name> build-fuzz/crashes/<name>/crash-...
#      (it runs that one input and prints the sanitizer report).
#   2. Optionally shrink it: ./build-fuzz/fuzz_<name> -minimize_crash=1
#      -runs=10000 build-fuzz/crashes/<name>/crash-...
#   3. Turn it into unit tests in tests/unit/test_<module>.c:
#      a. copy the input into tests/fuzz/seeds/<name>/ (named for the bug, e.g.
#         cr-before-split-delimiter): the fuzzer keeps covering it, and the
#         unit run's fuzz_seeds_replay (tests/unit/test_fuzz_replay.c) feeds
#         every seed folder through its harness (nothing to write for a new
#         one);
#      b. add a TEST with the bytes inline (xxd -i crash-... gives a C array)
#         that expects the clean error or the exact result you decided is
#         right, written by hand, not copied from the parser's output.
#      Fix the bug; check both tests fail before the fix and pass after.
set -u
cd "$(dirname "$0")/../.."

secs=${1:-30}
shift || true
case "$secs" in ''|*[!0-9]*) echo "usage: tests/fuzz/run.sh [SECONDS] [NAME...]" >&2; exit 2 ;; esac

if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz: clang not found (apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi

out=build-fuzz
mkdir -p "$out/logs" "$out/crashes" "$out/corpus"

# The Makefile's own variables, with the fuzzing toolchain swapped in.
make_vars=(--no-print-directory BUILD="$out" CC=clang OPT="-O1 -g"
           SANFLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined")
print_var() { make -s "${make_vars[@]}" --eval='fuzz-print-%: ; @echo $($*)' "fuzz-print-$1"; }

if ! make -j2 "${make_vars[@]}" "$out/libparley.a" >"$out/logs/build-lib.log" 2>&1; then
  tail -n 40 "$out/logs/build-lib.log"
  echo "fuzz: building $out/libparley.a with clang failed (log $out/logs/build-lib.log)"
  exit 1
fi
cflags=$(print_var CFLAGS_ALL | sed 's/-fsanitize=fuzzer-no-link/-fsanitize=fuzzer/')
ldlibs=$(print_var LDLIBS_ALL)

if [ $# -gt 0 ]; then
  harnesses=()
  for n in "$@"; do harnesses+=("tests/fuzz/fuzz_$n.c"); done
else
  mapfile -t harnesses < <(find tests/fuzz -maxdepth 1 -name 'fuzz_*.c' | sort)
fi
if [ ${#harnesses[@]} -eq 0 ]; then echo "fuzz: no harnesses in tests/fuzz"; exit 0; fi

bad=0
for src in "${harnesses[@]}"; do
  name=$(basename "$src" .c); name=${name#fuzz_}
  bin="$out/fuzz_$name" log="$out/logs/$name.log"
  if [ ! -f "$src" ]; then echo "fuzz_$name: no such harness ($src)"; bad=1; continue; fi
  # shellcheck disable=SC2086
  if ! clang $cflags -o "$bin" "$src" "$out/libparley.a" $ldlibs >"$log" 2>&1; then
    echo "fuzz_$name: BUILD FAILED (log $log)"; tail -n 20 "$log"; bad=1; continue
  fi
  corpus="$out/corpus/$name" crashes="$out/crashes/$name"
  mkdir -p "$corpus" "$crashes"
  if [ -d "tests/fuzz/seeds/$name" ]; then cp -n "tests/fuzz/seeds/$name"/* "$corpus"/ 2>/dev/null; fi
  opts=(-max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048
        -artifact_prefix="$crashes/")
  [ -f "tests/fuzz/fuzz_$name.dict" ] && opts+=(-dict="tests/fuzz/fuzz_$name.dict")
  if [ -f "tests/fuzz/fuzz_$name.options" ]; then
    read -r -a extra <"tests/fuzz/fuzz_$name.options"
    opts+=("${extra[@]}")
  fi
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    "$bin" "${opts[@]}" "$corpus" >"$log" 2>&1
  rc=$?
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)
  n_corpus=$(find "$corpus" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    echo "fuzz_$name: ok, ${execs:-?} executions in ${secs}s, corpus $n_corpus inputs"
  else
    crash=$(sed -nE 's/.*Test unit written to (.*)$/\1/p' "$log" | tail -n 1)
    echo "fuzz_$name: FAILED (exit $rc) after ${execs:-?} executions; input ${crash:-?}; log $log"
    grep -E 'ERROR: |SUMMARY: |invariant broken|runtime error' "$log" | head -n 5 | sed 's/^/  /'
    bad=1
  fi
done
exit $bad
