#!/usr/bin/env bash
# bench/fuzz.sh [SECONDS_PER_TARGET] — builds the libFuzzer targets (clang,
# ASan + UBSan) into build-fuzz/ and runs each for SECONDS_PER_TARGET
# seconds (default 600) with fuzz/run.sh; last line
#   RESULT targets=… seconds_each=… execs=… findings=…
# Crash inputs land in build-fuzz/fuzz/artifacts/; fix the bug and keep the
# input under fuzz/regressions/<target>/ (docs/reliability.md).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-600}"
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DPETREL_FUZZ=ON >/dev/null
nice -n 10 cmake --build build-fuzz --target fuzz_all -j2 >/dev/null
exec ./fuzz/run.sh build-fuzz/fuzz "$secs"
