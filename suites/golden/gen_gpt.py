#!/usr/bin/python3
# Golden GPT-2 generator for tandem (issue 23): writes `tandem-gpt/1` safetensors files into
# suites/golden/gpt/: a nanoGPT-equivalent GPT-2 (state-dict names as nanoGPT's), its seeded
# initial weights, token batches, step 0's logits and every parameter's gradient, then a run of
# AdamW steps with gradient clipping and nanoGPT's warm-up + cosine schedule (per-step loss, grad
# norm and lr, final parameters), as llm.c's test_gpt2 proves its model. Each file holds the
# float64 run (the target) and PyTorch's runs at the precisions tandem trains in; those Debian's
# CPU PyTorch 1.13 lacks (TF32, CUDA autocast, the GradScaler) are emulated in f32 as gen_train.py
# does. It also writes llm.c token files (.bin), a token-only safetensors file, malformed .bin
# files, and a nanoGPT state dict in both safetensors forms. A MANIFEST lists every file.
#
#   /usr/bin/python3 suites/golden/gen_gpt.py --out suites/golden/gpt
#
# Needs only torch and numpy; the safetensors writer/reader is gen_cases.py's, the TF32 rounding
# gen_train.py's.
"""tandem golden GPT-2 generator (see suites/golden/README.md, "Golden GPT-2")."""

import argparse
import glob
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True         # importing gen_cases/gen_train leaves no __pycache__ behind
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_cases import check_round_trip, read_safetensors, write_safetensors  # noqa: E402
from gen_train import FP16_GROWTH_INTERVAL, FP16_SCALE, round_tf32, seed_of  # noqa: E402

FORMAT = "tandem-gpt/1"
GENERATOR = "suites/golden/gen_gpt.py"
IGNORE_INDEX = -1                      # nanoGPT's F.cross_entropy(..., ignore_index=-1)

# nanoGPT's train.py hyper-parameters, scaled to a 16-step run (its defaults: lr 6e-4, 2000
# warm-up iterations, 600000 decay iterations, min_lr lr/10, weight decay 0.1, betas (0.9, 0.95),
# grad_clip 1.0). warmup 4 and decay 12 over 16 steps exercise all three branches of get_lr.
OPT = dict(learning_rate=1e-2, min_lr=1e-3, warmup_iters=4, lr_decay_iters=12, weight_decay=0.1,
           betas=(0.9, 0.95), eps=1e-8, grad_clip=1.0)

# tag -> model and data (block_size is the context; seq_len T <= block_size the rows' length)
CONFIGS = {
    "gpt-l2h2d32t16v67": dict(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=67,
                              seq_len=16, batch=4, steps=16, samples=64,
                              runs=("f64", "f32", "f32_k2", "f32_k4", "tf32_rna", "tf32_rz", "bf16", "bf16_k2",
                                    "bf16_cpu", "fp16", "fp16_k2")),
    "gpt-l2h2d32t16v67-ignore": dict(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=67,
                                     seq_len=16, batch=4, steps=16, samples=64,
                                     runs=("f64", "f32", "f32_k2", "f32_k4"),
                                     same_as="gpt-l2h2d32t16v67"),
    "gpt-l3h3d24t12v61-seq8": dict(n_layer=3, n_head=3, n_embd=24, block_size=12, vocab_size=61,
                                   seq_len=8, batch=4, steps=16, samples=48,
                                   runs=("f64", "f32", "f32_k2", "f32_k4")),
}
MAIN = "gpt-l2h2d32t16v67"

# The unit roundoff and reference runs of each precision tandem trains in (the bound rule, below):
# a family of legitimate implementations that differ only in rounding (order of accumulation, or
# TF32's conversion), whose worst deviation from f64 is the yardstick; one run is one sample of
# the rounding noise, and 16 AdamW steps amplify it chaotically in places (README).
RULES = {
    "f32": (("f32", "f32_k2", "f32_k4"), 2.0 ** -24),
    "tf32": (("tf32_rna", "tf32_rz"), 2.0 ** -10),
    "bf16": (("bf16", "bf16_k2"), 2.0 ** -8),
    "fp16": (("fp16", "fp16_k2"), 2.0 ** -11),
}
ILL_STEP = 3.0      # an Adam step on pure rounding noise moves a weight by at most ~3 lr (README)

# ---------------------------------------------------------------------------------------------
# GPT-2 as nanoGPT's model.py writes it (attention written out, not F.scaled_dot_product_attention)
# ---------------------------------------------------------------------------------------------


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 67
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32
    dropout: float = 0.0
    bias: bool = True
    gelu: str = "tanh"        # "tanh" (llm.c, GPT-2) or "none" (nanoGPT's nn.GELU())


class LayerNorm(nn.Module):
    """nanoGPT's LayerNorm: optional bias, eps 1e-5."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)   # weight (3D, D)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)       # weight (D, D)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        # nanoGPT's causal mask of the non-flash path; not persistent, so the state dict is the one
        # nanoGPT has on PyTorch >= 2 (flash attention, no `attn.bias` buffer)
        mask = torch.tril(torch.ones(config.block_size, config.block_size))
        self.register_buffer("bias", mask.view(1, 1, config.block_size, config.block_size), persistent=False)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)     # weight (4D, D)
        self.gelu = nn.GELU(approximate=config.gelu)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)   # weight (D, 4D)
        self.dropout = nn.Dropout(config.dropout)


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)


class GPT(nn.Module):
    """nanoGPT's GPT: same modules, names, construction order and init, so torch.manual_seed(s)
    followed by GPT(config) draws the same weights as nanoGPT's model.py does."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),     # (V, D), tied to lm_head
            wpe=nn.Embedding(config.block_size, config.n_embd),     # (block_size, D)
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)       # weight (V, D)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None, ops=None):
        return gpt_forward(self, idx, targets, ops or PLAIN)


def gpt_forward(model, idx, targets, e):
    """idx, targets (B, T) int64 -> logits (B, T, V), mean cross-entropy over the targets that are
    not IGNORE_INDEX (None without targets). Every op goes through `e` (Ops or Emu, below)."""
    cfg = model.config
    B, T = idx.shape
    assert T <= cfg.block_size
    D, H = cfg.n_embd, cfg.n_head
    tr = model.transformer
    pos = torch.arange(0, T, dtype=torch.long)
    x = tr.drop(e.add(e.embedding(idx, tr.wte.weight), e.embedding(pos, tr.wpe.weight)))  # (B, T, D)
    for blk in tr.h:
        a, m = blk.attn, blk.mlp
        h = e.layer_norm(x, blk.ln_1)
        q, k, v = e.linear(h, a.c_attn.weight, a.c_attn.bias).split(D, dim=2)       # (B, T, D) each
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))       # (B, H, T, hd)
        s = e.scale(e.matmul(q, k.transpose(-2, -1)), 1.0 / math.sqrt(D // H))       # (B, H, T, T)
        s = s.masked_fill(a.bias[:, :, :T, :T] == 0, float("-inf"))
        att = a.attn_dropout(e.softmax(s))
        y = e.matmul(att, v).transpose(1, 2).contiguous().view(B, T, D)
        x = e.add(x, a.resid_dropout(e.linear(y, a.c_proj.weight, a.c_proj.bias)))
        h = e.gelu(e.linear(e.layer_norm(x, blk.ln_2), m.c_fc.weight, m.c_fc.bias), cfg.gelu)
        x = e.add(x, m.dropout(e.linear(h, m.c_proj.weight, m.c_proj.bias)))
    logits = e.linear(e.layer_norm(x, tr.ln_f), model.lm_head.weight, None)           # (B, T, V)
    loss = None if targets is None else e.cross_entropy(logits, targets)
    return logits, loss


class Ops:
    """PyTorch's own ops (under torch.autocast when the caller enters it)."""

    def linear(self, x, w, b):
        return F.linear(x, w, b)

    def matmul(self, a, b):
        return a @ b

    def scale(self, s, c):
        return s * c

    def softmax(self, s):
        return F.softmax(s, dim=-1)

    def layer_norm(self, x, ln):
        return F.layer_norm(x, ln.weight.shape, ln.weight, ln.bias, 1e-5)

    def gelu(self, x, approximate):
        return F.gelu(x, approximate=approximate)

    def add(self, x, y):
        return x + y

    def embedding(self, idx, w):
        return F.embedding(idx, w)

    def cross_entropy(self, logits, targets):
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=IGNORE_INDEX)


PLAIN = Ops()

# ---------------------------------------------------------------------------------------------
# precisions PyTorch's CPU build lacks, emulated (gen_train.py's approach, applied to every product)
# ---------------------------------------------------------------------------------------------
#
# f32_k2, f32_k4      PyTorch's f32 but every matrix product — the linears (the rows of (B, T)
#     flattened into one product) and both attention products — and a linear's bias gradient
#     computed as a split-K GEMM does: each reduction (the forward's, and both backward
#     products') cut into 2 or 4 nearly equal chunks whose f32 results are summed in order, in
#     f32. Honest f32 arithmetic in another order: two more samples of f32 rounding noise.
# tf32_rna, tf32_rz   every matrix product — the linears (c_attn, c_proj, c_fc, mlp.c_proj,
#     lm_head) and both attention products (q k^T, att v) — rounds each tensor operand of its
#     forward and of both backward products to TF32 and sums the exact products in f32
#     (gen_train.py's round_tf32: to nearest, ties away, or truncated); bias adds, the scale,
#     softmax, layer norms, GELU, embeddings and the loss stay f32.
# fp16, bf16          PyTorch's CUDA autocast policy (1.13): linear and matmul cast their inputs
#     (and bias) to the low dtype and return it (f32 accumulation, rounded once); softmax,
#     layer_norm and cross_entropy run in f32 (f32 outputs; softmax's probabilities are cast to
#     the low dtype by the `att @ v` product that takes them); GELU and the scale multiply run on
#     the low-dtype tensor (computed in f32, rounded); embeddings and the residual stream stay f32
#     (an f32 + low add promotes to f32). A low-dtype tensor is held in f32 and rounded forward,
#     and its gradient is rounded backward. fp16 adds nanoGPT's GradScaler (gen_train.py's
#     emulation: loss x 65536, gradients unscaled by 2^-16 before clipping, a step with a
#     non-finite gradient skipped and the scale halved, growth after 2000 steps).
# bf16_k2, fp16_k2    bf16, fp16 with every product's f32 accumulation (and a linear's bias
#     gradient) split in 2, as f32_k2: a second sample of each.
# bf16_cpu            PyTorch's own CPU autocast to bfloat16 (real kernels): as bf16 above except
#     that softmax is not on 1.13's CPU fp32 list: it runs on, and returns, bf16.
# ref_*               (validation only, not stored) a round-once implementation like tandem's ref
#     backend: every op computed in f64 from its (f32 or low-dtype) inputs and rounded once to
#     f32 (or to the low dtype where autocast says), gradients likewise; AdamW in f64 rounded to
#     f32. Judged by the rule below to show that an implementation rounding differently passes.


class Round(torch.autograd.Function):
    """A tensor of dtype `dt` held in a wider dtype: rounds the value forward and its gradient
    backward (the gradient of a dt tensor is a dt tensor)."""

    @staticmethod
    def forward(ctx, x, dt):
        ctx.dt = dt
        return x.to(dt).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx.dt).to(g.dtype), None


def _tf32(t, mode):
    if mode is None:
        return t
    return round_tf32(t.float(), mode).to(t.dtype)   # an f64 tensor here holds f32 values


def _split_k(a, b, k):
    """a @ b (batched) with its reduction (a's last dim) cut into k nearly equal chunks: the
    chunks' products are computed separately and summed in order, in the operands' dtype (a
    split-K GEMM's order; k = 1, or fewer than 2 elements a chunk: one product)."""
    n = a.shape[-1]
    if k == 1 or n < 2 * k:
        return a @ b
    y = None
    for i in range(k):
        p = a[..., n * i // k:n * (i + 1) // k] @ b[..., n * i // k:n * (i + 1) // k, :]
        y = p if y is None else y + p
    return y


class Product(torch.autograd.Function):
    """a @ b (batched) as a GPU library may compute it: each tensor operand of the forward and of
    both backward products rounded to TF32 (mode 'rna'|'rz'; None: kept), and each product's
    reduction split k ways (_split_k): y = r(a) r(b); da = r(dy) r(b)^T over b's columns,
    db = r(a)^T r(dy) over a's rows."""

    @staticmethod
    def forward(ctx, a, b, mode, k):
        ctx.save_for_backward(a, b)
        ctx.mode, ctx.k = mode, k
        return _split_k(_tf32(a, mode), _tf32(b, mode), k)

    @staticmethod
    def backward(ctx, dy):
        a, b = ctx.saved_tensors
        r = lambda t: _tf32(t, ctx.mode)  # noqa: E731
        return (_split_k(r(dy), r(b).transpose(-2, -1), ctx.k),
                _split_k(r(a).transpose(-2, -1), r(dy), ctx.k), None, None)


class AddBias(torch.autograd.Function):
    """y (rows, n) + b (n): b's gradient, the sum of dy over the rows, split k ways too."""

    @staticmethod
    def forward(ctx, y, b, k):
        ctx.k = k
        return y + b

    @staticmethod
    def backward(ctx, dy):
        n, k = dy.shape[0], ctx.k if dy.shape[0] >= 2 * ctx.k else 1
        db = None
        for i in range(k):
            p = dy[n * i // k:n * (i + 1) // k].sum(0)
            db = p if db is None else db + p
        return dy, db, None


class Emu(Ops):
    """tf32: 'rna'|'rz' TF32 operands for every product; low: torch.float16|bfloat16, CUDA
    autocast's policy; k > 1: every product's reductions (and a linear's bias gradient) split k
    ways (the f32_k*, *_k2 runs); wide: the model runs in f64 and every op's result (and
    gradient) is rounded to f32 (the ref_* validation runs)."""

    def __init__(self, tf32=None, low=None, wide=False, k=1):
        assert not (wide and k > 1)
        self.tf32, self.low, self.wide, self.k = tf32, low, wide, k

    def w(self, t):          # an op's f32 result
        return Round.apply(t, torch.float32) if self.wide and t is not None else t

    def lo(self, t):         # an autocast low-dtype tensor
        return Round.apply(t, self.low) if self.low and t is not None else t

    def matmul(self, a, b):
        if self.low:
            if self.k > 1:
                return self.lo(Product.apply(self.lo(a), self.lo(b), None, self.k))
            return self.lo(self.lo(a) @ self.lo(b))
        if self.tf32 or self.k > 1:
            return self.w(Product.apply(a, b, self.tf32, self.k))
        return self.w(a @ b)

    def linear(self, x, w, b):
        if self.low and self.k > 1:
            y = Product.apply(self.lo(x).reshape(-1, x.shape[-1]), self.lo(w).t(), None, self.k)
            y = y if b is None else AddBias.apply(y, self.lo(b), self.k)
            return self.lo(y.view(*x.shape[:-1], w.shape[0]))
        if self.low:
            return self.lo(F.linear(self.lo(x), self.lo(w), self.lo(b)))
        w = self.w(w)
        if self.k > 1:     # one product over the flattened rows, its three reductions split
            y = Product.apply(x.reshape(-1, x.shape[-1]), w.t(), self.tf32, self.k)
            y = y if b is None else AddBias.apply(y, b, self.k)
            return y.view(*x.shape[:-1], w.shape[0])
        if self.tf32:      # one product over the flattened rows, as cuBLAS does
            y = Product.apply(x.reshape(-1, x.shape[-1]), w.t(), self.tf32, 1).view(*x.shape[:-1], w.shape[0])
            y = self.w(y)
            return y if b is None else self.w(y + self.w(b))
        return self.w(F.linear(x, w, self.w(b)))

    def scale(self, s, c):
        c = torch.tensor(c, dtype=torch.float32).item()      # an f32 kernel's scalar (CUDA: opmath)
        return self.lo(s * c) if self.low else self.w(s * c)

    def softmax(self, s):
        return self.w(F.softmax(s, dim=-1))

    def layer_norm(self, x, ln):
        return self.w(F.layer_norm(x, ln.weight.shape, self.w(ln.weight), self.w(ln.bias), 1e-5))

    def gelu(self, x, approximate):
        y = F.gelu(x, approximate=approximate)
        return self.lo(y) if self.low else self.w(y)

    def add(self, x, y):
        return self.w(x + y)

    def embedding(self, idx, w):
        return self.w(F.embedding(idx, self.w(w)))

    def cross_entropy(self, logits, targets):
        return self.w(super().cross_entropy(logits, targets))


# run -> (model dtype, ops, CPU autocast dtype, GradScaler)
f64, f32, f16, bf16 = torch.float64, torch.float32, torch.float16, torch.bfloat16
RUNS = {
    "f64": (f64, PLAIN, None, False),
    "f32": (f32, PLAIN, None, False),
    "f32_k2": (f32, Emu(k=2), None, False),
    "f32_k4": (f32, Emu(k=4), None, False),
    "tf32_rna": (f32, Emu(tf32="rna"), None, False),
    "tf32_rz": (f32, Emu(tf32="rz"), None, False),
    "bf16": (f32, Emu(low=bf16), None, False),
    "bf16_cpu": (f32, PLAIN, bf16, False),
    "fp16": (f32, Emu(low=f16), None, True),
    "bf16_k2": (f32, Emu(low=bf16, k=2), None, False),
    "fp16_k2": (f32, Emu(low=f16, k=2), None, True),
    "ref_f32": (f64, Emu(wide=True), None, False),
    "ref_tf32": (f64, Emu(wide=True, tf32="rna"), None, False),
    "ref_bf16": (f64, Emu(wide=True, low=bf16), None, False),
    "ref_fp16": (f64, Emu(wide=True, low=f16), None, True),
}
VALIDATION = {"ref_f32": "f32", "ref_tf32": "tf32", "ref_bf16": "bf16", "ref_fp16": "fp16"}
LOGITS_DTYPE = {"f64": f64, "bf16": bf16, "bf16_cpu": bf16, "bf16_k2": bf16, "fp16": f16, "fp16_k2": f16}

# ---------------------------------------------------------------------------------------------
# nanoGPT's optimizer, schedule and step
# ---------------------------------------------------------------------------------------------


def get_lr(it):
    """nanoGPT train.py's get_lr (current form): linear warm-up to learning_rate over
    warmup_iters, cosine decay to min_lr at lr_decay_iters, min_lr after."""
    o = OPT
    if it < o["warmup_iters"]:
        return o["learning_rate"] * (it + 1) / (o["warmup_iters"] + 1)
    if it > o["lr_decay_iters"]:
        return o["min_lr"]
    decay_ratio = (it - o["warmup_iters"]) / (o["lr_decay_iters"] - o["warmup_iters"])
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return o["min_lr"] + coeff * (o["learning_rate"] - o["min_lr"])


def configure_optimizers(model):
    """nanoGPT's GPT.configure_optimizers on the CPU: AdamW, weight decay on the parameters of 2
    or more dims (embeddings, linear weights; the tied weight once), none on biases and norms."""
    params = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
    decay = [p for p in params.values() if p.dim() >= 2]
    nodecay = [p for p in params.values() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": OPT["weight_decay"]}, {"params": nodecay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=OPT["learning_rate"], betas=OPT["betas"], eps=OPT["eps"], foreach=False)


def param_names(model):
    """named_parameters() order: the tied weight once, as transformer.wte.weight."""
    return [pn for pn, _ in model.named_parameters()]


def stored_names(model):
    """The state dict with the tied weight once, under the name safetensors' save_model keeps
    (the first of the tied names in sorted order: lm_head.weight)."""
    return [k for k in model.state_dict() if k != TIED_DROPPED]


TIED_KEPT, TIED_DROPPED = "lm_head.weight", "transformer.wte.weight"


def to_stored(name):
    return TIED_KEPT if name == TIED_DROPPED else name


def build(cfg):
    return GPT(GPTConfig(block_size=cfg["block_size"], vocab_size=cfg["vocab_size"], n_layer=cfg["n_layer"],
                         n_head=cfg["n_head"], n_embd=cfg["n_embd"], gelu=cfg.get("gelu", "tanh")))


def make_init(tag, cfg):
    torch.manual_seed(seed_of(f"tandem-gpt-init-{tag}"))
    model = build(cfg)
    return {k: v.detach().clone() for k, v in model.state_dict().items() if k != TIED_DROPPED}


def load_init(model, init):
    sd = dict(init)
    sd[TIED_DROPPED] = sd[TIED_KEPT]
    model.load_state_dict(sd, strict=True)
    assert model.transformer.wte.weight is model.lm_head.weight


def train(cfg, init, x, y, run):
    """One run: returns dict(loss, grad_norm, scale (steps,), logits0, grad0 {name}, final {name})."""
    dtype, ops, autocast, scaler = RUNS[run]
    wide = isinstance(ops, Emu) and ops.wide
    model = build(cfg)
    load_init(model, init)
    model.to(dtype)
    assert model.transformer.wte.weight is model.lm_head.weight
    model.train()
    opt = configure_optimizers(model)
    params = list(model.parameters())
    names = param_names(model)
    r32 = lambda t: t.float().to(dtype)  # noqa: E731   (wide runs: round an f64 tensor to f32)
    n, B = x.shape[0], cfg["batch"]
    scale, tracker = FP16_SCALE, 0
    out = dict(loss=[], grad_norm=[], scale=[], grad0={})
    for it in range(cfg["steps"]):
        lr = get_lr(it)
        for g in opt.param_groups:
            g["lr"] = lr
        rows = torch.arange(it * B, (it + 1) * B) % n
        with torch.autocast("cpu", dtype=bf16, enabled=autocast is not None):
            logits, loss = model(x[rows], y[rows], ops)
        assert loss.dtype == dtype, (run, loss.dtype)
        if it == 0:
            want = LOGITS_DTYPE.get(run, f32)
            lg = logits.detach().to(want)
            assert torch.equal(lg.to(logits.dtype), logits.detach()) or run in ("ref_f32", "ref_tf32"), run
            out["logits0"] = lg
        out["scale"].append(scale if scaler else 1.0)
        (loss * scale if scaler else loss).backward()
        found_inf = False
        if scaler:                             # GradScaler.unscale_: x 2^-16, exact
            for p in params:
                p.grad.mul_(1.0 / scale)
            found_inf = not all(torch.isfinite(p.grad).all() for p in params)
        if wide:
            for p in params:
                p.grad = r32(p.grad)
        if it == 0:
            out["grad0"] = {to_stored(nm): p.grad.detach().clone() for nm, p in zip(names, params)}
        gn = torch.nn.utils.clip_grad_norm_(params, OPT["grad_clip"])
        if wide:
            gn = r32(gn)
            for p in params:
                p.grad = r32(p.grad)
        if not found_inf:
            opt.step()
            tracker += 1
            if scaler and tracker == FP16_GROWTH_INTERVAL:
                scale, tracker = scale * 2.0, 0
        else:
            scale, tracker = scale * 0.5, 0
        if wide:
            with torch.no_grad():
                for p in params:
                    p.copy_(r32(p))
                    st = opt.state[p]
                    for key in ("exp_avg", "exp_avg_sq"):
                        if key in st:
                            st[key].copy_(r32(st[key]))
        opt.zero_grad(set_to_none=True)
        out["loss"].append(loss.detach().clone())
        out["grad_norm"].append(gn.detach().clone().to(dtype))
    out["loss"] = torch.stack(out["loss"])
    out["grad_norm"] = torch.stack(out["grad_norm"])
    out["scale"] = torch.tensor(out["scale"], dtype=torch.float32)
    sd = model.state_dict()
    out["final"] = {k: sd[k].detach().clone() for k in stored_names(model)}
    if wide:        # the ref_* runs stand for an f32 implementation
        for key in ("loss", "grad_norm"):
            out[key] = out[key].float()
        out["grad0"] = {k: v.float() for k, v in out["grad0"].items()}
        out["final"] = {k: v.float() for k, v in out["final"].items()}
    return out


# ---------------------------------------------------------------------------------------------
# data: a seeded Markov chain over the vocabulary, cut into rows as llm.c's DataLoader does
# ---------------------------------------------------------------------------------------------


def make_tokens(tag, vocab, count):
    """`count` tokens of a first-order Markov chain: each token has 4 successors drawn with
    probabilities 0.55/0.25/0.15/0.05 (learnable: the loss falls from ln V towards ~1.2)."""
    g = torch.Generator().manual_seed(seed_of(f"tandem-gpt-data-{tag}"))
    succ = torch.stack([torch.randperm(vocab, generator=g)[:4] for _ in range(vocab)])      # (V, 4)
    pick = torch.multinomial(torch.tensor([0.55, 0.25, 0.15, 0.05]), count - 1, replacement=True, generator=g)
    toks = [int(torch.randint(vocab, (1,), generator=g))]
    for c in pick.tolist():
        toks.append(int(succ[toks[-1], c]))
    return torch.tensor(toks, dtype=torch.int64)


def rows_of(tokens, samples, T):
    """Row r: x = tokens[r T : r T + T], y = tokens[r T + 1 : r T + T + 1] (llm.c's batches of B
    rows are B consecutive rows: the .bin file and the x/y rows train identically)."""
    assert tokens.numel() == samples * T + 1
    x = torch.stack([tokens[r * T:r * T + T] for r in range(samples)])
    y = torch.stack([tokens[r * T + 1:r * T + T + 1] for r in range(samples)])
    return x, y


def with_ignored(tag, y, batch):
    """~1/6 of the targets set to IGNORE_INDEX, and all of row 5; every batch keeps some."""
    g = torch.Generator().manual_seed(seed_of(f"tandem-gpt-ignore-{tag}"))
    y = y.clone()
    y[torch.rand(y.shape, generator=g) < 1 / 6] = IGNORE_INDEX
    y[5] = IGNORE_INDEX
    for b in range(0, y.shape[0], batch):
        assert (y[b:b + batch] != IGNORE_INDEX).any()
    return y


def llmc_bin(tokens, magic=20240520, version=1, count=None):
    """llm.c's dev/data/data_common.py write_datafile (gpt-2): 256 int32 header (magic, version,
    token count, zeros), then the tokens as uint16."""
    header = np.zeros(256, dtype="<i4")
    header[0], header[1] = magic, version
    header[2] = tokens.numel() if count is None else count
    t = tokens.numpy()
    assert t.min() >= 0 and t.max() < 2 ** 16
    return header.tobytes() + t.astype("<u2").tobytes()


def read_llmc_bin(raw):
    header = np.frombuffer(raw, dtype="<i4", count=256)
    assert header[0] == 20240520 and header[1] == 1, header[:3]
    n = int(header[2])
    assert len(raw) == 1024 + 2 * n
    return torch.from_numpy(np.frombuffer(raw, dtype="<u2", offset=1024).astype(np.int64))


# ---------------------------------------------------------------------------------------------
# the bound rule (mirrors what harness/check/check_train.c implements for tandem-gpt/1; README)
# ---------------------------------------------------------------------------------------------


def ill_slices(cfg):
    """(name, start, stop) flat ranges whose value is set by rounding noise under AdamW: the key
    third of each c_attn.bias. q.(k_j + b_k) = q.k_j + q.b_k adds the same number to every score
    of a row, which softmax cancels, so b_k's gradient is exactly zero; its f32 gradient is noise
    that Adam normalises into steps of up to ~lr, while the f64 run stays at ~0."""
    D = cfg["n_embd"]
    return [(f"transformer.h.{i}.attn.c_attn.bias", D, 2 * D) for i in range(cfg["n_layer"])]


def ill_tol(cfg):
    """The absolute tolerance of the ill-conditioned ranges: ILL_STEP lr per step, summed."""
    return ILL_STEP * sum(get_lr(it) for it in range(cfg["steps"]))


def _dev(a, b, keep=None):
    """max |a - b| and max |b| (over the kept flat elements), in f64."""
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    if keep is not None:
        a, b = a[keep], b[keep]
    return (a - b).abs().max().item(), b.abs().max().item()


def rel(a, b, keep=None):
    d, s = _dev(a, b, keep)
    return d / s if s > 0 else d


def judge(g, cand, mode, cfg):
    """Applies the rule to `cand` (dict with loss, grad_norm, lr, logits0, grad0.<n>, <n>: what a
    tandem dump holds) against the golden tensors `g`; returns {check: ratio to its tolerance},
    all <= 1 to pass."""
    refs, u = RULES[mode]
    N = cfg["steps"]
    r = {}
    for what in ("loss", "grad_norm"):         # per step, as the trajectory rule
        ex = g[f"{what}.f64"].double()
        dp = max((g[f"{what}.{R}"].double() - ex).abs().max().item() for R in refs)
        tol = 4 * dp + N * u * ex.abs().max().item()
        r[what] = (cand[what].double() - ex).abs().max().item() / tol
    lr = g["lr"].double()
    r["lr"] = ((cand["lr"].double() - lr).abs() / lr).max().item() / 1e-6
    slack = {"logits0": 1, "grad0": 1, "final": N}

    def tensor(key_c, key_g, slack_n, keep=None):
        ex = g[f"{key_g[0]}.f64{key_g[1]}"]
        dp = max(rel(g[f"{key_g[0]}.{R}{key_g[1]}"], ex, keep) for R in refs)
        return rel(cand[key_c], ex, keep) / (4 * dp + slack_n * u)

    r["logits0"] = tensor("logits0", ("logits0", ""), slack["logits0"])
    ill = {}
    for name, a, b in ill_slices(cfg):
        ill[name] = (a, b)
    for k in (k[len("init."):] for k in g if k.startswith("init.")):
        r[f"grad0.{k}"] = tensor(f"grad0.{k}", ("grad0", f".{k}"), slack["grad0"])
        keep = None
        if k in ill:
            a, b = ill[k]
            keep = torch.ones(g[f"init.{k}"].numel(), dtype=torch.bool)
            keep[a:b] = False
            d = (cand[k].double().reshape(-1)[a:b] - g[f"final.f64.{k}"].double().reshape(-1)[a:b]).abs().max().item()
            r[f"ill.{k}"] = d / ill_tol(cfg)
        r[f"final.{k}"] = tensor(k, ("final", f".{k}"), slack["final"], keep)
    return r


def as_dump(res, lr):
    d = {"loss": res["loss"], "grad_norm": res["grad_norm"], "lr": lr, "logits0": res["logits0"]}
    d.update({f"grad0.{k}": v for k, v in res["grad0"].items()})
    d.update(res["final"])
    return d


# ---------------------------------------------------------------------------------------------
# self-checks
# ---------------------------------------------------------------------------------------------

NANOGPT_NAMES_L1 = [
    "transformer.wte.weight", "transformer.wpe.weight",
    "transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias",
    "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias",
    "transformer.h.0.attn.c_proj.weight", "transformer.h.0.attn.c_proj.bias",
    "transformer.h.0.ln_2.weight", "transformer.h.0.ln_2.bias",
    "transformer.h.0.mlp.c_fc.weight", "transformer.h.0.mlp.c_fc.bias",
    "transformer.h.0.mlp.c_proj.weight", "transformer.h.0.mlp.c_proj.bias",
    "transformer.ln_f.weight", "transformer.ln_f.bias", "lm_head.weight",
]


def self_checks():
    torch.manual_seed(0)
    m = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=8, block_size=4, vocab_size=11))
    sd = m.state_dict()
    assert list(sd) == NANOGPT_NAMES_L1, list(sd)
    assert sd["lm_head.weight"].data_ptr() == sd["transformer.wte.weight"].data_ptr()
    assert sd["transformer.h.0.attn.c_attn.weight"].shape == (24, 8)          # (out, in)
    assert sd["transformer.h.0.mlp.c_proj.weight"].shape == (8, 32)
    assert param_names(m) == NANOGPT_NAMES_L1[:-1]                            # tied once
    assert stored_names(m) == NANOGPT_NAMES_L1[1:]
    assert sorted([TIED_KEPT, TIED_DROPPED])[0] == TIED_KEPT                  # save_model's choice
    # GPT-2 init: c_proj std 0.02/sqrt(2L), others 0.02, biases 0, LayerNorm 1/0
    torch.manual_seed(1)
    big = GPT(GPTConfig(n_layer=2, n_head=4, n_embd=64, block_size=64, vocab_size=512))
    stds = {k: v.std().item() for k, v in big.state_dict().items() if v.dim() == 2}
    for k, s in stds.items():
        want = 0.02 / math.sqrt(4) if k.endswith("c_proj.weight") else 0.02
        assert abs(s / want - 1) < 0.05, (k, s)
    assert all(v.eq(0).all() for k, v in big.state_dict().items() if k.endswith(".bias"))
    # the written-out attention is causal multi-head attention: against a per-head loop in f64
    m = m.double()
    idx = torch.randint(11, (2, 4))
    logits, _ = m(idx)
    a = m.transformer.h[0].attn
    x = m.transformer.wte.weight[idx] + m.transformer.wpe.weight[:4]
    h = F.layer_norm(x, (8,), m.transformer.h[0].ln_1.weight, m.transformer.h[0].ln_1.bias)
    qkv = h @ a.c_attn.weight.t() + a.c_attn.bias
    ys = []
    for hd in range(2):
        q, k, v = (qkv[..., j * 8 + hd * 4: j * 8 + hd * 4 + 4] for j in range(3))
        att = torch.zeros(2, 4, 4, dtype=torch.float64)
        for t in range(4):
            sc = (q[:, t:t + 1] * k[:, :t + 1]).sum(-1) / 2.0
            att[:, t, :t + 1] = torch.softmax(sc, dim=-1)
        ys.append(att @ v)
    y = torch.cat(ys, -1) @ a.c_proj.weight.t() + a.c_proj.bias
    x = x + y
    blk = m.transformer.h[0]
    hh = F.layer_norm(x, (8,), blk.ln_2.weight, blk.ln_2.bias) @ blk.mlp.c_fc.weight.t() + blk.mlp.c_fc.bias
    g = 0.5 * hh * (1 + torch.tanh(math.sqrt(2 / math.pi) * (hh + 0.044715 * hh ** 3)))
    x = x + g @ blk.mlp.c_proj.weight.t() + blk.mlp.c_proj.bias
    want = F.layer_norm(x, (8,), m.transformer.ln_f.weight, m.transformer.ln_f.bias) @ m.lm_head.weight.t()
    assert torch.allclose(logits, want, rtol=1e-12, atol=1e-12)
    # the emulations without rounding are the plain model (f64), and the products' backward
    tgt = torch.randint(11, (2, 4))
    tgt[0, 1] = IGNORE_INDEX
    _, l0 = m(idx, tgt)
    _, l1 = m(idx, tgt, Emu())
    assert torch.allclose(l0, l1, rtol=1e-14), (l0, l1)
    keep = tgt.view(-1) != IGNORE_INDEX
    ce = F.cross_entropy(logits.view(-1, 11)[keep], tgt.view(-1)[keep])
    assert torch.allclose(l0, ce, rtol=1e-14)
    d = dict(dtype=torch.float64, requires_grad=True)
    for k in (1, 2, 4):
        assert torch.autograd.gradcheck(lambda a, b: Product.apply(a, b, None, k),
                                        (torch.randn(2, 3, 4, 5, **d), torch.randn(2, 3, 5, 2, **d)))
        assert torch.autograd.gradcheck(lambda y, b: AddBias.apply(y, b, k),
                                        (torch.randn(7, 3, **d), torch.randn(3, **d)))
    _, l2 = m(idx, tgt, Emu(k=4))
    assert torch.allclose(l0, l2, rtol=1e-14), (l0, l2)
    # TF32 on f64 storage holding f32 values rounds as on f32
    v = torch.randn(1000).float()
    assert torch.equal(_tf32(v.double(), "rna"), round_tf32(v, "rna").double())
    # Round: value forward, gradient backward
    t = torch.tensor([1 + 2 ** -12, 1 + 2 ** -9], requires_grad=True)
    Round.apply(t, torch.float16).backward(torch.tensor([1 + 2 ** -12, 1.0]))
    assert t.grad.tolist() == [1.0, 1.0]
    assert Round.apply(torch.tensor([1 + 2 ** -8 + 2 ** -10]), bf16).item() == 1 + 2 ** -7
    # the schedule's three phases
    lrs = [get_lr(i) for i in range(16)]
    assert lrs[0] == OPT["learning_rate"] / 5 and abs(lrs[4] - OPT["learning_rate"]) < 1e-15
    assert abs(lrs[12] - OPT["min_lr"]) < 1e-15 and lrs[13] == lrs[15] == OPT["min_lr"]
    assert all(lrs[i] > lrs[i + 1] for i in range(4, 12))
    # llm.c's .bin round trip
    toks = torch.tensor([0, 1, 65535, 7])
    assert torch.equal(read_llmc_bin(llmc_bin(toks)), toks)


# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------


def fmt(v):
    return repr(float(v))


def build_file(tag, cfg, init, x, y):
    """The tensors, metadata and runs of one golden file."""
    runs = {run: train(cfg, init, x, y, run) for run in cfg["runs"]}
    lr = torch.tensor([get_lr(i) for i in range(cfg["steps"])], dtype=torch.float64)
    for run, res in runs.items():
        assert torch.isfinite(res["loss"]).all() and torch.isfinite(res["grad_norm"]).all(), run
        assert res["scale"].eq(FP16_SCALE if run.startswith("fp16") else 1.0).all(), (run, res["scale"])
    tensors = [(f"init.{k}", v) for k, v in init.items()]
    tensors += [("x", x), ("y", y), ("lr", lr)]
    for run in cfg["runs"]:
        res = runs[run]
        tensors += [(f"loss.{run}", res["loss"]), (f"grad_norm.{run}", res["grad_norm"])]
        if run == "fp16":
            tensors += [("scale.fp16", res["scale"])]
        tensors += [(f"logits0.{run}", res["logits0"])]
        tensors += [(f"grad0.{run}.{k}", res["grad0"][k]) for k in init]
        tensors += [(f"final.{run}.{k}", res["final"][k]) for k in init]
    j = lambda v: json.dumps(v, separators=(",", ":"))  # noqa: E731
    meta = {
        "format": FORMAT,
        "model": f"gpt:L{cfg['n_layer']}-H{cfg['n_head']}-D{cfg['n_embd']}-T{cfg['block_size']}-V{cfg['vocab_size']}",
        "n_layer": str(cfg["n_layer"]), "n_head": str(cfg["n_head"]), "n_embd": str(cfg["n_embd"]),
        "block_size": str(cfg["block_size"]), "vocab_size": str(cfg["vocab_size"]),
        "bias": "true", "dropout": "0.0", "gelu": "tanh", "ln_eps": "1e-05",
        "tied": j({TIED_DROPPED: TIED_KEPT}),
        "batch": str(cfg["batch"]), "seq_len": str(cfg["seq_len"]), "steps": str(cfg["steps"]),
        "samples": str(cfg["samples"]),
        "opt": "adamw", "lr": fmt(OPT["learning_rate"]), "min_lr": fmt(OPT["min_lr"]),
        "warmup_iters": str(OPT["warmup_iters"]), "lr_decay_iters": str(OPT["lr_decay_iters"]),
        "schedule": "nanogpt_cosine", "weight_decay": fmt(OPT["weight_decay"]), "decay": "dim>=2",
        "betas": j(list(OPT["betas"])), "eps": fmt(OPT["eps"]), "grad_clip": fmt(OPT["grad_clip"]),
        "loss": "cross_entropy", "ignore_index": str(IGNORE_INDEX),
        "fp16_init_scale": fmt(FP16_SCALE), "fp16_growth_interval": str(FP16_GROWTH_INTERVAL),
        "runs": j(list(cfg["runs"])),
        "ill_conditioned": j([f"{n}[{a}:{b}]" for n, a, b in ill_slices(cfg)]),
        "ill_conditioned_tol": fmt(ill_tol(cfg)),
        "generator": GENERATOR, "torch": torch.__version__,
        "init_seed": str(seed_of(f"tandem-gpt-init-{cfg.get('same_as', tag)}")),
        "data_seed": str(seed_of(f"tandem-gpt-data-{cfg.get('same_as', tag)}")),
    }
    return tensors, meta, runs, lr


def check_file(path, tensors, meta, cfg, init):
    check_round_trip(path, tensors, meta)
    m, got = read_safetensors(path)
    assert m["format"] == FORMAT
    N, B, T, V = cfg["steps"], cfg["batch"], cfg["seq_len"], cfg["vocab_size"]
    assert got["x"].dtype == torch.int64 and tuple(got["x"].shape) == (cfg["samples"], T)
    assert got["y"].dtype == torch.int64 and got["y"].shape == got["x"].shape
    assert got["x"].min() >= 0 and got["x"].max() < V and got["y"].max() < V
    assert (got["y"] >= 0).all() or (got["y"][got["y"] < 0] == IGNORE_INDEX).all()
    assert got["lr"].dtype == torch.float64 and got["lr"].shape == (N,)
    for run in cfg["runs"]:
        dt = torch.float64 if run == "f64" else torch.float32
        assert got[f"loss.{run}"].dtype == dt and got[f"loss.{run}"].shape == (N,)
        assert got[f"grad_norm.{run}"].dtype == dt and got[f"grad_norm.{run}"].shape == (N,)
        assert got[f"logits0.{run}"].dtype == LOGITS_DTYPE.get(run, f32)
        assert tuple(got[f"logits0.{run}"].shape) == (B, T, V)
        for k, v in init.items():
            for what in ("grad0", "final"):
                t = got[f"{what}.{run}.{k}"]
                assert t.dtype == dt and t.shape == v.shape, (what, run, k)
        assert f"init.{TIED_DROPPED}" not in got and f"grad0.{run}.{TIED_DROPPED}" not in got
    assert len(got) == len(init) + 3 + sum(3 + 2 * len(init) + (run == "fp16") for run in cfg["runs"])


def write_state_dict_forms(params, tied_path, plain_path):
    """A nanoGPT state dict (params: the tied weight once, as lm_head.weight) as safetensors,
    both forms: `tied_path` as safetensors.torch.save_model writes it (the tied tensor once,
    under the name its _remove_duplicate_names keeps, the first in sorted order: lm_head.weight,
    and the metadata {"transformer.wte.weight": "lm_head.weight"}), `plain_path` with both names
    (two copies of one tensor: state_dict() cloned, as save_file refuses shared tensors; the
    metadata {"format": "pt"} of a converted checkpoint). Tensors in name order, as safetensors
    writes them. Either path may be None."""
    sd = dict(params)
    sd[TIED_DROPPED] = sd[TIED_KEPT]
    forms = ((tied_path, sorted((k, v) for k, v in sd.items() if k != TIED_DROPPED), {TIED_DROPPED: TIED_KEPT}),
             (plain_path, sorted((k, v.clone()) for k, v in sd.items()), {"format": "pt"}))
    for path, tensors, meta in forms:
        if path:
            write_safetensors(path, tensors, meta)
            check_round_trip(path, tensors, meta)


def write_token_files(out, tokens, x, y, vocab):
    """llm.c .bin of the main file's tokens (its B-row batches are x/y's rows), the x/y
    safetensors, and malformed .bin files for the loader's error tests."""
    good = llmc_bin(tokens)
    files = {
        "tokens.bin": good,
        "tokens-bad-magic.bin": llmc_bin(tokens, magic=20240521),
        "tokens-bad-version.bin": llmc_bin(tokens, version=2),
        "tokens-truncated.bin": good[:len(good) - 2 * 25],          # header says 25 more tokens
        "tokens-short-header.bin": good[:512],
        "tokens-out-of-vocab.bin": llmc_bin(torch.cat([tokens[:100], torch.tensor([vocab]), tokens[101:]])),
    }
    for name, raw in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(raw)
    assert torch.equal(read_llmc_bin(files["tokens.bin"]), tokens)
    path = os.path.join(out, "tokens.safetensors")
    meta = {"format": "tandem-tokens/1", "vocab_size": str(vocab), "generator": GENERATOR}
    write_safetensors(path, [("x", x), ("y", y)], meta)
    check_round_trip(path, [("x", x), ("y", y)], meta)
    return list(files) + ["tokens.safetensors"]


def summary(tag, cfg, runs, lr):
    """Rows for the README: each run's deviation from the f64 run."""
    base = runs["f64"]
    ill = {n: (a, b) for n, a, b in ill_slices(cfg)}
    keep = {}
    for n, (a, b) in ill.items():
        keep[n] = torch.ones(base["final"][n].numel(), dtype=torch.bool)
        keep[n][a:b] = False
    short = lambda k: k.replace("transformer.", "")  # noqa: E731
    lines = []
    for run in cfg["runs"]:
        if run == "f64":
            continue
        res = runs[run]
        dl = (res["loss"].double() - base["loss"]).abs().max().item()
        dg = rel(res["grad_norm"], base["grad_norm"])
        dlog = rel(res["logits0"], base["logits0"])
        g0 = {k: rel(res["grad0"][k], base["grad0"][k]) for k in base["grad0"]}
        fin = {k: rel(res["final"][k], base["final"][k], keep.get(k)) for k in base["final"]}
        dill = max((res["final"][n].double().reshape(-1)[a:b] - base["final"][n].reshape(-1)[a:b]).abs().max().item()
                   for n, (a, b) in ill.items())
        wg, wf = max(g0, key=g0.get), max(fin, key=fin.get)
        lines.append(f"| {tag} | {run} | {dl:.2e} | {dg:.2e} | {dlog:.2e} | {g0[wg]:.2e} ({short(wg)}) "
                     f"| {fin[wf]:.2e} ({short(wf)}) | {dill:.2e} |")
    return lines


class _ScaleByWidth(Ops):
    def scale(self, s, c):                 # 1/sqrt(n_embd) instead of 1/sqrt(head size)
        return s * (c / math.sqrt(s.shape[1]))


def mutant_checks(g, cfg, init, x, y):
    """Bugs the rule must catch, each trained in f32 and judged by the f32 rule: {name: worst
    ratio to its tolerance, the check}."""
    mod = sys.modules[__name__]
    o = OPT

    def old_lr(it):                        # nanoGPT's earlier warm-up, lr * it / warmup_iters
        return o["learning_rate"] * it / o["warmup_iters"] if it < o["warmup_iters"] else get_lr0(it)

    def decay_all(model):                  # weight decay on biases and norms too
        return torch.optim.AdamW(model.parameters(), lr=o["learning_rate"], betas=o["betas"], eps=o["eps"],
                                 weight_decay=o["weight_decay"], foreach=False)

    get_lr0, conf0 = get_lr, configure_optimizers
    mutants = {"gelu_erf": ({**cfg, "gelu": "none"}, {}, None),
               "decay_all": (cfg, {"configure_optimizers": decay_all}, None),
               "old_warmup": (cfg, {"get_lr": old_lr}, None), "no_clip": (cfg, {}, math.inf),
               "scale_by_width": (cfg, {}, None)}
    RUNS["scale_by_width"] = (f32, _ScaleByWidth(), None, False)
    out = {}
    for name, (c, patch, clip) in mutants.items():
        for k, v in patch.items():
            setattr(mod, k, v)
        clip0 = o["grad_clip"]
        if clip is not None:
            o["grad_clip"] = clip
        try:
            res = train(c, init, x, y, name if name in RUNS else "f32")
            lr = torch.tensor([mod.get_lr(i) for i in range(cfg["steps"])], dtype=torch.float64)
        finally:
            mod.get_lr, mod.configure_optimizers, o["grad_clip"] = get_lr0, conf0, clip0
        r = judge(g, as_dump(res, lr), "f32", cfg)
        worst = max(r, key=r.get)
        out[name] = (r[worst], worst)
    del RUNS["scale_by_width"]
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(here, "gpt"), help="output directory")
    ap.add_argument("--no-validate", action="store_true", help="skip the ref_* runs (faster)")
    args = ap.parse_args()
    t0 = time.time()
    torch.set_num_threads(1)              # fixed reduction order: identical bytes on every run
    torch.use_deterministic_algorithms(True)
    self_checks()

    os.makedirs(args.out, exist_ok=True)
    for old in glob.glob(os.path.join(args.out, "*.safetensors")) + glob.glob(os.path.join(args.out, "*.bin")):
        os.remove(old)

    written, rows, checks = [], [], []
    data = {}
    for tag, cfg in CONFIGS.items():
        src = cfg.get("same_as", tag)
        init = make_init(src, cfg)
        tokens = make_tokens(src, cfg["vocab_size"], cfg["samples"] * cfg["seq_len"] + 1)
        x, y = rows_of(tokens, cfg["samples"], cfg["seq_len"])
        if tag.endswith("-ignore"):
            y = with_ignored(tag, y, cfg["batch"])
        data[tag] = (init, tokens, x, y)
        tensors, meta, runs, lr = build_file(tag, cfg, init, x, y)
        path = os.path.join(args.out, f"{tag}.safetensors")
        write_safetensors(path, tensors, meta)
        check_file(path, tensors, meta, cfg, init)
        written.append(f"{tag}.safetensors")
        rows += summary(tag, cfg, runs, lr)
        if not args.no_validate and tag == MAIN:
            g = dict(tensors)
            for run, mode in VALIDATION.items():
                res = train(cfg, init, x, y, run)
                r = judge(g, as_dump(res, lr), mode, cfg)
                worst = max(r, key=r.get)
                checks.append(f"| {run} | {mode} | {r['loss']:.2f} | {r['grad_norm']:.2f} | {r['logits0']:.2f} "
                              f"| {max(v for k, v in r.items() if k.startswith('grad0.')):.2f} "
                              f"| {max(v for k, v in r.items() if k.startswith('final.')):.2f} "
                              f"| {max([v for k, v in r.items() if k.startswith('ill.')] or [0]):.2f} "
                              f"| {worst} |")
            mutants = mutant_checks(g, cfg, init, x, y)
            for mode, (refs, _) in RULES.items():          # each stored run against its own rule
                for R in refs:
                    r = judge(g, as_dump(runs[R], lr), mode, cfg)
                    assert max(r.values()) <= 1, (R, max(r, key=r.get))

    init, tokens, x, y = data[MAIN]
    write_state_dict_forms(init, os.path.join(args.out, "nanogpt-init-tied.safetensors"),
                           os.path.join(args.out, "nanogpt-init-plain.safetensors"))
    written += ["nanogpt-init-tied.safetensors", "nanogpt-init-plain.safetensors"]
    written += write_token_files(args.out, tokens, x, y, CONFIGS[MAIN]["vocab_size"])

    manifest = []
    for name in sorted(written):
        with open(os.path.join(args.out, name), "rb") as f:
            raw = f.read()
        manifest.append(f"{name} {len(raw)} {hashlib.sha256(raw).hexdigest()}")
    with open(os.path.join(args.out, "MANIFEST.txt"), "w") as f:
        f.write("# file bytes sha256 (suites/golden/gen_gpt.py; suites/golden/README.md)\n")
        f.write("\n".join(manifest) + "\n")

    print("| file | run | max abs dloss | rel dgrad_norm | rel dlogits0 | max rel dgrad0 (worst) "
          "| max rel dfinal, ill slices left out (worst) | max abs dfinal in the ill slices |")
    print("|---|---|---:|---:|---:|---|---|---:|")
    print("\n".join(rows))
    if checks:
        print("\n| run | rule | loss | grad_norm | logits0 | grad0 | final | ill | worst |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---|")
        print("\n".join(checks))
    if checks:
        print("\nbugs the f32 rule catches (worst ratio to its tolerance):")
        for name, (ratio, worst) in mutants.items():
            print(f"  {name}: {ratio:.3g} ({worst})")
            assert ratio > 1, name
    total = sum(int(m.split()[1]) for m in manifest)
    print(f"\n{len(manifest)} files, {total} bytes ({total / 2 ** 20:.3f} MiB), {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
