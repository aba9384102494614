#!/usr/bin/env bash
# bench/http.sh - requests/s and latency percentiles of the HTTP front door
# under wrk: GET /health (public), GET /v1/models with an API key (the
# OpenAI model list of two generated models; issue 6 asks >= 34,000 req/s at
# 64 connections) and POST /admin/echo with an API key (a small
# authenticated JSON route), at 1, 64 and 512 connections, RUNS runs of
# DURATION seconds each; prints the median of each, then a MEMDUR-second run
# at 64 connections sampling the server's resident memory every 5 s.
# wrk shares the machine's cores with the server, as in the reference figure.
#   bench/http.sh [RUNS=3] [DURATION=10]
#   ROUTES="models" CONNS="64" MEMDUR=0 bench/http.sh 5 10   # only the model list
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
MEMDUR=${MEMDUR:-60}
DUR=${2:-10}
BIN=${PARLEY_BIN:-./build/parley}
KEY=bench-key
command -v wrk >/dev/null || { echo "wrk is missing: bash scripts/deps.sh"; exit 1; }
data=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data"' EXIT
ROUTES=${ROUTES:-health models echo}
CONNS=${CONNS:-1 64 512}
mkdir -p "$data/models"
"$BIN" gen-model "$data/models/bench-a.gguf" --shape small >/dev/null
"$BIN" gen-model "$data/models/bench-b.gguf" --shape small >/dev/null
PARLEY_NO_EXTERNAL_MODELS=1 "$BIN" serve --port 0 --data-dir "$data" --models-dir "$data/models" --api-key "$KEY" \
  --access-log=false --log-level warn >"$data/out" 2>&1 &
pid=$!
for _ in $(seq 50); do grep -q 'listening on' "$data/out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$data/out")
url="http://127.0.0.1:$port"
cat >"$data/echo.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"model":"m","messages":[{"role":"user","content":"hello"}]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $KEY"
LUA

cat >"$data/models.lua" <<LUA
wrk.headers["Authorization"] = "Bearer $KEY"
LUA

# One wrk run: prints "rps p50_ms p99_ms errors".
one() { # $1 conns, $2 path, $3 script-or-empty
  local t=2; [ "$1" -lt 2 ] && t=1
  local out
  out=$(wrk -t$t -c"$1" -d"${DUR}s" --latency ${3:+-s "$3"} "$url$2" 2>&1)
  local rps p50 p99 errs
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1=="50%" {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  errs=$(echo "$out" | awk '/Non-2xx|Socket errors/ {s=s $0 "; "} END {print (s==""?"none":s)}')
  echo "$rps $(to_ms "$p50") $(to_ms "$p99") $errs"
}
to_ms() { # wrk prints 1.23ms / 850.00us / 1.02s
  case "$1" in
    *us) echo "$1" | sed 's/us//' | awk '{printf "%.3f", $1/1000}';;
    *ms) echo "$1" | sed 's/ms//' | awk '{printf "%.3f", $1}';;
    *s) echo "$1" | sed 's/s//' | awk '{printf "%.3f", $1*1000}';;
    *) echo "$1";;
  esac
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-22s %6s %12s %10s %10s  %s\n" route conns "req/s(med)" "p50 ms" "p99 ms" errors
for route in $ROUTES; do
  case $route in
    health) path=/health; script=""; label="GET /health";;
    models) path=/v1/models; script="$data/models.lua"; label="GET /v1/models+key";;
    echo) path=/admin/echo; script="$data/echo.lua"; label="POST /admin/echo+key";;
    *) echo "unknown route $route (health, models, echo)"; exit 2;;
  esac
  for c in $CONNS; do
    rs=() ; p50s=() ; p99s=() ; errs=""
    for _ in $(seq "$RUNS"); do
      r=$(one "$c" "$path" "$script")
      set -- $r
      rs+=("$1"); p50s+=("$2"); p99s+=("$3"); shift 3; errs="$*"
    done
    printf "%-22s %6s %12s %10s %10s  %s\n" "$label" "$c" \
      "$(printf '%s\n' "${rs[@]}" | median)" "$(printf '%s\n' "${p50s[@]}" | median)" "$(printf '%s\n' "${p99s[@]}" | median)" "$errs"
    echo "  runs: ${rs[*]}"
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$MEMDUR" -gt 0 ] || exit 0

echo "memory across a ${MEMDUR} s run at 64 connections (RSS, KiB):"
rss() { awk '/VmRSS/ {print $2}' /proc/$pid/status; }
echo "  before: $(rss)"
wrk -t2 -c64 -d${MEMDUR}s "$url/health" >/dev/null 2>&1 &
wpid=$!
for i in $(seq $((MEMDUR / 5))); do sleep 5; printf "  %2ds: %s\n" $((i * 5)) "$(rss)"; done
wait $wpid
echo "  after: $(rss)"
