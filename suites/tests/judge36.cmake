# judge36.cmake — issue 36's judging findings (item 2): figures `bench check` must not pass. A
# level-4 pulsed load that never ran (no window, or no clocks-event reason read) is incomplete, not
# `missing`; forged or inconsistent figures are refused (exit 2, the field named) or judged
# incomplete (docs/CHECK.md says which): medians that are not their samples', one window a phase, a
# memory test "pass" over 10 % of the free memory, an SDC record of other work than the check's
# (one fingerprint of 1 step, a 1x1x1 GEMM of 2 repetitions), an SM clock of 0 MHz, an emulated GPU
# inside real figures. judge36_plant.py writes them from the recorded level-4 node.
set(J36 ${TEST_TMP}/judge36)
set(J36_BC "$<TARGET_FILE:bench> check --expect ${PROJECT_SOURCE_DIR}/suites/check/expectations.json --from-figures ${J36}")
add_test(NAME judge36.plant COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/judge36_plant.py
         ${CMAKE_CURRENT_SOURCE_DIR}/check/level4-pulsed-brake.json ${J36})
set_tests_properties(judge36.plant PROPERTIES FIXTURES_SETUP judge36_planted)
# judge36_case(NAME FILE RC GREP...): judged through the CLI, exit RC, each grep of its output
function(judge36_case name file rc)
  string(REPLACE ";" " && " greps "${ARGN}")
  add_test(NAME judge36.${name} COMMAND sh -c
    "out=$(${J36_BC}/${file}.json 2>&1); rc=$?; echo \"$out\"; [ $rc -eq ${rc} ] || { echo \"exit $rc, want ${rc}\"; exit 1; }; ${greps}")
  set_tests_properties(judge36.${name} PROPERTIES FIXTURES_REQUIRED judge36_planted)
endfunction()
# the base: whole and healthy, it passes (so that each fault below is what changes the verdict)
judge36_case(healthy_level4_pass healthy-l4 0 "echo \"$out\" | grep -E '^PASS: 2 GPUs'")
# a pulsed load that never ran, or whose reasons were never read: incomplete (exit 4)
judge36_case(pulsed_no_window_incomplete pulsed-no-window 4
  "echo \"$out\" | grep -E '^cuda:1 +pulsed.load .* not run +the pulsed load ran no window'"
  "echo \"$out\" | grep -E '^INCOMPLETE: 1 expected check was not measured .*: cuda:1 pulsed.load$'")
judge36_case(pulsed_no_reason_incomplete pulsed-no-reason 4
  "echo \"$out\" | grep -E '^cuda:1 +pulsed.load .* not run +no clocks-event reason was read during the pulses'")
# medians of 250 TFLOP/s over a series of one sample: not the samples' medians (exit 2)
judge36_case(sustained_median_forged_exit_2 sustained-median-forged 2
  "echo \"$out\" | grep -F 'gpus[1].series.sustained.load.median_tflops.stress: a figure is not the median of the phase' | grep -F ' 0 windows'")
# one window per phase, consistent: targeted stress and power not measured (exit 4)
judge36_case(sustained_one_window_incomplete sustained-one-window 4
  "echo \"$out\" | grep -E '^cuda:1 +sustained.stress .* not run +1 stress window: not measured \\(2 at least\\)'"
  "echo \"$out\" | grep -E '^cuda:1 +sustained.power .* not run +1 targeted power window'")
# one fingerprint (f32 alone, 50 steps): the check trains bf16 too (exit 4)
judge36_case(sdc_one_fingerprint_incomplete sdc-one-fingerprint 4
  "echo \"$out\" | grep -E '^cuda:1 +sdc.train .* not run +no bf16 fingerprint: the check trains f32 and bf16'")
# a memory test "pass" that does not say what it covered (exit 2)
judge36_case(memtest_pass_no_fraction_exit_2 memtest-no-fraction 2
  "echo \"$out\" | grep -F 'gpus[1].numerics.memory.test.fraction: a pass without the fraction'")
# a memory test "pass" over 10 % of the free memory (exit 2)
judge36_case(memtest_pass_10pct_exit_2 memtest-10pct 2
  "echo \"$out\" | grep -F 'gpus[1].numerics.memory.test: a pass over 10.0 % of the free memory is no pass'")
# one fingerprint of 1 step, a 1x1x1 GEMM of 2 repetitions: not the check's work (exit 4)
judge36_case(sdc_forged_incomplete sdc-forged 4
  "echo \"$out\" | grep -E '^cuda:1 +sdc.gemm .* not run +a 1x1x1 bf16 GEMM is not the check.s \\(4096\\^3 bf16\\)'"
  "echo \"$out\" | grep -E '^cuda:1 +sdc.train .* not run +fingerprints\\[0\\]: gpt:L2-H2-D32-T16-V67, 1 step is not the check.s run'")
# an SM clock of 0 MHz (exit 2), an emulated GPU inside real figures (exit 2)
judge36_case(sm_clock_0_exit_2 sm-clock-0 2
  "echo \"$out\" | grep -F 'gpus[1].health.clock_sm_mhz: 0 is not a clock of a GPU that answers NVML'")
judge36_case(emulated_mix_exit_2 emulated-mix 2
  "echo \"$out\" | grep -F 'gpus[1].emulated: true beside GPUs that are not emulated'")
# a reason bit newer drivers define (0x200), beside the power cap: kept and named, not refused
judge36_case(throttle_unknown_bit_named throttle-unknown 0
  "echo \"$out\" | grep -E '^cuda:1 +nvml.throttle +sw power cap, unknown 0x200 .* PASS'")
# a memory test "pass" while NVML counted a corrected ECC error, or with a remap pending (exit 2)
judge36_case(memtest_pass_ecc_grew_exit_2 memtest-ecc-grew 2
  "echo \"$out\" | grep -F 'gpus[1].numerics.memory.test: a pass while NVML' | grep -F 'ecc_corrected_volatile grew from 0 to 3'")
judge36_case(memtest_pass_remap_pending_exit_2 memtest-remap-pending 2
  "echo \"$out\" | grep -F 'gpus[1].numerics.memory.test: a pass with remapped_rows_pending set at its end'")
# item 4: the check's plots show each GPU's figure against its model's datasheet value and the
# WARN/FAIL thresholds, and the series mark their phases (the files given to gnuplot; the PNG and
# SVG drawn where gnuplot is installed)
add_test(NAME judge36.plots_spec_thresholds_phases COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_plot_marks.py
         $<TARGET_FILE:bench> ${PROJECT_SOURCE_DIR}/suites/check/expectations.json
         ${CMAKE_CURRENT_SOURCE_DIR}/check/level4-pulsed-brake.json ${TEST_TMP}/judge36_plots ${PROJECT_SOURCE_DIR}/plots)
set_tests_properties(judge36.plots_spec_thresholds_phases PROPERTIES TIMEOUT 120)
