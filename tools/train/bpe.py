# tools/train/bpe.py — byte-level BPE (GPT-2 style) trained on the corpus,
# saved as a Hugging Face tokenizer.json; and an encoder that applies it
# (used for training data; the HF library is the reference it is checked
# against, see check_tokenizer.mjs).
#
# Pre-tokenizer: HF ByteLevel(use_regex=true, add_prefix_space=false), i.e.
# GPT-2's split regex, then bytes -> the GPT-2 byte alphabet. Training:
# repeatedly merge the most frequent adjacent pair over the word counts
# (ties: the lexicographically smallest pair of strings), incremental pair
# counts. Ids: the special tokens, then the 256 byte symbols, then merges.
# Usage: python3 tools/train/bpe.py TRAIN_TXT VOCAB_SIZE OUT_TOKENIZER_JSON
import collections
import heapq
import json
import os
import sys

import regex

GPT2_PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
SPECIALS = ["<|bos|>", "<|eos|>", "<|user|>", "<|assistant|>"]


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


B2U = bytes_to_unicode()


def pretokenize(text):
    return ["".join(B2U[b] for b in w.encode("utf-8")) for w in GPT2_PAT.findall(text)]


def train(text, vocab_size):
    """-> (vocab {token: id}, merges [(a, b)])."""
    counts = collections.Counter(pretokenize(text))
    words = [list(w) for w in counts]
    freq = [counts[w] for w in counts]
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pairs[(a, b)] += freq[i]
            where[(a, b)].add(i)
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for b in range(256):
        vocab[B2U[b]] = len(vocab)
    merges = []
    heap = [(-c, p) for p, c in pairs.items()]
    heapq.heapify(heap)
    while len(vocab) < vocab_size and heap:
        c, p = heapq.heappop(heap)
        if pairs.get(p, 0) != -c or c == 0:
            if pairs.get(p, 0) > 0:
                heapq.heappush(heap, (-pairs[p], p))
            continue
        a, b = p
        new = a + b
        merges.append(p)
        vocab[new] = len(vocab)
        touched = set()
        for i in list(where[p]):
            w, f = words[i], freq[i]
            for x, y in zip(w, w[1:]):
                pairs[(x, y)] -= f
                touched.add((x, y))
            j, out = 0, []
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(new)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for x, y in zip(out, out[1:]):
                pairs[(x, y)] += f
                where[(x, y)].add(i)
                touched.add((x, y))
        del where[p]
        pairs.pop(p, None)
        for q in touched:
            if pairs.get(q, 0) > 0:
                heapq.heappush(heap, (-pairs[q], q))
    return vocab, merges


def tokenizer_json(vocab, merges):
    added = [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for s in SPECIALS]
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": bl, "post_processor": None, "decoder": dict(bl),
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "vocab": vocab, "merges": [a + " " + b for a, b in merges]}}


class Encoder:
    """Applies a tokenizer.json written by this file (no special-token
    parsing inside text: callers add bos/eos ids themselves)."""

    def __init__(self, path):
        j = json.load(open(path))
        self.vocab = j["model"]["vocab"]
        self.rank = {tuple(m.split(" ")): i for i, m in enumerate(j["model"]["merges"])}
        self.inv = {i: s for s, i in self.vocab.items()}
        self.u2b = {u: b for b, u in B2U.items()}
        self.cache = {}
        self.special = {a["content"]: a["id"] for a in j["added_tokens"]}

    def _word(self, w):
        if w in self.cache:
            return self.cache[w]
        parts = list(w)
        while len(parts) > 1:
            best = min(((self.rank.get((x, y), 1 << 30), k) for k, (x, y) in enumerate(zip(parts, parts[1:]))))
            if best[0] == 1 << 30:
                break
            k = best[1]
            parts[k:k + 2] = [parts[k] + parts[k + 1]]
        ids = [self.vocab[p] for p in parts]
        self.cache[w] = ids
        return ids

    def encode(self, text):
        out = []
        for w in pretokenize(text):
            out.extend(self._word(w))
        return out

    def decode(self, ids):
        bs = bytearray()
        for i in ids:
            s = self.inv[i]
            if s in self.special:
                continue
            bs.extend(self.u2b[ch] for ch in s)
        return bs.decode("utf-8", errors="replace")


def main():
    text = open(sys.argv[1]).read()
    vocab, merges = train(text, int(sys.argv[2]))
    tmp = sys.argv[3] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(tokenizer_json(vocab, merges), f, ensure_ascii=False, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, sys.argv[3])
    print(f"vocab {len(vocab)} ({len(merges)} merges)")


if __name__ == "__main__":
    main()
