# profile.cmake — the profiler (tandem/profile.h) on the cpu: table counts from the model, FLOPs,
# the Chrome trace's structure, no allocations when off (malloc counted through --wrap).
tdm_test_executable(profile)
target_link_options(test_profile PRIVATE -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc)
file(MAKE_DIRECTORY ${TEST_TMP}/profile)
add_test(NAME profile.mlp_step COMMAND test_profile ${TEST_TMP}/profile)
# The same step with one relu planted in the forward: the count check must catch it.
add_test(NAME profile.planted_extra_op_caught COMMAND test_profile --plant-extra-op ${TEST_TMP}/profile)
set_tests_properties(profile.planted_extra_op_caught PROPERTIES
  PASS_REGULAR_EXPRESSION "relu: 3 calls, expected 2")
