#!/usr/bin/python3
# Golden-case generator for tandem: writes the `tandem-case/1` safetensors files (docs/CASE_FORMAT.md)
# that the C library is tested against. Inputs are seeded and stored in f32/f16/bf16; expected
# outputs and gradients are computed by PyTorch in float64 from the stored (rounded) inputs.
#
#   /usr/bin/python3 suites/golden/gen_cases.py --out suites/golden/cases
#
# Needs only torch and numpy (no `safetensors` package: the format is written and re-read here).
"""tandem golden-case generator (see suites/golden/README.md)."""

import argparse
import glob
import json
import math
import os
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

FORMAT = "tandem-case/1"
GENERATOR = "suites/golden/gen_cases.py"

DTYPES = [("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)]

# ---------------------------------------------------------------------------------------------
# safetensors writer / reader
# ---------------------------------------------------------------------------------------------

ST_NAME = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
           torch.bfloat16: "BF16", torch.int64: "I64", torch.bool: "BOOL"}
ST_DTYPE = {v: k for k, v in ST_NAME.items()}
ST_SIZE = {"F64": 8, "I64": 8, "F32": 4, "F16": 2, "BF16": 2, "BOOL": 1}
ST_NUMPY = {"F64": "<f8", "I64": "<i8", "F32": "<f4", "F16": "<f2", "BF16": "<i2", "BOOL": "|b1"}


def tensor_bytes(t):
    """Raw little-endian row-major bytes of a tensor."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, tensor). Data is laid out by decreasing element size (as the
    reference implementation does) so every tensor starts aligned to its element size; the
    header is padded with spaces to a multiple of 8."""
    assert sys.byteorder == "little"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    order = sorted(range(len(tensors)), key=lambda i: (-ST_SIZE[ST_NAME[tensors[i][1].dtype]], i))
    entries, blobs, pos = {}, [], 0
    for i in order:
        name, t = tensors[i]
        assert name not in entries and name != "__metadata__", name
        b = tensor_bytes(t)
        entries[name] = {"dtype": ST_NAME[t.dtype], "shape": list(t.shape),
                         "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    # header keys in the given (logical) order; the data is in `order`
    header = {"__metadata__": metadata}
    header.update((name, entries[name]) for name, _ in tensors)
    hj = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("utf-8")
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(len(hj).to_bytes(8, "little"))
        f.write(hj)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Returns (metadata, {name: tensor}) with tensors in file (data) order; validates layout."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    assert 8 + n <= len(raw), "header length past end of file"
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
    entries = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    pos, out = 0, {}
    for name, e in entries:
        assert set(e) == {"dtype", "shape", "data_offsets"}, e
        b, end = e["data_offsets"]
        assert b == pos, f"{name}: hole or overlap at {pos} ({b})"
        dt = e["dtype"]
        count = math.prod(e["shape"])
        assert end - b == count * ST_SIZE[dt], f"{name}: size mismatch"
        assert (8 + n + b) % ST_SIZE[dt] == 0, f"{name}: misaligned"
        arr = np.frombuffer(data, dtype=ST_NUMPY[dt], count=count, offset=b).copy()
        t = torch.from_numpy(arr.reshape(e["shape"]))
        if dt == "BF16":
            t = t.view(torch.bfloat16)
        out[name] = t
        pos = end
    assert pos == len(data), "trailing bytes after last tensor"
    return meta, out


def check_round_trip(path, tensors, metadata):
    meta, got = read_safetensors(path)
    assert meta == metadata, (meta, metadata)
    assert set(got) == {n for n, _ in tensors}, (sorted(got), [n for n, _ in tensors])
    for name, t in tensors:
        r = got[name]
        assert r.dtype == t.dtype and tuple(r.shape) == tuple(t.shape), name
        assert torch.equal(r, t.detach().contiguous()), name
        assert tensor_bytes(r) == tensor_bytes(t), name


# ---------------------------------------------------------------------------------------------
# tandem's Philox4x32-10 (CASE_FORMAT.md), vectorised over numpy uint64 arrays
# ---------------------------------------------------------------------------------------------

_M32 = 0xFFFFFFFF
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85


def philox4x32_10(ctr, key):
    """ctr: 4 arrays (or ints) of 32-bit words, key: 2 ints. Returns 4 uint64 arrays of 32-bit words."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) & np.uint64(_M32) for c in ctr)
    k0, k1 = key[0] & _M32, key[1] & _M32
    for r in range(10):
        if r:
            k0 = (k0 + PHILOX_W0) & _M32
            k1 = (k1 + PHILOX_W1) & _M32
        p0 = np.uint64(PHILOX_M0) * c0          # < 2^64: exact in uint64
        p1 = np.uint64(PHILOX_M1) * c2
        hi0, lo0 = p0 >> np.uint64(32), p0 & np.uint64(_M32)
        hi1, lo1 = p1 >> np.uint64(32), p1 & np.uint64(_M32)
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0
    return c0, c1, c2, c3


def philox_known_answers():
    kat = [((0, 0), (0, 0, 0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
           ((0xffffffff, 0xffffffff), (0xffffffff,) * 4, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
           ((0xa4093822, 0x299f31d0), (0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344),
            (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for key, ctr, want in kat:
        got = tuple(int(w) for w in philox4x32_10(ctr, key))
        if got != want:
            sys.exit("Philox4x32-10 known-answer test FAILED: key %s ctr %s: got %s want %s" % (
                [hex(k) for k in key], [hex(c) for c in ctr], [hex(g) for g in got], [hex(w) for w in want]))


def philox_uniform_bits(n, seed, offset):
    """The 32 random bits of elements 0..n-1 of a tensor filled from (seed, offset)."""
    key = (seed & _M32, seed >> 32)
    q = np.arange((n + 3) // 4, dtype=np.uint64)
    c = philox4x32_10((q & np.uint64(_M32), q >> np.uint64(32),
                       np.full_like(q, offset & _M32), np.full_like(q, offset >> 32)), key)
    return np.stack(c, axis=1).reshape(-1)[:n]     # element i -> c[i % 4] of counter i / 4


def dropout_keep_mask(n, p, seed, offset):
    bits = philox_uniform_bits(n, seed, offset)
    threshold = math.ceil((1.0 - p) * 2.0 ** 24)
    return (bits >> np.uint64(8)) < np.uint64(threshold)


# ---------------------------------------------------------------------------------------------
# seeded inputs
# ---------------------------------------------------------------------------------------------

class Rng:
    """Seeded inputs for one case, drawn in float32 and rounded to the case dtype."""

    def __init__(self, seed, dtype):
        self.g = torch.Generator()
        self.reseed(seed)
        self.dtype = dtype

    def reseed(self, seed):
        self.g.manual_seed(seed)

    def randn(self, *shape, scale=1.0, mean=0.0, clamp=None):
        t = torch.randn(shape, generator=self.g, dtype=torch.float32) * scale + mean
        if clamp is not None:
            t = t.clamp(-clamp, clamp)
        return t.to(self.dtype)

    def rand(self, *shape, lo=0.0, hi=1.0):
        t = torch.rand(shape, generator=self.g, dtype=torch.float32) * (hi - lo) + lo
        return t.to(self.dtype)

    def zeros(self, *shape):
        return torch.zeros(shape, dtype=self.dtype)

    def randint(self, lo, hi, *shape):
        return torch.randint(lo, hi, shape, generator=self.g, dtype=torch.int64)

    def distinct(self, *shape, scale=1.0):
        """randn values, pairwise distinct after rounding to the dtype (no ties in max_pool)."""
        n = math.prod(shape)
        pool = (torch.randn(4 * n + 16, generator=self.g, dtype=torch.float32) * scale).to(self.dtype)
        _, first = np.unique(pool.double().numpy(), return_index=True)
        first = np.sort(first)
        assert len(first) >= n, "not enough distinct values"
        return pool[torch.from_numpy(first[:n])].reshape(shape).contiguous()


def case(tag, inputs, attrs=None, bwd=True):
    """inputs: a function drawing the case's inputs (list; None for an absent optional input) from
    the builder's Rng, which the driver reseeds for each case (seed from op and tag)."""
    return dict(tag=tag, make_inputs=inputs, attrs=attrs or {}, bwd=bwd)


# ---------------------------------------------------------------------------------------------
# cases, per op: each builder takes an Rng and returns a list of cases
# ---------------------------------------------------------------------------------------------

def cases_linear(R):
    return [
        case("basic", lambda: [R.randn(4, 8), R.randn(6, 8, scale=0.5), R.randn(6)]),
        case("odd", lambda: [R.randn(7, 13), R.randn(5, 13, scale=0.3), R.randn(5)]),
        case("nobias", lambda: [R.randn(3, 7), R.randn(4, 7, scale=0.4), None]),
        case("batch3d", lambda: [R.randn(2, 3, 5), R.randn(4, 5, scale=0.5), R.randn(4)]),
        case("vec", lambda: [R.randn(5), R.randn(3, 5, scale=0.5), R.randn(3)]),
        case("n1", lambda: [R.randn(1, 1), R.randn(1, 1), R.randn(1)]),
        case("k4096", lambda: [R.randn(2, 4096), R.randn(2, 4096, scale=0.5), R.randn(2)], bwd=False),
    ]


def cases_linear_gelu_linear(R):
    """The transformer MLP: c_fc, the tanh GELU, c_proj (inputs x, w1, b1, w2, b2). Hidden
    widths a multiple of 8 (the CUDA backend's cuBLASLt GELU_AUX_BIAS / DGELU epilogues) and not
    (its unfused fallback)."""
    return [
        case("basic", lambda: [R.randn(4, 8), R.randn(16, 8, scale=0.5), R.randn(16),
                               R.randn(8, 16, scale=0.3), R.randn(8)]),
        case("gpt3d", lambda: [R.randn(2, 3, 8), R.randn(32, 8, scale=0.4), R.randn(32),
                               R.randn(8, 32, scale=0.2), R.randn(8)]),
        case("hid12", lambda: [R.randn(5, 7), R.randn(12, 7, scale=0.5), R.randn(12),
                               R.randn(3, 12, scale=0.3), R.randn(3)]),
        case("nobias", lambda: [R.randn(3, 6), R.randn(8, 6, scale=0.5), None,
                                R.randn(5, 8, scale=0.3), None]),
    ]


def cases_matmul(R):
    return [
        case("mm", lambda: [R.randn(7, 13), R.randn(13, 5, scale=0.3)]),
        case("bmm", lambda: [R.randn(3, 4, 6), R.randn(3, 6, 5, scale=0.4)]),
        case("b2d", lambda: [R.randn(2, 5, 7), R.randn(7, 3, scale=0.4)]),
        case("2db", lambda: [R.randn(4, 6), R.randn(3, 6, 5, scale=0.4)]),
        case("n1", lambda: [R.randn(1, 7), R.randn(7, 1, scale=0.4)]),
        case("k1", lambda: [R.randn(5, 1), R.randn(1, 4)]),
        case("k4096", lambda: [R.randn(2, 4096), R.randn(4096, 2, scale=0.5)], bwd=False),
        # torch.matmul's other forms: 1-D operands, broadcast batch dims
        case("vm", lambda: [R.randn(6), R.randn(6, 4, scale=0.4)]),
        case("mv", lambda: [R.randn(5, 7), R.randn(7, scale=0.4)]),
        case("dot", lambda: [R.randn(9), R.randn(9, scale=0.4)]),
        case("vbm", lambda: [R.randn(5), R.randn(3, 5, 2, scale=0.4)]),
        case("bmv", lambda: [R.randn(2, 3, 4), R.randn(4, scale=0.4)]),
        case("bcast4d", lambda: [R.randn(2, 1, 3, 5), R.randn(3, 5, 4, scale=0.4)]),
        case("b1", lambda: [R.randn(1, 4, 6), R.randn(2, 3, 6, 5, scale=0.4)]),
    ]


def _conv(R, tag, x, o, cg, kh, kw, bias=True, **attrs):
    s = 1.0 / math.sqrt(cg * kh * kw)
    return case(tag, lambda: [R.randn(*x), R.randn(o, cg, kh, kw, scale=s), R.randn(o, scale=0.5) if bias else None],
                attrs)


def cases_conv2d(R):
    return [
        _conv(R, "basic", (2, 3, 7, 7), 4, 3, 3, 3),
        _conv(R, "s2p1", (1, 3, 9, 8), 5, 3, 3, 3, stride=2, padding=1),
        _conv(R, "d2", (1, 2, 9, 9), 3, 2, 3, 3, stride=[1, 2], padding=[2, 1], dilation=2),
        _conv(R, "g2nb", (2, 4, 6, 5), 6, 2, 3, 3, bias=False, groups=2),
        _conv(R, "dw", (1, 4, 8, 8), 4, 1, 3, 3, padding=1, groups=4),
        _conv(R, "dwm2", (1, 3, 6, 6), 6, 1, 3, 3, stride=2, groups=3),
        _conv(R, "k1", (1, 5, 3, 4), 2, 5, 1, 1),
        _conv(R, "rect", (2, 3, 6, 7), 3, 3, 2, 3, stride=[2, 1], padding=[1, 0]),
        _conv(R, "s2p1d2g2", (1, 4, 11, 10), 4, 2, 3, 3, stride=2, padding=1, dilation=2, groups=2),
        _conv(R, "n1", (1, 1, 1, 1), 1, 1, 1, 1),
        _conv(R, "c64", (1, 64, 5, 5), 2, 64, 3, 3),
        _conv(R, "same", (1, 3, 7, 6), 4, 3, 3, 3, padding="same"),
        _conv(R, "samed2", (1, 2, 9, 9), 2, 2, 3, 5, padding="same", dilation=2),
        # "same" with an odd d(k-1): PyTorch puts the odd zero after (bottom, right)
        _conv(R, "samek4", (2, 3, 7, 6), 4, 3, 4, 4, padding="same"),
        _conv(R, "samek2x3", (1, 2, 5, 8), 3, 2, 2, 3, padding="same"),
        _conv(R, "samek4cl", (1, 4, 6, 6), 2, 4, 4, 2, padding="same", memory_format="channels_last"),
        _conv(R, "valid", (2, 2, 6, 6), 3, 2, 2, 2, padding="valid"),
        # torch.channels_last: the same tensors (saved NCHW), computed in the NHWC memory format
        _conv(R, "clbasic", (2, 3, 7, 7), 4, 3, 3, 3, memory_format="channels_last"),
        _conv(R, "cls2p1d2g2", (1, 4, 11, 10), 4, 2, 3, 3, stride=2, padding=1, dilation=2, groups=2,
              memory_format="channels_last"),
        _conv(R, "cldw", (2, 6, 5, 6), 6, 1, 3, 3, padding=1, groups=6, memory_format="channels_last"),
        _conv(R, "clc64nb", (1, 64, 5, 5), 3, 64, 1, 1, bias=False, memory_format="channels_last"),
    ]


def _conv2d(xs, a):
    """F.conv2d; memory_format "channels_last" converts input and weight first, as a user's
    model.to(memory_format=torch.channels_last) and x.to(memory_format=...) do."""
    a = dict(a)
    fmt = a.pop("memory_format", "contiguous_format")
    assert fmt in ("contiguous_format", "channels_last"), fmt
    if fmt == "channels_last":
        xs = [xs[0].to(memory_format=torch.channels_last),
              xs[1].to(memory_format=torch.channels_last), xs[2]]
        assert xs[0].is_contiguous(memory_format=torch.channels_last)
    return (F.conv2d(*xs, **a),)


def cases_max_pool2d(R):
    d = R.distinct
    return [
        case("k2", lambda: [d(2, 3, 8, 8)], {"kernel_size": 2}),
        case("k3s2p1", lambda: [d(1, 2, 7, 9)], {"kernel_size": 3, "stride": 2, "padding": 1}),
        case("ceil", lambda: [d(1, 2, 7, 7)], {"kernel_size": 2, "stride": 2, "ceil_mode": True}),
        case("k3s2p1ceil", lambda: [d(1, 1, 8, 8)], {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
        case("d2", lambda: [d(1, 1, 7, 6)], {"kernel_size": 2, "stride": 1, "dilation": 2}),
        case("chw", lambda: [d(3, 5, 5)], {"kernel_size": [2, 3], "stride": [1, 2]}),
        case("rect", lambda: [d(2, 2, 6, 9)], {"kernel_size": [3, 2], "stride": [2, 3], "padding": [1, 0]}),
        case("n1", lambda: [d(1, 1, 1, 1)], {"kernel_size": 1}),
        case("global", lambda: [d(1, 2, 7, 7)], {"kernel_size": 7}),
    ]


def cases_avg_pool2d(R):
    r = R.randn
    return [
        case("k2", lambda: [r(2, 3, 6, 6)], {"kernel_size": 2}),
        case("k3s1", lambda: [r(1, 2, 5, 6)], {"kernel_size": 3, "stride": 1}),
        case("k3s2p1", lambda: [r(1, 2, 7, 9)], {"kernel_size": 3, "stride": 2, "padding": 1}),
        case("k3s2p1nocip", lambda: [r(1, 2, 7, 9)],
             {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}),
        case("ceil", lambda: [r(1, 2, 7, 7)], {"kernel_size": 2, "stride": 2, "ceil_mode": True}),
        case("ceilp1", lambda: [r(1, 1, 8, 8)], {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
        case("ceilp1nocip", lambda: [r(1, 1, 8, 8)],
             {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
        case("div3", lambda: [r(1, 2, 6, 6)], {"kernel_size": 2, "divisor_override": 3}),
        case("chw", lambda: [r(3, 5, 5)], {"kernel_size": [2, 3], "stride": [1, 2]}),
        case("n1", lambda: [r(1, 1, 1, 1)], {"kernel_size": 1}),
        case("global", lambda: [r(1, 2, 7, 7)], {"kernel_size": 7}),
    ]


def _unary(scale, clamp=None):
    def build(R):
        r = lambda *s: R.randn(*s, scale=scale, clamp=clamp)
        return [
            case("odd", lambda: [r(7, 13)]),
            case("n1", lambda: [r(1)]),
            case("s3d", lambda: [r(2, 1, 5)]),
            case("scalar", lambda: [r()]),
            case("big", lambda: [r(13, 77)]),
        ]
    return build


def cases_gelu(R):
    r = lambda *s: R.randn(*s, scale=2.0)
    return [
        case("odd", lambda: [r(7, 13)]),
        case("oddtanh", lambda: [r(7, 13)], {"approximate": "tanh"}),
        case("n1tanh", lambda: [r(1)], {"approximate": "tanh"}),
        case("s3d", lambda: [r(2, 1, 5)], {"approximate": "none"}),
        case("big", lambda: [r(13, 77)], {"approximate": "none"}),
        case("bigtanh", lambda: [r(13, 77)], {"approximate": "tanh"}),
    ]


def cases_softmax(R):
    r = lambda *s: R.randn(*s, scale=2.0)
    return [
        case("d1", lambda: [r(7, 13)], {"dim": 1}),
        case("d0", lambda: [r(5, 3)], {"dim": 0}),
        case("dm1", lambda: [r(2, 3, 4)], {"dim": -1}),
        case("mid", lambda: [r(2, 5, 3)], {"dim": 1}),
        case("dm2", lambda: [r(3, 4, 5)], {"dim": -2}),
        case("n1", lambda: [r(4, 1)], {"dim": 1}),
        case("vec", lambda: [r(6)], {"dim": 0}),
        case("k4096", lambda: [r(1, 4096)], {"dim": -1}),
    ]


def _bool_mask(R, *shape, keep=0.7):
    """True (takes part) with probability `keep`, drawn in f32: the same mask for every dtype."""
    return torch.rand(shape, generator=R.g, dtype=torch.float32) < keep


def cases_sdpa(R):
    r = R.randn
    inf = float("-inf")

    def bool_full():   # two rows fully masked out: zeros (PyTorch 2.5+'s _safe_softmax)
        m = _bool_mask(R, 2, 1, 5, 6)
        m[0, 0, 0, :] = False
        m[1, 0, 3, :] = False
        return [r(2, 2, 5, 8), r(2, 2, 6, 8), r(2, 2, 6, 8), m]

    def add():   # additive mask with a few -inf entries
        m = r(2, 2, 5, 6, scale=0.5)
        m[0, 1, 2, 4] = m[1, 0, 0, 0] = m[1, 1, 4, 5] = inf
        return [r(2, 2, 5, 8), r(2, 2, 6, 8), r(2, 2, 6, 8), m]

    def add_row():   # additive mask broadcast over the batch, one row all -inf
        m = r(1, 5, 6, scale=0.5)
        m[0, 2, :] = inf
        m[0, 4, 1] = inf
        return [r(2, 2, 5, 8), r(2, 2, 6, 8), r(2, 2, 6, 8), m]

    return [
        case("basic", lambda: [r(2, 3, 5, 8), r(2, 3, 5, 8), r(2, 3, 5, 8), None]),
        case("lnes", lambda: [r(2, 2, 4, 8), r(2, 2, 7, 8), r(2, 2, 7, 8), None]),
        case("causal", lambda: [r(1, 2, 6, 8), r(1, 2, 6, 8), r(1, 2, 6, 8), None], {"is_causal": True}),
        case("causalls", lambda: [r(1, 2, 5, 8), r(1, 2, 7, 8), r(1, 2, 7, 8), None], {"is_causal": True}),
        case("causalsl", lambda: [r(2, 1, 7, 4), r(2, 1, 3, 4), r(2, 1, 3, 4), None], {"is_causal": True}),
        case("bool", lambda: [r(2, 2, 5, 8), r(2, 2, 6, 8), r(2, 2, 6, 8), _bool_mask(R, 5, 6)]),
        case("boolfull", bool_full),
        case("add", add),
        case("addrow", add_row),
        case("evdiff", lambda: [r(2, 2, 4, 8), r(2, 2, 6, 8), r(2, 2, 6, 5), None]),
        case("scale", lambda: [r(1, 2, 5, 6), r(1, 2, 5, 6), r(1, 2, 5, 6), None], {"scale": 0.3}),
        case("sharp", lambda: [r(1, 1, 6, 8, scale=2.0), r(1, 1, 6, 8, scale=2.0), r(1, 1, 6, 8), None]),
        case("bcast", lambda: [r(2, 3, 4, 8), r(3, 6, 8), r(2, 1, 6, 5), None]),
        case("dropout", lambda: [r(2, 2, 5, 8), r(2, 2, 5, 8), r(2, 2, 5, 8), None],
             {"dropout_p": 0.3, "seed": 5, "offset": 2}),
        case("dropmask", lambda: [r(1, 2, 6, 8), r(1, 2, 6, 8), r(1, 2, 6, 8), _bool_mask(R, 6, 6)],
             {"dropout_p": 0.5, "seed": 11}),
        case("n1", lambda: [r(1, 1, 1, 1), r(1, 1, 1, 1), r(1, 1, 1, 1), None]),
        case("nobatch", lambda: [r(5, 8), r(6, 8), r(6, 4), None]),
        case("long", lambda: [r(1, 2, 3, 16), r(1, 2, 129, 16), r(1, 2, 129, 16), None]),
    ]


def _targets(R, n, c, ignore=None, at=()):
    t = R.randint(0, c, n)
    for i in at:
        t[i] = ignore
    return t


def _no_weight(c):
    """A cross_entropy case of (input, target): weight (input.2) absent."""
    make = c["make_inputs"]
    c["make_inputs"] = lambda: (make() + [None])[:3]
    return c


def cases_cross_entropy(R):
    x = lambda n, c: R.randn(n, c, scale=2.0)
    return [_no_weight(c) for c in [
        case("mean", lambda: [x(5, 7), _targets(R, 5, 7)]),
        case("sum", lambda: [x(4, 3), _targets(R, 4, 3)], {"reduction": "sum"}),
        case("none", lambda: [x(6, 5), _targets(R, 6, 5)], {"reduction": "none"}),
        case("ls", lambda: [x(5, 7), _targets(R, 5, 7)], {"label_smoothing": 0.1}),
        case("lssum", lambda: [x(4, 6), _targets(R, 4, 6)], {"label_smoothing": 0.1, "reduction": "sum"}),
        case("ign", lambda: [x(6, 4), _targets(R, 6, 4, -100, (1, 4))]),
        case("ign2none", lambda: [x(6, 5), _targets(R, 6, 5, 2, (0, 3))], {"ignore_index": 2, "reduction": "none"}),
        case("lsign", lambda: [x(7, 5), _targets(R, 7, 5, 0, (2, 5, 6))], {"label_smoothing": 0.1, "ignore_index": 0}),
        case("n1", lambda: [x(1, 5), _targets(R, 1, 5)]),
        case("c1", lambda: [x(3, 1), _targets(R, 3, 1)]),
        case("c1000", lambda: [x(3, 1000), _targets(R, 3, 1000)]),
        # class weights (input.2), class probabilities (a floating target), spatial dims, unbatched
        case("w", lambda: [x(6, 5), _targets(R, 6, 5), R.rand(5, lo=0.25, hi=2.0)]),
        case("wsum", lambda: [x(5, 4), _targets(R, 5, 4), R.rand(4, lo=0.25, hi=2.0)], {"reduction": "sum"}),
        case("wlsign", lambda: [x(7, 6), _targets(R, 7, 6, -100, (1, 5)), R.rand(6, lo=0.25, hi=2.0)],
             {"label_smoothing": 0.1}),
        case("wnone", lambda: [x(6, 5), _targets(R, 6, 5, 3, (2,)), R.rand(5, lo=0.25, hi=2.0)],
             {"reduction": "none", "ignore_index": 3}),
        case("prob", lambda: [x(5, 6), R.rand(5, 6)]),
        case("probls", lambda: [x(4, 7), R.rand(4, 7), R.rand(7, lo=0.25, hi=2.0)], {"label_smoothing": 0.2}),
        case("probnone", lambda: [x(5, 3), R.rand(5, 3)], {"reduction": "none"}),
        case("spatial", lambda: [R.randn(2, 4, 3, 5, scale=2.0), R.randint(0, 4, 2, 3, 5)]),
        case("spatialw", lambda: [R.randn(2, 5, 4, scale=2.0), _targets(R, 8, 5, -100, (3,)).reshape(2, 4),
                                  R.rand(5, lo=0.25, hi=2.0)], {"reduction": "none", "label_smoothing": 0.05}),
        case("spatialprob", lambda: [R.randn(2, 3, 2, 3, scale=2.0), R.rand(2, 3, 2, 3)], {"reduction": "sum"}),
        case("unbatched", lambda: [R.randn(7, scale=2.0), R.randint(0, 7)]),
        case("unbatchedprob", lambda: [R.randn(6, scale=2.0), R.rand(6)], {"label_smoothing": 0.1}),
    ]]


def cases_mse_loss(R):
    r = R.randn
    return [
        case("mean", lambda: [r(7, 13), r(7, 13)]),
        case("sum", lambda: [r(3, 5), r(3, 5)], {"reduction": "sum"}),
        case("none", lambda: [r(2, 3, 4), r(2, 3, 4)], {"reduction": "none"}),
        case("n1", lambda: [r(1), r(1)], {"reduction": "mean"}),
        case("scalar", lambda: [r(), r()], {"reduction": "sum"}),
        case("big", lambda: [r(64, 128), r(64, 128)], bwd=False),
    ]


def cases_layer_norm(R):
    x = lambda *s: R.randn(*s, scale=2.0, mean=0.5)
    w = lambda *s: R.randn(*s, scale=0.5, mean=1.0)
    b = lambda *s: R.randn(*s, scale=0.5)
    return [
        case("last1", lambda: [x(4, 7), w(7), b(7)], {"normalized_shape": [7]}),
        case("last2", lambda: [x(2, 3, 5), w(3, 5), b(3, 5)], {"normalized_shape": [3, 5]}),
        case("noaff", lambda: [x(3, 6), None, None], {"normalized_shape": [6]}),
        case("wonly", lambda: [x(5, 4), w(4), None], {"normalized_shape": [4]}),
        case("bonly", lambda: [x(5, 4), None, b(4)], {"normalized_shape": [4]}),
        case("eps", lambda: [x(3, 9), w(9), b(9)], {"normalized_shape": [9], "eps": 1e-3}),
        case("ns1", lambda: [x(3, 1), w(1), b(1)], {"normalized_shape": [1]}),
        case("vec", lambda: [x(8), w(8), b(8)], {"normalized_shape": [8]}),
        case("d4096", lambda: [x(1, 4096), None, None], {"normalized_shape": [4096]}),
    ]


def cases_batch_norm(R):
    x = lambda *s: R.randn(*s, scale=1.5, mean=0.3)
    rm = lambda c: R.randn(c, scale=0.3)
    rv = lambda c: R.rand(c, lo=0.75, hi=1.25)
    w = lambda c: R.randn(c, scale=0.5, mean=1.0)
    b = lambda c: R.randn(c, scale=0.5)
    full = lambda shape: [x(*shape), rm(shape[1]), rv(shape[1]), w(shape[1]), b(shape[1])]
    return [
        case("eval", lambda: full((2, 3, 4, 5))),
        case("eval2d", lambda: full((5, 4)), {"training": False, "eps": 1e-3}),
        case("evalnoaff", lambda: [x(3, 2, 3, 3), rm(2), rv(2), None, None]),
        case("train", lambda: full((2, 3, 4, 5)), {"training": True}),
        case("train2d", lambda: full((6, 3)), {"training": True, "momentum": 0.2}),
        case("trainnors", lambda: [x(3, 2, 4, 3), None, None, w(2), b(2)], {"training": True}),
        case("trainnoaff", lambda: [x(4, 3, 2, 2), rm(3), rv(3), None, None], {"training": True}),
        case("train3d", lambda: full((3, 2, 7)), {"training": True, "eps": 1e-3}),
        case("trainn2", lambda: full((2, 1)), {"training": True}),
        case("big", lambda: full((2, 2, 32, 32)), {"training": True}),
    ]


def _binary(alpha):
    def build(R):
        r = R.randn
        a = (lambda v: {"alpha": v}) if alpha else (lambda v: {})
        cs = [
            case("same", lambda: [r(7, 13), r(7, 13)]),
            case("bcast", lambda: [r(3, 1, 5), r(4, 5)]),
            case("scal", lambda: [r(2, 3), r(1)]),
            case("lhsb", lambda: [r(5), r(3, 5)], a(2)),
            case("outer", lambda: [r(4, 1), r(1, 6)], a(-0.5)),
            case("n1", lambda: [r(1), r(1)]),
            case("0d", lambda: [r(), r(3)]),
        ]
        if alpha:
            cs.insert(1, case("alpha2", lambda: [r(4, 5), r(4, 5)], {"alpha": 2}))
        return cs
    return build


def _reduce(big_shape, big_attrs):
    def build(R):
        r = R.randn
        return [
            case("all", lambda: [r(7, 13)]),
            case("d1", lambda: [r(4, 5, 6)], {"dim": [1]}),
            case("dm1keep", lambda: [r(4, 5, 6)], {"dim": [-1], "keepdim": True}),
            case("d02", lambda: [r(3, 4, 5)], {"dim": [0, 2]}),
            case("dm1m3keep", lambda: [r(3, 4, 5)], {"dim": [-1, -3], "keepdim": True}),
            case("allkeep", lambda: [r(3, 5)], {"keepdim": True}),
            case("dnull", lambda: [r(2, 7)], {"dim": None}),
            case("n1", lambda: [r(1, 1, 3)], {"dim": [0, 1]}),
            case("d0long", lambda: [r(512, 3)], {"dim": [0]}),
            # positive values (well-conditioned sum; |sum| < 2^15 so it fits f16)
            case("big", lambda: [R.rand(*big_shape, lo=0.0, hi=0.5)], big_attrs, bwd=False),
        ]
    return build


def cases_embedding(R):
    w = lambda v, d: R.randn(v, d)

    def basic():
        i = R.randint(0, 10, 2, 3)
        i[1, 2] = i[0, 0]            # repeated indices: gradient rows accumulate
        i[1, 0] = i[0, 1]
        return [i, w(10, 4)]

    def pad():
        i = R.randint(0, 7, 3, 4)
        i[0, 1] = i[2, 3] = 2        # padding_idx used
        return [i, w(7, 3)]

    return [
        case("basic", basic),
        case("pad", pad, {"padding_idx": 2}),
        case("vec", lambda: [R.randint(0, 13, 7), w(13, 5)]),
        case("scalar", lambda: [R.randint(0, 6), w(6, 4)]),
        case("n1", lambda: [torch.zeros(3, dtype=torch.int64), w(1, 1)]),
        case("idx3d", lambda: [R.randint(0, 5, 2, 2, 3), w(5, 6)]),
    ]


def cases_dropout(R):
    r = R.randn
    return [
        case("p0", lambda: [r(7, 13)], {"p": 0.0}),
        case("p01", lambda: [r(7, 13)], {"p": 0.1, "seed": 1}),
        case("def", lambda: [r(7, 13)]),
        case("p1", lambda: [r(5, 6)], {"p": 1.0, "seed": 3}),
        case("eval", lambda: [r(5, 6)], {"training": False}),
        case("seedhi", lambda: [r(3, 11)], {"p": 0.5, "seed": 2 ** 32 + 7, "offset": 3}),
        case("offhi", lambda: [r(2, 9)], {"p": 0.25, "seed": 123, "offset": 2 ** 32 + 5}),
        case("n1", lambda: [r(1)], {"p": 0.5, "seed": 6}),       # seed 6 keeps element 0
        case("big", lambda: [r(32, 32)], {"p": 0.3, "seed": 2024, "offset": 17}),
    ]


def cases_sgd_step(R):
    p = R.randn
    g = lambda *s: R.randn(*s, scale=0.5)
    return [
        case("plain", lambda: [p(7, 13), g(7, 13), None], {"lr": 0.1}),
        case("wd", lambda: [p(4, 5), g(4, 5), None], {"lr": 0.05, "weight_decay": 0.01}),
        case("m09", lambda: [p(7, 13), g(7, 13), g(7, 13)], {"lr": 0.1, "momentum": 0.9}),
        case("m09first", lambda: [p(7, 13), g(7, 13), None], {"lr": 0.1, "momentum": 0.9}),
        case("nest", lambda: [p(3, 4), g(3, 4), g(3, 4)], {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
        case("nestfirst", lambda: [p(3, 4), g(3, 4), None],
             {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.001}),
        case("damp", lambda: [p(5, 3), g(5, 3), g(5, 3)],
             {"lr": 0.01, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}),
        case("n1", lambda: [p(1), g(1), g(1)], {"lr": 0.5, "momentum": 0.5}),
        # maximize: the gradient negated before weight decay and momentum
        case("max", lambda: [p(7, 13), g(7, 13), None], {"lr": 0.1, "maximize": True}),
        case("maxmwd", lambda: [p(7, 13), g(7, 13), g(7, 13)],
             {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "maximize": True}),
        case("maxnest", lambda: [p(3, 4), g(3, 4), g(3, 4)],
             {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.001, "maximize": True}),
        case("maxfirst", lambda: [p(5, 3), g(5, 3), None],
             {"lr": 0.01, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01, "maximize": True}),
    ]


def _adam(adamw):
    def build(R):
        def state(shape, step, ams=False):
            # param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad only; zeros at step 1 as
            # PyTorch creates it, else >= exp_avg_sq: equal to it in about half the elements, so
            # that the new exp_avg_sq wins the maximum in some and the old maximum in others)
            ins = [R.randn(*shape), R.randn(*shape, scale=0.1)]
            if step == 1:
                return ins + [R.zeros(*shape), R.zeros(*shape), R.zeros(*shape) if ams else None]
            ins += [R.randn(*shape, scale=0.05), R.rand(*shape, lo=0.001, hi=0.011)]
            return ins + [torch.maximum(ins[3], R.rand(*shape, lo=0.001, hi=0.011)) if ams else None]
        if adamw:
            return [
                case("s1", lambda: state((7, 13), 1), {"step": 1}),
                case("s10wd", lambda: state((7, 13), 10), {"lr": 0.01, "weight_decay": 0.1, "step": 10}),
                case("s10wd0", lambda: state((4, 5), 10), {"betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.0, "step": 10}),
                case("n1", lambda: state((1,), 2), {"lr": 0.1, "step": 2}),
                case("ams1", lambda: state((7, 13), 1, True), {"amsgrad": True, "step": 1}),
                case("ams10wd", lambda: state((7, 13), 10, True),
                     {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True, "step": 10}),
                case("max10", lambda: state((7, 13), 10), {"lr": 0.01, "maximize": True, "step": 10}),
                case("amsmax", lambda: state((4, 5), 10, True),
                     {"betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.05, "amsgrad": True,
                      "maximize": True, "step": 10}),
            ]
        return [
            case("s1", lambda: state((7, 13), 1), {"step": 1}),
            case("s1wd", lambda: state((3, 4), 1), {"weight_decay": 0.1, "step": 1}),
            case("s10wd", lambda: state((7, 13), 10), {"lr": 0.01, "weight_decay": 0.01, "step": 10}),
            case("s10", lambda: state((4, 5), 10), {"betas": [0.8, 0.99], "eps": 1e-6, "step": 10}),
            case("n1", lambda: state((1,), 3), {"lr": 0.1, "step": 3}),
            case("ams1", lambda: state((7, 13), 1, True), {"amsgrad": True, "step": 1}),
            case("ams10wd", lambda: state((7, 13), 10, True),
                 {"lr": 0.01, "weight_decay": 0.01, "amsgrad": True, "step": 10}),
            case("max10", lambda: state((7, 13), 10),
                 {"lr": 0.01, "weight_decay": 0.1, "maximize": True, "step": 10}),
            case("amsmax", lambda: state((4, 5), 10, True),
                 {"betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.1, "amsgrad": True,
                  "maximize": True, "step": 10}),
        ]
    return build


def cases_clip_grad_norm(R):
    # input.k: the gradient of parameter k (None: a parameter without one, skipped)
    g = R.randn
    return [
        case("two", lambda: [g(7, 13), g(13), None, None], {"max_norm": 1.0}),
        # the norm under max_norm: the coefficient clamps to 1, the gradients come back unchanged
        case("noclip", lambda: [g(3, 5, scale=0.1), g(5, scale=0.1), None, None], {"max_norm": 10.0}),
        case("inf", lambda: [g(7, 13), g(13), g(4, 3), None], {"max_norm": 0.5, "norm_type": "inf"}),
        case("p1", lambda: [g(7, 13), g(13), None, None], {"max_norm": 2.0, "norm_type": 1.0}),
        case("p3", lambda: [g(5, 4), g(4), g(2, 3, 2), None], {"max_norm": 0.25, "norm_type": 3.0}),
        case("skip", lambda: [g(6, 5), None, g(5), g(3)], {"max_norm": 1.0}),
        case("four", lambda: [g(64, 33), g(33), g(33, 17), g(17)],
             {"max_norm": 1.0, "error_if_nonfinite": True}),
        case("zero", lambda: [g(4, 5), g(5), None, None], {"max_norm": 0.0}),
        case("big", lambda: [g(4097), None, None, None], {"max_norm": 10.0}),
    ]


# ---------------------------------------------------------------------------------------------
# views and joins (copies in tandem: exact), and a tensor with a Python number
# ---------------------------------------------------------------------------------------------

def cases_view(R):
    r = R.randn
    return [
        case("basic", lambda: [r(2, 3, 4)], {"size": [4, -1]}),
        case("flat", lambda: [r(3, 5)], {"size": [-1]}),
        case("unsq", lambda: [r(6)], {"size": [2, 1, 3]}),
        case("heads", lambda: [r(2, 5, 12)], {"size": [2, 5, 3, 4]}),   # (B,T,C) -> (B,T,nh,hs)
        case("zero", lambda: [r(0, 3)], {"size": [-1, 3]}),
    ]


def cases_reshape(R):
    r = R.randn
    return [
        case("basic", lambda: [r(2, 3, 2)], {"shape": [3, -1]}),
        case("scalar", lambda: [r(1, 1)], {"shape": []}),
    ]


def cases_transpose(R):
    r = R.randn
    return [
        case("d01", lambda: [r(3, 5)], {"dim0": 0, "dim1": 1}),
        case("neg", lambda: [r(2, 3, 4)], {"dim0": -1, "dim1": -3}),
        case("mid", lambda: [r(2, 3, 4, 5)], {"dim0": 1, "dim1": 2}),   # (B,T,nh,hs) -> (B,nh,T,hs)
        case("same", lambda: [r(3, 4)], {"dim0": 1, "dim1": -1}),
        case("vec", lambda: [r(5)], {"dim0": 0, "dim1": -1}),
        case("big", lambda: [r(33, 129)], {"dim0": 1, "dim1": 0}),
    ]


def cases_narrow(R):
    r = R.randn
    return [
        case("d1", lambda: [r(4, 7)], {"dim": 1, "start": 2, "length": 3}),
        case("neg", lambda: [r(3, 5, 2)], {"dim": -2, "start": -3, "length": 2}),
        case("d0", lambda: [r(6, 4)], {"dim": 0, "start": 1, "length": 4}),
        case("empty", lambda: [r(3, 4)], {"dim": 1, "start": 4, "length": 0}),
        case("full", lambda: [r(2, 5)], {"dim": 1, "start": 0, "length": 5}),
        case("tail", lambda: [r(2, 3, 129)], {"dim": 2, "start": 64, "length": 65}),
    ]


def cases_split(R):
    r = R.randn
    return [
        case("d0", lambda: [r(7, 3)], {"split_size_or_sections": 3}),
        case("last", lambda: [r(2, 10)], {"split_size_or_sections": 4, "dim": -1}),
        case("one", lambda: [r(5, 2)], {"split_size_or_sections": 8}),
        case("qkv", lambda: [r(2, 4, 24)], {"split_size_or_sections": 8, "dim": 2}),   # GPT's c_attn
        case("sections", lambda: [r(3, 9)], {"split_size_or_sections": [2, 0, 3, 4], "dim": -1}),
    ]


def cases_chunk(R):
    r = R.randn
    return [
        case("d0", lambda: [r(7, 3)], {"chunks": 3}),
        case("fewer", lambda: [r(6, 2)], {"chunks": 4}),   # ceil(6/4) = 2: three pieces
        case("qkv", lambda: [r(2, 4, 24)], {"chunks": 3, "dim": -1}),
        case("d1", lambda: [r(3, 5)], {"chunks": 2, "dim": 1}),
    ]


def cases_cat(R):
    r = R.randn
    return [
        case("d0", lambda: [r(2, 3), r(4, 3)]),
        case("d1", lambda: [r(2, 3), r(2, 1), r(2, 4)], {"dim": 1}),
        case("neg", lambda: [r(2, 3, 2), r(2, 3, 5)], {"dim": -1}),
        case("legacy", lambda: [r(2, 3), r(0), r(1, 3)]),   # a (0,) tensor is skipped
        case("one", lambda: [r(3, 4)], {"dim": 1}),
        case("eight", lambda: [r(1, 2) for _ in range(8)], {"dim": 0}),
        case("mid", lambda: [r(2, 1, 5), r(2, 3, 5)], {"dim": 1}),
    ]


def cases_stack(R):
    r = R.randn
    return [
        case("d0", lambda: [r(2, 3), r(2, 3)]),
        case("last", lambda: [r(2, 3), r(2, 3), r(2, 3)], {"dim": -1}),
        case("mid", lambda: [r(2, 3, 4), r(2, 3, 4)], {"dim": 1}),
        case("scalar", lambda: [r(), r(), r()]),
    ]


def _away(R, *shape):
    """Values of either sign with |x| in [0.5, 2): a divisor away from 0."""
    t = R.rand(*shape, lo=0.5, hi=2.0).reshape(-1)
    t[::2] = -t[::2]
    return t.reshape(shape)


def _scalar_cases(op):
    """A tensor and a Python number `other`: floats for f32/f16/bf16; for i64 tensors (no
    backward) an int (PyTorch keeps i64, but for division) and a float (f32)."""
    div = op in ("div", "rdiv")
    nums = {"add": (0.1, -2.5, 3), "sub": (0.1, -2.5, 3), "rsub": (0.1, -2.5, 3),
            "mul": (0.1, -2.5, 3), "div": (0.3, -4.0, 7), "rdiv": (0.3, -4.0, 7)}[op]

    def build(R):
        if R.dtype == torch.int64:
            xi = lambda *s: R.randint(1, 60, *s) * (1 - 2 * R.randint(0, 2, *s))   # nonzero
            cs = [case("numint", lambda: [xi(3, 5)], {"other": nums[2]}, bwd=False),
                  case("numfloat", lambda: [xi(2, 7)], {"other": nums[0]}, bwd=False)]
            if op == "add":   # exact past 2^53 (a double would round it)
                cs.append(case("numbig", lambda: [torch.tensor([2 ** 60 + 1, -(2 ** 55) - 3, 7])],
                               {"other": 5}, bwd=False))
            return cs
        x = (lambda *s: _away(R, *s)) if op == "rdiv" else (lambda *s: R.randn(*s))
        return [
            case("num", lambda: [x(7, 13)], {"other": nums[0]}),
            case("numneg", lambda: [x(3, 4)], {"other": nums[1]}),
            case("numint", lambda: [x(2, 3)], {"other": nums[2]}),
            case("num0d", lambda: [x()], {"other": 1.7}),
            case("numlong", lambda: [x(257)], {"other": -0.7 if div else 0.37}),
        ]
    return build


def _scalar_fn(fn):
    def f(xs, a):
        x, s = xs[0], a["other"]
        y = fn(x, s)
        if not x.is_floating_point() and y.is_floating_point():
            y = fn(x.to(torch.float64), s)   # PyTorch gives f32; the expectation is exact
        return (y,)
    return f


# The op a generator entry writes (file name and metadata) where it is not the entry's key: the
# cases of add and mul with a number are `add` and `mul` cases.
CASE_OP = {"add_scalar": "add", "mul_scalar": "mul"}
# Dtypes besides DTYPES: integer tensors with a number (type promotion)
EXTRA_DTYPES = {k: [("i64", torch.int64)]
                for k in ("add_scalar", "sub", "rsub", "mul_scalar", "div", "rdiv")}


# ---------------------------------------------------------------------------------------------
# expected values: PyTorch in float64
# ---------------------------------------------------------------------------------------------

def _reduce_fn(fn):
    def f(xs, a):
        x = xs[0]
        dim = a.get("dim")
        if dim is None:
            dim = list(range(x.dim()))
        return (fn(x, dim=dim, keepdim=a.get("keepdim", False)),)
    return f


def _batch_norm(xs, a):
    x, rm, rv, w, b = xs
    y = F.batch_norm(x, rm, rv, weight=w, bias=b, **a)
    if a.get("training", False) and rm is not None:
        return (y, rm.detach().clone(), rv.detach().clone())   # updated in place by PyTorch
    return (y,)


def _dropout(xs, a):
    x = xs[0]
    p, training = a.get("p", 0.5), a.get("training", True)
    if not training:
        return (x * 1.0,)
    keep = torch.from_numpy(dropout_keep_mask(x.numel(), p, a.get("seed", 0), a.get("offset", 0)))
    keep = keep.reshape(x.shape)
    if p == 1.0:
        assert not keep.any()
        return (torch.where(keep, x, torch.zeros_like(x)),)
    return (torch.where(keep, x * (1.0 / (1.0 - p)), torch.zeros_like(x)),)


def _sdpa(xs, a):
    """F.scaled_dot_product_attention by the formula PyTorch documents (torch 1.13 lacks it), in
    float64: scale q k^T + mask (bool: -inf where False; is_causal: tril(ones(L, S)), top-left),
    softmax with PyTorch 2.5+'s _safe_softmax (a row of -inf scores gives zeros, not NaN),
    dropout of the weights with tandem's Philox mask over the result's (batch..., L, S), @ v."""
    q, k, v, m = xs
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    bias = torch.zeros(L, S, dtype=torch.float64)
    if a.get("is_causal", False):
        assert m is None, "is_causal with an attn_mask"
        bias = bias.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if m is not None:
        bias = torch.where(m, bias, float("-inf")) if m.dtype == torch.bool else m + bias
    attn = torch.matmul(q, k.transpose(-2, -1)) * scale + bias
    rows = torch.isneginf(attn).all(dim=-1, keepdim=True)
    w = torch.softmax(attn.masked_fill(rows, 0.0), dim=-1).masked_fill(rows, 0.0)
    p = a.get("dropout_p", 0.0)
    if p > 0:
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        w = w.expand(*batch, L, S)
        keep = dropout_keep_mask(w.numel(), p, a.get("seed", 0), a.get("offset", 0))
        keep = torch.from_numpy(keep).reshape(w.shape)
        w = torch.where(keep, w * (1.0 / (1.0 - p)), torch.zeros_like(w))
    return (torch.matmul(w, v),)


def _sgd(xs, a):
    p, g, buf = (None if t is None else t.detach().clone() for t in xs)
    opt = torch.optim.SGD([p], foreach=False, **a)
    p.grad = g
    if buf is not None:
        opt.state[p]["momentum_buffer"] = buf
    opt.step()
    # independent check of the single-tensor formula
    lr, mom, damp = a["lr"], a.get("momentum", 0), a.get("dampening", 0)
    wd, nest = a.get("weight_decay", 0), a.get("nesterov", False)
    d = (-xs[1] if a.get("maximize", False) else xs[1]) + wd * xs[0]
    if mom:
        b2 = d.clone() if xs[2] is None else mom * xs[2] + (1 - damp) * d
        d = d + mom * b2 if nest else b2
    ref = xs[0] - lr * d
    assert torch.allclose(p, ref, rtol=1e-13, atol=1e-15), "sgd check"
    if mom:
        assert torch.allclose(opt.state[p]["momentum_buffer"], b2, rtol=1e-13, atol=1e-15)
        return (p.detach(), opt.state[p]["momentum_buffer"].detach())
    assert xs[2] is None
    return (p.detach(),)


def _adam_fn(adamw):
    def f(xs, a):
        p, g, m, v = (t.detach().clone() for t in xs[:4])
        ams, maximize = a.get("amsgrad", False), a.get("maximize", False)
        assert ams == (xs[4] is not None), "max_exp_avg_sq exactly with amsgrad"
        vmax = xs[4].detach().clone() if ams else None
        step = a["step"]
        kw = {k: v_ for k, v_ in a.items() if k != "step"}
        if "betas" in kw:
            kw["betas"] = tuple(kw["betas"])
        opt = (torch.optim.AdamW if adamw else torch.optim.Adam)([p], foreach=False, **kw)
        p.grad = g
        opt.state[p]["step"] = torch.tensor(float(step - 1))    # torch.optim increments it first
        opt.state[p]["exp_avg"] = m
        opt.state[p]["exp_avg_sq"] = v
        if ams:
            opt.state[p]["max_exp_avg_sq"] = vmax
        opt.step()
        assert float(opt.state[p]["step"]) == step
        # independent check of the single-tensor formula
        lr, (b1, b2), eps = a.get("lr", 1e-3), tuple(a.get("betas", (0.9, 0.999))), a.get("eps", 1e-8)
        wd = a.get("weight_decay", 1e-2 if adamw else 0.0)
        P, G = xs[0].detach(), xs[1].detach()
        if maximize:
            G = -G
        if adamw:
            P = P * (1 - lr * wd)
        elif wd:
            G = G + wd * P
        M = b1 * xs[2] + (1 - b1) * G
        V = b2 * xs[3] + (1 - b2) * G * G
        VH = torch.maximum(xs[4].detach(), V) if ams else V
        if ams and step > 1:   # both sides of the maximum occur
            assert (V > xs[4]).any() and (V < xs[4]).any(), "amsgrad case without both branches"
        ref = P - (lr / (1 - b1 ** step)) * M / (VH.sqrt() / math.sqrt(1 - b2 ** step) + eps)
        assert torch.allclose(p, ref, rtol=1e-12, atol=1e-15), "adam check"
        assert torch.allclose(m, M, rtol=1e-13, atol=1e-16) and torch.allclose(v, V, rtol=1e-13, atol=1e-16)
        if ams:
            assert torch.allclose(vmax, VH, rtol=1e-13, atol=1e-16)
            return (p.detach(), m.detach(), v.detach(), vmax.detach())
        return (p.detach(), m.detach(), v.detach())
    return f


def _clip_grad_norm(xs, a):
    # parameters (zeros) holding the gradients; a None input is a parameter without a gradient
    params = []
    for x in xs:
        p = torch.zeros(x.shape if x is not None else (1,), dtype=torch.float64)
        if x is not None:
            p.grad = x.detach().clone()
        params.append(p)
    kw = dict(a)
    if "norm_type" in kw:
        kw["norm_type"] = float(kw["norm_type"])   # "inf" as PyTorch's float() reads it
    total = torch.nn.utils.clip_grad_norm_(params, **kw)
    # independent check: the norm of all gradients as one vector, c = min(max_norm/(T+1e-6), 1)
    nt = float(a.get("norm_type", 2.0))
    flat = torch.cat([x.detach().reshape(-1) for x in xs if x is not None]).abs()
    T = flat.max() if math.isinf(nt) else flat.pow(nt).sum().pow(1.0 / nt)
    assert torch.allclose(total, T, rtol=1e-12, atol=0), "clip_grad_norm_ total"
    c = min(a["max_norm"] / (float(T) + 1e-6), 1.0)
    for x, p in zip(xs, params):
        if x is not None:
            assert torch.allclose(p.grad, x.detach() * c, rtol=1e-12, atol=0), "clip_grad_norm_ scale"
    return (total,) + tuple(p.grad if x is not None else None for x, p in zip(xs, params))


# op -> (case builder, expected-value function, allowed attrs, required attrs,
#        number of inputs, indices of inputs that are integer / never differentiable, has backward)
OPS = {
    "linear": (cases_linear, lambda xs, a: (F.linear(*xs),), set(), set(), 3, (), True),
    "matmul": (cases_matmul, lambda xs, a: (torch.matmul(*xs),), set(), set(), 2, (), True),
    "linear_gelu_linear": (cases_linear_gelu_linear,
                           lambda xs, a: (F.linear(F.gelu(F.linear(xs[0], xs[1], xs[2]),
                                                          approximate="tanh"), xs[3], xs[4]),),
                           set(), set(), 5, (), True),
    "conv2d": (cases_conv2d, _conv2d,
               {"stride", "padding", "dilation", "groups", "memory_format"}, set(), 3, (), True),
    "max_pool2d": (cases_max_pool2d, lambda xs, a: (F.max_pool2d(xs[0], **a),),
                   {"kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"},
                   {"kernel_size"}, 1, (), True),
    "avg_pool2d": (cases_avg_pool2d, lambda xs, a: (F.avg_pool2d(xs[0], **a),),
                   {"kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"},
                   {"kernel_size"}, 1, (), True),
    "relu": (_unary(1.0), lambda xs, a: (F.relu(xs[0]),), set(), set(), 1, (), True),
    "tanh": (_unary(1.5), lambda xs, a: (torch.tanh(xs[0]),), set(), set(), 1, (), True),
    "sigmoid": (_unary(2.5, clamp=6.0), lambda xs, a: (torch.sigmoid(xs[0]),), set(), set(), 1, (), True),
    "gelu": (cases_gelu, lambda xs, a: (F.gelu(xs[0], **a),), {"approximate"}, set(), 1, (), True),
    "softmax": (cases_softmax, lambda xs, a: (F.softmax(xs[0], **a),), {"dim"}, {"dim"}, 1, (), True),
    "log_softmax": (cases_softmax, lambda xs, a: (F.log_softmax(xs[0], **a),), {"dim"}, {"dim"}, 1, (), True),
    "cross_entropy": (cases_cross_entropy, lambda xs, a: (F.cross_entropy(xs[0], xs[1], weight=xs[2], **a),),
                      {"reduction", "label_smoothing", "ignore_index"}, set(), 3, (1, 2), True),
    "mse_loss": (cases_mse_loss, lambda xs, a: (F.mse_loss(*xs, **a),), {"reduction"}, set(), 2, (), True),
    "layer_norm": (cases_layer_norm, lambda xs, a: (F.layer_norm(xs[0], weight=xs[1], bias=xs[2], **a),),
                   {"normalized_shape", "eps"}, {"normalized_shape"}, 3, (), True),
    "batch_norm": (cases_batch_norm, _batch_norm, {"training", "momentum", "eps"}, set(), 5, (1, 2), True),
    "add": (_binary(True), lambda xs, a: (torch.add(*xs, **a),), {"alpha"}, set(), 2, (), True),
    "mul": (_binary(False), lambda xs, a: (torch.mul(*xs),), set(), set(), 2, (), True),
    "sum": (_reduce((256, 256), {}), _reduce_fn(torch.sum), {"dim", "keepdim"}, set(), 1, (), True),
    "mean": (_reduce((65536,), {"dim": [-1]}), _reduce_fn(torch.mean), {"dim", "keepdim"}, set(), 1, (), True),
    "embedding": (cases_embedding, lambda xs, a: (F.embedding(*xs, **a),), {"padding_idx"}, set(), 2, (0,), True),
    "dropout": (cases_dropout, _dropout, {"p", "training", "seed", "offset"}, set(), 1, (), True),
    "scaled_dot_product_attention": (cases_sdpa, _sdpa, {"dropout_p", "is_causal", "scale", "seed", "offset"},
                                     set(), 4, (), True),
    "sgd_step": (cases_sgd_step, _sgd,
                 {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize"},
                 {"lr"}, 3, (), False),
    "adam_step": (_adam(False), _adam_fn(False),
                  {"lr", "betas", "eps", "weight_decay", "step", "amsgrad", "maximize"},
                  {"step"}, 5, (), False),
    "adamw_step": (_adam(True), _adam_fn(True),
                   {"lr", "betas", "eps", "weight_decay", "step", "amsgrad", "maximize"},
                   {"step"}, 5, (), False),
    # outputs: the total norm, then output.k+1 = gradient k clipped (absent for absent input.k)
    "clip_grad_norm_": (cases_clip_grad_norm, _clip_grad_norm,
                        {"max_norm", "norm_type", "error_if_nonfinite"}, {"max_norm"}, 4, (), False),
    # views and joins (None inputs: any number, torch.cat's list) ...
    "view": (cases_view, lambda xs, a: (xs[0].view(a["size"]),), {"size"}, {"size"}, 1, (), True),
    "reshape": (cases_reshape, lambda xs, a: (xs[0].reshape(a["shape"]),), {"shape"}, {"shape"}, 1, (), True),
    "transpose": (cases_transpose, lambda xs, a: (torch.transpose(xs[0], **a),), {"dim0", "dim1"},
                  {"dim0", "dim1"}, 1, (), True),
    "narrow": (cases_narrow, lambda xs, a: (torch.narrow(xs[0], **a),), {"dim", "start", "length"},
               {"dim", "start", "length"}, 1, (), True),
    "split": (cases_split, lambda xs, a: tuple(torch.split(xs[0], **a)), {"split_size_or_sections", "dim"},
              {"split_size_or_sections"}, 1, (), True),
    "chunk": (cases_chunk, lambda xs, a: tuple(torch.chunk(xs[0], **a)), {"chunks", "dim"}, {"chunks"}, 1,
              (), True),
    "cat": (cases_cat, lambda xs, a: (torch.cat(xs, **a),), {"dim"}, set(), None, (), True),
    "stack": (cases_stack, lambda xs, a: (torch.stack(xs, **a),), {"dim"}, set(), None, (), True),
    # ... and a tensor with a Python number (CASE_OP: written as add and mul cases)
    "add_scalar": (_scalar_cases("add"), _scalar_fn(torch.add), {"other"}, {"other"}, 1, (), True),
    "sub": (_scalar_cases("sub"), _scalar_fn(torch.sub), {"other"}, {"other"}, 1, (), True),
    "rsub": (_scalar_cases("rsub"), _scalar_fn(torch.rsub), {"other"}, {"other"}, 1, (), True),
    "mul_scalar": (_scalar_cases("mul"), _scalar_fn(torch.mul), {"other"}, {"other"}, 1, (), True),
    "div": (_scalar_cases("div"), _scalar_fn(torch.div), {"other"}, {"other"}, 1, (), True),
    "rdiv": (_scalar_cases("rdiv"), _scalar_fn(lambda x, s: s / x), {"other"}, {"other"}, 1, (), True),
}


# Inputs that may hold -inf (an additive attention mask); every other input is finite.
NONFINITE_INPUTS = {"scaled_dot_product_attention": {3}}


def case_seed(op, tag):
    # the same seed for every dtype: f16/bf16 inputs are roundings of the same f32 draws
    # (except where a builder re-draws, e.g. distinct values for max_pool2d)
    return zlib.crc32(f"{op}-{tag}".encode())


def build_case(op, dtype_name, dtype, c, seed):
    _, compute, allowed, required, n_in, nondiff, has_bwd = OPS[op]
    attrs = c["attrs"]
    assert set(attrs) <= allowed, (op, c["tag"], attrs)
    assert required <= set(attrs), (op, c["tag"], attrs)
    inputs = c["inputs"]
    assert (n_in is None or len(inputs) == n_in) and inputs[0] is not None, (op, c["tag"])

    xs, diff = [], []
    for k, t in enumerate(inputs):
        if t is None:
            xs.append(None)
            continue
        if t.is_floating_point():
            assert t.dtype == dtype, (op, c["tag"], k, t.dtype)
            assert torch.isfinite(t).all() or k in NONFINITE_INPUTS.get(op, ()), (op, c["tag"], k)
            x = t.to(torch.float64, copy=True)
            if has_bwd and c["bwd"] and k not in nondiff:
                x.requires_grad_(True)
                diff.append(k)
        else:   # integer indices, or a bool mask (never differentiable)
            assert (t.dtype == torch.int64 and (k in nondiff or dtype == torch.int64)) or \
                t.dtype == torch.bool, (op, c["tag"], k)   # or an i64 case's tensor
            x = t.clone()
        xs.append(x)

    if op == "relu":
        assert (inputs[0] != 0).all(), "relu input at the kink"
    outs = compute(xs, attrs)

    tensors = [(f"input.{k}", t) for k, t in enumerate(inputs) if t is not None]
    if has_bwd and c["bwd"]:
        R = Rng(seed ^ 0x5EED, dtype)
        go = R.randn(*outs[0].shape)
        tensors.append(("grad_output.0", go))
        grads = torch.autograd.grad(outs[0], [xs[k] for k in diff], go.to(torch.float64))
        for k, gr in zip(diff, grads):
            assert gr is not None and gr.shape == inputs[k].shape, (op, c["tag"], k)
    else:
        grads, diff = [], []
    for k, o in enumerate(outs):
        if o is not None:   # (clip_grad_norm_: no output for a parameter without a gradient)
            # an integer result (an i64 tensor with an int) is stored as it is: matched exactly
            tensors.append((f"output.{k}", o.detach().to(torch.float64 if o.is_floating_point()
                                                          else o.dtype).contiguous()))
    for k, gr in zip(diff, grads):
        tensors.append((f"grad_input.{k}", gr.detach().to(torch.float64).contiguous()))
    nonfinite = {f"input.{k}" for k in NONFINITE_INPUTS.get(op, ())}
    for name, t in tensors:
        if t.is_floating_point() and name not in nonfinite:
            assert torch.isfinite(t).all(), (op, c["tag"], name)

    meta = {"format": FORMAT, "op": CASE_OP.get(op, op),
            "attrs": json.dumps(attrs, separators=(",", ":")),
            "generator": GENERATOR, "torch": torch.__version__, "input_seed": str(seed)}
    return tensors, meta


def self_checks():
    philox_known_answers()
    # uniform stream layout: element i uses word i % 4 of counter i / 4
    b = philox_uniform_bits(9, 42, 7)
    c = philox4x32_10((2, 0, 7, 0), (42, 0))
    assert int(b[8]) == int(c[0])
    # keep rate of the dropout mask
    for p in (0.1, 0.5, 0.9):
        rate = dropout_keep_mask(1 << 16, p, 99, 0).mean()
        assert abs(rate - (1 - p)) < 0.01, (p, rate)
    assert dropout_keep_mask(1000, 0.0, 1, 2).all() and not dropout_keep_mask(1000, 1.0, 1, 2).any()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(here, "cases"), help="output directory")
    ap.add_argument("--manifest", default=os.path.join(here, "MANIFEST.txt"), help="manifest path")
    ap.add_argument("--ops", default=None, help="comma-separated subset of ops (default: all)")
    args = ap.parse_args()

    torch.set_num_threads(1)            # fixed reduction order: identical bytes on every machine
    torch.use_deterministic_algorithms(True)
    self_checks()

    os.makedirs(args.out, exist_ok=True)
    for old in glob.glob(os.path.join(args.out, "*.safetensors")):
        os.remove(old)

    ops = list(OPS) if args.ops is None else args.ops.split(",")
    manifest, per_op, total = [], {}, 0
    for op in ops:
        builder = OPS[op][0]
        for dtype_name, dtype in DTYPES + EXTRA_DTYPES.get(op, []):
            R = Rng(0, dtype)
            cases = builder(R)
            tags = [c["tag"] for c in cases]
            assert len(set(tags)) == len(tags), (op, tags)
            for c in cases:
                tag = c["tag"]
                assert tag.isalnum() and tag == tag.lower(), tag
                seed = case_seed(op, tag)
                R.reseed(seed)
                c["inputs"] = c["make_inputs"]()
                tensors, meta = build_case(op, dtype_name, dtype, c, seed)
                name = f"{CASE_OP.get(op, op)}-{dtype_name}-{tag}.safetensors"
                path = os.path.join(args.out, name)
                write_safetensors(path, tensors, meta)
                check_round_trip(path, tensors, meta)
                size = os.path.getsize(path)
                total += size
                per_op[op] = per_op.get(op, 0) + 1
                shape = json.dumps(list(c["inputs"][0].shape), separators=(",", ":"))
                manifest.append(f"{name} {CASE_OP.get(op, op)} {dtype_name} {shape}")

    with open(args.manifest, "w") as f:
        f.write("# tandem golden cases written by suites/golden/gen_cases.py: file op dtype input.0-shape\n")
        f.write("\n".join(manifest) + "\n")
    for op in ops:
        print(f"{op:14s} {per_op[op]:3d} files")
    print(f"{len(manifest)} files, {total} bytes ({total / 2 ** 20:.2f} MiB)")


if __name__ == "__main__":
    main()
