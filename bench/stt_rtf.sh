#!/usr/bin/env bash
# bench/stt_rtf.sh - STT WER and real-time factor A/B on the pocketsphinx
# test recordings (bench/stt_rtf.c). Builds against build/libparley.a.
set -euo pipefail
cd "$(dirname "$0")/.."
make --no-print-directory -s build/libparley.a
PKGS="libmicrohttpd jansson sqlite3 libpcre2-8 libutf8proc libcurl gnutls libavformat libavcodec libavutil libswresample pocketsphinx sphinxbase espeak-ng"
FLITE="-lflite_cmu_us_slt -lflite_cmu_us_kal16 -lflite_cmu_us_kal -lflite_cmu_us_awb -lflite_cmu_us_rms -lflite_usenglish -lflite_cmulex -lflite"
cc -std=c17 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Isrc $(pkg-config --cflags $PKGS) \
  bench/stt_rtf.c build/libparley.a $(pkg-config --libs $PKGS) -lwslay $FLITE -lm -pthread -o build/bench-stt-rtf
./build/bench-stt-rtf "$@"
