#!/bin/sh
# counters_report.sh — `bench counters` on a counters file written by hand (the emulated device's
# format, docs/EMULATION.md "Counters"): the roofline worked out by hand from
# suites/check/expectations.json (A100 SXM4 80GB: 2039 GB/s, 312 dense bf16 TFLOP/s; H100 SXM5:
# 3350 GB/s, 989.5), the efficiencies, the offenders, PREDICTED on every figure, the JSON beside;
# and bad files refused with exit 2, nothing written.
# usage: counters_report.sh BENCH DIR
set -u
B=$1 DIR=$2
rm -rf "$DIR" && mkdir -p "$DIR" || exit 1
mem() {   # requests sectors bytes_requested bytes_unique
  printf '{"requests": %s, "sectors": %s, "sectors_per_request": 0, "bytes_requested": %s, "bytes_unique": %s}' "$1" "$2" "$3" "$4"
}
sh() {    # requests wavefronts conflicts max_ways
  printf '{"requests": %s, "wavefronts": %s, "bank_conflicts": %s, "max_ways": %s, "bytes_requested": 0}' "$1" "$2" "$3" "$4"
}
kernel() {   # name launches ld st shld shst mma
  printf '{"name": "%s", "launches": %s, "blocks": 1, "threads": 32, "global_load": %s, "global_store": %s, "shared_load": %s, "shared_store": %s, "atomics": {"global": 0, "shared": 0}, "tensor_core": {"mma": %s, "flops": %s, "ldmatrix": 0, "ldmatrix_shared": %s, "cp_async": 0}}' \
    "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$(($7 * 4096))" "$(sh 0 0 0 0)"
}
# k_stream: 2 MB through HBM, every sector used: 2e6 / 2039e9 s = 0.98 us, / 3350e9 = 0.60 us.
# k_gemm: 1e6 mma = 4.096 GFLOP: / 312e12 = 13.13 us, / 989.5e12 = 4.14 us; 2 conflicts a request.
# k_strided: loads use a quarter of their sectors (12800 bytes in 1600 sectors).
{
  printf '{"what": "written by hand", "kernels": ['
  kernel k_stream 2 "$(mem 100 400 12800 1000000)" "$(mem 100 400 12800 1000000)" "$(sh 0 0 0 0)" "$(sh 0 0 0 0)" 0
  printf ', '
  kernel k_gemm 1 "$(mem 10 40 1280 1000)" "$(mem 0 0 0 0)" "$(sh 32 96 64 4)" "$(sh 0 0 0 0)" 1000000
  printf ', '
  kernel k_strided 1 "$(mem 50 1600 12800 12800)" "$(mem 0 0 0 0)" "$(sh 0 0 0 0)" "$(sh 0 0 0 0)" 0
  printf ']}\n'
} >"$DIR/c.json"
"$B" counters --json "$DIR/pred.json" "$DIR/c.json" >"$DIR/out.txt" 2>&1 || { echo "bench counters failed"; cat "$DIR/out.txt"; exit 1; }
cat "$DIR/out.txt"
fail() { echo "FAIL: $*"; exit 1; }
grep -q '^PREDICTED from counts on the emulated CUDA device' "$DIR/out.txt" || fail "no PREDICTED header"
grep -Eq '^k_gemm .* 13\.13 +4\.14$' "$DIR/out.txt" || fail "k_gemm's roofline is not 13.13 / 4.14 us"
grep -Eq '^k_stream .* 100% +100% .* 2\.000 +0\.98 +0\.60$' "$DIR/out.txt" || fail "k_stream's row"
grep -Eq '^k_strided .* 25% .*' "$DIR/out.txt" || fail "k_strided's load efficiency is not 25%"
grep -Eq '^total .* 14\.12 +4\.74  \(PREDICTED\)$' "$DIR/out.txt" || fail "the total"
grep -q '1\. k_gemm: 4\.14 us PREDICTED on an H100 (87% of the total); 2\.00 bank conflicts a shared request (up to 4-way)$' "$DIR/out.txt" || fail "offender 1"
grep -q '2\. k_strided: .*loads use 25% of their sectors$' "$DIR/out.txt" || fail "offender 2"
grep -q '3\. k_stream: .*its accesses use what they move$' "$DIR/out.txt" || fail "offender 3"
grep -q '"predicted":[[:space:]]*true' "$DIR/pred.json" || fail "the JSON does not say predicted"
grep -q '"predicted_us H100 SXM5":[[:space:]]*4\.1' "$DIR/pred.json" || fail "the JSON's H100 prediction"
# Budgets: within them exit 0; a kernel past one, or one that did not run, exit 1 naming it; a
# budget file that is not one exit 2.
printf '{"format": "tandem-counter-budgets/1", "kernels": [{"name": "k_stream", "min_load_efficiency": 1, "min_store_efficiency": 1, "max_shared_conflicts": 0}, {"name": "k_gemm", "max_shared_conflicts": 2}]}' >"$DIR/ok.budget"
"$B" counters --top 0 --budget "$DIR/ok.budget" "$DIR/c.json" >"$DIR/b.txt" 2>&1 || fail "a budget kept exits $?: $(cat "$DIR/b.txt")"
grep -q 'BUDGET ok   k_gemm' "$DIR/b.txt" || fail "no BUDGET ok line"
printf '{"format": "tandem-counter-budgets/1", "kernels": [{"name": "k_strided", "min_load_efficiency": 0.5}, {"name": "k_gemm", "max_shared_conflicts": 1.5}, {"name": "k_gone"}]}' >"$DIR/past.budget"
"$B" counters --top 0 --budget "$DIR/past.budget" "$DIR/c.json" >"$DIR/b.txt" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "budgets past: exit $rc, want 1"
grep -q 'BUDGET FAIL k_strided: load efficiency 0.250 < 0.500$' "$DIR/b.txt" || fail "k_strided's budget: $(cat "$DIR/b.txt")"
grep -q 'BUDGET FAIL k_gemm: 2.000 bank conflicts a shared request > 1.500$' "$DIR/b.txt" || fail "k_gemm's budget"
grep -q 'BUDGET FAIL k_gone: did not run' "$DIR/b.txt" || fail "a kernel that did not run"
for bad in '{"kernels": []}' '{"format": "tandem-counter-budgets/1", "kernels": [{"name": "k", "min_load_efficiency": "x"}]}' 'nope'; do
  printf '%s' "$bad" >"$DIR/bad.budget"
  "$B" counters --budget "$DIR/bad.budget" "$DIR/c.json" >"$DIR/b.txt" 2>&1
  rc=$?
  [ $rc -eq 2 ] && grep -q 'bench counters: --budget' "$DIR/b.txt" || fail "budget file $bad: exit $rc, want 2"
done
# Refused: no file, not JSON, not counters, a field missing; nothing written.
printf '{"kernels": [{"name": "k", "launches": 1}]}' >"$DIR/missing.json"
printf 'not json' >"$DIR/bad.json"
printf '{"x": 1}' >"$DIR/other.json"
for f in "$DIR/none.json" "$DIR/bad.json" "$DIR/other.json" "$DIR/missing.json"; do
  rm -f "$DIR/p2.json"
  "$B" counters --json "$DIR/p2.json" "$f" >"$DIR/err.txt" 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "exit $rc for $f, want 2: $(cat "$DIR/err.txt")"
  grep -q "bench counters: " "$DIR/err.txt" || fail "no message for $f"
  [ ! -e "$DIR/p2.json" ] || fail "wrote --json for $f"
done
echo PASS
