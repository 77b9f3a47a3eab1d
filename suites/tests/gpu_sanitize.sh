#!/bin/sh
# gpu_sanitize.sh — `cmake --build build --target gpu-sanitize`: the gpu-labelled ctest tests and
# `bench conform --device cuda:0` under compute-sanitizer's memcheck and racecheck (following
# child processes), logs in LOGDIR. Fails with one clear line when there is no compute-sanitizer,
# no CUDA backend or no GPU: it was asked for explicitly, so it must not pass vacuously.
# usage: gpu_sanitize.sh BENCH BUILD_DIR LOGDIR CUDA_BIN_DIR CUDA_ON
bench=$1 build=$2 logdir=$3 cudabin=$4 cuda_on=$5
fail() { echo "gpu-sanitize: $*" >&2; exit 1; }

case "$cuda_on" in ON|1|TRUE|true) ;; *) fail "tandem was built without the CUDA backend (TDM_CUDA=OFF)";; esac
cs=""
for c in "$cudabin/compute-sanitizer" "$(command -v compute-sanitizer 2>/dev/null)"; do
  [ -n "$c" ] && [ -x "$c" ] && { cs=$c; break; }
done
[ -n "$cs" ] || fail "compute-sanitizer not found (looked in $cudabin and PATH)"
probe=$("$bench" conform --device cuda:0 --cases 0 2>&1)
case "$probe" in *'no CUDA device'*|*'no CUDA backend'*) fail "no GPU: $(echo "$probe" | head -n1)";; esac

mkdir -p "$logdir" || fail "cannot create $logdir"
status=0
for tool in memcheck racecheck; do
  echo "gpu-sanitize: $tool over ctest -L gpu (log: $logdir/$tool-ctest.log)"
  "$cs" --tool "$tool" --target-processes all --error-exitcode 86 --log-file "$logdir/$tool-ctest.log" \
    ctest --test-dir "$build" -L gpu --output-on-failure > "$logdir/$tool-ctest.out" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { echo "gpu-sanitize: $tool ctest: exit $rc (see $logdir/$tool-ctest.*)"; status=1; }
  echo "gpu-sanitize: $tool over bench conform --device cuda:0 (log: $logdir/$tool-conform.log)"
  "$cs" --tool "$tool" --error-exitcode 86 --log-file "$logdir/$tool-conform.log" \
    "$bench" conform --device cuda:0 --cases 2 --seed 3 --quiet --failures "$logdir/conform-failures" \
    > "$logdir/$tool-conform.out" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { echo "gpu-sanitize: $tool conform: exit $rc (see $logdir/$tool-conform.*)"; status=1; }
done
[ $status -eq 0 ] && echo "gpu-sanitize: memcheck and racecheck clean (logs in $logdir)"
exit $status
