#!/usr/bin/env bash
# bench/run.sh - every benchmark, in sequence (make bench). Not part of the
# tests. Each script prints its own table; docs/perf.md records them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash bench/http.sh
[ -f bench/kernels.sh ] && bash bench/kernels.sh
bash bench/model.sh
bash bench/llamacpp.sh
[ -f bench/serve.sh ] && bash bench/serve.sh
[ -f bench/sse.sh ] && bash bench/sse.sh
[ -f bench/grammar.sh ] && bash bench/grammar.sh
[ -f bench/stt_rtf.sh ] && bash bench/stt_rtf.sh 3 whole "split=-1" split12 "split=12"
