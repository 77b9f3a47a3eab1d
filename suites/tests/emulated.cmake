# emulated.cmake — runs on the emulated CUDA device (harness/emulated.h, -DTDM_CUDA_EMU=ON): the
# helper that tells one (unit.emulated), and the emulated_run fixture: a real CPU run of the
# transfer suite, copied and marked as `bench run` marks a run on the emulated cuda:0 (all markers:
# emu/; the CSVs' column alone: emu_csv/), for report.cmake's and envcmp.cmake's tests. An emulated
# build also runs bench env and bench run on its cuda:0 (env.emulated_text, run.emulated_cuda0).
tdm_test_executable(emulated)
target_sources(test_emulated PRIVATE ${PROJECT_SOURCE_DIR}/harness/emulated.c
                                     ${PROJECT_SOURCE_DIR}/harness/json_strict.c
                                     ${PROJECT_SOURCE_DIR}/harness/fileio.c)
target_include_directories(test_emulated PRIVATE ${PROJECT_SOURCE_DIR}/harness)
set(EMU ${TEST_TMP}/emulated)
add_test(NAME unit.emulated COMMAND test_emulated unit ${EMU}/unit)

add_test(NAME harness.emulated_marked_run COMMAND sh -c
  "rm -rf ${EMU}/cpu && $<TARGET_FILE:bench> run --device cpu --quick --suite transfer --repetitions 1 --min-time 0.01 --out ${EMU}/cpu >/dev/null && $<TARGET_FILE:test_emulated> mark ${EMU}/cpu ${EMU}/emu && $<TARGET_FILE:test_emulated> mark ${EMU}/cpu ${EMU}/emu_csv csv")
set_tests_properties(harness.emulated_marked_run PROPERTIES FIXTURES_SETUP emulated_run TIMEOUT 300)

if(TDM_CUDA_EMU)
  # bench env names the device EMULATED before anything else, and per GPU
  add_test(NAME env.emulated_text COMMAND $<TARGET_FILE:bench> env)
  set_tests_properties(env.emulated_text PROPERTIES PASS_REGULAR_EXPRESSION
    "EMULATED CUDA device: [^\n]+\n.*GPUs: +0 \\(the [0-9]+ CUDA devices? below (is|are) EMULATED on the CPU \\(suites/emu\\): not a GPU\\)\ngpu 0: +EMULATED on the CPU \\(suites/emu\\): not a GPU")
  # bench run on cuda:0: every benchmark runs and verifies (exit 0), every file and line is marked
  add_test(NAME run.emulated_cuda0 COMMAND sh -c
    "rm -rf ${EMU}/run && $<TARGET_FILE:bench> run --device cuda:0 --quick --suite transfer --repetitions 1 --min-time 0.01 --out ${EMU}/run && $<TARGET_FILE:test_emulated> run ${EMU}/run && $<TARGET_FILE:test_run> ${EMU}/run complete 1")
  set_tests_properties(env.emulated_text run.emulated_cuda0 PROPERTIES LABELS emu)   # the emu presets
  set_tests_properties(run.emulated_cuda0 PROPERTIES TIMEOUT 600 PASS_REGULAR_EXPRESSION
    "cuda:0 is the EMULATED CUDA device on the CPU [^\n]+ not GPU figures\n.*\\[emulated\\]\n.*EMULATED: these timings measure the emulated CUDA device on the CPU, not a GPU.*emulated run: ok.*a valid complete run")
endif()
