#!/usr/bin/env bash
# bench/sse.sh - does streaming through HTTP slow generation? (issue 6)
# On the TinyLlama-shaped random model (with the llama SPM tokenizer so the
# HTTP path can tokenize), alternates, RUNS times:
#   - `parley bench -p 0 -n 128` (tg128: 128 forwards, no HTTP, no sampling),
#   - `parley bench -p P -n 0` (pp of the prompt's length P),
#   - one streamed 128-token legacy completion through `parley serve` timed
#     by bench/sse_client.mjs (tokens/s between the first and last text event),
#   - one streamed 1-token completion timed by bench/ttft_client.py on a raw
#     socket (time from sending the request to the first text event; Node's
#     http client adds 1-3 ms of its own, too much for a 2 ms target),
# and prints the medians: SSE tokens/s against tg128 (target >= 98%) and
# time to first token minus pp (target < 2 ms). Each completion's prompt
# starts differently so the prefix cache saves at most 2 tokens.
# Not part of the tests.
#   bench/sse.sh [RUNS=5] [TYPE=Q4_K_M]
#   MODEL=../shared/models/llama-2-tiny-random.gguf bench/sse.sh 9
#     (a tiny model: prompt processing takes ~nothing, so ttft - pp is the
#     HTTP + tokenizer + event path's own time, with little noise)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
TYPE=${2:-Q4_K_M}
BIN=${PARLEY_BIN:-./build/parley}
VOCAB=../shared/vocab/ggml-vocab-llama-spm.gguf
[ -f "$VOCAB" ] || { echo "needs $VOCAB (the shared folder)"; exit 1; }
dir=build/bench-models
mkdir -p "$dir"
model=${MODEL:-$dir/tinyllama-$TYPE-spm.gguf}
[ -f "$model" ] || { echo "generating $model"; "$BIN" gen-model "$model" --shape tinyllama --type "$TYPE" --vocab "$VOCAB" >/dev/null; }

data=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$data"' EXIT
mkdir -p "$data/models"
PARLEY_NO_EXTERNAL_MODELS=1 "$BIN" serve --port 0 --data-dir "$data" --models-dir "$data/models" --model "$model" \
  --no-auth --access-log=false --log-level warn >"$data/out" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q 'listening on' "$data/out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$data/out")
[ -n "$port" ] || { cat "$data/out"; exit 1; }
url="http://127.0.0.1:$port"
name=$(basename "$model" .gguf)
words="the quick brown fox jumps over the lazy dog while seven small birds sing"
# Warm-up: loads the model (just in time) so no run pays for it.
node bench/sse_client.mjs "$url" "$name" "0 $words" 8 >/dev/null

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: $model"
tg=() pp=() sse=() ttft=() over=()
for r in $(seq "$RUNS"); do
  j=$(node bench/sse_client.mjs "$url" "$name" "$r $words" 128)
  C=$(echo "$j" | sed -nE 's/.*"completion_tokens":([0-9]+).*/\1/p')
  s=$(echo "$j" | sed -nE 's/.*"decode_tps":([0-9.e+-]+).*/\1/p')
  k=$(python3 bench/ttft_client.py "127.0.0.1:$port" "$name" "$r $words" 1)
  P=$(echo "$k" | sed -nE 's/.*"prompt_tokens": ([0-9]+).*/\1/p')
  f=$(echo "$k" | sed -nE 's/.*"ttft_ms": ([0-9.e+-]+).*/\1/p')
  [ "$C" = 128 ] || echo "  warning: completion_tokens $C, not 128"
  t=$("$BIN" bench "$model" -p 0 -n 128 -t 2 -r 1 | awk '/tg128/ {print $(NF-2)}')
  p=$("$BIN" bench "$model" -p "$P" -n 0 -t 2 -r 1 | awk -v P="pp$P" '$0 ~ P {print $(NF-2)}')
  pms=$(awk -v P="$P" -v p="$p" 'BEGIN {printf "%.2f", P / p * 1000}')
  o=$(awk -v f="$f" -v m="$pms" 'BEGIN {printf "%.2f", f - m}')
  echo "  run $r: tg128 $t t/s | sse $s t/s ($C tokens) | pp$P $p t/s = $pms ms | ttft $f ms | ttft-pp $o ms"
  tg+=("$t") pp+=("$pms") sse+=("$s") ttft+=("$f") over+=("$o")
done
mt=$(printf '%s\n' "${tg[@]}" | median)
ms=$(printf '%s\n' "${sse[@]}" | median)
echo "median tg128 $mt t/s, SSE $ms t/s = $(awk -v a="$ms" -v b="$mt" 'BEGIN {printf "%.1f", 100 * a / b}')% (target >= 98%)"
echo "median pp $(printf '%s\n' "${pp[@]}" | median) ms, ttft $(printf '%s\n' "${ttft[@]}" | median) ms, ttft - pp $(printf '%s\n' "${over[@]}" | median) ms (target < 2 ms)"
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
