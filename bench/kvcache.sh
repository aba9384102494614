#!/usr/bin/env bash
# bench/kvcache.sh - generation speed and KV cache memory with the f16 and
# q8_0 caches at a long context: `parley bench -d DEPTH` fills DEPTH
# positions (in batches of 512), then times tg32 from there, alternating the
# two cache types ROUNDS times so that a busy machine hurts both alike. The
# model is TinyLlama-1.1B's shape in Q4_0 with an 8192-position trained
# context (the stock bench model's 2048 is too short), generated once into
# build/bench-models/. Not part of `make bench` by default (several minutes
# per round): run it by hand.
#   bench/kvcache.sh [ROUNDS=2] [DEPTH=4096]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
DEPTH=${2:-4096}
BIN=./build/parley
dir=build/bench-models
f="$dir/tinyllama-Q4_0-ctx8k.gguf"
mkdir -p "$dir"
[ -f "$f" ] || { echo "generating $f"; "$BIN" gen-model "$f" --shape tinyllama --type Q4_0 --ctx 8192 >/dev/null; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for ct in f16 q8_0; do
  echo "== depth 0, cache $ct, load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$BIN" bench "$f" -p 0 -n 64 -t 2 -r 3 --cache-type "$ct"
done
for r in $(seq "$ROUNDS"); do
  for ct in f16 q8_0; do
    echo "== depth $DEPTH, cache $ct, round $r, load $(cut -d' ' -f1-3 /proc/loadavg)"
    "$BIN" bench "$f" -p 0 -n 32 -t 2 -r 3 -d "$DEPTH" --cache-type "$ct"
  done
done
