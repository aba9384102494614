#!/usr/bin/env bash
# bench/moe_streams.sh - total generation rate of 4 concurrent streams
# through `parley serve` against one stream, on a mixture-of-experts model
# (issue #27: at least 2x, from grouping the experts across slots: the
# engine puts every decoding slot's next token into one batch, and the MoE
# layer reads each routed expert once for all the batch's tokens sent to
# it, model/moe.c). Not part of the tests.
#
# The model is the gpt-oss-20b per-layer shape (MXFP4 experts, 32 of them,
# top-4) with MOE_LAYERS of its layers, as bench/models.sh writes it, but
# with the GPT-2 vocabulary (50257 tokens, so the legacy completions route
# can tokenize a prompt; gpt-oss's own has 201088, its output head is then
# 4x this one's). Each round: one streamed 128-token completion alone, then
# STREAMS at once (bench/streams_client.mjs; EOS banned, greedy), the order
# alternating between rounds; prints each round and the medians.
#   bench/moe_streams.sh [ROUNDS=3] [STREAMS=4] [TOKENS=128]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
STREAMS=${2:-4}
TOKENS=${3:-128}
MOE_LAYERS=${MOE_LAYERS:-2}
BIN=${PARLEY_BIN:-./build/parley}
VOCAB=../shared/vocab/ggml-vocab-gpt-2.gguf
EOS=50256 # <|endoftext|> of that vocabulary
[ -f "$VOCAB" ] || { echo "needs $VOCAB (the shared folder)"; exit 1; }
mkdir -p build/bench-models
model=${MODEL:-build/bench-models/gpt-oss-20b-MXFP4-L$MOE_LAYERS-gpt2.gguf}
[ -f "$model" ] || { echo "generating $model"; "$BIN" gen-model "$model" --arch gpt-oss --shape gpt-oss-20b \
  --layers "$MOE_LAYERS" --vocab "$VOCAB" >/dev/null; }

data=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$data"' EXIT
mkdir -p "$data/models"
PARLEY_NO_EXTERNAL_MODELS=1 "$BIN" serve --port 0 --data-dir "$data" --models-dir "$data/models" --model "$model" \
  --parallel "$STREAMS" --no-auth --access-log=false --log-level warn >"$data/out" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q 'listening on' "$data/out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$data/out")
[ -n "$port" ] || { cat "$data/out"; exit 1; }
url="http://127.0.0.1:$port"
name=$(basename "$model" .gguf)
words="the quick brown fox jumps over the lazy dog while seven small birds sing"
node bench/streams_client.mjs "$url" "$name" 1 8 "$EOS" "warm $words" >/dev/null # loads the model

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: $model ($(du -h "$model" | cut -f1)), $STREAMS slots, compute threads = cores, $TOKENS tokens per stream"
tps() { sed -nE 's/.*"total_tps":([0-9.e+-]+).*/\1/p'; }
one=() many=()
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then
    a=$(node bench/streams_client.mjs "$url" "$name" 1 "$TOKENS" "$EOS" "r$r $words")
    b=$(node bench/streams_client.mjs "$url" "$name" "$STREAMS" "$TOKENS" "$EOS" "r$r $words")
  else
    b=$(node bench/streams_client.mjs "$url" "$name" "$STREAMS" "$TOKENS" "$EOS" "r$r $words")
    a=$(node bench/streams_client.mjs "$url" "$name" 1 "$TOKENS" "$EOS" "r$r $words")
  fi
  echo "  round $r: 1 stream $a"
  echo "  round $r: $STREAMS streams $b (load $(cut -d' ' -f1 /proc/loadavg))"
  one+=("$(echo "$a" | tps)") many+=("$(echo "$b" | tps)")
done
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
m1=$(printf '%s\n' "${one[@]}" | median)
mn=$(printf '%s\n' "${many[@]}" | median)
echo "median total tokens/s: 1 stream $m1, $STREAMS streams $mn, ratio $(awk -v a="$mn" -v b="$m1" 'BEGIN {printf "%.2f", a / b}') (target >= 2)"
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
