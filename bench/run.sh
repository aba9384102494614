#!/usr/bin/env bash
# bench/run.sh - every benchmark, in sequence (make bench). Not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash bench/http.sh "$@"
