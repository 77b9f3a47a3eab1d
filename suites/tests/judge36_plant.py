#!/usr/bin/env python3
"""judge36_plant.py — planted figures for issue 36's judging findings (judge36.cmake judges them):
a level-4 run the judge must not pass, or whose figures cannot be true.

usage: judge36_plant.py TEMPLATE OUTDIR
TEMPLATE is suites/tests/check/level4-pulsed-brake.json (2 A100 SXM4 80GB, level 4, healthy loads,
cuda:1's pulses trip the power brake). The base planted here is it made healthy and whole: no
power brake, a memory test that passed over 95 % of the free memory and the silent data corruption
records of the check's own work on both GPUs (exit 0). Each other file is that base with one fault
on cuda:1:
  pulsed-no-window    the pulsed load's arrays empty (it never ran): incomplete, not `missing`
  pulsed-no-reason    every clocks-event reading of the pulses null: incomplete
  sustained-median-forged  targeted stress and power medians of 250 TFLOP/s over a series of one
                      sample: the medians are not the samples' (exit 2)
  sustained-one-window     one window per phase, medians consistent: stress and power not run
  memtest-10pct       a memory test "pass" over 10 % of the free memory (exit 2)
  sdc-forged          one fingerprint of 1 step, a 1x1x1 GEMM of 2 repetitions: not the check's
                      work, not run
  sdc-one-fingerprint the f32 fingerprint alone: the check trains bf16 too, not run
  memtest-no-fraction a memory test "pass" without the fraction it covered (exit 2)
  sm-clock-0          SM clock 0 MHz (exit 2: no clock of a GPU that answers NVML)
  emulated-mix        cuda:1 "emulated": true, with its own fingerprint, inside real figures (exit 2)
  throttle-unknown    NVML's reading holds a reason bit newer drivers define (0x200) beside the
                      power cap: kept and named `unknown 0x200`, not refused (exit 0)
  memtest-ecc-grew    a memory test "pass" while NVML's corrected ECC count grew from 0 to 3
                      during it (exit 2)
  memtest-remap-pending  a memory test "pass" with a row remap pending at its end (exit 2)"""
import copy
import json
import os
import sys

template, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
t = json.load(open(template))

BUILD = "tandem 0.1 (C11, backends: cpu reference, cuda), commit 0123abc"
LIBS = "cuBLAS 12.4.5, cuDNN 9.1.0"


def fingerprint(gpu, precision, digest, steps=50):
    return {"digest": digest * 64, "build": BUILD, "libs": LIBS, "gpu": gpu, "emulated": False,
            "precision": precision, "model": "gpt:L2-H2-D32-T16-V67", "steps": steps,
            "final_loss": 3.25, "final_loss_bits": "0x40500000"}


base = copy.deepcopy(t)
base["about"] = "planted (judge36_plant.py): a healthy, whole level-4 run of 2 x A100"
for g in base["gpus"]:
    p = g["series"]["pulsed.load"]
    p["throttle_reasons"] = [r & ~0x80 for r in p["throttle_reasons"]]
    g["numerics"]["memory.test"] = {
        "result": "pass", "detail": "no word read wrong in 72.2 GiB (95.0 % of the free memory)",
        "measured": "0 errors in 72.2 GiB", "expected": "0 errors in >= 90 % of free",
        "bytes_tested": 77525385216, "free_bytes": 81605668864, "fraction": 0.95, "errors": 0,
        "nvml": {side: {"ecc_corrected_volatile": 0, "ecc_uncorrected_volatile": 0,
                        "remapped_rows_correctable": 0, "remapped_rows_uncorrectable": 0,
                        "remapped_rows_pending": 0, "remapped_rows_failed": 0}
                 for side in ("start", "end")}}
    g["sdc"] = {
        "sdc.gemm": {"repeats": 2000, "mismatches": 0, "first_mismatch": None, "dtype": "bf16",
                     "shape": [4096, 4096, 4096], "digest": "a" * 64, "seconds": 10.0},
        "sdc.train": {"fingerprints": [fingerprint(g["name"], "f32", "b"),
                                       fingerprint(g["name"], "bf16", "c")], "seconds": 4.0}}


def write(name, f):
    with open(os.path.join(out, name + ".json"), "w") as fh:
        json.dump(f, fh, indent=1)


def fault(name, change):
    f = copy.deepcopy(base)
    change(f["gpus"][1])
    write(name, f)


write("healthy-l4", base)


def no_window(g):
    p = g["series"]["pulsed.load"]
    for k in ("t_s", "sm_clock_mhz", "mem_clock_mhz", "power_w", "temperature_c", "throttle_reasons",
              "tflops", "phase"):
        p[k] = []
    p["median_tflops"] = {"on": None}


def no_reason(g):
    p = g["series"]["pulsed.load"]
    p["throttle_reasons"] = [None] * len(p["t_s"])


def series_of(g, samples, medians):
    s = g["series"]["sustained.load"]
    keys = ("t_s", "sm_clock_mhz", "mem_clock_mhz", "power_w", "temperature_c", "throttle_reasons",
            "tflops", "phase")
    for k in keys:
        s[k] = []
    for i, (phase, tf) in enumerate(samples):
        for k, v in zip(keys, (i * 0.5, 1410, 1593, 400.0, 60, 4, tf, phase)):
            s[k].append(v)
    s["median_tflops"] = medians


fault("pulsed-no-window", no_window)
fault("pulsed-no-reason", no_reason)
fault("sustained-median-forged",
      lambda g: series_of(g, [("power", 250.0)], {"calibrate": 250.0, "stress": 250.0, "power": 250.0}))
fault("sustained-one-window",
      lambda g: series_of(g, [("calibrate", 250.0), ("stress", 200.0), ("power", 250.0)],
                          {"calibrate": 250.0, "stress": 200.0, "power": 250.0}))
fault("memtest-10pct",
      lambda g: g["numerics"]["memory.test"].update(fraction=0.10, bytes_tested=8160566886))


def sdc_forged(g):
    g["sdc"] = {
        "sdc.gemm": {"repeats": 2, "mismatches": 0, "first_mismatch": None, "dtype": "bf16",
                     "shape": [1, 1, 1], "digest": "d" * 64, "seconds": 0.001},
        "sdc.train": {"fingerprints": [fingerprint(g["name"], "f32", "e", steps=1)], "seconds": 0.1}}


fault("sdc-forged", sdc_forged)
fault("sdc-one-fingerprint", lambda g: g["sdc"]["sdc.train"]["fingerprints"].pop())
fault("memtest-no-fraction", lambda g: g["numerics"]["memory.test"].pop("fraction"))
fault("sm-clock-0", lambda g: g["health"].update(clock_sm_mhz=0))


def emulated_mix(g):
    g["emulated"] = True
    g["sdc"]["sdc.train"]["fingerprints"][0]["digest"] = "f" * 64


fault("emulated-mix", emulated_mix)
fault("throttle-unknown", lambda g: g["health"].update(throttle_reasons=0x204))
fault("memtest-ecc-grew",
      lambda g: g["numerics"]["memory.test"]["nvml"]["end"].update(ecc_corrected_volatile=3))
fault("memtest-remap-pending",
      lambda g: g["numerics"]["memory.test"]["nvml"]["end"].update(remapped_rows_pending=1))
print("planted in", out)
