#!/usr/bin/env python3
"""gpu-summary.py — the JSON summaries of a GPU session (.ci/gpu-session).

gpu-summary.py OUTDIR: the checks of `test` and the "details" of `first`'s summary.json: the device,
driver and library versions and the commit (from `bench env --json`), every CTest test's outcome
(from ctest's JUnit files, or, for a ctest stopped before it wrote one, from its log), and per op
and dtype the cases run, failed and the worst error-to-bound ratio, from the `bench replay
--verbose` (golden cases: one line per case) and `bench conform` (randomized) logs. Reads
OUTDIR/env.json, ctest*.xml, *.log, replay.log, conform.log.

gpu-summary.py --perf LOGDIR RUN_DIR [BASELINE]: the "details" of `perf`'s summary.json: the
versions (LOGDIR/env.json), the run's status (RUN_DIR/status.json: complete, finished, unfinished,
skipped), tandem / PyTorch per row (RUN_DIR's CSVs beside RUN_DIR/peer-torch/'s; tandem's
throughput over PyTorch's: above 1 tandem is faster), per suite the median, best and worst row,
and `bench compare BASELINE RUN_DIR`'s outcome (LOGDIR/compare.log).

gpu-summary.py --baseline RESULTS GPU_NAME [EXCLUDE]: prints the newest `bench run` directory
under RESULTS on a GPU of that name (context.json), not EXCLUDE; nothing (exit 1) when none.

Prints JSON. Standard library only: it runs with the GPU machine's python3."""
import glob
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True   # no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_results  # noqa: E402

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


ENV_KEYS = ("host", "tandem_commit", "tandem_build", "nvidia_driver", "cuda_driver",
            "cuda_runtime", "cublas", "cudnn", "nccl", "gpus")


def last_lines(path, n):
    try:
        with open(path, errors="replace") as f:
            return [ln.rstrip("\n") for ln in f if ln.strip()][-n:]
    except OSError:
        return []


def perf(logdir, run, base):
    """The "details" of `perf`'s summary.json (the module's docstring)."""
    env = load_json(os.path.join(logdir, "env.json"))
    out = {"format": "tandem-gpu-perf-summary/1",
           "env": {k: env.get(k) for k in ENV_KEYS} if "error" not in env else env,
           "run": os.path.basename(run.rstrip("/")) if run else None,
           "compare": {"baseline": os.path.basename(base.rstrip("/")) if base else None,
                       "last_lines": last_lines(os.path.join(logdir, "compare.log"), 3)}}
    if not run or not os.path.isdir(run):
        out["error"] = "no results directory (bench run did not start: no GPU, or no bench)"
        return out
    st = load_json(os.path.join(run, "status.json"))
    if "error" in st:
        out["status"] = st
    else:
        out["status"] = {"complete": st.get("complete"), "finished": len(st.get("finished") or []),
                         "unfinished": len(st.get("unfinished") or []),
                         "skipped": st.get("skipped") or [], "budget": st.get("budget")}
    tandem, _ = gpu_results.read_rows(run)
    peer, _ = gpu_results.read_rows(os.path.join(run, "peer-torch"))
    rows = gpu_results.pair(tandem, peer)
    out["tandem_per_torch"] = {
        "what": "per row, tandem's throughput over PyTorch's on the same GPU (a rate's ratio, a "
                "time's inverse ratio): above 1 tandem is faster",
        "per_suite": gpu_results.per_suite(rows), "rows": rows,
        "tandem_only": len(set(tandem) - set(peer)), "torch_only": len(set(peer) - set(tandem))}
    return out


def main():
    args = sys.argv[1:]
    if args[:1] == ["--baseline"] and len(args) in (3, 4):
        b = gpu_results.baseline(args[1], args[2], args[3] if len(args) == 4 else None)
        if b:
            print(b)
        sys.exit(0 if b else 1)
    if args[:1] == ["--perf"] and len(args) in (3, 4):
        json.dump(perf(args[1], args[2], args[3] if len(args) == 4 else None),
                  sys.stdout, indent=1, sort_keys=True)
        print()
        return
    if len(args) != 1 or args[0].startswith("--"):
        sys.exit(__doc__)
    d = args[0]
    env = load_json(os.path.join(d, "env.json"))
    keys = ENV_KEYS
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
