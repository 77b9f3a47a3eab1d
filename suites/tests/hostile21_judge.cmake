# hostile21_judge.cmake — issue 21's judging defects (items 4, 6 and 10), one test each: `bench
# check` never passes a figure that cannot be true or a check that was not measured, refuses
# figures and expectations that cannot be true or that JSON readers read differently (exit 2,
# the field named), `bench compare` names a change too large to be real and refuses emulated runs
# however they say so, and the outlier rule judges 5,000 GPUs in seconds. The inputs are written
# by hostile21_judge.sh; test_check.c's unit tests (check.unit) hold the finer cases.
set(H21J ${TEST_TMP}/hostile21_judge)
set(B $<TARGET_FILE:bench>)
set(EXPECT sh ${CMAKE_CURRENT_SOURCE_DIR}/expect.sh)
set(EXP ${PROJECT_SOURCE_DIR}/suites/check/expectations.json)
set(BCF ${B} check --expect ${EXP} --from-figures)

add_test(NAME hostile21.judge_inputs COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/hostile21_judge.sh
         ${H21J} ${CMAKE_CURRENT_SOURCE_DIR}/check/healthy-2xa100.json ${EXP})
set_tests_properties(hostile21.judge_inputs PROPERTIES FIXTURES_SETUP hostile21_judge)
set(H21J_TESTS)

# ---- item 4: no PASS for what cannot be true or was not measured ------------------------------
# A 100 TB/s copy on an A100 (ratio 49) is above the GPU's physical limit: a FAIL naming it.
add_test(NAME hostile21.check_faster_than_the_gpu_fails COMMAND ${EXPECT} 1
         "cuda:0 +memory.d2d +100000 GB/s .* FAIL +TDM-F011 +faster than this GPU can be: a timing bug\\?"
         --not "^PASS" -- ${BCF} ${H21J}/fig/d2d-100tbs.json)
# Every figure at 1e300: every performance line of both GPUs fails, none passes.
add_test(NAME hostile21.check_every_figure_1e300_fails COMMAND ${EXPECT} 1
         "^FAIL: 18 checks failed" --not "(GB/s|TFLOP/s) .* PASS " --
         ${BCF} ${H21J}/fig/all-1e300.json)
# A GPU with only one check present: the absent ones are listed and counted, the verdict is
# incomplete (exit 4), never a PASS.
add_test(NAME hostile21.check_one_check_present_incomplete COMMAND ${EXPECT} 4
         "^INCOMPLETE: 16 expected checks were not measured .*: cuda:0 numerics.golden cuda:0 numerics.conform cuda:0 train cuda:0 gemm.tf32"
         --not "^PASS" -- ${BCF} ${H21J}/fig/one-check.json)
add_test(NAME hostile21.check_null_figure_not_measured COMMAND ${EXPECT} 4
         "cuda:0 +memory.d2d .* not run .*no value and no error: not measured" --not "^PASS" --
         ${BCF} ${H21J}/fig/value-null.json)
# Non-finite figures and figures without a value are bad input, named.
add_test(NAME hostile21.check_infinite_figure_exit_2 COMMAND ${EXPECT} 2
         "gpus\\[0\\].figures.memory.d2d: value inf is not a finite rate" -- ${BCF} ${H21J}/fig/value-inf.json)
add_test(NAME hostile21.check_empty_figure_exit_2 COMMAND ${EXPECT} 2
         "gpus\\[0\\].figures.memory.d2d: needs" -- ${BCF} ${H21J}/fig/figure-empty.json)
# A figures file JSON readers read differently is refused.
add_test(NAME hostile21.check_figures_duplicate_key_exit_2 COMMAND ${EXPECT} 2
         "duplicate key \"value\" in gpus\\[0\\].figures.memory.d2d" -- ${BCF} ${H21J}/fig/duplicate-key.json)
add_test(NAME hostile21.check_figures_trailing_text_exit_2 COMMAND ${EXPECT} 2
         "--from-figures .*trailing.json: not JSON at byte [0-9]+ .*text after the value" --
         ${BCF} ${H21J}/fig/trailing.json)
# bench compare: a change too large to be real is named in a warning, never called faster.
add_test(NAME hostile21.compare_change_too_large_suspect COMMAND ${EXPECT} 1
         "warning: ops/copy/n:1 GB/s: 1.004e\\+04 against 1.004 is a change by 10x or more: too large to be real"
         --not "  faster$" -- ${B} compare ${H21J}/cmp/base ${H21J}/cmp/huge)
add_test(NAME hostile21.compare_fleet_member_too_far_suspect COMMAND ${EXPECT} 1
         "warning: nnode4 cpu: ops/copy/n:1 GB/s: .*too large to be real" --not "  faster$" --
         ${B} compare --fleet ${H21J}/cmp/node1 ${H21J}/cmp/node2 ${H21J}/cmp/node3 ${H21J}/cmp/node4)
add_test(NAME hostile21.compare_max_change_option COMMAND ${EXPECT} 0
         "1 compared: 0 slower, 1 faster, 0 same" --not "  suspect$" --
         ${B} compare --max-change 100000 ${H21J}/cmp/base ${H21J}/cmp/huge)
list(APPEND H21J_TESTS hostile21.check_faster_than_the_gpu_fails hostile21.check_every_figure_1e300_fails
     hostile21.check_one_check_present_incomplete hostile21.check_null_figure_not_measured
     hostile21.check_infinite_figure_exit_2 hostile21.check_empty_figure_exit_2
     hostile21.check_figures_duplicate_key_exit_2 hostile21.check_figures_trailing_text_exit_2
     hostile21.compare_change_too_large_suspect hostile21.compare_fleet_member_too_far_suspect
     hostile21.compare_max_change_option)

# ---- item 6: the expectations and the fleet file ----------------------------------------------
# Absurd expectations that silently disabled their checks are refused, naming the field.
function(h21_expect_bad name re)   # --expect exp/NAME.json: exit 2, the message matching RE
  add_test(NAME hostile21.expect_${name}_exit_2 COMMAND ${EXPECT} 2 "--expect .*/${name}.json: ${re}" --
           ${B} check --expect ${H21J}/exp/${name}.json --from-figures ${CMAKE_CURRENT_SOURCE_DIR}/check/healthy-2xa100.json)
  set_tests_properties(hostile21.expect_${name}_exit_2 PROPERTIES FIXTURES_REQUIRED hostile21_judge)
endfunction()
h21_expect_bad(tflops-inf "models\\[0\\] \\(A100 PCIe 40GB\\): tflops.bf16 is not a positive number")
h21_expect_bad(pcie-gen-99 "models\\[0\\] \\(A100 PCIe 40GB\\): \"pcie_gen\" is not a PCIe generation")
h21_expect_bad(pcie-width-half "models\\[0\\] \\(A100 PCIe 40GB\\): \"pcie_width\" is not a PCIe width")
h21_expect_bad(duplicate-key "duplicate key \"hbm_GBps\" in models\\[3\\]")
h21_expect_bad(trailing "not JSON at byte [0-9]+ .*text after the value")
h21_expect_bad(bad-utf8 "invalid UTF-8 at byte")
h21_expect_bad(model-spaces "models\\[3\\]: \"model\" is blank")
# --write-expect writes only what --expect reads: a directory named twice counts once, a run whose
# recorded PASS is for 10^8 GB/s is left out (judged again), and so is an emulated run said only by
# a hidden samples file; the file it writes is judged by. (check.unit writes the runs.)
set(WE ${TEST_TMP}/check/we21)
add_test(NAME hostile21.write_expect_roundtrip COMMAND ${EXPECT} 0 "^PASS: 2 GPUs" -- sh -c
         "${B} check --write-expect ${WE}-good ${WE}-good/. ${WE}-d2d-1e8 ${WE}-emulated > ${H21J}/fleet.json 2> ${H21J}/fleet.err || { cat ${H21J}/fleet.err; exit 9; }; cat ${H21J}/fleet.err; for want in 'we21-good/. (the same directory as ' 'we21-d2d-1e8 cuda:0 (it had a FAIL)' 'we21-emulated (a run on the emulated device: .x.samples.csv'; do grep -qF \"$want\" ${H21J}/fleet.err || { echo \"left out: not said: $want\"; exit 9; }; done; grep -Eq '\"memory.d2d\":[[:space:]]+2,?$' ${H21J}/fleet.json || { echo 'checks_from: not 2 figures of memory.d2d (a directory counted twice?)'; exit 9; }; exec ${B} check --expect ${H21J}/fleet.json --from-figures ${CMAKE_CURRENT_SOURCE_DIR}/check/healthy-2xa100.json")

# ---- item 10: the outlier rule's cost, emulated runs in disguise, NVML and link ranges ----------
# 5,000 GPUs: the outlier rule was cubic (over a minute); now seconds. The slow one is named.
add_test(NAME hostile21.check_outliers_5000_gpus COMMAND ${EXPECT} 1
         "node: OUTLIER cuda:1234 outlier.gemm.bf16: cuda:1234 is 0.56 x the median of its 4999 siblings" -- sh -c
         "$<TARGET_FILE:test_check> ${EXP} ${H21J}/5000-gpus.json --gpus 5000 && exec ${B} check --expect ${EXP} --from-figures ${H21J}/5000-gpus.json")
set_tests_properties(hostile21.check_outliers_5000_gpus PROPERTIES TIMEOUT 60)
list(APPEND H21J_TESTS hostile21.check_outliers_5000_gpus)
# A results directory that is an emulated run is refused by bench compare however it says so.
function(h21_compare_refuses name re)   # bench compare base cmp/NAME: exit 2, RE said
  add_test(NAME hostile21.compare_refuses_emulated_${name} COMMAND ${EXPECT} 2 "${re}" --
           ${B} compare ${H21J}/cmp/base ${H21J}/cmp/${name})
  set_tests_properties(hostile21.compare_refuses_emulated_${name} PROPERTIES FIXTURES_REQUIRED hostile21_judge)
endfunction()
h21_compare_refuses(cuda-all "context.json: its env says its device is emulated")
h21_compare_refuses(csv-upper "ops.samples.csv: column emulated = true")
h21_compare_refuses(csv-one "ops.samples.csv: column emulated = true")
h21_compare_refuses(hidden-samples "\\.x\\.samples\\.csv: column emulated = true")
h21_compare_refuses(dup-key "duplicate key \"emulated\"")
# NVML and link readings outside what a GPU can report are bad input, named.
function(h21_check_bad name re)   # bench check --from-figures fig/NAME.json: exit 2, RE said
  add_test(NAME hostile21.check_${name}_exit_2 COMMAND ${EXPECT} 2 "gpus\\[0\\].${re}" --
           ${BCF} ${H21J}/fig/${name}.json)
  set_tests_properties(hostile21.check_${name}_exit_2 PROPERTIES FIXTURES_REQUIRED hostile21_judge)
endfunction()
h21_check_bad(throttle-1e30 "health.throttle_reasons: 1e\\+30 is not a bitmask")
h21_check_bad(remap-failed-2 "health.remapped_rows_failed: 2 is not NVML's flag")
h21_check_bad(temp-minus-300 "health.temperature_c: -300 is not a GPU temperature")
h21_check_bad(link-gen9-x64 "link.pcie_gen: not a PCIe generation")
set_tests_properties(${H21J_TESTS} PROPERTIES FIXTURES_REQUIRED hostile21_judge)
set_tests_properties(hostile21.write_expect_roundtrip PROPERTIES
                     FIXTURES_REQUIRED "hostile21_judge;check21_runs")
