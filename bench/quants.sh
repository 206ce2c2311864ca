#!/usr/bin/env bash
# bench/quants.sh — the weight types against memory, disk and llama.cpp
# (issue 11), in one run on the bench16 synthetic model (~12 GB of experts)
# converted three times: Q4_0, Q4_K and Q2_K experts, Q8_0 trunk.
#
#  1. GEMV GB/s of every type the RESULT names (TYPES=all: every type of
#     kernels/qtypes.h) on the routed-expert shapes, each against the read
#     bandwidth of its own buffers measured just before (bench_kernels
#     --types-only).
#  2. Petrel's decode tok/s and GB read per token for each file under a
#     CAP_GIB cgroup-v1 memory cap (--ram CAP_GIB, the cap CAP_EXTRA_MIB
#     above it as in bench/stream.sh), cold (page cache dropped, no usage
#     file) then warm (the cold run's usage file).
#  3. llama.cpp (bench/llamacpp.sh's builds, llama-bench -p 0 -n LLAMA_NGEN
#     -t 2 -r 1, mmap, its other defaults) on the same files under the same
#     cap, cold, with the disk's read_ahead_kb as found ("default") and at
#     128 ("tuned", llama.cpp's best setting here; restored on exit). Both
#     builds run: the default one (CPU repacking on) and build-norepack;
#     a run killed by the cap counts 0 tok/s, one that runs past
#     LLAMA_TIMEOUT counts LLAMA_NGEN / LLAMA_TIMEOUT (an upper bound), one
#     that fails otherwise (a crash) counts nothing: na when every build
#     failed. The llama_* keys take the better build.
#  4. Resident: Petrel with every Q4_K expert in RAM (--preload, no cap) and
#     llama.cpp on the same file with mmap and a warm page cache (both
#     builds, the better counts).
#
# GB per token: Petrel's own count of the decode phase (gb_per_token);
# llama.cpp's: the read_bytes of /proc/PID/io, sampled every 0.2 s, over
# the timed decode (the last avg_ns of the process: llama-bench exits right
# after its test), per token; for both engines also total_gb_read = the
# block-device reads of the whole process (getrusage ru_inblock through
# /usr/bin/time: load, prefill or warm-up and decode).
#
# One line per run ("RUN engine=… type=… …"; Petrel's capped runs also one
# "MEDIAN …" line per file and cache state over the rounds), then exactly one line:
#   RESULT membw_gbs=… q4_0_gemv_ratio=… q8_0_gemv_ratio=… q4_k_gemv_ratio=…
#     q2_k_gemv_ratio=… q6_k_gemv_ratio=… iq4_xs_gemv_ratio=… iq2_xxs_gemv_ratio=…
#     q4_0_capped_tok_s=… q2_k_capped_tok_s=… q2_k_bytes_ratio=…
#     llama_q2_k_capped_tok_s=… llama_tuned_q2_k_capped_tok_s=… speedup_vs_llama=…
#     speedup_vs_llama_tuned=… resident_q4_k_tok_s=… llama_resident_q4_k_tok_s=…
#     q2_k_speed_ratio_paired=… q2_k_goal_frac=… resident_q4_k_ratio_paired=…
# capped = cold, the median of the rounds; q2_k_bytes_ratio = Q4_0 GB/token /
# Q2_K GB/token (Petrel, medians);
# speedup = Petrel's Q2_K capped tok/s / llama.cpp's on the same file ("inf"
# when every llama.cpp build was killed); q2_k_speed_ratio_paired = the
# median over rounds of Q2_K's cold tok/s over the same round's Q4_0, and
# q2_k_goal_frac = that / (0.8 x q2_k_bytes_ratio): the Q2_K goal is met at
# >= 1; the resident figures are medians of RESIDENT_ROUNDS rounds (each:
# Petrel, then llama.cpp's builds, the best of them), and
# resident_q4_k_ratio_paired the median over rounds of Petrel's tok/s over
# the same round's llama.cpp (the goal: >= 1.5). A type that Petrel cannot
# convert or multiply yet is skipped with a message and its keys are "na".
#
# Environment: WORK (/work/bench-models), BUILD (build dir, default
# build-quants), NGEN (32), CAPPED_ROUNDS (3: Petrel's capped runs, every
# file cold then warm per round, files in turn; medians), RESIDENT_ROUNDS (3:
# the resident comparison, Petrel and llama.cpp in turn; medians; Petrel
# decodes one untimed token first, as llama-bench's warm-up run), CAP_GIB (3), CAP_EXTRA_MIB (256), TYPES (the
# GEMV types; "all"), FILES ("q4_0 q4_k q2_k"), LLAMA_NGEN (8),
# LLAMA_TIMEOUT (300 s), LLAMA_BIN / LLAMA_BIN_NOREPACK (bench/llamacpp.sh's
# bin dirs), SKIP_LLAMA=1, SKIP_GEMV=1, SKIP_CAPPED=1, SKIP_RESIDENT=1,
# RESIDENT_TYPE (q4_k; without a q4_k file the q4_0 one, under its own keys
# after the issue's), THREADS (0: all),
# FIO_S (5; 0 skips fio), FIO_CURVE_S (2 s per point of the disk curve; 0
# skips it), PETREL_ARGS (extra bench_stream options for the capped runs,
# e.g. "--prefetch-depth 2" or "--prefetch-top 8", to compare settings in
# one quiet run), BLOCKDEV (the disk under WORK, found with lsblk),
# OMP_WAIT_POLICY (default: unset, the OpenMP runtime's own).
#
# The disk curve: fio O_DIRECT random reads of the q4_0 file at block sizes
# 128 KiB, one Q2_K expert slice and one Q4_0 slice, each at queue depths 1,
# 4, 16, 32 and 64, FIO_CURVE_S seconds a point, two interleaved rounds
# (this VM's disk drifts by 2-5x within minutes: a point measured once
# means little), one "DISK bs=… qd=… gbs=ROUND1,ROUND2 lat_ms=…" line each.
# Petrel's RUN lines add where a step's time went: stall_s (waiting on
# reads), compute_s, io_busy_frac (share of the decode with a read in
# flight: below 1 the disk idled while the CPU worked), qd (requests in
# flight on average while reading), recall and wasted_gb of the prefetch.
# Needs root (cgroups, drop_caches, read_ahead_kb); ~40 GB free under WORK
# the first time (the FP8 source is kept for the three conversions; delete
# $WORK/bench16-src afterwards). Run on an otherwise idle machine.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib/capped.sh
source "$ROOT/bench/lib/capped.sh"
BUILD=${BUILD:-$ROOT/build-quants}
WORK=${WORK:-/work/bench-models}
NGEN=${NGEN:-32}
CAP_GIB=${CAP_GIB:-3}
CAP_EXTRA_MIB=${CAP_EXTRA_MIB:-256}
TYPES=${TYPES:-q4_0,q8_0,q4_k,q2_k,q6_k,iq4_xs,iq2_xxs}
FILES=${FILES:-"q4_0 q4_k q2_k"}
LLAMA_NGEN=${LLAMA_NGEN:-8}
CAPPED_ROUNDS=${CAPPED_ROUNDS:-3}
RESIDENT_ROUNDS=${RESIDENT_ROUNDS:-3}
LLAMA_TIMEOUT=${LLAMA_TIMEOUT:-300}
THREADS=${THREADS:-0}
FIO_S=${FIO_S:-5}
FIO_CURVE_S=${FIO_CURVE_S:-2}
PETREL_ARGS=${PETREL_ARGS:-}
LLAMA_CACHE=${LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/petrel/llamacpp-3.22.1}
LLAMA_BIN=${LLAMA_BIN:-$LLAMA_CACHE/build/bin}
LLAMA_BIN_NOREPACK=${LLAMA_BIN_NOREPACK:-$LLAMA_CACHE/build-norepack/bin}
# The OpenMP runtime's own wait policy (spin briefly, then sleep), what a
# user of either engine gets, unless OMP_WAIT_POLICY is set (passive: kinder
# to a shared machine). Under passive every GEMV call wakes the other thread:
# on a quiet 2-vCPU Intel Xeon (2026-12-07) the 2-thread GEMV ratios were
# ~10 % lower (Q4_K 0.64 vs 0.71-0.75) than with the runtime's policy.
WAIT_POLICY=${OMP_WAIT_POLICY:-runtime-default}
cap_init quants.sh
LIMIT=$(( CAP_GIB * 1024 * 1024 * 1024 + CAP_EXTRA_MIB * 1024 * 1024 ))
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "quants.sh: needs GNU time (/usr/bin/time) for the read counts" >&2; exit 1; }

echo "quants.sh: $(date -u +%FT%TZ), cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cpus, load $(cut -d' ' -f1 /proc/loadavg), OMP_WAIT_POLICY $WAIT_POLICY"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target petrel bench_stream bench_kernels -j2 >/dev/null
PETREL=$BUILD/petrel

OUT=$(mktemp -d /tmp/petrel-quants-XXXXXX)
RA_DEV="" RA_ORIG=""
cleanup() {
    if [ -n "$RA_DEV" ] && [ -n "$RA_ORIG" ]; then
        echo "$RA_ORIG" >"/sys/block/$RA_DEV/queue/read_ahead_kb" 2>/dev/null || true
    fi
    rm -rf "$OUT"
}
trap cleanup EXIT

declare -A R # RESULT values, "na" until measured
for k in membw_gbs q4_0_gemv_ratio q8_0_gemv_ratio q4_k_gemv_ratio q2_k_gemv_ratio q6_k_gemv_ratio \
         iq4_xs_gemv_ratio iq2_xxs_gemv_ratio q4_0_capped_tok_s q2_k_capped_tok_s q2_k_bytes_ratio \
         llama_q2_k_capped_tok_s llama_tuned_q2_k_capped_tok_s speedup_vs_llama speedup_vs_llama_tuned \
         resident_q4_k_tok_s llama_resident_q4_k_tok_s; do
    R[$k]=na
done
declare -A MODEL PT_TOK PT_GBT

# ---- the models (converted once, reused) -----------------------------------
for t in $FILES; do
    rc=0
    f=$(bench16_model "$PETREL" "$WORK" "$t") || rc=$?
    if [ $rc = 0 ]; then
        MODEL[$t]=$f
        echo "model $t: $f ($(awk -v b="$(stat -c %s "$f")" 'BEGIN{printf "%.2f", b/1e9}') GB)"
    else
        echo "quants.sh: no $t model: its runs are skipped"
    fi
done

# ---- 1. GEMV per type against the read bandwidth ----------------------------
if [ "${SKIP_GEMV:-0}" != 1 ]; then
    echo
    "$BUILD/bench_kernels" --types-only --types "$TYPES" | tee "$OUT/gemv.txt"
    line=$(grep '^RESULT' "$OUT/gemv.txt" | tail -1)
    R[membw_gbs]=$(field membw_gbs "$line")
    for t in q4_0 q8_0 q4_k q2_k q6_k iq4_xs iq2_xxs; do
        v=$(field "${t}_gemv_ratio" "$line")
        R[${t}_gemv_ratio]=${v:-na}
    done
fi

# ---- the disk, for context: fio at Petrel's request size --------------------
if [ "$FIO_S" != 0 ] && command -v fio >/dev/null && [ -n "${MODEL[q4_0]:-}" ]; then
    probe=$("$BUILD/bench_stream" -m "${MODEL[q4_0]}" --ram "${CAP_GIB}G" -n 1 --no-prefetch --usage "$OUT/probe.usage" 2>/dev/null | grep '^STREAM' || true)
    slice=$(field slice_bytes "$probe")
    if [ -n "$slice" ]; then
        fio --name=petrel-quants --filename="${MODEL[q4_0]}" --readonly --direct=1 --rw=randread --bs="$slice" \
            --iodepth=32 --ioengine=io_uring --runtime="$FIO_S" --time_based --output-format=json >"$OUT/fio.json" 2>/dev/null &&
            echo "fio: O_DIRECT random read, bs=$slice, iodepth=32: $(python3 -c 'import json,sys; print("%.3f" % (json.load(open(sys.argv[1]))["jobs"][0]["read"]["bw_bytes"]/1e9))' "$OUT/fio.json") GB/s"
    fi
    # the curve: GB/s against block size and queue depth (see the header)
    if [ -n "$slice" ] && [ "$FIO_CURVE_S" != 0 ]; then
        q2slice=$(( (slice * 21 / 36 + 4095) / 4096 * 4096 )) # Q2_K (2.625 bpw) vs Q4_0 (4.5 bpw), 4 KiB-aligned
        declare -A DISK_BW DISK_LAT
        for _ in 1 2; do
            for bs in 131072 "$q2slice" "$slice"; do
                for qd in 1 4 16 32 64; do
                    fio --name=petrel-curve --filename="${MODEL[q4_0]}" --readonly --direct=1 --rw=randread --bs="$bs" \
                        --iodepth="$qd" --ioengine=io_uring --runtime="$FIO_CURVE_S" --time_based --output-format=json \
                        >"$OUT/fio-curve.json" 2>/dev/null || continue
                    read -r bw lat < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["jobs"][0]["read"]; print("%.3f %.2f" % (r["bw_bytes"]/1e9, r["clat_ns"]["mean"]/1e6))' "$OUT/fio-curve.json")
                    DISK_BW[$bs,$qd]="${DISK_BW[$bs,$qd]:+${DISK_BW[$bs,$qd]},}$bw"
                    DISK_LAT[$bs,$qd]="${DISK_LAT[$bs,$qd]:+${DISK_LAT[$bs,$qd]},}$lat"
                done
            done
        done
        for bs in 131072 "$q2slice" "$slice"; do
            for qd in 1 4 16 32 64; do
                [ -n "${DISK_BW[$bs,$qd]:-}" ] && echo "DISK bs=$bs qd=$qd gbs=${DISK_BW[$bs,$qd]} lat_ms=${DISK_LAT[$bs,$qd]}"
            done
        done
    fi
fi

# gb LOG: total GB the process read from the block device (GNU time's %I,
# 512-byte units), from the TIME line of LOG.err.
gb_read() {
    local l
    l=$(grep '^TIME ' "$1.err" | tail -1 || true)
    awk -v b="$(field inblock "$l")" 'BEGIN{printf "%.3f", (b == "" ? 0 : b) * 512 / 1e9}'
}
elapsed() {
    local l
    l=$(grep '^TIME ' "$1.err" | tail -1 || true)
    echo "$(field elapsed "$l")"
}
TFMT="TIME inblock=%I elapsed=%e maxrss_kb=%M"

# ---- 2. Petrel under the cap, cold then warm ----------------------------------
# CAPPED_ROUNDS rounds, each running every file cold then warm, the files in
# turn: the disk drifts by up to 2x within minutes (the run of 2026-12-07
# 11:14 read Q4_0 at 2.40 GB/s and, two minutes later, Q2_K at 1.51), and
# the Q2_K goal compares two files' speeds, so each figure is the median of
# its rounds, taken in the same minutes as the other file's.
echo
echo "Petrel, --ram ${CAP_GIB}G under a $(( LIMIT >> 20 )) MiB cgroup cap, $NGEN tokens, $CAPPED_ROUNDS round(s)${PETREL_ARGS:+, $PETREL_ARGS}"
declare -A PT_TOKS PT_GBTS # "cold"/"warm" per type: the rounds' values, space-separated
declare -A PT_ROUND        # (type, round): that round's cold tok/s
for round in $(seq 1 "$CAPPED_ROUNDS"); do
    for t in $FILES; do
        [ -n "${MODEL[$t]:-}" ] && [ "${SKIP_CAPPED:-0}" != 1 ] || continue
        usage=$OUT/usage-$t
        rm -f "$usage"
        for cache in cold warm; do
            [ "$cache" = cold ] && drop_caches
            log=$OUT/petrel-$t-$cache-$round
            oom=$(run_capped "$LIMIT" "$log" "$TIME" -f "$TFMT" "$BUILD/bench_stream" -m "${MODEL[$t]}" \
                --ram "${CAP_GIB}G" -n "$NGEN" -t "$THREADS" --usage "$usage" $PETREL_ARGS)
            line=$(grep '^STREAM' "$log.out" || true)
            if [ -z "$line" ]; then
                echo "RUN engine=petrel type=$t cache=$cache round=$round status=failed oom_kills=$oom"
                tail -3 "$log.err" >&2
                continue
            fi
            tok=$(field tok_s "$line")
            gbt=$(field gb_per_token "$line")
            echo "RUN engine=petrel type=$t cache=$cache round=$round tok_s=$tok gb_per_token=$gbt total_gb_read=$(gb_read "$log")" \
                 "elapsed_s=$(elapsed "$log") hit_rate=$(field hit_rate "$line") read_gbs=$(field read_gbs "$line")" \
                 "peak_rss_gib=$(field peak_rss_gib "$line") stall_s=$(field stall_s "$line") compute_s=$(field compute_s "$line")" \
                 "io_busy_frac=$(field io_busy_frac "$line") qd=$(field qd "$line") recall=$(field recall "$line")" \
                 "wasted_gb=$(field wasted_gb "$line") oom_kills=$oom"
            PT_TOKS[$t,$cache]="${PT_TOKS[$t,$cache]:-} $tok"
            PT_GBTS[$t,$cache]="${PT_GBTS[$t,$cache]:-} $gbt"
            [ "$cache" = cold ] && PT_ROUND[$t,$round]=$tok
        done
    done
done
for t in $FILES; do
    for cache in cold warm; do
        [ -n "${PT_TOKS[$t,$cache]:-}" ] || continue
        m=$(median "${PT_TOKS[$t,$cache]}")
        g=$(median "${PT_GBTS[$t,$cache]}")
        echo "MEDIAN engine=petrel type=$t cache=$cache tok_s=$m gb_per_token=$g rounds=$(wc -w <<<"${PT_TOKS[$t,$cache]}") all_tok_s=$(tr -s ' ' ',' <<<"${PT_TOKS[$t,$cache]# }")"
        if [ "$cache" = cold ]; then
            PT_TOK[$t]=$m
            PT_GBT[$t]=$g
        fi
    done
done
R[q4_0_capped_tok_s]=${PT_TOK[q4_0]:-na}
R[q2_k_capped_tok_s]=${PT_TOK[q2_k]:-na}
if [ -n "${PT_GBT[q4_0]:-}" ] && [ -n "${PT_GBT[q2_k]:-}" ]; then
    R[q2_k_bytes_ratio]=$(awk -v a="${PT_GBT[q4_0]}" -v b="${PT_GBT[q2_k]}" 'BEGIN{printf "%.3f", (b > 0 ? a / b : 0)}')
    # Q2_K's goal as the rounds measure it pair by pair (each round's Q2_K
    # tok/s over the same round's Q4_0, so that a disk that drifted between
    # the two files' medians does not decide it): the median pair ratio,
    # and that over 0.8 x the bytes ratio (>= 1: the goal is met)
    pairs=""
    for round in $(seq 1 "$CAPPED_ROUNDS"); do
        a=${PT_ROUND[q4_0,$round]:-} b=${PT_ROUND[q2_k,$round]:-}
        [ -n "$a" ] && [ -n "$b" ] && pairs="$pairs $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.4f", (a > 0 ? b / a : 0)}')"
    done
    if [ -n "$pairs" ]; then
        R[q2_k_speed_ratio_paired]=$(median "$pairs")
        R[q2_k_goal_frac]=$(awk -v s="${R[q2_k_speed_ratio_paired]}" -v b="${R[q2_k_bytes_ratio]}" 'BEGIN{printf "%.3f", (b > 0 ? s / (0.8 * b) : 0)}')
        echo "PAIRED Q2_K / Q4_0 cold tok/s per round:$pairs; median ${R[q2_k_speed_ratio_paired]}; goal 0.8 x bytes ratio ${R[q2_k_bytes_ratio]} -> goal_frac ${R[q2_k_goal_frac]}"
    fi
fi

# ---- 3. llama.cpp under the same cap ---------------------------------------------
# llama_run LOG BIN MODEL NGEN LIMIT: one llama-bench decode run; prints
# "STATUS TOK_S GB_PER_TOKEN" (STATUS ok | oom | timeout | failed;
# GB_PER_TOKEN: the block reads of the timed decode, "na" if unknown).
llama_run() {
    local log=$1 bin=$2 model=$3 n=$4 limit=$5 oom rc tok gbt
    oom=$(CAP_SAMPLE_IO=1 run_capped "$limit" "$log" "$TIME" -f "$TFMT" timeout "$LLAMA_TIMEOUT" \
        "$bin/llama-bench" -m "$model" -p 0 -n "$n" -t 2 -r 1 -o json)
    rc=$(cat "$log.rc")
    read -r tok gbt < <(python3 - "$log.out" "$log.io" "$n" <<'EOF'
import json, sys
out, io, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    j = json.load(open(out))[0]
except Exception:
    print("x na"); sys.exit()
gbt = "na"
try:
    # the timed decode is the last avg_ns before the process exits: the
    # reads of the busiest process (llama-bench) over that window
    by = {}
    for line in open(io):
        t, pid, b = line.split()
        by.setdefault(pid, []).append((float(t), int(b)))
    s = by[max(by, key=lambda p: by[p][-1][1])]
    t0 = s[-1][0] - j["avg_ns"] / 1e9
    b0 = s[0][1]
    for (ta, ba), (tb, bb) in zip(s, s[1:]):
        if ta <= t0 <= tb:
            b0 = ba + (bb - ba) * (t0 - ta) / (tb - ta) if tb > ta else ba
            break
    gbt = "%.4f" % ((s[-1][1] - b0) / 1e9 / n)
except Exception:
    pass
print("%.4f %s" % (j["avg_ts"], gbt))
EOF
)
    if [ "$tok" != x ]; then echo "ok $tok $gbt"
    elif [ "$oom" != 0 ] || grep -q 'signal 9\|status 137\|Killed' "$log.err"; then echo "oom 0 na"
    elif grep -q 'status 124' "$log.err" || [ "$rc" = 124 ]; then
        awk -v n="$n" -v t="$LLAMA_TIMEOUT" 'BEGIN{printf "timeout %.4f na\n", n / t}'
    else echo "failed 0 na"
    fi
}

declare -A LL # LL[setting,type] = best tok/s of the builds
BUILDS=""
[ -x "$LLAMA_BIN/llama-bench" ] && BUILDS="default"
[ -x "$LLAMA_BIN_NOREPACK/llama-bench" ] && BUILDS="$BUILDS norepack"
if [ "${SKIP_LLAMA:-0}" != 1 ] && [ "${SKIP_CAPPED:-0}" != 1 ] && [ -z "$BUILDS" ]; then
    echo "quants.sh: llama.cpp is not built (bench/llamacpp.sh): its runs are skipped"
elif [ "${SKIP_LLAMA:-0}" != 1 ] && [ "${SKIP_CAPPED:-0}" != 1 ]; then
    RA_DEV=${BLOCKDEV:-$(disk_of "$WORK")}
    if [ -w "/sys/block/$RA_DEV/queue/read_ahead_kb" ]; then
        RA_ORIG=$(cat "/sys/block/$RA_DEV/queue/read_ahead_kb")
    else
        echo "quants.sh: cannot set /sys/block/$RA_DEV/queue/read_ahead_kb: the tuned runs are skipped"
        RA_DEV=""
    fi
    settings="default"
    [ -n "$RA_DEV" ] && settings="default tuned"
    echo
    echo "llama.cpp ($(git -C "$LLAMA_CACHE/src" rev-parse --short HEAD 2>/dev/null || echo '?')), llama-bench -p 0 -n $LLAMA_NGEN" \
         "-t 2 -r 1, mmap, under the same cap, cold; read_ahead_kb of $RA_DEV: ${RA_ORIG:-?} (default), 128 (tuned)"
    declare -A KILLED # a build the cap kills on a file (repacked copies) is not run again there
    for setting in $settings; do
        if [ -n "$RA_DEV" ]; then
            if [ "$setting" = tuned ]; then ra=128; else ra=$RA_ORIG; fi
            echo "$ra" >"/sys/block/$RA_DEV/queue/read_ahead_kb"
        fi
        for t in $FILES; do
            [ -n "${MODEL[$t]:-}" ] || continue
            best=""
            for b in $BUILDS; do
                if [ -n "${KILLED[$b,$t]:-}" ]; then
                    echo "RUN engine=llama build=$b setting=$setting type=$t status=oom tok_s=0 (killed by the cap at the default setting too)"
                    best=${best:-0}
                    continue
                fi
                if [ "$b" = default ]; then bin=$LLAMA_BIN; else bin=$LLAMA_BIN_NOREPACK; fi
                drop_caches
                log=$OUT/llama-$b-$setting-$t
                read -r st tok gbt < <(llama_run "$log" "$bin" "${MODEL[$t]}" "$LLAMA_NGEN" "$LIMIT")
                [ "$st" = oom ] && KILLED[$b,$t]=1
                echo "RUN engine=llama build=$b setting=$setting read_ahead_kb=${ra:-?} type=$t status=$st tok_s=$tok" \
                     "gb_per_token=$gbt total_gb_read=$(gb_read "$log") elapsed_s=$(elapsed "$log")"
                # a crash is not the cap's doing: it counts nothing (na
                # when every build failed), where a kill by the cap counts 0
                if [ "$st" = failed ]; then tail -3 "$log.err" >&2; continue; fi
                best=$(awk -v a="${best:-0}" -v b="$tok" 'BEGIN{print (b > a ? b : a)}')
            done
            LL[$setting,$t]=${best:-na}
        done
    done
    if [ -n "$RA_DEV" ]; then echo "$RA_ORIG" >"/sys/block/$RA_DEV/queue/read_ahead_kb"; fi
    R[llama_q2_k_capped_tok_s]=${LL[default,q2_k]:-na}
    R[llama_tuned_q2_k_capped_tok_s]=${LL[tuned,q2_k]:-na}
fi

# speedup P L: P / L, "inf" when L is 0, "na" when either is missing
speedup() {
    case "$1$2" in *na*) echo na; return ;; esac
    awk -v p="$1" -v l="$2" 'BEGIN{ if (l > 0) printf "%.2f", p / l; else print "inf" }'
}
R[speedup_vs_llama]=$(speedup "${R[q2_k_capped_tok_s]}" "${R[llama_q2_k_capped_tok_s]}")
R[speedup_vs_llama_tuned]=$(speedup "${R[q2_k_capped_tok_s]}" "${R[llama_tuned_q2_k_capped_tok_s]}")

# ---- 4. resident: every Q4_K expert in RAM ---------------------------------------
RT=${RESIDENT_TYPE:-q4_k}
if [ -z "${MODEL[$RT]:-}" ] && [ -n "${MODEL[q4_0]:-}" ] && [ "${SKIP_RESIDENT:-0}" != 1 ]; then
    echo "quants.sh: no $RT model: the resident comparison runs on the q4_0 file (keys resident_q4_0_*)"
    RT=q4_0
fi
if [ "${SKIP_RESIDENT:-0}" != 1 ] && [ -n "${MODEL[$RT]:-}" ]; then
    f=${MODEL[$RT]}
    ram=$(( $(stat -c %s "$f") / 1073741824 + 2 ))
    echo
    echo "resident, $f (no cap), $RESIDENT_ROUNDS round(s): Petrel --preload --ram ${ram}G --warmup 1;" \
         "llama.cpp with mmap and a warm page cache (llama-bench: one warm-up token); medians"
    PT_RES="" LL_RES="" PAIRS_RES=""
    for round in $(seq 1 "$RESIDENT_ROUNDS"); do
        log=$OUT/petrel-resident-$round
        "$TIME" -f "$TFMT" "$BUILD/bench_stream" -m "$f" --preload --ram "${ram}G" -n "$NGEN" -t "$THREADS" \
            --no-prefetch --no-hot --warmup 1 >"$log.out" 2>"$log.err" || true
        line=$(grep '^STREAM' "$log.out" || true)
        pt=$(field tok_s "$line")
        echo "RUN engine=petrel type=$RT cache=resident round=$round tok_s=${pt:-na} elapsed_s=$(elapsed "$log")" \
             "peak_rss_gib=$(field peak_rss_gib "$line")"
        [ -n "$pt" ] && PT_RES+="$pt"$'\n'
        if [ "${SKIP_LLAMA:-0}" != 1 ] && [ -n "$BUILDS" ]; then
            best=""
            for b in $BUILDS; do
                if [ "$b" = default ]; then bin=$LLAMA_BIN; else bin=$LLAMA_BIN_NOREPACK; fi
                cat "$f" >/dev/null # warm page cache
                log=$OUT/llama-$b-resident-$round
                read -r st tok _ < <(llama_run "$log" "$bin" "$f" "$NGEN" 0)
                echo "RUN engine=llama build=$b type=$RT cache=resident round=$round status=$st tok_s=$tok" \
                     "elapsed_s=$(elapsed "$log")"
                if [ "$st" = failed ]; then tail -3 "$log.err" >&2; continue; fi
                best=$(awk -v a="${best:-0}" -v b="$tok" 'BEGIN{print (b > a ? b : a)}')
            done
            if [ -n "$best" ]; then
                LL_RES+="$best"$'\n'
                [ -n "$pt" ] && PAIRS_RES+="$(awk -v a="$pt" -v b="$best" 'BEGIN{ if (b > 0) printf "%.4f", a / b }')"$'\n'
            fi
        fi
    done
    m=$(median "$PT_RES"); R[resident_${RT}_tok_s]=${m:-na}
    if [ -n "$LL_RES" ]; then m=$(median "$LL_RES"); R[llama_resident_${RT}_tok_s]=${m:-na}; fi
    if [ -n "$PAIRS_RES" ]; then
        m=$(median "$PAIRS_RES"); R[resident_${RT}_ratio_paired]=${m:-na}
        echo "PAIRED resident Petrel / llama.cpp (best build) per round: $(printf '%s' "$PAIRS_RES" | tr '\n' ' ')median ${m:-na}"
    fi
fi

echo
printf 'RESULT'
for k in membw_gbs q4_0_gemv_ratio q8_0_gemv_ratio q4_k_gemv_ratio q2_k_gemv_ratio q6_k_gemv_ratio \
         iq4_xs_gemv_ratio iq2_xxs_gemv_ratio q4_0_capped_tok_s q2_k_capped_tok_s q2_k_bytes_ratio \
         llama_q2_k_capped_tok_s llama_tuned_q2_k_capped_tok_s speedup_vs_llama speedup_vs_llama_tuned \
         resident_q4_k_tok_s llama_resident_q4_k_tok_s; do
    printf ' %s=%s' "$k" "${R[$k]:-na}"
done
# the resident comparison on another file (RESIDENT_TYPE, or the q4_0
# fallback) comes after the issue's keys
[ "$RT" = q4_k ] || printf ' resident_%s_tok_s=%s llama_resident_%s_tok_s=%s' "$RT" "${R[resident_${RT}_tok_s]:-na}" \
    "$RT" "${R[llama_resident_${RT}_tok_s]:-na}"
# and the Q2_K goal measured round by round (section 2)
printf ' q2_k_speed_ratio_paired=%s q2_k_goal_frac=%s' "${R[q2_k_speed_ratio_paired]:-na}" "${R[q2_k_goal_frac]:-na}"
# and the resident comparison round by round (section 4)
printf ' resident_%s_ratio_paired=%s' "$RT" "${R[resident_${RT}_ratio_paired]:-na}"
printf '\n'
