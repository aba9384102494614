#!/usr/bin/env bash
# bench/constrain.sh - engine tokens/s with and without a json_object grammar
# (bench/constrain.c). Builds against build/libparley.a (make all first).
set -euo pipefail
cd "$(dirname "$0")/.."
make --no-print-directory -s build/libparley.a
PKGS="libmicrohttpd jansson sqlite3 libpcre2-8 libutf8proc libcurl"
cc -std=c17 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Isrc $(pkg-config --cflags $PKGS) \
  bench/constrain.c build/libparley.a $(pkg-config --libs $PKGS) -lwslay -lm -pthread -o build/bench-constrain
./build/bench-constrain "$@"
