#!/bin/sh
# resources_report.sh — `bench resources` on ptxas reports written by hand (the lines nvcc
# -Xptxas=-v prints, as kernels/ptxas_report.sh keeps them): registers, stack, spills, shared
# memory, the occupancy worked out by hand; spill budgets kept and broken; bad input exit 2.
# usage: resources_report.sh BENCH DIR
set -u
B=$1 DIR=$2
rm -rf "$DIR" && mkdir -p "$DIR/r" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
# k_a<float>: 54 registers: 1792 a warp (56 x 32, rounded to 256), 36 warps of 64 per SM; at 128
#   threads (4 warps) 9 blocks = 36 warps; at 256, 4 blocks = 32; at 512, 2 blocks = 32.
# k_b<64>: 255 registers (8192 a warp: 8 warps), 40000 bytes of shared memory (A100: 167936 /
#   41024 = 4 blocks); spills 20 + 24 bytes on sm_90 only.
cat >"$DIR/r/k.cu.o.ptxas" <<'EOT'
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3k_aIfEvPf' for 'sm_80'
ptxas info    : Function properties for _Z3k_aIfEvPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 54 registers, used 0 barriers, 360 bytes cmem[0]
ptxas info    : Compile time = 1.0 ms
ptxas info    : Compiling entry function '_Z3k_bILi64EEvPf' for 'sm_90'
ptxas info    : Function properties for _Z3k_bILi64EEvPf
    48 bytes stack frame, 20 bytes spill stores, 24 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 48 bytes cumulative stack size, 40000 bytes smem, 360 bytes cmem[0]
ptxas info    : Compiling entry function '_Z3k_bILi64EEvPf' for 'sm_80'
ptxas info    : Function properties for _Z3k_bILi64EEvPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 40000 bytes smem, 360 bytes cmem[0]
EOT
"$B" resources "$DIR/r" >"$DIR/out.txt" 2>&1 || fail "bench resources: $(cat "$DIR/out.txt")"
cat "$DIR/out.txt"
grep -Eq '^k_a<float>\(float\*\) +80 +54 +0 +0 +0  36/32/32 A100$' "$DIR/out.txt" || fail "k_a's row"
grep -Eq '^k_b<64>\(float\*\) +80 +255 +0 +0 +40000   8/ 8/ 0 A100$' "$DIR/out.txt" || fail "k_b on sm_80"
grep -Eq '^k_b<64>\(float\*\) +90 +255 +48 +44 +40000   8/ 8/ 0 H100$' "$DIR/out.txt" || fail "k_b on sm_90"
printf '{"format": "tandem-ptxas-budgets/1", "kernels": [{"match": "k_a<", "max_spill_bytes": 0}, {"match": "k_b<", "max_spill_bytes": 44}]}' >"$DIR/ok.json"
"$B" resources --budget "$DIR/ok.json" "$DIR/r" >"$DIR/b.txt" 2>&1 || fail "a budget kept exits $?"
printf '{"format": "tandem-ptxas-budgets/1", "kernels": [{"match": "k_b<", "max_spill_bytes": 0}, {"match": "k_gone"}]}' >"$DIR/bad1.json"
"$B" resources --budget "$DIR/bad1.json" "$DIR/r" >"$DIR/b.txt" 2>&1
[ $? -eq 2 ] || fail "a budget entry without max_spill_bytes is not refused"
printf '{"format": "tandem-ptxas-budgets/1", "kernels": [{"match": "k_b<", "max_spill_bytes": 0}, {"match": "k_gone", "max_spill_bytes": 0}]}' >"$DIR/past.json"
"$B" resources --budget "$DIR/past.json" "$DIR/r" >"$DIR/b.txt" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "budget past: exit $rc, want 1"
grep -q 'BUDGET FAIL k_b<64>(float\*) (sm_90): 44 bytes spilled (20 stored, 24 loaded) > 0$' "$DIR/b.txt" || fail "k_b's spills: $(cat "$DIR/b.txt")"
grep -q 'BUDGET FAIL k_gone: no kernel of the report matches' "$DIR/b.txt" || fail "a budget matching nothing"
mkdir -p "$DIR/empty"
"$B" resources "$DIR/empty" >"$DIR/e.txt" 2>&1
[ $? -eq 2 ] && grep -q 'no ptxas report' "$DIR/e.txt" || fail "a folder without reports: $(cat "$DIR/e.txt")"
"$B" resources "$DIR/none" >"$DIR/e.txt" 2>&1
[ $? -eq 2 ] || fail "a missing folder is not exit 2"
echo PASS
