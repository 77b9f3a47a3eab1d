#!/usr/bin/env python3
"""results-table.py — results/README.md's table of the recorded GPU figures, from the recorded
results alone: per GPU model (context.json's GPU name) and suite, tandem / PyTorch on the same GPU
(tandem's throughput over PyTorch's per row: above 1 tandem is faster; its median, best and worst
row) and the best fraction of the GPU's physical limit a row reaches (HBM bandwidth, one direction
of the PCIe link, the dense Tensor Core peak per precision: suites/check/expectations.json), for
tandem and for PyTorch; then the PyTorch anchor's own figures (torch_gpu_anchor.json) against the
same limits; and which suites have no figure yet on that GPU.

A suite's tandem rows come from the newest run that has them, preferring the run that holds the
PyTorch rows, then one of the same commit (the peer ran in a separate call of the first session).

usage: results-table.py [--results DIR] [--write FILE | --check FILE]
  prints the Markdown; --write replaces what lies between FILE's markers
  (<!-- results-table:begin --> and <!-- results-table:end -->); --check exits 1 when FILE's
  block differs from what the results give (test ci.results_table). Standard library only."""
import argparse
import glob
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_results as gr  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- results-table:begin -->", "<!-- results-table:end -->"


def suites_known():
    return sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "docs", "suites", "*.md"))
                  if not p.endswith("README.md"))


def fmt(x, nd=2):
    return "-" if x is None else f"{x:.{nd}f}"


def fractions_cell(t, p):
    names = sorted(set(t) | set(p))
    if not names:
        return "no row a limit bounds"
    return "; ".join(f"{n}: {fmt(t[n][0]) if n in t else '-'} / {fmt(p[n][0]) if n in p else '-'}"
                     for n in names)


def commit_of(c):
    return (c.get("tandem") or {}).get("commit")


def gpu_section(name, rs, models):
    """The Markdown for one GPU model: rs = [(dir, context)] of its runs, oldest first."""
    model = gr.model_of(models, name)
    gpu = gr.gpu_of(rs[-1][1])
    lim = gr.limits(model, gpu)
    head = f"### {name}"
    if model:
        dense = "/".join(f"{model['tflops'][k]:g}" for k in ("tf32", "f16", "bf16") if k in model["tflops"])
        head += (f" (`{model['model']}`: HBM {lim.get('HBM', 0):g} GB/s, PCIe {fmt(lim.get('PCIe'), 1)} GB/s per "
                 f"direction, dense TF32/FP16/BF16 {dense} TFLOP/s)")
    lines = [head, "",
             "| suite | tandem's rows | PyTorch's rows | rows on both sides | tandem / PyTorch: median "
             "| best row | worst row | best fraction of the limit, tandem / PyTorch |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    data = {d: gr.read_rows(d) for d, _ in rs}
    peer = {d: gr.read_rows(os.path.join(d, "peer-torch")) for d, _ in rs}
    ctx = dict(rs)
    missing = []
    for s in suites_known():
        pdirs = [d for d, _ in rs if s in peer[d][1]]
        tdirs = [d for d, _ in rs if s in data[d][1]]
        if not tdirs and not pdirs:
            missing.append(s)
            continue
        pd = pdirs[-1] if pdirs else None

        def rank(d):
            return (d == pd, pd is not None and commit_of(ctx[d]) == commit_of(ctx[pd]), d in tdirs)
        td = max(tdirs, key=lambda d: (rank(d), ctx[d].get("started") or "")) if tdirs else None
        trows = {k: v for k, v in data[td][0].items() if k[0] == s} if td else {}
        prows = {k: v for k, v in peer[pd][0].items() if k[0] == s} if pd else {}
        pairs = gr.pair(trows, prows)
        ps = gr.per_suite(pairs).get(s)
        tcell = f"`{os.path.basename(td)}` ({commit_of(ctx[td])})" if td else "none yet"
        pcell = f"`{os.path.basename(pd)}/peer-torch`" if pd else "none yet"
        frac = fractions_cell(gr.best_fractions(trows, lim), gr.best_fractions(prows, lim))
        if ps:
            lines.append(f"| {s} | {tcell} | {pcell} | {ps['rows']} | {fmt(ps['median'])} "
                         f"| `{ps['best']['row']}` {fmt(ps['best']['ratio'])} "
                         f"| `{ps['worst']['row']}` {fmt(ps['worst']['ratio'])} | {frac} |")
        else:
            lines.append(f"| {s} | {tcell} | {pcell} | 0 | - | - | - | {frac} |")
    lines.append("")
    lines.append(f"No figure on this GPU yet: {', '.join(f'`{s}`' for s in missing) or 'none'}.")
    return lines


def anchor_section(root, models):
    """PyTorch's anchor (torch_gpu_anchor.json) against the same limits, per file."""
    lines = ["| anchor file | GPU | device copy (d2d, read + write) / HBM | pinned h2d / PCIe "
             "| pinned d2h / PCIe | GEMM TF32 / FP16 / BF16 over the dense peak (largest n) |",
             "| --- | --- | --- | --- | --- | --- |"]
    n = 0
    for path in sorted(glob.glob(os.path.join(root, "*", "torch_gpu_anchor.json"))):
        a = gr.load_json(path) or {}
        name = (a.get("context") or {}).get("device")
        model = gr.model_of(models, name)
        if not model:
            continue
        lim = gr.limits(model, {})
        tr = a.get("transfers") or []

        def best(kind, direction):
            v = [t["GBps"] for t in tr if t.get("memory") == kind and t.get("direction") == direction]
            return max(v) if v else None
        d2d, h2d, d2h = best("device", "d2d"), best("pinned", "h2d"), best("pinned", "d2h")
        g = a.get("gemm") or []
        big = max((x["n"] for x in g), default=None)
        gem = {x["precision"]: x["TFLOPs"] for x in g if x.get("n") == big}
        gcell = " / ".join(fmt(gem[p] * 1000 / lim["dense " + k]) if p in gem and ("dense " + k) in lim else "-"
                           for p, k in (("tf32", "tf32"), ("fp16", "f16"), ("bf16", "bf16")))
        cell = (lambda v, k: f"{fmt(v / lim[k])} ({v:.0f} GB/s)" if v and k in lim else "-")
        lines.append(f"| `{os.path.relpath(path, root)}` | {name} | {cell(d2d, 'HBM')} | {cell(h2d, 'PCIe')} "
                     f"| {cell(d2h, 'PCIe')} | {gcell} (n = {big}) |")
        n += 1
    return lines if n else ["No anchor figures recorded."]


def table(root):
    models = gr.load_models(ROOT)
    by_gpu = {}
    for d, c in gr.runs(root):
        by_gpu.setdefault(gr.gpu_of(c).get("name") or "unknown GPU", []).append((d, c))
    out = ["_Generated by `.ci/results-table.py --write results/README.md` from the directories "
           "above; do not edit by hand._", ""]
    if not by_gpu:
        out.append("No `bench run` on a GPU recorded yet.")
    for name in sorted(by_gpu):
        out += gpu_section(name, by_gpu[name], models) + [""]
    out += ["PyTorch's anchor on the same GPUs (`suites/peers/torch_gpu_anchor.py`), against the same "
            "limits:", ""] + anchor_section(root, models)
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(ROOT, "results"))
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write")
    g.add_argument("--check")
    a = ap.parse_args()
    t = table(a.results)
    path = a.write or a.check
    if not path:
        sys.stdout.write(t)
        return 0
    with open(path) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        print(f"results-table: {path} has no {BEGIN} ... {END} block", file=sys.stderr)
        return 2
    head, rest = doc.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    if a.check:
        if old.strip("\n") != t.strip("\n"):
            print(f"results-table: {path}'s table differs from what {a.results} gives: "
                  f"run .ci/results-table.py --write {path}", file=sys.stderr)
            return 1
        print(f"results-table: {path}'s table matches {a.results}")
        return 0
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + t + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
