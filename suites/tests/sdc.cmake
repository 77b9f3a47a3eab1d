# sdc.cmake — `bench check`'s silent data corruption checks (issue 25 item 3; harness/check/check_sdc.c
# measures, check_sdc_judge.c judges; docs/CHECK.md "Silent data corruption") and the
# fingerprints of `bench compare --fleet`. sdc_plant.py writes planted figures (the complete
# level-3 figures of check/level3-incomplete.json with one fault each: a GEMM repetition that
# differs at repetition 7, a GEMM digest or a training fingerprint unlike its siblings', two GPUs
# that disagree, two models, the emulated device, an absent record, malformed records) and planted
# results directories of a fleet; the judge and `bench compare --fleet` are tested on them. On the
# emulated device (label emu, 2 devices) level 3 end to end: the same fingerprints on both, and
# with a stuck memory bit on cuda:1 (TANDEM_EMU_FLIP_BIT) different ones, named by the check and by
# `bench compare --fleet`. The assertions are on the sdc lines and status.json, not on the run's
# exit status (sustained.load, another check of level 3, decides that).
# the vote against a brute-force count, and node splits the planted files lack (test_check_sdc.c)
tdm_test_executable(check_sdc)
target_sources(test_check_sdc PRIVATE ${CHECK_JUDGE_SOURCES})   # check.cmake's (read first)
add_test(NAME check.sdc.unit COMMAND test_check_sdc)

set(SDC ${TEST_TMP}/sdc)
add_test(NAME check.sdc.plant COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/sdc_plant.py
         ${CMAKE_CURRENT_SOURCE_DIR}/check/level3-incomplete.json ${SDC})
set_tests_properties(check.sdc.plant PROPERTIES FIXTURES_SETUP sdc_planted)

set(SDC_BC "$<TARGET_FILE:bench> check --expect ${PROJECT_SOURCE_DIR}/suites/check/expectations.json --from-figures ${SDC}")
# check_sdc_case(NAME FILE "RC..." GREP...): judged through the CLI, the exit one of RC, each grep
function(check_sdc_case name file rcs)
  string(REPLACE ";" " && " greps "${ARGN}")
  add_test(NAME check.sdc.${name} COMMAND sh -c
    "out=$(${SDC_BC}/${file}.json 2>&1); rc=$?; echo \"$out\"; case \" ${rcs} \" in *\" $rc \"*) ;; *) echo \"exit $rc, want one of: ${rcs}\"; exit 1;; esac; ${greps}")
  set_tests_properties(check.sdc.${name} PROPERTIES FIXTURES_REQUIRED sdc_planted)
endfunction()
# three healthy GPUs of one model: every sdc line PASS, nothing FAILs (sustained.load: exit 4)
check_sdc_case(healthy_3_pass sdc-healthy-3 "0 4"
  "[ $(echo \"$out\" | grep -cE '^cuda:[012] +sdc.gemm +0 of 20 differ .*  PASS +20 repetitions, the same bits. GEMM: a{16}, as 3 of the 3 GPUs of its model') -eq 3 ]"
  "[ $(echo \"$out\" | grep -cE '^cuda:[012] +sdc.train +f32 b{8}, bf16 c{8} .*  PASS ') -eq 3 ]"
  "! echo \"$out\" | grep -E '  FAIL '")
# repetition 7 of 20 gave other bits: FAIL TDM-F120 on that GPU only
check_sdc_case(gemm_mismatch_at_7_fails sdc-gemm-mismatch-7 "1"
  "echo \"$out\" | grep -E '^cuda:1 +sdc.gemm +1 of 20 differ .*  FAIL +TDM-F120 +repetition 7 gave other bits than the first'"
  "echo \"$out\" | grep -E '^cuda:0 +sdc.gemm .*  PASS '"
  "echo \"$out\" | grep -E '^FAIL: 1 check failed: cuda:1 sdc.gemm$'")
# the first product's bits unlike the 2 siblings': FAIL TDM-F121 on it, the others PASS
check_sdc_case(gemm_digest_differs_fails sdc-gemm-digest-differs "1"
  "echo \"$out\" | grep -E '^cuda:0 +sdc.gemm .*  FAIL +TDM-F121 .*GEMM: d{16} differs from the majority.s a{16} \\(2 of the 3 GPUs of its model'"
  "[ $(echo \"$out\" | grep -cE '^cuda:[12] +sdc.gemm .*  PASS ') -eq 2 ]")
# 3 GPUs, one f32 fingerprint differs: that GPU FAILs (TDM-F122), the majority PASS
check_sdc_case(train_one_of_3_differs_fails sdc-train-one-differs "1"
  "echo \"$out\" | grep -E '^cuda:2 +sdc.train +f32 d{8}, bf16 c{8} .*  FAIL +TDM-F122 .*f32: d{16} differs from the majority.s b{16} \\(2 of the 3 GPUs of its model, NVIDIA A100-SXM4-80GB\\)'"
  "[ $(echo \"$out\" | grep -cE '^cuda:[01] +sdc.train .*  PASS ') -eq 2 ]"
  "echo \"$out\" | grep -E '^FAIL: 1 check failed: cuda:2 sdc.train$'")
# 2 GPUs that differ: no majority, both flagged (TDM-F123)
check_sdc_case(train_two_disagree_both_flagged sdc-train-two-disagree "1"
  "[ $(echo \"$out\" | grep -cE '^cuda:[01] +sdc.train .*  FAIL +TDM-F123 .*the 2 GPUs of its model \\(NVIDIA A100-SXM4-80GB\\) disagree, no digest has a majority') -eq 2 ]"
  "echo \"$out\" | grep -E '^FAIL: 2 checks failed: cuda:0 sdc.train cuda:1 sdc.train$'")
# an A100 and an H100 with other bits: different models are not compared (their other figures
# fail the H100's expectations: exit 1, not the sdc lines)
check_sdc_case(models_not_compared sdc-models-not-compared "1"
  "[ $(echo \"$out\" | grep -cE '^cuda:[01] +sdc.(gemm|train) .*  PASS .*no other GPU of its model here') -eq 4 ]"
  "! echo \"$out\" | grep -E 'sdc.* FAIL'")
# the emulated device: its bits judged as a GPU's (as its numerics and memory test are), the note
# saying where they came from
check_sdc_case(emulated_judged sdc-emulated-differs "1"
  "[ $(echo \"$out\" | grep -cE '^cuda:[01] +sdc.train .*  FAIL +TDM-F123 +on the emulated device: ') -eq 2 ]"
  "[ $(echo \"$out\" | grep -cE '^cuda:[01] +sdc.gemm .*  PASS +on the emulated device: ') -eq 2 ]")
# a level-3 GPU without its record: absent, the verdict incomplete
check_sdc_case(absent_incomplete sdc-absent-incomplete "4"
  "echo \"$out\" | grep -E '^cuda:1 +sdc.gemm .*  absent '"
  "echo \"$out\" | grep -E '^INCOMPLETE: .*cuda:1 sdc.gemm cuda:1 sdc.train$'")
# malformed records: exit 2, the GPU and the field named
add_test(NAME check.sdc.bad_records_exit_2 COMMAND sh -c
  "n=0; for f in ${SDC}/sdc-bad-*.json; do out=$($<TARGET_FILE:bench> check --expect ${PROJECT_SOURCE_DIR}/suites/check/expectations.json --from-figures $f 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] || { echo \"$f: exit $rc, want 2\"; exit 1; }; echo \"$out\" | grep -qE '^bench check: gpus\\[1\\]\\.sdc\\[\"sdc\\.(gemm|train)\"\\]\\.[a-z_]+' || { echo \"$f: the field is not named\"; exit 1; }; n=$((n+1)); done; [ $n -eq 8 ] || { echo \"$n files, want 8\"; exit 1; }; $<TARGET_FILE:bench> check --from-figures ${SDC}/sdc-bad-digest-short.json 2>&1 | grep -F 'gpus[1].sdc[\"sdc.gemm\"].digest: not a SHA-256 digest (64 lowercase hex digits)'")
set_tests_properties(check.sdc.bad_records_exit_2 PROPERTIES FIXTURES_REQUIRED sdc_planted)
# every sdc FAIL carries a code of docs/CHECK.md's table and a remedy
add_test(NAME check.sdc.every_fail_coded COMMAND sh -c
  "for f in ${SDC}/sdc-gemm-*.json ${SDC}/sdc-train-*.json; do $<TARGET_FILE:bench> check --expect ${PROJECT_SOURCE_DIR}/suites/check/expectations.json --from-figures $f --json > ${SDC}/coded.json 2>/dev/null; python3 -c \"import json,re,sys; j=json.load(open(sys.argv[1])); doc=open(sys.argv[2]).read(); lines=[c for g in j['gpus'] for c in g['checks'] if c['check'].startswith('sdc.')]; bad=[c for c in lines if c['verdict']=='FAIL' and not (re.fullmatch(r'TDM-F1[23][0-9]',c.get('code','')) and c.get('remedy') and ('| '+c['code']+' |') in doc)]; assert not bad, (sys.argv[3], bad); n=sum(c['verdict']=='FAIL' for c in lines); assert n, sys.argv[3]; print(sys.argv[3], n, 'coded')\" ${SDC}/coded.json ${PROJECT_SOURCE_DIR}/docs/CHECK.md $f || exit 1; done")
set_tests_properties(check.sdc.every_fail_coded PROPERTIES FIXTURES_REQUIRED sdc_planted)

# bench compare --fleet over planted `bench check --out` directories: one node differs (exit 1,
# named); all agree, another model in its own group (exit 0); the emulated device labelled; bad
# input (a malformed digest, JSON that is not, not a directory: exit 2, named)
set(FL ${SDC}/fleet)
add_test(NAME compare.fleet_sdc.one_node_differs_exit_1 COMMAND sh -c
  "out=$($<TARGET_FILE:bench> compare --fleet ${FL}/node1 ${FL}/node2 ${FL}/node3 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || { echo \"exit $rc, want 1\"; exit 1; }; echo \"$out\" | grep -E '^node03 +4  DIFFERS +cuda:1 f32 \\(NVIDIA A100-SXM4-80GB\\): d{16}, the fleet.s b{16} \\(5 of 6 GPUs\\)$' && [ $(echo \"$out\" | grep -cE '^node0[12] +4  matches') -eq 2 ] && echo \"$out\" | grep -E '^DIFFERS: 1 of 3 nodes have a fingerprint other than the fleet.s: node03$'")
add_test(NAME compare.fleet_sdc.all_agree_exit_0 COMMAND sh -c
  "out=$($<TARGET_FILE:bench> compare --fleet ${FL}/node1 ${FL}/node2 ${FL}/node4 ${FL}/node5-h100 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 0 ] || { echo \"exit $rc, want 0\"; exit 1; }; [ $(echo \"$out\" | grep -cE '^node0[1245] +4  matches') -eq 4 ] && echo \"$out\" | grep -E '^AGREE: no node.s fingerprint differs from the fleet.s \\(4 nodes\\)$' && echo \"$out\" | grep -E '^timings: not compared'")
add_test(NAME compare.fleet_sdc.emulated_labelled COMMAND sh -c
  "out=$($<TARGET_FILE:bench> compare --fleet ${FL}/node1 ${FL}/emu 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || { echo \"exit $rc, want 1\"; exit 1; }; echo \"$out\" | grep -E '^node01 +4  matches +$' && echo \"$out\" | grep -E '^emu01 +4  DIFFERS \\(EMULATED\\) .*no majority in the fleet' && echo \"$out\" | grep -E '^EMULATED: a run on the emulated device'")
add_test(NAME compare.fleet_sdc.bad_input_exit_2 COMMAND sh -c
  "for d in 'bad-digest:bad-digest/status.json: check.gpus\\[0\\].sdc\\[\"sdc.train\"\\].fingerprints\\[0\\].digest' 'bad-json:bad-json/status.json: not valid JSON' 'not-a-dir:not-a-dir: not a directory'; do a=\${d%%:*}; want=\${d#*:}; out=$($<TARGET_FILE:bench> compare --fleet ${FL}/node1 ${FL}/node2 ${FL}/$a 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] || { echo \"$a: exit $rc, want 2\"; exit 1; }; echo \"$out\" | grep -qE \"^bench compare: .*$want\" || { echo \"$a: not named\"; exit 1; }; done")
set_tests_properties(compare.fleet_sdc.one_node_differs_exit_1 compare.fleet_sdc.all_agree_exit_0
  compare.fleet_sdc.emulated_labelled compare.fleet_sdc.bad_input_exit_2
  PROPERTIES FIXTURES_REQUIRED sdc_planted)

if(TDM_CUDA_EMU)
  # Level 3 end to end on 2 emulated devices: sdc.gemm and sdc.train recorded and judged on each
  # (PASS), the same GEMM digest and the same fingerprints on both (status.json); sdc.gemm's 9
  # comparisons made on the device and read back once (no copy and hash per repetition).
  set(SDC_E2E ${TEST_TMP}/sdc/e2e)
  set(SDC_PY "import json,re,sys; g=json.load(open(sys.argv[1]+'/status.json'))['check']['gpus']; s=[x['sdc'] for x in g]; assert len(s)==2; assert all(x['sdc.gemm']['repeats']==10 and x['sdc.gemm']['mismatches']==0 and re.fullmatch('[0-9a-f]{64}',x['sdc.gemm']['digest']) for x in s), s; assert all(x['sdc.gemm']['compare']=='device' and x['sdc.gemm']['readbacks']==1 and 0 < x['sdc.gemm']['gpu_seconds'] and 0 < x['sdc.gemm']['busy_fraction'] <= 1 for x in s), s; fp=[{f['precision']:f['digest'] for f in x['sdc.train']['fingerprints']} for x in s]; assert all(sorted(f)==['bf16','f32'] for f in fp), fp; assert s[0]['sdc.gemm']['digest']==s[1]['sdc.gemm']['digest']; same=fp[0]==fp[1]; print('fingerprints', fp, 'same' if same else 'differ'); sys.exit(0 if same==(sys.argv[2]=='same') else 1)")
  add_test(NAME emu.check.sdc_level3_same_fingerprints COMMAND sh -c
    "rm -rf ${SDC_E2E}/clean; mkdir -p ${SDC_E2E}; out=$($<TARGET_FILE:bench> check --level 3 --duration 2 --device all --out ${SDC_E2E}/clean 2>&1); rc=$?; echo \"$out\"; echo \"exit $rc\"; case \"$out\" in 'bench check: no GPU'*) echo 'SKIP: no CUDA device'; exit 77;; esac; [ $(echo \"$out\" | grep -cE '^cuda:[01] +sdc.gemm +0 of 10 differ .*  PASS +on the emulated device: 10 repetitions, the same bits; GEMM: [0-9a-f]{16}, as 2 of the 2 GPUs') -eq 2 ] && [ $(echo \"$out\" | grep -cE '^cuda:[01] +sdc.train .*  PASS +on the emulated device: fingerprints f32: [0-9a-f]{16}, as 2 of the 2 GPUs of its model; bf16: [0-9a-f]{16}, as 2 of the 2') -eq 2 ] && python3 -c \"${SDC_PY}\" ${SDC_E2E}/clean same")
  set_tests_properties(emu.check.sdc_level3_same_fingerprints PROPERTIES LABELS emu
    SKIP_RETURN_CODE 77 TIMEOUT 900 FIXTURES_SETUP sdc_emu_clean ENVIRONMENT "TANDEM_EMU_DEVICES=2")
  # A stuck bit in cuda:1's memory, where the training run's first tensors lie (1 MiB + 2, the
  # arena's first allocation; bit 6 stuck at 1): its fingerprints differ from cuda:0's, the check
  # FAILs both (2 GPUs: no majority, TDM-F123; exit 1), and `bench compare --fleet` with the
  # clean run names this node (3 of the fleet's 4 GPUs agree)
  add_test(NAME emu.check.sdc_stuck_bit_fingerprints_differ COMMAND sh -c
    "rm -rf ${SDC_E2E}/stuck; out=$($<TARGET_FILE:bench> check --level 3 --duration 2 --device all --out ${SDC_E2E}/stuck 2>&1); rc=$?; echo \"$out\"; echo \"exit $rc\"; case \"$out\" in *'bench check: no GPU'*) echo 'SKIP: no CUDA device'; exit 77;; esac; [ $rc -eq 1 ] || { echo 'want exit 1'; exit 1; }; echo \"$out\" | grep -E '^tandem emu: TANDEM_EMU_FLIP_BIT: bit 6 of the byte at .* \\(emulated cuda:1 \\+ 1048578\\) is stuck at 1' && [ $(echo \"$out\" | grep -cE '^cuda:[01] +sdc.train .*  FAIL +TDM-F123 +on the emulated device: .*disagree, no digest has a majority') -eq 2 ] && python3 -c \"${SDC_PY}\" ${SDC_E2E}/stuck differ || exit 1; cmp=$($<TARGET_FILE:bench> compare --fleet ${SDC_E2E}/clean ${SDC_E2E}/stuck 2>&1); rc=$?; echo \"$cmp\"; [ $rc -eq 1 ] && echo \"$cmp\" | grep -E '^${SDC_E2E}/stuck +4  DIFFERS \\(EMULATED\\) +cuda:1 (f32|bf16) .*\\(3 of 4 GPUs\\)' && echo \"$cmp\" | grep -E '^${SDC_E2E}/clean +4  matches \\(EMULATED\\)'")
  set_tests_properties(emu.check.sdc_stuck_bit_fingerprints_differ PROPERTIES LABELS emu
    SKIP_RETURN_CODE 77 TIMEOUT 900 FIXTURES_REQUIRED sdc_emu_clean
    ENVIRONMENT "TANDEM_EMU_DEVICES=2;TANDEM_EMU_FLIP_DEVICE=1;TANDEM_EMU_FLIP_BIT=1048578:6:1")
endif()
