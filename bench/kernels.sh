#!/usr/bin/env bash
# bench/kernels.sh - kern_matmul throughput per weight type next to the
# machine's read bandwidth (bench/kernels.c). Not part of the tests.
#   bench/kernels.sh [threads_max=2] [runs=5] [types=F16,BF16,Q8_0,Q4_0,Q4_K,Q5_K,Q6_K]
# PARLEY_KERNELS=reference measures the reference kernels instead.
set -euo pipefail
cd "$(dirname "$0")/.."
make --no-print-directory -j2 build/libparley.a >/dev/null
mkdir -p build/bench
cc -std=c17 -D_GNU_SOURCE -O2 -g -Wall -Wextra -pthread -Isrc -Ibench bench/kernels.c build/libparley.a \
  -lm -pthread -o build/bench/kernels
./build/bench/kernels "$@"
