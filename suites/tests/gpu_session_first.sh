#!/bin/sh
# gpu_session_first.sh — `.ci/gpu-session first` (the lent GPU's one call) without a GPU, against
# this build (TANDEM_FIRST_BUILD; the gpu tests listed, not run: no ctest inside ctest):
#   whole:  summary.json names every stage task once, setup and env passed, every GPU task
#           skipped_no_gpu, finished; $OUT holds summary.json, session.tar.gz (with the summary
#           and the logs) and console.log, nothing else;
#   held:   a task held past its limit (TANDEM_FIRST_HOLD=replay, 30 s in all) is timed_out, the
#           stages after it still get a final status, and the whole ends near its 30 s;
#   killed: killed (SIGKILL, as the device tool does at timeout_s) while a task runs, the summary
#           on disk is whole JSON, says that task was running and the later stages pending.
# Skips (77) where nvidia-smi sees a GPU (the stages would run for real) or without python3.
# usage: gpu_session_first.sh SOURCE_DIR BUILD_DIR TMP_DIR
src=$1 build=$2 tmp=$3
if nvidia-smi -L 2> /dev/null | grep -q '^GPU 0'; then
    echo "SKIP: nvidia-smi sees a GPU: first would run its stages for real"
    exit 77
fi
command -v python3 > /dev/null || { echo "SKIP: no python3 to read summary.json"; exit 77; }
rm -rf "$tmp" && mkdir -p "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
first() {   # first NAME [VAR=VALUE...]: the run's $OUT is $tmp/NAME
    name=$1
    shift
    env OUT="$tmp/$name" TANDEM_FIRST_WORK="$tmp/$name-work" TANDEM_FIRST_BUILD="$build" \
        TANDEM_FIRST_CTEST=list "$@" bash "$src/.ci/gpu-session" first > "$tmp/$name.log" 2>&1
}
judge() {   # judge SUMMARY PYTHON-ASSERTIONS: s = the summary, st = {task: status}
    python3 - "$1" "$2" << 'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
tasks = ["setup", "env", "replay", "conform", "trajectories", "gpu_tests", "check", "anchor",
         "memcheck", "racecheck", "synccheck", "bench_run"]
got = [e["task"] for e in s["stages"]]
assert got == tasks, f"the stage tasks are {got}"
st = {e["task"]: e["status"] for e in s["stages"]}
for e in s["stages"]:
    assert isinstance(e["budget_s"], int) and e["budget_s"] > 0, e
exec(sys.argv[2])
EOF
}

# whole
first whole TANDEM_FIRST_SECONDS=120
rc=$?
tail -n 14 "$tmp/whole.log"
[ "$rc" = 0 ] || fail "first exit $rc (want 0: nothing failed) ($tmp/whole.log)"
judge "$tmp/whole/summary.json" '
assert s["finished"] is True, "not finished"
assert st["setup"] == "passed" and st["env"] == "passed", st
gpu = {t: v for t, v in st.items() if t not in ("setup", "env")}
assert set(gpu.values()) == {"skipped_no_gpu"}, gpu
assert s["gpu_state"] == "none", s["gpu_state"]
' || fail "whole: summary.json ($tmp/whole/summary.json)"
[ "$(cd "$tmp/whole" && ls | tr '\n' ' ')" = "console.log session.tar.gz summary.json " ] ||
    fail "whole: \$OUT holds $(ls "$tmp/whole" | tr '\n' ' ')"
tar -tzf "$tmp/whole/session.tar.gz" | grep -qx './summary.json' || fail "no summary.json in the archive"
tar -tzf "$tmp/whole/session.tar.gz" | grep -qx './logs/check.log' || fail "no logs/check.log in the archive"

# held
start=$(date +%s)
first held TANDEM_FIRST_SECONDS=30 TANDEM_FIRST_HOLD=replay
rc=$?
took=$(($(date +%s) - start))
tail -n 14 "$tmp/held.log"
[ "$rc" = 1 ] || fail "held: first exit $rc (want 1: a task timed out)"
[ "$took" -le 45 ] || fail "held: took $took s for a 30 s plan"
judge "$tmp/held/summary.json" '
assert s["finished"] is True
assert st["replay"] == "timed_out", st
left = {t: v for t, v in st.items() if v in ("pending", "running")}
assert not left, left
' || fail "held: summary.json ($tmp/held/summary.json)"

# killed: SIGKILL to the whole process group while the held task runs
setsid env OUT="$tmp/killed" TANDEM_FIRST_WORK="$tmp/killed-work" TANDEM_FIRST_BUILD="$build" \
    TANDEM_FIRST_CTEST=list TANDEM_FIRST_SECONDS=120 TANDEM_FIRST_HOLD=replay \
    bash "$src/.ci/gpu-session" first > "$tmp/killed.log" 2>&1 &
pid=$!
i=0
until grep -qs '"task": "replay", .*"status": "running"' "$tmp/killed/summary.json"; do
    i=$((i + 1))
    [ "$i" -le 300 ] || { kill -KILL "-$pid"; fail "killed: replay never ran"; }
    sleep 0.1
done
sleep 1
kill -KILL "-$pid"
wait "$pid" 2> /dev/null
judge "$tmp/killed/summary.json" '
assert s["finished"] is False
assert st["setup"] == "passed" and st["env"] == "passed", st
assert st["replay"] == "running", st
later = [t for t in ("gpu_tests", "check", "bench_run", "anchor", "memcheck") if st[t] != "pending"]
assert not later, later
' || fail "killed: summary.json ($tmp/killed/summary.json)"
tar -tzf "$tmp/killed/session.tar.gz" | grep -qx './logs/env.log' || fail "killed: the archive lost env's log"
echo "first: whole, held and killed runs as expected"
