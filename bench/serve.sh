#!/usr/bin/env bash
# bench/serve.sh — `petrel serve` latency and throughput on the synthetic
# tiny model (or MODEL=path.gguf):
#   1. 20 sequential streaming chat requests (different user messages, 32
#      tokens each, greedy): client-side TTFT p50 / p99 and generation tok/s
#      (tokens after the first / time after the first).
#   2. A ~2,000-token conversation: its first turn is answered, the server is
#      restarted (states kept in --kv-dir), and the follow-up message is sent:
#      resumed TTFT. The same follow-up to a fresh server without kept states
#      re-prefills everything: cold TTFT.
# Environment: PETREL_BUILD (default ./build), MODEL, THREADS (default 2),
# CONV_TOKENS (default 2000).
# Last line: RESULT ttft_p50_ms=… ttft_p99_ms=… tok_s=… resume_ttft_ms=… cold_ttft_ms=…
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${PETREL_BUILD:-$ROOT/build}"
THREADS="${THREADS:-2}"
CONV_TOKENS="${CONV_TOKENS:-2000}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/petrel-servebench-XXXXXX")"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
fi
cmake --build "$BUILD" --target petrel -j2 >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
PETREL="$BUILD/petrel"
if [ -z "${MODEL:-}" ]; then
    "$PETREL" synth --preset tiny -o "$WORK/tiny" --quiet >/dev/null
    "$PETREL" convert "$WORK/tiny" -o "$WORK/tiny.gguf" >/dev/null 2>&1
    MODEL="$WORK/tiny.gguf"
fi

# start_server EXTRA-ARGS...: starts petrel serve on a free loopback port.
start_server() {
    rm -f "$WORK/port"
    "$PETREL" serve -m "$MODEL" -t "$THREADS" -c 4096 --port 0 --port-file "$WORK/port" "$@" \
        2>>"$WORK/server.log" >/dev/null </dev/null &
    SERVER_PID=$!
    for _ in $(seq 600); do
        [ -s "$WORK/port" ] && break
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log"; exit 1; }
        sleep 0.1
    done
    PORT="$(cat "$WORK/port")"
}
stop_server() {
    kill "$SERVER_PID"
    wait "$SERVER_PID" || true
    SERVER_PID=""
}

# client.py MODE PORT [ARGS]: the measuring client (streaming, stdlib only).
cat >"$WORK/client.py" <<'PY'
import json, sys, time, urllib.request

def chat(port, messages, max_tokens):
    """Streams one chat completion; returns (ttft_s, n_chunks_with_text, t_after_first_s, text, usage)."""
    body = json.dumps({"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    first = last = None
    text, usage, n = "", None, 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            c = json.loads(line[6:])
            if c.get("usage"):
                usage = c["usage"]
            for ch in c["choices"]:
                d = ch["delta"].get("content")
                if d:
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    text += d
                    n += 1
    t_first = (first or time.perf_counter()) - t0
    return t_first, n, (last - first) if first else 0.0, text, usage

def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)

mode, port = sys.argv[1], int(sys.argv[2])
if mode == "seq":
    ttfts, toks, secs = [], 0, 0.0
    for i in range(20):
        msgs = [{"role": "user", "content": f"Question {i}: what do petrels eat near island {i * 7}?"}]
        t, n, dt, _, usage = chat(port, msgs, 32)
        ttfts.append(t)
        gen = usage["completion_tokens"] if usage else n
        if gen > 1 and dt > 0:
            toks += gen - 1
            secs += dt
    print(f"ttft_p50_ms={pct(ttfts, 50) * 1e3:.1f} ttft_p99_ms={pct(ttfts, 99) * 1e3:.1f} "
          f"tok_s={toks / secs if secs else 0:.2f}")
elif mode in ("turn1", "followup"):
    target = int(sys.argv[3])
    words = " ".join(f"w{i % 97}x{i % 13}" for i in range(target))
    # Calibrated by the caller through CONV_WORDS: words per ~target tokens.
    nw = int(sys.argv[4])
    content = " ".join(words.split()[:nw])
    msgs = [{"role": "system", "content": "You are a patient assistant."},
            {"role": "user", "content": content}]
    if mode == "turn1":
        t, n, dt, text, usage = chat(port, msgs, 16)
        json.dump({"reply": text, "prompt_tokens": usage["prompt_tokens"]}, open(sys.argv[5], "w"))
        print(f"turn1 prompt_tokens={usage['prompt_tokens']} ttft_ms={t * 1e3:.1f}")
    else:
        prev = json.load(open(sys.argv[5]))
        msgs += [{"role": "assistant", "content": prev["reply"]},
                 {"role": "user", "content": "And what about storm petrels?"}]
        t, n, dt, text, usage = chat(port, msgs, 8)
        cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
        print(f"followup prompt_tokens={usage['prompt_tokens']} cached_tokens={cached} ttft_ms={t * 1e3:.1f}")
elif mode == "count":
    # Token count of a conversation of N words (a 1-token reply).
    nw = int(sys.argv[3])
    words = " ".join(f"w{i % 97}x{i % 13}" for i in range(nw))
    msgs = [{"role": "system", "content": "You are a patient assistant."}, {"role": "user", "content": words}]
    _, _, _, _, usage = chat(port, msgs, 1)
    print(usage["prompt_tokens"])
PY
client() { python3 "$WORK/client.py" "$@"; }
field() { sed -n "s/\(^\|.* \)$1=\([^ ]*\).*/\2/p"; }

echo "model: $MODEL, threads $THREADS"
# 1. sequential requests
start_server
SEQ="$(client seq "$PORT")"
echo "20 sequential chat requests: $SEQ"
# Calibrate words -> tokens for the long conversation (on the same server).
PER100="$(client count "$PORT" 100)"
BASE="$(client count "$PORT" 1)"
NW=$(( (CONV_TOKENS - BASE) * 100 / (PER100 - BASE) ))
stop_server

# 2. resumed vs cold follow-up in a ~2,000-token conversation
start_server --kv-dir "$WORK/kv"
client turn1 "$PORT" "$CONV_TOKENS" "$NW" "$WORK/turn1.json"
stop_server
start_server --kv-dir "$WORK/kv"
RES="$(client followup "$PORT" "$CONV_TOKENS" "$NW" "$WORK/turn1.json")"
echo "resumed after a restart: $RES"
stop_server
start_server --kv-ram 0
COLD="$(client followup "$PORT" "$CONV_TOKENS" "$NW" "$WORK/turn1.json")"
echo "cold (no kept state):    $COLD"
stop_server

echo "RESULT ttft_p50_ms=$(echo "$SEQ" | field ttft_p50_ms) ttft_p99_ms=$(echo "$SEQ" | field ttft_p99_ms)" \
     "tok_s=$(echo "$SEQ" | field tok_s) resume_ttft_ms=$(echo "$RES" | field ttft_ms)" \
     "cold_ttft_ms=$(echo "$COLD" | field ttft_ms)"
