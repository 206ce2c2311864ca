#!/usr/bin/env bash
# bench/stream.sh — expert streaming from disk on the bench16 synthetic model
# (about 12 GB of q4_0 experts, q8_0 trunk), converted once and reused.
#
# For RAM budgets of 2, 3 and 6 GiB, each run under a cgroup-v1 memory cap a
# little above the budget (budget + CAP_EXTRA_MIB), cold (page cache
# dropped, no usage file: no hot-store yet) and then warm (the usage file the
# cold run wrote, page cache as left), it decodes NGEN tokens after a fixed
# prompt (bench/bench_stream.c) and prints one line per budget and state:
#
#   RESULT budget_gib=… cache=cold|warm tok_s=… hit_rate=… belady_hit_rate=…
#     belady_ratio=… gb_per_token=… read_gbs=… fio_gbs=… read_ratio=…
#     resident_tok_s=… limit_tok_s=… limit_ratio=… peak_rss_gib=…
#     budget_ok=… stall_s=… compute_s=… prefetch_hit=… recall=… qd=…
#     fio_before=… fio_after=… fio_best=… strict_limit_ratio=…
#     static_oracle_hit_rate=… oom_kills=…
#
# hit_rate counts the LRU + hot-store tiers (prefetched experts were read);
# belady_hit_rate replays the same run's routing trace under Belady's
# optimal policy at the same capacity (bench/bench_trace.c); fio_gbs is fio's
# O_DIRECT random-read throughput at the engine's request size (one expert
# slice) and queue depth on the same file, measured for FIO_S seconds right
# before and right after each engine run (the higher of the two, so that the
# limit is never understated; both are printed as fio_before / fio_after:
# this disk's speed drifts by 2-5x within minutes); strict_limit_ratio uses
# instead the highest fio figure seen so far in the run (first measured on
# the rested disk before anything else); static_oracle_hit_rate is
# the ceiling of any frequency-based policy on the same trace (the most used
# experts of each layer in hindsight, fixed: bench/bench_trace.c);
# resident_tok_s is the speed with every expert in RAM (no cap); and
# limit_tok_s = min(fio_gbs / gb_per_token, resident_tok_s).
#
# Environment: MODEL (an existing bench16 GGUF), WORK (where to generate it,
# default /work/bench-models), BUILD (build dir), BUDGETS ("2 3 6"),
# NGEN (64), CAP_EXTRA_MIB (256), QD (32), FIO_S (5), SKIP_RESIDENT=1, THREADS,
# OMP_WAIT_POLICY (default passive).
# Needs root for drop_caches and cgroups; without them it says so and runs
# uncapped / without dropping caches.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-stream}
WORK=${WORK:-/work/bench-models}
MODEL=${MODEL:-$WORK/bench16.gguf}
BUDGETS=${BUDGETS:-"2 3 6"}
NGEN=${NGEN:-64}
CAP_EXTRA_MIB=${CAP_EXTRA_MIB:-256}
QD=${QD:-32}
FIO_S=${FIO_S:-5}
THREADS=${THREADS:-0}
# OpenMP workers that spin while the main thread waits on reads steal the CPU
# on a small shared box; sleeping waits are the better default here.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target petrel bench_stream bench_trace -j2 >/dev/null
PETREL=$BUILD/petrel

# ---- the model, generated and converted once --------------------------------
if [ ! -f "$MODEL" ]; then
    mkdir -p "$WORK"
    avail_gb=$(df -BG --output=avail "$WORK" | tail -1 | tr -dc 0-9)
    if [ "$avail_gb" -lt 40 ]; then
        echo "stream.sh: $WORK has ${avail_gb} GB free; generating bench16 needs ~40 GB (22 GB FP8 + 13 GB GGUF)" >&2
        exit 1
    fi
    echo "stream.sh: generating bench16 into $WORK (once)" >&2
    "$PETREL" synth --preset bench16 -o "$WORK/bench16-src" --quiet
    "$PETREL" convert "$WORK/bench16-src" -o "$MODEL" --expert-type q4_0 --trunk-type q8_0 --delete-source >/dev/null
    rm -rf "$WORK/bench16-src"
fi

OUT=$(mktemp -d /tmp/petrel-stream-bench-XXXXXX)
trap 'rm -rf "$OUT"' EXIT

# ---- cgroup-v1 memory cap -----------------------------------------------------
CG_PARENT=""
memcg=$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup 2>/dev/null || true)
if [ -n "$memcg" ] && [ -w "/sys/fs/cgroup/memory$memcg" ]; then
    CG_PARENT=/sys/fs/cgroup/memory${memcg%/}
else
    echo "stream.sh: no writable cgroup-v1 memory controller: runs are NOT capped" >&2
fi

drop_caches() {
    sync
    if ! echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
        echo "stream.sh: cannot drop the page cache (not root?): 'cold' runs are not cold" >&2
    fi
}

# run_capped LIMIT_BYTES LOG CMD...: runs CMD in a fresh child cgroup with
# memory.limit_in_bytes = LIMIT; stdout to LOG.out, stderr to LOG.err;
# prints the OOM-kill count of the cgroup (0 when uncapped).
run_capped() {
    local limit=$1 log=$2
    shift 2
    if [ -z "$CG_PARENT" ]; then
        "$@" >"$log.out" 2>"$log.err" || true
        echo 0
        return
    fi
    local cg=$CG_PARENT/petrel-stream-$$-$RANDOM
    mkdir "$cg"
    echo "$limit" >"$cg/memory.limit_in_bytes"
    (echo "$BASHPID" >"$cg/cgroup.procs" && exec "$@") >"$log.out" 2>"$log.err" || true
    local oom
    oom=$(awk '$1=="oom_kill"{print $2}' "$cg/memory.oom_control" 2>/dev/null || echo 0)
    rmdir "$cg" 2>/dev/null || true
    echo "${oom:-0}"
}

field() { # field NAME LINE
    sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"
}

# ---- fio at the engine's request size and queue depth ---------------------------
probe=$("$BUILD/bench_stream" -m "$MODEL" -n 1 --no-prefetch --usage "$OUT/probe.usage" 2>/dev/null | grep '^STREAM' || true)
slice=$(field slice_bytes "$probe")
[ -n "$slice" ] || { echo "stream.sh: cannot open $MODEL with bench_stream" >&2; exit 1; }
# run_fio: O_DIRECT random-read GB/s at the engine's request size and queue
# depth on the model file (measured around every engine run: the disk of a
# shared machine drifts).
run_fio() {
    if ! command -v fio >/dev/null; then
        echo 0
        return
    fi
    fio --name=petrel-stream --filename="$MODEL" --readonly --direct=1 --rw=randread --bs="$slice" \
        --iodepth="$QD" --ioengine=io_uring --runtime="$FIO_S" --time_based --output-format=json >"$OUT/fio.json" 2>/dev/null ||
        fio --name=petrel-stream --filename="$MODEL" --readonly --direct=1 --rw=randread --bs="$slice" \
            --iodepth="$QD" --ioengine=libaio --runtime="$FIO_S" --time_based --output-format=json >"$OUT/fio.json"
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%.4f" % (j["jobs"][0]["read"]["bw_bytes"]/1e9))' "$OUT/fio.json"
}
command -v fio >/dev/null || echo "stream.sh: fio not installed: fio_gbs=0" >&2

# fio on the rested disk, before anything else reads: the strictest reference
# (strict_limit_ratio below uses the highest fio figure seen up to each run).
fio_best=$(run_fio)
echo "fio: O_DIRECT random read, bs=$slice, iodepth=$QD, rested disk: $fio_best GB/s" >&2

# ---- everything resident (no cap) ------------------------------------------------
resident=0
if [ "${SKIP_RESIDENT:-0}" != 1 ]; then
    line=$("$BUILD/bench_stream" -m "$MODEL" --preload -n "$NGEN" -t "$THREADS" --no-prefetch --no-hot \
        --usage "$OUT/resident.usage" 2>"$OUT/resident.err" | grep '^STREAM' || true)
    resident=$(field tok_s "$line")
    resident=${resident:-0}
    cb=$(field cache_bytes "$line")
    echo "resident: $resident tok/s (expert cache $(awk -v b="${cb:-0}" 'BEGIN{printf "%.2f", b/1e9}') GB)" >&2
fi

# ---- the budgets -------------------------------------------------------------------
for b in $BUDGETS; do
    usage=$OUT/usage-$b
    rm -f "$usage"
    for cache in cold warm; do
        fio_before=$(run_fio)
        [ "$cache" = cold ] && drop_caches
        limit=$(( b * 1024 * 1024 * 1024 + CAP_EXTRA_MIB * 1024 * 1024 ))
        log=$OUT/run-$b-$cache
        oom=$(run_capped "$limit" "$log" "$BUILD/bench_stream" -m "$MODEL" --ram "${b}G" -n "$NGEN" -t "$THREADS" \
            --usage "$usage" --trace "$log.trace")
        fio_after=$(run_fio)
        fio_gbs=$(python3 -c 'import sys; print("%.4f" % max(float(sys.argv[1]), float(sys.argv[2])))' "$fio_before" "$fio_after")
        fio_best=$(python3 -c 'import sys; print("%.4f" % max(map(float, sys.argv[1:])))' "$fio_best" "$fio_gbs")
        echo "fio: O_DIRECT random read, bs=$slice, iodepth=$QD: $fio_before GB/s before, $fio_after GB/s after" >&2
        line=$(grep '^STREAM' "$log.out" || true)
        if [ -z "$line" ]; then
            echo "stream.sh: budget ${b} GiB ($cache) failed (oom_kills=$oom):" >&2
            tail -3 "$log.err" >&2
            echo "RESULT budget_gib=$b cache=$cache failed=1 oom_kills=$oom"
            continue
        fi
        tail -4 "$log.err" >&2
        bel=$("$BUILD/bench_trace" "$log.trace" --bytes "$(field cache_bytes "$line")" --count-from 16 | grep '^RESULT' || true)
        belady=$(field belady "$bel")
        static_oracle=$(field static_oracle "$bel")
        python3 - "$line" "${belady:-0}" "$fio_gbs" "$resident" "$b" "$cache" "$oom" "$fio_before" "$fio_after" "${static_oracle:-0}" "$fio_best" <<'EOF'
import sys
line, belady, fio, resident, b, cache, oom, fb, fa, so, best = sys.argv[1:]
f = dict(kv.split("=", 1) for kv in line.split()[1:])
g = lambda k: float(f[k])
belady, fio, resident = float(belady), float(fio), float(resident)
tok, gbt, rd = g("tok_s"), g("gb_per_token"), g("read_gbs")
limit = min(fio / gbt if gbt > 0 else float("inf"), resident if resident > 0 else float("inf"))
limit = 0.0 if limit == float("inf") else limit
best = float(best)
strict = min(best / gbt if gbt > 0 else float("inf"), resident if resident > 0 else float("inf"))
strict = 0.0 if strict == float("inf") else strict
print("RESULT budget_gib=%s cache=%s tok_s=%.3f hit_rate=%.4f belady_hit_rate=%.4f belady_ratio=%.3f "
      "gb_per_token=%.4f read_gbs=%.3f fio_gbs=%.3f read_ratio=%.3f resident_tok_s=%.3f limit_tok_s=%.3f "
      "limit_ratio=%.3f peak_rss_gib=%.3f budget_ok=%d stall_s=%.2f compute_s=%.2f prefetch_hit=%.4f recall=%.4f "
      "qd=%.1f fio_before=%s fio_after=%s fio_best=%.4f strict_limit_ratio=%.3f static_oracle_hit_rate=%s oom_kills=%s"
      % (b, cache, tok, g("hit_rate"), belady, g("hit_rate") / belady if belady > 0 else 0, gbt, rd, fio,
         rd / fio if fio > 0 else 0, resident, limit, tok / limit if limit > 0 else 0, g("peak_rss_gib"),
         g("peak_rss_gib") <= float(b), g("stall_s"), g("compute_s"), g("hit_prefetch"), g("recall"), g("qd"),
         fb, fa, best, tok / strict if strict > 0 else 0, so, oom))
EOF
    done
done
