#!/usr/bin/env bash
# bench/throughput.sh — issue 14: everything with more than one token in
# flight, on bench16 (q4_0 experts, q8_0 trunk), side by side with llama.cpp
# (llama-bench from bench/llamacpp.sh's default build, same file, same thread
# count, same cap), in one run:
#   1. prefill of a PP-token prompt, every expert resident (Petrel --preload;
#      llama.cpp with mmap and a warm page cache): pp_resident_tok_s,
#      llama_pp_resident_tok_s, pp_resident_ratio
#   2. the same prefill cold (page cache dropped) under a CAP_GIB cgroup cap
#      (Petrel --ram CAP_GIB, its chunk size chosen from that budget):
#      pp_capped_tok_s, llama_pp_capped_tok_s (llama-bench --no-warmup: one
#      cold prefill, as Petrel's; when the cap kills the default build, whose
#      repacked weights are anonymous memory, the build without repacking
#      runs instead), pp_capped_ratio and llama_pp_capped_status: ok; killed
#      (every build killed by the cap: 0 tok/s, ratio "inf"); timeout (past
#      LLAMA_TIMEOUT: PP over the time from the start of its timed prompt run
#      to the timeout, an upper bound of its speed, so the ratio is a lower
#      bound)
#   3. aggregate decode of 1, 4 and 8 concurrent conversations (GEN tokens
#      each, one petrel_decode_multi step for all of them per token: what
#      `petrel serve` runs for concurrent requests), resident and capped,
#      with the expert bytes read and the distinct experts fetched per step:
#      agg4_over_1_*, agg8_over_1_capped; and how close 4 streams come to what
#      their bytes allow, 4 x tok_s(1) x bytes_per_token(1) / bytes_per_step(4)
#      (agg4_bytes_frac_capped, printed above the RESULT line; goal >= 0.8)
#   4. one conversation decoding GEN6 tokens with a 6 GiB budget (its second
#      run over the same tokens, the prompt's KV kept: cache and predictor
#      warm) against the resident speed on the same GEN6 tokens (also their
#      second run): stream6_over_resident; and the same ratio in CPU time
#      per token (every thread, user + system), which the machine's load
#      disturbs less than the wall clock (still +-10% at load 15 on 2
#      cores: shared caches, the team's spinning): stream6_cpu_over_resident
#      (resident CPU s/token over the 6 GiB run's; with every expert a hit
#      it measures the streaming loop's compute overhead alone, where
#      stream6_over_resident adds the I/O waits); then AB6 interleaved pairs
#      of passes with the prefetch on and off in the same 6 GiB process
#      (every expert cached: off is resident decode's code path, nothing
#      read), whose median ratio is stream6_ab_ratio: the same comparison
#      under the same load, where the two processes above run minutes apart
# The streams are driven through the C API (bench/bench_throughput.c) rather
# than HTTP clients, so the figures are the engine's alone.
#
# Last line:
#   RESULT pp_resident_tok_s=… llama_pp_resident_tok_s=… pp_resident_ratio=…
#     pp_capped_tok_s=… llama_pp_capped_tok_s=… pp_capped_ratio=… llama_pp_capped_status=…
#     agg4_over_1_capped=… agg8_over_1_capped=… agg4_over_1_resident=…
#     stream6_over_resident=…
#     stream6_hit_rate=… stream6_cpu_over_resident=… stream6_ab_ratio=…
#     stream6_bytes_per_token=… stream6_prefetch_reads=… (the second pass's reads: with
#     every use a hit, the prefetch cut's cold check leaves ~7 in its first token, was 138)
# Goals: pp_resident_ratio >= 1.2, pp_capped_ratio >= 3,
# stream6_over_resident >= 0.9, agg4_bytes_frac_capped >= 0.8.
#
# Knobs (environment): MODEL (default $WORK/bench16.gguf), WORK, BUILD, PP (512),
# GEN (64; resident decode), GEN_CAPPED (4: every capped step reads most of a
# step's union from disk), GEN6 (8: the 6 GiB decode, twice; the issue asks for the loop's speed "when
# the predictor has loaded everything in time", and bench16 routes uniformly: 32 tokens touch ~111 of
# 128 experts a layer, ~10.5 GB, so a 32-token second pass measures the disk; 8 tokens, ~4.9 GB, fit;
# the second pass's hit rate is printed as stream6_hit_rate; the 16-token prompt is prefilled once, as
# re-prefilling it between the passes read its ~2,200 experts into the cache and the second pass
# missed 13%), STREAMS ("1,4,8"), CAP_GIB (3), CAP_EXTRA_MIB (256),
# AB6 (3), THREADS (2), LLAMA_TIMEOUT (300), SKIP_LLAMA=1, SKIP_CAPPED=1, SKIP_RESIDENT=1,
# OMP_WAIT_POLICY (default: unset, the OpenMP runtime's own), LLAMA_BIN, LLAMA_BIN_NOREPACK.
# Needs root for drop_caches and cgroups (without, it says so and runs uncapped).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib/capped.sh
source "$ROOT/bench/lib/capped.sh"
BUILD=${BUILD:-$ROOT/build-throughput}
WORK=${WORK:-/work/bench-models}
MODEL=${MODEL:-$WORK/bench16.gguf}
PP=${PP:-512}
GEN=${GEN:-64}
GEN_CAPPED=${GEN_CAPPED:-4}
GEN6=${GEN6:-8}
AB6=${AB6:-3}
STREAMS=${STREAMS:-1,4,8}
CAP_GIB=${CAP_GIB:-3}
CAP_EXTRA_MIB=${CAP_EXTRA_MIB:-256}
THREADS=${THREADS:-2}
LLAMA_TIMEOUT=${LLAMA_TIMEOUT:-300}
LLAMA_CACHE=${LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/petrel/llamacpp-3.22.1}
LLAMA_BIN=${LLAMA_BIN:-$LLAMA_CACHE/build/bin}
# the default build repacks weights into anonymous memory, which a cap kills
# (OOM); the build without repacking runs on the mmapped file
LLAMA_BIN_NOREPACK=${LLAMA_BIN_NOREPACK:-$LLAMA_CACHE/build-norepack/bin}
# Both engines run with the OpenMP runtime's own wait policy (what a user
# gets: libgomp spins briefly at a barrier, then sleeps) unless
# OMP_WAIT_POLICY is set (passive: threads sleep at once, kinder to a shared
# machine). The streaming loop's lookahead adds short serial stretches per
# layer; under passive each costs the other thread a sleep and a wake-up:
# the 6 GiB all-hit pass measured 0.821 of prefetch-off in wall time with
# the same CPU (0.988), 0.96-0.98 under the runtime default (2026-12-02).
WAIT_POLICY=${OMP_WAIT_POLICY:-runtime-default}
cap_init throughput.sh
LIMIT=$((CAP_GIB * 1024 * 1024 * 1024 + CAP_EXTRA_MIB * 1024 * 1024))
OUT=$(mktemp -d /tmp/throughput.XXXXXX)

echo "throughput.sh: $(date -u +%FT%TZ), $(nproc) cpus, load $(cut -d' ' -f1 /proc/loadavg), model $MODEL," \
     "threads $THREADS, cap ${CAP_GIB} GiB (+${CAP_EXTRA_MIB} MiB), OMP_WAIT_POLICY $WAIT_POLICY, logs in $OUT"
[ -f "$MODEL" ] || MODEL=$(bench16_model "$ROOT/build/petrel" "$WORK" q4_0)
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target bench_throughput >"$OUT/build.log" 2>&1 ||
    { cat "$OUT/build.log"; exit 1; }
BT=$BUILD/bench_throughput

# first LINE-KIND line of a log, "" if none
line() { grep -m1 "^$2" "$1" 2>/dev/null | sed "s/^$2 //" || true; }
line_where() { grep "^$2 " "$1" 2>/dev/null | grep -m1 " $3" | sed "s/^$2 //" || true; }
ratio() { awk -v a="${1:-na}" -v b="${2:-na}" 'BEGIN{ if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.3f", a / b; else print "na" }'; }
# pp_ratio A B: ratio, "inf" when B is 0 (llama.cpp killed) and A a speed
pp_ratio() { awk -v a="${1:-na}" -v b="${2:-na}" 'BEGIN{ if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/) { if (b + 0 > 0) printf "%.3f", a / b; else print "inf" } else print "na" }'; }

# llama_pp LOG LIMIT [BIN] [EXTRA...]: llama-bench prefill of PP tokens; prints
# "STATUS TOK_S": ok and its tok/s; killed 0 (the cap killed it: it cannot
# prefill under the cap at all); timeout and an upper bound of its tok/s,
# PP over the time from the start of its timed prompt run (the --progress
# line, timestamped) to the timeout (PP / LLAMA_TIMEOUT when it never got
# there), so that a ratio against it is a lower bound; failed na otherwise.
llama_pp() {
    local log=$1 limit=$2 bin=${3:-$LLAMA_BIN} rc t0 tp
    shift 3 || shift $#
    t0=$(date +%s.%N)
    # (stderr lines timestamped: when the timed prompt run started)
    run_capped "$limit" "$log" timeout "$LLAMA_TIMEOUT" bash -c \
        'exec "$@" 2> >(while IFS= read -r l; do printf "%s %s\n" "$(date +%s.%N)" "$l"; done >&2)' _ \
        "$bin/llama-bench" -m "$MODEL" -p "$PP" -n 0 -t "$THREADS" -r 1 --progress -o json "$@" >/dev/null
    rc=$(cat "$log.rc")
    if [ "$rc" = 137 ] || grep -q 'Killed\|signal 9\|status 137' "$log.err" 2>/dev/null; then
        echo "killed 0"
        return
    fi
    if [ "$rc" = 124 ]; then
        tp=$(grep -m1 'prompt run' "$log.err" 2>/dev/null | grep -v warmup | cut -d' ' -f1 || true)
        awk -v n="$PP" -v t="$LLAMA_TIMEOUT" -v t0="$t0" -v tp="${tp:-}" 'BEGIN{
            d = (tp != "" && t0 + t - tp > 0) ? t0 + t - tp : t; printf "timeout %.4f\n", n / d }'
        return
    fi
    python3 -c 'import json,sys; print("ok %.4f" % json.load(open(sys.argv[1]))[0]["avg_ts"])' "$log.out" 2>/dev/null ||
        echo "failed na"
}

pp_res=na llama_res=na llama_res_st=na agg_res="" dec_res=na dec6=na cpu_res=na cpu6=na ab6=na bpt6=na pfr6=na
if [ -z "${SKIP_RESIDENT:-}" ]; then
    echo "-- resident: Petrel --preload (pp $PP, streams $STREAMS x $GEN tokens, decode $GEN6 twice after one prompt)"
    "$BT" -m "$MODEL" -t "$THREADS" --preload --pp "$PP" --agg "$STREAMS" --gen "$GEN" --decode "$GEN6" --warm 1 \
        >"$OUT/resident.out" 2>"$OUT/resident.err" || { tail -5 "$OUT/resident.err"; }
    cat "$OUT/resident.out"
    pp_res=$(field tok_s "$(line "$OUT/resident.out" PP)")
    dec_res=$(field tok_s "$(line_where "$OUT/resident.out" DECODE run=1)")
    cpu_res=$(field cpu_s_per_token "$(line_where "$OUT/resident.out" DECODE run=1)")
    echo "-- 6 GiB budget: Petrel --ram 6G, decode $GEN6 twice on the same tokens after one prompt (the second counts)"
    "$BT" -m "$MODEL" -t "$THREADS" --ram 6G --decode "$GEN6" --warm 1 --ab "$AB6" >"$OUT/stream6.out" 2>"$OUT/stream6.err" ||
        tail -5 "$OUT/stream6.err"
    cat "$OUT/stream6.out"
    dec6=$(field tok_s "$(line_where "$OUT/stream6.out" DECODE run=1)")
    hit6=$(field hit_rate "$(line_where "$OUT/stream6.out" DECODE run=1)")
    cpu6=$(field cpu_s_per_token "$(line_where "$OUT/stream6.out" DECODE run=1)")
    bpt6=$(field bytes_per_token "$(line_where "$OUT/stream6.out" DECODE run=1)")
    pfr6=$(field prefetch_reads "$(line_where "$OUT/stream6.out" DECODE run=1)")
    ab6=$(field tok_s_ratio "$(line "$OUT/stream6.out" DECODE_AB)")
    if [ -z "${SKIP_LLAMA:-}" ] && [ -x "$LLAMA_BIN/llama-bench" ]; then
        echo "-- resident: llama-bench -p $PP -n 0 -t $THREADS (mmap, page cache warmed first)"
        cat "$MODEL" >/dev/null
        read -r llama_res_st llama_res <<<"$(llama_pp "$OUT/llama-res" 0)"
        echo "llama.cpp pp$PP resident: $llama_res tok/s ($llama_res_st)"
    fi
fi

pp_cap=na llama_cap=na llama_cap_st=na
if [ -z "${SKIP_CAPPED:-}" ]; then
    echo "-- capped ${CAP_GIB} GiB, cold: Petrel --ram ${CAP_GIB}G prefill $PP"
    drop_caches
    oom=$(run_capped "$LIMIT" "$OUT/capped-pp" "$BT" -m "$MODEL" -t "$THREADS" --ram "${CAP_GIB}G" --pp "$PP")
    cat "$OUT/capped-pp.out"
    [ "$oom" = 0 ] || echo "capped prefill: $oom OOM kills"
    pp_cap=$(field tok_s "$(line "$OUT/capped-pp.out" PP)")
    echo "-- capped ${CAP_GIB} GiB: Petrel --ram ${CAP_GIB}G, streams $STREAMS x $GEN_CAPPED tokens"
    oom=$(run_capped "$LIMIT" "$OUT/capped-agg" "$BT" -m "$MODEL" -t "$THREADS" --ram "${CAP_GIB}G" \
        --agg "$STREAMS" --gen "$GEN_CAPPED")
    cat "$OUT/capped-agg.out"
    [ "$oom" = 0 ] || echo "capped streams: $oom OOM kills"
    if [ -z "${SKIP_LLAMA:-}" ] && [ -x "$LLAMA_BIN/llama-bench" ]; then
        echo "-- capped ${CAP_GIB} GiB, cold: llama-bench -p $PP -n 0 -t $THREADS --no-warmup (one cold prefill, as" \
             "Petrel's; timeout ${LLAMA_TIMEOUT}s)"
        drop_caches
        read -r llama_cap_st llama_cap <<<"$(llama_pp "$OUT/llama-cap" "$LIMIT" "$LLAMA_BIN" --no-warmup)"
        echo "llama.cpp pp$PP capped (default build): $llama_cap_st, $llama_cap tok/s"
        if [ "$llama_cap_st" = killed ] && [ -x "$LLAMA_BIN_NOREPACK/llama-bench" ]; then
            drop_caches
            read -r llama_cap_st llama_cap <<<"$(llama_pp "$OUT/llama-cap-norepack" "$LIMIT" "$LLAMA_BIN_NOREPACK" --no-warmup)"
            echo "llama.cpp pp$PP capped (build without repacking): $llama_cap_st, $llama_cap tok/s"
        fi
        case $llama_cap_st in
        killed) echo "llama.cpp cannot prefill under the ${CAP_GIB} GiB cap (killed by it): counts 0 tok/s, pp_capped_ratio inf" ;;
        timeout) echo "llama.cpp ran past ${LLAMA_TIMEOUT}s: $llama_cap tok/s is an upper bound, pp_capped_ratio a lower bound" ;;
        esac
    fi
fi

agg() { field "$3" "$(line_where "$1" AGG "streams=$2 ")"; } # agg LOG K KEY
a1r=$(agg "$OUT/resident.out" 1 tok_s) a4r=$(agg "$OUT/resident.out" 4 tok_s)
a1c=$(agg "$OUT/capped-agg.out" 1 tok_s) a4c=$(agg "$OUT/capped-agg.out" 4 tok_s)
a8c=$(agg "$OUT/capped-agg.out" 8 tok_s)
b1c=$(agg "$OUT/capped-agg.out" 1 bytes_per_step) b4c=$(agg "$OUT/capped-agg.out" 4 bytes_per_step)
allowed4=$(awk -v t="${a1c:-0}" -v b1="${b1c:-0}" -v b4="${b4c:-0}" 'BEGIN{ if (b4 + 0 > 0) printf "%.3f", 4 * t * b1 / b4; else print "na" }')
echo "capped: 4 streams $a4c tok/s, their bytes allow $allowed4 tok/s (4 x $a1c tok/s x $b1c B/token / $b4c B/step):" \
     "agg4_bytes_frac_capped=$(ratio "$a4c" "$allowed4")"
echo "resident decode $dec_res tok/s ($cpu_res CPU s/token), 6 GiB budget $dec6 tok/s ($cpu6 CPU s/token," \
     "${bpt6:-na} B read per token, ${pfr6:-na} prefetch reads in the second pass);" \
     "load at end $(cut -d' ' -f1 /proc/loadavg)"
echo "RESULT pp_resident_tok_s=$pp_res llama_pp_resident_tok_s=$llama_res pp_resident_ratio=$(ratio "$pp_res" "$llama_res")" \
     "pp_capped_tok_s=$pp_cap llama_pp_capped_tok_s=$llama_cap pp_capped_ratio=$(pp_ratio "$pp_cap" "$llama_cap")" \
     "llama_pp_capped_status=$llama_cap_st" \
     "agg4_over_1_capped=$(ratio "$a4c" "$a1c") agg8_over_1_capped=$(ratio "$a8c" "$a1c")" \
     "agg4_over_1_resident=$(ratio "$a4r" "$a1r") stream6_over_resident=$(ratio "$dec6" "$dec_res") stream6_hit_rate=${hit6:-na}" \
     "stream6_cpu_over_resident=$(ratio "$cpu_res" "$cpu6") stream6_ab_ratio=${ab6:-na}" \
     "stream6_bytes_per_token=${bpt6:-na} stream6_prefetch_reads=${pfr6:-na}"
