#!/usr/bin/env bash
# bench/convert.sh — converter throughput on the bench16 synthetic checkpoint
# (~22 GB of FP8 shards -> ~13 GB GGUF with q4_0 experts and a q8_0 trunk),
# next to the disk's sequential write throughput measured in the same run
# (dd oflag=direct). Run from the repository root; builds into build/.
# PRESET=small bench/convert.sh is a quick dry run on a 170 MB checkpoint.
#
# Environment: BUILD (default build), BENCH_DIR (default $BUILD/bench-convert),
# KEEP=1 keeps the GGUF, KEEP_SRC=1 keeps the synthetic checkpoint (both are
# deleted otherwise: they need ~35 GB together), THREADS (convert --threads).
# Last line: RESULT in_mbs=… out_mbs=… disk_write_mbs=… write_ratio=… peak_rss_mb=…
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
WORK=${BENCH_DIR:-$BUILD/bench-convert}
PRESET=${PRESET:-bench16}   # another synth preset for a quick dry run of this script
SRC=$WORK/$PRESET
OUT=$WORK/$PRESET.gguf
PETREL=$BUILD/petrel

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target petrel >/dev/null
mkdir -p "$WORK"

cleanup() {
    rm -f "$WORK/dd.tmp" "$OUT.partial" "$OUT.journal"
    [ "${KEEP:-0}" = 1 ] || rm -f "$OUT"
    [ "${KEEP_SRC:-0}" = 1 ] || rm -rf "$SRC"
}
trap cleanup EXIT

need_gb=36
[ "$PRESET" = bench16 ] || need_gb=1
free_gb=$(df -Pk "$WORK" | awk 'NR==2 {print int($4 / 1048576)}')
if [ ! -f "$SRC/model.safetensors.index.json" ] && [ "$free_gb" -lt "$need_gb" ]; then
    echo "bench/convert.sh: need ~${need_gb} GB free in $WORK, have ${free_gb} GB" >&2
    exit 1
fi

if [ ! -f "$SRC/model.safetensors.index.json" ]; then
    echo "== generating the $PRESET checkpoint in $SRC"
    "$PETREL" synth --preset "$PRESET" -o "$SRC" --quiet
fi
in_size=$(du -sb "$SRC" | awk '{print $1}')
echo "== checkpoint: $((in_size / 1000000)) MB"

# Disk sequential write throughput: 2 GiB with O_DIRECT, fsync at the end.
echo "== disk write throughput (dd oflag=direct, 2 GiB)"
dd_out=$(dd if=/dev/zero of="$WORK/dd.tmp" bs=16M count=128 oflag=direct conv=fsync 2>&1 | tail -1)
rm -f "$WORK/dd.tmp"
echo "$dd_out"
dd_bytes=$(echo "$dd_out" | awk '{print $1}')
dd_secs=$(echo "$dd_out" | sed -E 's/.* copied, ([0-9.]+) s.*/\1/')
disk_mbs=$(awk -v b="$dd_bytes" -v s="$dd_secs" 'BEGIN {printf "%.1f", b / s / 1e6}')

echo "== converting (q4_0 experts, q8_0 trunk)"
threads=()
[ -n "${THREADS:-}" ] && threads=(--threads "$THREADS")
log=$("$PETREL" convert "$SRC" -o "$OUT" --force "${threads[@]}" 2>/dev/null)
echo "$log"
summary=$(echo "$log" | grep '^SUMMARY')
get() { echo "$summary" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
in_b=$(get in_bytes)
out_b=$(get out_bytes)
secs=$(get seconds)
rss=$(get peak_rss_bytes)
cpu=$(get cpu_seconds)
echo "load average during the run (2-core machine shared with others): $(cut -d' ' -f1-3 /proc/loadavg)"

awk -v ib="$in_b" -v ob="$out_b" -v s="$secs" -v d="$disk_mbs" -v r="$rss" -v c="$cpu" 'BEGIN {
    in_mbs = ib / s / 1e6; out_mbs = ob / s / 1e6;
    printf "input  %.1f MB in %.1f s: %.1f MB/s\n", ib / 1e6, s, in_mbs;
    printf "output %.1f MB: %.1f MB/s (disk sequential write %.1f MB/s, ratio %.2f)\n", ob / 1e6, out_mbs, d, out_mbs / d;
    printf "peak RSS %.1f MB\n", r / 1e6;
    printf "CPU %.1f s: %.1f MB of input per CPU-second\n", c, ib / c / 1e6;
    printf "RESULT in_mbs=%.1f out_mbs=%.1f disk_write_mbs=%.1f write_ratio=%.3f peak_rss_mb=%.1f\n",
           in_mbs, out_mbs, d, out_mbs / d, r / 1e6;
}'
