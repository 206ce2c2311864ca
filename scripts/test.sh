#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (CTest + Criterion).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh
ctest --test-dir build --output-on-failure -j2
