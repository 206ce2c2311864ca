#!/usr/bin/env bash
# The test suite built with AddressSanitizer + UndefinedBehaviorSanitizer
# (gcc, build-asan/, Release flags plus -fsanitize=address,undefined and
# -fno-sanitize-recover: any report fails its test). Runs every test but
#   fuzz_short    already run by scripts/test.sh against the clang fuzz build
#   test_budget   runs petrel under a memory cgroup cap of ~56 MB and checks
#                 peak RSS: ASan's shadow memory and quarantine make the RSS
#                 meaningless and the cap kill it
# LeakSanitizer is on: a leak in a test process or in any petrel it runs
# (those inherit ASAN_OPTIONS and exit non-zero on a leak) fails the test.
set -euo pipefail
cd "$(dirname "$0")/.."
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$san" \
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
# Only what the tests run: the CLI and the test executables (no bench drivers).
targets=(petrel)
for t in tests/test_*.c; do targets+=("$(basename "$t" .c)"); done
cmake --build build-asan -j"$(nproc)" --target "${targets[@]}"
export OMP_WAIT_POLICY=passive
export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir build-asan --output-on-failure -j2 -E '^(fuzz_short|test_budget)$'
