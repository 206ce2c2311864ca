#!/usr/bin/env bash
# bench/mtp.sh — does MTP speculation pay (issue 13)? Two parts in one run,
# every figure from bench/bench_mtp.c, which first makes a reference run
# without speculation (not counted; it warms the caches), then REPS
# repetitions of one job per mode (off / always / adaptive; with several
# drafters a block per drafter: one off, one always and one adaptive job,
# each paired with its block's), interleaved prompt by prompt (every job
# generates prompt 1, in an order shuffled afresh, then prompt 2, ...) so
# that drift of the load or the cache (bench16 under the cap: the disk's)
# falls on all modes alike, and checks that every job gives the
# reference's tokens. Figures are medians over the repetitions (off: over
# all its jobs); lo / hi the lowest and highest job, spread = (hi - lo) /
# median. Every tok/s is also given per second of the process's CPU time
# (tok_s_cpu, all threads): on a loaded machine wall time counts other
# processes' preemptions too, CPU time only the work; it ignores I/O
# waits, so it is compared only in the resident settings.
#
#  1. The trained model (tests/fixtures/trained/, converted here with
#     `petrel convert` to its default types: q4_0 experts, q8_0 trunk),
#     PROMPTS prompts of PROMPT_LEN tokens from its held-out text, NGEN
#     tokens each per job, the MTP layer drafting:
#       resident    every expert preloaded, one context for all jobs;
#       b25-cold    an expert cache of 25% of each layer's routed experts
#                   (--experts-per-layer), no usage file, a new context
#                   per job (--fresh): every job starts with a cold cache,
#                   and the adaptive policy knows nothing yet;
#       b25-warm    the same with a usage file recorded first by one pass
#                   over the same prompts (warm start of the cache's heat).
#     tok/s off / always / adaptive and acceptance, greedy, then acceptance
#     sampled at temperature 0.7 (always mode; top-k off, seed fixed).
#  2. bench16 (/work/bench-models/bench16.gguf, q4_0 experts, 13 GB) with a
#     controlled-acceptance drafter (the main model's own next token with
#     probability p) for p in PS: under a CAP_GIB cgroup-v1 memory cap
#     (--ram CAP_GIB, the cap CAP_EXTRA_MIB above) and "resident": no cap,
#     the default budget, after the reference run, so the page cache is as
#     warm as the machine allows (13 GB fits in 24 GB only when the others
#     are idle: mb_read_per_tok says how resident it really was;
#     RESIDENT_PRELOAD=1 preloads every expert instead, --ram 15G).
#     tok/s off / always / adaptive, expert MB read and used per token.
#
# One "RUN part=… setting=… draft=… off_tok_s=… always_tok_s=… adaptive_tok_s=…
# off_tok_s_cpu=… always_tok_s_cpu=… adaptive_tok_s_cpu=… …_spread=… accept=… …"
# line per setting, then exactly one line:
#   RESULT trained_accept=… trained_spec_speedup=… trained_adaptive_speedup=…
#     breakeven_p_capped=… breakeven_p_resident=… adaptive_worst_loss=…
#     trained_accept_t07=… trained_adaptive_min_speedup=…
#     adaptive_worst_setting=… adaptive_worst_loss_cpu=… adaptive_worst_setting_cpu=…
#     run_spread_median=… run_spread_max=… adaptive_worst_loss_unpaired=…
#     adaptive_worst_loss_bytes16=… adaptive_worst_setting_bytes16=…
#     trained_aa_min_speedup=… trained_aa_band=… trained_adaptive_within_aa=…
# trained_aa_*: the A/A control of the trained settings (bench_mtp --aa: a
# second off job in every repetition, paired with the first as adaptive's
# is): what identical work measures as. aa_band is the largest |1 - A/A|
# of the three settings; adaptive_within_aa is 1 when the lowest
# adaptive / off is no lower than 1 - aa_band, i.e. adaptive is not
# measurably slower than off (adaptive is dormant there: off's steps but
# for one re-check verification per 8-64 calls, ~0.1% of the time).
# trained_accept: greedy acceptance, resident; *_speedup: tok/s against
# off's, paired (vs_off below; the ratio of the medians when missing), resident (min: the lowest adaptive / off over the three
# trained settings); breakeven_p: where always / off crosses 1 (linear
# between the measured p; "none" when always is slower even at p = 1, 0
# when it is faster at p = 0); adaptive_worst_loss: the worst
# 1 - min(vs_off, vs_always) over every setting and p, where vs_off /
# vs_always are bench_mtp's paired ratios (median over repetitions of
# adaptive's tok/s over the same repetition's off / always jobs: load that
# drifts between repetitions cancels), i.e. 1 - adaptive / max(off,
# always) without noise (negative: adaptive beat both);
# adaptive_worst_loss_unpaired: the same from each mode's median alone
# (the figure before 2026-12-03 15:00); adaptive_worst_loss_bytes16 (and
# _setting_bytes16): bench16 only, the worst 1 - min(off, always) /
# adaptive of the expert MB used per token, the cost of a memory-bound
# step that load does not blur (1420 vs 767 MB per token at p = 0: a
# verification costs ~1.85 plain steps, whatever the tok/s say); adaptive_worst_setting where it was;
# adaptive_worst_loss_cpu / _setting_cpu: the same from the CPU-time tok/s
# over the resident settings (trained resident, bench16 resident); run_spread_*: the median and largest spread of the tok/s behind them (a
# loss well inside the spread is noise). Missing models give "na".
#
# Environment: BUILD (build dir, default build-mtp), WORK (/work/bench-models),
# MODEL16 (bench16 file), NGEN (96), PROMPTS (8), PROMPT_LEN (64), REPS (21; the trained model: ~1 min in all),
# NGEN16 (32), PROMPT16 (16), REPS16 (3; capped, ~10-25 s a job at the throttled
# disk; 5 were needed at the disk's own drifting rate), REPS16_RES (7; resident, ~2 s a job), PS ("0,0.25,0.5,0.75,0.9,1"),
# CAP_GIB (3), CAP_EXTRA_MIB (256), DISK_BPS (the capped part's disk read
# rate cap, bytes/s, see below; 0: none), THREADS (2), SKIP_TRAINED=1,
# SKIP_BENCH16=1, SKIP_RESIDENT16=1, RESIDENT_PRELOAD=1, OMP_WAIT_POLICY (default: unset,
# the OpenMP runtime's own).
# Needs root for the cgroup cap (without it the capped part runs uncapped
# and says so). Run on an otherwise idle machine; the figures of a loaded
# one are noisy (the spreads say how much).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib/capped.sh
source "$ROOT/bench/lib/capped.sh"
BUILD=${BUILD:-$ROOT/build-mtp}
WORK=${WORK:-/work/bench-models}
MODEL16=${MODEL16:-$WORK/bench16.gguf}
NGEN=${NGEN:-96}
PROMPTS=${PROMPTS:-8}
PROMPT_LEN=${PROMPT_LEN:-64}
REPS=${REPS:-21}
NGEN16=${NGEN16:-32}
PROMPT16=${PROMPT16:-16}
REPS16=${REPS16:-3}
REPS16_RES=${REPS16_RES:-7}
PS=${PS:-0,0.25,0.5,0.75,0.9,1}
CAP_GIB=${CAP_GIB:-3}
CAP_EXTRA_MIB=${CAP_EXTRA_MIB:-256}
THREADS=${THREADS:-2}
# The capped part's disk read rate, bytes per second (cgroup-v1 blkio
# throttle; 0: the disk as it is). Under the cap the three modes' jobs are
# disk-bound, and this VM's disk drifts between 1.4 and 2.4 GB/s within
# seconds: job spreads of 0.3-0.55 buried the adaptive policy's loss (its
# dormant jobs did off's work yet came out 0.76-1.17x their block's off
# job). A rate below the disk's slowest gives every job the same disk:
# 1.2 GB/s (bench16 capped, 3 cold runs of 24 tokens: 2.311 / 2.318 /
# 2.333 tok/s, against 2.45-3.63 unthrottled within one script today).
DISK_BPS=${DISK_BPS:-1200000000}
# The OpenMP runtime's own wait policy (what a user gets), unless
# OMP_WAIT_POLICY is set, as bench/throughput.sh and bench/quants.sh. Under
# passive each product wakes the other thread: on the Intel Xeon of
# 2026-12-07 a bench16 resident plain step took 88.8 ms passive against
# 74.0 ms, a verification 138.8 against 126.1 (bench16 resident, 5
# repetitions each; the ratio, which decides whether speculation pays,
# moved from 1.70 to 1.56).
WAIT_POLICY=${OMP_WAIT_POLICY:-runtime-default}
TRAINED=$ROOT/tests/fixtures/trained

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target petrel bench_mtp -j2 >/dev/null
PETREL=$BUILD/petrel
cap_init mtp.sh
disk_throttle_init "$(dirname "$MODEL16")" "$DISK_BPS"
OUT=$(mktemp -d /tmp/petrel-mtp-bench-XXXXXX)
trap 'rm -rf "$OUT"' EXIT

declare -A R
for k in trained_accept trained_accept_t07 trained_spec_speedup trained_adaptive_speedup \
         trained_adaptive_min_speedup trained_aa_min_speedup trained_aa_band trained_adaptive_within_aa \
         breakeven_p_capped breakeven_p_resident; do
    R[$k]=na
done
WORST=""     # worst adaptive loss seen
WORST_AT=na  # ... and where
WORST_BYTES=""     # bench16: the worst 1 - min(off, always) / adaptive of expert MB used per token
WORST_BYTES_AT=na
WORST_UNPAIRED=""  # the same from each mode's median alone (the figure before 2026-12-03 15:00)
WORST_CPU=""     # worst adaptive loss from CPU-time tok/s, resident settings
WORST_CPU_AT=na
TR_MIN=""    # lowest trained adaptive / off
AA_MIN=""    # lowest trained A/A (a second off job / off), and the largest |1 - A/A|
AA_BAND=""
SPREADS=""   # spread of every mode's tok/s, one per line

# mode_field LOG DRAFT MODE KEY: KEY of bench_mtp's line for (DRAFT, MODE).
mode_field() {
    local line
    line=$(grep "^MTP draft=$2 mode=$3 " "$1.out" | head -1 || true)
    field "$4" "$line"
}

# ratio A B: A / B with 3 decimals ("na" when either is missing or B is 0).
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN{ if (a == "" || b == "" || b + 0 == 0) print "na"; else printf "%.3f", a / b }'
}

# loss OFF ALWAYS ADAPTIVE: 1 - adaptive / max(off, always) (empty when a figure is missing).
loss() {
    awk -v o="$1" -v a="$2" -v d="$3" 'BEGIN{ m = o > a ? o : a; if (m > 0 && d != "") printf "%.4f", 1 - d / m }'
}

# paired_loss VS_OFF VS_ALWAYS: 1 - the smaller of the paired ratios (empty when one is missing).
paired_loss() {
    awk -v o="$1" -v a="$2" 'BEGIN{ if (o != "" && a != "") printf "%.4f", 1 - (o < a ? o : a) }'
}

# worse WORST_SO_FAR LOSS: whether LOSS is worse (no worst yet: yes).
worse() {
    awk -v w="$1" -v l="$2" 'BEGIN{ exit !(w == "" || l > w) }'
}

# note_loss LOSS WHERE UNPAIRED: folds a setting's loss into WORST, the unpaired one into WORST_UNPAIRED.
note_loss() {
    if [ -n "$1" ] && worse "$WORST" "$1"; then
        WORST=$1
        WORST_AT=$2
    fi
    if [ -n "$3" ] && worse "$WORST_UNPAIRED" "$3"; then WORST_UNPAIRED=$3; fi
}

# note_loss_cpu LOSS WHERE: the same for the CPU-time figures into WORST_CPU.
note_loss_cpu() {
    if [ -n "$1" ] && worse "$WORST_CPU" "$1"; then
        WORST_CPU=$1
        WORST_CPU_AT=$2
    fi
}

# spread LOG DRAFT MODE: (hi - lo) / median of the mode's tok/s ("na" if missing).
spread() {
    local md lo hi
    md=$(mode_field "$1" "$2" "$3" tok_s)
    lo=$(mode_field "$1" "$2" "$3" tok_s_lo)
    hi=$(mode_field "$1" "$2" "$3" tok_s_hi)
    awk -v m="$md" -v l="$lo" -v h="$hi" 'BEGIN{ if (m == "" || l == "" || h == "" || m + 0 == 0) print "na"; else printf "%.3f", (h - l) / m }'
}

# setting_line PART SETTING DRAFT LOG [cpu]: one RUN line (and the loss) for a
# (setting, drafter); with "cpu" (a resident setting) the CPU-time loss too.
setting_line() {
    local part=$1 setting=$2 draft=$3 log=$4 off on ad offc onc adc m sp
    off=$(mode_field "$log" "$draft" off tok_s)
    on=$(mode_field "$log" "$draft" always tok_s)
    ad=$(mode_field "$log" "$draft" adaptive tok_s)
    offc=$(mode_field "$log" "$draft" off tok_s_cpu)
    onc=$(mode_field "$log" "$draft" always tok_s_cpu)
    adc=$(mode_field "$log" "$draft" adaptive tok_s_cpu)
    local pl plc ul ulc
    ul=$(loss "$off" "$on" "$ad")
    ulc=$(loss "$offc" "$onc" "$adc")
    pl=$(paired_loss "$(mode_field "$log" "$draft" adaptive vs_off)" "$(mode_field "$log" "$draft" adaptive vs_always)")
    plc=$(paired_loss "$(mode_field "$log" "$draft" adaptive vs_off_cpu)" "$(mode_field "$log" "$draft" adaptive vs_always_cpu)")
    declare -A S
    for m in off always adaptive; do
        sp=$(spread "$log" "$draft" "$m")
        S[$m]=$sp
        [ "$sp" = na ] || SPREADS+="$sp"$'\n'
    done
    echo "RUN part=$part setting=$setting draft=$draft off_tok_s=$off always_tok_s=$on adaptive_tok_s=$ad" \
         "spec_speedup=$(ratio "$on" "$off") adaptive_speedup=$(ratio "$ad" "$off")" \
         "off_tok_s_cpu=$offc always_tok_s_cpu=$onc adaptive_tok_s_cpu=$adc" \
         "adaptive_loss=${pl:-$ul} adaptive_loss_cpu=${plc:-$ulc} adaptive_loss_unpaired=$ul" \
         "paired_spec_speedup=$(mode_field "$log" "$draft" always vs_off) paired_adaptive_speedup=$(mode_field "$log" "$draft" adaptive vs_off)" \
         "off_spread=${S[off]} always_spread=${S[always]} adaptive_spread=${S[adaptive]}" \
         "runs=$(mode_field "$log" "$draft" adaptive runs)/$(mode_field "$log" "$draft" off runs)" \
         "accept=$(mode_field "$log" "$draft" always accept)" \
         "adaptive_verifs=$(mode_field "$log" "$draft" adaptive verifs) adaptive_plain=$(mode_field "$log" "$draft" adaptive plain)" \
         "adaptive_probes=$(mode_field "$log" "$draft" adaptive probes) adaptive_explore=$(mode_field "$log" "$draft" adaptive explore)" \
         "mb_read_per_tok_off=$(mode_field "$log" "$draft" off mb_read_per_tok)" \
         "mb_read_per_tok_always=$(mode_field "$log" "$draft" always mb_read_per_tok)" \
         "mb_used_per_tok_off=$(mode_field "$log" "$draft" off mb_used_per_tok)" \
         "mb_used_per_tok_always=$(mode_field "$log" "$draft" always mb_used_per_tok)" \
         "identical=$(mode_field "$log" "$draft" always identical)"
    note_loss "${pl:-$ul}" "$part-$setting-$draft" "$ul"
    if [ "$part" = bench16 ]; then
        local bl
        bl=$(awk -v o="$(mode_field "$log" "$draft" off mb_used_per_tok)" -v a="$(mode_field "$log" "$draft" always mb_used_per_tok)" \
                 -v d="$(mode_field "$log" "$draft" adaptive mb_used_per_tok)" \
                 'BEGIN{ m = o < a ? o : a; if (o != "" && a != "" && d + 0 > 0) printf "%.4f", 1 - m / d }')
        if [ -n "$bl" ] && worse "$WORST_BYTES" "$bl"; then
            WORST_BYTES=$bl
            WORST_BYTES_AT=$part-$setting-$draft
        fi
    fi
    if [ "${5:-}" = cpu ]; then note_loss_cpu "${plc:-$ulc}" "$part-$setting-$draft"; fi
}

# ---- 1. the trained model -------------------------------------------------------
if [ "${SKIP_TRAINED:-0}" != 1 ] && [ -f "$TRAINED/config.json" ]; then
    TM=$OUT/trained.gguf
    "$PETREL" convert "$TRAINED" -o "$TM" >/dev/null
    # held-out text: the first 60 KB is plenty for PROMPTS prompts
    head -c 60000 "$TRAINED/heldout.txt" | "$PETREL" tokenize --tokenizer "$TRAINED/tokenizer.json" - >"$OUT/heldout.ids"
    n_exp=$(sed -n 's/.*"n_routed_experts": *\([0-9]*\).*/\1/p' "$TRAINED/config.json")
    e25=$(( (n_exp + 3) / 4 ))
    echo "trained model: $n_exp routed experts per layer, 25% = $e25; $PROMPTS prompts of $PROMPT_LEN held-out tokens," \
         "$NGEN tokens each, $REPS repetitions; load average $(cut -d' ' -f1-3 /proc/loadavg), OMP_WAIT_POLICY $WAIT_POLICY"
    common=(-m "$TM" --ids-file "$OUT/heldout.ids" --prompts "$PROMPTS" --prompt-len "$PROMPT_LEN" -n "$NGEN"
            --reps "$REPS" -t "$THREADS")
    for setting in resident b25-cold b25-warm; do
        log=$OUT/trained-$setting
        case $setting in
            resident) extra=(--preload --no-usage) ;;
            b25-cold) dd if="$TM" iflag=nocache count=0 status=none 2>/dev/null || true
                      extra=(--experts-per-layer "$e25" --no-usage --fresh) ;;
            b25-warm) rm -f "$OUT/trained.usage"
                      "$BUILD/bench_mtp" "${common[@]}" --reps 1 --modes off --experts-per-layer "$e25" \
                          --usage "$OUT/trained.usage" >/dev/null 2>&1 || true
                      extra=(--experts-per-layer "$e25" --usage "$OUT/trained.usage" --fresh) ;;
        esac
        if ! "$BUILD/bench_mtp" "${common[@]}" "${extra[@]}" --aa >"$log.out" 2>"$log.err"; then
            echo "RUN part=trained setting=$setting status=failed"
            tail -3 "$log.err" >&2
            continue
        fi
        setting_line trained "$setting" mtp "$log" "$([ "$setting" = resident ] && echo cpu)"
        sp=$(mode_field "$log" mtp adaptive vs_off) # paired; else the medians' ratio
        [ -n "$sp" ] || sp=$(ratio "$(mode_field "$log" mtp adaptive tok_s)" "$(mode_field "$log" mtp off tok_s)")
        sp=$(awk -v s="$sp" 'BEGIN{ if (s == "na") print s; else printf "%.3f", s }')
        [ "$sp" = na ] || TR_MIN=$(awk -v m="$TR_MIN" -v s="$sp" 'BEGIN{ print (m == "" || s < m) ? s : m }')
        # the A/A control: a second off job, paired like adaptive's
        aa=$(mode_field "$log" mtp off_aa vs_off)
        if [ -n "$aa" ]; then
            AA_MIN=$(awk -v m="$AA_MIN" -v s="$aa" 'BEGIN{ printf "%.3f", (m == "" || s < m) ? s : m }')
            AA_BAND=$(awk -v m="$AA_BAND" -v s="$aa" 'BEGIN{ d = s - 1; if (d < 0) d = -d; printf "%.3f", (m == "" || d > m) ? d : m }')
        fi
        echo "RUN part=trained setting=$setting aa_speedup=${aa:-na} adaptive_speedup_paired=$sp" \
             "adaptive_verifs=$(mode_field "$log" mtp adaptive verifs) steps=$(mode_field "$log" mtp off plain)"
        if [ "$setting" = resident ]; then
            R[trained_accept]=$(mode_field "$log" mtp always accept)
            R[trained_spec_speedup]=$(mode_field "$log" mtp always vs_off)
            [ -n "${R[trained_spec_speedup]}" ] || R[trained_spec_speedup]=$(ratio "$(mode_field "$log" mtp always tok_s)" "$(mode_field "$log" mtp off tok_s)")
            R[trained_spec_speedup]=$(awk -v s="${R[trained_spec_speedup]}" 'BEGIN{ if (s == "na") print s; else printf "%.3f", s }')
            R[trained_adaptive_speedup]=$sp
            # sampled acceptance at temperature 0.7
            if "$BUILD/bench_mtp" "${common[@]}" "${extra[@]}" --reps 1 --temp 0.7 --seed 7 --modes always \
                >"$log-t07.out" 2>"$log-t07.err"; then
                R[trained_accept_t07]=$(mode_field "$log-t07" mtp always accept)
                echo "RUN part=trained setting=resident-t0.7 draft=mtp accept=${R[trained_accept_t07]}" \
                     "always_tok_s=$(mode_field "$log-t07" mtp always tok_s)" \
                     "identical=$(mode_field "$log-t07" mtp always identical)"
            fi
        fi
    done
    R[trained_adaptive_min_speedup]=${TR_MIN:-na}
    R[trained_aa_min_speedup]=${AA_MIN:-na}
    R[trained_aa_band]=${AA_BAND:-na}
    R[trained_adaptive_within_aa]=$(awk -v a="$TR_MIN" -v b="$AA_BAND" \
        'BEGIN{ if (a == "" || b == "") print "na"; else print (a >= 1 - b - 1e-9) ? 1 : 0 }')
else
    echo "mtp.sh: no trained model at $TRAINED (or SKIP_TRAINED=1): trained keys are na" >&2
fi

# breakeven LOG: the p where always / off crosses 1, linear between measured p.
breakeven() {
    local log=$1 p prev_p="" prev_s="" s out=none first=1
    for p in ${PS//,/ }; do
        d=$(printf 'p%.2f' "$p")
        s=$(ratio "$(mode_field "$log" "$d" always tok_s)" "$(mode_field "$log" "$d" off tok_s)")
        [ "$s" = na ] && continue
        if [ "$first" = 1 ] && awk -v s="$s" 'BEGIN{ exit !(s >= 1) }'; then
            out=0
            break
        fi
        first=0
        if [ -n "$prev_s" ] && awk -v s="$s" 'BEGIN{ exit !(s >= 1) }'; then
            out=$(awk -v p0="$prev_p" -v s0="$prev_s" -v p1="$p" -v s1="$s" \
                  'BEGIN{ printf "%.3f", p0 + (1 - s0) * (p1 - p0) / (s1 - s0) }')
            break
        fi
        prev_p=$p
        prev_s=$s
    done
    echo "$out"
}

# ---- 2. bench16, controlled acceptance --------------------------------------------
if [ "${SKIP_BENCH16:-0}" != 1 ] && [ -f "$MODEL16" ]; then
    LIMIT=$(( (CAP_GIB << 30) + (CAP_EXTRA_MIB << 20) ))
    common16=(-m "$MODEL16" --p "$PS" --prompt-len "$PROMPT16" -n "$NGEN16" --reps "$REPS16" -t "$THREADS"
              --no-usage)
    echo "bench16: $MODEL16, p in $PS, $NGEN16 tokens after $PROMPT16, $REPS16 repetition(s) capped" \
         "(disk reads $([ -n "$CAP_BLK_RULE" ] && echo "capped at $DISK_BPS B/s" || echo "not throttled")), $REPS16_RES resident;" \
         "load average $(cut -d' ' -f1-3 /proc/loadavg)"
    log=$OUT/b16-capped
    oom=$(run_capped "$LIMIT" "$log" "$BUILD/bench_mtp" "${common16[@]}" --ram "${CAP_GIB}G")
    if [ "$(cat "$log.rc")" = 0 ]; then
        for p in ${PS//,/ }; do setting_line bench16 "capped-${CAP_GIB}g" "$(printf 'p%.2f' "$p")" "$log"; done
        R[breakeven_p_capped]=$(breakeven "$log")
    else
        echo "RUN part=bench16 setting=capped-${CAP_GIB}g status=failed oom_kills=$oom"
        tail -3 "$log.err" >&2
    fi
    if [ "${SKIP_RESIDENT16:-0}" != 1 ]; then
        log=$OUT/b16-resident
        if [ "${RESIDENT_PRELOAD:-0}" = 1 ]; then res=(--preload --ram 15G); else res=(); fi
        if "$BUILD/bench_mtp" "${common16[@]}" --reps "$REPS16_RES" ${res[@]+"${res[@]}"} >"$log.out" 2>"$log.err"; then
            for p in ${PS//,/ }; do setting_line bench16 resident "$(printf 'p%.2f' "$p")" "$log" cpu; done
            R[breakeven_p_resident]=$(breakeven "$log")
        else
            echo "RUN part=bench16 setting=resident status=failed"
            tail -3 "$log.err" >&2
        fi
    fi
else
    echo "mtp.sh: no bench16 model at $MODEL16 (bench/stream.sh makes it) or SKIP_BENCH16=1: bench16 keys are na" >&2
fi

echo "RESULT trained_accept=${R[trained_accept]} trained_spec_speedup=${R[trained_spec_speedup]}" \
     "trained_adaptive_speedup=${R[trained_adaptive_speedup]} breakeven_p_capped=${R[breakeven_p_capped]}" \
     "breakeven_p_resident=${R[breakeven_p_resident]} adaptive_worst_loss=${WORST:-na}" \
     "trained_accept_t07=${R[trained_accept_t07]} trained_adaptive_min_speedup=${R[trained_adaptive_min_speedup]}" \
     "adaptive_worst_setting=$WORST_AT adaptive_worst_loss_cpu=${WORST_CPU:-na} adaptive_worst_setting_cpu=$WORST_CPU_AT" \
     "run_spread_median=$(m=$(median "$SPREADS"); echo "${m:-na}")" \
     "run_spread_max=$(printf '%s' "$SPREADS" | sort -g | tail -1 | grep . || echo na)" \
     "adaptive_worst_loss_unpaired=${WORST_UNPAIRED:-na} adaptive_worst_loss_bytes16=${WORST_BYTES:-na}" \
     "adaptive_worst_setting_bytes16=$WORST_BYTES_AT trained_aa_min_speedup=${R[trained_aa_min_speedup]}" \
     "trained_aa_band=${R[trained_aa_band]} trained_adaptive_within_aa=${R[trained_adaptive_within_aa]}"
