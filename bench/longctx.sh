#!/usr/bin/env bash
# bench/longctx.sh — decode speed at long contexts on the GLM-shaped synthetic
# preset (`petrel synth --preset glm5`: GLM-5's attention — 64 heads, kv_lora
# 512, qk_rope 64, qk_nope 192, v_head 256 — and its DSA indexer of 32 heads x
# 128 keeping index_topk 2048 keys; 3 layers, 8 small experts, ~1.1 GB at the
# default types, everything resident), with DSA and with the indexer disabled
# (dense MLA), side by side in one run (bench/bench_longctx.c: the caches are
# filled with synthetic rows up to each context length instead of a prefill;
# the two modes alternate token by token at the same position, and the
# fastest of NGEN tokens counts: the least disturbed on a shared machine).
#
# Prints per context length and mode
#   LONGCTX ctx=… mode=dsa|dense tok_s=… ms_per_tok=… median_ms=… attn_ms=… indexer_ms=…
# (attn_ms: MLA attention over the cached keys per token, all layers;
# indexer_ms: the indexer's key, scoring and selection work per token), then
#   CHECK dsa_over_dense_1k=…
#   RESULT dsa_tok_s_16k=… dense_tok_s_16k=… dsa_over_dense_16k=… attn_ms_16k=…
#     indexer_ms_16k=… kv_bytes_per_token=…
# attn_ms_16k / indexer_ms_16k are the DSA run's; kv_bytes_per_token counts
# the latent and indexer key caches of every block (f32).
# Goal (issue 12): dsa_over_dense_16k >= 1.5, dsa_over_dense_1k >= 0.95.
#
# Environment: MODEL (an existing glm5 GGUF), WORK (where to make it, default
# /work/bench-models), BUILD (build dir, default ./build), CTXS ("1024 4096
# 16384"), NGEN (tokens per mode and length, default 4), THREADS,
# OMP_WAIT_POLICY (default passive: a shared box).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
WORK=${WORK:-/work/bench-models}
MODEL=${MODEL:-$WORK/glm5.gguf}
CTXS=${CTXS:-"1024 4096 16384"}
NGEN=${NGEN:-4}
THREADS=${THREADS:-0}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
if ! cmake --build "$BUILD" --target petrel bench_longctx -j2 >/tmp/longctx-build.$$ 2>&1; then
    cat /tmp/longctx-build.$$ >&2
    rm -f /tmp/longctx-build.$$
    exit 1
fi
rm -f /tmp/longctx-build.$$

if [ ! -f "$MODEL" ]; then
    mkdir -p "$(dirname "$MODEL")"
    src="$MODEL.src"
    rm -rf "$src"
    "$BUILD/petrel" synth --preset glm5 -o "$src" --quiet
    "$BUILD/petrel" convert "$src" -o "$MODEL.tmp" >/dev/null 2>&1
    mv "$MODEL.tmp" "$MODEL"
    rm -rf "$src"
fi

out=$("$BUILD/bench_longctx" -m "$MODEL" -c "$CTXS" -n "$NGEN" -t "$THREADS")
echo "$out" | grep '^LONGCTX'
echo "$out" | awk '
    function val(line, key,    i, n, f, kv) {
        n = split(line, f, " ")
        for (i = 1; i <= n; i++) { split(f[i], kv, "="); if (kv[1] == key) return kv[2] }
        return ""
    }
    /^LONGCTX/ { c = val($0, "ctx"); m = val($0, "mode"); tok[c, m] = val($0, "tok_s");
                 attn[c, m] = val($0, "attn_ms"); idx[c, m] = val($0, "indexer_ms"); last = c }
    /^KVBYTES/ { kv = val($0, "kv_bytes_per_token") }
    END {
        big = (16384 SUBSEP "dsa") in tok ? 16384 : last
        if ((1024 SUBSEP "dsa") in tok)
            printf "CHECK dsa_over_dense_1k=%.3f (goal >= 0.95)\n", tok[1024, "dsa"] / tok[1024, "dense"]
        printf "RESULT dsa_tok_s_16k=%s dense_tok_s_16k=%s dsa_over_dense_16k=%.3f attn_ms_16k=%s indexer_ms_16k=%s kv_bytes_per_token=%s\n",
               tok[big, "dsa"], tok[big, "dense"], tok[big, "dsa"] / tok[big, "dense"], attn[big, "dsa"],
               idx[big, "dsa"], kv
    }'
