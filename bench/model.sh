#!/usr/bin/env bash
# bench/model.sh - prompt processing (pp512) and generation (tg128) tokens/s
# of random-weight models of TinyLlama-1.1B's shape at F16, Q8_0, Q4_0 and
# Q4_K_M, with 2 threads, medians of RUNS repetitions (`parley bench`), next
# to the generation bound the machine's read bandwidth allows
# (bandwidth / weight bytes read per token). Models are generated once into
# build/bench-models/ by `parley gen-model` (a few minutes the first time).
#   bench/model.sh [RUNS=3] [TYPES="F16 Q8_0 Q4_0 Q4_K_M"]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
TYPES=${2:-"F16 Q8_0 Q4_0 Q4_K_M"}
BIN=./build/parley
dir=build/bench-models
mkdir -p "$dir"
for t in $TYPES; do
  f="$dir/tinyllama-$t.gguf"
  [ -f "$f" ] || { echo "generating $f"; "$BIN" gen-model "$f" --shape tinyllama --type "$t" >/dev/null; }
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in $TYPES; do
  echo "== tinyllama $t"
  "$BIN" bench "$dir/tinyllama-$t.gguf" -p 512 -n 128 -t 2 -r "$RUNS"
done
