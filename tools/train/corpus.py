# tools/train/corpus.py — extracts the King James Bible text that Debian's
# bible-kjv-text package ships (public domain text; read through the bible
# program of the bible-kjv package), deterministically, into plain text:
# one chapter per document, verses one per line without their references,
# documents separated by a blank line. Every 20th chapter (index % 20 == 7)
# is held out.
# Usage: python3 tools/train/corpus.py OUT_DIR  -> OUT_DIR/{train,heldout}.txt
import os
import re
import subprocess
import sys


def chapters():
    """[(book+chapter ref, [verse text])] in canonical order."""
    out = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], stdin=subprocess.DEVNULL, capture_output=True,
                         check=True, text=True).stdout
    docs, cur, key = [], [], None
    pat = re.compile(r"^([1-3]?[A-Za-z]+)(\d+):(\d+) (.*)$")
    for line in out.splitlines():
        m = pat.match(line)
        if not m:
            continue
        k = m.group(1) + m.group(2)
        if k != key and cur:
            docs.append((key, cur))
            cur = []
        key = k
        cur.append(" ".join(m.group(4).split()))
    if cur:
        docs.append((key, cur))
    return docs


def main():
    od = sys.argv[1]
    os.makedirs(od, exist_ok=True)
    docs = chapters()
    assert len(docs) == 1189, f"expected the 1189 chapters of the KJV, got {len(docs)}"
    train = ["\n".join(v) for i, (_, v) in enumerate(docs) if i % 20 != 7]
    held = ["\n".join(v) for i, (_, v) in enumerate(docs) if i % 20 == 7]
    for name, d in (("train.txt", train), ("heldout.txt", held)):
        with open(os.path.join(od, name), "w") as f:
            f.write("\n\n".join(d) + "\n")
    print(f"{len(docs)} chapters: {len(train)} train, {len(held)} held out")


if __name__ == "__main__":
    main()
