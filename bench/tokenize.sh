#!/usr/bin/env bash
# bench/tokenize.sh — single-thread tokenizer throughput (encode), Petrel vs
# Hugging Face tokenizers (the Rust library through its Node binding, npm
# tokenizers@0.23.2, when installed), on the same chunks of:
#   1. the fixture corpus (373 strings of tests/fixtures/tokenizer/deepseek_v3/cases.jsonl)
#   2. a generated 10 MB mixed-language text (English, CJK, Cyrillic, Arabic,
#      Hindi, Korean, code, numbers, emoji, JSON), encoded in ~64 KiB chunks.
# Both sides print an FNV-1a hash of the ids, so the run also checks that
# they agree on 10 MB of text.
#
# Environment: PETREL_BUILD (build dir, default ./build), HF_TOK_DIR (dir with
# node_modules/tokenizers, default /tmp/hf-tok; `npm install tokenizers@0.23.2`
# there), TOKENIZER (tokenizer.json, default the DeepSeek-V3 fixture),
# MIN_SECONDS (per measurement, default 2).
# Last line: RESULT encode_mbs=<10 MB text, Petrel, wall clock> [hf_encode_mbs=<same, HF>
# ratio=<Petrel/HF>] plus the same over process CPU time (cpu_*), which a
# busy shared machine distorts less.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${PETREL_BUILD:-$ROOT/build}"
HF_TOK_DIR="${HF_TOK_DIR:-/tmp/hf-tok}"
TOK="${TOKENIZER:-$ROOT/tests/fixtures/tokenizer/deepseek_v3/tokenizer.json}"
CASES="$ROOT/tests/fixtures/tokenizer/deepseek_v3/cases.jsonl"
MIN_SECONDS="${MIN_SECONDS:-2}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/petrel-tokbench-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
fi
cmake --build "$BUILD" --target bench_tokenize -j2 >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
BIN="$BUILD/bench_tokenize"
TEXT="$WORK/mixed10mb.txt"
"$BIN" gen "$TEXT" 10000000

field() { sed -n "s/\(^\|.* \)$1=\([^ ]*\).*/\2/p"; }

echo "tokenizer: $TOK"
P_CORPUS="$("$BIN" run "$TOK" "$CASES" jsonl "$MIN_SECONDS")"
echo "petrel  fixture corpus:   $P_CORPUS"
P_TEXT="$("$BIN" run "$TOK" "$TEXT" text "$MIN_SECONDS")"
echo "petrel  10 MB mixed text: $P_TEXT"
MBS="$(echo "$P_TEXT" | field mbs)"
CPU_MBS="$(echo "$P_TEXT" | field cpu_mbs)"

HF_MBS=""
if command -v node >/dev/null && [ -d "$HF_TOK_DIR/node_modules/tokenizers" ]; then
    cat > "$WORK/hf.js" <<'JS'
// Encodes the same chunks as bench_tokenize, sequentially (one encode in
// flight at a time: single-threaded work), and prints the same fields.
const fs = require('fs');
const { Tokenizer } = require(process.env.HF_TOK_DIR + '/node_modules/tokenizers');
const [tokPath, file, mode, minS] = process.argv.slice(2);
const tok = Tokenizer.fromFile(tokPath);
const data = fs.readFileSync(file);
let chunks = [];
if (mode === 'jsonl') {
  for (const line of data.toString('utf8').split('\n')) if (line) chunks.push(JSON.parse(line).text);
} else {
  for (let i = 0; i < data.length;) {
    let e = Math.min(i + 65536, data.length);
    while (e < data.length && data[e - 1] !== 0x0a) e++;
    chunks.push(data.subarray(i, e).toString('utf8'));
    i = e;
  }
}
const bytes = chunks.reduce((a, c) => a + Buffer.byteLength(c, 'utf8'), 0);
(async () => {
  let h = 0xcbf29ce484222325n, nids = 0;
  const M = (1n << 64n) - 1n;
  for (const c of chunks) {
    const ids = (await tok.encode(c, null, { addSpecialTokens: false })).getIds();
    for (const id of ids) h = ((h ^ BigInt(id)) * 0x100000001b3n) & M;
    nids += ids.length;
  }
  let passes = 0, el = 0;
  const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
  do {
    for (const c of chunks) await tok.encode(c, null, { addSpecialTokens: false });
    passes++;
    el = Number(process.hrtime.bigint() - t0) / 1e9;
  } while (el < Number(minS));
  const cu = process.cpuUsage(c0), cpu = (cu.user + cu.system) / 1e6;
  console.log(`bytes=${bytes} passes=${passes} seconds=${el.toFixed(3)} mbs=${(bytes * passes / el / 1e6).toFixed(2)} cpu_mbs=${(bytes * passes / cpu / 1e6).toFixed(2)} ids=${nids} hash=${h.toString(16).padStart(16, '0')}`);
})();
JS
    export HF_TOK_DIR RAYON_NUM_THREADS=1 RAYON_RS_NUM_CPUS=1 TOKENIZERS_PARALLELISM=false UV_THREADPOOL_SIZE=1
    H_CORPUS="$(node "$WORK/hf.js" "$TOK" "$CASES" jsonl "$MIN_SECONDS")"
    echo "hf      fixture corpus:   $H_CORPUS"
    H_TEXT="$(node "$WORK/hf.js" "$TOK" "$TEXT" text "$MIN_SECONDS")"
    echo "hf      10 MB mixed text: $H_TEXT"
    HF_MBS="$(echo "$H_TEXT" | field mbs)"
    HF_CPU_MBS="$(echo "$H_TEXT" | field cpu_mbs)"
    for pair in "$P_CORPUS|$H_CORPUS|fixture corpus" "$P_TEXT|$H_TEXT|10 MB text"; do
        IFS='|' read -r a b what <<<"$pair"
        if [ "$(echo "$a" | field hash)" = "$(echo "$b" | field hash)" ] &&
           [ "$(echo "$a" | field ids)" = "$(echo "$b" | field ids)" ]; then
            echo "ids identical to HF on the $what ($(echo "$a" | field ids) ids)"
        else
            echo "WARNING: ids differ from HF on the $what"
        fi
    done
    echo "(HF: npm tokenizers@0.23.2 Node binding, Rust core; per-call Promise overhead included)"
else
    echo "HF tokenizers (Node binding) not found in $HF_TOK_DIR: no comparison (npm install tokenizers@0.23.2 there)"
fi

if [ -n "$HF_MBS" ]; then
    RATIO="$(awk -v a="$MBS" -v b="$HF_MBS" 'BEGIN { printf "%.2f", a / b }')"
    CPU_RATIO="$(awk -v a="$CPU_MBS" -v b="$HF_CPU_MBS" 'BEGIN { printf "%.2f", a / b }')"
    echo "RESULT encode_mbs=$MBS hf_encode_mbs=$HF_MBS ratio=$RATIO cpu_encode_mbs=$CPU_MBS hf_cpu_encode_mbs=$HF_CPU_MBS cpu_ratio=$CPU_RATIO"
else
    echo "RESULT encode_mbs=$MBS cpu_encode_mbs=$CPU_MBS"
fi
