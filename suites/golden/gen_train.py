#!/usr/bin/python3
# Golden training-trajectory generator for tandem: writes one `tandem-train/1` safetensors file per
# (model, optimizer, amp) into suites/golden/train/. tandem's `bench train` trains the same model
# from the stored initial weights on the stored data and compares its losses and final weights.
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


def train(spec, init, x, y, opt_name, amp, batch, f64):
    """Returns (losses (steps,), final state_dict). f64: model and data in double, autocast off."""
    model, _, _ = build_model(spec)
    model.load_state_dict(init)
    if f64:
        model.double()
        x = x.double()
    model.train()
    opt = make_opt(opt_name, model.parameters())
    n = x.shape[0]
    losses = []
    for i in range(STEPS):
        idx = torch.arange(i * batch, (i + 1) * batch) % n
        xb, yb = x[idx], y[idx]
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(amp == "bf16" and not f64)):
            out = model(xb)
            loss = F.cross_entropy(out, yb)
        want = torch.float64 if f64 else torch.float32
        assert loss.dtype == want, loss.dtype
        assert out.dtype == (want if f64 or amp == "off" else torch.bfloat16), out.dtype
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


def build_file(tag, opt_name, amp, init, x, y):
    spec, batch, samples = MODELS[tag]
    loss64, fin64 = train(spec, init, x, y, opt_name, amp, batch, True)
    loss32, fin32 = train(spec, init, x, y, opt_name, amp, batch, False)
    for k, v in init.items():
        assert fin64[k].dtype == (torch.int64 if k.endswith("num_batches_tracked") else torch.float64), k
        assert fin32[k].dtype == v.dtype and fin32[k].shape == v.shape, k
        if k.endswith("num_batches_tracked"):
            assert v.shape == () and v.item() == 0 and fin64[k].item() == fin32[k].item() == STEPS, k
    assert torch.isfinite(loss64).all() and torch.isfinite(loss32).all()

    tensors = [(f"init.{k}", v) for k, v in init.items()]
    tensors += [("x", x), ("y", y), ("loss.f64", loss64), ("loss.torch", loss32)]
    tensors += [(f"final.f64.{k}", v) for k, v in fin64.items()]
    tensors += [(f"final.torch.{k}", v) for k, v in fin32.items()]
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
    dev_loss = (loss32.double() - loss64).abs().max().item()
    devs = {k: rel_dev(fin32[k], fin64[k]) for k in init if not k.endswith("num_batches_tracked")}
    worst = max(devs, key=devs.get)
    ill = set(ill_conditioned(spec))
    worst_wc = max((k for k in devs if k not in ill), key=devs.get)
    stats = dict(loss_first=loss64[0].item(), loss_last=loss64[-1].item(), dev_loss=dev_loss,
                 dev_final=devs[worst], worst=worst, dev_wc=devs[worst_wc], worst_wc=worst_wc)
    return tensors, meta, stats


def check_file(path, tensors, meta, init, x, y):
    """Re-read with the reader and check names, dtypes, shapes and values independently."""
    check_round_trip(path, tensors, meta)
    m, got = read_safetensors(path)
    assert m["format"] == FORMAT and m["steps"] == str(STEPS)
    assert torch.equal(got["x"], x) and got["x"].dtype == torch.float32
    assert torch.equal(got["y"], y) and got["y"].dtype == torch.int64
    assert got["loss.f64"].dtype == torch.float64 and got["loss.f64"].shape == (STEPS,)
    assert got["loss.torch"].dtype == torch.float32 and got["loss.torch"].shape == (STEPS,)
    for k, v in init.items():
        assert torch.equal(got[f"init.{k}"], v)
        for run, dt in (("f64", torch.float64), ("torch", torch.float32)):
            t = got[f"final.{run}.{k}"]
            assert t.shape == v.shape, k
            assert t.dtype == (torch.int64 if v.dtype == torch.int64 else dt), (k, t.dtype)
    assert len(got) == 3 * len(init) + 4


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(here, "train"), help="output directory")
    args = ap.parse_args()

    torch.set_num_threads(1)            # fixed reduction order: identical bytes on every run
    torch.use_deterministic_algorithms(True)
    grammar_self_checks()

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
        print(f"| {name} | {size} | {st['loss_first']:.4f} | {st['loss_last']:.4f} | {st['dev_loss']:.2e} "
              f"| {st['dev_final']:.2e} ({st['worst']}) | {st['dev_wc']:.2e} ({st['worst_wc']}) |")
    print(f"{len(rows)} files, {total} bytes ({total / 2 ** 20:.3f} MiB)")


if __name__ == "__main__":
    main()
