#!/usr/bin/python3
# Golden training-trajectory generator for tandem: writes one `tandem-train/1` safetensors file per
# (model, optimizer, amp) into suites/golden/train/. tandem's `bench train` trains the same model
# from the stored initial weights on the stored data and compares its losses and final weights.
# Besides PyTorch's own f32 or bf16 run, each f32 (`-off`) file holds PyTorch runs at precisions its
# CPU build lacks, emulated in f32: TF32 matmuls and convolutions (two roundings) and fp16 autocast.
#
#   /usr/bin/python3 suites/golden/gen_train.py --out suites/golden/train
#
# Needs only torch and numpy; the safetensors writer/reader is gen_cases.py's.
"""tandem golden training-trajectory generator (see suites/golden/README.md)."""

import argparse
import glob
import json
import os
import re
import sys
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True         # importing gen_cases leaves no __pycache__ behind
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_cases import check_round_trip, read_safetensors, write_safetensors  # noqa: E402

FORMAT = "tandem-train/1"
GENERATOR = "suites/golden/gen_train.py"
STEPS = 20
CLASSES = 5

# tag -> (SPEC, batch, samples)
MODELS = {
    "mlp": ("mlp:20-64-32-5", 16, 100),
    "cnn": ("cnn:3x8x8/c8k3p1-bn-relu-mp2-c8k3p1-bn-relu-ap2-flat-fc5", 8, 64),
}

# opt -> hyper-parameters (torch.optim defaults for everything not listed in the brief)
OPTS = {
    "sgd": dict(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=False),
    "adam": dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False),
    "adamw": dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, amsgrad=False),
}
AMPS = ("off", "bf16")
EMULATED = ("tf32_rna", "tf32_rz", "fp16")   # the extra runs of an `-off` file (below)

# ---------------------------------------------------------------------------------------------
# tandem's model grammar
# ---------------------------------------------------------------------------------------------
#
#   mlp:N0-N1-...-Nk      Linear(N0,N1), ReLU(), Linear(N1,N2), ReLU(), ..., Linear(N(k-1),Nk)
#                         (a ReLU between consecutive Linears, none after the last; input (N0,))
#   cnn:CxHxW/T1-T2-...   input (C,H,W); each token is one module of the Sequential, in order:
#       cO[kK][sS][pP]    Conv2d(ch, O, K, stride=S, padding=P, bias=True); K 3, S 1, P 0 by default
#       bn                BatchNorm2d(ch) (eps 1e-5, momentum 0.1, affine, running stats)
#       relu | gelu       ReLU() | GELU() (exact erf form)
#       mpK[sS]           MaxPool2d(K, stride=S), S = K by default (no padding, floor mode)
#       apK[sS]           AvgPool2d(K, stride=S), S = K by default (no padding, floor mode)
#       flat              Flatten() (from dim 1)
#       fcN               Linear(in_features, N)
#
# Modules are numbered as in torch.nn.Sequential, so state_dict names are `<index>.weight`, ...

_CONV = re.compile(r"c(\d+)(?:k(\d+))?(?:s(\d+))?(?:p(\d+))?")
_POOL = re.compile(r"(mp|ap)(\d+)(?:s(\d+))?")
_FC = re.compile(r"fc(\d+)")


def _pos(v, what, spec):
    if v <= 0:
        raise ValueError(f"{spec}: {what} must be positive")
    return v


def parse_spec(spec):
    """SPEC -> (input shape tuple, list of (kind, args) with args fully resolved, output shape)."""
    kind, sep, body = spec.partition(":")
    if not sep or not body:
        raise ValueError(f"{spec}: expected 'mlp:...' or 'cnn:...'")
    layers = []
    if kind == "mlp":
        if len(body.split("-")) < 2 or any(not w.isdigit() for w in body.split("-")):
            raise ValueError(f"{spec}: mlp needs at least two decimal widths")
        widths = [_pos(int(w), "width", spec) for w in body.split("-")]
        for i in range(len(widths) - 1):
            if i:
                layers.append(("relu", {}))
            layers.append(("linear", dict(in_features=widths[i], out_features=widths[i + 1])))
        return (widths[0],), layers, (widths[-1],)
    if kind != "cnn":
        raise ValueError(f"{spec}: unknown model kind {kind!r}")
    inp, sep, toks = body.partition("/")
    dims = inp.split("x")
    if not sep or len(dims) != 3 or not all(d.isdigit() for d in dims):
        raise ValueError(f"{spec}: cnn input must be CxHxW/tokens")
    shape = tuple(_pos(int(d), "input dim", spec) for d in dims)
    in_shape = shape
    for tok in toks.split("-"):
        if len(shape) != 3 and (tok == "bn" or _CONV.fullmatch(tok) or _POOL.fullmatch(tok)):
            raise ValueError(f"{spec}: {tok!r} after flat")
        if m := _CONV.fullmatch(tok):
            o, k, s, p = (int(g) if g is not None else d for g, d in zip(m.groups(), (None, 3, 1, 0)))
            c, h, w = shape
            a = dict(in_channels=c, out_channels=_pos(o, "channels", spec), kernel_size=_pos(k, "kernel", spec),
                     stride=_pos(s, "stride", spec), padding=p)
            h, w = ((n + 2 * p - k) // s + 1 for n in (h, w))
            layers.append(("conv2d", a))
            shape = (o, h, w)
        elif m := _POOL.fullmatch(tok):
            k = _pos(int(m.group(2)), "pool kernel", spec)
            s = _pos(int(m.group(3)) if m.group(3) is not None else k, "pool stride", spec)
            c, h, w = shape
            layers.append(({"mp": "max_pool2d", "ap": "avg_pool2d"}[m.group(1)], dict(kernel_size=k, stride=s)))
            h, w = ((n - k) // s + 1 for n in (h, w))
            shape = (c, h, w)
        elif tok == "bn":
            layers.append(("batch_norm2d", dict(num_features=shape[0])))
        elif tok in ("relu", "gelu"):
            layers.append((tok, {}))
        elif tok == "flat":
            layers.append(("flatten", {}))
            shape = (shape[0] * shape[1] * shape[2],) if len(shape) == 3 else shape
        elif m := _FC.fullmatch(tok):
            if len(shape) != 1:
                raise ValueError(f"{spec}: fc needs flat input (add 'flat')")
            layers.append(("linear", dict(in_features=shape[0], out_features=_pos(int(m.group(1)), "fc width", spec))))
            shape = (int(m.group(1)),)
        else:
            raise ValueError(f"{spec}: unknown token {tok!r}")
        if len(shape) == 3 and min(shape[1:]) <= 0:
            raise ValueError(f"{spec}: spatial size vanishes at {tok!r}")
    return in_shape, layers, shape


def build_model(spec):
    in_shape, layers, out_shape = parse_spec(spec)
    make = {
        "linear": lambda a: nn.Linear(a["in_features"], a["out_features"]),
        "conv2d": lambda a: nn.Conv2d(a["in_channels"], a["out_channels"], a["kernel_size"],
                                      stride=a["stride"], padding=a["padding"], bias=True),
        "batch_norm2d": lambda a: nn.BatchNorm2d(a["num_features"], eps=1e-5, momentum=0.1),
        "relu": lambda a: nn.ReLU(),
        "gelu": lambda a: nn.GELU(),
        "max_pool2d": lambda a: nn.MaxPool2d(a["kernel_size"], stride=a["stride"]),
        "avg_pool2d": lambda a: nn.AvgPool2d(a["kernel_size"], stride=a["stride"]),
        "flatten": lambda a: nn.Flatten(),
    }
    return nn.Sequential(*(make[k](a) for k, a in layers)), in_shape, out_shape


def ill_conditioned(spec):
    """state_dict names whose trajectory is set by rounding noise: the bias of a conv directly
    followed by bn has an exactly zero gradient (bn subtracts the per-channel mean), so its f32
    gradient is pure rounding noise, which Adam/AdamW normalise into steps of size ~lr; the bn's
    running_mean carries that bias. Compare these only loosely (absolute ~ steps * lr) or skip them."""
    _, layers, _ = parse_spec(spec)
    out = []
    for i in range(len(layers) - 1):
        if layers[i][0] == "conv2d" and layers[i + 1][0] == "batch_norm2d":
            out += [f"{i}.bias", f"{i + 1}.running_mean"]
    return out


def grammar_self_checks():
    m, i, o = build_model(MODELS["cnn"][0])
    want = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AvgPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 2 * 2, 5))
    assert repr(m) == repr(want) and i == (3, 8, 8) and o == (5,), repr(m)
    m, i, o = build_model(MODELS["mlp"][0])
    want = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 5))
    assert repr(m) == repr(want) and i == (20,) and o == (5,), repr(m)
    _, _, o = parse_spec("cnn:1x9x9/c4k3s2-mp3s1-ap2-gelu-flat-fc2")
    assert o == (2,)
    assert parse_spec("cnn:1x9x9/c4k3s2")[1][0][1] == dict(in_channels=1, out_channels=4, kernel_size=3,
                                                           stride=2, padding=0)
    assert parse_spec("cnn:1x9x9/c4k3s2")[2] == (4, 4, 4)
    assert ill_conditioned(MODELS["cnn"][0]) == ["0.bias", "1.running_mean", "4.bias", "5.running_mean"]
    assert ill_conditioned(MODELS["mlp"][0]) == []
    for bad in ("mlp:20", "cnn:3x8/c8", "cnn:3x8x8/fc5", "cnn:3x8x8/c8q", "cnn:3x4x4/mp8", "rnn:1-2",
                "cnn:3x8x8/flat-bn"):
        try:
            parse_spec(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted bad spec {bad!r}")


# ---------------------------------------------------------------------------------------------
# precisions PyTorch's CPU build lacks, emulated in f32
# ---------------------------------------------------------------------------------------------
#
# tf32_rna, tf32_rz   f32 training whose Linear and Conv2d multiply on TF32 tensor cores, as
#     cuBLAS/cuDNN do with allow_tf32: every tensor operand of the forward product and of both
#     backward products (x and W; dy and W; dy and x) is rounded to TF32 (10 mantissa bits) and
#     the exact products are summed in f32; the bias add and the bias gradient stay f32. NVIDIA
#     does not document the f32 -> TF32 conversion, so both: to nearest with ties away from zero
#     (rna, as PTX's cvt.rna.tf32.f32) and truncation (rz).
# fp16                PyTorch's CUDA autocast to float16 with a GradScaler (1.13's policy): Conv2d
#     and Linear cast input, weight and bias to f16 and return f16 (f32 accumulation, rounded
#     once); batch_norm takes the f16 input with its f32 weight, bias and running statistics and
#     returns f16 (computed in f32); relu, pools and flatten run on f16 (avg_pool accumulating in
#     f32); cross_entropy runs in f32. Every f16 activation is held in f32 and rounded to f16 on
#     the way forward, and the gradient that flows back to it on the way back (an f16 tensor's
#     gradient is f16); the f32 master weights get the gradients of their f16 copies. The scaler
#     is PyTorch's defaults: loss x 65536, gradients x 2^-16 (exact), a step with a non-finite
#     gradient skipped and the scale halved; it grows only after 2000 steps (never here).

FP16_SCALE = 65536.0
FP16_GROWTH_INTERVAL = 2000


def round_tf32(t, mode):
    """f32 -> TF32 (in f32): mode 'rna' to nearest, ties away from zero; 'rz' truncated; None
    leaves t (self-checks run the functions below in f64 with it)."""
    if mode is None:
        return t
    assert t.dtype == torch.float32
    i = t.contiguous().view(torch.int32)       # sign and magnitude: adding to the bits rounds |t|
    if mode == "rna":
        i = i + 0x1000
    return (i & ~0x1FFF).view(torch.float32)


class Tf32Linear(torch.autograd.Function):
    """F.linear on TF32 operands, x (B, in), w (out, in), b (out,): y = r(x) r(w)^T + b;
    dx = r(dy) r(w), dw = r(dy)^T r(x), db = sum_B dy."""

    @staticmethod
    def forward(ctx, x, w, b, mode):
        assert x.dim() == 2
        ctx.save_for_backward(x, w)
        ctx.mode = mode
        return F.linear(round_tf32(x, mode), round_tf32(w, mode)) + b

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        r = lambda t: round_tf32(t, ctx.mode)  # noqa: E731
        return r(dy) @ r(w), r(dy).t() @ r(x), dy.sum(0), None


class Tf32Conv2d(torch.autograd.Function):
    """F.conv2d on TF32 operands, x (N, C, H, W), w (O, C, kh, kw), b (O,): forward, data and
    weight gradients (torch.nn.grad, PyTorch's own convolution_backward) on rounded tensors."""

    @staticmethod
    def forward(ctx, x, w, b, stride, padding, mode):
        ctx.save_for_backward(x, w)
        ctx.conf = (stride, padding, mode)
        return F.conv2d(round_tf32(x, mode), round_tf32(w, mode), None, stride, padding) + b.view(1, -1, 1, 1)

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        stride, padding, mode = ctx.conf
        r = lambda t: round_tf32(t, mode)  # noqa: E731
        dx = torch.nn.grad.conv2d_input(x.shape, r(w), r(dy), stride, padding)
        dw = torch.nn.grad.conv2d_weight(r(x), w.shape, r(dy), stride, padding)
        return dx, dw, dy.sum((0, 2, 3)), None, None, None


class F16(torch.autograd.Function):
    """An f16 tensor held in f32: rounds the value forward and its gradient backward."""

    @staticmethod
    def forward(ctx, x):
        return x.half().float()

    @staticmethod
    def backward(ctx, g):
        return g.half().float()


def forward(model, x, prec):
    """model(x) at prec: PyTorch's own kernels for f64/f32/bf16 (autocast is the caller's), the
    emulations above for tf32_rna, tf32_rz and fp16."""
    if prec in ("tf32_rna", "tf32_rz"):
        mode = prec[5:]
        for m in model:
            if isinstance(m, nn.Linear):
                x = Tf32Linear.apply(x, m.weight, m.bias, mode)
            elif isinstance(m, nn.Conv2d):
                x = Tf32Conv2d.apply(x, m.weight, m.bias, m.stride, m.padding, mode)
            else:
                x = m(x)
        return x
    if prec == "fp16":
        h = F16.apply
        x = h(x)
        for m in model:
            if isinstance(m, nn.Linear):
                x = F.linear(x, h(m.weight), h(m.bias))
            elif isinstance(m, nn.Conv2d):
                x = F.conv2d(x, h(m.weight), h(m.bias), m.stride, m.padding)
            else:
                x = m(x)
            x = h(x)
        return x
    return model(x)


def emulation_self_checks():
    one = torch.tensor([1 + 2 ** -11, -(1 + 2 ** -11), 1 + 3 * 2 ** -11, 1 + 2 ** -11 - 2 ** -23,
                        1 + 2 ** -10 + 2 ** -23])
    assert round_tf32(one, "rna").tolist() == [1 + 2 ** -10, -(1 + 2 ** -10), 1 + 2 ** -9, 1.0, 1 + 2 ** -10]
    assert round_tf32(one, "rz").tolist() == [1.0, -1.0, 1 + 2 ** -10, 1.0, 1 + 2 ** -10]
    g = torch.Generator().manual_seed(1)
    v = torch.randn(10000, generator=g) * torch.pow(10.0, torch.randint(-20, 20, (10000,), generator=g).float())
    for mode, u in (("rna", 2 ** -11), ("rz", 2 ** -10)):
        t = round_tf32(v, mode)
        assert (t.view(torch.int32) & 0x1FFF).eq(0).all() and ((t - v).abs() <= u * v.abs()).all()
        assert mode == "rna" or (t.abs() <= v.abs()).all()
    # the backward formulas, in f64 without rounding (torch.autograd.gradcheck)
    d = dict(dtype=torch.float64, requires_grad=True)
    x, w, b = torch.randn(3, 5, **d), torch.randn(4, 5, **d), torch.randn(4, **d)
    assert torch.autograd.gradcheck(lambda x, w, b: Tf32Linear.apply(x, w, b, None), (x, w, b))
    assert torch.allclose(Tf32Linear.apply(x, w, b, None), F.linear(x, w, b))
    x, w, b = torch.randn(2, 3, 7, 6, **d), torch.randn(4, 3, 3, 3, **d), torch.randn(4, **d)
    for stride, padding in (((1, 1), (1, 1)), ((2, 2), (0, 0))):
        f = lambda x, w, b: Tf32Conv2d.apply(x, w, b, stride, padding, None)  # noqa: E731
        assert torch.autograd.gradcheck(f, (x, w, b))
        assert torch.allclose(f(x, w, b), F.conv2d(x, w, b, stride, padding))
    # F16 rounds forward and backward
    x = torch.tensor([1 + 2 ** -12, 1e5], requires_grad=True)
    y = F16.apply(x)
    y.backward(torch.tensor([1 + 2 ** -12, 3.0]))
    assert y.tolist() == [1.0, float("inf")] and x.grad.tolist() == [1.0, 3.0]


# ---------------------------------------------------------------------------------------------
# data, init, training
# ---------------------------------------------------------------------------------------------

def seed_of(s):
    return zlib.crc32(s.encode())


def make_data(tag, in_shape, samples):
    """x ~ randn (f32); y = argmax(flatten(x) @ W) for a fixed random W (computed in f64)."""
    g = torch.Generator().manual_seed(seed_of(f"tandem-train-data-{tag}"))
    x = torch.randn((samples,) + in_shape, generator=g, dtype=torch.float32)
    n_in = x[0].numel()
    w = torch.randn(n_in, CLASSES, generator=g, dtype=torch.float32)
    logits = x.reshape(samples, n_in).double() @ w.double()
    top2 = logits.topk(2, dim=1).values
    assert (top2[:, 0] - top2[:, 1]).min() > 1e-6, "near tie in the labels"
    return x, logits.argmax(dim=1).to(torch.int64)


def make_init(tag, spec):
    torch.manual_seed(seed_of(f"tandem-train-init-{tag}"))
    model, in_shape, _ = build_model(spec)          # PyTorch's default init
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, in_shape


def make_opt(name, params):
    h = OPTS[name]
    if name == "sgd":
        return torch.optim.SGD(params, foreach=False, **h)
    cls = torch.optim.Adam if name == "adam" else torch.optim.AdamW
    return cls(params, foreach=False, **h)


def train(spec, init, x, y, opt_name, batch, prec):
    """Returns (losses (steps,), final state_dict). prec: f64 (model and data in double), f32,
    bf16 (PyTorch's CPU autocast), or one of EMULATED (f32 model and data, forward() above)."""
    model, _, _ = build_model(spec)
    model.load_state_dict(init)
    f64 = prec == "f64"
    if f64:
        model.double()
        x = x.double()
    model.train()
    opt = make_opt(opt_name, model.parameters())
    n = x.shape[0]
    losses = []
    scale = FP16_SCALE
    assert STEPS < FP16_GROWTH_INTERVAL
    for i in range(STEPS):
        idx = torch.arange(i * batch, (i + 1) * batch) % n
        xb, yb = x[idx], y[idx]
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(prec == "bf16")):
            out = forward(model, xb, prec)
            loss = F.cross_entropy(out, yb)
        want = torch.float64 if f64 else torch.float32
        assert loss.dtype == want, loss.dtype
        assert out.dtype == (torch.bfloat16 if prec == "bf16" else want), out.dtype
        if prec == "fp16":
            (loss * scale).backward()
            grads = [p.grad for p in model.parameters()]
            if all(torch.isfinite(g).all() for g in grads):
                for g in grads:
                    g.mul_(1 / scale)
                opt.step()
            else:
                scale *= 0.5
        else:
            loss.backward()
            opt.step()
        losses.append(loss.detach().clone())
    final = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return torch.stack(losses), final


def rel_dev(a, b):
    """max |a - b| / max |b| over one tensor (normwise relative deviation, inf-norm)."""
    a, b = a.double(), b.double()
    scale = b.abs().max().item()
    return (a - b).abs().max().item() / scale if scale > 0 else (a - b).abs().max().item()


def fmt(v):
    return repr(float(v))


def deviation(losses, final, loss64, fin64, spec):
    """A run's max |loss - loss.f64| and its worst max rel dfinal (worst tensor), with and without
    the ill_conditioned tensors."""
    devs = {k: rel_dev(final[k], fin64[k]) for k in fin64 if not k.endswith("num_batches_tracked")}
    worst = max(devs, key=devs.get)
    ill = set(ill_conditioned(spec))
    worst_wc = max((k for k in devs if k not in ill), key=devs.get)
    return dict(dev_loss=(losses.double() - loss64).abs().max().item(), dev_final=devs[worst], worst=worst,
                dev_wc=devs[worst_wc], worst_wc=worst_wc)


def build_file(tag, opt_name, amp, init, x, y):
    """The file's tensors and metadata, and stats[run] = deviation() for every run but f64."""
    spec, batch, samples = MODELS[tag]
    runs = {"f64": train(spec, init, x, y, opt_name, batch, "f64"),
            "torch": train(spec, init, x, y, opt_name, batch, "f32" if amp == "off" else amp)}
    for prec in EMULATED if amp == "off" else ():
        runs[prec] = train(spec, init, x, y, opt_name, batch, prec)
    loss64, fin64 = runs["f64"]
    for run, (losses, final) in runs.items():
        assert torch.isfinite(losses).all(), run
        for k, v in init.items():
            if k.endswith("num_batches_tracked"):
                assert v.shape == () and v.item() == 0 and final[k].item() == STEPS, (run, k)
            else:
                assert final[k].dtype == (torch.float64 if run == "f64" else v.dtype), (run, k)
            assert final[k].shape == v.shape, (run, k)

    tensors = [(f"init.{k}", v) for k, v in init.items()]
    tensors += [("x", x), ("y", y), ("loss.f64", loss64), ("loss.torch", runs["torch"][0])]
    tensors += [(f"final.f64.{k}", v) for k, v in fin64.items()]
    tensors += [(f"final.torch.{k}", v) for k, v in runs["torch"][1].items()]
    for prec in EMULATED if amp == "off" else ():   # after the others: their bytes stay put
        tensors += [(f"loss.{prec}", runs[prec][0])]
        tensors += [(f"final.{prec}.{k}", v) for k, v in runs[prec][1].items()]
    h = OPTS[opt_name]
    na = ""                                  # not applicable to this optimizer
    meta = {
        "format": FORMAT, "model": spec, "opt": opt_name, "lr": fmt(h["lr"]),
        "momentum": fmt(h["momentum"]) if "momentum" in h else na,
        "weight_decay": fmt(h["weight_decay"]),
        "betas": json.dumps(list(h["betas"]), separators=(",", ":")) if "betas" in h else na,
        "eps": fmt(h["eps"]) if "eps" in h else na,
        "batch": str(batch), "steps": str(STEPS), "amp": amp, "samples": str(samples),
        "loss": "cross_entropy", "generator": GENERATOR, "torch": torch.__version__,
        "init_seed": str(seed_of(f"tandem-train-init-{tag}")),
        "data_seed": str(seed_of(f"tandem-train-data-{tag}")),
        "ill_conditioned": json.dumps(ill_conditioned(spec), separators=(",", ":")),
    }
    stats = {run: deviation(*runs[run], loss64, fin64, spec) for run in runs if run != "f64"}
    stats["loss_first"], stats["loss_last"] = loss64[0].item(), loss64[-1].item()
    return tensors, meta, stats


def check_file(path, tensors, meta, init, x, y):
    """Re-read with the reader and check names, dtypes, shapes and values independently."""
    check_round_trip(path, tensors, meta)
    m, got = read_safetensors(path)
    assert m["format"] == FORMAT and m["steps"] == str(STEPS)
    assert torch.equal(got["x"], x) and got["x"].dtype == torch.float32
    assert torch.equal(got["y"], y) and got["y"].dtype == torch.int64
    runs = ("f64", "torch") + (EMULATED if m["amp"] == "off" else ())
    for run in runs:
        t = got[f"loss.{run}"]
        assert t.dtype == (torch.float64 if run == "f64" else torch.float32) and t.shape == (STEPS,), run
    for k, v in init.items():
        assert torch.equal(got[f"init.{k}"], v)
        for run in runs:
            t = got[f"final.{run}.{k}"]
            assert t.shape == v.shape, k
            dt = torch.float64 if run == "f64" else torch.float32
            assert t.dtype == (torch.int64 if v.dtype == torch.int64 else dt), (k, t.dtype)
    assert len(got) == len(init) + 2 + len(runs) * (1 + len(init))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(here, "train"), help="output directory")
    args = ap.parse_args()

    torch.set_num_threads(1)            # fixed reduction order: identical bytes on every run
    torch.use_deterministic_algorithms(True)
    grammar_self_checks()
    emulation_self_checks()

    os.makedirs(args.out, exist_ok=True)
    for old in glob.glob(os.path.join(args.out, "*.safetensors")):
        os.remove(old)

    rows, total = [], 0
    for tag, (spec, batch, samples) in MODELS.items():
        init, in_shape = make_init(tag, spec)
        x, y = make_data(tag, in_shape, samples)
        for opt_name in OPTS:
            for amp in AMPS:
                tensors, meta, st = build_file(tag, opt_name, amp, init, x, y)
                name = f"{tag}-{opt_name}-{amp}.safetensors"
                path = os.path.join(args.out, name)
                write_safetensors(path, tensors, meta)
                check_file(path, tensors, meta, init, x, y)
                size = os.path.getsize(path)
                total += size
                rows.append((name, size, st))

    print("| file | bytes | loss[0] | loss[19] | max abs dloss | max rel dfinal (worst) "
          "| same, without ill_conditioned (worst) |")
    print("|---|---:|---:|---:|---:|---|---|")
    for name, size, st in rows:
        t = st["torch"]
        print(f"| {name} | {size} | {st['loss_first']:.4f} | {st['loss_last']:.4f} | {t['dev_loss']:.2e} "
              f"| {t['dev_final']:.2e} ({t['worst']}) | {t['dev_wc']:.2e} ({t['worst_wc']}) |")
    print("\n| file | run | max abs dloss | max rel dfinal (worst) | same, without ill_conditioned (worst) |")
    print("|---|---|---:|---|---|")
    for name, size, st in rows:
        for run in (r for r in EMULATED if r in st):
            t = st[run]
            print(f"| {name} | {run} | {t['dev_loss']:.2e} | {t['dev_final']:.2e} ({t['worst']}) "
                  f"| {t['dev_wc']:.2e} ({t['worst_wc']}) |")
    print(f"{len(rows)} files, {total} bytes ({total / 2 ** 20:.3f} MiB)")


if __name__ == "__main__":
    main()
