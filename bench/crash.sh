#!/usr/bin/env bash
# bench/crash.sh — the long kill -9 run of issue 15: KILLS (default 50) kills
# at seeded random instants in each of conversion, state save, usage-file
# update and serve with requests in flight (tests/crash/run.sh says what
# each case checks). Run from the repository root; builds into BUILD
# (default build). SEED (default: the clock) is printed and in the RESULT
# line; rerun with SEED=N to draw the same kill times.
# Last line: RESULT cases=… kills=… failures=… seed=… (per-case counts follow)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
KILLS=${KILLS:-50}
SEED=${SEED:-$(( $(date +%s) % 100000 ))}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target petrel crash_helper >/dev/null
exec tests/crash/run.sh --petrel "$BUILD/petrel" --helper "$BUILD/tests/crash_helper" \
    --kills "$KILLS" --seed "$SEED" --work "$BUILD/bench-crash"
