#!/usr/bin/env python3
"""prometheus_parse.py BENCH EXPECTATIONS DATA WORK — bench check's Prometheus textfile
(harness/check/check_prometheus.c; fleet.cmake) read back by Prometheus's own text-format parser
(prometheus_client.parser.text_string_to_metric_families): every family a gauge with its HELP,
one tandem_check_verdict sample per check line of each GPU (labels check, gpu, device, uuid,
model, verdict, code; 0 PASS ... 2 FAIL), the node's exit status, the run's timestamp; written by
--prometheus atomically (no temporary file left beside it, an old file replaced whole) and the same
text as --format prometheus prints; a GPU name with a quote and a backslash comes back as
it was (a newline is refused in a name; label values escape it too). Exits 77 (skip) when no Python here has prometheus_client (Debian: python3-prometheus-client,
.ci/deps installs it)."""
import json
import os
import shutil
import subprocess
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("SKIP: prometheus_client is not installed (Debian: python3-prometheus-client)")
    sys.exit(77)

bench, expect, data, work = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def check(figures, *extra):
    r = subprocess.run([bench, "check", "--expect", expect, "--from-figures", figures, *extra],
                       capture_output=True, text=True)
    return r.returncode, r.stdout


def families(text):
    return {f.name: f for f in text_string_to_metric_families(text)}


# a level-1 node whose cuda:1 had an Xid 79: written to a file that already holds an old textfile
prom = os.path.join(work, "tandem.prom")
with open(prom, "w") as fh:
    fh.write("# an old, half-written file\ntandem_check_exit{level=\"1\"} 0\ntandem_check_verd")
rc, _ = check(os.path.join(data, "level1-xid.json"), "--prometheus", prom)
assert rc == 1, rc
text = open(prom).read()
left = [n for n in os.listdir(work) if n != "tandem.prom"]
assert not left, "left beside the textfile: %s" % left
fam = families(text)
assert set(fam) == {"tandem_check_verdict", "tandem_check_ratio", "tandem_check_exit",
                    "tandem_check_lines", "tandem_check_timestamp_seconds"}, set(fam)
for f in fam.values():
    assert f.type == "gauge" and f.documentation, (f.name, f.type, f.documentation)
v = [s for s in fam["tandem_check_verdict"].samples]
judged = json.loads(check(os.path.join(data, "level1-xid.json"), "--json")[1])
lines = sum(len(g["checks"]) for g in judged["gpus"]) + len(judged.get("host", {}).get("checks", []))
assert len(v) == lines, (len(v), lines)
xid = [s for s in v if s.labels["check"] == "nvml.xid" and s.labels["gpu"] == "1"]
assert len(xid) == 1 and xid[0].value == 2, xid
assert xid[0].labels == {"check": "nvml.xid", "gpu": "1", "device": "cuda:1", "uuid": "",
                         "model": "A100 SXM4 80GB", "verdict": "FAIL", "code": "TDM-F060"}, xid[0].labels
assert all(s.value == 0 for s in v if s.labels["verdict"] == "PASS")
assert fam["tandem_check_exit"].samples[0].value == 1
assert fam["tandem_check_timestamp_seconds"].samples[0].value > 1.5e9
# --format prometheus prints the same text on stdout (the timestamp aside, when the figures lack one)
rc, out = check(os.path.join(data, "level1-xid.json"), "--format", "prometheus")
strip = lambda t: [l for l in t.splitlines() if not l.startswith("tandem_check_timestamp_seconds")]
assert rc == 1 and strip(out) == strip(text)
# a GPU name with a quote and a backslash: escaped, and read back as it was (a newline is no name:
# bench check refuses it)
fig = json.load(open(os.path.join(data, "healthy-2xa100.json")))
name = 'NVIDIA X "q" \\b'
fig["gpus"][1]["name"] = name
hostile = os.path.join(work, "hostile.json")
json.dump(fig, open(hostile, "w"))
rc, out = check(hostile, "--format", "prometheus")
models = {s.labels["model"] for s in families(out)["tandem_check_verdict"].samples if s.labels["gpu"] == "1"}
assert models == {name}, models
# a level-4 run with a power brake during the pulses: TDM-F106 on cuda:1, ratios where there are some
rc, out = check(os.path.join(data, "level4-pulsed-brake.json"), "--format", "prometheus")
fam = families(out)
brake = [s for s in fam["tandem_check_verdict"].samples if s.labels["check"] == "pulsed.load"]
assert {(s.labels["gpu"], s.labels["code"], s.value) for s in brake} == {("0", "", 0), ("1", "TDM-F106", 2)}, brake
assert any(s.labels["check"] == "gemm.bf16" for s in fam["tandem_check_ratio"].samples)
print("PASS: the textfile parses with prometheus_client;", len(v), "verdict samples")
