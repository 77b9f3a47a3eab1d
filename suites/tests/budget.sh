#!/bin/sh
# budget.sh — `bench run --budget` end to end on the CPU: the run ends within 5 % of its budget,
# runs its suites in the priority order, and lists every row it did not run as skipped for time
# (none unfinished, none silently absent); the progress line shows on a terminal and not in a log.
# usage: budget.sh BENCH PYTHON DIR SECONDS [bench run options...]
set -u
B=$1 PY=$2 DIR=$3 SECONDS_=$4
shift 4
rm -rf "$DIR" && mkdir -p "$DIR" || exit 1
t0=$(date +%s.%N)
"$B" run --device cpu --budget "${SECONDS_}s" --out "$DIR/run" "$@" >"$DIR/out.log" 2>"$DIR/err.log"
rc=$?
t1=$(date +%s.%N)
[ $rc -eq 0 ] || { echo "bench run exited $rc"; cat "$DIR/err.log"; exit 1; }
grep -q "^bench run: budget " "$DIR/out.log" || { echo "the budget is not printed before the run"; exit 1; }
if grep -q "$(printf '\033')\[K" "$DIR/err.log"; then
  echo "a progress line went to a log (stderr is not a terminal)"; exit 1
fi
# What bench's own plan was: every row, from bench list is not enough (the suites size their rows
# by the budget), so the check is against what status.json says was planned: finished + failed +
# skipped + unfinished, with no unfinished and at least one skipped for time.
"$PY" - "$DIR/run/status.json" "$t0" "$t1" "$SECONDS_" <<'EOF' || exit 1
import json, sys
st = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
budget = float(sys.argv[4])
bad = []
if wall > 1.05 * budget:
    bad.append("the run took %.1f s, over 5 %% past its budget of %.0f s" % (wall, budget))
b = st.get("budget") or {}
if b.get("seconds") != budget:
    bad.append("status.json's budget.seconds is %r, not %r" % (b.get("seconds"), budget))
if not st.get("complete"):
    bad.append("a run cut by its budget is complete (it did what it was asked), status says not")
if st.get("unfinished"):
    bad.append("unfinished rows in a budget run: %s" % st["unfinished"][:3])
time_skips = [s for s in st.get("skipped", []) if s.get("reason", "").startswith("skipped for time")]
if not time_skips:
    bad.append("nothing was skipped for time: the budget did not bind (make it smaller)")
for s in time_skips:
    if not s.get("suite") or not s.get("benchmark"):
        bad.append("a time skip without its suite and row: %r" % s)
order = ["transformer", "amp", "transfer", "cudnn", "reductions", "graphs", "pipeline",
         "scaling", "ops", "cpu-vs-gpu"]
ran = [s["suite"] for s in b.get("suites", [])]
if ran != sorted(ran, key=order.index):
    bad.append("suites ran in the order %s, not the priority order" % ran)
finished = set(st.get("finished", []))
if not finished:
    bad.append("nothing finished")
for s in time_skips:
    if "%s/%s" % (s["suite"], s["benchmark"]) in finished:
        bad.append("%s/%s is both finished and skipped for time" % (s["suite"], s["benchmark"]))
print("wall %.1f s of %.0f; %d finished, %d skipped for time; suites %s"
      % (wall, budget, len(finished), len(time_skips), ",".join(ran)))
if bad:
    print("FAIL: " + "\nFAIL: ".join(bad))
    sys.exit(1)
EOF
# On a terminal (script(1) gives the run one): the progress line, row i of n, elapsed and ETA.
if command -v script >/dev/null 2>&1; then
  script -qfec "$B run --device cpu --quick --suite ops --budget 30s --out $DIR/tty" "$DIR/tty.log" \
    >/dev/null 2>&1 </dev/null || { echo "bench run on a terminal failed"; cat "$DIR/tty.log"; exit 1; }
  grep -q "\[1/[0-9]*\] ops/.*elapsed [0-9:]*  ETA " "$DIR/tty.log" ||
    { echo "no progress line (row i of n, elapsed, ETA) on a terminal"; cat "$DIR/tty.log"; exit 1; }
else
  echo "FAIL: script(1) (util-linux) is needed to give bench a terminal"; exit 1
fi
echo "PASS"
