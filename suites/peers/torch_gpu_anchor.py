#!/usr/bin/env python3
"""torch_gpu_anchor.py — PyTorch's own figures on the same GPU, independent of tandem's code.

Run it on a machine with a CUDA GPU and PyTorch, in the same session as a tandem `bench run`, and
keep its JSON beside tandem's results (results/<dir>/torch_gpu_anchor.json): the two together show
whether tandem's figures agree with an independent path (host<->device and device copies, GEMM per
precision) and how tandem's backend compares (MLP training steps, ResNet-50 convolutions).
`.ci/gpu-session` runs it in `first` and `perf` (and alone: `.ci/gpu-session anchor`); it travels
with the working tree, so a clone alone has all a GPU session needs. Bytes counted: a d2d copy
counts read + write (2 x size), host<->device copies the size once; GEMMs count 2 n^3 FLOPs.

usage: python3 suites/peers/torch_gpu_anchor.py [--out FILE.json] [--quick]
"""
import argparse
import json
import platform
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def cuda_ms(fn, reps, warmup=3):
    """Median milliseconds of fn() over reps, timed with CUDA events after warm-up."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times), min(times), max(times)


def transfers(quick):
    out = []
    sizes = [1 << k for k in range(10, 31, 2 if quick else 1)]
    for size in sizes:
        n = size // 4
        dev = torch.empty(n, device="cuda")
        reps = 20 if size < (64 << 20) else 5
        for kind in ("pageable", "pinned"):
            host = torch.empty(n, pin_memory=(kind == "pinned")).uniform_()
            for direction in ("h2d", "d2h"):
                if direction == "h2d":
                    fn = lambda: dev.copy_(host, non_blocking=(kind == "pinned"))  # noqa: E731
                else:
                    fn = lambda: host.copy_(dev, non_blocking=(kind == "pinned"))  # noqa: E731
                med, lo, hi = cuda_ms(fn, reps)
                out.append({"size": size, "memory": kind, "direction": direction, "ms": med,
                            "GBps": size / (med * 1e-3) / 1e9, "min_ms": lo, "max_ms": hi})
        src = torch.empty(n, device="cuda").uniform_()
        med, lo, hi = cuda_ms(lambda: dev.copy_(src), reps)
        out.append({"size": size, "memory": "device", "direction": "d2d", "ms": med,
                    "GBps": 2 * size / (med * 1e-3) / 1e9, "min_ms": lo, "max_ms": hi})
        del dev, host, src
    return out


def gemms(quick):
    out = []
    for n in ([4096] if quick else [1024, 4096, 8192]):
        for prec in ("fp32", "tf32", "fp16", "bf16"):
            torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
            dt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[prec]
            a = torch.randn(n, n, device="cuda", dtype=dt)
            b = torch.randn(n, n, device="cuda", dtype=dt)
            med, lo, hi = cuda_ms(lambda: a @ b, 10)
            out.append({"n": n, "precision": prec, "ms": med, "TFLOPs": 2 * n ** 3 / (med * 1e-3) / 1e12})
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def mlp(widths):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).cuda()


def train_steps(quick):
    out = []
    models = [[1000, 512, 128, 10], [10000, 5000, 2000, 10]]
    for widths in models:
        for batch in ([64] if quick else [64, 1024, 8192]):
            for prec in ("fp32", "tf32", "fp16", "bf16"):
                torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
                torch.backends.cudnn.allow_tf32 = prec == "tf32"
                m = mlp(widths)
                opt = torch.optim.Adam(m.parameters(), 1e-3)
                scaler = torch.cuda.amp.GradScaler(enabled=prec == "fp16")
                x = torch.randn(batch, widths[0], device="cuda")
                y = torch.randint(0, widths[-1], (batch,), device="cuda")
                amp_dt = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(prec)

                def step():
                    opt.zero_grad(set_to_none=True)
                    with torch.autocast("cuda", dtype=amp_dt or torch.float32, enabled=amp_dt is not None):
                        loss = F.cross_entropy(m(x), y)
                    scaler.scale(loss).backward()
                    scaler.step(opt)
                    scaler.update()
                torch.cuda.reset_peak_memory_stats()
                med, lo, hi = cuda_ms(step, 20 if quick else 50, warmup=5)
                out.append({"model": "mlp:" + "-".join(map(str, widths)), "batch": batch, "precision": prec,
                            "ms_per_step": med, "samples_per_s": batch / (med * 1e-3),
                            "peak_bytes": torch.cuda.max_memory_allocated()})
                del m, opt, x, y
                torch.cuda.empty_cache()
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


# ResNet-50 convolution shapes (N, C, H, W, K, R, S, stride, pad) at batch 32
CONVS = [(32, 3, 224, 224, 64, 7, 7, 2, 3), (32, 64, 56, 56, 64, 3, 3, 1, 1), (32, 256, 56, 56, 128, 1, 1, 1, 0),
         (32, 128, 28, 28, 128, 3, 3, 1, 1), (32, 256, 14, 14, 256, 3, 3, 1, 1), (32, 512, 7, 7, 512, 3, 3, 1, 1)]


def convs(quick):
    out = []
    for prec in (["fp32", "fp16"] if quick else ["fp32", "tf32", "fp16", "bf16"]):
        dt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[prec]
        torch.backends.cudnn.allow_tf32 = prec == "tf32"
        for bench_mode in (False, True):
            torch.backends.cudnn.benchmark = bench_mode
            for (n, c, h, w, k, r, s, stride, pad) in CONVS:
                x = torch.randn(n, c, h, w, device="cuda", dtype=dt, requires_grad=True)
                wt = torch.randn(k, c, r, s, device="cuda", dtype=dt, requires_grad=True)
                t0 = time.perf_counter()
                y = F.conv2d(x, wt, stride=stride, padding=pad)
                y.backward(torch.ones_like(y))
                torch.cuda.synchronize()
                first_ms = (time.perf_counter() - t0) * 1e3

                def fb():
                    yy = F.conv2d(x, wt, stride=stride, padding=pad)
                    yy.backward(torch.ones_like(yy))
                med, lo, hi = cuda_ms(fb, 20)
                out.append({"shape": [n, c, h, w, k, r, s, stride, pad], "precision": prec,
                            "cudnn_benchmark": bench_mode, "first_call_ms": first_ms, "fwd_bwd_ms": med})
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = True
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="torch_gpu_anchor.json")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    p = torch.cuda.get_device_properties(0)
    res = {"context": {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                       "device": p.name, "sm_count": p.multi_processor_count, "total_memory": p.total_memory,
                       "host": platform.node(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}
    for name, fn in (("transfers", transfers), ("gemm", gemms), ("train_step", train_steps), ("conv", convs)):
        t = time.time()
        res[name] = fn(a.quick)
        print(f"{name}: {len(res[name])} figures in {time.time() - t:.1f} s", flush=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
