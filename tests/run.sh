#!/usr/bin/env bash
# Runs every test suite and ends with one line `N passed, N failed` summing
# them all; exits non-zero when any suite failed or could not run.
#   - the C unit tests (build/unit-tests)
#   - the same C suite under ASan+UBSan when CI=true or SAN_TOO=1
#   - the same C suite under ThreadSanitizer when TSAN_TOO=1 (a data race
#     reported in a test fails that test: TSan exits 66 from its process)
#   - the arm64 build and the kernel tests under qemu when CI=true or ARM_TOO=1
#   - the API tests (tests/api, Node's test runner with the vendors' SDKs),
#     and under TSAN_TOO=1 once more against build-tsan/parley (a race the
#     server reports fails the run)
set -u
cd "$(dirname "$0")/.."
total_pass=0 total_fail=0 total_skip=0 bad=0

count_c() { # $1 = log file; reads the runner's closing line
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
  if [ -z "$line" ]; then bad=1; return; fi
  local p f s
  p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
  s=$(echo "$line" | sed -nE 's/.*, ([0-9]+) skipped.*/\1/p')
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f)); total_skip=$((total_skip + ${s:-0}))
}

log=$(mktemp)
echo "== C unit tests"
./build/unit-tests 2>&1 | tee "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || bad=1
count_c "$log"

if [ "${CI:-}" = "true" ] && command -v clang >/dev/null; then
  echo "== the whole tree builds with clang too (warnings are errors)"
  if ! make --no-print-directory -j2 CC=clang BUILD=build-clang build-clang/parley build-clang/unit-tests >"$log.build" 2>&1; then
    grep -E 'error|warning' "$log.build" | head -n 30; echo "clang build failed"; bad=1
  fi
fi

if [ "${CI:-}" = "true" ] || [ "${ARM_TOO:-0}" = "1" ]; then
  echo "== arm64: the tree compiles for aarch64; kernel tests on NEON under qemu"
  bash tests/arm64/run.sh 2>&1 | tee "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || bad=1
  count_c "$log"
fi

if [ "${CI:-}" = "true" ] || [ "${SAN_TOO:-0}" = "1" ]; then
  echo "== C unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  if make --no-print-directory SAN=1 build-san/unit-tests build-san/parley >"$log.build" 2>&1; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
      ./build-san/unit-tests 2>&1 | tee "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || bad=1
    count_c "$log"
  else
    cat "$log.build"; echo "sanitizer build failed"; bad=1
  fi
fi

if [ "${TSAN_TOO:-0}" = "1" ]; then
  echo "== C unit tests under ThreadSanitizer"
  if make --no-print-directory TSAN=1 build-tsan/unit-tests build-tsan/parley >"$log.build" 2>&1; then
    # Each test runs in its own forked process; TSan's exit code 66 on a
    # race makes that test fail with the report in its output.
    PARLEY_TEST_TIMEOUT=${PARLEY_TEST_TIMEOUT:-600} \
    TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1 history_size=4" \
      ./build-tsan/unit-tests 2>&1 | tee "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || bad=1
    count_c "$log"
  else
    cat "$log.build"; echo "ThreadSanitizer build failed"; bad=1
  fi
fi

# run_api BIN: the API test files against the server binary BIN; adds the
# runner's counts to the totals.
run_api() {
  # Files run one at a time where the runner can say so (Node >= 20); each
  # file starts its own server on a free port, so older runners are safe too.
  local conc="" rc p f s
  [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] && conc="--test-concurrency=1"
  (cd tests/api && PARLEY_BIN="$PWD/../../$1" node --test $conc \
     --test-reporter=tap $api_tests) >"$log" 2>&1
  rc=$?
  grep -E '^# (tests|pass|fail|skipped)|^not ok|^# Subtest' "$log" | grep -vE '^# Subtest' | head -n 200
  grep -B2 -A30 '^not ok' "$log" | head -n 300
  p=$(grep -E '^# pass ' "$log" | tail -n1 | awk '{print $3}')
  f=$(grep -E '^# fail ' "$log" | tail -n1 | awk '{print $3}')
  s=$(grep -E '^# skipped ' "$log" | tail -n1 | awk '{print $3}')
  if [ -z "$p" ]; then cat "$log" | tail -n 50; bad=1; fi
  total_pass=$((total_pass + ${p:-0})); total_fail=$((total_fail + ${f:-0})); total_skip=$((total_skip + ${s:-0}))
  [ $rc -eq 0 ] || bad=1
}

api_tests=$(cd tests/api && find . -name '*.test.mjs' -not -path './node_modules/*' | sort)
if [ -f tests/api/package.json ] && [ -n "$api_tests" ]; then
  echo "== API tests (Node test runner, official SDKs)"
  run_api build/parley
  if [ "${TSAN_TOO:-0}" = "1" ] && [ -x build-tsan/parley ]; then
    # The same files against the ThreadSanitizer server: every server
    # process writes its reports to $tsan_dir/tsan.<pid>; a file that holds
    # one fails the run (and the server's exit code 66 fails that test's
    # clean-stop assertion).
    echo "== API tests against the ThreadSanitizer server (build-tsan/parley)"
    tsan_dir=$(mktemp -d)
    TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1 history_size=4 log_path=$tsan_dir/tsan" \
    PARLEY_START_TIMEOUT_MS=${PARLEY_START_TIMEOUT_MS:-60000} run_api build-tsan/parley
    # A speech worker that dies is the isolation at work (the tests crash
    # them on purpose, with the inputs that crash libespeak-ng or a SIGSEGV
    # sent mid-synthesis): TSan's own "SEGV" report from a worker process
    # is expected there. Every other report fails the run.
    for f in "$tsan_dir"/tsan.*; do
      [ -e "$f" ] || continue
      if ! grep -q 'WARNING: ThreadSanitizer' "$f" && grep -q 'ERROR: ThreadSanitizer: SEGV' "$f" &&
         grep -q 'speech_worker_main' "$f"; then
        echo "(a speech worker died as a test made it: $(basename "$f"))"
        continue
      fi
      echo "ThreadSanitizer report from the server ($(basename "$f")):"; head -n 200 "$f"; bad=1
    done
    rm -rf "$tsan_dir"
  fi
fi
rm -f "$log" "$log.build"

echo "${total_pass} passed, ${total_fail} failed, ${total_skip} skipped"
if [ $bad -ne 0 ] || [ $total_fail -ne 0 ]; then exit 1; fi
exit 0
