# tools/train/model.py — the DeepSeek-V3 architecture as a plain PyTorch module
# (CPU, float32), written from the formulas of the DeepSeek-V3 reference
# inference code (deepseek-ai/DeepSeek-V3 inference/model.py) and of vLLM's
# MTP layer, with the Hugging Face checkpoint's tensor names.
#
# Semantics that Petrel must agree with (validated in validate_golden.py
# against ../shared/fixtures/tiny-dsv3/golden):
#   - MLA with q/kv LoRA; RoPE on the raw checkpoint weights, INTERLEAVED
#     (pairs (2i, 2i+1) rotate together), YaRN frequencies and softmax mscale
#     when max_position_embeddings > original_max_position_embeddings;
#   - sigmoid router, selection on score + e_score_correction_bias, group
#     limited (group score = sum of the top-2 biased scores), weights = the
#     unbiased scores of the chosen experts / their sum x routed_scaling_factor;
#   - one shared expert; the first first_k_dense_replace layers dense;
#   - MTP layer (index num_hidden_layers): h = model.norm(main hidden),
#     e = embed(next token) zeroed at position 0, x = eh_proj(cat(enorm(e),
#     hnorm(h))), one MoE decoder block, shared_head.norm, shared_head.head.
# Training additions: the auxiliary-loss-free bias update (update_bias) and the
# MTP loss (loss()).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Cfg:
    """Hyper-parameters, read from an HF DeepSeek-V3 config.json dict."""

    def __init__(self, d):
        self.vocab = d["vocab_size"]
        self.dim = d["hidden_size"]
        self.inter = d["intermediate_size"]
        self.moe_inter = d["moe_intermediate_size"]
        self.n_layers = d["num_hidden_layers"]
        self.n_dense = d["first_k_dense_replace"]
        self.n_heads = d["num_attention_heads"]
        self.n_routed = d["n_routed_experts"]
        self.n_shared = d["n_shared_experts"]
        self.topk = d["num_experts_per_tok"]
        self.n_group = d["n_group"]
        self.topk_group = d["topk_group"]
        self.route_scale = d["routed_scaling_factor"]
        self.norm_topk = d.get("norm_topk_prob", True)
        self.q_lora = d["q_lora_rank"]
        self.kv_lora = d["kv_lora_rank"]
        self.nope = d["qk_nope_head_dim"]
        self.rope = d["qk_rope_head_dim"]
        self.vdim = d["v_head_dim"]
        self.eps = d.get("rms_norm_eps", 1e-6)
        self.theta = d.get("rope_theta", 10000.0)
        self.max_pos = d["max_position_embeddings"]
        self.n_mtp = d.get("num_nextn_predict_layers", 0)
        rs = d.get("rope_scaling") or {}
        self.yarn = rs.get("type", rs.get("rope_type")) == "yarn"
        self.factor = rs.get("factor", 1.0)
        self.orig_max = rs.get("original_max_position_embeddings", self.max_pos)
        self.beta_fast = rs.get("beta_fast", 32)
        self.beta_slow = rs.get("beta_slow", 1)
        self.mscale = rs.get("mscale", 1.0)


def rope_freqs(c):
    """Complex RoPE rotations [max_pos, rope/2] (reference precompute_freqs_cis)."""
    dim, base = c.rope, c.theta
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    if c.yarn and c.max_pos > c.orig_max:

        def corr_dim(rot):
            return dim * math.log(c.orig_max / (rot * 2 * math.pi)) / (2 * math.log(base))

        low = max(math.floor(corr_dim(c.beta_fast)), 0)
        high = min(math.ceil(corr_dim(c.beta_slow)), dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        smooth = 1 - ramp
        freqs = freqs / c.factor * (1 - smooth) + freqs * smooth
    t = torch.arange(c.max_pos, dtype=torch.float32)
    f = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(f), f)


def apply_rope(x, fc):
    """x [..., s, h, rope] interleaved pairs; fc [s, rope/2] complex."""
    dt = x.dtype
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    fc = fc.view(1, xc.size(1), 1, xc.size(-1))
    return torch.view_as_real(xc * fc).flatten(3).to(dt)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def linear(i, o):
    return nn.Linear(i, o, bias=False)


class MLA(nn.Module):
    """Multi-head latent attention, naive (un-absorbed) form, causal."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        qk = c.nope + c.rope
        self.q_a_proj = linear(c.dim, c.q_lora)
        self.q_a_layernorm = RMSNorm(c.q_lora, c.eps)
        self.q_b_proj = linear(c.q_lora, c.n_heads * qk)
        self.kv_a_proj_with_mqa = linear(c.dim, c.kv_lora + c.rope)
        self.kv_a_layernorm = RMSNorm(c.kv_lora, c.eps)
        self.kv_b_proj = linear(c.kv_lora, c.n_heads * (c.nope + c.vdim))
        self.o_proj = linear(c.n_heads * c.vdim, c.dim)
        self.scale = qk ** -0.5
        if c.yarn and c.max_pos > c.orig_max and c.factor > 1:
            m = 0.1 * c.mscale * math.log(c.factor) + 1.0
            self.scale = self.scale * m * m

    def forward(self, x, fc):
        c = self.c
        b, s, _ = x.shape
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))).view(b, s, c.n_heads, c.nope + c.rope)
        q_nope, q_pe = q.split([c.nope, c.rope], -1)
        q_pe = apply_rope(q_pe, fc)
        kv = self.kv_a_proj_with_mqa(x)
        kv, k_pe = kv.split([c.kv_lora, c.rope], -1)
        k_pe = apply_rope(k_pe.unsqueeze(2), fc)
        kv = self.kv_b_proj(self.kv_a_layernorm(kv)).view(b, s, c.n_heads, c.nope + c.vdim)
        k_nope, v = kv.split([c.nope, c.vdim], -1)
        q = torch.cat([q_nope, q_pe], -1).transpose(1, 2)  # b h s d
        k = torch.cat([k_nope, k_pe.expand(-1, -1, c.n_heads, -1)], -1).transpose(1, 2)
        v = v.transpose(1, 2)
        att = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        mask = torch.full((s, s), float("-inf")).triu_(1)
        att = torch.softmax(att + mask, dim=-1)
        o = torch.matmul(att, v).transpose(1, 2).reshape(b, s, -1)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, dim, inter):
        super().__init__()
        self.gate_proj = linear(dim, inter)
        self.up_proj = linear(dim, inter)
        self.down_proj = linear(inter, dim)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Gate(nn.Module):
    """Sigmoid router with selection bias and group-limited top-k."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.weight = nn.Parameter(torch.empty(c.n_routed, c.dim))
        self.register_buffer("e_score_correction_bias", torch.zeros(c.n_routed))

    def forward(self, x):
        """x [T, dim] -> weights [T, k], ids [T, k] (ids ascending)."""
        c = self.c
        scores = torch.sigmoid(F.linear(x, self.weight))
        orig = scores
        s = (scores + self.e_score_correction_bias).detach()
        if c.n_group > 1:
            g = s.view(x.size(0), c.n_group, -1)
            gs = g.topk(2, dim=-1)[0].sum(-1)
            gi = gs.topk(c.topk_group, dim=-1)[1]
            mask = torch.ones(x.size(0), c.n_group, dtype=torch.bool).scatter_(1, gi, False)
            s = g.masked_fill(mask.unsqueeze(-1), float("-inf")).flatten(1)
        ids = s.topk(c.topk, dim=-1)[1]
        ids = ids.sort(dim=-1)[0]
        w = orig.gather(1, ids)
        if c.norm_topk:
            w = w / w.sum(-1, keepdim=True)
        return w * c.route_scale, ids


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.gate = Gate(c)
        self.experts = nn.ModuleList([MLP(c.dim, c.moe_inter) for _ in range(c.n_routed)])
        self.shared_experts = MLP(c.dim, c.n_shared * c.moe_inter)
        self.last_ids = None  # [T, k] routing of the last forward (for traces and the bias update)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        w, ids = self.gate(x)
        self.last_ids = ids
        y = torch.zeros_like(x)
        flat = ids.flatten()
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=self.c.n_routed).tolist()
        tok = order // self.c.topk
        wf = w.flatten()[order]
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            t = tok[start:start + n]
            out = self.experts[e](x[t]) * wf[start:start + n, None]
            y.index_add_(0, t, out)
            start += n
        y = y + self.shared_experts(x)
        return y.view(shape)


class Block(nn.Module):
    def __init__(self, c, layer):
        super().__init__()
        self.self_attn = MLA(c)
        self.mlp = MLP(c.dim, c.inter) if layer < c.n_dense else MoE(c)
        self.input_layernorm = RMSNorm(c.dim, c.eps)
        self.post_attention_layernorm = RMSNorm(c.dim, c.eps)

    def forward(self, x, fc):
        x = x + self.self_attn(self.input_layernorm(x), fc)
        return x + self.mlp(self.post_attention_layernorm(x))


class MTPLayer(Block):
    """The MTP module: a MoE block plus enorm/hnorm/eh_proj/shared_head.norm.
    The embedding and head are the main model's (shared, as in DeepSeek-V3)."""

    def __init__(self, c):
        super().__init__(c, c.n_layers)
        self.enorm = RMSNorm(c.dim, c.eps)
        self.hnorm = RMSNorm(c.dim, c.eps)
        self.eh_proj = linear(2 * c.dim, c.dim)
        self.shared_head_norm = RMSNorm(c.dim, c.eps)


class DeepseekV3(nn.Module):
    def __init__(self, cfg_dict):
        super().__init__()
        c = self.c = Cfg(cfg_dict)
        self.embed_tokens = nn.Embedding(c.vocab, c.dim)
        self.layers = nn.ModuleList([Block(c, i) for i in range(c.n_layers)])
        self.norm = RMSNorm(c.dim, c.eps)
        self.lm_head = linear(c.dim, c.vocab)
        self.mtp = MTPLayer(c) if c.n_mtp else None
        self.register_buffer("freqs", rope_freqs(c), persistent=False)

    def moe_layers(self):
        """(layer index, MoE) for the main MoE blocks and the MTP block."""
        out = [(i, l.mlp) for i, l in enumerate(self.layers) if isinstance(l.mlp, MoE)]
        if self.mtp is not None:
            out.append((self.c.n_layers, self.mtp.mlp))
        return out

    def forward(self, tok):
        """tok [b, s] -> (logits [b, s, V], hidden after model.norm [b, s, dim],
        hidden before it)."""
        s = tok.size(1)
        fc = self.freqs[:s]
        h = self.embed_tokens(tok)
        for l in self.layers:
            h = l(h, fc)
        hn = self.norm(h)
        return self.lm_head(hn), hn, h

    def forward_mtp(self, hn, nxt):
        """hn [b, s, dim] main hidden after model.norm at positions 0..s-1,
        nxt [b, s] the token at position t+1 -> MTP logits [b, s, V] (row t
        predicts the token at t+2). vLLM semantics: embedding zeroed at
        position 0, cat(enorm(e), hnorm(h))."""
        m = self.mtp
        e = self.embed_tokens(nxt)
        e = torch.cat([torch.zeros_like(e[:, :1]), e[:, 1:]], 1)
        x = m.eh_proj(torch.cat([m.enorm(e), m.hnorm(hn)], -1))
        x = m(x, self.freqs[:x.size(1)])
        return self.lm_head(m.shared_head_norm(x))

    def loss(self, tok, mtp_weight):
        """tok [b, s+2]: next-token CE on positions 0..s-1 plus mtp_weight x the
        MTP CE (row t predicts t+2). Returns (total, main CE, MTP CE)."""
        inp = tok[:, :-2]
        logits, hn, _ = self(inp)
        main = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tok[:, 1:-1].reshape(-1))
        if self.mtp is None or mtp_weight == 0:
            return main, main, torch.zeros(())
        ml = self.forward_mtp(hn, tok[:, 1:-1])
        mtp = F.cross_entropy(ml.reshape(-1, ml.size(-1)), tok[:, 2:].reshape(-1))
        return main + mtp_weight * mtp, main, mtp

    @torch.no_grad()
    def update_bias(self, gamma):
        """Auxiliary-loss-free balancing (DeepSeek-V3 paper, sec. 2.1.2): after
        a step, raise the bias of under-loaded experts and lower that of
        over-loaded ones by gamma, from the routing of the last forward."""
        for _, moe in self.moe_layers():
            if moe.last_ids is None:
                continue
            load = torch.bincount(moe.last_ids.flatten(), minlength=self.c.n_routed).float()
            moe.gate.e_score_correction_bias += gamma * torch.sign(load.mean() - load)


# ---- HF names ---------------------------------------------------------------

def hf_state(model):
    """The module's tensors under the HF DeepSeek-V3 checkpoint names (MTP
    layer as model.layers.{n_layers}.*, with copies of embed/head)."""
    c = model.c
    out = {"model.embed_tokens.weight": model.embed_tokens.weight, "model.norm.weight": model.norm.weight,
           "lm_head.weight": model.lm_head.weight}
    for i, l in enumerate(model.layers):
        for k, v in l.state_dict(keep_vars=True).items():
            out[f"model.layers.{i}.{k}"] = v
    if model.mtp is not None:
        n = c.n_layers
        for k, v in model.mtp.state_dict(keep_vars=True).items():
            if k.startswith("shared_head_norm."):
                k = "shared_head.norm." + k[len("shared_head_norm."):]
            out[f"model.layers.{n}.{k}"] = v
        out[f"model.layers.{n}.embed_tokens.weight"] = model.embed_tokens.weight
        out[f"model.layers.{n}.shared_head.head.weight"] = model.lm_head.weight
    return out


def load_hf(model, tensors):
    """Loads float32 tensors by HF name (embed/head copies of the MTP layer
    must equal the main ones: this module shares them)."""
    tgt = hf_state(model)
    missing = set(tgt) - set(tensors)
    assert not missing, f"missing tensors: {sorted(missing)[:5]}"
    with torch.no_grad():
        for k, v in tgt.items():
            src = torch.as_tensor(tensors[k], dtype=torch.float32)
            assert tuple(src.shape) == tuple(v.shape), f"{k}: {tuple(src.shape)} vs {tuple(v.shape)}"
            v.copy_(src)
