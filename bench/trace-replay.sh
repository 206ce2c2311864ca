#!/usr/bin/env bash
# bench/trace-replay.sh TRACE [--slots N | --bytes B | --frac F] [--hot-frac F] [--usage FILE]
#                       [--heat-trace TRACE2] [--count-from POS]
# bench/trace-replay.sh --trained
# Replays a routing trace (recorded with petrel_trace_open / --trace /
# bench_trace_record) against LRU, LFU, the hot-store, lookahead prefetch,
# Petrel's own expert cache (cache/ecache.c, driven as the engine drives
# it), the best static set and Belady's optimal policy at the same capacity
# and prints their hit rates side by side (bench/bench_trace.c). Default
# capacity: 8 slots per layer.
#
# --trained (issue 13): the trained model (tests/fixtures/trained, Petrel's
# default conversion) reads its held-out text teacher-forced, one token per
# step as in generation, in windows of its training length (256): a trace
# of TRACE_TOKENS (default 2304) tokens to replay and, from text further on
# (from token 16384), a trace of HEAT_TOKENS (default 2048) tokens whose
# counts are the "earlier session" usage file of Petrel's warm runs. Replays
# at 12.5%, 25% and 50% of the routed experts and prints one line:
#   RESULT tokens=… repeat=… recall=… recall_read=… prefetch_wasted_frac=… prefetch_wasted_mb_per_tok=…
#          and per capacity C in 12 25 50: lru_C= lfu_C= static_C= belady_C= belady_step_C= petrel_cold_C= petrel_warm_C=
#          petrel_warm_pf_C= ratio_cold_C= ratio_warm_C= (Petrel's policy without prefetch / Belady)
#          ratio_warm_step_C= (/ belady-step: a token's experts resident together, the engine's model)
#          ratio_warm_pf_C= (with the engine's lookahead prefetch, at the moment of use, / Belady)
#          belady_pf_C= (belady-step given the same prefetch candidates, admitting only those
#          that pay: the bound for a prefetching policy) ratio_pf_C= (petrel_warm_pf / belady_pf)
#          reads_belady_C= reads_belady_pf_C= reads_petrel_pf_C= (experts read per use: bytes)
#          ratio_min= (the smallest of ratio_cold / ratio_warm over the capacities)
# BUILD: build directory (default build-stream).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-stream}
[ $# -ge 1 ] || { echo "usage: $0 TRACE [--slots N | --bytes B | --frac F] [...] | $0 --trained" >&2; exit 2; }
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
if [ "$1" != --trained ]; then
    cmake --build "$BUILD" --target bench_trace -j2 >/dev/null
    TRACE=$1; shift
    args=("$@")
    if [[ " ${args[*]-} " != *" --slots "* && " ${args[*]-} " != *" --bytes "* && " ${args[*]-} " != *" --frac "* ]]; then
        args+=(--slots 8)
    fi
    exec "$BUILD/bench_trace" "$TRACE" "${args[@]}"
fi

cd "$ROOT"
cmake --build "$BUILD" --target petrel bench_trace bench_trace_record -j2 >/dev/null
WORK=$(mktemp -d /tmp/petrel-trace-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# shellcheck source=bench/lib/trained.sh
. bench/lib/trained.sh
trained_check
model=$(trained_gguf default)
ids=$(trained_ids "$model")
rec=$("$BUILD/bench_trace_record" "$model" "$ids" "$WORK/test.trace" --ctx 256 --max-tokens "${TRACE_TOKENS:-2304}")
echo "recorded: $rec (held-out tokens 0..)"
rec=$("$BUILD/bench_trace_record" "$model" "$ids" "$WORK/heat.trace" --ctx 256 --skip 16384 --max-tokens "${HEAT_TOKENS:-2048}")
echo "recorded: $rec (held-out tokens 16384.., the earlier session's heat)"
get() { echo "$1" | tr ' ' '\n' | grep "^$2=" | cut -d= -f2; }
result="" ratio_min=9
for c in 12 25 50; do
    f=$(awk -v c=$c 'BEGIN { print (c == 12 ? 0.125 : c / 100) }')
    out=$("$BUILD/bench_trace" "$WORK/test.trace" --frac "$f" --heat-trace "$WORK/heat.trace")
    echo
    echo "$out" | grep -v '^RESULT'
    r=$(echo "$out" | grep '^RESULT')
    if [ $c = 12 ]; then
        result="tokens=$(echo "$out" | head -1 | sed 's/.*top-[0-9]*, \([0-9]*\) tokens.*/\1/')"
        for k in repeat recall recall_read prefetch_wasted_frac prefetch_wasted_mb_per_tok; do result+=" $k=$(get "$r" $k)"; done
    fi
    bel=$(get "$r" belady)
    rc=$(awk -v a="$(get "$r" petrel_cold)" -v b="$bel" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }')
    rw=$(awk -v a="$(get "$r" petrel_warm)" -v b="$bel" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }')
    result+=" lru_$c=$(get "$r" lru) lfu_$c=$(get "$r" lfu) static_$c=$(get "$r" static_oracle) belady_$c=$bel"
    result+=" belady_step_$c=$(get "$r" belady_step)"
    result+=" petrel_cold_$c=$(get "$r" petrel_cold) petrel_warm_$c=$(get "$r" petrel_warm)"
    rs=$(awk -v a="$(get "$r" petrel_warm)" -v b="$(get "$r" belady_step)" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }')
    rp=$(awk -v a="$(get "$r" petrel_warm_pf)" -v b="$bel" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }')
    result+=" petrel_warm_pf_$c=$(get "$r" petrel_warm_pf) ratio_cold_$c=$rc ratio_warm_$c=$rw"
    result+=" ratio_warm_step_$c=$rs ratio_warm_pf_$c=$rp"
    rq=$(awk -v a="$(get "$r" petrel_warm_pf)" -v b="$(get "$r" belady_pf)" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }')
    result+=" belady_pf_$c=$(get "$r" belady_pf) ratio_pf_$c=$rq"
    result+=" reads_belady_$c=$(awk -v b="$bel" 'BEGIN { printf "%.4f", 1 - b }')"
    result+=" reads_belady_pf_$c=$(get "$r" belady_pf_reads) reads_petrel_pf_$c=$(get "$r" petrel_pf_reads)"
    ratio_pf_min=$(awk -v m="${ratio_pf_min:-9}" -v a="$rq" 'BEGIN { print (a < m ? a : m) }')
    ratio_min=$(awk -v m="$ratio_min" -v a="$rc" -v b="$rw" 'BEGIN { m = a < m ? a : m; m = b < m ? b : m; print m }')
done
echo "RESULT $result ratio_min=$ratio_min ratio_pf_min=$ratio_pf_min"
