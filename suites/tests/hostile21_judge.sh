#!/bin/sh
# hostile21_judge.sh WORK HEALTHY EXPECTATIONS — writes under WORK the hostile inputs of
# hostile21_judge.cmake (issue 21, items 4, 6 and 10): figures files that cannot be true or were
# not measured (from the recorded healthy node HEALTHY), expectations files that are absurd or read
# differently by different JSON readers (from EXPECTATIONS), and results directories for
# `bench compare` whose change is too large to be real or that are emulated runs in disguise.
set -e
w=$1 healthy=$2 expect=$3
rm -rf "$w"
mkdir -p "$w/fig" "$w/exp" "$w/cmp"

# ---- figures (bench check --from-figures) ----------------------------------------------------
f=$w/fig
# a copy at 100 TB/s on an A100 SXM4 80GB (2039 GB/s): a ratio of 49
sed 's/"value": 1750,/"value": 100000,/' "$healthy" > "$f/d2d-100tbs.json"
sed -E 's/"value": [0-9.]+/"value": 1e300/' "$healthy" > "$f/all-1e300.json"
sed 's/"value": 1750,/"value": 1e999,/' "$healthy" > "$f/value-inf.json"
sed 's/"value": 1750,/"value": null,/' "$healthy" > "$f/value-null.json"
# "memory.d2d": {} in place of the first GPU's figure
awk '/"memory.d2d": \{/ && !done { print "    \"memory.d2d\": {},"; skip = 1; done = 1; next }
     skip && /^    \}/ { skip = 0; next } !skip' "$healthy" > "$f/figure-empty.json"
sed 's/"throttle_reasons": 4,/"throttle_reasons": 1e30,/' "$healthy" > "$f/throttle-1e30.json"
sed 's/"remapped_rows_failed": 0,/"remapped_rows_failed": 2,/' "$healthy" > "$f/remap-failed-2.json"
sed 's/"temperature_c": 55,/"temperature_c": -300,/' "$healthy" > "$f/temp-minus-300.json"
sed 's/"pcie_gen": 4,/"pcie_gen": 9,/; s/"pcie_width": 16,/"pcie_width": 64,/; s/"pcie_gen_max": 4,/"pcie_gen_max": 9,/; s/"pcie_width_max": 16,/"pcie_width_max": 64,/' \
    "$healthy" > "$f/link-gen9-x64.json"
# a GPU with only one check present
cat > "$f/one-check.json" <<'EOF'
{"format": "tandem-check-figures/1",
 "gpus": [{"index": 0, "device": "cuda:0", "name": "NVIDIA A100-SXM4-80GB", "emulated": false,
           "figures": {"memory.d2d": {"value": 1750, "unit": "GB/s"}}}],
 "host": {"numerics": {"reference.golden": {"result": "pass"}}}}
EOF
# the same key twice: cJSON reads the first (PASS), other readers the last
sed 's/"value": 1750,/"value": 1750, "value": 1,/' "$healthy" > "$f/duplicate-key.json"
{ cat "$healthy"; echo '{"gpus": []}'; } > "$f/trailing.json"

# ---- expectations (bench check --expect) -----------------------------------------------------
e=$w/exp
sed '0,/"bf16": 312,/s//"bf16": 1e999,/' "$expect" > "$e/tflops-inf.json"
sed '0,/"pcie_gen": 4,/s//"pcie_gen": 99,/' "$expect" > "$e/pcie-gen-99.json"
sed '0,/"pcie_width": 16,/s//"pcie_width": 0.5,/' "$expect" > "$e/pcie-width-half.json"
sed 's/"hbm_GBps": 2039,/"hbm_GBps": 20390, "hbm_GBps": 2039,/' "$expect" > "$e/duplicate-key.json"
{ cat "$expect"; echo 'garbage'; } > "$e/trailing.json"
sed 's/What each GPU/What \xff each GPU/' "$expect" > "$e/bad-utf8.json"
sed 's/"model": "A100 SXM4 80GB"/"model": "   "/' "$expect" > "$e/model-spaces.json"

# ---- results directories (bench compare) ---------------------------------------------------
c=$w/cmp
ctx() {   # ctx DIR DEVICE [ENV]: a context.json
    printf '{"format": "tandem-results/1", "device": "%s", "env": {"host": "n%s"%s}}\n' \
        "$2" "$(basename "$1")" "${3:-}" > "$1/context.json"
}
samples() {   # samples DIR VALUE [EXTRA-COLUMN-HEADER EXTRA-VALUE] [FILE]: 9 repetitions
    out=$1/${5:-ops.samples.csv}
    echo "suite,benchmark,param,x,metric,unit,repetition,value${3:+,$3}" > "$out"
    for r in 0 1 2 3 4 5 6 7 8; do
        echo "ops,copy,n:1,1,GB/s,GB/s,$r,$(awk "BEGIN { print $2 * (1 + $r / 1000) }")${3:+,$4}" >> "$out"
    done
}
for d in base huge node1 node2 node3 node4; do mkdir -p "$c/$d"; ctx "$c/$d" cpu; done
samples "$c/base" 1
samples "$c/huge" 10000    # +999900 %
samples "$c/node1" 10
samples "$c/node2" 10.1
samples "$c/node3" 10.2
samples "$c/node4" 1e7     # a fleet member a million times the others
# emulated runs that said so in ways the detection missed
for d in cuda-all csv-upper csv-one hidden-samples dup-key; do mkdir -p "$c/$d"; done
ctx "$c/cuda-all" cuda:all ', "gpus": [{"index": 0, "emulated": true}, {"index": 1, "emulated": true}]'
samples "$c/cuda-all" 1
ctx "$c/csv-upper" cpu && samples "$c/csv-upper" 1 emulated TRUE
ctx "$c/csv-one" cpu && samples "$c/csv-one" 1 emulated 1
ctx "$c/hidden-samples" cpu && samples "$c/hidden-samples" 1
samples "$c/hidden-samples" 1 emulated true .x.samples.csv
printf '{"format": "tandem-results/1", "device": "cuda:0", "emulated": false, "emulated": true}\n' \
    > "$c/dup-key/context.json"
samples "$c/dup-key" 1
echo "hostile inputs written under $w"
