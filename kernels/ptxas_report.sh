#!/bin/sh
# ptxas_report.sh — the CUDA build's compiler launcher (CMAKE_CUDA_COMPILER_LAUNCHER): runs the
# compile it is given with ptxas's resource report (-Xptxas=-v) and keeps the report beside the
# object as <object>.ptxas: per kernel and GPU architecture its registers, stack frame, spill
# stores and loads, shared memory (docs/EMULATION.md "Resources", bench counters --ptxas).
# Everything else the compiler says goes to stderr as before; the status is the compile's.
out=
prev=
compile=0
for a in "$@"; do
  [ "$prev" = "-o" ] && out=$a
  [ "$a" = "-c" ] && compile=1
  prev=$a
done
[ $compile -eq 1 ] && [ -n "$out" ] || exec "$@"   # not a compile (a link): as it is
log="$out.ptxas.log"
"$@" -Xptxas=-v 2>"$log"
rc=$?
grep -v -e '^ptxas info' -e '^    [0-9]* bytes stack frame' "$log" >&2
if [ $rc -eq 0 ]; then
  grep -e '^ptxas info' -e '^    [0-9]* bytes stack frame' "$log" >"$out.ptxas.new" || true
  mv "$out.ptxas.new" "$out.ptxas"
fi
rm -f "$log"
exit $rc
