#!/usr/bin/env bash
# fuzz/run.sh BINDIR SECONDS_PER_TARGET — runs every libFuzzer target in
# BINDIR (fuzz_* executables) for SECONDS_PER_TARGET seconds, one after the
# other (2 cores are shared), each on a scratch copy of its seed corpus
# fuzz/corpus/<target>/ (the repository's corpus is never written), after
# replaying every kept crash input under fuzz/regressions/<target>/. Crash
# inputs found go to $FUZZ_ARTIFACTS (default BINDIR/artifacts). Prints one
# line per target and last
#   RESULT targets=N seconds_each=S execs=E findings=F
# Exit 0 when nothing was found, 1 on a finding, 77 when BINDIR holds no
# targets (no fuzz build: CTest reports the test as skipped).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bindir="${1:?usage: fuzz/run.sh BINDIR SECONDS_PER_TARGET}"
secs="${2:-600}"
targets=()
for b in "$bindir"/fuzz_*; do
  [ -x "$b" ] && [ -f "$b" ] && targets+=("$b")
done
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz_short: skipped: no fuzz build in $bindir (configure one with" \
       "CC=clang cmake -S . -B build-fuzz -DPETREL_FUZZ=ON; cmake --build build-fuzz --target fuzz_all)"
  exit 77
fi
art="${FUZZ_ARTIFACTS:-$bindir/artifacts}"
mkdir -p "$art"
work="$(mktemp -d "${TMPDIR:-/tmp}/petrel-fuzzrun-XXXXXX")"
trap 'rm -rf "$work"' EXIT
# leaks: parsers that fail must free what they allocated, so LeakSanitizer
# stays on; an allocation over 2 GiB from a few KB of input is a finding.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
total_execs=0 findings=0
for b in "${targets[@]}"; do
  name="$(basename "$b")" short="${name#fuzz_}"
  reg="$here/regressions/$short"
  if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
    if ! "$b" -runs=0 "$reg"/* >"$work/$name.reg.log" 2>&1; then
      echo "$name: a kept regression input fails again:"; tail -30 "$work/$name.reg.log"
      findings=$((findings + 1))
    fi
  fi
  mkdir -p "$work/$short"
  seeds=()
  [ -d "$here/corpus/$short" ] && seeds+=("$here/corpus/$short")
  # -seed=1: the same mutation sequence on every run (a faster machine only goes further along it)
  "$b" -seed=1 -max_total_time="$secs" -timeout=20 -rss_limit_mb=3072 -malloc_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$art/$short-" "$work/$short" "${seeds[@]}" >"$work/$name.log" 2>&1
  rc=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$name.log" | tail -1)"
  execs="${execs:-0}"
  total_execs=$((total_execs + execs))
  if [ $rc -ne 0 ]; then
    findings=$((findings + 1))
    echo "$name: FINDING (exit $rc), input kept under $art/$short-*:"
    grep -E "ERROR|SUMMARY|runtime error|#[0-9]+ 0x" "$work/$name.log" | head -25
  else
    echo "$name: ok, $execs execs in ${secs}s, corpus $(ls "$work/$short" | wc -l) new units"
  fi
done
echo "RESULT targets=${#targets[@]} seconds_each=$secs execs=$total_execs findings=$findings"
[ $findings -eq 0 ]
