#!/bin/sh
# test_peer.sh — the PyTorch peer (suites/peers/torch_peer.py, bench run --peer torch) end to end on
# the CPU with Debian's PyTorch (python3-torch, which CI installs: a python without torch fails
# these tests, it does not skip them).
#
# Usage: test_peer.sh script BENCH TEST_RUN PYTHON PEER_SCRIPT WORK TANDEM_QUICK_RUN
#          the peer alone in quick mode: a valid results directory (test_run), whose ops ids are
#          exactly those of tandem's quick ops run; bench report and bench compare read it
#        test_peer.sh run BENCH TEST_RUN PYTHON PEER_SCRIPT WORK
#          bench run --peer torch: both directories valid, the report's ratio table has every
#          ops benchmark with a ratio
#        test_peer.sh no_torch BENCH TEST_RUN PYTHON PEER_SCRIPT WORK
#          a python without torch: a message naming it, exit 2, tandem's results complete; a
#          python that does not exist, an unknown peer: exit 2 before anything runs
#        test_peer.sh cudnn_names BENCH TEST_RUN PYTHON PEER_SCRIPT WORK
#          the cudnn suite's benchmark ids (bench list in a CUDA build; the peer's --list needs
#          no GPU) are the same in tandem and in the peer, and include the step_ and new_shape_
#          benchmarks
set -u
mode=$1 bench=$2 test_run=$3 python=$4 script=$5 work=$6
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"

# benchmark,param,metric of a <suite>.csv, sorted (the ids and metrics a comparison lines up)
keys() { tail -n +2 "$1" | cut -d, -f2,3,5 | sort; }

case $mode in
cudnn_names)
  "$bench" list --suite cudnn >"$work/list.txt" || fail "bench list --suite cudnn failed"
  # bench list: "  NAME  UNIT  DESCRIPTION", then an indented line of the params
  awk '/^  [a-z]/ {name = $1; next}
       /^                          / {for (i = 1; i <= NF; i++) print "cudnn/" name "/" $i}' \
    "$work/list.txt" | sort >"$work/tandem.ids"
  "$python" "$script" --list --device cuda:0 --suite cudnn >"$work/peer.unsorted" ||
    fail "the peer's --list failed"
  sort "$work/peer.unsorted" >"$work/peer.ids"
  grep -q '^cudnn/step_widecnn_fp16_benchmark/batch:256$' "$work/tandem.ids" ||
    fail "tandem lists no step_widecnn_fp16_benchmark/batch:256"
  grep -q '^cudnn/new_shape_smallcnn/mode:1$' "$work/tandem.ids" ||
    fail "tandem lists no new_shape_smallcnn/mode:1"
  grep -q '^cudnn/conv_resnet18_layer1_3x3_fwd_fp16_nhwc/mode:1$' "$work/tandem.ids" ||
    fail "tandem lists no conv_resnet18_layer1_3x3_fwd_fp16_nhwc/mode:1 (NHWC layers)"
  diff "$work/tandem.ids" "$work/peer.ids" >"$work/diff.txt" ||
    fail "the cudnn ids differ (< tandem, > peer): $(head -n 6 "$work/diff.txt")"
  echo "ok: $(wc -l <"$work/tandem.ids") cudnn ids, the same in tandem and the peer"
  ;;
script)
  quick=$7
  "$python" -c 'import torch' || fail "$python has no torch: install python3-torch (.ci/deps)"
  "$python" "$script" --device cpu --quick --suite ops --out "$work/peer" || fail "the peer failed"
  "$test_run" "$work/peer" complete 3 || fail "the peer's directory is not a valid run"
  keys "$quick/ops.csv" >"$work/tandem.keys"
  keys "$work/peer/ops.csv" >"$work/peer.keys"
  [ -s "$work/tandem.keys" ] || fail "tandem's quick run has no ops rows"
  diff "$work/tandem.keys" "$work/peer.keys" || fail "the peer's ops ids differ from tandem's"
  "$bench" report --no-plots "$work/peer" >/dev/null || fail "bench report cannot read the peer's run"
  "$bench" compare "$quick" "$work/peer" >"$work/compare.txt"
  rc=$?
  cat "$work/compare.txt"
  [ $rc -le 1 ] || fail "bench compare exit $rc"
  n=$(wc -l <"$work/tandem.keys")
  grep -q "^$n compared" "$work/compare.txt" || fail "bench compare did not compare all $n"
  ! grep -q "^only in" "$work/compare.txt" || fail "benchmarks only in one run"
  # a bad argument: exit 2, nothing written
  "$python" "$script" --device cpu --quick --suite nosuch --out "$work/bad"
  [ $? -eq 2 ] || fail "--suite nosuch: want exit 2"
  [ ! -e "$work/bad/status.json" ] || fail "--suite nosuch wrote a run"
  ;;
run)
  "$bench" run --device cpu --quick --suite ops --peer torch --python "$python" \
    --peer-script "$script" --out "$work/both" || fail "bench run --peer torch failed"
  "$test_run" "$work/both" complete 3 || fail "tandem's directory is not a valid run"
  "$test_run" "$work/both/peer-torch" complete 3 || fail "the peer's directory is not a valid run"
  "$bench" report --no-plots "$work/both" >/dev/null || fail "bench report failed"
  md=$work/both/report.md
  grep -q "^## tandem and PyTorch" "$md" || fail "report.md has no tandem and PyTorch section"
  grep -q 'id="peer"' "$work/both/report.html" || fail "report.html has no peer section"
  for id in 'ops/matmul/n:64 | GFLOP/s' 'ops/add/n:1048576 | GB/s' \
            'ops/softmax/rows:256/cols:1024 | GB/s' \
            'ops/conv2d/n:4/c:16/hw:32/o:32/k:3 | GFLOP/s' 'ops/mlp\_train/batch:64 | samples/s'; do
    # | id | metric | tandem | PyTorch | unit | ratio | reading |: numbers in both, a ratio
    grep -F "| $id |" "$md" | grep -Eq '\| [0-9.e+-]+ \| [0-9.e+-]+ \| [^|]+ \| [0-9.e+-]+ \| tandem [0-9.]+x (faster|slower) \|' ||
      grep -F "| $id |" "$md" | grep -q '| same |' || fail "no ratio row for $id"
  done
  ! grep -q "no PyTorch result" "$md" || fail "the report says ids did not line up"
  ;;
no_torch)
  # A python without torch: Debian's own with site-packages off (-S).
  printf '#!/bin/sh\nexec %s -S "$@"\n' "$python" >"$work/python-no-torch"
  chmod +x "$work/python-no-torch"
  "$bench" run --device cpu --quick --suite ops --peer torch --python "$work/python-no-torch" \
    --peer-script "$script" --out "$work/nt" >"$work/out" 2>"$work/err"
  rc=$?
  cat "$work/err"
  [ $rc -eq 2 ] || fail "a python without torch: exit $rc, want 2"
  grep -q "cannot import torch" "$work/err" || fail "no message saying torch is missing"
  grep -q "tandem's results in $work/nt are complete" "$work/err" || fail "no word on tandem's results"
  "$test_run" "$work/nt" complete 3 || fail "tandem's results were not kept"
  [ ! -e "$work/nt/peer-torch/status.json" ] || fail "a peer run was written"
  # Checked before anything runs: exit 2, nothing written.
  for args in "--python $work/no-such-python" "--peer tensorflow" "--peer-script $work/none.py"; do
    "$bench" run --device cpu --quick --suite ops --peer torch $args --out "$work/early" 2>"$work/err2"
    rc=$?
    [ $rc -eq 2 ] || fail "$args: exit $rc, want 2"
    [ -s "$work/err2" ] || fail "$args: no message"
    [ ! -e "$work/early/status.json" ] || fail "$args: tandem ran anyway"
  done
  ;;
*) fail "unknown mode $mode" ;;
esac
echo "ok: $mode"
