# tools/train/export.py — writes a trained checkpoint as a Hugging Face
# DeepSeek-V3 FP8 checkpoint folder (the layout of the real release and of
# tests/fixtures/tiny-dsv3) plus reference outputs of model.py's module on the
# FP8-dequantised weights, in float32.
#
# Output folder: config.json, model.safetensors, tokenizer.json,
# tokenizer_config.json, heldout.txt, refs/ (manifest.json + raw LE .bin
# files, see the manifest), export_stats.json.
# Dtypes as in the release: attention / dense / expert / shared-expert
# projections F8_E4M3 with F32 weight_scale_inv per 128x128 block; embeddings,
# lm_head, norms, router gate, eh_proj BF16; e_score_correction_bias F32; the
# MTP layer's embed_tokens / shared_head.head are copies of the main ones.
# Usage: python3 tools/train/export.py --work DIR --out tests/fixtures/trained
import argparse
import json
import os
import re
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import model as M  # noqa: E402
import st  # noqa: E402
from train import encode_docs  # noqa: E402

FP8_RE = re.compile(r"\.(self_attn\.(q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj|o_proj)|"
                    r"mlp\.(experts\.\d+\.|shared_experts\.)?(gate_proj|up_proj|down_proj))\.weight$")

CHAT_TEMPLATE = ("{{ bos_token }}{% for message in messages %}"
                 "{% if message['role'] == 'user' %}<|user|>{{ message['content'] }}\n"
                 "{% elif message['role'] == 'assistant' %}<|assistant|>{{ message['content'] }}{{ eos_token }}"
                 "{% else %}{{ message['content'] }}\n{% endif %}{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def write_checkpoint(net, out):
    tensors = {}
    for name, p in M.hf_state(net).items():
        w = p.detach().float().numpy()
        if FP8_RE.search(name):
            codes, scale = st.quant_block_fp8(w)
            tensors[name] = ("F8_E4M3", codes)
            tensors[name + "_scale_inv"] = ("F32", scale)
        elif name.endswith("e_score_correction_bias"):
            tensors[name] = ("F32", w.astype(np.float32))
        else:
            tensors[name] = ("BF16", st.bf16_encode(w))
    st.write(os.path.join(out, "model.safetensors"), dict(sorted(tensors.items())), {"format": "pt"})
    return tensors


def dump(refs, name, arr, what, man):
    arr = np.ascontiguousarray(arr)
    arr.tofile(os.path.join(refs, name))
    man["files"][name] = {"what": what, "dtype": str(arr.dtype), "shape": list(arr.shape)}


@torch.no_grad()
def greedy(net, prefix, n):
    """Greedy continuation by full recomputation; returns (tokens, margins
    top1 - top2 of each step's logits)."""
    toks, margins = list(prefix), []
    for _ in range(n):
        lg = net(torch.tensor([toks]))[0][0, -1]
        v, i = lg.topk(2)
        margins.append(float(v[0] - v[1]))
        toks.append(int(i[0]))
    return toks[len(prefix):], margins


@torch.no_grad()
def heldout_eval(net, held, seq, windows, unigram):
    """Over the whole held-out stream in non-overlapping windows of seq+2
    tokens: mean main CE, MTP CE (nats/token), top-1 accuracy of both, and
    the greedy MTP acceptance (MTP argmax at row t == the main model's
    argmax at position t+1, what --spec verifies)."""
    n = min(windows, (len(held) - 2) // seq)
    uni = 0.0
    rep, rep_n = np.zeros(len(net.moe_layers())), 0
    tot = {"tokens": 0, "main_nats": 0.0, "mtp_nats": 0.0, "main_top1": 0, "mtp_top1": 0, "mtp_accept": 0}
    for s0 in np.linspace(0, len(held) - seq - 3, n).astype(np.int64):  # evenly spaced windows
        t = torch.from_numpy(held[s0:s0 + seq + 2][None].astype(np.int64))
        lg, hn, _ = net(t[:, :-1])  # positions 0..seq
        ml = net.forward_mtp(hn[:, :-1], t[:, 1:-1])  # rows 0..seq-1 predict t+2
        tgt, tgt2 = t[0, 1:-1], t[0, 2:]
        main = lg[0, :-1]
        tot["tokens"] += seq
        uni += float(-np.log(unigram[tgt.numpy()]).sum())
        tot["main_nats"] += float(torch.nn.functional.cross_entropy(main, tgt, reduction="sum"))
        tot["mtp_nats"] += float(torch.nn.functional.cross_entropy(ml[0], tgt2, reduction="sum"))
        tot["main_top1"] += int((main.argmax(-1) == tgt).sum())
        tot["mtp_top1"] += int((ml[0].argmax(-1) == tgt2).sum())
        tot["mtp_accept"] += int((ml[0].argmax(-1) == lg[0, 1:].argmax(-1)).sum())
        # routing locality: share of token t's experts also chosen at t-1
        for j, (_, moe) in enumerate(net.moe_layers()[:-1]):
            ids = moe.last_ids.numpy()
            same = (ids[1:, :, None] == ids[:-1, None, :]).any(-1).mean()
            rep[j] += same * (len(ids) - 1)
        rep_n += seq
    k = tot["tokens"]
    return {"tokens": k, "unigram_nats": uni / k, "main_nats": tot["main_nats"] / k, "mtp_nats": tot["mtp_nats"] / k,
            "main_top1": tot["main_top1"] / k, "mtp_top1": tot["mtp_top1"] / k,
            "mtp_greedy_accept": tot["mtp_accept"] / k,
            "expert_repeat_next_token_per_moe_layer": [float(x) / rep_n for x in rep[:-1]]}


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--eval-windows", type=int, default=48, help="held-out windows of 256 tokens to evaluate")
    a = ap.parse_args()
    torch.set_num_threads(2)
    here = os.path.dirname(os.path.abspath(__file__))
    ck = torch.load(a.ckpt or os.path.join(a.work, "ckpt.pt"))
    cfg = ck["config"]
    net = M.DeepseekV3(cfg)
    net.load_state_dict(ck["model"])
    os.makedirs(os.path.join(a.out, "refs"), exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        f.write(json.dumps(cfg, indent=2) + "\n")
    write_checkpoint(net, a.out)
    shutil.copyfile(os.path.join(a.work, "tokenizer.json"), os.path.join(a.out, "tokenizer.json"))
    shutil.copyfile(os.path.join(a.work, "heldout.txt"), os.path.join(a.out, "heldout.txt"))
    with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": False, "add_eos_token": False, "bos_token": "<|bos|>", "eos_token": "<|eos|>",
                   "model_max_length": cfg["max_position_embeddings"], "tokenizer_class": "PreTrainedTokenizerFast",
                   "chat_template": CHAT_TEMPLATE}, f, indent=2)
        f.write("\n")

    # the oracle: a fresh module on what was written (FP8 / BF16 dequantised)
    ref = M.DeepseekV3(cfg)
    M.load_hf(ref, st.read_dir_f32(a.out))
    ref.eval()
    enc = bpe.Encoder(os.path.join(a.work, "tokenizer.json"))
    held = encode_docs(enc, os.path.join(a.work, "heldout.txt"))
    docs = np.split(held, np.nonzero(held == 0)[0][1:])  # each starts with bos
    refs = os.path.join(a.out, "refs")
    man = {"config": "../config.json", "oracle": "tools/train/model.py on the FP8/BF16-dequantised weights, float32, "
           "full causal attention (no cache)", "moe_layer_ids": [i for i, _ in ref.moe_layers()[:-1]],
           "mtp_layer_id": cfg["num_hidden_layers"], "cases": [], "files": {}}
    lens = [8, 24, 64]
    for k, n in enumerate(lens):
        toks = docs[1 + 2 * k][:n]
        t = torch.from_numpy(toks[None].astype(np.int64))
        logits, hn, _ = ref(t)
        dump(refs, f"case{k}_tokens.i32.bin", toks.astype(np.int32), "token ids", man)
        dump(refs, f"case{k}_logits.f32.bin", logits[0].numpy(), "logits per position [n, vocab]", man)
        ids = np.stack([m.last_ids.numpy() for _, m in ref.moe_layers()[:-1]]).astype(np.int32)
        dump(refs, f"case{k}_router_ids.i32.bin", ids, "selected experts [moe layer, n, top_k], ascending", man)
        ml = ref.forward_mtp(hn[:, :-1], t[:, 1:])
        dump(refs, f"case{k}_mtp_logits.f32.bin", ml[0].numpy(),
             "MTP logits [n-1, vocab], row t predicts token t+2 (vLLM semantics, see model.py)", man)
        dump(refs, f"case{k}_mtp_router_ids.i32.bin", ref.mtp.mlp.last_ids.numpy().astype(np.int32),
             "MTP block's selected experts [n-1, top_k]", man)
        man["cases"].append({"case": k, "n": n, "tokens": toks.tolist()})

    # greedy continuation of a held-out prefix: the prefix (of 8 candidates)
    # whose smallest top1-top2 margin is largest, so f32 engines reproduce it
    best = None
    for d in docs[20:28]:
        prefix = d[:12].tolist()
        out, margins = greedy(ref, prefix, 24)
        if best is None or min(margins) > best[2]:
            best = (prefix, out, min(margins))
    prefix, out, mm = best
    dump(refs, "greedy_prefix.i32.bin", np.array(prefix, np.int32), "greedy prefix token ids", man)
    dump(refs, "greedy_tokens.i32.bin", np.array(out, np.int32), "greedy continuation (24 tokens)", man)
    man["greedy"] = {"prefix": prefix, "tokens": out, "min_margin": mm, "prefix_text": enc.decode(prefix),
                     "text": enc.decode(out)}
    with open(os.path.join(refs, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1)
        f.write("\n")
    tr = encode_docs(enc, os.path.join(a.work, "train.txt"))
    c = np.bincount(tr, minlength=cfg["vocab_size"]).astype(np.float64) + 1
    ev = heldout_eval(ref, held, 256, a.eval_windows, c / c.sum())
    sizes = {fn: os.path.getsize(os.path.join(a.out, fn)) for fn in os.listdir(a.out) if fn != "refs"}
    stats = {"step": ck["step"], "params": sum(p.numel() for p in net.parameters()), "bytes": sizes,
             "greedy_text": enc.decode(prefix) + "|" + enc.decode(out), "greedy_min_margin": mm, "heldout_eval": ev}
    with open(os.path.join(a.out, "export_stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
        f.write("\n")
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
