#!/usr/bin/env bash
# bench/decode_wall.sh - one decode token's wall time by piece against reading the same weights in the same process (bench/decode_wall.c).
# Builds against build/libparley.a (make all first). Not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
make --no-print-directory -s build/libparley.a
PKGS="libmicrohttpd jansson sqlite3 libpcre2-8 libutf8proc libcurl"
cc -std=c17 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Wshadow -Isrc $(pkg-config --cflags $PKGS) \
  bench/decode_wall.c build/libparley.a $(pkg-config --libs $PKGS) -lwslay -lm -pthread -o build/bench-decode-wall
./build/bench-decode-wall "$@"
