# peer.cmake — the PyTorch peer (docs/PEERS.md) end to end on the CPU: the script alone in quick mode
# against tandem's quick ops run, `bench run --peer torch` with its report, and a python without
# torch. They use Debian's PyTorch at /usr/bin/python3 (python3-torch, in .ci/deps): without it
# they FAIL, they do not skip. A few seconds in all; under ASan only bench is instrumented (the
# peer is python), so they run there too.
set(PEER_PYTHON /usr/bin/python3 CACHE FILEPATH "the python with torch the peer tests use")
set(PEER_SCRIPT ${PROJECT_SOURCE_DIR}/suites/peers/torch_peer.py)
set(PEER_TEST ${CMAKE_CURRENT_SOURCE_DIR}/test_peer.sh)
set(QUICK_RUN ${TEST_TMP}/quick_run)
if(NOT TEST harness.quick_cpu_run)
  add_test(NAME harness.quick_cpu_run COMMAND sh -c
    "rm -rf ${QUICK_RUN} && $<TARGET_FILE:bench> run --device cpu --quick --suite ops --out ${QUICK_RUN}")
  set_tests_properties(harness.quick_cpu_run PROPERTIES FIXTURES_SETUP quick_cpu_run TIMEOUT 300)
endif()
# test_run (run.cmake's) checks a results directory against docs/RESULTS_FORMAT.md.
add_test(NAME peer.script_quick_cpu COMMAND sh ${PEER_TEST} script $<TARGET_FILE:bench>
         $<TARGET_FILE:test_run> ${PEER_PYTHON} ${PEER_SCRIPT} ${TEST_TMP}/peer/script ${QUICK_RUN})
set_tests_properties(peer.script_quick_cpu PROPERTIES FIXTURES_REQUIRED quick_cpu_run TIMEOUT 120)
add_test(NAME peer.bench_run_peer_torch COMMAND sh ${PEER_TEST} run $<TARGET_FILE:bench>
         $<TARGET_FILE:test_run> ${PEER_PYTHON} ${PEER_SCRIPT} ${TEST_TMP}/peer/run)
add_test(NAME peer.python_without_torch COMMAND sh ${PEER_TEST} no_torch $<TARGET_FILE:bench>
         $<TARGET_FILE:test_run> ${PEER_PYTHON} ${PEER_SCRIPT} ${TEST_TMP}/peer/no_torch)
set_tests_properties(peer.bench_run_peer_torch peer.python_without_torch PROPERTIES TIMEOUT 120)
# The cudnn suite's ids in tandem and the peer (tandem registers them in CUDA builds only).
if(TDM_CUDA)
  add_test(NAME peer.cudnn_names COMMAND sh ${PEER_TEST} cudnn_names $<TARGET_FILE:bench>
           $<TARGET_FILE:test_run> ${PEER_PYTHON} ${PEER_SCRIPT} ${TEST_TMP}/peer/cudnn_names)
  set_tests_properties(peer.cudnn_names PROPERTIES TIMEOUT 60)
endif()
# Every cpu-capable suite the peer ports, quick, one short repetition: each of tandem's ids has
# its PyTorch counterpart and the reverse (the report counts those missing on either side), and
# the report has a ratio row for each (a renamed or resized benchmark on one side fails this).
add_test(NAME peer.cpu_suites_ids_match COMMAND sh -c
  "d=${TEST_TMP}/peer/all; rm -rf $d && $<TARGET_FILE:bench> run --device cpu --quick --suite ops,transfer,amp,cpu-vs-gpu --peer torch --python ${PEER_PYTHON} --repetitions 1 --min-time 0.01 --out $d >/dev/null 2>&1 || { echo 'bench run --peer torch failed'; exit 1; }; $<TARGET_FILE:bench> report $d >/dev/null || exit 1; if grep -i 'have no PyTorch result' $d/report.md; then exit 1; fi; n=$(grep -c 'tandem .*x \\(slower\\|faster\\)' $d/report.md); echo \"$n ratio rows\"; [ $n -ge 60 ]")
set_tests_properties(peer.cpu_suites_ids_match PROPERTIES TIMEOUT 300)
# A negative filter ("-REGEX": Google Benchmark's exclusion) reaches the peer as one word,
# --filter=-REGEX: handed as two words, argparse took "-REGEX" for an option and the peer exited 2
# (found on the first GPU session). Both sides must run the same benchmarks: none excluded runs.
add_test(NAME peer.negative_filter COMMAND sh -c
  "d=${TEST_TMP}/peer/negfilter; rm -rf $d && $<TARGET_FILE:bench> run --device cpu --quick --suite ops --filter -matmul --peer torch --python ${PEER_PYTHON} --repetitions 1 --min-time 0.01 --out $d >$d.log 2>&1 || { cat $d.log; exit 1; }; if grep -q matmul $d/ops.csv $d/peer-torch/ops.csv; then echo 'an excluded benchmark ran'; exit 1; fi; grep -c . $d/peer-torch/ops.csv")
set_tests_properties(peer.negative_filter PROPERTIES TIMEOUT 300)
# The transformer suite's ids in tandem and the peer, quick, on the cpu: every tandem benchmark has
# its PyTorch counterpart (the report counts none missing and has a ratio row for each), and the
# peer records its torch.compile rows as skipped with the reason where its torch has no compile
# (Debian's 1.13), never failed.
add_test(NAME peer.transformer_ids_match COMMAND sh -c
  "d=${TEST_TMP}/peer/transformer; rm -rf $d && mkdir -p ${TEST_TMP}/peer && $<TARGET_FILE:bench> run --device cpu --quick --suite transformer --peer torch --python ${PEER_PYTHON} --repetitions 1 --min-time 0.01 --out $d >$d.log 2>&1 || { cat $d.log; echo 'bench run --peer torch failed'; exit 1; }; $<TARGET_FILE:bench> report $d >/dev/null || exit 1; if grep '[1-9][0-9]* of tandem.s benchmarks have no PyTorch result' $d/report.md; then exit 1; fi; n=$(grep -c 'transformer/.*tandem .*x \\(slower\\|faster\\)' $d/report.md); echo \"$n ratio rows\"; [ $n -ge 21 ] || exit 1; ${PEER_PYTHON} -c 'import torch, sys; sys.exit(0 if hasattr(torch, \"compile\") else 1)' && exit 0; grep -q 'torch.compile unavailable' $d/peer-torch/status.json")
set_tests_properties(peer.transformer_ids_match PROPERTIES TIMEOUT 300)
# A row's name means the same work on both sides: tandem's `bench list --json` and the peer's
# `--list --json` describe what one timed iteration of each row does (dtype, shapes, batch,
# products or steps per iteration, FLOP/bytes/samples counted), and peer_work_match.py compares
# them for every row both sides have, on the cpu and the cuda registrations (listing needs no
# GPU), full and --quick. Nothing is timed: a second or two.
set(PEER_WORK_MATCH ${CMAKE_CURRENT_SOURCE_DIR}/peer_work_match.py)
add_test(NAME peer.work_match COMMAND sh -c
  "d=${TEST_TMP}/peer/work; rm -rf $d && mkdir -p $d || exit 1; rc=0; for dev in cpu cuda:0; do for q in '' --quick; do $<TARGET_FILE:bench> list --json --device $dev $q > $d/tandem.json || { echo \"bench list --json --device $dev $q failed\"; exit 1; }; ${PEER_PYTHON} ${PEER_SCRIPT} --list --json --skip-unknown-suites --device $dev $q > $d/peer.json 2>$d/peer.err || { cat $d/peer.err; exit 1; }; ${PEER_PYTHON} ${PEER_WORK_MATCH} $d/tandem.json $d/peer.json || rc=1; done; done; exit $rc")
set_tests_properties(peer.work_match PROPERTIES TIMEOUT 120)
# The checker itself: it fails on a row described on neither side, on one side only, on a
# different number and on a key one side lacks, and passes equal descriptions.
add_test(NAME peer.work_match_planted COMMAND ${PEER_PYTHON} ${PEER_WORK_MATCH} --self-test)
set_tests_properties(peer.work_match_planted PROPERTIES TIMEOUT 30)
# The peer's reductions, graphs, pipeline and scaling suites on the cpu, quick, 1 ms repetitions:
# every pipeline and scaling row tandem lists runs and passes its check (DataLoader workers, DDP
# over gloo in 2 rank processes), no other row appears, and the cuda-only suites (reductions,
# graphs) are skipped with the reason. Under a minute on 2 loaded cores (a few seconds idle).
add_test(NAME peer.new_suites_quick_cpu COMMAND sh -c
  "d=${TEST_TMP}/peer/new_suites; rm -rf $d && mkdir -p ${TEST_TMP}/peer || exit 1; $<TARGET_FILE:bench> list --json --device cpu --quick > $d.list.json || exit 1; ${PEER_PYTHON} ${PEER_SCRIPT} --device cpu --suite reductions,pipeline,scaling,graphs --quick --min-time 0.001 --out $d >$d.log 2>&1 || { cat $d.log; echo 'the peer failed'; exit 1; }; ${PEER_PYTHON} -c 'import json, sys; d = sys.argv[1]; s = json.load(open(d + \"/status.json\")); t = json.load(open(d + \".list.json\")); want = sorted(b[\"id\"] for x in t[\"suites\"] if x[\"name\"] in (\"pipeline\", \"scaling\") for b in x[\"benchmarks\"]); got = sorted(s[\"finished\"]); assert got == want, (\"rows differ from tandem\", sorted(set(got) ^ set(want))); assert s[\"complete\"] and not s[\"failed\"] and not s[\"unfinished\"], s; sk = {k[\"suite\"]: k[\"reason\"] for k in s[\"skipped\"] if \"benchmark\" not in k}; assert set(sk) == {\"reductions\", \"graphs\"} and all(\"cuda\" in r for r in sk.values()), sk; print(len(got), \"rows, skipped:\", sk)' $d")
set_tests_properties(peer.new_suites_quick_cpu PROPERTIES TIMEOUT 180)
# --append (bench run's per-suite interleaving): a second call adds its suite to the first's
# results directory (each suite its own files; status.json's lists merged), a call without
# --append is refused (exit 2), and so is --append onto a run of another device. The amp row
# also shows that the cpu records no peak_bytes and says so (PyTorch tracks no host peak).
add_test(NAME peer.append COMMAND sh -c
  "d=${TEST_TMP}/peer/append; rm -rf $d && mkdir -p ${TEST_TMP}/peer || exit 1; p='${PEER_PYTHON} ${PEER_SCRIPT} --device cpu --quick --repetitions 1 --min-time 0.005 --out '$d; $p --suite ops >$d.log 2>&1 || { cat $d.log; exit 1; }; if $p --suite transfer --filter h2d >>$d.log 2>&1; then echo 'a second call without --append was not refused'; exit 1; fi; $p --append --suite amp --filter 'train_mlp_1000_512_10_f32' >>$d.log 2>&1 || { cat $d.log; exit 1; }; ${PEER_PYTHON} -c 'import json, sys; d = sys.argv[1]; s = json.load(open(d + \"/status.json\")); suites = sorted(set(i.split(\"/\")[0] for i in s[\"finished\"])); assert suites == [\"amp\", \"ops\"], suites; assert len(s[\"finished\"]) == 6 and not s[\"failed\"] and not s[\"unfinished\"], s; assert all(\"peak_bytes\" not in l for l in open(d + \"/amp.csv\")); assert \"peak_bytes not measured on the cpu\" in open(d + \"/amp.json\").read(); assert open(d + \"/ops.csv\").read().count(\"\\n\") == 11' $d || exit 1; sed -i 's/\"device\": \"cpu\"/\"device\": \"cuda:0\"/' $d/context.json; if $p --append --suite transfer --filter h2d >>$d.log 2>&1; then echo '--append onto a run of another device was not refused'; exit 1; fi; grep -q 'not on cpu' $d.log")
# --budget SECONDS: no row starts once SECONDS have passed; each row not run is in status.json's
# skipped as {suite, benchmark, reason: "skipped for time"} (none silently absent, none in the
# CSVs), the exit is 0, and the run ends near the budget (2 s here; 3 s allowed for the last row
# and for a busy machine).
add_test(NAME peer.budget COMMAND sh -c
  "d=${TEST_TMP}/peer/budget; rm -rf $d && mkdir -p ${TEST_TMP}/peer || exit 1; t0=$(date +%s); ${PEER_PYTHON} ${PEER_SCRIPT} --device cpu --quick --suite ops,transfer,amp --repetitions 3 --min-time 0.05 --budget 2 --out $d >$d.log 2>&1 || { cat $d.log; echo 'exit not 0'; exit 1; }; t=$(( $(date +%s) - t0 )); echo \"$t s\"; [ $t -le 5 ] || { echo 'the budget was overrun'; exit 1; }; ${PEER_PYTHON} -c 'import json, sys; d = sys.argv[1]; s = json.load(open(d + \"/status.json\")); k = [x for x in s[\"skipped\"] if x[\"reason\"] == \"skipped for time\"]; print(len(s[\"finished\"]), \"finished,\", len(k), \"skipped for time\"); assert k and s[\"finished\"] and not s[\"unfinished\"] and not s[\"failed\"]; assert all(set(x) == {\"suite\", \"benchmark\", \"reason\"} for x in k); rows = {\",\".join(l.split(\",\")[:3]) for suite in (\"ops\", \"transfer\", \"amp\") for l in (open(d + \"/\" + suite + \".csv\") if __import__(\"os\").path.exists(d + \"/\" + suite + \".csv\") else [])}; assert not [x for x in k if \",\".join([x[\"suite\"]] + x[\"benchmark\"].split(\"/\", 1)) in rows]' $d")
set_tests_properties(peer.append peer.budget PROPERTIES TIMEOUT 120)
