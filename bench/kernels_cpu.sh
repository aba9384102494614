#!/usr/bin/env bash
# bench/kernels_cpu.sh - one kern_matmul shape on one thread in CPU time
# (bench/kernels_cpu.c), for A/B comparisons on a loaded machine.
#   bench/kernels_cpu.sh TYPE ROWS COLS TOKENS [runs=9]
# TOKENS may be a comma list (1,2,4,8): each count timed in turn over the
# same weights, one line each (the 4:1 step ratio in one process).
# ROTATE_MB=M: one pass over M MB of distinct matrices per run, GB/s next to
# the one-thread read probe of the same run; ITERS=N: N untimed passes (for
# valgrind --tool=callgrind instruction counts).
# With LIB=path/to/libparley.a (and LIB_TAG=name) it links that library
# instead, e.g. a baseline built from another commit. PACK=1 multiplies
# weights repacked with kern_pack when the library has it.
set -euo pipefail
cd "$(dirname "$0")/.."
make --no-print-directory -j2 build/libparley.a >/dev/null
mkdir -p build/bench
LIB=${LIB:-build/libparley.a}
out=build/bench/kernels_cpu${LIB_TAG:+-$LIB_TAG}
def=
if nm "$LIB" 2>/dev/null | grep ' T kern_pack$' >/dev/null; then def=-DHAVE_PACK; fi
cc $def -std=c17 -D_GNU_SOURCE -O2 -g -Wall -Wextra -pthread -Isrc -Ibench bench/kernels_cpu.c "$LIB" -lm -pthread -o "$out"
"$out" "$@"
