#!/usr/bin/env bash
# Valgrind memcheck on the tiny models end to end. Every step runs a
# `petrel` command natively and under memcheck; it passes when memcheck
# reports nothing (no invalid access, no use of uninitialised values, no
# definite or indirect leak) and both runs print the same stdout and write
# the same file bytes. Steps:
#   convert        tests/fixtures/tiny-dsv3 -> q8_0 GGUF (compared byte for byte)
#   run-cached     greedy 8 tokens, every expert cached
#   run-pool       the same streamed through 1 expert slot per layer, pread pool
#   run-buffered   the same with --io buffered; writes a usage file (compared)
#   chat-save      `petrel chat` on synth tiny: one turn, session saved on exit
#   chat-resume    the session loaded again, one more turn
# Valgrind cannot see what io_uring writes into memory (it would report the
# expert bytes as uninitialised), so streaming uses the pool backends.
# Usage: scripts/valgrind.sh [BUILD_DIR] (default build/, with `petrel`
# built). Last line: RESULT steps=N failures=N seconds=S
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin="$(cd "$build" && pwd)/petrel"
[ -x "$bin" ] || { echo "valgrind.sh: $bin not built" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind not installed (apt-get install valgrind)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/petrel-vg-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Spinning OpenMP threads crawl under Valgrind, which runs one thread at a time.
export OMP_WAIT_POLICY=passive
vg=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
    --show-leak-kinds=definite,indirect --track-origins=yes)
t0=$(date +%s)
steps=0 failures=0

# step NAME [--stdin FILE] [--files-only] ARGS...: `petrel ARGS` natively
# (OUT = $tmp/NAME.n) and under memcheck (OUT = $tmp/NAME.v), where the
# word {OUT} in ARGS stands for that run's own output path. Compares stdout
# (unless --files-only: it holds timings) and, when {OUT} was used, the
# files (or folders) written there.
step() {
  local name=$1; shift
  local in=/dev/null same_out=1
  if [ "$1" = --stdin ]; then in=$2; shift 2; fi
  if [ "$1" = --files-only ]; then same_out=0; shift; fi
  steps=$((steps + 1))
  local m n=() v=()
  for m in "$@"; do n+=("${m//\{OUT\}/$tmp/$name.n}"); v+=("${m//\{OUT\}/$tmp/$name.v}"); done
  if ! "$bin" "${n[@]}" <"$in" >"$tmp/$name.n.out" 2>"$tmp/$name.n.err"; then
    echo "FAIL $name: the native run failed:"; cat "$tmp/$name.n.err"; failures=$((failures + 1)); return
  fi
  local rc=0
  "${vg[@]}" --log-file="$tmp/$name.vg.log" "$bin" "${v[@]}" <"$in" >"$tmp/$name.v.out" 2>"$tmp/$name.v.err" || rc=$?
  if [ $rc -ne 0 ] || [ -s "$tmp/$name.vg.log" ]; then
    echo "FAIL $name: memcheck exit $rc:"; head -80 "$tmp/$name.vg.log" "$tmp/$name.v.err"; failures=$((failures + 1))
  elif [ $same_out = 1 ] && ! cmp -s "$tmp/$name.n.out" "$tmp/$name.v.out"; then
    echo "FAIL $name: stdout differs under valgrind"; failures=$((failures + 1))
  elif [ -e "$tmp/$name.n" ] && ! diff -r "$tmp/$name.n" "$tmp/$name.v" >/dev/null; then
    echo "FAIL $name: the files written differ under valgrind"; failures=$((failures + 1))
  else
    echo "ok   $name ($(tr '\n' ' ' <"$tmp/$name.n.out" | cut -c1-70))"
  fi
}

step convert --files-only convert tests/fixtures/tiny-dsv3 -o '{OUT}' --type q8_0 --threads 2
model="$tmp/convert.n"
[ -f "$model" ] || { echo "valgrind.sh: the conversion failed"; exit 1; }
ids=5,6,7,8,300,301
step run-cached run -m "$model" --ids $ids -n 8 --print-ids -t 2 --usage none --io pool
step run-pool run -m "$model" --ids $ids -n 8 --print-ids -t 2 --usage none --expert-slots 1 --io pool
step run-buffered run -m "$model" --ids $ids -n 8 --print-ids -t 2 --usage '{OUT}' --expert-slots 1 --io buffered

# chat needs a tokenizer and a chat template: synth's tiny preset has both.
"$bin" synth --preset tiny -o "$tmp/synth" --quiet >/dev/null
"$bin" convert "$tmp/synth" -o "$tmp/synth-tiny.gguf" >/dev/null 2>&1
printf 'Hello there\n/quit\n' >"$tmp/in1"
printf 'And again\n/quit\n' >"$tmp/in2"
step chat-save --stdin "$tmp/in1" chat -m "$tmp/synth-tiny.gguf" -t 2 -n 6 --usage none --session s \
  --session-dir '{OUT}'
mkdir -p "$tmp/chat-resume.n" "$tmp/chat-resume.v"
cp -r "$tmp/chat-save.n/." "$tmp/chat-resume.n/"
cp -r "$tmp/chat-save.n/." "$tmp/chat-resume.v/"
step chat-resume --stdin "$tmp/in2" chat -m "$tmp/synth-tiny.gguf" -t 2 -n 6 --usage none --session s \
  --session-dir '{OUT}'

echo "RESULT steps=$steps failures=$failures seconds=$(( $(date +%s) - t0 ))"
[ "$failures" -eq 0 ]
