#!/usr/bin/env python3
# fuzz/corpus/make_seeds.py — writes the small seed inputs of the fuzz
# targets (run from anywhere; rewrites fuzz/corpus/<target>/). Hand-made
# minimal valid files of each format plus slices of tests/fixtures, a few
# KB each: libFuzzer mutates from there.
import json, os, struct, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIX = os.path.join(ROOT, "tests", "fixtures")

def put(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

def fixture(rel, limit=None):
    with open(os.path.join(FIX, rel), "rb") as f:
        return f.read() if limit is None else f.read(limit)

# ---- GGUF ------------------------------------------------------------------
def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b

def kv(key, vtype, payload):
    return gstr(key) + struct.pack("<I", vtype) + payload

def kv_u32(k, v): return kv(k, 4, struct.pack("<I", v))
def kv_u16(k, v): return kv(k, 2, struct.pack("<H", v))
def kv_i32(k, v): return kv(k, 5, struct.pack("<i", v))
def kv_f32(k, v): return kv(k, 6, struct.pack("<f", v))
def kv_str(k, v): return kv(k, 8, gstr(v))
def kv_arr_str(k, vs): return kv(k, 9, struct.pack("<IQ", 8, len(vs)) + b"".join(gstr(v) for v in vs))
def kv_arr_i32(k, vs): return kv(k, 9, struct.pack("<IQ", 5, len(vs)) + b"".join(struct.pack("<i", v) for v in vs))

def gguf(kvs, tensors, align=32):
    # tensors: (name, ne list, ggml type, data bytes)
    infos, data, off = b"", b"", 0
    for name, ne, t, blob in tensors:
        infos += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", t, off)
        pad = (-len(blob)) % align
        data += blob + b"\0" * pad
        off += len(blob) + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * ((-len(head)) % align)
    return head + data

f32 = lambda xs: b"".join(struct.pack("<f", x) for x in xs)
q8_0 = struct.pack("<e", 0.5) + bytes(range(32))
tok_kvs = [kv_str("tokenizer.ggml.model", "gpt2"), kv_str("tokenizer.ggml.pre", "deepseek-v3"),
           kv_arr_str("tokenizer.ggml.tokens", ["a", "b", "ab", "<s>"]),
           kv_arr_i32("tokenizer.ggml.token_type", [1, 1, 1, 3]),
           kv_arr_str("tokenizer.ggml.merges", ["a b"]), kv_u32("tokenizer.ggml.bos_token_id", 3)]
base = [kv_str("general.architecture", "deepseek2"), kv_u32("deepseek2.block_count", 1),
        kv_f32("deepseek2.rope.freq_base", 10000.0), kv_u32("general.alignment", 32)]
tens = [("token_embd.weight", [4, 3], 0, f32(range(12))), ("blk.0.attn_norm.weight", [32], 8, q8_0)]
put("gguf", "tiny.gguf", gguf(base + tok_kvs, tens))
put("gguf", "notok.gguf", gguf(base, tens[:1]))
# The metadata of llama.cpp's tiny-dsv3 file (all its deepseek2.* keys),
# without the tensors: the hyperparameter reader gets a real model's keys.
def kv_end(buf, n_kv, pos):
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    def skip_str(p):
        return p + 8 + struct.unpack_from("<Q", buf, p)[0]
    for _ in range(n_kv):
        pos = skip_str(pos)
        (t,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if t == 8:
            pos = skip_str(pos)
        elif t == 9:
            at, n = struct.unpack_from("<IQ", buf, pos)
            pos += 12
            for _ in range(n):
                pos = skip_str(pos) if at == 8 else pos + sizes[at]
        else:
            pos += sizes[t]
    return pos
head = fixture("llamacpp/models/tiny-dsv3-IQ1_S.gguf", 1 << 20)
(n_kv,) = struct.unpack_from("<Q", head, 16)
meta = head[24:kv_end(head, n_kv, 24)]
put("gguf", "tiny-dsv3-meta.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, n_kv) + meta)

split = lambda no: [kv_u16("split.no", no), kv_u16("split.count", 2), kv_i32("split.tensors.count", 2)]
p1 = gguf(base + split(0), tens[:1])
p2 = gguf(split(1), tens[1:])
put("gguf_split", "two-parts", struct.pack("<I", len(p1)) + p1 + p2)

# ---- safetensors -----------------------------------------------------------
def st(tensors, meta=None):
    hdr, data = {}, b""
    for name, dtype, shape, blob in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    if meta is not None:
        hdr["__metadata__"] = meta
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + data

put("safetensors", "two.safetensors", st([("a.weight", "F32", [2, 2], f32([1, 2, 3, 4])),
                                          ("b.weight", "BF16", [3], b"\x80\x3f" * 3)], {"format": "pt"}))
put("safetensors", "fp8.safetensors", st([("w", "F8_E4M3", [2, 4], bytes(range(8))),
                                          ("w_scale_inv", "F32", [1, 1], f32([2.0])),
                                          ("i", "I64", [1], struct.pack("<q", 7))]))

# ---- Hugging Face JSON -----------------------------------------------------
put("hfindex", "glm5.index.json", fixture("tiny-glm5/model.safetensors.index.json", 1 << 30)[:4096]
    .rsplit(b",", 1)[0] + b"}}")
put("hfindex", "small.index.json", json.dumps({"metadata": {"total_size": 1234}, "weight_map": {
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "lm_head.weight": "model-00002-of-00002.safetensors"}}))
for name in ["deepseek-v3", "kimi-k2", "glm-5.1"]:
    put("hfconfig", name + ".json", fixture("configs/%s.config.json" % name))
put("hfconfig", "tiny-dsv3.json", fixture("tiny-dsv3/config.json"))

# ---- tokenizers ------------------------------------------------------------
tj = {"version": "1.0", "truncation": None, "padding": None,
      "added_tokens": [{"id": 4, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False,
                        "normalized": False, "special": True}],
      "normalizer": {"type": "NFC"},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
          {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
          {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
      "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}}], "pair": [],
                         "special_tokens": {"<s>": {"id": "<s>", "ids": [4], "tokens": ["<s>"]}}},
      "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
      "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                "vocab": {"H": 0, "i": 1, "Hi": 2, "Ġ": 3}, "merges": ["H i"]}}
put("tokenizer_json", "small.json", json.dumps(tj))
lines = fixture("tokenizer/tiktoken/cl100k/tiktoken.model").split(b"\n")
put("tiktoken", "head.model", b"\n".join(lines[:300]) + b"\n")
put("tiktoken", "tail.model", b"\n".join(lines[-50:]))
cases = [l for l in fixture("tokenizer/deepseek_v3/cases.jsonl").split(b"\n") if l.strip()]
for i, line in enumerate(cases[::max(1, len(cases) // 12)][:12]):
    if True:
        text = json.loads(line).get("text", "")
        put("tok_encode", "case%02d" % i, bytes([i & 7]) + text.encode("utf-8", "surrogatepass")[:2048])
put("tok_encode", "ids", bytes([8]) + b"".join(struct.pack("<i", v) for v in [0, 1, 100, 128000, -1, 2**31 - 1]))

# ---- chat templates --------------------------------------------------------
cfg = json.loads(fixture("tokenizer/deepseek_v3/tokenizer_config.json"))
put("template", "deepseek_v3.jinja", cfg["chat_template"])
put("template", "kimi_k2.jinja", fixture("tokenizer/kimi_k2/chat_template_k2_instruct.jinja"))
put("template", "loops.jinja", "{% for m in messages %}{% if loop.first %}{{ bos_token }}{% endif %}"
    "{{ m.role | upper }}: {{ m.content | trim }}{% set ns = namespace(x=1) %}{% endfor %}"
    "{{ tools | tojson }}{% if add_generation_prompt %}A:{% endif %}\0"
    "[{\"role\":\"user\",\"content\":\"hey\"}]")

# ---- server bodies ---------------------------------------------------------
put("server_body", "chat", b"\0" + json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 4, "temperature": 0.5, "stop": ["x"], "stream": True,
    "stream_options": {"include_usage": True}, "logprobs": True, "top_logprobs": 2}).encode())
put("server_body", "completion", b"\1" + json.dumps({"prompt": [1, 2, 3], "max_tokens": 2, "top_p": 0.9,
    "seed": 7, "stop": "y", "n": 1, "min_p": 0.1, "top_k": 5}).encode())
put("server_body", "completion-text", b"\1" + json.dumps({"prompt": "hello", "echo": False}).encode())

# ---- usage and state files -------------------------------------------------
put("usage", "ok", "petrel-usage 1 3 8\n" + "".join(" ".join(str(b * 8 + e) for e in range(8)) + "\n"
                                                    for b in range(3)))
put("usage", "other-shape", "petrel-usage 1 2 4\n1 2 3 4\n5 6 7 8\n")
toks = b"".join(struct.pack("<i", t) for t in [1, 2, 3, 4])
frame = subprocess.run(["zstd", "-q", "-c", "--check"], input=toks, capture_output=True, check=True).stdout
hdr = b"PETRELKV" + struct.pack("<IIQIIiiIIQQQ", 2, 80, 0, 2, 8, 4, 0, 16, 0, len(toks), len(frame), 0)
put("state", "tokens", hdr + b"\0" * 8 + frame)  # fuzz_state writes the header hash
