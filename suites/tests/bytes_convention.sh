#!/bin/sh
# bytes_convention.sh BENCH DIR [PYTHON PEER_SCRIPT] — one way of counting bytes per metric
# (docs/RESULTS_FORMAT.md "Bytes and GB/s", issue 32): a copy within one memory reports GB/s of the
# bytes read + written (the cpu's transfer rows, host memcpys: GB/s x time = 2 x bytes), a copy
# across the link link_GB/s of the bytes that cross it (cuda's h2d/d2h/bidir; `bench list` shows
# it without a GPU), the reductions GB/s (not bytes/s); no dram_GB/s beside a GB/s. With PYTHON
# and PEER_SCRIPT, the PyTorch peer's transfer rows count the same bytes under the same names.
B=$1 D=$2 PY=$3 PEER=$4
fail=0
no() { echo "FAIL: $*"; fail=1; }
rm -rf "$D" && mkdir -p "$D" || exit 1
"$B" run --device cpu --quick --suite transfer --filter '^(d2d|h2d_pinned)/bytes:1048576/' \
    --repetitions 1 --min-time 0.01 --out "$D/run" >/dev/null || no "bench run failed"
# GB/s x time(ns) / 1e9 = the bytes counted (GB) x 1e9 / 1e9: 2 x 1 MiB read + written
for b in d2d h2d_pinned; do
    awk -F, -v b=$b '$2 == b && $5 == "GB/s" { g = $7 } $2 == b && $5 == "time" { t = $7 }
        END { if (g == "" || t == "") { print "no GB/s or time row for " b; exit 1 }
              bytes = g * t; want = 2 * 1048576
              if (bytes < want * 0.999 || bytes > want * 1.001) {
                  print b ": GB/s x time = " bytes " bytes, want " want " (read + written)"; exit 1 } }' \
        "$D/run/transfer.csv" || fail=1
done
grep -q 'dram_GB/s' "$D/run/transfer.csv" && no "a dram_GB/s row beside GB/s"
"$B" list --device cuda:0 --suite transfer,reductions > "$D/list.txt" 2>&1
for want in 'h2d_pinned +link_GB/s' 'd2h_pageable +link_GB/s' 'bidir_pinned_async +link_GB/s' \
            'd2d +GB/s' 'd2d_kernel +GB/s' 'copy_d2d +GB/s' 'batch_norm2d_fwd +GB/s'; do
    grep -Eq "^ +$want( |\$)" "$D/list.txt" || no "bench list: no line '$want'"
done
grep -q 'bytes/s' "$D/list.txt" && no "bench list still shows bytes/s"
if [ -n "$PY" ] && ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "note: $PY has no torch: the peer's rows not checked"
elif [ -n "$PY" ]; then
    "$PY" "$PEER" --device cpu --quick --suite transfer --filter 'd2d/bytes:1048576$' \
        --repetitions 1 --min-time 0.01 --out "$D/peer" >/dev/null 2>&1 || no "the peer failed"
    awk -F, '$2 == "d2d" && $5 == "GB/s" { g = $7 } $2 == "d2d" && $5 == "time" { t = $7 }
        END { bytes = g * t; if (bytes < 2 * 1048576 * 0.999 || bytes > 2 * 1048576 * 1.001) {
              print "peer d2d: GB/s x time = " bytes " bytes, want 2 MiB"; exit 1 } }' \
        "$D/peer/transfer.csv" || fail=1
fi
[ $fail -eq 0 ] && echo "bytes_convention: ok"
exit $fail
