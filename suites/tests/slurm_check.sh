#!/bin/sh
# slurm_check.sh BENCH EXPECTATIONS DATA SCRIPT WORK — tests suites/check/slurm/tandem-slurm-check.sh
# (fleet.cmake) with a stand-in `scontrol` on PATH that records its arguments, and a stand-in
# `bench` that judges recorded figures (DATA/NAME.json, chosen by $FIGS) instead of measuring: a
# healthy node is left alone (scontrol not called, exit 0); a node with an Xid 79 is drained with
# the fault code as the reason (prolog: exit 1, so the job is requeued; health: exit 0); an
# incomplete check drains too; bad input drains nothing.
set -u
bench=$1 expect=$2 data=$3 script=$4 w=$5
rm -rf "$w" && mkdir -p "$w/bin" || exit 1
cat > "$w/bin/scontrol" <<EOS
#!/bin/sh
for a in "\$@"; do printf '%s\n' "\$a"; done > "$w/scontrol.args"
EOS
# the stand-in bench: bench check --level N [--prometheus F] -> judge \$FIGS's figures
cat > "$w/bin/bench" <<EOS
#!/bin/sh
shift   # check
extra=""
while [ \$# -gt 0 ]; do
  case \$1 in
  --level) shift 2 ;;
  --prometheus) extra="--prometheus \$2"; shift 2 ;;
  *) echo "stand-in bench: unexpected \$1" >&2; exit 2 ;;
  esac
done
exec "$bench" check --expect "$expect" --from-figures "$data/\$FIGS.json" \$extra
EOS
chmod +x "$w/bin/scontrol" "$w/bin/bench"
export PATH="$w/bin:$PATH"
node=$(hostname -s)
fail=0
run() {   # run WANT_RC MODE FIGS: the script's exit status must be WANT_RC
    rm -f "$w/scontrol.args"
    FIGS=$3 sh "$script" "$2" > "$w/out.txt" 2>&1
    rc=$?
    [ "$rc" -eq "$1" ] || { echo "FAIL: $2 on $3: exit $rc, want $1"; cat "$w/out.txt"; fail=1; }
}
want_drain() {   # want_drain REASON_PREFIX
    want="update
nodename=$node
state=drain
reason=$1"
    if [ ! -f "$w/scontrol.args" ]; then echo "FAIL: scontrol was not called (want: $1)"; fail=1; return; fi
    got=$(cat "$w/scontrol.args")
    case $got in
    "$want"*) echo "drained as wanted: $(tail -n 1 "$w/scontrol.args")" ;;
    *) echo "FAIL: scontrol got:"; echo "$got"; echo "want (a prefix):"; echo "$want"; fail=1 ;;
    esac
}
want_alone() {
    if [ -f "$w/scontrol.args" ]; then echo "FAIL: scontrol was called:"; cat "$w/scontrol.args"; fail=1
    else echo "left alone, as wanted"; fi
}
run 0 prolog level1-healthy; want_alone
run 0 health level2-healthy; want_alone
# cuda:1 had an Xid 79 during the run: nvml.xid FAIL, TDM-F060
run 1 prolog level1-xid; want_drain "tandem TDM-F060 cuda:1 nvml.xid (level 1), 1 failed"
run 0 health level1-xid; want_drain "tandem TDM-F060 cuda:1 nvml.xid (level 2)"
# an expected check not measured: incomplete, drained
run 1 prolog level3-incomplete; want_drain "tandem INCOMPLETE (level 1)"
# bad input (a figures file that cannot be true): the check's problem, not the node's
run 0 prolog bad-counter-backwards; want_alone
# the Prometheus textfile goes where TANDEM_PROM_FILE says
rm -f "$w/node.prom"
TANDEM_PROM_FILE=$w/node.prom FIGS=level1-xid sh "$script" health > /dev/null 2>&1
grep -q '^tandem_check_verdict{check="nvml.xid",gpu="1",.*verdict="FAIL",code="TDM-F060"} 2$' "$w/node.prom" ||
    { echo "FAIL: no nvml.xid FAIL in $w/node.prom"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: the Slurm example drains failing nodes with the fault code and leaves healthy ones"
exit $fail
