# tools/train/train.py — trains model.py's DeepSeek-V3 on the corpus
# (deterministic from --seed: fixed step count, seeded init and batches, 2
# threads). Next-token loss + 0.3 x MTP loss, AdamW, warm-up then cosine
# decay, auxiliary-loss-free router bias update after every step. Logs the
# train and held-out loss curve (JSON lines) beside the checkpoint and the
# unigram baseline on the held-out set; checkpoints every --ckpt-min minutes
# (temp + fsync + rename) and resumes from one.
# Usage: python3 tools/train/train.py --work DIR --steps N [--seed S]
#   DIR must hold train.txt, heldout.txt, tokenizer.json (see README.md).
import argparse
import json
import math
import os
import sys
import time

# One BLAS thread inside torch's own intra-op threads, and passive OpenMP
# waits: on a shared, oversubscribed 2-core machine nested/spinning threads
# made a step 10x slower (measured).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import model as M  # noqa: E402

BOS, EOS = 0, 1


def encode_docs(enc, path):
    """Documents (blank-line separated) -> one int32 stream: bos doc eos ..."""
    out = []
    for d in open(path).read().split("\n\n"):
        d = d.strip("\n")
        if d:
            out.extend([BOS] + enc.encode(d) + [EOS])
    return np.array(out, np.int64)


def unigram_nats(train, held, vocab):
    """Held-out cross-entropy (nats/token) of the add-one unigram model."""
    c = np.bincount(train, minlength=vocab).astype(np.float64) + 1
    p = c / c.sum()
    return float(-np.log(p[held]).mean())


def init_weights(net, seed):
    g = torch.Generator().manual_seed(seed)
    for name, p in net.named_parameters():
        if name.endswith("layernorm.weight") or "norm" in name.split(".")[-2]:
            continue
        if p.dim() == 2:
            std = 0.02 if "embed" in name else 1.0 / math.sqrt(p.shape[1])
            if name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                std /= math.sqrt(2 * (net.c.n_layers + 1))
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g) * std)


def save(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@torch.no_grad()
def evaluate(net, held, seq, n):
    """Mean main / MTP loss over n fixed held-out windows (evenly spaced)."""
    net.eval()
    starts = np.linspace(0, len(held) - seq - 3, n).astype(np.int64)
    b = torch.from_numpy(np.stack([held[s:s + seq + 2] for s in starts]))
    _, main, mtp = net.loss(b, 0.3)
    net.train()
    return float(main), float(mtp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--stop-at", type=int, default=None,
                    help="stop (and checkpoint) after this step; the schedule still spans --steps")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--bias-gamma", type=float, default=1e-3)
    ap.add_argument("--ckpt-min", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.json"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    cfg = json.load(open(a.config))
    enc = bpe.Encoder(os.path.join(a.work, "tokenizer.json"))
    train = encode_docs(enc, os.path.join(a.work, "train.txt"))
    held = encode_docs(enc, os.path.join(a.work, "heldout.txt"))
    uni = unigram_nats(train, held, cfg["vocab_size"])
    net = M.DeepseekV3(cfg)
    init_weights(net, a.seed)
    nparam = sum(p.numel() for p in net.parameters())
    opt = torch.optim.AdamW(net.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)
    ck = os.path.join(a.work, "ckpt.pt")
    logp = os.path.join(a.work, "log.jsonl")
    step = 0
    if os.path.exists(ck):
        s = torch.load(ck)
        net.load_state_dict(s["model"])
        opt.load_state_dict(s["opt"])
        step = s["step"]
        print(f"resumed at step {step}")
    else:
        with open(logp, "w") as f:
            f.write(json.dumps({"params": nparam, "train_tokens": int(len(train)), "heldout_tokens": int(len(held)),
                                "unigram_heldout_nats": uni, "args": vars(a)}) + "\n")
    print(f"params {nparam}, train tokens {len(train)}, held-out tokens {len(held)}, unigram held-out {uni:.4f} nats")
    rng = np.random.default_rng(a.seed)
    # batches are a pure function of (seed, step): resumable and deterministic
    all_starts = rng.integers(0, len(train) - a.seq - 3, size=(a.steps, a.batch))
    t0 = time.time()
    last_ck = t0
    net.train()
    stop = a.stop_at or a.steps
    while step < stop:
        lr = a.lr * min(1.0, (step + 1) / a.warmup)
        if step >= a.warmup:
            frac = (step - a.warmup) / max(1, a.steps - a.warmup)
            lr = a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for gp in opt.param_groups:
            gp["lr"] = lr
        b = torch.from_numpy(np.stack([train[s:s + a.seq + 2] for s in all_starts[step]]))
        loss, main_l, mtp_l = net.loss(b, a.mtp_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        net.update_bias(a.bias_gamma)
        step += 1
        rec = None
        if step % 10 == 0:
            rec = {"step": step, "lr": lr, "train_main": float(main_l), "train_mtp": float(mtp_l),
                   "elapsed_s": round(time.time() - t0, 1)}
        if step % a.eval_every == 0 or step == stop:
            vm, vt = evaluate(net, held, a.seq, 16)
            rec = rec or {"step": step}
            rec.update({"val_main": vm, "val_mtp": vt})
            print(json.dumps(rec), flush=True)
        if rec:
            with open(logp, "a") as f:
                f.write(json.dumps(rec) + "\n")
        if time.time() - last_ck > a.ckpt_min * 60 or step == stop:
            save(ck, {"model": net.state_dict(), "opt": opt.state_dict(), "step": step, "config": cfg})
            last_ck = time.time()
    print(f"done: {step} steps in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
