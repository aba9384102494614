#!/usr/bin/env bash
# bench/attn.sh - model_attention alone, f16 against q8_0 KV cache, at a long
# context (bench/attn.c). Not part of the tests.
#   bench/attn.sh [depth=4096] [runs=200] [threads=2]
set -euo pipefail
cd "$(dirname "$0")/.."
make --no-print-directory -j2 build/libparley.a >/dev/null
mkdir -p build/bench
cc -std=c17 -D_GNU_SOURCE -O2 -g -Wall -Wextra -pthread -Isrc bench/attn.c build/libparley.a \
  -lm -pthread -o build/bench/attn
./build/bench/attn "$@"
