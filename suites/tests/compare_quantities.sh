#!/bin/sh
# compare_quantities.sh BENCH DIR — bench compare judges quantities apart from speeds (issue 32):
# amp's loss_vs_f32 (a signed difference near zero) and scaling's efficiency (a ratio) are never
# "suspect" nor faster/slower. A run against itself is all same, exit 0 (-3.672e-05 against
# -3.672e-05 was "a change by 10x or more"); a loss_vs_f32 that moves from -3.672e-05 to +0.002
# and an efficiency 20x lower are "higher" and "lower", exit 0; a rate 20x lower stays suspect,
# exit 1. 9 repetitions a side, so that a change can be significant.
B=$1 D=$2
rm -rf "$D" && mkdir -p "$D/a" "$D/b" "$D/c" || exit 1
row() { for r in 0 1 2 3 4 5 6 7 8; do echo "$1,$r,$2"; done; }
run() {   # LOSS_VS_F32 RATE EFFICIENCY
    echo suite,benchmark,param,x,metric,unit,repetition,value
    row amp,train_f32,batch:64,64,loss_vs_f32,nats "$1"
    row amp,train_f32,batch:64,64,samples/s,samples/s "$2"
    row amp,train_f32,batch:64,64,time,ns 1000
    row scaling,dp,ranks:2,2,efficiency,ratio "$3"
}
run -3.672e-05 100 0.9 > "$D/a/x.samples.csv"
run 0.002 100 0.045 > "$D/b/x.samples.csv"
run -3.672e-05 5 0.9 > "$D/c/x.samples.csv"
fail=0
expect() {   # WHAT WANT_RC OUT RC PATTERN...
    what=$1 want=$2 out=$3 rc=$4
    shift 4
    [ "$rc" -eq "$want" ] || { echo "$what: exit $rc, want $want"; fail=1; }
    for p in "$@"; do
        echo "$out" | grep -Eq "$p" || { echo "$what: no line matching '$p'"; fail=1; }
    done
}
out=$("$B" compare "$D/a" "$D/a" 2>&1); rc=$?
echo "$out"
expect "itself" 0 "$out" $rc '^4 compared: 0 slower, 0 faster, 4 same$'
out=$("$B" compare "$D/a" "$D/b" 2>&1); rc=$?
echo "$out"
expect "quantities moved" 0 "$out" $rc 'loss_vs_f32 \(nats\) .* higher$' \
    'efficiency \(ratio\) .* lower$' '^4 compared: 0 slower, 0 faster, 2 same, 2 higher or lower'
echo "$out" | grep -Eq "  suspect$|^SUSPECT" && { echo "quantities moved: called suspect"; fail=1; }
out=$("$B" compare "$D/a" "$D/c" 2>&1); rc=$?
echo "$out"
expect "rate 20x lower" 1 "$out" $rc 'samples/s .* suspect$' '1 suspect'
[ $fail -eq 0 ] && echo "compare_quantities: ok"
exit $fail
