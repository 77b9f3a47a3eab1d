#!/usr/bin/env python3
"""sdc_plant.py — planted figures for `bench check`'s silent data corruption checks (sdc.gemm,
sdc.train; harness/check/check_sdc_judge.c, docs/CHECK.md "Silent data corruption") and planted results
directories for `bench compare --fleet`'s fingerprints (suites/tests/sdc.cmake judges them).

usage: sdc_plant.py TEMPLATE OUTDIR
TEMPLATE is a complete level-3 figures file of two A100s (suites/tests/check/level3-incomplete.json,
whose only gap is sustained.load); each planted file is it with the GPUs and their "sdc" records
changed, one fault each. The fleet directories hold a context.json (its host) and a status.json
with a "check" section, as `bench check --out` writes them."""
import copy
import json
import os
import sys

template, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
base = json.load(open(template))

A100, H100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"
BUILD = "tandem 0.1 (C11, backends: cpu reference, cuda), commit 0123abc"
LIBS = "cuBLAS 12.4.5, cuDNN 9.1.0"
D = {k: (c * 64) for k, c in {"gemm": "a", "f32": "b", "bf16": "c", "odd": "d", "odd2": "e"}.items()}


def sdc(gpu, gemm=D["gemm"], f32=D["f32"], bf16=D["bf16"], mismatches=0, first=None, reps=20,
        emulated=False):
    # the check's work (check.h): 4096^3 and 50 steps on a GPU, 64^3 and 4 steps on the emulated device
    n, steps = (64, 4) if emulated else (4096, 50)
    return {
        "sdc.gemm": {"repeats": reps, "mismatches": mismatches, "first_mismatch": first,
                     "dtype": "bf16", "shape": [n, n, n], "digest": gemm, "seconds": 10.2},
        "sdc.train": {"fingerprints": [
            {"digest": f32, "build": BUILD, "libs": LIBS, "gpu": gpu, "emulated": emulated,
             "precision": "f32", "model": "gpt:L2-H2-D32-T16-V67", "steps": steps,
             "final_loss": 3.25, "final_loss_bits": "0x40500000"},
            {"digest": bf16, "build": BUILD, "libs": LIBS, "gpu": gpu, "emulated": emulated,
             "precision": "bf16", "model": "gpt:L2-H2-D32-T16-V67", "steps": steps,
             "final_loss": 3.5, "final_loss_bits": "0x40600000"}],
            "seconds": 4.0}}


def node(n, names=None, **per_gpu):
    """n GPUs from the template's first, each with an sdc record: per_gpu[cuda_i] changes it."""
    f = copy.deepcopy(base)
    g0 = base["gpus"][0]
    f["gpus"] = []
    for i in range(n):
        g = copy.deepcopy(g0)
        g["index"], g["device"] = i, "cuda:%d" % i
        g["name"] = names[i] if names else A100
        g["sdc"] = sdc(g["name"], **per_gpu.get("cuda_%d" % i, {}))
        f["gpus"].append(g)
    return f


def write(name, obj):
    with open(os.path.join(out, name + ".json"), "w") as fh:
        json.dump(obj, fh, indent=1)


# the judge: each rule with one planted fault
write("sdc-healthy-3", node(3))
write("sdc-gemm-mismatch-7", node(2, cuda_1={"mismatches": 1, "first": 7}))
write("sdc-gemm-digest-differs", node(3, cuda_0={"gemm": D["odd"]}))
write("sdc-train-one-differs", node(3, cuda_2={"f32": D["odd"]}))
write("sdc-train-two-disagree", node(2, cuda_1={"bf16": D["odd"]}))
write("sdc-models-not-compared", node(2, names=[A100, H100], cuda_1={"f32": D["odd"], "gemm": D["odd2"]}))
emu = node(2, names=["tandem emulated CUDA device (A100-like, on the CPU)"] * 2)
for g in emu["gpus"]:
    g["emulated"] = True
    g["sdc"] = sdc(g["name"], emulated=True, **({"f32": D["odd"]} if g["index"] == 1 else {}))
write("sdc-emulated-differs", emu)
absent = node(2)
del absent["gpus"][1]["sdc"]
write("sdc-absent-incomplete", absent)

# malformed records: exit 2, the field named
bad = {
    "digest-short": ("sdc.gemm", "digest", D["gemm"][:63]),
    "digest-upper": ("sdc.gemm", "digest", D["gemm"].upper()),
    "mismatches-above-repeats": ("sdc.gemm", "mismatches", 21),
    "repeats-negative": ("sdc.gemm", "repeats", -1),
    "repeats-fraction": ("sdc.gemm", "repeats", 2.5),
    "first-mismatch-missing": ("sdc.gemm", "mismatches", 3),
    "fingerprint-digest": ("sdc.train", "digest", "xyz"),
    "steps-zero": ("sdc.train", "steps", 0),
}
for name, (sect, field, value) in bad.items():
    f = node(2)
    rec = f["gpus"][1]["sdc"][sect]
    (rec["fingerprints"][0] if sect == "sdc.train" else rec)[field] = value
    write("sdc-bad-" + name, f)

# fleet: results directories of `bench check --out`, one per node
def result_dir(name, host, figures, emulated=False):
    d = os.path.join(out, "fleet", name)
    os.makedirs(d, exist_ok=True)
    ctx = {"format": "tandem-results/1", "device": "cuda:all", "emulated": emulated,
           "env": {"host": host}}
    json.dump(ctx, open(os.path.join(d, "context.json"), "w"))
    json.dump({"format": "tandem-results/1", "emulated": emulated, "check": figures},
              open(os.path.join(d, "status.json"), "w"))


result_dir("node1", "node01", node(2))
result_dir("node2", "node02", node(2))
result_dir("node3", "node03", node(2, cuda_1={"f32": D["odd"]}))   # its cuda:1 differs
result_dir("node4", "node04", node(2))
# another model: its own group, its own bits (not compared with the A100s')
result_dir("node5-h100", "node05",
           node(2, names=[H100, H100], cuda_0={"f32": D["odd2"]}, cuda_1={"f32": D["odd2"]}))
result_dir("emu", "emu01", emu, emulated=True)
result_dir("bad-digest", "node09", node(2, cuda_0={"f32": "0" * 63}))
os.makedirs(os.path.join(out, "fleet", "bad-json"), exist_ok=True)
open(os.path.join(out, "fleet", "bad-json", "status.json"), "w").write('{"check": {"gpus": [')
open(os.path.join(out, "fleet", "not-a-dir"), "w").write("x")
print("planted in", out)
