#!/usr/bin/env bash
# bench/soak.sh - a long mixed-load run with the server's resident memory
# sampled; the memory must stay flat (issue #25 item 13). Not part of the
# tests (make test never runs it): its default is 30 minutes.
#   bench/soak.sh [SECONDS=1800]
#   PARLEY_BIN=build-san/parley bench/soak.sh 600   (the sanitizer build)
# Generates a tiny random-weight llama with the shared llama SPM vocabulary
# and a tiny BERT embedder into build/bench-models/soak/, serves them with
# 4 parallel slots, runs bench/soak.mjs (chat streams, cancelled streams,
# embeddings, uploads, Deepgram speak WebSockets, some dropped mid-audio)
# for SECONDS and prints its JSON line plus the machine. SOAK_SAMPLE_MS and
# SOAK_MAX_MIB_PER_HOUR tune the sampling and the verdict (see soak.mjs);
# SOAK_SAMPLES=1 prints every sample (seconds, MiB) to stderr; SOAK_KINDS=upload
# (or chat, cancel, embed, ws, comma-separated) runs only those loops. Exits non-zero
# unless the verdict is "flat" and the server then stops cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-1800}
BIN=${PARLEY_BIN:-./build/parley}
SHARED=${PARLEY_SHARED:-../shared}
[ -x "$BIN" ] || { echo "soak: no $BIN (make all)"; exit 1; }
. bench/tiny_models.sh
models=build/bench-models/soak
tiny_models "$BIN" "$models"

data=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$data"' EXIT
PARLEY_NO_EXTERNAL_MODELS=1 PARLEY_API_KEY='' "$BIN" serve --host 127.0.0.1 --port 0 --data-dir "$data" \
  --models-dir "$models" --parallel 4 --access-log=false --log-level warn >"$data/out" 2>"$data/err" &
pid=$!
for _ in $(seq 200); do grep -q 'listening on' "$data/out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$data/out")
[ -n "$port" ] || { cat "$data/out" "$data/err"; exit 1; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $BIN; $SECS s of mixed load on 127.0.0.1:$port"
rc=0
node bench/soak.mjs "http://127.0.0.1:$port" "$pid" "$SECS" org/tiny embed || rc=$?
kill -TERM "$pid"
src=0
wait "$pid" || src=$?
pid=
if [ "$src" -ne 0 ]; then echo "soak: the server exited with $src"; tail -n 40 "$data/err"; rc=1; fi
exit "$rc"
