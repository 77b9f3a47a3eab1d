#!/bin/sh
# tandem-slurm-check.sh — `bench check` as Slurm's prolog and health check (README.md here).
#
#   tandem-slurm-check.sh prolog   level 1 (seconds, no load) at every job start: a node that fails
#                                  is drained and the script exits 1, so that Slurm requeues the
#                                  job instead of starting it there
#   tandem-slurm-check.sh health   level 2 (about 2 minutes a GPU), for HealthCheckProgram or a
#                                  nightly job: a node that fails is drained; exits 0
#
# A healthy node (bench check exit 0) is left alone. A FAIL (exit 1) drains it with the fault code
# as the reason: scontrol update nodename=$(hostname -s) state=drain reason="tandem TDM-F060 cuda:1
# nvml.xid (level 1)". An incomplete check (exit 4) and a node that shows no GPU (exit 3) drain it
# too ("tandem INCOMPLETE ...", "tandem NO GPU ..."): neither is a node fit to train on. Bad input
# or a setup error of the check itself (exit 2) and an interrupted check drain nothing: they are
# the check's problem, not the node's, and must not drain a whole partition; they are said on
# stderr.
#
# Environment:
#   BENCH              the bench program (default: bench on PATH)
#   SCONTROL           the scontrol program (default: scontrol on PATH)
#   TANDEM_CHECK_OUT   a directory: each run's results go to a new directory under it
#                      (bench check --out: status.json, report.html, the logs)
#   TANDEM_PROM_FILE   node_exporter's textfile: the verdict per check and GPU, written atomically
#                      (bench check --prometheus; e.g. /var/lib/node_exporter/textfile/tandem.prom)
#   TANDEM_NO_GPU_OK   1: a node that shows no GPU is left alone (a CPU partition)
set -u
mode=${1:-}
case $mode in
prolog) level=1 ;;
health) level=2 ;;
*) echo "usage: tandem-slurm-check.sh prolog|health" >&2; exit 2 ;;
esac
bench=${BENCH:-bench}
scontrol=${SCONTROL:-scontrol}
node=$(hostname -s)

set -- check --level "$level"
if [ -n "${TANDEM_CHECK_OUT:-}" ]; then
    set -- "$@" --out "$TANDEM_CHECK_OUT/$node-level$level-$(date -u +%Y%m%dT%H%M%SZ)-$$"
fi
if [ -n "${TANDEM_PROM_FILE:-}" ]; then
    set -- "$@" --prometheus "$TANDEM_PROM_FILE"
fi
out=$("$bench" "$@" 2>&1)
rc=$?
printf '%s\n' "$out"

# The first FAIL line of the table: "cuda:1  nvml.xid  ...  FAIL  TDM-F060  note".
first_fail() {
    printf '%s\n' "$out" | awk '{
        for (i = 3; i < NF; i++)
            if ($i == "FAIL" && $(i + 1) ~ /^TDM-F[0-9][0-9][0-9]$/) { print $(i + 1), $1, $2; exit }
    }'
}

reason=""
case $rc in
0) exit 0 ;;   # healthy: left alone
1)
    f=$(first_fail)
    n=$(printf '%s\n' "$out" | sed -n 's/^FAIL: \([0-9]*\) checks* failed.*/\1/p' | head -n 1)
    reason="tandem ${f:-FAIL} (level $level)${n:+, $n failed}"
    ;;
3)
    [ "${TANDEM_NO_GPU_OK:-0}" = 1 ] && exit 0
    reason="tandem NO GPU (level $level): no GPU was judged"
    ;;
4) reason="tandem INCOMPLETE (level $level): expected checks not measured" ;;
*)
    echo "tandem-slurm-check: bench check exit $rc (bad input, a setup error or interrupted): the node is not drained" >&2
    exit 0
    ;;
esac
# scontrol's reason is one line; keep it short
reason=$(printf '%s' "$reason" | tr -d '\n"' | cut -c1-200)
echo "tandem-slurm-check: draining $node: $reason" >&2
"$scontrol" update nodename="$node" state=drain reason="$reason" ||
    echo "tandem-slurm-check: scontrol could not drain $node" >&2
[ "$mode" = prolog ] && exit 1   # the job is requeued, not started on this node
exit 0
