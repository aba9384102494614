#!/usr/bin/env bash
# bench/model.sh - prompt processing (pp512) and generation (tg128) tokens/s
# of random-weight models of TinyLlama-1.1B's shape at F16, Q8_0, Q4_0 and
# Q4_K_M and of Qwen2.5-0.5B's shape at Q8_0 and Q4_K_M, with THREADS
# threads, medians of RUNS repetitions (`parley bench`), each next to the
# generation bound the machine's read bandwidth allows: bandwidth / weight
# bytes a generated token reads. The bandwidth is measured right before and
# right after each generation run with the same thread count
# (bench/bandwidth.c --quick: the widest loads (512-bit with AVX-512),
# threads taking disjoint 1 MiB chunks, median of 5, over a working set of
# the model file's size or 1 GiB, whichever is larger): the model's bound
# uses the median of those RUNS + 1 probes, taken in the same minutes as
# its generation runs (one probe alone swung 15-38 GB/s between minutes on
# a shared machine; one pair of probes framing all runs, or each run's
# mean of its two, lets a single low probe skew the bound), and tg is the
# median of the runs. The probe does not read a fixed 256 MiB: an Intel
# machine with a 260 MiB L3 (shared with other guests) could keep part of
# it there on a quiet host, a bound too high for weights of 0.4-2.2 GB
# that a token reads whole (on the loaded host 64 MiB .. 2 GiB all read
# 5-8 GB/s: docs/perf-decisions.md, "The bandwidth bound"). PARLEY_BIN overrides the binary
# (A/B of two builds). Models are generated once
# into build/bench-models/ by `parley gen-model` (bench/models.sh).
#   bench/model.sh [RUNS=3] [MODELS="tinyllama:F16 tinyllama:Q8_0 tinyllama:Q4_0 tinyllama:Q4_K_M qwen2.5-0.5b:Q8_0 qwen2.5-0.5b:Q4_K_M"] [THREADS=2]
# (a bare type in MODELS means tinyllama:TYPE)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
. bench/models.sh
MODELS=${2:-$BENCH_MODELS_DEFAULT}
THREADS=${3:-2}
mkdir -p build/bench
cc -std=c17 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -pthread bench/bandwidth.c -o build/bench/bandwidth
bench_models_ensure "$MODELS"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
summary=""
for m in $MODELS; do
  m=$(bench_model_name "$m")
  f=$(bench_model_path "$m")
  echo "== $m"
  mib=$(( ($(stat -c %s "$f") + 1048575) / 1048576 ))
  [ "$mib" -ge 1024 ] || mib=1024
  probe() { ./build/bench/bandwidth --quick -t "$THREADS" -m "$mib" | awk '/^bw_gbs/ {print $2}'; }
  pp=$("$BIN" bench "$f" -p 512 -n 0 -t "$THREADS" -r "$RUNS" | awk '/^pp[0-9]/ {print $2}')
  # each generation run between two probes
  bw_prev=$(probe)
  runs=""
  for r in $(seq 1 "$RUNS"); do
    out=$("$BIN" bench "$f" -p 0 -n 128 -t "$THREADS" -r 1)
    bw_next=$(probe)
    tg=$(printf '%s\n' "$out" | awk '/^tg[0-9]/ {print $2}')
    bytes=$(printf '%s\n' "$out" | awk '/each generated token reads/ {b = $(NF - 1); sub(/\(/, "", b); print b}')
    echo "  run $r: tg128 $tg t/s between probes of $bw_prev and $bw_next GB/s (load $(cut -d' ' -f1 /proc/loadavg))"
    runs="$runs$tg $bw_prev $bw_next $bytes"$'\n'
    bw_prev=$bw_next
  done
  # the bound: the median of all the model's probes (RUNS + 1 of them; a
  # probe taken while another guest hammered memory read 15 GB/s between
  # two of 27-31, and as the mean of a run's two probes it once put a
  # model at 104% of its bound); tg: the median of the runs
  line=$(printf '%s' "$runs" | awk -v m="$m" -v pp="$pp" '
    function median(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
                                        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    { n++; tg[n] = $1; if (n == 1) bw[++nb] = $2; bw[++nb] = $3; b = $4 }
    END {lo = hi = bw[1]; for (i = 2; i <= nb; i++) { if (bw[i] < lo) lo = bw[i]; if (bw[i] > hi) hi = bw[i] }
         bwm = median(bw, nb); bound = bwm * 1e9 / b; t = median(tg, n)
         printf "%-22s pp512 %7.1f  tg128 %6.1f  bound %6.1f t/s (%.1f GB/s, probes %.1f-%.1f / %.1f MB per token)  tg = %3.0f%% of bound\n",
                m, pp, t, bound, bwm, lo, hi, b / 1e6, 100 * t / bound}')
  echo "$line"
  summary="$summary$line"$'\n'
done
echo "== summary ($THREADS threads, median of $RUNS; load now $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%s' "$summary"
