# hostile36.cmake — issue 36 item 2: the findings of the hostile-input attack on the newest
# surfaces that are not bench check's judge. One test each, every one seconds long: a case file
# with an input width of 0 (a read past a bound's scratch under ASan), a few-hundred-byte
# attention case that asked for gigabytes or hours, a results directory named twice in a fleet,
# an llm.c token file that is a FIFO, bench train's and bench conform's arguments that were
# accepted and did nothing or the wrong thing, and a long series that gnuplot took minutes to draw.
# test_hostile36 writes the crafted case files; expect.sh RC REGEX [--not REGEX] -- CMD...
tdm_test_executable(hostile36)
set(H36 ${TEST_TMP}/hostile36)
set(H36_B $<TARGET_FILE:bench>)
set(H36_EXPECT sh ${CMAKE_CURRENT_SOURCE_DIR}/expect.sh)

add_test(NAME hostile36.craft COMMAND sh -c "mkdir -p ${H36}/cases && exec $<TARGET_FILE:test_hostile36> ${H36}/cases")
set_tests_properties(hostile36.craft PROPERTIES FIXTURES_SETUP hostile36_cases)

# 1. linear_gelu_linear with an input width of 0 (x (2,0), w1 (5,0)): the bound took the rows
#    from x's numel over its width and read the output's rows past its scratch (ASan: a
#    heap-buffer-overflow; the release build's verdict was heap garbage). Forward and backward
#    pass: y = b2, gb1 and gb2 from the two rows.
add_test(NAME hostile36.replay_lgl_zero_width COMMAND ${H36_EXPECT} 0 "2 passed, 0 failed, 0 bad input"
         -- ${H36_B} replay ${H36}/cases/lgl_zero_width.safetensors
         ${H36}/cases/lgl_zero_width_grad.safetensors)
set_tests_properties(hostile36.replay_lgl_zero_width PROPERTIES FIXTURES_REQUIRED hostile36_cases)

# 4. Attention over tensors with no data: the attention weights (batch, L, S) that no tensor of
#    the file holds are bounded by the case format (docs/CASE_FORMAT.md): refused at once, exit 2
#    (1e9 keys reached 15 GB; L = S = 200,000 ran past a minute). A small one still runs.
add_test(NAME hostile36.replay_sdpa_no_data_bounded COMMAND ${H36_EXPECT} 2
         "sdpa_no_data_huge_keys.safetensors: .*attention weights \\(1, 1, 1000000000\\).* over a case's limit"
         -- sh -c "out=$(timeout 20 ${H36_B} replay ${H36}/cases/sdpa_no_data_huge_keys.safetensors 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] || exit $rc; timeout 20 ${H36_B} replay ${H36}/cases/sdpa_no_data_long.safetensors 2>&1 | grep 'attention weights (1, 200000, 200000).* over a case' || exit 3; exit 2")
set_tests_properties(hostile36.replay_sdpa_no_data_bounded PROPERTIES FIXTURES_REQUIRED hostile36_cases
                     TIMEOUT 60)
add_test(NAME hostile36.replay_sdpa_no_data_small_runs COMMAND ${H36_EXPECT} 0 "1 passed, 0 failed"
         -- ${H36_B} replay ${H36}/cases/sdpa_no_data_small.safetensors)
set_tests_properties(hostile36.replay_sdpa_no_data_small_runs PROPERTIES FIXTURES_REQUIRED hostile36_cases)
