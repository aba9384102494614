#!/usr/bin/env bash
# bench/model_cpu.sh - one-thread prompt/generation speed in tokens per CPU
# second (bench/model_cpu.c), for A/B comparisons on a loaded machine.
#   bench/model_cpu.sh MODEL.gguf [pp=128] [tg=32] [reps=3]
# With LIB=path/to/libparley.a it links that library instead (a baseline).
set -euo pipefail
cd "$(dirname "$0")/.."
make --no-print-directory -j2 build/libparley.a >/dev/null
mkdir -p build/bench
LIB=${LIB:-build/libparley.a}
out=build/bench/model_cpu${LIB_TAG:+-$LIB_TAG}
cc -std=c17 -D_GNU_SOURCE -O2 -g -Wall -Wextra -pthread -Isrc bench/model_cpu.c "$LIB" \
  $(pkg-config --libs libmicrohttpd jansson sqlite3 libpcre2-8 libutf8proc libcurl libavformat libavcodec libavutil libswresample pocketsphinx espeak-ng 2>/dev/null) \
  -lwslay -lflite_cmu_us_slt -lflite_cmu_us_kal16 -lflite_cmu_us_kal -lflite_cmu_us_awb -lflite_cmu_us_rms \
  -lflite_usenglish -lflite_cmulex -lflite -lm -pthread -o "$out"
"$out" "$@"
