#!/bin/sh
# bench/kernels.sh — CPU kernel benchmark (issue 5): GEMV effective weight
# bandwidth next to the machine's read bandwidth measured in the same run
# (working set > 4x the last-level cache), for 1 and 2 threads, and GEMM
# GFLOP/s at batch 8 / 64 / 512, then GEMV per weight type (every type of
# kernels/qtypes.h that Petrel supports, on the routed-expert shapes, each
# against the read bandwidth of its own buffers; unsupported types are
# listed as skipped). Last line:
#   RESULT membw_gbs=… gemv_q4_0_gbs=… gemv_q4_0_ratio=… gemv_q8_0_gbs=… gemv_q8_0_ratio=…
#          <type>_gemv_gbs=… <type>_gemv_ratio=… (per type; "na" when skipped)
# (2 threads; the first five over the large decode shapes together).
#
# Usage: bench/kernels.sh [--quick] [--types all|T,T,...] [--types-only]
#        bench/kernels.sh --incache [T,T,...]   (in-cache ns/block per path and type)
#   BUILD_DIR=... to choose the build dir.
# Memory: below ~2.5 GiB. Run it on an otherwise idle machine: other load
# on the cores or on the memory bus shows up directly in the figures.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
if ! { cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release &&
       cmake --build "$BUILD" -j"$(nproc)" --target bench_kernels; } >"$LOG" 2>&1; then
    cat "$LOG" >&2
    echo "bench/kernels.sh: build failed" >&2
    exit 1
fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cpus"
"$BUILD/bench_kernels" "$@"
