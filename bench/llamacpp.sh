#!/usr/bin/env bash
# bench/llamacpp.sh - the issue-#3 models on parley and on llama.cpp, the
# best-known CPU engine, on this machine, in the same minutes.
#
# Issue #3's prompt bar is "at least as fast as the fastest CPU engine on the
# same machine"; its reference figures were taken on another CPU (an AVX-512
# EPYC). This measures the engine itself here. llama.cpp's source comes from
# the npm registry (the one registry these machines reach besides Debian's):
# the node-llama-cpp package ships the llama.cpp release it binds as a git
# bundle. The tarball is pinned by version and by the registry's sha512
# integrity, and llama.cpp's own `llama-bench` is built from it with
# -DGGML_NATIVE=ON (-march=native: the best build of it for this CPU, its
# default runtime settings: repacked weights, flash attention "auto") into
# build/llamacpp/ (~5 minutes, once per CPU model). Nothing of it enters
# parley; it is a yardstick.
#
# Each round runs, per model, `parley bench -p 512 -n 128 -r 1` and
# `llama-bench -p 512 -n 128 -r 1` (each warms up first), the order of the
# two alternating between rounds; the table gives the medians over ROUNDS
# and parley / llama.cpp. Models are bench/model.sh's (bench/models.sh),
# rewritten when they predate the no-vocabulary keys llama.cpp's loader
# needs (tokenizer.ggml.model "none", ARCH.vocab_size).
#   bench/llamacpp.sh [ROUNDS=3] [MODELS="tinyllama:F16 ... qwen2.5-0.5b:Q4_K_M"] [THREADS=2] [DEPTH=0]
# (a bare type in MODELS means tinyllama:TYPE; PARLEY_BIN overrides parley;
# DEPTH > 0: both tests start with DEPTH positions cached, -d for both
# engines; depth + 640 must fit the model's context)
# Each parley run sits between two read-bandwidth probes (bench/bandwidth.c
# --quick, THREADS threads, a working set of the file's size or 1 GiB):
# the table's bound is the median of a model's probes over the bytes a
# generated token reads (parley bench's figure), tg / bound parley's
# median tg128 against it, and "RSS gen" parley's resident memory right
# after generating against weights + KV cache + 64 MiB (issue #26's
# memory bar; the KV cache as parley sized it, sliding layers to their
# window).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
. bench/models.sh
MODELS=${2:-$BENCH_MODELS_DEFAULT}
THREADS=${3:-2}
DEPTH=${4:-0}
NLC_VERSION=3.22.1
NLC_INTEGRITY=sha512-bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw==

lc=build/llamacpp
LB=$lc/src/build/bin/llama-bench
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); cpu="$cpu $(grep -m1 '^flags' /proc/cpuinfo | md5sum | cut -c1-8)"
if [ ! -x "$LB" ] || [ "$(cat "$lc/cpu" 2>/dev/null)" != "$cpu" ]; then
  for c in npm git cmake g++ openssl; do
    command -v "$c" >/dev/null || { echo "llamacpp.sh: needs $c (scripts/deps.sh)" >&2; exit 1; }
  done
  echo "building llama.cpp's llama-bench (node-llama-cpp $NLC_VERSION's bundle) for this CPU into $lc"
  rm -rf "$lc" && mkdir -p "$lc/pkg"
  (cd "$lc" && npm pack --silent "node-llama-cpp@$NLC_VERSION" >/dev/null) ||
    { echo "llamacpp.sh: npm pack node-llama-cpp@$NLC_VERSION failed (is the npm registry reachable?)" >&2; exit 1; }
  tgz=$lc/node-llama-cpp-$NLC_VERSION.tgz
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$NLC_INTEGRITY" ]; then
    echo "llamacpp.sh: $tgz has integrity $got, expected $NLC_INTEGRITY" >&2
    exit 1
  fi
  tar xzf "$tgz" -C "$lc/pkg" package/llama/gitRelease.bundle
  git clone -q "$lc/pkg/package/llama/gitRelease.bundle" "$lc/src" 2>"$lc/clone.log" ||
    { echo "llamacpp.sh: cloning the llama.cpp bundle failed, see $lc/clone.log" >&2; exit 1; }
  cmake -S "$lc/src" -B "$lc/src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    >"$lc/cmake.log" 2>&1 || { echo "llamacpp.sh: cmake failed, see $lc/cmake.log" >&2; exit 1; }
  cmake --build "$lc/src/build" --target llama-bench -j"$(nproc)" >"$lc/build.log" 2>&1 ||
    { echo "llamacpp.sh: build failed, see $lc/build.log" >&2; exit 1; }
  echo "$cpu" >"$lc/cpu"
fi

bench_models_ensure "$MODELS"
mkdir -p build/bench
cc -std=c17 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -pthread bench/bandwidth.c -o build/bench/bandwidth
probe() {
  local mib=$(( ($(stat -c %s "$1") + 1048575) / 1048576 ))
  [ "$mib" -ge 1024 ] || mib=1024
  ./build/bench/bandwidth --quick -t "$THREADS" -m "$mib" | awk '/^bw_gbs/ {print $2}'
}

echo "machine: $(nproc) cores, ${cpu% *}, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "llama.cpp: $("$LB" --version 2>&1 | grep -m1 -i version || true), built -march=native"
# one round of one engine on one model: prints "PP TG" (tokens/s); parley
# also "BW_BEFORE BW_AFTER TOKEN_BYTES RSS_GEN_MIB WEIGHTS_MIB KV_MIB"
run_parley() {
  local b0 b1 out
  b0=$(probe "$1")
  out=$("$BIN" bench "$1" -p 512 -n 128 -d "$DEPTH" -t "$THREADS" -r 1)
  b1=$(probe "$1")
  printf '%s\n' "$out" | awk -v f="$1" -v b0="$b0" -v b1="$b1" '/^pp[0-9]/ {pp = $2} /^tg[0-9]/ {tg = $2}
      /each generated token reads/ {b = $(NF - 1); sub(/\(/, "", b)}
      /^RSS while generating/ {rss = $4; w = $8; kv = $12}
      END {if (pp == "" || tg == "" || b == "" || rss == "") {print "llamacpp.sh: parley bench gave no pp/tg/bytes/RSS result for " f > "/dev/stderr"; exit 1}
           print pp, tg, b0, b1, b, rss, w, kv}'
}
run_llama() {
  "$LB" -m "$1" -p 512 -n 128 -d "$DEPTH" -t "$THREADS" -r 1 -o jsonl 2>/dev/null | python3 -c '
import json, sys
pp = tg = None
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"): continue
    r = json.loads(line)
    if r["n_prompt"] > 0: pp = r["avg_ts"]
    else: tg = r["avg_ts"]
if pp is None or tg is None: sys.exit("llamacpp.sh: llama-bench gave no pp/tg result for " + sys.argv[1])
print("%.2f %.2f" % (pp, tg))' "$1"
}
results=""
for r in $(seq 1 "$ROUNDS"); do
  for m in $MODELS; do
    m=$(bench_model_name "$m")
    f=$(bench_model_path "$m")
    if [ $((r % 2)) -eq 1 ]; then p=$(run_parley "$f"); l=$(run_llama "$f")
    else l=$(run_llama "$f"); p=$(run_parley "$f"); fi
    set -- $p
    echo "  round $r $m: parley pp512/tg128 $1 $2 (probes $3 $4 GB/s, RSS gen $6 MiB), llama.cpp $l (load $(cut -d' ' -f1 /proc/loadavg))"
    results="$results$m $1 $2 $l $3 $4 $5 $6 $7 $8"$'\n'
  done
done
printf '%s' "$results" | python3 -c '
import statistics, sys
rows = {}
for line in sys.stdin:
    m, *v = line.split()
    rows.setdefault(m, []).append(tuple(map(float, v)))
print()
print("| model | parley pp512 | llama.cpp pp512 | pp ratio | parley tg128 | llama.cpp tg128 | tg ratio"
      " | bound | tg / bound | RSS gen / (weights + KV + 64) MiB |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for m, rs in rows.items():
    pp, tg, lpp, ltg = (statistics.median(r[i] for r in rs) for i in range(4))
    bw = statistics.median([r[4] for r in rs] + [r[5] for r in rs])
    bound = bw * 1e9 / rs[0][6]
    rss, w, kv = (max(r[i] for r in rs) for i in (7, 8, 9))
    print("| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f | %.1f (%.1f GB/s, %.0f MB/token) | %.0f%% | %.0f / %.0f |"
          % (m, pp, lpp, pp / lpp, tg, ltg, tg / ltg, bound, bw, rs[0][6] / 1e6, 100 * tg / bound, rss, w + kv + 64))
print("(medians of %d rounds, tokens/s, %s threads, depth %s)" % (len(next(iter(rows.values()))), sys.argv[1], sys.argv[2]))' "$THREADS" "$DEPTH"
