# counters.cmake — the emulated device's counters and racecheck through the whole program
# (docs/EMULATION.md "Counters", "Racecheck"), and `bench counters`' report.
set(CT ${TEST_TMP}/counters)
# The report from a counters file written by hand: the roofline, efficiencies and offenders worked
# out by hand; bad files exit 2.
add_test(NAME counters.report_by_hand
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/counters_report.sh $<TARGET_FILE:bench> ${CT}/hand)
if(TDM_CUDA_EMU)
  set(CB $<TARGET_FILE:bench>)
  set(CGPT "train --device cuda:0 --model gpt:L2-H2-D32-T16-V67 --batch 4 --opt adamw --lr 1e-2")
  # One GPT training step (bf16 autocast, fused AdamW as llm.c and nanoGPT train) counted, then
  # reported: the fused attention's tensor cores among its kernels, PREDICTED, its offenders, the
  # JSON beside; and its hot kernels within their budgets (suites/emu/budgets.json: a kernel past
  # one, or one that did not run, exits 1).
  add_test(NAME emu.counters.gpt_step_report COMMAND sh -c
    "rm -rf ${CT}/gpt && mkdir -p ${CT}/gpt && TANDEM_EMU_COUNTERS=${CT}/gpt/c.json ${CB} ${CGPT} --steps 1 --amp bf16 --fused-adam >/dev/null && ${CB} counters --json ${CT}/gpt/pred.json --budget ${PROJECT_SOURCE_DIR}/suites/emu/budgets.json ${CT}/gpt/c.json > ${CT}/gpt/out.txt; rc=$?; cat ${CT}/gpt/out.txt; [ $rc -eq 0 ] && grep -q '^PREDICTED' ${CT}/gpt/out.txt && grep -Eq '^k_flash_fwd<T, DP> +2 .* [1-9][0-9]* +[0-9.]+ ' ${CT}/gpt/out.txt && grep -q 'Top offenders' ${CT}/gpt/out.txt && grep -q 'BUDGET ok   k_adam_multi<false>' ${CT}/gpt/out.txt && grep -q '\"predicted\":[[:space:]]*true' ${CT}/gpt/pred.json")
  set_tests_properties(emu.counters.gpt_step_report PROPERTIES LABELS emu)
  # Racecheck over every op's kernels (the golden cases, forward and backward) and GPT training
  # steps in f32 and bf16 (fused attention, classifier, add + LayerNorm, AdamW): no hazard. Forward
  # order only in CI (each check sees every access whatever the order).
  add_test(NAME emu.racecheck.golden COMMAND sh -c
    "TANDEM_EMU_RACECHECK=1 exec ${CB} replay --device cuda:0 --quiet ${GOLDEN_CASES_SH}")
  add_test(NAME emu.racecheck.gpt_steps COMMAND sh -c
    "TANDEM_EMU_RACECHECK=1 ${CB} ${CGPT} --steps 2 >/dev/null && TANDEM_EMU_RACECHECK=1 ${CB} ${CGPT} --steps 2 --amp bf16 >/dev/null")
  set_tests_properties(emu.racecheck.golden emu.racecheck.gpt_steps PROPERTIES LABELS emu)
endif()

# bench resources: ptxas's reports written by hand (occupancy worked out by hand, spill budgets,
# bad input); and, in the CUDA build, the reports its own compile kept (kernels/ptxas_report.sh)
# against the kernels' spill budgets (kernels/ptxas_budgets.json).
add_test(NAME resources.report_by_hand
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/resources_report.sh $<TARGET_FILE:bench> ${CT}/res)
if(TDM_CUDA AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
  add_test(NAME kernels.ptxas_budget COMMAND $<TARGET_FILE:bench> resources --budget
           ${PROJECT_SOURCE_DIR}/kernels/ptxas_budgets.json ${PROJECT_BINARY_DIR}/CMakeFiles/tandem.dir/kernels)
endif()
