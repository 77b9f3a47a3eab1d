# run.cmake — `bench run` and `bench list` end to end on the CPU, and the Google Benchmark shim.
# Each run is --quick or a short --min-time: the whole file takes seconds (more under ASan).
tdm_test_executable(gbench_shim)
target_sources(test_gbench_shim PRIVATE ${PROJECT_SOURCE_DIR}/harness/gbench_shim.cc)
target_include_directories(test_gbench_shim PRIVATE ${PROJECT_SOURCE_DIR}/harness)
target_link_libraries(test_gbench_shim PRIVATE benchmark::benchmark)
tdm_test_executable(run)
target_sources(test_run PRIVATE ${PROJECT_SOURCE_DIR}/harness/fileio.c)

set(B $<TARGET_FILE:bench>)
set(R ${TEST_TMP}/run)
add_test(NAME unit.gbench_shim COMMAND sh -c "mkdir -p ${R} && exec $<TARGET_FILE:test_gbench_shim> ${R}")

# A quick CPU run: context.json, ops.json, ops.csv, ops.samples.csv (3 samples each), status.json.
add_test(NAME run.cpu_quick COMMAND sh -c
  "rm -rf ${R}/quick && ${B} run --device cpu --quick --suite ops --out ${R}/quick && exec $<TARGET_FILE:test_run> ${R}/quick complete 3")
set_tests_properties(run.cpu_quick PROPERTIES TIMEOUT 120)

# Bad arguments exit 2 with a message; nothing is written.
add_test(NAME run.bad_arguments_exit_2 COMMAND sh -c
  "rm -rf ${R}/bad && mkdir -p ${R}/bad && touch ${R}/bad/file && for args in '--suite nosuch' '--suite ops,nosuch' '--repetitions 0' '--repetitions two' '--min-time -1' '--min-time x' '--device tpu:0' '--filter (' '--filter no-such-benchmark' '--out ${R}/bad/file/sub' 'extra'; do ${B} run --device cpu --quick --suite ops --out ${R}/bad/out $args 2>${R}/bad/err; rc=$?; [ $rc -eq 2 ] || { echo \"exit $rc for: $args\"; exit 1; }; [ -s ${R}/bad/err ] || { echo \"no message for: $args\"; exit 1; }; [ ! -e ${R}/bad/out/status.json ] || { echo \"wrote results for: $args\"; exit 1; }; done; ${B} list --suite nosuch; [ $? -eq 2 ]")

# Ctrl-C during the first benchmark (--min-time 1): it finishes, the rest are unfinished, the
# files are valid, exit 130.
add_test(NAME run.interrupted_keeps_results COMMAND sh -c
  "rm -rf ${R}/int; ${B} run --device cpu --suite ops --repetitions 1 --min-time 1 --out ${R}/int >/dev/null & pid=$!; i=0; while [ ! -e ${R}/int/status.json ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; sleep 0.5; kill -INT $pid; wait $pid; rc=$?; [ $rc -eq 130 ] || { echo \"exit $rc, want 130\"; exit 1; }; exec $<TARGET_FILE:test_run> ${R}/int partial")
set_tests_properties(run.interrupted_keeps_results PROPERTIES TIMEOUT 120)

# bench list: the suite, its benchmarks, their units and parameters.
add_test(NAME run.list COMMAND ${B} list --suite ops)
set_tests_properties(run.list PROPERTIES PASS_REGULAR_EXPRESSION
  "ops \\[cpu\\].*matmul +GFLOP/s.*n:64  n:128  n:256.*add +GB/s.*mlp_train +samples/s")

# --flush-l2: runs (the flush sits outside the timed region) and is recorded in the context.
add_test(NAME run.flush_l2_recorded COMMAND sh -c
  "rm -rf ${TEST_TMP}/flush && $<TARGET_FILE:bench> run --device cpu --quick --suite ops --filter add --flush-l2 --out ${TEST_TMP}/flush >/dev/null && grep -q '\"flush_l2\":[[:space:]]*true' ${TEST_TMP}/flush/context.json")

# --budget: a full-size CPU run in 60 s ends within 5 % of it, its suites in the priority order,
# every row it did not run listed as skipped for time; the progress line on a terminal only
# (budget.sh). Under the sanitizers a shorter run of the transfer suite checks the same: its
# rows grow to 268 MB copies of seconds each there, so the run ends by cutting a row part-way,
# after repetitions of it succeeded (the shim starts a repetition's loop before ending it in
# error, so Google Benchmark's statistics do not abort: unit.gbench_shim).
if(NOT TDM_SANITIZE)
  add_test(NAME run.budget_60s COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/budget.sh ${B} /usr/bin/python3 ${R}/budget 60)
  set_tests_properties(run.budget_60s PROPERTIES TIMEOUT 240)
else()
  add_test(NAME run.budget_20s COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/budget.sh ${B} /usr/bin/python3 ${R}/budget 20 --suite transfer)
  set_tests_properties(run.budget_20s PROPERTIES TIMEOUT 240)
endif()
# A bad --budget exits 2 and writes nothing.
add_test(NAME run.budget_bad_exit_2 COMMAND sh -c
  "rm -rf ${R}/bbad; for b in '' x 10q -5s 1e9 'm'; do ${B} run --device cpu --quick --suite ops --budget \"$b\" --out ${R}/bbad 2>${R}/bbad.err; rc=$?; [ $rc -eq 2 ] || { echo \"exit $rc for --budget '$b'\"; exit 1; }; grep -q 'budget' ${R}/bbad.err || { echo \"no message for '$b'\"; exit 1; }; [ ! -e ${R}/bbad/status.json ] || exit 1; done")
# Under --budget, amp leaves out a model whose initial weights take more than a quarter of its
# share to draw (the 60 M-parameter MLP, cuda only: on a GPU, or the emulated device), each row
# listed as skipped for time with the figures; without a budget it registers them (bench list).
add_test(NAME gpu.bench.amp_budget_sizes_rows COMMAND sh -c
  "out=$(${B} conform --device cuda:0 --ops add 2>&1); case \"$out\" in *'no CUDA device'*|*'no CUDA backend'*) echo \"SKIP: $(echo \"$out\" | head -n1)\"; exit 77;; esac; ${B} list --suite amp --device cuda:0 | grep -q 'train_mlp_10000_5000_2000_10_f32' || { echo 'not registered without a budget'; exit 1; }; rm -rf ${R}/ampb; ${B} run --device cuda:0 --quick --suite amp --filter 'mlp_10000' --budget 20s --out ${R}/ampb || exit 1; grep -q '\"benchmark\":[[:space:]]*\"train_mlp_10000_5000_2000_10_bf16/batch:64\"' ${R}/ampb/status.json && grep -q 'skipped for time: drawing mlp:10000-5000-2000-10' ${R}/ampb/status.json && ! grep -q 'mlp_10000' ${R}/ampb/amp.csv 2>/dev/null || { cat ${R}/ampb/status.json; exit 1; }")
set_tests_properties(gpu.bench.amp_budget_sizes_rows PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
