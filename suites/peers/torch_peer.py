#!/usr/bin/env python3
"""torch_peer.py — the PyTorch peer: runs PyTorch versions of tandem's benchmark suites (ops,
transfer, amp, cudnn, cpu-vs-gpu, transformer, reductions, graphs, pipeline, scaling) and writes a results directory in tandem's format
(docs/RESULTS_FORMAT.md), so `bench compare`, `bench plot` and `bench report` treat PyTorch as one
more run. docs/PEERS.md says what is compared and how the comparison is kept fair.

Same workloads as tandem's suites (suites/bench/*.c, names fixed by the suites' spec): the same
shapes, dtypes, models, batch sizes and optimizer; random N(0,1) inputs (never zeros); the same
repetition semantics as `bench run` (Google Benchmark's: an untimed warm-up of min(min-time, 0.1) s,
then per repetition the iteration count grown until one run lasts --min-time, the time per
iteration of that run recorded); CUDA events around the timed loop on a GPU, time.perf_counter on
the CPU; the median over repetitions in the CSVs; each benchmark checks the data it produced after
timing it, and a failed check fails the benchmark (no CSV rows, status.json "failed", exit 1).

Uses only the standard library and torch; works with PyTorch 1.13 (Debian's, CPU) and 2.x (CUDA).
Exit: 0 done, 1 a benchmark failed, 2 bad arguments, 3 no usable torch in this python,
128+signal when interrupted (after the current benchmark, as bench run).
"""
import argparse
import datetime
import errno
import json
import math
import os
import platform
import re
import signal
import socket
import stat
import subprocess
import sys
import time

FORMAT = "tandem-results/1"
SEED = 20261122
U = {"f32": 2.0**-24, "tf32": 2.0**-11, "fp16": 2.0**-11, "bf16": 2.0**-8}  # unit roundoffs

# ---- sizes and models (must match suites/bench/*.c and /work/brief/suites_spec.md) ------------

# ops (suites/bench/ops_cpu.c)
OPS_MATMUL_N = [64, 128, 256]
OPS_ADD_N = 1 << 20
OPS_SOFTMAX = (256, 1024)
OPS_CONV = (4, 16, 32, 32, 3)           # n, c, hw, o, k
OPS_MLP = [256, 128, 10]                # mlp:256-128-10, SGD lr 0.01
OPS_MLP_BATCH = 64

# transfer (suites/bench/transfer.c): powers of two 1 KiB .. 1 GiB plus 1e6..1e9; quick 1 KiB..4 MiB
TRANSFER_SIZES = sorted(set([1 << k for k in range(10, 31)] + [10**6, 10**7, 10**8, 10**9]))
TRANSFER_SIZES_QUICK = [s for s in TRANSFER_SIZES if s <= 4 << 20]   # with 1e6, as tandem

# amp and cpu-vs-gpu (suites/bench/amp.c, cpu_vs_gpu.c)
MODELS = {  # name -> (spec in tandem's grammar, input shape without batch)
    "mlp_1000_512_10": ("mlp:1000-512-10", (1000,)),
    "mlp_1000_512_128_10": ("mlp:1000-512-128-10", (1000,)),
    "mlp_10000_5000_2000_10": ("mlp:10000-5000-2000-10", (10000,)),   # cuda only
    "cnn_bn": ("cnn:3x32x32/c8p1-bn-relu-mp2-c16p1-bn-relu-mp2-flat-fc10", (3, 32, 32)),
}
CUDA_ONLY_MODELS = {"mlp_10000_5000_2000_10"}
TRAIN_BATCHES, TRAIN_BATCHES_QUICK = [64, 256, 1024], [64]   # cpu-vs-gpu; amp on a GPU
AMP_TRAIN_BATCHES_CPU = [64, 256]       # amp on the cpu (--quick: the first)
TRAIN_LR = 0.01                         # plain SGD, as ops' mlp_train
# matmul_<prec>/n:N and conv_<prec>/batch:B (3x3 64->64 on 56x56); --quick: the first of each
AMP_MATMUL_N = {"cuda": [1024, 2048, 4096, 8192], "cpu": [128, 256]}
AMP_CONV_BATCHES = {"cuda": [8, 32, 128], "cpu": [1, 4]}
AMP_PRODUCT_FLOP = 2.0**38   # amp.c's reps_for: products per timed iteration on a GPU

# nanoGPT's GPT (suites/bench/bench_train.c's bench_gpt_*): tag -> (n_layer, n_head, n_embd,
# block_size = the rows' length, vocab_size). amp: GPT-2 124M on a GPU (T256 with --quick), the tiny
# one on the CPU; cpu-vs-gpu: the tiny one on both. BENCH_GPT_BATCH rows per step.
GPT_MODELS = {"gpt_124m": (12, 12, 768, 1024, 50257), "gpt_124m_t256": (12, 12, 768, 256, 50257),
              "gpt_tiny": (2, 2, 32, 16, 67)}
GPT_BATCH = 8
GPT_DATA_SEED = 2   # tandem's trainer: seed 1 + data offset 1 (the tokens are tandem's, draw for
                    # draw; the weights follow the same init scheme from torch's generator)

# cudnn (suites/bench/cudnn.c): the same layers, names and quick set as tandem's
# (bench.peer_cudnn_names checks the lists match). name -> (N, C, O, H=W, k, stride, padding)
CUDNN_LAYERS = {
    "resnet18": [("conv1", 32, 3, 64, 224, 7, 2, 3), ("layer1_3x3", 32, 64, 64, 56, 3, 1, 1),
                 ("layer2_3x3s2", 32, 64, 128, 56, 3, 2, 1),
                 ("layer2_down1x1", 32, 64, 128, 56, 1, 2, 0),
                 ("layer2_3x3", 32, 128, 128, 28, 3, 1, 1),
                 ("layer3_3x3", 32, 256, 256, 14, 3, 1, 1),
                 ("layer4_3x3", 32, 512, 512, 7, 3, 1, 1)],
    "resnet50": [("layer1_reduce1x1", 32, 256, 64, 56, 1, 1, 0),
                 ("layer1_expand1x1", 32, 64, 256, 56, 1, 1, 0),
                 ("layer3_expand1x1", 32, 256, 1024, 14, 1, 1, 0),
                 ("layer4_expand1x1", 32, 512, 2048, 7, 1, 1, 0)],
    "smallcnn": [("conv1", 64, 3, 32, 32, 3, 1, 1), ("conv2", 64, 32, 64, 16, 3, 1, 1)],
}
CUDNN_PASSES = ["fwd", "bwd_data", "bwd_filter"]
CUDNN_PRECS, CUDNN_PRECS_QUICK = ["f32", "tf32", "fp16", "bf16"], ["f32", "fp16"]
CUDNN_LAYOUTS = ["nchw", "nhwc"]   # nhwc: torch.channels_last (tandem: tdm_conv2d_params.layout)
CUDNN_MODES = [0, 1, 2]   # 0 heuristic, 1 cudnn.benchmark, 2 cudnn.deterministic
CUDNN_MODE_NAMES = ["heuristic", "benchmark", "deterministic"]
CUDNN_NETS = {  # whole training steps: name -> spec (input 3x32x32)
    "smallcnn": "cnn:3x32x32/c32k3p1-bn-relu-mp2-c64k3p1-bn-relu-mp2-flat-fc10",
    "widecnn": "cnn:3x32x32/c64k3p1-bn-relu-c64k3p1-bn-relu-mp2-c128k3p1-bn-relu-c128k3p1-bn-"
               "relu-mp2-c256k3p1-bn-relu-mp2-flat-fc10",
}
CUDNN_STEP_BATCHES, CUDNN_STEP_BATCHES_QUICK = [64, 256], [64]
# SGD's learning rate in the cudnn suite's training steps (suites/bench/cudnn.c's CUDNN_LR): at
# lr 0.01 these BatchNorm CNNs overshoot on their fixed random batch (the loss rises 2.84 -> 4.10
# after two steps, the same on the CPU reference and on an H100), so "the loss fell" failed
CUDNN_LR = 0.001

# The suites tandem knows that have no PyTorch version here (skipped with this reason): none now.
NOT_PORTED = {}

torch = None   # imported in main(), after the arguments are checked


class CheckFailed(Exception):
    """A benchmark's check of its own output failed: the benchmark fails, the run goes on."""


class SkipBenchmark(Exception):
    """A benchmark that cannot run with this PyTorch (torch.compile missing or failing): recorded
    in status.json's skipped with the reason, not a failure; the run goes on."""


# ---- timing -----------------------------------------------------------------------------------

def is_cuda(dev):
    return dev.type == "cuda"


def timed(dev, body, iters):
    """Seconds for `iters` calls of body(): CUDA events on the current stream on a GPU (the work
    of every stream the body uses joins it before the end event), perf_counter on the CPU."""
    if is_cuda(dev):
        torch.cuda.synchronize(dev)
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        for _ in range(iters):
            body()
        t1.record()
        t1.synchronize()
        return t0.elapsed_time(t1) / 1e3
    t0 = time.perf_counter()
    for _ in range(iters):
        body()
    return time.perf_counter() - t0


def run_until(dev, body, min_time, max_iters=10**9, time_iters=None):
    """Google Benchmark 1.7's iteration-count search: start with 1 iteration, multiply by
    min(10, 1.4 * min_time / elapsed) (10 while elapsed < 10% of min_time) until one run lasts
    min_time. Returns (iterations, seconds, cpu seconds) of that run. time_iters(n), when given,
    times n iterations itself (the scaling suite's ranks, other processes: their mean)."""
    iters = 1
    while True:
        c0 = time.process_time()
        t = time_iters(iters) if time_iters else timed(dev, body, iters)
        cpu = time.process_time() - c0
        if t >= min_time or iters >= max_iters:
            return iters, t, cpu
        mult = 1.4 * min_time / max(t, 1e-9) if t / min_time > 0.1 else 10.0
        iters = int(min(max(mult * iters, iters + 1), max_iters))


# ---- verification helpers ---------------------------------------------------------------------

def pick(state, n):
    """ops_cpu.c's positions: a small LCG over [0, n), the same on every run."""
    state[0] = (state[0] * 6364136223846793005 + 1442695040888963407) % (1 << 64)
    return (state[0] >> 33) % n


def check_close(what, got, want, bound):
    """got, want, bound: float64 tensors of one shape; raises CheckFailed at the worst element."""
    err = (got - want).abs()
    bad = ~(err <= bound)
    if bool(bad.any()):
        idx = int(((err - bound).masked_fill(~bad, -math.inf)).argmax())
        i = list(divmod_index(idx, got.shape))
        raise CheckFailed("%s%s = %.9g, expected %.9g (double), |error| %.3g > bound %.3g" % (
            what, i, float(got.flatten()[idx]), float(want.flatten()[idx]),
            float(err.flatten()[idx]), float(bound.flatten()[idx])))


def divmod_index(flat, shape):
    out = []
    for s in reversed(list(shape)):
        flat, r = divmod(flat, s)
        out.append(r)
    return reversed(out)


def randn(shape, dev, dtype=None, seed_offset=0):
    g = torch.Generator(device="cpu")
    g.manual_seed(SEED + seed_offset)
    t = torch.randn(shape, generator=g, dtype=torch.float32)
    return t.to(device=dev, dtype=dtype or torch.float32)


def prec_dtype(prec):
    return {"f32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
            "bf16": torch.bfloat16}[prec]


def work_train(spec, prec, batch, lr=TRAIN_LR, momentum=0.0, steps=1):
    """bench_train.c's bench_work_train: `steps` training steps of spec per timed iteration."""
    w = {"op": "train_step", "model": spec, "dtype": prec, "batch": batch,
         "optimizer": "SGD lr %g" % lr + (" momentum %g" % momentum if momentum > 0 else ""),
         "per_iteration": steps, "samples": steps * batch}
    if spec.startswith("gpt:"):
        w["tokens"] = steps * batch * int(re.search(r"-T(\d+)", spec).group(1))
    return w


def work_product(op, prec, shapes, flop, reps, **extra):
    """reps products (matmul, conv2d) per timed iteration, FLOP counted over all of them."""
    w = {"op": op, "dtype": prec, "shapes": [list(x) for x in shapes]}
    w.update(extra)
    w.update(per_iteration=reps, FLOP=reps * flop)
    return w


def set_tf32(on):
    """f32 is strict f32 (PyTorch's default lets cuDNN use TF32: turned off, as tandem's f32);
    tf32 allows TF32 in matmuls and convolutions (TDM_TF32_MATMUL + TDM_TF32_CONV)."""
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on


# ---- a benchmark instance -----------------------------------------------------------------------

class Bench:
    """One instance: name "matmul", args [("n", 64)], and a setup() returning the state a timed
    iteration needs. setup(b) fills b.body (one iteration), optionally b.verify (raises
    CheckFailed), b.counters_after (plain counters measured after timing); rates are amounts per
    iteration of counters whose name ends in /s (GFLOP/s: FLOP/1e9 per iteration). work: the
    work of one timed iteration (a dict: op or model, dtype, shapes, batch, per_iteration, the
    FLOP/bytes/samples counted), printed by --list --json and compared with tandem's
    `bench list --json` by the test peer.work_match: a row's name means the same work."""

    def __init__(self, name, args, setup, rates, plain, label, dev, timer_dev=None, x_arg=None,
                 work=None):
        self.name, self.args, self.setup = name, args, setup
        self.work = work   # what one timed iteration does, as tandem's bench list --json says
        self.rates, self.plain, self.label, self.dev = rates, plain, label, dev
        self.timer_dev = timer_dev or dev   # where the work runs (cpu-vs-gpu: cpu on a cuda run)
        self.x_arg = x_arg if x_arg is not None else (0 if len(args) == 1 else -1)
        self.body = None
        self.verify = None
        self.counters_after = None
        self.cleanup = None
        self.time_iters = None   # n -> seconds of n iterations, when not timed here (scaling)
        self.samples = None      # the repetitions' (iterations, seconds, cpu seconds), once run

    @property
    def param(self):
        return "/".join("%s:%d" % (k, v) for k, v in self.args)

    @property
    def gb_name(self):   # Google Benchmark's instance name, as tandem's suites register them
        return "%s%s%s/real_time" % (self.name, "/" if self.args else "", self.param)

    def bench_id(self, suite):
        return "%s/%s%s%s" % (suite, self.name, "/" if self.args else "", self.param)


# ---- suite ops (suites/bench/ops_cpu.c) --------------------------------------------------------

def ops_register(cfg):
    dev, out = cfg["device"], []
    for n in OPS_MATMUL_N[:1 if cfg["quick"] else 3]:
        out.append(Bench("matmul", [("n", n)], lambda b, n=n: ops_matmul(b, n),
                         {"GFLOP/s": 2.0 * n**3 / 1e9}, {"FLOP/iteration": 2.0 * n**3},
                         "FLOP = 2*n^3", dev,
                         work=work_product("matmul", "f32", [(n, n), (n, n)], 2.0 * n**3, 1)))
    n = OPS_ADD_N
    out.append(Bench("add", [("n", n)], lambda b: ops_add(b, n), {"GB/s": 12.0 * n / 1e9},
                     {"bytes/iteration": 12.0 * n}, "bytes = 3*4*n", dev,
                     work={"op": "add", "dtype": "f32", "shapes": [[n], [n]], "per_iteration": 1,
                           "bytes": 12 * n}))
    r, c = OPS_SOFTMAX
    out.append(Bench("softmax", [("rows", r), ("cols", c)], lambda b: ops_softmax(b, r, c),
                     {"GB/s": 8.0 * r * c / 1e9}, {"bytes/iteration": 8.0 * r * c},
                     "bytes = 2*4*rows*cols", dev,
                     work={"op": "softmax", "dtype": "f32", "shapes": [[r, c]], "dim": 1,
                           "per_iteration": 1, "bytes": 8 * r * c}))
    N, C, HW, O, K = OPS_CONV
    flop = 2.0 * N * O * HW * HW * C * K * K
    out.append(Bench("conv2d", [("n", N), ("c", C), ("hw", HW), ("o", O), ("k", K)],
                     lambda b: ops_conv2d(b, N, C, HW, O, K), {"GFLOP/s": flop / 1e9},
                     {"FLOP/iteration": flop}, "FLOP = 2*N*O*H'*W'*C*kh*kw", dev,
                     work=work_product("conv2d", "f32", [(N, C, HW, HW), (O, C, K, K)], flop, 1,
                                       padding=K // 2)))
    bs = OPS_MLP_BATCH
    out.append(Bench("mlp_train", [("batch", bs)], lambda b: ops_mlp_train(b, bs),
                     {"samples/s": float(bs)}, {"samples/iteration": float(bs)},
                     "mlp:256-128-10, SGD lr 0.01, samples = batch", dev,
                     work=work_train("mlp:" + "-".join(map(str, OPS_MLP)), "f32", bs)))
    return out


def ops_matmul(b, n):
    a, bb = randn((n, n), b.dev, seed_offset=1), randn((n, n), b.dev, seed_offset=2)
    res = {}
    b.body = lambda: res.__setitem__("c", torch.matmul(a, bb))

    def verify():   # 16 elements; bound n * u * sum |a_ik b_kj| (f32 accumulation)
        ha, hb, hc = a.double().cpu(), bb.double().cpu(), res["c"].double().cpu()
        s = [1]
        for _ in range(16):
            i, j = pick(s, n), pick(s, n)
            prod = ha[i, :] * hb[:, j]
            check_close("matmul: C", hc[i:i + 1, j:j + 1], prod.sum().view(1, 1),
                        (n * U["f32"] * prod.abs().sum() + 1e-30).view(1, 1))
    b.verify = verify


def ops_add(b, n):
    x, y = randn((n,), b.dev, seed_offset=3), randn((n,), b.dev, seed_offset=4)
    res = {}
    b.body = lambda: res.__setitem__("c", torch.add(x, y))

    def verify():   # every element: one rounding of the exact sum
        want = x.double().cpu() + y.double().cpu()
        check_close("add: c", res["c"].double().cpu(), want, U["f32"] * want.abs())
    b.verify = verify


def ops_softmax(b, rows, cols):
    x = randn((rows, cols), b.dev, seed_offset=5)
    res = {}
    b.body = lambda: res.__setitem__("y", torch.softmax(x, dim=1))

    def verify():   # 4 rows against exp(x - max) / sum in double; bound 16 u y + 2^-126
        hx, hy = x.double().cpu(), res["y"].double().cpu()
        s = [2]
        for _ in range(4):
            r = pick(s, rows)
            e = (hx[r] - hx[r].max()).exp()
            want = e / e.sum()
            check_close("softmax: y[%d]" % r, hy[r], want, 16 * U["f32"] * want + 2.0**-126)
    b.verify = verify


def conv_check(what, x, w, y, stride, padding, red, u, seed):
    """8 outputs of y = conv2d(x, w) against double, bound red * u * sum |x w| (red = C*k*k)."""
    hx, hw, hy = x.double().cpu(), w.double().cpu(), y.double().cpu()
    N, O, Ho, Wo = hy.shape
    s = [seed]
    for _ in range(8):
        n, o, i, j = pick(s, N), pick(s, O), pick(s, Ho), pick(s, Wo)
        k = hw.shape[2]
        pad = torch.nn.functional.pad(hx[n], (padding, padding, padding, padding))
        patch = pad[:, i * stride:i * stride + k, j * stride:j * stride + k]
        prod = patch * hw[o]
        check_close("%s[%d,%d,%d,%d]" % (what, n, o, i, j), hy[n, o, i:i + 1, j],
                    prod.sum().view(1), (red * u * prod.abs().sum() + 1e-30).view(1))


def ops_conv2d(b, N, C, HW, O, K):
    x, w = randn((N, C, HW, HW), b.dev, seed_offset=6), randn((O, C, K, K), b.dev, seed_offset=7)
    res = {}
    b.body = lambda: res.__setitem__("y", torch.nn.functional.conv2d(x, w, None, 1, K // 2))
    b.verify = lambda: conv_check("conv2d: y", x, w, res["y"], 1, K // 2, C * K * K, U["f32"], 3)


def build_model(spec):
    """A model of tandem's grammar (mlp:D0-...-Dk, cnn:CxHxW/TOK-...) as a torch Sequential."""
    nn = torch.nn
    if spec.startswith("mlp:"):
        w = [int(v) for v in spec[4:].split("-")]
        layers = []
        for i in range(len(w) - 1):
            layers.append(nn.Linear(w[i], w[i + 1]))
            if i < len(w) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)
    chw, toks = spec[4:].split("/")
    c, h, _ = [int(v) for v in chw.split("x")]
    layers, flat = [], None
    for t in toks.split("-"):
        m = re.fullmatch(r"c(\d+)(?:k(\d+))?(?:s(\d+))?(?:p(\d+))?", t)   # cO[kK][sS][pP]
        if m:
            o, k, st, p = (int(v) if v else d for v, d in zip(m.groups(), (0, 3, 1, 0)))
            layers.append(nn.Conv2d(c, o, k, st, p))
            c, h = o, (h + 2 * p - k) // st + 1
        elif t == "bn":
            layers.append(nn.BatchNorm2d(c))
        elif t == "relu":
            layers.append(nn.ReLU())
        elif re.fullmatch(r"mp(\d+)", t):
            k = int(t[2:])
            layers.append(nn.MaxPool2d(k))
            h //= k
        elif t == "flat":
            layers.append(nn.Flatten())
            flat = c * h * h
        elif re.fullmatch(r"fc(\d+)", t):
            layers.append(nn.Linear(flat, int(t[2:])))
        else:
            raise ValueError("model spec %s: token %s not known to the peer" % (spec, t))
    return nn.Sequential(*layers)


class Trainer:
    """A model, plain SGD and one random batch (labels from ops' LCG); step() is one training step
    (zero_grad, forward, cross-entropy, backward, step) with autocast and a grad scaler as asked."""

    def __init__(self, spec, in_shape, batch, dev, prec="f32", lr=TRAIN_LR):
        torch.manual_seed(SEED)
        self.dev, self.prec = dev, prec
        self.model = build_model(spec).to(dev)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.x = randn((batch,) + tuple(in_shape), dev, seed_offset=8)
        s = [4]
        self.y = torch.tensor([pick(s, 10) for _ in range(batch)], dtype=torch.int64, device=dev)
        self.scaler = None
        if prec == "fp16":
            amp = getattr(torch, "amp", None)
            if amp is not None and hasattr(amp, "GradScaler"):
                self.scaler = amp.GradScaler(dev.type)
            else:
                self.scaler = torch.cuda.amp.GradScaler()
        self.last_loss = None

    def _forward(self):
        if self.prec in ("fp16", "bf16"):
            dt = torch.float16 if self.prec == "fp16" else torch.bfloat16
            with torch.autocast(device_type=self.dev.type, dtype=dt):
                return torch.nn.functional.cross_entropy(self.model(self.x), self.y)
        return torch.nn.functional.cross_entropy(self.model(self.x), self.y)

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self._forward()
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        self.last_loss = loss

    def loss(self):
        with torch.no_grad():
            return float(self._forward())


def train_setup(b, spec, in_shape, batch, prec="f32", peak=False):
    set_tf32(prec == "tf32")
    trainer_setup(b, Trainer(spec, in_shape, batch, b.dev, prec), peak)


def trainer_setup(b, t, peak):
    """b times t's steps; its check: the loss on t's batch fell (and the peak memory on a GPU)."""
    before = t.loss()
    b.body = t.step
    if peak and is_cuda(b.dev):
        torch.cuda.reset_peak_memory_stats(b.dev)

    def verify():   # steps of plain SGD on one batch must lower its loss
        after = t.loss()
        if not after < before:
            raise CheckFailed("%s: the loss did not fall (%.6g -> %.6g)" % (b.name, before, after))
        b.plain["loss"] = after
    b.verify = verify
    if peak and is_cuda(b.dev):   # this row's own peak: run_one and the reset above start it
        b.counters_after = lambda: {"peak_bytes": float(torch.cuda.max_memory_allocated(b.dev))}
    elif peak:   # PyTorch keeps no peak of host memory: said, never a misleading figure
        b.label += "; peak_bytes not measured on the cpu (PyTorch tracks no host peak)"


# ---- nanoGPT's GPT (amp, cpu-vs-gpu) ------------------------------------------------------------

def make_gpt(L, H, D, T, V):
    """A PeerGPT (below; defined here because torch is imported in main())."""
    class PeerGPT(torch.nn.Module):
        """nanoGPT's model.py GPT (bias, GELU tanh as GPT-2's and tandem's default, no dropout), the
        lm_head tied to wte, nanoGPT's init (N(0, 0.02), c_proj weights N(0, 0.02/sqrt(2L)), zero
        biases): the model tandem's tdm_nn_gpt builds. Attention through
        F.scaled_dot_product_attention(is_causal=True) where this torch has it (2.x); 1.13 (Debian's
        CPU build) lacks it: nanoGPT's own fallback (masked softmax), the same function."""

        def __init__(self, L, H, D, T, V):
            super().__init__()
            nn = torch.nn
            self.H, self.D = H, D
            self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
            self.blocks = nn.ModuleList()
            for _ in range(L):
                blk = nn.Module()
                blk.ln_1, blk.ln_2 = nn.LayerNorm(D), nn.LayerNorm(D)
                blk.c_attn, blk.attn_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
                blk.c_fc, blk.mlp_proj = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
                self.blocks.append(blk)
            self.ln_f = nn.LayerNorm(D)
            self.lm_head = nn.Linear(D, V, bias=False)
            self.wte.weight = self.lm_head.weight
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    torch.nn.init.zeros_(m.bias)
            for blk in self.blocks:
                for w in (blk.attn_proj.weight, blk.mlp_proj.weight):
                    torch.nn.init.normal_(w, mean=0.0, std=0.02 / math.sqrt(2 * L))
            self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)),
                                 persistent=False)

        def attention(self, q, k, v):
            sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
            if sdpa is not None:
                return sdpa(q, k, v, is_causal=True)
            T = q.size(-2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
            return torch.softmax(att, dim=-1) @ v

        def forward(self, idx):
            B, T = idx.shape
            F_ = torch.nn.functional
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            for blk in self.blocks:
                q, k, v = blk.c_attn(blk.ln_1(x)).split(self.D, dim=2)
                hd = self.D // self.H
                q, k, v = [t.view(B, T, self.H, hd).transpose(1, 2) for t in (q, k, v)]
                y = self.attention(q, k, v).transpose(1, 2).contiguous().view(B, T, self.D)
                x = x + blk.attn_proj(y)
                x = x + blk.mlp_proj(F_.gelu(blk.c_fc(blk.ln_2(x)), approximate="tanh"))
            return self.lm_head(self.ln_f(x))

    return PeerGPT(L, H, D, T, V)


def gpt_tokens(seed, vocab, batch, T):
    """bench_train.c's bench_gpt_tokens, draw for draw: x (batch, T) and its next tokens y."""
    M = (1 << 64) - 1
    r = [(seed * 2654435761 + 12345) & M]

    def draw(n):
        r[0] = (r[0] * 6364136223846793005 + 1442695040888963407) & M
        return (r[0] >> 33) % n
    perm = list(range(vocab))
    for i in range(vocab - 1, 0, -1):   # Fisher-Yates
        j = draw(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    stream = [draw(vocab)]
    for _ in range(batch * T):
        stream.append(perm[stream[-1]] if draw(4) else draw(vocab))
    x = torch.tensor(stream[:-1], dtype=torch.int64).view(batch, T)
    y = torch.tensor(stream[1:], dtype=torch.int64).view(batch, T)
    return x, y


def gpt_flop_per_token(L, D, T, V):
    """nanoGPT's estimate_mfu: 6N + 12*L*D*T, N without wpe (get_num_params), wte counted once."""
    N = L * (12 * D * D + 13 * D) + V * D + 2 * D
    return 6 * N + 12 * L * D * T


def gpu_dense_peak(dev, prec):
    """The dense peak FLOP/s of dev's GPU model for prec from suites/check/expectations.json
    (tandem's bench_gpt_peak_flops): (FLOP/s, model); (0, "") for f32, the CPU or an unknown
    model."""
    key = {"tf32": "tf32", "fp16": "f16", "bf16": "bf16"}.get(prec)
    if not is_cuda(dev) or key is None or not torch.cuda.is_available():   # (--list on no GPU)
        return 0.0, ""
    path = os.environ.get("TANDEM_CHECK_EXPECT") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "check", "expectations.json")
    try:
        with open(path) as f:
            models = json.load(f).get("models", [])
    except (OSError, ValueError):
        return 0.0, ""

    def bare(n):
        return n[7:] if n.lower().startswith("nvidia ") else n
    name = bare(torch.cuda.get_device_name(dev)).lower()
    for m in models:
        if any(bare(n).lower() == name for n in m.get("names", [])):
            v = m.get("tflops", {}).get(key)
            return (float(v) * 1e12, m.get("model", "")) if v else (0.0, "")
    return 0.0, ""


class GptTrainer(Trainer):
    """Trainer's step and loss for the GPT: tokens (batch, T), loss over (B*T, V) logits."""

    def __init__(self, tag, batch, dev, prec="f32", lr=TRAIN_LR):
        torch.manual_seed(SEED)
        L, H, D, T, V = GPT_MODELS[tag]
        self.dev, self.prec, self.V = dev, prec, V
        self.model = make_gpt(L, H, D, T, V).to(dev)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr)
        x, y = gpt_tokens(GPT_DATA_SEED, V, batch, T)
        self.x, self.y = x.to(dev), y.to(dev)
        self.scaler = None
        if prec == "fp16":
            amp = getattr(torch, "amp", None)
            if amp is not None and hasattr(amp, "GradScaler"):
                self.scaler = amp.GradScaler(dev.type)
            else:
                self.scaler = torch.cuda.amp.GradScaler()
        self.last_loss = None

    def _ce(self):
        return torch.nn.functional.cross_entropy(self.model(self.x).view(-1, self.V),
                                                 self.y.view(-1), ignore_index=-1)

    def _forward(self):
        if self.prec in ("fp16", "bf16"):
            dt = torch.float16 if self.prec == "fp16" else torch.bfloat16
            with torch.autocast(device_type=self.dev.type, dtype=dt):
                return self._ce()
        return self._ce()


def gpt_bench(name, tag, prec, dev, peak=False, mfu=False):
    """train_<tag>_<prec or where>/batch:8: tokens/s, and MFU where the GPU's model has a dense
    peak for prec (amp only, as tandem's)."""
    L, H, D, T, V = GPT_MODELS[tag]
    tokens, fpt = float(GPT_BATCH * T), float(gpt_flop_per_token(L, D, T, V))
    rates = {"tokens/s": tokens}   # tandem's main metric (its first rate), as tandem's
    plain = {"tokens/iteration": tokens}
    label = "gpt:L%d-H%d-D%d-T%d-V%d, SGD lr %g, %s, %s" % (
        L, H, D, T, V, TRAIN_LR, prec,
        "F.scaled_dot_product_attention" if hasattr(torch.nn.functional,
                                                    "scaled_dot_product_attention")
        else "masked-softmax attention (no F.scaled_dot_product_attention in torch %s)"
        % torch.__version__)
    if mfu:
        plain["FLOP/token"] = fpt
        pk, model = gpu_dense_peak(dev, prec)
        if pk > 0:
            rates["MFU"] = tokens * fpt / pk
            plain["peak_TFLOP_per_s"] = pk / 1e12
            label += "; MFU = tokens/s * FLOP/token / %s's dense %s peak" % (model, prec)
    return Bench(name, [("batch", GPT_BATCH)],
                 lambda b: gpt_setup(b, tag, GPT_BATCH, prec, peak), rates, plain, label, dev,
                 work=work_train(gpt_spec(tag), prec, GPT_BATCH))


def gpt_tag_for(dev, quick):
    """bench_train.c's bench_gpt_for: GPT-2 124M on a GPU (T256 with --quick); the tiny one on the
    cpu and where this torch sees no CUDA device (a listing without a GPU, as tandem's lists)."""
    if not is_cuda(dev) or not torch.cuda.is_available():
        return "gpt_tiny"
    return "gpt_124m_t256" if quick else "gpt_124m"


def gpt_spec(tag):
    """tandem's spec of a GPT_MODELS entry: gpt:L12-H12-D768-T1024-V50257."""
    return "gpt:L%d-H%d-D%d-T%d-V%d" % GPT_MODELS[tag]


def gpt_setup(b, tag, batch, prec="f32", peak=False):
    set_tf32(prec == "tf32")
    trainer_setup(b, GptTrainer(tag, batch, b.dev, prec), peak)


def ops_mlp_train(b, batch):
    train_setup(b, "mlp:" + "-".join(map(str, OPS_MLP)), (OPS_MLP[0],), batch)


# ---- suite transfer (suites/bench/transfer.c) ----------------------------------------------------

def transfer_register(cfg):
    dev, quick, out = cfg["device"], cfg["quick"], []
    sizes = TRANSFER_SIZES_QUICK if quick else TRANSFER_SIZES
    if is_cuda(dev):
        names = []
        for d in ("h2d", "d2h"):
            for mem in ("pageable", "pinned", "registered"):
                names += ["%s_%s" % (d, mem), "%s_%s_async" % (d, mem)]
        names += ["d2d", "d2d_async", "d2d_kernel", "bidir_pinned_async"]
    else:   # host memcpy through the same API: "device" memory is host memory
        names = ["h2d_pageable", "h2d_pinned", "d2h_pageable", "d2h_pinned", "d2d"]
    # bytes as tandem's transfer suite counts them (docs/RESULTS_FORMAT.md): across the link (cuda's
    # h2d, d2h, bidir) the bytes that cross it, link_GB/s; within one memory (d2d; every copy on the
    # cpu, a host memcpy) the bytes read + written, GB/s
    for name in names:
        link = is_cuda(dev) and not name.startswith("d2d")
        mult = 2.0 if name.startswith("bidir") or not link else 1.0
        metric = "link_GB/s" if link else "GB/s"
        for n in sizes:
            out.append(Bench(name, [("bytes", n)], lambda b, name=name, n=n: transfer_setup(
                b, name, n), {metric: mult * n / 1e9}, {"bytes/iteration": mult * n},
                "bytes = %sbytes%s" % ("2*" if mult == 2 else "",
                                       "" if link else " (read + written)"), dev,
                work=transfer_work(name, n, link)))
    return out


def transfer_work(name, n, link):
    """transfer.c's tr_work: one copy of n bytes (bidir: one each way), its direction, the host
    memory of a host side (sync or async for h2d and d2h), the bytes its metric counts."""
    direction = "d2d_kernel" if name == "d2d_kernel" else name.split("_")[0]
    w = {"op": "copy", "direction": direction}
    if direction in ("h2d", "d2h", "bidir"):
        w["host_memory"] = name.split("_")[1]
    if direction in ("h2d", "d2h"):
        w["async"] = name.endswith("_async")
    w.update({"size": n, "per_iteration": 1})
    w["link_bytes" if link else "bytes"] = 2 * n if direction == "bidir" or not link else n
    return w


def random_bytes(n, dev):
    g = torch.Generator(device="cpu")
    g.manual_seed(SEED + n % 1000)
    h = torch.randint(1, 256, (min(n, 1 << 20),), generator=g, dtype=torch.uint8)
    reps = -(-n // h.numel())
    return h.repeat(reps)[:n].contiguous().to(dev)   # never zeros; varied within each MiB


def transfer_setup(b, name, n):
    dev, cpu = b.dev, torch.device("cpu")
    parts = name.split("_")
    direction, is_async = parts[0], parts[-1] == "async"
    mem = parts[1] if len(parts) > 1 and parts[1] not in ("async", "kernel") else None
    registered = []

    def host_buf(src_data=None):
        if mem == "pinned" and is_cuda(dev):
            t = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        else:
            t = torch.empty(n, dtype=torch.uint8)
        if mem == "registered" and is_cuda(dev):
            rc = torch.cuda.cudart().cudaHostRegister(t.data_ptr(), n, 0)
            if int(rc) != 0:   # as torch/cuda/_pin_memory_utils.py
                raise CheckFailed("cudaHostRegister failed: cudaError %d" % int(rc))
            registered.append(t)
        if src_data is not None:
            t.copy_(src_data)
        return t

    data = random_bytes(n, cpu)
    stream = torch.cuda.Stream(dev) if is_cuda(dev) and (is_async or direction == "bidir") else None
    if direction == "h2d":
        src, dst = host_buf(data), torch.empty(n, dtype=torch.uint8, device=dev)
    elif direction == "d2h":
        src, dst = data.to(dev), host_buf()
    elif direction == "d2d":
        src, dst = data.to(dev), torch.empty(n, dtype=torch.uint8, device=dev)
    else:   # bidir: pinned host <-> device, h2d and d2h at once on two streams
        src, dst = host_buf(data), torch.empty(n, dtype=torch.uint8, device=dev)
        src2, dst2 = data.to(dev), host_buf()
        stream2 = torch.cuda.Stream(dev)

    if name == "d2d_kernel":   # an SM-driven copy: an elementwise kernel (bitwise or 0, exact)
        if n % 4 == 0:
            s32, d32 = src.view(torch.int32), dst.view(torch.int32)
            b.body = lambda: torch.bitwise_or(s32, 0, out=d32)
        else:
            b.body = lambda: torch.bitwise_or(src, 0, out=dst)
    elif direction == "bidir":
        def body():
            cur = torch.cuda.current_stream(dev)
            stream.wait_stream(cur)
            stream2.wait_stream(cur)
            with torch.cuda.stream(stream):
                dst.copy_(src, non_blocking=True)
            with torch.cuda.stream(stream2):
                dst2.copy_(src2, non_blocking=True)
            cur.wait_stream(stream)
            cur.wait_stream(stream2)
        b.body = body
    elif stream is not None:   # cudaMemcpyAsync on a stream; the timing events join it
        def body():
            cur = torch.cuda.current_stream(dev)
            stream.wait_stream(cur)
            with torch.cuda.stream(stream):
                dst.copy_(src, non_blocking=True)
            cur.wait_stream(stream)
        b.body = body
    else:   # synchronous copy (copy_ without non_blocking waits for the copy on the host)
        b.body = lambda: dst.copy_(src)

    def verify():   # every byte of the destination
        if is_cuda(dev):
            torch.cuda.synchronize(dev)
        pairs = [(dst, "dst")] + ([(dst2, "dst2")] if direction == "bidir" else [])
        for t, what in pairs:
            got = t.cpu()
            if not torch.equal(got, data):
                i = int((got != data).nonzero()[0])
                raise CheckFailed("%s: %s[%d] = %d, expected %d" % (name, what, i, int(got[i]),
                                                                    int(data[i])))
    b.verify = verify

    def cleanup():
        for t in registered:
            torch.cuda.cudart().cudaHostUnregister(t.data_ptr())
    b.cleanup = cleanup


# ---- suite amp (suites/bench/amp.c) --------------------------------------------------------------

def amp_register(cfg):
    dev, quick, out = cfg["device"], cfg["quick"], []
    cuda = is_cuda(dev)
    precs = ["f32", "tf32", "fp16", "bf16"] if cuda else ["f32", "bf16"]
    batches = TRAIN_BATCHES if cuda else AMP_TRAIN_BATCHES_CPU
    batches = batches[:1] if quick else batches
    for model, (spec, shape) in MODELS.items():
        if model in CUDA_ONLY_MODELS and not cuda:
            continue
        for prec in precs:
            for bs in batches:
                out.append(Bench("train_%s_%s" % (model, prec), [("batch", bs)],
                                 lambda b, s=spec, sh=shape, bs=bs, p=prec: train_setup(
                                     b, s, sh, bs, p, peak=True),
                                 {"samples/s": float(bs)}, {"samples/iteration": float(bs)},
                                 "%s, SGD lr %g, %s, samples = batch" % (spec, TRAIN_LR, prec),
                                 dev, work=work_train(spec, prec, bs)))
    tag = gpt_tag_for(dev, quick)
    for prec in precs:
        out.append(gpt_bench("train_%s_%s" % (tag, prec), tag, prec, dev, peak=True, mfu=True))
    where = "cuda" if cuda else "cpu"
    for prec in precs:   # C = A @ B, (n,n) @ (n,n); reps products per timed iteration
        for n in AMP_MATMUL_N[where][:1 if quick else None]:
            flop = 2.0 * n**3
            reps = amp_reps(flop, cuda)
            out.append(Bench("matmul_%s" % prec, [("n", n)],
                             lambda b, n=n, p=prec, r=reps: amp_matmul(b, n, p, r),
                             {"GFLOP/s": reps * flop / 1e9}, {"FLOP/iteration": reps * flop},
                             "FLOP = 2*n^3, %d per iteration" % reps, dev,
                             work=work_product("matmul", prec, [(n, n), (n, n)], flop, reps)))
    for prec in precs:   # y = conv2d(x (B,64,56,56), w (64,64,3,3)), padding 1; reps per iteration
        for bs in AMP_CONV_BATCHES[where][:1 if quick else None]:
            flop = 2.0 * bs * 64 * 64 * 9 * 56 * 56
            reps = amp_reps(flop, cuda)
            out.append(Bench("conv_%s" % prec, [("batch", bs)],
                             lambda b, bs=bs, p=prec, r=reps: amp_conv(b, bs, p, r),
                             {"GFLOP/s": reps * flop / 1e9}, {"FLOP/iteration": reps * flop},
                             "FLOP = 2*B*64*64*9*56*56, %d per iteration" % reps, dev,
                             work=work_product("conv2d", prec, [(bs, 64, 56, 56), (64, 64, 3, 3)],
                                               flop, reps, padding=1)))
    return out


def amp_reps(flop, cuda):
    """amp.c's reps_for: products per timed iteration, so that the synchronize ending it is a
    small part: on a GPU the least power of two (at most 1024) with reps * flop >= 2^38; 1 on the
    cpu."""
    r = 1
    while cuda and r < 1024 and r * flop < AMP_PRODUCT_FLOP:
        r *= 2
    return r


def products(dev, reps, fn):
    """One timed iteration of amp's products: reps calls of fn, then (a GPU) a synchronize, as
    amp.c's timed_products (its events see the same queue drained)."""
    def body():
        for _ in range(reps):
            y = fn()
        if is_cuda(dev):
            torch.cuda.synchronize(dev)
        return y
    return body


def amp_matmul(b, n, prec, reps):
    set_tf32(prec == "tf32")
    dt = prec_dtype(prec)
    a, c = randn((n, n), b.dev, dt, 1), randn((n, n), b.dev, dt, 2)
    res = {}
    prod = products(b.dev, reps, lambda: torch.matmul(a, c))
    b.body = lambda: res.__setitem__("y", prod())

    def verify():   # 16 elements; bound n * u(prec) * sum |a b| (inputs exact in double)
        ha, hc, hy = a.double().cpu(), c.double().cpu(), res["y"].double().cpu()
        s = [1]
        for _ in range(16):
            i, j = pick(s, n), pick(s, n)
            prod = ha[i, :] * hc[:, j]
            check_close("matmul_%s: C" % prec, hy[i:i + 1, j:j + 1], prod.sum().view(1, 1),
                        (n * U[prec] * prod.abs().sum() + 1e-30).view(1, 1))
    b.verify = verify


def amp_conv(b, bs, prec, reps):
    set_tf32(prec == "tf32")
    dt = prec_dtype(prec)
    x, w = randn((bs, 64, 56, 56), b.dev, dt, 6), randn((64, 64, 3, 3), b.dev, dt, 7)
    res = {}
    prod = products(b.dev, reps, lambda: torch.nn.functional.conv2d(x, w, None, 1, 1))
    b.body = lambda: res.__setitem__("y", prod())
    b.verify = lambda: conv_check("conv_%s: y" % prec, x, w, res["y"], 1, 1, 64 * 9, U[prec], 3)


# ---- suite cpu-vs-gpu (suites/bench/cpu_vs_gpu.c) -----------------------------------------------

def cpu_vs_gpu_register(cfg):
    dev, quick, out = cfg["device"], cfg["quick"], []
    cpu = torch.device("cpu")
    batches = TRAIN_BATCHES_QUICK if quick else TRAIN_BATCHES
    for where in (["cpu", "cuda"] if is_cuda(dev) else ["cpu"]):
        d = cpu if where == "cpu" else dev
        for model, (spec, shape) in MODELS.items():
            if model in CUDA_ONLY_MODELS and where == "cpu":
                continue
            for bs in batches:
                out.append(Bench("train_%s_%s" % (model, where), [("batch", bs)],
                                 lambda b, s=spec, sh=shape, bs=bs: train_setup(b, s, sh, bs),
                                 {"samples/s": float(bs)}, {"samples/iteration": float(bs)},
                                 "%s, SGD lr %g, f32, samples = batch" % (spec, TRAIN_LR), d,
                                 work=work_train(spec, "f32", bs)))
        out.append(gpt_bench("train_gpt_tiny_%s" % where, "gpt_tiny", "f32", d))
    return out


# ---- suite cudnn (suites/bench/cudnn.c) ---------------------------------------------------------
# cuDNN's algorithm cache lives as long as the process and is keyed by the shape (and the
# deterministic and TF32 flags), not by cudnn.benchmark: a heuristic pick would be reused by a
# later cudnn.benchmark run of the same layer and the other way round. So each mode runs in a
# process of its own (this script with --cudnn-mode M), and within it every layer is new.

def cudnn_register(cfg):
    dev, quick, out = cfg["device"], cfg["quick"], []

    def want(mode):
        return cfg.get("cudnn_mode") is None or mode == cfg["cudnn_mode"]

    for net, layers in CUDNN_LAYERS.items():
        for (layer, N, C, O, HW, k, stride, pad) in layers:
            if quick and net != "smallcnn" and layer != "layer1_3x3":
                continue
            Ho = (HW + 2 * pad - k) // stride + 1
            flop = 2.0 * N * O * Ho * Ho * C * k * k
            for ps in CUDNN_PASSES:
                for prec in (CUDNN_PRECS_QUICK if quick else CUDNN_PRECS):
                    for layout in CUDNN_LAYOUTS:
                        for mode in CUDNN_MODES:
                            if not want(mode):
                                continue
                            name = "conv_%s_%s_%s_%s_%s" % (net, layer, ps, prec, layout)
                            shape = (N, C, O, HW, k, stride, pad)
                            b = Bench(name, [("mode", mode)],
                                      lambda b, sh=shape, ps=ps, p=prec, lo=layout, m=mode:
                                      cudnn_setup(b, sh, ps, p, lo, m),
                                      {"GFLOP/s": flop / 1e9}, {"FLOP/iteration": flop},
                                      "FLOP = 2*N*O*H'*W'*C*kh*kw", dev,
                                      work=work_product("conv2d_" + ps, prec,
                                                        [(N, C, HW, HW), (O, C, k, k)], flop, 1,
                                                        stride=stride, padding=pad, layout=layout,
                                                        algo_mode=CUDNN_MODE_NAMES[mode]))
                            b.cudnn_mode = mode
                            out.append(b)
    for net, spec in CUDNN_NETS.items():
        for prec in (CUDNN_PRECS_QUICK if quick else CUDNN_PRECS):
            for mode in CUDNN_MODES:
                if not want(mode):
                    continue
                for batch in (CUDNN_STEP_BATCHES_QUICK if quick else CUDNN_STEP_BATCHES):
                    b = Bench("step_%s_%s_%s" % (net, prec, CUDNN_MODE_NAMES[mode]),
                              [("batch", batch)],
                              lambda b, sp=spec, bs=batch, p=prec, m=mode:
                              cudnn_step_setup(b, sp, bs, p, m),
                              {"samples/s": batch}, {}, "%s, SGD lr %g, %s, %s mode" % (
                                  spec, CUDNN_LR, prec, CUDNN_MODE_NAMES[mode]), dev,
                              work=dict(work_train(spec, prec, batch, lr=CUDNN_LR),
                                        algo_mode=CUDNN_MODE_NAMES[mode]))
                    b.cudnn_mode = mode
                    out.append(b)
    for net, spec in CUDNN_NETS.items():
        for mode in CUDNN_MODES:
            if not want(mode):
                continue
            b = Bench("new_shape_%s" % net, [("mode", mode)],
                      lambda b, sp=spec, m=mode: cudnn_new_shape_setup(b, sp, m), {}, {},
                      "%s, f32, %s mode" % (spec, CUDNN_MODE_NAMES[mode]), dev,
                      work={"op": "train_step_new_shape", "model": spec, "dtype": "f32",
                            "warmup_batch": 64, "optimizer": "SGD lr %g" % CUDNN_LR,
                            "algo_mode": CUDNN_MODE_NAMES[mode], "per_iteration": 1})
            b.cudnn_mode = mode
            out.append(b)
    return out


def cudnn_flags(mode, prec):
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = mode == 1, mode == 2
    set_tf32(prec == "tf32")


def sync_ms(dev, fn):
    """Milliseconds of fn() between device synchronizations (host wall clock)."""
    if is_cuda(dev):
        torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    fn()
    if is_cuda(dev):
        torch.cuda.synchronize(dev)
    return (time.perf_counter() - t0) * 1e3


def cudnn_step_setup(b, spec, batch, prec, mode):
    """step_<net>_<prec>_<mode>/batch:B: steady training steps after a first one (first_step_ms:
    the algorithm choices; cuDNN's cache cannot be cleared, so a shape another benchmark of this
    mode's process searched earlier is not searched again)."""
    cudnn_flags(mode, prec)
    t = Trainer(spec, (3, 32, 32), batch, b.dev, prec, lr=CUDNN_LR)
    first = sync_ms(b.dev, t.step)
    before = float(t.last_loss)
    steady = min(sync_ms(b.dev, t.step) for _ in range(3))
    b.body = t.step

    def verify():   # finite and falling over the timed steps
        after = t.loss()
        if not (math.isfinite(before) and math.isfinite(after) and after < before):
            raise CheckFailed("%s: the loss did not fall (%.6g -> %.6g)" % (b.name, before, after))
        b.plain["loss"] = after
    b.verify = verify
    b.counters_after = lambda: {"first_step_ms": first, "search_overhead_ms": first - steady}


g_new_batch = [64]   # the last batch size a new_shape benchmark used in this process


def cudnn_new_shape_setup(b, spec, mode):
    """new_shape_<net>/mode:M: each iteration one step at a batch size never seen in this process
    (65, 66, ...: PyTorch cannot clear cuDNN's algorithm cache, so the sizes are truly new, where
    tandem cycles 65..96 and clears its plan cache), after warm-up at batch 64."""
    cudnn_flags(mode, "f32")
    t = Trainer(spec, (3, 32, 32), 64, b.dev, "f32", lr=CUDNN_LR)
    for _ in range(3):
        t.step()
    before = float(t.last_loss)
    acc = {"first": 0.0, "n": 0}
    s = [4]

    def body():
        g_new_batch[0] += 1
        bs = g_new_batch[0]
        t.x = randn((bs, 3, 32, 32), b.dev, seed_offset=8)
        t.y = torch.tensor([pick(s, 10) for _ in range(bs)], dtype=torch.int64, device=b.dev)
        acc["first"] += sync_ms(b.dev, t.step)
        acc["n"] += 1
    b.body = body

    def verify():
        after = float(t.last_loss)
        if not (math.isfinite(before) and math.isfinite(after)):
            raise CheckFailed("%s: loss not finite (%.6g -> %.6g)" % (b.name, before, after))
    b.verify = verify

    def after():
        steady = sum(sync_ms(b.dev, t.step) for _ in range(3)) / 3
        first = acc["first"] / max(acc["n"], 1)
        return {"first_step_ms": first, "steady_step_ms": steady,
                "search_overhead_ms": first - steady}
    b.counters_after = after


def cudnn_setup(b, shape, ps, prec, layout, mode):
    N, C, O, HW, k, stride, pad = shape
    cudnn = torch.backends.cudnn
    cudnn.benchmark, cudnn.deterministic = mode == 1, mode == 2
    set_tf32(prec == "tf32")
    dt = prec_dtype(prec)
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    x = randn((N, C, HW, HW), b.dev, dt, 6).contiguous(memory_format=fmt)
    w = randn((O, C, k, k), b.dev, dt, 7).contiguous(memory_format=fmt)
    Ho = (HW + 2 * pad - k) // stride + 1
    g = randn((N, O, Ho, Ho), b.dev, dt, 9).contiguous(memory_format=fmt)
    mask = {"fwd": None, "bwd_data": [True, False, False], "bwd_filter": [False, True, False]}[ps]
    res = {}
    F = torch.nn.functional

    def bwd(gg, xx, ww, m):
        return torch.ops.aten.convolution_backward(gg, xx, ww, None, [stride] * 2, [pad] * 2,
                                                   [1, 1], False, [0, 0], 1, m)

    if ps == "fwd":
        b.body = lambda: res.__setitem__("y", F.conv2d(x, w, None, stride, pad))
    else:
        b.body = lambda: res.__setitem__("y", bwd(g, x, w, mask)[0 if ps == "bwd_data" else 1])
    # search_ms: the first call (cudnn.benchmark: the algorithm search) over a steady one.
    t_first = timed(b.dev, b.body, 1)
    t_next = min(timed(b.dev, b.body, 1) for _ in range(3))
    extra = {"search_ms": max(t_first - t_next, 0.0) * 1e3} if mode == 1 else {}

    def verify():   # every element against double on the device: bound red * u * |x| (*) |w|
        xd, wd, gd = x.double(), w.double(), g.double()
        if ps == "fwd":
            want = F.conv2d(xd, wd, None, stride, pad)
            mag, red = F.conv2d(xd.abs(), wd.abs(), None, stride, pad), C * k * k
        elif ps == "bwd_data":
            want, mag = bwd(gd, xd, wd, mask)[0], bwd(gd.abs(), xd, wd.abs(), mask)[0]
            red = O * k * k
        else:
            want, mag = bwd(gd, xd, wd, mask)[1], bwd(gd.abs(), xd.abs(), wd, mask)[1]
            red = N * Ho * Ho
        check_close(b.name + ": out", res["y"].double(), want, red * U[prec] * mag + 1e-30)
    b.verify = verify
    b.counters_after = lambda: extra


# ---- suite transformer (suites/bench/transformer.c) ----------------------------------------------

TF_MODES = ["heuristic", "conformance", "deterministic"]
TF_SCORES_BUDGET = 4 * 2**30   # bytes of (B,H,T,T) f32 scores an unfused call may take, as tandem's


def tf_scores_budget():
    try:
        v = float(os.environ.get("TANDEM_BENCH_SCORES_BUDGET", ""))
        return v if v > 0 else TF_SCORES_BUDGET
    except ValueError:
        return TF_SCORES_BUDGET


class AttnMode:
    """tandem's attention modes in PyTorch, entered for a benchmark's setup and timed calls and left
    at its cleanup: heuristic = PyTorch's own choice of SDPA backend; conformance = the math backend
    only (unfused, as tandem's); deterministic = torch.use_deterministic_algorithms(True,
    warn_only=True) (warn_only: cuBLAS without CUBLAS_WORKSPACE_CONFIG would raise)."""

    def __init__(self, mode):
        self.mode, self.cm, self.prev_det = mode, None, None

    def __enter__(self):
        has_sdpa = hasattr(torch.nn.functional, "scaled_dot_product_attention")
        if self.mode == "conformance" and has_sdpa:   # (without SDPA: unfused already)
            attn = getattr(getattr(torch, "nn"), "attention", None)
            if attn is not None and hasattr(attn, "sdpa_kernel"):
                self.cm = attn.sdpa_kernel(attn.SDPBackend.MATH)
            elif hasattr(torch.backends, "cuda") and hasattr(torch.backends.cuda, "sdp_kernel"):
                self.cm = torch.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True,
                                                         enable_mem_efficient=False)
            if self.cm is not None:
                self.cm.__enter__()
        elif self.mode == "deterministic":
            self.prev_det = torch.are_deterministic_algorithms_enabled()
            torch.use_deterministic_algorithms(True, warn_only=True)
        return self

    def __exit__(self, *exc):
        if self.cm is not None:
            self.cm.__exit__(None, None, None)
            self.cm = None
        if self.prev_det is not None:
            torch.use_deterministic_algorithms(self.prev_det)
            self.prev_det = None
        return False


def with_attn_mode(b, mode):
    """b's setup, timed calls and check run in the attention mode (left at its cleanup)."""
    inner = b.setup

    def setup(bb):
        ctx = AttnMode(mode).__enter__()
        try:
            inner(bb)
        except BaseException:
            ctx.__exit__()
            raise
        prev = bb.cleanup

        def cleanup():
            try:
                if prev:
                    prev()
            finally:
                ctx.__exit__()
        bb.cleanup = cleanup
    b.setup = setup
    return b


def sdpa_name():
    return "F.scaled_dot_product_attention" if hasattr(
        torch.nn.functional, "scaled_dot_product_attention") else \
        "masked-softmax attention in f32 (no F.scaled_dot_product_attention in torch %s)" \
        % torch.__version__


def compiled_setup(b, tag, prec):
    """The heuristic step with the model under torch.compile; SkipBenchmark where this PyTorch has
    no torch.compile or compiling fails (the reason recorded)."""
    if not hasattr(torch, "compile"):
        raise SkipBenchmark("torch.compile unavailable in torch %s" % torch.__version__)
    set_tf32(prec == "tf32")
    t = GptTrainer(tag, GPT_BATCH, b.dev, prec)
    try:
        t.model = torch.compile(t.model)
        t.step()   # compiles (forward and backward) here, untimed
        t.loss()
    except Exception as ex:   # noqa: BLE001 — any compiler failure: the reason, no crash
        msg = str(ex).strip().splitlines()
        raise SkipBenchmark("torch.compile failed: %s" % (msg[0] if msg else type(ex).__name__))
    trainer_setup(b, t, True)


def attn_ref(q, k, v):
    """Causal attention as nanoGPT's fallback, in f32 (torch 1.13 on the CPU has no half matmul)."""
    T = q.size(-2)
    att = (q.float() @ k.float().transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    att = att.masked_fill(~mask, float("-inf"))
    return (torch.softmax(att, dim=-1) @ v.float()).to(q.dtype)


def attn_call(q, k, v):
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    return sdpa(q, k, v, is_causal=True) if sdpa is not None else attn_ref(q, k, v)


def attn_setup(b, bwd, dt, B, H, T, d):
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dt]
    shape = (B, H, T, d)
    q, k, v = (randn(shape, b.dev, dtype, seed_offset=21 + i) for i in range(3))
    gy = randn(shape, b.dev, dtype, seed_offset=24) if bwd else None
    res = {}
    if bwd:
        for t in (q, k, v):
            t.requires_grad_(True)

    def body():
        if bwd:
            q.grad = k.grad = v.grad = None
            y = attn_call(q, k, v)
            y.backward(gy)
        else:
            with torch.no_grad():
                y = attn_call(q, k, v)
        res["y"] = y
    b.body = body

    def verify():   # slice [0, 0] against float64: 2 (u |y| + (u + 2^-20) sum_j p_j |v_j|)
        u = U["bf16" if dt == "bf16" else "fp16"]
        with torch.no_grad():
            qs, ks, vs = (t[0, 0].detach().double().cpu() for t in (q, k, v))
            att = (qs @ ks.t()) / math.sqrt(d)
            att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            p = torch.softmax(att, dim=-1)
            want = p @ vs
            got = res["y"][0, 0].detach().double().cpu()
            check_close(b.name + ": y[0,0]", got, want,
                        2 * (u * want.abs() + (u + 2.0**-20) * (p @ vs.abs())) + 1e-30)
            if bwd and not bool(torch.isfinite(q.grad).all()):
                raise CheckFailed(b.name + ": the gradient of q is not finite")
    b.verify = verify

    def after():   # the call's peak memory above what was allocated before it (a GPU only)
        if not is_cuda(b.dev):
            return {}
        res.pop("y", None)
        if bwd:
            q.grad = k.grad = v.grad = None
        torch.cuda.synchronize(b.dev)
        base = torch.cuda.memory_allocated(b.dev)
        torch.cuda.reset_peak_memory_stats(b.dev)
        body()
        torch.cuda.synchronize(b.dev)
        return {"call_peak_bytes": float(torch.cuda.max_memory_allocated(b.dev) - base)}
    b.counters_after = after


def optim_setup(b, tag, fused):
    """One AdamW step over the GPT's parameters, their gradients from one training step:
    fused=True (PyTorch's one-kernel step; SkipBenchmark where this PyTorch or device has none)
    against foreach=False (a step per parameter), as tandem's optim_adamw_<fused|per_tensor>."""
    t = GptTrainer(tag, 1, b.dev, "f32")
    t.step()
    kw = {"lr": 1e-4}
    try:
        opt = torch.optim.AdamW(t.model.parameters(), fused=True, **kw) if fused else \
            torch.optim.AdamW(t.model.parameters(), foreach=False, **kw)
        opt.step()   # the state made here, untimed
    except (TypeError, RuntimeError, ValueError) as ex:
        if not fused:
            raise
        msg = str(ex).strip().splitlines()
        raise SkipBenchmark("AdamW(fused=True) unavailable here: %s" % (msg[0] if msg else ex))
    first = next(t.model.parameters())
    start = first.detach().clone()
    b.body = opt.step

    def verify():
        if not bool(torch.isfinite(first).all()) or torch.equal(first.detach(), start):
            raise CheckFailed(b.name + ": the step left the parameters unchanged or not finite")
    b.verify = verify


def transformer_register(cfg):
    dev, quick, out = cfg["device"], cfg["quick"], []
    cuda = is_cuda(dev)
    skips = cfg.setdefault("bench_skips", [])
    precs = ["f32", "tf32", "fp16", "bf16"] if cuda else ["f32", "bf16"]
    tag = gpt_tag_for(dev, quick)
    for prec in precs:
        for mode in TF_MODES:
            if mode == "deterministic" and prec != "bf16":
                continue
            b = gpt_bench("train_%s_%s_%s" % (tag, prec, mode), tag, prec, dev, peak=True, mfu=True)
            b.label += "; attention mode %s (%s)" % (mode, sdpa_name())
            out.append(with_attn_mode(b, mode))
    # every fusion off: PyTorch eager's math attention (tandem's conformance mode and its other
    # fusions off; PyTorch eager has no fused classifier or add + layer_norm to turn off)
    b = gpt_bench("train_%s_bf16_unfused" % tag, tag, "bf16", dev, peak=True, mfu=True)
    b.label += "; attention mode conformance (%s): the unfused step" % sdpa_name()
    out.append(with_attn_mode(b, "conformance"))
    for fused in (False, True):   # the optimizer step
        name = "optim_adamw_fused" if fused else "optim_adamw_per_tensor"
        out.append(Bench(name, [], lambda bb, f=fused: optim_setup(bb, tag, f), {}, {},
                         "AdamW over the GPT's parameters, %s" %
                         ("fused=True" if fused else "foreach=False"), dev,
                         work={"op": "adamw_step", "model": gpt_spec(tag), "dtype": "f32",
                               "fused": fused, "optimizer": "AdamW lr %g betas %g %g eps %g "
                               "weight_decay %g" % (1e-4, 0.9, 0.999, 1e-8, 0.01),
                               "per_iteration": 1}))
    for prec in precs:   # torch.compile: PyTorch's, no tandem counterpart
        name = "train_%s_%s_compiled" % (tag, prec)
        if not hasattr(torch, "compile"):
            skips.append({"id": "%s/batch:%d" % (name, GPT_BATCH),
                          "reason": "torch.compile unavailable in torch %s" % torch.__version__})
            continue
        b = gpt_bench(name, tag, prec, dev, peak=True, mfu=True)
        b.label += "; torch.compile, attention heuristic"
        b.setup = lambda bb, p=prec: compiled_setup(bb, tag, p)
        out.append(b)
    big = tag != "gpt_tiny"   # tandem's full_size(): GPT-2's sizes where its GPT is GPT-2's
    Ts = ([512, 2048] if quick else [512, 1024, 2048, 4096, 8192]) if big else [16, 32]
    ds = [64, 128] if big else [16]
    budget = tf_scores_budget()
    for bwd in (False, True):
        for dt in ("bf16", "f16"):
            for d in ds:
                B, H = (4, 768 // d) if big else (2, 2)
                for mode in ("heuristic", "conformance"):
                    name = "attn_%s_%s_d%d_%s" % ("fwdbwd" if bwd else "fwd", dt, d, mode)
                    for T in Ts:
                        fwd = 4.0 * B * H * T * T * d / 2
                        flop = 3.5 * fwd if bwd else fwd
                        if mode == "conformance" and 4.0 * B * H * T * T > budget:
                            skips.append({"id": "%s/T:%d" % (name, T), "reason":
                                          "unfused attention (mode conformance): its (B,H,T,T) f32 "
                                          "scores take %.3g GB, over the suite's budget of %.3g GB"
                                          % (4.0 * B * H * T * T / 1e9, budget / 1e9)})
                            continue
                        b = Bench(name, [("T", T)],
                                  lambda bb, bw=bwd, t_=dt, B_=B, H_=H, T_=T, d_=d: attn_setup(
                                      bb, bw, t_, B_, H_, T_, d_),
                                  {"GFLOP/s": flop / 1e9}, {"FLOP/iteration": flop},
                                  "causal %s %s, (B,H,T,d) = (%d,%d,%d,%d) %s, attention mode %s; "
                                  "FLOP = 4*B*H*T^2*d/2%s" % (
                                      sdpa_name(), "forward + backward" if bwd else "forward",
                                      B, H, T, d, dt, mode, " x 3.5" if bwd else ""), dev,
                                  work={"op": "sdpa_causal", "pass": "fwd+bwd" if bwd else "fwd",
                                        "dtype": dt, "shapes": [[B, H, T, d]],
                                        "attention_mode": mode, "per_iteration": 1, "FLOP": flop})
                        out.append(with_attn_mode(b, mode))
    return out


# ---- suite reductions (suites/bench/reductions.c) -----------------------------------------------
# Few-output reductions against the copy of the same tensor, f32, cuda only (as tandem's). One
# timed iteration is one call; GB/s counts every byte read and written (docs/RESULTS_FORMAT.md):
# `traffic` bytes moved per input byte. N = 32 (4 with --quick), H = W = 56 (28), C = 64.

RD_C = 64
RD_KINDS = [   # name, traffic, op (as tandem's work descriptions name it)
    ("copy_d2d", 2, "copy"),
    ("bias_grad_nchw", 1, "sum"),
    ("bias_grad_nhwc", 1, "sum"),
    ("batch_norm2d_fwd", 4, "batch_norm"),
    ("batch_norm2d_bwd", 4, "batch_norm+batch_norm_backward"),
    ("batch_norm1d_fwd", 4, "batch_norm"),
]


def rd_shape(kind, N, HW):
    C = RD_C
    if kind == "batch_norm1d_fwd":
        return (N * HW * HW, C)     # rows of C channels, channels innermost
    if kind == "bias_grad_nhwc":
        return (N, HW, HW, C)       # channels-last memory
    return (N, C, HW, HW)


def rd_work(kind, traffic, op, N, HW):
    """reductions.c's rd_work: the op on its input shape, the bytes GB/s counts."""
    w = {"op": op, "dtype": "f32", "shapes": [list(rd_shape(kind, N, HW))]}
    if kind == "bias_grad_nchw":
        w["dims"] = [0, 2, 3]
    elif kind == "bias_grad_nhwc":
        w["dims"] = [0, 1, 2]
    elif op.startswith("batch_norm"):
        w.update(training=True, running_stats=kind != "batch_norm2d_bwd", eps=1e-5)
        if kind == "batch_norm2d_bwd":
            w["grads"] = ["x"]
    w.update(per_iteration=1, bytes=N * HW * HW * RD_C * 4 * traffic)
    return w


def reductions_register(cfg):
    dev, quick, out = cfg["device"], cfg["quick"], []
    N, HW = (4, 28) if quick else (32, 56)
    B = float(N * HW * HW * RD_C * 4)
    for kind, traffic, op in RD_KINDS:
        out.append(Bench(kind, [("n", N)], lambda b, k=kind: rd_setup(b, k, N, HW),
                         {"GB/s": traffic * B / 1e9}, {"bytes": B},
                         "f32 %s, GB/s = %g x %d bytes (read + written)" % (
                             "x".join(map(str, rd_shape(kind, N, HW))), traffic, B), dev,
                         work=rd_work(kind, traffic, op, N, HW)))
    return out


def rd_setup(b, kind, N, HW):
    F, C = torch.nn.functional, RD_C
    x = randn(rd_shape(kind, N, HW), b.dev, seed_offset=31)
    g = torch.Generator(device="cpu")
    g.manual_seed(SEED + 32)
    w, bias, rm, rv = (torch.rand(C, generator=g).to(b.dev) for _ in range(4))  # (C) each, [0,1)
    res = {}
    if kind == "copy_d2d":   # y = x.clone(): B read + B written
        b.body = lambda: res.__setitem__("y", x.clone())
    elif kind == "bias_grad_nchw":   # (N,C,H,W) -> (C)
        b.body = lambda: res.__setitem__("y", x.sum(dim=(0, 2, 3)))
    elif kind == "bias_grad_nhwc":   # (N,H,W,C) -> (C)
        b.body = lambda: res.__setitem__("y", x.sum(dim=(0, 1, 2)))
    elif kind in ("batch_norm2d_fwd", "batch_norm1d_fwd"):   # training forward, running stats
        b.body = lambda: res.__setitem__("y", F.batch_norm(x, rm, rv, w, bias, True, 0.1, 1e-5))
    else:   # batch_norm2d_bwd: the training forward that saves the statistics, then gx
        xg, gy = x.detach().requires_grad_(True), randn(x.shape, b.dev, seed_offset=33)

        def body():
            y = F.batch_norm(xg, None, None, w, bias, True, 0.1, 1e-5)
            res["y"] = torch.autograd.grad(y, xg, gy)[0]
        b.body = body

    def verify():
        y = res["y"]
        if kind == "copy_d2d":
            if not torch.equal(y, x):
                raise CheckFailed("copy_d2d: the copy differs from its source")
            return
        if not bool(torch.isfinite(y).all()):
            raise CheckFailed("%s: non-finite outputs" % kind)
        if kind.startswith("bias_grad"):   # each channel's sum against double: n u sum |x|
            dims = (0, 2, 3) if kind == "bias_grad_nchw" else (0, 1, 2)
            xd = x.double()
            n = x.numel() // C
            check_close(kind + ": gb", y.double().cpu(), xd.sum(dim=dims).cpu(),
                        (n * U["f32"] * xd.abs().sum(dim=dims)).cpu() + 1e-30)
        elif kind == "batch_norm2d_bwd":   # a BatchNorm's gx sums to 0 over each channel
            s = y.double().sum(dim=(0, 2, 3))
            bound = 1e-3 * y.double().abs().sum(dim=(0, 2, 3)) + 1e-30
            check_close(kind + ": sum of gx", s.cpu(), torch.zeros_like(s).cpu(), bound.cpu())
        else:   # normalized: each channel's mean of y is its bias
            dims = (0,) if y.dim() == 2 else (0, 2, 3)
            m = y.double().mean(dim=dims)
            check_close(kind + ": mean of y", m.cpu(), bias.double().cpu(),
                        (1e-3 * (w.double().abs() + 1)).cpu())
    b.verify = verify


# ---- suite graphs (suites/bench/graphs.c) ----------------------------------------------------------
# A launch-bound training step eager against captured once and replayed (torch.cuda.CUDAGraph, as
# PyTorch's "whole network capture" recipe: warm-up on a side stream, zero_grad(set_to_none) before
# capture, static input and target tensors the batch is copied into). SGD lr 0.01 momentum 0.9 on
# one fixed device batch; each iteration ends with a device synchronize. cuda only (as tandem's).

GR_SPEC, GR_BATCH, GR_SEED, GR_WARMUP = "mlp:1000-512-10", 64, 20261122, 3


def graphs_register(cfg):
    dev, quick, out = cfg["device"], cfg["quick"], []
    tag = gpt_tag_for(dev, quick)
    for graph in (False, True):   # mlp_step_<eager|graph>/batch:64: x (64,1000), y (64)
        how = "captured step replayed (torch.cuda.graph)" if graph else "eager"
        out.append(Bench("mlp_step_%s" % ("graph" if graph else "eager"), [("batch", GR_BATCH)],
                         lambda b, g=graph: graphs_setup(b, None, GR_BATCH, g),
                         {"samples/s": float(GR_BATCH)}, {},
                         "%s, batch %d, SGD lr 0.01 momentum 0.9, %s" % (GR_SPEC, GR_BATCH, how),
                         dev, work=work_train(GR_SPEC, "f32", GR_BATCH, momentum=0.9)))
    T = GPT_MODELS[tag][3]
    for graph in (False, True):   # gpt_step_<eager|graph>/batch:8: tokens (8,T), logits (8,T,V)
        how = "captured step replayed (torch.cuda.graph)" if graph else "eager"
        out.append(Bench("gpt_step_%s" % ("graph" if graph else "eager"), [("batch", GPT_BATCH)],
                         lambda b, g=graph: graphs_setup(b, tag, GPT_BATCH, g),
                         {"tokens/s": float(GPT_BATCH * T)}, {},
                         "%s, batch %d, SGD lr 0.01 momentum 0.9, %s, %s" % (
                             gpt_spec(tag), GPT_BATCH, how, sdpa_name()), dev,
                         work=work_train(gpt_spec(tag), "f32", GPT_BATCH, momentum=0.9)))
    return out


def graphs_setup(b, tag, batch, graph):
    dev, F = b.dev, torch.nn.functional
    set_tf32(False)
    torch.manual_seed(SEED)
    if tag:   # the amp suite's GPT on GR_SEED's synthetic tokens; loss over (B*T, V) logits
        L, H, D, T, V = GPT_MODELS[tag]
        model = make_gpt(L, H, D, T, V).to(dev)
        x, y = (t.to(dev) for t in gpt_tokens(GR_SEED, V, batch, T))

        def loss_fn(out, yy):
            return F.cross_entropy(out.view(-1, V), yy.view(-1))
    else:     # x ~ N(0,1) (batch,1000), y = the argmax of its first 10 features
        model = build_model(GR_SPEC).to(dev)
        x = randn((batch, 1000), dev, seed_offset=41)
        y = x[:, :10].argmax(dim=1)
        loss_fn = F.cross_entropy
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(xx, yy):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xx), yy)
        loss.backward()
        opt.step()

    def loss_now():
        with torch.no_grad():
            return float(loss_fn(model(x), y))

    if graph:
        xs, ys = x.clone(), y.clone()   # the static input and target the graph reads
        side = torch.cuda.Stream(dev)   # warm-up on a side stream (PyTorch's capture recipe)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(GR_WARMUP):
                step(xs, ys)
        torch.cuda.current_stream(dev).wait_stream(side)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)   # the captured backward allocates .grad from its pool
        try:
            with torch.cuda.graph(g):
                static_loss = loss_fn(model(xs), ys)
                static_loss.backward()
                opt.step()
        except Exception as ex:   # noqa: BLE001 — cannot capture here: the reason, not a figure
            msg = str(ex).strip().splitlines()
            raise SkipBenchmark("torch.cuda.graph capture failed: %s" % (
                msg[0] if msg else type(ex).__name__))

        def body():   # this iteration's batch into the static tensors, one launch, synchronize
            xs.copy_(x)
            ys.copy_(y)
            g.replay()
            torch.cuda.synchronize(dev)
        b.keep = (g, static_loss)
    else:
        for _ in range(GR_WARMUP):
            step(x, y)

        def body():
            step(x, y)
            if is_cuda(dev):
                torch.cuda.synchronize(dev)
    before = loss_now()
    b.body = body

    def verify():   # the replayed (or eager) steps trained: the loss fell and is finite
        after = loss_now()
        if not (math.isfinite(after) and after < before):
            raise CheckFailed("graphs: the loss did not fall (%.6g -> %.6g)" % (before, after))
    b.verify = verify


# ---- suite pipeline (suites/bench/pipeline.c) -------------------------------------------------------
# A training loop fed by torch.utils.data.DataLoader over a TensorDataset, read in order (no shuffle,
# drop_last): one timed iteration is one training step on the loader's next batch (a new epoch,
# the same persistent workers, at the end of one). load_sync_pageable: workers 0, pageable batches
# copied synchronously; load_pinned (cuda): workers 0, pin_memory=True, each batch copied on a side
# stream into one of two device buffers while the previous step computes (events order the
# streams); load_prefetch/workers:W: W worker processes (tandem's are threads) gather batches ahead,
# pinned and copied so on cuda. busy_share = step time / wall time. Each dataset is drawn once per
# process and lent to every row of its shape.

PL_SEED = 20261123
PL_CASES = [   # name, mode, gpt
    ("load_sync_pageable", "sync", False), ("load_pinned", "pinned", False),
    ("load_prefetch", "prefetch", False), ("gpt_load_sync_pageable", "sync", True),
    ("gpt_load_pinned", "pinned", True), ("gpt_load_prefetch", "prefetch", True)]
g_pl_data = {}   # (gpt, features, samples, vocab) -> (x, y) on the cpu, drawn once per process


def pl_shape(dev, quick, gpt):
    """pipeline.c's pl_shape_for: features (a GPT's T), hidden, samples, batch, vocab, spec, lr."""
    if gpt:
        tag = gpt_tag_for(dev, quick)
        L, H, D, T, V = GPT_MODELS[tag]
        return dict(features=T, hidden=0, samples=64 if quick else 256, batch=GPT_BATCH, vocab=V,
                    spec=gpt_spec(tag), lr=0.01, gpt=True, tag=tag)
    F, Hd, B = (12288, 512, 64) if is_cuda(dev) else (256, 64, 32)   # cuda: 3x64x64 "images"
    return dict(features=F, hidden=Hd, samples=512 if quick else 4096, batch=B, vocab=0,
                spec="mlp:%d-%d-10" % (F, Hd), lr=0.05, gpt=False)


def pl_work(sh, workers, staged, cuda):
    """pipeline.c's pl_work: one training step on the loader's next batch, and the loader."""
    w = work_train(sh["spec"], "f32", sh["batch"], lr=sh["lr"])
    w["loader"] = {"samples": sh["samples"], "workers": workers, "pin_memory": staged,
                   "shuffle": False, "drop_last": True,
                   "copy": "none" if not cuda else "side stream, two device buffers" if staged
                   else "synchronous"}
    return w


def pipeline_register(cfg):
    dev, quick, out = cfg["device"], cfg["quick"], []
    cuda = is_cuda(dev)
    for name, mode, gpt in PL_CASES:
        if mode == "pinned" and not cuda:   # pinning buys nothing without copies (as tandem's)
            continue
        sh = pl_shape(dev, quick, gpt)
        staged = cuda and mode != "sync"
        rate = ("tokens/s", float(sh["batch"] * sh["features"])) if gpt else \
            ("samples/s", float(sh["batch"]))
        for workers in ([1, 2, 4] if mode == "prefetch" else [0]):
            label = "%s, batch %d, %s, DataLoader num_workers=%d (processes), SGD lr %g" % (
                sh["spec"], sh["batch"], "pinned + side-stream copy" if staged else
                "pageable" + (" + synchronous copy" if cuda else ""), workers, sh["lr"])
            out.append(Bench(name, [("workers", workers)],
                             lambda b, sh=sh, w=workers, st=staged: pl_setup(b, sh, w, st),
                             {rate[0]: rate[1]},
                             {rate[0].replace("/s", "/iteration"): rate[1]}, label, dev,
                             work=pl_work(sh, workers, staged, cuda)))
    return out


def pl_dataset(sh):
    """The dataset of sh's shape, drawn at its first use in this process: x (N, F) ~ N(0,1) and
    y = the argmax of its first 10 features; a GPT's (N, T) token rows and their next tokens."""
    key = (sh["gpt"], sh["features"], sh["samples"], sh["vocab"])
    if key not in g_pl_data:
        if sh["gpt"]:
            g_pl_data[key] = gpt_tokens(PL_SEED, sh["vocab"], sh["samples"], sh["features"])
        else:
            x = randn((sh["samples"], sh["features"]), torch.device("cpu"), seed_offset=51)
            g_pl_data[key] = (x, x[:, :10].argmax(dim=1))
    return g_pl_data[key]


def pl_setup(b, sh, workers, staged):
    dev, F, cuda = b.dev, torch.nn.functional, is_cuda(b.dev)
    x, y = pl_dataset(sh)
    torch.manual_seed(SEED)
    if sh["gpt"]:
        L, H, D, T, V = GPT_MODELS[sh["tag"]]
        model = make_gpt(L, H, D, T, V).to(dev)

        def loss_fn(out, yy):
            return F.cross_entropy(out.view(-1, V), yy.view(-1))
    else:
        model = build_model(sh["spec"]).to(dev)
        loss_fn = F.cross_entropy
    opt = torch.optim.SGD(model.parameters(), lr=sh["lr"])
    B = sh["batch"]
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, y), batch_size=B, shuffle=False, drop_last=True,
        num_workers=workers, pin_memory=staged, persistent_workers=workers > 0)
    st = {"it": iter(loader), "index": 0, "busy": 0.0, "events": [], "wall0": None,
          "last": None, "cur": 0}

    def next_batch():   # (x, y, its index in the epoch), a new epoch at the end of one
        try:
            xb, yb = next(st["it"])
        except StopIteration:
            st["it"], st["index"] = iter(loader), 0
            xb, yb = next(st["it"])
        st["index"] += 1
        return xb, yb, st["index"] - 1

    def step(xx, yy):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xx), yy)
        loss.backward()
        opt.step()

    def timed_step(xx, yy):   # the step's time: host clock on the cpu, events on cuda
        if st["wall0"] is None:
            st["wall0"] = time.perf_counter()
        if not cuda:
            t0 = time.perf_counter()
            step(xx, yy)
            st["busy"] += time.perf_counter() - t0
            return
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        step(xx, yy)
        e1.record()
        st["events"].append((e0, e1))
        while len(st["events"]) > 64:   # a ring, as tandem's: the oldest summed as it is reused
            a, z = st["events"].pop(0)
            z.synchronize()
            st["busy"] += a.elapsed_time(z) / 1e3

    # the loss on batch 0 before training (the first step trains on it: no shuffle)
    x0, y0 = x[:B].to(dev), y[:B].to(dev)
    with torch.no_grad():
        before = float(loss_fn(model(x0), y0))
    if staged:   # two device buffers, a copy stream, the compute stream (current while timed)
        dx = [torch.empty((B,) + tuple(x.shape[1:]), dtype=x.dtype, device=dev) for _ in range(2)]
        dy = [torch.empty((B,) + tuple(y.shape[1:]), dtype=y.dtype, device=dev) for _ in range(2)]
        copy, compute = torch.cuda.Stream(dev), torch.cuda.Stream(dev)
        copied = [torch.cuda.Event() for _ in range(2)]
        freed = [torch.cuda.Event() for _ in range(2)]
        slot_index = [0, 0]
        torch.cuda.synchronize(dev)   # parameters ready before the streams start
        prev_stream = torch.cuda.current_stream(dev)
        torch.cuda.set_stream(compute)

        def stage(slot):   # the next pinned batch into buffer slot, once its last reader is done
            xb, yb, index = next_batch()
            copy.wait_event(freed[slot])
            with torch.cuda.stream(copy):
                dx[slot].copy_(xb, non_blocking=True)   # the caching host allocator keeps the
                dy[slot].copy_(yb, non_blocking=True)   # pinned block until the copy is done
                copied[slot].record(copy)
            slot_index[slot] = index
        stage(0)   # the first batch on its way

        def body():
            cur = st["cur"]
            if len(st["events"]) >= 2:   # bound how far the host runs ahead
                st["events"][-2][1].synchronize()
            compute.wait_event(copied[cur])
            timed_step(dx[cur], dy[cur])
            freed[cur].record(compute)
            stage(1 - cur)   # while the step computes: gather the next batch, start its copy
            st["cur"] = 1 - cur

        def last_batch():
            last = 1 - st["cur"]
            return dx[last], dy[last], slot_index[last]

        def cleanup():
            torch.cuda.synchronize(dev)
            torch.cuda.set_stream(prev_stream)
            pl_stop(st)
    else:
        def body():
            xb, yb, index = next_batch()
            if cuda:   # pageable memory, a synchronous copy before the step
                xb, yb = xb.to(dev), yb.to(dev)
            timed_step(xb, yb)
            st["last"] = (xb, yb, index)

        def last_batch():
            return st["last"]

        def cleanup():
            pl_stop(st)
    b.body, b.cleanup = body, cleanup

    def verify():   # the last batch handed to the step is the dataset's rows; the loss fell
        if cuda:
            torch.cuda.synchronize(dev)
        lx, ly, index = last_batch()
        if not (torch.equal(lx.cpu(), x[index * B:(index + 1) * B]) and
                torch.equal(ly.cpu(), y[index * B:(index + 1) * B])):
            raise CheckFailed("pipeline: the last batch is not rows %d..%d of the dataset" % (
                index * B, (index + 1) * B - 1))
        with torch.no_grad():
            after = float(loss_fn(model(x0), y0))
        if not after < before:
            raise CheckFailed("pipeline: the loss on batch 0 did not fall (%.6g -> %.6g)" % (
                before, after))
    b.verify = verify

    def after():
        if cuda:
            torch.cuda.synchronize(dev)
        wall = time.perf_counter() - st["wall0"] if st["wall0"] is not None else 0.0
        for a, z in st["events"]:
            st["busy"] += a.elapsed_time(z) / 1e3
        st["events"] = []
        return {"busy_share": st["busy"] / wall if wall > 0 else 0.0}
    b.counters_after = after


def pl_stop(st):
    """The loader's worker processes end with the row (persistent_workers keep them otherwise)."""
    it = st.pop("it", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()


# ---- suite scaling (suites/bench/scaling.c) -----------------------------------------------------------
# Data parallelism through torch.distributed: N rank processes (torch.multiprocessing: fork on the
# cpu, spawn on cuda), gloo on the cpu (N = 1, 2, as tandem's two thread ranks), NCCL on cuda (one
# rank per GPU present, as tandem's). Each timed iteration: the ranks meet at a one-element
# all-reduce, then each times its own work; the iteration's time is the mean over ranks (tandem's
# manual time). allreduce/bytes:S: dist.all_reduce of S bytes of f32 (NCCL: ReduceOp.AVG; gloo has
# no AVG: SUM then / N), algbw = S/t, busbw = algbw 2(N-1)/N (nccl-tests'). dp_<weak|strong>_<model>
# [_no_overlap]/ranks:N: DistributedDataParallel training in f32, SGD lr 0.01, buckets of 25e6
# bytes (bucket_cap_mb), each rank its own data; weak: 64 samples per rank on the cpu, 256 on cuda
# (a GPT's 8 rows), strong: 128 / 1024 (16 rows) split over the ranks; _no_overlap: backward under
# no_sync(), then each bucket all-reduced after it (tandem's tdm_dp_sync). efficiency = thr(N) /
# (N thr(1)), thr(1) the ranks:1 row's median. tandem's predicted_* rows are its model's
# predictions, not timings: the peer has none, and says so.

SC_BUCKET = 25 * 1000 * 1000
SC_LINKS = ["nvlink", "pcie"]   # scaling_model.h's bench_links, by name
g_sc_thr1 = {}   # (row name) -> the ranks:1 row's median throughput


def sc_ranks_max(dev):
    """tandem's max_ranks (no MPI): 2 on the cpu; the GPUs present on cuda (1 when none)."""
    if not is_cuda(dev):
        return 2
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return min(n, 8) or 1


def sc_busbw(nbytes, n):
    return nbytes * 2.0 * (n - 1) / n


def scaling_register(cfg):
    dev, quick, out = cfg["device"], cfg["quick"], []
    cuda, nmax = is_cuda(dev), sc_ranks_max(dev)
    skips = cfg.setdefault("bench_skips", [])
    sizes = [65536] if quick else [4096, 65536, 1 << 20, 16 << 20] + ([256 << 20] if cuda else [])
    for S in sizes:   # allreduce/bytes:S over nmax ranks: S/4 f32 values
        out.append(Bench("allreduce", [("bytes", S)], lambda b, S=S: sc_setup(b, nmax, {
            "kind": "allreduce", "bytes": S}), {"algbw_GB/s": S / 1e9,
                                                "busbw_GB/s": sc_busbw(S, nmax) / 1e9},
            {"ranks": nmax, "bytes/iteration": float(S)},
            "%d ranks (processes, %s); algbw = S/t, busbw = algbw*2(n-1)/n" % (
                nmax, "NCCL" if cuda else "gloo"), dev,
            work={"op": "allreduce_mean", "dtype": "f32", "ranks": nmax, "per_iteration": 1,
                  "bytes": S}))
    models = [("mlp_1000_512_10", "mlp:1000-512-10", (1000,))]
    if cuda:
        models.append(("mlp_10000_5000_2000_10", "mlp:10000-5000-2000-10", (10000,)))
    tag = gpt_tag_for(dev, quick)
    models.append((tag, gpt_spec(tag), None))
    ranks = [n for n in (1, 2, 4, 8) if n <= nmax] + ([nmax] if nmax & (nmax - 1) else [])
    predict = os.environ.get("TANDEM_SCALING_PREDICT") == "1" or (cuda and nmax == 1)
    for mname, spec, in_shape in models:
        gpt = in_shape is None
        for weak, overlap in ((True, True), (False, True), (True, False), (False, False)):
            name = "dp_%s_%s%s" % ("weak" if weak else "strong", mname,
                                   "" if overlap else "_no_overlap")
            for n in ranks:
                out.append(sc_dp_bench(name, spec, in_shape, gpt, weak, overlap, n, cuda, dev))
        if predict:
            for link in SC_LINKS:
                for n in (2, 4, 8):
                    skips.append({"id": "predicted_dp_%s_%s/ranks:%d" % (link, mname, n),
                                  "reason": "tandem's model's prediction (docs/suites/scaling.md), "
                                            "not a measurement: the PyTorch peer has none"})
    return out


def sc_per_rank_batch(gpt, weak, n, cuda):
    b = (GPT_BATCH if weak else 2 * GPT_BATCH) if gpt else \
        (256 if cuda else 64) if weak else (1024 if cuda else 128)
    return b if weak else b // n


def sc_dp_bench(name, spec, in_shape, gpt, weak, overlap, n, cuda, dev):
    batch = sc_per_rank_batch(gpt, weak, n, cuda)
    T = int(re.search(r"-T(\d+)", spec).group(1)) if gpt else 0
    amount = float(batch * n * (T if gpt else 1))
    rate = "tokens/s" if gpt else "samples/s"
    w = work_train(spec, "f32", batch)
    w.update(op="dp_train_step", ranks=n, overlap=overlap, bucket_bytes=SC_BUCKET,
             samples=batch * n)
    if gpt:
        w["tokens"] = batch * n * T
    job = {"kind": "dp", "spec": spec, "in_shape": in_shape, "batch": batch, "overlap": overlap}
    b = Bench(name, [("ranks", n)], lambda bb: sc_setup(bb, n, job), {rate: amount},
              {rate.replace("/s", "/iteration"): amount},
              "%s, %s scaling, %d per rank, bucket 25 MB, overlap %s, DistributedDataParallel "
              "over %s; no comm_share (DDP's all-reduce runs inside backward's hooks)" % (
                  spec, "weak" if weak else "strong", batch, "on" if overlap else "off",
                  "NCCL" if cuda else "gloo"), dev, work=w)
    b.sc_amount = amount
    return b


def sc_setup(b, n, job):
    """Starts n rank processes for this row; b.time_iters asks each to run k iterations and takes
    the mean of their times; the check runs in the ranks; they end with the row."""
    import multiprocessing
    cuda = is_cuda(b.dev)
    ctx = multiprocessing.get_context("spawn" if cuda else "fork")
    with socket.socket() as s:   # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job = dict(job, device=str(b.dev), first_gpu=b.dev.index or 0 if cuda else 0,
               threads=torch.get_num_threads(), port=port, n=n)
    pipes, procs = [], []
    for r in range(n):
        a, z = ctx.Pipe()
        p = ctx.Process(target=sc_rank_main, args=(r, job, z), daemon=True)
        p.start()
        pipes.append(a)
        procs.append(p)

    def ask(cmd, arg=None):   # every rank's answer, or the first error or exit of one of them
        from multiprocessing.connection import wait
        for c in pipes:
            c.send((cmd, arg))
        got, deadline = {}, time.monotonic() + 600
        while len(got) < n:
            ready = wait([c for r, c in enumerate(pipes) if r not in got], timeout=1)
            for c in ready:
                r = pipes.index(c)
                try:
                    kind, v = c.recv()
                except EOFError:
                    kind, v = "error", "rank %d ended (exit %s)" % (r, procs[r].exitcode)
                if kind == "error":
                    raise CheckFailed("scaling: " + v)
                got[r] = v
            dead = [r for r, p in enumerate(procs) if r not in got and not p.is_alive()
                    and not pipes[r].poll()]
            if dead:
                raise CheckFailed("scaling: rank %d ended (exit %s) before answering %s" % (
                    dead[0], procs[dead[0]].exitcode, cmd))
            if time.monotonic() > deadline:
                raise CheckFailed("scaling: the ranks did not answer %s within 600 s" % cmd)
        return [got[r] for r in range(n)]

    def cleanup():
        for c in pipes:
            try:
                c.send(("exit", None))
            except OSError:
                pass
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.terminate()
                p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    b.cleanup = cleanup
    try:
        ask("ready")
    except BaseException:
        cleanup()
        b.cleanup = None
        raise
    b.time_iters = lambda k: sum(ask("run", k)) / n
    b.body = lambda: None   # (timed by the ranks)
    b.verify = lambda: ask("verify")
    if job["kind"] == "dp":
        def after():   # efficiency = thr(N) / (N thr(1)); 1 at one rank by definition
            med = summarize([t / it for it, t, _ in b.samples])["median"]
            thr = b.sc_amount / med
            if n == 1:
                g_sc_thr1[b.name] = thr
                return {"efficiency": 1.0}
            thr1 = g_sc_thr1.get(b.name)
            return {"efficiency": thr / (n * thr1)} if thr1 else {}
        b.counters_after = after


def sc_rank_main(rank, job, conn):
    """One rank's process: joins the group, builds its row's state, then answers the parent's
    commands: ("ready"), ("run", k) -> seconds of k timed iterations, ("verify"), ("exit")."""
    global torch
    for sig in (signal.SIGINT, signal.SIGTERM):   # not the parent's handlers (a fork's copies)
        signal.signal(sig, signal.SIG_DFL)
    import torch as _torch
    torch = _torch
    import torch.distributed as dist
    torch.set_num_threads(job["threads"])
    cuda = job["device"].startswith("cuda")
    dev = torch.device("cuda", job["first_gpu"] + rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    n = job["n"]
    try:
        dist.init_process_group("nccl" if cuda else "gloo",
                                init_method="tcp://127.0.0.1:%d" % job["port"], rank=rank,
                                world_size=n, timeout=datetime.timedelta(seconds=300))
        meet = torch.zeros(1, device=dev)

        def sync():
            if cuda:
                torch.cuda.synchronize(dev)

        def timed_iters(k, work, prepare):   # meet, then time this rank's own work, k times
            total = 0.0
            for _ in range(k):
                if prepare:
                    prepare()
                dist.all_reduce(meet)
                sync()
                t0 = time.perf_counter()
                work()
                sync()
                total += time.perf_counter() - t0
            return total
        if job["kind"] == "allreduce":
            run, verify, prepare = sc_allreduce_rank(rank, n, job["bytes"], dev, dist)
        else:
            (run, verify), prepare = sc_dp_rank(rank, n, job, dev, dist), None
        handlers = {"ready": lambda _: None, "run": lambda k: timed_iters(k, run, prepare),
                    "verify": lambda _: verify()}
        while True:
            cmd, arg = conn.recv()
            if cmd == "exit":
                break
            try:
                conn.send(("ok", handlers[cmd](arg)))
            except Exception as ex:   # noqa: BLE001 — reported to the parent, the row fails
                conn.send(("error", "rank %d: %s" % (rank, str(ex).strip().splitlines()[0]
                                                     if str(ex).strip() else type(ex).__name__)))
                break
    except Exception as ex:   # noqa: BLE001
        try:
            conn.send(("error", "rank %d: %s" % (rank, ex)))
        except OSError:
            pass
    # the process ends here, without destroy_process_group (which may wait on a rank that is
    # gone) and without the atexit handlers a fork inherits from the parent
    conn.close()
    sys.stdout.flush()
    os._exit(0)


def sc_allreduce_rank(rank, n, nbytes, dev, dist):
    """Rank r contributes base * 2^r (exact in f32), base S/4 values in [-1, 1) of 24 bits.
    Returns (run, verify, prepare): prepare copies the contribution into the reduced buffer
    before the ranks meet (outside the time: every iteration reduces the contributions
    themselves), run all-reduces it to the mean."""
    numel = nbytes // 4
    g = torch.Generator(device="cpu")
    g.manual_seed(SEED + 5)
    base = (torch.randint(-(1 << 23), 1 << 23, (numel,), generator=g, dtype=torch.int64)
            .double() / (1 << 23))
    grad = (base * 2.0**rank).float().to(dev)
    work = torch.empty_like(grad)
    avg = getattr(dist.ReduceOp, "AVG", None) if dev.type == "cuda" else None   # gloo: no AVG

    def run():
        if avg is not None:
            dist.all_reduce(work, op=avg)
        else:
            dist.all_reduce(work)
            work.div_(n)

    def verify():   # the mean of base * 2^q within n u mean|x| (NCCL's order) + n 2^-52 mean|x|
        work.copy_(grad)
        run()
        want = sum(base * 2.0**q for q in range(n)) / n
        mean_abs = sum((base * 2.0**q).abs() for q in range(n)) / n
        bound = n * U["f32"] * mean_abs + n * 2.0**-52 * mean_abs + 1e-30
        check_close("allreduce: rank %d's mean" % rank, work.double().cpu(), want, bound)
    return run, verify, lambda: work.copy_(grad)


def sc_dp_rank(rank, n, job, dev, dist):
    F = torch.nn.functional
    DDP = torch.nn.parallel.DistributedDataParallel
    spec, batch = job["spec"], job["batch"]
    torch.manual_seed(SEED)   # the same weights on every rank (DDP also broadcasts rank 0's)
    if spec.startswith("gpt:"):
        L, H, D, T, V = [int(v) for v in re.findall(r"\d+", spec)]
        model = make_gpt(L, H, D, T, V).to(dev)
        x, y = (t.to(dev) for t in gpt_tokens(2 + rank, V, batch, T))   # own data: seed 1 + rank

        def loss_fn(out):
            return F.cross_entropy(out.view(-1, V), y.view(-1))
    else:
        model = build_model(spec).to(dev)
        x = randn((batch,) + tuple(job["in_shape"]), dev, seed_offset=60 + rank)
        s = [4 + rank]
        y = torch.tensor([pick(s, 10) for _ in range(batch)], dtype=torch.int64, device=dev)

        def loss_fn(out):
            return F.cross_entropy(out, y)
    if hasattr(model, "mask") and hasattr(DDP, "_set_params_and_buffers_to_ignore_for_model"):
        # the GPT's causal mask: a constant bool buffer, the same on every rank, which gloo
        # cannot broadcast (bool) and tandem does not synchronize
        DDP._set_params_and_buffers_to_ignore_for_model(model, ["mask"])
    ddp = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None,
              bucket_cap_mb=SC_BUCKET / 2.0**20, broadcast_buffers=False)
    opt = torch.optim.SGD(ddp.parameters(), lr=TRAIN_LR)
    params = [p for p in ddp.parameters() if p.requires_grad]

    buckets, size = [[]], 0   # tandem's buckets: 25e6 bytes at most, the last layer's first
    for p in reversed(params):
        if buckets[-1] and size + p.numel() * 4 > SC_BUCKET:
            buckets.append([])
            size = 0
        buckets[-1].append(p)
        size += p.numel() * 4

    def allreduce_after_backward():   # tandem's tdm_dp_sync: each bucket's mean, after backward
        for bucket in buckets:
            flat = torch.cat([q.grad.reshape(-1) for q in bucket])
            dist.all_reduce(flat)
            flat.div_(n)
            off = 0
            for q in bucket:
                q.grad.copy_(flat[off:off + q.numel()].view_as(q.grad))
                off += q.numel()

    def step():
        opt.zero_grad(set_to_none=True)
        if job["overlap"]:   # DDP: each bucket all-reduced as backward fills it
            loss = loss_fn(ddp(x))
            loss.backward()
        else:
            with ddp.no_sync():
                loss = loss_fn(ddp(x))
                loss.backward()
            allreduce_after_backward()
        opt.step()
        return float(loss)   # loss.item(), as tandem's step

    with torch.no_grad():
        first = float(loss_fn(ddp(x)))

    def verify():   # the replicas are identical (their checksums agree) and the loss fell
        with torch.no_grad():
            after = float(loss_fn(ddp(x)))
            sums = torch.stack([sum(p.double().sum() for p in params),
                                sum((p.double() ** 2).sum() for p in params)])
            hi, lo = sums.clone(), -sums.clone()
            dist.all_reduce(hi, op=dist.ReduceOp.MAX)
            dist.all_reduce(lo, op=dist.ReduceOp.MAX)
        if not torch.equal(hi, -lo):
            raise CheckFailed("the replicas differ across the ranks")
        if not (math.isfinite(after) and after < first):
            raise CheckFailed("the loss did not fall (%.6g -> %.6g)" % (first, after))
    return step, verify


# ---- the suites ---------------------------------------------------------------------------------

SUITES = {   # name -> (devices, register)
    "ops": ({"cpu"}, ops_register),
    "transfer": ({"cpu", "cuda"}, transfer_register),
    "amp": ({"cpu", "cuda"}, amp_register),
    "cpu-vs-gpu": ({"cpu", "cuda"}, cpu_vs_gpu_register),
    "cudnn": ({"cuda"}, cudnn_register),
    "transformer": ({"cpu", "cuda"}, transformer_register),
    "reductions": ({"cuda"}, reductions_register),
    "graphs": ({"cuda"}, graphs_register),
    "pipeline": ({"cpu", "cuda"}, pipeline_register),
    "scaling": ({"cpu", "cuda"}, scaling_register),
}


# ---- files --------------------------------------------------------------------------------------

def write_atomic(path, text):
    # As tandem's writers (core/files.c): a path that exists and is not a regular file (a link, a
    # FIFO, a device) is refused, never replaced; the temp file is made new (O_EXCL, O_NOFOLLOW:
    # whatever had its name is removed first, never written through).
    def not_regular(p):
        try:
            return not stat.S_ISREG(os.lstat(p).st_mode)
        except FileNotFoundError:
            return False
    if not_regular(path):
        raise OSError(errno.EEXIST, "not a regular file (tandem writes no link, FIFO or device)",
                      path)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    if os.path.lexists(tmp) and not os.path.isdir(tmp):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if not_regular(path):
            raise OSError(errno.EEXIST, "not a regular file (tandem writes no link, FIFO or "
                          "device)", path)
        os.replace(tmp, path)
    except OSError:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def fmt_num(v):   # as tandem's CSVs: %.10g, empty when not finite
    return "%.10g" % v if v is not None and math.isfinite(v) else ""


def csv_text(s):
    if any(c in s for c in ',"\n'):
        return '"' + s.replace('"', '""') + '"'
    return s


def summarize(v):   # stats.c's bench_summarize: median, mean, sample stddev, cv, min, max
    n = len(v)
    s = sorted(v)
    med = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    mean = sum(v) / n
    sd = 0.0 if n == 1 else math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1))
    return {"median": med, "mean": mean, "stddev": sd, "cv": sd / mean if mean else math.nan,
            "min": s[0], "max": s[-1]}


def read_first(path, key, sep):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(key):
                    return line.split(sep, 1)[1].strip().strip('"')
    except OSError:
        pass
    return None


def env_json(dev):
    """The machine's context with bench env's keys where they mean the same, plus PyTorch's."""
    e = {"host": socket.gethostname(),
         "cpu_model": read_first("/proc/cpuinfo", "model name", ":") or platform.processor(),
         "cpu_logical": os.cpu_count()}
    mt = read_first("/proc/meminfo", "MemTotal", ":")
    ma = read_first("/proc/meminfo", "MemAvailable", ":")
    e["memory_total_bytes"] = int(mt.split()[0]) * 1024 if mt else None
    e["memory_available_bytes"] = int(ma.split()[0]) * 1024 if ma else None
    e["os"] = read_first("/etc/os-release", "PRETTY_NAME", "=") or "unknown"
    u = platform.uname()
    e["kernel"] = "%s %s %s" % (u.system, u.release, u.machine)
    e["python"] = "%s %s" % (platform.python_implementation(), platform.python_version())
    e["python_executable"] = sys.executable
    e["torch_version"] = torch.__version__
    e["torch_git_version"] = getattr(torch.version, "git_version", None)
    e["torch_num_threads"] = torch.get_num_threads()
    e["torch_num_interop_threads"] = torch.get_num_interop_threads()
    e["torch_parallel_backend"] = torch.__config__.parallel_info().splitlines()[2].strip() \
        if len(torch.__config__.parallel_info().splitlines()) > 2 else None
    e["cuda_runtime"] = torch.version.cuda
    e["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    e["nccl"] = None
    try:
        if torch.cuda.is_available() and hasattr(torch.cuda, "nccl"):
            v = torch.cuda.nccl.version()
            e["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:   # NCCL absent from this build: unknown
        pass
    gpus = []
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    e["gpu_count"] = n
    for i in range(n):
        p = torch.cuda.get_device_properties(i)
        g = {"index": i, "device": "cuda:%d" % i, "name": p.name,
             "memory_bytes": p.total_memory,
             "compute_capability": "%d.%d" % (p.major, p.minor),
             "sm_count": p.multi_processor_count}
        for attr, key in (("L2_cache_size", "l2_bytes"), ("pci_bus_id", "pci_bus_id"),
                          ("uuid", "uuid")):
            if hasattr(p, attr):
                g[key] = str(getattr(p, attr)) if key == "uuid" else getattr(p, attr)
        gpus.append(g)
    e["gpus"] = gpus
    return e


def flat_strings(obj, prefix, out):
    """bench run's context fields as strings: "env.host", "env.gpus.0.name"."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            flat_strings(v, "%s.%s" % (prefix, k), out)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            flat_strings(v, "%s.%d" % (prefix, i), out)
    elif isinstance(obj, bool):
        out[prefix] = "true" if obj else "false"
    elif obj is None:
        out[prefix] = "null"
    elif isinstance(obj, float):
        out[prefix] = "%.17g" % obj
    else:
        out[prefix] = str(obj)


class Results:
    """The results directory, rewritten (atomically) after every benchmark, as bench run does."""

    def __init__(self, out, device_name, plans, skipped):
        self.dir, self.device_name = out, device_name
        self.plans = plans         # [(suite, [Bench])]
        self.skipped = skipped     # [{"suite", "reason"}, {"suite", "benchmark", "reason"}]
        self.finished, self.failed, self.running, self.complete = [], [], None, False
        self.skipped_ids = set()   # benchmarks that raised SkipBenchmark
        self.entries = {}          # suite -> Google Benchmark JSON entries
        self.series = {}           # suite -> [(Bench, metric, unit, [values])]
        self.context = {}
        self.clock_check = {"checked": False, "reason": "the PyTorch peer does not read clocks"}
        # --append: the run already in the directory (its other suites' lists), kept before ours
        self.prior = {"complete": True, "finished": [], "failed": [], "unfinished": [],
                      "skipped": []}

    def status(self):
        done = set(self.finished) | {f["name"] for f in self.failed} | self.skipped_ids
        unfinished = [b.bench_id(s) for s, bl in self.plans for b in bl if b.bench_id(s) not in done]
        p = self.prior
        st = {"complete": self.complete and p["complete"], "running": self.running,
              "finished": p["finished"] + self.finished,
              "unfinished": p["unfinished"] + unfinished, "failed": p["failed"] + self.failed,
              "skipped": p["skipped"] + self.skipped, "clock_check": self.clock_check}
        write_atomic(os.path.join(self.dir, "status.json"), json.dumps(st, indent=1) + "\n")

    def write_suite(self, suite):
        gb = {"context": self.context, "benchmarks": self.entries.get(suite, [])}
        write_atomic(os.path.join(self.dir, suite + ".json"), json.dumps(gb, indent=2) + "\n")
        tidy = ["suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions"]
        raw = ["suite,benchmark,param,x,metric,unit,repetition,value"]
        for b, metric, unit, v in self.series.get(suite, []):
            x = ""
            if 0 <= b.x_arg < len(b.args):
                x = fmt_num(float(b.args[b.x_arg][1]))
            pre = ",".join([csv_text(suite), csv_text(b.name), csv_text(b.param), x,
                            csv_text(metric), csv_text(unit)])
            s = summarize(v)
            tidy.append(pre + "," + ",".join(fmt_num(s[k]) for k in (
                "median", "mean", "stddev", "cv", "min", "max")) + ",%d" % len(v))
            raw += [pre + ",%d,%s" % (i, fmt_num(val)) for i, val in enumerate(v)]
        write_atomic(os.path.join(self.dir, suite + ".csv"), "\n".join(tidy) + "\n")
        write_atomic(os.path.join(self.dir, suite + ".samples.csv"), "\n".join(raw) + "\n")


def prior_run(out, device, suites):
    """--append: the peer run already in `out` (its status.json lists, without those of `suites`,
    which this call runs again), or an error message when `out` holds no peer run on `device`."""
    try:
        with open(os.path.join(out, "context.json"), encoding="utf-8") as f:
            ctx = json.load(f)
        with open(os.path.join(out, "status.json"), encoding="utf-8") as f:
            st = json.load(f)
    except (OSError, ValueError) as ex:
        return None, "cannot read its context.json and status.json (%s)" % ex
    if not isinstance(ctx, dict) or ctx.get("tandem", {}).get("version") != "peer":
        return None, "it holds a run that is not the peer's"
    if ctx.get("device") != device:
        return None, "it holds a peer run on %s, not on %s" % (ctx.get("device"), device)
    mine = lambda i: i.split("/", 1)[0] in suites   # noqa: E731 — "suite/benchmark/param"
    return {"complete": bool(st.get("complete", False)),
            "finished": [i for i in st.get("finished", []) if not mine(i)],
            "unfinished": [i for i in st.get("unfinished", []) if not mine(i)],
            "failed": [f for f in st.get("failed", []) if not mine(f.get("name", ""))],
            "skipped": [k for k in st.get("skipped", []) if k.get("suite") not in suites]}, None


def gb_entries(b, family, reps, samples, rates, plain):
    """Google Benchmark's JSON entries for one instance: one per repetition, then the mean,
    median, stddev and cv aggregates (what compare.py and bench run read)."""
    base = {"name": b.gb_name, "family_index": family, "per_family_instance_index": 0,
            "run_name": b.gb_name}
    out = []
    for i, (iters, t, cpu) in enumerate(samples):
        e = dict(base, run_type="iteration", repetitions=reps, repetition_index=i, threads=1,
                 iterations=iters, real_time=t / iters * 1e9, cpu_time=cpu / iters * 1e9,
                 time_unit="ns")
        for k, v in plain.items():
            e[k] = v
        for k, v in rates.items():
            e[k] = v / (t / iters)
        e["label"] = b.label
        out.append(e)
    if len(samples) > 1:
        cols = {"real_time": [s[1] / s[0] * 1e9 for s in samples],
                "cpu_time": [s[2] / s[0] * 1e9 for s in samples]}
        for k, v in rates.items():
            cols[k] = [v / (s[1] / s[0]) for s in samples]
        for agg in ("mean", "median", "stddev", "cv"):
            e = dict(base, name=b.gb_name + "_" + agg, run_type="aggregate", repetitions=reps,
                     threads=1, aggregate_name=agg,
                     aggregate_unit="percentage" if agg == "cv" else "time",
                     iterations=len(samples), time_unit="ns")
            for k, v in cols.items():
                e[k] = summarize(v)[agg]
            for k, v in plain.items():
                e[k] = v if agg in ("mean", "median") else 0.0
            e["label"] = b.label
            out.append(e)
    return out


# ---- running --------------------------------------------------------------------------------------

g_stop = [0, 0]   # [stop requests, last signal]
g_started = [time.monotonic()]   # when this peer started (--budget counts from it)
TIME_SKIP = "skipped for time"   # tandem's reason for a row its --budget left out


def budget_left(a):
    """Seconds of --budget left (math.inf without one)."""
    if a.budget is None:
        return math.inf
    return a.budget - (time.monotonic() - g_started[0])


def budget_size(a, rows_left):
    """(repetitions, min_time) for the next row so that the rows left fit what is left of
    --budget: a repetition costs about 2 x min_time (Google Benchmark's iteration-count search,
    then the run that counts) and the warm-up 2 x min(min_time, 0.1); fewer repetitions first
    (at least 1), then a shorter min_time (at least 1 ms). Unchanged without --budget."""
    left = budget_left(a)
    if not math.isfinite(left):
        return a.repetitions, a.min_time
    share = max(left, 0.0) / max(rows_left, 1)
    reps, mt = a.repetitions, a.min_time
    cost = lambda r, m: 2 * r * m + 2 * min(m, 0.1)
    while reps > 1 and cost(reps, mt) > share:
        reps -= 1
    while mt > 0.001 and cost(reps, mt) > share:
        mt = max(mt / 2, 0.001)
    return reps, mt


def on_signal(sig, _frame):
    g_stop[0] += 1
    g_stop[1] = sig
    if g_stop[0] == 1:
        sys.stderr.write("\ntorch_peer: interrupted: stopping after the current benchmark "
                         "(again to stop it now)\n")
    else:
        raise KeyboardInterrupt


def run_one(b, a, reps=None, min_time=None):
    """Set up, warm up, time the repetitions, verify. Returns (samples, counters_after) or raises
    CheckFailed (or any error from PyTorch, which fails the benchmark the same way). On a GPU the
    caching allocator's peak statistics start again with each row, so a row's peak_bytes is its
    own (torch.cuda.reset_peak_memory_stats), never the largest of the rows before it."""
    if is_cuda(b.dev):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(b.dev)
    reps = reps or a.repetitions
    min_time = min_time or a.min_time
    b.setup(b)
    try:
        warm = min(min_time, 0.1)
        ti = b.time_iters
        run_until(b.timer_dev, b.body, warm, time_iters=ti)   # untimed warm-up (>= 1 iteration)
        samples = [run_until(b.timer_dev, b.body, min_time, time_iters=ti) for _ in range(reps)]
        b.samples = samples   # (the scaling suite's efficiency reads its ranks:1 row's)
        if b.verify:
            b.verify()
        after = b.counters_after() if b.counters_after else {}
        return samples, after
    finally:
        if b.cleanup:
            b.cleanup()


def record(res, suite, family, b, samples, after, a):
    plain = dict(b.plain)
    plain.update(after)
    rates = dict(b.rates)
    res.entries.setdefault(suite, []).extend(gb_entries(b, family, len(samples), samples, rates,
                                                        plain))
    ser = res.series.setdefault(suite, [])
    ser.append((b, "time", "ns", [t / it * 1e9 for it, t, _ in samples]))
    for k, v in rates.items():   # MFU: a share of the peak, unit "ratio" as tandem's
        ser.append((b, k, "ratio" if k == "MFU" else k, [v / (t / it) for it, t, _ in samples]))


def print_result(i, total, bid, samples, rates, err):
    line = "[%d/%d] %-36s" % (i, total, bid)
    if err:
        line += " FAILED: " + err
    else:
        t = summarize([s[1] / s[0] * 1e9 for s in samples])
        v = t["median"]
        u, d = ("s", 1e9) if v >= 1e9 else ("ms", 1e6) if v >= 1e6 else ("us", 1e3) \
            if v >= 1e3 else ("ns", 1)
        line += " %9.3f %-2s cv %5.1f%%" % (v / d, u, 100 * t["cv"])
        for k, amount in rates.items():
            line += "  %10.4g %s" % (summarize([amount / (s[1] / s[0]) for s in samples])[
                "median"], k)
    print(line, flush=True)


def cudnn_worker(a, dev):
    """--cudnn-mode M: runs the cudnn suite's benchmarks of one mode and prints their results as
    one JSON line per benchmark on stdout (the parent records them)."""
    cfg = {"device": dev, "quick": a.quick, "cudnn_mode": a.cudnn_mode}
    benches = [b for b in cudnn_register(cfg) if matches(a.filter, b)]
    for i, b in enumerate(benches):
        out = {"id": b.bench_id("cudnn")}
        if budget_left(a) <= 0:   # --budget: the parent records it as skipped for time
            print("PEER-RESULT " + json.dumps(dict(out, error=TIME_SKIP)), flush=True)
            continue
        try:
            samples, after = run_one(b, a, *budget_size(a, len(benches) - i))
            out.update(samples=samples, after=after)
        except Exception as ex:   # noqa: BLE001 — a failed benchmark, reported by the parent
            out["error"] = str(ex).splitlines()[0] if str(ex) else type(ex).__name__
        print("PEER-RESULT " + json.dumps(out), flush=True)
        torch.cuda.empty_cache()
    return 0


def cudnn_run_modes(a, dev, benches, want):
    """The cudnn suite: one process per mode (see above). Yields (bench, samples, after, error)."""
    by_id = {b.bench_id("cudnn"): b for b in benches}
    for mode in CUDNN_MODES:
        ids = [i for i in want if by_id[i].cudnn_mode == mode]
        if not ids:
            continue
        cmd = [sys.executable, os.path.abspath(__file__), "--cudnn-mode", str(mode), "--device",
               a.device, "--repetitions", str(a.repetitions), "--min-time", repr(a.min_time),
               "--threads", str(a.threads), "--out", a.out] + (["--quick"] if a.quick else []) \
            + (["--filter", a.filter] if a.filter else []) \
            + (["--budget", repr(max(budget_left(a), 1e-3))] if a.budget else [])
        got = {}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        try:
            for line in proc.stdout:
                if not line.startswith("PEER-RESULT "):
                    sys.stdout.write(line)
                    continue
                r = json.loads(line[len("PEER-RESULT "):])
                got[r["id"]] = r
                b = by_id[r["id"]]
                yield b, [tuple(s) for s in r.get("samples", [])], r.get("after", {}), \
                    r.get("error")
        finally:   # stopped (Ctrl-C) or done: the mode's process does not outlive the run
            if proc.poll() is None and g_stop[0]:
                proc.terminate()
            rc = proc.wait()
        for i in ids:
            if i not in got and not g_stop[0]:
                yield by_id[i], None, None, "the cudnn mode-%d process ended (exit %d) before " \
                    "this benchmark" % (mode, rc)


def matches(flt, b):
    return matches_id(flt, "%s/%s" % (b.name, b.param) if b.args else b.name)


def matches_id(flt, bid):
    if not flt:
        return True
    neg = flt.startswith("-")
    hit = re.search(flt[1:] if neg else flt, bid)
    return not hit if neg else bool(hit)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="torch_peer.py",
        description="PyTorch versions of tandem's benchmark suites, written as a tandem results "
                    "directory (docs/PEERS.md).")
    p.add_argument("--out", required=False, help="results directory (must not hold a run)")
    p.add_argument("--suite", help="suites, comma-separated (default: all that run on the device)")
    p.add_argument("--filter", help="only benchmarks whose name (matmul/n:64) matches this regular "
                                    "expression; -REGEX excludes")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (default cpu)")
    p.add_argument("--repetitions", type=int, help="timed repetitions (default 5, --quick 3)")
    p.add_argument("--min-time", type=float, help="seconds per repetition (default 0.5, "
                                                  "--quick 0.01)")
    p.add_argument("--quick", action="store_true", help="the smallest sizes only")
    p.add_argument("--threads", type=int, default=1,
                   help="torch.set_num_threads (default 1: tandem's CPU backend uses one thread)")
    p.add_argument("--list", action="store_true", help="print the benchmark ids and exit")
    p.add_argument("--json", action="store_true",
                   help="with --list: one JSON object, each row's id and work (what one timed "
                        "iteration does), as tandem's bench list --json; nothing is timed")
    p.add_argument("--skip-unknown-suites", action="store_true",
                   help="skip (with the reason) suites the peer does not know instead of failing "
                        "(bench run --peer passes tandem's suite list)")
    p.add_argument("--append", action="store_true",
                   help="when --out already holds a peer run on the same device, add this call's "
                        "suites to it (bench run's per-suite interleaving) instead of refusing")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="start no row once SECONDS have passed since the peer started (rows not "
                        "run: status.json skipped, reason \"skipped for time\"; exit 0 when only "
                        "those); repetitions are sized to fit what is left")
    p.add_argument("--tandem-commit", default=None, help=argparse.SUPPRESS)
    p.add_argument("--command", default=None, help=argparse.SUPPRESS)  # bench run's argv (JSON)
    p.add_argument("--cudnn-mode", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.repetitions is not None and not 1 <= a.repetitions <= 100000:
        p.error("--repetitions %d: expected an integer from 1 to 100000" % a.repetitions)
    if a.min_time is not None and not (math.isfinite(a.min_time) and 0 < a.min_time <= 1e5):
        p.error("--min-time %g: expected seconds > 0" % a.min_time)
    if a.budget is not None and not (math.isfinite(a.budget) and a.budget > 0):
        p.error("--budget %g: expected seconds > 0" % a.budget)
    if not 1 <= a.threads <= 4096:
        p.error("--threads %d: expected a positive integer" % a.threads)
    a.repetitions = a.repetitions or (3 if a.quick else 5)
    a.min_time = a.min_time or (0.01 if a.quick else 0.5)
    if not re.fullmatch(r"cpu|cuda:\d+", a.device):
        p.error("--device %s: expected cpu or cuda:N" % a.device)
    if a.filter:
        try:
            re.compile(a.filter[1:] if a.filter.startswith("-") else a.filter)
        except re.error as ex:
            p.error("--filter %s: not a valid regular expression (%s)" % (a.filter, ex))
    if not a.out and not a.list:
        p.error("--out DIR is required")
    return a, p


def main(argv):
    global torch
    g_started[0] = time.monotonic()
    a, parser = parse_args(argv)
    try:
        import torch as _torch
        torch = _torch
    except Exception as ex:   # noqa: BLE001 — any import failure means no usable torch
        sys.stderr.write("torch_peer: %s cannot import torch: %s\n  install PyTorch for this "
                         "python (Debian: apt install python3-torch), or give bench run "
                         "--python PATH / TANDEM_PYTHON a python that has it\n" % (sys.executable, ex))
        return 3
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if is_cuda(dev) and not a.list:   # listing needs no device
        if not torch.cuda.is_available():
            sys.stderr.write("torch_peer: --device %s: this torch (%s) sees no CUDA device\n" % (
                a.device, torch.__version__))
            return 2
        if dev.index >= torch.cuda.device_count():
            sys.stderr.write("torch_peer: --device %s: only %d CUDA device(s)\n" % (
                a.device, torch.cuda.device_count()))
            return 2
        torch.cuda.set_device(dev)
    if a.cudnn_mode is not None:
        return cudnn_worker(a, dev)
    kind = dev.type

    names = [s for s in a.suite.split(",") if s] if a.suite else list(SUITES)
    if a.suite is not None and not names:
        parser.error("--suite: no suite named")
    unknown = [s for s in names if s not in SUITES and s not in NOT_PORTED]
    if unknown and not a.skip_unknown_suites:
        parser.error("unknown suite '%s' (the peer has: %s)" % (unknown[0], ", ".join(SUITES)))
    plans, skipped = [], []
    cfg = {"device": dev, "quick": a.quick}
    for s in dict.fromkeys(names):
        reason = None
        if s in NOT_PORTED:
            reason = NOT_PORTED[s]
        elif s not in SUITES:
            reason = "no PyTorch version in the peer"
        elif kind not in SUITES[s][0]:
            reason = "runs on %s, not on %s" % (", ".join(sorted(SUITES[s][0])), a.device)
        else:
            cfg["bench_skips"] = []
            benches = [b for b in SUITES[s][1](cfg) if matches(a.filter, b)]
            for k in cfg.pop("bench_skips"):   # benchmarks not registered, with the reason
                if matches_id(a.filter, k["id"]):
                    sys.stderr.write("torch_peer: skipping %s/%s: %s\n" % (s, k["id"], k["reason"]))
                    skipped.append({"suite": s, "benchmark": k["id"], "reason": k["reason"]})
            if benches:
                plans.append((s, benches))
                continue
            reason = "no benchmark matches --filter %s" % a.filter
        sys.stderr.write("torch_peer: skipping suite %s: %s\n" % (s, reason))
        skipped.append({"suite": s, "reason": reason})
    if a.list and a.json:   # the shape of tandem's bench list --json
        print(json.dumps({"format": "tandem-list/1", "device": a.device, "quick": a.quick,
                          "peer": "torch", "suites": [
                              {"name": s, "device": a.device,
                               "benchmarks": [{"id": b.bench_id(s), "work": b.work} for b in bl],
                               "skipped": [k for k in skipped if k["suite"] == s]}
                              for s, bl in plans]}, indent=1))
        return 0
    if a.list:
        for s, bl in plans:
            for b in bl:
                print(b.bench_id(s))
        return 0
    total = sum(len(bl) for _, bl in plans)
    if total == 0:
        sys.stderr.write("torch_peer: nothing to run on %s\n" % a.device)
        return 2

    try:
        os.makedirs(a.out, exist_ok=True)
    except OSError as ex:
        sys.stderr.write("torch_peer: --out %s: cannot create the directory: %s\n" % (a.out, ex))
        return 2
    prior = None
    if os.path.exists(os.path.join(a.out, "status.json")):
        if not a.append:
            sys.stderr.write("torch_peer: --out %s already holds a run (status.json): choose "
                             "another directory, or --append to add suites to a peer run\n"
                             % a.out)
            return 2
        prior, why = prior_run(a.out, a.device, set(names))
        if prior is None:
            sys.stderr.write("torch_peer: --append: --out %s: %s\n" % (a.out, why))
            return 2

    started = datetime.datetime.now(datetime.timezone.utc)
    env = env_json(dev)
    commit = a.tandem_commit
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, cwd=os.path.dirname(os.path.abspath(__file__)),
                                    timeout=10).stdout.strip() or "unknown"
        except (OSError, subprocess.SubprocessError):
            commit = "unknown"
    command = json.loads(a.command) if a.command else [sys.executable] + sys.argv
    context = {
        "format": FORMAT,
        "tandem": {"version": "peer", "commit": commit,
                   "build": "PyTorch %s through suites/peers/torch_peer.py (not tandem)"
                   % torch.__version__},
        "peer": {"name": "torch", "script": os.path.abspath(__file__),
                 "torch_version": torch.__version__, "cuda": torch.version.cuda,
                 "cudnn": env["cudnn"], "threads": torch.get_num_threads(),
                 "timing": "CUDA events" if is_cuda(dev) else "time.perf_counter",
                 "cudnn_benchmark_default": False},
        "command": command,
        "device": a.device,
        "started": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "flush_l2": False,
        "env": env,
    }
    if prior is None:   # appending keeps the run's context.json (its first call's)
        write_atomic(os.path.join(a.out, "context.json"), json.dumps(context, indent=1) + "\n")
    res = Results(a.out, a.device, plans, skipped)
    if prior is not None:
        res.prior = prior
    gb_ctx = {"date": started.astimezone().isoformat(timespec="seconds"),
              "host_name": env["host"], "executable": os.path.abspath(__file__),
              "num_cpus": os.cpu_count(), "library_build_type": "release",
              "torch_version": torch.__version__, "tandem_device": a.device,
              "tandem_commit": commit, "tandem_version": "peer"}
    flat_strings(env, "env", gb_ctx)
    res.context = gb_ctx

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    res.status()
    done, rc, failed_any = 0, 0, False
    try:
        for s, benches in plans:
            if g_stop[0]:
                break
            fam = {}
            if s == "cudnn":
                gen = cudnn_run_modes(a, dev, benches, [b.bench_id(s) for b in benches])
            else:
                gen = None
            it = iter(benches) if gen is None else gen
            for item in it:
                if g_stop[0]:
                    break
                if gen is not None:   # the cudnn suite: run by its mode's process
                    b, samples, after, err = item
                elif budget_left(a) <= 0:   # --budget spent: recorded, not run
                    b, samples, after, err = item, None, None, TIME_SKIP
                else:
                    b = item
                    res.running = b.bench_id(s)
                    res.status()
                    try:
                        samples, after = run_one(b, a, *budget_size(a, total - done))
                        err = None
                    except KeyboardInterrupt:
                        raise
                    except SkipBenchmark as ex:   # recorded with its reason, not a failure
                        bid = b.bench_id(s)
                        res.skipped.append({"suite": s, "benchmark": "%s/%s" % (b.name, b.param),
                                            "reason": str(ex)})
                        res.skipped_ids.add(bid)
                        res.running = None
                        res.status()
                        done += 1
                        print("[%d/%d] %-36s SKIPPED: %s" % (done, total, bid, ex), flush=True)
                        continue
                    except Exception as ex:   # noqa: BLE001 — the benchmark fails, the run goes on
                        samples, after = None, None
                        msg = str(ex).strip().splitlines()
                        err = msg[0] if msg else type(ex).__name__
                    finally:
                        if is_cuda(dev):
                            torch.cuda.empty_cache()
                bid = b.bench_id(s)
                if err == TIME_SKIP:   # the same shape as tandem's time skips
                    res.skipped.append({"suite": s, "benchmark": "%s/%s" % (b.name, b.param)
                                        if b.args else b.name, "reason": TIME_SKIP})
                    res.skipped_ids.add(bid)
                    res.status()
                    done += 1
                    print("[%d/%d] %-36s SKIPPED: %s" % (done, total, bid, TIME_SKIP), flush=True)
                    continue
                family = fam.setdefault(b.name, len(fam))
                done += 1
                if err:
                    failed_any = True
                    res.failed.append({"name": bid, "error": err})
                    res.entries.setdefault(s, []).append(
                        {"name": b.gb_name, "family_index": family, "per_family_instance_index": 0,
                         "run_name": b.gb_name, "run_type": "iteration",
                         "repetitions": a.repetitions, "repetition_index": 0, "threads": 1,
                         "iterations": 0, "real_time": 0, "cpu_time": 0, "time_unit": "ns",
                         "error_occurred": True, "error_message": err})
                else:
                    record(res, s, family, b, samples, after, a)
                    res.finished.append(bid)
                res.running = None
                res.write_suite(s)
                res.status()
                print_result(done, total, bid, samples, b.rates, err)
            if gen is not None:
                gen.close()
    except KeyboardInterrupt:
        if not g_stop[0]:
            g_stop[0], g_stop[1] = 1, signal.SIGINT
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    res.running = None
    res.complete = not g_stop[0]
    res.status()
    unfinished = total - len(res.finished) - len(res.failed) - len(res.skipped_ids)
    n_bench = sum(1 for k in res.skipped if "benchmark" in k)
    n_suite = len(res.skipped) - n_bench
    print("results in %s: %d finished, %d failed, %d unfinished, %d suite%s skipped%s" % (
        a.out, len(res.finished), len(res.failed), unfinished, n_suite,
        "" if n_suite == 1 else "s",
        ", %d benchmark%s skipped" % (n_bench, "" if n_bench == 1 else "s") if n_bench else ""),
        flush=True)
    for f in res.failed:
        print("FAILED %s: %s" % (f["name"], f["error"]), flush=True)
    if g_stop[0]:
        return 128 + (g_stop[1] or signal.SIGINT)
    return rc or (1 if failed_any else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
