#!/bin/sh
# gpu_session_perf.sh — `.ci/gpu-session perf` (the main job timed on a GPU machine) without a GPU,
# against this build (TANDEM_FIRST_BUILD), over planted results (TANDEM_PERF_RESULTS):
#   plan:     `perf --plan` lists the stages setup, env, anchor, bench-perf, compare with their
#             budgets, bench run's --budget and --peer torch and the options given, and the earlier
#             run compare would take: the newest bench run on the named GPU (TANDEM_PERF_GPU), not
#             a newer run of another GPU, a check directory, the peer's or an emulated run; for a
#             GPU with no earlier run it says so; it runs nothing ($OUT stays empty);
#   whole:    a whole run: summary.json (tandem-gpu-perf/1) names each stage task once, setup and env
#             passed, anchor, bench_perf and compare skipped_no_gpu, compare's note names that run;
#             $OUT holds summary.json, session.tar.gz and console.log only; exit 0;
#   rows:     gpu-summary.py --perf over a planted run with a peer-torch/: tandem/PyTorch per row
#             (a rate's ratio, a time's inverse), per suite median, best and worst.
# Skips (77) where nvidia-smi sees a GPU (the stages would run for real) or without python3.
# usage: gpu_session_perf.sh SOURCE_DIR BUILD_DIR TMP_DIR
src=$1 build=$2 tmp=$3
if nvidia-smi -L 2> /dev/null | grep -q '^GPU 0'; then
    echo "SKIP: nvidia-smi sees a GPU: perf would run its stages for real"
    exit 77
fi
command -v python3 > /dev/null || { echo "SKIP: no python3"; exit 77; }
rm -rf "$tmp" && mkdir -p "$tmp/results" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

# planted results: run DIR GPU STARTED [VERSION [EMULATED [COMMAND]]]
run() {
    mkdir -p "$tmp/results/$1"
    cat > "$tmp/results/$1/context.json" << EOT
{"format": "tandem-results/1", "tandem": {"version": "${4:-0.1}", "commit": "abc1234"},
 "command": ["bench", "${6:-run}", "--device", "cuda:0"], "device": "cuda:0", "emulated": ${5:-false},
 "started": "$3", "env": {"gpus": [{"index": 0, "device": "cuda:0", "name": "$2"}]}}
EOT
}
run a-old "Test GPU X" 2026-01-01T00:00:00Z
run a-new "Test GPU X" 2026-02-01T00:00:00Z
run b-newer "Test GPU Y" 2026-03-01T00:00:00Z
run c-check "Test GPU X" 2026-04-01T00:00:00Z 0.1 false check
run d-peer "Test GPU X" 2026-04-02T00:00:00Z peer
run e-emu "Test GPU X" 2026-04-03T00:00:00Z 0.1 true

perf() {   # perf NAME [ARGS...]: the run's $OUT is $tmp/NAME (other settings: exported by the caller)
    name=$1
    shift
    env OUT="$tmp/$name" TANDEM_FIRST_WORK="$tmp/$name-work" TANDEM_FIRST_BUILD="$build" \
        TANDEM_PERF_RESULTS="$tmp/results" bash "$src/.ci/gpu-session" perf "$@" > "$tmp/$name.log" 2>&1
}

# plan
(export TANDEM_PERF_GPU="Test GPU X"; perf plan --plan --suite amp)
rc=$?
cat "$tmp/plan.log"
[ "$rc" = 0 ] || fail "plan: exit $rc"
for s in setup env anchor bench-perf compare; do
    grep -qE "^$s +[0-9]+ " "$tmp/plan.log" || fail "plan: no stage $s"
done
grep -q 'bench run --device cuda:0 --budget .* --peer torch .* --suite amp$' "$tmp/plan.log" ||
    fail "plan: no bench run line with --budget, --peer torch and the options given"
rel=${tmp#"$src"/}   # the plan names a run inside the checkout by its path from the root
grep -qE "^compare: .*bench compare ($tmp|$rel)/results/a-new <the new run>" "$tmp/plan.log" ||
    fail "plan: compare does not name the newest run on Test GPU X (a-new)"
[ -z "$(ls -A "$tmp/plan" 2> /dev/null)" ] || fail "plan: \$OUT is not empty: $(ls "$tmp/plan")"
[ ! -d "$tmp/plan-work" ] || fail "plan: it made a work folder"
(export TANDEM_PERF_GPU="Test GPU Z"; perf plan-none --plan)
grep -q '^compare: .*no earlier run on Test GPU Z' "$tmp/plan-none.log" ||
    fail "plan: no 'no earlier run' for a GPU without one ($tmp/plan-none.log)"

# whole
(export TANDEM_PERF_GPU="Test GPU X" TANDEM_FIRST_SECONDS=60; perf whole)
rc=$?
tail -n 12 "$tmp/whole.log"
[ "$rc" = 0 ] || fail "whole: exit $rc (want 0: nothing failed) ($tmp/whole.log)"
has_budget=no
case $("$build/bench" run --help 2>&1) in *--budget*) has_budget=yes;; esac
python3 - "$tmp/whole/summary.json" "$tmp/results/a-new" "$has_budget" "$rel/results/a-new" << 'EOT' || fail "whole: summary.json ($tmp/whole/summary.json)"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["format"] == "tandem-gpu-perf/1", s["format"]
got = [e["task"] for e in s["stages"]]
assert got == ["setup", "env", "anchor", "bench_perf", "compare"], got
st = {e["task"]: e for e in s["stages"]}
assert s["finished"] is True and s["gpu_state"] == "none"
assert st["setup"]["status"] == "passed" and st["env"]["status"] == "passed", st
for t in ("anchor", "bench_perf", "compare"):
    assert st[t]["status"] == "skipped_no_gpu", (t, st[t])
# the earlier run, by its path (from the checkout's root when it is inside it)
assert sys.argv[2] in st["compare"]["note"] or sys.argv[4] in st["compare"]["note"], st["compare"]["note"]
if sys.argv[3] == "yes":   # this bench has --budget: perf passes it (the stage's limit less 30 s)
    assert st["bench_perf"]["note"].startswith("--budget "), st["bench_perf"]["note"]
assert s["details"]["format"] == "tandem-gpu-perf-summary/1", s["details"]
EOT
[ "$(cd "$tmp/whole" && ls | tr '\n' ' ')" = "console.log session.tar.gz summary.json " ] ||
    fail "whole: \$OUT holds $(ls "$tmp/whole" | tr '\n' ' ')"
tar -tzf "$tmp/whole/session.tar.gz" | grep -qx './logs/bench_perf.log' || fail "whole: no logs/bench_perf.log"

# rows: tandem and the peer side by side
r=$tmp/rows
mkdir -p "$r/peer-torch"
hdr=suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions
printf '%s\n%s\n%s\n%s\n%s\n' "$hdr" \
    "amp,matmul_bf16,n:1024,1024,time,ns,100,100,0,0,100,100,3" \
    "amp,matmul_bf16,n:1024,1024,GFLOP/s,GFLOP/s,3000,3000,0,0,3000,3000,3" \
    "amp,step,,0,time,ns,400,400,0,0,400,400,3" \
    "amp,only_tandem,,0,time,ns,5,5,0,0,5,5,3" > "$r/amp.csv"
printf '%s\n%s\n%s\n%s\n' "$hdr" \
    "amp,matmul_bf16,n:1024,1024,time,ns,150,150,0,0,150,150,3" \
    "amp,matmul_bf16,n:1024,1024,GFLOP/s,GFLOP/s,2000,2000,0,0,2000,2000,3" \
    "amp,step,,0,time,ns,200,200,0,0,200,200,3" > "$r/peer-torch/amp.csv"
echo '{"complete": true, "finished": ["amp/matmul_bf16/n:1024"], "unfinished": [], "skipped": []}' > "$r/status.json"
python3 "$src/.ci/gpu-summary.py" --perf "$tmp" "$r" > "$tmp/rows.json" || fail "rows: gpu-summary.py --perf"
python3 - "$tmp/rows.json" << 'EOT' || fail "rows: $tmp/rows.json"
import json, sys
d = json.load(open(sys.argv[1]))["tandem_per_torch"]
rows = {(r["benchmark"], r["param"]): r for r in d["rows"]}
assert set(rows) == {("matmul_bf16", "n:1024"), ("step", "")}, rows
assert rows[("matmul_bf16", "n:1024")]["metric"] == "GFLOP/s" and rows[("matmul_bf16", "n:1024")]["tandem_per_torch"] == 1.5
assert rows[("step", "")]["metric"] == "time" and rows[("step", "")]["tandem_per_torch"] == 0.5
a = d["per_suite"]["amp"]
assert a["rows"] == 2 and a["median"] == 1.0 and a["best"]["ratio"] == 1.5 and a["worst"]["row"] == "step", a
assert d["tandem_only"] == 1 and d["torch_only"] == 0, d
EOT
echo "perf: plan, whole run and rows as expected"
