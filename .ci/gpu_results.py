"""gpu_results.py — reading recorded `bench run` results directories (docs/RESULTS_FORMAT.md) for
the GPU session's scripts: which GPU a run was on, the earlier run of the same GPU model to compare
with, tandem's rows beside the PyTorch peer's (`peer-torch/`), and each row's fraction of the GPU's
physical limit (HBM bandwidth, the PCIe link per direction, the dense Tensor Core peak) from
suites/check/expectations.json. Used by .ci/gpu-summary.py (`perf`'s summary.json) and
.ci/results-table.py (results/README.md's table). Standard library only: it runs with the GPU
machine's python3."""
import csv
import glob
import json
import os
import re
import statistics

# a rate (GB/s, samples/s, GFLOP/s) is better higher; `time` lower; anything else is a quantity
RATE = re.compile(r"/s$")


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_context(d):
    """context.json of a tandem `bench run` on a real GPU, else None (a check directory, the peer's
    own directory, an emulated or CPU run, or none at all)."""
    c = load_json(os.path.join(d, "context.json"))
    if not isinstance(c, dict) or c.get("format") != "tandem-results/1":
        return None
    if (c.get("tandem") or {}).get("version") == "peer" or c.get("emulated"):
        return None
    cmd = c.get("command") or []
    if len(cmd) < 2 or cmd[1] != "run" or not str(c.get("device", "")).startswith("cuda"):
        return None
    return c


def gpu_of(c):
    """The GPU a run's context names (its device's entry in env.gpus), or {}."""
    dev = str(c.get("device", ""))
    gpus = (c.get("env") or {}).get("gpus") or []
    for g in gpus:
        if isinstance(g, dict) and g.get("device") == dev:
            return g
    return gpus[0] if gpus and isinstance(gpus[0], dict) else {}


def gpu_name(d):
    c = run_context(d)
    return gpu_of(c).get("name") if c else None


def runs(root):
    """[(dir, context)] of the bench runs on a real GPU under root, oldest first."""
    out = []
    for d in sorted(glob.glob(os.path.join(root, "*"))):
        c = run_context(d) if os.path.isdir(d) else None
        if c:
            out.append((d, c))
    out.sort(key=lambda x: (x[1].get("started") or "", x[0]))
    return out


def baseline(root, name, exclude=None):
    """The newest run under root on a GPU of this name (not exclude), or None."""
    ex = os.path.realpath(exclude) if exclude else None
    found = [d for d, c in runs(root) if gpu_of(c).get("name") == name and os.path.realpath(d) != ex]
    return found[-1] if found else None


def read_rows(d):
    """{(suite, benchmark, param): {metric: (median, unit)}} from d/<suite>.csv, and the suites."""
    rows, suites = {}, set()
    for path in sorted(glob.glob(os.path.join(d, "*.csv"))):
        if path.endswith(".samples.csv"):
            continue
        try:
            with open(path, newline="") as f:
                for r in csv.DictReader(f):
                    try:
                        v = float(r["median"])
                    except (KeyError, TypeError, ValueError):
                        continue
                    key = (r["suite"], r["benchmark"], r["param"])
                    rows.setdefault(key, {})[r["metric"]] = (v, r.get("unit", ""))
                    suites.add(r["suite"])
        except OSError:
            pass
    return rows, suites


def main_metric(t, p):
    """The metric a row is compared by: the first rate both sides have, else time, else None."""
    for m in t:
        if RATE.search(m) and m in p:
            return m
    return "time" if "time" in t and "time" in p else None


def pair(tandem_rows, peer_rows):
    """Rows both sides have: [{suite, benchmark, param, metric, unit, tandem, torch,
    tandem_per_torch}], tandem_per_torch being tandem's throughput over PyTorch's (a rate's ratio,
    a time's inverse ratio): above 1, tandem is faster."""
    out = []
    for key in sorted(set(tandem_rows) & set(peer_rows)):
        t, p = tandem_rows[key], peer_rows[key]
        m = main_metric(t, p)
        if m is None:
            continue
        tv, pv = t[m][0], p[m][0]
        if m == "time":
            r = pv / tv if tv > 0 else None
        else:
            r = tv / pv if pv > 0 else None
        out.append({"suite": key[0], "benchmark": key[1], "param": key[2], "metric": m,
                    "unit": t[m][1], "tandem": tv, "torch": pv,
                    "tandem_per_torch": round(r, 4) if r is not None else None})
    return out


def per_suite(pairs):
    """{suite: {rows, median, best: {row, ratio}, worst: {row, ratio}}} of tandem_per_torch."""
    out = {}
    for s in sorted({p["suite"] for p in pairs}):
        rs = [p for p in pairs if p["suite"] == s and p["tandem_per_torch"] is not None]
        if not rs:
            continue
        best = max(rs, key=lambda p: p["tandem_per_torch"])
        worst = min(rs, key=lambda p: p["tandem_per_torch"])
        out[s] = {"rows": len(rs), "median": round(statistics.median(p["tandem_per_torch"] for p in rs), 4),
                  "best": {"row": row_name(best), "ratio": best["tandem_per_torch"]},
                  "worst": {"row": row_name(worst), "ratio": worst["tandem_per_torch"]}}
    return out


def row_name(p):
    return f"{p['benchmark']}/{p['param']}" if p["param"] else p["benchmark"]


# ---- the physical limits ----------------------------------------------------------------------

def load_models(source_root):
    e = load_json(os.path.join(source_root, "suites", "check", "expectations.json")) or {}
    return e.get("models") or []


def model_of(models, name):
    """The expectations' model for a CUDA device name (without 'NVIDIA ', case-insensitive)."""
    n = re.sub(r"^NVIDIA ", "", name or "").lower()
    for m in models:
        if any(n == str(x).lower() for x in m.get("names", [])):
            return m
    return None


def pcie_gbps(gen, width):
    """One direction of a PCIe link in GB/s (as check_pcie_gbps in harness/check/check_expect.c)."""
    gts = [2.5, 5, 8, 16, 32, 64]
    enc = [0.8, 0.8, 128 / 130, 128 / 130, 128 / 130, 242 / 256]
    try:
        g, w = int(gen), int(width)
    except (TypeError, ValueError):
        return None
    if not (1 <= g <= 6 and 1 <= w <= 32):
        return None
    return gts[g - 1] * enc[g - 1] / 8 * w


PREC = {"tf32": "tf32", "fp16": "f16", "f16": "f16", "bf16": "bf16", "f64": "f64"}


def limits(model, gpu):
    """{'HBM': GB/s, 'PCIe': GB/s per direction, 'dense <prec>': GFLOP/s} for a model and the
    run's own PCIe link when it names one."""
    out = {}
    if not model:
        return out
    out["HBM"] = model.get("hbm_GBps")
    out["PCIe"] = (pcie_gbps(gpu.get("pcie_gen_max"), gpu.get("pcie_width_max"))
                   or pcie_gbps(model.get("pcie_gen"), model.get("pcie_width")))
    for p, v in (model.get("tflops") or {}).items():
        out["dense " + p] = v * 1000.0
    return {k: v for k, v in out.items() if v}


def limit_of(suite, benchmark, param, rows, lim):
    """(limit name, limit, value) for a row whose figure a physical limit bounds, else None.
    Copies (transfer), from the size in their param and their time, whatever their GB/s counts:
    a device copy's DRAM traffic, read + write (2 x size / time), against HBM; a host<->device
    copy (size / time) against one direction of PCIe, a bidirectional one (2 x size / time)
    against both. The reductions' GB/s (bytes/s before issue 32) against HBM; GFLOP/s of a
    named precision against its dense peak (f32 without tensor cores has none in the
    expectations)."""
    if suite == "transfer":
        try:
            size = float(param.split(":", 1)[1]) if param.startswith("bytes:") else None
        except ValueError:
            size = None
        t = rows.get("time", (None,))[0]
        if not size or not t or t <= 0:
            return None
        gbps = size / t   # bytes per ns = GB/s
        if benchmark.startswith("d2d"):
            return ("HBM", lim["HBM"], 2 * gbps) if lim.get("HBM") else None
        if lim.get("PCIe"):
            return (("PCIe", 2 * lim["PCIe"], 2 * gbps) if benchmark.startswith("bidir")
                    else ("PCIe", lim["PCIe"], gbps))
        return None
    if suite == "reductions" and lim.get("HBM"):   # GB/s (bytes/s in runs before issue 32)
        if "GB/s" in rows:
            return ("HBM", lim["HBM"], rows["GB/s"][0])
        if "bytes/s" in rows:
            return ("HBM", lim["HBM"], rows["bytes/s"][0] / 1e9)
    if "GFLOP/s" in rows:
        for tok in reversed(benchmark.split("_")):
            if tok in PREC and lim.get("dense " + PREC[tok]):
                return ("dense " + PREC[tok], lim["dense " + PREC[tok]], rows["GFLOP/s"][0])
    return None


def best_fractions(suite_rows, lim):
    """{limit name: (fraction, row)} the best fraction of each limit over a suite's rows."""
    out = {}
    for (suite, bm, param), rows in suite_rows.items():
        x = limit_of(suite, bm, param, rows, lim)
        if not x:
            continue
        name, limit, value = x
        f = value / limit
        if name not in out or f > out[name][0]:
            out[name] = (f, f"{bm}/{param}" if param else bm)
    return out
