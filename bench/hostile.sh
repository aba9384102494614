#!/usr/bin/env bash
# bench/hostile.sh - the hostile-client run of issue #25 against the
# sanitizer build (make SAN=1 build-san/parley), once open and once with an
# API key: bench/hostile.mjs sends its catalogue to every route of every
# dialect (listed by GET /admin/routes), the transport edges and the TTS
# texts that crash libespeak-ng, and checks that every answer is clean and
# the server alive. Then the server is stopped with SIGTERM: it must exit 0,
# and its log must hold no AddressSanitizer or UndefinedBehaviorSanitizer
# report (a speech worker's report on a crashing espeak-ng text is the
# worker isolation at work and is listed, not failed). Not part of the tests
# (minutes under the sanitizers).
#   bench/hostile.sh              PARLEY_BIN=build/parley bench/hostile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${PARLEY_BIN:-./build-san/parley}
SHARED=${PARLEY_SHARED:-../shared}
[ -x "$BIN" ] || { echo "hostile: no $BIN (make SAN=1 build-san/parley)"; exit 1; }
. bench/tiny_models.sh
models=build/bench-models/soak
tiny_models "$BIN" "$models"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

rc=0
run_one() { # $1 = label, $2 = key or empty
  local data pid port src=0
  data=$(mktemp -d)
  PARLEY_NO_EXTERNAL_MODELS=1 PARLEY_API_KEY="$2" "$BIN" serve --host 127.0.0.1 --port 0 --data-dir "$data" \
    --models-dir "$models" --parallel 2 --admin --conn-timeout 5 --access-log=false --log-level warn \
    >"$data/out" 2>"$data/err" &
  pid=$!
  for _ in $(seq 600); do grep -q 'listening on' "$data/out" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$data/out")
  if [ -z "$port" ]; then cat "$data/out" "$data/err"; kill "$pid" 2>/dev/null; rm -rf "$data"; rc=1; return; fi
  echo "== $1: $BIN on 127.0.0.1:$port"
  node bench/hostile.mjs "http://127.0.0.1:$port" ${2:+"$2"} || rc=1
  kill -TERM "$pid"
  wait "$pid" || src=$?
  if [ "$src" -ne 0 ]; then echo "hostile ($1): the server exited with $src"; rc=1; fi
  # Sanitizer reports: the server's own fail the run; a speech worker's
  # (espeak-ng crashing on the known texts inside its worker) is listed.
  local reports
  reports=$(grep -cE '^==[0-9]+==ERROR: (Address|Leak)Sanitizer|runtime error:' "$data/err" || true)
  if [ "$reports" -gt 0 ]; then
    if grep -qE 'speech_worker_main|espeak' "$data/err" && ! grep -B2 -A40 -E '^==[0-9]+==ERROR' "$data/err" | grep -qE 'http_|engine_|manager_|gen_run|api_'; then
      echo "hostile ($1): $reports sanitizer report(s) from speech workers (isolated crashes of the speech engines):"
      grep -E '^==[0-9]+==ERROR|^    #[0-9] ' "$data/err" | grep -E 'ERROR|espeak|flite|tts_' | head -n 8
    else
      echo "hostile ($1): sanitizer reports from the server:"; grep -A40 -E '^==[0-9]+==ERROR|runtime error:' "$data/err" | head -n 120; rc=1
    fi
  fi
  rm -rf "$data"
}
run_one open ""
run_one keyed "sk-hostile-$$"
exit "$rc"
