#!/usr/bin/python3
"""gen_optim_expect.py — the PyTorch values test_optim.c's parameter-group, clipping and
schedule tests compare with (Debian's torch 1.13, float64): prints them; they are pasted into
test_optim.c (PT_* arrays). usage: /usr/bin/python3 suites/tests/gen_optim_expect.py

- groups: SGD (momentum 0.9, wd 0.01), Adam and AdamW (wd 0.05) over two parameter groups, the
  second with its own lr (and weight decay), 4 steps, from step 1 on every group's lr set from
  nanoGPT's schedule (max 0.1, min 0.01, warm-up 2, decay 5), the second group's halved;
- clip_grad_norm_ over three parameters (the middle one without a gradient): norm types 2, inf,
  3, 1, a norm under max_norm, a NaN and an inf gradient;
- nanoGPT's get_lr at the edges of three schedules."""
import math

import torch

torch.set_default_dtype(torch.float64)

P0 = [0.5, -1.25, 2.0, 0.125, -0.75]
Q0 = [0.25, -0.5, 1.5]


def grad_at(k, n, off):   # test_optim.c's grad_at, plus an offset for the second parameter
    return [(2.0 if k == 0 else 0.05) * (-1.0 if j % 2 else 1.0) + 0.01 * j + off for j in range(n)]


def get_lr(it, max_lr, min_lr, warmup, decay):   # nanoGPT's train.py
    if it < warmup:
        return max_lr * (it + 1) / (warmup + 1)
    if it > decay:
        return min_lr
    r = (it - warmup) / (decay - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (max_lr - min_lr)


def groups(kind):
    p = torch.tensor(P0, requires_grad=True)
    q = torch.tensor(Q0, requires_grad=True)
    if kind == "sgd":
        o = torch.optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.3, "weight_decay": 0.0}],
                            lr=0.1, momentum=0.9, weight_decay=0.01, foreach=False)
    elif kind == "adam":
        o = torch.optim.Adam([{"params": [p], "weight_decay": 0.1}, {"params": [q], "lr": 0.02}],
                             lr=0.1, foreach=False)
    else:
        o = torch.optim.AdamW([{"params": [p]}, {"params": [q], "lr": 0.02, "weight_decay": 0.0}],
                              lr=0.1, weight_decay=0.05, foreach=False)
    for k in range(4):
        if k >= 1:
            lr = get_lr(k, 0.1, 0.01, 2, 5)
            o.param_groups[0]["lr"] = lr
            o.param_groups[1]["lr"] = lr * 0.5
        p.grad = torch.tensor(grad_at(k, 5, 0.0))
        q.grad = torch.tensor(grad_at(k, 3, 0.03))
        o.step()
    return p.detach().tolist() + q.detach().tolist()


G1 = [0.5, -1.5, 2.25, 0.75, -0.125]
G2 = [1.0, -3.0, 0.25]


def clip(g1, g2, max_norm, norm_type):
    p1, p2, p3 = torch.zeros(5), torch.zeros(3), torch.zeros(2)
    p1.grad, p2.grad = torch.tensor(g1), torch.tensor(g2)
    t = torch.nn.utils.clip_grad_norm_([p1, p3, p2], max_norm, norm_type)
    return [float(t)] + p1.grad.tolist() + p2.grad.tolist()


def c_list(v):
    return ", ".join("NAN" if math.isnan(x) else ("-" if x < 0 else "") + "INFINITY"
                     if math.isinf(x) else repr(x) for x in v)


for kind in ("sgd", "adam", "adamw"):
    print(f"groups {kind}: {{{c_list(groups(kind))}}}")
for mx, nt in ((1.0, 2.0), (0.5, math.inf), (2.0, 3.0), (100.0, 2.0), (1.0, 1.0)):
    print(f"clip max_norm {mx} norm_type {nt}: {{{c_list(clip(G1, G2, mx, nt))}}}")
nan_g1 = list(G1)
nan_g1[2] = math.nan
inf_g2 = list(G2)
inf_g2[1] = math.inf
print(f"clip nan: {{{c_list(clip(nan_g1, G2, 1.0, 2.0))}}}")
print(f"clip inf: {{{c_list(clip(G1, inf_g2, 1.0, 2.0))}}}  (signs: -0.0 where g < 0)")
for args in ((6e-4, 6e-5, 10, 100), (1.0, 0.1, 0, 4)):
    steps = (0, 1, 2, 3, 4, 5, 9, 10, 11, 55, 99, 100, 101, 1000)
    print(f"get_lr{args}: {{{c_list(get_lr(it, *args) for it in steps)}}}")
