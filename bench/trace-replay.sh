#!/usr/bin/env bash
# bench/trace-replay.sh TRACE [--slots N | --bytes B] [--hot-frac F] [--usage FILE] [--count-from POS]
# Replays a routing trace (recorded with petrel_trace_open / --trace) against
# LRU, LFU, the hot-store, lookahead prefetch and Belady's optimal policy at
# the same capacity and prints their hit rates side by side (bench/bench_trace.c).
# Default capacity: 8 slots per layer. BUILD: build directory (build-stream).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-stream}
[ $# -ge 1 ] || { echo "usage: $0 TRACE [--slots N | --bytes B] [--hot-frac F] [--usage FILE]" >&2; exit 2; }
TRACE=$1; shift
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target bench_trace -j2 >/dev/null
args=("$@")
if [[ " ${args[*]-} " != *" --slots "* && " ${args[*]-} " != *" --bytes "* ]]; then args+=(--slots 8); fi
exec "$BUILD/bench_trace" "$TRACE" "${args[@]}"
