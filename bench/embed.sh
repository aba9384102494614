#!/usr/bin/env bash
# bench/embed.sh - embeddings per CPU-second, one at a time vs the embedding
# batcher (bench/embed.c). Builds against build/libparley.a. Not a test.
#   bash bench/embed.sh [small|minilm] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
make --no-print-directory -s build/libparley.a
PKGS="libmicrohttpd jansson sqlite3 libpcre2-8 libutf8proc libcurl"
cc -std=c17 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Wshadow -Isrc $(pkg-config --cflags $PKGS) \
  bench/embed.c build/libparley.a $(pkg-config --libs $PKGS) -lwslay -lm -pthread -o build/bench-embed
./build/bench-embed "$@"
