# check.cmake — `bench check` (harness/check/cmd_check.c, docs/CHECK.md): the judging as a pure function
# (test_check.c links harness/check/check_judge.c and check_expect.c), recorded figures judged through the
# CLI (a healthy node, a planted slow GPU, a planted PCIe link at half width, the emulated device),
# malformed expectations files (exit 2), the GPU-less run (every GPU check "needs a GPU", exit 3),
# and on cuda:0 — the emulated device in the emu preset — the quick check itself; then a fleet's
# baseline and rules (check.rules.*); at the end the levels and fault codes (check.levels.*, and the
# levels end to end: gpu.check.level*).
# The judge (check_judge.c, a pure function of recorded figures) and what it reads: every test
# executable that judges figures links these.
set(CHECK_JUDGE_SOURCES ${PROJECT_SOURCE_DIR}/harness/check/check_judge.c
                        ${PROJECT_SOURCE_DIR}/harness/check/check_lines.c
                        ${PROJECT_SOURCE_DIR}/harness/check/check_levels.c
                        ${PROJECT_SOURCE_DIR}/harness/check/check_sustained_judge.c
                        ${PROJECT_SOURCE_DIR}/harness/check/check_sdc_judge.c
                        ${PROJECT_SOURCE_DIR}/harness/check/check_expect.c
                        ${PROJECT_SOURCE_DIR}/harness/emulated.c
                        ${PROJECT_SOURCE_DIR}/harness/json_strict.c
                        ${PROJECT_SOURCE_DIR}/harness/fileio.c
                        ${PROJECT_SOURCE_DIR}/harness/stats.c)
tdm_test_executable(check)
target_sources(test_check PRIVATE ${CHECK_JUDGE_SOURCES} ${PROJECT_SOURCE_DIR}/harness/check/check_rules.c)
set(CHECK_EXPECT ${PROJECT_SOURCE_DIR}/suites/check/expectations.json)
set(CHECK_DATA ${CMAKE_CURRENT_SOURCE_DIR}/check)
file(MAKE_DIRECTORY ${TEST_TMP}/check)
add_test(NAME check.unit COMMAND test_check ${CHECK_EXPECT} ${TEST_TMP}/check)

# The sustained and pulsed load's judge (harness/check/check_sustained_judge.c, docs/CHECK.md "Sustained
# and pulsed load"): planted series on the recorded healthy level-2 node, malformed series refused.
tdm_test_executable(check_sustained)
target_sources(test_check_sustained PRIVATE ${CHECK_JUDGE_SOURCES})
add_test(NAME check.sustained.unit COMMAND test_check_sustained ${CHECK_EXPECT}
                                           ${CMAKE_CURRENT_SOURCE_DIR}/check/level2-healthy.json)
# the recorded runs it leaves (we21-*) are hostile21_judge.cmake's --write-expect inputs
set_tests_properties(check.unit PROPERTIES FIXTURES_SETUP check21_runs)

set(BC $<TARGET_FILE:bench> check --expect ${CHECK_EXPECT})
add_test(NAME check.figures_healthy_exit_0 COMMAND sh -c
  "$<TARGET_FILE:bench> check --expect ${CHECK_EXPECT} --from-figures ${CHECK_DATA}/healthy-2xa100.json; rc=$?; [ $rc -eq 0 ] || { echo \"exit $rc, want 0\"; exit 1; }")
set_tests_properties(check.figures_healthy_exit_0 PROPERTIES PASS_REGULAR_EXPRESSION "PASS: 2 GPUs, every check passed")
# A GPU far below its siblings is named, though it passes its model's threshold.
add_test(NAME check.figures_slow_gpu_named COMMAND sh -c
  "out=$($<TARGET_FILE:bench> check --expect ${CHECK_EXPECT} --from-figures ${CHECK_DATA}/slow-gpu-4xh100.json); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || { echo \"exit $rc, want 1\"; exit 1; }; echo \"$out\" | grep -E '^cuda:2 +gemm.bf16 .* PASS' && echo \"$out\" | grep -E '^cuda:2 +outlier.gemm.bf16 .* FAIL +TDM-F024 +cuda:2 is 0.73 x the median of its 3 siblings' && echo \"$out\" | grep -E '^node: OUTLIER cuda:3 outlier.memory.d2d'")
# A link trained at half width while copying: pcie.link FAIL, and the bandwidth it costs.
add_test(NAME check.figures_half_width_link_fails COMMAND sh -c
  "out=$($<TARGET_FILE:bench> check --expect ${CHECK_EXPECT} --from-figures ${CHECK_DATA}/half-width-link.json); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || exit 1; echo \"$out\" | grep -E '^cuda:0 +pcie.link +gen4 x8 +gen4 x16 +0.50  FAIL' && echo \"$out\" | grep -E '^cuda:0 +pcie.h2d .* FAIL' && ! echo \"$out\" | grep -E '^cuda:1 .*  FAIL '")
add_test(NAME check.figures_emulated_not_judged COMMAND sh -c
  "out=$($<TARGET_FILE:bench> check --expect ${CHECK_EXPECT} --from-figures ${CHECK_DATA}/emulated.json ); rc=$?; echo \"$out\"; [ $rc -eq 3 ] || exit 1; echo \"$out\" | grep -E '^cuda:0 +memory.d2d +0.8 GB/s +- +-  EMULATED' && echo \"$out\" | grep -E '^cuda:0 +numerics.golden .*  PASS ' && ! echo \"$out\" | grep -E '  (PASS|WARN|FAIL) .*not a GPU figure' && echo \"$out\" | grep -q '^NO GPU JUDGED'")
# Malformed expectations: exit 2, the file and what is wrong named.
add_test(NAME check.bad_expectations_exit_2 COMMAND sh -c
  "for f in ${CHECK_DATA}/bad-*.json; do out=$($<TARGET_FILE:bench> check --expect $f --from-figures ${CHECK_DATA}/healthy-2xa100.json 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] || { echo \"$f: exit $rc, want 2\"; exit 1; }; echo \"$out\" | grep -q \"bench check: --expect $f: \" || exit 1; done; $<TARGET_FILE:bench> check --expect ${CHECK_DATA}/bad-hbm.json --from-figures ${CHECK_DATA}/healthy-2xa100.json 2>&1 | grep -q 'models\\[3\\] (A100 SXM4 80GB): \"hbm_GBps\" is not a positive number'")
add_test(NAME check.bad_arguments_exit_2 COMMAND sh -c
  "for a in '--device tpu:0' '--seed x' '--from-figures ${CHECK_DATA}/healthy-2xa100.json --quick' '--write-expect' '--write-expect ${TEST_TMP}/check' '--from-figures /nonexistent.json' 'extra'; do $<TARGET_FILE:bench> check $a; rc=$?; [ $rc -eq 2 ] || { echo \"exit $rc for: $a\"; exit 1; }; done")
# Without a GPU: the host's check runs, every GPU check says "needs a GPU", exit 3 with a NO GPU
# line (never a silent PASS). Skipped where a CUDA device (real or emulated) is present.
add_test(NAME check.no_gpu_needs_a_gpu_exit_3 COMMAND sh -c
  "out=$($<TARGET_FILE:bench> check --quick 2>&1); rc=$?; echo \"$out\"; case \"$out\" in 'bench check: no GPU'*) ;; *) echo 'SKIP: a CUDA device is present'; exit 77;; esac; [ $rc -eq 3 ] || { echo \"exit $rc, want 3\"; exit 1; }; [ $(echo \"$out\" | grep -cE '^cuda +[a-z0-9._]+ .* needs a GPU') -eq 25 ] && echo \"$out\" | grep -E '^host +reference.golden .* PASS' && echo \"$out\" | grep -q '^NO GPU: nothing on a GPU was judged'")
set_tests_properties(check.no_gpu_needs_a_gpu_exit_3 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# GPU: the quick check on cuda:0 into a results directory that `bench report` has written. On a GPU
# every check must pass (exit 0); on the emulated device (emu preset) numerics are judged and every
# speed is EMULATED (exit 3, no FAIL). Skips (77) with one line when there is no CUDA device.
set(CHECK_OUT ${TEST_TMP}/check/gpu-quick)
add_test(NAME gpu.check.quick_cuda0 COMMAND sh -c
  "rm -rf ${CHECK_OUT}; out=$($<TARGET_FILE:bench> check --quick --device cuda:0 --out ${CHECK_OUT} 2>&1); rc=$?; echo \"$out\"; case \"$out\" in 'bench check: no GPU'*) echo 'SKIP: no CUDA device'; exit 77;; esac; test -s ${CHECK_OUT}/report.md && grep -q '\"check\"' ${CHECK_OUT}/status.json || { echo 'no results directory'; exit 1; }; if echo \"$out\" | grep -q 'EMULATED on the CPU'; then [ $rc -eq 3 ] && echo \"$out\" | grep -E '^cuda:0 +memory.d2d .* EMULATED' && echo \"$out\" | grep -E '^cuda:0 +numerics.golden .* PASS' && ! echo \"$out\" | grep -E '  FAIL '; else [ $rc -eq 0 ]; fi")
set_tests_properties(gpu.check.quick_cuda0 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900)

# An installed bench uses its own data files: `cmake --install` puts the expectations, the golden
# cases, the plots and the suites' docs under share/tandem, and the installed bench check judges
# against the expectations there, not those of the source tree it was built from.
set(CHECK_INST ${TEST_TMP}/check/install)
add_test(NAME check.installed_uses_its_files COMMAND sh -c
  "rm -rf ${CHECK_INST} && ${CMAKE_COMMAND} --install ${PROJECT_BINARY_DIR} --prefix ${CHECK_INST} >/dev/null || exit 1; s=${CHECK_INST}/share/tandem; ls $s/golden/cases/*.safetensors >/dev/null && test -f $s/plots/lines.gp && ls $s/docs/suites/*.md >/dev/null || { echo 'missing from the install'; exit 1; }; ${CHECK_INST}/bin/bench check --from-figures ${CHECK_DATA}/healthy-2xa100.json 2>&1 >/dev/null | grep -F 'against the expectations ${CHECK_INST}/bin/../share/tandem/check/expectations.json'")

# A fleet's baseline and rules (harness/check/check_rules.c, docs/CHECK.md "A fleet's baseline and
# rules"): test_check_rules judges planted nodes (the recorded healthy node with a figure changed)
# by each kind of rule and refuses malformed files; it leaves the nodes, the baseline and the rules
# files under ${TEST_TMP}/check/rules for the CLI tests below (text, JSON lines, Markdown, HTML).
tdm_test_executable(check_rules)
target_sources(test_check_rules PRIVATE ${CHECK_JUDGE_SOURCES} ${PROJECT_SOURCE_DIR}/harness/check/check_rules.c)
set(R ${TEST_TMP}/check/rules)
set(BR "$<TARGET_FILE:bench> check --expect ${CHECK_EXPECT} --baseline ${R}/baseline.json")
add_test(NAME check.rules.unit COMMAND test_check_rules ${CHECK_EXPECT} ${CHECK_DATA}/healthy-2xa100.json ${TEST_TMP}/check)
set_tests_properties(check.rules.unit PROPERTIES FIXTURES_SETUP check_rules_nodes)
# cuda:1's bf16 10 % below the fleet's median: rejected at 0.95 x (the rule, the GPU, by how much)
add_test(NAME check.rules.relative_rejects_exit_1 COMMAND sh -c
  "out=$(${BR} --rules ${R}/rules-95.json ${R}/cli-healthy ${R}/cli-slow); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || { echo \"exit $rc, want 1\"; exit 1; }; echo \"$out\" | grep -E '^node-ok +accepted +2  -$' && echo \"$out\" | grep -E '^node-slow +rejected +2  gemm-95: cuda:1 gemm.bf16: 225 TFLOP/s is 0.9 x the fleet.s median 250, below 0.95 x \\(237.5\\)$' && echo \"$out\" | grep -E '^REJECTED: 1 of 2 nodes: node-slow$'")
# ... and accepted at 0.85 x (with a missing_fails rule that the complete nodes pass)
add_test(NAME check.rules.relative_085_accepts_exit_0 COMMAND sh -c
  "out=$(${BR} --rules ${R}/rules-85.json ${R}/cli-healthy ${R}/cli-slow/status.json); rc=$?; echo \"$out\"; [ $rc -eq 0 ] || { echo \"exit $rc, want 0\"; exit 1; }; echo \"$out\" | grep -E '^ACCEPTED: 2 nodes'")
add_test(NAME check.rules.missing_fails_exit_1 COMMAND sh -c
  "out=$(${BR} --rules ${R}/rules-85.json ${R}/cli-missing ${R}/cli-emulated); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || exit 1; echo \"$out\" | grep -E '^node-missing +rejected +2  gemm-measured: cuda:1 gemm.f64: missing' && echo \"$out\" | grep -E '^node-emu +rejected +.*\\(emulated\\): a run on the emulated device'")
# JSON lines: one object per node, parsed back; the hostile name comes back as it was
add_test(NAME check.rules.jsonl_parses COMMAND sh -c
  "${BR} --rules ${R}/rules-95.json --format jsonl ${R}/cli-healthy ${R}/cli-slow ${R}/cli-hostile > ${R}/out.jsonl; rc=$?; cat ${R}/out.jsonl; [ $rc -eq 1 ] || exit 1; python3 -c \"import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; assert [r['verdict'] for r in rows]==['accepted','rejected','rejected'], rows; assert rows[2]['node']=='<script>alert(1)</script>&'+chr(34)+'|x*', rows[2]['node']; f=rows[1]['failures'][0]; assert (f['rule'],f['device'],f['metric'],f['value'],f['limit'])==('gemm-95','cuda:1','gemm.bf16',225,237.5), f; assert abs(f['ratio']-0.9)<1e-12\" ${R}/out.jsonl")
add_test(NAME check.rules.html_escapes COMMAND sh -c
  "out=$(${BR} --rules ${R}/rules-95.json --format html ${R}/cli-healthy ${R}/cli-hostile); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || exit 1; echo \"$out\" | grep -F '<tr><td>&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;|x*</td><td class=\"rejected\">rejected</td>' && ! echo \"$out\" | grep -F '<script>' && echo \"$out\" | grep -F '<td class=\"accepted\">accepted</td>'")
add_test(NAME check.rules.markdown_escapes COMMAND sh -c
  "out=$(${BR} --rules ${R}/rules-95.json --format md ${R}/cli-healthy ${R}/cli-hostile); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || exit 1; echo \"$out\" | grep -F '| \\<script\\>alert(1)\\</script\\>\\&\"\\|x\\* | **rejected** | 2 | gemm-95: cuda:0 gemm.bf16: 200 TFLOP/s' && echo \"$out\" | grep -F '| node-ok | accepted | 2 |  |'")
# bench check's own verdicts reject a node whatever the rules (issue 36): a failed golden replay,
# memory test, SDC repetitions, an Xid 79, a sustained load that could not run, a level-4 run
# without its checks (test_check_rules plants own-0 to own-5); the reason in every format.
add_test(NAME check.rules.own_verdicts_reject_exit_1 COMMAND sh -c
  "o=\"${R}/own-0 ${R}/own-1 ${R}/own-2 ${R}/own-3 ${R}/own-4 ${R}/own-5\"; out=$(${BR} --rules ${R}/rules-85.json $o); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || { echo \"exit $rc, want 1\"; exit 1; }; echo \"$out\" | grep -E '^node-golden +rejected +2  \\(check\\): cuda:1 numerics.golden: bench check.s verdict FAIL TDM-F001: 3 cases over their bound$' && echo \"$out\" | grep -E '\\(check\\): cuda:1 memory.test: bench check.s verdict FAIL TDM-F058' && echo \"$out\" | grep -E '\\(check\\): cuda:1 sdc.gemm: bench check.s verdict FAIL TDM-F120' && echo \"$out\" | grep -E '\\(check\\): cuda:1 nvml.xid: bench check.s verdict FAIL TDM-F060' && echo \"$out\" | grep -E '\\(check\\): cuda:1 sustained.load: bench check.s verdict FAIL TDM-F100' && echo \"$out\" | grep -E '\\(check\\): cuda:0 memory.test: bench check.s verdict absent \\(incomplete\\)' && echo \"$out\" | grep -E '^REJECTED: 6 of 6 nodes' || exit 1; ${BR} --rules ${R}/rules-85.json --format jsonl $o > ${R}/own.jsonl; [ $? -eq 1 ] || exit 1; python3 -c \"import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; assert len(rows)==6 and all(r['verdict']=='rejected' and any(f['rule']=='(check)' and f['device']=='cuda:1' for f in r['failures']) for r in rows), rows\" ${R}/own.jsonl || exit 1; for fm in md html; do ${BR} --rules ${R}/rules-85.json --format $fm ${R}/own-3 > ${R}/own.$fm; [ $? -eq 1 ] && grep -F '(check): cuda:1 nvml.xid: bench check' ${R}/own.$fm || { echo \"$fm: no reason\"; exit 1; }; done")
# Malformed rules and baselines (test_check_rules writes them): exit 2, the file and field named.
add_test(NAME check.rules.bad_files_exit_2 COMMAND sh -c
  "n=0; for f in ${R}/bad-rules-*.json; do out=$(${BR} --rules $f ${R}/cli-healthy 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] || { echo \"$f: exit $rc, want 2\"; exit 1; }; echo \"$out\" | grep -qF \"bench check: --rules $f: \" || exit 1; n=$((n+1)); done; for f in ${R}/bad-baseline-*.json; do out=$($<TARGET_FILE:bench> check --expect ${CHECK_EXPECT} --baseline $f --rules ${R}/rules-95.json ${R}/cli-healthy 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] || { echo \"$f: exit $rc, want 2\"; exit 1; }; echo \"$out\" | grep -qF \"bench check: --baseline $f: models.\" || exit 1; n=$((n+1)); done; [ $n -eq 24 ] || { echo \"$n files, want 24\"; exit 1; }")
# --write-baseline from three planted nodes: the medians; the example rules file accepts a healthy
# node against it; an emulated run is refused as a source
add_test(NAME check.rules.write_baseline_cli COMMAND sh -c
  "$<TARGET_FILE:bench> check --expect ${CHECK_EXPECT} --write-baseline ${R}/n1 ${R}/n2 ${R}/n3/status.json > ${R}/b3.json || exit 1; python3 -c \"import json,sys; b=json.load(open(sys.argv[1])); m=b['models']['A100 SXM4 80GB']['gemm.bf16']; assert (m['median'],m['min'],m['max'],m['count'],m['nodes'])==(250,240,260,6,['node01','node02','node03']), m\" ${R}/b3.json || exit 1; $<TARGET_FILE:bench> check --expect ${CHECK_EXPECT} --baseline ${R}/b3.json --rules ${PROJECT_SOURCE_DIR}/suites/check/rules.example.json ${R}/cli-healthy || exit 1; out=$($<TARGET_FILE:bench> check --expect ${CHECK_EXPECT} --write-baseline ${R}/n1 ${R}/cli-emulated 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q 'cli-emulated: a run on the emulated device'")
add_test(NAME check.rules.bad_arguments_exit_2 COMMAND sh -c
  "for a in '--baseline ${R}/baseline.json ${R}/cli-healthy' '--rules ${R}/rules-95.json ${R}/cli-healthy' '--baseline ${R}/baseline.json --rules ${R}/rules-95.json' '--baseline ${R}/baseline.json --rules ${R}/rules-95.json --format xml ${R}/cli-healthy' '--format md ${R}/cli-healthy' '--write-baseline' '--write-baseline --baseline ${R}/baseline.json --rules ${R}/rules-95.json ${R}/n1' '--baseline ${R}/baseline.json --rules ${R}/rules-95.json --quick ${R}/cli-healthy' '--baseline ${R}/baseline.json --rules ${R}/rules-95.json /nonexistent' '--baseline ${R}/baseline.json --rules ${R}/rules-95.json ${R}'; do $<TARGET_FILE:bench> check --expect ${CHECK_EXPECT} $a; rc=$?; [ $rc -eq 2 ] || { echo \"exit $rc for: $a\"; exit 1; }; done")
set_tests_properties(check.rules.relative_rejects_exit_1 check.rules.relative_085_accepts_exit_0
  check.rules.missing_fails_exit_1 check.rules.jsonl_parses check.rules.html_escapes
  check.rules.markdown_escapes check.rules.bad_files_exit_2 check.rules.write_baseline_cli
  check.rules.bad_arguments_exit_2 check.rules.own_verdicts_reject_exit_1
  PROPERTIES FIXTURES_REQUIRED check_rules_nodes)

# Levels and fault codes (issue 25, items 1 and 5; harness/check/check_levels.c, docs/CHECK.md "Levels",
# "Error counters and fault codes"): planted figures under check/ judged through the CLI — each
# fault its verdict, its TDM-F code and the exit status; then every FAIL and WARN of every recorded
# and planted file has a code of docs/CHECK.md's table and a remediation line (--json).
set(LV "$<TARGET_FILE:bench> check --expect ${CHECK_EXPECT} --from-figures ${CHECK_DATA}")
function(check_level_case name file want_rc)
  string(REPLACE ";" " && " greps "${ARGN}")
  add_test(NAME check.levels.${name} COMMAND sh -c
    "out=$(${LV}/${file}.json 2>&1); rc=$?; echo \"$out\"; [ $rc -eq ${want_rc} ] || { echo \"exit $rc, want ${want_rc}\"; exit 1; }; ${greps}")
endfunction()
check_level_case(level1_healthy_exit_0 level1-healthy 0
  "echo \"$out\" | grep -E '^host +level.budget +3.9 s +30 s +0.13  PASS +level 1: within its budget'"
  "echo \"$out\" | grep -E '^PASS: 2 GPUs, every check passed'"
  "! echo \"$out\" | grep -E '^cuda:[01] +(numerics|gemm|memory|train|nvml.clocks)'"
  "[ $(echo \"$out\" | grep -cE '^cuda:0 +(driver|pcie.link|nvml.[a-z_]+) ') -eq 12 ]")
check_level_case(xid_event_fails level1-xid 1
  "echo \"$out\" | grep -E '^cuda:1 +nvml.xid +Xid 79 .*  FAIL +TDM-F060 +1 critical Xid event'"
  "echo \"$out\" | grep -E '^  cuda:1 TDM-F060 nvml.xid: the GPU fell off the bus'"
  "echo \"$out\" | grep -E '^cuda:0 +nvml.xid +none .* PASS'")
check_level_case(pcie_replay_grows level1-pcie-replay 1
  "echo \"$out\" | grep -E '^cuda:0 +nvml.pcie_replay +\\+12 \\(3 -> 15\\) .* WARN +TDM-F032'"
  "echo \"$out\" | grep -E '^cuda:1 +nvml.pcie_replay +\\+120 \\(3 -> 123\\) .* FAIL +TDM-F032'")
check_level_case(link_below_max_at_idle_warns level1-link-idle 0
  "echo \"$out\" | grep -E '^cuda:0 +pcie.link +gen4 x8 +gen4 x16 +0.50  WARN +TDM-F030 .*read at idle'")
check_level_case(ecc_volatile_delta level1-ecc-delta 1
  "echo \"$out\" | grep -E '^cuda:0 +nvml.ecc_delta +uncorrected \\+0, corrected \\+4 .* WARN +TDM-F057'"
  "echo \"$out\" | grep -E '^cuda:1 +nvml.ecc_delta +uncorrected \\+1, corrected \\+0 .* FAIL +TDM-F056'"
  "echo \"$out\" | grep -E '^cuda:1 +nvml.ecc .* FAIL +TDM-F053'")
check_level_case(remapped_rows_pending_failed level1-remapped 1
  "echo \"$out\" | grep -E '^cuda:0 +nvml.remapped_rows .* WARN +TDM-F051'"
  "echo \"$out\" | grep -E '^  cuda:0 TDM-F051 nvml.remapped_rows: reset the GPU'"
  "echo \"$out\" | grep -E '^cuda:1 +nvml.remapped_rows .* FAIL +TDM-F050'")
check_level_case(nvlink_crc_and_recovery level1-nvlink 1
  "echo \"$out\" | grep -E '^cuda:0 +nvml.nvlink +12 links: CRC \\+7, .* WARN +TDM-F070'"
  "echo \"$out\" | grep -E '^cuda:1 +nvml.nvlink +12 links: .*recovery \\+1 .* FAIL +TDM-F071'")
check_level_case(driver_and_persistence level1-driver-persistence 1
  "echo \"$out\" | grep -E '^cuda:0 +nvml.persistence +off +on .* WARN +TDM-F080'"
  "echo \"$out\" | grep -E '^cuda:1 +driver +driver 550.54.15, CUDA 12.2, runtime 12.4 .* FAIL +TDM-F081'")
check_level_case(over_budget_said_and_counted level1-over-budget 0
  "echo \"$out\" | grep -E '^host +level.budget +41.5 s +30 s +1.38  WARN +TDM-F090 +level 1: ran past its budget'"
  "echo \"$out\" | grep -E '^PASS: 2 GPUs, every check passed \\(22 PASS, 1 WARN'")
check_level_case(level3_without_series_incomplete_exit_4 level3-incomplete 4
  "echo \"$out\" | grep -E '^cuda:0 +sustained.load .* absent +expected, absent from the figures'"
  "echo \"$out\" | grep -E '^INCOMPLETE: 2 expected checks were not measured .*: cuda:0 sustained.load cuda:1 sustained.load$'")
check_level_case(sustained_thermal_throttle level3-sustained-throttle 1
  "echo \"$out\" | grep -E '^cuda:0 +sustained.throttle +hw thermal .* FAIL +TDM-F105 +hw thermal in 85 % of the samples \\(from t = 60.0 s\\)'"
  "echo \"$out\" | grep -E '^cuda:0 +sustained.clocks +1110 MHz +1410 MHz +0.79  FAIL +TDM-F103'"
  "echo \"$out\" | grep -E '^cuda:0 +sustained.decay +205 TFLOP/s +250 TFLOP/s +0.82  FAIL +TDM-F104'"
  "echo \"$out\" | grep -E '^cuda:1 +sustained.throttle +sw power cap .* PASS +66 samples. at its power cap in 48 %'"
  "echo \"$out\" | grep -E '^FAIL: 3 checks failed: cuda:0 sustained.clocks cuda:0 sustained.decay cuda:0 sustained.throttle$'")
check_level_case(pulsed_power_brake level4-pulsed-brake 1
  "echo \"$out\" | grep -E '^cuda:1 +pulsed.load +hw power brake .* FAIL +TDM-F106 +hw power brake in 25 % of the samples \\(from t = 410.0 s\\)'"
  "echo \"$out\" | grep -E '^cuda:0 +pulsed.load +sw power cap .* PASS'"
  "echo \"$out\" | grep -E '^FAIL: 1 check failed: cuda:1 pulsed.load$'")
check_level_case(level2_healthy_exit_0 level2-healthy 0
  "echo \"$out\" | grep -E '^PASS: 2 GPUs'" "! echo \"$out\" | grep -E '^cuda:[0-9]+ +(sustained|pulsed|memory.test)'")
check_level_case(counter_going_back_exit_2 bad-counter-backwards 2
  "echo \"$out\" | grep -F 'bench check: gpus[0].counters.pcie_replay: the end (1) is below the start (3): not one counter'")
# Every FAIL and WARN of every figures file carries a code of docs/CHECK.md's table and a remedy.
add_test(NAME check.levels.every_fail_warn_coded COMMAND sh -c
  "for f in ${CHECK_DATA}/level*.json ${CHECK_DATA}/healthy-2xa100.json ${CHECK_DATA}/half-width-link.json ${CHECK_DATA}/slow-gpu-4xh100.json; do $<TARGET_FILE:bench> check --expect ${CHECK_EXPECT} --from-figures $f --json > ${TEST_TMP}/check/coded.json 2>/dev/null; python3 -c \"import json,re,sys; j=json.load(open(sys.argv[1])); doc=open(sys.argv[2]).read(); lines=[c for g in j['gpus'] for c in g['checks']]+j.get('host',{}).get('checks',[]); bad=[c for c in lines if c['verdict'] in ('FAIL','WARN') and not (re.fullmatch(r'TDM-F[0-9]{3}',c.get('code','')) and c.get('remedy') and ('| '+c['code']+' |') in doc)]; assert not bad, (sys.argv[3], bad); n=sum(c['verdict'] in ('FAIL','WARN') for c in lines); print(sys.argv[3], n, 'coded')\" ${TEST_TMP}/check/coded.json ${PROJECT_SOURCE_DIR}/docs/CHECK.md $f || exit 1; done")
add_test(NAME check.levels.bad_arguments_exit_2 COMMAND sh -c
  "for a in '--level 7' '--level 0' '--level 1x' '--level' '--duration 5' '--level 2 --duration 5' '--level 3 --duration 0' '--level 3 --duration x' '--quick --level 3' '--level 1 --from-figures ${CHECK_DATA}/level1-healthy.json'; do out=$($<TARGET_FILE:bench> check $a 2>&1); rc=$?; [ $rc -eq 2 ] || { echo \"exit $rc for: $a\"; exit 1; }; done; $<TARGET_FILE:bench> check --level 7 2>&1 | grep -F 'bench check: --level 7: give 1, 2, 3 or 4'")

# The levels end to end on cuda:0 / every device (the emulated ones with TANDEM_EMU_DEVICES in the
# emu preset; every timing there is labelled EMULATED, the exit 3 unless something failed): the
# level and its budget printed before anything runs; level 1 has no load (no numerics, GEMM,
# copies); level 3 with a short --duration runs the sustained load (its series in status.json and
# sustained.csv, judged EMULATED there; its plots in the report, and without gnuplot the report's
# note that it has none), level 4 the pulsed load too (INCOMPLETE, exit 4, while the
# memory test of item 4 is not a check of the level yet). Skip (77) without a CUDA device.
set(NOGPU "case \"$out\" in 'bench check: no GPU'*) echo 'SKIP: no CUDA device'; exit 77;; esac")
set(CHECK_L1 ${TEST_TMP}/check/level1)
add_test(NAME gpu.check.level1 COMMAND sh -c
  "rm -rf ${CHECK_L1}; out=$($<TARGET_FILE:bench> check --level 1 --out ${CHECK_L1} 2>&1); rc=$?; echo \"$out\"; ${NOGPU}; echo \"$out\" | sed -n 2p | grep -E '^bench check: level 1 \\(driver, NVML health, link, error counters: no load\\), budget 30 s' || exit 1; ! echo \"$out\" | grep -E '^(cuda:[0-9]+|host) +(numerics|gemm|memory|train|reference|multi)' || exit 1; grep -q '\"level\":[ \t]*1' ${CHECK_L1}/status.json || exit 1; if echo \"$out\" | grep -q 'EMULATED on the CPU'; then [ $rc -eq 3 ] && echo \"$out\" | grep -E '^host +level.budget .* EMULATED +level 1 timed on the emulated device' && echo \"$out\" | grep -E '^cuda:0 +nvml.xid .* EMULATED'; else [ $rc -eq 0 ]; fi")
add_test(NAME gpu.check.level2_cuda0 COMMAND sh -c
  "out=$($<TARGET_FILE:bench> check --level 2 --device cuda:0 2>&1); rc=$?; echo \"$out\"; ${NOGPU}; echo \"$out\" | grep -E '^bench check: level 2 \\(quick\\), budget 120 s$' || exit 1; echo \"$out\" | grep -E '^cuda:0 +numerics.golden .* PASS' || exit 1; if echo \"$out\" | grep -q 'EMULATED on the CPU'; then [ $rc -eq 3 ] && echo \"$out\" | grep -E '^host +level.budget .* EMULATED' && echo \"$out\" | grep -E '^cuda:0 +gemm.bf16 .* EMULATED' && ! echo \"$out\" | grep -E '  FAIL '; else [ $rc -eq 0 ]; fi")
set(CHECK_L3 ${TEST_TMP}/check/level3)
set(CHECK_L4 ${TEST_TMP}/check/level4)
add_test(NAME gpu.check.level3_sustained COMMAND sh -c
  "rm -rf ${CHECK_L3}; out=$($<TARGET_FILE:bench> check --level 3 --duration 2 --device cuda:0 --out ${CHECK_L3} 2>&1); rc=$?; echo \"$out\"; ${NOGPU}; echo \"$out\" | grep -E '^bench check: level 3, budget 122 s$' || exit 1; ! echo \"$out\" | grep -E 'sustained.load .* not implemented' || exit 1; echo \"$out\" | grep -E '^bench check: cuda:0: sustained load, 1 s targeted stress and 1 s targeted power \\.\\.\\.$' || exit 1; python3 -c \"import json,sys; s=json.load(open(sys.argv[1]))['check']['gpus'][0]['series']['sustained.load']; n=len(s['t_s']); assert n >= 4 and all(len(s[k]) == n for k in ('sm_clock_mhz','mem_clock_mhz','power_w','temperature_c','throttle_reasons','tflops','phase')), s; assert {'calibrate','stress','power'} <= set(s['phase']), s['phase']; assert all(x > 0 for x in s['tflops']); print(n, 'samples')\" ${CHECK_L3}/status.json || exit 1; test -s ${CHECK_L3}/sustained.csv || exit 1; if command -v gnuplot >/dev/null; then grep -F '](plots/sustained-throughput.png)' ${CHECK_L3}/report.md || exit 1; fi; GNUPLOT=/nonexistent/gnuplot $<TARGET_FILE:bench> report --replot ${CHECK_L3} 2>/dev/null && grep -F 'No plots: gnuplot could not draw' ${CHECK_L3}/report.md || { echo 'no note of the missing plots'; exit 1; }; if echo \"$out\" | grep -q 'EMULATED on the CPU'; then [ $rc -eq 3 ] && echo \"$out\" | grep -E '^cuda:0 +sustained.power +[0-9.e-]+ TFLOP/s .* EMULATED +measured on the emulated device: not judged' && echo \"$out\" | grep -E '^cuda:0 +sustained.throttle .* EMULATED +the emulated device has no NVML' && echo \"$out\" | grep -E '^NO GPU JUDGED'; else [ $rc -eq 0 ]; fi")
add_test(NAME gpu.check.level4_pulsed COMMAND sh -c
  "rm -rf ${CHECK_L4}; out=$($<TARGET_FILE:bench> check --level 4 --duration 2 --device cuda:0 --out ${CHECK_L4} 2>&1); rc=$?; echo \"$out\"; ${NOGPU}; python3 -c \"import json,sys; s=json.load(open(sys.argv[1]))['check']['gpus'][0]['series']['pulsed.load']; assert {'on','off'} <= set(s['phase']), s['phase']; assert all((x == 0) == (p == 'off') for x, p in zip(s['tflops'], s['phase'])), s; print(len(s['t_s']), 'samples')\" ${CHECK_L4}/status.json || exit 1; echo \"$out\" | grep -E '^cuda:0 +memory.test +0 errors in .* PASS' || exit 1; if echo \"$out\" | grep -q 'EMULATED on the CPU'; then echo \"$out\" | grep -E '^cuda:0 +pulsed.load .* EMULATED +measured on the emulated device: not judged' || exit 1; [ $rc -eq 3 ] || { echo \"exit $rc, want 3\"; exit 1; }; echo \"$out\" | grep -E '^NO GPU JUDGED'; else [ $rc -eq 0 ]; fi")
set_tests_properties(gpu.check.level1 gpu.check.level2_cuda0 gpu.check.level3_sustained
  gpu.check.level4_pulsed PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900)
# level 4's memory test covers the free memory: 64 MiB on the emulated device (a GPU ignores it)
set_tests_properties(gpu.check.level4_pulsed PROPERTIES ENVIRONMENT TANDEM_EMU_MEM=64M)
# Without a GPU, level 1: no host check, its 12 GPU checks "needs a GPU", the budget line, exit 3.
add_test(NAME check.levels.no_gpu_level1_exit_3 COMMAND sh -c
  "out=$($<TARGET_FILE:bench> check --level 1 2>&1); rc=$?; echo \"$out\"; case \"$out\" in 'bench check: no GPU'*) ;; *) echo 'SKIP: a CUDA device is present'; exit 77;; esac; [ $rc -eq 3 ] || { echo \"exit $rc, want 3\"; exit 1; }; [ $(echo \"$out\" | grep -cE '^cuda +[a-z0-9._]+ .* needs a GPU') -eq 12 ] && echo \"$out\" | grep -E '^host +level.budget .* PASS' && ! echo \"$out\" | grep -E 'reference.golden'")
set_tests_properties(check.levels.no_gpu_level1_exit_3 PROPERTIES SKIP_RETURN_CODE 77)
