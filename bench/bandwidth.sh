#!/usr/bin/env bash
# bench/bandwidth.sh - the machine's memory read bandwidth (bench/bandwidth.c,
# bench/bw_probe.h): 256-bit loads into eight accumulators, threads taking
# disjoint 1 MiB chunks, median of runs. Not part of the tests.
#   bench/bandwidth.sh [--quick] [-t THREADS=2] [-m MIB=1024] [-r RUNS=7] [--pages 4k|huge|both]
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/bench
cc -std=c17 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -pthread bench/bandwidth.c -o build/bench/bandwidth
./build/bench/bandwidth "$@"
