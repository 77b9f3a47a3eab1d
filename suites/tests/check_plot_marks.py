#!/usr/bin/env python3
"""check_plot_marks.py — issue 36 item 4: `bench check`'s plots show each GPU's figure against its
model's datasheet value and the WARN/FAIL thresholds, and the sustained/pulsed series mark their
phases.

usage: check_plot_marks.py BENCH EXPECTATIONS FIGURES WORK PLOTS

FIGURES is a recorded level-4 node (suites/tests/check/level4-pulsed-brake.json: 2 x A100 SXM4
80GB, with the sustained and pulsed loads' series). It is judged (`bench check --from-figures
--json`) and written as `bench check --out` writes its results directory (status.json's "check",
check.csv, sustained.csv, pulsed.csv); `bench plot` then draws it through a stand-in gnuplot that
keeps each figure's file of variables and runs the real gnuplot when there is one (else it writes
a placeholder). The variables and data files must carry the model, the expected value and the
thresholds of every judged bar and the phases of the series; with gnuplot, the PNG and SVG must
be drawn and the SVG must hold the marks' key and the phases' names."""
import csv
import glob
import json
import os
import shutil
import stat
import subprocess
import sys

bench, expect, figures, work, plots = sys.argv[1:6]
shutil.rmtree(work, ignore_errors=True)
res = os.path.join(work, "results")
os.makedirs(res)

out = subprocess.run([bench, "check", "--expect", expect, "--from-figures", figures, "--json"],
                     capture_output=True, text=True)
judged = json.loads(out.stdout)

# the results directory, as cmd_check.c's write_results writes it
json.dump({"complete": True, "emulated": False, "check": judged}, open(os.path.join(res, "status.json"), "w"))
HEAD = ["suite", "benchmark", "param", "x", "metric", "unit", "median", "mean", "stddev", "cv", "min",
        "max", "repetitions"]
with open(os.path.join(res, "check.csv"), "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(HEAD)
    for g in judged["gpus"]:
        for name, f in g["figures"].items():
            v = f.get("value")
            if isinstance(v, (int, float)) and f.get("unit"):
                w.writerow(["check", name, g["device"], "", f["unit"], f["unit"], v, v, 0, 0, v, v, 1])
SERIES = {"sustained": "sustained.load", "pulsed": "pulsed.load"}
for suite, key in SERIES.items():
    with open(os.path.join(res, suite + ".csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(HEAD)
        for g in judged["gpus"]:
            s = g["series"][key]
            for t, p in zip(s["t_s"], s["power_w"]):
                if p is not None:
                    w.writerow([suite, g["device"], "t_s:%.3f" % t, t, "power", "W", p, p, 0, 0, p, p, 1])

# a stand-in gnuplot: keeps the variables (its first argument), then draws with the real one
real = shutil.which("gnuplot")
stub = os.path.join(work, "gnuplot")
with open(stub, "w") as fh:
    fh.write("#!/bin/sh\nv=${1#./}\ncp \"$v\" \"kept-${v%%.tmp*}.vars\"\n")
    fh.write('exec "%s" "$@"\n' % real if real else 'echo placeholder > "${v%.gp}"\n')
os.chmod(stub, os.stat(stub).st_mode | stat.S_IEXEC)
env = dict(os.environ, GNUPLOT=stub, TANDEM_PLOTS_DIR=plots)
pout = os.path.join(work, "plots")
r = subprocess.run([bench, "plot", res, "--out", pout], capture_output=True, text=True, env=env)
assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)


def variables(name):
    text = open(os.path.join(pout, "kept-%s.png.vars" % name)).read()
    return {l.split("=", 1)[0]: l.split("=", 1)[1] for l in text.splitlines() if "=" in l and not l.startswith("#")}


def rows(name):
    return [l.split() for l in open(os.path.join(pout, name + ".dat")) if l.strip() and not l.startswith("#")]


# the bars: every judged bar carries its model in its label and its expected value, WARN and FAIL
# thresholds in the data, as the judge's line says
lines = {(g["device"], c["check"]): (g, c) for g in judged["gpus"] for c in g["checks"]}
bars = [os.path.basename(p)[5:-9] for p in glob.glob(os.path.join(pout, "kept-check-*.png.vars"))]
assert bars, os.listdir(pout)
marked = 0
for b in bars:
    var, dat = variables(b), rows(b)
    assert var.get("spec") == "1", (b, var)
    nruns = int(var["nruns"])
    for row in dat:
        label = var["b" + row[0]].strip("'")
        check, device = label.split(" ")[:2]
        g, c = lines[(device, check)]
        assert "(%s)" % g["model"] in label, (label, g["model"])
        spec, warn, fail = (float(x) for x in row[1 + 3 * nruns:4 + 3 * nruns])
        assert abs(spec - c["expected"]) < 1e-6 * c["expected"], (label, spec, c)
        assert abs(warn - c["expected"] * c["thresholds"]["warn"]) < 1e-6 * spec, (label, warn, c)
        assert abs(fail - c["expected"] * c["thresholds"]["fail"]) < 1e-6 * spec, (label, fail, c)
        assert fail < warn < spec
        marked += 1
assert marked >= 8, marked   # 2 GPUs x (d2d, 4 GEMMs, ...)

# the series: the phases where they begin, from the first GPU's series
for suite, key in SERIES.items():
    var = variables(suite + "-power")
    s = judged["gpus"][0]["series"][key]
    want, last = [], None
    for t, p in zip(s["t_s"], s["phase"]):
        p = "pulsed (1 s on, 1 s off)" if p in ("on", "off") else p
        if p != last:
            want.append((t, p))
            last = p
    got = [(float(var["phx%d" % k]), var["phn%d" % k].strip("'")) for k in range(1, int(var["nphase"]) + 1)]
    assert got == want, (suite, got, want)
    names = [p for _, p in got]
    assert names == (["calibrate", "stress", "power"] if suite == "sustained" else ["pulsed (1 s on, 1 s off)"]), names

if real:   # drawn: the key of the marks and the phases' names are in the SVG
    for b in bars:
        svg = open(os.path.join(pout, b + ".svg")).read()
        assert os.path.getsize(os.path.join(pout, b + ".png")) > 1000
        for text in ("datasheet figure", "WARN below", "FAIL below", "A100"):
            assert text in svg, (b, text)
    phases = {"sustained": ("calibrate", "stress", "power"), "pulsed": ("pulsed (1 s on, 1 s off)",)}
    for suite, names in phases.items():
        svg = open(os.path.join(pout, suite + "-power.svg")).read()
        assert os.path.getsize(os.path.join(pout, suite + "-power.png")) > 1000
        for p in names:
            assert ">%s<" % p in svg, (suite, p)
print("marked", marked, "bars in", len(bars), "figures; phases of both series; drawn" if real else "; no gnuplot")
