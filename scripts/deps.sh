#!/usr/bin/env bash
# Installs the Debian packages parley needs to build, test and benchmark.
# Idempotent: only packages that are missing are installed, and the script says
# which. Works as root or through sudo. Called by `make run` and `make test`.
set -euo pipefail

PKGS=(
  build-essential pkg-config clang llvm libclang-rt-14-dev
  libmicrohttpd-dev libwslay-dev libjansson-dev libsqlite3-dev
  libpcre2-dev libutf8proc-dev libcurl4-openssl-dev libgnutls28-dev zlib1g-dev
  python3 python3-numpy python3-jinja2 python3-regex
  libavformat-dev libavcodec-dev libavutil-dev libswresample-dev
  flite1-dev libespeak-ng-dev espeak-ng-data
  libpocketsphinx-dev libsphinxbase-dev pocketsphinx-en-us pocketsphinx-testdata
  openssl curl wrk sox
  cmake git  # bench/llamacpp.sh builds llama.cpp's llama-bench to compare against
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
# Node.js and npm run the API tests with the vendors' SDKs; a machine that
# already has a newer Node (not from Debian) keeps it.
if ! command -v node >/dev/null 2>&1; then missing+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
