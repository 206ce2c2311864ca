#!/usr/bin/env bash
# tests/crash/run.sh — kill -9 at random points (issue 15, crash safety).
#
#   tests/crash/run.sh --petrel BIN --helper BIN [--kills N] [--seed S]
#                      [--work DIR] [--cases "convert state usage serve"]
#                      [--inplace]
#
# Four cases, N kills each (default 50), every kill time drawn from bash's
# RANDOM seeded with S (printed; the same seed draws the same delays — where
# the process is at that instant still depends on the machine's load):
#   convert  `petrel convert tests/fixtures/tiny-dsv3` killed at a random
#            instant, half the time killed again while resuming, then run to
#            the end: the result is byte-identical (cmp) to an uninterrupted
#            conversion, no .partial / .journal is left, and no kill ever
#            leaves a complete-looking output that differs from it.
#   state    crash_helper state-writer saves growing / shrinking context
#            states (petrel_state_save) to one path in a loop; after the kill
#            the file must load, be the state last saved or the one being
#            saved, and decode to logits bit-identical to a recomputed context.
#   usage    crash_helper usage-writer merges into a usage file
#            (pt_usage_merge_save) in a loop; after the kill it must parse and
#            hold exactly the last saved or the in-flight merge count (a torn
#            file would silently zero the routing heat).
#   serve    `petrel serve --kv-dir` with 4 clients in flight (multi-turn
#            chats), killed; restarted on the same kv dir it must answer
#            /health and a chat completion, and every kept *.pkv must load.
# --inplace checks the checks: the state and usage writers are replaced by
# ones that overwrite the file in place (no temp name, no rename); the run
# must then report failures (tests/test_crash.c asserts it does).
# Stray temp files (NAME.tmp.PID) left by kills are counted (tmp_left=); they
# are never read as the file.
# Last line: RESULT cases=… kills=… failures=… seed=… (+ per-case kills, how
# many landed inside a write (in_write=), after the conversion had written
# (with_partial=) or finished a shard, and how many serve kills cut requests
# short).
set -u
cd "$(dirname "$0")/../.."

PETREL="" HELPER="" KILLS=50 SEED=1 WORK="" CASES="convert state usage serve" WSUF=""
while [ $# -gt 0 ]; do
    case "$1" in
        --petrel) PETREL=$2; shift 2 ;;
        --helper) HELPER=$2; shift 2 ;;
        --kills) KILLS=$2; shift 2 ;;
        --seed) SEED=$2; shift 2 ;;
        --work) WORK=$2; shift 2 ;;
        --cases) CASES=$2; shift 2 ;;
        --inplace) WSUF=-inplace; shift ;;
        *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x "$PETREL" ] && [ -x "$HELPER" ] || { echo "run.sh: --petrel and --helper must be executables" >&2; exit 2; }
[ -n "$WORK" ] || WORK=$(mktemp -d /tmp/petrel-crash.XXXXXX)
rm -rf "$WORK" && mkdir -p "$WORK"
RANDOM=$SEED
FIX=tests/fixtures/tiny-dsv3
export OMP_WAIT_POLICY=passive
echo "crash: seed=$SEED kills_per_case=$KILLS work=$WORK"

failures=0 total_kills=0 summary="" first_ms=0
fail() { echo "FAIL [$case i=$i delay=${delay_ms}ms]: $*"; failures=$((failures + 1)); }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# delay_ms = a seeded draw in [lo, hi) milliseconds.
draw() { delay_ms=$(($1 + (RANDOM * 32768 + RANDOM) % ($2 - $1))); }
msleep() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }
# Runs "$@" in the background (stdout to $out), kills it with SIGKILL after
# delay_ms; killed=1 when it was still running then.
run_killed() {
    "$@" >"$out" 2>"$out.err" &
    local pid=$!
    msleep "$delay_ms"
    killed=0
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null && killed=1; fi
    wait "$pid" 2>/dev/null
    return 0
}
count_tmp() { find "$1" -name '*.tmp.*' | wc -l; }
# first_save FILE CMD...: runs the writer CMD (its output to $out) until it
# prints its first "saved" line (or exits), kills it, removes FILE and its
# temp files; sets first_ms to how long that took (the writer's start-up
# and one save: the kill windows below are drawn from it).
first_save() {
    local f=$1 t0 pid
    shift
    t0=$(now_ms)
    "$@" >"$out" 2>&1 &
    pid=$!
    while ! grep -q '^saved' "$out" 2>/dev/null && kill -0 $pid 2>/dev/null; do sleep 0.01; done
    first_ms=$(($(now_ms) - t0))
    kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
    rm -f "$f" "$f".tmp.*
}

# ---- convert -----------------------------------------------------------------
case_convert() {
    local d=$WORK/convert ref out_g kills=0 t0 t1 span with_partial=0 shard_done=0
    mkdir -p "$d"
    ref=$d/ref.gguf
    t0=$(now_ms)
    "$PETREL" convert "$FIX" -o "$ref" >/dev/null 2>&1 || { fail "reference conversion failed"; return; }
    t1=$(now_ms)
    span=$(((t1 - t0) * 3 / 2 + 5)) # the whole run, startup included, and a bit past it
    echo "convert: uninterrupted run $((t1 - t0)) ms; kills drawn in [0, $span) ms"
    out_g=$d/out.gguf
    for ((i = 0; i < KILLS; )); do
        rm -f "$out_g" "$out_g".*
        out=$d/log
        draw 0 "$span"
        run_killed "$PETREL" convert "$FIX" -o "$out_g"
        [ "$killed" = 1 ] || continue # finished before the kill: draw again
        i=$((i + 1)) kills=$((kills + 1))
        [ -e "$out_g.partial" ] && with_partial=$((with_partial + 1))
        grep -q '^done' "$out_g.journal" 2>/dev/null && shard_done=$((shard_done + 1))
        if [ -e "$out_g" ] && ! cmp -s "$out_g" "$ref"; then fail "a killed run left a complete-looking, different $out_g"; fi
        if [ $((RANDOM % 2)) = 1 ]; then # kill the resume too
            draw 0 "$span"
            run_killed "$PETREL" convert "$FIX" -o "$out_g"
            if [ "$killed" = 1 ]; then
                kills=$((kills + 1))
                if [ -e "$out_g" ] && ! cmp -s "$out_g" "$ref"; then fail "a killed resume left a different $out_g"; fi
            fi
        fi
        if ! "$PETREL" convert "$FIX" -o "$out_g" >"$d/final.log" 2>&1; then
            fail "resume failed: $(tail -3 "$d/final.log")"
            continue
        fi
        cmp -s "$out_g" "$ref" || fail "resumed output differs from the uninterrupted conversion"
        [ ! -e "$out_g.partial" ] && [ ! -e "$out_g.journal" ] || fail "partial / journal left after a finished resume"
    done
    total_kills=$((total_kills + kills))
    summary+=" convert_kills=$kills convert_first_kill_with_partial=$with_partial convert_first_kill_after_a_shard=$shard_done"
}

# ---- state -------------------------------------------------------------------
# n_prev: the state the file held before this writer started ("" = none).
case_state() {
    local d=$WORK/state model=$1 kills=0 inw=0 n_prev="" n1 n2 got span
    mkdir -p "$d"
    local p=$d/ctx.pkv
    out=$d/probe
    first_save "$p" "$HELPER" state-writer$WSUF "$model" "$p"
    span=$((first_ms * 4 + 20)) # startup, then many saves
    echo "state: first save after $first_ms ms; kills drawn in [0, $span) ms"
    for ((i = 0; i < KILLS; )); do
        out=$d/log
        draw 0 "$span"
        run_killed "$HELPER" state-writer$WSUF "$model" "$p"
        [ "$killed" = 1 ] || { fail "the writer stopped by itself"; i=$((i + 1)); continue; }
        i=$((i + 1)) kills=$((kills + 1))
        n1=$(awk '$1 == "saved" { n = $2 } END { print n }' "$out")
        n2=$(tail -n 1 "$out" | awk '$1 == "saving" { print $2 }')
        [ -n "$n2" ] && inw=$((inw + 1))
        [ -n "$n1" ] || n1=$n_prev
        # No save has completed yet, by this writer or an earlier one: a
        # writer killed in the first save of all, before its rename, leaves
        # no file, which is right (one that exists must still be that save's
        # state, checked below).
        if [ -z "$n1" ] && [ -n "$n2" ] && [ ! -e "$p" ]; then continue; fi
        [ -n "$n2" ] || n2=$n1
        if [ -z "$n1" ] && [ -z "$n2" ]; then
            [ ! -e "$p" ] || fail "a state file appeared without a save"
            continue
        fi
        [ -n "$n1" ] || n1=$n2
        if ! got=$("$HELPER" state-check "$model" "$p" "$n1" "$n2" 2>"$d/check.err"); then
            fail "$(cat "$d/check.err")"
            continue
        fi
        n_prev=$got
    done
    local left swept=0
    left=$(count_tmp "$d")
    # Temp files of killed writers are swept by the next save once they are
    # over an hour old (common/util.c); a fresh one (a live writer's) stays.
    if [ -z "$WSUF" ]; then
        : >"$p.tmp.999999992"
        local aged
        aged=$(find "$d" -name 'ctx.pkv.tmp.*' ! -name '*.999999992')" $p.tmp.999999991"
        : >"$p.tmp.999999991"
        touch -d '2 hours ago' $aged
        out=$d/log2
        "$HELPER" state-writer "$model" "$p" >"$out" 2>&1 &
        local wp=$!
        for ((w = 0; w < 600; w++)); do grep -q '^saved' "$out" && break; sleep 0.05; done
        kill -9 $wp 2>/dev/null; wait $wp 2>/dev/null
        for f in $aged; do [ ! -e "$f" ] && swept=$((swept + 1)) || fail "a stale temp file was not swept: $f"; done
        [ -e "$p.tmp.999999992" ] || fail "a fresh temp file (a live writer's) was removed"
        rm -f "$p.tmp.999999992"
    fi
    total_kills=$((total_kills + kills))
    summary+=" state_kills=$kills state_in_write=$inw state_tmp_left=$left state_stale_tmp_swept=$swept"
}

# ---- usage -------------------------------------------------------------------
case_usage() {
    local d=$WORK/usage kills=0 inw=0 k=0 k1 k2 got span
    mkdir -p "$d"
    local p=$d/model.gguf.usage
    # The window follows the writer's own start-up, measured here: a fixed
    # 60 ms once ended before an ASan-built writer's first save on a loaded
    # CI machine, and no kill landed in a write.
    out=$d/probe
    first_save "$p" "$HELPER" usage-writer$WSUF "$p"
    span=$((first_ms * 3 + 20)) # startup, then saves
    echo "usage: first save after $first_ms ms; kills drawn in [0, $span) ms"
    for ((i = 0; i < KILLS; )); do
        out=$d/log
        draw 0 "$span"
        run_killed "$HELPER" usage-writer$WSUF "$p"
        [ "$killed" = 1 ] || { fail "the writer stopped by itself"; i=$((i + 1)); continue; }
        i=$((i + 1)) kills=$((kills + 1))
        # the writer counts its own merges from 1: add what the file held
        k1=$(awk -v k="$k" '$1 == "saved" { n = $2 } END { print k + n }' "$out")
        k2=$(tail -n 1 "$out" | awk -v k="$k" '$1 == "saving" { print k + $2 }')
        [ -n "$k2" ] && inw=$((inw + 1))
        [ -n "$k2" ] || k2=$k1
        if [ "$k1" = 0 ] && [ ! -e "$p" ]; then continue; fi
        if ! got=$("$HELPER" usage-check "$p" "$k1" "$k2" 2>"$d/check.err"); then
            fail "$(cat "$d/check.err")"
            k=$k1
            continue
        fi
        k=$got
    done
    total_kills=$((total_kills + kills))
    summary+=" usage_kills=$kills usage_in_write=$inw usage_tmp_left=$(count_tmp "$d") usage_merges=$k"
}

# ---- serve -------------------------------------------------------------------
# Starts petrel serve on the kv dir; sets spid and port (0 when it did not come up).
serve_start() {
    rm -f "$d/port"
    "$PETREL" serve -m "$model" -t 1 -c 256 --port 0 --port-file "$d/port" --kv-dir "$d/kv" \
        >/dev/null 2>>"$d/server.log" </dev/null &
    spid=$!
    port=0
    for ((w = 0; w < 300; w++)); do
        [ -s "$d/port" ] && { port=$(cat "$d/port"); return; }
        kill -0 $spid 2>/dev/null || return
        sleep 0.05
    done
}
serve_stop() { # SIGTERM, bounded; then SIGKILL
    kill -TERM $spid 2>/dev/null
    for ((w = 0; w < 100; w++)); do kill -0 $spid 2>/dev/null || break; sleep 0.05; done
    kill -9 $spid 2>/dev/null
    wait $spid 2>/dev/null
}
# One client: a 3-turn conversation (each turn resends the history).
client() {
    local c=$1 msgs="" t
    for t in 1 2 3; do
        msgs="$msgs${msgs:+,}{\"role\":\"user\",\"content\":\"client $c turn $t: tell me about petrels\"}"
        curl -s --max-time 20 -o /dev/null "http://127.0.0.1:$port/v1/chat/completions" \
            -H 'Content-Type: application/json' \
            -d "{\"messages\":[$msgs],\"max_tokens\":6,\"temperature\":0}" || { : >"$d/cut.$c"; return 0; }
        msgs="$msgs,{\"role\":\"assistant\",\"content\":\"reply $t\"}"
    done
}
case_serve() {
    local d=$WORK/serve model=$1 kills=0 t0 t1 span code files in_flight=0
    mkdir -p "$d/kv"
    serve_start
    [ "$port" != 0 ] || { fail "serve did not start: $(tail -3 "$d/server.log")"; return; }
    t0=$(now_ms)
    local cpids=()
    for c in 1 2 3 4; do client $c & cpids+=($!); done
    wait "${cpids[@]}" 2>/dev/null
    t1=$(now_ms)
    serve_stop
    span=$(((t1 - t0) + 20))
    echo "serve: 4 clients x 3 turns take $((t1 - t0)) ms; kills drawn in [0, $span) ms after they start"
    for ((i = 0; i < KILLS; i++)); do
        delay_ms=0
        serve_start
        [ "$port" != 0 ] || { fail "serve did not start: $(tail -3 "$d/server.log")"; continue; }
        cpids=()
        for c in 1 2 3 4; do client "$i.$c" & cpids+=($!); done
        draw 0 "$span"
        msleep "$delay_ms"
        kill -9 $spid 2>/dev/null
        wait $spid 2>/dev/null
        kills=$((kills + 1))
        wait "${cpids[@]}" 2>/dev/null # each client gets an error or its answer
        if ls "$d"/cut.* >/dev/null 2>&1; then in_flight=$((in_flight + 1)); fi
        rm -f "$d"/cut.*
        serve_start
        if [ "$port" = 0 ]; then fail "restart on the kv dir failed: $(tail -3 "$d/server.log")"; continue; fi
        code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")
        [ "$code" = 200 ] || fail "/health after the restart: HTTP $code"
        code=$(curl -s --max-time 20 -o "$d/reply.json" -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
            -H 'Content-Type: application/json' \
            -d "{\"messages\":[{\"role\":\"user\",\"content\":\"client $i.1 turn 1: tell me about petrels\"}],\"max_tokens\":4,\"temperature\":0}")
        { [ "$code" = 200 ] && grep -q '"choices"' "$d/reply.json"; } || fail "chat after the restart: HTTP $code $(head -c 200 "$d/reply.json")"
        serve_stop
        files=$(find "$d/kv" -name '*.pkv')
        if [ -n "$files" ] && ! "$HELPER" state-load "$model" $files 2>"$d/check.err"; then
            fail "kept conversations that do not load: $(head -c 400 "$d/check.err")"
        fi
    done
    total_kills=$((total_kills + kills))
    summary+=" serve_kills=$kills serve_kills_cutting_requests=$in_flight serve_kept=$(find "$d/kv" -name '*.pkv' | wc -l) serve_tmp_left=$(count_tmp "$d/kv")"
}

model=""
need_model() {
    [ -n "$model" ] && return
    model=$WORK/tiny.gguf
    "$PETREL" synth --preset tiny -o "$WORK/tiny-src" --quiet >"$WORK/model.log" 2>&1 &&
        "$PETREL" convert "$WORK/tiny-src" -o "$model" >>"$WORK/model.log" 2>&1 ||
        { echo "run.sh: cannot make the tiny model: $(tail -5 "$WORK/model.log")" >&2; exit 2; }
    rm -rf "$WORK/tiny-src"
}

start=$(now_ms)
n_cases=0
for case in $CASES; do
    i=0 delay_ms=0
    t_case=$(now_ms)
    case $case in
        convert) case_convert ;;
        state) need_model; case_state "$model" ;;
        usage) case_usage ;;
        serve) need_model; case_serve "$model" ;;
        *) echo "run.sh: unknown case $case" >&2; exit 2 ;;
    esac
    n_cases=$((n_cases + 1))
    echo "$case: done in $(($(now_ms) - t_case)) ms"
done
echo "crash: $((($(now_ms) - start) / 1000)) s in all"
[ "$failures" = 0 ] && rm -rf "$WORK"
echo "RESULT cases=$n_cases kills=$total_kills failures=$failures seed=$SEED$summary"
[ "$failures" = 0 ]
