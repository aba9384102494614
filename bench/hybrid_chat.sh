#!/usr/bin/env bash
# bench/hybrid_chat.sh - hit rate and time to first token of a 10-turn chat
# on a hybrid model with and without recurrent-state checkpoints
# (bench/hybrid_chat.mjs; issue #30 item 2). Not part of the tests.
#   bench/hybrid_chat.sh [CHECKPOINTS=8,0]
# Generates once build/bench-models/hybrid/liquid/lfm2-1.2b.gguf: LFM2-1.2B's
# shape (parley gen-model --arch lfm2 --shape lfm2-1.2b), random Q4_K_M
# weights, the shared llama SPM vocabulary (32000 tokens instead of LFM2's
# 65536, for a real tokenizer) and LFM2.5's chat template; then prints the
# machine and one JSON line per checkpoint count.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${PARLEY_BIN:-./build/parley}
SHARED=${PARLEY_SHARED:-../shared}
VOCAB=$SHARED/vocab/ggml-vocab-llama-spm.gguf
TMPL=$SHARED/templates/LFM2.5-Instruct.jinja
for f in "$VOCAB" "$TMPL"; do [ -f "$f" ] || { echo "hybrid_chat: needs $f (the shared folder)"; exit 1; }; done
[ -x "$BIN" ] || { echo "hybrid_chat: no $BIN (make all)"; exit 1; }
dir=build/bench-models/hybrid
mkdir -p "$dir/liquid"
model=$dir/liquid/lfm2-1.2b.gguf
[ -f "$model" ] || "$BIN" gen-model "$model" --arch lfm2 --shape lfm2-1.2b --type Q4_K_M --vocab "$VOCAB" \
  --chat-template "$TMPL" --ctx 32768
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(git rev-parse --short HEAD)"
PARLEY_BIN=$BIN node bench/hybrid_chat.mjs "$dir" liquid/lfm2-1.2b "${1:-8,0}"
