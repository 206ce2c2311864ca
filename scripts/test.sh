#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (CTest + Criterion).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh
# Tests run two at a time on 2 cores: OpenMP threads must sleep, not spin,
# at barriers, or oversubscribed test processes slow each other down 20x.
export OMP_WAIT_POLICY=passive
ctest --test-dir build --output-on-failure -j2
