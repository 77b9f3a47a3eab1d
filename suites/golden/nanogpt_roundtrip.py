#!/usr/bin/python3
# nanoGPT state dicts <-> tandem, the PyTorch side (issue 23). gen_gpt.py's GPT is nanoGPT's model
# (same modules, names, init); safetensors is read and written by gen_cases.py's code, as the
# `safetensors` package is absent from Debian's Python.
#
#   save: a nanoGPT model's state dict as safetensors, in both forms: --tied as
#         safetensors.torch.save_model writes it (the tied tensor once, as lm_head.weight, with the
#         metadata {"transformer.wte.weight": "lm_head.weight"}), --plain with both names.
#     nanogpt_roundtrip.py save --from GOLDEN [--prefix init|final.f32|...] --tied A --plain B
#     nanogpt_roundtrip.py save --config L,H,D,BLOCK,V --seed S --tied A --plain B
#   load: a safetensors state dict (a tandem `bench train --dump`, or either form above) into the
#         nanoGPT model with load_state_dict(strict=True), then a forward on token rows; prints
#         `loss <f32 value>` (and the f64 forward's), exit 1 if --expect is missed.
#     nanogpt_roundtrip.py load FILE (--like GOLDEN | --config L,H,D,BLOCK,V) --data TOKENS
#                               [--rows A:B] [--seq T] [--expect LOSS --rtol R]
"""nanoGPT state dict round trip, PyTorch side (suites/golden/README.md, "Golden GPT-2")."""

import argparse
import os
import sys

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_cases import read_safetensors  # noqa: E402
from gen_gpt import (GPT, IGNORE_INDEX, TIED_DROPPED, TIED_KEPT, GPTConfig, read_llmc_bin,  # noqa: E402
                     write_state_dict_forms)

# what a tandem dump holds besides the state dict (docs/CASE_FORMAT.md, "GPT golden files")
DUMP_EXTRAS = ("loss", "grad_norm", "lr", "logits0", "scale")


def config_of(args):
    if args.like:
        m, _ = read_safetensors(args.like)
        c = [int(m[k]) for k in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size")]
        gelu = m.get("gelu", "tanh")
    else:
        c = [int(v) for v in args.config.split(",")]
        if len(c) != 5:
            raise SystemExit("--config wants L,H,D,BLOCK,V (n_layer, n_head, n_embd, block_size, vocab_size)")
        gelu = args.gelu
    return GPTConfig(n_layer=c[0], n_head=c[1], n_embd=c[2], block_size=c[3], vocab_size=c[4], gelu=gelu)


def cmd_save(args):
    if args.from_:
        args.like = args.from_
        cfg = config_of(args)
        _, g = read_safetensors(args.from_)
        pre = args.prefix + "."
        params = {k[len(pre):]: v for k, v in g.items() if k.startswith(pre)}
        if not params:
            raise SystemExit(f"{args.from_}: no tensors named {pre}*")
        model = GPT(cfg)
        load_strict(model, params)
    else:
        if not args.config:
            raise SystemExit("save needs --from GOLDEN or --config L,H,D,BLOCK,V")
        args.like = None
        torch.manual_seed(args.seed)
        model = GPT(config_of(args))                  # nanoGPT's init, drawn after manual_seed
    sd = model.state_dict()
    write_state_dict_forms({k: v for k, v in sd.items() if k != TIED_DROPPED}, args.tied, args.plain)
    for path in (args.tied, args.plain):
        if path:
            print(f"wrote {path}")


def load_strict(model, tensors):
    """model.load_state_dict(strict=True) of a file's tensors. As safetensors.torch.load_model
    does, a tied weight stored under one of its names is loaded under both; stored under both, the
    two must be equal."""
    sd = dict(tensors)
    have = [k for k in (TIED_KEPT, TIED_DROPPED) if k in sd]
    if len(have) == 1:
        sd[TIED_DROPPED if have[0] == TIED_KEPT else TIED_KEPT] = sd[have[0]]
    elif len(have) == 2 and not torch.equal(sd[TIED_KEPT], sd[TIED_DROPPED]):
        raise SystemExit(f"{TIED_KEPT} and {TIED_DROPPED} are tied in nanoGPT but differ in the file")
    dtype = sd[TIED_KEPT].dtype if TIED_KEPT in sd else torch.float32
    model.to(dtype)
    model.load_state_dict(sd, strict=True)             # raises on a missing or unexpected key
    assert model.transformer.wte.weight is model.lm_head.weight


def token_rows(args, cfg):
    if args.data.endswith(".bin"):
        with open(args.data, "rb") as f:
            toks = read_llmc_bin(f.read())
        T = args.seq or cfg.block_size
        n = (toks.numel() - 1) // T
        x = torch.stack([toks[r * T:r * T + T] for r in range(n)])
        y = torch.stack([toks[r * T + 1:r * T + T + 1] for r in range(n)])
    else:
        _, g = read_safetensors(args.data)
        x, y = g["x"].long(), g["y"].long()
    a, _, b = (args.rows or f"0:{x.shape[0]}").partition(":")
    return x[int(a):int(b)], y[int(a):int(b)]


def cmd_load(args):
    cfg = config_of(args)
    meta, tensors = read_safetensors(args.file)
    dropped = [k for k in tensors if k in DUMP_EXTRAS or k.startswith("grad0.")]
    model = GPT(cfg)
    load_strict(model, {k: v for k, v in tensors.items() if k not in dropped})
    x, y = token_rows(args, cfg)
    model.eval()
    with torch.no_grad():
        _, loss = model(x, y)
        _, loss64 = model.double()(x, y)
    n = int((y != IGNORE_INDEX).sum())
    g0 = sum(k.startswith("grad0.") for k in dropped)
    left = sorted(k for k in dropped if not k.startswith("grad0.")) + ([f"{g0} grad0.*"] if g0 else [])
    print(f"loaded {args.file} with load_state_dict(strict=True): {len(tensors) - len(dropped)} tensors"
          + (f" (left out, not the state dict: {', '.join(left)})" if left else ""))
    print(f"loss {loss.item()!r} (f64 forward {loss64.item()!r}) over {x.shape[0]} rows, {n} targets")
    if args.expect is not None and not abs(loss.item() - args.expect) <= args.rtol * abs(args.expect):
        print(f"FAIL: expected {args.expect!r} within relative {args.rtol}")
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save", help="write a nanoGPT state dict in both safetensors forms")
    s.add_argument("--from", dest="from_", help="a tandem-gpt/1 golden file: its config and weights")
    s.add_argument("--prefix", default="init", help="which weights of --from (init, final.f32, ...)")
    s.add_argument("--config", help="L,H,D,BLOCK,V for a fresh nanoGPT init (with --seed)")
    s.add_argument("--seed", type=int, default=1337)
    s.add_argument("--gelu", default="tanh", choices=("tanh", "none"))
    s.add_argument("--tied", help="output: the tied weight once (save_model's form)")
    s.add_argument("--plain", help="output: both names")
    s.set_defaults(func=cmd_save)
    lo = sub.add_parser("load", help="load a safetensors state dict strictly and print a loss")
    lo.add_argument("file")
    lo.add_argument("--like", help="a tandem-gpt/1 golden file whose config to use")
    lo.add_argument("--config", help="L,H,D,BLOCK,V")
    lo.add_argument("--gelu", default="tanh", choices=("tanh", "none"))
    lo.add_argument("--data", required=True, help="safetensors with x, y (N, T) or an llm.c .bin")
    lo.add_argument("--rows", help="A:B, the rows of x/y (default all)")
    lo.add_argument("--seq", type=int, help="T for a .bin (default block_size)")
    lo.add_argument("--expect", type=float, help="the loss another implementation computed")
    lo.add_argument("--rtol", type=float, default=1e-5)
    lo.set_defaults(func=cmd_load)
    args = ap.parse_args()
    if args.cmd == "load" and not (args.like or args.config):
        ap.error("load needs --like GOLDEN or --config L,H,D,BLOCK,V")
    torch.set_num_threads(1)
    sys.exit(args.func(args) or 0)


if __name__ == "__main__":
    main()
