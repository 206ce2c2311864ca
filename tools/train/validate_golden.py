# tools/train/validate_golden.py — loads the shared tiny-dsv3 checkpoint
# (FP8 dequantised by st.py) into model.py's module and compares with the
# golden outputs of the DeepSeek-V3 reference implementation: logits per
# position, router ids per MoE layer, MTP logits. Proves that this module,
# the reference and therefore Petrel agree on layout, RoPE, YaRN, routing
# and MTP semantics before it is trained and used as an oracle.
# Usage: python3 tools/train/validate_golden.py [FIXTURE_DIR]
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as M  # noqa: E402
import st  # noqa: E402


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "tests", "fixtures", "tiny-dsv3")
    cfg = json.load(open(os.path.join(d, "config.json")))
    net = M.DeepseekV3(cfg)
    M.load_hf(net, st.read_dir_f32(d))
    net.eval()
    man = json.load(open(os.path.join(d, "golden", "manifest.json")))
    g = lambda n, dt: np.fromfile(os.path.join(d, "golden", n), dt)  # noqa: E731
    worst = {"logits": 0.0, "mtp": 0.0}
    ok = True
    with torch.no_grad():
        for case in man["cases"]:
            k, n, toks = case["case"], case["n"], case["tokens"]
            t = torch.tensor([toks])
            logits, hn, _ = net(t)
            ref = g(f"case{k}_logits.f32.bin", np.float32).reshape(n, -1)
            dl = float(np.abs(logits[0].numpy() - ref).max())
            worst["logits"] = max(worst["logits"], dl)
            ids = np.stack([moe.last_ids.numpy() for _, moe in net.moe_layers()[:-1]])
            rid = g(f"case{k}_router_ids.i32.bin", np.int32).reshape(ids.shape)
            same = bool((ids == rid).all())
            ok &= same and dl < 1e-3
            msg = f"case {k} n={n}: logits max abs diff {dl:.3g}, router ids {'identical' if same else 'DIFFER'}"
            if n > 1:
                ml = net.forward_mtp(hn[:, :-1], t[:, 1:])
                mref = g(f"case{k}_mtp_logits.f32.bin", np.float32).reshape(n - 1, -1)
                dm = float(np.abs(ml[0].numpy() - mref).max())
                worst["mtp"] = max(worst["mtp"], dm)
                mid = net.mtp.mlp.last_ids.numpy()
                mrid = g(f"case{k}_mtp_router_ids.i32.bin", np.int32).reshape(mid.shape)
                msame = bool((mid == mrid).all())
                ok &= msame and dm < 1e-3
                msg += f"; MTP logits {dm:.3g}, MTP router ids {'identical' if msame else 'DIFFER'}"
            print(msg)
    print(f"worst: logits {worst['logits']:.3g}, MTP {worst['mtp']:.3g} -> {'PASS' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
