#!/usr/bin/env bash
# Installs the pinned npm packages of the API tests (tests/api/package-lock.json)
# when they are missing or older than the lockfile.
set -euo pipefail
cd "$(dirname "$0")/../tests/api"
[ -f package.json ] || exit 0
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "npm: installing the API tests' packages from package-lock.json"
  npm ci --no-audit --no-fund --loglevel=error
fi
