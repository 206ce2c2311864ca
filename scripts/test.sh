#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (CTest + Criterion),
# then the same suite built with ASan + UBSan. Stages:
#   1. build/       Release (scripts/build.sh)
#   2. build-fuzz/  the libFuzzer targets (clang, ASan + UBSan; fuzz/)
#   3. ctest in build/: every test, fuzz_short included (each fuzz target
#      for PETREL_FUZZ_SECONDS, 10 by default, plus its kept regressions)
#   4. build-asan/  gcc with -fsanitize=address,undefined; ctest there
#      (docs/reliability.md: what it excludes and why, and how long it takes)
# PETREL_SKIP_ASAN=1 stops after stage 3.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DPETREL_FUZZ=ON >/dev/null
cmake --build build-fuzz --target fuzz_all -j"$(nproc)"
# Tests run two at a time on 2 cores: OpenMP threads must sleep, not spin,
# at barriers, or oversubscribed test processes slow each other down 20x.
export OMP_WAIT_POLICY=passive
ctest --test-dir build --output-on-failure -j2
[ "${PETREL_SKIP_ASAN:-0}" = 1 ] && exit 0
./scripts/test_asan.sh
