# envcmp.cmake — `bench env` and `bench compare`: the U test against scipy's values
# (test_stats.c), and compare on synthetic results directories with known answers; compare refuses
# runs on the emulated CUDA device (emulated.cmake's emulated_run fixture).
tdm_test_executable(stats)
target_sources(test_stats PRIVATE ${PROJECT_SOURCE_DIR}/harness/stats.c)
target_include_directories(test_stats PRIVATE ${PROJECT_SOURCE_DIR}/harness)
add_test(NAME stats.utest_reference COMMAND test_stats)

set(CMP ${TEST_TMP}/compare)
add_test(NAME compare.fixtures COMMAND test_stats fixtures ${CMP})
set_tests_properties(compare.fixtures PROPERTIES FIXTURES_SETUP compare_dirs)

# A planted 20% regression (times x1.2, the rate / 1.2, same repetitions): every row slower,
# exit 1. A PASS_REGULAR_EXPRESSION replaces the exit-code check, so each names the code too.
add_test(NAME compare.planted_regression_exits_1 COMMAND sh -c
  "$<TARGET_FILE:bench> compare ${CMP}/base ${CMP}/slow; rc=$?; echo rc=$rc; test $rc -eq 1")
set_tests_properties(compare.planted_regression_exits_1 PROPERTIES
  PASS_REGULAR_EXPRESSION "3 compared: 3 slower, 0 faster, 0 same.*REGRESSION.*rc=1")
# The same data re-run (0.1% noise): all same, exit 0.
add_test(NAME compare.same_data_exits_0 COMMAND sh -c
  "$<TARGET_FILE:bench> compare ${CMP}/base ${CMP}/same; rc=$?; echo rc=$rc; test $rc -eq 0")
set_tests_properties(compare.same_data_exits_0 PROPERTIES
  PASS_REGULAR_EXPRESSION "3 compared: 0 slower, 0 faster, 3 same.*rc=0")
# A rate 20% higher is faster, not a regression; the other way round the rate is slower.
add_test(NAME compare.higher_rate_is_faster COMMAND sh -c
  "$<TARGET_FILE:bench> compare ${CMP}/base ${CMP}/faster_rate && $<TARGET_FILE:bench> compare ${CMP}/faster_rate ${CMP}/base; echo rc=$?")
set_tests_properties(compare.higher_rate_is_faster PROPERTIES PASS_REGULAR_EXPRESSION
  "copy/bytes:1048576 +GB/s [^\n]+ \\+20.0% [^\n]+ faster\n.*0 slower, 1 faster, 2 same.*copy/bytes:1048576 +GB/s [^\n]+ -16.7% [^\n]+ slower\n.*1 slower, 0 faster, 2 same.*rc=1")
# 3 repetitions a side: p cannot go below 0.1, so the regression is "same", and the user is told.
add_test(NAME compare.too_few_repetitions_noted COMMAND
  $<TARGET_FILE:bench> compare ${CMP}/base3 ${CMP}/slow3)
set_tests_properties(compare.too_few_repetitions_noted PROPERTIES PASS_REGULAR_EXPRESSION
  "0 slower, 0 faster, 3 same\nnote: 3 comparisons with 3 and 3 repetitions cannot reach p < 0.05")
# A threshold above the change turns the regression into "same".
add_test(NAME compare.threshold_option COMMAND sh -c
  "$<TARGET_FILE:bench> compare --threshold 25 ${CMP}/base ${CMP}/slow")
set_tests_properties(compare.threshold_option PROPERTIES
  PASS_REGULAR_EXPRESSION "0 slower, 0 faster, 3 same")
# A fleet of 4 nodes, node3 25% slower: one row per benchmark, all node3, exit 1.
add_test(NAME compare.fleet_flags_slow_node COMMAND sh -c
  "$<TARGET_FILE:bench> compare --fleet ${CMP}/fleet/node1 ${CMP}/fleet/node2 ${CMP}/fleet/node3 ${CMP}/fleet/node4 > ${CMP}/fleet.out; rc=$?; cat ${CMP}/fleet.out; echo rc=$rc; test $rc -eq 1 || exit 1; test $(grep -c '^node3 cpu .* slower$' ${CMP}/fleet.out) -eq 3 && ! grep -q '^node[124] ' ${CMP}/fleet.out && echo only-node3-flagged")
set_tests_properties(compare.fleet_flags_slow_node PROPERTIES
  PASS_REGULAR_EXPRESSION "3 outliers \\(3 slower, 0 faster\\).*rc=1.*only-node3-flagged")
# ... and without the slow node, no outlier, exit 0.
add_test(NAME compare.fleet_without_outlier_exits_0 COMMAND
  $<TARGET_FILE:bench> compare --fleet ${CMP}/fleet/node1 ${CMP}/fleet/node2 ${CMP}/fleet/node4)
set_tests_properties(compare.fleet_without_outlier_exits_0 PROPERTIES
  PASS_REGULAR_EXPRESSION "no outliers")
set_tests_properties(compare.planted_regression_exits_1 compare.same_data_exits_0
  compare.higher_rate_is_faster compare.too_few_repetitions_noted compare.threshold_option compare.fleet_flags_slow_node
  compare.fleet_without_outlier_exits_0 PROPERTIES FIXTURES_REQUIRED compare_dirs)

# Quantities (loss_vs_f32, efficiency) are not speeds: never suspect, faster or slower; a run against
# itself is all same, exit 0 (issue 32). compare_quantities.sh says how.
add_test(NAME compare.quantities_not_speeds COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/compare_quantities.sh
  $<TARGET_FILE:bench> ${CMP}/quantity)

# Bad arguments and unreadable or foreign directories: one line, exit 2.
add_test(NAME compare.bad_input_exits_2 COMMAND sh -c
  "B=$<TARGET_FILE:bench>; mkdir -p ${CMP}/empty ${CMP}/bad; printf 'suite,benchmark\\nx,y\\n' > ${CMP}/bad/s.samples.csv; for args in '${CMP}/base' '${CMP}/base ${CMP}/nosuchdir' '${CMP}/base ${CMP}/empty' '${CMP}/base ${CMP}/bad' '--fleet ${CMP}/base ${CMP}/same' '--threshold x ${CMP}/base ${CMP}/same' '--alpha 2 ${CMP}/base ${CMP}/same' '--nosuch'; do $B compare $args 2>${CMP}/err.txt; rc=$?; [ $rc -eq 2 ] || { echo \"exit $rc for: $args\"; exit 1; }; [ $(wc -l < ${CMP}/err.txt) -ge 1 ] || { echo \"no message for: $args\"; exit 1; }; done; $B compare ${CMP}/base ${CMP}/bad")
set_tests_properties(compare.bad_input_exits_2 PROPERTIES FIXTURES_REQUIRED compare_dirs
  PASS_REGULAR_EXPRESSION "no 'param' column in the header")

# A run on the emulated CUDA device on either side, or in a fleet: one line naming it, exit 2. The
# same CPU run against itself compares (exit 0): the refusal is the marking's. emu_csv is marked by
# its CSVs' `emulated` column alone.
set(EMU ${TEST_TMP}/emulated)
add_test(NAME compare.refuses_emulated COMMAND sh -c
  "B=$<TARGET_FILE:bench>; $B compare ${EMU}/cpu ${EMU}/cpu >/dev/null || { echo 'cpu vs cpu failed'; exit 1; }; rm -rf ${EMU}/cpu2 && cp -r ${EMU}/cpu ${EMU}/cpu2 && echo >> ${EMU}/cpu2/context.json || exit 1; for args in '${EMU}/cpu ${EMU}/emu:NEW ${EMU}/emu' '${EMU}/emu ${EMU}/cpu:BASE ${EMU}/emu' '${EMU}/cpu ${EMU}/emu_csv:NEW ${EMU}/emu_csv' '--fleet ${EMU}/cpu ${EMU}/cpu2 ${EMU}/emu:fleet member ${EMU}/emu'; do set -f; a=\${args%%:*}; want=\${args#*:}; $B compare $a >${EMU}/cmp.out 2>${EMU}/cmp.err; rc=$?; [ $rc -eq 2 ] || { echo \"exit $rc for: $a\"; exit 1; }; [ $(wc -l < ${EMU}/cmp.err) -eq 1 ] || { echo \"not one line for: $a\"; cat ${EMU}/cmp.err; exit 1; }; grep -q \"^bench compare: $want is a run on the emulated CUDA device\" ${EMU}/cmp.err || { echo \"does not name $want: $a\"; cat ${EMU}/cmp.err; exit 1; }; [ ! -s ${EMU}/cmp.out ] || { echo \"compared anyway: $a\"; exit 1; }; done; cat ${EMU}/cmp.err")
set_tests_properties(compare.refuses_emulated PROPERTIES FIXTURES_REQUIRED emulated_run
  PASS_REGULAR_EXPRESSION "no emulated figure goes into a comparison")

# bench env: aligned key: value lines and valid JSON with the fields bench run records; on a
# machine without a GPU, GPUs: none and why.
add_test(NAME env.text COMMAND $<TARGET_FILE:bench> env)
set_tests_properties(env.text PROPERTIES
  PASS_REGULAR_EXPRESSION "host: +[^\n]+\ncpu: +[^\n]+\n.*os: .*compiler: .*tandem: +[0-9.]+, commit .*GPUs: +(none \\(no CUDA device found|[0-9]+)")
add_test(NAME env.json COMMAND sh -c
  "$<TARGET_FILE:bench> env --json > ${TEST_TMP}/env.json && $<TARGET_FILE:test_stats> env ${TEST_TMP}/env.json")
add_test(NAME env.bad_argument_exits_2 COMMAND sh -c "$<TARGET_FILE:bench> env --nosuch; test $? -eq 2")
