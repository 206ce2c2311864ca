# bench/lib/trained.sh — shell helpers for the benchmarks on the trained
# model (sourced, not run): its fixture converted to a weight type, and its
# held-out text as token ids the way it was trained on (each document, i.e.
# blank-line separated chapter, as BOS + text + EOS, concatenated).
#
# Set before sourcing: BUILD (a build directory with petrel), WORK (a scratch
# directory). TRAINED: the fixture (default tests/fixtures/trained).
TRAINED=${TRAINED:-tests/fixtures/trained}

# trained_check: fails with a message when the fixture is missing.
trained_check() {
    if [ ! -f "$TRAINED/config.json" ]; then
        echo "$0: $TRAINED/config.json: no trained model fixture (tools/train, issue 13)" >&2
        return 1
    fi
    if [ ! -f "$(trained_heldout)" ]; then
        echo "$0: $TRAINED: no heldout.txt" >&2
        return 1
    fi
}

# trained_heldout: path of the held-out text.
trained_heldout() {
    local f
    for f in "$TRAINED/heldout.txt" "$TRAINED/reference/heldout.txt" "$TRAINED/ref/heldout.txt"; do
        [ -f "$f" ] && { echo "$f"; return; }
    done
    echo "$TRAINED/heldout.txt"
}

# trained_gguf TYPE [convert options...]: converts the fixture once per
# type ("default": Petrel's default mix) into $WORK/trained-TYPE.gguf and
# prints that path.
trained_gguf() {
    local t=$1 out
    shift
    out="$WORK/trained-$t.gguf"
    if [ ! -f "$out" ]; then
        if [ "$t" = default ]; then
            "$BUILD/petrel" convert "$TRAINED" -o "$out" "$@" >"$WORK/convert-$t.log" 2>&1
        else
            "$BUILD/petrel" convert "$TRAINED" -o "$out" --type "$t" "$@" >"$WORK/convert-$t.log" 2>&1
        fi || { echo "$0: convert --type $t failed:" >&2; tail -3 "$WORK/convert-$t.log" >&2; return 1; }
    fi
    echo "$out"
}

# trained_ids MODEL.gguf: writes the held-out text's token ids (one stream,
# space separated) to $WORK/heldout.ids once and prints that path.
trained_ids() {
    local out="$WORK/heldout.ids"
    if [ ! -f "$out" ]; then
        /usr/bin/python3 - "$(trained_heldout)" >"$WORK/heldout.jsonl" <<'PY'
import json, sys
docs = [d.strip("\n") for d in open(sys.argv[1], encoding="utf-8").read().split("\n\n")]
for d in docs:
    if d.strip():
        print(json.dumps({"text": d}))
PY
        "$BUILD/petrel" tokenize -m "$1" --jsonl "$WORK/heldout.jsonl" >"$WORK/heldout.tok"
        /usr/bin/python3 - "$TRAINED/config.json" "$WORK/heldout.tok" >"$out" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
bos, eos = cfg.get("bos_token_id"), cfg.get("eos_token_id")
out = []
for line in open(sys.argv[2]):
    line = line.strip()
    if not line:
        continue
    ids = json.loads(line)
    out += ([bos] if bos is not None else []) + ids + ([eos] if isinstance(eos, int) else [])
print(" ".join(map(str, out)))
PY
    fi
    echo "$out"
}
