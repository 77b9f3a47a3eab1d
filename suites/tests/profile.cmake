# profile.cmake — the profiler (tandem/profile.h) on the cpu: table counts from the model, FLOPs,
# the Chrome trace's structure, no allocations when off (malloc counted through --wrap).
tdm_test_executable(profile)
target_sources(test_profile PRIVATE ${PROJECT_SOURCE_DIR}/harness/fileio.c)
target_link_options(test_profile PRIVATE -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc)
file(MAKE_DIRECTORY ${TEST_TMP}/profile)
add_test(NAME profile.mlp_step COMMAND test_profile ${TEST_TMP}/profile)
# The same step with one relu planted in the forward: the count check must catch it.
add_test(NAME profile.planted_extra_op_caught COMMAND test_profile --plant-extra-op ${TEST_TMP}/profile)
set_tests_properties(profile.planted_extra_op_caught PROPERTIES
  PASS_REGULAR_EXPRESSION "relu: 3 calls, expected 2")

# bench train --profile: the trace of the profiled steps parses, is nested, has the step's phases
# and ops; the top-ops table is printed.
set(PB $<TARGET_FILE:bench>)
set(PT ${TEST_TMP}/profile)
add_test(NAME profile.bench_train_trace COMMAND sh -c
  "rm -f ${PT}/train.json && ${PB} train --model mlp:20-64-32-5 --batch 16 --steps 5 --opt sgd --lr 0.1 --profile ${PT}/train.json | grep -q '^linear_backward' && exec $<TARGET_FILE:test_profile> --check-trace ${PT}/train.json step data forward backward optimizer linear relu cross_entropy linear_backward relu_backward sgd_step")
# bench run --profile writes a trace and a table per benchmark; bench report shows the tables.
add_test(NAME profile.bench_run_and_report COMMAND sh -c
  "rm -rf ${PT}/run && ${PB} run --device cpu --quick --suite ops --filter 'mlp_train|matmul' --profile --out ${PT}/run >/dev/null && for f in ${PT}/run/profiles/*.trace.json; do $<TARGET_FILE:test_profile> --check-trace $f || exit 1; done && ${PB} report --no-plots ${PT}/run >/dev/null && exec $<TARGET_FILE:test_profile> --check-report ${PT}/run")
set_tests_properties(profile.bench_run_and_report PROPERTIES TIMEOUT 120)
