#!/usr/bin/env python3
"""gpu-summary.py — the JSON summary of a GPU session's checks (.ci/gpu-session test, and the
"details" of `first`'s summary.json): the device, driver and library versions and the commit (from
`bench env --json`), every CTest test's outcome (from ctest's JUnit files, or, for a ctest stopped
before it wrote one, from its log), and per op and dtype the cases run, failed and the worst
error-to-bound ratio, from the `bench replay` (golden cases) and `bench conform` (randomized) logs.

usage: gpu-summary.py OUTDIR   (reads OUTDIR/env.json, ctest*.xml, *.log, replay.log, conform.log;
prints JSON). Standard library only: it runs with the GPU machine's python3."""
import glob
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

LINE = re.compile(r"^(PASS|FAIL)\s+(\S+)\s+(\S+)\s+(\S+)\s+worst\s.*?\bratio\s+([0-9.eE+-]+|inf|nan)")


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": f"{os.path.basename(path)}: {e}"}


# ctest's progress lines: " 3/24 Test #265: gpu.train.cnn-adam-bf16 ......***Skipped   0.05 sec"
CTEST_LINE = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(\*\*\*)?(Passed|Failed|Skipped|Timeout|"
                        r"Not Run|Exception)")
FROM_LOG = {"Passed": "passed", "Failed": "failed", "Skipped": "skipped", "Timeout": "timeout",
            "Not Run": "notrun", "Exception": "failed"}


def ctest_outcomes(d):
    """{test: outcome} from every ctest*.xml in d, then any test only a log names (a ctest killed
    before it wrote its JUnit file)."""
    names = {"run": "passed", "fail": "failed", "notrun": "skipped", "disabled": "disabled"}
    out, errors = {}, []
    for path in sorted(glob.glob(os.path.join(d, "ctest*.xml"))):
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            errors.append(f"{os.path.basename(path)}: {e}")
            continue
        for tc in root.iter("testcase"):
            status = tc.get("status", "")
            if tc.find("failure") is not None:
                status = "fail"
            elif tc.find("skipped") is not None:
                status = "notrun"
            out[tc.get("name")] = names.get(status, status or "unknown")
    for path in sorted(glob.glob(os.path.join(d, "*.log"))):
        try:
            with open(path, errors="replace") as f:
                for line in f:
                    m = CTEST_LINE.match(line)
                    if m and m.group(1) not in out:
                        out[m.group(1)] = FROM_LOG[m.group(3)]
        except OSError:
            pass
    if not out and errors:
        return {"error": "; ".join(errors)}
    if not out:
        return {"error": "no ctest*.xml and no ctest log lines"}
    return out


def case_ratios(path):
    """{op: {dtype: {cases, failed, worst_ratio, worst_case}}} and the log's last line."""
    ops, last = {}, None
    try:
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if line.strip():
                    last = line
                m = LINE.match(line)
                if not m:
                    continue
                verdict, case, op, dtype, ratio = m.groups()
                r = float(ratio)
                e = ops.setdefault(op, {}).setdefault(
                    dtype, {"cases": 0, "failed": 0, "worst_ratio": 0.0, "worst_case": None})
                e["cases"] += 1
                e["failed"] += verdict == "FAIL"
                if not (r <= e["worst_ratio"]):   # NaN counts as worst
                    e["worst_ratio"], e["worst_case"] = r, case
    except OSError as e:
        return {"error": f"{os.path.basename(path)}: {e}"}, None
    return ops, last


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    env = load_json(os.path.join(d, "env.json"))
    keys = ("host", "tandem_commit", "tandem_build", "nvidia_driver", "cuda_driver",
            "cuda_runtime", "cublas", "cudnn", "nccl", "gpus")
    tests = ctest_outcomes(d)
    golden, golden_last = case_ratios(os.path.join(d, "replay.log"))
    conform, conform_last = case_ratios(os.path.join(d, "conform.log"))
    counts = {}
    if isinstance(tests, dict) and "error" not in tests:
        for v in tests.values():
            counts[v] = counts.get(v, 0) + 1
    json.dump({"format": "tandem-gpu-summary/1",
               "env": {k: env.get(k) for k in keys} if "error" not in env else env,
               "ctest": {"counts": counts, "tests": tests},
               "golden_replay": {"summary": golden_last, "per_op": golden},
               "randomized_conform": {"summary": conform_last, "per_op": conform}},
              sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
