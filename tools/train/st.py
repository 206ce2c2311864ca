# tools/train/st.py — safetensors read/write by hand, FP8 E4M3FN and BF16
# encoding in numpy (Debian 12's torch 1.13 has no float8 dtype).
#
# FP8 E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities,
# S.1111.111 is NaN, largest finite 448. Encoding rounds to nearest, ties to
# even, and saturates to +-448 (as the DeepSeek-V3 release's quantiser does).
# Block FP8 weight: w[i, j] = fp8[i, j] * scale_inv[i // 128, j // 128], with
# scale_inv = amax(block) / 448.
import json
import os

import numpy as np


def fp8_table():
    """float32 value of each of the 256 E4M3FN codes (NaN for 0x7F / 0xFF)."""
    t = np.zeros(256, np.float32)
    for c in range(256):
        s = -1.0 if c & 0x80 else 1.0
        e = (c >> 3) & 0xF
        m = c & 7
        if e == 15 and m == 7:
            t[c] = np.nan
        elif e == 0:
            t[c] = s * (m / 8.0) * 2.0 ** -6
        else:
            t[c] = s * (1 + m / 8.0) * 2.0 ** (e - 7)
    return t


_TAB = fp8_table()
_POS = _TAB[:127].astype(np.float64)  # codes 0..126: monotone, 0 .. 448


def fp8_encode(x):
    """float array -> uint8 E4M3FN codes, nearest-even, saturating."""
    x = np.asarray(x, np.float64)
    a = np.minimum(np.abs(x), 448.0)
    hi = np.searchsorted(_POS, a, side="left").clip(0, 126)  # first code >= a
    lo = np.maximum(hi - 1, 0)
    dlo = a - _POS[lo]
    dhi = _POS[hi] - a
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo).astype(np.uint8)
    code = np.where(a == _POS[hi], hi, code).astype(np.uint8)
    return code | np.where(np.signbit(x) & (code != 0), 0x80, 0).astype(np.uint8)


def fp8_decode(c):
    return _TAB[np.asarray(c, np.uint8)]


def bf16_encode(x):
    """float32 -> uint16 bf16 bits, round to nearest even."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return r.astype(np.uint16)


def bf16_decode(b):
    return (np.asarray(b, np.uint16).astype(np.uint32) << 16).view(np.float32)


def quant_block_fp8(w, block=128):
    """w [out, in] float32 -> (fp8 codes [out, in] uint8, scale_inv f32 [ceil(out/128), ceil(in/128)])."""
    o, i = w.shape
    bo, bi = -(-o // block), -(-i // block)
    scale = np.ones((bo, bi), np.float32)
    codes = np.zeros((o, i), np.uint8)
    for r in range(bo):
        for c in range(bi):
            blk = w[r * block:(r + 1) * block, c * block:(c + 1) * block]
            amax = float(np.abs(blk).max())
            s = np.float32(amax / 448.0) if amax > 0 else np.float32(1.0)
            scale[r, c] = s
            codes[r * block:(r + 1) * block, c * block:(c + 1) * block] = fp8_encode(blk / np.float64(s))
    return codes, scale


def dequant_block_fp8(codes, scale, block=128):
    s = np.repeat(np.repeat(scale, block, 0), block, 1)[:codes.shape[0], :codes.shape[1]]
    return (fp8_decode(codes) * s).astype(np.float32)


_DT = {"F8_E4M3": np.uint8, "BF16": np.uint16, "F32": np.float32, "I32": np.int32, "F16": np.float16}


def read(path):
    """safetensors file -> {name: (dtype string, numpy array of raw values)}."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = (v["dtype"], np.frombuffer(data[a:b], _DT[v["dtype"]]).reshape(v["shape"]))
    return out


def to_f32(dtype, arr):
    if dtype == "BF16":
        return bf16_decode(arr)
    if dtype == "F8_E4M3":
        return fp8_decode(arr)
    return np.asarray(arr, np.float32)


def read_dir_f32(d):
    """All tensors of an HF checkpoint folder dequantised to float32 (FP8 x
    its 128x128 weight_scale_inv), keyed by name without the scales."""
    files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    raw = {}
    for f in files:
        raw.update(read(os.path.join(d, f)))
    out = {}
    for k, (dt, a) in raw.items():
        if k.endswith("_scale_inv"):
            continue
        if dt == "F8_E4M3":
            sdt, s = raw[k + "_scale_inv"]
            out[k] = dequant_block_fp8(a, np.asarray(s, np.float32))
        else:
            out[k] = to_f32(dt, a)
    return out


def write(path, tensors, metadata=None):
    """tensors: ordered {name: (dtype string, numpy array)}; writes temp +
    fsync + rename. Header padded with spaces to 8 bytes as the reference
    writer does."""
    hdr = {}
    if metadata:
        hdr["__metadata__"] = metadata
    off = 0
    blobs = []
    for k, (dt, a) in tensors.items():
        b = np.ascontiguousarray(a, _DT[dt]).tobytes()
        hdr[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
