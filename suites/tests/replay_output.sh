#!/bin/sh
# replay_output.sh — what `bench replay` prints (issue 32, item 5): by default only failures, the
# worst error/bound per op and dtype and a last line (counts, wall time, worst case); --verbose
# every case's line too; --quiet failures and the last line only.
#   default: over every golden case, exit 0, no PASS line, one table row per op, the last line
#            "replay on cpu: N passed, 0 failed, 0 bad input in T s; worst ratio R (FILE)";
#   verbose: the same cases, N PASS lines, then the same table and last line;
#   failing: two planted failures (bench conform --plant-error) and one good case: their FAIL lines
#            and no PASS line, their table cells marked "!", "1 passed, 2 failed", exit 1; with
#            --quiet the same FAIL lines and last line without the table;
#   --quiet with --verbose: exit 2.
# usage: replay_output.sh BENCH CASES_DIR TMP_DIR
bench=$1 cases=$2 tmp=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$tmp" && mkdir -p "$tmp" || exit 1
n=$(ls "$cases"/*.safetensors | wc -l)
ops=$(ls "$cases"/*.safetensors | sed 's#.*/##; s/-.*//' | sort -u | wc -l)
last_re="^replay on cpu: $n passed, 0 failed, 0 bad input in [0-9]+\.[0-9]+ s; worst ratio [0-9.e+-]+ \(.*\.safetensors\)$"

# default
"$bench" replay "$cases"/*.safetensors > "$tmp/default.out" 2>&1
rc=$?
tail -n 3 "$tmp/default.out"
[ "$rc" = 0 ] || fail "default: exit $rc"
! grep -q '^PASS ' "$tmp/default.out" || fail "default: PASS lines printed ($(grep -c '^PASS ' "$tmp/default.out"))"
grep -q '^worst error/bound per op and dtype' "$tmp/default.out" || fail "default: no table"
rows=$(sed -n '/^worst error\/bound/,/^replay on/p' "$tmp/default.out" | grep -cE '^  [a-z_0-9]+ +[-0-9]')
[ "$rows" = "$ops" ] || fail "default: $rows table rows for $ops ops"
tail -n 1 "$tmp/default.out" | grep -qE "$last_re" || fail "default: last line: $(tail -n 1 "$tmp/default.out")"
lines=$(wc -l < "$tmp/default.out")
[ "$lines" -le $((ops + 3)) ] || fail "default: $lines lines for $ops ops"

# verbose
"$bench" replay --verbose "$cases"/*.safetensors > "$tmp/verbose.out" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "verbose: exit $rc"
p=$(grep -c '^PASS .* ratio ' "$tmp/verbose.out")
[ "$p" = "$n" ] || fail "verbose: $p PASS lines for $n cases"
grep -q '^worst error/bound per op and dtype' "$tmp/verbose.out" || fail "verbose: no table"
tail -n 1 "$tmp/verbose.out" | grep -qE "$last_re" || fail "verbose: last line: $(tail -n 1 "$tmp/verbose.out")"

# failing cases among a passing one
"$bench" conform --ops relu,matmul --dtypes f16 --cases 1 --seed 1 --plant-error --failures "$tmp/planted" \
    > "$tmp/conform.out" 2>&1
[ -f "$tmp/planted/relu-f16-s1-i0.safetensors" ] && [ -f "$tmp/planted/matmul-f16-s1-i0.safetensors" ] ||
    fail "conform --plant-error wrote no failing cases ($tmp/conform.out)"
good=$cases/relu-f32-odd.safetensors
"$bench" replay "$tmp"/planted/*.safetensors "$good" > "$tmp/failing.out" 2>&1
rc=$?
cat "$tmp/failing.out"
[ "$rc" = 1 ] || fail "failing: exit $rc, want 1"
[ "$(grep -c '^FAIL .*over its bound' "$tmp/failing.out")" = 2 ] || fail "failing: want 2 FAIL lines"
! grep -q '^PASS ' "$tmp/failing.out" || fail "failing: a PASS line without --verbose"
grep -qE '^  matmul +- +[0-9.e+]+!$' "$tmp/failing.out" || fail "failing: matmul's f16 cell not marked !"
grep -qE '^  relu +[0-9.]+ +[0-9.e+]+!$' "$tmp/failing.out" || fail "failing: relu's row"
tail -n 1 "$tmp/failing.out" | grep -qE '^replay on cpu: 1 passed, 2 failed, 0 bad input in .*planted/' ||
    fail "failing: last line"
"$bench" replay --quiet "$tmp"/planted/*.safetensors "$good" > "$tmp/quiet.out" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "quiet: exit $rc, want 1"
[ "$(grep -c '^FAIL ' "$tmp/quiet.out")" = 2 ] || fail "quiet: want 2 FAIL lines"
! grep -q '^worst error/bound' "$tmp/quiet.out" || fail "quiet: the table printed"
tail -n 1 "$tmp/quiet.out" | grep -q '^replay on cpu: 1 passed, 2 failed' || fail "quiet: last line"

"$bench" replay --quiet --verbose "$good" > "$tmp/both.out" 2>&1
rc=$?
[ "$rc" = 2 ] || fail "--quiet --verbose: exit $rc, want 2"
echo "replay output: default, verbose, failing and quiet as expected ($n cases, $ops ops)"
