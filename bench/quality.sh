#!/usr/bin/env bash
# Quantisation quality on tiny-dsv3 against the reference golden logits:
# argmax agreement and KL(golden || petrel) per position for q8_0 and q4_0.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh >/dev/null
work=$(mktemp -d /tmp/petrel-quality-XXXXXX)
trap 'rm -rf "$work"' EXIT
fix=tests/fixtures/tiny-dsv3
for t in f32 q8_0 q4_0; do
  ./build/petrel convert "$fix" -o "$work/$t.gguf" --type "$t" >/dev/null 2>&1
done
declare -A res
for t in f32 q8_0 q4_0; do
  line=$(./build/bench_quality "$fix/golden" "$work/$t.gguf")
  echo "$t: $line"
  res[$t]="$line"
done
get() { echo "${res[$1]}" | tr ' ' '\n' | grep "^$2=" | cut -d= -f2; }
echo "RESULT q8_argmax=$(get q8_0 argmax) q4_argmax=$(get q4_0 argmax) q4_kl_mean=$(get q4_0 kl_mean) q4_kl_max=$(get q4_0 kl_max)"
