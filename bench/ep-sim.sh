#!/usr/bin/env bash
# bench/ep-sim.sh [TRACE] [bench_epsim options] — expert parallelism on paper
# (docs/scale-out.md). Replays a routing trace (`petrel bench --trace`) with
# the experts of every MoE layer sharded over 2, 4 and 8 ranks, placed
# round-robin, by heat, and by heat with the hottest replicated, and prints
# the bytes each token sends per layer and in all (all-to-all dispatch +
# combine), against one machine streaming its missing experts from local
# NVMe; break-even = the network bandwidth above which EP's transfers take
# less time than the NVMe reads (bench/bench_epsim.c).
# Without TRACE, records one: petrel bench -p 256 -n 128 on MODEL (default
# the synthetic small model, 64 experts top-6 with skewed routing; generated
# when missing).
# The projection defaults to DeepSeek-V3: 58 MoE layers, hidden 7168, bf16
# both ways, a Q4_K routed expert (3 x 7168 x 2048 weights, 24.8 MB), NVMe at
# 7 GB/s, a quarter of the experts cached in RAM, 10 us per all-to-all.
# Environment: PETREL_BUILD (default ./build), MODEL, HIDDEN, LAYERS,
# SLOT_BYTES, NVME_GBS, CACHE_FRAC, LATENCY_US, RANKS (default 2,4,8).
# Last lines: one per rank count,
#   RESULT ranks=R placement=P bytes_per_token_mb=X break_even_gbps=Y
# for the placement with the fewest bytes (Gbit/s).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${PETREL_BUILD:-$ROOT/build}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/petrel-epsim-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
fi
cmake --build "$BUILD" --target petrel bench_epsim -j2 >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
TRACE=""
if [ $# -ge 1 ] && [[ "$1" != -* ]]; then TRACE=$1; shift; fi
if [ -z "$TRACE" ]; then
    if [ -z "${MODEL:-}" ]; then
        MODEL="$BUILD/test-models/synth-small.gguf"
        if [ ! -f "$MODEL" ]; then
            "$BUILD/petrel" synth --preset small -o "$WORK/small" --quiet >/dev/null
            "$BUILD/petrel" convert "$WORK/small" -o "$WORK/small.gguf" >/dev/null 2>&1
            MODEL="$WORK/small.gguf"
        fi
    fi
    TRACE="$WORK/trace.txt"
    "$BUILD/petrel" bench -m "$MODEL" -p 256 -n 128 -r 1 -t 2 --usage none --trace "$TRACE" \
        >/dev/null 2>"$WORK/bench.log" || { cat "$WORK/bench.log" >&2; exit 1; }
fi
exec "$BUILD/bench_epsim" "$TRACE" --ranks "${RANKS:-2,4,8}" --hidden "${HIDDEN:-7168}" --layers "${LAYERS:-58}" \
    --slot-bytes "${SLOT_BYTES:-24772608}" --nvme-gbs "${NVME_GBS:-7}" --cache-frac "${CACHE_FRAC:-0.25}" \
    --latency-us "${LATENCY_US:-10}" "$@"
